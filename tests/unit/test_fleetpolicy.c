/*
 * The fleet's lease policy (src/daemon/fleetpolicy.c) and the water-filling it
 * relies on (src/daemon/fleet.lua, run here by a real redis-server on a socket in
 * a temporary directory): demand, grants from answers, outage shares, answers
 * refused, and the fleet's grants never above the budget while demands change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fleet_lua.h"
#include "sluice/common.h"
#include "sluice/fleetpolicy.h"

#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000LL
#define S (1000 * MS)

static struct sl_fleet_item item(char kind, uint64_t limit, int64_t window_ns)
{
	struct sl_fleet_item it = {.kind = kind, .limit = limit, .window_ns = window_ns, .burst = 1};

	snprintf(it.key, sizeof(it.key), "sluice:{t}:i:api:%c", kind);
	return it;
}

/* --- answers believed or not --- */

static void test_plausible(void **state)
{
	struct sl_fleet_item its[2] = {item('r', 100000, S), item('c', 4, S)};
	enum { E0 = SL_FLEET_HEAD_OUT, E1 = SL_FLEET_HEAD_OUT + SL_FLEET_FIELDS_OUT };
	long long good[SL_FLEET_HEAD_OUT + 2 * SL_FLEET_FIELDS_OUT] = {1700000000000LL, 0, 1700000000000123LL};
	long long v[sizeof(good) / sizeof(good[0])];

	(void)state;
	good[E0] = 50000;
	good[E0 + 1] = 2;
	good[E1] = 4;
	good[E1 + 1] = 2;
	its[0].grid = 1;
	good[E0 + 5] = 0 * 8192 + 2048; /* ranks [0, 2048): half the grid */
	assert_true(sl_fleet_plausible(its, 2, good));
	memcpy(v, good, sizeof(v));
	v[2] = 1700000002000000LL; /* the two readings of Redis's clock 2 s apart */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[0] = 9000000000000000LL; /* a clock past 2200: its microseconds in ns overflow */
	v[2] = v[0] * 1000;
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[E0 + 6] = 100 * 8192 + 50; /* a run that ends before it starts */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[E0 + 6] = 100 * 8192 + 4097; /* past the frame */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[E1 + 5] = 8; /* runs for places */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[0] = 1500000000000LL; /* a clock before 2020 */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[E1] = 5; /* five places of four */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[E0] = 100001; /* a share above the whole rate */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[E0 + 4] = good[0] + 34560000001LL; /* a pause past 400 days */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[E0 + 1] = (long long)UINT32_MAX + 1; /* machines past any count */
	assert_false(sl_fleet_plausible(its, 2, v));
	memcpy(v, good, sizeof(v));
	v[E0] = -1;
	assert_false(sl_fleet_plausible(its, 2, v));
}

/* --- grants from an answer --- */

static void test_answer_rate(void **state)
{
	struct sl_fleet_item it = item('r', 100000, S);
	struct sl_fleet_round r = {0};
	struct sl_grant g;
	long long e[SL_FLEET_FIELDS_OUT] = {40000, 3, 0, 0, 0};

	(void)state;
	it.burst = 10;
	it.held = 60000;
	it.demand = 90000;
	assert_int_equal(sl_fleet_answer(&it, e, 1700000000000LL, MS, 5 * S, 7 * S, 0, &r, &g), 1);
	assert_int_equal(g.flags, SL_LEASE_RATE);
	assert_int_equal(g.amount, 40000); /* thousandths per 1000 windows */
	assert_int_equal(g.window_ns, 1000 * S);
	assert_int_equal(g.burst, 4); /* its part of the section's 10 */
	assert_int_equal(g.machines, 3);
	assert_int_equal(g.valid_ns, 7 * S);
	assert_true(r.shrank);  /* 60 -> 40 */
	assert_true(r.starved); /* 40 of 90 asked */
	assert_true(r.above);   /* 40 > 100 / 4 */
	assert_int_equal(r.machines, 3);
	/* A share the same as held, all it asked, below an equal part with one more. */
	memset(&r, 0, sizeof(r));
	it.held = 20000;
	it.demand = 20000;
	e[0] = 20000;
	sl_fleet_answer(&it, e, 1700000000000LL, MS, 5 * S, 7 * S, 0, &r, &g);
	assert_false(r.shrank || r.starved || r.above);
}

/* A grid item's runs come with its slots' interval (its limit, evenly) and the
 * origin it is given; a rate item that is not the grid's has none. */
static void test_answer_grid(void **state)
{
	struct sl_fleet_item it = item('r', 100000, S); /* 100/s */
	struct sl_fleet_round r = {0};
	struct sl_grant g;
	long long e[SL_FLEET_FIELDS_OUT] = {50000, 2, 0, 0, 0, 0 * 8192 + 1024, 3072 * 8192 + 4096};

	(void)state;
	it.grid = 1;
	assert_int_equal(sl_fleet_answer(&it, e, 1700000000000LL, MS, 5 * S, 7 * S, -42, &r, &g), 1);
	assert_int_equal(g.grid.n, 2);
	assert_int_equal(g.grid.interval_ns, 10 * MS);
	assert_int_equal(g.grid.origin_ns, -42);
	assert_int_equal(g.grid.run[0].from, 0);
	assert_int_equal(g.grid.run[0].to, 1024);
	assert_int_equal(g.grid.run[1].from, 3072);
	assert_int_equal(g.grid.run[1].to, 4096);
	assert_int_equal(sl_grid_ranks(&g.grid), 2048);
	it.grid = 0;
	assert_int_equal(sl_fleet_answer(&it, e, 1700000000000LL, MS, 5 * S, 7 * S, -42, &r, &g), 1);
	assert_int_equal(g.grid.n, 0);
	/* The origin: earlier estimates at once, later ones creep, a step is a step. */
	assert_int_equal(sl_fleet_grid_origin(0, 0, 500, MS), 500);
	assert_int_equal(sl_fleet_grid_origin(1, 1000, 400, MS), 400);
	/* Later by 3 ms with an answer 3 ms slow: the delay, followed slowly. */
	assert_int_equal(sl_fleet_grid_origin(1, 1000, 1000 + 3 * MS, 3 * MS), 1000 + SL_FLEET_GRID_CREEP_NS);
	assert_int_equal(sl_fleet_grid_origin(1, 1000, 1000 + 5, MS), 1005);
	/* Later by 9 ms on an answer 1 ms slow: Redis's clock moved. */
	assert_int_equal(sl_fleet_grid_origin(1, 1000, 1000 + 9 * MS, MS), 1000 + 9 * MS);
	{
		char buf[SL_GRID_RUNS * 10 + 2];

		assert_string_equal(sl_fleet_grid_runs(&g.grid, buf, sizeof(buf)), "-");
		sl_fleet_answer(&(struct sl_fleet_item){.kind = 'r', .limit = 100000, .window_ns = S, .grid = 1}, e,
		                1700000000000LL, MS, 5 * S, 7 * S, 0, &r, &g);
		assert_string_equal(sl_fleet_grid_runs(&g.grid, buf, sizeof(buf)), "0-1024.3072-4096");
	}
}

