#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/sys.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t read_clock(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * SL_NS_PER_S + ts.tv_nsec;
}

int64_t sl_clock_mono_ns(void)
{
	return read_clock(CLOCK_MONOTONIC);
}

int64_t sl_clock_real_ns(void)
{
	return read_clock(CLOCK_REALTIME);
}

int sl_clock_sleep_until(int64_t deadline_ns)
{
	struct timespec ts;
	int rc;

	if (deadline_ns <= 0)
		return 0;
	ts.tv_sec = deadline_ns / SL_NS_PER_S;
	ts.tv_nsec = deadline_ns % SL_NS_PER_S;
	rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	return rc == 0 ? 0 : -rc;
}

int sl_clock_sleep_until_precise(int64_t deadline_ns)
{
	int rc = 0;

	if (deadline_ns - SL_CLOCK_SPIN_NS > sl_clock_mono_ns())
		rc = sl_clock_sleep_until(deadline_ns - SL_CLOCK_SPIN_NS);
	if (rc != 0)
		return rc;
	while (sl_clock_mono_ns() < deadline_ns)
		sl_cpu_relax();
	return 0;
}

/* struct sched_attr of sched_setattr(2), which glibc 2.36 does not declare. */
struct slice_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

void sl_clock_prefer_wakeups(void)
{
	struct slice_attr sa = {.size = sizeof(sa), .policy = SCHED_OTHER, .runtime = SL_CLOCK_SLICE_NS};

	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	sl_sys(SYS_sched_setattr, 0, &sa, 0);
}

int sl_clock_prefer_realtime(void)
{
	struct sched_param sp = {.sched_priority = SL_CLOCK_RT_PRIORITY};
	struct rlimit rl;

	/* Under a finite RLIMIT_RTTIME the kernel sends SIGXCPU to a realtime thread
	 * that runs that long without blocking: the program would die of it. */
	if (getrlimit(RLIMIT_RTTIME, &rl) != 0 || rl.rlim_cur != RLIM_INFINITY)
		return 0;
	/* This thread only; and a thread or process it starts (the supervisor's
	 * resolver thread, anything forked) begins as an ordinary one. */
	return sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0;
}

int sl_clock_realtime_wanted(const char *value)
{
	return !(value && strcmp(value, "0") == 0);
}

void sl_clock_realtime_rest(void)
{
	struct timespec rest = {.tv_nsec = SL_CLOCK_RT_REST_NS};

	nanosleep(&rest, NULL);
}

int64_t sl_clock_wall_offset_ns(void)
{
	int64_t best = INT64_MAX, offset = 0;

	/* The wall clock read between two monotonic reads, the tightest of a few
	 * tries: a pair read with a preemption between the two (milliseconds under
	 * load) would move every fixed window's boundary by as much. */
	for (int i = 0; i < 8 && best > 2000; i++) {
		int64_t m1 = sl_clock_mono_ns(), real = sl_clock_real_ns(), m2 = sl_clock_mono_ns();

		if (m2 - m1 < best) {
			best = m2 - m1;
			offset = real - m1 - (m2 - m1) / 2;
		}
	}
	return offset;
}

int64_t sl_clock_wall_offset_follow(int64_t previous)
{
	int64_t now = sl_clock_wall_offset_ns(), d = now - previous;

	/* Only a step of the wall clock moves the windows; measuring noise does not. */
	return previous && d < SL_CLOCK_STEP_NS && d > -SL_CLOCK_STEP_NS ? previous : now;
}
