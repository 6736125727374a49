/*
 * epoll while connections are held.  epoll reports the program's own data, not fds,
 * so epoll_ctl is followed to know what each fd registered.  While a write is held
 * (held.c decides), EPOLLOUT is taken out of the socket's registrations, and put
 * back when the release is due (which, for edge-triggered registrations, is the
 * edge the program waits for); a deferred connect's registrations are kept out of
 * the kernel until it is made.  The wait hooks cut each wait short to wake at the
 * earliest release.  All of that masking lives here.
 */
#include "epoll.h"
#include "fdtab.h"
#include "held.h"
#include "record.h"
#include "kicker.h"
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
	if (sl_unlikely(sl_fdtab_get(fd)) && sl_epoll_virtual_ctl(epfd, op, fd, ev)) {
		follow(epfd, op, fd, ev);
		return 0;
	}
	rc = real(epfd, op, fd, ev);
	if (rc == 0 && sl_shim_may_shape()) {
		follow(epfd, op, fd, ev);
		if (sl_unlikely(sl_fdtab_get(fd))) {
			struct sl_record *rec = sl_record_of(fd);

			/* The program's own registration in epfd replaced the one held.c
			 * masked there. */
			if (rec) {
				sl_shim_lock(&rec->lock);
				for (unsigned i = 0; rec->wait && i < SL_EPREGS; i++)
					if (rec->wait->ep[i].epfd == epfd)
						rec->ep_masked &= (uint8_t)~(1u << i);
				sl_shim_unlock(&rec->lock);
			}
		}
	}
	return rc;
}

/* The real wait, given a timeout in ns (-1: none), whichever call it is. */
typedef int (*wait_fn)(int epfd, struct epoll_event *evs, int max, int64_t timeout_ns,
                       const sigset_t *mask);

/* The most events one wait hands out while the kicker has work.  The kernel hands
 * them out holding the epoll set's mutex, which the kicker's epoll_ctl (putting a
 * made connect's registrations back) must also take: node handing out 1,024 events
 * a call kept it 400-700 us, python asyncio (as many as it has sockets, 12,000)
 * 2-4 ms, and every release of the queue behind it waited as long (docs/design.md,
 * "Why nothing is made up").  64 keeps it to tens of microseconds; a wait may
 * always return fewer events than asked, and the rest stay ready for the next. */
#define SL_EPOLL_BATCH_WHILE_KICKING 64

