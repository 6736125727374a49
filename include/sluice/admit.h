/*
 * admit.h - deciding, across every section that applies, when a request may go.
 *
 * The sequence for one request (the shim's, and `sluice acquire`'s):
 *   sl_match_sections()    lock-free (mostly): which sections apply to the destination;
 *   sl_admit_reserve()  under the lock: one slot in every applicable section at the
 *                       latest of their release times, or a refusal that charges none;
 *   (sleep until ticket.release_ns, without any lock)
 *   sl_admit_release()  under the lock: the check that actual releases never run
 *                       closer than one interval less min(1 ms, interval/4), so a
 *                       late waker cannot bunch with the next one; asks for more
 *                       sleep if they would;
 *   sl_admit_refund()   instead of release, when the caller gives up: returns each
 *                       slot that is still the last one handed out.
 * Every function takes `now` from the caller (injectable clock).
 */
#ifndef SLUICE_ADMIT_H
#define SLUICE_ADMIT_H

#include "sluice/keys.h"
#include "sluice/match.h"
#include "sluice/matchset.h"
#include "sluice/shm-t.h"

#include <stdint.h>

/* What a ticket keeps of each section it reserved in (by position). */
struct sl_ticket_sec {
	uint32_t idx;          /* the section's index */
	uint32_t serial;
	struct sl_keyref key;  /* keyed sections: the key charged */
	uint64_t seq;          /* the section's seq right after this reservation */
	struct sl_undo undo;   /* what returning it restores */
};

struct sl_ticket {
	uint64_t mask;        /* enforcing sections charged: positions of the match it
	                       * was reserved for, sec[k] each */
	int64_t arrival_ns;   /* when the request asked */
	int64_t release_ns;   /* when to look: its slot, or sooner for a fleet limit */
	int64_t slot_ns;      /* the slot it was given */
	int64_t give_up_ns;   /* past this (arrival + the tightest max_wait, and a
	                       * grace), a gate still closed refuses it; INT64_MAX:
	                       * forever */
	int64_t released_ns;  /* when the release check let it go (sl_admit_release) */
	int refuse_errno;     /* on refusal: the refusing section's errno (0 = default) */
	int refusing_section; /* on refusal: its section index (-1: none) */
	int held;             /* sluice made it wait: a later slot, or a strict re-check */
	int key_full;         /* on refusal: a keyed section had no room for its key */
	uint64_t cost;        /* 1 per request; bytes for meter = bytes */
	struct sl_keysrc src; /* keyed sections: the destination the keys are of */
	/* One per position of the match it is reserved with: a ticket has room for
	 * the positions of that match (every position below its highest), and no
	 * more - a held socket's ticket costs what its sections need (SL_TICKET_SIZE). */
	struct sl_ticket_sec sec[];
};

/* The bytes of a ticket with room for positions 0..n-1. */
#define SL_TICKET_SIZE(n) (sizeof(struct sl_ticket) + (size_t)(n) * sizeof(struct sl_ticket_sec))

/* A ticket with room for any match: for a caller's stack. */
union sl_ticket_room {
	struct sl_ticket t;
	unsigned char bytes[SL_TICKET_SIZE(SL_MATCH_MAX)];
};

/* Reserve a slot in every matched section (in a keyed section, in the key of m's
 * destination, made on first use).  Returns 0 with t->release_ns set (which
 * may be `now`), -ECONNREFUSED when the wait would exceed some section's max_wait
 * or a keyed section's key cannot be had because its table is full of busy keys
 * (t->key_full; t->refuse_errno says which errno the section wants; nothing is
 * charged), -ESTALE
 * when every matched section changed meanwhile, or -ETIMEDOUT when the lock could not
 * be had.  Sections in observe mode are counted, never charged against the caller. */
int sl_admit_reserve(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                     int32_t self, struct sl_ticket *t);

/* The same for a request of `bytes` bytes: sections with meter = bytes are charged
 * that many, the others one request. */
int sl_admit_reserve_bytes(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                           int32_t self, struct sl_ticket *t, uint64_t bytes);

/* Whether sl_admit_reserve() would refuse at `now`, charging nothing (a refusal is
 * counted).  0, -ECONNREFUSED (t->refuse_errno set), -ESTALE or -ETIMEDOUT. */
int sl_admit_check(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                   int32_t self, struct sl_ticket *t);

/* `now` for sl_admit_release: the clock, read once the lock is held.  A time read
 * before the lock is as old as the wait for it (milliseconds when a dead holder is
 * being taken over), and a release checked at an old time lets the next one come
 * that much early at the destination. */
#define SL_ADMIT_NOW INT64_MIN

/* When the release check would next let t go, read without the lock (docs/design.md,
 * "The queue"): a waiter whose gate has not opened sleeps on instead of taking the
 * lock to be told so - in a queue running late every waiter's slot has come, and
 * each taking the lock at every gate delayed the one whose turn it was.  Only a
 * hint, never a release: at most SL_PEEK_MAX_NS ahead (a scribbled state costs a
 * look that soon, then the locked check repairs it), and `now` whenever the
 * locked check must look (a fleet share, a key to find again). */
#define SL_PEEK_MAX_NS (100 * 1000000LL)
int64_t sl_admit_peek(struct sl_shm_header *h, const struct sl_ticket *t, int64_t now);

