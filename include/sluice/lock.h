/*
 * lock.h - the segment's lock (docs/design.md, "Invariants"), kept apart from the
 * segment's layout and attach as nginx keeps its shared mutex apart from its zones.
 *
 * One 64-bit lock word per segment holds the holder's roster token and its
 * registration's nonce (roster.h).  A waiter that finds no such holder - its
 * registration ended (the kernel said it exited), a zombie or gone by /proc in
 * the waiter's own pid namespace, or a word no registration wrote - takes the lock
 * over, so a process killed -9 inside the critical section never wedges the
 * others, whatever pid namespace either lives in.  Waiters
 * spin briefly, then sleep on the word's futex in short slices and give up after a
 * deadline (the caller's fallback then decides): a corrupt segment can slow a call
 * down, never hang it.  Critical sections are a few hundred nanoseconds of
 * arithmetic, plus a non-blocking connect when one is made inside its release;
 * nobody sleeps or blocks while holding the lock.
 */
#ifndef SLUICE_LOCK_H
#define SLUICE_LOCK_H

#include "sluice/shm-t.h"

#include <stdint.h>

/* Take the segment lock as the process whose roster token is `self`.  Returns 0, 1
 * when the lock was taken over from a dead holder, or -ETIMEDOUT after
 * `timeout_ns` (at once when `self` names no live registration). */
int sl_shm_lock(struct sl_shm_header *h, int32_t self, int64_t timeout_ns);
void sl_shm_unlock(struct sl_shm_header *h, int32_t self);

/* Daemon, at each heartbeat: free the lock if its holder is dead. Returns 1 if it did. */
int sl_shm_reap_lock(struct sl_shm_header *h);

#endif
