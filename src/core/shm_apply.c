/*
 * Compiling a config into the segment: load and reload (shm.h,
 * sl_shm_apply_config).
 *
 * Everything that does not need the segment is done first, in private memory and
 * without the lock: the match index of the new patterns, and a map from section
 * names to the config's sections.  Under the lock and the spec seqlock the sections
 * are then placed (a section that stays keeps its slot, serial and state), their
 * patterns written with the slot they belong to, and the index copied in; shims
 * that match meanwhile see an odd seqlock and read under the lock, which waits for
 * the whole rewrite.
 */
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/index.h"
#include "sluice/keys.h"
#include "sluice/shm.h"
#include "sluice/summary.h"
#include "sluice/strategy.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

/* How long the last load held the segment lock (ns): shims that match meanwhile
 * wait for it.  Said in the daemon's log. */
static int64_t held_ns;

int64_t sl_shm_apply_held_ns(void)
{
	return held_ns;
}

/* The config's sections by name: an open-addressing table of indices + 1. */
struct by_name {
	uint32_t *slot;
	uint32_t mask;
};

static uint32_t hash_name(const char *s, size_t max)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < max && s[i]; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static int by_name_make(struct by_name *m, const struct sl_config *cfg)
{
	uint32_t cap = (uint32_t)sl_pow2_at_least((uint64_t)cfg->nsections * 2 + 2);

	if (!(m->slot = calloc(cap, sizeof(*m->slot))))
		return -ENOMEM;
	m->mask = cap - 1;
	for (unsigned j = 0; j < cfg->nsections; j++) {
		uint32_t i = hash_name(cfg->sections[j].spec.name, SL_SECTION_NAME_MAX) & m->mask;

		while (m->slot[i])
			i = (i + 1) & m->mask;
		m->slot[i] = j + 1;
	}
	return 0;
}

/* The config section named `name` (a segment's: maybe unterminated), or -1. */
static int by_name_find(const struct by_name *m, const struct sl_config *cfg, const char *name)
{
	for (uint32_t i = hash_name(name, SL_SECTION_NAME_MAX) & m->mask; m->slot[i]; i = (i + 1) & m->mask)
		if (strncmp(cfg->sections[m->slot[i] - 1].spec.name, name, SL_SECTION_NAME_MAX) == 0)
			return (int)m->slot[i] - 1;
	return -1;
}

/* What the rewrite needs, made before the lock. */
struct plan {
	struct sl_index_slot *slots;
	uint32_t *refs;
	struct sl_index_summary sum;
	struct by_name names;
	uint32_t *slot_of;       /* config section -> segment slot (placed + 1; 0: not yet) */
	struct sl_spec *old;     /* config section -> the spec its slot had, when its keys
	                          * are to be converted to the new one */
	uint8_t *convert;        /* config section -> 1: convert its keys; 3: and drop their
	                          * leases (the section changed scope) */
};

static void plan_free(struct plan *p)
{
	free(p->slots);
	free(p->refs);
	free(p->names.slot);
	free(p->slot_of);
	free(p->old);
	free(p->convert);
}

static int plan_make(struct plan *p, const struct sl_shm_view *v, const struct sl_config *cfg)
{
	size_t n = SL_MAX(cfg->nsections, 1u);

	memset(p, 0, sizeof(*p));
	p->slots = malloc((size_t)v->index_slots * sizeof(*p->slots));
	p->refs = malloc((size_t)SL_MAX(cfg->npatterns, 1u) * sizeof(*p->refs));
	p->slot_of = calloc(n, sizeof(*p->slot_of));
	p->old = calloc(n, sizeof(*p->old));
	p->convert = calloc(n, 1);
	if (!p->slots || !p->refs || !p->slot_of || !p->old || !p->convert ||
	    by_name_make(&p->names, cfg) < 0 ||
	    sl_index_build(cfg->patterns, cfg->npatterns, p->slots, v->index_slots, p->refs, &p->sum) < 0) {
		plan_free(p);
		return -ENOMEM;
	}
	return 0;
}

/* A section's state and its more, as a new one starts them. */
static void clear_state(struct sl_section *sec)
{
	memset(&sec->state, 0, sizeof(sec->state));
	memset(&sec->more, 0, sizeof(sec->more));
}

/* Pass 1: a section that stays (by name) keeps its slot, its serial - so waiters
 * admitted under the old config are released by the new one's checks - and its
 * state, converted to the new limit.  Only a new meter or new keys start it afresh:
 * its counts were of something else.  A section gone frees its slot. */
