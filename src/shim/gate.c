/*
 * The write gate of held sockets (docs/design.md, "Send paths and event loops"):
 * a write that begins what a section counts - a connection first named by its
 * first write (SNI, Host, CONNECT), a request (meter = requests), a piece of bytes
 * (meter = bytes), a datagram - takes its place first, sleeping on a blocking
 * socket and failing with EAGAIN on a non-blocking one, while the readiness hooks
 * (poll.c, epoll.c) show the socket not writable until its release is due.
 */
#include "answers.h"
#include "drain.h"
#include "epoll.h"
#include "fdtab.h"
#include "gate.h"
#include "firstbox.h"
#include "h2.h"
#include "h2box.h"
#include "held.h"
#include "inflight.h"
#include "iovec.h"
#include "record.h"
#include "stream.h"
#include "kicker.h"
#include "sluice/clock.h"
#include "sluice/pending.h"
#include "sluice/wait.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

/* Under rec->lock: the place in hand was released.  The connection's own first
 * write is done with; a request it covered is admitted, bytes it covered are
 * released. */
static void went(struct sl_record *rec)
{
	uint64_t want = rec->wait ? rec->wait->want : 0;

	if (rec->stream) {
		if (want & sl_rec_mask(rec, SL_USE_REQ))
			rec->stream->admitted_next = 1;
		if (want & sl_rec_mask(rec, SL_USE_BYTES))
			rec->stream->credit += rec->stream->pending;
		rec->stream->pending = 0;
	}
	if (rec->kind == SL_KIND_CONNECTION)
		sl_rec_drop_use(rec, SL_USE_CONN);
}

/* Under rec->lock, which this drops: the request went (or was refused).  A
 * connected UDP socket's record stays for its next datagram, one that meters,
 * follows or holds places for its connection's life; others go. */
static void settle_and_unlock(int fd, struct sl_record *rec)
{
	struct sl_record *last;

	sl_epoll_unmask(rec);
	sl_rec_wait_end(rec);
	if (rec->kind == SL_KIND_CONNECTED_UDP || sl_rec_places(rec) ||
	    sl_rec_mask(rec, SL_USE_REQ | SL_USE_BYTES | SL_USE_SIG)) {
		rec->state = rec->kind == SL_KIND_CONNECTED_UDP ? SL_REC_FIRST : SL_REC_OPEN;
		sl_shim_unlock(&rec->lock);
		return;
	}
	sl_shim_unlock(&rec->lock);
	last = sl_record_unlink(fd);
	if (last)
		sl_held_finish(last);
}

static void log_go(const char *what, struct sl_record *rec, const struct sl_match *want)
{
	const struct sl_ticket *t = &rec->wait->pend.t;
	char dest[SL_HOST_MAX + 80], names[256];
	struct sl_dest d;

	if (!sl_shim.debug)
		return;
	sl_dest_format(sl_rec_dest(rec, &d), dest, sizeof(dest));
	sl_admission_sections(want, names, sizeof(names));
	sl_debug("%s %s sections=%s: go waited=%.3fms slot=%lld released=%lld bytes=%llu", what, dest,
	         names, (double)(t->released_ns - t->arrival_ns) / 1e6, (long long)t->release_ns,
	         (long long)t->released_ns,
	         (unsigned long long)((want->mask & sl_rec_mask(rec, SL_USE_BYTES)) && rec->stream
	                              ? rec->stream->pending : 0));
}

/* Sleep until `at` the way a blocking send would wait: a handler installed with
 * SA_RESTART lets the wait go on, one without it ends the wait with -EINTR (a futex
 * wait is restarted by the kernel exactly in the first case, which a plain
 * clock_nanosleep is not).  Ends with -EAGAIN at `timeout_at` (SO_SNDTIMEO).
 *
 * On time to a few microseconds, as a blocking connect's wait is (pending.c): the
 * futex ends SL_CLOCK_SPIN_NS early under a 1 ns timer slack and the rest is spun
 * (a signal in those last microseconds runs its handler and the wait goes on).
 * A release later than SL_WAKE_SLACK_NS is never made up - the next piece's slot
 * follows the instant the last one went (docs/design.md, "The queue") - so 50 us
 * of default slack and a timer's lateness on every 64 KiB piece cost a bytes
 * section a tenth of its rate at 100 MiB/s. */
static int sleep_like_send(int64_t at, int64_t timeout_at)
{
	static uint32_t never_woken;
	int64_t until = timeout_at && timeout_at < at ? timeout_at : at;
	int64_t wake = until - SL_CLOCK_SPIN_NS;
	int slack = 0, rc = 0;

	/* The timer slack is touched only when there is a sleep to make it matter: a
	 * wait inside the spin (a piece every 61 us at 1 GiB/s) costs no syscall. */
	if (sl_clock_mono_ns() < wake && (slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) > 1)
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	while (sl_clock_mono_ns() < wake) {
		struct timespec ts = {.tv_sec = wake / SL_NS_PER_S, .tv_nsec = wake % SL_NS_PER_S};
		long r = sl_sys(SYS_futex, &never_woken, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &ts,
		                 NULL, FUTEX_BITSET_MATCH_ANY);

		if (r == -1 && errno == EINTR) {
			rc = -EINTR;
			break;
		}
		if (r == -1 && errno != ETIMEDOUT && errno != EAGAIN) {
			if (sl_clock_sleep_until(wake) != 0)
				rc = -EINTR;
			break;
		}
	}
	if (rc == 0)
		rc = sl_clock_sleep_until_precise(until) == 0 ? (until == at ? 0 : -EAGAIN) : -EINTR;
	if (slack > 1)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	return rc;
}

