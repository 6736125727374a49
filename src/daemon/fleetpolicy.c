/*
 * fleetpolicy.c - the fleet's lease policy on this machine (fleetpolicy.h;
 * docs/design.md, "Across machines").  Pure arithmetic: the daemon calls it with
 * what it read from the segment and from Redis.
 */
#include "sluice/fleetpolicy.h"
#include "sluice/common.h"
#include "sluice/limiter.h"
#include "sluice/strategy.h"

#include <stdio.h>
#include <string.h>

char sl_fleet_kind(const struct sl_spec *s)
{
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW: return 'f';
	case SL_STRAT_SESSION_WINDOW: return 's';
	case SL_STRAT_SLIDING_WINDOW: return 'l';
	default: return 'r';
	}
}

/* A fleet state's lease (in its more: every fleet state has one). */
static const struct sl_lease *lease_of(const struct sl_state *st)
{
	return &sl_state_more(st)->lease;
}

/* The span flow_avg averages over (struct sl_fleet_memo). */
#define FLOW_AVG_NS ((double)SL_NS_PER_S)

/* Requests asked for per ns, and callers held with no share, measured over a half
 * period at least: a round sent at once to report a smaller share would otherwise
 * measure nothing over a few microseconds and shrink the demand on noise.
 * Counters only grow; one that went back is a reset: no flow.  Returns whether
 * this was a fresh measure. */
static int measure_flow(const struct sl_fleet_env *env, struct sl_fleet_memo *m, const struct sl_state *st,
                        uint64_t admitted, uint64_t refused, int64_t now)
{
	double elapsed = (double)(now - m->at);
	int fresh = !m->at || elapsed >= (double)env->refresh_ns / 2;

	if (fresh) {
		m->flow = m->at && admitted >= m->admitted && refused >= m->refused
		          ? (double)((admitted - m->admitted) + (refused - m->refused)) / elapsed : 0;
		m->flow_avg = m->at ? m->flow_avg + (m->flow - m->flow_avg) * SL_MIN(1.0, elapsed / FLOW_AVG_NS)
		                    : m->flow;
		/* Callers held for want of any share look again every SL_LEASE_RETRY_NS:
		 * how many there are, from how often they looked.  A machine given nothing
		 * admits nothing, and without this its demand would fade for good. */
		m->waiting = m->at ? (double)(uint32_t)(lease_of(st)->misses - m->misses) * (double)SL_LEASE_RETRY_NS /
		                     elapsed : 0;
		m->misses = lease_of(st)->misses;
		m->admitted = admitted;
		m->refused = refused;
		m->at = now;
	}
	return fresh;
}

/* A caller held on the lease looked again no later than this after the
 * instant it named (sl_lease_held): a wake-up later than that on a loaded
 * machine is rare, and reads at worst as a lull the next measure corrects. */
#define HELD_SLACK_NS (100 * 1000000LL)

/* Whether a rate item's flow has stopped: a fresh measure finds no request, no
 * queue, no caller held or looking for a share, and none has been seen for a
 * round and for three of the flow's own average gaps.  Its demand then drops to
 * nothing at once rather than fading by 30% a round: the ranks or share it holds
 * are what the machines whose demand grew are waiting for (a fleet whose demand
 * moved every second delivered a quarter to a half of the rate while the
 * machines left behind kept asking).  A light flow keeps its share between
 * requests (3 gaps at 1/s is 3 s); a caller asleep until its slot is held, not
 * idle, whatever the schedule shows.  A byte meter's demand fades as before. */
static int flow_stopped(const struct sl_fleet_env *env, struct sl_fleet_memo *m, const struct sl_state *st,
                        double waiting, uint64_t queued, int fresh, int64_t now)
{
	int64_t held = lease_of(st)->held_until_ns;

	if (!fresh)
		return 0;
	/* Further ahead than any caller looks: a scribble, read as nobody held (the
	 * next caller held writes over it: sl_lease_held). */
	if (m->flow > 0 || queued > 0 || waiting > 0 ||
	    (held >= now - HELD_SLACK_NS && held <= now + SL_LEASE_HELD_SANE_NS)) {
		m->active_at = now;
		m->active_flow = m->flow_avg;
		return 0;
	}
	if ((double)(now - m->active_at) < SL_MAX((double)env->refresh_ns, 3.0 / SL_MAX(m->active_flow, 1e-300)))
		return 0;
	m->flow_avg = 0;
	m->demand = 0;
	return 1;
}

