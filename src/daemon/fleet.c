/*
 * The fleet: leases on limits shared through Redis (fleet.h; docs/design.md,
 * "Across machines").
 *
 * One round: collect the items this machine shares - each fleet section, and each
 * active key of a keyed one; for a section with both a rate and a concurrency,
 * one item for each - with what each is asked for (demand) and holds; send them in
 * one EVALSHA of fleet.lua; write what comes back into the segment.  Only one call
 * is in flight at a time.  A call unanswered for `timeout` drops the connection;
 * reconnecting backs off from 100 ms to 2 s.  While Redis cannot be reached the
 * leases stay as they are (shaping goes on with them), and an item that never had
 * one is given its part of the limit over `hosts`.
 *
 * Replies are untrusted: anything but the array of integers fleet.lua returns, of
 * the length asked for, is logged (rate-limited) and changes no lease.
 */
#include "fleet.h"
#include "fleet_lua.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/keys.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/log.h"
#include "sluice/pause.h"
#include "sluice/shm.h"
#include "sluice/strategy.h"
#include "sluice/units.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SCALE 1000           /* rate shares go in thousandths of a request per window */
#define HEADROOM_PPM 995000  /* a rate's grants add up to 99.5% of it (design.md) */
#define MAX_ITEMS 4096       /* items renewed in one call; more wait for the next */
#define KEY_MAX 400          /* a Redis key: prefix, section, key */
#define BACKOFF_MIN_NS (100 * SL_NS_PER_MS)
#define BACKOFF_MAX_NS (2 * SL_NS_PER_S)
#define SPARE_MAX 5.0

/* One thing this machine leases, in the round being built or in flight. */
struct item {
	char key[KEY_MAX];
	char kind;             /* r rate, c places, f/s/l fixed/session/sliding window */
	uint32_t section, serial;
	struct sl_keyref ref;  /* a key of a keyed section; serial 0: the section itself */
	uint64_t limit;        /* r: thousandths per window; c: places; windows: AMOUNT */
	int64_t window_ns;
	uint64_t burst;        /* the section's */
	uint64_t demand, held; /* as reported */
	int64_t pause_ms;      /* the end of its pause, on Redis's clock (0: none) */
	struct memo *memo;
};

#define FIELDS_IN 5  /* per item in a call, after its key (fleet.lua) */
#define FIELDS_OUT 5 /* per item in an answer */

/* What one item's demand is measured from, carried across rounds. */
struct memo {
	char key[KEY_MAX];     /* "" free */
	uint64_t admitted, refused;
	uint32_t misses;       /* the lease's count of callers that found no share */
	uint32_t misses_seen;  /* the same at the last round, measured or not */
	int64_t at;            /* CLOCK_MONOTONIC of the last measure */
	double flow;           /* requests asked for per ns at the last measure */
	double waiting;        /* callers held with no share at the last measure */
	double demand;         /* the last demand reported, smoothed */
};

struct fleet {
	struct sl_daemon *d;
	redisAsyncContext *ac;
	redisAsyncContext *sub; /* subscribed to the fleet's wake channel */
	int ready;             /* connected, authenticated, script loaded */
	char sha[64];
	char host[SL_PATH_MAX];
	int port;              /* 0: host is a unix socket path */
	char user[128], pass[256];
	char prefix[160];      /* "sluice:{FLEET}" */
	char machine[160];
	int64_t refresh_ns, timeout_ns;
	uint64_t ttl_ms;
	ev_timer tick, retry;
	ev_timer watch;        /* between rounds: callers newly held for want of share */
	int64_t backoff_ns;
	int in_flight;
	uint64_t call;         /* numbers each call, so a stale answer is known */
	int64_t sent_ns;
	int64_t connected_ns;  /* when the connection was asked for */
	int ack_due;           /* a call is scheduled at once (woken, or to report) */
	int woke, call_woke;   /* the next call, and the call in flight, are a wake's */
	int wake_later;        /* woken while a call was in flight: answer after it */
	int starved;           /* a rate item got less than half its demand: call sooner */
	int above;             /* some item holds more than an equal part would be with
	                        * one more machine: a machine short of room (perhaps
	                        * one just come) may be waiting for it */
	double spare;          /* calls beyond one a period that may be made now (at most
	                        * SPARE_MAX, one more each second): acks and early calls
	                        * never take a daemon past a period's calls and one a second */
	int64_t spare_at;
	int64_t off_ms;        /* Redis's clock - CLOCK_REALTIME at the last answer */
	int64_t rtt_ms;        /* that answer's round trip, rounded up (ms) */
	int have_off;
	struct memo *memo;
	size_t nmemo;          /* a power of two */
	size_t memo_used;
	struct item *items;
	size_t nitems;
	int64_t logged_ns;     /* rate-limited warnings */
	const char *logged_fmt;
};

