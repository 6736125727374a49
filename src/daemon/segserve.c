/*
 * The segment's socket, server side (segserve.h).  Each client sends one line and
 * gets one reply, sent in one message, and the connection is closed; a client that
 * sends nothing within CLIENT_TIMEOUT_S is dropped.  Nothing here blocks: the
 * loop also watches every attached process's pidfd.
 */
#include "segserve.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/log.h"
#include "sluice/proc.h"
#include "sluice/roster.h"
#include "sluice/segsock.h"
#include "sluice/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5: the peer's pidfd, whatever its pid namespace */
#endif

#define CLIENT_TIMEOUT_S 2.0
#define GROUPS_MAX 256

/* A watched process: its pidfd polls readable when it exits. */
struct watch {
	ev_io io;
	struct sl_segserve *s;
	int32_t token;
};

struct client {
	ev_io io;
	ev_timer timeout;
	struct sl_segserve *s;
	struct client *next, **prev;
	size_t len;
	char buf[256];
};

struct sl_segserve {
	struct ev_loop *loop;
	struct sl_shm shm;
	struct sl_segpolicy policy;
	int listen_fd;
	ev_io accept_w;
	struct client *clients;
	struct watch **watch; /* by roster index; NULL: not watched */
	uint32_t nwatch;
	void (*on_quit)(void *);
	void *arg;
	int said_unwatched; /* a process no pidfd could watch was said once */
	char path[108];     /* its socket, for messages (the header's name is
	                     * anyone's to scribble) */
};

/* src cut to len - 1 bytes, as one word of printable text: what is read from the
 * segment goes into replies and logs. */
static void printable(char *dst, const char *src, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len && src[i]; i++)
		dst[i] = (unsigned char)src[i] <= ' ' || (unsigned char)src[i] >= 0x7f ? '?' : src[i];
	dst[i] = '\0';
}

/* A live registration of the process that asks again (same pid, start stamp and
 * pid namespace as it says, same pid as the kernel says): a process that asked
 * and could not use what it got (a segment scribbled past reading), a program
 * that execs - entered once, not once per ask. */
struct same_arg {
	const struct sl_proc_id *id;
	int32_t kpid;
	int32_t token;
};

static int find_same(int32_t token, struct sl_proc *e, void *arg)
{
	struct same_arg *a = arg;

	if (e->pid != a->id->pid || e->stamp != a->id->stamp || e->pidns != a->id->pidns || e->kpid != a->kpid)
		return 0;
	a->token = token;
	return 1;
}

static uint32_t index_of(int32_t token)
{
	return ((uint32_t)token & SL_TOKEN_INDEX_MASK) - 1;
}

static void unwatch(struct sl_segserve *s, uint32_t i)
{
	struct watch *w = i < s->nwatch ? s->watch[i] : NULL;

	if (!w)
		return;
	ev_io_stop(s->loop, &w->io);
	close(w->io.fd);
	free(w);
	s->watch[i] = NULL;
}

static void on_exit_of(struct ev_loop *loop, ev_io *io, int revents)
{
	struct watch *w = (struct watch *)io;
	struct sl_segserve *s = w->s;

	(void)loop;
	(void)revents;
	/* The process exited (zombie or reaped): its entry ends, and with it its
	 * lock word and places, which the daemon and waiters then take back. */
	sl_roster_leave(s->shm.hdr, w->token);
	unwatch(s, index_of(w->token));
}

/* Watch token's process through pidfd (taken over); 0, or -errno (pidfd closed). */
static int watch(struct sl_segserve *s, int32_t token, int pidfd)
{
	uint32_t i = index_of(token);
	struct watch *w;

	if (i >= s->nwatch) {
		uint32_t n;

		sl_roster(s->shm.hdr, &n);
		if (i >= n || !(s->watch = realloc(s->watch, (size_t)n * sizeof(*s->watch)))) {
			close(pidfd);
			return -ENOMEM;
		}
		memset(s->watch + s->nwatch, 0, (size_t)(n - s->nwatch) * sizeof(*s->watch));
		s->nwatch = n;
	}
	unwatch(s, i); /* a watcher of an entry that ended and was given again */
	if (!(w = calloc(1, sizeof(*w)))) {
		close(pidfd);
		return -ENOMEM;
	}
	w->s = s;
	w->token = token;
	ev_io_init(&w->io, on_exit_of, pidfd, EV_READ);
	ev_io_start(s->loop, &w->io);
	s->watch[i] = w;
	return 0;
}

