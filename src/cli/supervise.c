/*
 * The seccomp supervisor of `sluice run --seccomp` (docs/design.md, "Seccomp").
 *
 * The child installs a filter whose trapped calls - connect(), and sendto()/
 * sendmsg() with a destination when some section meters datagrams - stop in the
 * kernel until this process answers their notification.  For each one it reads
 * the destination out of the caller's memory, matches it against the segment's
 * sections exactly as the shim does, and reserves a slot in the same queues every
 * shimmed process uses (concurrency places first).  At the release it makes the
 * call itself on a duplicate of the caller's socket, inside the release as the
 * shim makes its real call, and answers with the result - or answers "continue"
 * (the caller makes it) where the socket cannot be had, or the section's refusal
 * errno.  Nothing here blocks: each held call waits on a timer of the event loop,
 * so any number of the program's threads may wait at once.
 *
 * Invariants:
 *   - a call is answered once: with its result or "continue" only after its
 *     release (or when no enforcing section applies, or the fallback is open), an
 *     errno only by a refusal; a call whose notification went stale (its thread
 *     was killed) is never answered and an unreleased reservation is given back;
 *     a released one is spent (t.mask cleared), never refunded;
 *   - an address that is not the caller's to read passes through untouched: the
 *     kernel then reads it and fails the call as it would have (EFAULT, EINVAL);
 *     a process that may not be read at all is undecided;
 *   - undecided (the segment lock unavailable) is never "go" under fallback =
 *     local: the call is retried until its max_wait, then refused;
 *   - concurrency places are given back only once the connection is seen closed.
 */
#include "supervise.h"
#include "sluice/clock.h"
#include "sluice/conc.h"
#include "sluice/common.h"
#include "sluice/match.h"
#include "sluice/pending.h"
#include "sluice/seccomp.h"
#include "sluice/wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netdb.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SL_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SL_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "sluice run --seccomp knows the system call ABI of x86_64 and aarch64 only"
#endif

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

#define NAMES_REFRESH_S 60.0                   /* the config's names resolved again */
#define NAMES_MAX 1024
#define TRACK_S 0.02                           /* places' connections looked at */

/* --- the filter --- */

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + (i) * sizeof(uint64_t))
#define ARG_HI(i) (ARG_LO(i) + sizeof(uint32_t))
#define STMT(code, k) ((struct sock_filter)BPF_STMT((code), (k)))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP((code), (k), (jt), (jf)))

int sl_supervise_install(int datagrams)
{
	/* Positions, and jumps as distances to them (a jump goes to pc + 1 + k). */
	enum { CHECK_PASS = 6, SENDTO = 10, ALLOW = 14, NOTIFY = 15, LEN = 16 };
#define TO(from, to) ((unsigned char)((to) - (from) - 1))
	const uint32_t never = UINT32_MAX; /* no system call has this number */
	struct sock_filter f[LEN] = {
		/* 0 */ STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		/* 1 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SL_AUDIT_ARCH, 0, TO(1, ALLOW)),
		/* 2 */ STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* 3 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_connect, TO(3, CHECK_PASS), 0),
		/* 4 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, datagrams ? SYS_sendmsg : never, TO(4, CHECK_PASS), 0),
		/* 5 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, datagrams ? SYS_sendto : never, TO(5, SENDTO), TO(5, ALLOW)),
		/* 6: args[3] == SL_SECCOMP_PASS: the shim decided it already */
		/* 6 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3)),
		/* 7 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SL_SECCOMP_PASS_LO, 0, TO(7, NOTIFY)),
		/* 8 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HI(3)),
		/* 9 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SL_SECCOMP_PASS_HI, TO(9, ALLOW), TO(9, NOTIFY)),
		/* 10: sendto with no destination (a connected socket's) is not seen */
		/* 10 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(4)),
		/* 11 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, TO(11, NOTIFY)),
		/* 12 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HI(4)),
		/* 13 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, TO(13, ALLOW), TO(13, NOTIFY)),
		/* 14 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* 15 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
#undef TO
	struct sock_fprog prog = {.len = LEN, .filter = f};
	int fd;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	/* WAIT_KILLABLE_RECV (5.19): once a call is being held, only a fatal signal
	 * interrupts it - a program's other signals (Go preempts with SIGURG) wait for
	 * its answer rather than restart the call at the back of the queue. */
	fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	                  SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
	if (fd < 0 && errno == EINVAL)
		fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	return fd < 0 ? -errno : fd;
}

