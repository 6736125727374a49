/*
 * poll, ppoll, select and pselect while connections are held: a socket whose first
 * write waits for its release does not look writable, and the wait is cut short to
 * wake the program when the release is due, when it does.  With no connection held
 * in the process (the usual case) each hook is one load and the real call.
 */
#include "fdtab.h"
#include "held.h"
#include "record.h"
#include "sluice/clock.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/select.h>
#include <sys/syscall.h>

#define MAX_TRACKED_POLLFDS 1024 /* larger sets pass through unmasked (stack use) */
#define NS_FOREVER INT64_MAX

/* Nanoseconds to wait until `until` (NS_FOREVER: -1).  The waits below are made
 * with nanosecond timeouts (ppoll, pselect) even for poll and select: a wait
 * rounded up to the millisecond would make every deferred release that much late,
 * and in a backlog the lateness adds up. */
static int64_t ns_until(int64_t until, int64_t now)
{
	if (until == NS_FOREVER)
		return -1;
	return until <= now ? 0 : until - now;
}

static struct timespec ts_of(int64_t ns)
{
	return (struct timespec){.tv_sec = ns / SL_NS_PER_S, .tv_nsec = ns % SL_NS_PER_S};
}

/* ns rounded up to milliseconds (-1: for ever), for a poll with no ppoll. */
static int ms_of(int64_t ns)
{
	if (ns < 0)
		return -1;
	return (int)SL_MIN((ns + SL_NS_PER_MS - 1) / SL_NS_PER_MS, (int64_t)INT32_MAX);
}

/* The poll family's one loop.  `deadline` is absolute (NS_FOREVER: none); `real`
 * waits for at most `ns` nanoseconds (-1: for ever). */
static int poll_held(struct pollfd *fds, nfds_t n, int64_t deadline,
                     int (*real)(struct pollfd *, nfds_t, int64_t, void *), void *ctx)
{
	/* Sized by the caller's set (at most MAX_TRACKED_POLLFDS): a host thread's
	 * stack may be small. */
	unsigned char masked[n ? n : 1]; /* 1: POLLOUT taken out; 2: whole fd hidden */
	int64_t due[n ? n : 1];
	int hidden_fd[n ? n : 1];

	for (;;) {
		int64_t now = sl_clock_mono_ns(), earliest = NS_FOREVER;
		int nmasked = 0, rc, ready = 0;

		for (nfds_t i = 0; i < n; i++) {
			int deferred;

			masked[i] = 0;
			if (fds[i].fd < 0 || !sl_fdtab_get(fds[i].fd))
				continue;
			due[i] = sl_held_due(fds[i].fd, &deferred);
			/* A deferred connect's socket is not connected yet and the kernel
			 * would report POLLHUP whatever is asked: hidden whole (a negative
			 * fd is skipped by the kernel) until the connect is made. */
			if (deferred) {
				masked[i] = 2;
				hidden_fd[i] = fds[i].fd;
				fds[i].fd = -1;
				nmasked++;
				earliest = SL_MIN(earliest, due[i]);
				continue;
			}
			if (!(fds[i].events & POLLOUT))
				continue;
			if (due[i] <= now)
				continue; /* not waiting, or due: the write decides */
			masked[i] = 1;
			nmasked++;
			fds[i].events &= (short)~POLLOUT;
			earliest = SL_MIN(earliest, due[i]);
		}
		rc = real(fds, n, ns_until(SL_MIN(deadline, earliest), now), ctx);
		for (nfds_t i = 0; i < n; i++) {
			if (masked[i] == 1)
				fds[i].events |= POLLOUT;
			else if (masked[i] == 2)
				fds[i].fd = hidden_fd[i];
		}
		if (rc != 0 || nmasked == 0)
			return rc;
		now = sl_clock_mono_ns();
		for (nfds_t i = 0; i < n; i++) {
			if (masked[i] == 1 && due[i] <= now) {
				fds[i].revents = POLLOUT;
				ready++;
			}
		}
		if (ready || now >= deadline)
			return ready;
	}
}

static int call_poll(struct pollfd *fds, nfds_t n, int64_t ns, void *ctx)
{
	int (*real)(struct pollfd *, nfds_t, int) = ctx;
	struct timespec ts = ts_of(ns);

	if (sl_real.ppoll)
		return sl_real.ppoll(fds, n, ns < 0 ? NULL : &ts, NULL); /* poll, to the ns */
	return real(fds, n, ms_of(ns));
}

SL_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	int (*real)(struct pollfd *, nfds_t, int) = SL_REAL(poll, poll);

	if (sl_unlikely(!real)) {
		errno = ENOSYS;
		return -1;
	}
	if (sl_likely(atomic_load_explicit(&sl_records_active, memory_order_relaxed) == 0) ||
	    n > MAX_TRACKED_POLLFDS)
		return real(fds, n, timeout);
	return poll_held(fds, n,
	                 timeout < 0 ? NS_FOREVER : sl_clock_mono_ns() + timeout * SL_NS_PER_MS,
	                 call_poll, (void *)real);
}

struct ppoll_ctx {
	int (*real)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	const sigset_t *mask;
};

static int call_ppoll(struct pollfd *fds, nfds_t n, int64_t ns, void *arg)
{
	struct ppoll_ctx *c = arg;
	struct timespec ts = ts_of(ns);

	return c->real(fds, n, ns < 0 ? NULL : &ts, c->mask);
}

static int64_t deadline_of(const struct timespec *ts)
{
	if (!ts)
		return NS_FOREVER;
	return sl_clock_mono_ns() + ts->tv_sec * SL_NS_PER_S + ts->tv_nsec;
}

