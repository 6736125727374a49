/*
 * fleet_find.h - finding the Redis that holds the fleet's keys when Redis is
 * made highly available (docs/design.md, "Sentinel and Cluster"): the Sentinels
 * are asked for their master's address, or a Cluster's nodes for the master of
 * the fleet's hash slot, one after another, asynchronously on the daemon's loop.
 * With Sentinels, a subscription to +switch-master says at once when they move
 * the master.  Called by fleet.c only.
 */
#ifndef SLUICE_DAEMON_FLEET_FIND_H
#define SLUICE_DAEMON_FLEET_FIND_H

#include "fleet_conf.h"
#include "resolver.h"

#include <ev.h>

struct sl_fleet_find;

/* The answer of one search: the master, or NULL and why none was found. */
typedef void sl_fleet_found_fn(void *arg, const struct sl_redis_addr *master, const char *why);

/* The Sentinels announced a new master. */
typedef void sl_fleet_switched_fn(void *arg, const struct sl_redis_addr *master);

/* Seeds named by host name are connected to at the address `names` knows
 * (resolver.h; NULL: resolved in the loop). */
struct sl_fleet_find *sl_fleet_find_new(struct ev_loop *loop, const struct sl_fleet_conf *conf,
                                        struct sl_resolver *names, sl_fleet_found_fn *found,
                                        sl_fleet_switched_fn *switched, void *arg);

/* Ask the seeds in turn, each for at most `each_ns`; `found` is called once,
 * later (never from within this call).  A search already under way goes on. */
void sl_fleet_find_start(struct sl_fleet_find *ff, int64_t each_ns);

/* With Sentinels: keep one subscribed to +switch-master (again, if it went). */
void sl_fleet_find_watch(struct sl_fleet_find *ff);

void sl_fleet_find_free(struct sl_fleet_find *ff);

#endif
