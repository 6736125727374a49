/*
 * fleet_find.c - asking Sentinels or Cluster nodes where the fleet's master is
 * (fleet_find.h).  One seed at a time: connect, authenticate (the Sentinels with
 * redis_sentinel_auth, a Cluster's nodes with redis_auth), ask, read the answer
 * with redisnode.c.  A seed that fails, answers nonsense or takes longer than
 * its share of time is left for the next; when every seed has failed the caller
 * hears why and backs off as in any outage.  The next search starts with the
 * seed that answered last.
 */
#include "fleet_find.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/log.h"

#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <stdlib.h>
#include <string.h>

struct sl_fleet_find {
	struct ev_loop *loop;
	const struct sl_fleet_conf *conf;
	struct sl_resolver *names;
	sl_fleet_found_fn *found;
	sl_fleet_switched_fn *switched;
	void *arg;
	redisAsyncContext *ac;    /* the seed being asked; NULL between searches */
	redisAsyncContext *watch; /* a Sentinel subscribed to +switch-master */
	unsigned at;              /* the seed asked now (or that answered last) */
	unsigned tried;           /* seeds asked in this search */
	unsigned watch_at;
	int64_t watch_next_ns;    /* no new subscription before (a failed one waits) */
	int searching;
	int64_t each_ns;
	ev_timer timer;           /* the seed's time is up; or: report, outside any call */
	ev_timer poll;            /* the seed's name is being resolved: look again */
	struct sl_redis_addr answer;
	int have_answer;
	char why[200];
};

static void ask_seed(struct sl_fleet_find *ff);

static void close_seed(struct sl_fleet_find *ff)
{
	ev_timer_stop(ff->loop, &ff->poll);
	if (ff->ac) {
		redisAsyncContext *ac = ff->ac;

		ff->ac = NULL;
		ac->data = NULL;
		redisAsyncFree(ac); /* inside one of its callbacks hiredis frees it after */
	}
}

/* End the search: report from the timer, never from a hiredis callback (the
 * caller connects, and may free, from its found callback). */
static void finish(struct sl_fleet_find *ff, const struct sl_redis_addr *a, const char *why)
{
	close_seed(ff);
	ff->have_answer = a != NULL;
	if (a)
		ff->answer = *a;
	if (why)
		snprintf(ff->why, sizeof(ff->why), "%s", why);
	ev_timer_stop(ff->loop, &ff->timer);
	ev_timer_set(&ff->timer, 0., 0.);
	ev_timer_start(ff->loop, &ff->timer);
	ff->searching = 2; /* reporting */
}

/* This seed failed: say why (kept for the caller), and ask the next. */
static void seed_failed(struct sl_fleet_find *ff, const char *why)
{
	const struct sl_redis_addr *s = &ff->conf->seeds[ff->at];

	snprintf(ff->why, sizeof(ff->why), "%s %s:%d: %s", ff->conf->way == SL_FLEET_SENTINEL ? "sentinel" : "node",
	         s->host, s->port, why);
	sl_log_debug("fleet: %s", ff->why);
	close_seed(ff);
	if (++ff->tried >= ff->conf->nseeds) {
		finish(ff, NULL, NULL);
		return;
	}
	ff->at = (ff->at + 1) % ff->conf->nseeds;
	ask_seed(ff);
}

static void open_asked(struct sl_fleet_find *ff);

static void on_poll(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sl_fleet_find *ff = w->data;

	(void)loop;
	(void)revents;
	if (ff->searching == 1 && !ff->ac)
		open_asked(ff);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sl_fleet_find *ff = w->data;

	(void)loop;
	(void)revents;
	if (ff->searching == 2) {
		ff->searching = 0;
		ff->found(ff->arg, ff->have_answer ? &ff->answer : NULL, ff->why);
	} else if (ff->searching == 1) {
		seed_failed(ff, "no answer in time");
	}
}

static void on_answer(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sl_fleet_find *ff = ac->data;
	redisReply *r = reply;
	struct sl_redis_addr a, self;

	(void)priv;
	if (!ff || ac != ff->ac)
		return;
	if (!r) {
		seed_failed(ff, ac->errstr[0] ? ac->errstr : "connection lost");
		return;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		seed_failed(ff, r->str ? r->str : "an error");
		return;
	}
	self = ff->conf->seeds[ff->at];
	if (ff->conf->way == SL_FLEET_SENTINEL ? sl_redis_sentinel_master(r, &a) == 0
	                                       : sl_redis_cluster_master(r, ff->conf->slot, &self, &a) == 0) {
		finish(ff, &a, NULL);
		return;
	}
	seed_failed(ff, ff->conf->way == SL_FLEET_SENTINEL ? "does not know the master by that name"
	                                                   : "no master serves the fleet's slot");
}

