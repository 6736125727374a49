/* connect(): a matched TCP connection waits for its place - inside connect when
 * blocking, deferred when not (held.c) - a UDP socket connected to a matched peer
 * holds each datagram; an unmatched TCP connection may be marked so its first
 * write can name it.  getsockopt(SO_ERROR) and shutdown() answer for a deferred
 * connect as for one under way. */
#include "answers.h"
#include "connect.h"
#include "fdtab.h"
#include "held.h"
#include "record.h"
#include "sluice/clock.h"
#include "sluice/conc.h"
#include "sluice/pending.h"
#include "sluice/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A TCP socket that has not started connecting yet.  A program may call connect()
 * again on a socket whose non-blocking connect is under way (to learn EALREADY or
 * EISCONN): that is no new connection and must not take another place.  Not TCP
 * (UDP, SCTP, a non-socket fd): datagram meters come with the send paths. */
int sl_is_fresh_tcp(int fd)
{
	struct tcp_info info;
	socklen_t len = sizeof(info);

	if (sl_real_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || len < 1)
		return 0;
	return info.tcpi_state == TCP_CLOSE;
}

/* A UDP socket connected to a matched peer: each datagram it sends is held. */
static void connect_udp(int fd, const struct sl_dest *d)
{
	struct sl_match m;

	if (sl_admission_match_meter(d, SL_METER_DATAGRAMS, &m) == 0 || sl_socket_type(fd) != SOCK_DGRAM)
		return;
	if (sl_held_connect(fd, d, &m, SL_KIND_CONNECTED_UDP) < 0)
		sl_debug("connect on fd %d: no free hold record; its datagrams go unshaped", fd);
	else
		sl_debug("connect on fd %d: UDP to a matched peer; each datagram takes a place", fd);
}

/* Whether m has a section keyed by host name (per = host, host+port). */
static int keyed_by_name(const struct sl_match *m)
{
	struct sl_shm_header *h = sl_shim.shm.hdr;

	for (uint64_t bits = m->keyed & m->mask; bits; bits &= bits - 1) {
		const struct sl_section *sec = sl_shm_section(h, m->idx[__builtin_ctzll(bits)]);

		if (sec && (sec->spec.per == SL_PER_HOST || sec->spec.per == SL_PER_HOST_PORT))
			return 1;
	}
	return 0;
}

/* The program resolved several names to d's address (virtual hosts, a CDN) and
 * the newest, which d carries, is not sure to be this connection's: its sections
 * key by name, or another name is matched otherwise.  Then the connection's first
 * write names it (naming.c), and where that names nothing, the address's newest
 * name does then (docs/shaping.md, "Names"). */
static int names_disagree(const struct sl_dest *d, const struct sl_tcp_match *t)
{
	struct sl_dest plain = *d;
	struct sl_tcp_match u;

	if (!d->name || sl_namemap_count(d->family, d->addr) < 2)
		return 0;
	if (keyed_by_name(&t->m) || keyed_by_name(&t->rm) || keyed_by_name(&t->bm))
		return 1;
	/* Not keyed: the name matters when the address alone is matched otherwise
	 * (a pattern by name among the sections). */
	plain.name = NULL;
	plain.name_len = 0;
	sl_admission_match_tcp(&plain, &u);
	return u.m.mask != t->m.mask || u.rm.mask != t->rm.mask || u.bm.mask != t->bm.mask;
}

/* Returns 0 to let the connect go, 1 to let it go and mark the socket for a look
 * at its first write (no section matched, some match by name; or the names the
 * address has disagree), or -errno to fail it with. */
static int decide(int fd, const struct sockaddr *addr, socklen_t len, struct sl_made_connect *made)
{
	struct sl_dest d;
	struct sl_tcp_match t;
	struct sl_match u;
	char name[SL_HOST_MAX];
	int rc;

	if (sl_unlikely(sl_fdtab_get(fd)))
		sl_held_drop_udp(fd); /* a UDP socket's earlier peer no longer applies */
	if (sl_dest_from_sockaddr(&d, addr, len) != 0)
		return 0; /* other families, short or NULL addresses: the kernel's business */
	sl_admission_name(&d, name, sizeof(name));
	connect_udp(fd, &d);
	sl_admission_match_tcp(&d, &t);
	/* Unmatched: with name patterns about, the first write may still name it (the
	 * name known here, if any, can be a proxy's, or a CNAME's). */
	if (t.n == 0 && t.nr == 0 && t.nb == 0)
		return sl_shim_has_names() &&
		       (sl_shim_meters() & ((1u << SL_METER_CONNECTIONS) | (1u << SL_METER_REQUESTS) |
		                                   (1u << SL_METER_BYTES)));
	if (!sl_is_fresh_tcp(fd))
		return 0;
	if (sl_unlikely(names_disagree(&d, &t))) {
		sl_debug("connect on fd %d: %.*s shares its address with other names: its first write names it", fd,
		         (int)d.name_len, d.name);
		return 1;
	}
	/* The connect takes the place of its connections sections and of its first
	 * request: so no first write is held (HTTP/2's preface, a TLS ClientHello,
	 * an SMTP reply), and the destination sees the connection at the rate. */
	sl_match_union(&u, &t.m, &t.rm);
	rc = t.n || t.nr ? sl_connect_admit(fd, &d, &u, "connect", addr, len, 0, made) : 0;
	/* meter = requests, bytes: the connection keeps a record for its life,
	 * whatever the connect itself did (a deferred one included). */
	if ((t.nr || t.nb) && (rc == 0 || rc == -EINPROGRESS) &&
	    sl_held_stream(fd, &d, &t.rm, &t.bm, 1) < 0)
		sl_debug("connect on fd %d: no free hold record: its requests and bytes go unshaped", fd);
	/* Sections that read the destination's answers: followed for its life. */
	if ((rc == 0 || rc == -EINPROGRESS) && (t.n || t.nr || t.nb)) {
		sl_match_union(&u, &u, &t.bm);
		if (sl_held_follow(fd, &d, &u, rc == 0 && made ? made->released_ns : 0) < 0)
			sl_debug("connect on fd %d: no free hold record: its answers are not read", fd);
	}
	if (rc == 0 && t.nr)
		sl_held_first_request_places(fd);
	return rc;
}

