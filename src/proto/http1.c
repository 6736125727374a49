/* Request boundaries in an outgoing HTTP/1.x stream (http1.h). */
#include "sluice/http1.h"

#include <string.h>

enum {
	F_LENGTH = 1,  /* Content-Length given */
	F_CHUNKED = 2, /* Transfer-Encoding ends in chunked */
	F_TUNNEL = 4,  /* CONNECT or Upgrade: what follows the message is not HTTP/1 */
	F_H2C = 8,     /* the Upgrade asked for is h2c: HTTP/2 may follow (http2.h) */
};

void sl_http1_init(struct sl_http1 *p)
{
	memset(p, 0, sizeof(*p));
}

int sl_http1_park(const struct sl_http1 *p, struct sl_h1_parked *out)
{
	switch (p->state) {
	case SL_H1_IDLE:
	case SL_H1_BODY:
	case SL_H1_CHUNK_DATA:
	case SL_H1_CHUNK_END:
	case SL_H1_LOST:
		break;
	default:
		return 0; /* a request line, a header, a chunk size, a trailer: its line */
	}
	memset(out, 0, sizeof(*out));
	out->state = p->state;
	out->flags = p->flags;
	out->left = p->left;
	out->requests = p->requests;
	out->heads = p->heads;
	return 1;
}

void sl_http1_unpark(struct sl_http1 *p, const struct sl_h1_parked *in)
{
	memset(p, 0, sizeof(*p));
	p->state = in->state;
	p->flags = in->flags;
	p->left = in->left;
	p->requests = in->requests;
	p->heads = in->heads;
}

static int is_method_char(unsigned char c)
{
	return c >= 'A' && c <= 'Z';
}

int sl_http1_looks_like(const void *buf, size_t len)
{
	const unsigned char *b = buf;
	size_t i = 0;

	while (i < len && i < 16 && is_method_char(b[i]))
		i++;
	if (i == 0)
		return 0;
	return i == len || (i < len && b[i] == ' ');
}

static size_t lose(struct sl_http1 *p, const char *why, size_t consumed_all)
{
	p->state = SL_H1_LOST;
	p->why = why;
	return consumed_all;
}

/* Case-insensitive: does the kept line start with header name `name` (lower case,
 * with its colon)?  Sets *value to what follows, spaces skipped. */
static int header_is(const struct sl_http1 *p, size_t kept, const char *name, const char **value,
                     size_t *vlen)
{
	size_t n = strlen(name), i;

	if (kept < n)
		return 0;
	for (i = 0; i < n; i++) {
		char c = p->line[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != name[i])
			return 0;
	}
	while (i < kept && (p->line[i] == ' ' || p->line[i] == '\t'))
		i++;
	*value = p->line + i;
	*vlen = kept - i;
	while (*vlen && ((*value)[*vlen - 1] == ' ' || (*value)[*vlen - 1] == '\t'))
		(*vlen)--;
	return 1;
}

static int parse_decimal(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 18)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

static int contains_token(const char *s, size_t n, const char *tok)
{
	size_t t = strlen(tok);

	for (size_t i = 0; i + t <= n; i++) {
		size_t j = 0;

		while (j < t && (s[i + j] | 0x20) == tok[j])
			j++;
		if (j == t)
			return 1;
	}
	return 0;
}

/* The request line is complete (kept bytes in p->line). */
static int end_request_line(struct sl_http1 *p, size_t kept)
{
	size_t m = 0;

	while (m < kept && is_method_char((unsigned char)p->line[m]))
		m++;
	if (m == 0 || m >= kept || p->line[m] != ' ')
		return -1;
	if (m == 7 && memcmp(p->line, "CONNECT", 7) == 0)
		p->flags |= F_TUNNEL;
	if (m == 4 && memcmp(p->line, "HEAD", 4) == 0)
		p->heads |= 1ull << ((p->requests - 1) & 63);
	p->flags &= F_TUNNEL;
	p->length = 0;
	p->state = SL_H1_HEADER;
	return 0;
}

/* A header line is complete.  Returns 1 when it was the blank line ending the
 * headers (state set for the body), 0 for another header, -1 to give up. */
static int end_header_line(struct sl_http1 *p, size_t kept, size_t full)
{
	const char *v;
	size_t vlen;

	if (full == 0) {
		if (p->flags & F_TUNNEL)
			return lose(p, "CONNECT or Upgrade: the stream is no longer HTTP/1", 0), -1;
		if (p->flags & F_CHUNKED)
			p->state = SL_H1_CHUNK_SIZE;
		else if ((p->flags & F_LENGTH) && p->length)
			p->state = SL_H1_BODY, p->left = p->length;
		else
			p->state = SL_H1_IDLE;
		return 1;
	}
	if (p->line[0] == ' ' || p->line[0] == '\t')
		return lose(p, "obsolete header line folding", 0), -1;
	if (header_is(p, kept, "content-length:", &v, &vlen)) {
		uint64_t n;

		if (full > kept || parse_decimal(v, vlen, &n) < 0 ||
		    ((p->flags & F_LENGTH) && n != p->length))
			return lose(p, "a Content-Length it cannot read", 0), -1;
		p->flags |= F_LENGTH;
		p->length = n;
	} else if (header_is(p, kept, "transfer-encoding:", &v, &vlen)) {
		/* chunked must be the last coding; anything else runs until the close. */
		if (full > kept || vlen < 7 || !contains_token(v + vlen - 7, 7, "chunked"))
			return lose(p, "a Transfer-Encoding other than chunked", 0), -1;
		p->flags |= F_CHUNKED;
	} else if (header_is(p, kept, "upgrade:", &v, &vlen)) {
		p->flags |= F_TUNNEL | (contains_token(v, vlen, "h2c") ? F_H2C : 0);
	}
	return 0;
}

