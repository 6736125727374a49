/* HTTP/2 frames on a shaped connection, both ways (http2.h). */
#include "sluice/http2.h"

#include <string.h>

#define FLAG_END_STREAM 0x1
#define FLAG_ACK 0x1
#define FLAG_END_HEADERS 0x4
#define FLAG_PADDED 0x8
#define FLAG_PRIORITY 0x20
#define SETTINGS_HEADER_TABLE_SIZE 1

static const char preface[SL_H2_PREFACE_LEN + 1] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

struct frame {
	uint32_t length, stream;
	uint8_t type, flags;
};

static struct frame frame_of(const uint8_t *h)
{
	struct frame f;

	f.length = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
	f.type = h[3];
	f.flags = h[4];
	f.stream = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) & 0x7fffffffu;
	return f;
}

int sl_h2_is_preface(const void *buf, size_t len)
{
	return len > 0 && memcmp(buf, preface, len < SL_H2_PREFACE_LEN ? len : SL_H2_PREFACE_LEN) == 0;
}

/* --- the client's side --- */

void sl_h2_out_init(struct sl_h2_out *p, int start)
{
	memset(p, 0, sizeof(*p));
	p->state = start == SL_H2_AFTER_PREFACE ? SL_H2_HEAD : SL_H2_PREFACE;
	p->table_size = SL_H2_TABLE_DEFAULT;
	if (start == SL_H2_UPGRADED) {
		p->max_stream = 1; /* the Upgrade request is stream 1 (RFC 7540, 3.2) */
		p->opened = 1;
	}
}

static size_t out_lose(struct sl_h2_out *p, const char *why)
{
	p->state = SL_H2_LOST;
	p->why = why;
	return 0;
}

/* A whole frame header: what it is for the order of frames; -1 when it breaks it. */
static int out_frame(struct sl_h2_out *p, const struct frame *f)
{
	if (p->in_block != (f->type == SL_H2_CONTINUATION))
		return out_lose(p, p->in_block ? "a frame inside a header block" : "a CONTINUATION out of place"), -1;
	switch (f->type) {
	case SL_H2_HEADERS:
		if (f->stream == 0)
			return out_lose(p, "HEADERS on stream 0"), -1;
		/* fall through */
	case SL_H2_CONTINUATION:
		p->in_block = !(f->flags & FLAG_END_HEADERS);
		break;
	case SL_H2_PUSH_PROMISE:
		return out_lose(p, "a PUSH_PROMISE from the client"), -1;
	case SL_H2_RST_STREAM:
		p->resets++;
		break;
	default:
		break;
	}
	return 0;
}

/* SETTINGS payload bytes: six-byte entries, SETTINGS_HEADER_TABLE_SIZE kept. */
static void out_settings(struct sl_h2_out *p, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		p->set_entry[p->set_got++] = b[i];
		if (p->set_got < 6)
			continue;
		p->set_got = 0;
		if ((p->set_entry[0] << 8 | p->set_entry[1]) == SETTINGS_HEADER_TABLE_SIZE) {
			p->table_size = (uint32_t)p->set_entry[2] << 24 | (uint32_t)p->set_entry[3] << 16 |
			                (uint32_t)p->set_entry[4] << 8 | p->set_entry[5];
			p->table_sets++;
		}
	}
}

size_t sl_h2_out_feed(struct sl_h2_out *p, const void *buf, size_t len, uint64_t *opens)
{
	const uint8_t *b = buf;
	size_t i = 0;

	while (i < len) {
		switch (p->state) {
		case SL_H2_PREFACE:
			if (b[i] != (uint8_t)preface[p->got])
				return out_lose(p, "not the HTTP/2 connection preface"), len;
			i++;
			if (++p->got == SL_H2_PREFACE_LEN) {
				p->state = SL_H2_HEAD;
				p->got = 0;
			}
			break;
		case SL_H2_HEAD: {
			size_t need = SL_H2_HEAD_LEN - p->got;
			uint8_t h[SL_H2_HEAD_LEN];
			struct frame f;
			int opening;

			if (len - i < need) { /* judged when whole, at the next call */
				memcpy(p->head + p->got, b + i, len - i);
				p->got += (uint8_t)(len - i);
				return len;
			}
			memcpy(h, p->head, p->got);
			memcpy(h + p->got, b + i, need);
			f = frame_of(h);
			opening = f.type == SL_H2_HEADERS && (f.stream & 1) && f.stream > p->max_stream && !p->in_block;
			if (opening && opens && *opens == 0)
				return i; /* the next request begins here */
			if (out_frame(p, &f) < 0)
				return len;
			if (opening) {
				if (opens)
					(*opens)--;
				p->max_stream = f.stream;
				p->opened++;
			}
			memcpy(p->head, h, sizeof(h));
			p->got = 0;
			i += need;
			p->set_got = 0;
			if (f.length) {
				p->state = SL_H2_PAYLOAD;
				p->left = f.length;
			}
			break;
		}
		case SL_H2_PAYLOAD: {
			size_t take = len - i < p->left ? len - i : p->left;

			if (p->head[3] == SL_H2_SETTINGS && !(p->head[4] & FLAG_ACK))
				out_settings(p, b + i, take);
			i += take;
			p->left -= (uint32_t)take;
			if (!p->left)
				p->state = SL_H2_HEAD;
			break;
		}
		default:
			return len;
		}
	}
	return len;
}

/* --- the server's side --- */

