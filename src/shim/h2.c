/*
 * An HTTP/2 connection's frames followed both ways (h2.h): the client's, for where
 * requests begin (proto/http2.c), and the server's, whose header blocks go to
 * nghttp2's HPACK decoder (hpack.c) so that its answers' fields - :status,
 * Retry-After, the RateLimit fields, grpc-status - can be acted on as HTTP/1's
 * are.  Bytes are only read.  All under the record's lock.
 */
#include "h2.h"
#include "h2box.h"
#include "slab.h"

#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <string.h>

static int find_libcurl(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	return info->dlpi_name && strstr(info->dlpi_name, "/libcurl") != NULL;
}

/* Whether libcurl is in the process: its HTTP/2 (7.88, Debian 12's) takes a write
 * refused with EAGAIN right after it submits a new stream as "nothing sent", sends
 * the request again as the stream's body and fails it - so its held requests wait
 * inside the call instead.  Asked once. */
static int libcurl_loaded(void)
{
	static _Atomic int known; /* 0: not asked yet; 1: no; 2: yes */
	int k = atomic_load(&known);

	if (!k) {
		k = dl_iterate_phdr(find_libcurl, NULL) ? 2 : 1;
		atomic_store(&known, k);
	}
	return k == 2;
}

int sl_h2_begin(struct sl_record *rec, int start, int answers)
{
	struct sl_rec_h2 *h;

	if (!rec->talk)
		return -ENOMEM;
	if (rec->talk->h2)
		return 0;
	if (!(h = sl_slab_alloc(sizeof(*h))))
		return -ENOMEM;
	memset(h, 0, sizeof(*h));
	sl_h2_out_init(&h->out, start);
	sl_h2_in_init(&h->in);
	sl_resp_fields_clear(&h->f);
	h->wait_inside = (uint8_t)libcurl_loaded();
	/* Without a decoder the frames are still followed: requests counted, streams
	 * ended; only the answers' fields go unread. */
	if (answers && !(h->hpack = sl_hpack_new()))
		sl_debug("HTTP/2 on fd %d: no HPACK decoder to be had: its answers are not read", rec->fd);
	rec->talk->h2 = h;
	sl_debug("HTTP/2 on fd %d%s: requests are its streams, answers read from its frames", rec->fd,
	         start == SL_H2_UPGRADED ? " (upgraded from HTTP/1.1)" : "");
	return 0;
}

void sl_h2_free(struct sl_record *rec)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);

	if (!h)
		return;
	sl_h2box_close(rec);
	sl_hpack_free(h->hpack);
	sl_slab_free(h, sizeof(*h));
	rec->talk->h2 = NULL;
}

size_t sl_h2_cut(struct sl_rec_h2 *h, const struct iovec *iov, int iovcnt, uint64_t opens)
{
	struct sl_h2_out copy = h->out; /* only looked at */
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++) {
		size_t got;

		if (!iov[i].iov_len)
			continue;
		got = sl_h2_out_feed(&copy, iov[i].iov_base, iov[i].iov_len, &opens);
		n += got;
		if (got < iov[i].iov_len)
			return n;
	}
	return SIZE_MAX;
}

uint64_t sl_h2_wrote(struct sl_rec_h2 *h, const struct iovec *iov, int iovcnt, size_t n)
{
	uint64_t before = h->out.opened;
	int was_lost = h->out.state == SL_H2_LOST;

	for (int i = 0; i < iovcnt && n > 0; i++) {
		size_t take = SL_MIN(iov[i].iov_len, n);

		sl_h2_out_feed(&h->out, iov[i].iov_base, take, NULL);
		n -= take;
	}
	if (h->out.state == SL_H2_LOST && !was_lost)
		sl_debug("HTTP/2: cannot follow what the client writes (%s): its requests are no longer told apart",
		         h->out.why ? h->out.why : "?");
	h->opened_last = h->out.opened - before;
	return h->opened_last;
}

struct reading {
	struct sl_record *rec;
	struct sl_rec_h2 *h;
	sl_h2_answer_fn fn;
};

static void on_field(void *arg, const char *name, size_t nn, const char *v, size_t vn)
{
	sl_resp_field(arg, name, nn, v, vn);
}

/* A piece of a header block from the server: decoded, every block (pushed ones
 * too), so that the decoder's table stays the server's. */
static int on_block(void *arg, uint32_t stream, const uint8_t *frag, size_t n, int last, int push, int ends)
{
	struct reading *r = arg;
	struct sl_rec_h2 *h = r->h;

	(void)stream;
	if (!h->hpack)
		return 0;
	if (!h->decoding) { /* a block begins: the table the client allows, then fields */
		if (h->table_applied != h->out.table_sets) {
			if (sl_hpack_table(h->hpack, h->out.table_size) < 0)
				return -1;
			h->table_applied = h->out.table_sets;
		}
		sl_resp_fields_clear(&h->f);
		h->decoding = 1;
	}
	if (sl_hpack_feed(h->hpack, frag, n, last, on_field, &h->f) < 0)
		return -1;
	if (last) {
		h->decoding = 0;
		if (!push)
			r->fn(r->rec, &h->f, ends);
	}
	return 0;
}

static void said_lost(struct sl_record *rec, struct sl_rec_h2 *h)
{
	if (h->in.state == SL_H2_LOST && !h->said_lost) {
		h->said_lost = 1;
		sl_debug("HTTP/2 answers on fd %d: cannot follow (%s): left alone", rec->fd,
		         h->in.why ? h->in.why : "?");
	}
}

void sl_h2_read(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n, sl_h2_answer_fn fn)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);
	struct reading r = {rec, h, fn};

	if (!h || h->in.state == SL_H2_LOST)
		return;
	for (int i = 0; i < iovcnt && n > 0 && h->in.state != SL_H2_LOST; i++) {
		size_t take = SL_MIN(iov[i].iov_len, n), skip = SL_MIN(take, (size_t)h->peeked);

		h->peeked -= (uint32_t)skip; /* followed already, by a peek */
		if (take > skip)
			sl_h2_in_feed(&h->in, (const char *)iov[i].iov_base + skip, take - skip, on_block, &r);
		n -= take;
	}
	said_lost(rec, h);
}

/* The most a peek looks at: the answers near the head of the queue (a long body
 * ahead of them is not looked past). */
#define PEEK_MAX 4096

void sl_h2_peek(struct sl_record *rec, int fd, sl_h2_answer_fn fn)
{
	struct sl_rec_h2 *h = sl_h2_of(rec);
	struct reading r = {rec, h, fn};
	uint8_t buf[PEEK_MAX];
	uint32_t begun;
	long got;

	if (!h || !h->hpack || h->in.state == SL_H2_LOST || h->peeked >= PEEK_MAX)
		return;
	/* A read under way may have taken bytes it has not handed over yet: what a
	 * peek sees would then not follow what was followed.  Looked at only when no
	 * read is under way, before and after the peek (a read begun after it takes
	 * the head, which is what was peeked). */
	begun = atomic_load(&rec->reads_begun);
	if (begun != atomic_load(&rec->reads_done))
		return;
	got = sl_sys(SYS_recvfrom, fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT, NULL, NULL);
	if (got <= (long)h->peeked || atomic_load(&rec->reads_begun) != begun ||
	    atomic_load(&rec->reads_done) != begun)
		return;
	sl_h2_in_feed(&h->in, buf + h->peeked, (size_t)got - h->peeked, on_block, &r);
	h->peeked = (uint32_t)got;
	said_lost(rec, h);
}
