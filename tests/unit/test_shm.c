/* The shared segment: creation and re-attachment, validation of untrusted segments,
 * and a lock that survives its holder being killed -9 inside the critical section. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/config.h"
#include "sluice/proc.h"
#include "sluice/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

/* The start stamp of another process, as proc.c reads it. */
static uint32_t stamp_of(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	unsigned long long start = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	p = strrchr(buf, ')') + 2;
	for (int field = 3; field < 22; field++)
		p = strchr(p, ' ') + 1;
	start = strtoull(p, NULL, 10);
	return (uint32_t)start;
}

static char name[64];

static int setup(void **state)
{
	(void)state;
	snprintf(name, sizeof(name), "/sluice-unit-%d", (int)getpid());
	sl_shm_remove(name);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sl_shm_remove(name);
	return 0;
}

static void test_create_and_reattach(void **state)
{
	struct sl_shm a, b, c;
	int reattached = -1;

	(void)state;
	assert_int_equal(sl_shm_open_or_create(&a, name, 0600, &reattached), 0);
	assert_int_equal(reattached, 0);
	/* Made, not yet published: no program attaches it (and matches against its
	 * empty tables) until the config is in. */
	assert_int_equal(sl_shm_validate(a.hdr, a.size), -EPROTO);
	assert_int_equal(sl_shm_attach(&c, name, 1), -EPROTO);
	sl_shm_publish(a.hdr);
	assert_int_equal(sl_shm_validate(a.hdr, a.size), 0);
	sl_shm_section(a.hdr, 3)->state.tat_ns = 12345;
	sl_shm_detach(&a);
	/* A restarted daemon finds its state where it left it. */
	assert_int_equal(sl_shm_open_or_create(&b, name, 0600, &reattached), 0);
	assert_int_equal(reattached, 1);
	assert_int_equal(sl_shm_section(b.hdr, 3)->state.tat_ns, 12345);
	/* A shim attaches the same memory. */
	assert_int_equal(sl_shm_attach(&c, name, 1), 0);
	assert_ptr_not_equal(c.hdr, b.hdr);
	assert_int_equal(sl_shm_section(c.hdr, 3)->state.tat_ns, 12345);
	sl_shm_detach(&b);
	sl_shm_detach(&c);
}

/* The size of a segment of default tables. */
static size_t default_size(void)
{
	struct sl_shm_dims d = {64, 1024, SL_HOLDERS_DEFAULT, SL_KEYS_DEFAULT, 1};
	struct sl_shm_layout l;

	assert_int_equal(sl_shm_layout(&d, &l), 0);
	return l.size;
}

static void test_bounds(void **state)
{
	struct sl_shm a;

	(void)state;
	assert_int_equal(sl_shm_create_anonymous(&a), 0);
	assert_non_null(sl_shm_section(a.hdr, sl_shm_dims_of(a.hdr).sections - 1));
	assert_null(sl_shm_section(a.hdr, sl_shm_dims_of(a.hdr).sections));
	assert_non_null(sl_shm_pattern(a.hdr, sl_shm_dims_of(a.hdr).patterns - 1));
	assert_null(sl_shm_pattern(a.hdr, sl_shm_dims_of(a.hdr).patterns));
	/* A scribbled size changes nothing of what this process indexes. */
	a.hdr->max_sections = 1u << 30;
	a.hdr->max_patterns = 1u << 30;
	assert_null(sl_shm_section(a.hdr, 1000));
	assert_null(sl_shm_pattern(a.hdr, 100000));
	assert_null(sl_shm_section(a.hdr, ~0u));
	sl_shm_detach(&a);
}

/* What truncating a POSIX shm file did to every attached program (SIGBUS) has no
 * counterpart: a segment's size is fixed, and one marked for removal stays mapped
 * for those attached while its name is free for a new daemon. */
