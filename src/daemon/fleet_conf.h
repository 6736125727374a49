/*
 * fleet_conf.h - the fleet's connection settings (docs/config.md, [sluice] redis,
 * redis_auth, fleet, machine, refresh), shared by the lease rounds and the probe.
 */
#ifndef SLUICE_DAEMON_FLEET_CONF_H
#define SLUICE_DAEMON_FLEET_CONF_H

#include "sluice/config.h"

#include <stdint.h>

struct sl_fleet_conf {
	char host[SL_PATH_MAX];
	int port;              /* 0: host is a unix socket path */
	char user[128], pass[256];
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

/* Whether some section of cfg is the fleet's (scope = fleet). */
int sl_fleet_needed(const struct sl_config *cfg);

#endif
