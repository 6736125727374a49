/*
 * fleet_claims.c - claims (docs/design.md, "Claims"; [sluice] claims = on): for
 * grid items served by claims, the callers that asked for a slot are read from
 * the segment and as many slots of free ranks are claimed through fleet.lua's
 * claim call, one call an item in flight; the slots that come join the lease.
 *
 * Woken, not looking: a caller that asks bumps the segment's claims_bell and
 * wakes it (lease.c, sl_lease_claims_ring); a thread of this daemon sleeps on
 * that word and hands each ring to the loop (ev_async), which then looks; once
 * claims join a lease the loop bumps claims_seq, on which the callers waiting
 * sleep.  Looking every 10 ms in each daemon and every 20 ms in each waiting
 * caller took more than two cores had at 200 daemons (docs/design.md, "Claims").
 * The thread touches the segment only through the futex call (which a segment
 * unmapped meanwhile fails with EFAULT, harmlessly): the loop reads the bell,
 * and tells it the word and the value to sleep on.
 */
#include "fleet-internal.h"
#include "sluice/sys.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>

/* How far ahead of Redis's clock a claimed slot starts, at least: a caller that
 * cannot be woken looks again within SL_LEASE_CLAIM_LOOK_NS (lease.h) and must
 * find its claim before it starts; the answer takes a round trip more. */
#define CLAIM_LEAD_NS (25 * SL_NS_PER_MS)
#define CLAIMS_IDLE_S 0.1   /* the look with no ring (a ring lost, a claim call
                             * that could not be made at the ring) */
#define CLAIMS_MAX 16       /* slots one call claims at most */
#define BELL_NAP_NS (2 * SL_NS_PER_MS) /* after each ring handed on: rings reach the
                             * loop 500 times a second at most, whatever a
                             * process scribbling on the bell does */
#define BELL_WAIT_NS (200 * SL_NS_PER_MS) /* a sleep's bound: the word is read again */

static void on_claims_look(struct ev_loop *loop, ev_timer *w, int revents);

struct claim_call {
	struct fleet *f;
	struct sl_fleet_item it; /* the item as collected: its state is found again */
	uint32_t asked;
	int64_t interval;        /* the grid's, when asked */
};

static void on_claims(redisAsyncContext *ac, void *reply, void *priv)
{
	struct claim_call *c = priv;
	struct fleet *f = ac->data;
	redisReply *r = reply;
	struct sl_fleet_memo *m = f ? fleet_memo_find(f, c->it.key) : NULL;
	int64_t k[CLAIMS_MAX], now = sl_clock_mono_ns(), room_ns = -1;
	uint32_t n = 0;

	if (m)
		m->claim_sent_ns = 0;
	if (!f || !r || r->type != REDIS_REPLY_ARRAY || r->elements < SL_FLEET_HEAD_OUT) {
		free(c);
		return;
	}
	/* None, and why: the slots within the script's horizon are all claimed, and
	 * room comes in -x - 1 microseconds (fleet.lua). */
	if (r->elements == SL_FLEET_HEAD_OUT + 1 && r->element[SL_FLEET_HEAD_OUT]->type == REDIS_REPLY_INTEGER &&
	    r->element[SL_FLEET_HEAD_OUT]->integer < 0)
		room_ns = SL_MIN(-(r->element[SL_FLEET_HEAD_OUT]->integer + 1), (long long)SL_NS_PER_S / 1000) * 1000;
	/* Otherwise each a slot number, ascending, ahead of Redis's clock: anything
	 * else (a server that is not the script's) is not used. */
	for (size_t i = SL_FLEET_HEAD_OUT; room_ns < 0 && i < r->elements && n < CLAIMS_MAX; i++) {
		if (r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer < 0 ||
		    (n && r->element[i]->integer <= k[n - 1])) {
			free(c);
			return;
		}
		k[n++] = r->element[i]->integer;
	}
	if (m) {
		/* Fewer than asked: no free rank within a round for the rest - its part
		 * must grow.  None at all: asking again before a round has passed would
		 * only be refused again (fifty single-caller machines called 10 times
		 * a second each) - unless the script said when its horizon has room
		 * again: a queue of claims to the horizon (demand moving among 200
		 * machines, four times the rate) left every machine quiet for a round
		 * while it drained, and the slots after it, before the lead, were
		 * claimed by nobody. */
		if (n < c->asked)
			m->claims_short += c->asked - n;
		if (!n)
			m->claims_quiet_until = now + (room_ns >= 0 ? SL_MIN(room_ns, f->conf.refresh_ns) : f->conf.refresh_ns);
		/* Given, but further ahead than the lead and two of the machine's own
		 * slots at its part: its callers queue behind the free ranks its part
		 * leaves - a machine stepping up beside two holding ranks sat at 21-24/s
		 * of its 33, its part read from that flow.  (Any claim a while ahead
		 * counted so made the light machine beside two busy ones ask too much:
		 * 90% of the fleet's rate.) */
		else if (f->have_origin && c->it.held &&
		         f->grid_origin + (__int128)k[0] * c->interval - now >
		                 CLAIM_LEAD_NS + f->rtt_ms * SL_NS_PER_MS +
		                         2 * (__int128)c->it.window_ns * SL_FLEET_SCALE / (__int128)c->it.held)
			m->claims_short++;
	}
	/* Even with none: the answer came (claims_got_ns), so a caller that asked
	 * before it may ask again (lease.c, claim_or). */
	if (sl_shm_lock(f->d->shm.hdr, f->d->shm.self, SL_NS_PER_S) == 0) {
		struct sl_state *st = fleet_item_state(f, &c->it);

		if (st)
			sl_lease_claims_add(st, k, n, now);
		if (st && n) {
			const struct sl_grid *g = &sl_state_more(st)->lease.grid;

			sl_log_debug("fleet %s: %u claims came, the first %.1f ms ahead, %u held", c->it.key, n,
			             (double)(g->origin_ns + (__int128)k[0] * g->interval_ns - now) / 1e6,
			             sl_state_more(st)->lease.nclaims);
		}
		sl_shm_unlock(f->d->shm.hdr, f->d->shm.self);
		/* The callers waiting for one sleep on claims_seq (lease.h). */
		if (st && n)
			sl_lease_claims_came(f->d->shm.hdr);
	}
	free(c);
	/* Asks made while this call was out (rung, but skipped: one call an item
	 * in flight) are claimed now. */
	if (f && f->d->cfg->global.claims)
		on_claims_look(f->d->loop, &f->claims, 0);
}