/* SO_SNDTIMEO as an absolute deadline from now, or 0 for none. */
static int64_t send_timeout_at(int fd)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (sl_real_getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) != 0 || (tv.tv_sec == 0 && tv.tv_usec == 0))
		return 0;
	return sl_clock_mono_ns() + tv.tv_sec * SL_NS_PER_S + tv.tv_usec * SL_NS_PER_US;
}

int sl_held_write(int fd, int dontwait)
{
	return sl_held_write_data(fd, dontwait, NULL, 0, NULL, NULL);
}

/* Under rec->lock, at a go: what the write may send, and whether to be told.
 * The write has its request's place (sl_stream_limit) when the stream's
 * admitted_next says so, or when the caller knows the go will give it one
 * (`to_be_placed`: inside_may, for a write whose request is being admitted). */
static void go_limits(struct sl_record *rec, const struct iovec *iov, int iovcnt, int to_be_placed, size_t *limit,
                      int *track)
{
	int requests = sl_rec_mask(rec, SL_USE_REQ) != 0, bytes = sl_rec_mask(rec, SL_USE_BYTES) != 0;
	int placed = to_be_placed || (rec->stream && rec->stream->admitted_next);

	if (limit && requests && iov)
		*limit = sl_stream_limit(rec, iov, iovcnt, placed);
	if (limit && bytes && rec->stream)
		*limit = SL_MIN(*limit, (size_t)SL_MIN(rec->stream->credit, (uint64_t)SIZE_MAX));
	if (track)
		*track = (requests ? SL_TRACK_STREAM : 0) | (bytes ? SL_TRACK_BYTES : 0) |
		         (sl_signals_follows_writes(rec) ? SL_TRACK_SIGNALS : 0);
}

static size_t iov_bytes(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; iov && i < iovcnt; i++)
		n += iov[i].iov_len;
	return iov ? n : SIZE_MAX; /* sendfile: as much as a piece */
}

/* meter = bytes: what the next release reserves.  7/8 of the largest piece for a
 * writer on time, so the eighth left is slack for its wake-up (sl_bytes_slack);
 * for one seen coming later than that - a program busy between its poll and its
 * write (ssh filling its buffers) - less, down to a quarter: the rest of the
 * piece is room that its lateness is made up from when it does write
 * (sl_admit_grow), so a late writer still carries the rate (docs/design.md,
 * "Bytes"). */
static uint64_t piece_size(struct sl_record *rec)
{
	const struct sl_rec_stream *st = rec->stream;
	uint64_t full = st->piece_max, slack = full / 8;
	int64_t span;

	if (st->late_ns && (span = sl_drain_time_ns(rec, full)) > 0)
		slack = SL_MAX(slack, (uint64_t)((unsigned __int128)full * st->late_ns * 3 / 2 / (uint64_t)span));
	return full - SL_MIN(slack, full - full / 4);
}

/* Under rec->lock, at a bytes piece's go: how late the writer came for it,
 * remembered - at once when later, a 64th of the difference when earlier (ssh is
 * late once in ten or twenty pieces), never more than a piece's time, which is
 * all room can make up - and what the write offers beyond the piece taken on
 * where the sections have room for it now. */
static void piece_went(struct sl_record *rec, size_t offered)
{
	struct sl_rec_stream *st = rec->stream;
	const struct sl_ticket *t = &rec->wait->pend.t;
	int64_t span = sl_drain_time_ns(rec, st->piece_max), late = t->released_ns - t->slot_ns;

	late = SL_MAX(SL_MIN(late, span), 0);
	st->late_ns = (uint32_t)SL_MIN(late >= (int64_t)st->late_ns ? late : st->late_ns - (st->late_ns - late) / 64,
	                               (int64_t)UINT32_MAX);
	if (offered > st->credit)
		st->credit += sl_admit_grow(sl_shim.shm.hdr, &rec->wait->pend.t, sl_clock_mono_ns(), sl_shim_self(),
		                            SL_MIN((uint64_t)(offered - st->credit), st->piece_max));
}

/* meter = bytes: a write with no released bytes left needs a piece. */
static int needs_bytes(const struct sl_record *rec, const struct iovec *iov, int iovcnt)
{
	return rec->stream && sl_rec_mask(rec, SL_USE_BYTES) && rec->stream->credit == 0 &&
	       iov_bytes(iov, iovcnt) > 0;
}

/* --- the gate: a small step per state of the record ---
 *
 * Each step runs under rec->lock and says what comes next: the record moved on to
 * another state (look again, still locked), the fd must be looked up afresh (the
 * lock let go), the writer must wait until g->at (still locked), or the write is
 * decided (g->rc: 0 to let it go, or -errno; the lock let go or the record
 * released). */
enum gate_step {
	GATE_NEXT,
	GATE_AGAIN,
	GATE_WAIT,
	GATE_DONE,
};

struct gate {
	int fd, dontwait;
	const struct iovec *iov;
	int iovcnt;
	size_t *limit;
	int *track;
	int send_flags; /* the caller's send flags; -1: the shim may not make its write */
	size_t *sent;   /* with send_flags: what the shim sent inside the release */
	int64_t at; /* GATE_WAIT: until when */
	int rc;     /* GATE_DONE: the result */
};

static enum gate_step gate_done(struct gate *g, int rc)
{
	g->rc = rc;
	return GATE_DONE;
}

