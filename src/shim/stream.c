/*
 * meter = requests (docs/design.md, "Send paths and event loops"): where requests begin
 * in a connection's outgoing stream.  A plaintext HTTP/1.x connection is followed message
 * by message (proto/http1.c): each request message is one request, and a write that
 * carries the end of one and the start of the next is cut at the boundary (a short write,
 * which every program that writes to sockets handles), so the next can be held before any
 * of its bytes go.  HTTP/2 (its plaintext preface, an Upgrade to h2c, or h2 chosen
 * through libssl) is followed frame by frame (proto/http2.c, h2.c): each HEADERS that
 * opens a stream is a request, and a write is cut before the next one (docs/design.md,
 * "HTTP/2 request by request").  Anything else - TLS not through libssl, another
 * protocol, HTTP the parsers cannot follow - counts turns: the first write, and every
 * write after a read that returned data; TLS offering h2 not through libssl counts
 * once, for the whole connection.  Bytes are only read here, never changed or
 * reordered.  Every function runs under the record's lock.
 */
#include "fdtab.h"
#include "h2.h"
#include "record.h"
#include "stream.h"
#include "tls.h"
#include "sluice/http2.h"
#include "sluice/sniff.h"

#include <stdint.h>

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* The first non-empty piece of the write, to tell HTTP/1, HTTP/2 and the rest
 * apart.  Over TLS the protocol is known only once libssl's plaintext shows it
 * (sl_stream_tls_write); a ClientHello offering h2 not made through libssl counts
 * the whole connection as one request, since its streams cannot be seen and a held
 * turn would be an EAGAIN where an HTTP/2 client expects none.  docs/design.md says
 * what that costs in accuracy. */
static void decide(struct sl_record *rec, struct sl_rec_stream *st, const struct iovec *iov, int iovcnt)
{
	for (int i = 0; i < iovcnt; i++) {
		const char *why;
		size_t n = iov[i].iov_len;
		const void *p = iov[i].iov_base;

		if (!n || !p)
			continue;
		if (sl_sniff_is_tls(p, n) && sl_tls_call) {
			/* Through libssl: the plaintext will say where requests begin. */
			st->mode = sl_sniff_tls_offers_h2(p, n) ? SL_STREAM_CONNECTION : SL_STREAM_TLS_HTTP1;
			why = st->mode == SL_STREAM_TLS_HTTP1
			      ? "TLS through libssl: HTTP/1 requests found in SSL_write's plaintext"
			      : "TLS through libssl offering HTTP/2: the protocol chosen decides (SSL_write's plaintext)";
		} else if (sl_sniff_h2_preface(p, n)) {
			if (sl_h2_begin(rec, SL_H2_AT_PREFACE, sl_rec_mask(rec, SL_USE_SIG) != 0) == 0) {
				st->mode = SL_STREAM_H2;
				why = "HTTP/2 (prior-knowledge preface): each stream a request";
			} else {
				st->mode = SL_STREAM_CONNECTION;
				why = "HTTP/2, no memory to follow its frames: the connection counts as one request";
			}
		} else if (sl_sniff_tls_offers_h2(p, n)) {
			st->mode = SL_STREAM_CONNECTION;
			why = "TLS offering HTTP/2 not through libssl: the connection counts as one request, shaped "
			      "at its connect; its writes are never held";
		} else if (sl_http1_looks_like(p, n)) {
			st->mode = SL_STREAM_HTTP1;
			why = "HTTP/1 messages";
		} else {
			st->mode = SL_STREAM_TURNS;
			why = "not HTTP/1: counting turns";
		}
		sl_debug("requests on fd %d: %s", rec->fd, why);
		return;
	}
}

/* HTTP/2 that cannot be followed is not a "go" for what comes after: an Upgrade
 * the server did not take goes on in HTTP/1, parsed afresh; anything else counts
 * turns, as HTTP/1 the parser loses does.  Its frame part goes (its answers are
 * HTTP/1's then, or not followed). */
