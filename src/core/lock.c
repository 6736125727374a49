/*
 * lock.c - the segment's lock word (lock.h; docs/design.md, "Invariants").
 */
#include "sluice/lock.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/sys.h"
#include "sluice/roster.h"
#include "sluice/shm.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

/* The lock word's 32-bit half that holds the pid: the futex word. */
static uint32_t *lock_futex(struct sl_shm_header *h)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint32_t *)&h->lock;
#else
	return (uint32_t *)&h->lock + 1;
#endif
}

/* The nonce a private segment's lock words carry: one process holds every lock
 * of its anonymous memory, so who among its threads holds one needs no proof (a
 * fork child's copy starts unlocked, init.c), and tests name holders freely. */
#define PRIVATE_NONCE 1u

static int is_private(const struct sl_shm_header *h)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	return v && v->private_;
}

/* The word this thread last locked a segment with, and that segment: its unlock
 * writes the same word without looking the nonce up again.  Initial-exec: the
 * core is linked into the shim, where a thread's first access must not allocate. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
	struct sl_shm_header *h;
	uint64_t word;
} held;

/* The word `self` writes: its token, and its registration's nonce above it. */
static uint64_t lock_value(struct sl_shm_header *h, int32_t self)
{
	uint32_t nonce = sl_roster_nonce(h, self);

	if (!nonce && self > 0 && is_private(h))
		nonce = PRIVATE_NONCE;
	return (uint64_t)nonce << 32 | (uint32_t)self;
}

static void futex_wait(uint32_t *word, uint32_t val, int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / SL_NS_PER_S, .tv_nsec = ns % SL_NS_PER_S};

	/* Shared futex: waiters live in different processes. */
	sl_sys(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* Whether the lock word `cur` names no owner proved alive (roster.h): its
 * registration ended or was never made, its nonce is not the word's (a stale or
 * scribbled word: a word no locker wrote, such as the value 1, once wedged every
 * caller), or - in the asker's own pid namespace - /proc says its process is gone.
 * The caller's own token is its own only with its own nonce: then another of its
 * threads holds the lock. */
static int holder_gone(struct sl_shm_header *h, uint64_t cur, int32_t self)
{
	int32_t owner = (int32_t)(cur & 0xffffffffu);
	uint32_t nonce = (uint32_t)(cur >> 32);

	if (cur == 0)
		return 0;
	if (nonce == 0)
		return 1;
	if (is_private(h))
		return 0;
	if (owner == self && self > 0)
		return nonce != sl_roster_nonce(h, self);
	return sl_roster_gone(h, owner, nonce);
}

/* How long a waiter waits before it asks whether the holder still lives, and
 * how often it asks again: a live holder keeps the lock for microseconds, while
 * asking reads /proc (three system calls), which every waiter of a busy lock
 * would otherwise do at each turn. */
#define LOCK_SUSPECT_NS SL_NS_PER_MS
/* How long a waiter spins before it sleeps on the futex.  A holder keeps the lock
 * for a few microseconds; a thread that takes it again and again (an event loop
 * opening 600 connections) lets it go for tens of microseconds between, and a
 * waiter asleep on the futex is woken too late to catch one of those gaps - the
 * shim's own release thread waited 17 ms that way.  Spinning this long catches
 * the next gap. */
#define LOCK_SPIN_NS (20 * SL_NS_PER_US)

int sl_shm_lock(struct sl_shm_header *h, int32_t self, int64_t timeout_ns)
{
	_Atomic uint64_t *word = A(&h->lock);
	uint64_t mine = lock_value(h, self);
	int64_t first = 0, asked = 0;
	int saved = errno;

	/* A process with no live registration holds nothing and takes nothing: the
	 * caller's fallback decides (pending.h), never an unowned lock. */
	if (sl_unlikely(mine >> 32 == 0))
		return -ETIMEDOUT;

	for (unsigned spin = 0;; spin++) {
		uint64_t cur = 0;
		int64_t now;

		if (atomic_compare_exchange_weak_explicit(word, &cur, mine, memory_order_acquire,
		                                          memory_order_relaxed)) {
			/* A segment another took over from: nothing may be decided here any
			 * more (its state went to the new one); the caller follows the name. */
			held.h = h;
			held.word = mine;
			if (sl_unlikely(atomic_load_explicit(A(&h->moved), memory_order_acquire))) {
				sl_shm_unlock(h, self);
				errno = saved;
				return -EXDEV;
			}
			return 0;
		}
		if (spin % 64 != 63) {
			sl_cpu_relax();
			continue;
		}
		now = sl_clock_mono_ns();
		if (!first)
			first = now;
		if (now - first < LOCK_SPIN_NS && cur != 0)
			continue;
		if (now - first >= LOCK_SUSPECT_NS && now - asked >= LOCK_SUSPECT_NS) {
			asked = now;
			if (holder_gone(h, cur, self)) {
				if (atomic_compare_exchange_strong_explicit(word, &cur, mine, memory_order_acquire,
				                                            memory_order_relaxed)) {
					held.h = h;
					held.word = mine;
					atomic_fetch_add_explicit(A(&h->lock_recoveries), 1, memory_order_relaxed);
					errno = saved;
					return 1;
				}
				continue;
			}
		}
		if (now - first > timeout_ns) {
			errno = saved;
			return -ETIMEDOUT;
		}
		if (cur == 0)
			continue;
		atomic_fetch_add_explicit(A(&h->lock_waiters), 1, memory_order_relaxed);
		futex_wait(lock_futex(h), (uint32_t)(cur & 0xffffffffu), LOCK_SUSPECT_NS);
		atomic_fetch_sub_explicit(A(&h->lock_waiters), 1, memory_order_relaxed);
	}
}

void sl_shm_unlock(struct sl_shm_header *h, int32_t self)
{
	uint64_t expect = held.h == h && (uint32_t)held.word == (uint32_t)self ? held.word : lock_value(h, self);
	int saved = errno;

	/* Only the holder releases; a lock taken over meanwhile stays with its new owner. */
	if (atomic_compare_exchange_strong_explicit(A(&h->lock), &expect, 0, memory_order_release,
	                                            memory_order_relaxed) &&
	    atomic_load_explicit(A(&h->lock_waiters), memory_order_relaxed) != 0)
		sl_sys(SYS_futex, lock_futex(h), FUTEX_WAKE, 1, NULL, NULL, 0);
	errno = saved;
}

int sl_shm_reap_lock(struct sl_shm_header *h)
{
	uint64_t cur = atomic_load_explicit(A(&h->lock), memory_order_relaxed);

	if (cur == 0 || !holder_gone(h, cur, 0))
		return 0;
	if (!atomic_compare_exchange_strong(A(&h->lock), &cur, 0))
		return 0;
	atomic_fetch_add_explicit(A(&h->lock_recoveries), 1, memory_order_relaxed);
	sl_sys(SYS_futex, lock_futex(h), FUTEX_WAKE, 1, NULL, NULL, 0);
	return 1;
}

