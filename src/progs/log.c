#include "sluice/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

static const char *log_ident = "sluice";
static int log_foreground = 1;
static int log_level = SL_LOG_INFO;

void sl_log_init(const char *ident, int foreground, int level)
{
	log_ident = ident;
	log_foreground = foreground;
	log_level = level;
	if (!foreground)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void sl_log_set_level(int level)
{
	log_level = level;
}

static void vlog(int level, int with_errno, const char *fmt, va_list ap)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};
	char msg[1024];
	int saved = errno;

	if (level > log_level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (with_errno) {
		size_t n = strlen(msg);

		snprintf(msg + n, sizeof(msg) - n, ": %s", strerror(saved));
	}
	if (log_foreground)
		fprintf(stderr, "%s: %s\n", log_ident, msg);
	else
		syslog(prio[level], "%s", msg);
	errno = saved;
}

#define DEFINE_LOG(fn, level, with_errno)                                                  \
	void fn(const char *fmt, ...)                                                          \
	{                                                                                      \
		va_list ap;                                                                        \
		va_start(ap, fmt);                                                                 \
		vlog(level, with_errno, fmt, ap);                                                  \
		va_end(ap);                                                                        \
	}

DEFINE_LOG(sl_log_warn, SL_LOG_WARNING, 1)
DEFINE_LOG(sl_log_warnx, SL_LOG_WARNING, 0)
DEFINE_LOG(sl_log_notice, SL_LOG_NOTICE, 0)
DEFINE_LOG(sl_log_info, SL_LOG_INFO, 0)
DEFINE_LOG(sl_log_debug, SL_LOG_DEBUG, 0)

void sl_fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(SL_LOG_ERROR, 1, fmt, ap);
	va_end(ap);
	exit(1);
}

void sl_fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(SL_LOG_ERROR, 0, fmt, ap);
	va_end(ap);
	exit(1);
}
