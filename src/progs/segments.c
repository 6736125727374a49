/* The machine's System V segments, for operators (include/sluice/segments.h).
 *
 * The list comes from /proc/sysvipc/shm rather than IPC_STAT: IPC_STAT needs read
 * permission, and the segment an operator most needs to find is the one this user
 * may not read ("cannot create segment /sluice: Permission denied").  Each is then
 * attached read-only, where allowed, to tell sluice's (its magic) from others'. */
#include "sluice/segments.h"
#include "sluice/shm.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/shm.h>
#include <time.h>

/* Read what a sluice header says about itself; the kind stays UNREADABLE when
 * this user may not attach it. */
static void look_inside(struct sl_segment *s)
{
	const struct sl_shm_header *h = shmat(s->shmid, NULL, SHM_RDONLY);
	uint32_t magic;

	s->kind = SL_SEGMENT_UNREADABLE;
	if (h == (void *)-1) {
		if (errno != EACCES && errno != EPERM)
			s->kind = SL_SEGMENT_OTHER; /* gone meanwhile, or not attachable at all */
		return;
	}
	s->kind = SL_SEGMENT_OTHER;
	if (s->size >= sizeof(*h)) {
		magic = atomic_load_explicit((const _Atomic uint32_t *)&h->magic, memory_order_acquire);
		if (sl_shm_magic_is_ours(magic)) {
			/* Copied out, each cut at its end: the segment is anyone's to scribble. */
			s->kind = SL_SEGMENT_OURS;
			if (sl_shm_has_name(h)) {
				memcpy(s->name, h->shm_name, sizeof(s->name));
				s->name[sizeof(s->name) - 1] = '\0';
			}
			memcpy(s->config, h->config_path, sizeof(s->config));
			s->config[sizeof(s->config) - 1] = '\0';
			s->daemon_pid = h->daemon_pid;
			s->moved = h->moved != 0;
		}
	}
	shmdt(h);
}

int sl_segments_each(int (*fn)(const struct sl_segment *, void *), void *arg)
{
	FILE *f = fopen("/proc/sysvipc/shm", "re");
	char line[512];
	int rc = 0;

	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f)) { /* the column names */
		fclose(f);
		return -EIO;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		struct sl_segment s;
		long long key, changed;
		unsigned long long size;
		int id, cpid;
		unsigned perms, nattch, uid, gid;

		memset(&s, 0, sizeof(s));
		/* key shmid perms size cpid lpid nattch uid gid cuid cgid atime dtime ctime */
		if (sscanf(line, "%lld %d %o %llu %d %*d %u %u %u %*u %*u %*u %*u %lld", &key, &id, &perms,
		           &size, &cpid, &nattch, &uid, &gid, &changed) != 9)
			continue;
		s.key = (key_t)key;
		s.shmid = id;
		s.mode = perms & 0777;
		s.size = size;
		s.creator = cpid;
		s.attached = nattch;
		s.uid = uid;
		s.gid = gid;
		s.changed_s = changed;
		look_inside(&s);
		rc = fn(&s, arg);
	}
	fclose(f);
	return rc < 0 ? rc : 0;
}

struct find_arg {
	key_t key;
	struct sl_segment *out;
};

static int find_one(const struct sl_segment *s, void *arg)
{
	struct find_arg *a = arg;

	if (s->key != a->key)
		return 0;
	*a->out = *s;
	return 1;
}

int sl_segment_find(const char *name, struct sl_segment *out)
{
	struct find_arg a = {sl_shm_key(name), out};
	int rc;

	out->shmid = -1;
	if ((rc = sl_segments_each(find_one, &a)) < 0)
		return rc;
	return out->shmid < 0 ? -ENOENT : 0;
}

void sl_segment_owner(const struct sl_segment *s, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(s->uid);
	struct group *gr = getgrgid(s->gid);
	char u[32], g[32];

	if (pw)
		snprintf(u, sizeof(u), "%s", pw->pw_name);
	else
		snprintf(u, sizeof(u), "%u", (unsigned)s->uid);
	if (gr)
		snprintf(g, sizeof(g), "%s", gr->gr_name);
	else
		snprintf(g, sizeof(g), "%u", (unsigned)s->gid);
	snprintf(buf, len, "%s:%s", u, g);
}

void sl_segment_about(const char *name, char *buf, size_t len)
{
	struct sl_segment s;
	char owner[72];
	unsigned key = (unsigned)sl_shm_key(name);

	if (sl_segment_find(name, &s) < 0) {
		snprintf(buf, len, "segment %s (System V key 0x%08x: none exists)", name, key);
		return;
	}
	sl_segment_owner(&s, owner, sizeof(owner));
	snprintf(buf, len, "segment %s (System V key 0x%08x, shmid %d, owner %s, mode %04o, %u attached)", name,
	         key, s.shmid, owner, s.mode, s.attached);
}

void sl_segment_fix(const char *name, int err, char *buf, size_t len)
{
	struct sl_segment s;

	buf[0] = '\0';
	if (sl_segment_find(name, &s) < 0) {
		if (err == -ENOENT)
			snprintf(buf, len, "no sluiced has made it: start one (sluiced -c FILE, or the service), "
			                   "or `sluice run`, which makes its own");
		return;
	}
	if (err == -EACCES || err == -EPERM) {
		if (s.attached == 0)
			snprintf(buf, len, "nobody uses it: remove it with `sudo sluice segments --remove-unused` "
			                   "(or `sudo ipcrm -m %d`), or run as its owner", s.shmid);
		else
			snprintf(buf, len, "%u processes use it: run as its owner or a member of its group, or "
			                   "give this config another shm_name", s.attached);
	} else if (err == -EEXIST || s.kind == SL_SEGMENT_OTHER) {
		snprintf(buf, len, "its key is another program's segment (shmid %d, made by pid %d): give this "
		                   "config another shm_name", s.shmid, (int)s.creator);
	} else if (err == -EPROTO) {
		snprintf(buf, len, "made by another version of sluice: once nobody uses it, `sudo sluice segments "
		                   "--remove-unused` (or `sudo ipcrm -m %d`)", s.shmid);
	}
}

int sl_segment_unused(const struct sl_segment *s, int64_t now_s)
{
	return s->kind == SL_SEGMENT_OURS && s->attached == 0 && now_s - s->changed_s >= SL_SEGMENT_SETTLE_S;
}
