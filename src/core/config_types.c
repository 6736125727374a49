/*
 * config_types.c - the kinds of configuration value (config_types.h): for each,
 * how text becomes a field, how the field is said again, and a choice's names.
 */
#include "config-internal.h"
#include "sluice/refund.h"
#include "sluice/common.h"
#include "sluice/config_types.h"
#include "sluice/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const meter_names[] = {"connections", "requests", "bytes", "datagrams"};
static const char *const strategy_names[] = {"leaky-bucket", "token-bucket", "fixed-window",
                                              "sliding-window", "session-window"};
static const char *const fallback_names[] = {"local", "open", "closed"};
static const char *const level_names[] = {"error", "warning", "notice", "info", "debug"};
static const char *const mode_names[] = {"enforce", "observe"};
static const char *const scope_names[] = {"machine", "fleet"};
static const char *const switch_names[] = {"off", "on"};

const char *sl_meter_name(unsigned m)
{
	return m < SL_ARRAY_LEN(meter_names) ? meter_names[m] : "?";
}

const char *sl_strategy_name(unsigned s)
{
	return s < SL_ARRAY_LEN(strategy_names) ? strategy_names[s] : "?";
}

const char *sl_fallback_name(int f)
{
	return f >= 0 && (size_t)f < SL_ARRAY_LEN(fallback_names) ? fallback_names[f] : "?";
}

uint64_t sl_key_load(const void *base, const struct sl_key_def *k)
{
	const char *field = (const char *)base + k->offset;

	if (k->size == sizeof(uint64_t)) {
		uint64_t v;

		memcpy(&v, field, sizeof(v));
		return v;
	}
	if (k->size == sizeof(uint32_t)) {
		uint32_t v;

		memcpy(&v, field, sizeof(v));
		return v;
	}
	if (k->size == sizeof(uint8_t))
		return *(const uint8_t *)field;
	/* A field of another shape (a string, a refund list): 1 when any of it is
	 * set, which is what `sluice check` asks of it. */
	for (size_t i = 0; i < k->size; i++)
		if (field[i])
			return 1;
	return 0;
}

void sl_key_store(void *base, const struct sl_key_def *k, uint64_t v)
{
	char *field = (char *)base + k->offset;

	if (k->size == sizeof(uint64_t)) {
		memcpy(field, &v, sizeof(v));
	} else if (k->size == sizeof(uint32_t)) {
		uint32_t x = (uint32_t)v;

		memcpy(field, &x, sizeof(x));
	} else if (k->size == sizeof(uint8_t)) {
		*(uint8_t *)field = (uint8_t)v;
	}
}

/* --- strings --- */

static char *field_str(void *base, const struct sl_key_def *k)
{
	return (char *)base + k->offset;
}

/* A string field as the config says it; `empty` when it holds none. */
static void format_str(const struct sl_key_def *k, const void *base, char *buf, size_t size, const char *empty)
{
	const char *v = (const char *)base + k->offset;

	snprintf(buf, size, "%.*s", (int)k->size, v[0] ? v : empty);
}

static int parse_shm_name(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	if (text[0] != '/' || strchr(text + 1, '/') || text[1] == '\0' || strlen(text) > 250) {
		sl_config_error(cfg, line, "bad %s '%s' (want /name, one slash, at most 250 characters)", k->name, text);
		return -1;
	}
	sl_strlcpy(field_str(base, k), text, k->size);
	return 0;
}

static int parse_path(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	/* An optional path (no default) unset, as `sluice check` says it. */
	if (!k->def && strcmp(text, "none") == 0) {
		field_str(base, k)[0] = '\0';
		return 0;
	}
	if (text[0] == '\0' || sl_strlcpy(field_str(base, k), text, k->size) < 0) {
		sl_config_error(cfg, line, "bad %s '%s' (want a path of at most %u bytes)", k->name, text,
		                (unsigned)k->size - 1);
		return -1;
	}
	return 0;
}

static void format_path(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	format_str(k, base, buf, size, "none");
}

/* state_dir: "auto" kept as written (the daemon decides: quota.h), none as "". */
static int parse_dir(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	if (strcmp(text, "none") == 0) {
		field_str(base, k)[0] = '\0';
		return 0;
	}
	if ((strcmp(text, "auto") != 0 && text[0] != '/') || sl_strlcpy(field_str(base, k), text, k->size) < 0) {
		sl_config_error(cfg, line, "bad %s '%s' (want auto, none or an absolute directory of at most %u bytes)",
		                k->name, text, (unsigned)k->size - 1);
		return -1;
	}
	return 0;
}

