/*
 * h2.h - an HTTP/2 connection's frames followed both ways (h2.c; docs/design.md,
 * "HTTP/2 request by request"): the part of a record kept for a connection that
 * speaks HTTP/2, in plaintext on the socket (h2c) or through libssl.
 */
#ifndef SLUICE_SHIM_H2_H
#define SLUICE_SHIM_H2_H

#include "hpack.h"
#include "record.h"
#include "sluice/http2.h"
#include "sluice/response.h"

#include <sys/uio.h>

struct sl_h2box;

struct sl_rec_h2 {
	struct sl_h2_out out;       /* the client's frames: where requests begin */
	struct sl_h2_in in;         /* the server's: header blocks, streams ended */
	struct sl_hpack *hpack;     /* its answers' decoder; NULL: not read */
	uint64_t opened_last;       /* streams the last write opened */
	uint32_t peeked;            /* bytes at the head of the socket's receive queue
	                             * already followed by a peek (sl_h2_peek): the
	                             * program's reads skip them */
	uint32_t pad2;
	uint32_t table_applied;     /* out.table_sets given to the decoder */
	uint8_t said_lost;          /* the reader's giving up was said */
	uint8_t decoding;           /* a block of the server's is part-way through the
	                             * decoder */
	uint8_t wait_inside;        /* its held requests wait inside the write call, even
	                             * on a non-blocking socket (sl_stream_waits_inside) */
	uint8_t pad;
	struct sl_resp_fields f;    /* the block being decoded */
	struct sl_h2box *box;       /* frames taken while a request waits (h2box.h), or
	                             * NULL: writes go straight to the socket */
};

/* Under rec->lock (rec->talk there): the connection speaks HTTP/2 from here, its
 * client's frames followed from `start` (enum sl_h2_start); its answers decoded
 * when `answers`.  0, or -ENOMEM (then nothing of it is followed). */
int sl_h2_begin(struct sl_record *rec, int start, int answers);

void sl_h2_free(struct sl_record *rec);

/* The h2 part of rec, or NULL. */
static inline struct sl_rec_h2 *sl_h2_of(const struct sl_record *rec)
{
	return rec->talk ? rec->talk->h2 : NULL;
}

/* Bytes of the write (iov; a single buffer as one iovec) that may go with `opens`
 * more streams begun in them: SIZE_MAX when all may. */
size_t sl_h2_cut(struct sl_rec_h2 *h, const struct iovec *iov, int iovcnt, uint64_t opens);

/* `n` bytes of it went: followed; returns the streams they opened (also kept in
 * opened_last). */
uint64_t sl_h2_wrote(struct sl_rec_h2 *h, const struct iovec *iov, int iovcnt, size_t n);

/* A block's end: its fields, for the caller to act on; `ends`: the HEADERS ended
 * the stream. */
typedef void (*sl_h2_answer_fn)(struct sl_record *rec, struct sl_resp_fields *f, int ends);

/* `n` bytes read: followed (but for those a peek followed already), and each
 * answer's fields handed to fn. */
void sl_h2_read(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n, sl_h2_answer_fn fn);

/* What waits unread on plaintext socket fd, looked at without taking it
 * (MSG_PEEK) and followed ahead of the program: a client that stops reading while
 * its write is held (node's http2 does) still has its answers heard when the
 * write is tried again (docs/design.md, "HTTP/2 request by request"). */
void sl_h2_peek(struct sl_record *rec, int fd, sl_h2_answer_fn fn);

#endif
