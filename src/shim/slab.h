/*
 * slab.h - memory for the parts of hold records (slab.c): what a record's state
 * needs is allocated when the state is entered and freed when it is left
 * (docs/design.md, "What a socket costs").  Async-signal-safe as the shim's locks
 * are (inside a critical section); never malloc.
 */
#ifndef SLUICE_SHIM_SLAB_H
#define SLUICE_SHIM_SLAB_H

#include "shim.h"

#include <stddef.h>

/* A piece of at least `size` bytes (up to 8 KiB), uninitialised, 32-byte aligned;
 * NULL when none can be had. */
void *sl_slab_alloc(size_t size);

/* Give back a piece that sl_slab_alloc(size) gave (the same size). */
void sl_slab_free(void *p, size_t size);

/* The bytes a piece of `size` really takes. */
size_t sl_slab_piece(size_t size);

/* Bytes mapped for pieces so far. */
size_t sl_slab_mapped(void);

void sl_slab_after_fork(void);

#endif
