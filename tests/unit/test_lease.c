/* A fleet section answers from its lease (src/core/lease.c): nothing goes without
 * one; a rate share spaces releases at the share; a chunk lets its count through
 * until it ends; places bound what is open. */
#include "sluice/admit.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/config.h"
#include "sluice/lease.h"
#include "sluice/shm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#define MS 1000000LL
#define NOW (1000 * 1000 * MS)

static struct sl_config cfg;

static void load(struct sl_shm *a, const char *text)
{
	struct sl_shm_dims d;

	assert_int_equal(sl_config_load_string(&cfg, "t.ini", text), 0);
	sl_config_dims(&cfg, &d);
	assert_int_equal(sl_shm_create_anonymous_dims(a, &d), 0);
	assert_int_equal(sl_shm_apply_config_at(a->hdr, &cfg, 1, NOW), 0);
}

/* Reserve at `now`; the slot given, or -errno. */
static int64_t reserve(struct sl_shm_header *h, int64_t now, struct sl_ticket *t)
{
	struct sl_dest d = {.family = AF_INET, .port = 443, .addr = {10, 0, 0, 1}};
	struct sl_match m;

	assert_int_equal(sl_match_sections(h, &d, &m, 1), 1);
	int rc = sl_admit_reserve(h, &m, now, 1, t);

	return rc < 0 ? rc : t->release_ns;
}

/* Released at its slot (or the first time after it the check agrees), within `by`. */
static int64_t release(struct sl_shm_header *h, struct sl_ticket *t, int64_t by)
{
	int64_t at = t->release_ns, retry;

	while (at <= by) {
		int rc = sl_admit_release(h, t, at, 1, &retry);

		if (rc == 0)
			return at;
		assert_int_equal(rc, 1);
		at = retry;
	}
	return -1;
}

static void grant_at(struct sl_shm_header *h, const struct sl_grant *given, int64_t now)
{
	struct sl_grant g = *given;

	if (!g.valid_ns)
		g.valid_ns = INT64_MAX / 4;
	assert_int_equal(sl_shm_lock(h, 1, 1000 * MS), 0);
	sl_lease_write(&sl_shm_section(h, 0)->state, &g, now);
	sl_shm_unlock(h, 1);
}

static void grant(struct sl_shm_header *h, const struct sl_grant *given)
{
	struct sl_grant g = *given;

	if (!g.valid_ns)
		g.valid_ns = INT64_MAX / 4; /* the concurrency code reads the real clock */
	assert_int_equal(sl_shm_lock(h, 1, 1000 * MS), 0);
	sl_lease_write(&sl_shm_section(h, 0)->state, &g, NOW);
	sl_shm_unlock(h, 1);
}

static const char fleet_rate[] = "[sluice]\nredis = 127.0.0.1:6379\n"
                                 "[api]\nmatch = 10.0.0.0/8\nrate = 100/s\nscope = fleet\nmax_wait = 10s\n";

/* No lease: nothing goes, a call looks again every SL_LEASE_RETRY_NS.  A share of
 * 10/s then spaces releases 100 ms apart, the fleet's 100/s notwithstanding. */
static void test_rate_share(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_shm a;
	int64_t prev;

	(void)state;
	load(&a, fleet_rate);
	assert_int_equal(reserve(a.hdr, NOW, t), NOW + SL_LEASE_RETRY_NS);
	assert_int_equal(release(a.hdr, t, NOW + 5 * SL_LEASE_RETRY_NS), -1);
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_RATE, .amount = 10, .window_ns = 1000 * MS});
	prev = release(a.hdr, t, NOW + 10 * SL_LEASE_RETRY_NS);
	assert_true(prev >= NOW);
	for (int i = 0; i < 5; i++) {
		int64_t at;

		assert_true(reserve(a.hdr, prev, t) >= prev + 100 * MS);
		at = release(a.hdr, t, prev + 1000 * MS);
		assert_true(at - prev >= 100 * MS);
		prev = at;
	}
	/* A lease that lapsed (no daemon renews it): nothing goes, until it is renewed. */
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_RATE, .amount = 10, .window_ns = 1000 * MS,
	                                .valid_ns = prev + 150 * MS});
	reserve(a.hdr, prev + 200 * MS, t);
	assert_int_equal(release(a.hdr, t, prev + 400 * MS), -1);
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_RATE, .amount = 10, .window_ns = 1000 * MS});
	prev = release(a.hdr, t, prev + 1000 * MS);
	assert_true(prev > 0);
	/* A larger share, 50/s: 20 ms apart from the next one on. */
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_RATE, .amount = 50, .window_ns = 1000 * MS});
	reserve(a.hdr, prev + 100 * MS, t);
	prev = release(a.hdr, t, prev + 1000 * MS);
	assert_true(reserve(a.hdr, prev, t) >= prev + 20 * MS && t->release_ns < prev + 21 * MS);
	sl_shm_detach(&a);
}

