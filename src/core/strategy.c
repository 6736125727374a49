/* The strategies of docs/config.md over a section's state (strategy.h). */
#include "sluice/strategy.h"
#include "sluice/common.h"
#include "sluice/calendar.h"
#include "sluice/limiter.h"

#include <string.h>

#define B SL_SLIDE_BUCKETS

/* What one request counts for in a window: never more than the whole window, or a
 * request larger than AMOUNT could never go. */
static uint64_t weight(const struct sl_spec *s, uint64_t cost)
{
	return cost < s->amount ? cost : s->amount;
}

static int64_t window(const struct sl_spec *s)
{
	return s->window_ns <= 0 ? 1 : s->window_ns > SL_SANE_NS ? SL_SANE_NS : s->window_ns;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* --- GCRA (leaky-bucket, token-bucket) --- */

/* The enforcement half is a GCRA over actual release instants with the section's
 * own tolerance and nothing more: so the instants themselves - not only the slots
 * - never hold more than burst + W/interval in any span W (docs/design.md, "The queue"),
 * also while a backlog catches up after late wake-ups.  A late release makes the next
 * ones of a backlog as late (lateness is allowed, excess is not); new arrivals are
 * scheduled after it (sl_strategy_slot), so the lag ends with the backlog.  A bytes
 * piece smaller than the largest may also use what the largest would have spanned
 * (sl_bytes_slack): the bound, rate x span + one piece, stays.  See
 * docs/design.md, "The queue" and "Bytes". */
static int64_t gcra_release_at(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                               uint64_t cost)
{
	return sl_gcra_slot(st->rel_tat_ns, sl_gcra_tolerance(s) + sl_bytes_slack(s, cost), now);
}

/* --- fixed-window: window k is [k*W - wall_off, (k+1)*W - wall_off) --- */

static int64_t fixed_index(const struct sl_spec *s, int64_t t, int64_t wall_off)
{
	if (s->calendar) /* the calendar's week, month or year holding wall time t */
		return sl_calendar_index(s->calendar, sl_sane_ns(t) + sl_sane_ns(wall_off));
	return floor_div(sl_sane_ns(t) + sl_sane_ns(wall_off), window(s));
}

static int64_t fixed_start(const struct sl_spec *s, int64_t k, int64_t wall_off)
{
	__int128 v = s->calendar ? (__int128)sl_calendar_start(s->calendar, k) - sl_sane_ns(wall_off)
	                         : (__int128)k * window(s) - sl_sane_ns(wall_off);

	return v > SL_SANE_NS ? SL_SANE_NS : v < -SL_SANE_NS ? -SL_SANE_NS : (int64_t)v;
}

/* When a request of weight w fits, given window `win` holding `used`. */
static int64_t fixed_fit(const struct sl_spec *s, int64_t win, uint64_t used, int64_t now,
                         uint64_t w, int64_t wall_off)
{
	int64_t k = fixed_index(s, now, wall_off);

	win = sl_sane_ns(win);
	if (win < k) {
		win = k;
		used = 0;
	}
	if (used + w <= s->amount)
		return SL_MAX(now, fixed_start(s, win, wall_off));
	return fixed_start(s, win + 1, wall_off);
}

static void fixed_count(const struct sl_spec *s, int64_t *win, uint64_t *used, int64_t at,
                        uint64_t w, int64_t wall_off)
{
	int64_t k = fixed_index(s, at, wall_off);

	if (*win < k) {
		*win = k;
		*used = 0;
	}
	*used += w;
}

/* --- session-window: [win, win + W) from the first request --- */

static int64_t session_fit(const struct sl_spec *s, int64_t start, uint64_t used, int64_t now,
                           uint64_t w)
{
	start = sl_sane_ns(start);
	if (used == 0 || now >= start + window(s))
		return now; /* a new session would start now */
	if (used + w <= s->amount)
		return SL_MAX(now, start);
	return start + window(s);
}

static void session_count(const struct sl_spec *s, int64_t *start, uint64_t *used, int64_t at,
                          uint64_t w)
{
	if (*used == 0 || at >= sl_sane_ns(*start) + window(s)) {
		*start = at;
		*used = 0;
	}
	*used += w;
}

/* --- sliding-window --- */

int64_t sl_slide_width(const struct sl_spec *s)
{
	int64_t w = (window(s) + (B - 1) - 1) / (B - 1);

	return w > 0 ? w : 1;
}

/* A sliding window's counts, in the state's more: only a sliding spec's state is
 * asked for them (sl_spec_needs_more). */
static struct sl_slide *slide_of(const struct sl_state *st)
{
	return &sl_state_more(st)->slide;
}

static struct sl_slide *rel_slide_of(const struct sl_state *st)
{
	return &sl_state_more(st)->rel_slide;
}

/* The segment may hold anything: `newest` is clamped before any arithmetic. */
static uint64_t slide_get(const struct sl_slide *sl, int64_t b)
{
	int64_t newest = sl_sane_ns(sl->newest);

	if (b > newest || b <= newest - B)
		return 0;
	return sl->count[(uint64_t)b % B];
}

/* What counts against a request in bucket b: the B buckets up to b.  Any span of
 * WINDOW ending in bucket b lies within them (B-1 buckets cover WINDOW). */
static uint64_t slide_sum(const struct sl_slide *sl, int64_t b)
{
	uint64_t sum = 0;

	for (int64_t j = b - B + 1; j <= b; j++)
		sum += slide_get(sl, j);
	return sum;
}

static int64_t slide_start(const struct sl_spec *s, int64_t b)
{
	__int128 v = (__int128)b * sl_slide_width(s);

	return v > SL_SANE_NS ? SL_SANE_NS : v < -SL_SANE_NS ? -SL_SANE_NS : (int64_t)v;
}

static void slide_add(struct sl_slide *sl, int64_t b, uint64_t w)
{
	int64_t newest = sl_sane_ns(sl->newest);

	if (b > newest) {
		for (int64_t j = SL_MAX(newest + 1, b - B + 1); j <= b; j++)
			sl->count[(uint64_t)j % B] = 0;
		sl->newest = newest = b;
	}
	if (b > newest - B)
		sl->count[(uint64_t)b % B] += w;
}

static int64_t slide_bucket(const struct sl_spec *s, int64_t t)
{
	return floor_div(sl_sane_ns(t), sl_slide_width(s));
}

/* Earliest t >= from with room for w.  Within B+1 buckets every count has aged
 * out, so the search is bounded. */
static int64_t slide_fit(const struct sl_spec *s, const struct sl_slide *sl, int64_t from, uint64_t w)
{
	int64_t b = slide_bucket(s, from);
	uint64_t sum = slide_sum(sl, b);

	for (int i = 0; i <= B; i++) {
		if (sum + w <= s->amount)
			return i == 0 ? from : slide_start(s, b);
		/* Slide one bucket: the oldest leaves, the next enters. */
		sum -= SL_MIN(sum, slide_get(sl, b - B + 1));
		sum += slide_get(sl, ++b);
	}
	return slide_start(s, b);
}

/* --- the strategy interface --- */

static int is_gcra(const struct sl_spec *s)
{
	return s->strategy == SL_STRAT_LEAKY_BUCKET || s->strategy == SL_STRAT_TOKEN_BUCKET ||
	       s->strategy > SL_STRAT_SESSION_WINDOW;
}

int sl_strategy_is_gcra(const struct sl_spec *s)
{
	return s->amount != 0 && is_gcra(s);
}

int64_t sl_strategy_release_at(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                               uint64_t cost, int64_t wall_off)
{
	uint64_t w = weight(s, cost);

	if (s->amount == 0)
		return now;
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW:
		return fixed_fit(s, st->rel_win, st->rel_win_used, now, w, wall_off);
	case SL_STRAT_SESSION_WINDOW:
		return session_fit(s, st->rel_win, st->rel_win_used, now, w);
	case SL_STRAT_SLIDING_WINDOW:
		return slide_fit(s, rel_slide_of(st), now, w);
	default:
		return gcra_release_at(s, st, now, cost);
	}
}