static int64_t realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static void set_state(struct fleet *f, uint32_t state)
{
	struct sl_shm_header *h = f->d->shm.hdr;

	if (!h)
		return;
	if (state == SL_REDIS_DOWN && h->redis_state != SL_REDIS_DOWN)
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

/* --- memos: an open-addressing table by key, grown as items come --- */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static struct memo *memo_find(struct fleet *f, const char *key)
{
	for (;;) {
		size_t mask = f->nmemo - 1, i;

		if (f->nmemo) {
			for (i = hash_str(key) & mask;; i = (i + 1) & mask) {
				if (!f->memo[i].key[0])
					break;
				if (strcmp(f->memo[i].key, key) == 0)
					return &f->memo[i];
			}
			if ((f->memo_used + 1) * 2 <= f->nmemo) {
				snprintf(f->memo[i].key, sizeof(f->memo[i].key), "%s", key);
				f->memo_used++;
				return &f->memo[i];
			}
		}
		/* Grow: twice as many, keeping the memos of items seen in the last minute. */
		{
			size_t n = f->nmemo ? f->nmemo * 2 : 64;
			struct memo *m = calloc(n, sizeof(*m)), *old = f->memo;
			int64_t now = sl_clock_mono_ns();

			if (!m)
				return NULL;
			f->memo_used = 0;
			for (size_t j = 0; j < f->nmemo; j++) {
				size_t k;

				if (!old[j].key[0] || now - old[j].at > 60 * SL_NS_PER_S)
					continue;
				for (k = hash_str(old[j].key) & (n - 1); m[k].key[0]; k = (k + 1) & (n - 1))
					;
				m[k] = old[j];
				f->memo_used++;
			}
			free(old);
			f->memo = m;
			f->nmemo = n;
		}
	}
}

/* --- collecting a round --- */

static char kind_of(const struct sl_spec *s)
{
	switch (s->strategy) {
	case SL_STRAT_FIXED_WINDOW: return 'f';
	case SL_STRAT_SESSION_WINDOW: return 's';
	case SL_STRAT_SLIDING_WINDOW: return 'l';
	default: return 'r';
	}
}

/* Fill item `it` for the state st of section sec (index i), kind 'c' for its places
 * or its rate's kind otherwise, and measure what it is asked for. */
static void measure(struct fleet *f, struct item *it, const struct sl_section *sec,
                    const struct sl_state *st, int keyed, int64_t now)
{
	const struct sl_spec *s = &sec->spec;
	struct memo *m = memo_find(f, it->key);
	uint64_t admitted = st->admitted, refused = keyed ? 0 : st->refused;
	uint64_t queued = sl_limit_queued(s, st, now, sl_sane_ns(f->d->shm.hdr->wall_off_ns));
	double elapsed, flow, want, waiting;
	int fresh;

	it->memo = m;
	it->window_ns = s->window_ns;
	it->burst = s->burst ? s->burst : 1;
	/* A pause the destination asked of this machine, for the others to keep too
	 * (on Redis's clock as last seen; with none seen yet, not told).  Late rather
	 * than early: the offset was read a round trip after Redis's clock was, and
	 * both clocks count whole milliseconds. */
	it->pause_ms = it->kind != 'c' && f->have_off && s->signals && sl_sane_ns(st->pause.until_ns) > now
	               ? realtime_ms() + f->off_ms + f->rtt_ms + 2 +
	                     (sl_sane_ns(st->pause.until_ns) - now + SL_NS_PER_MS - 1) / SL_NS_PER_MS
	               : 0;
	if (!m) {
		it->demand = it->held = 0;
		return;
	}
	/* Requests asked for per ns, and callers held with no share, measured over a
	 * half period at least: a round sent at once to report a smaller share would
	 * otherwise measure nothing over a few microseconds and shrink the demand
	 * on noise.  Counters only grow; one that went back is a reset: no flow. */
	elapsed = (double)(now - m->at);
	fresh = !m->at || elapsed >= (double)f->refresh_ns / 2;
	if (fresh) {
		m->flow = m->at && admitted >= m->admitted && refused >= m->refused
		          ? (double)((admitted - m->admitted) + (refused - m->refused)) / elapsed : 0;
		/* Callers held for want of any share look again every SL_LEASE_RETRY_NS:
		 * how many there are, from how often they looked.  A machine given nothing
		 * admits nothing, and without this its demand would fade for good. */
		m->waiting = m->at ? (double)(uint32_t)(st->lease.misses - m->misses) * (double)SL_LEASE_RETRY_NS /
		                     elapsed : 0;
		m->misses = st->lease.misses;
		m->admitted = admitted;
		m->refused = refused;
		m->at = now;
	}
	flow = m->flow;
	waiting = m->waiting;
	/* Callers held on since the last round, however recent: the share binds. */
	if (st->lease.misses != m->misses_seen && m->at)
		waiting = SL_MAX(waiting, 1.0);
	m->misses_seen = st->lease.misses;
	if (it->kind == 'c') {
		uint32_t open = st->conc_open, waiting = st->conc_waiters;

		it->limit = s->concurrency;
		it->demand = (uint64_t)open + waiting + (waiting ? 1 : 0);
		it->held = SL_MAX((uint64_t)open, st->lease.flags & SL_LEASE_PLACES ? (uint64_t)st->lease.places : 0);
		return;
	}
	if (it->kind == 'r') {
		/* Per window: what went (and was refused), a tenth more and half a request
		 * over, and the backlog asked for within a round.  A machine using its
		 * whole share with callers still held, or holding callers it could not
		 * let go (no share, or a share too small for them when they looked), would
		 * use more than it shows: it asks for a fifth more and an equal part at
		 * least, at once, rather than grow a trickle over rounds - its clients may
		 * be few and waiting, so its queue says little of what they would send.
		 * Fair shares never give it more than an equal part while others want it. */
		double rate_now = flow * (double)s->window_ns;
		double backlog = (double)queued * (double)s->window_ns / (double)f->refresh_ns;
		double share = st->lease.flags & SL_LEASE_RATE ? (double)st->lease.amount / SCALE : 0;

		want = rate_now + backlog > 0 ? rate_now * 1.1 + backlog + 0.5 : 0;
		if (waiting > 0 || (queued > 0 && rate_now >= 0.9 * share))
			want = SL_MAX(rate_now * 1.2 + backlog + 1,
			              (double)s->amount / SL_MAX(st->lease.machines, SL_MAX(f->d->cfg->global.hosts, 1u)));
		sl_log_debug("fleet %s: asked %.1f/s, %" PRIu64 " queued, %.1f held on", it->key, flow * 1e9, queued,
		             waiting);
		/* Falling by 30% a period at most: a lull of a round is not a machine gone. */
		m->demand = SL_MAX(want, fresh ? m->demand * 0.7 : m->demand);
		it->limit = s->amount * SCALE;
		it->demand = (uint64_t)SL_MIN(m->demand * SCALE, (double)it->limit);
		it->held = st->lease.flags & SL_LEASE_RATE ? st->lease.amount : 0;
		return;
	}
	/* A window: what it would send before the round after next, beyond what its
	 * chunk has left; what went on an outage share is reported as held, for Redis
	 * to count.  Callers held for want of chunk would send more than that shows:
	 * half as much again, and at least an equal part of the window's pace (AMOUNT
	 * spread over the window) - a fixed window's AMOUNT may go at any time in it,
	 * but a chunk left unused is lost to the others until the window ends. */
	want = flow * 2.0 * (double)f->refresh_ns + (double)queued;
	if (waiting > 0)
		want = SL_MAX(want * 1.5 + 1, (double)s->amount * 2.0 * (double)f->refresh_ns /
		                              (double)SL_MAX(s->window_ns, (int64_t)1) /
		                              SL_MAX(st->lease.machines, SL_MAX(f->d->cfg->global.hosts, 1u)));
	else if (want > 0)
		want += 1;
	it->limit = s->amount;
	{
		const struct sl_lease *l = &st->lease;
		uint64_t left = (l->flags & SL_LEASE_CHUNK) && now < l->until_ns && l->amount > l->sched_used
		                ? l->amount - l->sched_used : 0;

		it->demand = want > (double)left ? (uint64_t)SL_MIN(want - (double)left, (double)s->amount) : 0;
		it->held = (l->flags & SL_LEASE_OUTAGE) ? l->rel_used : 0;
	}
}

static int add_item(struct fleet *f, size_t *n, char kind, uint32_t i, const struct sl_section *sec,
                    const struct sl_state *st, const struct sl_keyref *ref, const char *keyname,
                    int64_t now)
{
	struct item *it;

	if (*n >= MAX_ITEMS)
		return -1;
	it = &f->items[(*n)++];
	memset(it, 0, sizeof(*it));
	it->kind = kind;
	it->section = i;
	it->serial = sec->serial;
	if (ref)
		it->ref = *ref;
	snprintf(it->key, sizeof(it->key), "%s:i:%.*s%s%s:%c", f->prefix, SL_SECTION_NAME_MAX - 1,
	         sec->spec.name, keyname ? "/" : "", keyname ? keyname : "", kind == 'c' ? 'c' : 'r');
	measure(f, it, sec, st, keyname != NULL, now);
	return 0;
}

struct key_walk {
	struct fleet *f;
	size_t *n;
	int64_t now;
};

/* A key of a keyed fleet section, active lately: an item of the round. */
static int walk_key(struct sl_key *k, uint32_t slot, void *arg)
{
	struct key_walk *w = arg;
	struct sl_shm_header *h = w->f->d->shm.hdr;
	struct sl_section *sec = sl_shm_section(h, k->section);
	struct sl_keyref ref = {slot, k->serial};
	char name[SL_HOST_MAX + 64];

	if (!sec || sec->spec.scope != SL_SCOPE_FLEET ||
	    w->now - k->last_used_ns > (int64_t)(3 * w->f->ttl_ms) * SL_NS_PER_MS)
		return 0;
	sl_keyid_format(&k->id, name, sizeof(name));
	if (sec->spec.amount && add_item(w->f, w->n, kind_of(&sec->spec), k->section, sec, &k->state, &ref, name,
	                                 w->now) < 0)
		return 1;
	if (sec->spec.concurrency &&
	    add_item(w->f, w->n, 'c', k->section, sec, &k->state, &ref, name, w->now) < 0)
		return 1;
	return 0;
}

static size_t collect(struct fleet *f, int64_t now)
{
	struct sl_shm_header *h = f->d->shm.hdr;
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	int keyed = 0;
	size_t n = 0;

	for (uint32_t i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!sec->in_use || sec->spec.scope != SL_SCOPE_FLEET)
			continue;
		if (sec->spec.per != SL_PER_NONE) {
			keyed = 1;
			continue;
		}
		if (sec->spec.amount)
			add_item(f, &n, kind_of(&sec->spec), i, sec, &sec->state, NULL, NULL, now);
		if (sec->spec.concurrency)
			add_item(f, &n, 'c', i, sec, &sec->state, NULL, NULL, now);
	}
	if (keyed) {
		struct key_walk w = {f, &n, now};

		sl_keys_each(h, walk_key, &w);
	}
	return n;
}

