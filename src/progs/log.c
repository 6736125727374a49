#include "sluice/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

static const char *log_ident = "sluice";
static int log_foreground = 1;
static int log_level = SL_LOG_INFO;
static int log_journal; /* stderr is the journal's stream: lines carry <N> */

/* systemd hands a service whose stderr is the journal JOURNAL_STREAM=DEV:INODE of
 * that stream (systemd.exec(5)); lines written there may begin with "<N>", N the
 * syslog priority, and the journal files them at it (sd-daemon(3)).  Checked
 * against stderr itself: an environment inherited by a child whose stderr went
 * elsewhere must not put <N> into a terminal or a file. */
static int stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;

	if (!js || sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2 || fstat(2, &st) != 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void sl_log_init(const char *ident, int foreground, int level)
{
	log_ident = ident;
	log_foreground = foreground;
	log_level = level;
	log_journal = foreground && stderr_is_journal();
	if (!foreground)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

int sl_log_syslog_reachable(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return 0;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", _PATH_LOG);
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
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
	if (log_foreground && log_journal)
		fprintf(stderr, "<%d>%s: %s\n", prio[level], log_ident, msg);
	else if (log_foreground)
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
