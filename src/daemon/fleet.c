/*
 * The fleet: leases on limits shared through Redis (fleet.h; docs/design.md,
 * "Across machines").
 *
 * One round: collect the items this machine shares - each fleet section, and each
 * active key of a keyed one; for a section with both a rate and a concurrency,
 * one item for each - with what each is asked for (demand) and holds; send them in
 * one EVALSHA of fleet.lua; write what comes back into the segment.  Only one call
 * is in flight at a time.  A call unanswered for `timeout` lets the leases lapse,
 * and for DEAD_AFTER timeouts drops the connection, as does a new one not ready in
 * `timeout`; reconnecting backs off from 100 ms to 2 s.  While Redis cannot be reached the
 * leases stay as they are (shaping goes on with them), and an item that never had
 * one is given its part of the limit over `hosts`.  A Redis that can be reached
 * but answers late is no outage: it may be answering the other machines, and
 * giving them this one's share once its entry expires, so the leases lapse
 * instead (docs/design.md, "Late").
 *
 * Replies are untrusted: anything but the array of integers fleet.lua returns, of
 * the length asked for, is logged (rate-limited) and changes no lease.
 */
#include "fleet-internal.h"
#include "fleet_lua.h"

/* A warning of each kind at most once a second (a dead or broken Redis must not
 * fill the log); a new kind is logged at once. */
static void warn(struct fleet *f, const char *fmt, const char *a, const char *b)
{
	int64_t now = sl_clock_mono_ns();

	if (fmt == f->logged_fmt && now - f->logged_ns < SL_NS_PER_S)
		return;
	f->logged_ns = now;
	f->logged_fmt = fmt;
	sl_log_warnx(fmt, a, b);
}

/* The Redis in use as the log and stat name it: "HOST:PORT", a socket's path,
 * or how it is being found. */
static const char *here(struct fleet *f)
{
	if (!f->conf.host[0])
		snprintf(f->label, sizeof(f->label), "(%s)", sl_fleet_way_name(f->conf.way));
	else if (f->conf.port)
		snprintf(f->label, sizeof(f->label), strchr(f->conf.host, ':') ? "[%s]:%d" : "%s:%d", f->conf.host,
		         f->conf.port);
	else
		snprintf(f->label, sizeof(f->label), "%s", f->conf.host);
	return f->label;
}

static void set_state(struct fleet *f, uint32_t state)
{
	struct sl_shm_header *h = f->d->shm.hdr;

	if (!h)
		return;
	if ((state == SL_REDIS_DOWN || state == SL_REDIS_LATE) && h->redis_state != SL_REDIS_DOWN &&
	    h->redis_state != SL_REDIS_LATE)
		h->redis_down_ns = sl_clock_mono_ns();
	if (state == SL_REDIS_UP)
		h->redis_down_ns = 0;
	h->redis_state = state;
}

/* The spare calls that may be made now. */
static double spare_now(struct fleet *f)
{
	int64_t now = sl_clock_mono_ns();

	f->spare = SL_MIN(SPARE_MAX, f->spare + (double)(now - f->spare_at) / 1e9);
	f->spare_at = now;
	return f->spare;
}

/* Whether a call beyond the period's may be made now (one is then used). */
static int take_spare(struct fleet *f)
{
	if (spare_now(f) < 1) {
		sl_log_debug("fleet: no spare call now");
		return 0;
	}
	f->spare -= 1;
	return 1;
}

/* --- the connection --- */

static void connect_now(struct fleet *f);

static void unsubscribe(struct fleet *f)
{
	if (f->sub) {
		redisAsyncContext *ac = f->sub;

		f->sub = NULL;
		ac->data = NULL;
		redisAsyncFree(ac);
	}
}

static void drop_ask(struct fleet *f)
{
	if (f->ask) {
		redisAsyncContext *ac = f->ask;

		f->ask = NULL;
		ac->data = NULL;
		redisAsyncFree(ac);
	}
}

/* Give up on the connection and try again after the backoff.  `late`: Redis was
 * reached but did not answer in time - it may be answering the others, and
 * giving them this machine's share once its entry expires (a lease life after
 * our last call it ran), so nothing is extended and the leases lapse: no share
 * is no "go".  That holds until Redis answers again: a lease that lapsed is not
 * brought back by a connection failing afterwards (an overloaded Redis also
 * fails connects), as its share may be another machine's by then.  Otherwise
 * (refused, reset, closed, a bad answer, a replica) it is an outage: the leases
 * in hand are kept (docs/design.md, "Outage"). */
