/*
 * lease.h - what limits a section's (or a key's) state: its spec, or for a section
 * the fleet shares (scope = fleet), this machine's lease on the fleet's limit.
 *
 * The daemon writes the lease into the state from Redis's answers
 * (src/daemon/fleet.c): a share of the rate for the rate strategies (the state then
 * runs its own GCRA at that share), a chunk of a window's AMOUNT usable until a
 * time for the window strategies, places for concurrency.  These functions are the
 * strategies' (strategy.h) with the section's spec and the state, and answer from
 * the lease when the section is the fleet's.  A fleet state with no lease lets
 * nothing go: a call waits, looking again every SL_LEASE_RETRY_NS, up to its
 * max_wait.  So does one whose lease is past its validity (its daemon stopped
 * renewing it).  Everything here runs under the segment lock but sl_limit_places (read
 * by the concurrency code under it too) and sl_limit_queued (stats).
 */
#ifndef SLUICE_LEASE_H
#define SLUICE_LEASE_H

#include "sluice/shm-t.h"

#include <stdint.h>

#define SL_LEASE_RETRY_NS (50 * 1000000LL)

/* A caller held on a fleet limit looks again at least this often, whatever its
 * slot: a share changes with every answer from Redis, and a slot reserved under a
 * small share must not keep a caller waiting after the share grew (nor a chunk
 * used up, after it was topped up).  When it looks, the release half decides. */
#define SL_LEASE_RECHECK_NS (100 * 1000000LL)

/* sl_lease_held: a held_until_ns further than this past a caller's own look is
 * taken for a scribble, not for another caller. */
#define SL_LEASE_HELD_SANE_NS (3600 * 1000000000LL)

/* When a caller held until `release` is woken to look again (`now` is when it
 * was held): the slot itself, or sooner for a fleet limit (a window's chunk may be
 * topped up before it ends). */
static inline int64_t sl_limit_wake(const struct sl_spec *s, int64_t release, int64_t now)
{
	if (s->scope == SL_SCOPE_FLEET && release > now + SL_LEASE_RECHECK_NS)
		return now + SL_LEASE_RECHECK_NS;
	return release;
}

/* Whether s is the fleet's (its limit is a lease). */
static inline int sl_limit_fleet(const struct sl_spec *s)
{
	return s->scope == SL_SCOPE_FLEET;
}

/* Whether s limits a rate at all (a fleet section does, with or without a lease). */
static inline int sl_limit_rated(const struct sl_spec *s)
{
	return s->amount != 0;
}

/* Whether s's limit is a GCRA (leaky or token bucket), its lease included. */
int sl_limit_is_gcra(const struct sl_spec *s);

int64_t sl_limit_slot(const struct sl_spec *s, struct sl_state *st, int64_t now, uint64_t cost,
                      int64_t wall_off);
void sl_limit_charge(const struct sl_spec *s, struct sl_state *st, int64_t at, uint64_t cost,
                     int64_t wall_off, struct sl_undo *undo);
void sl_limit_undo(const struct sl_spec *s, struct sl_state *st, const struct sl_undo *undo);
int64_t sl_limit_release_at(const struct sl_spec *s, struct sl_state *st, int64_t now, uint64_t cost,
                            int64_t wall_off);
void sl_limit_released(const struct sl_spec *s, struct sl_state *st, int64_t now, uint64_t cost,
                       int64_t wall_off);
void sl_limit_moved(const struct sl_spec *s, struct sl_state *st, int64_t from, int64_t to,
                    uint64_t cost, int64_t wall_off);

/* A GCRA's enforcement instant after a release of `cost` made at `to`, were it
 * rel_tat before: what sl_limit_moved would leave in rel_tat_ns, computed without
 * writing it, so a caller can put it in place of a guard in one store. */
int64_t sl_limit_moved_tat(const struct sl_spec *s, const struct sl_state *st, int64_t rel_tat, int64_t to,
                           uint64_t cost);
int sl_limit_repair(const struct sl_spec *s, struct sl_state *st, int64_t now, int64_t wall_off);
int sl_limit_needs_repair(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                          int64_t wall_off);
int sl_limit_idle(const struct sl_spec *s, const struct sl_state *st, int64_t now, int64_t wall_off);
uint64_t sl_limit_queued(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                         int64_t wall_off);

/* How far a release is counted from its call (docs/design.md, "Where the bound is
 * kept").  A request's packet leaves microseconds into the call that makes it;
 * the rest of that call - on loopback, a connect's whole handshake, 30-300 us
 * here - is not the destination's business, but a call held up (preempted,
 * interrupted) before its packet left looks the same from outside: no timestamp
 * of a SYN reaches its sender.  So:
 *   - an interval of SL_STRICT_INTERVAL_NS or more counts the release from the
 *     call's end: the destination never sees two closer than the interval, and
 *     what the call took costs at most a few tenths of a percent of the rate;
 *   - a shorter interval counts it from its check, or from the call's end less
 *     SL_CALL_SPREAD_NS when the call took longer than that: counted from the
 *     end, a connect cost 1.5% of the rate at 100/s, 6% at 1,000/s and 19% at
 *     5,000/s; counted this way the destination sees no two packets closer than
 *     interval - SL_CALL_SPREAD_NS, whatever happened inside a call;
 *   - window strategies count it where the call ended (a window's count does not
 *     depend on where in it a request falls; one near a boundary counts in both). */
#define SL_STRICT_INTERVAL_NS (50 * 1000000LL)
#define SL_CALL_SPREAD_NS (200 * 1000LL)

