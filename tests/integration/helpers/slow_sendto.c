/*
 * slow_sendto.so: preloaded after libsluice.so (LD_PRELOAD="libsluice.so:this"),
 * it stands between the shim and libc's sendto and sleeps 20 ms before every
 * other datagram sent with an address - a sender preempted between its release
 * and its send, made to happen every time (t_udp).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/socket.h>
#include <time.h>

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr, socklen_t alen)
{
	static ssize_t (*real)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	static int count;

	if (!real)
		real = (ssize_t(*)(int, const void *, size_t, int, const struct sockaddr *, socklen_t))dlsym(
			RTLD_NEXT, "sendto");
	if (addr && count++ % 2 == 0) {
		struct timespec late = {0, 20 * 1000 * 1000};

		nanosleep(&late, NULL);
	}
	return real(fd, buf, len, flags, addr, alen);
}