static void drop_as(struct fleet *f, const char *why, int late)
{
	uint32_t was = f->d->shm.hdr ? f->d->shm.hdr->redis_state : SL_REDIS_NONE;

	late = late || f->late;
	if (f->conf.port)
		sl_resolver_stale(f->names, f->conf.host); /* it may have moved */
	unsubscribe(f);
	drop_ask(f);
	if (f->conf.way != SL_FLEET_DIRECT)
		f->have_master = 0; /* ask the Sentinels, or the Cluster, again */
	if (f->ac) {
		redisAsyncContext *ac = f->ac;

		f->ac = NULL;
		ac->data = NULL;
		redisAsyncFree(ac); /* pending callbacks run with no reply */
	}
	f->ready = 0;
	f->tcp_up = 0;
	f->in_flight = 0;
	f->late = late;
	if (late) {
		if (was != SL_REDIS_LATE)
			sl_log_warnx("redis %s: %s; the leases lapse until it answers", here(f), why);
		else
			sl_log_info("redis %s: %s", here(f), why);
		set_state(f, SL_REDIS_LATE);
	} else {
		if (was != SL_REDIS_DOWN)
			sl_log_warnx("redis %s: %s; shaping on the leases in hand", here(f), why);
		set_state(f, SL_REDIS_DOWN);
		fleet_outage_shares(f);
	}
	ev_timer_stop(f->d->loop, &f->retry); /* libev: never set an active watcher */
	ev_timer_set(&f->retry, (double)f->backoff_ns / 1e9, 0.);
	ev_timer_start(f->d->loop, &f->retry);
	f->backoff_ns = SL_MIN(f->backoff_ns * 2, (int64_t)BACKOFF_MAX_NS);
}

static void drop(struct fleet *f, const char *why)
{
	drop_as(f, why, 0);
}

/* The call in flight is overdue: the leases lapse (drop_as says why), but the
 * connection is kept, for a Redis that is only busy answers in the end - and
 * two hundred daemons reconnecting at once would keep it busy - until
 * DEAD_AFTER timeouts, when it may be a connection whose other end is gone. */
static void answer_overdue(struct fleet *f, int64_t now)
{
	if (now - f->sent_ns > DEAD_AFTER * f->conf.timeout_ns) {
		drop_as(f, "still no answer: connecting again", 1);
		return;
	}
	if (!f->late)
		sl_log_warnx("redis %s: no answer in time; the leases lapse until it answers", here(f));
	f->late = 1;
	set_state(f, SL_REDIS_LATE);
}

static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	connect_now(w->data);
}

/* The round is sent again now, outside the reply's callback. */
static void schedule_tick(struct fleet *f, double after)
{
	ev_timer_stop(f->d->loop, &f->tick);
	ev_timer_set(&f->tick, after, 0.);
	ev_timer_start(f->d->loop, &f->tick);
}

/* The next round's delay: the refresh period, within a tenth either way, so that
 * machines started together do not call at once. */
static double jittered(struct fleet *f)
{
	double p = (double)f->conf.refresh_ns / 1e9;

	return p * (0.9 + 0.2 * (double)random() / (double)RAND_MAX);
}

static int valid_ints(const redisReply *r, size_t want)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != want)
		return 0;
	for (size_t i = 0; i < want; i++)
		if (!r->element[i] || r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer < 0)
			return 0;
	return 1;
}

static void load_script(struct fleet *f);

static void subscribe(struct fleet *f);

static int cluster_error(struct fleet *f, const char *err);

/* Authenticate on ac with redis_auth, if it names a password. */
static void auth(struct fleet *f, redisAsyncContext *ac, redisCallbackFn *cb)
{
	if (!f->conf.pass[0])
		return;
	if (f->conf.user[0])
		redisAsyncCommand(ac, cb, NULL, "AUTH %s %s", f->conf.user, f->conf.pass);
	else
		redisAsyncCommand(ac, cb, NULL, "AUTH %s", f->conf.pass);
}

/* The master found (or named by a redirection) is the one to connect to. */
static void use_master(struct fleet *f, const struct sl_redis_addr *a)
{
	snprintf(f->conf.host, sizeof(f->conf.host), "%s", a->host);
	f->conf.port = a->port;
	f->have_master = 1;
}

/* After a drop that is no outage (the master moved, and where to is known):
 * connect again at once rather than after the backoff. */
static void reconnect_soon(struct fleet *f)
{
	f->backoff_ns = BACKOFF_MIN_NS;
	ev_timer_stop(f->d->loop, &f->retry);
	ev_timer_set(&f->retry, 0., 0.);
	ev_timer_start(f->d->loop, &f->retry);
}

static void on_ask_disconnect(const redisAsyncContext *ac, int status)
{
	struct fleet *f = ac->data;

	(void)status;
	if (f && f->ask == ac)
		f->ask = NULL;
}

/* Woken for a machine short of room: call now, from the spare calls, when we hold
 * more than an equal part would be with one more machine - our next answer may
 * give room back (and two spare calls are left, for the call that reports the
 * smaller share). */
static void answer_wake(struct fleet *f)
{
	if (f->above && f->ready && !f->in_flight && !f->ack_due && spare_now(f) >= 2 && take_spare(f)) {
		f->ack_due = 1;
		f->woke = 1;
		schedule_tick(f, 0.);
	}
}

/* Write an answer's leases (vals: fleet.lua's numbers, believed) into the segment
 * and decide whether to call again soon. */
