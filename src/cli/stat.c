/* `sluice stat`: ask the daemon; when it does not answer, read the segment directly
 * (shaping and its counters live there, not in the daemon).  --prometheus always
 * reads the segment: the same text sluiced serves on `metrics`, for
 * node_exporter's textfile collector. */
#include "cli.h"
#include "sluice/clock.h"
#include "sluice/ctl.h"
#include "sluice/shm.h"
#include "sluice/stats.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TEXT, JSON, PROMETHEUS };

static int render_segment(const char *name, int mode, unsigned top)
{
	struct sl_shm shm;
	int rc = sl_shm_attach(&shm, name, 0);

	if (rc < 0) {
		fprintf(stderr, "sluice: cannot read segment %s: %s\n", name,
		        rc == -EPROTO ? "not a sluice segment of this version" : strerror(-rc));
		return SL_EXIT_FAIL;
	}
	if (mode == PROMETHEUS)
		sl_stats_render_prometheus(shm.hdr, top, sl_clock_mono_ns(), stdout);
	else
		sl_stats_render_top(shm.hdr, mode == JSON, top, sl_clock_mono_ns(), stdout);
	sl_shm_detach(&shm);
	return SL_EXIT_OK;
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
		return render_segment(shm_name, mode, top);
	cfg = sl_cli_load(sl_cli_config_path(path));
	if (!cfg)
		return SL_EXIT_USAGE;
	if (mode == PROMETHEUS) {
		rc = render_segment(cfg->global.shm_name, mode, top);
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
			fprintf(stderr, "sluice: no daemon answers on %s; reading segment %s\n",
			        cfg->global.control_socket, cfg->global.shm_name);
		rc = render_segment(cfg->global.shm_name, mode, top);
	}
	free(reply);
	sl_config_free(cfg);
	free(cfg);
	return rc;
}
