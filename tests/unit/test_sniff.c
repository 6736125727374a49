/* Names from a connection's first write: TLS SNI, HTTP Host, CONNECT and
 * absolute-form proxy requests, and everything that must yield no name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/sniff.h"

#include <string.h>

/* A ClientHello built field by field: record, handshake, version, random, session
 * id, two cipher suites, null compression, then the extensions given (already
 * encoded).  Returns its length. */
static size_t client_hello(uint8_t *out, const uint8_t *exts, size_t extlen)
{
	uint8_t body[2048];
	size_t n = 0;

	body[n++] = 3, body[n++] = 3;            /* client_version TLS 1.2 */
	memset(body + n, 0x5a, 32), n += 32;     /* random */
	body[n++] = 32, memset(body + n, 7, 32), n += 32; /* session id */
	body[n++] = 0, body[n++] = 4;            /* cipher suites */
	body[n++] = 0x13, body[n++] = 0x01, body[n++] = 0xc0, body[n++] = 0x2f;
	body[n++] = 1, body[n++] = 0;            /* compression: null */
	body[n++] = (uint8_t)(extlen >> 8), body[n++] = (uint8_t)extlen;
	memcpy(body + n, exts, extlen), n += extlen;

	out[0] = 22, out[1] = 3, out[2] = 1;
	out[3] = (uint8_t)((n + 4) >> 8), out[4] = (uint8_t)(n + 4);
	out[5] = 1, out[6] = 0, out[7] = (uint8_t)(n >> 8), out[8] = (uint8_t)n;
	memcpy(out + 9, body, n);
	return n + 9;
}

/* The server_name extension for `name`. */
static size_t sni_ext(uint8_t *out, const char *name)
{
	size_t l = strlen(name);

	out[0] = 0, out[1] = 0;                                   /* type server_name */
	out[2] = (uint8_t)((l + 5) >> 8), out[3] = (uint8_t)(l + 5); /* extension length */
	out[4] = (uint8_t)((l + 3) >> 8), out[5] = (uint8_t)(l + 3); /* list length */
	out[6] = 0;                                               /* host_name */
	out[7] = (uint8_t)(l >> 8), out[8] = (uint8_t)l;
	memcpy(out + 9, name, l);
	return l + 9;
}

static void test_tls_sni(void **state)
{
	uint8_t ext[512], hello[4096];
	struct sl_sniffed s;
	size_t n, len;

	(void)state;
	/* An extension before server_name (supported_groups), as real clients send. */
	n = 0;
	ext[n++] = 0, ext[n++] = 10, ext[n++] = 0, ext[n++] = 4;
	ext[n++] = 0, ext[n++] = 2, ext[n++] = 0, ext[n++] = 29;
	n += sni_ext(ext + n, "API.Example.COM.");
	ext[n++] = 0, ext[n++] = 43, ext[n++] = 0, ext[n++] = 3; /* supported_versions */
	ext[n++] = 2, ext[n++] = 3, ext[n++] = 4;
	len = client_hello(hello, ext, n);

	assert_int_equal(sl_sniff(hello, len, &s), SL_SNIFF_TLS_SNI);
	assert_string_equal(s.name, "api.example.com");
	assert_int_equal(s.port, 0);

	/* Every truncation either finds the same name or none, never another. */
	for (size_t cut = 0; cut < len; cut++) {
		int kind = sl_sniff(hello, cut, &s);

		if (kind != SL_SNIFF_NONE) {
			assert_int_equal(kind, SL_SNIFF_TLS_SNI);
			assert_string_equal(s.name, "api.example.com");
		}
	}
	/* Cut inside the name: none.  Cut after it: found. */
	assert_int_equal(sl_sniff(hello, len - 7 - 4, &s), SL_SNIFF_NONE);
	assert_int_equal(sl_sniff(hello, len - 7, &s), SL_SNIFF_TLS_SNI);

	/* Lengths that overrun what follows: none, and no read beyond len. */
	for (size_t i = 0; i < len; i++) {
		uint8_t bad[4096];

		memcpy(bad, hello, len);
		bad[i] = 0xff;
		sl_sniff(bad, len, &s);
	}
}

