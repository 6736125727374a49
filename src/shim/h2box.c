/*
 * A plaintext HTTP/2 connection's box: frames taken from the program while a
 * request waits, written in an order HTTP/2 allows (h2box.h; docs/design.md,
 * "HTTP/2 bodies with their own request").  Under the record's lock.
 */
#include "answers.h"
#include "h2.h"
#include "h2box.h"
#include "slab.h"
#include "stream.h"
#include "sluice/http2.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define MAX_SENDS 64 /* frames gathered for one write; the rest go at the next */
#define SLAB_MAX 8192 /* larger buffers are mapped, as the HPACK decoder's are */

/* A buffer of `size` bytes (a power of two): the slab's up to SLAB_MAX, a mapping
 * beyond - never malloc, which the shim may not call where it runs. */
static void *buf_alloc(size_t size)
{
	void *p;

	if (size <= SLAB_MAX)
		return sl_slab_alloc(size);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void buf_free(void *p, size_t size)
{
	if (size <= SLAB_MAX)
		sl_slab_free(p, size);
	else
		munmap(p, size);
}

struct sl_h2box *sl_h2box_of(const struct sl_record *rec)
{
	const struct sl_rec_h2 *h = sl_h2_of(rec);

	return h ? h->box : NULL;
}

int sl_h2box_fits(const struct sl_record *rec)
{
	const struct sl_rec_h2 *h = sl_h2_of(rec);

	return h && rec->stream && rec->stream->mode == SL_STREAM_H2 && !rec->inherited &&
	       sl_rec_mask(rec, SL_USE_REQ) && !sl_rec_mask(rec, SL_USE_BYTES) && h->out.state != SL_H2_LOST &&
	       h->out.state != SL_H2_PREFACE && !h->out.in_block;
}

static int grow(struct sl_h2box *b, uint32_t need)
{
	uint32_t cap = b->cap ? b->cap : 4096;
	uint8_t *buf;

	while (cap < need)
		cap *= 2;
	if (cap == b->cap)
		return 0;
	if (!(buf = buf_alloc(cap)))
		return -1;
	if (b->len)
		memcpy(buf, b->buf, b->len);
	if (b->buf)
		buf_free(b->buf, b->cap);
	b->buf = buf;
	b->cap = cap;
	return 0;
}

size_t sl_h2box_take(struct sl_record *rec, int fd, const struct iovec *iov, int iovcnt)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);
	struct sl_h2box *b = h ? h->box : NULL;
	size_t room, taken = 0;

	if (!h)
		return 0;
	if (!b) {
		struct stat st;

		if (fstat(fd, &st) != 0 || !(b = sl_slab_alloc(sizeof(*b))))
			return 0;
		memset(b, 0, sizeof(*b));
		b->ino = st.st_ino;
		b->dev = st.st_dev;
		h->box = b;
	}
	room = SL_H2BOX_MAX - b->len;
	for (int i = 0; i < iovcnt; i++)
		taken += iov[i].iov_len;
	taken = SL_MIN(taken, room);
	if (taken == 0 || grow(b, b->len + (uint32_t)taken) < 0) {
		if (b->len == 0)
			sl_h2box_close(rec);
		return 0;
	}
	for (int i = 0, left = (int)taken; i < iovcnt && left > 0; i++) {
		size_t n = SL_MIN(iov[i].iov_len, (size_t)left);

		memcpy(b->buf + b->len, iov[i].iov_base, n);
		b->len += (uint32_t)n;
		left -= (int)n;
	}
	return taken;
}

int sl_h2box_full(const struct sl_record *rec)
{
	const struct sl_h2box *b = sl_h2box_of(rec);

	return b && b->len >= SL_H2BOX_MAX;
}

void sl_h2box_close(struct sl_record *rec)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);
	struct sl_h2box *b = h ? h->box : NULL;

	if (!b)
		return;
	if (b->buf)
		buf_free(b->buf, b->cap);
	sl_slab_free(b, sizeof(*b));
	h->box = NULL;
}