static void apply_answer(struct fleet *f, const long long *vals, int64_t now)
{
	struct sl_shm_header *h = f->d->shm.hdr;
	struct sl_fleet_round round = {0};
	int64_t rtt = now - f->sent_ns;
	long long rnow = vals[0];

	/* Redis read its clock (us) between the call's send and now: placed at now,
	 * the grid's slots are late by at most the round trip, never early. */
	f->grid_origin = sl_fleet_grid_origin(f->have_origin, f->grid_origin, now - vals[2] * 1000, rtt);
	f->have_origin = 1;
	f->off_ms = rnow - fleet_realtime_ms();
	f->rtt_ms = (rtt + SL_NS_PER_MS - 1) / SL_NS_PER_MS;
	f->have_off = 1;
	f->tryagain = 0;
	f->late = 0;
	f->backoff_ns = BACKOFF_MIN_NS;
	set_state(f, SL_REDIS_UP);
	h->redis_answer_ns = now;
	if (sl_shm_lock(h, f->d->shm.self, SL_NS_PER_S) < 0) {
		warn(f, "segment %s: lock unavailable; leases of this answer dropped", f->d->shm_name, "");
		return;
	}
	for (size_t j = 0; j < f->nitems; j++) {
		const struct sl_fleet_item *it = &f->items[j];
		const long long *e = vals + SL_FLEET_HEAD_OUT + SL_FLEET_FIELDS_OUT * j;
		struct sl_grant g;

		sl_log_debug("fleet %s: demand %" PRIu64 " held %" PRIu64 " granted %lld (%lld machines)%s", it->key,
		             it->demand, it->held, e[0], e[1], it->claims ? ", by claims" : "");
		/* Usable for one lease time from when the call left: Redis counts it from
		 * when the call came, which is later. */
		/* Redis came back empty (settling): the claim cursors are gone with
		 * everything else, so claims held from before are dropped - slots
		 * claimed anew after the settling may be the same (docs/design.md,
		 * "The bound"). */
		if (vals[1] && it->kind == 'r' && it->grid) {
			struct sl_state *st = fleet_item_state(f, it);

			if (st)
				sl_lease_claims_drop(st);
		}
		if (sl_fleet_answer(it, e, rnow, rtt, now, f->sent_ns + (int64_t)f->conf.ttl_ms * SL_NS_PER_MS,
		                    f->grid_origin, &round, &g))
			fleet_write_grant(f, it, &g, now);
		fleet_pause(f, it, e[4], rnow, now, rtt);
	}
	h->redis_machines = round.machines;
	sl_shm_unlock(h, f->d->shm.self);
	f->starved = round.starved;
	f->above = round.above;
	/* Woken for a machine short of room, and a smaller share is in force now: say
	 * so at once, so the room goes to that machine at its next call rather than a
	 * period later.  (Unwoken, nobody waits for it: the next period tells.) */
	if (round.shrank && f->call_woke && !f->ack_due && take_spare(f)) {
		f->ack_due = 1;
		schedule_tick(f, 0.);
	} else if (f->wake_later) {
		answer_wake(f);
	} else if (f->starved && take_spare(f)) {
		/* Short of what it asks: the others were woken (fleet.lua) and report
		 * their smaller shares within milliseconds; ask again soon after. */
		schedule_tick(f, jittered(f) / 5);
	}
	f->wake_later = 0;
}

static void on_leases(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fleet *f = ac->data;
	redisReply *r = reply;
	size_t want;
	long long *vals;

	if (!f || (uint64_t)(uintptr_t)priv != f->call || !f->in_flight)
		return; /* an answer to a call given up on */
	f->in_flight = 0;
	if (!r)
		return; /* the connection went: the disconnect callback follows */
	if (r->type == REDIS_REPLY_ERROR) {
		if (r->str && strncmp(r->str, "NOSCRIPT", 8) == 0) {
			/* Redis restarted, or its scripts were flushed: load it again. */
			f->ready = 0;
			load_script(f);
			return;
		}
		if (f->conf.way == SL_FLEET_CLUSTER && cluster_error(f, r->str))
			return;
		warn(f, "redis %s: the lease call failed: %s", here(f), r->str ? r->str : "?");
		drop(f, "the lease call failed");
		return;
	}
	want = SL_FLEET_HEAD_OUT + SL_FLEET_FIELDS_OUT * f->nitems;
	if (!valid_ints(r, want)) {
		warn(f, "redis %s: an answer that is not the lease script's (%s): leases kept", here(f),
		     r->type == REDIS_REPLY_ARRAY ? "wrong length or type" : "not an array");
		drop(f, "a server that answers so is no lease server"); /* leases kept, as in an outage */
		return;
	}
	if (!(vals = malloc(want * sizeof(*vals))))
		return;
	for (size_t i = 0; i < want; i++)
		vals[i] = r->element[i]->integer;
	if (sl_fleet_plausible(f->items, f->nitems, vals)) {
		apply_answer(f, vals, sl_clock_mono_ns());
	} else {
		warn(f, "redis %s: an answer out of the lease script's range (%s): leases kept", here(f),
		     "a grant above its limit, or a clock before 2020");
		drop(f, "a server that answers so is no lease server");
	}
	free(vals);
}

