/*
 * Per-process state of held sockets: the fd table, the pool of hold records, and
 * what each fd registered with epoll.
 *
 * The fd table is what every send path consults, so it is one load for an fd that
 * holds nothing: two levels (chunks of 1024 fds, mmap'd on first use, never freed),
 * each entry the index+1 of a hold record or 0.  Records are few (a connection
 * holds one only until its first write is released) and come from a fixed pool, so
 * nothing here calls malloc.  Record contents are guarded by the record's mutex;
 * entries and counters are atomics.
 */
#include "fdtab.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK_FDS 1024
#define CHUNKS 1024 /* fds up to 1,048,575 are tracked; beyond, nothing is held */

static _Atomic(void *) chunks[CHUNKS];   /* of _Atomic uint16_t[CHUNK_FDS] */
static _Atomic(void *) epchunks[CHUNKS]; /* of struct sl_epregs[CHUNK_FDS] */
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;

struct sl_hold sl_holds[SL_HOLDS];
_Atomic int sl_holds_active; /* records in use: 0 lets poll/epoll hooks pass at once */
_Atomic int sl_fd_max;       /* highest fd ever given a record or mark, bounds close_range */
_Atomic int sl_sniff_marks;  /* entries equal to SL_FD_SNIFF */

/* The chunk of `table` holding fd, of entries of `size` bytes; mmap'd on first use
 * when `create` (under alloc_lock, published with release).  NULL when fd is out of
 * range, or the chunk is absent and not to be created, or mmap failed. */
static void *chunk_of(_Atomic(void *) *table, int fd, size_t size, int create)
{
	unsigned c = (unsigned)fd / CHUNK_FDS;
	void *chunk;

	if ((unsigned)fd >= CHUNKS * CHUNK_FDS)
		return NULL;
	chunk = atomic_load_explicit(&table[c], memory_order_acquire);
	if (!chunk && create) {
		pthread_mutex_lock(&alloc_lock);
		chunk = atomic_load_explicit(&table[c], memory_order_acquire);
		if (!chunk) {
			void *p = mmap(NULL, CHUNK_FDS * size, PROT_READ | PROT_WRITE,
			               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p != MAP_FAILED)
				atomic_store_explicit(&table[c], chunk = p, memory_order_release);
		}
		pthread_mutex_unlock(&alloc_lock);
	}
	return chunk;
}

/* sl_fd_max only grows; marks are set outside alloc_lock, hence the CAS. */
static void raise_fd_max(int fd)
{
	int max = atomic_load(&sl_fd_max);

	while (fd > max && !atomic_compare_exchange_weak(&sl_fd_max, &max, fd))
		;
}

unsigned sl_fdtab_get(int fd)
{
	_Atomic uint16_t *chunk;

	if (sl_unlikely((unsigned)fd >= CHUNKS * CHUNK_FDS))
		return 0;
	chunk = atomic_load_explicit(&chunks[(unsigned)fd / CHUNK_FDS], memory_order_acquire);
	if (sl_likely(!chunk))
		return 0;
	return atomic_load_explicit(&chunk[(unsigned)fd % CHUNK_FDS], memory_order_acquire);
}

static _Atomic uint16_t *entry(int fd, int create)
{
	_Atomic uint16_t *chunk = chunk_of(chunks, fd, sizeof(*chunk), create);

	return chunk ? &chunk[(unsigned)fd % CHUNK_FDS] : NULL;
}

struct sl_hold *sl_hold_new(int fd)
{
	_Atomic uint16_t *e = entry(fd, 1);
	struct sl_hold *rec = NULL;

	unsigned cur;

