/* connect(): a matched TCP connection waits for its place (or, non-blocking, its
 * first write does); a UDP socket connected to a matched peer holds each datagram;
 * an unmatched TCP connection may be marked so its first write can name it. */
#include "fdtab.h"
#include "sluice/clock.h"
#include "sluice/conc.h"
#include "sluice/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || len < 1)
		return 0;
	return info.tcpi_state == TCP_CLOSE;
}

/* A UDP socket connected to a matched peer: each datagram it sends is held. */
static void connect_udp(int fd, const struct sl_dest *d)
{
	struct sl_match m;

	if (sl_hold_match_meter(d, SL_METER_DATAGRAMS, &m) == 0 || sl_socket_type(fd) != SOCK_DGRAM)
		return;
	if (sl_held_connect(fd, d, &m, SL_KIND_CONNECTED_UDP) < 0)
		sl_debug("connect on fd %d: no free hold record; its datagrams go unshaped", fd);
	else
		sl_debug("connect on fd %d: UDP to a matched peer; each datagram takes a place", fd);
}

/* Returns 0 to let the connect go, 1 to let it go and mark the socket for a look
 * at its first write (no section matched, some match by name), or -errno to fail
 * it with. */
static int decide(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sl_dest d;
	struct sl_tcp_match t;
	char name[SL_HOST_MAX];
	int rc;

	if (sl_unlikely(sl_fdtab_get(fd)))
		sl_held_drop_udp(fd); /* a UDP socket's earlier peer no longer applies */
	if (sl_dest_from_sockaddr(&d, addr, len) != 0)
		return 0; /* other families, short or NULL addresses: the kernel's business */
	sl_hold_name(&d, name, sizeof(name));
	connect_udp(fd, &d);
	sl_hold_match_tcp(&d, &t);
	/* Unmatched: with name patterns about, the first write may still name it (the
	 * name known here, if any, can be a proxy's, or a CNAME's). */
	if (t.n == 0 && t.nr == 0 && t.nb == 0)
		return sl_shim.shm.hdr->has_names &&
		       (sl_shim.shm.hdr->meters & ((1u << SL_METER_CONNECTIONS) | (1u << SL_METER_REQUESTS) |
		                                   (1u << SL_METER_BYTES)));
	if (!sl_is_fresh_tcp(fd))
		return 0;
	rc = t.n ? sl_hold_connection(fd, &d, &t.m, "connect", addr, len) : 0;
	/* meter = requests, bytes: the connection keeps a record for its life,
	 * whatever the connect itself did (a deferred one included). */
	if ((t.nr || t.nb) && (rc == 0 || rc == -EINPROGRESS) && sl_held_stream(fd, &d, &t.rm, &t.bm) < 0)
		sl_debug("connect on fd %d: no free hold record: its requests and bytes go unshaped", fd);
	return rc;
}

/* A connection to sections of which `conc` limit concurrency: a place in each is
 * taken first (a blocking caller sleeps on the segment's futex for it; a
 * non-blocking one proceeds, its first write waiting), then the rate part as for
 * any connection.  The places stay with the fd's record until it closes. */