int sl_supervise_send_fd(int sock, int fd)
{
	char byte = 'f', ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	/* Sent from under the filter just installed, which may trap sendmsg: marked,
	 * or it would wait for an answer from the very process it is sending to. */
	return syscall(SYS_sendmsg, sock, &msg, MSG_NOSIGNAL, SL_SECCOMP_PASS) == 1 ? 0 : -errno;
}

int sl_supervise_recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -EPROTO;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* --- the supervisor --- */

/* A name of the config's, resolved here: a static program's own lookups are not
 * seen, so its connects to these addresses are matched as if it had named them. */
struct resolved {
	int family;
	uint8_t addr[16];
	char name[SL_HOST_MAX];
};

/* One trapped call being held. */
struct call {
	struct call *prev, *next;
	struct sl_supervisor *s;
	uint64_t id;
	int pid, nr;
	int answered;
	int default_errno;
	int waited;                   /* its admission has answered WAIT once */
	int64_t asked_ns;
	int64_t due_ns;               /* armed: when it is next looked at */
	int armed;
	struct sl_dest d;
	char name[SL_HOST_MAX];
	struct sl_match m;
	union sl_pending_room pr;     /* its admission (core/pending.c): places, slot,
	                               * the fallback; pr.p.taken its places once it goes */
	ev_timer timer;
	/* Made here, inside the release: the caller's socket (a duplicate, by
	 * pidfd_getfd; -1 when it cannot be had: then the caller makes the call
	 * itself on "continue"), the destination, and for a datagram its bytes. */
	int sock;
	struct sockaddr_storage sa;
	socklen_t alen;
	unsigned char *payload;
	size_t payload_len;
	int flags;                    /* sendto/sendmsg flags */
	int made, made_err, blocking; /* made: the call was made here; its errno */
	ssize_t made_val;
	ev_io wio;                    /* a blocking connect, until it completes */
	uint64_t conc;                /* the sections (positions in m) limiting its
	                               * concurrency */
};

/* A connection holding concurrency places: given back when sock_diag no longer
 * shows it open in the program - every fd of it closed (inode 0), closed, or
 * gone - as the shim gives them back at its close(). */
struct place {
	struct place *next;
	uint64_t taken;
	struct sl_match m;
	struct sockaddr_storage local, peer;
	ino_t ino;
};

struct sl_supervisor {
	struct ev_loop *loop;
	int fd;
	struct sl_shm shm;
	char shm_name[SL_PATH_MAX]; /* followed when the daemon moves the segment */
	int32_t self;
	int verbose, fallback;
	ev_io io;
	ev_timer names_timer;
	ev_async names_ready;
	struct names_job *job; /* a refresh of the names under way, or NULL */
	struct call *calls; /* held now */
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	struct seccomp_notif_sizes sizes;
	const struct sl_config *cfg;
	struct resolved *names;
	unsigned nnames;
	struct place *places;  /* connections holding places */
	ev_timer track_timer;
	/* The calls' instants: one timerfd, armed at the earliest call's less
	 * DUE_SPIN_NS (a timerfd wakes to the microsecond where the loop's own
	 * timers come to the millisecond; see arm()). */
	int tfd;
	ev_io tfd_io;
	int diag;              /* NETLINK_SOCK_DIAG, or -1 */
	void (*on_gone)(void *);
	void *gone_arg;
	uint64_t trapped, held, refused, passed;
};

static void say(const struct sl_supervisor *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const struct sl_supervisor *s, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	int n;

	if (!s->verbose)
		return;
	n = snprintf(line, sizeof(line), "sluice[%d]: seccomp ", (int)s->self);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	(void)!write(STDERR_FILENO, line, strlen(line));
}

static void dest_format(const struct sl_dest *d, char *buf, size_t size)
{
	char a[INET6_ADDRSTRLEN] = "?";

	inet_ntop(d->family, d->addr, a, sizeof(a));
	snprintf(buf, size, d->family == AF_INET6 ? "[%s]:%u%s%.*s%s" : "%s:%u%s%.*s%s", a, d->port,
	         d->name ? " (" : "", d->name ? (int)d->name_len : 0, d->name ? d->name : "", d->name ? ")" : "");
}

