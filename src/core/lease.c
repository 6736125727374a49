/* What limits a state: its spec, or this machine's lease on a fleet limit (lease.h). */
#include "sluice/lease.h"
#include "sluice/common.h"
#include "sluice/grid.h"
#include "sluice/limiter.h"
#include "sluice/strategy.h"

#include "sluice/sys.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>

/* A fleet state's lease: in its more (sl_spec_needs_more), so only a fleet spec's
 * state is asked for it. */
static struct sl_lease *lease_of(const struct sl_state *st)
{
	return &sl_state_more(st)->lease;
}

/* The rate a fleet state holds, as a spec the strategies read: the section's, with
 * the lease's share for its amount, window and burst.  NULL when it holds none. */
static const struct sl_spec *rate_spec(const struct sl_spec *s, const struct sl_state *st,
                                       struct sl_spec *tmp, int64_t now)
{
	const struct sl_lease *l = lease_of(st);

	if (!(l->flags & SL_LEASE_RATE) || !l->amount || l->window_ns <= 0 || now >= l->valid_ns)
		return NULL;
	*tmp = *s;
	tmp->amount = l->amount;
	tmp->window_ns = l->window_ns;
	tmp->burst = l->burst ? l->burst : 1;
	return tmp;
}

/* The grid a fleet rate state releases on (grid.h), or NULL: none held, or the
 * lease lapsed (rate_spec answers NULL then too).  With one, each request takes
 * one of this machine's slots: the scheduling half hands them out in order, the
 * release half lets a caller use the first slot it has not used that started
 * less than an interval ago - no later, so that every release is within an
 * interval of its slot (docs/design.md, "The grid"). */
static const struct sl_grid *grid_of(const struct sl_state *st, int64_t now)
{
	const struct sl_lease *l = lease_of(st);

	/* A lease served by claims places its slots with an interval and an origin
	 * even when it holds no rank (its claims are placed on them): such a lease
	 * never falls back to a GCRA at its share.  Any other needs ranks. */
	if (!(l->flags & SL_LEASE_RATE) || now >= l->valid_ns || l->grid.interval_ns <= 0)
		return NULL;
	if (!(l->flags & SL_LEASE_CLAIMING) && (!l->amount || !sl_grid_usable(&l->grid)))
		return NULL;
	return &l->grid;
}

/* Where claimed slot k starts on this machine's clock (INT64_MAX out of range). */
static int64_t claim_start(const struct sl_grid *g, int64_t k)
{
	__int128 t = (__int128)g->origin_ns + (__int128)k * g->interval_ns;

	return k < 0 || t > SL_SANE_NS ? INT64_MAX : (int64_t)t;
}

/* The start of this machine's first own slot at or after t: one of its ranks'
 * (sl_grid_next) or one it claimed; INT64_MAX for none. */
static int64_t own_next(const struct sl_state *st, const struct sl_grid *g, int64_t t)
{
	const struct sl_lease *l = lease_of(st);
	int64_t at = sl_grid_next(g, t);
	uint32_t n = SL_MIN(l->nclaims, (uint32_t)SL_LEASE_CLAIMS);

	for (uint32_t i = 0; i < n; i++) {
		int64_t c = claim_start(g, l->claim_k[i]);

		if (c >= t && c < at)
			at = c;
	}
	return at;
}

#define CLAIM_PENDING_NS (100 * 1000000LL) /* an ask unanswered this long is lost */

__thread struct sl_claim_note sl_claim_note __attribute__((tls_model("initial-exec")));

/* The caller's next look on grid g at `now`, own slot `at`: on a lease served by
 * claims with no own slot ahead, a claim is asked for and the caller looks again
 * when claims come (woken: sl_claim_note.look_ns, SL_LEASE_CLAIM_WAIT_NS) or
 * shortly (SL_LEASE_CLAIM_LOOK_NS, before a claim the daemon makes then could
 * start).  One with a slot ahead, however far (the fleet's queue), asks for
 * nothing: a claim asked for then would only queue behind it, and callers
 * asking at every look while they waited sent 50 machines' claims minutes
 * ahead. */
