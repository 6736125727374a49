/*
 * `sluice acquire SECTION|HOST[:PORT]`: take one place in the same queue the shim
 * uses, wait for its release, exit 0; exit 1 when refused.  For what neither the
 * preload shim nor seccomp (src/supervisor/) reaches: setuid programs, io_uring, shell
 * loops.
 *
 * The segment is asked for over its socket, in order: --segment SOCKET;
 * $SLUICE_SEGMENT (inside `sluice run`); the config's (segsock.h).  SIGINT, SIGTERM and
 * SIGHUP while waiting give the place back and exit 128+N.
 */
#include "cli.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/ctl.h"
#include "sluice/match.h"
#include "sluice/shm.h"
#include "sluice/config.h"
#include "sluice/pending.h"
#include "sluice/segsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static int usage(void)
{
	fprintf(stderr, "usage: sluice acquire [-c FILE] [--segment SOCKET] [-v] SECTION|HOST[:PORT]\n");
	return SL_EXIT_USAGE;
}

/* The section named `name`, by index, or -1. */
static int find_section(struct sl_shm_header *h, const char *name, uint32_t *serial)
{
	for (uint32_t i = 0, n = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections); i < n; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (sec->in_use && strncmp(sec->spec.name, name, SL_SECTION_NAME_MAX) == 0) {
			*serial = sec->serial;
			return (int)i;
		}
	}
	return -1;
}

/* HOST[:PORT] into a destination; a name is also resolved, so address patterns
 * apply to it as they would to the program's connect.  No PORT: port 0, which only
 * patterns without a port match. */
static int parse_target(const char *arg, struct sl_dest *d, char *name, size_t namelen)
{
	char host[SL_HOST_MAX + 8];
	const char *port = NULL, *close;
	size_t n;

	memset(d, 0, sizeof(*d));
	if (arg[0] == '[' && (close = strchr(arg, ']'))) {
		n = (size_t)(close - arg - 1);
		if (close[1] == ':')
			port = close + 2;
	} else if (strchr(arg, ':') && strchr(arg, ':') == strrchr(arg, ':')) {
		port = strchr(arg, ':') + 1;
		n = (size_t)(port - 1 - arg);
	} else {
		n = strlen(arg);
	}
	if (n == 0 || n >= sizeof(host))
		return -EINVAL;
	memcpy(host, arg[0] == '[' ? arg + 1 : arg, n);
	host[n] = '\0';
	if (port) {
		char *end;
		long p = strtol(port, &end, 10);

		if (*port == '\0' || *end != '\0' || p < 1 || p > 65535)
			return -EINVAL;
		d->port = (uint16_t)p;
	}
	if (inet_pton(AF_INET, host, d->addr) == 1) {
		d->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, host, d->addr) == 1) {
		d->family = AF_INET6;
		return 0;
	}
	if (sl_strlcpy(name, host, namelen) < 0)
		return -EINVAL;
	d->name = name;
	d->name_len = sl_name_normalise(name, strlen(name));
	{
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
		struct sl_dest r;

		if (getaddrinfo(host, NULL, &hints, &res) == 0 && res &&
		    sl_dest_from_sockaddr(&r, res->ai_addr, res->ai_addrlen) == 0) {
			d->family = r.family;
			memcpy(d->addr, r.addr, sizeof(d->addr));
		} else {
			d->family = AF_INET; /* unresolved: name patterns only */
		}
		if (res)
			freeaddrinfo(res);
	}
	return 0;
}

/* The segment's socket: --segment, else $SLUICE_SEGMENT, else the config's. */
static int segment_path(const char *opt, const char *config, char *out, size_t size)
{
	struct sl_config *cfg;
	int rc;

	if (opt)
		return sl_strlcpy(out, opt, size);
	cfg = sl_cli_load(sl_cli_config_path(config));
	if (!cfg)
		return -EINVAL;
	if ((rc = sl_cli_segment_path(cfg, out, size)) == -ENOENT)
		fprintf(stderr, "sluice: %s says control_socket = none: no shared queue to wait in\n", cfg->path);
	sl_config_free(cfg);
	free(cfg);
	return rc < 0 ? -EINVAL : 0;
}

/* The segment, asked for again when the daemon moves it (sl_shm_move). */
struct follow {
	struct sl_shm *shm;
	const char *path;
};

static struct sl_shm_header *follow_segment(void *ctx, int moved, int32_t *self)
{
	struct follow *f = ctx;
	struct sl_shm next;

	if (moved && sl_segsock_attach(f->path, 1, SL_SEGSOCK_TIMEOUT_NS, &next, NULL, 0) == 0) {
		if (next.ino == f->shm->ino) {
			sl_shm_detach(&next); /* not moved yet: asked again at the next step */
		} else {
			/* The old mapping stays: the pending admission's ticket is void there. */
			*f->shm = next;
		}
	}
	*self = f->shm->self;
	return f->shm->hdr;
}

