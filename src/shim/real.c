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
	sl_real.connect = sl_real_lookup("connect", (void *)connect);
	sl_real.getsockopt = sl_real_lookup("getsockopt", (void *)getsockopt);
	sl_real.shutdown = sl_real_lookup("shutdown", (void *)shutdown);
	sl_real.getaddrinfo = sl_real_lookup("getaddrinfo", (void *)getaddrinfo);
	sl_real.gethostbyname = sl_real_lookup("gethostbyname", (void *)gethostbyname);
	sl_real.gethostbyname2 = sl_real_lookup("gethostbyname2", (void *)gethostbyname2);
	sl_real.gethostbyname_r = sl_real_lookup("gethostbyname_r", (void *)gethostbyname_r);
	sl_real.gethostbyname2_r = sl_real_lookup("gethostbyname2_r", (void *)gethostbyname2_r);
	sl_real.send = sl_real_lookup("send", (void *)send);
	sl_real.sendto = sl_real_lookup("sendto", (void *)sendto);
	sl_real.sendmsg = sl_real_lookup("sendmsg", (void *)sendmsg);
	sl_real.sendmmsg = sl_real_lookup("sendmmsg", (void *)sendmmsg);
	sl_real.write = sl_real_lookup("write", (void *)write);
	sl_real.writev = sl_real_lookup("writev", (void *)writev);
	sl_real.sendfile = sl_real_lookup("sendfile", (void *)sendfile);
	sl_real.sendfile64 = sl_real_lookup("sendfile64", (void *)sendfile64);
	sl_real.close = sl_real_lookup("close", (void *)close);
	sl_real.close_range = sl_real_lookup("close_range", (void *)close_range);
	sl_real.closefrom = sl_real_lookup("closefrom", (void *)closefrom);
	sl_real.fclose = sl_real_lookup("fclose", (void *)fclose);
	sl_real.dup = sl_real_lookup("dup", (void *)dup);
	sl_real.dup2 = sl_real_lookup("dup2", (void *)dup2);
	sl_real.dup3 = sl_real_lookup("dup3", (void *)dup3);
	sl_real.fcntl = sl_real_lookup("fcntl", (void *)fcntl);
	sl_real.fcntl64 = sl_real_lookup("fcntl64", (void *)fcntl64);
	sl_real.poll = sl_real_lookup("poll", (void *)poll);
	sl_real.ppoll = sl_real_lookup("ppoll", (void *)ppoll);
	sl_real.select = sl_real_lookup("select", (void *)select);
	sl_real.pselect = sl_real_lookup("pselect", (void *)pselect);
	sl_real.epoll_ctl = sl_real_lookup("epoll_ctl", (void *)epoll_ctl);
	sl_real.epoll_wait = sl_real_lookup("epoll_wait", (void *)epoll_wait);
	sl_real.epoll_pwait = sl_real_lookup("epoll_pwait", (void *)epoll_pwait);
	sl_real.epoll_pwait2 = sl_real_lookup("epoll_pwait2", (void *)epoll_pwait2);
	sl_real.socket = sl_real_lookup("socket", (void *)socket);
	sl_real.read = sl_real_lookup("read", (void *)read);
	sl_real.readv = sl_real_lookup("readv", (void *)readv);
	sl_real.recv = sl_real_lookup("recv", (void *)recv);
	sl_real.recvfrom = sl_real_lookup("recvfrom", (void *)recvfrom);
	sl_real.recvmsg = sl_real_lookup("recvmsg", (void *)recvmsg);
	sl_real.execve = sl_real_lookup("execve", (void *)execve);
	sl_real.execveat = sl_real_lookup("execveat", (void *)execveat);
	sl_real.fexecve = sl_real_lookup("fexecve", (void *)fexecve);
	sl_real.execvpe = sl_real_lookup("execvpe", (void *)execvpe);
	sl_real.posix_spawn = sl_real_lookup("posix_spawn", (void *)posix_spawn);
	sl_real.posix_spawnp = sl_real_lookup("posix_spawnp", (void *)posix_spawnp);
}
