/*
 * The process-wide address -> host name map, filled by the resolver hooks and read
 * by connect.  Resolvers often run on another thread than the one that connects
 * (curl's threaded resolver, asyncio's executor), so the map is global.
 *
 * Readers are lock-free: each entry has a sequence counter, odd while written, and a
 * reader retries when it changes under it.  Writers (the resolver path, never the hot
 * path) serialise on a mutex.  Fixed size, no allocation: a full bucket overwrites its
 * oldest entry, which only costs a name-based match for a long-forgotten address.
 */
#include "shim.h"

#include <pthread.h>
#include <string.h>

#define NAMEMAP_SLOTS 1024 /* power of two */
#define NAMEMAP_WAYS 4

struct name_entry {
	_Atomic uint32_t seq;
	uint8_t family;
	uint8_t addr[16];
	uint16_t len;
	_Atomic uint32_t stamp; /* insertion order, to pick the oldest way; 0 = never used */
	char name[SL_HOST_MAX];
};

static struct name_entry table[NAMEMAP_SLOTS];
static struct sl_mutex write_lock = SL_MUTEX_INIT;
static uint32_t next_stamp;

static unsigned addr_len(int family)
{
	return family == AF_INET6 ? 16 : 4;
}

static unsigned bucket(int family, const uint8_t *addr)
{
	uint32_t h = 2166136261u ^ (uint32_t)family;

	for (unsigned i = 0; i < addr_len(family); i++)
		h = (h ^ addr[i]) * 16777619u;
	return (h & (NAMEMAP_SLOTS - 1)) & ~(unsigned)(NAMEMAP_WAYS - 1);
}

/* Way w of the table read whole, into out (size bytes, NUL-ended): its name's
 * length and its stamp when it holds addr, 0 when not (or when it was rewritten
 * under every try). */
static size_t read_way(unsigned w, int family, const void *addr, char *out, size_t size, uint32_t *stamp)
{
	struct name_entry *e = &table[w];

	for (int tries = 0; tries < 16; tries++) {
		uint32_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
		size_t len;
		int hit;

		if (seq & 1)
			continue;
		hit = e->family == family && memcmp(e->addr, addr, addr_len(family)) == 0;
		len = SL_MIN((size_t)e->len, size - 1);
		if (hit) {
			memcpy(out, e->name, len);
			*stamp = atomic_load_explicit(&e->stamp, memory_order_relaxed);
		}
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq)
			continue;
		if (!hit)
			return 0;
		out[len] = '\0';
		return len;
	}
	return 0;
}

/* Each (address, name) pair has a way of its own: names that share an address
 * (virtual hosts, a CDN) are all kept, up to a bucket's ways, and the newest is
 * what a connect goes by (sl_namemap_get). */
void sl_namemap_put(int family, const void *addr, const char *name)
{
	size_t len = strlen(name);
	unsigned b = bucket(family, addr), victim = b;
	char norm[SL_HOST_MAX];
	struct name_entry *e;

	if (len == 0 || len >= SL_HOST_MAX)
		return;
	memcpy(norm, name, len + 1);
	len = sl_name_normalise(norm, len);
	sl_shim_lock(&write_lock);
	for (unsigned w = 0; w < NAMEMAP_WAYS; w++) {
		e = &table[b + w];
		if (e->family == family && memcmp(e->addr, addr, addr_len(family)) == 0 && e->len == len &&
		    memcmp(e->name, norm, len) == 0) {
			victim = b + w;
			break;
		}
		if (e->stamp < table[victim].stamp)
			victim = b + w;
	}
	e = &table[victim];
	atomic_fetch_add_explicit(&e->seq, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	e->family = (uint8_t)family;
	memcpy(e->addr, addr, addr_len(family));
	memcpy(e->name, norm, len + 1);
	e->len = (uint16_t)len;
	e->stamp = ++next_stamp;
	atomic_thread_fence(memory_order_release);
	atomic_fetch_add_explicit(&e->seq, 1, memory_order_relaxed);
	sl_shim_unlock(&write_lock);
}

size_t sl_namemap_get(int family, const void *addr, char *out, size_t size)
{
	unsigned b = bucket(family, addr);
	uint32_t best = 0;
	size_t got = 0;

	for (unsigned w = 0; w < NAMEMAP_WAYS; w++) {
		char name[SL_HOST_MAX];
		uint32_t stamp = 0;
		size_t len;

		/* Ways fill in order (the oldest, lowest way is replaced first), so the
		 * first never-used way ends the bucket: a miss is usually one load. */
		if (atomic_load_explicit(&table[b + w].stamp, memory_order_relaxed) == 0)
			break;
		if ((len = read_way(b + w, family, addr, name, SL_MIN(size, sizeof(name)), &stamp)) && stamp > best) {
			best = stamp;
			memcpy(out, name, len + 1);
			got = len;
		}
	}
	return got;
}

unsigned sl_namemap_count(int family, const void *addr)
{
	unsigned b = bucket(family, addr), n = 0;

	for (unsigned w = 0; w < NAMEMAP_WAYS; w++) {
		char name[SL_HOST_MAX];
		uint32_t stamp;

		if (atomic_load_explicit(&table[b + w].stamp, memory_order_relaxed) == 0)
			break;
		n += read_way(b + w, family, addr, name, sizeof(name), &stamp) > 0;
	}
	return n;
}

void sl_namemap_after_fork(void)
{
	/* The child has one thread; a writer caught mid-way in the parent left its entry
	 * odd, which readers skip until it is rewritten. */
	sl_mutex_reset(&write_lock);
}
