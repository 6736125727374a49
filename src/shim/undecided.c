/*
 * When the shared segment cannot decide (no lock, a full table, a lost race, a reload,
 * a corrupt value - none of which may turn into an unchecked release): the fallback
 * policy decides, visibly.  `closed` refuses, `open` lets the call go (what the
 * operator chose).  `local`, the default, must not exceed the limit either: a
 * process limiting itself alone, as it does with no segment at all, would let every
 * process spend the whole rate at once.  So with a segment attached, `local` keeps
 * waiting for the shared queue - a new reservation and release each round, each
 * bounded by the lock's own bound - until the call's max_wait has passed, and
 * refuses it then: late, or refused, never unshaped.  Each call so decided is
 * counted in its sections' `undecided` counter, which needs no lock.
 */
#include "shim.h"
#include "sluice/clock.h"
#include "sluice/limiter.h"
#include "sluice/wait.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static void count_undecided(const struct sl_match *m)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, m->idx[__builtin_ctzll(bits)]);

		if (sec)
			atomic_fetch_add_explicit((_Atomic uint64_t *)&sec->state.undecided, 1,
			                          memory_order_relaxed);
	}
}

/* The tightest max_wait of m's sections, or -1 when they all wait for ever.  Read
 * from the segment, so clamped. */
static int64_t max_wait_of(const struct sl_match *m)
{
	int64_t limit = -1;

	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, m->idx[__builtin_ctzll(bits)]);
		int64_t w;

		if (!sec)
			continue;
		w = sl_sane_ns(sec->spec.max_wait_ns);
		if (w >= 0 && (limit < 0 || w < limit))
			limit = w;
	}
	return limit;
}

/* fallback = local on an attached segment: the shared queue again, until max_wait. */
static int wait_shared(const struct sl_dest *d, const struct sl_match *first, int default_refuse,
                       const char *what, const char *dest)
{
	struct sl_shm_header *h;
	int64_t start = sl_clock_mono_ns(), limit = max_wait_of(first);
	struct sl_match m = *first;

	for (unsigned round = 1;; round++) {
		struct timespec pause = {0, 20 * 1000 * 1000};
		struct sl_ticket t;
		int rc;

		sl_shim_follow(); /* its segment moved: the successor's queue */
		h = sl_shim.shm.hdr;
		rc = sl_wait_reserve(h, &m, sl_clock_mono_ns(), sl_shim.pid, &t);
		if (rc == -ESTALE) {
			/* None of its sections is there any more (a reload): what matches the
			 * destination now decides - nothing, and it goes. */
			if (sl_admit_match(h, d, &m, sl_shim.pid) == 0) {
				sl_debug("%s %s: no section matches any longer: goes", what, dest);
				return 0;
			}
		}
		if (rc == -ECONNREFUSED) {
			sl_debug("%s %s: refused (max_wait), decided by the shared queue after all", what, dest);
			return -(t.refuse_errno ? t.refuse_errno : default_refuse);
		}
		if (rc == 0 && t.mask && (rc = sl_wait_release(h, &t, sl_shim.pid, NULL)) == -ECONNREFUSED) {
			sl_debug("%s %s: refused (its queue ran past max_wait)", what, dest);
			return -(t.refuse_errno ? t.refuse_errno : default_refuse);
		}
		if (rc == 0) {
			sl_debug("%s %s: go, decided by the shared queue in round %u, waited=%.3fms", what,
			         dest, round, (double)(sl_clock_mono_ns() - start) / 1e6);
			return 0;
		}
		/* A ticket whose release could not be checked is left unused: its slot goes
		 * by empty, which costs rate and never exceeds it. */
		if (limit >= 0 && sl_clock_mono_ns() - start >= limit) {
			sl_debug("%s %s: still undecided after max_wait (%u rounds): refused", what, dest, round);
			return -default_refuse;
		}
		nanosleep(&pause, NULL); /* a failed round that did not wait (sections changed) */
	}
}

int sl_undecided(const struct sl_dest *d, const struct sl_match *m, const char *what,
                 int default_refuse, const char *why)
{
	char dest[SL_HOST_MAX + 80] = "";

	if (sl_shim.debug)
		sl_dest_format(d, dest, sizeof(dest));
	/* Not undecided at all: the segment moved under the call (sl_shm_move) - this
	 * thread follows now, or another did moments ago - and its successor decides,
	 * whatever the fallback. */
	if (sl_shim_follow() || (sl_shim.followed_ns &&
	                         sl_clock_mono_ns() - __atomic_load_n(&sl_shim.followed_ns, __ATOMIC_ACQUIRE) <
	                             5 * SL_NS_PER_S))
		return wait_shared(d, m, default_refuse, what, dest);
	count_undecided(m);
	switch (sl_shim.fallback) {
	case SL_FALLBACK_OPEN:
		sl_debug("%s %s: undecided (%s); fallback = open: goes unshaped", what, dest, why);
		return 0;
	case SL_FALLBACK_CLOSED:
		sl_debug("%s %s: undecided (%s); fallback = closed: refused", what, dest, why);
		return -default_refuse;
	default:
		sl_debug("%s %s: undecided (%s); fallback = local: waits for the shared queue, up to max_wait",
		         what, dest, why);
		return wait_shared(d, m, default_refuse, what, dest);
	}
}
