/*
 * Held sockets (docs/design.md, "Send paths and event loops").  A matched non-blocking
 * connect() whose place is not due is deferred: the program sees EINPROGRESS, the real
 * connect is made at the release (by whichever hook looks at the socket then: poll,
 * select, epoll, a write, connect again), and until then the socket shows no events, so
 * the destination sees connection attempts at the rate and no connection sits open and
 * silent while it waits.  A connection first named by its first write (SNI, Host,
 * CONNECT) is already open: that write takes the place, sleeping on a blocking socket and
 * failing with EAGAIN on a non-blocking one, while the readiness hooks (poll.c, epoll.c)
 * show it not writable until the release is due.  Requests and bytes are held at the
 * writes that start them.  A happy-eyeballs loser closed before its release gives its
 * place back.
 */
#include "fdtab.h"
#include "kicker.h"
#include "sluice/clock.h"
#include "sluice/pending.h"
#include "sluice/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>


/* Under rec->lock: what the next write is to be held for. */
static void set_target(struct sl_record *rec, const struct sl_dest *d, const struct sl_match *m)
{
	rec->state = SL_REC_FIRST;
	rec->dest = *d;
	if (d->name) {
		size_t n = SL_MIN(d->name_len, (size_t)SL_HOST_MAX - 1);

		memmove(rec->name, d->name, n);
		rec->name[n] = '\0';
		rec->dest.name = rec->name;
		rec->dest.name_len = n;
	}
	rec->m = *m;
}

int sl_held_connect(int fd, const struct sl_dest *d, const struct sl_match *m, int kind)
{
	struct sl_record *rec = sl_record_new(fd);

	if (!rec)
		return -ENOSPC;
	sl_shim_lock(&rec->lock);
	rec->fd = fd;
	rec->kind = kind;
	set_target(rec, d, m);
	sl_shim_unlock(&rec->lock);
	return 0;
}

/* A new record for fd, locked, for a connection to d under m. */
static struct sl_record *new_connection(int fd, const struct sl_dest *d, const struct sl_match *m)
{
	struct sl_record *rec = sl_record_new(fd);

	if (!rec)
		return NULL;
	sl_shim_lock(&rec->lock);
	rec->fd = fd;
	rec->kind = SL_KIND_CONNECTION;
	set_target(rec, d, m);
	return rec;
}

int sl_held_open(int fd, const struct sl_dest *d, const struct sl_match *m, uint64_t conc)
{
	struct sl_record *rec = new_connection(fd, d, m);

	if (!rec)
		return -ENOSPC;
	rec->state = SL_REC_OPEN;
	rec->m.mask = 0; /* released: the connection itself holds nothing more */
	rec->conc_mask = conc;
	sl_shim_unlock(&rec->lock);
	return 0;
}

int sl_held_defer(int fd, const struct sl_dest *d, const struct sl_match *m,
                  const struct sl_pending *p, const struct sockaddr *addr, socklen_t alen)
{
	struct sl_record *rec = new_connection(fd, d, m);

	if (!rec)
		return -ENOSPC;
	rec->state = SL_REC_DEFERRED;
	rec->pend = *p;
	rec->pend.ask.m = &rec->m; /* conc_key: where its places are */
	rec->pend.ask.d = &rec->dest;
	rec->peer_len = (socklen_t)SL_MIN((size_t)alen, sizeof(rec->peer));
	memcpy(&rec->peer, addr, rec->peer_len);
	sl_kicker_note_socket(rec);
	rec->release_ns = p->at;
	if (p->phase == SL_PEND_RELEASE)
		sl_kicker_due(rec); /* made at its slot, whatever the program is doing */
	sl_epoll_withhold(rec);
	sl_shim_unlock(&rec->lock);
	return 0;
}

int sl_socket_type(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 ? type : -1;
}

int sl_fd_nonblocking(int fd)
{
	int fl = sl_real.fcntl ? sl_real.fcntl(fd, F_GETFL) : -1;

	return fl >= 0 && (fl & O_NONBLOCK);
}

static void log_go(const char *what, struct sl_record *rec);

/* Under rec->lock: a deferred connect ends refused with errno e (its max_wait, or
 * a connect that failed at once).  Places in hand go back now: a refused
 * connection must not keep others out until the program closes it. */
