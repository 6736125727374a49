/* pending.c: one admission stepped through every answer - go at once, wait then
 * go, refused by max_wait or a full key table, a place waited for and had or
 * refused, the fallback's three answers to a segment that cannot decide, a moved
 * segment, a reload, a cancel that gives everything back. */
#include "fixture.h"

#include "sluice/clock.h"
#include "sluice/conc.h"
#include "sluice/limiter.h"
#include "sluice/pending.h"
#include "sluice/proc.h"

#include <errno.h>

static struct sl_match m;
static struct sl_dest d;

static void ask(struct sl_pending *p, struct sl_match *mm, int fallback, int places)
{
	const struct sl_pending_ask a = {.m = mm, .d = &d, .self = fx.self, .fallback = fallback,
	                                 .default_errno = ECONNREFUSED, .places = places};

	sl_pending_start(p, fx.shm.hdr, &a, sl_clock_mono_ns());
}

static int step(struct sl_pending *p)
{
	return sl_pending_step(p, fx.shm.hdr, sl_clock_mono_ns(), NULL, NULL);
}

static void sleep_until(int64_t at)
{
	while (sl_clock_sleep_until(at) != 0)
		;
}

static void test_go_at_once(void **state)
{
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	ask(p, &m, SL_FALLBACK_LOCAL, 0);
	assert_int_equal(step(p), SL_PEND_GO);
	assert_true(p->t.mask != 0); /* released by the check, not waved through */
	assert_true(p->t.released_ns >= p->asked_ns);
	assert_null(p->why);
	assert_int_equal(fixture_section("a")->state.admitted, 1);
	/* Done is done: stepping again answers the same, charging nothing. */
	assert_int_equal(step(p), SL_PEND_GO);
	assert_int_equal(fixture_section("a")->state.admitted, 1);
}

static void test_wait_then_go(void **state)
{
	union sl_pending_room a_room, b_room;
	struct sl_pending *const a = &a_room.p;
	struct sl_pending *const b = &b_room.p;
	int64_t at;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	ask(a, &m, SL_FALLBACK_LOCAL, 0);
	assert_int_equal(step(a), SL_PEND_GO);
	ask(b, &m, SL_FALLBACK_LOCAL, 0);
	assert_int_equal(step(b), SL_PEND_WAIT);
	assert_int_equal(b->phase, SL_PEND_RELEASE);
	at = b->at;
	assert_true(at >= a->t.released_ns + 90 * FX_MS);
	/* Stepped early: still waiting, for the same instant; nothing more charged. */
	assert_int_equal(step(b), SL_PEND_WAIT);
	assert_true(b->at >= at);
	sleep_until(b->at);
	/* The gate may ask for a little more (the strict check): bounded. */
	for (int i = 0; i < 5 && step(b) == SL_PEND_WAIT; i++)
		sleep_until(b->at);
	assert_int_equal(b->phase, SL_PEND_DONE);
	assert_true(b->t.released_ns >= a->t.released_ns + 99 * FX_MS);
}

static void test_refused_by_max_wait(void **state)
{
	union sl_pending_room a_room, b_room;
	struct sl_pending *const a = &a_room.p;
	struct sl_pending *const b = &b_room.p;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 50ms\nrefuse = ETIMEDOUT\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	ask(a, &m, SL_FALLBACK_LOCAL, 0);
	assert_int_equal(step(a), SL_PEND_GO);
	ask(b, &m, SL_FALLBACK_LOCAL, 0);
	assert_int_equal(step(b), SL_PEND_REFUSED);
	assert_int_equal(b->err, ETIMEDOUT);
	assert_int_equal(b->refusing_section, 0);
	assert_string_equal(b->why, "the wait would exceed max_wait");
	assert_int_equal(fixture_section("a")->more.refused, 1);
}

static void test_key_table_full(void **state)
{
	char names[3][32];
	struct sl_dest k[3];
	struct sl_match km;
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;

	(void)state;
	sl_shm_detach(&fx.shm);
	{
		struct sl_shm_dims dims = {64, 1024, SL_HOLDERS_DEFAULT, 2, 1, SL_PROCS_DEFAULT};

		assert_int_equal(sl_shm_create_anonymous_dims(&fx.shm, &dims), 0);
	}
	fixture_load("[per]\nmatch = *.example.com\nper = host\nrate = 1/s\nrefuse = ECONNRESET\n"
	             "max_wait = 1m\n");
	for (int i = 0; i < 3; i++) {
		snprintf(names[i], sizeof(names[i]), "n%d.example.com", i);
		k[i] = fixture_dest("10.0.0.1", 443);
		k[i].name = names[i];
		k[i].name_len = strlen(names[i]);
	}
	/* Two keys, busy for a second each; a third finds no room. */
	for (int i = 0; i < 2; i++) {
		d = k[i];
		fixture_match(&d, &km, 1);
		ask(p, &km, SL_FALLBACK_LOCAL, 0);
		assert_int_equal(step(p), SL_PEND_GO);
	}
	d = k[2];
	fixture_match(&d, &km, 1);
	ask(p, &km, SL_FALLBACK_LOCAL, 0);
	assert_int_equal(step(p), SL_PEND_REFUSED);
	assert_int_equal(p->err, ECONNRESET);
	assert_string_equal(p->why, "no room in the key table for its key");
}

