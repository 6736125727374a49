/*
 * golden.h - the daemon's copy of what it wrote into the segment's configuration
 * part, and the heartbeat's check of the segment against it (docs/design.md,
 * "Invariants": nothing a shim reads may switch shaping off by being wrong).
 *
 * Whoever may write the segment may write anything into it.  What a shim trusts
 * to decide "no section applies, go" - the sections' specs, the pattern table,
 * the match index, the header's summary of them - is written by the daemon alone,
 * at a load; the daemon keeps a private copy (taken right after the load) and at
 * every heartbeat compares the segment with it, a bounded number of bytes at a
 * time, writing back whatever differs under the segment lock and the spec
 * seqlock.  So a scribble there lasts at most until the check reaches it: with
 * the default budget, one heartbeat for configs up to tens of thousands of
 * patterns.  (The header's summary is also sealed with a checksum a shim checks
 * on every use: summary.h.)  Sections' states, counters and leases change all
 * the time and are not compared; their own checks are sl_strategy_repair's.
 */
#ifndef SLUICE_GOLDEN_H
#define SLUICE_GOLDEN_H

#include "sluice/shm-t.h"

#include <stddef.h>
#include <stdint.h>

struct sl_golden;

/* A copy of h's configuration part as it is now (right after a load, under no
 * lock: only the daemon writes it).  NULL when out of memory. */
struct sl_golden *sl_golden_take(struct sl_shm_header *h);
void sl_golden_free(struct sl_golden *g);

/* Compare up to `budget` bytes of h with g, going on where the last call
 * stopped, and write back what differs.  Returns how many parts were restored
 * (or -ETIMEDOUT when the lock could not be had to do so); *what names the last
 * one ("the header's summary", "a section's spec", "the pattern table", "the
 * match index"). */
int sl_golden_check(struct sl_shm_header *h, struct sl_golden *g, int32_t self, size_t budget,
                    const char **what);

#endif
