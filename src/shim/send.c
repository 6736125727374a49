/*
 * Every send path.  On a socket the shim knows nothing about this is one fd-table
 * load; the rest runs only for fds with an entry (a held connection, a connected
 * UDP socket to a matched peer, a connection whose first write is to be read for a
 * name) and for the two calls that carry their own destination:
 *  - a datagram sent with an address (sendto, sendmsg, sendmmsg) when some section
 *    meters datagrams: matched against that address, each datagram held;
 *  - sendto/sendmsg with MSG_FASTOPEN, which connect and send at once: held as a
 *    new connection.  Non-blocking and not due, the connect is deferred and the
 *    call fails with EINPROGRESS, as the kernel's own fallback without a Fast Open
 *    cookie does; the connect is made at the release, without the data, which the
 *    program then writes.
 */
#include "connect.h"
#include "fdtab.h"
#include "gate.h"
#include "held.h"
#include "iovec.h"
#include "naming.h"
#include "record.h"
#include "sluice/clock.h"
#include "sluice/wait.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* What the gate tells a send path beyond go/fail: how many bytes may go (a write
 * carrying the end of one request and the start of the next is cut at the
 * boundary), and whether the shim must be told what went (meter = requests). */
struct gate {
	size_t limit;
	int track;
	int may_take;   /* in: the caller answers SL_TRACK_TAKEN (send_gated does) */
	int send_flags; /* in: the call's flags, or -1 when the shim may not make it */
	size_t sent;    /* out, with SL_TRACK_SENT: sent inside the release */
};

/* An fd with a table entry: hold its write, or read it for a name.  Returns 0 to
 * go as asked, 1 to go as `g` says, or -1 with errno set. */
static __attribute__((noinline)) int gate_slow(int fd, unsigned idx, int dontwait,
                                               const struct iovec *iov, int iovcnt, struct gate *g)
{
	int rc = 0;

	g->limit = SIZE_MAX;
	g->track = g->may_take ? SL_TRACK_MAY_TAKE : 0;
	if (g->send_flags & MSG_FASTOPEN)
		g->send_flags = -1; /* connects and sends at once: never made by the shim */
	if (idx == SL_FD_SNIFF) {
		if (sl_fdtab_claim_sniff(fd) && sl_shim_active())
			rc = sl_sniff_first_write(fd, iov, iovcnt, dontwait, &g->limit, &g->track, g->send_flags,
			                          &g->sent);
	} else if (g->send_flags >= 0) {
		rc = sl_held_write_inside(fd, dontwait, g->send_flags, iov, iovcnt, &g->limit, &g->track, &g->sent);
	} else {
		rc = sl_held_write_data(fd, dontwait, iov, iovcnt, &g->limit, &g->track);
	}
	g->track &= ~SL_TRACK_MAY_TAKE;
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return g->track || g->limit != SIZE_MAX;
}

/* send_flags: the call's own flags when the shim may make it as a plain send of
 * iov (send, write, writev, sendmsg without an address or control data), else -1. */
static inline int gate_iov(int fd, int dontwait, const struct iovec *iov, int iovcnt, struct gate *g,
                           int send_flags)
{
	unsigned idx = sl_fdtab_get(fd);

	if (sl_likely(!idx))
		return 0;
	g->may_take = 1;
	g->send_flags = send_flags;
	return gate_slow(fd, idx, dontwait, iov, iovcnt, g);
}

static inline int gate(int fd, int dontwait, const void *buf, size_t len, struct gate *g, int send_flags)
{
	unsigned idx = sl_fdtab_get(fd);
	struct iovec one;

	if (sl_likely(!idx))
		return 0;
	one.iov_base = (void *)buf;
	one.iov_len = len;
	g->may_take = 1;
	g->send_flags = send_flags;
	return gate_slow(fd, idx, dontwait, &one, 1, g);
}

/* After a tracked write: tell the stream what went (and with meter = bytes, how
 * long the kernel took: `took_ns`, -1 when not timed). */
static ssize_t wrote_timed(int fd, const struct gate *g, const struct iovec *iov, int iovcnt, ssize_t w,
                           int64_t took_ns)
{
	int saved = errno;

	if ((w > 0 && (g->track & (SL_TRACK_STREAM | SL_TRACK_BYTES | SL_TRACK_SIGNALS))) ||
	    (took_ns >= 0 && (w > 0 || saved == EAGAIN)))
		sl_held_wrote(fd, iov, iovcnt, w > 0 ? (size_t)w : 0, took_ns);
	if (g->track & SL_TRACK_MOVE)
		sl_held_made(fd);
	errno = saved;
	return w;
}