static void refuse_deferred(struct sl_record *rec, int e)
{
	if (rec->conc_mask && !rec->inherited)
		sl_wait_conc_put(sl_shim.shm.hdr, rec->conc_mask, &rec->m, sl_shim.pid);
	rec->conc_mask = 0;
	rec->state = SL_REC_REFUSED;
	rec->refuse_errno = e;
}

/* Under rec->lock: both places are had; the connect on fd (a descriptor of rec's
 * socket) is made - inside the release already when mk->done says so, else now.
 * It is made non-blocking whatever the program has set since (sl_connect_act), so
 * nothing waits under the lock; a blocking program's next call then waits in the
 * kernel for the connection, as it would have in connect.  Its outcome reaches the
 * program as any non-blocking connect's does. */
static void connect_now(struct sl_record *rec, struct sl_made_connect *mk)
{
	if (!mk->done)
		sl_connect_act(mk);
	if (mk->rc != 0 && mk->err != EINPROGRESS) {
		sl_debug("deferred connect on fd %d: failed (%s)", mk->fd, strerror(mk->err));
		refuse_deferred(rec, mk->err);
	} else {
		rec->state = SL_REC_OPEN;
		rec->m.mask = 0; /* released: its first write is not held again */
		if (rec->admitted_next)
			rec->first_released_ns = sl_clock_mono_ns();
	}
}

/* Under rec->lock: the deferred connect's admission stepped on at `now`, the
 * connect `mk` made inside its release when that comes.  1: go (its places are the
 * record's now), 0: not yet (release_ns moved on), -1: refused (state set). */
static int defer_step(struct sl_record *rec, int64_t now, struct sl_made_connect *mk)
{
	int rc = sl_admission_step(&rec->pend, now, sl_connect_act, mk);

	if (rc == SL_PEND_WAIT) {
		rec->release_ns = rec->pend.at;
		if (rec->pend.phase == SL_PEND_RELEASE)
			sl_kicker_due(rec);
		return 0;
	}
	sl_admission_said(&rec->pend, rc, "deferred connect");
	if (rc == SL_PEND_REFUSED) {
		refuse_deferred(rec, rec->pend.err);
		return -1;
	}
	rec->conc_mask = rec->pend.taken;
	rec->pend.taken = 0;
	return 1;
}

/* Under rec->lock: a deferred connect that is due takes what it waits for and is
 * made, or is refused.  fd is the descriptor the caller looks at (it shares rec).
 * Returns 1 when it stopped being deferred. */
int sl_held_kick_locked(struct sl_record *rec, int fd, int64_t now)
{
	struct sl_made_connect mk = {.fd = fd, .addr = (struct sockaddr *)&rec->peer, .alen = rec->peer_len};
	int saved = errno, go;

	if (rec->state != SL_REC_DEFERRED || now < rec->release_ns)
		return 0;
	go = defer_step(rec, now, &mk);
	if (go == 0) {
		errno = saved;
		return 0;
	}
	if (go > 0)
		connect_now(rec, &mk);
	sl_epoll_restore(rec);
	errno = saved;
	return 1;
}

/* Under no lock: the record fd points at, locked, or NULL. */
static struct sl_record *lock_record(int fd)
{
	for (int tries = 0; tries < 4; tries++) {
		struct sl_record *rec = sl_record_of(fd);

		if (!rec)
			return NULL;
		sl_shim_lock(&rec->lock);
		if (sl_fdtab_get(fd) == rec->index)
			return rec;
		sl_shim_unlock(&rec->lock); /* freed and reused meanwhile */
	}
	return NULL;
}

int sl_held_reconnect(int fd, int *rc)
{
	struct sl_record *rec = lock_record(fd);
	int answered = 0;

	if (!rec)
		return 0;
	if (rec->state == SL_REC_DEFERRED && rec->kind == SL_KIND_CONNECTION) {
		sl_held_kick_locked(rec, fd, sl_clock_mono_ns());
		if (rec->state == SL_REC_DEFERRED) {
			*rc = -EALREADY; /* as for a connect under way */
			answered = 1;
		}
	}
	if (rec->state == SL_REC_REFUSED && rec->kind == SL_KIND_CONNECTION) {
		/* The kernel reports a failed connect's error to the next connect once. */
		*rc = rec->so_error_read ? -ECONNABORTED : -rec->refuse_errno;
		rec->so_error_read = 1;
		answered = 1;
	}
	sl_shim_unlock(&rec->lock);
	return answered;
}

