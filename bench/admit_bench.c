/*
 * admit_bench [PROCS] [ITERATIONS]: the cost of one admission - match, then reserve
 * and release in one hold of the segment lock, as the shim does for a call whose
 * slot is due (sl_admit_reserve_go_act) - in nanoseconds, with PROCS processes doing it
 * at once on one section (so they contend for the segment lock).  The section's rate
 * is so high that nobody ever sleeps: this measures the bookkeeping alone.
 *
 * admit_bench keyed KEYS [ITERATIONS]: one process, a keyed section (per = address)
 * with KEYS keys in use, each admission to one of them in a scattered order, then
 * to one key over and over (the table as full); prints both costs and, measured in
 * the same run, the floor they are held to: one monotonic clock read and one
 * uncontended compare-and-swap on a word in shared memory.
 *
 * admit_bench match SECTIONS [ITERATIONS]: the cost of finding which sections apply
 * (sl_match_sections, through the match index) in a config of SECTIONS sections of ten
 * patterns each (names, suffixes, networks of three lengths, IPv6), for a
 * destination one section applies to by name and for one no section applies to.
 *
 * admit_bench fleet [ITERATIONS]: one process, the same admission in a section of
 * this machine's (scope = machine) and in one shared by the fleet (scope = fleet,
 * answering from a lease the bench writes as the daemon would), alternating over
 * five rounds; prints both medians.  The hot path of a shared section is local:
 * the two should cost the same.
 *
 * admit_bench quota DIR [ITERATIONS]: durable quotas (quota.h).  The same admission
 * in a plain fixed window of a day and in a durable one (spending quota_left),
 * alternating over five rounds, both medians; then a keyed durable section with
 * 100,000 keys saved into DIR: the median of five passes that grant every key a
 * chunk (snapshot, write, fsync, rename, grant) in ms, and the file's size in bytes.
 */
#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/keys.h"
#include "sluice/lease.h"
#include "sluice/quota.h"
#include "sluice/roster.h"
#include "sluice/shm.h"
#include "sluice/strategy.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The destination of key k: 10.x.y.z. */

/* This process entered in h's roster, as a keeper enters one that attaches: its
 * token names it in the lock word (roster.h). */
static int32_t enter(struct sl_shm_header *h)
{
	struct sl_proc_id me = sl_roster_me();

	return sl_roster_enter(h, &me, me.pid, me.stamp, NULL);
}

static void key_dest(struct sl_dest *d, uint32_t k)
{
	d->family = AF_INET;
	d->port = 443;
	d->addr[0] = 10;
	d->addr[1] = (uint8_t)(k >> 16);
	d->addr[2] = (uint8_t)(k >> 8);
	d->addr[3] = (uint8_t)k;
}

/* One admission of d whose slot is due: 0, or -1 when it did not go at once. */
static int admit_now(struct sl_shm_header *h, const struct sl_dest *d, struct sl_match *m,
                     struct sl_ticket *t, int32_t self)
{
	int64_t retry;
	int went;

	if (sl_match_sections(h, d, m, self) <= 0 ||
	    sl_admit_reserve_go_act(h, m, sl_clock_mono_ns(), self, t, 0, &went, &retry, NULL, NULL) != 0)
		return -1;
	return went == 0 ? 0 : -1;
}

/* ns per admission over `iterations`, to key `fixed`, or (fixed < 0) to every key
 * in turn, scattered: a stride prime to the key count visits them all. */
static double keyed_pass(struct sl_shm_header *h, long keys, long iterations, long fixed,
                         struct sl_match *m, struct sl_ticket *t, int32_t self)
{
	struct sl_dest d = {0};
	int64_t start = sl_clock_mono_ns();

	key_dest(&d, (uint32_t)fixed);
	for (long i = 0; i < iterations; i++) {
		if (fixed < 0)
			key_dest(&d, (uint32_t)((uint64_t)i * 7919u % (uint64_t)keys));
		if (admit_now(h, &d, m, t, self) < 0)
			return -1;
	}
	return (double)(sl_clock_mono_ns() - start) / (double)iterations;
}