static void test_answer_places_and_windows(void **state)
{
	struct sl_fleet_item c = item('c', 8, S), f = item('f', 300, 10 * S);
	struct sl_fleet_round r = {0};
	struct sl_grant g;
	long long rnow = 1700000000000LL;
	long long pe[SL_FLEET_FIELDS_OUT] = {3, 2, 0, 0, 0};
	long long fe[SL_FLEET_FIELDS_OUT] = {120, 2, 170000000, rnow + 4000, 0};

	(void)state;
	c.held = 5;
	assert_int_equal(sl_fleet_answer(&c, pe, rnow, MS, 9 * S, 10 * S, 0, &r, &g), 1);
	assert_int_equal(g.flags, SL_LEASE_PLACES);
	assert_int_equal(g.places, 3);
	assert_true(r.shrank);
	/* A chunk ends early rather than late: the round trip and two milliseconds. */
	assert_int_equal(sl_fleet_answer(&f, fe, rnow, 3 * MS, 9 * S, 10 * S, 0, &r, &g), 1);
	assert_int_equal(g.flags, SL_LEASE_CHUNK);
	assert_int_equal(g.amount, 120);
	assert_int_equal(g.chunk, 170000000);
	assert_int_equal(g.until_ns, 9 * S - 3 * MS + (4000 - 2) * MS);
	/* A window that ended before Redis answered: nothing to write. */
	fe[3] = rnow;
	assert_int_equal(sl_fleet_answer(&f, fe, rnow, 3 * MS, 9 * S, 10 * S, 0, &r, &g), 0);
}

/* --- while Redis is away --- */

static void test_outage_shares(void **state)
{
	struct sl_fleet_item r = item('r', 100000, S), c = item('c', 9, S);
	struct sl_fleet_item f = item('f', 300, 10 * S), l = item('l', 300, 10 * S);
	struct sl_lease none = {0}, rate = {.flags = SL_LEASE_RATE, .amount = 70000};
	struct sl_lease chunk = {.flags = SL_LEASE_CHUNK, .until_ns = 20 * S};
	struct sl_grant g;
	int64_t rms = 1700000003000LL; /* 3 s into a 10 s window */

	(void)state;
	/* Never leased: its part over hosts. */
	assert_int_equal(sl_fleet_outage_grant(&r, &none, 4, S, rms, &g), 1);
	assert_int_equal(g.flags, SL_LEASE_RATE | SL_LEASE_OUTAGE);
	assert_int_equal(g.amount, 25000);
	assert_int_equal(sl_fleet_outage_grant(&c, &none, 4, S, rms, &g), 1);
	assert_int_equal(g.places, 2);
	assert_int_equal(sl_fleet_outage_grant(&f, &none, 3, S, rms, &g), 1);
	assert_int_equal(g.amount, 100);
	assert_int_equal(g.until_ns, S + 7 * S); /* the window's end on Redis's clock */
	assert_int_equal(sl_fleet_outage_grant(&l, &none, 3, S, rms, &g), 1);
	assert_int_equal(g.amount, 50); /* halved: two parts may fall in one span */
	/* hosts = 0 is one host, never a division by zero. */
	assert_int_equal(sl_fleet_outage_grant(&r, &none, 0, S, rms, &g), 1);
	assert_int_equal(g.amount, 100000);
	/* Leases in hand stay as they are; a chunk until it ends. */
	assert_int_equal(sl_fleet_outage_grant(&r, &rate, 4, S, rms, &g), 0);
	assert_int_equal(sl_fleet_outage_grant(&f, &chunk, 4, S, rms, &g), 0);
	assert_int_equal(sl_fleet_outage_grant(&f, &chunk, 4, 21 * S, rms, &g), 1);
}

/* --- demand --- */

/* A fleet section of 100/s counting requests, and its rate item remembered in memo. */
static void fleet_rate_100(struct sl_section *sec, struct sl_fleet_item *it, struct sl_fleet_memo *memo)
{
	sec->spec.amount = 100;
	sec->spec.window_ns = S;
	sec->spec.scope = SL_SCOPE_FLEET;
	it->memo = memo;
}

static void test_demand(void **state)
{
	struct sl_section sec = {0}; /* its state, with the more after it */
	struct sl_fleet_memo memo = {0};
	struct sl_fleet_item it = item('r', 0, S);
	struct sl_fleet_env env = {.refresh_ns = S, .hosts = 4};

	(void)state;
	fleet_rate_100(&sec, &it, &memo);
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S);
	assert_int_equal(it.demand, 0); /* nothing measured yet */
	assert_int_equal(it.limit, 100000);
	/* 40 a second went: a tenth more and half a request. */
	sec.state.admitted = 40;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S);
	assert_int_equal(it.demand, 44500);
	/* A lull shorter than a round: falls by 30% at most. */
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S + 600 * MS);
	assert_int_equal(it.demand, 31150);
	/* Callers held for want of a share: an equal part at least, at once. */
	sec.more.lease.misses = 20;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 12 * S + 200 * MS);
	assert_true(it.demand >= 25000);
	/* No room to remember the item: it asks for nothing. */
	it.memo = NULL;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 14 * S);
	assert_int_equal(it.demand, 0);
}

/* A flow that stopped - no request, queue, caller held or looking, for a round
 * and three of its own gaps - asks for nothing at once; a caller held (its
 * promise to look again not yet past) keeps the demand, and one whose promise
 * lapsed (it was killed) does not. */
static void test_demand_stops(void **state)
{
	struct sl_section sec = {0};
	struct sl_fleet_memo memo = {0};
	struct sl_fleet_item it = item('r', 0, S);
	struct sl_fleet_env env = {.refresh_ns = S / 4, .hosts = 2};

	(void)state;
	fleet_rate_100(&sec, &it, &memo);
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S);
	sec.state.admitted = 10; /* 40/s over a round (10/s averaged) */
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 250 * MS);
	assert_true(it.demand > 10000);
	/* A caller held, looking again 50 ms from now: the demand stays. */
	sec.more.lease.held_until_ns = 10 * S + 550 * MS;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 500 * MS);
	assert_true(it.demand > 5000);
	/* ... and is still there a round later while its look is at most
	 * HELD_SLACK_NS (100 ms) past. */
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 640 * MS);
	assert_true(it.demand > 2000);
	/* Its look is 150 ms past (it was killed), nothing else: but three gaps of
	 * its flow (about 7/s averaged) since it was last seen are not over. */
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 800 * MS);
	assert_true(it.demand > 0);
	/* Then nothing at all, at once (a fade would ask 30% less). */
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S + 200 * MS);
	assert_int_equal(it.demand, 0);
	assert_true(memo.flow_avg == 0);

	/* A light flow, one request a second: keeps asking between its requests. */
	sec.more.lease.held_until_ns = 0;
	sec.state.admitted = 11;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S + 500 * MS);
	for (int64_t t = 11 * S + 750 * MS; t < 13 * S + 500 * MS; t += 250 * MS) {
		sl_fleet_measure(&env, &it, &sec, &sec.state, 0, t);
		assert_true(it.demand > 0);
	}
}