static void test_tls_without_sni(void **state)
{
	uint8_t ext[16] = {0, 10, 0, 4, 0, 2, 0, 29}, hello[512];
	uint8_t bad_name[512];
	struct sl_sniffed s;
	size_t len = client_hello(hello, ext, 8), n;

	(void)state;
	assert_int_equal(sl_sniff(hello, len, &s), SL_SNIFF_NONE);
	/* A name with a character no host name has. */
	n = sni_ext(bad_name, "a b.example");
	len = client_hello(hello, bad_name, n);
	assert_int_equal(sl_sniff(hello, len, &s), SL_SNIFF_NONE);
	/* Not a handshake record, or not a ClientHello. */
	hello[0] = 23;
	assert_int_equal(sl_sniff(hello, len, &s), SL_SNIFF_NONE);
	hello[0] = 22, hello[5] = 2;
	assert_int_equal(sl_sniff(hello, len, &s), SL_SNIFF_NONE);
}

static int sniff_str(const char *text, struct sl_sniffed *s)
{
	return sl_sniff(text, strlen(text), s);
}

static void test_http_host(void **state)
{
	struct sl_sniffed s;

	(void)state;
	assert_int_equal(sniff_str("GET /x HTTP/1.1\r\nUser-Agent: t\r\nHost: Hooks.Example.ORG:8080\r\n\r\n", &s),
	                 SL_SNIFF_HTTP_HOST);
	assert_string_equal(s.name, "hooks.example.org");
	assert_int_equal(s.port, 0); /* the connection's port, not the header's */
	assert_int_equal(sniff_str("POST / HTTP/1.0\nhost:\texample.net \n\n", &s), SL_SNIFF_HTTP_HOST);
	assert_string_equal(s.name, "example.net");
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", &s), SL_SNIFF_HTTP_HOST);
	assert_string_equal(s.name, "::1");

	/* No Host before the blank line, or cut before it: none. */
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\n\r\nHost: late.example\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\nAccept: */*\r\nHo", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\nHost: x.example:99999\r\n\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\nHost: \r\n\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\nHost:  \t \r\n\r\n", &s), SL_SNIFF_NONE); /* fuzz */
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\nHost: ...\r\n\r\n", &s), SL_SNIFF_NONE);  /* fuzz */
	assert_int_equal(sniff_str("GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", &s), SL_SNIFF_NONE);
	/* Not HTTP/1.x. */
	assert_int_equal(sniff_str("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("get / HTTP/1.1\r\nHost: a\r\n\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("GET  HTTP/1.1\r\nHost: a\r\n\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("HELO mail.example\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sl_sniff(NULL, 10, &s), SL_SNIFF_NONE);
}

static void test_proxy_targets(void **state)
{
	struct sl_sniffed s;

	(void)state;
	assert_int_equal(sniff_str("CONNECT API.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", &s),
	                 SL_SNIFF_PROXY);
	assert_string_equal(s.name, "api.example.com");
	assert_int_equal(s.port, 443);
	assert_int_equal(sniff_str("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n", &s), SL_SNIFF_PROXY);
	assert_string_equal(s.name, "2001:db8::1");
	assert_int_equal(s.port, 8443);
	assert_int_equal(sniff_str("CONNECT api.example.com HTTP/1.1\r\n\r\n", &s), SL_SNIFF_NONE);
	assert_int_equal(sniff_str("CONNECT api.example.com:0 HTTP/1.1\r\n\r\n", &s), SL_SNIFF_NONE);

	assert_int_equal(sniff_str("GET http://me:pw@Foo.example:8080/a?b HTTP/1.1\r\nHost: foo\r\n\r\n", &s),
	                 SL_SNIFF_PROXY);
	assert_string_equal(s.name, "foo.example");
	assert_int_equal(s.port, 8080);
	assert_int_equal(sniff_str("GET HTTP://foo.example HTTP/1.1\r\n\r\n", &s), SL_SNIFF_PROXY);
	assert_int_equal(s.port, 80);
	assert_int_equal(sniff_str("GET https://foo.example/ HTTP/1.1\r\n\r\n", &s), SL_SNIFF_PROXY);
	assert_int_equal(s.port, 443);
	assert_int_equal(sniff_str("GET http:///x HTTP/1.1\r\n\r\n", &s), SL_SNIFF_NONE);
}

/* The ALPN extension listing `protos` (each a length byte and its name). */
static size_t alpn_ext(uint8_t *out, const char *const *protos, int n)
{
	size_t len = 6;

	for (int i = 0; i < n; i++) {
		size_t l = strlen(protos[i]);

		out[len++] = (uint8_t)l;
		memcpy(out + len, protos[i], l), len += l;
	}
	out[0] = 0, out[1] = 16;
	out[2] = (uint8_t)((len - 4) >> 8), out[3] = (uint8_t)(len - 4);
	out[4] = (uint8_t)((len - 6) >> 8), out[5] = (uint8_t)(len - 6);
	return len;
}

static void test_tls_alpn_h2(void **state)
{
	static const char *const h2_first[] = {"h2", "http/1.1"}, *const h1_only[] = {"http/1.1"},
	                         *const lookalike[] = {"h2c", "h2-14", "xh2"};
	uint8_t ext[512], hello[4096];
	size_t n, len;

	(void)state;
	n = sni_ext(ext, "api.example.com");
	n += alpn_ext(ext + n, h2_first, 2);
	len = client_hello(hello, ext, n);
	assert_true(sl_sniff_is_tls(hello, len));
	assert_int_equal(sl_sniff_tls_offers_h2(hello, len), 1);
	/* Cut anywhere before the whole "h2" name: not known to offer it.  The name
	 * ends 9 bytes before the end (the "http/1.1" entry follows). */
	for (size_t cut = 0; cut <= len; cut++)
		assert_int_equal(sl_sniff_tls_offers_h2(hello, cut), cut >= len - 9);
	n = alpn_ext(ext, h1_only, 1);
	assert_int_equal(sl_sniff_tls_offers_h2(hello, client_hello(hello, ext, n)), 0);
	n = alpn_ext(ext, lookalike, 3);
	assert_int_equal(sl_sniff_tls_offers_h2(hello, client_hello(hello, ext, n)), 0);
	n = sni_ext(ext, "no-alpn.example");
	assert_int_equal(sl_sniff_tls_offers_h2(hello, client_hello(hello, ext, n)), 0);
	/* A list length past its extension is read only as far as the extension. */
	n = alpn_ext(ext, h2_first, 2);
	ext[5] = 0xff;
	len = client_hello(hello, ext, n);
	assert_int_equal(sl_sniff_tls_offers_h2(hello, len), 1);
	assert_int_equal(sl_sniff_tls_offers_h2(NULL, 10), 0);
	assert_false(sl_sniff_is_tls("GET / HTTP/1.1\r\n", 16));
}

static void test_h2_preface(void **state)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

	(void)state;
	assert_int_equal(sl_sniff_h2_preface(preface, sizeof(preface) - 1), 1);
	assert_int_equal(sl_sniff_h2_preface(preface, 14), 1);   /* its start says enough */
	assert_int_equal(sl_sniff_h2_preface(preface, 13), 0);
	assert_int_equal(sl_sniff_h2_preface("PRI * HTTP/2.0\r\n\r\nXX", 20), 0);
	assert_int_equal(sl_sniff_h2_preface("GET / HTTP/1.1\r\n", 16), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tls_sni),
		cmocka_unit_test(test_tls_without_sni),
		cmocka_unit_test(test_http_host),
		cmocka_unit_test(test_proxy_targets),
		cmocka_unit_test(test_tls_alpn_h2),
		cmocka_unit_test(test_h2_preface),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
