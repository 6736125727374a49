#ifndef SLUICE_SHIM_H2BOX_H
#define SLUICE_SHIM_H2BOX_H
/*
 * The frames of a plaintext HTTP/2 connection taken from the program while one of
 * its requests waits (docs/design.md, "HTTP/2 bodies with their own request").
 * nghttp2 (node's http2, grpc-js) writes every pending HEADERS before any DATA, so
 * holding the connection's bytes in order at a held HEADERS held every body behind
 * the last request.  Once a non-blocking writer's write meets a held opening
 * HEADERS, the shim takes the write whole into the connection's box and says it
 * was written; frames leave the box in an order HTTP/2 allows:
 *   - header blocks (HEADERS, CONTINUATION) in the order written, each opening
 *     HEADERS at its own release (one opening per admission);
 *   - DATA, WINDOW_UPDATE and RST_STREAM of a stream once its HEADERS is out;
 *   - the connection's own frames (stream 0: SETTINGS, PING, GOAWAY,
 *     WINDOW_UPDATE) and PRIORITY at once; a frame of a type not known here only
 *     when nothing is kept before it.
 * A frame is written whole or, after a short write, its rest goes before anything
 * else.  Every function runs under the record's lock.
 */
#include "record.h"

#include <sys/types.h>
#include <sys/uio.h>

#define SL_H2BOX_MAX (256u * 1024) /* bytes a box takes; a write past it: EAGAIN */

struct sl_h2box {
	uint8_t *buf;      /* taken, not yet written: first `raw` bytes are the rest of
	                    * a frame begun on the wire, then frames in the order the
	                    * program wrote them (the last one may be incomplete) */
	uint32_t len, cap; /* bytes in buf; its size */
	uint32_t raw;
	uint32_t admitted; /* opening HEADERS an admission let go, not yet written */
	uint32_t early;    /* bytes of the next flush's first write already sent
	                    * inside an admission's release (sl_h2box_send_early),
	                    * not yet followed; 0: none */
	ino_t ino;         /* the socket it was opened for (the kicker checks) */
	dev_t dev;
};

/* rec's box, or NULL when its writes go straight to the socket. */
struct sl_h2box *sl_h2box_of(const struct sl_record *rec);

/* Whether a write to rec may be taken into a box: plaintext HTTP/2 followed
 * frame by frame, requests metered (not bytes), its own record (not a fork's). */
int sl_h2box_fits(const struct sl_record *rec);

/* Take up to SL_H2BOX_MAX - len bytes of the write into rec's box (opened for
 * socket fd if needed): the bytes taken, 0 when none could be (full, no memory). */
size_t sl_h2box_take(struct sl_record *rec, int fd, const struct iovec *iov, int iovcnt);

/* Whether the box is full: a write would take nothing. */
int sl_h2box_full(const struct sl_record *rec);

/* Write what may go now on fd: as many opening HEADERS as admissions let go
 * (box->admitted, counted down as they are written).  Followed as written
 * (sl_stream_wrote).  Returns 1 when an opening HEADERS is still kept and none is
 * admitted (it needs an admission), 0 when not; *stuck is set when frames that
 * may go did not (the socket's buffer is full). */
int sl_h2box_flush(struct sl_record *rec, int fd, int *stuck);

/* Inside the release of an admission that lets one more opening HEADERS go
 * (docs/design.md, "Where the bound is kept"): the write sl_h2box_flush would make
 * first once that admission is counted (box->admitted + 1), made now, without
 * waiting and without SIGPIPE.  Only the socket is touched: the bytes are
 * followed by that flush, which the caller makes next with the admission counted
 * and the box unchanged, so it chooses the same frames.  Returns 1 when bytes
 * went. */
int sl_h2box_send_early(struct sl_record *rec, int fd);

/* Empty: its memory back, rec's writes straight to the socket again. */
void sl_h2box_close(struct sl_record *rec);

/* Whether fd is still the socket the box was opened for. */
int sl_h2box_same_socket(const struct sl_record *rec, int fd);

#endif
