#include "sluice/ctl.h"
#include "sluice/common.h"
#include "sluice/segsock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

int sl_ctl_request(const char *path, const char *cmd, char **reply, int timeout_ms)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	size_t len = 0, cap = 4096;
	char *buf = NULL;
	int fd, rc = 0;

	*reply = NULL;
	if (sl_strlcpy(sun.sun_path, path, sizeof(sun.sun_path)) < 0)
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		rc = -errno;
		goto out;
	}
	/* Another user's socket where the daemon's should be is not asked anything:
	 * its answers would be its own (segsock.h, sl_segsock_trusted). */
	{
		struct ucred cred;
		socklen_t clen = sizeof(cred);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
		    !sl_segsock_trusted(path, (uint32_t)cred.uid, NULL, 0)) {
			rc = -EPERM;
			goto out;
		}
	}
	if (write(fd, cmd, strlen(cmd)) < 0 || write(fd, "\n", 1) < 0) {
		rc = -errno;
		goto out;
	}
	shutdown(fd, SHUT_WR);
	if (!(buf = malloc(cap))) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (len + 1 >= cap) {
			char *nb;

			if (cap >= SL_CTL_MAX_REPLY) {
				rc = -EMSGSIZE;
				goto out;
			}
			if (!(nb = realloc(buf, cap * 2))) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*reply = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

int sl_ctl_info_value(const char *reply, const char *key, char *out, size_t size)
{
	size_t klen = strlen(key);

	for (const char *line = reply; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
			const char *v = line + klen + 1;
			size_t n = strcspn(v, "\n");

			if (n >= size)
				return -ENAMETOOLONG;
			memcpy(out, v, n);
			out[n] = '\0';
			return 0;
		}
	}
	return -ENOENT;
}
