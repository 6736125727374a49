/*
 * places.c - concurrency places taken by trapped connects, given back once
 * sock_diag no longer shows the connection open in the program.
 */
#include "internal.h"

/* Whether the connection p holds places for is still open in the program: 1 yes,
 * 0 no (its every fd closed - an orphan shows inode 0 -, closed, or unknown to the
 * kernel), -1 cannot tell now (asked again next round). */
static int place_open(struct sl_supervisor *s, const struct place *p)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {0};
	union {
		struct nlmsghdr nlh;
		char buf[8192];
	} resp;
	struct nlmsghdr *h = &resp.nlh;
	ssize_t n;

	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.r.sdiag_family = (uint8_t)p->local.ss_family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (p->local.ss_family == AF_INET) {
		const struct sockaddr_in *l = (const void *)&p->local, *r = (const void *)&p->peer;

		req.r.id.idiag_sport = l->sin_port;
		req.r.id.idiag_dport = r->sin_port;
		memcpy(req.r.id.idiag_src, &l->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &r->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *l = (const void *)&p->local, *r = (const void *)&p->peer;

		req.r.id.idiag_sport = l->sin6_port;
		req.r.id.idiag_dport = r->sin6_port;
		memcpy(req.r.id.idiag_src, &l->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &r->sin6_addr, 16);
	}
	if (send(s->diag, &req, sizeof(req), 0) != (ssize_t)sizeof(req) ||
	    (n = recv(s->diag, &resp, sizeof(resp), 0)) < (ssize_t)sizeof(struct nlmsghdr) || !NLMSG_OK(h, (size_t)n))
		return -1;
	if (h->nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(h);

		return e->error == -ENOENT ? 0 : -1;
	}
	if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
		const struct inet_diag_msg *m = NLMSG_DATA(h);

		return m->idiag_inode != 0 && m->idiag_inode == p->ino && m->idiag_state != TCP_CLOSE;
	}
	return -1;
}

/* Each round: give back the places of connections the program has closed.  A
 * give-back the segment cannot take now (marked moved, a section scribbled on,
 * no lock) is tried again next round: never a place lost, never a sleep in the
 * loop. */
void sup_on_track(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sl_supervisor *s = w->data;

	(void)revents;
	for (struct place **pp = &s->places; *pp;) {
		struct place *p = *pp;
		int rc = place_open(s, p) == 0 ? sl_wait_conc_put(s->shm->hdr, p->taken, &p->m, s->shm->self) : 1;

		if (rc == -EXDEV)
			sup_follow(s); /* moved for real: the successor holds the places */
		if (rc == 0) {
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
	if (!s->places)
		ev_timer_stop(loop, w);
}

/* A connect made with places taken: its places now follow its connection. */
void sup_track(struct call *c)
{
	struct sl_supervisor *s = c->s;
	struct place *p = calloc(1, sizeof(*p));
	socklen_t len = sizeof(p->local);
	struct stat st;

	if (!p || s->diag < 0 || getsockname(c->sock, (struct sockaddr *)&p->local, &len) != 0 ||
	    fstat(c->sock, &st) != 0) {
		/* Cannot follow it: the places stay held until this run ends - never
		 * given back early. */
		if (p) {
			p->taken = c->pr.p.taken;
			p->m = c->m;
			p->m.src.name = NULL; /* giving places back never needs the key's name */
			p->m.src.name_len = 0;
			p->ino = 0;
			p->local.ss_family = AF_UNSPEC;
			p->next = s->places;
			s->places = p;
			c->pr.p.taken = 0;
		}
		return;
	}
	p->ino = st.st_ino;
	memcpy(&p->peer, &c->sa, sizeof(p->peer));
	p->taken = c->pr.p.taken;
	p->m = c->m;
	p->m.src.name = NULL; /* giving places back never needs the key's name (c's) */
	p->m.src.name_len = 0;
	p->next = s->places;
	s->places = p;
	c->pr.p.taken = 0;
	if (!ev_is_active(&s->track_timer))
		ev_timer_again(s->loop, &s->track_timer);
}
