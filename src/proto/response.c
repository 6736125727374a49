/* HTTP/1.x responses read for the destination's signals (response.h). */
#include "sluice/response.h"

#include "sluice/http1.h"

#include <string.h>

enum {
	F_LENGTH = 1,  /* Content-Length given */
	F_CHUNKED = 2, /* Transfer-Encoding ends in chunked */
	F_TO_CLOSE = 4, /* another Transfer-Encoding: the body runs until the close */
};

#define NUM_MAX 999999999999999LL /* 15 digits: larger numbers are malformed here */

static void fields_clear(struct sl_resp_fields *f)
{
	memset(f, 0, sizeof(*f));
	f->retry_after = f->rl_r = f->rl_t = -1;
	f->rl_remaining = f->rl_reset = f->x_remaining = f->x_reset = -1;
	f->grpc_status = f->pushback_ms = -1;
}

void sl_resp_init(struct sl_response *p)
{
	memset(p, 0, sizeof(*p));
	fields_clear(&p->f);
}

int sl_resp_park(const struct sl_response *p, struct sl_resp_parked *out)
{
	switch (p->state) {
	case SL_RESP_IDLE:
	case SL_RESP_BODY:
	case SL_RESP_CHUNK_DATA:
	case SL_RESP_CHUNK_END:
	case SL_RESP_TO_CLOSE:
	case SL_RESP_LOST:
		break;
	default:
		return 0; /* a status line, a header, a chunk size, a trailer: its line */
	}
	memset(out, 0, sizeof(*out));
	out->state = p->state;
	out->flags = p->flags;
	out->left = p->left;
	out->finals = p->finals;
	return 1;
}

void sl_resp_unpark(struct sl_response *p, const struct sl_resp_parked *in)
{
	sl_resp_init(p);
	p->state = in->state;
	p->flags = in->flags;
	p->left = in->left;
	p->finals = in->finals;
}

