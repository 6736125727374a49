/*
 * keeper.h - the process that keeps the machine's segment (docs/design.md, "The
 * segment").
 *
 * A memfd lives as long as someone holds it.  The keeper is `sluiced --keep`, a
 * process of its own (its own session, no descriptor of the daemon's) that holds
 * the segment's memfd and serves it on the segment socket (segserve.h), so the
 * segment outlives the daemon as a System V segment did: processes started while
 * the daemon is down still attach and share the queues, and a daemon that starts
 * again takes the segment back from the keeper ("get") with its state.  It ends
 * when told to (`sluice segments --remove`, or quit) or killed; then the segment
 * lives on in the processes that have it mapped, and the next daemon makes a new
 * one.
 */
#ifndef SLUICE_DAEMON_KEEPER_H
#define SLUICE_DAEMON_KEEPER_H

#include "segserve.h"
#include "sluice/shm.h"

#include <sys/types.h>

/* The segment a keeper serves at `path`, mapped read-write with its memfd kept.
 * 0; -ENOENT (no socket: none was kept), -ECONNREFUSED (a socket nobody answers:
 * a keeper died, its segment lost), -EPERM with why (it is served by a user
 * neither root nor this process's: whoever made it could have set its limits, so
 * it is not taken over), -EACCES with why (the keeper refused), or another
 * -errno. */
int sl_keeper_fetch(const char *path, struct sl_shm *shm, char *why, size_t len);

/* Start a keeper serving memfd shm_fd at `path` (bound here, so the path is taken
 * once this returns).  foreground: it logs to stderr, else to syslog.  Its pid,
 * or -errno. */
pid_t sl_keeper_spawn(const char *path, int shm_fd, const struct sl_segpolicy *policy, int foreground);

/* Ask the keeper at `path` to serve shm_fd in place of its segment (a move), to
 * use a new policy, or to stop.  0, or -errno (-EPROTO: it refused). */
int sl_keeper_replace(const char *path, int shm_fd);
int sl_keeper_policy(const char *path, const struct sl_segpolicy *policy);
int sl_keeper_quit(const char *path);

/* `sluiced --keep MODE GID PATH [-f]`, with the memfd as fd 3 and the listening
 * socket as fd 4: serve until told to quit.  Returns the exit status. */
int sl_keeper_main(int argc, char **argv);

#endif
