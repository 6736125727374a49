/* admit.c: the queue of docs/design.md, "The queue" with an injected clock - matching,
 * spacing, burst, max_wait refusal, several sections reserved together, refund, the
 * strict release check, reload. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/delivery.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/roster.h"
#include "sluice/shm.h"
#include "sluice/stats.h"
#include "sluice/summary.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MS SL_NS_PER_MS
#define T0 (1000 * SL_NS_PER_S) /* an arbitrary "now" for the injected clock */

static struct sl_shm shm;
static struct sl_config *cfg;

static void load(const char *text)
{
	if (sl_config_load_string(cfg, "t.ini", text) != 0) {
		sl_config_print_errors(cfg, stderr);
		fail_msg("bad test config");
	}
	assert_int_equal(sl_shm_apply_config_at(shm.hdr, cfg, (int32_t)getpid(), T0), 0);
}

static int setup(void **state)
{
	(void)state;
	cfg = calloc(1, sizeof(*cfg));
	return cfg ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	sl_config_free(cfg);
	free(cfg);
	return 0;
}

/* Each test starts on a fresh segment. */
static int fresh_segment(void **state)
{
	(void)state;
	return sl_shm_create_anonymous(&shm) == 0 ? 0 : -1;
}

static int drop_segment(void **state)
{
	(void)state;
	sl_shm_detach(&shm);
	return 0;
}

static struct sl_dest dest(const char *addr, uint16_t port)
{
	struct sl_dest d = {.family = AF_INET, .port = port};

	inet_pton(AF_INET, addr, d.addr);
	return d;
}

/* Reserve for 10.0.0.1:80 at `now`; returns the release time or -errno. */
static int64_t reserve(int64_t now, struct sl_ticket *t)
{
	struct sl_dest d = dest("10.0.0.1", 80);
	struct sl_match m;
	int rc;

	assert_true(sl_match_sections(shm.hdr, &d, &m, (int32_t)getpid()) > 0);
	rc = sl_admit_reserve(shm.hdr, &m, now, (int32_t)getpid(), t);
	return rc < 0 ? rc : t->release_ns;
}

static struct sl_section *section(const char *name)
{
	for (unsigned i = 0; i < shm.hdr->slots_used; i++) {
		struct sl_section *s = sl_shm_section(shm.hdr, i);

		if (s->in_use && strcmp(s->spec.name, name) == 0)
			return s;
	}
	fail_msg("no section %s", name);
	return NULL;
}

static void test_spacing(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	/* 20 callers arriving together are released exactly 100 ms apart, in order. */
	for (int i = 0; i < 20; i++)
		assert_int_equal(reserve(T0, t), T0 + i * 100 * MS);
	/* the first went at once; 19 are asleep */
	assert_int_equal(sl_gcra_queued(section("a")->state.tat_ns, 0, 100 * MS, T0), 19);
	/* After the queue drains and an idle spell, the next one goes at once. */
	assert_int_equal(reserve(T0 + 10 * SL_NS_PER_S, t), T0 + 10 * SL_NS_PER_S);
}

static void test_burst(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nburst = 5\n");
	for (int i = 0; i < 5; i++)
		assert_int_equal(reserve(T0, t), T0); /* five back to back */
	assert_int_equal(reserve(T0, t), T0 + 100 * MS); /* then the rate */
	assert_int_equal(reserve(T0, t), T0 + 200 * MS);
	/* Idle for a second refills the whole burst, never more. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(reserve(T0 + 5 * SL_NS_PER_S, t), T0 + 5 * SL_NS_PER_S);
	assert_int_equal(reserve(T0 + 5 * SL_NS_PER_S, t), T0 + 5 * SL_NS_PER_S + 100 * MS);
}

static void test_max_wait_refusal(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	int64_t tat;

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 250ms\nrefuse = ETIMEDOUT\n");
	assert_int_equal(reserve(T0, t), T0);
	assert_int_equal(reserve(T0, t), T0 + 100 * MS);
	assert_int_equal(reserve(T0, t), T0 + 200 * MS);
	tat = section("a")->state.tat_ns;
	assert_int_equal(reserve(T0, t), -ECONNREFUSED); /* would wait 300 ms */
	assert_int_equal(t->refuse_errno, ETIMEDOUT);
	assert_int_equal(section("a")->state.tat_ns, tat); /* nothing consumed */
	assert_int_equal(section("a")->more.refused, 1);
	assert_int_equal(reserve(T0 + 60 * MS, t), T0 + 300 * MS); /* 240 ms: fits */

	/* Reloaded to 10/m, a keeps its queue: 4 requests ahead are 24 s at 10/m. */
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/m\nmax_wait = 0\n");
	assert_int_equal(reserve(T0, t), -ECONNREFUSED);
	load("[b]\nmatch = 10.0.0.0/8\nrate = 10/m\nmax_wait = 0\n");
	assert_int_equal(reserve(T0, t), T0);
	assert_int_equal(reserve(T0, t), -ECONNREFUSED);
	assert_int_equal(t->refuse_errno, 0); /* the caller's default errno */
}

static void test_multi_section(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;

	(void)state;
	load("[fast]\nmatch = 10.0.0.0/8\nrate = 10/s\n"
	     "[slow]\nmatch = 10.0.0.1:80\nrate = 2/s\nburst = 2\n"
	     "[other]\nmatch = 192.0.2.1\nrate = 1/s\n");
	assert_int_equal(reserve(T0, t), T0);
	assert_int_equal(reserve(T0, t), T0 + 100 * MS); /* fast's spacing; slow's burst */
	assert_int_equal(reserve(T0, t), T0 + 500 * MS); /* slow's rate now rules */
	/* Both sections are charged at the common release time. */
	assert_int_equal(section("fast")->state.tat_ns, T0 + 600 * MS);
	assert_int_equal(section("slow")->state.tat_ns, T0 + 1500 * MS);
	assert_int_equal(section("other")->state.tat_ns, 0);
}