static void h2_lost(struct sl_record *rec, struct sl_rec_stream *st, const struct iovec *iov, int iovcnt,
                    const char *why)
{
	struct sl_rec_lines scratch, *l;
	size_t n = 0;
	const void *first = sl_iov_first(iov, iovcnt, &n);

	sl_h2_free(rec);
	if (first && sl_http1_looks_like(first, n) && (l = sl_talk_open(rec, &scratch))) {
		sl_http1_init(&l->h1);
		sl_talk_close(rec, l);
		st->mode = SL_STREAM_HTTP1;
		sl_debug("requests on fd %d: not HTTP/2 after all (%s): HTTP/1 messages from here", rec->fd, why);
		return;
	}
	st->mode = SL_STREAM_TURNS;
	sl_debug("requests on fd %d: HTTP/2 not followed from here (%s): counting turns", rec->fd, why);
}

/* The stream part of a record that meters requests, or NULL. */
static struct sl_rec_stream *requests(struct sl_record *rec)
{
	return rec->stream && sl_rec_mask(rec, SL_USE_REQ) ? rec->stream : NULL;
}

int sl_stream_starts(struct sl_record *rec, const struct iovec *iov, int iovcnt)
{
	size_t total = iov ? iov_total(iov, iovcnt) : 1; /* sendfile: some bytes */
	struct sl_rec_stream *st = requests(rec);

	if (!st || total == 0)
		return 0;
	if (st->mode == SL_STREAM_UNDECIDED) {
		if (!iov)
			st->mode = SL_STREAM_TURNS; /* its first bytes come from a file */
		else
			decide(rec, st, iov, iovcnt);
	}
	if (st->mode == SL_STREAM_H2 && iov && sl_h2_of(rec) && sl_h2_of(rec)->out.state == SL_H2_PREFACE) {
		size_t n = 0;
		const void *first = sl_iov_first(iov, iovcnt, &n);

		if (first && !sl_sniff_h2_preface(first, n))
			h2_lost(rec, st, iov, iovcnt, "the Upgrade was not taken");
	}
	if (st->admitted_next)
		return 0;
	switch (st->mode) {
	case SL_STREAM_HTTP1:
		return sl_talk_h1_state(rec) == SL_H1_IDLE;
	case SL_STREAM_H2: /* a new stream's HEADERS first (one later in it is cut off) */
		return iov && sl_h2_of(rec) && sl_h2_cut(sl_h2_of(rec), iov, iovcnt, 0) == 0;
	case SL_STREAM_CONNECTION:
		return !st->wrote_any; /* named by this write: its one place */
	case SL_STREAM_TLS_HTTP1:
	case SL_STREAM_TLS_H2:
		return st->tls_start; /* the handshake's writes take none */
	default:
		return !st->wrote_any || st->read_since_write;
	}
}

size_t sl_stream_limit(struct sl_record *rec, const struct iovec *iov, int iovcnt, int placed)
{
	struct sl_rec_stream *st = requests(rec);
	struct sl_rec_lines scratch, *l;
	struct sl_http1 copy;
	size_t n = 0;

	if (st && st->mode == SL_STREAM_H2 && iov && sl_h2_of(rec))
		return sl_h2_cut(sl_h2_of(rec), iov, iovcnt, placed ? 1 : 0);
	if (!st || st->mode != SL_STREAM_HTTP1 || sl_talk_h1_state(rec) == SL_H1_LOST ||
	    !(l = sl_talk_open(rec, &scratch)))
		return SIZE_MAX;
	copy = l->h1; /* only looked at: the talk stays as it was */
	if (!iov) /* sendfile: a body may go, not beyond it */
		return copy.state == SL_H1_BODY || copy.state == SL_H1_CHUNK_DATA
		       ? (size_t)SL_MIN(copy.left, (uint64_t)SIZE_MAX) : SIZE_MAX;
	for (int i = 0; i < iovcnt; i++) {
		size_t got;

		if (!iov[i].iov_len)
			continue;
		/* Reaching the end of the request with bytes still to come: cut here. */
		if (n > 0 && copy.state == SL_H1_IDLE)
			return n;
		got = sl_http1_feed(&copy, iov[i].iov_base, iov[i].iov_len);
		n += got;
		if (got < iov[i].iov_len)
			return n;
	}
	return SIZE_MAX;
}

void sl_stream_h2_named(int fd)
{
	struct sl_record *rec = sl_record_of(fd);
	struct sl_rec_stream *st;

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	if ((st = requests(rec)) && st->mode == SL_STREAM_UNDECIDED && sl_talk_begin(rec) == 0 &&
	    sl_h2_begin(rec, SL_H2_AFTER_PREFACE, sl_rec_mask(rec, SL_USE_SIG) != 0) == 0) {
		st->mode = SL_STREAM_H2;
		sl_debug("requests on fd %d: HTTP/2 named by its :authority: each stream a request", fd);
	}
	sl_shim_unlock(&rec->lock);
}

