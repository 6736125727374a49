/*
 * refund.h - answers the destination does not count (docs/config.md, "Refunds").
 *
 * `refund = 304, 5xx, 429, failed`: a request (meter = requests) whose final
 * answer has one of the listed statuses or classes, or a connection (meter =
 * connections) whose first answer has one, is given back to the section and key
 * it was charged in - in the window it was counted in, while that window still
 * counts (strategy.h, sl_strategy_refund).  `failed`: a connection refused,
 * reset or timed out before any answer gives back its connection and the
 * requests it had sent.  The destination counted none of them, so what it counts
 * stays within the limit.
 */
#ifndef SLUICE_REFUND_H
#define SLUICE_REFUND_H

#include "sluice/shm-t.h"

#include <stddef.h>

/* Parse a list ("304, 5xx, 429, failed", or "none") into r.  0, or -1 with why. */
int sl_refund_parse(const char *text, struct sl_refund *r, char *why, size_t whysize);

/* The list as the config would say it ("none" for an empty one). */
void sl_refund_format(const struct sl_refund *r, char *buf, size_t size);

/* Whether r gives back an answer of `status`. */
int sl_refund_status(const struct sl_refund *r, unsigned status);

/* Whether r lists anything at all. */
static inline int sl_refund_any(const struct sl_refund *r)
{
	return r->classes || r->ncodes;
}

#endif
