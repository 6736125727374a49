#include "sluice/wait.h"
#include "sluice/clock.h"
#include "sluice/common.h"

#include <errno.h>
#include <pthread.h>
#include <sys/prctl.h>

struct critical {
	sigset_t old;
};

static void enter_critical(struct critical *c)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &c->old);
}

static void leave_critical(struct critical *c)
{
	pthread_sigmask(SIG_SETMASK, &c->old, NULL);
}

int sl_wait_reserve(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                    int32_t self, struct sl_ticket *t)
{
	struct critical c;
	int rc;

	enter_critical(&c);
	rc = sl_admit_reserve(h, m, now, self, t);
	leave_critical(&c);
	return rc;
}

int sl_wait_check(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                  int32_t self, struct sl_ticket *t)
{
	struct critical c;
	int rc;

	enter_critical(&c);
	rc = sl_admit_check(h, m, now, self, t);
	leave_critical(&c);
	return rc;
}

void sl_wait_refund(struct sl_shm_header *h, const struct sl_ticket *t, int32_t self)
{
	struct critical c;

	enter_critical(&c);
	sl_admit_refund(h, t, self);
	leave_critical(&c);
}

int sl_wait_release(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                    volatile sig_atomic_t *stop)
{
	int64_t at = t->release_ns, retry;
	int slack = -1, rc = 0;

	for (int rounds = 0; rounds < 1000; rounds++) {
		struct critical c;

		if (at > sl_clock_mono_ns()) {
			/* The default 50us timer slack would make every release late by that
			 * much: sleep precisely, and put the thread's own setting back after. */
			if (slack < 0 && (slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) > 1)
				prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
			while (sl_clock_sleep_until(at) == -EINTR) {
				if (stop && *stop) {
					sl_wait_refund(h, t, self);
					rc = -EINTR;
					goto out;
				}
			}
		}
		enter_critical(&c);
		rc = sl_admit_release(h, t, sl_clock_mono_ns(), self, &retry);
		leave_critical(&c);
		if (rc == 0)
			break;
		at = retry;
		rc = 0;
	}
out:
	if (slack > 1)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	return rc;
}

int sl_wait_try_release(struct sl_shm_header *h, struct sl_ticket *t, int32_t self,
                        int64_t *retry_ns)
{
	struct critical c;
	int rc;

	enter_critical(&c);
	rc = sl_admit_release(h, t, sl_clock_mono_ns(), self, retry_ns);
	leave_critical(&c);
	return rc;
}