/* The state an item lives in, under the lock: NULL when it went meanwhile. */
static struct sl_state *item_state(struct fleet *f, const struct item *it)
{
	struct sl_shm_header *h = f->d->shm.hdr;
	struct sl_section *sec = sl_shm_section(h, it->section);
	struct sl_key *k;

	if (!sec || !sec->in_use || sec->serial != it->serial)
		return NULL;
	if (!it->ref.serial)
		return &sec->state;
	k = sl_keys_ref(h, it->section, it->ref.slot, it->ref.serial);
	return k ? &k->state : NULL;
}

/* Write grant g for `it`, under the lock; waiters woken when places were added. */
static void write_grant(struct fleet *f, const struct item *it, const struct sl_grant *g, int64_t now)
{
	struct sl_state *st = item_state(f, it);

	if (st && sl_lease_write(st, g, now))
		sl_conc_wake(st);
}

/* Another machine's answer from the destination paused item `it` until end_ms
 * (Redis's clock; 0: none): this machine pauses too, until the same instant -
 * late rather than early, as a pause is what the destination asked for: Redis
 * read its clock (rnow, whole milliseconds) at most a round trip before `now`, so
 * the end is at most `now` + (end_ms - rnow) and a millisecond; under the lock. */
static void fleet_pause(struct fleet *f, const struct item *it, long long end_ms, long long rnow, int64_t now,
                        int64_t rtt)
{
	struct sl_section *sec = sl_shm_section(f->d->shm.hdr, it->section);
	struct sl_state *st;

	if (end_ms <= rnow || !sec || !(st = item_state(f, it)))
		return;
	(void)rtt;
	if (sl_pause_fleet(st, &sec->spec, now + (int64_t)(end_ms - rnow + 1) * SL_NS_PER_MS, now))
		sl_log_debug("fleet %s: paused %.1f s, as another machine was asked", it->key,
		             (double)(end_ms - rnow) / 1e3);
}

