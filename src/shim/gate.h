/*
 * gate.h - the write gate (gate.c): whether a write on a held or metered socket
 * may go now, and how much of it.
 */
#ifndef SLUICE_SHIM_GATE_H
#define SLUICE_SHIM_GATE_H

#include "record.h"

#include <sys/uio.h>

/* A write on fd (dontwait: MSG_DONTWAIT, as a non-blocking socket): 0 when it may
 * go now; -EAGAIN while its release is not due on a non-blocking socket (a
 * blocking one sleeps until it is, up to SO_SNDTIMEO); -EINTR; or the refusal's
 * -errno. */
int sl_held_write(int fd, int dontwait);

/* The same for a write of `iov` on a stream: *limit receives how many of its bytes
 * may go (SIZE_MAX: all), *track what follows the stream (SL_TRACK_*: nonzero,
 * sl_held_wrote must be told what went).  A caller that can take "written by the
 * shim" for an answer sets SL_TRACK_MAY_TAKE in *track first: then *track may come
 * back SL_TRACK_TAKEN alone, *limit the bytes the shim took (HTTP/2's box,
 * h2box.h) - the caller writes nothing and returns them as written. */
int sl_held_write_data(int fd, int dontwait, const struct iovec *iov, int iovcnt, size_t *limit,
                       int *track);

/* The same, for a caller that can also be told "sent": `flags` are its call's
 * send flags (-1 when its write is not a plain send of `iov`: an address, control
 * data, Fast Open).  A write released by this call may then be made inside its
 * release (docs/design.md, "Where the bound is kept"): *track comes back with
 * SL_TRACK_SENT, *limit the cut as ever and *sent the bytes of it the kernel
 * took; the caller sends the rest of the cut (a blocking socket) and tells the
 * stream what went. */
int sl_held_write_inside(int fd, int dontwait, int flags, const struct iovec *iov, int iovcnt, size_t *limit,
                         int *track, size_t *sent);

enum {
	SL_TRACK_STREAM = 1, /* meter = requests */
	SL_TRACK_BYTES = 2,  /* meter = bytes: a blocking write goes piece by piece, each
	                      * released in turn, inside the one call */
	SL_TRACK_SIGNALS = 8, /* its responses are read: the requests are followed */
	SL_TRACK_MOVE = 4,   /* the write was held and released just now: once made, its
	                      * release is moved on to that instant (sl_held_made) */
	SL_TRACK_MAY_TAKE = 16, /* in: the caller takes SL_TRACK_TAKEN */
	SL_TRACK_TAKEN = 32,    /* out: *limit bytes were taken by the shim */
	SL_TRACK_SENT = 64,     /* out: *sent bytes were sent inside the release */
};

/* Under rec->lock: the HTTP/2 box's admission stepped and what may go written
 * (the kicker, at the instant it was due). */
struct sl_record;
void sl_held_box_pump(struct sl_record *rec, int fd);

/* After the real write of a held write released just now (SL_TRACK_MOVE), made or
 * failed: its sections' enforcement is moved on to now, so that whatever the
 * write spent getting out (a preemption, a slow SYN) cannot bring the next release
 * closer to it than an interval. */
void sl_held_made(int fd);

#endif