static int64_t claim_or(struct sl_state *st, int64_t at, int64_t now)
{
	struct sl_lease *l = lease_of(st);
	int64_t look;

	if (!(l->flags & SL_LEASE_CLAIMING) || at != INT64_MAX)
		return at;
	look = now + (sl_claim_note.look_ns > 0 ? sl_claim_note.look_ns : SL_LEASE_CLAIM_LOOK_NS);
	/* Callers counted, not looks: a caller asks again only once an answer came
	 * after its ask (claims_got_ns: that answer brought nothing it could take)
	 * or its ask is lost.  Counting every look made a machine with two callers
	 * ask for four, claims nobody waited for were lost slots, and demand moving
	 * among 200 machines got 77% of the rate. */
	int64_t mine = sl_claim_note.caller_asked_ns;

	if ((mine <= 0 || l->claims_got_ns > mine || now - mine >= CLAIM_PENDING_NS) && l->claims_wanted < 1024) {
		l->claims_wanted++;
		sl_claim_note.asked++;
		sl_claim_note.caller_asked_ns = now;
	}
	l->claims_look_ns = now;
	sl_claim_note.looks++;
	sl_claim_note.look_at = SL_MAX(sl_claim_note.look_at, look);
	return look;
}

/* Past the slot starting at `slot` on g: where a queue's schedule or its release
 * half stands once that slot is taken - half an interval on, not a whole one.
 * The grid's origin moves with the daemon's estimate of Redis's clock (by
 * microseconds, now and then more): a whole interval on, the next slot moved
 * earlier by any of it was skipped and lost (1.5% of a machine's slots here);
 * half one on, a move of less than half an interval either way neither skips the
 * next slot nor gives the used one again. */
static int64_t grid_past(const struct sl_grid *g, int64_t slot)
{
	return slot + g->interval_ns / 2 + 1;
}

/* The average spacing of g's slots: the interval over g's part of the ranks. */
static int64_t grid_gap(const struct sl_grid *g)
{
	unsigned ranks = sl_grid_ranks(g);

	return ranks ? (int64_t)((__int128)g->interval_ns * SL_GRID_RANKS / ranks) : 0;
}

/* The slot a release checked at `now` may use on g: the first of this machine's
 * not yet used (rel_tat) that started at most an interval before now. */
static int64_t grid_release_slot(const struct sl_grid *g, const struct sl_state *st, int64_t now)
{
	return own_next(st, g, SL_MAX(sl_sane_ns(st->rel_tat_ns), now - g->interval_ns + 1));
}

/* A rate state with no usable share: counted (the daemon's measure of a demand
 * it has nothing to show for), and looked at again shortly. */
static int64_t missed(struct sl_state *st, int64_t now)
{
	lease_of(st)->misses++;
	return now + SL_LEASE_RETRY_NS;
}

static int is_window(const struct sl_spec *s)
{
	return s->strategy == SL_STRAT_FIXED_WINDOW || s->strategy == SL_STRAT_SLIDING_WINDOW ||
	       s->strategy == SL_STRAT_SESSION_WINDOW;
}

/* A fleet window state's chunk: usable at `now`, with `cost` left in `used`'s count. */
static int chunk_has(const struct sl_state *st, int64_t now, uint64_t used, uint64_t cost)
{
	const struct sl_lease *l = lease_of(st);

	return (l->flags & SL_LEASE_CHUNK) && now < l->until_ns && now < l->valid_ns && used <= l->amount &&
	       cost <= l->amount - used;
}

/* When a fleet window state may next have room: a look again within
 * SL_LEASE_RECHECK_NS while its chunk lasts (the daemon may top it up), or after
 * a short wait for a lease.  Either way the caller is counted: the daemon's sign
 * that this machine wants more of the window than it holds. */
static int64_t chunk_next(struct sl_state *st, int64_t now)
{
	const struct sl_lease *l = lease_of(st);

	lease_of(st)->misses++;
	if ((l->flags & SL_LEASE_CHUNK) && l->until_ns > now)
		return SL_MIN(l->until_ns, now + SL_LEASE_RECHECK_NS);
	return now + SL_LEASE_RETRY_NS;
}

int sl_limit_is_gcra(const struct sl_spec *s)
{
	return sl_strategy_is_gcra(s);
}