/* An equal part of `amount` over the machines last seen (or `hosts`). */
static double equal_part(const struct sl_fleet_env *env, const struct sl_state *st, double amount)
{
	return amount / SL_MAX(lease_of(st)->machines, SL_MAX(env->hosts, 1u));
}

/* A rate item's demand, thousandths per window. */
static void rate_demand(const struct sl_fleet_env *env, struct sl_fleet_item *it, const struct sl_spec *s,
                        const struct sl_state *st, double waiting, uint64_t queued, int fresh, int64_t now)
{
	struct sl_fleet_memo *m = it->memo;
	/* Per window: what went (and was refused), a tenth more and half a request
	 * over, and the backlog asked for within a round.  A machine using its whole
	 * share with callers still held, or holding callers it could not let go (no
	 * share, or a share too small for them when they looked), would use more than
	 * it shows: it asks for a fifth more and an equal part at least, at once,
	 * rather than grow a trickle over rounds - its clients may be few and waiting,
	 * so its queue says little of what they would send.  Fair shares never give it
	 * more than an equal part while others want it.
	 *
	 * With nobody held the flow is what the clients choose to send: averaged,
	 * it keeps the share steady.  At 10/s a half period of 125 ms holds 0, 1 or
	 * 2 requests, and demands read from each alone swung a machine's share
	 * between 9.4/s and 12.6/s - above its use the rest went to nobody (the
	 * fleet delivered 95% of 100/s to demands of 10, 200 and 200/s; 97.5%
	 * averaged).  With callers held the flow is what the share lets through:
	 * the latest reading, so a machine whose demand stepped up is not judged
	 * by the lull before (t_fleet_rate: its third within 3 s, usually under one).
	 *
	 * On the grid (grid.h) a caller waits for the machine's next slot however
	 * short the queue, where a GCRA would let a lone one go at once: as a queue
	 * is there almost always, whether the share is used whole is read from the
	 * flow averaged over a second, not from half a period.  Read from half a
	 * period, a light machine (10/s on a share of 11.5/s) passed 90% of its
	 * share every few rounds and asked for an equal part: the fleet delivered
	 * 92-94% of 100/s to demands of 10, 200 and 200/s; read so, 95-96%.  (Not
	 * counting the one waiting for the next slot as backlog read 93%: the busy
	 * machines then asked too little when they missed slots.  Asking a fifth
	 * over the averaged flow plus the backlog past one caller read 96-97%, but
	 * a machine whose demand stepped up then took 4 s to its third, or kept
	 * 25/s of it, in three of five runs: docs/design.md, "At size".) */
	int grid = (lease_of(st)->flags & SL_LEASE_RATE) && sl_grid_usable(&lease_of(st)->grid);
	double flow = queued > 0 || waiting > 0 ? SL_MAX(m->flow, m->flow_avg) : m->flow_avg;
	double rate_now = flow * (double)s->window_ns;
	double used = (grid ? m->flow_avg : flow) * (double)s->window_ns;
	/* Callers held with no ranks at all are backlog as much as those queued on
	 * the machine's slots (a grid item counts requests, so callers are its
	 * unit): a machine starting from nothing asks for them in its first round,
	 * not for an equal part only and its backlog a round later. */
	double held_on = it->grid ? SL_MAX((double)queued, waiting) : (double)queued;
	double backlog = held_on * (double)s->window_ns / (double)env->refresh_ns;
	double share = lease_of(st)->flags & SL_LEASE_RATE ? (double)lease_of(st)->amount / SL_FLEET_SCALE : 0;
	double want = rate_now + backlog > 0 ? rate_now * 1.1 + backlog + 0.5 : 0;

	/* Counted in requests only: a byte flow's gaps say nothing of its requests'.
	 * Stopped, m->demand is nothing too, so nothing is reported below. */
	if (s->meter != SL_METER_BYTES && flow_stopped(env, m, st, waiting, queued, fresh, now))
		want = 0;

	if (it->grid && m->claiming) {
		/* Served by claims: its callers wait for a claim's lead whatever its part,
		 * so waiting says nothing of want - asked for an equal part whenever
		 * one waited, a 10/s machine beside two busy ones held 33/s for the
		 * 10 it sent (85% of the fleet's rate).  It asks for its flow averaged,
		 * a twentieth more and half a request (its part is counted in use and
		 * what it leaves is lost to the fleet: a sixth more and a whole request
		 * cost skewed demand a point), and for the claims Redis could not give
		 * (no free rank: the part held by others must shrink).  A flow that
		 * claims cannot keep up with goes over to ranks (sl_fleet_measure). */
		double short_rate = (double)m->claims_short * (double)s->window_ns / (double)env->refresh_ns;

		want = m->flow_avg > 0 || short_rate > 0 ? m->flow_avg * (double)s->window_ns * 1.05 + short_rate + 0.5 : 0;
		/* Its part used whole: the part is what holds its flow down (its callers
		 * take every free slot it leaves), so it asks a quarter more - a machine
		 * stepping up beside two busy ones otherwise sat at 19/s of its 33, its
		 * flow asking for its part and its part for its flow. */
		if (share > 0 && used >= 0.95 * share)
			want = SL_MAX(want, share * 1.25 + 1);
		m->claims_short = 0;
	} else if (waiting > 0 || (queued > 0 && used >= 0.9 * share)) {
		want = SL_MAX(rate_now * 1.2 + backlog + 1, equal_part(env, st, (double)s->amount));
	}
	/* Falling by 30% a period at most: a lull of a round is not a machine gone. */
	m->demand = SL_MAX(want, fresh ? m->demand * 0.7 : m->demand);
	it->limit = s->amount * SL_FLEET_SCALE;
	it->demand = (uint64_t)SL_MIN(m->demand * SL_FLEET_SCALE, (double)it->limit);
	it->held = lease_of(st)->flags & SL_LEASE_RATE ? lease_of(st)->amount : 0;
}

