/*
 * sluiced - the sluice daemon.
 *
 *   sluiced -c FILE [-f] [-n]
 *     -c FILE  configuration (default /etc/sluice/sluice.ini)
 *     -f       stay in the foreground and log to stderr
 *     -n       check the configuration and exit (0 good, 2 bad)
 *
 * Under systemd (Type=notify), READY=1 goes to $NOTIFY_SOCKET once the segment and
 * the control socket are up, and STOPPING=1 as it stops; the segment's memfd is
 * kept in the service's file descriptor store (sdnotify.h).
 *
 *   sluiced --keep ...  the segment's keeper, started by sluiced itself (keeper.h)
 */
#include "keeper.h"
#include "sdnotify.h"
#include "sluice/daemon.h"
#include "sluice/log.h"
#include "sluice/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

static void usage(FILE *out, int status)
{
	fprintf(out, "usage: sluiced [-c FILE] [-f] [-n] [-S DIR] | -V | --version | --help\n"
	             "  -c FILE  the config (default " SL_DEFAULT_CONFIG ")\n"
	             "  -f       stay in the foreground, logging to stderr\n"
	             "  -n       check the config and exit\n"
	             "  -S DIR   where quotas are kept when the config says state_dir = auto\n"
	             "           (the packaged service: /var/lib/sluice; default none)\n");
	exit(status);
}

/* Detaching happens in two steps, so that what goes wrong while starting is seen
 * by whoever started it: detach() forks, and the parent waits until the child
 * says it serves (detached_ready) - then it exits 0 - or the child dies, having
 * said why on the stderr both still share - then it exits 1. */
static int ready_fd = -1;

static void detach(void)
{
	int p[2], fd;
	ssize_t n;
	char c;

	if (pipe(p) != 0)
		sl_fatal("pipe");
	switch (fork()) {
	case -1:
		sl_fatal("fork");
	case 0:
		close(p[0]);
		ready_fd = p[1];
		break;
	default:
		close(p[1]);
		do
			n = read(p[0], &c, 1);
		while (n < 0 && errno == EINTR);
		_exit(n == 1 ? 0 : 1);
	}
	setsid();
	if (chdir("/") != 0)
		sl_fatal("chdir /");
	fd = open("/dev/null", O_RDONLY);
	if (fd >= 0) {
		dup2(fd, 0);
		if (fd > 0)
			close(fd);
	}
}

/* The detached daemon serves: its output goes to syslog from now on, and the
 * parent waiting in detach() exits 0.  With nothing listening on syslog's socket
 * every line would be lost without a word: it says so on the stderr it was
 * started with and, when that is a terminal or a file, keeps logging there (a
 * terminal gone is EIO, not a signal).  A pipe is let go: whoever reads it waits
 * for its end - a script's $(sluiced ... 2>&1) would never return. */
static void detached_ready(int log_level)
{
	struct stat st;
	int fd, to_syslog = sl_log_syslog_reachable(), keep = 0;

	if (!to_syslog) {
		keep = fstat(2, &st) == 0 && (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode));
		if (keep)
			sl_log_warnx("no syslog at %s: logging to this stderr (under a supervisor, run it with -f)",
			             _PATH_LOG);
		else
			sl_log_warnx("no syslog at %s: the daemon's lines are lost from here on; run it with -f under a "
			             "supervisor, or with stderr a file (2>>FILE)", _PATH_LOG);
		signal(SIGPIPE, SIG_IGN);
	}
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 1);
		if (!keep)
			dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	sl_log_init("sluiced", keep, log_level);
	if (write(ready_fd, "1", 1) != 1)
		sl_log_warn("could not tell the parent it is ready");
	close(ready_fd);
	ready_fd = -1;
}

int main(int argc, char **argv)
{
	const char *config = SL_DEFAULT_CONFIG, *state_dir = NULL;
	int foreground = 0, check_only = 0, opt;
	struct sl_daemon_opts o = {0};
	static struct sl_daemon d;
	struct ev_loop *loop;

	if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
		printf("sluiced %s\n", SL_VERSION);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--help") == 0)
		usage(stdout, 0);
	if (argc >= 2 && strcmp(argv[1], "--keep") == 0)
		return sl_keeper_main(argc, argv);
	while ((opt = getopt(argc, argv, "c:fnhS:")) != -1) {
		switch (opt) {
		case 'c': config = optarg; break;
		case 'S': state_dir = optarg; break;
		case 'f': foreground = 1; break;
		case 'n': check_only = 1; break;
		case 'h': usage(stdout, 0); break;
		default: usage(stderr, 2);
		}
	}
	if (optind != argc)
		usage(stderr, 2);
	if (state_dir && state_dir[0] != '/') {
		fprintf(stderr, "sluiced: -S %s: want an absolute directory\n", state_dir);
		return 2;
	}
	sl_stats_version = SL_VERSION;
	sl_log_init("sluiced", 1, SL_LOG_INFO);
	if (check_only) {
		static struct sl_config cfg;

		if (sl_config_load(&cfg, config) != 0) {
			sl_config_print_errors(&cfg, stderr);
			return 2;
		}
		printf("%s: OK, %u sections\n", config, cfg.nsections);
		return 0;
	}
	if (!foreground) {
		static struct sl_config cfg; /* check before detaching, so errors are seen */

		if (sl_config_load(&cfg, config) != 0) {
			sl_config_print_errors(&cfg, stderr);
			return 2;
		}
		/* The detached daemon runs in /: a relative path would name another
		 * file there, at the start and at every reload. */
		if (config[0] != '/' && !(config = realpath(config, NULL)))
			sl_fatal("cannot resolve the config's path");
		detach();
	}
	loop = ev_default_loop(EVFLAG_AUTO);
	if (!loop)
		sl_fatalx("cannot start the event loop");
	o.config_path = config;
	o.control = 1;
	o.handle_signals = 1;
	o.foreground = foreground;
	o.state_dir = state_dir;
	switch (sl_daemon_start(&d, loop, &o)) {
	case 0:
		break;
	case -EINVAL:
		return 2;
	default:
		return 1;
	}
	sl_log_set_level(d.cfg->global.log_level);
	if (ready_fd >= 0)
		detached_ready(d.cfg->global.log_level);
	sl_sd_notify("READY=1");
	ev_run(loop, 0);
	sl_sd_notify("STOPPING=1");
	sl_daemon_stop(&d);
	return 0;
}
