#include "sluice/shm.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/index.h"
#include "sluice/keys.h"
#include "sluice/proc.h"
#include "sluice/strategy.h"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

/* The magic of a segment made but not yet published (sl_shm_publish): ours, so a
 * daemon that died before publishing it has it replaced, but no segment to attach. */
#define SL_SHM_MAGIC_UNPUBLISHED 0x75434c53u /* "SLCu" */

static size_t up(size_t n, size_t align)
{
	return (n + align - 1) & ~(align - 1);
}

int sl_shm_layout(const struct sl_shm_dims *d, struct sl_shm_layout *l)
{
	size_t at;

	if (d->sections > SL_SECTIONS_MAX || d->patterns > SL_PATTERNS_MAX || d->keys > SL_KEYS_MAX ||
	    d->holders > SL_HOLDERS_MAX || (d->holders & (d->holders - 1)))
		return -EINVAL;
	/* Each table on a cache line of its own; the key table on its own page. */
	l->sections = SL_SHM_SECTIONS_OFF;
	at = l->sections + (size_t)d->sections * sizeof(struct sl_section);
	l->patterns = up(at, 64);
	at = l->patterns + (size_t)d->patterns * sizeof(struct sl_pattern);
	l->index = up(at, 64);
	at = l->index + (size_t)sl_index_slots_for(d->patterns) * sizeof(struct sl_index_slot);
	l->refs = up(at, 64);
	at = l->refs + (size_t)d->patterns * sizeof(uint32_t);
	l->holders = up(at, 64);
	at = l->holders + (size_t)d->holders * sizeof(struct sl_holder);
	l->tags = up(at, 4096);
	at = l->tags + (size_t)d->keys * sizeof(uint64_t);
	l->keys = up(at, 64);
	l->size = l->keys + (size_t)d->keys * sizeof(struct sl_key);
	return 0;
}

static struct sl_shm_dims dims_in(const struct sl_shm_header *h)
{
	return (struct sl_shm_dims){.sections = h->max_sections, .patterns = h->max_patterns,
	                            .holders = h->max_holders, .keys = h->max_keys};
}

int sl_shm_validate(const void *base, size_t size)
{
	const struct sl_shm_header *h = base;
	struct sl_shm_dims d;
	struct sl_shm_layout l;

	if (base == NULL || size < sizeof(*h))
		return -EINVAL;
	if (atomic_load_explicit(A(&((struct sl_shm_header *)h)->magic), memory_order_acquire) !=
	        SL_SHM_MAGIC ||
	    h->major != SL_SHM_MAJOR || h->header_size != sizeof(*h) ||
	    h->section_size != sizeof(struct sl_section) || h->sections_off != SL_SHM_SECTIONS_OFF)
		return -EPROTO;
	d = dims_in(h);
	if (sl_shm_layout(&d, &l) < 0 || h->index_slots != sl_index_slots_for(d.patterns) ||
	    h->size != l.size || size < l.size)
		return -EPROTO;
	return 0;
}

/* --- what this process may index ---
 *
 * The tables' sizes are read from the segment, which anyone with write access may
 * scribble on.  So each process notes, when it attaches and validates a segment
 * (or makes one), the sizes its own mapping holds, and indexes the tables only
 * below those: a scribbled size can change nothing of what a process reads.  A
 * handful of attachments per process at most (the shim's one, a test's few); the
 * first slot is looked at first, so the shim's one look-up costs one compare. */
#define ATTACHED_MAX 16

static struct attached {
	_Atomic(struct sl_shm_header *) h;
	struct sl_shm_view view; /* written before h is published, never after */
} attached[ATTACHED_MAX];

static void note_attached(struct sl_shm_header *h, const struct sl_shm_dims *d)
{
	for (unsigned i = 0; i < ATTACHED_MAX; i++) {
		struct sl_shm_header *none = NULL;

		if (atomic_load_explicit(&attached[i].h, memory_order_acquire) == h)
			return; /* the same mapping, validated already */
		/* Claim the slot with a placeholder, fill the view, then publish. */
		if (atomic_compare_exchange_strong(&attached[i].h, &none, (struct sl_shm_header *)1)) {
			attached[i].view.dims = *d;
			attached[i].view.index_slots = sl_index_slots_for(d->patterns);
			sl_shm_layout(d, &attached[i].view.at);
			atomic_store_explicit(&attached[i].h, h, memory_order_release);
			return;
		}
	}
	/* More attachments than slots: this one has no view, and nothing of it is
	 * indexed (every match finds nothing to take it: the shim passes traffic
	 * through, as with a segment it does not understand). */
}

