/*
 * Rendering the segment's sections for `sluice stat` and the control socket, as text
 * or JSON.  Program-only: never linked into the shim.
 */
#include "sluice/roster.h"
#include "sluice/stats.h"
#include "sluice/common.h"
#include "sluice/config.h"
#include "sluice/delivery.h"
#include "sluice/keys.h"
#include "sluice/lease.h"
#include "sluice/pause.h"
#include "sluice/limiter.h"
#include "sluice/match.h"
#include "sluice/shm.h"
#include "sluice/strategy.h"
#include "sluice/units.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

const char *sl_stats_version = "unknown";

/* The counters, from counters.def (stats.h). */
const struct sl_counter sl_counters[SL_NCOUNTERS] = {
#define SL_COUNTER(part, field, column, phrase, help) \
	{#field, column, phrase, help, offsetof(struct sl_section, part.field)},
#include "sluice/counters.def"
#undef SL_COUNTER
};
#define SL_COUNTER(part, field, column, phrase, help) \
	_Static_assert(sizeof(((struct sl_section *)0)->part.field) == sizeof(uint64_t), #field " is a uint64_t counter");
#include "sluice/counters.def"
#undef SL_COUNTER

/* Its patterns as the config lists them, as many as fit in buf ("..." when
 * more do not).  Read from the segment: the range is clamped to the table. */
static void format_match(struct sl_shm_header *h, const struct sl_spec *s, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (uint32_t p = 0; p < s->npatterns; p++) {
		const struct sl_pattern *pat = sl_shm_pattern(h, s->pattern_first + p);
		char one[SL_HOST_MAX + 32];

		if (!pat || s->pattern_first + p < s->pattern_first)
			break;
		sl_pattern_format(pat, one, sizeof(one));
		if (used + strlen(one) + 5 >= size) {
			snprintf(buf + used, size - used, ",...");
			return;
		}
		used += (size_t)snprintf(buf + used, size - used, "%s%s", p ? "," : "", one);
	}
}

/* A consistent copy of slot i and its match (under the seqlock); 0 if unused. */
static int snapshot(struct sl_shm_header *h, unsigned i, struct sl_section *out, char *match,
                    size_t size)
{
	struct sl_section *sec = sl_shm_section(h, i);

	for (int tries = 0; sec && tries < 100; tries++) {
		uint32_t seq = atomic_load_explicit(A(&h->spec_seq), memory_order_acquire);

		if (seq & 1)
			continue;
		memcpy(out, sec, sizeof(*out));
		if (out->in_use)
			format_match(h, &out->spec, match, size);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(A(&h->spec_seq), memory_order_relaxed) == seq) {
			out->spec.name[SL_SECTION_NAME_MAX - 1] = '\0';
			return out->in_use != 0;
		}
	}
	return 0;
}

static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", *s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

/* --- keyed sections: their keys, read without the lock (a reader's view) --- */

struct key_view {
	uint64_t queued, open, seen;
	unsigned ntop;
	struct sl_key_top top[SL_STATS_TOP_MAX];
};

/* What the walk over the key table gathers, per keyed section. */
struct view_arg {
	struct sl_shm_header *h;
	int64_t now;
	unsigned top;
	uint32_t nsections;   /* sections looked at: those below slots_used */
	uint32_t *view_of;    /* section index -> its key_view + 1 (0: not keyed) */
	struct key_view *views;
};

static int view_key(struct sl_key *k, uint32_t slot, void *arg)
{
	static struct sl_key_more kc; /* large: off the stack */
	const struct sl_key *copy = &kc.key;
	const struct view_arg *va = arg;
	struct sl_section *sec;
	struct key_view *v;
	unsigned at;

	sl_key_read(va->h, k, &kc);
	if (copy->section >= va->nsections || !va->view_of[copy->section] ||
	    !(sec = sl_shm_section(va->h, copy->section)))
		return 0;
	v = &va->views[va->view_of[copy->section] - 1];
	v->seen++;
	v->queued += sl_limit_queued(&sec->spec, &copy->state, va->now, sl_sane_ns(va->h->wall_off_ns));
	v->open += copy->state.conc_open;
	/* Insert into the (short) list of the busiest, by admissions. */
	at = v->ntop;
	while (at > 0 && v->top[at - 1].admitted < copy->state.admitted)
		at--;
	if (at >= va->top)
		return 0;
	if (v->ntop < va->top)
		v->ntop++;
	memmove(&v->top[at + 1], &v->top[at], (v->ntop - 1 - at) * sizeof(v->top[0]));
	v->top[at] = (struct sl_key_top){slot, copy->state.admitted};
	return 0;
}

/* A fleet state's lease as it stands: its share (per the section's window) or its
 * chunk, its places, how many machines share it, how old it is. */
struct lease_view {
	double share;      /* rate: per the section's window; chunk: the count */
	int64_t age_ms;    /* -1: no lease yet */
	uint32_t places, machines;
	int outage;
	int lapsed;        /* past its validity: nothing goes on it (its daemon stopped) */
};

static struct lease_view lease_of(const struct sl_spec *s, const struct sl_state *st, int64_t now)
{
	const struct sl_lease *l = &sl_state_more(st)->lease;
	struct lease_view v = {0, -1, l->places, l->machines, (l->flags & SL_LEASE_OUTAGE) != 0,
	                       l->flags && sl_sane_ns(now) >= sl_sane_ns(l->valid_ns)};

	if (l->flags & SL_LEASE_RATE && l->window_ns > 0)
		v.share = (double)l->amount * (double)s->window_ns / (double)l->window_ns;
	else if (l->flags & SL_LEASE_CHUNK)
		v.share = (double)l->amount;
	if (l->flags)
		v.age_ms = (sl_sane_ns(now) - sl_sane_ns(l->granted_ns)) / SL_NS_PER_MS;
	return v;
}

static void render_lease(const struct sl_spec *s, const struct sl_state *st, int json, int64_t now,
                         FILE *out)
{
	struct lease_view v = lease_of(s, st, now);

	if (json) {
		fprintf(out, ",\"scope\":\"fleet\",\"share\":%.3f,\"share_places\":%u,\"machines\":%u,"
		        "\"lease_age_ms\":%lld,\"outage_share\":%s,\"lease_lapsed\":%s", v.share, v.places, v.machines,
		        (long long)v.age_ms, v.outage ? "true" : "false", v.lapsed ? "true" : "false");
		return;
	}
	char line[200];

	sl_stats_format_lease(s, st, now, line, sizeof(line));
	fprintf(out, "  fleet: %s", line);
}

void sl_stats_format_lease(const struct sl_spec *s, const struct sl_state *st, int64_t now, char *buf,
                           size_t size)
{
	struct lease_view v = lease_of(s, st, now);
	size_t n = 0;

#define ADD(...) (n += (size_t)snprintf(buf + SL_MIN(n, size - 1), size - SL_MIN(n, size - 1), __VA_ARGS__))
	buf[0] = '\0';
	if (v.age_ms < 0) {
		ADD("no lease yet");
		return;
	}
	if (s->amount)
		ADD("%s %.2f of %llu", s->strategy >= SL_STRAT_FIXED_WINDOW ? "chunk" : "share", v.share,
		    (unsigned long long)s->amount);
	if (s->concurrency)
		ADD("%splaces %u of %u", s->amount ? ", " : "", v.places, s->concurrency);
	ADD(", %u machines, lease %lld ms old%s%s", v.machines, (long long)v.age_ms,
	    v.outage ? " (outage share)" : "", v.lapsed ? " (lapsed: no daemon renews it)" : "");
#undef ADD
}

/* "2026-12-04T02:10:26Z" */
static void utc_text(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "?");
}

