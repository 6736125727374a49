/*
 * epoll while connections are held.  epoll reports the program's own data, not fds,
 * so epoll_ctl is followed to know what each fd registered; held.c takes EPOLLOUT
 * out of a held socket's registration and these hooks put it back when the release
 * is due (which, for edge-triggered registrations, is the edge the program waits
 * for), cutting the wait short to wake at that time.
 */
#include "fdtab.h"
#include "sluice/clock.h"

#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>

SL_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int (*real)(int, int, int, struct epoll_event *) = SL_REAL(epoll_ctl, epoll_ctl);
	int rc;

	if (sl_unlikely(!real)) {
		errno = ENOSYS;
		return -1;
	}
	rc = real(epfd, op, fd, ev);
	if (rc == 0 && sl_shim_active()) {
		struct sl_epreg *reg = sl_epreg(fd, op != EPOLL_CTL_DEL);

		if (reg && op == EPOLL_CTL_DEL) {
			if (reg->epfd == epfd)
				reg->epfd = 0;
		} else if (reg && ev) {
			reg->events = ev->events;
			reg->data = ev->data;
			reg->epfd = epfd;
		}
		if (sl_unlikely(sl_fdtab_get(fd))) {
			struct sl_hold *rec = sl_hold_of(fd);

			/* The program's own registration replaced the one held.c masked. */
			if (rec) {
				pthread_mutex_lock(&rec->lock);
				rec->ep_masked = 0;
				pthread_mutex_unlock(&rec->lock);
			}
		}
	}
	return rc;
}

/* Wait in slices that end when a masked registration is due, re-arming it then. */
static int wait_held(int epfd, struct epoll_event *evs, int max, int timeout_ms,
                     int (*real)(int, struct epoll_event *, int, int, const sigset_t *),
                     const sigset_t *mask)
{
	int64_t deadline = timeout_ms < 0 ? INT64_MAX
	                                  : sl_clock_mono_ns() + timeout_ms * SL_NS_PER_MS;

	for (;;) {
		int64_t now = sl_clock_mono_ns();
		int64_t earliest = sl_held_epoll_due(epfd, now), until = deadline;
		int ms = -1, rc;

		if (earliest && earliest < until)
			until = earliest;
		if (until != INT64_MAX)
			ms = until <= now ? 0 : (int)SL_MIN((until - now + SL_NS_PER_MS - 1) / SL_NS_PER_MS,
			                                    (int64_t)INT32_MAX);
		rc = real(epfd, evs, max, ms, mask);
		if (rc != 0 || !earliest || sl_clock_mono_ns() >= deadline)
			return rc;
	}
}

static int call_epoll_wait(int epfd, struct epoll_event *evs, int max, int ms, const sigset_t *mask)
{
	(void)mask;
	return sl_real.epoll_wait(epfd, evs, max, ms);
}

SL_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	int (*real)(int, struct epoll_event *, int, int) = SL_REAL(epoll_wait, epoll_wait);

	if (sl_unlikely(!real)) {
		errno = ENOSYS;
		return -1;
	}
	if (sl_likely(atomic_load_explicit(&sl_holds_active, memory_order_relaxed) == 0))
		return real(epfd, evs, max, timeout);
	return wait_held(epfd, evs, max, timeout, call_epoll_wait, NULL);
}

SL_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
                          const sigset_t *mask)
{
	int (*real)(int, struct epoll_event *, int, int, const sigset_t *) =
		SL_REAL(epoll_pwait, epoll_pwait);

	if (sl_unlikely(!real)) {
		errno = ENOSYS;
		return -1;
	}
	if (sl_likely(atomic_load_explicit(&sl_holds_active, memory_order_relaxed) == 0))
		return real(epfd, evs, max, timeout, mask);
	return wait_held(epfd, evs, max, timeout, real, mask);
}
