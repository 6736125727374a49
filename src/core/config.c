#include "config-internal.h"
#include "sluice/config.h"
#include "sluice/config_keys.h"
#include "sluice/config_types.h"
#include "sluice/common.h"
#include "sluice/match.h"
#include "sluice/sys.h"
#include "sluice/units.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The key table, from config_keys.def. */
#define FIELD_OF(type, field) (uint16_t)offsetof(type, field), (uint16_t)sizeof(((type *)0)->field)
const struct sl_key_def sl_keys[SL_KEY_COUNT] = {
/* A global with no default is unset unless given: "none" says so in --keys. */
#define SL_GLOBAL(name, type, field, max, def, reload, help) \
	[SL_KEY_##name] = {#name, 1, type, FIELD_OF(struct sl_global, field), max, def, (def) ? NULL : "none", 0, \
	                   SL_FOR_ANY, SL_FOR_ANY, SL_NEEDS_NONE, NULL, help, reload},
#define SL_LIMIT(name, type, field, max, def, doc, flags, strats, meters, needs, why, help) \
	[SL_KEY_##name] = {#name, 0, type, FIELD_OF(struct sl_spec, field), max, def, doc, flags, \
	                   strats, meters, needs, why, help, SL_RELOAD_APPLIED},
#include "sluice/config_keys.def"
#undef SL_GLOBAL
#undef SL_LIMIT
};

#define RAW_MAX 4096 /* a value (match's, of any length, is kept apart: match_text) */
#define OVERRIDES_MAX 64   /* override lines in one section */
#define OVERRIDE_TEXT 512  /* the longest override line's value */

/* A key's text as written, kept until the section is compiled. */
struct raw_value {
	int line; /* 0 = not given */
	char text[RAW_MAX];
};

/* The names of the sections read so far, hashed, so a duplicate is found without
 * comparing each new name with every earlier one. */
struct name_set {
	uint32_t *slot; /* section index + 1; 0: free */
	uint32_t cap;   /* a power of two, at least twice the names */
};

struct parse_state {
	struct sl_config *cfg;
	const char *text; /* remaining input */
	int line;      /* line number of the line inih is processing */
	int indented;  /* that line started with white space (a continuation) */
	int in_global; /* current section is [sluice] */
	int in_section; /* current section is a limit section */
	int skip;      /* current section is a duplicate or has a bad name */
	int last_key;  /* key of the previous key line, for continuations; -1 none */
	int truncated; /* the line did not fit inih's buffer */
	int had_key;   /* a key line was seen in this section: indented lines continue it */
	int header_line;
	char section[SL_SECTION_NAME_MAX + 32];
	struct raw_value raw[SL_KEY_COUNT];
	unsigned char too_long[SL_KEY_COUNT]; /* given on a line too long to read: its
	                                        * value is the fault, not its absence */
	char *match_text; /* match's value with its continuation lines (malloc'd) */
	size_t match_len, match_cap;
	struct name_set names;
	/* The current section's override lines (malloc'd, OVERRIDES_MAX at most):
	 * each made a section of its own once the section is (make_overrides). */
	struct override_line {
		int line;
		char text[OVERRIDE_TEXT];
	} *overrides;
	unsigned noverrides;
};

/* The valid key of the given scope nearest to `name`. */
static const char *nearest_key(const char *name, int global)
{
	const char *best = NULL;
	unsigned best_d = ~0u;

	for (int k = 0; k < SL_KEY_COUNT; k++) {
		unsigned d;

		if (sl_keys[k].global != global)
			continue;
		d = sl_edit_distance(name, sl_keys[k].name);
		if (d < best_d) {
			best_d = d;
			best = sl_keys[k].name;
		}
	}
	return best;
}