int sl_http1_chunk_size(const char *line, size_t kept, uint64_t *size)
{
	uint64_t v = 0;
	size_t i = 0;

	while (i < kept) {
		char c = line[i];
		int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;

		if (d < 0)
			break;
		if (i >= 15)
			return -2;
		v = v * 16 + (uint64_t)d;
		i++;
	}
	if (i == 0 || (i < kept && line[i] != ';' && line[i] != ' ' && line[i] != '\t'))
		return -1;
	*size = v;
	return 0;
}

static int end_chunk_size(struct sl_http1 *p, size_t kept)
{
	uint64_t v;
	int rc = sl_http1_chunk_size(p->line, kept, &v);

	if (rc < 0)
		return lose(p, rc == -2 ? "a chunk size too large" : "a chunk size it cannot read", 0), -1;
	if (v == 0) {
		p->state = SL_H1_TRAILER;
	} else {
		p->state = SL_H1_CHUNK_DATA;
		p->left = v;
	}
	return 0;
}

/* A line of the current state is complete. */
static int end_line(struct sl_http1 *p)
{
	size_t full = p->line_len, kept = full < SL_H1_LINE_KEEP ? full : SL_H1_LINE_KEEP;

	/* Drop the CR of CRLF (from what was kept too, when it was). */
	if (full && p->cr) {
		if (kept == full)
			kept--;
		full--;
	}
	p->line_len = 0;
	p->cr = 0;
	switch (p->state) {
	case SL_H1_REQLINE:
		if (full == 0)
			return 0; /* a stray blank line before a request */
		if (end_request_line(p, kept) < 0)
			return lose(p, "not an HTTP/1 request line", 0), -1;
		return 0;
	case SL_H1_HEADER:
		return end_header_line(p, kept, full) < 0 ? -1 : 0;
	case SL_H1_CHUNK_SIZE:
		return end_chunk_size(p, kept);
	case SL_H1_TRAILER:
		if (full == 0)
			p->state = SL_H1_IDLE;
		return 0;
	default:
		return 0;
	}
}

size_t sl_http1_feed(struct sl_http1 *p, const void *buf, size_t len)
{
	const unsigned char *b = buf;
	size_t i = 0;

	if (p->state == SL_H1_LOST || !buf)
		return len;
	while (i < len) {
		switch (p->state) {
		case SL_H1_IDLE:
			/* The end of a message stops the feed; a call that starts here
			 * begins the next request. */
			if (i > 0)
				return i;
			if (!is_method_char(b[0]) && b[0] != '\r' && b[0] != '\n')
				return lose(p, "bytes after a message that do not start a request", len);
			p->state = SL_H1_REQLINE;
			p->heads &= ~(1ull << (p->requests & 63));
			p->requests++;
			p->line_len = 0;
			break;
		case SL_H1_BODY:
		case SL_H1_CHUNK_DATA: {
			uint64_t take = len - i < p->left ? len - i : p->left;

			i += take;
			p->left -= take;
			if (p->left == 0)
				p->state = p->state == SL_H1_BODY ? SL_H1_IDLE : SL_H1_CHUNK_END;
			if (p->state == SL_H1_IDLE)
				return i;
			break;
		}
		case SL_H1_CHUNK_END:
			if (b[i] == '\n')
				p->state = SL_H1_CHUNK_SIZE, p->line_len = 0;
			else if (b[i] != '\r')
				return lose(p, "chunk data not followed by CRLF", len);
			i++;
			break;
		default: {
			/* Line states: keep the start of the line, act at its LF. */
			const unsigned char *lf = memchr(b + i, '\n', len - i);
			size_t upto = lf ? (size_t)(lf - b) : len;

			for (size_t k = i; k < upto; k++) {
				if (p->line_len < SL_H1_LINE_KEEP)
					p->line[p->line_len] = (char)b[k];
				if (p->line_len < UINT16_MAX)
					p->line_len++;
			}
			if (upto > i)
				p->cr = b[upto - 1] == '\r';
			i = upto;
			if (!lf)
				break;
			i++; /* the LF */
			if (end_line(p) < 0)
				return len; /* lost: everything goes as it is */
			if (p->state == SL_H1_IDLE)
				return i;
		}
		}
	}
	return i;
}

size_t sl_http1_skip(struct sl_http1 *p, uint64_t len)
{
	if (p->state == SL_H1_LOST)
		return (size_t)len;
	if ((p->state != SL_H1_BODY && p->state != SL_H1_CHUNK_DATA) || len > p->left)
		return lose(p, "bytes sent from a file outside a body", (size_t)len);
	p->left -= len;
	if (p->left == 0)
		p->state = p->state == SL_H1_BODY ? SL_H1_IDLE : SL_H1_CHUNK_END;
	return (size_t)len;
}

int sl_http1_upgrade_h2c(const struct sl_http1 *p)
{
	return p->state == SL_H1_LOST && (p->flags & F_H2C) && p->requests > 0;
}
