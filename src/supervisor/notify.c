/*
 * notify.c - a notification read: the destination out of the traced process's
 * memory, its socket by pidfd_getfd, and the call handed to calls.c.
 */
#include "internal.h"

/* Read n bytes at addr in process pid: 0 when all were read, -EFAULT when the
 * address is not the caller's to read (short, unmapped: the kernel will fail the
 * call itself), or -EPERM when the process may not be read at all (it made itself
 * non-dumpable, and this process lacks CAP_SYS_PTRACE). */
static int peek(int pid, uint64_t addr, void *buf, size_t n)
{
	struct iovec local = {.iov_base = buf, .iov_len = n};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = n};
	ssize_t got;

	if (!addr)
		return -EFAULT;
	got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (got == (ssize_t)n)
		return 0;
	return got < 0 && (errno == EPERM || errno == EACCES) ? -EPERM : -EFAULT;
}

/* The thread group (process) thread tid belongs to, from /proc; or tid. */
static int tgid_of(int tid)
{
	char path[64], line[128];
	FILE *f;
	int tgid = tid;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	if (!(f = fopen(path, "re")))
		return tid;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	fclose(f);
	return tgid;
}

/* A duplicate of thread tid's fd (pidfd_getfd, Linux 5.6), or -1. */
static int take_socket(int tid, int fd)
{
	int pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD), dup;

	if (pidfd < 0) /* before 6.9 a pidfd is a process's: its thread group leader's */
		pidfd = (int)syscall(SYS_pidfd_open, tgid_of(tid), 0);
	if (pidfd < 0)
		return -1;
	dup = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	close(pidfd);
	return dup < 0 ? -1 : dup;
}

/* A datagram's bytes, read from the caller: sendto's buffer, or sendmsg's iovecs
 * (no control data: that is the caller's to send).  0, or -1 when they cannot be
 * had here (the caller then sends it itself). */
#define PAYLOAD_MAX 65536
#define IOV_MAX_READ 64
static int read_payload(struct call *c, const struct seccomp_notif *req, const struct msghdr *mh)
{
	struct iovec iov[IOV_MAX_READ];
	size_t n = 0, total = 0;

	if (c->nr == SYS_sendto) {
		iov[0].iov_base = (void *)(uintptr_t)req->data.args[1];
		iov[0].iov_len = (size_t)req->data.args[2];
		n = 1;
		c->flags = (int)req->data.args[3];
	} else {
		if (mh->msg_controllen || mh->msg_iovlen > IOV_MAX_READ ||
		    peek(c->pid, (uintptr_t)mh->msg_iov, iov, mh->msg_iovlen * sizeof(iov[0])) < 0)
			return -1;
		n = mh->msg_iovlen;
		c->flags = (int)req->data.args[2];
	}
	for (size_t i = 0; i < n; i++)
		if ((total += iov[i].iov_len) > PAYLOAD_MAX)
			return -1;
	if (!(c->payload = malloc(total ? total : 1)))
		return -1;
	for (size_t i = 0, at = 0; i < n; at += iov[i].iov_len, i++)
		if (iov[i].iov_len && peek(c->pid, (uintptr_t)iov[i].iov_base, c->payload + at, iov[i].iov_len) < 0)
			return -1;
	c->payload_len = total;
	return 0;
}

/* How many sections apply to d under `name`. */
static int sections_named(const struct sl_supervisor *s, const struct sl_dest *d, const char *name)
{
	struct sl_dest named = *d;
	struct sl_match m;

	named.name = name;
	named.name_len = strlen(name);
	return sl_match_sections(s->shm->hdr, &named, &m, s->shm->self);
}

/* The name d's address goes by: of the names known for it, the first with which
 * the most sections apply (the host file may give one address several - localhost
 * and the name a pattern wants).  One name, the common case, is not weighed. */