/* A held write made inside its release (docs/design.md, "Where the bound is
 * kept"): while the segment lock is held, as a connect's SYN is, so nothing can
 * come between this write's check and its first segment - a writer preempted
 * there holds the next check up with it, rather than bringing the next request
 * closer at the destination.  The send never waits (MSG_DONTWAIT) and raises no
 * SIGPIPE under the lock (MSG_NOSIGNAL): whatever the kernel does not take at
 * once - a full buffer, a failure - is left to the caller's own call after the
 * lock, which blocks or fails as the program's call would have. */
struct inside {
	int fd, flags;
	const struct iovec *iov;
	int iovcnt;
	size_t cut;   /* the bytes of the write this release lets go (SIZE_MAX: all) */
	ssize_t sent; /* what the kernel took inside the release */
};

static int write_inside(void *arg)
{
	struct inside *in = arg;
	struct iovec part[in->iovcnt];
	struct msghdr mh = {0};
	int saved = errno;
	ssize_t w;

	mh.msg_iov = part;
	mh.msg_iovlen = (size_t)sl_iov_cut(in->iov, in->iovcnt, in->cut, part);
	w = sl_real.sendmsg ? sl_real.sendmsg(in->fd, &mh, in->flags | MSG_DONTWAIT | MSG_NOSIGNAL)
	                    : sl_sys(SYS_sendmsg, in->fd, &mh, in->flags | MSG_DONTWAIT | MSG_NOSIGNAL);
	in->sent = w > 0 ? w : 0;
	errno = saved;
	return w > 0; /* not sent: counted as a call the caller makes after */
}

/* Under rec->lock, before a step of the write's admission: whether the write may
 * be made inside its release, and if so `in` set for it.  Only a stream's write
 * whose caller can be told so and gave plain send flags, with bytes to send, on
 * a connection that does not meter bytes (a bytes piece has its own measure of
 * when it left: drain.h).  Its cut is what go_limits will give at the go: for a
 * request, worked out as once its place is had. */
static int inside_may(struct sl_record *rec, const struct gate *g, struct inside *in)
{
	size_t cut = SIZE_MAX;

	if (g->send_flags < 0 || !g->sent || !g->iov || g->iovcnt <= 0 || g->iovcnt > IOV_MAX || !g->limit ||
	    !g->track || rec->kind != SL_KIND_CONNECTION || !rec->wait || sl_rec_mask(rec, SL_USE_BYTES) ||
	    iov_bytes(g->iov, g->iovcnt) == 0)
		return 0;
	go_limits(rec, g->iov, g->iovcnt, (rec->wait->want & sl_rec_mask(rec, SL_USE_REQ)) != 0, &cut,
	          NULL);
	if (cut == 0)
		return 0;
	*in = (struct inside){.fd = g->fd, .flags = g->send_flags, .iov = g->iov, .iovcnt = g->iovcnt, .cut = cut};
	return 1;
}

/* The held write this thread released last, until it is made (sl_held_made):
 * the release instant and what it covered.  One per thread, as a thread makes
 * the write it was released for before it writes anything else. */
static __thread struct {
	int fd;
	int set;
	int64_t from;
	struct sl_match m;
	char name[SL_HOST_MAX]; /* m's key name: the record may go before the write is made */
} made_pending;

/* Under rec->lock, as a write goes: once made, the release of `m` at `from` is
 * moved on to that instant (sl_held_made, told through SL_TRACK_MOVE). */
static void move_when_made(struct gate *g, int64_t from, const struct sl_match *m)
{
	if (!g->track)
		return; /* a caller that makes no write of its own to tell about */
	made_pending.fd = g->fd;
	made_pending.from = from;
	made_pending.m = *m;
	if (m->src.name && m->src.name_len < sizeof(made_pending.name)) {
		memcpy(made_pending.name, m->src.name, m->src.name_len);
		made_pending.m.src.name = made_pending.name;
	} else {
		made_pending.m.src.name = NULL;
		made_pending.m.src.name_len = 0;
	}
	made_pending.set = 1;
	*g->track |= SL_TRACK_MOVE;
}

void sl_held_made(int fd)
{
	if (!made_pending.set || made_pending.fd != fd)
		return;
	made_pending.set = 0;
	/* Counted as a connect made inside its release is (sl_limit_counted_from). */
	sl_wait_made(sl_shim.shm.hdr, &made_pending.m, made_pending.from, sl_clock_mono_ns(), sl_shim_self());
}

/* Under rec->lock: a deferred connect's first write's slot on the first writes'
 * line of its sections (docs/design.md, "First writes on time"), handed out at
 * its first try: 0 once it has come. */
static int64_t first_write_due(struct sl_record *rec)
{
	int64_t now = sl_clock_mono_ns();

	if (!rec->wait->pend.t.mask || rec->inherited)
		return 0;
	if (!rec->release_ns) {
		rec->release_ns = sl_admit_first_write(sl_shim.shm.hdr, &rec->wait->pend.t, now, sl_shim_self());
		if (rec->release_ns > now)
			sl_debug("connection on fd %d: its first write has its slot on the first writes' line in %.3f ms",
			         rec->fd, (double)(rec->release_ns - now) / 1e6);
	}
	return rec->release_ns > now ? rec->release_ns : 0;
}

/* Whether a write may be taken into the first write's box: the caller can be
 * told so, and would be told EAGAIN rather than wait in the call; the socket has
 * one descriptor, the one the kicker sends on. */
