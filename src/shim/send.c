/* Every send path: one fd-table look-up, and for a held connection's first write the
 * hold of held.c.  Nothing else happens here. */
#include "fdtab.h"

#include <errno.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* 0 to go on, or -1 with errno set. */
static inline int gate(int fd, int dontwait)
{
	int rc;

	if (sl_likely(!sl_fdtab_get(fd)))
		return 0;
	rc = sl_held_write(fd, dontwait);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

SL_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t (*real)(int, const void *, size_t, int) = SL_REAL(send, send);

	if (gate(fd, flags & MSG_DONTWAIT) < 0)
		return -1;
	if (sl_unlikely(!real))
		return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
	return real(fd, buf, len, flags);
}

SL_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                         const struct sockaddr *addr, socklen_t alen)
{
	ssize_t (*real)(int, const void *, size_t, int, const struct sockaddr *, socklen_t) =
		SL_REAL(sendto, sendto);

	if (gate(fd, flags & MSG_DONTWAIT) < 0)
		return -1;
	if (sl_unlikely(!real))
		return syscall(SYS_sendto, fd, buf, len, flags, addr, alen);
	return real(fd, buf, len, flags, addr, alen);
}

SL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t (*real)(int, const struct msghdr *, int) = SL_REAL(sendmsg, sendmsg);

	if (gate(fd, flags & MSG_DONTWAIT) < 0)
		return -1;
	if (sl_unlikely(!real))
		return syscall(SYS_sendmsg, fd, msg, flags);
	return real(fd, msg, flags);
}

SL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	int (*real)(int, struct mmsghdr *, unsigned int, int) = SL_REAL(sendmmsg, sendmmsg);

	if (gate(fd, flags & MSG_DONTWAIT) < 0)
		return -1;
	if (sl_unlikely(!real))
		return (int)syscall(SYS_sendmmsg, fd, vec, n, flags);
	return real(fd, vec, n, flags);
}

SL_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	ssize_t (*real)(int, const void *, size_t) = SL_REAL(write, write);

	if (gate(fd, 0) < 0)
		return -1;
	if (sl_unlikely(!real))
		return syscall(SYS_write, fd, buf, len);
	return real(fd, buf, len);
}

SL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	ssize_t (*real)(int, const struct iovec *, int) = SL_REAL(writev, writev);

	if (gate(fd, 0) < 0)
		return -1;
	if (sl_unlikely(!real))
		return syscall(SYS_writev, fd, iov, n);
	return real(fd, iov, n);
}

SL_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	ssize_t (*real)(int, int, off_t *, size_t) = SL_REAL(sendfile, sendfile);

	if (gate(out, 0) < 0)
		return -1;
	if (sl_unlikely(!real))
		return syscall(SYS_sendfile, out, in, off, count);
	return real(out, in, off, count);
}

SL_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	ssize_t (*real)(int, int, off_t *, size_t) = SL_REAL(sendfile64, sendfile64);

	if (gate(out, 0) < 0)
		return -1;
	if (sl_unlikely(!real))
		return syscall(SYS_sendfile, out, in, off, count);
	return real(out, in, off, count);
}
