/*
 * wait.h - holding a caller until its release: the part of an admission that
 * sleeps, shared by the shim and `sluice acquire`.
 *
 * The segment lock is only ever taken with every signal blocked, so a handler that
 * siglongjmps out of a wait can never leave the lock held; sleeping happens with the
 * caller's own signal mask.
 */
#ifndef SLUICE_WAIT_H
#define SLUICE_WAIT_H

#include "sluice/admit.h"

#include <signal.h>

/* sl_admit_reserve() / sl_admit_refund() with signals blocked around them. */
int sl_wait_reserve(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                    int32_t self, struct sl_ticket *t);
/* sl_admit_reserve() and, when the slot is already due, sl_admit_release_act() in
 * the same critical section (one signal-mask round trip, not two, for a call that
 * does not wait).  Returns the reservation's result; when it is 0, *release_rc is
 * 0 (released, or nothing to wait for), 1 (wait until *retry_ns), or -ETIMEDOUT
 * (the release check could not be made: try again, as sl_wait_release_act does). */
int sl_wait_reserve_go_act(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                           int32_t self, struct sl_ticket *t, int *release_rc, int64_t *retry_ns,
                           sl_act_fn act, void *arg);
int sl_wait_reserve_bytes(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                          int32_t self, struct sl_ticket *t, uint64_t bytes);
int sl_wait_check(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                  int32_t self, struct sl_ticket *t);
void sl_wait_refund(struct sl_shm_header *h, const struct sl_ticket *t, int32_t self);
void sl_wait_moved(struct sl_shm_header *h, const struct sl_match *m, int64_t from, int64_t to,
                   int32_t self);
void sl_wait_made(struct sl_shm_header *h, const struct sl_match *m, int64_t checked, int64_t end,
                  int32_t self);

/* Sleep to the ticket's slot on an absolute CLOCK_MONOTONIC deadline, then until the
 * release check agrees, and count the release.  A signal handler interrupts the
 * sleep; the wait then resumes towards the same deadline, unless `stop` is given and
 * has become nonzero, in which case the reservation is returned and -EINTR is the
 * result.  Returns 0 once released, or -ETIMEDOUT when the check could not be made
 * (no lock) or never agreed within its bounded rounds: then nothing was released,
 * and the caller's fallback policy decides. */
int sl_wait_release(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                    volatile sig_atomic_t *stop);

/* sl_admit_release() now, with signals blocked: 0 released, or 1 and *retry_ns. */
int sl_wait_try_release(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                        int64_t *retry_ns);

/* Both, with the released call made inside the release (sl_admit_release_act). */
int sl_wait_release_act(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                        volatile sig_atomic_t *stop, sl_act_fn act, void *arg);
int sl_wait_try_release_act(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                            int64_t *retry_ns, sl_act_fn act, void *arg);

/* Take a concurrency place in every section of m that limits concurrency, waiting
 * (futex, woken when a place is given back) until `deadline` (-1: none; -2: do not
 * wait, -EBUSY when full).  A full holder table or an unavailable lock counts as no
 * place (and as undecided in the section's counters): it is waited out like a full
 * limit, never passed.  A keyed section whose key table has no room for the key
 * refuses at once (-ECONNREFUSED, counted).  Returns 0 with *taken set, or -ECONNREFUSED at the deadline
 * (*full: the section that was full; its refusal is counted). */
int sl_wait_conc(struct sl_shm_header *h, struct sl_match *m, int32_t self, int64_t deadline,
                 uint64_t *taken, int *full);

/* sl_conc_put() with signals blocked. */
void sl_wait_conc_put(struct sl_shm_header *h, uint64_t mask, struct sl_match *m, int32_t self);

#endif
