/*
 * units.h - the value syntaxes of the config: durations, rates, counts, errno names.
 * Parsers return 0 or -EINVAL and write a short reason into `err`.
 */
#ifndef SLUICE_UNITS_H
#define SLUICE_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "250ms", "30s", "10m", "1h", "2d", "1.5s", "0"; "forever" gives -1 when allowed. */
int sl_parse_duration(const char *s, int allow_forever, int64_t *ns, char *err, size_t errlen);

/* "10/s", "600/m", "3/5m", "1/250ms", "512K/s" (K, M, G are 1024-based and only
 * allowed when `allow_size` is set); "5000/mo", "100/w", "1M/y" are calendar
 * windows (*calendar an enum sl_calendar, *window_ns the unit's nominal length;
 * else *calendar is SL_CAL_NONE). */
int sl_parse_rate(const char *s, int allow_size, uint64_t *amount, int64_t *window_ns,
                  unsigned *calendar, char *err, size_t errlen);

/* A positive integer no larger than `max`. */
int sl_parse_count(const char *s, uint64_t max, uint64_t *out, char *err, size_t errlen);

/* A network endpoint: "HOST:PORT", "[IPV6]:PORT", or an absolute unix socket path.
 * sl_endpoint_parse splits it (*port 0 for a socket path, host then the path). */
int sl_endpoint_check(const char *s, char *err, size_t errlen);
int sl_endpoint_parse(const char *s, char *host, size_t hostlen, int *port);

/* "ECONNREFUSED" (or a number) to an errno value. */
int sl_parse_errno(const char *s, int *out, char *err, size_t errlen);
const char *sl_errno_name(int e);

/* Print a rate as the config writes it ("10/s", "3/5m", "5000/mo" for a calendar
 * window; with `bytes`, whole multiples of 1024 as "512K/s", "10M/s"). */
int sl_format_rate(uint64_t amount, int64_t window_ns, unsigned calendar, int bytes, char *buf, size_t size);

/* Print a duration compactly ("250ms", "30s", "1h", "forever"). */
int sl_format_duration(int64_t ns, char *buf, size_t size);

#endif