int sl_stream_waits_inside(const struct sl_record *rec)
{
	const struct sl_rec_stream *st = rec->stream;
	const struct sl_rec_h2 *h = sl_h2_of(rec);

	if (!st || !h || !h->wait_inside)
		return 0;
	/* through libssl: only the socket write that begins a request is held */
	return st->mode == SL_STREAM_H2 || (st->mode == SL_STREAM_TLS_H2 && st->tls_start);
}

int sl_stream_carries_first(struct sl_record *rec, const struct iovec *iov, int iovcnt)
{
	struct sl_rec_stream *st = rec->stream;

	if (sl_tls_in_call(rec->fd))
		return st && st->tls_start;
	if (st && st->mode == SL_STREAM_UNDECIDED && iov)
		decide(rec, st, iov, iovcnt);
	if (st && st->mode == SL_STREAM_H2 && iov && sl_h2_of(rec))
		return sl_h2_cut(sl_h2_of(rec), iov, iovcnt, 0) != SIZE_MAX;
	return 1;
}

/* The HTTP/1 parser gave up on the connection: turns from here. */
static void lost(struct sl_record *rec, struct sl_rec_stream *st, const struct sl_http1 *h1, const char *inside)
{
	sl_debug("requests on fd %d: cannot follow HTTP/1%s (%s): counting turns from here", rec->fd, inside,
	         h1->why ? h1->why : "?");
	st->mode = SL_STREAM_TURNS;
}

/* HTTP/2 written: a stream opened used the place taken for it. */
static void h2_wrote(struct sl_record *rec, struct sl_rec_stream *st, const struct iovec *iov, int iovcnt,
                     size_t n)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);

	st->wrote_any = 1;
	if (h && iov && sl_h2_wrote(h, iov, iovcnt, n))
		st->admitted_next = 0;
	if (!h || !iov || h->out.state == SL_H2_LOST) {
		st->read_since_write = 0;
		h2_lost(rec, st, NULL, 0, !iov ? "bytes sent from a file" : h && h->out.why ? h->out.why : "?");
	}
}

void sl_stream_wrote(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n)
{
	struct sl_rec_stream *st = requests(rec);
	struct sl_rec_lines scratch, *l;

	if (!st || n == 0)
		return;
	if (st->mode == SL_STREAM_TLS_HTTP1 || st->mode == SL_STREAM_TLS_H2) {
		/* Ciphertext: only the write that began a request used its place. */
		if (st->tls_start) {
			st->admitted_next = st->tls_start = 0;
			st->tls_went = 1;
		}
		st->wrote_any = 1;
		return;
	}
	if (st->mode == SL_STREAM_H2) {
		h2_wrote(rec, st, iov, iovcnt, n);
		return;
	}
	st->wrote_any = 1;
	st->read_since_write = 0;
	st->admitted_next = 0;
	if (st->mode != SL_STREAM_HTTP1 || !(l = sl_talk_open(rec, &scratch)))
		return;
	if (!iov)
		sl_http1_skip(&l->h1, n);
	for (int i = 0; iov && i < iovcnt && n > 0; i++) {
		size_t take = SL_MIN(iov[i].iov_len, n), off = 0;

		/* Without a cut (a call the shim could not limit), a boundary may
		 * fall inside: the parser goes on past it. */
		while (off < take)
			off += sl_http1_feed(&l->h1, (const char *)iov[i].iov_base + off, take - off);
		n -= take;
	}
	if (l->h1.state == SL_H1_LOST && sl_http1_upgrade_h2c(&l->h1) &&
	    sl_h2_begin(rec, SL_H2_UPGRADED, sl_rec_mask(rec, SL_USE_SIG) != 0) == 0)
		st->mode = SL_STREAM_H2; /* HTTP/2 if the server agrees; else lost there */
	else if (l->h1.state == SL_H1_LOST)
		lost(rec, st, &l->h1, "");
	sl_talk_close(rec, l);
}

/* HTTP/2 through libssl, before an SSL_write: whether it begins a request, and how
 * much of it may go - up to the next new stream's HEADERS after the first, which
 * the next SSL_write carries (callers of SSL_write take a short count, as curl's
 * and python's do: their h2 libraries write the rest). */
