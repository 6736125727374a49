/*
 * sniff.h - the destination's name, read from a connection's first write (docs/design.md,
 * "Send paths and event loops").
 *
 * A program that resolved a name some way the shim never saw (c-ares, /etc/hosts
 * read by hand, a hard-coded address, a proxy) still says the name in its first
 * bytes: the SNI of a TLS ClientHello, the Host header of an HTTP/1.x request, or
 * the authority of a CONNECT line or an absolute-form request sent to a proxy.
 *
 * The parser reads untrusted bytes: it never reads past `len`, never allocates, and
 * returns nothing for anything it cannot follow to the end of the name (a truncated
 * write, a ClientHello split over records, a malformed header).  It is fuzzed.
 */
#ifndef SLUICE_SNIFF_H
#define SLUICE_SNIFF_H

#include "sluice/shm-t.h"

#include <stddef.h>
#include <stdint.h>

enum sl_sniff_kind {
	SL_SNIFF_NONE = 0,
	SL_SNIFF_TLS_SNI = 1,   /* TLS ClientHello server_name */
	SL_SNIFF_HTTP_HOST = 2, /* HTTP/1.x request, Host header (origin-form target) */
	SL_SNIFF_PROXY = 3,     /* CONNECT host:port, or an absolute-form request target:
	                         * the peer is a proxy, the name is the real destination */
};

struct sl_sniffed {
	int kind;                /* enum sl_sniff_kind */
	uint16_t port;           /* PROXY: the destination's port; otherwise 0 (the peer's) */
	char name[SL_HOST_MAX];  /* lower case, no trailing dot; may be a numeric address
	                          * for PROXY (CONNECT 192.0.2.1:443) */
};

/* Look for a destination name in the first `len` bytes a connection sends.  Returns
 * the kind found (SL_SNIFF_NONE when none) and fills `out`. */
int sl_sniff(const void *buf, size_t len, struct sl_sniffed *out);

/* What protocol a connection's first write starts, for meter = requests: a TLS
 * record (type 22, version 3.x); a ClientHello whose ALPN offers "h2"; the
 * HTTP/2 connection preface sent in plaintext (prior knowledge).  Each reads at
 * most `len` bytes and says 0 for anything it cannot follow. */
int sl_sniff_is_tls(const void *buf, size_t len);
int sl_sniff_tls_offers_h2(const void *buf, size_t len);
int sl_sniff_h2_preface(const void *buf, size_t len);

#endif
