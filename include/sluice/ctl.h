/*
 * ctl.h - the daemon's control socket protocol.
 *
 * A client connects to the Unix stream socket, writes one command line and reads
 * the reply until the daemon closes the connection.  Commands:
 *   ping            -> "pong PID GENERATION"
 *   info            -> "pid=..\nshm_name=..\nconfig=..\ngeneration=..\n"
 *   stat [json] [top N] -> the table or JSON of sl_stats_render_top()
 *   reload          -> "ok generation N", or "error" and the config's errors
 *                      (only root or the daemon's own user; checked by SO_PEERCRED)
 * A reply starting with "error" is a failure.
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <stddef.h>

/* The largest reply read: the stats of a config at the largest section table
 * (about 500 bytes a section) fit. */
#define SL_CTL_MAX_REPLY ((size_t)1 << 30)

/* Send `cmd` and read the whole reply into a malloc'd, NUL-terminated *reply.
 * Returns 0, or -errno (-ECONNREFUSED / -ENOENT when no daemon listens; -EPERM
 * when another user's process listens there, one not to be trusted: segsock.h,
 * sl_segsock_trusted). */
int sl_ctl_request(const char *path, const char *cmd, char **reply, int timeout_ms);

/* From an "info" reply, the value of `key` copied into `out`; 0 or -ENOENT. */
int sl_ctl_info_value(const char *reply, const char *key, char *out, size_t size);

#endif
