/*
 * clock.h - the time sources sluice uses.
 *
 * Every limiter function takes "now" as an argument, so tests inject any clock they
 * like; only the callers at the edges (shim, daemon, CLI) read the real clocks here.
 * CLOCK_MONOTONIC is system-wide on Linux, so values compare across processes.
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
int64_t sl_clock_mono_ns(void);

/* CLOCK_REALTIME (UTC) in nanoseconds; used only to align fixed windows and to print. */
int64_t sl_clock_real_ns(void);

/* CLOCK_REALTIME - CLOCK_MONOTONIC: what turns a monotonic time into UTC, for
 * aligning fixed windows (kept in the segment, refreshed by the daemon). */
int64_t sl_clock_wall_offset_ns(void);

/* Sleep until the absolute CLOCK_MONOTONIC time `deadline_ns`.  Returns 0 when the
 * deadline has passed, or -EINTR when a signal handler ran first (the caller decides
 * whether to resume). */
int sl_clock_sleep_until(int64_t deadline_ns);

/* The same, but on time to a few microseconds: sleeps to SL_CLOCK_SPIN_NS before
 * the deadline and yields the processor in a loop for the rest.  A release woken
 * late makes every later release of its backlog as late (the release check allows
 * no catch-up), so the scheduler's wake-up latency, 50 us to a few ms, would add
 * up release after release.  Costs at most SL_CLOCK_SPIN_NS of CPU per wait.
 * 0, or -EINTR when a signal ended the sleep part. */
#define SL_CLOCK_SPIN_NS (200 * 1000)
int sl_clock_sleep_until_precise(int64_t deadline_ns);

#endif
