/*
 * The kicker: one thread of the shim's own, started with the first socket a
 * non-blocking program has to wait for, that acts on each held socket at its
 * release instant whatever the program's own loop is doing (docs/design.md,
 * "Deferred connects on time").
 *
 *  - a deferred connect (DEFERRED) is made at its slot, inside its release, as a
 *    program thread's hook would make it - but on time: an event loop busy with
 *    other sockets (node answering 600 responses) reached its next epoll_wait up
 *    to milliseconds after the slot, and every release of a backlog inherits the
 *    lateness of the one before it (the release check allows no catch-up);
 *  - a held write's masked registrations (WAITING, EPOLLOUT taken out) are put
 *    back at its slot, so the program's epoll_wait wakes then to make the write.
 *
 * Records due at some instant sit in a binary min-heap of (instant, record index),
 * one entry per record at a time (sl_record.kick_at names the instant of its live
 * entry; an entry whose instant differs is stale and dropped when it comes up).
 * The thread sleeps on a futex with the heap's earliest instant as its absolute
 * deadline, less KICK_SPIN_NS, and spins the rest.  Every signal is blocked on it, so the
 * program's handlers never run there.  The program's own hooks go on kicking and
 * unmasking as before: whoever comes first under the record's lock does it.
 *
 * The program owns the descriptor and may close it at any moment from another
 * thread; so right before the connect, under the record's lock, the thread checks
 * that the descriptor is still the socket it was when the connect was deferred
 * (its device and inode, noted then).  It keeps no descriptor of its own.  A fork child starts with
 * no kicker and an empty heap: the records it inherits are its parent's.
 *
 * Claims (docs/design.md, "Claims"): a record waiting for a claim (its pending's
 * claim_wait) is queued at its look again, which needs no precision: no spin
 * before it (`coarse`).  The thread also sleeps on the segment's claims_seq
 * (futex_waitv, Linux 5.16), which the daemon bumps when claims join a lease,
 * and then acts at once on every record waiting for one - so such records look
 * again only every SL_LEASE_CLAIM_WAIT_NS otherwise.  Where the kernel has no
 * futex_waitv they are not woken, and look every SL_LEASE_CLAIM_LOOK_NS.
 */
#include "epoll.h"
#include "fdtab.h"
#include "gate.h"
#include "h2box.h"
#include "held.h"
#include "record.h"
#include "kicker.h"
#include "firstbox.h"
#include "shim.h"
#include "sluice/clock.h"
#include "sluice/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How early the thread wakes before an instant, to spin the rest.  A timer wakes
 * a sleeping thread 20-200 us late on these machines; spinning longer than this,
 * though, got the thread preempted inside its spin under load (its short slice,
 * sl_clock_prefer_wakeups, is used up), and whole milliseconds late: 60 us delivered the most at
 * 1,000/s from node beside an nginx on two cores (make bench). */
#define KICK_SPIN_NS (60 * SL_NS_PER_US)

/* Realtime (sl_clock_prefer_realtime): the thread is never kept off a core by the
 * program's own threads, or by the server it wakes.  As an ordinary thread it
 * was preempted right after its connect - inside the release, holding the
 * segment's lock - and came back only once another thread's slice had run out,
 * 1.5-4 ms later (perf sched, node at 1,000/s beside an nginx on two cores):
 * 99.0% of the rate rather than 99.85%, and 91% of 5,000/s rather than 98.7%.
 * What keeps it from taking a core for good: it sleeps between instants and
 * spins at most KICK_SPIN_NS before one, and after SL_CLOCK_RT_RUN_MAX_NS of
 * acting without a pause it rests (sl_clock_realtime_rest). */
static int realtime_allowed = 1; /* SLUICE_REALTIME=0 at the start: 0 */
static int realtime;
/* 1 on the thread itself: what it queues it finds at its next look at the heap,
 * so it never wakes its own futex (a wake per release at 5,000/s, and then a
 * sleep that returned at once). */
static __thread __attribute__((tls_model("initial-exec"))) int on_kicker;