static void forget_attached(struct sl_shm_header *h)
{
	for (unsigned i = 0; i < ATTACHED_MAX; i++)
		if (atomic_load_explicit(&attached[i].h, memory_order_relaxed) == h)
			atomic_store_explicit(&attached[i].h, NULL, memory_order_release);
}

const struct sl_shm_view *sl_shm_view(const struct sl_shm_header *h)
{
	for (unsigned i = 0; i < ATTACHED_MAX; i++)
		if (atomic_load_explicit(&attached[i].h, memory_order_acquire) == h)
			return &attached[i].view;
	return NULL;
}

struct sl_shm_dims sl_shm_dims_of(const struct sl_shm_header *h)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	return v ? v->dims : (struct sl_shm_dims){0, 0, 0, 0};
}

uint32_t sl_shm_nkeys(const struct sl_shm_header *h)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	return v ? v->dims.keys : 0;
}

uint64_t *sl_shm_key_tags(struct sl_shm_header *h)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	return v ? (uint64_t *)((char *)h + v->at.tags) : NULL;
}

struct sl_key *sl_shm_key_at(struct sl_shm_header *h, uint32_t i)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	if (!v || i >= v->dims.keys)
		return NULL;
	return (struct sl_key *)((char *)h + v->at.keys) + i;
}

struct sl_section *sl_shm_section(struct sl_shm_header *h, unsigned i)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	if (!v || i >= v->dims.sections)
		return NULL;
	return (struct sl_section *)((char *)h + v->at.sections) + i;
}

struct sl_pattern *sl_shm_pattern(struct sl_shm_header *h, uint32_t i)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	if (!v || i >= v->dims.patterns)
		return NULL;
	return (struct sl_pattern *)((char *)h + v->at.patterns) + i;
}

struct sl_index_slot *sl_shm_index_slots(struct sl_shm_header *h, const struct sl_shm_view *v)
{
	return (struct sl_index_slot *)((char *)h + v->at.index);
}

uint32_t *sl_shm_refs(struct sl_shm_header *h, const struct sl_shm_view *v)
{
	return (uint32_t *)((char *)h + v->at.refs);
}

struct sl_holder *sl_shm_holders(struct sl_shm_header *h)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	return v ? (struct sl_holder *)((char *)h + v->at.holders) : NULL;
}

uint32_t sl_shm_nholders(const struct sl_shm_header *h)
{
	const struct sl_shm_view *v = sl_shm_view(h);

	return v ? v->dims.holders : 0;
}

const char *sl_section_name(struct sl_shm_header *h, int i)
{
	struct sl_section *sec = i >= 0 ? sl_shm_section(h, (unsigned)i) : NULL;

	return sec ? sec->spec.name : "?";
}

int sl_section_refuse(struct sl_shm_header *h, int i)
{
	struct sl_section *sec = i >= 0 ? sl_shm_section(h, (unsigned)i) : NULL;

	return sec ? sec->spec.refuse : 0;
}

/* A fresh segment's memory is zero already (shmget and anonymous mmap both give
 * zero pages): only a reused one is cleared, so large tables cost memory only as
 * their records are used.  The magic says "made, not published" until
 * sl_shm_publish(). */
static void init_header(struct sl_shm_header *h, const struct sl_shm_dims *d, int clear)
{
	struct sl_shm_layout l;

	sl_shm_layout(d, &l);
	if (clear)
		memset(h, 0, l.size);
	h->major = SL_SHM_MAJOR;
	h->minor = SL_SHM_MINOR;
	h->size = l.size;
	h->header_size = sizeof(*h);
	h->section_size = sizeof(struct sl_section);
	h->sections_off = SL_SHM_SECTIONS_OFF;
	h->max_sections = d->sections;
	h->max_patterns = d->patterns;
	h->max_holders = d->holders;
	h->max_keys = d->keys;
	h->index_slots = sl_index_slots_for(d->patterns);
	atomic_store_explicit(A(&h->magic), SL_SHM_MAGIC_UNPUBLISHED, memory_order_release);
}

void sl_shm_publish(struct sl_shm_header *h)
{
	/* Last: a reader never takes a half-made segment for a valid one. */
	atomic_store_explicit(A(&h->magic), SL_SHM_MAGIC, memory_order_release);
}

