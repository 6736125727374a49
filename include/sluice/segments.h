/* The segments an operator can find (docs/commands.md "Segments"): what `sluice segments`
 * lists and what every attach error names - a segment's socket, who keeps it, who
 * may use it and how many are attached - so that a segment that cannot be reached
 * is explained without reading the source.
 *
 * A segment is found by its socket (segsock.h): NAME.segment in a directory -
 * the directory of a config's control socket, or a `sluice run`'s private one
 * (sl_run_dir). */
#ifndef SLUICE_SEGMENTS_H
#define SLUICE_SEGMENTS_H

#include "sluice/common.h"
#include "sluice/shm-t.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sl_segment {
	char path[108];      /* its socket */
	uid_t uid;           /* the socket file's owner and group */
	gid_t gid;
	unsigned file_mode;  /* the socket file's permission bits */
	int64_t changed_s;   /* wall-clock seconds of the socket file's last change */
	int err;             /* 0: a server answered; else why not (-errno of segsock.h) */
	/* What the server said (err == 0): */
	pid_t pid;           /* the keeper's (or `sluice run`'s), in its pid namespace */
	int other_pidns;     /* ... which is not this process's: its pids mean other
	                      * processes here (a container looking at the host's) */
	uint64_t id;         /* segment_id */
	char name[40];       /* the shm_name it was made under */
	char config[SL_PATH_MAX]; /* the config its daemon loaded */
	unsigned attached;   /* processes in its roster */
	unsigned mode;       /* who may attach: shm_mode */
	gid_t policy_gid;    /* ... and shm_group */
	int32_t daemon_pid;  /* the daemon's, in its pid namespace (0: none) */
	int64_t heartbeat_ms; /* since the daemon's last beat (-1: never) */
	uint64_t generation;
	int moved;           /* a successor took over from it */
};

/* Every segment socket in dir: fn(s, arg) for each (which returns non-zero to
 * stop).  0, or -errno when dir cannot be read (-ENOENT: no such directory). */
int sl_segments_in(const char *dir, int (*fn)(const struct sl_segment *, void *), void *arg);

/* The segment whose socket is `path`: 0 with *out filled (out->err says whether a
 * server answered), or -ENOENT when there is no socket there. */
int sl_segment_find(const char *path, struct sl_segment *out);

/* "user:group" of s's socket (numbers where the names are unknown). */
void sl_segment_owner(const struct sl_segment *s, char *buf, size_t len);

/* "segment at /run/sluice/sluice.segment (kept by pid 812, owner sluice:sluice,
 * mode 0660, 3 attached)" ("kept by pid 812 of another pid namespace" so); "segment at PATH (owner O, mode M)" when no server
 * tells more (the caller says why); or "segment at PATH: no such socket". */
void sl_segment_about(const char *path, char *buf, size_t len);

/* What an operator does about `err` (a negative errno from attaching the segment
 * at `path`; `why` what its server said, or "", which the caller says first): one
 * line, or "" when there is nothing to say. */
void sl_segment_fix(const char *path, int err, const char *why, char *buf, size_t len);

/* How `user` comes to use what group `gid` may: "sudo usermod -aG G USER, then
 * log in again (or run under `newgrp G`)" - or, for group root, to name a group
 * for the purpose in the daemon's config (never "join group root"). */
void sl_segment_join(gid_t gid, const char *user, char *buf, size_t len);

/* The directory `sluice run`'s private segment sockets are made in for this
 * user: $XDG_RUNTIME_DIR/sluice when that is set, else /tmp/sluice-UID.  Made
 * 0700 when `make` is set; refused (-EPERM) when it exists but is another user's
 * or others may write it. */
int sl_run_dir(char *out, size_t len, int make);

#endif
