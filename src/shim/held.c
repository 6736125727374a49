/*
 * The first write of a held connection (SPEC §5): a matched non-blocking connect
 * proceeds at once; its first write takes the place in the queue.  On a blocking
 * socket that write sleeps until the release, as connect would have; on a
 * non-blocking one it fails with EAGAIN, and the readiness hooks (poll.c, epoll.c)
 * show the socket as not writable until the release is due.  The loser of a
 * happy-eyeballs race never writes, so it never takes a place.
 */
#include "fdtab.h"
#include "sluice/clock.h"
#include "sluice/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

/* Under rec->lock: what the next write is to be held for. */
static void set_target(struct sl_hold *rec, const struct sl_dest *d, const struct sl_match *m)
{
	rec->state = SL_HOLD_FIRST;
	rec->dest = *d;
	if (d->name) {
		size_t n = SL_MIN(d->name_len, (size_t)SL_HOST_MAX - 1);

		memmove(rec->name, d->name, n);
		rec->name[n] = '\0';
		rec->dest.name = rec->name;
		rec->dest.name_len = n;
	}
	rec->m = *m;
}

int sl_held_connect(int fd, const struct sl_dest *d, const struct sl_match *m, int kind)
{
	struct sl_hold *rec = sl_hold_new(fd);

	if (!rec)
		return -ENOSPC;
	pthread_mutex_lock(&rec->lock);
	rec->fd = fd;
	rec->kind = kind;
	set_target(rec, d, m);
	pthread_mutex_unlock(&rec->lock);
	return 0;
}

int sl_socket_type(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 ? type : -1;
}

int sl_fd_nonblocking(int fd)
{
	int fl = sl_real.fcntl ? sl_real.fcntl(fd, F_GETFL) : -1;

	return fl >= 0 && (fl & O_NONBLOCK);
}

/* Take EPOLLOUT out of the fd's epoll registrations while its write is held, so a
 * level-triggered loop does not spin on a socket we say is not writable. */
static void epoll_mask(struct sl_hold *rec)
{
	struct sl_epregs *regs = sl_epregs(rec->fd, 0);

	if (!regs || !sl_real.epoll_ctl)
		return;
	for (unsigned i = 0; i < SL_EPREGS; i++) {
		struct sl_epreg *reg = &regs->r[i];
		struct epoll_event ev;

		if ((rec->ep_masked & (1u << i)) || !reg->epfd || !(reg->events & EPOLLOUT))
			continue;
		rec->ep[i] = *reg;
		ev.events = reg->events & ~(uint32_t)EPOLLOUT;
		ev.data = reg->data;
		if (sl_real.epoll_ctl(reg->epfd, EPOLL_CTL_MOD, rec->fd, &ev) == 0)
			rec->ep_masked |= 1u << i;
	}
}

/* Put registrations back (those in `which`): the kernel re-evaluates them, so an
 * edge-triggered registration gets the edge the program is waiting for. */
static void epoll_unmask_some(struct sl_hold *rec, unsigned which)
{
	int saved = errno;

	for (unsigned i = 0; i < SL_EPREGS; i++) {
		struct epoll_event ev = {.events = rec->ep[i].events, .data = rec->ep[i].data};

		if (!(rec->ep_masked & which & (1u << i)))
			continue;
		rec->ep_masked &= ~(1u << i);
		if (sl_real.epoll_ctl)
			sl_real.epoll_ctl(rec->ep[i].epfd, EPOLL_CTL_MOD, rec->fd, &ev);
	}
	errno = saved;
}

static void epoll_unmask(struct sl_hold *rec)
{
	epoll_unmask_some(rec, ~0u);
}

/* Under rec->lock, which this drops: the request went (or was refused).  A
 * connected UDP socket's record stays for its next datagram; others go. */
static void release_record(int fd, struct sl_hold *rec)
{
	struct sl_hold *last;

	epoll_unmask(rec);
	if (rec->kind == SL_KIND_CONNECTED_UDP) {
		rec->state = SL_HOLD_FIRST;
		pthread_mutex_unlock(&rec->lock);
		return;
	}
	pthread_mutex_unlock(&rec->lock);
	last = sl_hold_unlink(fd);
	if (last)
		sl_hold_free(last);
}

