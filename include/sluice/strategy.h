/*
 * strategy.h - when each strategy of docs/config.md lets a request go, kept pure.
 *
 *   leaky-bucket, token-bucket  GCRA (limiter.h): one timestamp; token-bucket is
 *                               the same arithmetic with burst = AMOUNT
 *   fixed-window                AMOUNT per window, windows aligned to UTC (window
 *                               number = (monotonic + wall_off) / WINDOW)
 *   sliding-window              never more than AMOUNT in any span of WINDOW: counts
 *                               in SL_SLIDE_BUCKETS buckets, every bucket touching
 *                               the span counted whole, so the check errs only on
 *                               the side of waiting (by at most two buckets,
 *                               2/63 of the window)
 *   session-window              AMOUNT per window that starts with its first request
 *
 * Each has two halves over the section's state: scheduling (slot, charge, undo:
 * which slot a request gets, given every reservation already made, and taking it
 * back) and enforcement (release_at, released: the same rule checked against the
 * actual instants requests went, so a caller that wakes late cannot make the limit
 * looser).  All times are CLOCK_MONOTONIC ns passed in by the caller; `cost` is 1
 * per request (the byte count for meter = bytes).  No clock is read here.
 */
#ifndef SLUICE_STRATEGY_H
#define SLUICE_STRATEGY_H

#include "sluice/shm-t.h"

#include <stdint.h>

/* Earliest slot >= now for a request of `cost` queued after every reservation so
 * far, no earlier than enforcement would let it go. */
int64_t sl_strategy_slot(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                         uint64_t cost, int64_t wall_off);

/* Count a request of `cost` released at `at` (>= its slot: the latest of the slots
 * of every section reserved together); `undo` receives what takes it back. */
void sl_strategy_charge(const struct sl_spec *s, struct sl_state *st, int64_t at, uint64_t cost,
                        int64_t wall_off, struct sl_undo *undo);

/* Take back the charge `undo` describes (only ever the last one made). */
void sl_strategy_undo(const struct sl_spec *s, struct sl_state *st, const struct sl_undo *undo);

/* Enforcement: the earliest time >= now a request of `cost` may actually go, and
 * counting one that went at `now`. */
int64_t sl_strategy_release_at(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                               uint64_t cost, int64_t wall_off);
void sl_strategy_released(const struct sl_spec *s, struct sl_state *st, int64_t now, uint64_t cost,
                          int64_t wall_off);

/* meter = connections, a GCRA: the line the first writes of deferred connects
 * keep, apart from the connects' own (docs/design.md, "First writes on time") -
 * the earliest slot >= now the next may have, and counting one given slot `at`:
 * an interval apart, with the section's burst.  Any other spec: now, and nothing
 * counted. */
int64_t sl_strategy_first_at(const struct sl_spec *s, const struct sl_state *st, int64_t now);
void sl_strategy_first_count(const struct sl_spec *s, struct sl_state *st, int64_t at);

/* meter = bytes, a GCRA: the bytes a piece of `cost` released at `now` (just
 * counted with sl_strategy_released) may still take on at once - what keeps tat
 * within tolerance + one piece's time of now, so the bound rate*S + piece (+ the
 * burst's tolerance) holds in any span S (docs/design.md, "Bytes"), and the
 * piece no larger than one; 0 for any other meter or strategy.
 * sl_strategy_grow counts `more` bytes onto the piece, in the schedule and in
 * enforcement. */
uint64_t sl_strategy_room(const struct sl_spec *s, const struct sl_state *st, int64_t now, uint64_t cost);
void sl_strategy_grow(const struct sl_spec *s, struct sl_state *st, uint64_t more);

/* A request released at `from` actually went at `to` (later): its connection's
 * first request, whose place was taken with the connect and whose bytes left at
 * the first write.  The enforcement half is moved on so that the instants the
 * destination sees keep the bound: a GCRA's next release is one interval after
 * `to`; a window that `to` falls in and `from` did not counts it too (counted
 * twice, never too few). */
void sl_strategy_moved(const struct sl_spec *s, struct sl_state *st, int64_t from, int64_t to,
                       uint64_t cost, int64_t wall_off);