/* A held_until_ns scribbled far ahead is no caller held; a byte meter's demand
 * fades as it did (its gaps are bytes', not requests'). */
static void test_demand_stops_scribble_bytes(void **state)
{
	struct sl_section sec = {0};
	struct sl_fleet_memo memo = {0};
	struct sl_fleet_item it = item('r', 0, S);
	struct sl_fleet_env env = {.refresh_ns = S / 4, .hosts = 2};
	uint64_t before;

	(void)state;
	fleet_rate_100(&sec, &it, &memo);
	sec.more.lease.held_until_ns = INT64_MAX;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S);
	sec.state.admitted = 10;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 250 * MS);
	assert_true(it.demand > 0);
	for (int64_t t = 10 * S + 500 * MS; t <= 12 * S; t += 250 * MS)
		sl_fleet_measure(&env, &it, &sec, &sec.state, 0, t);
	assert_int_equal(it.demand, 0);

	memset(&sec, 0, sizeof(sec));
	memset(&memo, 0, sizeof(memo));
	fleet_rate_100(&sec, &it, &memo);
	sec.spec.meter = SL_METER_BYTES;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S);
	sec.state.admitted = 10;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 250 * MS);
	before = it.demand;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 500 * MS);
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 750 * MS);
	assert_true(it.demand > 0 && it.demand < before);
}

/* Places: callers asleep for one are counted; a caller that found every place
 * in use and waits elsewhere (a deferred connect) shows only as a miss, and asks
 * one more than is open - never only what the machine holds, which left one that
 * fell to none asking none. */
static void test_demand_places(void **state)
{
	struct sl_section sec = {0};
	struct sl_fleet_memo memo = {0};
	struct sl_fleet_item it = item('c', 0, S);
	struct sl_fleet_env env = {.refresh_ns = S / 4, .hosts = 3};

	(void)state;
	sec.spec.concurrency = 6;
	sec.spec.scope = SL_SCOPE_FLEET;
	it.memo = &memo;
	sec.state.conc_open = 1;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S);
	assert_int_equal(it.demand, 1); /* one open, nobody waiting */
	sec.state.conc_waiters = 2;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 250 * MS);
	assert_int_equal(it.demand, 4); /* and two asleep for a place: one more */
	sec.state.conc_waiters = 0;
	sec.state.conc_open = 0;
	sec.more.lease.misses += 3; /* deferred connects found no place */
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 500 * MS);
	assert_int_equal(it.demand, 1);
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S + 750 * MS);
	assert_int_equal(it.demand, 0); /* no miss since: nobody waits */
}

/* On the grid, callers held with no ranks at all are backlog: a machine
 * starting from nothing asks for them at once, not for an equal part only.
 * With claims = off (the default) a light item is never served by claims. */
static void test_demand_held_on_grid(void **state)
{
	struct sl_section sec = {0};
	struct sl_fleet_memo memo = {0};
	struct sl_fleet_item it = item('r', 0, S);
	struct sl_fleet_env env = {.refresh_ns = S / 4, .hosts = 50};

	(void)state;
	fleet_rate_100(&sec, &it, &memo);
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S);
	assert_true(it.grid); /* requests, burst 1: released on the grid */
	/* 40 looks in a second, each SL_LEASE_RETRY_NS apart: two callers held.
	 * Within a round of 250 ms they are 8 a second, and one more. */
	sec.more.lease.misses = 40;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S);
	assert_int_equal(it.demand, 9000);
	assert_false(it.claims); /* claims = off: ranks, however light */
}

/* A grid item is served by claims while its flow is a few a round, by ranks
 * above (docs/design.md, "Claims"); served by claims, it asks for what it could
 * not claim. */
static void test_claims_switching(void **state)
{
	struct sl_section sec = {0};
	struct sl_fleet_memo memo = {0};
	struct sl_fleet_item it = item('r', 0, S);
	struct sl_fleet_env env = {.refresh_ns = S / 4, .hosts = 50, .claims = 1};

	(void)state;
	fleet_rate_100(&sec, &it, &memo);
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 10 * S);
	assert_true(it.grid); /* requests, burst 1: released on the grid */
	/* No flow yet: served by claims, and asking for what it could not claim -
	 * three a round are 12 a second, and half a request. */
	assert_true(it.claims);
	memo.claims_short = 3;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S);
	assert_true(it.claims);
	assert_int_equal(it.demand, 12500);
	assert_int_equal(memo.claims_short, 0);
	/* Stepping up to a flow of ranks' size (40 a second, 10 a round) that claims
	 * cannot keep up with (two it could not claim): served by ranks at the first
	 * measure that sees it, a quarter second, though the second's average is
	 * only a quarter of the way there; its callers held are counted as backlog
	 * again.  Without a shortfall it waits for the average. */
	sec.state.admitted += 10;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S + S / 4);
	assert_true(it.claims);
	sec.state.admitted += 10;
	memo.claims_short = 2;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S + S / 2);
	assert_true(memo.flow_avg * (double)env.refresh_ns < SL_FLEET_RANKS_FROM);
	assert_false(it.claims);
	/* A lull of one measure is not a return to claims while the average holds
	 * (three quarter seconds at 40: over four a round). */
	sec.state.admitted += 10;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S + 3 * S / 4);
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 11 * S + S);
	assert_false(it.claims);
	/* Back to claims once it falls to under three a round. */
	for (int s = 12; s < 22; s++)
		sl_fleet_measure(&env, &it, &sec, &sec.state, 0, s * S);
	assert_true(it.claims);
	/* Three machines: an equal part is eight a round, ranks' size - never
	 * served by claims, however light. */
	env.hosts = 3;
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, 23 * S);
	assert_false(it.claims);
}

/* A machine served by claims whose flow its part holds down (it uses the part
 * whole) asks for a quarter more, and goes over to ranks once its flow has
 * stayed at three a round or more for SL_FLEET_BUSY_NS. */