/* A window item's demand: what it would send before the round after next, beyond
 * what its chunk has left; what went on an outage share is reported as held, for
 * Redis to count.  Callers held for want of chunk would send more than that shows:
 * half as much again, and at least an equal part of the window's pace (AMOUNT
 * spread over the window) - a fixed window's AMOUNT may go at any time in it, but
 * a chunk left unused is lost to the others until the window ends. */
static void window_demand(const struct sl_fleet_env *env, struct sl_fleet_item *it, const struct sl_spec *s,
                          const struct sl_state *st, double waiting, uint64_t queued, int64_t now)
{
	const struct sl_lease *l = lease_of(st);
	double want = it->memo->flow * 2.0 * (double)env->refresh_ns + (double)queued;
	uint64_t left = (l->flags & SL_LEASE_CHUNK) && now < l->until_ns && l->amount > l->sched_used
	                ? l->amount - l->sched_used : 0;

	if (waiting > 0)
		want = SL_MAX(want * 1.5 + 1, equal_part(env, st, (double)s->amount * 2.0 * (double)env->refresh_ns /
		                                                      (double)SL_MAX(s->window_ns, (int64_t)1)));
	else if (want > 0)
		want += 1;
	it->limit = s->amount;
	it->demand = want > (double)left ? (uint64_t)SL_MIN(want - (double)left, (double)s->amount) : 0;
	it->held = (l->flags & SL_LEASE_OUTAGE) ? l->rel_used : 0;
}

