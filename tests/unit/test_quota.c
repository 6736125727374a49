/* Durable quotas (quota.h): what the shims spend and ask, and the state file - its
 * records put back across boots whose monotonic clocks differ, and every kind of
 * bad file refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/calendar.h"
#include "sluice/quota.h"
#include "sluice/strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S 1000000000LL
#define HOUR (3600 * S)
#define DAY (24 * HOUR)

/* A state with its more, as a section keeps it. */
struct full {
	struct sl_state st;
	struct sl_state_more more;
};

static struct sl_spec spec(uint32_t strategy, uint64_t amount, int64_t window)
{
	struct sl_spec s;

	memset(&s, 0, sizeof(s));
	snprintf(s.name, sizeof(s.name), "q");
	s.strategy = strategy;
	s.amount = amount;
	s.window_ns = window;
	s.burst = 1;
	s.meter = SL_METER_REQUESTS;
	s.durable = 1;
	return s;
}

static void test_kept_and_chunk(void **state)
{
	struct sl_spec s = spec(SL_STRAT_FIXED_WINDOW, 5000, 30 * DAY);

	(void)state;
	assert_true(sl_quota_kept(&s));
	assert_int_equal(sl_quota_chunk(&s), 50);
	s.amount = 5;
	assert_int_equal(sl_quota_chunk(&s), 1);
	s.window_ns = HOUR - 1;
	assert_false(sl_quota_kept(&s));
	s.window_ns = HOUR;
	s.scope = SL_SCOPE_FLEET;
	assert_false(sl_quota_kept(&s)); /* Redis keeps a fleet's */
	s = spec(SL_STRAT_FIXED_WINDOW, 1ull << 40, DAY);
	s.meter = SL_METER_BYTES;
	assert_int_equal(sl_quota_chunk(&s), 1u << 30);
}

/* A release spends quota_left; short of it, it waits and asks. */
static void test_spend_and_ask(void **state)
{
	static struct sl_shm_header h;
	struct sl_spec s = spec(SL_STRAT_FIXED_WINDOW, 400, DAY); /* chunk 4 */
	struct sl_state st;

	(void)state;
	memset(&st, 0, sizeof(st));
	assert_int_equal(sl_quota_release_at(&h, &s, &st, 100, 1), 100 + SL_QUOTA_RETRY_NS);
	assert_int_equal(h.quota_want, 1);
	h.quota_want = 0;
	st.quota_left = 4;
	assert_int_equal(sl_quota_release_at(&h, &s, &st, 100, 1), 100);
	sl_quota_released(&h, &s, &st, 1);
	assert_int_equal(st.quota_left, 3);
	assert_int_equal(h.quota_want, 0);
	sl_quota_released(&h, &s, &st, 1); /* 2 left: half a chunk, asked ahead */
	assert_int_equal(h.quota_want, 1);
	assert_int_equal(sl_quota_release_at(&h, &s, &st, 100, 3), 100 + SL_QUOTA_RETRY_NS);
	s.durable = 0; /* not durable: nothing to spend */
	st.quota_left = 0;
	assert_int_equal(sl_quota_release_at(&h, &s, &st, 100, 1), 100);
}

static size_t file_of(struct sl_quota_buf *b, const struct sl_spec *s, const struct full *f, uint64_t ahead,
                      int64_t wall_off)
{
	struct sl_keyid key;

	memset(&key, 0, sizeof(key));
	key.per = SL_PER_HOST;
	key.len = 3;
	memcpy(key.bytes, "abc", 3);
	sl_quota_buf_begin(b);
	sl_quota_buf_add(b, s->name, NULL, s, &f->st, ahead, 0);
	sl_quota_buf_add(b, s->name, &key, s, &f->st, 0, 0);
	assert_int_equal(sl_quota_buf_end(b, wall_off, 1700000000 * S), 0);
	return b->len;
}

/* A fixed window saved in one boot and read in another: window numbers are the
 * wall clock's, so the count holds; `ahead` is charged on top. */
