/* SLUICE_DEBUG output: one write(2) per line, to stderr or to SLUICE_LOG. */
#include "shim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void sl_debug(const char *fmt, ...)
{
	char line[768];
	int n, fd = 2, saved = errno;
	va_list ap;

	if (!sl_shim.debug)
		return;
	n = snprintf(line, sizeof(line), "sluice[%d]: ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* Opened per line so the shim keeps no fd a program could close or inherit. */
	if (sl_shim.log_path[0])
		fd = open(sl_shim.log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		ssize_t w = write(fd, line, (size_t)n);

		(void)w;
		if (fd != 2)
			close(fd);
	}
	errno = saved;
}

void sl_dest_format(const struct sl_dest *d, char *buf, size_t size)
{
	char addr[INET6_ADDRSTRLEN] = "?";

	if (d->family == AF_UNSPEC) { /* named by a proxy request: no address of its own */
		snprintf(buf, size, "%s:%u (through a proxy)", d->name ? d->name : "?", d->port);
		return;
	}
	inet_ntop(d->family, d->addr, addr, sizeof(addr));
	if (d->family == AF_INET6)
		snprintf(buf, size, "[%s]:%u%s%s%s", addr, d->port, d->name ? " (" : "",
		         d->name ? d->name : "", d->name ? ")" : "");
	else
		snprintf(buf, size, "%s:%u%s%s%s", addr, d->port, d->name ? " (" : "",
		         d->name ? d->name : "", d->name ? ")" : "");
}