static int first_takes(const struct sl_record *rec, const struct gate *g)
{
	return g->iov && g->limit && g->track && (*g->track & SL_TRACK_MAY_TAKE) && !rec->inherited &&
	       __atomic_load_n(&rec->refs, __ATOMIC_RELAXED) == 1 && g->fd == rec->fd &&
	       (g->dontwait || (sl_fd_nonblocking(g->fd) && !(rec->retry & SL_RETRY_SLEEPER)));
}

/* A deferred connect's first write, and any after it while it waits: taken into
 * the box for the kicker to send at the slot (firstbox.h), or held as any write
 * is.  Once the slot has come what the box keeps goes first, then the write as
 * the connection's others do (GATE_NEXT), the waiting part let go. */
static enum gate_step first_write(struct sl_record *rec, struct gate *g)
{
	int64_t at = first_write_due(rec);
	size_t n;
	int rc;

	if (at) {
		/* Taken only where the kicker will send it: a process that could not
		 * start it, or whose heap is full, waits as for any held write. */
		if (first_takes(rec, g))
			sl_kicker_due(rec);
		if (first_takes(rec, g) && sl_kicker_running() && rec->kick_at == rec->release_ns &&
		    (n = sl_firstbox_take(rec, g->iov, g->iovcnt))) {
			sl_debug("connection on fd %d: %zu bytes of its first write kept for its slot", rec->fd, n);
			sl_shim_unlock(&rec->lock);
			*g->limit = n;
			*g->track = SL_TRACK_TAKEN;
			return gate_done(g, 0);
		}
		g->at = at;
		return GATE_WAIT;
	}
	/* A fork child's copy of the record: what the box keeps is its parent's to
	 * send. */
	if (!rec->inherited && (rc = sl_firstbox_flush(rec, g->fd)) == -EAGAIN) {
		/* The socket's buffer full: looked at again a moment later. */
		g->at = rec->release_ns = sl_clock_mono_ns() + SL_FIRSTBOX_RETRY_NS;
		return GATE_WAIT;
	}
	sl_epoll_unmask(rec);
	sl_rec_wait_end(rec);
	return GATE_NEXT;
}

/* Released: a write goes unless it begins a request without a place (meter =
 * requests) or has no released bytes left (meter = bytes). */
static enum gate_step gate_open(struct sl_record *rec, struct gate *g)
{
	struct sl_rec_stream *st = rec->stream;
	struct sl_match rm;
	int64_t moved_from = 0;

	/* A deferred connect's first write: on its line first. */
	if (rec->wait && rec->wait->first_line) {
		enum gate_step step = first_write(rec, g);

		if (step != GATE_NEXT)
			return step;
	}
	/* A released connection that meters and holds nothing more (its deferred
	 * connect made): its record goes. */
	if (rec->kind == SL_KIND_CONNECTION && !sl_rec_places(rec) &&
	    !sl_rec_mask(rec, SL_USE_REQ | SL_USE_BYTES | SL_USE_SIG)) {
		settle_and_unlock(g->fd, rec);
		return gate_done(g, 0);
	}
	sl_rec_match(rec, SL_USE_REQ, &rm);
	/* The first request went out with this write, not at the connect that took
	 * its place: the destination sees it now. */
	if (st && st->first_released_ns && rm.mask && sl_stream_carries_first(rec, g->iov, g->iovcnt)) {
		int64_t now = sl_clock_mono_ns();

		sl_wait_moved(sl_shim.shm.hdr, &rm, st->first_released_ns, now, sl_shim_self());
		st->first_released_ns = 0;
		moved_from = now; /* and once more when the write is made */
		if (sl_stream_parsed(rec))
			sl_refund_released(rec, now, 0);
	}
	if ((!rm.mask || !sl_stream_starts(rec, g->iov, g->iovcnt)) && !needs_bytes(rec, g->iov, g->iovcnt)) {
		go_limits(rec, g->iov, g->iovcnt, 0, g->limit, g->track);
		if (moved_from)
			move_when_made(g, moved_from, &rm);
		sl_shim_unlock(&rec->lock);
		return gate_done(g, 0);
	}
	rec->state = SL_REC_FIRST;
	return GATE_NEXT;
}

/* A deferred connect: made if due; until then the write waits for it. */
static enum gate_step gate_deferred(struct sl_record *rec, struct gate *g)
{
	sl_held_kick_locked(rec, g->fd, sl_clock_mono_ns());
	if (rec->state == SL_REC_DEFERRED) {
		g->at = rec->release_ns; /* not even connected yet */
		return GATE_WAIT;
	}
	if (rec->state == SL_REC_OPEN) {
		sl_shim_unlock(&rec->lock);
		return GATE_AGAIN; /* made: written as a released connection */
	}
	return GATE_NEXT; /* refused, or waiting for its first write's place */
}

static enum gate_step gate_refused(struct sl_record *rec, struct gate *g)
{
	int e = rec->refuse_errno ? rec->refuse_errno : ECONNREFUSED;

	settle_and_unlock(g->fd, rec);
	return gate_done(g, -e);
}

/* What an admission's answer is called in its lines. */
static const char *answer_what(const struct sl_record *rec, const struct sl_match *want)
{
	return rec->kind != SL_KIND_CONNECTION                       ? "datagram"
	       : want->mask & sl_rec_mask(rec, SL_USE_REQ)           ? "request"
	       : want->mask & sl_rec_mask(rec, SL_USE_BYTES)         ? "bytes"
	       : want->mask & sl_rec_mask(rec, SL_USE_CONN)          ? "first write"
	                                                             : "write";
}

