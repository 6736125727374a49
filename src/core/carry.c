/*
 * carry.c - a segment's lifetime above its tables: open or create by name, replace
 * one of other sizes with its state carried over, move to a new segment under the
 * old one's lock (shm.h; docs/design.md, "The segment").  It sits above conc.c and
 * keys.c, whose records it re-places; shm.c below it knows only the layout.
 */
#include "shm-internal.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/keys.h"
#include "sluice/lock.h"
#include "sluice/shm.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

/* Carry what `from` holds into the fresh segment `to` (other table sizes, each at
 * least as large as what it carries: see grow_to_carry): sections at their
 * indices, holders and keys re-placed in their new tables (their hashes do not
 * depend on the tables' sizes), the header's counters as they are.  Patterns and
 * the match index are not carried: the config is loaded into `to` before it is
 * published.  Both are sluice segments of this layout; `from` is no longer in use
 * by anyone but the caller. */
static void carry_over(struct sl_shm_header *to, struct sl_shm_header *from)
{
	uint32_t n = SL_MIN(from->slots_used, sl_shm_dims_of(from).sections);

	if (n > sl_shm_dims_of(to).sections)
		n = sl_shm_dims_of(to).sections; /* not so: grow_to_carry saw to that */
	if (n)
		memcpy(sl_shm_section(to, 0), sl_shm_section(from, 0), (size_t)n * sizeof(struct sl_section));
	to->generation = from->generation;
	to->has_names = from->has_names;
	to->meters = from->meters;
	to->slots_used = n;
	to->wall_off_ns = from->wall_off_ns;
	to->fallback = from->fallback;
	to->lock_recoveries = from->lock_recoveries;
	memcpy(to->config_path, from->config_path, sizeof(to->config_path));
	sl_conc_carry(to, from);
	sl_keys_carry(to, from);
}

/* Dims for a segment replacing `old`: those asked for, each table at least as
 * large as what it carries (sections up to the last in use, every holder entry);
 * the key table may shrink (keys that find no room are dropped, as at a restart). */
static void grow_to_carry(struct sl_shm_dims *want, const struct sl_shm_header *old)
{
	struct sl_shm_dims had = sl_shm_dims_of(old);
	uint32_t used = SL_MIN(old->slots_used, had.sections);

	want->sections = SL_MAX(want->sections, used);
	while (want->holders < had.holders && want->holders < SL_HOLDERS_MAX)
		want->holders <<= 1;
}

static int same_dims(const struct sl_shm_dims *a, const struct sl_shm_dims *b)
{
	return a->sections == b->sections && a->patterns == b->patterns && a->holders == b->holders &&
	       a->keys == b->keys && a->key_more == b->key_more;
}

int sl_shm_open_or_create(struct sl_shm *shm, const char *name, unsigned mode, int *reattached)
{
	struct sl_shm_dims d = {64, 1024, SL_HOLDERS_DEFAULT, SL_KEYS_DEFAULT, 1};

	return sl_shm_open_or_create_dims(shm, name, mode, &d, reattached);
}