static int parse_refund(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	struct sl_refund r;
	char why[160];

	if (sl_refund_parse(text, &r, why, sizeof(why)) != 0) {
		sl_config_error(cfg, line, "bad %s '%s': %s (e.g. refund = 304, 5xx, 429, failed)", k->name, text, why);
		return -1;
	}
	memcpy((char *)base + k->offset, &r, sizeof(r));
	return 0;
}

static void format_refund(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	struct sl_refund r;

	memcpy(&r, (const char *)base + k->offset, sizeof(r));
	sl_refund_format(&r, buf, size);
}

/* Override lines are read apart, each made a section of its own (config.c):
 * this parser meets none. */
static int parse_override(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	(void)base;
	sl_config_error(cfg, line, "%s '%s': not here", k->name, text);
	return -1;
}

static void format_override(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	uint32_t of = (uint32_t)sl_key_load(base, k);

	snprintf(buf, size, "of section %u", of);
}

static int parse_endpoint(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	char err[200] = "";

	if (strcmp(text, "none") == 0) {
		field_str(base, k)[0] = '\0';
		return 0;
	}
	if (sl_endpoint_check(text, err, sizeof(err)) == 0 && sl_strlcpy(field_str(base, k), text, k->size) == 0)
		return 0;
	sl_config_error(cfg, line, "%s: %s", k->name, err[0] ? err : "too long");
	return -1;
}

/* A list of TCP endpoints (Sentinels, Cluster nodes): each HOST:PORT or
 * [IPV6]:PORT, separated by spaces; kept as written, one space between. */
static int parse_endpoints(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	char out[SL_PATH_MAX] = "", *save = NULL;
	size_t used = 0;
	unsigned n = 0;

	if (strcmp(text, "none") == 0) {
		field_str(base, k)[0] = '\0';
		return 0;
	}
	for (char *t = strtok_r(text, " \t,", &save); t; t = strtok_r(NULL, " \t,", &save)) {
		char host[256];
		int port = 0;
		int w;

		if (sl_endpoint_parse(t, host, sizeof(host), &port) < 0 || port == 0) {
			sl_config_error(cfg, line, "%s: '%s': want HOST:PORT or [IPV6]:PORT", k->name, t);
			return -1;
		}
		if (++n > SL_ENDPOINTS_MAX) {
			sl_config_error(cfg, line, "%s: at most %d endpoints", k->name, SL_ENDPOINTS_MAX);
			return -1;
		}
		w = snprintf(out + used, sizeof(out) - used, "%s%s", used ? " " : "", t);
		if (w < 0 || (size_t)w >= sizeof(out) - used || used + (size_t)w >= k->size) {
			sl_config_error(cfg, line, "%s: too long (at most %u bytes)", k->name, (unsigned)k->size - 1);
			return -1;
		}
		used += (size_t)w;
	}
	if (!n) {
		sl_config_error(cfg, line, "%s: want HOST:PORT HOST:PORT ..., or none", k->name);
		return -1;
	}
	memcpy(field_str(base, k), out, used + 1);
	return 0;
}

