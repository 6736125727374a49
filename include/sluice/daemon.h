/*
 * daemon.h - the daemon's state and event loop, shared by `sluiced` and the embedded
 * daemon of `sluice run`.
 *
 * The daemon owns the segment: it compiles the config into it, beats a heartbeat,
 * frees the segment lock when its holder died, reloads on SIGHUP (a bad config is
 * refused and the old one kept) and answers the control socket.  Shaping itself never
 * needs it: shims coordinate through the segment alone.
 */
#ifndef SLUICE_DAEMON_H
#define SLUICE_DAEMON_H

#include "sluice/config.h"
#include "sluice/shm.h"

#include <ev.h>
#include <stdio.h>
#include <sys/types.h>

struct sl_daemon_opts {
	const char *config_path;
	const char *shm_name;   /* NULL: the config's shm_name */
	int control;            /* serve the config's control socket */
	/* `sluice run`'s own daemon: a private segment it serves itself on this
	 * socket (no keeper: the segment ends with the run).  NULL: the machine's,
	 * kept by a keeper at the config's segment socket (segsock.h). */
	const char *private_socket;
	int handle_signals;     /* SIGHUP reloads, SIGTERM/SIGINT stop */
	int foreground;         /* logging to stderr: a keeper it starts does too */
	const char *state_dir;  /* what state_dir = auto means (sluiced -S); NULL: none */
};

struct sl_daemon {
	struct ev_loop *loop;
	struct sl_daemon_opts opts;
	char config_path[SL_PATH_MAX]; /* absolute */
	char shm_name[SL_PATH_MAX];
	struct sl_config *cfg; /* the configuration in force */
	struct sl_shm shm;    /* shm.self: the daemon's own roster token */
	char seg_path[108];   /* the segment's socket (segsock.h) */
	struct sl_segserve *serve; /* a private segment's server (private_socket) */
	int serving;          /* the start has served the segment (serve() in daemon.c) */
	int keeper_started;   /* ... with a keeper it started for a segment it made */
	int64_t keeper_checked_ns; /* the keeper was last found answering */
	int keeper_lost;      /* the keeper was gone and could not be started: said once */
	int64_t hold_allowed_until_ns; /* a hold in the segment is the daemon's own, or
	                                * raised by programs following a lost one,
	                                * until then; after, a scribble */
	struct sl_golden *golden; /* what the last load wrote, checked at each beat */
	int ctl_fd;
	char ctl_path[108];
	ev_io ctl_watcher;
	struct sl_ctl_client *clients; /* control connections being served (control.c) */
	/* What the control socket's "reload" runs: daemon.c gives its own reload to
	 * sl_control_open, so control.c calls nothing of daemon.c's. */
	int (*ctl_reload)(struct sl_daemon *d, FILE *errors);
	ev_timer heartbeat;
	ev_signal sig_hup, sig_term, sig_int;
	struct fleet *fleet; /* leases through Redis (fleet.c); NULL with no fleet section */
	struct sl_metrics *metrics; /* the Prometheus endpoint (metrics.c); NULL: off */
	char quota_dir[SL_PATH_MAX]; /* where durable quotas are kept ("" none), fixed at start */
	struct sl_quotas *quotas;    /* their state file (quotas.c); NULL: none kept */
	/* What the log has said, per section slot (log_news in daemon.c): */
	struct sl_section_seen {
		uint64_t pauses;    /* its pause count when last logged */
		uint64_t refused;   /* its refusals at the start of the current 10 s */
	} *seen;
	uint32_t nseen;
	int64_t refused_since; /* CLOCK_MONOTONIC: the current 10 s began */
};

/* Load the config, create or re-attach the segment, bind the control socket, and
 * register the watchers on `loop`.  Returns 0, -EINVAL for a bad config (errors are
 * printed), or -errno. */
int sl_daemon_start(struct sl_daemon *d, struct ev_loop *loop, const struct sl_daemon_opts *o);

/* Re-read the config file; on any error keep the current one.  Returns 0 or -EINVAL;
 * when `errors` is given, the errors are also written there. */
int sl_daemon_reload(struct sl_daemon *d, FILE *errors);

/* Stop the watchers, remove the control socket (and the segment when embedded).
 * The control connections are closed first: none may be served once the segment
 * is detached. */
void sl_daemon_stop(struct sl_daemon *d);

#endif
