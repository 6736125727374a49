/*
 * stats.h - per-section counters and their rendering for `sluice stat`.
 *
 * Waits go into a log-scale histogram (two buckets per power of two of
 * microseconds), so percentiles are read with at most ~41% relative error in the
 * bucket bound and the histogram is a fixed array of atomic counters in the segment.
 */
#ifndef SLUICE_STATS_H
#define SLUICE_STATS_H

#include "sluice/shm-t.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

unsigned sl_stats_bucket(int64_t wait_ns);
int64_t sl_stats_bucket_upper_ns(unsigned bucket);

/* Count one request of section sec released after waiting `wait_ns` in all; `held` when sluice made
 * it wait (rather than, say, the scheduler waking it late). */
void sl_stats_record_wait(struct sl_section *sec, int64_t wait_ns, int held, uint64_t units);

/* The q-quantile (0..1) of the waits recorded in sec, as a bucket's upper bound,
 * clamped to the maximum seen. */
int64_t sl_stats_wait_quantile(const struct sl_section *sec, double q);

/* How long from `now` until the slot a request asking now would get (0: it would
 * go at once), for stat and top; -1 where there is no one queue to ask (no rate,
 * a queue per key, observe only).  sec is a reader's copy: it may be changed. */
int64_t sl_stats_next_slot_ns(struct sl_section *sec, int64_t now, int64_t wall_off);

/* Print every section of the segment: a table, or JSON when `json` is set. */
void sl_stats_render(struct sl_shm_header *h, int json, int64_t now, FILE *out);
/* The same, listing the `top` busiest keys of each keyed section (by admissions;
 * at most SL_STATS_TOP_MAX). */
#define SL_STATS_TOP_DEFAULT 5
#define SL_STATS_TOP_MAX 100
void sl_stats_render_top(struct sl_shm_header *h, int json, unsigned top, int64_t now, FILE *out);

/* What only the daemon knows of its fleet's Redis, and the segment does not
 * carry: which master the leases come from, how it was found, since when. */
struct sl_redis_where {
	char master[264]; /* "HOST:PORT" or a socket's path; "" none yet */
	char how[16];     /* "redis", "sentinels" or "cluster"; "" no fleet */
	int64_t since_ms; /* CLOCK_REALTIME (ms) it became the one used; 0 none */
};

/* sl_stats_render_top with the daemon's word on its Redis (NULL: none). */
void sl_stats_render_where(struct sl_shm_header *h, int json, unsigned top, int64_t now,
                           const struct sl_redis_where *where, FILE *out);

/* One walk over the key table, read without the lock: per keyed section, its
 * `top` busiest keys by admissions (at most SL_STATS_TOP_MAX).  For `sluice top`,
 * which shows them as `sluice stat` does.  NULL when out of memory. */
struct sl_key_top {
	uint32_t slot; /* in the key table */
	uint64_t admitted;
};
struct sl_key_views;
struct sl_key_views *sl_stats_key_views(struct sl_shm_header *h, unsigned top, int64_t now);
/* Section `section`'s busiest keys, busiest first, in *top; how many. */
unsigned sl_stats_busiest_keys(const struct sl_key_views *kv, uint32_t section, const struct sl_key_top **top);
void sl_stats_key_views_free(struct sl_key_views *kv);

/* A fleet section's (or key's) lease as text: "share 24.80 of 100, 4 machines,
 * lease 120 ms old", or "no lease yet".  Always terminated, cut to size. */
void sl_stats_format_lease(const struct sl_spec *s, const struct sl_state *st, int64_t now, char *buf,
                           size_t size);

/* The same in Prometheus text exposition: counters and gauges per section, a
 * histogram of waits, and the `top` busiest keys of keyed sections only (so the
 * number of series stays bounded).  Reads the segment's counters, never its lock:
 * scraping never touches the admission path. */
void sl_stats_render_prometheus(struct sl_shm_header *h, unsigned top, int64_t now, FILE *out);

/* The running program's version, for sluice_build_info: set by the two mains (the
 * only files rebuilt when the version changes). */
extern const char *sl_stats_version;

/* A state's counters (counters.def), for every view that shows them: stat's text
 * and JSON, top, the metrics (src/progs/stats_print.c). */
enum {
#define SL_COUNTER(part, field, column, phrase, help) SL_COUNTER_##field,
#include "sluice/counters.def"
#undef SL_COUNTER
	SL_NCOUNTERS
};
struct sl_counter {
	const char *field;  /* its name in JSON, and in sluice_FIELD_total */
	const char *column; /* a table's heading; NULL: a note, "N phrase", when not 0 */
	const char *phrase;
	const char *help;   /* Prometheus HELP */
	size_t off;         /* its offset in struct sl_section */
};
extern const struct sl_counter sl_counters[SL_NCOUNTERS];

static inline uint64_t sl_counter_of(const struct sl_section *sec, unsigned c)
{
	return *(const uint64_t *)((const char *)sec + sl_counters[c].off);
}

#endif
