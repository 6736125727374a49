/*
 * sluice - run programs under the shim, check configs, show the queues.
 *
 *   sluice run [-c FILE] [-v] -- CMD [ARG...]
 *   sluice check [-c FILE] [--keys] [--redis]
 *   sluice stat [-c FILE] [--segment SOCKET] [--json]
 *   sluice top [-c FILE] [--segment SOCKET] [--interval S] [--count N]
 *   sluice reload [-c FILE]
 *   sluice quota reset [-c FILE] SECTION
 *   sluice acquire [-c FILE] [--segment SOCKET] [-v] SECTION|HOST[:PORT]
 *   sluice segments [-c FILE] [--remove-unused | --remove SOCKET]
 */
#include "cli.h"
#include "oneliner.h"
#include "sluice/common.h"
#include "../daemon/fleet.h"
#include "../daemon/quotas.h"
#include "sluice/quota.h"
#include "sluice/ctl.h"
#include "sluice/log.h"
#include "sluice/stats.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every command, its usage and what it does: `sluice --help` lists them all,
 * `sluice CMD --help` (or -h) says one. */
struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage; /* after "sluice " */
	const char *what;
};

static const struct command commands[] = {
	{"run", sl_cmd_run, "run [-c FILE | --match HOST[:PORT] --rate R ...] [-v] [-q] [--seccomp | --no-seccomp] -- CMD [ARG...]",
	 "run CMD with its traffic shaped, saying calls held over 1 s (SLUICE_NOTICE)\n"
	 "        and refusals, and at its end what was held (-q or SLUICE_QUIET=1: not;\n"
	 "        -v: every decision of the shim); a one-liner\n"
	 "        (--match, --rate or --concurrency, --meter, --per, --strategy, --burst, --tolerance, --max-wait)\n"
	 "        needs no file"},
	{"check", sl_cmd_check, "check [-c FILE | --match ... --rate ...] [--keys] [--redis]",
	 "validate a config and print it compiled (a one-liner: the section it makes);\n"
	 "        --keys: every key; --redis: try the fleet's Redis"},
	{"stat", sl_cmd_stat, "stat [-c FILE] [--segment SOCKET] [--json | --prometheus] [--top N]",
	 "show every section's queue (and the N busiest keys)"},
	{"top", sl_cmd_top, "top [-c FILE] [--segment SOCKET] [--interval S] [--count N]", "a live view of every queue"},
	{"reload", sl_cmd_reload, "reload [-c FILE]", "make the daemon re-read its config"},
	{"acquire", sl_cmd_acquire, "acquire [-c FILE] [--segment SOCKET] [-v] SECTION|HOST[:PORT]",
	 "wait for a place in the queue, for scripts"},
	{"quota", sl_cmd_quota, "quota reset [-c FILE] SECTION",
	 "start a durable quota's count afresh (a lost or bad state file, a plan upgrade)"},
	{"segments", sl_cmd_segments, "segments [-c FILE] [--remove-unused | --remove SOCKET]",
	 "list the segments programs here can reach, by their sockets (keeper, owner, mode,\n"
	 "        processes attached, daemon, config); --remove-unused: stop the keepers nobody\n"
	 "        uses; --remove: stop one"},
};

static void say_command(FILE *out, const struct command *c, const char *lead)
{
	fprintf(out, "%ssluice %s\n        %s\n", lead, c->usage, c->what);
}

static int usage(FILE *out, int status)
{
	for (size_t i = 0; i < SL_ARRAY_LEN(commands); i++)
		say_command(out, &commands[i], i ? "       " : "usage: ");
	fprintf(out, "       sluice --version | -V\n"
	             "       sluice CMD --help\n"
	             "FILE defaults to $SLUICE_CONFIG, then " SL_DEFAULT_CONFIG ".\n");
	return status;
}

/* Whether a command's own options ask for help: those before "--" - and for run,
 * before the program it runs (`sluice run curl --help` is curl's). */
