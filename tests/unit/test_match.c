/* Destination matching: every pattern form of docs/config.md against real sockaddrs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/common.h"
#include "sluice/match.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

static struct sl_dest dest4(const char *addr, uint16_t port, const char *name)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct sl_dest d;

	assert_int_equal(inet_pton(AF_INET, addr, &sin.sin_addr), 1);
	assert_int_equal(sl_dest_from_sockaddr(&d, (struct sockaddr *)&sin, sizeof(sin)), 0);
	d.name = name;
	d.name_len = name ? strlen(name) : 0;
	return d;
}

static struct sl_dest dest6(const char *addr, uint16_t port)
{
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	struct sl_dest d;

	assert_int_equal(inet_pton(AF_INET6, addr, &sin6.sin6_addr), 1);
	assert_int_equal(sl_dest_from_sockaddr(&d, (struct sockaddr *)&sin6, sizeof(sin6)), 0);
	return d;
}

static int matches(const char *pattern, const struct sl_dest *d)
{
	struct sl_pattern p;
	char err[200];

	if (sl_pattern_parse(&p, pattern, err, sizeof(err)) != 0)
		fail_msg("pattern %s: %s", pattern, err);
	return sl_pattern_match(&p, d);
}

static void test_names(void **state)
{
	struct sl_dest d = dest4("203.0.113.7", 443, "api.example.com");

	(void)state;
	assert_true(matches("api.example.com", &d));
	assert_true(matches("API.Example.COM.", &d)); /* case and trailing dot ignored */
	assert_true(matches("api.example.com:443", &d));
	assert_false(matches("api.example.com:80", &d));
	assert_false(matches("example.com", &d));
	assert_true(matches("*.example.com", &d));
	assert_true(matches("*.example.com:400-500", &d));
	assert_false(matches("*.api.example.com", &d));
	assert_false(matches("*.ample.com", &d)); /* a suffix matches whole labels only */

	struct sl_dest apex = dest4("203.0.113.7", 443, "example.com");
	assert_false(matches("*.example.com", &apex)); /* any subdomain, not the apex */

	struct sl_dest anon = dest4("203.0.113.7", 443, NULL);
	assert_false(matches("api.example.com", &anon));
	assert_false(matches("*.example.com", &anon));
}

static void test_ipv4(void **state)
{
	struct sl_dest d = dest4("203.0.113.7", 8080, NULL);

	(void)state;
	assert_true(matches("203.0.113.7", &d));
	assert_true(matches("203.0.113.7:8080", &d));
	assert_true(matches("203.0.113.7:8000-8999", &d));
	assert_false(matches("203.0.113.7:9000-9999", &d));
	assert_false(matches("203.0.113.8", &d));
	assert_true(matches("203.0.113.0/24", &d));
	assert_true(matches("203.0.113.5/24", &d)); /* host bits are ignored */
	assert_true(matches("203.0.0.0/16:8080", &d));
	assert_false(matches("203.0.112.0/24", &d));
	assert_true(matches("0.0.0.0/0", &d));
	assert_true(matches("203.0.113.6/31", &d));
	assert_false(matches("203.0.113.4/31", &d));
	assert_false(matches("::/0", &d)); /* IPv6 patterns never match IPv4 */
}

static void test_ipv6(void **state)
{
	struct sl_dest d = dest6("2001:db8::1", 443);

	(void)state;
	assert_true(matches("2001:db8::1", &d));
	assert_true(matches("[2001:db8::1]:443", &d));
	assert_false(matches("[2001:db8::1]:80", &d));
	assert_true(matches("2001:db8::/32", &d));
	assert_true(matches("[2001:db8::/32]:400-500", &d));
	assert_false(matches("2001:db9::/32", &d));
	assert_true(matches("::/0", &d));
	assert_false(matches("0.0.0.0/0", &d));
}

static void test_v4_mapped(void **state)
{
	struct sl_dest d = dest6("::ffff:203.0.113.7", 443);

	(void)state;
	assert_int_equal(d.family, AF_INET);
	assert_true(matches("203.0.113.7:443", &d));
	assert_true(matches("203.0.113.0/24", &d));
}

static void test_any(void **state)
{
	struct sl_dest a = dest4("127.0.0.1", 80, NULL), b = dest6("::1", 9);

	(void)state;
	assert_true(matches("*", &a));
	assert_true(matches("*", &b));
	assert_true(matches("*:80", &a));
	assert_false(matches("*:81", &a));
}

static void test_bad_sockaddrs(void **state)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
	struct sockaddr sa = {.sa_family = AF_UNIX};
	struct sl_dest d;

	(void)state;
	assert_int_equal(sl_dest_from_sockaddr(&d, NULL, sizeof(sin)), -EINVAL);
	assert_int_equal(sl_dest_from_sockaddr(&d, (struct sockaddr *)&sin, 0), -EINVAL);
	assert_int_equal(sl_dest_from_sockaddr(&d, (struct sockaddr *)&sin, sizeof(sin) - 1), -EINVAL);
	assert_int_equal(sl_dest_from_sockaddr(&d, (struct sockaddr *)&sin6, sizeof(sin6) - 1), -EINVAL);
	assert_int_equal(sl_dest_from_sockaddr(&d, &sa, sizeof(sa)), -EAFNOSUPPORT);
}

static void test_format_roundtrip(void **state)
{
	static const char *const forms[] = {
		"example.com", "*.example.com:443", "203.0.113.7", "203.0.113.0/24:8000-8999",
		"2001:db8::1", "[2001:db8::/32]:443", "*", "*:80",
	};

	(void)state;
	for (size_t i = 0; i < SL_ARRAY_LEN(forms); i++) {
		struct sl_pattern p, q;
		char buf[300], err[200];

		assert_int_equal(sl_pattern_parse(&p, forms[i], err, sizeof(err)), 0);
		sl_pattern_format(&p, buf, sizeof(buf));
		assert_string_equal(buf, forms[i]);
		assert_int_equal(sl_pattern_parse(&q, buf, err, sizeof(err)), 0);
		assert_memory_equal(&p, &q, sizeof(p));
	}
}

static void test_untrusted_pattern(void **state)
{
	struct sl_pattern p;
	struct sl_dest d = dest4("10.1.2.3", 80, "a.example");

	(void)state;
	/* Garbage as another process could leave it in the segment: no crash, no match. */
	memset(&p, 0xff, sizeof(p));
	p.kind = SL_PAT_NAME;
	assert_false(sl_pattern_match(&p, &d));
	p.kind = SL_PAT_SUFFIX;
	assert_false(sl_pattern_match(&p, &d));
	p.kind = SL_PAT_V4;
	p.port_lo = 0;
	(void)sl_pattern_match(&p, &d); /* prefix 255 is clamped to 32 */
	p.kind = 99;
	assert_false(sl_pattern_match(&p, &d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),         cmocka_unit_test(test_ipv4),
		cmocka_unit_test(test_ipv6),          cmocka_unit_test(test_v4_mapped),
		cmocka_unit_test(test_any),           cmocka_unit_test(test_bad_sockaddrs),
		cmocka_unit_test(test_format_roundtrip), cmocka_unit_test(test_untrusted_pattern),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
