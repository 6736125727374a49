/*
 * dns.c - a static program's own name lookups, learned (docs/design.md, "Names
 * of static programs").
 *
 * A static or Go program resolves names itself: it connects a socket to a name
 * server's port 53 and writes its query there - a write no filter can single out.
 * The connect is trapped, though.  When some section matches by name, the
 * supervisor connects that socket to a small proxy of its own instead (UDP or
 * TCP, as the socket is), which forwards each query to the server the program
 * asked for and each answer back, reading both: every A and AAAA address of an
 * answer is learned as the name asked about, and the program's later connects to
 * those addresses match as that name.  The program sees the proxy's address as
 * its peer (getpeername); everything else about its lookups is the server's.
 */
#include "internal.h"

#include "sluice/dnsmsg.h"

#define DNS_PORT 53
#define FWD_TIMEOUT_S 10.0 /* a query the server never answers is forgotten */
#define TCP_BUF 65538      /* one DNS message over TCP: length and body */

/* The proxy's lists of what is under way (forwards, TCP relays): doubly linked
 * through each entry's prev and next, the newest at the head. */
#define LIST_PUSH(head, e)                \
	do {                              \
		(e)->prev = NULL;         \
		(e)->next = (head);       \
		if (head)                 \
			(head)->prev = (e); \
		(head) = (e);             \
	} while (0)
#define LIST_UNLINK(head, e)                    \
	do {                                    \
		if ((e)->prev)                  \
			(e)->prev->next = (e)->next; \
		else                            \
			(head) = (e)->next;     \
		if ((e)->next)                  \
			(e)->next->prev = (e)->prev; \
	} while (0)

/* A query forwarded over UDP, waiting for its answer. */
struct dns_fwd {
	struct dns_fwd *prev, *next;
	struct dns_proxy *px;
	int fd, side;
	struct sockaddr_storage client;
	socklen_t clen;
	ev_io io;
	ev_timer timer;
};

/* A TCP connection relayed: the program's (cfd) to the server's (ufd). */
struct dns_tcp {
	struct dns_tcp *prev, *next;
	struct dns_proxy *px;
	int cfd, ufd, connected;
	ev_io cio, uio;
	size_t have;          /* bytes of the server's stream not yet parsed */
	uint8_t buf[TCP_BUF]; /* ... the start of its current message */
};

struct dns_proxy {
	struct sl_supervisor *s;
	/* [0] IPv4 on 127.0.0.1, [1] IPv6 on ::1; -1 until first needed */
	int udp[2], tcp[2];
	struct sockaddr_storage udp_at[2], tcp_at[2];
	socklen_t udp_len[2], tcp_len[2];
	ev_io udp_io[2], tcp_io[2];
	struct dns_route routes[DNS_ROUTES];
	unsigned next_route;
	struct dns_fwd *fwds;
	struct dns_tcp *tcps;
};

static int same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

	return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

/* The server a program's socket (known by its own address) was sent to proxy. */
static const struct dns_route *route_of(const struct dns_proxy *px, const struct sockaddr_storage *client)
{
	for (unsigned i = 0; i < DNS_ROUTES; i++)
		if (px->routes[i].slen && same_addr(&px->routes[i].client, client))
			return &px->routes[i];
	return NULL;
}

/* An answer read: its addresses learned as the name it answers. */
static void learn(struct dns_proxy *px, const uint8_t *msg, size_t len)
{
	struct sl_supervisor *s = px->s;
	struct sl_dns_addr a[16];
	char name[SL_HOST_MAX];
	int n = sl_dns_answer_addrs(msg, len, name, sizeof(name), a, 16);

	for (int i = 0; i < n; i++) {
		struct resolved *r = &s->learned[s->next_learned++ % LEARNED_MAX];

		r->family = a[i].family;
		memcpy(r->addr, a[i].addr, sizeof(r->addr));
		snprintf(r->name, sizeof(r->name), "%s", name);
	}
	if (n > 0)
		sup_say(s, "dns: %s is %d address%s (the program's own lookup)", name, n, n == 1 ? "" : "es");
}