static int asks_help(const struct command *c, int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
		if (c->run == sl_cmd_run && argv[i][0] != '-')
			break;
		if (c->run == sl_cmd_run && strcmp(argv[i], "-c") == 0)
			i++; /* -c FILE */
	}
	return 0;
}

const char *sl_cli_config_path(const char *given)
{
	const char *env = getenv("SLUICE_CONFIG");

	if (given)
		return given;
	return env && *env ? env : SL_DEFAULT_CONFIG;
}

struct sl_config *sl_cli_load(const char *path)
{
	struct sl_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg) {
		fprintf(stderr, "sluice: out of memory\n");
		return NULL;
	}
	if (sl_config_load(cfg, path) != 0) {
		sl_config_print_errors(cfg, stderr);
		sl_config_free(cfg);
		free(cfg);
		return NULL;
	}
	return cfg;
}

/* Which state file keeps the config's quotas (docs/shaping.md, "Quotas"), for check. */
static void say_quotas(const struct sl_config *cfg, FILE *out)
{
	char names[512] = "", dir[SL_PATH_MAX];
	struct sl_quota_files f;
	size_t len = 0;
	unsigned n = 0;

	for (unsigned i = 0; i < cfg->nsections; i++) {
		if (!sl_quota_kept(&cfg->sections[i].spec))
			continue;
		if (len < sizeof(names) - 8)
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", n ? ", " : "",
			                        cfg->sections[i].spec.name);
		n++;
	}
	if (!n)
		return;
	if (strcmp(cfg->global.state_dir, "auto") == 0) {
		sl_quota_files(&f, SL_SERVICE_STATE_DIR, cfg->global.shm_name);
		fprintf(out, "# quotas (%s): state_dir = auto - the packaged service (sluiced -S %s) keeps them in "
		        "%s; a bare sluiced or sluice run keeps none\n", names, SL_SERVICE_STATE_DIR, f.path);
		return;
	}
	sl_quotas_dir(cfg, NULL, dir, sizeof(dir));
	if (!dir[0]) {
		fprintf(out, "# quotas (%s): state_dir = none - not kept: a new segment starts them afresh\n", names);
		return;
	}
	sl_quota_files(&f, dir, cfg->global.shm_name);
	fprintf(out, "# quotas (%s): kept in %s\n", names, f.path);
}

int sl_cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = {{"keys", no_argument, NULL, 'k'},
	                                         {"redis", no_argument, NULL, 'r'}, SL_ONELINER_OPTIONS, {0}};
	const char *path = NULL;
	struct sl_oneliner one = {0};
	struct sl_config *cfg;
	int opt, redis = 0, keys = 0, rc = SL_EXIT_OK;

	while ((opt = getopt_long(argc, argv, "c:kr", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'k': keys = 1; break;
		case 'r': redis = 1; break;
		default:
			switch (sl_oneliner_opt(&one, opt, optarg)) {
			case 1: break;
			case -1: return SL_EXIT_USAGE; /* said why */
			default: return usage(stderr, SL_EXIT_USAGE);
			}
			break;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "sluice check: no argument is taken ('%s'): the config is -c FILE\n", argv[optind]);
		return SL_EXIT_USAGE;
	}
	if (keys) {
		if (path || redis || sl_oneliner_given(&one)) {
			fprintf(stderr, "sluice check: --keys lists every key, of no config: give it alone\n");
			return SL_EXIT_USAGE;
		}
		sl_config_list_keys(stdout);
		return SL_EXIT_OK;
	}
	if (sl_oneliner_given(&one)) {
		/* What `sluice run` would make of the same options: the section to paste
		 * into a config, checked. */
		static char text[4096];

		if (path || redis) {
			fprintf(stderr, "sluice check: %s and a one-liner (--match, --rate...) do not mix\n",
			        path ? "-c" : "--redis");
			return SL_EXIT_USAGE;
		}
		if (sl_oneliner_check(&one, "sluice check") < 0)
			return SL_EXIT_USAGE;
		if (sl_oneliner_section(&one, text, sizeof(text)) < 0)
			return SL_EXIT_FAIL;
		fputs(text, stdout);
		return rc;
	}
	cfg = sl_cli_load(sl_cli_config_path(path));
	if (!cfg)
		return SL_EXIT_USAGE;
	sl_config_dump(cfg, stdout);
	say_quotas(cfg, stdout);
	/* Tried after the config is known good: what the daemon would meet. */
	if (redis && sl_fleet_probe(cfg, 3000, stdout) != 0)
		rc = SL_EXIT_FAIL;
	sl_config_free(cfg);
	free(cfg);
	return rc;
}

