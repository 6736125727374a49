/*
 * The read side.  For meter = requests on protocols the shim cannot parse (TLS and
 * others), a request is a turn, and a turn starts with the first write after a
 * read that returned data; and the answers of a destination whose section reads
 * them are followed for its signals (answers.c).  So each read that returns data
 * (or the end) on a tracked socket is noted with its bytes.  On any other fd this
 * is one table load before and after the real call.  A read of
 * a deferred connect (not connected yet: ENOTCONN) says EAGAIN, as a read of a
 * connect under way does.
 */
#include "fdtab.h"
#include "answers.h"
#include "held.h"
#include "record.h"
#include "tls.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* A read on a followed socket is counted while under way (record.h, reads_begun):
 * a peek ahead of the program looks only when none is (h2.h). */
static inline struct sl_record *read_begins(int fd)
{
	struct sl_record *rec = sl_unlikely(sl_fdtab_get(fd)) ? sl_record_of(fd) : NULL;

	if (rec)
		atomic_fetch_add_explicit(&rec->reads_begun, 1, memory_order_seq_cst);
	return rec;
}

static inline ssize_t read_ends(struct sl_record *rec, ssize_t r)
{
	if (rec)
		atomic_fetch_add_explicit(&rec->reads_done, 1, memory_order_release);
	return r;
}

static inline ssize_t noted_iov(int fd, ssize_t r, const struct iovec *iov, int iovcnt)
{
	if (sl_unlikely(sl_tls_call != NULL))
		sl_tls_saw(fd); /* inside libssl: the socket the SSL connection is (tls.c) */
	if (r >= 0 && sl_unlikely(sl_fdtab_get(fd))) {
		int saved = errno;

		sl_held_read(fd, iov, iovcnt, (size_t)r);
		errno = saved;
	} else if (sl_unlikely(r < 0 && errno == ENOTCONN) && sl_fdtab_get(fd) && sl_held_is_deferred(fd)) {
		errno = EAGAIN; /* a deferred connect reads as one still connecting */
	} else if (sl_unlikely(r < 0 && errno != EAGAIN && errno != EINTR) && sl_fdtab_get(fd)) {
		int saved = errno;

		sl_refund_failed(fd, saved); /* refused, reset, timed out: refund = failed */
		errno = saved;
	}
	return r;
}

static inline ssize_t noted_buf(int fd, ssize_t r, void *buf)
{
	struct iovec one = {buf, r > 0 ? (size_t)r : 0};

	return noted_iov(fd, r, &one, 1);
}

SL_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	ssize_t (*real)(int, void *, size_t) = SL_REAL(read, read);
	struct sl_record *rec = read_begins(fd);

	return read_ends(rec, noted_buf(fd, real ? real(fd, buf, len) : sl_sys(SYS_read, fd, buf, len), buf));
}

SL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	ssize_t (*real)(int, const struct iovec *, int) = SL_REAL(readv, readv);
	struct sl_record *rec = read_begins(fd);

	return read_ends(rec, noted_iov(fd, real ? real(fd, iov, n) : sl_sys(SYS_readv, fd, iov, n), iov, n));
}

SL_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t (*real)(int, void *, size_t, int) = SL_REAL(recv, recv);
	struct sl_record *rec;

	/* MSG_PEEK looks without taking: the reply is not read yet. */
	if (flags & MSG_PEEK)
		return real ? real(fd, buf, len, flags) : sl_sys(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
	rec = read_begins(fd);
	return read_ends(rec, noted_buf(fd, real ? real(fd, buf, len, flags)
	                                        : sl_sys(SYS_recvfrom, fd, buf, len, flags, NULL, NULL), buf));
}

SL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
                           socklen_t *alen)
{
	ssize_t (*real)(int, void *, size_t, int, struct sockaddr *, socklen_t *) =
		SL_REAL(recvfrom, recvfrom);
	struct sl_record *rec = flags & MSG_PEEK ? NULL : read_begins(fd);
	ssize_t r = real ? real(fd, buf, len, flags, addr, alen)
	                 : sl_sys(SYS_recvfrom, fd, buf, len, flags, addr, alen);

	return flags & MSG_PEEK ? r : read_ends(rec, noted_buf(fd, r, buf));
}

SL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t (*real)(int, struct msghdr *, int) = SL_REAL(recvmsg, recvmsg);
	struct sl_record *rec = flags & MSG_PEEK || !msg ? NULL : read_begins(fd);
	ssize_t r = real ? real(fd, msg, flags) : sl_sys(SYS_recvmsg, fd, msg, flags);

	return flags & MSG_PEEK || !msg ? r : read_ends(rec, noted_iov(fd, r, msg->msg_iov, (int)msg->msg_iovlen));
}
