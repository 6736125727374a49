/* Sub-commands of the `sluice` program (one file each) and what they share. */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include "sluice/config.h"
#include "sluice/shm.h"

#include <stddef.h>


/* Exit statuses: 0 fine, 1 runtime failure, 2 bad usage or bad config. */
enum { SL_EXIT_OK = 0, SL_EXIT_FAIL = 1, SL_EXIT_USAGE = 2 };

int sl_cmd_run(int argc, char **argv);
int sl_cmd_check(int argc, char **argv);
int sl_cmd_stat(int argc, char **argv);
int sl_cmd_top(int argc, char **argv);
int sl_cmd_reload(int argc, char **argv);
int sl_cmd_quota(int argc, char **argv);
int sl_cmd_acquire(int argc, char **argv);
int sl_cmd_segments(int argc, char **argv);

/* The config path a command should use: -c, else $SLUICE_CONFIG, else the default. */
const char *sl_cli_config_path(const char *given);

/* On stderr: "sluice: WHAT segment at PATH (keeper, owner, mode): why" and what
 * fixes it; `why` is what its server said, or NULL (stat.c). */
void sl_cli_segment_error(const char *what, const char *path, int rc, const char *why);

/* The segment socket a program started here would ask: $SLUICE_SEGMENT, else
 * the config's (segsock.h).  0, or -ENOENT for control_socket = none. */
int sl_cli_segment_path(const struct sl_config *cfg, char *out, size_t len);

/* Attach the segment at `path` read-only, saying why not on stderr.  0 or -errno. */
int sl_cli_attach(const char *path, struct sl_shm *shm);

/* Load `path` into a new config; on errors print them and return NULL. */
struct sl_config *sl_cli_load(const char *path);

/* The shm_name of the segment a `sluice run` hosts for itself: this prefix and
 * its pid.  Its config (the user's file or a one-liner's) names another. */
#define SL_RUN_SHM_PREFIX "/sluice-run-"

#endif