static void test_refusal_charges_nothing(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;

	(void)state;
	load("[loose]\nmatch = 10.0.0.0/8\nrate = 100/s\n"
	     "[tight]\nmatch = 10.0.0.1\nrate = 1/s\nmax_wait = 0\n");
	assert_int_equal(reserve(T0, t), T0);
	assert_int_equal(section("loose")->state.tat_ns, T0 + 10 * MS);
	assert_int_equal(reserve(T0 + 1 * MS, t), -ECONNREFUSED);
	/* tight refused it, so loose gave nothing either. */
	assert_int_equal(section("loose")->state.tat_ns, T0 + 10 * MS);
	assert_int_equal(section("tight")->state.tat_ns, T0 + SL_NS_PER_S);
}

static void test_refund(void **state)
{
	union sl_ticket_room a_room, b_room, c_room;
	struct sl_ticket *const a = &a_room.t;
	struct sl_ticket *const b = &b_room.t;
	struct sl_ticket *const c = &c_room.t;

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	assert_int_equal(reserve(T0, a), T0);
	assert_int_equal(reserve(T0, b), T0 + 100 * MS);
	assert_int_equal(reserve(T0, c), T0 + 200 * MS);
	/* b gives up: not the last slot, so it stays spent (c keeps its place). */
	sl_admit_refund(shm.hdr, b, (int32_t)getpid());
	assert_int_equal(section("a")->state.tat_ns, T0 + 300 * MS);
	/* c gives up: the last one handed out comes back. */
	sl_admit_refund(shm.hdr, c, (int32_t)getpid());
	assert_int_equal(section("a")->state.tat_ns, T0 + 200 * MS);
	assert_int_equal(reserve(T0, c), T0 + 200 * MS);
	assert_int_equal(section("a")->more.given_up, 2);
}

static int32_t dead_pid;

static int fake_is_dead(struct sl_shm_header *h, int32_t pid)
{
	(void)h;
	return pid == dead_pid;
}

/* A waiter that dies before its slot: the daemon returns the slot if it is still the
 * last one handed out, and only then. */
static void test_reap_dead_waiter(void **state)
{
	struct sl_dest d = dest("10.0.0.1", 80);
	struct sl_match m;
	union sl_ticket_room a_room, b_room, c_room;
	struct sl_ticket *const a = &a_room.t;
	struct sl_ticket *const b = &b_room.t;
	struct sl_ticket *const c = &c_room.t;

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	assert_true(sl_match_sections(shm.hdr, &d, &m, (int32_t)getpid()) > 0);
	assert_int_equal(sl_admit_reserve(shm.hdr, &m, T0, 1001, a), 0);
	assert_int_equal(sl_admit_reserve(shm.hdr, &m, T0, 1002, b), 0);
	assert_int_equal(sl_admit_reserve(shm.hdr, &m, T0, 1003, c), 0);
	assert_int_equal(c->release_ns, T0 + 200 * MS);
	/* The holder of the last slot is alive: nothing happens. */
	dead_pid = 1002;
	assert_int_equal(sl_admit_reap_dead(shm.hdr, T0 + 10 * MS, (int32_t)getpid(), fake_is_dead), 0);
	assert_int_equal(section("a")->state.tat_ns, T0 + 300 * MS);
	/* It dies before its slot: the slot comes back, once. */
	dead_pid = 1003;
	assert_int_equal(sl_admit_reap_dead(shm.hdr, T0 + 10 * MS, (int32_t)getpid(), fake_is_dead), 1);
	assert_int_equal(section("a")->state.tat_ns, T0 + 200 * MS);
	assert_int_equal(section("a")->more.given_up, 1);
	assert_int_equal(sl_admit_reap_dead(shm.hdr, T0 + 20 * MS, (int32_t)getpid(), fake_is_dead), 0);
	assert_int_equal(reserve(T0 + 20 * MS, c), T0 + 200 * MS); /* the next caller gets it */
	/* A dead holder whose slot has come is not refunded (it may have gone). */
	dead_pid = (int32_t)getpid();
	assert_int_equal(sl_admit_reap_dead(shm.hdr, T0 + 250 * MS, (int32_t)getpid(), fake_is_dead), 0);
}

static void test_release_is_strict(void **state)
{
	union sl_ticket_room a_room, b_room;
	struct sl_ticket *const a = &a_room.t;
	struct sl_ticket *const b = &b_room.t;
	int64_t retry = 0;

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	assert_int_equal(reserve(T0, a), T0);
	assert_int_equal(reserve(T0, b), T0 + 100 * MS);
	/* a's process woke 30 ms late; b wakes on time and must wait for a + one whole
	 * interval: no allowance, so release instants keep the bucket's bound. */
	assert_int_equal(sl_admit_release(shm.hdr, a, T0 + 30 * MS, (int32_t)getpid(), &retry), 0);
	assert_int_equal(sl_admit_release(shm.hdr, b, T0 + 100 * MS, (int32_t)getpid(), &retry), 1);
	assert_int_equal(retry, T0 + 130 * MS);
	assert_int_equal(sl_admit_release(shm.hdr, b, T0 + 130 * MS - 1, (int32_t)getpid(), &retry), 1);
	assert_int_equal(sl_admit_release(shm.hdr, b, T0 + 130 * MS, (int32_t)getpid(), &retry), 0);
	assert_int_equal(section("a")->state.admitted, 2);
	assert_int_equal(section("a")->more.held, 1); /* a's own lateness is not a hold */
	assert_int_equal(section("a")->more.wait_max_ns, 130 * MS);
}

