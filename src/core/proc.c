/* Process identity for words in the segment (proc.h). */
#include "sluice/proc.h"
#include "sluice/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* State letter and start time from a /proc stat file (`fmt` with the pid).  0, or
 * -1 when it cannot be read (-2: no such process). */
static int read_stat_at(const char *fmt, int32_t pid, char *state, unsigned long long *start)
{
	char path[48], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), fmt, (int)pid, (int)pid);
	fd = sl_sys_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -2 : -1;
	n = sl_sys_read(fd, buf, sizeof(buf) - 1);
	sl_sys_close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold spaces and parentheses; the last ')' ends it. */
	if (!(p = strrchr(buf, ')')) || p[1] != ' ' || !p[2])
		return -1;
	*state = p[2];
	p += 3;
	/* Fields 4..21 follow, then the start time (field 22). */
	for (int field = 4; field <= 22; field++) {
		if (!(p = strchr(p, ' ')))
			return -1;
		p++;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

/* Through the task entry of the pid's main thread, which has the same start time
 * and state: qemu-user answers a process's reads of its own /proc/self/stat and
 * /proc/PID/stat itself, with a start time that differs from the kernel's (a
 * forked child's is its parent's), but passes the task entries through.  So every
 * process reads every stamp, its own included, from the same kernel source. */
static int read_stat(int32_t pid, char *state, unsigned long long *start)
{
	int rc = read_stat_at("/proc/%d/task/%d/stat", pid, state, start);

	return rc == -1 ? read_stat_at("/proc/%d/stat", pid, state, start) : rc;
}

/* A start time as a stamp: its low 32 bits, never 0 (0 says "no stamp"). */
static uint32_t stamp_of(unsigned long long start)
{
	return (uint32_t)start ? (uint32_t)start : 1;
}

int sl_proc_check(int32_t pid, uint32_t stamp)
{
	unsigned long long start = 0;
	char state = 0;
	int rc;

	if (pid <= 0)
		return SL_PROC_GONE;
	rc = read_stat(pid, &state, &start);
	if (rc == -2)
		return SL_PROC_GONE;
	if (rc < 0)
		return kill(pid, 0) != 0 && errno == ESRCH ? SL_PROC_GONE : SL_PROC_UNKNOWN;
	if (state == 'Z' || state == 'X' || state == 'x')
		return SL_PROC_GONE;
	if (stamp && stamp_of(start) != stamp)
		return SL_PROC_GONE; /* the pid was given to another process since */
	return SL_PROC_ALIVE;
}

uint32_t sl_proc_self_stamp(int32_t self)
{
	/* pid and stamp in one word, so threads racing on the first call agree. */
	static _Atomic uint64_t cache;
	uint64_t c = atomic_load_explicit(&cache, memory_order_relaxed);
	unsigned long long start = 0;
	uint32_t stamp;
	char state;

	if (c && (int32_t)(c & 0xffffffffu) == self)
		return (uint32_t)(c >> 32);
	stamp = read_stat(self, &state, &start) == 0 ? stamp_of(start) : 0;
	atomic_store_explicit(&cache, (uint64_t)stamp << 32 | (uint32_t)self, memory_order_relaxed);
	return stamp;
}

uint32_t sl_proc_stamp(int32_t pid)
{
	unsigned long long start = 0;
	char state;

	return pid > 0 && read_stat(pid, &state, &start) == 0 ? stamp_of(start) : 0;
}

int sl_proc_owner(int32_t pid, uint32_t stamp)
{
	int rc = sl_proc_check(pid, stamp);

	/* A live process proves no ownership of a word that holds no stamp: no locker
	 * wrote it (docs/design.md, "Invariants"). */
	return rc == SL_PROC_ALIVE && stamp == 0 ? SL_PROC_GONE : rc;
}