static int hold_limited(int fd, const struct sl_dest *d, const struct sl_match *m, const char *what,
                        uint64_t conc, const struct sockaddr *addr, socklen_t alen)
{
	struct sl_shm_header *h = sl_shim.shm.hdr;
	int refuse = 0, full = 0, rc;
	int64_t max_wait = sl_conc_max_wait(h, conc, &refuse);
	int64_t deadline = max_wait < 0 ? -1 : sl_clock_mono_ns() + max_wait;
	uint64_t taken = 0;

	if (sl_fd_nonblocking(fd)) {
		struct sl_ticket t;

		rc = sl_wait_check(h, m, sl_clock_mono_ns(), sl_shim.pid, &t);
		if (rc == -ECONNREFUSED)
			return -(t.refuse_errno ? t.refuse_errno : ECONNREFUSED);
		/* Full: the connect is not made until a place frees (the program sees
		 * EINPROGRESS and waits for writability, which comes when it is made), so
		 * the destination never sees more than N connections. */
		rc = sl_wait_conc(h, m, sl_shim.pid, -2, &taken, &full);
		if (sl_held_limited(fd, d, m, rc == -EBUSY ? SL_HOLD_DEFERRED : SL_HOLD_FIRST, taken,
		                    deadline, refuse, addr, alen) == 0) {
			sl_debug("%s on fd %d: non-blocking; %s", what, fd,
			         rc == -EBUSY ? "concurrency limit reached: the connect waits for a place"
			                      : "holds a concurrency place; its first write takes the rate place");
			return rc == -EBUSY ? -EINPROGRESS : 0;
		}
		if (taken)
			sl_wait_conc_put(h, taken, m, sl_shim.pid);
		taken = 0; /* no record to keep them: wait below as a blocking caller would */
	}
	rc = sl_wait_conc(h, m, sl_shim.pid, deadline, &taken, &full);
	if (rc == -ECONNREFUSED) {
		sl_debug("%s on fd %d: refused (no concurrency place within max_wait)", what, fd);
		return -(refuse ? refuse : ECONNREFUSED);
	}
	if ((rc = sl_hold_wait(d, m, what, ECONNREFUSED)) < 0) {
		sl_wait_conc_put(h, taken, m, sl_shim.pid);
		return rc;
	}
	if (taken && sl_held_limited(fd, d, m, SL_HOLD_OPEN, taken, -1, 0, NULL, 0) < 0) {
		sl_debug("%s on fd %d: no free hold record: its concurrency place is not kept", what, fd);
		sl_wait_conc_put(h, taken, m, sl_shim.pid);
	}
	return 0;
}

/* A new TCP connection to matched sections m, by connect() or sendto(MSG_FASTOPEN).
 * Blocking: waits here.  Non-blocking: proceeds, and its first write is held
 * (held.c); only when the pool of hold records is full does it wait here instead.
 * Returns 0 to go, or -errno. */
int sl_hold_connection(int fd, const struct sl_dest *d, const struct sl_match *m, const char *what,
                       const struct sockaddr *addr, socklen_t alen)
{
	uint64_t conc = sl_shim.mode == SL_SHIM_CLOSED ? 0 : sl_conc_sections(sl_shim.shm.hdr, m);

	if (conc)
		return hold_limited(fd, d, m, what, conc, addr, alen);
	if (sl_fd_nonblocking(fd)) {
		struct sl_ticket t;
		char dest[SL_HOST_MAX + 80];
		int rc;

		if (sl_shim.debug)
			sl_dest_format(d, dest, sizeof(dest));
		/* No place within max_wait now: refuse the connect itself, as a blocking
		 * one would be; nothing is charged, so a happy-eyeballs pair is refused
		 * alike.  Otherwise the place is taken at the first write. */
		rc = sl_shim.mode == SL_SHIM_CLOSED ? -ECONNREFUSED
		     : sl_wait_check(sl_shim.shm.hdr, m, sl_clock_mono_ns(), sl_shim.pid, &t);
		if (rc == -ECONNREFUSED) {
			sl_debug("%s %s: refused (no place within max_wait)", what, dest);
			return -(sl_shim.mode != SL_SHIM_CLOSED && t.refuse_errno ? t.refuse_errno
			                                                          : ECONNREFUSED);
		}
		if (sl_held_connect(fd, d, m, SL_KIND_CONNECTION) == 0) {
			sl_debug("%s %s: non-blocking; its first write takes the place", what, dest);
			return 0;
		}
	}
	return sl_hold_wait(d, m, what, ECONNREFUSED);
}

SL_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int (*real)(int, const struct sockaddr *, socklen_t) = SL_REAL(connect, connect);
	int rc, mark = 0;

	if (sl_shim_active() && (mark = decide(fd, addr, len)) < 0) {
		errno = -mark;
		return -1;
	}
	if (sl_unlikely(!real))
		rc = (int)syscall(SYS_connect, fd, addr, len);
	else
		rc = real(fd, addr, len);
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

		sl_held_drop_failed(fd);
		errno = saved;
	}
	return rc;
}
