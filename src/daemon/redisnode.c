/*
 * redisnode.c - the answers of Sentinels and Cluster nodes read into an address
 * (redisnode.h).  The daemon's alone: the shim never talks to Redis.
 */
#include "sluice/redisnode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), as the Cluster
 * specification gives for key slots. */
static unsigned crc16(const char *s, size_t len)
{
	unsigned crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (unsigned)(unsigned char)s[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
	}
	return crc;
}

unsigned sl_redis_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);

	if (open) {
		size_t from = (size_t)(open - key) + 1;
		const char *close = memchr(key + from, '}', len - from);

		if (close && close > key + from)
			return crc16(key + from, (size_t)(close - key) - from) % SL_REDIS_SLOTS;
	}
	return crc16(key, len) % SL_REDIS_SLOTS;
}

static int port_of(const char *s, size_t len)
{
	int port = 0;

	if (len == 0 || len > 5)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	return port >= 1 && port <= 65535 ? port : -1;
}

static int host_into(struct sl_redis_addr *a, const char *h, size_t len)
{
	if (len >= sizeof(a->host) || memchr(h, '\0', len))
		return -1;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)h[i] <= ' ' || h[i] == '/')
			return -1;
	memcpy(a->host, h, len);
	a->host[len] = '\0';
	return 0;
}

int sl_redis_addr_parse(const char *s, size_t len, struct sl_redis_addr *a)
{
	const char *colon;
	size_t hlen;
	const char *h = s;

	if (len && s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close || (size_t)(close - s) + 1 >= len || close[1] != ':')
			return -1;
		h = s + 1;
		hlen = (size_t)(close - s) - 1;
		colon = close + 1;
	} else {
		colon = NULL;
		for (size_t i = len; i > 0; i--)
			if (s[i - 1] == ':') {
				colon = s + i - 1;
				break;
			}
		if (!colon)
			return -1;
		hlen = (size_t)(colon - s);
		if (memchr(s, ':', hlen))
			return -1; /* an IPv6 address wants its brackets */
	}
	if (hlen == 0 || (a->port = port_of(colon + 1, len - (size_t)(colon + 1 - s))) < 0)
		return -1;
	return host_into(a, h, hlen);
}

void sl_redis_addr_format(const struct sl_redis_addr *a, char *buf, size_t size)
{
	snprintf(buf, size, strchr(a->host, ':') ? "[%s]:%d" : "%s:%d", a->host, a->port);
}

int sl_redis_redirect(const char *err, const struct sl_redis_addr *self, struct sl_redis_addr *to)
{
	int kind;
	const char *p, *sp;

	if (!err)
		return 0;
	if (strncmp(err, "MOVED ", 6) == 0)
		kind = 1, p = err + 6;
	else if (strncmp(err, "ASK ", 4) == 0)
		kind = 2, p = err + 4;
	else
		return 0;
	if (!(sp = strchr(p, ' ')) || sp == p || strspn(p, "0123456789") != (size_t)(sp - p))
		return 0;
	p = sp + 1;
	if (p[0] == ':') { /* "MOVED 3999 :6381": the node did not know its address */
		struct sl_redis_addr t;

		if (!self || (t.port = port_of(p + 1, strlen(p + 1))) < 0)
			return 0;
		memcpy(t.host, self->host, sizeof(t.host));
		*to = t;
		return kind;
	}
	return sl_redis_addr_parse(p, strlen(p), to) == 0 ? kind : 0;
}

static int is_str(const redisReply *r)
{
	return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->str;
}

int sl_redis_sentinel_master(const redisReply *r, struct sl_redis_addr *a)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_str(r->element[0]) ||
	    !is_str(r->element[1]))
		return -1;
	if ((a->port = port_of(r->element[1]->str, r->element[1]->len)) < 0)
		return -1;
	return r->element[0]->len ? host_into(a, r->element[0]->str, r->element[0]->len) : -1;
}

int sl_redis_switch_master(const char *msg, const char *name, struct sl_redis_addr *a)
{
	char buf[4 * SL_REDIS_HOST_MAX], *f[5], *save = NULL;
	int n = 0;

	if (!msg || strlen(msg) >= sizeof(buf))
		return -1;
	strcpy(buf, msg);
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (n == 5)
			return -1;
		f[n++] = t;
	}
	if (n != 5 || strcmp(f[0], name) != 0 || (a->port = port_of(f[4], strlen(f[4]))) < 0)
		return -1;
	return host_into(a, f[3], strlen(f[3]));
}

static int as_int(const redisReply *r, long long *v)
{
	if (!r || r->type != REDIS_REPLY_INTEGER)
		return -1;
	*v = r->integer;
	return 0;
}

int sl_redis_cluster_master(const redisReply *r, unsigned slot, const struct sl_redis_addr *self,
                            struct sl_redis_addr *a)
{
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return -1;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *range = r->element[i], *node;
		long long lo, hi, port;

		/* [start, end, [host, port, id, ...] (the master), replicas...] */
		if (!range || range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
		    as_int(range->element[0], &lo) < 0 || as_int(range->element[1], &hi) < 0)
			continue;
		if ((long long)slot < lo || (long long)slot > hi)
			continue;
		node = range->element[2];
		if (!node || node->type != REDIS_REPLY_ARRAY || node->elements < 2 || !is_str(node->element[0]) ||
		    as_int(node->element[1], &port) < 0 || port < 1 || port > 65535)
			return -1;
		a->port = (int)port;
		/* An empty host, or "?", is the node that answered (Redis 7). */
		if (node->element[0]->len == 0 || strcmp(node->element[0]->str, "?") == 0) {
			if (!self)
				return -1;
			memcpy(a->host, self->host, sizeof(a->host));
			return 0;
		}
		return host_into(a, node->element[0]->str, node->element[0]->len);
	}
	return -1;
}

int sl_redis_role_master(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && is_str(r->element[0]) &&
	       strcmp(r->element[0]->str, "master") == 0;
}

int sl_redis_run_id(const char *info, char id[41])
{
	const char *p = info ? strstr(info, "run_id:") : NULL;

	if (!p || (p != info && p[-1] != '\n'))
		return -1;
	p += 7;
	if (strspn(p, "0123456789abcdef") != 40)
		return -1;
	memcpy(id, p, 40);
	id[40] = '\0';
	return 0;
}
