/* Whether a section gives what was configured (delivery.h). */
#include "sluice/delivery.h"
#include "sluice/common.h"
#include "sluice/limiter.h"

#include <stdatomic.h>
#include <string.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

unsigned sl_delivery_bucket(int64_t late_ns)
{
	uint64_t us = late_ns > 0 ? (uint64_t)late_ns / 1000 : 0;

	if (us == 0)
		return 0;
	return SL_MIN(64u - (unsigned)__builtin_clzll(us), SL_LATE_BUCKETS - 1u);
}

int64_t sl_delivery_bucket_upper_ns(unsigned b)
{
	return b == 0 ? 1000 : b >= SL_LATE_BUCKETS - 1 ? INT64_MAX : ((int64_t)1 << b) * 1000;
}

void sl_delivery_count(struct sl_section *sec, int64_t late_ns)
{
	atomic_fetch_add_explicit(A(&sec->delivery.late[sl_delivery_bucket(late_ns)]), 1, memory_order_relaxed);
}

/* The q-quantile's bucket bound of the counts in `d` (n of them). */
static int64_t quantile(const uint32_t *d, uint64_t n, double q)
{
	uint64_t want = (uint64_t)(q * (double)n + 0.999999), seen = 0;

	for (unsigned b = 0; b < SL_LATE_BUCKETS; b++) {
		seen += d[b];
		if (seen >= (want ? want : 1))
			return sl_delivery_bucket_upper_ns(b);
	}
	return sl_delivery_bucket_upper_ns(SL_LATE_BUCKETS - 1);
}

static void take(struct sl_delivery_snap *s, const struct sl_section *sec, int64_t now, uint64_t queued)
{
	s->at_ns = now;
	s->queued = queued;
	s->admitted = atomic_load_explicit(A(&sec->state.admitted), memory_order_relaxed);
	for (unsigned b = 0; b < SL_LATE_BUCKETS; b++)
		s->late[b] = atomic_load_explicit(A(&sec->delivery.late[b]), memory_order_relaxed);
}

void sl_delivery_measure(struct sl_section *sec, int64_t now, uint64_t queued)
{
	struct sl_delivery *d = &sec->delivery;
	const struct sl_delivery_snap *from;
	uint32_t diff[SL_LATE_BUCKETS];
	uint64_t admitted, n = 0;

	/* The segment may hold anything: a snapshot from the future, or none, starts
	 * the measuring afresh. */
	if (d->snap[1].at_ns <= 0 || d->snap[1].at_ns > now || d->snap[0].at_ns > d->snap[1].at_ns) {
		memset(d->snap, 0, sizeof(d->snap));
		take(&d->snap[1], sec, now, queued);
		d->window_ns = 0;
		return;
	}
	if (now - d->snap[1].at_ns >= SL_DELIVERY_WINDOW_NS / 2) {
		d->snap[0] = d->snap[1];
		take(&d->snap[1], sec, now, queued);
	}
	from = d->snap[0].at_ns > 0 ? &d->snap[0] : &d->snap[1];
	if (now - from->at_ns < SL_DELIVERY_WINDOW_NS / 10)
		return; /* too short a window to say anything yet */
	admitted = atomic_load_explicit(A(&sec->state.admitted), memory_order_relaxed);
	for (unsigned b = 0; b < SL_LATE_BUCKETS; b++) {
		diff[b] = atomic_load_explicit(A(&d->late[b]), memory_order_relaxed) - from->late[b];
		n += diff[b];
	}
	d->window_ns = now - from->at_ns;
	d->per_s_milli = admitted >= from->admitted
	                 ? (uint64_t)((double)(admitted - from->admitted) * 1e12 / (double)d->window_ns)
	                 : 0;
	d->releases = n;
	d->backlog = from->queued > 0 && queued > 0;
	d->late_p50_ns = n ? quantile(diff, n, 0.5) : 0;
	d->late_p99_ns = n ? quantile(diff, n, 0.99) : 0;
}

int sl_delivery_view(const struct sl_section *sec, struct sl_delivery_view *v)
{
	const struct sl_delivery *d = &sec->delivery;

	memset(v, 0, sizeof(*v));
	if (sec->spec.amount && sec->spec.window_ns > 0)
		v->configured = (double)sec->spec.amount * 1e9 / (double)sec->spec.window_ns;
	if (d->window_ns <= 0 || d->window_ns > 100 * SL_DELIVERY_WINDOW_NS)
		return 0;
	v->per_s = (double)d->per_s_milli / 1000.0;
	v->window_s = (double)d->window_ns / 1e9;
	v->late_p50_ns = sl_sane_ns(d->late_p50_ns);
	v->late_p99_ns = sl_sane_ns(d->late_p99_ns);
	v->releases = d->releases;
	v->backlog = d->backlog != 0;
	return 1;
}
