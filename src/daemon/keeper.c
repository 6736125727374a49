/* The segment's keeper (keeper.h). */
#include "keeper.h"
#include "sluice/log.h"
#include "sluice/segsock.h"
#include "sluice/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#define KEEPER_SHM_FD 3
#define KEEPER_LISTEN_FD 4

int sl_keeper_fetch(const char *path, struct sl_shm *shm, char *why, size_t len)
{
	struct sl_segsock_reply r;
	int rc = sl_segsock_ask(path, "get\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r);

	if (why && len)
		why[0] = '\0';
	if (rc < 0)
		return rc;
	/* A keeper of another user may serve there (a directory others may write):
	 * its segment is not ours to adopt - whoever made it could set the limits. */
	if (r.server_uid != 0 && r.server_uid != (uint32_t)geteuid()) {
		if (why && len)
			snprintf(why, len, "it is served by uid %u, neither root nor this daemon's user: not taken over",
			         (unsigned)r.server_uid);
		if (r.fd >= 0)
			close(r.fd);
		return -EPERM;
	}
	if (strncmp(r.line, "ok", 2) != 0 || r.fd < 0) {
		if (why && len)
			snprintf(why, len, "%s", strncmp(r.line, "error: ", 7) == 0 ? r.line + 7 : r.line);
		if (r.fd >= 0)
			close(r.fd);
		return -EACCES;
	}
	if ((rc = sl_shm_map_fd(shm, r.fd, 1, 1)) < 0)
		close(r.fd);
	return rc;
}

/* One request with an optional descriptor, answered "ok": 0, or -errno. */
static int ask_ok(const char *path, const char *req, int fd)
{
	struct sl_segsock_reply r;
	int rc = sl_segsock_ask(path, req, fd, SL_SEGSOCK_TIMEOUT_NS, &r);

	if (r.fd >= 0)
		close(r.fd);
	return rc < 0 ? rc : strncmp(r.line, "ok", 2) == 0 ? 0 : -EPROTO;
}

int sl_keeper_replace(const char *path, int shm_fd)
{
	return ask_ok(path, "replace\n", shm_fd);
}

int sl_keeper_policy(const char *path, const struct sl_segpolicy *p)
{
	char req[64];

	snprintf(req, sizeof(req), "policy %o %u\n", p->mode, (unsigned)p->gid);
	return ask_ok(path, req, -1);
}

int sl_keeper_quit(const char *path)
{
	return ask_ok(path, "quit\n", -1);
}

pid_t sl_keeper_spawn(const char *path, int shm_fd, const struct sl_segpolicy *p, int foreground)
{
	char mode[16], gid[16], self[4096];
	int lfd = sl_segserve_listen(path, p);
	ssize_t n;
	pid_t pid;

	if (lfd < 0)
		return lfd;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		close(lfd);
		return -ENOENT;
	}
	self[n] = '\0';
	snprintf(mode, sizeof(mode), "%o", p->mode);
	snprintf(gid, sizeof(gid), "%u", (unsigned)p->gid);
	/* Only async-signal-safe calls between fork and exec: the daemon may have
	 * threads (the resolver's). */
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(lfd);
		return -e;
	}
	if (pid == 0) {
		char *argv[] = {self, "--keep", mode, gid, (char *)path, foreground ? "-f" : NULL, NULL};
		sigset_t none;

		setsid(); /* no ^C of the daemon's terminal, no signal to its group, ends it */
		if (chdir("/") != 0)
			_exit(127);
		/* Its two descriptors at known numbers; nothing else of the daemon's (a
		 * Redis connection, the control socket) may live on in it. */
		if (shm_fd == KEEPER_LISTEN_FD || lfd == KEEPER_SHM_FD) {
			int a = fcntl(shm_fd, F_DUPFD_CLOEXEC, 10), b = fcntl(lfd, F_DUPFD_CLOEXEC, 10);

			shm_fd = a;
			lfd = b;
		}
		if (dup2(shm_fd, KEEPER_SHM_FD) < 0 || dup2(lfd, KEEPER_LISTEN_FD) < 0)
			_exit(127);
		sl_sys(SYS_close_range, KEEPER_LISTEN_FD + 1, ~0u, 0);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(self, argv);
		_exit(127);
	}
	close(lfd);
	return pid;
}

static int told_to_quit;

static void on_quit(void *arg)
{
	told_to_quit = 1;
	ev_break(arg, EVBREAK_ALL);
}

static void on_term(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	(void)w;
	ev_break(loop, EVBREAK_ALL);
}

int sl_keeper_main(int argc, char **argv)
{
	struct sl_segpolicy p;
	struct sl_segserve *s;
	struct ev_loop *loop;
	struct rlimit rl;
	ev_signal term;
	unsigned mode, gid;
	int foreground = argc == 6 && strcmp(argv[5], "-f") == 0;

	if ((argc != 5 && !foreground) || sscanf(argv[2], "%o", &mode) != 1 || sscanf(argv[3], "%u", &gid) != 1) {
		fprintf(stderr, "usage: sluiced --keep MODE GID PATH [-f] (started by sluiced itself)\n");
		return 2;
	}
	prctl(PR_SET_NAME, "sluice-keeper", 0, 0, 0);
	if (!foreground) {
		int null = open("/dev/null", O_RDWR);

		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			if (null > 2)
				close(null);
		}
	}
	sl_log_init("sluice-keeper", foreground, SL_LOG_INFO);
	signal(SIGPIPE, SIG_IGN);
	/* A pidfd per attached process: as many descriptors as the system lets it. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	p = (struct sl_segpolicy){.mode = mode & 0777, .gid = (gid_t)gid};
	if (!(loop = ev_default_loop(EVFLAG_AUTO)))
		return 1;
	if (!(s = sl_segserve_start(loop, KEEPER_SHM_FD, KEEPER_LISTEN_FD, &p, on_quit, loop))) {
		sl_log_warn("segment at %s: not a segment", argv[4]);
		return 1;
	}
	ev_signal_init(&term, on_term, SIGTERM);
	ev_signal_start(loop, &term);
	sl_log_info("keeping segment at %s (pid %d)", argv[4], (int)getpid());
	ev_run(loop, 0);
	ev_signal_stop(loop, &term);
	sl_segserve_stop(s);
	/* Told to quit (the segment removed on purpose): its socket goes with it.
	 * Stopped by a signal, it leaves the socket, which tells the next daemon that
	 * a segment was lost while programs may still have it mapped (docs/design.md,
	 * "The segment"). */
	if (told_to_quit)
		unlink(argv[4]);
	sl_log_info("segment at %s no longer kept%s", argv[4], told_to_quit ? "" : " (stopped by a signal)");
	return 0;
}
