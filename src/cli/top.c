/*
 * `sluice top`: every section (and the busiest keys of keyed sections, each with
 * its pause and fleet share; a fleet section's lease), refreshed about once a
 * second, read straight from the segment's counters (no lock, no daemon needed).  On a terminal: a full-screen table, sorted by a key
 * (n name, a achieved rate, b backlog - queued, r refused, w wait p99), quit
 * with q.
 * Elsewhere (a pipe, a file): the same table printed each interval, until
 * --count tables or a signal.
 */
#include "cli.h"
#include "sluice/clock.h"
#include "sluice/delivery.h"
#include "sluice/keys.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/pause.h"
#include "sluice/shm.h"
#include "sluice/stats.h"
#include "sluice/units.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define TOP_KEYS 3 /* per keyed section */

struct row {
	char name[SL_SECTION_NAME_MAX];
	char rate[32];
	double achieved;       /* per second since the last refresh */
	uint64_t queued, open, limit;
	int64_t next_ns; /* until a request asking now would go (-1: no one queue) */
	uint64_t count[SL_NCOUNTERS]; /* the counters (counters.def) */
	int64_t p50_ns, p99_ns, paused_ns;
	int64_t late50_ns, late99_ns; /* releases after their slots, the daemon's window; -1: none */
	unsigned idx;
	char fleet[200];       /* a fleet section's lease, as `sluice stat` says it; "" if local */
	struct {
		char name[80];
		uint64_t admitted;
		int64_t paused_ns; /* the key's own pause, time left */
		char share[24];    /* a fleet key's share; "" if local */
	} keys[TOP_KEYS];
	unsigned nkeys;
};

static volatile sig_atomic_t stop;
static struct termios saved;
static int raw_mode;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static void restore_terminal(void)
{
	if (raw_mode) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
		fputs("\033[?25h\033[?1049l", stdout); /* cursor back, main screen */
		fflush(stdout);
		raw_mode = 0;
	}
}

/* A keyed section's busiest keys (sl_stats_key_views: the walk `sluice stat` makes),
 * each with its pause and, in a fleet section, its share. */
static void keys_of(struct sl_shm_header *h, const struct sl_key_views *kv, const struct sl_section *sec,
                    struct row *r, int64_t now)
{
	static struct sl_key_more kc; /* large: off the stack */
	struct sl_key *copy = &kc.key;
	const struct sl_key_top *top;
	unsigned n = sl_stats_busiest_keys(kv, r->idx, &top);

	for (unsigned j = 0; j < n && r->nkeys < TOP_KEYS; j++) {
		struct sl_key *k = sl_shm_key_at(h, top[j].slot);
		typeof(r->keys[0]) *w = &r->keys[r->nkeys];

		if (!k)
			continue;
		sl_key_read(h, k, &kc);
		if (copy->section != r->idx)
			continue; /* reused since the walk */
		sl_keyid_format(&copy->id, w->name, sizeof(w->name));
		w->admitted = copy->state.admitted;
		w->paused_ns = sl_sane_ns(kc.key.state.pause.until_ns) > now ? sl_sane_ns(kc.key.state.pause.until_ns) - now : 0;
		w->share[0] = '\0';
		if (sl_limit_fleet(&sec->spec) && kc.more.lease.flags & SL_LEASE_RATE && kc.more.lease.window_ns > 0)
			snprintf(w->share, sizeof(w->share), "share %.2f",
			         (double)kc.more.lease.amount * (double)sec->spec.window_ns /
			         (double)kc.more.lease.window_ns);
		r->nkeys++;
	}
}

/* The segment's sections now; `last` (the previous refresh's admissions by index,
 * grown as needed) gives the achieved rate over `dt` seconds. */
