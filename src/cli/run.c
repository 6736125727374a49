/*
 * `sluice run`: put the shim in front of a command.
 *
 * If a daemon answers on the config's control socket and serves this very config,
 * or its segment's keeper still serves it though the daemon died, the command
 * joins that segment and sluice execs it directly.  Otherwise sluice hosts an
 * embedded daemon on a private segment for as long as the command runs, served on
 * a socket in this user's run directory (sl_run_dir); every process the command
 * starts inherits the environment and so shares that segment.
 * sluice then exits with the command's status (128+N when a signal N killed it).
 *
 * With --seccomp - or by itself for a statically linked or Go program, which no
 * preload reaches - the command also runs under a seccomp filter whose trapped
 * connects this process answers (src/supervisor/); sluice then stays as its parent
 * whether or not it hosts the daemon.
 */
#include "cli.h"
#include "oneliner.h"
#include "progkind.h"
#include "speak.h"
#include "sluice/supervise.h"
#include "sluice/common.h"
#include "sluice/seccomp.h"
#include "sluice/ctl.h"
#include "sluice/daemon.h"
#include "sluice/log.h"
#include "sluice/match.h"
#include "sluice/shm.h"
#include "sluice/say.h"
#include "sluice/segments.h"

#include "sluice/segsock.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct run {
	pid_t child;
	int status;
	int exited;     /* the command has exited */
	int supervised; /* under seccomp, and processes remain under the filter */
	volatile int stopping; /* a signal asked sluice run to end its watch */
	struct ev_loop *loop;
	ev_child child_watcher;
	ev_signal forward[4];
};

/* libsluice.so: $SLUICE_LIB, else beside this program (build tree), else the
 * installed ../lib/sluice/. */