/* A pidfd for pid (as this process sees it), or -1. */
static int pidfd_of(pid_t pid)
{
	return pid > 0 ? (int)sl_sys(SYS_pidfd_open, pid, 0) : -1;
}

/* The start stamp of pid as this process sees it (0: unknown). */
static uint32_t stamp_of(pid_t pid)
{
	return pid > 0 ? sl_proc_stamp(pid) : 0;
}

/* What a client may do: 2 read and write, 1 read, 0 nothing (segsock.h). */
static int grant(const struct sl_segserve *s, int fd, char *who, size_t len)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	gid_t groups[GROUPS_MAX];
	socklen_t glen = sizeof(groups);
	unsigned bits;
	int member;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0)
		return 0;
	snprintf(who, len, "uid %u (gid %u)", (unsigned)cred.uid, (unsigned)cred.gid);
	if (cred.uid == 0)
		return 2;
	member = cred.gid == s->policy.gid;
	if (!member && getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
		for (size_t k = 0; k < glen / sizeof(gid_t) && !member; k++)
			member = groups[k] == s->policy.gid;
	bits = cred.uid == geteuid() ? s->policy.mode >> 6 : member ? s->policy.mode >> 3 : s->policy.mode;
	return (bits & 6) == 6 ? 2 : (bits & 4) ? 1 : 0;
}

static int privileged(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
	       (cred.uid == 0 || cred.uid == geteuid());
}

/* One reply message, with fd when >= 0. */
static void reply(int sock, int fd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply(int sock, int fd, const char *fmt, ...)
{
	char line[SL_SEGSOCK_LINE], cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = line};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = SL_MIN(n, (int)sizeof(line) - 2);
	line[n++] = '\n';
	iov.iov_len = (size_t)n;
	if (fd >= 0)
		sl_segsock_put_fd(&mh, cbuf, sizeof(cbuf), fd);
	/* A fresh connection's buffer takes a reply of this size at once. */
	sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The memfd again, opened read-only: a reader given it cannot write the segment. */
static int read_only_fd(int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_CLOEXEC);
}

