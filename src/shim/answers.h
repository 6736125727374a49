/*
 * answers.h - the destination's answers read and requests followed (answers.c).
 */
#ifndef SLUICE_SHIM_ANSWERS_H
#define SLUICE_SHIM_ANSWERS_H

#include "record.h"

#include <sys/uio.h>

/* A connection to d whose sections in m may read its answers: kept in a record
 * for its life when some of them do (answers.c).  0, or -ENOSPC. */
int sl_held_follow(int fd, const struct sl_dest *d, const struct sl_match *m);

/* answers.c, under rec->lock: what was written (requests followed) and read. */
void sl_signals_wrote(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);

/* Whether rec's writes are still of use to its answers' reader: when not, the
 * send path need not report them (no lock taken after the write). */
int sl_signals_follows_writes(const struct sl_record *rec);

void sl_signals_read(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);

/* The plaintext of a TLS connection on fd, read (`reading`) or written through
 * libssl (tls.c); takes the record's lock. */
void sl_signals_plain(int fd, const void *buf, size_t n, int reading);

#endif