static void test_claims_part_held_down(void **state)
{
	struct sl_section sec = {0};
	struct sl_fleet_memo memo = {0};
	struct sl_fleet_item it = item('r', 0, S);
	struct sl_fleet_env env = {.refresh_ns = S / 4, .hosts = 20, .claims = 1};
	int64_t t = 10 * S;

	(void)state;
	fleet_rate_100(&sec, &it, &memo);
	sl_fleet_measure(&env, &it, &sec, &sec.state, 0, t);
	assert_true(it.claims);
	/* Its part 4/s, used whole for four seconds at a quarter second a measure:
	 * more asked each round than the flow alone would ask. */
	sl_state_more(&sec.state)->lease.flags = SL_LEASE_RATE | SL_LEASE_CLAIMING;
	sl_state_more(&sec.state)->lease.amount = 4 * SL_FLEET_SCALE;
	for (int i = 0; i < 16; i++) {
		t += S / 4;
		sec.state.admitted += 1;
		sl_fleet_measure(&env, &it, &sec, &sec.state, 0, t);
	}
	assert_true(it.claims);
	assert_true(it.demand >= 6 * SL_FLEET_SCALE);
	/* Now 16/s (four a round, under six) for SL_FLEET_BUSY_NS: over to ranks. */
	for (int64_t end = t + SL_FLEET_BUSY_NS + S / 4; t < end;) {
		assert_true(it.claims);
		t += S / 4;
		sec.state.admitted += 4;
		sl_fleet_measure(&env, &it, &sec, &sec.state, 0, t);
	}
	assert_false(it.claims);
}

/* --- the water-filling, in a real Redis --- */

static char dir[] = "/tmp/sluice-fleetpolicy.XXXXXX";
static char sock[128];
static pid_t redis_pid;
static redisContext *rc;
static char sha[64];

static int redis_up(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/redis.sock", dir);
	if ((redis_pid = fork()) == 0) {
		int null = open("/dev/null", O_WRONLY);

		/* Its start-up chatter is not the test's output. */
		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
		       "--appendonly", "no", "--dir", dir, "--loglevel", "warning", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && !rc; i++) {
		struct timespec ts = {0, 50 * MS};
		redisContext *c = redisConnectUnix(sock);

		if (c && !c->err)
			rc = c;
		else {
			if (c)
				redisFree(c);
			nanosleep(&ts, NULL);
		}
	}
	if (!rc) {
		fprintf(stderr, "test_fleetpolicy: redis-server did not start (scripts/deps.sh installs it)\n");
		return -1;
	}
	{
		redisReply *r = redisCommand(rc, "SCRIPT LOAD %s", sl_fleet_lua);

		if (!r || r->type != REDIS_REPLY_STRING)
			return -1;
		snprintf(sha, sizeof(sha), "%s", r->str);
		freeReplyObject(r);
	}
	return 0;
}

static int redis_down(void **state)
{
	char path[256];

	(void)state;
	if (rc)
		redisFree(rc);
	if (redis_pid > 0) {
		kill(redis_pid, SIGTERM);
		waitpid(redis_pid, NULL, 0);
	}
	unlink(sock);
	snprintf(path, sizeof(path), "%s/dump.rdb", dir);
	unlink(path);
	rmdir(dir);
	return 0;
}

static void flush(void)
{
	redisReply *r = redisCommand(rc, "FLUSHALL");

	assert_non_null(r);
	freeReplyObject(r);
}

/* One machine's call for one item, as fleet.c sends it (lease time ttl_ms):
 * returns the grant, and in *live the machines the script counts for the item.
 *
 * The script keeps time by Redis's clock, which the test does not drive, so no
 * case asserts that something happens before a time: only after one.  A case
 * that is not about expiry uses LONG_TTL, which outlives any run however slow
 * the machine; the expiry cases wait past a lease life before they judge, and
 * what must still be there has a life of seconds, not milliseconds. */
#define LONG_TTL 600000
static long long lease_ttl(const char *machine, char kind, uint64_t limit, uint64_t demand, uint64_t held,
                           int settle_ms, int ttl_ms, long long *live)
{
	char k[2] = {kind, 0}, lim[32], dem[32], hel[32], settle[16], ttl[16];
	const char *argv[] = {"EVALSHA", sha, "2", "sluice:{t}:epoch", "sluice:{t}:i:api:r", machine, ttl,
	                      settle, "995000", "1", k, lim, "1000", dem, hel, "0", "-"};
	redisReply *r;
	long long g;

	snprintf(lim, sizeof(lim), "%llu", (unsigned long long)limit);
	snprintf(dem, sizeof(dem), "%llu", (unsigned long long)demand);
	snprintf(hel, sizeof(hel), "%llu", (unsigned long long)held);
	snprintf(settle, sizeof(settle), "%d", settle_ms);
	snprintf(ttl, sizeof(ttl), "%d", ttl_ms);
	r = redisCommandArgv(rc, (int)(sizeof(argv) / sizeof(argv[0])), argv, NULL);
	assert_non_null(r);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("fleet.lua: %s", r->str);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_int_equal(r->elements, SL_FLEET_HEAD_OUT + SL_FLEET_FIELDS_OUT);
	g = r->element[SL_FLEET_HEAD_OUT]->integer;
	if (live)
		*live = r->element[SL_FLEET_HEAD_OUT + 1]->integer;
	freeReplyObject(r);
	return g;
}

static long long lease(const char *machine, char kind, uint64_t limit, uint64_t demand, uint64_t held,
                       int settle_ms)
{
	return lease_ttl(machine, kind, limit, demand, held, settle_ms, LONG_TTL, NULL);
}

static void redis_do(const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = redisvCommand(rc, fmt, ap);
	va_end(ap);
	assert_non_null(r);
	assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
	freeReplyObject(r);
}

#define MACHINES 5
static const char *const names[MACHINES] = {"m0", "m1", "m2", "m3", "m4"};

/* What the fleet may use at once: each machine's latest grant (it uses a new one
 * as soon as it has it; a larger old one is gone from it then). */
static long long in_effect(const long long *grant, int n)
{
	long long sum = 0;

	for (int i = 0; i < n; i++)
		sum += grant[i];
	return sum;
}

/* Three machines at 100/s: one asks 10/s and gets it; the two asking more split
 * the rest evenly; the sum stays within 99.5% of the rate at every call. */
static void test_water_filling(void **state)
{
	uint64_t limit = 100000, budget = limit * 995 / 1000;
	uint64_t demand[3] = {10000, 200000, 200000};
	long long grant[3] = {0, 0, 0};

	(void)state;
	flush();
	for (int round = 0; round < 8; round++)
		for (int m = 0; m < 3; m++) {
			grant[m] = lease(names[m], 'r', limit, demand[m], (uint64_t)grant[m], 0);
			assert_true(in_effect(grant, 3) <= (long long)budget);
		}
	assert_int_equal(grant[0], 10000);
	assert_true(llabs(grant[1] - grant[2]) <= 1000);
	assert_true(grant[1] + grant[2] >= (long long)budget - 10000 - 2000);
	/* Places are counted whole: the budget is the limit itself. */
	flush();
	{
		long long p[2] = {0, 0};

		for (int round = 0; round < 4; round++)
			for (int m = 0; m < 2; m++) {
				p[m] = lease(names[m], 'c', 7, 10, (uint64_t)p[m], 0);
				assert_true(p[0] + p[1] <= 7);
			}
		assert_true(p[0] + p[1] >= 6);
	}
}

