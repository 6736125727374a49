/* clock.c: the wall clock's offset, read tightly and followed only on steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/clock.h"

#include <time.h>

static void test_offset_reading(void **state)
{
	struct timespec r, m;
	int64_t off = sl_clock_wall_offset_ns(), naive;

	(void)state;
	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m);
	naive = (r.tv_sec - m.tv_sec) * SL_NS_PER_S + (r.tv_nsec - m.tv_nsec);
	/* The same quantity, to well within a millisecond of a plain reading. */
	assert_true(off - naive < SL_NS_PER_MS && naive - off < SL_NS_PER_MS);
}

/* Noise keeps the offset in force (a fixed window's boundary must not wander with
 * each reading); a step of the wall clock is followed; with none yet, the reading. */
static void test_offset_follows_steps_only(void **state)
{
	int64_t now = sl_clock_wall_offset_ns();

	(void)state;
	assert_true(sl_clock_wall_offset_follow(0) - now < SL_NS_PER_MS);
	assert_int_equal(sl_clock_wall_offset_follow(now + 300 * 1000), now + 300 * 1000);
	assert_int_equal(sl_clock_wall_offset_follow(now - 300 * 1000), now - 300 * 1000);
	assert_true(sl_clock_wall_offset_follow(now + 10 * SL_NS_PER_MS) - now < SL_NS_PER_MS);
	assert_true(sl_clock_wall_offset_follow(now - 10 * SL_NS_PER_MS) - now < SL_NS_PER_MS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offset_reading),
		cmocka_unit_test(test_offset_follows_steps_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