static void free_call(struct fleet *f)
{
	free(f->argv);
	free(f->lens);
	free(f->num);
	free(f->pkeys);
	free(f->runs);
	f->pkeys = NULL;
	f->runs = NULL;
	f->argv = NULL;
	f->lens = NULL;
	f->num = NULL;
	f->argc = 0;
}

/* Send the call kept in f on ac: as EVALSHA, or (to a node an ASK named, which
 * may not have the script) as EVAL of the script itself after ASKING. */
static void send_call(struct fleet *f, redisAsyncContext *ac, int asking)
{
	const char *first = f->argv[0], *second = f->argv[1];
	size_t l0 = f->lens[0], l1 = f->lens[1];

	if (asking) {
		redisAsyncCommand(ac, NULL, NULL, "ASKING");
		f->argv[0] = "EVAL";
		f->lens[0] = 4;
		f->argv[1] = sl_fleet_lua;
		f->lens[1] = strlen(sl_fleet_lua);
	}
	f->call++;
	if (redisAsyncCommandArgv(ac, on_leases, (void *)(uintptr_t)f->call, (int)f->argc, f->argv, f->lens) ==
	    REDIS_OK) {
		f->in_flight = 1;
		f->sent_ns = sl_clock_mono_ns();
		f->d->shm.hdr->redis_calls++;
	}
	f->argv[0] = first;
	f->lens[0] = l0;
	f->argv[1] = second;
	f->lens[1] = l1;
}

/* A Cluster's answer that the fleet's slot is elsewhere, or moving: MOVED sends
 * every later call to the node it names (as a new master, see on_info),
 * ASK this one call, TRYAGAIN (keys half moved) the same call again shortly.  1
 * when err was one of them. */
static int cluster_error(struct fleet *f, const char *err)
{
	struct sl_redis_addr self, to;
	int kind;
	char where[SL_REDIS_HOST_MAX + 8], addr[64], why[200];

	snprintf(self.host, sizeof(self.host), "%s", f->conf.host);
	self.port = f->conf.port;
	if (err && strncmp(err, "TRYAGAIN", 8) == 0) {
		if (!f->tryagain++)
			sl_log_debug("redis %s: slot %u half moved (TRYAGAIN): calling again shortly", here(f),
			             f->conf.slot);
		schedule_tick(f, 0.1);
		return 1;
	}
	if (!(kind = sl_redis_redirect(err, &self, &to)))
		return 0;
	sl_redis_addr_format(&to, where, sizeof(where));
	if (kind == 1) {
		sl_log_info("redis %s: the fleet's slot %u moved to %s", f->in_use, f->conf.slot, where);
		drop(f, "the fleet's slot moved");
		use_master(f, &to);
		reconnect_soon(f);
		return 1;
	}
	/* ASK: this call only, to that node, on a connection of its own. */
	sl_log_debug("redis %s: slot %u migrating: this call asks %s", f->in_use, f->conf.slot, where);
	drop_ask(f);
	if (sl_resolver_get(f->names, to.host, addr, sizeof(addr), why, sizeof(why)) <= 0 ||
	    !(f->ask = redisAsyncConnect(addr, to.port)) || f->ask->err) {
		drop_ask(f);
		return 0;
	}
	f->ask->data = f;
	redisLibevAttach(f->d->loop, f->ask);
	redisAsyncSetDisconnectCallback(f->ask, on_ask_disconnect);
	auth(f, f->ask, NULL);
	send_call(f, f->ask, 1);
	return 1;
}