/* fleet.lua keeps a water level for its LEVEL_MS (100 ms) unless the number of
 * machines or the budget changes.  Demands that stop changing are settled in
 * rounds taken past that: the first may still be granted on a level worked out
 * before the change, the second cuts the machines above the new level, the third
 * hears them report the cut (until then the others count what those held) and
 * the fourth hands out what the cut freed.  The order of the calls inside a
 * round, and where the 100 ms fall among them, is then no longer the test's
 * luck: a clean run under qemu once caught a round cut and not yet heard. */
#define SETTLE_ROUNDS 4

static void past_level(void)
{
	struct timespec ts = {0, 120 * MS};

	nanosleep(&ts, NULL);
}

/* Five machines whose demands change at every call, in a changing order: the
 * grants in effect never pass the budget.  When the demands stop changing, two
 * settling rounds later (above) every machine that asks for less than an equal
 * part has all it asks, and the budget is handed out. */
static void test_budget_through_changes(void **state)
{
	uint64_t limit = 100000, budget = limit * 995 / 1000, seed = 12345;
	long long grant[MACHINES] = {0}, asked = 0;
	uint64_t demand[MACHINES] = {0};

	(void)state;
	flush();
	for (int call = 0; call < 400; call++) {
		int m;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		m = (int)((seed >> 33) % MACHINES);
		demand[m] = (seed >> 13) % 4 == 0 ? 0 : (seed >> 17) % (limit / 2);
		grant[m] = lease(names[m], 'r', limit, demand[m], (uint64_t)grant[m], 0);
		assert_true(grant[m] >= 0);
		assert_true(in_effect(grant, MACHINES) <= (long long)budget);
	}
	demand[0] = 5000;
	demand[1] = 12000;
	for (int m = 2; m < MACHINES; m++)
		demand[m] = limit;
	for (int round = 0; round < SETTLE_ROUNDS; round++) {
		past_level();
		for (int m = 0; m < MACHINES; m++) {
			grant[m] = lease(names[m], 'r', limit, demand[m], (uint64_t)grant[m], 0);
			assert_true(in_effect(grant, MACHINES) <= (long long)budget);
		}
	}
	for (int m = 0; m < MACHINES; m++)
		asked += (long long)demand[m];
	assert_true(grant[0] >= 5000);
	assert_true(grant[1] >= 12000);
	/* Rounding: a thousandth of a request per machine, at most. */
	assert_true(in_effect(grant, MACHINES) >= SL_MIN(asked, (long long)budget) - MACHINES);
}

/* One machine's call for a rate on the grid: its runs held in, its runs granted
 * out (from * 8192 + to each, 0: none); returns the grant. */
static const char *grid_kind = "g"; /* "q": served by claims */

static long long lease_grid_ttl(const char *machine, uint64_t limit, uint64_t demand, uint64_t held,
                                const long long *in, long long *out, int settle_ms, const char *ttl)
{
	char lim[32], dem[32], hel[32], settle[16], runs[SL_GRID_RUNS * 12 + 2] = "";
	const char *argv[] = {"EVALSHA", sha, "2", "sluice:{t}:epoch", "sluice:{t}:i:api:r", machine, ttl,
	                      settle, "995000", "1", grid_kind, lim, "1000", dem, hel, "0", runs};
	redisReply *r;
	long long g;

	for (int k = 0; k < SL_GRID_RUNS; k++)
		if (in[k])
			snprintf(runs + strlen(runs), sizeof(runs) - strlen(runs), "%s%lld-%lld", runs[0] ? "." : "",
			         in[k] / 8192, in[k] % 8192);
	if (!runs[0])
		strcpy(runs, "-");
	snprintf(lim, sizeof(lim), "%llu", (unsigned long long)limit);
	snprintf(dem, sizeof(dem), "%llu", (unsigned long long)demand);
	snprintf(hel, sizeof(hel), "%llu", (unsigned long long)held);
	snprintf(settle, sizeof(settle), "%d", settle_ms);
	r = redisCommandArgv(rc, (int)(sizeof(argv) / sizeof(argv[0])), argv, NULL);
	assert_non_null(r);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("fleet.lua: %s", r->str);
	assert_int_equal(r->elements, SL_FLEET_HEAD_OUT + SL_FLEET_FIELDS_OUT);
	g = r->element[SL_FLEET_HEAD_OUT]->integer;
	for (int k = 0; k < SL_GRID_RUNS; k++)
		out[k] = r->element[SL_FLEET_HEAD_OUT + 5 + k]->integer;
	freeReplyObject(r);
	return g;
}

static long long lease_grid(const char *machine, uint64_t limit, uint64_t demand, uint64_t held,
                            const long long *in, long long *out, int settle_ms)
{
	return lease_grid_ttl(machine, limit, demand, held, in, out, settle_ms, "600000");
}

/* Ranks held by more than one machine (each holding what it was granted last),
 * and in *taken how many are held at all. */
static int ranks_twice(long long runs[][SL_GRID_RUNS], int n, int *taken)
{
	static unsigned char seen[SL_GRID_RANKS];
	int twice = 0;

	memset(seen, 0, sizeof(seen));
	*taken = 0;
	for (int m = 0; m < n; m++)
		for (int k = 0; k < SL_GRID_RUNS; k++)
			for (long long q = runs[m][k] / 8192; runs[m][k] && q < runs[m][k] % 8192; q++) {
				twice += seen[q]++ > 0;
				++*taken;
			}
	return twice;
}

/* Five machines on the grid, demands changing at every call: no rank is ever
 * held by two of them, each holds at most SL_GRID_RUNS runs making up exactly its
 * grant, and once the demands settle the whole rate is handed out.  Redis then
 * comes back empty: each machine keeps what it reports holding, and nobody is
 * given a rank another still holds. */