/* Under rec->lock: a refusal said, and a request refused on an open connection
 * ends the connection as the errno says, both ways.  Left open, a client that
 * reads for an answer after a failed send (python's http.client under urllib3)
 * waits for one that never comes - the server still waits for the request.
 * Returns the errno. */
static int answer_refused(struct sl_record *rec, int fd, const struct sl_match *want)
{
	struct sl_pending *p = &rec->wait->pend;

	sl_admission_said(p, SL_PEND_REFUSED, answer_what(rec, want));
	rec->state = SL_REC_FIRST; /* nothing is left in hand */
	if (rec->kind == SL_KIND_CONNECTION && (want->mask & sl_rec_mask(rec, SL_USE_REQ)) && sl_real.shutdown)
		sl_real.shutdown(fd, SHUT_RDWR);
	return p->err;
}

/* Under rec->lock: an admission answered "go" (rc) - said, its places kept, what
 * a refund may give back noted, and what it covered released (went).  Returns
 * the release instant (0: nothing was charged). */
static int64_t answer_go(struct sl_record *rec, int rc, const struct sl_match *want)
{
	struct sl_pending *p = &rec->wait->pend;
	const char *what = answer_what(rec, want);
	int64_t released = p->t.mask ? p->t.released_ns : 0;

	if (released)
		log_go(what, rec, want);
	else
		sl_admission_said(p, rc, what); /* observe only, no rate, a fallback */
	/* Places taken: a request's until its answer ends, the connection's until it
	 * closes (inflight.h). */
	if (p->taken) {
		uint64_t req = sl_inflight_positions(rec, p->taken);

		sl_rec_keep_keys(rec, want);
		sl_inflight_took(rec, req);
		sl_rec_set_places(rec, sl_rec_places(rec) | (p->taken & ~req));
		p->taken = 0;
	}
	/* What a refund may give back (answers.c): the connection named by this first
	 * write, the request it begins. */
	if (released && (want->mask & sl_rec_mask(rec, SL_USE_CONN)))
		sl_refund_released(rec, released, 1);
	if (released && (want->mask & sl_rec_mask(rec, SL_USE_REQ)) && sl_stream_parsed(rec))
		sl_refund_released(rec, released, 0);
	went(rec);
	return released;
}

/* The write's admission has an answer (its sections in `want`): the write goes -
 * what it may send worked out, its release moved on to when it is made - or
 * fails. */
static enum gate_step gate_answer(struct sl_record *rec, struct gate *g, int rc, const struct sl_match *want,
                                  const struct inside *in)
{
	int64_t released;

	if (rc == SL_PEND_REFUSED) {
		rc = -answer_refused(rec, g->fd, want);
		settle_and_unlock(g->fd, rec);
		return gate_done(g, rc);
	}
	released = answer_go(rec, rc, want);
	if (released && (want->mask & sl_rec_mask(rec, SL_USE_BYTES)) && rec->stream)
		piece_went(rec, iov_bytes(g->iov, g->iovcnt));
	/* Made inside the release: its cut was worked out then (inside_may), on the
	 * state the go leaves. */
	go_limits(rec, g->iov, g->iovcnt, 0, in ? NULL : g->limit, g->track);
	/* A datagram leaves whole inside its send call: its release moves on to
	 * when the call returned, so a sender held up between its check and its
	 * sendto (t_udp holds every other one 20 ms) does not bring the next one
	 * closer than the interval.  After go_limits, which sets the flags the send
	 * path is told and would clear this one.  A stream's write is not moved: it
	 * was made inside the release when it could be (write_inside), and a long
	 * write's end (a large body into a full buffer) says nothing of when its
	 * first segment left (docs/design.md, "Where the bound is kept"). */
	if (released && rec->kind != SL_KIND_CONNECTION)
		move_when_made(g, released, want);
	if (in) {
		/* Made inside the release: the caller sends the rest of the cut, if any
		 * and the socket blocks, and tells the stream what went. */
		*g->limit = in->cut;
		*g->track |= SL_TRACK_SENT;
		*g->sent = (size_t)in->sent;
		sl_debug("write on fd %d: %zd bytes sent inside its release", g->fd, in->sent);
	}
	settle_and_unlock(g->fd, rec);
	return gate_done(g, 0);
}

/* Whether some requests section among `want` limits concurrency. */
static int requests_conc(const struct sl_record *rec, uint64_t want)
{
	for (uint64_t bits = sl_inflight_positions(rec, want); bits; bits &= bits - 1) {
		const struct sl_section *sec =
			sl_shm_section(sl_shim.shm.hdr, rec->sects->e[__builtin_ctzll(bits)].idx);

		if (sec && sec->spec.concurrency)
			return 1;
	}
	return 0;
}

/* meter = bytes: the next piece is not asked for while the kernel still holds
 * unsent bytes of the last ones (drain.h).  GATE_NEXT to ask now (still locked);
 * otherwise the lock is let go: a non-blocking writer is told EAGAIN with its
 * socket left to the kernel's readiness, which turns writable as the bytes leave;
 * a blocking one looks again after the time they take at the rate (within
 * SL_DRAIN_RECHECK_MIN_NS..MAX_NS) until they have left (or its SO_SNDTIMEO, or
 * a signal), then asks afresh. */
static enum gate_step drain_first(struct sl_record *rec, struct gate *g)
{
	struct sl_rec_stream *st = rec->stream;
	int64_t timeout_at, recheck;
	uint32_t unsent;
	int rc;

