/* `sluice segments`: the segments this machine's programs can reach - by their
 * sockets, in the config's directory and this user's run directory - who keeps
 * each, who may use it, how many are attached, which config it serves; `--remove`
 * stops a keeper, `--remove-unused` every one nobody is attached to and the
 * sockets nobody answers on (docs/commands.md "Segments"). */
#include "cli.h"
#include "sluice/segments.h"
#include "sluice/segsock.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SEGMENTS_USAGE "usage: sluice segments [-c FILE] [--remove-unused | --remove SOCKET]\n"

struct listing {
	int remove;
	int64_t now_s;
	const char *mine; /* the socket a program started here would use */
	unsigned shown, removed, failed;
	int elsewhere; /* a pid of another pid namespace was shown */
	int runs;      /* a `sluice run`'s own segment was shown */
	char seen[8][108]; /* directories listed already */
};

static void age_of(int64_t s, char *buf, size_t len)
{
	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 2 * 3600)
		snprintf(buf, len, "%lldm", (long long)(s / 60));
	else if (s < 2 * 86400)
		snprintf(buf, len, "%lldh", (long long)(s / 3600));
	else
		snprintf(buf, len, "%lldd", (long long)(s / 86400));
}

/* Stop the keeper at path (it answers only root and its own user), or remove a
 * socket nobody answers on.  0, or -errno said on stderr. */
