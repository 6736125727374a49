/* Sub-commands of the `sluice` program (one file each) and what they share. */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include "sluice/config.h"


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

/* On stderr: "sluice: WHAT segment NAME (key, shmid, owner, mode): why" and what
 * fixes it (stat.c). */
void sl_cli_segment_error(const char *what, const char *name, int rc);

/* Load `path` into a new config; on errors print them and return NULL. */
struct sl_config *sl_cli_load(const char *path);

#endif
