/* connect(): a matched stream connection waits for its slot before it is made. */
#include "fdtab.h"
#include "sluice/clock.h"
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
static int is_fresh_tcp(int fd)
{
	struct tcp_info info;
	socklen_t len = sizeof(info);

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || len < 1)
		return 0;
	return info.tcpi_state == TCP_CLOSE;
}

/* Returns 0 to let the connect go, or -errno to fail it with. */
static int decide(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sl_dest d;
	struct sl_match m;
	char name[SL_HOST_MAX];

	if (sl_dest_from_sockaddr(&d, addr, len) != 0)
		return 0; /* other families, short or NULL addresses: the kernel's business */
	if (sl_hold_match(&d, name, sizeof(name), &m) == 0)
		return 0;
	if (!is_fresh_tcp(fd))
		return 0;
	/* Non-blocking: connect now, hold the first write (held.c).  Only when the
	 * pool of hold records is full does such a connect wait here instead. */
	if (sl_fd_nonblocking(fd)) {
		struct sl_ticket t;
		char dest[SL_HOST_MAX + 80];
		int rc;

		if (sl_shim.debug)
			sl_dest_format(&d, dest, sizeof(dest));
		/* No place within max_wait now: refuse the connect itself, as a blocking
		 * one would be; nothing is charged, so a happy-eyeballs pair is refused
		 * alike.  Otherwise the place is taken at the first write. */
		rc = sl_shim.mode == SL_SHIM_CLOSED ? -ECONNREFUSED
		     : sl_wait_check(sl_shim.shm.hdr, &m, sl_clock_mono_ns(), sl_shim.pid, &t);
		if (rc == -ECONNREFUSED) {
			sl_debug("connect %s: refused (no place within max_wait)", dest);
			return -(sl_shim.mode != SL_SHIM_CLOSED && t.refuse_errno ? t.refuse_errno
			                                                          : ECONNREFUSED);
		}
		if (sl_held_connect(fd, &d, &m) == 0) {
			sl_debug("connect %s: non-blocking; its first write takes the place", dest);
			return 0;
		}
	}
	return sl_hold_wait(&d, &m, "connect", ECONNREFUSED);
}

SL_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int (*real)(int, const struct sockaddr *, socklen_t) = SL_REAL(connect, connect);
	int rc;

	if (sl_shim_active() && (rc = decide(fd, addr, len)) < 0) {
		errno = -rc;
		return -1;
	}
	if (sl_unlikely(!real))
		return (int)syscall(SYS_connect, fd, addr, len);
	return real(fd, addr, len);
}
