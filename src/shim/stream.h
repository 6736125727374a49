/*
 * stream.h - requests and bytes counted on a connection's stream (stream.c).
 */
#ifndef SLUICE_SHIM_STREAM_H
#define SLUICE_SHIM_STREAM_H

#include "record.h"

#include <sys/uio.h>

/* stream.c, meter = requests through libssl: an SSL_write of `n` plaintext bytes
 * is about to be made on fd (whether it begins a request; h2: the server chose
 * HTTP/2), and `n` went. */
void sl_stream_tls_write(int fd, const void *buf, size_t n, int h2);

void sl_stream_tls_wrote(int fd, const void *buf, size_t n);

/* stream.c, all under the record's lock. */
int sl_stream_starts(struct sl_record *rec, const struct iovec *iov, int iovcnt);

size_t sl_stream_limit(struct sl_record *rec, const struct iovec *iov, int iovcnt);

void sl_stream_wrote(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);

/* Whether rec's requests are HTTP/1 messages the parser finds one by one (or not
 * yet decided): then each answer read is the answer to one of them, in order. */
static inline int sl_stream_parsed(const struct sl_record *rec)
{
	return rec->stream && rec->stream->mode != SL_STREAM_TURNS && rec->stream->mode != SL_STREAM_CONNECTION;
}

#endif