/* A share that grows: callers held under the small one look again within
 * SL_LEASE_RECHECK_NS, the queue keeps its length in requests at the new share,
 * and they go at the new spacing, not at the slots the small share gave them.  A
 * caller held on past its next look is counted (the daemon's sign of demand). */
static void test_share_grows(void **state)
{
	union sl_ticket_room t[4];
	struct sl_shm a;
	struct sl_state *st;
	uint32_t misses;
	int64_t retry, at;

	(void)state;
	load(&a, fleet_rate);
	st = &sl_shm_section(a.hdr, 0)->state;
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_RATE, .amount = 1, .window_ns = 1000 * MS});
	assert_int_equal(reserve(a.hdr, NOW, &t[0].t), NOW);
	assert_int_equal(sl_admit_release(a.hdr, &t[0].t, NOW, 1, &retry), 0);
	for (int i = 1; i < 4; i++) /* slots 1, 2, 3 s away: each looks again in 100 ms */
		assert_int_equal(reserve(a.hdr, NOW, &t[i].t), NOW + SL_LEASE_RECHECK_NS);
	misses = sl_state_more(st)->lease.misses;
	assert_int_equal(sl_admit_release(a.hdr, &t[1].t, NOW + SL_LEASE_RECHECK_NS, 1, &retry), 1);
	assert_true(retry <= NOW + 2 * SL_LEASE_RECHECK_NS);
	assert_true(sl_state_more(st)->lease.misses != misses);
	/* 100/s from now on: three queued are 30 ms of the new share. */
	grant_at(a.hdr, &(struct sl_grant){.flags = SL_LEASE_RATE, .amount = 100, .window_ns = 1000 * MS},
	         NOW + SL_LEASE_RECHECK_NS);
	at = release(a.hdr, &t[1].t, NOW + 2 * SL_LEASE_RECHECK_NS);
	assert_true(at > 0 && at <= NOW + SL_LEASE_RECHECK_NS + 40 * MS);
	assert_true(release(a.hdr, &t[2].t, NOW + 2 * SL_LEASE_RECHECK_NS) > at);
	assert_true(release(a.hdr, &t[3].t, NOW + 2 * SL_LEASE_RECHECK_NS) > 0);
	sl_shm_detach(&a);
}

/* On the grid (grid.h): two machines, each holding half the ranks of the fleet's
 * 100/s - even slots and odd ones.  Each releases only at its own slots, each
 * slot once, within an interval of the slot's start: a caller woken 4 ms late
 * still has its slot, one woken 14 ms late has lost it to the next.  A release
 * whose call went on for 25 ms uses up the machine's slots that started
 * meanwhile.  Together they never release two in one slot. */
