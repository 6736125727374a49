/*
 * fleet_probe.c - `sluice check --redis` (fleet.h): one blocking visit to the
 * fleet's Redis, as the daemon would make it, said in words.
 */
#include "fleet.h"
#include "fleet_conf.h"
#include "fleet_lua.h"
#include "sluice/fleetpolicy.h"

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

/* Whether r is what the lease script answers for no items: two integers. */
static int two_ints(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
	       r->element[1]->type == REDIS_REPLY_INTEGER && r->element[0]->integer >= 0;
}

int sl_fleet_probe(const struct sl_config *cfg, int timeout_ms, FILE *out)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	struct sl_fleet_conf conf;
	redisContext *c;
	redisReply *r;
	char version[64] = "?", sha[64];
	int rc = -1;

	if (!cfg->global.redis[0]) {
		fprintf(out, "no redis in [sluice]: every section is this machine's alone\n");
		return sl_fleet_needed(cfg) ? -1 : 0;
	}
	if (sl_fleet_conf_read(&conf, cfg, cfg->global.shm_name) < 0) {
		fprintf(out, "redis %s: bad settings (redis_auth %s unreadable?)\n", cfg->global.redis,
		        cfg->global.redis_auth);
		return -1;
	}
	c = conf.port ? redisConnectWithTimeout(conf.host, conf.port, tv)
	              : redisConnectUnixWithTimeout(conf.host, tv);
	if (!c || c->err) {
		fprintf(out, "redis %s: cannot connect: %s\n", cfg->global.redis, c ? c->errstr : "out of memory");
		goto out;
	}
	redisSetTimeout(c, tv);
	if (conf.pass[0]) {
		r = conf.user[0] ? redisCommand(c, "AUTH %s %s", conf.user, conf.pass)
		                 : redisCommand(c, "AUTH %s", conf.pass);
		if (!r || r->type == REDIS_REPLY_ERROR) {
			fprintf(out, "redis %s: authentication refused: %s\n", cfg->global.redis,
			        r && r->str ? r->str : c->errstr);
			if (r)
				freeReplyObject(r);
			goto out;
		}
		freeReplyObject(r);
	}
	if ((r = redisCommand(c, "INFO server")) && r->type == REDIS_REPLY_STRING && r->str) {
		const char *v = strstr(r->str, "redis_version:");

		if (v)
			sscanf(v + 14, "%63[^\r\n]", version);
	}
	if (r)
		freeReplyObject(r);
	r = redisCommand(c, "SCRIPT LOAD %s", sl_fleet_lua);
	if (!r || r->type != REDIS_REPLY_STRING) {
		fprintf(out, "redis %s (version %s): cannot load the lease script: %s\n", cfg->global.redis, version,
		        r && r->str ? r->str : c->errstr);
		if (r)
			freeReplyObject(r);
		goto out;
	}
	snprintf(sha, sizeof(sha), "%s", r->str);
	freeReplyObject(r);
	r = redisCommand(c, "EVALSHA %s 1 %s:epoch %s %" PRIu64 " 0 %d 0", sha, conf.prefix, conf.machine, conf.ttl_ms,
	                 SL_FLEET_HEADROOM_PPM);
	if (!two_ints(r)) {
		fprintf(out, "redis %s (version %s): the lease script did not answer as it should\n",
		        cfg->global.redis, version);
		if (r)
			freeReplyObject(r);
		goto out;
	}
	fprintf(out, "redis %s: version %s, lease script loaded, its clock %" PRId64 " ms ahead of this "
	        "machine's; fleet %s, this machine %s\n", cfg->global.redis, version,
	        (int64_t)r->element[0]->integer - realtime_ms(), conf.prefix, conf.machine);
	freeReplyObject(r);
	rc = 0;
out:
	if (c)
		redisFree(c);
	return rc;
}
