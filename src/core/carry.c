/*
 * carry.c - a segment replaced by one of other sizes, its state carried over under
 * the old one's lock (shm.h; docs/design.md, "The segment").  It sits above
 * conc.c, keys.c and roster.c, whose records it re-places; shm.c below it knows
 * only the layout.
 */
#include "shm-internal.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/keys.h"
#include "sluice/lock.h"
#include "sluice/shm.h"

#include "sluice/roster.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

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
	to->daemon_owner = from->daemon_owner;
	to->daemon_pid = from->daemon_pid;
	sl_roster_carry(to, from);
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
	want->procs = SL_MAX(want->procs, had.procs); /* every token keeps its entry */
}

int sl_shm_move(struct sl_shm *shm, struct sl_shm *old, const char *name, const struct sl_shm_dims *dims,
                const struct sl_config *cfg, int32_t self)
{
	struct sl_shm_dims want = *dims;
	int rc;

	shm->hdr = NULL;
	if (old->anonymous || !old->hdr)
		return -EINVAL;
	grow_to_carry(&want, old->hdr);
	if ((rc = sl_shm_create(shm, name, &want)) < 0)
		return rc;
	if ((rc = sl_shm_lock(old->hdr, self, 2 * SL_NS_PER_S)) < 0)
		goto fail;
	carry_over(shm->hdr, old->hdr);
	shm->self = self; /* carried with the roster */
	if ((rc = sl_shm_apply_config(shm->hdr, cfg, self)) < 0) {
		sl_shm_unlock(old->hdr, self);
		goto fail;
	}
	sl_shm_publish(shm->hdr);
	atomic_store_explicit(A(&old->hdr->moved), 1, memory_order_release);
	sl_shm_unlock(old->hdr, self);
	return 0;
fail:
	sl_shm_detach(shm);
	return rc;
}