/* At a short interval a release checked a little after its gate is charged from
 * the gate: the next keeps its own (SL_WAKE_SLACK_NS); checked later than that,
 * it is charged from the check less the slack, and the lag stays. */
static void test_wake_slack(void **state)
{
	union sl_ticket_room rooms[3];
	int64_t retry = 0, late = SL_WAKE_SLACK_NS / 2, later = 3 * SL_WAKE_SLACK_NS;
	int32_t self = (int32_t)getpid();

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 1000/s\n");
	for (int i = 0; i < 3; i++)
		assert_int_equal(reserve(T0, &rooms[i].t), T0 + i * MS);
	assert_int_equal(sl_admit_release(shm.hdr, &rooms[0].t, T0 + late, self, &retry), 0);
	assert_true(section("a")->state.rel_tat_ns <= T0 + MS); /* the next slot stands */
	/* The second goes at its slot, T0 + 1 ms, not T0 + late + 1 ms; checked 3
	 * slacks late itself. */
	assert_int_equal(sl_admit_release(shm.hdr, &rooms[1].t, T0 + MS + later, self, &retry), 0);
	/* Checked 3 slacks late: the third waits for that check less one slack. */
	assert_int_equal(sl_admit_release(shm.hdr, &rooms[2].t, T0 + 2 * MS, self, &retry), 1);
	assert_int_equal(retry, T0 + 2 * MS + later - SL_WAKE_SLACK_NS);
}

/* A backlog catching up after late wake-ups: whatever the lateness, release
 * instants never hold more than burst + (W + SL_WAKE_SLACK_NS)/interval in any
 * span W (checked as GCRA conformance of the instants, the slack added to the
 * tolerance), at 200/s with burst 1 and at burst 3. */
static void check_catch_up(const char *cfg, int64_t interval, int burst)
{
	enum { N = 400 };
	union sl_ticket_room t[N];
	int64_t released[N], tat, tau = (burst - 1) * interval + SL_WAKE_SLACK_NS;
	uint32_t seed = 12345;

	load(cfg);
	for (int i = 0; i < N; i++)
		reserve(T0, &t[i].t); /* one backlog, asked at once */
	for (int i = 0; i < N; i++) {
		int64_t now = t[i].t.release_ns, retry = 0;

		/* Every waker late by 0-3 ms (a noisy two-core machine), and each retry
		 * late again: the lag a late one leaves is what used to be "forgiven". */
		seed = seed * 1103515245u + 12345u;
		now += (int64_t)(seed >> 16) % (3 * MS);
		while (sl_admit_release(shm.hdr, &t[i].t, now, (int32_t)getpid(), &retry) == 1) {
			assert_true(retry > now);
			seed = seed * 1103515245u + 12345u;
			now = retry + (int64_t)(seed >> 16) % (200 * 1000);
		}
		assert_true(now >= t[i].t.release_ns); /* never before its slot */
		released[i] = now;
	}
	tat = released[0];
	for (int i = 0; i < N; i++) {
		assert_true(released[i] >= tat - tau);
		tat = SL_MAX(tat, released[i]) + interval;
	}
}

/* F5: state scribbled far ahead (2^61 ns, 73 years) is no schedule any admission
 * made.  It is reset at the next reservation - never slept on, never a refusal for
 * ever - to a state that lets nothing through early: the next slot is within a
 * window or two of now, and the repair is counted.  For every strategy, with
 * max_wait forever and finite. */
static void test_scribbled_state_repaired(void **state)
{
	static const char *const cfgs[] = {
		"[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = forever\n",
		"[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 5s\n",
		"[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nstrategy = fixed-window\nmax_wait = 5s\n",
		"[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nstrategy = sliding-window\nmax_wait = 5s\n",
		"[a]\nmatch = 10.0.0.0/8\nrate = 10/s\nstrategy = session-window\nmax_wait = forever\n",
	};
	const int64_t far = (int64_t)1 << 61;

	(void)state;
	for (unsigned k = 0; k < SL_ARRAY_LEN(cfgs); k++) {
		union sl_ticket_room t_room;
		struct sl_ticket *const t = &t_room.t;
		struct sl_state *st;
		int64_t slot, retry = 0;

		drop_segment(NULL);
		fresh_segment(NULL);
		load(cfgs[k]);
		st = &section("a")->state;
		st->tat_ns = st->rel_tat_ns = far;
		st->win = st->rel_win = far;
		sl_state_more(st)->slide.newest = sl_state_more(st)->rel_slide.newest = far;
		slot = reserve(T0, t);
		assert_true(slot >= T0);
		assert_true(slot <= T0 + 2 * SL_NS_PER_S);
		assert_true(section("a")->more.repaired >= 1);
		/* and its release goes within that bound too */
		while (sl_admit_release(shm.hdr, t, slot, (int32_t)getpid(), &retry) == 1) {
			assert_true(retry <= T0 + 3 * SL_NS_PER_S);
			slot = retry;
		}
	}
}

static void test_catch_up_never_exceeds(void **state)
{
	(void)state;
	check_catch_up("[a]\nmatch = 10.0.0.0/8\nrate = 200/s\n", 5 * MS, 1);
	drop_segment(NULL);
	fresh_segment(NULL);
	check_catch_up("[a]\nmatch = 10.0.0.0/8\nrate = 200/s\nburst = 3\n", 5 * MS, 3);
}

