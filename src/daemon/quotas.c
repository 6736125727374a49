/*
 * The daemon's half of durable quotas (quota.h; docs/config.md, "Quotas that
 * outlive the segment"): every SL_QUOTA_PASS_NS it looks whether a shim asked
 * (h->quota_want) and runs a pass (sl_quota_pass: snapshot, save, grant); it
 * restores the file into a new segment, keeps the blocks of a lost or bad file,
 * and resets a section on `sluice quota reset`.  A file that cannot be written
 * grants nothing: the quota waits rather than go uncounted.
 */
#include "quotas.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/daemon.h"
#include "sluice/keys.h"
#include "sluice/limiter.h"
#include "sluice/lock.h"
#include "sluice/log.h"
#include "sluice/quota.h"
#include "sluice/shm.h"
#include "sluice/strategy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


/* A section whose file was lost or bad: granted nothing until `until` (wall ns). */
struct block {
	char name[SL_SECTION_NAME_MAX];
	int64_t until;
};

struct sl_quotas {
	struct sl_quota_files files;
	char lock_path[SL_PATH_MAX + 72];
	int lock_fd;
	ev_timer timer;
	struct block *blocks;
	unsigned nblocks;
	struct sl_quota_grants grants;
	int failing; /* the last save failed: said once until one succeeds */
};

void sl_quotas_dir(const struct sl_config *cfg, const char *fallback_dir, char *dir, size_t size)
{
	const char *d = cfg->global.state_dir;

	if (strcmp(d, "auto") == 0)
		d = fallback_dir ? fallback_dir : "";
	snprintf(dir, size, "%s", d);
}

void sl_quotas_mark(struct sl_config *cfg, const char *dir)
{
	for (unsigned i = 0; i < cfg->nsections; i++)
		cfg->sections[i].spec.durable = dir[0] && sl_quota_kept(&cfg->sections[i].spec);
}

static int64_t wall_now(void)
{
	return sl_clock_real_ns();
}

static struct block *block_of(struct sl_quotas *q, const char *name)
{
	for (unsigned i = 0; i < q->nblocks; i++)
		if (strncmp(q->blocks[i].name, name, SL_SECTION_NAME_MAX) == 0)
			return &q->blocks[i];
	return NULL;
}

/* The wall time a block of section `name` lasts until, 0 when none (or past). */
static int64_t blocked_until(struct sl_quotas *q, const char *name, int64_t wall)
{
	struct block *b = block_of(q, name);

	return b && b->until > wall ? b->until : 0;
}

static void block(struct sl_quotas *q, const char *name, int64_t until)
{
	struct block *b = block_of(q, name), *more;

	if (!b) {
		if (!(more = realloc(q->blocks, (q->nblocks + 1) * sizeof(*more))))
			return;
		q->blocks = more;
		b = &q->blocks[q->nblocks++];
		snprintf(b->name, sizeof(b->name), "%s", name);
		b->until = 0;
	}
	b->until = SL_MAX(b->until, until);
}

static int64_t blocked_cb(const char *name, void *arg)
{
	return blocked_until(arg, name, wall_now());
}

/* One pass: snapshot, save, grant (sl_quota_pass).  0, or -errno (nothing granted). */
static int pass(struct sl_daemon *d, enum sl_quota_mode mode)
{
	struct sl_quotas *q = d->quotas;
	int rc = sl_quota_pass(d->shm.hdr, d->shm.self, mode, blocked_cb, q, &q->files, &q->grants);

	if (rc < 0) {
		if (!q->failing)
			sl_log_warnx("state file %s cannot be written (%s): durable quotas wait until it can",
			             q->files.path, strerror(-rc));
		q->failing = 1;
		return rc;
	}
	if (q->failing)
		sl_log_info("state file %s written again", q->files.path);
	q->failing = 0;
	return 0;
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sl_daemon *d = w->data;

	(void)loop;
	(void)revents;
	if (!d->shm.hdr ||
	    !atomic_exchange_explicit((_Atomic uint32_t *)&d->shm.hdr->quota_want, 0, memory_order_relaxed))
		return;
	pass(d, SL_QUOTA_GRANT);
}

