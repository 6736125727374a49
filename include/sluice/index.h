/*
 * index.h - the match index: from a destination to the patterns that may take it,
 * without looking at the others (docs/design.md, "Sections, patterns and the match
 * index": matching by index, not by scanning).
 *
 * Every pattern has one key: its kind and host part (an exact name, a `*.suffix`,
 * an address cut to its prefix, or `*`) and its port when it names one port (0 for
 * a range or any port).  The daemon builds, for the loaded config, a hash table of
 * those keys (struct sl_index_slot, shm-t.h), each slot naming the run of patterns
 * that share the key.  A lookup forms the keys a destination could have - its
 * name, each of its name's label suffixes (a.b.example.com: .b.example.com,
 * .example.com, .com), its address cut to each prefix length some pattern uses,
 * `*` - each with the destination's port and with 0, and probes only for the kinds
 * the table holds.  So its cost follows the destination's name and the prefix
 * lengths in use, not the number of sections or patterns.
 *
 * The lookup only proposes: each pattern it hands over is still checked against
 * the destination (sl_pattern_match), so a collision of tags or a scribbled table
 * can cost a wrong candidate, never a wrong match.  It reads the segment as
 * untrusted: every index is clamped to this process's view of the tables, every
 * probe is bounded, and it makes no system call, takes no lock and allocates
 * nothing (the unmatched path).
 */
#ifndef SLUICE_INDEX_H
#define SLUICE_INDEX_H

#include "sluice/match.h"
#include "sluice/shm-t.h"

#include <stdint.h>

/* What a built index says about itself (stored in the segment's header). */
struct sl_index_summary {
	uint32_t kinds;       /* bit (kind * 2 + has port): keys of that kind present */
	uint32_t run;         /* longest distance of a key from its home slot, plus one */
	uint64_t v4_lens;     /* bit n: some IPv4 pattern has prefix length n */
	uint64_t v6_lens[3];  /* bit n: some IPv6 pattern has prefix length n */
};

/* Build the index of pats[0 .. n-1] into `slots` (nslots, a power of two at least
 * sl_shm_index_size(n), shm.h) and refs (n entries).  Works in private memory (the daemon
 * copies the result into the segment under the seqlock).  Patterns of kind
 * SL_PAT_NONE are left out.  Returns 0, or -ENOMEM, or -EINVAL when nslots is too
 * small. */
int sl_index_build(const struct sl_pattern *pats, uint32_t n, struct sl_index_slot *slots,
                   uint32_t nslots, uint32_t *refs, struct sl_index_summary *sum);

/* Call fn(pattern index, arg) for every pattern of the segment's index whose key
 * destination d has, until fn returns nonzero (returned then; else 0).  A pattern
 * may be handed over more than once (a tag shared by two keys), and one handed
 * over may still not match d.  Lock-free; the caller validates its read with the
 * spec seqlock. */
int sl_index_lookup(struct sl_shm_header *h, const struct sl_dest *d,
                    int (*fn)(uint32_t pattern, void *arg), void *arg);

#endif
