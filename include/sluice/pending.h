/*
 * pending.h - one admission, from its ask to its answer, as steps every front end
 * drives: the shim's connects and write gates, its deferred connects, the seccomp
 * supervisor and `sluice acquire` (docs/design.md, "One way to admit").
 *
 * An admission goes through up to three phases:
 *   PLACES   a concurrency place in every section of its match that limits
 *            concurrency (connects only), waited for until its max_wait;
 *   RESERVE  a slot in every rated section (admit.h), released at once when due;
 *   RELEASE  the release check at the slot, and after it while an earlier late
 *            release keeps the gate closed.
 * Each step answers GO (make the call now: released, or nothing to wait for),
 * WAIT (step again at p->at), REFUSED (fail the call with p->err), MOVED (the
 * daemon moved the segment: follow it, then step again at once) or CHECK (the
 * segment's daemon has not beaten for SL_ORPHAN_NS: ask its socket whether it is
 * still the one served - it may have been lost and made anew - then step again;
 * only for an ask with `orphans` set, once per SL_ORPHAN_CHECK_NS).  When the
 * segment cannot decide - no lock, a full holder table, sections gone in a
 * reload - the fallback policy decides here and nowhere else: open goes, closed
 * refuses, local asks the shared queue again until the call's max_wait and
 * refuses then.  Never "go" for want of an answer.
 *
 * The front ends keep only what is theirs: the socket, how they wait (a sleep, a
 * deferred connect woken by the kicker, an EAGAIN, a timer), their messages.
 */
#ifndef SLUICE_PENDING_H
#define SLUICE_PENDING_H

#include "sluice/admit.h"

#include <signal.h>

enum sl_pending_answer {
	SL_PEND_GO = 0,
	SL_PEND_WAIT = 1,
	SL_PEND_REFUSED = 2,
	SL_PEND_MOVED = 3,
	SL_PEND_CHECK = 4,
};

enum sl_pending_phase {
	SL_PEND_PLACES = 1,
	SL_PEND_RESERVE = 2,
	SL_PEND_RELEASE = 3,
	SL_PEND_DONE = 4,
};

/* How often an admission waiting for a concurrency place, or for the segment to
 * decide under fallback = local, looks again when it cannot sleep on the
 * section's futex word (a deferred connect, the supervisor's timers). */
#define SL_PLACE_RECHECK_NS (10 * 1000000LL)
#define SL_UNDECIDED_RETRY_NS (20 * 1000000LL)

/* What a blocking caller's segment callback is asked to do first. */
enum sl_segment_ask {
	SL_SEGMENT_AS_IS = 0,
	SL_SEGMENT_FOLLOW = 1, /* it was moved (MOVED) */
	SL_SEGMENT_CHECK = 2,  /* ask whether it is still the one served (CHECK) */
};

/* The segment a blocking caller steps against, after doing what `ask` says (the
 * shim's attachment, `sluice acquire`'s), with *self set to the caller's roster
 * token in it: a segment reached anew (a stand-in's successor) knows the process
 * by another token, and the lock takes no other (lock.h). */
typedef struct sl_shm_header *(*sl_pending_segment_fn)(void *ctx, int ask, int32_t *self);

/* What is asked (sl_pending_start). */
struct sl_pending_ask {
	struct sl_match *m;       /* its sections; the caller's, kept as long as the
	                           * admission (conc_key names the keys of its places) */
	const struct sl_dest *d;  /* its destination, matched again when a reload leaves
	                           * none of m's sections (NULL: then it goes) */
	uint64_t cost;            /* meter = bytes: the bytes; 0: one request */
	int32_t self;             /* the caller's pid, for the lock and the last slot */
	int fallback;             /* SL_FALLBACK_*: when the segment cannot decide */
	int default_errno;        /* a refusal's errno when its section names none */
	int places;               /* a connection: take concurrency places first */
	int orphans;              /* the front end can ask the segment's socket
	                           * whether its segment is still served (CHECK) */
	int refuse_all;           /* no segment and fallback = closed: refuse (counted) */
	unsigned room;            /* positions its ticket has room for (0: any match:
	                           * the pending is a union sl_pending_room) */
	sl_pending_segment_fn segment; /* where places given back on a refusal or a
	                           * cancel follow a moved segment (NULL: they are
	                           * tried again in the same one) */
	void *segment_ctx;
};

