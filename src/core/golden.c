/* The daemon's copy of the segment's configuration part, and the check (golden.h). */
#include "sluice/golden.h"
#include "sluice/common.h"
#include "sluice/shm.h"
#include "sluice/summary.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

/* The header fields of the configuration: the summary and what bounds reads. */
struct head {
	uint64_t generation;
	uint32_t has_names, fallback, slots_used, meters, patterns_used, index_kinds, index_run;
	uint64_t index_v4_lens, index_v6_lens[3], summary_sum;
};

/* Of each section: whether it is in use, its serial, its spec and their seal. */
struct spec_copy {
	uint32_t in_use, serial;
	struct sl_spec spec;
	uint64_t seal;
};

struct sl_golden {
	struct head head;
	uint32_t nsections, npatterns, nslots;
	struct spec_copy *sections;
	struct sl_pattern *patterns;
	struct sl_index_slot *slots;
	uint32_t *refs;
	size_t cursor; /* bytes of sections, patterns, slots, refs compared so far */
};

static void head_of(const struct sl_shm_header *h, struct head *o)
{
	memset(o, 0, sizeof(*o));
	o->generation = h->generation;
	o->has_names = h->has_names;
	o->fallback = h->fallback;
	o->slots_used = h->slots_used;
	o->meters = h->meters;
	o->patterns_used = h->patterns_used;
	o->index_kinds = h->index_kinds;
	o->index_run = h->index_run;
	o->index_v4_lens = h->index_v4_lens;
	memcpy(o->index_v6_lens, h->index_v6_lens, sizeof(o->index_v6_lens));
	o->summary_sum = h->summary_sum;
}

static void head_put(struct sl_shm_header *h, const struct head *o)
{
	h->generation = o->generation;
	h->has_names = o->has_names;
	h->fallback = o->fallback;
	h->slots_used = o->slots_used;
	h->meters = o->meters;
	h->patterns_used = o->patterns_used;
	h->index_kinds = o->index_kinds;
	h->index_run = o->index_run;
	h->index_v4_lens = o->index_v4_lens;
	memcpy(h->index_v6_lens, o->index_v6_lens, sizeof(h->index_v6_lens));
	h->summary_sum = o->summary_sum;
}

struct sl_golden *sl_golden_take(struct sl_shm_header *h)
{
	const struct sl_shm_view *v = sl_shm_view(h);
	struct sl_golden *g;

	if (!v || !(g = calloc(1, sizeof(*g))))
		return NULL;
	head_of(h, &g->head);
	g->nsections = SL_MIN(h->slots_used, v->dims.sections);
	g->npatterns = SL_MIN(h->patterns_used, v->dims.patterns);
	g->nslots = v->index_slots;
	g->sections = calloc(g->nsections ? g->nsections : 1, sizeof(*g->sections));
	g->patterns = malloc((g->npatterns ? g->npatterns : 1) * sizeof(*g->patterns));
	g->slots = malloc((g->nslots ? g->nslots : 1) * sizeof(*g->slots));
	g->refs = malloc((g->npatterns ? g->npatterns : 1) * sizeof(*g->refs));
	if (!g->sections || !g->patterns || !g->slots || !g->refs) {
		sl_golden_free(g);
		return NULL;
	}
	for (uint32_t i = 0; i < g->nsections; i++) {
		const struct sl_section *sec = sl_shm_section(h, i);

		g->sections[i] = (struct spec_copy){sec->in_use, sec->serial, sec->spec, sec->seal};
	}
	if (g->npatterns) {
		memcpy(g->patterns, sl_shm_pattern(h, 0), g->npatterns * sizeof(*g->patterns));
		memcpy(g->refs, sl_shm_refs(h, v), g->npatterns * sizeof(*g->refs));
	}
	memcpy(g->slots, sl_shm_index_slots(h, v), g->nslots * sizeof(*g->slots));
	return g;
}

void sl_golden_free(struct sl_golden *g)
{
	if (!g)
		return;
	free(g->sections);
	free(g->patterns);
	free(g->slots);
	free(g->refs);
	free(g);
}

/* The parts in the order the check walks them. */
enum { PART_SECTIONS, PART_PATTERNS, PART_SLOTS, PART_REFS, PARTS };

static size_t part_size(const struct sl_golden *g, int part)
{
	switch (part) {
	case PART_SECTIONS: return (size_t)g->nsections * sizeof(struct spec_copy);
	case PART_PATTERNS: return (size_t)g->npatterns * sizeof(struct sl_pattern);
	case PART_SLOTS: return (size_t)g->nslots * sizeof(struct sl_index_slot);
	default: return (size_t)g->npatterns * sizeof(uint32_t);
	}
}

