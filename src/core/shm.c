/*
 * shm.c - the segment's bottom layer: its layout, validation of what another wrote,
 * making a sealed memfd and mapping one handed over (shm.h).  It calls nothing
 * above it; carry.c replaces segments, lock.c keeps the lock word, segsock.c hands
 * segments from process to process.
 */
#include "shm-internal.h"
#include "sluice/shm.h"
#include "sluice/common.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "sluice/roster.h"
#include "sluice/sys.h"
#include <time.h>
#include <unistd.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

uint32_t sl_shm_index_size(uint32_t patterns)
{
	uint64_t want = (uint64_t)patterns * 2, n = 64;

	while (n < want)
		n <<= 1;
	return (uint32_t)SL_MIN(n, (uint64_t)1 << 31);
}

static size_t up(size_t n, size_t align)
{
	return (n + align - 1) & ~(align - 1);
}

int sl_shm_layout(const struct sl_shm_dims *d, struct sl_shm_layout *l)
{
	size_t at;

	if (d->sections > SL_SECTIONS_MAX || d->patterns > SL_PATTERNS_MAX || d->keys > SL_KEYS_MAX ||
	    d->holders > SL_HOLDERS_MAX || (d->holders & (d->holders - 1)) || d->key_more > 1 ||
	    d->procs > SL_PROCS_MAX)
		return -EINVAL;
	/* Each table on a cache line of its own; the key table on its own page. */
	l->sections = SL_SHM_SECTIONS_OFF;
	at = l->sections + (size_t)d->sections * sizeof(struct sl_section);
	l->patterns = up(at, 64);
	at = l->patterns + (size_t)d->patterns * sizeof(struct sl_pattern);
	l->index = up(at, 64);
	at = l->index + (size_t)sl_shm_index_size(d->patterns) * sizeof(struct sl_index_slot);
	l->refs = up(at, 64);
	at = l->refs + (size_t)d->patterns * sizeof(uint32_t);
	l->holders = up(at, 64);
	at = l->holders + (size_t)d->holders * sizeof(struct sl_holder);
	l->procs = up(at, 64);
	at = l->procs + (size_t)d->procs * sizeof(struct sl_proc);
	l->tags = up(at, 4096);
	at = l->tags + (size_t)d->keys * sizeof(uint64_t);
	l->keys = up(at, 64);
	l->size = l->keys + (size_t)d->keys * sl_shm_key_size(d);
	/* Records without a more end in one more's room: code that checked a spec
	 * needing one (sl_spec_needs_more) and read it as a scribbler changed the spec
	 * meanwhile reaches a neighbour's bytes, never past the segment. */
	if (!d->key_more)
		l->size += sizeof(struct sl_state_more);
	return 0;
}

