/* The shared segment: a sealed memfd made and handed over, validation of what is
 * handed over, the roster of attached processes, and a lock that survives its
 * holder being killed -9 inside the critical section. */
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
#include "sluice/roster.h"
#include "sluice/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

static struct sl_shm_dims dims = SL_SHM_DIMS_DEFAULT;

/* This process entered in a's roster, as the keeper enters an attaching one. */
static int32_t enter_me(struct sl_shm *a)
{
	struct sl_proc_id me = sl_roster_me();
	int32_t t = sl_roster_enter(a->hdr, &me, me.pid, me.stamp, NULL);

	assert_true(t > 0);
	return t;
}

/* A sealed memfd segment, published, this process entered in its roster. */
static void shared_segment(struct sl_shm *a)
{
	assert_int_equal(sl_shm_create(a, "unit", &dims), 0);
	sl_shm_publish(a->hdr);
	a->self = enter_me(a);
}

static void test_create_and_map(void **state)
{
	struct sl_shm a, c;

	(void)state;
	assert_int_equal(sl_shm_create(&a, "unit", &dims), 0);
	assert_true(a.fd >= 0);
	assert_true(a.hdr->segment_id != 0);
	/* Made, not yet published: no program maps it (and matches against its
	 * empty tables) until the config is in. */
	assert_int_equal(sl_shm_validate(a.hdr, a.size), -EPROTO);
	assert_int_equal(sl_shm_map_fd(&c, a.fd, 1, 0), -EPROTO);
	sl_shm_publish(a.hdr);
	assert_int_equal(sl_shm_validate(a.hdr, a.size), 0);
	sl_shm_section(a.hdr, 3)->state.tat_ns = 12345;
	/* Handed over, it maps the same memory: what a keeper's client gets. */
	assert_int_equal(sl_shm_map_fd(&c, a.fd, 1, 0), 0);
	assert_ptr_not_equal(c.hdr, a.hdr);
	assert_int_equal(c.fd, -1);
	assert_true(c.ino == a.ino && c.ino != 0);
	assert_int_equal(sl_shm_section(c.hdr, 3)->state.tat_ns, 12345);
	sl_shm_section(c.hdr, 4)->state.tat_ns = 777;
	assert_int_equal(sl_shm_section(a.hdr, 4)->state.tat_ns, 777);
	sl_shm_detach(&c);
	sl_shm_detach(&a);
}

/* The size of a segment of default tables. */
static size_t default_size(void)
{
	struct sl_shm_layout l;

	assert_int_equal(sl_shm_layout(&dims, &l), 0);
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

/* What truncating a shared file did to every attached program (SIGBUS) cannot be
 * done to a segment: whoever is handed its memfd can write it, never resize it,
 * nor take the seals off. */
static void test_segment_cannot_shrink(void **state)
{
	struct sl_shm a, b;

	(void)state;
	shared_segment(&a);
	assert_int_equal(sl_shm_map_fd(&b, a.fd, 1, 0), 0);
	assert_int_equal(ftruncate(a.fd, 4096), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(a.fd, (off_t)default_size() * 2), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fcntl(a.fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);
	/* Still mapped and whole, to its last byte, for both. */
	((volatile char *)b.hdr)[default_size() - 1] = 7;
	assert_int_equal(((volatile char *)a.hdr)[default_size() - 1], 7);
	sl_shm_detach(&a);
	sl_shm_detach(&b);
}

/* What a shim must refuse when it is handed something (and so not shape with it). */
static void test_untrusted_fds(void **state)
{
	struct sl_shm s;
	char path[] = "/tmp/sluice-unit-XXXXXX";
	int fd, p[2];

	(void)state;
	assert_int_equal(sl_shm_map_fd(&s, -1, 1, 0), -EBADF);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(sl_shm_map_fd(&s, p[0], 1, 0), -EBADF);
	close(p[0]);
	close(p[1]);
	/* A plain file, of the right size: anyone writing it could truncate it. */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, (off_t)default_size()), 0);
	assert_int_equal(sl_shm_map_fd(&s, fd, 1, 0), -EPERM);
	close(fd);
	/* A memfd not sealed: the same. */
	fd = memfd_create("x", MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)default_size()), 0);
	assert_int_equal(sl_shm_map_fd(&s, fd, 1, 0), -EPERM);
	/* Sealed, but all zero: not a segment. */
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	assert_int_equal(sl_shm_map_fd(&s, fd, 1, 0), -EPROTO);
	close(fd);
	/* Sealed and too small: refused before a byte is read past its end. */
	fd = memfd_create("x", MFD_ALLOW_SEALING);
	assert_int_equal(ftruncate(fd, 100), 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	assert_int_equal(sl_shm_map_fd(&s, fd, 1, 0), -EPROTO);
	close(fd);
}

