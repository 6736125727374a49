/* The System V segments on this machine as an operator sees them (README
 * "Segments"): what `sluice segments` lists, and what every segment error and
 * `sluice stat` name - the key, shmid, owner and mode - so a segment left by an
 * earlier run is found without reading the source for the key's hash. */
#ifndef SLUICE_SEGMENTS_H
#define SLUICE_SEGMENTS_H

#include "sluice/common.h"
#include "sluice/shm-t.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum sl_segment_kind {
	SL_SEGMENT_OURS = 0,   /* carries sluice's magic */
	SL_SEGMENT_UNREADABLE, /* this user may not attach it: sluice's or not is unknown */
	SL_SEGMENT_OTHER,      /* another program's */
};

struct sl_segment {
	key_t key;
	int shmid;
	unsigned mode;       /* permission bits */
	uid_t uid;           /* owner */
	gid_t gid;
	uint64_t size;       /* bytes */
	unsigned attached;   /* processes attached (nattch) */
	pid_t creator;       /* the process that made it */
	int64_t changed_s;   /* wall-clock seconds of its last change (ctime) */
	enum sl_segment_kind kind;
	/* Read from the header when kind is SL_SEGMENT_OURS: */
	char name[40];       /* the shm_name it was made under ("" before minor 1) */
	char config[SL_PATH_MAX]; /* the config its daemon loaded */
	int32_t daemon_pid;
	int moved;           /* a newer segment took over its name */
};

/* Every System V segment, read from /proc/sysvipc/shm (which anyone may read,
 * whatever the segments' modes) and each attached read-only to tell sluice's
 * from others'.  fn returns non-zero to stop.  Returns 0, or -errno when the
 * list cannot be read. */
int sl_segments_each(int (*fn)(const struct sl_segment *, void *), void *arg);

/* The segment that shm_name `name` keys to: 0, or -ENOENT when there is none. */
int sl_segment_find(const char *name, struct sl_segment *out);

/* "user:group" of s (numbers where the names are unknown). */
void sl_segment_owner(const struct sl_segment *s, char *buf, size_t len);

/* "segment /sluice (System V key 0x51ce2a0b, shmid 42, owner root:sluice, mode
 * 0660, 3 attached)", or "... (System V key 0x51ce2a0b: none exists)". */
void sl_segment_about(const char *name, char *buf, size_t len);

/* What an operator does about `err` (a negative errno from making or attaching
 * segment `name`): one line, or "" when there is nothing to say. */
void sl_segment_fix(const char *name, int err, char *buf, size_t len);

/* Whether `--remove-unused` may remove s: sluice's, nobody attached, not changed
 * in the last SL_SEGMENT_SETTLE_S seconds (one being made is not attached yet). */
#define SL_SEGMENT_SETTLE_S 10
int sl_segment_unused(const struct sl_segment *s, int64_t now_s);

#endif
