/*
 * shim.h - internals of libsluice.so shared by its files (nothing here is exported).
 *
 * State is set once by sl_shim_init() (constructor, or the first hook to run when
 * another library's constructor calls us earlier) and read lock-free afterwards.
 * The exported hooks are thin trampolines; the decisions live in admission.c
 * (one call) and held.c (sockets that keep a record across calls).
 */
#ifndef SLUICE_SHIM_H
#define SLUICE_SHIM_H

#include "sluice/admit.h"
#include "sluice/common.h"
#include "sluice/match.h"
#include "sluice/shm.h"
#include "sluice/summary.h"
#include "sluice/sys.h"

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum sl_shim_mode {
	SL_SHIM_OFF = 0,     /* nothing to shape: every call passes straight through */
	SL_SHIM_SHARED = 1,  /* attached to the daemon's segment */
	SL_SHIM_LOCAL = 2,   /* control_socket = none: a private segment from the config,
	                      * this process limiting itself (fallback = local) */
	SL_SHIM_LATER = 3,   /* not attached yet: the first call that needs the
	                      * segment asks for it (attach.c) */
	SL_SHIM_WAITING = 4, /* a daemon is named but could not be reached: the config
	                      * compiled privately, only to know what matches, its
	                      * segment marked moved - every matched call asks for the
	                      * shared one again and meanwhile waits as the fallback
	                      * says (pending.h), never limited on its own */
};

struct sl_shim {
	atomic_int ready;  /* 0 not started, 1 initialising, 2 done */
	int mode;          /* enum sl_shim_mode */
	int fallback;      /* enum sl_fallback: what decides when the segment cannot
	                    * (the daemon's config's once attached) */
	int fallback_forced; /* SLUICE_FALLBACK set it: nothing else does */
	int debug;         /* SLUICE_DEBUG */
	int32_t pid;       /* getpid(), refreshed in the fork child */
	struct sl_shm shm; /* shm.self: this process's roster token (0: a fork child
	                    * not registered yet) */
	char seg_path[108]; /* the segment's socket (segsock.h): asked again when it moved */
	char config_path[SL_PATH_MAX]; /* SLUICE_CONFIG, or the default when readable */
	int64_t followed_ns; /* when it last followed a moved segment (0: never) */
	char log_path[256]; /* SLUICE_LOG: debug lines go here instead of stderr */
};

extern struct sl_shim sl_shim;

/* Real libc functions, resolved with dlsym(RTLD_NEXT) in the constructor and lazily
 * on first use; NULL when they cannot be resolved (the hook then passes through by
 * other means, or fails with ENOSYS, and never crashes). */
struct sl_real {
#define SL_HOOK(ret, name, params) ret(*name) params;
#define SL_EXPORT_ONLY(name)
#include "hooks.def"
#undef SL_HOOK
#undef SL_EXPORT_ONLY
};

extern struct sl_real sl_real;

void sl_real_resolve(void);
/* The shim's own questions about a socket go to libc's getsockopt, never through
 * the shim's hook (which answers SO_ERROR for a deferred connect and counts a
 * failed one); the system call when libc's cannot be had. */
static inline int sl_real_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return sl_real.getsockopt ? sl_real.getsockopt(fd, level, name, val, len)
	                          : (int)sl_sys(SYS_getsockopt, fd, level, name, val, len);
}
/* Under the seccomp supervisor (SLUICE_SECCOMP=1): the real connect, sendto and
 * sendmsg become marked system calls the filter lets by (sluice/seccomp.h). */
void sl_real_seccomp_pass(void);
void *sl_real_lookup(const char *name, void *hook);

