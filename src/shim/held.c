/*
 * Held sockets (docs/design.md, "Send paths and event loops"): the life of a
 * record, and deferred connects.  A matched non-blocking connect() whose place is
 * not due is deferred: the program sees EINPROGRESS, the real connect is made at
 * the release (by the kicker, or whichever hook looks at the socket first: poll,
 * select, epoll, a write, connect again), and until then the socket shows no
 * events, so the destination sees connection attempts at the rate and no
 * connection sits open and silent while it waits.  A happy-eyeballs loser closed
 * before its release gives its place back.  Writes are held in gate.c.
 */
#include "answers.h"
#include "connect.h"
#include "drain.h"
#include "epoll.h"
#include "fdtab.h"
#include "gate.h"
#include "held.h"
#include "firstbox.h"
#include "h2box.h"
#include "inflight.h"
#include "record.h"
#include "stream.h"
#include "kicker.h"
#include "sluice/clock.h"
#include "sluice/limiter.h"
#include "sluice/pending.h"
#include "sluice/say.h"
#include "sluice/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Under rec->lock: what the next write is to be held for - d, under m's sections
 * (its own place, SL_USE_CONN).  The name is kept where keys or debug lines need
 * it.  0, or -ENOMEM. */
int sl_held_set_target(struct sl_record *rec, const struct sl_dest *d, const struct sl_match *m)
{
	rec->state = SL_REC_FIRST;
	if (rec->sects) {
		sl_slab_free(rec->sects, rec->sects->size);
		rec->sects = NULL;
	}
	sl_rec_set_dest(rec, d, (m->keyed & m->mask) || sl_shim.debug);
	return sl_rec_add_sects(rec, m, SL_USE_CONN);
}

/* A new record for fd, locked, of `kind`, for d under m; NULL when none can be had. */
static struct sl_record *new_record(int fd, const struct sl_dest *d, const struct sl_match *m, int kind)
{
	struct sl_record *rec = sl_record_new(fd);

	if (!rec)
		return NULL;
	sl_shim_lock(&rec->lock);
	rec->fd = fd;
	rec->kind = (uint8_t)kind;
	if (sl_held_set_target(rec, d, m) < 0) {
		sl_shim_unlock(&rec->lock);
		sl_held_close(fd);
		return NULL;
	}
	return rec;
}

int sl_held_connect(int fd, const struct sl_dest *d, const struct sl_match *m, int kind)
{
	struct sl_record *rec = new_record(fd, d, m, kind);

	if (!rec)
		return -ENOSPC;
	sl_shim_unlock(&rec->lock);
	return 0;
}

/* Positions of m (those in `mask`) as rec numbers them. */
static uint64_t rec_positions(const struct sl_record *rec, const struct sl_match *m, uint64_t mask)
{
	struct sl_match part = *m;

	part.mask = mask & m->mask;
	return sl_rec_positions(rec, &part);
}

int sl_held_open(int fd, const struct sl_dest *d, const struct sl_match *m, uint64_t conc)
{
	struct sl_record *rec = new_record(fd, d, m, SL_KIND_CONNECTION);

	if (!rec)
		return -ENOSPC;
	rec->state = SL_REC_OPEN;
	sl_rec_drop_use(rec, SL_USE_CONN); /* released: it holds nothing more itself */
	sl_rec_set_places(rec, rec_positions(rec, m, conc));
	sl_shim_unlock(&rec->lock);
	return 0;
}

/* Whether rec numbers m's positions as m does (a ticket reserved with m can then
 * be stepped on with rec's sections). */
static int same_positions(const struct sl_record *rec, const struct sl_match *m)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);

		if (k >= rec->sects->n || rec->sects->e[k].idx != m->idx[k])
			return 0;
	}
	return 1;
}