/* concurrency = 1: the second connection waits for the first's place, and goes
 * once it is given back. */
static void test_place_waited_for(void **state)
{
	union sl_pending_room a_room, b_room;
	struct sl_pending *const a = &a_room.p;
	struct sl_pending *const b = &b_room.p;
	struct sl_match mb;

	(void)state;
	fixture_load("[c]\nmatch = 10.0.0.0/8\nconcurrency = 1\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	fixture_match(&d, &mb, 1);
	ask(a, &m, SL_FALLBACK_LOCAL, 1);
	assert_int_equal(step(a), SL_PEND_GO);
	assert_int_equal(a->taken, 1);
	ask(b, &mb, SL_FALLBACK_LOCAL, 1);
	assert_int_equal(step(b), SL_PEND_WAIT);
	assert_int_equal(b->phase, SL_PEND_PLACES);
	assert_int_equal(b->place_section, 0);
	assert_true(b->at <= b->asked_ns + SL_PLACE_RECHECK_NS + FX_MS);
	/* Still full: still waiting. */
	assert_int_equal(step(b), SL_PEND_WAIT);
	/* a's connection closes: its place goes back, b takes it. */
	sl_conc_put(fx.shm.hdr, a->taken, &m, fx.self);
	assert_int_equal(step(b), SL_PEND_GO);
	assert_int_equal(b->taken, 1);
	assert_int_equal(fixture_section("c")->state.conc_open, 1);
}

static void test_place_refused_at_max_wait(void **state)
{
	union sl_pending_room a_room, b_room;
	struct sl_pending *const a = &a_room.p;
	struct sl_pending *const b = &b_room.p;
	struct sl_match mb;

	(void)state;
	fixture_load("[c]\nmatch = 10.0.0.0/8\nconcurrency = 1\nmax_wait = 30ms\nrefuse = EHOSTUNREACH\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	fixture_match(&d, &mb, 1);
	ask(a, &m, SL_FALLBACK_LOCAL, 1);
	assert_int_equal(step(a), SL_PEND_GO);
	ask(b, &mb, SL_FALLBACK_LOCAL, 1);
	assert_int_equal(step(b), SL_PEND_WAIT);
	assert_true(b->at <= b->deadline_ns);
	assert_int_equal(b->deadline_ns, b->asked_ns + 30 * FX_MS);
	sleep_until(b->deadline_ns);
	assert_int_equal(step(b), SL_PEND_REFUSED);
	assert_int_equal(b->err, EHOSTUNREACH);
	assert_string_equal(b->why, "no concurrency place within max_wait");
	assert_int_equal(b->taken, 0);
	assert_int_equal(fixture_section("c")->state.conc_open, 1); /* a's only */
	assert_int_equal(fixture_section("c")->more.refused, 1);
}

/* The lock held by a live process that never lets go (our parent, stamped as it
 * is): the segment cannot decide within the lock's bound. */
static void wedge_lock(void)
{
	int32_t pp = (int32_t)getppid();

	fx.shm.hdr->lock = (uint64_t)sl_proc_self_stamp(pp) << 32 | (uint32_t)pp;
}

static void test_undecided_fallbacks(void **state)
{
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 0\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	wedge_lock();
	/* open: goes, and says why; counted once. */
	ask(p, &m, SL_FALLBACK_OPEN, 0);
	assert_int_equal(step(p), SL_PEND_GO);
	assert_string_equal(p->undecided_why, "segment lock unavailable");
	assert_int_equal(fixture_section("a")->more.undecided, 1);
	/* closed: refused with the call's default. */
	ask(p, &m, SL_FALLBACK_CLOSED, 0);
	assert_int_equal(step(p), SL_PEND_REFUSED);
	assert_int_equal(p->err, ECONNREFUSED);
	assert_int_equal(fixture_section("a")->more.undecided, 2);
	/* local: asks again until max_wait (0 here: at once), never goes. */
	ask(p, &m, SL_FALLBACK_LOCAL, 0);
	assert_int_equal(step(p), SL_PEND_REFUSED);
	assert_string_equal(p->why, "still undecided after max_wait");
	assert_int_equal(fixture_section("a")->state.admitted, 0);
	fx.shm.hdr->lock = 0;
}

/* fallback = local with time left: waits, then the queue decides once it can. */
static void test_undecided_local_retries(void **state)
{
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 1m\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	wedge_lock();
	ask(p, &m, SL_FALLBACK_LOCAL, 0);
	assert_int_equal(step(p), SL_PEND_WAIT);
	assert_int_equal(p->phase, SL_PEND_RESERVE);
	fx.shm.hdr->lock = 0; /* the daemon took it over */
	assert_int_equal(step(p), SL_PEND_WAIT); /* not before its retry's instant */
	sleep_until(p->at);
	assert_int_equal(step(p), SL_PEND_GO);
	assert_true(p->t.mask != 0);
	assert_int_equal(fixture_section("a")->more.undecided, 1);
}

/* A moved segment: MOVED until followed; never a go in the old one. */
static void test_moved(void **state)
{
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	fx.shm.hdr->moved = 1;
	ask(p, &m, SL_FALLBACK_OPEN, 0);
	assert_int_equal(step(p), SL_PEND_MOVED);
	fx.shm.hdr->moved = 0; /* "followed": here, the same segment again */
	assert_int_equal(step(p), SL_PEND_GO);
	assert_null(p->undecided_why);
	/* One that cannot be followed is undecided after a few tries. */
	fx.shm.hdr->moved = 1;
	ask(p, &m, SL_FALLBACK_CLOSED, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(step(p), SL_PEND_MOVED);
	assert_int_equal(step(p), SL_PEND_REFUSED);
	assert_string_equal(p->undecided_why, "the segment moved and cannot be followed");
	fx.shm.hdr->moved = 0;
}

/* A reload took its section away: what matches now decides (nothing: it goes). */
static void test_reload_leaves_nothing(void **state)
{
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	ask(p, &m, SL_FALLBACK_LOCAL, 0);
	fixture_load("[b]\nmatch = 192.168.0.0/16\nrate = 10/s\n");
	assert_int_equal(step(p), SL_PEND_GO);
	assert_string_equal(p->why, "no section matches any longer");
}

/* Cancelled while waiting: the slot and the places go back. */
static void test_cancel_gives_back(void **state)
{
	union sl_pending_room a_room, b_room, c_room;
	struct sl_pending *const a = &a_room.p;
	struct sl_pending *const b = &b_room.p;
	struct sl_pending *const c = &c_room.p;
	struct sl_match mb, mc;

	(void)state;
	fixture_load("[c]\nmatch = 10.0.0.0/8\nconcurrency = 2\nrate = 10/s\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	fixture_match(&d, &mb, 1);
	fixture_match(&d, &mc, 1);
	ask(a, &m, SL_FALLBACK_LOCAL, 1);
	assert_int_equal(step(a), SL_PEND_GO);
	ask(b, &mb, SL_FALLBACK_LOCAL, 1);
	assert_int_equal(step(b), SL_PEND_WAIT);
	assert_int_equal(b->phase, SL_PEND_RELEASE);
	assert_int_equal(fixture_section("c")->state.conc_open, 2);
	sl_pending_cancel(b, fx.shm.hdr);
	sl_pending_cancel(b, fx.shm.hdr); /* twice: harmless */
	assert_int_equal(fixture_section("c")->state.conc_open, 1);
	assert_int_equal(fixture_section("c")->more.given_up, 1);
	/* b's slot is had by the next one. */
	ask(c, &mc, SL_FALLBACK_LOCAL, 1);
	assert_int_equal(step(c), SL_PEND_WAIT);
	assert_int_equal(c->t.slot_ns, b->t.slot_ns);
}

/* No segment and fallback = closed: refused, counted. */
static void test_refuse_all(void **state)
{
	struct sl_pending_ask a = {.m = &m, .d = &d, .default_errno = ECONNRESET, .refuse_all = 1};
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	a.self = fx.self;
	sl_pending_start(p, fx.shm.hdr, &a, sl_clock_mono_ns());
	assert_int_equal(step(p), SL_PEND_REFUSED);
	assert_int_equal(p->err, ECONNRESET);
	assert_int_equal(fixture_section("a")->more.refused, 1);
}

/* A scribbled max_wait is clamped: the deadline never wraps into the past. */
static void test_max_wait_clamped(void **state)
{
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;
	int e;

	(void)state;
	fixture_load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 1s\n");
	d = fixture_dest("10.0.0.1", 80);
	fixture_match(&d, &m, 1);
	fixture_section("a")->spec.max_wait_ns = INT64_MAX;
	assert_int_equal(sl_pending_max_wait(fx.shm.hdr, &m, m.mask, &e), SL_SANE_NS);
	ask(p, &m, SL_FALLBACK_LOCAL, 0);
	assert_true(p->deadline_ns > p->asked_ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_TEST(test_go_at_once),
		FIXTURE_TEST(test_wait_then_go),
		FIXTURE_TEST(test_refused_by_max_wait),
		FIXTURE_TEST(test_key_table_full),
		FIXTURE_TEST(test_place_waited_for),
		FIXTURE_TEST(test_place_refused_at_max_wait),
		FIXTURE_TEST(test_undecided_fallbacks),
		FIXTURE_TEST(test_undecided_local_retries),
		FIXTURE_TEST(test_moved),
		FIXTURE_TEST(test_reload_leaves_nothing),
		FIXTURE_TEST(test_cancel_gives_back),
		FIXTURE_TEST(test_refuse_all),
		FIXTURE_TEST(test_max_wait_clamped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