int sl_h2_is_server_preface(const void *buf, size_t len)
{
	struct frame f;

	if (len < SL_H2_HEAD_LEN)
		return 0;
	f = frame_of(buf);
	return f.type == SL_H2_SETTINGS && f.flags == 0 && f.stream == 0 && f.length % 6 == 0 &&
	       f.length <= 16384;
}

void sl_h2_in_init(struct sl_h2_in *p)
{
	memset(p, 0, sizeof(*p));
	p->state = SL_H2_HEAD;
}

static void in_lose(struct sl_h2_in *p, const char *why)
{
	p->state = SL_H2_LOST;
	p->why = why;
}

static int is_block(uint8_t type)
{
	return type == SL_H2_HEADERS || type == SL_H2_PUSH_PROMISE || type == SL_H2_CONTINUATION;
}

/* The server ended client stream `id` (odd): counted once, whatever ended it,
 * within the last 64 streams (older ones are counted as they come). */
static void in_ended(struct sl_h2_in *p, uint32_t id)
{
	if (!(id & 1))
		return;
	if (id > p->ended_top) {
		uint32_t shift = (id - p->ended_top) / 2;

		p->ended_bits = shift >= 64 ? 0 : p->ended_bits << shift;
		p->ended_bits |= 1;
		p->ended_top = id;
	} else {
		uint32_t k = (p->ended_top - id) / 2;

		if (k < 64) {
			if (p->ended_bits & (1ull << k))
				return;
			p->ended_bits |= 1ull << k;
		}
	}
	p->ended++;
}

/* A whole frame header read: set up its payload. */
static void in_frame(struct sl_h2_in *p)
{
	struct frame f = frame_of(p->head);

	p->got = 0;
	if (p->in_block != (f.type == SL_H2_CONTINUATION) || (p->in_block && f.stream != p->block_stream)) {
		in_lose(p, p->in_block ? "a frame inside a header block" : "a CONTINUATION out of place");
		return;
	}
	p->pre = p->pre_pad = 0;
	p->trail = 0;
	switch (f.type) {
	case SL_H2_HEADERS:
	case SL_H2_PUSH_PROMISE:
		if (f.stream == 0) {
			in_lose(p, "a header block on stream 0");
			return;
		}
		p->pre_pad = (f.flags & FLAG_PADDED) != 0;
		p->pre = (uint8_t)(p->pre_pad + (f.type == SL_H2_PUSH_PROMISE ? 4 : (f.flags & FLAG_PRIORITY) ? 5 : 0));
		if (p->pre > f.length) {
			in_lose(p, "a header frame shorter than its fields");
			return;
		}
		p->in_block = 1;
		p->block_stream = f.stream;
		p->block_push = f.type == SL_H2_PUSH_PROMISE;
		p->block_ends = f.type == SL_H2_HEADERS && (f.flags & FLAG_END_STREAM);
		if (p->block_ends)
			in_ended(p, f.stream);
		break;
	case SL_H2_DATA:
		if (f.flags & FLAG_END_STREAM)
			in_ended(p, f.stream);
		break;
	case SL_H2_RST_STREAM:
		in_ended(p, f.stream);
		break;
	default:
		break;
	}
	p->left = f.length;
	p->state = SL_H2_PAYLOAD;
}

/* The end of a frame's payload: a header frame with END_HEADERS closes its block. */
static int in_frame_end(struct sl_h2_in *p, sl_h2_block_fn fn, void *arg)
{
	uint8_t type = p->head[3], flags = p->head[4];

	p->state = SL_H2_HEAD;
	if (!is_block(type) || !(flags & FLAG_END_HEADERS))
		return 0;
	p->in_block = 0;
	return fn(arg, p->block_stream, NULL, 0, 1, p->block_push, p->block_ends);
}

void sl_h2_in_feed(struct sl_h2_in *p, const void *buf, size_t len, sl_h2_block_fn fn, void *arg)
{
	const uint8_t *b = buf;
	size_t i = 0;

	while (i < len && p->state != SL_H2_LOST) {
		if (p->state == SL_H2_HEAD) {
			size_t need = (size_t)SL_H2_HEAD_LEN - p->got, take = need < len - i ? need : len - i;

			memcpy(p->head + p->got, b + i, take);
			p->got += (uint8_t)take;
			i += take;
			if (p->got == SL_H2_HEAD_LEN)
				in_frame(p);
		} else if (p->pre) { /* pad length, priority, promised stream: skipped */
			if (p->pre_pad) {
				p->trail = b[i];
				p->pre_pad = 0;
			}
			p->pre--;
			p->left--;
			i++;
			if (!p->pre && p->trail > p->left)
				in_lose(p, "padding longer than its frame");
		} else {
			size_t avail = len - i, block = p->left > p->trail ? p->left - p->trail : 0;
			size_t take = avail < p->left ? avail : p->left;

			if (is_block(p->head[3]) && block && fn(arg, p->block_stream, b + i, take < block ? take : block, 0,
			                                       p->block_push, p->block_ends) < 0) {
				in_lose(p, "the header block could not be decoded");
				return;
			}
			i += take;
			p->left -= (uint32_t)take;
		}
		/* (a frame with an empty payload ends as its header is read) */
		if (p->state == SL_H2_PAYLOAD && !p->pre && !p->left && in_frame_end(p, fn, arg) < 0) {
			in_lose(p, "the header block could not be decoded");
			return;
		}
	}
}
