/* A segment asked for over its socket: the client side (segsock.h). */
#include "sluice/segsock.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/roster.h"
#include "sluice/sys.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

int sl_segsock_path(const struct sl_global *g, char *out, size_t len)
{
	const char *ctl = g->control_socket, *slash = strrchr(ctl, '/');
	const char *name = strrchr(g->shm_name, '/');
	size_t dir = slash ? (size_t)(slash - ctl) : 0;
	int n;

	if (!ctl[0] || strcmp(ctl, "none") == 0)
		return -ENOENT;
	name = name ? name + 1 : g->shm_name;
	n = snprintf(out, len, "%.*s%s%s.segment", (int)dir, ctl, slash ? "/" : "", *name ? name : "sluice");
	return n < 0 || (size_t)n >= len || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path)
	       ? -ENAMETOOLONG
	       : 0;
}

/* Wait until fd is ready for `events` or `deadline` passes: 0, or -ETIMEDOUT. */
static int wait_for(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - sl_clock_mono_ns();
		struct pollfd p = {.fd = fd, .events = events};
		struct timespec ts = {.tv_sec = left / SL_NS_PER_S, .tv_nsec = left % SL_NS_PER_S};
		long rc;

		if (left <= 0)
			return -ETIMEDOUT;
		rc = sl_sys(SYS_ppoll, &p, 1, &ts, NULL, 0); /* poll(2) is not on arm64 */
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

void sl_segsock_put_fd(struct msghdr *mh, void *cbuf, size_t len, int fd)
{
	struct cmsghdr *c;

	memset(cbuf, 0, len);
	mh->msg_control = cbuf;
	mh->msg_controllen = len;
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
}

static int talk(int fd, const char *request, int send_fd, int64_t deadline, struct sl_segsock_reply *r)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = (void *)(uintptr_t)request, .iov_len = strlen(request)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	size_t got = 0;
	int rc;

	if (send_fd >= 0)
		sl_segsock_put_fd(&mh, cbuf, sizeof(cbuf), send_fd);
	/* A request is short: one send of it, into a fresh socket's empty buffer. */
	if (sl_sys(SYS_sendmsg, fd, &mh, MSG_NOSIGNAL) != (long)iov.iov_len)
		return -EPROTO;
	while (got < sizeof(r->line) - 1) {
		long n;

		if ((rc = wait_for(fd, POLLIN, deadline)) < 0)
			return rc;
		memset(cbuf, 0, sizeof(cbuf));
		iov = (struct iovec){.iov_base = r->line + got, .iov_len = sizeof(r->line) - 1 - got};
		mh = (struct msghdr){.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
		                     .msg_controllen = sizeof(cbuf)};
		n = sl_sys(SYS_recvmsg, fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			break;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			/* The first descriptor is the reply's; any other is closed. */
			for (size_t k = 0; k + sizeof(int) <= c->cmsg_len - CMSG_LEN(0); k += sizeof(int)) {
				int in;

				memcpy(&in, CMSG_DATA(c) + k, sizeof(int));
				if (r->fd < 0)
					r->fd = in;
				else
					sl_sys_close(in);
			}
		}
		got += (size_t)n;
		r->line[got] = '\0';
		if (memchr(r->line, '\n', got))
			break;
	}
	r->line[got] = '\0';
	r->line[strcspn(r->line, "\n")] = '\0';
	return got ? 0 : -EPROTO;
}