static unsigned gather(struct sl_shm_header *h, struct row **rows, uint64_t **last, unsigned *nlast, double dt,
                       int64_t now)
{
	static struct sl_section sec;
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	struct sl_key_views *kv = sl_stats_key_views(h, TOP_KEYS, now);
	unsigned n = 0;
	struct row *r = realloc(*rows, (size_t)(used ? used : 1) * sizeof(*r));

	if (!r) {
		sl_stats_key_views_free(kv);
		return 0;
	}
	*rows = r;
	if (used > *nlast) {
		uint64_t *more = realloc(*last, (size_t)used * sizeof(*more));

		if (!more) {
			sl_stats_key_views_free(kv);
			return 0;
		}
		memset(more + *nlast, 0, (size_t)(used - *nlast) * sizeof(*more));
		*last = more;
		*nlast = used;
	}
	for (uint32_t i = 0; i < used; i++) {
		struct row *w = &r[n];

		memcpy(&sec, sl_shm_section(h, i), sizeof(sec));
		if (!sec.in_use)
			continue;
		memset(w, 0, sizeof(*w));
		snprintf(w->name, sizeof(w->name), "%.*s", SL_SECTION_NAME_MAX - 1, sec.spec.name);
		if (sec.spec.amount)
			sl_format_rate(sec.spec.amount, sec.spec.window_ns, sec.spec.calendar, sec.spec.meter == SL_METER_BYTES, w->rate,
			               sizeof(w->rate));
		else
			snprintf(w->rate, sizeof(w->rate), "-");
		for (unsigned c = 0; c < SL_NCOUNTERS; c++)
			w->count[c] = sl_counter_of(&sec, c);
		{
			uint64_t admitted = w->count[SL_COUNTER_admitted];

			w->achieved = dt > 0 && (*last)[i] && admitted >= (*last)[i] ? (double)(admitted - (*last)[i]) / dt : 0;
			(*last)[i] = admitted;
		}
		w->queued = sec.spec.per ? 0 : sl_limit_queued(&sec.spec, &sec.state, now, sl_sane_ns(h->wall_off_ns));
		{
			static struct sl_section scratch; /* sl_stats_next_slot_ns may change it */

			memcpy(&scratch, &sec, sizeof(scratch));
			w->next_ns = sl_stats_next_slot_ns(&scratch, now, sl_sane_ns(h->wall_off_ns));
		}
		w->open = sec.state.conc_open;
		w->limit = sec.spec.concurrency;
		w->p50_ns = sl_stats_wait_quantile(&sec, 0.5);
		w->p99_ns = sl_stats_wait_quantile(&sec, 0.99);
		{
			struct sl_delivery_view dv;
			int have = sl_delivery_view(&sec, &dv) && dv.releases;

			w->late50_ns = have ? dv.late_p50_ns : -1;
			w->late99_ns = have ? dv.late_p99_ns : -1;
		}
		w->paused_ns = sl_sane_ns(sec.state.pause.until_ns) > now ? sl_sane_ns(sec.state.pause.until_ns) - now : 0;
		w->idx = i;
		if (sl_limit_fleet(&sec.spec) && sec.spec.per == SL_PER_NONE) /* keyed: each key its lease */
			sl_stats_format_lease(&sec.spec, &sec.state, now, w->fleet, sizeof(w->fleet));
		if (sec.spec.per != SL_PER_NONE)
			keys_of(h, kv, &sec, w, now);
		n++;
	}
	sl_stats_key_views_free(kv);
	return n;
}

static char sort_by = 'n';

static int compare(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	switch (sort_by) {
	case 'a': return x->achieved < y->achieved ? 1 : x->achieved > y->achieved ? -1 : 0;
	case 'b': return x->queued < y->queued ? 1 : x->queued > y->queued ? -1 : 0;
	case 'r': {
		uint64_t rx = x->count[SL_COUNTER_refused], ry = y->count[SL_COUNTER_refused];

		return rx < ry ? 1 : rx > ry ? -1 : 0;
	}
	case 'w': return x->p99_ns < y->p99_ns ? 1 : x->p99_ns > y->p99_ns ? -1 : 0;
	default: return strcmp(x->name, y->name);
	}
}

