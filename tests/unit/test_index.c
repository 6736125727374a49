/* The match index (src/core/index.c): what it finds is exactly what looking at
 * every section's every pattern finds, for random configs and destinations. */
#include "sluice/admit.h"
#include "sluice/conc.h"
#include "sluice/config.h"
#include "sluice/index.h"
#include "sluice/shm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sl_config cfg;

static void load(struct sl_shm *a, const char *text)
{
	struct sl_shm_dims d;

	assert_int_equal(sl_config_load_string(&cfg, "t.ini", text), 0);
	sl_config_dims(&cfg, &d);
	assert_int_equal(sl_shm_create_anonymous_dims(a, &d), 0);
	assert_int_equal(sl_shm_apply_config(a->hdr, &cfg, 1), 0);
}

/* The oracle: every in-use section whose patterns take d, by index, ascending. */
static unsigned scan(struct sl_shm_header *h, const struct sl_dest *d, uint32_t *out)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < h->slots_used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!sec->in_use || sec->spec.meter != d->meter)
			continue;
		for (uint32_t p = 0; p < sec->spec.npatterns; p++)
			if (sl_pattern_match(sl_shm_pattern(h, sec->spec.pattern_first + p), d)) {
				out[n++] = i;
				break;
			}
	}
	return n;
}

static uint32_t rnd(uint32_t n)
{
	return (uint32_t)random() % n;
}

static const char *const words[] = {"api", "hooks", "example", "test", "a", "b", "svc", "eu"};

/* A random name of 1 to 4 labels from a small vocabulary, so names meet. */
static void random_name(char *buf, size_t size)
{
	unsigned labels = 1 + rnd(4);

	buf[0] = '\0';
	for (unsigned l = 0; l < labels; l++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", l ? "." : "", words[rnd(8)]);
}

static void random_pattern(char *buf, size_t size)
{
	char host[128], port[32] = "";

	switch (rnd(6)) {
	case 0:
		random_name(host, sizeof(host));
		break;
	case 1:
		random_name(host + 2, sizeof(host) - 2);
		host[0] = '*';
		host[1] = '.';
		break;
	case 2:
		snprintf(host, sizeof(host), "10.%u.%u.%u/%u", rnd(3), rnd(3), rnd(4), 8 + rnd(25));
		break;
	case 3:
		snprintf(host, sizeof(host), "10.%u.%u.%u", rnd(3), rnd(3), rnd(4));
		break;
	case 4:
		snprintf(host, sizeof(host), "2001:db8:%x::%x/%u", rnd(3), rnd(4), 16 + rnd(113));
		break;
	default:
		snprintf(host, sizeof(host), "*");
	}
	if (rnd(3) == 0)
		snprintf(port, sizeof(port), ":%u", 80 + rnd(4));
	else if (rnd(4) == 0)
		snprintf(port, sizeof(port), ":%u-%u", 80 + rnd(2), 82 + rnd(2));
	if (port[0] && strchr(host, ':'))
		snprintf(buf, size, "[%s]%s", host, port);
	else
		snprintf(buf, size, "%s%s", host, port);
}

static void random_dest(struct sl_dest *d, char *name, size_t size)
{
	memset(d, 0, sizeof(*d));
	d->port = (uint16_t)(79 + rnd(6));
	d->meter = rnd(4) == 0 ? SL_METER_REQUESTS : SL_METER_CONNECTIONS;
	if (rnd(4)) {
		d->family = AF_INET;
		d->addr[0] = 10;
		d->addr[1] = (uint8_t)rnd(3);
		d->addr[2] = (uint8_t)rnd(3);
		d->addr[3] = (uint8_t)rnd(4);
	} else {
		d->family = AF_INET6;
		inet_pton(AF_INET6, "2001:db8::", d->addr);
		d->addr[5] = (uint8_t)rnd(3);
		d->addr[15] = (uint8_t)rnd(4);
	}
	if (rnd(3)) {
		random_name(name, size);
		d->name = name;
		d->name_len = strlen(name);
	}
}

/* Random configs of up to 200 sections of up to 6 patterns: for 2,000 random
 * destinations each, the index finds the oracle's sections, in its order. */
static void test_index_agrees_with_scanning(void **state)
{
	size_t cap = 1 << 20;
	char *text = malloc(cap);

	(void)state;
	srandom(7);
	for (int round = 0; round < 20; round++) {
		struct sl_shm a;
		size_t used = 0;
		unsigned nsec = 1 + rnd(200);

		for (unsigned i = 0; i < nsec; i++) {
			unsigned np = 1 + rnd(6);

			used += (size_t)snprintf(text + used, cap - used, "[s%u]\nmatch =", i);
			for (unsigned p = 0; p < np; p++) {
				char pat[160];

				random_pattern(pat, sizeof(pat));
				used += (size_t)snprintf(text + used, cap - used, "%s %s", p && p % 3 == 0 ? "\n " : "", pat);
			}
			used += (size_t)snprintf(text + used, cap - used, "\nmeter = %s\nrate = 5/s\n",
			                         rnd(4) == 0 ? "requests" : "connections");
		}
		load(&a, text);
		for (int q = 0; q < 2000; q++) {
			struct sl_dest d;
			struct sl_match m;
			char name[128];
			uint32_t want[SL_MATCH_MAX * 4];
			unsigned n;
			int got;

			random_dest(&d, name, sizeof(name));
			n = scan(a.hdr, &d, want);
			got = sl_match_sections(a.hdr, &d, &m, 1);
			if (n > SL_MATCH_MAX) {
				assert_true(m.overflow);
				continue;
			}
			assert_false(m.overflow);
			assert_int_equal(got, (int)n);
			for (unsigned k = 0; k < n; k++) {
				assert_true(m.mask & (1ULL << k));
				assert_int_equal(m.idx[k], want[k]);
			}
		}
		sl_shm_detach(&a);
	}
	free(text);
}

/* More than 64 sections applying to one destination: the match says so and the
 * reservation is refused (with the first section's errno), never let through. */
static void test_too_many_sections_refused(void **state)
{
	size_t cap = 1 << 16, used = 0;
	char *text = malloc(cap);
	struct sl_dest d = {.family = AF_INET, .port = 443, .addr = {10, 0, 0, 1}};
	struct sl_match m;
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_shm a;
	uint64_t taken;
	uint32_t seen;
	int full;

	(void)state;
	for (unsigned i = 0; i < 70; i++)
		used += (size_t)snprintf(text + used, cap - used, "[s%u]\nmatch = 10.0.0.0/%u\nrate = 1000/s\n%s", i,
		                         8 + i % 20, i == 0 ? "refuse = EHOSTUNREACH\nconcurrency = 5\n" : "");
	load(&a, text);
	assert_int_equal(sl_match_sections(a.hdr, &d, &m, 1), SL_MATCH_MAX);
	assert_true(m.overflow);
	assert_int_equal(sl_admit_reserve(a.hdr, &m, 1000000000, 1, t), -ECONNREFUSED);
	assert_int_equal(t->refuse_errno, EHOSTUNREACH);
	assert_int_equal(sl_conc_take(a.hdr, &m, 1, &taken, &full, &seen), -EDQUOT);
	/* A destination 64 of them apply to is matched whole. */
	d.addr[1] = 1;
	assert_true(sl_match_sections(a.hdr, &d, &m, 1) < SL_MATCH_MAX);
	assert_false(m.overflow);
	assert_int_equal(sl_admit_reserve(a.hdr, &m, 1000000000, 1, t), 0);
	sl_shm_detach(&a);
	free(text);
}

/* Exact names and suffixes: a suffix takes only names strictly under it, at a
 * label boundary, and names are compared whole. */
static void test_names_and_suffixes(void **state)
{
	struct sl_dest d = {.family = AF_INET, .port = 443, .addr = {192, 0, 2, 1}};
	struct sl_match m;
	struct sl_shm a;
	static const struct {
		const char *name;
		int n;
	} cases[] = {
		{"example.com", 1},         /* [exact] only: *.example.com needs a label more */
		{"a.example.com", 2},       /* [sub] and [deep] */
		{"x.a.example.com", 2},     /* [sub], and [deep] by *.a.example.com */
		{"xexample.com", 0},        /* not at a label boundary */
		{"a.example.com.evil", 0},
		{"com", 0},
		{".example.com", 0},        /* a leading dot is no label */
	};

	(void)state;
	load(&a, "[exact]\nmatch = example.com\nrate = 1/s\n"
	         "[sub]\nmatch = *.example.com\nrate = 1/s\n"
	         "[deep]\nmatch = a.example.com, *.a.example.com\nrate = 1/s\n");
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		d.name = cases[i].name;
		d.name_len = strlen(d.name);
		assert_int_equal(sl_match_sections(a.hdr, &d, &m, 1), cases[i].n);
	}
	sl_shm_detach(&a);
}

