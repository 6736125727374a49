/*
 * http1.h - request boundaries in an outgoing HTTP/1.x byte stream (meter =
 * requests, docs/design.md, "Send paths and event loops").
 *
 * The parser follows what a client writes: request line, headers, then a body
 * framed by Content-Length or chunked transfer coding (with trailers), message
 * after message (keep-alive, pipelining).  It only reads the bytes, in whatever
 * pieces they are written, and keeps a few dozen bytes of state.  It tells the
 * caller where the current request ends, so a write carrying the end of one
 * request and the start of the next can be cut there and the next one held.
 *
 * Anything it cannot follow - not HTTP/1.x, a header line longer than it keeps,
 * a malformed length, a CONNECT or Upgrade (the stream is no longer HTTP) - puts it
 * in SL_H1_LOST, for good: the caller falls back to counting turns.  It is fuzzed.
 */
#ifndef SLUICE_HTTP1_H
#define SLUICE_HTTP1_H

#include <stddef.h>
#include <stdint.h>

enum sl_h1_state {
	SL_H1_IDLE = 0,   /* at a message boundary: the next byte starts a request */
	SL_H1_REQLINE,    /* in the request line */
	SL_H1_HEADER,     /* in a header line */
	SL_H1_BODY,       /* in a Content-Length body: `left` bytes to go */
	SL_H1_CHUNK_SIZE, /* in a chunk-size line (hex digits, then extensions) */
	SL_H1_CHUNK_DATA, /* in chunk data: `left` bytes to go */
	SL_H1_CHUNK_END,  /* the CRLF after chunk data */
	SL_H1_TRAILER,    /* in the trailer section after the last chunk */
	SL_H1_LOST,       /* cannot follow: the caller counts turns instead */
};

#define SL_H1_LINE_KEEP 64 /* bytes of each line kept: enough for the header names
                            * and values that frame a body */

struct sl_http1 {
	uint8_t state;       /* enum sl_h1_state */
	uint8_t flags;       /* internal: what the headers said */
	uint16_t line_len;   /* bytes of the current line seen (capped) */
	uint8_t cr;          /* the last byte of the line so far was a CR */
	uint8_t pad[3];
	uint64_t left;       /* body or chunk bytes still to come */
	uint64_t length;     /* Content-Length seen in this message's headers */
	uint64_t requests;   /* requests begun so far */
	uint64_t heads;      /* bit (n mod 64): request n (0-based) is a HEAD, whose
	                      * answer has no body (response.h asks) */
	char line[SL_H1_LINE_KEEP];
	const char *why;     /* LOST: what could not be followed (static string) */
};

/* A parser at the start of a stream. */
void sl_http1_init(struct sl_http1 *p);

/* What a parser keeps between two calls when it is not inside a line (at a
 * message boundary, in a body or chunk data, after a chunk, or lost): a held
 * socket keeps this much for a connection between its writes, and the whole
 * parser - its line buffer - only while a line spans two of them.  A lost
 * parser's reason is not kept: it was said when it was lost. */
struct sl_h1_parked {
	uint8_t state;
	uint8_t flags;
	uint8_t pad[6];
	uint64_t left;
	uint64_t requests;
	uint64_t heads;
};

/* Park p into *out: 1, or 0 when p is inside a line (it must be kept whole). */
int sl_http1_park(const struct sl_http1 *p, struct sl_h1_parked *out);
/* The parser a parked one stands for. */
void sl_http1_unpark(struct sl_http1 *p, const struct sl_h1_parked *in);

/* Whether `buf` looks like the start of an HTTP/1.x request (a method token, a
 * space): used on a connection's first write to choose parsing over turns. */
int sl_http1_looks_like(const void *buf, size_t len);

/* Advance over up to `len` bytes written to the stream.  Stops at the end of the
 * current message: returns how many bytes were consumed, which is less than `len`
 * only when a new request begins at that offset.  In SL_H1_LOST everything is
 * consumed.  A call made at SL_H1_IDLE with len > 0 begins a request. */
size_t sl_http1_feed(struct sl_http1 *p, const void *buf, size_t len);

/* Advance over `len` bytes whose content is not visible (sendfile): fine inside a
 * body or chunk data, SL_H1_LOST anywhere else.  Returns bytes consumed, as feed. */
size_t sl_http1_skip(struct sl_http1 *p, uint64_t len);

/* Whether the parser stopped at the end of a request asking to Upgrade to h2c
 * (RFC 7540, 3.2): HTTP/2 may follow, the request being its stream 1. */
int sl_http1_upgrade_h2c(const struct sl_http1 *p);

/* A chunk-size line (hex digits, then extensions after ';' or spaces), shared
 * with the response reader (response.h): 0 with *size set, -1 when it cannot be
 * read, -2 when it is too large (more than 15 hex digits). */
int sl_http1_chunk_size(const char *line, size_t kept, uint64_t *size);

#endif