/* At or after t->release_ns: returns 0 when the request may go now (and counts it),
 * 1 with *retry_ns set when an earlier late waker means it must sleep longer,
 * -ECONNREFUSED when that would be past its max_wait (t->give_up_ns: refused and
 * counted, its slots given back where they are the last; t->refuse_errno says
 * with what), -EXDEV when the segment was moved (sl_shm_move: follow it), or
 * -ETIMEDOUT when the lock could not be had (nothing is decided: the caller's
 * fallback policy is). */
int sl_admit_release(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self,
                     int64_t *retry_ns);

/* The call a release makes inside itself: act(arg) makes it without blocking (a
 * non-blocking connect, a datagram sent with MSG_DONTWAIT) and returns 1, or
 * returns 0 when it sent nothing (the caller makes the call itself, later). */
typedef int (*sl_act_fn)(void *arg);

/* The same, and when the request may go, act(arg) makes the call before the lock
 * is let go - so no other release can come between this one and its packet - and
 * each section counts the release from the instant sl_limit_counted_from() gives
 * for the call's check and end (docs/design.md, "Where the bound is kept"). */
int sl_admit_release_act(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self,
                         int64_t *retry_ns, sl_act_fn act, void *arg);

/* sl_admit_reserve() and, when the slot it gives is already due, the release
 * (sl_admit_release_act) in the same hold of the lock: what a call that does not
 * wait costs.  Returns the reservation's result; when it is 0, *release_rc is 0
 * (released, or nothing to wait for), 1 (wait until *retry_ns) or -ETIMEDOUT (the
 * release check could not be made: nothing was released). */
int sl_admit_reserve_go_act(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                            int32_t self, struct sl_ticket *t, uint64_t bytes, int *release_rc,
                            int64_t *retry_ns, sl_act_fn act, void *arg);

/* The first write of a connection whose deferred connect t released: its slot on
 * the first writes' line of t's sections (sl_strategy_first_at), >= now, handed
 * out and counted there.  A section of a fleet, or one whose key went meanwhile,
 * keeps no line; the lock not had: now (the connection was admitted; only its
 * first write's spacing is not kept). */
int64_t sl_admit_first_write(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self);

/* meter = bytes: t's piece, just released, takes on up to `most` more bytes where
 * every bytes section it was charged in has room for them now (sl_strategy_room)
 * and t is still its last reservation; returns how many it took (0: none, or the
 * lock not had).  A writer that came late for its piece carries what the
 * lateness earned, within the bound (docs/design.md, "Bytes"). */
uint64_t sl_admit_grow(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self, uint64_t most);

/* A request of the sections in m released at `from` went only at `to`
 * (sl_strategy_moved for each). */
void sl_admit_moved(struct sl_shm_header *h, const struct sl_match *m, int64_t from, int64_t to,
                    int32_t self);

/* A request of the sections in m released (checked) at `checked` was made by a
 * call that ended at `end`: each section counts it from sl_limit_counted_from(). */
void sl_admit_made(struct sl_shm_header *h, const struct sl_match *m, int64_t checked, int64_t end,
                   int32_t self);

/* Give the reservation back (signal, timeout, death of the waiter). */
void sl_admit_refund(struct sl_shm_header *h, const struct sl_ticket *t, int32_t self);

/* Daemon, at each heartbeat: for every section whose last reservation belongs to a
 * process that `is_dead` says has died before its slot came, give that slot back (as
 * the process would have, had it given up alive).  Returns how many were returned. */
int sl_admit_reap_dead(struct sl_shm_header *h, int64_t now, int32_t self,
                       sl_gone_fn is_dead);

/* Daemon, at each heartbeat: reset every section's state that lies further ahead
 * than any admission can put it (sl_strategy_repair).  Returns how many were
 * reset; the first `nout` of their indices go to out[]. */
unsigned sl_admit_repair(struct sl_shm_header *h, int64_t now, int32_t self, uint32_t *out,
                         unsigned nout);

/* A request (or connection) of m released at `at` is given back at `now` in each
 * of m's sections whose refund list names `status` (0: the connection failed,
 * `failed`) - its key's state for a keyed one (refund.h).  Returns how many
 * sections gave it back, or -ETIMEDOUT (the lock not had: nothing given back). */
int sl_admit_uncounted(struct sl_shm_header *h, const struct sl_match *m, unsigned status, int64_t at,
                       int64_t now, int32_t self);

/* A response on a connection to m's destination said `sig` (response.h): applied
 * to every matched section that reads signals (in a keyed section, to the
 * destination's key only), under the lock.  Returns SL_PAUSE_* bits (pause.h), or
 * -ETIMEDOUT when the lock could not be had (the signal is dropped). */
struct sl_signal;
int sl_admit_signal(struct sl_shm_header *h, const struct sl_match *m, const struct sl_signal *sig,
                    int64_t now, int32_t self);

/* Daemon, at each heartbeat: the wall clock's offset to CLOCK_MONOTONIC is now
 * `to` (a step since the last one): every fixed window's state is renumbered
 * (sl_strategy_wall_step) and the offset written, all under the lock, so no
 * admission sees windows of one numbering with the offset of the other.  0, or
 * -ETIMEDOUT (nothing changed: the next heartbeat tries again). */
int sl_admit_wall_step(struct sl_shm_header *h, int32_t self, int64_t now, int64_t to);

/* Charge every matched section in refusal mode (fallback = closed): counts refusals. */
void sl_admit_count_refused(struct sl_shm_header *h, const struct sl_match *m);

#endif