void sl_fleet_measure(const struct sl_fleet_env *env, struct sl_fleet_item *it, const struct sl_section *sec,
                      const struct sl_state *st, int keyed, int64_t now)
{
	const struct sl_spec *s = &sec->spec;
	struct sl_fleet_memo *m = it->memo;
	uint64_t queued = sl_limit_queued(s, st, now, env->wall_off);
	double waiting;
	int fresh;

	it->window_ns = s->window_ns;
	it->burst = s->burst ? s->burst : 1;
	/* A pause the destination asked of this machine, for the others to keep too
	 * (on Redis's clock as last seen; with none seen yet, not told). */
	it->pause_ms = it->kind != 'c' && env->redis_ms && s->signals && sl_sane_ns(st->pause.until_ns) > now
	               ? env->redis_ms + (sl_sane_ns(st->pause.until_ns) - now + SL_NS_PER_MS - 1) / SL_NS_PER_MS
	               : 0;
	if (it->kind == 'r') {
		/* The grid (grid.h) releases one request a slot: a rate counting requests
		 * with no burst.  Bytes, or a burst to share, keep the share's own GCRA.
		 * Known before any measure: an item is asked for one way only. */
		it->grid = s->meter != SL_METER_BYTES && sl_strategy_is_gcra(s) && s->burst <= 1;
		if (it->grid && (lease_of(st)->flags & SL_LEASE_RATE) && sl_grid_usable(&lease_of(st)->grid))
			it->held_grid = lease_of(st)->grid;
	}
	if (!m) {
		it->demand = it->held = 0;
		return;
	}
	fresh = measure_flow(env, m, st, st->admitted, keyed ? 0 : sec->more.refused, now);
	waiting = m->waiting;
	/* Callers held on since the last round, however recent: the share binds. */
	if (lease_of(st)->misses != m->misses_seen && m->at)
		waiting = SL_MAX(waiting, 1.0);
	m->misses_seen = lease_of(st)->misses;
	if (it->kind == 'c') {
		uint32_t open = st->conc_open, held_on = st->conc_waiters;

		it->limit = s->concurrency;
		/* Callers asleep for a place are counted; one that found every place in
		 * use since the last round (misses) and waits elsewhere - a deferred
		 * connect - asks one more: else a machine whose callers all wait that
		 * way asked only what it held, and once that fell to none it asked none
		 * for good (t_fleet_windows: 4 connections where the others had 68). */
		it->demand = (uint64_t)open + held_on + (held_on || waiting > 0 ? 1 : 0);
		it->held = SL_MAX((uint64_t)open,
		                  lease_of(st)->flags & SL_LEASE_PLACES ? (uint64_t)lease_of(st)->places : 0);
	} else if (it->kind == 'r') {
		if (!it->grid || !env->claims) {
			m->claiming = 0; /* claims = off (the default): ranks only */
		} else {
			/* A few requests a round are served by claims, one slot each, the
			 * moment they wait; more by ranks, renewed a round at a time.  Over
			 * to ranks when the second's average says so; or when every
			 * measure for SL_FLEET_BUSY_NS has found three a round or more
			 * (a claiming machine's part is its flow and a little more, so a
			 * flow that its part holds down - three busy machines, one of them
			 * claiming - stayed at 18-24/s of its 33, its average under six);
			 * or at once when its last measure is six a round and claims fell
			 * short (a machine stepping up beside two holding every rank).
			 * Not on one busy measure: demand moving among fifty machines every
			 * second, 20/s each, then went over to ranks, held them after it
			 * had moved on, and got 89% where it gets 96%.  Back to claims only
			 * when the last measure and the average are both under three.
			 * And only in a fleet of so many machines that an equal part is
			 * under six a round: with fewer, a machine's part is ranks' size
			 * and ranks serve it (three machines at 100/s, one stepping up,
			 * sat at 19-27/s of its 33 by claims). */
			double last = m->flow * (double)env->refresh_ns;
			double avg = m->flow_avg * (double)env->refresh_ns;
			double fair = equal_part(env, st, (double)s->amount) * (double)env->refresh_ns / (double)s->window_ns;

			if (fresh)
				m->busy_since = last < SL_FLEET_CLAIMS_BELOW ? 0 : m->busy_since ? m->busy_since : now;
			if (fair >= SL_FLEET_RANKS_FROM)
				m->claiming = 0;
			else if (m->claiming && (avg >= SL_FLEET_RANKS_FROM || (m->busy_since && now - m->busy_since >= SL_FLEET_BUSY_NS) ||
			                    (m->claims_short && last >= SL_FLEET_RANKS_FROM)))
				m->claiming = 0;
			else if (!m->claiming && last < SL_FLEET_CLAIMS_BELOW && avg < SL_FLEET_CLAIMS_BELOW)
				m->claiming = 1;
		}
		it->claims = m->claiming;
		rate_demand(env, it, s, st, waiting, queued, fresh, now);
	} else {
		window_demand(env, it, s, st, waiting, queued, now);
	}
}

struct sl_grant sl_fleet_rate_grant(const struct sl_fleet_item *it, uint64_t grant, uint32_t flags)
{
	struct sl_grant g = {.flags = SL_LEASE_RATE | flags, .amount = grant};

