/*
 * The daemon's control socket (protocol in ctl.h).  Each client sends one short
 * command and gets one reply, written from the event loop as the socket takes it
 * (the stats of 10,000 sections are megabytes), and the connection is closed.  A
 * client that stops reading is dropped after CLIENT_TIMEOUT_S without progress, so
 * it costs the daemon a buffer for a while and never blocks its loop - nor shaping,
 * which does not go through the daemon at all.
 */
#include "control.h"
#include "fleet.h"
#include "quotas.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/ctl.h"
#include "sluice/daemon.h"
#include "sluice/log.h"
#include "sluice/stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* A control connection: one request line, one answer, closed.  It is dropped when
 * neither its line nor its reader has made progress for CLIENT_TIMEOUT_S, so a
 * client that connects and never sends, or never reads, holds nothing for long. */
#define CLIENT_TIMEOUT_S 2.0

struct sl_ctl_client {
	ev_io io;
	ev_timer timeout;
	struct sl_daemon *d;
	struct sl_ctl_client *next, **prev; /* in d->clients */
	size_t len;
	char buf[256];
	char *out;          /* the reply (malloc'd), sent from out_done on */
	size_t out_len, out_done;
};

static void client_close(struct ev_loop *loop, struct sl_ctl_client *c)
{
	ev_io_stop(loop, &c->io);
	ev_timer_stop(loop, &c->timeout);
	close(c->io.fd);
	*c->prev = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->out);
	free(c);
}

static void on_client_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sl_ctl_client *c = w->data;

	(void)revents;
	client_close(loop, c);
}


/* The socket takes more of the reply: send what it will; close when all is sent or
 * the reader is gone. */
static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sl_ctl_client *c = (struct sl_ctl_client *)w;
	size_t before = c->out_done;

	(void)revents;
	while (c->out_done < c->out_len) {
		ssize_t n = send(w->fd, c->out + c->out_done, c->out_len - c->out_done, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (c->out_done > before)
				ev_timer_again(loop, &c->timeout); /* progress: the idle clock starts over */
			return;
		}
		if (n <= 0)
			break;
		c->out_done += (size_t)n;
	}
	client_close(loop, c);
}

static int may_change(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return 0;
	return cred.uid == 0 || cred.uid == geteuid();
}

/* The reply to `cmd`, into *out (malloc'd; NULL when there is none). */
static void handle(struct sl_daemon *d, int fd, char *cmd, char **out, size_t *outlen)
{
	FILE *f;

	*out = NULL;
	*outlen = 0;
	if (!d->shm.hdr)
		return; /* stopping: nothing to answer from */
	if (!(f = open_memstream(out, outlen)))
		return;
	cmd[strcspn(cmd, "\r\n")] = '\0';
	if (strcmp(cmd, "ping") == 0) {
		fprintf(f, "pong %d %llu\n", (int)getpid(), (unsigned long long)d->shm.hdr->generation);
	} else if (strcmp(cmd, "info") == 0) {
		fprintf(f, "pid=%d\nshm_name=%s\nconfig=%s\ngeneration=%llu\nsegment=%s\nsegment_id=%016llx\n",
		        (int)getpid(), d->shm_name, d->config_path, (unsigned long long)d->shm.hdr->generation,
		        d->seg_path, (unsigned long long)d->shm.hdr->segment_id);
	} else if (strncmp(cmd, "stat", 4) == 0 && (cmd[4] == '\0' || cmd[4] == ' ')) {
		/* stat [json] [top N] */
		const char *rest = cmd + 4;
		int json = 0;
		unsigned top = SL_STATS_TOP_DEFAULT;

		if (strncmp(rest, " json", 5) == 0) {
			json = 1;
			rest += 5;
		}
		if (strncmp(rest, " top ", 5) == 0) {
			char *end;
			unsigned long n = strtoul(rest + 5, &end, 10);

			if (end != rest + 5 && n <= SL_STATS_TOP_MAX)
				top = (unsigned)n;
			rest = end;
		}
		if (*rest)
			fprintf(f, "error: usage: stat [json] [top N]\n");
		else {
			struct sl_redis_where where;

			sl_fleet_where(d, &where);
			sl_stats_render_where(d->shm.hdr, json, top, sl_clock_mono_ns(), &where, f);
		}
	} else if (strcmp(cmd, "reload") == 0) {
		if (!may_change(fd)) {
			fprintf(f, "error: only root or the daemon's user may reload\n");
		} else {
			char *errs = NULL;
			size_t errlen = 0;
			FILE *ef = open_memstream(&errs, &errlen);

			if (ef && d->ctl_reload(d, ef) == 0) {
				/* What the reload could not apply follows, one line each. */
				fclose(ef);
				ef = NULL;
				fprintf(f, "ok generation %llu\n%s", (unsigned long long)d->shm.hdr->generation, errs ? errs : "");
			} else if (ef) {
				fclose(ef);
				ef = NULL;
				fprintf(f, "error: reload refused, previous configuration kept\n%s", errs ? errs : "");
			}
			if (ef)
				fclose(ef);
			free(errs);
		}
	} else if (strncmp(cmd, "quota reset ", 12) == 0) {
		if (!may_change(fd))
			fprintf(f, "error: only root or the daemon's user may reset a quota\n");
		else
			sl_quotas_reset(d, cmd + 12, f);
	} else {
		fprintf(f, "error: unknown command '%.60s' (ping, info, stat, stat json, reload, quota reset)\n", cmd);
	}
	fclose(f);
}

