/*
 * syscall.c - libc's syscall() interposed: a program (or a library such as libuv,
 * which reaches calls glibc added late - sendmmsg, accept4 - through it) that
 * asks for connect, a send, a write or a descriptor change by number takes the
 * same path as the named call.  Every other number goes to the kernel as libc's
 * syscall() would send it, at the cost of the switch below.
 *
 * Routed: the calls the shim shapes (connect, sendto, sendmsg, sendmmsg, write,
 * writev, sendfile), those whose answers it reads (read, readv, recvfrom,
 * recvmsg, getsockopt), and those that change what it knows of a descriptor
 * (socket, shutdown, close, close_range, dup, dup2, dup3, fcntl, epoll_ctl,
 * execve, execveat).  Not routed, and documented as out of reach in docs/programs.md
 * ("What it does not reach"): the waits (the kernel's poll and epoll take arguments libc's
 * do not), and whatever never calls syscall() - an inline `syscall` instruction,
 * io_uring.  Only on x86-64 and arm64, where the shim's own raw calls bypass this
 * function (sluice/sys.h); elsewhere it forwards every number unchanged.
 *
 * The arguments: syscall() is variadic and does not say how many it got, so all
 * six are read, as the kernel does from its registers.  On x86-64 and arm64 the
 * first five (seven on arm64) are registers the prologue saved; the sixth on
 * x86-64 is the caller's stack slot, always readable - read, never trusted: a
 * routed call only uses the arguments its number has.
 */
#include "shim.h"

#include <fcntl.h>
#include <stdarg.h>
#include <sys/sendfile.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__aarch64__)
#define SL_ROUTE_SYSCALLS 1
#endif

#ifdef SL_ROUTE_SYSCALLS
/* The named call for a routed number; 0 with *out untouched for the others. */
static int routed(long n, const long *x, long *out)
{
	switch (n) {
	case SYS_socket: *out = socket((int)x[0], (int)x[1], (int)x[2]); return 1;
	case SYS_connect: *out = connect((int)x[0], (const struct sockaddr *)x[1], (socklen_t)x[2]); return 1;
	case SYS_shutdown: *out = shutdown((int)x[0], (int)x[1]); return 1;
	case SYS_getsockopt:
		*out = getsockopt((int)x[0], (int)x[1], (int)x[2], (void *)x[3], (socklen_t *)x[4]);
		return 1;
	case SYS_sendto:
		*out = sendto((int)x[0], (const void *)x[1], (size_t)x[2], (int)x[3],
		              (const struct sockaddr *)x[4], (socklen_t)x[5]);
		return 1;
	case SYS_sendmsg: *out = sendmsg((int)x[0], (const struct msghdr *)x[1], (int)x[2]); return 1;
	case SYS_sendmmsg:
		*out = sendmmsg((int)x[0], (struct mmsghdr *)x[1], (unsigned)x[2], (int)x[3]);
		return 1;
	case SYS_write: *out = write((int)x[0], (const void *)x[1], (size_t)x[2]); return 1;
	case SYS_writev: *out = writev((int)x[0], (const struct iovec *)x[1], (int)x[2]); return 1;
	case SYS_sendfile: *out = sendfile((int)x[0], (int)x[1], (off_t *)x[2], (size_t)x[3]); return 1;
	case SYS_read: *out = read((int)x[0], (void *)x[1], (size_t)x[2]); return 1;
	case SYS_readv: *out = readv((int)x[0], (const struct iovec *)x[1], (int)x[2]); return 1;
	case SYS_recvfrom:
		*out = recvfrom((int)x[0], (void *)x[1], (size_t)x[2], (int)x[3], (struct sockaddr *)x[4],
		                (socklen_t *)x[5]);
		return 1;
	case SYS_recvmsg: *out = recvmsg((int)x[0], (struct msghdr *)x[1], (int)x[2]); return 1;
	case SYS_close: *out = close((int)x[0]); return 1;
	case SYS_close_range: *out = close_range((unsigned)x[0], (unsigned)x[1], (int)x[2]); return 1;
	case SYS_dup: *out = dup((int)x[0]); return 1;
#ifdef SYS_dup2
	case SYS_dup2: *out = dup2((int)x[0], (int)x[1]); return 1;
#endif
	case SYS_dup3: *out = dup3((int)x[0], (int)x[1], (int)x[2]); return 1;
	case SYS_fcntl: *out = fcntl((int)x[0], (int)x[1], (void *)x[2]); return 1;
	case SYS_epoll_ctl:
		*out = epoll_ctl((int)x[0], (int)x[1], (int)x[2], (struct epoll_event *)x[3]);
		return 1;
	case SYS_execve:
		*out = execve((const char *)x[0], (char *const *)x[1], (char *const *)x[2]);
		return 1;
	case SYS_execveat:
		*out = execveat((int)x[0], (const char *)x[1], (char *const *)x[2], (char *const *)x[3],
		                (int)x[4]);
		return 1;
	}
	return 0;
}
#endif

/* Not instrumented under ASan: reading the sixth argument of a call that passed
 * fewer reads the caller's stack slot, which is what the ABI allows here. */
SL_EXPORT __attribute__((no_sanitize_address)) long syscall(long n, ...)
{
	long x[6], out;
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < 6; i++)
		x[i] = va_arg(ap, long);
	va_end(ap);
#ifdef SL_ROUTE_SYSCALLS
	if (routed(n, x, &out))
		return out;
	return sl_sys6(n, x[0], x[1], x[2], x[3], x[4], x[5]);
#else
	long (*real)(long, ...) = SL_REAL(syscall, syscall);

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	(void)out;
	return real(n, x[0], x[1], x[2], x[3], x[4], x[5]);
#endif
}
