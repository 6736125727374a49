/* The header's summary and each section's config, sealed and checked (summary.h). */
#include "sluice/summary.h"
#include "sluice/common.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

/* Each thread's last summary that agreed with its checksum, with the header, the
 * spec seqlock value and the checksum it was read under: a segment attached anew
 * at the same address (a test's next one, a moved segment) has another sum, and a
 * field scribbled since cannot change what this thread believes. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
	const struct sl_shm_header *h;
	uint32_t seq;
	uint64_t sum;
	struct sl_summary s;
} cache;

static void read_fields(const struct sl_shm_header *h, struct sl_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->meters = __atomic_load_n(&h->meters, __ATOMIC_RELAXED);
	s->has_names = __atomic_load_n(&h->has_names, __ATOMIC_RELAXED);
	s->index_kinds = __atomic_load_n(&h->index_kinds, __ATOMIC_RELAXED);
	s->index_run = __atomic_load_n(&h->index_run, __ATOMIC_RELAXED);
	s->v4_lens = __atomic_load_n(&h->index_v4_lens, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < 3; i++)
		s->v6_lens[i] = __atomic_load_n(&h->index_v6_lens[i], __ATOMIC_RELAXED);
}

/* FNV-1a over the fields and the generation: a scribble of a few bytes - or of
 * the sum - agrees with it by chance once in 2^64. */
static uint64_t sum_of(const struct sl_summary *s, uint64_t generation)
{
	const unsigned char *p = (const unsigned char *)s;
	uint64_t hash = 0xcbf29ce484222325ull ^ generation;

	for (size_t i = 0; i < sizeof(*s); i++)
		hash = (hash ^ p[i]) * 0x100000001b3ull;
	return hash ? hash : 1;
}

uint64_t sl_summary_sum(const struct sl_shm_header *h)
{
	struct sl_summary s;

	read_fields(h, &s);
	return sum_of(&s, __atomic_load_n(&h->generation, __ATOMIC_RELAXED));
}

void sl_summary_seal(struct sl_shm_header *h)
{
	__atomic_store_n(&h->summary_sum, sl_summary_sum(h), __ATOMIC_RELAXED);
}

int sl_summary_get(const struct sl_shm_header *h, struct sl_summary *out)
{
	uint32_t seq = atomic_load_explicit(A(&h->spec_seq), memory_order_acquire);
	uint64_t sum = __atomic_load_n(&h->summary_sum, __ATOMIC_RELAXED);

	if (sl_likely(cache.h == h && cache.seq == seq && cache.sum == sum && !(seq & 1))) {
		*out = cache.s;
		return 1;
	}
	read_fields(h, out);
	if (sum_of(out, __atomic_load_n(&h->generation, __ATOMIC_RELAXED)) == sum) {
		atomic_thread_fence(memory_order_acquire);
		if (!(seq & 1) && atomic_load_explicit(A(&h->spec_seq), memory_order_relaxed) == seq) {
			cache.h = h;
			cache.seq = seq;
			cache.sum = sum;
			cache.s = *out;
		}
		return 1;
	}
	/* Not what the daemon sealed: skip nothing. */
	out->meters = ~0u;
	out->has_names = 1;
	out->index_kinds = ~0u;
	out->index_run = UINT32_MAX;
	out->v4_lens = ~0ull;
	out->v6_lens[0] = out->v6_lens[1] = out->v6_lens[2] = ~0ull;
	return 0;
}

/* Word by word over in_use, serial and spec (22 words, a multiply each, in four
 * independent lanes so they overlap: some ns an admission), read as the daemon
 * may be writing them - a torn read disagrees, and is looked at again.  Never 0,
 * the seal of a slot never written. */
uint64_t sl_section_seal_of(const struct sl_section *sec)
{
	typedef uint64_t __attribute__((may_alias)) word;
	enum { WORDS = offsetof(struct sl_section, seal) / sizeof(uint64_t) };
	const word *w = (const word *)(const void *)sec;
	uint64_t lane[4] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull,
	                    0x27d4eb2f165667c5ull},
	         hash;

	for (size_t i = 0; i < WORDS; i++) {
		uint64_t *l = &lane[i & 3];

		*l = (*l ^ __atomic_load_n(&w[i], __ATOMIC_RELAXED)) * 0xff51afd7ed558ccdull;
		*l ^= *l >> 32;
	}
	hash = (lane[0] ^ (lane[1] << 1 | lane[1] >> 63)) * 0xc4ceb9fe1a85ec53ull;
	hash ^= (lane[2] ^ (lane[3] << 1 | lane[3] >> 63)) * 0xff51afd7ed558ccdull;
	hash ^= hash >> 29;
	return hash ? hash : 1;
}

void sl_section_seal(struct sl_section *sec)
{
	__atomic_store_n(&sec->seal, sl_section_seal_of(sec), __ATOMIC_RELAXED);
}
