/*
 * config_tables.c - the config's growing tables, lent to the parser (config.c) and
 * the key types (config_types.c) alike: errors added at a line, a match list
 * compiled into the pattern table, room grown.  It calls neither of them, so they
 * need not call each other (config-internal.h).
 */
#include "config-internal.h"
#include "sluice/common.h"
#include "sluice/match.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_config_error(struct sl_config *cfg, int line, const char *fmt, ...)
{
	char msg[SL_CONFIG_ERROR_LEN], full[SL_CONFIG_ERROR_LEN];
	va_list ap;

	if (cfg->nerrors++ >= SL_CONFIG_MAX_ERRORS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		snprintf(full, sizeof(full), "%s:%d: %s", cfg->path, line, msg);
	else
		snprintf(full, sizeof(full), "%s: %s", cfg->path, msg);
	memcpy(cfg->errors[cfg->nerrors - 1], full, sizeof(full));
	cfg->error_lines[cfg->nerrors - 1] = line;
}

/* Room for one more element in a growing array of `size`-byte elements.  0, or -1
 * when it cannot grow (at `max`, or out of memory). */
int sl_config_grow(void **array, unsigned *cap, unsigned n, size_t size, unsigned max)
{
	unsigned want;
	void *p;

	if (n < *cap)
		return 0;
	if (n >= max)
		return -1;
	want = *cap ? (unsigned)SL_MIN((uint64_t)*cap * 2, (uint64_t)max) : 16;
	if (!(p = realloc(*array, (size_t)want * size)))
		return -1;
	*array = p;
	*cap = want;
	return 0;
}

/* match: every pattern of the (space- or comma-separated) list, appended to the
 * config's pattern table; `text` is cut up. */
int sl_config_compile_match(struct sl_config *cfg, char *text, int line, struct sl_spec *s)
{
	char *save = NULL, *tok;
	unsigned before = cfg->nerrors;

	s->pattern_first = cfg->npatterns;
	s->npatterns = 0;
	for (tok = strtok_r(text, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		char err[200];

		if (sl_config_grow((void **)&cfg->patterns, &cfg->patterns_cap, cfg->npatterns, sizeof(*cfg->patterns),
		         SL_PATTERNS_MAX) < 0) {
			sl_config_error(cfg, line, cfg->npatterns >= SL_PATTERNS_MAX
			                     ? "too many patterns (a config holds at most %u)" : "out of memory (%u patterns)",
			          (unsigned)SL_PATTERNS_MAX);
			return -1;
		}
		if (sl_pattern_parse(&cfg->patterns[cfg->npatterns], tok, err, sizeof(err)) < 0) {
			sl_config_error(cfg, line, "match: %s", err);
		} else {
			cfg->npatterns++;
			s->npatterns++;
		}
	}
	if (s->npatterns == 0 && cfg->nerrors == before)
		sl_config_error(cfg, line, "match has no patterns");
	return cfg->nerrors == before ? 0 : -1;
}
