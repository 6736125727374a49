/*
 * shm.h - laying out, creating, attaching and validating the shared segment (docs/design.md,
 * "Invariants").
 *
 * The segment is untrusted input for everyone but its creator: after
 * sl_shm_validate() succeeds, readers index it only with the table sizes this
 * process validated when it attached (struct sl_shm_view), never with sizes read
 * from it later.
 *
 * The segment's lock word is lock.h's; this header includes it for the callers
 * that attach and then lock.
 */
#ifndef SLUICE_SHM_H
#define SLUICE_SHM_H

#include "sluice/config.h"
#include "sluice/lock.h"
#include "sluice/shm-t.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sl_shm {
	struct sl_shm_header *hdr; /* NULL when not attached */
	size_t size;
	int anonymous; /* a process-private segment (fallback = local, tests) */
	int fd;        /* its memfd, kept by the process that made it or keeps it
	                * (the daemon, `sluice run`); -1 in every other process:
	                * attached, the segment is its mapping alone */
	int32_t self;  /* this process's roster token in it (roster.h); 0: none */
	uint64_t ino;  /* its memfd's inode: the same segment handed over twice has
	                * the same (0: anonymous) */
};

/* Where each table of a segment of given dims lies (byte offsets from its start). */
struct sl_shm_layout {
	size_t sections, patterns, index, refs, holders, procs, tags, keys;
	size_t size; /* the whole segment */
};

/* A segment as this process validated it when it attached: its tables' sizes and
 * where they lie.  Every index into the segment is checked against these. */
struct sl_shm_view {
	struct sl_shm_dims dims;
	uint32_t index_slots;
	uint32_t private_; /* anonymous memory of this process alone (lock.h) */
	struct sl_shm_layout at;
};

/* Slots of the match index for `patterns` patterns: a power of two, at least
 * twice as many (the table stays at most half full) and at least 64.  The layout
 * decides every table's size; index.c builds into what it is given. */
uint32_t sl_shm_index_size(uint32_t patterns);

/* The layout of a segment with tables of sizes d.  0, or -EINVAL when a size is
 * beyond its maximum (SL_SECTIONS_MAX, ...) or holders is no power of two. */
int sl_shm_layout(const struct sl_shm_dims *d, struct sl_shm_layout *out);

/* The bytes of one key record in a segment of dims d. */
static inline size_t sl_shm_key_size(const struct sl_shm_dims *d)
{
	return d->key_more ? sizeof(struct sl_key_more) : sizeof(struct sl_key);
}

/* Whether `base` (of `size` mapped bytes) holds a segment this build understands.
 * Returns 0 or -EPROTO (wrong magic/version/layout) / -EINVAL (too small). */
int sl_shm_validate(const void *base, size_t size);

/* This process's view of h (NULL for a header it did not attach or make through
 * this module: nothing of it may then be indexed). */
const struct sl_shm_view *sl_shm_view(const struct sl_shm_header *h);

/* The dims of the segment h (its view), or zeros. */
struct sl_shm_dims sl_shm_dims_of(const struct sl_shm_header *h);

/* Whether a segment's first word says some sluice made it (any layout version,
 * published or not). */
int sl_shm_magic_is_ours(uint32_t magic);

/* Note in the header the name the segment is made under (cut to fit). */
void sl_shm_set_name(struct sl_shm_header *h, const char *name);

/* --- where a segment lives (docs/design.md, "The segment") ---
 *
 * A memfd sealed against shrinking and growing, so no one who was handed it can
 * make another's mapping fault (a truncated file raises SIGBUS at the next touch),
 * handed from process to process over a unix socket (segsock.h): the socket
 * reaches every namespace its directory is mounted into, where a System V key
 * reaches its IPC namespace only. */

/* Make a segment of tables `dims` named `name` (the memfd's name, for people):
 * zero, sealed, mapped read-write, its memfd kept in shm->fd, its header written
 * but not yet published - an attacher takes it for none until sl_shm_publish(),
 * which the maker calls once its config is in.  0 or -errno. */
int sl_shm_create(struct sl_shm *shm, const char *name, const struct sl_shm_dims *dims);

/* Map the segment memfd `fd` (handed over, or kept): read-write or read-only.  The
 * fd must be a memfd sealed against shrinking and growing, at least as large as
 * its header says; anything else is refused (-EBADF, -EPERM: not sealed, -EPROTO:
 * no segment of this layout).  keep_fd: shm->fd keeps fd (the caller's no longer);
 * else the caller still owns it and closes it.  0 or -errno. */
int sl_shm_map_fd(struct sl_shm *shm, int fd, int writable, int keep_fd);

