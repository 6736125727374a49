/* Critical sections (src/core/critical.c): blocking, then deferring. */
#include "sluice/critical.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>

static int flushed;

static void flush(void)
{
	flushed++;
}

static int blocked(int sig)
{
	sigset_t cur;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	return sigismember(&cur, sig);
}

/* Until the shim defers, a section blocks every signal and restores the mask. */
static void test_blocking(void **state)
{
	struct sl_critical a, b;

	(void)state;
	assert_false(blocked(SIGALRM));
	sl_critical_enter(&a);
	assert_true(blocked(SIGALRM));
	assert_int_equal(sl_critical_depth(), 1);
	sl_critical_enter(&b); /* nested */
	assert_int_equal(sl_critical_depth(), 2);
	sl_critical_leave(&b);
	assert_true(blocked(SIGALRM));
	sl_critical_leave(&a);
	assert_false(blocked(SIGALRM));
	assert_int_equal(sl_critical_depth(), 0);
}

/* Deferring: no mask is touched; what the trampoline kept back is flushed once,
 * when the outermost section is left, and not when nothing was kept. */
static void test_deferring(void **state)
{
	struct sl_critical a, b;

	(void)state;
	sl_critical_defer(flush);
	sl_critical_enter(&a);
	assert_false(blocked(SIGALRM));
	sl_critical_enter(&b);
	sl_critical_note_deferred();
	sl_critical_leave(&b);
	assert_int_equal(flushed, 0); /* still inside the outer one */
	sl_critical_leave(&a);
	assert_int_equal(flushed, 1);
	sl_critical_enter(&a);
	sl_critical_leave(&a);
	assert_int_equal(flushed, 1);
	sl_critical_defer(NULL); /* back to blocking, for the other tests */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocking),
		cmocka_unit_test(test_deferring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
