/* The match index (index.h). */
#include "sluice/index.h"
#include "sluice/common.h"
#include "sluice/shm.h"
#include "sluice/summary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* A key's tag from the hash of its bytes, its kind, port and length (a name's
 * length in bytes, a prefix's in bits).  Never 0, which marks a free slot. */
static uint64_t tag_of(uint64_t h, unsigned kind, unsigned port, unsigned len)
{
	h ^= (uint64_t)kind << 56 ^ (uint64_t)port << 32 ^ len;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h | 1;
}

/* Names are hashed from their last byte to their first, so one pass over a
 * destination's name gives the hash of each of its suffixes on the way. */
static uint64_t name_hash(const char *name, size_t len)
{
	uint64_t h = FNV_OFFSET;

	while (len > 0)
		h = (h ^ (uint8_t)name[--len]) * FNV_PRIME;
	return h;
}

/* The address cut to `bits`: the bytes it keeps, the last one masked. */
static uint64_t addr_hash(const uint8_t *addr, unsigned bits)
{
	uint64_t h = FNV_OFFSET;
	unsigned whole = bits / 8, rest = bits % 8;

	for (unsigned i = 0; i < whole; i++)
		h = (h ^ addr[i]) * FNV_PRIME;
	if (rest)
		h = (h ^ (uint8_t)(addr[whole] & (0xff00u >> rest))) * FNV_PRIME;
	return h;
}

/* The port a pattern's key carries: its port when it names one, else 0. */
static unsigned key_port(const struct sl_pattern *p)
{
	return p->port_lo == p->port_hi ? p->port_lo : 0;
}

/* The tag of pattern p's key, or 0 for a pattern that has none. */
static uint64_t pattern_tag(const struct sl_pattern *p)
{
	unsigned port = key_port(p), len;

	switch (p->kind) {
	case SL_PAT_ANY:
		return tag_of(FNV_OFFSET, SL_PAT_ANY, port, 0);
	case SL_PAT_NAME:
	case SL_PAT_SUFFIX:
		len = SL_MIN((unsigned)p->name_len, (unsigned)SL_HOST_MAX - 1);
		return tag_of(name_hash(p->name, len), p->kind, port, len);
	case SL_PAT_V4:
		len = SL_MIN((unsigned)p->prefix, 32u);
		return tag_of(addr_hash(p->addr, len), SL_PAT_V4, port, len);
	case SL_PAT_V6:
		len = SL_MIN((unsigned)p->prefix, 128u);
		return tag_of(addr_hash(p->addr, len), SL_PAT_V6, port, len);
	default:
		return 0;
	}
}

static unsigned kind_bit(unsigned kind, unsigned port)
{
	return 1u << (kind * 2 + (port != 0));
}

struct item {
	uint64_t tag;
	uint32_t pattern;
};

static int by_tag(const void *a, const void *b)
{
	const struct item *x = a, *y = b;

	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return x->pattern < y->pattern ? -1 : x->pattern > y->pattern;
}

int sl_index_build(const struct sl_pattern *pats, uint32_t n, struct sl_index_slot *slots,
                   uint32_t nslots, uint32_t *refs, struct sl_index_summary *sum)
{
	struct item *items;
	uint32_t count = 0, used = 0;

	memset(sum, 0, sizeof(*sum));
	if (nslots < sl_shm_index_size(n) || (nslots & (nslots - 1)))
		return -EINVAL;
	memset(slots, 0, (size_t)nslots * sizeof(*slots));
	if (n == 0)
		return 0;
	if (!(items = malloc((size_t)n * sizeof(*items))))
		return -ENOMEM;
	for (uint32_t p = 0; p < n; p++) {
		uint64_t tag = pattern_tag(&pats[p]);

		if (!tag)
			continue;
		items[count++] = (struct item){tag, p};
		sum->kinds |= kind_bit(pats[p].kind, key_port(&pats[p]));
		if (pats[p].kind == SL_PAT_V4)
			sum->v4_lens |= 1ull << SL_MIN(pats[p].prefix, 32);
		else if (pats[p].kind == SL_PAT_V6) {
			unsigned len = SL_MIN(pats[p].prefix, 128);

			sum->v6_lens[len / 64] |= 1ull << (len % 64);
		}
	}
	qsort(items, count, sizeof(*items), by_tag);
	/* One slot per tag, naming the run of refs its patterns fill: at most half
	 * the slots are taken, so every probe run ends at a free slot. */
	for (uint32_t i = 0; i < count;) {
		uint32_t j = i, home = (uint32_t)(items[i].tag & (nslots - 1)), dist = 0, s = home;

		while (j < count && items[j].tag == items[i].tag) {
			refs[used + (j - i)] = items[j].pattern;
			j++;
		}
		while (slots[s].tag) {
			s = (s + 1) & (nslots - 1);
			dist++;
		}
		slots[s] = (struct sl_index_slot){items[i].tag, used, j - i};
		sum->run = SL_MAX(sum->run, dist + 1);
		used += j - i;
		i = j;
	}
	free(items);
	return 0;
}

/* --- the lookup (lock-free, over untrusted memory) --- */

