/*
 * naming.h - destinations named by a connection's first write (naming.c): SNI,
 * Host, CONNECT.
 */
#ifndef SLUICE_SHIM_NAMING_H
#define SLUICE_SHIM_NAMING_H

#include "record.h"

#include <sys/uio.h>

/* sniff.c: the first write of a marked connection (SL_FD_SNIFF), read for a name;
 * fd's mark is already claimed.  0 to go, or -errno; limit, track, flags and
 * sent as sl_held_write_inside's (gate.h) once it is held. */
int sl_sniff_first_write(int fd, const struct iovec *iov, int iovcnt, int dontwait, size_t *limit,
                         int *track, int flags, size_t *sent);

/* The destination a write names, with its matching sections in m: a count, 0 when
 * it names none or none matches.  peer: the connection's peer, or NULL to ask fd's. */
int sl_name_from_write(int fd, const struct sl_dest *peer, const struct iovec *iov, int iovcnt,
                       struct sl_dest *d, char *name, size_t namelen, struct sl_match *m);

#endif