/* A connection released now keeps its concurrency places (if any) in a record
 * until it closes. */
static void keep_places(int fd, const struct sl_dest *d, struct sl_match *m, const char *what,
                        uint64_t conc)
{
	if (conc && sl_held_open(fd, d, m, conc) < 0) {
		sl_debug("%s on fd %d: no free hold record: its concurrency place is not kept", what, fd);
		sl_shim_give_back(conc, m);
	}
}

/* Thread cancelled while asleep in a blocking connect: its slot and places back. */
static void cancel_on_cancel(void *arg)
{
	sl_pending_cancel(arg, sl_shim.shm.hdr);
}

/* A new TCP connection to matched sections m, by connect() or sendto(MSG_FASTOPEN):
 * its admission (core/pending.c) takes a concurrency place in every section that
 * limits concurrency, then its rate slot.  Blocking: waited for here.
 * Non-blocking: goes now when both are had at once, else the connect is deferred
 * (-EINPROGRESS: the real connect is not to be made now; held.c steps it on at
 * its instant, the kicker wakes it for its slot).  The places stay with the fd's
 * record until it closes.  Returns 0 to go, or -errno. */
int sl_connect_admit(int fd, const struct sl_dest *d, struct sl_match *m, const char *what,
                       const struct sockaddr *addr, socklen_t alen, int dontwait,
                       struct sl_made_connect *made)
{
	sl_act_fn act = made ? sl_connect_act : NULL;
	struct sl_pending_ask a;
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;
	int rc;

	if (made) {
		made->fd = fd;
		made->addr = addr;
		made->alen = alen;
		made->done = 0;
	}
	sl_admission_ask(&a, d, m, ECONNREFUSED, 1);
	sl_pending_start(p, sl_shim.shm.hdr, &a, sl_clock_mono_ns());
	if (dontwait || sl_fd_nonblocking(fd)) {
		rc = sl_admission_step(p, sl_clock_mono_ns(), act, made);
		if (rc == SL_PEND_WAIT && sl_held_defer(fd, d, m, p, addr, alen) == 0) {
			if (p->phase == SL_PEND_PLACES)
				sl_debug("%s on fd %d: non-blocking; concurrency limit reached: the connect waits "
				         "for a place", what, fd);
			else if (sl_shim.debug) {
				char dest[SL_HOST_MAX + 80];

				sl_dest_format(d, dest, sizeof(dest));
				sl_debug("%s %s: non-blocking; deferred to its slot in %.3fms", what, dest,
				         (double)(p->at - p->asked_ns) / 1e6);
			}
			return -EINPROGRESS;
		}
		if (rc == SL_PEND_WAIT) /* no record to defer it with: as a blocking caller */
			sl_debug("%s on fd %d: no free hold record: waiting inside connect", what, fd);
	}
	if (p->phase != SL_PEND_DONE) {
		pthread_cleanup_push(cancel_on_cancel, p);
		rc = sl_pending_wait(p, sl_shim_segment, NULL, NULL, act, made);
		pthread_cleanup_pop(0);
	} else {
		rc = p->err ? SL_PEND_REFUSED : SL_PEND_GO;
	}
	sl_admission_said(p, rc, what);
	if (rc != SL_PEND_GO)
		return -p->err;
	if (made)
		made->released_ns = p->t.mask ? p->t.released_ns : 0;
	keep_places(fd, d, m, what, p->taken);
	return 0;
}

int sl_connect_act(void *arg)
{
	struct sl_made_connect *mk = arg;
	int fl = sl_real.fcntl ? sl_real.fcntl(mk->fd, F_GETFL) : -1;

	mk->blocking = fl >= 0 && !(fl & O_NONBLOCK);
	if (mk->blocking)
		sl_real.fcntl(mk->fd, F_SETFL, fl | O_NONBLOCK);
	mk->rc = sl_real.connect ? sl_real.connect(mk->fd, mk->addr, mk->alen)
	                         : (int)sl_sys(SYS_connect, mk->fd, mk->addr, mk->alen);
	mk->err = mk->rc == 0 ? 0 : errno;
	if (mk->blocking)
		sl_real.fcntl(mk->fd, F_SETFL, fl);
	mk->done = 1;
	return 1;
}

