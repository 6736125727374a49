/*
 * epoll.h - epoll registrations of held sockets (epoll.c): masked while a write is
 * held, kept out of the kernel while a connect is deferred.
 */
#ifndef SLUICE_SHIM_EPOLL_H
#define SLUICE_SHIM_EPOLL_H

#include "record.h"

/* epoll_ctl on a deferred fd: kept here, not given to the kernel yet.  1 if handled. */
int sl_epoll_virtual_ctl(int epfd, int op, int fd, const struct epoll_event *ev);

/* epoll.c: the earliest release among fd's held in epfd (0: none), putting back
 * the registrations of those due; deferred connects that are due are made. */
int64_t sl_epoll_due(int epfd, int64_t now);

/* epoll.c, under rec->lock: take EPOLLOUT out of rec's registrations while its
 * write is held (the program's loop then waits for it as for a full buffer), put
 * them back (those in `which`, or all), and keep a deferred connect's
 * registrations out of the kernel until it is made, then restore them. */
void sl_epoll_mask(struct sl_record *rec);

void sl_epoll_unmask_some(struct sl_record *rec, unsigned which);

void sl_epoll_unmask(struct sl_record *rec);

void sl_epoll_withhold(struct sl_record *rec);

void sl_epoll_restore(struct sl_record *rec);

#endif