int sl_h2box_same_socket(const struct sl_record *rec, int fd)
{
	const struct sl_h2box *b = sl_h2box_of(rec);
	struct stat st;

	return b && fstat(fd, &st) == 0 && st.st_ino == b->ino && st.st_dev == b->dev;
}

static uint32_t be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t stream_of(const uint8_t *p)
{
	return ((uint32_t)p[5] << 24 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 8 | p[8]) & 0x7fffffffu;
}

/* One frame of the box, as the flush sees it. */
struct piece {
	uint32_t off, len;
};

/* The frames that may go now, in order, into `out` (the raw rest first):
 * returns their count; *kept_opening when an opening HEADERS stays. */
static int choose(const struct sl_h2box *b, uint32_t wire_max, int opens, struct piece *out, int *kept_opening)
{
	uint32_t off = b->raw, max = wire_max;
	int n = 0, blocked = 0, kept = 0;

	*kept_opening = 0;
	if (b->raw)
		out[n++] = (struct piece){0, b->raw};
	while (off + SL_H2_HEAD_LEN <= b->len && n < MAX_SENDS) {
		const uint8_t *f = b->buf + off;
		uint32_t len = SL_H2_HEAD_LEN + be24(f), s = stream_of(f);
		int go;

		if (off + len > b->len)
			break; /* incomplete: the program's next write brings the rest */
		switch (f[3]) {
		case SL_H2_HEADERS:
			if ((s & 1) && s > max) { /* opens a stream: one per admission, in order */
				go = !blocked && opens > 0;
				if (go) {
					opens--;
					max = s;
				} else {
					*kept_opening = 1;
				}
			} else {
				go = !blocked; /* trailers: header blocks keep their order */
			}
			if (!go)
				blocked = 1;
			break;
		case SL_H2_CONTINUATION:
		case SL_H2_PUSH_PROMISE:
			go = !blocked;
			break;
		case SL_H2_DATA:
		case SL_H2_RST_STREAM:
		case SL_H2_WINDOW_UPDATE:
			go = s == 0 || s <= max;
			break;
		case SL_H2_SETTINGS:
		case SL_H2_PING:
		case SL_H2_GOAWAY:
		case SL_H2_PRIORITY:
			go = 1;
			break;
		default:
			go = !kept; /* not known here: never ahead of what is kept */
		}
		if (go)
			out[n++] = (struct piece){off, len};
		else
			kept = 1;
		off += len;
	}
	return n;
}

/* The box less the `sent` bytes written of the chosen pieces p[0..n) (in
 * ascending order): a piece begun but not finished goes first (its rest is the
 * new raw), then every byte of no piece sent or begun, in order.  0, or -1 with
 * the box as it was (no memory for the new one). */
static int cut_out(struct sl_h2box *b, const struct piece *p, int n, size_t sent)
{
	uint8_t *buf = buf_alloc(b->cap);
	uint32_t len = 0, from = 0, rest = 0;
	int i = 0;

	if (!buf)
		return -1;
	for (; i < n && sent >= p[i].len; i++)
		sent -= p[i].len;
	if (i < n && sent > 0) {
		rest = p[i].len - (uint32_t)sent;
		memcpy(buf, b->buf + p[i].off + sent, rest);
		len = rest;
		i++; /* pieces 0..i-1 leave the box (one of them by its rest, placed first) */
	}
	for (int k = 0; k < i; k++) {
		memcpy(buf + len, b->buf + from, p[k].off - from);
		len += p[k].off - from;
		from = p[k].off + p[k].len;
	}
	memcpy(buf + len, b->buf + from, b->len - from);
	len += b->len - from;
	buf_free(b->buf, b->cap);
	b->buf = buf;
	b->len = len;
	b->raw = rest;
	return 0;
}

/* Whether an opening HEADERS (a client stream above max) is in the box. */
static int has_opening(const struct sl_h2box *b, uint32_t max)
{
	for (uint32_t off = b->raw; off + SL_H2_HEAD_LEN <= b->len;) {
		const uint8_t *f = b->buf + off;

		if (f[3] == SL_H2_HEADERS && (stream_of(f) & 1) && stream_of(f) > max)
			return 1;
		off += SL_H2_HEAD_LEN + be24(f);
	}
	return 0;
}