/* The rate share `grant` (thousandths per window) as a lease. */
static struct sl_grant rate_grant(const struct item *it, uint64_t grant, uint32_t flags)
{
	struct sl_grant g = {.flags = SL_LEASE_RATE | flags, .amount = grant};

	if (it->window_ns <= INT64_MAX / SCALE) {
		g.window_ns = it->window_ns * SCALE;
	} else {
		g.amount = grant / SCALE;
		g.window_ns = it->window_ns;
	}
	/* The machine's part of the section's burst, at least one. */
	g.burst = it->limit ? SL_MAX((uint64_t)1, (uint64_t)((unsigned __int128)it->burst * grant / it->limit)) : 1;
	return g;
}

/* --- while Redis cannot be reached --- */

/* Items that never had a lease get their part over `hosts`; a window's chunk that
 * ended is followed by the next window's part (windows placed on Redis's clock as
 * last seen).  Leases in hand stay as they are. */
static void outage_shares(struct fleet *f)
{
	struct sl_shm_header *h = f->d->shm.hdr;
	uint32_t hosts = SL_MAX(f->d->cfg->global.hosts, 1u);
	int64_t now = sl_clock_mono_ns(), rms = realtime_ms() + (f->have_off ? f->off_ms : 0);
	size_t n = collect(f, now);

	if (!n || sl_shm_lock(h, (int32_t)getpid(), SL_NS_PER_S) < 0)
		return;
	for (size_t j = 0; j < n; j++) {
		const struct item *it = &f->items[j];
		struct sl_state *st = item_state(f, it);
		struct sl_grant g = {0};

		if (!st)
			continue;
		/* This daemon is alive: what it holds stays usable while Redis is away. */
		sl_lease_extend(st, now + (int64_t)f->ttl_ms * SL_NS_PER_MS);
		if (it->kind == 'r') {
			if (st->lease.flags & SL_LEASE_RATE)
				continue;
			g = rate_grant(it, it->limit / hosts, SL_LEASE_OUTAGE);
		} else if (it->kind == 'c') {
			if (st->lease.flags & SL_LEASE_PLACES)
				continue;
			g = (struct sl_grant){.flags = SL_LEASE_PLACES | SL_LEASE_OUTAGE,
			                      .places = (uint32_t)(it->limit / hosts)};
		} else {
			int64_t wms = SL_MAX(it->window_ns / SL_NS_PER_MS, (int64_t)1), k = rms / wms;

			if ((st->lease.flags & SL_LEASE_CHUNK) && now < st->lease.until_ns)
				continue;
			/* A sliding window's part is halved: two parts in a row may fall in
			 * one span of the window. */
			g = (struct sl_grant){.flags = SL_LEASE_CHUNK | SL_LEASE_OUTAGE,
			                      .amount = it->limit / hosts / (it->kind == 'l' ? 2 : 1),
			                      .until_ns = now + ((k + 1) * wms - rms) * SL_NS_PER_MS,
			                      .chunk = (uint64_t)k};
		}
		g.valid_ns = now + (int64_t)f->ttl_ms * SL_NS_PER_MS;
		write_grant(f, it, &g, now);
	}
	sl_shm_unlock(h, (int32_t)getpid());
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

static void drop(struct fleet *f, const char *why)
{
	unsubscribe(f);
	if (f->ac) {
		redisAsyncContext *ac = f->ac;

		f->ac = NULL;
		ac->data = NULL;
		redisAsyncFree(ac); /* pending callbacks run with no reply */
	}
	f->ready = 0;
	f->in_flight = 0;
	if (f->d->shm.hdr && f->d->shm.hdr->redis_state != SL_REDIS_DOWN)
		sl_log_warnx("redis %s: %s; shaping on the leases in hand", f->host, why);
	set_state(f, SL_REDIS_DOWN);
	outage_shares(f);
	ev_timer_stop(f->d->loop, &f->retry); /* libev: never set an active watcher */
	ev_timer_set(&f->retry, (double)f->backoff_ns / 1e9, 0.);
	ev_timer_start(f->d->loop, &f->retry);
	f->backoff_ns = SL_MIN(f->backoff_ns * 2, (int64_t)BACKOFF_MAX_NS);
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
	double p = (double)f->refresh_ns / 1e9;

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

/* Whether the numbers could be fleet.lua's for the items asked about: a clock
 * after 2020, no grant above its item's limit, no pause past 400 days.
 * Clamping instead would hand a whole limit to whatever a broken or hostile
 * server said; one such number and nothing of the answer is used. */
static int plausible(const struct fleet *f, const redisReply *r)
{
	long long rnow = r->element[0]->integer;

	if (rnow < 1577836800000LL) /* 2020-01-01, in ms */
		return 0;
	for (size_t j = 0; j < f->nitems; j++) {
		redisReply **e = r->element + 2 + FIELDS_OUT * j;

		if ((unsigned long long)e[0]->integer > f->items[j].limit || e[1]->integer > (long long)UINT32_MAX ||
		    e[4]->integer > rnow + 34560000000LL) /* a pause past 400 days */
			return 0;
	}
	return 1;
}
static void subscribe(struct fleet *f);

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

static void on_leases(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fleet *f = ac->data;
	redisReply *r = reply;
	struct sl_shm_header *h;
	int64_t now = sl_clock_mono_ns(), rtt, rnow;
	int shrank = 0;

	if (!f || (uint64_t)(uintptr_t)priv != f->call || !f->in_flight)
		return; /* an answer to a call given up on */
	f->in_flight = 0;
	h = f->d->shm.hdr;
	if (!r)
		return; /* the connection went: the disconnect callback follows */
	if (r->type == REDIS_REPLY_ERROR) {
		if (r->str && strncmp(r->str, "NOSCRIPT", 8) == 0) {
			/* Redis restarted, or its scripts were flushed: load it again. */
			f->ready = 0;
			load_script(f);
			return;
		}
		warn(f, "redis %s: the lease call failed: %s", f->host, r->str ? r->str : "?");
		drop(f, "the lease call failed");
		return;
	}
	if (!valid_ints(r, 2 + FIELDS_OUT * f->nitems)) {
		warn(f, "redis %s: an answer that is not the lease script's (%s): leases kept", f->host,
		     r->type == REDIS_REPLY_ARRAY ? "wrong length or type" : "not an array");
		drop(f, "a server that answers so is no lease server"); /* leases kept, as in an outage */
		return;
	}
	if (!plausible(f, r)) {
		warn(f, "redis %s: an answer out of the lease script's range (%s): leases kept", f->host,
		     "a grant above its limit, or a clock before 2020");
		drop(f, "a server that answers so is no lease server");
		return;
	}
	rtt = now - f->sent_ns;
	rnow = (int64_t)r->element[0]->integer;
	f->off_ms = rnow - realtime_ms();
	f->rtt_ms = (rtt + SL_NS_PER_MS - 1) / SL_NS_PER_MS;
	f->have_off = 1;
	f->backoff_ns = BACKOFF_MIN_NS;
	set_state(f, SL_REDIS_UP);
	h->redis_answer_ns = now;
	if (sl_shm_lock(h, (int32_t)getpid(), SL_NS_PER_S) < 0) {
		warn(f, "segment %s: lock unavailable; leases of this answer dropped", f->d->shm_name, "");
		return;
	}
	h->redis_machines = 0;
	f->starved = 0;
	f->above = 0;
	for (size_t j = 0; j < f->nitems; j++) {
		const struct item *it = &f->items[j];
		redisReply **e = r->element + 2 + FIELDS_OUT * j;
		uint64_t grant = (uint64_t)e[0]->integer;
		uint32_t machines = (uint32_t)SL_MIN((long long)e[1]->integer, (long long)UINT32_MAX);
		struct sl_grant g;

		h->redis_machines = SL_MAX(h->redis_machines, machines);
		sl_log_debug("fleet %s: demand %" PRIu64 " held %" PRIu64 " granted %" PRIu64 " (%u machines)",
		             it->key, it->demand, it->held, grant, machines);
		if (it->kind == 'r') {
			grant = SL_MIN(grant, it->limit);
			g = rate_grant(it, grant, 0);
			/* Smaller by a hundredth of the limit: worth telling at once (Redis
			 * counts the larger until told, so a smaller change only waits). */
			shrank |= grant + SL_MAX(it->limit / 100, (uint64_t)1) <= it->held;
			f->starved |= grant * 2 < it->demand;
			f->above |= grant * (machines + 1ull) > it->limit;
		} else if (it->kind == 'c') {
			grant = SL_MIN(grant, it->limit);
			g = (struct sl_grant){.flags = SL_LEASE_PLACES, .places = (uint32_t)grant};
			shrank |= grant < it->held;
			f->above |= grant * (machines + 1ull) > it->limit;
		} else {
			int64_t end_ms = (int64_t)e[3]->integer;
			/* The chunk ends, on this machine's clock, where Redis's window does -
			 * early rather than late: by the call's round trip (Redis read its
			 * clock at most that long before `now`), a millisecond (its clock
			 * comes in whole ones) and another for the packet of a release made
			 * just before the end (t_fleet_windows once saw 301 of 300). */
			int64_t until = now - rtt + (end_ms - rnow - 2) * SL_NS_PER_MS;

			if (end_ms <= rnow || grant > it->limit) {
				fleet_pause(f, it, e[4]->integer, rnow, now, rtt);
				continue;
			}
			g = (struct sl_grant){.flags = SL_LEASE_CHUNK, .amount = grant, .until_ns = until,
			                      .chunk = (uint64_t)e[2]->integer};
		}
		g.machines = machines;
		/* Usable for one lease time from when the call left: Redis counts it from
		 * when the call came, which is later. */
		g.valid_ns = f->sent_ns + (int64_t)f->ttl_ms * SL_NS_PER_MS;
		write_grant(f, it, &g, now);
		fleet_pause(f, it, e[4]->integer, rnow, now, rtt);
	}
	sl_shm_unlock(h, (int32_t)getpid());
	/* Woken for a machine short of room, and a smaller share is in force now: say
	 * so at once, so the room goes to that machine at its next call rather than a
	 * period later.  (Unwoken, nobody waits for it: the next period tells.) */
	if (shrank && f->call_woke && !f->ack_due && take_spare(f)) {
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

static void send_round(struct fleet *f)
{
	size_t n = collect(f, sl_clock_mono_ns());
	size_t argc = 3 + 1 + n + 5 + (FIELDS_IN + 1) * n, a = 0;
	const char **argv = calloc(argc, sizeof(*argv));
	size_t *lens = calloc(argc, sizeof(*lens));
	char (*num)[32] = calloc(5 + FIELDS_IN * n, sizeof(*num)); /* the NUMs below */
	char epoch[KEY_MAX];
	size_t k = 0;

	if (!argv || !lens || !num) {
		free(argv);
		free(lens);
		free(num);
		return;
	}
	f->nitems = n;
	snprintf(epoch, sizeof(epoch), "%s:epoch", f->prefix);
#define ARG(s) (argv[a] = (s), lens[a] = strlen(argv[a]), a++)
#define NUM(fmt, v) (snprintf(num[k], sizeof(num[k]), fmt, v), ARG(num[k++]))
	ARG("EVALSHA");
	ARG(f->sha);
	NUM("%zu", 1 + n);
	ARG(epoch);
	for (size_t j = 0; j < n; j++)
		ARG(f->items[j].key);
	ARG(f->machine);
	NUM("%" PRIu64, f->ttl_ms);
	NUM("%" PRIu64, 2 * f->ttl_ms); /* settling after an empty start */
	NUM("%d", HEADROOM_PPM);
	NUM("%zu", n);
	for (size_t j = 0; j < n; j++) {
		/* FIELDS_IN + 1 values each: kind and what follows */
		const struct item *it = &f->items[j];
		static const char *const kinds[] = {"r", "c", "f", "s", "l"};
		const char *kind = it->kind == 'r' ? kinds[0] : it->kind == 'c' ? kinds[1]
		                 : it->kind == 'f' ? kinds[2] : it->kind == 's' ? kinds[3] : kinds[4];

		ARG(kind);
		NUM("%" PRIu64, it->limit);
		NUM("%" PRId64, (int64_t)SL_MAX(it->window_ns / SL_NS_PER_MS, (int64_t)1));
		NUM("%" PRIu64, it->demand);
		NUM("%" PRIu64, it->held);
		NUM("%" PRId64, it->pause_ms);
	}
#undef ARG
#undef NUM
	f->call++;
	if (redisAsyncCommandArgv(f->ac, on_leases, (void *)(uintptr_t)f->call, (int)a, argv, lens) == REDIS_OK) {
		f->in_flight = 1;
		f->sent_ns = sl_clock_mono_ns();
		f->d->shm.hdr->redis_calls++;
	}
	free(argv);
	free(lens);
	free(num);
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fleet *f = w->data;

	(void)loop;
	(void)revents;
	f->ack_due = 0;
	if (f->ready && f->in_flight && sl_clock_mono_ns() - f->sent_ns > f->timeout_ns) {
		drop(f, "no answer in time");
	} else if (f->ac && !f->ready && sl_clock_mono_ns() - f->connected_ns > f->timeout_ns) {
		drop(f, "not ready in time (connect, authentication or script load)");
	} else if (f->ready && !f->in_flight) {
		subscribe(f); /* again, if it went */
		f->call_woke = f->woke;
		f->woke = 0;
		send_round(f);
	} else if (!f->ac) {
		outage_shares(f); /* the leases that ended while Redis is away */
	}
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
		const struct item *it = &f->items[j];
		const struct sl_state *st;
		const struct memo *m;

		if (it->kind != 'r' || !(st = item_state(f, it)) || !(m = memo_find(f, it->key)))
			continue;
		if (__atomic_load_n(&st->lease.misses, __ATOMIC_RELAXED) == m->misses_seen ||
		    st->lease.amount * SL_MAX(h->redis_machines, 1u) * 10 >= it->limit * 9)
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
	    e[2]->type != REDIS_REPLY_STRING || strcmp(e[2]->str, f->machine) == 0)
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

	if (f->sub || !f->ready)
		return;
	ac = f->port ? redisAsyncConnect(f->host, f->port) : redisAsyncConnectUnix(f->host);
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
	if (f->pass[0]) {
		if (f->user[0])
			redisAsyncCommand(ac, NULL, NULL, "AUTH %s %s", f->user, f->pass);
		else
			redisAsyncCommand(ac, NULL, NULL, "AUTH %s", f->pass);
	}
	redisAsyncCommand(ac, on_wake, NULL, "SUBSCRIBE %s:wake", f->prefix);
}

static void on_script(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fleet *f = ac->data;
	redisReply *r = reply;

	(void)priv;
	if (!f || !r)
		return;
	if (r->type != REDIS_REPLY_STRING || r->len != 40) {
		warn(f, "redis %s: cannot load the lease script: %s", f->host,
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
		warn(f, "redis %s: authentication refused: %s", f->host, r->str ? r->str : "?");
		drop(f, "authentication refused");
	}
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
	sl_log_info("redis %s: connected (fleet %s, machine %s)", f->host, f->d->cfg->global.fleet[0] ?
	            f->d->cfg->global.fleet : "sluice", f->machine);
	if (f->pass[0]) {
		if (f->user[0])
			redisAsyncCommand(f->ac, on_auth, NULL, "AUTH %s %s", f->user, f->pass);
		else
			redisAsyncCommand(f->ac, on_auth, NULL, "AUTH %s", f->pass);
	}
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

static void connect_now(struct fleet *f)
{
	redisAsyncContext *ac = f->port ? redisAsyncConnect(f->host, f->port) : redisAsyncConnectUnix(f->host);

	set_state(f, f->d->shm.hdr && f->d->shm.hdr->redis_state == SL_REDIS_DOWN ? SL_REDIS_DOWN
	                                                                             : SL_REDIS_CONNECTING);
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

static int settings(struct fleet *f, const struct sl_config *cfg, const char *shm_name)
{
	const struct sl_global *g = &cfg->global;
	char hostname[128] = "";
	int rc;

	if (sl_endpoint_parse(g->redis, f->host, sizeof(f->host), &f->port) < 0)
		return -EINVAL;
	if (g->redis_auth[0] &&
	    (rc = read_auth(g->redis_auth, f->user, sizeof(f->user), f->pass, sizeof(f->pass))) < 0) {
		sl_log_warnx("redis_auth %s: %s", g->redis_auth, strerror(-rc));
		return rc;
	}
	/* A hash tag: every key of the fleet falls in one slot of a Redis Cluster. */
	snprintf(f->prefix, sizeof(f->prefix), "sluice:{%s}", g->fleet[0] ? g->fleet : "sluice");
	gethostname(hostname, sizeof(hostname) - 1);
	if (g->machine[0])
		snprintf(f->machine, sizeof(f->machine), "%s", g->machine);
	else
		snprintf(f->machine, sizeof(f->machine), "%s%s", hostname, shm_name);
	f->refresh_ns = g->refresh_ns;
	/* A lease outlives three missed renewals; an answer later than two periods (a
	 * second at least) is given up on. */
	f->ttl_ms = (uint64_t)(3 * g->refresh_ns / SL_NS_PER_MS + 250);
	f->timeout_ns = SL_MAX(2 * g->refresh_ns, SL_NS_PER_S);
	return 0;
}

static int needs_redis(const struct sl_config *cfg)
{
	for (unsigned i = 0; i < cfg->nsections; i++)
		if (cfg->sections[i].spec.scope == SL_SCOPE_FLEET)
			return 1;
	return 0;
}

int sl_fleet_start(struct sl_daemon *d)
{
	struct fleet *f;
	int rc;

	if (!needs_redis(d->cfg) || !d->cfg->global.redis[0]) {
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
	if ((rc = settings(f, d->cfg, d->shm_name)) < 0) {
		free(f->items);
		free(f);
		return rc;
	}
	srandom((unsigned)(getpid() ^ (uint32_t)sl_clock_mono_ns()));
	f->backoff_ns = BACKOFF_MIN_NS;
	f->spare_at = sl_clock_mono_ns();
	ev_timer_init(&f->tick, on_tick, 0., 0.);
	f->tick.data = f;
	ev_timer_init(&f->retry, on_retry, 0., 0.);
	f->retry.data = f;
	ev_timer_init(&f->watch, on_watch, 0., (double)f->refresh_ns / 5e9);
	f->watch.data = f;
	ev_timer_again(d->loop, &f->watch);
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
	unsubscribe(f);
	if (f->ac) {
		f->ac->data = NULL;
		redisAsyncFree(f->ac);
	}
	free(f->items);
	free(f->memo);
	free(f);
	d->fleet = NULL;
}

int sl_fleet_reload(struct sl_daemon *d, const struct sl_config *old)
{
	const struct sl_global *a = &old->global, *b = &d->cfg->global;

	if (d->fleet && needs_redis(d->cfg) && strcmp(a->redis, b->redis) == 0 &&
	    strcmp(a->redis_auth, b->redis_auth) == 0 && strcmp(a->fleet, b->fleet) == 0 &&
	    strcmp(a->machine, b->machine) == 0) {
		struct fleet *f = d->fleet;

		f->refresh_ns = b->refresh_ns;
		f->ttl_ms = (uint64_t)(3 * b->refresh_ns / SL_NS_PER_MS + 250);
		f->timeout_ns = SL_MAX(2 * b->refresh_ns, SL_NS_PER_S);
		return 0;
	}
	sl_fleet_stop(d);
	return sl_fleet_start(d);
}

/* --- sluice check --redis --- */

int sl_fleet_probe(const struct sl_config *cfg, int timeout_ms, FILE *out)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	struct fleet f = {0};
	struct sl_daemon d = {0};
	redisContext *c;
	redisReply *r;
	char version[64] = "?";
	int rc = -1;

	d.cfg = (struct sl_config *)cfg;
	f.d = &d;
	if (!cfg->global.redis[0]) {
		fprintf(out, "no redis in [sluice]: every section is this machine's alone\n");
		return needs_redis(cfg) ? -1 : 0;
	}
	if (settings(&f, cfg, cfg->global.shm_name) < 0) {
		fprintf(out, "redis %s: bad settings (redis_auth %s unreadable?)\n", cfg->global.redis,
		        cfg->global.redis_auth);
		return -1;
	}
	c = f.port ? redisConnectWithTimeout(f.host, f.port, tv) : redisConnectUnixWithTimeout(f.host, tv);
	if (!c || c->err) {
		fprintf(out, "redis %s: cannot connect: %s\n", cfg->global.redis, c ? c->errstr : "out of memory");
		goto out;
	}
	redisSetTimeout(c, tv);
	if (f.pass[0]) {
		r = f.user[0] ? redisCommand(c, "AUTH %s %s", f.user, f.pass) : redisCommand(c, "AUTH %s", f.pass);
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
	snprintf(f.sha, sizeof(f.sha), "%s", r->str);
	freeReplyObject(r);
	r = redisCommand(c, "EVALSHA %s 1 %s:epoch %s %" PRIu64 " 0 %d 0", f.sha, f.prefix, f.machine, f.ttl_ms,
	                 HEADROOM_PPM);
	if (!valid_ints(r, 2)) {
		fprintf(out, "redis %s (version %s): the lease script did not answer as it should\n",
		        cfg->global.redis, version);
		if (r)
			freeReplyObject(r);
		goto out;
	}
	fprintf(out, "redis %s: version %s, lease script loaded, its clock %" PRId64 " ms ahead of this "
	        "machine's; fleet %s, this machine %s\n", cfg->global.redis, version,
	        (int64_t)r->element[0]->integer - realtime_ms(), f.prefix, f.machine);
	freeReplyObject(r);
	rc = 0;
out:
	if (c)
		redisFree(c);
	return rc;
}
