/*
 * connect.h - a new TCP connection admitted (connect.c), its connect made inside its
 * release.
 */
#ifndef SLUICE_SHIM_CONNECT_H
#define SLUICE_SHIM_CONNECT_H

#include "record.h"

/* A connect made inside its release (sl_wait_release_act): so no other release can
 * come between the check and the SYN, and the next one is counted from after it.
 * sl_connect_act makes it non-blocking whatever the socket is (nothing may wait
 * under the segment lock) and records the outcome; `blocking` says the caller
 * still has to wait for the connection as a blocking connect would. */
struct sl_made_connect {
	int fd;
	const struct sockaddr *addr;
	socklen_t alen;
	int done;     /* the connect was made */
	int rc, err;  /* its result and errno */
	int blocking; /* the socket is blocking */
	int64_t released_ns; /* when its admission released it (0: not released) */
};

int sl_connect_act(void *arg);

/* connect.c: a new TCP connection to sections m, by connect() or
 * sendto(MSG_FASTOPEN) to addr (dontwait: MSG_DONTWAIT, as a non-blocking socket):
 * 0 to go, or -errno (-EINPROGRESS: deferred, the connect is not to be made now).
 * With `made` (connect() only), the connect may have been made inside its release:
 * made->done then says so, and the caller returns its outcome. */

int sl_connect_admit(int fd, const struct sl_dest *d, struct sl_match *m, const char *what,
                       const struct sockaddr *addr, socklen_t alen, int dontwait,
                       struct sl_made_connect *made);

int sl_is_fresh_tcp(int fd);

#endif
