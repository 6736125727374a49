/* Resolution of the real libc functions behind our hooks. */
#include "shim.h"

#include <dlfcn.h>

struct sl_real sl_real;

void *sl_real_lookup(const char *name, void *hook)
{
	void *p = dlsym(RTLD_NEXT, name);

	/* A misordered preload could hand back ourselves: calling it would recurse. */
	return p == hook ? NULL : p;
}

void sl_real_resolve(void)
{
	sl_real.connect = sl_real_lookup("connect", (void *)connect);
	sl_real.getaddrinfo = sl_real_lookup("getaddrinfo", (void *)getaddrinfo);
	sl_real.gethostbyname = sl_real_lookup("gethostbyname", (void *)gethostbyname);
	sl_real.gethostbyname2 = sl_real_lookup("gethostbyname2", (void *)gethostbyname2);
	sl_real.gethostbyname_r = sl_real_lookup("gethostbyname_r", (void *)gethostbyname_r);
	sl_real.gethostbyname2_r = sl_real_lookup("gethostbyname2_r", (void *)gethostbyname2_r);
}