static size_t tls_h2_write(struct sl_record *rec, struct sl_rec_stream *st, const void *buf, size_t n)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);
	struct iovec one = {(void *)(uintptr_t)buf, n};
	size_t before_first;

	if (!h)
		return SIZE_MAX;
	before_first = sl_h2_cut(h, &one, 1, 0);
	if (before_first != 0) { /* opens nothing, or only after other frames */
		st->tls_start = 0;
		return before_first;
	}
	st->tls_start = !st->tls_went;
	return sl_h2_cut(h, &one, 1, 1);
}

size_t sl_stream_tls_write(int fd, const void *buf, size_t n, int h2)
{
	struct sl_record *rec = sl_record_of(fd);
	struct sl_rec_stream *st;
	size_t limit = SIZE_MAX;

	if (!rec)
		return limit;
	sl_shim_lock(&rec->lock);
	st = requests(rec);
	if (st && n && st->mode == SL_STREAM_CONNECTION && !h2 && sl_talk_h1_requests(rec) == 0 &&
	    sl_talk_h1_state(rec) == SL_H1_IDLE && sl_http1_looks_like(buf, n)) {
		/* h2 offered, HTTP/1.1 chosen: its requests can be held one by one, the
		 * first on the place its connect took. */
		st->mode = SL_STREAM_TLS_HTTP1;
		st->admitted_next = st->first_at_connect;
		sl_debug("requests on fd %d: the server chose HTTP/1 over TLS: requests found in SSL_write's "
		         "plaintext", fd);
	}
	if (st && n && st->mode == SL_STREAM_CONNECTION && h2 && !sl_h2_of(rec) && sl_sniff_h2_preface(buf, n) &&
	    sl_h2_begin(rec, SL_H2_AT_PREFACE, sl_rec_mask(rec, SL_USE_SIG) != 0) == 0) {
		/* h2 chosen, and its frames are in SSL_write's plaintext: each stream a
		 * request, the first on the place its connect took. */
		st->mode = SL_STREAM_TLS_H2;
		st->admitted_next = st->first_at_connect;
		sl_debug("requests on fd %d: the server chose HTTP/2 over TLS: each stream a request", fd);
	}
	if (st && n && st->mode == SL_STREAM_TLS_H2)
		limit = tls_h2_write(rec, st, buf, n);
	if (st && n && st->mode == SL_STREAM_TLS_HTTP1) {
		if (sl_talk_h1_requests(rec) == 0 && sl_talk_h1_state(rec) == SL_H1_IDLE &&
		    !sl_http1_looks_like(buf, n)) {
			/* Not HTTP/1 in the plaintext: turns, from this write on. */
			st->mode = SL_STREAM_TURNS;
			st->read_since_write = 1;
			sl_debug("requests on fd %d: TLS, not HTTP/1 inside: counting turns", fd);
		} else {
			st->tls_start = sl_talk_h1_state(rec) == SL_H1_IDLE && !st->tls_went;
		}
	}
	sl_shim_unlock(&rec->lock);
	return limit;
}

void sl_stream_tls_wrote(int fd, const void *buf, size_t n)
{
	struct sl_record *rec = sl_record_of(fd);
	struct sl_rec_lines scratch, *l;
	struct sl_rec_stream *st;
	size_t off = 0;

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	st = requests(rec);
	if (st && st->mode == SL_STREAM_TLS_H2) {
		struct iovec one = {(void *)(uintptr_t)buf, n};

		st->tls_start = st->tls_went = 0;
		h2_wrote(rec, st, &one, 1, n);
	} else if (st && st->mode == SL_STREAM_TLS_HTTP1 && (l = sl_talk_open(rec, &scratch))) {
		/* A write whose bytes went inside libssl's buffers, or a retry after
		 * WANT_WRITE: its request has begun either way. */
		st->tls_start = st->tls_went = 0;
		st->admitted_next = 0;
		while (off < n && l->h1.state != SL_H1_LOST)
			off += sl_http1_feed(&l->h1, (const char *)buf + off, n - off);
		if (l->h1.state == SL_H1_LOST)
			lost(rec, st, &l->h1, " inside TLS");
		sl_talk_close(rec, l);
	}
	sl_shim_unlock(&rec->lock);
}
