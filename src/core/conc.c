/* Concurrency places in the shared segment (conc.h). */
#include "sluice/conc.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/sys.h"
#include "sluice/keys.h"
#include "sluice/lease.h"
#include "sluice/matchset.h"
#include "sluice/shm.h"
#include "sluice/summary.h"

#include <stdlib.h>

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))
#define LOCK_TIMEOUT_NS (2 * SL_NS_PER_S)

static struct sl_section *live(struct sl_shm_header *h, unsigned i, uint32_t serial)
{
	struct sl_section *sec = sl_shm_section(h, i);

	return sec && sec->in_use && sec->serial == serial ? sec : NULL;
}

/* Where section i keeps the places of m's destination: its own state, or (per =
 * ...) its key's - the one m->conc_key names while it is still that key's, else
 * found, or with `create` made, and then named there.  *unit and *userial: how
 * holder entries name it.  NULL when the key cannot be had. */
static struct sl_state *places(struct sl_shm_header *h, unsigned i, struct sl_section *sec,
                               struct sl_match *m, int create, uint32_t *unit, uint32_t *userial)
{
	struct sl_keyref *ref;
	struct sl_key *k = NULL;

	if (sec->spec.per == SL_PER_NONE) {
		*unit = i;
		*userial = sec->serial;
		return &sec->state;
	}
	if (!(ref = sl_match_conc_key(m, i, create)))
		return NULL; /* more keyed concurrency sections than a match keeps */
	if (sl_spec_needs_more(&sec->spec) && !sl_shm_dims_of(h).key_more)
		return NULL; /* its keys' leases would lie past their records (admit.c) */
	if (ref->serial && (k = sl_keys_ref(h, i, ref->slot, ref->serial)))
		k->last_used_ns = SL_MAX(k->last_used_ns, sl_clock_mono_ns()); /* asked for a place */
	if (!k && create && (k = sl_keys_find(h, i, &m->src, 1, sl_clock_mono_ns()))) {
		ref->slot = sl_key_slot(h, k);
		ref->serial = k->serial;
	}
	if (!k)
		return NULL;
	*unit = SL_HOLDER_KEY | ref->slot;
	*userial = k->serial;
	return &k->state;
}

/* Whether holder entry e still names a place that exists: a live section at its
 * serial, or a live key record at its serial. */
static int holder_live(struct sl_shm_header *h, const struct sl_holder *e)
{
	if (e->section & SL_HOLDER_KEY) {
		struct sl_key *k = sl_shm_key_at(h, e->section & ~SL_HOLDER_KEY);

		return k && k->serial == e->serial && sl_key_live(h, k);
	}
	return live(h, e->section, e->serial) != NULL;
}

/* m's section at position k if it is still the one matched. */
static struct sl_section *at(struct sl_shm_header *h, const struct sl_match *m, unsigned k)
{
	return live(h, m->idx[k], m->serial[k]);
}

uint64_t sl_conc_sections(struct sl_shm_header *h, const struct sl_match *m)
{
	uint64_t mask = 0;

	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);
		struct sl_section *sec;

		/* One whose seal is broken may have places: sl_conc_take says so. */
		if (((sec = at(h, m, k)) && sec->spec.concurrency && sec->spec.mode != SL_MODE_OBSERVE) ||
		    ((sec = sl_shm_section(h, m->idx[k])) && !sl_section_sealed(sec)))
			mask |= 1ULL << k;
	}
	return mask;
}

/* --- the holder table: (process, section) -> places held, hashed ---
 *
 * Open addressing with linear probing on (owner, section), max_holders entries (a
 * power of two, as this process viewed it at attach); an entry is free when its
 * owner is 0.  Entries are removed with a
 * backward shift (the ones after it in its run move up), so a probe ends at the
 * first free entry and no tombstones pile up.  Every walk is bounded by the table's
 * size: a scribbled table full of garbage is a full table, never a loop.  All of it
 * under the segment lock. */

static unsigned home(int32_t owner, unsigned section, uint32_t mask)
{
	uint32_t x = (uint32_t)owner * 0x9e3779b1u ^ (section + 1) * 0x85ebca6bu;

	x ^= x >> 15;
	return x & mask;
}

/* The entry of (self, section i, serial) in t (n entries); with `create`, a free
 * one becomes it.  NULL when there is none (or, creating, the table is full). */
