/* The segments an operator can find, by their sockets (include/sluice/segments.h). */
#include "sluice/roster.h"
#include "sluice/segments.h"
#include "sluice/segsock.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the server at s->path says of itself ("info"). */
static void ask_info(struct sl_segment *s)
{
	struct sl_segsock_reply r;
	char v[SL_PATH_MAX];

	s->err = sl_segsock_ask(s->path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r);
	if (r.fd >= 0)
		close(r.fd);
	if (s->err == 0 && strncmp(r.line, "ok", 2) != 0)
		s->err = -EPROTO;
	if (s->err < 0)
		return;
#define NUM(key, field, base)                                                                      \
	if (sl_segsock_value(r.line, key, v, sizeof(v)) == 0)                                          \
		s->field = (__typeof__(s->field))strtoll(v, NULL, base);
	NUM("pid", pid, 10)
	NUM("attached", attached, 10)
	NUM("daemon_pid", daemon_pid, 10)
	NUM("heartbeat_ms", heartbeat_ms, 10)
	NUM("moved", moved, 10)
	NUM("mode", mode, 8)
	NUM("gid", policy_gid, 10)
#undef NUM
	if (sl_segsock_value(r.line, "id", v, sizeof(v)) == 0)
		s->id = strtoull(v, NULL, 16);
	if (sl_segsock_value(r.line, "pidns", v, sizeof(v)) == 0)
		s->other_pidns = strtoull(v, NULL, 10) != sl_roster_me().pidns;
	if (sl_segsock_value(r.line, "generation", v, sizeof(v)) == 0)
		s->generation = strtoull(v, NULL, 10);
	if (sl_segsock_value(r.line, "name", v, sizeof(v)) == 0)
		snprintf(s->name, sizeof(s->name), "%s", v);
	/* The config comes last: a path may hold spaces. */
	{
		const char *c = strstr(r.line, " config=");

		snprintf(s->config, sizeof(s->config), "%s", c ? c + 8 : "");
	}
}

int sl_segment_find(const char *path, struct sl_segment *out)
{
	struct stat st;

	memset(out, 0, sizeof(*out));
	out->heartbeat_ms = -1;
	if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
		return -ENOENT;
	snprintf(out->path, sizeof(out->path), "%s", path);
	out->uid = st.st_uid;
	out->gid = st.st_gid;
	out->file_mode = st.st_mode & 0777;
	out->changed_s = (int64_t)st.st_ctime;
	ask_info(out);
	return 0;
}

int sl_segments_in(const char *dir, int (*fn)(const struct sl_segment *, void *), void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return -errno;
	while (rc == 0 && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		char path[sizeof(((struct sl_segment *)0)->path)];
		struct sl_segment s;

		if (n <= 8 || strcmp(e->d_name + n - 8, ".segment") != 0 ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
			continue;
		if (sl_segment_find(path, &s) == 0)
			rc = fn(&s, arg);
	}
	closedir(d);
	return rc < 0 ? rc : 0;
}

static void name_of(char *buf, size_t len, int user, unsigned id)
{
	struct passwd *pw = user ? getpwuid(id) : NULL;
	struct group *gr = user ? NULL : getgrgid(id);

	if (pw || gr)
		snprintf(buf, len, "%s", pw ? pw->pw_name : gr->gr_name);
	else
		snprintf(buf, len, "%u", id);
}

void sl_segment_owner(const struct sl_segment *s, char *buf, size_t len)
{
	char u[32], g[32];

	name_of(u, sizeof(u), 1, (unsigned)s->uid);
	name_of(g, sizeof(g), 0, (unsigned)s->gid);
	snprintf(buf, len, "%s:%s", u, g);
}

void sl_segment_about(const char *path, char *buf, size_t len)
{
	struct sl_segment s;
	char owner[72];

	if (sl_segment_find(path, &s) < 0) {
		snprintf(buf, len, "segment at %s: no such socket", path);
		return;
	}
	sl_segment_owner(&s, owner, sizeof(owner));
	if (s.err < 0) /* the caller says why it could not be had */
		snprintf(buf, len, "segment at %s (owner %s, mode %04o)", path, owner, s.file_mode);
	else
		snprintf(buf, len, "segment at %s (kept by pid %d%s, owner %s, mode %04o, %u attached)", path, (int)s.pid,
		         s.other_pidns ? " of another pid namespace" : "", owner, s.mode, s.attached);
}

void sl_segment_fix(const char *path, int err, const char *why, char *buf, size_t len)
{
	struct sl_segment s;
	char dir[108], g[32];
	const char *slash = strrchr(path, '/');

	(void)why; /* said by the caller, first */
	buf[0] = '\0';
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	if (err == -ENOENT) {
		snprintf(buf, len, "no sluiced serves it: start one (the service, or sluiced -c FILE), or use "
		                   "`sluice run`, which hosts its own; in a container, mount the host's %s there "
		                   "(docker run -v %s:%s)", dir, dir, dir);
	} else if (err == -ECONNREFUSED) {
		snprintf(buf, len, "its keeper is gone: start sluiced again");
	} else if ((err == -EACCES || err == -EPERM) && sl_segment_find(path, &s) == 0) {
		name_of(g, sizeof(g), 0, (unsigned)s.gid);
		if (!(s.file_mode & 060))
			snprintf(buf, len, "only its owner and root may use it (mode %04o): give a group of users access "
			         "with shm_mode = 0660 and shm_group = GROUP in the daemon's config", s.file_mode);
		else if (s.gid == 0)
			/* Never "join group root": name a group for the purpose. */
			snprintf(buf, len, "it is for its owner and group root: name a group for the users who may "
			         "shape in the daemon's config (shm_group = sluice, after groupadd sluice), add them "
			         "to it, and restart sluiced");
		else
			snprintf(buf, len, "it is for members of group %s (shm_group): add this user to it and log in "
			         "again; in a user namespace, map this user to a member of that group on the host", g);
	} else if (err == -EPROTO) {
		snprintf(buf, len, "what answers is not a sluice segment of this version: upgrade the two together");
	}
}

void sl_segment_join(gid_t gid, const char *user, char *buf, size_t len)
{
	char g[32];

	name_of(g, sizeof(g), 0, (unsigned)gid);
	if (gid == 0)
		snprintf(buf, len, "name a group for the users who may shape in the daemon's config (shm_group = "
		         "sluice, after groupadd sluice), add %s to it, and restart sluiced", user);
	else
		snprintf(buf, len, "sudo usermod -aG %s %s, then log in again (or run under `newgrp %s`)", g, user, g);
}

int sl_run_dir(char *out, size_t len, int make)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	int n;

	if (xdg && xdg[0] == '/')
		n = snprintf(out, len, "%s/sluice", xdg);
	else
		n = snprintf(out, len, "/tmp/sluice-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (make && mkdir(out, 0700) != 0 && errno != EEXIST)
		return -errno;
	if (lstat(out, &st) != 0)
		return -errno;
	/* A directory another user made (under /tmp anyone may) could hold sockets
	 * of theirs: never used. */
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return -EPERM;
	return 0;
}