int sl_held_so_error(int fd, int *err)
{
	struct sl_record *rec = lock_record(fd);
	int answered = 0;

	if (!rec)
		return 0;
	if (rec->state == SL_REC_DEFERRED)
		sl_held_kick_locked(rec, fd, sl_clock_mono_ns());
	if (rec->state == SL_REC_DEFERRED) {
		*err = 0; /* still connecting */
		answered = 1;
	} else if (rec->state == SL_REC_REFUSED && rec->kind == SL_KIND_CONNECTION) {
		*err = rec->so_error_read ? 0 : rec->refuse_errno;
		rec->so_error_read = 1;
		answered = 1;
	}
	sl_shim_unlock(&rec->lock);
	return answered;
}

int sl_held_is_deferred(int fd)
{
	struct sl_record *rec = lock_record(fd);
	int deferred;

	if (!rec)
		return 0;
	if (rec->state == SL_REC_DEFERRED)
		sl_held_kick_locked(rec, fd, sl_clock_mono_ns());
	deferred = rec->state == SL_REC_DEFERRED;
	sl_shim_unlock(&rec->lock);
	return deferred;
}

int sl_held_shutdown(int fd, int *rc)
{
	struct sl_record *rec = lock_record(fd);
	int deferred;

	if (!rec)
		return 0;
	deferred = rec->state == SL_REC_DEFERRED;
	if (deferred) {
		/* shutdown abandons a connect under way, and succeeds; a deferred one
		 * gives its places back, and the socket is a plain unconnected one. */
		if (!rec->inherited)
			sl_pending_cancel(&rec->pend, sl_shim.shm.hdr);
		rec->state = SL_REC_OPEN;
		rec->m.mask = 0;
		sl_epoll_restore(rec);
		sl_debug("deferred connect on fd %d: shut down before its release; its place is given back", fd);
		*rc = 0;
	}
	sl_shim_unlock(&rec->lock);
	if (deferred)
		sl_held_close(fd);
	return deferred;
}

/* Under rec->lock: the place in hand was released.  The connection's own first
 * write is done with; a request it covered is admitted. */
static void went(struct sl_record *rec)
{
	if (sl_match_meets(&rec->want, &rec->rm))
		rec->admitted_next = 1;
	if (sl_match_meets(&rec->want, &rec->bm))
		rec->credit += rec->pending;
	rec->pending = 0;
	if (rec->kind == SL_KIND_CONNECTION)
		rec->m.mask = 0;
}

/* Under rec->lock, which this drops: the request went (or was refused).  A
 * connected UDP socket's record stays for its next datagram; others go. */
static void settle_and_unlock(int fd, struct sl_record *rec)
{
	struct sl_record *last;

	sl_epoll_unmask(rec);
	if (rec->kind == SL_KIND_CONNECTED_UDP || rec->conc_mask || rec->rm.mask || rec->bm.mask ||
	    rec->sig.mask) {
		/* Stays: for the next datagram, the next request, or to give back its
		 * concurrency places when the connection closes. */
		rec->state = rec->kind == SL_KIND_CONNECTED_UDP ? SL_REC_FIRST : SL_REC_OPEN;
		sl_shim_unlock(&rec->lock);
		return;
	}
	sl_shim_unlock(&rec->lock);
	last = sl_record_unlink(fd);
	if (last)
		sl_record_free(last);
}

static void log_go(const char *what, struct sl_record *rec)
{
	char dest[SL_HOST_MAX + 80], names[256];

	if (!sl_shim.debug)
		return;
	sl_dest_format(&rec->dest, dest, sizeof(dest));
	sl_admission_sections(&rec->want, names, sizeof(names));
	sl_debug("%s %s sections=%s: go waited=%.3fms slot=%lld released=%lld bytes=%llu", what, dest,
	         names, (double)(rec->pend.t.released_ns - rec->pend.t.arrival_ns) / 1e6,
	         (long long)rec->pend.t.release_ns, (long long)rec->pend.t.released_ns,
	         (unsigned long long)(sl_match_meets(&rec->want, &rec->bm) ? rec->pending : 0));
}

