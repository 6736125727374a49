/*
 * iovec.h - cutting a write's vector to what may be sent: the send hooks (send.c) and the
 * write the gate makes inside its release (gate.c) cut it the same way.
 */
#ifndef SLUICE_SHIM_IOVEC_H
#define SLUICE_SHIM_IOVEC_H

#include <stddef.h>
#include <sys/uio.h>

/* iov cut to its first `limit` bytes, into `out` (room for iovcnt entries);
 * returns how many entries `out` holds (0 when limit is 0). */
static inline int sl_iov_cut(const struct iovec *iov, int iovcnt, size_t limit, struct iovec *out)
{
	int k = 0;

	for (int i = 0; i < iovcnt && limit > 0; i++, k++) {
		out[k] = iov[i];
		if (out[k].iov_len > limit)
			out[k].iov_len = limit;
		limit -= out[k].iov_len;
	}
	return k;
}

#endif
