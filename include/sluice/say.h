/*
 * say.h - held and refused calls told to `sluice run` (docs/commands.md, "When a call is
 * held").  The shim lives inside programs that do not expect its words, so it
 * never writes their stderr: when `sluice run` asks (SLUICE_SAY names its
 * socket), an admission held longer than SL_SAY_HELD_NS or refused sends one
 * datagram there, and `sluice run` says it on its own stderr, once per section
 * per few seconds.  Sending never blocks, never keeps a descriptor in the host
 * program and never changes its errno; a full or absent listener loses the word.
 *
 * Datagrams, one line each:
 *   H SECTION WAIT_MS PID         held: this call waits WAIT_MS before it goes
 *   R SECTION COUNT WHY           COUNT calls refused (the shim sends 1 a call), why
 *   N TEXT                        a notice a process says once (the shared queues
 *                                 cannot be reached, and what its calls do)
 *   S SECTION CALLS WAIT_MS MAX_MS PID BORN   every hold of this process image so
 *                                 far in the section: calls, their waits summed,
 *                                 the longest (cumulative; `sluice run` sums its
 *                                 processes', told apart by PID and BORN, as an
 *                                 exec keeps the pid and starts the sums again)
 */
#ifndef SLUICE_SAY_H
#define SLUICE_SAY_H

#include <stddef.h>
#include <stdint.h>

#define SL_SAY_ENV "SLUICE_SAY"
#define SL_NOTICE_ENV "SLUICE_NOTICE" /* the live notice's threshold (sl_say_threshold) */
#define SL_SAY_HELD_NS (1000 * 1000000LL) /* a hold shorter than this is not said */
#define SL_SAY_NAME_MAX 100               /* the abstract socket's name, at most */

/* Nonzero once sl_say_setup() was given a name: the admission stepper tells. */
extern int sl_say_on;

/* Speak to the abstract unix socket `name` (without its leading NUL); NULL or ""
 * turns speaking off.  -EINVAL for a name that cannot be one. */
int sl_say_setup(const char *name);

/* The live notice's threshold: a hold shorter than `notice` (SLUICE_NOTICE, a
 * duration: "100ms", "0") is not said as it happens; NULL, "" or a bad value,
 * SL_SAY_HELD_NS.  Every hold is summed either way. */
void sl_say_threshold(const char *notice);

/* A call of `section` given a slot `wait_ns` after it asked: summed for the run's
 * summary, and said when at least the threshold (at most once per section every
 * SL_SAY_EVERY_NS per process). */
void sl_say_held(int section, int64_t wait_ns, int64_t now);

/* Send this process's sums not yet sent (at its exit, and before an exec). */
void sl_say_sums(void);

/* In a fork's child: its sums start from nothing. */
void sl_say_after_fork(void);

/* A call of `section` (-1: none known) refused, for `why`. */
void sl_say_refused(int section, const char *why, int64_t now);

/* A notice of len bytes (one line, no newline), said by the caller once. */
void sl_say_notice(const char *text, size_t len);

#define SL_SAY_EVERY_NS (2000 * 1000000LL)

#endif
