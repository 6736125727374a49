/* conc.c: concurrency places, all or nothing over several sections, given back by
 * put and by the reaping of a dead holder; a full holder table refusing cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/admit.h"
#include "sluice/conc.h"
#include "sluice/config.h"
#include "sluice/shm.h"

#include <errno.h>
#include <unistd.h>

static int dead_pid_777(int32_t pid)
{
	return pid == 777;
}

/* Concurrency places: all or nothing over several sections, given back by put and
 * by the reaping of a dead holder, a full holder table refusing cleanly. */
static void test_concurrency_places(void **state)
{
	static const char ini[] = "[a]\nmatch = 127.0.0.1\nconcurrency = 2\n"
	                          "[b]\nmatch = 127.0.0.1:80\nconcurrency = 1\n";
	static struct sl_config cfg;
	struct sl_dest d80 = {.family = AF_INET, .port = 80, .addr = {127, 0, 0, 1}};
	struct sl_dest d81 = {.family = AF_INET, .port = 81, .addr = {127, 0, 0, 1}};
	struct sl_match m80, m81;
	struct sl_shm a;
	uint64_t taken;
	uint32_t seen;
	int full;

	(void)state;
	assert_int_equal(sl_config_load_string(&cfg, "t.ini", ini), 0);
	assert_int_equal(sl_shm_create_anonymous(&a), 0);
	assert_int_equal(sl_shm_apply_config(a.hdr, &cfg, 1), 0);
	assert_int_equal(sl_admit_match(a.hdr, &d80, &m80, (int32_t)getpid()), 2);
	assert_int_equal(sl_admit_match(a.hdr, &d81, &m81, (int32_t)getpid()), 1);
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

	/* Given back: the futex word moves, so a sleeper would wake. */
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
	for (unsigned k = 0; k < SL_MAX_HOLDERS; k++)
		sl_shm_holders(a.hdr)[k] = (struct sl_holder){.pid = 5000 + (int32_t)k, .count = 1};
	assert_int_equal(sl_conc_take(a.hdr, &m81, 100, &taken, &full, &seen), -ENOSPC);
	assert_int_equal(sl_shm_section(a.hdr, 0)->state.conc_open, 0);
	sl_shm_detach(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrency_places),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