static void test_reload_keeps_state(void **state)
{
	union sl_ticket_room t_room, old[10];
	struct sl_ticket *const t = &t_room.t;
	uint32_t serial;
	int64_t retry;

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n[b]\nmatch = 10.0.0.1\nrate = 1/s\n");
	assert_int_equal(reserve(T0, t), T0);
	assert_int_equal(reserve(T0, t), T0 + SL_NS_PER_S); /* b's 1/s rules */
	serial = section("a")->serial;
	/* A new amount and burst keep a's slot and serial; its queue, 11 intervals of
	 * 100 ms, is 11 intervals of 50 ms now.  b's window changes: the same rate
	 * (1/s = 60/m) keeps its schedule exactly. */
	load("[a]\nmatch = 10.0.0.0/8\nrate = 20/s\nburst = 2\n[b]\nmatch = 10.0.0.1\nrate = 60/m\n");
	assert_int_equal(section("a")->serial, serial);
	assert_int_equal(section("a")->state.tat_ns, T0 + 550 * MS);
	assert_int_equal(section("b")->state.tat_ns, T0 + 2 * SL_NS_PER_S);
	/* A slower rate stretches the queue: 2 s ahead at 1/s is 2 minutes at 1/m. */
	load("[a]\nmatch = 10.0.0.0/8\nrate = 20/s\nburst = 2\n[b]\nmatch = 10.0.0.1\nrate = 1/m\n");
	assert_int_equal(section("b")->state.tat_ns, T0 + 120 * SL_NS_PER_S);
	/* A new meter counts other things: the section starts afresh, and a ticket
	 * matched before charges nothing in it. */
	{
		struct sl_dest d = dest("10.0.0.1", 80);
		struct sl_match m;

		assert_int_equal(sl_match_sections(shm.hdr, &d, &m, (int32_t)getpid()), 2);
		load("[a]\nmatch = 10.0.0.0/16\nrate = 20/s\nmeter = requests\n"
		     "[b]\nmatch = 10.0.0.1\nrate = 1/m\nmax_wait = forever\n");
		assert_int_equal(sl_admit_reserve(shm.hdr, &m, T0, (int32_t)getpid(), t), 0);
		assert_int_equal(section("a")->state.tat_ns, 0);
	}
	/* F1: 10 waiters queued at 50/s; the limit becomes 3000/m (the same rate, a
	 * new window).  A new arrival queues after them (no empty bucket), and the old
	 * waiters are released by the new section's checks (same serial), one
	 * interval apart. */
	load("[c]\nmatch = 10.0.0.0/8\nrate = 50/s\nmax_wait = 1m\n");
	for (int i = 0; i < 10; i++)
		assert_int_equal(reserve(T0, &old[i].t), T0 + i * 20 * MS);
	load("[c]\nmatch = 10.0.0.0/8\nrate = 3000/m\nmax_wait = 1m\n");
	assert_int_equal(reserve(T0, t), T0 + 200 * MS);
	for (int i = 0; i < 10; i++) {
		int64_t at = old[i].t.release_ns;

		while (sl_admit_release(shm.hdr, &old[i].t, at, (int32_t)getpid(), &retry) == 1)
			at = retry;
		assert_true(i == 0 || at >= old[i - 1].t.released_ns + 20 * MS);
	}
	assert_int_equal(section("c")->state.admitted, 10);
	/* A new strategy cannot read the old state: the new one starts as if a whole
	 * window's worth had just gone, so nothing goes before the next window. */
	load("[c]\nmatch = 10.0.0.0/8\nrate = 50/s\nstrategy = fixed-window\nmax_wait = 1m\n");
	assert_true(reserve(T0, t) >= T0 + 1); /* not now */
	/* A removed section frees its slot. */
	load("[b]\nmatch = 10.0.0.1\nrate = 1/m\n");
	for (unsigned i = 0, n = 0; i < sl_shm_dims_of(shm.hdr).sections; i++)
		if (sl_shm_section(shm.hdr, i)->in_use)
			assert_int_equal(++n, 1);
}

static int die_in_the_call(void *arg)
{
	(void)arg;
	_exit(0); /* as a kill -9 right after the SYN, before the call is recorded as made */
}

/* A caller killed inside the call its release makes - after its SYN, before the
 * clock that records it as made - leaves the next release at least the guard
 * behind (250 ms), never one interval after its check: preempted before the SYN,
 * it may have sent it that late. */