/* One control command to the daemon serving the config at `path`: its "ok ..."
 * reply on stdout (exit 0), any other on stderr (exit `refused`); no daemon
 * answering, said, exits 1. */
static int ask_daemon(const char *path, const char *cmd, int timeout_ms, int refused)
{
	struct sl_config *cfg = sl_cli_load(sl_cli_config_path(path));
	char *reply = NULL;
	int rc;

	if (!cfg)
		return SL_EXIT_USAGE;
	rc = sl_ctl_request(cfg->global.control_socket, cmd, &reply, timeout_ms);
	if (rc < 0) {
		fprintf(stderr, "sluice: no daemon answers on %s: %s\n", cfg->global.control_socket, strerror(-rc));
		rc = SL_EXIT_FAIL;
	} else {
		fputs(reply, strncmp(reply, "ok", 2) == 0 ? stdout : stderr);
		rc = strncmp(reply, "ok", 2) == 0 ? SL_EXIT_OK : refused;
	}
	free(reply);
	sl_config_free(cfg);
	free(cfg);
	return rc;
}

int sl_cmd_reload(int argc, char **argv)
{
	const char *path = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "c:")) != -1) {
		if (opt != 'c')
			return usage(stderr, SL_EXIT_USAGE);
		path = optarg;
	}
	return ask_daemon(path, "reload", 5000, SL_EXIT_USAGE);
}

int sl_cmd_quota(int argc, char **argv)
{
	const char *path = NULL;
	char cmd[128];
	int opt;

	if (argc < 2 || strcmp(argv[1], "reset") != 0)
		return usage(stderr, SL_EXIT_USAGE);
	argc--;
	argv++;
	while ((opt = getopt(argc, argv, "c:")) != -1) {
		if (opt != 'c')
			return usage(stderr, SL_EXIT_USAGE);
		path = optarg;
	}
	if (optind != argc - 1 || strlen(argv[optind]) >= SL_SECTION_NAME_MAX)
		return usage(stderr, SL_EXIT_USAGE);
	snprintf(cmd, sizeof(cmd), "quota reset %s", argv[optind]);
	return ask_daemon(path, cmd, 10000, SL_EXIT_FAIL);
}

int main(int argc, char **argv)
{
	const char *cmd;

	sl_stats_version = SL_VERSION;
	sl_log_init("sluice", 1, SL_LOG_WARNING);
	if (argc < 2)
		return usage(stderr, SL_EXIT_USAGE);
	cmd = argv[1];
	argc--;
	argv++;
	for (size_t i = 0; i < SL_ARRAY_LEN(commands); i++) {
		if (strcmp(cmd, commands[i].name) != 0)
			continue;
		if (asks_help(&commands[i], argc, argv)) {
			say_command(stdout, &commands[i], "usage: ");
			fprintf(stdout, "FILE defaults to $SLUICE_CONFIG, then " SL_DEFAULT_CONFIG ".\n");
			return SL_EXIT_OK;
		}
		return commands[i].run(argc, argv);
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("sluice %s\n", SL_VERSION);
		return SL_EXIT_OK;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0)
		return usage(stdout, SL_EXIT_OK);
	fprintf(stderr, "sluice: unknown command '%s'\n", cmd);
	return usage(stderr, SL_EXIT_USAGE);
}
