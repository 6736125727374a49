/*
 * clock.h - the time sources sluice uses.
 *
 * Every limiter function takes "now" as an argument, so tests inject any clock they
 * like; only the callers at the edges (shim, daemon, CLI) read the real clocks here.
 * CLOCK_MONOTONIC is system-wide on Linux, so values compare across processes.
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include "sluice/common.h"

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
int64_t sl_clock_mono_ns(void);

/* CLOCK_REALTIME (UTC) in nanoseconds; used only to align fixed windows and to print. */
int64_t sl_clock_real_ns(void);

/* CLOCK_REALTIME - CLOCK_MONOTONIC: what turns a monotonic time into UTC, for
 * aligning fixed windows (kept in the segment, refreshed by the daemon).  Read
 * with the wall clock bracketed by two monotonic reads, the tightest of a few. */
int64_t sl_clock_wall_offset_ns(void);

/* Differences smaller than this between two readings of the offset are noise,
 * not a step of the wall clock: a bracketed reading is good to a few
 * microseconds, and NTP slews the clock by at most 500 us per second, so the
 * windows follow a slewed clock in steps of a millisecond. */
#define SL_CLOCK_STEP_NS SL_NS_PER_MS

/* The offset to keep, given the one in force (0: none yet): a new reading only
 * when the wall clock has stepped.  Moving windows by measuring noise would let a
 * window's count start over while its releases are still within it. */
int64_t sl_clock_wall_offset_follow(int64_t previous);

/* Sleep until the absolute CLOCK_MONOTONIC time `deadline_ns`.  Returns 0 when the
 * deadline has passed, or -EINTR when a signal handler ran first (the caller decides
 * whether to resume). */
int sl_clock_sleep_until(int64_t deadline_ns);

/* The same, but on time to a few microseconds: sleeps to SL_CLOCK_SPIN_NS before
 * the deadline and spins the rest.  A release checked more than SL_WAKE_SLACK_NS
 * after its gate moves every later release of its queue (include/sluice/lease.h),
 * so the scheduler's wake-up latency, tens of microseconds to a few ms, must not
 * reach the check.  Spinning longer cost more than it saved: a blocking program's
 * thread that had spun 200 us had used up its share of the core and was preempted
 * right after its connect, still inside its release, as the server woke - 8
 * processes at 5,000/s delivered 99.3-99.5% with 200 us, 99.6% with 50 us (make
 * bench item 18).  Costs at most SL_CLOCK_SPIN_NS of CPU per wait.  0, or -EINTR
 * when a signal ended the sleep part. */
#define SL_CLOCK_SPIN_NS (50 * 1000)
int sl_clock_sleep_until_precise(int64_t deadline_ns);

/* For a thread of sluice's own whose wake-ups are releases (the shim's kicker,
 * the seccomp supervisor's loop): timer slack of a nanosecond, and under EEVDF
 * (Linux 6.12 and later; refused before, and the defaults kept) a slice of
 * SL_CLOCK_SLICE_NS, so that when it wakes it may preempt the thread running
 * rather than wait out that thread's 3 ms slice - a busy program's own threads
 * delayed releases by 2.8 ms that way.  Never called on a program's thread. */
#define SL_CLOCK_SLICE_NS (100 * 1000)
void sl_clock_prefer_wakeups(void);

/* For the same threads: SCHED_FIFO at SL_CLOCK_RT_PRIORITY, the lowest realtime
 * priority, where the process may have it (root, CAP_SYS_NICE or RLIMIT_RTPRIO of
 * at least 1) and RLIMIT_RTTIME is unlimited.  Such a thread is not kept off a
 * core by ordinary threads (docs/design.md, "Deferred connects on time"); it must
 * sleep between its instants.  What it starts (threads, children) does not
 * inherit it.  1 when granted; on refusal the thread stays as it was.  The caller
 * asks only where sl_clock_realtime_wanted() says so. */
#define SL_CLOCK_RT_PRIORITY 1
int sl_clock_prefer_realtime(void);

/* SLUICE_REALTIME's value (NULL where unset): 0 where it says "0", the user's
 * way to keep both threads ordinary (docs/commands.md, "Environment"). */
#define SL_REALTIME_ENV "SLUICE_REALTIME"
int sl_clock_realtime_wanted(const char *value);

/* What keeps such a thread from holding a core: besides sleeping between its
 * instants, once it has acted SL_CLOCK_RT_RUN_MAX_NS without a pause it calls
 * sl_clock_realtime_rest(), which leaves the core to others for
 * SL_CLOCK_RT_REST_NS. */
#define SL_CLOCK_RT_RUN_MAX_NS (2 * SL_NS_PER_MS)
#define SL_CLOCK_RT_REST_NS (100 * SL_NS_PER_US)
void sl_clock_realtime_rest(void);

#endif
