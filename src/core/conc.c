/* Concurrency places in the shared segment (conc.h). */
#include "sluice/conc.h"
#include "sluice/common.h"
#include "sluice/shm.h"

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

uint64_t sl_conc_sections(struct sl_shm_header *h, const struct sl_match *m)
{
	uint64_t mask = 0;

	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if ((m->mask & (1ULL << i)) && (sec = live(h, i, m->serial[i])) &&
		    sec->spec.concurrency && sec->spec.mode != SL_MODE_OBSERVE)
			mask |= 1ULL << i;
	}
	return mask;
}

/* --- the holder table: (process, section) -> places held, hashed ---
 *
 * Open addressing with linear probing on (pid, section), SL_MAX_HOLDERS entries (a
 * power of two); an entry is free when its pid is 0.  Entries are removed with a
 * backward shift (the ones after it in its run move up), so a probe ends at the
 * first free entry and no tombstones pile up.  Every walk is bounded by the table's
 * size: a scribbled table full of garbage is a full table, never a loop.  All of it
 * under the segment lock. */

static unsigned home(int32_t pid, unsigned section)
{
	uint32_t x = (uint32_t)pid * 0x9e3779b1u ^ (section + 1) * 0x85ebca6bu;

	x ^= x >> 15;
	return x & (SL_MAX_HOLDERS - 1);
}

/* The entry of (self, section i, serial); with `create`, a free one becomes it.
 * NULL when there is none (or, creating, the table is full). */
static struct sl_holder *holder(struct sl_shm_header *h, int32_t self, unsigned i, uint32_t serial,
                                int create)
{
	struct sl_holder *t = sl_shm_holders(h);
	unsigned k = home(self, i);

	for (unsigned n = 0; n < SL_MAX_HOLDERS; n++, k = (k + 1) & (SL_MAX_HOLDERS - 1)) {
		if (t[k].pid == self && t[k].section == i && t[k].serial == serial)
			return &t[k];
		if (t[k].pid == 0) {
			if (!create)
				return NULL;
			t[k] = (struct sl_holder){.pid = self, .section = i, .serial = serial, .count = 0};
			return &t[k];
		}
	}
	return NULL;
}

/* Free entry e and close the gap behind it: later entries of the run whose home
 * does not lie after the gap move into it. */
static void holder_remove(struct sl_shm_header *h, struct sl_holder *e)
{
	struct sl_holder *t = sl_shm_holders(h);
	unsigned gap = (unsigned)(e - t), k = gap;

	for (unsigned n = 0; n < SL_MAX_HOLDERS; n++) {
		unsigned want;

		k = (k + 1) & (SL_MAX_HOLDERS - 1);
		if (t[k].pid == 0)
			break;
		want = home(t[k].pid, t[k].section);
		/* t[k] may fill the gap unless its home lies cyclically in (gap, k]. */
		if (((k - want) & (SL_MAX_HOLDERS - 1)) >= ((k - gap) & (SL_MAX_HOLDERS - 1))) {
			t[gap] = t[k];
			gap = k;
		}
	}
	t[gap] = (struct sl_holder){0};
}

static void wake(struct sl_section *sec)
{
	atomic_fetch_add_explicit(A(&sec->state.conc_futex), 1, memory_order_release);
	if (atomic_load_explicit(A(&sec->state.conc_waiters), memory_order_acquire))
		syscall(SYS_futex, &sec->state.conc_futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int sl_conc_take(struct sl_shm_header *h, const struct sl_match *m, int32_t self, uint64_t *taken,
                 int *full, uint32_t *seen)
{
	uint64_t want = sl_conc_sections(h, m);
	int rc;

	*taken = 0;
	if (!want)
		return 0;
	if ((rc = sl_shm_lock(h, self, LOCK_TIMEOUT_NS)) < 0)
		return rc;
	/* All or nothing: first see that every section has room, then that the table
	 * has an entry for each (made with count 0, and removed again if one cannot
	 * be had), and only then take the places. */
	uint64_t made = 0;

	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if (!(want & (1ULL << i)) || !(sec = live(h, i, m->serial[i])))
			continue;
		if (sec->state.conc_open >= sec->spec.concurrency) {
			*full = (int)i;
			*seen = atomic_load_explicit(A(&sec->state.conc_futex), memory_order_acquire);
			rc = -EBUSY;
			goto out;
		}
	}
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;

		if (!(want & (1ULL << i)) || !(sec = live(h, i, m->serial[i])))
			continue;
		if (!holder(h, self, i, sec->serial, 0)) {
			if (!holder(h, self, i, sec->serial, 1)) {
				/* Full: undo the entries made for this take (they hold nothing;
				 * removing one may move the others, so find each again). */
				for (unsigned j = 0; j < SL_MAX_SECTIONS; j++) {
					struct sl_holder *e;

					if ((made & (1ULL << j)) &&
					    (e = holder(h, self, j, sl_shm_section(h, j)->serial, 0)) && !e->count)
						holder_remove(h, e);
				}
				rc = -ENOSPC;
				goto out;
			}
			made |= 1ULL << i;
		}
	}
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;
		struct sl_holder *e;

		/* Each has its entry now (entries do not move while they are only added). */
		if (!(want & (1ULL << i)) || !(sec = live(h, i, m->serial[i])) ||
		    !(e = holder(h, self, i, sec->serial, 0)))
			continue;
		sec->state.conc_open++;
		e->count++;
		*taken |= 1ULL << i;
		if (!sec->spec.amount) /* a rate counts its own admissions at release */
			atomic_fetch_add_explicit(A(&sec->state.admitted), 1, memory_order_relaxed);
	}