struct entry {
	int64_t at;
	int64_t slot;   /* ties go in slot order: the head of a queue looks first */
	unsigned index; /* record index+1 */
	unsigned coarse; /* 1: a claim's look again (no spin before it) */
};

static int before(const struct entry *a, const struct entry *b)
{
	return a->at < b->at || (a->at == b->at && a->slot < b->slot);
}

/* The heap, mmap'd at first use (virtual room for one entry per possible record;
 * only what is used is ever touched).  Guarded by heap_lock. */
static struct entry *heap;
static unsigned heap_len;
/* heap_len as the program's threads may read it without heap_lock (a hint). */
static _Atomic unsigned queued;
static struct sl_mutex heap_lock = SL_MUTEX_INIT;

/* Bumped, and woken, when an entry earlier than the thread's deadline arrives. */
static _Atomic uint32_t wake_word;
/* 0: no thread; STARTING: one caller is making the heap and the thread; 1:
 * running; -1: could not be started (the hooks alone kick, as before).  The heap
 * is used only once the state is 1: a second thread deferring its first connect
 * while the first is still starting the kicker once wrote into a heap not yet
 * mapped (make test, a python3 client with four threads: SIGSEGV). */
#define STARTING 2
static _Atomic int state;

static void sift_up(unsigned i)
{
	while (i > 0) {
		unsigned p = (i - 1) / 2;
		struct entry e;

		if (!before(&heap[i], &heap[p]))
			break;
		e = heap[p];
		heap[p] = heap[i];
		heap[i] = e;
		i = p;
	}
}

static void sift_down(unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, r = l + 1, m = i;
		struct entry e;

		if (l < heap_len && before(&heap[l], &heap[m]))
			m = l;
		if (r < heap_len && before(&heap[r], &heap[m]))
			m = r;
		if (m == i)
			return;
		e = heap[m];
		heap[m] = heap[i];
		heap[i] = e;
		i = m;
	}
}

