/* The destination's signals applied to a queue (pause.h). */
#include "sluice/pause.h"

#include "sluice/limiter.h"

#define MS 1000000LL
#define FULL 1000000u
#define NO_CLAMP_NS (400LL * 86400 * 1000 * MS) /* max_pause = forever */

uint32_t sl_pause_adapt_ppm(const struct sl_state *st)
{
	uint32_t p = st->pause.adapt_ppm;

	return p == 0 || p > FULL ? FULL : p;
}

/* One release's pace at `at`: WINDOW/AMOUNT at the share of the rate in force,
 * and while resuming from a pause, slower: a quarter of the rate as the pause
 * ends, climbing evenly to all of it when the resume ends - a destination that
 * just asked for a pause gets a few requests first, not the whole rate at once. */
static int64_t pace_of(const struct sl_state *st, const struct sl_spec *s, int64_t at)
{
	int64_t inc = s->amount && s->meter != SL_METER_BYTES ? sl_gcra_increment(s, 1)
	            : s->amount ? 0 : SL_PAUSE_PACE_NORATE_NS;
	int64_t until = sl_sane_ns(st->pause.until_ns), end = sl_sane_ns(st->pause.pace_until_ns);

	if (s->adapt && inc)
		inc = (int64_t)((__int128)inc * FULL / sl_pause_adapt_ppm(st));
	if (inc && at < end && end > until) {
		/* share of the rate, in thousandths: 250 at `until`, 1000 at `end` */
		int64_t into = at > until ? at - until : 0;
		int64_t share = 250 + (int64_t)((__int128)750 * into / (end - until));

		inc = (int64_t)((__int128)inc * 1000 / (share > 0 ? share : 1));
	}
	return inc;
}

/* Pacing binds: resuming after a pause, or adapt holding the rate down. */
static int pacing(const struct sl_state *st, const struct sl_spec *s, int64_t now)
{
	return now < sl_sane_ns(st->pause.pace_until_ns) || (s->adapt && sl_pause_adapt_ppm(st) < FULL);
}

static int64_t clamp(const struct sl_spec *s, int64_t ns)
{
	int64_t most = s->max_pause_ns < 0 ? NO_CLAMP_NS : s->max_pause_ns;

	return ns < 0 ? 0 : ns > most ? most : ns;
}

/* adapt: a 429 halves the share in force, once a pace-free moment (half a second)
 * has passed since the last cut - the answers already in flight were sent at the
 * old rate and say nothing new. */
static int adapt_cut(struct sl_state *st, int64_t now)
{
	struct sl_pause *p = &st->pause;
	struct sl_adapt *a = &sl_state_more(st)->adapt; /* adapt = on keeps a more */
	uint32_t cur = sl_pause_adapt_ppm(st);

	if (a->cut_ns && now - sl_sane_ns(a->cut_ns) < 500 * MS)
		return 0;
	a->peak_ppm = cur;
	p->adapt_ppm = cur / 2 > SL_ADAPT_FLOOR_PPM ? cur / 2 : SL_ADAPT_FLOOR_PPM;
	a->floor_ppm = p->adapt_ppm;
	a->cut_ns = now;
	a->at_ns = now;
	return 1;
}

/* adapt: a good answer.  Back to nine tenths of the share the 429 came at within a
 * second of the cut, then a hundredth of the rate a second: additive, and close
 * to the destination's limit most of the time rather than at half of it. */
static void adapt_climb(struct sl_state *st, int64_t now)
{
	struct sl_pause *p = &st->pause;
	struct sl_adapt *a = &sl_state_more(st)->adapt;
	uint32_t cur = sl_pause_adapt_ppm(st), near = (uint32_t)((uint64_t)a->peak_ppm * 9 / 10);
	int64_t dt = now - sl_sane_ns(a->at_ns);
	uint64_t next;

	if (cur >= FULL || dt <= 0)
		return;
	if (dt > 10 * 1000 * MS)
		dt = 10 * 1000 * MS;
	if (cur < near && near > a->floor_ppm)
		next = cur + (uint64_t)((__int128)(near - a->floor_ppm) * dt / (1000 * MS)) + 1;
	else
		next = cur + (uint64_t)((__int128)(FULL / 100) * dt / (1000 * MS));
	if (cur < near && next > near)
		next = near;
	p->adapt_ppm = next >= FULL ? FULL : (uint32_t)next;
	a->at_ns = now;
}