static double run(struct sl_shm_header *h, long iterations)
{
	struct sl_dest d = {.family = AF_INET, .port = 443};
	int32_t self = enter(h); /* a process of its own: a token of its own */
	int64_t start;
	struct sl_match m;
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;

	inet_pton(AF_INET, "203.0.113.7", d.addr);
	start = sl_clock_mono_ns();
	for (long i = 0; i < iterations; i++)
		if (admit_now(h, &d, &m, t, self) < 0)
			return -1;
	return (double)(sl_clock_mono_ns() - start) / (double)iterations;
}

static int keyed(long keys, long iterations)
{
	static struct sl_config cfg;
	struct sl_shm_dims dims;
	static struct sl_match m;
	static union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	struct sl_dest d = {0};
	char ini[256], name[64];
	struct sl_shm shm;
	int32_t self = (int32_t)getpid();
	_Atomic uint64_t *word;
	int64_t start;
	double cost, hot, floor;
	uint64_t seen = 0;

	snprintf(name, sizeof(name), "/sluice-bench-%d", (int)getpid());
	snprintf(ini, sizeof(ini), "[sluice]\nkeys = %ld\n[each]\nmatch = 10.0.0.0/8\nper = address\n"
	         "rate = 1000000000/s\nburst = 1000000000\n", keys + keys / 3);
	if (sl_config_load_string(&cfg, "bench.ini", ini) != 0 || (sl_config_dims(&cfg, &dims), 0) ||
	    sl_shm_create(&shm, name, &dims) != 0 || (sl_shm_publish(shm.hdr), (self = enter(shm.hdr)) <= 0) ||
	    sl_shm_apply_config(shm.hdr, &cfg, self) != 0) {
		fprintf(stderr, "admit_bench: keyed set-up failed\n");
		return 1;
	}
	word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	for (long k = 0; k < keys; k++) { /* every key in use */
		key_dest(&d, (uint32_t)k);
		if (admit_now(shm.hdr, &d, &m, t, self) < 0) {
			fprintf(stderr, "admit_bench: key %ld not made (%u in use)\n", k, shm.hdr->keys_used);
		sl_shm_detach(&shm);
			return 1;
		}
	}
	cost = keyed_pass(shm.hdr, keys, iterations, -1, &m, t, self);
	/* One key over and over, the table as full: the look-up's own work, with the
	 * key in the cache rather than in memory. */
	hot = keyed_pass(shm.hdr, keys, iterations, keys / 2, &m, t, self);
	if (cost < 0 || hot < 0) {
		fprintf(stderr, "admit_bench: keyed admission failed\n");
		sl_shm_detach(&shm);
		return 1;
	}
	start = sl_clock_mono_ns();
	for (long i = 0; i < iterations; i++) {
		uint64_t expect = seen;

		seen += (uint64_t)sl_clock_mono_ns() & 1;
		atomic_compare_exchange_strong(word, &expect, seen);
	}
	floor = (double)(sl_clock_mono_ns() - start) / (double)iterations;
	printf("%.0f %.0f %.0f %u\n", cost, hot, floor, shm.hdr->keys_used);
	sl_shm_detach(&shm);
	return 0;
}

/* ns per sl_match_sections of d in h. */
static double match_cost(struct sl_shm_header *h, const struct sl_dest *d, long iterations, int want)
{
	struct sl_match m;
	int64_t start = sl_clock_mono_ns();

	for (long i = 0; i < iterations; i++)
		if (sl_match_sections(h, d, &m, 1) != want)
			return -1;
	return (double)(sl_clock_mono_ns() - start) / (double)iterations;
}

