/*
 * calls.c - each trapped call held: its admission stepped (core/pending.c) on one
 * timerfd, the call made inside its release, and its answer to the kernel.
 */
#include "internal.h"

void sup_say(const struct sl_supervisor *s, const char *fmt, ...)
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
int sup_still_valid(const struct sl_supervisor *s, uint64_t id)
{
	return ioctl(s->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Answer: continue (err 0) or fail the call with err.  0, or -errno (ENOENT: the
 * call is gone - its thread was killed - and nothing was made). */
int sup_answer_as(struct sl_supervisor *s, uint64_t id, int err, int cont, ssize_t val)
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

int sup_answer(struct sl_supervisor *s, uint64_t id, int err)
{
	return sup_answer_as(s, id, err, 1, 0);
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
	if (sup_answer(c->s, c->id, 0) == 0)
		c->s->passed++;
	/* else its thread was killed meanwhile: its slot stays spent, never early */
	return 0; /* the caller's thread makes it when it next runs */
}

void sup_call_free(struct call *c)
{
	struct sl_supervisor *s = c->s;

	ev_timer_stop(s->loop, &c->timer);
	ev_io_stop(s->loop, &c->wio);
	/* A slot not released, places of a call that did not go or whose connect
	 * failed: given back. */
	sl_pending_cancel(&c->pr.p, s->shm->hdr);
	if (c->relayed)
		s->relay_bytes -= c->payload_len;
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

void sup_refuse(struct call *c, const char *why)
{
	char dest[SL_HOST_MAX + 80];
	int err = c->pr.p.err ? c->pr.p.err : c->default_errno;

	dest_format(&c->d, dest, sizeof(dest));
	c->answered = 1;
	c->s->refused++;
	if (c->relayed) { /* its sender was told it went: dropped, as a network may */
		sup_say(c->s, "relay: datagram %s: dropped (%s)", dest, why);
		return;
	}
	sup_answer(c->s, c->id, err);
	sup_say(c->s, "%s %s: refused (%s): %s", c->nr == SYS_connect ? "connect" : "datagram", dest, why,
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
	sup_answer_as(c->s, c->id, err, 0, 0);
	sup_call_free(c);
}

/* ... or its SO_SNDTIMEO ran out first: EINPROGRESS, as the kernel says then. */
static void on_connect_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct call *c = w->data;

	(void)loop;
	(void)revents;
	sup_answer_as(c->s, c->id, EINPROGRESS, 0, 0);
	sup_call_free(c);
}

/* After the release: the caller's answer, and the call's end. */
static void released(struct call *c)
{
	struct sl_supervisor *s = c->s;

	if (s->verbose && c->pr.p.t.mask) {
		char dest[SL_HOST_MAX + 80];

		dest_format(&c->d, dest, sizeof(dest));
		sup_say(s, "%s %s: go waited=%.3fms slot=%lld released=%lld%s", c->nr == SYS_connect ? "connect" : "datagram",
		    dest, (double)(c->pr.p.t.released_ns - c->pr.p.t.arrival_ns) / 1e6, (long long)c->pr.p.t.release_ns,
		    (long long)c->pr.p.t.released_ns, c->made ? "" : " (made by the caller)");
	}
	c->pr.p.t.mask = 0; /* released: its slot is spent, never to be refunded */
	if (c->relayed) { /* no caller to answer: out, and done */
		if (!c->made)
			make_call(c);
		s->passed++;
		sup_call_free(c);
		return;
	}
	if (!c->made && !c->answered && c->sock >= 0 && c->conc)
		make_call(c); /* no rate to keep: made here only so its places can follow it */
	if (!c->made) {
		if (!c->answered) {
			c->answered = 1;
			if (sup_answer(s, c->id, 0) == 0)
				s->passed++;
		}
		sup_call_free(c);
		return;
	}
	c->answered = 1;
	s->passed++;
	if (c->pr.p.taken && (c->made_err == 0 || c->made_err == EINPROGRESS || c->made_err == EALREADY))
		sup_track(c); /* else its connect failed: call_free gives the places back */
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
		sup_answer(s, c->id, 0);
		sup_call_free(c);
		return;
	}
	sup_answer_as(s, c->id, c->made_err, 0, c->nr == SYS_connect ? 0 : c->made_val);
	sup_call_free(c);
}

/* Step call c's admission (core/pending.c) and act on its answer: a timer for
 * WAIT, the segment followed for MOVED, the caller answered for GO or REFUSED. */
void sup_step(struct call *c)
{
	struct sl_supervisor *s = c->s;
	int rc;

	/* Bounded: the stepper answers MOVED a few times at most. */
	while ((rc = sl_pending_step(&c->pr.p, s->shm->hdr, sl_clock_mono_ns(), act_continue, c)) ==
	       SL_PEND_MOVED)
		if (sup_follow(s) > 0)
			sup_say(s, "the segment at %s moved: following it", s->seg_path);
	if (rc == SL_PEND_WAIT) {
		if (!c->waited++ && c->pr.p.phase == SL_PEND_RELEASE)
			s->held++;
		arm(c, c->pr.p.at);
		return;
	}
	if (c->pr.p.undecided_why)
		sup_say(s, "undecided (%s); fallback = %s", c->pr.p.undecided_why,
		    s->fallback == SL_FALLBACK_OPEN     ? "open: goes unshaped"
		    : s->fallback == SL_FALLBACK_CLOSED ? "closed: refused"
		                                        : "local: waited for the shared queue, up to max_wait");
	if (rc == SL_PEND_REFUSED) {
		sup_refuse(c, c->pr.p.why ? c->pr.p.why : "refused");
		sup_call_free(c);
		return;
	}
	released(c);
}

/* Call c's instant has come. */
static void on_due(struct call *c)
{
	if (!c->relayed && !sup_still_valid(c->s, c->id)) {
		sup_call_free(c); /* its thread was killed while it waited: the slot goes back */
		return;
	}
	sup_step(c);
}

/* The timerfd: every call whose instant has come, in order, each spun out to
 * its instant; then the timerfd is set for the next. */
void sup_on_tfd(struct ev_loop *loop, ev_io *w, int revents)
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