static void log_go(const char *what, struct sl_hold *rec)
{
	char dest[SL_HOST_MAX + 80], names[256];

	if (!sl_shim.debug)
		return;
	sl_dest_format(&rec->dest, dest, sizeof(dest));
	sl_hold_section_names(&rec->m, names, sizeof(names));
	sl_debug("%s %s sections=%s: go waited=%.3fms slot=%lld released=%lld", what, dest,
	         names, (double)(rec->t.released_ns - rec->t.arrival_ns) / 1e6,
	         (long long)rec->t.release_ns, (long long)rec->t.released_ns);
}

/* Sleep until `at` the way a blocking send would wait: a handler installed with
 * SA_RESTART lets the wait go on, one without it ends the wait with -EINTR (a futex
 * wait is restarted by the kernel exactly in the first case, which a plain
 * clock_nanosleep is not).  Ends with -EAGAIN at `timeout_at` (SO_SNDTIMEO). */
static int sleep_like_send(int64_t at, int64_t timeout_at)
{
	static uint32_t never_woken;
	int64_t until = timeout_at && timeout_at < at ? timeout_at : at;
	struct timespec ts = {.tv_sec = until / SL_NS_PER_S, .tv_nsec = until % SL_NS_PER_S};

	for (;;) {
		long rc = syscall(SYS_futex, &never_woken, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0,
		                  &ts, NULL, FUTEX_BITSET_MATCH_ANY);

		if (rc == -1 && errno == EINTR)
			return -EINTR;
		if (sl_clock_mono_ns() >= until)
			return until == at ? 0 : -EAGAIN;
		if (rc == -1 && errno != ETIMEDOUT && errno != EAGAIN)
			return sl_clock_sleep_until(until) == 0 ? (until == at ? 0 : -EAGAIN) : -EINTR;
	}
}

/* SO_SNDTIMEO as an absolute deadline from now, or 0 for none. */
static int64_t send_timeout_at(int fd)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) != 0 || (tv.tv_sec == 0 && tv.tv_usec == 0))
		return 0;
	return sl_clock_mono_ns() + tv.tv_sec * SL_NS_PER_S + tv.tv_usec * SL_NS_PER_US;
}

int sl_held_write(int fd, int dontwait)
{
	struct sl_shm_header *h = sl_shim.shm.hdr;
	int64_t timeout_at = -1;

	for (int rounds = 0; rounds < 10000; rounds++) {
		struct sl_hold *rec = sl_hold_of(fd);
		int64_t now, retry, at;
		int rc;

		if (!rec)
			return 0;
		pthread_mutex_lock(&rec->lock);
		if (sl_fdtab_get(fd) != (unsigned)(rec - sl_holds) + 1) {
			pthread_mutex_unlock(&rec->lock); /* freed and reused meanwhile */
			continue;
		}
		if (rec->state == SL_HOLD_FIRST) {
			rc = sl_shim.mode == SL_SHIM_CLOSED ? -ECONNREFUSED
			     : sl_wait_reserve(h, &rec->m, sl_clock_mono_ns(), sl_shim.pid, &rec->t);
			if (rc == -ECONNREFUSED) {
				int e = rec->t.refuse_errno && sl_shim.mode != SL_SHIM_CLOSED
				        ? rec->t.refuse_errno
				        : rec->kind == SL_KIND_CONNECTION ? ECONNRESET : ECONNREFUSED;

				sl_debug("%s on fd %d: refused (%s)",
				         rec->kind == SL_KIND_CONNECTION ? "first write" : "datagram", fd,
				         sl_shim.mode == SL_SHIM_CLOSED ? "fallback = closed" : "max_wait");
				release_record(fd, rec);
				return -e;
			}
			if (rc < 0 || rec->t.mask == 0) {
				release_record(fd, rec); /* observe only, or unusable: let it go */
				return 0;
			}
			rec->state = SL_HOLD_WAITING;
			rec->release_ns = rec->t.release_ns;
		}
		now = sl_clock_mono_ns();
		if (now >= rec->release_ns) {
			struct sl_ticket *t = &rec->t;

			rc = sl_wait_try_release(h, t, sl_shim.pid, &retry);
			if (rc == 0) {
				log_go(rec->kind == SL_KIND_CONNECTION ? "write" : "datagram", rec);
				release_record(fd, rec);
				return 0;
			}
			rec->release_ns = retry;
		}
		at = rec->release_ns;
		if (dontwait || sl_fd_nonblocking(fd)) {
			epoll_mask(rec);
			pthread_mutex_unlock(&rec->lock);
			return -EAGAIN;
		}
		pthread_mutex_unlock(&rec->lock);
		if (timeout_at < 0)
			timeout_at = send_timeout_at(fd);
		rc = sleep_like_send(at, timeout_at);
		if (rc == -EAGAIN)
			return -EAGAIN; /* SO_SNDTIMEO: the place stays reserved for the retry */
		if (rc == -EINTR) {
			/* A handler without SA_RESTART: fail as send would, and return the
			 * place (if still the last handed out); the next write asks anew. */
			rec = sl_hold_of(fd);
			if (rec) {
				pthread_mutex_lock(&rec->lock);
				if (rec->state == SL_HOLD_WAITING) {
					sl_wait_refund(h, &rec->t, sl_shim.pid);
					rec->state = SL_HOLD_FIRST;
				}
				pthread_mutex_unlock(&rec->lock);
			}
			return -EINTR;
		}
	}
	return 0;
}

