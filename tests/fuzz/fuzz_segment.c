/*
 * libFuzzer target for the shared segment as untrusted input (`make fuzz`): the
 * input is laid over a segment - its header (magic, version and sizes kept valid,
 * so every path runs), its sections, its holder table, its key table - and then
 * every reader and
 * writer of the segment runs over it: matching, reserving, releasing, refunding,
 * the concurrency places, stat in both forms, and the daemon's heartbeat (lock
 * reaping, dead waiters, dead holders, corrupt-state repair).  Nothing may crash,
 * hang or read out of bounds; every time read from the segment is clamped.
 */
#include "sluice/admit.h"
#include "sluice/common.h"
#include "sluice/conc.h"
#include "sluice/keys.h"
#include "sluice/shm.h"
#include "sluice/stats.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NOW (5000 * 1000000000LL)

static int all_dead(struct sl_shm_header *h, int32_t owner)
{
	(void)h;
	(void)owner;
	return 1;
}

static void exercise(struct sl_shm_header *h, const char *addr, uint16_t port, int meter)
{
	struct sl_dest d = {.family = AF_INET, .port = port, .meter = meter};
	struct sl_match m;
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	uint64_t taken = 0;
	uint32_t seen = 0;
	int full = 0;
	int64_t retry = 0;

	inet_pton(AF_INET, addr, d.addr);
	d.name = "api.example.com";
	d.name_len = strlen(d.name);
	if (sl_match_sections(h, &d, &m, 7) <= 0)
		return;
	if (sl_admit_reserve(h, &m, NOW, 7, t) == 0) {
		/* Released at the slot, then up to a few retries: each bounded. */
		int64_t at = t->release_ns;

		for (int i = 0; i < 4 && sl_admit_release(h, t, at, 7, &retry) == 1; i++)
			at = retry;
		sl_admit_refund(h, t, 7);
	}
	sl_admit_check(h, &m, NOW, 7, t);
	sl_admit_reserve_bytes(h, &m, NOW, 7, t, 65536);
	sl_admit_moved(h, &m, NOW - 1000, NOW, 7);
	if (sl_conc_take(h, &m, 7, &taken, &full, &seen) == 0 && taken)
		sl_conc_put(h, taken, &m, 7);
}

/* Small tables: each run clears the whole segment. */
static const struct sl_shm_dims fuzz_dims = {16, 64, 64, 64, 0, 64};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sl_shm shm;
	struct sl_shm_header *h;
	const struct sl_shm_view *v;
	static FILE *null;
	size_t head, FUZZ_SIZE;

	if (!shm.hdr && sl_shm_create_anonymous_dims(&shm, &fuzz_dims) != 0)
		return 0;
	h = shm.hdr;
	v = sl_shm_view(h);
	FUZZ_SIZE = v->at.size;
	/* The input over the header (after its layout fields), then the sections, the
	 * holder table and the key table, as far as it goes. */
	memset((char *)h + 32, 0, FUZZ_SIZE - 32);
	/* Two copies, not a loop per byte: a 64 KiB input copied byte by byte spent
	 * most of each run in the loop's own coverage counters. */
	head = SL_MIN(size, sizeof(*h) - 32);
	memcpy((char *)h + 32, data, head);
	memcpy((char *)h + SL_SHM_SECTIONS_OFF, data + head,
	       SL_MIN(size - head, FUZZ_SIZE - SL_SHM_SECTIONS_OFF));
	/* The input again over the patterns and the match index, and over the key
	 * table (tags and records), so matching meets a scribbled index and keyed
	 * sections scribbled keys. */
	memcpy((char *)h + v->at.patterns, data, SL_MIN(size, v->at.holders - v->at.patterns));
	memcpy((char *)h + v->at.tags, data, SL_MIN(size, FUZZ_SIZE - v->at.tags));
	/* Scribbled table sizes are refused by validation (the size would not match);
	 * what is fuzzed is everything a process indexes under valid ones. */
	h->max_sections = fuzz_dims.sections;
	h->max_patterns = fuzz_dims.patterns;
	h->max_holders = fuzz_dims.holders;
	h->max_keys = fuzz_dims.keys;
	h->max_procs = fuzz_dims.procs;
	h->index_slots = v->index_slots;
	if (sl_shm_validate(h, FUZZ_SIZE) != 0)
		return 0;
	/* The daemon's heartbeat reaps whatever the lock word says (no waiting). */
	sl_shm_reap_lock(h);
	h->lock = 0; /* a lock word naming this very process would hold each call 2 s */
	exercise(h, "10.0.0.1", 443, SL_METER_CONNECTIONS);
	exercise(h, "192.0.2.7", 80, SL_METER_REQUESTS);
	exercise(h, "10.1.2.3", 8080, SL_METER_BYTES);
	sl_admit_reap_dead(h, NOW, 7, all_dead);
	sl_conc_reap_dead(h, 7, all_dead);
	sl_admit_repair(h, NOW, 7, NULL, 0);
	sl_keys_sweep(h);
	if (!null)
		null = fopen("/dev/null", "w"); /* kept open: one fopen per run was a syscall pair */
	if (null) {
		sl_stats_render(h, 0, NOW, null);
		sl_stats_render(h, 1, NOW, null);
	}
	return 0;
}