static void test_grid(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_shm m[2];
	int64_t iv = 10 * MS, origin = 5 * MS, last[2] = {0, 0};
	static int64_t slot_used[4000];
	int n = 0;

	(void)state;
	memset(slot_used, 0, sizeof(slot_used));
	for (int i = 0; i < 2; i++) {
		struct sl_grant g = {.flags = SL_LEASE_RATE, .amount = 50, .window_ns = 1000 * MS,
		                     .grid = {.origin_ns = origin, .interval_ns = iv, .n = 1,
		                              .run = {{(uint16_t)(i * 2048), (uint16_t)(i * 2048 + 2048)}}}};

		load(&m[i], fleet_rate);
		grant(m[i].hdr, &g);
	}
	for (int round = 0; round < 40; round++) {
		for (int i = 0; i < 2; i++) {
			int64_t now = NOW + round * 40 * MS + (round % 3) * MS, slot, at, retry;
			int64_t late = round % 5 == 1 ? 4 * MS : round % 5 == 3 ? 14 * MS : 0;

			slot = reserve(m[i].hdr, now, t);
			assert_true(slot >= now);
			assert_int_equal((slot - origin) % iv, 0);
			assert_int_equal((slot - origin) / iv % 2, i); /* its own */
			at = SL_MAX(slot + late, last[i]);
			while (sl_admit_release(m[i].hdr, t, at, 1, &retry) == 1) {
				assert_true(retry > at);
				at = retry;
			}
			/* Released within an interval of one of its own slots, used once. */
			{
				int64_t k = (at - origin) / iv;

				assert_int_equal(k % 2, i);
				assert_true(at - (origin + k * iv) < iv);
				assert_true(k - (NOW - origin) / iv < 4000);
				assert_int_equal(slot_used[k - (NOW - origin) / iv]++, 0);
				if (late == 14 * MS)
					assert_true(at > slot + iv); /* its slot was lost */
				else if (late)
					assert_int_equal(at, slot + late);
			}
			last[i] = at;
			n++;
		}
	}
	assert_int_equal(n, 80);
	/* A call that went on for 25 ms: the machine's slots meanwhile are used up. */
	{
		struct sl_state *st = &sl_shm_section(m[0].hdr, 0)->state;
		int64_t now = last[0] + 100 * MS, slot, retry;

		slot = reserve(m[0].hdr, now, t);
		assert_int_equal(sl_admit_release(m[0].hdr, t, slot, 1, &retry), 0);
		assert_int_equal(sl_shm_lock(m[0].hdr, 1, 1000 * MS), 0);
		sl_limit_moved(&sl_shm_section(m[0].hdr, 0)->spec, st, slot, slot + 25 * MS, 1, 0);
		sl_shm_unlock(m[0].hdr, 1);
		reserve(m[0].hdr, slot + 1, t);
		assert_true(release(m[0].hdr, t, slot + 1000 * MS) >= slot + 25 * MS);
	}
	/* Four callers at once on half the grid: four slots, every other one, all
	 * four queued. */
	{
		union sl_ticket_room q[4];
		struct sl_state *st = &sl_shm_section(m[1].hdr, 0)->state;
		int64_t now = NOW + 60 * 1000 * MS, prev = 0;

		for (int i = 0; i < 4; i++) {
			int64_t slot = reserve(m[1].hdr, now, &q[i].t);

			assert_true(slot > prev + (i ? iv : 0));
			assert_int_equal((slot - origin) / iv % 2, 1);
			prev = slot;
		}
		assert_int_equal(sl_limit_queued(&sl_shm_section(m[1].hdr, 0)->spec, st, now, 0), 4);
	}
	/* The lease lapsed: no slot at all. */
	grant(m[1].hdr, &(struct sl_grant){.flags = SL_LEASE_RATE, .amount = 50, .window_ns = 1000 * MS,
	                                   .valid_ns = NOW, .grid = {.origin_ns = origin, .interval_ns = iv,
	                                                             .n = 1, .run = {{2048, 4096}}}});
	assert_int_equal(reserve(m[1].hdr, NOW + 2000 * MS, t), NOW + 2000 * MS + SL_LEASE_RETRY_NS);
	for (int i = 0; i < 2; i++)
		sl_shm_detach(&m[i]);
}

/* A lease served by claims (docs/design.md, "Claims"): no rank, so no slot and
 * never a GCRA at its share; a caller asks for a claim and looks again shortly,
 * once while the ask is out; claimed slots are released once each within an
 * interval of their start, and one woken later has lost it. */