int64_t sl_limit_slot(const struct sl_spec *s, struct sl_state *st, int64_t now, uint64_t cost,
                      int64_t wall_off)
{
	struct sl_spec tmp;
	const struct sl_spec *r;
	const struct sl_grid *g;

	if (!sl_limit_fleet(s))
		return sl_strategy_slot(s, st, now, cost, wall_off);
	if (is_window(s))
		return chunk_has(st, now, lease_of(st)->sched_used, cost) ? now : chunk_next(st, now);
	if ((g = grid_of(st, now))) {
		int64_t at = claim_or(st, own_next(st, g, SL_MAX(sl_sane_ns(st->tat_ns), now)), now);

		return at == INT64_MAX ? missed(st, now) : at;
	}
	if (!(r = rate_spec(s, st, &tmp, now)))
		return missed(st, now);
	return sl_strategy_slot(r, st, now, cost, wall_off);
}

void sl_limit_charge(const struct sl_spec *s, struct sl_state *st, int64_t at, uint64_t cost,
                     int64_t wall_off, struct sl_undo *undo)
{
	struct sl_spec tmp;
	const struct sl_spec *r;
	const struct sl_grid *g;

	if (!sl_limit_fleet(s)) {
		sl_strategy_charge(s, st, at, cost, wall_off, undo);
		return;
	}
	memset(undo, 0, sizeof(*undo));
	undo->tat_ns = st->tat_ns;
	if (is_window(s)) {
		/* Counted in the chunk it falls in; one that comes later is counted at its
		 * release (the enforcement half never lets it past the chunk). */
		if (chunk_has(st, at, lease_of(st)->sched_used, cost)) {
			lease_of(st)->sched_used += cost;
			undo->win = (int64_t)lease_of(st)->chunk;
			undo->cost = cost;
		}
		return;
	}
	if ((g = grid_of(st, at))) {
		/* Only an own slot is taken: a look again (claim_or) reserves nothing. */
		if (!(lease_of(st)->flags & SL_LEASE_CLAIMING) || own_next(st, g, at) == at)
			st->tat_ns = SL_MAX(sl_sane_ns(st->tat_ns), grid_past(g, at));
	} else if ((r = rate_spec(s, st, &tmp, at))) {
		sl_strategy_charge(r, st, at, cost, wall_off, undo);
	}
}

void sl_limit_undo(const struct sl_spec *s, struct sl_state *st, const struct sl_undo *undo)
{
	if (!sl_limit_fleet(s)) {
		sl_strategy_undo(s, st, undo);
		return;
	}
	if (is_window(s)) {
		struct sl_lease *l = lease_of(st);

		if (undo->cost && (uint64_t)undo->win == l->chunk && l->sched_used >= undo->cost)
			l->sched_used -= undo->cost;
		return;
	}
	st->tat_ns = undo->tat_ns; /* the GCRA's own undo, whatever the share */
}

int64_t sl_limit_release_at(const struct sl_spec *s, struct sl_state *st, int64_t now, uint64_t cost,
                            int64_t wall_off)
{
	struct sl_spec tmp;
	const struct sl_spec *r;
	const struct sl_grid *g;
	int64_t at;

	if (!sl_limit_fleet(s))
		return sl_strategy_release_at(s, st, now, cost, wall_off);
	if (is_window(s))
		return chunk_has(st, now, lease_of(st)->rel_used, cost) ? now : chunk_next(st, now);
	if ((g = grid_of(st, now))) {
		if ((at = claim_or(st, grid_release_slot(g, st, now), now)) == INT64_MAX)
			return missed(st, now);
	} else if (!(r = rate_spec(s, st, &tmp, now))) {
		return missed(st, now);
	} else {
		at = sl_strategy_release_at(r, st, now, cost, wall_off);
	}
	/* A caller that looked and must wait on past the next look: the share is far
	 * too small for it (the daemon asks for more).  A wait shorter than that is a
	 * queue the daemon sees as one.  On the grid a caller may wait for the
	 * machine's next slot where a GCRA would let it go at once - one slot
	 * spacing more, on average, than the share's queue - so that much more is
	 * no sign: counted, a light machine's clients arriving together (10/s on a
	 * share of 11/s) asked for an equal part of the fleet every few rounds, and
	 * what it held of it went unused. */
	if (at > now + SL_LEASE_RECHECK_NS && (!g || at > now + SL_LEASE_RECHECK_NS + grid_gap(g)))
		lease_of(st)->misses++;
	return sl_limit_wake(s, at, now);
}

/* The instant a release checked at `now` is charged from (SL_WAKE_SLACK_NS): a
 * GCRA charges max(its tat, this) + the increment, so a check up to the slack
 * behind its gate counts from the gate itself. */
