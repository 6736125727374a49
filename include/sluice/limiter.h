/*
 * limiter.h - the arithmetic of the leaky-bucket queue (docs/design.md, "The queue"), kept pure.
 *
 * GCRA ("virtual scheduling"): each limit keeps one timestamp, tat, the theoretical
 * arrival time of the next request.  With interval I = WINDOW/AMOUNT and tolerance
 * T = (burst-1)*I, a request arriving at `now` may go at max(now, tat - T), and
 * charging it at time `at` moves tat to max(tat, at) + I*cost.  A token bucket of
 * capacity `burst` refilled at the same rate admits exactly the same sequences, so
 * strategy = token-bucket is this arithmetic with burst defaulting to AMOUNT.
 * No function here reads a clock: `now` is always passed in.
 */
#ifndef SLUICE_LIMITER_H
#define SLUICE_LIMITER_H

#include "sluice/shm-t.h"

#include <stdint.h>

/* I*cost, rounded up so that rounding never lets the rate be exceeded; 0 if the
 * spec has no rate. */
int64_t sl_gcra_increment(const struct sl_spec *s, uint64_t cost);

/* T = (burst-1)*I. */
int64_t sl_gcra_tolerance(const struct sl_spec *s);

/* L, the section's `tolerance`, in ns: how late a release may come and still be
 * charged from the slot it missed rather than from when it went (see
 * sl_gcra_charge_late).  0 for a fleet section, whose share keeps the fleet's
 * own spacing (docs/design.md, "Tolerance"). */
int64_t sl_gcra_late(const struct sl_spec *s);

#define SL_BYTES_PIECE_MIN 1024u
#define SL_BYTES_PIECE_MAX (256u * 1024u)

/* meter = bytes: the most bytes one release may cover (a piece): 20 ms of the
 * rate, between 1 KiB and 256 KiB; 256 KiB for a spec with no rate.  A connection
 * shaped by several bytes sections takes pieces of the smallest of theirs. */
uint64_t sl_bytes_piece(const struct sl_spec *s);

/* meter = bytes: how much earlier than the last release's tat a piece of `cost`
 * bytes may go, (piece - cost)/rate rounded down, 0 for any other meter.  A piece
 * smaller than the largest may use the room the largest would have had: in any
 * span S the releases then still hold at most rate*S + one piece (+ the burst's
 * tolerance), the bound docs/design.md ("Bytes") states, while a write made a few
 * microseconds after its slot does not push every later piece back by as much. */
int64_t sl_bytes_slack(const struct sl_spec *s, uint64_t cost);

/* Times read from the segment may be anything another process wrote there.  Clamped
 * to +-2^61 ns (73 years), any sum of three of them stays within int64_t, so the
 * arithmetic below never overflows, whatever the segment holds. */
#define SL_SANE_NS (INT64_MAX / 4)

static inline int64_t sl_sane_ns(int64_t v)
{
	return v > SL_SANE_NS ? SL_SANE_NS : v < -SL_SANE_NS ? -SL_SANE_NS : v;
}

/* Earliest time a request arriving at `now` may go. */
static inline int64_t sl_gcra_slot(int64_t tat, int64_t tol, int64_t now)
{
	int64_t t = sl_sane_ns(tat) - sl_sane_ns(tol);

	return t > now ? t : now;
}

/* tat after charging a request released at `at` with increment `inc`. */
static inline int64_t sl_gcra_charge(int64_t tat, int64_t at, int64_t inc)
{
	tat = sl_sane_ns(tat);
	at = sl_sane_ns(at);
	return (tat > at ? tat : at) + sl_sane_ns(inc);
}

/* tat after charging a request released at `at`, where a release at most `late`
 * after tat is charged as if it went at tat: the time a late wake-up or a late
 * arrival lost is made up by the next request, which may then go up to `late`
 * less than an interval after it.  Later than that (an idle line) and it is
 * charged from `at`, as sl_gcra_charge does, so an idle spell earns no burst.
 * With tolerance T and interval I, releases at t_k >= tat_k - T and
 * tat_{k+1} >= t_k - late + I give at most 1 + (S + T + late)/I in any span S
 * (docs/design.md, "Tolerance"). */
static inline int64_t sl_gcra_charge_late(int64_t tat, int64_t at, int64_t inc, int64_t late)
{
	tat = sl_sane_ns(tat);
	at = sl_sane_ns(at);
	if (at > tat && at - tat <= sl_sane_ns(late))
		at = tat;
	return (tat > at ? tat : at) + sl_sane_ns(inc);
}

/* How many reservations are handed out but not yet due at `now` (callers asleep in
 * the queue).  Derived from tat, so it stays right when a waiter dies. */
uint64_t sl_gcra_queued(int64_t tat, int64_t tol, int64_t inc, int64_t now);

/* A time `t` ahead of now by some requests at increment `from` becomes as many
 * requests ahead at increment `to`: the queue keeps its length when the rate
 * changes (a reload; a fleet share that grew or shrank).  A time not ahead stays. */
int64_t sl_gcra_rescale(int64_t t, int64_t now, int64_t from, int64_t to);

#endif
