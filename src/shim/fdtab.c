/*
 * Per-process state of held sockets: the fd table, the pool of hold records, and
 * what each fd registered with epoll.
 *
 * The fd table is what every send path consults, so it is one load for an fd that
 * holds nothing: two levels (chunks of 1024 fds, mmap'd on first use, never freed),
 * each entry the index+1 of a hold record or 0.  Records live in chunks of 1024 as
 * well, mmap'd when the records in use first need one and never freed or moved, so
 * a record's address stays valid for any thread that read an index: a process
 * pays for the records it has used at most at once, and can hold up to 1,048,576
 * sockets.  Free records are kept on a list, so taking one costs the same whatever
 * the count.  Nothing here calls malloc.  Record contents are guarded by the
 * record's mutex; entries and counters are atomics; the pool's list and high-water
 * mark by alloc_lock.
 */
#include "fdtab.h"
#include "record.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK_FDS 1024
#define CHUNKS 1024 /* fds up to 1,048,575 are tracked; beyond, nothing is held */

#define REC_CHUNK 1024
#define REC_CHUNKS (SL_RECORDS / REC_CHUNK)

static _Atomic(void *) chunks[CHUNKS];   /* of _Atomic uint32_t[CHUNK_FDS] */
static _Atomic(void *) epchunks[CHUNKS]; /* of struct sl_epregs[CHUNK_FDS] */
static _Atomic(struct sl_record *) rec_chunks[REC_CHUNKS];
static struct sl_mutex alloc_lock = SL_MUTEX_INIT;
static unsigned free_head; /* index of the first free record, 0: none (alloc_lock) */

_Atomic unsigned sl_records_high; /* records ever made: indices 1..high exist */
_Atomic int sl_records_active; /* records in use: 0 lets poll/epoll hooks pass at once */
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
		sl_shim_lock(&alloc_lock);
		chunk = atomic_load_explicit(&table[c], memory_order_acquire);
		if (!chunk) {
			void *p = mmap(NULL, CHUNK_FDS * size, PROT_READ | PROT_WRITE,
			               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p != MAP_FAILED)
				atomic_store_explicit(&table[c], chunk = p, memory_order_release);
		}
		sl_shim_unlock(&alloc_lock);
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
	_Atomic uint32_t *chunk;

	if (sl_unlikely((unsigned)fd >= CHUNKS * CHUNK_FDS))
		return 0;
	chunk = atomic_load_explicit(&chunks[(unsigned)fd / CHUNK_FDS], memory_order_acquire);
	if (sl_likely(!chunk))
		return 0;
	return atomic_load_explicit(&chunk[(unsigned)fd % CHUNK_FDS], memory_order_acquire);
}

static _Atomic uint32_t *entry(int fd, int create)
{
	_Atomic uint32_t *chunk = chunk_of(chunks, fd, sizeof(*chunk), create);

	return chunk ? &chunk[(unsigned)fd % CHUNK_FDS] : NULL;
}

struct sl_record *sl_record_at(unsigned idx)
{
	struct sl_record *chunk;

	if (sl_unlikely(idx == 0 || idx > SL_RECORDS))
		return NULL;
	chunk = atomic_load_explicit(&rec_chunks[(idx - 1) / REC_CHUNK], memory_order_acquire);
	return chunk ? &chunk[(idx - 1) % REC_CHUNK] : NULL;
}

/* A record to use, under alloc_lock: the first free one, else a new one (with a new
 * chunk when the last is full).  NULL when the pool is at SL_RECORDS or mmap failed. */
static struct sl_record *take_record(void)
{
	unsigned high = atomic_load_explicit(&sl_records_high, memory_order_relaxed), c;
	struct sl_record *rec;

	if (free_head) {
		rec = sl_record_at(free_head);
		free_head = rec->next_free;
		return rec;
	}
	if (high >= SL_RECORDS)
		return NULL;
	c = high / REC_CHUNK;
	if (!atomic_load_explicit(&rec_chunks[c], memory_order_relaxed)) {
		void *p = mmap(NULL, REC_CHUNK * sizeof(struct sl_record), PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return NULL;
		atomic_store_explicit(&rec_chunks[c], (struct sl_record *)p, memory_order_release);
	}
	rec = sl_record_at(high + 1);
	rec->index = high + 1; /* its lock: sl_record_new initialises it, as for a reused one */
	/* Published after its index is set: scans read up to high. */
	atomic_store_explicit(&sl_records_high, high + 1, memory_order_release);
	return rec;
}

struct sl_record *sl_record_new(int fd)
{
	_Atomic uint32_t *e = entry(fd, 1);
	struct sl_record *rec;
	unsigned cur, index;

