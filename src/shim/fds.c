/* fd bookkeeping: a held connection's record follows its fd through close, dup and
 * fcntl(F_DUPFD*), and goes (returning an unreleased place) when the last fd does. */
#include "fdtab.h"
#include "held.h"
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A vfork child (Python's subprocess, posix_spawn users) runs in its parent's
 * memory until it execs, and pthread_atfork does not tell us: its close and dup2
 * calls must not touch the parent's table.  Asked only when there is something to
 * touch, so it costs a system call only on held sockets. */
static int in_vfork_child(void)
{
	return getpid() != sl_shim.pid;
}

/* The fd is about to be closed (or replaced by dup2/dup3).  Its remembered epoll
 * registration is left alone: a stale one is only ever used for EPOLL_CTL_MOD,
 * which fails harmlessly on an fd that is not registered, and a new registration
 * of the fd number replaces it.  So close costs one table load. */
static inline void forget(int fd)
{
	unsigned idx = sl_fdtab_get(fd);

	if (sl_likely(!idx))
		return;
	/* A mark (an unmatched connection, its first write not yet read) is dropped
	 * without asking getpid(), which would be a system call on an unmatched path;
	 * a vfork child closing its parent's marked socket with close() costs that
	 * connection its naming, nothing worse. */
	if (idx == SL_FD_SNIFF || !in_vfork_child())
		sl_held_close(fd);
}

static void forget_range(unsigned first, unsigned last)
{
	unsigned max = (unsigned)atomic_load(&sl_fd_max);

	if ((atomic_load(&sl_records_active) == 0 && atomic_load(&sl_sniff_marks) == 0) ||
	    in_vfork_child())
		return;
	for (unsigned fd = first; fd <= last && fd <= max; fd++)
		if (sl_fdtab_get((int)fd))
			sl_held_close((int)fd);
}

SL_EXPORT int close(int fd)
{
	int (*real)(int) = SL_REAL(close, close);
	int rc;

	if (sl_likely(!sl_fdtab_get(fd)))
		return real ? real(fd) : (int)sl_sys(SYS_close, fd);
	/* A connection holding a concurrency place gives it back only once it is
	 * really closed, so the destination never sees the next one open first. */
	if (sl_held_closing_keeps_place(fd) && !in_vfork_child()) {
		struct sl_record *last = sl_record_unlink(fd);
		int saved;

		rc = real ? real(fd) : (int)sl_sys(SYS_close, fd);
		saved = errno;
		if (last)
			sl_held_finish(last);
		errno = saved;
		return rc;
	}
	forget(fd);
	return real ? real(fd) : (int)sl_sys(SYS_close, fd);
}

SL_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	int (*real)(unsigned int, unsigned int, int) = SL_REAL(close_range, close_range);
	int rc;

	rc = real ? real(first, last, flags) : (int)sl_sys(SYS_close_range, first, last, flags);
	if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
		forget_range(first, last);
	return rc;
}

SL_EXPORT void closefrom(int low)
{
	void (*real)(int) = SL_REAL(closefrom, closefrom);

	if (low >= 0)
		forget_range((unsigned)low, ~0u);
	if (real)
		real(low);
	else
		sl_sys(SYS_close_range, (unsigned)low, ~0u, 0);
}

SL_EXPORT int fclose(FILE *f)
{
	int (*real)(FILE *) = SL_REAL(fclose, fclose);

	if (f && atomic_load(&sl_records_active))
		forget(fileno(f));
	return real ? real(f) : EOF;
}

SL_EXPORT int dup(int fd)
{
	int (*real)(int) = SL_REAL(dup, dup);
	int rc = real ? real(fd) : (int)sl_sys(SYS_dup, fd);

	if (rc >= 0 && sl_unlikely(sl_fdtab_get(fd)) && !in_vfork_child())
		sl_record_share(fd, rc);
	return rc;
}

/* dup2(2) without libc's: arm64 has no dup2 system call, only dup3, which refuses
 * fd == newfd where dup2 checks fd and returns it. */
static int sys_dup2(int fd, int newfd)
{
#ifdef SYS_dup2
	return (int)sl_sys(SYS_dup2, fd, newfd);
#else
	if (fd == newfd)
		return sl_sys(SYS_fcntl, fd, F_GETFD) < 0 ? -1 : newfd;
	return (int)sl_sys(SYS_dup3, fd, newfd, 0);
#endif
}

SL_EXPORT int dup2(int fd, int newfd)
{
	int (*real)(int, int) = SL_REAL(dup2, dup2);
	int rc;

	if (fd != newfd)
		forget(newfd);
	rc = real ? real(fd, newfd) : sys_dup2(fd, newfd);
	if (rc >= 0 && fd != newfd && sl_unlikely(sl_fdtab_get(fd)) && !in_vfork_child())
		sl_record_share(fd, rc);
	return rc;
}

SL_EXPORT int dup3(int fd, int newfd, int flags)
{
	int (*real)(int, int, int) = SL_REAL(dup3, dup3);
	int rc;

	if (fd != newfd)
		forget(newfd);
	rc = real ? real(fd, newfd, flags) : (int)sl_sys(SYS_dup3, fd, newfd, flags);
	if (rc >= 0 && sl_unlikely(sl_fdtab_get(fd)) && !in_vfork_child())
		sl_record_share(fd, rc);
	return rc;
}

/* fcntl's third argument is an int or a pointer; passing it on as a pointer-sized
 * value is what every caller's ABI expects. */
static int do_fcntl(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	int rc = real ? real(fd, cmd, arg) : (int)sl_sys(SYS_fcntl, fd, cmd, arg);

	if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && sl_unlikely(sl_fdtab_get(fd)) &&
	    !in_vfork_child())
		sl_record_share(fd, rc);
	return rc;
}

SL_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(SL_REAL(fcntl, fcntl), fd, cmd, arg);
}

SL_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(SL_REAL(fcntl64, fcntl64), fd, cmd, arg);
}

/* A new socket's fd number may have been closed behind the shim's back (a raw
 * system call, io_uring): what the table still says about that number is stale
 * and goes, returning any place it reserved.  One table load otherwise. */
SL_EXPORT int socket(int domain, int type, int protocol)
{
	int (*real)(int, int, int) = SL_REAL(socket, socket);
	int fd = real ? real(domain, type, protocol) : (int)sl_sys(SYS_socket, domain, type, protocol);

	if (fd >= 0 && sl_unlikely(sl_fdtab_get(fd))) {
		int saved = errno;

		sl_held_close(fd);
		errno = saved;
	}
	return fd;
}
