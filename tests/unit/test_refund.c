/* Refunds (refund.h): the list as the config writes it, and what giving a request
 * back does to each strategy - only ever within the window (or bucket, session,
 * increment) the request still counts in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/refund.h"
#include "sluice/strategy.h"

#include <stdio.h>
#include <string.h>

#define S 1000000000LL

struct full {
	struct sl_state st;
	struct sl_state_more more;
};

static void test_parse_and_format(void **state)
{
	struct sl_refund r;
	char why[160], buf[128];

	(void)state;
	assert_int_equal(sl_refund_parse("304, 5xx, 429, failed", &r, why, sizeof(why)), 0);
	assert_true(sl_refund_status(&r, 304));
	assert_true(sl_refund_status(&r, 429));
	assert_true(sl_refund_status(&r, 503));
	assert_false(sl_refund_status(&r, 200));
	assert_false(sl_refund_status(&r, 404));
	assert_true(r.classes & SL_REFUND_FAILED);
	sl_refund_format(&r, buf, sizeof(buf));
	assert_string_equal(buf, "304, 429, 5xx, failed");
	assert_int_equal(sl_refund_parse("none", &r, why, sizeof(why)), 0);
	assert_false(sl_refund_any(&r));
	sl_refund_format(&r, buf, sizeof(buf));
	assert_string_equal(buf, "none");
	assert_int_equal(sl_refund_parse("304 429", &r, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "commas"));
	assert_int_equal(sl_refund_parse("600", &r, why, sizeof(why)), -1);
	assert_int_equal(sl_refund_parse("6xx", &r, why, sizeof(why)), -1);
	assert_int_equal(sl_refund_parse("ok", &r, why, sizeof(why)), -1);
	assert_int_equal(sl_refund_parse("", &r, why, sizeof(why)), -1);
	assert_int_equal(sl_refund_parse("301,302,303,304,305,307,308", &r, why, sizeof(why)), 0);
	assert_int_equal(sl_refund_parse("301,302,303,304,305,307,308,309", &r, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "at most 7"));
}

static struct sl_spec spec(uint32_t strategy, uint64_t amount, int64_t window)
{
	struct sl_spec s;

	memset(&s, 0, sizeof(s));
	s.strategy = strategy;
	s.amount = amount;
	s.window_ns = window;
	s.burst = 1;
	return s;
}

static void go(const struct sl_spec *s, struct sl_state *st, int64_t at)
{
	struct sl_undo u;

	sl_strategy_charge(s, st, at, 1, 0, &u);
	sl_strategy_released(s, st, at, 1, 0);
}

/* A fixed window gives a request back only while its window lasts. */
static void test_fixed(void **state)
{
	struct sl_spec s = spec(SL_STRAT_FIXED_WINDOW, 2, 10 * S);
	struct full f;

	(void)state;
	memset(&f, 0, sizeof(f));
	go(&s, &f.st, 1 * S);
	go(&s, &f.st, 2 * S);
	assert_true(sl_strategy_release_at(&s, &f.st, 3 * S, 1, 0) >= 10 * S);
	sl_strategy_refund(&s, &f.st, 2 * S, 1, 3 * S, 0);
	assert_int_equal(sl_strategy_release_at(&s, &f.st, 3 * S, 1, 0), 3 * S);
	go(&s, &f.st, 3 * S);
	/* a request of the last window, given back in this one: nothing changes */
	go(&s, &f.st, 11 * S);
	go(&s, &f.st, 12 * S);
	sl_strategy_refund(&s, &f.st, 3 * S, 1, 13 * S, 0);
	assert_true(sl_strategy_release_at(&s, &f.st, 13 * S, 1, 0) >= 20 * S);
}

static void test_session(void **state)
{
	struct sl_spec s = spec(SL_STRAT_SESSION_WINDOW, 1, 10 * S);
	struct full f;

	(void)state;
	memset(&f, 0, sizeof(f));
	go(&s, &f.st, 5 * S);
	sl_strategy_refund(&s, &f.st, 5 * S, 1, 6 * S, 0);
	assert_int_equal(sl_strategy_release_at(&s, &f.st, 6 * S, 1, 0), 6 * S);
	go(&s, &f.st, 6 * S);
	/* given back after its session ended: nothing to give */
	sl_strategy_refund(&s, &f.st, 6 * S, 1, 17 * S, 0);
	go(&s, &f.st, 17 * S);
	assert_true(sl_strategy_release_at(&s, &f.st, 18 * S, 1, 0) >= 27 * S);
}

static void test_sliding(void **state)
{
	struct sl_spec s = spec(SL_STRAT_SLIDING_WINDOW, 2, 63 * S); /* buckets of 1 s */
	struct full f;

	(void)state;
	memset(&f, 0, sizeof(f));
	go(&s, &f.st, 100 * S);
	go(&s, &f.st, 101 * S);
	assert_true(sl_strategy_release_at(&s, &f.st, 102 * S, 1, 0) > 102 * S);
	sl_strategy_refund(&s, &f.st, 100 * S, 1, 102 * S, 0);
	assert_int_equal(sl_strategy_release_at(&s, &f.st, 102 * S, 1, 0), 102 * S);
	/* a bucket never counted: nothing taken */
	sl_strategy_refund(&s, &f.st, 50 * S, 1, 102 * S, 0);
	go(&s, &f.st, 102 * S);
	assert_true(sl_strategy_release_at(&s, &f.st, 103 * S, 1, 0) > 103 * S);
}

/* A GCRA gives back within one increment of the release, never after. */
static void test_gcra(void **state)
{
	struct sl_spec s = spec(SL_STRAT_LEAKY_BUCKET, 1, 10 * S);
	struct full f;

	(void)state;
	memset(&f, 0, sizeof(f));
	go(&s, &f.st, 100 * S);
	assert_int_equal(sl_strategy_release_at(&s, &f.st, 101 * S, 1, 0), 110 * S);
	sl_strategy_refund(&s, &f.st, 100 * S, 1, 101 * S, 0);
	assert_int_equal(sl_strategy_release_at(&s, &f.st, 101 * S, 1, 0), 101 * S);
	go(&s, &f.st, 101 * S);
	go(&s, &f.st, 111 * S);
	/* the release at 101 s is given back at 115 s: it drained at 111 s, the bucket
	 * now holds the one of 111 s only */
	sl_strategy_refund(&s, &f.st, 101 * S, 1, 115 * S, 0);
	assert_int_equal(sl_strategy_release_at(&s, &f.st, 115 * S, 1, 0), 121 * S);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_and_format),
		cmocka_unit_test(test_fixed),
		cmocka_unit_test(test_session),
		cmocka_unit_test(test_sliding),
		cmocka_unit_test(test_gcra),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
