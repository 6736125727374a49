/*
 * realtime.c - the supervisor's loop as a realtime thread (internal.h;
 * docs/design.md, "Seccomp").
 *
 * The loop makes each held call itself, inside its release.  As an ordinary
 * thread it was taken off its core right after a connect - on loopback the
 * handshake wakes the server - and came back 2-3 ms later, still inside the
 * release; the next release counts from that late end (SL_CALL_SPREAD_NS), so
 * runs of releases 13 ms apart cost 2-8% of 100/s in two runs of five.
 * SCHED_FIFO at the lowest priority keeps ordinary threads from doing that, as
 * for the shim's kicker (src/shim/kicker.c).  What keeps it from holding a core:
 * the loop sleeps in epoll between its events, and once it has gone
 * SL_CLOCK_RT_RUN_MAX_NS without a wait that let anybody else run (a flood of
 * trapped calls) it rests (sl_clock_realtime_rest).
 */
#include "internal.h"
#include <sched.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>

/* Where the kernel cannot say whether the loop slept: a wait in epoll shorter
 * than this is taken as no wait at all. */
#define SUP_WAITED_NS (20 * SL_NS_PER_US)

/* The calling thread's voluntary context switches so far, or -1.  An epoll_wait
 * that blocks switches voluntarily; one that returns at once (events ready, a
 * flood of trapped calls) does not, however long the call took: timed by the
 * clock alone, a wait the machine stretched (a virtual CPU taken away inside
 * it) counted as the loop having let the program and the server run. */
static long voluntary_switches(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : -1;
}

static void before_wait(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct sl_supervisor *s = w->data;

	(void)loop;
	(void)revents;
	s->switches_before = voluntary_switches();
	s->waited_from_ns = sl_clock_mono_ns();
}

static void after_wait(struct ev_loop *loop, ev_check *w, int revents)
{
	struct sl_supervisor *s = w->data;
	int64_t now = sl_clock_mono_ns();
	long switches = s->switches_before < 0 ? -1 : voluntary_switches();
	int slept = switches >= 0 ? switches != s->switches_before : now - s->waited_from_ns >= SUP_WAITED_NS;

	(void)loop;
	(void)revents;
	if (slept) {
		s->run_from_ns = now;
		return;
	}
	if (now - s->run_from_ns > SL_CLOCK_RT_RUN_MAX_NS) {
		sl_clock_realtime_rest();
		s->rests++;
		s->run_from_ns = sl_clock_mono_ns();
	}
}

void sup_go_realtime(struct sl_supervisor *s)
{
	if (!sl_clock_realtime_wanted(getenv(SL_REALTIME_ENV))) {
		sup_say(s, "SLUICE_REALTIME=0: the loop runs as an ordinary thread");
		return;
	}
	if (!sl_clock_prefer_realtime()) {
		sup_say(s, "the loop runs as an ordinary thread (no SCHED_FIFO here, or RLIMIT_RTTIME is finite)");
		return;
	}
	s->realtime = 1;
	s->run_from_ns = s->waited_from_ns = sl_clock_mono_ns();
	ev_prepare_init(&s->before_wait, before_wait);
	s->before_wait.data = s;
	ev_prepare_start(s->loop, &s->before_wait);
	ev_check_init(&s->after_wait, after_wait);
	s->after_wait.data = s;
	ev_check_start(s->loop, &s->after_wait);
	/* Neither keeps the loop running once everything else has stopped. */
	ev_unref(s->loop);
	ev_unref(s->loop);
	sup_say(s, "the loop runs SCHED_FIFO at priority %d", SL_CLOCK_RT_PRIORITY);
}

void sup_realtime_stop(struct sl_supervisor *s)
{
	if (!s->realtime)
		return;
	sup_say(s, "realtime: the loop rested %llu times", (unsigned long long)s->rests);
	ev_ref(s->loop);
	ev_ref(s->loop);
	ev_prepare_stop(s->loop, &s->before_wait);
	ev_check_stop(s->loop, &s->after_wait);
	s->realtime = 0;
	{
		/* What the process does after supervising (an embedded daemon's last
		 * work, its exit) is ordinary again. */
		struct sched_param sp = {.sched_priority = 0};

		sched_setscheduler(0, SCHED_OTHER, &sp);
	}
}