void sl_strategy_released(const struct sl_spec *s, struct sl_state *st, int64_t now, uint64_t cost,
                          int64_t wall_off)
{
	uint64_t w = weight(s, cost);

	if (s->amount == 0)
		return;
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW:
		fixed_count(s, &st->rel_win, &st->rel_win_used, now, w, wall_off);
		break;
	case SL_STRAT_SESSION_WINDOW:
		session_count(s, &st->rel_win, &st->rel_win_used, now, w);
		break;
	case SL_STRAT_SLIDING_WINDOW:
		slide_add(rel_slide_of(st), slide_bucket(s, now), w);
		break;
	default:
		st->rel_tat_ns = sl_gcra_charge_late(st->rel_tat_ns, now, sl_gcra_increment(s, cost), sl_gcra_late(s));
	}
}

/* meter = connections, a GCRA: whether its states keep the first writes' line. */
static int first_kept(const struct sl_spec *s)
{
	return s->amount != 0 && s->meter == SL_METER_CONNECTIONS && is_gcra(s);
}

static int64_t horizon(const struct sl_spec *s);

/* The line's tat as the segment holds it: one further ahead than any wait can
 * put it (sl_strategy_repair's horizon) - another boot's clock kept by a durable
 * quota, a scribble - starts again from now. */
