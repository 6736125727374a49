/* `sluice segments`: sluice's System V segments on this machine - who made them,
 * who uses them, which config they serve - and `--remove-unused`, which removes
 * those nobody is attached to (README "Segments"). */
#include "cli.h"
#include "sluice/segments.h"
#include "sluice/shm.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/shm.h>
#include <time.h>

#define SEGMENTS_USAGE "usage: sluice segments [--remove-unused] | --key NAME\n"

struct listing {
	int remove;
	int64_t now_s;
	unsigned shown, unreadable, removed, failed;
};

static void age_of(int64_t s, char *buf, size_t len)
{
	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 2 * 3600)
		snprintf(buf, len, "%lldm", (long long)(s / 60));
	else if (s < 2 * 86400)
		snprintf(buf, len, "%lldh", (long long)(s / 3600));
	else
		snprintf(buf, len, "%lldd", (long long)(s / 86400));
}

/* Remove s when nobody has attached it since it was listed (IPC_STAT again just
 * before: the window left is the kernel's, and a program attaching in it keeps
 * its mapping; the daemon makes the name anew, as after an ipcrm). */
static void remove_one(const struct sl_segment *s, struct listing *l)
{
	struct shmid_ds ds;
	char owner[72];
	const char *why;

	if (shmctl(s->shmid, IPC_STAT, &ds) != 0)
		why = strerror(errno);
	else if (ds.shm_nattch != 0)
		return; /* taken up since it was listed: not unused */
	else if (shmctl(s->shmid, IPC_RMID, NULL) == 0) {
		printf("removed shmid %d (%s)\n", s->shmid, s->name[0] ? s->name : "name not recorded");
		l->removed++;
		return;
	} else
		why = errno == EPERM ? "only its owner or root may" : strerror(errno);
	sl_segment_owner(s, owner, sizeof(owner));
	fprintf(stderr, "sluice: cannot remove shmid %d (owner %s): %s\n", s->shmid, owner, why);
	l->failed++;
}

static int list_one(const struct sl_segment *s, void *arg)
{
	struct listing *l = arg;
	char owner[72], age[16], size[16], daemon[24];

	if (s->kind == SL_SEGMENT_UNREADABLE) {
		l->unreadable++;
		return 0;
	}
	if (s->kind != SL_SEGMENT_OURS)
		return 0;
	if (l->remove) {
		if (sl_segment_unused(s, l->now_s))
			remove_one(s, l);
		return 0;
	}
	if (l->shown++ == 0)
		printf("%-10s %-7s %-15s %-4s %7s %8s %5s %-7s %-24s %s\n", "KEY", "SHMID", "OWNER", "MODE",
		       "SIZE", "ATTACHED", "AGE", "DAEMON", "NAME", "CONFIG");
	sl_segment_owner(s, owner, sizeof(owner));
	age_of(l->now_s - s->changed_s, age, sizeof(age));
	snprintf(size, sizeof(size), "%.1fM", (double)s->size / (1 << 20));
	if (s->moved)
		snprintf(daemon, sizeof(daemon), "moved");
	else if (s->daemon_pid > 0 && (kill(s->daemon_pid, 0) == 0 || errno == EPERM))
		snprintf(daemon, sizeof(daemon), "%d", (int)s->daemon_pid);
	else
		snprintf(daemon, sizeof(daemon), "none");
	printf("0x%08x %-7d %-15s %04o %7s %8u %5s %-7s %-24s %s\n", (unsigned)s->key, s->shmid, owner, s->mode,
	       size, s->attached, age, daemon, s->name[0] ? s->name : "?", s->config[0] ? s->config : "-");
	return 0;
}

int sl_cmd_segments(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"remove-unused", no_argument, NULL, 'r'}, {"key", required_argument, NULL, 'k'}, {0}};
	struct listing l = {0};
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r': l.remove = 1; break;
		case 'k':
			/* For scripts (the package's purge): the key a name maps to. */
			printf("0x%08x\n", (unsigned)sl_shm_key(optarg));
			return SL_EXIT_OK;
		default: fputs(SEGMENTS_USAGE, stderr); return SL_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fputs(SEGMENTS_USAGE, stderr);
		return SL_EXIT_USAGE;
	}
	l.now_s = (int64_t)time(NULL);
	if ((rc = sl_segments_each(list_one, &l)) < 0) {
		fprintf(stderr, "sluice: cannot read /proc/sysvipc/shm: %s\n", strerror(-rc));
		return SL_EXIT_FAIL;
	}
	if (!l.remove && l.shown == 0)
		printf("no sluice segments%s\n", l.unreadable ? " this user can read" : "");
	if (l.unreadable)
		printf("(%u segments this user may not read: run as root to see whether they are sluice's)\n",
		       l.unreadable);
	if (l.remove)
		printf("%u removed%s\n", l.removed, l.removed || l.failed ? "" : " (none was unused)");
	return l.failed ? SL_EXIT_FAIL : SL_EXIT_OK;
}