struct sl_pending {
	struct sl_pending_ask ask;
	uint8_t phase;            /* enum sl_pending_phase */
	uint8_t undecided;        /* the segment failed to decide once (counted then) */
	uint8_t moves;            /* MOVED answers so far */
	uint8_t checked;          /* PLACES: the rate part was checked once */
	uint8_t claims_wakeable;  /* set by the caller: it sleeps on the segment's
	                           * claims_seq when waiting for a claim, so the
	                           * stepper may look again seldom (lease.c) */
	uint8_t claim_wait;       /* WAIT: the instant is a claim's look again, not
	                           * a slot: no precision needed, claims_seq wakes */
	uint32_t claim_seen;      /* ... claims_seq before the step that said so */
	int64_t claim_asked_ns;   /* when it last asked for a claim, while it waits
	                           * for one (lease.h, sl_claim_note) */
	uint16_t peeks;           /* RELEASE: gates peeked at without the lock */
	uint16_t rounds;          /* RELEASE: locked checks that kept it waiting */
	uint64_t conc;            /* sections (positions in m) whose places it needs */
	uint64_t taken;           /* places in hand: the caller's once GO, given back by
	                           * sl_pending_cancel before */
	int64_t asked_ns;
	int64_t orphan_checked_ns; /* CHECK last answered (0: never) */
	int64_t deadline_ns;      /* asked + the call's max_wait (INT64_MAX: none):
	                           * places and an undecided segment are waited for
	                           * until then, and refused after */
	int deadline_errno;       /* the errno of the section whose max_wait that is */
	int64_t at;               /* WAIT: when to step again */
	int64_t sleep_until;      /* WAIT in PLACES: a caller that sleeps on the futex
	                           * word (sl_pending_sleep_place) may sleep until then,
	                           * woken by a place given back */
	int place_section;        /* WAIT in PLACES: the full section (index), -1: none */
	uint32_t place_seen;      /* ... and its futex word's value then */
	int err;                  /* REFUSED: the errno to fail the call with */
	int refusing_section;     /* REFUSED: the section that refused (-1: none known) */
	const char *why;          /* REFUSED, or a GO not made by a release: why */
	const char *undecided_why; /* why the segment first failed to decide (NULL:
	                            * it never did) */
	struct sl_ticket t;       /* RELEASE: the reservation (t.mask 0: none); last,
	                           * with room for ask.room positions */
};

/* The bytes of an admission whose ticket has room for positions 0..n-1. */
#define SL_PENDING_SIZE(n) (sizeof(struct sl_pending) + (size_t)(n) * sizeof(struct sl_ticket_sec))

/* An admission with room for any match: for a caller's stack, or a call. */
union sl_pending_room {
	struct sl_pending p;
	unsigned char bytes[SL_PENDING_SIZE(SL_MATCH_MAX)];
};

/* Begin an admission asked at `now`: its call's max_wait is read here (clamped,
 * whatever the segment holds), the places it needs (ask->places). */
void sl_pending_start(struct sl_pending *p, struct sl_shm_header *h, const struct sl_pending_ask *ask,
                      int64_t now);

/* One step at `now` (CLOCK_MONOTONIC) against segment h.  A release made in this
 * step makes the call inside it through act(arg) when act is given
 * (sl_admit_release_act).  Returns an enum sl_pending_answer. */
int sl_pending_step(struct sl_pending *p, struct sl_shm_header *h, int64_t now, sl_act_fn act,
                    void *arg);

/* The caller gives up (a signal, a close, a cancelled thread, a killed caller):
 * its reservation and places go back.  Safe in any phase, and twice. */
void sl_pending_cancel(struct sl_pending *p, struct sl_shm_header *h);

/* Give back the places `mask` of m took in h, for sure: a give-back that finds
 * the segment marked moved follows it through segment(ctx) (NULL: tries h
 * again), and one that finds a section's seal broken, or no lock, tries again
 * until sluiced has written the segment back (SL_GIVE_BACK_PATIENCE_NS).  A place
 * not given back stays counted while its process lives (docs/design.md, "Who
 * holds what").  Sleeps between tries: never from an event loop (the supervisor
 * tries once a round instead).  Returns the last try's answer (0: given back). */
#define SL_GIVE_BACK_PATIENCE_NS (1500 * 1000000LL) /* three of sluiced's heartbeats */
int sl_pending_give_back(struct sl_shm_header *h, uint64_t mask, struct sl_match *m, int32_t self,
                         sl_pending_segment_fn segment, void *ctx);

/* The tightest max_wait (ns, clamped; -1: none) of m's sections at the positions
 * in mask, and that section's errno (0: the call's default). */
int64_t sl_pending_max_wait(struct sl_shm_header *h, const struct sl_match *m, uint64_t mask,
                            int *refuse_errno);

/* Step p to its answer, sleeping between steps: precisely to a slot, on the
 * section's futex word for a place.  A signal handler interrupts a sleep; the
 * wait then goes on, unless `stop` is given and has become nonzero: then the
 * admission is cancelled and -EINTR returned.  Returns SL_PEND_GO or
 * SL_PEND_REFUSED. */
int sl_pending_wait(struct sl_pending *p, sl_pending_segment_fn segment, void *ctx,
                    volatile sig_atomic_t *stop, sl_act_fn act, void *arg);

#endif