/* 10,000 sections: a look-up still probes only the keys a destination has (every
 * probe run is short), and finds its one section. */
static void test_ten_thousand_sections(void **state)
{
	size_t cap = 4 << 20, used = 0;
	char *text = malloc(cap);
	struct sl_match m;
	struct sl_shm a;

	(void)state;
	for (unsigned i = 0; i < 10000; i++)
		used += (size_t)snprintf(text + used, cap - used,
		                         "[s%u]\nmatch = host%u.example:443, 10.%u.%u.0/24:%u\nrate = 1/s\n", i,
		                         i, i / 256, i % 256, 1000 + i % 7);
	load(&a, text);
	assert_true(a.hdr->index_run <= 16);
	for (unsigned i = 0; i < 10000; i += 97) {
		char name[64], want[16];
		struct sl_dest d = {.family = AF_INET, .port = 443, .addr = {192, 0, 2, 1}};

		snprintf(name, sizeof(name), "host%u.example", i);
		d.name = name;
		d.name_len = strlen(name);
		assert_int_equal(sl_match_sections(a.hdr, &d, &m, 1), 1);
		snprintf(want, sizeof(want), "s%u", i);
		assert_string_equal(sl_shm_section(a.hdr, m.idx[0])->spec.name, want);
		d.name = NULL;
		d.name_len = 0;
		d.addr[0] = 10;
		d.addr[1] = (uint8_t)(i / 256);
		d.addr[2] = (uint8_t)(i % 256);
		d.port = (uint16_t)(1000 + i % 7);
		assert_int_equal(sl_match_sections(a.hdr, &d, &m, 1), 1);
		d.port = (uint16_t)(1000 + (i + 1) % 7); /* the port is part of the key */
		assert_int_equal(sl_match_sections(a.hdr, &d, &m, 1), 0);
	}
	sl_shm_detach(&a);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_agrees_with_scanning),
		cmocka_unit_test(test_too_many_sections_refused),
		cmocka_unit_test(test_names_and_suffixes),
		cmocka_unit_test(test_ten_thousand_sections),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