static const char *part_name(int part)
{
	static const char *const names[] = {"a section's spec", "the pattern table", "the match index",
	                                    "the match index"};

	return names[part];
}

/* Whether records [from, to) of `part` differ in h from g (read without the lock:
 * only a difference is looked at again under it). */
static int differs(struct sl_shm_header *h, const struct sl_golden *g, int part, size_t from, size_t to)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	switch (part) {
	case PART_SECTIONS:
		for (size_t i = from; i < to; i++) {
			const struct sl_section *sec = sl_shm_section(h, (uint32_t)i);

			if (sec->in_use != g->sections[i].in_use || sec->serial != g->sections[i].serial ||
			    sec->seal != g->sections[i].seal ||
			    memcmp(&sec->spec, &g->sections[i].spec, sizeof(sec->spec)) != 0)
				return 1;
		}
		return 0;
	case PART_PATTERNS:
		return memcmp(sl_shm_pattern(h, (uint32_t)from), &g->patterns[from], (to - from) * sizeof(*g->patterns));
	case PART_SLOTS:
		return memcmp(sl_shm_index_slots(h, v) + from, &g->slots[from], (to - from) * sizeof(*g->slots));
	default:
		return memcmp(sl_shm_refs(h, v) + from, &g->refs[from], (to - from) * sizeof(*g->refs));
	}
}

static void put(struct sl_shm_header *h, const struct sl_golden *g, int part, size_t from, size_t to)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	switch (part) {
	case PART_SECTIONS:
		for (size_t i = from; i < to; i++) {
			struct sl_section *sec = sl_shm_section(h, (uint32_t)i);

			sec->in_use = g->sections[i].in_use;
			sec->serial = g->sections[i].serial;
			sec->spec = g->sections[i].spec;
			sec->seal = g->sections[i].seal;
		}
		break;
	case PART_PATTERNS:
		memcpy(sl_shm_pattern(h, (uint32_t)from), &g->patterns[from], (to - from) * sizeof(*g->patterns));
		break;
	case PART_SLOTS:
		memcpy(sl_shm_index_slots(h, v) + from, &g->slots[from], (to - from) * sizeof(*g->slots));
		break;
	default:
		memcpy(sl_shm_refs(h, v) + from, &g->refs[from], (to - from) * sizeof(*g->refs));
	}
}

static size_t record_size(int part)
{
	return part == PART_SECTIONS ? sizeof(struct spec_copy)
	       : part == PART_PATTERNS ? sizeof(struct sl_pattern)
	       : part == PART_SLOTS ? sizeof(struct sl_index_slot) : sizeof(uint32_t);
}

/* Under the lock and the seqlock (odd while it writes), as a load writes. */
static int restore(struct sl_shm_header *h, const struct sl_golden *g, int32_t self, int part, size_t from,
                   size_t to)
{
	uint32_t seq;

	if (sl_shm_lock(h, self, SL_NS_PER_S) < 0)
		return -ETIMEDOUT;
	seq = atomic_load_explicit(A(&h->spec_seq), memory_order_relaxed) | 1u;
	atomic_store_explicit(A(&h->spec_seq), seq, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	if (part < 0)
		head_put(h, &g->head);
	else
		put(h, g, part, from, to);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(A(&h->spec_seq), seq + 1, memory_order_relaxed);
	sl_shm_unlock(h, self);
	return 1;
}

int sl_golden_check(struct sl_shm_header *h, struct sl_golden *g, int32_t self, size_t budget,
                    const char **what)
{
	struct head now;
	size_t total = 0, left = budget;
	int fixed = 0, rc;

	head_of(h, &now);
	if (memcmp(&now, &g->head, sizeof(now)) != 0) {
		if ((rc = restore(h, g, self, -1, 0, 0)) < 0)
			return rc;
		*what = "the header's summary";
		fixed++;
	}
	for (int p = 0; p < PARTS; p++)
		total += part_size(g, p);
	if (total == 0)
		return fixed;
	if (left > total)
		left = total;
	while (left > 0) {
		size_t at = g->cursor % total, base = 0;
		int p = 0;

		while (at >= base + part_size(g, p)) /* the part the cursor is in */
			base += part_size(g, p++);
		{
			size_t rs = record_size(p), from = (at - base) / rs, n = part_size(g, p) / rs;
			size_t to = SL_MIN(n, from + SL_MAX(left / rs, (size_t)1));

			if (differs(h, g, p, from, to)) {
				if ((rc = restore(h, g, self, p, from, to)) < 0)
					return rc;
				*what = part_name(p);
				fixed++;
			}
			g->cursor = base + to * rs;
			left -= SL_MIN(left, (to - from) * rs);
			if (g->cursor >= total)
				g->cursor = 0;
		}
	}
	return fixed;
}
