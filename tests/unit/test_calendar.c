/* Calendar windows against the C library's own calendar (gmtime_r, timegm): every
 * day from 1901 to 2261, each window's start and its place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/calendar.h"

#include <time.h>

#define S 1000000000LL
#define DAY (86400 * S)

static int64_t utc(int y, int mon, int d, int h, int mi, int s)
{
	struct tm tm = {.tm_year = y - 1900, .tm_mon = mon - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = s};

	return (int64_t)timegm(&tm) * S;
}

/* Each day's month and year windows are the ones its date names, and start on
 * the first of that month and year at midnight. */
static void test_months_and_years(void **state)
{
	(void)state;
	for (int64_t d = -25202; d < 106000; d++) { /* 1901-01-01 .. 2260 */
		time_t t = (time_t)(d * 86400 + 43200);
		struct tm tm;
		int64_t k, y;

		gmtime_r(&t, &tm);
		k = sl_calendar_index(SL_CAL_MONTH, (int64_t)t * S);
		assert_int_equal(k, (int64_t)(tm.tm_year - 70) * 12 + tm.tm_mon);
		assert_int_equal(sl_calendar_start(SL_CAL_MONTH, k), utc(tm.tm_year + 1900, tm.tm_mon + 1, 1, 0, 0, 0));
		y = sl_calendar_index(SL_CAL_YEAR, (int64_t)t * S);
		assert_int_equal(y, tm.tm_year - 70);
		assert_int_equal(sl_calendar_start(SL_CAL_YEAR, y), utc(tm.tm_year + 1900, 1, 1, 0, 0, 0));
	}
}

/* Each day's week starts on the Monday before it (or on it) at midnight, and the
 * next week seven days later. */
static void test_iso_weeks(void **state)
{
	(void)state;
	for (int64_t d = -25202; d < 106000; d++) {
		int64_t t = d * DAY + 1, k = sl_calendar_index(SL_CAL_WEEK, t), start = sl_calendar_start(SL_CAL_WEEK, k);
		time_t ts = (time_t)(start / S);
		struct tm tm;

		gmtime_r(&ts, &tm);
		assert_int_equal(tm.tm_wday, 1);
		assert_int_equal(tm.tm_hour, 0);
		assert_true(start <= t && t < start + 7 * DAY);
		assert_int_equal(sl_calendar_start(SL_CAL_WEEK, k + 1), start + 7 * DAY);
	}
	/* 2026-01-01 is a Thursday: its ISO week began on Monday 2025-12-29. */
	assert_int_equal(sl_calendar_start(SL_CAL_WEEK, sl_calendar_index(SL_CAL_WEEK, utc(2026, 1, 1, 12, 0, 0))),
	                 utc(2025, 12, 29, 0, 0, 0));
}

/* The edges: the last nanosecond of a month is in it, the first of the next is
 * not; February of a leap year is 29 days, of 1900 and 2100 28, of 2000 29. */
static void test_edges(void **state)
{
	(void)state;
	assert_int_equal(sl_calendar_index(SL_CAL_MONTH, utc(2026, 2, 1, 0, 0, 0) - 1),
	                 sl_calendar_index(SL_CAL_MONTH, utc(2026, 1, 1, 0, 0, 0)));
	assert_int_equal(sl_calendar_index(SL_CAL_MONTH, utc(2026, 2, 1, 0, 0, 0)),
	                 sl_calendar_index(SL_CAL_MONTH, utc(2026, 1, 31, 23, 59, 59)) + 1);
	for (int y = 1900; y <= 2100; y += 100) {
		int64_t feb = sl_calendar_index(SL_CAL_MONTH, utc(y, 2, 10, 0, 0, 0));
		int days = (int)((sl_calendar_start(SL_CAL_MONTH, feb + 1) - sl_calendar_start(SL_CAL_MONTH, feb)) / DAY);

		assert_int_equal(days, y == 2000 ? 29 : 28);
	}
	assert_int_equal(sl_calendar_start(SL_CAL_MONTH, sl_calendar_index(SL_CAL_MONTH, utc(2024, 3, 1, 0, 0, 0))) -
	                 sl_calendar_start(SL_CAL_MONTH, sl_calendar_index(SL_CAL_MONTH, utc(2024, 2, 1, 0, 0, 0))),
	                 29 * DAY);
	/* Far indices stay within int64 rather than wrap. */
	assert_true(sl_calendar_start(SL_CAL_MONTH, INT64_MAX) > 0);
	assert_true(sl_calendar_start(SL_CAL_YEAR, INT64_MIN) < 0);
	assert_true(sl_calendar_start(SL_CAL_WEEK, INT64_MAX / 2) == INT64_MAX);
	/* No calendar: nothing. */
	assert_int_equal(sl_calendar_index(SL_CAL_NONE, 5 * DAY), 0);
	assert_null(sl_calendar_suffix(SL_CAL_NONE));
	assert_string_equal(sl_calendar_suffix(SL_CAL_MONTH), "mo");
	assert_int_equal(sl_calendar_nominal_ns(SL_CAL_MONTH), 30 * DAY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_months_and_years),
		cmocka_unit_test(test_iso_weeks),
		cmocka_unit_test(test_edges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
