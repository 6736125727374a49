/*
 * Reading Sentinels' and Cluster nodes' answers (src/daemon/redisnode.c): key
 * slots as Redis computes them (the figures are CLUSTER KEYSLOT's, from a
 * redis-server 7.0), addresses, redirections, and every malformed answer
 * refused rather than guessed from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/redisnode.h"

#include <string.h>

static unsigned slot(const char *k)
{
	return sl_redis_slot(k, strlen(k));
}

static void test_slots(void **state)
{
	(void)state;
	assert_int_equal(slot("foo"), 12182);
	assert_int_equal(slot("{user1000}.following"), 3443);
	assert_int_equal(slot("sluice:{t1}"), 8943);
	/* Every key of a fleet shares its prefix's slot: the hash tag. */
	assert_int_equal(slot("sluice:{t1}:i:api:r"), 8943);
	assert_int_equal(slot("sluice:{sluice}"), 59);
	/* An empty tag is no tag; only the first tag counts; an open brace alone. */
	assert_int_equal(slot("a{}b"), 13694);
	assert_int_equal(slot("{}x"), 10595);
	assert_int_equal(slot("{a}{b}"), 15495);
	assert_int_equal(slot("x{y"), 2740);
	assert_int_equal(slot(""), 0);
}

static void test_addresses(void **state)
{
	struct sl_redis_addr a;
	char buf[300];

	(void)state;
	assert_int_equal(sl_redis_addr_parse("127.0.0.1:6379", 14, &a), 0);
	assert_string_equal(a.host, "127.0.0.1");
	assert_int_equal(a.port, 6379);
	assert_int_equal(sl_redis_addr_parse("[::1]:7000", 10, &a), 0);
	assert_string_equal(a.host, "::1");
	sl_redis_addr_format(&a, buf, sizeof(buf));
	assert_string_equal(buf, "[::1]:7000");
	assert_int_equal(sl_redis_addr_parse("redis.example:26379", 19, &a), 0);
	/* Only the given length is read. */
	assert_int_equal(sl_redis_addr_parse("127.0.0.1:6379 x", 14, &a), 0);
	assert_int_equal(a.port, 6379);
	assert_int_equal(sl_redis_addr_parse("127.0.0.1", 9, &a), -1);
	assert_int_equal(sl_redis_addr_parse("127.0.0.1:0", 11, &a), -1);
	assert_int_equal(sl_redis_addr_parse("127.0.0.1:65536", 15, &a), -1);
	assert_int_equal(sl_redis_addr_parse("127.0.0.1:6x", 12, &a), -1);
	assert_int_equal(sl_redis_addr_parse("::1:6379", 8, &a), -1);
	assert_int_equal(sl_redis_addr_parse("[::1]6379", 9, &a), -1);
	assert_int_equal(sl_redis_addr_parse(":6379", 5, &a), -1);
	assert_int_equal(sl_redis_addr_parse("a b:6379", 8, &a), -1);
	assert_int_equal(sl_redis_addr_parse("/tmp/x:1", 8, &a), -1);
}

static void test_redirects(void **state)
{
	struct sl_redis_addr self = {"10.0.0.9", 7000}, to;

	(void)state;
	assert_int_equal(sl_redis_redirect("MOVED 3999 127.0.0.1:6381", &self, &to), 1);
	assert_string_equal(to.host, "127.0.0.1");
	assert_int_equal(to.port, 6381);
	assert_int_equal(sl_redis_redirect("ASK 3999 [::1]:6382", &self, &to), 2);
	assert_string_equal(to.host, "::1");
	assert_int_equal(to.port, 6382);
	/* A node that does not know its own address: the one asked. */
	assert_int_equal(sl_redis_redirect("MOVED 1 :6383", &self, &to), 1);
	assert_string_equal(to.host, "10.0.0.9");
	assert_int_equal(to.port, 6383);
	assert_int_equal(sl_redis_redirect("MOVED 1 :6383", NULL, &to), 0);
	assert_int_equal(sl_redis_redirect("TRYAGAIN Multiple keys request during rehashing of slot", &self, &to), 0);
	assert_int_equal(sl_redis_redirect("MOVED x 127.0.0.1:6381", &self, &to), 0);
	assert_int_equal(sl_redis_redirect("MOVED 12 127.0.0.1", &self, &to), 0);
	assert_int_equal(sl_redis_redirect("MOVED  127.0.0.1:1", &self, &to), 0);
	assert_int_equal(sl_redis_redirect("MOVED", &self, &to), 0);
	assert_int_equal(sl_redis_redirect(NULL, &self, &to), 0);
}

/* Replies built by hand, as hiredis hands them over. */
static redisReply *str(const char *s)
{
	static redisReply pool[64];
	static unsigned used;
	redisReply *r = &pool[used++ % 64];

	memset(r, 0, sizeof(*r));
	r->type = REDIS_REPLY_STRING;
	r->str = (char *)s;
	r->len = strlen(s);
	return r;
}

static redisReply *integer(long long v)
{
	redisReply *r = str("");

	r->type = REDIS_REPLY_INTEGER;
	r->str = NULL;
	r->integer = v;
	return r;
}

static redisReply *array(redisReply **e, size_t n)
{
	redisReply *r = str("");

	r->type = REDIS_REPLY_ARRAY;
	r->str = NULL;
	r->element = e;
	r->elements = n;
	return r;
}

