/* HTTP/2 frames both ways: where requests begin in what a client writes (every
 * split of the stream, a header cut over two writes, trailers and CONTINUATION),
 * SETTINGS_HEADER_TABLE_SIZE read, and the server's header blocks handed over
 * whole with padding and priority taken off; what makes either give up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/http2.h"

#include <string.h>

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* Append a frame to out at *len. */
static void frame(uint8_t *out, size_t *len, uint8_t type, uint8_t flags, uint32_t stream, const void *payload,
                  uint32_t n)
{
	uint8_t *h = out + *len;

	h[0] = (uint8_t)(n >> 16);
	h[1] = (uint8_t)(n >> 8);
	h[2] = (uint8_t)n;
	h[3] = type;
	h[4] = flags;
	h[5] = (uint8_t)(stream >> 24);
	h[6] = (uint8_t)(stream >> 16);
	h[7] = (uint8_t)(stream >> 8);
	h[8] = (uint8_t)stream;
	if (n)
		memcpy(h + 9, payload, n);
	*len += 9 + n;
}

/* A client's connection: preface, SETTINGS (table size 8192), WINDOW_UPDATE, then
 * stream 1 (HEADERS + CONTINUATION, DATA), stream 3 (HEADERS, END_STREAM), a PING,
 * trailers on stream 1, stream 5, a RST_STREAM of 3.  *at: where each new stream's
 * HEADERS begins. */
static size_t client_stream(uint8_t *out, size_t at[3])
{
	static const uint8_t settings[] = {0, 1, 0, 0, 0x20, 0, 0, 4, 0, 0, 0xff, 0xff};
	static const uint8_t wu[] = {0, 0x0f, 0, 1}, ping[8] = {1}, rst[4] = {0, 0, 0, 8};
	static const uint8_t block[] = {0x82, 0x86, 0x84, 0x41, 3, 'a', '.', 'b'};
	size_t len = 0;

	memcpy(out, PREFACE, 24);
	len = 24;
	frame(out, &len, 4, 0, 0, settings, sizeof(settings));
	frame(out, &len, 8, 0, 0, wu, sizeof(wu));
	at[0] = len;
	frame(out, &len, 1, 0x20 /* PRIORITY */, 1, block, 4);
	frame(out, &len, 9, 0x4, 1, block + 4, 4);
	frame(out, &len, 0, 0, 1, "body", 4);
	at[1] = len;
	frame(out, &len, 1, 0x5, 3, block, sizeof(block));
	frame(out, &len, 6, 0, 0, ping, sizeof(ping));
	frame(out, &len, 1, 0x5, 1, block, 2); /* trailers: no new stream */
	at[2] = len;
	frame(out, &len, 1, 0x4, 5, block, sizeof(block));
	frame(out, &len, 3, 0, 3, rst, sizeof(rst));
	return len;
}

/* Fed as the shim does: each piece may carry one new stream at its start. */
static void test_requests_at_every_split(void **state)
{
	uint8_t s[512];
	size_t at[3], len = client_stream(s, at);

	(void)state;
	for (size_t piece = 1; piece <= len; piece++) {
		struct sl_h2_out p;
		size_t pos = 0, found[8];
		int n = 0;

		sl_h2_out_init(&p, SL_H2_AT_PREFACE);
		while (pos < len) {
			size_t want = piece < len - pos ? piece : len - pos, got;
			uint64_t none = 0, one = 1;

			/* Does this piece begin a request? */
			struct sl_h2_out peek = p;

			if (sl_h2_out_feed(&peek, s + pos, want, &none) == 0) {
				assert_true(n < 8);
				found[n++] = pos;
				got = sl_h2_out_feed(&p, s + pos, want, &one);
				assert_int_equal(one, 0);
			} else {
				got = sl_h2_out_feed(&p, s + pos, want, &none);
			}
			assert_true(got >= 1 && got <= want);
			pos += got;
		}
		assert_int_equal(p.state, SL_H2_HEAD);
		assert_int_equal(n, 3);
		assert_int_equal(p.opened, 3);
		assert_int_equal(p.max_stream, 5);
		assert_int_equal(p.resets, 1);
		assert_int_equal(p.table_size, 8192);
		for (int k = 0; k < 3; k++) /* at the HEADERS, or inside its header when a
		                             * piece cut it (its first bytes went earlier) */
			assert_true(found[k] >= at[k] && found[k] < at[k] + 9);
	}
}

static void test_unlimited_and_upgrade(void **state)
{
	uint8_t s[512];
	size_t at[3], len = client_stream(s, at);
	struct sl_h2_out p;
	uint64_t two = 2;

	(void)state;
	sl_h2_out_init(&p, SL_H2_AT_PREFACE);
	assert_int_equal(sl_h2_out_feed(&p, s, len, NULL), len);
	assert_int_equal(p.opened, 3);
	/* two allowed: stops before the third */
	sl_h2_out_init(&p, SL_H2_AT_PREFACE);
	assert_int_equal(sl_h2_out_feed(&p, s, len, &two), at[2]);
	assert_int_equal(two, 0);
	/* after an Upgrade, stream 1 was the HTTP/1.1 request: the HEADERS of 1 (here,
	 * trailers-like) opens nothing, 3 and 5 do */
	sl_h2_out_init(&p, SL_H2_UPGRADED);
	assert_int_equal(sl_h2_out_feed(&p, s, len, NULL), len);
	assert_int_equal(p.opened, 3);
	assert_true(sl_h2_is_preface(s, 10));
	assert_false(sl_h2_is_preface("GET / HTTP/1.1", 14));
}