static void send_round(struct fleet *f)
{
	size_t n = fleet_collect(f, sl_clock_mono_ns());
	size_t argc = 3 + 1 + 5 * n + 5 + (SL_FLEET_FIELDS_IN + 1) * n, a = 0;
	const char **argv = calloc(argc, sizeof(*argv));
	size_t *lens = calloc(argc, sizeof(*lens));
	char (*num)[32] = calloc(5 + SL_FLEET_FIELDS_IN * n, sizeof(*num)); /* the NUMs below */
	char (*pkeys)[SL_FLEET_KEY_MAX + 8] = calloc(n ? 4 * n : 1, sizeof(*pkeys));
	char (*runs)[SL_GRID_RUNS * 10 + 2] = calloc(n ? n : 1, sizeof(*runs));
	size_t k = 0;

	free_call(f);
	drop_ask(f);
	if (!argv || !lens || !num || !pkeys || !runs) {
		free(argv);
		free(lens);
		free(num);
		free(pkeys);
		free(runs);
		return;
	}
	f->argv = argv;
	f->lens = lens;
	f->num = num;
	f->pkeys = pkeys;
	f->runs = runs;
	f->nitems = n;
#define ARG(s) (argv[a] = (s), lens[a] = strlen(argv[a]), a++)
#define NUM(fmt, v) (snprintf(num[k], sizeof(num[k]), fmt, v), ARG(num[k++]))
	ARG("EVALSHA");
	ARG(f->sha);
	NUM("%zu", 1 + 5 * n);
	ARG(f->epoch);
	for (size_t j = 0; j < n; j++)
		ARG(f->items[j].key);
	for (size_t j = 0; j < n; j++) {
		snprintf(pkeys[j], sizeof(pkeys[j]), "%s:pause", f->items[j].key);
		ARG(pkeys[j]);
	}
	for (size_t j = 0; j < n; j++) {
		snprintf(pkeys[n + j], sizeof(pkeys[n + j]), "%s:exp", f->items[j].key);
		ARG(pkeys[n + j]);
	}
	for (size_t j = 0; j < n; j++) {
		snprintf(pkeys[2 * n + j], sizeof(pkeys[2 * n + j]), "%s:totals", f->items[j].key);
		ARG(pkeys[2 * n + j]);
	}
	for (size_t j = 0; j < n; j++) {
		snprintf(pkeys[3 * n + j], sizeof(pkeys[3 * n + j]), "%s:grid", f->items[j].key);
		ARG(pkeys[3 * n + j]);
	}
	ARG(f->conf.machine);
	NUM("%" PRIu64, f->conf.ttl_ms);
	NUM("%" PRIu64, 2 * f->conf.ttl_ms); /* settling after an empty start */
	NUM("%d", SL_FLEET_HEADROOM_PPM);
	NUM("%zu", n);
	for (size_t j = 0; j < n; j++) {
		/* SL_FLEET_FIELDS_IN + 1 values each: kind and what follows */
		const struct sl_fleet_item *it = &f->items[j];
		static const char *const kinds[] = {"r", "c", "f", "s", "l", "g", "q"};
		const char *kind = it->kind == 'r' ? kinds[it->grid ? (it->claims ? 6 : 5) : 0] : it->kind == 'c' ? kinds[1]
		                 : it->kind == 'f' ? kinds[2] : it->kind == 's' ? kinds[3] : kinds[4];

		ARG(kind);
		NUM("%" PRIu64, it->limit);
		NUM("%" PRId64, (int64_t)SL_MAX(it->window_ns / SL_NS_PER_MS, (int64_t)1));
		NUM("%" PRIu64, it->demand);
		NUM("%" PRIu64, it->held);
		NUM("%" PRId64, it->pause_ms);
		ARG(sl_fleet_grid_runs(&it->held_grid, runs[j], sizeof(runs[j])));
	}
#undef ARG
#undef NUM
	f->argc = a;
	send_call(f, f->ac, 0);
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fleet *f = w->data;

	(void)loop;
	(void)revents;
	f->ack_due = 0;
	if (f->ready && f->in_flight && sl_clock_mono_ns() - f->sent_ns > f->conf.timeout_ns) {
		answer_overdue(f, sl_clock_mono_ns());
	} else if (f->ac && !f->ready && sl_clock_mono_ns() - f->connected_ns > f->conf.timeout_ns) {
		if (f->tcp_up)
			drop_as(f, "not ready in time (authentication or script load)", 1);
		else
			drop(f, "cannot connect in time");
	} else if (f->ready && !f->in_flight) {
		subscribe(f); /* again, if it went */
		f->call_woke = f->woke;
		f->woke = 0;
		send_round(f);
	} else if (!f->ac && !f->late) {
		fleet_outage_shares(f); /* the leases that ended while Redis is away */
	}
	if (f->find)
		sl_fleet_find_watch(f->find); /* again, if the Sentinel we listened to went */
	schedule_tick(f, jittered(f));
}

/* Five times a period: callers held for want of share since the last round, on a
 * rate item this machine holds less than nine tenths of an equal part of (a machine whose
 * demand just stepped up, or just came): call now, from the spare calls, rather
 * than at the period's end - the round asks, wakes the machines holding the
 * room, and the early call that follows a short answer collects it.  Only the
 * last round's items are looked at, without the lock: a hint, not a measure. */
static void on_watch(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fleet *f = w->data;
	struct sl_shm_header *h = f->d->shm.hdr;

	(void)loop;
	(void)revents;
	if (!f->ready || f->in_flight || f->ack_due)
		return;
	for (size_t j = 0; j < f->nitems; j++) {
		const struct sl_fleet_item *it = &f->items[j];
		const struct sl_state *st;
		const struct sl_fleet_memo *m;

		if (it->kind != 'r' || !(st = fleet_item_state(f, it)) || !(m = fleet_memo_find(f, it->key)))
			continue;
		if (__atomic_load_n(&sl_state_more(st)->lease.misses, __ATOMIC_RELAXED) == m->misses_seen ||
		    sl_state_more(st)->lease.amount * SL_MAX(h->redis_machines, 1u) * 10 >= it->limit * 9)
			continue;
		if (take_spare(f)) {
			sl_log_debug("fleet %s: callers held on a small share: calling now", it->key);
			f->ack_due = 1;
			schedule_tick(f, 0.);
		}
		return;
	}
}

/* --- the wake channel: another machine is short of room we may be holding --- */

