/*
 * stream.h - requests and bytes counted on a connection's stream (stream.c).
 */
#ifndef SLUICE_SHIM_STREAM_H
#define SLUICE_SHIM_STREAM_H

#include "record.h"

#include <sys/uio.h>

/* stream.c, meter = requests through libssl: an SSL_write of `n` plaintext bytes
 * is about to be made on fd (whether it begins a request; h2: the server chose
 * HTTP/2) - how many of them it may carry (SIZE_MAX: all) - and `n` went. */
size_t sl_stream_tls_write(int fd, const void *buf, size_t n, int h2);

void sl_stream_tls_wrote(int fd, const void *buf, size_t n);

/* stream.c, meter = requests: fd's connection was named by the :authority of its
 * first HEADERS, its preface written before (naming.c): HTTP/2 from there. */
void sl_stream_h2_named(int fd);

/* stream.c, all under the record's lock. */
int sl_stream_starts(struct sl_record *rec, const struct iovec *iov, int iovcnt);

/* What of this write may go now: up to the end of the request it carries
 * (SIZE_MAX: all of it).  `placed`: whether the write has a request's place
 * (HTTP/2 lets an opening HEADERS through only then: sl_h2_cut). */
size_t sl_stream_limit(struct sl_record *rec, const struct iovec *iov, int iovcnt, int placed);

void sl_stream_wrote(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);

/* Whether this write (made released) carries the first request, whose place the
 * connect took: not a TLS handshake's write inside libssl, nor HTTP/2's preface
 * and SETTINGS written ahead of its first HEADERS. */
int sl_stream_carries_first(struct sl_record *rec, const struct iovec *iov, int iovcnt);

/* Whether rec's requests are HTTP/1 messages the parser finds one by one (or not
 * yet decided): then each answer read is the answer to one of them, in order. */
static inline int sl_stream_parsed(const struct sl_record *rec)
{
	return rec->stream && rec->stream->mode != SL_STREAM_TURNS && rec->stream->mode != SL_STREAM_CONNECTION;
}

/* Whether rec's requests are HTTP/2 streams (in plaintext or through libssl). */
static inline int sl_stream_h2(const struct sl_record *rec)
{
	return rec->stream && (rec->stream->mode == SL_STREAM_H2 || rec->stream->mode == SL_STREAM_TLS_H2);
}

/* Whether a held write on rec waits inside the call even on a non-blocking socket:
 * an HTTP/2 request in a process with libcurl, whose HTTP/2 fails a request whose
 * first write is refused (h2.c); waiting costs an event loop the wait
 * (docs/design.md, "HTTP/2 request by request"). */
int sl_stream_waits_inside(const struct sl_record *rec);

#endif