	if (!st->drain)
		return GATE_NEXT;
	if (!(unsent = sl_drain_unsent(g->fd))) {
		/* The last piece's end, held when it was written, has left since: late
		 * if that took longer than its time at the rate (the program may have
		 * waited for it on the kernel's readiness, which says writable only
		 * once it left). */
		if (st->tail && sl_clock_mono_ns() - st->tail_ns > sl_drain_time_ns(rec, st->tail))
			st->stuck = SL_MAX(st->stuck, st->tail);
		st->tail = 0;
		return GATE_NEXT;
	}
	st->stuck = SL_MAX(st->stuck, SL_MAX(unsent, st->tail));
	st->tail = 0;
	sl_debug("bytes on fd %d: %u bytes still unsent in the kernel; the next piece waits for them", g->fd, unsent);
	recheck = SL_MAX(SL_MIN(sl_drain_time_ns(rec, unsent), SL_DRAIN_RECHECK_MAX_NS), SL_DRAIN_RECHECK_MIN_NS);
	sl_shim_unlock(&rec->lock);
	if (g->dontwait || sl_fd_nonblocking(g->fd))
		return gate_done(g, -EAGAIN);
	timeout_at = send_timeout_at(g->fd);
	do {
		rc = sleep_like_send(sl_clock_mono_ns() + recheck, timeout_at);
		if (rc < 0)
			return gate_done(g, rc);
	} while (sl_drain_unsent(g->fd));
	return GATE_AGAIN;
}

/* Under rec->lock: the admission of `want` (the record's section positions) asked
 * for, `cost` bytes of it, as of `now` - stepped at once (WAITING, release_ns 0).
 * Its waiting part, or NULL when there is no memory to hold it with. */
static struct sl_rec_wait *ask_for(struct sl_record *rec, uint64_t want, uint64_t cost, int64_t now)
{
	struct sl_pending_ask a;
	struct sl_rec_wait *w;
	struct sl_match m;
	struct sl_dest d;

	if (!(w = sl_rec_wait_begin(rec, want)))
		return NULL;
	sl_rec_match_mask(rec, want, &m);
	/* A request to a requests section limiting concurrency takes its place
	 * (inflight.h); the connection's own sections with it then take theirs. */
	sl_admission_ask(&a, sl_rec_dest(rec, &d), &m, rec->kind == SL_KIND_CONNECTION ? ECONNRESET : ECONNREFUSED,
	                 (want & sl_rec_mask(rec, SL_USE_REQ)) && requests_conc(rec, want));
	a.cost = cost;
	a.room = sl_rec_wait_room(rec);
	sl_pending_start(&w->pend, sl_shim.shm.hdr, &a, now);
	rec->state = SL_REC_WAITING;
	rec->release_ns = 0; /* stepped at once */
	return w;
}

/* Nothing reserved yet: the admission of what this write needs.  It covers the
 * connection's own sections when its first write is pending, the requests
 * sections when a request begins, and a piece of bytes when the bytes are out. */
static enum gate_step gate_first(struct sl_record *rec, struct gate *g)
{
	uint64_t want = sl_rec_mask(rec, SL_USE_CONN), pending = 0;
	struct sl_rec_wait *w;

	if (sl_rec_mask(rec, SL_USE_REQ) && sl_stream_starts(rec, g->iov, g->iovcnt))
		want |= sl_rec_mask(rec, SL_USE_REQ);
	if (needs_bytes(rec, g->iov, g->iovcnt)) {
		enum gate_step drained = drain_first(rec, g);

		if (drained != GATE_NEXT)
			return drained;
		pending = SL_MIN((uint64_t)iov_bytes(g->iov, g->iovcnt), piece_size(rec));
		want |= sl_rec_mask(rec, SL_USE_BYTES);
	}
	if (!(w = ask_for(rec, want, pending, sl_clock_mono_ns()))) {
		/* No memory to hold it with: not a "go" - the write fails as the kernel
		 * fails one it has no buffer for, and the program may try again. */
		sl_debug("write on fd %d: no memory to hold it: ENOBUFS", g->fd);
		sl_shim_unlock(&rec->lock);
		return gate_done(g, -ENOBUFS);
	}
	if (rec->stream)
		rec->stream->pending = pending;
	if (pending && rec->stream->stuck) {
		/* Bytes that waited in the kernel left only now: the destination saw
		 * them now, so the next piece starts after their time at the rate. */
		rec->release_ns = w->pend.at = w->pend.asked_ns + sl_drain_time_ns(rec, rec->stream->stuck);
		sl_debug("bytes on fd %d: %u bytes left the kernel late; the next piece waits %.3f ms", g->fd,
		         rec->stream->stuck, (double)(w->pend.at - w->pend.asked_ns) / 1e6);
		rec->stream->stuck = 0;
	}
	return GATE_NEXT;
}

/* An admission under way: stepped once its instant has come; the write goes once
 * it answers GO. */
static enum gate_step gate_waiting(struct sl_record *rec, struct gate *g)
{
	int64_t now = sl_clock_mono_ns();
	struct sl_match m;
	struct sl_dest d;
	int rc;

	if (!rec->wait) {
		rec->state = SL_REC_FIRST; /* a fork child's copy of a parent's wait */
		return GATE_NEXT;
	}
	if (now >= rec->release_ns) {
		struct inside in;
		int inside;

		sl_signals_peek(rec, g->fd); /* a pause said meanwhile holds it on */
		inside = inside_may(rec, g, &in);
		rc = sl_held_step(rec, &m, &d, now, inside ? write_inside : NULL, inside ? &in : NULL);
		if (rc != SL_PEND_WAIT)
			return gate_answer(rec, g, rc, &m, inside && in.sent > 0 ? &in : NULL);
		rec->release_ns = rec->wait->pend.at;
	}
	g->at = rec->release_ns;
	return GATE_WAIT;
}