static void keep_staying(struct sl_shm_header *h, const struct sl_config *cfg, struct plan *p,
                         uint32_t used, int64_t now)
{
	for (uint32_t i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);
		const struct sl_spec *to;
		int j;

		if (!sec->in_use)
			continue;
		sec->spec.name[SL_SECTION_NAME_MAX - 1] = '\0';
		j = by_name_find(&p->names, cfg, sec->spec.name);
		if (j < 0 || p->slot_of[j]) {
			sec->in_use = 0;
			sec->serial++;
			clear_state(sec);
			continue;
		}
		to = &cfg->sections[j].spec;
		if (sec->spec.meter != to->meter || sec->spec.per != to->per ||
		    sec->spec.per_prefix4 != to->per_prefix4 || sec->spec.per_prefix6 != to->per_prefix6) {
			/* Counts of something else, or of other keys: start afresh (its
			 * keys' records become free with the serial). */
			sec->serial++;
			clear_state(sec);
		} else if (sec->spec.per != SL_PER_NONE) {
			p->old[j] = sec->spec; /* its keys are converted below, in one walk */
			p->convert[j] = sec->spec.scope != to->scope ? 3 : 1;
		} else {
			sl_strategy_convert(&sec->spec, to, &sec->state, now, h->wall_off_ns);
			/* A lease is the fleet's answer for this scope: another scope starts
			 * without one (a fleet section waits for its first). */
			if (sec->spec.scope != to->scope)
				memset(&sec->more.lease, 0, sizeof(sec->more.lease));
		}
		sec->spec = *to;
		p->slot_of[j] = i + 1;
	}
}

/* Pass 2: new sections take free slots, lowest first, with zeroed state. */
static void place_new(struct sl_shm_header *h, const struct sl_config *cfg, struct plan *p,
                      uint32_t nslots)
{
	uint32_t i = 0;

	for (unsigned j = 0; j < cfg->nsections; j++) {
		struct sl_section *sec = NULL;

		if (p->slot_of[j])
			continue;
		for (; i < nslots; i++) {
			sec = sl_shm_section(h, i);
			if (!sec->in_use)
				break;
		}
		if (i == nslots)
			return; /* cannot be: sl_shm_fits() counted them */
		sec->serial++;
		clear_state(sec);
		sec->spec = cfg->sections[j].spec;
		sec->in_use = 1;
		p->slot_of[j] = ++i;
	}
}

struct convert_arg {
	const struct sl_config *cfg;
	struct plan *p;
	int64_t now, wall_off;
	struct sl_shm_header *h;
};

/* One walk over the key table: each key of a section that stays is converted to
 * its section's new limit. */
static int convert_key(struct sl_key *k, uint32_t slot, void *arg)
{
	struct convert_arg *c = arg;
	struct sl_section *sec = sl_shm_section(c->h, k->section);
	int j;

	(void)slot;
	if (!sec || (j = by_name_find(&c->p->names, c->cfg, sec->spec.name)) < 0 || !c->p->convert[j])
		return 0;
	/* An old spec that reads a more these records lack was scribbled on: the
	 * key's state stays as it is rather than be converted past its record. */
	if (sl_spec_needs_more(&c->p->old[j]) && !sl_shm_dims_of(c->h).key_more)
		return 0;
	sl_strategy_convert(&c->p->old[j], &c->cfg->sections[j].spec, &k->state, c->now, c->wall_off);
	if (c->p->convert[j] == 3 && sl_shm_dims_of(c->h).key_more) /* a fleet key has a more */
		memset(&sl_state_more(&k->state)->lease, 0, sizeof(struct sl_lease));
	return 0;
}

int sl_shm_apply_config(struct sl_shm_header *h, const struct sl_config *cfg, int32_t self)
{
	return sl_shm_apply_config_at(h, cfg, self, sl_clock_mono_ns());
}

