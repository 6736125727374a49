/*
 * matchset.h - the set of sections that apply to one destination (struct
 * sl_match), found through the segment's match index (index.h) and compared,
 * joined and searched by the admission stepper and the shim's records.
 */
#ifndef SLUICE_MATCHSET_H
#define SLUICE_MATCHSET_H

#include "sluice/keys.h"
#include "sluice/match.h"
#include "sluice/shm-t.h"

#include <stdint.h>

/* A key record as a caller found it: slot and the record's serial then (serial 0:
 * none found yet).  Good while the record still has that serial (sl_keys_ref). */
struct sl_keyref {
	uint32_t slot;
	uint32_t serial;
};

#define SL_CONC_KEYS 4

/* The most sections that may apply to one destination.  A match names them by
 * position: bit k of a mask is the k-th section found, idx[k] its index in the
 * segment, so masks stay one word however many sections a config holds.  A
 * destination that more sections apply to is refused, never let through
 * (sl_match.overflow). */
#define SL_MATCH_MAX 64

struct sl_match {
	uint64_t mask;                  /* bit k: the section idx[k] applies */
	uint64_t keyed;                 /* of those, sections with a queue per key */
	uint32_t idx[SL_MATCH_MAX];     /* position -> section index */
	uint32_t serial[SL_MATCH_MAX];  /* each section's serial when it matched */
	uint32_t overflow;              /* more than SL_MATCH_MAX sections apply */
	uint32_t pad;
	struct sl_keysrc src;           /* what keyed sections make their keys of */
	/* Keyed sections limiting concurrency: the key whose place sl_conc_take took,
	 * for at most SL_CONC_KEYS of them per destination (a further one has no
	 * place to be had: refused, never let through). */
	struct sl_conc_key {
		uint32_t section; /* section index + 1 (not a position); 0: unused */
		struct sl_keyref ref;
	} conc_key[SL_CONC_KEYS];
};

/* The key ref kept in m for keyed section (index) i (made free for it with
 * `make`), or NULL. */
struct sl_keyref *sl_match_conc_key(struct sl_match *m, unsigned i, int make);

/* The position of section index i in m, or -1. */
int sl_match_find(const struct sl_match *m, uint32_t i);

/* Whether some section of m is one only a daemon can keep (sl_spec_needs_daemon). */
int sl_match_needs_daemon(struct sl_shm_header *h, const struct sl_match *m);

/* Whether every section of m agrees with its seal (summary.h): 0 when one was
 * scribbled since the daemon wrote it - nothing is to be decided on m then. */
int sl_match_sealed(struct sl_shm_header *h, const struct sl_match *m);

/* Whether a and b have a section in common. */
int sl_match_meets(const struct sl_match *a, const struct sl_match *b);

/* Whether a and b name the same sections at the same positions. */
int sl_match_same(const struct sl_match *a, const struct sl_match *b);

/* The positions a ticket needs room for to be reserved with m. */
static inline unsigned sl_match_positions(const struct sl_match *m)
{
	return m->mask ? 64u - (unsigned)__builtin_clzll(m->mask) : 0u;
}

/* out = the sections of a or b (out may be a): a's keep their positions, b's that
 * a lacks take free ones (none left: out->overflow). */
void sl_match_union(struct sl_match *out, const struct sl_match *a, const struct sl_match *b);

/* Fill `m` with the sections matching `d`, as process `self`.  Lock-free, retried
 * when a reload runs concurrently; when no steady read can be had, read under the
 * segment lock (the specs' writer holds it), or failing that as they are.  Never
 * "matches nothing" for want of a read.  Returns the number of matching sections. */
int sl_match_sections(struct sl_shm_header *h, const struct sl_dest *d, struct sl_match *m, int32_t self);

#endif
