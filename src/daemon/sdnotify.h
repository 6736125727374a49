/*
 * sdnotify.h - systemd's service protocols, without libsystemd: readiness
 * (NOTIFY_SOCKET), and the file descriptor store that keeps the segment's memfd
 * across a restart of the service, when the unit allows one
 * (FileDescriptorStoreMax=; docs/design.md, "The segment").  Outside systemd
 * every call does nothing.
 */
#ifndef SLUICE_DAEMON_SDNOTIFY_H
#define SLUICE_DAEMON_SDNOTIFY_H

/* One datagram `state` ("READY=1", "STOPPING=1") to $NOTIFY_SOCKET. */
void sl_sd_notify(const char *state);

/* Store fd under `name` in the service manager's store (replacing one of that
 * name).  0, -ENOENT with no NOTIFY_SOCKET, or -errno. */
int sl_sd_store_fd(const char *name, int fd);

/* The descriptor the service manager handed back under `name` at this start
 * (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES), now the caller's; -1 when none.
 * The others it handed back are closed, and the variables unset, so no child
 * takes them for its own. */
int sl_sd_take_fd(const char *name);

#endif