struct probe {
	const struct sl_index_slot *slots;
	const uint32_t *refs;
	uint32_t mask;     /* nslots - 1 */
	uint32_t run;      /* probes per key at most */
	uint32_t nrefs;    /* refs this process may read */
	uint32_t kinds;
	int (*fn)(uint32_t pattern, void *arg);
	void *arg;
};

/* Hand over the patterns of the key with `tag`.  Returns fn's verdict. */
static int probe_tag(const struct probe *p, uint64_t tag)
{
	uint32_t s = (uint32_t)tag & p->mask;

	for (uint32_t n = 0; n < p->run; n++, s = (s + 1) & p->mask) {
		uint64_t t = p->slots[s].tag;
		uint32_t first, count;

		if (t == 0)
			return 0;
		if (t != tag)
			continue;
		first = SL_MIN(p->slots[s].first, p->nrefs);
		count = SL_MIN(p->slots[s].count, p->nrefs - first);
		for (uint32_t r = 0; r < count; r++) {
			int rc = p->fn(p->refs[first + r], p->arg);

			if (rc)
				return rc;
		}
		return 0; /* a tag has one slot */
	}
	return 0;
}

/* Probe a key's hash under the ports it may carry: the destination's, and none. */
static int probe_key(const struct probe *p, uint64_t h, unsigned kind, unsigned port, unsigned len)
{
	int rc = 0;

	if (port && (p->kinds & kind_bit(kind, 1)))
		rc = probe_tag(p, tag_of(h, kind, port, len));
	if (!rc && (p->kinds & kind_bit(kind, 0)))
		rc = probe_tag(p, tag_of(h, kind, 0, len));
	return rc;
}

static int probe_name(const struct probe *p, const struct sl_dest *d)
{
	size_t len = SL_MIN(d->name_len, (size_t)SL_HOST_MAX - 1);
	uint64_t h = FNV_OFFSET;
	int suffixes = (p->kinds & (kind_bit(SL_PAT_SUFFIX, 0) | kind_bit(SL_PAT_SUFFIX, 1))) != 0;

	/* Right to left: at each dot inside the name, h is the hash of the suffix that
	 * begins there (".example.com"), which `*.example.com` is keyed by. */
	for (size_t i = len; i > 0; i--) {
		int rc;

		h = (h ^ (uint8_t)d->name[i - 1]) * FNV_PRIME;
		if (suffixes && i - 1 > 0 && d->name[i - 1] == '.' &&
		    (rc = probe_key(p, h, SL_PAT_SUFFIX, d->port, (unsigned)(len - (i - 1)))))
			return rc;
	}
	return probe_key(p, h, SL_PAT_NAME, d->port, (unsigned)len);
}

static int probe_addr(const struct probe *p, const struct sl_dest *d, const uint64_t *lens,
                      unsigned kind, unsigned width)
{
	/* Only the lengths some pattern uses: the set bits, lowest first. */
	for (unsigned w = 0; w <= width / 64; w++)
		for (uint64_t set = lens[w]; set; set &= set - 1) {
			unsigned bits = w * 64 + (unsigned)__builtin_ctzll(set);
			int rc;

			if (bits > width)
				return 0;
			if ((rc = probe_key(p, addr_hash(d->addr, bits), kind, d->port, bits)))
				return rc;
		}
	return 0;
}

int sl_index_lookup(struct sl_shm_header *h, const struct sl_dest *d,
                    int (*fn)(uint32_t pattern, void *arg), void *arg)
{
	const struct sl_shm_view *v = sl_shm_view(h);
	struct sl_summary sum;
	struct probe p;
	uint64_t v4[1], v6[3];
	int rc;

	if (!v || v->index_slots == 0)
		return 0;
	p.slots = sl_shm_index_slots(h, v);
	p.refs = sl_shm_refs(h, v);
	p.mask = v->index_slots - 1;
	sl_summary_get(h, &sum);
	p.run = SL_MIN(sum.index_run, v->index_slots);
	p.nrefs = v->dims.patterns;
	p.kinds = sum.index_kinds;
	p.fn = fn;
	p.arg = arg;
	if (d->name && d->name_len > 0 &&
	    (p.kinds & (kind_bit(SL_PAT_NAME, 0) | kind_bit(SL_PAT_NAME, 1) | kind_bit(SL_PAT_SUFFIX, 0) |
	                kind_bit(SL_PAT_SUFFIX, 1))) &&
	    (rc = probe_name(&p, d)))
		return rc;
	if (d->family == AF_INET && (p.kinds & (kind_bit(SL_PAT_V4, 0) | kind_bit(SL_PAT_V4, 1)))) {
		v4[0] = sum.v4_lens;
		if ((rc = probe_addr(&p, d, v4, SL_PAT_V4, 32)))
			return rc;
	}
	if (d->family == AF_INET6 && (p.kinds & (kind_bit(SL_PAT_V6, 0) | kind_bit(SL_PAT_V6, 1)))) {
		for (unsigned i = 0; i < 3; i++)
			v6[i] = sum.v6_lens[i];
		if ((rc = probe_addr(&p, d, v6, SL_PAT_V6, 128)))
			return rc;
	}
	return probe_key(&p, FNV_OFFSET, SL_PAT_ANY, d->port, 0);
}
