/*
 * grid.h - the fleet's slot grid (docs/design.md, "Across machines", "The grid").
 *
 * A fleet rate that counts requests is released on one grid of slots shared by
 * every machine: slot k starts at Redis's time k * interval, and belongs to the
 * machine holding its rank, bitrev12(k mod 4096).  Redis (fleet.lua) hands each
 * machine runs of ranks no other machine holds, so no two machines ever own the
 * same slot; a run of ranks [a, b) is a set of slots spread evenly over time (the
 * bit-reversed order of 0, 1, 2, ... visits the frame in halves, quarters,
 * eighths).  A machine releases only at its own slots, each once, and no later
 * than an interval after the slot's start: in any span S the fleet releases at
 * most R·(S + interval + skew) + 1, whatever the number of machines.
 *
 * The daemon maps Redis's clock onto CLOCK_MONOTONIC (origin_ns: where Redis's
 * time 0 falls) from its lease calls.  Pure arithmetic on a struct sl_grid.
 */
#ifndef SLUICE_GRID_H
#define SLUICE_GRID_H

#include <stdint.h>

#define SL_GRID_BITS 12
#define SL_GRID_RANKS (1u << SL_GRID_BITS) /* ranks in a frame: shares in 4096ths */
#define SL_GRID_RUNS 16                    /* runs of ranks one machine may hold */

/* A machine's part of the grid, as kept in its lease (shm-t.h). */
struct sl_grid {
	int64_t origin_ns;   /* CLOCK_MONOTONIC instant of Redis's time 0 */
	int64_t interval_ns; /* the fleet's interval: one slot (0: no grid) */
	uint32_t n;          /* runs held (0: none; at most SL_GRID_RUNS) */
	uint32_t pad;
	struct sl_grid_run {
		uint16_t from, to; /* ranks [from, to), to <= SL_GRID_RANKS */
	} run[SL_GRID_RUNS];
};

/* The rank of slot k. */
unsigned sl_grid_rank(int64_t k);

/* Whether g is a grid a release can be placed on: an interval, at least one
 * well-formed run.  Anything else in a lease (a scribble) places nothing. */
int sl_grid_usable(const struct sl_grid *g);

/* Ranks g holds (0 when it is unusable). */
unsigned sl_grid_ranks(const struct sl_grid *g);

/* The start of g's first own slot at or after t; INT64_MAX when g is unusable or
 * t lies outside the years the arithmetic covers.  No walk: a few hundred steps
 * of arithmetic at most, whatever g holds. */
int64_t sl_grid_next(const struct sl_grid *g, int64_t t);

#endif