static int parse_name(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	size_t n = strlen(text);

	/* "" is auto where the key has a default, none where it has not. */
	if (strcmp(text, k->def ? "auto" : "none") == 0) {
		field_str(base, k)[0] = '\0';
		return 0;
	}
	if (n > 0 && n < k->size &&
	    strspn(text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n) {
		memcpy(field_str(base, k), text, n + 1);
		return 0;
	}
	sl_config_error(cfg, line, "bad %s '%s' (letters, digits, '-', '_', '.'; at most %u)", k->name, text,
	                (unsigned)k->size - 1);
	return -1;
}

static void format_name(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	format_str(k, base, buf, size, k->def ? "auto" : "none");
}

/* --- numbers --- */

static int parse_octal(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	char *end;
	unsigned long m = strtoul(text, &end, 8);

	if (*text < '0' || *text > '7' || *end != '\0' || m > k->max) {
		sl_config_error(cfg, line, "bad %s '%s' (want octal permissions such as 0660)", k->name, text);
		return -1;
	}
	sl_key_store(base, k, m);
	return 0;
}

static void format_octal(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	snprintf(buf, size, "%04" PRIo64, sl_key_load(base, k));
}

/* count (1..max), room (auto = 0, or 1..max), pow2 (1..max, rounded up). */
static int parse_count_kind(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	char err[200];
	uint64_t n = 0;

	if (k->type == SL_KT_ROOM && strcmp(text, "auto") == 0) {
		sl_key_store(base, k, 0);
		return 0;
	}
	if (sl_parse_count(text, k->max, &n, err, sizeof(err)) == 0) {
		sl_key_store(base, k, k->type == SL_KT_POW2 ? sl_pow2_at_least(n) : n);
		return 0;
	}
	sl_config_error(cfg, line, "%s: %s%s", k->name, err, k->type == SL_KT_ROOM ? " (or auto)" : "");
	return -1;
}

static void format_count(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	uint64_t v = sl_key_load(base, k);

	if (k->type == SL_KT_ROOM && v == 0)
		snprintf(buf, size, "auto");
	else
		snprintf(buf, size, "%" PRIu64, v);
}

static int parse_duration(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	char err[200];
	int64_t ns;

	if (sl_parse_duration(text, 1, &ns, err, sizeof(err)) == 0) {
		sl_key_store(base, k, (uint64_t)ns);
		return 0;
	}
	sl_config_error(cfg, line, "%s: %s", k->name, err);
	return -1;
}

static void format_duration(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	sl_format_duration((int64_t)sl_key_load(base, k), buf, size);
}

/* A duration kept in microseconds in 32 bits: at most `max` of them; one that is
 * not a whole number of microseconds is refused rather than silently rounded. */
static int parse_micros(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	char err[200];
	int64_t ns;

	if (sl_parse_duration(text, 0, &ns, err, sizeof(err)) < 0) {
		sl_config_error(cfg, line, "%s: %s", k->name, err);
		return -1;
	}
	if (ns % 1000) {
		sl_config_error(cfg, line, "%s: %s: not a whole number of microseconds", k->name, text);
		return -1;
	}
	if (ns / 1000 > (int64_t)k->max) {
		char most[32];

		sl_format_duration((int64_t)k->max * 1000, most, sizeof(most));
		sl_config_error(cfg, line, "%s: %s: at most %s", k->name, text, most);
		return -1;
	}
	sl_key_store(base, k, (uint64_t)(ns / 1000));
	return 0;
}

static void format_micros(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	sl_format_duration((int64_t)sl_key_load(base, k) * 1000, buf, size);
}

static int parse_errno(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	char err[200];
	int e;

	if (sl_parse_errno(text, &e, err, sizeof(err)) == 0) {
		sl_key_store(base, k, (uint64_t)(uint32_t)e);
		return 0;
	}
	sl_config_error(cfg, line, "%s: %s", k->name, err);
	return -1;
}

static void format_errno(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	const struct sl_spec *s = base;
	int e = (int32_t)(uint32_t)sl_key_load(base, k);

	if (e && sl_errno_name(e))
		snprintf(buf, size, "%s", sl_errno_name(e));
	else if (e)
		snprintf(buf, size, "%d", e);
	else /* the call's own default, which depends on what is refused */
		snprintf(buf, size, "%s", s->meter == SL_METER_DATAGRAMS ? "ECONNREFUSED"
		                                                         : "ECONNREFUSED (connect), ECONNRESET (first write)");
}

/* --- choices --- */

int sl_key_choice(enum sl_key_type type, const char *s)
{
	for (unsigned i = 0; (unsigned)type < SL_KT_KINDS && i < sl_key_types[type].nchoices; i++)
		if (strcmp(sl_key_types[type].choices[i], s) == 0)
			return (int)i;
	return -1;
}

const char *const *sl_key_choices(enum sl_key_type type, unsigned *n)
{
	*n = (unsigned)type < SL_KT_KINDS ? sl_key_types[type].nchoices : 0;
	return *n ? sl_key_types[type].choices : NULL;
}

/* A value that must be one of key k's choices; they are listed otherwise. */
static int parse_choice(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	const struct sl_key_type_ops *t = &sl_key_types[k->type];
	char choices[160] = "";
	int v = sl_key_choice(k->type, text);

	if (v >= 0) {
		sl_key_store(base, k, (uint64_t)v);
		return 0;
	}
	for (unsigned i = 0; i < t->nchoices; i++) {
		strncat(choices, t->choices[i], sizeof(choices) - strlen(choices) - 1);
		if (i + 1 < t->nchoices)
			strncat(choices, " | ", sizeof(choices) - strlen(choices) - 1);
	}
	{
		const char *near = sl_nearest_name(text, t->choices, t->nchoices);

		if (near)
			sl_config_error(cfg, line, "bad %s '%s' (did you mean %s? want %s)", k->name, text, near, choices);
		else
			sl_config_error(cfg, line, "bad %s '%s' (want %s)", k->name, text, choices);
	}
	return -1;
}

static void format_choice(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	const struct sl_key_type_ops *t = &sl_key_types[k->type];
	uint64_t v = sl_key_load(base, k);

	snprintf(buf, size, "%s", v < t->nchoices ? t->choices[v] : "?");
}

/* --- a section's own kinds --- */

static int parse_patterns(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	(void)k;
	return sl_config_compile_match(cfg, text, line, base);
}

/* Printed one by one by sl_spec_dump: a match may be long. */
static void format_patterns(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	(void)k, (void)base;
	snprintf(buf, size, "?");
}

static int parse_rate(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	struct sl_spec *s = base;
	char err[200];
	unsigned calendar;

	if (!sl_parse_rate(text, s->meter == SL_METER_BYTES, &s->amount, &s->window_ns, &calendar, err, sizeof(err))) {
		s->calendar = (uint8_t)calendar;
		return 0;
	}
	sl_config_error(cfg, line, "%s: %s", k->name, err);
	return -1;
}

static void format_rate(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	const struct sl_spec *s = base;
	char every[32];

	(void)k;
	sl_format_rate(s->amount, s->window_ns, s->calendar, s->meter == SL_METER_BYTES, buf, size);
	if (s->amount && s->strategy < SL_STRAT_FIXED_WINDOW) {
		sl_format_duration(s->window_ns / (int64_t)s->amount, every, sizeof(every));
		strncat(buf, " (one every ", size - strlen(buf) - 1);
		strncat(buf, every, size - strlen(buf) - 1);
		strncat(buf, ")", size - strlen(buf) - 1);
	}
}

static int parse_per(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base)
{
	char err[200];

	if (sl_parse_per(text, base, err, sizeof(err)) == 0)
		return 0;
	sl_config_error(cfg, line, "%s: %s", k->name, err);
	return -1;
}

static void format_per(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	(void)k;
	sl_format_per(base, buf, size);
}

#define CHOICE(names) {parse_choice, format_choice, names, (unsigned)SL_ARRAY_LEN(names)}

const struct sl_key_type_ops sl_key_types[SL_KT_KINDS] = {
	[SL_KT_SHM_NAME] = {parse_shm_name, format_path, NULL, 0},
	[SL_KT_PATH] = {parse_path, format_path, NULL, 0},
	[SL_KT_OCTAL] = {parse_octal, format_octal, NULL, 0},
	[SL_KT_FALLBACK] = CHOICE(fallback_names),
	[SL_KT_LOG_LEVEL] = CHOICE(level_names),
	[SL_KT_METER] = CHOICE(meter_names),
	[SL_KT_STRATEGY] = CHOICE(strategy_names),
	[SL_KT_MODE] = CHOICE(mode_names),
	[SL_KT_PATTERNS] = {parse_patterns, format_patterns, NULL, 0},
	[SL_KT_RATE] = {parse_rate, format_rate, NULL, 0},
	[SL_KT_COUNT] = {parse_count_kind, format_count, NULL, 0},
	[SL_KT_DURATION] = {parse_duration, format_duration, NULL, 0},
	[SL_KT_MICROS] = {parse_micros, format_micros, NULL, 0},
	[SL_KT_ERRNO] = {parse_errno, format_errno, NULL, 0},
	[SL_KT_PER] = {parse_per, format_per, NULL, 0},
	[SL_KT_ROOM] = {parse_count_kind, format_count, NULL, 0},
	[SL_KT_POW2] = {parse_count_kind, format_count, NULL, 0},
	[SL_KT_ENDPOINT] = {parse_endpoint, format_path, NULL, 0},
	[SL_KT_ENDPOINTS] = {parse_endpoints, format_path, NULL, 0},
	[SL_KT_NAME] = {parse_name, format_name, NULL, 0},
	[SL_KT_SCOPE] = CHOICE(scope_names),
	[SL_KT_SWITCH] = CHOICE(switch_names),
	[SL_KT_DIR] = {parse_dir, format_path, NULL, 0},
	[SL_KT_REFUND] = {parse_refund, format_refund, NULL, 0},
	[SL_KT_OVERRIDE] = {parse_override, format_override, NULL, 0},
};

/* --- per: how a section's keys are made --- */

/* per = none | host[:port] | address[/N[/M]][:port].  One /N applies to IPv4 when N
 * is at most 32 and to IPv6 always; /N/M gives IPv4 N and IPv6 M. */
int sl_parse_per(const char *text, struct sl_spec *s, char *err, size_t errlen)
{
	const char *p = text;
	unsigned v4 = 32, v6 = 128;
	int port = 0;

	if (strcmp(text, "none") == 0) {
		s->per = SL_PER_NONE;
		s->per_prefix4 = s->per_prefix6 = 0;
		return 0;
	}
	if (strncmp(p, "host", 4) == 0 && (p[4] == '\0' || p[4] == ':')) {
		p += 4;
		if (*p == ':') {
			if (strcmp(p, ":port") != 0)
				goto bad;
			port = 1;
		}
		s->per = port ? SL_PER_HOST_PORT : SL_PER_HOST;
		s->per_prefix4 = 32;
		s->per_prefix6 = 128;
		return 0;
	}
	if (strncmp(p, "address", 7) != 0)
		goto bad;
	p += 7;
	for (int n = 0; *p == '/' && n < 2; n++) {
		char *end;
		unsigned long bits;

		if (p[1] < '0' || p[1] > '9')
			goto bad;
		bits = strtoul(p + 1, &end, 10);
		if (n == 0) {
			if (bits < 1 || bits > 128) {
				snprintf(err, errlen, "prefix /%lu: want 1-32 (IPv4) or 1-128 (IPv6)", bits);
				return -1;
			}
			v6 = (unsigned)bits;
			if (bits <= 32)
				v4 = (unsigned)bits;
		} else {
			if (v6 > 32 || bits < 1 || bits > 128) {
				snprintf(err, errlen, "address/N/M: want N 1-32 (IPv4) and M 1-128 (IPv6)");
				return -1;
			}
			v6 = (unsigned)bits;
		}
		p = end;
	}
	if (*p == ':') {
		if (strcmp(p, ":port") != 0)
			goto bad;
		port = 1;
	} else if (*p != '\0') {
		goto bad;
	}
	s->per = port ? SL_PER_ADDRESS_PORT : SL_PER_ADDRESS;
	s->per_prefix4 = (uint8_t)v4;
	s->per_prefix6 = (uint8_t)v6;
	return 0;
bad: {
	static const char *const words[] = {"none", "host", "host:port", "address", "address:port"};
	const char *near = sl_nearest_name(text, words, (unsigned)SL_ARRAY_LEN(words));
	char hint[64] = "";

	if (near)
		snprintf(hint, sizeof(hint), " (did you mean '%s'?)", near);
	snprintf(err, errlen, "'%s'%s: want none, host, host:port, address, address/N, address/N/M "
	         "or address...:port", text, hint);
	return -1;
}
}

int sl_format_per(const struct sl_spec *s, char *buf, size_t size)
{
	const char *port = s->per == SL_PER_HOST_PORT || s->per == SL_PER_ADDRESS_PORT ? ":port" : "";

	switch (s->per) {
	case SL_PER_HOST:
	case SL_PER_HOST_PORT:
		return snprintf(buf, size, "host%s", port);
	case SL_PER_ADDRESS:
	case SL_PER_ADDRESS_PORT:
		if (s->per_prefix4 == 32 && s->per_prefix6 == 128)
			return snprintf(buf, size, "address%s", port);
		if (s->per_prefix6 == s->per_prefix4 || (s->per_prefix4 == 32 && s->per_prefix6 > 32))
			return snprintf(buf, size, "address/%u%s", s->per_prefix6, port);
		return snprintf(buf, size, "address/%u/%u%s", s->per_prefix4, s->per_prefix6, port);
	default:
		return snprintf(buf, size, "none");
	}
}