static int64_t first_tat(const struct sl_spec *s, const struct sl_state *st, int64_t now)
{
	int64_t f = sl_sane_ns(st->first_tat_ns);

	return f > sl_sane_ns(now) + horizon(s) ? now : f;
}

int64_t sl_strategy_first_at(const struct sl_spec *s, const struct sl_state *st, int64_t now)
{
	if (!first_kept(s))
		return now;
	return sl_gcra_slot(first_tat(s, st, now), sl_gcra_tolerance(s), now);
}

void sl_strategy_first_count(const struct sl_spec *s, struct sl_state *st, int64_t at)
{
	if (first_kept(s))
		st->first_tat_ns = sl_gcra_charge_late(first_tat(s, st, at), at, sl_gcra_increment(s, 1), sl_gcra_late(s));
}

uint64_t sl_strategy_room(const struct sl_spec *s, const struct sl_state *st, int64_t now, uint64_t cost)
{
	uint64_t piece = sl_bytes_piece(s);
	int64_t room;
	unsigned __int128 bytes;

	if (s->meter != SL_METER_BYTES || !sl_strategy_is_gcra(s) || s->window_ns <= 0 || cost >= piece)
		return 0;
	/* After a release at now, tat - now may come to tolerance + one piece's time
	 * and no further: what is left of that is room. */
	room = sl_gcra_tolerance(s) + sl_gcra_increment(s, sl_bytes_piece(s)) -
	       (sl_sane_ns(st->rel_tat_ns) - sl_sane_ns(now));
	if (room <= 0)
		return 0;
	bytes = (unsigned __int128)room * s->amount / (uint64_t)s->window_ns;
	/* Never past one piece in all: a release found up to SL_WAKE_SLACK_NS behind
	 * its gate was counted from the gate (lease.c, charged_from), which would
	 * otherwise leave that much more room. */
	if (bytes > piece - cost)
		bytes = piece - cost;
	/* The increment rounds up: one byte fewer where it would overshoot. */
	while (bytes && sl_gcra_increment(s, (uint64_t)bytes) > room)
		bytes--;
	return (uint64_t)bytes;
}