static void on_client(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sl_ctl_client *c = (struct sl_ctl_client *)w;
	ssize_t n;

	(void)revents;
	n = recv(w->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		c->len += (size_t)n;
	c->buf[c->len] = '\0';
	if (n > 0 && !strchr(c->buf, '\n') && c->len < sizeof(c->buf) - 1)
		return; /* wait for the rest of the line */
	if (c->len > 0)
		handle(c->d, w->fd, c->buf, &c->out, &c->out_len);
	if (!c->out || !c->out_len) {
		client_close(loop, c);
		return;
	}
	ev_io_stop(loop, &c->io);
	ev_io_set(&c->io, c->io.fd, EV_WRITE);
	ev_set_cb(&c->io, on_writable);
	ev_io_start(loop, &c->io);
	ev_timer_again(loop, &c->timeout);
	on_writable(loop, &c->io, EV_WRITE); /* most replies fit the socket at once */
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sl_daemon *d = w->data;
	struct sl_ctl_client *c;
	int fd;

	(void)revents;
	fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->d = d;
	c->next = d->clients;
	c->prev = &d->clients;
	if (c->next)
		c->next->prev = &c->next;
	d->clients = c;
	ev_io_init(&c->io, on_client, fd, EV_READ);
	ev_io_start(loop, &c->io);
	/* Repeating, so ev_timer_again restarts it: an idle timeout. */
	ev_timer_init(&c->timeout, on_client_timeout, CLIENT_TIMEOUT_S, CLIENT_TIMEOUT_S);
	c->timeout.data = c;
	ev_timer_start(loop, &c->timeout);
}

/* The control socket's directory, made when it is missing (as the service's
 * RuntimeDirectory and tmpfiles make /run/sluice): a daemon started by hand with
 * the default /run/sluice/sluice.sock.  One level only; mode 0755, so that
 * programs reach the segment's socket beside it (their own checks are the
 * sockets' modes and the keeper's). */
static void make_dir_of(const char *path)
{
	char dir[108];
	const char *slash = strrchr(path, '/');

	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir))
		return;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	if (mkdir(dir, 0755) == 0)
		sl_log_info("made %s for the control socket", dir);
}

int sl_control_open(struct sl_daemon *d, int (*reload)(struct sl_daemon *d, FILE *errors))
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	const char *path = d->cfg->global.control_socket;
	char *reply = NULL;
	mode_t old;
	int fd;

	d->ctl_reload = reload;
	if (sl_strlcpy(sun.sun_path, path, sizeof(sun.sun_path)) < 0) {
		sl_log_warnx("control socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	/* Refuse to start when another daemon answers; a dead one's socket is stale,
	 * and another user's where ours belongs is put aside, loudly. */
	switch (sl_ctl_request(path, "ping", &reply, 1000)) {
	case 0:
		sl_log_warnx("another sluiced answers on %s (%s)", path, reply ? strtok(reply, "\n") : "");
		free(reply);
		return -EADDRINUSE;
	case -EPERM:
		sl_log_warnx("%s is answered by another user's process, not root's or this daemon's user's: "
		             "removed, and this daemon's control socket made in its place", path);
		break;
	}
	unlink(path);
	make_dir_of(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	old = umask(0177); /* no window in which others could connect before chmod */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		int e = errno;

		umask(old);
		close(fd);
		errno = e;
		sl_log_warn("cannot bind control socket %s", path);
		return -e;
	}
	umask(old);
	/* Stats are for everyone the segment is shared with; changes are checked per call. */
	chmod(path, (d->cfg->global.shm_mode & 0770) | 0600);
	if (listen(fd, 16) != 0) {
		close(fd);
		return -errno;
	}
	d->ctl_fd = fd;
	sl_strlcpy(d->ctl_path, path, sizeof(d->ctl_path));
	ev_io_init(&d->ctl_watcher, on_accept, fd, EV_READ);
	d->ctl_watcher.data = d;
	ev_io_start(d->loop, &d->ctl_watcher);
	return 0;
}

void sl_control_close(struct sl_daemon *d)
{
	while (d->clients)
		client_close(d->loop, d->clients);
	if (d->ctl_fd < 0)
		return;
	ev_io_stop(d->loop, &d->ctl_watcher);
	close(d->ctl_fd);
	unlink(d->ctl_path);
	d->ctl_fd = -1;
}
