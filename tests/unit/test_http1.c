/* Request boundaries in outgoing HTTP/1 streams: keep-alive, pipelining,
 * Content-Length and chunked bodies with extensions and trailers, cut into pieces
 * at every size; and what makes the parser give up (turns then count). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/http1.h"

#include <stdio.h>
#include <string.h>

static const char *const messages[] = {
	"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
	"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world",
	"PUT /c HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n\r\n"
	"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n",
	"GET /d HTTP/1.0\n\n",
	"POST /e HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
	"DELETE /f?q=GET%20/ HTTP/1.1\r\nX-Long: "
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	"\r\nContent-Length: 3\r\n\r\nGET",
};

/* Feed `stream` in pieces of `piece` bytes (0: growing 1, 2, 3, ...), the way the
 * shim does (a piece is cut at a boundary and the rest fed next), and record where
 * requests begin. */
static int parking; /* park the parser between pieces whenever it allows */
static int parked_times;

static int boundaries(const char *stream, size_t len, size_t piece, size_t *at, int max)
{
	struct sl_http1 p;
	size_t pos = 0, grow = 1;
	int n = 0;

	sl_http1_init(&p);
	while (pos < len) {
		size_t want = piece ? piece : grow++, got;

		if (want > len - pos)
			want = len - pos;
		if (p.state == SL_H1_IDLE && n < max)
			at[n++] = pos;
		got = sl_http1_feed(&p, stream + pos, want);
		assert_true(got >= 1 && got <= want);
		pos += got;
		if (parking) {
			struct sl_h1_parked k;

			/* What a held socket keeps between writes: the line buffer only
			 * while a line is under way. */
			memset(&k, 0xa5, sizeof(k));
			if (sl_http1_park(&p, &k)) {
				memset(&p, 0x5a, sizeof(p));
				sl_http1_unpark(&p, &k);
				parked_times++;
			}
		}
	}
	assert_int_equal(p.state, SL_H1_IDLE);
	assert_int_equal(p.requests, (uint64_t)n);
	return n;
}

static void test_every_split(void **state)
{
	char stream[4096];
	size_t starts[16], len = 0, at[16];
	int k = (int)(sizeof(messages) / sizeof(messages[0]));

	(void)state;
	for (int i = 0; i < k; i++) {
		starts[i] = len;
		len += (size_t)snprintf(stream + len, sizeof(stream) - len, "%s", messages[i]);
	}
	for (size_t piece = 0; piece <= len; piece++) {
		int n = boundaries(stream, len, piece, at, 16);

		assert_int_equal(n, k);
		for (int i = 0; i < k; i++)
			assert_int_equal(at[i], starts[i]);
	}
}

/* The same boundaries with the parser parked wherever it may be, between every
 * piece: nothing it needs is lost with its line buffer. */
static void test_every_split_parked(void **state)
{
	parking = 1;
	parked_times = 0;
	test_every_split(state);
	parking = 0;
	assert_true(parked_times > 1000);
	/* Inside a line it must be kept whole. */
	{
		struct sl_http1 p;
		struct sl_h1_parked k;

		sl_http1_init(&p);
		assert_true(sl_http1_park(&p, &k));
		sl_http1_feed(&p, "GET / HT", 8);
		assert_false(sl_http1_park(&p, &k));
	}
}

static size_t feed_str(struct sl_http1 *p, const char *s)
{
	return sl_http1_feed(p, s, strlen(s));
}

static void test_gives_up(void **state)
{
	static const char *const lost[] = {
		"\x16\x03\x01\x02\x00\x01",                                  /* TLS */
		"GET / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n",              /* bad length */
		"GET / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",        /* until close */
		"CONNECT a.example:443 HTTP/1.1\r\n\r\n\x16\x03\x01",         /* a tunnel */
		"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc",
		"GET / HTTP/1.1\r\n\r\n\x01\x02 binary after the message",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(lost) / sizeof(lost[0]); i++) {
		struct sl_http1 p;
		size_t len = strlen(lost[i]);

		sl_http1_init(&p);
		/* Fed until it stops needing more or gives up. */
		for (size_t pos = 0; pos < len;)
			pos += sl_http1_feed(&p, lost[i] + pos, len - pos);
		if (p.state != SL_H1_LOST)
			fail_msg("case %zu: state %d, expected LOST", i, p.state);
		assert_non_null(p.why);
		/* Once lost, everything is consumed as it comes. */
		assert_int_equal(feed_str(&p, "GET / HTTP/1.1\r\n\r\n"), 18);
	}
}

static void test_skip_and_looks_like(void **state)
{
	struct sl_http1 p;

	(void)state;
	sl_http1_init(&p);
	assert_int_equal(feed_str(&p, "PUT /f HTTP/1.1\r\nContent-Length: 1000\r\n\r\n"), 41);
	assert_int_equal(p.state, SL_H1_BODY);
	assert_int_equal(sl_http1_skip(&p, 600), 600); /* sendfile of the body */
	assert_int_equal(sl_http1_skip(&p, 400), 400);
	assert_int_equal(p.state, SL_H1_IDLE);
	assert_int_equal(sl_http1_skip(&p, 10), 10); /* outside a body: cannot follow */
	assert_int_equal(p.state, SL_H1_LOST);

	assert_true(sl_http1_looks_like("GET / HTTP/1.1", 14));
	assert_true(sl_http1_looks_like("POS", 3));
	assert_false(sl_http1_looks_like("\x16\x03\x01", 3));
	assert_false(sl_http1_looks_like("get /", 5));
	assert_false(sl_http1_looks_like("", 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_split),
		cmocka_unit_test(test_every_split_parked),
		cmocka_unit_test(test_gives_up),
		cmocka_unit_test(test_skip_and_looks_like),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
