/* Responses read for the destination's signals: framing (lengths, chunks, close,
 * 1xx, HEAD, 204/304) in pieces of every size; every header form docs/shaping.md lists,
 * HTTP-dates in their three forms, precedence, Age, malformed fields; and what
 * makes the parser give up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/response.h"

#include <stdio.h>
#include <string.h>

#define NOW 1796000000LL /* an epoch second in 2026 */

struct seen {
	int n;
	struct sl_resp_fields f[8];
};

static int head_of(void *arg, uint64_t n)
{
	return (int)((*(uint64_t *)arg >> n) & 1);
}

static int parking; /* park the parser between pieces whenever it allows */
static int parked_times;

/* Feed `s` in pieces of `piece` bytes (0: growing), collecting the final responses. */
static void feed(struct sl_response *p, const char *s, size_t piece, uint64_t heads, struct seen *out)
{
	size_t len = strlen(s), pos = 0, grow = 1;

	out->n = 0;
	while (pos < len) {
		size_t want = piece ? piece : grow++, got;
		struct sl_resp_fields f;
		int ready;

		if (want > len - pos)
			want = len - pos;
		got = sl_resp_feed(p, s + pos, want, head_of, &heads, &f, &ready);
		assert_true(got > 0 || want == 0);
		assert_true(got <= want);
		assert_true(ready || got == want);
		pos += got;
		if (ready && out->n < 8)
			out->f[out->n++] = f;
		if (parking) {
			struct sl_resp_parked k;

			memset(&k, 0xa5, sizeof(k));
			if (sl_resp_park(p, &k)) {
				memset(p, 0x5a, sizeof(*p));
				sl_resp_unpark(p, &k);
				parked_times++;
			}
		}
	}
}

static const char *const stream =
	"HTTP/1.1 100 Continue\r\n\r\n"
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
	"5;x=y\r\nHTTP/\r\n0\r\nTrailer: t\r\n\r\n"
	"HTTP/1.1 204 No Content\r\n\r\n"
	"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n" /* a HEAD's answer: no body */
	"HTTP/1.1 503 Busy\r\nRetry-After: Wed, 21 Oct 2026 07:28:00 GMT\r\nContent-Length: 0\r\n\r\n"
	"HTTP/1.0 200 OK\r\n\r\nruns to the close HTTP/1.1 429 x\r\n\r\n";

static void test_framing_in_every_piece_size(void **state)
{
	(void)state;
	for (size_t piece = 0; piece <= 40; piece++) {
		struct sl_response p;
		struct seen s;

		sl_resp_init(&p);
		feed(&p, stream, piece, 1u << 3, &s);
		/* 200, 429, 204, 200 (HEAD), 503, 200: the 100 and what runs to the
		 * close are not responses. */
		assert_int_equal(s.n, 6);
		assert_int_equal(s.f[0].status, 200);
		assert_int_equal(s.f[1].status, 429);
		assert_int_equal(s.f[1].retry_after, 7);
		assert_false(s.f[1].retry_is_date);
		assert_int_equal(s.f[2].status, 204);
		assert_int_equal(s.f[3].status, 200);
		assert_int_equal(s.f[4].status, 503);
		assert_true(s.f[4].retry_is_date);
		assert_int_equal(s.f[4].retry_after, 1792567680LL);
		assert_int_equal(s.f[5].status, 200);
		assert_int_equal(p.state, SL_RESP_TO_CLOSE);
		assert_int_equal(p.finals, 6);
		sl_resp_eof(&p);
		assert_int_equal(p.state, SL_RESP_IDLE);
	}
}

/* The same with the parser parked wherever it may be between pieces: a held
 * socket keeps only that between reads, unless a line is under way. */
static void test_framing_parked(void **state)
{
	parking = 1;
	parked_times = 0;
	test_framing_in_every_piece_size(state);
	parking = 0;
	assert_true(parked_times > 200);
	{
		struct sl_response p;
		struct sl_resp_parked k;
		struct sl_resp_fields f;
		uint64_t none = 0;
		int ready;

		sl_resp_init(&p);
		sl_resp_feed(&p, "HTTP/1.1 429 x\r\nRetry-Af", 25, head_of, &none, &f, &ready);
		assert_false(sl_resp_park(&p, &k));
	}
}

