/*
 * sys.h - the core's own file system calls, made as raw system calls.
 *
 * The core is linked into the shim, which interposes close(), read(), write() and
 * more.  A core function that opened a file of its own (/proc/PID/stat, the
 * config) and closed it through libc's name would run the shim's close hook on it
 * - fd bookkeeping for a descriptor the host never saw, and from inside the
 * shim's own critical paths.  These go straight to the kernel instead; the core
 * uses them for every descriptor it opens itself (docs/design.md, "Layers").
 */
#ifndef SLUICE_SYS_H
#define SLUICE_SYS_H

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline int sl_sys_open(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0);
}

static inline ssize_t sl_sys_read(int fd, void *buf, size_t len)
{
	return (ssize_t)syscall(SYS_read, fd, buf, len);
}

static inline int sl_sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

#endif
