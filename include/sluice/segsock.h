/*
 * segsock.h - how a segment goes from the process that keeps it to the processes
 * that use it (docs/design.md, "The segment"): a unix socket beside the daemon's
 * control socket, DIR/NAME.segment, reachable from every namespace that mounts the
 * directory (a container given `-v /run/sluice:/run/sluice`), where a System V
 * key reaches one IPC namespace only.
 *
 * One request line, one reply line; the reply to attach and get carries the
 * segment's memfd (SCM_RIGHTS).  Requests:
 *   attach rw|ro PID STAMP PIDNS   the segment, and (rw) a roster token: PID, STAMP
 *                                  and PIDNS are how the asker sees itself
 *                                  (roster.h); the server checks its credentials
 *                                  (SO_PEERCRED, SO_PEERGROUPS) against the
 *                                  segment's owner, group and mode
 *   info                           what the server keeps: pid=, id=, name=, ...
 *   get                            the memfd alone (root or the server's user: a
 *                                  daemon taking its segment back)
 *   adopt                          watch every live registration not watched yet
 *                                  (one the daemon made itself), same users
 *   replace                        a new memfd in place of the old (a move; the
 *                                  request carries it), same users
 *   policy MODE GID                who may attach from now on, same users
 *   quit                           the server stops, same users
 * Replies: "ok KEY=VALUE ...\n" or "error: MESSAGE\n".
 *
 * The client side is here, in raw system calls (sys.h): the shim uses it from
 * inside its hooks, where connect, sendmsg and close are its own.  It keeps no
 * descriptor: a socket made and closed within the call, the memfd closed once
 * mapped.
 */
#ifndef SLUICE_SEGSOCK_H
#define SLUICE_SEGSOCK_H

#include "sluice/config.h"
#include "sluice/shm.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SL_SEGSOCK_LINE 512
/* How long a client waits for a server that accepted (a server that is not there
 * answers at once): long enough for a loaded machine, short enough that a hung
 * server costs an attaching call this much, once per try. */
#define SL_SEGSOCK_TIMEOUT_NS (500 * 1000000LL)

/* The segment socket of a config: the directory of control_socket, and shm_name's
 * last part with ".segment" ("/run/sluice/sluice.sock" and "/sluice" give
 * "/run/sluice/sluice.segment").  0, -ENOENT for control_socket = none (no daemon
 * by design), or -ENAMETOOLONG. */
int sl_segsock_path(const struct sl_global *g, char *out, size_t len);

struct sl_segsock_reply {
	char line[SL_SEGSOCK_LINE]; /* the reply, without its newline */
	int fd;                     /* what came with it, or -1 (the caller closes it) */
	uint32_t server_uid;        /* who answered (SO_PEERCRED, as this process sees
	                             * it; (uint32_t)-1: unknown) */
};

/* Ask the server at `path`: `request` (a line, with its newline), sending
 * `send_fd` with it when >= 0.  0 with r filled, or -errno: -ENOENT (no such
 * socket), -ECONNREFUSED (nobody listens: a server that died), -EACCES (this
 * process may not connect), -ETIMEDOUT, -EPROTO (no reply line). */
int sl_segsock_ask(const char *path, const char *request, int send_fd, int64_t timeout_ns,
                   struct sl_segsock_reply *r);

/* mh made to pass fd (SCM_RIGHTS), its control data in cbuf (len bytes, at least
 * CMSG_SPACE(sizeof(int))). */
void sl_segsock_put_fd(struct msghdr *mh, void *cbuf, size_t len, int fd);

/* The value of KEY in a reply "ok k=v k=v ...", into out; 0 or -ENOENT. */
int sl_segsock_value(const char *line, const char *key, char *out, size_t len);

/* Whether the segment served at `path` by uid `server_uid` (SO_PEERCRED) may be
 * used: served by root, by this process's user, or by the owner of the socket's
 * directory when nobody else may write there - where another user could have put
 * a socket of their own, with limits of their own, it is refused (why says so).
 * The daemon's own take-over (sl_keeper_fetch) asks more: root or itself. */
int sl_segsock_trusted(const char *path, uint32_t server_uid, char *why, size_t whylen);

/* Attach the segment served at `path`: mapped (rw when `writable` and granted),
 * its memfd closed, shm->self the token the server entered this process under.
 * 0; -EACCES with the server's words in why (this user may not, or only read
 * what it asked to write), or with why it is not to be trusted
 * (sl_segsock_trusted); -EPROTO for a reply of no kind, or with no segment;
 * the errors of sl_segsock_ask and sl_shm_map_fd. */
int sl_segsock_attach(const char *path, int writable, int64_t timeout_ns, struct sl_shm *shm, char *why,
                      size_t whylen);

#endif