void sl_strategy_grow(const struct sl_spec *s, struct sl_state *st, uint64_t more)
{
	int64_t inc = sl_gcra_increment(s, more);

	st->tat_ns = sl_sane_ns(st->tat_ns) + inc;
	st->rel_tat_ns = sl_sane_ns(st->rel_tat_ns) + inc;
}

void sl_strategy_moved(const struct sl_spec *s, struct sl_state *st, int64_t from, int64_t to,
                       uint64_t cost, int64_t wall_off)
{
	uint64_t w = weight(s, cost);

	if (s->amount == 0 || (to <= from && !sl_strategy_is_gcra(s)))
		return; /* a GCRA only ever moves on to the later of the two (below) */
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW:
		if (fixed_index(s, to, wall_off) != fixed_index(s, from, wall_off))
			fixed_count(s, &st->rel_win, &st->rel_win_used, to, w, wall_off);
		break;
	case SL_STRAT_SESSION_WINDOW:
		if (to >= sl_sane_ns(st->rel_win) + window(s))
			session_count(s, &st->rel_win, &st->rel_win_used, to, w);
		else if (st->rel_win == from)
			/* The session this release opened opens when the release was made, as
			 * the destination sees it: opened at the check, a few microseconds
			 * earlier, it ended that much before the destination's own, which then
			 * saw the next session's first request as AMOUNT + 1 in its window. */
			st->rel_win = to;
		break;
	case SL_STRAT_SLIDING_WINDOW:
		if (slide_bucket(s, to) != slide_bucket(s, from))
			slide_add(rel_slide_of(st), slide_bucket(s, to), w);
		break;
	default: {
		int64_t next = sl_sane_ns(to) + sl_gcra_increment(s, cost);

		if (next > sl_sane_ns(st->rel_tat_ns))
			st->rel_tat_ns = next;
	}
	}
}

/* --- corrupt state (docs/design.md, "The queue": no corrupt value turns into a hang or a
 * release) ---
 *
 * How far ahead of `now` a section's state may lawfully lie: no admission hands
 * out a slot beyond max_wait (a day, when the section waits for ever), and a slot
 * moves the state on by at most one window, or one burst's tolerance.  Anything
 * further was written by no admission: a scribble.  It is reset to what can hold
 * no excess - the scheduling half to "no queue", the enforcement half to "one
 * window's worth went just now", which may make callers wait one window more but
 * never lets more through - instead of being slept on for years. */
static int64_t horizon(const struct sl_spec *s)
{
	int64_t wait = s->max_wait_ns >= 0 ? sl_sane_ns(s->max_wait_ns) : SL_REPAIR_FOREVER_NS;

	/* Each term is at most SL_SANE_NS, so the sum fits; clamped again, it can be
	 * added to a sane `now`. */
	return sl_sane_ns(wait + 2 * window(s) + sl_sane_ns(sl_gcra_tolerance(s)));
}