/* The end of the window in force for s at `now` (CLOCK_MONOTONIC): a fixed
 * window's end, or a window from now. */
static int64_t window_end(const struct sl_spec *s, struct sl_state *scratch, int64_t now, int64_t wall_off)
{
	struct sl_window_now w;

	memset(scratch, 0, sizeof(*scratch));
	if (s->strategy == SL_STRAT_FIXED_WINDOW && sl_strategy_window_now(s, scratch, now, wall_off, &w) && w.ends_ns > 0)
		return w.ends_ns;
	return now + s->window_ns;
}

/* No file to trust: every durable section starts as used up for its window in
 * force, and is granted nothing until it ends or an operator resets it. */
static void block_all(struct sl_daemon *d, const char *why)
{
	struct sl_shm_header *h = d->shm.hdr;
	int64_t now = sl_clock_mono_ns(), off = sl_clock_wall_offset_ns();
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	struct {
		struct sl_state st;
		struct sl_state_more more;
	} scratch;

	for (uint32_t i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);
		int64_t end;

		if (!sec->in_use || !sec->spec.durable)
			continue;
		end = window_end(&sec->spec, &scratch.st, now, off);
		block(d->quotas, sec->spec.name, end + off);
		if (sec->spec.per == SL_PER_NONE) /* so stat says so too */
			sl_strategy_exhaust(&sec->spec, &sec->state, now, off);
		{
			time_t t = (time_t)((end + off) / SL_NS_PER_S);
			struct tm tm;
			char at[32] = "?";

			if (gmtime_r(&t, &tm))
				strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
			sl_log_warnx("[%s]: %s: used up until its window ends (%s), or `sluice quota reset %s`",
			             sec->spec.name, why, at, sec->spec.name);
		}
	}
}

static int read_whole(const char *path, char **out, size_t *len)
{
	/* O_NONBLOCK: a FIFO put in the file's place must not hang the daemon's open;
	 * only a regular file is read. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	struct stat sb;
	char *p;
	size_t got = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (sb.st_size < 0 || sb.st_size > (1LL << 34) || !(p = malloc((size_t)sb.st_size + 1))) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, p + got, (size_t)sb.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*out = p;
	*len = got;
	return 0;
}

/* The file's records into the new segment (not yet published: no shim reads it). */
static void restore(struct sl_daemon *d, int had_file)
{
	struct sl_quotas *q = d->quotas;
	struct sl_shm_header *h = d->shm.hdr;
	struct sl_quota_head head;
	struct sl_quota_rec r;
	struct sl_slide slides[2];
	char *p = NULL, why[160], bad[SL_PATH_MAX + 80];
	size_t len = 0, off = sizeof(head);
	int64_t now = sl_clock_mono_ns(), wall_off = sl_clock_wall_offset_ns();
	unsigned states = 0, dropped = 0;
	int rc = read_whole(q->files.path, &p, &len);

	if (rc == -ENOENT) {
		if (had_file)
			block_all(d, "its state file is gone");
		return;
	}
	if (rc < 0 || sl_quota_check(p, len, &head, why, sizeof(why)) != 0) {
		if (rc < 0)
			snprintf(why, sizeof(why), "%s", rc == -EINVAL ? "not a regular file" : strerror(-rc));
		snprintf(bad, sizeof(bad), "%s.bad", q->files.path);
		if (rename(q->files.path, bad) == 0)
			sl_log_warnx("state file %s refused (%s): kept as %s", q->files.path, why, bad);
		else
			sl_log_warnx("state file %s refused (%s)", q->files.path, why);
		block_all(d, "its state file was refused");
		free(p);
		return;
	}
	if (sl_shm_lock(h, d->shm.self, SL_QUOTA_LOCK_WAIT_NS) < 0) {
		block_all(d, "the segment lock was not to be had to restore it");
		free(p);
		return;
	}
	while (sl_quota_next(p, len, &off, &r, slides)) {
		static const struct sl_keyid none;
		uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections), i;
		struct sl_section *sec = NULL;
		struct sl_state *st = NULL;

		for (i = 0; i < used; i++) {
			sec = sl_shm_section(h, i);
			if (sec->in_use && sec->spec.durable && strncmp(sec->spec.name, r.section, SL_SECTION_NAME_MAX) == 0)
				break;
		}
		if (i == used) {
			dropped++; /* the section is gone from the config, or no longer a quota */
			continue;
		}
		if (memcmp(&r.key, &none, sizeof(none)) == 0) {
			if (r.blocked_until > wall_now())
				block(q, sec->spec.name, r.blocked_until);
			if (sec->spec.per == SL_PER_NONE)
				st = &sec->state;
		} else if (sec->spec.per != SL_PER_NONE) {
			struct sl_key *k = sl_keys_find_id(h, i, &r.key, 1, now);

			if (k)
				st = &k->state;
			else
				sl_log_warnx("[%s]: no room in the key table for a saved key: it starts afresh "
				             "(keys = in [sluice])", sec->spec.name);
		}
		if (!st)
			continue;
		sl_quota_restore(&sec->spec, st, &r, slides, head.wall_off_ns - wall_off, now, wall_off);
		states++;
	}
	sl_shm_unlock(h, d->shm.self);
	sl_log_info("restored %u quota state%s from %s, saved %.0f s ago%s", states, states == 1 ? "" : "s",
	            q->files.path, (double)(wall_now() - head.saved_ns) / 1e9,
	            dropped ? " (records of sections no longer quotas dropped)" : "");
	free(p);
}