static void test_claims(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_shm m;
	struct sl_state *st;
	int64_t iv = 10 * MS, origin = 5 * MS, retry, k0 = (NOW - origin) / iv + 10, ks[40];
	struct sl_grant g = {.flags = SL_LEASE_RATE | SL_LEASE_CLAIMING, .amount = 50, .window_ns = 1000 * MS,
	                     .grid = {.origin_ns = origin, .interval_ns = iv, .n = 0}};

	(void)state;
	load(&m, fleet_rate);
	st = &sl_shm_section(m.hdr, 0)->state;
	grant(m.hdr, &g);
	/* Nothing claimed: a look again in 20 ms, and a claim asked for (one caller:
	 * its note, as sl_pending_step keeps it, says when it asked). */
	sl_claim_note = (struct sl_claim_note){0};
	assert_int_equal(reserve(m.hdr, NOW, t), NOW + 20 * MS);
	assert_int_equal(sl_state_more(st)->lease.claims_wanted, 1);
	assert_int_equal(sl_claim_note.caller_asked_ns, NOW);
	assert_int_equal(sl_claim_note.asked, 1);
	/* Callers, not looks: the same caller looking again before an answer asks
	 * no more. */
	assert_int_equal(sl_admit_release(m.hdr, t, NOW + 20 * MS, 1, &retry), 1);
	assert_int_equal(retry, NOW + 40 * MS);
	assert_int_equal(sl_state_more(st)->lease.claims_wanted, 1);
	/* Another caller does; one that can be woken when claims come looks again
	 * later (SL_LEASE_CLAIM_WAIT_NS). */
	sl_claim_note = (struct sl_claim_note){.look_ns = SL_LEASE_CLAIM_WAIT_NS};
	assert_int_equal(sl_admit_release(m.hdr, t, NOW + 21 * MS, 1, &retry), 1);
	assert_int_equal(retry, NOW + 21 * MS + SL_LEASE_CLAIM_WAIT_NS);
	assert_int_equal(sl_state_more(st)->lease.claims_wanted, 2);
	/* The daemon takes the asks; an answer with none lets each caller that
	 * asked before it ask again. */
	assert_int_equal(sl_shm_lock(m.hdr, 1, 1000 * MS), 0);
	assert_int_equal(sl_lease_claims_wanted(st, NOW + 41 * MS), 2);
	assert_int_equal(sl_lease_claims_add(st, ks, 0, NOW + 43 * MS), 0);
	sl_shm_unlock(m.hdr, 1);
	assert_int_equal(sl_state_more(st)->lease.claims_wanted, 0);
	sl_claim_note = (struct sl_claim_note){.caller_asked_ns = NOW};
	assert_int_equal(sl_admit_release(m.hdr, t, NOW + 44 * MS, 1, &retry), 1);
	assert_int_equal(sl_state_more(st)->lease.claims_wanted, 1);
	sl_claim_note = (struct sl_claim_note){0};
	/* Three claims come, one already past. */
	ks[0] = (NOW - origin) / iv - 5;
	ks[1] = k0;
	ks[2] = k0 + 7;
	ks[3] = k0 + 30;
	assert_int_equal(sl_shm_lock(m.hdr, 1, 1000 * MS), 0);
	assert_int_equal(sl_lease_claims_add(st, ks, 4, NOW + 45 * MS), 3);
	sl_shm_unlock(m.hdr, 1);
	/* The caller held goes at the first; the next caller gets the second. */
	assert_int_equal(sl_admit_release(m.hdr, t, NOW + 46 * MS, 1, &retry), 1);
	assert_int_equal(retry, origin + k0 * iv);
	assert_int_equal(sl_admit_release(m.hdr, t, retry, 1, &retry), 0);
	assert_int_equal(reserve(m.hdr, origin + k0 * iv + 1, t), origin + (k0 + 7) * iv);
	/* Woken 12 ms late (more than an interval): that claim is lost, the next is
	 * the one it waits for. */
	{
		/* (a fleet caller looks again within SL_LEASE_RECHECK_NS, whatever its slot) */
		int64_t at = origin + (k0 + 7) * iv + 12 * MS;

		while (sl_admit_release(m.hdr, t, at, 1, &retry) == 1) {
			assert_true(retry <= at + SL_LEASE_RECHECK_NS && retry > at);
			at = retry;
		}
		assert_int_equal(at, origin + (k0 + 30) * iv);
	}
	/* All used: a look again, a claim asked for. */
	assert_int_equal(reserve(m.hdr, origin + (k0 + 31) * iv, t), origin + (k0 + 31) * iv + 20 * MS);
	/* Not served by claims, with no rank: the share's own GCRA, as a lease with
	 * no usable grid always was (lease.c, grid_of) - an idle one goes at once. */
	g.flags = SL_LEASE_RATE;
	grant(m.hdr, &g);
	assert_int_equal(reserve(m.hdr, NOW + 5000 * MS, t), NOW + 5000 * MS);
	/* More than a lease keeps: the oldest go. */
	for (int i = 0; i < 40; i++)
		ks[i] = k0 + 1000 + i;
	assert_int_equal(sl_shm_lock(m.hdr, 1, 1000 * MS), 0);
	assert_int_equal(sl_lease_claims_add(st, ks, 40, NOW), SL_LEASE_CLAIMS);
	assert_int_equal(sl_state_more(st)->lease.claim_k[0], k0 + 1000 + 40 - SL_LEASE_CLAIMS);
	/* Redis came back empty: every claim held goes (fleet.c). */
	sl_lease_claims_drop(st);
	assert_int_equal(sl_state_more(st)->lease.nclaims, 0);
	sl_shm_unlock(m.hdr, 1);
	sl_shm_detach(&m);
}