static int64_t charged_from(const struct sl_spec *r, uint64_t cost, int64_t now)
{
	if (!sl_strategy_is_gcra(r) || sl_gcra_increment(r, cost) >= SL_STRICT_INTERVAL_NS)
		return now;
	return now - SL_WAKE_SLACK_NS;
}

void sl_limit_released(const struct sl_spec *s, struct sl_state *st, int64_t now, uint64_t cost,
                       int64_t wall_off)
{
	struct sl_spec tmp;
	const struct sl_spec *r;
	const struct sl_grid *g;

	if (!sl_limit_fleet(s)) {
		sl_strategy_released(s, st, charged_from(s, cost, now), cost, wall_off);
		return;
	}
	if (is_window(s)) {
		lease_of(st)->rel_used += cost;
		return;
	}
	if ((g = grid_of(st, now))) {
		/* The slot release_at found (or, were there none, now): used. */
		int64_t slot = SL_MIN(grid_release_slot(g, st, now), now);

		st->rel_tat_ns = SL_MAX(sl_sane_ns(st->rel_tat_ns), grid_past(g, slot));
	} else if ((r = rate_spec(s, st, &tmp, now))) {
		sl_strategy_released(r, st, charged_from(r, cost, now), cost, wall_off);
	}
}

void sl_limit_moved(const struct sl_spec *s, struct sl_state *st, int64_t from, int64_t to,
                    uint64_t cost, int64_t wall_off)
{
	struct sl_spec tmp;
	const struct sl_spec *r;

	if (!sl_limit_fleet(s)) {
		sl_strategy_moved(s, st, from, to, cost, wall_off);
		return;
	}
	/* A chunk counts a request once, wherever in it it falls. */
	if (!is_window(s) && grid_of(st, to))
		st->rel_tat_ns = sl_limit_moved_tat(s, st, st->rel_tat_ns, to, cost);
	else if (!is_window(s) && (r = rate_spec(s, st, &tmp, to)))
		sl_strategy_moved(r, st, from, to, cost, wall_off);
}

int64_t sl_limit_moved_tat(const struct sl_spec *s, const struct sl_state *st, int64_t rel_tat, int64_t to,
                           uint64_t cost)
{
	struct sl_spec tmp;
	const struct sl_spec *r = s;
	int64_t next, inc;

	/* On the grid a release that went on to `to` used its slot all that time:
	 * this machine's slots that started meanwhile are not used either. */
	if (s->amount != 0 && sl_limit_fleet(s) && grid_of(st, to))
		return SL_MAX(sl_sane_ns(rel_tat), to + 1);
	if (s->amount == 0 || (sl_limit_fleet(s) && !(r = rate_spec(s, st, &tmp, to))))
		return rel_tat;
	/* rel_tat holds this release charged at its check: charged again at `to`,
	 * when it was made, from the slot it was charged for (rel_tat less its
	 * increment), as a late release is (sl_gcra_charge_late: with tolerance 0,
	 * to + inc). */
	inc = sl_gcra_increment(r, cost);
	next = sl_gcra_charge_late(sl_sane_ns(rel_tat) - inc, to, inc, sl_gcra_late(r));
	return next > sl_sane_ns(rel_tat) ? next : rel_tat;
}

int sl_limit_repair(const struct sl_spec *s, struct sl_state *st, int64_t now, int64_t wall_off)
{
	struct sl_spec tmp;
	const struct sl_spec *r;

	if (!sl_limit_fleet(s))
		return sl_strategy_repair(s, st, now, wall_off);
	if (!is_window(s) && (r = rate_spec(s, st, &tmp, now)))
		return sl_strategy_repair(r, st, now, wall_off);
	return 0; /* a chunk's counts are bounded by its amount, and it ends */
}

int sl_limit_needs_repair(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                          int64_t wall_off)
{
	struct sl_spec tmp;
	const struct sl_spec *r;

	if (!sl_limit_fleet(s))
		return sl_strategy_needs_repair(s, st, now, wall_off);
	if (!is_window(s) && (r = rate_spec(s, st, &tmp, now)))
		return sl_strategy_needs_repair(r, st, now, wall_off);
	return 0;
}