/* The state directory is this daemon's alone: owned by root or its user, and
 * writable by nobody else - another user who could write there could put a
 * state file of their own, or a name the daemon's writes would follow.  0, or
 * -EPERM said in the log. */
static int dir_is_ours(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat sb;
	int rc = 0;

	if (fd < 0 || fstat(fd, &sb) != 0) {
		rc = -errno;
		sl_log_warnx("state_dir %s: %s", dir, strerror(errno));
	} else if (sb.st_uid != 0 && sb.st_uid != geteuid()) {
		rc = -EPERM;
		sl_log_warnx("state_dir %s belongs to uid %u, not to root or this daemon's user (uid %u): "
		             "refused - chown it, or name a directory of the daemon's", dir, (unsigned)sb.st_uid,
		             (unsigned)geteuid());
	} else if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		rc = -EPERM;
		sl_log_warnx("state_dir %s is writable by %s (mode %04o): refused - chmod go-w it, or name a "
		             "directory only the daemon's user can write", dir,
		             sb.st_mode & S_IWOTH ? "every user" : "its group", (unsigned)(sb.st_mode & 07777));
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

int sl_quotas_start(struct sl_daemon *d, int created)
{
	struct sl_quotas *q;
	struct stat sb;
	int had_file, rc;

	if (!d->quota_dir[0])
		return 0;
	if (!(q = calloc(1, sizeof(*q))))
		return -ENOMEM;
	d->quotas = q;
	q->lock_fd = -1;
	sl_quota_files(&q->files, d->quota_dir, d->cfg->global.shm_name);
	snprintf(q->lock_path, sizeof(q->lock_path), "%s.lock", q->files.path);
	if (mkdir(d->quota_dir, 0700) != 0 && errno != EEXIST) {
		rc = -errno;
		sl_log_warnx("state_dir %s cannot be made: %s", d->quota_dir, strerror(errno));
		goto fail;
	}
	if ((rc = dir_is_ours(d->quota_dir)) < 0)
		goto fail;
	/* The lock file stays once made.  It is marked (one byte) once a state file
	 * was written: marked, with no state file, the state file was lost (nothing is
	 * to be handed out afresh); unmarked, none was ever saved - a start that
	 * failed before its first save - and the quotas start afresh. */
	if ((q->lock_fd = open(q->lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600)) < 0 ||
	    fstat(q->lock_fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		rc = q->lock_fd < 0 ? -errno : -EINVAL;
		sl_log_warnx("state file lock %s: %s", q->lock_path, rc == -EINVAL ? "not a regular file" : strerror(-rc));
		goto fail;
	}
	had_file = sb.st_size > 0;
	if (flock(q->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		rc = -EADDRINUSE;
		sl_log_warnx("state file %s belongs to another running sluiced", q->files.path);
		goto fail;
	}
	if (created)
		restore(d, had_file);
	if ((rc = pass(d, SL_QUOTA_SAVE)) < 0) {
		sl_log_warnx("state file %s: %s", q->files.path, strerror(-rc));
		goto fail;
	}
	if (!had_file && (pwrite(q->lock_fd, "1", 1, 0) != 1 || fsync(q->lock_fd) != 0)) {
		rc = -errno;
		sl_log_warnx("state file lock %s: %s", q->lock_path, strerror(errno));
		goto fail;
	}
	ev_timer_init(&q->timer, on_timer, (double)SL_QUOTA_PASS_NS / 1e9, (double)SL_QUOTA_PASS_NS / 1e9);
	q->timer.data = d;
	ev_timer_start(d->loop, &q->timer);
	sl_log_info("durable quotas kept in %s", q->files.path);
	return 0;
fail:
	if (q->lock_fd >= 0)
		close(q->lock_fd);
	free(q);
	d->quotas = NULL;
	return rc;
}

void sl_quotas_stop(struct sl_daemon *d)
{
	struct sl_quotas *q = d->quotas;

	if (!q)
		return;
	ev_timer_stop(d->loop, &q->timer);
	if (d->shm.hdr && pass(d, SL_QUOTA_STOP) == 0)
		sl_log_info("quotas saved to %s", q->files.path);
	close(q->lock_fd);
	free(q->blocks);
	free(q->grants.g);
	free(q);
	d->quotas = NULL;
}

int sl_quotas_reset(struct sl_daemon *d, const char *name, FILE *out)
{
	struct sl_shm_header *h = d->shm.hdr;
	int32_t self = d->shm.self;
	uint32_t used, nkeys, i, keys = 0;
	struct sl_section *sec = NULL;
	struct block *b;
	int rc;

	if (!d->quotas) {
		fprintf(out, "error: no state_dir: quotas are not kept, nothing to reset\n");
		return -ENOENT;
	}
	if (sl_shm_lock(h, self, SL_QUOTA_LOCK_WAIT_NS) < 0) {
		fprintf(out, "error: the segment lock is not to be had\n");
		return -EDEADLK;
	}
	used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	for (i = 0; i < used; i++) {
		sec = sl_shm_section(h, i);
		if (sec->in_use && sec->spec.durable && strncmp(sec->spec.name, name, SL_SECTION_NAME_MAX) == 0)
			break;
	}
	if (i == used) {
		sl_shm_unlock(h, self);
		fprintf(out, "error: no durable section [%.64s] (a quota: rate window of 1h or more)\n", name);
		return -ENOENT;
	}
	sl_quota_reset_state(&sec->spec, &sec->state);
	nkeys = sl_shm_nkeys(h);
	for (uint32_t s = 0; s < nkeys; s++) {
		struct sl_key *k = sl_shm_key_at(h, s);

		if (sl_shm_key_tags(h)[s] && sl_key_live(h, k) && k->section == i) {
			sl_quota_reset_state(&sec->spec, &k->state);
			keys++;
		}
	}
	sl_shm_unlock(h, self);
	if ((b = block_of(d->quotas, name)))
		b->until = 0;
	if ((rc = pass(d, SL_QUOTA_SAVE)) < 0) {
		fprintf(out, "error: reset, but the state file cannot be written: %s\n", strerror(-rc));
		return rc;
	}
	sl_log_notice("[%s]: quota reset by `sluice quota reset` (%u keys)", name, keys);
	fprintf(out, "ok [%s] reset (%u keys), saved to %s\n", name, keys, d->quotas->files.path);
	return 0;
}
