/*
 * Names beyond DNS (docs/design.md, "Send paths and event loops"): a TCP connection that
 * no section matched when it connected, while some section matches by name, is marked in
 * the fd table; its first write is read for the name it carries (TLS SNI, HTTP Host, a
 * proxy's CONNECT or absolute-form target, parsed by proto/sniff.c; HTTP/2's :authority
 * in its first HEADERS, decoded by nghttp2's HPACK - the write after the preface when
 * that came alone) and, when that name matches, the write is held as the connection's
 * first write would have been, and sections metering its requests or bytes follow it
 * from there on. The bytes are only read, never changed or kept.
 */
#include "answers.h"
#include "fdtab.h"
#include "hpack.h"
#include "gate.h"
#include "held.h"
#include "naming.h"
#include "record.h"
#include "stream.h"
#include "sluice/http2.h"
#include "sluice/sniff.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#define GATHER_MAX 4096 /* bytes copied from a scattered write to be read; a
                         * ClientHello that does not fit goes unnamed */

enum { NAMED_H2 = SL_SNIFF_PROXY + 1 }; /* HTTP/2's :authority, named here */
static const char *const kind_names[] = {"", "TLS SNI", "HTTP Host", "proxy request", "HTTP/2 :authority"};

/* The first bytes of the write, contiguous: the first iovec itself when it is the
 * only one or large enough, otherwise a copy into `tmp`. */
static const void *first_bytes(const struct iovec *iov, int iovcnt, char *tmp, size_t *len)
{
	size_t n = 0;

	if (iovcnt <= 0 || !iov)
		return NULL;
	if (iovcnt == 1 || iov[0].iov_len >= GATHER_MAX) {
		*len = iov[0].iov_len;
		return iov[0].iov_base;
	}
	for (int i = 0; i < iovcnt && n < GATHER_MAX; i++) {
		size_t take = SL_MIN(iov[i].iov_len, GATHER_MAX - n);

		if (take && !iov[i].iov_base)
			break;
		memcpy(tmp + n, iov[i].iov_base, take);
		n += take;
	}
	*len = n;
	return tmp;
}

/* The peer of a connected socket, into d. */
static int peer_of(int fd, struct sl_dest *d)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
		return -1;
	return sl_dest_from_sockaddr(d, (struct sockaddr *)&ss, len);
}

/* HTTP/2's first HEADERS block, decoded: its :authority (or Host) kept. */
struct authority {
	struct sl_hpack *hpack;
	char *name;
	size_t namelen;
	int found, done;
};

static void on_field(void *arg, const char *n, size_t nn, const char *v, size_t vn)
{
	struct authority *a = arg;
	size_t host = vn;

	if (a->found || !((nn == 10 && memcmp(n, ":authority", 10) == 0) || (nn == 4 && memcmp(n, "host", 4) == 0)))
		return;
	/* host[:port], or [v6]:port: the port is the connection's */
	if (vn && v[0] == '[') {
		const char *end = memchr(v, ']', vn);

		host = end ? (size_t)(end - v) + 1 : vn;
	} else {
		const char *colon = memchr(v, ':', vn);

		host = colon ? (size_t)(colon - v) : vn;
	}
	if (!host || host >= a->namelen)
		return;
	for (size_t i = 0; i < host; i++)
		a->name[i] = (char)(v[i] >= 'A' && v[i] <= 'Z' ? v[i] - 'A' + 'a' : v[i]);
	a->name[host] = '\0';
	a->found = 1;
}

static int on_block(void *arg, uint32_t stream, const uint8_t *frag, size_t n, int last, int push, int ends)
{
	struct authority *a = arg;

	(void)stream;
	(void)push;
	(void)ends;
	if (a->done)
		return 0;
	if (sl_hpack_feed(a->hpack, frag, n, last, on_field, a) < 0)
		return -1;
	a->done = last;
	return 0;
}

static int starts_with_preface(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;
	const void *p = sl_iov_first(iov, iovcnt, &n);

	return p && sl_sniff_h2_preface(p, n);
}

/* An HTTP/2 client's first bytes - the preface, or (after a preface written on its
 * own) the HEADERS that follows it - read for the :authority of its first HEADERS,
 * into name: 1; 0 when they say none; -1 when they are the preface and frames with
 * no HEADERS yet (the next write is to be read). */
static int h2_authority(const void *buf, size_t len, char *name, size_t namelen)
{
	const uint8_t *b = buf;
	struct authority a = {NULL, name, namelen, 0, 0};
	struct sl_h2_in frames;
	size_t off = 0;
	int preface = len >= SL_H2_PREFACE_LEN && sl_h2_is_preface(b, SL_H2_PREFACE_LEN);

	if (preface)
		off = SL_H2_PREFACE_LEN;
	else if (len < SL_H2_HEAD_LEN || b[3] != SL_H2_HEADERS || !(b[8] & 1))
		return 0; /* neither the preface nor a client's HEADERS */
	if (!(a.hpack = sl_hpack_new()))
		return 0;
	sl_h2_in_init(&frames); /* the client's frames, read as a server reads them */
	sl_h2_in_feed(&frames, b + off, len - off, on_block, &a);
	sl_hpack_free(a.hpack);
	if (a.found)
		return 1;
	/* the preface and whole frames, no header block among them: the HEADERS is
	 * still to come - in the next write, the one more looked at */
	return preface && frames.state == SL_H2_HEAD && frames.got == 0 && !frames.in_block && !a.done ? -1 : 0;
}

