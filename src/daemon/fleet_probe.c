/*
 * fleet_probe.c - `sluice check --redis` (fleet.h): one blocking visit to the
 * fleet's Redis, as the daemon would make it, said in words.
 */
#include "fleet.h"
#include "fleet_conf.h"
#include "fleet_lua.h"
#include "sluice/fleetpolicy.h"
#include "sluice/redisnode.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static int64_t realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The script's answer to the probe's call: Redis's clock, settling, Redis's clock
 * again, and the one item's values, all integers. */
static int probe_answer(const redisReply *r)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != SL_FLEET_HEAD_OUT + SL_FLEET_FIELDS_OUT)
		return 0;
	for (size_t i = 0; i < r->elements; i++)
		if (r->element[i]->type != REDIS_REPLY_INTEGER)
			return 0;
	return r->element[0]->integer >= 0;
}

/* One lease call for the probe's item, its entry living ttl_ms. */
static redisReply *probe_call(redisContext *c, const char *sha, const struct sl_fleet_conf *conf, int ttl_ms)
{
	/* A rate on the grid: the commands it needs are the most the script uses. */
	return redisCommand(c, "EVALSHA %s 6 %s:epoch %s:probe %s:probe:pause %s:probe:exp %s:probe:totals "
	                    "%s:probe:grid %s %d 0 %d 1 g 1000 1000 2000 0 0 -", sha, conf->prefix, conf->prefix,
	                    conf->prefix, conf->prefix, conf->prefix, conf->prefix, conf->machine, ttl_ms,
	                    SL_FLEET_HEADROOM_PPM);
}

/* Ask each seed where the master is, and say what each answered: the first
 * answer is the master to try.  0, or -1 when no seed named one. */
static int find_master(struct sl_fleet_conf *conf, struct timeval tv, FILE *out)
{
	int sentinel = conf->way == SL_FLEET_SENTINEL, found = 0, agree = 1;
	struct sl_redis_addr first = {.port = 0};

	for (unsigned i = 0; i < conf->nseeds; i++) {
		const struct sl_redis_addr *s = &conf->seeds[i];
		const char *user = sentinel ? conf->suser : conf->user, *pass = sentinel ? conf->spass : conf->pass;
		redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
		redisReply *r = NULL;
		struct sl_redis_addr a;
		char where[SL_REDIS_HOST_MAX + 8], seed[SL_REDIS_HOST_MAX + 8];

		sl_redis_addr_format(s, seed, sizeof(seed));
		if (!c || c->err) {
			fprintf(out, "%s %s: cannot connect: %s\n", sentinel ? "sentinel" : "node", seed,
			        c ? c->errstr : "out of memory");
			if (c)
				redisFree(c);
			continue;
		}
		redisSetTimeout(c, tv);
		if (pass[0]) {
			r = user[0] ? redisCommand(c, "AUTH %s %s", user, pass) : redisCommand(c, "AUTH %s", pass);
			if (!r || r->type == REDIS_REPLY_ERROR) {
				fprintf(out, "%s %s: authentication refused: %s\n", sentinel ? "sentinel" : "node", seed,
				        r && r->str ? r->str : c->errstr);
				if (r)
					freeReplyObject(r);
				redisFree(c);
				continue;
			}
			freeReplyObject(r);
		}
		r = sentinel ? redisCommand(c, "SENTINEL get-master-addr-by-name %s", conf->master_name)
		             : redisCommand(c, "CLUSTER SLOTS");
		if (sentinel ? sl_redis_sentinel_master(r, &a) == 0 : sl_redis_cluster_master(r, conf->slot, s, &a) == 0) {
			sl_redis_addr_format(&a, where, sizeof(where));
			if (sentinel)
				fprintf(out, "sentinel %s: master %s is %s\n", seed, conf->master_name, where);
			else
				fprintf(out, "node %s: the fleet's slot %u is served by %s\n", seed, conf->slot, where);
			if (!found++)
				first = a;
			else if (first.port != a.port || strcmp(first.host, a.host) != 0)
				agree = 0;
		} else {
			fprintf(out, "%s %s: %s\n", sentinel ? "sentinel" : "node", seed,
			        r && r->type == REDIS_REPLY_ERROR && r->str ? r->str
			        : sentinel ? "does not know the master by that name" : "no master serves the fleet's slot");
		}
		if (r)
			freeReplyObject(r);
		redisFree(c);
	}
	if (!found) {
		fprintf(out, "no %s named the master: the fleet would shape on its outage shares\n",
		        sentinel ? "sentinel" : "cluster node");
		return -1;
	}
	if (!agree)
		fprintf(out, "the %s do not agree (a failover under way?): trying the first answer\n",
		        sentinel ? "sentinels" : "nodes");
	snprintf(conf->host, sizeof(conf->host), "%s", first.host);
	conf->port = first.port;
	return 0;
}

