/*
 * libFuzzer target for the HTTP/2 followers and the HPACK feed (`make fuzz`): the
 * input goes, in pieces whose sizes come from its first bytes, to the client-side
 * follower (with a budget of new streams per piece, as the shim cuts writes) and to
 * the server-side reader, whose header block fragments go to nghttp2's HPACK
 * inflater as the shim's do (h2.c), every field to sl_resp_field and every block
 * end to sl_signal_decide.  Nothing may crash; the follower never takes more than
 * it is given, and stops short only before a stream it may not open.
 */
#include "sluice/http2.h"
#include "sluice/response.h"

#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct decode {
	nghttp2_hd_inflater *inf;
	struct sl_resp_fields f;
	int open;
};

static int on_block(void *arg, uint32_t stream, const uint8_t *frag, size_t n, int last, int push, int ends)
{
	struct decode *d = arg;

	(void)stream;
	(void)push;
	(void)ends;
	if (!d->open) {
		sl_resp_fields_clear(&d->f);
		d->open = 1;
	}
	for (;;) {
		nghttp2_nv nv;
		int flags = 0;
		ssize_t used = nghttp2_hd_inflate_hd2(d->inf, &nv, &flags, frag, n, last);

		if (used < 0)
			return -1;
		if (used > 0) { /* (an empty block's end comes with no bytes at all) */
			frag += used;
			n -= (size_t)used;
		}
		if (flags & NGHTTP2_HD_INFLATE_EMIT)
			sl_resp_field(&d->f, (const char *)nv.name, nv.namelen, (const char *)nv.value, nv.valuelen);
		if (flags & NGHTTP2_HD_INFLATE_FINAL) {
			struct sl_signal sig;

			nghttp2_hd_inflate_end_headers(d->inf);
			sl_signal_decide(&d->f, 1700000000, &sig);
			d->open = 0;
			return 0;
		}
		if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && n == 0)
			return 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_h2_out out;
	struct sl_h2_in in;
	struct decode d = {0};
	size_t pos = 4, k = 0;

	if (size < 4 || nghttp2_hd_inflate_new(&d.inf) != 0)
		return 0;
	sl_h2_out_init(&out, data[0] % 3);
	sl_h2_in_init(&in);
	while (pos < size) {
		size_t want = (size_t)data[k++ % 4] + 1, got;
		uint64_t opens = data[(k + 1) % 4] % 3;
		uint8_t *piece;

		if (want > size - pos)
			want = size - pos;
		piece = malloc(want); /* exact size: ASan sees any overread */
		if (!piece)
			break;
		memcpy(piece, data + pos, want);
		got = sl_h2_out_feed(&out, piece, want, &opens);
		if (got > want || (got < want && opens != 0))
			abort();
		/* stopped before a stream: the rest goes as the write held for it would */
		if (got < want && sl_h2_out_feed(&out, piece + got, want - got, NULL) != want - got)
			abort();
		sl_h2_in_feed(&in, piece, want, on_block, &d);
		free(piece);
		pos += want;
	}
	nghttp2_hd_inflate_del(d.inf);
	return 0;
}
