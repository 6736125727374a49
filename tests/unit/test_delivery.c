/* delivery.c: the lateness buckets, and the daemon's figures over a window - the
 * rate delivered, the percentiles, whether a queue stood throughout - from
 * counters the releases bump. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/common.h"
#include "sluice/delivery.h"

#include <string.h>

#define S SL_NS_PER_S
#define T0 (1000 * S)

static void test_buckets(void **state)
{
	(void)state;
	assert_int_equal(sl_delivery_bucket(0), 0);
	assert_int_equal(sl_delivery_bucket(999), 0);
	assert_int_equal(sl_delivery_bucket(1000), 1);
	assert_int_equal(sl_delivery_bucket(1999), 1);
	assert_int_equal(sl_delivery_bucket(2000), 2);
	assert_int_equal(sl_delivery_bucket(-5), 0);
	assert_int_equal(sl_delivery_bucket(INT64_MAX), SL_LATE_BUCKETS - 1);
	for (unsigned b = 0; b + 1 < SL_LATE_BUCKETS; b++) /* every lateness is under its bucket's bound */
		assert_true(sl_delivery_bucket(sl_delivery_bucket_upper_ns(b) - 1) == b);
	assert_int_equal(sl_delivery_bucket_upper_ns(SL_LATE_BUCKETS - 1), INT64_MAX);
}

static void release(struct sl_section *sec, int n, int64_t late)
{
	for (int i = 0; i < n; i++) {
		sec->state.admitted++;
		sl_delivery_count(sec, late);
	}
}

static void test_window(void **state)
{
	static struct sl_section sec;
	struct sl_delivery_view v;

	(void)state;
	memset(&sec, 0, sizeof(sec));
	sec.spec.amount = 50;
	sec.spec.window_ns = S;
	sl_delivery_measure(&sec, T0, 3); /* the first snapshot: no figures yet */
	assert_int_equal(sl_delivery_view(&sec, &v), 0);
	assert_true(v.configured == 50.0);
	release(&sec, 99, 10 * 1000);  /* 99 at 10 us late */
	release(&sec, 1, 5 * SL_NS_PER_MS);
	sl_delivery_measure(&sec, T0 + 2 * S, 4);
	assert_int_equal(sl_delivery_view(&sec, &v), 1);
	assert_true(v.per_s > 49.99 && v.per_s < 50.01);
	assert_true(v.window_s == 2.0);
	assert_int_equal(v.releases, 100);
	assert_int_equal(v.late_p50_ns, 16 * 1000);        /* 10 us: the [8, 16) bucket */
	assert_int_equal(v.late_p99_ns, 16 * 1000);        /* 99 of 100 */
	assert_true(v.backlog);
	/* Half a window on, the older snapshot moves up: the figures cover 5 s on. */
	release(&sec, 250, 0);
	sl_delivery_measure(&sec, T0 + 6 * S, 0);
	assert_int_equal(sl_delivery_view(&sec, &v), 1);
	assert_true(v.window_s == 6.0);
	assert_false(v.backlog); /* nobody waiting now: the rate says what was asked, not what it gives */
	sl_delivery_measure(&sec, T0 + 12 * S, 0);
	assert_true(sl_delivery_view(&sec, &v) && v.window_s == 6.0);
}

/* A segment may hold anything: a snapshot from the future starts afresh. */
static void test_scribbled(void **state)
{
	static struct sl_section sec;
	struct sl_delivery_view v;

	(void)state;
	memset(&sec, 0, sizeof(sec));
	sec.delivery.snap[1].at_ns = T0 + 100 * S;
	sec.delivery.window_ns = INT64_MAX;
	sl_delivery_measure(&sec, T0, 0);
	assert_int_equal(sl_delivery_view(&sec, &v), 0);
	sec.delivery.window_ns = 1000 * S * 100; /* absurd: no figures */
	assert_int_equal(sl_delivery_view(&sec, &v), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets),
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_scribbled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
