/* Reading DNS messages: see sluice/dnsmsg.h. */
#include "sluice/dnsmsg.h"

#include <ctype.h>
#include <string.h>
#include <sys/socket.h>

#define HEADER 12
#define POINTERS_MAX 16 /* a name's compression pointers followed, at most */

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The name at *at: into name[size] when name is not NULL; *at moved past it
 * (past its first pointer, where one is).  0, or -1. */
static int read_name(const uint8_t *msg, size_t len, size_t *at, char *name, size_t size)
{
	size_t pos = *at, out = 0;
	int jumps = 0, jumped = 0;

	for (;;) {
		if (pos >= len)
			return -1;
		uint8_t n = msg[pos];

		if ((n & 0xC0) == 0xC0) {
			if (pos + 1 >= len || ++jumps > POINTERS_MAX)
				return -1;
			if (!jumped)
				*at = pos + 2;
			jumped = 1;
			pos = (size_t)(n & 0x3F) << 8 | msg[pos + 1];
			continue;
		}
		if (n & 0xC0)
			return -1; /* the extended label types: not in use */
		if (n == 0) {
			if (!jumped)
				*at = pos + 1;
			break;
		}
		if (pos + 1 + n > len)
			return -1;
		if (name) {
			if (out + n + 2 > size)
				return -1;
			if (out)
				name[out++] = '.';
			for (size_t i = 0; i < n; i++)
				name[out++] = (char)tolower(msg[pos + 1 + i]);
		}
		pos += 1 + (size_t)n;
	}
	if (name) {
		if (!size)
			return -1;
		name[out] = '\0';
	}
	return 0;
}

/* Past the header and the question section; *at after it. */
static int questions(const uint8_t *msg, size_t len, char *name, size_t size, size_t *at)
{
	unsigned qd;

	if (len < HEADER || (qd = be16(msg + 4)) < 1)
		return -1;
	*at = HEADER;
	for (unsigned i = 0; i < qd; i++) {
		if (read_name(msg, len, at, i == 0 ? name : NULL, size) < 0 || *at + 4 > len)
			return -1;
		*at += 4; /* type, class */
	}
	return 0;
}

int sl_dns_question(const uint8_t *msg, size_t len, char *name, size_t size)
{
	size_t at;

	return questions(msg, len, name, size, &at);
}

int sl_dns_answer_addrs(const uint8_t *msg, size_t len, char *name, size_t size, struct sl_dns_addr *out,
                        int max)
{
	size_t at;
	unsigned an;
	int k = 0;

	if (len < HEADER || !(msg[2] & 0x80) || questions(msg, len, name, size, &at) < 0)
		return -1;
	an = be16(msg + 6);
	for (unsigned i = 0; i < an; i++) {
		uint16_t type, rdlen;

		if (read_name(msg, len, &at, NULL, 0) < 0 || at + 10 > len)
			return k;
		type = be16(msg + at);
		rdlen = be16(msg + at + 8);
		at += 10;
		if (at + rdlen > len)
			return k;
		if (k < max && ((type == 1 && rdlen == 4) || (type == 28 && rdlen == 16))) {
			out[k].family = type == 1 ? AF_INET : AF_INET6;
			memset(out[k].addr, 0, sizeof(out[k].addr));
			memcpy(out[k].addr, msg + at, rdlen);
			k++;
		}
		at += rdlen;
	}
	return k;
}