#define SL_REAL(fn, hook)                                                                  \
	(sl_likely(sl_real.fn) ? sl_real.fn                                                    \
	                       : (sl_real.fn = (__typeof__(sl_real.fn))sl_real_lookup(#fn, (void *)(hook))))

/* The shim's own locks (a record's, the record pool's, the name map's): taken and
 * let go inside a critical section (sluice/critical.h), so that no handler of the
 * program that siglongjmps out can leave one held for good - a later call on the
 * same record or pool would wait forever.  Let go in the reverse order of taking,
 * per thread (at most SL_SHIM_LOCKS_MAX at once). */
#define SL_SHIM_LOCKS_MAX 8

/* The lock itself (mutex.c): one futex word - a record keeps one, and a process
 * may keep a record for each of a million sockets.  0 free, 1 held, 2 held with
 * waiters.  Process-private; a fork child makes every one free again. */
struct sl_mutex {
	_Atomic uint32_t word;
};
#define SL_MUTEX_INIT {0}
void sl_mutex_lock(struct sl_mutex *m);
void sl_mutex_unlock(struct sl_mutex *m);
static inline void sl_mutex_reset(struct sl_mutex *m)
{
	__atomic_store_n((uint32_t *)&m->word, 0, __ATOMIC_RELAXED);
}

void sl_shim_lock(struct sl_mutex *m);
void sl_shim_unlock(struct sl_mutex *m);

/* A fork child makes the locks of these files free (init.c). */
void sl_attach_after_fork(void);
void sl_tls_after_fork(void);

void sl_shim_init(void);

/* signals.c: run the program's handlers through the trampoline from now on (those
 * installed already included), so critical sections defer signals rather than
 * block them. */
void sl_signals_init(void);

/* exec.c: remember LD_PRELOAD and SLUICE_* as the process started, for children
 * exec'd with an environment that lacks them. */
void sl_exec_capture(void);

/* attach.c: ask for the segment (the first call that needs it, or a fork child
 * that must register); at most once per SL_ATTACH_RETRY_NS while it fails. */
void sl_shim_attach_slow(void);

/* True when there is something to shape; initialises on first use and attaches
 * the segment at the first call that needs it. */
static inline int sl_shim_active(void)
{
	if (sl_unlikely(atomic_load_explicit(&sl_shim.ready, memory_order_acquire) != 2))
		sl_shim_init();
	if (sl_unlikely(sl_shim.mode == SL_SHIM_LATER ||
	                (sl_shim.mode == SL_SHIM_SHARED && !__atomic_load_n(&sl_shim.shm.self, __ATOMIC_RELAXED))))
		sl_shim_attach_slow();
	return sl_shim.mode != SL_SHIM_OFF;
}

/* Whether anything may be shaped, without attaching (what epoll_ctl follows). */
static inline int sl_shim_may_shape(void)
{
	if (sl_unlikely(atomic_load_explicit(&sl_shim.ready, memory_order_acquire) != 2))
		sl_shim_init();
	return sl_shim.mode != SL_SHIM_OFF;
}

/* This process's token in the segment (roster.h): who holds locks and places. */
static inline int32_t sl_shim_self(void)
{
	return __atomic_load_n(&sl_shim.shm.self, __ATOMIC_RELAXED);
}

/* The header's summary as far as it can be believed (sluice/summary.h): the
 * meters some section uses, and whether any matches by name.  A summary whose
 * checksum disagrees reads as every meter and names: slower, never unshaped. */
static inline uint32_t sl_shim_meters(void)
{
	struct sl_summary s;

	sl_summary_get(sl_shim.shm.hdr, &s);
	return s.meters;
}

static inline int sl_shim_has_names(void)
{
	struct sl_summary s;

	sl_summary_get(sl_shim.shm.hdr, &s);
	return s.has_names != 0;
}

/* The segment in use was marked moved - the daemon made a larger one, or it is
 * the private stand-in of a segment not reached yet (SL_SHIM_WAITING): ask for
 * the one served now (attach.c).  1 when it followed. */
int sl_shim_follow_slow(void);

static inline int sl_shim_follow(void)
{
	struct sl_shm_header *h = __atomic_load_n(&sl_shim.shm.hdr, __ATOMIC_ACQUIRE);

	if (sl_likely(!h || !__atomic_load_n(&h->moved, __ATOMIC_ACQUIRE) || sl_shim.mode == SL_SHIM_LOCAL))
		return 0;
	return sl_shim_follow_slow();
}

/* The segment a blocking admission steps against, after what `ask` says
 * (sl_pending_segment_fn: follow it, or check it first). */
struct sl_shm_header *sl_shim_segment(void *ctx, int ask, int32_t *self);

/* Give back the places `mask` of m holds, for sure (sl_pending_give_back): a
 * place lost here would stay counted while the program lives. */
void sl_shim_give_back(uint64_t mask, struct sl_match *m);

/* attach.c: the segment's daemon went silent - ask its socket which segment is
 * served; another (the one in use was lost with its keeper and made anew):
 * marked moved, so every process on it follows at its next admission. */
void sl_shim_check_orphan(void);

/* Said once per process, on the channel `sluice run` listens to or else on
 * stderr where that is safe to write (attach.c): what a user must know - the
 * shared queues cannot be reached, and what that means for the calls. */
void sl_shim_tell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How often a process that cannot reach its segment asks again (attach.c). */
#define SL_ATTACH_RETRY_NS (100 * 1000000LL)
/* How long a first call waits for a keeper that is there but busy, when no
 * config says what matches (attach.c, wait_for_busy_keeper). */
#define SL_ATTACH_PATIENCE_NS (30 * 1000000000LL)

/* Debug log line (only when SLUICE_DEBUG is set).  Never allocates a FILE. */
void sl_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* address -> host name, process-wide (namemap.c). */
void sl_namemap_put(int family, const void *addr, const char *name);
size_t sl_namemap_get(int family, const void *addr, char *out, size_t size);
/* How many names the program resolved to addr are kept (names sharing an address). */
unsigned sl_namemap_count(int family, const void *addr);
void sl_namemap_after_fork(void);

/* The hold decision for one request (admission.c).  sl_admission_match() is the cheap part every
 * call runs: a count of matching sections (0 = pass through).  sl_admission_wait() runs only
 * for matched requests: returns 0 to go ahead, or -errno to fail the call with. */
int sl_admission_match(struct sl_dest *d, char *namebuf, size_t namelen, struct sl_match *m);

/* The parts of sl_admission_match: d's name from the process-wide map (when some
 * pattern is a name), and the sections metering `meter` that match d. */
void sl_admission_name(struct sl_dest *d, char *namebuf, size_t namelen);
int sl_admission_match_meter(const struct sl_dest *d, uint32_t meter, struct sl_match *m);

/* What a TCP connection to d can be held under: its connections (m), requests (rm)
 * and bytes (bm) sections, n, nr and nb of each.  d is named already. */
struct sl_tcp_match {
	struct sl_match m, rm, bm;
	int n, nr, nb;
};
void sl_admission_match_tcp(const struct sl_dest *d, struct sl_tcp_match *t);
/* One admission of a call that waits inside it (a blocking connect, a datagram,
 * a first write on a blocking socket), stepped through core/pending.c with the
 * shim's fallback: 0 to go, or -errno to fail the call with.  act(arg) is made
 * inside the release when given (sl_admit_release_act). */
int sl_admission_wait(const struct sl_dest *d, struct sl_match *m, const char *what,
                      int default_refuse);
int sl_admission_wait_act(const struct sl_dest *d, struct sl_match *m, const char *what,
                          int default_refuse, sl_act_fn act, void *arg);

/* What the shim asks of an admission for d under m (pending.h): its pid, its
 * fallback, refusal of everything when no segment is there and fallback = closed. */
struct sl_pending_ask;
struct sl_pending;
void sl_admission_ask(struct sl_pending_ask *a, const struct sl_dest *d, struct sl_match *m,
                      int default_refuse, int places);
/* One step of p against the shim's segment, following it when the daemon moved it,
 * and asking whether it is still served when its daemon went silent:
 * SL_PEND_GO, SL_PEND_WAIT or SL_PEND_REFUSED. */
int sl_admission_step(struct sl_pending *p, int64_t now, sl_act_fn act, void *arg);
/* The debug line for p's answer `rc` (`what` names the call). */
void sl_admission_said(const struct sl_pending *p, int rc, const char *what);

/* The names of the matched sections, comma-separated, for debug lines. */
void sl_admission_sections(const struct sl_match *m, char *buf, size_t size);

/* Text for a destination in debug lines. */
void sl_dest_format(const struct sl_dest *d, char *buf, size_t size);

/* The first non-empty piece of a write (its length in *n), or NULL: what tells the
 * protocols apart at a connection's start. */
static inline const void *sl_iov_first(const struct iovec *iov, int iovcnt, size_t *n)
{
	for (int i = 0; iov && i < iovcnt; i++)
		if (iov[i].iov_len && iov[i].iov_base) {
			*n = iov[i].iov_len;
			return iov[i].iov_base;
		}
	return NULL;
}

#endif