static struct sl_holder *holder_in(struct sl_holder *t, uint32_t n, int32_t self, unsigned i,
                                   uint32_t serial, int create)
{
	unsigned k = home(self, i, n - 1);

	for (unsigned j = 0; j < n; j++, k = (k + 1) & (n - 1)) {
		if (t[k].owner == self && t[k].section == i && t[k].serial == serial)
			return &t[k];
		if (t[k].owner == 0) {
			if (!create)
				return NULL;
			t[k] = (struct sl_holder){.owner = self, .section = i, .serial = serial, .count = 0};
			return &t[k];
		}
	}
	return NULL;
}

static struct sl_holder *holder(struct sl_shm_header *h, int32_t self, unsigned i, uint32_t serial,
                                int create)
{
	uint32_t n = sl_shm_nholders(h);

	return n ? holder_in(sl_shm_holders(h), n, self, i, serial, create) : NULL;
}

/* Free entry e and close the gap behind it: later entries of the run whose home
 * does not lie after the gap move into it. */
static void holder_remove(struct sl_shm_header *h, struct sl_holder *e)
{
	struct sl_holder *t = sl_shm_holders(h);
	uint32_t n = sl_shm_nholders(h), mask = n - 1;
	unsigned gap = (unsigned)(e - t), k = gap;

	for (unsigned j = 0; j < n; j++) {
		unsigned want;

		k = (k + 1) & mask;
		if (t[k].owner == 0)
			break;
		want = home(t[k].owner, t[k].section, mask);
		/* t[k] may fill the gap unless its home lies cyclically in (gap, k]. */
		if (((k - want) & mask) >= ((k - gap) & mask)) {
			t[gap] = t[k];
			gap = k;
		}
	}
	t[gap] = (struct sl_holder){0};
}

