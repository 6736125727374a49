/*
 * quotas.h - the daemon's half of durable quotas (include/sluice/quota.h): the state
 * file in state_dir, written ahead of use, read back into a new segment.
 */
#ifndef SLUICE_DAEMON_QUOTAS_H
#define SLUICE_DAEMON_QUOTAS_H

#include "sluice/config.h"

#include <stdio.h>

struct sl_daemon;

/* Where the packaged service keeps quotas (its unit runs sluiced -S with it). */
#define SL_SERVICE_STATE_DIR "/var/lib/sluice"

/* The directory quotas are kept in for cfg ("" none): state_dir, with auto
 * meaning `fallback_dir` (sluiced -S; NULL or "" none). */
void sl_quotas_dir(const struct sl_config *cfg, const char *fallback_dir, char *dir, size_t size);

/* Mark cfg's sections durable when dir is set and they are quotas (sl_quota_kept). */
void sl_quotas_mark(struct sl_config *cfg, const char *dir);

/* Take d->quota_dir for d's segment (no-op without one): lock its state file
 * against other daemons, restore it into the segment when `created` (a new one,
 * not yet published), save, and start granting.  0, or -errno (said in the log). */
int sl_quotas_start(struct sl_daemon *d, int created);

/* A clean stop: every grant taken back and the exact counts saved. */
void sl_quotas_stop(struct sl_daemon *d);

/* `sluice quota reset SECTION`: its count (and its keys') back to nothing, a block
 * from a lost or bad file lifted, and saved.  What happened goes to `out`;
 * 0, or -ENOENT (no such durable section) or -errno. */
int sl_quotas_reset(struct sl_daemon *d, const char *section, FILE *out);

#endif