static enum gate_step gate_step(struct sl_record *rec, struct gate *g)
{
	switch (rec->state) {
	case SL_REC_OPEN: return gate_open(rec, g);
	case SL_REC_DEFERRED: return gate_deferred(rec, g);
	case SL_REC_REFUSED: return gate_refused(rec, g);
	case SL_REC_FIRST: return gate_first(rec, g);
	default: return gate_waiting(rec, g);
	}
}

/* --- HTTP/2's box (h2box.h): frames taken while a request waits ---
 *
 * The box's opening HEADERS get their admissions here, one at a time and in
 * order, as a write beginning with one would (gate_first, gate_waiting,
 * gate_answer), but under the lock throughout: the kicker steps them at their
 * instants, a program's write whenever it comes. */

/* Under rec->lock: an admission asked for the box's next opening HEADERS.  0, or
 * -1 when it cannot be held (no memory): then it waits in the box for a retry. */
static int box_ask(struct sl_record *rec, int64_t now)
{
	return ask_for(rec, sl_rec_mask(rec, SL_USE_CONN) | sl_rec_mask(rec, SL_USE_REQ), 0, now) ? 0 : -1;
}

/* Under rec->lock: an admission over - its registrations put back, its waiting
 * part gone; the connection's record stays (it meters requests). */
static void box_settle(struct sl_record *rec)
{
	sl_epoll_unmask(rec);
	sl_rec_wait_end(rec);
	rec->state = SL_REC_OPEN;
}

/* The box's next write made inside the release of its opening HEADERS, as a
 * plain write is (write_inside); flushed with the admission counted below. */
struct box_early {
	struct sl_record *rec;
	int fd;
};

static int box_send_early(void *arg)
{
	struct box_early *e = arg;

	return sl_h2box_send_early(e->rec, e->fd);
}

void sl_held_box_pump(struct sl_record *rec, int fd)
{
	struct sl_rec_stream *st = rec->stream;

	/* Bounded: each round steps one admission and writes what it lets go. */
	for (int rounds = 0; rounds < 8; rounds++) {
		int64_t now = sl_clock_mono_ns();
		struct sl_h2box *b = sl_h2box_of(rec);
		int stuck = 0, kept;

		if (!b || !st)
			return;
		if (rec->state == SL_REC_WAITING && !rec->wait)
			rec->state = SL_REC_OPEN; /* a fork child's copy of a parent's wait */
		if (rec->state == SL_REC_WAITING && now >= rec->release_ns) {
			struct sl_match m;
			struct sl_dest d;
			struct box_early e = {rec, fd};
			int rc;

			sl_signals_peek(rec, fd); /* a pause said meanwhile holds it on */
			rc = sl_held_step(rec, &m, &d, now, box_send_early, &e);
			if (rc == SL_PEND_WAIT) {
				rec->release_ns = rec->wait->pend.at;
			} else if (rc == SL_PEND_REFUSED) {
				/* The connection is ended (answer_refused); what the box kept
				 * goes nowhere. */
				answer_refused(rec, fd, &m);
				box_settle(rec);
				sl_h2box_close(rec);
				return;
			} else {
				answer_go(rec, rc, &m);
				box_settle(rec);
				b->admitted++; /* the box's next opening HEADERS may go */
			}
		}
		kept = sl_h2box_flush(rec, fd, &stuck);
		if (!(b = sl_h2box_of(rec)))
			return; /* ended: no memory to go on */
		if (b->len == 0) {
			sl_h2box_close(rec); /* writes go straight to the socket again */
			sl_epoll_unmask(rec);
			return;
		}
		if (kept && rec->state == SL_REC_OPEN && box_ask(rec, now) == 0)
			continue; /* its admission stepped at once */
		if (rec->ep_masked && !sl_h2box_full(rec))
			sl_epoll_unmask(rec);
		if (stuck || (kept && rec->state == SL_REC_OPEN)) {
			/* The socket's buffer is full, or no memory to ask with: again in
			 * a millisecond, whatever the program does. */
			int64_t again = now + SL_NS_PER_MS;

			rec->release_ns = rec->state == SL_REC_WAITING ? SL_MIN(rec->release_ns, again) : again;
			sl_kicker_due(rec);
		} else if (rec->state == SL_REC_WAITING) {
			sl_kicker_due(rec); /* its admission's next instant */
		}
		/* Otherwise nothing to wait for: what stays waits for the program's
		 * next write (the rest of a frame, a stream's HEADERS). */
		return;
	}
}

/* Under rec->lock: the write taken into the box (opened if need be) and what may
 * go written.  GATE_DONE with the bytes taken, EAGAIN when none fit (the lock let
 * go), or GATE_NEXT - only when a box was open and emptied - for the write to go
 * its own way (still locked). */
static enum gate_step box_write(struct sl_record *rec, struct gate *g)
{
	size_t n;