void sl_config_dims(const struct sl_config *cfg, struct sl_shm_dims *out)
{
	const struct sl_global *g = &cfg->global;

	out->sections = g->sections ? g->sections : SL_MIN(SL_MAX(64u, cfg->nsections * 2), (unsigned)SL_SECTIONS_MAX);
	out->patterns = g->patterns ? g->patterns : SL_MIN(SL_MAX(1024u, cfg->npatterns * 2), (unsigned)SL_PATTERNS_MAX);
	out->holders = g->holders ? g->holders : SL_HOLDERS_DEFAULT;
	out->keys = g->keys;
}

int sl_shm_fits(const struct sl_shm_header *h, const struct sl_config *cfg, char *why, size_t len)
{
	struct sl_shm_dims d = sl_shm_dims_of(h);

	if (cfg->nsections > d.sections) {
		snprintf(why, len, "%u sections need a larger section table than the segment has (%u)",
		         cfg->nsections, d.sections);
		return -ENOSPC;
	}
	if (cfg->npatterns > d.patterns) {
		snprintf(why, len, "%u patterns need a larger pattern table than the segment has (%u)",
		         cfg->npatterns, d.patterns);
		return -ENOSPC;
	}
	return 0;
}

/* --- where the segment lives ---
 *
 * A System V shared-memory segment, not a POSIX shm file: its size is fixed when it
 * is created and no one - not its owner, not root - can shrink it afterwards, so
 * no process holding write access can make the others' mappings fault (SIGBUS on
 * a truncated file was the one way a segment could kill its attached programs).
 * Marked for removal, it stays mapped until its last user detaches.  The name
 * (`shm_name`) is turned into the segment's key by sl_shm_key(); docs/design.md
 * "The segment" has the reasons and what `ipcs -m` shows. */