/* At the same short intervals, a release checked up to SL_WAKE_SLACK_NS after its
 * gate (the earliest instant the release check allowed) is charged from the gate,
 * not from the check: the waiter's wake-up, a preemption while it spins, the work
 * between its clock read and the check (a heap pop, a lock, an fstat) no longer
 * push every later release of the queue back by as much.  A release later than
 * that is charged from its check less SL_WAKE_SLACK_NS, so a lag is never made up
 * faster than that once: the instants keep at most burst + (W + SL_WAKE_SLACK_NS)
 * / interval in any span W.  It is SL_CALL_SPREAD_NS itself: the destination was
 * already told "no two packets closer than interval - SL_CALL_SPREAD_NS", and a
 * check forgiven as much concedes nothing more there; 50 us, as it first was, lost
 * 0.5-1% of 5,000/s to wake-ups 50-200 us late (docs/design.md, "Where the bound
 * is kept"). */
#define SL_WAKE_SLACK_NS SL_CALL_SPREAD_NS

/* The instant a release of `cost` checked at `checked`, whose call ended at `end`,
 * counts from in st (under the lock). */
int64_t sl_limit_counted_from(const struct sl_spec *s, const struct sl_state *st, uint64_t cost,
                              int64_t checked, int64_t end);

/* The concurrency places st may hold at `now`: the spec's, or the lease's (0 with
 * none, or one no longer valid). */
uint32_t sl_limit_places(const struct sl_spec *s, const struct sl_state *st, int64_t now);

/* Under the lock: a caller held on st looks again at `until`.  held_until_ns
 * only moves on (another caller may look later), but not from a value an hour
 * past this one's: a scribble must not read as a caller held for ever. */
static inline void sl_lease_held(struct sl_state *st, int64_t until)
{
	struct sl_lease *l = &sl_state_more(st)->lease;

	if (until > l->held_until_ns || l->held_until_ns > until + SL_LEASE_HELD_SANE_NS)
		l->held_until_ns = until;
}

/* Under the lock: st's lease stays usable until `until` (the daemon, while Redis
 * cannot be reached; never shortened). */
void sl_lease_extend(struct sl_state *st, int64_t until);

/* What Redis granted this machine for one section or key (src/daemon/fleet.c). */
struct sl_grant {
	uint32_t flags;     /* SL_LEASE_*: which of the parts below hold */
	uint32_t places;    /* concurrency places */
	uint64_t amount;    /* a rate's share per window_ns, or a chunk's count */
	int64_t window_ns;
	uint64_t burst;
	int64_t until_ns;   /* a chunk's end (CLOCK_MONOTONIC) */
	uint64_t chunk;     /* which chunk: the same one topped up keeps its counts */
	uint32_t machines;  /* machines sharing it (0: unknown, keep the last) */
	int64_t valid_ns;   /* the lease is usable until (CLOCK_MONOTONIC) */
	struct sl_grid grid; /* a rate's slots on the fleet's grid (none: n == 0) */
};

/* Under the segment lock: st's lease becomes g at `now`.  A chunk other than the one
 * held starts its counts afresh; a part g lacks is kept as it was (a rate's share
 * stays until another comes; a rate's grid comes and goes with its share).  Returns 1 when places were added (the caller wakes
 * the section's waiters). */
int sl_lease_write(struct sl_state *st, const struct sl_grant *g, int64_t now);

/* Under the segment lock: slots k[0..n) of the fleet's grid, claimed for this
 * machine through Redis (fleet.c; docs/design.md, "Claims"), join the lease's
 * claims; those already past are dropped.  Returns how many it holds. */
int sl_lease_claims_add(struct sl_state *st, const int64_t *k, uint32_t n, int64_t now);

/* Under the segment lock: the lease's claims are dropped (Redis came back
 * empty, its cursors gone: fleet.c). */
void sl_lease_claims_drop(struct sl_state *st);

/* A caller that can be woken when claims come (it sleeps on the segment's
 * claims_seq: sl_pending_wait, the shim's kicker) looks again this long after
 * finding no slot of its machine's; one that cannot, every SL_LEASE_CLAIM_LOOK_NS
 * (the daemon claims at least that far ahead, and a round trip: fleet_claims.c). */
#define SL_LEASE_CLAIM_WAIT_NS (100 * 1000000LL)
#define SL_LEASE_CLAIM_LOOK_NS (20 * 1000000LL)

/* What the claim looks of this thread's admission step did (claim_or in lease.c
 * fills it; sl_pending_step sets look_ns before the step and reads it after):
 * looks that found no slot and will look again at look_at; asked, those that
 * asked the daemon for a claim (sl_lease_claims_ring then wakes it). */
struct sl_claim_note {
	int64_t look_ns; /* the look again's distance: 0, SL_LEASE_CLAIM_LOOK_NS */
	int64_t look_at; /* the latest look again set */
	int64_t caller_asked_ns; /* in and out: when this caller last asked (0: not
	                          * since it last had a slot) - each caller asks once
	                          * an answer (sl_pending.claim_asked_ns keeps it) */
	uint32_t looks, asked;
};
extern __thread struct sl_claim_note sl_claim_note __attribute__((tls_model("initial-exec")));

/* Outside the lock, after a step that asked for a claim: bump the segment's
 * claims_bell and wake the daemon's bell thread. */
void sl_lease_claims_ring(struct sl_shm_header *h);

/* The daemon, once claims joined a lease: bump claims_seq and wake every caller
 * asleep on it. */
void sl_lease_claims_came(struct sl_shm_header *h);

/* Under the segment lock: how many looks found no slot of this machine's ahead
 * since the last call (the claims to ask for), and start counting again; the
 * callers that asked ask no more until claims come or CLAIM_PENDING_NS passes. */
uint32_t sl_lease_claims_wanted(struct sl_state *st, int64_t now);

#endif
