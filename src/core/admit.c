#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/limiter.h"
#include "sluice/shm.h"
#include "sluice/stats.h"
#include "sluice/strategy.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))
#define LOCK_TIMEOUT_NS (2 * SL_NS_PER_S)
#define MATCH_TRIES 64

/* Match against one section's spec, which a reload may be rewriting: every length is
 * clamped, so a torn read yields a wrong answer (discarded by the seqlock check), never
 * an out-of-bounds access. */
static int spec_matches(const struct sl_spec *s, const struct sl_dest *d)
{
	uint32_t n = SL_MIN(s->npatterns, SL_MAX_PATTERNS);

	if (s->meter != d->meter)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (sl_pattern_match(&s->patterns[i], d))
			return 1;
	return 0;
}

void sl_match_union(struct sl_match *out, const struct sl_match *a, const struct sl_match *b)
{
	uint64_t extra = b->mask & ~a->mask;

	if (out != a)
		*out = *a;
	out->mask |= extra;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++)
		if (extra & (1ULL << i))
			out->serial[i] = b->serial[i];
}

/* One pass over the in-use slots: the sections whose patterns take `d`. */
static int match_pass(struct sl_shm_header *h, const struct sl_dest *d, struct sl_match *m)
{
	unsigned used = SL_MIN(h->slots_used, (unsigned)SL_MAX_SECTIONS);
	int count = 0;

	m->mask = 0;
	for (unsigned i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!sec->in_use || !spec_matches(&sec->spec, d))
			continue;
		m->mask |= 1ULL << i;
		m->serial[i] = sec->serial;
		count++;
	}
	return count;
}

int sl_admit_match(struct sl_shm_header *h, const struct sl_dest *d, struct sl_match *m, int32_t self)
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
		sigset_t all, old;
		int locked;

		/* Signals blocked while the lock is held, as around every critical
		 * section (wait.c): a handler that longjmps must not leave it taken. */
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		locked = sl_shm_lock(h, self, LOCK_TIMEOUT_NS) >= 0;
		count = match_pass(h, d, m);
		if (locked)
			sl_shm_unlock(h, self);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return count;
}

/* The section at index i if it is still the one the caller matched. */
static struct sl_section *live_section(struct sl_shm_header *h, unsigned i, uint32_t serial)
{
	struct sl_section *sec = sl_shm_section(h, i);

	return sec && sec->in_use && sec->serial == serial ? sec : NULL;
}

/* The segment's view of UTC: fixed windows align to it. */
static int64_t wall_off(const struct sl_shm_header *h)
{
	return sl_sane_ns(h->wall_off_ns);
}

/* What a request costs in a section: its bytes for meter = bytes, else 1. */
static uint64_t cost_in(const struct sl_section *sec, const struct sl_ticket *t)
{
	return sec->spec.meter == SL_METER_BYTES ? t->cost : 1;
}

/* charge = 0: only tell whether a reservation now would be refused (no state
 * changes but the refusal counter). */
