/* The daemon's control socket (control.c); called by daemon.c only. */
#ifndef SLUICE_DAEMON_CONTROL_H
#define SLUICE_DAEMON_CONTROL_H

#include "sluice/daemon.h"

/* Bind and listen on the config's control_socket; -EADDRINUSE when another daemon
 * answers there.  A "reload" asked there runs `reload` (sl_daemon_reload). */
int sl_control_open(struct sl_daemon *d, int (*reload)(struct sl_daemon *d, FILE *errors));
void sl_control_close(struct sl_daemon *d);

#endif
