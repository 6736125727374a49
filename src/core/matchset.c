/*
 * matchset.c - which sections apply to a destination (matchset.h): a lock-free read
 * of the match index under the spec seqlock, positions in section order, and the
 * set operations the shim's records and the admission stepper use.
 */
#include "sluice/matchset.h"
#include "sluice/common.h"
#include "sluice/critical.h"
#include "sluice/index.h"
#include "sluice/lock.h"
#include "sluice/shm.h"
#include "sluice/summary.h"

#include <stdatomic.h>
#include <string.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))
#define LOCK_TIMEOUT_NS (2 * SL_NS_PER_S)
#define MATCH_TRIES 64

int sl_match_find(const struct sl_match *m, uint32_t i)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);

		if (m->idx[k] == i)
			return (int)k;
	}
	return -1;
}

int sl_match_meets(const struct sl_match *a, const struct sl_match *b)
{
	for (uint64_t bits = b->mask; bits; bits &= bits - 1)
		if (sl_match_find(a, b->idx[__builtin_ctzll(bits)]) >= 0)
			return 1;
	return 0;
}

int sl_match_same(const struct sl_match *a, const struct sl_match *b)
{
	if (a->mask != b->mask)
		return 0;
	for (uint64_t bits = a->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);

		if (a->idx[k] != b->idx[k])
			return 0;
	}
	return 1;
}

void sl_match_union(struct sl_match *out, const struct sl_match *a, const struct sl_match *b)
{
	if (out != a)
		*out = *a;
	out->overflow |= b->overflow;
	/* b came later and knows more (a name found in the first write): keys are made
	 * of its destination from now on.  Places a's keys hold stay where they are
	 * (conc_key). */
	if (b->keyed & b->mask)
		out->src = b->src;
	for (uint64_t bits = b->mask; bits; bits &= bits - 1) {
		unsigned j = (unsigned)__builtin_ctzll(bits), k;
		const struct sl_keyref *ref;

		if (sl_match_find(out, b->idx[j]) >= 0)
			continue;
		if (out->mask == UINT64_MAX) {
			out->overflow = 1; /* refused by whoever reserves with it */
			break;
		}
		k = (unsigned)__builtin_ctzll(~out->mask);
		out->mask |= 1ULL << k;
		out->idx[k] = b->idx[j];
		out->serial[k] = b->serial[j];
		if (b->keyed & (1ULL << j))
			out->keyed |= 1ULL << k;
		else
			out->keyed &= ~(1ULL << k);
		if ((ref = sl_match_conc_key((struct sl_match *)b, b->idx[j], 0)) && ref->serial) {
			struct sl_keyref *to = sl_match_conc_key(out, b->idx[j], 1);

			if (to)
				*to = *ref;
		}
	}
}

struct sl_keyref *sl_match_conc_key(struct sl_match *m, unsigned i, int make)
{
	struct sl_conc_key *free = NULL;

	for (unsigned j = 0; j < SL_CONC_KEYS; j++) {
		if (m->conc_key[j].section == i + 1)
			return &m->conc_key[j].ref;
		if (!m->conc_key[j].section && !free)
			free = &m->conc_key[j];
	}
	if (!make || !free)
		return NULL;
	free->section = i + 1;
	free->ref = (struct sl_keyref){0, 0};
	return &free->ref;
}

/* What one pass of the matcher gathers. */
struct gather {
	struct sl_shm_header *h;
	const struct sl_dest *d;
	struct sl_match *m;
	unsigned count;
};

/* A pattern the index proposes: its section applies when the pattern really takes
 * the destination (the index only knows keys) and the section meters what is asked
 * for.  Positions fill in the order found; more than SL_MATCH_MAX is an overflow. */
static int gather_pattern(uint32_t pattern, void *arg)
{
	struct gather *g = arg;
	const struct sl_pattern *p = sl_shm_pattern(g->h, pattern);
	struct sl_section *sec;
	uint32_t i;

	if (!p || !sl_pattern_match(p, g->d))
		return 0;
	i = p->section;
	if (!(sec = sl_shm_section(g->h, i)) || sl_match_find(g->m, i) >= 0)
		return 0;
	/* Unused, or of another meter: passed over only when its seal says so - a
	 * scribbled in_use or meter is taken, and the reservation finds the seal
	 * broken and decides nothing (summary.h). */
	if ((!sec->in_use || sec->spec.meter != g->d->meter) && sl_section_sealed(sec))
		return 0;
	if (g->count == SL_MATCH_MAX) {
		g->m->overflow = 1;
		return 1;
	}
	g->m->mask |= 1ULL << g->count;
	g->m->idx[g->count] = i;
	g->m->serial[g->count] = sec->serial;
	if (sec->spec.per != SL_PER_NONE)
		g->m->keyed |= 1ULL << g->count;
	g->count++;
	return 0;
}

