/* conc.c: concurrency places, all or nothing over several sections, given back by
 * put and by the reaping of a dead holder; a full holder table refusing cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/conc.h"
#include "sluice/pending.h"
#include "sluice/summary.h"
#include "sluice/config.h"
#include "sluice/shm.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

static int dead_pid_777(struct sl_shm_header *h, int32_t pid)
{
	(void)h;
	return pid == 777;
}

/* A private segment with the sections of `ini` in it. */
static void segment_with(struct sl_shm *a, const char *ini)
{
	static struct sl_config cfg; /* large */

	assert_int_equal(sl_config_load_string(&cfg, "t.ini", ini), 0);
	assert_int_equal(sl_shm_create_anonymous(a), 0);
	assert_int_equal(sl_shm_apply_config(a->hdr, &cfg, 1), 0);
}

/* Concurrency places: all or nothing over several sections, given back by put and
 * by the reaping of a dead holder, a full holder table refusing cleanly. */
static void test_concurrency_places(void **state)
{
	static const char ini[] = "[a]\nmatch = 127.0.0.1\nconcurrency = 2\n"
	                          "[b]\nmatch = 127.0.0.1:80\nconcurrency = 1\n";
	struct sl_dest d80 = {.family = AF_INET, .port = 80, .addr = {127, 0, 0, 1}};
	struct sl_dest d81 = {.family = AF_INET, .port = 81, .addr = {127, 0, 0, 1}};
	struct sl_match m80, m81;
	struct sl_shm a;
	uint64_t taken;
	uint32_t seen;
	int full;

	(void)state;
	segment_with(&a, ini);
	assert_int_equal(sl_match_sections(a.hdr, &d80, &m80, (int32_t)getpid()), 2);
	assert_int_equal(sl_match_sections(a.hdr, &d81, &m81, (int32_t)getpid()), 1);
	assert_int_equal(sl_conc_sections(a.hdr, &m80), 3);

	/* Port 80 takes a place in both; a second is refused by [b] and takes nothing
	 * from [a], so port 81 still finds one place left in [a]. */
	assert_int_equal(sl_conc_take(a.hdr, &m80, 100, &taken, &full, &seen), 0);
	assert_int_equal(taken, 3);
	assert_int_equal(sl_conc_take(a.hdr, &m80, 100, &taken, &full, &seen), -EBUSY);
	assert_int_equal(full, 1);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 1);
	assert_int_equal(sl_conc_take(a.hdr, &m81, 777, &taken, &full, &seen), 0);
	assert_int_equal(sl_conc_take(a.hdr, &m81, 100, &taken, &full, &seen), -EBUSY);
	assert_int_equal(full, 0);

	/* Given back: the futex word moves, so a sleeper would wake.  The match a
	 * released connection keeps has its mask cleared (it holds nothing more but
	 * its places): the places named by position are given back all the same. */
	m80.mask = 0;
	sl_conc_put(a.hdr, 3, &m80, 100);
	assert_int_not_equal(sl_shm_section(a.hdr, 0)->state.conc_futex, seen);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 1);
	/* pid 777 dies holding its place in [a]: the reaper gives it back. */
	assert_int_equal(sl_conc_reap_dead(a.hdr, 1, dead_pid_777), 1);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 0);

	/* Killed -9 half way through a give-back (its count already down, its holder
	 * entry not): the reaper's recount from the holder table keeps the live
	 * holder's place counted - subtracting the dead one's entry again would free
	 * a place that is in use.  And half way through a take (count up, no entry):
	 * the place leaked is given back. */
	assert_int_equal(sl_conc_take(a.hdr, &m81, 100, &taken, &full, &seen), 0);
	assert_int_equal(sl_conc_take(a.hdr, &m81, 777, &taken, &full, &seen), 0);
	sl_shm_section(a.hdr, 0)->state.conc_open--; /* 777's give-back, cut short */
	sl_conc_reap_dead(a.hdr, 1, dead_pid_777);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 1); /* 100's */
	sl_shm_section(a.hdr, 0)->state.conc_open++; /* a take cut short: no entry */
	sl_conc_reap_dead(a.hdr, 1, dead_pid_777);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 1);
	sl_conc_put(a.hdr, taken, &m81, 100);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 0);

	/* A holder table full of others: refused cleanly, nothing taken. */
	for (unsigned k = 0; k < sl_shm_nholders(a.hdr); k++)
		sl_shm_holders(a.hdr)[k] = (struct sl_holder){.owner = 5000 + (int32_t)k, .count = 1};
	assert_int_equal(sl_conc_take(a.hdr, &m81, 100, &taken, &full, &seen), -ENOSPC);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 0);
	sl_shm_detach(&a);
}

static int pid_over_3000(struct sl_shm_header *h, int32_t pid)
{
	(void)h;
	return pid > 3000;
}

/* 2,000 processes holding places in 3 sections each (6,000 entries, past the old
 * table of 1,024): all counted; given back in a scrambled order, every remaining
 * entry is still found (removals keep the probe runs whole); the dead are reaped. */