static void test_grid_ranks(void **state)
{
	uint64_t limit = 100000, seed = 4242;
	long long grant[MACHINES] = {0}, runs[MACHINES][SL_GRID_RUNS];
	int taken;

	(void)state;
	memset(runs, 0, sizeof(runs));
	flush();
	for (int call = 0; call < 600; call++) {
		long long in[SL_GRID_RUNS], ranks = 0;
		uint64_t demand;
		int m;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		m = (int)((seed >> 33) % MACHINES);
		demand = (seed >> 13) % 5 == 0 ? 0 : (seed >> 17) % limit;
		memcpy(in, runs[m], sizeof(in));
		grant[m] = lease_grid(names[m], limit, demand, (uint64_t)grant[m], in, runs[m], 0);
		for (int k = 0; k < SL_GRID_RUNS; k++)
			if (runs[m][k])
				ranks += runs[m][k] % 8192 - runs[m][k] / 8192;
		assert_int_equal(grant[m], ranks * (long long)limit / SL_GRID_RANKS);
		assert_int_equal(ranks_twice(runs, MACHINES, &taken), 0);
	}
	for (int round = 0; round < SETTLE_ROUNDS; round++) {
		past_level();
		for (int m = 0; m < MACHINES; m++) {
			long long in[SL_GRID_RUNS];

			memcpy(in, runs[m], sizeof(in));
			grant[m] = lease_grid(names[m], limit, limit, (uint64_t)grant[m], in, runs[m], 0);
			assert_int_equal(ranks_twice(runs, MACHINES, &taken), 0);
		}
	}
	assert_true(taken >= (int)SL_GRID_RANKS - MACHINES);
	/* Redis empty: while the fleet settles nobody is given a rank it does not
	 * report holding, and m4, which says it holds m0's ranks as well as its own,
	 * is not given them. */
	flush();
	for (int m = 0; m < MACHINES; m++) {
		long long in[SL_GRID_RUNS], was[SL_GRID_RUNS];

		memcpy(in, runs[m], sizeof(in));
		memcpy(was, runs[m], sizeof(was));
		if (m == MACHINES - 1)
			for (int k = 0; k < SL_GRID_RUNS; k++)
				if (!in[k]) {
					in[k] = runs[0][0];
					break;
				}
		lease_grid(names[m], limit, limit, (uint64_t)limit, in, runs[m], 6000);
		for (int k = 0; k < SL_GRID_RUNS; k++) {
			int inside = !runs[m][k];

			for (int w = 0; w < SL_GRID_RUNS && !inside; w++)
				inside = was[w] && runs[m][k] / 8192 >= was[w] / 8192 && runs[m][k] % 8192 <= was[w] % 8192;
			assert_true(inside);
		}
		assert_int_equal(ranks_twice(runs, MACHINES, &taken), 0);
	}
}

/* A machine's entry that expires gives its ranks back whoever finds it gone -
 * a call off the grid too (a daemon that does not know the item yet asks so). */
/* Whether any rank of runs (from * 8192 + to) is marked taken in the item's grid
 * (set) or all of them are (!set). */
static int grid_marks(const long long *runs, int set)
{
	redisReply *r = redisCommand(rc, "GET sluice:{t}:i:api:r:grid");
	int any = 0, all = 1;

	assert_non_null(r);
	if (r->type == REDIS_REPLY_NIL) { /* the item's keys expired: nothing taken */
		freeReplyObject(r);
		return !set;
	}
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_int_equal(r->len, SL_GRID_RANKS);
	for (int k = 0; k < SL_GRID_RUNS; k++)
		for (long long i = runs[k] / 8192; runs[k] && i < runs[k] % 8192; i++) {
			any |= r->str[i] != 0;
			all &= r->str[i] != 0;
		}
	freeReplyObject(r);
	return set ? all : !any;
}

/* An expired entry's ranks are quarantined for a lease life, then free; its
 * machine calling again meanwhile has them back (docs/design.md, "The grid"). */
static void test_grid_expiry(void **state)
{
	long long none[SL_GRID_RUNS] = {0}, runs[SL_GRID_RUNS], other[SL_GRID_RUNS], back[SL_GRID_RUNS];
	struct timespec pause = {0, 80 * 1000 * 1000}, quarantine = {0, 60 * 1000 * 1000};

	(void)state;
	flush();
	lease_grid_ttl("m0", 100000, 100000, 0, none, runs, 0, "30");
	assert_true(runs[0] != 0);
	nanosleep(&pause, NULL);
	/* m1 sweeps m0's entry and asks for the whole rate: none of m0's ranks. */
	lease_grid_ttl("m1", 100000, 100000, 0, none, other, 0, "30");
	assert_true(grid_marks(runs, 1));
	for (int a = 0; a < SL_GRID_RUNS && other[a]; a++)
		for (int b = 0; b < SL_GRID_RUNS && runs[b]; b++)
			assert_true(other[a] % 8192 <= runs[b] / 8192 || runs[b] % 8192 <= other[a] / 8192);
	nanosleep(&quarantine, NULL);
	lease_ttl("m2", 'r', 100000, 0, 0, 0, 30, NULL); /* the quarantine is over */
	assert_true(grid_marks(runs, 0));

	/* Back before the quarantine ends: its ranks are its own again. */
	flush();
	lease_grid_ttl("m3", 100000, 100000, 0, none, runs, 0, "30");
	nanosleep(&pause, NULL);
	/* m4 sweeps m3's entry (it gets none of its ranks), quarantined for m4's lease
	 * life: seconds, so m3's next call comes inside it however slow the machine. */
	lease_grid_ttl("m4", 100000, 0, 0, none, other, 0, "10000");
	assert_int_equal(other[0], 0);
	assert_true(grid_marks(runs, 1));
	lease_grid_ttl("m3", 100000, 100000, 100000, runs, back, 0, "30");
	assert_memory_equal(back, runs, sizeof(runs));
	assert_true(grid_marks(back, 1));
}

/* Claims (docs/design.md, "Claims"): slots `want` of free ranks at least `lead_us`
 * ahead, their numbers into k[]; returns how many. */
static long long claim_room_us; /* the last claim's "room in": -1 for none said */

static int claim(const char *machine, long long interval_ns, int want, long long lead_us, long long *k,
                 long long *now_us)
{
	char iv[32], w[16], lead[32];
	const char *argv[] = {"EVALSHA", sha, "4", "sluice:{t}:epoch", "sluice:{t}:i:api:r:grid",
	                      "sluice:{t}:i:api:r:grid:claimed", "sluice:{t}:i:api:r:cursor", machine, "3000", "0",
	                      "995000", "claim", iv, w, lead};
	redisReply *r;
	int n;

	snprintf(iv, sizeof(iv), "%lld", interval_ns);
	snprintf(w, sizeof(w), "%d", want);
	snprintf(lead, sizeof(lead), "%lld", lead_us);
	r = redisCommandArgv(rc, (int)(sizeof(argv) / sizeof(argv[0])), argv, NULL);
	assert_non_null(r);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("fleet.lua claim: %s", r->str);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_true(r->elements >= 3);
	*now_us = r->element[2]->integer;
	n = (int)r->elements - 3;
	claim_room_us = -1;
	if (n == 1 && r->element[3]->integer < 0) {
		/* None: the horizon is claimed to its end, room in this long. */
		claim_room_us = -(r->element[3]->integer + 1);
		n = 0;
	}
	for (int i = 0; i < n; i++)
		k[i] = r->element[3 + i]->integer;
	freeReplyObject(r);
	return n;
}

static int in_runs(const long long *runs, unsigned rank)
{
	for (int j = 0; j < SL_GRID_RUNS && runs[j]; j++)
		if (rank >= runs[j] / 8192 && rank < runs[j] % 8192)
			return 1;
	return 0;
}