static int find_shim(char *out, size_t size)
{
	static const char *const rel[] = {"libsluice.so", "../lib/sluice/libsluice.so",
	                                  "../lib/libsluice.so"};
	const char *env = getenv("SLUICE_LIB");
	char exe[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env) {
		if (access(env, R_OK) != 0)
			return -errno;
		snprintf(out, size, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	slash[1] = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char cand[PATH_MAX + 64];

		snprintf(cand, sizeof(cand), "%s%s", exe, rel[i]);
		if (access(cand, R_OK) == 0 && sl_realpath(cand, out, size) == 0)
			return 0;
	}
	return -ENOENT;
}

static int set_env(const char *lib, const char *config, const char *seg_path)
{
	const char *old = getenv("LD_PRELOAD");
	char *preload;

	/* Appended, so a sanitizer runtime that must come first stays first. */
	if (old && *old && strstr(old, lib))
		preload = strdup(old);
	else if (old && *old && asprintf(&preload, "%s:%s", old, lib) < 0)
		preload = NULL;
	else if (!(old && *old))
		preload = strdup(lib);
	if (!preload)
		return -ENOMEM;
	if (setenv("LD_PRELOAD", preload, 1) != 0 || setenv("SLUICE_CONFIG", config, 1) != 0 ||
	    setenv("SLUICE_SEGMENT", seg_path, 1) != 0) {
		free(preload);
		return -errno;
	}
	free(preload);
	return 0;
}

static void exec_command(char **cmd)
{
	execvp(cmd[0], cmd);
	fprintf(stderr, "sluice: cannot run %s: %s\n", cmd[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* A daemon serving this config, if one answers: its segment's socket in `seg`. */
static int find_daemon(const struct sl_config *cfg, const char *config, char *seg, size_t size)
{
	char *reply = NULL, served[PATH_MAX];
	int rc = sl_ctl_request(cfg->global.control_socket, "info", &reply, 1000);

	if (rc == 0 && sl_ctl_info_value(reply, "config", served, sizeof(served)) == 0 &&
	    strcmp(served, config) == 0 && sl_ctl_info_value(reply, "segment", seg, size) == 0)
		rc = 0;
	else if (rc == 0)
		rc = -ESRCH;
	free(reply);
	return rc;
}

/* No daemon answers, but its segment's keeper may still serve it: a dead daemon
 * stops reloads and stats, not shaping, so processes started now must join the
 * same queue as those already running.  Joined only when the segment was
 * compiled from this very config file. */
static int find_segment(const struct sl_config *cfg, const char *config, char *seg, size_t size)
{
	struct sl_segment s;

	if (sl_segsock_path(&cfg->global, seg, size) < 0 || sl_segment_find(seg, &s) < 0 || s.err < 0)
		return -ENOENT;
	return strcmp(s.config, config) == 0 ? 0 : -ESRCH;
}

/* The machine's queues are there but this user may not use them (not in the
 * config's shm_group, or a mode that keeps others out).  The shim says so too,
 * once per process (attach.c); it is said here first, before the program starts,
 * with how to fix it.  Never a queue of the run's own instead (docs/design.md,
 * "Never a silent split"): the program joins the machine's segment socket, and
 * its shaped calls wait for it and are refused.  1 when said (its socket in
 * seg). */
static int cannot_attach(const struct sl_config *cfg, char *seg, size_t seglen)
{
	struct sl_shm shm;
	struct sl_segment s;
	struct passwd *pw = getpwuid(getuid());
	struct group *gr;
	char why[256], fix[400], user[64], group[64];
	int rc;

	if (sl_segsock_path(&cfg->global, seg, seglen) < 0)
		return 0;
	rc = sl_segsock_attach(seg, 1, SL_SEGSOCK_TIMEOUT_NS, &shm, why, sizeof(why));
	if (rc == 0) {
		sl_shm_detach(&shm);
		return 0;
	}
	if ((rc != -EACCES && rc != -EPERM) || sl_segment_find(seg, &s) < 0)
		return 0; /* none there: this run hosts its own */
	snprintf(user, sizeof(user), "%s", pw ? pw->pw_name : "this user");
	if ((gr = getgrgid(s.gid)))
		snprintf(group, sizeof(group), "%s", gr->gr_name);
	else
		snprintf(group, sizeof(group), "%u", (unsigned)s.gid);
	sl_segment_join(s.gid, user, fix, sizeof(fix));
	fprintf(stderr,
	        "sluice run: %s may not use this machine's queues: their socket %s is for group %s (mode %04o)%s%s.\n"
	        "  To share them: %s.\n"
	        "  Until then: %s\n",
	        user, seg, group, s.file_mode, rc == -EACCES && why[0] ? "; " : "", rc == -EACCES ? why : "", fix,
	        cfg->global.fallback == SL_FALLBACK_CLOSED
	        ? "fallback = closed - the program is not started."
	        : cfg->global.fallback == SL_FALLBACK_OPEN
	        ? "fallback = open - its calls go unshaped."
	        : "its calls to shaped destinations wait for them (up to max_wait) and are refused - never shaped apart "
	          "from the machine's other processes.");
	return 1;
}

/* The name a run's private segment is made under (for people: it is found by its
 * socket, run-PID.segment in the run directory). */

/* A `sluice run` killed by SIGKILL leaves its private segment's socket behind (the
 * segment itself went with it).  The next one removes those nobody answers on. */
static void sweep_private_sockets(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct sl_segsock_reply r;

		if (strncmp(e->d_name, "run-", 4) != 0 || !strstr(e->d_name, ".segment"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (sl_segsock_ask(path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r) == -ECONNREFUSED)
			unlink(path);
		if (r.fd >= 0)
			close(r.fd);
	}
	closedir(d);
}

static void on_child(struct ev_loop *loop, ev_child *w, int revents)
{
	struct run *r = w->data;

	(void)revents;
	r->status = w->rstatus;
	r->exited = 1;
	ev_child_stop(loop, w);
	/* Under seccomp, children the command left behind are still held through
	 * this process: it stays until the last of them is gone (on_filter_gone). */
	if (!r->supervised)
		ev_break(loop, EVBREAK_ALL);
}

static void on_filter_gone(void *arg)
{
	struct run *r = arg;

	r->supervised = 0;
	if (r->exited)
		ev_break(r->loop, EVBREAK_ALL);
}

static void on_forward(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct run *r = w->data;

	(void)revents;
	if (!r->exited) {
		kill(r->child, w->signum);
		return;
	}
	/* The command is gone, its children remain under the filter: a signal to
	 * sluice run ends its watch (their trapped calls then fail with ENOSYS). */
	r->stopping = 1;
	ev_break(loop, EVBREAK_ALL);
}

/* How a command is run: its config and the segment socket it joins (NULL: an
 * embedded daemon's, made here), and whether under the seccomp supervisor. */
struct how {
	const char *config, *lib, *seg;
	const struct sl_config *cfg;
	int seccomp, verbose;
	int quiet; /* -q, SLUICE_QUIET=1: held and refused calls are not said */
};

/* Whether some section meters datagrams: then sendto and sendmsg are trapped too. */
static int meters_datagrams(const struct sl_config *cfg)
{
	for (unsigned i = 0; i < cfg->nsections; i++)
		if (cfg->sections[i].spec.meter == SL_METER_DATAGRAMS)
			return 1;
	return 0;
}

/* Without seccomp: a datagram section holding a name server of resolv.conf says
 * that glibc's resolver is not held by the shim (docs/programs.md, "glibc's resolver"): it
 * sends its queries from inside libc.  Said once a section, never fatal. */
static void say_resolver_unheld(const struct sl_config *cfg)
{
	char line[256], addr[INET6_ADDRSTRLEN + 1];
	FILE *f;

	if (!meters_datagrams(cfg) || !(f = fopen("/etc/resolv.conf", "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		struct sl_dest d = {.port = 53, .meter = SL_METER_DATAGRAMS};

		if (sscanf(line, " nameserver %46s", addr) != 1)
			continue;
		if (inet_pton(AF_INET, addr, d.addr) == 1)
			d.family = AF_INET;
		else if (inet_pton(AF_INET6, addr, d.addr) == 1)
			d.family = AF_INET6;
		else
			continue;
		for (unsigned i = 0; i < cfg->nsections; i++) {
			const struct sl_spec *sp = &cfg->sections[i].spec;
			const struct sl_pattern *pats = sl_config_patterns(cfg, sp);
			unsigned j;

			if (sp->meter != SL_METER_DATAGRAMS || !pats)
				continue;
			for (j = 0; j < sp->npatterns && !sl_pattern_match(&pats[j], &d); j++)
				;
			if (j == sp->npatterns)
				continue;
			fprintf(stderr, "sluice run: [%s] holds datagrams to %s, a name server of /etc/resolv.conf: "
			        "glibc's resolver sends its queries from inside libc, where the shim does not reach; "
			        "sluice run --seccomp holds them\n", sp->name, addr);
			fclose(f);
			return;
		}
	}
	fclose(f);
}

/* The child, under the supervisor: the filter first, its listener to the parent,
 * then the command.  A parent that dies takes it down (SIGTERM): left alone, its
 * every connect would fail (the kernel answers ENOSYS once no one listens). */
static void exec_supervised(int sock, pid_t parent, int datagrams, char **cmd)
{
	int fd = sl_supervise_install(datagrams);

	if (fd < 0) {
		fprintf(stderr, "sluice run: cannot hold %s through seccomp: %s (Linux 5.5 or later is needed); "
		        "not started\n", cmd[0], strerror(-fd));
		_exit(126);
	}
	if (sl_supervise_send_fd(sock, fd) < 0)
		_exit(126);
	close(fd);
	close(sock);
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
		_exit(126); /* the parent is already gone: nobody would answer */
	exec_command(cmd);
}

static int run_child(const struct how *how, char **cmd)
{
	static const int forwarded[4] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	struct sl_daemon_opts o = {.config_path = how->config};
	static struct sl_daemon d;
	struct sl_supervisor *sup = NULL;
	struct run r = {0};
	static struct speaker speaker = {.fd = -1};
	struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
	char shm_name[SL_PATH_MAX], seg_path[108], dir[96];
	const char *config = how->config;
	int embedded = !how->seg, sv[2] = {-1, -1}, listener;
	pid_t parent;
	sigset_t none;

	if (!loop) {
		fprintf(stderr, "sluice: cannot start the event loop\n");
		return SL_EXIT_FAIL;
	}
	if (embedded) {
		int rc = sl_run_dir(dir, sizeof(dir), 1);

		if (rc < 0) {
			fprintf(stderr, "sluice run: cannot use %s for the run's segment socket: %s\n", dir,
			        rc == -EPERM ? "another user's, or others may write it" : strerror(-rc));
			return SL_EXIT_FAIL;
		}
		sweep_private_sockets(dir);
		snprintf(shm_name, sizeof(shm_name), SL_RUN_SHM_PREFIX "%d", (int)getpid());
		snprintf(seg_path, sizeof(seg_path), "%s/run-%d.segment", dir, (int)getpid());
		o.shm_name = shm_name;
		o.private_socket = seg_path;
		switch (sl_daemon_start(&d, loop, &o)) {
		case 0: break;
		case -EINVAL: return SL_EXIT_USAGE;
		default: return SL_EXIT_FAIL;
		}
		config = d.config_path;
	} else {
		snprintf(seg_path, sizeof(seg_path), "%s", how->seg);
	}
	if (!how->quiet && speaker_start(&speaker, loop, seg_path, embedded ? &d.shm : NULL) < 0)
		speaker.fd = -1; /* no socket: the run goes on, silent */
	if (set_env(how->lib, config, seg_path) < 0 || (how->seccomp && setenv(SL_SECCOMP_ENV, "1", 1) != 0) ||
	    (how->seccomp && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0))
		goto fail;
	parent = getpid(); /* the child checks it still has this parent once it may die with it */
	r.child = fork();
	if (r.child < 0) {
		perror("sluice: fork");
		goto fail;
	}
	if (r.child == 0) {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (how->seccomp) {
			close(sv[0]);
			exec_supervised(sv[1], parent, meters_datagrams(how->cfg), cmd);
		}
		exec_command(cmd);
	}
	if (how->seccomp) {
		close(sv[1]);
		listener = sl_supervise_recv_fd(sv[0]);
		close(sv[0]);
		/* No listener: the child said why and exits without running the command. */
		r.loop = loop;
		if (listener >= 0 &&
		    !(sup = sl_supervise_start(loop, listener, seg_path, embedded ? &d.shm : NULL, how->cfg, how->verbose,
		                               on_filter_gone, &r))) {
			close(listener);
			kill(r.child, SIGKILL); /* nobody would answer its connects */
		}
		r.supervised = sup != NULL;
	}
	ev_child_init(&r.child_watcher, on_child, r.child, 0);
	r.child_watcher.data = &r;
	ev_child_start(loop, &r.child_watcher);
	for (int i = 0; i < 4; i++) {
		ev_signal_init(&r.forward[i], on_forward, forwarded[i]);
		r.forward[i].data = &r;
		ev_signal_start(loop, &r.forward[i]);
	}
	ev_run(loop, 0);
	if (!r.stopping)
		sl_supervise_finish(sup, &r.stopping);
	for (int i = 0; i < 4; i++)
		ev_signal_stop(loop, &r.forward[i]);
	sl_supervise_stop(sup);
	if (!how->quiet) {
		speaker_stop(&speaker, loop);
		speaker_summary(&speaker); /* before the segment goes: it names the sections */
	}
	if (embedded)
		sl_daemon_stop(&d);
	if (WIFEXITED(r.status))
		return WEXITSTATUS(r.status);
	return WIFSIGNALED(r.status) ? 128 + WTERMSIG(r.status) : SL_EXIT_FAIL;
fail:
	if (!how->quiet)
		speaker_stop(&speaker, loop);
	if (embedded)
		sl_daemon_stop(&d);
	return SL_EXIT_FAIL;
}

static int run_with(const char *path, struct how *hw, int seccomp, char **cmd);

int sl_cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {{"seccomp", no_argument, NULL, 'S'},
	                                         {"no-seccomp", no_argument, NULL, 'N'}, SL_ONELINER_OPTIONS, {0}};
	const char *path = NULL;
	char oneliner[PATH_MAX] = "";
	struct sl_oneliner one = {0};
	struct how how = {0};
	int opt, rc, seccomp = -1; /* -1: as the program needs */
	int said_q = 0, said_v = 0;

	const char *quiet = getenv("SLUICE_QUIET");

	how.quiet = quiet && *quiet && strcmp(quiet, "0") != 0;
	unsetenv(SL_SAY_ENV); /* an outer sluice run's: this one listens, or (-q) nobody */
	while ((opt = getopt_long(argc, argv, "+c:vq", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'q': how.quiet = said_q = 1; break;
		case 'v': setenv("SLUICE_DEBUG", "1", 1); how.verbose = said_v = 1; break;
		case 'S':
		case 'N':
			if (seccomp == (opt == 'S' ? 0 : 1)) {
				fprintf(stderr, "sluice run: --seccomp and --no-seccomp: give one\n");
				return SL_EXIT_USAGE;
			}
			seccomp = opt == 'S';
			break;
		default:
			switch (sl_oneliner_opt(&one, opt, optarg)) {
			case 1: break;
			case -1: return SL_EXIT_USAGE; /* said why */
			default: goto usage;
			}
			break;
		}
	}
	if (optind >= argc)
		goto usage;
	if (said_q && said_v) {
		fprintf(stderr, "sluice run: -q says nothing and -v says every decision: give one\n");
		return SL_EXIT_USAGE;
	}
	if (sl_oneliner_given(&one)) {
		/* The limit from the command line, in a private config of its own. */
		if (path) {
			fprintf(stderr, "sluice run: -c and a one-liner (--match, --rate...) do not mix\n");
			return SL_EXIT_USAGE;
		}
		if (sl_oneliner_check(&one, "sluice run") < 0)
			return SL_EXIT_USAGE;
		if (sl_oneliner_file(&one, oneliner, sizeof(oneliner)) < 0)
			return SL_EXIT_FAIL;
		path = oneliner;
	}
	rc = run_with(path, &how, seccomp, argv + optind);
	if (oneliner[0])
		unlink(oneliner);
	return rc;
usage:
	fprintf(stderr, "usage: sluice run [-c FILE | " SL_ONELINER_USAGE "] [-v] [-q] [--seccomp | --no-seccomp] -- CMD [ARG...]\n");
	return SL_EXIT_USAGE;
}

/* sluice run's work once its options are read: cmd under config `path` (NULL: the
 * default). */
static int run_with(const char *path, struct how *hw, int seccomp, char **cmd)
{
	char config[PATH_MAX], lib[PATH_MAX], seg[108], prog[PATH_MAX];
	struct how how = *hw;
	struct sl_config *cfg;
	int rc, refused;

	path = sl_cli_config_path(path);
	cfg = sl_cli_load(path);
	if (!cfg)
		return SL_EXIT_USAGE;
	if (cfg->nsections == 0)
		fprintf(stderr, "sluice: %s has no limit sections: nothing is shaped\n", path);
	if (sl_realpath(path, config, sizeof(config)) != 0)
		snprintf(config, sizeof(config), "%s", path);
	if ((rc = find_shim(lib, sizeof(lib))) < 0) {
		fprintf(stderr, "sluice: cannot find libsluice.so (set SLUICE_LIB): %s\n", strerror(-rc));
		goto fail;
	}
	if ((refused = cannot_attach(cfg, seg, sizeof(seg))) && cfg->global.fallback == SL_FALLBACK_CLOSED)
		goto fail;
	if (seccomp < 0) {
		/* What no preload reaches is held through seccomp, said once. */
		int kind = sl_prog_kind(cmd[0], prog, sizeof(prog));

		seccomp = kind == SL_PROG_STATIC || kind == SL_PROG_GO;
		if (seccomp)
			fprintf(stderr, "sluice run: %s is %s: its connects are held through seccomp (--seccomp; "
			        "--no-seccomp: not at all)\n", cmd[0],
			        kind == SL_PROG_GO ? "a Go program" : "statically linked");
	}
	if (!seccomp && !how.quiet)
		say_resolver_unheld(cfg);
	how = (struct how){.config = config, .lib = lib, .cfg = cfg, .seccomp = seccomp, .verbose = how.verbose,
	                   .quiet = how.quiet};
	if (refused || find_daemon(cfg, config, seg, sizeof(seg)) == 0 || find_segment(cfg, config, seg, sizeof(seg)) == 0) {
		/* Nothing to host, supervise or listen to: the command replaces sluice. */
		if (!seccomp && how.quiet) {
			sl_config_free(cfg);
			free(cfg);
			if (set_env(lib, config, seg) < 0)
				return SL_EXIT_FAIL;
			exec_command(cmd);
		}
		how.seg = seg;
	}
	rc = run_child(&how, cmd);
	sl_config_free(cfg);
	free(cfg);
	return rc;
fail:
	sl_config_free(cfg);
	free(cfg);
	return SL_EXIT_FAIL;
}
