/*
 * The program's signal handlers, run through one trampoline, so that none of them
 * runs while this thread is in a critical section (sluice/critical.h) - without a
 * system call on the way in or out of one.
 *
 * sigaction(), signal(), bsd_signal(), sysv_signal(), sigset() and siginterrupt()
 * record the program's action and give the kernel the trampoline in its place, with
 * the program's flags and mask (and SA_SIGINFO).  Queries answer with the program's
 * own action.  Handlers installed before the shim started (another library's
 * constructor) are wrapped at start.  The trampoline runs the program's handler at
 * once, unless the thread is inside a critical section: then it notes the signal
 * and returns, and the outermost section's exit raises it again (tgkill) to the
 * same thread, where it is delivered as any signal is, to the program's handler.
 *
 * What differs from an unshaped run, said in docs/design.md: a signal kept back
 * arrives some microseconds late, as a signal sent by the process itself (its
 * siginfo says SI_TKILL and this pid), and several of one real-time signal kept
 * back together arrive as one.  Synchronous signals (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGTRAP, SIGSYS) are never wrapped: returning from one would fault again.
 * A handler installed by a raw rt_sigaction system call is not seen; without the
 * real sigaction, nothing is wrapped and critical sections block signals instead.
 */
#include "shim.h"
#include "sluice/critical.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SL_TLS __thread __attribute__((tls_model("initial-exec")))

/* The program's action for each signal.  Written under `writer` with every signal
 * blocked; read by the trampoline without a lock: the action in use is act[gen & 1],
 * a change fills the other one and then bumps gen, and a reader that sees gen move
 * while it copies reads again. */
static struct entry {
	_Atomic unsigned gen;
	struct sigaction act[2];
} table[_NSIG];

static atomic_flag writer = ATOMIC_FLAG_INIT;
static _Atomic int ready; /* handlers are wrapped from now on */

/* Signals kept back on this thread: bit sig - 1. */
static SL_TLS volatile uint64_t kept;

static int wrappable(int sig)
{
	switch (sig) {
	case SIGKILL:
	case SIGSTOP:
	case SIGSEGV:
	case SIGBUS:
	case SIGFPE:
	case SIGILL:
	case SIGTRAP:
	case SIGSYS:
		return 0;
	}
	/* Not glibc's own (its cancellation and set*id signals lie below SIGRTMIN). */
	return sig >= 1 && sig < _NSIG && sig <= 64 && (sig < 32 || sig >= SIGRTMIN);
}

static int is_handler(const struct sigaction *a)
{
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

/* The program's action for sig, copied whole. */
static void program_action(int sig, struct sigaction *out)
{
	for (;;) {
		unsigned g = atomic_load_explicit(&table[sig].gen, memory_order_acquire);

		memcpy(out, &table[sig].act[g & 1], sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&table[sig].gen, memory_order_relaxed) == g)
			return;
	}
}

/* Under `writer`: the program's action for sig becomes *a. */
static void set_program_action(int sig, const struct sigaction *a)
{
	unsigned g = atomic_load_explicit(&table[sig].gen, memory_order_relaxed);

	table[sig].act[(g + 1) & 1] = *a;
	atomic_store_explicit(&table[sig].gen, g + 1, memory_order_release);
}

static void lock_writer(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	while (atomic_flag_test_and_set_explicit(&writer, memory_order_acquire))
		sl_cpu_relax();
}

static void unlock_writer(const sigset_t *old)
{
	atomic_flag_clear_explicit(&writer, memory_order_release);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void trampoline(int sig, siginfo_t *si, void *uc);

/* What the kernel is given for the program's action a: the trampoline, with a's
 * flags and mask. */
static void kernel_action(const struct sigaction *a, struct sigaction *k)
{
	*k = *a;
	k->sa_sigaction = trampoline;
	k->sa_flags |= SA_SIGINFO;
}

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	struct sigaction a;

	program_action(sig, &a);
	if (sl_critical_depth() > 0) {
		kept |= 1ULL << (sig - 1);
		sl_critical_note_deferred();
		/* SA_RESETHAND: the kernel has just reset the action.  The program's
		 * handler has not run yet, so the trampoline is put back for the signal
		 * raised again. */
		if (a.sa_flags & SA_RESETHAND) {
			struct sigaction k;

			kernel_action(&a, &k);
			sl_real.sigaction(sig, &k, NULL);
		}
		errno = saved;
		return;
	}
	/* (SA_RESETHAND: the kernel's action is the default now, and a query says
	 * so: sigaction asks the kernel first.) */
	errno = saved;
	if (!is_handler(&a))
		return; /* changed to SIG_DFL or SIG_IGN while this one was on its way */
	if (a.sa_flags & SA_SIGINFO)
		a.sa_sigaction(sig, si, uc);
	else
		a.sa_handler(sig);
}

/* The outermost critical section is left: raise again what was kept back. */
static void flush(void)
{
	uint64_t sigs = kept;
	int saved = errno;

	kept = 0;
	for (int sig = 1; sigs; sig++, sigs >>= 1)
		if (sigs & 1)
			sl_sys(SYS_tgkill, (pid_t)sl_sys(SYS_getpid), (pid_t)sl_sys(SYS_gettid), sig);
	errno = saved;
}

