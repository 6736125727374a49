/* Names in a connection's first bytes: TLS SNI, HTTP Host, proxy targets (sniff.h). */
#include "sluice/sniff.h"
#include "sluice/common.h"
#include "sluice/http2.h"
#include "sluice/name.h"

#include <string.h>

/* A bounded reader over untrusted bytes: every read checks what is left first. */
struct reader {
	const uint8_t *p;
	size_t pos, end;
};

static int rd_u8(struct reader *r, unsigned *v)
{
	if (r->end - r->pos < 1)
		return -1;
	*v = r->p[r->pos++];
	return 0;
}

static int rd_u16(struct reader *r, unsigned *v)
{
	if (r->end - r->pos < 2)
		return -1;
	*v = (unsigned)r->p[r->pos] << 8 | r->p[r->pos + 1];
	r->pos += 2;
	return 0;
}

static int rd_skip(struct reader *r, size_t n)
{
	if (r->end - r->pos < n)
		return -1;
	r->pos += n;
	return 0;
}

/* A sub-reader of the next n bytes, clamped to what is there (a truncated write
 * still yields a name that lies wholly before the cut). */
static struct reader rd_sub(const struct reader *r, size_t n)
{
	struct reader s = *r;

	if (n < s.end - s.pos)
		s.end = s.pos + n;
	return s;
}

static int host_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_' || c == ':';
}

/* Copy a host name (no brackets, no port) into out->name, normalised.  0, or -1 when
 * it is empty, too long or has a character no host name or address has. */
static int set_name(struct sl_sniffed *out, const char *s, size_t n)
{
	if (n == 0 || n > 253 || n >= sizeof(out->name))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!host_char((unsigned char)s[i]))
			return -1;
	memcpy(out->name, s, n);
	out->name[n] = '\0';
	n = sl_name_normalise(out->name, n);
	/* No empty label: "..", a leading dot, or dots alone. */
	if (n == 0 || out->name[0] == '.' || out->name[n - 1] == '.' || strstr(out->name, ".."))
		return -1;
	return 0;
}

/* The ClientHello's extension of type `want`, into *e (its body).  0, or -1 when
 * the bytes are no ClientHello or it ends before that extension. */
static int tls_extension(const uint8_t *buf, size_t len, unsigned want, struct reader *e)
{
	struct reader rec = {buf, 0, len}, hs, ext;
	unsigned type, major, v, hs_type, hs_len_hi, hs_len;

	/* Record header: handshake (22), version 3.x, length. */
	if (rd_u8(&rec, &type) || type != 22 || rd_u8(&rec, &major) || major != 3 ||
	    rd_skip(&rec, 1) || rd_u16(&rec, &v))
		return -1;
	rec = rd_sub(&rec, v);
	/* Handshake header: ClientHello (1), 24-bit length. */
	if (rd_u8(&rec, &hs_type) || hs_type != 1 || rd_u8(&rec, &hs_len_hi) || rd_u16(&rec, &hs_len))
		return -1;
	hs = rd_sub(&rec, (size_t)hs_len_hi << 16 | hs_len);
	/* client_version, random, session_id, cipher_suites, compression_methods. */
	if (rd_skip(&hs, 2 + 32) || rd_u8(&hs, &v) || rd_skip(&hs, v) || rd_u16(&hs, &v) ||
	    rd_skip(&hs, v) || rd_u8(&hs, &v) || rd_skip(&hs, v) || rd_u16(&hs, &v))
		return -1;
	ext = rd_sub(&hs, v);
	for (;;) {
		unsigned etype, elen;

		if (rd_u16(&ext, &etype) || rd_u16(&ext, &elen))
			return -1;
		*e = rd_sub(&ext, elen);
		if (etype == want)
			return 0; /* possibly cut short: the caller reads what is there */
		if (rd_skip(&ext, elen))
			return -1;
	}
}

static int sniff_tls(const uint8_t *buf, size_t len, struct sl_sniffed *out)
{
	struct reader e, list;
	unsigned list_len;

	/* server_name (0): a list of (name_type, name); type 0 is host_name. */
	if (tls_extension(buf, len, 0, &e) || rd_u16(&e, &list_len))
		return SL_SNIFF_NONE;
	list = rd_sub(&e, list_len);
	for (;;) {
		unsigned ntype, nlen;
		size_t at;

		if (rd_u8(&list, &ntype) || rd_u16(&list, &nlen))
			return SL_SNIFF_NONE;
		at = list.pos;
		if (rd_skip(&list, nlen))
			return SL_SNIFF_NONE;
		if (ntype == 0)
			return set_name(out, (const char *)buf + at, nlen) == 0 ? SL_SNIFF_TLS_SNI
			                                                         : SL_SNIFF_NONE;
	}
}

int sl_sniff_tls_offers_h2(const void *buf, size_t len)
{
	struct reader e, list;
	unsigned list_len;

	/* application_layer_protocol_negotiation (16): a list of 8-bit-length names. */
	if (!buf || tls_extension(buf, len, 16, &e) || rd_u16(&e, &list_len))
		return 0;
	list = rd_sub(&e, list_len);
	for (;;) {
		unsigned n;
		size_t at;

		if (rd_u8(&list, &n))
			return 0;
		at = list.pos;
		if (rd_skip(&list, n))
			return 0;
		if (n == 2 && memcmp((const uint8_t *)buf + at, "h2", 2) == 0)
			return 1;
	}
}