static int find_key(const char *name, int global)
{
	for (int k = 0; k < SL_KEY_COUNT; k++)
		if (sl_keys[k].global == global && strcmp(sl_keys[k].name, name) == 0)
			return k;
	return -1;
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* The section named `name` among those read (index), or -1. */
static int names_find(const struct parse_state *ps, const char *name)
{
	const struct name_set *n = &ps->names;

	if (!n->cap)
		return -1;
	for (uint32_t i = name_hash(name) & (n->cap - 1); n->slot[i]; i = (i + 1) & (n->cap - 1))
		if (strcmp(ps->cfg->sections[n->slot[i] - 1].spec.name, name) == 0)
			return (int)n->slot[i] - 1;
	return -1;
}

/* Remember section j's name.  0, or -1 out of memory. */
static int names_add(struct parse_state *ps, unsigned j)
{
	struct name_set *n = &ps->names;

	if ((uint64_t)(j + 1) * 2 > n->cap) {
		uint32_t cap = n->cap ? n->cap * 2 : 256;
		uint32_t *slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return -1;
		for (uint32_t i = 0; i < n->cap; i++) {
			uint32_t k;

			if (!n->slot[i])
				continue;
			for (k = name_hash(ps->cfg->sections[n->slot[i] - 1].spec.name) & (cap - 1); slot[k];
			     k = (k + 1) & (cap - 1))
				;
			slot[k] = n->slot[i];
		}
		free(n->slot);
		n->slot = slot;
		n->cap = cap;
	}
	{
		uint32_t i = name_hash(ps->cfg->sections[j].spec.name) & (n->cap - 1);

		while (n->slot[i])
			i = (i + 1) & (n->cap - 1);
		n->slot[i] = j + 1;
	}
	return 0;
}

void sl_config_free(struct sl_config *cfg)
{
	free(cfg->sections);
	free(cfg->patterns);
	cfg->sections = NULL;
	cfg->patterns = NULL;
	cfg->nsections = cfg->sections_cap = 0;
	cfg->npatterns = cfg->patterns_cap = 0;
}

const struct sl_pattern *sl_config_patterns(const struct sl_config *cfg, const struct sl_spec *s)
{
	if (!s->npatterns || s->pattern_first >= cfg->npatterns ||
	    s->npatterns > cfg->npatterns - s->pattern_first)
		return NULL;
	return cfg->patterns + s->pattern_first;
}

/* Key k's value `text` (which may be cut up) into `base`, the struct sl_global or
 * struct sl_spec its field belongs to, by its type's parser (config_types.c); an
 * error is reported at `line`.  0 or -1. */
static int parse_value(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line,
                       void *base)
{
	return sl_key_types[k->type].parse(cfg, k, text, line, base);
}

/* A key's default, through its own parser (config_keys.def gives it as text). */
static void apply_default(struct sl_config *cfg, const struct sl_key_def *k, void *base)
{
	char text[RAW_MAX];

	if (!k->def)
		return;
	sl_strlcpy(text, k->def, sizeof(text));
	parse_value(cfg, k, text, 0, base);
}

void sl_config_defaults(struct sl_config *cfg)
{
	memset(&cfg->global, 0, sizeof(cfg->global));
	for (int k = 0; k < SL_KEY_COUNT; k++)
		if (sl_keys[k].global)
			apply_default(cfg, &sl_keys[k], &cfg->global);
}

/* "a and b" / "a, b and c" for the values of a choice type in `mask`. */
static void name_list(enum sl_key_type type, uint32_t mask, char *buf, size_t size)
{
	unsigned n, count = 0, done = 0;
	const char *const *names = sl_key_choices(type, &n);

	buf[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		count += (mask & SL_BIT(i)) != 0;
	for (unsigned i = 0; i < n; i++) {
		if (!(mask & SL_BIT(i)))
			continue;
		done++;
		strncat(buf, done == 1 ? "" : done == count ? " and " : ", ", size - strlen(buf) - 1);
		strncat(buf, names[i], size - strlen(buf) - 1);
	}
}

/* " (WHY)" when key k says why it is limited, else "". */
static const char *why_of(const struct sl_key_def *k, char *buf, size_t size)
{
	if (!k->why)
		return "";
	snprintf(buf, size, " (%s)", k->why);
	return buf;
}

/* Reports that key k is for the values of `type` in `mask` ("meter = " says which
 * kind when `prefix` is given), not the section's `value`. */
static void not_for(struct sl_config *cfg, const struct sl_key_def *k, int line,
                    enum sl_key_type type, const char *prefix, uint32_t mask, unsigned value)
{
	char list[160], why[200];
	unsigned n;

	name_list(type, mask, list, sizeof(list));
	sl_config_error(cfg, line, "%s is for %s%s, not %s%s", k->name, prefix, list,
	          sl_key_choices(type, &n)[value], why_of(k, why, sizeof(why)));
}

/* Whether limit key k may be given in section s (its strategy and meter being
 * known by then: they are compiled first); reports why not. */
static int applies(struct sl_config *cfg, const struct sl_key_def *k, const struct sl_spec *s,
                   const struct raw_value *raw, int line)
{
	if (k->needs != SL_NEEDS_NONE && !raw[k->needs].line) {
		sl_config_error(cfg, line, "%s needs a %s", k->name, sl_keys[k->needs].name);
		return 0;
	}
	if (!(k->strategies & SL_BIT(s->strategy))) {
		not_for(cfg, k, line, SL_KT_STRATEGY, "", k->strategies, s->strategy);
		return 0;
	}
	if (!(k->meters & SL_BIT(s->meter))) {
		not_for(cfg, k, line, SL_KT_METER, "meter = ", k->meters, s->meter);
		return 0;
	}
	return 1;
}

/* One override line of section `base` ("PATTERN RATE [concurrency N]") made a
 * section of its own (docs/config.md, "Overrides"): the base's spec with the
 * line's pattern, rate (and concurrency), named "BASE/PATTERN" - a name no config
 * section can have - or "BASE/override-N" when that would not fit. */
static void make_override(struct parse_state *ps, unsigned base, const struct override_line *o, unsigned nth,
                          int burst_given)
{
	struct sl_config *cfg = ps->cfg;
	char text[OVERRIDE_TEXT], *save = NULL, *pattern, *rate, *word, *count;
	char base_name[sizeof(((struct sl_spec *)0)->name)];
	struct sl_section_conf *sc;
	struct sl_spec *s;
	unsigned before = cfg->nerrors;

	snprintf(text, sizeof(text), "%s", o->text);
	pattern = strtok_r(text, " \t", &save);
	rate = strtok_r(NULL, " \t", &save);
	word = strtok_r(NULL, " \t", &save);
	count = strtok_r(NULL, " \t", &save);
	if (!pattern || !rate || (word && (strcmp(word, "concurrency") != 0 || !count)) ||
	    strtok_r(NULL, " \t", &save)) {
		sl_config_error(cfg, o->line, "bad override '%s' (want PATTERN RATE [concurrency N], e.g. "
		                "override = big.example.com 50/s)", o->text);
		return;
	}
	if (cfg->sections[base].spec.per == SL_PER_NONE) {
		sl_config_error(cfg, o->line, "override needs per = ... in [%s]: it gives keys their own rates",
		                cfg->sections[base].spec.name);
		return;
	}
	if (sl_config_grow((void **)&cfg->sections, &cfg->sections_cap, cfg->nsections, sizeof(*cfg->sections),
	         SL_SECTIONS_MAX) < 0) {
		sl_config_error(cfg, o->line, "too many sections");
		return;
	}
	sc = &cfg->sections[cfg->nsections];
	*sc = cfg->sections[base];
	sc->line = o->line;
	s = &sc->spec;
	/* The base's name, copied: the new section's is written over its copy of it. */
	memcpy(base_name, cfg->sections[base].spec.name, sizeof(base_name));
	if (snprintf(s->name, sizeof(s->name), "%s/%s", base_name, pattern) >= (int)sizeof(s->name) ||
	    names_find(ps, s->name) >= 0)
		snprintf(s->name, sizeof(s->name), "%.48s/override-%u", base_name, nth);
	s->override_of = base + 1;
	parse_value(cfg, &sl_keys[SL_KEY_match], pattern, o->line, s);
	parse_value(cfg, &sl_keys[SL_KEY_rate], rate, o->line, s);
	if (!burst_given) /* the base's default burst follows its own rate */
		s->burst = s->strategy == SL_STRAT_TOKEN_BUCKET && s->amount ? s->amount : 1;
	if (count) {
		if (s->meter != SL_METER_CONNECTIONS && s->meter != SL_METER_REQUESTS)
			sl_config_error(cfg, o->line, "override: concurrency limits open connections or requests in "
			                "flight (meter = connections or requests)");
		else
			parse_value(cfg, &sl_keys[SL_KEY_concurrency], count, o->line, s);
	}
	if (s->calendar && s->scope == SL_SCOPE_FLEET)
		sl_config_error(cfg, o->line, "override: a calendar window (/w, /mo, /y) is not shared by a fleet yet");
	if (cfg->nerrors != before) {
		cfg->npatterns = SL_MIN(cfg->npatterns, s->pattern_first);
		return;
	}
	if (names_add(ps, cfg->nsections) < 0) {
		sl_config_error(cfg, o->line, "out of memory (%u sections)", cfg->nsections);
		return;
	}
	cfg->nsections++;
}

static void make_overrides(struct parse_state *ps, unsigned base, int burst_given)
{
	for (unsigned i = 0; i < ps->noverrides; i++)
		make_override(ps, base, &ps->overrides[i], i + 1, burst_given);
}

/* Compile the raw keys of the section that just ended into cfg->sections[]: each
 * key in the table's order, given or by default, then the rules that span keys. */
static void finish_section(struct parse_state *ps)
{
	struct sl_config *cfg = ps->cfg;
	struct raw_value *raw = ps->raw;
	struct sl_section_conf *sc;
	struct sl_spec *s;
	unsigned before = cfg->nerrors;

	if (!ps->in_section || ps->skip)
		goto out;
	if (sl_config_grow((void **)&cfg->sections, &cfg->sections_cap, cfg->nsections, sizeof(*cfg->sections),
	         SL_SECTIONS_MAX) < 0) {
		sl_config_error(cfg, ps->header_line, cfg->nsections >= SL_SECTIONS_MAX
		          ? "too many sections (a config holds at most %u)" : "out of memory (%u sections)",
		          (unsigned)SL_SECTIONS_MAX);
		goto out;
	}
	sc = &cfg->sections[cfg->nsections];
	memset(sc, 0, sizeof(*sc));
	sc->line = ps->header_line;
	s = &sc->spec;
	sl_strlcpy(s->name, ps->section, sizeof(s->name));

	for (int k = 0; k < SL_KEY_COUNT; k++) {
		const struct sl_key_def *kd = &sl_keys[k];

		if (kd->global)
			continue;
		if (ps->too_long[k]) { /* said where it was read */
			apply_default(cfg, kd, s);
			continue;
		}
		if (!raw[k].line) {
			char why[200];

			if (kd->flags & SL_KF_REQUIRED)
				sl_config_error(cfg, ps->header_line, "[%s] has no %s%s", s->name, kd->name,
				          why_of(kd, why, sizeof(why)));
			apply_default(cfg, kd, s);
			continue;
		}
		if (applies(cfg, kd, s, raw, raw[k].line))
			parse_value(cfg, kd, k == SL_KEY_match ? ps->match_text : raw[k].text, raw[k].line, s);
	}
	/* What spans keys: a section limits something; burst's default follows the
	 * strategy and the rate. */
	if (!raw[SL_KEY_rate].line && !raw[SL_KEY_concurrency].line)
		sl_config_error(cfg, ps->header_line, "[%s] needs a rate (e.g. rate = 10/s) or a concurrency", s->name);
	if (!raw[SL_KEY_burst].line)
		s->burst = s->strategy == SL_STRAT_TOKEN_BUCKET && s->amount ? s->amount : 1;
	/* The fleet lays its windows out by length on Redis's clock: a calendar's
	 * months and years are not one length. */
	if ((s->refund.classes || s->refund.ncodes) && s->scope == SL_SCOPE_FLEET)
		sl_config_error(cfg, ps->header_line, "[%s]: refund is not shared by a fleet yet: scope = machine, "
		                "or no refund", s->name);
	if (s->calendar && s->scope == SL_SCOPE_FLEET)
		sl_config_error(cfg, ps->header_line, "[%s]: a calendar window (/w, /mo, /y) is not shared by a fleet "
		                "yet: scope = machine, or a window in s, m, h or d", s->name);
	if (s->tolerance_us && s->scope == SL_SCOPE_FLEET)
		sl_config_error(cfg, ps->header_line, "[%s]: tolerance is not kept by a fleet's shares yet: "
		                "scope = machine, or no tolerance", s->name);

	if (cfg->nerrors == before) {
		if (names_add(ps, cfg->nsections) < 0) {
			sl_config_error(cfg, ps->header_line, "out of memory (%u sections)", cfg->nsections);
		} else {
			cfg->nsections++;
			make_overrides(ps, cfg->nsections - 1, raw[SL_KEY_burst].line != 0);
		}
	} else {
		cfg->npatterns = s->pattern_first; /* its patterns go with it */
	}
out:
	ps->noverrides = 0;
	for (int k = 0; k < SL_KEY_COUNT; k++)
		ps->raw[k].line = ps->too_long[k] = 0;
	ps->match_len = 0;
	ps->in_section = ps->in_global = ps->skip = ps->had_key = 0;
	ps->last_key = -1;
}

static int valid_section_name(const char *n)
{
	size_t len = strlen(n);

	if (len == 0 || len >= SL_SECTION_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && !strchr("-_.", n[i]))
			return 0;
	return 1;
}

static void begin_section(struct parse_state *ps, const char *name)
{
	struct sl_config *cfg = ps->cfg;

	finish_section(ps);
	ps->header_line = ps->line;
	snprintf(ps->section, sizeof(ps->section), "%s", name);
	if (strcmp(name, "sluice") == 0) {
		ps->in_global = 1;
		return;
	}
	ps->in_section = 1;
	if (!valid_section_name(name)) {
		sl_config_error(cfg, ps->line, "bad section name [%s] (letters, digits, '-', '_', '.'; at most %d)",
		          name, SL_SECTION_NAME_MAX - 1);
		ps->skip = 1;
		return;
	}
	{
		int first = names_find(ps, name);

		if (first >= 0) {
			sl_config_error(cfg, ps->line, "duplicate section [%s] (first at line %d)", name,
			          cfg->sections[first].line);
			ps->skip = 1;
		}
	}
}

/* match's value: the first line, or one more continuation line.  0, or -1. */
static int match_append(struct parse_state *ps, const char *value)
{
	size_t n = strlen(value), need = ps->match_len + n + 2;

	if (need > SL_CONFIG_MAX_BYTES)
		return -1;
	if (need > ps->match_cap) {
		size_t cap = SL_MAX(need, ps->match_cap * 2);
		char *p = realloc(ps->match_text, cap);

		if (!p)
			return -1;
		ps->match_text = p;
		ps->match_cap = cap;
	}
	if (ps->match_len)
		ps->match_text[ps->match_len++] = ' ';
	memcpy(ps->match_text + ps->match_len, value, n + 1);
	ps->match_len += n;
	return 0;
}

/* An override line of the current section, kept for make_overrides. */
static void add_override(struct parse_state *ps, const char *value)
{
	struct override_line *o;

	if (ps->noverrides >= OVERRIDES_MAX) {
		sl_config_error(ps->cfg, ps->line, "more than %d override lines in [%s]", OVERRIDES_MAX, ps->section);
		return;
	}
	if (strlen(value) >= OVERRIDE_TEXT) {
		sl_config_error(ps->cfg, ps->line, "override is too long (at most %d characters)", OVERRIDE_TEXT - 1);
		return;
	}
	if (!ps->overrides && !(ps->overrides = calloc(OVERRIDES_MAX, sizeof(*ps->overrides)))) {
		sl_config_error(ps->cfg, ps->line, "out of memory (override)");
		return;
	}
	o = &ps->overrides[ps->noverrides++];
	o->line = ps->line;
	snprintf(o->text, sizeof(o->text), "%s", value);
}

/* inih's handler: returns nonzero to carry on (inih's convention). */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct parse_state *ps = user;
	struct sl_config *cfg = ps->cfg;
	struct raw_value *r;
	int k;

	(void)section; /* the reader tracks sections itself, with their line numbers */
	if (!ps->in_global && !ps->in_section) {
		/* Said of where this key goes, not of every place a key may. */
		int global = find_key(name, 1) >= 0, limit = find_key(name, 0) >= 0;

		if (global && !limit)
			sl_config_error(cfg, ps->line, "'%s' is outside any section (it belongs in [sluice])", name);
		else if (limit && !global)
			sl_config_error(cfg, ps->line, "'%s' is outside any section (it belongs in a limit section: put a "
			                "header such as [api] above it)", name);
		else
			sl_config_error(cfg, ps->line, "'%s' is outside any section (and is no key sluice knows)", name);
		return 1;
	}
	if (ps->skip)
		return 1;
	if (!ps->indented)
		ps->had_key = 1;
	k = find_key(name, ps->in_global);
	if (k < 0) {
		if (find_key(name, !ps->in_global) >= 0)
			sl_config_error(cfg, ps->line, "'%s' belongs in %s, not in [%s]", name,
			          ps->in_global ? "a limit section" : "[sluice]", ps->section);
		else
			sl_config_error(cfg, ps->line, "unknown key '%s' in [%s] (did you mean '%s'?)", name,
			          ps->section, nearest_key(name, ps->in_global));
		ps->last_key = -1;
		return 1;
	}
	r = &ps->raw[k];
	if (ps->indented && ps->had_key && k == ps->last_key) {
		/* A continuation line: inih hands it over as another value of the key. */
		if (k != SL_KEY_match) {
			sl_config_error(cfg, ps->line, "only match may continue on an indented line");
			return 1;
		}
		if (match_append(ps, value) < 0)
			sl_config_error(cfg, ps->line, "match is too long");
		return 1;
	}
	ps->last_key = k;
	if (k == SL_KEY_override) {
		add_override(ps, value);
		return 1;
	}
	if (r->line) {
		sl_config_error(cfg, ps->line, "duplicate key '%s' in [%s] (first at line %d)", name,
		          ps->section, r->line);
		return 1;
	}
	if (value[0] == '\0') {
		sl_config_error(cfg, ps->line, "'%s' has no value", name);
		return 1;
	}
	r->line = ps->line;
	if (k == SL_KEY_match) {
		ps->match_len = 0;
		if (match_append(ps, value) < 0) {
			sl_config_error(cfg, ps->line, "match is too long");
			r->line = 0;
		}
		return 1;
	}
	snprintf(r->text, sizeof(r->text), "%s", value);
	if (ps->in_global) {
		char text[RAW_MAX];

		sl_strlcpy(text, value, sizeof(text));
		parse_value(cfg, &sl_keys[k], text, ps->line, &cfg->global);
	}
	return 1;
}

/* Look at each raw line before inih does: count lines, spot section headers (so
 * empty and duplicate sections get their line), flag indented lines and lines too
 * long for inih's buffer. */
static void inspect_line(struct parse_state *ps, char *line, int num)
{
	size_t len = strlen(line);
	char *p = line, *close;

	ps->line++;
	if (len == (size_t)num - 1 && line[len - 1] != '\n') {
		char *eq = strchr(line, '=');
		int k = -1;

		/* The key the line gave counts as given - its value, not its absence, is
		 * the fault ("[a] has no match" beside this was the only word once). */
		if (eq && ps->in_section && !ps->skip) {
			char name[64];
			size_t n = 0;

			for (const char *q = line; q < eq && n + 1 < sizeof(name); q++)
				if (!isspace((unsigned char)*q))
					name[n++] = *q;
			name[n] = '\0';
			if ((k = find_key(name, 0)) >= 0) {
				ps->raw[k].line = ps->line;
				ps->raw[k].text[0] = '\0';
				ps->too_long[k] = 1;
			}
		}
		sl_config_error(ps->cfg, ps->line, "line longer than %d characters%s", num - 2,
		                k == SL_KEY_match || k < 0 ? " (a long match continues on indented lines)" : "");
		line[0] = '\0';
		ps->truncated = 1; /* the reader skips the rest of the physical line */
		return;
	}
	ps->indented = (*p == ' ' || *p == '\t');
	while (*p == ' ' || *p == '\t')
		p++;
	/* As in inih: an indented line after a key continues that key's value. */
	if (*p != '[' || (ps->indented && ps->had_key))
		return;
	close = strchr(p, ']');
	if (!close)
		return; /* inih reports the syntax error */
	{
		char name[SL_SECTION_NAME_MAX + 32];
		size_t n = (size_t)(close - p - 1);
		char *s = p + 1;

		while (n > 0 && isspace((unsigned char)*s)) {
			s++;
			n--;
		}
		while (n > 0 && isspace((unsigned char)s[n - 1]))
			n--;
		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, s, n);
		name[n] = '\0';
		begin_section(ps, name);
	}
}

