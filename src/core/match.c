#include "sluice/match.h"
#include "sluice/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int sl_dest_from_sockaddr(struct sl_dest *d, const struct sockaddr *sa, socklen_t len)
{
	sa_family_t family;

	if (sa == NULL || len < (socklen_t)sizeof(sa_family_t))
		return -EINVAL;
	memcpy(&family, sa, sizeof(family));
	memset(d, 0, sizeof(*d));
	if (family == AF_INET) {
		struct sockaddr_in sin;

		if (len < (socklen_t)sizeof(sin))
			return -EINVAL;
		memcpy(&sin, sa, sizeof(sin));
		d->family = AF_INET;
		d->port = ntohs(sin.sin_port);
		memcpy(d->addr, &sin.sin_addr, 4);
		return 0;
	}
	if (family == AF_INET6) {
		struct sockaddr_in6 sin6;

		if (len < (socklen_t)sizeof(sin6))
			return -EINVAL;
		memcpy(&sin6, sa, sizeof(sin6));
		d->port = ntohs(sin6.sin6_port);
		if (memcmp(&sin6.sin6_addr, v4mapped_prefix, 12) == 0) {
			d->family = AF_INET;
			memcpy(d->addr, (const uint8_t *)&sin6.sin6_addr + 12, 4);
		} else {
			d->family = AF_INET6;
			memcpy(d->addr, &sin6.sin6_addr, 16);
		}
		return 0;
	}
	return -EAFNOSUPPORT;
}

bool sl_is_numeric_host(const char *text)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, text, buf) == 1 || inet_pton(AF_INET6, text, buf) == 1;
}

static int fail(char *err, size_t errlen, const char *fmt, const char *arg)
{
	snprintf(err, errlen, fmt, arg);
	return -EINVAL;
}

/* "443" or "8000-8999" -> [lo, hi].  Ports are 1-65535. */
static int parse_ports(struct sl_pattern *p, const char *s, char *err, size_t errlen)
{
	char *end;
	unsigned long lo, hi;

	if (*s < '0' || *s > '9')
		return fail(err, errlen, "bad port '%s'", s);
	lo = strtoul(s, &end, 10);
	hi = lo;
	if (*end == '-') {
		const char *h = end + 1;

		if (*h < '0' || *h > '9')
			return fail(err, errlen, "bad port range '%s'", s);
		hi = strtoul(h, &end, 10);
	}
	if (*end != '\0')
		return fail(err, errlen, "bad port '%s'", s);
	if (lo < 1 || lo > 65535 || hi < 1 || hi > 65535)
		return fail(err, errlen, "port out of range 1-65535 in '%s'", s);
	if (lo > hi)
		return fail(err, errlen, "port range '%s' runs backwards", s);
	p->port_lo = (uint16_t)lo;
	p->port_hi = (uint16_t)hi;
	return 0;
}

/* "a.b.c.d[/n]" or an IPv6 literal with optional "/n" into p->addr/prefix. */
static int parse_address(struct sl_pattern *p, char *s, char *err, size_t errlen)
{
	char *slash = strchr(s, '/');
	int family = strchr(s, ':') ? AF_INET6 : AF_INET;
	int maxbits = family == AF_INET ? 32 : 128;
	long bits = maxbits;

	if (slash) {
		char *end;

		*slash = '\0';
		if (slash[1] < '0' || slash[1] > '9')
			return fail(err, errlen, "bad prefix length in '%s'", s);
		bits = strtol(slash + 1, &end, 10);
		if (*end != '\0' || bits < 0 || bits > maxbits)
			return fail(err, errlen, "bad prefix length in '%s'", s);
	}
	if (inet_pton(family, s, p->addr) != 1)
		return fail(err, errlen, family == AF_INET ? "bad IPv4 address '%s'"
		                                           : "bad IPv6 address '%s'", s);
	p->kind = family == AF_INET ? SL_PAT_V4 : SL_PAT_V6;
	p->prefix = (uint8_t)bits;
	/* Clear host bits so that equal networks compile to equal patterns. */
	for (int i = 0; i < maxbits / 8; i++) {
		int keep = (int)bits - i * 8;

		if (keep <= 0)
			p->addr[i] = 0;
		else if (keep < 8)
			p->addr[i] &= (uint8_t)(0xff << (8 - keep));
	}
	return 0;
}

static bool valid_name(const char *s, size_t len)
{
	size_t label = 0;

	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
		if (++label > 63)
			return false;
	}
	return label > 0;
}

/* A URL where a pattern belongs ("https://api.example.com/v1"): say what to write
 * instead - its host, and the port its scheme implies. */
static int url_given(const char *text, char *err, size_t errlen)
{
	static const struct {
		const char *scheme;
		int port;
	} schemes[] = {{"http", 80}, {"https", 443}, {"ws", 80}, {"wss", 443}, {"ftp", 21}};
	const char *sep = strstr(text, "://"), *host = sep + 3;
	size_t hlen = strcspn(host, "/?#");
	int port = 0;

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if ((size_t)(sep - text) == strlen(schemes[i].scheme) &&
		    strncasecmp(text, schemes[i].scheme, (size_t)(sep - text)) == 0)
			port = schemes[i].port;
	if (hlen == 0 || hlen > 200)
		return fail(err, errlen, "'%s' is a URL: match takes HOST[:PORT], not a URL", text);
	if (memchr(host, ':', hlen) || !port) /* a port of its own, or a scheme we cannot tell */
		snprintf(err, errlen, "'%s' is a URL: match takes HOST[:PORT] - write %.*s%s", text, (int)hlen, host,
		         memchr(host, ':', hlen) ? "" : ":PORT");
	else
		snprintf(err, errlen, "'%s' is a URL: match takes HOST[:PORT] - write %.*s:%d", text, (int)hlen, host,
		         port);
	return -EINVAL;
}

