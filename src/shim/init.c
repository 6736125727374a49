/*
 * Start-up of the shim: read the environment, decide where the segment will come
 * from, and keep that state right across fork.  Nothing is attached here: the
 * first call that needs the segment asks for it (attach.c), so a program that
 * never talks to the network never talks to the daemon either.
 *
 * Environment:
 *   SLUICE_SEGMENT   the segment's socket (segsock.h); default: beside the
 *                    config's control_socket.  none: no daemon, as with
 *                    control_socket = none
 *   SLUICE_CONFIG    the config: names the segment's socket (when SLUICE_SEGMENT
 *                    does not), says what matches while the segment cannot be
 *                    reached, and with control_socket = none is this process's
 *                    own limits (fallback = local).  Default /etc/sluice/sluice.ini
 *                    when it can be read.
 *   SLUICE_FALLBACK  overrides the config's fallback: local | open | closed
 *   SLUICE_DEBUG     1: log each decision to stderr
 *   SLUICE_LOG       file to append debug lines to instead of stderr
 */
#include "sluice/clock.h"
#include "sluice/say.h"
#include "sluice/segsock.h"
#include "shim.h"
#include "sluice/config_keys.h"
#include "fdtab.h"
#include "record.h"
#include "kicker.h"
#include "slab.h"
#include "sluice/config.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sl_shim sl_shim;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static int parse_fallback(const char *s, int dflt)
{
	int f;

	if (!s || !*s)
		return dflt;
	if ((f = sl_key_choice(SL_KT_FALLBACK, s)) >= 0)
		return f;
	sl_debug("SLUICE_FALLBACK='%s' is not local, open or closed; using the config's", s);
	return dflt;
}

/* control_socket = none: no daemon by design, so this process limits itself from
 * the config (fallback = local), or shapes nothing (open), or refuses every
 * matched call (closed) - the same layout as the daemon's segment, in private
 * memory, so the rest of the shim does not care which it is.  A section the
 * daemon must keep (a window, a durable quota, a fleet's) is refused in it
 * (sl_spec_needs_daemon). */
static int start_local(const struct sl_config *cfg, int fallback)
{
	if (fallback == SL_FALLBACK_OPEN) {
		sl_debug("control_socket = none; fallback = open: shaping nothing");
		return SL_SHIM_OFF;
	}
	struct sl_shm_dims dims;

	sl_config_dims(cfg, &dims);
	if (sl_shm_create_anonymous_dims(&sl_shim.shm, &dims) < 0 ||
	    sl_shm_apply_config(sl_shim.shm.hdr, cfg, sl_shim.shm.self) < 0) {
		sl_debug("control_socket = none and no memory for a private segment: shaping nothing");
		sl_shm_detach(&sl_shim.shm);
		return SL_SHIM_OFF;
	}
	sl_debug("control_socket = none; fallback = %s (%u sections)",
	         fallback == SL_FALLBACK_CLOSED ? "closed: refusing every matched request"
	                                        : "local: this process limits itself",
	         cfg->nsections);
	return SL_SHIM_LOCAL;
}

static void at_fork_child(void)
{
	sl_shim.pid = (int32_t)getpid();
	/* Its parent's token is not its own: a shared segment's child is entered
	 * under one of its own at its first call that needs it (attach.c). */
	if (sl_shim.mode == SL_SHIM_SHARED)
		sl_shim.shm.self = 0;
	sl_attach_after_fork();
	sl_namemap_after_fork();
	sl_fdtab_after_fork();
	sl_slab_after_fork();
	sl_kicker_after_fork();
	sl_tls_after_fork();
	sl_say_after_fork();
	/* A private segment's lock may have been held by a thread that does not exist in
	 * the child; no other process can hold it. */
	if (sl_shim.shm.hdr && sl_shim.shm.anonymous)
		sl_shim.shm.hdr->lock = 0;
}

/* SLUICE_CONFIG, parsed; NULL when unset or unusable (said under SLUICE_DEBUG). */
static struct sl_config *load_config(const char *path)
{
	struct sl_config *cfg;