	if (it->window_ns <= INT64_MAX / SL_FLEET_SCALE) {
		g.window_ns = it->window_ns * SL_FLEET_SCALE;
	} else {
		g.amount = grant / SL_FLEET_SCALE;
		g.window_ns = it->window_ns;
	}
	g.burst = it->limit ? SL_MAX((uint64_t)1, (uint64_t)((unsigned __int128)it->burst * grant / it->limit)) : 1;
	return g;
}

int sl_fleet_outage_grant(const struct sl_fleet_item *it, const struct sl_lease *l, uint32_t hosts,
                          int64_t now, int64_t redis_ms, struct sl_grant *g)
{
	hosts = SL_MAX(hosts, 1u);
	if (it->kind == 'r') {
		/* Served by claims, which Redis makes: its part becomes a share of its
		 * own, shaped by the machine's GCRA while Redis is away, as a share off
		 * the grid is (docs/design.md, "Claims"). */
		if ((l->flags & SL_LEASE_RATE) && (l->flags & SL_LEASE_CLAIMING) && l->amount) {
			*g = sl_fleet_rate_grant(it, SL_MIN(l->amount, it->limit), SL_LEASE_OUTAGE);
			return 1;
		}
		if (l->flags & SL_LEASE_RATE)
			return 0;
		*g = sl_fleet_rate_grant(it, it->limit / hosts, SL_LEASE_OUTAGE);
	} else if (it->kind == 'c') {
		if (l->flags & SL_LEASE_PLACES)
			return 0;
		*g = (struct sl_grant){.flags = SL_LEASE_PLACES | SL_LEASE_OUTAGE, .places = (uint32_t)(it->limit / hosts)};
	} else {
		int64_t wms = SL_MAX(it->window_ns / SL_NS_PER_MS, (int64_t)1), k = redis_ms / wms;

		if ((l->flags & SL_LEASE_CHUNK) && now < l->until_ns)
			return 0;
		*g = (struct sl_grant){.flags = SL_LEASE_CHUNK | SL_LEASE_OUTAGE,
		                       .amount = it->limit / hosts / (it->kind == 'l' ? 2 : 1),
		                       .until_ns = now + ((k + 1) * wms - redis_ms) * SL_NS_PER_MS,
		                       .chunk = (uint64_t)k};
	}
	return 1;
}

/* An answer's run of ranks, encoded from * 8192 + to (fleet.lua); 0 is none.
 * Returns whether v is one: a non-empty run inside the frame. */
static int run_decode(long long v, struct sl_grid_run *r)
{
	long long from = v / 8192, to = v % 8192;

	if (v <= 0 || from >= to || to > SL_GRID_RANKS)
		return 0;
	r->from = (uint16_t)from;
	r->to = (uint16_t)to;
	return 1;
}

int sl_fleet_plausible(const struct sl_fleet_item *items, size_t n, const long long *vals)
{
	long long rnow = vals[0], rnow_us = vals[2];

	/* 2020-01-01 to 2200-01-01, in ms: the grid's origin is computed from the
	 * microseconds in nanoseconds, which no later clock fits. */
	if (rnow < 1577836800000LL || rnow > 7258118400000LL || rnow_us / 1000 < rnow - 1 || rnow_us / 1000 > rnow + 1)
		return 0;
	for (size_t j = 0; j < n; j++) {
		const long long *e = vals + SL_FLEET_HEAD_OUT + SL_FLEET_FIELDS_OUT * j;

		if (e[0] < 0 || (unsigned long long)e[0] > items[j].limit || e[1] < 0 || e[1] > (long long)UINT32_MAX ||
		    e[4] < 0 || e[4] > rnow + 34560000000LL) /* a pause past 400 days */
			return 0;
		for (int k = 0; k < SL_GRID_RUNS; k++) {
			struct sl_grid_run r;

			if (e[5 + k] && (!items[j].grid || !run_decode(e[5 + k], &r)))
				return 0;
		}
	}
	return 1;
}

