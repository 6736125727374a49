/* `sluice stat`: ask the daemon; when it does not answer, read the segment directly
 * (shaping and its counters live there, not in the daemon).  --prometheus always
 * reads the segment: the same text sluiced serves on `metrics`, for
 * node_exporter's textfile collector. */
#include "cli.h"
#include "sluice/clock.h"
#include "sluice/ctl.h"
#include "sluice/shm.h"
#include "sluice/segments.h"
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

/* Say why segment `name` cannot be read, naming it as `ipcs` would, and the fix. */
void sl_cli_segment_error(const char *what, const char *name, int rc)
{
	char about[256], fix[256];

	sl_segment_about(name, about, sizeof(about));
	sl_segment_fix(name, rc, fix, sizeof(fix));
	fprintf(stderr, "sluice: %s %s: %s%s%s\n", what, about,
	        rc == -EPROTO ? "not a sluice segment of this version" : strerror(-rc), fix[0] ? "\n  " : "", fix);
}

/* expect: the config the caller meant (NULL: any); a segment serving another is
 * read all the same, with a word on stderr. */
static int render_segment(const char *name, int mode, unsigned top, const char *expect)
{
	struct sl_shm shm;
	char served[SL_PATH_MAX], want[SL_PATH_MAX];
	int rc = sl_shm_attach(&shm, name, 0);

	if (rc < 0) {
		sl_cli_segment_error("cannot read", name, rc);
		return SL_EXIT_FAIL;
	}
	memcpy(served, shm.hdr->config_path, sizeof(served));
	served[sizeof(served) - 1] = '\0';
	if (expect && sl_realpath(expect, want, sizeof(want)) == 0 && served[0] && strcmp(served, want) != 0)
		fprintf(stderr, "sluice: segment %s was made from %s, not %s: its sections are shown\n", name,
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
static void say_no_answer(const struct sl_config *cfg, int rc)
{
	const char *sock = cfg->global.control_socket;
	struct stat st;
	struct passwd *pw = getpwuid(getuid());
	struct group *gr;

	if ((rc == -EACCES || rc == -EPERM) && stat(sock, &st) == 0) {
		gr = getgrgid(st.st_gid);
		fprintf(stderr, "sluice: %s may not use the daemon's control socket %s (group %s, mode %04o): "
		        "sudo usermod -aG %s %s, then log in again; reading segment %s\n",
		        pw ? pw->pw_name : "this user", sock, gr ? gr->gr_name : "?", st.st_mode & 07777,
		        gr ? gr->gr_name : "GROUP", pw ? pw->pw_name : "USER", cfg->global.shm_name);
		return;
	}
	fprintf(stderr, "sluice: no daemon answers on %s (%s); reading segment %s\n", sock,
	        rc < 0 ? strerror(-rc) : "it said it could not", cfg->global.shm_name);
}

int sl_cmd_stat(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'}, {"shm", required_argument, NULL, 's'},
		{"top", required_argument, NULL, 't'}, {"prometheus", no_argument, NULL, 'p'}, {0}};
	const char *path = NULL, *shm_name = NULL;
	struct sl_config *cfg;
	char *reply = NULL, request[64], *end;
	unsigned top = SL_STATS_TOP_DEFAULT;
	int mode = TEXT, opt, rc;

	while ((opt = getopt_long(argc, argv, "c:js:t:p", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'j': mode = JSON; break;
		case 'p': mode = PROMETHEUS; break;
		case 's': shm_name = optarg; break;
		case 't':
			top = (unsigned)strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || top > SL_STATS_TOP_MAX) {
				fprintf(stderr, "sluice: --top wants a count from 0 to %d\n", SL_STATS_TOP_MAX);
				return SL_EXIT_USAGE;
			}
			break;
		default:
			fprintf(stderr, "usage: sluice stat [-c FILE] [--shm NAME] [--json | --prometheus] [--top N]\n");
			return SL_EXIT_USAGE;
		}
	}
	if (shm_name)
		return render_segment(shm_name, mode, top, NULL);
	cfg = sl_cli_load(sl_cli_config_path(path));
	if (!cfg)
		return SL_EXIT_USAGE;
	if (mode == PROMETHEUS) {
		rc = render_segment(cfg->global.shm_name, mode, top, cfg->path);
		sl_config_free(cfg);
		free(cfg);
		return rc;
	}
	snprintf(request, sizeof(request), "stat%s top %u", mode == JSON ? " json" : "", top);
	rc = sl_ctl_request(cfg->global.control_socket, request, &reply, 3000);
	if (rc == 0 && strncmp(reply, "error", 5) != 0) {
		fputs(reply, stdout);
		rc = SL_EXIT_OK;
	} else {
		if (mode != JSON)
			say_no_answer(cfg, rc);
		rc = render_segment(cfg->global.shm_name, mode, top, cfg->path);
	}
	free(reply);
	sl_config_free(cfg);
	free(cfg);
	return rc;
}
