#include "sluice/limiter.h"

int64_t sl_gcra_increment(const struct sl_spec *s, uint64_t cost)
{
	unsigned __int128 num;
	uint64_t small;

	if (s->amount == 0 || s->window_ns <= 0)
		return 0;
	/* In 64 bits when the product and the rounding fit (every rate but bytes
	 * by the terabyte): a 128-bit division costs several times one of 64. */
	if (!__builtin_mul_overflow(cost, (uint64_t)s->window_ns, &small) &&
	    !__builtin_add_overflow(small, s->amount - 1, &small)) {
		small /= s->amount;
		return small > (uint64_t)INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)small;
	}
	num = (unsigned __int128)cost * (uint64_t)s->window_ns;
	num = (num + s->amount - 1) / s->amount;
	return num > (unsigned __int128)INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)num;
}

int64_t sl_gcra_tolerance(const struct sl_spec *s)
{
	uint64_t burst = s->burst ? s->burst : 1;
	unsigned __int128 t = (unsigned __int128)(burst - 1) * (uint64_t)sl_gcra_increment(s, 1);

	return t > (unsigned __int128)INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)t;
}

int64_t sl_gcra_late(const struct sl_spec *s)
{
	uint32_t us = s->tolerance_us; /* a segment's word: clamped, whatever it holds */

	if (s->scope == SL_SCOPE_FLEET)
		return 0;
	return (int64_t)(us > SL_TOLERANCE_MAX_US ? SL_TOLERANCE_MAX_US : us) * 1000;
}

uint64_t sl_bytes_piece(const struct sl_spec *s)
{
	unsigned __int128 p;

	if (!s->amount || s->window_ns <= 0)
		return SL_BYTES_PIECE_MAX;
	p = (unsigned __int128)s->amount * (20 * 1000 * 1000) / (uint64_t)s->window_ns;
	return p > SL_BYTES_PIECE_MAX ? SL_BYTES_PIECE_MAX : p < SL_BYTES_PIECE_MIN ? SL_BYTES_PIECE_MIN : (uint64_t)p;
}

int64_t sl_bytes_slack(const struct sl_spec *s, uint64_t cost)
{
	uint64_t piece;
	unsigned __int128 t;

	if (s->meter != SL_METER_BYTES || !s->amount || s->window_ns <= 0)
		return 0;
	piece = sl_bytes_piece(s);
	if (cost >= piece)
		return 0;
	t = (unsigned __int128)(piece - cost) * (uint64_t)s->window_ns / s->amount;
	return t > (unsigned __int128)INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)t;
}

uint64_t sl_gcra_queued(int64_t tat, int64_t tol, int64_t inc, int64_t now)
{
	/* The last slot handed out is tat - inc - tol; count those still ahead of now. */
	int64_t ahead = sl_sane_ns(tat) - sl_sane_ns(inc) - sl_sane_ns(tol) - sl_sane_ns(now);

	inc = sl_sane_ns(inc);
	if (inc <= 0 || ahead <= 0)
		return 0;
	return (uint64_t)((ahead + inc - 1) / inc);
}

int64_t sl_gcra_rescale(int64_t t, int64_t now, int64_t from, int64_t to)
{
	__int128 ahead;

	t = sl_sane_ns(t);
	if (t <= now || from <= 0)
		return t;
	ahead = (__int128)(t - now) * to / from;
	return now + (int64_t)(ahead > SL_SANE_NS ? SL_SANE_NS : ahead);
}
