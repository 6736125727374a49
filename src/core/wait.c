#include "sluice/wait.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/critical.h"
#include "sluice/shm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/prctl.h>


int sl_wait_reserve(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                    int32_t self, struct sl_ticket *t)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_admit_reserve(h, m, now, self, t);
	sl_critical_leave(&c);
	return rc;
}

int sl_wait_reserve_go_act(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                           int32_t self, struct sl_ticket *t, int *release_rc, int64_t *retry_ns,
                           sl_act_fn act, void *arg)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_admit_reserve_go_act(h, m, now, self, t, release_rc, retry_ns, act, arg);
	sl_critical_leave(&c);
	return rc;
}

int sl_wait_reserve_bytes(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                          int32_t self, struct sl_ticket *t, uint64_t bytes)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_admit_reserve_bytes(h, m, now, self, t, bytes);
	sl_critical_leave(&c);
	return rc;
}

int sl_wait_check(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                  int32_t self, struct sl_ticket *t)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_admit_check(h, m, now, self, t);
	sl_critical_leave(&c);
	return rc;
}

void sl_wait_refund(struct sl_shm_header *h, const struct sl_ticket *t, int32_t self)
{
	struct sl_critical c;

	sl_critical_enter(&c);
	sl_admit_refund(h, t, self);
	sl_critical_leave(&c);
}

void sl_wait_moved(struct sl_shm_header *h, const struct sl_match *m, int64_t from, int64_t to,
                   int32_t self)
{
	struct sl_critical c;

	sl_critical_enter(&c);
	sl_admit_moved(h, m, from, to, self);
	sl_critical_leave(&c);
}

void sl_wait_made(struct sl_shm_header *h, const struct sl_match *m, int64_t checked, int64_t end,
                  int32_t self)
{
	struct sl_critical c;

	sl_critical_enter(&c);
	sl_admit_made(h, m, checked, end, self);
	sl_critical_leave(&c);
}

int sl_wait_release(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                    volatile sig_atomic_t *stop)
{
	return sl_wait_release_act(h, t, self, stop, NULL, NULL);
}

int sl_wait_release_act(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                        volatile sig_atomic_t *stop, sl_act_fn act, void *arg)
{
	int64_t at = t->release_ns, retry;
	int slack = -1, rc = 0;

	for (int rounds = 0, peeks = 0; rounds < 1000;) {
		struct sl_critical c;
		int64_t now = sl_clock_mono_ns(), gate;

		/* A gate not open yet is slept for without the lock (sl_admit_peek).  The
		 * locked check looks at one as far as the peek's bound, one past the
		 * call's max_wait (it refuses), and every 100th: a waiter that keeps
		 * losing the gate to others must still come to its refusal, and a
		 * scribble only the locked check repairs must not keep it peeking. */
		if (at <= now && ++peeks % 100 != 0 && (gate = sl_admit_peek(h, t, now)) > now &&
		    gate < now + SL_PEEK_MAX_NS && gate <= t->give_up_ns)
			at = gate;
		if (at > now) {
			/* The default 50us timer slack would make every release late by that
			 * much: sleep precisely, and put the thread's own setting back after. */
			if (slack < 0 && (slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) > 1)
				prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
			while (sl_clock_sleep_until_precise(at) == -EINTR) {
				if (stop && *stop) {
					sl_wait_refund(h, t, self);
					rc = -EINTR;
					goto out;
				}
			}
			continue; /* look again: the gate may have moved on meanwhile */
		}
		rounds++;
		sl_critical_enter(&c);
		rc = sl_admit_release_act(h, t, SL_ADMIT_NOW, self, &retry, act, arg);
		sl_critical_leave(&c);
		if (rc <= 0)
			goto out; /* released, or -ETIMEDOUT */
		at = retry;
	}
	rc = -ETIMEDOUT; /* never agreed: undecided, not released */
out:
	if (slack > 1)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	return rc;
}

int sl_wait_try_release(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                        int64_t *retry_ns)
{
	return sl_wait_try_release_act(h, t, self, retry_ns, NULL, NULL);
}

int sl_wait_try_release_act(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                            int64_t *retry_ns, sl_act_fn act, void *arg)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_admit_release_act(h, t, SL_ADMIT_NOW, self, retry_ns, act, arg);
	sl_critical_leave(&c);
	return rc;
}

static void count_refusal(struct sl_shm_header *h, int section)
{
	struct sl_section *sec = sl_shm_section(h, (unsigned)section);

	if (sec)
		atomic_fetch_add_explicit((_Atomic uint64_t *)&sec->state.refused, 1, memory_order_relaxed);
}

int sl_wait_conc(struct sl_shm_header *h, struct sl_match *m, int32_t self, int64_t deadline,
                 uint64_t *taken, int *full)
{
	for (;;) {
		struct sl_critical c;
		uint32_t seen = 0;
		int64_t now, slice;
		int rc;

		sl_critical_enter(&c);
		rc = sl_conc_take(h, m, self, taken, full, &seen);
		sl_critical_leave(&c);
		if (rc == -EDQUOT) {
			count_refusal(h, *full);
			return -ECONNREFUSED;
		}
		if (rc == -ENOSPC || rc == -ETIMEDOUT) {
			/* No room in the holder table, or no lock: no place now.  That is
			 * never a "go": wait for one as for a full limit, up to the deadline. */
			uint64_t conc = sl_conc_sections(h, m);
			struct sl_section *sec;

			*full = conc ? (int)m->idx[__builtin_ctzll(conc)] : 0;
			seen = sl_conc_seen(h, m, (unsigned)*full);
			if ((sec = sl_shm_section(h, (unsigned)*full)))
				atomic_fetch_add_explicit((_Atomic uint64_t *)&sec->state.undecided, 1,
				                          memory_order_relaxed);
			rc = -EBUSY;
		}
		if (rc != -EBUSY || deadline == -2)
			return rc;
		now = sl_clock_mono_ns();
		if (deadline >= 0 && now >= deadline) {
			count_refusal(h, *full);
			return -ECONNREFUSED;
		}
		/* Woken when a place is given back; the slice only bounds a sleep whose
		 * wake-up was lost to a process killed at the wrong instant. */
		slice = deadline < 0 ? SL_NS_PER_S : SL_MIN(deadline - now, SL_NS_PER_S);
		sl_conc_wait(h, m, (unsigned)*full, seen, slice);
	}
}

void sl_wait_conc_put(struct sl_shm_header *h, uint64_t mask, struct sl_match *m, int32_t self)
{
	struct sl_critical c;

	sl_critical_enter(&c);
	sl_conc_put(h, mask, m, self);
	sl_critical_leave(&c);
}