static char *read_string_line(char *str, int num, void *stream)
{
	struct parse_state *ps = stream;
	const char *nl;
	size_t n;

	if (*ps->text == '\0')
		return NULL;
	nl = strchr(ps->text, '\n');
	n = nl ? (size_t)(nl - ps->text + 1) : strlen(ps->text);
	memcpy(str, ps->text, SL_MIN(n, (size_t)num - 1));
	str[SL_MIN(n, (size_t)num - 1)] = '\0';
	ps->text += n; /* a line too long for the buffer is skipped whole */
	ps->truncated = 0;
	inspect_line(ps, str, num);
	return str;
}

/* Errors are found section by section; a user reads them top to bottom. */
static void sort_errors(struct sl_config *cfg)
{
	unsigned n = SL_MIN(cfg->nerrors, (unsigned)SL_CONFIG_MAX_ERRORS);

	for (unsigned i = 1; i < n; i++) {
		for (unsigned j = i; j > 0 && cfg->error_lines[j - 1] > cfg->error_lines[j]; j--) {
			char tmp[SL_CONFIG_ERROR_LEN];
			int line = cfg->error_lines[j];

			memcpy(tmp, cfg->errors[j], sizeof(tmp));
			memcpy(cfg->errors[j], cfg->errors[j - 1], sizeof(tmp));
			memcpy(cfg->errors[j - 1], tmp, sizeof(tmp));
			cfg->error_lines[j] = cfg->error_lines[j - 1];
			cfg->error_lines[j - 1] = line;
		}
	}
}

