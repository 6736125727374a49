/* limiter.c: GCRA's arithmetic, also on the extreme values a scribbled segment
 * may hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/common.h"
#include "sluice/limiter.h"

#define T0 (1000 * SL_NS_PER_S) /* an arbitrary "now" */

static void test_gcra_arithmetic(void **state)
{
	struct sl_spec s = {.amount = 3, .window_ns = SL_NS_PER_S, .burst = 4};

	(void)state;
	assert_int_equal(sl_gcra_increment(&s, 1), 333333334); /* rounded up: never faster */
	assert_int_equal(sl_gcra_tolerance(&s), 3 * 333333334LL);
	assert_int_equal(sl_gcra_slot(0, 0, T0), T0);
	assert_int_equal(sl_gcra_slot(T0 + 5, 0, T0), T0 + 5);
	assert_int_equal(sl_gcra_slot(T0 + 5, 10, T0), T0);
	assert_int_equal(sl_gcra_charge(0, T0, 7), T0 + 7);
	assert_int_equal(sl_gcra_charge(T0 + 100, T0, 7), T0 + 107);
	assert_int_equal(sl_gcra_queued(T0 + 250, 0, 100, T0), 2); /* slots T0+50, T0+150 */
	assert_int_equal(sl_gcra_queued(T0 - 1, 0, 100, T0), 0);
}

/* Segment values are untrusted: extreme ones must not overflow (UBSan in make asan
 * checks), and must still give an answer within the clamped range. */
static void test_extreme_values(void **state)
{
	(void)state;
	assert_true(sl_gcra_slot(INT64_MAX, INT64_MIN, T0) >= T0);
	assert_int_equal(sl_gcra_slot(INT64_MIN, INT64_MAX, T0), T0);
	assert_true(sl_gcra_charge(INT64_MAX, INT64_MAX, INT64_MAX) > 0);
	assert_true(sl_gcra_charge(INT64_MIN, INT64_MIN, INT64_MIN) < 0);
	assert_true(sl_gcra_queued(INT64_MAX, INT64_MIN, 1, T0) > 0);
	assert_int_equal(sl_gcra_queued(INT64_MIN, INT64_MAX, INT64_MAX, T0), 0);
}

/* The increment (ceil(cost * window / amount), capped) is the same whether it is
 * worked out in 64 bits or, when those overflow, in 128. */
static void test_increment_exact(void **state)
{
	uint64_t x = 88172645463325252ull;

	(void)state;
	for (int i = 0; i < 200000; i++) {
		struct sl_spec s = {0};
		unsigned __int128 want;
		uint64_t cost;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift */
		s.amount = 1 + (x >> (x % 64)) % ((1ull << 40) - 1);
		s.window_ns = (int64_t)(1 + ((x * 31) >> (x % 61)) % (1ull << 62));
		cost = i % 3 == 0 ? 1 : 1 + ((x * 7) >> (x % 50));
		want = ((unsigned __int128)cost * (uint64_t)s.window_ns + s.amount - 1) / s.amount;
		if (want > INT64_MAX / 4)
			want = INT64_MAX / 4;
		assert_int_equal(sl_gcra_increment(&s, cost), (int64_t)want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gcra_arithmetic),
		cmocka_unit_test(test_extreme_values),
		cmocka_unit_test(test_increment_exact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
