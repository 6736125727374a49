/* Resolution of the real libc functions behind our hooks. */
#include "shim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/sendfile.h>
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