int sl_held_defer(int fd, const struct sl_dest *d, const struct sl_match *m,
                  const struct sl_pending *p, const struct sockaddr *addr, socklen_t alen)
{
	struct sl_record *rec = new_record(fd, d, m, SL_KIND_CONNECTION);
	struct sl_rec_wait *w;
	unsigned room;

	if (!rec)
		return -ENOSPC;
	if (!same_positions(rec, m) || !(w = sl_rec_wait_begin(rec, m->mask))) {
		sl_shim_unlock(&rec->lock);
		sl_held_close(fd);
		return -ENOSPC;
	}
	room = sl_rec_wait_room(rec);
	memcpy(&w->pend, p, SL_PENDING_SIZE(room));
	w->pend.ask.room = room;
	w->pend.ask.m = NULL; /* pointed at its sections at each step */
	w->pend.ask.d = NULL;
	rec->state = SL_REC_DEFERRED;
	w->peer_len = (socklen_t)SL_MIN((size_t)alen, sizeof(w->peer));
	memcpy(&w->peer, addr, w->peer_len);
	sl_kicker_note_socket(rec);
	rec->release_ns = p->at;
	if (p->phase == SL_PEND_RELEASE)
		sl_kicker_due(rec); /* made at its slot, whatever the program is doing */
	sl_epoll_withhold(rec);
	sl_shim_unlock(&rec->lock);
	return 0;
}

/* Positions of m in `bits` as rec numbers them (its sections by index). */
static uint64_t rec_bits(const struct sl_record *rec, const struct sl_match *m, uint64_t bits)
{
	struct sl_match part = *m;

	part.mask = bits & m->mask;
	return part.mask ? sl_rec_positions(rec, &part) : 0;
}

/* After a step of rec's admission: it may have matched its destination anew (a
 * reload; or the stand-in's sections left for the served segment's, alike but
 * for their serials, attach.c) and taken places with that match.  rec learns
 * those sections, and the admission's positions follow rec's numbering, so the
 * next step, and the give-back at close, name the sections the places are in: a
 * place given back under a stale serial was lost, counted open while the
 * program lived (every other connect waited for it).  With no memory to learn
 * them, nothing changes: at worst a place kept too long, never one counted
 * free.  m is then made anew from rec, as the caller's next look expects. */
static void learn_match(struct sl_record *rec, struct sl_pending *p, struct sl_match *m)
{
	struct sl_match had;
	int same;

	sl_rec_match_mask(rec, rec->wait->want, &had);
	same = had.mask == m->mask;
	for (uint64_t bits = m->mask; same && bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);

		same = had.idx[k] == m->idx[k] && had.serial[k] == m->serial[k];
	}
	if (same || sl_rec_add_sects(rec, m, 0) < 0)
		return;
	p->taken = rec_bits(rec, m, p->taken);
	p->conc = rec_bits(rec, m, p->conc);
	rec->wait->want = rec_bits(rec, m, m->mask);
	sl_rec_match_mask(rec, rec->wait->want, m);
}

int sl_held_step(struct sl_record *rec, struct sl_match *m, struct sl_dest *d, int64_t now, sl_act_fn act,
                 void *arg)
{
	struct sl_pending *p = &rec->wait->pend;
	int rc;

	sl_rec_match_mask(rec, rec->wait->want, m);
	p->ask.m = m;
	p->ask.d = sl_rec_dest(rec, d);
	rc = sl_admission_step(p, now, act, arg);
	sl_rec_keep_keys(rec, m); /* places taken in keyed sections: their keys */
	learn_match(rec, p, m);
	return rc;
}

void sl_held_cancel(struct sl_record *rec)
{
	struct sl_match m;

	if (!rec->wait || rec->inherited)
		return; /* a fork child's copy: the parent owns what it holds */
	sl_rec_match_mask(rec, rec->wait->want, &m);
	rec->wait->pend.ask.m = &m;
	rec->wait->pend.ask.d = NULL;
	sl_pending_cancel(&rec->wait->pend, sl_shim.shm.hdr);
	rec->wait->pend.ask.m = NULL;
}