/* Sleep until `at` the way a blocking send would wait: a handler installed with
 * SA_RESTART lets the wait go on, one without it ends the wait with -EINTR (a futex
 * wait is restarted by the kernel exactly in the first case, which a plain
 * clock_nanosleep is not).  Ends with -EAGAIN at `timeout_at` (SO_SNDTIMEO). */
static int sleep_like_send(int64_t at, int64_t timeout_at)
{
	static uint32_t never_woken;
	int64_t until = timeout_at && timeout_at < at ? timeout_at : at;
	struct timespec ts = {.tv_sec = until / SL_NS_PER_S, .tv_nsec = until % SL_NS_PER_S};

	for (;;) {
		long rc = syscall(SYS_futex, &never_woken, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0,
		                  &ts, NULL, FUTEX_BITSET_MATCH_ANY);

		if (rc == -1 && errno == EINTR)
			return -EINTR;
		if (sl_clock_mono_ns() >= until)
			return until == at ? 0 : -EAGAIN;
		if (rc == -1 && errno != ETIMEDOUT && errno != EAGAIN)
			return sl_clock_sleep_until(until) == 0 ? (until == at ? 0 : -EAGAIN) : -EINTR;
	}
}

/* SO_SNDTIMEO as an absolute deadline from now, or 0 for none. */
static int64_t send_timeout_at(int fd)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) != 0 || (tv.tv_sec == 0 && tv.tv_usec == 0))
		return 0;
	return sl_clock_mono_ns() + tv.tv_sec * SL_NS_PER_S + tv.tv_usec * SL_NS_PER_US;
}

int sl_held_write(int fd, int dontwait)
{
	return sl_held_write_data(fd, dontwait, NULL, 0, NULL, NULL);
}

/* Under rec->lock, at a go: what the write may send, and whether to be told. */
static void go_limits(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t *limit,
                      int *track)
{
	if (limit && rec->rm.mask && iov)
		*limit = sl_stream_limit(rec, iov, iovcnt);
	if (limit && rec->bm.mask)
		*limit = SL_MIN(*limit, (size_t)SL_MIN(rec->credit, (uint64_t)SIZE_MAX));
	if (track)
		*track = (rec->rm.mask ? SL_TRACK_STREAM : 0) | (rec->bm.mask ? SL_TRACK_BYTES : 0) |
		         (sl_signals_follows_writes(rec) ? SL_TRACK_SIGNALS : 0);
}

static size_t iov_bytes(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; iov && i < iovcnt; i++)
		n += iov[i].iov_len;
	return iov ? n : SIZE_MAX; /* sendfile: as much as a piece */
}

/* meter = bytes: a write with no released bytes left needs a piece. */
static int needs_bytes(const struct sl_record *rec, const struct iovec *iov, int iovcnt)
{
	return rec->bm.mask && rec->credit == 0 && iov_bytes(iov, iovcnt) > 0;
}

/* --- the write gate: a small step per state of the record ---
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
	int64_t at; /* GATE_WAIT: until when */
	int rc;     /* GATE_DONE: the result */
};

static enum gate_step gate_done(struct gate *g, int rc)
{
	g->rc = rc;
	return GATE_DONE;
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
	sl_wait_made(sl_shim.shm.hdr, &made_pending.m, made_pending.from, sl_clock_mono_ns(), sl_shim.pid);
}

/* Released: a write goes unless it begins a request without a place (meter =
 * requests) or has no released bytes left (meter = bytes). */
static enum gate_step gate_open(struct sl_record *rec, struct gate *g)
{
	int64_t moved_from = 0;