static void test_lost(void **state)
{
	/* Each with the final responses seen before it was lost. */
	static const struct {
		const char *s;
		int n;
	} bad[] = {
		{"\x16\x03\x01\x00\x05hello", 0}, /* TLS */
		{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 1},
		{"HTTP/2 200\r\n\r\n", 0},
		{"HTTP/1.1 200 OK\r\n folded\r\n\r\n", 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1\r\n", 1},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sl_response p;
		struct seen s;

		sl_resp_init(&p);
		feed(&p, bad[i].s, 3, 0, &s);
		assert_int_equal(p.state, SL_RESP_LOST);
		assert_non_null(p.why);
		assert_int_equal(s.n, bad[i].n);
	}
}

static struct sl_signal decide(const char *headers, unsigned status)
{
	char buf[1024];
	struct sl_response p;
	struct seen s;
	struct sl_signal sig;

	snprintf(buf, sizeof(buf), "HTTP/1.1 %u X\r\n%sContent-Length: 0\r\n\r\n", status, headers);
	sl_resp_init(&p);
	feed(&p, buf, 0, 0, &s);
	assert_int_equal(s.n, 1);
	sl_signal_decide(&s.f[0], NOW, &sig);
	return sig;
}

static void test_signals(void **state)
{
	struct sl_signal g;

	(void)state;
	g = decide("Retry-After: 2\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_RETRY_AFTER);
	assert_int_equal(g.pause_ms, 2000);
	g = decide("retry-after:   30  \r\n", 503);
	assert_int_equal(g.pause_ms, 30000);
	/* Retry-After only counts on a 429 or 503 */
	g = decide("Retry-After: 30\r\n", 301);
	assert_int_equal(g.kind, SL_SIGNAL_NONE);
	assert_true(g.good);
	/* the HTTP-date form, 90 s ahead */
	g = decide("Retry-After: Mon, 30 Nov 2026 00:54:50 GMT\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_RETRY_AFTER);
	assert_int_equal(g.pause_ms, 90000);
	/* a date already past: nothing to do */
	g = decide("Retry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_NONE);
	/* GitHub: 403 with X-RateLimit-Remaining: 0 and an epoch reset */
	g = decide("X-RateLimit-Limit: 60\r\nX-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: 1796000042\r\n", 403);
	assert_int_equal(g.kind, SL_SIGNAL_X_RATELIMIT);
	assert_int_equal(g.pause_ms, 42000);
	/* X- with a delta, and epoch milliseconds */
	g = decide("X-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: 5\r\n", 200);
	assert_int_equal(g.pause_ms, 5000);
	g = decide("X-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: 1796000001500\r\n", 200);
	assert_int_equal(g.pause_ms, 1500);
	/* remaining above zero: nothing */
	g = decide("X-RateLimit-Remaining: 3\r\nX-RateLimit-Reset: 5\r\n", 200);
	assert_int_equal(g.kind, SL_SIGNAL_NONE);
	/* the draft now: r=0;t=3 pauses, r=10;t=5 is a budget */
	g = decide("RateLimit: \"default\";r=0;t=3\r\n", 200);
	assert_int_equal(g.kind, SL_SIGNAL_RATELIMIT);
	assert_int_equal(g.pause_ms, 3000);
	g = decide("RateLimit: \"default\";r=10;t=5\r\n", 200);
	assert_int_equal(g.kind, SL_SIGNAL_RATELIMIT);
	assert_int_equal(g.pause_ms, 0);
	assert_int_equal(g.budget, 10);
	assert_int_equal(g.budget_ms, 5000);
	/* several policies: the most restrictive */
	g = decide("RateLimit: \"hour\";r=900;t=3000, \"second\";r=0;t=1, \"day\";r=0;t=7\r\n", 200);
	assert_int_equal(g.pause_ms, 7000);
	g = decide("RateLimit: \"a\";r=50;t=10, \"b\";r=4;t=2\r\n", 200);
	assert_int_equal(g.budget, 4);
	assert_int_equal(g.budget_ms, 2000);
	/* draft-07 and the separate fields */
	g = decide("RateLimit: limit=100, remaining=0, reset=9\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_RATELIMIT_07);
	assert_int_equal(g.pause_ms, 9000);
	g = decide("RateLimit-Limit: 10\r\nRateLimit-Remaining: 0\r\nRateLimit-Reset: 4\r\n", 200);
	assert_int_equal(g.kind, SL_SIGNAL_RATELIMIT_07);
	assert_int_equal(g.pause_ms, 4000);
	/* Retry-After wins over the reset fields */
	g = decide("X-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: 100\r\nRetry-After: 2\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_RETRY_AFTER);
	assert_int_equal(g.pause_ms, 2000);
	/* a 429 with nothing: the default back-off */
	g = decide("", 429);
	assert_int_equal(g.kind, SL_SIGNAL_BARE_429);
	/* a positive Age: ignored altogether */
	g = decide("Age: 12\r\nRetry-After: 2\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_NONE);
	g = decide("Age: 0\r\nRetry-After: 2\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_RETRY_AFTER);
	/* malformed fields are ignored */
	g = decide("Retry-After: soon\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_BARE_429);
	g = decide("Retry-After: -5\r\n", 503);
	assert_int_equal(g.kind, SL_SIGNAL_NONE);
	g = decide("Retry-After: 99999999999999999999\r\n", 429);
	assert_int_equal(g.kind, SL_SIGNAL_BARE_429);
	g = decide("RateLimit: \"d\";r=x;t=3\r\n", 200);
	assert_int_equal(g.kind, SL_SIGNAL_NONE);
	g = decide("X-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: 1.5\r\n", 200);
	assert_int_equal(g.kind, SL_SIGNAL_NONE);
	/* a huge delta is kept for the caller to clamp */
	g = decide("Retry-After: 999999\r\n", 429);
	assert_int_equal(g.pause_ms, 999999000LL);
}

/* Answers read to their end (requests in flight): a chunked answer counts until
 * its last chunk, not its headers; a 304 with its headers. */
static void test_ended(void **state)
{
	struct sl_response p;
	struct sl_resp_fields f;
	int ready;
	const char *a = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
	const char *b = "5\r\nhello\r\n";
	const char *c = "0\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n";
	size_t n;

	(void)state;
	sl_resp_init(&p);
	assert_int_equal(sl_resp_ended(&p), 0);
	n = sl_resp_feed(&p, a, strlen(a), NULL, NULL, &f, &ready);
	assert_true(ready);
	sl_resp_feed(&p, a + n, strlen(a) - n, NULL, NULL, &f, &ready);
	assert_int_equal(sl_resp_ended(&p), 0); /* its headers only */
	sl_resp_feed(&p, b, strlen(b), NULL, NULL, &f, &ready);
	assert_int_equal(sl_resp_ended(&p), 0); /* a chunk, not the last */
	for (size_t at = 0; at < strlen(c); at += n)
		n = sl_resp_feed(&p, c + at, strlen(c) - at, NULL, NULL, &f, &ready);
	assert_int_equal(sl_resp_ended(&p), 2); /* the last chunk, then a 304 whole */
	/* a body to the close ends at the close */
	sl_resp_init(&p);
	sl_resp_feed(&p, "HTTP/1.0 200 OK\r\n\r\nbody", 23, NULL, NULL, &f, &ready);
	sl_resp_feed(&p, "HTTP/1.0 200 OK\r\n\r\nbody" + 19, 4, NULL, NULL, &f, &ready);
	assert_int_equal(sl_resp_ended(&p), 0);
	sl_resp_eof(&p);
	assert_int_equal(sl_resp_ended(&p), 1);
}

/* HTTP/2 hands fields over decoded: the same signals, and gRPC's. */
static void h2(struct sl_resp_fields *f, const char *const *nv)
{
	sl_resp_fields_clear(f);
	for (; *nv; nv += 2)
		sl_resp_field(f, nv[0], strlen(nv[0]), nv[1], strlen(nv[1]));
}

static void test_h2_fields(void **state)
{
	static const char *const retry[] = {":status", "429", "retry-after", " 2 ", NULL};
	static const char *const grpc_push[] = {"grpc-status", "8", "grpc-retry-pushback-ms", "1500", NULL};
	static const char *const grpc_bare[] = {":status", "200", "grpc-status", "8", NULL};
	static const char *const grpc_no_retry[] = {"grpc-status", "8", "grpc-retry-pushback-ms", "-1", NULL};
	static const char *const grpc_ok[] = {"grpc-status", "0", "grpc-retry-pushback-ms", "1500", NULL};
	static const char *const xrl[] = {":status", "200", "x-ratelimit-remaining", "0", "x-ratelimit-reset", "3",
	                                  NULL};
	struct sl_resp_fields f;
	struct sl_signal s;

	(void)state;
	h2(&f, retry);
	sl_signal_decide(&f, 0, &s);
	assert_int_equal(s.kind, SL_SIGNAL_RETRY_AFTER);
	assert_int_equal(s.pause_ms, 2000);
	h2(&f, grpc_push);
	sl_signal_decide(&f, 0, &s);
	assert_int_equal(s.kind, SL_SIGNAL_RETRY_AFTER);
	assert_int_equal(s.status, 429);
	assert_int_equal(s.pause_ms, 1500);
	h2(&f, grpc_bare);
	sl_signal_decide(&f, 0, &s);
	assert_int_equal(s.kind, SL_SIGNAL_BARE_429);
	assert_false(s.good);
	h2(&f, grpc_no_retry);
	sl_signal_decide(&f, 0, &s);
	assert_int_equal(s.kind, SL_SIGNAL_BARE_429);
	h2(&f, grpc_ok); /* a pushback on a success says nothing */
	sl_signal_decide(&f, 0, &s);
	assert_int_equal(s.kind, SL_SIGNAL_NONE);
	h2(&f, xrl);
	sl_signal_decide(&f, 0, &s);
	assert_int_equal(s.kind, SL_SIGNAL_X_RATELIMIT);
	assert_int_equal(s.pause_ms, 3000);
}

static void test_http_dates(void **state)
{
	const int64_t want = 784111777; /* RFC 9110's example instant */

	(void)state;
	assert_int_equal(sl_http_date("Sun, 06 Nov 1994 08:49:37 GMT", 29), want);
	assert_int_equal(sl_http_date("Sunday, 06-Nov-94 08:49:37 GMT", 30), want);
	assert_int_equal(sl_http_date("Sun Nov  6 08:49:37 1994", 24), want);
	assert_int_equal(sl_http_date("Thu, 01 Jan 1970 00:00:00 GMT", 29), 0);
	assert_int_equal(sl_http_date("Tue, 29 Feb 2028 12:00:00 GMT", 29), 1835438400LL);
	assert_int_equal(sl_http_date("Sun, 06 Nov 1994 08:49:37 UTC", 29), -1);
	assert_int_equal(sl_http_date("Sun, 06 Nov 1994 25:49:37 GMT", 29), -1);
	assert_int_equal(sl_http_date("Sun, 06 Xyz 1994 08:49:37 GMT", 29), -1);
	assert_int_equal(sl_http_date("06 Nov 1994 08:49:37 GMT", 24), -1);
	assert_int_equal(sl_http_date("", 0), -1);
	assert_int_equal(sl_http_date("Sun, 06 Nov 1994 08:49:37 GMT", 20), -1); /* cut */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_framing_in_every_piece_size),
		cmocka_unit_test(test_framing_parked),
		cmocka_unit_test(test_lost),
		cmocka_unit_test(test_signals),
		cmocka_unit_test(test_http_dates),
		cmocka_unit_test(test_h2_fields),
		cmocka_unit_test(test_ended),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
