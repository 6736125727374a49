/* Quotas that outlive the segment: the shims' spending and the state file (quota.h). */
#include "sluice/quota.h"
#include "sluice/common.h"
#include "sluice/limiter.h"
#include "sluice/strategy.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_PARTS 100u
#define CHUNK_MAX (1u << 30)

uint32_t sl_quota_chunk(const struct sl_spec *s)
{
	uint64_t c = s->amount / CHUNK_PARTS;

	if (s->meter == SL_METER_BYTES)
		c = SL_MAX(c, sl_bytes_piece(s));
	return (uint32_t)SL_MAX(SL_MIN(c, (uint64_t)CHUNK_MAX), (uint64_t)1);
}

static void ask(struct sl_shm_header *h)
{
	atomic_store_explicit((_Atomic uint32_t *)&h->quota_want, 1, memory_order_relaxed);
}

int64_t sl_quota_release_at(struct sl_shm_header *h, const struct sl_spec *s, const struct sl_state *st,
                            int64_t now, uint64_t cost)
{
	if (!s->durable || s->mode != SL_MODE_ENFORCE || cost <= st->quota_left)
		return now;
	ask(h);
	return now + SL_QUOTA_RETRY_NS;
}

void sl_quota_released(struct sl_shm_header *h, const struct sl_spec *s, struct sl_state *st, uint64_t cost)
{
	if (!s->durable || s->mode != SL_MODE_ENFORCE)
		return;
	st->quota_left -= (uint32_t)SL_MIN(cost, (uint64_t)st->quota_left);
	if (st->quota_left <= sl_quota_chunk(s) / 2)
		ask(h);
}

/* --- the file --- */

static uint64_t checksum(const void *p, size_t len, uint64_t x)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < len; i++) { /* FNV-1a */
		x ^= c[i];
		x *= 0x100000001b3ull;
	}
	return x;
}