key_t sl_shm_key(const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a over "sluice:" and the name */
	const char *p;

	for (p = "sluice:"; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	for (p = name ? name : ""; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	/* Neither IPC_PRIVATE (0) nor -1, which shmget() would take for something else. */
	if (h == 0 || h == UINT32_MAX)
		h = 0x51ce0001u;
	return (key_t)h;
}

static int attach_id(struct sl_shm *shm, int id, int writable, size_t size)
{
	void *p = shmat(id, NULL, writable ? 0 : SHM_RDONLY);

	if (p == (void *)-1)
		return -errno;
	shm->hdr = p;
	shm->size = size;
	shm->anonymous = 0;
	shm->id = id;
	return 0;
}

/* The size of segment `id`, or -errno. */
static int64_t segment_size(int id)
{
	struct shmid_ds ds;

	if (shmctl(id, IPC_STAT, &ds) != 0)
		return -errno;
	return (int64_t)ds.shm_segsz;
}

/* Validate what shm maps and note its tables' sizes (see note_attached). */
static int adopt(struct sl_shm *shm)
{
	int rc = sl_shm_validate(shm->hdr, shm->size);

	if (rc == 0) {
		struct sl_shm_dims d = dims_in(shm->hdr);

		note_attached(shm->hdr, &d);
	}
	return rc;
}

int sl_shm_attach(struct sl_shm *shm, const char *name, int writable)
{
	int64_t size;
	int id, rc;

	shm->hdr = NULL;
	id = shmget(sl_shm_key(name), 0, 0);
	if (id < 0)
		return -errno;
	if ((size = segment_size(id)) < 0)
		return (int)size;
	if ((uint64_t)size < SL_SHM_SECTIONS_OFF)
		return -EPROTO;
	rc = attach_id(shm, id, writable, (size_t)size);
	if (rc == 0 && (rc = adopt(shm)) < 0)
		sl_shm_detach(shm);
	return rc;
}

/* Whether segment `id` was made by some sluice (any layout version, published or
 * not): its first word is our magic.  A key that collides with another program's
 * segment must not get that segment removed. */
static int is_ours(int id)
{
	void *p = shmat(id, NULL, SHM_RDONLY);
	uint32_t magic;

	if (p == (void *)-1)
		return 0;
	magic = atomic_load_explicit((_Atomic uint32_t *)p, memory_order_acquire);
	shmdt(p);
	return magic == SL_SHM_MAGIC || magic == SL_SHM_MAGIC_UNPUBLISHED;
}

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
	       a->keys == b->keys;
}

int sl_shm_open_or_create(struct sl_shm *shm, const char *name, unsigned mode, int *reattached)
{
	struct sl_shm_dims d = {64, 1024, SL_HOLDERS_DEFAULT, SL_KEYS_DEFAULT};

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
		if ((id = shmget(key, 0, 0)) < 0 || (size = segment_size(id)) < 0)
			return -errno;
		if (!is_ours(id))
			return -EEXIST;
		if (shmctl(id, IPC_STAT, &ds) != 0)
			return -errno;
		if ((rc = attach_id(&old, id, 1, (size_t)size)) < 0)
			return rc;
		if (adopt(&old) == 0) {
			struct sl_shm_dims had = dims_in(old.hdr);

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
			if ((rc = attach_id(shm, id, 1, l.size)) < 0)
				return rc;
			init_header(shm->hdr, &want, 1);
			note_attached(shm->hdr, &want);
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
	if ((rc = attach_id(shm, id, 1, l.size)) < 0) {
		sl_shm_detach(&old);
		return rc;
	}
	init_header(shm->hdr, &want, !fresh);
	note_attached(shm->hdr, &want);
	if (old.hdr && sl_shm_view(old.hdr)) {
		carry_over(shm->hdr, old.hdr);
		*reattached = 1;
	}
	sl_shm_detach(&old);
set_mode:
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
	if ((rc = attach_id(shm, id, 1, l.size)) < 0) {
		shmctl(id, IPC_RMID, NULL);
		return rc;
	}
	init_header(shm->hdr, &want, 0);
	note_attached(shm->hdr, &want);
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

int sl_shm_follow(struct sl_shm *shm, const char *name)
{
	struct sl_shm next;
	int rc;

	if (!shm->hdr || shm->anonymous ||
	    !atomic_load_explicit(A(&shm->hdr->moved), memory_order_acquire))
		return 0;
	if ((rc = sl_shm_attach(&next, name, 1)) < 0)
		return rc;
	if (next.hdr == shm->hdr || atomic_load_explicit(A(&next.hdr->moved), memory_order_acquire))
		return -ESTALE; /* the name still names it, or another moved one: not yet */
	/* One store of the header pointer, which every reader loads first. */
	__atomic_store_n(&shm->id, next.id, __ATOMIC_RELAXED);
	__atomic_store_n(&shm->size, next.size, __ATOMIC_RELAXED);
	__atomic_store_n(&shm->hdr, next.hdr, __ATOMIC_RELEASE);
	return 1;
}

int sl_shm_remove(const char *name)
{
	int id = shmget(sl_shm_key(name), 0, 0);

	if (id < 0 || shmctl(id, IPC_RMID, NULL) != 0)
		return -errno;
	return 0;
}

int sl_shm_is_named(const struct sl_shm *shm, const char *name)
{
	return shm->hdr && !shm->anonymous && shmget(sl_shm_key(name), 0, 0) == shm->id;
}

int sl_shm_create_anonymous(struct sl_shm *shm)
{
	struct sl_shm_dims d = {64, 1024, SL_HOLDERS_DEFAULT, SL_KEYS_DEFAULT};

	return sl_shm_create_anonymous_dims(shm, &d);
}

int sl_shm_create_anonymous_dims(struct sl_shm *shm, const struct sl_shm_dims *dims)
{
	struct sl_shm_layout l;
	void *p;

	if (sl_shm_layout(dims, &l) < 0)
		return -EINVAL;
	p = mmap(NULL, l.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	shm->hdr = p;
	shm->size = l.size;
	shm->anonymous = 1;
	shm->id = -1;
	init_header(shm->hdr, dims, 0);
	note_attached(shm->hdr, dims);
	sl_shm_publish(shm->hdr);
	return 0;
}

void sl_shm_detach(struct sl_shm *shm)
{
	if (shm->hdr) {
		forget_attached(shm->hdr);
		if (shm->anonymous)
			munmap(shm->hdr, shm->size);
		else
			shmdt(shm->hdr);
	}
	shm->hdr = NULL;
}

int sl_pid_is_dead(int32_t pid)
{
	return sl_proc_check(pid, 0) == SL_PROC_GONE;
}

/* The lock word's 32-bit half that holds the pid: the futex word. */
static uint32_t *lock_futex(struct sl_shm_header *h)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint32_t *)&h->lock;
#else
	return (uint32_t *)&h->lock + 1;
#endif
}

static uint64_t lock_value(int32_t pid, uint32_t stamp)
{
	return (uint64_t)stamp << 32 | (uint32_t)pid;
}

static void futex_wait(uint32_t *word, uint32_t val, int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / SL_NS_PER_S, .tv_nsec = ns % SL_NS_PER_S};

	/* Shared futex: waiters live in different processes. */
	syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* Whether the lock word `cur` names no owner proved alive: its process is gone,
 * a zombie, its pid belongs to another process now (the stamp differs), or the
 * word holds no stamp at all - a scribble no locker wrote (docs/design.md,
 * "Invariants": value 1, pid 1 and no stamp, once wedged every caller).  The
 * caller's own pid is its own only with its own stamp: then another of its
 * threads holds the lock. */
static int holder_gone(uint64_t cur, int32_t self)
{
	int32_t pid = (int32_t)(cur & 0xffffffffu);
	uint32_t stamp = (uint32_t)(cur >> 32);

	if (cur == 0)
		return 0;
	if (pid == self && self > 0)
		return stamp != sl_proc_self_stamp(self);
	return sl_proc_owner(pid, stamp) == SL_PROC_GONE;
}

/* How long a waiter waits before it asks whether the holder still lives, and
 * how often it asks again: a live holder keeps the lock for microseconds, while
 * asking reads /proc (three system calls), which every waiter of a busy lock
 * would otherwise do at each turn. */
#define LOCK_SUSPECT_NS SL_NS_PER_MS
/* How long a waiter spins before it sleeps on the futex.  A holder keeps the lock
 * for a few microseconds; a thread that takes it again and again (an event loop
 * opening 600 connections) lets it go for tens of microseconds between, and a
 * waiter asleep on the futex is woken too late to catch one of those gaps - the
 * shim's own release thread waited 17 ms that way.  Spinning this long catches
 * the next gap. */
#define LOCK_SPIN_NS (20 * SL_NS_PER_US)

int sl_shm_lock(struct sl_shm_header *h, int32_t self, int64_t timeout_ns)
{
	_Atomic uint64_t *word = A(&h->lock);
	uint64_t mine = lock_value(self, sl_proc_self_stamp(self));
	int64_t first = 0, asked = 0;
	int saved = errno;

	for (unsigned spin = 0;; spin++) {
		uint64_t cur = 0;
		int64_t now;

		if (atomic_compare_exchange_weak_explicit(word, &cur, mine, memory_order_acquire,
		                                          memory_order_relaxed)) {
			/* A segment another took over from: nothing may be decided here any
			 * more (its state went to the new one); the caller follows the name. */
			if (sl_unlikely(atomic_load_explicit(A(&h->moved), memory_order_acquire))) {
				sl_shm_unlock(h, self);
				errno = saved;
				return -EXDEV;
			}
			return 0;
		}
		if (spin % 64 != 63) {
			sl_cpu_relax();
			continue;
		}
		now = sl_clock_mono_ns();
		if (!first)
			first = now;
		if (now - first < LOCK_SPIN_NS && cur != 0)
			continue;
		if (now - first >= LOCK_SUSPECT_NS && now - asked >= LOCK_SUSPECT_NS) {
			asked = now;
			if (holder_gone(cur, self)) {
				if (atomic_compare_exchange_strong_explicit(word, &cur, mine, memory_order_acquire,
				                                            memory_order_relaxed)) {
					atomic_fetch_add_explicit(A(&h->lock_recoveries), 1, memory_order_relaxed);
					errno = saved;
					return 1;
				}
				continue;
			}
		}
		if (now - first > timeout_ns) {
			errno = saved;
			return -ETIMEDOUT;
		}
		if (cur == 0)
			continue;
		atomic_fetch_add_explicit(A(&h->lock_waiters), 1, memory_order_relaxed);
		futex_wait(lock_futex(h), (uint32_t)(cur & 0xffffffffu), LOCK_SUSPECT_NS);
		atomic_fetch_sub_explicit(A(&h->lock_waiters), 1, memory_order_relaxed);
	}
}

void sl_shm_unlock(struct sl_shm_header *h, int32_t self)
{
	uint64_t expect = lock_value(self, sl_proc_self_stamp(self));
	int saved = errno;

	/* Only the holder releases; a lock taken over meanwhile stays with its new owner. */
	if (atomic_compare_exchange_strong_explicit(A(&h->lock), &expect, 0, memory_order_release,
	                                            memory_order_relaxed) &&
	    atomic_load_explicit(A(&h->lock_waiters), memory_order_relaxed) != 0)
		syscall(SYS_futex, lock_futex(h), FUTEX_WAKE, 1, NULL, NULL, 0);
	errno = saved;
}

int sl_shm_reap_lock(struct sl_shm_header *h)
{
	uint64_t cur = atomic_load_explicit(A(&h->lock), memory_order_relaxed);

	if (cur == 0 || !holder_gone(cur, 0))
		return 0;
	if (!atomic_compare_exchange_strong(A(&h->lock), &cur, 0))
		return 0;
	atomic_fetch_add_explicit(A(&h->lock_recoveries), 1, memory_order_relaxed);
	syscall(SYS_futex, lock_futex(h), FUTEX_WAKE, 1, NULL, NULL, 0);
	return 1;
}