/* The wall clock stepped: fixed windows, aligned to UTC, were numbered with the
 * wall offset `from` and are now with `to` (window k = (monotonic + offset) / W).
 * The state is renumbered so every window keeps its distance from now, and the
 * window now in force counts what may have gone in it: the releases of the old
 * window it overlaps, or - when it reaches back into a window whose count is not
 * kept - a whole window's worth (callers may wait a window; none goes early as
 * the new clock counts).  Other strategies count on CLOCK_MONOTONIC alone.  Under
 * the lock. */
void sl_strategy_wall_step(const struct sl_spec *s, struct sl_state *st, int64_t now, int64_t from,
                           int64_t to);

/* Reload: the section keeps its state when its limit changes (docs/config.md, "Reload", as amended
 * by the reload rule in docs/design.md): leaky and token bucket rescale their
 * queue to the new interval; the same windows keep their counts; any other change
 * of strategy or window starts the new one as if a whole window's worth had just
 * gone, so nothing the old limit let through is forgotten.  Under the lock. */
void sl_strategy_convert(const struct sl_spec *from, const struct sl_spec *to, struct sl_state *st,
                         int64_t now, int64_t wall_off);

/* A request of `cost` released at `at` is given back (refund.h) at `now`: taken out
 * of the window (or bucket, or session) it was counted in while that one still
 * counts; a GCRA's bucket drains by its increment when given back within one
 * increment of the release (later it may hold others' only), never below empty.  Under the
 * lock. */
void sl_strategy_refund(const struct sl_spec *s, struct sl_state *st, int64_t at, uint64_t cost, int64_t now,
                        int64_t wall_off);

/* st as if a whole window's worth of `to` had just gone at `now` (what a
 * conversion across kinds takes, and a quota whose saved count is lost: quota.h).
 * Under the lock. */
void sl_strategy_exhaust(const struct sl_spec *to, struct sl_state *st, int64_t now, int64_t wall_off);

/* State further ahead of `now` than any admission can put it (max_wait, or
 * SL_REPAIR_FOREVER_NS when the section waits for ever, plus a window and its
 * burst) is corrupt: reset to what holds no excess (admit.c counts it in the section's repaired).
 * Returns 1 when something was reset.  Under the segment lock. */
#define SL_REPAIR_FOREVER_NS (24 * 3600 * 1000000000LL)
int sl_strategy_repair(const struct sl_spec *s, struct sl_state *st, int64_t now, int64_t wall_off);

/* Whether sl_strategy_repair would reset something, changing nothing: read without
 * the lock, so the daemon looks under it only at the states that need it. */
int sl_strategy_needs_repair(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                             int64_t wall_off);

/* A window strategy's current window, for stat (docs/config.md, "Calendar windows"):
 * how much of AMOUNT went in it, how much is left to reserve, and when it ends
 * (CLOCK_MONOTONIC; a session window not yet opened: -1, nothing used). */
struct sl_window_now {
	uint64_t used;   /* released in it (requests, or bytes) */
	uint64_t left;   /* AMOUNT less what is released or reserved in it */
	int64_t ends_ns;
};

/* 1 and *w for a fixed or session window with a rate; 0 for any other strategy. */
int sl_strategy_window_now(const struct sl_spec *s, const struct sl_state *st, int64_t now, int64_t wall_off,
                           struct sl_window_now *w);

/* Reservations whose slot is still ahead of `now`: callers waiting in the queue. */
uint64_t sl_strategy_queued(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                            int64_t wall_off);

/* Whether a zero state would answer every call from `now` on exactly as st does
 * (no count that still counts, no place held or waited for, no reservation still
 * to come): a key in this state may be evicted (keys.h). */
int sl_strategy_idle(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                     int64_t wall_off);
/* Whether s limits a rate with GCRA (leaky-bucket, token-bucket): its enforcement
 * is the one timestamp rel_tat_ns. */
int sl_strategy_is_gcra(const struct sl_spec *s);
/* Width of one sliding-window bucket. */
int64_t sl_slide_width(const struct sl_spec *s);

#endif
