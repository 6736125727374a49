#include "sluice/units.h"
#include "sluice/calendar.h"
#include "sluice/config.h"
#include "sluice/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct unit {
	const char *suffix;
	int64_t ns;
};

/* Longest suffix first so "ms" wins over "m". */
static const struct unit time_units[] = {
	{"ms", SL_NS_PER_MS}, {"us", SL_NS_PER_US}, {"s", SL_NS_PER_S},
	{"m", 60 * SL_NS_PER_S}, {"h", 3600 * SL_NS_PER_S}, {"d", 86400 * SL_NS_PER_S},
};

/* Durations up to a year are plenty and keep every product below 2^63. */
#define MAX_DURATION_NS (366LL * 86400 * SL_NS_PER_S)

static int reject(char *err, size_t errlen, const char *what, const char *s)
{
	snprintf(err, errlen, "%s '%s'", what, s);
	return -EINVAL;
}

static int parse_number_unit(const char *s, int need_unit, int64_t *ns)
{
	char *end;
	double v;

	if (!((*s >= '0' && *s <= '9') || *s == '.'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	if (*end == '\0') {
		if (need_unit && v != 0)
			return -EINVAL;
		*ns = (int64_t)v; /* only a bare 0 comes through here */
		return 0;
	}
	for (size_t i = 0; i < SL_ARRAY_LEN(time_units); i++) {
		if (strcmp(end, time_units[i].suffix) == 0) {
			double total = v * (double)time_units[i].ns;

			if (total > (double)MAX_DURATION_NS)
				return -ERANGE;
			*ns = (int64_t)(total + 0.5);
			return 0;
		}
	}
	return -EINVAL;
}

int sl_parse_duration(const char *s, int allow_forever, int64_t *ns, char *err, size_t errlen)
{
	int rc;

	if (allow_forever && strcmp(s, "forever") == 0) {
		*ns = -1;
		return 0;
	}
	rc = parse_number_unit(s, 1, ns);
	if (rc == -ERANGE)
		return reject(err, errlen, "duration longer than a year:", s);
	if (rc < 0)
		return reject(err, errlen, allow_forever
		              ? "bad duration (want e.g. 250ms, 30s, 10m, 1h, 0 or forever):"
		              : "bad duration (want e.g. 250ms, 30s, 10m, 1h):", s);
	return 0;
}

int sl_parse_count(const char *s, uint64_t max, uint64_t *out, char *err, size_t errlen)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return reject(err, errlen, "not a positive integer:", s);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end != '\0' || v == 0)
		return reject(err, errlen, "not a positive integer:", s);
	if (v > max) {
		snprintf(err, errlen, "'%s' is larger than %llu", s, (unsigned long long)max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int sl_parse_rate(const char *s, int allow_size, uint64_t *amount, int64_t *window_ns,
                  unsigned *calendar, char *err, size_t errlen)
{
	char num[32];
	const char *slash = strchr(s, '/');
	size_t n;
	uint64_t mult = 1, v;
	int64_t w;

	if (!slash || slash == s)
		return reject(err, errlen, "bad rate (want AMOUNT/WINDOW, e.g. 10/s, 5000/h):", s);
	n = (size_t)(slash - s);
	if (n >= sizeof(num))
		return reject(err, errlen, "bad rate amount in", s);
	memcpy(num, s, n);
	num[n] = '\0';
	switch (num[n - 1]) {
	case 'K': case 'k': mult = 1024; break;
	case 'M': mult = 1024 * 1024; break;
	case 'G': case 'g': mult = 1024ULL * 1024 * 1024; break;
	}
	if (mult != 1) {
		if (!allow_size)
			return reject(err, errlen, "K/M/G amounts are for meter = bytes only:", s);
		num[n - 1] = '\0';
	}
	if (sl_parse_count(num, (1ULL << 40) / mult, &v, err, errlen) < 0) {
		char why[160];

		/* Say why: a count of at least one request (or byte) a window. */
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "bad rate amount in '%s': %s%s", s, why,
		         strncmp(num, "0", 2) == 0 ? " (a rate lets at least one through each window; "
		                                     "to refuse everything, give max_wait = 0 and a rate)"
		                                   : "");
		return -EINVAL;
	}
	/* WINDOW is a unit ("s") or a number and unit ("5m", "250ms"). */
	{
		char win[32];
		const char *ws = slash + 1;

		if (strlen(ws) + 2 > sizeof(win))
			return reject(err, errlen, "bad rate window in", s);
		/* A calendar unit ("mo", or "1mo"): one week, month or year, no more. */
		*calendar = SL_CAL_NONE;
		for (unsigned c = SL_CAL_WEEK; c <= SL_CAL_YEAR; c++) {
			const char *u = sl_calendar_suffix(c);
			size_t ul = strlen(u), wl = strlen(ws);

			if (wl < ul || strcmp(ws + wl - ul, u) != 0 || (wl > ul && !(ws[0] >= '0' && ws[0] <= '9')))
				continue;
			if (wl > ul && !(wl == ul + 1 && ws[0] == '1'))
				return reject(err, errlen, "a calendar window is one week, month or year (/w, /mo, /y):", s);
			*calendar = c;
		}
		if (*calendar) {
			*amount = v * mult;
			*window_ns = sl_calendar_nominal_ns(*calendar);
			return 0;
		}
		if (*ws >= 'a' && *ws <= 'z')
			snprintf(win, sizeof(win), "1%s", ws);
		else
			snprintf(win, sizeof(win), "%s", ws);
		if (parse_number_unit(win, 1, &w) < 0 || w <= 0)
			return reject(err, errlen, "bad rate window (want s, m, h, d, 5m, 250ms, w, mo, y) in", s);
	}
	if (w / (int64_t)(v * mult) < 1 && mult == 1)
		return reject(err, errlen, "rate faster than one per nanosecond:", s);
	*amount = v * mult;
	*window_ns = w;
	return 0;
}

struct errno_name {
	const char *name;
	int value;
};

static const struct errno_name errno_names[] = {
	{"ECONNREFUSED", ECONNREFUSED}, {"ECONNRESET", ECONNRESET},
	{"ECONNABORTED", ECONNABORTED}, {"ETIMEDOUT", ETIMEDOUT},
	{"EAGAIN", EAGAIN},             {"EWOULDBLOCK", EWOULDBLOCK},
	{"EHOSTUNREACH", EHOSTUNREACH}, {"ENETUNREACH", ENETUNREACH},
	{"EACCES", EACCES},             {"EPERM", EPERM},
	{"ENOBUFS", ENOBUFS},           {"EPIPE", EPIPE},
	{"EBUSY", EBUSY},               {"EADDRNOTAVAIL", EADDRNOTAVAIL},
	{"ENETDOWN", ENETDOWN},         {"EINTR", EINTR},
};

int sl_endpoint_parse(const char *s, char *host, size_t hostlen, int *port)
{
	const char *colon, *h = s;
	size_t n;
	char *end;
	long p;

	if (s[0] == '/') {
		*port = 0;
		return sl_strlcpy(host, s, hostlen) == 0 ? 0 : -EINVAL;
	}
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		h = s + 1;
		n = (size_t)(close - h);
		colon = close + 1;
	} else {
		if (!(colon = strrchr(s, ':')) || strchr(s, ':') != colon)
			return -EINVAL;
		n = (size_t)(colon - s);
	}
	if (n == 0 || n >= hostlen || colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	p = strtol(colon + 1, &end, 10);
	if (*end || p < 1 || p > 65535)
		return -EINVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (int)p;
	return 0;
}

int sl_endpoint_check(const char *s, char *err, size_t errlen)
{
	char host[256];
	int port;

	if (sl_endpoint_parse(s, host, sizeof(host), &port) == 0)
		return 0;
	snprintf(err, errlen, "'%s': want HOST:PORT, [IPV6]:PORT or a unix socket's absolute path", s);
	return -EINVAL;
}

int sl_parse_errno(const char *s, int *out, char *err, size_t errlen)
{
	char *end;
	long v;

	for (size_t i = 0; i < SL_ARRAY_LEN(errno_names); i++) {
		if (strcmp(s, errno_names[i].name) == 0) {
			*out = errno_names[i].value;
			return 0;
		}
	}
	v = strtol(s, &end, 10);
	if (*s >= '1' && *s <= '9' && *end == '\0' && v > 0 && v < 4096) {
		*out = (int)v;
		return 0;
	}
	{
		const char *near = NULL;
		unsigned best = 3; /* at most two edits away */

		for (size_t i = 0; i < SL_ARRAY_LEN(errno_names); i++) {
			unsigned d = sl_edit_distance(s, errno_names[i].name);

			if (d < best) {
				best = d;
				near = errno_names[i].name;
			}
		}
		if (near) {
			snprintf(err, errlen, "unknown errno name '%s' (did you mean %s?)", s, near);
			return -EINVAL;
		}
	}
	return reject(err, errlen, "unknown errno name (want e.g. ECONNREFUSED, ETIMEDOUT):", s);
}

const char *sl_errno_name(int e)
{
	for (size_t i = 0; i < SL_ARRAY_LEN(errno_names); i++)
		if (errno_names[i].value == e)
			return errno_names[i].name;
	return NULL;
}

int sl_format_duration(int64_t ns, char *buf, size_t size)
{
	static const struct unit out[] = {
		{"d", 86400 * SL_NS_PER_S}, {"h", 3600 * SL_NS_PER_S}, {"m", 60 * SL_NS_PER_S},
		{"s", SL_NS_PER_S}, {"ms", SL_NS_PER_MS}, {"us", SL_NS_PER_US},
	};

	if (ns < 0)
		return snprintf(buf, size, "forever");
	if (ns == 0)
		return snprintf(buf, size, "0");
	for (size_t i = 0; i < SL_ARRAY_LEN(out); i++)
		if (ns % out[i].ns == 0)
			return snprintf(buf, size, "%lld%s", (long long)(ns / out[i].ns), out[i].suffix);
	return snprintf(buf, size, "%lldns", (long long)ns);
}

int sl_format_rate(uint64_t amount, int64_t window_ns, unsigned calendar, int bytes, char *buf, size_t size)
{
	char win[32], n[32];
	const char *suffix = "KMG";
	int k = -1;

	if (sl_calendar_suffix(calendar))
		snprintf(win, sizeof(win), "1%s", sl_calendar_suffix(calendar));
	else
		sl_format_duration(window_ns, win, sizeof(win));
	/* Byte amounts come back in the K/M/G they were most likely written in. */
	while (bytes && k < 2 && amount >= 1024 && amount % 1024 == 0) {
		amount /= 1024;
		k++;
	}
	if (k >= 0)
		snprintf(n, sizeof(n), "%llu%c", (unsigned long long)amount, suffix[k]);
	else
		snprintf(n, sizeof(n), "%llu", (unsigned long long)amount);
	/* "1s" reads better as "s", as in the config's own "10/s". */
	if (win[0] == '1' && win[1] >= 'a' && win[1] <= 'z' && strcmp(win + 1, "us") != 0)
		return snprintf(buf, size, "%s/%s", n, win + 1);
	return snprintf(buf, size, "%s/%s", n, win);
}