/* Positions in the order of the sections' indices (so two matches of the same
 * sections agree, and debug lines list sections in the config's slot order). */
static void sort_positions(struct sl_match *m, unsigned n)
{
	for (unsigned a = 1; a < n; a++)
		for (unsigned b = a; b > 0 && m->idx[b - 1] > m->idx[b]; b--) {
			uint32_t idx = m->idx[b], serial = m->serial[b];
			uint64_t lo = (m->keyed >> (b - 1)) & 1, hi = (m->keyed >> b) & 1;

			m->idx[b] = m->idx[b - 1];
			m->serial[b] = m->serial[b - 1];
			m->idx[b - 1] = idx;
			m->serial[b - 1] = serial;
			m->keyed = (m->keyed & ~(3ULL << (b - 1))) | lo << b | hi << (b - 1);
		}
}

/* Overrides (docs/config.md, "Overrides"): an override section applies only where
 * its base does, and there in place of it - the first of a base's overrides that
 * takes the destination, in slot order.  The rest of the positions close up, in
 * order.  Returns the positions left. */
static unsigned apply_overrides(struct sl_shm_header *h, struct sl_match *m, unsigned n)
{
	uint64_t drop = 0;
	unsigned out = 0;

	for (unsigned k = 0; k < n; k++) {
		const struct sl_section *sec = sl_shm_section(h, m->idx[k]);
		uint32_t of = sec ? sec->spec.override_of : 0;
		int b;

		if (!of)
			continue;
		b = sl_match_find(m, of - 1);
		if (b < 0 || (drop >> b) & 1)
			drop |= 1ULL << k; /* not where its base applies, or another override came first */
		else
			drop |= 1ULL << b;
	}
	if (!drop)
		return n;
	for (unsigned k = 0; k < n; k++) {
		uint64_t keyed = (m->keyed >> k) & 1;

		if ((drop >> k) & 1)
			continue;
		m->idx[out] = m->idx[k];
		m->serial[out] = m->serial[k];
		m->keyed = (m->keyed & ~(1ULL << out)) | keyed << out;
		out++;
	}
	m->mask = out == 64 ? UINT64_MAX : (1ULL << out) - 1;
	m->keyed &= m->mask;
	return out;
}

/* One pass: the sections whose patterns take `d`, found through the index. */
static int match_pass(struct sl_shm_header *h, const struct sl_dest *d, struct sl_match *m)
{
	struct gather g = {h, d, m, 0};

	m->mask = 0;
	m->keyed = 0;
	m->overflow = 0;
	memset(m->conc_key, 0, sizeof(m->conc_key));
	sl_index_lookup(h, d, gather_pattern, &g);
	sort_positions(m, g.count);
	g.count = apply_overrides(h, m, g.count);
	if (m->keyed)
		sl_keysrc_from_dest(&m->src, d);
	return (int)g.count;
}

int sl_match_sections(struct sl_shm_header *h, const struct sl_dest *d, struct sl_match *m, int32_t self)
{
	int count;

	for (int attempt = 0; attempt < MATCH_TRIES; attempt++) {
		uint32_t seq = atomic_load_explicit(A(&h->spec_seq), memory_order_acquire);

		if (seq & 1) {
			sl_cpu_relax();
			continue;
		}
		count = match_pass(h, d, m);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(A(&h->spec_seq), memory_order_relaxed) == seq)
			return count;
	}
	/* The specs are being rewritten (a reload or a daemon start, perhaps preempted
	 * half way, or killed there).  "Cannot read" must not become "matches nothing",
	 * which would let the call go unshaped: the writer holds the segment lock for
	 * the whole rewrite, so under the lock they are whole.  With no lock within its
	 * bound either, read them as they are - a torn spec is no worse than a scribbled
	 * one - and the reservation that follows, which needs the lock too, hands the
	 * call to the fallback policy. */
	{
		struct sl_critical c;
		int locked;

		/* A critical section, as around every hold of the lock (critical.h): a
		 * handler that longjmps must not leave it taken. */
		sl_critical_enter(&c);
		locked = sl_shm_lock(h, self, LOCK_TIMEOUT_NS) >= 0;
		count = match_pass(h, d, m);
		if (locked)
			sl_shm_unlock(h, self);
		sl_critical_leave(&c);
	}
	return count;
}

int sl_match_sealed(struct sl_shm_header *h, const struct sl_match *m)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		const struct sl_section *sec = sl_shm_section(h, m->idx[__builtin_ctzll(bits)]);

		if (sec && !sl_section_sealed(sec))
			return 0;
	}
	return 1;
}

int sl_match_needs_daemon(struct sl_shm_header *h, const struct sl_match *m)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		struct sl_section *sec = sl_shm_section(h, m->idx[__builtin_ctzll(bits)]);

		if (sec && sl_spec_needs_daemon(&sec->spec))
			return 1;
	}
	return 0;
}
