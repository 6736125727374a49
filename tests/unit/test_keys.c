/* keys.c: keyed sections' keys - made of what `per` says, found again, kept apart,
 * evicted only when idle (least recently used first), refused when every record a
 * key may use is busy, found again by identity after their record was reused, and
 * carried into a segment of another size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/admit.h"
#include "sluice/conc.h"
#include "sluice/config.h"
#include "sluice/keys.h"
#include "sluice/shm.h"
#include "sluice/strategy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define MS 1000000LL
#define NOW (1000 * 1000 * MS) /* a monotonic time well after zero */

static void segment_with(struct sl_shm *a, const char *ini, uint32_t keys)
{
	static struct sl_config cfg; /* large */
	struct sl_shm_dims d = {64, 1024, SL_HOLDERS_DEFAULT, keys, 0, SL_PROCS_DEFAULT}, want;

	assert_int_equal(sl_config_load_string(&cfg, "t.ini", ini), 0);
	sl_config_dims(&cfg, &want);
	d.key_more = want.key_more; /* records with a more only when a section needs one */
	assert_int_equal(sl_shm_create_anonymous_dims(a, &d), 0);
	assert_int_equal(sl_shm_apply_config(a->hdr, &cfg, 1), 0);
}

static struct sl_dest named(const char *name)
{
	struct sl_dest d = {.family = AF_INET, .port = 443, .addr = {10, 0, 0, 1}};

	d.name = name;
	d.name_len = strlen(name);
	return d;
}

/* Reserve and release one request for d at `now`: its slot, or -errno. */
static int64_t admit(struct sl_shm_header *h, const struct sl_dest *d, int64_t now)
{
	static struct sl_match m;
	static union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	int64_t retry;
	int rc;

	if (sl_match_sections(h, d, &m, 1) <= 0)
		return -ENOENT;
	if ((rc = sl_admit_reserve(h, &m, now, 1, t)) < 0)
		return rc;
	if (t->mask && sl_admit_release(h, t, t->release_ns, 1, &retry) != 0)
		return -EAGAIN;
	return t->release_ns;
}

