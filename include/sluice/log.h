/*
 * log.h - logging for the daemon and the CLI (never used inside the shim).
 *
 * In the OpenBSD manner: sl_log_warn() appends strerror(errno), sl_log_warnx() does
 * not; sl_fatal()/sl_fatalx() log and exit(1).  Lines go to stderr in the foreground
 * and to syslog otherwise; in the foreground under systemd (stderr is the journal's
 * stream) each line begins with its syslog priority, "<3>" to "<7>", so that the
 * journal files it at that priority.  errno is preserved across every call.
 */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include "sluice/config.h"

void sl_log_init(const char *ident, int foreground, int level);
void sl_log_set_level(int level);
/* Whether syslog's socket (/dev/log) takes datagrams: a detached daemon logging
 * to syslog with nothing there loses every line without a word. */
int sl_log_syslog_reachable(void);

void sl_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sl_log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sl_log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sl_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sl_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sl_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void sl_fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