/* A pause from now to `until`, asked for by `kind` with `status`. */
static void set_pause(struct sl_state *st, int64_t until, int64_t now, unsigned kind, unsigned status)
{
	struct sl_pause *p = &st->pause;
	int64_t len = until - now, pace = len > SL_PAUSE_PACE_MIN_NS ? len : SL_PAUSE_PACE_MIN_NS;

	p->until_ns = until;
	p->pace_until_ns = until + pace;
	p->sched_ns = p->sched_ns > until ? p->sched_ns : until;
	p->cursor_ns = p->cursor_ns > until ? p->cursor_ns : until;
	p->count++;
	p->status = (uint16_t)status;
	p->kind = (uint8_t)kind;
}

int sl_pause_apply(struct sl_state *st, const struct sl_spec *s, const struct sl_signal *sig, int64_t now)
{
	struct sl_pause *p = &st->pause;
	int64_t len = 0;
	int done = SL_PAUSE_NOTHING;

	if (!s->signals)
		return done;
	if (sig->good) {
		p->streak = 0;
		if (s->adapt)
			adapt_climb(st, now);
		return done;
	}
	if (sig->kind == SL_SIGNAL_NONE)
		return done;
	if (s->adapt && sig->status == 429 && adapt_cut(st, now))
		done |= SL_PAUSE_ADAPTED;
	if (sig->kind == SL_SIGNAL_BARE_429) {
		/* With adapt, the cut is the answer; without, a back-off that doubles
		 * while 429s keep coming. */
		if (s->adapt)
			return done;
		len = SL_PAUSE_BARE_429_NS << (p->streak < 20 ? p->streak : 20);
		if (p->streak < 255)
			p->streak++;
	} else {
		len = sig->pause_ms > NO_CLAMP_NS / MS ? NO_CLAMP_NS : sig->pause_ms * MS;
	}
	if (sig->budget > 0 && sig->budget_ms > 0) {
		p->budget_left = (uint64_t)sig->budget < UINT32_MAX ? (uint32_t)sig->budget : UINT32_MAX;
		p->budget_until_ns = now + clamp(s, sig->budget_ms * MS);
		done |= SL_PAUSE_BUDGET;
	}
	len = clamp(s, len);
	if (len > 0 && now + len > sl_sane_ns(p->until_ns)) {
		set_pause(st, now + len, now, sig->kind, sig->status);
		done |= SL_PAUSE_SET;
	}
	return done;
}

int sl_pause_fleet(struct sl_state *st, const struct sl_spec *s, int64_t until, int64_t now)
{
	if (!s->signals || until <= now)
		return 0;
	until = now + clamp(s, until - now);
	if (until <= sl_sane_ns(st->pause.until_ns) + 50 * MS)
		return 0;
	set_pause(st, until, now, SL_SIGNAL_FLEET, 0);
	return 1;
}

int64_t sl_pause_slot(struct sl_state *st, const struct sl_spec *s, int64_t slot, int64_t now, int charge)
{
	struct sl_pause *p = &st->pause;
	int64_t until, pace;

	until = sl_sane_ns(p->until_ns);
	if (slot < until)
		slot = until;
	if (p->budget_left == 0 && now < sl_sane_ns(p->budget_until_ns) && slot < p->budget_until_ns)
		slot = sl_sane_ns(p->budget_until_ns);
	if (!pacing(st, s, now))
		return slot;
	if (slot < sl_sane_ns(p->sched_ns))
		slot = sl_sane_ns(p->sched_ns);
	pace = pace_of(st, s, slot);
	if (charge)
		p->sched_ns = slot + pace;
	return slot;
}

int64_t sl_pause_release_at(const struct sl_state *st, const struct sl_spec *s, int64_t now)
{
	const struct sl_pause *p = &st->pause;
	int64_t at = now;

	if (now < sl_sane_ns(p->until_ns))
		at = sl_sane_ns(p->until_ns);
	if (p->budget_left == 0 && now < sl_sane_ns(p->budget_until_ns))
		at = at > p->budget_until_ns ? at : sl_sane_ns(p->budget_until_ns);
	if (pacing(st, s, now) && at < sl_sane_ns(p->cursor_ns))
		at = sl_sane_ns(p->cursor_ns);
	return at;
}

void sl_pause_released(struct sl_state *st, const struct sl_spec *s, int64_t now)
{
	struct sl_pause *p = &st->pause;

	if (p->budget_left && now < sl_sane_ns(p->budget_until_ns))
		p->budget_left--;
	if (pacing(st, s, now)) {
		int64_t from = sl_sane_ns(p->cursor_ns) > now ? sl_sane_ns(p->cursor_ns) : now;

		p->cursor_ns = from + pace_of(st, s, from);
	}
}

int sl_pause_active(const struct sl_state *st, int64_t now)
{
	return now < sl_sane_ns(st->pause.until_ns) ||
	       (st->pause.budget_left == 0 && now < sl_sane_ns(st->pause.budget_until_ns));
}