static void test_killed_inside_the_call(void **state)
{
	struct sl_dest d = dest("10.0.0.1", 80);
	struct sl_shm seg;
	struct sl_match m;
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_shm_dims dims = SL_SHM_DIMS_DEFAULT;
	struct sl_proc_id me;
	int64_t before, retry;
	int32_t self;
	int status;
	pid_t child;

	(void)state;
	/* A memfd segment, shared with the child across fork; each process is entered
	 * in its roster under its own token, as the keeper would enter it. */
	assert_int_equal(sl_shm_create(&seg, "test-act", &dims), 0);
	me = sl_roster_me();
	self = sl_roster_enter(seg.hdr, &me, me.pid, me.stamp, NULL);
	assert_true(self > 0);
	assert_int_equal(sl_config_load_string(cfg, "t->ini", "[a]\nmatch = 10.0.0.1\nrate = 10/s\n"
	                                       "max_wait = 1m\n"), 0);
	assert_int_equal(sl_shm_apply_config(seg.hdr, cfg, self), 0);
	sl_shm_publish(seg.hdr);
	before = sl_clock_mono_ns();
	if ((child = fork()) == 0) {
		struct sl_proc_id kid = sl_roster_me();

		self = sl_roster_enter(seg.hdr, &kid, kid.pid, kid.stamp, NULL);

		if (sl_match_sections(seg.hdr, &d, &m, self) <= 0 ||
		    sl_admit_reserve(seg.hdr, &m, sl_clock_mono_ns(), self, t) != 0)
			_exit(2);
		sl_admit_release_act(seg.hdr, t, SL_ADMIT_NOW, self, &retry, die_in_the_call, NULL);
		_exit(3);
	}
	assert_true(child > 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* 150 ms on, past the interval: the release check still says to wait. */
	assert_true(sl_match_sections(seg.hdr, &d, &m, self) > 0);
	assert_int_equal(sl_admit_reserve(seg.hdr, &m, before + 150 * MS, self, t), 0);
	assert_int_equal(sl_admit_release(seg.hdr, t, before + 150 * MS, self, &retry), 1);
	assert_true(retry >= before + 350 * MS);
	sl_shm_detach(&seg);
}

/* An act that sends and spins for `spent_ns` of real time, as a loopback connect
 * carrying its whole handshake does (the release reads the real clock around it). */
static int64_t spent_ns, call_end;

static int slow_call(void *arg)
{
	int64_t end = sl_clock_mono_ns() + spent_ns;

	(void)arg;
	while ((call_end = sl_clock_mono_ns()) < end)
		;
	return 1;
}

/* The gate a release checked at `checked` must leave at `interval` on, by the
 * rule: from the check less SL_WAKE_SLACK_NS, or from the call's end less
 * SL_CALL_SPREAD_NS when that is later (this process may have been preempted
 * inside the call: the end read by the release comes a little after the one
 * noted here). */
static void assert_counted(int64_t gate, int64_t checked, int64_t interval)
{
	checked -= SL_WAKE_SLACK_NS;
	assert_true(gate >= SL_MAX(checked, call_end - SL_CALL_SPREAD_NS) + interval);
	assert_true(gate <= SL_MAX(checked, call_end + 5 * MS - SL_CALL_SPREAD_NS) + interval);
}

/* Where the next release counts from (docs/design.md, "Where the bound is kept"):
 * at 100/s from the release's check however long its call took (up to 0.2 ms);
 * a call of 5 ms from its end less 0.2 ms; at 10/s from the end. */
static void test_counted_from_the_call(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	int64_t retry, before;

	(void)state;
	load("[fast]\nmatch = 10.0.0.0/8\nrate = 100/s\nmax_wait = 1m\n");
	spent_ns = 150 * SL_NS_PER_US;
	before = sl_clock_mono_ns();
	assert_true(reserve(before, t) >= 0);
	assert_int_equal(sl_admit_release_act(shm.hdr, t, SL_ADMIT_NOW, (int32_t)getpid(), &retry, slow_call,
	                                      NULL), 0);
	/* Counted from the check (the call took under 0.2 ms, unless preempted). */
	assert_counted(section("fast")->state.rel_tat_ns, t->released_ns, 10 * MS);
	spent_ns = 20 * MS;
	assert_true(reserve(sl_clock_mono_ns(), t) >= 0);
	while (sl_admit_release_act(shm.hdr, t, SL_ADMIT_NOW, (int32_t)getpid(), &retry, slow_call, NULL) == 1)
		;
	/* 20 ms in the call: counted from its end less SL_CALL_SPREAD_NS. */
	assert_counted(section("fast")->state.rel_tat_ns, t->released_ns, 10 * MS);
	assert_true(section("fast")->state.rel_tat_ns >= t->released_ns + 20 * MS - SL_CALL_SPREAD_NS + 10 * MS);

	load("[slow]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 1m\n");
	spent_ns = 150 * SL_NS_PER_US;
	assert_true(reserve(sl_clock_mono_ns(), t) >= 0);
	while (sl_admit_release_act(shm.hdr, t, SL_ADMIT_NOW, (int32_t)getpid(), &retry, slow_call, NULL) == 1)
		;
	/* 100 ms intervals: from the call's end, strictly. */
	assert_true(section("slow")->state.rel_tat_ns >= t->released_ns + 150 * SL_NS_PER_US + 100 * MS);
}

static void test_counted_from_rule(void **state)
{
	struct sl_spec s = {.amount = 1000, .window_ns = SL_NS_PER_S, .burst = 1};
	struct sl_state st;

	(void)state;
	memset(&st, 0, sizeof(st));
	/* A short call: from the check less the wake-up's slack, or the end less the
	 * call's spread (the two are one 0.2 ms today: the end's, then). */
	assert_int_equal(sl_limit_counted_from(&s, &st, 1, T0, T0 + 50 * SL_NS_PER_US),
	                 SL_MAX(T0 - SL_WAKE_SLACK_NS, T0 + 50 * SL_NS_PER_US - SL_CALL_SPREAD_NS));
	assert_true(sl_limit_counted_from(&s, &st, 1, T0, T0 + 50 * SL_NS_PER_US) < T0); /* never later than the check */
	assert_int_equal(sl_limit_counted_from(&s, &st, 1, T0, T0 + 3 * MS), T0 + 3 * MS - SL_CALL_SPREAD_NS);
	assert_int_equal(sl_limit_counted_from(&s, &st, 1, T0, T0 - 5), T0); /* an end before: the check */
	s.amount = 20; /* 50 ms: strict */
	assert_int_equal(sl_limit_counted_from(&s, &st, 1, T0, T0 + 50 * SL_NS_PER_US), T0 + 50 * SL_NS_PER_US);
	s.amount = 1000;
	s.strategy = SL_STRAT_FIXED_WINDOW; /* windows: where it ended */
	assert_int_equal(sl_limit_counted_from(&s, &st, 1, T0, T0 + 50 * SL_NS_PER_US), T0 + 50 * SL_NS_PER_US);
}

/* The peek says what the locked check would, without the lock: a gate not yet
 * open, or now when it is; and never lets a release go itself. */
/* A section scribbled since the daemon sealed it (summary.h): nothing decided on
 * it - a reservation and a release check answer -EBADMSG, not a slot and not
 * "gone" - and a section that looks unused or of another meter is still matched
 * while its seal says it is in use; sealed again, it decides as before. */
static void test_seal(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_dest d = dest("10.0.0.1", 80);
	struct sl_section *a;
	struct sl_match m;
	int64_t held;

	(void)state;
	load("[a]\nmatch = 10.0.0.0/8\nrate = 10/s\n");
	a = section("a");
	assert_int_equal(reserve(T0, t), T0);
	held = reserve(T0, t);
	assert_int_equal(held, T0 + 100 * MS);
	/* The window scribbled to a nanosecond: the release check refuses to read it. */
	a->spec.window_ns = 1;
	assert_int_equal(sl_admit_release(shm.hdr, t, T0 + MS, (int32_t)getpid(), &held), -EBADMSG);
	assert_int_equal(reserve(T0, t), -EBADMSG);
	a->spec.window_ns = SL_NS_PER_S;
	assert_int_equal(reserve(T0, t), T0 + 200 * MS);
	/* in_use and the meter, each written over: still matched, still refused. */
	a->in_use = 0;
	assert_int_equal(sl_match_sections(shm.hdr, &d, &m, (int32_t)getpid()), 1);
	assert_int_equal(sl_admit_reserve(shm.hdr, &m, T0, (int32_t)getpid(), t), -EBADMSG);
	a->in_use = 1;
	a->spec.meter = SL_METER_DATAGRAMS;
	assert_int_equal(sl_match_sections(shm.hdr, &d, &m, (int32_t)getpid()), 1);
	assert_int_equal(sl_admit_reserve(shm.hdr, &m, T0, (int32_t)getpid(), t), -EBADMSG);
	/* Sealed as it stands (the daemon's write-back): decided on again. */
	sl_section_seal(a);
	assert_int_equal(sl_match_sections(shm.hdr, &d, &m, (int32_t)getpid()), 0);
	a->spec.meter = SL_METER_CONNECTIONS;
	assert_int_equal(reserve(T0, t), -EBADMSG);
	sl_section_seal(a);
	assert_int_equal(reserve(T0, t), T0 + 300 * MS);
}

static void test_peek(void **state)
{
	union sl_ticket_room a_room, b_room;
	struct sl_ticket *const a = &a_room.t;
	struct sl_ticket *const b = &b_room.t;
	int64_t retry;

	(void)state;
	load("[p]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 1m\n");
	assert_int_equal(reserve(T0, a), T0);
	assert_int_equal(reserve(T0, b), T0 + 100 * MS);
	assert_int_equal(sl_admit_release(shm.hdr, a, T0 + 5 * MS, (int32_t)getpid(), &retry), 0);
	/* b's slot has come, its gate (a's release plus an interval) not yet. */
	assert_int_equal(sl_admit_peek(shm.hdr, b, T0 + 100 * MS), T0 + 105 * MS);
	assert_int_equal(sl_admit_release(shm.hdr, b, T0 + 100 * MS, (int32_t)getpid(), &retry), 1);
	assert_int_equal(retry, T0 + 105 * MS);
	assert_int_equal(sl_admit_peek(shm.hdr, b, T0 + 106 * MS), T0 + 106 * MS);
	assert_int_equal(section("p")->state.admitted, 1); /* the peeks released nothing */
	/* A scribbled gate far ahead: the peek's answer is bounded. */
	section("p")->state.rel_tat_ns = T0 + 3600 * SL_NS_PER_S;
	assert_int_equal(sl_admit_peek(shm.hdr, b, T0 + 106 * MS), T0 + 106 * MS + SL_PEEK_MAX_NS);
}

/* Each release counts its lateness after its slot beside the section. */
static void test_lateness_counted(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	int64_t retry;
	uint64_t n = 0;

	(void)state;
	load("[l]\nmatch = 10.0.0.0/8\nrate = 10/s\nmax_wait = 1m\n");
	assert_int_equal(reserve(T0, t), T0);
	assert_int_equal(sl_admit_release(shm.hdr, t, T0 + 3 * MS, (int32_t)getpid(), &retry), 0);
	assert_int_equal(section("l")->delivery.late[sl_delivery_bucket(3 * MS)], 1);
	for (unsigned b = 0; b < SL_LATE_BUCKETS; b++)
		n += section("l")->delivery.late[b];
	assert_int_equal(n, 1);
}

static void test_observe(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;

	(void)state;
	load("[o]\nmatch = 10.0.0.0/8\nrate = 1/s\nmode = observe\n");
	for (int i = 0; i < 5; i++) {
		assert_int_equal(reserve(T0, t), T0); /* nobody is held */
		assert_int_equal(t->mask, 0);
	}
	assert_int_equal(section("o")->more.observed, 4);
	assert_int_equal(section("o")->state.admitted, 5);
}

static void test_histogram(void **state)
{
	static struct sl_section sec;

	(void)state;
	memset(&sec, 0, sizeof(sec));
	assert_int_equal(sl_stats_bucket(0), 0);
	assert_true(sl_stats_bucket(1 * MS) < sl_stats_bucket(2 * MS));
	for (int i = 1; i <= 100; i++)
		sl_stats_record_wait(&sec, i * MS, 1, 1);
	assert_int_equal(sec.state.admitted, 100);
	assert_int_equal(sec.more.held, 100);
	assert_int_equal(sec.more.wait_max_ns, 100 * MS);
	/* Bucket bounds are within a factor 1.5 of the true quantile. */
	assert_true(sl_stats_wait_quantile(&sec, 0.5) >= 50 * MS);
	assert_true(sl_stats_wait_quantile(&sec, 0.5) <= 75 * MS);
	assert_int_equal(sl_stats_wait_quantile(&sec, 1.0), 100 * MS);
}

/* A section meters one kind of request: a connection never matches a datagram
 * section, nor a datagram a connection section, even on the same destination. */
static void test_match_by_meter(void **state)
{
	static const char ini[] = "[conn]\nmatch = 127.0.0.1\nrate = 5/s\n"
	                          "[udp]\nmatch = 127.0.0.1\nrate = 5/s\nmeter = datagrams\n";
	static struct sl_config cfg; /* large */
	struct sl_shm a;
	struct sl_match m;
	struct sl_dest d = {.family = AF_INET, .port = 53, .addr = {127, 0, 0, 1}};

	(void)state;
	assert_int_equal(sl_config_load_string(&cfg, "t.ini", ini), 0);
	assert_int_equal(sl_shm_create_anonymous(&a), 0);
	assert_int_equal(sl_shm_apply_config(a.hdr, &cfg, (int32_t)getpid()), 0);
	assert_int_equal(a.hdr->meters, (1u << SL_METER_CONNECTIONS) | (1u << SL_METER_DATAGRAMS));
	assert_int_equal(sl_match_sections(a.hdr, &d, &m, (int32_t)getpid()), 1);
	assert_string_equal(sl_shm_section(a.hdr, m.idx[__builtin_ctzll(m.mask)])->spec.name, "conn");
	d.meter = SL_METER_DATAGRAMS;
	assert_int_equal(sl_match_sections(a.hdr, &d, &m, (int32_t)getpid()), 1);
	assert_string_equal(sl_shm_section(a.hdr, m.idx[__builtin_ctzll(m.mask)])->spec.name, "udp");
	d.meter = SL_METER_BYTES;
	assert_int_equal(sl_match_sections(a.hdr, &d, &m, (int32_t)getpid()), 0);
	sl_shm_detach(&a);
}

/* A specs' writer killed half way leaves spec_seq odd.  Matching must not then
 * find "no section" (the call would go unshaped, as under overload it did: five
 * connects in 2 ms at 50/s when a daemon restarted), and the next writer must leave
 * it even, not flip it odd for good. */
static void test_match_while_specs_rewritten(void **state)
{
	static const char ini[] = "[a]\nmatch = 127.0.0.1\nrate = 5/s\n";
	static struct sl_config cfg;
	struct sl_dest d = {.family = AF_INET, .port = 80, .addr = {127, 0, 0, 1}};
	struct sl_match m;
	struct sl_shm a;
	int64_t start;

	(void)state;
	assert_int_equal(sl_config_load_string(&cfg, "t.ini", ini), 0);
	assert_int_equal(sl_shm_create_anonymous(&a), 0);
	assert_int_equal(sl_shm_apply_config(a.hdr, &cfg, 1), 0);
	assert_int_equal(a.hdr->spec_seq % 2, 0);
	a.hdr->spec_seq |= 1; /* the writer died here */
	start = sl_clock_mono_ns();
	assert_int_equal(sl_match_sections(a.hdr, &d, &m, (int32_t)getpid()), 1);
	assert_true(sl_clock_mono_ns() - start < SL_NS_PER_S); /* under the free lock, at once */
	assert_int_equal(sl_shm_apply_config(a.hdr, &cfg, 1), 0);
	assert_int_equal(a.hdr->spec_seq % 2, 0);
	sl_shm_detach(&a);
}

/* A segment of its own holding config text ini (cfg: the caller's, large). */
static void segment_of(struct sl_shm *shm, struct sl_config *cfg, const char *ini)
{
	assert_int_equal(sl_config_load_string(cfg, "t.ini", ini), 0);
	assert_int_equal(sl_shm_create_anonymous(shm), 0);
	assert_int_equal(sl_shm_apply_config(shm->hdr, cfg, 1), 0);
}

/* A bytes piece grown at its release (sl_admit_grow): by the room its section has
 * (a writer that came late for a quarter piece carries the rest of it), never
 * while a later reservation follows it in the queue (that caller's slot would be
 * pushed back), and never in a section counted by a durable quota. */
static void test_bytes_grow(void **state)
{
	static const char ini[] = "[up]\nmatch = 127.0.0.1\nmeter = bytes\nrate = 1M/s\n";
	static struct sl_config cfg;
	struct sl_dest d = {.family = AF_INET, .port = 80, .addr = {127, 0, 0, 1}, .meter = SL_METER_BYTES};
	union sl_ticket_room a, b;
	const struct sl_section *sec;
	uint64_t piece, quarter, before;
	struct sl_match m;
	struct sl_shm shm;
	int64_t now, retry;

	(void)state;
	segment_of(&shm, &cfg, ini);
	assert_int_equal(sl_match_sections(shm.hdr, &d, &m, 1), 1);
	sec = sl_shm_section(shm.hdr, m.idx[__builtin_ctzll(m.mask)]);
	piece = sl_bytes_piece(&sec->spec);
	quarter = piece / 4;
	now = sl_clock_mono_ns();

	/* The first quarter goes at once; the bucket still holds the rest of a piece. */
	assert_int_equal(sl_admit_reserve_bytes(shm.hdr, &m, now, 1, &a.t, quarter), 0);
	assert_int_equal(sl_admit_release(shm.hdr, &a.t, now, 1, &retry), 0);
	before = sec->state.admitted;
	assert_int_equal(sl_admit_grow(shm.hdr, &a.t, now, 1, 10 * piece), piece - quarter);
	assert_int_equal(a.t.cost, piece);
	assert_int_equal(sec->state.admitted, before + piece - quarter);
	assert_int_equal(sl_admit_grow(shm.hdr, &a.t, now, 1, piece), 0); /* full */

	/* 10 ms later (half a piece's time) a quarter is due; the room is what the
	 * 10 ms earned, the quarter and another; asked for less, less. */
	now += 10 * SL_NS_PER_MS;
	assert_int_equal(sl_admit_reserve_bytes(shm.hdr, &m, now, 1, &a.t, quarter), 0);
	assert_int_equal(sl_admit_release(shm.hdr, &a.t, now, 1, &retry), 0);
	assert_int_equal(sl_admit_grow(shm.hdr, &a.t, now, 1, 100), 100);

	/* A reservation queued behind: no growth for the one before it. */
	now += 40 * SL_NS_PER_MS;
	assert_int_equal(sl_admit_reserve_bytes(shm.hdr, &m, now, 1, &a.t, quarter), 0);
	assert_int_equal(sl_admit_reserve_bytes(shm.hdr, &m, now, 1, &b.t, quarter), 0);
	assert_int_equal(sl_admit_release(shm.hdr, &a.t, now, 1, &retry), 0);
	assert_int_equal(sl_admit_grow(shm.hdr, &a.t, now, 1, piece), 0);
	sl_shm_detach(&shm);

	/* A durable quota counts every byte it lets go: no growth past its count. */
	static const char quota[] = "[sluice]\nstate_dir = /tmp\n"
	                            "[up]\nmatch = 127.0.0.1\nmeter = bytes\nrate = 1G/d\n";
	if (sl_config_load_string(&cfg, "q.ini", quota) == 0 && sl_shm_create_anonymous(&shm) == 0) {
		cfg.sections[0].spec.durable = 1; /* as sluiced marks it (daemon/quotas.c) */
		assert_int_equal(sl_shm_apply_config(shm.hdr, &cfg, 1), 0);
		assert_int_equal(sl_match_sections(shm.hdr, &d, &m, 1), 1);
		assert_true(sl_shm_section(shm.hdr, m.idx[__builtin_ctzll(m.mask)])->spec.durable);
		sl_shm_section(shm.hdr, m.idx[__builtin_ctzll(m.mask)])->state.quota_left = 1u << 30;
		now = sl_clock_mono_ns();
		assert_int_equal(sl_admit_reserve_bytes(shm.hdr, &m, now, 1, &a.t, 1000), 0);
		assert_int_equal(sl_admit_release(shm.hdr, &a.t, now, 1, &retry), 0);
		assert_int_equal(sl_admit_grow(shm.hdr, &a.t, now, 1, piece), 0);
		sl_shm_detach(&shm);
	} else {
		fail_msg("a durable bytes quota did not load");
	}
}

/* The first writes' line through tickets (sl_admit_first_write): two
 * connections released together get slots an interval apart on their section's
 * line, and a section of requests keeps none. */
static void test_first_write_line(void **state)
{
	static const char ini[] = "[c]\nmatch = 127.0.0.1:80\nrate = 500/s\n"
	                          "[r]\nmatch = 127.0.0.1:81\nrate = 500/s\nmeter = requests\n";
	static struct sl_config cfg;
	struct sl_dest d = {.family = AF_INET, .port = 80, .addr = {127, 0, 0, 1}};
	union sl_ticket_room a, b;
	struct sl_match m;
	struct sl_shm shm;
	int64_t now, retry;

	(void)state;
	segment_of(&shm, &cfg, ini);
	assert_int_equal(sl_match_sections(shm.hdr, &d, &m, 1), 1);
	now = sl_clock_mono_ns();
	assert_int_equal(sl_admit_reserve(shm.hdr, &m, now, 1, &a.t), 0);
	assert_int_equal(sl_admit_release(shm.hdr, &a.t, now, 1, &retry), 0);
	assert_int_equal(sl_admit_reserve(shm.hdr, &m, now, 1, &b.t), 0);
	assert_int_equal(sl_admit_release(shm.hdr, &b.t, b.t.release_ns, 1, &retry), 0);
	/* Both first writes at once, later: the second a slot 2 ms after the first. */
	now += 10 * SL_NS_PER_MS;
	assert_int_equal(sl_admit_first_write(shm.hdr, &a.t, now, 1), now);
	assert_int_equal(sl_admit_first_write(shm.hdr, &b.t, now, 1), now + 2 * SL_NS_PER_MS);
	/* Requests: their writes are spaced by their own admissions. */
	d.port = 81;
	d.meter = SL_METER_REQUESTS;
	assert_int_equal(sl_match_sections(shm.hdr, &d, &m, 1), 1);
	assert_int_equal(sl_admit_reserve(shm.hdr, &m, now, 1, &a.t), 0);
	assert_int_equal(sl_admit_first_write(shm.hdr, &a.t, now, 1), now);
	assert_int_equal(sl_admit_first_write(shm.hdr, &a.t, now, 1), now);
	sl_shm_detach(&shm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match_by_meter),
		cmocka_unit_test(test_bytes_grow),
		cmocka_unit_test(test_first_write_line),
		cmocka_unit_test(test_killed_inside_the_call),
		cmocka_unit_test(test_match_while_specs_rewritten),
		cmocka_unit_test_setup_teardown(test_spacing, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_burst, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_max_wait_refusal, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_multi_section, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_refusal_charges_nothing, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_refund, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_reap_dead_waiter, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_release_is_strict, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_wake_slack, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_catch_up_never_exceeds, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_scribbled_state_repaired, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_reload_keeps_state, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_observe, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_counted_from_the_call, fresh_segment, drop_segment),
		cmocka_unit_test(test_counted_from_rule),
		cmocka_unit_test_setup_teardown(test_peek, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_seal, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_lateness_counted, fresh_segment, drop_segment),
		cmocka_unit_test_setup_teardown(test_histogram, fresh_segment, drop_segment),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
