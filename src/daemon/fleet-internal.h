/*
 * fleet-internal.h - what fleet.c (the connection to Redis, its calls and
 * answers) and fleet_round.c (the items of a round, collected from the segment,
 * and what is written back) share: the fleet's state, and the round's parts.
 */
#ifndef SLUICE_FLEET_INTERNAL_H
#define SLUICE_FLEET_INTERNAL_H

#include "fleet.h"
#include "fleet_conf.h"
#include "fleet_find.h"
#include "resolver.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/fleetpolicy.h"
#include "sluice/keys.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/log.h"
#include "sluice/pause.h"
#include "sluice/redisnode.h"
#include "sluice/shm.h"
#include "sluice/stats.h"
#include "sluice/strategy.h"
#include "sluice/units.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_ITEMS 4096       /* items renewed in one call; more wait for the next */
#define BACKOFF_MIN_NS (100 * SL_NS_PER_MS)
#define BACKOFF_MAX_NS (2 * SL_NS_PER_S)
#define SPARE_MAX 5.0
#define DEAD_AFTER 4 /* timeouts unanswered before a live connection is given up */
#define RESOLVE_POLL_S 0.02 /* connect_now looks for a name's address this often */

struct fleet {
	struct sl_daemon *d;
	redisAsyncContext *ac;
	redisAsyncContext *sub; /* subscribed to the fleet's wake channel */
	redisAsyncContext *ask; /* a Cluster node an ASK sent the last call to */
	/* Sentinel or Cluster (conf.way): the master is found before each connection
	 * (fleet_find.c) and forgotten when it is lost. */
	struct sl_fleet_find *find;
	struct sl_resolver *names; /* host names, resolved off the loop (resolver.h) */
	int64_t resolving_ns;  /* connect_now waits for conf.host's address since */
	char name_why[200];    /* why conf.host has no address, as last logged */
	int have_master;       /* conf.host and conf.port name the master to use */
	unsigned tryagain;     /* TRYAGAIN answers in a row (the slot half moved) */
	char run_id[41];       /* the run id of the master last used: "" not known */
	char in_use[SL_PATH_MAX + 8]; /* "HOST:PORT" the leases come from, for stat */
	char label[SL_PATH_MAX + 8];  /* here(): the Redis in use, for the log */
	int64_t in_use_ms;     /* since when (CLOCK_REALTIME, ms); 0 none yet */
	/* The last round's call, kept for a Cluster's ASK (sent again as EVAL). */
	const char **argv;
	size_t *lens;
	char (*num)[32];
	char (*pkeys)[SL_FLEET_KEY_MAX + 8]; /* each item's pause keys, expiry sets, totals, grids */
	char (*runs)[SL_GRID_RUNS * 10 + 2]; /* each item's runs of ranks held */
	size_t argc;
	char epoch[SL_FLEET_KEY_MAX]; /* the epoch key's name */
	int ready;             /* connected, authenticated, script loaded */
	int tcp_up;            /* the connection in f->ac is made (on_connect said so) */
	int late;              /* Redis, reached, answered late: no outage shares (the
	                        * leases lapse) until an answer comes, whatever fails
	                        * meanwhile */
	char sha[64];
	struct sl_fleet_conf conf; /* where Redis is, who we are to it, the periods */
	ev_timer tick, retry;
	ev_timer watch;        /* between rounds: callers newly held for want of share */
	ev_timer claims;       /* callers on items served by claims asking for slots:
	                        * the look with no ring (fleet_claims.c) */
	ev_async bell;         /* a ring of the segment's claims_bell, from the thread */
	pthread_t bell_thread;
	int bell_up;           /* the thread runs */
	_Atomic int bell_stop;
	_Atomic(uint32_t *) bell_word;  /* the word it sleeps on (the segment's bell) */
	_Atomic uint32_t bell_seen;     /* ... and the value the loop last read there */
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
	int have_origin;
	int64_t grid_origin;   /* Redis's time 0 on CLOCK_MONOTONIC (sl_fleet_grid_origin) */
	struct sl_fleet_memo *memo;
	size_t nmemo;          /* a power of two */
	size_t memo_used;
	struct sl_fleet_item *items;
	size_t nitems;
	int64_t logged_ns;     /* rate-limited warnings */
	const char *logged_fmt;
};

/* fleet_round.c */
int64_t fleet_realtime_ms(void);
/* The memo of the item named `key`, made when new (an open-addressing table,
 * grown as items come); NULL when out of memory. */
struct sl_fleet_memo *fleet_memo_find(struct fleet *f, const char *key);
/* This round's items into f->items, each measured (demand, holdings): how many. */
size_t fleet_collect(struct fleet *f, int64_t now);
/* The state an item lives in, under the lock: NULL when it went meanwhile. */
struct sl_state *fleet_item_state(struct fleet *f, const struct sl_fleet_item *it);
/* Write grant g for `it`, under the lock; waiters woken when places were added. */
void fleet_write_grant(struct fleet *f, const struct sl_fleet_item *it, const struct sl_grant *g, int64_t now);
/* Another machine's pause of `it` until end_ms (Redis's clock) taken here too. */
void fleet_pause(struct fleet *f, const struct sl_fleet_item *it, long long end_ms, long long rnow, int64_t now,
                 int64_t rtt);
/* While Redis cannot be reached: the items that never had a lease get their part. */
void fleet_outage_shares(struct fleet *f);

/* fleet_claims.c: the look for callers asking for claims, started or stopped
 * as [sluice] claims says (at start and at each reload). */
void fleet_claims_init(struct fleet *f);
void fleet_claims_timer(struct fleet *f);
void fleet_claims_stop(struct fleet *f);

#endif