/* Segments a shim must refuse (and so pass traffic through). */
static void test_untrusted_segments(void **state)
{
	struct sl_shm a;

	(void)state;
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
		assert_true(sl_match_sections(a.hdr, &d, &m, a.self) >= 0);
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
		assert_true(sl_match_sections(a.hdr, &d, &m, a.self) >= 0);
		d.family = AF_INET6;
		memset(a.hdr->index_v6_lens, 0xff, sizeof(a.hdr->index_v6_lens));
		assert_true(sl_match_sections(a.hdr, &d, &m, a.self) >= 0);
	}
	sl_shm_detach(&a);
}

static void test_lock_basic(void **state)
{
	struct sl_shm a;
	struct sl_proc_id parent = {.pid = (int32_t)getppid(), .pidns = sl_roster_me().pidns};
	int32_t him;
	uint32_t nonce;

	(void)state;
	shared_segment(&a);
	assert_int_equal(sl_shm_lock(a.hdr, a.self, SL_NS_PER_S), 0);
	/* token and nonce, in one word */
	assert_true(a.hdr->lock == ((uint64_t)sl_roster_nonce(a.hdr, a.self) << 32 | (uint32_t)a.self));
	sl_shm_unlock(a.hdr, a.self);
	assert_true(a.hdr->lock == 0);
	/* Held by a live process (our parent, with its own stamp): times out, no hang. */
	parent.stamp = stamp_of(getppid());
	him = sl_roster_enter(a.hdr, &parent, parent.pid, parent.stamp, &nonce);
	a.hdr->lock = (uint64_t)nonce << 32 | (uint32_t)him;
	assert_int_equal(sl_shm_lock(a.hdr, a.self, 20 * SL_NS_PER_MS), -ETIMEDOUT);
	assert_int_equal(a.hdr->lock_recoveries, 0);
	/* A process never entered takes nothing: refused at once, as undecided. */
	a.hdr->lock = 0;
	assert_int_equal(sl_shm_lock(a.hdr, 99999, SL_NS_PER_S), -ETIMEDOUT);
	assert_true(a.hdr->lock == 0);
	sl_shm_detach(&a);
}

/* Words no live registration wrote - an ended one (its process gone), another
 * nonce (a scribble), no nonce at all (the value 1 once wedged every caller), our
 * own token with a nonce not ours - are taken over at once, and the daemon's
 * reaper frees them too. */