int sl_limit_idle(const struct sl_spec *s, const struct sl_state *st, int64_t now, int64_t wall_off)
{
	struct sl_spec tmp, none;
	const struct sl_spec *r;

	if (!sl_limit_fleet(s))
		return sl_strategy_idle(s, st, now, wall_off);
	/* A state with no rate of its own is idle when no place is held or waited
	 * for: the strategies answer that for a spec without a rate. */
	none = *s;
	none.amount = 0;
	if (is_window(s)) {
		const struct sl_lease *l = lease_of(st);

		return sl_strategy_idle(&none, st, now, wall_off) &&
		       (!(l->flags & SL_LEASE_CHUNK) || now >= l->until_ns || (!l->sched_used && !l->rel_used));
	}
	if ((r = rate_spec(s, st, &tmp, now)))
		return sl_strategy_idle(r, st, now, wall_off);
	return sl_strategy_idle(&none, st, now, wall_off);
}

uint64_t sl_limit_queued(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                         int64_t wall_off)
{
	struct sl_spec tmp;
	const struct sl_spec *r;
	const struct sl_grid *g;

	if (!sl_limit_fleet(s))
		return sl_strategy_queued(s, st, now, wall_off);
	if (is_window(s)) {
		const struct sl_lease *l = lease_of(st);

		return l->sched_used > l->rel_used ? l->sched_used - l->rel_used : 0;
	}
	if ((g = grid_of(st, now))) {
		/* Reservations still ahead, in slots of the machine's share (as a GCRA
		 * counts them: fleetpolicy.c reads a waiter as demand). */
		int64_t last = sl_sane_ns(st->tat_ns) - g->interval_ns / 2 - 1, gap = grid_gap(g);

		return last > now && gap > 0 ? (uint64_t)((last - now + gap - 1) / gap) : 0;
	}
	if ((r = rate_spec(s, st, &tmp, now)))
		return sl_strategy_queued(r, st, now, wall_off);
	return 0;
}

int64_t sl_limit_counted_from(const struct sl_spec *s, const struct sl_state *st, uint64_t cost,
                              int64_t checked, int64_t end)
{
	struct sl_spec tmp;
	const struct sl_spec *r = s;

	if (end <= checked)
		return checked;
	if (sl_limit_fleet(s) && !is_window(s) && !(r = rate_spec(s, st, &tmp, end)))
		return end;
	if (!sl_strategy_is_gcra(r) || sl_gcra_increment(r, cost) >= SL_STRICT_INTERVAL_NS)
		return end;
	return SL_MAX(checked - SL_WAKE_SLACK_NS, end - SL_CALL_SPREAD_NS); /* as charged_from */
}

uint32_t sl_limit_places(const struct sl_spec *s, const struct sl_state *st, int64_t now)
{
	const struct sl_lease *l;

	if (!sl_limit_fleet(s))
		return s->concurrency;
	l = lease_of(st);
	if (!s->concurrency || !(l->flags & SL_LEASE_PLACES) || now >= l->valid_ns)
		return 0; /* no limit to share, no lease, or one lapsed */
	return SL_MIN(l->places, s->concurrency);
}

void sl_lease_extend(struct sl_state *st, int64_t until)
{
	struct sl_lease *l = lease_of(st);

	if (l->flags && until > l->valid_ns)
		l->valid_ns = until;
}

