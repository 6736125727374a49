/* DNS messages as the seccomp supervisor reads them: a query's name, an answer's
 * addresses through compression and CNAMEs, and every malformed message refused
 * or read no further than it holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/dnsmsg.h"

#include <string.h>
#include <sys/socket.h>

/* A query for API.Test (type A), id 0x1234: header, question. */
static const uint8_t query[] = {
	0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
	3, 'A', 'P', 'I', 4, 'T', 'e', 's', 't', 0, 0, 1, 0, 1,
};

/* Its answer: a CNAME api.test -> edge.test (compressed against the question),
 * then edge.test A 127.0.0.9 and AAAA ::1 (each named by a pointer to the
 * CNAME's target), and a TXT record that is neither. */
static const uint8_t answer[] = {
	0x12, 0x34, 0x81, 0x80, 0, 1, 0, 4, 0, 0, 0, 0,
	3, 'a', 'p', 'i', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1,
	/* 26: CNAME, rdata "edge" + pointer to "test" at 16 */
	0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 7, 4, 'e', 'd', 'g', 'e', 0xC0, 16,
	/* 45: A, named by a pointer to 38 (edge.test) */
	0xC0, 38, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 9,
	/* 61: AAAA */
	0xC0, 38, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
	/* 89: TXT "x" */
	0xC0, 38, 0, 16, 0, 1, 0, 0, 0, 60, 0, 2, 1, 'x',
};

static void test_question(void **state)
{
	char name[64];

	(void)state;
	assert_int_equal(sl_dns_question(query, sizeof(query), name, sizeof(name)), 0);
	assert_string_equal(name, "api.test");
	/* a name that does not fit the caller's buffer: refused, nothing past it */
	memset(name, 'z', sizeof(name));
	assert_int_equal(sl_dns_question(query, sizeof(query), name, 8), -1);
	assert_int_equal(name[8], 'z');
	/* every cut short of the question's end is refused */
	for (size_t n = 0; n < sizeof(query); n++)
		assert_int_equal(sl_dns_question(query, n, name, sizeof(name)), -1);
}

static void test_answer(void **state)
{
	struct sl_dns_addr a[4];
	char name[64];

	(void)state;
	assert_int_equal(sl_dns_answer_addrs(answer, sizeof(answer), name, sizeof(name), a, 4), 2);
	assert_string_equal(name, "api.test");
	assert_int_equal(a[0].family, AF_INET);
	assert_memory_equal(a[0].addr, ((uint8_t[]){127, 0, 0, 9}), 4);
	assert_int_equal(a[1].family, AF_INET6);
	assert_int_equal(a[1].addr[15], 1);
	/* room for one: one */
	assert_int_equal(sl_dns_answer_addrs(answer, sizeof(answer), name, sizeof(name), a, 1), 1);
	/* a query (no QR bit) is not an answer */
	assert_int_equal(sl_dns_answer_addrs(query, sizeof(query), name, sizeof(name), a, 4), -1);
	/* cut anywhere: never more than what the cut leaves whole, never a crash */
	for (size_t n = 0; n < sizeof(answer); n++) {
		int k = sl_dns_answer_addrs(answer, n, name, sizeof(name), a, 4);

		assert_true(k <= (n >= 61 ? 1 : 0) + (n >= 89 ? 1 : 0));
	}
}

static void test_pointer_loops(void **state)
{
	/* an answer whose record name points at itself, and one pointing past the end */
	uint8_t loop[sizeof(answer)], past[sizeof(answer)];
	struct sl_dns_addr a[4];
	char name[64];

	(void)state;
	memcpy(loop, answer, sizeof(answer));
	loop[45] = 0xC0, loop[46] = 45;
	assert_int_equal(sl_dns_answer_addrs(loop, sizeof(loop), name, sizeof(name), a, 4), 0);
	memcpy(past, answer, sizeof(answer));
	past[26] = 0xFF, past[27] = 0xFF;
	assert_int_equal(sl_dns_answer_addrs(past, sizeof(past), name, sizeof(name), a, 4), 0);
	/* a question whose name is a pointer to itself */
	uint8_t q[] = {0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1};
	assert_int_equal(sl_dns_question(q, sizeof(q), name, sizeof(name)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_question),
		cmocka_unit_test(test_answer),
		cmocka_unit_test(test_pointer_loops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
