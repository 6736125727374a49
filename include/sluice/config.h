/*
 * config.h - the configuration model and its INI parser (docs/config.md).
 *
 * Parsing is two passes: inih hands us every key with its line number and we keep
 * the raw text; each section is then compiled into a struct sl_spec (shm-t.h), the
 * same record the shared segment holds, and its patterns into the config's one
 * pattern table (each section's in a run of its own, as in the segment), so the
 * shim, the daemon and `sluice check` all see one compiled form.  A config holds as
 * many sections and patterns as the segment's largest tables can
 * (SL_SECTIONS_MAX, SL_PATTERNS_MAX); its arrays grow as it is read.  Every problem is reported as "FILE:LINE: message";
 * parsing goes on after an error so a user sees them all at once.
 */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include "sluice/shm-t.h"

#include <stdio.h>

enum sl_fallback {
	SL_FALLBACK_LOCAL = 0,  /* no segment: each process limits itself from the config */
	SL_FALLBACK_OPEN = 1,   /* no segment: shape nothing */
	SL_FALLBACK_CLOSED = 2, /* no segment: refuse every matched request */
};

enum sl_log_level { SL_LOG_ERROR, SL_LOG_WARNING, SL_LOG_NOTICE, SL_LOG_INFO, SL_LOG_DEBUG };

struct sl_global {
	char shm_name[SL_PATH_MAX];
	char control_socket[108]; /* sizeof(sun_path) */
	unsigned shm_mode;
	char shm_group[SL_SECTION_NAME_MAX]; /* segment and control socket's group; ""
	                                      * the daemon's own */
	int fallback;  /* enum sl_fallback */
	int log_level; /* enum sl_log_level */
	uint32_t keys; /* records in the segment's key table (per = ...) */
	uint32_t sections; /* records in the segment's section table; 0: twice the config's */
	uint32_t patterns; /* records in its pattern table; 0: twice the config's */
	uint32_t holders;  /* entries in its holder table (a power of two) */
	uint32_t processes; /* entries in its roster (processes attached at once) */
	/* Across machines (scope = fleet): where the fleet's Redis is, and who this
	 * machine is in it (docs/config.md, "Across machines"). */
	char redis[SL_PATH_MAX];      /* "HOST:PORT" or a unix socket's path; "" none */
	char redis_auth[SL_PATH_MAX]; /* a file holding "PASSWORD" or "USER PASSWORD" */
	/* Or Redis made highly available: Sentinels that name the master, or a
	 * Cluster's nodes.  At most one of redis, redis_sentinels, redis_cluster. */
	char redis_sentinels[SL_PATH_MAX]; /* "HOST:PORT HOST:PORT ..."; "" none */
	char redis_master[SL_SECTION_NAME_MAX]; /* the Sentinels' name for it */
	char redis_sentinel_auth[SL_PATH_MAX];  /* like redis_auth, for the Sentinels */
	char redis_cluster[SL_PATH_MAX];   /* "HOST:PORT HOST:PORT ..."; "" none */
	char fleet[SL_SECTION_NAME_MAX];   /* the fleet's name: its keys' prefix */
	char machine[SL_SECTION_NAME_MAX]; /* this machine's name in it; "" this host's
	                                    * name and the segment's */
	int64_t refresh_ns;           /* how often leases are renewed */
	uint32_t hosts;               /* machines in the fleet: each's part while none
	                               * has a lease */
	uint8_t claims;               /* 1: light grid items are served by claims
	                               * (docs/design.md, "Claims") */
	char metrics[SL_PATH_MAX];    /* Prometheus endpoint "HOST:PORT"; "" off */
	char state_dir[SL_PATH_MAX];  /* where quotas are kept (quota.h): a directory,
	                               * "auto" (sluiced -S says), or "" none */
};

struct sl_section_conf {
	struct sl_spec spec;
	int line; /* line of the [header] */
};

#define SL_CONFIG_MAX_ERRORS 32
#define SL_CONFIG_ERROR_LEN 320

