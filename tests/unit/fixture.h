/*
 * fixture.h - the segment a unit test builds, as cmocka fixtures: a fresh
 * anonymous segment before each test (fixture_setup), gone after it
 * (fixture_teardown), loaded with a config in the test's own words.  Header-only:
 * each test program is one file.
 */
#ifndef SLUICE_TEST_FIXTURE_H
#define SLUICE_TEST_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/admit.h"
#include "sluice/config.h"
#include "sluice/shm.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FX_MS 1000000LL

struct fixture {
	struct sl_shm shm;
	struct sl_config *cfg;
	struct sl_shm_dims dims; /* zero: the defaults */
	int32_t self;
};

static struct fixture fx;

/* A fresh segment of fx.dims (set before the test, or the defaults). */
static inline int fixture_setup(void **state)
{
	(void)state;
	fx.self = (int32_t)getpid();
	if (!fx.cfg && !(fx.cfg = calloc(1, sizeof(*fx.cfg))))
		return -1;
	if (fx.dims.sections)
		return sl_shm_create_anonymous_dims(&fx.shm, &fx.dims) == 0 ? 0 : -1;
	return sl_shm_create_anonymous(&fx.shm) == 0 ? 0 : -1;
}

static inline int fixture_teardown(void **state)
{
	(void)state;
	sl_shm_detach(&fx.shm);
	sl_config_free(fx.cfg);
	memset(fx.cfg, 0, sizeof(*fx.cfg));
	return 0;
}

/* Load `text` into the segment, as the daemon would at `now` (0: the clock's). */
static inline void fixture_load_at(const char *text, int64_t now)
{
	sl_config_free(fx.cfg);
	memset(fx.cfg, 0, sizeof(*fx.cfg));
	if (sl_config_load_string(fx.cfg, "t.ini", text) != 0) {
		sl_config_print_errors(fx.cfg, stderr);
		fail_msg("bad test config");
	}
	if (now)
		assert_int_equal(sl_shm_apply_config_at(fx.shm.hdr, fx.cfg, fx.self, now), 0);
	else
		assert_int_equal(sl_shm_apply_config(fx.shm.hdr, fx.cfg, fx.self), 0);
}

static inline void fixture_load(const char *text)
{
	fixture_load_at(text, 0);
}

static inline struct sl_dest fixture_dest(const char *addr, uint16_t port)
{
	struct sl_dest d = {.family = AF_INET, .port = port};

	assert_int_equal(inet_pton(AF_INET, addr, d.addr), 1);
	return d;
}

/* The section named `name`. */
static inline struct sl_section *fixture_section(const char *name)
{
	for (unsigned i = 0; i < fx.shm.hdr->slots_used; i++) {
		struct sl_section *s = sl_shm_section(fx.shm.hdr, i);

		if (s->in_use && strcmp(s->spec.name, name) == 0)
			return s;
	}
	fail_msg("no section %s", name);
	return NULL;
}

/* m filled with the sections matching d; their count must be `want`. */
static inline void fixture_match(const struct sl_dest *d, struct sl_match *m, int want)
{
	assert_int_equal(sl_match_sections(fx.shm.hdr, d, m, fx.self), want);
}

#define FIXTURE_TEST(f) cmocka_unit_test_setup_teardown(f, fixture_setup, fixture_teardown)

#endif