/* Claim slots for the callers that asked since the last look, one call an item,
 * one call in flight for each. */
static void on_claims_look(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fleet *f = w->data;
	struct sl_shm_header *h = f->d->shm.hdr;
	int64_t now = sl_clock_mono_ns();

	(void)loop;
	(void)revents;
	if (!f->d->cfg->global.claims)
		return;
	/* The value the bell thread sleeps on from now: rings after it are asks
	 * this look may not see, and wake it again. */
	atomic_store_explicit(&f->bell_word, &h->claims_bell, memory_order_relaxed);
	atomic_store_explicit(&f->bell_seen, atomic_load_explicit((_Atomic uint32_t *)&h->claims_bell,
	                                                          memory_order_acquire), memory_order_release);
	if (!f->ready || !f->ac)
		return;
	for (size_t j = 0; j < f->nitems; j++) {
		const struct sl_fleet_item *it = &f->items[j];
		struct sl_fleet_memo *m;
		struct sl_state *st;
		uint32_t want = 0;
		int64_t interval = 0;
		struct claim_call *c;
		char iv[24], n[16], lead[24], ttl[24], *argv[15];
		size_t lens[15];
		char gkey[SL_FLEET_KEY_MAX + 8], ckey[SL_FLEET_KEY_MAX + 16], cur[SL_FLEET_KEY_MAX + 8];

		/* One call an item in flight - or given up after the time a lease call
		 * is given up: a call on a connection dropped meanwhile (a hung master
		 * left for the promoted replica) is answered with no reply and no
		 * fleet to tell, and was in flight for good: after a Sentinel
		 * failover no claim was asked for again (make chaos). */
		if (it->kind != 'r' || !it->grid || !it->claims || !(m = fleet_memo_find(f, it->key)) ||
		    (m->claim_sent_ns && now - m->claim_sent_ns < f->conf.timeout_ns) ||
		    now < m->claims_quiet_until)
			continue;
		if (sl_shm_lock(h, f->d->shm.self, SL_NS_PER_S) < 0)
			return;
		if ((st = fleet_item_state(f, it))) {
			const struct sl_lease *l = &sl_state_more(st)->lease;

			interval = l->grid.interval_ns;
			if (interval > 0 && (l->flags & SL_LEASE_CLAIMING) && now < l->valid_ns)
				want = sl_lease_claims_wanted(st, now);
		}
		sl_shm_unlock(h, f->d->shm.self);
		if (!want || !(c = malloc(sizeof(*c))))
			continue;
		c->f = f;
		c->it = *it;
		c->asked = SL_MIN(want, (uint32_t)CLAIMS_MAX);
		c->interval = interval;
		snprintf(gkey, sizeof(gkey), "%s:grid", it->key);
		snprintf(ckey, sizeof(ckey), "%s:grid:claimed", it->key);
		snprintf(cur, sizeof(cur), "%s:cursor", it->key);
		snprintf(iv, sizeof(iv), "%" PRId64, interval);
		snprintf(n, sizeof(n), "%u", SL_MIN(want, (uint32_t)CLAIMS_MAX));
		snprintf(lead, sizeof(lead), "%" PRId64, (int64_t)(CLAIM_LEAD_NS + f->rtt_ms * SL_NS_PER_MS) / 1000);
		snprintf(ttl, sizeof(ttl), "%" PRIu64, f->conf.ttl_ms);
		{
			const char *args[] = {"EVALSHA", f->sha, "4", f->epoch, gkey, ckey, cur, f->conf.machine,
			                      ttl, "0", "0", "claim", iv, n, lead};

			for (size_t i = 0; i < SL_ARRAY_LEN(args); i++) {
				argv[i] = (char *)args[i];
				lens[i] = strlen(args[i]);
			}
			if (redisAsyncCommandArgv(f->ac, on_claims, c, (int)SL_ARRAY_LEN(args), (const char **)argv, lens) !=
			    REDIS_OK) {
				free(c);
				continue;
			}
		}
		m->claim_sent_ns = now;
		h->redis_calls++;
		sl_log_debug("fleet %s: %u claimed for callers waiting", it->key, SL_MIN(want, (uint32_t)CLAIMS_MAX));
	}
	ev_timer_again(f->d->loop, &f->claims);
}

