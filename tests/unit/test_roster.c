/* roster.c: who is attached to a segment - tokens given, ended, stale ones known
 * for stale, a full roster refusing, liveness across pid namespaces, carried to a
 * larger segment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/roster.h"
#include "sluice/shm.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sl_shm_dims dims = SL_SHM_DIMS_DEFAULT;

/* The roster: tokens given, ended, stale ones known, a full roster refusing. */
static void test_roster(void **state)
{
	struct sl_shm_dims small = dims;
	struct sl_proc_id who = {.pid = 4242, .stamp = 7, .pidns = 0};
	struct sl_shm a, b;
	int32_t t, u;
	uint32_t nonce = 0, n;

	(void)state;
	small.procs = 4;
	assert_int_equal(sl_shm_create(&a, "unit", &small), 0);
	sl_shm_publish(a.hdr);
	assert_int_equal(sl_roster_each(a.hdr, NULL, NULL), 0);
	t = sl_roster_enter(a.hdr, &who, 0, 0, &nonce);
	assert_true(t > 0 && nonce != 0);
	assert_int_equal(sl_roster_nonce(a.hdr, t), nonce);
	/* Another pid namespace (pidns 0: nobody reads /proc for it): alive until its
	 * registrar ends it, whatever /proc says of pid 4242 here. */
	assert_int_equal(sl_roster_gone(a.hdr, t, 0), 0);
	assert_int_equal(sl_roster_gone(a.hdr, t, nonce), 0);
	assert_int_equal(sl_roster_gone(a.hdr, t, nonce ^ 1), 1);
	assert_int_equal(sl_roster_each(a.hdr, NULL, NULL), 1);
	assert_int_equal(sl_roster_leave(a.hdr, t), 1);
	assert_int_equal(sl_roster_leave(a.hdr, t), 0);
	assert_int_equal(sl_roster_gone(a.hdr, t, 0), 1);
	/* Every entry taken: the next is refused, and a token of an entry given to
	 * another since is stale. */
	for (int i = 0; i < 4; i++)
		assert_true(sl_roster_enter(a.hdr, &who, 0, 0, NULL) > 0);
	assert_int_equal(sl_roster_enter(a.hdr, &who, 0, 0, NULL), -ENOSPC);
	assert_int_equal(sl_roster_gone(a.hdr, t, 0), 1);
	assert_null(sl_roster_entry(a.hdr, t));
	/* Scribbled tokens name nothing. */
	assert_int_equal(sl_roster_gone(a.hdr, 0, 0), 1);
	assert_int_equal(sl_roster_gone(a.hdr, -5, 0), 1);
	assert_int_equal(sl_roster_gone(a.hdr, 0x7fffffff, 0), 1);
	/* A larger segment carries every token over. */
	u = sl_roster_enter(a.hdr, &who, 0, 0, NULL);
	assert_int_equal(u, -ENOSPC);
	sl_roster(a.hdr, &n);
	assert_int_equal(n, 4);
	assert_int_equal(sl_shm_create(&b, "unit", &dims), 0);
	sl_roster_carry(b.hdr, a.hdr);
	assert_int_equal(sl_roster_each(b.hdr, NULL, NULL), 4);
	assert_int_equal(sl_roster_gone(b.hdr, t, 0), 1);
	sl_shm_detach(&a);
	sl_shm_detach(&b);
}

/* How this process sees itself: its own pid, a stamp, and a pid namespace only
 * when its /proc numbers processes as that namespace does. */
static void test_me(void **state)
{
	struct sl_proc_id me = sl_roster_me();

	(void)state;
	assert_int_equal(me.pid, getpid());
	assert_true(me.stamp != 0);
	assert_true(me.pidns != 0);
}

/* A process of this pid namespace that dies is gone by /proc at once - zombie or
 * reaped - even with no registrar to end its entry; one of another namespace is
 * not judged by a pid that means nothing here. */
static void test_gone_by_proc(void **state)
{
	struct sl_shm a;
	struct sl_proc_id kid;
	int32_t t, other;
	int p[2], status;
	pid_t child;

	(void)state;
	assert_int_equal(sl_shm_create(&a, "unit", &dims), 0);
	sl_shm_publish(a.hdr);
	assert_int_equal(pipe(p), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		kid = sl_roster_me();
		t = sl_roster_enter(a.hdr, &kid, 0, 0, NULL);
		if (write(p[1], &t, sizeof(t)) != sizeof(t))
			_exit(1);
		pause();
		_exit(0);
	}
	assert_int_equal(read(p[0], &t, sizeof(t)), sizeof(t));
	assert_int_equal(sl_roster_gone(a.hdr, t, 0), 0);
	/* The same pid, said to be of another namespace: its registrar decides. */
	other = sl_roster_enter(a.hdr, &(struct sl_proc_id){.pid = child, .stamp = 1, .pidns = 42}, 0, 0, NULL);
	kill(child, SIGKILL);
	/* A zombie, not reaped yet: gone. */
	for (int i = 0; i < 200 && !sl_roster_gone(a.hdr, t, 0); i++)
		usleep(5000);
	assert_int_equal(sl_roster_gone(a.hdr, t, 0), 1);
	assert_int_equal(sl_roster_gone(a.hdr, other, 0), 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_int_equal(sl_roster_gone(a.hdr, t, 0), 1);
	close(p[0]);
	close(p[1]);
	sl_shm_detach(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roster),
		cmocka_unit_test(test_me),
		cmocka_unit_test(test_gone_by_proc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