static void on_auth(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sl_fleet_find *ff = ac->data;
	redisReply *r = reply;

	(void)priv;
	if (ff && ac == ff->ac && r && r->type == REDIS_REPLY_ERROR)
		seed_failed(ff, r->str ? r->str : "authentication refused");
}

static void on_seed_connect(const redisAsyncContext *ac, int status)
{
	struct sl_fleet_find *ff = ac->data;

	if (!ff || ac != ff->ac || status == REDIS_OK)
		return;
	ff->ac = NULL; /* hiredis frees it after this callback */
	((redisAsyncContext *)ac)->data = NULL;
	seed_failed(ff, ac->errstr[0] ? ac->errstr : "cannot connect");
}

static void on_seed_disconnect(const redisAsyncContext *ac, int status)
{
	struct sl_fleet_find *ff = ac->data;

	(void)status;
	if (!ff || ac != ff->ac)
		return;
	ff->ac = NULL;
	seed_failed(ff, ac->errstr[0] ? ac->errstr : "connection closed");
}

/* Authenticate on ac as the seeds want: Sentinels with their own password. */
static void auth(struct sl_fleet_find *ff, redisAsyncContext *ac, redisCallbackFn *cb)
{
	int sentinel = ff->conf->way == SL_FLEET_SENTINEL;
	const char *user = sentinel ? ff->conf->suser : ff->conf->user;
	const char *pass = sentinel ? ff->conf->spass : ff->conf->pass;

	if (!pass[0])
		return;
	if (user[0])
		redisAsyncCommand(ac, cb, NULL, "AUTH %s %s", user, pass);
	else
		redisAsyncCommand(ac, cb, NULL, "AUTH %s", pass);
}

/* A connection to seed s on the loop, authenticated as the seeds want; NULL
 * (and why, in why) when it cannot even be begun. */
static redisAsyncContext *open_seed(struct sl_fleet_find *ff, const struct sl_redis_addr *s,
                                    redisConnectCallback *on_conn, redisDisconnectCallback *on_disc,
                                    redisCallbackFn *on_auth_reply, char *why, size_t whylen)
{
	char addr[64];
	redisAsyncContext *ac;

	/* A name not resolved yet (or not at all) opens nothing: ask_seed waits for
	 * it within the seed's time; the watch tries again later. */
	if (sl_resolver_get(ff->names, s->host, addr, sizeof(addr), why, whylen) <= 0)
		return NULL;
	ac = redisAsyncConnect(addr, s->port);
	if (!ac || ac->err) {
		snprintf(why, whylen, "%s", ac && ac->errstr[0] ? ac->errstr : "out of memory");
		if (ac)
			redisAsyncFree(ac);
		return NULL;
	}
	ac->data = ff;
	redisLibevAttach(ff->loop, ac);
	redisAsyncSetConnectCallback(ac, on_conn);
	redisAsyncSetDisconnectCallback(ac, on_disc);
	auth(ff, ac, on_auth_reply);
	return ac;
}

#define POLL_S 0.02 /* a seed's name being resolved is looked for this often */

/* Open the seed asked now: at once when its address is known; while its name
 * is being resolved, looked for again every POLL_S within the seed's time. */
static void open_asked(struct sl_fleet_find *ff)
{
	char why[200], addr[64];
	const struct sl_redis_addr *seed = &ff->conf->seeds[ff->at];
	redisAsyncContext *ac;

	if (sl_resolver_get(ff->names, seed->host, addr, sizeof(addr), why, sizeof(why)) == 0) {
		ev_timer_stop(ff->loop, &ff->poll);
		ev_timer_set(&ff->poll, POLL_S, 0.);
		ev_timer_start(ff->loop, &ff->poll);
		return;
	}
	if (!(ac = open_seed(ff, seed, on_seed_connect, on_seed_disconnect, on_auth, why, sizeof(why)))) {
		seed_failed(ff, why);
		return;
	}
	ff->ac = ac;
	if (ff->conf->way == SL_FLEET_SENTINEL)
		redisAsyncCommand(ac, on_answer, NULL, "SENTINEL get-master-addr-by-name %s", ff->conf->master_name);
	else
		redisAsyncCommand(ac, on_answer, NULL, "CLUSTER SLOTS");
}

/* Ask the seed at ff->at, for at most each_ns: its name, if it has one, asked
 * of the name servers afresh (the search uses the address known until then). */
static void ask_seed(struct sl_fleet_find *ff)
{
	ev_timer_stop(ff->loop, &ff->timer);
	ev_timer_set(&ff->timer, (double)ff->each_ns / 1e9, 0.);
	ev_timer_start(ff->loop, &ff->timer);
	sl_resolver_stale(ff->names, ff->conf->seeds[ff->at].host);
	open_asked(ff);
}