static ssize_t send_pieces(int fd, const struct msghdr *mh)
{
	return sl_real.sendmsg ? sl_real.sendmsg(fd, mh, MSG_DONTWAIT | MSG_NOSIGNAL)
	                       : sl_sys(SYS_sendmsg, fd, mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* The chosen pieces of the box as one message, in iov (room for n) and mh;
 * returns their bytes. */
static size_t gather(const struct sl_h2box *b, const struct piece *p, int n, struct iovec *iov, struct msghdr *mh)
{
	size_t total = 0;

	for (int i = 0; i < n; i++) {
		iov[i].iov_base = b->buf + p[i].off;
		iov[i].iov_len = p[i].len;
		total += p[i].len;
	}
	*mh = (struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)n};
	return total;
}

int sl_h2box_send_early(struct sl_record *rec, int fd)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);
	struct sl_h2box *b = h ? h->box : NULL;
	struct piece p[MAX_SENDS];
	struct iovec iov[MAX_SENDS];
	struct msghdr mh;
	int n, kept, saved = errno;
	ssize_t w;

	if (!b)
		return 0;
	b->early = 0;
	if (!(n = choose(b, h->out.max_stream, (int)b->admitted + 1, p, &kept)))
		return 0;
	gather(b, p, n, iov, &mh);
	w = send_pieces(fd, &mh);
	errno = saved;
	if (w <= 0)
		return 0;
	b->early = (uint32_t)w;
	return 1;
}

/* One write of what may go now (at most MAX_SENDS frames): -1 when the box was
 * closed (no memory), else 1 when more frames than one write took may go. */
static int flush_once(struct sl_record *rec, struct sl_rec_h2 *h, int fd, int *stuck, int *kept_opening)
{
	struct sl_h2box *b = h->box;
	struct piece p[MAX_SENDS];
	struct iovec iov[MAX_SENDS];
	struct msghdr mh;
	uint32_t max_before;
	size_t total;
	int n;
	ssize_t w;

	n = choose(b, h->out.max_stream, (int)b->admitted, p, kept_opening);
	if (n == 0)
		return 0;
	total = gather(b, p, n, iov, &mh);
	if (b->early) {
		/* Sent inside the release: the same frames (sl_h2box_send_early). */
		w = (ssize_t)SL_MIN((size_t)b->early, total);
		b->early = 0;
	} else {
		w = send_pieces(fd, &mh);
	}
	if (w <= 0) {
		/* EAGAIN: a full buffer, tried again; anything else the program's own
		 * next call on the socket hears from the kernel. */
		*stuck = w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
		return 0;
	}
	/* Followed as written: the stream's requests, the answers' streams; an
	 * opening HEADERS written used its admission. */
	max_before = h->out.max_stream;
	sl_stream_wrote(rec, iov, n, (size_t)w);
	if (sl_rec_mask(rec, SL_USE_SIG))
		sl_signals_wrote(rec, iov, n, (size_t)w);
	if (h->out.max_stream > max_before && b->admitted)
		b->admitted--;
	*stuck = (size_t)w < total;
	if (cut_out(b, p, n, (size_t)w) < 0) {
		/* Written, but no memory to set the box anew: what went cannot be told
		 * apart from what stays, and sending it twice would break the stream -
		 * the connection is ended, as a refused request ends it. */
		if (sl_real.shutdown)
			sl_real.shutdown(fd, SHUT_RDWR);
		sl_h2box_close(rec);
		return -1;
	}
	return !*stuck && n == MAX_SENDS;
}

int sl_h2box_flush(struct sl_record *rec, int fd, int *stuck)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);
	int kept_opening = 0, more = 1;

	*stuck = 0;
	if (!h || !h->box)
		return 0;
	/* Bounded: each round writes MAX_SENDS frames of a box of at most
	 * SL_H2BOX_MAX bytes. */
	for (int rounds = 0; rounds < 1024 && more > 0; rounds++)
		more = flush_once(rec, h, fd, stuck, &kept_opening);
	if (more < 0 || !h->box)
		return 0;
	return has_opening(h->box, h->out.max_stream) && !h->box->admitted;
}