static void do_attach(struct sl_segserve *s, int sock, const char *args)
{
	char rw[4], who[64];
	int pid = 0, g, pidfd = -1, ro;
	unsigned stamp = 0;
	unsigned long long pidns = 0;
	struct ucred cred;
	socklen_t clen = sizeof(cred), plen = sizeof(pidfd);
	struct sl_proc_id id;
	uint32_t nonce = 0;
	int32_t token;

	if (sscanf(args, "%3s %d %u %llu", rw, &pid, &stamp, &pidns) != 4 ||
	    (strcmp(rw, "rw") != 0 && strcmp(rw, "ro") != 0)) {
		reply(sock, -1, "error: usage: attach rw|ro PID STAMP PIDNS");
		return;
	}
	g = grant(s, sock, who, sizeof(who));
	ro = strcmp(rw, "ro") == 0;
	if (g == 0 || (!ro && g < 2)) {
		struct group *gr = getgrgid(s->policy.gid);

		reply(sock, -1, "error: %s may %s this segment (owner uid %u, group %s, mode %04o)", who,
		      g ? "only read" : "not use", (unsigned)geteuid(), gr ? gr->gr_name : "?", s->policy.mode);
		return;
	}
	if (ro) {
		int fd = read_only_fd(s->shm.fd);

		if (fd < 0) {
			reply(sock, -1, "error: cannot open the segment read-only: %s", strerror(errno));
			return;
		}
		reply(sock, fd, "ok mode=ro id=%016llx", (unsigned long long)s->shm.hdr->segment_id);
		close(fd);
		return;
	}
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0)
		cred.pid = 0;
	/* The peer's own pidfd where the kernel gives one (no race with its pid
	 * being reused); else one opened by the pid this namespace sees. */
	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &plen) != 0)
		pidfd = pidfd_of(cred.pid);
	id = (struct sl_proc_id){.pid = pid, .stamp = stamp, .pidns = pidns};
	{
		struct same_arg same = {.id = &id, .kpid = cred.pid};

		if (pid > 0 && (stamp || pidns))
			sl_roster_each(s->shm.hdr, find_same, &same);
		if (same.token > 0 && (nonce = sl_roster_nonce(s->shm.hdr, same.token))) {
			if (pidfd >= 0)
				close(pidfd);
			reply(sock, s->shm.fd, "ok mode=rw token=%d nonce=%u id=%016llx", (int)same.token, nonce,
			      (unsigned long long)s->shm.hdr->segment_id);
			return;
		}
	}
	token = sl_roster_enter(s->shm.hdr, &id, cred.pid, stamp_of(cred.pid), &nonce);
	if (token < 0) {
		uint32_t n;

		sl_roster(s->shm.hdr, &n);
		if (pidfd >= 0)
			close(pidfd);
		reply(sock, -1, "error: the segment's roster is full (%u processes attached: raise processes = N "
		      "and restart sluiced)", n);
		sl_log_warnx("segment at %s: a process could not attach: its roster of %u is full", s->path, n);
		return;
	}
	if (pidfd < 0 || watch(s, token, pidfd) < 0) {
		if (!s->said_unwatched++)
			sl_log_warnx("segment at %s: %s (pid %d in its namespace) cannot be watched (no pidfd: Linux "
			             "5.3, or 6.5 for a process this namespace cannot see); its places are kept when it "
			             "dies, unless a process of its own pid namespace finds it gone",
			             s->path, who, pid);
	}
	reply(sock, s->shm.fd, "ok mode=rw token=%d nonce=%u id=%016llx", (int)token, nonce,
	      (unsigned long long)s->shm.hdr->segment_id);
}

static void do_info(struct sl_segserve *s, int sock)
{
	struct sl_shm_header *h = s->shm.hdr;
	int64_t age = h->heartbeat_ns ? (sl_clock_mono_ns() - h->heartbeat_ns) / 1000000 : -1;
	char config[SL_PATH_MAX], raw[SL_PATH_MAX], name[sizeof(h->shm_name)];

	memcpy(raw, h->config_path, sizeof(raw));
	raw[sizeof(raw) - 1] = '\0';
	printable(config, raw, sizeof(config));
	memcpy(raw, h->shm_name, sizeof(name));
	raw[sizeof(name) - 1] = '\0';
	printable(name, raw, sizeof(name));
	reply(sock, -1, "ok pid=%d pidns=%llu id=%016llx name=%.39s attached=%u generation=%llu daemon_pid=%d "
	      "heartbeat_ms=%lld moved=%u mode=%04o gid=%u uid=%u config=%s", (int)getpid(),
	      (unsigned long long)sl_roster_me().pidns, (unsigned long long)h->segment_id,
	      name, sl_roster_each(h, NULL, NULL), (unsigned long long)h->generation, (int)h->daemon_pid,
	      (long long)age, h->moved, s->policy.mode, (unsigned)s->policy.gid, (unsigned)geteuid(), config);
}

