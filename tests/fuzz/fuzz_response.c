/*
 * libFuzzer target for the response reader (`make fuzz`): the input is fed in
 * pieces whose sizes come from its first bytes, as reads return them; the parser
 * must never crash, never consume nothing from a non-empty piece nor more than
 * given, and every response it hands over must decide without crashing.
 */
#include "sluice/response.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int every_third_head(void *arg, uint64_t n)
{
	(void)arg;
	return n % 3 == 2;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_response p;
	size_t pos = 4, k = 0;

	if (size < 4)
		return 0;
	sl_resp_init(&p);
	while (pos < size) {
		size_t want = (size_t)data[k++ % 4] + 1, got;
		struct sl_resp_fields f;
		struct sl_signal sig;
		uint8_t *piece;
		int ready;

		if (want > size - pos)
			want = size - pos;
		piece = malloc(want); /* exact size: ASan sees any overread */
		if (!piece)
			return 0;
		memcpy(piece, data + pos, want);
		got = sl_resp_feed(&p, piece, want, every_third_head, NULL, &f, &ready);
		free(piece);
		if (got == 0 || got > want || (!ready && got != want))
			abort();
		if (ready) {
			sl_signal_decide(&f, 1796000000, &sig);
			if (sig.pause_ms < 0 || sig.budget < 0 || sig.kind >= SL_SIGNAL_KINDS)
				abort();
		}
		pos += got;
		if (data[k % 4] == 0xff)
			sl_resp_eof(&p);
	}
	return 0;
}
