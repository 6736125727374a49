/*
 * Signals from the destination (docs/shaping.md, "Signals from the destination"):
 * the HTTP/1.x responses on a connection to a section that reads them are
 * followed through the read calls the shim already hooks (recv.c), and what they
 * say - 429 with Retry-After, RateLimit, X-RateLimit - pauses or slows that
 * section's queue (or key's) for every process on the machine, through the segment
 * (core/pause.c).  Only the bytes are read, never changed.  Such a connection
 * keeps its record until it closes; its writes are followed too (proto/http1.c), so
 * the answer to a HEAD is known to have no body.  A connection whose answers
 * cannot be followed (TLS on the socket, another protocol, a 101) is left alone
 * from then on, with a debug line.  Every function here runs under the record's
 * lock.
 */
#include "answers.h"
#include "fdtab.h"
#include "h2.h"
#include "held.h"
#include "inflight.h"
#include "record.h"
#include "tls.h"
#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/http2.h"
#include "sluice/pause.h"
#include "sluice/refund.h"
#include "sluice/sniff.h"

#include <errno.h>
#include <string.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <time.h>

/* The sections of m that read answers: enforcing, with a rate, signals = on or a
 * refund list; *refunding: whether some have a refund list. */
static uint64_t reading(const struct sl_match *m, int *refunding)
{
	uint64_t out = 0;

	*refunding = 0;
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);
		const struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, m->idx[k]);

		if (!sec || sec->spec.mode != SL_MODE_ENFORCE)
			continue;
		/* requests in flight end with their answers (inflight.h), rate or none */
		if (sec->spec.concurrency && sec->spec.meter == SL_METER_REQUESTS)
			out |= 1ull << k;
		if (!sec->spec.amount)
			continue;
		if (sl_refund_any(&sec->spec.refund))
			*refunding = 1;
		if (sec->spec.signals || sl_refund_any(&sec->spec.refund))
			out |= 1ull << k;
	}
	return out;
}

/* Whether some section of m gives back an answer of `status` (0: a failure) of
 * its meter.  Read without the lock, to spare every other answer the lock;
 * sl_admit_uncounted decides under it. */
static int refunds_any(const struct sl_match *m, unsigned status)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		const struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, m->idx[__builtin_ctzll(bits)]);

		if (sec && (status ? sl_refund_status(&sec->spec.refund, status)
		                   : (sec->spec.refund.classes & SL_REFUND_FAILED) != 0))
			return 1;
	}
	return 0;
}

/* The release at `at` given back in m's sections of `meter` that refund `status`. */
static void give_back(struct sl_record *rec, const struct sl_match *m, unsigned status, int64_t at, unsigned meter)
{
	struct sl_match of = *m;
	int n;

	of.mask = 0;
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);
		const struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, m->idx[k]);

		if (sec && sec->spec.meter == meter)
			of.mask |= 1ull << k;
	}
	if (!of.mask || !refunds_any(&of, status))
		return;
	n = sl_admit_uncounted(sl_shim.shm.hdr, &of, status, at, sl_clock_mono_ns(), sl_shim_self());
	if (n > 0)
		sl_debug("%s on fd %d %s: given back in %d section%s (refund)",
		         meter == SL_METER_CONNECTIONS ? "connection" : "request", rec->fd,
		         status ? "answered with a status the destination does not count" : "failed", n,
		         n > 1 ? "s" : "");
}

void sl_refund_released(struct sl_record *rec, int64_t at, int conn)
{
	struct sl_rec_refunds *r = rec->talk ? rec->talk->refunds : NULL;

	if (!r || !at)
		return;
	if (conn) {
		if (!r->conn_ns)
			r->conn_ns = at;
		return;
	}
	if (r->n < SL_REFUND_RING)
		r->req_ns[(r->head + r->n++) % SL_REFUND_RING] = at;
}

/* The answer to the oldest request outstanding (and the connection's first) had
 * `status`: what its sections refund is given back. */
static void refund_answered(struct sl_record *rec, unsigned status)
{
	struct sl_rec_refunds *r = rec->talk ? rec->talk->refunds : NULL;
	struct sl_match m;
	int64_t conn = 0, req = 0;

	if (!r)
		return;
	r->answered = 1;
	if (r->conn_ns) {
		conn = r->conn_ns;
		r->conn_ns = 0;
	}
	if (r->n) {
		req = r->req_ns[r->head];
		r->head = (uint8_t)((r->head + 1) % SL_REFUND_RING);
		r->n--;
	}
	sl_rec_match(rec, SL_USE_SIG, &m);
	if (conn)
		give_back(rec, &m, status, conn, SL_METER_CONNECTIONS);
	if (req)
		give_back(rec, &m, status, req, SL_METER_REQUESTS);
}

