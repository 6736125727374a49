/* systemd's protocols, spoken by hand (sdnotify.h). */
#include "sdnotify.h"
#include "sluice/segsock.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define LISTEN_FDS_START 3

/* Send `state` with fd (when >= 0) to $NOTIFY_SOCKET: a path, or '@' for the
 * abstract namespace.  0 or -errno. */
static int send_state(const char *state, int fd)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = (void *)state, .iov_len = strlen(state)};
	struct msghdr mh = {.msg_name = &sun, .msg_iov = &iov, .msg_iovlen = 1};
	size_t n;
	int s, rc = 0;

	if (!path || (path[0] != '/' && path[0] != '@') || (n = strlen(path)) >= sizeof(sun.sun_path))
		return -ENOENT;
	memcpy(sun.sun_path, path, n);
	if (sun.sun_path[0] == '@')
		sun.sun_path[0] = '\0';
	mh.msg_namelen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	if (fd >= 0)
		sl_segsock_put_fd(&mh, cbuf, sizeof(cbuf), fd);
	if ((s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (sendmsg(s, &mh, MSG_NOSIGNAL) < 0)
		rc = -errno;
	close(s);
	return rc;
}

void sl_sd_notify(const char *state)
{
	send_state(state, -1);
}

int sl_sd_store_fd(const char *name, int fd)
{
	char state[128];

	/* The store keeps one per name only if asked to: the old one goes first. */
	snprintf(state, sizeof(state), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	send_state(state, -1);
	snprintf(state, sizeof(state), "FDSTORE=1\nFDNAME=%s", name);
	return send_state(state, fd);
}

int sl_sd_take_fd(const char *name)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS"), *names = getenv("LISTEN_FDNAMES");
	long n = fds ? strtol(fds, NULL, 10) : 0;
	int found = -1;

	if (!pid || strtol(pid, NULL, 10) != (long)getpid() || n <= 0 || n > 64)
		return -1;
	for (long i = 0; i < n; i++) {
		int fd = LISTEN_FDS_START + (int)i;
		size_t len = strlen(name);
		const char *at = names;

		/* Its name: the i-th of the colon-separated list. */
		for (long k = 0; at && k < i; k++)
			at = (at = strchr(at, ':')) ? at + 1 : NULL;
		if (found < 0 && at && strncmp(at, name, len) == 0 && (at[len] == ':' || at[len] == '\0'))
			found = fd;
		else
			close(fd);
	}
	if (found >= 0)
		fcntl(found, F_SETFD, FD_CLOEXEC);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return found;
}
