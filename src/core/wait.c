#include "sluice/wait.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/critical.h"
#include "sluice/shm.h"

#include <errno.h>


int sl_wait_reserve_go_act(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                           int32_t self, struct sl_ticket *t, uint64_t bytes, int *release_rc,
                           int64_t *retry_ns, sl_act_fn act, void *arg)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_admit_reserve_go_act(h, m, now, self, t, bytes, release_rc, retry_ns, act, arg);
	sl_critical_leave(&c);
	return rc;
}

int sl_wait_check(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                  int32_t self, struct sl_ticket *t)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_admit_check(h, m, now, self, t);
	sl_critical_leave(&c);
	return rc;
}

void sl_wait_refund(struct sl_shm_header *h, const struct sl_ticket *t, int32_t self)
{
	struct sl_critical c;

	sl_critical_enter(&c);
	sl_admit_refund(h, t, self);
	sl_critical_leave(&c);
}

void sl_wait_moved(struct sl_shm_header *h, const struct sl_match *m, int64_t from, int64_t to,
                   int32_t self)
{
	struct sl_critical c;

	sl_critical_enter(&c);
	sl_admit_moved(h, m, from, to, self);
	sl_critical_leave(&c);
}

void sl_wait_made(struct sl_shm_header *h, const struct sl_match *m, int64_t checked, int64_t end,
                  int32_t self)
{
	struct sl_critical c;

	sl_critical_enter(&c);
	sl_admit_made(h, m, checked, end, self);
	sl_critical_leave(&c);
}

int sl_wait_conc_put(struct sl_shm_header *h, uint64_t mask, struct sl_match *m, int32_t self)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_conc_put(h, mask, m, self);
	sl_critical_leave(&c);
	return rc;
}

int sl_wait_conc_take(struct sl_shm_header *h, struct sl_match *m, int32_t self, uint64_t *taken,
                      int *full, uint32_t *seen)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_conc_take(h, m, self, taken, full, seen);
	sl_critical_leave(&c);
	return rc;
}

int sl_wait_release_act(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                        int64_t *retry_ns, sl_act_fn act, void *arg)
{
	struct sl_critical c;
	int rc;

	sl_critical_enter(&c);
	rc = sl_admit_release_act(h, t, SL_ADMIT_NOW, self, retry_ns, act, arg);
	sl_critical_leave(&c);
	return rc;
}
