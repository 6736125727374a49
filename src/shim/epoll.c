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
#include <stdatomic.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>

/* Follow one epoll_ctl on fd in set epfd (under no lock: an fd's registrations
 * are changed by the program's own epoll_ctl calls, which it serialises per fd). */
static void follow(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct sl_epregs *regs = sl_epregs(fd, op != EPOLL_CTL_DEL);
	struct sl_epreg *slot = NULL;

	if (!regs)
		return;
	for (unsigned i = 0; i < SL_EPREGS && !slot; i++)
		if (regs->r[i].epfd == epfd)
			slot = &regs->r[i];
	if (op == EPOLL_CTL_DEL) {
		if (slot)
			slot->epfd = 0;
		return;
	}
	for (unsigned i = 0; i < SL_EPREGS && !slot; i++)
		if (!regs->r[i].epfd)
			slot = &regs->r[i];
	if (!slot) { /* more sets than followed: the oldest entry makes room */
		memmove(&regs->r[0], &regs->r[1], (SL_EPREGS - 1) * sizeof(regs->r[0]));
		slot = &regs->r[SL_EPREGS - 1];
	}
	if (ev) {
		slot->events = ev->events;
		slot->data = ev->data;
		slot->epfd = epfd;
	}
}

SL_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int (*real)(int, int, int, struct epoll_event *) = SL_REAL(epoll_ctl, epoll_ctl);
	int rc;

	if (sl_unlikely(!real)) {
		errno = ENOSYS;
		return -1;
	}
	/* A deferred connect's socket is kept out of the kernel's sets until made. */
	if (sl_unlikely(sl_fdtab_get(fd)) && sl_held_epoll_virtual(epfd, op, fd, ev)) {
		follow(epfd, op, fd, ev);
		return 0;
	}
	rc = real(epfd, op, fd, ev);
	if (rc == 0 && sl_shim_active()) {
		follow(epfd, op, fd, ev);
		if (sl_unlikely(sl_fdtab_get(fd))) {
			struct sl_hold *rec = sl_hold_of(fd);

			/* The program's own registration in epfd replaced the one held.c
			 * masked there. */
			if (rec) {
				pthread_mutex_lock(&rec->lock);
				for (unsigned i = 0; i < SL_EPREGS; i++)
					if (rec->ep[i].epfd == epfd)
						rec->ep_masked &= ~(1u << i);
				pthread_mutex_unlock(&rec->lock);
			}
		}
	}
	return rc;
}

/* The real wait, given a timeout in ns (-1: none), whichever call it is. */
typedef int (*wait_fn)(int epfd, struct epoll_event *evs, int max, int64_t timeout_ns,
                       const sigset_t *mask);

/* Wait in slices that end when a masked registration is due, re-arming it then. */
static int wait_held(int epfd, struct epoll_event *evs, int max, int64_t timeout_ns,
                     wait_fn real, const sigset_t *mask)
{
	int64_t deadline = timeout_ns < 0 ? INT64_MAX : sl_clock_mono_ns() + timeout_ns;

	for (;;) {
		int64_t now = sl_clock_mono_ns();
		int64_t earliest = sl_held_epoll_due(epfd, now), until = deadline;
		int rc;

		if (earliest && earliest < until)
			until = earliest;
		rc = real(epfd, evs, max, until == INT64_MAX ? -1 : SL_MAX(until - now, (int64_t)0), mask);
		if (rc != 0 || !earliest || sl_clock_mono_ns() >= deadline)
			return rc;
	}
}

static int ms_of(int64_t ns)
{
	return ns < 0 ? -1 : (int)SL_MIN((ns + SL_NS_PER_MS - 1) / SL_NS_PER_MS, (int64_t)INT32_MAX);
}

/* epoll_wait's timeout is in milliseconds: rounded up, each deferred release would
 * be up to 1 ms late, and in a backlog the lateness adds up.  epoll_pwait2 with no
 * mask is the same call to the nanosecond (Linux 5.11); older kernels say ENOSYS. */
static _Atomic int no_pwait2;

static int call_epoll_wait(int epfd, struct epoll_event *evs, int max, int64_t ns, const sigset_t *mask)
{
	(void)mask;
	if (sl_real.epoll_pwait2 && !atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		struct timespec ts = {.tv_sec = ns / SL_NS_PER_S, .tv_nsec = ns % SL_NS_PER_S};
		int rc = sl_real.epoll_pwait2(epfd, evs, max, ns < 0 ? NULL : &ts, NULL);

		if (rc >= 0 || errno != ENOSYS)
			return rc;
		atomic_store(&no_pwait2, 1);
	}
	return sl_real.epoll_wait(epfd, evs, max, ms_of(ns));
}

static int call_epoll_pwait(int epfd, struct epoll_event *evs, int max, int64_t ns, const sigset_t *mask)
{
	return sl_real.epoll_pwait(epfd, evs, max, ms_of(ns), mask);
}

static int call_epoll_pwait2(int epfd, struct epoll_event *evs, int max, int64_t ns, const sigset_t *mask)
{
	struct timespec ts = {.tv_sec = ns / SL_NS_PER_S, .tv_nsec = ns % SL_NS_PER_S};

	return sl_real.epoll_pwait2(epfd, evs, max, ns < 0 ? NULL : &ts, mask);
}

static int64_t ns_of_ms(int ms)
{
	return ms < 0 ? -1 : ms * SL_NS_PER_MS;
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
	return wait_held(epfd, evs, max, ns_of_ms(timeout), call_epoll_wait, NULL);
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
	return wait_held(epfd, evs, max, ns_of_ms(timeout), call_epoll_pwait, mask);
}

SL_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max, const struct timespec *timeout,
                           const sigset_t *mask)
{
	int (*real)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *) =
		SL_REAL(epoll_pwait2, epoll_pwait2);

	if (sl_unlikely(!real)) {
		errno = ENOSYS;
		return -1;
	}
	if (sl_likely(atomic_load_explicit(&sl_holds_active, memory_order_relaxed) == 0))
		return real(epfd, evs, max, timeout, mask);
	/* A malformed timeout is the kernel's to refuse (EINVAL), not ours to read. */
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= SL_NS_PER_S))
		return real(epfd, evs, max, timeout, mask);
	return wait_held(epfd, evs, max,
	                 !timeout ? -1
	                 : timeout->tv_sec > INT64_MAX / SL_NS_PER_S / 2
	                     ? INT64_MAX / 2
	                     : timeout->tv_sec * SL_NS_PER_S + timeout->tv_nsec,
	                 call_epoll_pwait2, mask);
}
