/*
 * resolver.c - host names resolved by a thread of their own (resolver.h).
 *
 * One mutex guards the table and the stop flag; the thread holds it except
 * inside getaddrinfo().  Both the daemon and the thread hold a reference to the
 * resolver: whoever lets go last frees it, so the daemon never waits for a
 * lookup the name servers are sitting on.
 */
#include "resolver.h"
#include "sluice/common.h"
#include "sluice/clock.h"
#include "sluice/match.h"
#include "sluice/redisnode.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define RETRY_NS (1000000000LL) /* a name that failed: asked again no sooner */

struct name {
	char host[SL_REDIS_HOST_MAX]; /* "" free */
	char addr[64];
	char why[128];
	int state;        /* 0 not yet resolved, 1 addr holds, -1 why says */
	int want;         /* resolve again as soon as the thread can */
	int64_t done_ns;  /* when it was last resolved (CLOCK_MONOTONIC) */
	int64_t used_ns;  /* when the daemon last asked for it */
};

struct sl_resolver {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	int refs; /* the daemon's and the thread's */
	struct name names[SL_RESOLVE_NAMES];
};

static void put(struct sl_resolver *r)
{
	int last = --r->refs == 0;

	pthread_mutex_unlock(&r->mu);
	if (last) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		free(r);
	}
}

/* The next name to resolve (-1: none now): one asked for, or one in use whose
 * answer is old; a name that failed waits RETRY_NS. */
static int next_name(const struct sl_resolver *r, int64_t now)
{
	for (int i = 0; i < SL_RESOLVE_NAMES; i++) {
		const struct name *n = &r->names[i];

		if (!n->host[0])
			continue;
		if (n->state == 0)
			return i;
		if (n->state < 0 && now - n->done_ns < RETRY_NS)
			continue;
		if (n->want || (now - n->done_ns >= SL_RESOLVE_REFRESH_NS && now - n->used_ns < 2 * SL_RESOLVE_REFRESH_NS))
			return i;
	}
	return -1;
}

/* host's first address, as getaddrinfo orders them; 0, or -1 with why. */
static int lookup(const char *host, char *addr, size_t len, char *why, size_t whylen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	int rc = getaddrinfo(host, NULL, &hints, &ai);
	const void *a;

	if (rc != 0) {
		snprintf(why, whylen, "%s: %s", host, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return -1;
	}
	a = ai->ai_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr
	                              : (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr;
	rc = inet_ntop(ai->ai_family, a, addr, (socklen_t)len) ? 0 : -1;
	if (rc < 0)
		snprintf(why, whylen, "%s: an address that cannot be written", host);
	freeaddrinfo(ai);
	return rc;
}

static void *run(void *arg)
{
	struct sl_resolver *r = arg;

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		int i = next_name(r, sl_clock_mono_ns());
		char host[SL_REDIS_HOST_MAX], addr[64], why[128];
		int rc;

		if (i < 0) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += 1; /* refreshes come due while nobody asks */
			pthread_cond_timedwait(&r->cv, &r->mu, &ts);
			continue;
		}
		snprintf(host, sizeof(host), "%s", r->names[i].host);
		r->names[i].want = 0;
		pthread_mutex_unlock(&r->mu);
		rc = lookup(host, addr, sizeof(addr), why, sizeof(why));
		pthread_mutex_lock(&r->mu);
		if (strcmp(r->names[i].host, host) != 0)
			continue; /* forgotten meanwhile */
		r->names[i].done_ns = sl_clock_mono_ns();
		if (rc == 0) {
			/* An answer that failed after one that held keeps the address: a name
			 * server's hiccup is no reason to forget where Redis is. */
			snprintf(r->names[i].addr, sizeof(r->names[i].addr), "%s", addr);
			r->names[i].state = 1;
		} else {
			snprintf(r->names[i].why, sizeof(r->names[i].why), "%s", why);
			if (r->names[i].state != 1)
				r->names[i].state = -1;
		}
	}
	put(r);
	return NULL;
}

struct sl_resolver *sl_resolver_new(void)
{
	struct sl_resolver *r = calloc(1, sizeof(*r));
	pthread_condattr_t ca;
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	int rc;

	if (!r)
		return NULL;
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	r->refs = 2;
	/* Signals stay the loop's: the thread starts with all of them blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, run, r);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		free(r);
		errno = rc;
		return NULL;
	}
	return r;
}

/* host's entry; made when `make`, in a free one or the one asked for longest
 * ago (a lookup under way for it finds its host changed and drops its answer). */
static struct name *find(struct sl_resolver *r, const char *host, int make)
{
	struct name *free_one = NULL;

	for (int i = 0; i < SL_RESOLVE_NAMES; i++) {
		if (strcmp(r->names[i].host, host) == 0)
			return &r->names[i];
		if (!free_one || (free_one->host[0] && (!r->names[i].host[0] || r->names[i].used_ns < free_one->used_ns)))
			free_one = &r->names[i];
	}
	if (!make)
		return NULL;
	memset(free_one, 0, sizeof(*free_one));
	snprintf(free_one->host, sizeof(free_one->host), "%s", host);
	return free_one;
}

int sl_resolver_get(struct sl_resolver *r, const char *host, char *addr, size_t len, char *why, size_t whylen)
{
	struct name *n;
	int rc;

	if (sl_is_numeric_host(host) || !r) {
		snprintf(addr, len, "%s", host);
		return 1;
	}
	if (strlen(host) >= SL_REDIS_HOST_MAX) {
		snprintf(why, whylen, "a host name too long");
		return -1;
	}
	pthread_mutex_lock(&r->mu);
	n = find(r, host, 1);
	n->used_ns = sl_clock_mono_ns();
	rc = n->state;
	if (rc > 0)
		snprintf(addr, len, "%s", n->addr);
	else if (rc < 0)
		snprintf(why, whylen, "%s", n->why);
	else
		snprintf(why, whylen, "%s: resolving", host);
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void sl_resolver_stale(struct sl_resolver *r, const char *host)
{
	struct name *n;

	if (!r || sl_is_numeric_host(host))
		return;
	pthread_mutex_lock(&r->mu);
	if ((n = find(r, host, 0))) {
		n->want = 1;
		pthread_cond_signal(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
}

void sl_resolver_free(struct sl_resolver *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_signal(&r->cv);
	put(r);
}
