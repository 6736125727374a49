/* The matcher with overrides (docs/config.md, "Overrides"): override lines compiled into sections of
 * their own, and the matcher putting an override in place of its base only where
 * the base applies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/admit.h"
#include "sluice/config.h"
#include "sluice/shm.h"

#include <arpa/inet.h>
#include <string.h>
#include <unistd.h>

static const char *conf = "[api]\n"
                          "match = 10.0.0.0/8\n"
                          "per = address\n"
                          "strategy = token-bucket\n"
                          "rate = 10/s\n"
                          "override = 10.1.0.0/16 50/s\n"
                          "override = 10.1.2.3 2/m\n"
                          "override = 192.0.2.1 99/s\n"
                          "[other]\n"
                          "match = 10.1.2.3\n"
                          "rate = 1/s\n";

static void test_compiled(void **state)
{
	static struct sl_config cfg;

	(void)state;
	assert_int_equal(sl_config_load_string(&cfg, "t.ini", conf), 0);
	assert_int_equal(cfg.nsections, 5);
	assert_string_equal(cfg.sections[1].spec.name, "api/10.1.0.0/16");
	assert_int_equal(cfg.sections[1].spec.override_of, 1);
	assert_int_equal(cfg.sections[1].spec.amount, 50);
	assert_int_equal(cfg.sections[1].spec.burst, 50); /* token-bucket: its own AMOUNT */
	assert_int_equal(cfg.sections[1].spec.per, SL_PER_ADDRESS);
	assert_int_equal(cfg.sections[2].spec.window_ns, 60000000000LL);
	assert_int_equal(cfg.sections[4].spec.override_of, 0);
	sl_config_free(&cfg);
}

static unsigned match_names(struct sl_shm_header *h, const char *addr, char names[][SL_SECTION_NAME_MAX])
{
	struct sl_dest d = {.family = AF_INET, .port = 443};
	struct sl_match m;
	unsigned n = 0;

	inet_pton(AF_INET, addr, d.addr);
	sl_match_sections(h, &d, &m, (int32_t)getpid());
	for (uint64_t bits = m.mask; bits; bits &= bits - 1)
		memcpy(names[n++], sl_shm_section(h, m.idx[__builtin_ctzll(bits)])->spec.name, SL_SECTION_NAME_MAX);
	return n;
}

static void test_matched(void **state)
{
	static struct sl_config cfg;
	struct sl_shm_dims dims;
	struct sl_shm shm;
	char names[8][SL_SECTION_NAME_MAX];

	(void)state;
	assert_int_equal(sl_config_load_string(&cfg, "t.ini", conf), 0);
	sl_config_dims(&cfg, &dims);
	assert_int_equal(sl_shm_create_anonymous_dims(&shm, &dims), 0);
	assert_int_equal(sl_shm_apply_config(shm.hdr, &cfg, (int32_t)getpid()), 0);
	/* the base alone */
	assert_int_equal(match_names(shm.hdr, "10.9.9.9", names), 1);
	assert_string_equal(names[0], "api");
	/* the first override that takes it, in place of the base */
	assert_int_equal(match_names(shm.hdr, "10.1.9.9", names), 1);
	assert_string_equal(names[0], "api/10.1.0.0/16");
	/* two overrides take it: the first in the config wins; another section stays */
	assert_int_equal(match_names(shm.hdr, "10.1.2.3", names), 2);
	assert_string_equal(names[0], "api/10.1.0.0/16");
	assert_string_equal(names[1], "other");
	/* an override outside its base's match applies nowhere */
	assert_int_equal(match_names(shm.hdr, "192.0.2.1", names), 0);
	sl_shm_detach(&shm);
	sl_config_free(&cfg);
}

static void test_refused(void **state)
{
	static struct sl_config cfg;

	(void)state;
	assert_int_not_equal(sl_config_load_string(&cfg, "t.ini", "[a]\nmatch = *\nrate = 1/s\noverride = x.org 2/s\n"), 0);
	assert_non_null(strstr(cfg.errors[0], "override needs per"));
	sl_config_free(&cfg);
	assert_int_not_equal(sl_config_load_string(&cfg, "t.ini",
	                                           "[a]\nmatch = *\nper = host\nrate = 1/s\noverride = x.org 2/s 3\n"), 0);
	assert_non_null(strstr(cfg.errors[0], "bad override"));
	sl_config_free(&cfg);
	assert_int_not_equal(sl_config_load_string(&cfg, "t.ini",
	                                           "[a]\nmatch = *\nper = host\nrate = 1/s\nmeter = bytes\n"
	                                           "override = x.org 2/s concurrency 3\n"),
	                     0);
	assert_non_null(strstr(cfg.errors[0], "concurrency limits open connections"));
	sl_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compiled),
		cmocka_unit_test(test_matched),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