/* dry: only tell whether something would be reset. */
static int repair(const struct sl_spec *s, struct sl_state *st, int64_t now, int64_t wall_off, int dry)
{
	int64_t limit = sl_sane_ns(now) + horizon(s);
	int fixed = 0;

	if (s->amount == 0)
		return 0;
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW: {
		int64_t k = fixed_index(s, now, wall_off);

		if (fixed_start(s, sl_sane_ns(st->win), wall_off) > limit) {
			if (dry)
				return 1;
			st->win = k;
			st->win_used = 0;
			fixed = 1;
		}
		if (fixed_start(s, sl_sane_ns(st->rel_win), wall_off) > limit) {
			if (dry)
				return 1;
			st->rel_win = k;
			st->rel_win_used = s->amount;
			fixed = 1;
		}
		break;
	}
	case SL_STRAT_SESSION_WINDOW:
		if (sl_sane_ns(st->win) > limit) {
			if (dry)
				return 1;
			st->win = now;
			st->win_used = 0;
			fixed = 1;
		}
		if (sl_sane_ns(st->rel_win) > limit) {
			if (dry)
				return 1;
			st->rel_win = now;
			st->rel_win_used = s->amount;
			fixed = 1;
		}
		break;
	case SL_STRAT_SLIDING_WINDOW:
		if (slide_start(s, sl_sane_ns(slide_of(st)->newest)) > limit) {
			if (dry)
				return 1;
			memset(slide_of(st), 0, sizeof(struct sl_slide));
			slide_of(st)->newest = slide_bucket(s, now);
			fixed = 1;
		}
		if (slide_start(s, sl_sane_ns(rel_slide_of(st)->newest)) > limit) {
			if (dry)
				return 1;
			memset(rel_slide_of(st), 0, sizeof(struct sl_slide));
			rel_slide_of(st)->newest = slide_bucket(s, now);
			rel_slide_of(st)->count[(uint64_t)rel_slide_of(st)->newest % B] = s->amount;
			fixed = 1;
		}
		break;
	default:
		if (sl_sane_ns(st->rel_tat_ns) > limit) {
			if (dry)
				return 1;
			st->rel_tat_ns = sl_sane_ns(now) + window(s);
			fixed = 1;
		}
		if (sl_sane_ns(st->tat_ns) > limit) {
			if (dry)
				return 1;
			st->tat_ns = SL_MAX(sl_sane_ns(now), sl_sane_ns(st->rel_tat_ns));
			fixed = 1;
		}
	}
	return fixed;
}

int sl_strategy_repair(const struct sl_spec *s, struct sl_state *st, int64_t now, int64_t wall_off)
{
	return repair(s, st, now, wall_off, 0);
}

int sl_strategy_needs_repair(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                             int64_t wall_off)
{
	return repair(s, (struct sl_state *)st, now, wall_off, 1);
}

/* --- a step of the wall clock --- */

void sl_strategy_wall_step(const struct sl_spec *s, struct sl_state *st, int64_t now, int64_t from,
                           int64_t to)
{
	int64_t k_old, k_new, shift, w, start_old, start_new;

	if (s->strategy != SL_STRAT_FIXED_WINDOW || s->amount == 0 || from == to)
		return;
	k_old = fixed_index(s, now, from);
	k_new = fixed_index(s, now, to);
	shift = k_new - k_old;
	start_old = fixed_start(s, k_old, from);
	start_new = fixed_start(s, k_new, to);
	/* Scheduling: reservations keep their windows' distance from now. */
	if (sl_sane_ns(st->win) >= k_old)
		st->win = sl_sane_ns(st->win) + shift;
	/* Enforcement: what went in the window now in force, as far as it is known. */
	w = sl_sane_ns(st->rel_win);
	if (w == k_old) {
		/* Its count is what went since start_old; a new window that starts
		 * before that also holds part of the previous one, uncounted. */
		st->rel_win = k_new;
		if (start_new < start_old)
			st->rel_win_used = s->amount;
	} else if (w == k_old - 1) {
		/* Nothing yet in the old window now in force; the new one reaches back
		 * into the previous old one only when it starts before start_old. */
		if (start_new < start_old)
			st->rel_win = k_new; /* its count, all of it, may lie in the new one */
	} else if (w > k_old) {
		st->rel_win = w + shift;
	}
	if (sl_sane_ns(st->win) == sl_sane_ns(st->rel_win) && st->win_used < st->rel_win_used)
		st->win_used = st->rel_win_used;
}

/* --- reload: a section's limit changes, its state is carried over --- */

