/*
 * sys.h - system calls straight to the kernel, for sluice's own use.
 *
 * The core is linked into the shim, which interposes close(), read(), write(),
 * connect and more - and libc's syscall() too (src/shim/syscall.c), so that a
 * program reaching connect or sendmmsg through it is shaped as if it had called
 * the named function.  sluice's own calls must take neither path: a file the core
 * opened itself (/proc/PID/stat, the config) closed through libc's name would run
 * the shim's close hook on a descriptor the host never saw; the shim's futexes,
 * the seccomp supervisor's marked connect, the fall-backs when a real function
 * cannot be resolved and the audit line's socket would be shaped, or recurse.
 * sl_sys() is the way past: on x86-64 and arm64 the instruction itself; elsewhere
 * libc's syscall(), where the shim routes no number (syscall.c).  Like
 * syscall(2): the result, or -1 with errno set (docs/design.md, "Layers").
 */
#ifndef SLUICE_SYS_H
#define SLUICE_SYS_H

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline long sl_sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
	                 : "=a"(r)
	                 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
	                 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
	                 : "+r"(x0)
	                 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
	                 : "memory", "cc");
	r = x0;
#else
	return syscall(n, a, b, c, d, e, f);
#endif
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* sl_sys(NR, args...): up to six arguments, each passed as a long (as the kernel
 * takes them; a pointer or an int converts without loss). */
#define SL_SYS_(n, a, b, c, d, e, f, ...)                                                  \
	sl_sys6((long)(n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))
#define sl_sys(...) SL_SYS_(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)


static inline int sl_sys_open(const char *path, int flags)
{
	return (int)sl_sys(SYS_openat, AT_FDCWD, path, flags, 0);
}

static inline ssize_t sl_sys_read(int fd, void *buf, size_t len)
{
	return (ssize_t)sl_sys(SYS_read, fd, buf, len);
}

static inline int sl_sys_close(int fd)
{
	return (int)sl_sys(SYS_close, fd);
}

#endif
