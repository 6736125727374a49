/*
 * relay.c - a program's socket that `sluice run --seccomp` cannot follow by its
 * calls, connected to a relay of the supervisor's instead (docs/design.md, "The
 * supervisor's relay").
 *
 * Two kinds of socket go through it, both caught at their trapped connect:
 *   - a datagram socket connected to a peer a datagram section holds.  Its later
 *     writes (send, write, sendmmsg on a connected socket) name no destination,
 *     so no filter can single them out - and glibc's resolver makes its calls
 *     from inside libc, where no preload reaches.  Through the relay each
 *     datagram is held by its sections (calls.c, as a trapped sendto is) and
 *     sent on from a socket of the relay's own, connected to the peer;
 *   - a socket connected to a name server's port 53 while some section matches
 *     by name: a static or Go program resolves names itself, and the relay reads
 *     each answer, so every A and AAAA address learned is matched as the name
 *     asked about at the program's later connects (UDP or TCP, as the socket is).
 * Answers come back through the relay to the program's socket.  The program sees
 * the relay's address as its peer (getpeername); the peer sees the relay's
 * socket, one a program's socket, as the datagrams' source.
 */
#include "internal.h"

#include "sluice/dnsmsg.h"

#define DNS_PORT 53
#define TCP_BUF 65538 /* one DNS message over TCP: length and body */

/* The relay's list of TCP relays: doubly linked through each entry's prev and
 * next, the newest at the head. */
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

/* A program's socket sent to the relay: its own address, the peer it asked for,
 * and for a datagram socket the relay's socket connected to that peer. */
struct route {
	struct sl_relay *px;
	struct sockaddr_storage client, server;
	socklen_t slen;     /* 0: unused */
	int type;           /* SOCK_DGRAM or SOCK_STREAM */
	int side;           /* the relay's socket it was sent to: 0 IPv4, 1 IPv6 */
	int held;           /* its datagrams are held by their sections */
	int learn;          /* a name server's: its answers are read for names */
	int up;             /* the relay's socket to server, made at the first
	                     * datagram; -1 before */
	ev_io up_io;
};
#define ROUTES 256 /* sockets remembered, the oldest forgotten first */

/* A TCP connection relayed: the program's (cfd) to the server's (ufd). */
struct dns_tcp {
	struct dns_tcp *prev, *next;
	struct sl_relay *px;
	int cfd, ufd, connected;
	ev_io cio, uio;
	size_t have;          /* bytes of the server's stream not yet parsed */
	uint8_t buf[TCP_BUF]; /* ... the start of its current message */
};