void sl_held_put_places(struct sl_record *rec)
{
	uint64_t places = sl_rec_places(rec);
	struct sl_match m;

	sl_inflight_put_all(rec);
	if (places && !rec->inherited) {
		sl_rec_match_mask(rec, places, &m);
		sl_shim_give_back(places, &m);
	}
	sl_rec_set_places(rec, 0);
}

int sl_socket_type(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return sl_real_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 ? type : -1;
}

int sl_fd_nonblocking(int fd)
{
	int fl = sl_real.fcntl ? sl_real.fcntl(fd, F_GETFL) : -1;

	return fl >= 0 && (fl & O_NONBLOCK);
}

/* Under rec->lock: a deferred connect ends refused with errno e (its max_wait, or
 * a connect that failed at once).  Places in hand go back now: a refused
 * connection must not keep others out until the program closes it. */
static void refuse_deferred(struct sl_record *rec, int e)
{
	sl_held_put_places(rec);
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
		return;
	}
	rec->state = SL_REC_OPEN;
	sl_rec_drop_use(rec, SL_USE_CONN); /* released: its first write is not held again */
	sl_refund_released(rec, mk->released_ns, 1);
	if (rec->stream && rec->stream->admitted_next)
		rec->stream->first_released_ns = sl_clock_mono_ns();
}

/* Under rec->lock: the deferred connect's admission stepped on at `now`, the
 * connect `mk` made inside its release when that comes.  1: go (its places are the
 * record's now), 0: not yet (release_ns moved on), -1: refused (state set). */
static int defer_step(struct sl_record *rec, int64_t now, struct sl_made_connect *mk)
{
	struct sl_pending *p = &rec->wait->pend;
	struct sl_match m;
	struct sl_dest d;
	int rc = sl_held_step(rec, &m, &d, now, sl_connect_act, mk);

	if (rc == SL_PEND_WAIT) {
		rec->release_ns = p->at;
		if (p->phase == SL_PEND_RELEASE)
			sl_kicker_due(rec);
		return 0;
	}
	sl_admission_said(p, rc, "deferred connect");
	if (rc == SL_PEND_REFUSED) {
		refuse_deferred(rec, p->err);
		return -1;
	}
	sl_rec_set_places(rec, p->taken);
	p->taken = 0;
	sl_inflight_from_connect(rec); /* its first request's places are that request's */
	mk->released_ns = p->t.mask ? p->t.released_ns : 0;
	return 1;
}

/* Under rec->lock: a deferred connect that is due takes what it waits for and is
 * made, or is refused.  fd is the descriptor the caller looks at (it shares rec).
 * Returns 1 when it stopped being deferred. */
int sl_held_kick_locked(struct sl_record *rec, int fd, int64_t now)
{
	struct sl_made_connect mk = {.fd = fd};
	int saved = errno, go;

	if (rec->state != SL_REC_DEFERRED || now < rec->release_ns || !rec->wait)
		return 0;
	mk.addr = &rec->wait->peer.sa;
	mk.alen = rec->wait->peer_len;
	go = defer_step(rec, now, &mk);
	if (go == 0) {
		errno = saved;
		return 0;
	}
	if (go > 0)
		connect_now(rec, &mk);
	sl_epoll_restore(rec);
	/* Made: its first write keeps the first writes' line of the sections (gate.c,
	 * first_write_due), so the waiting part stays until then, for the ticket that
	 * names them.  A connection whose requests or bytes are metered has its writes
	 * spaced by those; one holding a concurrency place is closed by a path of its
	 * own (fds.c), and keeps none. */
	if (go > 0 && rec->state == SL_REC_OPEN && rec->kind == SL_KIND_CONNECTION && rec->wait->pend.t.mask &&
	    !sl_rec_mask(rec, SL_USE_REQ | SL_USE_BYTES) && !sl_rec_places(rec)) {
		rec->wait->first_line = 1;
		rec->release_ns = 0;
	} else {
		sl_rec_wait_end(rec);
	}
	errno = saved;
	return 1;
}

