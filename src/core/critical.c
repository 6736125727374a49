/* Critical sections: blocked or deferred signals (critical.h). */
#include "sluice/critical.h"

#include <pthread.h>
#include <stdatomic.h>

/* Initial-exec TLS: read in signal handlers, where a lazily allocated block would
 * not be safe to reach.  (The shim is preloaded, so its TLS is static.) */
#define SL_TLS __thread __attribute__((tls_model("initial-exec")))

static SL_TLS unsigned depth;
static SL_TLS volatile sig_atomic_t deferred;
static void (*_Atomic flush_fn)(void);

void sl_critical_defer(void (*flush)(void))
{
	atomic_store_explicit(&flush_fn, flush, memory_order_release);
}

unsigned sl_critical_depth(void)
{
	return depth;
}

void sl_critical_note_deferred(void)
{
	deferred = 1;
}

void sl_critical_enter(struct sl_critical *c)
{
	c->blocked = atomic_load_explicit(&flush_fn, memory_order_acquire) == NULL;
	if (c->blocked) {
		sigset_t all;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &c->old);
	}
	depth++;
	atomic_signal_fence(memory_order_seq_cst); /* counted before the lock is taken */
}

void sl_critical_leave(struct sl_critical *c)
{
	atomic_signal_fence(memory_order_seq_cst); /* the lock let go before the count */
	depth--;
	if (c->blocked) {
		pthread_sigmask(SIG_SETMASK, &c->old, NULL);
		return;
	}
	if (depth == 0 && deferred) {
		void (*flush)(void) = atomic_load_explicit(&flush_fn, memory_order_acquire);

		deferred = 0;
		if (flush)
			flush();
	}
}