/* A chunk of a fixed window: its count goes until it ends, then nothing until the
 * next; topped up (the same chunk), the count goes on; a new chunk starts it anew. */
static void test_window_chunk(void **state)
{
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_shm a;
	int64_t end = NOW + 500 * MS;

	(void)state;
	load(&a, "[sluice]\nredis = 127.0.0.1:6379\n"
	         "[api]\nmatch = 10.0.0.0/8\nrate = 300/10s\nstrategy = fixed-window\nscope = fleet\n"
	         "max_wait = 1m\n");
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_CHUNK, .amount = 3, .until_ns = end, .chunk = 7});
	for (int i = 0; i < 3; i++) {
		assert_int_equal(reserve(a.hdr, NOW + i, t), NOW + i);
		assert_int_equal(release(a.hdr, t, NOW + i), NOW + i);
	}
	/* Used up: it looks again within SL_LEASE_RECHECK_NS, and goes nowhere until
	 * the window's end, nor after it with no new chunk. */
	assert_int_equal(reserve(a.hdr, NOW + 10, t), NOW + 10 + SL_LEASE_RECHECK_NS);
	assert_int_equal(release(a.hdr, t, end + SL_LEASE_RETRY_NS), -1);
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_CHUNK, .amount = 5, .until_ns = end, .chunk = 7});
	assert_int_equal(reserve(a.hdr, NOW + 20, t), NOW + 20); /* topped up: 2 more */
	assert_int_equal(release(a.hdr, t, NOW + 20), NOW + 20);
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_CHUNK, .amount = 2, .until_ns = end + 500 * MS,
	                                .chunk = 8});
	assert_int_equal(reserve(a.hdr, end, t), end);
	assert_int_equal(release(a.hdr, t, end), end);
	sl_shm_detach(&a);
}

/* Places: none without a lease; the lease's, never above the section's own. */
static void test_places(void **state)
{
	struct sl_dest d = {.family = AF_INET, .port = 443, .addr = {10, 0, 0, 1}};
	struct sl_match m;
	struct sl_shm a;
	uint64_t taken;
	uint32_t seen;
	int full;

	(void)state;
	load(&a, "[sluice]\nredis = 127.0.0.1:6379\n"
	         "[api]\nmatch = 10.0.0.0/8\nconcurrency = 6\nscope = fleet\n");
	assert_int_equal(sl_match_sections(a.hdr, &d, &m, 1), 1);
	assert_int_equal(sl_conc_take(a.hdr, &m, 100, &taken, &full, &seen), -EBUSY);
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_PLACES, .places = 2});
	assert_int_equal(sl_conc_take(a.hdr, &m, 100, &taken, &full, &seen), 0);
	assert_int_equal(sl_conc_take(a.hdr, &m, 100, &taken, &full, &seen), 0);
	assert_int_equal(sl_conc_take(a.hdr, &m, 100, &taken, &full, &seen), -EBUSY);
	grant(a.hdr, &(struct sl_grant){.flags = SL_LEASE_PLACES, .places = 100}); /* clamped to 6 */
	assert_int_equal(sl_limit_places(&sl_shm_section(a.hdr, 0)->spec, &sl_shm_section(a.hdr, 0)->state, NOW), 6);
	/* A lease past its validity (its daemon died): no places. */
	assert_int_equal(sl_limit_places(&sl_shm_section(a.hdr, 0)->spec, &sl_shm_section(a.hdr, 0)->state,
	                                 INT64_MAX / 4), 0);
	sl_shm_detach(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate_share),
		cmocka_unit_test(test_share_grows),
		cmocka_unit_test(test_grid),
		cmocka_unit_test(test_claims),
		cmocka_unit_test(test_window_chunk),
		cmocka_unit_test(test_places),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
