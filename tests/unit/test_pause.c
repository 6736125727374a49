/* What an answer does to a queue: pauses (the later wins, clamped by max_pause),
 * budgets, the paced resume, the bare-429 back-off, adapt's cut and climb, and
 * signals = off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/pause.h"

#include <string.h>

#define MS 1000000LL
#define S (1000 * MS)

static struct sl_spec spec(void)
{
	struct sl_spec s;

	memset(&s, 0, sizeof(s));
	s.amount = 100;
	s.window_ns = S; /* one every 10 ms */
	s.burst = 1;
	s.signals = 1;
	s.max_pause_ns = 5 * S;
	return s;
}

static struct sl_signal sig(unsigned kind, unsigned status, int64_t pause_ms)
{
	struct sl_signal g;

	memset(&g, 0, sizeof(g));
	g.kind = (uint8_t)kind;
	g.status = (uint16_t)status;
	g.pause_ms = pause_ms;
	return g;
}

static void test_pause_and_resume(void **state)
{
	struct sl_spec s = spec();
	struct sl_section box; /* a state and its more */
	struct sl_signal g = sig(SL_SIGNAL_RETRY_AFTER, 429, 2000);
	int64_t t = 100 * S, at;

	(void)state;
	memset(&box, 0, sizeof(box));
	assert_int_equal(sl_pause_apply(&box.state, &s, &g, t), SL_PAUSE_SET);
	assert_true(sl_pause_active(&box.state, t));
	assert_int_equal(box.state.pause.count, 1);
	/* a shorter one changes nothing; a longer one extends */
	g.pause_ms = 1000;
	assert_int_equal(sl_pause_apply(&box.state, &s, &g, t), SL_PAUSE_NOTHING);
	assert_int_equal(sl_pause_release_at(&box.state, &s, t + S), t + 2 * S);
	/* a reservation made now waits for the end, and the next one a pace after:
	 * at a quarter of the rate as the pause ends (40 ms for 100/s) */
	at = sl_pause_slot(&box.state, &s, t, t, 1);
	assert_int_equal(at, t + 2 * S);
	assert_int_equal(sl_pause_slot(&box.state, &s, t, t, 1), t + 2 * S + 40 * MS);
	/* releases: the first at the end, then paced, not all at once */
	assert_int_equal(sl_pause_release_at(&box.state, &s, t + 2 * S), t + 2 * S);
	sl_pause_released(&box.state, &s, t + 2 * S);
	assert_int_equal(sl_pause_release_at(&box.state, &s, t + 2 * S + MS), t + 2 * S + 40 * MS);
	sl_pause_released(&box.state, &s, t + 2 * S + 40 * MS);
	/* halfway through the resume (2 s long), 62.5% of the rate: 16 ms */
	sl_pause_released(&box.state, &s, t + 3 * S);
	assert_int_equal(sl_pause_release_at(&box.state, &s, t + 3 * S), t + 3 * S + 16 * MS);
	/* long after, pacing is over */
	assert_int_equal(sl_pause_release_at(&box.state, &s, t + 60 * S), t + 60 * S);
	assert_int_equal(sl_pause_slot(&box.state, &s, t + 60 * S, t + 60 * S, 1), t + 60 * S);
	assert_false(sl_pause_active(&box.state, t + 60 * S));
}

static void test_clamp_and_off(void **state)
{
	struct sl_spec s = spec();
	struct sl_section box; /* a state and its more */
	struct sl_signal g = sig(SL_SIGNAL_RETRY_AFTER, 429, 999999000LL);

	(void)state;
	memset(&box, 0, sizeof(box));
	sl_pause_apply(&box.state, &s, &g, 0);
	assert_int_equal(box.state.pause.until_ns, 5 * S);
	s.max_pause_ns = -1; /* forever: as asked */
	memset(&box, 0, sizeof(box));
	sl_pause_apply(&box.state, &s, &g, 0);
	assert_int_equal(box.state.pause.until_ns, 999999 * S);
	s.signals = 0;
	memset(&box, 0, sizeof(box));
	assert_int_equal(sl_pause_apply(&box.state, &s, &g, 0), SL_PAUSE_NOTHING);
	assert_false(sl_pause_active(&box.state, 0));
}