/* A blocking connect whose SYN went inside its release: wait for the connection as
 * the kernel would have inside connect(), honouring SO_SNDTIMEO (then EINPROGRESS,
 * as the kernel says) and resuming after signals (as the shim's blocking waits
 * do).  Returns connect()'s result, errno set. */
static int finish_blocking(int fd)
{
	struct timeval tv = {0};
	socklen_t len = sizeof(tv);
	int64_t deadline = -1;

	if (sl_real_getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) == 0 && (tv.tv_sec || tv.tv_usec))
		deadline = sl_clock_mono_ns() + tv.tv_sec * SL_NS_PER_S + tv.tv_usec * SL_NS_PER_US;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int64_t left = deadline < 0 ? -1 : deadline - sl_clock_mono_ns();
		int err = 0, r;

		if (deadline >= 0 && left <= 0) {
			errno = EINPROGRESS;
			return -1;
		}
		r = sl_real.poll ? sl_real.poll(&p, 1, left < 0 ? -1 : (int)SL_MIN((left + SL_NS_PER_MS - 1) / SL_NS_PER_MS, (int64_t)INT32_MAX))
		                 : (int)sl_sys(SYS_ppoll, &p, 1, NULL, NULL, 0); /* poll(2) is not on arm64 */
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			continue; /* the deadline is checked above */
		len = sizeof(err);
		if (sl_real_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			return -1;
		if (err) {
			errno = err;
			return -1;
		}
		return 0;
	}
}

SL_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int (*real)(int, const struct sockaddr *, socklen_t) = SL_REAL(connect, connect);
	struct sl_made_connect made = {.done = 0};
	int rc, mark = 0;

	/* connect() again on a deferred socket: answered as for a connect under way. */
	if (sl_unlikely(sl_fdtab_get(fd)) && sl_held_reconnect(fd, &rc)) {
		errno = -rc;
		return -1;
	}
	if (sl_shim_active() && (mark = decide(fd, addr, len, &made)) < 0) {
		errno = -mark;
		return -1;
	}
	if (made.done) { /* made inside its release */
		rc = made.rc;
		errno = made.err;
		if (rc != 0 && made.err == EINPROGRESS && made.blocking)
			rc = finish_blocking(fd);
	} else if (sl_unlikely(!real)) {
		rc = (int)sl_sys(SYS_connect, fd, addr, len);
	} else {
		rc = real(fd, addr, len);
	}
	/* Only a connection that starts now is marked: a repeated connect() on one
	 * under way (EALREADY, EISCONN) keeps the mark it had, or its written state. */
	if (mark > 0 && (rc == 0 || errno == EINPROGRESS)) {
		int saved = errno;

		sl_fdtab_mark_sniff(fd);
		errno = saved;
	}
	/* A connect that failed outright gives back any concurrency place it took (an
	 * interrupted one goes on in the background: it keeps it). */
	if (rc != 0 && sl_unlikely(sl_fdtab_get(fd)) && errno != EINPROGRESS && errno != EINTR &&
	    errno != EALREADY && errno != EISCONN && errno != EAGAIN) {
		int saved = errno;

		sl_refund_failed(fd, saved);
		sl_held_drop_failed(fd);
		errno = saved;
	}
	return rc;
}

SL_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	int (*real)(int, int, int, void *, socklen_t *) = SL_REAL(getsockopt, getsockopt);
	int err;

	/* SO_ERROR of a deferred connect: 0 while it waits, then the refusal once. */
	if (sl_unlikely(level == SOL_SOCKET && name == SO_ERROR && sl_fdtab_get(fd)) && val && len &&
	    *len >= (socklen_t)sizeof(int) && sl_held_so_error(fd, &err)) {
		memcpy(val, &err, sizeof(err));
		*len = sizeof(err);
		return 0;
	}
	err = sl_unlikely(!real) ? (int)sl_sys(SYS_getsockopt, fd, level, name, val, len)
	                          : real(fd, level, name, val, len);
	/* A connect that failed, as a non-blocking caller learns it: refund = failed. */
	if (sl_unlikely(level == SOL_SOCKET && name == SO_ERROR && err == 0 && sl_fdtab_get(fd)) && val && len &&
	    *len >= (socklen_t)sizeof(int)) {
		int e, saved = errno;

		memcpy(&e, val, sizeof(e));
		if (e)
			sl_refund_failed(fd, e);
		errno = saved;
	}
	return err;
}

SL_EXPORT int shutdown(int fd, int how)
{
	int (*real)(int, int) = SL_REAL(shutdown, shutdown);
	int rc;

	if (sl_unlikely(sl_fdtab_get(fd)) && sl_held_shutdown(fd, &rc))
		return rc;
	if (sl_unlikely(!real))
		return (int)sl_sys(SYS_shutdown, fd, how);
	return real(fd, how);
}
