/*
 * segserve.h - the server side of a segment's socket (protocol in sluice/segsock.h;
 * docs/design.md, "The segment" and "Who holds what").
 *
 * A server keeps one segment - its memfd, mapped - and hands it to the processes
 * that ask on its socket: each is checked against the segment's owner, group and
 * mode by its kernel credentials, entered in the roster, and watched through a
 * pidfd, so its entry ends when it exits whatever pid namespace it lives in.  It
 * runs on a libev loop: in the keeper, a process of its own that outlives the
 * daemon as a System V segment did (keeper.c), and inside `sluice run`, for its
 * private segment.
 */
#ifndef SLUICE_DAEMON_SEGSERVE_H
#define SLUICE_DAEMON_SEGSERVE_H

#include "sluice/shm.h"

#include <ev.h>
#include <sys/types.h>

struct sl_segserve;

/* Who may attach: the owner is the server's own user; group and mode as the
 * config's shm_group and shm_mode. */
struct sl_segpolicy {
	unsigned mode; /* permission bits, as a file's */
	gid_t gid;
};

/* Serve the segment memfd `shm_fd` on the listening unix socket `listen_fd`
 * (both now the server's: closed at sl_segserve_stop).  on_quit(arg) is called
 * when a privileged client asks the server to stop (NULL: quit is refused).  NULL
 * and errno set when the memfd is no segment (sl_shm_map_fd). */
struct sl_segserve *sl_segserve_start(struct ev_loop *loop, int shm_fd, int listen_fd,
                                      const struct sl_segpolicy *policy, void (*on_quit)(void *), void *arg);

/* Who may attach from now on. */
void sl_segserve_policy(struct sl_segserve *s, const struct sl_segpolicy *policy);

/* Serve the segment memfd `shm_fd` from now on (a move): its roster carries every
 * token, so the processes watched stay watched.  0 or -errno (the old one kept). */
int sl_segserve_replace(struct sl_segserve *s, int shm_fd);

/* Watch every live registration of the segment that this server has no pidfd for
 * (entered by a predecessor, or by a process that entered itself): one whose
 * registrar's view (kpid, kstamp) names a process that is gone is ended now.
 * Returns how many could not be watched (not visible from here). */
unsigned sl_segserve_adopt(struct sl_segserve *s);

/* Stop serving: watchers stopped, the socket closed (not unlinked: a stale socket
 * file tells the next daemon a segment was lost), the mapping and memfd let go. */
void sl_segserve_stop(struct sl_segserve *s);

/* Bind a listening segment socket at `path`, owned as the policy says (mode and
 * group of the file; connecting needs write permission on it).  A socket file
 * there that nobody answers is replaced.  The fd, or -errno (-EADDRINUSE: a
 * server answers there). */
int sl_segserve_listen(const char *path, const struct sl_segpolicy *policy);

#endif
