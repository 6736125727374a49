/*
 * critical.h - the stretches of code in which the segment lock may be held.
 *
 * No signal handler of the program may run inside one: a handler that siglongjmps
 * out (the classic alarm() timeout around connect) would leave the lock held by a
 * live process, and every other process would wait for it until the lock's bound
 * and then fall back.  Two ways to keep handlers out:
 *   - blocking every signal around the section (two rt_sigprocmask calls): what
 *     the programs (`sluice acquire`) and the tests do, and the shim until it is
 *     set up;
 *   - deferring them: once the shim runs every handler of its host through its own
 *     trampoline (src/shim/signals.c), entering and leaving is a thread-local
 *     count, and a signal that arrives inside is raised again as the outermost
 *     section is left.  No system call on the admission path.
 * Sections nest (a handler that runs outside one may enter its own).
 */
#ifndef SLUICE_CRITICAL_H
#define SLUICE_CRITICAL_H

#include <signal.h>

struct sl_critical {
	sigset_t old; /* blocking: the mask to restore */
	int blocked;  /* blocking was used */
};

void sl_critical_enter(struct sl_critical *c);
void sl_critical_leave(struct sl_critical *c);

/* How deep this thread is in critical sections (0: in none).  Async-signal-safe:
 * what the shim's trampoline asks before it runs a handler. */
unsigned sl_critical_depth(void);

/* From now on, defer instead of blocking; `flush` is called when the outermost
 * section is left and something was deferred (sl_critical_note_deferred).  The
 * shim calls this once every handler goes through its trampoline. */
void sl_critical_defer(void (*flush)(void));

/* The trampoline kept a signal back: the outermost leave calls flush. */
void sl_critical_note_deferred(void);

#endif
