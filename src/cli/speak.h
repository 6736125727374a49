/* `sluice run` saying held and refused calls on its stderr (docs/commands.md "When a call
 * is held"): it listens on an abstract unix socket named in SLUICE_SAY, which
 * the shims and the seccomp supervisor send to (sluice/say.h), and says each
 * section's news at most once every SPEAK_EVERY_S. */
#ifndef SLUICE_CLI_SPEAK_H
#define SLUICE_CLI_SPEAK_H

#include "sluice/shm.h"

#include <ev.h>
#include <stdint.h>

#define SPEAK_EVERY_S 3.0
#define SPEAK_SLOTS 256 /* sections are kept by index modulo this (a second one
                          * landing on a slot has the first's news said first) */

struct speaker_news {
	int section;            /* whose news (-1: no section known) */
	int64_t held_max_ms;    /* the longest hold heard since it was last said */
	uint32_t refused;       /* refusals heard since they were last said */
	char why[96];           /* the last refusal's reason */
	ev_tstamp said_held, said_refused; /* when each was last said (0: never) */
};

#define SPEAK_NOTICES 16 /* distinct notices remembered, each said once */

/* What the run's processes said they were held, for the summary at its end: each
 * process's latest cumulative sums (by pid and section; SPEAK_SUMS at most - a
 * process past them is summed from its first word on, as the slots are reused),
 * and the totals they make by section. */
#define SPEAK_SUMS 1024
struct speaker_sum {
	int pid, section;
	unsigned long long born; /* the process image's, as it says (say.h) */
	uint64_t calls, wait_ms;
};
struct speaker_total {
	uint64_t calls, wait_ms, max_ms;
};

struct speaker {
	int fd;
	const char *seg_path;   /* the socket of the segment the sections are of, for
	                         * their names */
	const struct sl_shm *local; /* or that segment itself, when this process hosts
	                             * its daemon (whose server it must not wait on) */
	ev_io io;
	ev_timer flush;
	struct speaker_news news[SPEAK_SLOTS];
	uint32_t noticed[SPEAK_NOTICES]; /* hashes of the notices said */
	unsigned nnoticed;
	struct speaker_sum sums[SPEAK_SUMS];
	unsigned nsums;
	struct speaker_total total[SPEAK_SLOTS]; /* by section, as news[] */
};

/* Listen, and set SLUICE_SAY for the command and this process's supervisor.
 * -errno when no socket could be made (the run goes on, silent). */
int speaker_start(struct speaker *s, struct ev_loop *loop, const char *seg_path, const struct sl_shm *local);

/* Say what is still unsaid, and stop listening. */
void speaker_stop(struct speaker *s, struct ev_loop *loop);

/* The run's summary, once its command has ended: one line per section whose
 * calls were held at all (calls, total and longest wait); nothing when none was. */
void speaker_summary(struct speaker *s);

#endif