	if (!e)
		return NULL;
	pthread_mutex_lock(&alloc_lock);
	/* Another thread gave fd a record first: that one stands (the caller uses it
	 * or waits in place).  A mark is simply replaced. */
	cur = atomic_load(e);
	if (cur && cur != SL_FD_SNIFF) {
		pthread_mutex_unlock(&alloc_lock);
		return NULL;
	}
	for (unsigned i = 0; i < SL_HOLDS; i++) {
		if (!sl_holds[i].refs) {
			rec = &sl_holds[i];
			memset((char *)rec + sizeof(rec->lock), 0, sizeof(*rec) - sizeof(rec->lock));
			pthread_mutex_init(&rec->lock, NULL);
			rec->refs = 1;
			atomic_fetch_add(&sl_holds_active, 1);
			if (atomic_exchange(e, (uint16_t)(i + 1)) == SL_FD_SNIFF)
				atomic_fetch_sub(&sl_sniff_marks, 1);
			break;
		}
	}
	if (rec)
		raise_fd_max(fd);
	pthread_mutex_unlock(&alloc_lock);
	return rec;
}

struct sl_hold *sl_hold_of(int fd)
{
	unsigned idx = sl_fdtab_get(fd);

	return idx && idx <= SL_HOLDS ? &sl_holds[idx - 1] : NULL;
}

/* Drop fd's reference.  Returns the record when fd held the last one: it then
 * stays reserved (refs 1, no fd pointing at it) while the caller refunds and cleans
 * up, so sl_hold_new cannot hand it out underneath; sl_hold_free releases it. */
struct sl_hold *sl_hold_unlink(int fd)
{
	_Atomic uint16_t *e = entry(fd, 0);
	struct sl_hold *last = NULL;
	unsigned idx;

	if (!e || !(idx = atomic_exchange(e, 0)))
		return NULL;
	if (idx == SL_FD_SNIFF)
		atomic_fetch_sub(&sl_sniff_marks, 1);
	if (idx > SL_HOLDS)
		return NULL;
	pthread_mutex_lock(&alloc_lock);
	if (sl_holds[idx - 1].refs == 1)
		last = &sl_holds[idx - 1];
	else
		sl_holds[idx - 1].refs--;
	pthread_mutex_unlock(&alloc_lock);
	return last;
}

void sl_hold_free(struct sl_hold *rec)
{
	pthread_mutex_lock(&alloc_lock);
	rec->refs = 0;
	pthread_mutex_unlock(&alloc_lock);
	atomic_fetch_sub(&sl_holds_active, 1);
}

int sl_hold_share(int oldfd, int newfd)
{
	unsigned idx = sl_fdtab_get(oldfd);
	_Atomic uint16_t *e;

	if (idx == SL_FD_SNIFF) {
		sl_fdtab_mark_sniff(newfd);
		return 0;
	}
	if (!idx || idx > SL_HOLDS || !(e = entry(newfd, 1)))
		return 0;
	pthread_mutex_lock(&alloc_lock);
	sl_holds[idx - 1].refs++;
	atomic_store(e, (uint16_t)idx);
	raise_fd_max(newfd);
	pthread_mutex_unlock(&alloc_lock);
	return 1;
}

void sl_fdtab_mark_sniff(int fd)
{
	_Atomic uint16_t *e = entry(fd, 1);
	uint16_t expected = 0;

	/* Only over an empty entry: a record (a connected UDP socket re-connected, say)
	 * is not replaced by a mark. */
	if (!e || !atomic_compare_exchange_strong(e, &expected, (uint16_t)SL_FD_SNIFF))
		return;
	atomic_fetch_add(&sl_sniff_marks, 1);
	raise_fd_max(fd);
}

int sl_fdtab_claim_sniff(int fd)
{
	_Atomic uint16_t *e = entry(fd, 0);
	uint16_t expected = SL_FD_SNIFF;

	if (!e || !atomic_compare_exchange_strong(e, &expected, 0))
		return 0;
	atomic_fetch_sub(&sl_sniff_marks, 1);
	return 1;
}

struct sl_epregs *sl_epregs(int fd, int create)
{
	struct sl_epregs *chunk = chunk_of(epchunks, fd, sizeof(*chunk), create);

	return chunk ? &chunk[(unsigned)fd % CHUNK_FDS] : NULL;
}

void sl_fdtab_after_fork(void)
{
	pthread_mutex_init(&alloc_lock, NULL);
	for (unsigned i = 0; i < SL_HOLDS; i++) {
		if (sl_holds[i].refs) {
			pthread_mutex_init(&sl_holds[i].lock, NULL);
			sl_holds[i].inherited = 1;
		}
	}
}
