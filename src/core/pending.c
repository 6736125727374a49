/* One admission as steps (pending.h): the protocol every front end shares. */
#include "sluice/pending.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/config.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/say.h"
#include "sluice/shm.h"
#include "sluice/sys.h"
#include "sluice/wait.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

/* A step goes on to the next phase within the same call. */
#define NEXT (-1)

/* Locked release checks that may keep one admission waiting, and the share of
 * them a peek may stand in for (docs/design.md, "Where the bound is kept"). */
#define RELEASE_ROUNDS 1000
#define PEEKS_PER_LOOK 100

/* A caller waiting for a place sleeps on the futex word at most this long at a
 * time: the wake-up of a place given back by a process killed at the wrong
 * instant may be lost. */
#define PLACE_SLEEP_NS SL_NS_PER_S

/* The segment moved this many times under one admission: it cannot be followed. */
#define MOVES_MAX 3

int64_t sl_pending_max_wait(struct sl_shm_header *h, const struct sl_match *m, uint64_t mask,
                            int *refuse_errno)
{
	int64_t w = -1;

	*refuse_errno = 0;
	for (uint64_t bits = mask; bits; bits &= bits - 1) {
		struct sl_section *sec = sl_shm_section(h, m->idx[__builtin_ctzll(bits)]);
		int64_t mw;

		if (!sec || (mw = sl_sane_ns(sec->spec.max_wait_ns)) < 0)
			continue;
		if (w < 0 || mw < w) {
			w = mw;
			*refuse_errno = sec->spec.refuse;
		}
	}
	return w;
}

/* Count one in a section's counter at `field` (an offset in struct sl_state_more). */
static void count_in(struct sl_shm_header *h, int section, size_t field)
{
	struct sl_section *sec = section >= 0 ? sl_shm_section(h, (unsigned)section) : NULL;

	if (sec)
		atomic_fetch_add_explicit((_Atomic uint64_t *)((char *)&sec->more + field), 1,
		                          memory_order_relaxed);
}

void sl_pending_start(struct sl_pending *p, struct sl_shm_header *h, const struct sl_pending_ask *ask,
                      int64_t now)
{
	int64_t w;

	p->ask = *ask;
	if (!p->ask.room || p->ask.room > SL_MATCH_MAX)
		p->ask.room = SL_MATCH_MAX;
	p->undecided = p->moves = p->checked = 0;
	p->peeks = p->rounds = 0;
	p->taken = 0;
	p->conc = ask->places && !ask->refuse_all ? sl_conc_sections(h, ask->m) : 0;
	p->phase = p->conc ? SL_PEND_PLACES : SL_PEND_RESERVE;
	p->asked_ns = now;
	p->orphan_checked_ns = 0;
	w = sl_pending_max_wait(h, ask->m, ask->m->mask, &p->deadline_errno);
	p->deadline_ns = w < 0 ? INT64_MAX : now + w;
	p->at = now;
	p->sleep_until = now;
	p->place_section = -1;
	p->place_seen = 0;
	p->claims_wakeable = p->claim_wait = 0;
	p->claim_seen = 0;
	p->claim_asked_ns = 0;
	p->err = 0;
	p->refusing_section = -1;
	p->why = NULL;
	p->undecided_why = NULL;
	p->t.mask = 0;
}

static int go(struct sl_pending *p, const char *why)
{
	p->phase = SL_PEND_DONE;
	p->why = why;
	return SL_PEND_GO;
}

static int wait_until(struct sl_pending *p, int64_t at)
{
	p->at = at;
	p->sleep_until = at;
	p->place_section = -1;
	return SL_PEND_WAIT;
}

/* Refused with errno e (0: the call's default) of `section`: nothing is left in
 * hand - its slots were given back by the refusal, its places are given back now. */
static int refuse(struct sl_pending *p, struct sl_shm_header *h, int e, int section, const char *why)
{
	if (p->taken)
		sl_pending_give_back(h, p->taken, p->ask.m, p->ask.self, p->ask.segment, p->ask.segment_ctx);
	p->taken = 0;
	p->t.mask = 0;
	p->phase = SL_PEND_DONE;
	p->err = e ? e : p->ask.default_errno;
	p->refusing_section = section;
	p->why = why;
	if (sl_say_on)
		sl_say_refused(section, why, sl_clock_mono_ns());
	return SL_PEND_REFUSED;
}