	/* A released connection that meters and holds nothing more (its deferred
	 * connect made): its record goes. */
	if (rec->kind == SL_KIND_CONNECTION && !rec->conc_mask && !rec->rm.mask && !rec->bm.mask &&
	    !rec->sig.mask) {
		settle_and_unlock(g->fd, rec);
		return gate_done(g, 0);
	}
	/* The first request went out with this write, not at the connect that took
	 * its place: the destination sees it now. */
	if (rec->first_released_ns && rec->rm.mask) {
		int64_t now = sl_clock_mono_ns();

		sl_wait_moved(sl_shim.shm.hdr, &rec->rm, rec->first_released_ns, now, sl_shim.pid);
		rec->first_released_ns = 0;
		moved_from = now; /* and once more when the write is made */
	}
	if ((!rec->rm.mask || !sl_stream_starts(rec, g->iov, g->iovcnt)) &&
	    !needs_bytes(rec, g->iov, g->iovcnt)) {
		go_limits(rec, g->iov, g->iovcnt, g->limit, g->track);
		if (moved_from)
			move_when_made(g, moved_from, &rec->rm);
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

/* The write's admission has an answer: the write goes (what it may send worked out,
 * its release moved on to when it is made), or fails. */
static enum gate_step gate_answer(struct sl_record *rec, struct gate *g, int rc)
{
	const char *what = rec->kind != SL_KIND_CONNECTION          ? "datagram"
	                   : sl_match_meets(&rec->want, &rec->rm)   ? "request"
	                   : sl_match_meets(&rec->want, &rec->bm)   ? "bytes"
	                   : rec->m.mask                            ? "first write"
	                                                            : "write";

	if (rc == SL_PEND_REFUSED) {
		sl_admission_said(&rec->pend, rc, what);
		rec->state = SL_REC_FIRST; /* nothing is left in hand */
		settle_and_unlock(g->fd, rec);
		return gate_done(g, -rec->pend.err);
	}
	if (rec->pend.t.mask) {
		log_go(what, rec);
		if (rec->kind == SL_KIND_CONNECTION)
			move_when_made(g, rec->pend.t.released_ns, &rec->want);
	} else {
		sl_admission_said(&rec->pend, rc, what); /* observe only, no rate, a fallback */
	}
	went(rec);
	go_limits(rec, g->iov, g->iovcnt, g->limit, g->track);
	settle_and_unlock(g->fd, rec);
	return gate_done(g, 0);
}

/* Nothing reserved yet: the admission of what this write needs.  It covers the
 * connection's sections when its first write is pending (rec->m), the requests
 * sections when a request begins, and a piece of bytes when the bytes are out. */
static enum gate_step gate_first(struct sl_record *rec, struct gate *g)
{
	static const struct sl_match none; /* no sections */
	struct sl_pending_ask a;
	struct sl_match with_rm;

	sl_match_union(&with_rm, &rec->m,
	               rec->rm.mask && sl_stream_starts(rec, g->iov, g->iovcnt) ? &rec->rm : &none);
	rec->pending = 0;
	if (needs_bytes(rec, g->iov, g->iovcnt))
		rec->pending = SL_MIN((uint64_t)iov_bytes(g->iov, g->iovcnt), rec->piece_max);
	sl_match_union(&rec->want, &with_rm, rec->pending ? &rec->bm : &none);
	sl_admission_ask(&a, &rec->dest, &rec->want,
	                 rec->kind == SL_KIND_CONNECTION ? ECONNRESET : ECONNREFUSED, 0);
	a.cost = rec->pending;
	sl_pending_start(&rec->pend, sl_shim.shm.hdr, &a, sl_clock_mono_ns());
	rec->state = SL_REC_WAITING;
	rec->release_ns = 0; /* stepped at once */
	return GATE_NEXT;
}

/* An admission under way: stepped once its instant has come; the write goes once
 * it answers GO. */
static enum gate_step gate_waiting(struct sl_record *rec, struct gate *g)
{
	int64_t now = sl_clock_mono_ns();
	int rc;

	if (now >= rec->release_ns) {
		rc = sl_admission_step(&rec->pend, now, NULL, NULL);
		if (rc != SL_PEND_WAIT)
			return gate_answer(rec, g, rc);
		rec->release_ns = rec->pend.at;
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

/* GATE_WAIT: a non-blocking writer is told EAGAIN (its socket hidden from epoll
 * until due); a blocking one sleeps, as send would, and looks again.  Called with
 * rec->lock held; returns with it let go, GATE_AGAIN or GATE_DONE. */
static enum gate_step gate_hold(struct sl_record *rec, struct gate *g, int64_t *timeout_at)
{
	int rc;

	if (g->dontwait || sl_fd_nonblocking(g->fd)) {
		sl_epoll_mask(rec);
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
		if ((rec = sl_record_of(g->fd))) {
			sl_shim_lock(&rec->lock);
			if (rec->state == SL_REC_WAITING) {
				sl_pending_cancel(&rec->pend, sl_shim.shm.hdr);
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
	struct gate g = {.fd = fd, .dontwait = dontwait, .iov = iov, .iovcnt = iovcnt,
	                 .limit = limit, .track = track};
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

/* A datagram sent with its own address to a matched destination.  The fd's record
 * carries it while it waits (so a non-blocking retry finds its place, and poll and
 * epoll hide the socket meanwhile); a retry to other sections gives the place back
 * first.  A connected UDP socket sending elsewhere waits here, in place. */
int sl_held_datagram(int fd, const struct sl_dest *d, const struct sl_match *m, int dontwait)
{
	/* Twice: another thread may give fd its record between our look and ours. */
	for (int tries = 0; tries < 2; tries++) {
		struct sl_record *rec = sl_record_of(fd);

		if (!rec) {
			if (sl_held_connect(fd, d, m, SL_KIND_DATAGRAM) == 0)
				return sl_held_write(fd, dontwait);
			continue;
		}
		sl_shim_lock(&rec->lock);
		if (rec->kind != SL_KIND_DATAGRAM) {
			sl_shim_unlock(&rec->lock);
			break;
		}
		if (!sl_match_same(&rec->m, m)) {
			if (rec->state == SL_REC_WAITING)
				sl_pending_cancel(&rec->pend, sl_shim.shm.hdr);
			set_target(rec, d, m);
		}
		sl_shim_unlock(&rec->lock);
		return sl_held_write(fd, dontwait);
	}
	{
		struct sl_match own = *m;

		return sl_admission_wait(d, &own, "datagram", ECONNREFUSED);
	}
}

/* A connect failed: a connection record it made (holding concurrency places, or
 * waiting for one) goes, giving them back. */
void sl_held_drop_failed(int fd)
{
	struct sl_record *rec = sl_record_of(fd);
	int drop;

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	drop = rec->kind == SL_KIND_CONNECTION && rec->conc_mask;
	sl_shim_unlock(&rec->lock);
	if (drop)
		sl_held_close(fd);
}

/* A UDP socket connects anew (or disconnects): its old peer's record goes. */
void sl_held_drop_udp(int fd)
{
	struct sl_record *rec = sl_record_of(fd);
	int udp;

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	udp = rec->kind != SL_KIND_CONNECTION;
	sl_shim_unlock(&rec->lock);
	if (udp)
		sl_held_close(fd);
}

int64_t sl_held_due(int fd, int *deferred)
{
	struct sl_record *rec = sl_record_of(fd);
	int64_t at = 0;

	if (deferred)
		*deferred = 0;
	if (!rec)
		return 0;
	sl_shim_lock(&rec->lock);
	if (deferred && rec->state == SL_REC_DEFERRED)
		*deferred = !sl_held_kick_locked(rec, fd, sl_clock_mono_ns());
	if (rec->state == SL_REC_WAITING || rec->state == SL_REC_DEFERRED)
		at = rec->release_ns;
	sl_shim_unlock(&rec->lock);
	return at;
}

int sl_held_closing_keeps_place(int fd)
{
	struct sl_record *rec = sl_record_of(fd);
	int keeps;

	if (!rec)
		return 0;
	sl_shim_lock(&rec->lock);
	keeps = rec->conc_mask != 0;
	sl_shim_unlock(&rec->lock);
	return keeps;
}

void sl_held_close(int fd)
{
	struct sl_record *last = sl_record_unlink(fd);

	if (last)
		sl_held_finish(last);
}

void sl_held_finish(struct sl_record *last)
{
	sl_shim_lock(&last->lock);
	if ((last->state == SL_REC_WAITING || last->state == SL_REC_DEFERRED) && !last->inherited) {
		sl_pending_cancel(&last->pend, sl_shim.shm.hdr);
		if (last->state == SL_REC_DEFERRED)
			sl_debug("deferred connect on fd %d: closed before its release; its place is given back",
			         last->fd);
	}
	if (last->conc_mask && !last->inherited)
		sl_wait_conc_put(sl_shim.shm.hdr, last->conc_mask, &last->m, sl_shim.pid);
	last->conc_mask = 0;
	last->ep_withheld = 0;
	last->ep_masked = 0; /* the kernel drops the registration with the socket */
	sl_shim_unlock(&last->lock);
	sl_record_free(last);
}

/* At exit, give back the concurrency places of connections still open, rather than
 * leaving them to the daemon's next heartbeat.  A fork child's copies are the
 * parent's (inherited) and stay. */
__attribute__((destructor)) static void give_back_at_exit(void)
{
	if (atomic_load(&sl_records_active) == 0 || !sl_shim.shm.hdr || getpid() != sl_shim.pid)
		return;
	for (unsigned i = 1, high = atomic_load(&sl_records_high); i <= high; i++) {
		struct sl_record *rec = sl_record_at(i);

		if (!rec->refs || !rec->conc_mask)
			continue;
		sl_shim_lock(&rec->lock);
		if (rec->conc_mask && !rec->inherited)
			sl_wait_conc_put(sl_shim.shm.hdr, rec->conc_mask, &rec->m, sl_shim.pid);
		rec->conc_mask = 0;
		sl_shim_unlock(&rec->lock);
	}
}

void sl_held_wrote(int fd, const struct iovec *iov, int iovcnt, size_t n)
{
	struct sl_record *rec = sl_record_of(fd);

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	sl_stream_wrote(rec, iov, iovcnt, n);
	if (rec->sig.mask)
		sl_signals_wrote(rec, iov, iovcnt, n);
	rec->credit -= SL_MIN(rec->credit, (uint64_t)n);
	sl_shim_unlock(&rec->lock);
}

void sl_held_read(int fd, const struct iovec *iov, int iovcnt, size_t n)
{
	struct sl_record *rec = sl_record_of(fd);

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	if (rec->rm.mask && n)
		rec->read_since_write = 1;
	if (rec->sig.mask)
		sl_signals_read(rec, iov, iovcnt, n);
	sl_shim_unlock(&rec->lock);
}

/* The most bytes one release covers: 20 ms at the tightest bytes section's rate
 * (so a release never brings more than a burst of 20 ms), between 1 KiB and
 * 256 KiB. */
static uint64_t piece_for(const struct sl_match *bm)
{
	uint64_t piece = 256 * 1024;

	for (uint64_t bits = bm->mask; bits; bits &= bits - 1) {
		const struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, bm->idx[__builtin_ctzll(bits)]);
		const struct sl_spec *sp;
		unsigned __int128 p;

		if (!sec)
			continue;
		sp = &sec->spec;
		if (!sp->amount || sp->window_ns <= 0)
			continue;
		p = (unsigned __int128)sp->amount * (20 * SL_NS_PER_MS) / (uint64_t)sp->window_ns;
		piece = SL_MIN(piece, (uint64_t)SL_MAX(p, (unsigned __int128)1024));
	}
	return piece;
}

int sl_held_stream(int fd, const struct sl_dest *d, const struct sl_match *rm,
                   const struct sl_match *bm, int first_admitted)
{
	struct sl_record *rec = sl_record_of(fd);

	if (!rec) {
		if (sl_held_open(fd, d, rm->mask ? rm : bm, 0) < 0)
			return -ENOSPC;
		if (!(rec = sl_record_of(fd)))
			return -ENOSPC;
	}
	sl_shim_lock(&rec->lock);
	rec->admitted_next = first_admitted && rm->mask;
	rec->first_at_connect = rec->admitted_next;
	rec->first_released_ns = rec->admitted_next && rec->state == SL_REC_OPEN ? sl_clock_mono_ns() : 0;
	rec->rm = *rm;
	sl_http1_init(&rec->h1);
	rec->bm = *bm;
	rec->credit = 0;
	rec->piece_max = piece_for(bm);
	sl_shim_unlock(&rec->lock);
	return 0;
}