static int match(long sections, long iterations)
{
	static struct sl_config cfg;
	struct sl_shm_dims dims;
	struct sl_shm shm;
	size_t cap = (size_t)sections * 400 + 256, used = 0;
	char *ini = malloc(cap), name[64];
	struct sl_dest d = {.family = AF_INET, .port = 443};
	double hit, miss;

	for (long i = 0; ini && i < sections; i++)
		used += (size_t)snprintf(ini + used, cap - used,
		                         "[s%ld]\nmatch = h%ld.bench.test, api.h%ld.bench.test:443, h%ld.bench.test:80\n"
		                         "  hooks.h%ld.bench.test, *.z%ld.bench.test, *.y%ld.bench.test:443\n"
		                         "  10.%ld.%ld.0/24, 10.%ld.%ld.7, 172.%ld.0.0/16:443\n"
		                         "  2001:db8:%lx::/48\nrate = 10/s\n",
		                         i, i, i, i, i, i, i, (i >> 8) & 255, i & 255, (i >> 8) & 255, i & 255,
		                         16 + (i & 15), i);
	if (!ini || sl_config_load_string(&cfg, "bench.ini", ini) != 0 || (sl_config_dims(&cfg, &dims), 0) ||
	    sl_shm_create_anonymous_dims(&shm, &dims) != 0 || sl_shm_apply_config(shm.hdr, &cfg, 1) != 0) {
		fprintf(stderr, "admit_bench: match set-up failed\n");
		return 1;
	}
	/* One section applies: by its exact name (its address is no section's). */
	snprintf(name, sizeof(name), "api.h%ld.bench.test", sections / 2);
	d.name = name;
	d.name_len = strlen(name);
	inet_pton(AF_INET, "192.0.2.1", d.addr);
	hit = match_cost(shm.hdr, &d, iterations, 1);
	/* None applies: a name and an address no pattern takes. */
	d.name = "www.example.org";
	d.name_len = strlen(d.name);
	miss = match_cost(shm.hdr, &d, iterations, 0);
	if (hit < 0 || miss < 0) {
		fprintf(stderr, "admit_bench: a match found the wrong sections\n");
		return 1;
	}
	printf("%.0f %.0f %u\n", hit, miss, cfg.npatterns);
	free(ini);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ns per admission to `d`, `iterations` of them. */
static double dest_pass(struct sl_shm_header *h, const struct sl_dest *d, long iterations)
{
	struct sl_match m;
	union sl_ticket_room t_room;
	struct sl_ticket *const t = &t_room.t;
	int32_t self = enter(h);
	int64_t start = sl_clock_mono_ns();

	for (long i = 0; i < iterations; i++)
		if (admit_now(h, d, &m, t, self) < 0)
			return -1;
	return (double)(sl_clock_mono_ns() - start) / (double)iterations;
}

static int fleet(long iterations)
{
	static struct sl_config cfg;
	struct sl_shm_dims dims;
	struct sl_shm shm;
	struct sl_dest local = {.family = AF_INET, .port = 443}, shared = {.family = AF_INET, .port = 443};
	struct sl_grant g = {.flags = SL_LEASE_RATE, .amount = 1000000000, .window_ns = 1000000000,
	                     .burst = 1000000000, .valid_ns = INT64_MAX / 4, .machines = 3};
	double a[5], b[5];

	inet_pton(AF_INET, "203.0.113.7", local.addr);
	inet_pton(AF_INET, "198.51.100.7", shared.addr);
	if (sl_config_load_string(&cfg, "bench.ini",
	                          "[sluice]\nredis = 127.0.0.1:6379\n"
	                          "[local]\nmatch = 203.0.113.0/24\nrate = 1000000000/s\nburst = 1000000000\n"
	                          "[shared]\nmatch = 198.51.100.0/24\nrate = 1000000000/s\nburst = 1000000000\n"
	                          "scope = fleet\n") != 0 ||
	    (sl_config_dims(&cfg, &dims), 0) || sl_shm_create_anonymous_dims(&shm, &dims) != 0 ||
	    sl_shm_apply_config(shm.hdr, &cfg, (int32_t)getpid()) != 0) {
		fprintf(stderr, "admit_bench: set-up failed\n");
		return 1;
	}
	sl_lease_write(&sl_shm_section(shm.hdr, 1)->state, &g, sl_clock_mono_ns());
	for (int r = 0; r < 5; r++) {
		a[r] = dest_pass(shm.hdr, &local, iterations);
		b[r] = dest_pass(shm.hdr, &shared, iterations);
		if (a[r] < 0 || b[r] < 0) {
			fprintf(stderr, "admit_bench: admission failed\n");
			return 1;
		}
	}
	qsort(a, 5, sizeof(a[0]), cmp_double);
	qsort(b, 5, sizeof(b[0]), cmp_double);
	printf("%.0f %.0f\n", a[2], b[2]);
	return 0;
}

static int64_t never_blocked(const char *section, void *arg)
{
	(void)section;
	(void)arg;
	return 0;
}

static int quota(const char *dir, long iterations)
{
	static struct sl_config cfg;
	struct sl_shm_dims dims;
	struct sl_shm shm;
	struct sl_dest plain = {.family = AF_INET, .port = 443}, durable = {.family = AF_INET, .port = 443};
	struct sl_quota_files f;
	struct sl_quota_grants g = {0};
	struct sl_state *st;
	struct stat sb;
	double a[5], b[5], save[5];
	int32_t self = (int32_t)getpid();

	inet_pton(AF_INET, "203.0.113.7", plain.addr);
	inet_pton(AF_INET, "198.51.100.7", durable.addr);
	if (sl_config_load_string(&cfg, "bench.ini",
	                          "[sluice]\nkeys = 262144\n"
	                          "[plain]\nmatch = 203.0.113.0/24\nrate = 1000000000000/d\nstrategy = fixed-window\n"
	                          "[durable]\nmatch = 198.51.100.0/24\nrate = 1000000000000/d\nstrategy = fixed-window\n"
	                          "[keyed]\nmatch = 10.0.0.0/8\nper = address\nrate = 5000/mo\n"
	                          "strategy = fixed-window\n") != 0) {
		fprintf(stderr, "admit_bench: bad config\n");
		return 1;
	}
	cfg.sections[1].spec.durable = cfg.sections[2].spec.durable = 1; /* as sluiced marks them */
	sl_config_dims(&cfg, &dims);
	if (sl_shm_create_anonymous_dims(&shm, &dims) != 0 || sl_shm_apply_config(shm.hdr, &cfg, self) != 0) {
		fprintf(stderr, "admit_bench: set-up failed\n");
		return 1;
	}
	st = &sl_shm_section(shm.hdr, 1)->state;
	for (int r = 0; r < 5; r++) {
		st->quota_left = UINT32_MAX; /* granted: a pass measures the rest */
		a[r] = dest_pass(shm.hdr, &plain, iterations);
		b[r] = dest_pass(shm.hdr, &durable, iterations);
		if (a[r] < 0 || b[r] < 0) {
			fprintf(stderr, "admit_bench: admission failed\n");
			return 1;
		}
	}
	/* 100,000 keys, each with a count in this month */
	for (uint32_t k = 0; k < 100000; k++) {
		struct sl_dest d;
		struct sl_keysrc src;
		struct sl_key *key;
		struct sl_undo undo;

		key_dest(&d, k);
		sl_keysrc_from_dest(&src, &d);
		if (!(key = sl_keys_find(shm.hdr, 2, &src, 1, sl_clock_mono_ns()))) {
			fprintf(stderr, "admit_bench: key %u not made\n", k);
			return 1;
		}
		sl_strategy_charge(&sl_shm_section(shm.hdr, 2)->spec, &key->state, sl_clock_mono_ns(), 1 + k % 7,
		                   shm.hdr->wall_off_ns, &undo);
		sl_strategy_released(&sl_shm_section(shm.hdr, 2)->spec, &key->state, sl_clock_mono_ns(), 1 + k % 7,
		                     shm.hdr->wall_off_ns);
	}
	sl_quota_files(&f, dir, "/admit-bench");
	for (int r = 0; r < 5; r++) {
		int64_t t0;

		/* every key spent: each pass grants all of them a chunk */
		for (uint32_t s = 0; s < sl_shm_nkeys(shm.hdr); s++)
			sl_shm_key_at(shm.hdr, s)->state.quota_left = 0;
		t0 = sl_clock_mono_ns();
		if (sl_quota_pass(shm.hdr, self, SL_QUOTA_GRANT, never_blocked, NULL, &f, &g) != 0 || g.n < 100000) {
			fprintf(stderr, "admit_bench: the save failed (%zu granted)\n", g.n);
			return 1;
		}
		save[r] = (double)(sl_clock_mono_ns() - t0) / 1e6;
	}
	if (stat(f.path, &sb) != 0)
		return 1;
	unlink(f.path);
	free(g.g);
	qsort(a, 5, sizeof(a[0]), cmp_double);
	qsort(b, 5, sizeof(b[0]), cmp_double);
	qsort(save, 5, sizeof(save[0]), cmp_double);
	printf("%.0f %.0f %.1f %lld\n", a[2], b[2], save[2], (long long)sb.st_size);
	return 0;
}

/* What a key costs: its record, and the segment's bytes per key slot (record and
 * tag, measured as two layouts' difference) - plain, and with the more a keyed
 * sliding window, fleet or signals section needs (shm-t.h). */
static int sizes(void)
{
	for (uint32_t more = 0; more <= 1; more++) {
		struct sl_shm_dims a = {64, 1024, SL_HOLDERS_DEFAULT, 1000, more, SL_PROCS_DEFAULT}, b = a;
		struct sl_shm_layout la, lb;

		b.keys = 101000;
		if (sl_shm_layout(&a, &la) < 0 || sl_shm_layout(&b, &lb) < 0)
			return 1;
		printf("%s%zu %.0f", more ? " " : "", sl_shm_key_size(&a), (double)(lb.size - la.size) / 100000.0);
	}
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "sizes") == 0)
		return sizes();
	if (argc > 2 && strcmp(argv[1], "quota") == 0)
		return quota(argv[2], argc > 3 ? atol(argv[3]) : 1000000);
	if (argc > 1 && strcmp(argv[1], "fleet") == 0)
		return fleet(argc > 2 ? atol(argv[2]) : 1000000);
	if (argc > 2 && strcmp(argv[1], "keyed") == 0)
		return keyed(atol(argv[2]), argc > 3 ? atol(argv[3]) : 1000000);
	if (argc > 2 && strcmp(argv[1], "match") == 0)
		return match(atol(argv[2]), argc > 3 ? atol(argv[3]) : 1000000);
	int procs = argc > 1 ? atoi(argv[1]) : 1;
	long iterations = argc > 2 ? atol(argv[2]) : 1000000;
	static struct sl_config cfg;
	char name[64];
	struct sl_shm shm;
	struct sl_shm_dims dims = SL_SHM_DIMS_DEFAULT;
	double *results;

	snprintf(name, sizeof(name), "/sluice-bench-%d", (int)getpid());
	if (sl_config_load_string(&cfg, "bench.ini",
	                          "[other]\nmatch = 198.51.100.0/24\nrate = 1/s\n"
	                          "[api]\nmatch = *.example.com, 203.0.113.0/24:443\n"
	                          "rate = 1000000000/s\nburst = 1000000000\n") != 0 ||
	    sl_shm_create(&shm, name, &dims) != 0 || (sl_shm_publish(shm.hdr), (shm.self = enter(shm.hdr)) <= 0) ||
	    sl_shm_apply_config(shm.hdr, &cfg, shm.self) != 0) {
		fprintf(stderr, "admit_bench: set-up failed\n");
		return 1;
	}
	results = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	for (int p = 0; p < procs; p++) {
		if (fork() == 0) {
			results[p] = run(shm.hdr, iterations);
			_exit(0);
		}
	}
	for (int p = 0; p < procs; p++)
		wait(NULL);
	sl_shm_detach(&shm);
	for (int p = 0; p < procs; p++) {
		if (results[p] < 0) {
			fprintf(stderr, "admit_bench: admission failed\n");
			return 1;
		}
	}
	double sum = 0;
	for (int p = 0; p < procs; p++)
		sum += results[p];
	printf("%.0f\n", sum / procs);
	return 0;
}