/* Why a call waits on a section whose seal is broken (summary.h). */
#define SCRIBBLED "a section's configuration was scribbled on (sluiced writes it back)"

/* The segment could not decide: counted once per admission in each of its
 * sections, then the fallback decides.  An unused reservation is left to go by
 * empty (costing rate, never exceeding it). */
static int undecided(struct sl_pending *p, struct sl_shm_header *h, int64_t now, const char *why)
{
	const struct sl_match *m = p->ask.m;

	/* The attempt that failed may have waited out the lock's bound: the retry is
	 * counted from its end, not from the step's start. */
	now = SL_MAX(now, sl_clock_mono_ns());
	if (!p->undecided)
		for (uint64_t bits = m->mask; bits; bits &= bits - 1)
			count_in(h, (int)m->idx[__builtin_ctzll(bits)], offsetof(struct sl_state_more, undecided));
	if (!p->undecided_why)
		p->undecided_why = why;
	p->undecided = 1;
	p->t.mask = 0;
	if (p->ask.fallback == SL_FALLBACK_OPEN)
		return go(p, why);
	if (p->ask.fallback == SL_FALLBACK_CLOSED)
		return refuse(p, h, 0, -1, why);
	if (now >= p->deadline_ns)
		return refuse(p, h, p->deadline_errno, -1, "still undecided after max_wait");
	p->phase = p->conc && !p->taken ? SL_PEND_PLACES : SL_PEND_RESERVE;
	/* The retry may follow a segment again: one not reached yet may be by then
	 * (the shim's stand-in, attach.c). */
	p->moves = 0;
	return wait_until(p, SL_MIN(now + SL_UNDECIDED_RETRY_NS, p->deadline_ns));
}

/* The daemon moved the segment (sl_shm_move): its successor decides.  What was
 * reserved in the old one is void there; places follow (the daemon carries the
 * holders over). */
static int moved(struct sl_pending *p, struct sl_shm_header *h, int64_t now)
{
	p->t.mask = 0;
	p->phase = p->conc && !p->taken ? SL_PEND_PLACES : SL_PEND_RESERVE;
	if (++p->moves > MOVES_MAX)
		return undecided(p, h, now, "the segment moved and cannot be followed");
	p->at = now;
	return SL_PEND_MOVED;
}

/* A lock-level error of any call into the segment. */
static int segment_failed(struct sl_pending *p, struct sl_shm_header *h, int64_t now, int rc,
                          const char *why)
{
	return rc == -EXDEV ? moved(p, h, now) : undecided(p, h, now, why);
}