/* Under no lock: the record fd points at, locked, or NULL. */
struct sl_record *sl_held_lock_record(int fd)
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
	struct sl_record *rec = sl_held_lock_record(fd);
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
	struct sl_record *rec = sl_held_lock_record(fd);
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
	struct sl_record *rec = sl_held_lock_record(fd);
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
	struct sl_record *rec = sl_held_lock_record(fd);
	int deferred;

	if (!rec)
		return 0;
	if (sl_firstbox_holds(rec) && !rec->inherited)
		sl_firstbox_flush(rec, fd); /* the first write before the FIN (firstbox.h) */
	deferred = rec->state == SL_REC_DEFERRED;
	if (deferred) {
		/* shutdown abandons a connect under way, and succeeds; a deferred one
		 * gives its places back, and the socket is a plain unconnected one. */
		sl_held_cancel(rec);
		rec->state = SL_REC_OPEN;
		sl_rec_drop_use(rec, SL_USE_CONN);
		sl_epoll_restore(rec);
		sl_rec_wait_end(rec);
		sl_debug("deferred connect on fd %d: shut down before its release; its place is given back", fd);
		*rc = 0;
	}
	sl_shim_unlock(&rec->lock);
	if (deferred)
		sl_held_close(fd);
	return deferred;
}

/* A datagram sent with its own address to a matched destination.  The fd's record
 * carries it while it waits (so a non-blocking retry finds its place, and poll and
 * epoll hide the socket meanwhile); a retry to other sections gives the place back
 * first.  A connected UDP socket sending elsewhere waits here, in place. */