static void test_holder_table_many(void **state)
{
	static const char ini[] = "[a]\nmatch = 127.0.0.1\nconcurrency = 5000\n"
	                          "[b]\nmatch = 127.0.0.1\nconcurrency = 5000\n"
	                          "[c]\nmatch = 127.0.0.1\nconcurrency = 5000\n";
	struct sl_dest d = {.family = AF_INET, .port = 80, .addr = {127, 0, 0, 1}};
	struct sl_match m;
	struct sl_shm a;
	uint64_t taken;
	uint32_t seen;
	int full;

	(void)state;
	segment_with(&a, ini);
	assert_int_equal(sl_match_sections(a.hdr, &d, &m, 1), 3);
	for (int32_t pid = 2000; pid < 4000; pid++) {
		assert_int_equal(sl_conc_take(a.hdr, &m, pid, &taken, &full, &seen), 0);
		assert_int_equal(taken, 7);
	}
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(sl_shm_section(a.hdr, i)->state.conc_open, 2000);
	/* Give back the places of pids 2000..2999 in a scrambled order. */
	for (int32_t k = 0; k < 1000; k++)
		sl_conc_put(a.hdr, 7, &m, 2000 + (k * 379) % 1000);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(sl_shm_section(a.hdr, i)->state.conc_open, 1000);
	/* Those left are all found: one more take each counts on its own entry. */
	for (int32_t pid = 3000; pid < 4000; pid++)
		assert_int_equal(sl_conc_take(a.hdr, &m, pid, &taken, &full, &seen), 0);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 2000);
	/* 3001..3999 die: the reaper returns their 2 places in each of 3 sections. */
	assert_int_equal(sl_conc_reap_dead(a.hdr, 1, pid_over_3000), 999 * 2 * 3);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(sl_shm_section(a.hdr, i)->state.conc_open, 2);
	sl_conc_put(a.hdr, 7, &m, 3000);
	sl_conc_put(a.hdr, 7, &m, 3000);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(sl_shm_section(a.hdr, i)->state.conc_open, 0);
	for (unsigned k = 0; k < sl_shm_nholders(a.hdr); k++)
		assert_int_equal(sl_shm_holders(a.hdr)[k].owner, 0);
	sl_shm_detach(&a);
}

/* What sluiced does at its heartbeat: the section sealed again as it is. */
static void *reseal_later(void *arg)
{
	struct sl_section *sec = arg;

	sl_clock_sleep_until(sl_clock_mono_ns() + 60 * 1000000LL);
	sl_section_seal(sec);
	return NULL;
}

/* A give-back the segment cannot take now - a section whose seal is broken (it
 * may read as removed: the place would be dropped and its holder entry kept, so
 * counted open while its process lives), a segment marked moved - changes
 * nothing and says so; sl_pending_give_back tries again until sluiced has
 * written the section back, and the place is free then. */
static void test_give_back_never_lost(void **state)
{
	static const char ini[] = "[a]\nmatch = 127.0.0.1\nconcurrency = 1\n";
	struct sl_dest d = {.family = AF_INET, .port = 80, .addr = {127, 0, 0, 1}};
	struct sl_section *sec;
	struct sl_match m;
	struct sl_shm a;
	pthread_t t;
	uint64_t taken;
	uint32_t seen;
	int full;

	(void)state;
	segment_with(&a, ini);
	sec = sl_shm_section(a.hdr, 0);
	assert_int_equal(sl_match_sections(a.hdr, &d, &m, a.self), 1);
	assert_int_equal(sl_conc_take(a.hdr, &m, a.self, &taken, &full, &seen), 0);
	assert_int_equal(taken, 1);

	sec->serial ^= 0x40; /* a scribble: the section reads as another */
	assert_int_equal(sl_conc_put(a.hdr, taken, &m, a.self), -EBADMSG);
	assert_int_equal(sec->state.conc_open, 1);
	sec->serial ^= 0x40;
	__atomic_store_n(&a.hdr->moved, 1, __ATOMIC_RELEASE);
	assert_int_equal(sl_conc_put(a.hdr, taken, &m, a.self), -EXDEV);
	assert_int_equal(sec->state.conc_open, 1);
	__atomic_store_n(&a.hdr->moved, 0, __ATOMIC_RELEASE);

	/* Scribbled again; written back 60 ms later: the give-back waits for it. */
	sec->spec.name[0] ^= 1;
	sl_section_seal(sec); /* sluiced's write-back seals the section as it was: */
	sec->spec.name[0] ^= 1; /* here the name is right and the seal is not */
	assert_int_equal(pthread_create(&t, NULL, reseal_later, sec), 0);
	assert_int_equal(sl_pending_give_back(a.hdr, taken, &m, a.self, NULL, NULL), 0);
	pthread_join(t, NULL);
	assert_int_equal(sec->state.conc_open, 0);
	assert_int_equal(sl_conc_take(a.hdr, &m, a.self + 1, &taken, &full, &seen), 0);

	/* Never written back: it gives up after its patience, the place kept counted
	 * (the reaper frees it when its holder ends), never counted free. */
	sec->serial ^= 0x40;
	int64_t t0 = sl_clock_mono_ns();
	assert_int_equal(sl_pending_give_back(a.hdr, taken, &m, a.self + 1, NULL, NULL), -EBADMSG);
	assert_true(sl_clock_mono_ns() - t0 >= SL_GIVE_BACK_PATIENCE_NS);
	sec->serial ^= 0x40;
	assert_int_equal(sec->state.conc_open, 1);
	sl_shm_detach(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrency_places),
		cmocka_unit_test(test_give_back_never_lost),
		cmocka_unit_test(test_holder_table_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
