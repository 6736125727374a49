/*
 * hpack.h - an HTTP/2 answer's header blocks decoded by nghttp2's HPACK inflater
 * (hpack.c; docs/design.md, "HTTP/2 request by request").
 */
#ifndef SLUICE_SHIM_HPACK_H
#define SLUICE_SHIM_HPACK_H

#include <stddef.h>
#include <stdint.h>

struct sl_hpack;

/* Whether the decoder can be had: libnghttp2 is opened the first time this is
 * asked (RTLD_LOCAL, only when an HTTP/2 connection's answers are to be read), and
 * the answer kept.  Not from inside a signal handler of the program's: a
 * connection is found to speak HTTP/2 in a write hook, never there in practice. */
int sl_hpack_available(void);

/* A decoder for one connection (NULL: none to be had), and its end. */
struct sl_hpack *sl_hpack_new(void);

void sl_hpack_free(struct sl_hpack *h);

/* The client's SETTINGS_HEADER_TABLE_SIZE: the most the server's table may hold.
 * Only between blocks.  0, or -1. */
int sl_hpack_table(struct sl_hpack *h, size_t max);

/* Each field decoded, name in lower case as HTTP/2 sends it. */
typedef void (*sl_hpack_field_fn)(void *arg, const char *name, size_t nn, const char *v, size_t vn);

/* A piece of a header block (`last`: its end); every field completed in it goes to
 * fn.  0, or -1 when the block cannot be decoded (the connection is then left
 * alone: a decoder out of step with the server's table reads nothing right). */
int sl_hpack_feed(struct sl_hpack *h, const uint8_t *in, size_t n, int last, sl_hpack_field_fn fn, void *arg);

#endif
