/*
 * quota.h - quotas that outlive the segment (docs/shaping.md, "Quotas"; docs/design.md,
 * "Quotas").
 *
 * A section whose window is an hour or longer (sl_quota_kept) is durable when the
 * daemon keeps a state directory: its state, and every key's, is saved in a file
 * there and restored when the daemon makes a new segment (after a reboot, or the
 * segment removed while it was down).  The count restored must never be lower
 * than what went, whatever stopped the machine, so the file is written ahead of
 * use: each durable state holds quota_left, what releases may still spend, and
 * the daemon grants more only after a file that counts the grant as spent is on
 * disk (write, fsync, rename).  A restore charges each state what it was granted
 * and had not spent at the save ("ahead"), at the instant of the restore - in the
 * window then in force, which is never earlier than any release it stands for.
 * A crash so wastes at most what was granted and unspent: a chunk
 * (sl_quota_chunk), about 1% of AMOUNT.  A clean stop takes every grant back
 * first and saves the exact count.
 *
 * The shims' half (under the segment lock, in the admission's release check)
 * only spends and asks; the daemon's half (src/daemon/quotas.c) saves, grants
 * and restores with the record and file functions below, which are pure.
 */
#ifndef SLUICE_QUOTA_H
#define SLUICE_QUOTA_H

#include "sluice/shm-t.h"

#include <stddef.h>
#include <stdint.h>

/* The shortest window kept on disk: shorter ones refill before a restart matters. */
#define SL_QUOTA_MIN_WINDOW_NS (3600LL * 1000000000LL)
/* A release held for want of quota_left looks again this often (the daemon's
 * grant pass runs every SL_QUOTA_PASS_NS). */
#define SL_QUOTA_RETRY_NS (20 * 1000000LL)
#define SL_QUOTA_PASS_NS (10 * 1000000LL)
/* A release the limit lets go waits for a grant this long past its max_wait (a
 * save takes milliseconds; this long, the daemon is not saving): admit.c. */
#define SL_QUOTA_SAVE_GRACE_NS (2 * 1000000000LL)
/* The longest a pass (snapshot, grant, restore) waits for the segment's lock
 * before it tries again at the next one. */
#define SL_QUOTA_LOCK_WAIT_NS (2 * 1000000000LL)

/* Whether s is a quota a state directory would keep: a machine's own rate (a
 * fleet's count is Redis's) whose window is an hour or longer. */
static inline int sl_quota_kept(const struct sl_spec *s)
{
	return s->amount && s->window_ns >= SL_QUOTA_MIN_WINDOW_NS && s->scope != SL_SCOPE_FLEET;
}

/* What one grant gives a state: 1% of AMOUNT, at least 1 (meter = bytes: at least a
 * piece of bytes, what one release may cost), at most 1 GiB. */
uint32_t sl_quota_chunk(const struct sl_spec *s);

/* The shims' half, under the segment lock.  When a release of `cost` may go as
 * far as the quota says: now, or - quota_left short of it, the daemon asked -
 * a look again SL_QUOTA_RETRY_NS on.  Not durable: now. */
int64_t sl_quota_release_at(struct sl_shm_header *h, const struct sl_spec *s, const struct sl_state *st,
                            int64_t now, uint64_t cost);
/* A release of `cost` went: spent from quota_left, and the daemon asked for more
 * once less than half a chunk is left (so a busy state rarely waits for it). */
void sl_quota_released(struct sl_shm_header *h, const struct sl_spec *s, struct sl_state *st, uint64_t cost);

/* --- the state file ---
 *
 * A header, then one record per durable state (a section's own, and each key's),
 * each followed by its two sliding-window rings when it has them.  Times are
 * CLOCK_MONOTONIC of the boot that saved them; the header's wall offset moves
 * them to the boot that reads them.  Native byte order: the file belongs to the
 * machine that wrote it.  A checksum covers the whole. */
#define SL_QUOTA_MAGIC "SLQUOTA1"
#define SL_QUOTA_VERSION 1u

struct sl_quota_rec {
	char section[SL_SECTION_NAME_MAX];
	struct sl_keyid key;   /* all zero: the section's own state */
	/* the limit the counts were kept under */
	uint32_t strategy, meter;
	uint64_t amount;
	int64_t window_ns;
	uint8_t calendar;
	uint8_t has_slide;     /* the two rings follow the record */
	uint8_t pad[6];
	uint64_t ahead;        /* granted and not spent at the save: charged at restore */
	int64_t blocked_until; /* the section's own record: no grant before this wall
	                        * time (ns since the epoch; 0 none) - its state file was
	                        * lost or bad, until `sluice quota reset` */
	/* the strategy's state (struct sl_state) */
	int64_t tat_ns, rel_tat_ns;
	int64_t win, rel_win;
	uint64_t win_used, rel_win_used;
	int64_t pause_until_ns;
	uint64_t admitted;
};
_Static_assert(sizeof(struct sl_quota_rec) == 216, "sl_quota_rec is the state file's record");