void sl_refund_failed(int fd, int err)
{
	struct sl_record *rec;
	struct sl_rec_refunds *r;
	struct sl_match m;

	if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT && err != EHOSTUNREACH &&
	    err != ENETUNREACH && err != ECONNABORTED)
		return;
	if (!(rec = sl_record_of(fd)))
		return;
	sl_shim_lock(&rec->lock);
	if ((r = rec->talk ? rec->talk->refunds : NULL) && (r->conn_ns || r->n)) {
		sl_rec_match(rec, SL_USE_SIG, &m);
		/* The connection itself only before any answer; the requests that had
		 * none, each. */
		if (r->conn_ns && !r->answered)
			give_back(rec, &m, 0, r->conn_ns, SL_METER_CONNECTIONS);
		r->conn_ns = 0;
		for (; r->n; r->n--, r->head = (uint8_t)((r->head + 1) % SL_REFUND_RING))
			give_back(rec, &m, 0, r->req_ns[r->head], SL_METER_REQUESTS);
	}
	sl_shim_unlock(&rec->lock);
}

/* Whether any of them adapts its rate (good answers then count). */
static int adapting(const struct sl_match *m)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		const struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, m->idx[__builtin_ctzll(bits)]);

		if (sec && sec->spec.adapt)
			return 1;
	}
	return 0;
}

int sl_held_follow(int fd, const struct sl_dest *d, const struct sl_match *m, int64_t conn_released)
{
	int refunding;
	uint64_t bits = reading(m, &refunding);
	struct sl_record *rec;

	struct sl_match sig;
	int rc = 0;

	if (!bits)
		return 0;
	if (!(rec = sl_record_of(fd)) && (sl_held_open(fd, d, m, 0) < 0 || !(rec = sl_record_of(fd))))
		return -ENOSPC;
	sig = *m;
	sig.mask = bits;
	sl_shim_lock(&rec->lock);
	if (sl_held_add_sects(rec, d, &sig, SL_USE_SIG) < 0 || sl_talk_begin(rec) < 0) {
		sl_rec_drop_use(rec, SL_USE_SIG); /* no memory: its answers are not read */
		rc = -ENOSPC;
	} else if (refunding && !rec->talk->refunds) {
		/* No memory: nothing is given back, which only errs on the safe side. */
		if ((rec->talk->refunds = sl_slab_alloc(sizeof(*rec->talk->refunds))))
			memset(rec->talk->refunds, 0, sizeof(*rec->talk->refunds));
	}
	if (rc == 0)
		sl_refund_released(rec, conn_released, 1);
	sl_shim_unlock(&rec->lock);
	return rc;
}

/* Whether a write starts with the HTTP/2 preface. */
static int starts_h2(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;
	const void *p = sl_iov_first(iov, iovcnt, &n);

	return p && sl_sniff_h2_preface(p, n);
}

/* The requests written, for the HEADs among them; HTTP/2's frames, for the table
 * its answers' decoder may use (h2.c). */
static void follow_requests(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n)
{
	struct sl_rec_lines scratch, *l;
	struct sl_rec_h2 *h = sl_h2_of(rec);

	if (!h && rec->talk && sl_talk_h1_requests(rec) == 0 && sl_talk_h1_state(rec) == SL_H1_IDLE &&
	    starts_h2(iov, iovcnt) && sl_h2_begin(rec, SL_H2_AT_PREFACE, 1) == 0)
		h = sl_h2_of(rec);
	if (h) {
		if (iov)
			sl_h2_wrote(h, iov, iovcnt, n);
		return;
	}
	if (!(l = sl_talk_open(rec, &scratch)))
		return;
	if (!iov)
		sl_http1_skip(&l->h1, n);
	for (int i = 0; iov && i < iovcnt && n > 0; i++) {
		size_t take = SL_MIN(iov[i].iov_len, n), off = 0;

		while (off < take && l->h1.state != SL_H1_LOST)
			off += sl_http1_feed(&l->h1, (const char *)iov[i].iov_base + off, take - off);
		n -= take;
	}
	sl_talk_close(rec, l);
}