int sl_lease_write(struct sl_state *st, const struct sl_grant *g, int64_t now)
{
	struct sl_lease *l = lease_of(st);
	int more = 0;

	if (g->flags & SL_LEASE_RATE) {
		/* The queue keeps its length in requests at the new share: otherwise a
		 * schedule laid out under a small share would keep the machine's callers
		 * waiting long after it grew (and one laid out under a large share would
		 * let them go too fast after it shrank).  On the grid the schedule is
		 * instants on it, whatever the share: rescaled, it skipped or doubled up
		 * slots at each of the small changes a busy fleet's shares go through,
		 * and a slot nobody waits for is lost (3% of the busy machines' shares). */
		if ((l->flags & SL_LEASE_RATE) && l->amount && l->window_ns > 0 && g->amount && g->window_ns > 0 &&
		    !sl_grid_usable(&g->grid) && !((g->flags | l->flags) & SL_LEASE_CLAIMING)) {
			struct sl_spec a = {.amount = l->amount, .window_ns = l->window_ns};
			struct sl_spec b = {.amount = g->amount, .window_ns = g->window_ns};
			int64_t from = sl_gcra_increment(&a, 1), to = sl_gcra_increment(&b, 1);

			if (from != to) {
				st->tat_ns = sl_gcra_rescale(st->tat_ns, now, from, to);
				st->rel_tat_ns = sl_gcra_rescale(st->rel_tat_ns, now, from, to);
			}
		}
		l->amount = g->amount;
		l->window_ns = g->window_ns;
		l->burst = g->burst ? g->burst : 1;
		l->grid = g->grid; /* none with a share that has none */
	}
	if (g->flags & SL_LEASE_CHUNK) {
		if (!(l->flags & SL_LEASE_CHUNK) || l->chunk != g->chunk) {
			l->sched_used = 0;
			l->rel_used = 0;
			l->chunk = g->chunk;
		}
		l->amount = g->amount;
		l->until_ns = g->until_ns;
	}
	if (g->flags & SL_LEASE_PLACES) {
		more = !(l->flags & SL_LEASE_PLACES) ? g->places > 0 : g->places > l->places;
		l->places = g->places;
	}
	l->flags = (l->flags & (SL_LEASE_RATE | SL_LEASE_CHUNK | SL_LEASE_PLACES)) | g->flags;
	if (!(g->flags & SL_LEASE_CLAIMING))
		l->flags &= ~SL_LEASE_CLAIMING;
	if (g->machines)
		l->machines = g->machines;
	l->valid_ns = g->valid_ns;
	if (!(g->flags & SL_LEASE_OUTAGE))
		l->flags &= ~SL_LEASE_OUTAGE;
	l->granted_ns = now;
	return more;
}

int sl_lease_claims_add(struct sl_state *st, const int64_t *k, uint32_t n, int64_t now)
{
	struct sl_lease *l = lease_of(st);
	const struct sl_grid *g = &l->grid;
	int64_t keep[SL_LEASE_CLAIMS + 64];
	uint32_t m = 0, had = SL_MIN(l->nclaims, (uint32_t)SL_LEASE_CLAIMS);

	if (g->interval_ns <= 0)
		return 0;
	/* Those still to start or started less than an interval ago, then the new
	 * ones after the last kept (Redis hands them out in order, once each). */
	for (uint32_t i = 0; i < had; i++) {
		int64_t c = claim_start(g, l->claim_k[i]);

		if (c != INT64_MAX && c > now - g->interval_ns)
			keep[m++] = l->claim_k[i];
	}
	for (uint32_t i = 0; i < n && i < 64; i++) {
		int64_t c = claim_start(g, k[i]);

		if (c != INT64_MAX && c > now - g->interval_ns && (m == 0 || k[i] > keep[m - 1]))
			keep[m++] = k[i];
	}
	/* Full: the oldest go (a claim is an instant, not a debt). */
	if (m > SL_LEASE_CLAIMS) {
		memmove(keep, keep + (m - SL_LEASE_CLAIMS), SL_LEASE_CLAIMS * sizeof(keep[0]));
		m = SL_LEASE_CLAIMS;
	}
	memcpy(l->claim_k, keep, m * sizeof(keep[0]));
	l->nclaims = m;
	l->claims_got_ns = now;
	return (int)m;
}

void sl_lease_claims_drop(struct sl_state *st)
{
	lease_of(st)->nclaims = 0;
}

uint32_t sl_lease_claims_wanted(struct sl_state *st, int64_t now)
{
	struct sl_lease *l = lease_of(st);
	uint32_t w = SL_MIN(l->claims_wanted, 1024u);

	l->claims_wanted = 0;
	if (w)
		l->claims_asked_ns = now;
	return w;
}

void sl_lease_claims_ring(struct sl_shm_header *h)
{
	/* The thread sleeps on the value it last saw: a bump before its sleep
	 * makes the sleep return at once, one during it is woken here.  A wake
	 * every ask: asks come at most once a look of a caller with no slot. */
	atomic_fetch_add_explicit((_Atomic uint32_t *)&h->claims_bell, 1, memory_order_release);
	sl_sys(SYS_futex, &h->claims_bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void sl_lease_claims_came(struct sl_shm_header *h)
{
	atomic_fetch_add_explicit((_Atomic uint32_t *)&h->claims_seq, 1, memory_order_release);
	sl_sys(SYS_futex, &h->claims_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