static void fwd_free(struct dns_fwd *f)
{
	ev_io_stop(f->px->s->loop, &f->io);
	ev_timer_stop(f->px->s->loop, &f->timer);
	close(f->fd);
	LIST_UNLINK(f->px->fwds, f);
	free(f);
}

static void on_fwd_answer(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dns_fwd *f = w->data;
	uint8_t msg[65536];
	ssize_t n = recv(f->fd, msg, sizeof(msg), MSG_DONTWAIT);

	(void)loop;
	(void)revents;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		learn(f->px, msg, (size_t)n);
		sendto(f->px->udp[f->side], msg, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&f->client, f->clen);
	}
	fwd_free(f);
}

static void on_fwd_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_free(w->data);
}

/* A query from a program's socket: sent on to its server from a socket of its own. */
static void on_udp_query(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dns_proxy *px = w->data;
	int side = w == &px->udp_io[1];
	struct sockaddr_storage client;
	socklen_t clen = sizeof(client);
	const struct dns_route *r;
	struct dns_fwd *f;
	uint8_t msg[65536];
	ssize_t n = recvfrom(px->udp[side], msg, sizeof(msg), MSG_DONTWAIT, (struct sockaddr *)&client, &clen);

	(void)revents;
	if (n <= 0 || !(r = route_of(px, &client)) || !(f = calloc(1, sizeof(*f))))
		return;
	f->px = px;
	f->side = side;
	f->client = client;
	f->clen = clen;
	f->fd = socket(r->server.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (f->fd < 0 || connect(f->fd, (const struct sockaddr *)&r->server, r->slen) != 0 ||
	    send(f->fd, msg, (size_t)n, MSG_DONTWAIT) != n) {
		if (f->fd >= 0)
			close(f->fd);
		free(f);
		return;
	}
	ev_io_init(&f->io, on_fwd_answer, f->fd, EV_READ);
	f->io.data = f;
	ev_io_start(loop, &f->io);
	ev_timer_init(&f->timer, on_fwd_timeout, FWD_TIMEOUT_S, 0);
	f->timer.data = f;
	ev_timer_start(loop, &f->timer);
	LIST_PUSH(px->fwds, f);
}

static void tcp_free(struct dns_tcp *t)
{
	struct ev_loop *loop = t->px->s->loop;

	ev_io_stop(loop, &t->cio);
	ev_io_stop(loop, &t->uio);
	close(t->cfd);
	close(t->ufd);
	LIST_UNLINK(t->px->tcps, t);
	free(t);
}

/* Bytes from one side to the other, whole or not at all: DNS messages are small
 * beside a loopback socket's buffer, and a side that cannot take one is given up. */
static int relay(int from, int to, uint8_t *buf, size_t size, ssize_t *got)
{
	*got = recv(from, buf, size, MSG_DONTWAIT);
	if (*got < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (*got <= 0 || send(to, buf, (size_t)*got, MSG_DONTWAIT | MSG_NOSIGNAL) != *got)
		return -1;
	return 0;
}

/* The server's bytes: passed on, and each whole message in them read. */
static void on_tcp_server(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dns_tcp *t = w->data;
	uint8_t chunk[16384];
	ssize_t n;

	(void)loop;
	(void)revents;
	if (!t->connected) { /* the connect to the server finished, one way or another */
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(t->ufd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err) {
			tcp_free(t);
			return;
		}
		t->connected = 1;
		ev_io_stop(t->px->s->loop, &t->uio);
		ev_io_set(&t->uio, t->ufd, EV_READ);
		ev_io_start(t->px->s->loop, &t->uio);
		ev_io_start(t->px->s->loop, &t->cio);
		return;
	}
	if (relay(t->ufd, t->cfd, chunk, sizeof(chunk), &n) < 0) {
		tcp_free(t);
		return;
	}
	for (ssize_t i = 0; i < n;) {
		size_t take = SL_MIN((size_t)(n - i), sizeof(t->buf) - t->have), need;

		memcpy(t->buf + t->have, chunk + i, take);
		t->have += take;
		i += (ssize_t)take;
		while (t->have >= 2 && t->have >= (need = 2 + ((size_t)t->buf[0] << 8 | t->buf[1]))) {
			learn(t->px, t->buf + 2, need - 2);
			memmove(t->buf, t->buf + need, t->have - need);
			t->have -= need;
		}
	}
}

static void on_tcp_client(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dns_tcp *t = w->data;
	uint8_t chunk[16384];
	ssize_t n;

	(void)loop;
	(void)revents;
	if (relay(t->cfd, t->ufd, chunk, sizeof(chunk), &n) < 0)
		tcp_free(t);
}

/* A program's socket connected to the proxy: on to its server. */
static void on_tcp_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dns_proxy *px = w->data;
	int side = w == &px->tcp_io[1];
	struct sockaddr_storage client;
	socklen_t clen = sizeof(client);
	const struct dns_route *r;
	struct dns_tcp *t;
	int cfd = accept4(px->tcp[side], (struct sockaddr *)&client, &clen, SOCK_NONBLOCK | SOCK_CLOEXEC);

	(void)revents;
	if (cfd < 0)
		return;
	if (!(r = route_of(px, &client)) || !(t = calloc(1, sizeof(*t)))) {
		close(cfd);
		return;
	}
	t->px = px;
	t->cfd = cfd;
	t->ufd = socket(r->server.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (t->ufd < 0 || (connect(t->ufd, (const struct sockaddr *)&r->server, r->slen) != 0 && errno != EINPROGRESS)) {
		if (t->ufd >= 0)
			close(t->ufd);
		close(cfd);
		free(t);
		return;
	}
	ev_io_init(&t->cio, on_tcp_client, cfd, EV_READ);
	t->cio.data = t;
	ev_io_init(&t->uio, on_tcp_server, t->ufd, EV_WRITE); /* until connected */
	t->uio.data = t;
	ev_io_start(loop, &t->uio);
	LIST_PUSH(px->tcps, t);
}

/* The proxy's socket of `type` for side (0: IPv4, 1: IPv6), made at first use;
 * its fd or -1 (no IPv6 here, say). */
static int proxy_socket(struct dns_proxy *px, int type, int side)
{
	int *fd = type == SOCK_DGRAM ? &px->udp[side] : &px->tcp[side];
	struct sockaddr_storage *at = type == SOCK_DGRAM ? &px->udp_at[side] : &px->tcp_at[side];
	socklen_t *len = type == SOCK_DGRAM ? &px->udp_len[side] : &px->tcp_len[side];
	ev_io *io = type == SOCK_DGRAM ? &px->udp_io[side] : &px->tcp_io[side];

	if (*fd >= 0)
		return *fd;
	memset(at, 0, sizeof(*at));
	if (side == 0) {
		struct sockaddr_in *a = (void *)at;

		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (void *)at;

		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		*len = sizeof(*a);
	}
	*fd = socket(at->ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (*fd < 0 || bind(*fd, (struct sockaddr *)at, *len) != 0 ||
	    (type == SOCK_STREAM && listen(*fd, 64) != 0) || getsockname(*fd, (struct sockaddr *)at, len) != 0) {
		if (*fd >= 0)
			close(*fd);
		return *fd = -1;
	}
	ev_io_init(io, type == SOCK_DGRAM ? on_udp_query : on_tcp_accept, *fd, EV_READ);
	io->data = px;
	ev_io_start(px->s->loop, io);
	return *fd;
}

int sup_dns_port(const struct sockaddr_storage *sa)
{
	if (sa->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port) == DNS_PORT;
	return sa->ss_family == AF_INET6 && ntohs(((const struct sockaddr_in6 *)sa)->sin6_port) == DNS_PORT;
}

int sup_dns_redirect(struct sl_supervisor *s, uint64_t id, int sock, const struct sockaddr_storage *sa,
                     socklen_t alen)
{
	struct sockaddr_storage to, client;
	socklen_t tolen, clen = sizeof(client);
	struct dns_proxy *px = s->dns;
	struct dns_route *r;
	struct sl_dest d;
	int type = -1, side, err = 0;
	socklen_t tl = sizeof(type);

	if (!s->shm->hdr->has_names || sl_dest_from_sockaddr(&d, (const struct sockaddr *)sa, alen) < 0 ||
	    d.port != DNS_PORT || getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
	    (type != SOCK_DGRAM && type != SOCK_STREAM))
		return 0;
	if (!px) {
		if (!(px = s->dns = calloc(1, sizeof(*px))))
			return 0;
		px->s = s;
		px->udp[0] = px->udp[1] = px->tcp[0] = px->tcp[1] = -1;
	}
	/* The proxy's address in the socket's own family: an IPv4 server asked for on
	 * an IPv6 socket (a mapped address) goes to the IPv4 proxy, mapped too. */
	side = sa->ss_family == AF_INET6 && d.family == AF_INET6;
	if (proxy_socket(px, type, side) < 0)
		return 0;
	to = type == SOCK_DGRAM ? px->udp_at[side] : px->tcp_at[side];
	tolen = type == SOCK_DGRAM ? px->udp_len[side] : px->tcp_len[side];
	if (sa->ss_family == AF_INET6 && !side) {
		struct sockaddr_in v4 = *(struct sockaddr_in *)&to;
		struct sockaddr_in6 *m = (void *)&to;

		memset(&to, 0, sizeof(to));
		m->sin6_family = AF_INET6;
		m->sin6_port = v4.sin_port;
		m->sin6_addr.s6_addr[10] = m->sin6_addr.s6_addr[11] = 0xFF;
		memcpy(&m->sin6_addr.s6_addr[12], &v4.sin_addr, 4);
		tolen = sizeof(*m);
	}
	/* A stream socket of the program's that is non-blocking gets what its own
	 * connect would have: EINPROGRESS, the handshake finishing by itself. */
	if (connect(sock, (struct sockaddr *)&to, tolen) != 0)
		err = errno;
	if ((err && err != EINPROGRESS) || getsockname(sock, (struct sockaddr *)&client, &clen) != 0) {
		sup_answer(s, id, err ? err : ECONNREFUSED);
		return 1;
	}
	/* A mapped client address is the IPv4 one the proxy will see. */
	if (client.ss_family == AF_INET6 && !side) {
		struct sockaddr_in6 m = *(struct sockaddr_in6 *)&client;
		struct sockaddr_in *v4 = (void *)&client;

		memset(&client, 0, sizeof(client));
		v4->sin_family = AF_INET;
		v4->sin_port = m.sin6_port;
		memcpy(&v4->sin_addr, &m.sin6_addr.s6_addr[12], 4);
	}
	r = &px->routes[px->next_route++ % DNS_ROUTES];
	r->client = client;
	r->server = *sa;
	r->slen = alen;
	sup_say(s, "dns: a lookup's %s socket goes through the proxy", type == SOCK_DGRAM ? "UDP" : "TCP");
	sup_answer_as(s, id, err, 0, 0);
	return 1;
}

void sup_dns_stop(struct sl_supervisor *s)
{
	struct dns_proxy *px = s->dns;

	if (!px)
		return;
	while (px->fwds)
		fwd_free(px->fwds);
	while (px->tcps)
		tcp_free(px->tcps);
	for (int i = 0; i < 2; i++) {
		if (px->udp[i] >= 0) {
			ev_io_stop(s->loop, &px->udp_io[i]);
			close(px->udp[i]);
		}
		if (px->tcp[i] >= 0) {
			ev_io_stop(s->loop, &px->tcp_io[i]);
			close(px->tcp[i]);
		}
	}
	free(px);
	s->dns = NULL;
}