void sl_strategy_convert(const struct sl_spec *from, const struct sl_spec *to, struct sl_state *st,
                         int64_t now, int64_t wall_off)
{
	if (to->amount == 0 || from->amount == 0)
		return; /* no rate before or after: nothing to carry over */
	if (is_gcra(from) && is_gcra(to)) {
		/* The queue and the releases in flight, counted in requests, keep their
		 * length; each request now takes the new interval. */
		int64_t a = sl_gcra_increment(from, 1), b = sl_gcra_increment(to, 1);

		st->tat_ns = sl_gcra_rescale(st->tat_ns, now, a, b);
		st->rel_tat_ns = sl_gcra_rescale(st->rel_tat_ns, now, a, b);
		return;
	}
	if (from->strategy == to->strategy && from->window_ns == to->window_ns && from->calendar == to->calendar)
		return; /* the same windows: their counts hold against the new AMOUNT */
	/* Across kinds of state nothing tells what went in the new window so far, so
	 * take the most it could have been: a whole window's worth just now.  Callers
	 * may wait up to one window more; the destination never sees more. */
	sl_strategy_exhaust(to, st, now, wall_off);
}

/* One request's count out of bucket b, while the ring still holds it. */
static void slide_sub(struct sl_slide *sl, int64_t b, uint64_t w)
{
	int64_t newest = sl_sane_ns(sl->newest);

	if (b <= newest && b > newest - B && sl->count[(uint64_t)b % B] >= w)
		sl->count[(uint64_t)b % B] -= w;
}

/* A window's count less w when the window is still the one `at` fell in. */
static void window_sub(int64_t win, uint64_t *used, int64_t k, uint64_t w)
{
	if (sl_sane_ns(win) == k && *used >= w)
		*used -= w;
}

void sl_strategy_refund(const struct sl_spec *s, struct sl_state *st, int64_t at, uint64_t cost, int64_t now,
                        int64_t wall_off)
{
	uint64_t w = weight(s, cost);

	if (s->amount == 0)
		return;
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW:
		window_sub(st->rel_win, &st->rel_win_used, fixed_index(s, at, wall_off), w);
		window_sub(st->win, &st->win_used, fixed_index(s, at, wall_off), w);
		break;
	case SL_STRAT_SESSION_WINDOW:
		/* the session it went in, while that session lasts */
		if (at >= sl_sane_ns(st->rel_win) && at < sl_sane_ns(st->rel_win) + window(s) &&
		    now < sl_sane_ns(st->rel_win) + window(s) && st->rel_win_used >= w)
			st->rel_win_used -= w;
		if (at >= sl_sane_ns(st->win) && at < sl_sane_ns(st->win) + window(s) &&
		    now < sl_sane_ns(st->win) + window(s) && st->win_used >= w)
			st->win_used -= w;
		break;
	case SL_STRAT_SLIDING_WINDOW:
		slide_sub(rel_slide_of(st), slide_bucket(s, at), w);
		slide_sub(slide_of(st), slide_bucket(s, at), w);
		break;
	default: {
		/* A release fills the bucket until at least an increment after it: given
		 * back within that, its increment is still in the bucket and drains out
		 * of it (never below empty, now).  Later it may have drained already -
		 * what fills the bucket then is others', not to be given away. */
		int64_t inc = sl_gcra_increment(s, cost);

		if (now >= sl_sane_ns(at) + inc)
			break;
		if (sl_sane_ns(st->rel_tat_ns) > now)
			st->rel_tat_ns = SL_MAX(now, sl_sane_ns(st->rel_tat_ns) - inc);
		if (sl_sane_ns(st->tat_ns) > now)
			st->tat_ns = SL_MAX(now, sl_sane_ns(st->tat_ns) - inc);
	}
	}
}