/* A machine served by claims is granted its part but no rank; its claims take
 * slots of ranks nobody holds, each once, never sooner than the lead; a rank
 * with a claim ahead is granted to no machine; once the claims have ended it is. */
static void test_claims(void **state)
{
	long long none[SL_GRID_RUNS] = {0}, a[SL_GRID_RUNS], b[SL_GRID_RUNS], k[64], k2[64], now_us = 0;
	const long long iv = 10 * MS; /* 100/s */
	struct timespec over = {0, 250 * MS};
	long long g;
	int n, n2;

	(void)state;
	flush();
	/* Redis empty: no claims until the fleet has settled. */
	assert_int_equal(claim("b", iv, 5, 20000, k, &now_us), 0);
	g = lease_grid("a", 100000, 50000, 0, none, a, 0); /* all, while nobody else asks */
	grid_kind = "q";
	lease_grid("b", 100000, 50000, 0, none, b, 0);     /* short: a still holds it all */
	grid_kind = "g";
	g = lease_grid("a", 100000, 50000, (uint64_t)g, a, a, 0); /* a's half */
	lease_grid("a", 100000, 50000, (uint64_t)g, a, a, 0);     /* reported: the rest is free */
	grid_kind = "q";
	g = lease_grid("b", 100000, 50000, 0, none, b, 0);
	grid_kind = "g";
	assert_true(g >= 45000); /* its part, as a share */
	assert_int_equal(b[0], 0); /* and no rank */
	n = claim("b", iv, 20, 20000, k, &now_us);
	assert_int_equal(n, 20);
	for (int i = 0; i < n; i++) {
		assert_true(k[i] * (iv / 1000) >= now_us + 20000); /* the lead */
		assert_false(in_runs(a, sl_grid_rank(k[i])));   /* never a's slot */
		if (i)
			assert_true(k[i] > k[i - 1]);               /* each once */
	}
	/* The next call goes on from the last: no slot twice. */
	n2 = claim("b", iv, 5, 0, k2, &now_us);
	assert_int_equal(n2, 5);
	assert_true(k2[0] > k[n - 1]);
	/* a asks for everything: the claimed ranks are not among what it gets. */
	lease_grid("a", 100000, 100000, 50000, a, a, 0);
	for (int i = 0; i < n; i++)
		assert_false(in_runs(a, sl_grid_rank(k[i])));
	/* Their claims over (the last slot, and 100 ms), the ranks are free again. */
	nanosleep(&over, NULL);
	nanosleep(&over, NULL);
	lease_grid("b", 100000, 0, 0, none, b, 0); /* b now holds nothing and asks nothing */
	lease_grid("a", 100000, 100000, 100000, a, a, 0);
	lease_grid("a", 100000, 100000, 100000, a, a, 0);
	assert_true(in_runs(a, sl_grid_rank(k[0])));
}

/* The claim cursor is an instant of Redis's time: at another rate the next claim
 * starts after the last slot claimed, never before it; and a horizon claimed to
 * its end answers none, with when there is room again. */
static void test_claims_cursor(void **state)
{
	long long none[SL_GRID_RUNS] = {0}, b[SL_GRID_RUNS], k[64], k2[64], now_us = 0;
	const long long iv = 10 * MS, big = 1000 * MS;
	int n, got;

	(void)state;
	flush();
	grid_kind = "q";
	lease_grid("b", 100000, 50000, 0, none, b, 0);
	grid_kind = "g";
	n = claim("b", iv, 20, 20000, k, &now_us);
	assert_int_equal(n, 20);
	assert_int_equal(claim("b", 10 * iv, 1, 0, k2, &now_us), 1);
	assert_true(k2[0] * 10 * iv >= (k[n - 1] + 1) * iv);
	/* The same rate again: the very next slot (no slot skipped by rounding). */
	assert_int_equal(claim("b", 10 * iv, 1, 0, k, &now_us), 1);
	assert_int_equal(k[0], k2[0] + 1);
	/* Two lease lives (6 s here) of 1 s slots: six to nine; then none, and
	 * room in at most two slots' time. */
	got = claim("b", big, 64, 0, k, &now_us);
	assert_true(got >= 5 && got <= 9);
	assert_true(claim_room_us == -1);
	assert_int_equal(claim("b", big, 1, 0, k, &now_us), 0);
	assert_true(claim_room_us >= 0 && claim_room_us <= 2 * big / 1000);
}

/* More machines than ranks (4,096) on one limit: served by claims, none holds a
 * rank, and each gets its slots - every one a different slot (5,000 machines
 * at 10,000/s, one claim each). */
#define CLAIMERS 5000
static void test_claims_beyond_ranks(void **state)
{
	static long long got[CLAIMERS];
	long long none[SL_GRID_RUNS] = {0}, runs[SL_GRID_RUNS], k[64], now_us;
	const long long iv = 100 * 1000; /* 10,000/s */
	char name[16];
	int n = 0;

	(void)state;
	flush();
	grid_kind = "q";
	for (int m = 0; m < CLAIMERS; m++) {
		snprintf(name, sizeof(name), "m%d", m);
		lease_grid(name, 10000000, 2000, 0, none, runs, 0);
		assert_int_equal(runs[0], 0);
	}
	grid_kind = "g";
	for (int m = 0; m < CLAIMERS; m++) {
		snprintf(name, sizeof(name), "m%d", m);
		if (claim(name, iv, 1, 20000, k, &now_us) == 1)
			got[n++] = k[0];
	}
	/* A round's horizon (2,500 slots) at a time: at least as many as fit in it,
	 * each once. */
	assert_true(n >= 2500);
	for (int i = 1; i < n; i++)
		assert_true(got[i] > got[i - 1]);
}

/* Redis came back empty: while the fleet settles, nobody is granted more than it
 * reports holding, so machines still holding old shares are counted first. */
/* The script keeps running totals rather than walking every machine's entry
 * (docs/design.md, "At size"): two thousand machines with demands changing in a
 * random order never hold more than the budget between them, and once the
 * demands stop changing the budget is handed out, to within the demand buckets'
 * rounding (4.4% of the level), with the light machines given all they ask. */