static void futex_wake(_Atomic uint32_t *w)
{
	sl_sys(SYS_futex, w, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

/* Sleep on wake_word (last seen `seen`) until `until` (CLOCK_MONOTONIC, 0: none). */
static void futex_sleep_until(_Atomic uint32_t *w, uint32_t seen, int64_t until)
{
	struct timespec ts = {.tv_sec = until / SL_NS_PER_S, .tv_nsec = until % SL_NS_PER_S};

	sl_sys(SYS_futex, w, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seen, until ? &ts : NULL, NULL,
	        FUTEX_BITSET_MATCH_ANY);
}

/* The earliest entry's instant, or 0; *coarse whether it is a claim's look. */
static int64_t earliest(int *coarse)
{
	int64_t at;

	sl_shim_lock(&heap_lock);
	at = heap_len ? heap[0].at : 0;
	*coarse = heap_len ? (int)heap[0].coarse : 0;
	sl_shim_unlock(&heap_lock);
	return at;
}

/* 0 once futex_waitv was found missing (ENOSYS): claims do not wake the thread. */
static _Atomic int waitv_ok = 1;

/* Sleep on wake_word (last seen `seen`) and the segment's claims_seq (last seen
 * `cseen`) until `until` (0: none).  0 when it slept (or was woken); -1 when the
 * kernel has no futex_waitv. */
static int sleep_both(uint32_t seen, uint32_t *claims_seq, uint32_t cseen, int64_t until)
{
	struct futex_waitv w[2] = {
		{.val = seen, .uaddr = (uintptr_t)&wake_word, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG},
		{.val = cseen, .uaddr = (uintptr_t)claims_seq, .flags = FUTEX_32}, /* shared: the segment */
	};
	struct timespec ts = {.tv_sec = until / SL_NS_PER_S, .tv_nsec = until % SL_NS_PER_S};

	if (sl_sys(449 /* SYS_futex_waitv */, w, 2, 0, until ? &ts : NULL, CLOCK_MONOTONIC, 0) == -ENOSYS) {
		atomic_store(&waitv_ok, 0);
		return -1;
	}
	return 0;
}

int sl_kicker_claims_wakeable(void)
{
	return sl_kicker_running() && atomic_load_explicit(&waitv_ok, memory_order_relaxed);
}

/* Pop the earliest entry when due at `now`.  1 when *e was filled. */
static int pop_due(int64_t now, struct entry *e)
{
	int got = 0;

	sl_shim_lock(&heap_lock);
	if (heap_len && heap[0].at <= now) {
		*e = heap[0];
		heap[0] = heap[--heap_len];
		sift_down(0);
		atomic_store_explicit(&queued, heap_len, memory_order_relaxed);
		got = 1;
	}
	sl_shim_unlock(&heap_lock);
	return got;
}

/* Whether rec->fd is still the socket rec was deferred for: its table entry names
 * rec, and the descriptor's inode is the one noted then.  Asked under rec->lock,
 * right before the connect; a descriptor closed and its number taken by another
 * socket between the two would need the program to close it from another thread
 * inside that microsecond (a duplicate made to connect through instead cost a
 * grace period of the kernel's fd table, 15 ms, whenever it grew it). */
static int still_its_socket(struct sl_record *rec)
{
	struct stat st;

	return rec->wait && sl_fdtab_get(rec->fd) == rec->index && fstat(rec->fd, &st) == 0 &&
	       st.st_ino == rec->wait->sock_ino && st.st_dev == rec->wait->sock_dev;
}

/* The queue's order kept across retries.  When releases run behind their slots
 * (with burst = 1 a late release is never made up), every record whose slot has
 * passed is due at once, and all of them meet the section's gate - the earliest
 * instant its next release may go - at the same instant: one goes, the rest are
 * told the next gate.  Retried there, each of the k behind it cost a lock, an
 * fstat and a look at the segment at every release; k grows with the lateness
 * (1,500 at 300 ms behind at 5,000/s), so the thread fell further behind with
 * every release: node delivered 96% of 5,000/s rather than 98.7% (make bench).
 * So a record turned back at gate G is retried where its place in the queue puts
 * it: G plus how far its slot lies behind that of the first record turned back
 * at G (the head: the heap pops ties in slot order).  Never earlier than G, so
 * the release check decides as before; a record ahead that leaves the queue
 * costs those behind it one interval each, once.  Only the thread uses these. */
#define GATES 8
static struct {
	int64_t gate, head_slot;
} gates[GATES];
static unsigned gates_next;

static int64_t in_queue_order(int64_t gate, int64_t slot, int64_t now)
{
	if (slot >= now)
		return gate; /* not behind its slot: the head, or alone */
	for (unsigned i = 0; i < GATES; i++)
		if (gates[i].gate == gate)
			return slot > gates[i].head_slot ? gate + (slot - gates[i].head_slot) : gate;
	gates[gates_next].gate = gate;
	gates[gates_next].head_slot = slot;
	gates_next = (gates_next + 1) % GATES;
	return gate;
}

/* Under rec->lock: do what is due for it at `now`. */
static void act_on(struct sl_record *rec, int64_t now)
{
	int saved = errno;

	if (!rec->refs)
		return;
	if (sl_h2box_of(rec) && !rec->inherited) {
		/* HTTP/2's box: its request's admission stepped, what may go written -
		 * on this very socket only (the program may have closed it). */
		if (rec->release_ns > now)
			sl_kicker_due(rec);
		else if (sl_fdtab_get(rec->fd) == rec->index && sl_h2box_same_socket(rec, rec->fd))
			sl_held_box_pump(rec, rec->fd);
		errno = saved;
		return;
	}
	if (rec->state == SL_REC_DEFERRED) {
		if (rec->release_ns > now) {
			sl_kicker_due(rec);
			return;
		}
		if (!still_its_socket(rec))
			return; /* closed, or another socket now: its own hooks decide */
		sl_held_kick_locked(rec, rec->fd, now);
		if (rec->state == SL_REC_DEFERRED) {
			/* Not yet: a later retry, or a place still awaited. */
			if (rec->wait->pend.phase == SL_PEND_RELEASE && rec->release_ns > now)
				rec->release_ns = in_queue_order(rec->release_ns, rec->wait->pend.t.slot_ns, now);
			sl_kicker_due(rec);
		}
	} else if (sl_firstbox_holds(rec) && !rec->inherited) {
		/* A first write kept for its slot (firstbox.h): sent at it, on this
		 * very socket only. */
		if (rec->release_ns > now) {
			sl_kicker_due(rec);
		} else if (still_its_socket(rec) && sl_firstbox_flush(rec, rec->fd) == -EAGAIN) {
			rec->release_ns = now + SL_FIRSTBOX_RETRY_NS;
			sl_kicker_due(rec);
		}
	} else if (rec->ep_masked) {
		if (rec->release_ns > now)
			sl_kicker_due(rec);
		else if (sl_fdtab_get(rec->fd) == rec->index)
			sl_epoll_unmask(rec); /* the write's release check decides */
	}
	errno = saved;
}

#define CLAIMS_WAKE_MAX 256 /* records woken by one arrival of claims, at most */

/* Claims came (claims_seq moved): every record whose live entry is a claim's
 * look again looks now - its admission steps and, its claim found, goes at the
 * claim's slot (the step queues it there again).  Its entry is left in the
 * heap, stale (kick_at no longer names it).  The admission's own instant is
 * made due too: the step waits for pend.at, not for the kick (a wake that made
 * only the kick due did nothing). */
static void claims_came(int64_t now)
{
	struct {
		unsigned index;
		int64_t at;
	} due[CLAIMS_WAKE_MAX];
	unsigned n = 0;

	sl_shim_lock(&heap_lock);
	for (unsigned i = 0; i < heap_len && n < CLAIMS_WAKE_MAX; i++)
		if (heap[i].coarse) {
			due[n].index = heap[i].index;
			due[n++].at = heap[i].at;
		}
	sl_shim_unlock(&heap_lock);
	for (unsigned i = 0; i < n; i++) {
		struct sl_record *rec = sl_record_at(due[i].index);

		if (!rec)
			continue;
		sl_shim_lock(&rec->lock);
		/* Only a record whose admission waits (a first write kept for its
		 * slot has its slot: it goes at it, not at a wake). */
		if (rec->kick_at == due[i].at && rec->wait && rec->wait->pend.claim_wait && !sl_firstbox_holds(rec)) {
			rec->kick_at = 0;
			rec->release_ns = now;
			rec->wait->pend.at = SL_MIN(rec->wait->pend.at, now);
			act_on(rec, now);
		}
		sl_shim_unlock(&rec->lock);
	}
}

static void *run(void *arg)
{
	struct sl_shm_header *claims_h = NULL; /* the segment whose claims_seq is watched */
	uint32_t claims_seen = 0;

	(void)arg;
	on_kicker = 1;
	sl_clock_prefer_wakeups();
	realtime = realtime_allowed && sl_clock_prefer_realtime();
	/* Named once its scheduling is settled: whoever finds it by name (ps, top,
	 * t_kicker_realtime under load) sees what it runs as. */
	prctl(PR_SET_NAME, "sluice-kicker", 0, 0, 0);
	for (;;) {
		uint32_t seen = atomic_load_explicit(&wake_word, memory_order_acquire);
		struct sl_shm_header *h = __atomic_load_n(&sl_shim.shm.hdr, __ATOMIC_ACQUIRE);
		uint32_t cseen = h ? atomic_load_explicit((_Atomic uint32_t *)&h->claims_seq, memory_order_acquire) : 0;
		int coarse;
		int64_t at = earliest(&coarse), now = sl_clock_mono_ns(), began, wake_at;
		struct entry e;

		if (h != claims_h || cseen != claims_seen) {
			/* Claims came since the last look (or another segment is in use:
			 * its value is taken as seen). */
			if (h == claims_h)
				claims_came(now);
			claims_h = h;
			claims_seen = cseen;
			continue;
		}
		wake_at = coarse ? at : at - KICK_SPIN_NS;
		if (!at || wake_at > now) {
			if (!h || !atomic_load_explicit(&waitv_ok, memory_order_relaxed) ||
			    sleep_both(seen, &h->claims_seq, cseen, at ? wake_at : 0) < 0)
				futex_sleep_until(&wake_word, seen, at ? wake_at : 0);
			continue;
		}
		while (!coarse && sl_clock_mono_ns() < at)
			sl_cpu_relax();
		began = sl_clock_mono_ns();
		while (pop_due(now = sl_clock_mono_ns(), &e)) {
			struct sl_record *rec;

			if (realtime && now - began > SL_CLOCK_RT_RUN_MAX_NS) {
				/* A moment left to the program's threads, which a
				 * realtime thread would otherwise keep off this core. */
				sl_clock_realtime_rest();
				began = now = sl_clock_mono_ns();
			}
			rec = sl_record_at(e.index);
			if (!rec)
				continue;
			sl_shim_lock(&rec->lock);
			if (rec->kick_at == e.at) {
				rec->kick_at = 0;
				act_on(rec, now);
			}
			sl_shim_unlock(&rec->lock);
		}
	}
	return NULL;
}

static void start(void)
{
	int expected = 0;
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t tid;
	int rc;

	if (!atomic_compare_exchange_strong(&state, &expected, STARTING))
		return;
	if (!heap) {
		void *p = mmap(NULL, (size_t)SL_RECORDS * sizeof(struct entry), PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED) {
			atomic_store(&state, -1);
			sl_debug("no kicker (no memory for its heap): held sockets go when the program looks");
			return;
		}
		heap = p;
	}
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread starts with every signal blocked */
	rc = pthread_create(&tid, &attr, run, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		atomic_store(&state, -1);
		sl_debug("no kicker (pthread_create: %s): held sockets go when the program looks", strerror(rc));
		return;
	}
	atomic_store_explicit(&state, 1, memory_order_release); /* the heap is there */
}

/* The kicker's state once no start is under way: another thread's start takes an
 * mmap and a pthread_create, so it is waited for, briefly; past that bound this
 * caller goes on without it (its socket goes when the program looks). */
static int settled_state(void)
{
	int s;

	for (unsigned spin = 0; (s = atomic_load_explicit(&state, memory_order_acquire)) == STARTING; spin++) {
		if (spin >= 20000)
			return STARTING;
		if (spin < 64)
			sl_cpu_relax();
		else
			sched_yield();
	}
	return s;
}

void sl_kicker_due(struct sl_record *rec)
{
	int64_t at = rec->release_ns;
	int wake = 0;

	if (at <= 0 || rec->kick_at == at || rec->inherited)
		return;
	if (atomic_load_explicit(&state, memory_order_acquire) == 0)
		start();
	if (settled_state() != 1)
		return;
	sl_shim_lock(&heap_lock);
	if (heap_len < SL_RECORDS) {
		heap[heap_len] = (struct entry){.at = at, .slot = rec->wait ? rec->wait->pend.t.slot_ns : at,
		                                .index = rec->index,
		                                .coarse = rec->wait && rec->wait->pend.claim_wait && at == rec->wait->pend.at};
		sift_up(heap_len++);
		atomic_store_explicit(&queued, heap_len, memory_order_relaxed);
		rec->kick_at = at;
		wake = heap[0].at == at && !on_kicker;
	}
	sl_shim_unlock(&heap_lock);
	if (wake) {
		atomic_fetch_add_explicit(&wake_word, 1, memory_order_release);
		futex_wake(&wake_word);
	}
}

void sl_kicker_allow_realtime(int allowed)
{
	realtime_allowed = allowed;
}

int sl_kicker_running(void)
{
	return atomic_load_explicit(&state, memory_order_relaxed) == 1;
}

int sl_kicker_has_work(void)
{
	return sl_kicker_running() && atomic_load_explicit(&queued, memory_order_relaxed) > 0;
}

void sl_kicker_note_socket(struct sl_record *rec)
{
	struct stat st;

	if (rec->wait && fstat(rec->fd, &st) == 0) {
		rec->wait->sock_ino = st.st_ino;
		rec->wait->sock_dev = st.st_dev;
	}
}

void sl_kicker_after_fork(void)
{
	/* The child has no kicker thread, and the entries are the parent's records'. */
	sl_mutex_reset(&heap_lock);
	heap_len = 0;
	atomic_store(&queued, 0);
	memset(gates, 0, sizeof(gates));
	atomic_store(&state, 0);
}
