/* Held and refused calls told to `sluice run` (include/sluice/say.h). */
#include "sluice/say.h"
#include "sluice/common.h"
#include "sluice/sys.h"
#include "sluice/units.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int sl_say_on;
static struct sockaddr_un say_addr;
static socklen_t say_len;
static int64_t say_held_ns = SL_SAY_HELD_NS; /* SLUICE_NOTICE, or the default */
static unsigned long long say_born; /* when this image set up (an exec'd image
                                     * keeps its pid, not its sums) */

/* Per section (by index, folded onto SAY_SLOTS), when this process last said a
 * hold.  Refusals are each sent: `sluice run` counts them (a listener whose
 * queue is full loses some; its counts are "at least"). */
#define SAY_SLOTS 64
static _Atomic int64_t held_said[SAY_SLOTS];

/* Every hold of this process, by section (those under SAY_SLOTS; a section of a
 * larger table is not summed), for `sluice run`'s summary at its end: sent
 * whole ("S" datagrams, cumulative, so a lost one costs nothing once the next
 * comes) at the first hold, then at most every SL_SAY_EVERY_NS, and at exit. */
static struct {
	_Atomic uint64_t calls, wait_ms, max_ms;
	_Atomic int64_t sent;  /* when last sent (0: never) */
	_Atomic int unsent;    /* holds since */
} sums[SAY_SLOTS];

int sl_say_setup(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	sl_say_on = 0;
	if (n == 0)
		return 0;
	if (n > SL_SAY_NAME_MAX || n + 1 > sizeof(say_addr.sun_path))
		return -EINVAL;
	memset(&say_addr, 0, sizeof(say_addr));
	say_addr.sun_family = AF_UNIX;
	memcpy(say_addr.sun_path + 1, name, n); /* abstract: no file to leave behind */
	say_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	{
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		say_born = (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
	}
	sl_say_on = 1;
	return 0;
}

void sl_say_threshold(const char *notice)
{
	int64_t ns;
	char err[8];

	say_held_ns = SL_SAY_HELD_NS;
	if (notice && *notice && sl_parse_duration(notice, 0, &ns, err, sizeof(err)) == 0 && ns >= 0)
		say_held_ns = ns;
}

/* One datagram, by raw system calls (never the shim's own hooks), on a socket
 * made and closed here: a descriptor kept across calls could be closed or reused
 * by the host program, and the word would go to its socket. */
static void say(const char *msg, size_t len)
{
	int saved = errno;
	long fd = sl_sys(SYS_socket, AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd >= 0) {
		sl_sys(SYS_sendto, fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL, &say_addr, say_len);
		sl_sys(SYS_close, fd);
	}
	errno = saved;
}

/* Whether `slot` may speak at `now` again, `every` after it last did. */
static int may_say(_Atomic int64_t *slot, int64_t now, int64_t every)
{
	int64_t last = atomic_load_explicit(slot, memory_order_relaxed);

	return (last == 0 || now - last >= every) &&
	       atomic_compare_exchange_strong_explicit(slot, &last, now, memory_order_relaxed,
	                                               memory_order_relaxed);
}

static void send_sum(int section)
{
	char msg[96];
	int n;

	/* Cleared before the sums are read: a hold counted meanwhile sets it again
	 * and is sent later, never lost. */
	atomic_store(&sums[section].unsent, 0);
	n = snprintf(msg, sizeof(msg), "S %d %llu %llu %llu %d %llu\n", section,
	             (unsigned long long)atomic_load(&sums[section].calls),
	             (unsigned long long)atomic_load(&sums[section].wait_ms),
	             (unsigned long long)atomic_load(&sums[section].max_ms), (int)getpid(), say_born);
	say(msg, (size_t)n);
}

void sl_say_after_fork(void)
{
	say_born++; /* another process, whatever its pid */
	/* The parent's holds are the parent's: summed again under this pid, the
	 * run's summary would count them twice. */
	for (int i = 0; i < SAY_SLOTS; i++) {
		atomic_store(&sums[i].calls, 0);
		atomic_store(&sums[i].wait_ms, 0);
		atomic_store(&sums[i].max_ms, 0);
		atomic_store(&sums[i].sent, 0);
		atomic_store(&sums[i].unsent, 0);
	}
}

void sl_say_sums(void)
{
	if (!sl_say_on)
		return;
	for (int i = 0; i < SAY_SLOTS; i++)
		if (atomic_load_explicit(&sums[i].unsent, memory_order_relaxed))
			send_sum(i);
}

static void sum_held(int section, int64_t wait_ns, int64_t now)
{
	uint64_t ms = (uint64_t)(wait_ns / 1000000), max;

	if (section >= SAY_SLOTS)
		return;
	atomic_fetch_add_explicit(&sums[section].calls, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sums[section].wait_ms, ms, memory_order_relaxed);
	max = atomic_load_explicit(&sums[section].max_ms, memory_order_relaxed);
	while (ms > max && !atomic_compare_exchange_weak_explicit(&sums[section].max_ms, &max, ms, memory_order_relaxed,
	                                                         memory_order_relaxed))
		;
	atomic_store_explicit(&sums[section].unsent, 1, memory_order_relaxed);
	if (may_say(&sums[section].sent, now, SL_SAY_EVERY_NS))
		send_sum(section);
}

void sl_say_held(int section, int64_t wait_ns, int64_t now)
{
	char msg[64];
	int n;

	if (!sl_say_on || section < 0 || wait_ns <= 0)
		return;
	sum_held(section, wait_ns, now);
	if (wait_ns < say_held_ns || !may_say(&held_said[section % SAY_SLOTS], now, SL_SAY_EVERY_NS))
		return;
	n = snprintf(msg, sizeof(msg), "H %d %lld %d\n", section, (long long)(wait_ns / 1000000),
	             (int)getpid());
	say(msg, (size_t)n);
}

void sl_say_refused(int section, const char *why, int64_t now)
{
	char msg[160];
	int n;

	(void)now;
	if (!sl_say_on)
		return;
	n = snprintf(msg, sizeof(msg), "R %d 1 %s\n", section, why ? why : "refused");
	say(msg, (size_t)SL_MIN(n, (int)sizeof(msg) - 1));
}

void sl_say_notice(const char *text, size_t len)
{
	char msg[512];
	int n;

	if (!sl_say_on)
		return;
	n = snprintf(msg, sizeof(msg), "N %.*s\n", (int)SL_MIN(len, sizeof(msg) - 4), text);
	say(msg, (size_t)SL_MIN(n, (int)sizeof(msg) - 1));
}