static int step_places(struct sl_pending *p, struct sl_shm_header *h, int64_t now)
{
	uint32_t seen = 0;
	int full = -1, rc;

	rc = sl_wait_conc_take(h, p->ask.m, p->ask.self, &p->taken, &full, &seen);
	now = SL_MAX(now, sl_clock_mono_ns()); /* the take may have waited for the lock */
	if (rc == 0) {
		if (sl_say_on && p->conc)
			sl_say_held((int)p->ask.m->idx[__builtin_ctzll(p->conc)], now - p->asked_ns, now);
		p->phase = SL_PEND_RESERVE;
		p->at = now;
		return NEXT;
	}
	if (rc == -EXDEV)
		return moved(p, h, now);
	if (rc == -EDQUOT) { /* no room for its key: refused, never let go */
		count_in(h, full, offsetof(struct sl_state_more, refused));
		return refuse(p, h, sl_section_refuse(h, full), full, "no room in the key table for its key");
	}
	if (rc == -ENOSPC || rc == -ETIMEDOUT || rc == -EBADMSG) {
		/* No room in the holder table, no lock, or a scribbled section: no place
		 * now.  Never a "go": waited for as a full limit is, counted as
		 * undecided. */
		uint64_t conc = p->conc ? p->conc : sl_conc_sections(h, p->ask.m);

		full = conc ? (int)p->ask.m->idx[__builtin_ctzll(conc)] : -1;
		seen = full >= 0 ? sl_conc_seen(h, p->ask.m, (unsigned)full) : 0;
		if (!p->undecided)
			count_in(h, full, offsetof(struct sl_state_more, undecided));
		if (!p->undecided_why)
			p->undecided_why = rc == -ENOSPC    ? "holder table full"
			                   : rc == -EBADMSG ? SCRIBBLED
			                                    : "segment lock unavailable";
		p->undecided = 1;
	}
	/* Full.  A call the rate part would refuse anyway is refused now, not after
	 * waiting for a place. */
	if (!p->checked && sl_match_positions(p->ask.m) <= p->ask.room) {
		p->checked = 1;
		rc = sl_wait_check(h, p->ask.m, now, p->ask.self, &p->t);
		if (rc == -ECONNREFUSED)
			return refuse(p, h, p->t.refuse_errno, p->t.refusing_section,
			              p->t.key_full ? "no room in the key table for its key"
			                            : "the wait would exceed max_wait");
		p->t.mask = 0;
	}
	if (now >= p->deadline_ns) {
		count_in(h, full, offsetof(struct sl_state_more, refused));
		return refuse(p, h, p->deadline_errno, full, "no concurrency place within max_wait");
	}
	p->at = SL_MIN(now + SL_PLACE_RECHECK_NS, p->deadline_ns);
	p->sleep_until = SL_MIN(now + PLACE_SLEEP_NS, p->deadline_ns);
	p->place_section = full;
	p->place_seen = seen;
	return SL_PEND_WAIT;
}

static int step_reserve(struct sl_pending *p, struct sl_shm_header *h, int64_t now, sl_act_fn act,
                        void *arg)
{
	int64_t retry = 0;
	int went = 1, rc;

	if (now < p->at)
		return SL_PEND_WAIT; /* a fallback's retry, not due yet */
	if (sl_match_positions(p->ask.m) > p->ask.room)
		return undecided(p, h, now, "sections changed"); /* more than its ticket holds */
	rc = sl_wait_reserve_go_act(h, p->ask.m, now, p->ask.self, &p->t, p->ask.cost, &went, &retry,
	                            act, arg);
	if (rc == -ECONNREFUSED)
		return refuse(p, h, p->t.refuse_errno, p->t.refusing_section,
		              p->t.key_full ? "no room in the key table for its key"
		                            : "the wait would exceed max_wait");
	if (rc == -ESTALE) {
		/* None of its sections is there any more (a reload): what matches its
		 * destination now decides - nothing, and it goes. */
		if (!p->ask.d || sl_match_sections(h, p->ask.d, p->ask.m, p->ask.self) <= 0)
			return go(p, "no section matches any longer");
		if (p->taken)
			return undecided(p, h, now, "sections changed");
		p->conc = p->ask.places ? sl_conc_sections(h, p->ask.m) : 0;
		p->phase = p->conc ? SL_PEND_PLACES : SL_PEND_RESERVE;
		/* On at once with the new match: a caller that keeps its sections
		 * elsewhere (a deferred connect's record) would hand the stale ones
		 * back at its next step, so this step must take the reservation. */
		return NEXT;
	}
	if (rc < 0)
		return segment_failed(p, h, now, rc, rc == -EBADMSG ? SCRIBBLED : "segment lock unavailable");
	if (!p->t.mask || went == 0)
		return go(p, NULL); /* nothing to wait for, or released with the reservation */
	p->phase = SL_PEND_RELEASE;
	if (sl_say_on) /* said as it begins, not after it: a user held 20 s hears at once */
		sl_say_held((int)p->ask.m->idx[__builtin_ctzll(p->t.mask)], p->t.slot_ns - p->asked_ns, now);
	if (went < 0)
		return NEXT; /* the release check could not be made yet: the next phase tries */
	return wait_until(p, retry);
}

