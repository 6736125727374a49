/*
 * fdtab.h - the fd table (an fd to its record) and the pool of records
 * (fdtab.c): lock-free lookups, records mmap'd in chunks and never moved.
 */
#ifndef SLUICE_SHIM_FDTAB_H
#define SLUICE_SHIM_FDTAB_H

#include "record.h"

#define SL_RECORDS (1024 * 1024) /* sockets with a hold record at once, at most */

/* An fd-table entry that is no record: a TCP connection no section matched by
 * address, whose first write is read for a name (SNI, Host, CONNECT) before it goes.
 * Set only when some section matches by name; cleared by that write or by close. */
#define SL_FD_SNIFF 0xffffffffu

extern _Atomic unsigned sl_records_high; /* records ever made: 1..high, for scans */

extern _Atomic int sl_records_active;

extern _Atomic int sl_fd_max;

extern _Atomic int sl_sniff_marks; /* fds marked SL_FD_SNIFF */

/* The record index+1 for fd, 0 when it holds nothing.  One or two loads. */
unsigned sl_fdtab_get(int fd);

struct sl_record *sl_record_new(int fd);   /* NULL when the pool or table is full */

struct sl_record *sl_record_of(int fd);

struct sl_record *sl_record_at(unsigned index); /* the record of an index+1, or NULL */

int sl_record_share(int oldfd, int newfd); /* dup: newfd shares oldfd's record */

struct sl_record *sl_record_unlink(int fd);  /* non-NULL: fd held its last reference */

void sl_record_free(struct sl_record *rec);

/* SL_FD_SNIFF marks (see above).  claim: 1 when this caller took fd's mark away
 * (so it alone reads the first write), 0 when there was none. */
void sl_fdtab_mark_sniff(int fd);

int sl_fdtab_claim_sniff(int fd);

struct sl_epregs *sl_epregs(int fd, int create);

void sl_fdtab_after_fork(void);

#endif