int sl_shm_open_or_create_dims(struct sl_shm *shm, const char *name, unsigned mode,
                               const struct sl_shm_dims *dims, int *reattached)
{
	key_t key = sl_shm_key(name);
	struct sl_shm_dims want = *dims;
	struct sl_shm_layout l;
	struct sl_shm old = {.hdr = NULL};
	struct shmid_ds ds;
	int id, rc, fresh = 1;

	*reattached = 0;
	shm->hdr = NULL;
	if (sl_shm_layout(&want, &l) < 0)
		return -EINVAL;
	/* SHM_NORESERVE: large tables are memory only as their records are used, not
	 * swap space set aside for all of them up front. */
	id = shmget(key, l.size, IPC_CREAT | IPC_EXCL | SHM_NORESERVE | (mode & 0777));
	if (id < 0 && errno == EEXIST) {
		int64_t size;

		fresh = 0;
		if ((id = shmget(key, 0, 0)) < 0 || (size = sl_shm_segment_size(id)) < 0)
			return -errno;
		if (!sl_shm_is_ours(id))
			return -EEXIST;
		if (shmctl(id, IPC_STAT, &ds) != 0)
			return -errno;
		if ((rc = sl_shm_attach_id(&old, id, 1, (size_t)size)) < 0)
			return rc;
		if (sl_shm_adopt(&old) == 0) {
			struct sl_shm_dims had = sl_shm_dims_in(old.hdr);

			if (same_dims(&had, &want)) {
				*shm = old;
				*reattached = 1;
				goto set_mode;
			}
			/* Other sizes.  A segment's size never changes.  One that programs
			 * still use is kept as it is (they would go on sharing it while new
			 * programs used a new one: two queues for one destination); the
			 * caller sees its dims.  One nobody uses is replaced, its state
			 * carried over. */
			if (ds.shm_nattch > 0) { /* read before we attached */
				*shm = old;
				*reattached = 1;
				goto set_mode;
			}
			grow_to_carry(&want, old.hdr);
			if (sl_shm_layout(&want, &l) < 0) {
				sl_shm_detach(&old);
				return -EINVAL;
			}
		} else if ((uint64_t)size == l.size) {
			/* Ours but not valid (another layout, half made, scribbled), of our
			 * size: made anew in place. */
			sl_shm_detach(&old);
			shm->hdr = NULL;
			if ((rc = sl_shm_attach_id(shm, id, 1, l.size)) < 0)
				return rc;
			sl_shm_init_header(shm->hdr, &want, 1);
			sl_shm_note_attached(shm->hdr, &want);
			goto set_mode;
		}
		if (shmctl(id, IPC_RMID, NULL) != 0) {
			rc = -errno;
			sl_shm_detach(&old);
			return rc;
		}
		id = shmget(key, l.size, IPC_CREAT | IPC_EXCL | SHM_NORESERVE | (mode & 0777));
		fresh = 1;
	}
	if (id < 0) {
		rc = -errno;
		sl_shm_detach(&old);
		return rc;
	}
	if ((rc = sl_shm_attach_id(shm, id, 1, l.size)) < 0) {
		sl_shm_detach(&old);
		return rc;
	}
	sl_shm_init_header(shm->hdr, &want, !fresh);
	sl_shm_note_attached(shm->hdr, &want);
	if (old.hdr && sl_shm_view(old.hdr)) {
		carry_over(shm->hdr, old.hdr);
		*reattached = 1;
	}
	sl_shm_detach(&old);
set_mode:
	sl_shm_set_name(shm->hdr, name);
	/* The mode the config asks for, also on a segment made under another one. */
	if (shmctl(shm->id, IPC_STAT, &ds) != 0 ||
	    (ds.shm_perm.mode = (ds.shm_perm.mode & ~0777u) | (mode & 0777),
	     shmctl(shm->id, IPC_SET, &ds) != 0)) {
		rc = -errno;
		sl_shm_detach(shm);
		return rc;
	}
	return 0;
}

int sl_shm_move(struct sl_shm *shm, struct sl_shm *old, const char *name, unsigned mode,
                const struct sl_shm_dims *dims, const struct sl_config *cfg, int32_t self, int remove_old)
{
	struct sl_shm_dims want = *dims;
	struct sl_shm_layout l;
	struct shmid_ds ds;
	int id, rc;

	shm->hdr = NULL;
	if (old->anonymous || !old->hdr)
		return -EINVAL;
	grow_to_carry(&want, old->hdr);
	if (sl_shm_layout(&want, &l) < 0)
		return -EINVAL;
	if (remove_old && shmctl(old->id, IPC_RMID, NULL) != 0 && errno != EIDRM && errno != EINVAL)
		return -errno;
	id = shmget(sl_shm_key(name), l.size, IPC_CREAT | IPC_EXCL | SHM_NORESERVE | (mode & 0777));
	if (id < 0)
		return -errno;
	if ((rc = sl_shm_attach_id(shm, id, 1, l.size)) < 0) {
		shmctl(id, IPC_RMID, NULL);
		return rc;
	}
	sl_shm_init_header(shm->hdr, &want, 0);
	sl_shm_note_attached(shm->hdr, &want);
	sl_shm_set_name(shm->hdr, name);
	if ((rc = sl_shm_lock(old->hdr, self, 2 * SL_NS_PER_S)) < 0)
		goto fail;
	carry_over(shm->hdr, old->hdr);
	if ((rc = sl_shm_apply_config(shm->hdr, cfg, self)) < 0) {
		sl_shm_unlock(old->hdr, self);
		goto fail;
	}
	sl_shm_publish(shm->hdr);
	atomic_store_explicit(A(&old->hdr->moved), 1, memory_order_release);
	sl_shm_unlock(old->hdr, self);
	if (shmctl(shm->id, IPC_STAT, &ds) == 0) {
		ds.shm_perm.mode = (ds.shm_perm.mode & ~0777u) | (mode & 0777);
		shmctl(shm->id, IPC_SET, &ds);
	}
	return 0;
fail:
	shmctl(shm->id, IPC_RMID, NULL);
	sl_shm_detach(shm);
	return rc;
}