static int step_release(struct sl_pending *p, struct sl_shm_header *h, int64_t now, sl_act_fn act,
                        void *arg)
{
	int64_t retry = 0, gate;
	int rc;

	if (now < p->at)
		return SL_PEND_WAIT;
	/* A gate not open yet is slept for without the lock (sl_admit_peek).  The
	 * locked check looks at one as far as the peek's bound, one past the call's
	 * max_wait (it refuses), and every PEEKS_PER_LOOK-th: a waiter that keeps
	 * losing the gate to others must still come to its refusal, and a scribble
	 * only the locked check repairs must not keep it peeking. */
	if (++p->peeks % PEEKS_PER_LOOK != 0 && (gate = sl_admit_peek(h, &p->t, now)) > now &&
	    gate < now + SL_PEEK_MAX_NS && gate <= p->t.give_up_ns)
		return wait_until(p, gate);
	rc = sl_wait_release_act(h, &p->t, p->ask.self, &retry, act, arg);
	if (rc == 0)
		return go(p, NULL);
	if (rc == -ECONNREFUSED) /* its slots are given back already */
		return refuse(p, h, p->t.refuse_errno, p->t.refusing_section, "its queue ran past max_wait");
	if (rc < 0)
		return segment_failed(p, h, now, rc, rc == -EBADMSG ? SCRIBBLED : "release check unavailable");
	if (++p->rounds >= RELEASE_ROUNDS)
		return undecided(p, h, now, "the release check never agreed");
	return wait_until(p, retry);
}

/* Whether h's daemon has been silent long enough for h to have been lost and made
 * anew (SL_ORPHAN_NS).  A segment never beaten for (a private one) is not. */
static int orphan_suspect(const struct sl_shm_header *h, int64_t now)
{
	int64_t beat = atomic_load_explicit(A(&((struct sl_shm_header *)h)->heartbeat_ns), memory_order_relaxed);

	return beat > 0 && now - beat > SL_ORPHAN_NS;
}

static int step(struct sl_pending *p, struct sl_shm_header *h, int64_t now, sl_act_fn act, void *arg)
{
	if (p->ask.refuse_all && p->phase != SL_PEND_DONE) {
		sl_admit_count_refused(h, p->ask.m);
		return refuse(p, h, 0, -1, "fallback = closed");
	}
	if (p->ask.orphans && p->phase != SL_PEND_DONE && sl_unlikely(orphan_suspect(h, now)) &&
	    now - p->orphan_checked_ns >= SL_ORPHAN_CHECK_NS) {
		p->orphan_checked_ns = now;
		return SL_PEND_CHECK;
	}
	/* PLACES -> RESERVE -> RELEASE is the longest chain of steps. */
	for (int n = 0; n < 4; n++) {
		int rc;

		switch (p->phase) {
		case SL_PEND_PLACES: rc = step_places(p, h, now); break;
		case SL_PEND_RESERVE: rc = step_reserve(p, h, now, act, arg); break;
		case SL_PEND_RELEASE: rc = step_release(p, h, now, act, arg); break;
		default: return p->err ? SL_PEND_REFUSED : SL_PEND_GO;
		}
		if (rc != NEXT)
			return rc;
		now = sl_clock_mono_ns();
	}
	return wait_until(p, now);
}

int sl_pending_step(struct sl_pending *p, struct sl_shm_header *h, int64_t now, sl_act_fn act,
                    void *arg)
{
	/* claims_seq before the step: claims that come after it wake the sleep on
	 * it that the step may lead to (no wake lost in between). */
	uint32_t seen = atomic_load_explicit((_Atomic uint32_t *)&h->claims_seq, memory_order_acquire);
	int rc;

	sl_claim_note = (struct sl_claim_note){.look_ns = p->claims_wakeable ? SL_LEASE_CLAIM_WAIT_NS : 0,
	                                       .caller_asked_ns = p->claim_asked_ns};
	rc = step(p, h, now, act, arg);
	if (sl_claim_note.asked)
		sl_lease_claims_ring(h);
	/* Waiting for a claim only when the instant it waits for is the claim's
	 * look again, not another section's slot, which keeps its precision. */
	p->claim_wait = rc == SL_PEND_WAIT && sl_claim_note.looks && p->at == sl_claim_note.look_at;
	p->claim_seen = seen;
	/* Its ask stands while it waits for a claim; once it has a slot, the next
	 * wait asks anew. */
	p->claim_asked_ns = sl_claim_note.looks ? sl_claim_note.caller_asked_ns : 0;
	return rc;
}

