/*
 * A pass over the segment's durable quotas (quota.h): every durable state is
 * snapshotted under the segment lock together with what it still holds
 * (quota_left) and the grant it is to get; the file counting both as spent is
 * written atomically; only then are the grants added - to the states that are
 * still the same ones (serial).  Keys are taken KEY_BATCH at a time, so the lock
 * is never held for a whole key table (docs/config.md, "Quotas that outlive the
 * segment").
 */
#include "sluice/quota.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/keys.h"
#include "sluice/limiter.h"
#include "sluice/lock.h"
#include "sluice/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY_BATCH 1024u

void sl_quota_files(struct sl_quota_files *f, const char *dir, const char *shm_name)
{
	snprintf(f->dir, sizeof(f->dir), "%s", dir);
	snprintf(f->path, sizeof(f->path), "%s/%s.quota", dir, shm_name[0] == '/' ? shm_name + 1 : shm_name);
	snprintf(f->tmp, sizeof(f->tmp), "%s.tmp", f->path);
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The temporary file, made anew: O_EXCL and O_NOFOLLOW, so whatever was left at
 * its name - a symlink to another file, a FIFO, a file another user made - is
 * removed (unlink takes the link, never its target) rather than written through
 * or waited on. */
static int open_tmp(const char *tmp)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

int sl_quota_write(const struct sl_quota_files *f, const struct sl_quota_buf *b)
{
	int fd = open_tmp(f->tmp), dfd, rc;

	if (fd < 0)
		return fd;
	if ((rc = write_all(fd, b->p, b->len)) == 0 && fsync(fd) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(f->tmp, f->path) != 0)
		rc = -errno;
	if (rc < 0) {
		unlink(f->tmp);
		return rc;
	}
	/* The rename itself survives a power loss only once its directory is synced. */
	if ((dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	rc = fsync(dfd) != 0 ? -errno : 0;
	close(dfd);
	return rc;
}

static void add_grant(struct sl_quota_grants *g, uint32_t where, uint32_t serial, uint32_t section,
                      uint32_t amount)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		struct sl_quota_grant *more = realloc(g->g, cap * sizeof(*more));

		if (!more)
			return; /* not granted: it asks again */
		g->g = more;
		g->cap = cap;
	}
	g->g[g->n++] = (struct sl_quota_grant){where, serial, section, amount};
}

/* Under the lock: st's record in the pass, and its grant.  A state is granted
 * when half a chunk or less is left, up to a chunk; a keyed section's own state
 * releases nothing (its keys do) and is only saved. */
static void take(struct sl_quota_buf *b, struct sl_quota_grants *g, enum sl_quota_mode mode,
                 const struct sl_section *sec, const struct sl_keyid *key, struct sl_state *st, uint32_t where,
                 uint32_t serial, uint32_t section, int64_t blocked)
{
	uint32_t chunk = sl_quota_chunk(&sec->spec), more = 0;

	if (mode == SL_QUOTA_STOP)
		st->quota_left = 0; /* nothing more goes until the next daemon grants it */
	else if (mode == SL_QUOTA_GRANT && !blocked && st->quota_left <= chunk / 2 &&
	         (key || sec->spec.per == SL_PER_NONE))
		more = chunk - st->quota_left;
	sl_quota_buf_add(b, sec->spec.name, key, &sec->spec, st, (uint64_t)st->quota_left + more, blocked);
	if (more)
		add_grant(g, where, serial, section, more);
}

/* Under the lock: the grants of the pass just saved, to the states still the same. */
static void apply_grants(struct sl_shm_header *h, const struct sl_quota_grants *g)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct sl_quota_grant *x = &g->g[i];
		struct sl_state *st = NULL;

		if (x->where & SL_HOLDER_KEY) {
			struct sl_key *k = sl_shm_key_at(h, x->where & ~SL_HOLDER_KEY);

			if (k && k->serial == x->serial && k->section == x->section && sl_key_live(h, k))
				st = &k->state;
		} else {
			struct sl_section *sec = sl_shm_section(h, x->where);

			if (sec && sec->in_use && sec->serial == x->serial)
				st = &sec->state;
		}
		if (st)
			st->quota_left = (uint32_t)SL_MIN((uint64_t)st->quota_left + x->amount, (uint64_t)UINT32_MAX);
	}
}

/* The states of h into b (and g): 0, or -EDEADLK when the lock is not to be had. */
static int snapshot(struct sl_shm_header *h, int32_t self, enum sl_quota_mode mode,
                    int64_t (*blocked)(const char *section, void *arg), void *arg, struct sl_quota_buf *b,
                    struct sl_quota_grants *g)
{
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections), nkeys = sl_shm_nkeys(h);
	const uint64_t *tags = sl_shm_key_tags(h);
	int any = 0;

	if (sl_shm_lock(h, self, SL_QUOTA_LOCK_WAIT_NS) < 0)
		return -EDEADLK;
	for (uint32_t i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!sec->in_use || !sec->spec.durable)
			continue;
		any = 1;
		take(b, g, mode, sec, NULL, &sec->state, i, sec->serial, i, blocked(sec->spec.name, arg));
	}
	sl_shm_unlock(h, self);
	for (uint32_t s = 0; any && s < nkeys; s += KEY_BATCH) {
		if (sl_shm_lock(h, self, SL_QUOTA_LOCK_WAIT_NS) < 0)
			return -EDEADLK;
		for (uint32_t j = s; j < SL_MIN(s + KEY_BATCH, nkeys); j++) {
			struct sl_key *k;
			const struct sl_section *sec;

			if (!tags[j] || !sl_key_live(h, (k = sl_shm_key_at(h, j))) ||
			    !(sec = sl_shm_section(h, k->section)) || !sec->spec.durable)
				continue;
			take(b, g, mode, sec, &k->id, &k->state, j | SL_HOLDER_KEY, k->serial, k->section,
			     blocked(sec->spec.name, arg));
		}
		sl_shm_unlock(h, self);
	}
	return 0;
}

int sl_quota_pass(struct sl_shm_header *h, int32_t self, enum sl_quota_mode mode,
                  int64_t (*blocked)(const char *section, void *arg), void *arg,
                  const struct sl_quota_files *f, struct sl_quota_grants *g)
{
	struct sl_quota_buf b;
	int64_t off = sl_sane_ns(h->wall_off_ns) ? h->wall_off_ns : sl_clock_wall_offset_ns();
	int rc;

	g->n = 0;
	sl_quota_buf_begin(&b);
	rc = snapshot(h, self, mode, blocked, arg, &b, g);
	/* Nothing to grant: the file on disk still counts at least what went (every
	 * state spent only what it counted ahead), so it is not written again - a
	 * state waiting on a blocked section asks every few ms. */
	if (rc == 0 && mode == SL_QUOTA_GRANT && !g->n) {
		free(b.p);
		return 0;
	}
	if (rc == 0 && (rc = sl_quota_buf_end(&b, off, sl_clock_real_ns())) == 0)
		rc = sl_quota_write(f, &b);
	free(b.p);
	if (rc < 0 || !g->n)
		return rc;
	if (sl_shm_lock(h, self, SL_QUOTA_LOCK_WAIT_NS) < 0)
		return -EDEADLK;
	apply_grants(h, g);
	sl_shm_unlock(h, self);
	return 0;
}
