/* clock.c: the wall clock's offset, read tightly and followed only on steps;
 * SLUICE_REALTIME's reading and a realtime thread's rest. */
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

/* Only "0" keeps sluice's threads ordinary: unset, empty or anything else leaves
 * realtime wanted (docs/commands.md, "Environment"). */
static void test_realtime_wanted(void **state)
{
	(void)state;
	assert_false(sl_clock_realtime_wanted("0"));
	assert_true(sl_clock_realtime_wanted(NULL));
	assert_true(sl_clock_realtime_wanted(""));
	assert_true(sl_clock_realtime_wanted("1"));
	assert_true(sl_clock_realtime_wanted("00"));
}

/* The rest leaves the core for at least SL_CLOCK_RT_REST_NS, and not for long. */
static void test_realtime_rest(void **state)
{
	int64_t t0 = sl_clock_mono_ns(), took;

	(void)state;
	sl_clock_realtime_rest();
	took = sl_clock_mono_ns() - t0;
	assert_true(took >= SL_CLOCK_RT_REST_NS);
	assert_true(took < SL_CLOCK_RT_RUN_MAX_NS * 50); /* generous: a noisy machine */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offset_reading),
		cmocka_unit_test(test_offset_follows_steps_only),
		cmocka_unit_test(test_realtime_wanted),
		cmocka_unit_test(test_realtime_rest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
