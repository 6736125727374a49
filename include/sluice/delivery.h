/*
 * delivery.h - whether a section gives what was configured (docs/design.md,
 * "Showing the shortfall").
 *
 * Every release counts how late it went after its slot in the section's lateness
 * histogram (struct sl_delivery in the segment, atomic counters).  At each
 * heartbeat the daemon turns the counters into figures over the last half of
 * SL_DELIVERY_WINDOW_NS to all of it (snapshots half a window apart): the rate delivered (the section's own
 * `admitted`, per second) and the lateness's median and 99th percentile.  stat,
 * top and the metrics read those figures; nothing here is on the unmatched path.
 */
#ifndef SLUICE_DELIVERY_H
#define SLUICE_DELIVERY_H

#include "sluice/shm-t.h"

#include <stdint.h>

#define SL_DELIVERY_WINDOW_NS (10 * 1000000000LL)

/* Bucket of a lateness: 0 below 1 us, then b for [2^(b-1), 2^b) us. */
unsigned sl_delivery_bucket(int64_t late_ns);
/* The upper bound of bucket b (ns). */
int64_t sl_delivery_bucket_upper_ns(unsigned b);

/* A release of sec went `late_ns` after its slot. */
void sl_delivery_count(struct sl_section *sec, int64_t late_ns);

/* The daemon, at a heartbeat at `now`: refresh sec's figures.  `queued`: its
 * callers waiting for their slot now. */
void sl_delivery_measure(struct sl_section *sec, int64_t now, uint64_t queued);

/* The figures, as the daemon last measured them: 0 when none yet (a window not yet
 * measured, or nothing released in it). */
struct sl_delivery_view {
	double per_s;        /* units delivered per second */
	double configured;   /* the configured rate, per second (0: no rate) */
	double window_s;     /* over how long */
	int64_t late_p50_ns, late_p99_ns;
	uint64_t releases;   /* releases in the window */
	int backlog;         /* callers waited at both its ends: per_s is what the
	                      * section gives under a standing queue */
};
int sl_delivery_view(const struct sl_section *sec, struct sl_delivery_view *v);

#endif