SL_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	struct ppoll_ctx c = {SL_REAL(ppoll, ppoll), mask};

	if (sl_unlikely(!c.real)) {
		errno = ENOSYS;
		return -1;
	}
	if (sl_likely(atomic_load_explicit(&sl_records_active, memory_order_relaxed) == 0) ||
	    n > MAX_TRACKED_POLLFDS)
		return c.real(fds, n, ts, mask);
	return poll_held(fds, n, deadline_of(ts), call_ppoll, &c);
}

/* select and pselect: the same, on fd_sets.  `wait` runs the real call for at most
 * `ns` nanoseconds (-1: for ever; -2: the caller's own timeout). */
static int select_held(int nfds, fd_set *r, fd_set *w, fd_set *e, int64_t deadline,
                       int (*wait)(int, fd_set *, fd_set *, fd_set *, int64_t, void *), void *ctx)
{
	fd_set r0, w0, e0, masked;

	if (!w || nfds <= 0 || nfds > FD_SETSIZE)
		return wait(nfds, r, w, e, -2, ctx); /* -2: the caller's own timeout */
	if (r)
		r0 = *r;
	w0 = *w;
	if (e)
		e0 = *e;
	for (;;) {
		int64_t now = sl_clock_mono_ns(), earliest = NS_FOREVER;
		int nmasked = 0, rc, ready = 0;

		FD_ZERO(&masked);
		for (int fd = 0; fd < nfds; fd++) {
			int64_t due;
			int deferred;

			if (!sl_fdtab_get(fd) ||
			    !(FD_ISSET(fd, &w0) || (r && FD_ISSET(fd, &r0)) || (e && FD_ISSET(fd, &e0))))
				continue;
			due = sl_held_due(fd, &deferred);
			/* A deferred connect's socket: out of every set until it is made. */
			if (deferred) {
				FD_CLR(fd, w);
				if (r)
					FD_CLR(fd, r);
				if (e)
					FD_CLR(fd, e);
				nmasked++;
				earliest = SL_MIN(earliest, due);
				continue;
			}
			if (!FD_ISSET(fd, &w0) || due <= now)
				continue;
			FD_SET(fd, &masked);
			FD_CLR(fd, w);
			nmasked++;
			earliest = SL_MIN(earliest, due);
		}
		if (nmasked == 0)
			return wait(nfds, r, w, e, -2, ctx);
		rc = wait(nfds, r, w, e, ns_until(SL_MIN(deadline, earliest), now), ctx);
		if (rc != 0)
			return rc;
		now = sl_clock_mono_ns();
		for (int fd = 0; fd < nfds; fd++) {
			if (FD_ISSET(fd, &masked) && sl_held_due(fd, NULL) <= now) {
				FD_SET(fd, w);
				ready++;
			}
		}
		if (ready || now >= deadline)
			return ready;
		if (r)
			*r = r0; /* select cleared the sets: ask again */
		*w = w0;
		if (e)
			*e = e0;
	}
}

struct select_ctx {
	int (*real)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	struct timeval *tv;
};

static int call_select(int nfds, fd_set *r, fd_set *w, fd_set *e, int64_t ns, void *arg)
{
	struct select_ctx *c = arg;
	struct timespec ts = ts_of(ns);
	struct timeval tv = {.tv_sec = ns / SL_NS_PER_S,
	                     .tv_usec = (ns % SL_NS_PER_S + SL_NS_PER_US - 1) / SL_NS_PER_US};

	if (ns == -2)
		return c->real(nfds, r, w, e, c->tv);
	if (sl_real.pselect)
		return sl_real.pselect(nfds, r, w, e, ns < 0 ? NULL : &ts, NULL); /* select, to the ns */
	return c->real(nfds, r, w, e, ns < 0 ? NULL : &tv);
}

SL_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	struct select_ctx c = {SL_REAL(select, select), tv};
	int64_t deadline;
	int rc;

	if (sl_unlikely(!c.real)) {
		errno = ENOSYS;
		return -1;
	}
	if (sl_likely(atomic_load_explicit(&sl_records_active, memory_order_relaxed) == 0))
		return c.real(nfds, r, w, e, tv);
	deadline = tv ? sl_clock_mono_ns() + tv->tv_sec * SL_NS_PER_S + tv->tv_usec * SL_NS_PER_US
	              : NS_FOREVER;
	rc = select_held(nfds, r, w, e, deadline, call_select, &c);
	if (tv && deadline != NS_FOREVER) {
		/* Linux select leaves the time not slept in *tv; do the same. */
		int64_t left = SL_MAX(deadline - sl_clock_mono_ns(), 0);

		tv->tv_sec = left / SL_NS_PER_S;
		tv->tv_usec = (left % SL_NS_PER_S) / SL_NS_PER_US;
	}
	return rc;
}

struct pselect_ctx {
	int (*real)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
	const struct timespec *ts;
	const sigset_t *mask;
};

static int call_pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, int64_t ns, void *arg)
{
	struct pselect_ctx *c = arg;
	struct timespec ts = ts_of(ns);

	if (ns == -2)
		return c->real(nfds, r, w, e, c->ts, c->mask);
	return c->real(nfds, r, w, e, ns < 0 ? NULL : &ts, c->mask);
}

SL_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
                      const sigset_t *mask)
{
	struct pselect_ctx c = {SL_REAL(pselect, pselect), ts, mask};

	if (sl_unlikely(!c.real)) {
		errno = ENOSYS;
		return -1;
	}
	if (sl_likely(atomic_load_explicit(&sl_records_active, memory_order_relaxed) == 0))
		return c.real(nfds, r, w, e, ts, mask);
	return select_held(nfds, r, w, e, deadline_of(ts), call_pselect, &c);
}
