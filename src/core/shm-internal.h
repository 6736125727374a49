/*
 * shm-internal.h - what shm.c (layout, validation, attach) lends carry.c (a
 * segment's lifetime) and nothing else: both are the segment module, split so that
 * the bottom layer never calls up into conc.c or keys.c (docs/design.md, "The map").
 */
#ifndef SLUICE_SHM_INTERNAL_H
#define SLUICE_SHM_INTERNAL_H

#include "sluice/shm.h"

#include <stdint.h>

/* The magic of a segment made but not yet published (sl_shm_publish): ours, so a
 * daemon that died before publishing it has it replaced, but no segment to attach. */
#define SL_SHM_MAGIC_UNPUBLISHED 0x75434c53u /* "SLCu" */

/* The table sizes a header states (trusted only after sl_shm_validate). */
struct sl_shm_dims sl_shm_dims_in(const struct sl_shm_header *h);
/* Record this process's view of h (dims d): from then on h may be indexed. */
void sl_shm_note_attached(struct sl_shm_header *h, const struct sl_shm_dims *d);
/* Write a fresh header for dims d (clear: zero the whole segment first); the
 * segment stays unpublished until sl_shm_publish(). */
void sl_shm_init_header(struct sl_shm_header *h, const struct sl_shm_dims *d, int clear);
/* Map System V segment id (size bytes) into shm. 0 or -errno. */
int sl_shm_attach_id(struct sl_shm *shm, int id, int writable, size_t size);
/* The size of segment id, or -errno. */
int64_t sl_shm_segment_size(int id);
/* Validate what shm maps and note its view.  0 or sl_shm_validate's error. */
int sl_shm_adopt(struct sl_shm *shm);
/* Whether segment id was made by some sluice (its first word is our magic). */
int sl_shm_is_ours(int id);

#endif
