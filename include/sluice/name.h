/*
 * name.h - a host name made comparable: what a lookup, a TLS SNI, a Host header
 * and a config's pattern all go through before they are compared.  The lowest
 * layer (src/proto), so the readers of first writes and the matcher share it.
 */
#ifndef SLUICE_NAME_H
#define SLUICE_NAME_H

#include <stddef.h>

/* Normalise a host name in place for comparison: lower case, trailing dot removed.
 * Returns the new length. */
size_t sl_name_normalise(char *name, size_t len);

#endif
