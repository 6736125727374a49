/*
 * fleet_conf.c - where the fleet's Redis is and who this machine is to it, read
 * from [sluice] (fleet_conf.h), for the lease rounds (fleet.c) and the probe
 * (fleet_probe.c).
 */
#include "fleet_conf.h"
#include "sluice/common.h"
#include "sluice/log.h"
#include "sluice/units.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void sl_fleet_conf_periods(struct sl_fleet_conf *c, int64_t refresh_ns)
{
	c->refresh_ns = refresh_ns;
	/* A lease outlives three missed renewals; an answer later than two periods (a
	 * second at least) is given up on. */
	c->ttl_ms = (uint64_t)(3 * refresh_ns / SL_NS_PER_MS + 250);
	c->timeout_ns = SL_MAX(2 * refresh_ns, SL_NS_PER_S);
}

static int read_auth(const char *path, char *user, size_t ulen, char *pass, size_t plen)
{
	char buf[512], *sp, *end;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	user[0] = pass[0] = '\0';
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	end = buf + strlen(buf);
	while (end > buf && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	if (!buf[0])
		return -EINVAL;
	if ((sp = strchr(buf, ' '))) {
		*sp = '\0';
		snprintf(user, ulen, "%s", buf);
		snprintf(pass, plen, "%s", sp + 1);
	} else {
		snprintf(pass, plen, "%s", buf);
	}
	return 0;
}

int sl_fleet_conf_read(struct sl_fleet_conf *c, const struct sl_config *cfg, const char *shm_name)
{
	const struct sl_global *g = &cfg->global;
	char hostname[128] = "";
	int rc;

	const char *list = g->redis_sentinels[0] ? g->redis_sentinels : g->redis_cluster;

	memset(c, 0, sizeof(*c));
	c->way = g->redis_sentinels[0] ? SL_FLEET_SENTINEL : g->redis_cluster[0] ? SL_FLEET_CLUSTER : SL_FLEET_DIRECT;
	c->nseeds = 0;
	if (c->way == SL_FLEET_DIRECT) {
		if (sl_endpoint_parse(g->redis, c->host, sizeof(c->host), &c->port) < 0)
			return -EINVAL;
	} else {
		/* The list was checked when the config was read: HOST:PORT, spaces between. */
		for (const char *p = list; *p && c->nseeds < SL_ENDPOINTS_MAX;) {
			size_t n = strcspn(p, " ");

			if (sl_redis_addr_parse(p, n, &c->seeds[c->nseeds]) == 0)
				c->nseeds++;
			p += n;
			p += strspn(p, " ");
		}
		if (!c->nseeds)
			return -EINVAL;
		c->host[0] = '\0'; /* found later: fleet_find.c */
		c->port = 0;
		snprintf(c->master_name, sizeof(c->master_name), "%s", g->redis_master);
	}
	if (g->redis_sentinel_auth[0] &&
	    (rc = read_auth(g->redis_sentinel_auth, c->suser, sizeof(c->suser), c->spass, sizeof(c->spass))) < 0) {
		sl_log_warnx("redis_sentinel_auth %s: %s", g->redis_sentinel_auth, strerror(-rc));
		return rc;
	}
	if (g->redis_auth[0] &&
	    (rc = read_auth(g->redis_auth, c->user, sizeof(c->user), c->pass, sizeof(c->pass))) < 0) {
		sl_log_warnx("redis_auth %s: %s", g->redis_auth, strerror(-rc));
		return rc;
	}
	/* A hash tag: every key of the fleet falls in one slot of a Redis Cluster. */
	snprintf(c->prefix, sizeof(c->prefix), "sluice:{%s}", g->fleet[0] ? g->fleet : "sluice");
	c->slot = sl_redis_slot(c->prefix, strlen(c->prefix));
	gethostname(hostname, sizeof(hostname) - 1);
	if (g->machine[0])
		snprintf(c->machine, sizeof(c->machine), "%s", g->machine);
	else
		snprintf(c->machine, sizeof(c->machine), "%s%s", hostname, shm_name);
	sl_fleet_conf_periods(c, g->refresh_ns);
	return 0;
}

const char *sl_fleet_way_name(int way)
{
	return way == SL_FLEET_SENTINEL ? "sentinels" : way == SL_FLEET_CLUSTER ? "cluster" : "redis";
}

int sl_fleet_needed(const struct sl_config *cfg)
{
	for (unsigned i = 0; i < cfg->nsections; i++)
		if (cfg->sections[i].spec.scope == SL_SCOPE_FLEET)
			return 1;
	return 0;
}