int sl_shm_apply_config_at(struct sl_shm_header *h, const struct sl_config *cfg, int32_t self,
                           int64_t now)
{
	const struct sl_shm_view *v = sl_shm_view(h);
	uint32_t meters = 0, slots_used = 0, used, seq, old_patterns;
	struct sl_pattern *pats;
	struct plan p;
	char why[160];
	int rc;

	if (!v)
		return -EINVAL;
	if (sl_shm_fits(h, cfg, why, sizeof(why)) < 0)
		return -ENOSPC;
	if ((rc = plan_make(&p, v, cfg)) < 0)
		return rc;
	if ((rc = sl_shm_lock(h, self, SL_NS_PER_S)) < 0) {
		plan_free(&p);
		return rc;
	}
	held_ns = sl_clock_mono_ns();
	/* Odd: writing.  Set odd rather than incremented: a writer killed half way
	 * left it odd, and one more increment would make it even while we write. */
	seq = atomic_load_explicit(A(&h->spec_seq), memory_order_relaxed) | 1u;
	atomic_store_explicit(A(&h->spec_seq), seq, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);

	used = SL_MIN(h->slots_used, v->dims.sections);
	keep_staying(h, cfg, &p, used, now);
	place_new(h, cfg, &p, v->dims.sections);
	/* An override names its base by config index; in the segment, by slot. */
	for (unsigned j = 0; j < cfg->nsections; j++) {
		uint32_t of = cfg->sections[j].spec.override_of;

		sl_shm_section(h, p.slot_of[j] - 1)->spec.override_of =
			of && of <= cfg->nsections ? p.slot_of[of - 1] : 0;
	}
	{
		struct convert_arg c = {cfg, &p, now, h->wall_off_ns, h};

		sl_keys_each(h, convert_key, &c);
	}
	/* Patterns where the config has them, each naming the slot of its section;
	 * what an earlier, longer config left beyond them is cleared. */
	pats = sl_shm_pattern(h, 0);
	old_patterns = SL_MIN(h->patterns_used, v->dims.patterns);
	for (unsigned j = 0; j < cfg->nsections; j++) {
		const struct sl_spec *s = &cfg->sections[j].spec;

		for (uint32_t q = s->pattern_first; q < s->pattern_first + s->npatterns; q++) {
			pats[q] = cfg->patterns[q];
			pats[q].section = p.slot_of[j] - 1;
		}
	}
	if (old_patterns > cfg->npatterns)
		memset(pats + cfg->npatterns, 0, (size_t)(old_patterns - cfg->npatterns) * sizeof(*pats));
	memcpy(sl_shm_index_slots(h, v), p.slots, (size_t)v->index_slots * sizeof(*p.slots));
	memcpy(sl_shm_refs(h, v), p.refs, (size_t)cfg->npatterns * sizeof(*p.refs));
	h->patterns_used = cfg->npatterns;
	h->index_kinds = p.sum.kinds;
	h->index_run = p.sum.run;
	h->index_v4_lens = p.sum.v4_lens;
	memcpy(h->index_v6_lens, p.sum.v6_lens, sizeof(h->index_v6_lens));

	/* Each summary field is worked out aside and stored once: shims read meters
	 * and has_names before, and outside, the spec seqlock, so a field zeroed
	 * while it was rebuilt read as "no section meters connections" - and every
	 * connect in that window, a daemon preempted or killed in it, went unshaped
	 * (make chaos at 2,000 processes: a SYN 9.3 ms early just after a restart). */
	for (unsigned j = 0; j < cfg->nsections; j++) {
		meters |= 1u << (cfg->sections[j].spec.meter & 31);
		slots_used = SL_MAX(slots_used, p.slot_of[j]);
	}
	/* Records of keys whose sections went or were reset are free again. */
	sl_keys_sweep(h);
	h->has_names = (p.sum.kinds & ((3u << (SL_PAT_NAME * 2)) | (3u << (SL_PAT_SUFFIX * 2)))) != 0;
	/* The daemon's heartbeat follows steps of the wall clock, renumbering the
	 * windows as it does (sl_admit_wall_step); a load only sets a first offset. */
	if (!h->wall_off_ns)
		h->wall_off_ns = sl_clock_wall_offset_follow(0);
	h->meters = meters;
	h->slots_used = slots_used;
	h->fallback = (uint32_t)cfg->global.fallback;
	snprintf(h->config_path, sizeof(h->config_path), "%s", cfg->path);
	h->generation++;
	sl_summary_seal(h);
	/* Every slot a section was or is in, sealed as it now stands (a freed one
	 * too: a scribble that marks it in use again disagrees). */
	for (uint32_t i = 0, n = SL_MAX(used, slots_used); i < n; i++)
		sl_section_seal(sl_shm_section(h, i));

	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(A(&h->spec_seq), seq + 1, memory_order_relaxed); /* even: done */
	sl_shm_unlock(h, self);
	held_ns = sl_clock_mono_ns() - held_ns;
	plan_free(&p);
	return 0;
}