static void on_wake(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fleet *f = ac->data;
	redisReply *r = reply, **e;

	(void)priv;
	if (!f || !r || r->type != REDIS_REPLY_ARRAY || r->elements != 3)
		return;
	e = r->element;
	if (!e[0] || e[0]->type != REDIS_REPLY_STRING || strcmp(e[0]->str, "message") != 0 || !e[2] ||
	    e[2]->type != REDIS_REPLY_STRING || strcmp(e[2]->str, f->conf.machine) == 0)
		return; /* the subscription's confirmation, or our own call */
	/* Call now, from the spare calls, when we hold more than an equal part: our
	 * next answer may give room back (and two spare calls are left, for the call
	 * that reports the smaller share). */
	sl_log_debug("fleet: %s is short of room%s", e[2]->str, f->above ? "" : " (none of it ours)");
	if (f->in_flight || f->ack_due)
		f->wake_later = 1; /* the answer on its way may already give room back */
	else
		answer_wake(f);
}

static void on_sub_connect(const redisAsyncContext *ac, int status)
{
	struct fleet *f = ac->data;

	if (f && status != REDIS_OK) {
		f->sub = NULL; /* hiredis frees it; the next period tries again */
		((redisAsyncContext *)ac)->data = NULL;
	}
}

static void on_sub_disconnect(const redisAsyncContext *ac, int status)
{
	struct fleet *f = ac->data;

	(void)status;
	if (f)
		f->sub = NULL;
}

/* Listen on the wake channel, on a connection of its own (a subscribed
 * connection takes no other command).  Without it shares still move, a period
 * later. */
static void subscribe(struct fleet *f)
{
	redisAsyncContext *ac;
	char addr[64], why[200];

	if (f->sub || !f->ready)
		return;
	if (f->conf.port && sl_resolver_get(f->names, f->conf.host, addr, sizeof(addr), why, sizeof(why)) <= 0)
		return; /* tried again at the next round */
	ac = f->conf.port ? redisAsyncConnect(addr, f->conf.port) : redisAsyncConnectUnix(f->conf.host);
	if (!ac || ac->err) {
		if (ac)
			redisAsyncFree(ac);
		return;
	}
	ac->data = f;
	f->sub = ac;
	redisLibevAttach(f->d->loop, ac);
	redisAsyncSetConnectCallback(ac, on_sub_connect);
	redisAsyncSetDisconnectCallback(ac, on_sub_disconnect);
	auth(f, ac, NULL);
	redisAsyncCommand(ac, on_wake, NULL, "SUBSCRIBE %s:wake", f->conf.prefix);
}

static void on_script(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fleet *f = ac->data;
	redisReply *r = reply;

	(void)priv;
	if (!f || !r)
		return;
	if (r->type != REDIS_REPLY_STRING || r->len != 40) {
		warn(f, "redis %s: cannot load the lease script: %s", here(f),
		     r->type == REDIS_REPLY_ERROR && r->str ? r->str : "unexpected answer");
		drop(f, "the lease script would not load"); /* and try again, backing off */
		return;
	}
	memcpy(f->sha, r->str, 40);
	f->sha[40] = '\0';
	f->ready = 1;
	subscribe(f);
	schedule_tick(f, 0.);
}

static void load_script(struct fleet *f)
{
	if (f->ac)
		redisAsyncCommand(f->ac, on_script, NULL, "SCRIPT LOAD %s", sl_fleet_lua);
}

static void on_auth(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fleet *f = ac->data;
	redisReply *r = reply;

	(void)priv;
	if (f && r && r->type == REDIS_REPLY_ERROR) {
		warn(f, "redis %s: authentication refused: %s", here(f), r->str ? r->str : "?");
		drop(f, "authentication refused");
	}
}

/* A Redis that says it is no master is not written to: a replica left behind by
 * a failover, or one a stale answer named.  (A user whose ACL forbids ROLE is
 * not checked: a replica refuses the lease call's writes anyway.) */
static void on_role(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fleet *f = ac->data;
	redisReply *r = reply;

	(void)priv;
	if (!f || !r || r->type == REDIS_REPLY_ERROR || sl_redis_role_master(r))
		return;
	warn(f, "redis %s: %s", here(f), "not a master (ROLE): looking again");
	drop(f, "not a master");
}

/* Which master this is.  Another than the last one used - a replica promoted by
 * a failover, or a Redis restarted from an old snapshot - may have lost the
 * last grants, so the fleet settles as after an empty start: the epoch key goes
 * before this daemon's first call, and for a settling time nobody is granted
 * more than it reports holding (fleet.lua; docs/design.md, "Sentinel and
 * Cluster"). */