void sl_pending_cancel(struct sl_pending *p, struct sl_shm_header *h)
{
	if (p->phase == SL_PEND_RELEASE && p->t.mask)
		sl_wait_refund(h, &p->t, p->ask.self);
	if (p->taken)
		sl_pending_give_back(h, p->taken, p->ask.m, p->ask.self, p->ask.segment, p->ask.segment_ctx);
	p->t.mask = 0;
	p->taken = 0;
	p->phase = SL_PEND_DONE;
}

/* Between tries of a give-back that could not be made. */
#define GIVE_BACK_RETRY_NS (10 * 1000000LL)

int sl_pending_give_back(struct sl_shm_header *h, uint64_t mask, struct sl_match *m, int32_t self,
                         sl_pending_segment_fn segment, void *ctx)
{
	int64_t end = 0;
	int rc;

	/* Bounded by the patience: each round sleeps or follows, and ends once it is
	 * spent (a lock waited for counts in it). */
	while ((rc = sl_wait_conc_put(h, mask, m, self)) == -EXDEV || rc == -ETIMEDOUT || rc == -EBADMSG) {
		int64_t now = sl_clock_mono_ns();
		struct sl_shm_header *next;

		if (!end)
			end = now + SL_GIVE_BACK_PATIENCE_NS;
		if (now >= end)
			break;
		/* Moved for real: the successor holds the places (the daemon carried the
		 * holder entries over); a mark scribbled on is cleared at a heartbeat. */
		if (rc == -EXDEV && segment && (next = segment(ctx, SL_SEGMENT_FOLLOW, &self)) && next != h) {
			h = next;
			continue;
		}
		sl_clock_sleep_until(SL_MIN(now + GIVE_BACK_RETRY_NS, end));
	}
	return rc;
}

int sl_pending_wait(struct sl_pending *p, sl_pending_segment_fn segment, void *ctx,
                    volatile sig_atomic_t *stop, sl_act_fn act, void *arg)
{
	struct sl_shm_header *h = segment(ctx, 0, &p->ask.self);
	int slack = -1, rc;

	p->claims_wakeable = 1; /* it sleeps on claims_seq when waiting for a claim */
	/* Bounded: every round either answers, sleeps towards an instant that moves
	 * on (a slot, a place's recheck, max_wait), follows a moved segment, which
	 * the stepper allows MOVES_MAX times, or checks one once a second. */
	for (;;) {
		rc = sl_pending_step(p, h, sl_clock_mono_ns(), act, arg);
		if (rc == SL_PEND_MOVED || rc == SL_PEND_CHECK) {
			h = segment(ctx, rc == SL_PEND_MOVED ? SL_SEGMENT_FOLLOW : SL_SEGMENT_CHECK, &p->ask.self);
			continue;
		}
		if (rc != SL_PEND_WAIT)
			break;
		if (p->place_section >= 0) {
			sl_conc_wait(h, p->ask.m, (unsigned)p->place_section, p->place_seen,
			             SL_MAX(p->sleep_until - sl_clock_mono_ns(), (int64_t)0));
		} else if (p->claim_wait) {
			/* Waiting for a claim: until claims come (the daemon wakes
			 * claims_seq) or the look again, whichever is first. */
			struct timespec ts = {.tv_sec = p->at / SL_NS_PER_S, .tv_nsec = p->at % SL_NS_PER_S};

			sl_sys(SYS_futex, &h->claims_seq, FUTEX_WAIT_BITSET, p->claim_seen, &ts, NULL,
			       FUTEX_BITSET_MATCH_ANY);
		} else {
			/* The default 50 us timer slack would make every release late by that
			 * much: sleep precisely, and put the thread's own setting back after. */
			if (slack < 0 && (slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) > 1)
				prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
			while (sl_clock_sleep_until_precise(p->at) == -EINTR && !(stop && *stop))
				;
		}
		if (stop && *stop) {
			sl_pending_cancel(p, h);
			rc = -EINTR;
			break;
		}
	}
	if (slack > 1)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	return rc;
}
