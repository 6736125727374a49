/*
 * metrics.h - sluiced's Prometheus endpoint (metrics.c): `metrics = HOST:PORT` in
 * [sluice], off by default.
 */
#ifndef SLUICE_DAEMON_METRICS_H
#define SLUICE_DAEMON_METRICS_H

#include "sluice/daemon.h"

/* Listen on the config's `metrics` address, on the daemon's loop (nothing when it
 * is unset, or for `sluice run`'s own daemon).  0, -EINVAL for an address it
 * cannot use, or -errno. */
int sl_metrics_start(struct sl_daemon *d);
void sl_metrics_stop(struct sl_daemon *d);
/* After a reload: serve metrics where d->cfg says now, `was` the address before
 * (none: ""), the old listener kept when the new cannot be had (-errno). */
int sl_metrics_reload(struct sl_daemon *d, const char *was);

#endif
