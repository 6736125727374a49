/*
 * fleetpolicy.h - the fleet's lease policy on this machine, as arithmetic with no
 * Redis in it (docs/design.md, "Across machines"): what each item is asked for
 * (demand), what Redis's answer grants it, what it may use while Redis is away,
 * and which answers are believed.  src/daemon/fleet.c carries the numbers to and
 * from Redis, where fleet.lua splits each limit over the machines (the
 * water-filling); tests/unit/test_fleetpolicy.c drives both.
 */
#ifndef SLUICE_FLEETPOLICY_H
#define SLUICE_FLEETPOLICY_H

#include "sluice/lease.h"
#include "sluice/shm-t.h"

#include "sluice/grid.h"

#include <stddef.h>
#include <stdint.h>

#define SL_FLEET_SCALE 1000          /* rate shares go in thousandths of a request per window */
#define SL_FLEET_HEADROOM_PPM 995000 /* a rate's grants add up to 99.5% of it */
#define SL_FLEET_KEY_MAX 400         /* a Redis key: prefix, section, key */
#define SL_FLEET_FIELDS_IN 6         /* per item in a call, after its kind (fleet.lua) */
#define SL_FLEET_HEAD_OUT 3          /* an answer's first numbers: Redis's clock (ms),
                                      * settling, Redis's clock (us) */
#define SL_FLEET_FIELDS_OUT (5 + SL_GRID_RUNS) /* per item in an answer: five, then a
                                      * grid item's runs, from * 8192 + to (0: none) */
#define SL_FLEET_GRID_JUMP_NS (1000000LL) /* the grid's origin (fleet.c): a later
                                      * estimate by more than this and its round
                                      * trip is a new clock */
#define SL_FLEET_GRID_CREEP_NS (20 * 1000LL) /* ... by less, it moves this far at most
                                      * an answer: less than any interval above 50,000/s */

/* What one item's demand is measured from, carried across rounds. */
struct sl_fleet_memo {
	char key[SL_FLEET_KEY_MAX]; /* "" free */
	uint64_t admitted, refused;
	uint32_t misses;            /* the lease's count of callers that found no share */
	uint32_t misses_seen;       /* the same at the last round, measured or not */
	int64_t at;                 /* CLOCK_MONOTONIC of the last measure */
	double flow;                /* requests asked for per ns at the last measure */
	double flow_avg;            /* the same averaged over about a second */
	double waiting;             /* callers held with no share at the last measure */
	double demand;              /* the last demand reported, smoothed */
	int64_t active_at;          /* the last measure that found the item in use:
	                             * a request, a queue or a caller held */
	double active_flow;         /* flow_avg then (per ns) */
	int claiming;               /* a grid item served by claims (sl_fleet_measure) */
	int64_t claim_sent_ns;      /* a claim call for it in flight since (0: none;
	                             * fleet_claims.c): one dropped with its
	                             * connection is never answered */
	uint32_t claims_short;      /* slots claimed for it that Redis could not give,
	                             * since the last measure */
	int64_t claims_quiet_until; /* no claim call before (none came at the last) */
	int64_t busy_since;         /* served by claims: the first of the measures in a
	                             * row that found SL_FLEET_CLAIMS_BELOW a round or
	                             * more (0: the last did not) */
};

/* A grid item is served by claims while its flow is below SL_FLEET_CLAIMS_BELOW
 * requests a round, and by ranks once it reaches SL_FLEET_RANKS_FROM (the gap
 * keeps a flow near either from going back and forth): docs/design.md, "Claims". */
#define SL_FLEET_CLAIMS_BELOW 3.0
#define SL_FLEET_RANKS_FROM 6.0
/* ... or once its flow has been over SL_FLEET_CLAIMS_BELOW this long: longer than
 * demand that moves every second stays, shorter than the three seconds a machine
 * stepping up has to come to its part (t_fleet_rate). */
#define SL_FLEET_BUSY_NS (3 * SL_NS_PER_S / 2)

/* One thing this machine leases: a fleet section, or one key of a keyed one; a
 * section with a rate and a concurrency is two items. */
struct sl_fleet_item {
	char key[SL_FLEET_KEY_MAX];
	char kind;             /* r rate, c places, f/s/l fixed/session/sliding window */
	uint32_t section, serial;
	uint32_t key_slot, key_serial; /* a key of a keyed section; serial 0: the section */
	uint64_t limit;        /* r: thousandths per window; c: places; windows: AMOUNT */
	int64_t window_ns;
	uint64_t burst;        /* the section's */
	uint64_t demand, held; /* as reported */
	int64_t pause_ms;      /* the end of its pause, on Redis's clock (0: none) */
	int grid;              /* r: released on the fleet's grid (a GCRA counting
	                        * requests, not bytes, with no burst: grid.h) */
	struct sl_grid held_grid; /* r: the runs of ranks the lease holds now */
	int claims;            /* r, grid: served by claims this round (kind q) */
	struct sl_fleet_memo *memo; /* NULL: no room to remember it (no demand) */
};

