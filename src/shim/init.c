/*
 * Start-up of the shim: read the environment, attach the daemon's segment or apply
 * the config's fallback, and keep that state right across fork.
 *
 * Environment:
 *   SLUICE_SHM       segment to attach (default: the config's shm_name, else /sluice)
 *   SLUICE_CONFIG    config file: names the segment (when SLUICE_SHM does not), and is
 *                    what fallback = local uses.  Read only when the segment cannot be
 *                    attached or is not named otherwise: a config of 10,000 sections
 *                    is not parsed again by every process that starts.  Attached, the
 *                    daemon's fallback (its config's, in the segment) applies.
 *   SLUICE_FALLBACK  overrides the config's fallback: local | open | closed
 *   SLUICE_DEBUG     1: log each decision to stderr
 *   SLUICE_LOG       file to append debug lines to instead of stderr
 */
#include "sluice/clock.h"
#include "sluice/say.h"
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

/* No segment: compile the config into process-private memory, the same layout the
 * daemon's segment has, so the rest of the shim does not care which it is. */
static int start_fallback(const struct sl_config *cfg, int fallback)
{
	if (fallback == SL_FALLBACK_OPEN) {
		sl_debug("no segment; fallback = open: shaping nothing");
		return SL_SHIM_OFF;
	}
	struct sl_shm_dims dims;

	sl_config_dims(cfg, &dims);
	if (sl_shm_create_anonymous_dims(&sl_shim.shm, &dims) < 0 ||
	    sl_shm_apply_config(sl_shim.shm.hdr, cfg, sl_shim.pid) < 0) {
		sl_debug("no segment and no memory for a local one: shaping nothing");
		sl_shm_detach(&sl_shim.shm);
		return SL_SHIM_OFF;
	}
	if (fallback == SL_FALLBACK_CLOSED) {
		sl_debug("no segment; fallback = closed: refusing every matched request");
		return SL_SHIM_CLOSED;
	}
	sl_debug("no segment; fallback = local: this process limits itself (%u sections)",
	         cfg->nsections);
	return SL_SHIM_LOCAL;
}

static void at_fork_child(void)
{
	sl_shim.pid = (int32_t)getpid();
	sl_namemap_after_fork();
	sl_fdtab_after_fork();
	sl_slab_after_fork();
	sl_kicker_after_fork();
	sl_admission_after_fork();
	sl_tls_after_fork();
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

static int attach(const char *shm_name)
{
	int rc = sl_shm_attach(&sl_shim.shm, shm_name, 1);

	if (rc == 0) {
		sl_shim.mode = SL_SHIM_SHARED;
		snprintf(sl_shim.shm_name, sizeof(sl_shim.shm_name), "%s", shm_name);
		sl_debug("attached segment %s (generation %llu)", shm_name,
		         (unsigned long long)sl_shim.shm.hdr->generation);
	} else {
		sl_debug("cannot attach segment %s: %s", shm_name,
		         rc == -EPROTO ? "not a sluice segment of this version" : strerror(-rc));
	}
	return rc;
}

static void init_once_body(void)
{
	const char *cfg_path = getenv("SLUICE_CONFIG");
	const char *shm_name = getenv("SLUICE_SHM");
	const char *dbg = getenv("SLUICE_DEBUG");
	const char *log = getenv("SLUICE_LOG");
	const char *realtime = getenv(SL_REALTIME_ENV);
	struct sl_config *cfg = NULL;
	int fallback = SL_FALLBACK_LOCAL, rc = -ENOENT, tried = 0;

	sl_real_resolve();
	sl_real_seccomp_pass();
	sl_exec_capture();
	sl_shim.pid = (int32_t)getpid();
	sl_shim.debug = dbg && *dbg && strcmp(dbg, "0") != 0;
	sl_kicker_allow_realtime(sl_clock_realtime_wanted(realtime));
	sl_say_setup(getenv(SL_SAY_ENV)); /* a bad name: silent, as the shim is */
	if (log && sl_strlcpy(sl_shim.log_path, log, sizeof(sl_shim.log_path)) < 0)
		sl_shim.log_path[0] = '\0';
	pthread_atfork(NULL, NULL, at_fork_child);

	/* The segment named outright is attached first; the config is read only when
	 * it is needed - to name the segment, or for the fallback. */
	if (shm_name && *shm_name) {
		tried = 1;
		if ((rc = attach(shm_name)) == 0)
			fallback = sl_shim.shm.hdr->fallback <= SL_FALLBACK_CLOSED ? (int)sl_shim.shm.hdr->fallback
			                                                            : SL_FALLBACK_LOCAL;
	}
	if (rc != 0 && (cfg = load_config(cfg_path))) {
		fallback = cfg->global.fallback;
		if (!tried) {
			tried = 1;
			rc = attach(cfg->global.shm_name);
		}
	}
	if (!tried)
		rc = attach(sl_keys[SL_KEY_shm_name].def);
	fallback = parse_fallback(getenv("SLUICE_FALLBACK"), fallback);
	sl_shim.fallback = fallback;
	if (rc != 0) {
		if (cfg)
			sl_shim.mode = start_fallback(cfg, fallback);
		else
			sl_debug("no usable SLUICE_CONFIG either: shaping nothing");
	}
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