static void test_segment_cannot_shrink(void **state)
{
	struct sl_shm a, b, c;
	struct shmid_ds ds;
	int reattached, id;

	(void)state;
	assert_int_equal(sl_shm_open_or_create(&a, name, 0600, &reattached), 0);
	sl_shm_publish(a.hdr);
	id = shmget(sl_shm_key(name), 0, 0);
	assert_true(id >= 0);
	assert_int_equal(shmctl(id, IPC_STAT, &ds), 0);
	assert_int_equal(ds.shm_segsz, default_size());
	/* Asking for the segment at a larger size fails: sizes never change. */
	assert_int_equal(shmget(sl_shm_key(name), default_size() * 2, 0), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(sl_shm_attach(&b, name, 1), 0);
	assert_int_equal(sl_shm_remove(name), 0);
	/* Still mapped and whole, to its last byte, for both. */
	((volatile char *)b.hdr)[default_size() - 1] = 7;
	assert_int_equal(((volatile char *)a.hdr)[default_size() - 1], 7);
	assert_int_equal(sl_shm_attach(&c, name, 1), -ENOENT);
	/* The name is free: a new daemon starts a new segment. */
	assert_int_equal(sl_shm_open_or_create(&c, name, 0600, &reattached), 0);
	assert_int_equal(reattached, 0);
	sl_shm_detach(&a);
	sl_shm_detach(&b);
	sl_shm_detach(&c);
}

/* A key that some other program's segment already uses is not taken from it. */
static void test_foreign_segment_kept(void **state)
{
	struct sl_shm a;
	int reattached, id;

	(void)state;
	sl_shm_remove(name);
	id = shmget(sl_shm_key(name), 4096, IPC_CREAT | IPC_EXCL | 0600);
	assert_true(id >= 0);
	assert_int_equal(sl_shm_open_or_create(&a, name, 0600, &reattached), -EEXIST);
	assert_int_equal(shmget(sl_shm_key(name), 0, 0), id);
	/* One of ours under an older layout (another size) is replaced. */
	{
		uint32_t *p = shmat(id, NULL, 0);

		assert_true(p != (void *)-1);
		*p = SL_SHM_MAGIC;
		shmdt(p);
	}
	assert_int_equal(sl_shm_open_or_create(&a, name, 0600, &reattached), 0);
	assert_int_equal(reattached, 0);
	assert_int_not_equal(shmget(sl_shm_key(name), 0, 0), id);
	sl_shm_detach(&a);
}

/* Segments a shim must refuse (and so pass traffic through). */
static void test_untrusted_segments(void **state)
{
	struct sl_shm a, s;
	int id;

	(void)state;
	assert_int_equal(sl_shm_attach(&s, "/sluice-does-not-exist", 1), -ENOENT);
	assert_int_equal(sl_shm_attach(&s, "no-slash/../x", 1) < 0, 1);

	/* Too small: rejected before attaching, so nothing is read past its end. */
	sl_shm_remove(name);
	id = shmget(sl_shm_key(name), 100, IPC_CREAT | IPC_EXCL | 0600);
	assert_true(id >= 0);
	assert_int_equal(sl_shm_attach(&s, name, 1), -EPROTO);
	assert_int_equal(shmctl(id, IPC_RMID, NULL), 0);
	/* Right size, all zero: not initialised. */
	id = shmget(sl_shm_key(name), default_size(), IPC_CREAT | IPC_EXCL | 0600);
	assert_true(id >= 0);
	assert_int_equal(sl_shm_attach(&s, name, 1), -EPROTO);
	assert_int_equal(shmctl(id, IPC_RMID, NULL), 0);

	assert_int_equal(sl_shm_create_anonymous(&a), 0);
	assert_int_equal(sl_shm_validate(a.hdr, a.size), 0);
	assert_int_equal(sl_shm_validate(a.hdr, 10), -EINVAL);
	assert_int_equal(sl_shm_validate(NULL, a.size), -EINVAL);
	a.hdr->major = SL_SHM_MAJOR + 1;
	assert_int_equal(sl_shm_validate(a.hdr, a.size), -EPROTO);
	a.hdr->major = SL_SHM_MAJOR;
	a.hdr->section_size++;
	assert_int_equal(sl_shm_validate(a.hdr, a.size), -EPROTO);
	a.hdr->section_size--;
	a.hdr->magic ^= 1;
	assert_int_equal(sl_shm_validate(a.hdr, a.size), -EPROTO);
	a.hdr->magic ^= 1;
	assert_int_equal(sl_shm_validate(a.hdr, a.size), 0);

	/* Scribbled sections: counts clamped, garbage patterns never match or crash. */
	{
		struct sl_section *sec = sl_shm_section(a.hdr, 0);
		struct sl_dest d = {.family = AF_INET, .port = 80};
		struct sl_match m;

		const struct sl_shm_view *v = sl_shm_view(a.hdr);

		memset(sec, 0xa5, sizeof(*sec));
		sec->in_use = 1;
		sec->spec.npatterns = 0xffffffff;
		a.hdr->slots_used = 0xffffffff; /* clamped to the section table */
		assert_true(sl_match_sections(a.hdr, &d, &m, (int32_t)getpid()) >= 0);
		/* A scribbled index: every slot taken, runs and refs out of range, every
		 * kind and prefix length said to be there.  Bounded, and no crash. */
		memset(sl_shm_index_slots(a.hdr, v), 0xa5, (size_t)v->index_slots * sizeof(struct sl_index_slot));
		memset(sl_shm_refs(a.hdr, v), 0xff, (size_t)v->dims.patterns * sizeof(uint32_t));
		memset(sl_shm_pattern(a.hdr, 0), 0x5a, (size_t)v->dims.patterns * sizeof(struct sl_pattern));
		a.hdr->index_run = 0xffffffff;
		a.hdr->index_kinds = 0xffffffff;
		a.hdr->index_v4_lens = ~0ull;
		d.name = "a.b.c.example";
		d.name_len = strlen(d.name);
		assert_true(sl_match_sections(a.hdr, &d, &m, (int32_t)getpid()) >= 0);
		d.family = AF_INET6;
		memset(a.hdr->index_v6_lens, 0xff, sizeof(a.hdr->index_v6_lens));
		assert_true(sl_match_sections(a.hdr, &d, &m, (int32_t)getpid()) >= 0);
	}
	sl_shm_detach(&a);
}

static void test_lock_basic(void **state)
{
	struct sl_shm a;
	int32_t me = (int32_t)getpid();

	(void)state;
	assert_int_equal(sl_shm_create_anonymous(&a), 0);
	assert_int_equal(sl_shm_lock(a.hdr, me, SL_NS_PER_S), 0);
	/* pid and start stamp, in one word */
	assert_true(a.hdr->lock == ((uint64_t)sl_proc_self_stamp(me) << 32 | (uint32_t)me));
	sl_shm_unlock(a.hdr, me);
	assert_true(a.hdr->lock == 0);
	/* Held by a live process (our parent, with its own stamp): times out, no hang. */
	a.hdr->lock = (uint64_t)stamp_of(getppid()) << 32 | (uint32_t)getppid();
	assert_int_equal(sl_shm_lock(a.hdr, me, 20 * SL_NS_PER_MS), -ETIMEDOUT);
	assert_int_equal(a.hdr->lock_recoveries, 0);
	sl_shm_detach(&a);
}

/* F6: a word naming a live pid with another stamp - a pid reused since, or a
 * scribble - is known not to be the holder: taken over at once, and the daemon's
 * reaper frees it too. */
static void test_lock_reused_pid(void **state)
{
	struct sl_shm a;
	int32_t me = (int32_t)getpid();
	int64_t t0;

	(void)state;
	assert_int_equal(sl_shm_create_anonymous(&a), 0);
	a.hdr->lock = (uint64_t)(stamp_of(getppid()) + 1) << 32 | (uint32_t)getppid();
	t0 = sl_clock_mono_ns();
	assert_int_equal(sl_shm_lock(a.hdr, me, SL_NS_PER_S), 1);
	assert_true(sl_clock_mono_ns() - t0 < 100 * SL_NS_PER_MS);
	sl_shm_unlock(a.hdr, me);
	a.hdr->lock = (uint64_t)12345 << 32 | 1; /* pid 1 lives, but was not started then */
	assert_int_equal(sl_shm_reap_lock(a.hdr), 1);
	assert_true(a.hdr->lock == 0);
	assert_int_equal(a.hdr->lock_recoveries, 2);
	/* No stamp at all (the value 1: pid 1, stamp 0): nothing proves an owner. */
	a.hdr->lock = 1;
	t0 = sl_clock_mono_ns();
	assert_int_equal(sl_shm_lock(a.hdr, me, SL_NS_PER_S), 1);
	assert_true(sl_clock_mono_ns() - t0 < 100 * SL_NS_PER_MS);
	sl_shm_unlock(a.hdr, me);
	a.hdr->lock = 1;
	assert_int_equal(sl_shm_reap_lock(a.hdr), 1);
	/* Our own pid with a stamp not ours: a scribble, not another of our threads. */
	a.hdr->lock = (uint64_t)(sl_proc_self_stamp(me) ^ 1) << 32 | (uint32_t)me;
	assert_int_equal(sl_shm_lock(a.hdr, me, SL_NS_PER_S), 1);
	sl_shm_unlock(a.hdr, me);
	assert_int_equal(a.hdr->lock_recoveries, 5);
	sl_shm_detach(&a);
}

/* A child that takes a's lock and stays inside the critical section until killed;
 * returns once it holds the lock. */
static pid_t fork_lock_holder(struct sl_shm *a)
{
	int pipefd[2];
	pid_t child;
	char c;

	assert_int_equal(pipe(pipefd), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		if (sl_shm_lock(a->hdr, (int32_t)getpid(), SL_NS_PER_S) != 0)
			_exit(1);
		if (write(pipefd[1], "L", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	assert_int_equal(read(pipefd[0], &c, 1), 1);
	close(pipefd[0]);
	close(pipefd[1]);
	return child;
}

/* F2: a holder killed -9 and not reaped (a zombie) passes kill(pid, 0), yet holds
 * nothing: its lock is taken over at once, before its parent reaps it. */
static void test_lock_zombie_holder(void **state)
{
	struct sl_shm a;
	int reattached;
	pid_t child;
	int64_t t0;

	(void)state;
	assert_int_equal(sl_shm_open_or_create(&a, name, 0600, &reattached), 0);
	child = fork_lock_holder(&a);
	kill(child, SIGKILL);
	/* Not reaped: wait until it is a zombie, as `ps` would show it. */
	for (int i = 0; i < 200 && sl_proc_check(child, 0) != SL_PROC_GONE; i++)
		usleep(5000);
	assert_int_equal(kill(child, 0), 0); /* the old check would call it alive */
	assert_int_equal(sl_proc_check(child, 0), SL_PROC_GONE);
	t0 = sl_clock_mono_ns();
	assert_int_equal(sl_shm_lock(a.hdr, (int32_t)getpid(), 2 * SL_NS_PER_S), 1);
	assert_true(sl_clock_mono_ns() - t0 < 100 * SL_NS_PER_MS);
	sl_shm_unlock(a.hdr, (int32_t)getpid());
	waitpid(child, NULL, 0);
	sl_shm_detach(&a);
}

/* A child takes the lock, signals, and is killed -9 inside the critical section; the
 * parent must still get the lock, promptly, and see the recovery counted. */
static void test_lock_holder_killed(void **state)
{
	uint64_t recovered;
	struct sl_shm a;
	int reattached;
	pid_t child;

	(void)state;
	assert_int_equal(sl_shm_open_or_create(&a, name, 0600, &reattached), 0);
	child = fork_lock_holder(&a);
	assert_int_equal((uint32_t)a.hdr->lock, (uint32_t)child);
	recovered = a.hdr->lock_recoveries;
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	assert_int_equal(sl_shm_lock(a.hdr, (int32_t)getpid(), SL_NS_PER_S), 1);
	assert_int_equal(a.hdr->lock_recoveries, recovered + 1);
	sl_shm_unlock(a.hdr, (int32_t)getpid());
	/* The daemon's reaper does the same without taking the lock itself. */
	a.hdr->lock = (uint32_t)child;
	assert_int_equal(sl_shm_reap_lock(a.hdr), 1);
	assert_true(a.hdr->lock == 0);
	sl_shm_detach(&a);
}

/* Two processes hammer one counter under the lock: no update is lost. */
static void test_lock_mutual_exclusion(void **state)
{
	struct sl_shm a;
	int reattached, status;
	pid_t child;
	uint64_t *counter;

	(void)state;
	assert_int_equal(sl_shm_open_or_create(&a, name, 0600, &reattached), 0);
	counter = &sl_shm_section(a.hdr, 0)->state.admitted;
	*counter = 0;
	child = fork();
	assert_true(child >= 0);
	for (int i = 0; i < 100000; i++) {
		int32_t me = (int32_t)getpid();

		if (sl_shm_lock(a.hdr, me, SL_NS_PER_S) < 0)
			_exit(3);
		(*(volatile uint64_t *)counter)++;
		sl_shm_unlock(a.hdr, me);
	}
	if (child == 0)
		_exit(0);
	waitpid(child, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(*counter, 200000);
	sl_shm_detach(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_and_reattach),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_untrusted_segments),
		cmocka_unit_test(test_segment_cannot_shrink),
		cmocka_unit_test(test_foreign_segment_kept),
		cmocka_unit_test(test_lock_basic),
		cmocka_unit_test(test_lock_reused_pid),
		cmocka_unit_test(test_lock_zombie_holder),
		cmocka_unit_test(test_lock_holder_killed),
		cmocka_unit_test(test_lock_mutual_exclusion),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
