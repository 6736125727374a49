/*
 * slow_send.so: preloaded after libsluice.so (LD_PRELOAD="libsluice.so:this"),
 * it stands between the shim and libc's stream writes (send, sendto, sendmsg,
 * write, writev) and sleeps SLOW_SEND_MS (default 8) before every other write on
 * a TCP socket that begins a request (an HTTP/1 method, or an HTTP/2 HEADERS
 * frame of a client stream) - a writer preempted between its request's release
 * and its send, made to happen every time (t_write_inside).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int count;

static int is_tcp(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

/* Before a write of `len` bytes at `p` on fd: held up if it begins a request. */
static void maybe_late(int fd, const void *p, size_t len)
{
	static const char *const methods[] = {"GET ", "POST ", "PUT ", "HEAD "};
	const char *env = getenv("SLOW_SEND_MS");
	long ms = env ? atol(env) : 8;
	int starts = 0;

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (len >= strlen(methods[i]) && memcmp(p, methods[i], strlen(methods[i])) == 0)
			starts = 1;
	/* HTTP/2: a write that begins with a HEADERS frame of a client stream (odd),
	 * which opens a request (the frame's header: 24-bit length, type 1, flags,
	 * 31-bit stream id). */
	if (len >= 9 && ((const unsigned char *)p)[3] == 1 && (((const unsigned char *)p)[8] & 1))
		starts = 1;
	if (starts && is_tcp(fd) && __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED) % 2 == 0) {
		struct timespec late = {ms / 1000, (ms % 1000) * 1000 * 1000};

		nanosleep(&late, NULL);
	}
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	maybe_late(fd, buf, len);
	return NEXT(send)(fd, buf, len, flags);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr, socklen_t alen)
{
	maybe_late(fd, buf, len);
	return NEXT(sendto)(fd, buf, len, flags, addr, alen);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (msg && msg->msg_iovlen > 0)
		maybe_late(fd, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len);
	return NEXT(sendmsg)(fd, msg, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	maybe_late(fd, buf, len);
	return NEXT(write)(fd, buf, len);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	if (n > 0)
		maybe_late(fd, iov[0].iov_base, iov[0].iov_len);
	return NEXT(writev)(fd, iov, n);
}