int sl_pattern_parse(struct sl_pattern *p, const char *text, char *err, size_t errlen)
{
	char buf[SL_HOST_MAX + 32];
	char *host = buf, *port = NULL;
	size_t len = strlen(text);

	memset(p, 0, sizeof(*p));
	p->port_lo = 0;
	p->port_hi = 65535;
	if (len == 0)
		return fail(err, errlen, "empty pattern%s", "");
	if (len >= sizeof(buf))
		return fail(err, errlen, "pattern too long: '%.40s...'", text);
	if (strstr(text, "://"))
		return url_given(text, err, errlen);
	memcpy(buf, text, len + 1);

	if (buf[0] == '[') {
		char *close = strchr(buf, ']');

		if (!close)
			return fail(err, errlen, "missing ']' in '%s'", text);
		*close = '\0';
		host = buf + 1;
		if (close[1] == ':')
			port = close + 2;
		else if (close[1] != '\0')
			return fail(err, errlen, "expected ':PORT' after ']' in '%s'", text);
		if (!strchr(host, ':'))
			return fail(err, errlen, "brackets hold IPv6 addresses only: '%s'", text);
	} else {
		char *colon = strchr(buf, ':');

		/* Two or more colons without brackets: a bare IPv6 address, no port. */
		if (colon && strchr(colon + 1, ':') == NULL) {
			*colon = '\0';
			port = colon + 1;
		}
	}
	if (port && parse_ports(p, port, err, errlen) < 0)
		return -EINVAL;
	if (*host == '\0')
		return fail(err, errlen, "missing host in '%s'", text);

	if (strcmp(host, "*") == 0) {
		p->kind = SL_PAT_ANY;
		return 0;
	}
	if (strchr(host, ':'))
		return parse_address(p, host, err, errlen);
	if (host[strspn(host, "0123456789./")] == '\0')
		return parse_address(p, host, err, errlen);

	len = sl_name_normalise(host, strlen(host));
	if (host[0] == '*') {
		if (host[1] != '.' || !valid_name(host + 2, len - 2))
			return fail(err, errlen, "bad wildcard '%s' (use *.example.com)", text);
		p->kind = SL_PAT_SUFFIX;
		host++; /* keep the dot: ".example.com" */
		len--;
	} else {
		if (!valid_name(host, len))
			return fail(err, errlen, "bad host name '%s'", text);
		p->kind = SL_PAT_NAME;
	}
	memcpy(p->name, host, len + 1);
	p->name_len = (uint16_t)len;
	return 0;
}

int sl_pattern_format(const struct sl_pattern *p, char *buf, size_t size)
{
	char host[SL_HOST_MAX + 8], addr[INET6_ADDRSTRLEN];
	bool v6 = false;

	switch (p->kind) {
	case SL_PAT_ANY:
		snprintf(host, sizeof(host), "*");
		break;
	case SL_PAT_NAME:
		snprintf(host, sizeof(host), "%.*s", (int)SL_MIN(p->name_len, SL_HOST_MAX - 1),
		         p->name);
		break;
	case SL_PAT_SUFFIX:
		snprintf(host, sizeof(host), "*%.*s", (int)SL_MIN(p->name_len, SL_HOST_MAX - 1),
		         p->name);
		break;
	case SL_PAT_V4:
	case SL_PAT_V6:
		v6 = p->kind == SL_PAT_V6;
		inet_ntop(v6 ? AF_INET6 : AF_INET, p->addr, addr, sizeof(addr));
		if (p->prefix != (v6 ? 128 : 32))
			snprintf(host, sizeof(host), "%s/%u", addr, p->prefix);
		else
			snprintf(host, sizeof(host), "%s", addr);
		break;
	default:
		return snprintf(buf, size, "?");
	}
	if (p->port_lo == 0 && p->port_hi == 65535)
		return snprintf(buf, size, "%s", host);
	if (v6) {
		if (p->port_lo == p->port_hi)
			return snprintf(buf, size, "[%s]:%u", host, p->port_lo);
		return snprintf(buf, size, "[%s]:%u-%u", host, p->port_lo, p->port_hi);
	}
	if (p->port_lo == p->port_hi)
		return snprintf(buf, size, "%s:%u", host, p->port_lo);
	return snprintf(buf, size, "%s:%u-%u", host, p->port_lo, p->port_hi);
}

static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[whole] ^ b[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

bool sl_pattern_match(const struct sl_pattern *p, const struct sl_dest *d)
{
	size_t n;

	if (d->port < p->port_lo || d->port > p->port_hi)
		return false;
	switch (p->kind) {
	case SL_PAT_ANY:
		return true;
	case SL_PAT_V4:
		return d->family == AF_INET && prefix_equal(p->addr, d->addr, SL_MIN(p->prefix, 32));
	case SL_PAT_V6:
		return d->family == AF_INET6 && prefix_equal(p->addr, d->addr, SL_MIN(p->prefix, 128));
	case SL_PAT_NAME:
		n = SL_MIN(p->name_len, SL_HOST_MAX - 1);
		return d->name && d->name_len == n && memcmp(d->name, p->name, n) == 0;
	case SL_PAT_SUFFIX:
		n = SL_MIN(p->name_len, SL_HOST_MAX - 1);
		return d->name && d->name_len > n && memcmp(d->name + d->name_len - n, p->name, n) == 0;
	default:
		return false;
	}
}