static void test_sentinel_answers(void **state)
{
	struct sl_redis_addr a;
	redisReply *ok[] = {str("127.0.0.1"), str("6380")}, *badport[] = {str("127.0.0.1"), str("80x")};
	redisReply *empty[] = {str(""), str("6380")}, *num[] = {str("127.0.0.1"), integer(6380)};
	redisReply nil = {.type = REDIS_REPLY_NIL};

	(void)state;
	assert_int_equal(sl_redis_sentinel_master(array(ok, 2), &a), 0);
	assert_string_equal(a.host, "127.0.0.1");
	assert_int_equal(a.port, 6380);
	assert_int_equal(sl_redis_sentinel_master(&nil, &a), -1); /* an unknown name */
	assert_int_equal(sl_redis_sentinel_master(array(ok, 1), &a), -1);
	assert_int_equal(sl_redis_sentinel_master(array(badport, 2), &a), -1);
	assert_int_equal(sl_redis_sentinel_master(array(empty, 2), &a), -1);
	assert_int_equal(sl_redis_sentinel_master(array(num, 2), &a), -1);
	assert_int_equal(sl_redis_sentinel_master(NULL, &a), -1);

	assert_int_equal(sl_redis_switch_master("m1 127.0.0.1 6379 127.0.0.1 6380", "m1", &a), 0);
	assert_int_equal(a.port, 6380);
	assert_int_equal(sl_redis_switch_master("m2 127.0.0.1 6379 127.0.0.1 6380", "m1", &a), -1);
	assert_int_equal(sl_redis_switch_master("m1 127.0.0.1 6379 127.0.0.1", "m1", &a), -1);
	assert_int_equal(sl_redis_switch_master("m1 127.0.0.1 6379 127.0.0.1 6380 x", "m1", &a), -1);
	assert_int_equal(sl_redis_switch_master("m1 127.0.0.1 6379 127.0.0.1 0", "m1", &a), -1);

	redisReply *master[] = {str("master"), integer(42), array(NULL, 0)};
	redisReply *slave[] = {str("slave"), str("127.0.0.1"), integer(6379), str("connected"), integer(1)};
	assert_int_equal(sl_redis_role_master(array(master, 3)), 1);
	assert_int_equal(sl_redis_role_master(array(slave, 5)), 0);
	assert_int_equal(sl_redis_role_master(array(NULL, 0)), 0);
	assert_int_equal(sl_redis_role_master(str("master")), 0);
}

static void test_cluster_answers(void **state)
{
	struct sl_redis_addr a, self = {"10.0.0.9", 7000};
	redisReply *n1[] = {str("127.0.0.1"), integer(7001), str("id1")};
	redisReply *n2[] = {str(""), integer(7002), str("id2")};
	redisReply *n2r[] = {str("127.0.0.1"), integer(7012), str("id2r")};
	redisReply *r1[] = {integer(0), integer(5460), array(n1, 3)};
	redisReply *r2[] = {integer(5461), integer(10922), array(n2, 3), array(n2r, 3)};
	redisReply *ranges[] = {array(r1, 3), array(r2, 4)};
	redisReply *badport[] = {str("127.0.0.1"), integer(70000)};
	redisReply *rb[] = {integer(10923), integer(16383), array(badport, 2)};
	redisReply *withbad[] = {array(r1, 3), array(rb, 3)};
	redisReply *odd[] = {str("x"), integer(3)};
	redisReply *err = str("ERR This instance has cluster support disabled");

	(void)state;
	assert_int_equal(sl_redis_cluster_master(array(ranges, 2), 100, &self, &a), 0);
	assert_string_equal(a.host, "127.0.0.1");
	assert_int_equal(a.port, 7001);
	/* The master is the range's first node, never a replica; an empty host is
	 * the node that answered. */
	assert_int_equal(sl_redis_cluster_master(array(ranges, 2), 8943, &self, &a), 0);
	assert_string_equal(a.host, "10.0.0.9");
	assert_int_equal(a.port, 7002);
	assert_int_equal(sl_redis_cluster_master(array(ranges, 2), 8943, NULL, &a), -1);
	/* A slot no range holds (a cluster still being made). */
	assert_int_equal(sl_redis_cluster_master(array(ranges, 2), 12000, &self, &a), -1);
	assert_int_equal(sl_redis_cluster_master(array(withbad, 2), 12000, &self, &a), -1);
	assert_int_equal(sl_redis_cluster_master(array(odd, 2), 3, &self, &a), -1);
	err->type = REDIS_REPLY_ERROR;
	assert_int_equal(sl_redis_cluster_master(err, 3, &self, &a), -1);
	assert_int_equal(sl_redis_cluster_master(NULL, 3, &self, &a), -1);
}

static void test_run_id(void **state)
{
	char id[41];

	(void)state;
	assert_int_equal(sl_redis_run_id("# Server\r\nredis_version:7.0.15\r\nrun_id:"
	                                 "0123456789abcdef0123456789abcdef01234567\r\ntcp_port:6379\r\n", id), 0);
	assert_string_equal(id, "0123456789abcdef0123456789abcdef01234567");
	assert_int_equal(sl_redis_run_id("run_id:0123\r\n", id), -1);
	assert_int_equal(sl_redis_run_id("xrun_id:0123456789abcdef0123456789abcdef01234567", id), -1);
	assert_int_equal(sl_redis_run_id("redis_version:7\r\n", id), -1);
	assert_int_equal(sl_redis_run_id(NULL, id), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slots),
		cmocka_unit_test(test_redirects),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_sentinel_answers),
		cmocka_unit_test(test_cluster_answers),
		cmocka_unit_test(test_run_id),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