static int remove_at(const char *path, int err)
{
	struct sl_segsock_reply r;
	int rc;

	if (err == -ECONNREFUSED) {
		if (unlink(path) == 0) {
			printf("removed %s (nobody answered on it)\n", path);
			return 0;
		}
		rc = -errno;
	} else {
		rc = sl_segsock_ask(path, "quit\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r);
		if (r.fd >= 0)
			close(r.fd);
		if (rc == 0 && strncmp(r.line, "ok", 2) == 0) {
			printf("removed %s: its keeper stopped; programs attached keep the segment until they exit\n",
			       path);
			return 0;
		}
		if (rc == 0) {
			fprintf(stderr, "sluice: cannot remove %s: %s\n", path,
			        strncmp(r.line, "error: ", 7) == 0 ? r.line + 7 : r.line);
			return -EPERM;
		}
	}
	fprintf(stderr, "sluice: cannot remove %s: %s\n", path, strerror(-rc));
	return rc;
}

static int list_one(const struct sl_segment *s, void *arg)
{
	struct listing *l = arg;
	char owner[72], age[16], daemon[24], keeper[16];
	int run;

	if (l->remove) {
		/* Unused: nobody attached (a daemon is) and no daemon beating, or nobody
		 * answering at all. */
		if (s->err == -ECONNREFUSED ||
		    (s->err == 0 && s->attached == 0 &&
		     (s->daemon_pid <= 0 || s->heartbeat_ms < 0 || s->heartbeat_ms > 3000))) {
			if (remove_at(s->path, s->err) == 0)
				l->removed++;
			else
				l->failed++;
		}
		return 0;
	}
	if (l->shown++ == 0)
		printf("%-1s %-40s %-7s %-15s %-4s %8s %5s %-7s %-24s %s\n", "", "SOCKET", "KEEPER", "OWNER", "MODE",
		       "ATTACHED", "AGE", "DAEMON", "NAME", "CONFIG");
	sl_segment_owner(s, owner, sizeof(owner));
	age_of(l->now_s - s->changed_s, age, sizeof(age));
	if (s->err < 0) {
		printf("%-1s %-40s %-7s %-15s %04o %8s %5s %-7s %-24s %s\n", l->mine && !strcmp(l->mine, s->path) ? "*" : "",
		       s->path, "gone", owner, s->file_mode, "-", age, "-", "-",
		       s->err == -ECONNREFUSED ? "(nobody answers: its keeper died)" : strerror(-s->err));
		return 0;
	}
	/* Pids of another pid namespace (the host's, seen from a container) are
	 * marked: here they would name other processes. */
	snprintf(keeper, sizeof(keeper), "%d%s", (int)s->pid, s->other_pidns ? "^" : "");
	l->elsewhere |= s->other_pidns;
	if (s->moved)
		snprintf(daemon, sizeof(daemon), "moved");
	else if (s->daemon_pid > 0 && s->heartbeat_ms >= 0 && s->heartbeat_ms < 3000)
		snprintf(daemon, sizeof(daemon), "%d%s", (int)s->daemon_pid, s->other_pidns ? "^" : "");
	else
		snprintf(daemon, sizeof(daemon), "none");
	/* A `sluice run` hosts a segment of its own, which its config (the user's
	 * file, or a one-liner's made for it) does not name: marked, and said below
	 * how to show it (`sluice stat -c` that file read /sluice-cli-N, not it). */
	run = strncmp(s->name, SL_RUN_SHM_PREFIX, strlen(SL_RUN_SHM_PREFIX)) == 0;
	l->runs |= run;
	printf("%-1s %-40s %-7s %-15s %04o %8u %5s %-7s %-24s %s%s\n", l->mine && !strcmp(l->mine, s->path) ? "*" : "",
	       s->path, keeper, owner, s->mode, s->attached, age, daemon, s->name[0] ? s->name : "?",
	       s->config[0] ? s->config : "-", run ? " (+)" : "");
	return 0;
}

/* List (or sweep) the directory of `path` once. */
static void list_dir_of(struct listing *l, const char *path, int is_dir)
{
	char dir[108];
	const char *slash = strrchr(path, '/');

	if (is_dir)
		snprintf(dir, sizeof(dir), "%s", path);
	else
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	for (unsigned i = 0; i < sizeof(l->seen) / sizeof(l->seen[0]); i++) {
		if (strcmp(l->seen[i], dir) == 0)
			return;
		if (!l->seen[i][0]) {
			snprintf(l->seen[i], sizeof(l->seen[i]), "%s", dir);
			break;
		}
	}
	sl_segments_in(dir, list_one, l);
}

int sl_cmd_segments(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"remove-unused", no_argument, NULL, 'r'}, {"remove", required_argument, NULL, 'R'}, {0}};
	struct listing l = {0};
	struct sl_config *cfg;
	const char *path = NULL, *one = NULL;
	char mine[108] = "", run[96];
	int opt;

	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'r': l.remove = 1; break;
		case 'R': one = optarg; break;
		default: fputs(SEGMENTS_USAGE, stderr); return SL_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sluice: segments takes no argument ('%s')\n", argv[optind]);
		fputs(SEGMENTS_USAGE, stderr);
		return SL_EXIT_USAGE;
	}
	/* Every flag given means something, or the command says which does not. */
	if (one && (l.remove || path)) {
		fprintf(stderr, "sluice: --remove SOCKET removes that one segment; %s means nothing with it\n",
		        l.remove ? "--remove-unused" : "-c");
		return SL_EXIT_USAGE;
	}
	if (one)
		return remove_at(one, 0) == 0 ? SL_EXIT_OK : SL_EXIT_FAIL;
	l.now_s = (int64_t)time(NULL);
	/* No config named and none at the default place: the run directory alone,
	 * without an error about a file nobody asked for. */
	cfg = path || access(sl_cli_config_path(NULL), F_OK) == 0 ? sl_cli_load(sl_cli_config_path(path)) : NULL;
	if (cfg && sl_cli_segment_path(cfg, mine, sizeof(mine)) == 0)
		l.mine = mine;
	if (l.mine)
		list_dir_of(&l, mine, 0);
	if (cfg && sl_segsock_path(&cfg->global, run, sizeof(run)) == 0)
		list_dir_of(&l, run, 0);
	if (sl_run_dir(run, sizeof(run), 0) == 0)
		list_dir_of(&l, run, 1);
	if (!l.remove && l.shown == 0)
		printf("no segment sockets%s%s\n", l.mine ? " beside " : "", l.mine ? mine : "");
	if (!l.remove && l.mine)
		printf("(* the one a program started here would use: %s)\n", mine);
	if (l.runs)
		printf("(+ a `sluice run`'s own segment, not the one its config names: `sluice stat --segment SOCKET` "
		       "shows it, as does plain `sluice stat` where no config is installed)\n");
	if (l.elsewhere)
		printf("(^ a pid in the keeper's pid namespace, not this one's: the host's, seen from a container)\n");
	if (l.remove)
		printf("%u removed%s\n", l.removed, l.removed || l.failed ? "" : " (none was unused)");
	if (cfg) {
		sl_config_free(cfg);
		free(cfg);
	}
	return l.failed ? SL_EXIT_FAIL : SL_EXIT_OK;
}