void sl_fleet_find_start(struct sl_fleet_find *ff, int64_t each_ns)
{
	if (ff->searching)
		return;
	ff->searching = 1;
	ff->tried = 0;
	ff->each_ns = each_ns;
	ff->why[0] = '\0';
	ask_seed(ff);
}

/* --- +switch-master --- */

#define WATCH_RETRY_NS (2 * SL_NS_PER_S) /* after a subscription that failed */

static void watch_failed(struct sl_fleet_find *ff, const char *why)
{
	redisAsyncContext *ac = ff->watch;

	sl_log_debug("fleet: sentinel subscription failed: %s", why);
	ff->watch = NULL;
	ff->watch_at++;
	ff->watch_next_ns = sl_clock_mono_ns() + WATCH_RETRY_NS;
	if (ac) {
		ac->data = NULL;
		redisAsyncFree(ac);
	}
}

static void on_switch(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sl_fleet_find *ff = ac->data;
	redisReply *r = reply;
	struct sl_redis_addr a;

	(void)priv;
	if (ff && ac == ff->watch && r && r->type == REDIS_REPLY_ERROR) {
		watch_failed(ff, r->str ? r->str : "an error"); /* a password refused, say */
		return;
	}
	if (!ff || !r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !r->element[0] || !r->element[2] ||
	    r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0 ||
	    r->element[2]->type != REDIS_REPLY_STRING)
		return; /* the subscription's confirmation */
	if (sl_redis_switch_master(r->element[2]->str, ff->conf->master_name, &a) == 0)
		ff->switched(ff->arg, &a);
}

static void on_watch_connect(const redisAsyncContext *ac, int status)
{
	struct sl_fleet_find *ff = ac->data;

	if (ff && status != REDIS_OK) {
		ff->watch = NULL; /* hiredis frees it; a later call tries another */
		ff->watch_at++;
		ff->watch_next_ns = sl_clock_mono_ns() + WATCH_RETRY_NS;
		((redisAsyncContext *)ac)->data = NULL;
	}
}

static void on_watch_disconnect(const redisAsyncContext *ac, int status)
{
	struct sl_fleet_find *ff = ac->data;

	(void)status;
	if (ff) {
		ff->watch = NULL;
		ff->watch_at++;
		ff->watch_next_ns = sl_clock_mono_ns() + WATCH_RETRY_NS;
	}
}

void sl_fleet_find_watch(struct sl_fleet_find *ff)
{
	char why[128];
	redisAsyncContext *ac;

	if (ff->conf->way != SL_FLEET_SENTINEL || ff->watch || sl_clock_mono_ns() < ff->watch_next_ns)
		return;
	if (!(ac = open_seed(ff, &ff->conf->seeds[ff->watch_at % ff->conf->nseeds], on_watch_connect,
	                     on_watch_disconnect, NULL, why, sizeof(why)))) {
		ff->watch_at++;
		ff->watch_next_ns = sl_clock_mono_ns() + WATCH_RETRY_NS;
		return;
	}
	ff->watch = ac;
	redisAsyncCommand(ac, on_switch, NULL, "SUBSCRIBE +switch-master");
}

struct sl_fleet_find *sl_fleet_find_new(struct ev_loop *loop, const struct sl_fleet_conf *conf,
                                        struct sl_resolver *names, sl_fleet_found_fn *found,
                                        sl_fleet_switched_fn *switched, void *arg)
{
	struct sl_fleet_find *ff = calloc(1, sizeof(*ff));

	if (!ff)
		return NULL;
	ff->loop = loop;
	ff->conf = conf;
	ff->names = names;
	ff->found = found;
	ff->switched = switched;
	ff->arg = arg;
	ff->at = conf->nseeds ? (unsigned)random() % conf->nseeds : 0; /* spread a fleet over its seeds */
	ff->watch_at = ff->at;
	ev_timer_init(&ff->timer, on_timer, 0., 0.);
	ff->timer.data = ff;
	ev_timer_init(&ff->poll, on_poll, 0., 0.);
	ff->poll.data = ff;
	return ff;
}

void sl_fleet_find_free(struct sl_fleet_find *ff)
{
	if (!ff)
		return;
	ev_timer_stop(ff->loop, &ff->timer);
	close_seed(ff);
	ev_timer_stop(ff->loop, &ff->poll);
	if (ff->watch) {
		redisAsyncContext *ac = ff->watch;

		ff->watch = NULL;
		ac->data = NULL;
		redisAsyncFree(ac);
	}
	free(ff);
}