int sl_fleet_probe(const struct sl_config *cfg, int timeout_ms, FILE *out)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	struct sl_fleet_conf conf;
	redisContext *c;
	redisReply *r;
	char version[64] = "?", sha[64], label[SL_PATH_MAX + 8];
	int rc = -1;

	if (!sl_config_has_redis(cfg)) {
		fprintf(out, "no redis in [sluice]: every section is this machine's alone\n");
		return sl_fleet_needed(cfg) ? -1 : 0;
	}
	if (sl_fleet_conf_read(&conf, cfg, cfg->global.shm_name) < 0) {
		fprintf(out, "redis: bad settings (redis_auth %s or redis_sentinel_auth %s unreadable?)\n",
		        cfg->global.redis_auth[0] ? cfg->global.redis_auth : "none",
		        cfg->global.redis_sentinel_auth[0] ? cfg->global.redis_sentinel_auth : "none");
		return -1;
	}
	if (conf.way != SL_FLEET_DIRECT && find_master(&conf, tv, out) < 0)
		return -1;
	if (conf.port)
		snprintf(label, sizeof(label), strchr(conf.host, ':') ? "[%s]:%d" : "%s:%d", conf.host, conf.port);
	else
		snprintf(label, sizeof(label), "%s", conf.host);
	c = conf.port ? redisConnectWithTimeout(conf.host, conf.port, tv)
	              : redisConnectUnixWithTimeout(conf.host, tv);
	if (!c || c->err) {
		fprintf(out, "redis %s: cannot connect: %s\n", label, c ? c->errstr : "out of memory");
		goto out;
	}
	redisSetTimeout(c, tv);
	if (conf.pass[0]) {
		r = conf.user[0] ? redisCommand(c, "AUTH %s %s", conf.user, conf.pass)
		                 : redisCommand(c, "AUTH %s", conf.pass);
		if (!r || r->type == REDIS_REPLY_ERROR) {
			fprintf(out, "redis %s: authentication refused: %s\n", label, r && r->str ? r->str : c->errstr);
			if (r)
				freeReplyObject(r);
			goto out;
		}
		freeReplyObject(r);
	}
	r = redisCommand(c, "ROLE");
	if (r && r->type != REDIS_REPLY_ERROR && !sl_redis_role_master(r)) {
		fprintf(out, "redis %s: not a master (ROLE says %s): leases cannot be written there\n", label,
		        r->type == REDIS_REPLY_ARRAY && r->elements && r->element[0]->str ? r->element[0]->str : "?");
		freeReplyObject(r);
		goto out;
	}
	if (r)
		freeReplyObject(r);
	if ((r = redisCommand(c, "INFO server")) && r->type == REDIS_REPLY_STRING && r->str) {
		const char *v = strstr(r->str, "redis_version:");

		if (v)
			sscanf(v + 14, "%63[^\r\n]", version);
	}
	if (r)
		freeReplyObject(r);
	r = redisCommand(c, "SCRIPT LOAD %s", sl_fleet_lua);
	if (!r || r->type != REDIS_REPLY_STRING) {
		fprintf(out, "redis %s (version %s): cannot load the lease script: %s\n", label, version,
		        r && r->str ? r->str : c->errstr);
		if (r)
			freeReplyObject(r);
		goto out;
	}
	snprintf(sha, sizeof(sha), "%s", r->str);
	freeReplyObject(r);
	/* Two calls on an item of the probe's own (a key no section has, gone in
	 * seconds), so that every command the script runs is tried and an ACL
	 * missing one fails here, not in the daemon's first round: the first builds
	 * the item, its entry living 50 ms; the second, after that, sweeps the
	 * expired entry; both ask more than the item's rate (the water level). */
	r = probe_call(c, sha, &conf, 50);
	if (probe_answer(r)) {
		struct timespec ts = {0, 80 * 1000 * 1000};

		freeReplyObject(r);
		nanosleep(&ts, NULL);
		r = probe_call(c, sha, &conf, 1000);
	}
	if (!probe_answer(r)) {
		int error = r && r->type == REDIS_REPLY_ERROR && r->str;

		fprintf(out, "redis %s (version %s): the lease script did not answer as it should%s%s%s\n", label,
		        version, error ? ": " : "", error ? r->str : "",
		        error && strstr(r->str, "can't run this command")
		                ? " (the ACL user lacks a command the lease script runs: docs/config.md lists them)"
		                : "");
		if (r)
			freeReplyObject(r);
		goto out;
	}
	fprintf(out, "redis %s: version %s, lease script loaded, its clock %" PRId64 " ms ahead of this "
	        "machine's; fleet %s (slot %u), this machine %s%s%s\n", label, version,
	        (int64_t)r->element[0]->integer - realtime_ms(), conf.prefix, conf.slot, conf.machine,
	        conf.way != SL_FLEET_DIRECT ? "; found by " : "",
	        conf.way != SL_FLEET_DIRECT ? sl_fleet_way_name(conf.way) : "");
	freeReplyObject(r);
	rc = 0;
out:
	if (c)
		redisFree(c);
	return rc;
}