/* A lateness bucket's bound in a column: "<64us", "<1.0ms"; "-" for none. */
static void late_cell(int64_t ns, char *buf, size_t size)
{
	if (ns < 0)
		snprintf(buf, size, "-");
	else if (ns == INT64_MAX)
		snprintf(buf, size, ">%.0fs", (double)sl_delivery_bucket_upper_ns(SL_LATE_BUCKETS - 2) / 1e9);
	else if (ns < SL_NS_PER_MS)
		snprintf(buf, size, "<%lldus", (long long)(ns / 1000));
	else if (ns < SL_NS_PER_S)
		snprintf(buf, size, "<%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, size, "<%.1fs", (double)ns / 1e9);
}

static void print_table(const char *shm, const struct row *r, unsigned n)
{
	static const char *const names[] = {"n", "name", "a", "achieved", "b", "queued", "r", "refused",
	                                    "w", "wait p99"};
	const char *by = "name";

	for (unsigned i = 0; i < SL_ARRAY_LEN(names); i += 2)
		if (names[i][0] == sort_by)
			by = names[i + 1];
	printf("sluice top - segment %s, %u sections, sorted by %s (keys n a b r w sort, q quits)\n\n", shm, n, by);
	printf("%-20s %10s %9s %7s", "SECTION", "RATE", "ACHIEVED", "QUEUED");
	for (unsigned c = 0; c < SL_NCOUNTERS; c++)
		if (sl_counters[c].column)
			printf(" %9s", sl_counters[c].column);
	printf(" %9s %9s %9s %9s %9s %9s %s\n", "WAIT_P50", "WAIT_P99", "LATE_P50", "LATE_P99", "NEXT_SLOT", "OPEN",
	       "PAUSED");
	for (unsigned i = 0; i < n; i++) {
		char open[24] = "-", paused[24] = "-", l50[16], l99[16], next[16] = "-";

		if (r[i].limit)
			snprintf(open, sizeof(open), "%llu/%llu", (unsigned long long)r[i].open,
			         (unsigned long long)r[i].limit);
		if (r[i].paused_ns)
			snprintf(paused, sizeof(paused), "%.1fs", (double)r[i].paused_ns / 1e9);
		late_cell(r[i].late50_ns, l50, sizeof(l50));
		late_cell(r[i].late99_ns, l99, sizeof(l99));
		printf("%-20s %10s %8.1f/s %7llu", r[i].name, r[i].rate, r[i].achieved, (unsigned long long)r[i].queued);
		for (unsigned c = 0; c < SL_NCOUNTERS; c++)
			if (sl_counters[c].column)
				printf(" %9llu", (unsigned long long)r[i].count[c]);
		if (r[i].next_ns >= 0)
			snprintf(next, sizeof(next), "%.1fms", (double)r[i].next_ns / 1e6);
		printf(" %7.1fms %7.1fms %9s %9s %9s %9s %s\n", (double)r[i].p50_ns / 1e6, (double)r[i].p99_ns / 1e6, l50,
		       l99, next, open, paused);
		if (r[i].fleet[0])
			printf("  fleet: %s\n", r[i].fleet);
		for (unsigned k = 0; k < r[i].nkeys; k++) {
			printf("  key %-34s %9llu admitted", r[i].keys[k].name, (unsigned long long)r[i].keys[k].admitted);
			if (r[i].keys[k].share[0])
				printf(", %s", r[i].keys[k].share);
			if (r[i].keys[k].paused_ns)
				printf(", paused %.1fs", (double)r[i].keys[k].paused_ns / 1e9);
			putchar('\n');
		}
	}
}

int sl_cmd_top(int argc, char **argv)
{
	static const struct option longopts[] = {{"segment", required_argument, NULL, 's'},
	                                         {"count", required_argument, NULL, 'n'},
	                                         {"interval", required_argument, NULL, 'i'}, {0}};
	const char *path = NULL, *seg_path = NULL;
	char seg_buf[108];
	struct row *rows = NULL;
	uint64_t *last = NULL;
	unsigned nlast = 0;
	long count = -1;
	double interval = 1.0;
	int opt, tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	struct sl_shm shm;
	int64_t prev = 0;
	int rc;

	while ((opt = getopt_long(argc, argv, "c:s:n:i:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 's': seg_path = optarg; break;
		case 'n': count = atol(optarg); break;
		case 'i': interval = atof(optarg); break;
		default:
			fprintf(stderr, "usage: sluice top [-c FILE] [--segment SOCKET] [--interval S] [--count N]\n");
			return SL_EXIT_USAGE;
		}
	}
	if (interval < 0.1 || interval > 3600)
		interval = 1.0;
	if (!seg_path) {
		struct sl_config *cfg = sl_cli_load(sl_cli_config_path(path));

		if (!cfg)
			return SL_EXIT_USAGE;
		rc = sl_cli_segment_path(cfg, seg_buf, sizeof(seg_buf));
		sl_config_free(cfg);
		free(cfg);
		if (rc < 0) {
			fprintf(stderr, "sluice: control_socket = none: no shared segment to show\n");
			return SL_EXIT_FAIL;
		}
		seg_path = seg_buf;
	}
	if (sl_cli_attach(seg_path, &shm) < 0)
		return SL_EXIT_FAIL;
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	if (tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
		struct termios t = saved;

		t.c_lflag &= ~(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0) {
			raw_mode = 1;
			fputs("\033[?1049h\033[?25l", stdout); /* alternate screen, no cursor */
		}
	}
	for (long shown = 0; !stop && (count < 0 || shown < count); shown++) {
		int64_t now = sl_clock_mono_ns();
		unsigned n = gather(shm.hdr, &rows, &last, &nlast, prev ? (double)(now - prev) / 1e9 : 0, now);
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		int64_t until = now + (int64_t)(interval * 1e9);

		prev = now;
		qsort(rows, n, sizeof(*rows), compare);
		if (raw_mode)
			fputs("\033[H\033[2J", stdout);
		else if (shown)
			putchar('\n');
		print_table(seg_path, rows, n);
		fflush(stdout);
		if (count >= 0 && shown + 1 >= count)
			break;
		/* Wait out the interval; on a terminal, a key redraws at once. */
		while (!stop && sl_clock_mono_ns() < until) {
			int left = (int)((until - sl_clock_mono_ns()) / SL_NS_PER_MS) + 1;
			char c;

			if (!raw_mode) {
				poll(NULL, 0, left);
				continue;
			}
			if (poll(&pfd, 1, left) > 0 && read(STDIN_FILENO, &c, 1) == 1) {
				if (c == 'q') {
					stop = 1;
				} else if (c && strchr("nabrw", c)) {
					sort_by = c;
					break; /* redraw now */
				}
			}
		}
	}
	restore_terminal();
	sl_shm_detach(&shm);
	free(rows);
	free(last);
	return SL_EXIT_OK;
}