static ssize_t wrote(int fd, const struct gate *g, const struct iovec *iov, int iovcnt, ssize_t w)
{
	return wrote_timed(fd, g, iov, iovcnt, w, -1);
}

/* One real send, whichever call it is: the contiguous ones take the vector's one
 * piece (the gate never cuts a single buffer into more). */
enum { OP_SEND, OP_SENDTO, OP_WRITE, OP_WRITEV, OP_SENDMSG };
struct op {
	int kind;
	int flags;
	const struct sockaddr *addr;
	socklen_t alen;
	const struct msghdr *msg; /* OP_SENDMSG: the caller's header */
};

static ssize_t do_op(int fd, const struct op *op, struct iovec *iov, int k)
{
	const void *buf = k ? iov[0].iov_base : NULL;
	size_t len = k ? iov[0].iov_len : 0;

	switch (op->kind) {
	case OP_SEND:
		return sl_real.send ? sl_real.send(fd, buf, len, op->flags)
		                    : sl_sys(SYS_sendto, fd, buf, len, op->flags, NULL, 0);
	case OP_SENDTO:
		return sl_real.sendto ? sl_real.sendto(fd, buf, len, op->flags, op->addr, op->alen)
		                      : sl_sys(SYS_sendto, fd, buf, len, op->flags, op->addr, op->alen);
	case OP_WRITE:
		return sl_real.write ? sl_real.write(fd, buf, len) : sl_sys(SYS_write, fd, buf, len);
	case OP_WRITEV:
		return sl_real.writev ? sl_real.writev(fd, iov, k) : sl_sys(SYS_writev, fd, iov, k);
	default: {
		struct msghdr m = *op->msg;

		m.msg_iov = iov;
		m.msg_iovlen = (size_t)k;
		return sl_real.sendmsg ? sl_real.sendmsg(fd, &m, op->flags)
		                       : sl_sys(SYS_sendmsg, fd, &m, op->flags);
	}
	}
}

/* iov without its first `skip` bytes, into `out` (room for iovcnt); returns its
 * count. */
static int iov_from(const struct iovec *iov, int iovcnt, size_t skip, struct iovec *out)
{
	int k = 0;

	for (int i = 0; i < iovcnt; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		out[k].iov_base = (char *)iov[i].iov_base + skip;
		out[k++].iov_len = iov[i].iov_len - skip;
		skip = 0;
	}
	return k;
}

/* The shim sent `sent` bytes of cut inside the release (SL_TRACK_SENT): on a
 * blocking socket the rest of the cut goes now, as the program's blocking call
 * would have sent it all; a non-blocking one has its part-write.  Returns what
 * went (at least `sent`). */
static ssize_t sent_inside(int fd, int dontwait, const struct op *op, const struct iovec *cut, int k,
                           size_t sent)
{
	struct iovec rest[k > 0 ? k : 1];
	size_t total = 0;
	int n;
	ssize_t w;

	for (int i = 0; i < k; i++)
		total += cut[i].iov_len;
	if (sent >= total || dontwait || sl_fd_nonblocking(fd))
		return (ssize_t)sent;
	n = iov_from(cut, k, sent, rest);
	w = do_op(fd, op, rest, n);
	return w > 0 ? (ssize_t)(sent + (size_t)w) : (ssize_t)sent;
}

/* The call was gated (returned 1 with `g`): send what the gate allows, and - on a
 * blocking socket metered in bytes - go on piece by piece, each piece released in
 * turn, until the whole vector went, as a blocking send does.  Returns what went,
 * or -1 with errno when nothing did.  0 < iovcnt <= IOV_MAX. */
