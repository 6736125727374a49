/*
 * held.h - the life of held sockets (held.c): made, stepped, deferred, closed.
 */
#ifndef SLUICE_SHIM_HELD_H
#define SLUICE_SHIM_HELD_H

#include "record.h"

#include <sys/uio.h>

/* held.c: the life of held sockets.  sl_held_connect gives fd a record of
 * `kind` for destination d and sections m (-ENOSPC when the pool is full). */
int sl_held_set_target(struct sl_record *rec, const struct sl_dest *d, const struct sl_match *m);

int sl_held_add_sects(struct sl_record *rec, const struct sl_dest *d, const struct sl_match *m,
                      unsigned use);

/* Under rec->lock, rec->wait set: one step of its admission, with m and d filled
 * with the sections and destination it is for (the caller's, which the admission
 * points at: valid while the caller looks at the answer). */
int sl_held_step(struct sl_record *rec, struct sl_match *m, struct sl_dest *d, int64_t now, sl_act_fn act,
                 void *arg);

/* Under rec->lock: its admission under way given up (slot and places back), and
 * the concurrency places its connection holds given back. */
void sl_held_cancel(struct sl_record *rec);

void sl_held_put_places(struct sl_record *rec);

/* A connect just admitted on fd: the places its first request took with it
 * (meter = requests, concurrency) are that request's, given back as its answer
 * ends (inflight.h). */
void sl_held_first_request_places(int fd);

/* Under no lock: the record fd points at, locked, or NULL. */
struct sl_record *sl_held_lock_record(int fd);

int sl_held_connect(int fd, const struct sl_dest *d, const struct sl_match *m, int kind);

/* One datagram to d (matched as m), held as a write is; *track gets SL_TRACK_MOVE
 * when the caller is to call sl_held_made once it is sent. */
int sl_held_datagram(int fd, const struct sl_dest *d, const struct sl_match *m, int dontwait, int *track);

/* A released connection that holds concurrency places (`conc`) until it closes.
 * -ENOSPC when the pool is full. */
int sl_held_open(int fd, const struct sl_dest *d, const struct sl_match *m, uint64_t conc);

/* A non-blocking connect deferred: its admission p (sl_pending_step answered
 * WAIT) goes on in a new record for fd, and the connect to `addr` is made when it
 * answers GO.  -ENOSPC when the pool is full (nothing is kept: the caller still
 * owns p). */
int sl_held_defer(int fd, const struct sl_dest *d, const struct sl_match *m,
                  const struct sl_pending *p, const struct sockaddr *addr, socklen_t alen);

/* Calls that look at a socket's connect, on an fd with a table entry: connect()
 * again, getsockopt(SO_ERROR), shutdown().  Each returns 1 when it answered for a
 * deferred (or refused) connect, with *rc the call's result or -errno, and 0 when
 * the real call is to run. */
int sl_held_reconnect(int fd, int *rc);

int sl_held_so_error(int fd, int *err);

int sl_held_shutdown(int fd, int *rc);

/* A read on fd failed with ENOTCONN: whether fd is a deferred connect, which a
 * program must see as still connecting (EAGAIN). */
int sl_held_is_deferred(int fd);

void sl_held_drop_udp(int fd);

void sl_held_drop_failed(int fd);

/* After the real write: `n` bytes of iov went (iov NULL: n bytes from a file; 0:
 * the kernel refused it, EAGAIN).  With meter = bytes (drain.h), `took_ns` (-1:
 * not asked) is how long the call took in the kernel: released bytes it held back
 * - a blocking write waiting for room, or a refused one while bytes of it waited
 * unsent - reach the destination late and make the next piece wait their time.
 * One lock for both. */
void sl_held_wrote(int fd, const struct iovec *iov, int iovcnt, size_t n, int64_t took_ns);

/* A read on fd returned data (turns: the next write starts a request). */
/* A read on fd returned n > 0 bytes in iov (or the connection's end, n = 0). */
void sl_held_read(int fd, const struct iovec *iov, int iovcnt, size_t n);

/* Give a connection its requests sections (meter = requests) and bytes sections
 * (meter = bytes): its record stays for its whole life.  first_admitted: its first
 * request already has its place (taken with the connect).  -ENOSPC when none could
 * be had. */
int sl_held_stream(int fd, const struct sl_dest *d, const struct sl_match *rm,
                   const struct sl_match *bm, int first_admitted);

void sl_held_close(int fd);

/* close() in two steps: whether fd's record holds concurrency places (then the fd
 * is unlinked, really closed, and only then is its last record finished: places
 * and reservations given back, record freed). */
int sl_held_closing_keeps_place(int fd);

void sl_held_finish(struct sl_record *last);

/* When fd's held write (or deferred connect) is due, 0 when nothing waits.  With
 * `deferred`: a deferred connect that is due and finds a place is made first, and
 * *deferred says whether fd is still one (its socket then shows no events). */
int64_t sl_held_due(int fd, int *deferred);

/* held.c, under rec->lock: a deferred connect that is due takes what it waits for
 * and is made, or is refused; 1 when it stopped being deferred.  fd is the
 * descriptor the caller looks at (it shares rec). */
int sl_held_kick_locked(struct sl_record *rec, int fd, int64_t now);

int sl_fd_nonblocking(int fd); /* O_NONBLOCK, asked through the real fcntl */

int sl_socket_type(int fd);    /* SO_TYPE (SOCK_STREAM, SOCK_DGRAM), -1 if no socket */

#endif