/* What measuring needs of the daemon besides the item's own state. */
struct sl_fleet_env {
	int64_t refresh_ns; /* the lease period */
	uint32_t hosts;     /* [sluice] hosts: the machines assumed before any answer (>= 1) */
	int64_t wall_off;   /* the segment's UTC offset (windows) */
	int64_t redis_ms;   /* Redis's clock now, late rather than early (ms); 0: never heard */
	int claims;         /* [sluice] claims = on: light grid items may be served by claims */
};

/* The item kind for a section's rate. */
char sl_fleet_kind(const struct sl_spec *s);

/* Fill `it` (kind, key and memo set) for state st of section sec: its limit,
 * window and burst, what it is asked for and holds, and a pause to share. */
void sl_fleet_measure(const struct sl_fleet_env *env, struct sl_fleet_item *it, const struct sl_section *sec,
                      const struct sl_state *st, int keyed, int64_t now);

/* The rate share `grant` (thousandths per window) as a lease, with the machine's
 * part of the burst (at least one). */
struct sl_grant sl_fleet_rate_grant(const struct sl_fleet_item *it, uint64_t grant, uint32_t flags);

/* While Redis cannot be reached: the lease for an item whose state holds lease l.
 * Returns 0 when what it holds stays as it is; 1 with *g its part over `hosts`
 * (a sliding window's halved: two parts in a row may fall in one span), a window's
 * chunk placed on Redis's clock as last seen (redis_ms). */
int sl_fleet_outage_grant(const struct sl_fleet_item *it, const struct sl_lease *l, uint32_t hosts,
                          int64_t now, int64_t redis_ms, struct sl_grant *g);

/* Whether an answer's numbers (vals: SL_FLEET_HEAD_OUT, then SL_FLEET_FIELDS_OUT
 * per item, every one >= 0) could be fleet.lua's for items[0..n-1]: a clock from
 * 2020 to 2200 (both readings of it within a millisecond), no grant above its item's limit,
 * no pause past 400 days, runs of ranks inside the frame and only for a grid item.  One number out
 * of range and none of the answer is used - clamping would hand a whole limit to
 * whatever a broken or hostile server said. */
int sl_fleet_plausible(const struct sl_fleet_item *items, size_t n, const long long *vals);

/* What a round's answers say about calling again soon. */
struct sl_fleet_round {
	int shrank;        /* a share fell by a hundredth of its limit or more */
	int starved;       /* a rate item got less than half its demand */
	int above;         /* some item holds more than an equal part would be with one
	                    * more machine */
	uint32_t machines; /* the most machines any item had */
};

/* The grant for `it` from its answer fields e (SL_FLEET_FIELDS_OUT), Redis's clock
 * rnow (ms), the call's round trip rtt (ns) and this machine's `now`; valid until
 * valid_ns; a grid item's slots placed with Redis's time 0 at origin_ns
 * (CLOCK_MONOTONIC).  Returns 1 with *g to write, 0 when a window's answer is
 * stale (its window ended): nothing to write.  Updates *r. */
int sl_fleet_answer(const struct sl_fleet_item *it, const long long *e, long long rnow, int64_t rtt,
                    int64_t now, int64_t valid_ns, int64_t origin_ns, struct sl_fleet_round *r,
                    struct sl_grant *g);

/* The grid's origin after an answer: Redis's time 0 on CLOCK_MONOTONIC, from the
 * estimate `est` (the answer's arrival less Redis's clock in it: late by at most
 * the answer's round trip `rtt`) and the origin in use (`have` 0: none).  An
 * earlier estimate is taken at once (a smaller delay); a later one by
 * SL_FLEET_GRID_CREEP_NS an answer at most (a slow answer, or the clocks' drift),
 * so a slow answer does not move this machine's slots against the others'; one
 * later than the round trip explains by SL_FLEET_GRID_JUMP_NS more is Redis's
 * clock stepped, or another Redis, taken at once (docs/design.md, "The grid"). */
int64_t sl_fleet_grid_origin(int have, int64_t origin, int64_t est, int64_t rtt);

/* The runs of ranks of g as fleet.lua reads them ("from-to" joined by '.'; "-"
 * for none) into buf; returns buf. */
const char *sl_fleet_grid_runs(const struct sl_grid *g, char *buf, size_t len);

#endif