static int reserve(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                   int32_t self, struct sl_ticket *t, int charge, uint64_t bytes)
{
	int64_t release = now, max_wait = -1;
	int limiting = -1, live = 0;
	int rc = sl_shm_lock(h, self, LOCK_TIMEOUT_NS);

	if (rc < 0)
		return rc;
	t->mask = 0;
	t->arrival_ns = now;
	t->cost = bytes ? bytes : 1;
	t->refuse_errno = 0;
	t->refusing_section = -1;
	/* Pass 1: the latest slot over enforcing sections, the tightest max_wait. */
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;
		int64_t slot;

		if (!(m->mask & (1ULL << i)) || !(sec = live_section(h, i, m->serial[i])))
			continue;
		live++;
		if (sec->spec.amount == 0)
			continue;
		sl_strategy_repair(&sec->spec, &sec->state, now, wall_off(h)); /* never sleep on a scribble */
		slot = sl_strategy_slot(&sec->spec, &sec->state, now, cost_in(sec, t), wall_off(h));
		if (sec->spec.mode == SL_MODE_OBSERVE) {
			struct sl_undo ignored;

			if (!charge)
				continue;
			/* Model what enforcing would do, without holding anyone. */
			if (slot > now)
				atomic_fetch_add_explicit(A(&sec->state.observed), 1, memory_order_relaxed);
			if (sec->spec.max_wait_ns >= 0 && slot - now > sec->spec.max_wait_ns)
				atomic_fetch_add_explicit(A(&sec->state.refused), 1, memory_order_relaxed);
			else
				sl_strategy_charge(&sec->spec, &sec->state, slot, cost_in(sec, t), wall_off(h), &ignored);
			atomic_fetch_add_explicit(A(&sec->state.admitted), 1, memory_order_relaxed);
			continue;
		}
		t->mask |= 1ULL << i;
		t->sec[i].serial = m->serial[i];
		if (slot > release || limiting < 0) {
			release = SL_MAX(release, slot);
			limiting = (int)i;
		}
		if (sec->spec.max_wait_ns >= 0 && (max_wait < 0 || sec->spec.max_wait_ns < max_wait))
			max_wait = sec->spec.max_wait_ns;
	}
	if (live == 0) {
		rc = -ESTALE;
		goto out;
	}
	if (max_wait >= 0 && release - now > max_wait) {
		struct sl_section *sec = sl_shm_section(h, (unsigned)limiting);

		t->refusing_section = limiting;
		t->refuse_errno = sec->spec.refuse;
		for (unsigned i = 0; i < SL_MAX_SECTIONS; i++)
			if (t->mask & (1ULL << i))
				atomic_fetch_add_explicit(A(&sl_shm_section(h, i)->state.refused), 1,
				                          memory_order_relaxed);
		t->mask = 0;
		rc = -ECONNREFUSED;
		goto out;
	}
	if (!charge) {
		t->mask = 0;
		goto out;
	}
	/* Pass 2: charge every enforcing section at the common release time. */
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if (!(t->mask & (1ULL << i)))
			continue;
		sec = sl_shm_section(h, i);
		sl_strategy_charge(&sec->spec, &sec->state, release, cost_in(sec, t), wall_off(h), &t->sec[i].undo);
		t->sec[i].seq = ++sec->state.seq;
		sec->state.last_pid = self;
		sec->state.last_seq = t->sec[i].seq;
		sec->state.last_undo = t->sec[i].undo;
		sec->state.last_slot = release;
	}
	t->release_ns = release;
	t->held = release > now;
out:
	sl_shm_unlock(h, self);
	return rc;
}

int sl_admit_reserve(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                     int32_t self, struct sl_ticket *t)
{
	return reserve(h, m, now, self, t, 1, 0);
}

int sl_admit_reserve_bytes(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                           int32_t self, struct sl_ticket *t, uint64_t bytes)
{
	return reserve(h, m, now, self, t, 1, bytes);
}

int sl_admit_check(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                   int32_t self, struct sl_ticket *t)
{
	return reserve(h, m, now, self, t, 0, 0);
}

int sl_admit_release(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self,
                     int64_t *retry_ns)
{
	return sl_admit_release_act(h, t, now, self, retry_ns, NULL, NULL);
}

