/*
 * config-internal.h - what config_tables.c lends the config parser (config.c) and
 * the key types (config_types.c): reporting an error at a line, compiling a match
 * list, growing a table.
 */
#ifndef SLUICE_CONFIG_INTERNAL_H
#define SLUICE_CONFIG_INTERNAL_H

#include "sluice/config.h"

/* Add an error to cfg, at `line` of its file (0: none). */
void sl_config_error(struct sl_config *cfg, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* match: every pattern of the (space- or comma-separated) list, appended to the
 * config's pattern table; `text` is cut up.  0, or -1 with the errors added. */
int sl_config_compile_match(struct sl_config *cfg, char *text, int line, struct sl_spec *s);

/* Room for element n of an array of *cap elements of `size` bytes, doubled up to
 * `max`: 0, or -1 when n reaches max or memory runs out. */
int sl_config_grow(void **array, unsigned *cap, unsigned n, size_t size, unsigned max);

#endif