static void format(const char *per, struct sl_dest d, const char *want)
{
	struct sl_spec s = {0};
	struct sl_keysrc src;
	struct sl_keyid id;
	char err[200], buf[300];

	assert_int_equal(sl_parse_per(per, &s, err, sizeof(err)), 0);
	sl_keysrc_from_dest(&src, &d);
	sl_keyid_make(&id, &s, &src);
	sl_keyid_format(&id, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

/* What each `per` makes a key of, and how it is written back. */
static void test_key_identity(void **state)
{
	struct sl_dest v4 = named("API.example.com"), v6 = {.family = AF_INET6, .port = 8443};
	struct sl_dest bare = {.family = AF_INET, .port = 80, .addr = {198, 51, 100, 77}};
	struct sl_spec s = {0};
	char err[200];

	(void)state;
	v4.name = "api.example.com";
	inet_pton(AF_INET6, "2001:db8:1:2:3:4:5:6", v6.addr);
	format("host", v4, "api.example.com");
	format("host:port", v4, "api.example.com:443");
	format("host", bare, "198.51.100.77"); /* no name known: its address */
	format("address", bare, "198.51.100.77");
	format("address/24", bare, "198.51.100.0/24");
	format("address/24:port", bare, "198.51.100.0/24:80");
	format("address/64", v6, "[2001:db8:1:2::]/64");
	format("address/64", bare, "198.51.100.77"); /* /64 is for IPv6 only */
	format("address/16/48", v6, "[2001:db8:1::]/48");
	format("address/16/48", bare, "198.51.0.0/16");
	format("address:port", v6, "[2001:db8:1:2:3:4:5:6]:8443");
	/* Words that are no `per`. */
	assert_int_equal(sl_parse_per("hosts", &s, err, sizeof(err)), -1);
	assert_int_equal(sl_parse_per("address/0", &s, err, sizeof(err)), -1);
	assert_int_equal(sl_parse_per("address/129", &s, err, sizeof(err)), -1);
	assert_int_equal(sl_parse_per("address/64/48", &s, err, sizeof(err)), -1);
	assert_int_equal(sl_parse_per("host:80", &s, err, sizeof(err)), -1);
	assert_int_equal(sl_parse_per("address/24x", &s, err, sizeof(err)), -1);
}

/* Each name its own queue at the section's rate; two names never share one. */
static void test_a_queue_per_key(void **state)
{
	static const char ini[] = "[per]\nmatch = *.example.com\nper = host\nrate = 10/s\n";
	struct sl_dest a = named("a.example.com"), b = named("b.example.com");
	struct sl_shm s;

	(void)state;
	segment_with(&s, ini, 64);
	assert_int_equal(admit(s.hdr, &a, NOW), NOW);
	assert_int_equal(admit(s.hdr, &b, NOW), NOW);      /* another key: not queued */
	assert_int_equal(admit(s.hdr, &a, NOW), NOW + 100 * MS); /* the same: behind */
	assert_int_equal(admit(s.hdr, &b, NOW + 10 * MS), NOW + 100 * MS);
	assert_int_equal(s.hdr->keys_used, 2);
	assert_int_equal(sl_shm_section(s.hdr, 0)->more.keys, 2);
	/* The section's own counters are the sums. */
	assert_int_equal(sl_shm_section(s.hdr, 0)->state.admitted, 4);
	sl_shm_detach(&s);
}

/* A name longer than a key record keeps whole (SL_KEYID_BYTES) is kept as its head
 * and a hash of all of it: two long names alike in their heads are two queues, the
 * same long name one, and stat writes the head and "...". */
static void test_long_names(void **state)
{
	static const char ini[] = "[per]\nmatch = *.example.com\nper = host\nrate = 10/s\n";
	/* 45 bytes each, the same first 40 */
	struct sl_dest a = named("hooks-eu-west-1-production.team-one.example.com"),
	               b = named("hooks-eu-west-1-production.team-two.example.com"),
	               c = named("hooks-eu-west-1-production.team-one.example.com");
	struct sl_dest w = named("exactly-32-bytes-long.example.io");
	struct sl_shm s;

	(void)state;
	assert_int_equal(strlen(a.name), strlen(b.name));
	assert_true(strlen(a.name) > SL_KEYID_BYTES);
	assert_int_equal(strlen(w.name), SL_KEYID_BYTES);
	segment_with(&s, ini, 64);
	assert_int_equal(sl_shm_dims_of(s.hdr).key_more, 0);
	assert_int_equal(admit(s.hdr, &a, NOW), NOW);
	assert_int_equal(admit(s.hdr, &b, NOW), NOW);            /* another key */
	assert_int_equal(admit(s.hdr, &c, NOW), NOW + 100 * MS); /* a's own, again */
	assert_int_equal(s.hdr->keys_used, 2);
	format("host", a, "hooks-eu-west-1-producti...");
	format("host:port", a, "hooks-eu-west-1-producti...:443");
	format("host", w, "exactly-32-bytes-long.example.io"); /* whole: it fits */
	sl_shm_detach(&s);
}

/* A key record is 256 bytes; its more (sliding buckets, lease, adapt) only in a
 * segment where some keyed section needs it.  A config whose keys need one is
 * refused by a segment whose records have none - and were such a spec found in
 * one all the same (scribbled), its keys decide nothing rather than let go. */
static void test_key_record_sizes(void **state)
{
	static const char plain[] = "[per]\nmatch = *.example.com\nper = host\nrate = 10/s\n";
	static const char sliding[] = "[per]\nmatch = *.example.com\nper = host\nrate = 2/s\n"
	                              "strategy = sliding-window\n";
	static struct sl_config cfg;
	struct sl_dest a = named("a.example.com");
	struct sl_shm_dims d;
	struct sl_shm s;

	(void)state;
	assert_int_equal(sizeof(struct sl_key), 256);
	assert_int_equal(sl_config_load_string(&cfg, "t.ini", plain), 0);
	sl_config_dims(&cfg, &d);
	assert_int_equal(d.key_more, 0);
	assert_int_equal(sl_shm_key_size(&d), 256);
	assert_int_equal(sl_config_load_string(&cfg, "t.ini", sliding), 0);
	sl_config_dims(&cfg, &d);
	assert_int_equal(d.key_more, 1);
	assert_int_equal(sl_shm_key_size(&d), sizeof(struct sl_key) + sizeof(struct sl_state_more));
	/* sliding keys in a segment that has a more per key: two a second per key */
	segment_with(&s, sliding, 64);
	assert_int_equal(admit(s.hdr, &a, NOW), NOW);
	assert_int_equal(admit(s.hdr, &a, NOW), NOW);
	assert_true(admit(s.hdr, &a, NOW) >= NOW + 1000 * MS);
	sl_shm_detach(&s);
	/* plain records: the sliding config is refused */
	segment_with(&s, plain, 64);
	assert_int_equal(sl_shm_apply_config(s.hdr, &cfg, 1), -ENOSPC);
	/* a spec turned sliding in place: nothing goes */
	sl_shm_section(s.hdr, 0)->spec.strategy = SL_STRAT_SLIDING_WINDOW;
	assert_true(admit(s.hdr, &a, NOW) < 0);
	sl_shm_detach(&s);
}

/* observe: each key models its own queue and counts what would have waited there;
 * nobody is held. */
static void test_observe(void **state)
{
	static const char ini[] = "[per]\nmatch = *.example.com\nper = host\nrate = 10/s\nmode = observe\n";
	struct sl_dest a = named("a.example.com"), b = named("b.example.com");
	struct sl_shm s;

	(void)state;
	segment_with(&s, ini, 16);
	assert_int_equal(admit(s.hdr, &a, NOW), NOW);
	assert_int_equal(admit(s.hdr, &a, NOW), NOW); /* would have waited: counted, let go */
	assert_int_equal(admit(s.hdr, &b, NOW), NOW); /* another key: would not */
	assert_int_equal(sl_shm_section(s.hdr, 0)->more.observed, 1);
	assert_int_equal(sl_shm_section(s.hdr, 0)->state.admitted, 3);
	assert_int_equal(sl_shm_section(s.hdr, 0)->more.keys, 2);
	sl_shm_detach(&s);
}

/* A full table: idle keys are evicted (the least recently used), busy ones never;
 * with every record busy, a new key is refused and counted, charging nothing. */
static void test_eviction(void **state)
{
	static const char ini[] = "[per]\nmatch = *.example.com\nper = host\nrate = 1/s\n"
	                          "refuse = ECONNRESET\nmax_wait = 1m\n";
	char names[8][32];
	struct sl_dest d[8];
	struct sl_shm s;
	static struct sl_match m;
	static union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;

	(void)state;
	segment_with(&s, ini, 4);
	for (int i = 0; i < 8; i++) {
		snprintf(names[i], sizeof(names[i]), "n%d.example.com", i);
		d[i] = named(names[i]);
	}
	/* Four keys, each busy for a second after its request. */
	for (int i = 0; i < 4; i++)
		assert_int_equal(admit(s.hdr, &d[i], NOW + i * MS), NOW + i * MS);
	/* A fifth now: every record busy - refused with the section's errno. */
	assert_int_equal(sl_match_sections(s.hdr, &d[4], &m, 1), 1);
	assert_int_equal(sl_admit_reserve(s.hdr, &m, NOW + 10 * MS, 1, t), -ECONNREFUSED);
	assert_true(t->key_full);
	assert_int_equal(t->refuse_errno, ECONNRESET);
	assert_int_equal(t->mask, 0);
	assert_int_equal(sl_shm_section(s.hdr, 0)->more.key_full, 1);
	/* Later, n0 and n1 idle, n2 asks again (busy once more): n4 takes the least
	 * recently used idle record, n0's; n1 stays. */
	assert_int_equal(admit(s.hdr, &d[2], NOW + 1500 * MS), NOW + 1500 * MS);
	assert_int_equal(admit(s.hdr, &d[4], NOW + 1501 * MS), NOW + 1501 * MS);
	assert_int_equal(sl_shm_section(s.hdr, 0)->more.key_evictions, 1);
	assert_int_equal(admit(s.hdr, &d[5], NOW + 1502 * MS), NOW + 1502 * MS); /* n1's */
	assert_int_equal(sl_shm_section(s.hdr, 0)->more.key_evictions, 2);
	/* n2 is busy (its next slot is a second after 1.5 s): never evicted, its
	 * spacing kept - and n3 (idle since 1.003 s) goes for n6. */
	assert_int_equal(admit(s.hdr, &d[6], NOW + 1503 * MS), NOW + 1503 * MS);
	assert_int_equal(admit(s.hdr, &d[2], NOW + 1600 * MS), NOW + 2500 * MS);
	/* An evicted key that returns starts as a fresh key would: at once, as the
	 * idle one it was would have let it. */
	assert_int_equal(sl_shm_section(s.hdr, 0)->more.keys, 4);
	assert_int_equal(admit(s.hdr, &d[0], NOW + 2600 * MS), NOW + 2600 * MS);
	sl_shm_detach(&s);
}

/* A waiter whose key was evicted and its record reused by another key (it woke
 * that late) is checked against its own key, made again - never against the
 * stranger's state, never let go unchecked. */
static void test_ticket_finds_its_key_again(void **state)
{
	static const char ini[] = "[per]\nmatch = *.example.com\nper = host\nrate = 1/s\nmax_wait = 1m\n";
	struct sl_dest a = named("a.example.com"), b = named("b.example.com");
	static struct sl_match m;
	static union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_shm s;
	int64_t retry;

	(void)state;
	segment_with(&s, ini, 1); /* one record: every new key evicts */
	assert_int_equal(admit(s.hdr, &a, NOW), NOW);
	assert_int_equal(sl_match_sections(s.hdr, &a, &m, 1), 1);
	assert_int_equal(sl_admit_reserve(s.hdr, &m, NOW + 10 * MS, 1, t), 0);
	assert_int_equal(t->release_ns, NOW + 1000 * MS);
	/* The waiter sleeps past its slot and past the key's idleness: b takes the
	 * record. */
	assert_int_equal(admit(s.hdr, &b, NOW + 2100 * MS), NOW + 2100 * MS);
	assert_int_equal(sl_shm_section(s.hdr, 0)->more.key_evictions, 1);
	/* a's waiter wakes: its key is made again (b's idle? no: b is busy) - no
	 * record, so nothing is decided. */
	assert_int_equal(sl_admit_release(s.hdr, t, NOW + 2200 * MS, 1, &retry), -ETIMEDOUT);
	/* Once b is idle, a's key is made again and the release counted in it. */
	assert_int_equal(sl_admit_release(s.hdr, t, NOW + 3200 * MS, 1, &retry), 0);
	assert_int_equal(admit(s.hdr, &a, NOW + 3300 * MS), NOW + 4200 * MS);
	sl_shm_detach(&s);
}

static int nobody_dead(struct sl_shm_header *h, int32_t pid)
{
	(void)h;
	(void)pid;
	return 0;
}

/* Places per key: each key its own; given back; and a waiter count left by a
 * process killed in its sleep is cleared by the heartbeat once nobody has asked
 * for a place for seconds, so the key can become idle again. */
static void test_places_per_key(void **state)
{
	static const char ini[] = "[per]\nmatch = *.example.com\nper = host\nconcurrency = 1\n";
	struct sl_dest a = named("a.example.com"), b = named("b.example.com");
	static struct sl_match ma, mb;
	struct sl_shm s;
	struct sl_key *k;
	uint64_t taken;
	uint32_t seen;
	int full;

	(void)state;
	segment_with(&s, ini, 16);
	assert_int_equal(sl_match_sections(s.hdr, &a, &ma, 1), 1);
	assert_int_equal(sl_match_sections(s.hdr, &b, &mb, 1), 1);
	assert_int_equal(sl_conc_take(s.hdr, &ma, 1, &taken, &full, &seen), 0);
	assert_int_equal(taken, 1);
	assert_int_equal(sl_conc_take(s.hdr, &ma, 2, &taken, &full, &seen), -EBUSY);
	assert_int_equal(sl_conc_take(s.hdr, &mb, 2, &taken, &full, &seen), 0); /* b's own */
	sl_conc_put(s.hdr, 1, &ma, 1);
	assert_int_equal(sl_conc_take(s.hdr, &ma, 2, &taken, &full, &seen), 0);
	sl_conc_put(s.hdr, 1, &ma, 2);
	k = sl_keys_find(s.hdr, 0, &ma.src, 0, NOW);
	assert_non_null(k);
	k->state.conc_waiters = 1;     /* a waiter killed asleep */
	k->last_used_ns = 1;           /* long ago */
	sl_conc_reap_dead(s.hdr, 1, nobody_dead);
	assert_int_equal(k->state.conc_waiters, 0);
	assert_true(sl_strategy_idle(&sl_shm_section(s.hdr, 0)->spec, &k->state, NOW, 0));
	sl_shm_detach(&s);
}

/* Idle, per strategy: what a zero state would answer just the same. */
static void test_idle(void **state)
{
	struct sl_spec gcra = {.amount = 1, .window_ns = 1000 * MS, .burst = 1};
	struct sl_spec fixed = {.amount = 2, .window_ns = 1000 * MS, .strategy = SL_STRAT_FIXED_WINDOW};
	struct sl_spec slide = {.amount = 2, .window_ns = 630 * MS, .strategy = SL_STRAT_SLIDING_WINDOW};
	struct sl_spec session = {.amount = 2, .window_ns = 1000 * MS, .strategy = SL_STRAT_SESSION_WINDOW};
	struct sl_spec places = {.concurrency = 1};
	static struct sl_section box; /* a state, with its more after it */
	struct sl_state *const st = &box.state;
	struct sl_undo undo;

	(void)state;
	memset(&box, 0, sizeof(box));
	assert_true(sl_strategy_idle(&gcra, st, NOW, 0));
	sl_strategy_charge(&gcra, st, NOW, 1, 0, &undo);
	sl_strategy_released(&gcra, st, NOW, 1, 0);
	assert_false(sl_strategy_idle(&gcra, st, NOW + 999 * MS, 0));
	assert_true(sl_strategy_idle(&gcra, st, NOW + 1000 * MS, 0));

	memset(&box, 0, sizeof(box));
	sl_strategy_charge(&fixed, st, NOW, 1, 0, &undo);
	sl_strategy_released(&fixed, st, NOW, 1, 0);
	assert_false(sl_strategy_idle(&fixed, st, NOW + 1, 0)); /* same window */
	assert_true(sl_strategy_idle(&fixed, st, NOW + 1000 * MS, 0));

	memset(&box, 0, sizeof(box));
	sl_strategy_charge(&slide, st, NOW, 1, 0, &undo);
	sl_strategy_released(&slide, st, NOW, 1, 0);
	assert_false(sl_strategy_idle(&slide, st, NOW + 600 * MS, 0));
	assert_true(sl_strategy_idle(&slide, st, NOW + 700 * MS, 0));

	memset(&box, 0, sizeof(box));
	sl_strategy_charge(&session, st, NOW, 1, 0, &undo);
	sl_strategy_released(&session, st, NOW, 1, 0);
	assert_false(sl_strategy_idle(&session, st, NOW + 999 * MS, 0));
	assert_true(sl_strategy_idle(&session, st, NOW + 1000 * MS, 0));

	memset(&box, 0, sizeof(box));
	st->conc_open = 1;
	assert_false(sl_strategy_idle(&places, st, NOW, 0));
	st->conc_open = 0;
	st->conc_waiters = 1;
	assert_false(sl_strategy_idle(&places, st, NOW, 0));
	st->conc_waiters = 0;
	assert_true(sl_strategy_idle(&places, st, NOW, 0));
}

/* A scribbled key table: lengths read from the segment never take a reader past
 * what it mapped; garbage records are free or stale, never a crash. */
static void test_scribbled_table(void **state)
{
	static const char ini[] = "[per]\nmatch = *.example.com\nper = host\nrate = 10/s\n";
	struct sl_dest a = named("a.example.com");
	struct sl_shm s;
	uint32_t n;

	(void)state;
	segment_with(&s, ini, 16);
	n = sl_shm_nkeys(s.hdr);
	s.hdr->max_keys = 1u << 30; /* a process keeps what it validated */
	assert_int_equal(sl_shm_nkeys(s.hdr), n);
	assert_null(sl_shm_key_at(s.hdr, n));
	memset(sl_shm_key_tags(s.hdr), 0xa5, sl_shm_view(s.hdr)->at.size - sl_shm_view(s.hdr)->at.tags);
	assert_true(admit(s.hdr, &a, NOW) >= NOW || admit(s.hdr, &a, NOW) == -ECONNREFUSED);
	sl_keys_sweep(s.hdr);
	assert_int_equal(admit(s.hdr, &a, NOW + 5000 * MS), NOW + 5000 * MS);
	sl_shm_detach(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_identity),
		cmocka_unit_test(test_a_queue_per_key),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_key_record_sizes),
		cmocka_unit_test(test_observe),
		cmocka_unit_test(test_eviction),
		cmocka_unit_test(test_ticket_finds_its_key_again),
		cmocka_unit_test(test_places_per_key),
		cmocka_unit_test(test_idle),
		cmocka_unit_test(test_scribbled_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
