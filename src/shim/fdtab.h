/*
 * fdtab.h - held sockets: the fd table and the hold records (fdtab.c).
 *
 * A matched non-blocking connect() leaves its socket a record in state FIRST; the
 * first write reserves a place (WAITING) and is refused with EAGAIN until the place
 * is released; then the record goes and the socket is never looked at again.
 */
#ifndef SLUICE_SHIM_FDTAB_H
#define SLUICE_SHIM_FDTAB_H

#include "shim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/epoll.h>

#define SL_HOLDS 1024 /* connections waiting for their first write at once */

enum sl_hold_state {
	SL_HOLD_FIRST = 1,   /* connected without waiting; the first write takes a place */
	SL_HOLD_WAITING = 2, /* the place is reserved: writes wait for release_ns */
};

/* What an fd registered with epoll (the last registration seen). */
struct sl_epreg {
	int epfd; /* 0: none recorded */
	uint32_t events;
	epoll_data_t data;
};

struct sl_hold {
	pthread_mutex_t lock; /* guards everything below but refs */
	int refs;             /* fds sharing it (dup); guarded by fdtab's alloc lock */
	int state;            /* enum sl_hold_state */
	int fd;               /* the fd that connected, for epoll re-arming */
	int64_t release_ns;   /* WAITING: when the next release check may pass */
	int ep_masked;        /* EPOLLOUT taken out of the registration below */
	int inherited;        /* copied into a fork child: the parent owns the place, so
	                       * the child closing its fd must not give it back */
	struct sl_epreg ep;
	struct sl_dest dest;
	char name[SL_HOST_MAX];
	struct sl_match m;
	struct sl_ticket t;
};

extern struct sl_hold sl_holds[SL_HOLDS];
extern _Atomic int sl_holds_active;
extern _Atomic int sl_fd_max;

/* The record index+1 for fd, 0 when it holds nothing.  One or two loads. */
unsigned sl_fdtab_get(int fd);

struct sl_hold *sl_hold_new(int fd);   /* NULL when the pool or table is full */
struct sl_hold *sl_hold_of(int fd);
int sl_hold_share(int oldfd, int newfd); /* dup: newfd shares oldfd's record */
struct sl_hold *sl_hold_unlink(int fd);  /* non-NULL: fd held its last reference */
void sl_hold_free(struct sl_hold *rec);

struct sl_epreg *sl_epreg(int fd, int create);

void sl_fdtab_after_fork(void);

/* held.c: the decisions on held sockets. */
int sl_held_connect(int fd, const struct sl_dest *d, const struct sl_match *m);
int sl_held_write(int fd, int dontwait);
void sl_held_close(int fd);
int64_t sl_held_due(int fd);
int64_t sl_held_epoll_due(int epfd, int64_t now);
int sl_fd_nonblocking(int fd); /* O_NONBLOCK, asked through the real fcntl */

#endif