static void on_info(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fleet *f = ac->data;
	redisReply *r = reply;
	char id[41] = "", where[sizeof(f->label)];

	(void)priv;
	if (!f || !r)
		return;
	if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
		sl_redis_run_id(r->str, id);
	snprintf(where, sizeof(where), "%s", here(f));
	if (id[0] && f->run_id[0] && strcmp(id, f->run_id) != 0) {
		sl_log_notice("redis %s: another master than before (run id %.8s, was %.8s): the fleet settles",
		              where, id, f->run_id);
		redisAsyncCommand(f->ac, NULL, NULL, "DEL %s", f->epoch);
	}
	if (strcmp(where, f->in_use) != 0 || (id[0] && strcmp(id, f->run_id) != 0)) {
		memcpy(f->in_use, where, sizeof(where));
		f->in_use_ms = fleet_realtime_ms();
	}
	if (id[0])
		memcpy(f->run_id, id, sizeof(id));
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct fleet *f = ac->data;

	if (!f)
		return;
	if (status != REDIS_OK) {
		/* hiredis frees the context after this callback. */
		f->ac = NULL;
		((redisAsyncContext *)ac)->data = NULL;
		drop(f, ac->errstr[0] ? ac->errstr : "cannot connect");
		return;
	}
	f->tcp_up = 1;
	sl_log_info("redis %s: connected (fleet %s, machine %s%s%s)", here(f), f->d->cfg->global.fleet[0] ?
	            f->d->cfg->global.fleet : "sluice", f->conf.machine, f->conf.way != SL_FLEET_DIRECT ? ", found by " : "",
	            f->conf.way != SL_FLEET_DIRECT ? sl_fleet_way_name(f->conf.way) : "");
	auth(f, f->ac, on_auth);
	/* Before any call: that it is a master, and which one (master_seen). */
	redisAsyncCommand(f->ac, on_role, NULL, "ROLE");
	redisAsyncCommand(f->ac, on_info, NULL, "INFO server");
	load_script(f);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct fleet *f = ac->data;

	(void)status;
	if (!f)
		return; /* dropped by us: done already */
	f->ac = NULL; /* hiredis frees it */
	drop(f, ac->errstr[0] ? ac->errstr : "connection closed");
}

/* The seeds named the master (or none could: an outage, backing off). */
static void on_found(void *arg, const struct sl_redis_addr *master, const char *why)
{
	struct fleet *f = arg;

	if (!master) {
		drop(f, why && why[0] ? why : "no seed named the master");
		return;
	}
	use_master(f, master);
	connect_now(f);
}

/* The Sentinels failed the master over: follow at once. */
static void on_switched(void *arg, const struct sl_redis_addr *master)
{
	struct fleet *f = arg;
	char where[SL_REDIS_HOST_MAX + 8];

	if (f->have_master && f->conf.port == master->port && strcmp(f->conf.host, master->host) == 0)
		return;
	sl_redis_addr_format(master, where, sizeof(where));
	sl_log_info("redis: the Sentinels moved master %s to %s", f->conf.master_name, where);
	drop(f, "the master was failed over");
	use_master(f, master);
	reconnect_soon(f);
}

/* While connecting again, the state stays what the drop made it. */
static uint32_t connecting_state(const struct fleet *f)
{
	uint32_t s = f->d->shm.hdr ? f->d->shm.hdr->redis_state : SL_REDIS_NONE;

	return s == SL_REDIS_DOWN || s == SL_REDIS_LATE ? s : SL_REDIS_CONNECTING;
}

/* conf.host's address, into addr: 1 known, 0 still being resolved (connect_now
 * is called again shortly), -1 none (dropped, as Redis cannot be had: an
 * outage).  A name the resolver has not answered within the connect timeout
 * is none either. */
static int address_of_master(struct fleet *f, char *addr, size_t len)
{
	char why[200];
	int64_t now = sl_clock_mono_ns();
	int known = sl_resolver_get(f->names, f->conf.host, addr, len, why, sizeof(why));

	if (known > 0) {
		f->resolving_ns = 0;
		f->name_why[0] = '\0';
		return 1;
	}
	/* Said once per reason: drop_as logs only the first drop of an outage. */
	if (known < 0 && strcmp(why, f->name_why) != 0) {
		sl_log_warnx("redis %s: %s", here(f), why);
		snprintf(f->name_why, sizeof(f->name_why), "%s", why);
	}
	if (known == 0 && !f->resolving_ns)
		f->resolving_ns = now;
	if (known < 0 || now - f->resolving_ns > f->conf.timeout_ns) {
		f->resolving_ns = 0;
		drop(f, known < 0 ? why : "its name not resolved in time");
		return -1;
	}
	set_state(f, connecting_state(f));
	ev_timer_stop(f->d->loop, &f->retry);
	ev_timer_set(&f->retry, RESOLVE_POLL_S, 0.);
	ev_timer_start(f->d->loop, &f->retry);
	return 0;
}