struct sl_config {
	char path[SL_PATH_MAX];
	struct sl_global global;
	unsigned nsections, sections_cap;
	struct sl_section_conf *sections; /* nsections of them (malloc'd) */
	unsigned npatterns, patterns_cap;
	struct sl_pattern *patterns;      /* every section's, in the sections' order */
	unsigned nerrors; /* may exceed SL_CONFIG_MAX_ERRORS; only that many are kept */
	char errors[SL_CONFIG_MAX_ERRORS][SL_CONFIG_ERROR_LEN]; /* sorted by line */
	int error_lines[SL_CONFIG_MAX_ERRORS];
};

/* Where sluiced and sluice look for the config when told nothing. */
#define SL_DEFAULT_CONFIG "/etc/sluice/sluice.ini"

/* Defaults of the [sluice] section. */
void sl_config_defaults(struct sl_config *cfg);

/* Endpoints in one redis_sentinels or redis_cluster list, at most. */
#define SL_ENDPOINTS_MAX 16

/* Whether [sluice] says where the fleet's Redis is: redis, redis_sentinels or
 * redis_cluster. */
static inline int sl_config_has_redis(const struct sl_config *cfg)
{
	return cfg->global.redis[0] || cfg->global.redis_sentinels[0] || cfg->global.redis_cluster[0];
}

/* The largest config file read: anything bigger is refused unread. */
#define SL_CONFIG_MAX_BYTES (16u << 20)

/* Parse `path` into `cfg`, which the caller allocates zeroed (or gives back from an
 * earlier load: what it held is freed first).  Only a regular file of at most
 * SL_CONFIG_MAX_BYTES, without NUL bytes, is a config.
 * Returns 0, or -EINVAL when cfg->nerrors > 0, or -errno when the file cannot be
 * read or is no config file (also recorded as an error). */
int sl_config_load(struct sl_config *cfg, const char *path);

/* Same from a string, reported under the name `path`; for tests and fuzzing. */
int sl_config_load_string(struct sl_config *cfg, const char *path, const char *text);

/* Free what cfg's arrays hold (not cfg itself); cfg is then an empty config. */
void sl_config_free(struct sl_config *cfg);

/* Section i's patterns (npatterns of them), or NULL when none. */
const struct sl_pattern *sl_config_patterns(const struct sl_config *cfg, const struct sl_spec *s);

/* Print every recorded error, one per line. */
void sl_config_print_errors(const struct sl_config *cfg, FILE *out);

/* Print the compiled configuration (`sluice check`). */
void sl_config_dump(const struct sl_config *cfg, FILE *out);

/* Print one compiled section's settings, one "key value" per line, each prefixed
 * by `indent`; `pats` are its patterns (s->npatterns of them). */
void sl_spec_dump(const struct sl_spec *s, const struct sl_pattern *pats, const char *indent,
                  FILE *out);

/* Names for enum values (also used by stats). */
const char *sl_meter_name(unsigned meter);
const char *sl_strategy_name(unsigned strategy);
const char *sl_fallback_name(int fallback);

/* Print every key with its default and meaning (`sluice check --keys`). */
void sl_config_list_keys(FILE *out);
/* The [sluice] keys that differ between `was` and `now` and take effect only at
 * a restart (config_keys.def), as "a, b" into buf; returns how many. */
size_t sl_config_restart_keys(const struct sl_global *was, const struct sl_global *now, char *buf, size_t size);

/* Parse a `per` value into s->per and its prefixes.  0, or -1 with a reason. */
int sl_parse_per(const char *text, struct sl_spec *s, char *err, size_t errlen);

/* Write s's `per` back in config syntax ("none" when unkeyed). */
int sl_format_per(const struct sl_spec *s, char *buf, size_t size);

/* Edit distance, for "did you mean" hints. */
unsigned sl_edit_distance(const char *a, const char *b);
/* Of names[0..n-1], the one `s` most likely meant: one it begins (3 characters at
 * least), one at most two edits away, or one it begins with; NULL when none is. */
const char *sl_nearest_name(const char *s, const char *const *names, unsigned n);

#endif