void sl_strategy_exhaust(const struct sl_spec *to, struct sl_state *st, int64_t now, int64_t wall_off)
{
	if (to->amount == 0)
		return;
	if (to->strategy == SL_STRAT_SLIDING_WINDOW) {
		memset(slide_of(st), 0, sizeof(struct sl_slide));
		memset(rel_slide_of(st), 0, sizeof(struct sl_slide));
	}
	st->win = st->win_used = st->rel_win = st->rel_win_used = 0;
	st->tat_ns = st->rel_tat_ns = 0;
	switch (to->strategy) {
	case SL_STRAT_FIXED_WINDOW:
		st->win = st->rel_win = fixed_index(to, now, wall_off);
		st->win_used = st->rel_win_used = to->amount;
		break;
	case SL_STRAT_SESSION_WINDOW:
		st->win = st->rel_win = now;
		st->win_used = st->rel_win_used = to->amount;
		break;
	case SL_STRAT_SLIDING_WINDOW:
		slide_of(st)->newest = rel_slide_of(st)->newest = slide_bucket(to, now);
		slide_of(st)->count[(uint64_t)slide_of(st)->newest % B] = to->amount;
		rel_slide_of(st)->count[(uint64_t)rel_slide_of(st)->newest % B] = to->amount;
		break;
	default:
		st->tat_ns = st->rel_tat_ns = sl_sane_ns(now) + window(to) - sl_gcra_tolerance(to);
	}
}

int64_t sl_strategy_slot(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                         uint64_t cost, int64_t wall_off)
{
	uint64_t w = weight(s, cost);
	int64_t slot;

	if (s->amount == 0)
		return now;
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW:
		slot = fixed_fit(s, st->win, st->win_used, now, w, wall_off);
		break;
	case SL_STRAT_SESSION_WINDOW:
		slot = session_fit(s, st->win, st->win_used, now, w);
		break;
	case SL_STRAT_SLIDING_WINDOW:
		/* Queued after every reservation: none lies beyond the newest bucket. */
		slot = slide_fit(s, slide_of(st), SL_MAX(now, slide_start(s, sl_sane_ns(slide_of(st)->newest))), w);
		break;
	default:
		slot = sl_gcra_slot(st->tat_ns, sl_gcra_tolerance(s), now);
	}
	/* Never promise a time the release check would refuse: when earlier releases
	 * ran late, the slot follows them. */
	return SL_MAX(slot, sl_strategy_release_at(s, st, now, cost, wall_off));
}

void sl_strategy_charge(const struct sl_spec *s, struct sl_state *st, int64_t at, uint64_t cost,
                        int64_t wall_off, struct sl_undo *undo)
{
	uint64_t w = weight(s, cost);

	undo->tat_ns = st->tat_ns;
	undo->win = st->win;
	undo->win_used = st->win_used;
	undo->slide_bucket = slide_bucket(s, at);
	undo->cost = w;
	if (s->amount == 0)
		return;
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW:
		fixed_count(s, &st->win, &st->win_used, at, w, wall_off);
		break;
	case SL_STRAT_SESSION_WINDOW:
		session_count(s, &st->win, &st->win_used, at, w);
		break;
	case SL_STRAT_SLIDING_WINDOW:
		slide_add(slide_of(st), undo->slide_bucket, w);
		break;
	default:
		st->tat_ns = sl_gcra_charge_late(st->tat_ns, at, sl_gcra_increment(s, cost), sl_gcra_late(s));
	}
}

void sl_strategy_undo(const struct sl_spec *s, struct sl_state *st, const struct sl_undo *undo)
{
	if (is_gcra(s)) {
		st->tat_ns = undo->tat_ns;
	} else if (s->strategy == SL_STRAT_SLIDING_WINDOW) {
		int64_t b = undo->slide_bucket, newest = sl_sane_ns(slide_of(st)->newest);

		if (b <= newest && b > newest - B) {
			uint64_t *c = &slide_of(st)->count[(uint64_t)b % B];

			*c -= undo->cost < *c ? undo->cost : *c;
		}
	} else {
		st->win = undo->win;
		st->win_used = undo->win_used;
	}
}

int sl_strategy_window_now(const struct sl_spec *s, const struct sl_state *st, int64_t now, int64_t wall_off,
                           struct sl_window_now *w)
{
	uint64_t used = 0, taken = 0;