static int parse_with(struct sl_config *cfg, const char *path, ini_reader reader,
                      struct parse_state *ps)
{
	int rc;

	sl_config_free(cfg);
	cfg->nerrors = 0;
	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	sl_config_defaults(cfg);
	ps->cfg = cfg;
	ps->last_key = -1;
	rc = ini_parse_stream(reader, ps, on_key, ps);
	finish_section(ps);
	if (rc > 0) {
		/* inih's own syntax error; ours were recorded already with better words. */
		int already = 0;

		for (unsigned i = 0; i < SL_MIN(cfg->nerrors, SL_CONFIG_MAX_ERRORS); i++) {
			char tag[32];

			snprintf(tag, sizeof(tag), ":%d: ", rc);
			if (strstr(cfg->errors[i], tag))
				already = 1;
		}
		if (!already)
			sl_config_error(cfg, rc, "syntax error (want '[section]', 'key = value' or a ; comment)");
	} else if (rc < 0) {
		sl_config_error(cfg, 0, "cannot parse (out of memory)");
	}
	/* No limit sections is a config, not an error: the installed default has every
	 * example commented out, and its daemon starts, shaping nothing until one is
	 * added (sluice check, run and sluiced say so). */
	/* What spans [sluice] and the sections: a fleet's limit needs the fleet's Redis. */
	{
		const struct sl_global *g = &cfg->global;
		int ways = !!g->redis[0] + !!g->redis_sentinels[0] + !!g->redis_cluster[0];

		if (ways > 1)
			sl_config_error(cfg, 0, "redis, redis_sentinels and redis_cluster: give one of them, "
			                "not %d", ways);
		if (g->redis_sentinels[0] && !g->redis_master[0])
			sl_config_error(cfg, 0, "redis_sentinels: want redis_master too (the name the Sentinels "
			                "know the master by)");
		if (g->redis_master[0] && !g->redis_sentinels[0])
			sl_config_error(cfg, 0, "redis_master: only with redis_sentinels");
		if (g->redis_sentinel_auth[0] && !g->redis_sentinels[0])
			sl_config_error(cfg, 0, "redis_sentinel_auth: only with redis_sentinels");
		if (g->redis_sentinel_auth[0] && g->redis_sentinel_auth[0] != '/')
			sl_config_error(cfg, 0, "redis_sentinel_auth: want an absolute path, not '%s'",
			                g->redis_sentinel_auth);
	}
	for (unsigned i = 0; i < cfg->nsections; i++)
		if (cfg->sections[i].spec.scope == SL_SCOPE_FLEET && !sl_config_has_redis(cfg)) {
			sl_config_error(cfg, cfg->sections[i].line, "[%s] has scope = fleet, but [sluice] names no usable "
			          "redis to share it through", cfg->sections[i].spec.name);
			break;
		}
	if (cfg->global.refresh_ns < 10 * SL_NS_PER_MS || cfg->global.refresh_ns > 10 * SL_NS_PER_S)
		sl_config_error(cfg, 0, "refresh: want 10ms to 10s");
	/* The daemon runs from /: a relative path would name another file there. */
	if (cfg->global.redis_auth[0] && cfg->global.redis_auth[0] != '/')
		sl_config_error(cfg, 0, "redis_auth: want an absolute path, not '%s'", cfg->global.redis_auth);
	sort_errors(cfg);
	return cfg->nerrors ? -EINVAL : 0;
}