	if (sl_h2box_of(rec)) {
		sl_held_box_pump(rec, g->fd);
		if (!sl_h2box_of(rec))
			return GATE_NEXT; /* emptied: the write goes its own way */
	}
	n = g->iov && g->limit && g->track && (*g->track & SL_TRACK_MAY_TAKE)
	    ? sl_h2box_take(rec, g->fd, g->iov, g->iovcnt) : 0;
	if (n == 0) {
		/* Full: the program is told to wait, its socket shown not writable
		 * until the box has room (at the next release). */
		if (rec->wait)
			sl_epoll_mask(rec);
		sl_shim_unlock(&rec->lock);
		return gate_done(g, -EAGAIN);
	}
	sl_held_box_pump(rec, g->fd); /* what of it may go at once */
	sl_debug("requests on fd %d: %zu bytes taken into the box (HTTP/2 frames kept while a request waits)",
	         g->fd, n);
	sl_shim_unlock(&rec->lock);
	*g->limit = n;
	*g->track = SL_TRACK_TAKEN;
	return gate_done(g, 0);
}

/* GATE_WAIT: a non-blocking writer is told EAGAIN (its socket hidden from epoll
 * until due); a blocking one sleeps, as send would, and looks again - and so does
 * an HTTP/2 request begun inside SSL_write (sl_stream_waits_inside).  Called with
 * rec->lock held; returns with it let go, GATE_AGAIN or GATE_DONE. */
static enum gate_step gate_hold(struct sl_record *rec, struct gate *g, int64_t *timeout_at)
{
	int rc;

	if ((g->dontwait || (sl_fd_nonblocking(g->fd) && !(rec->retry & SL_RETRY_SLEEPER))) &&
	    !sl_stream_waits_inside(rec)) {
		/* HTTP/2 that the box can take: the frames of streams already open go
		 * now, this request's at its release (h2box.h). */
		if (rec->state == SL_REC_WAITING && g->iov && g->limit && g->track &&
		    (*g->track & SL_TRACK_MAY_TAKE) && sl_h2box_fits(rec))
			return box_write(rec, g);
		sl_epoll_mask(rec);
		rec->retry |= SL_RETRY_TOLD;
		sl_shim_unlock(&rec->lock);
		return gate_done(g, -EAGAIN);
	}
	sl_shim_unlock(&rec->lock);
	if (*timeout_at < 0)
		*timeout_at = send_timeout_at(g->fd);
	rc = sleep_like_send(g->at, *timeout_at);
	if (rc == -EAGAIN)
		return gate_done(g, -EAGAIN); /* SO_SNDTIMEO: the place stays reserved for the retry */
	if (rc == -EINTR) {
		/* A handler without SA_RESTART: fail as send would, and return the place
		 * (if still the last handed out); the next write asks anew. */
		if ((rec = sl_held_lock_record(g->fd))) {
			if (rec->state == SL_REC_WAITING) {
				sl_held_cancel(rec);
				sl_epoll_unmask(rec);
				sl_rec_wait_end(rec);
				rec->state = SL_REC_FIRST;
			}
			sl_shim_unlock(&rec->lock);
		}
		return gate_done(g, -EINTR);
	}
	return GATE_AGAIN;
}

int sl_held_write_data(int fd, int dontwait, const struct iovec *iov, int iovcnt, size_t *limit,
                       int *track)
{
	return sl_held_write_inside(fd, dontwait, -1, iov, iovcnt, limit, track, NULL);
}

int sl_held_write_inside(int fd, int dontwait, int flags, const struct iovec *iov, int iovcnt, size_t *limit,
                         int *track, size_t *sent)
{
	struct gate g = {.fd = fd, .dontwait = dontwait, .iov = iov, .iovcnt = iovcnt,
	                 .limit = limit, .track = track, .send_flags = sent ? flags : -1, .sent = sent};
	int64_t timeout_at = -1;

	/* Bounded: each round either decides, waits (a sleep towards a release), or
	 * finds the fd's record replaced by another thread meanwhile. */
	for (int rounds = 0; rounds < 10000; rounds++) {
		struct sl_record *rec = sl_record_of(fd);
		enum gate_step step = GATE_NEXT;

		if (!rec)
			return 0;
		sl_shim_lock(&rec->lock);
		if (sl_fdtab_get(fd) != rec->index) {
			sl_shim_unlock(&rec->lock); /* freed and reused meanwhile */
			continue;
		}
		/* Told EAGAIN, and back without a wait on the socket: a program that
		 * sleeps between tries (enum sl_rec_retry), unless it waits through
		 * epoll (which tells no one what it waits on) or asked MSG_DONTWAIT. */
		if (sl_unlikely(rec->retry & SL_RETRY_TOLD) && rounds == 0) {
			rec->retry &= (uint8_t)~SL_RETRY_TOLD;
			if (!g.dontwait && !sl_epregs(fd, 0) && !(rec->retry & SL_RETRY_SLEEPER)) {
				rec->retry |= SL_RETRY_SLEEPER;
				sl_debug("write on fd %d: again without a wait after EAGAIN: its held writes wait in "
				         "the call", fd);
			}
		}
		/* A box open: this write goes behind what it keeps (h2box.h) - in the
		 * process that opened it (a fork child's copy is its parent's). */
		if (sl_unlikely(sl_h2box_of(rec)) && !rec->inherited && (step = box_write(rec, &g)) == GATE_DONE)
			return g.rc;
		/* OPEN -> FIRST -> WAITING -> wait is the longest chain of steps. */
		for (int n = 0; n < 8 && step == GATE_NEXT; n++)
			step = gate_step(rec, &g);
		if (step == GATE_NEXT) {
			sl_shim_unlock(&rec->lock); /* no state settles: look again */
			continue;
		}
		if (step == GATE_WAIT)
			step = gate_hold(rec, &g, &timeout_at);
		if (step == GATE_DONE)
			return g.rc;
	}
	return 0;
}
