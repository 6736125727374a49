/* The fleet's slot grid (grid.h; docs/design.md, "The grid"). */
#include "sluice/grid.h"

#define SL_GRID_MIN(a, b) ((a) < (b) ? (a) : (b))

unsigned sl_grid_rank(int64_t k)
{
	uint32_t v = (uint32_t)((uint64_t)k & (SL_GRID_RANKS - 1));

	/* Reverse 16 bits by swapping halves, bytes, nibbles, pairs, bits; the 12
	 * that matter end up in the top 12. */
	v = ((v >> 1) & 0x5555u) | ((v & 0x5555u) << 1);
	v = ((v >> 2) & 0x3333u) | ((v & 0x3333u) << 2);
	v = ((v >> 4) & 0x0f0fu) | ((v & 0x0f0fu) << 4);
	v = ((v >> 8) & 0x00ffu) | ((v & 0x00ffu) << 8);
	return v >> (16 - SL_GRID_BITS);
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

/* The least d >= 0 with slot number k + d in the residue class c mod 2^w
 * (w <= 12), given k mod 4096: 2^w divides 4096. */
static unsigned steps_to(unsigned k12, unsigned c, unsigned w)
{
	return (c - k12) & ((1u << w) - 1);
}

/*
 * The slots of a run of ranks without walking them.  A run [a, b) is a union of
 * at most 2 * SL_GRID_BITS aligned blocks [p * 2^j, (p + 1) * 2^j); a rank lies
 * in such a block when its top 12 - j bits are p, and since a slot's rank is its
 * number's low 12 bits reversed, that is when the slot number's low w = 12 - j
 * bits are p reversed in w bits: one residue class mod 2^w.  The next own slot is
 * the nearest of at most SL_GRID_RUNS * 24 classes - a few hundred steps of
 * arithmetic under the segment lock, where a walk slot by slot took up to 4,096
 * rank tests per run.
 */
int64_t sl_grid_next(const struct sl_grid *g, int64_t t)
{
	__int128 off, k, at;
	unsigned k12, best = SL_GRID_RANKS;

	if (!sl_grid_usable(g))
		return INT64_MAX;
	/* The first slot starting at or after t: k = ceil((t - origin) / interval). */
	off = (__int128)t - g->origin_ns;
	k = off / g->interval_ns;
	if (k * g->interval_ns < off)
		k++;
	k12 = (unsigned)((uint64_t)k & (SL_GRID_RANKS - 1));
	for (uint32_t i = 0; i < g->n && best; i++) {
		unsigned a = g->run[i].from, b = g->run[i].to;

		while (a < b && best) {
			/* The largest aligned block starting at a that fits in [a, b). */
			unsigned j = a ? (unsigned)__builtin_ctz(a) : SL_GRID_BITS, w;

			while ((1u << j) > b - a)
				j--;
			w = SL_GRID_BITS - j;
			best = SL_GRID_MIN(best, steps_to(k12, sl_grid_rank(a >> j) >> j, w));
			a += 1u << j;
		}
	}
	if (best >= SL_GRID_RANKS)
		return INT64_MAX; /* no block: cannot be, with a usable g */
	at = (__int128)g->origin_ns + (k + best) * g->interval_ns;
	return at >= INT64_MAX || at < INT64_MIN ? INT64_MAX : (int64_t)at;
}