static ssize_t send_gated(int fd, int dontwait, const struct op *op, const struct iovec *iov,
                          int iovcnt, struct gate *g)
{
	struct iovec rest[iovcnt], cut[iovcnt];
	size_t total = 0, done = 0;
	int loop = !dontwait && (g->track & SL_TRACK_BYTES) && !sl_fd_nonblocking(fd);

	if (g->track & SL_TRACK_TAKEN)
		return (ssize_t)g->limit; /* the shim took them (HTTP/2's box): written */
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	for (;;) {
		int nrest = iov_from(iov, iovcnt, done, rest), k = sl_iov_cut(rest, nrest, g->limit, cut), rc;
		int64_t began = g->track & SL_TRACK_BYTES ? sl_clock_mono_ns() : 0;
		ssize_t w = g->track & SL_TRACK_SENT ? sent_inside(fd, dontwait, op, cut, k, g->sent)
		                                      : do_op(fd, op, cut, k);

		/* Released bytes the kernel held back reach the destination late (drain.h). */
		w = wrote_timed(fd, g, cut, k, w, began ? sl_clock_mono_ns() - began : -1);

		if (w <= 0)
			return done ? (ssize_t)done : w;
		done += (size_t)w;
		if (!loop || done >= total)
			return (ssize_t)done;
		nrest = iov_from(iov, iovcnt, done, rest);
		rc = gate_iov(fd, dontwait, rest, nrest, g, -1);
		if (rc < 0)
			return (ssize_t)done; /* a signal or a refusal: what went is the result */
		if (rc == 0) {
			g->limit = SIZE_MAX;
			g->track = 0;
		}
	}
}

/* A datagram to `addr`.  Returns 1 when no section meters it (the caller gates the
 * fd as usual), 0 to send it now (*track as the gate says), or -errno. */
static int datagram(int fd, const struct sockaddr *addr, socklen_t alen, int dontwait, int *track)
{
	struct sl_dest d;
	struct sl_match m;
	char name[SL_HOST_MAX];

	if (!sl_shim_active() || !(sl_shim_meters() & (1u << SL_METER_DATAGRAMS)) ||
	    sl_dest_from_sockaddr(&d, addr, alen) != 0)
		return 1;
	d.meter = SL_METER_DATAGRAMS;
	if (sl_admission_match(&d, name, sizeof(name), &m) == 0 || sl_socket_type(fd) != SOCK_DGRAM)
		return 1;
	return sl_held_datagram(fd, &d, &m, dontwait, track);
}

/* MSG_FASTOPEN: connect and first write at once.  Returns 1 when nothing holds it
 * (the caller sends as usual), 0 to send now (after any wait), or -errno; -EINPROGRESS
 * means the connect was started without the data, its first write to be held. */
static int fastopen(int fd, const struct sockaddr *addr, socklen_t alen, const struct iovec *iov,
                    int iovcnt, int flags)
{
	struct sl_dest peer, d;
	struct sl_tcp_match t;
	struct sl_match u;
	char name[SL_HOST_MAX], name2[SL_HOST_MAX];
	int rc;

	if (!sl_shim_active() || sl_dest_from_sockaddr(&peer, addr, alen) != 0)
		return 1;
	d = peer;
	sl_admission_name(&d, name, sizeof(name));
	sl_admission_match_tcp(&d, &t);
	if (!t.n && !t.nr && !t.nb &&
	    (!sl_shim_has_names() ||
	     (t.n = sl_name_from_write(fd, &peer, iov, iovcnt, &d, name2, sizeof(name2), &t.m)) == 0))
		return 1;
	if (!sl_is_fresh_tcp(fd))
		return 1; /* already connected: an ordinary send, gated as such */
	/* As connect(): the place of the connection and of its first request, which
	 * is this call's data.  Deferred (non-blocking, not due): -EINPROGRESS, and the
	 * connect is made at the release without the data, which the program then
	 * writes as after any Fast Open fallback. */
	sl_match_union(&u, &t.m, &t.rm);
	rc = t.n || t.nr ? sl_connect_admit(fd, &d, &u, "fastopen", addr, alen, flags & MSG_DONTWAIT, NULL) : 0;
	if (rc < 0 && rc != -EINPROGRESS)
		return rc;
	if ((t.nr || t.nb) && sl_held_stream(fd, &d, &t.rm, &t.bm, 1) == 0 && rc == 0)
		return 1; /* the caller gates this call's data through the record */
	return rc;
}

SL_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t (*real)(int, const void *, size_t, int) = SL_REAL(send, send);
	struct gate g;
	int rc = gate(fd, flags & MSG_DONTWAIT, buf, len, &g, flags);

	if (sl_unlikely(rc != 0)) {
		struct op op = {OP_SEND, flags, NULL, 0, NULL};
		struct iovec one = {(void *)buf, len};

		return rc < 0 ? -1 : send_gated(fd, flags & MSG_DONTWAIT, &op, &one, 1, &g);
	}
	if (sl_unlikely(!real))
		return sl_sys(SYS_sendto, fd, buf, len, flags, NULL, 0);
	return real(fd, buf, len, flags);
}

