#include "sluice/shm.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/keys.h"
#include "sluice/proc.h"
#include "sluice/strategy.h"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

int sl_shm_validate(const void *base, size_t size)
{
	const struct sl_shm_header *h = base;

	if (base == NULL || size < sizeof(*h))
		return -EINVAL;
	if (atomic_load_explicit(A(&((struct sl_shm_header *)h)->magic), memory_order_acquire) !=
	        SL_SHM_MAGIC ||
	    h->major != SL_SHM_MAJOR || h->header_size != sizeof(*h) ||
	    h->section_size != sizeof(struct sl_section) ||
	    h->sections_off != SL_SHM_SECTIONS_OFF || h->max_sections != SL_MAX_SECTIONS ||
	    h->max_keys > SL_KEYS_MAX || h->size != SL_SHM_SIZE_FOR(h->max_keys) || size < h->size)
		return -EPROTO;
	return 0;
}

/* --- how many key records this process may index ---
 *
 * The key table's length is read from the segment, which anyone with write access
 * may scribble on.  So each process notes, when it attaches and validates a
 * segment, how many records its own mapping holds, and indexes the table only
 * below that: a scribbled max_keys can shrink what a process uses, never make it
 * read past its mapping.  A handful of attachments per process at most (the
 * shim's one, a test's few). */
#define ATTACHED_MAX 16

static struct attached {
	_Atomic(struct sl_shm_header *) h;
	_Atomic uint32_t nkeys;
} attached[ATTACHED_MAX];

static void note_attached(struct sl_shm_header *h, uint32_t nkeys)
{
	for (unsigned i = 0; i < ATTACHED_MAX; i++) {
		struct sl_shm_header *none = NULL;

		if (atomic_load_explicit(&attached[i].h, memory_order_relaxed) == h ||
		    atomic_compare_exchange_strong(&attached[i].h, &none, h)) {
			atomic_store_explicit(&attached[i].nkeys, nkeys, memory_order_release);
			return;
		}
	}
	/* More attachments than slots: this one gets no key records (keyed sections
	 * then refuse as a full table would), never an unchecked bound. */
}

static void forget_attached(struct sl_shm_header *h)
{
	for (unsigned i = 0; i < ATTACHED_MAX; i++)
		if (atomic_load_explicit(&attached[i].h, memory_order_relaxed) == h) {
			atomic_store_explicit(&attached[i].nkeys, 0, memory_order_release);
			atomic_store_explicit(&attached[i].h, NULL, memory_order_release);
		}
}

uint32_t sl_shm_nkeys(const struct sl_shm_header *h)
{
	for (unsigned i = 0; i < ATTACHED_MAX; i++)
		if (atomic_load_explicit(&attached[i].h, memory_order_relaxed) == h)
			return atomic_load_explicit(&attached[i].nkeys, memory_order_acquire);
	return 0;
}

uint64_t *sl_shm_key_tags(struct sl_shm_header *h)
{
	return (uint64_t *)((char *)h + SL_SHM_KEYS_OFF);
}

struct sl_key *sl_shm_key_at(struct sl_shm_header *h, uint32_t i)
{
	uint32_t n = sl_shm_nkeys(h);

	if (i >= n)
		return NULL;
	return (struct sl_key *)((char *)h + SL_SHM_KEYS_OFF + SL_SHM_TAGS_BYTES(n)) + i;
}

/* A fresh segment's memory is zero already (shmget and anonymous mmap both give
 * zero pages): only a reused one is cleared, so a large key table costs memory
 * only as its records are used. */
