/*
 * metrics.c - Prometheus text exposition over HTTP on `metrics = HOST:PORT` (off
 * by default; meant for a loopback address), served on the daemon's libev loop.
 *
 * Each connection: its request is read (up to 4 KiB, 2 s at most), the whole
 * exposition rendered once from the segment's counters (sl_stats_render_prometheus:
 * no lock, so a scrape never touches admission), written as the socket takes it,
 * and the connection closed.  At most METRICS_CLIENTS at once; more are closed at
 * accept.  Any path is answered the same (Prometheus asks /metrics).
 */
#include "metrics.h"

#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/log.h"
#include "sluice/stats.h"
#include "sluice/units.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define METRICS_CLIENTS 16
#define METRICS_TIMEOUT_S 2.0
#define METRICS_TOP_KEYS 10 /* per keyed section: bounded cardinality */

struct mclient {
	ev_io io;
	ev_timer timeout;
	struct sl_metrics *m;
	int used;
	size_t got;
	char req[4096];
	char *out;
	size_t out_len, out_done;
};

struct sl_metrics {
	struct sl_daemon *d;
	int fd;
	ev_io accept_io;
	struct mclient c[METRICS_CLIENTS];
};

static void mclient_close(struct ev_loop *loop, struct mclient *c)
{
	ev_io_stop(loop, &c->io);
	ev_timer_stop(loop, &c->timeout);
	close(c->io.fd);
	free(c->out);
	c->out = NULL;
	c->used = 0;
}

static void on_mtimeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	mclient_close(loop, w->data);
}

static void on_mwritable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mclient *c = w->data;
	ssize_t n;

	(void)revents;
	n = send(w->fd, c->out + c->out_done, c->out_len - c->out_done, MSG_NOSIGNAL);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0 || (c->out_done += (size_t)n) == c->out_len)
		mclient_close(loop, c);
}

/* The request is in: render and answer. */
static void answer(struct ev_loop *loop, struct mclient *c)
{
	char *body = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&body, &blen);
	int hlen;

	if (!f) {
		mclient_close(loop, c);
		return;
	}
	sl_stats_render_prometheus(c->m->d->shm.hdr, METRICS_TOP_KEYS, sl_clock_mono_ns(), f);
	fclose(f);
	hlen = snprintf(NULL, 0, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	                         "Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
	c->out = malloc((size_t)hlen + blen + 1);
	if (!c->out) {
		free(body);
		mclient_close(loop, c);
		return;
	}
	snprintf(c->out, (size_t)hlen + 1, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	                                   "Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
	memcpy(c->out + hlen, body, blen);
	free(body);
	c->out_len = (size_t)hlen + blen;
	c->out_done = 0;
	ev_io_stop(loop, &c->io);
	ev_io_init(&c->io, on_mwritable, c->io.fd, EV_WRITE);
	c->io.data = c;
	ev_io_start(loop, &c->io);
}

static void on_mreadable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mclient *c = w->data;
	ssize_t n;

	(void)revents;
	n = recv(w->fd, c->req + c->got, sizeof(c->req) - 1 - c->got, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		mclient_close(loop, c);
		return;
	}
	c->got += (size_t)n;
	c->req[c->got] = '\0';
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		answer(loop, c);
	else if (c->got == sizeof(c->req) - 1)
		mclient_close(loop, c); /* not a request we serve */
}

static void on_maccept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sl_metrics *m = w->data;
	int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct mclient *c = NULL;

	(void)revents;
	if (fd < 0)
		return;
	for (int i = 0; i < METRICS_CLIENTS && !c; i++)
		if (!m->c[i].used)
			c = &m->c[i];
	if (!c) {
		close(fd); /* busy: the scraper tries again at its next interval */
		return;
	}
	memset(c, 0, sizeof(*c));
	c->used = 1;
	c->m = m;
	ev_io_init(&c->io, on_mreadable, fd, EV_READ);
	c->io.data = c;
	ev_io_start(loop, &c->io);
	ev_timer_init(&c->timeout, on_mtimeout, METRICS_TIMEOUT_S, 0.);
	c->timeout.data = c;
	ev_timer_start(loop, &c->timeout);
}

int sl_metrics_start(struct sl_daemon *d)
{
	const char *spec = d->cfg->global.metrics;
	char host[SL_PATH_MAX], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV}, *ai;
	struct sl_metrics *m;
	int p, fd, one = 1, rc;

	if (!spec[0] || d->opts.private_socket)
		return 0; /* off, or `sluice run`'s own daemon */
	if (sl_endpoint_parse(spec, host, sizeof(host), &p) < 0 || p == 0) {
		sl_log_warnx("metrics %s: wants HOST:PORT (an address, e.g. 127.0.0.1:9464)", spec);
		return -EINVAL;
	}
	snprintf(port, sizeof(port), "%d", p);
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0) {
		sl_log_warnx("metrics %s: %s (an address is wanted, not a name)", spec, gai_strerror(rc));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
		rc = -errno;
		sl_log_warn("metrics %s: cannot listen", spec);
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return rc;
	}
	freeaddrinfo(ai);
	if (!(m = calloc(1, sizeof(*m)))) {
		close(fd);
		return -ENOMEM;
	}
	m->d = d;
	m->fd = fd;
	ev_io_init(&m->accept_io, on_maccept, fd, EV_READ);
	m->accept_io.data = m;
	ev_io_start(d->loop, &m->accept_io);
	d->metrics = m;
	sl_log_info("metrics: Prometheus text on http://%s/metrics", spec);
	return 0;
}

int sl_metrics_reload(struct sl_daemon *d, const char *was)
{
	char *now = d->cfg->global.metrics;
	struct sl_metrics *old = d->metrics, *fresh;
	int rc;

	if (strcmp(was, now) == 0)
		return 0;
	/* The new listener first, so that one that cannot be had leaves the old
	 * serving; if the old holds the port it wants (the same port on another
	 * address), the old goes first and comes back should the new fail. */
	d->metrics = NULL;
	if ((rc = sl_metrics_start(d)) == -EADDRINUSE && old) {
		d->metrics = old;
		sl_metrics_stop(d);
		old = NULL;
		rc = sl_metrics_start(d);
	}
	if (rc < 0) {
		/* The config says where metrics are served: where they still are. */
		char want[sizeof(d->cfg->global.metrics)];

		snprintf(want, sizeof(want), "%s", now);
		snprintf(now, sizeof(d->cfg->global.metrics), "%s", was);
		if (!old)
			sl_metrics_start(d);
		else
			d->metrics = old;
		sl_log_warnx("metrics %s: cannot listen: still served at %s", want, was[0] ? was : "none");
		return rc;
	}
	fresh = d->metrics;
	d->metrics = old;
	sl_metrics_stop(d);
	d->metrics = fresh;
	if (!fresh)
		sl_log_info("metrics: no longer served (metrics = none)");
	return 0;
}

void sl_metrics_stop(struct sl_daemon *d)
{
	struct sl_metrics *m = d->metrics;

	if (!m)
		return;
	for (int i = 0; i < METRICS_CLIENTS; i++)
		if (m->c[i].used)
			mclient_close(d->loop, &m->c[i]);
	ev_io_stop(d->loop, &m->accept_io);
	close(m->fd);
	free(m);
	d->metrics = NULL;
}