int sl_segsock_ask(const char *path, const char *request, int send_fd, int64_t timeout_ns,
                   struct sl_segsock_reply *r)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int64_t deadline = sl_clock_mono_ns() + timeout_ns;
	int saved = errno, fd, rc;

	r->line[0] = '\0';
	r->fd = -1;
	r->server_uid = (uint32_t)-1;
	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	memcpy(sun.sun_path, path, strlen(path));
	fd = (int)sl_sys(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	rc = (int)sl_sys(SYS_connect, fd, &sun, sizeof(sun));
	if (rc < 0 && errno == EAGAIN) /* the server's backlog is full: it is busy */
		rc = -ETIMEDOUT;
	else if (rc < 0 && errno == EINPROGRESS)
		rc = wait_for(fd, POLLOUT, deadline);
	else if (rc < 0)
		rc = -errno;
	if (rc == 0) {
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (sl_sys(SYS_getsockopt, fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
			r->server_uid = cred.uid;
		rc = talk(fd, request, send_fd, deadline, r);
	}
	sl_sys_close(fd);
	if (rc < 0 && r->fd >= 0) {
		sl_sys_close(r->fd);
		r->fd = -1;
	}
	errno = saved;
	return rc;
}

int sl_segsock_value(const char *line, const char *key, char *out, size_t len)
{
	size_t k = strlen(key);

	for (const char *p = line; (p = strstr(p, key)); p += k)
		if ((p == line || p[-1] == ' ') && p[k] == '=') {
			size_t n = strcspn(p + k + 1, " ");

			if (n >= len)
				n = len - 1;
			memcpy(out, p + k + 1, n);
			out[n] = '\0';
			return 0;
		}
	return -ENOENT;
}

int sl_segsock_trusted(const char *path, uint32_t server_uid, char *why, size_t whylen)
{
	const char *slash = strrchr(path, '/');
	char dir[108];
	struct stat st;
	int saved = errno, ok;

	if (server_uid == 0 || server_uid == (uint32_t)geteuid())
		return 1;
	snprintf(dir, sizeof(dir), "%.*s", slash && slash != path ? (int)(slash - path) : 1, slash ? path : ".");
	ok = stat(dir, &st) == 0 && st.st_uid == server_uid && !(st.st_mode & (S_IWGRP | S_IWOTH));
	errno = saved;
	if (!ok && why && whylen)
		snprintf(why, whylen, "it is served by uid %u, neither root, this user, nor the owner of %s "
		         "alone (another user's socket in a directory others can write): not used",
		         (unsigned)server_uid, dir);
	return ok;
}

int sl_segsock_attach(const char *path, int writable, int64_t timeout_ns, struct sl_shm *shm, char *why,
                      size_t whylen)
{
	struct sl_proc_id me = sl_roster_me();
	struct sl_segsock_reply r;
	char req[128], v[32];
	int rc, rw;

	shm->hdr = NULL;
	if (why && whylen)
		why[0] = '\0';
	snprintf(req, sizeof(req), "attach %s %d %u %llu\n", writable ? "rw" : "ro", (int)me.pid, me.stamp,
	         (unsigned long long)me.pidns);
	if ((rc = sl_segsock_ask(path, req, -1, timeout_ns, &r)) < 0)
		return rc;
	if (!sl_segsock_trusted(path, r.server_uid, why, whylen)) {
		if (r.fd >= 0)
			sl_sys_close(r.fd);
		return -EACCES;
	}
	if (strncmp(r.line, "ok", 2) != 0 || r.fd < 0) {
		/* Refused with a reason, or not this protocol at all (a reply of no
		 * kind, an "ok" with nothing in it). */
		rc = strncmp(r.line, "error: ", 7) == 0 ? -EACCES : -EPROTO;
		if (why && whylen && rc == -EACCES) {
			snprintf(why, whylen, "%s", r.line + 7);
			for (char *p = why; *p; p++) /* the server's words, said to people */
				if ((unsigned char)*p < 0x20 || *p == 0x7f)
					*p = '?';
		}
		if (r.fd >= 0)
			sl_sys_close(r.fd);
		return rc;
	}
	rw = sl_segsock_value(r.line, "mode", v, sizeof(v)) == 0 && strcmp(v, "rw") == 0;
	if (writable && !rw) {
		if (why && whylen)
			snprintf(why, whylen, "this user may read the segment but not use its queues");
		sl_sys_close(r.fd);
		return -EACCES;
	}
	rc = sl_shm_map_fd(shm, r.fd, writable, 0);
	sl_sys_close(r.fd);
	if (rc == 0 && writable && sl_segsock_value(r.line, "token", v, sizeof(v)) == 0)
		shm->self = (int32_t)strtol(v, NULL, 10);
	return rc;
}