/* Whether what went starts a TLS record (its first non-empty piece says). */
static int starts_tls(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;
	const void *p = sl_iov_first(iov, iovcnt, &n);

	return p && sl_sniff_is_tls(p, n);
}

/* Said once: TLS on a followed connection, not through libssl's calls. */
static void tls_unseen(const struct sl_record *rec)
{
	static _Atomic int said;

	if (!atomic_exchange(&said, 1))
		sl_debug("answers on fd %d: TLS not through libssl's SSL_read/SSL_write (TLS built into the "
		         "program - Go, node's own OpenSSL - or GnuTLS): its answers are not read, and "
		         "meter = requests counts turns", rec->fd);
}

void sl_signals_wrote(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n)
{
	/* A ClientHello, or a write inside libssl: TLS, followed in plaintext (tls.c). */
	if (sl_tls_in_call(rec->fd) || (!rec->tls && sl_talk_h1_requests(rec) == 0 && starts_tls(iov, iovcnt)))
		rec->tls = 1;
	if (sl_signals_follows_writes(rec))
		follow_requests(rec, iov, iovcnt, n);
}

int sl_signals_follows_writes(const struct sl_record *rec)
{
	const struct sl_rec_h2 *h = sl_h2_of(rec);

	/* TLS: the plaintext comes through tls.c; meter = requests follows them
	 * already (stream.c); a reader that gave up has no more use for them. */
	if (!rec->talk || rec->tls || !sl_rec_mask(rec, SL_USE_SIG) || sl_rec_mask(rec, SL_USE_REQ))
		return 0;
	if (h)
		return h->hpack && h->out.state != SL_H2_LOST && h->in.state != SL_H2_LOST;
	return sl_talk_h1_state(rec) != SL_H1_LOST && sl_talk_resp_state(rec) != SL_RESP_LOST;
}

/* Request n (0-based) was a HEAD, as far as the writes showed. */
static int was_head(void *arg, uint64_t n)
{
	const struct sl_http1 *h1 = arg;

	return h1->requests > n && h1->requests - n <= 64 && ((h1->heads >> (n & 63)) & 1);
}

/* A final response's headers ended: act on what they say. */
static void answered(struct sl_record *rec, const struct sl_resp_fields *f)
{
	struct timespec wall;
	struct sl_signal sig;
	int64_t now;
	int did;

	struct sl_match m;

	refund_answered(rec, f->status);
	clock_gettime(CLOCK_REALTIME, &wall);
	sl_signal_decide(f, (int64_t)wall.tv_sec, &sig);
	sl_rec_match(rec, SL_USE_SIG, &m);
	if (sig.kind == SL_SIGNAL_NONE && !(sig.good && adapting(&m)))
		return; /* nothing to say: no lock taken */
	now = sl_clock_mono_ns();
	did = sl_admit_signal(sl_shim.shm.hdr, &m, &sig, now, sl_shim_self());
	if (sig.kind != SL_SIGNAL_NONE)
		sl_debug("answer on fd %d: %u (%s): pause %" PRId64 "ms, budget %" PRId64 " in %" PRId64 "ms%s%s",
		         rec->fd, sig.status, sl_signal_name(sig.kind), sig.pause_ms, sig.budget, sig.budget_ms,
		         did > 0 && (did & SL_PAUSE_ADAPTED) ? ", rate halved" : "",
		         did < 0 ? " - dropped: segment lock unavailable" : "");
}

/* An HTTP/2 header block from the server ended (h2.h): judged as HTTP/1's answers
 * are, once per answer - a gRPC call by its trailers (grpc-status), anything else
 * by its final :status; 1xx and a plain answer's trailers say nothing. */
static void h2_answered(struct sl_record *rec, struct sl_resp_fields *f, int ends)
{
	if (f->grpc_status < 0) {
		if (f->status < 200 || (f->grpc && !ends))
			return;
	} else if (!f->status) {
		f->status = 200; /* trailers: the answer's headers said 200 */
	}
	answered(rec, f);
}