int sl_held_datagram(int fd, const struct sl_dest *d, const struct sl_match *m, int dontwait, int *track)
{
	/* Twice: another thread may give fd its record between our look and ours. */
	for (int tries = 0; tries < 2; tries++) {
		struct sl_record *rec = sl_record_of(fd);
		struct sl_match own;

		if (!rec) {
			if (sl_held_connect(fd, d, m, SL_KIND_DATAGRAM) == 0)
				return sl_held_write_data(fd, dontwait, NULL, 0, NULL, track);
			continue;
		}
		sl_shim_lock(&rec->lock);
		if (rec->kind != SL_KIND_DATAGRAM) {
			sl_shim_unlock(&rec->lock);
			break;
		}
		sl_rec_match(rec, SL_USE_CONN, &own);
		if (!sl_match_same(&own, m) || !same_positions(rec, m)) {
			if (rec->state == SL_REC_WAITING) {
				sl_held_cancel(rec);
				sl_epoll_unmask(rec);
				sl_rec_wait_end(rec);
			}
			if (sl_held_set_target(rec, d, m) < 0) {
				sl_shim_unlock(&rec->lock);
				sl_held_close(fd);
				break;
			}
		}
		sl_shim_unlock(&rec->lock);
		return sl_held_write_data(fd, dontwait, NULL, 0, NULL, track);
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
	drop = rec->kind == SL_KIND_CONNECTION && sl_rec_places(rec);
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
	/* A first write told EAGAIN until its slot (gate.c, first_write): the socket
	 * shows not writable until then, or the program's poll would spin on it. */
	if (rec->state == SL_REC_OPEN && rec->wait && rec->wait->first_line && (rec->retry & SL_RETRY_TOLD))
		at = rec->release_ns;
	rec->retry &= (uint8_t)~SL_RETRY_TOLD; /* the program waits on it (poll.c) */
	if (deferred && rec->state == SL_REC_DEFERRED)
		*deferred = !sl_held_kick_locked(rec, fd, sl_clock_mono_ns());
	if ((rec->state == SL_REC_WAITING || rec->state == SL_REC_DEFERRED) &&
	    !(sl_h2box_of(rec) && !sl_h2box_full(rec))) /* a box with room takes writes */
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
	keeps = sl_rec_places(rec) != 0;
	sl_shim_unlock(&rec->lock);
	return keeps;
}

/* A first write still kept (firstbox.h) goes before its socket's last fd closes
 * or the socket is shut down, at once: the program wrote it before. */
static void first_out(int fd)
{
	struct sl_record *rec = sl_held_lock_record(fd);

	if (!rec)
		return;
	if (sl_firstbox_holds(rec) && !rec->inherited && rec->refs <= 1)
		sl_firstbox_flush(rec, fd);
	sl_shim_unlock(&rec->lock);
}

void sl_held_close(int fd)
{
	struct sl_record *last;

	first_out(fd);
	last = sl_record_unlink(fd);

	if (last)
		sl_held_finish(last);
}

void sl_held_first_request_places(int fd)
{
	struct sl_record *rec = sl_record_of(fd);

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	sl_inflight_from_connect(rec);
	sl_shim_unlock(&rec->lock);
}

void sl_held_finish(struct sl_record *last)
{
	sl_shim_lock(&last->lock);
	if (last->state == SL_REC_WAITING || last->state == SL_REC_DEFERRED) {
		sl_held_cancel(last);
		if (last->state == SL_REC_DEFERRED && !last->inherited)
			sl_debug("deferred connect on fd %d: closed before its release; its place is given back",
			         last->fd);
	}
	sl_held_put_places(last);
	sl_shim_unlock(&last->lock);
	sl_record_free(last);
}

/* At exit, give back the concurrency places of connections still open, rather than
 * leaving them to the daemon's next heartbeat.  A fork child's copies are the
 * parent's (inherited) and stay. */
__attribute__((destructor)) static void give_back_at_exit(void)
{
	sl_say_sums(); /* `sluice run`'s summary: this process's last holds */
	if (atomic_load(&sl_records_active) == 0 || !sl_shim.shm.hdr || getpid() != sl_shim.pid)
		return;
	for (unsigned i = 1, high = atomic_load(&sl_records_high); i <= high; i++) {
		struct sl_record *rec = sl_record_at(i);

		/* refs is read unlocked only to skip free records; the places are read
		 * under the lock - they live in the record's sections part, which another
		 * thread may be replacing (sl_rec_add_sects) or freeing. */
		if (!rec->refs)
			continue;
		sl_shim_lock(&rec->lock);
		if (rec->refs && (sl_rec_places(rec) || (rec->stream && rec->stream->inflight)))
			sl_held_put_places(rec);
		sl_shim_unlock(&rec->lock);
	}
}

/* The largest piece: the smallest of the bytes sections that apply
 * (sl_bytes_piece: 20 ms of the rate, 1 KiB to 256 KiB), so a release never brings
 * more than one piece of any of them.  What a release reserves is less (gate.c,
 * piece_size). */
static uint64_t piece_for(const struct sl_match *bm)
{
	uint64_t piece = SL_BYTES_PIECE_MAX;

	for (uint64_t bits = bm->mask; bits; bits &= bits - 1) {
		const struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, bm->idx[__builtin_ctzll(bits)]);

		if (sec && sec->spec.amount && sec->spec.window_ns > 0)
			piece = SL_MIN(piece, sl_bytes_piece(&sec->spec));
	}
	return piece;
}

/* Under rec->lock: m's sections added for `use`, with the destination's name
 * kept when they are the first keyed ones.  0, or -ENOMEM. */
int sl_held_add_sects(struct sl_record *rec, const struct sl_dest *d, const struct sl_match *m,
                      unsigned use)
{
	if ((m->keyed & m->mask) && !rec->dest.name && d->name && d->name_len)
		sl_rec_set_dest(rec, d, 1);
	return sl_rec_add_sects(rec, m, use);
}

