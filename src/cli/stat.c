/* `sluice stat`: ask the daemon; when it does not answer, read the segment directly
 * (shaping and its counters live there, not in the daemon), asked for over its
 * socket as a program would.  --prometheus always reads the segment: the same
 * text sluiced serves on `metrics`, for node_exporter's textfile collector.
 * Either way it says which segment a program started here would use, and whether
 * that is the running daemon's: in a container the answer is what matters. */
#include "cli.h"
#include "sluice/clock.h"
#include "sluice/ctl.h"
#include "sluice/shm.h"
#include "sluice/segments.h"
#include "sluice/segsock.h"
#include "sluice/stats.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { TEXT, JSON, PROMETHEUS };

void sl_cli_segment_error(const char *what, const char *path, int rc, const char *why)
{
	char about[320], fix[400];

	sl_segment_about(path, about, sizeof(about));
	sl_segment_fix(path, rc, why, fix, sizeof(fix));
	fprintf(stderr, "sluice: %s %s: %s%s%s\n", what, about,
	        rc == -EPROTO ? "not a sluice segment of this version"
	        : rc == -EACCES && why && *why ? why
	                                       : strerror(-rc),
	        fix[0] ? "\n  " : "", fix);
}

int sl_cli_segment_path(const struct sl_config *cfg, char *out, size_t len)
{
	const char *env = getenv("SLUICE_SEGMENT");

	if (env && *env)
		return sl_strlcpy(out, env, len) < 0 ? -ENAMETOOLONG : 0;
	return sl_segsock_path(&cfg->global, out, len);
}

int sl_cli_attach(const char *path, struct sl_shm *shm)
{
	char why[256];
	int rc = sl_segsock_attach(path, 0, 3 * SL_SEGSOCK_TIMEOUT_NS, shm, why, sizeof(why));

	if (rc < 0)
		sl_cli_segment_error("cannot read", path, rc, why);
	return rc;
}

/* expect: the config the caller meant (NULL: any); a segment serving another is
 * read all the same, with a word on stderr. */
static int render_segment(const char *path, int mode, unsigned top, const char *expect)
{
	struct sl_shm shm;
	char served[SL_PATH_MAX], want[SL_PATH_MAX];

	if (sl_cli_attach(path, &shm) < 0)
		return SL_EXIT_FAIL;
	memcpy(served, shm.hdr->config_path, sizeof(served));
	served[sizeof(served) - 1] = '\0';
	if (expect && sl_realpath(expect, want, sizeof(want)) == 0 && served[0] && strcmp(served, want) != 0)
		fprintf(stderr, "sluice: the segment at %s was made from %s, not %s: its sections are shown\n", path,
		        served, want);
	if (mode == PROMETHEUS)
		sl_stats_render_prometheus(shm.hdr, top, sl_clock_mono_ns(), stdout);
	else
		sl_stats_render_top(shm.hdr, mode == JSON, top, sl_clock_mono_ns(), stdout);
	sl_shm_detach(&shm);
	return SL_EXIT_OK;
}

/* Why the daemon did not answer: none listens, or this user may not reach it
 * (the control socket's group) - two things to do about it. */
static void say_no_answer(const struct sl_config *cfg, const char *seg, int rc)
{
	const char *sock = cfg->global.control_socket;
	struct stat st;
	struct passwd *pw = getpwuid(getuid());
	struct group *gr;

	if ((rc == -EACCES || rc == -EPERM) && stat(sock, &st) == 0) {
		char fix[300];

		gr = getgrgid(st.st_gid);
		sl_segment_join(st.st_gid, pw ? pw->pw_name : "USER", fix, sizeof(fix));
		fprintf(stderr, "sluice: %s may not use the daemon's control socket %s (group %s, mode %04o): %s; "
		        "reading the segment at %s\n", pw ? pw->pw_name : "this user", sock, gr ? gr->gr_name : "?",
		        st.st_mode & 07777, fix, seg);
		return;
	}
	fprintf(stderr, "sluice: no daemon answers on %s (%s); reading the segment at %s\n", sock,
	        rc < 0 ? strerror(-rc) : "it said it could not", seg);
}

/* Which segment a program started here would use, and whether it is the running
 * daemon's (docs/containers.md "Containers"): one line on stdout. */
static void say_which(const struct sl_config *cfg, const char *seg)
{
	struct sl_segment s;
	char *reply = NULL, id[32] = "";
	int ctl = sl_ctl_request(cfg->global.control_socket, "info", &reply, 1000);

	if (ctl == 0)
		sl_ctl_info_value(reply, "segment_id", id, sizeof(id));
	free(reply);
	if (sl_segment_find(seg, &s) < 0)
		s.err = -ENOENT;
	if (s.err < 0) {
		printf("segment: none reachable at %s (%s): programs started here wait for it (max_wait) and are "
		       "refused, never limited on their own\n", seg,
		       s.err == -ENOENT ? "no such socket" : strerror(-s.err));
		return;
	}
	printf("segment: %s (id %016llx, %u processes attached), %s\n", seg, (unsigned long long)s.id, s.attached,
	       id[0] && strtoull(id, NULL, 16) == s.id ? "the running daemon's"
	       : id[0]                                  ? "NOT the running daemon's: it serves another"
	       : s.daemon_pid > 0 && s.heartbeat_ms >= 0 && s.heartbeat_ms < 3000
	           ? "its daemon beats (its control socket is not reachable from here)"
	                                                      : "kept while no daemon runs");
}

