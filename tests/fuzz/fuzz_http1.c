/*
 * libFuzzer target for the HTTP/1 request-boundary parser (`make fuzz`): the input
 * is fed in pieces whose sizes come from its first bytes; the parser must never
 * crash, never consume nothing from a non-empty piece and never more than given.
 */
#include "sluice/http1.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_http1 p;
	size_t pos = 4, k = 0;

	if (size < 4)
		return 0;
	sl_http1_init(&p);
	while (pos < size) {
		size_t want = (size_t)data[k++ % 4] + 1, got;
		uint8_t *piece;

		if (want > size - pos)
			want = size - pos;
		piece = malloc(want); /* exact size: ASan sees any overread */
		if (!piece)
			return 0;
		memcpy(piece, data + pos, want);
		got = (data[k % 4] & 0x80) && p.state == SL_H1_BODY ? sl_http1_skip(&p, want)
		                                                   : sl_http1_feed(&p, piece, want);
		free(piece);
		if (got == 0 || got > want)
			abort();
		pos += got;
	}
	return 0;
}