	if (!path || !*path || !(cfg = calloc(1, sizeof(*cfg))))
		return NULL;
	if (sl_config_load(cfg, path) != 0) {
		for (unsigned i = 0; i < SL_MIN(cfg->nerrors, (unsigned)SL_CONFIG_MAX_ERRORS); i++)
			sl_debug("%s", cfg->errors[i]);
		sl_debug("SLUICE_CONFIG unusable: the config is ignored");
		sl_config_free(cfg);
		free(cfg);
		return NULL;
	}
	return cfg;
}

static void init_once_body(void)
{
	const char *cfg_path = getenv("SLUICE_CONFIG");
	const char *seg = getenv("SLUICE_SEGMENT");
	const char *dbg = getenv("SLUICE_DEBUG");
	const char *log = getenv("SLUICE_LOG");
	const char *realtime = getenv(SL_REALTIME_ENV);
	struct sl_config *cfg = NULL;
	int fallback = SL_FALLBACK_LOCAL;

	sl_real_resolve();
	sl_real_seccomp_pass();
	sl_exec_capture();
	sl_shim.pid = (int32_t)getpid();
	sl_shim.debug = dbg && *dbg && strcmp(dbg, "0") != 0;
	sl_kicker_allow_realtime(sl_clock_realtime_wanted(realtime));
	sl_say_setup(getenv(SL_SAY_ENV)); /* a bad name: silent, as the shim is */
	sl_say_threshold(getenv(SL_NOTICE_ENV));
	if (log && sl_strlcpy(sl_shim.log_path, log, sizeof(sl_shim.log_path)) < 0)
		sl_shim.log_path[0] = '\0';
	pthread_atfork(NULL, NULL, at_fork_child);

	if (!(cfg_path && *cfg_path) && sl_sys(SYS_faccessat, AT_FDCWD, SL_DEFAULT_CONFIG, R_OK, 0) == 0)
		cfg_path = SL_DEFAULT_CONFIG;
	if (cfg_path && *cfg_path && sl_strlcpy(sl_shim.config_path, cfg_path, sizeof(sl_shim.config_path)) < 0)
		sl_shim.config_path[0] = '\0';
	sl_shim.mode = SL_SHIM_LATER;
	if (seg && strcmp(seg, "none") == 0) {
		/* No daemon by design: the config is this process's own limits. */
		if ((cfg = load_config(sl_shim.config_path)))
			sl_shim.mode = start_local(cfg, parse_fallback(getenv("SLUICE_FALLBACK"), cfg->global.fallback));
		else
			sl_shim.mode = SL_SHIM_OFF;
		if (cfg)
			fallback = cfg->global.fallback;
	} else if (seg && *seg) {
		/* Named outright (`sluice run` names it): the config is read only if the
		 * segment cannot be reached. */
		if (sl_strlcpy(sl_shim.seg_path, seg, sizeof(sl_shim.seg_path)) < 0) {
			sl_debug("SLUICE_SEGMENT is too long for a socket's path: shaping nothing");
			sl_shim.mode = SL_SHIM_OFF;
		}
	} else if ((cfg = load_config(sl_shim.config_path))) {
		fallback = cfg->global.fallback;
		if (sl_segsock_path(&cfg->global, sl_shim.seg_path, sizeof(sl_shim.seg_path)) == -ENOENT)
			sl_shim.mode = start_local(cfg, parse_fallback(getenv("SLUICE_FALLBACK"), fallback));
	} else {
		struct sl_global g = {0};

		sl_strlcpy(g.control_socket, sl_keys[SL_KEY_control_socket].def, sizeof(g.control_socket));
		sl_strlcpy(g.shm_name, sl_keys[SL_KEY_shm_name].def, sizeof(g.shm_name));
		sl_segsock_path(&g, sl_shim.seg_path, sizeof(sl_shim.seg_path));
	}
	sl_shim.fallback = parse_fallback(getenv("SLUICE_FALLBACK"), fallback);
	sl_shim.fallback_forced = getenv("SLUICE_FALLBACK") && *getenv("SLUICE_FALLBACK");
	if (cfg)
		sl_config_free(cfg);
	free(cfg);
	/* Only a process with something to shape has critical sections to keep
	 * handlers out of. */
	if (sl_shim.mode != SL_SHIM_OFF)
		sl_signals_init();
	atomic_store_explicit(&sl_shim.ready, 2, memory_order_release);
}

void sl_shim_init(void)
{
	pthread_once(&init_once, init_once_body);
}

__attribute__((constructor)) static void sl_shim_constructor(void)
{
	sl_shim_init();
}