void sl_signals_init(void)
{
	int (*real)(int, const struct sigaction *, struct sigaction *) = SL_REAL(sigaction, sigaction);
	sigset_t old;

	if (!real)
		return; /* critical sections block signals instead */
	lock_writer(&old);
	for (int sig = 1; sig < _NSIG; sig++) {
		struct sigaction cur, k;

		if (!wrappable(sig) || real(sig, NULL, &cur) != 0)
			continue;
		if (!is_handler(&cur) || cur.sa_sigaction == trampoline)
			continue;
		set_program_action(sig, &cur);
		kernel_action(&cur, &k);
		real(sig, &k, NULL);
	}
	atomic_store_explicit(&ready, 1, memory_order_release);
	unlock_writer(&old);
	sl_critical_defer(flush);
}

SL_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int (*real)(int, const struct sigaction *, struct sigaction *) = SL_REAL(sigaction, sigaction);
	struct sigaction prev, k;
	sigset_t mask;
	int rc;

	if (sl_unlikely(!real)) {
		errno = ENOSYS;
		return -1;
	}
	/* A vfork child (Python's subprocess, posix_spawn) runs in its parent's memory
	 * until it execs, and resets its handlers there: its actions are its own
	 * kernel's business, and must not touch the parent's table. */
	if (!wrappable(sig) || !atomic_load_explicit(&ready, memory_order_acquire) ||
	    (pid_t)sl_sys(SYS_getpid) != sl_shim.pid)
		return real(sig, act, old);
	lock_writer(&mask);
	/* The kernel is asked first: its action is the program's unless it is the
	 * trampoline, which stands for the program's action in the table. */
	if ((rc = real(sig, NULL, &prev)) == 0 && prev.sa_sigaction == trampoline)
		program_action(sig, &prev);
	if (rc == 0 && act) {
		if (is_handler(act) && act->sa_sigaction != trampoline) {
			kernel_action(act, &k);
			if ((rc = real(sig, &k, NULL)) == 0)
				set_program_action(sig, act);
		} else {
			/* The default, ignoring, or the trampoline itself handed back by a
			 * program that read it some other way: given to the kernel as it
			 * is (the table's action stays for the trampoline). */
			rc = real(sig, act, NULL);
		}
	}
	rc = rc == 0 ? 0 : -errno;
	unlock_writer(&mask);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	if (old)
		*old = prev;
	return 0;
}

/* signal() and its kin, as glibc defines them, on top of sigaction(). */
static sighandler_t set_handler(int sig, sighandler_t h, int flags, int mask_self)
{
	struct sigaction a = {.sa_handler = h, .sa_flags = flags}, old;

	if (h == SIG_ERR || sig < 1 || sig >= _NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&a.sa_mask);
	if (mask_self)
		sigaddset(&a.sa_mask, sig);
	if (sigaction(sig, &a, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* BSD semantics (glibc's signal): restarted calls, the signal held while it is
 * handled. */
SL_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, SA_RESTART, 1);
}

SL_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, SA_RESTART, 1);
}

/* System V semantics: one delivery, then the default; the signal not held. */
SL_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, SA_RESETHAND | SA_NODEFER, 0);
}

SL_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
	return sysv_signal(sig, h);
}

/* System V's sigset: SIG_HOLD blocks the signal; anything else sets the action and
 * unblocks it.  Returns SIG_HOLD when the signal was blocked, else the action. */
SL_EXPORT sighandler_t sigset(int sig, sighandler_t h)
{
	struct sigaction old;
	sigset_t one, was;

	if (h == SIG_ERR || sig < 1 || sig >= _NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&one);
	sigaddset(&one, sig);
	if (sigaction(sig, NULL, &old) < 0)
		return SIG_ERR;
	if (h == SIG_HOLD) {
		if (pthread_sigmask(SIG_BLOCK, &one, &was) != 0)
			return SIG_ERR;
		return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
	}
	if (set_handler(sig, h, 0, 0) == SIG_ERR || pthread_sigmask(SIG_UNBLOCK, &one, &was) != 0)
		return SIG_ERR;
	return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
}

/* Whether calls interrupted by sig restart (flag 0) or fail with EINTR (flag 1). */
SL_EXPORT int siginterrupt(int sig, int flag)
{
	struct sigaction a;

	if (sigaction(sig, NULL, &a) < 0)
		return -1;
	if (flag)
		a.sa_flags &= ~SA_RESTART;
	else
		a.sa_flags |= SA_RESTART;
	return sigaction(sig, &a, NULL);
}

/* --- the shim's own locks, inside critical sections (shim.h) --- */

static SL_TLS struct sl_critical lock_crit[SL_SHIM_LOCKS_MAX];
static SL_TLS unsigned lock_depth;

void sl_shim_lock(struct sl_mutex *m)
{
	unsigned d = lock_depth;

	/* Deeper than the stack: the outer sections already keep handlers out. */
	if (d < SL_SHIM_LOCKS_MAX)
		sl_critical_enter(&lock_crit[d]);
	lock_depth = d + 1;
	sl_mutex_lock(m);
}

void sl_shim_unlock(struct sl_mutex *m)
{
	unsigned d;

	sl_mutex_unlock(m);
	d = --lock_depth;
	if (d < SL_SHIM_LOCKS_MAX)
		sl_critical_leave(&lock_crit[d]);
}