/* The notification is still the one received: the thread is still in the call. */
static int still_valid(const struct sl_supervisor *s, uint64_t id)
{
	return ioctl(s->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Answer: continue (err 0) or fail the call with err.  0, or -errno (ENOENT: the
 * call is gone - its thread was killed - and nothing was made). */
static int answer_as(struct sl_supervisor *s, uint64_t id, int err, int cont, ssize_t val)
{
	memset(s->resp, 0, s->sizes.seccomp_notif_resp);
	s->resp->id = id;
	if (err)
		s->resp->error = -err;
	else if (cont)
		s->resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	else
		s->resp->val = val;
	return ioctl(s->fd, SECCOMP_IOCTL_NOTIF_SEND, s->resp) == 0 ? 0 : -errno;
}

static int answer(struct sl_supervisor *s, uint64_t id, int err)
{
	return answer_as(s, id, err, 1, 0);
}

/* The call made here, on the caller's socket, as the shim makes its real call:
 * a connect non-blocking (so the loop never waits on a handshake; the caller's
 * blocking one is answered once it completes), a datagram with MSG_DONTWAIT. */
static void make_call(struct call *c)
{
	int fl;

	c->made = 1;
	if (c->nr != SYS_connect) {
		struct iovec iov = {.iov_base = c->payload, .iov_len = c->payload_len};
		struct msghdr mh = {.msg_name = &c->sa, .msg_namelen = c->alen, .msg_iov = &iov, .msg_iovlen = 1};

		c->made_val = sendmsg(c->sock, &mh, c->flags | MSG_DONTWAIT | MSG_NOSIGNAL);
		c->made_err = c->made_val < 0 ? errno : 0;
		return;
	}
	fl = fcntl(c->sock, F_GETFL);
	c->blocking = fl >= 0 && !(fl & O_NONBLOCK);
	if (c->blocking)
		fcntl(c->sock, F_SETFL, fl | O_NONBLOCK);
	c->made_err = connect(c->sock, (struct sockaddr *)&c->sa, c->alen) == 0 ? 0 : errno;
	if (c->blocking)
		fcntl(c->sock, F_SETFL, fl);
}

/* The release's act: the call goes now, inside the release (sluice/admit.h) -
 * made here when the caller's socket could be had, so its SYN or datagram leaves
 * before the lock is let go; else the caller is let go to make it. */
static int act_continue(void *arg)
{
	struct call *c = arg;

	if (c->sock >= 0) {
		make_call(c);
		return 1;
	}
	c->answered = 1;
	if (answer(c->s, c->id, 0) == 0)
		c->s->passed++;
	/* else its thread was killed meanwhile: its slot stays spent, never early */
	return 0; /* the caller's thread makes it when it next runs */
}

static void call_free(struct call *c)
{
	struct sl_supervisor *s = c->s;

	ev_timer_stop(s->loop, &c->timer);
	ev_io_stop(s->loop, &c->wio);
	/* A slot not released, places of a call that did not go or whose connect
	 * failed: given back. */
	sl_pending_cancel(&c->pr.p, s->shm.hdr);
	if (c->sock >= 0)
		close(c->sock);
	free(c->payload);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

static void refuse(struct call *c, const char *why)
{
	char dest[SL_HOST_MAX + 80];
	int err = c->pr.p.err ? c->pr.p.err : c->default_errno;

	dest_format(&c->d, dest, sizeof(dest));
	c->answered = 1;
	c->s->refused++;
	answer(c->s, c->id, err);
	say(c->s, "%s %s: refused (%s): %s", c->nr == SYS_connect ? "connect" : "datagram", dest, why,
	    strerror(err));
}

/* Look at call c again at `at` (CLOCK_MONOTONIC).  The loop's own timers come to
 * the millisecond (epoll's timeout), and an earlier version set them 2 ms early
 * and slept out the rest with the loop standing still: with eight calls queued at
 * 1,000/s the loop slept more than it worked, and 92% of the rate went.  Now one
 * timerfd wakes the loop DUE_SPIN_NS before the earliest call's instant, and the
 * loop spins the rest (the kicker of the shim does the same, src/shim/kicker.c). */
#define DUE_SPIN_NS (60 * SL_NS_PER_US)

/* The call due first (ties: the earlier slot first, the head of a queue), or NULL. */
static struct call *first_due(struct sl_supervisor *s)
{
	struct call *best = NULL;

	for (struct call *c = s->calls; c; c = c->next)
		if (c->armed && (!best || c->due_ns < best->due_ns ||
		                 (c->due_ns == best->due_ns && c->pr.p.t.slot_ns < best->pr.p.t.slot_ns)))
			best = c;
	return best;
}

static void reschedule(struct sl_supervisor *s)
{
	struct call *c = first_due(s);
	int64_t at = c ? SL_MAX(c->due_ns - DUE_SPIN_NS, (int64_t)1) : 0;
	struct itimerspec its = {.it_value = {.tv_sec = at / SL_NS_PER_S, .tv_nsec = at % SL_NS_PER_S}};

	if (s->tfd >= 0)
		timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void arm(struct call *c, int64_t at)
{
	c->due_ns = at;
	c->armed = 1;
	reschedule(c->s);
}

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

/* Each round: give back the places of connections the program has closed. */
static void on_track(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sl_supervisor *s = w->data;

	(void)revents;
	for (struct place **pp = &s->places; *pp;) {
		struct place *p = *pp;

		if (place_open(s, p) == 0) {
			sl_wait_conc_put(s->shm.hdr, p->taken, &p->m, s->self);
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
static void track(struct call *c)
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

/* A blocking connect made here has completed: the caller's answer is its result. */
static void on_connected(struct ev_loop *loop, ev_io *w, int revents)
{
	struct call *c = w->data;
	int err = 0;
	socklen_t len = sizeof(err);

	(void)loop;
	(void)revents;
	if (getsockopt(c->sock, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	answer_as(c->s, c->id, err, 0, 0);
	call_free(c);
}

/* ... or its SO_SNDTIMEO ran out first: EINPROGRESS, as the kernel says then. */
static void on_connect_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct call *c = w->data;

	(void)loop;
	(void)revents;
	answer_as(c->s, c->id, EINPROGRESS, 0, 0);
	call_free(c);
}

/* After the release: the caller's answer, and the call's end. */
static void released(struct call *c)
{
	struct sl_supervisor *s = c->s;

	if (s->verbose && c->pr.p.t.mask) {
		char dest[SL_HOST_MAX + 80];

		dest_format(&c->d, dest, sizeof(dest));
		say(s, "%s %s: go waited=%.3fms slot=%lld released=%lld%s", c->nr == SYS_connect ? "connect" : "datagram",
		    dest, (double)(c->pr.p.t.released_ns - c->pr.p.t.arrival_ns) / 1e6, (long long)c->pr.p.t.release_ns,
		    (long long)c->pr.p.t.released_ns, c->made ? "" : " (made by the caller)");
	}
	c->pr.p.t.mask = 0; /* released: its slot is spent, never to be refunded */
	if (!c->made && !c->answered && c->sock >= 0 && c->conc)
		make_call(c); /* no rate to keep: made here only so its places can follow it */
	if (!c->made) {
		if (!c->answered) {
			c->answered = 1;
			if (answer(s, c->id, 0) == 0)
				s->passed++;
		}
		call_free(c);
		return;
	}
	c->answered = 1;
	s->passed++;
	if (c->pr.p.taken && (c->made_err == 0 || c->made_err == EINPROGRESS || c->made_err == EALREADY))
		track(c); /* else its connect failed: call_free gives the places back */
	if (c->nr == SYS_connect && c->blocking && (c->made_err == EINPROGRESS || c->made_err == EALREADY)) {
		/* The caller waits inside connect(), as it would in the kernel's: until
		 * the handshake ends, or its SO_SNDTIMEO. */
		struct timeval tv = {0};
		socklen_t len = sizeof(tv);

		ev_io_init(&c->wio, on_connected, c->sock, EV_WRITE);
		c->wio.data = c;
		ev_io_start(s->loop, &c->wio);
		if (getsockopt(c->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) == 0 && (tv.tv_sec || tv.tv_usec)) {
			ev_timer_init(&c->timer, on_connect_timeout, (double)tv.tv_sec + (double)tv.tv_usec / 1e6, 0.);
			c->timer.data = c;
			ev_timer_start(s->loop, &c->timer);
		}
		return;
	}
	if (c->nr != SYS_connect && (c->made_err == EAGAIN || c->made_err == EWOULDBLOCK) && !(c->flags & MSG_DONTWAIT)) {
		/* Its socket's buffer is full: the caller sends it, blocking as it
		 * asked (a moment after its release; never before). */
		answer(s, c->id, 0);
		call_free(c);
		return;
	}
	answer_as(s, c->id, c->made_err, 0, c->nr == SYS_connect ? 0 : c->made_val);
	call_free(c);
}

/* Step call c's admission (core/pending.c) and act on its answer: a timer for
 * WAIT, the segment followed for MOVED, the caller answered for GO or REFUSED. */
static void step(struct call *c)
{
	struct sl_supervisor *s = c->s;
	int rc;

	/* Bounded: the stepper answers MOVED a few times at most. */
	while ((rc = sl_pending_step(&c->pr.p, s->shm.hdr, sl_clock_mono_ns(), act_continue, c)) ==
	       SL_PEND_MOVED)
		if (sl_shm_follow(&s->shm, s->shm_name) > 0)
			say(s, "segment %s moved: following it", s->shm_name);
	if (rc == SL_PEND_WAIT) {
		if (!c->waited++ && c->pr.p.phase == SL_PEND_RELEASE)
			s->held++;
		arm(c, c->pr.p.at);
		return;
	}
	if (c->pr.p.undecided_why)
		say(s, "undecided (%s); fallback = %s", c->pr.p.undecided_why,
		    s->fallback == SL_FALLBACK_OPEN     ? "open: goes unshaped"
		    : s->fallback == SL_FALLBACK_CLOSED ? "closed: refused"
		                                        : "local: waited for the shared queue, up to max_wait");
	if (rc == SL_PEND_REFUSED) {
		refuse(c, c->pr.p.why ? c->pr.p.why : "refused");
		call_free(c);
		return;
	}
	released(c);
}

/* Call c's instant has come. */
static void on_due(struct call *c)
{
	if (!still_valid(c->s, c->id)) {
		call_free(c); /* its thread was killed while it waited: the slot goes back */
		return;
	}
	step(c);
}

/* The timerfd: every call whose instant has come, in order, each spun out to
 * its instant; then the timerfd is set for the next. */
static void on_tfd(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sl_supervisor *s = w->data;
	uint64_t ticks;
	struct call *c;

	(void)loop;
	(void)revents;
	(void)!read(s->tfd, &ticks, sizeof(ticks));
	/* Bounded: each round disarms a call (on_due may arm it again, later). */
	for (int rounds = 0; rounds < 10000 && (c = first_due(s)); rounds++) {
		if (c->due_ns - sl_clock_mono_ns() > DUE_SPIN_NS)
			break;
		while (sl_clock_mono_ns() < c->due_ns)
			sl_cpu_relax();
		c->armed = 0;
		on_due(c);
	}
	reschedule(s);
}

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

static void name_of(const struct sl_supervisor *s, struct sl_dest *d, char *buf, size_t size)
{
	for (unsigned i = 0; i < s->nnames; i++)
		if (s->names[i].family == d->family &&
		    memcmp(s->names[i].addr, d->addr, d->family == AF_INET ? 4 : 16) == 0) {
			snprintf(buf, size, "%s", s->names[i].name);
			d->name = buf;
			d->name_len = strlen(buf);
			return;
		}
}

static void handle(struct sl_supervisor *s, const struct seccomp_notif *req)
{
	struct sockaddr_storage sa;
	struct msghdr mh = {0};
	uint64_t addr, alen;
	uint32_t meter = SL_METER_CONNECTIONS;
	struct call *c;
	int nr = req->data.nr, rc;

	s->trapped++;
	if (req->data.arch != SL_AUDIT_ARCH)
		goto pass;
	if (nr == SYS_connect) {
		addr = req->data.args[1];
		alen = (uint32_t)req->data.args[2];
	} else if (nr == SYS_sendto) {
		addr = req->data.args[4];
		alen = (uint32_t)req->data.args[5];
		meter = SL_METER_DATAGRAMS;
	} else if (nr == SYS_sendmsg) {
		if ((rc = peek(req->pid, req->data.args[1], &mh, sizeof(mh))) == -EPERM)
			goto unreadable;
		if (rc < 0)
			goto pass;
		addr = (uintptr_t)mh.msg_name;
		alen = mh.msg_namelen;
		meter = SL_METER_DATAGRAMS;
	} else {
		goto pass;
	}
	if (!addr || alen < sizeof(sa_family_t))
		goto pass; /* no destination here: the kernel says what it says */
	alen = SL_MIN(alen, (uint64_t)sizeof(sa));
	memset(&sa, 0, sizeof(sa));
	if ((rc = peek(req->pid, addr, &sa, alen)) == -EPERM)
		goto unreadable;
	if (rc < 0)
		goto pass; /* not the caller's to read: the kernel reads it, and fails it, itself */
	/* The memory read was the caller's as of its call: make sure it still is (the
	 * thread could have died and its id been reused) before acting on it. */
	if (!still_valid(s, req->id))
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		goto pass_undecided;
	c->s = s;
	c->sock = -1;
	c->id = req->id;
	c->pid = (int)req->pid;
	c->nr = nr;
	c->default_errno = ECONNREFUSED;
	c->asked_ns = sl_clock_mono_ns();
	if (sl_dest_from_sockaddr(&c->d, (struct sockaddr *)&sa, (socklen_t)alen) < 0) {
		free(c);
		goto pass; /* AF_UNIX and the like: not ours */
	}
	c->d.meter = meter;
	if (s->shm.hdr->has_names)
		name_of(s, &c->d, c->name, sizeof(c->name));
	if (!(s->shm.hdr->meters & (1u << (meter & 31))) || sl_match_sections(s->shm.hdr, &c->d, &c->m, s->self) <= 0) {
		free(c);
		goto pass;
	}
	c->sock = take_socket(c->pid, (int)req->data.args[0]);
	memcpy(&c->sa, &sa, sizeof(sa));
	c->alen = (socklen_t)alen;
	if (meter == SL_METER_CONNECTIONS && c->sock >= 0) {
		/* A connection is a TCP connect's: a datagram socket's connect is passed
		 * (its datagrams are what a datagram section holds). */
		int type = -1;
		socklen_t len = sizeof(type);

		if (getsockopt(c->sock, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type != SOCK_STREAM) {
			close(c->sock);
			free(c);
			goto pass;
		}
	} else if (c->sock >= 0 && read_payload(c, req, &mh) < 0) {
		close(c->sock); /* the caller sends it, on "continue" */
		c->sock = -1;
		free(c->payload);
		c->payload = NULL;
	}
	if ((c->conc = sl_conc_sections(s->shm.hdr, &c->m)) && (c->sock < 0 || s->diag < 0)) {
		/* Its places are given back when its connection closes, which is seen
		 * only through its socket: without one, it could never be given back. */
		refuse(c, "a concurrency limit, and its socket cannot be followed here");
		if (c->sock >= 0)
			close(c->sock);
		free(c->payload);
		free(c);
		return;
	}
	{
		const struct sl_pending_ask a = {.m = &c->m, .d = &c->d, .self = s->self, .fallback = s->fallback,
		                                 .default_errno = ECONNREFUSED, .places = 1};

		sl_pending_start(&c->pr.p, s->shm.hdr, &a, c->asked_ns);
	}
	c->next = s->calls;
	if (s->calls)
		s->calls->prev = c;
	s->calls = c;
	ev_init(&c->timer, NULL); /* a blocking connect's SO_SNDTIMEO, once made */
	c->timer.data = c;
	step(c);
	return;
unreadable:
	/* Its destination cannot be known: not a "go" unless the fallback says so. */
	say(s, "pid %d may not be read (non-dumpable): its call is undecided", (int)req->pid);
pass_undecided:
	if (s->fallback != SL_FALLBACK_OPEN) {
		answer(s, req->id, ECONNREFUSED);
		s->refused++;
		return;
	}
pass:
	answer(s, req->id, 0);
	s->passed++;
}

static void on_notify(struct ev_loop *loop, ev_io *w, int revents)
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

/* The config's exact names, resolved here (README, "What reaches what"): names[]
 * (n of them, SL_HOST_MAX each) into a new table; *count its length. */
static struct resolved *resolve(const char (*names)[SL_HOST_MAX], unsigned n, unsigned *count)
{
	struct resolved *out = calloc(NAMES_MAX, sizeof(*out));
	unsigned k = 0;

	if (!out)
		return NULL;
	for (unsigned i = 0; i < n && k < NAMES_MAX; i++) {
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL, *r;

		if (getaddrinfo(names[i], NULL, &hints, &res) != 0)
			continue;
		for (r = res; r && k < NAMES_MAX; r = r->ai_next) {
			struct sl_dest d;

			if (sl_dest_from_sockaddr(&d, r->ai_addr, r->ai_addrlen) < 0)
				continue;
			out[k].family = d.family;
			memcpy(out[k].addr, d.addr, sizeof(d.addr));
			snprintf(out[k].name, sizeof(out[k].name), "%s", names[i]);
			k++;
		}
		freeaddrinfo(res);
	}
	*count = k;
	return out;
}

/* A refresh of the names, resolved on a thread of its own: a slow resolver must
 * not hold up the loop, where every trapped call of the program waits.  The job
 * is shared by the thread and the supervisor; whichever lets go of it last frees
 * it (the supervisor may stop first: orphaned). */
struct names_job {
	pthread_mutex_t lock;
	int refs, orphaned;
	struct ev_loop *loop;
	ev_async *ready;
	char (*names)[SL_HOST_MAX];
	unsigned nnames;
	struct resolved *out;
	unsigned nout;
};

static void job_put(struct names_job *j)
{
	int last;

	pthread_mutex_lock(&j->lock);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->lock);
	if (last) {
		free(j->names);
		free(j->out);
		free(j);
	}
}

static void *resolver(void *arg)
{
	struct names_job *j = arg;
	unsigned n = 0;
	struct resolved *out = resolve((const char (*)[SL_HOST_MAX])j->names, j->nnames, &n);

	pthread_mutex_lock(&j->lock);
	j->out = out;
	j->nout = n;
	if (!j->orphaned)
		ev_async_send(j->loop, j->ready);
	pthread_mutex_unlock(&j->lock);
	job_put(j);
	return NULL;
}

/* The config's exact names, as resolve() wants them; how many. */
static char (*config_names(const struct sl_config *cfg, unsigned *n))[SL_HOST_MAX]
{
	char (*names)[SL_HOST_MAX] = calloc(cfg->npatterns ? cfg->npatterns : 1, SL_HOST_MAX);

	*n = 0;
	for (unsigned i = 0; names && i < cfg->npatterns; i++)
		if (cfg->patterns[i].kind == SL_PAT_NAME)
			snprintf(names[(*n)++], SL_HOST_MAX, "%s", cfg->patterns[i].name);
	return names;
}

static void on_names(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sl_supervisor *s = w->data;
	struct names_job *j;
	pthread_attr_t attr;
	pthread_t t;

	(void)loop;
	(void)revents;
	if (s->job || !(j = calloc(1, sizeof(*j))))
		return; /* the last refresh is still under way */
	pthread_mutex_init(&j->lock, NULL);
	j->refs = 2;
	j->loop = s->loop;
	j->ready = &s->names_ready;
	if (!(j->names = config_names(s->cfg, &j->nnames))) {
		free(j);
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, resolver, j) != 0) {
		free(j->names);
		free(j);
	} else {
		s->job = j;
	}
	pthread_attr_destroy(&attr);
}

/* The refresh is done: its table replaces the old one. */
static void on_names_ready(struct ev_loop *loop, ev_async *w, int revents)
{
	struct sl_supervisor *s = w->data;
	struct names_job *j = s->job;

	(void)loop;
	(void)revents;
	if (!j)
		return;
	pthread_mutex_lock(&j->lock);
	if (j->out) {
		free(s->names);
		s->names = j->out;
		s->nnames = j->nout;
		j->out = NULL;
	}
	pthread_mutex_unlock(&j->lock);
	s->job = NULL;
	job_put(j);
}

struct sl_supervisor *sl_supervise_start(struct ev_loop *loop, int listener, const char *shm_name,
                                         const struct sl_config *cfg, int verbose, void (*on_gone)(void *),
                                         void *arg)
{
	struct sl_supervisor *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return NULL;
	s->loop = loop;
	s->fd = listener;
	s->diag = -1;
	s->tfd = -1;
	s->self = (int32_t)getpid();
	s->verbose = verbose;
	s->cfg = cfg;
	s->on_gone = on_gone;
	s->gone_arg = arg;
	s->fallback = (int)cfg->global.fallback;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &s->sizes) != 0 ||
	    !(s->req = calloc(1, SL_MAX(s->sizes.seccomp_notif, (uint16_t)sizeof(*s->req)))) ||
	    !(s->resp = calloc(1, SL_MAX(s->sizes.seccomp_notif_resp, (uint16_t)sizeof(*s->resp))))) {
		fprintf(stderr, "sluice run: seccomp: cannot size its notifications: %s\n", strerror(errno));
		goto fail;
	}
	s->sizes.seccomp_notif = SL_MAX(s->sizes.seccomp_notif, (uint16_t)sizeof(*s->req));
	s->sizes.seccomp_notif_resp = SL_MAX(s->sizes.seccomp_notif_resp, (uint16_t)sizeof(*s->resp));
	snprintf(s->shm_name, sizeof(s->shm_name), "%s", shm_name);
	if ((rc = sl_shm_attach(&s->shm, shm_name, 1)) < 0) {
		fprintf(stderr, "sluice run: seccomp: cannot attach segment %s: %s\n", shm_name,
		        rc == -EPROTO ? "not a sluice segment of this version" : strerror(-rc));
		goto fail;
	}
	{
		unsigned n = 0;
		char (*names)[SL_HOST_MAX] = config_names(cfg, &n);

		/* The first time here, before any answer: a connect the program makes at
		 * once to a name of the config's must match as that name. */
		if (names)
			s->names = resolve((const char (*)[SL_HOST_MAX])names, n, &s->nnames);
		free(names);
	}
	ev_async_init(&s->names_ready, on_names_ready);
	s->names_ready.data = s;
	ev_async_start(loop, &s->names_ready);
	s->diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	ev_init(&s->track_timer, on_track);
	s->track_timer.repeat = TRACK_S;
	s->track_timer.data = s;
	{
		/* SLUICE_NAMES_REFRESH_S: another period, for the tests (0.1 s to an hour). */
		const char *env = getenv("SLUICE_NAMES_REFRESH_S");
		double every = env ? atof(env) : NAMES_REFRESH_S;

		if (!(every >= 0.1 && every <= 3600))
			every = NAMES_REFRESH_S;
		ev_timer_init(&s->names_timer, on_names, every, every);
	}
	s->names_timer.data = s;
	ev_timer_start(loop, &s->names_timer);
	/* Linux 6.6: the caller and this process hand over on one CPU, as a pipe's two
	 * ends do, rather than wake each other across CPUs: a trapped call costs a
	 * fraction as much (make bench, item 17).  Older kernels: as it was. */
	(void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (uint64_t)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
	if ((s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0) {
		fprintf(stderr, "sluice run: seccomp: no timerfd: %s\n", strerror(errno));
		goto fail;
	}
	ev_io_init(&s->tfd_io, on_tfd, s->tfd, EV_READ);
	s->tfd_io.data = s;
	ev_io_start(loop, &s->tfd_io);
	sl_clock_prefer_wakeups();
	ev_io_init(&s->io, on_notify, listener, EV_READ);
	s->io.data = s;
	ev_io_start(loop, &s->io);
	return s;
fail:
	free(s->req);
	free(s->resp);
	free(s);
	return NULL;
}

void sl_supervise_stop(struct sl_supervisor *s)
{
	if (!s)
		return;
	ev_io_stop(s->loop, &s->io);
	ev_timer_stop(s->loop, &s->names_timer);
	ev_async_stop(s->loop, &s->names_ready);
	if (s->job) { /* a refresh still under way: its thread frees the job */
		pthread_mutex_lock(&s->job->lock);
		s->job->orphaned = 1;
		pthread_mutex_unlock(&s->job->lock);
		job_put(s->job);
	}
	ev_timer_stop(s->loop, &s->track_timer);
	while (s->places) {
		struct place *p = s->places;

		sl_wait_conc_put(s->shm.hdr, p->taken, &p->m, s->self);
		s->places = p->next;
		free(p);
	}
	if (s->diag >= 0)
		close(s->diag);
	ev_io_stop(s->loop, &s->tfd_io);
	if (s->tfd >= 0)
		close(s->tfd);
	while (s->calls)
		call_free(s->calls); /* their slots and places given back */
	say(s, "%llu calls trapped: %llu went, %llu of them held, %llu refused", (unsigned long long)s->trapped,
	    (unsigned long long)s->passed, (unsigned long long)s->held, (unsigned long long)s->refused);
	close(s->fd);
	sl_shm_detach(&s->shm);
	free(s->names);
	free(s->req);
	free(s->resp);
	free(s);
}