struct sl_shm_dims sl_shm_dims_in(const struct sl_shm_header *h)
{
	return (struct sl_shm_dims){.sections = h->max_sections, .patterns = h->max_patterns,
	                            .holders = h->max_holders, .keys = h->max_keys,
	                            .key_more = h->key_size != sizeof(struct sl_key), .procs = h->max_procs};
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
	    h->section_size != sizeof(struct sl_section) || h->sections_off != SL_SHM_SECTIONS_OFF ||
	    (h->key_size != sizeof(struct sl_key) && h->key_size != sizeof(struct sl_key_more)))
		return -EPROTO;
	d = sl_shm_dims_in(h);
	if (sl_shm_layout(&d, &l) < 0 || h->index_slots != sl_shm_index_size(d.patterns) ||
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

void sl_shm_note_attached(struct sl_shm_header *h, const struct sl_shm_dims *d)
{
	for (unsigned i = 0; i < ATTACHED_MAX; i++) {
		struct sl_shm_header *none = NULL;

		if (atomic_load_explicit(&attached[i].h, memory_order_acquire) == h)
			return; /* the same mapping, validated already */
		/* Claim the slot with a placeholder, fill the view, then publish. */
		if (atomic_compare_exchange_strong(&attached[i].h, &none, (struct sl_shm_header *)1)) {
			attached[i].view.dims = *d;
			attached[i].view.private_ = 0;
			attached[i].view.index_slots = sl_shm_index_size(d->patterns);
			sl_shm_layout(d, &attached[i].view.at);
			atomic_store_explicit(&attached[i].h, h, memory_order_release);
			return;
		}
	}
	/* More attachments than slots: this one has no view, and nothing of it is
	 * indexed (every match finds nothing to take it: the shim passes traffic
	 * through, as with a segment it does not understand). */
}

/* h is anonymous memory of this process alone (read by lock.c). */
static void note_private(struct sl_shm_header *h)
{
	for (unsigned i = 0; i < ATTACHED_MAX; i++)
		if (atomic_load_explicit(&attached[i].h, memory_order_acquire) == h)
			attached[i].view.private_ = 1;
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

	return v ? v->dims : (struct sl_shm_dims){0, 0, 0, 0, 0, 0};
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
	return (struct sl_key *)((char *)h + v->at.keys + (size_t)i * sl_shm_key_size(&v->dims));
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

/* A fresh segment's memory is zero already (a memfd and anonymous mmap both give
 * zero pages): only a reused one is cleared, so large tables cost memory only as
 * their records are used.  The magic says "made, not published" until
 * sl_shm_publish(). */
void sl_shm_init_header(struct sl_shm_header *h, const struct sl_shm_dims *d, int clear)
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
	h->max_procs = d->procs;
	h->key_size = (uint32_t)sl_shm_key_size(d);
	h->index_slots = sl_shm_index_size(d->patterns);
	atomic_store_explicit(A(&h->magic), SL_SHM_MAGIC_UNPUBLISHED, memory_order_release);
}

int sl_shm_repair_header(struct sl_shm_header *h, size_t size)
{
	const struct sl_shm_view *v = sl_shm_view(h);
	struct sl_shm_dims d;

	if (!v || sl_shm_validate(h, size) == 0)
		return 0;
	/* From what this process's own mapping holds, never from the header. */
	d = v->dims;
	sl_shm_init_header(h, &d, 0);
	sl_shm_publish(h);
	return 1;
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
	out->procs = g->processes ? g->processes : SL_PROCS_DEFAULT;
	out->key_more = 0;
	for (unsigned i = 0; i < cfg->nsections; i++)
		if (cfg->sections[i].spec.per != SL_PER_NONE && sl_spec_needs_more(&cfg->sections[i].spec))
			out->key_more = 1;
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
	for (unsigned i = 0; i < cfg->nsections && !d.key_more; i++)
		if (cfg->sections[i].spec.per != SL_PER_NONE && sl_spec_needs_more(&cfg->sections[i].spec)) {
			snprintf(why, len, "section %s keeps more per key (a sliding window, a fleet lease or "
			         "adapt) than the segment's key records hold", cfg->sections[i].spec.name);
			return -ENOSPC;
		}
	return 0;
}

/* --- where the segment lives (shm.h) --- */

void sl_shm_set_name(struct sl_shm_header *h, const char *name)
{
	char cut[sizeof(h->shm_name)] = "";

	snprintf(cut, sizeof(cut), "%s", name ? name : "");
	memcpy(h->shm_name, cut, sizeof(cut));
}

/* Validate what shm maps and note its tables' sizes (see note_attached). */
int sl_shm_adopt(struct sl_shm *shm)
{
	int rc = sl_shm_validate(shm->hdr, shm->size);

	if (rc == 0) {
		struct sl_shm_dims d = sl_shm_dims_in(shm->hdr);

		sl_shm_note_attached(shm->hdr, &d);
	}
	return rc;
}

/* The seals every segment carries: its size can never change, and no one may
 * take the seals off. */
#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

int sl_shm_create(struct sl_shm *shm, const char *name, const struct sl_shm_dims *dims)
{
	struct sl_shm_layout l;
	char label[64];
	void *p;
	int fd, rc;

	shm->hdr = NULL;
	shm->fd = -1;
	shm->self = 0;
	if (sl_shm_layout(dims, &l) < 0)
		return -EINVAL;
	snprintf(label, sizeof(label), "sluice:%s", name && *name ? name : "segment");
	fd = (int)sl_sys(SYS_memfd_create, label, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* Its pages come as records are first written: large tables cost address
	 * space, not memory, until used. */
	if (sl_sys(SYS_ftruncate, fd, (long)l.size) != 0 || sl_sys(SYS_fcntl, fd, F_ADD_SEALS, SEALS) != 0) {
		rc = -errno;
		sl_sys_close(fd);
		return rc;
	}
	p = mmap(NULL, l.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		sl_sys_close(fd);
		return rc;
	}
	shm->hdr = p;
	shm->size = l.size;
	shm->anonymous = 0;
	shm->fd = fd;
	{
		struct stat st;

		shm->ino = sl_sys(SYS_fstat, fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
	}
	sl_shm_init_header(shm->hdr, dims, 0);
	sl_shm_note_attached(shm->hdr, dims);
	sl_shm_set_name(shm->hdr, name);
	while (!shm->hdr->segment_id)
		sl_sys(SYS_getrandom, &shm->hdr->segment_id, sizeof(shm->hdr->segment_id), 0);
	return 0;
}

int sl_shm_map_fd(struct sl_shm *shm, int fd, int writable, int keep_fd)
{
	struct stat st;
	long seals;
	void *p;
	int rc;

	shm->hdr = NULL;
	shm->fd = -1;
	shm->self = 0;
	/* What was handed over is untrusted: a file whose size could change under
	 * the mapping (unsealed), or smaller than it claims, is no segment. */
	if (fd < 0 || sl_sys(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode))
		return -EBADF;
	seals = sl_sys(SYS_fcntl, fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EPERM;
	if (st.st_size < (off_t)sizeof(struct sl_shm_header) || (uint64_t)st.st_size > ((uint64_t)1 << 40))
		return -EPROTO;
	p = mmap(NULL, (size_t)st.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
	         MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	shm->hdr = p;
	shm->size = (size_t)st.st_size;
	shm->anonymous = 0;
	shm->ino = (uint64_t)st.st_ino;
	if ((rc = sl_shm_adopt(shm)) < 0) {
		munmap(p, shm->size);
		shm->hdr = NULL;
		return rc;
	}
	shm->fd = keep_fd ? fd : -1;
	return 0;
}

int sl_shm_magic_is_ours(uint32_t magic)
{
	return magic == SL_SHM_MAGIC || magic == SL_SHM_MAGIC_UNPUBLISHED;
}

int sl_shm_moved(const struct sl_shm_header *h)
{
	return h && atomic_load_explicit(A(&((struct sl_shm_header *)h)->moved), memory_order_acquire) != 0;
}

static void enter_self(struct sl_shm *shm)
{
	struct sl_proc_id me = sl_roster_me();
	int32_t t = sl_roster_enter(shm->hdr, &me, me.pid, me.stamp, NULL);

	shm->self = t > 0 ? t : 0;
}

int sl_shm_create_anonymous(struct sl_shm *shm)
{
	struct sl_shm_dims d = SL_SHM_DIMS_DEFAULT;

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
	shm->fd = -1;
	shm->ino = 0;
	sl_shm_init_header(shm->hdr, dims, 0);
	sl_shm_note_attached(shm->hdr, dims);
	note_private(shm->hdr);
	sl_shm_publish(shm->hdr);
	enter_self(shm);
	return 0;
}

void sl_shm_detach(struct sl_shm *shm)
{
	if (shm->hdr) {
		forget_attached(shm->hdr);
		munmap(shm->hdr, shm->size);
	}
	if (shm->fd >= 0)
		sl_sys_close(shm->fd);
	shm->fd = -1;
	shm->hdr = NULL;
}