/* The destination-carrying part of sendto/sendmsg: as gate_iov. */
static int gate_to(int fd, const struct sockaddr *addr, socklen_t alen, int flags,
                   const struct iovec *iov, int iovcnt, struct gate *g)
{
	int rc;

	g->limit = SIZE_MAX;
	g->track = 0;
	rc = sl_unlikely(flags & MSG_FASTOPEN) ? fastopen(fd, addr, alen, iov, iovcnt, flags)
	                                       : datagram(fd, addr, alen, flags & MSG_DONTWAIT, &g->track);
	if (rc == 1)
		return gate_iov(fd, flags & MSG_DONTWAIT, iov, iovcnt, g, -1);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return g->track != 0; /* 1: told once it went (sl_held_made) */
}

SL_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                         const struct sockaddr *addr, socklen_t alen)
{
	ssize_t (*real)(int, const void *, size_t, int, const struct sockaddr *, socklen_t) =
		SL_REAL(sendto, sendto);
	struct iovec one = {(void *)buf, len};
	struct gate g;
	int rc = sl_likely(!addr) ? gate(fd, flags & MSG_DONTWAIT, buf, len, &g, flags)
	                          : gate_to(fd, addr, alen, flags, &one, 1, &g);

	if (sl_unlikely(rc != 0)) {
		struct op op = {OP_SENDTO, flags, addr, alen, NULL};

		return rc < 0 ? -1 : send_gated(fd, flags & MSG_DONTWAIT, &op, &one, 1, &g);
	}
	if (sl_unlikely(!real))
		return sl_sys(SYS_sendto, fd, buf, len, flags, addr, alen);
	return real(fd, buf, len, flags, addr, alen);
}

SL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t (*real)(int, const struct msghdr *, int) = SL_REAL(sendmsg, sendmsg);
	struct gate g;
	int rc = sl_likely(!msg || !msg->msg_name)
	         ? gate_iov(fd, flags & MSG_DONTWAIT, msg ? msg->msg_iov : NULL,
	                    msg ? (int)msg->msg_iovlen : 0, &g,
	                    msg && !msg->msg_control && !msg->msg_controllen && msg->msg_iovlen <= IOV_MAX
	                    ? flags : -1)
	         : gate_to(fd, msg->msg_name, msg->msg_namelen, flags, msg->msg_iov,
	                   (int)msg->msg_iovlen, &g);

	if (sl_unlikely(rc != 0)) {
		if (rc < 0)
			return -1;
		struct op op = {OP_SENDMSG, flags, NULL, 0, msg};

		if (msg->msg_iovlen > 0 && msg->msg_iovlen <= IOV_MAX)
			return send_gated(fd, flags & MSG_DONTWAIT, &op, msg->msg_iov, (int)msg->msg_iovlen, &g);
	}
	if (sl_unlikely(!real))
		return sl_sys(SYS_sendmsg, fd, msg, flags);
	return real(fd, msg, flags);
}

/* Whether sendmmsg's messages need one hold each: some message carries an address
 * while datagrams are metered, or the fd is a connected UDP socket's record. */
static int per_message(int fd, struct mmsghdr *vec, unsigned int n)
{
	struct sl_record *rec;
	int kind;

	if (sl_shim_active() && (sl_shim_meters() & (1u << SL_METER_DATAGRAMS)))
		for (unsigned i = 0; i < n; i++)
			if (vec[i].msg_hdr.msg_name)
				return 1;
	if (!sl_fdtab_get(fd) || !(rec = sl_record_of(fd)))
		return 0;
	sl_shim_lock(&rec->lock);
	kind = rec->kind;
	sl_shim_unlock(&rec->lock);
	return kind == SL_KIND_CONNECTED_UDP;
}