/* Start cfg over with one error about the file as a whole. */
static int file_error(struct sl_config *cfg, const char *path, int rc, const char *what)
{
	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	sl_config_free(cfg);
	cfg->nerrors = 0;
	sl_config_error(cfg, 0, "%s", what);
	return rc;
}

/* The whole file, NUL-terminated, into a malloc'd buffer.  Only a regular file of
 * at most SL_CONFIG_MAX_BYTES is read: a FIFO, a device (/dev/zero, /dev/urandom)
 * or a directory would hang or exhaust whoever reads it - the shim reads
 * SLUICE_CONFIG in its host's constructor, before main().  O_NONBLOCK keeps the
 * open itself from waiting for a FIFO's writer. */
static int read_whole(struct sl_config *cfg, const char *path, char **out, size_t *len)
{
	int fd = sl_sys_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), rc = 0;
	struct stat st;
	size_t n = 0;
	char *buf = NULL;

	char why[96];

	if (fd < 0) {
		rc = -errno;
		snprintf(why, sizeof(why), "cannot read: %s", strerror(-rc));
		return file_error(cfg, path, rc, why);
	}
	if (fstat(fd, &st) != 0) {
		snprintf(why, sizeof(why), "cannot read: %s", strerror(errno));
		rc = file_error(cfg, path, -errno, why);
	} else if (!S_ISREG(st.st_mode)) {
		rc = file_error(cfg, path, -EINVAL, "not a regular file (a config is read whole, so a "
		                                    "FIFO, device or directory cannot be one)");
	} else if ((uint64_t)st.st_size > SL_CONFIG_MAX_BYTES) {
		rc = file_error(cfg, path, -EFBIG, "larger than 16 MiB: not a config");
	} else if (!(buf = malloc((size_t)st.st_size + 1))) {
		rc = file_error(cfg, path, -ENOMEM, "out of memory");
	} else {
		while (n < (size_t)st.st_size) {
			ssize_t r = sl_sys_read(fd, buf + n, (size_t)st.st_size - n);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				snprintf(why, sizeof(why), "cannot read: %s", strerror(errno));
				rc = file_error(cfg, path, -errno, why);
				break;
			}
			if (r == 0)
				break; /* shrank while read: what is there */
			n += (size_t)r;
		}
	}
	sl_sys_close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

int sl_config_load(struct sl_config *cfg, const char *path)
{
	char *text = NULL, *nul;
	size_t len = 0;
	int rc = read_whole(cfg, path, &text, &len);

	if (rc < 0)
		return rc;
	/* A NUL byte would end the line there, silently: say which line has one. */
	if ((nul = memchr(text, '\0', len))) {
		int line = 1;

		for (const char *p = text; p < nul; p++)
			line += *p == '\n';
		snprintf(cfg->path, sizeof(cfg->path), "%s", path);
		sl_config_free(cfg);
		cfg->nerrors = 0;
		sl_config_error(cfg, line, "a NUL byte in the line: a config is text");
		free(text);
		return -EINVAL;
	}
	rc = sl_config_load_string(cfg, path, text);
	free(text);
	return rc;
}

int sl_config_load_string(struct sl_config *cfg, const char *path, const char *text)
{
	struct parse_state *ps = calloc(1, sizeof(*ps));
	int rc;

	if (!ps)
		return -ENOMEM;
	ps->text = text;
	rc = parse_with(cfg, path, read_string_line, ps);
	free(ps->match_text);
	free(ps->overrides);
	free(ps->names.slot);
	free(ps);
	return rc;
}