struct sl_quota_head {
	char magic[8];         /* SL_QUOTA_MAGIC */
	uint32_t version;      /* SL_QUOTA_VERSION */
	uint32_t records;
	uint64_t body_len;     /* bytes after the header */
	int64_t wall_off_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC when saved */
	int64_t saved_ns;      /* CLOCK_REALTIME when saved */
	uint64_t checksum;     /* of the header (this field 0) and the body */
};
_Static_assert(sizeof(struct sl_quota_head) == 48, "sl_quota_head is the state file's header");

/* A file being built in memory (malloc'd; free(b->p)). */
struct sl_quota_buf {
	char *p;
	size_t len, cap;
	uint32_t records;
	int failed; /* out of memory: the file is not to be written */
};

void sl_quota_buf_begin(struct sl_quota_buf *b);
/* st's record under spec s (the section `name`, the key `key` or NULL), with `ahead`
 * and `blocked_until` as the record says. */
void sl_quota_buf_add(struct sl_quota_buf *b, const char *name, const struct sl_keyid *key,
                      const struct sl_spec *s, const struct sl_state *st, uint64_t ahead, int64_t blocked_until);
/* Header and checksum: 0, or -ENOMEM when a record could not be added. */
int sl_quota_buf_end(struct sl_quota_buf *b, int64_t wall_off, int64_t wall_now);

/* Whether p[0..len) is a whole state file this build wrote: 0, or -1 with why. */
int sl_quota_check(const void *p, size_t len, struct sl_quota_head *head, char *why, size_t whysize);
/* The record at *off (start at sizeof(struct sl_quota_head)) of a checked file,
 * and its rings when it has them (slides[2]); 1, or 0 at the end. */
int sl_quota_next(const void *p, size_t len, size_t *off, struct sl_quota_rec *r, struct sl_slide slides[2]);

/* A record put back into st (zeroed first but for its places and counters) under
 * spec s, read in a boot whose monotonic clock is `shift_ns` ahead of the saving
 * one's (saved wall offset - ours), then charged its `ahead` at `now`.  A record
 * kept under another limit is converted as a reload converts (strategy.h). */
void sl_quota_restore(const struct sl_spec *s, struct sl_state *st, const struct sl_quota_rec *r,
                      const struct sl_slide slides[2], int64_t shift_ns, int64_t now, int64_t wall_off);

/* --- a pass over the segment: snapshot, save, grant (src/daemon/quota_save.c) --- */

/* The state file of a segment named shm_name in dir (DIR/NAME.quota) and the
 * names written beside it. */
struct sl_quota_files {
	char dir[SL_PATH_MAX];
	char path[SL_PATH_MAX + 64];
	char tmp[SL_PATH_MAX + 72];
};
void sl_quota_files(struct sl_quota_files *f, const char *dir, const char *shm_name);

/* The file written atomically: to f->tmp (made anew, never followed: whatever
 * is at that name is removed first), fsync, renamed over f->path, the directory
 * fsynced.  0, or -errno (the old file stays whole). */
int sl_quota_write(const struct sl_quota_files *f, const struct sl_quota_buf *b);

/* What a pass does to the states it saves. */
enum sl_quota_mode {
	SL_QUOTA_SAVE,  /* save what they hold */
	SL_QUOTA_GRANT, /* and grant up to a chunk to those with half a chunk or less */
	SL_QUOTA_STOP,  /* take every grant back first: the exact counts (a clean stop) */
};

/* A pass's grants, applied once its file is on disk (reused across passes). */
struct sl_quota_grants {
	struct sl_quota_grant {
		uint32_t where;  /* section index, or key slot | SL_HOLDER_KEY */
		uint32_t serial; /* its serial at the snapshot: another state is not granted */
		uint32_t section;
		uint32_t amount;
	} *g;
	size_t n, cap;
};

/* Snapshot every durable state of h (each with what it holds and its grant, under
 * the lock; keys a batch at a time), write the file, then grant.  `blocked` says
 * until when (wall ns) a section may be granted nothing (0: it may).  0, or
 * -errno: nothing granted. */
int sl_quota_pass(struct sl_shm_header *h, int32_t self, enum sl_quota_mode mode,
                  int64_t (*blocked)(const char *section, void *arg), void *arg,
                  const struct sl_quota_files *f, struct sl_quota_grants *g);

/* The strategy's part of st back to nothing (`sluice quota reset`): its places,
 * counters and quota_left stay. */
void sl_quota_reset_state(const struct sl_spec *s, struct sl_state *st);

#endif
