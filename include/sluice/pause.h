/*
 * pause.h - what the destination said, applied to a section's (or a key's) queue
 * (docs/shaping.md, "Signals from the destination").
 *
 * A response read by the shim (response.h) becomes a signal; sl_pause_apply()
 * writes it into the state every process's admissions read, under the segment
 * lock:
 *   - a pause: nothing is released before `until` (the later of any pauses asked,
 *     each clamped to the section's max_pause);
 *   - a budget: at most R more releases until an instant;
 *   - after a pause, releases resume paced for as long as the pause lasted (at
 *     least a second): at a quarter of the rate as it ends, climbing evenly to
 *     the whole rate, so the waiters do not all go at the instant it ends;
 *   - a pause another machine of the fleet was asked for (src/daemon/fleet.c),
 *     from the next lease renewal on;
 *   - adapt = on: each 429 halves the share of the rate in force (once per pause
 *     time at most: the answers in flight all say the same), good answers bring it
 *     back - quickly to nine tenths of where the 429 came, then by a hundredth of
 *     the rate a second - never above the configured rate.
 * Admission asks sl_pause_slot() for the earliest slot of a reservation and
 * sl_pause_release_at() whether a release may go now; sl_pause_released() counts
 * one.  Pure: every function takes `now`; nothing here reads a clock.
 */
#ifndef SLUICE_PAUSE_H
#define SLUICE_PAUSE_H

#include "sluice/response.h"
#include "sluice/shm-t.h"

#include <stdint.h>

/* A 429 with no header pauses this long, doubled for each in a row (up to
 * max_pause); a good answer ends the streak. */
#define SL_PAUSE_BARE_429_NS (1000LL * 1000 * 1000)
/* Releases resume at least this long one pace apart after a pause. */
#define SL_PAUSE_PACE_MIN_NS (1000LL * 1000 * 1000)
/* The pace of a section with no rate (concurrency only) while resuming. */
#define SL_PAUSE_PACE_NORATE_NS (10LL * 1000 * 1000)
/* adapt: the least share of the rate it cuts to. */
#define SL_ADAPT_FLOOR_PPM 10000u

/* What sl_pause_apply did. */
enum {
	SL_PAUSE_NOTHING = 0,
	SL_PAUSE_SET = 1,    /* a pause set or made longer (worth a log line) */
	SL_PAUSE_BUDGET = 2, /* a budget set */
	SL_PAUSE_ADAPTED = 4, /* adapt cut the rate */
};

/* Apply `sig` (read at `now`) to state st of a section with spec s.  Returns
 * SL_PAUSE_* bits. */
int sl_pause_apply(struct sl_state *st, const struct sl_spec *s, const struct sl_signal *sig, int64_t now);

/* Another machine of the fleet was asked to pause state st's item until `until`
 * (CLOCK_MONOTONIC here): this one pauses as well, cut to max_pause, unless its own
 * pause already ends within 50 ms of it (the clocks' conversions differ by
 * milliseconds; a pause is counted once).  1 when set or made longer. */
int sl_pause_fleet(struct sl_state *st, const struct sl_spec *s, int64_t until, int64_t now);

/* The earliest a reservation asked at `now` whose limits give `slot` may be
 * released; with `charge`, the pacing cursor moves past it. */
int64_t sl_pause_slot(struct sl_state *st, const struct sl_spec *s, int64_t slot, int64_t now, int charge);

/* The earliest a release checked at `now` may go (now: at once). */
int64_t sl_pause_release_at(const struct sl_state *st, const struct sl_spec *s, int64_t now);

/* A release went at `now`. */
void sl_pause_released(struct sl_state *st, const struct sl_spec *s, int64_t now);

/* Whether st is paused at `now` (for stat). */
int sl_pause_active(const struct sl_state *st, int64_t now);

/* adapt: the share of the rate in force, in millionths. */
uint32_t sl_pause_adapt_ppm(const struct sl_state *st);

#endif
