/*
 * The shim's lock (shim.h): a futex word, three states - 0 free, 1 held, 2 held
 * and someone may be asleep on it - so an uncontended lock and unlock are one
 * atomic each and never enter the kernel.  Its owner is not recorded: the shim
 * only ever takes it inside a critical section (signals deferred), so no handler
 * runs while it is held, and a fork child resets every one (they are private to
 * the process).
 */
#include "shim.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void futex(_Atomic uint32_t *word, int op, uint32_t val)
{
	sl_sys(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

void sl_mutex_lock(struct sl_mutex *m)
{
	uint32_t c = 0;

	if (atomic_compare_exchange_strong_explicit(&m->word, &c, 1, memory_order_acquire,
	                                            memory_order_relaxed))
		return;
	/* Held: mark it contended, and sleep until it is let go. */
	if (c != 2)
		c = atomic_exchange_explicit(&m->word, 2, memory_order_acquire);
	while (c != 0) {
		futex(&m->word, FUTEX_WAIT, 2);
		c = atomic_exchange_explicit(&m->word, 2, memory_order_acquire);
	}
}

void sl_mutex_unlock(struct sl_mutex *m)
{
	if (atomic_exchange_explicit(&m->word, 0, memory_order_release) == 2)
		futex(&m->word, FUTEX_WAKE, 1);
}