	if (!e)
		return NULL;
	sl_shim_lock(&alloc_lock);
	/* Another thread gave fd a record first: that one stands (the caller uses it
	 * or waits in place).  A mark is simply replaced. */
	cur = atomic_load(e);
	if ((cur && cur != SL_FD_SNIFF) || !(rec = take_record())) {
		sl_shim_unlock(&alloc_lock);
		return NULL;
	}
	index = rec->index;
	/* Under its own lock too: the kicker (kicker.c) may be looking at what this
	 * record was a moment ago.  The lock itself stays as it was made. */
	sl_shim_lock(&rec->lock);
	memset((char *)rec + sizeof(rec->lock), 0, sizeof(*rec) - sizeof(rec->lock));
	rec->index = index;
	sl_shim_unlock(&rec->lock);
	rec->refs = 1;
	atomic_fetch_add(&sl_records_active, 1);
	if (atomic_exchange(e, index) == SL_FD_SNIFF)
		atomic_fetch_sub(&sl_sniff_marks, 1);
	raise_fd_max(fd);
	sl_shim_unlock(&alloc_lock);
	return rec;
}

struct sl_record *sl_record_of(int fd)
{
	unsigned idx = sl_fdtab_get(fd);

	return idx && idx != SL_FD_SNIFF ? sl_record_at(idx) : NULL;
}

/* Drop fd's reference.  Returns the record when fd held the last one: it then
 * stays reserved (refs 1, no fd pointing at it) while the caller refunds and cleans
 * up, so sl_record_new cannot hand it out underneath; sl_record_free releases it. */
struct sl_record *sl_record_unlink(int fd)
{
	_Atomic uint32_t *e = entry(fd, 0);
	struct sl_record *last = NULL, *rec;
	unsigned idx;

	if (!e || !(idx = atomic_exchange(e, 0)))
		return NULL;
	if (idx == SL_FD_SNIFF) {
		atomic_fetch_sub(&sl_sniff_marks, 1);
		return NULL;
	}
	if (!(rec = sl_record_at(idx)))
		return NULL;
	sl_shim_lock(&alloc_lock);
	if (rec->refs == 1)
		last = rec;
	else
		rec->refs--;
	sl_shim_unlock(&alloc_lock);
	return last;
}

void sl_record_free(struct sl_record *rec)
{
	sl_shim_lock(&rec->lock); /* the kicker may be looking at it */
	sl_rec_free_parts(rec);
	sl_shim_unlock(&rec->lock);
	sl_shim_lock(&alloc_lock);
	rec->refs = 0;
	rec->next_free = free_head;
	free_head = rec->index;
	sl_shim_unlock(&alloc_lock);
	atomic_fetch_sub(&sl_records_active, 1);
}

int sl_record_share(int oldfd, int newfd)
{
	unsigned idx = sl_fdtab_get(oldfd);
	struct sl_record *rec;
	_Atomic uint32_t *e;

	if (idx == SL_FD_SNIFF) {
		sl_fdtab_mark_sniff(newfd);
		return 0;
	}
	if (!(rec = sl_record_at(idx)) || !(e = entry(newfd, 1)))
		return 0;
	sl_shim_lock(&alloc_lock);
	rec->refs++;
	atomic_store(e, idx);
	raise_fd_max(newfd);
	sl_shim_unlock(&alloc_lock);
	return 1;
}

void sl_fdtab_mark_sniff(int fd)
{
	_Atomic uint32_t *e = entry(fd, 1);
	uint32_t expected = 0;

	/* Only over an empty entry: a record (a connected UDP socket re-connected, say)
	 * is not replaced by a mark. */
	if (!e || !atomic_compare_exchange_strong(e, &expected, SL_FD_SNIFF))
		return;
	atomic_fetch_add(&sl_sniff_marks, 1);
	raise_fd_max(fd);
}

int sl_fdtab_claim_sniff(int fd)
{
	_Atomic uint32_t *e = entry(fd, 0);
	uint32_t expected = SL_FD_SNIFF;

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
	unsigned high = atomic_load(&sl_records_high);

	sl_mutex_reset(&alloc_lock);
	for (unsigned i = 1; i <= high; i++) {
		struct sl_record *rec = sl_record_at(i);

		sl_mutex_reset(&rec->lock);
		if (rec->refs)
			rec->inherited = 1;
	}
}