int sl_admit_release_act(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self,
                         int64_t *retry_ns, void (*act)(void *), void *arg)
{
	int64_t wait, later;
	int rc = sl_shm_lock(h, self, LOCK_TIMEOUT_NS);

	if (rc < 0)
		return rc; /* cannot check: the caller's fallback decides, never "go" */
	if (now == SL_ADMIT_NOW)
		now = sl_clock_mono_ns();
	later = now;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if (!(t->mask & (1ULL << i)) || !(sec = live_section(h, i, t->sec[i].serial)))
			continue;
		sl_strategy_repair(&sec->spec, &sec->state, now, wall_off(h));
		later = SL_MAX(later, sl_strategy_release_at(&sec->spec, &sec->state, now, cost_in(sec, t), wall_off(h)));
	}
	if (later > now) {
		sl_shm_unlock(h, self);
		t->held = 1;
		*retry_ns = later;
		return 1;
	}
	/* Charged first, then made: a process killed inside the call below (under
	 * overload it may sit there, preempted, for milliseconds) leaves its release
	 * counted, not an uncounted SYN that the next holder of the lock would follow
	 * at once. */
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if (!(t->mask & (1ULL << i)) || !(sec = live_section(h, i, t->sec[i].serial)))
			continue;
		sl_strategy_released(&sec->spec, &sec->state, now, cost_in(sec, t), wall_off(h));
	}
	/* The released call itself, before anyone else may be released: the release
	 * is then moved on to the moment it was made, not left at a check the caller
	 * could be preempted after (docs/design.md, "Where the bound is kept"). */
	if (act) {
		int64_t made;

		act(arg);
		made = sl_clock_mono_ns();
		for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
			struct sl_section *sec;

			if (!(t->mask & (1ULL << i)) || !(sec = live_section(h, i, t->sec[i].serial)))
				continue;
			sl_strategy_moved(&sec->spec, &sec->state, now, made, cost_in(sec, t), wall_off(h));
		}
		now = made;
	}
	wait = now - t->arrival_ns;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if (!(t->mask & (1ULL << i)) || !(sec = live_section(h, i, t->sec[i].serial)))
			continue;
		sl_stats_record_wait(&sec->state, wait, t->held, cost_in(sec, t));
	}
	t->released_ns = now;
	sl_shm_unlock(h, self);
	return 0;
}

void sl_admit_moved(struct sl_shm_header *h, const struct sl_match *m, int64_t from, int64_t to,
                    int32_t self)
{
	if (to <= from || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if (!(m->mask & (1ULL << i)) || !(sec = live_section(h, i, m->serial[i])) ||
		    sec->spec.mode == SL_MODE_OBSERVE)
			continue;
		sl_strategy_moved(&sec->spec, &sec->state, from, to, 1, wall_off(h));
	}
	sl_shm_unlock(h, self);
}

void sl_admit_refund(struct sl_shm_header *h, const struct sl_ticket *t, int32_t self)
{
	if (sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if (!(t->mask & (1ULL << i)) || !(sec = live_section(h, i, t->sec[i].serial)))
			continue;
		/* Only the last slot handed out can be returned: later callers hold theirs. */
		if (sec->state.seq == t->sec[i].seq) {
			sl_strategy_undo(&sec->spec, &sec->state, &t->sec[i].undo);
			sec->state.seq--;
			sec->state.last_pid = 0;
		}
		atomic_fetch_add_explicit(A(&sec->state.given_up), 1, memory_order_relaxed);
	}
	sl_shm_unlock(h, self);
}

int sl_admit_reap_dead(struct sl_shm_header *h, int64_t now, int32_t self,
                       int (*is_dead)(int32_t pid))
{
	int returned = 0;

	if (sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return 0;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec = sl_shm_section(h, i);
		struct sl_state *st = &sec->state;

		if (st->last_pid <= 0 || !sec->in_use)
			continue;
		if (st->seq != st->last_seq || st->last_slot <= now) {
			st->last_pid = 0; /* no longer the last, or already due: nothing to return */
			continue;
		}
		if (!is_dead(st->last_pid))
			continue;
		sl_strategy_undo(&sec->spec, st, &st->last_undo);
		st->seq--;
		st->last_pid = 0;
		atomic_fetch_add_explicit(A(&st->given_up), 1, memory_order_relaxed);
		returned++;
	}
	sl_shm_unlock(h, self);
	return returned;
}

uint64_t sl_admit_repair(struct sl_shm_header *h, int64_t now, int32_t self)
{
	uint64_t fixed = 0;

	if (sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return 0;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (sec->in_use && sl_strategy_repair(&sec->spec, &sec->state, now, wall_off(h)))
			fixed |= 1ULL << i;
	}
	sl_shm_unlock(h, self);
	return fixed;
}

void sl_admit_count_refused(struct sl_shm_header *h, const struct sl_match *m)
{
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++)
		if (m->mask & (1ULL << i))
			atomic_fetch_add_explicit(A(&sl_shm_section(h, i)->state.refused), 1,
			                          memory_order_relaxed);
}
