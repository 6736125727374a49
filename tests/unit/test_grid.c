/* The fleet's slot grid (src/core/grid.c): ranks in bit-reversed order, a
 * machine's own slots found within a frame, every slot owned by exactly one of
 * machines holding disjoint runs, and a scribbled grid placing nothing. */
#include "sluice/grid.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#define MS 1000000LL

static void test_rank(void **state)
{
	static unsigned char seen[SL_GRID_RANKS];

	(void)state;
	assert_int_equal(sl_grid_rank(0), 0);
	assert_int_equal(sl_grid_rank(1), 2048); /* the frame's halves alternate */
	assert_int_equal(sl_grid_rank(2), 1024);
	assert_int_equal(sl_grid_rank(3), 3072);
	assert_int_equal(sl_grid_rank(4096 + 1), 2048);
	memset(seen, 0, sizeof(seen));
	for (int64_t k = 7 * 4096 + 5; k < 8 * 4096 + 5; k++)
		seen[sl_grid_rank(k)]++;
	for (unsigned r = 0; r < SL_GRID_RANKS; r++)
		assert_int_equal(seen[r], 1); /* any frame's worth of slots: each rank once */
}

/* Half the ranks, [0, 2048): every other slot.  An eighth, [512, 1024): every
 * eighth.  A run of any length spreads its slots over the frame: no gap between
 * two of them much over the average. */
static void test_next(void **state)
{
	struct sl_grid half = {.origin_ns = 3, .interval_ns = 10 * MS, .n = 1, .run = {{0, 2048}}};
	struct sl_grid eighth = {.origin_ns = 3, .interval_ns = 10 * MS, .n = 1, .run = {{512, 1024}}};
	struct sl_grid odd = {.origin_ns = 0, .interval_ns = 1000, .n = 2, .run = {{100, 110}, {3000, 3327}}};
	int64_t t, prev, gap = 0;

	(void)state;
	assert_int_equal(sl_grid_next(&half, 3), 3);
	assert_int_equal(sl_grid_next(&half, 4), 3 + 20 * MS);
	assert_int_equal(sl_grid_next(&half, 3 + 20 * MS), 3 + 20 * MS);
	/* [512, 1024) is the ranks whose slot numbers end in binary 100. */
	t = sl_grid_next(&eighth, 0);
	assert_int_equal((t - 3) / (10 * MS) % 8, 4);
	assert_int_equal(sl_grid_next(&eighth, t + 1), t + 80 * MS);
	/* 337 ranks of 4096 in two runs: about one slot in 12. */
	prev = sl_grid_next(&odd, 0);
	for (int i = 0; i < 2000; i++) {
		t = sl_grid_next(&odd, prev + 1);
		assert_true(t > prev);
		gap = t - prev > gap ? t - prev : gap;
		prev = t;
	}
	assert_true(gap <= 4 * 4096 * 1000 / 337);
	assert_int_equal(sl_grid_ranks(&odd), 337);
}

/* Machines holding disjoint runs that cover the frame: every slot belongs to
 * exactly one of them. */
static void test_disjoint(void **state)
{
	struct sl_grid m[3] = {
		{.interval_ns = 7, .n = 2, .run = {{0, 1000}, {4000, 4096}}},
		{.interval_ns = 7, .n = 1, .run = {{1000, 2500}}},
		{.interval_ns = 7, .n = 3, .run = {{2500, 2600}, {2600, 3000}, {3000, 4000}}},
	};

	(void)state;
	for (int64_t t = 0; t < 3 * 4096 * 7; t += 7) {
		int owners = 0;

		for (int i = 0; i < 3; i++)
			owners += sl_grid_next(&m[i], t) == t;
		assert_int_equal(owners, 1);
	}
}

/* The next own slot the slow way: slot by slot for a frame, testing each rank. */
static int64_t walk_next(const struct sl_grid *g, int64_t t)
{
	int64_t off = t - g->origin_ns, k = off / g->interval_ns;

	if (k * g->interval_ns < off)
		k++;
	for (int i = 0; i < (int)SL_GRID_RANKS; i++, k++)
		for (uint32_t r = 0; r < g->n; r++)
			if (sl_grid_rank(k) >= g->run[r].from && sl_grid_rank(k) < g->run[r].to)
				return g->origin_ns + k * g->interval_ns;
	return INT64_MAX;
}

/* sl_grid_next finds its slot by arithmetic on blocks of ranks: it must agree with
 * the walk for any runs (short, long, touching the frame's ends, overlapping as a
 * scribble may leave them), any origin and any instant, before or after it. */
static void test_next_matches_walk(void **state)
{
	uint64_t x = 88172645463325252ull;

	(void)state;
	for (int i = 0; i < 3000; i++) {
		struct sl_grid g = {.interval_ns = 1 + (int64_t)(x % 20000)};

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		g.origin_ns = (int64_t)(x % 2000000000) - 1000000000;
		g.n = 1 + (uint32_t)(x >> 40) % SL_GRID_RUNS;
		for (uint32_t r = 0; r < g.n; r++) {
			unsigned a, len;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			a = (unsigned)(x % SL_GRID_RANKS);
			len = (x >> 32) % 4 == 0 ? 1 : 1 + (unsigned)((x >> 20) % (SL_GRID_RANKS - a));
			g.run[r].from = (uint16_t)a;
			g.run[r].to = (uint16_t)(a + len > SL_GRID_RANKS ? SL_GRID_RANKS : a + len);
		}
		for (int j = 0; j < 8; j++) {
			int64_t t;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			t = g.origin_ns + (int64_t)(x % (uint64_t)(3 * SL_GRID_RANKS * g.interval_ns)) -
			    SL_GRID_RANKS * g.interval_ns;
			assert_int_equal(sl_grid_next(&g, t), walk_next(&g, t));
		}
	}
}

/* What a scribble can leave: no interval, no runs, too many, a run that ends
 * before it starts or past the frame.  None places a slot. */
static void test_unusable(void **state)
{
	struct sl_grid g[] = {
		{.interval_ns = 0, .n = 1, .run = {{0, 10}}},
		{.interval_ns = -5, .n = 1, .run = {{0, 10}}},
		{.interval_ns = 10, .n = 0},
		{.interval_ns = 10, .n = SL_GRID_RUNS + 1, .run = {{0, 10}}},
		{.interval_ns = 10, .n = 1, .run = {{10, 10}}},
		{.interval_ns = 10, .n = 1, .run = {{20, 10}}},
		{.interval_ns = 10, .n = 1, .run = {{0, 4097}}},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		assert_false(sl_grid_usable(&g[i]));
		assert_int_equal(sl_grid_next(&g[i], 1000), INT64_MAX);
		assert_int_equal(sl_grid_ranks(&g[i]), 0);
	}
	/* Far past the years the arithmetic covers: nothing, not a wrapped instant. */
	assert_int_equal(sl_grid_next(&(struct sl_grid){.origin_ns = INT64_MAX - 10, .interval_ns = INT64_MAX / 2,
	                                                .n = 1, .run = {{0, 1}}},
	                              INT64_MAX - 5),
	                 INT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rank),
		cmocka_unit_test(test_next),
		cmocka_unit_test(test_disjoint),
		cmocka_unit_test(test_next_matches_walk),
		cmocka_unit_test(test_unusable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