static size_t lose(struct sl_response *p, const char *why, size_t consumed)
{
	p->state = SL_RESP_LOST;
	p->why = why;
	return consumed;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* s[0..n) without the spaces around it. */
static void trim(const char **s, size_t *n)
{
	while (*n && is_space(**s))
		(*s)++, (*n)--;
	while (*n && is_space((*s)[*n - 1]))
		(*n)--;
}

/* A whole non-negative decimal, or -1. */
static int64_t decimal(const char *s, size_t n)
{
	int64_t v = 0;

	trim(&s, &n);
	if (n == 0 || n > 15)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v <= NUM_MAX ? v : -1;
}

/* Case-insensitive: is the line's name `name` (lower case, no colon)?  *v, *vn:
 * the value, trimmed. */
static int header_is(const char *line, size_t kept, const char *name, const char **v, size_t *vn)
{
	size_t n = strlen(name), i;

	if (kept <= n || line[n] != ':')
		return 0;
	for (i = 0; i < n; i++)
		if ((char)(line[i] >= 'A' && line[i] <= 'Z' ? line[i] - 'A' + 'a' : line[i]) != name[i])
			return 0;
	*v = line + n + 1;
	*vn = kept - n - 1;
	trim(v, vn);
	return 1;
}

static int lower(char c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int word_is(const char *s, size_t n, const char *w)
{
	size_t k = strlen(w);

	if (n != k)
		return 0;
	for (size_t i = 0; i < k; i++)
		if (lower(s[i]) != w[i])
			return 0;
	return 1;
}

/* --- HTTP-dates (RFC 9110 §5.6.7) --- */

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

struct cursor {
	const char *s;
	size_t n, i;
};

static int digits(struct cursor *c, size_t min, size_t max, int64_t *out)
{
	size_t k = 0;
	int64_t v = 0;

	while (c->i < c->n && k < max && c->s[c->i] >= '0' && c->s[c->i] <= '9')
		v = v * 10 + (c->s[c->i++] - '0'), k++;
	*out = v;
	return k >= min;
}

static int expect(struct cursor *c, char ch)
{
	if (c->i < c->n && c->s[c->i] == ch) {
		c->i++;
		return 1;
	}
	return 0;
}

static void spaces(struct cursor *c)
{
	while (c->i < c->n && c->s[c->i] == ' ')
		c->i++;
}

static int month(struct cursor *c, int64_t *m)
{
	static const char names[] = "janfebmaraprmayjunjulaugsepoctnovdec";

	if (c->n - c->i < 3)
		return 0;
	for (int k = 0; k < 12; k++)
		if (lower(c->s[c->i]) == names[3 * k] && lower(c->s[c->i + 1]) == names[3 * k + 1] &&
		    lower(c->s[c->i + 2]) == names[3 * k + 2]) {
			*m = k + 1;
			c->i += 3;
			return 1;
		}
	return 0;
}

static int clock_of_day(struct cursor *c, int64_t *hh, int64_t *mm, int64_t *ss)
{
	return digits(c, 2, 2, hh) && expect(c, ':') && digits(c, 2, 2, mm) && expect(c, ':') &&
	       digits(c, 2, 2, ss) && *hh < 24 && *mm < 60 && *ss <= 60;
}

int64_t sl_http_date(const char *s, size_t n)
{
	struct cursor c = {s, n, 0};
	int64_t y, m, d, hh, mm, ss;

	while (c.i < c.n && ((c.s[c.i] | 0x20) >= 'a' && (c.s[c.i] | 0x20) <= 'z'))
		c.i++; /* the day's name, not checked against the date */
	if (c.i == 0)
		return -1;
	if (expect(&c, ',')) {
		/* IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" or RFC 850
		 * "Sunday, 06-Nov-94 08:49:37 GMT" */
		char sep;

		spaces(&c);
		if (!digits(&c, 1, 2, &d) || c.i >= c.n)
			return -1;
		sep = c.s[c.i];
		if ((sep != ' ' && sep != '-') || !expect(&c, sep) || !month(&c, &m) || !expect(&c, sep))
			return -1;
		if (sep == ' ') {
			if (!digits(&c, 4, 4, &y))
				return -1;
		} else {
			size_t at = c.i;

			if (!digits(&c, 2, 4, &y))
				return -1;
			if (c.i - at == 2)
				y += y < 70 ? 2000 : 1900; /* two digits: RFC 9110's rule, roughly */
		}
		if (!expect(&c, ' ') || !clock_of_day(&c, &hh, &mm, &ss) || !expect(&c, ' ') ||
		    c.n - c.i != 3 || memcmp(c.s + c.i, "GMT", 3) != 0)
			return -1;
	} else {
		/* asctime "Sun Nov  6 08:49:37 1994" */
		spaces(&c);
		if (!month(&c, &m))
			return -1;
		spaces(&c);
		if (!digits(&c, 1, 2, &d) || !expect(&c, ' ') || !clock_of_day(&c, &hh, &mm, &ss) ||
		    !expect(&c, ' ') || !digits(&c, 4, 4, &y) || c.i != c.n)
			return -1;
	}
	if (d < 1 || d > 31 || y < 1970)
		return -1;
	return days_from_civil(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss;
}

/* --- RateLimit fields --- */

/* The value of parameter `key` (";key=V" or "key=V") within s[0..n), or -1. */
static int64_t param(const char *s, size_t n, const char *key)
{
	size_t k = strlen(key);

	for (size_t i = 0; i + k < n; i++) {
		if ((i == 0 || s[i - 1] == ';' || s[i - 1] == ',' || is_space(s[i - 1])) &&
		    s[i + k] == '=' && word_is(s + i, k, key)) {
			size_t j = i + k + 1, e = j;

			while (e < n && s[e] != ';' && s[e] != ',')
				e++;
			return decimal(s + j, e - j);
		}
	}
	return -1;
}

/* `RateLimit`: the draft-07 dictionary (limit=, remaining=, reset=) or the current
 * draft's list of policies ("name";r=R;t=T, ...), the most restrictive kept: a
 * policy with nothing left (the longest such wait), else the fewest left. */
static void ratelimit_field(struct sl_resp_fields *f, const char *v, size_t vn)
{
	int64_t rem = param(v, vn, "remaining");

	if (rem >= 0) {
		f->rl_remaining = rem;
		f->rl_reset = param(v, vn, "reset");
		return;
	}
	for (size_t i = 0; i < vn;) {
		size_t e = i;
		int quoted = 0;
		int64_t r, t;

		while (e < vn && (quoted || v[e] != ',')) {
			if (v[e] == '"')
				quoted = !quoted;
			e++;
		}
		r = param(v + i, e - i, "r");
		t = param(v + i, e - i, "t");
		if (r >= 0 && t >= 0) {
			if (f->rl_r < 0 || r < f->rl_r || (r == 0 && f->rl_r == 0 && t > f->rl_t) ||
			    (r == f->rl_r && t > f->rl_t)) {
				f->rl_r = r;
				f->rl_t = t;
			}
		}
		i = e + 1;
	}
}

/* A header line (kept bytes; `whole`: nothing of it was cut). */
static void header_line(struct sl_response *p, size_t kept, int whole)
{
	const char *v, *colon;
	size_t vn;

	if (header_is(p->line, kept, "content-length", &v, &vn)) {
		int64_t n = whole ? decimal(v, vn) : -1;

		if (n < 0 || ((p->flags & F_LENGTH) && (uint64_t)n != p->length)) {
			lose(p, "a Content-Length it cannot read", 0);
			return;
		}
		p->flags |= F_LENGTH;
		p->length = (uint64_t)n;
		return;
	}
	if (header_is(p->line, kept, "transfer-encoding", &v, &vn)) {
		if (!whole) {
			lose(p, "a Transfer-Encoding it cannot read", 0);
			return;
		}
		/* chunked last: chunked; anything else: the body runs to the close */
		p->flags |= vn >= 7 && word_is(v + vn - 7, 7, "chunked") ? F_CHUNKED : F_TO_CLOSE;
		return;
	}
	/* A field cut short is malformed as far as signals go. */
	if (whole && (colon = memchr(p->line, ':', kept)))
		sl_resp_field(&p->f, p->line, (size_t)(colon - p->line), colon + 1, kept - (size_t)(colon - p->line) - 1);
}

void sl_resp_field(struct sl_resp_fields *f, const char *name, size_t nn, const char *v, size_t vn)
{
	trim(&v, &vn);
	if (word_is(name, nn, "retry-after")) {
		int64_t d = decimal(v, vn);

		f->retry_is_date = d < 0;
		f->retry_after = d >= 0 ? d : sl_http_date(v, vn);
		if (f->retry_after < 0)
			f->retry_is_date = 0;
	} else if (word_is(name, nn, "ratelimit")) {
		ratelimit_field(f, v, vn);
	} else if (word_is(name, nn, "ratelimit-remaining")) {
		f->rl_remaining = decimal(v, vn);
	} else if (word_is(name, nn, "ratelimit-reset")) {
		f->rl_reset = decimal(v, vn);
	} else if (word_is(name, nn, "x-ratelimit-remaining")) {
		f->x_remaining = decimal(v, vn);
	} else if (word_is(name, nn, "x-ratelimit-reset")) {
		f->x_reset = decimal(v, vn);
	} else if (word_is(name, nn, "age")) {
		f->age_positive = decimal(v, vn) > 0;
	} else if (word_is(name, nn, ":status")) {
		int64_t st = decimal(v, vn);

		f->status = st >= 100 && st <= 999 ? (uint16_t)st : 0;
	} else if (word_is(name, nn, "content-type")) {
		f->grpc = vn >= 16 && word_is(v, 16, "application/grpc");
	} else if (word_is(name, nn, "grpc-status")) {
		f->grpc_status = decimal(v, vn);
	} else if (word_is(name, nn, "grpc-retry-pushback-ms")) {
		f->pushback_ms = decimal(v, vn); /* a negative one says "do not retry": absent */
	}
}

void sl_resp_fields_clear(struct sl_resp_fields *f)
{
	fields_clear(f);
}

/* "HTTP/1.x SSS ...": the status, or -1. */
static int status_line(const char *s, size_t n)
{
	if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9' || s[8] != ' ')
		return -1;
	for (int i = 9; i < 12; i++)
		if (s[i] < '0' || s[i] > '9')
			return -1;
	if (n > 12 && s[12] != ' ')
		return -1;
	return (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
}

/* The end of the headers.  Returns 1 when a final response's fields are ready. */
static int headers_end(struct sl_response *p, sl_resp_is_head is_head, void *arg)
{
	unsigned st = p->f.status;
	int head;

	if (st == 101)
		return lose(p, "101 Switching Protocols: the stream is no longer HTTP/1", 0), 0;
	if (st < 200) {
		fields_clear(&p->f); /* an interim response: the final one follows */
		p->state = SL_RESP_IDLE;
		return 0;
	}
	head = is_head && is_head(arg, p->finals);
	p->finals++;
	if (head || st == 204 || st == 304)
		p->state = SL_RESP_IDLE;
	else if (p->flags & F_CHUNKED)
		p->state = SL_RESP_CHUNK_SIZE;
	else if (p->flags & F_TO_CLOSE)
		p->state = SL_RESP_TO_CLOSE;
	else if (p->flags & F_LENGTH)
		p->state = p->length ? SL_RESP_BODY : SL_RESP_IDLE, p->left = p->length;
	else
		p->state = SL_RESP_TO_CLOSE;
	return 1;
}

static int chunk_size(struct sl_response *p, size_t kept)
{
	uint64_t v;
	int rc = sl_http1_chunk_size(p->line, kept, &v);

	if (rc < 0)
		return lose(p, rc == -2 ? "a chunk size too large" : "a chunk size it cannot read", 0), -1;
	if (v == 0) {
		p->state = SL_RESP_TRAILER;
	} else {
		p->state = SL_RESP_CHUNK_DATA;
		p->left = v;
	}
	return 0;
}

/* A line of the current state is complete.  Returns 1 when a final response's
 * headers ended, 0 to go on, -1 when lost. */
static int end_line(struct sl_response *p, sl_resp_is_head is_head, void *arg)
{
	size_t full = p->line_len, kept = full < SL_RESP_LINE_KEEP ? full : SL_RESP_LINE_KEEP;
	int s;

	if (full && p->cr) {
		if (kept == full)
			kept--;
		full--;
	}
	p->line_len = 0;
	p->cr = 0;
	switch (p->state) {
	case SL_RESP_STATUS:
		if ((s = status_line(p->line, kept)) < 0)
			return lose(p, "not an HTTP/1 status line", 0), -1;
		fields_clear(&p->f);
		p->f.status = (uint16_t)s;
		p->flags = 0;
		p->length = 0;
		p->state = SL_RESP_HEADER;
		return 0;
	case SL_RESP_HEADER:
		if (full == 0)
			return headers_end(p, is_head, arg);
		if (is_space(p->line[0]))
			return lose(p, "obsolete header line folding", 0), -1;
		header_line(p, kept, full == kept);
		return p->state == SL_RESP_LOST ? -1 : 0;
	case SL_RESP_CHUNK_SIZE:
		return chunk_size(p, kept);
	case SL_RESP_TRAILER:
		if (full == 0)
			p->state = SL_RESP_IDLE;
		return 0;
	default:
		return 0;
	}
}

size_t sl_resp_feed(struct sl_response *p, const void *buf, size_t len, sl_resp_is_head is_head,
                    void *arg, struct sl_resp_fields *out, int *ready)
{
	const unsigned char *b = buf;
	size_t i = 0;

	*ready = 0;
	if (p->state == SL_RESP_LOST || p->state == SL_RESP_TO_CLOSE || !buf)
		return len;
	while (i < len) {
		switch (p->state) {
		case SL_RESP_IDLE:
			if (b[i] == '\r' || b[i] == '\n') { /* stray blank lines between */
				i++;
				break;
			}
			if (b[i] != 'H')
				return lose(p, "bytes that do not start an HTTP/1 response", len);
			p->state = SL_RESP_STATUS;
			p->line_len = 0;
			break;
		case SL_RESP_BODY:
		case SL_RESP_CHUNK_DATA: {
			uint64_t take = len - i < p->left ? len - i : p->left;

			i += take;
			p->left -= take;
			if (p->left == 0)
				p->state = p->state == SL_RESP_BODY ? SL_RESP_IDLE : SL_RESP_CHUNK_END;
			break;
		}
		case SL_RESP_CHUNK_END:
			if (b[i] == '\n')
				p->state = SL_RESP_CHUNK_SIZE, p->line_len = 0;
			else if (b[i] != '\r')
				return lose(p, "chunk data not followed by CRLF", len);
			i++;
			break;
		case SL_RESP_TO_CLOSE:
		case SL_RESP_LOST:
			return len;
		default: {
			const unsigned char *lf = memchr(b + i, '\n', len - i);
			size_t upto = lf ? (size_t)(lf - b) : len;
			int r;

			if (p->line_len < SL_RESP_LINE_KEEP) {
				size_t room = SL_RESP_LINE_KEEP - p->line_len, take = upto - i < room ? upto - i : room;

				memcpy(p->line + p->line_len, b + i, take);
			}
			p->line_len = (uint16_t)(p->line_len + (upto - i > (size_t)(UINT16_MAX - p->line_len)
			                                        ? (size_t)(UINT16_MAX - p->line_len) : upto - i));
			if (upto > i)
				p->cr = b[upto - 1] == '\r';
			i = upto;
			if (!lf)
				break;
			i++;
			r = end_line(p, is_head, arg);
			if (r < 0)
				return len;
			if (r > 0) {
				*out = p->f;
				*ready = 1;
				return i;
			}
		}
		}
	}
	return i;
}

void sl_resp_eof(struct sl_response *p)
{
	if (p->state == SL_RESP_TO_CLOSE)
		p->state = SL_RESP_IDLE;
}

uint64_t sl_resp_ended(const struct sl_response *p)
{
	switch (p->state) {
	case SL_RESP_IDLE:
	case SL_RESP_STATUS:
	case SL_RESP_HEADER: /* the next one's headers: not counted in finals yet */
		return p->finals;
	default: /* in a final response's body, or lost inside one */
		return p->finals ? p->finals - 1 : 0;
	}
}

/* --- what a response asks --- */

const char *sl_signal_name(unsigned kind)
{
	static const char *const names[SL_SIGNAL_KINDS] = {
		"none", "retry-after", "ratelimit", "ratelimit-07", "x-ratelimit", "429", "fleet",
	};

	return kind < SL_SIGNAL_KINDS ? names[kind] : "?";
}

#define MS_MAX (400LL * 86400 * 1000) /* longer than any max_pause: clamped later */

static int64_t seconds_ms(int64_t s)
{
	return s > MS_MAX / 1000 ? MS_MAX : s * 1000;
}

void sl_signal_decide(const struct sl_resp_fields *f, int64_t now_s, struct sl_signal *out)
{
	memset(out, 0, sizeof(*out));
	out->status = f->status;
	if (f->age_positive)
		return; /* a cache's copy says nothing of the destination now */
	if (f->grpc_status == SL_GRPC_RESOURCE_EXHAUSTED) {
		/* gRPC's 429 (docs/shaping.md, "Signals from the destination"): its pushback is a
		 * Retry-After in milliseconds; without one, the bare 429's back-off. */
		out->status = 429;
		out->kind = f->pushback_ms >= 0 ? SL_SIGNAL_RETRY_AFTER : SL_SIGNAL_BARE_429;
		out->pause_ms = f->pushback_ms >= 0 ? f->pushback_ms : 0;
		if (out->kind == SL_SIGNAL_RETRY_AFTER && out->pause_ms == 0)
			out->kind = SL_SIGNAL_NONE; /* retry at once: nothing to do */
		return;
	}
	if ((f->status == 429 || f->status == 503) && f->retry_after >= 0) {
		out->kind = SL_SIGNAL_RETRY_AFTER;
		out->pause_ms = f->retry_is_date ? seconds_ms(f->retry_after - now_s > 0 ? f->retry_after - now_s : 0)
		                                 : seconds_ms(f->retry_after);
	} else if (f->rl_r >= 0 && f->rl_t >= 0) {
		out->kind = SL_SIGNAL_RATELIMIT;
		if (f->rl_r == 0) {
			out->pause_ms = seconds_ms(f->rl_t);
		} else if (f->rl_t > 0) {
			out->budget = f->rl_r;
			out->budget_ms = seconds_ms(f->rl_t);
		}
	} else if (f->rl_remaining == 0 && f->rl_reset >= 0) {
		out->kind = SL_SIGNAL_RATELIMIT_07;
		out->pause_ms = seconds_ms(f->rl_reset);
	} else if (f->x_remaining == 0 && f->x_reset >= 0) {
		/* As GitHub's clients read it: a reset of 10^12 or more is epoch
		 * milliseconds, of 10^9 or more epoch seconds (no one sends a delta of
		 * 31 years), else delta seconds. */
		int64_t r = f->x_reset, ms;

		if (r >= 1000000000000LL)
			ms = r - now_s * 1000;
		else if (r >= 1000000000LL)
			ms = seconds_ms(r - now_s);
		else
			ms = seconds_ms(r);
		out->kind = SL_SIGNAL_X_RATELIMIT;
		out->pause_ms = ms > 0 ? ms : 0;
	} else if (f->status == 429) {
		out->kind = SL_SIGNAL_BARE_429;
	}
	if (out->kind == SL_SIGNAL_NONE && f->status >= 200 && f->status < 400)
		out->good = 1;
	if (out->kind != SL_SIGNAL_NONE && out->kind != SL_SIGNAL_BARE_429 && out->pause_ms == 0 && !out->budget)
		out->kind = SL_SIGNAL_NONE; /* a reset already past: nothing to do */
}
