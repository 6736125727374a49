/* Resolution of the real libc functions behind our hooks. */
#include "shim.h"
#include "sluice/seccomp.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

struct sl_real sl_real;

void *sl_real_lookup(const char *name, void *hook)
{
	void *p = dlsym(RTLD_NEXT, name);

	/* A misordered preload could hand back ourselves: calling it would recurse. */
	return p == hook ? NULL : p;
}

void sl_real_resolve(void)
{
#define SL_HOOK(ret, name, params) sl_real.name = sl_real_lookup(#name, (void *)name);
#define SL_EXPORT_ONLY(name)
#include "hooks.def"
#undef SL_HOOK
#undef SL_EXPORT_ONLY
}

/* Under `sluice run --seccomp` (include/sluice/seccomp.h): the calls the shim has
 * decided go to the kernel marked, so the supervisor's filter lets them by.  Raw
 * system calls: unlike libc's, not cancellation points (a thread cancelled there
 * is cancelled at its next one). */
static int pass_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	return (int)sl_sys(SYS_connect, fd, addr, len, SL_SECCOMP_PASS);
}

static ssize_t pass_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return sl_sys(SYS_sendmsg, fd, msg, flags, SL_SECCOMP_PASS);
}

static ssize_t pass_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr,
                           socklen_t alen)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_name = (void *)addr, .msg_namelen = addr ? alen : 0, .msg_iov = &iov,
	                     .msg_iovlen = 1};

	return pass_sendmsg(fd, &msg, flags);
}

void sl_real_seccomp_pass(void)
{
	const char *env = getenv(SL_SECCOMP_ENV);

	if (!env || strcmp(env, "1") != 0)
		return;
	sl_real.connect = pass_connect;
	sl_real.sendmsg = pass_sendmsg;
	sl_real.sendto = pass_sendto;
}
