/*
 * http2.h - HTTP/2 frames on a shaped connection, both ways (meter = requests and
 * the destination's signals; docs/design.md, "HTTP/2 request by request").
 *
 * Two followers, both pure (no clock, no segment, no allocation):
 *   - sl_h2_out follows what the client writes: the connection preface, then
 *     frame after frame.  A request begins where a HEADERS frame opens a new
 *     client stream (an odd id above every one opened before).  Like http1.h it
 *     tells the caller where the next request begins, so a write carrying frames
 *     of open streams and then a new stream's HEADERS is cut there and the
 *     HEADERS held.  It also reads the client's SETTINGS_HEADER_TABLE_SIZE, which
 *     bounds the dynamic table the server's answers may use;
 *   - sl_h2_in follows what the server sends: it hands over the header block
 *     fragments (HEADERS, CONTINUATION, PUSH_PROMISE, with padding and priority
 *     fields taken off) for an HPACK decoder, and counts the client streams the
 *     server ended (END_STREAM or RST_STREAM).
 * What either cannot follow - not the preface, a frame that breaks the framing
 * rules - puts it in SL_H2_LOST for good: the caller stops looking at the
 * connection (never breaks it).  Both are fuzzed.
 */
#ifndef SLUICE_HTTP2_H
#define SLUICE_HTTP2_H

#include <stddef.h>
#include <stdint.h>

#define SL_H2_PREFACE_LEN 24 /* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define SL_H2_HEAD_LEN 9     /* length(24) type(8) flags(8) R+stream(32) */
#define SL_H2_TABLE_DEFAULT 4096 /* SETTINGS_HEADER_TABLE_SIZE until one is sent */

enum sl_h2_state {
	SL_H2_PREFACE = 0, /* in the client's connection preface (out only) */
	SL_H2_HEAD,        /* in (or at the start of) a frame header */
	SL_H2_PAYLOAD,     /* in a frame's payload: `left` bytes to go */
	SL_H2_LOST,        /* cannot follow: left alone from here */
};

/* Frame types (RFC 9113, section 6). */
enum {
	SL_H2_DATA = 0,
	SL_H2_HEADERS = 1,
	SL_H2_PRIORITY = 2,
	SL_H2_RST_STREAM = 3,
	SL_H2_SETTINGS = 4,
	SL_H2_PUSH_PROMISE = 5,
	SL_H2_PING = 6,
	SL_H2_GOAWAY = 7,
	SL_H2_WINDOW_UPDATE = 8,
	SL_H2_CONTINUATION = 9,
};

/* --- the client's side --- */

struct sl_h2_out {
	uint8_t state;         /* enum sl_h2_state */
	uint8_t got;           /* PREFACE: bytes of it seen; HEAD: bytes of head[] */
	uint8_t in_block;      /* a header block is open: only CONTINUATION may follow */
	uint8_t set_got;       /* SETTINGS: bytes of the current 6-byte entry seen */
	uint8_t head[SL_H2_HEAD_LEN];
	uint8_t set_entry[6];
	uint8_t pad;
	uint32_t left;         /* PAYLOAD: bytes of it to go */
	uint32_t max_stream;   /* the highest client stream opened */
	uint32_t table_size;   /* SETTINGS_HEADER_TABLE_SIZE the client sent last */
	uint32_t table_sets;   /* how many times it sent one (the reader follows) */
	uint64_t opened;       /* streams opened: requests begun */
	uint64_t resets;       /* RST_STREAM frames the client sent */
	const char *why;       /* LOST: what could not be followed (static string) */
};

/* Where a follower starts. */
enum sl_h2_start {
	SL_H2_AT_PREFACE = 0, /* the connection's start: the preface comes first */
	SL_H2_UPGRADED = 1,   /* after an HTTP/1.1 Upgrade to h2c: stream 1 is the
	                       * request that asked, the preface comes next */
	SL_H2_AFTER_PREFACE = 2, /* the preface and whole frames went unseen: a frame
	                          * header comes next */
};

/* A follower starting at `start` (enum sl_h2_start). */
void sl_h2_out_init(struct sl_h2_out *p, int start);

/* Advance over up to `len` bytes written.  `*opens` is how many new streams may
 * begin in them: the follower stops before the header of the first frame that
 * would open one more (returns the bytes consumed, less than `len` only there),
 * and counts down *opens for each it passes.  A header split over two calls is
 * judged when whole: the bytes of it given before stay taken, the call that
 * completes it stops at its own offset 0.  NULL opens: no limit.  In SL_H2_LOST
 * everything is consumed. */
size_t sl_h2_out_feed(struct sl_h2_out *p, const void *buf, size_t len, uint64_t *opens);

/* Whether `len` bytes at the start of buf may be the connection preface (the
 * preface, or its start when fewer than 24 bytes). */
int sl_h2_is_preface(const void *buf, size_t len);

/* --- the server's side --- */

/* Whether `len` bytes read before the client wrote anything start as an HTTP/2
 * server's preface does: a SETTINGS frame on stream 0, not an ACK, its length a
 * multiple of six (a server may send it before the client's preface arrives). */
int sl_h2_is_server_preface(const void *buf, size_t len);

struct sl_h2_in {
	uint8_t state;         /* SL_H2_HEAD, SL_H2_PAYLOAD or SL_H2_LOST */
	uint8_t got;           /* HEAD: bytes of head[] */
	uint8_t pre;           /* PAYLOAD: bytes before the block still to skip (pad
	                        * length, priority, promised stream) ... */
	uint8_t pre_pad;       /* ... of which the first is the pad length (PADDED) */
	uint8_t head[SL_H2_HEAD_LEN];
	uint8_t in_block;      /* a header block is open: CONTINUATION must follow */
	uint8_t block_push;    /* the open block is a PUSH_PROMISE's */
	uint8_t block_ends;    /* the open block's HEADERS had END_STREAM */
	uint32_t left;         /* PAYLOAD: payload bytes to go (padding included) */
	uint32_t trail;        /* PAYLOAD: of them, padding at the end */
	uint32_t block_stream; /* the stream of the open block */
	uint32_t ended_top;    /* the highest client stream it ended ... */
	uint64_t ended_bits;   /* ... and bit k: stream ended_top - 2k ended (an END_STREAM
	                        * and a RST_STREAM of one stream count once) */
	uint64_t ended;        /* client streams the server ended */
	const char *why;
};

void sl_h2_in_init(struct sl_h2_in *p);

/* A piece of a header block, handed over as it is read: `last` on the piece that
 * ends it (END_HEADERS), which may be empty.  `push`: a PUSH_PROMISE's block (its
 * fields only keep the decoder's table in step).  `ends`: the block's HEADERS
 * ended the stream (trailers, or an answer without a body).  Returns 0, or -1 to
 * give up on the connection (the decoder failed). */
typedef int (*sl_h2_block_fn)(void *arg, uint32_t stream, const uint8_t *frag, size_t n, int last, int push,
                              int ends);

/* Advance over `len` bytes read; every fragment in them goes to `fn`. */
void sl_h2_in_feed(struct sl_h2_in *p, const void *buf, size_t len, sl_h2_block_fn fn, void *arg);

#endif