static void on_bell(struct ev_loop *loop, ev_async *w, int revents)
{
	struct fleet *f = w->data;

	(void)revents;
	on_claims_look(loop, &f->claims, 0);
}

/* The bell thread: sleeps on the word the loop named, with the value it last
 * read; returned for a ring (woken, or the value moved before the sleep), it
 * hands it on and naps.  Every signal is blocked on it (sl_fleet_start's
 * caller's mask is the loop's, which takes them). */
static void *bell_run(void *arg)
{
	struct fleet *f = arg;

	while (!atomic_load_explicit(&f->bell_stop, memory_order_acquire)) {
		uint32_t *word = atomic_load_explicit(&f->bell_word, memory_order_relaxed);
		uint32_t seen = atomic_load_explicit(&f->bell_seen, memory_order_acquire);
		struct timespec ts = {.tv_sec = 0, .tv_nsec = BELL_WAIT_NS};
		long rc;

		if (!word) {
			nanosleep(&ts, NULL);
			continue;
		}
		rc = sl_sys(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
		if (rc == -ETIMEDOUT || rc == -EINTR || atomic_load_explicit(&f->bell_stop, memory_order_acquire))
			continue;
		ev_async_send(f->d->loop, &f->bell);
		ts.tv_nsec = BELL_NAP_NS;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void bell_stop(struct fleet *f)
{
	uint32_t *word = atomic_load_explicit(&f->bell_word, memory_order_relaxed);

	if (!f->bell_up)
		return;
	atomic_store_explicit(&f->bell_stop, 1, memory_order_release);
	if (word && f->d->shm.hdr && word == &f->d->shm.hdr->claims_bell)
		sl_sys(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	pthread_join(f->bell_thread, NULL);
	f->bell_up = 0;
	ev_async_stop(f->d->loop, &f->bell);
}

/* The look and the bell run only with claims = on: a fleet without them pays
 * no wake-up and no thread for them. */
void fleet_claims_timer(struct fleet *f)
{
	if (!f->d->cfg->global.claims) {
		ev_timer_stop(f->d->loop, &f->claims);
		bell_stop(f);
		return;
	}
	if (!ev_is_active(&f->claims))
		ev_timer_again(f->d->loop, &f->claims);
	if (!f->bell_up) {
		sigset_t all, old;
		int rc;

		ev_async_start(f->d->loop, &f->bell);
		atomic_store(&f->bell_stop, 0);
		atomic_store(&f->bell_word, NULL);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(&f->bell_thread, NULL, bell_run, f);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc != 0) {
			/* The look on the timer alone: callers wait longer for claims. */
			sl_log_warnx("fleet: no thread for claims' rings (%s): looking every %.0f ms", strerror(rc),
			             CLAIMS_IDLE_S * 1e3);
			ev_async_stop(f->d->loop, &f->bell);
		} else {
			f->bell_up = 1;
		}
	}
}

void fleet_claims_init(struct fleet *f)
{
	ev_timer_init(&f->claims, on_claims_look, 0., CLAIMS_IDLE_S);
	f->claims.data = f;
	ev_async_init(&f->bell, on_bell);
	f->bell.data = f;
	f->bell_up = 0;
	fleet_claims_timer(f);
}

void fleet_claims_stop(struct fleet *f)
{
	ev_timer_stop(f->d->loop, &f->claims);
	bell_stop(f);
}
