/* The fleet's slot grid (grid.h; docs/design.md, "The grid"). */
#include "sluice/grid.h"

unsigned sl_grid_rank(int64_t k)
{
	unsigned v = (unsigned)((uint64_t)k & (SL_GRID_RANKS - 1)), r = 0;

	for (int i = 0; i < SL_GRID_BITS; i++, v >>= 1)
		r = (r << 1) | (v & 1u);
	return r;
}

int sl_grid_usable(const struct sl_grid *g)
{
	if (g->interval_ns <= 0 || g->n == 0 || g->n > SL_GRID_RUNS)
		return 0;
	for (uint32_t i = 0; i < g->n; i++)
		if (g->run[i].from >= g->run[i].to || g->run[i].to > SL_GRID_RANKS)
			return 0;
	return 1;
}

unsigned sl_grid_ranks(const struct sl_grid *g)
{
	unsigned n = 0;

	if (!sl_grid_usable(g))
		return 0;
	for (uint32_t i = 0; i < g->n; i++)
		n += g->run[i].to - g->run[i].from;
	return n; /* runs may overlap only in a scribble: then at most a bound, never used as one */
}

static int owns(const struct sl_grid *g, unsigned rank)
{
	for (uint32_t i = 0; i < g->n; i++)
		if (rank >= g->run[i].from && rank < g->run[i].to)
			return 1;
	return 0;
}

int64_t sl_grid_next(const struct sl_grid *g, int64_t t)
{
	__int128 off, k;

	if (!sl_grid_usable(g))
		return INT64_MAX;
	/* The first slot starting at or after t: k = ceil((t - origin) / interval). */
	off = (__int128)t - g->origin_ns;
	k = off / g->interval_ns;
	if (k * g->interval_ns < off)
		k++;
	/* Every rank comes once in any SL_GRID_RANKS slots in a row. */
	for (unsigned i = 0; i < SL_GRID_RANKS; i++, k++) {
		if (owns(g, sl_grid_rank((int64_t)k))) {
			__int128 at = (__int128)g->origin_ns + k * g->interval_ns;

			return at >= INT64_MAX || at < INT64_MIN ? INT64_MAX : (int64_t)at;
		}
	}
	return INT64_MAX;
}
