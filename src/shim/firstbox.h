#ifndef SLUICE_SHIM_FIRSTBOX_H
#define SLUICE_SHIM_FIRSTBOX_H
/*
 * The first write of a deferred connect, kept while it waits for its slot on the
 * first writes' line (docs/design.md, "First writes on time").  An event loop
 * that stalls writes the connections made meanwhile all at once; told EAGAIN
 * until each slot, it would come back a turn of its loop late for every one, and
 * the line would cost it a fifth of its rate at 500/s.  So a non-blocking
 * writer's first write is taken whole into the record's waiting part and said
 * written, and the kicker sends it at its slot - as it makes the deferred
 * connect at its own.  Writes after it go behind it (taken too while it waits,
 * if they fit).  Every function runs under the record's lock.
 */
#include "record.h"

#include <sys/uio.h>

#define SL_FIRSTBOX_MAX 8192u /* bytes kept; a larger first write waits as any */
#define SL_FIRSTBOX_RETRY_NS (1000 * 1000LL) /* a box the socket did not take, again */

/* Whether rec keeps bytes not yet sent. */
int sl_firstbox_holds(const struct sl_record *rec);

/* Take the whole write into rec's box: its length, or 0 when it does not fit (or
 * no memory) and nothing was taken. */
size_t sl_firstbox_take(struct sl_record *rec, const struct iovec *iov, int iovcnt);

/* Send what the box keeps on fd, followed as written: 0 when it is empty after,
 * -EAGAIN when some is left (the socket's buffer full), another -errno when the
 * send failed (what it kept is dropped: the program meets the error on its next
 * call). */
int sl_firstbox_flush(struct sl_record *rec, int fd);

/* Its memory back (with the waiting part). */
void sl_firstbox_free(struct sl_rec_wait *w);

#endif