void sl_conc_wake(struct sl_state *st)
{
	atomic_fetch_add_explicit(A(&st->conc_futex), 1, memory_order_release);
	if (atomic_load_explicit(A(&st->conc_waiters), memory_order_acquire))
		sl_sys(SYS_futex, &st->conc_futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int sl_conc_take(struct sl_shm_header *h, struct sl_match *m, int32_t self, uint64_t *taken,
                 int *full, uint32_t *seen)
{
	uint64_t want;
	int rc;

	*taken = 0;
	want = sl_conc_sections(h, m); /* with any section whose seal is broken */
	if (!want && !m->overflow)
		return 0;
	if ((rc = sl_shm_lock(h, self, LOCK_TIMEOUT_NS)) < 0)
		return rc; /* -EXDEV first: a moved segment's successor decides */
	if (!sl_match_sealed(h, m)) {
		sl_shm_unlock(h, self);
		return -EBADMSG; /* scribbled: no place is counted on it (summary.h) */
	}
	if (m->overflow) {
		/* More sections apply than a match holds: no place, ever (refused as a
		 * full key table is). */
		*full = m->mask ? (int)m->idx[0] : 0;
		rc = -EDQUOT;
		goto out;
	}
	rc = 0; /* taken over from a dead holder (1) or not, the lock is ours */
	/* All or nothing: first see that every section has room, then that the table
	 * has an entry for each (made with count 0, and removed again if one cannot
	 * be had), and only then take the places. */
	uint64_t made = 0;

	for (uint64_t bits = want; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec;
		struct sl_state *st;
		uint32_t unit, userial;

		if (!(sec = at(h, m, k)))
			continue;
		if (!(st = places(h, i, sec, m, 1, &unit, &userial))) {
			/* A keyed section with no room for this destination's key: refused
			 * as the section says (counted in key_full), never let through. */
			*full = (int)i;
			rc = -EDQUOT;
			goto out;
		}
		if (st->conc_open >= sl_limit_places(&sec->spec, st, sl_limit_fleet(&sec->spec) ? sl_clock_mono_ns() : 0)) {
			*full = (int)i;
			*seen = atomic_load_explicit(A(&st->conc_futex), memory_order_acquire);
			/* A fleet's places all in use here: the daemon's sign that this
			 * machine wants more than it holds, also from a caller that waits
			 * outside sl_conc_wait (a deferred connect, stepped by the kicker),
			 * which conc_waiters never counts.  Only where the section has no
			 * rate: the count is the rate's sign too, and a caller waiting for
			 * a place is no sign that the rate's share binds. */
			if (sl_limit_fleet(&sec->spec) && !sec->spec.amount)
				sl_state_more(st)->lease.misses++;
			rc = -EBUSY;
			goto out;
		}
	}
	for (uint64_t bits = want; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec;
		uint32_t unit, userial;

		if (!(sec = at(h, m, k)) || !places(h, i, sec, m, 0, &unit, &userial))
			continue;
		if (!holder(h, self, unit, userial, 0)) {
			if (!holder(h, self, unit, userial, 1)) {
				/* Full: undo the entries made for this take (they hold nothing;
				 * removing one may move the others, so find each again). */
				for (uint64_t undo = made; undo; undo &= undo - 1) {
					unsigned j = m->idx[__builtin_ctzll(undo)];
					struct sl_holder *e;
					uint32_t u, us;

					if (places(h, j, sl_shm_section(h, j), m, 0, &u, &us) &&
					    (e = holder(h, self, u, us, 0)) && !e->count)
						holder_remove(h, e);
				}
				rc = -ENOSPC;
				goto out;
			}
			made |= 1ULL << k;
		}
	}
	for (uint64_t bits = want; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec;
		struct sl_state *st;
		struct sl_holder *e;
		uint32_t unit, userial;

		/* Each has its entry now (entries do not move while they are only added). */
		if (!(sec = at(h, m, k)) ||
		    !(st = places(h, i, sec, m, 0, &unit, &userial)) || !(e = holder(h, self, unit, userial, 0)))
			continue;
		st->conc_open++;
		e->count++;
		*taken |= 1ULL << k;
		if (!sec->spec.amount) { /* a rate counts its own admissions at release */
			atomic_fetch_add_explicit(A(&sec->state.admitted), 1, memory_order_relaxed);
			if (st != &sec->state)
				atomic_fetch_add_explicit(A(&st->admitted), 1, memory_order_relaxed);
		}
	}
out:
	sl_shm_unlock(h, self);
	return rc;
}

/* Whether the sections at the positions in mask are as sluiced sealed them. */
static int mask_sealed(struct sl_shm_header *h, uint64_t mask, const struct sl_match *m)
{
	for (uint64_t bits = mask; bits; bits &= bits - 1) {
		const struct sl_section *sec = sl_shm_section(h, m->idx[__builtin_ctzll(bits)]);

		if (sec && !sl_section_sealed(sec))
			return 0;
	}
	return 1;
}

int sl_conc_put(struct sl_shm_header *h, uint64_t mask, struct sl_match *m, int32_t self)
{
	int rc;

	if (!mask)
		return 0;
	if ((rc = sl_shm_lock(h, self, LOCK_TIMEOUT_NS)) < 0)
		return rc;
	/* A section scribbled on may read as removed or reset (in_use, serial): the
	 * place would be dropped here and its holder entry kept, held for good. */
	if (!mask_sealed(h, mask, m)) {
		sl_shm_unlock(h, self);
		return -EBADMSG;
	}
	/* The positions in mask, whatever m->mask says now: a released connection's
	 * match keeps its sections (idx, serial) with its mask cleared. */
	for (uint64_t bits = mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec;
		struct sl_state *st;
		struct sl_holder *e;
		uint32_t unit, userial;

		/* A section (or key) reset or removed by a reload meanwhile holds nothing
		 * of ours.  A key holding a place is never evicted, so conc_key still
		 * names the one the place was taken in. */
		if (!(sec = at(h, m, k)) ||
		    !(st = places(h, i, sec, m, 0, &unit, &userial)))
			continue;
		/* The holder entry first: killed between the two, this process leaves a
		 * place counted open that no entry accounts for, which the heartbeat's
		 * recount gives back - never one counted free twice. */
		if ((e = holder(h, self, unit, userial, 0)) && e->count && --e->count == 0)
			holder_remove(h, e);
		if (st->conc_open)
			st->conc_open--;
		sl_conc_wake(st);
	}
	sl_shm_unlock(h, self);
	return 0;
}

uint32_t sl_conc_seen(struct sl_shm_header *h, const struct sl_match *m, unsigned idx)
{
	struct sl_section *sec = sl_shm_section(h, idx);
	struct sl_key *k;

	if (!sec)
		return 0;
	if (sec->spec.per == SL_PER_NONE)
		return atomic_load_explicit(A(&sec->state.conc_futex), memory_order_acquire);
	const struct sl_keyref *ref = sl_match_conc_key((struct sl_match *)m, idx, 0);

	k = ref && ref->serial ? sl_shm_key_at(h, ref->slot) : NULL;
	return k ? atomic_load_explicit(A(&k->state.conc_futex), memory_order_acquire) : 0;
}

void sl_conc_wait(struct sl_shm_header *h, struct sl_match *m, unsigned idx, uint32_t seen,
                  int64_t timeout_ns)
{
	struct sl_section *sec = sl_shm_section(h, idx);
	struct sl_state *st = sec ? &sec->state : NULL;
	struct timespec ts;

	if (!sec || timeout_ns <= 0)
		return;
	if (sec->spec.per != SL_PER_NONE) {
		/* Read without the lock: a record reused meanwhile only makes this
		 * sleep end at its timeout, and the caller takes again. */
		const struct sl_keyref *ref = sl_match_conc_key(m, idx, 0);
		struct sl_key *k = ref && ref->serial ? sl_shm_key_at(h, ref->slot) : NULL;

		if (!k) {
			/* No key to sleep on (none could be made, or the lock was not
			 * had): a short plain sleep, so the caller's retries never spin. */
			struct timespec slice = {0, (long)SL_MIN(timeout_ns, 10 * SL_NS_PER_MS)};

			nanosleep(&slice, NULL);
			return;
		}
		st = &k->state;
	}
	ts.tv_sec = timeout_ns / SL_NS_PER_S;
	ts.tv_nsec = timeout_ns % SL_NS_PER_S;
	atomic_fetch_add_explicit(A(&st->conc_waiters), 1, memory_order_acq_rel);
	/* Shared (not private) futex: the word is in memory every process maps. */
	sl_sys(SYS_futex, &st->conc_futex, FUTEX_WAIT, seen, &ts, NULL, 0);
	/* Never below zero: the heartbeat may have cleared a count it took for a dead
	 * waiter's (pick_open). */
	for (uint32_t n = atomic_load_explicit(A(&st->conc_waiters), memory_order_relaxed);
	     n && !atomic_compare_exchange_weak_explicit(A(&st->conc_waiters), &n, n - 1,
	                                                 memory_order_acq_rel, memory_order_relaxed);)
		;
}

/* Keys with places counted open, picked without the lock (a whole key table is
 * never walked under it), to be recounted under it. */
#define KEY_BATCH 1024

struct open_keys {
	unsigned n;
	uint32_t slot[KEY_BATCH], serial[KEY_BATCH];
};

static int pick_open(struct sl_key *k, uint32_t slot, void *arg)
{
	struct open_keys *o = arg;

	if (atomic_load_explicit(A(&k->state.conc_open), memory_order_relaxed) ||
	    atomic_load_explicit(A(&k->state.conc_waiters), memory_order_relaxed)) {
		o->slot[o->n] = slot;
		o->serial[o->n] = k->serial;
		o->n++;
	}
	return o->n == KEY_BATCH;
}

/* Sections that keep their places themselves (unkeyed, with a concurrency limit),
 * picked without the lock: the daemon's, one heartbeat at a time. */
static struct {
	uint32_t *idx;
	uint32_t n, cap;
} limited;

static void pick_limited(uint32_t i)
{
	if (limited.n == limited.cap) {
		uint32_t cap = limited.cap ? limited.cap * 2 : 64;
		uint32_t *p = realloc(limited.idx, (size_t)cap * sizeof(*p));

		if (!p)
			return; /* recounted at a later beat, when there is memory */
		limited.idx = p;
		limited.cap = cap;
	}
	limited.idx[limited.n++] = i;
}

int sl_conc_reap_dead(struct sl_shm_header *h, int32_t self, sl_gone_fn is_dead)
{
	static struct open_keys open; /* daemon only: one heartbeat at a time */
	struct sl_holder *t = sl_shm_holders(h);
	uint32_t nh = sl_shm_nholders(h);
	uint32_t ns = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	int returned = 0, any = 0;

	if (!t)
		return 0;
	/* Most segments hold no place at all: look without the lock first, so the
	 * heartbeat does not take the lock every shim contends for. */
	for (unsigned k = 0; k < nh && !any; k++)
		any = atomic_load_explicit(A(&t[k].owner), memory_order_relaxed) > 0;
	limited.n = 0;
	for (uint32_t i = 0; i < ns; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!sec->in_use || !sec->spec.concurrency || sec->spec.per != SL_PER_NONE)
			continue;
		pick_limited(i);
		any |= atomic_load_explicit(A(&sec->state.conc_open), memory_order_relaxed) > 0;
	}
	open.n = 0;
	sl_keys_each(h, pick_open, &open);
	if ((!any && !open.n) || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return 0;
	for (unsigned k = 0, removed = 0; k < nh && removed < nh;) {
		/* A removal shifts later entries back into k: look at k again then.  (One
		 * shifted past the table's end, from its start, waits for the next beat.) */
		if (t[k].owner != 0 && (t[k].owner < 0 || !holder_live(h, &t[k]) || is_dead(h, t[k].owner))) {
			/* Dead, its section or key gone, or a scribble: its places go with it. */
			if (t[k].owner > 0)
				returned += (int)SL_MIN(t[k].count, (uint32_t)INT_MAX / 2);
			holder_remove(h, &t[k]);
			removed++;
			continue;
		}
		k++;
	}
	/* The holder table is the record of who holds what: each section's (and each
	 * key's) count of open places is recounted from it.  So a holder killed -9
	 * between the two updates of a take or a give-back (the lock is taken over
	 * from it) leaves the count right by the next beat, never one place too many.
	 * The recount is gathered in each state's conc_recount: first zeroed for every
	 * section picked, every key an entry names and every key that counts places
	 * open. */
	for (uint32_t j = 0; j < limited.n; j++)
		sl_shm_section(h, limited.idx[j])->state.conc_recount = 0;
	for (unsigned j = 0; j < open.n; j++) {
		struct sl_key *key = sl_shm_key_at(h, open.slot[j]);

		if (key && key->serial == open.serial[j])
			key->state.conc_recount = 0;
	}
	for (unsigned k = 0; k < nh; k++)
		if (t[k].owner > 0 && (t[k].section & SL_HOLDER_KEY) && holder_live(h, &t[k]))
			sl_shm_key_at(h, t[k].section & ~SL_HOLDER_KEY)->state.conc_recount = 0;
	for (unsigned k = 0; k < nh; k++) {
		struct sl_state *st = NULL;

		if (t[k].owner <= 0 || !holder_live(h, &t[k]))
			continue;
		if (t[k].section & SL_HOLDER_KEY)
			st = &sl_shm_key_at(h, t[k].section & ~SL_HOLDER_KEY)->state;
		else
			st = &sl_shm_section(h, t[k].section)->state;
		st->conc_recount = (uint32_t)SL_MIN((uint64_t)st->conc_recount + t[k].count, (uint64_t)UINT32_MAX);
	}
	for (uint32_t j = 0; j < limited.n; j++) {
		struct sl_section *sec = sl_shm_section(h, limited.idx[j]);

		/* Looked at again under the lock: a reload may have changed it since. */
		if (!sec->in_use || !sec->spec.concurrency || sec->spec.per != SL_PER_NONE)
			continue;
		if (sec->state.conc_recount != sec->state.conc_open) {
			sec->state.conc_open = sec->state.conc_recount;
			sl_conc_wake(&sec->state);
		}
	}
	int64_t now = sl_clock_mono_ns();

	for (unsigned j = 0; j < open.n; j++) {
		struct sl_key *key = sl_shm_key_at(h, open.slot[j]);

		if (!key || key->serial != open.serial[j] || !sl_key_live(h, key))
			continue;
		if (key->state.conc_recount != key->state.conc_open) {
			key->state.conc_open = key->state.conc_recount;
			sl_conc_wake(&key->state);
		}
		/* Waiters counted on a key with no place taken and nobody asking for one
		 * for seconds (a live waiter asks again at least every second) were
		 * killed in their sleep: they would keep the key from ever being idle. */
		if (!key->state.conc_open && key->state.conc_waiters &&
		    key->last_used_ns < now - 3 * SL_NS_PER_S) /* (a scribbled stamp cannot overflow it) */
			atomic_store_explicit(A(&key->state.conc_waiters), 0, memory_order_relaxed);
	}
	sl_shm_unlock(h, self);
	return returned;
}

/* Re-place every holder entry of `from` in `to` (a new segment, its sections
 * carried at their indices): the hash depends on the table's size. */
void sl_conc_carry(struct sl_shm_header *to, struct sl_shm_header *from)
{
	struct sl_holder *f = sl_shm_holders(from), *t = sl_shm_holders(to);
	uint32_t nf = sl_shm_nholders(from), nt = sl_shm_nholders(to);

	for (uint32_t k = 0; f && t && k < nf; k++) {
		struct sl_holder *e;

		if (f[k].owner <= 0 || !(e = holder_in(t, nt, f[k].owner, f[k].section, f[k].serial, 1)))
			continue; /* free, a scribble, or no room: the recount frees its places */
		e->count = f[k].count;
	}
}

