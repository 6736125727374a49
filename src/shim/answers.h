/*
 * answers.h - the destination's answers read and requests followed (answers.c).
 */
#ifndef SLUICE_SHIM_ANSWERS_H
#define SLUICE_SHIM_ANSWERS_H

#include "record.h"

#include <sys/uio.h>

/* A connection to d whose sections in m may read its answers (signals, refund):
 * kept in a record for its life when some of them do (answers.c), its release at
 * conn_released (0: not yet) kept for a refund.  0, or -ENOSPC. */
int sl_held_follow(int fd, const struct sl_dest *d, const struct sl_match *m, int64_t conn_released);

/* refund = ... (refund.h), under rec->lock: a release of rec's connection (`conn`)
 * or of a request on it at `at`, to give back if its answer says so. */
void sl_refund_released(struct sl_record *rec, int64_t at, int conn);

/* fd's connection failed with err (refused, reset, timed out): its connection, if
 * no answer came, and its requests without one are given back where the refund
 * list says `failed`.  Takes the record's lock. */
void sl_refund_failed(int fd, int err);

/* answers.c, under rec->lock: what was written (requests followed) and read. */
void sl_signals_wrote(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);

/* Whether rec's writes are still of use to its answers' reader: when not, the
 * send path need not report them (no lock taken after the write). */
int sl_signals_follows_writes(const struct sl_record *rec);

void sl_signals_read(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);

/* Before a held write of rec's on fd is stepped: the answers waiting unread on an
 * HTTP/2 connection in plaintext, followed ahead of the program (h2.h). */
void sl_signals_peek(struct sl_record *rec, int fd);

/* Whether rec's answers are read to their ends (in plaintext, the parser not lost):
 * else a request in flight ends with a read that returns data (inflight.h). */
int sl_signals_follow_ends(const struct sl_record *rec);

/* The plaintext of a TLS connection on fd, read (`reading`) or written through
 * libssl (tls.c); takes the record's lock. */
void sl_signals_plain(int fd, const void *buf, size_t n, int reading);

#endif