out:
	sl_shm_unlock(h, self);
	return rc;
}

void sl_conc_put(struct sl_shm_header *h, uint64_t mask, const struct sl_match *m, int32_t self)
{
	if (!mask || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec;
		struct sl_holder *e;

		/* A section reset or removed by a reload meanwhile holds nothing of ours. */
		if (!(mask & (1ULL << i)) || !(sec = live(h, i, m->serial[i])))
			continue;
		/* The holder entry first: killed between the two, this process leaves a
		 * place counted open that no entry accounts for, which the heartbeat's
		 * recount gives back - never one counted free twice. */
		if ((e = holder(h, self, i, sec->serial, 0)) && e->count && --e->count == 0)
			holder_remove(h, e);
		if (sec->state.conc_open)
			sec->state.conc_open--;
		wake(sec);
	}
	sl_shm_unlock(h, self);
}

void sl_conc_wait(struct sl_shm_header *h, unsigned idx, uint32_t seen, int64_t timeout_ns)
{
	struct sl_section *sec = sl_shm_section(h, idx);
	struct timespec ts;

	if (!sec || timeout_ns <= 0)
		return;
	ts.tv_sec = timeout_ns / SL_NS_PER_S;
	ts.tv_nsec = timeout_ns % SL_NS_PER_S;
	atomic_fetch_add_explicit(A(&sec->state.conc_waiters), 1, memory_order_acq_rel);
	/* Shared (not private) futex: the word is in memory every process maps. */
	syscall(SYS_futex, &sec->state.conc_futex, FUTEX_WAIT, seen, &ts, NULL, 0);
	atomic_fetch_sub_explicit(A(&sec->state.conc_waiters), 1, memory_order_acq_rel);
}

int sl_conc_reap_dead(struct sl_shm_header *h, int32_t self, int (*is_dead)(int32_t pid))
{
	struct sl_holder *t = sl_shm_holders(h);
	int returned = 0, any = 0;

	/* Most segments hold no place at all: look without the lock first, so the
	 * heartbeat does not take the lock every shim contends for. */
	for (unsigned k = 0; k < SL_MAX_HOLDERS && !any; k++)
		any = atomic_load_explicit(A(&t[k].pid), memory_order_relaxed) > 0;
	for (unsigned i = 0; i < SL_MAX_SECTIONS && !any; i++)
		any = atomic_load_explicit(A(&sl_shm_section(h, i)->state.conc_open), memory_order_relaxed) > 0;
	if (!any || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return 0;
	for (unsigned k = 0, removed = 0; k < SL_MAX_HOLDERS && removed < SL_MAX_HOLDERS;) {
		/* A removal shifts later entries back into k: look at k again then.  (One
		 * shifted past the table's end, from its start, waits for the next beat.) */
		if (t[k].pid != 0 && (t[k].pid < 0 || !live(h, t[k].section, t[k].serial) ||
		                      is_dead(t[k].pid))) {
			/* Dead, its section gone, or a scribble: its places go with it. */
			if (t[k].pid > 0)
				returned += (int)SL_MIN(t[k].count, (uint32_t)INT_MAX / 2);
			holder_remove(h, &t[k]);
			removed++;
			continue;
		}
		k++;
	}
	/* The holder table is the record of who holds what: each section's count of
	 * open places is recounted from it.  So a holder killed -9 between the two
	 * updates of a take or a give-back (the lock is taken over from it) leaves the
	 * count right by the next beat, never one place too many. */
	uint64_t held[SL_MAX_SECTIONS] = {0};

	for (unsigned k = 0; k < SL_MAX_HOLDERS; k++) {
		struct sl_section *sec;

		if (t[k].pid > 0 && t[k].section < SL_MAX_SECTIONS &&
		    (sec = sl_shm_section(h, t[k].section))->in_use && t[k].serial == sec->serial)
			held[t[k].section] += t[k].count;
	}
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!sec->in_use || !sec->spec.concurrency)
			continue;
		if (held[i] != sec->state.conc_open) {
			sec->state.conc_open = (uint32_t)SL_MIN(held[i], (uint64_t)UINT32_MAX);
			wake(sec);
		}
	}
	sl_shm_unlock(h, self);
	return returned;
}

int64_t sl_conc_max_wait(struct sl_shm_header *h, uint64_t mask, int *refuse_errno)
{
	int64_t w = -1;

	*refuse_errno = 0;
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!(mask & (1ULL << i)) || sec->spec.max_wait_ns < 0)
			continue;
		if (w < 0 || sec->spec.max_wait_ns < w) {
			w = sec->spec.max_wait_ns;
			*refuse_errno = sec->spec.refuse;
		}
	}
	return w;
}