int64_t sl_fleet_grid_origin(int have, int64_t origin, int64_t est, int64_t rtt)
{
	/* An estimate later than the origin by no more than its answer's round trip
	 * is what a slow answer gives: followed slowly.  Later by more, no delay
	 * explains it: Redis's clock stepped, or this is another Redis. */
	if (!have || est < origin || est - origin > SL_MAX(rtt, (int64_t)0) + SL_FLEET_GRID_JUMP_NS)
		return est;
	return origin + SL_MIN(est - origin, SL_FLEET_GRID_CREEP_NS);
}

const char *sl_fleet_grid_runs(const struct sl_grid *g, char *buf, size_t len)
{
	size_t at = 0;

	snprintf(buf, len, "-");
	if (!sl_grid_usable(g))
		return buf;
	for (uint32_t i = 0; i < g->n && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%s%u-%u", i ? "." : "", (unsigned)g->run[i].from,
		                 (unsigned)g->run[i].to);

		if (w < 0 || (size_t)w >= len - at) {
			snprintf(buf, len, "-"); /* never a part of the runs: none */
			return buf;
		}
		at += (size_t)w;
	}
	return buf;
}

/* A grid item's runs from its answer fields (checked by sl_fleet_plausible), on
 * slots of the item's interval: its limit spread evenly, never faster. */
static void grid_of_answer(const struct sl_fleet_item *it, const long long *e, int64_t origin_ns,
                           struct sl_grid *g)
{
	unsigned __int128 iv;

	memset(g, 0, sizeof(*g));
	if (!it->grid || !it->limit || it->window_ns <= 0)
		return;
	iv = ((unsigned __int128)(uint64_t)it->window_ns * SL_FLEET_SCALE + it->limit - 1) / it->limit;
	if (iv == 0 || iv > (unsigned __int128)SL_SANE_NS)
		return;
	for (int k = 0; k < SL_GRID_RUNS; k++)
		g->n += (uint32_t)run_decode(e[5 + k], &g->run[g->n]);
	/* Placed with or without ranks when served by claims: such a machine may
	 * hold none, and its claims are slots of this grid (lease.c). */
	if (!g->n && !it->claims)
		return;
	g->interval_ns = (int64_t)iv;
	g->origin_ns = origin_ns;
}

int sl_fleet_answer(const struct sl_fleet_item *it, const long long *e, long long rnow, int64_t rtt,
                    int64_t now, int64_t valid_ns, int64_t origin_ns, struct sl_fleet_round *r,
                    struct sl_grant *g)
{
	uint64_t grant = (uint64_t)e[0];
	uint32_t machines = (uint32_t)SL_MIN(e[1], (long long)UINT32_MAX);

	r->machines = SL_MAX(r->machines, machines);
	if (it->kind == 'r') {
		grant = SL_MIN(grant, it->limit);
		*g = sl_fleet_rate_grant(it, grant, it->grid && it->claims ? SL_LEASE_CLAIMING : 0);
		grid_of_answer(it, e, origin_ns, &g->grid);
		/* Smaller by a hundredth of the limit: worth telling at once (Redis counts
		 * the larger until told, so a smaller change only waits). */
		r->shrank |= grant + SL_MAX(it->limit / 100, (uint64_t)1) <= it->held;
		r->starved |= grant * 2 < it->demand;
		r->above |= grant * (machines + 1ull) > it->limit;
	} else if (it->kind == 'c') {
		grant = SL_MIN(grant, it->limit);
		*g = (struct sl_grant){.flags = SL_LEASE_PLACES, .places = (uint32_t)grant};
		r->shrank |= grant < it->held;
		r->above |= grant * (machines + 1ull) > it->limit;
	} else {
		long long end_ms = e[3];

		if (end_ms <= rnow || grant > it->limit)
			return 0;
		/* The chunk ends, on this machine's clock, where Redis's window does - early
		 * rather than late: by the call's round trip (Redis read its clock at most
		 * that long before `now`), a millisecond (its clock comes in whole ones) and
		 * another for the packet of a release made just before the end
		 * (t_fleet_windows once saw 301 of 300). */
		*g = (struct sl_grant){.flags = SL_LEASE_CHUNK, .amount = grant,
		                       .until_ns = now - rtt + (int64_t)(end_ms - rnow - 2) * SL_NS_PER_MS,
		                       .chunk = (uint64_t)e[2]};
	}
	g->machines = machines;
	g->valid_ns = valid_ns;
	return 1;
}
