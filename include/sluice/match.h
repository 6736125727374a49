/*
 * match.h - destinations and the patterns that select them (docs/config.md).
 *
 * A destination is an address, a port and, when the process learned one, a host
 * name.  Patterns are compiled into struct sl_pattern (shm-t.h) so the shim can match
 * straight from the shared segment.  IPv4-mapped IPv6 addresses are normalised to
 * IPv4 before matching, so "203.0.113.7" also matches "::ffff:203.0.113.7".
 */
#ifndef SLUICE_MATCH_H
#define SLUICE_MATCH_H

#include "sluice/name.h"
#include "sluice/shm-t.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct sl_dest {
	int family;       /* AF_INET or AF_INET6 (after normalising mapped addresses) */
	uint16_t port;    /* host order */
	uint8_t addr[16]; /* network order; IPv4 uses the first 4 bytes */
	const char *name; /* lower-case host name or NULL; not owned */
	size_t name_len;
	uint32_t meter;   /* what is asked for: enum sl_meter (0 = a connection); only
	                   * sections metering that match */
};

/* Fill `d` from a sockaddr of `len` bytes.  Returns 0, or -EAFNOSUPPORT for a family
 * other than AF_INET/AF_INET6, or -EINVAL for a short or NULL address.  Never reads
 * past `len`. */
int sl_dest_from_sockaddr(struct sl_dest *d, const struct sockaddr *sa, socklen_t len);

/* Parse one pattern ("example.com:443", "[2001:db8::/32]:8000-8999", "*", ...).
 * Returns 0, or -EINVAL with a reason in `err`. */
int sl_pattern_parse(struct sl_pattern *p, const char *text, char *err, size_t errlen);

/* Write the pattern back in config syntax.  Returns the length snprintf would. */
int sl_pattern_format(const struct sl_pattern *p, char *buf, size_t size);

/* Whether pattern `p` selects destination `d`.  Treats `p` as untrusted. */
bool sl_pattern_match(const struct sl_pattern *p, const struct sl_dest *d);

/* Whether `text` is a numeric IPv4 or IPv6 address (so not a name to remember). */
bool sl_is_numeric_host(const char *text);

#endif
