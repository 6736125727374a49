/*
 * summary.h - the header's summary of the sections, and whether to believe it.
 *
 * A shim skips work on what the segment's header says of all the sections: which
 * meters some section uses (a datagram is matched only when one meters
 * datagrams), whether any matches by name, and the match index's kinds, prefix
 * lengths and longest probe.  A wrong summary is a switch that turns shaping off:
 * 0 written over `meters` once let ten clients go unshaped until a reload.  So the
 * daemon seals the summary with a checksum whenever it writes it (under the spec
 * seqlock), and a shim believes only a summary whose checksum agrees.  One that
 * does not is read as "everything": every meter, names, every kind and length,
 * probes as long as the index - slower, never a call let go for want of a look.
 * The daemon derives the summary again from the sections and the index at every
 * heartbeat and rewrites it when it differs (docs/design.md, "Invariants").
 */
#ifndef SLUICE_SUMMARY_H
#define SLUICE_SUMMARY_H

#include "sluice/shm-t.h"

#include <stdint.h>

struct sl_summary {
	uint32_t meters;      /* bit (1 << enum sl_meter) per meter some section uses */
	uint32_t has_names;   /* some section matches by host name */
	uint32_t index_kinds; /* the match index's kinds (index.c) */
	uint32_t index_run;   /* its longest probe (slots) */
	uint64_t v4_lens;     /* IPv4 prefix lengths some pattern uses */
	uint64_t v6_lens[3];  /* IPv6 prefix lengths */
};

/* A section's seal: the same guard for its in_use, serial and spec, which every
 * admission reads.  A scribble of four bytes there (a mode, a window, in_use) once
 * let thousands through before the daemon's next heartbeat wrote the section
 * back; now a shim that finds a section whose seal disagrees decides nothing on
 * it - its calls wait, undecided, for the daemon to write it back (admit.c,
 * pending.c) - and the matcher takes a section that looks unused or of another
 * meter only when its seal says so.  Sealed by the daemon at every load and
 * repair (shm_apply.c, golden.c). */
uint64_t sl_section_seal_of(const struct sl_section *sec);
void sl_section_seal(struct sl_section *sec);
static inline int sl_section_sealed(const struct sl_section *sec)
{
	return __atomic_load_n(&sec->seal, __ATOMIC_RELAXED) == sl_section_seal_of(sec);
}

/* The checksum of h's summary fields as they stand. */
uint64_t sl_summary_sum(const struct sl_shm_header *h);

/* The writer (under the lock and the spec seqlock): seal the summary as written. */
void sl_summary_seal(struct sl_shm_header *h);

/* The summary a reader may act on: h's own when its checksum agrees (kept per
 * thread while the spec seqlock stays at one even value, so the unmatched path
 * pays one load), else one that skips nothing.  Returns 1 when h's own. */
int sl_summary_get(const struct sl_shm_header *h, struct sl_summary *out);

#endif