static void handle(struct sl_segserve *s, int sock, char *line, int passed_fd)
{
	line[strcspn(line, "\r\n")] = '\0';
	if (strncmp(line, "attach ", 7) == 0) {
		do_attach(s, sock, line + 7);
	} else if (strcmp(line, "info") == 0) {
		do_info(s, sock);
	} else if (!privileged(sock)) {
		reply(sock, -1, "error: only root or the keeper's user may ask '%.20s'", line);
	} else if (strcmp(line, "adopt") == 0) {
		unsigned unseen = sl_segserve_adopt(s);

		reply(sock, -1, "ok unwatched=%u", unseen);
	} else if (strcmp(line, "get") == 0) {
		reply(sock, s->shm.fd, "ok id=%016llx", (unsigned long long)s->shm.hdr->segment_id);
	} else if (strcmp(line, "replace") == 0) {
		int rc = passed_fd < 0 ? -EBADF : sl_segserve_replace(s, passed_fd);

		if (rc == 0)
			passed_fd = -1; /* the server's now */
		if (rc == 0)
			reply(sock, -1, "ok id=%016llx", (unsigned long long)s->shm.hdr->segment_id);
		else
			reply(sock, -1, "error: not a segment: %s", strerror(-rc));
	} else if (strncmp(line, "policy ", 7) == 0) {
		unsigned mode, gid;

		if (sscanf(line + 7, "%o %u", &mode, &gid) == 2 && mode <= 0777) {
			sl_segserve_policy(s, &(struct sl_segpolicy){.mode = mode, .gid = (gid_t)gid});
			reply(sock, -1, "ok");
		} else {
			reply(sock, -1, "error: usage: policy MODE GID");
		}
	} else if (strcmp(line, "quit") == 0 && s->on_quit) {
		reply(sock, -1, "ok");
		s->on_quit(s->arg);
	} else {
		reply(sock, -1, "error: unknown request '%.40s' (attach, info, get, adopt, replace, policy, quit)", line);
	}
	if (passed_fd >= 0)
		close(passed_fd);
}

static void client_close(struct client *c)
{
	ev_io_stop(c->s->loop, &c->io);
	ev_timer_stop(c->s->loop, &c->timeout);
	close(c->io.fd);
	*c->prev = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	client_close(w->data);
}