/* The destination a write names, into d (name kept in `name`): its kind, 0 when
 * it names none, or -1 when HTTP/2's name is still to come (h2_authority). */
static int name_of_write(int fd, const struct sl_dest *peer, const struct iovec *iov, int iovcnt,
                         struct sl_dest *d, char *name, size_t namelen)
{
	char tmp[GATHER_MAX];
	struct sl_sniffed s;
	const void *buf;
	size_t len = 0;
	int kind;

	if (!(buf = first_bytes(iov, iovcnt, tmp, &len)))
		return 0;
	if ((kind = sl_sniff(buf, len, &s)) == SL_SNIFF_NONE) {
		int h2 = h2_authority(buf, len, s.name, sizeof(s.name));

		if (h2 < 0)
			return -1;
		if (h2 == 0)
			return 0;
		kind = NAMED_H2;
	}
	/* Most first writes name nothing; the peer is asked (a system call) only for
	 * those that do. */
	if (peer)
		*d = *peer;
	else if (peer_of(fd, d) != 0)
		return 0;
	d->meter = SL_METER_CONNECTIONS;
	if (kind == SL_SNIFF_PROXY) {
		/* The peer is a proxy: the destination is the request's, a numeric one
		 * with its address, a named one with none (address patterns then do not
		 * match the proxy's address by mistake). */
		d->port = s.port;
		memset(d->addr, 0, sizeof(d->addr));
		d->name = NULL;
		d->name_len = 0;
		if (inet_pton(AF_INET, s.name, d->addr) == 1)
			d->family = AF_INET;
		else if (inet_pton(AF_INET6, s.name, d->addr) == 1)
			d->family = AF_INET6;
		else
			d->family = AF_UNSPEC;
	} else if (sl_is_numeric_host(s.name)) {
		return 0; /* the address itself, already matched against at connect */
	}
	if (d->family == AF_UNSPEC || kind != SL_SNIFF_PROXY) {
		if (sl_strlcpy(name, s.name, namelen) < 0)
			return 0;
		d->name = name;
		d->name_len = strlen(name);
	}
	return kind;
}

static void log_named(const struct sl_dest *d, int kind, int held)
{
	char dest[SL_HOST_MAX + 80];

	if (!sl_shim.debug)
		return;
	sl_dest_format(d, dest, sizeof(dest));
	sl_debug("first write names %s by %s: %s", dest, kind_names[kind],
	         held ? "held as a new connection" : "no section matches");
}

int sl_name_from_write(int fd, const struct sl_dest *peer, const struct iovec *iov, int iovcnt,
                       struct sl_dest *d, char *name, size_t namelen, struct sl_match *m)
{
	int kind = name_of_write(fd, peer, iov, iovcnt, d, name, namelen), n;

	if (kind <= 0)
		return 0;
	n = sl_admission_match_meter(d, SL_METER_CONNECTIONS, m);
	log_named(d, kind, n > 0);
	return n;
}

int sl_sniff_first_write(int fd, const struct iovec *iov, int iovcnt, int dontwait, size_t *limit,
                         int *track, int flags, size_t *sent)
{
	struct sl_dest d;
	struct sl_tcp_match t;
	char name[SL_HOST_MAX];
	int kind = name_of_write(fd, NULL, iov, iovcnt, &d, name, sizeof(name));

	if (kind < 0) {
		sl_fdtab_mark_sniff(fd); /* HTTP/2's preface alone: its HEADERS names it */
		return 0;
	}
	if (!kind) {
		/* Named by nothing it writes: by the name the program resolved its
		 * address to, newest first, as its connect would have been - nothing
		 * matched then, unless the address has several names (connect.c). */
		if (peer_of(fd, &d) != 0)
			return 0;
		sl_admission_name(&d, name, sizeof(name));
		if (!d.name)
			return 0;
		d.meter = SL_METER_CONNECTIONS;
	}
	sl_admission_match_tcp(&d, &t);
	if (kind)
		log_named(&d, kind, t.n || t.nr || t.nb);
	if (!t.n && !t.nr && !t.nb)
		return 0;
	if (t.n && sl_held_connect(fd, &d, &t.m, SL_KIND_CONNECTION) < 0)
		return sl_admission_wait(&d, &t.m, "first write", ECONNRESET);
	if ((t.nr || t.nb) && sl_held_stream(fd, &d, &t.rm, &t.bm, 0) < 0)
		sl_debug("first write on fd %d: no free hold record: its requests and bytes go unshaped", fd);
	else if (t.nr && kind == NAMED_H2 && !starts_with_preface(iov, iovcnt))
		sl_stream_h2_named(fd);
	{
		struct sl_match u;

		sl_match_union(&u, &t.m, &t.rm);
		sl_match_union(&u, &u, &t.bm);
		if (sl_held_follow(fd, &d, &u, 0) < 0)
			sl_debug("first write on fd %d: no free hold record: its answers are not read", fd);
	}
	return sl_held_write_inside(fd, dontwait, flags, iov, iovcnt, limit, track, sent);
}
