/*
 * internal.h - what the supervisor's parts share (docs/design.md, "Seccomp"):
 *   filter.c      the seccomp filter, and passing its listener between processes;
 *   notify.c      a notification read: the traced process's memory, its socket;
 *   calls.c       each held call's admission, on one timerfd, and its answer;
 *   places.c      concurrency places, followed through sock_diag until closed;
 *   names.c       the config's names and the host file's, on a thread of their own;
 *   relay.c       sockets whose calls cannot be followed, through a relay: a
 *                 connected datagram socket a section holds, a static program's
 *                 own lookups (learned);
 *   realtime.c    the loop's SCHED_FIFO, and the rests that bound it;
 *   supervisor.c  start and stop.
 * Invariants every part keeps:
 *   - a call is answered once: with its result or "continue" only after its
 *     release (or when no enforcing section applies, or the fallback is open), an
 *     errno only by a refusal; a call whose notification went stale (its thread
 *     was killed) is never answered and an unreleased reservation is given back;
 *     a released one is spent (t.mask cleared), never refunded;
 *   - an address that is not the caller's to read passes through untouched: the
 *     kernel then reads it and fails the call as it would have (EFAULT, EINVAL);
 *     a process that may not be read at all is undecided;
 *   - undecided (the segment lock unavailable) is never "go" under fallback =
 *     local: the call is retried until its max_wait, then refused;
 *   - concurrency places are given back only once the connection is seen closed.
 */
#ifndef SLUICE_SUPERVISOR_INTERNAL_H
#define SLUICE_SUPERVISOR_INTERNAL_H

#include "sluice/supervise.h"
#include "sluice/clock.h"
#include "sluice/conc.h"
#include "sluice/common.h"
#include "sluice/match.h"
#include "sluice/pending.h"
#include "sluice/seccomp.h"
#include "sluice/wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netdb.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SL_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SL_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "sluice run --seccomp knows the system call ABI of x86_64 and aarch64 only"
#endif

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

#define NAMES_REFRESH_S 60.0                   /* the config's names resolved and the host file
                                                * read again (SLUICE_NAMES_REFRESH_S: other) */
#define NAMES_MAX 1024
#define SL_HOSTS_FILE "/etc/hosts"             /* read by static and Go programs
                                                * themselves */
#define TRACK_S 0.02                           /* places' connections looked at */

/* A name for an address: one of the config's, resolved here, or the host file's.
 * A static program's own lookups are not seen, so its connects to these
 * addresses are matched as if it had named them. */
struct resolved {
	int family;
	uint8_t addr[16];
	char name[SL_HOST_MAX];
};

#define LEARNED_MAX 256  /* addresses learned from the program's own lookups */
struct sl_relay;

/* One trapped call being held. */
struct call {
	struct call *prev, *next;
	struct sl_supervisor *s;
	uint64_t id;
	int pid, nr;
	int answered;
	int default_errno;
	int waited;                   /* its admission has answered WAIT once */
	int64_t asked_ns;
	int64_t due_ns;               /* armed: when it is next looked at */
	int armed;
	struct sl_dest d;
	char name[SL_HOST_MAX];
	struct sl_match m;
	union sl_pending_room pr;     /* its admission (core/pending.c): places, slot,
	                               * the fallback; pr.p.taken its places once it goes */
	ev_timer timer;
	/* Made here, inside the release: the caller's socket (a duplicate, by
	 * pidfd_getfd; -1 when it cannot be had: then the caller makes the call
	 * itself on "continue"), the destination, and for a datagram its bytes. */
	int sock;
	struct sockaddr_storage sa;
	socklen_t alen;
	unsigned char *payload;
	size_t payload_len;
	int flags;                    /* sendto/sendmsg flags */
	int made, made_err, blocking; /* made: the call was made here; its errno */
	ssize_t made_val;
	ev_io wio;                    /* a blocking connect, until it completes */
	uint64_t conc;                /* the sections (positions in m) limiting its
	                               * concurrency */
	int relayed;                  /* a datagram the relay holds (relay.c): no
	                               * caller waits, id is not a notification's */
};

/* A connection holding concurrency places: given back when sock_diag no longer
 * shows it open in the program - every fd of it closed (inode 0), closed, or
 * gone - as the shim gives them back at its close(). */
struct place {
	struct place *next;
	uint64_t taken;
	struct sl_match m;
	struct sockaddr_storage local, peer;
	ino_t ino;
};

