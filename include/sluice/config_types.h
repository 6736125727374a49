/*
 * config_types.h - how each kind of configuration value (enum sl_key_type) is
 * parsed, printed and, for choices, named: one table of operations
 * (src/core/config_types.c), used by the parser (config.c), `sluice check`
 * (config_print.c) and `sluice check --keys`.  A new type is one entry there.
 */
#ifndef SLUICE_CONFIG_TYPES_H
#define SLUICE_CONFIG_TYPES_H

#include "sluice/config.h"
#include "sluice/config_keys.h"

#include <stddef.h>
#include <stdint.h>

struct sl_key_type_ops {
	/* Parse `text` (which may be cut up) into key k's field of base (struct
	 * sl_global or struct sl_spec).  0, or -1 with the error added to cfg at line. */
	int (*parse)(struct sl_config *cfg, const struct sl_key_def *k, char *text, int line, void *base);
	/* k's value in base as the config would say it. */
	void (*format)(const struct sl_key_def *k, const void *base, char *buf, size_t size);
	/* A choice type's values, in enum order (NULL, 0: not a choice). */
	const char *const *choices;
	unsigned nchoices;
};

extern const struct sl_key_type_ops sl_key_types[SL_KT_KINDS];

/* An integer field of key k in base (1, 4 or 8 bytes), read and written; a field
 * of another size reads 1 when any byte of it is set. */
uint64_t sl_key_load(const void *base, const struct sl_key_def *k);
void sl_key_store(void *base, const struct sl_key_def *k, uint64_t v);

#endif