int sl_sniff_is_tls(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	return buf && len >= 3 && p[0] == 22 && p[1] == 3;
}

int sl_sniff_h2_preface(const void *buf, size_t len)
{
	/* A first write may carry only the start of it: 14 bytes tell. */
	return buf && len >= 14 && sl_h2_is_preface(buf, len);
}

/* One line [s, s+n) ending in LF (the LF and a CR before it excluded from *linelen).
 * Returns the offset just past the LF, or 0 when the buffer ends first. */
static size_t next_line(const char *s, size_t n, size_t from, size_t *linelen)
{
	const char *lf = memchr(s + from, '\n', n - from);
	size_t end;

	if (!lf)
		return 0;
	end = (size_t)(lf - s);
	*linelen = end - from - (end > from && s[end - 1] == '\r');
	return end + 1;
}

static int parse_port(const char *s, size_t n, uint16_t *port)
{
	unsigned v = 0;

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

/* "host", "host:port", "[v6]" or "[v6]:port" into out (port 0 when absent). */
static int set_authority(struct sl_sniffed *out, const char *s, size_t n)
{
	const char *host = s, *colon = NULL;
	size_t hlen = n;

	out->port = 0;
	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return -1;
		host = s + 1;
		hlen = (size_t)(close - s - 1);
		if ((size_t)(close - s) + 1 < n) {
			if (close[1] != ':')
				return -1;
			colon = close + 1;
		}
	} else {
		colon = memchr(s, ':', n);
		if (colon)
			hlen = (size_t)(colon - s);
	}
	if (colon && parse_port(colon + 1, n - (size_t)(colon + 1 - s), &out->port))
		return -1;
	return set_name(out, host, hlen);
}

static int ieq_prefix(const char *s, size_t n, const char *lit)
{
	size_t l = strlen(lit);

	if (n < l)
		return 0;
	for (size_t i = 0; i < l; i++) {
		char c = s[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != lit[i])
			return 0;
	}
	return 1;
}

static int sniff_http(const char *s, size_t len, struct sl_sniffed *out)
{
	size_t line, pos, m = 0, sp2;
	const char *target;
	size_t tlen;

	/* Request line: METHOD SP target SP HTTP/1.x */
	if (!(pos = next_line(s, len, 0, &line)))
		return SL_SNIFF_NONE;
	while (m < line && m < 20 && s[m] >= 'A' && s[m] <= 'Z')
		m++;
	if (m == 0 || m >= line || s[m] != ' ')
		return SL_SNIFF_NONE;
	target = s + m + 1;
	for (sp2 = m + 1; sp2 < line && s[sp2] != ' '; sp2++)
		;
	tlen = (size_t)(s + sp2 - target);
	if (sp2 >= line || line - sp2 - 1 != 8 || memcmp(s + sp2 + 1, "HTTP/1.", 7) != 0 || tlen == 0)
		return SL_SNIFF_NONE;

	if (m == 7 && memcmp(s, "CONNECT", 7) == 0) {
		if (set_authority(out, target, tlen) || !out->port)
			return SL_SNIFF_NONE;
		return SL_SNIFF_PROXY;
	}
	if (ieq_prefix(target, tlen, "http://") || ieq_prefix(target, tlen, "https://")) {
		size_t skip = target[4] == ':' ? 7 : 8, alen = 0;
		const char *auth = target + skip, *at;

		while (skip + alen < tlen && !memchr("/?#", auth[alen], 3))
			alen++;
		/* userinfo@host: the host is after the last '@' */
		while ((at = memchr(auth, '@', alen)) != NULL) {
			alen -= (size_t)(at + 1 - auth);
			auth = at + 1;
		}
		if (set_authority(out, auth, alen))
			return SL_SNIFF_NONE;
		if (!out->port)
			out->port = skip == 7 ? 80 : 443;
		return SL_SNIFF_PROXY;
	}

	/* Headers, up to the blank line, for Host. */
	for (;;) {
		size_t start = pos, v;

		if (!(pos = next_line(s, len, start, &line)) || line == 0)
			return SL_SNIFF_NONE;
		if (line < 5 || !ieq_prefix(s + start, line, "host:"))
			continue;
		for (v = start + 5; v < start + line && (s[v] == ' ' || s[v] == '\t'); v++)
			;
		while (start + line > v && (s[start + line - 1] == ' ' || s[start + line - 1] == '\t'))
			line--;
		if (set_authority(out, s + v, start + line - v))
			return SL_SNIFF_NONE;
		out->port = 0; /* the connection's own port is the destination's */
		return SL_SNIFF_HTTP_HOST;
	}
}

int sl_sniff(const void *buf, size_t len, struct sl_sniffed *out)
{
	const uint8_t *p = buf;

	memset(out, 0, sizeof(*out));
	if (!buf || len < 5)
		return SL_SNIFF_NONE;
	if (p[0] == 22)
		return out->kind = sniff_tls(p, len, out);
	if (p[0] >= 'A' && p[0] <= 'Z')
		return out->kind = sniff_http(buf, len, out);
	return SL_SNIFF_NONE;
}
