/*
 * response.h - the HTTP/1.x responses coming back on a shaped connection, read
 * for what the destination says about its limit (docs/shaping.md, "Signals from the
 * destination").
 *
 * Two parts, both pure (no clock, no segment):
 *   - a stream parser that follows responses in whatever pieces they are read:
 *     status line, headers, then a body framed by Content-Length, chunked coding
 *     or the connection's close; 1xx responses before the final one; no body for
 *     HEAD, 204 and 304.  It keeps the values of the few headers that carry
 *     signals and hands them over when a final response's headers end.  It only
 *     reads the bytes.  What it cannot follow (not HTTP/1.x, a 101 or a CONNECT's
 *     tunnel, a malformed framing header) puts it in SL_RESP_LOST for good; the
 *     caller leaves the connection alone from then on;
 *   - sl_signal_decide(), which turns one response's fields into what the
 *     section (or key) should do: nothing, pause until an instant, or let at most
 *     R more requests go until an instant.
 * Both are fuzzed and unit-tested for every header form.
 */
#ifndef SLUICE_RESPONSE_H
#define SLUICE_RESPONSE_H

#include <stddef.h>
#include <stdint.h>

enum sl_resp_state {
	SL_RESP_IDLE = 0,   /* between responses: the next byte starts a status line */
	SL_RESP_STATUS,     /* in the status line */
	SL_RESP_HEADER,     /* in a header line */
	SL_RESP_BODY,       /* in a Content-Length body: `left` bytes to go */
	SL_RESP_CHUNK_SIZE, /* in a chunk-size line */
	SL_RESP_CHUNK_DATA, /* in chunk data: `left` bytes to go */
	SL_RESP_CHUNK_END,  /* the CRLF after chunk data */
	SL_RESP_TRAILER,    /* the trailer section after the last chunk */
	SL_RESP_TO_CLOSE,   /* a body that runs until the connection closes */
	SL_RESP_LOST,       /* cannot follow: left alone from here */
};

/* Bytes of each line kept: a RateLimit field naming a few policies fits. */
#define SL_RESP_LINE_KEEP 256

/* What one response's headers said (only the fields that carry signals).
 * Numbers are as sent; -1: absent or malformed (malformed fields are ignored). */
struct sl_resp_fields {
	uint16_t status;
	uint8_t age_positive;      /* Age: above zero (a cached answer: ignored) */
	uint8_t retry_is_date;     /* retry_after is epoch seconds from an HTTP-date */
	uint8_t grpc;              /* content-type application/grpc...: its status comes in
	                            * the trailers */
	int64_t retry_after;       /* delta seconds, or epoch seconds (retry_is_date) */
	/* RateLimit: "p";r=R;t=T (the IETF draft now), the most restrictive policy */
	int64_t rl_r, rl_t;
	/* RateLimit: limit=L, remaining=R, reset=T (draft-07), or the separate
	 * RateLimit-Remaining and RateLimit-Reset fields (drafts 00-06): delta seconds */
	int64_t rl_remaining, rl_reset;
	/* X-RateLimit-Remaining and X-RateLimit-Reset: delta seconds, epoch seconds or
	 * epoch milliseconds (sl_signal_decide tells them apart) */
	int64_t x_remaining, x_reset;
	/* HTTP/2 only (http2.h): gRPC's status in trailers (or a trailers-only answer)
	 * and grpc-retry-pushback-ms */
	int64_t grpc_status, pushback_ms;
};

/* gRPC's RESOURCE_EXHAUSTED: the server's way of saying 429. */
#define SL_GRPC_RESOURCE_EXHAUSTED 8

/* One field of an answer, as HTTP/2 hands them over decoded (name in lower case,
 * ":status" among them): kept in f when it carries a signal.  The HTTP/1 reader
 * goes through it for each header line too. */
void sl_resp_field(struct sl_resp_fields *f, const char *name, size_t nn, const char *v, size_t vn);

/* Fields as they are before an answer's first (every number -1: absent). */
void sl_resp_fields_clear(struct sl_resp_fields *f);

struct sl_response {
	uint8_t state;       /* enum sl_resp_state */
	uint8_t flags;       /* internal: framing the headers gave */
	uint8_t cr;          /* the last byte of the line so far was a CR */
	uint8_t pad;
	uint16_t line_len;   /* bytes of the current line seen (capped) */
	uint16_t pad2;
	uint64_t left;       /* body or chunk bytes still to come */
	uint64_t length;     /* Content-Length of this response */
	uint64_t finals;     /* final responses begun (the request each answers) */
	struct sl_resp_fields f;
	char line[SL_RESP_LINE_KEEP];
	const char *why;     /* LOST: what could not be followed (static string) */
};