int sl_cmd_acquire(int argc, char **argv)
{
	static const struct option longopts[] = {{"segment", required_argument, NULL, 's'}, {0}};
	const char *config = NULL, *seg_opt = NULL, *target;
	char seg_path[108], name[SL_HOST_MAX], why[256];
	struct sigaction sa = {.sa_handler = on_signal};
	struct sl_match m = {0};
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;
	struct sl_shm shm;
	struct sl_dest d;
	int verbose = 0, opt, rc, idx;

	while ((opt = getopt_long(argc, argv, "c:s:v", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': config = optarg; break;
		case 's': seg_opt = optarg; break;
		case 'v': verbose = 1; break;
		default: return usage();
		}
	}
	if (optind + 1 != argc)
		return usage();
	target = argv[optind];
	if (segment_path(seg_opt, config, seg_path, sizeof(seg_path)) < 0)
		return SL_EXIT_USAGE;
	if ((rc = sl_segsock_attach(seg_path, 1, 3 * SL_SEGSOCK_TIMEOUT_NS, &shm, why, sizeof(why))) < 0) {
		sl_cli_segment_error("cannot attach", seg_path, rc, why);
		return SL_EXIT_FAIL;
	}
	if ((idx = find_section(shm.hdr, target, &m.serial[0])) >= 0) {
		if (sl_shm_section(shm.hdr, (unsigned)idx)->spec.per != SL_PER_NONE) {
			/* A queue per destination: which one is this for? */
			fprintf(stderr, "sluice: section [%s] keeps a queue per destination (per): name "
			        "the destination, HOST[:PORT], instead\n", target);
			return SL_EXIT_USAGE;
		}
		m.idx[0] = (uint32_t)idx;
		m.mask = 1;
		m.keyed = 0;
	} else if (!strchr(target, '.') && !strchr(target, ':') && strcmp(target, "localhost") != 0) {
		fprintf(stderr, "sluice: no section [%s] in the segment at %s\n", target, seg_path);
		return SL_EXIT_USAGE;
	} else if (parse_target(target, &d, name, sizeof(name)) < 0) {
		fprintf(stderr, "sluice: bad destination '%s' (want HOST, HOST:PORT or [IPV6]:PORT)\n", target);
		return SL_EXIT_USAGE;
	} else if (sl_match_sections(shm.hdr, &d, &m, shm.self) <= 0) {
		fprintf(stderr, "sluice: no section limits %s: not held\n", target);
		return SL_EXIT_OK;
	}

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	{
		/* Undecided is never a release: a script asking leaves its call undone
		 * unless the shared queue decides within max_wait (fallback = local). */
		const struct sl_pending_ask a = {.m = &m, .d = idx >= 0 ? NULL : &d, .self = shm.self,
		                                 .fallback = SL_FALLBACK_LOCAL, .default_errno = ECONNREFUSED};
		struct follow f = {&shm, seg_path};

		sl_pending_start(p, shm.hdr, &a, sl_clock_mono_ns());
		rc = sl_pending_wait(p, follow_segment, &f, &stop_signal, NULL, NULL);
	}
	if (rc == -EINTR) {
		fprintf(stderr, "sluice: interrupted by signal %d: place returned\n", (int)stop_signal);
		return 128 + stop_signal;
	}
	if (p->undecided_why)
		fprintf(stderr, "sluice: the segment at %s could not decide at first (%s)%s\n", seg_path, p->undecided_why,
		        rc == SL_PEND_GO ? "; its queue did then" : "");
	if (rc == SL_PEND_REFUSED) {
		fprintf(stderr, "sluice: refused: %s%s%.*s%s\n", p->why ? p->why : "refused",
		        p->refusing_section >= 0 ? " of [" : "", SL_SECTION_NAME_MAX - 1,
		        p->refusing_section >= 0 ? sl_section_name(shm.hdr, p->refusing_section) : "",
		        p->refusing_section >= 0 ? "]" : "");
		return SL_EXIT_FAIL;
	}
	if (verbose && p->t.mask) /* the shim's SLUICE_DEBUG format, so one tool reads both */
		fprintf(stderr, "sluice[%d]: acquire %s sections=%s: go waited=%.3fms slot=%lld released=%lld\n",
		        (int)getpid(), target, idx >= 0 ? target : "-",
		        (double)(p->t.released_ns - p->asked_ns) / 1e6, (long long)p->t.release_ns,
		        (long long)p->t.released_ns);
	sl_shm_detach(&shm);
	return SL_EXIT_OK;
}
