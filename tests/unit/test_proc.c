/* proc.c: telling a live process from a dead, zombie or reused pid. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/proc.h"

#include <unistd.h>

static void test_proc_check(void **state)
{
	int32_t me = (int32_t)getpid();

	(void)state;
	assert_int_equal(sl_proc_check(me, sl_proc_self_stamp(me)), SL_PROC_ALIVE);
	assert_int_equal(sl_proc_check(me, 0), SL_PROC_ALIVE);
	assert_int_equal(sl_proc_check(me, sl_proc_self_stamp(me) + 1), SL_PROC_GONE);
	assert_int_equal(sl_proc_check(0, 0), SL_PROC_GONE);
	assert_int_equal(sl_proc_check(-5, 0), SL_PROC_GONE);
	assert_int_equal(sl_proc_check(0x3fffffff, 0), SL_PROC_GONE); /* beyond pid_max */
	assert_true(sl_proc_self_stamp(me) != 0);
}

/* An owner is proved only by its own stamp: none, another, no process, all say
 * gone (a lock word that says "pid 1, no stamp" once wedged every caller). */
static void test_proc_owner(void **state)
{
	int32_t me = (int32_t)getpid();

	(void)state;
	assert_int_equal(sl_proc_owner(me, sl_proc_self_stamp(me)), SL_PROC_ALIVE);
	assert_int_equal(sl_proc_owner(me, 0), SL_PROC_GONE);
	assert_int_equal(sl_proc_owner(1, 0), SL_PROC_GONE);
	assert_int_equal(sl_proc_owner(me, sl_proc_self_stamp(me) ^ 0x80000000u), SL_PROC_GONE);
	assert_int_equal(sl_proc_owner(0x3fffffff, 7), SL_PROC_GONE);
	assert_int_equal(sl_proc_owner(0, 7), SL_PROC_GONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proc_check),
		cmocka_unit_test(test_proc_owner),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