static void render_where(const struct sl_redis_where *w, int json, FILE *out)
{
	char at[32] = "";
	struct timespec ts;
	long long age;

	if (!w || !w->how[0])
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	age = w->since_ms ? ((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - w->since_ms) / 1000 : -1;
	if (w->since_ms)
		utc_text(w->since_ms, at, sizeof(at));
	if (json) {
		fprintf(out, "\"redis_master\":{\"found_by\":\"%s\",\"address\":", w->how);
		json_string(out, w->master);
		fprintf(out, ",\"since\":");
		json_string(out, at);
		fprintf(out, ",\"for_s\":%lld},", age);
	} else if (w->master[0]) {
		fprintf(out, "redis: master %s (found by %s) since %s, %lld s\n", w->master, w->how, at, age);
	} else {
		fprintf(out, "redis: no master found yet (%s)\n", w->how);
	}
}

static void render_redis(const struct sl_shm_header *h, int json, int64_t now, FILE *out)
{
	static const char *const states[] = {"none", "connecting", "up", "down", "late"};
	const char *state = h->redis_state < 5 ? states[h->redis_state] : "?";
	long long answer = h->redis_answer_ns ? (sl_sane_ns(now) - sl_sane_ns(h->redis_answer_ns)) / SL_NS_PER_MS : -1;
	long long down = h->redis_down_ns ? (sl_sane_ns(now) - sl_sane_ns(h->redis_down_ns)) / SL_NS_PER_MS : 0;

	if (json) {
		fprintf(out, "\"redis\":{\"state\":\"%s\",\"last_answer_ms\":%lld,\"down_ms\":%lld,\"calls\":%llu,"
		        "\"machines\":%u},", state, answer, down, (unsigned long long)h->redis_calls, h->redis_machines);
		return;
	}
	if (h->redis_state == SL_REDIS_NONE)
		return;
	if (answer >= 0)
		fprintf(out, "redis: %s, last answer %lld ms ago, %llu calls, %u machines\n", state, answer,
		        (unsigned long long)h->redis_calls, h->redis_machines);
	else
		fprintf(out, "redis: %s, no answer yet\n", state);
	if (h->redis_state == SL_REDIS_DOWN)
		fprintf(out, "redis: unreachable for %lld ms: shaping on the leases in hand\n", down);
	if (h->redis_state == SL_REDIS_LATE)
		fprintf(out, "redis: no answer in time for %lld ms: the leases lapse, callers wait\n", down);
}

/* A fixed or session window's use (sl_strategy_window_now): used, left and when
 * it ends, in time and (text) as a UTC date - a quota's "resets at". */
static void render_window(const struct sl_section *sec, int json, int64_t now, int64_t wall, FILE *out)
{
	struct sl_window_now w;
	char when[64] = "", in[48];

	if (sec->spec.per != SL_PER_NONE || sl_limit_fleet(&sec->spec) ||
	    !sl_strategy_window_now(&sec->spec, &sec->state, now, wall, &w))
		return;
	if (w.ends_ns > now) {
		time_t t = (time_t)((sl_sane_ns(w.ends_ns) + wall) / SL_NS_PER_S);
		struct tm tm;
		int64_t left_s = (w.ends_ns - now + SL_NS_PER_S - 1) / SL_NS_PER_S;

		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		if (left_s >= 86400)
			snprintf(in, sizeof(in), "%lldd %lldh", (long long)(left_s / 86400), (long long)(left_s % 86400 / 3600));
		else if (left_s >= 3600)
			snprintf(in, sizeof(in), "%lldh %lldm", (long long)(left_s / 3600), (long long)(left_s % 3600 / 60));
		else
			snprintf(in, sizeof(in), "%llds", (long long)left_s);
	}
	if (json) {
		fprintf(out, ",\"window\":{\"used\":%llu,\"left\":%llu,\"resets_in_ms\":%lld,\"resets_at\":\"%s\"}",
		        (unsigned long long)w.used, (unsigned long long)w.left,
		        w.ends_ns > now ? (long long)((w.ends_ns - now) / SL_NS_PER_MS) : -1LL, when);
		return;
	}
	fprintf(out, "  window: %llu of %llu used, %llu left", (unsigned long long)w.used,
	        (unsigned long long)sec->spec.amount, (unsigned long long)w.left);
	if (w.ends_ns > now)
		fprintf(out, ", resets in %s (%s)\n", in, when);
	else
		fprintf(out, ", the next request opens one\n");
}

/* What the destination said (pause.h): a pause in force and why, a budget, the
 * share adapt holds the rate to, and how many pauses so far. */
static void render_pause(const struct sl_spec *s, const struct sl_state *st, int json, int64_t now, FILE *out)
{
	const struct sl_pause *p = &st->pause;
	long long left = sl_sane_ns(p->until_ns) > now ? (sl_sane_ns(p->until_ns) - now) / SL_NS_PER_MS : 0;
	long long budget_ms = sl_sane_ns(p->budget_until_ns) > now ? (sl_sane_ns(p->budget_until_ns) - now) / SL_NS_PER_MS : 0;
	double share = (double)sl_pause_adapt_ppm(st) / 1e6;
	const char *why = sl_signal_name(p->kind);

	if (json) {
		fprintf(out, ",\"pause\":{\"paused_ms\":%lld,\"status\":%u,\"why\":\"%s\",\"pauses\":%llu,"
		        "\"budget_left\":%lld,\"budget_ms\":%lld,\"adapt_share\":%.3f}",
		        left, p->status, p->count ? why : "", (unsigned long long)p->count,
		        budget_ms ? (long long)p->budget_left : -1, budget_ms, s->adapt ? share : 1.0);
		return;
	}
	if (!p->count && !budget_ms && !(s->adapt && share < 1.0))
		return;
	fprintf(out, "  answers:");
	if (left && p->kind == SL_SIGNAL_FLEET)
		fprintf(out, " paused %.1f s more (another machine of the fleet was answered),", (double)left / 1e3);
	else if (left)
		fprintf(out, " paused %.1f s more (%u %s),", (double)left / 1e3, p->status, why);
	else if (p->count)
		fprintf(out, " last pause %.1f s ago (%u %s),",
		        (double)(now - sl_sane_ns(sl_state_more(st)->pause_set_ns)) / 1e9, p->status, why);
	if (budget_ms)
		fprintf(out, " %llu more allowed in %.1f s,", (unsigned long long)p->budget_left, (double)budget_ms / 1e3);
	if (s->adapt && share < 1.0)
		fprintf(out, " adapt at %.0f%% of the rate,", share * 100);
	fprintf(out, " %llu pauses so far\n", (unsigned long long)p->count);
}

/* A lateness bucket's bound, as "under 64 us". */
static const char *late_text(int64_t ns, char *buf, size_t size)
{
	if (ns == INT64_MAX)
		snprintf(buf, size, "over %.0f s", (double)sl_delivery_bucket_upper_ns(SL_LATE_BUCKETS - 2) / 1e9);
	else if (ns < SL_NS_PER_MS)
		snprintf(buf, size, "under %lld us", (long long)(ns / 1000));
	else if (ns < SL_NS_PER_S)
		snprintf(buf, size, "under %.1f ms", (double)ns / 1e6);
	else
		snprintf(buf, size, "under %.1f s", (double)ns / 1e9);
	return buf;
}

/* Whether the section gives what was configured: the rate delivered over the
 * daemon's last window, and how late releases went after their slots. */
static void render_delivery(const struct sl_section *sec, int json, FILE *out)
{
	struct sl_delivery_view v;
	int have = sl_delivery_view(sec, &v);
	char p50[32], p99[32];

	if (json) {
		fprintf(out, ",\"delivered_per_s\":%.3f,\"delivered_window_s\":%.1f,\"delivered_backlog\":%s,"
		        "\"late_p50_us\":%lld,\"late_p99_us\":%lld", have ? v.per_s : 0.0, have ? v.window_s : 0.0,
		        have && v.backlog ? "true" : "false",
		        have && v.releases ? (long long)(v.late_p50_ns / 1000) : -1LL,
		        have && v.releases ? (long long)(v.late_p99_ns / 1000) : -1LL);
		return;
	}
	if (!have || !v.releases)
		return;
	fprintf(out, "  delivered %.2f/s", v.per_s);
	if (v.backlog && v.configured > 0 && sec->spec.scope != SL_SCOPE_FLEET)
		fprintf(out, " of %.2f/s (%.1f%%, a queue throughout)", v.configured, 100.0 * v.per_s / v.configured);
	else if (sec->spec.per)
		fprintf(out, " over all keys");
	fprintf(out, " in the last %.0f s; late after their slots: p50 %s, p99 %s\n", v.window_s,
	        late_text(v.late_p50_ns, p50, sizeof(p50)), late_text(v.late_p99_ns, p99, sizeof(p99)));
}

static void render_keys(struct sl_shm_header *h, const struct key_view *v,
                        const struct sl_section *sec, int json, int64_t now, FILE *out)
{
	static const struct key_view none;
	char per[40];

	if (!v)
		v = &none;

	sl_format_per(&sec->spec, per, sizeof(per));
	if (json)
		fprintf(out, ",\"per\":\"%s\",\"keys\":%llu,\"key_evictions\":%llu,\"key_full\":%llu,"
		        "\"top\":[", per, (unsigned long long)sec->more.keys,
		        (unsigned long long)sec->more.key_evictions,
		        (unsigned long long)sec->more.key_full);
	else
		fprintf(out, "  per %s: %llu keys, %llu evicted idle, %llu refused (key table full)\n", per,
		        (unsigned long long)sec->more.keys, (unsigned long long)sec->more.key_evictions,
		        (unsigned long long)sec->more.key_full);
	for (unsigned j = 0; j < v->ntop; j++) {
		static struct sl_key_more kc;
		const struct sl_state *ks = &kc.key.state;
		const struct sl_pause *kp = &kc.key.state.pause;
		struct sl_key *k = sl_shm_key_at(h, v->top[j].slot);
		char name[SL_HOST_MAX + 64];

		if (!k)
			continue;
		sl_key_read(h, k, &kc);
		sl_keyid_format(&kc.key.id, name, sizeof(name));
		if (json) {
			fprintf(out, "%s{\"key\":", j ? "," : "");
			json_string(out, name);
			fprintf(out, ",\"admitted\":%llu,\"queued\":%llu,\"open\":%u,\"pauses\":%llu,"
			        "\"paused_ms\":%lld}",
			        (unsigned long long)ks->admitted,
			        (unsigned long long)sl_limit_queued(&sec->spec, ks, now, sl_sane_ns(h->wall_off_ns)),
			        ks->conc_open, (unsigned long long)kp->count,
			        sl_pause_active(ks, now) && kp->until_ns > now
			        ? (long long)((kp->until_ns - now) / SL_NS_PER_MS) : 0LL);
		} else {
			fprintf(out, "    %-40s admitted %llu, queued %llu, open %u", name,
			        (unsigned long long)ks->admitted,
			        (unsigned long long)sl_limit_queued(&sec->spec, ks, now, sl_sane_ns(h->wall_off_ns)),
			        ks->conc_open);
			if (sl_sane_ns(kp->until_ns) > now)
				fprintf(out, ", paused %.1f s more (%u %s)", (double)(sl_sane_ns(kp->until_ns) - now) / 1e9,
				        kp->status, sl_signal_name(kp->kind));
			else if (kp->count)
				fprintf(out, ", %llu pauses", (unsigned long long)kp->count);
			fputc('\n', out);
		}
	}
	if (json)
		fputc(']', out);
}

void sl_stats_render(struct sl_shm_header *h, int json, int64_t now, FILE *out)
{
	sl_stats_render_top(h, json, SL_STATS_TOP_DEFAULT, now, out);
}

/* Keyed sections' keys: one walk over the key table, gathered per section. */
static void gather_views(struct sl_shm_header *h, struct view_arg *va)
{
	uint32_t nkeyed = 0;

	va->nsections = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	if (va->nsections && (va->view_of = calloc(va->nsections, sizeof(*va->view_of)))) {
		for (uint32_t i = 0; i < va->nsections; i++)
			if (sl_shm_section(h, i)->in_use && sl_shm_section(h, i)->spec.per)
				va->view_of[i] = ++nkeyed;
		if (nkeyed && (va->views = calloc(nkeyed, sizeof(*va->views))))
			sl_keys_each(h, view_key, va);
	}
}

struct sl_key_views {
	struct view_arg va;
};

struct sl_key_views *sl_stats_key_views(struct sl_shm_header *h, unsigned top, int64_t now)
{
	struct sl_key_views *kv = calloc(1, sizeof(*kv));

	if (!kv)
		return NULL;
	kv->va = (struct view_arg){h, now, SL_MIN(top, (unsigned)SL_STATS_TOP_MAX), 0, NULL, NULL};
	gather_views(h, &kv->va);
	return kv;
}

unsigned sl_stats_busiest_keys(const struct sl_key_views *kv, uint32_t section, const struct sl_key_top **top)
{
	const struct key_view *v;

	if (!kv || !kv->va.views || section >= kv->va.nsections || !kv->va.view_of[section])
		return 0;
	v = &kv->va.views[kv->va.view_of[section] - 1];
	*top = v->top;
	return v->ntop;
}

void sl_stats_key_views_free(struct sl_key_views *kv)
{
	if (!kv)
		return;
	free(kv->va.view_of);
	free(kv->va.views);
	free(kv);
}

/* The name the segment was made under, when it says (layout 8.1 on). */
static int segment_name(const struct sl_shm_header *h, char name[sizeof(h->shm_name)])
{
	if (!sl_shm_has_name(h))
		return 0;
	memcpy(name, h->shm_name, sizeof(h->shm_name));
	name[sizeof(h->shm_name) - 1] = '\0';
	return name[0] != '\0';
}

/* ,"segment":{...}: the segment as `sluice segments` names it. */
static void render_segment_json(struct sl_shm_header *h, FILE *out)
{
	char name[sizeof(h->shm_name)];

	fprintf(out, ",\"segment\":{\"name\":");
	json_string(out, segment_name(h, name) ? name : "");
	fprintf(out, ",\"id\":\"%016llx\",\"attached\":%u}", (unsigned long long)h->segment_id,
	        sl_roster_each(h, NULL, NULL));
}

/* Whether the daemon that wrote h lives: its registration (roster.h), whatever
 * pid namespace it and the reader are in, and a recent beat. */
static int daemon_alive(struct sl_shm_header *h, int64_t age)
{
	return h->daemon_owner > 0 && age >= 0 && age < 3 * SL_NS_PER_S && !sl_roster_gone(h, h->daemon_owner, 0);
}

void sl_stats_render_top(struct sl_shm_header *h, int json, unsigned top, int64_t now, FILE *out)
{
	sl_stats_render_where(h, json, top, now, NULL, out);
}

/* The queues' header: generation, daemon, segment, keys, Redis - and the
 * columns' names (text) or the object's opening fields (JSON). */
static void render_head(struct sl_shm_header *h, int json, int64_t now, const struct sl_redis_where *where,
                        FILE *out)
{
	char name[sizeof(h->shm_name)];
	int32_t dpid = h->daemon_pid;
	int64_t age = h->heartbeat_ns ? sl_sane_ns(now) - sl_sane_ns(h->heartbeat_ns) : -1; /* segment data: clamped */
	int alive = daemon_alive(h, age);

	if (json) {
		char path[SL_PATH_MAX];

		fprintf(out, "{\"generation\":%llu,\"config\":", (unsigned long long)h->generation);
		memcpy(path, h->config_path, sizeof(path));
		path[sizeof(path) - 1] = '\0';
		json_string(out, path);
		render_segment_json(h, out);
		fprintf(out, ",\"daemon_pid\":%d,\"daemon_alive\":%s,\"heartbeat_age_ms\":%lld,"
		        "\"lock_recoveries\":%llu,",
		        dpid, alive ? "true" : "false", (long long)(age < 0 ? -1 : age / SL_NS_PER_MS),
		        (unsigned long long)h->lock_recoveries);
		render_redis(h, 1, now, out);
		render_where(where, 1, out);
		fprintf(out, "\"keys_used\":%u,\"max_keys\":%u,\"sections\":[", h->keys_used,
		        sl_shm_nkeys(h));
		return;
	}
	fprintf(out, "generation %llu, daemon %s (pid %d), lock recoveries %llu\n",
	        (unsigned long long)h->generation, alive ? "alive" : "not running", dpid,
	        (unsigned long long)h->lock_recoveries);
	fprintf(out, "segment %s (id %016llx, %u processes attached)\n", segment_name(h, name) ? name : "?",
	        (unsigned long long)h->segment_id, sl_roster_each(h, NULL, NULL));
	if (h->max_keys)
		fprintf(out, "key table: %u of %u records in use\n", h->keys_used,
		        sl_shm_nkeys(h));
	render_redis(h, 0, now, out);
	render_where(where, 0, out);
	fprintf(out, "%-20s %-11s %-14s %-10s %7s", "SECTION", "METER", "STRATEGY", "RATE", "QUEUED");
	for (size_t c = 0; c < SL_NCOUNTERS; c++)
		if (sl_counters[c].column)
			fprintf(out, " %9s", sl_counters[c].column);
	fprintf(out, " %10s %10s %10s\n", "WAIT_P50", "WAIT_P99", "WAIT_MAX");
}

/* What a section's row shows beside its copy: figures its keys or its state give. */
struct row {
	char match[1024], rate[64], base_name[SL_SECTION_NAME_MAX];
	const char *base;          /* the override's base, by name; NULL: not an override */
	const struct key_view *kv; /* a keyed section's keys, summed */
	uint64_t queued, open;
	int64_t next;              /* until its next slot (ns); <= 0: now */
};

/* Section i's copy into *sec and its row: 0 when it is not shown (not in use, or
 * never steady while copied). */
static int row_of(struct sl_shm_header *h, unsigned i, const struct view_arg *va, int64_t now,
                  struct sl_section *sec, struct row *r)
{
	static struct sl_section scratch; /* sl_stats_next_slot_ns may change it */
	const struct sl_section *of;
	const struct sl_state *st = &sec->state;

	if (!snapshot(h, i, sec, r->match, sizeof(r->match)))
		return 0;
	r->kv = va->views && va->view_of[i] ? &va->views[va->view_of[i] - 1] : NULL;
	/* A keyed section's queue and places are its keys'. */
	r->queued = sec->spec.per ? (r->kv ? r->kv->queued : 0)
	                          : sl_limit_queued(&sec->spec, st, now, sl_sane_ns(h->wall_off_ns));
	r->open = sec->spec.per ? (r->kv ? r->kv->open : 0) : st->conc_open;
	memcpy(&scratch, sec, sizeof(scratch));
	r->next = sl_stats_next_slot_ns(&scratch, now, sl_sane_ns(h->wall_off_ns));
	/* An override's base, by name (docs/config.md, "Overrides"). */
	of = sec->spec.override_of ? sl_shm_section(h, sec->spec.override_of - 1) : NULL;
	r->base = NULL;
	if (of && of->in_use) {
		memcpy(r->base_name, of->spec.name, sizeof(r->base_name));
		r->base_name[sizeof(r->base_name) - 1] = '\0';
		r->base = r->base_name;
	}
	if (sec->spec.amount)
		sl_format_rate(sec->spec.amount, sec->spec.window_ns, sec->spec.calendar,
		               sec->spec.meter == SL_METER_BYTES, r->rate, sizeof(r->rate));
	else
		snprintf(r->rate, sizeof(r->rate), "-");
	return 1;
}

static void render_section_json(struct sl_shm_header *h, const struct sl_section *sec, const struct row *r,
                                int first, int64_t now, FILE *out)
{
	const struct sl_state *st = &sec->state;

	fprintf(out, "%s{\"name\":", first ? "" : ",");
	json_string(out, sec->spec.name);
	fprintf(out, ",\"match\":");
	json_string(out, r->match);
	if (r->base) {
		fprintf(out, ",\"override_of\":");
		json_string(out, r->base);
	}
	fprintf(out, ",\"meter\":\"%s\",\"strategy\":\"%s\",\"rate\":\"%s\","
	        "\"amount\":%llu,\"window_ns\":%lld,\"burst\":%llu,\"mode\":\"%s\","
	        "\"queued\":%llu,\"wait_p50_us\":%lld,"
	        "\"wait_p99_us\":%lld,\"wait_max_us\":%lld,\"tat_ns\":%lld,"
	        "\"concurrency\":%u,\"open\":%llu,\"next_slot_ms\":%.1f",
	        sl_meter_name(sec->spec.meter), sl_strategy_name(sec->spec.strategy), r->rate,
	        (unsigned long long)sec->spec.amount, (long long)sec->spec.window_ns,
	        (unsigned long long)sec->spec.burst,
	        sec->spec.mode == SL_MODE_OBSERVE ? "observe" : "enforce",
	        (unsigned long long)r->queued,
	        (long long)(sl_stats_wait_quantile(sec, 0.5) / 1000),
	        (long long)(sl_stats_wait_quantile(sec, 0.99) / 1000),
	        (long long)(sec->more.wait_max_ns / 1000), (long long)st->tat_ns,
	        sec->spec.concurrency, (unsigned long long)r->open, r->next < 0 ? -1.0 : (double)r->next / 1e6);
	for (size_t c = 0; c < SL_NCOUNTERS; c++)
		fprintf(out, ",\"%s\":%llu", sl_counters[c].field, (unsigned long long)sl_counter_of(sec, (unsigned)c));
	render_delivery(sec, 1, out);
	render_window(sec, 1, now, sl_sane_ns(h->wall_off_ns), out);
	if (sec->spec.scope == SL_SCOPE_FLEET && !sec->spec.per)
		render_lease(&sec->spec, st, 1, now, out);
	if (sec->spec.signals)
		render_pause(&sec->spec, st, 1, now, out);
	if (sec->spec.per)
		render_keys(h, r->kv, sec, 1, now, out);
	fputc('}', out);
}

static void render_section_text(struct sl_shm_header *h, const struct sl_section *sec, const struct row *r,
                                int64_t now, FILE *out)
{
	const struct sl_state *st = &sec->state;
	char p50[32], p99[32], max[32];

	snprintf(p50, sizeof(p50), "%.1fms", (double)sl_stats_wait_quantile(sec, 0.5) / 1e6);
	snprintf(p99, sizeof(p99), "%.1fms", (double)sl_stats_wait_quantile(sec, 0.99) / 1e6);
	snprintf(max, sizeof(max), "%.1fms", (double)sec->more.wait_max_ns / 1e6);
	fprintf(out, "%-20s %-11s %-14s %-10s %7llu", sec->spec.name, sl_meter_name(sec->spec.meter),
	        sec->spec.amount ? sl_strategy_name(sec->spec.strategy) : "-", r->rate,
	        (unsigned long long)r->queued);
	for (size_t c = 0; c < SL_NCOUNTERS; c++)
		if (sl_counters[c].column)
			fprintf(out, " %9llu", (unsigned long long)sl_counter_of(sec, (unsigned)c));
	fprintf(out, " %10s %10s %10s\n", p50, p99, max);
	fprintf(out, "  match %s%s", r->match, sec->spec.mode == SL_MODE_OBSERVE ? "  (observe only)" : "");
	if (r->base)
		fprintf(out, "  (override of [%s]: its keys here run at this rate)", r->base);
	if (r->next > 0)
		fprintf(out, "  next slot in %.1f ms", (double)r->next / 1e6);
	if (sec->spec.concurrency)
		fprintf(out, "  concurrency %u%s, %llu open", sec->spec.concurrency,
		        sec->spec.per ? " per key" : "", (unsigned long long)r->open);
	for (size_t c = 0; c < SL_NCOUNTERS; c++)
		if (!sl_counters[c].column && (unsigned long long)sl_counter_of(sec, (unsigned)c))
			fprintf(out, "  %llu %s", (unsigned long long)sl_counter_of(sec, (unsigned)c), sl_counters[c].phrase);
	if (sec->spec.scope == SL_SCOPE_FLEET && !sec->spec.per)
		render_lease(&sec->spec, st, 0, now, out);
	fputc('\n', out);
	render_delivery(sec, 0, out);
	render_window(sec, 0, now, sl_sane_ns(h->wall_off_ns), out);
	if (sec->spec.signals)
		render_pause(&sec->spec, st, 0, now, out);
	if (sec->spec.per)
		render_keys(h, r->kv, sec, 0, now, out);
}

void sl_stats_render_where(struct sl_shm_header *h, int json, unsigned top, int64_t now,
                           const struct sl_redis_where *where, FILE *out)
{
	static struct sl_section sec; /* large: keep it off the stack */
	static struct row r;
	struct view_arg va = {h, now, SL_MIN(top, (unsigned)SL_STATS_TOP_MAX), 0, NULL, NULL};
	int first = 1;

	render_head(h, json, now, where, out);
	gather_views(h, &va);
	for (unsigned i = 0; i < va.nsections; i++) {
		if (!row_of(h, i, &va, now, &sec, &r))
			continue;
		if (json)
			render_section_json(h, &sec, &r, first, now, out);
		else
			render_section_text(h, &sec, &r, now, out);
		first = 0;
	}
	if (json)
		fprintf(out, "]}\n");
	free(va.view_of);
	free(va.views);
}

/* --- Prometheus text exposition (version 0.0.4) --- */

/* A label value: backslash, double quote and newline escaped. */
static void prom_label(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(out, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

static void prom_head(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample per section: `pick` reads it from the section's copy. */
struct prom_family {
	const char *name, *type, *help;
	double (*pick)(const struct sl_section *sec, const struct key_view *kv, int64_t now, int64_t wall);
	enum { ALL, ONLY_FLEET, ONLY_WINDOW } only; /* fleet: sections without keys (a keyed
	                                             * one's keys hold the leases); window: local
	                                             * fixed or session windows without keys */
};

static double p_queued(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	return s->spec.per ? (double)(k ? k->queued : 0) : (double)sl_limit_queued(&s->spec, &s->state, n, w);
}

static double p_open(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)n, (void)w;
	return s->spec.per ? (double)(k ? k->open : 0) : (double)s->state.conc_open;
}

static double p_rate(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k, (void)n, (void)w;
	return s->spec.amount && s->spec.window_ns > 0 ? (double)s->spec.amount * 1e9 / (double)s->spec.window_ns : 0;
}

static double p_pauses(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k, (void)n, (void)w;
	return (double)s->state.pause.count;
}

static double p_paused(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	int64_t until = sl_sane_ns(s->state.pause.until_ns);

	(void)k, (void)w;
	return until > n ? (double)(until - n) / 1e9 : 0;
}

static double p_share(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	const struct sl_lease *l = &s->more.lease;

	(void)k, (void)n, (void)w;
	return l->flags & SL_LEASE_RATE && l->window_ns > 0 ? (double)l->amount * 1e9 / (double)l->window_ns : 0;
}

static double p_chunk(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k, (void)n, (void)w;
	return s->more.lease.flags & SL_LEASE_CHUNK ? (double)s->more.lease.amount : 0;
}

static double p_machines(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k, (void)n, (void)w;
	return s->more.lease.flags ? s->more.lease.machines : 0;
}

static double p_lease_age(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k, (void)w;
	return s->more.lease.flags ? (double)(sl_sane_ns(n) - sl_sane_ns(s->more.lease.granted_ns)) / 1e9 : -1;
}

static double p_delivered(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	struct sl_delivery_view v;

	(void)k, (void)n, (void)w;
	return sl_delivery_view(s, &v) ? v.per_s : 0;
}

static double p_late(const struct sl_section *s, int p99)
{
	struct sl_delivery_view v;

	if (!sl_delivery_view(s, &v) || !v.releases)
		return 0;
	/* The last bucket has no bound: its floor stands for it. */
	int64_t ns = p99 ? v.late_p99_ns : v.late_p50_ns;

	return (double)(ns == INT64_MAX ? sl_delivery_bucket_upper_ns(SL_LATE_BUCKETS - 2) : ns) / 1e9;
}

static double p_late50(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k, (void)n, (void)w;
	return p_late(s, 0);
}

static double p_late99(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k, (void)n, (void)w;
	return p_late(s, 1);
}

static double p_window(const struct sl_section *s, int64_t n, int64_t w, int reset)
{
	struct sl_window_now v;

	if (!sl_strategy_window_now(&s->spec, &s->state, n, w, &v))
		return 0;
	return reset ? (v.ends_ns > n ? (double)(v.ends_ns - n) / 1e9 : 0) : (double)v.left;
}

static double p_window_left(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k;
	return p_window(s, n, w, 0);
}

static double p_window_reset(const struct sl_section *s, const struct key_view *k, int64_t n, int64_t w)
{
	(void)k;
	return p_window(s, n, w, 1);
}

static const struct prom_family families[] = {
	{"sluice_queued", "gauge", "Requests waiting for their slot now.", p_queued, ALL},
	{"sluice_open", "gauge", "Connections holding a concurrency place now.", p_open, ALL},
	{"sluice_rate_per_second", "gauge", "The configured rate, per second (0: concurrency only).", p_rate, ALL},
	{"sluice_delivered_per_second", "gauge",
	 "What was released per second over the daemon's last window (5-10 s; 0: none yet).", p_delivered, ALL},
	{"sluice_release_late_p50_seconds", "gauge",
	 "Median lateness of releases after their slots over that window (a bucket's bound).", p_late50, ALL},
	{"sluice_release_late_p99_seconds", "gauge",
	 "99th percentile lateness of releases after their slots over that window (a bucket's bound).", p_late99,
	 ALL},
	{"sluice_pauses_total", "counter", "Pauses the destination asked for (429, Retry-After, RateLimit).",
	 p_pauses, ALL},
	{"sluice_paused_seconds", "gauge", "How long the section's pause still lasts (0: not paused).", p_paused, ALL},
	{"sluice_fleet_share_per_second", "gauge", "This machine's lease on a fleet rate, per second (0: none).",
	 p_share, ONLY_FLEET},
	{"sluice_fleet_chunk", "gauge", "This machine's chunk of a fleet window's AMOUNT (0: none).", p_chunk,
	 ONLY_FLEET},
	{"sluice_fleet_machines", "gauge", "Machines sharing the fleet section, as its last lease said.", p_machines,
	 ONLY_FLEET},
	{"sluice_fleet_lease_age_seconds", "gauge", "Age of this machine's lease (-1: no lease yet).", p_lease_age,
	 ONLY_FLEET},
	{"sluice_window_remaining", "gauge",
	 "A fixed or session window's AMOUNT not yet released or reserved in the current window.", p_window_left,
	 ONLY_WINDOW},
	{"sluice_window_reset_seconds", "gauge",
	 "Seconds until the current fixed or session window ends (0: none open).", p_window_reset, ONLY_WINDOW},
};

/* The busiest keys' pauses: a destination that asked one key to wait. */
static void key_paused(struct sl_shm_header *h, const struct view_arg *va, int64_t now, FILE *out)
{
	static struct sl_section sec;
	char match[8];

	prom_head(out, "sluice_key_paused_seconds", "gauge",
	          "How long a busiest key's pause still lasts (0: not paused).");
	for (unsigned i = 0; i < va->nsections; i++) {
		const struct key_view *kv = va->views && va->view_of[i] ? &va->views[va->view_of[i] - 1] : NULL;

		if (!kv || !snapshot(h, i, &sec, match, sizeof(match)))
			continue;
		for (unsigned j = 0; j < kv->ntop; j++) {
			static struct sl_key_more key;
			struct sl_key *k = sl_shm_key_at(h, kv->top[j].slot);
			char name[SL_HOST_MAX + 64];
			int64_t until;

			if (!k)
				continue;
			sl_key_read(h, k, &key);
			until = sl_sane_ns(key.key.state.pause.until_ns);
			sl_keyid_format(&key.key.id, name, sizeof(name));
			fprintf(out, "sluice_key_paused_seconds{section=\"");
			prom_label(out, sec.spec.name);
			fprintf(out, "\",key=\"");
			prom_label(out, name);
			fprintf(out, "\"} %.3f\n", until > now ? (double)(until - now) / 1e9 : 0.0);
		}
	}
}

/* sluice_build_info, and each section's meter (the unit of its counters) and
 * strategy. */
static void prom_info(struct sl_shm_header *h, const struct view_arg *va, struct sl_section *sec, FILE *out)
{
	char match[8];

	prom_head(out, "sluice_build_info", "gauge", "The running sluice's version (always 1).");
	fprintf(out, "sluice_build_info{version=\"");
	prom_label(out, sl_stats_version);
	fprintf(out, "\"} 1\n");
	/* What each section counts in: its meter (requests, connections, datagrams or
	 * bytes - sluice_admitted_total counts bytes for a bytes section) and strategy,
	 * to join with the counters on `section`. */
	prom_head(out, "sluice_section_info", "gauge",
	          "A section's meter (the unit of its counters) and strategy (always 1).");
	for (unsigned i = 0; i < va->nsections; i++) {
		if (!snapshot(h, i, sec, match, sizeof(match)))
			continue;
		fprintf(out, "sluice_section_info{section=\"");
		prom_label(out, sec->spec.name);
		fprintf(out, "\",meter=\"%s\",strategy=\"%s\"} 1\n", sl_meter_name(sec->spec.meter),
		        sec->spec.amount ? sl_strategy_name(sec->spec.strategy) : "none");
	}
}

/* The counters (counters.def), each sluice_FIELD_total. */
static void prom_counters(struct sl_shm_header *h, const struct view_arg *va, struct sl_section *sec, FILE *out)
{
	char match[8];

	for (size_t c = 0; c < SL_NCOUNTERS; c++) {
		char name[64];

		snprintf(name, sizeof(name), "sluice_%s_total", sl_counters[c].field);
		prom_head(out, name, "counter", sl_counters[c].help);
		for (unsigned i = 0; i < va->nsections; i++) {
			if (!snapshot(h, i, sec, match, sizeof(match)))
				continue;
			fprintf(out, "%s{section=\"", name);
			prom_label(out, sec->spec.name);
			fprintf(out, "\"} %llu\n", (unsigned long long)sl_counter_of(sec, (unsigned)c));
		}
	}
}

void sl_stats_render_prometheus(struct sl_shm_header *h, unsigned top, int64_t now, FILE *out)
{
	static struct sl_section copy; /* large: off the stack */
	struct sl_section *sec = &copy;
	struct view_arg va = {h, now, SL_MIN(top, (unsigned)SL_STATS_TOP_MAX), 0, NULL, NULL};
	int64_t wall = sl_sane_ns(h->wall_off_ns);
	char match[8];

	gather_views(h, &va);
	prom_info(h, &va, sec, out);
	prom_counters(h, &va, sec, out);
	for (size_t f = 0; f < SL_ARRAY_LEN(families); f++) {
		prom_head(out, families[f].name, families[f].type, families[f].help);
		for (unsigned i = 0; i < va.nsections; i++) {
			const struct key_view *kv = va.views && va.view_of[i] ? &va.views[va.view_of[i] - 1] : NULL;

			if (!snapshot(h, i, sec, match, sizeof(match)))
				continue;
			if (families[f].only == ONLY_FLEET && (!sl_limit_fleet(&sec->spec) || sec->spec.per != SL_PER_NONE))
				continue;
			if (families[f].only == ONLY_WINDOW &&
			    (sl_limit_fleet(&sec->spec) || sec->spec.per != SL_PER_NONE || !sec->spec.amount ||
			     (sec->spec.strategy != SL_STRAT_FIXED_WINDOW && sec->spec.strategy != SL_STRAT_SESSION_WINDOW)))
				continue;
			fprintf(out, "%s{section=\"", families[f].name);
			prom_label(out, sec->spec.name);
			fprintf(out, "\"} %.17g\n", families[f].pick(sec, kv, now, wall));
		}
	}
	/* Waits, as a histogram in seconds: the segment's buckets, cumulated. */
	prom_head(out, "sluice_wait_seconds", "histogram", "How long released requests waited.");
	for (unsigned i = 0; i < va.nsections; i++) {
		uint64_t cum = 0;

		if (!snapshot(h, i, sec, match, sizeof(match)))
			continue;
		for (unsigned b = 0; b < SL_WAIT_BUCKETS; b++) {
			cum += sec->more.wait_hist[b];
			if (b + 1 < SL_WAIT_BUCKETS && b % 2 == 1) { /* one bound per power of two: enough */
				fprintf(out, "sluice_wait_seconds_bucket{section=\"");
				prom_label(out, sec->spec.name);
				fprintf(out, "\",le=\"%.9g\"} %llu\n", (double)sl_stats_bucket_upper_ns(b) / 1e9,
				        (unsigned long long)cum);
			}
		}
		fprintf(out, "sluice_wait_seconds_bucket{section=\"");
		prom_label(out, sec->spec.name);
		fprintf(out, "\",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
		fprintf(out, "sluice_wait_seconds_sum{section=\"");
		prom_label(out, sec->spec.name);
		fprintf(out, "\"} %.9g\n", (double)sec->more.wait_sum_ns / 1e9);
		fprintf(out, "sluice_wait_seconds_count{section=\"");
		prom_label(out, sec->spec.name);
		fprintf(out, "\"} %llu\n", (unsigned long long)cum);
	}
	/* The busiest keys of keyed sections only: cardinality stays bounded. */
	prom_head(out, "sluice_key_admitted_total", "counter",
	          "Requests released, for each of the busiest keys of a keyed section.");
	for (unsigned i = 0; i < va.nsections; i++) {
		const struct key_view *kv = va.views && va.view_of[i] ? &va.views[va.view_of[i] - 1] : NULL;

		if (!kv || !snapshot(h, i, sec, match, sizeof(match)))
			continue;
		for (unsigned j = 0; j < kv->ntop; j++) {
			static struct sl_key key;
			struct sl_key *k = sl_shm_key_at(h, kv->top[j].slot);
			char name[SL_HOST_MAX + 64];

			if (!k)
				continue;
			memcpy(&key, k, sizeof(key));
			sl_keyid_format(&key.id, name, sizeof(name));
			fprintf(out, "sluice_key_admitted_total{section=\"");
			prom_label(out, sec->spec.name);
			fprintf(out, "\",key=\"");
			prom_label(out, name);
			fprintf(out, "\"} %llu\n", (unsigned long long)key.state.admitted);
		}
	}
	key_paused(h, &va, now, out);
	prom_head(out, "sluice_daemon_up", "gauge", "1 when a sluiced beats for this segment.");
	fprintf(out, "sluice_daemon_up %d\n",
	        h->heartbeat_ns && sl_sane_ns(now) - sl_sane_ns(h->heartbeat_ns) < 3 * SL_NS_PER_S);
	free(va.view_of);
	free(va.views);
}
