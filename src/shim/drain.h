/*
 * drain.h - meter = bytes kept at the destination (docs/design.md, "Bytes at the
 * destination").
 *
 * A piece released into a kernel send buffer that cannot empty (the receiver
 * stopped reading, its window closed) leaves when the window opens - and every
 * piece released meanwhile would leave with it, in one burst.  So a bytes stream's
 * next piece is not asked for while the kernel still holds unsent bytes of the
 * last ones, and once they leave, the next waits as long as those bytes take at
 * the rate: what the destination sees keeps the schedule's spacing.  Bytes are
 * seen waiting when the kernel refuses a write of released bytes, when a
 * blocking write of them takes longer than their time at the rate, and when
 * the next piece is due.  The socket's
 * TCP_NOTSENT_LOWAT is 1, so the kernel itself reports it writable only once all
 * of it has been sent - which a non-blocking program's own poll then waits for.
 */
#ifndef SLUICE_SHIM_DRAIN_H
#define SLUICE_SHIM_DRAIN_H

#include "record.h"

#include <stdint.h>

/* How often a blocking writer looks again while its bytes wait to leave: after
 * the time they take at the rate, within these bounds. */
#define SL_DRAIN_RECHECK_MIN_NS (20 * SL_NS_PER_US)
#define SL_DRAIN_RECHECK_MAX_NS (1 * SL_NS_PER_MS)

/* Sets the socket's TCP_NOTSENT_LOWAT; 1 when the kernel took it (a TCP socket),
 * 0 otherwise - the stream then goes without the drain check. */
int sl_drain_arm(int fd);

/* The bytes the kernel holds unsent for fd (0: none, or gone by the time the
 * kernel was asked whether it is writable).  When some are, the socket's
 * TCP_NOTSENT_LOWAT is made 1 again and the kernel's wake-up for their leaving
 * armed. */
uint32_t sl_drain_unsent(int fd);

/* The bytes the kernel holds unsent for fd (SIOCOUTQNSD), nothing else asked. */
uint32_t sl_drain_queued(int fd);

/* Under rec->lock: how long `bytes` take at the slowest of the record's bytes
 * sections. */
int64_t sl_drain_time_ns(const struct sl_record *rec, uint64_t bytes);

#endif