/* Wait in slices that end when a masked registration is due, re-arming it then. */
static int wait_held(int epfd, struct epoll_event *evs, int max, int64_t timeout_ns,
                     wait_fn real, const sigset_t *mask)
{
	int64_t deadline = timeout_ns < 0 ? INT64_MAX : sl_clock_mono_ns() + timeout_ns;

	if (max > SL_EPOLL_BATCH_WHILE_KICKING && sl_kicker_has_work())
		max = SL_EPOLL_BATCH_WHILE_KICKING;
	for (;;) {
		int64_t now = sl_clock_mono_ns();
		int64_t earliest = sl_epoll_due(epfd, now), until = deadline;
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
	if (sl_likely(atomic_load_explicit(&sl_records_active, memory_order_relaxed) == 0))
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
	if (sl_likely(atomic_load_explicit(&sl_records_active, memory_order_relaxed) == 0))
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
	if (sl_likely(atomic_load_explicit(&sl_records_active, memory_order_relaxed) == 0))
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

/* --- masking held sockets' registrations (held.c decides when) --- */

/* --- which records epoll_wait must look at ---
 *
 * A bit per record (by index) that is set, under the record's lock, whenever one
 * of its epoll registrations is masked or withheld, and cleared by the scan below,
 * under the same lock, when it finds none left.  So epoll_wait looks at the
 * records whose registrations it may have to put back, found 64 to a word,
 * instead of at every record the process has made; the bitmap's pages are touched
 * only as far as the records it marks. */
static _Atomic uint64_t epoll_marks[SL_RECORDS / 64];

static void mark_for_epoll(struct sl_record *rec)
{
	unsigned bit = rec->index - 1; /* records are numbered from 1 */

	atomic_fetch_or_explicit(&epoll_marks[bit / 64], 1ULL << (bit % 64), memory_order_release);
}

static void unmark_for_epoll(struct sl_record *rec)
{
	unsigned bit = rec->index - 1;

	atomic_fetch_and_explicit(&epoll_marks[bit / 64], ~(1ULL << (bit % 64)), memory_order_relaxed);
}

/* Take EPOLLOUT out of the fd's epoll registrations while its write is held, so a
 * level-triggered loop does not spin on a socket we say is not writable. */
void sl_epoll_mask(struct sl_record *rec)
{
	struct sl_epregs *regs = sl_epregs(rec->fd, 0);

	if (!regs || !sl_real.epoll_ctl || !rec->wait)
		return; /* what it masks is kept in its waiting part */
	for (unsigned i = 0; i < SL_EPREGS; i++) {
		struct sl_epreg *reg = &regs->r[i];
		struct epoll_event ev;

		if ((rec->ep_masked & (1u << i)) || !reg->epfd || !(reg->events & EPOLLOUT))
			continue;
		rec->wait->ep[i] = *reg;
		ev.events = reg->events & ~(uint32_t)EPOLLOUT;
		ev.data = reg->data;
		if (sl_real.epoll_ctl(reg->epfd, EPOLL_CTL_MOD, rec->fd, &ev) == 0) {
			rec->ep_masked |= (uint8_t)(1u << i);
			mark_for_epoll(rec);
		}
	}
	if (rec->ep_masked)
		sl_kicker_due(rec); /* put back at its slot, whatever the program is doing */
}

/* Put registrations back (those in `which`): the kernel re-evaluates them, so an
 * edge-triggered registration gets the edge the program is waiting for. */
void sl_epoll_unmask_some(struct sl_record *rec, unsigned which)
{
	int saved = errno;

	for (unsigned i = 0; rec->wait && i < SL_EPREGS; i++) {
		const struct sl_epreg *r = &rec->wait->ep[i];
		struct epoll_event ev = {.events = r->events, .data = r->data};

		if (!(rec->ep_masked & which & (1u << i)))
			continue;
		rec->ep_masked &= (uint8_t)~(1u << i);
		if (sl_real.epoll_ctl)
			sl_real.epoll_ctl(r->epfd, EPOLL_CTL_MOD, rec->fd, &ev);
	}
	errno = saved;
}

void sl_epoll_unmask(struct sl_record *rec)
{
	sl_epoll_unmask_some(rec, ~0u);
}

/* A deferred socket is not connected, and the kernel reports EPOLLHUP for it
 * whatever a registration asks: registrations made before the deferral leave the
 * kernel until the connect is made. */
void sl_epoll_withhold(struct sl_record *rec)
{
	struct sl_epregs *regs = sl_epregs(rec->fd, 0);

	for (unsigned i = 0; regs && rec->wait && i < SL_EPREGS; i++) {
		if (!regs->r[i].epfd || !sl_real.epoll_ctl ||
		    sl_real.epoll_ctl(regs->r[i].epfd, EPOLL_CTL_DEL, rec->fd, NULL) != 0)
			continue;
		rec->wait->ep[i] = regs->r[i];
		rec->ep_withheld |= (uint8_t)(1u << i);
		mark_for_epoll(rec);
	}
}

void sl_epoll_restore(struct sl_record *rec)
{
	int saved = errno;

	for (unsigned i = 0; rec->wait && i < SL_EPREGS; i++) {
		const struct sl_epreg *r = &rec->wait->ep[i];
		struct epoll_event ev = {.events = r->events, .data = r->data};

		if (!(rec->ep_withheld & (1u << i)))
			continue;
		rec->ep_withheld &= (uint8_t)~(1u << i);
		if (sl_real.epoll_ctl)
			sl_real.epoll_ctl(r->epfd, EPOLL_CTL_ADD, rec->fd, &ev);
	}
	errno = saved;
}

int sl_epoll_virtual_ctl(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct sl_record *rec = sl_record_of(fd);
	int handled = 0;

	if (!rec)
		return 0;
	sl_shim_lock(&rec->lock);
	if (rec->state == SL_REC_DEFERRED && rec->wait) {
		struct sl_epreg *ep = rec->wait->ep;
		unsigned slot = SL_EPREGS;

		for (unsigned i = 0; i < SL_EPREGS && slot == SL_EPREGS; i++)
			if ((rec->ep_withheld & (1u << i)) && ep[i].epfd == epfd)
				slot = i;
		for (unsigned i = 0; i < SL_EPREGS && slot == SL_EPREGS && op == EPOLL_CTL_ADD; i++)
			if (!(rec->ep_withheld & (1u << i)))
				slot = i;
		if (slot < SL_EPREGS) {
			if (op == EPOLL_CTL_DEL) {
				rec->ep_withheld &= (uint8_t)~(1u << slot);
			} else if (ev) {
				ep[slot] = (struct sl_epreg){.epfd = epfd, .events = ev->events, .data = ev->data};
				rec->ep_withheld |= (uint8_t)(1u << slot);
				mark_for_epoll(rec);
			}
			handled = 1;
		}
	}
	sl_shim_unlock(&rec->lock);
	return handled;
}

int64_t sl_epoll_due(int epfd, int64_t now)
{
	int64_t earliest = 0;
	unsigned high = atomic_load_explicit(&sl_records_high, memory_order_acquire);

	for (unsigned w = 0; w < (high + 63) / 64 && w < SL_RECORDS / 64; w++) {
		uint64_t bits = atomic_load_explicit(&epoll_marks[w], memory_order_acquire);

		for (; bits; bits &= bits - 1) {
			struct sl_record *rec = sl_record_at(w * 64 + (unsigned)__builtin_ctzll(bits) + 1);
			unsigned mine = 0;

			if (!rec)
				continue;
			/* The kicker acts on it at its instant (kicker.c): nothing for this
			 * wait to do or to wake for.  Read without the lock: a record the
			 * kicker has just let go of is looked at by the next wait. */
			if (__atomic_load_n(&rec->kick_at, __ATOMIC_RELAXED) && sl_kicker_running())
				continue;
			sl_shim_lock(&rec->lock);
			if (!rec->refs || !(rec->ep_masked | rec->ep_withheld)) {
				unmark_for_epoll(rec); /* nothing of it left to put back */
				sl_shim_unlock(&rec->lock);
				continue;
			}
			for (unsigned r = 0; rec->wait && r < SL_EPREGS; r++)
				if (((rec->ep_masked | rec->ep_withheld) & (1u << r)) && rec->wait->ep[r].epfd == epfd)
					mine |= 1u << r;
			if (mine && rec->state == SL_REC_DEFERRED) {
				/* Made when due (its registrations then return), through the fd
				 * that connected while it still names rec; a dup that outlived
				 * it is made by its own poll or write. */
				if (sl_fdtab_get(rec->fd) == rec->index && !sl_held_kick_locked(rec, rec->fd, now) &&
				    (!earliest || rec->release_ns < earliest))
					earliest = rec->release_ns;
			} else if (mine) {
				if (rec->release_ns <= now)
					sl_epoll_unmask_some(rec, mine); /* due: the next write's release check decides */
				else if (!earliest || rec->release_ns < earliest)
					earliest = rec->release_ns;
			}
			sl_shim_unlock(&rec->lock);
		}
	}
	return earliest;
}