/* No config named and none at the default place: the segments this user can
 * reach, as a program would find them - the machine's at its default socket,
 * then running `sluice run`s in this user's run directory (the latest first).
 * The one shown is said on stderr, with how many others there are. */
struct found {
	struct sl_segment best;
	unsigned n;
};

static int pick_latest(const struct sl_segment *s, void *arg)
{
	struct found *f = arg;

	if (s->err == 0 && !s->moved && (f->n++ == 0 || s->changed_s > f->best.changed_s))
		f->best = *s;
	return 0;
}

static int stat_without_config(const char *missing, int mode, unsigned top)
{
	static struct sl_config defaults;
	struct found f = {0};
	char machine[108], dir[96];

	sl_config_defaults(&defaults);
	if (sl_segsock_path(&defaults.global, machine, sizeof(machine)) == 0 && sl_segment_find(machine, &f.best) == 0 &&
	    f.best.err == 0) {
		fprintf(stderr, "sluice: no config at %s: showing the machine's segment at %s\n", missing, machine);
		return render_segment(machine, mode, top, NULL);
	}
	memset(&f, 0, sizeof(f));
	if (sl_run_dir(dir, sizeof(dir), 0) == 0)
		sl_segments_in(dir, pick_latest, &f);
	if (!f.n) {
		fprintf(stderr, "sluice: no config at %s, no daemon's segment at %s and no `sluice run` of this user's "
		        "running: nothing to show (-c FILE names a config, --segment SOCKET a segment)\n",
		        missing, machine);
		return SL_EXIT_FAIL;
	}
	fprintf(stderr, "sluice: no config at %s: showing the segment of a running `sluice run` at %s (config %s)",
	        missing, f.best.path, f.best.config[0] ? f.best.config : "?");
	if (f.n > 1)
		fprintf(stderr, "; %u more running (sluice segments lists them)", f.n - 1);
	fputc('\n', stderr);
	return render_segment(f.best.path, mode, top, NULL);
}

int sl_cmd_stat(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'}, {"segment", required_argument, NULL, 's'},
		{"top", required_argument, NULL, 't'}, {"prometheus", no_argument, NULL, 'p'}, {0}};
	const char *path = NULL, *seg_opt = NULL;
	struct sl_config *cfg;
	char *reply = NULL, request[64], *end, seg[108];
	unsigned top = SL_STATS_TOP_DEFAULT;
	int mode = TEXT, opt, rc;

	while ((opt = getopt_long(argc, argv, "c:js:t:p", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'j':
		case 'p':
			/* One output at a time: the last flag silently winning hid the first. */
			if (mode != TEXT && mode != (opt == 'j' ? JSON : PROMETHEUS)) {
				fprintf(stderr, "sluice: --json and --prometheus are two outputs: give one\n");
				return SL_EXIT_USAGE;
			}
			mode = opt == 'j' ? JSON : PROMETHEUS;
			break;
		case 's': seg_opt = optarg; break;
		case 't':
			top = (unsigned)strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || top > SL_STATS_TOP_MAX) {
				fprintf(stderr, "sluice: --top wants a count from 0 to %d\n", SL_STATS_TOP_MAX);
				return SL_EXIT_USAGE;
			}
			break;
		default:
			fprintf(stderr, "usage: sluice stat [-c FILE] [--segment SOCKET] [--json | --prometheus] [--top N]\n");
			return SL_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sluice: stat takes no argument ('%s'): the config is -c FILE\n", argv[optind]);
		return SL_EXIT_USAGE;
	}
	if (seg_opt && path) {
		fprintf(stderr, "sluice: -c and --segment both name what to show: give one\n");
		return SL_EXIT_USAGE;
	}
	if (seg_opt)
		return render_segment(seg_opt, mode, top, NULL);
	/* Nothing named and nothing at the default place: what this user can see. */
	if (!path && !(getenv("SLUICE_CONFIG") && *getenv("SLUICE_CONFIG")) &&
	    access(SL_DEFAULT_CONFIG, F_OK) != 0 && errno == ENOENT)
		return stat_without_config(SL_DEFAULT_CONFIG, mode, top);
	cfg = sl_cli_load(sl_cli_config_path(path));
	if (!cfg)
		return SL_EXIT_USAGE;
	if (sl_cli_segment_path(cfg, seg, sizeof(seg)) < 0) {
		fprintf(stderr, "sluice: %s says control_socket = none: no daemon, no shared segment; each program "
		        "limits itself (fallback = %s)\n", cfg->path,
		        cfg->global.fallback == SL_FALLBACK_OPEN ? "open" : cfg->global.fallback ? "closed" : "local");
		rc = SL_EXIT_FAIL;
		goto out;
	}
	if (mode == PROMETHEUS) {
		rc = render_segment(seg, mode, top, cfg->path);
		goto out;
	}
	snprintf(request, sizeof(request), "stat%s top %u", mode == JSON ? " json" : "", top);
	rc = sl_ctl_request(cfg->global.control_socket, request, &reply, 3000);
	if (mode == TEXT)
		say_which(cfg, seg);
	if (rc == 0 && strncmp(reply, "error", 5) != 0) {
		fputs(reply, stdout);
		rc = SL_EXIT_OK;
	} else {
		if (mode != JSON)
			say_no_answer(cfg, seg, rc);
		rc = render_segment(seg, mode, top, cfg->path);
	}
	free(reply);
out:
	sl_config_free(cfg);
	free(cfg);
	return rc;
}
