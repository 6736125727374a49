/* The strategies with an injected clock: window edges, undo, and the property that
 * no strategy ever lets through more than it models, checked on actual release
 * times over randomised arrival sequences with randomly late wake-ups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/common.h"
#include "sluice/limiter.h"
#include "sluice/calendar.h"
#include "sluice/strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS SL_NS_PER_MS
#define S SL_NS_PER_S
#define T0 (1000 * S)

static struct sl_spec spec(uint32_t strategy, uint64_t amount, int64_t window)
{
	struct sl_spec s;

	memset(&s, 0, sizeof(s));
	s.strategy = strategy;
	s.amount = amount;
	s.window_ns = window;
	s.burst = strategy == SL_STRAT_TOKEN_BUCKET ? amount : 1;
	s.max_wait_ns = -1;
	return s;
}

/* Reserve one request at `now`: its slot, charged. */
static int64_t take(const struct sl_spec *s, struct sl_state *st, int64_t now, int64_t off)
{
	struct sl_undo undo;
	int64_t slot = sl_strategy_slot(s, st, now, 1, off);

	assert_true(slot >= now);
	sl_strategy_charge(s, st, slot, 1, off, &undo);
	return slot;
}

static void test_fixed_window_edges(void **state)
{
	/* Windows of 1 s aligned so that one ends at T0 + 900 ms. */
	struct sl_spec s = spec(SL_STRAT_FIXED_WINDOW, 5, S);
	struct sl_section box = {0}; /* a state, with its more after it */
	int64_t off = -(T0 + 900 * MS) % S + S; /* (T0 + 900ms + off) % S == 0 */
	int64_t slot;

	(void)state;
	assert_int_equal((T0 + 900 * MS + off) % S, 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(take(&s, &box.state, T0 + 500 * MS, off), T0 + 500 * MS);
	/* The window is full: the next go when it refills, at the boundary, not later. */
	assert_int_equal(take(&s, &box.state, T0 + 500 * MS, off), T0 + 900 * MS);
	assert_int_equal(take(&s, &box.state, T0 + 600 * MS, off), T0 + 900 * MS);
	assert_int_equal(sl_strategy_queued(&s, &box.state, T0 + 600 * MS, off), 2);
	/* Three more fill that window; the next queue into the one after. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(take(&s, &box.state, T0 + 700 * MS, off), T0 + 900 * MS);
	assert_int_equal(take(&s, &box.state, T0 + 700 * MS, off), T0 + 1900 * MS);
	/* Much later: a fresh window, at once. */
	slot = take(&s, &box.state, T0 + 10 * S, off);
	assert_int_equal(slot, T0 + 10 * S);
	/* UTC alignment moves with the offset: the same instants, other windows. */
	memset(&box, 0, sizeof(box));
	for (int i = 0; i < 5; i++)
		take(&s, &box.state, T0 + 500 * MS, off + 300 * MS);
	assert_int_equal(take(&s, &box.state, T0 + 500 * MS, off + 300 * MS), T0 + 600 * MS);
}

/* A calendar month (rate = 2/mo, fixed-window): the window ends where the month
 * does - 2026-01-31 24:00 UTC, then February's 28 days - not 30 days on. */
static void test_calendar_month(void **state)
{
	struct sl_spec s = spec(SL_STRAT_FIXED_WINDOW, 2, 30 * 86400 * S);
	struct sl_section box = {0};
	const int64_t jan31_235959 = 1769903999LL * S; /* 2026-01-31 23:59:59 UTC */
	int64_t off = jan31_235959 - T0;                /* wall time = monotonic + off */

	(void)state;
	s.calendar = SL_CAL_MONTH;
	assert_int_equal(take(&s, &box.state, T0, off), T0);
	assert_int_equal(take(&s, &box.state, T0, off), T0);
	assert_int_equal(take(&s, &box.state, T0, off), T0 + S);                  /* Feb 1, 00:00 */
	assert_int_equal(take(&s, &box.state, T0, off), T0 + S);
	assert_int_equal(take(&s, &box.state, T0, off), T0 + S + 28 * 86400 * S); /* Mar 1 */
	/* An ISO week: from 2026-01-31, a Saturday, the next starts on Monday. */
	memset(&box, 0, sizeof(box));
	s.calendar = SL_CAL_WEEK;
	s.window_ns = 7 * 86400 * S;
	take(&s, &box.state, T0, off);
	take(&s, &box.state, T0, off);
	assert_int_equal(take(&s, &box.state, T0, off), T0 + S + 86400 * S);
}

static void test_session_window_edges(void **state)
{
	struct sl_spec s = spec(SL_STRAT_SESSION_WINDOW, 3, S);
	struct sl_section box = {0}; /* a state, with its more after it */

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(take(&s, &box.state, T0 + 250 * MS, 0), T0 + 250 * MS);
	/* The session began with the first request: full until T0 + 1250 ms. */
	assert_int_equal(take(&s, &box.state, T0 + 900 * MS, 0), T0 + 1250 * MS);
	assert_int_equal(take(&s, &box.state, T0 + 900 * MS, 0), T0 + 1250 * MS);
	assert_int_equal(take(&s, &box.state, T0 + 900 * MS, 0), T0 + 1250 * MS);
	assert_int_equal(take(&s, &box.state, T0 + 900 * MS, 0), T0 + 2250 * MS);
	/* After a quiet spell the next request opens a new session at once. */
	assert_int_equal(take(&s, &box.state, T0 + 9 * S, 0), T0 + 9 * S);
	assert_int_equal(take(&s, &box.state, T0 + 9 * S + 999 * MS, 0), T0 + 9 * S + 999 * MS);
}

static void test_sliding_window_edges(void **state)
{
	struct sl_spec s = spec(SL_STRAT_SLIDING_WINDOW, 5, S);
	struct sl_section box = {0}; /* a state, with its more after it */
	int64_t slot, width = sl_slide_width(&s);

	(void)state;
	for (int i = 0; i < 5; i++)
		assert_int_equal(take(&s, &box.state, T0 + 100 * MS, 0), T0 + 100 * MS);
	/* A sixth must wait until the first has left a whole window behind it - not
	 * earlier, and no more than two buckets later. */
	slot = take(&s, &box.state, T0 + 400 * MS, 0);
	assert_true(slot >= T0 + 1100 * MS);
	assert_true(slot <= T0 + 1100 * MS + 2 * width);
	assert_int_equal(sl_strategy_queued(&s, &box.state, T0 + 400 * MS, 0), 1);
}

static void test_undo(void **state)
{
	static const uint32_t strategies[] = {SL_STRAT_LEAKY_BUCKET, SL_STRAT_FIXED_WINDOW,
	                                      SL_STRAT_SLIDING_WINDOW, SL_STRAT_SESSION_WINDOW};

	(void)state;
	for (unsigned k = 0; k < SL_ARRAY_LEN(strategies); k++) {
		struct sl_spec s = spec(strategies[k], 2, S);
		struct sl_section box = {0}; /* a state, with its more after it */
		struct sl_undo undo;
		int64_t a, b, again;

		a = take(&s, &box.state, T0, 0);
		a = take(&s, &box.state, T0, 0);
		b = sl_strategy_slot(&s, &box.state, T0, 1, 0);
		sl_strategy_charge(&s, &box.state, b, 1, 0, &undo);
		assert_true(b > a);
		/* Undone, the same request asking again gets the same slot. */
		sl_strategy_undo(&s, &box.state, &undo);
		again = sl_strategy_slot(&s, &box.state, T0, 1, 0);
		assert_int_equal(again, b);
	}
}

/* --- randomised: arrivals, late wake-ups, and what actually went --- */

static uint64_t rng_state;

static uint64_t rnd(uint64_t n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return n ? (rng_state >> 33) % n : 0;
}

struct req {
	int64_t arrival, slot, wake, released;
	int state; /* 0 not arrived, 1 waiting, 2 released */
};

/* Simulate n requests in time order: each reserves at arrival, wakes at its slot
 * plus up to 3 ms of scheduler lateness, and passes the release check or sleeps
 * again until the time it names.  Fills r[].released. */
static void simulate(const struct sl_spec *s, struct sl_state *st, struct req *r, int n, int64_t off)
{
	for (int done = 0; done < 2 * n;) {
		int next = -1;
		int64_t at = INT64_MAX;

		for (int i = 0; i < n; i++) {
			int64_t t = r[i].state == 0 ? r[i].arrival : r[i].state == 1 ? r[i].wake : INT64_MAX;

			if (t < at) {
				at = t;
				next = i;
			}
		}
		assert_true(next >= 0);
		if (r[next].state == 0) {
			r[next].slot = take(s, st, at, off);
			r[next].wake = r[next].slot + (int64_t)rnd(3 * MS);
			r[next].state = 1;
			done++;
		} else {
			int64_t may = sl_strategy_release_at(s, st, at, 1, off);

			if (may > at) {
				r[next].wake = may + (int64_t)rnd(MS);
				continue;
			}
			sl_strategy_released(s, st, at, 1, off);
			r[next].released = at;
			r[next].state = 2;
			done++;
		}
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void check_windows(const struct sl_spec *s, const int64_t *rel, const int64_t *slots, int n,
                          int64_t off)
{
	uint64_t a = s->amount;
	int64_t w = s->window_ns;

	switch (s->strategy) {
	case SL_STRAT_SLIDING_WINDOW:
		/* Any span of W ending at a release holds at most AMOUNT releases. */
		for (int j = 0, i = 0; j < n; j++) {
			while (rel[i] <= rel[j] - w)
				i++;
			if ((uint64_t)(j - i + 1) > a)
				fail_msg("sliding: %d releases within %lld ns", j - i + 1, (long long)w);
		}
		break;
	case SL_STRAT_FIXED_WINDOW:
		for (int i = 0, j = 0; i < n; i = j) {
			int64_t k = (rel[i] + off) / w;

			while (j < n && (rel[j] + off) / w == k)
				j++;
			if ((uint64_t)(j - i) > a)
				fail_msg("fixed: %d releases in window %lld", j - i, (long long)k);
		}
		break;
	case SL_STRAT_SESSION_WINDOW:
		/* As the receiver counts: a session opens at a request and lasts W. */
		for (int i = 0, j = 0; i < n; i = j) {
			while (j < n && rel[j] < rel[i] + w)
				j++;
			if ((uint64_t)(j - i) > a)
				fail_msg("session: %d releases in the session from %lld", j - i, (long long)rel[i]);
		}
		break;
	default: {
		/* The schedule is exactly the GCRA (releases never precede their slots,
		 * checked by the caller); actual releases of a leaky bucket are never
		 * closer than one interval less the release check's allowance. */
		int64_t inc = sl_gcra_increment(s, 1), tol = sl_gcra_tolerance(s);
		int64_t slack = SL_MIN(MS, inc / 4), tat = slots[0];

		for (int j = 0; j < n; j++) {
			if (slots[j] < tat - tol)
				fail_msg("gcra: slot %d is %lld ns early", j, (long long)(tat - tol - slots[j]));
			tat = SL_MAX(tat, slots[j]) + inc;
			if (s->burst <= 1 && j > 0 && rel[j] - rel[j - 1] < inc - slack)
				fail_msg("leaky: releases %d and %d are %lld ns apart", j - 1, j,
				         (long long)(rel[j] - rel[j - 1]));
		}
	}
	}
}

static void test_never_more_than_amount(void **state)
{
	static const uint32_t strategies[] = {SL_STRAT_LEAKY_BUCKET, SL_STRAT_TOKEN_BUCKET,
	                                      SL_STRAT_FIXED_WINDOW, SL_STRAT_SLIDING_WINDOW,
	                                      SL_STRAT_SESSION_WINDOW};
	static struct req r[300];
	static int64_t rel[300], slots[300];

	(void)state;
	for (uint64_t seed = 1; seed <= 40; seed++) {
		for (unsigned k = 0; k < SL_ARRAY_LEN(strategies); k++) {
			struct sl_spec s;
			struct sl_section box = {0}; /* a state, with its more after it */
			int64_t t = T0, off;
			int n;

			rng_state = seed * 1000 + k;
			s = spec(strategies[k], 1 + rnd(20), (1 + (int64_t)rnd(2000)) * MS);
			off = (int64_t)rnd(10 * S);
			n = 50 + (int)rnd(250);
			/* Bursts and quiet spells: arrivals 0..2 windows apart, often together. */
			for (int i = 0; i < n; i++) {
				if (rnd(3) == 0)
					t += (int64_t)rnd((uint64_t)(2 * s.window_ns / (int64_t)s.amount + 1));
				r[i] = (struct req){.arrival = t};
			}
			simulate(&s, &box.state, r, n, off);
			for (int i = 0; i < n; i++) {
				assert_true(r[i].released >= r[i].slot);
				assert_true(r[i].slot >= r[i].arrival);
				rel[i] = r[i].released;
				slots[i] = r[i].slot;
			}
			qsort(rel, (size_t)n, sizeof(rel[0]), cmp_i64);
			qsort(slots, (size_t)n, sizeof(slots[0]), cmp_i64);
			check_windows(&s, rel, slots, n, off);
		}
	}
}

/* Whatever a scribbled segment holds, the arithmetic stays defined (UBSan checks
 * this under `make asan`) and answers with some time. */
static void test_garbage_state(void **state)
{
	static const uint32_t strategies[] = {SL_STRAT_LEAKY_BUCKET, SL_STRAT_FIXED_WINDOW,
	                                      SL_STRAT_SLIDING_WINDOW, SL_STRAT_SESSION_WINDOW};

	(void)state;
	for (unsigned k = 0; k < SL_ARRAY_LEN(strategies); k++) {
		for (int fill = 0; fill < 3; fill++) {
			struct sl_spec s = spec(strategies[k], 7, S);
			struct sl_section box; /* a state, with its more after it */
			struct sl_undo undo;

			memset(&box, fill == 0 ? 0xff : fill == 1 ? 0x7f : 0x80, sizeof(box));
			sl_strategy_slot(&s, &box.state, T0, 1, INT64_MIN);
			sl_strategy_release_at(&s, &box.state, T0, 1, INT64_MAX);
			sl_strategy_charge(&s, &box.state, T0, 1, 0, &undo);
			sl_strategy_released(&s, &box.state, T0, 1, 0);
			sl_strategy_undo(&s, &box.state, &undo);
			sl_strategy_queued(&s, &box.state, T0, 0);
		}
	}
}

/* A spec at the ends of every range (found by the segment fuzzer: the horizon of
 * a day's wait, two windows and a tolerance, all clamped, overflowed when added to
 * now).  State at `now` is never taken for corrupt; state at the clamp is, or is
 * left alone, but the arithmetic never overflows (UBSan traps it under make asan). */
static void test_repair_extreme_spec(void **state)
{
	static const uint32_t strategies[] = {SL_STRAT_LEAKY_BUCKET, SL_STRAT_FIXED_WINDOW,
	                                      SL_STRAT_SLIDING_WINDOW, SL_STRAT_SESSION_WINDOW};

	(void)state;
	for (unsigned k = 0; k < SL_ARRAY_LEN(strategies); k++) {
		struct sl_spec s = spec(strategies[k], 7, S);
		struct sl_section box; /* a state, with its more after it */

		s.max_wait_ns = INT64_MAX;
		s.window_ns = INT64_MAX;
		s.burst = UINT64_MAX;
		memset(&box, 0, sizeof(box));
		assert_int_equal(sl_strategy_repair(&s, &box.state, T0, 0), 0);
		memset(&box, 0x7f, sizeof(box));
		sl_strategy_repair(&s, &box.state, INT64_MAX, INT64_MAX);
	}
}

/* A release made a little after its check (a connect inside the release) moves
 * on to when it was made; the session it opened opens then too, so the next
 * session's first release is a whole window after what the destination saw
 * first - not after the check, which let a destination opening its session at
 * the arrival count AMOUNT + 1. */
static void test_session_opens_when_made(void **state)
{
	struct sl_spec s = spec(SL_STRAT_SESSION_WINDOW, 3, S);
	struct sl_section box; /* a state, with its more after it */

	(void)state;
	memset(&box, 0, sizeof(box));
	sl_strategy_released(&s, &box.state, T0, 1, 0);
	sl_strategy_moved(&s, &box.state, T0, T0 + 40 * 1000, 1, 0); /* made 40 us later */
	sl_strategy_released(&s, &box.state, T0 + 100 * MS, 1, 0);
	sl_strategy_released(&s, &box.state, T0 + 200 * MS, 1, 0);
	assert_true(sl_strategy_release_at(&s, &box.state, T0 + 300 * MS, 1, 0) >= T0 + S + 40 * 1000);
	/* A later release moved within the session leaves its start alone. */
	sl_strategy_moved(&s, &box.state, T0 + 200 * MS, T0 + 200 * MS + 1000, 1, 0);
	assert_int_equal(box.state.rel_win, T0 + 40 * 1000);
}

/* Between any two of n releases (bytes cost[i] at rel[i]): the bytes never more
 * than amount x span / window + one piece, in integers (docs/design.md, "Bytes"). */
static void assert_bytes_bound(const struct sl_spec *s, const uint64_t *cost, const int64_t *rel, int n,
                               uint64_t piece)
{
	for (int i = 0; i < n; i++) {
		unsigned __int128 sum = 0;

		for (int j = i; j < n; j++) {
			sum += cost[j];
			assert_true(sum * (uint64_t)s->window_ns <=
			            (unsigned __int128)s->amount * (uint64_t)(rel[j] - rel[i]) +
			                (unsigned __int128)piece * (uint64_t)s->window_ns);
		}
	}
}

/* meter = bytes: one writer takes pieces of random sizes up to the largest, wakes
 * up to 3 ms late, and goes once the release check allows.  In any span between
 * two releases the bytes never exceed rate x span + one piece (docs/design.md,
 * "Bytes"); and a writer waking less late than a piece's slack loses nothing:
 * every release lands on the slot the schedule gave it. */
static void test_bytes_bound(void **state)
{
	struct sl_spec s = spec(SL_STRAT_LEAKY_BUCKET, 1024 * 1024, S);
	uint64_t piece, cost[600];
	int64_t rel[600];
	struct sl_section box; /* a state, with its more after it */

	(void)state;
	s.meter = SL_METER_BYTES;
	piece = sl_bytes_piece(&s);
	assert_int_equal(piece, 1024 * 1024 / 50);
	assert_int_equal(sl_bytes_slack(&s, piece), 0);
	assert_int_equal(sl_bytes_slack(&s, 2 * piece), 0);
	assert_true(sl_bytes_slack(&s, piece - piece / 8) >= 2 * MS);
	s.meter = SL_METER_CONNECTIONS;
	assert_int_equal(sl_bytes_slack(&s, 1), 0);
	s.meter = SL_METER_BYTES;

	for (int round = 0; round < 20; round++) {
		int64_t now = T0;

		memset(&box, 0, sizeof(box));
		for (int i = 0; i < 600; i++) {
			struct sl_undo undo;
			int64_t slot, may;

			cost[i] = rnd(4) == 0 ? piece : 1 + rnd(piece);
			slot = sl_strategy_slot(&s, &box.state, now, cost[i], 0);
			sl_strategy_charge(&s, &box.state, slot, cost[i], 0, &undo);
			now = slot + (int64_t)rnd(3 * MS);
			while ((may = sl_strategy_release_at(&s, &box.state, now, cost[i], 0)) > now)
				now = may + (int64_t)rnd(MS);
			sl_strategy_released(&s, &box.state, now, cost[i], 0);
			rel[i] = now;
			now += (int64_t)rnd(200 * 1000); /* the write itself */
		}
		assert_bytes_bound(&s, cost, rel, 600, piece);
	}

	/* Pieces of 7/8 of the largest, each write woken 1 ms late: on schedule. */
	memset(&box, 0, sizeof(box));
	for (int i = 0, c = (int)(piece - piece / 8); i < 100; i++) {
		struct sl_undo undo;
		int64_t slot = sl_strategy_slot(&s, &box.state, i ? rel[i - 1] + MS : T0, (uint64_t)c, 0);

		sl_strategy_charge(&s, &box.state, slot, (uint64_t)c, 0, &undo);
		rel[i] = SL_MAX(slot + MS, sl_strategy_release_at(&s, &box.state, slot + MS, (uint64_t)c, 0));
		sl_strategy_released(&s, &box.state, rel[i], (uint64_t)c, 0);
		if (i)
			assert_int_equal(rel[i] - rel[i - 1], sl_gcra_increment(&s, (uint64_t)c));
	}
}

/* meter = bytes, pieces grown at their release (sl_strategy_room, _grow): a
 * writer that reserves a quarter to 7/8 of a piece, comes up to 15 ms late and
 * takes on at release all the room there is.  The bound - rate x span + one
 * piece between any two releases - holds, each release at most one piece; and a
 * writer never later than what its piece leaves of the largest loses nothing:
 * what it carried matches the time since its first release at the rate. */
static void test_bytes_grown(void **state)
{
	struct sl_spec s = spec(SL_STRAT_LEAKY_BUCKET, 1024 * 1024, S);
	uint64_t piece, cost[600], carried = 0;
	int64_t rel[600];
	struct sl_section box;

	(void)state;
	s.meter = SL_METER_BYTES;
	piece = sl_bytes_piece(&s);
	for (int round = 0; round < 20; round++) {
		int64_t now = T0;

		memset(&box, 0, sizeof(box));
		for (int i = 0; i < 600; i++) {
			struct sl_undo undo;
			int64_t slot, may;
			uint64_t more;

			cost[i] = piece / 4 + rnd(piece - piece / 4 - piece / 8);
			slot = sl_strategy_slot(&s, &box.state, now, cost[i], 0);
			sl_strategy_charge(&s, &box.state, slot, cost[i], 0, &undo);
			now = slot + (int64_t)rnd(15 * MS);
			while ((may = sl_strategy_release_at(&s, &box.state, now, cost[i], 0)) > now)
				now = may + (int64_t)rnd(MS);
			sl_strategy_released(&s, &box.state, now, cost[i], 0);
			more = sl_strategy_room(&s, &box.state, now, cost[i]);
			assert_true(cost[i] + more <= piece);
			sl_strategy_grow(&s, &box.state, more);
			assert_int_equal(sl_strategy_room(&s, &box.state, now, cost[i] + more), 0);
			cost[i] += more;
			rel[i] = now;
			now += (int64_t)rnd(200 * 1000);
		}
		assert_bytes_bound(&s, cost, rel, 600, piece);
	}

	/* Quarter pieces, each write 10 ms late (less than the 15 ms a quarter
	 * leaves): every byte of the rate is carried. */
	memset(&box, 0, sizeof(box));
	for (int i = 0; i < 200; i++) {
		struct sl_undo undo;
		uint64_t c = piece / 4, more;
		int64_t slot = sl_strategy_slot(&s, &box.state, i ? rel[i - 1] : T0, c, 0);

		sl_strategy_charge(&s, &box.state, slot, c, 0, &undo);
		rel[i] = SL_MAX(slot + 10 * MS, sl_strategy_release_at(&s, &box.state, slot + 10 * MS, c, 0));
		sl_strategy_released(&s, &box.state, rel[i], c, 0);
		more = sl_strategy_room(&s, &box.state, rel[i], c);
		sl_strategy_grow(&s, &box.state, more);
		if (i)
			carried += c + more;
	}
	/* Within a piece and a byte a release of rounding. */
	assert_true(carried + piece + 200 >= (uint64_t)((unsigned __int128)(rel[199] - rel[0]) * s.amount /
	                                                (uint64_t)s.window_ns));
	/* A strategy other than a GCRA, or another meter, has no room. */
	s.meter = SL_METER_CONNECTIONS;
	assert_int_equal(sl_strategy_room(&s, &box.state, rel[199] + S, 1), 0);
	s.meter = SL_METER_BYTES;
	s.strategy = SL_STRAT_FIXED_WINDOW;
	assert_int_equal(sl_strategy_room(&s, &box.state, rel[199] + S, 1), 0);
}

/* The first writes' line (sl_strategy_first_at, _count): slots an interval apart
 * from the first asked, the burst let through at once, a line from another boot
 * (further ahead than any wait) started afresh, and no line for another meter
 * or a window. */
static void test_first_line(void **state)
{
	struct sl_spec s = spec(SL_STRAT_LEAKY_BUCKET, 500, S); /* 2 ms apart */
	struct sl_section box;
	int64_t at;

	(void)state;
	memset(&box, 0, sizeof(box));
	s.meter = SL_METER_CONNECTIONS;
	for (int i = 0; i < 5; i++) {
		at = sl_strategy_first_at(&s, &box.state, T0);
		assert_int_equal(at, T0 + i * 2 * MS);
		sl_strategy_first_count(&s, &box.state, at);
	}
	/* Asked after the line has passed: now. */
	assert_int_equal(sl_strategy_first_at(&s, &box.state, T0 + S), T0 + S);
	/* A burst of 3: three at once, then an interval apart. */
	memset(&box, 0, sizeof(box));
	s.burst = 3;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(at = sl_strategy_first_at(&s, &box.state, T0), T0);
		sl_strategy_first_count(&s, &box.state, at);
	}
	assert_int_equal(sl_strategy_first_at(&s, &box.state, T0), T0 + 2 * MS);
	s.burst = 1;
	/* A line from another boot's clock: further ahead than any wait (30 s, and
	 * two windows), afresh. */
	s.max_wait_ns = 30 * S;
	box.state.first_tat_ns = T0 + 1000 * S;
	assert_int_equal(sl_strategy_first_at(&s, &box.state, T0), T0);
	sl_strategy_first_count(&s, &box.state, T0);
	assert_int_equal(box.state.first_tat_ns, T0 + 2 * MS);
	/* No line for requests or bytes, nor for a window (whose fields these are). */
	s.meter = SL_METER_REQUESTS;
	assert_int_equal(sl_strategy_first_at(&s, &box.state, T0), T0);
	s.meter = SL_METER_CONNECTIONS;
	s.strategy = SL_STRAT_FIXED_WINDOW;
	box.state.win = 12345;
	sl_strategy_first_count(&s, &box.state, T0);
	assert_int_equal(box.state.win, 12345);
	assert_int_equal(sl_strategy_first_at(&s, &box.state, T0), T0);
}

/* tolerance = L: randomised arrivals and late wake-ups never put more than
 * 1 + (S + T + L)/interval releases in any span S (docs/config.md, "How a limit
 * releases"), for L from none to several intervals. */
static void test_tolerance_bound(void **state)
{
	static struct req r[300];
	static int64_t rel[300];

	(void)state;
	for (uint64_t seed = 1; seed <= 60; seed++) {
		struct sl_spec s;
		struct sl_section box = {0};
		int64_t t = T0, inc, span;
		int n;

		rng_state = seed * 7919;
		s = spec(seed % 2 ? SL_STRAT_LEAKY_BUCKET : SL_STRAT_TOKEN_BUCKET, 1 + rnd(50), (1 + (int64_t)rnd(1000)) * MS);
		s.burst = 1 + rnd(3);
		inc = sl_gcra_increment(&s, 1);
		s.tolerance_us = (uint32_t)(rnd((uint64_t)(4 * inc)) / 1000);
		n = 50 + (int)rnd(250);
		for (int i = 0; i < n; i++) {
			if (rnd(2) == 0)
				t += (int64_t)rnd((uint64_t)(2 * inc + 1));
			r[i] = (struct req){.arrival = t};
		}
		simulate(&s, &box.state, r, n, 0);
		for (int i = 0; i < n; i++)
			rel[i] = r[i].released;
		qsort(rel, (size_t)n, sizeof(rel[0]), cmp_i64);
		span = sl_gcra_tolerance(&s) + sl_gcra_late(&s);
		for (int i = 0; i < n; i++)
			for (int j = i + 1; j < n; j++)
				if ((j - i) * inc > rel[j] - rel[i] + span)
					fail_msg("seed %llu: %d releases in %lld ns (interval %lld, T + L %lld)",
					         (unsigned long long)seed, j - i + 1, (long long)(rel[j] - rel[i]),
					         (long long)inc, (long long)span);
	}
}

/* A backlog whose every wake-up comes `late` (a busy machine's scheduler): with
 * tolerance 0 each release is charged from when it went, and the next waits as
 * much longer; with tolerance >= late the line keeps its slots, and the backlog
 * its rate.  An idle spell longer than the tolerance earns no burst. */
static void test_tolerance_makes_up(void **state)
{
	struct sl_spec s = spec(SL_STRAT_LEAKY_BUCKET, 100, S); /* 10 ms apart */
	const int64_t late = 3 * MS;

	(void)state;
	for (uint32_t tol_us = 0; tol_us <= 5000; tol_us += 5000) {
		struct sl_section box;
		int64_t slots[100], first = 0, last = 0, now;

		memset(&box, 0, sizeof(box));
		s.tolerance_us = tol_us;
		for (int i = 0; i < 100; i++)
			slots[i] = take(&s, &box.state, T0, 0);
		for (int i = 0; i < 100; i++) {
			int64_t t = SL_MAX(slots[i], last);

			t = SL_MAX(t, sl_strategy_release_at(&s, &box.state, t, 1, 0)) + late;
			assert_true(sl_strategy_release_at(&s, &box.state, t, 1, 0) <= t);
			sl_strategy_released(&s, &box.state, t, 1, 0);
			if (i == 0)
				first = t;
			last = t;
		}
		/* 99 intervals of 13 ms, or with the lateness made up 10 ms each after
		 * the first (which came to an idle line: nothing to make up from). */
		assert_int_equal(last - first, tol_us ? 13 * MS + 98 * 10 * MS : 99 * 13 * MS);
		/* Idle for longer than the tolerance: two at once go an interval apart. */
		now = last + 10 * MS + 6 * MS;
		assert_int_equal(take(&s, &box.state, now, 0), now);
		sl_strategy_released(&s, &box.state, now, 1, 0);
		assert_int_equal(take(&s, &box.state, now, 0), now + 10 * MS);
		assert_int_equal(sl_strategy_release_at(&s, &box.state, now, 1, 0), now + 10 * MS);
	}
	/* A fleet's share keeps the fleet's spacing: no tolerance there. */
	s.tolerance_us = 5000;
	s.scope = SL_SCOPE_FLEET;
	assert_int_equal(sl_gcra_late(&s), 0);
	s.scope = SL_SCOPE_MACHINE;
	s.tolerance_us = UINT32_MAX; /* a scribbled segment: clamped to a minute */
	assert_int_equal(sl_gcra_late(&s), 60 * S);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_window_edges),
		cmocka_unit_test(test_calendar_month),
		cmocka_unit_test(test_session_window_edges),
		cmocka_unit_test(test_sliding_window_edges),
		cmocka_unit_test(test_undo),
		cmocka_unit_test(test_never_more_than_amount),
		cmocka_unit_test(test_garbage_state),
		cmocka_unit_test(test_repair_extreme_spec),
		cmocka_unit_test(test_session_opens_when_made),
		cmocka_unit_test(test_bytes_bound),
		cmocka_unit_test(test_bytes_grown),
		cmocka_unit_test(test_first_line),
		cmocka_unit_test(test_tolerance_bound),
		cmocka_unit_test(test_tolerance_makes_up),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