struct sl_relay {
	struct sl_supervisor *s;
	/* [0] IPv4 on 127.0.0.1, [1] IPv6 on ::1; -1 until first needed */
	int udp[2], tcp[2];
	struct sockaddr_storage udp_at[2], tcp_at[2];
	socklen_t udp_len[2], tcp_len[2];
	ev_io udp_io[2], tcp_io[2];
	struct route routes[ROUTES];
	unsigned next_route;
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

/* The route of a program's socket (known by its own address and type), or NULL. */
static struct route *route_of(struct sl_relay *px, const struct sockaddr_storage *client, int type)
{
	for (unsigned i = 0; i < ROUTES; i++)
		if (px->routes[i].slen && px->routes[i].type == type && same_addr(&px->routes[i].client, client))
			return &px->routes[i];
	return NULL;
}

static void route_forget(struct route *r)
{
	if (r->up >= 0) {
		ev_io_stop(r->px->s->loop, &r->up_io);
		close(r->up);
	}
	r->up = -1;
	r->slen = 0;
}

/* An answer read: its addresses learned as the name it answers. */
static void learn(struct sl_relay *px, const uint8_t *msg, size_t len)
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

/* The peer's datagrams: read for names at a name server's, and passed back to
 * the program's socket from the relay's address it is connected to. */
static void on_answer(struct ev_loop *loop, ev_io *w, int revents)
{
	struct route *r = w->data;
	struct sl_relay *px = r->px;
	uint8_t msg[65536];

	(void)loop;
	(void)revents;
	/* Bounded: a socket's receive buffer holds a few hundred at most. */
	for (int i = 0; i < 256; i++) {
		ssize_t n = recv(r->up, msg, sizeof(msg), MSG_DONTWAIT);

		if (n < 0)
			return; /* EAGAIN; or an ICMP error, which the program would not see either */
		if (r->learn)
			learn(px, msg, (size_t)n);
		sendto(px->udp[r->side], msg, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&r->client,
		       r->client.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	}
}

/* The relay's socket to route r's peer, made at its first datagram; -1 when none
 * can be made (the datagram is lost, as on a full network). */
static int upstream(struct route *r)
{
	if (r->up >= 0)
		return r->up;
	r->up = socket(r->server.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->up < 0)
		return -1;
	if (connect(r->up, (const struct sockaddr *)&r->server, r->slen) != 0) {
		close(r->up);
		return r->up = -1;
	}
	ev_io_init(&r->up_io, on_answer, r->up, EV_READ);
	r->up_io.data = r;
	ev_io_start(r->px->s->loop, &r->up_io);
	return r->up;
}

/* Datagrams from programs' sockets: each held by its sections where its route's
 * are, and sent on to its peer. */
static void on_udp_query(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sl_relay *px = w->data;
	int side = w == &px->udp_io[1];
	uint8_t msg[65536];

	(void)loop;
	(void)revents;
	/* Bounded, so the timers of held calls get their turn between rounds. */
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage client;
		socklen_t clen = sizeof(client);
		ssize_t n = recvfrom(px->udp[side], msg, sizeof(msg), MSG_DONTWAIT, (struct sockaddr *)&client, &clen);
		struct route *r;
		int up;

		if (n < 0)
			return;
		if (!(r = route_of(px, &client, SOCK_DGRAM)) || (up = upstream(r)) < 0)
			continue; /* a socket forgotten (ROUTES newer ones since): lost */
		if (!r->held || sup_hold_datagram(px->s, up, &r->server, r->slen, msg, (size_t)n) > 0)
			send(up, msg, (size_t)n, MSG_DONTWAIT);
	}
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
	struct sl_relay *px = w->data;
	int side = w == &px->tcp_io[1];
	struct sockaddr_storage client;
	socklen_t clen = sizeof(client);
	const struct route *r;
	struct dns_tcp *t;
	int cfd = accept4(px->tcp[side], (struct sockaddr *)&client, &clen, SOCK_NONBLOCK | SOCK_CLOEXEC);

	(void)revents;
	if (cfd < 0)
		return;
	if (!(r = route_of(px, &client, SOCK_STREAM)) || !(t = calloc(1, sizeof(*t)))) {
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

/* The relay's socket of `type` for side (0: IPv4, 1: IPv6), made at first use;
 * its fd or -1 (no IPv6 here, say). */
static int proxy_socket(struct sl_relay *px, int type, int side)
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

int sup_relay_redirect(struct sl_supervisor *s, uint64_t id, int sock, const struct sockaddr_storage *sa,
                       socklen_t alen, int held)
{
	struct sockaddr_storage to, client;
	socklen_t tolen, clen = sizeof(client);
	struct sl_relay *px = s->relay;
	struct route *r;
	struct sl_dest d;
	int type = -1, side, err = 0, learn;
	socklen_t tl = sizeof(type);

	if (sl_dest_from_sockaddr(&d, (const struct sockaddr *)sa, alen) < 0 ||
	    getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || (type != SOCK_DGRAM && type != SOCK_STREAM))
		return 0;
	held = held && type == SOCK_DGRAM; /* a stream's bytes are not datagrams */
	learn = s->shm->hdr->has_names && d.port == DNS_PORT;
	if (!held && !learn)
		return 0;
	if (!px) {
		if (!(px = s->relay = calloc(1, sizeof(*px))))
			return 0;
		px->s = s;
		px->udp[0] = px->udp[1] = px->tcp[0] = px->tcp[1] = -1;
		for (unsigned i = 0; i < ROUTES; i++) {
			px->routes[i].px = px;
			px->routes[i].up = -1;
		}
	}
	/* The relay's address in the socket's own family: an IPv4 peer asked for on
	 * an IPv6 socket (a mapped address) goes to the IPv4 relay, mapped too. */
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
	/* A mapped client address is the IPv4 one the relay will see. */
	if (client.ss_family == AF_INET6 && !side) {
		struct sockaddr_in6 m = *(struct sockaddr_in6 *)&client;
		struct sockaddr_in *v4 = (void *)&client;

		memset(&client, 0, sizeof(client));
		v4->sin_family = AF_INET;
		v4->sin_port = m.sin6_port;
		memcpy(&v4->sin_addr, &m.sin6_addr.s6_addr[12], 4);
	}
	/* A socket connected again (or a new one at a port a closed one had) takes
	 * its old route's place: its datagrams go where it now asks. */
	if (!(r = route_of(px, &client, type)))
		r = &px->routes[px->next_route++ % ROUTES];
	route_forget(r);
	r->client = client;
	r->server = *sa;
	r->slen = alen;
	r->type = type;
	r->side = side;
	r->held = held;
	r->learn = learn;
	sup_say(s, "relay: a %s socket goes through the relay%s", type == SOCK_DGRAM ? "UDP" : "TCP",
	    held ? ", each datagram held by its sections" : " (a lookup, read for names)");
	sup_answer_as(s, id, err, 0, 0);
	return 1;
}

void sup_relay_stop(struct sl_supervisor *s)
{
	struct sl_relay *px = s->relay;

	if (!px)
		return;
	for (unsigned i = 0; i < ROUTES; i++)
		route_forget(&px->routes[i]);
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
	s->relay = NULL;
}
