/*
 * resolver.h - host names resolved off the daemon's loop (docs/design.md,
 * "Names of Redis").  getaddrinfo() blocks for as long as the name servers take
 * - seconds each try when one does not answer - and the loop that would wait on
 * it also reaps dead lock holders, answers the control socket and renews every
 * lease.  So the daemon never calls it: a thread of this module resolves each
 * name it is asked for and keeps the answer, and a connection is made to the
 * address last known.  Names are resolved again every SL_RESOLVE_REFRESH_NS while
 * in use, and at once after a connection to one failed.  Address literals need
 * no thread and are answered as they are.
 */
#ifndef SLUICE_DAEMON_RESOLVER_H
#define SLUICE_DAEMON_RESOLVER_H

#include <stddef.h>
#include <stdint.h>

#define SL_RESOLVE_REFRESH_NS (10 * 1000000000LL)
#define SL_RESOLVE_NAMES 64 /* names kept at once; the one asked for longest ago
                             * makes room for another */

struct sl_resolver;

/* A resolver with its thread (NULL and errno set when none can be had). */
struct sl_resolver *sl_resolver_new(void);

/* The address to connect to for `host`, as text, into addr (at least 64
 * bytes): 1 when known (an address literal is its own), 0 while the name is
 * being resolved (the thread was asked to), -1 when its last resolution
 * failed (why says how).  Never blocks but on the resolver's own mutex. */
int sl_resolver_get(struct sl_resolver *r, const char *host, char *addr, size_t len, char *why, size_t whylen);

/* A connection to host's address failed: resolve it again now. */
void sl_resolver_stale(struct sl_resolver *r, const char *host);

/* Stop and forget (a lookup under way ends on its own, then its thread frees
 * what is left: never waited for). */
void sl_resolver_free(struct sl_resolver *r);

#endif