/* A parser at the start of a connection's responses. */
void sl_resp_init(struct sl_response *p);

/* What a parser keeps between two reads when it is not inside a line (between
 * responses, in a body or chunk data, after a chunk, in a body that runs to the
 * close, or lost): as sl_h1_parked, for the answers a held socket follows. */
struct sl_resp_parked {
	uint8_t state;
	uint8_t flags;
	uint8_t pad[6];
	uint64_t left;
	uint64_t finals;
};

/* Park p into *out: 1, or 0 when p is inside a line (it must be kept whole). */
int sl_resp_park(const struct sl_response *p, struct sl_resp_parked *out);
/* The parser a parked one stands for. */
void sl_resp_unpark(struct sl_response *p, const struct sl_resp_parked *in);

/* Whether request number `n` (0-based, in the order sent) was a HEAD: answered by
 * the caller from what it saw written (no body follows its response). */
typedef int (*sl_resp_is_head)(void *arg, uint64_t n);

/* Advance over `len` bytes read from the connection.  Returns how many were
 * consumed, stopping where a final response's headers end: then *ready is 1 and
 * *out filled - the caller acts on it and feeds the rest.  Otherwise *ready is 0
 * and everything was consumed (in SL_RESP_LOST, unread). */
size_t sl_resp_feed(struct sl_response *p, const void *buf, size_t len, sl_resp_is_head is_head,
                    void *arg, struct sl_resp_fields *out, int *ready);

/* The connection ended (EOF): a body framed by the close is complete. */
void sl_resp_eof(struct sl_response *p);

/* Final responses read to their end - headers and whole body (a HEAD's, 204's or
 * 304's with their headers): one less than finals while inside one's body, or
 * lost (its end is then not known). */
uint64_t sl_resp_ended(const struct sl_response *p);

/* What a response asks of the queue. */
enum sl_signal_kind {
	SL_SIGNAL_NONE = 0,
	SL_SIGNAL_RETRY_AFTER,   /* 429/503 with Retry-After */
	SL_SIGNAL_RATELIMIT,     /* RateLimit r=0;t=T (or r=R above zero: a budget) */
	SL_SIGNAL_RATELIMIT_07,  /* RateLimit remaining=0, reset=T, or RateLimit-Remaining */
	SL_SIGNAL_X_RATELIMIT,   /* X-RateLimit-Remaining: 0 with X-RateLimit-Reset */
	SL_SIGNAL_BARE_429,      /* a 429 that says nothing more: the default back-off */
	SL_SIGNAL_FLEET,         /* not an answer here: another machine of the fleet's */
	SL_SIGNAL_KINDS
};

/* A short name of a kind ("retry-after", "ratelimit", ...) for logs and stat. */
const char *sl_signal_name(unsigned kind);

struct sl_signal {
	uint8_t kind;       /* enum sl_signal_kind */
	uint16_t status;
	int64_t pause_ms;   /* release nothing for this long from now (> 0), or 0 */
	int64_t budget;     /* > 0: at most this many more requests ... */
	int64_t budget_ms;  /* ... in the next budget_ms */
	uint8_t good;       /* a 2xx or 3xx that asks nothing: `adapt` climbs back */
};

/* What response `f` asks, at wall-clock time now_s (epoch seconds, for
 * HTTP-dates and epoch resets).  Precedence (docs/shaping.md, "Signals from the destination"): an Age above zero makes it
 * say nothing; gRPC's RESOURCE_EXHAUSTED is a 429 whose grpc-retry-pushback-ms
 * is its Retry-After; Retry-After on a 429 or 503 wins over the reset fields; then
 * RateLimit (draft now), RateLimit draft-07 forms, X-RateLimit; a 429 with none of
 * them is SL_SIGNAL_BARE_429 with pause_ms 0 (the caller's back-off decides). */
void sl_signal_decide(const struct sl_resp_fields *f, int64_t now_s, struct sl_signal *out);

/* An HTTP-date (IMF-fixdate, RFC 850 or asctime) as epoch seconds, or -1. */
int64_t sl_http_date(const char *s, size_t n);

#endif
