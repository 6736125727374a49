#include "sluice/stats.h"
#include "sluice/strategy.h"
#include "sluice/common.h"
#include "sluice/config.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/match.h"
#include "sluice/shm.h"
#include "sluice/units.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <errno.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

unsigned sl_stats_bucket(int64_t wait_ns)
{
	uint64_t us = wait_ns > 0 ? (uint64_t)wait_ns / 1000 : 0;
	unsigned log2, half;

	if (us == 0)
		return 0;
	log2 = 63u - (unsigned)__builtin_clzll(us);
	half = log2 > 0 ? (unsigned)((us >> (log2 - 1)) & 1) : 0;
	return SL_MIN(1 + 2 * log2 + half, SL_WAIT_BUCKETS - 1);
}

int64_t sl_stats_bucket_upper_ns(unsigned b)
{
	unsigned log2;

	if (b == 0)
		return 1000;
	log2 = (b - 1) / 2;
	if (log2 > 40)
		return INT64_MAX;
	/* bucket 1+2k holds [2^k, 1.5*2^k) us, bucket 2+2k holds [1.5*2^k, 2^(k+1)) us */
	return (int64_t)(((b - 1) % 2 ? 2ULL << log2 : (3ULL << log2) / 2)) * 1000;
}

void sl_stats_record_wait(struct sl_section *sec, int64_t wait_ns, int held, uint64_t units)
{
	struct sl_state *st = &sec->state;
	struct sl_state_more *m = &sec->more;
	uint64_t w = wait_ns > 0 ? (uint64_t)wait_ns : 0;
	uint64_t max = atomic_load_explicit(A(&m->wait_max_ns), memory_order_relaxed);

	atomic_fetch_add_explicit(A(&st->admitted), units, memory_order_relaxed);
	if (held)
		atomic_fetch_add_explicit(A(&m->held), 1, memory_order_relaxed);
	atomic_fetch_add_explicit(A(&m->wait_sum_ns), w, memory_order_relaxed);
	atomic_fetch_add_explicit(A(&m->wait_hist[sl_stats_bucket((int64_t)w)]), 1,
	                          memory_order_relaxed);
	while (w > max && !atomic_compare_exchange_weak_explicit(A(&m->wait_max_ns), &max, w,
	                                                         memory_order_relaxed,
	                                                         memory_order_relaxed))
		;
}

int64_t sl_stats_wait_quantile(const struct sl_section *sec, double q)
{
	const struct sl_state_more *st = &sec->more;
	uint64_t total = 0, seen = 0, want;

	for (unsigned b = 0; b < SL_WAIT_BUCKETS; b++)
		total += st->wait_hist[b];
	if (total == 0)
		return 0;
	want = (uint64_t)(q * (double)total + 0.999999);
	if (want == 0)
		want = 1;
	for (unsigned b = 0; b < SL_WAIT_BUCKETS; b++) {
		seen += st->wait_hist[b];
		if (seen >= want)
			return SL_MIN(sl_stats_bucket_upper_ns(b), (int64_t)st->wait_max_ns);
	}
	return (int64_t)st->wait_max_ns;
}

int64_t sl_stats_next_slot_ns(struct sl_section *sec, int64_t now, int64_t wall_off)
{
	int64_t slot;

	if (!sec->spec.amount || sec->spec.per != SL_PER_NONE || sec->spec.mode == SL_MODE_OBSERVE)
		return -1;
	slot = sl_limit_slot(&sec->spec, &sec->state, now, 1, wall_off);
	return slot > now ? slot - now : 0;
}
