/*
 * wait.h - the segment calls of an admission, each made with every signal blocked
 * (core/pending.c steps through them; the shim and the supervisor call a few
 * directly).
 *
 * The segment lock is only ever taken with every signal blocked, so a handler that
 * siglongjmps out of a wait can never leave the lock held; sleeping happens with the
 * caller's own signal mask.
 */
#ifndef SLUICE_WAIT_H
#define SLUICE_WAIT_H

#include "sluice/admit.h"

#include <signal.h>

/* sl_admit_reserve() and, when the slot is already due, sl_admit_release_act() in
 * the same critical section (one signal-mask round trip, not two, for a call that
 * does not wait).  Returns the reservation's result; when it is 0, *release_rc is
 * 0 (released, or nothing to wait for), 1 (wait until *retry_ns), or -ETIMEDOUT
 * (the release check could not be made: nothing was released). */
int sl_wait_reserve_go_act(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                           int32_t self, struct sl_ticket *t, uint64_t bytes, int *release_rc,
                           int64_t *retry_ns, sl_act_fn act, void *arg);
/* sl_admit_release_act() now: 0 released, 1 and *retry_ns, or its errors. */
int sl_wait_release_act(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                        int64_t *retry_ns, sl_act_fn act, void *arg);
int sl_wait_check(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                  int32_t self, struct sl_ticket *t);
void sl_wait_refund(struct sl_shm_header *h, const struct sl_ticket *t, int32_t self);
void sl_wait_moved(struct sl_shm_header *h, const struct sl_match *m, int64_t from, int64_t to,
                   int32_t self);
void sl_wait_made(struct sl_shm_header *h, const struct sl_match *m, int64_t checked, int64_t end,
                  int32_t self);

/* sl_conc_take() and sl_conc_put() with signals blocked (one attempt: a place
 * is given back for sure by sl_pending_give_back). */
int sl_wait_conc_take(struct sl_shm_header *h, struct sl_match *m, int32_t self, uint64_t *taken,
                      int *full, uint32_t *seen);
int sl_wait_conc_put(struct sl_shm_header *h, uint64_t mask, struct sl_match *m, int32_t self);

#endif