/* Let attaching programs see the segment (its magic; already so when re-attached). */
void sl_shm_publish(struct sl_shm_header *h);

/* The daemon, at each heartbeat: a header whose layout fields (magic, version,
 * sizes) no longer validate - scribbled - written again from this process's own
 * view of the segment, so programs attaching from now on can read it.  1 when it
 * was. */
int sl_shm_repair_header(struct sl_shm_header *h, size_t size);

/* The dims a segment needs for `cfg`: its [sluice] sections, patterns, holders and
 * keys, or for sections and patterns left at 0, room for twice what it has (at
 * least 64 sections and 1024 patterns). */
void sl_config_dims(const struct sl_config *cfg, struct sl_shm_dims *out);

/* Whether cfg's sections and patterns fit the segment h (its view).  0, or
 * -ENOSPC with what is missing said in why. */
int sl_shm_fits(const struct sl_shm_header *h, const struct sl_config *cfg, char *why, size_t len);

/* A new segment of dims (each table at least what `old` carries) taking over from
 * `old`, which programs still use (a reload that needs more room).  Under old's
 * lock its state is carried over (sections, holders, keys, the roster: tokens
 * mean the same in both), `cfg` loaded, the new segment published, and old marked
 * moved: an admission that takes old's lock after that is refused it (-EXDEV) and
 * asks for the segment again (its front end's follow, segsock.h), so every
 * program shares the new segment's queues from its next admission, and no
 * release is made in both.  On success *shm is the new segment (its memfd in
 * shm->fd, to hand out in old's place); old stays attached (the caller detaches
 * it). */
int sl_shm_move(struct sl_shm *shm, struct sl_shm *old, const char *name, const struct sl_shm_dims *dims,
                const struct sl_config *cfg, int32_t self);

/* Whether h was moved (a successor took over: follow it). */
int sl_shm_moved(const struct sl_shm_header *h);

/* A fresh segment in private anonymous memory (not shared across fork's copy),
 * published at once, the caller entered in its roster (shm->self): with default
 * dims, or `dims`. */
int sl_shm_create_anonymous(struct sl_shm *shm);
int sl_shm_create_anonymous_dims(struct sl_shm *shm, const struct sl_shm_dims *dims);

void sl_shm_detach(struct sl_shm *shm);

/* Section `i`, or NULL when out of range. */
struct sl_section *sl_shm_section(struct sl_shm_header *h, unsigned i);

/* Section i's name for a message (print with "%.*s", SL_SECTION_NAME_MAX - 1: it is
 * read from the segment), or "?" when i names none. */
const char *sl_section_name(struct sl_shm_header *h, int i);

/* The errno section i refuses with (0: the call's default, also when i names none). */
int sl_section_refuse(struct sl_shm_header *h, int i);

/* Pattern i of the pattern table, or NULL when out of range. */
struct sl_pattern *sl_shm_pattern(struct sl_shm_header *h, uint32_t i);

/* The match index's slots (v->index_slots) and refs (v->dims.patterns) of h as
 * viewed by v = sl_shm_view(h). */
struct sl_index_slot *sl_shm_index_slots(struct sl_shm_header *h, const struct sl_shm_view *v);
uint32_t *sl_shm_refs(struct sl_shm_header *h, const struct sl_shm_view *v);

/* The holder table, and its length in entries (a power of two; 0 for no view). */
struct sl_holder *sl_shm_holders(struct sl_shm_header *h);
uint32_t sl_shm_nholders(const struct sl_shm_header *h);
/* How many key records this process may index in h: what its mapping held when it
 * attached (0 for a header it did not attach through this module). */
uint32_t sl_shm_nkeys(const struct sl_shm_header *h);
/* The key table's tags (sl_shm_nkeys entries), and record i or NULL. */
uint64_t *sl_shm_key_tags(struct sl_shm_header *h);
struct sl_key *sl_shm_key_at(struct sl_shm_header *h, uint32_t i);

/* Compile `cfg` into the segment (load and reload).  A section whose identity is
 * unchanged keeps its state; others start from zero (docs/config.md).  Takes the lock and
 * the spec seqlock.  Returns 0, -ENOSPC when cfg does not fit the segment's tables
 * (sl_shm_fits), -ENOMEM, or -ETIMEDOUT. */
int sl_shm_apply_config(struct sl_shm_header *h, const struct sl_config *cfg, int32_t self);
/* How long the last sl_shm_apply_config of this process held the segment lock (ns). */
int64_t sl_shm_apply_held_ns(void);

/* The same with the clock given (`now` converts the state of changed limits). */
int sl_shm_apply_config_at(struct sl_shm_header *h, const struct sl_config *cfg, int32_t self,
                           int64_t now);

#endif