static void put(struct sl_quota_buf *b, const void *p, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n > b->cap) {
		size_t cap = SL_MAX(b->cap * 2, b->len + n + 4096);
		char *np = realloc(b->p, cap);

		if (!np) {
			b->failed = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void sl_quota_buf_begin(struct sl_quota_buf *b)
{
	struct sl_quota_head head = {0};

	memset(b, 0, sizeof(*b));
	put(b, &head, sizeof(head));
}

void sl_quota_buf_add(struct sl_quota_buf *b, const char *name, const struct sl_keyid *key,
                      const struct sl_spec *s, const struct sl_state *st, uint64_t ahead, int64_t blocked_until)
{
	struct sl_quota_rec r;

	memset(&r, 0, sizeof(r));
	snprintf(r.section, sizeof(r.section), "%s", name);
	if (key)
		r.key = *key;
	r.strategy = s->strategy;
	r.meter = s->meter;
	r.amount = s->amount;
	r.window_ns = s->window_ns;
	r.calendar = s->calendar;
	r.has_slide = s->strategy == SL_STRAT_SLIDING_WINDOW;
	r.ahead = ahead;
	r.blocked_until = blocked_until;
	r.tat_ns = st->tat_ns;
	r.rel_tat_ns = st->rel_tat_ns;
	r.win = st->win;
	r.rel_win = st->rel_win;
	r.win_used = st->win_used;
	r.rel_win_used = st->rel_win_used;
	r.pause_until_ns = st->pause.until_ns;
	r.admitted = st->admitted;
	put(b, &r, sizeof(r));
	if (r.has_slide) {
		put(b, &sl_state_more(st)->slide, sizeof(struct sl_slide));
		put(b, &sl_state_more(st)->rel_slide, sizeof(struct sl_slide));
	}
	b->records++;
}

int sl_quota_buf_end(struct sl_quota_buf *b, int64_t wall_off, int64_t wall_now)
{
	struct sl_quota_head head = {0};

	if (b->failed || b->len < sizeof(head))
		return -ENOMEM;
	memcpy(head.magic, SL_QUOTA_MAGIC, sizeof(head.magic));
	head.version = SL_QUOTA_VERSION;
	head.records = b->records;
	head.body_len = b->len - sizeof(head);
	head.wall_off_ns = wall_off;
	head.saved_ns = wall_now;
	memcpy(b->p, &head, sizeof(head));
	head.checksum = checksum(b->p, b->len, 0xcbf29ce484222325ull);
	memcpy(b->p, &head, sizeof(head));
	return 0;
}

int sl_quota_check(const void *p, size_t len, struct sl_quota_head *head, char *why, size_t whysize)
{
	struct sl_quota_head h;
	uint64_t sum;
	size_t off = sizeof(h);
	struct sl_quota_rec r;
	struct sl_slide slides[2];
	uint32_t n = 0;

	if (len < sizeof(h)) {
		snprintf(why, whysize, "%zu bytes: shorter than its header", len);
		return -1;
	}
	memcpy(&h, p, sizeof(h));
	if (memcmp(h.magic, SL_QUOTA_MAGIC, sizeof(h.magic)) != 0) {
		snprintf(why, whysize, "not a sluice state file");
		return -1;
	}
	if (h.version != SL_QUOTA_VERSION) {
		snprintf(why, whysize, "version %u (this sluice reads %u)", h.version, SL_QUOTA_VERSION);
		return -1;
	}
	if (h.body_len != len - sizeof(h)) {
		snprintf(why, whysize, "%zu bytes where its header says %llu: truncated or grown",
		         len, (unsigned long long)(h.body_len + sizeof(h)));
		return -1;
	}
	sum = h.checksum;
	h.checksum = 0;
	{
		uint64_t x = checksum(&h, sizeof(h), 0xcbf29ce484222325ull);

		x = checksum((const char *)p + sizeof(h), len - sizeof(h), x);
		if (x != sum) {
			snprintf(why, whysize, "its checksum does not match: corrupt");
			return -1;
		}
	}
	while (sl_quota_next(p, len, &off, &r, slides))
		n++;
	if (off != len || n != h.records) {
		snprintf(why, whysize, "%u records where its header says %u", n, h.records);
		return -1;
	}
	h.checksum = sum;
	*head = h;
	return 0;
}

int sl_quota_next(const void *p, size_t len, size_t *off, struct sl_quota_rec *r, struct sl_slide slides[2])
{
	if (*off > len || len - *off < sizeof(*r))
		return 0;
	memcpy(r, (const char *)p + *off, sizeof(*r));
	r->section[sizeof(r->section) - 1] = '\0';
	if (r->has_slide) {
		if (len - *off - sizeof(*r) < 2 * sizeof(struct sl_slide))
			return 0;
		memcpy(slides, (const char *)p + *off + sizeof(*r), 2 * sizeof(struct sl_slide));
		*off += 2 * sizeof(struct sl_slide);
	}
	*off += sizeof(*r);
	return 1;
}

/* --- restoring --- */

/* A monotonic time of the saving boot in ours: later by shift (a time that was
 * "never", 0, stays in the past either way). */
static int64_t moved(int64_t t, int64_t shift)
{
	return sl_sane_ns(sl_sane_ns(t) + sl_sane_ns(shift));
}

static int64_t ceil_div(int64_t a, int64_t b)
{
	return a / b + (a % b > 0);
}

/* Ring `from` with every bucket number `by` later, into `to` (a ring is indexed by
 * bucket number modulo its size, so its counts move with their numbers). */
static void move_ring(struct sl_slide *to, const struct sl_slide *from, int64_t by)
{
	const int64_t n = SL_SLIDE_BUCKETS;
	int64_t newest = sl_sane_ns(from->newest);

	memset(to, 0, sizeof(*to));
	to->newest = sl_sane_ns(newest + by);
	for (int64_t b = newest - n + 1; b <= newest; b++)
		to->count[(uint64_t)sl_sane_ns(b + by) % (uint64_t)n] = from->count[(uint64_t)b % (uint64_t)n];
}

void sl_quota_reset_state(const struct sl_spec *s, struct sl_state *st)
{
	st->tat_ns = st->rel_tat_ns = 0;
	st->last_slot = 0;
	st->last_owner = 0;
	st->last_seq = st->seq;
	memset(&st->last_undo, 0, sizeof(st->last_undo));
	st->win = st->rel_win = 0;
	st->win_used = st->rel_win_used = 0;
	st->pause.until_ns = 0;
	if (s->strategy == SL_STRAT_SLIDING_WINDOW) {
		memset(&sl_state_more(st)->slide, 0, sizeof(struct sl_slide));
		memset(&sl_state_more(st)->rel_slide, 0, sizeof(struct sl_slide));
	}
}

void sl_quota_restore(const struct sl_spec *s, struct sl_state *st, const struct sl_quota_rec *r,
                      const struct sl_slide slides[2], int64_t shift_ns, int64_t now, int64_t wall_off)
{
	struct sl_spec was = *s;
	struct sl_undo ignored;

	/* The limit it was kept under (the strategy's functions read no more of a
	 * spec than these): the state is read as that one's and converted. */
	was.strategy = r->strategy <= SL_STRAT_SESSION_WINDOW ? r->strategy : SL_STRAT_FIXED_WINDOW;
	was.amount = r->amount;
	was.window_ns = r->window_ns > 0 ? r->window_ns : 1;
	was.calendar = r->calendar;
	was.meter = r->meter;
	if (was.strategy == SL_STRAT_TOKEN_BUCKET && s->strategy != SL_STRAT_TOKEN_BUCKET)
		was.burst = was.amount;
	sl_quota_reset_state(s, st);
	st->tat_ns = moved(r->tat_ns, shift_ns);
	st->rel_tat_ns = moved(r->rel_tat_ns, shift_ns);
	/* fixed windows are numbered on the wall clock already; a session's start
	 * is a time */
	if (was.strategy == SL_STRAT_SESSION_WINDOW) {
		st->win = moved(r->win, shift_ns);
		st->rel_win = moved(r->rel_win, shift_ns);
	} else {
		st->win = r->win;
		st->rel_win = r->rel_win;
	}
	st->win_used = r->win_used;
	st->rel_win_used = r->rel_win_used;
	st->pause.until_ns = moved(r->pause_until_ns, shift_ns);
	if (r->has_slide && s->strategy == SL_STRAT_SLIDING_WINDOW && was.strategy == SL_STRAT_SLIDING_WINDOW) {
		/* Buckets count CLOCK_MONOTONIC in widths of the saved window: moved by
		 * whole buckets, rounded later (a count kept longer, never shorter). */
		int64_t by = ceil_div(sl_sane_ns(shift_ns), sl_slide_width(&was));
		struct sl_state_more *m = sl_state_more(st);

		move_ring(&m->slide, &slides[0], by);
		move_ring(&m->rel_slide, &slides[1], by);
	}
	if (r->has_slide != (s->strategy == SL_STRAT_SLIDING_WINDOW) || was.strategy != s->strategy ||
	    was.amount != s->amount || was.window_ns != s->window_ns || was.calendar != s->calendar ||
	    was.meter != s->meter) {
		if (was.meter != s->meter)
			was.strategy = s->strategy == SL_STRAT_FIXED_WINDOW ? SL_STRAT_SESSION_WINDOW
			                                                     : SL_STRAT_FIXED_WINDOW;
		sl_strategy_convert(&was, s, st, now, wall_off);
	}
	if (r->ahead) {
		/* Granted before the save and perhaps spent after it: counted as gone now,
		 * the latest any of it can have gone (a grant is never above a chunk, so
		 * a larger figure is clamped: more than a window's worth counts the same). */
		uint64_t ahead = SL_MIN(r->ahead, SL_MAX(s->amount, (uint64_t)CHUNK_MAX));

		sl_strategy_charge(s, st, now, ahead, wall_off, &ignored);
		sl_strategy_released(s, st, now, ahead, wall_off);
	}
	memset(&st->last_undo, 0, sizeof(st->last_undo));
	st->last_owner = 0;
}
