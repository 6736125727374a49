/*
 * conc.h - concurrency limits (docs/config.md `concurrency = N`): at most N connections to
 * a section's destinations open at once, across every process on the machine.
 *
 * A place is taken under the segment lock and counted twice: in the section
 * (conc_open) and in the taker's holder entry, so that what a process holds when it
 * dies - kill -9 included - is given back by the daemon's heartbeat.  Giving a place
 * back bumps the section's futex word and wakes its waiters: a waiting caller goes
 * as soon as a place frees, without polling.
 */
#ifndef SLUICE_CONC_H
#define SLUICE_CONC_H

#include "sluice/admit.h"
#include "sluice/shm-t.h"

#include <stdint.h>

/* The sections of m that limit concurrency, as positions in m (read lock-free
 * from the specs). */
uint64_t sl_conc_sections(struct sl_shm_header *h, const struct sl_match *m);

/* Take one place in every section of m that limits concurrency, or none (a keyed
 * section's place in the key of m's destination, which m->conc_key then names).
 * Returns 0 with *taken set (positions in m; 0 when none limits), -EBUSY when a
 * section is full (nothing taken; *full is its section index, *seen its futex
 * word's value to wait on), -EDQUOT when a keyed section's key table has no room
 * for the key (*full is the section; its key_full is counted) or more sections
 * apply than a match holds (m->overflow), -ENOSPC when the holder table is full,
 * -ETIMEDOUT when the lock could not be had. */
int sl_conc_take(struct sl_shm_header *h, struct sl_match *m, int32_t self, uint64_t *taken,
                 int *full, uint32_t *seen);

/* Give back the places `mask` took (m's serials and conc_key say where they were).
 * Returns 0 when given back, or, with nothing changed: -EXDEV (the segment is
 * marked moved: its successor holds the places now, or the mark is a scribble
 * sluiced clears), -ETIMEDOUT (no lock), -EBADMSG (a section's seal is broken:
 * sluiced writes it back).  A place never given back stays counted as long as its
 * process lives, so a caller tries again (sl_pending_give_back). */
int sl_conc_put(struct sl_shm_header *h, uint64_t mask, struct sl_match *m, int32_t self);

/* The value of the futex word sl_conc_wait would sleep on for section `idx` (read
 * without the lock). */
uint32_t sl_conc_seen(struct sl_shm_header *h, const struct sl_match *m, unsigned idx);

/* Sleep until the futex word of section `idx` (or of its key that m names) moves
 * from `seen` (a place was given back), or `timeout_ns` passes.  Never returns an
 * error; the caller re-takes. */
void sl_conc_wait(struct sl_shm_header *h, struct sl_match *m, unsigned idx, uint32_t seen,
                  int64_t timeout_ns);

/* Daemon, at each heartbeat: give back what processes that `is_dead` says died held.
 * Returns how many places were given back. */
int sl_conc_reap_dead(struct sl_shm_header *h, int32_t self, sl_gone_fn is_dead);

/* Wake st's waiters: a place was given back, or (a fleet section) more were leased. */
void sl_conc_wake(struct sl_state *st);

/* Re-place every holder entry of `from` in `to`, a new segment whose sections were
 * carried over at their indices (shm.c). */
void sl_conc_carry(struct sl_shm_header *to, struct sl_shm_header *from);

#endif