SL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	int (*real)(int, struct mmsghdr *, unsigned int, int) = SL_REAL(sendmmsg, sendmmsg);
	unsigned int sent = 0;

	if (sl_likely(!sl_fdtab_get(fd)) &&
	    !(sl_shim_active() && (sl_shim_meters() & (1u << SL_METER_DATAGRAMS))))
		goto pass;
	if (n == 0 || !vec || !per_message(fd, vec, n)) {
		struct gate g = {.may_take = 0, .send_flags = -1};
		unsigned idx = sl_fdtab_get(fd);
		/* Several messages at once cannot be taken part-way: never the box. */
		int rc = n && vec && idx ? gate_slow(fd, idx, flags & MSG_DONTWAIT, vec[0].msg_hdr.msg_iov,
		                                     (int)vec[0].msg_hdr.msg_iovlen, &g) : 0;

		if (rc < 0)
			return -1;
		if (rc > 0 && g.track) {
			/* A stream sending several messages at once: not cut, but followed. */
			int sent_n = real ? real(fd, vec, n, flags) : (int)sl_sys(SYS_sendmmsg, fd, vec, n, flags);

			for (int i = 0; i < sent_n; i++)
				wrote(fd, &g, vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen,
				      (ssize_t)vec[i].msg_len);
			return sent_n;
		}
		goto pass;
	}
	/* One datagram at a time, each held: a count short of n is what sendmmsg
	 * returns when it stops part way, so a program already handles it. */
	for (; sent < n; sent++) {
		struct msghdr *h = &vec[sent].msg_hdr;
		struct gate g;
		int rc = h->msg_name ? gate_to(fd, h->msg_name, h->msg_namelen, flags, h->msg_iov,
		                               (int)h->msg_iovlen, &g)
		                     : gate_iov(fd, flags & MSG_DONTWAIT, h->msg_iov, (int)h->msg_iovlen, &g, -1);
		int went;

		if (rc < 0 || (went = real ? real(fd, &vec[sent], 1, flags)
		                           : (int)sl_sys(SYS_sendmmsg, fd, &vec[sent], 1, flags)) < 1)
			return sent ? (int)sent : -1;
		if (rc == 1)
			wrote(fd, &g, h->msg_iov, (int)h->msg_iovlen, (ssize_t)vec[sent].msg_len);
	}
	return (int)sent;
pass:
	if (sl_unlikely(!real))
		return (int)sl_sys(SYS_sendmmsg, fd, vec, n, flags);
	return real(fd, vec, n, flags);
}

SL_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	ssize_t (*real)(int, const void *, size_t) = SL_REAL(write, write);
	struct gate g;
	int rc = gate(fd, 0, buf, len, &g, 0);

	if (sl_unlikely(rc != 0)) {
		struct op op = {OP_WRITE, 0, NULL, 0, NULL};
		struct iovec one = {(void *)buf, len};

		return rc < 0 ? -1 : send_gated(fd, 0, &op, &one, 1, &g);
	}
	if (sl_unlikely(!real))
		return sl_sys(SYS_write, fd, buf, len);
	return real(fd, buf, len);
}

SL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	ssize_t (*real)(int, const struct iovec *, int) = SL_REAL(writev, writev);
	struct gate g;
	int rc = gate_iov(fd, 0, iov, n, &g, 0);

	if (sl_unlikely(rc != 0)) {
		if (rc < 0)
			return -1;
		struct op op = {OP_WRITEV, 0, NULL, 0, NULL};

		if (n > 0 && n <= IOV_MAX)
			return send_gated(fd, 0, &op, iov, n, &g);
	}
	if (sl_unlikely(!real))
		return sl_sys(SYS_writev, fd, iov, n);
	return real(fd, iov, n);
}

/* sendfile's bytes are in a file: nothing to read a name from, so a marked
 * connection is unmarked and goes as it is; a request stream follows them as
 * bytes of a body (or gives up following, outside one). */
static ssize_t sendfile_common(ssize_t (*real)(int, int, off_t *, size_t), int out, int in,
                               off_t *off, size_t count)
{
	struct gate g;
	int rc = gate_iov(out, 0, NULL, 0, &g, -1);

	if (sl_unlikely(rc != 0)) {
		if (rc < 0)
			return -1;
		count = SL_MIN(count, g.limit);
		return wrote(out, &g, NULL, 0, real ? real(out, in, off, count)
		                                    : sl_sys(SYS_sendfile, out, in, off, count));
	}
	if (sl_unlikely(!real))
		return sl_sys(SYS_sendfile, out, in, off, count);
	return real(out, in, off, count);
}

SL_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	return sendfile_common(SL_REAL(sendfile, sendfile), out, in, off, count);
}

SL_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile_common(SL_REAL(sendfile64, sendfile64), out, in, off, count);
}