struct sl_supervisor {
	struct ev_loop *loop;
	int fd;
	struct sl_shm *shm;  /* the segment in use: own, or the embedded daemon's (its
	                      * token is this process's too) */
	struct sl_shm own;   /* attached here through seg_path, when not the daemon's */
	char seg_path[108];  /* asked again when the daemon moves the segment */
	int32_t self;        /* getpid(), for its lines */
	int verbose, fallback;
	ev_io io;
	ev_timer names_timer;
	ev_async names_ready;
	struct names_job *job; /* a refresh of the names under way, or NULL */
	struct call *calls; /* held now */
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	struct seccomp_notif_sizes sizes;
	const struct sl_config *cfg;
	struct resolved *names;
	unsigned nnames;
	/* The program's own lookups, read by the DNS proxy: a ring, newest at
	 * next_learned - 1. */
	struct resolved learned[LEARNED_MAX];
	unsigned next_learned;
	struct sl_relay *relay; /* made at the first socket redirected, or NULL */
	size_t relay_bytes;     /* the relay's datagrams held now, their bytes */
	struct place *places;  /* connections holding places */
	ev_timer track_timer;
	/* The calls' instants: one timerfd, armed at the earliest call's less
	 * DUE_SPIN_NS (a timerfd wakes to the microsecond where the loop's own
	 * timers come to the millisecond; see arm()). */
	int tfd;
	ev_io tfd_io;
	int diag;              /* NETLINK_SOCK_DIAG, or -1 */
	/* Realtime (sup_go_realtime): the loop's runs without a pause are timed from
	 * run_from_ns, and one past SL_CLOCK_RT_RUN_MAX_NS rests (rests counts).
	 * switches_before: the thread's voluntary context switches as its last wait
	 * began (-1: getrusage failed, and the wait's length decides). */
	int realtime;
	int64_t waited_from_ns, run_from_ns;
	long switches_before;
	uint64_t rests;
	ev_prepare before_wait;
	ev_check after_wait;
	void (*on_gone)(void *);
	void *gone_arg;
	uint64_t trapped, held, refused, passed;
};

/* A refresh of the names, resolved on a thread of its own: a slow resolver must
 * not hold up the loop, where every trapped call of the program waits.  The job
 * is shared by the thread and the supervisor; whichever lets go of it last frees
 * it (the supervisor may stop first: orphaned). */
struct names_job {
	pthread_mutex_t lock;
	int refs, orphaned;
	struct ev_loop *loop;
	ev_async *ready;
	char (*names)[SL_HOST_MAX];
	unsigned nnames;
	struct resolved *out;
	unsigned nout;
};

/* realtime.c */
/* SCHED_FIFO for the loop where the process may have it and SLUICE_REALTIME=0 was
 * not said (docs/design.md, "Seccomp"), with the rests that keep it from holding
 * a core; sup_realtime_stop undoes the watchers. */
void sup_go_realtime(struct sl_supervisor *s);
void sup_realtime_stop(struct sl_supervisor *s);

/* calls.c */
void sup_say(const struct sl_supervisor *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether notification id is still pending (its thread was not killed). */
int sup_still_valid(const struct sl_supervisor *s, uint64_t id);
/* Answer notification id: err, or "continue" (cont), or the value val. */
int sup_answer_as(struct sl_supervisor *s, uint64_t id, int err, int cont, ssize_t val);
int sup_answer(struct sl_supervisor *s, uint64_t id, int err);
/* Free a call: what it holds given back, unless released. */
void sup_call_free(struct call *c);
/* Refuse a call with its section's errno, saying why when verbose. */
void sup_refuse(struct call *c, const char *why);
/* Step a call's admission (core/pending.c) and act on its answer. */
void sup_step(struct call *c);
void sup_on_tfd(struct ev_loop *loop, ev_io *w, int revents);

/* places.c */
void sup_track(struct call *c);
void sup_on_track(struct ev_loop *loop, ev_timer *w, int revents);

/* segment.c */
/* The segment in use was moved: attach the one served now; 1 when it did. */
int sup_follow(struct sl_supervisor *s);
/* Where places are given back (sl_pending_segment_fn, ctx the supervisor): the
 * segment in use, followed first when it was moved. */
struct sl_shm_header *sup_give_back_segment(void *ctx, int ask, int32_t *self);

/* notify.c */
void sup_on_notify(struct ev_loop *loop, ev_io *w, int revents);
/* A datagram of len bytes the relay holds, to go out on `up` (its socket
 * connected to server) at its release: 0 when held (or dropped: more held than
 * RELAY_HELD_MAX, no memory); 1 when no section holds it now - the caller sends
 * it itself. */
#define RELAY_HELD_MAX (4u << 20)
int sup_hold_datagram(struct sl_supervisor *s, int up, const struct sockaddr_storage *server, socklen_t slen,
                      const void *msg, size_t len);

/* relay.c: a trapped connect of `sock` (the caller's, duplicated) to sa, made to
 * the relay instead and answered: 1; or 0 when it is not one to relay and nothing
 * was done.  held: sa is a peer a datagram section holds (only a datagram
 * socket's datagrams are held); otherwise only a lookup (port 53, while some
 * section matches by name) is relayed, to be read for names. */
int sup_relay_redirect(struct sl_supervisor *s, uint64_t id, int sock, const struct sockaddr_storage *sa,
                       socklen_t alen, int held);
void sup_relay_stop(struct sl_supervisor *s);
/* Whether sa is a name server's port (53), IPv4 or IPv6. */
int sup_dns_port(const struct sockaddr_storage *sa);

/* names.c */
struct resolved *sup_resolve(const char (*names)[SL_HOST_MAX], unsigned n, unsigned *count);
char (*sup_config_names(const struct sl_config *cfg, unsigned *n))[SL_HOST_MAX];
void sup_job_put(struct names_job *j);
void sup_on_names(struct ev_loop *loop, ev_timer *w, int revents);
void sup_on_names_ready(struct ev_loop *loop, ev_async *w, int revents);

#endif