int sl_held_stream(int fd, const struct sl_dest *d, const struct sl_match *rm,
                   const struct sl_match *bm, int first_admitted)
{
	struct sl_record *rec = sl_record_of(fd);
	struct sl_rec_stream *st;
	int rc = 0;

	if (!rec) {
		if (sl_held_open(fd, d, rm->mask ? rm : bm, 0) < 0)
			return -ENOSPC;
		if (!(rec = sl_record_of(fd)))
			return -ENOSPC;
	}
	sl_shim_lock(&rec->lock);
	if (sl_held_add_sects(rec, d, rm, SL_USE_REQ) < 0 || sl_held_add_sects(rec, d, bm, SL_USE_BYTES) < 0 ||
	    !(st = sl_rec_stream_part(rec)) || (rm->mask && sl_talk_begin(rec) < 0)) {
		/* No memory for what it would follow: its requests and bytes go as they
		 * are (said by the caller), the rest of the record stands. */
		sl_rec_drop_use(rec, SL_USE_REQ | SL_USE_BYTES);
		rc = -ENOSPC;
	} else {
		st->admitted_next = first_admitted && rm->mask;
		st->first_at_connect = st->admitted_next;
		st->first_released_ns = st->admitted_next && rec->state == SL_REC_OPEN ? sl_clock_mono_ns() : 0;
		st->credit = 0;
		st->piece_max = piece_for(bm);
		st->drain = bm->mask && sl_drain_arm(fd);
		st->stuck = st->tail = st->late_ns = 0;
	}
	sl_shim_unlock(&rec->lock);
	return rc;
}

void sl_held_wrote(int fd, const struct iovec *iov, int iovcnt, size_t n, int64_t took_ns)
{
	struct sl_record *rec = sl_record_of(fd);
	struct sl_rec_stream *st;

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	if (n) {
		sl_stream_wrote(rec, iov, iovcnt, n);
		if (sl_rec_mask(rec, SL_USE_SIG))
			sl_signals_wrote(rec, iov, iovcnt, n);
	}
	if ((st = rec->stream) && n) {
		st->credit -= SL_MIN(st->credit, (uint64_t)n);
		/* A piece written out: what of it the kernel still holds is looked at
		 * again when the next piece is due (drain.h). */
		if (st->credit == 0 && st->drain && sl_rec_mask(rec, SL_USE_BYTES) &&
		    (st->tail = sl_drain_queued(fd)))
			st->tail_ns = sl_clock_mono_ns();
	}
	if (st && took_ns >= 0 && st->drain && sl_rec_mask(rec, SL_USE_BYTES)) {
		/* Refused: what waits unsent leaves when the program next finds the
		 * socket writable.  Taken, but only after longer than its own time at
		 * the rate: it all left as the call returned, that late. */
		uint64_t late = n == 0 ? sl_drain_queued(fd)
		                : took_ns > sl_drain_time_ns(rec, n) ? n : 0;

		st->stuck = (uint32_t)SL_MIN(SL_MAX((uint64_t)st->stuck, late), (uint64_t)UINT32_MAX);
	}
	sl_shim_unlock(&rec->lock);
}

void sl_held_read(int fd, const struct iovec *iov, int iovcnt, size_t n)
{
	struct sl_record *rec = sl_record_of(fd);

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	if (rec->stream && n && sl_rec_mask(rec, SL_USE_REQ))
		rec->stream->read_since_write = 1;
	if (sl_rec_mask(rec, SL_USE_SIG))
		sl_signals_read(rec, iov, iovcnt, n);
	/* Answers that cannot be followed to their end: a read with data ends a
	 * request's turn (inflight.h). */
	if (n && rec->stream && rec->stream->inflight && !sl_signals_follow_ends(rec))
		sl_inflight_turn(rec);
	sl_shim_unlock(&rec->lock);
}