#define MANY 2000
static void test_totals_at_size(void **state)
{
	static long long grant[MANY];
	static uint64_t demand[MANY];
	uint64_t limit = 100000, budget = limit * 995 / 1000, seed = 777;
	long long live = 0, asked = 0;
	char name[16];

	(void)state;
	flush();
	memset(grant, 0, sizeof(grant));
	memset(demand, 0, sizeof(demand));
	for (int call = 0; call < 3 * MANY; call++) {
		int m;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		m = (int)((seed >> 33) % MANY);
		demand[m] = (seed >> 13) % 3 == 0 ? 0 : (seed >> 17) % (4 * limit / MANY);
		snprintf(name, sizeof(name), "m%d", m);
		grant[m] = lease_ttl(name, 'r', limit, demand[m], (uint64_t)grant[m], 0, LONG_TTL, &live);
		assert_true(grant[m] >= 0);
		assert_true(in_effect(grant, MANY) <= (long long)budget);
	}
	/* A tenth ask little, the rest more than an equal part.  A machine reports
	 * holding its new grant at its next call, so room shows a round later than
	 * in the real fleet, where the short machine wakes the others at once. */
	for (int m = 0; m < MANY; m++)
		demand[m] = m % 10 == 0 ? 10 : 2 * limit / MANY;
	for (int round = 0; round < 6; round++)
		for (int m = 0; m < MANY; m++) {
			snprintf(name, sizeof(name), "m%d", m);
			grant[m] = lease_ttl(name, 'r', limit, demand[m], (uint64_t)grant[m], 0, LONG_TTL, &live);
			assert_true(in_effect(grant, MANY) <= (long long)budget);
		}
	assert_int_equal(live, MANY);
	for (int m = 0; m < MANY; m++)
		asked += (long long)demand[m];
	for (int m = 0; m < MANY; m += 10)
		assert_int_equal(grant[m], 10);
	assert_true(in_effect(grant, MANY) >= (long long)(0.956 * (double)SL_MIN(asked, (long long)budget)));
}

/* Entries left by an older script (no totals), an entry an older script changed
 * (deleting the field that says the totals are in step), totals that cannot be
 * and keys gone: each time the totals are rebuilt from the entries before
 * anything is granted, so the grant leaves room for what the entries hold. */
static void test_totals_rebuilt(void **state)
{
	long long g;
	redisReply *r;
	long long now_ms;

	(void)state;
	flush();
	r = redisCommand(rc, "TIME");
	assert_non_null(r);
	now_ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
	freeReplyObject(r);
	/* An older script's entry: holding 60/s for a minute more. */
	redis_do("HSET sluice:{t}:i:api:r old 60000:60000:%lld:60000", now_ms + 60000);
	g = lease("m0", 'r', 100000, 100000, 0, 0);
	assert_true(g <= 99500 - 60000);
	/* An older script renews it at 70/s and deletes the field it cannot read. */
	redis_do("HSET sluice:{t}:i:api:r old 70000:70000:%lld:70000", now_ms + 60000);
	redis_do("HDEL sluice:{t}:i:api:r #v");
	g = lease("m0", 'r', 100000, 100000, (uint64_t)g, 0);
	assert_true(g <= 99500 - 70000);
	assert_true(g >= 99500 - 70000 - 1000);
	/* Totals that cannot be (negative, not numbers, missing), and the expiry set
	 * gone while the totals stayed: each rebuilt. */
	static const char *const scribbles[] = {
		"HSET sluice:{t}:i:api:r:totals u -70000",
		"HSET sluice:{t}:i:api:r:totals n two",
		"DEL sluice:{t}:i:api:r:totals",
		"DEL sluice:{t}:i:api:r:exp",
	};
	for (size_t i = 0; i < sizeof(scribbles) / sizeof(scribbles[0]); i++) {
		redis_do(scribbles[i]);
		g = lease("m0", 'r', 100000, 100000, (uint64_t)g, 0);
		assert_true(g <= 99500 - 70000);
	}
	assert_true(g >= 99500 - 70000 - 1000);
}

/* Machines that stop calling leave: their entries expire and are swept a
 * bounded number a call, and their shares come back to those still calling. */
static void test_expired_shares_come_back(void **state)
{
	long long g = 0, live = 0;
	char name[16];
	struct timespec ts = {2, 100 * MS};

	(void)state;
	flush();
	for (int m = 0; m < 150; m++) {
		snprintf(name, sizeof(name), "gone%d", m);
		lease_ttl(name, 'r', 100000, 600, 0, 0, 2000, NULL); /* 151 calls within 2 s */
	}
	g = lease_ttl("stays", 'r', 100000, 100000, 0, 0, LONG_TTL, &live);
	assert_int_equal(live, 151);
	assert_true(g <= 99500 - 150 * 600);
	nanosleep(&ts, NULL);
	for (int call = 0; call < 4; call++)
		g = lease_ttl("stays", 'r', 100000, 100000, (uint64_t)g, 0, LONG_TTL, &live);
	assert_int_equal(live, 1);
	assert_int_equal(g, 99500);
}

static void test_settling_after_empty_start(void **state)
{
	long long g;

	(void)state;
	flush();
	g = lease("m0", 'r', 100000, 90000, 30000, 60000);
	assert_true(g <= 30000);
	g = lease("m1", 'r', 100000, 90000, 0, 60000);
	assert_int_equal(g, 0);
}

/* Whether a program of that name is in a directory of PATH. */
static int on_path(const char *name)
{
	const char *path = getenv("PATH");
	char dirs[4096], file[4352];

	snprintf(dirs, sizeof(dirs), "%s", path ? path : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(file, sizeof(file), "%s/%s", d, name);
		if (access(file, X_OK) == 0)
			return 1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest pure[] = {
		cmocka_unit_test(test_plausible),
		cmocka_unit_test(test_answer_rate),
		cmocka_unit_test(test_answer_grid),
		cmocka_unit_test(test_answer_places_and_windows),
		cmocka_unit_test(test_outage_shares),
		cmocka_unit_test(test_demand),
		cmocka_unit_test(test_demand_held_on_grid),
		cmocka_unit_test(test_claims_switching),
		cmocka_unit_test(test_demand_places),
		cmocka_unit_test(test_claims_part_held_down),
		cmocka_unit_test(test_demand_stops),
		cmocka_unit_test(test_demand_stops_scribble_bytes),
	};
	const struct CMUnitTest redis[] = {
		cmocka_unit_test(test_water_filling),
		cmocka_unit_test(test_budget_through_changes),
		cmocka_unit_test(test_grid_ranks),
		cmocka_unit_test(test_grid_expiry),
		cmocka_unit_test(test_settling_after_empty_start),
		cmocka_unit_test(test_totals_at_size),
		cmocka_unit_test(test_totals_rebuilt),
		cmocka_unit_test(test_expired_shares_come_back),
		cmocka_unit_test(test_claims),
		cmocka_unit_test(test_claims_cursor),
		cmocka_unit_test(test_claims_beyond_ranks),
	};
	int failed = cmocka_run_group_tests_name("policy", pure, NULL, NULL);

	/* make unit needs nothing of the test rig: without redis-server it says so
	 * and skips fleet.lua's cases; every other tier fails without it. */
	if (getenv("SLUICE_REDIS_OPTIONAL") && !on_path("redis-server")) {
		printf("test_fleetpolicy: redis-server is not installed: fleet.lua's %zu cases skipped "
		       "(scripts/deps.sh test installs it)\n",
		       sizeof(redis) / sizeof(redis[0]));
		return failed;
	}
	return failed + cmocka_run_group_tests_name("fleet.lua", redis, redis_up, redis_down);
}
