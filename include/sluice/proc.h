/*
 * proc.h - whether a process that a segment word names is still the one that wrote
 * it (docs/design.md, "Invariants": a lock holder's death is detected even before it is
 * reaped, and a reused pid is not taken for it).
 *
 * A process is named by its pid and a start stamp: the low 32 bits of its start
 * time in clock ticks since boot (/proc/PID/stat, field 22), which a later process
 * given the same pid does not share.  A zombie - killed, not yet reaped by its
 * parent - counts as dead: it runs no code and releases nothing.  Without a
 * readable /proc (another pid namespace, no procfs) only kill(pid, 0) can tell,
 * and stamps are not compared.
 */
#ifndef SLUICE_PROC_H
#define SLUICE_PROC_H

#include <stdint.h>

enum sl_proc_verdict {
	SL_PROC_GONE = 0,    /* no such process, a zombie, or another with its pid */
	SL_PROC_ALIVE = 1,   /* running (or stopped) and, when a stamp was given, it */
	SL_PROC_UNKNOWN = 2, /* cannot tell (no /proc): kill(pid, 0) says it exists */
};

/* What became of process `pid` whose start stamp was `stamp` (0: not known, any
 * process with that pid will do).  A few system calls: for slow paths only. */
int sl_proc_check(int32_t pid, uint32_t stamp);

/* Whether process `pid` is proved to be the owner that wrote `stamp` beside it
 * (a lock word): SL_PROC_ALIVE only when its start stamp is readable and equal.
 * No stamp (0), another stamp, a pid that is no process, a zombie: SL_PROC_GONE
 * - nothing proves an owner, so the word may be taken over.  UNKNOWN only when
 * /proc cannot be read at all (another pid namespace) and kill(pid, 0) says the
 * pid exists. */
int sl_proc_owner(int32_t pid, uint32_t stamp);

/* The start stamp of process `pid` (0: cannot be read). */
uint32_t sl_proc_stamp(int32_t pid);

/* The calling process's start stamp, never 0 (a start time whose low 32 bits are
 * 0 is stamped 1, here and in every comparison); `self` is its pid as the caller
 * caches it (read from /proc once per pid, so once again in a fork child).  0
 * only when /proc cannot be read. */
uint32_t sl_proc_self_stamp(int32_t self);

#endif