static void init_header(struct sl_shm_header *h, uint32_t keys, int clear)
{
	if (clear)
		memset(h, 0, SL_SHM_SIZE_FOR(keys));
	h->major = SL_SHM_MAJOR;
	h->minor = SL_SHM_MINOR;
	h->size = SL_SHM_SIZE_FOR(keys);
	h->header_size = sizeof(*h);
	h->section_size = sizeof(struct sl_section);
	h->sections_off = SL_SHM_SECTIONS_OFF;
	h->max_sections = SL_MAX_SECTIONS;
	h->max_keys = keys;
	/* Magic last: a reader never takes a half-initialised segment for a valid one. */
	atomic_store_explicit(A(&h->magic), SL_SHM_MAGIC, memory_order_release);
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

/* Validate what shm maps and note its key table's length (see note_attached). */
static int adopt(struct sl_shm *shm)
{
	int rc = sl_shm_validate(shm->hdr, shm->size);

	if (rc == 0)
		note_attached(shm->hdr, shm->hdr->max_keys);
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
	if ((uint64_t)size < SL_SHM_SIZE_FOR(0))
		return -EPROTO;
	rc = attach_id(shm, id, writable, (size_t)size);
	if (rc == 0 && (rc = adopt(shm)) < 0)
		sl_shm_detach(shm);
	return rc;
}

/* Whether segment `id` was made by some sluice (any layout version): its first
 * word is our magic.  A key that collides with another program's segment must not
 * get that segment removed. */
static int is_ours(int id)
{
	void *p = shmat(id, NULL, SHM_RDONLY);
	int ours;

	if (p == (void *)-1)
		return 0;
	ours = atomic_load_explicit((_Atomic uint32_t *)p, memory_order_acquire) == SL_SHM_MAGIC;
	shmdt(p);
	return ours;
}

/* Carry what `from` holds into the fresh segment `to` (another key table size):
 * sections, holders and the header's counters as they are, keys re-placed in the
 * new table (their hashes do not depend on its size).  Both are sluice segments of
 * this layout; `from` is no longer in use by anyone but the caller. */
static void carry_over(struct sl_shm_header *to, struct sl_shm_header *from)
{
	size_t fixed = SL_SHM_KEYS_OFF - SL_SHM_SECTIONS_OFF;

	memcpy((char *)to + SL_SHM_SECTIONS_OFF, (char *)from + SL_SHM_SECTIONS_OFF, fixed);
	to->generation = from->generation;
	to->has_names = from->has_names;
	to->meters = from->meters;
	to->slots_used = from->slots_used;
	to->wall_off_ns = from->wall_off_ns;
	to->fallback = from->fallback;
	to->lock_recoveries = from->lock_recoveries;
	memcpy(to->config_path, from->config_path, sizeof(to->config_path));
	sl_keys_carry(to, from);
}

int sl_shm_open_or_create(struct sl_shm *shm, const char *name, unsigned mode, int *reattached)
{
	return sl_shm_open_or_create_keys(shm, name, mode, SL_KEYS_DEFAULT, reattached);
}

int sl_shm_open_or_create_keys(struct sl_shm *shm, const char *name, unsigned mode, uint32_t keys,
                               int *reattached)
{
	key_t key = sl_shm_key(name);
	size_t want = SL_SHM_SIZE_FOR(keys);
	struct sl_shm old = {.hdr = NULL};
	struct shmid_ds ds;
	int id, rc, fresh = 1;

	*reattached = 0;
	shm->hdr = NULL;
	if (keys > SL_KEYS_MAX)
		return -EINVAL;
	/* SHM_NORESERVE: a large key table is memory only as its records are used,
	 * not swap space set aside for all of it up front. */
	id = shmget(key, want, IPC_CREAT | IPC_EXCL | SHM_NORESERVE | (mode & 0777));
	if (id < 0 && errno == EEXIST) {
		int64_t size;

		fresh = 0;
		if ((id = shmget(key, 0, 0)) < 0 || (size = segment_size(id)) < 0)
			return -errno;
		if ((uint64_t)size != want) {
			/* Another size: another layout's segment, or this layout's with
			 * another key table.  A segment's size never changes.  One of ours
			 * that programs still use is kept as it is (they would go on
			 * sharing it while new programs used a new one: two queues for
			 * one destination); the caller sees its max_keys.  One nobody uses
			 * is replaced, its state carried over when it is of this layout -
			 * but never a stranger's segment under our key. */
			if (!is_ours(id))
				return -EEXIST;
			if (shmctl(id, IPC_STAT, &ds) != 0)
				return -errno;
			if (attach_id(&old, id, 1, (size_t)size) == 0 && adopt(&old) == 0 && ds.shm_nattch > 0) {
				*shm = old;
				*reattached = 1;
				goto set_mode;
			}
			if (shmctl(id, IPC_RMID, NULL) != 0) {
				rc = -errno;
				sl_shm_detach(&old);
				return rc;
			}
			id = shmget(key, want, IPC_CREAT | IPC_EXCL | SHM_NORESERVE | (mode & 0777));
			fresh = 1;
		}
	}
	if (id < 0) {
		rc = -errno;
		sl_shm_detach(&old);
		return rc;
	}
	if ((rc = attach_id(shm, id, 1, want)) < 0) {
		sl_shm_detach(&old);
		return rc;
	}
	if (!fresh && adopt(shm) == 0) {
		*reattached = 1;
	} else {
		init_header(shm->hdr, keys, !fresh);
		note_attached(shm->hdr, keys);
		if (old.hdr && sl_shm_validate(old.hdr, old.size) == 0) {
			carry_over(shm->hdr, old.hdr);
			*reattached = 1;
		}
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
	return sl_shm_create_anonymous_keys(shm, SL_KEYS_DEFAULT);
}

int sl_shm_create_anonymous_keys(struct sl_shm *shm, uint32_t keys)
{
	size_t size = SL_SHM_SIZE_FOR(SL_MIN(keys, (uint32_t)SL_KEYS_MAX));
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
	               -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	shm->hdr = p;
	shm->size = size;
	shm->anonymous = 1;
	shm->id = -1;
	init_header(shm->hdr, SL_MIN(keys, (uint32_t)SL_KEYS_MAX), 0);
	note_attached(shm->hdr, shm->hdr->max_keys);
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

struct sl_section *sl_shm_section(struct sl_shm_header *h, unsigned i)
{
	if (i >= SL_MAX_SECTIONS)
		return NULL;
	return (struct sl_section *)((char *)h + SL_SHM_SECTIONS_OFF) + i;
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

struct sl_holder *sl_shm_holders(struct sl_shm_header *h)
{
	return (struct sl_holder *)((char *)h + SL_SHM_HOLDERS_OFF);
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

/* Whether the lock word `cur` names no live holder: its process is gone, a
 * zombie, or its pid now belongs to another process (the stamp differs) - or the
 * word was scribbled into something no process wrote. */
static int holder_gone(uint64_t cur, int32_t self)
{
	int32_t pid = (int32_t)(cur & 0xffffffffu);

	if (cur == 0 || pid == self)
		return 0;
	return sl_proc_check(pid, (uint32_t)(cur >> 32)) == SL_PROC_GONE;
}

int sl_shm_lock(struct sl_shm_header *h, int32_t self, int64_t timeout_ns)
{
	_Atomic uint64_t *word = A(&h->lock);
	uint64_t mine = lock_value(self, sl_proc_self_stamp(self));
	int64_t deadline = 0;
	int saved = errno;

	for (unsigned spin = 0;; spin++) {
		uint64_t cur = 0;

		if (atomic_compare_exchange_weak_explicit(word, &cur, mine, memory_order_acquire,
		                                          memory_order_relaxed))
			return 0;
		if (spin < 64) {
			sl_cpu_relax();
			continue;
		}
		if (holder_gone(cur, self)) {
			if (atomic_compare_exchange_strong_explicit(word, &cur, mine, memory_order_acquire,
			                                            memory_order_relaxed)) {
				atomic_fetch_add_explicit(A(&h->lock_recoveries), 1, memory_order_relaxed);
				errno = saved;
				return 1;
			}
			continue;
		}
		if (deadline == 0)
			deadline = sl_clock_mono_ns() + timeout_ns;
		else if (sl_clock_mono_ns() > deadline) {
			errno = saved;
			return -ETIMEDOUT;
		}
		if (cur == 0)
			continue;
		atomic_fetch_add_explicit(A(&h->lock_waiters), 1, memory_order_relaxed);
		futex_wait(lock_futex(h), (uint32_t)(cur & 0xffffffffu), 2 * SL_NS_PER_MS);
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

static int find_new(const struct sl_config *cfg, const char *name)
{
	for (unsigned j = 0; j < cfg->nsections; j++)
		if (strcmp(cfg->sections[j].spec.name, name) == 0)
			return (int)j;
	return -1;
}

int sl_shm_apply_config(struct sl_shm_header *h, const struct sl_config *cfg, int32_t self)
{
	return sl_shm_apply_config_at(h, cfg, self, sl_clock_mono_ns());
}

int sl_shm_apply_config_at(struct sl_shm_header *h, const struct sl_config *cfg, int32_t self,
                           int64_t now)
{
	int placed[SL_MAX_SECTIONS] = {0};
	uint32_t has_names = 0, meters = 0, slots_used = 0, seq;
	int rc = sl_shm_lock(h, self, SL_NS_PER_S);

	if (rc < 0)
		return rc;
	/* Odd: writing.  Set odd rather than incremented: a writer killed half way
	 * left it odd, and one more increment would make it even while we write. */
	seq = atomic_load_explicit(A(&h->spec_seq), memory_order_relaxed) | 1u;
	atomic_store_explicit(A(&h->spec_seq), seq, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);

	/* Pass 1: a section that stays (by name) keeps its slot, its serial - so waiters
	 * admitted under the old config are released by the new one's checks - and its
	 * state, converted to the new limit.  Only a new meter starts it afresh: its
	 * counts were of something else. */
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
		struct sl_section *sec = sl_shm_section(h, i);
		int j;

		if (!sec->in_use)
			continue;
		sec->spec.name[SL_SECTION_NAME_MAX - 1] = '\0';
		j = find_new(cfg, sec->spec.name);
		if (j < 0 || placed[j]) {
			sec->in_use = 0;
			sec->serial++;
			memset(&sec->state, 0, sizeof(sec->state));
			continue;
		}
		if (sec->spec.meter != cfg->sections[j].spec.meter ||
		    sec->spec.per != cfg->sections[j].spec.per ||
		    sec->spec.per_prefix4 != cfg->sections[j].spec.per_prefix4 ||
		    sec->spec.per_prefix6 != cfg->sections[j].spec.per_prefix6) {
			/* Counts of something else, or of other keys: start afresh (its
			 * keys' records become free with the serial). */
			sec->serial++;
			memset(&sec->state, 0, sizeof(sec->state));
		} else if (sec->spec.per != SL_PER_NONE) {
			uint64_t keys = sec->state.keys, evictions = sec->state.key_evictions,
			         full = sec->state.key_full;

			sl_keys_convert(h, i, &sec->spec, &cfg->sections[j].spec, now, h->wall_off_ns);
			sec->state.keys = keys;
			sec->state.key_evictions = evictions;
			sec->state.key_full = full;
		} else {
			sl_strategy_convert(&sec->spec, &cfg->sections[j].spec, &sec->state, now,
			                    h->wall_off_ns);
		}
		sec->spec = cfg->sections[j].spec;
		placed[j] = 1;
	}
	/* Pass 2: new sections take free slots with zeroed state. */
	for (unsigned j = 0; j < cfg->nsections; j++) {
		for (unsigned i = 0; !placed[j] && i < SL_MAX_SECTIONS; i++) {
			struct sl_section *sec = sl_shm_section(h, i);

			if (sec->in_use)
				continue;
			sec->serial++;
			memset(&sec->state, 0, sizeof(sec->state));
			sec->spec = cfg->sections[j].spec;
			sec->in_use = 1;
			placed[j] = 1;
		}
	}
	for (unsigned j = 0; j < cfg->nsections; j++)
		for (unsigned p = 0; p < cfg->sections[j].spec.npatterns; p++)
			if (cfg->sections[j].spec.patterns[p].kind == SL_PAT_NAME ||
			    cfg->sections[j].spec.patterns[p].kind == SL_PAT_SUFFIX)
				has_names = 1;
	/* Each summary field is worked out aside and stored once: shims read meters
	 * and has_names before, and outside, the spec seqlock, so a field zeroed
	 * while it was rebuilt read as "no section meters connections" - and every
	 * connect in that window, a daemon preempted or killed in it, went unshaped
	 * (make chaos at 2,000 processes: a SYN 9.3 ms early just after a restart). */
	for (unsigned j = 0; j < cfg->nsections; j++)
		meters |= 1u << (cfg->sections[j].spec.meter & 31);
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++)
		if (sl_shm_section(h, i)->in_use)
			slots_used = i + 1;
	/* Records of keys whose sections went or were reset are free again. */
	sl_keys_sweep(h);
	h->has_names = has_names;
	h->wall_off_ns = sl_clock_wall_offset_follow(h->wall_off_ns);
	h->meters = meters;
	h->slots_used = slots_used;
	h->fallback = (uint32_t)cfg->global.fallback;
	snprintf(h->config_path, sizeof(h->config_path), "%s", cfg->path);
	h->generation++;

	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(A(&h->spec_seq), seq + 1, memory_order_relaxed); /* even: done */
	sl_shm_unlock(h, self);
	return 0;
}