static void name_of(const struct sl_supervisor *s, struct sl_dest *d, char *buf, size_t size)
{
	unsigned nl = SL_MIN(s->next_learned, (unsigned)LEARNED_MAX);
	const char *best = NULL;
	int most = 0, weighed = 0;

	/* The program's own lookups first, newest first; then the config's and the
	 * host file's. */
	for (unsigned i = 0; i < nl + s->nnames; i++) {
		const struct resolved *r = i < nl ? &s->learned[(s->next_learned - 1 - i) % LEARNED_MAX]
		                                  : &s->names[i - nl];
		int n;

		if (r->family != d->family || memcmp(r->addr, d->addr, d->family == AF_INET ? 4 : 16) != 0)
			continue;
		if (!best) {
			best = r->name;
			continue;
		}
		if (!weighed) {
			most = sections_named(s, d, best);
			weighed = 1;
		}
		if ((n = sections_named(s, d, r->name)) > most) {
			most = n;
			best = r->name;
		}
	}
	if (best) {
		snprintf(buf, size, "%s", best);
		d->name = buf;
		d->name_len = strlen(buf);
	}
}

enum { GO_ON, PASS, UNREADABLE };

/* The destination of trapped call req (into sa, alen bytes) and the meter it falls
 * under, read from the caller's memory (a sendmsg's header into mh).  GO_ON; PASS
 * when there is none to read or it is not the caller's to read (the kernel then
 * reads it, and fails the call, itself); UNREADABLE when the process may not be
 * read at all. */
static int read_dest(const struct seccomp_notif *req, struct sockaddr_storage *sa, uint64_t *alen,
                     uint32_t *meter, struct msghdr *mh)
{
	uint64_t addr;
	int nr = req->data.nr, rc;

	*meter = SL_METER_CONNECTIONS;
	if (req->data.arch != SL_AUDIT_ARCH)
		return PASS;
	if (nr == SYS_connect) {
		addr = req->data.args[1];
		*alen = (uint32_t)req->data.args[2];
	} else if (nr == SYS_sendto) {
		addr = req->data.args[4];
		*alen = (uint32_t)req->data.args[5];
		*meter = SL_METER_DATAGRAMS;
	} else if (nr == SYS_sendmsg) {
		if ((rc = peek(req->pid, req->data.args[1], mh, sizeof(*mh))) < 0)
			return rc == -EPERM ? UNREADABLE : PASS;
		addr = (uintptr_t)mh->msg_name;
		*alen = mh->msg_namelen;
		*meter = SL_METER_DATAGRAMS;
	} else {
		return PASS;
	}
	if (!addr || *alen < sizeof(sa_family_t))
		return PASS; /* no destination here: the kernel says what it says */
	*alen = SL_MIN(*alen, (uint64_t)sizeof(*sa));
	memset(sa, 0, sizeof(*sa));
	if ((rc = peek(req->pid, addr, sa, *alen)) < 0)
		return rc == -EPERM ? UNREADABLE : PASS;
	return GO_ON;
}

/* A call to sa counted by `meter`, with the sections that hold it; NULL when
 * none does (or sa is not an address of ours) - or, with *undecided set, when
 * there is no memory for it.  What a trapped call and a relayed datagram share. */
static struct call *matched_call(struct sl_supervisor *s, const struct sockaddr_storage *sa, socklen_t alen,
                                 uint32_t meter, int *undecided)
{
	struct call *c = calloc(1, sizeof(*c));

	*undecided = !c;
	if (!c)
		return NULL;
	c->s = s;
	c->sock = -1;
	c->default_errno = ECONNREFUSED;
	c->asked_ns = sl_clock_mono_ns();
	if (sl_dest_from_sockaddr(&c->d, (const struct sockaddr *)sa, alen) < 0) {
		free(c);
		return NULL; /* AF_UNIX and the like: not ours */
	}
	c->d.meter = meter;
	if (s->shm->hdr->has_names)
		name_of(s, &c->d, c->name, sizeof(c->name));
	if (!(s->shm->hdr->meters & (1u << (meter & 31))) || sl_match_sections(s->shm->hdr, &c->d, &c->m, s->shm->self) <= 0) {
		free(c);
		return NULL;
	}
	return c;
}