static void test_fixed_across_boots(void **state)
{
	struct sl_spec s = spec(SL_STRAT_FIXED_WINDOW, 10, DAY);
	struct full f, g;
	struct sl_quota_buf b;
	struct sl_quota_head head;
	struct sl_quota_rec r;
	struct sl_slide slides[2];
	struct sl_undo u;
	char why[128];
	size_t off = sizeof(head);
	int64_t off1 = 1700000000 * S, now1 = 5 * HOUR, off2 = off1 + 4 * HOUR, now2 = 10 * S;
	struct sl_window_now w;

	(void)state;
	memset(&f, 0, sizeof(f));
	for (int i = 0; i < 3; i++) {
		sl_strategy_charge(&s, &f.st, now1, 1, off1, &u);
		sl_strategy_released(&s, &f.st, now1, 1, off1);
	}
	file_of(&b, &s, &f, 2, off1);
	assert_int_equal(sl_quota_check(b.p, b.len, &head, why, sizeof(why)), 0);
	assert_int_equal(head.records, 2);
	assert_int_equal(sl_quota_next(b.p, b.len, &off, &r, slides), 1);
	memset(&g, 0, sizeof(g));
	/* boot 2 began 4 h of wall time after boot 1: the same instant is 4 h
	 * earlier on its monotonic clock - still the same day */
	sl_quota_restore(&s, &g.st, &r, slides, off1 - off2, now2 + 1 * HOUR, off2);
	assert_true(sl_strategy_window_now(&s, &g.st, now2 + HOUR, off2, &w));
	assert_int_equal(w.used, 5); /* 3 gone, 2 granted and counted as gone */
	assert_int_equal(w.left, 5);
	assert_int_equal(sl_quota_next(b.p, b.len, &off, &r, slides), 1);
	assert_int_equal(r.key.len, 3);
	assert_int_equal(sl_quota_next(b.p, b.len, &off, &r, slides), 0);
	free(b.p);
}

/* A GCRA's times move with the boot; a 1-per-hour bucket whose next release
 * was 30 min away is still 30 min away (plus what was granted ahead). */
static void test_gcra_across_boots(void **state)
{
	struct sl_spec s = spec(SL_STRAT_LEAKY_BUCKET, 24, DAY);
	struct full f, g;
	struct sl_quota_buf b;
	struct sl_quota_head head;
	struct sl_quota_rec r;
	struct sl_slide slides[2];
	char why[128];
	size_t off = sizeof(head);
	int64_t off1 = 1700000000 * S, off2 = off1 + 100 * DAY, now2 = 20 * S;

	(void)state;
	memset(&f, 0, sizeof(f));
	/* saved at monotonic 10 h with the next release at 10 h 30 min */
	f.st.tat_ns = f.st.rel_tat_ns = 10 * HOUR + HOUR / 2;
	file_of(&b, &s, &f, 0, off1);
	assert_int_equal(sl_quota_check(b.p, b.len, &head, why, sizeof(why)), 0);
	assert_int_equal(sl_quota_next(b.p, b.len, &off, &r, slides), 1);
	memset(&g, 0, sizeof(g));
	/* read 10 h of wall time later: the release it waited for is long past */
	sl_quota_restore(&s, &g.st, &r, slides, off1 - off2, now2, off2);
	assert_true(g.st.rel_tat_ns < now2);
	/* read at the same wall instant it was saved: still 30 min to go */
	memset(&g, 0, sizeof(g));
	sl_quota_restore(&s, &g.st, &r, slides, off1 - (off1 + 10 * HOUR - now2), now2, off1 + 10 * HOUR - now2);
	assert_int_equal(sl_strategy_release_at(&s, &g.st, now2, 1, 0), now2 + HOUR / 2);
	free(b.p);
}

/* A sliding window's buckets move by whole buckets, never earlier. */
static void test_sliding_across_boots(void **state)
{
	struct sl_spec s = spec(SL_STRAT_SLIDING_WINDOW, 10, DAY);
	struct full f, g;
	struct sl_quota_buf b;
	struct sl_quota_head head;
	struct sl_quota_rec r;
	struct sl_slide slides[2];
	struct sl_undo u;
	char why[128];
	size_t off = sizeof(head);
	int64_t at = 50 * HOUR, shift = -(37 * HOUR + 123);

	(void)state;
	memset(&f, 0, sizeof(f));
	for (int i = 0; i < 10; i++) {
		sl_strategy_charge(&s, &f.st, at, 1, 0, &u);
		sl_strategy_released(&s, &f.st, at, 1, 0);
	}
	file_of(&b, &s, &f, 0, 0);
	assert_int_equal(sl_quota_check(b.p, b.len, &head, why, sizeof(why)), 0);
	assert_int_equal(sl_quota_next(b.p, b.len, &off, &r, slides), 1);
	assert_int_equal(r.has_slide, 1);
	memset(&g, 0, sizeof(g));
	sl_quota_restore(&s, &g.st, &r, slides, shift, at + shift, 0);
	/* full until a day after the saved instant, in the new clock - not before */
	assert_true(sl_strategy_release_at(&s, &g.st, at + shift, 1, 0) >= at + shift + DAY);
	free(b.p);
}

