/*
 * supervise.h - the seccomp supervisor (src/supervisor/, its own library that
 * `sluice` links) for `sluice run --seccomp`: programs the preload shim cannot reach
 * (static, Go) held at connect() by a seccomp user-notification filter, whose
 * notifications `sluice run` answers against the same shared segment the shim
 * uses (docs/programs.md, "What reaches what"; docs/design.md, "Seccomp").
 */
#ifndef SLUICE_SUPERVISE_H
#define SLUICE_SUPERVISE_H

#include "sluice/config.h"
#include "sluice/shm.h"

#include <ev.h>
#include <stddef.h>

/* In the child, before exec: no new privileges, then the filter (trapping connect,
 * and sendto/sendmsg with a destination when `datagrams`).  Returns the listener
 * fd (close-on-exec), or -errno (the kernel has no user notification: before
 * Linux 5.5, or seccomp off). */
int sl_supervise_install(int datagrams);

/* Send and receive the listener fd over a Unix socket (SCM_RIGHTS). */
int sl_supervise_send_fd(int sock, int fd);
int sl_supervise_recv_fd(int sock);

struct sl_supervisor;

/* Start answering the listener's notifications on `loop`, against the segment
 * served at `seg_path` (attached here) - or `daemons`, the segment of the daemon
 * this process hosts (its token is this process's, and it is followed by the
 * daemon); cfg gives the fallback and the names to resolve.
 * `verbose`: one line per held or refused call on stderr.  on_gone(arg) is called
 * once no process is left under the filter (the command and every child it left
 * behind).  NULL on failure (said on stderr). */
struct sl_supervisor *sl_supervise_start(struct ev_loop *loop, int listener, const char *seg_path,
                                         struct sl_shm *daemons, const struct sl_config *cfg, int verbose,
                                         void (*on_gone)(void *), void *arg);
/* Once no process is left under the filter: the datagrams the relay still holds
 * (their senders were told they went) go at their slots, each within its
 * max_wait; returns when none is left, or when *stop turns non-zero (a signal). */
void sl_supervise_finish(struct sl_supervisor *s, const volatile int *stop);
/* Stop, answering nothing more (the kernel then fails pending and later trapped
 * calls with ENOSYS), give back what is held, and free.  Prints a summary when
 * verbose. */
void sl_supervise_stop(struct sl_supervisor *s);

#endif
