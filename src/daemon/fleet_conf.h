/*
 * fleet_conf.h - the fleet's connection settings (docs/config.md, [sluice] redis,
 * redis_auth, fleet, machine, refresh), shared by the lease rounds and the probe.
 */
#ifndef SLUICE_DAEMON_FLEET_CONF_H
#define SLUICE_DAEMON_FLEET_CONF_H

#include "sluice/config.h"
#include "sluice/redisnode.h"

#include <stdint.h>

/* How the daemon finds the Redis that holds the fleet's keys. */
enum sl_fleet_way {
	SL_FLEET_DIRECT = 0,   /* redis = HOST:PORT or a socket: that one */
	SL_FLEET_SENTINEL = 1, /* redis_sentinels: the master they name */
	SL_FLEET_CLUSTER = 2,  /* redis_cluster: the master of the fleet's slot */
};

struct sl_fleet_conf {
	char host[SL_PATH_MAX]; /* the Redis in use: redis's, or the master found */
	int port;              /* 0: host is a unix socket path */
	char user[128], pass[256];
	int way;               /* enum sl_fleet_way */
	struct sl_redis_addr seeds[SL_ENDPOINTS_MAX]; /* Sentinels, or Cluster nodes */
	unsigned nseeds;
	char master_name[SL_SECTION_NAME_MAX];       /* redis_master */
	char suser[128], spass[256];                 /* redis_sentinel_auth */
	unsigned slot;         /* the fleet's hash slot (every key has its tag) */
	char prefix[160];      /* "sluice:{FLEET}": one hash slot for every key */
	char machine[160];
	int64_t refresh_ns;    /* the lease period */
	int64_t timeout_ns;    /* an answer later than this is given up on */
	uint64_t ttl_ms;       /* a lease's life in Redis */
};

/* Fill c from cfg (shm_name names this machine's daemon when `machine` is unset).
 * 0, or -errno: a bad address, an unreadable redis_auth (logged). */
int sl_fleet_conf_read(struct sl_fleet_conf *c, const struct sl_config *cfg, const char *shm_name);

/* Set the periods that follow from `refresh`. */
void sl_fleet_conf_periods(struct sl_fleet_conf *c, int64_t refresh_ns);

/* "redis", "sentinels" or "cluster": how the Redis in use was found. */
const char *sl_fleet_way_name(int way);

/* Whether some section of cfg is the fleet's (scope = fleet). */
int sl_fleet_needed(const struct sl_config *cfg);

#endif