static void test_lock_stale_words(void **state)
{
	struct sl_shm a;
	struct sl_proc_id other = {.pid = 4242};
	int32_t him;
	uint32_t nonce;
	int64_t t0;

	(void)state;
	shared_segment(&a);
	him = sl_roster_enter(a.hdr, &other, 0, 0, &nonce);
	a.hdr->lock = (uint64_t)nonce << 32 | (uint32_t)him;
	sl_roster_leave(a.hdr, him); /* its registrar saw it exit */
	t0 = sl_clock_mono_ns();
	assert_int_equal(sl_shm_lock(a.hdr, a.self, SL_NS_PER_S), 1);
	assert_true(sl_clock_mono_ns() - t0 < 100 * SL_NS_PER_MS);
	sl_shm_unlock(a.hdr, a.self);
	him = sl_roster_enter(a.hdr, &other, 0, 0, &nonce);
	a.hdr->lock = (uint64_t)(nonce ^ 0x5a5a) << 32 | (uint32_t)him;
	assert_int_equal(sl_shm_reap_lock(a.hdr), 1);
	assert_true(a.hdr->lock == 0);
	a.hdr->lock = 1;
	t0 = sl_clock_mono_ns();
	assert_int_equal(sl_shm_lock(a.hdr, a.self, SL_NS_PER_S), 1);
	assert_true(sl_clock_mono_ns() - t0 < 100 * SL_NS_PER_MS);
	sl_shm_unlock(a.hdr, a.self);
	a.hdr->lock = (uint64_t)(sl_roster_nonce(a.hdr, a.self) ^ 1) << 32 | (uint32_t)a.self;
	assert_int_equal(sl_shm_lock(a.hdr, a.self, SL_NS_PER_S), 1);
	sl_shm_unlock(a.hdr, a.self);
	assert_int_equal(a.hdr->lock_recoveries, 4);
	/* A live holder of another pid namespace (its pid means nothing here) keeps
	 * the lock until its registrar ends it. */
	him = sl_roster_enter(a.hdr, &(struct sl_proc_id){.pid = 2, .pidns = 1}, 0, 0, &nonce);
	a.hdr->lock = (uint64_t)nonce << 32 | (uint32_t)him;
	assert_int_equal(sl_shm_lock(a.hdr, a.self, 20 * SL_NS_PER_MS), -ETIMEDOUT);
	assert_int_equal(sl_shm_reap_lock(a.hdr), 0);
	sl_roster_leave(a.hdr, him);
	assert_int_equal(sl_shm_lock(a.hdr, a.self, SL_NS_PER_S), 1);
	sl_shm_unlock(a.hdr, a.self);
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
		if (sl_shm_lock(a->hdr, enter_me(a), SL_NS_PER_S) != 0)
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
	pid_t child;
	int64_t t0;

	(void)state;
	shared_segment(&a);
	child = fork_lock_holder(&a);
	kill(child, SIGKILL);
	/* Not reaped: wait until it is a zombie, as `ps` would show it. */
	for (int i = 0; i < 200 && sl_proc_check(child, 0) != SL_PROC_GONE; i++)
		usleep(5000);
	assert_int_equal(kill(child, 0), 0); /* the old check would call it alive */
	assert_int_equal(sl_proc_check(child, 0), SL_PROC_GONE);
	t0 = sl_clock_mono_ns();
	assert_int_equal(sl_shm_lock(a.hdr, a.self, 2 * SL_NS_PER_S), 1);
	assert_true(sl_clock_mono_ns() - t0 < 100 * SL_NS_PER_MS);
	sl_shm_unlock(a.hdr, a.self);
	waitpid(child, NULL, 0);
	sl_shm_detach(&a);
}

/* A child takes the lock, signals, and is killed -9 inside the critical section; the
 * parent must still get the lock, promptly, and see the recovery counted. */
static void test_lock_holder_killed(void **state)
{
	uint64_t recovered, word;
	struct sl_shm a;
	pid_t child;

	(void)state;
	shared_segment(&a);
	child = fork_lock_holder(&a);
	word = a.hdr->lock;
	assert_int_equal(sl_roster_entry(a.hdr, (int32_t)(uint32_t)word)->pid, child);
	recovered = a.hdr->lock_recoveries;
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	assert_int_equal(sl_shm_lock(a.hdr, a.self, SL_NS_PER_S), 1);
	assert_int_equal(a.hdr->lock_recoveries, recovered + 1);
	sl_shm_unlock(a.hdr, a.self);
	/* The daemon's reaper does the same without taking the lock itself. */
	a.hdr->lock = word;
	assert_int_equal(sl_shm_reap_lock(a.hdr), 1);
	assert_true(a.hdr->lock == 0);
	sl_shm_detach(&a);
}

/* Two processes hammer one counter under the lock: no update is lost. */
static void test_lock_mutual_exclusion(void **state)
{
	struct sl_shm a;
	int status;
	pid_t child;
	uint64_t *counter;
	int32_t me;

	(void)state;
	shared_segment(&a);
	counter = &sl_shm_section(a.hdr, 0)->state.admitted;
	*counter = 0;
	child = fork();
	assert_true(child >= 0);
	me = child == 0 ? enter_me(&a) : a.self;
	for (int i = 0; i < 100000; i++) {
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
		cmocka_unit_test(test_create_and_map),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_untrusted_fds),
		cmocka_unit_test(test_untrusted_segments),
		cmocka_unit_test(test_segment_cannot_shrink),
		cmocka_unit_test(test_lock_basic),
		cmocka_unit_test(test_lock_stale_words),
		cmocka_unit_test(test_lock_zombie_holder),
		cmocka_unit_test(test_lock_holder_killed),
		cmocka_unit_test(test_lock_mutual_exclusion),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