static void test_budget(void **state)
{
	struct sl_spec s = spec();
	struct sl_section box; /* a state and its more */
	struct sl_signal g = sig(SL_SIGNAL_RATELIMIT, 200, 0);
	int64_t t = 10 * S;

	(void)state;
	memset(&box, 0, sizeof(box));
	g.budget = 3;
	g.budget_ms = 5000;
	assert_int_equal(sl_pause_apply(&box.state, &s, &g, t), SL_PAUSE_BUDGET);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(sl_pause_release_at(&box.state, &s, t + i * MS), t + i * MS);
		sl_pause_released(&box.state, &s, t + i * MS);
	}
	assert_int_equal(sl_pause_release_at(&box.state, &s, t + 3 * MS), t + 5 * S);
	assert_int_equal(sl_pause_slot(&box.state, &s, t + 3 * MS, t + 3 * MS, 0), t + 5 * S);
	assert_int_equal(sl_pause_release_at(&box.state, &s, t + 5 * S), t + 5 * S);
}

static void test_bare_429_backs_off(void **state)
{
	struct sl_spec s = spec();
	struct sl_section box; /* a state and its more */
	struct sl_signal g = sig(SL_SIGNAL_BARE_429, 429, 0), good = sig(SL_SIGNAL_NONE, 200, 0);

	(void)state;
	memset(&box, 0, sizeof(box));
	good.good = 1;
	sl_pause_apply(&box.state, &s, &g, 0);
	assert_int_equal(box.state.pause.until_ns, S);
	sl_pause_apply(&box.state, &s, &g, S);
	assert_int_equal(box.state.pause.until_ns, 3 * S); /* 2 s from then */
	sl_pause_apply(&box.state, &s, &good, 3 * S);
	sl_pause_apply(&box.state, &s, &g, 4 * S);
	assert_int_equal(box.state.pause.until_ns, 5 * S); /* a good answer ended the streak */
}

static void test_adapt(void **state)
{
	struct sl_spec s = spec();
	struct sl_section box; /* a state and its more */
	struct sl_signal g = sig(SL_SIGNAL_BARE_429, 429, 0), good = sig(SL_SIGNAL_NONE, 200, 0);
	int64_t t = 100 * S;

	(void)state;
	memset(&box, 0, sizeof(box));
	s.adapt = 1;
	good.good = 1;
	assert_int_equal(sl_pause_adapt_ppm(&box.state), 1000000);
	assert_int_equal(sl_pause_apply(&box.state, &s, &g, t), SL_PAUSE_ADAPTED);
	assert_int_equal(sl_pause_adapt_ppm(&box.state), 500000);
	assert_false(sl_pause_active(&box.state, t)); /* with adapt a bare 429 only cuts */
	/* the answers in flight say the same: one cut per half second */
	assert_int_equal(sl_pause_apply(&box.state, &s, &g, t + 100 * MS), SL_PAUSE_NOTHING);
	/* the pace follows the share: 20 ms at half of 100/s (no pause to resume) */
	assert_int_equal(sl_pause_slot(&box.state, &s, t, t, 1), t);
	assert_int_equal(sl_pause_slot(&box.state, &s, t, t, 1), t + 20 * MS);
	/* back to nine tenths of where it was within a second, then slowly */
	for (int i = 1; i <= 10; i++)
		sl_pause_apply(&box.state, &s, &good, t + i * 100 * MS);
	assert_int_equal(sl_pause_adapt_ppm(&box.state), 900000);
	for (int i = 1; i <= 5; i++)
		sl_pause_apply(&box.state, &s, &good, t + S + i * S);
	assert_int_equal(sl_pause_adapt_ppm(&box.state), 950000);
	for (int i = 1; i <= 20; i++)
		sl_pause_apply(&box.state, &s, &good, t + 6 * S + i * S);
	assert_int_equal(sl_pause_adapt_ppm(&box.state), 1000000); /* never above the rate */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pause_and_resume),
		cmocka_unit_test(test_clamp_and_off),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_bare_429_backs_off),
		cmocka_unit_test(test_adapt),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