	if (s->amount == 0)
		return 0;
	if (s->strategy == SL_STRAT_FIXED_WINDOW) {
		int64_t k = fixed_index(s, now, wall_off);

		used = sl_sane_ns(st->rel_win) == k ? st->rel_win_used : 0;
		/* reserved in this window, or queued into a later one: this one is full */
		taken = sl_sane_ns(st->win) == k ? st->win_used : sl_sane_ns(st->win) > k ? s->amount : 0;
		w->ends_ns = fixed_start(s, k + 1, wall_off);
	} else if (s->strategy == SL_STRAT_SESSION_WINDOW) {
		int64_t start = sl_sane_ns(st->rel_win);

		if (st->rel_win_used && now < start + window(s)) {
			used = st->rel_win_used;
			w->ends_ns = start + window(s);
		} else {
			w->ends_ns = -1;
		}
		taken = sl_sane_ns(st->win) > now ? s->amount /* queued into the next: this one is full */
		      : st->win_used && now < sl_sane_ns(st->win) + window(s) ? st->win_used : 0;
	} else {
		return 0;
	}
	w->used = SL_MIN(used, s->amount);
	w->left = s->amount - SL_MIN(SL_MAX(used, taken), s->amount);
	return 1;
}

uint64_t sl_strategy_queued(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                            int64_t wall_off)
{
	uint64_t n = 0;

	if (s->amount == 0)
		return 0;
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW: {
		int64_t k = fixed_index(s, now, wall_off), win = sl_sane_ns(st->win);

		if (win > k)
			n = st->win_used + (uint64_t)SL_MIN(win - k - 1, (int64_t)1 << 20) * s->amount;
		return n;
	}
	case SL_STRAT_SESSION_WINDOW:
		return st->win > now ? st->win_used : 0;
	case SL_STRAT_SLIDING_WINDOW:
		for (int64_t b = SL_MAX(slide_bucket(s, now) + 1, sl_sane_ns(slide_of(st)->newest) - B + 1);
		     b <= sl_sane_ns(slide_of(st)->newest); b++)
			n += slide_get(slide_of(st), b);
		return n;
	default:
		return sl_gcra_queued(st->tat_ns, sl_gcra_tolerance(s), sl_gcra_increment(s, 1), now);
	}
}

/* A state is idle when a zero state would answer every call from `now` on as it
 * does: what a key may be evicted for (keys.h).  GCRA: both timestamps behind
 * now (max(tat, now) = now either way); windows: no count that still counts -
 * the window it lies in is over, or it holds nothing; no place taken or waited
 * for; no reservation whose slot is still to come. */
int sl_strategy_idle(const struct sl_spec *s, const struct sl_state *st, int64_t now,
                     int64_t wall_off)
{
	if (st->conc_open || st->conc_waiters || (st->last_owner > 0 && st->last_slot > now))
		return 0;
	if (s->amount == 0)
		return 1;
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW: {
		int64_t k = fixed_index(s, now, wall_off);

		return (st->win_used == 0 || sl_sane_ns(st->win) < k) &&
		       (st->rel_win_used == 0 || sl_sane_ns(st->rel_win) < k);
	}
	case SL_STRAT_SESSION_WINDOW:
		return (st->win_used == 0 || now >= sl_sane_ns(st->win) + window(s)) &&
		       (st->rel_win_used == 0 || now >= sl_sane_ns(st->rel_win) + window(s));
	case SL_STRAT_SLIDING_WINDOW: {
		int64_t b = slide_bucket(s, now);

		return sl_sane_ns(slide_of(st)->newest) <= b && sl_sane_ns(rel_slide_of(st)->newest) <= b &&
		       slide_sum(slide_of(st), b) == 0 && slide_sum(rel_slide_of(st), b) == 0;
	}
	default:
		return st->tat_ns <= now && st->rel_tat_ns <= now;
	}
}