/* A record kept under another limit is converted as a reload would: a new AMOUNT
 * keeps the counts; another strategy starts the window as used up. */
static void test_other_limit(void **state)
{
	struct sl_spec s = spec(SL_STRAT_FIXED_WINDOW, 10, DAY), t;
	struct full f, g;
	struct sl_quota_buf b;
	struct sl_quota_head head;
	struct sl_quota_rec r;
	struct sl_slide slides[2];
	struct sl_undo u;
	struct sl_window_now w;
	char why[128];
	size_t off = sizeof(head);

	(void)state;
	memset(&f, 0, sizeof(f));
	for (int i = 0; i < 4; i++) {
		sl_strategy_charge(&s, &f.st, HOUR, 1, 0, &u);
		sl_strategy_released(&s, &f.st, HOUR, 1, 0);
	}
	file_of(&b, &s, &f, 0, 0);
	assert_int_equal(sl_quota_check(b.p, b.len, &head, why, sizeof(why)), 0);
	assert_int_equal(sl_quota_next(b.p, b.len, &off, &r, slides), 1);
	t = s;
	t.amount = 20; /* a plan upgrade: the month's count stays */
	memset(&g, 0, sizeof(g));
	sl_quota_restore(&t, &g.st, &r, slides, 0, 2 * HOUR, 0);
	assert_true(sl_strategy_window_now(&t, &g.st, 2 * HOUR, 0, &w));
	assert_int_equal(w.used, 4);
	assert_int_equal(w.left, 16);
	t = s;
	t.strategy = SL_STRAT_SESSION_WINDOW;
	memset(&g, 0, sizeof(g));
	sl_quota_restore(&t, &g.st, &r, slides, 0, 2 * HOUR, 0);
	assert_true(sl_strategy_window_now(&t, &g.st, 2 * HOUR, 0, &w));
	assert_int_equal(w.left, 0);
	free(b.p);
}

/* Truncated, grown, flipped, foreign: each refused with its reason. */
static void test_bad_files(void **state)
{
	struct sl_spec s = spec(SL_STRAT_FIXED_WINDOW, 10, DAY);
	struct full f;
	struct sl_quota_buf b;
	struct sl_quota_head head;
	char why[128], *copy;
	size_t len;

	(void)state;
	memset(&f, 0, sizeof(f));
	len = file_of(&b, &s, &f, 1, 0);
	copy = malloc(len + 8);
	assert_non_null(copy);
	assert_int_equal(sl_quota_check(b.p, len - 1, &head, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "truncated"));
	assert_int_equal(sl_quota_check(b.p, 10, &head, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "shorter than its header"));
	for (size_t i = 0; i < len; i += 7) { /* any byte changed is seen */
		memcpy(copy, b.p, len);
		copy[i] ^= 0x40;
		assert_int_equal(sl_quota_check(copy, len, &head, why, sizeof(why)), -1);
	}
	memcpy(copy, b.p, len);
	memcpy(copy, "GARBAGE!", 8);
	assert_int_equal(sl_quota_check(copy, len, &head, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not a sluice state file"));
	memcpy(copy, b.p, len);
	memset(copy + len, 0, 8);
	assert_int_equal(sl_quota_check(copy, len + 8, &head, why, sizeof(why)), -1);
	free(copy);
	free(b.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kept_and_chunk),
		cmocka_unit_test(test_spend_and_ask),
		cmocka_unit_test(test_fixed_across_boots),
		cmocka_unit_test(test_gcra_across_boots),
		cmocka_unit_test(test_sliding_across_boots),
		cmocka_unit_test(test_other_limit),
		cmocka_unit_test(test_bad_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