/* A call for req to sa, as matched_call. */
static struct call *new_call(struct sl_supervisor *s, const struct seccomp_notif *req,
                             const struct sockaddr_storage *sa, uint64_t alen, uint32_t meter, int *undecided)
{
	struct call *c = matched_call(s, sa, (socklen_t)alen, meter, undecided);

	if (!c)
		return NULL;
	c->id = req->id;
	c->pid = (int)req->pid;
	c->nr = req->data.nr;
	memcpy(&c->sa, sa, sizeof(*sa));
	c->alen = (socklen_t)alen;
	return c;
}

/* The caller's socket, duplicated here, and for a datagram its bytes: without
 * them the caller makes the call itself, on "continue".  PASS for a datagram
 * socket's connect (its datagrams are what a datagram section holds). */
static int take_call_socket(struct call *c, const struct seccomp_notif *req, const struct msghdr *mh)
{
	c->sock = take_socket(c->pid, (int)req->data.args[0]);
	if (c->d.meter == SL_METER_CONNECTIONS && c->sock >= 0) {
		int type = -1;
		socklen_t len = sizeof(type);

		if (getsockopt(c->sock, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type != SOCK_STREAM)
			return PASS;
	} else if (c->sock >= 0 && read_payload(c, req, mh) < 0) {
		close(c->sock);
		c->sock = -1;
		free(c->payload);
		c->payload = NULL;
	}
	return GO_ON;
}

/* A call not held: made by the caller - or, undecided and not under fallback =
 * open, refused. */
static void pass(struct sl_supervisor *s, uint64_t id, int undecided)
{
	if (undecided && s->fallback != SL_FALLBACK_OPEN) {
		sup_answer(s, id, ECONNREFUSED);
		s->refused++;
		return;
	}
	sup_answer(s, id, 0);
	s->passed++;
}

static void drop_call(struct call *c)
{
	if (c->sock >= 0)
		close(c->sock);
	free(c->payload);
	free(c);
}

/* Whether a datagram section holds datagrams to sa (its name as the program
 * knows it). */
static int datagrams_held(const struct sl_supervisor *s, const struct sockaddr_storage *sa, socklen_t alen)
{
	struct sl_dest d;
	struct sl_match m;
	char name[SL_HOST_MAX];

	if (!(s->shm->hdr->meters & (1u << SL_METER_DATAGRAMS)) ||
	    sl_dest_from_sockaddr(&d, (const struct sockaddr *)sa, alen) < 0)
		return 0;
	d.meter = SL_METER_DATAGRAMS;
	if (s->shm->hdr->has_names)
		name_of(s, &d, name, sizeof(name));
	return sl_match_sections(s->shm->hdr, &d, &m, s->shm->self) > 0;
}

/* A connect whose socket's later calls cannot be followed, sent through the
 * relay (relay.c): a datagram socket to a peer a datagram section holds, or a
 * lookup while sections match by name - with the caller's socket `sock` when
 * already taken, -1 to take it.  1 when it was, and the call answered. */
static int relay_redirected(struct sl_supervisor *s, const struct seccomp_notif *req,
                            const struct sockaddr_storage *sa, uint64_t alen, int sock)
{
	int own = sock < 0, done, held;

	if (req->data.nr != SYS_connect)
		return 0;
	held = datagrams_held(s, sa, (socklen_t)alen);
	if (!held && !(s->shm->hdr->has_names && sup_dns_port(sa)))
		return 0;
	if (own && (sock = take_socket((int)req->pid, (int)req->data.args[0])) < 0)
		return 0;
	done = sup_relay_redirect(s, req->id, sock, sa, (socklen_t)alen, held);
	if (own)
		close(sock);
	if (done)
		s->passed++;
	return done;
}

/* Call c, its sections matched, queued for its admission and stepped. */
static void start_call(struct sl_supervisor *s, struct call *c)
{
	const struct sl_pending_ask a = {.m = &c->m, .d = &c->d, .self = s->shm->self, .fallback = s->fallback,
	                                 .default_errno = ECONNREFUSED, .places = 1,
	                                 .segment = sup_give_back_segment, .segment_ctx = s};

	sl_pending_start(&c->pr.p, s->shm->hdr, &a, c->asked_ns);
	c->next = s->calls;
	if (s->calls)
		s->calls->prev = c;
	s->calls = c;
	ev_init(&c->timer, NULL); /* a blocking connect's SO_SNDTIMEO, once made */
	c->timer.data = c;
	sup_step(c);
}

int sup_hold_datagram(struct sl_supervisor *s, int up, const struct sockaddr_storage *server, socklen_t slen,
                      const void *msg, size_t len)
{
	int undecided;
	struct call *c = matched_call(s, server, slen, SL_METER_DATAGRAMS, &undecided);

	/* No memory: lost, as on a network short of buffers.  No section holds it
	 * now (a reload): it goes. */
	if (!c)
		return undecided ? 0 : 1;
	c->relayed = 1;
	c->nr = SYS_sendto;
	if (s->relay_bytes + len > RELAY_HELD_MAX || !(c->payload = malloc(len ? len : 1)) ||
	    (c->sock = dup(up)) < 0) { /* its own: the route may be forgotten meanwhile */
		sup_say(s, "relay: a datagram dropped (%zu bytes held already)", s->relay_bytes);
		drop_call(c);
		return 0;
	}
	memcpy(c->payload, msg, len);
	c->payload_len = len;
	c->alen = 0; /* sent on its socket, connected to server */
	s->relay_bytes += len;
	start_call(s, c);
	return 0;
}

static void handle(struct sl_supervisor *s, const struct seccomp_notif *req)
{
	struct sockaddr_storage sa;
	struct msghdr mh = {0};
	uint64_t alen = 0;
	uint32_t meter;
	struct call *c;
	int undecided;

	s->trapped++;
	switch (read_dest(req, &sa, &alen, &meter, &mh)) {
	case UNREADABLE:
		/* Its destination cannot be known: not a "go" unless the fallback says so. */
		sup_say(s, "pid %d may not be read (non-dumpable): its call is undecided", (int)req->pid);
		pass(s, req->id, 1);
		return;
	case PASS:
		pass(s, req->id, 0);
		return;
	}
	/* The memory read was the caller's as of its call: make sure it still is (the
	 * thread could have died and its id been reused) before acting on it. */
	if (!sup_still_valid(s, req->id))
		return;
	if (!(c = new_call(s, req, &sa, alen, meter, &undecided))) {
		if (!undecided && relay_redirected(s, req, &sa, alen, -1))
			return;
		pass(s, req->id, undecided);
		return;
	}
	if (take_call_socket(c, req, &mh) == PASS) {
		/* a datagram socket's connect: its datagrams are what a section holds */
		int done = relay_redirected(s, req, &sa, alen, c->sock);

		drop_call(c);
		if (!done)
			pass(s, req->id, 0);
		return;
	}
	if ((c->conc = sl_conc_sections(s->shm->hdr, &c->m)) && (c->sock < 0 || s->diag < 0)) {
		/* Its places are given back when its connection closes, which is seen
		 * only through its socket: without one, it could never be given back. */
		sup_refuse(c, "a concurrency limit, and its socket cannot be followed here");
		drop_call(c);
		return;
	}
	start_call(s, c);
}

void sup_on_notify(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sl_supervisor *s = w->data;

	(void)loop;
	(void)revents;
	struct pollfd p = {.fd = s->fd, .events = POLLIN};

	/* RECV would block with nothing queued - as when every process under the
	 * filter is gone, which the listener says with POLLHUP (Linux 5.8). */
	if (poll(&p, 1, 0) != 1)
		return;
	if (!(p.revents & POLLIN)) {
		if (p.revents & (POLLHUP | POLLERR)) {
			ev_io_stop(s->loop, &s->io);
			if (s->on_gone)
				s->on_gone(s->gone_arg);
		}
		return;
	}
	/* One per wake-up: the loop comes back at once while more are queued, and the
	 * timers of held calls get their turn between them. */
	memset(s->req, 0, s->sizes.seccomp_notif);
	if (ioctl(s->fd, SECCOMP_IOCTL_NOTIF_RECV, s->req) != 0)
		return; /* ENOENT: its thread died before it was read; EINTR */
	handle(s, s->req);
}