static void on_client(struct ev_loop *loop, ev_io *io, int revents)
{
	struct client *c = (struct client *)io;
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = {.iov_base = c->buf + c->len, .iov_len = sizeof(c->buf) - 1 - c->len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	int passed = -1;
	ssize_t n;

	(void)loop;
	(void)revents;
	n = recvmsg(io->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	for (struct cmsghdr *m = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; m; m = CMSG_NXTHDR(&mh, m))
		if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_RIGHTS)
			for (size_t k = 0; k + sizeof(int) <= m->cmsg_len - CMSG_LEN(0); k += sizeof(int)) {
				int fd;

				memcpy(&fd, CMSG_DATA(m) + k, sizeof(int));
				if (passed < 0)
					passed = fd;
				else
					close(fd);
			}
	if (n > 0)
		c->len += (size_t)n;
	c->buf[c->len] = '\0';
	if (n > 0 && !strchr(c->buf, '\n') && c->len < sizeof(c->buf) - 1) {
		if (passed >= 0)
			close(passed); /* a descriptor comes with the line's first bytes only */
		return;
	}
	if (c->len > 0)
		handle(c->s, io->fd, c->buf, passed);
	else if (passed >= 0)
		close(passed);
	client_close(c);
}

static void on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
	struct sl_segserve *s = io->data;
	struct client *c;
	int fd;

	(void)revents;
	/* Every pending connection: a burst of starting programs is served in one go. */
	while ((fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		if (!(c = calloc(1, sizeof(*c)))) {
			close(fd);
			continue;
		}
		c->s = s;
		c->next = s->clients;
		c->prev = &s->clients;
		if (c->next)
			c->next->prev = &c->next;
		s->clients = c;
		ev_io_init(&c->io, on_client, fd, EV_READ);
		ev_io_start(loop, &c->io);
		ev_timer_init(&c->timeout, on_timeout, CLIENT_TIMEOUT_S, 0.);
		c->timeout.data = c;
		ev_timer_start(loop, &c->timeout);
	}
}

struct sl_segserve *sl_segserve_start(struct ev_loop *loop, int shm_fd, int listen_fd,
                                      const struct sl_segpolicy *policy, void (*on_quit)(void *), void *arg)
{
	struct sl_segserve *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return NULL;
	if ((rc = sl_shm_map_fd(&s->shm, shm_fd, 1, 1)) < 0) {
		free(s);
		errno = -rc;
		return NULL;
	}
	s->loop = loop;
	s->policy = *policy;
	s->listen_fd = listen_fd;
	{
		struct sockaddr_un sun;
		socklen_t len = sizeof(sun);

		if (getsockname(listen_fd, (struct sockaddr *)&sun, &len) == 0 && sun.sun_family == AF_UNIX)
			snprintf(s->path, sizeof(s->path), "%.*s", (int)sizeof(sun.sun_path), sun.sun_path);
	}
	s->on_quit = on_quit;
	s->arg = arg;
	ev_io_init(&s->accept_w, on_accept, listen_fd, EV_READ);
	s->accept_w.data = s;
	ev_io_start(loop, &s->accept_w);
	sl_segserve_adopt(s);
	return s;
}

void sl_segserve_policy(struct sl_segserve *s, const struct sl_segpolicy *policy)
{
	s->policy = *policy;
}

int sl_segserve_replace(struct sl_segserve *s, int shm_fd)
{
	struct sl_shm next;
	int rc = sl_shm_map_fd(&next, shm_fd, 1, 1);

	if (rc < 0)
		return rc;
	sl_shm_detach(&s->shm);
	s->shm = next;
	sl_segserve_adopt(s); /* who entered the new one directly (the daemon) */
	return 0;
}

static int adopt_one(int32_t token, struct sl_proc *e, void *arg)
{
	struct sl_segserve *s = arg;
	uint32_t i = index_of(token);
	int pidfd;

	if (i < s->nwatch && s->watch[i] && s->watch[i]->token == token)
		return 0; /* watched already */
	if (e->kpid <= 0)
		return 0; /* entered where this server cannot see it: kept, never ended by us */
	pidfd = pidfd_of(e->kpid);
	/* Gone, or its pid is another process's now (another start stamp): ended.
	 * The stamp is read after the pidfd is open, so it is the watched one's. */
	if (pidfd < 0 || (e->kstamp && stamp_of(e->kpid) != e->kstamp)) {
		if (pidfd >= 0)
			close(pidfd);
		sl_roster_leave(s->shm.hdr, token);
		return 0;
	}
	watch(s, token, pidfd);
	return 0;
}

static int count_unseen(int32_t token, struct sl_proc *e, void *arg)
{
	(void)token;
	if (e->kpid <= 0)
		(*(unsigned *)arg)++;
	return 0;
}

unsigned sl_segserve_adopt(struct sl_segserve *s)
{
	unsigned unseen = 0;

	sl_roster_each(s->shm.hdr, adopt_one, s);
	sl_roster_each(s->shm.hdr, count_unseen, &unseen);
	return unseen;
}

void sl_segserve_stop(struct sl_segserve *s)
{
	if (!s)
		return;
	while (s->clients)
		client_close(s->clients);
	for (uint32_t i = 0; i < s->nwatch; i++)
		unwatch(s, i);
	free(s->watch);
	ev_io_stop(s->loop, &s->accept_w);
	close(s->listen_fd);
	sl_shm_detach(&s->shm);
	free(s);
}

int sl_segserve_listen(const char *path, const struct sl_segpolicy *policy)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct sl_segsock_reply r;
	unsigned m = policy->mode, sockmode;
	mode_t old;
	int fd, rc;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	memcpy(sun.sun_path, path, strlen(path));
	rc = sl_segsock_ask(path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r);
	if (r.fd >= 0)
		close(r.fd);
	if (rc == 0 && r.server_uid != 0 && r.server_uid != (uint32_t)geteuid()) {
		/* Another user's where this one's belongs: put aside, loudly. */
		sl_log_warnx("segment socket %s is served by uid %u, neither root nor this user: removed, and "
		             "this one served in its place", path, (unsigned)r.server_uid);
		rc = -ECONNREFUSED;
	} else if (rc == 0 || rc == -ETIMEDOUT)
		return -EADDRINUSE; /* someone answers (or is too busy to): not ours to take */
	if (rc == -ECONNREFUSED)
		unlink(path); /* a dead server's, or a stranger's */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	old = umask(0177); /* nobody connects before the mode below is set */
	rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	/* Connecting takes write permission on the socket file: each class that may
	 * read or write the segment may connect, the server checks the rest. */
	sockmode = 0600 | (m & 066 ? (m & 060 ? 060 : 0) | (m & 06 ? 06 : 0) : 0);
	if (rc != 0 || chmod(path, sockmode) != 0 ||
	    (policy->gid != getegid() && chown(path, (uid_t)-1, policy->gid) != 0) || listen(fd, SOMAXCONN) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}