/* The answers read, in plaintext. */
static void follow_answers(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n)
{
	struct sl_rec_lines scratch, *l;
	struct sl_rec_h2 *h = sl_h2_of(rec);
	int was_lost;

	/* Before anything was written: an HTTP/2 server may speak first (its SETTINGS,
	 * even before the client's preface arrives); its frames are followed from
	 * their first byte. */
	if (!h && n && rec->talk && sl_talk_h1_requests(rec) == 0 && sl_talk_resp_state(rec) == SL_RESP_IDLE &&
	    iovcnt > 0 && sl_h2_is_server_preface(iov[0].iov_base, SL_MIN(iov[0].iov_len, n)) &&
	    sl_h2_begin(rec, SL_H2_AT_PREFACE, 1) == 0)
		h = sl_h2_of(rec);
	if (h) {
		sl_h2_read(rec, iov, iovcnt, n, h2_answered);
		if (h->in.state != SL_H2_LOST)
			sl_inflight_answers(rec, h->in.ended);
		return;
	}
	if (!(l = sl_talk_open(rec, &scratch)))
		return;
	was_lost = l->resp.state == SL_RESP_LOST;
	for (int i = 0; i < iovcnt && n > 0; i++) {
		size_t take = SL_MIN(iov[i].iov_len, n), off = 0;

		while (off < take && l->resp.state != SL_RESP_LOST) {
			struct sl_resp_fields f;
			int ready;

			off += sl_resp_feed(&l->resp, (const char *)iov[i].iov_base + off, take - off, was_head,
			                    &l->h1, &f, &ready);
			if (ready)
				answered(rec, &f);
		}
		n -= take;
	}
	if (l->resp.state == SL_RESP_LOST && !was_lost)
		sl_debug("answers on fd %d: cannot follow (%s): left alone", rec->fd,
		         l->resp.why ? l->resp.why : "?");
	if (l->resp.state != SL_RESP_LOST)
		sl_inflight_answers(rec, sl_resp_ended(&l->resp));
	sl_talk_close(rec, l);
}

void sl_signals_peek(struct sl_record *rec, int fd)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);

	if (!h || rec->tls || !sl_rec_mask(rec, SL_USE_SIG))
		return;
	sl_h2_peek(rec, fd, h2_answered);
	if (h->in.state != SL_H2_LOST)
		sl_inflight_answers(rec, h->in.ended);
}

void sl_signals_read(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n)
{
	if (sl_tls_in_call(rec->fd)) {
		rec->tls = 1; /* ciphertext: libssl hands the plaintext over (tls.c) */
		return;
	}
	if (rec->tls) {
		if (n)
			tls_unseen(rec);
		return;
	}
	if (sl_talk_resp_state(rec) == SL_RESP_LOST && !sl_h2_of(rec))
		return;
	if (n == 0 && sl_h2_of(rec))
		return; /* HTTP/2: its streams ended as their frames said */
	if (n == 0) {
		struct sl_rec_lines scratch, *l = sl_talk_open(rec, &scratch);

		if (l) {
			sl_resp_eof(&l->resp);
			sl_inflight_answers(rec, sl_resp_ended(&l->resp));
			sl_talk_close(rec, l);
		}
		return;
	}
	follow_answers(rec, iov, iovcnt, n);
}

int sl_signals_follow_ends(const struct sl_record *rec)
{
	const struct sl_rec_h2 *h = sl_h2_of(rec);

	/* In plaintext (on the socket, or through libssl) and not lost. */
	if (h)
		return sl_rec_mask(rec, SL_USE_SIG) && h->in.state != SL_H2_LOST;
	return rec->talk && sl_rec_mask(rec, SL_USE_SIG) && sl_talk_resp_state(rec) != SL_RESP_LOST &&
	       (!rec->tls || rec->stream == NULL || rec->stream->mode == SL_STREAM_TLS_HTTP1);
}

void sl_signals_plain(int fd, const void *buf, size_t n, int reading)
{
	struct sl_record *rec = sl_record_of(fd);
	struct iovec one = {(void *)(uintptr_t)buf, n};

	if (!rec)
		return;
	sl_shim_lock(&rec->lock);
	if (sl_rec_mask(rec, SL_USE_SIG)) {
		rec->tls = 1;
		if (reading && sl_talk_resp_state(rec) != SL_RESP_LOST)
			follow_answers(rec, &one, 1, n);
		else if (!reading && !sl_rec_mask(rec, SL_USE_REQ) && sl_talk_h1_state(rec) != SL_H1_LOST)
			follow_requests(rec, &one, 1, n);
	}
	sl_shim_unlock(&rec->lock);
}
