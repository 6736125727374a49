/*
 * segment.c - the supervisor following its segment when it moves: calls held,
 * places given back and notifications all ask for the one served now through
 * here, so none of them calls into another for it.
 */
#include "internal.h"
#include "sluice/segsock.h"

/* The segment in use was moved: ask its socket for the one served now (its own
 * attachment only; the embedded daemon's is followed by the daemon).  1 when it
 * followed. */
int sup_follow(struct sl_supervisor *s)
{
	struct sl_shm next;

	if (s->shm != &s->own || sl_segsock_attach(s->seg_path, 1, SL_SEGSOCK_TIMEOUT_NS, &next, NULL, 0) < 0)
		return 0;
	if (next.ino == s->own.ino) {
		sl_shm_detach(&next);
		return 0;
	}
	/* The old mapping stays: calls held may still read it until they step. */
	s->own = next;
	return 1;
}

struct sl_shm_header *sup_give_back_segment(void *ctx, int ask, int32_t *self)
{
	struct sl_supervisor *s = ctx;

	if (ask == SL_SEGMENT_FOLLOW)
		sup_follow(s);
	*self = s->shm->self;
	return s->shm->hdr;
}