/* A datagram sent with its own address to a matched destination.  The fd's record
 * carries it while it waits (so a non-blocking retry finds its place, and poll and
 * epoll hide the socket meanwhile); a retry to other sections gives the place back
 * first.  A connected UDP socket sending elsewhere waits here, in place. */
int sl_held_datagram(int fd, const struct sl_dest *d, const struct sl_match *m, int dontwait)
{
	/* Twice: another thread may give fd its record between our look and ours. */
	for (int tries = 0; tries < 2; tries++) {
		struct sl_hold *rec = sl_hold_of(fd);

		if (!rec) {
			if (sl_held_connect(fd, d, m, SL_KIND_DATAGRAM) == 0)
				return sl_held_write(fd, dontwait);
			continue;
		}
		pthread_mutex_lock(&rec->lock);
		if (rec->kind != SL_KIND_DATAGRAM) {
			pthread_mutex_unlock(&rec->lock);
			break;
		}
		if (rec->m.mask != m->mask) {
			if (rec->state == SL_HOLD_WAITING)
				sl_wait_refund(sl_shim.shm.hdr, &rec->t, sl_shim.pid);
			set_target(rec, d, m);
		}
		pthread_mutex_unlock(&rec->lock);
		return sl_held_write(fd, dontwait);
	}
	return sl_hold_wait(d, m, "datagram", ECONNREFUSED);
}

/* A UDP socket connects anew (or disconnects): its old peer's record goes. */
void sl_held_drop_udp(int fd)
{
	struct sl_hold *rec = sl_hold_of(fd);
	int udp;

	if (!rec)
		return;
	pthread_mutex_lock(&rec->lock);
	udp = rec->kind != SL_KIND_CONNECTION;
	pthread_mutex_unlock(&rec->lock);
	if (udp)
		sl_held_close(fd);
}

int64_t sl_held_due(int fd)
{
	struct sl_hold *rec = sl_hold_of(fd);
	int64_t at = 0;

	if (!rec)
		return 0;
	pthread_mutex_lock(&rec->lock);
	if (rec->state == SL_HOLD_WAITING)
		at = rec->release_ns;
	pthread_mutex_unlock(&rec->lock);
	return at;
}

void sl_held_close(int fd)
{
	struct sl_hold *last = sl_hold_unlink(fd);

	if (!last)
		return;
	pthread_mutex_lock(&last->lock);
	if (last->state == SL_HOLD_WAITING && !last->inherited)
		sl_wait_refund(sl_shim.shm.hdr, &last->t, sl_shim.pid);
	last->ep_masked = 0; /* the kernel drops the registration with the socket */
	pthread_mutex_unlock(&last->lock);
	sl_hold_free(last);
}

int64_t sl_held_epoll_due(int epfd, int64_t now)
{
	int64_t earliest = 0;

	for (unsigned i = 0; i < SL_HOLDS; i++) {
		struct sl_hold *rec = &sl_holds[i];
		unsigned mine = 0;

		if (!rec->refs || !rec->ep_masked)
			continue;
		pthread_mutex_lock(&rec->lock);
		for (unsigned r = 0; r < SL_EPREGS; r++)
			if ((rec->ep_masked & (1u << r)) && rec->ep[r].epfd == epfd)
				mine |= 1u << r;
		if (mine) {
			if (rec->release_ns <= now)
				epoll_unmask_some(rec, mine); /* due: the next write's release check decides */
			else if (!earliest || rec->release_ns < earliest)
				earliest = rec->release_ns;
		}
		pthread_mutex_unlock(&rec->lock);
	}
	return earliest;
}
