/*
 * Printing a configuration: its errors, its compiled form (`sluice check`) and the
 * list of keys (`sluice check --keys`), all from the key table of
 * config_keys.def.  Program-only: never linked into the shim.
 */
#include "sluice/common.h"
#include "sluice/config.h"
#include "sluice/config_keys.h"
#include "sluice/config_types.h"
#include "sluice/match.h"
#include "sluice/units.h"

#include <inttypes.h>
#include <string.h>

void sl_config_print_errors(const struct sl_config *cfg, FILE *out)
{
	for (unsigned i = 0; i < SL_MIN(cfg->nerrors, SL_CONFIG_MAX_ERRORS); i++)
		fprintf(out, "%s\n", cfg->errors[i]);
	if (cfg->nerrors > SL_CONFIG_MAX_ERRORS)
		fprintf(out, "%s: ... and %u more errors\n", cfg->path,
		        cfg->nerrors - SL_CONFIG_MAX_ERRORS);
}

/* Key k's value in `base` (struct sl_global or struct sl_spec), as the config
 * would say it, by its type's printer (config_types.c). */
static void format_value(const struct sl_key_def *k, const void *base, char *buf, size_t size)
{
	sl_key_types[k->type].format(k, base, buf, size);
}

/* Whether `sluice check` shows limit key k for section s: it applies to the
 * section's strategy and meter, what it needs is set, and (for keys only shown
 * when set) it is. */
static int shown(const struct sl_key_def *k, const struct sl_spec *s)
{
	if (!(k->strategies & SL_BIT(s->strategy % 32)) || !(k->meters & SL_BIT(s->meter % 32)))
		return 0;
	if (k->needs != SL_NEEDS_NONE && !sl_key_load(s, &sl_keys[k->needs]))
		return 0;
	if (k->type == SL_KT_OVERRIDE)
		return 0; /* said in the section's heading (sl_config_dump) */
	return !(k->flags & SL_KF_IF_SET) || sl_key_load(s, k) != 0;
}

/* The patterns of a match, as the config would list them. */
static void print_patterns(const struct sl_pattern *pats, uint32_t n, FILE *out)
{
	for (uint32_t i = 0; pats && i < n; i++) {
		char one[SL_HOST_MAX + 32];

		sl_pattern_format(&pats[i], one, sizeof(one));
		fprintf(out, "%s%s", i ? ", " : "", one);
	}
}

void sl_spec_dump(const struct sl_spec *s, const struct sl_pattern *pats, const char *indent,
                  FILE *out)
{
	char value[512];

	for (int k = 0; k < SL_KEY_COUNT; k++) {
		if (sl_keys[k].global || !shown(&sl_keys[k], s))
			continue;
		fprintf(out, "%s%-11s ", indent, sl_keys[k].name);
		if (sl_keys[k].type == SL_KT_PATTERNS) {
			print_patterns(pats, s->npatterns, out);
			fputc('\n', out);
			continue;
		}
		format_value(&sl_keys[k], s, value, sizeof(value));
		fprintf(out, "%s\n", value);
	}
}

/* The longest key name (of [sluice]'s, or of all): the column the values start
 * after. */
static int name_width(int global_only)
{
	size_t w = 0;

	for (int k = 0; k < SL_KEY_COUNT; k++)
		if (!global_only || sl_keys[k].global)
			w = SL_MAX(w, strlen(sl_keys[k].name));
	return (int)w;
}

void sl_config_dump(const struct sl_config *cfg, FILE *out)
{
	char value[SL_PATH_MAX + 16];
	int w = name_width(1);

	fprintf(out, "%s: OK, %u section%s%s\n", cfg->path, cfg->nsections, cfg->nsections == 1 ? "" : "s",
	        cfg->nsections ? "" : " - nothing is shaped until a [section] with a match is added");
	fprintf(out, "[sluice]\n");
	for (int k = 0; k < SL_KEY_COUNT; k++) {
		if (!sl_keys[k].global)
			continue;
		format_value(&sl_keys[k], &cfg->global, value, sizeof(value));
		fprintf(out, "  %-*s %s\n", w, sl_keys[k].name, value);
	}
	for (unsigned i = 0; i < cfg->nsections; i++) {
		uint32_t of = cfg->sections[i].spec.override_of;

		if (of && of <= cfg->nsections)
			fprintf(out, "[%s]  (line %d: an override of [%s], for the keys its match takes)\n",
			        cfg->sections[i].spec.name, cfg->sections[i].line, cfg->sections[of - 1].spec.name);
		else
			fprintf(out, "[%s]  (line %d)\n", cfg->sections[i].spec.name, cfg->sections[i].line);
		sl_spec_dump(&cfg->sections[i].spec, sl_config_patterns(cfg, &cfg->sections[i].spec), "  ", out);
	}
}

/* "leaky-bucket|token-bucket": the values of a choice type in `mask`. */
static void choice_list(enum sl_key_type type, uint32_t mask, char *buf, size_t size)
{
	unsigned n;
	const char *const *names = sl_key_choices(type, &n);

	buf[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		if (mask & SL_BIT(i))
			snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? "|" : "", names[i]);
}

/* Where a limit key may be given, for --keys: "" when anywhere. */
static void applies_to(const struct sl_key_def *k, char *buf, size_t size)
{
	char list[96];

	buf[0] = '\0';
	if (k->strategies != SL_FOR_ANY) {
		choice_list(SL_KT_STRATEGY, k->strategies, list, sizeof(list));
		snprintf(buf + strlen(buf), size - strlen(buf), "strategy %s", list);
	}
	if (k->meters != SL_FOR_ANY) {
		choice_list(SL_KT_METER, k->meters, list, sizeof(list));
		snprintf(buf + strlen(buf), size - strlen(buf), "%smeter %s", buf[0] ? ", " : "", list);
	}
	if (k->needs != SL_NEEDS_NONE)
		snprintf(buf + strlen(buf), size - strlen(buf), "%swith %s", buf[0] ? ", " : "",
		         sl_keys[k->needs].name);
}

const char *sl_at_reload_name(enum sl_at_reload r)
{
	return r == SL_RELOAD_RESTART ? "at restart" : r == SL_RELOAD_GROWS ? "larger at once, smaller at restart"
	                                                                     : "applied";
}

size_t sl_config_restart_keys(const struct sl_global *was, const struct sl_global *now, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int k = 0; k < SL_KEY_COUNT; k++) {
		char a[SL_PATH_MAX + 64], b[SL_PATH_MAX + 64];

		if (!sl_keys[k].global || sl_keys[k].at_reload != SL_RELOAD_RESTART)
			continue;
		format_value(&sl_keys[k], was, a, sizeof(a));
		format_value(&sl_keys[k], now, b, sizeof(b));
		if (strcmp(a, b) != 0) {
			snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", n ? ", " : "", sl_keys[k].name);
			n++;
		}
	}
	return n;
}

void sl_config_list_keys(FILE *out)
{
	int w = name_width(0);

	for (int k = 0; k < SL_KEY_COUNT; k++) {
		const struct sl_key_def *kd = &sl_keys[k];
		char where[160];

		applies_to(kd, where, sizeof(where));
		if (kd->global)
			snprintf(where, sizeof(where), "at reload: %s", sl_at_reload_name(kd->at_reload));
		fprintf(out, "%-9s %-*s default %-28s %s%s%s%s\n", kd->global ? "[sluice]" : "[limit]", w,
		        kd->name, kd->def ? kd->def : kd->def_doc ? kd->def_doc : "-", kd->help,
		        where[0] ? " (" : "", where, where[0] ? ")" : "");
	}
}