static void test_out_gives_up(void **state)
{
	uint8_t s[128];
	size_t len;
	struct sl_h2_out p;

	(void)state;
	sl_h2_out_init(&p, SL_H2_AT_PREFACE);
	assert_int_equal(sl_h2_out_feed(&p, "GET / HTTP/1.1\r\n", 16, NULL), 16);
	assert_int_equal(p.state, SL_H2_LOST);
	/* a PING inside a header block */
	memcpy(s, PREFACE, 24);
	len = 24;
	frame(s, &len, 1, 0, 1, "ab", 2);
	frame(s, &len, 6, 0, 0, "12345678", 8);
	sl_h2_out_init(&p, SL_H2_AT_PREFACE);
	sl_h2_out_feed(&p, s, len, NULL);
	assert_int_equal(p.state, SL_H2_LOST);
	assert_non_null(p.why);
	/* lost takes everything, and opens nothing more */
	assert_int_equal(sl_h2_out_feed(&p, s, len, NULL), len);
	assert_int_equal(p.opened, 1);
}

/* --- the server's side --- */

struct blocks {
	uint8_t buf[256];
	size_t n;
	int last, push, ends, calls;
	uint32_t stream;
	int fail;
};

static int on_block(void *arg, uint32_t stream, const uint8_t *frag, size_t n, int last, int push, int ends)
{
	struct blocks *b = arg;

	if (b->fail)
		return -1;
	assert_true(b->n + n <= sizeof(b->buf));
	if (n)
		memcpy(b->buf + b->n, frag, n);
	b->n += n;
	b->calls++;
	if (last) {
		b->last++;
		b->push = push;
		b->ends = ends;
		b->stream = stream;
	}
	return 0;
}

static void test_server_blocks_every_split(void **state)
{
	static const uint8_t block[] = {0x88, 0x40, 3, 'a', 'b', 'c', 3, 'x', 'y', 'z'};
	uint8_t s[256], padded[32], prom[32];
	size_t len = 0;

	(void)state;
	frame(s, &len, 4, 0, 0, NULL, 0);                  /* SETTINGS */
	padded[0] = 3;                                     /* pad length */
	memset(padded + 1, 0, 5);                          /* priority */
	memcpy(padded + 6, block, 6);
	memset(padded + 12, 0xee, 3);
	frame(s, &len, 1, 0x8 | 0x20, 1, padded, 15);      /* HEADERS 1, padded + priority */
	frame(s, &len, 9, 0x4, 1, block + 6, 4);           /* CONTINUATION, END_HEADERS */
	frame(s, &len, 0, 0x1, 1, "data", 4);              /* DATA END_STREAM */
	prom[0] = 0;
	memcpy(prom + 1, "\0\0\0\2", 4);
	memcpy(prom + 5, block, sizeof(block));
	frame(s, &len, 5, 0x8 | 0x4, 3, prom, 5 + sizeof(block)); /* PUSH_PROMISE */
	frame(s, &len, 1, 0x5, 3, block, 0);               /* empty trailers, END_STREAM */
	frame(s, &len, 3, 0, 5, "\0\0\0\x0b", 4);          /* RST_STREAM of 5 */
	frame(s, &len, 0, 0x1, 2, "p", 1);                 /* pushed stream ends: not counted */
	frame(s, &len, 3, 0, 1, "\0\0\0\0", 4);          /* RST_STREAM of 1 after its end: once */
	for (size_t piece = 1; piece <= len; piece++) {
		struct sl_h2_in p;
		struct blocks b;

		memset(&b, 0, sizeof(b));
		sl_h2_in_init(&p);
		for (size_t pos = 0; pos < len; pos += piece)
			sl_h2_in_feed(&p, s + pos, piece < len - pos ? piece : len - pos, on_block, &b);
		assert_int_equal(p.state, SL_H2_HEAD);
		assert_int_equal(b.last, 3);
		assert_int_equal(b.n, 2 * sizeof(block));
		assert_memory_equal(b.buf, block, sizeof(block));
		assert_memory_equal(b.buf + sizeof(block), block, sizeof(block));
		assert_int_equal(b.stream, 3); /* the last block: the empty trailers */
		assert_int_equal(b.ends, 1);
		assert_int_equal(b.push, 0);
		assert_int_equal(p.ended, 3); /* 1 by DATA, 3 by trailers, 5 by RST */
	}
}

static void test_server_gives_up(void **state)
{
	uint8_t s[64];
	size_t len = 0;
	struct sl_h2_in p;
	struct blocks b;

	(void)state;
	memset(&b, 0, sizeof(b));
	frame(s, &len, 9, 0x4, 1, "ab", 2); /* CONTINUATION with no block open */
	sl_h2_in_init(&p);
	sl_h2_in_feed(&p, s, len, on_block, &b);
	assert_int_equal(p.state, SL_H2_LOST);
	assert_int_equal(b.calls, 0);
	/* padding longer than the frame */
	len = 0;
	frame(s, &len, 1, 0x8 | 0x4, 1, "\x09" "ab", 3);
	sl_h2_in_init(&p);
	sl_h2_in_feed(&p, s, len, on_block, &b);
	assert_int_equal(p.state, SL_H2_LOST);
	/* the decoder refuses: given up */
	len = 0;
	frame(s, &len, 1, 0x4, 1, "ab", 2);
	b.fail = 1;
	sl_h2_in_init(&p);
	sl_h2_in_feed(&p, s, len, on_block, &b);
	assert_int_equal(p.state, SL_H2_LOST);
	assert_non_null(p.why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requests_at_every_split),
		cmocka_unit_test(test_unlimited_and_upgrade),
		cmocka_unit_test(test_out_gives_up),
		cmocka_unit_test(test_server_blocks_every_split),
		cmocka_unit_test(test_server_gives_up),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
