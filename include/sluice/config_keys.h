/*
 * config_keys.h - the table of configuration keys, generated from
 * config_keys.def, shared by the parser (src/core/config.c) and the printers
 * (src/progs/config_print.c).
 */
#ifndef SLUICE_CONFIG_KEYS_H
#define SLUICE_CONFIG_KEYS_H

#include <stdint.h>

/* How a key's value is parsed and printed. */
enum sl_key_type {
	SL_KT_SHM_NAME, /* "/name": one leading slash, at most 250 characters */
	SL_KT_PATH,     /* a path that fits its field */
	SL_KT_OCTAL,    /* permissions, at most `max` */
	SL_KT_FALLBACK, /* choices: enum sl_fallback */
	SL_KT_LOG_LEVEL, /* choices: enum sl_log_level */
	SL_KT_METER,    /* choices: enum sl_meter */
	SL_KT_STRATEGY, /* choices: enum sl_strategy */
	SL_KT_MODE,     /* choices: enum sl_mode */
	SL_KT_PATTERNS, /* match patterns into the config's pattern table: spec.pattern_first,
	                 * spec.npatterns */
	SL_KT_RATE,     /* AMOUNT/WINDOW into spec.amount and spec.window_ns */
	SL_KT_COUNT,    /* 1..max */
	SL_KT_DURATION, /* a duration, 0, or forever (-1) */
	SL_KT_MICROS,   /* a duration in whole microseconds, at most `max` of them */
	SL_KT_ERRNO,    /* an errno name or number */
	SL_KT_PER,      /* host | host:port | address[/N[/M]][:port]: spec.per and prefixes */
	SL_KT_ROOM,     /* auto (0) or 1..max: the size of a segment table */
	SL_KT_POW2,     /* 1..max, rounded up to a power of two */
	SL_KT_ENDPOINT, /* HOST:PORT, [IPV6]:PORT or /unix/socket/path, or none */
	SL_KT_ENDPOINTS, /* one or more HOST:PORT or [IPV6]:PORT, separated by spaces, or none */
	SL_KT_NAME,     /* letters, digits, '-', '_', '.', fitting its field; auto: "" */
	SL_KT_SCOPE,    /* choices: enum sl_scope */
	SL_KT_SWITCH,   /* choices: off (0) | on (1) */
	SL_KT_DIR,      /* auto | none ("") | an absolute directory fitting its field */
	SL_KT_REFUND,   /* statuses, classes and failed: struct sl_refund (refund.h) */
	SL_KT_OVERRIDE, /* an override line: read apart (config.c), each made a section */
	SL_KT_KINDS     /* how many kinds there are */
};

#define SL_KF_REQUIRED 1u /* a limit section without it is an error */
#define SL_KF_IF_SET 2u   /* `sluice check` prints it only when it is set */

#define SL_BIT(x) (1u << (x))
#define SL_FOR_ANY 0xffffffffu
#define SL_FOR_GCRA (SL_BIT(SL_STRAT_LEAKY_BUCKET) | SL_BIT(SL_STRAT_TOKEN_BUCKET))

/* Key indices: SL_KEY_<name>, in the order of config_keys.def. */
enum sl_key_id {
#define SL_GLOBAL(name, type, field, max, def, reload, help) SL_KEY_##name,
#define SL_LIMIT(name, type, field, max, def, doc, flags, strats, meters, needs, why, help) SL_KEY_##name,
#include "sluice/config_keys.def"
#undef SL_GLOBAL
#undef SL_LIMIT
	SL_KEY_COUNT
};

#define SL_NEEDS(key) SL_KEY_##key
#define SL_NEEDS_NONE (-1)

/* What a reload does with a changed [sluice] key. */
enum sl_at_reload {
	SL_RELOAD_APPLIED, /* takes effect at the reload */
	SL_RELOAD_RESTART, /* kept as it was until sluiced restarts (the daemon says so) */
	SL_RELOAD_GROWS,   /* a segment size: larger makes a new segment at the reload,
	                    * smaller waits for a restart */
};

/* The words docs/config.md and `sluice check --keys` use for each (defined with
 * the printers, src/progs/config_print.c: programs only, never the shim). */
const char *sl_at_reload_name(enum sl_at_reload r);

struct sl_key_def {
	const char *name;
	int global;            /* 1: [sluice]; 0: a limit section */
	enum sl_key_type type;
	uint16_t offset, size; /* the field, in struct sl_global or struct sl_spec */
	uint64_t max;
	const char *def;       /* default as config text, or NULL */
	const char *def_doc;   /* the default as --keys shows it when def is NULL */
	unsigned flags;        /* SL_KF_* */
	uint32_t strategies, meters; /* where it may be given (bits), SL_FOR_ANY */
	int needs;             /* the key that must be given with it, or SL_NEEDS_NONE */
	const char *why;       /* reason added to its errors, or NULL */
	const char *help;
	enum sl_at_reload at_reload; /* [sluice] keys; limit keys are always applied */
};

extern const struct sl_key_def sl_keys[SL_KEY_COUNT];

/* The names of a choice type's values, in enum order, and how many. */
const char *const *sl_key_choices(enum sl_key_type type, unsigned *n);

/* The index of `s` among a choice type's values, or -1. */
int sl_key_choice(enum sl_key_type type, const char *s);

#endif
