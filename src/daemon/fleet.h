/*
 * The fleet (scope = fleet): the daemon's leases on limits shared with other
 * machines through Redis (docs/design.md, "Across machines").  Only the daemon
 * talks to Redis - through hiredis on its own libev loop, asynchronously, so a slow
 * or dead Redis never holds up the loop, the control socket or the heartbeat.
 * Every `refresh` (with jitter) it renews the leases of all its fleet sections and
 * their active keys in one call of one script (fleet.lua), reporting each one's
 * demand and what it holds, and writes what Redis grants into the segment, where
 * the shims admit against it (lease.h).  Called by daemon.c only.
 */
#ifndef SLUICE_DAEMON_FLEET_H
#define SLUICE_DAEMON_FLEET_H

#include "sluice/daemon.h"

#include <stdio.h>

/* Start talking to the config's redis, if a section needs it.  0, or -errno for a
 * config that cannot be used (an unreadable redis_auth file). */
int sl_fleet_start(struct sl_daemon *d);

/* The config was reloaded: reconnect when the redis settings changed.  0 or -errno. */
int sl_fleet_reload(struct sl_daemon *d, const struct sl_config *old);

void sl_fleet_stop(struct sl_daemon *d);

/* For `sluice stat`: the Redis the leases come from and how it was found. */
struct sl_redis_where;
void sl_fleet_where(const struct sl_daemon *d, struct sl_redis_where *w);

/* `sluice check --redis`: connect to cfg's redis, authenticate, load the script,
 * call it once with nothing to lease, and say on `out` what was found.  Blocking,
 * bounded by timeout_ms.  0 when Redis answered as it should. */
int sl_fleet_probe(const struct sl_config *cfg, int timeout_ms, FILE *out);

#endif