static void connect_now(struct fleet *f)
{
	redisAsyncContext *ac;
	char addr[64];

	if (f->conf.way != SL_FLEET_DIRECT && !f->have_master) {
		set_state(f, connecting_state(f));
		sl_fleet_find_start(f->find, SL_MIN(f->conf.timeout_ns, (int64_t)SL_NS_PER_S));
		return;
	}
	if (f->conf.port && address_of_master(f, addr, sizeof(addr)) <= 0)
		return;
	ac = f->conf.port ? redisAsyncConnect(addr, f->conf.port) : redisAsyncConnectUnix(f->conf.host);

	set_state(f, connecting_state(f));
	if (!ac || ac->err) {
		const char *why = ac && ac->errstr[0] ? ac->errstr : "out of memory";

		if (ac)
			redisAsyncFree(ac);
		drop(f, why);
		return;
	}
	ac->data = f;
	f->ac = ac;
	f->connected_ns = sl_clock_mono_ns();
	redisLibevAttach(f->d->loop, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

/* --- settings --- */

/* "PASSWORD" or "USER PASSWORD" from the file, trimmed.  0 or -errno. */
int sl_fleet_start(struct sl_daemon *d)
{
	struct fleet *f;
	int rc;

	if (!sl_fleet_needed(d->cfg) || !sl_config_has_redis(d->cfg)) {
		if (d->shm.hdr)
			d->shm.hdr->redis_state = SL_REDIS_NONE;
		return 0;
	}
	if (!(f = calloc(1, sizeof(*f))) || !(f->items = calloc(MAX_ITEMS, sizeof(*f->items)))) {
		if (f)
			free(f);
		return -ENOMEM;
	}
	f->d = d;
	if ((rc = sl_fleet_conf_read(&f->conf, d->cfg, d->shm_name)) < 0) {
		free(f->items);
		free(f);
		return rc;
	}
	srandom((unsigned)(getpid() ^ (uint32_t)sl_clock_mono_ns()));
	snprintf(f->epoch, sizeof(f->epoch), "%s:epoch", f->conf.prefix);
	/* Without a thread for names, one is resolved in the loop as before. */
	if (!(f->names = sl_resolver_new()))
		sl_log_warn("fleet: no thread to resolve host names; resolved in the daemon's loop");
	if (f->conf.way != SL_FLEET_DIRECT &&
	    !(f->find = sl_fleet_find_new(d->loop, &f->conf, f->names, on_found, on_switched, f))) {
		sl_resolver_free(f->names);
		free(f->items);
		free(f);
		return -ENOMEM;
	}
	f->backoff_ns = BACKOFF_MIN_NS;
	f->spare_at = sl_clock_mono_ns();
	ev_timer_init(&f->tick, on_tick, 0., 0.);
	/* Lowest: a loop that wakes late (a daemon kept off the cores) finds the
	 * answer and the tick pending together, and reads the answer first rather
	 * than calling it overdue - 200 daemons on two cores timed out twice each in
	 * 12 s, and each such outage let a machine shape on ranks Redis then gave to
	 * another (docs/design.md, "The grid").  libev runs pending watchers by
	 * priority. */
	ev_set_priority(&f->tick, EV_MINPRI);
	f->tick.data = f;
	ev_timer_init(&f->retry, on_retry, 0., 0.);
	f->retry.data = f;
	ev_timer_init(&f->watch, on_watch, 0., (double)f->conf.refresh_ns / 5e9);
	f->watch.data = f;
	ev_timer_again(d->loop, &f->watch);
	fleet_claims_init(f);
	d->fleet = f;
	d->shm.hdr->redis_state = SL_REDIS_CONNECTING;
	connect_now(f);
	schedule_tick(f, jittered(f));
	return 0;
}

void sl_fleet_stop(struct sl_daemon *d)
{
	struct fleet *f = d->fleet;

	if (!f)
		return;
	ev_timer_stop(d->loop, &f->tick);
	ev_timer_stop(d->loop, &f->retry);
	ev_timer_stop(d->loop, &f->watch);
	fleet_claims_stop(f);
	unsubscribe(f);
	drop_ask(f);
	sl_fleet_find_free(f->find);
	sl_resolver_free(f->names);
	if (f->ac) {
		f->ac->data = NULL;
		redisAsyncFree(f->ac);
	}
	free_call(f);
	free(f->items);
	free(f->memo);
	free(f);
	d->fleet = NULL;
}

void sl_fleet_where(const struct sl_daemon *d, struct sl_redis_where *w)
{
	const struct fleet *f = d->fleet;

	memset(w, 0, sizeof(*w));
	if (!f)
		return;
	snprintf(w->how, sizeof(w->how), "%s", sl_fleet_way_name(f->conf.way));
	snprintf(w->master, sizeof(w->master), "%s", f->in_use);
	w->since_ms = f->in_use_ms;
}

int sl_fleet_reload(struct sl_daemon *d, const struct sl_config *old)
{
	const struct sl_global *a = &old->global, *b = &d->cfg->global;

	if (d->fleet && sl_fleet_needed(d->cfg) && strcmp(a->redis, b->redis) == 0 &&
	    strcmp(a->redis_auth, b->redis_auth) == 0 && strcmp(a->redis_sentinels, b->redis_sentinels) == 0 &&
	    strcmp(a->redis_master, b->redis_master) == 0 && strcmp(a->redis_sentinel_auth, b->redis_sentinel_auth) == 0 &&
	    strcmp(a->redis_cluster, b->redis_cluster) == 0 && strcmp(a->fleet, b->fleet) == 0 &&
	    strcmp(a->machine, b->machine) == 0) {
		sl_fleet_conf_periods(&d->fleet->conf, b->refresh_ns);
		fleet_claims_timer(d->fleet);
		return 0;
	}
	sl_fleet_stop(d);
	return sl_fleet_start(d);
}
