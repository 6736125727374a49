/*
 * fleet_round.c - a round's items (fleet-internal.h; docs/design.md, "Across
 * machines"): collected from the segment with what each is asked for and holds,
 * remembered between rounds by key, and what comes back - a grant, another
 * machine's pause, an outage's share - written into the segment under its lock.
 */
#include "fleet-internal.h"

int64_t fleet_realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- memos: an open-addressing table by key, grown as items come --- */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

struct sl_fleet_memo *fleet_memo_find(struct fleet *f, const char *key)
{
	for (;;) {
		size_t mask = f->nmemo - 1, i;

		if (f->nmemo) {
			for (i = hash_str(key) & mask;; i = (i + 1) & mask) {
				if (!f->memo[i].key[0])
					break;
				if (strcmp(f->memo[i].key, key) == 0)
					return &f->memo[i];
			}
			if ((f->memo_used + 1) * 2 <= f->nmemo) {
				snprintf(f->memo[i].key, sizeof(f->memo[i].key), "%s", key);
				f->memo_used++;
				return &f->memo[i];
			}
		}
		/* Grow: twice as many, keeping the memos of items seen in the last minute. */
		{
			size_t n = f->nmemo ? f->nmemo * 2 : 64;
			struct sl_fleet_memo *m = calloc(n, sizeof(*m)), *old = f->memo;
			int64_t now = sl_clock_mono_ns();

			if (!m)
				return NULL;
			f->memo_used = 0;
			for (size_t j = 0; j < f->nmemo; j++) {
				size_t k;

				if (!old[j].key[0] || now - old[j].at > 60 * SL_NS_PER_S)
					continue;
				for (k = hash_str(old[j].key) & (n - 1); m[k].key[0]; k = (k + 1) & (n - 1))
					;
				m[k] = old[j];
				f->memo_used++;
			}
			free(old);
			f->memo = m;
			f->nmemo = n;
		}
	}
}

/* --- collecting a round --- */

/* What measuring needs of this daemon (fleetpolicy.h). */
static struct sl_fleet_env env_of(struct fleet *f)
{
	/* Redis's clock now, late rather than early: the offset was read a round trip
	 * after Redis's clock was, and both clocks count whole milliseconds. */
	return (struct sl_fleet_env){
		.refresh_ns = f->conf.refresh_ns,
		.hosts = SL_MAX(f->d->cfg->global.hosts, 1u),
		.claims = f->d->cfg->global.claims,
		.wall_off = sl_sane_ns(f->d->shm.hdr->wall_off_ns),
		.redis_ms = f->have_off ? fleet_realtime_ms() + f->off_ms + f->rtt_ms + 2 : 0,
	};
}

static int add_item(struct fleet *f, size_t *n, char kind, uint32_t i, const struct sl_section *sec,
                    const struct sl_state *st, const struct sl_keyref *ref, const char *keyname,
                    int64_t now)
{
	struct sl_fleet_item *it;

	if (*n >= MAX_ITEMS)
		return -1;
	it = &f->items[(*n)++];
	memset(it, 0, sizeof(*it));
	it->kind = kind;
	it->section = i;
	it->serial = sec->serial;
	if (ref) {
		it->key_slot = ref->slot;
		it->key_serial = ref->serial;
	}
	snprintf(it->key, sizeof(it->key), "%s:i:%.*s%s%s:%c", f->conf.prefix, SL_SECTION_NAME_MAX - 1,
	         sec->spec.name, keyname ? "/" : "", keyname ? keyname : "", kind == 'c' ? 'c' : 'r');
	it->memo = fleet_memo_find(f, it->key);
	{
		struct sl_fleet_env env = env_of(f);

		sl_fleet_measure(&env, it, sec, st, keyname != NULL, now);
	}
	return 0;
}

struct key_walk {
	struct fleet *f;
	size_t *n;
	int64_t now;
};

/* A key of a keyed fleet section, active lately: an item of the round. */
static int walk_key(struct sl_key *k, uint32_t slot, void *arg)
{
	struct key_walk *w = arg;
	struct sl_shm_header *h = w->f->d->shm.hdr;
	struct sl_section *sec = sl_shm_section(h, k->section);
	struct sl_keyref ref = {slot, k->serial};
	char name[SL_HOST_MAX + 64];

	if (!sec || sec->spec.scope != SL_SCOPE_FLEET ||
	    w->now - k->last_used_ns > (int64_t)(3 * w->f->conf.ttl_ms) * SL_NS_PER_MS)
		return 0;
	sl_keyid_format(&k->id, name, sizeof(name));
	if (sec->spec.amount && add_item(w->f, w->n, sl_fleet_kind(&sec->spec), k->section, sec, &k->state, &ref, name,
	                                 w->now) < 0)
		return 1;
	if (sec->spec.concurrency &&
	    add_item(w->f, w->n, 'c', k->section, sec, &k->state, &ref, name, w->now) < 0)
		return 1;
	return 0;
}

size_t fleet_collect(struct fleet *f, int64_t now)
{
	struct sl_shm_header *h = f->d->shm.hdr;
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	int keyed = 0;
	size_t n = 0;

	for (uint32_t i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!sec->in_use || sec->spec.scope != SL_SCOPE_FLEET)
			continue;
		if (sec->spec.per != SL_PER_NONE) {
			keyed = 1;
			continue;
		}
		if (sec->spec.amount)
			add_item(f, &n, sl_fleet_kind(&sec->spec), i, sec, &sec->state, NULL, NULL, now);
		if (sec->spec.concurrency)
			add_item(f, &n, 'c', i, sec, &sec->state, NULL, NULL, now);
	}
	if (keyed) {
		struct key_walk w = {f, &n, now};

		sl_keys_each(h, walk_key, &w);
	}
	return n;
}

struct sl_state *fleet_item_state(struct fleet *f, const struct sl_fleet_item *it)
{
	struct sl_shm_header *h = f->d->shm.hdr;
	struct sl_section *sec = sl_shm_section(h, it->section);
	struct sl_key *k;

	if (!sec || !sec->in_use || sec->serial != it->serial)
		return NULL;
	if (!it->key_serial)
		return &sec->state;
	if (!sl_shm_dims_of(h).key_more)
		return NULL; /* a fleet key keeps its lease in a more (sl_shm_fits) */
	k = sl_keys_ref(h, it->section, it->key_slot, it->key_serial);
	return k ? &k->state : NULL;
}

void fleet_write_grant(struct fleet *f, const struct sl_fleet_item *it, const struct sl_grant *g, int64_t now)
{
	struct sl_state *st = fleet_item_state(f, it);

	if (st && sl_lease_write(st, g, now))
		sl_conc_wake(st);
}

/* Another machine's answer from the destination paused item `it` until end_ms
 * (Redis's clock; 0: none): this machine pauses too, until the same instant -
 * late rather than early, as a pause is what the destination asked for: Redis
 * read its clock (rnow, whole milliseconds) at most a round trip before `now`, so
 * the end is at most `now` + (end_ms - rnow) and a millisecond; under the lock. */
void fleet_pause(struct fleet *f, const struct sl_fleet_item *it, long long end_ms, long long rnow, int64_t now,
                        int64_t rtt)
{
	struct sl_section *sec = sl_shm_section(f->d->shm.hdr, it->section);
	struct sl_state *st;

	if (end_ms <= rnow || !sec || !(st = fleet_item_state(f, it)))
		return;
	(void)rtt;
	if (sl_pause_fleet(st, &sec->spec, now + (int64_t)(end_ms - rnow + 1) * SL_NS_PER_MS, now)) {
		sec->more.pause_set_ns = now;
		sl_log_debug("fleet %s: paused %.1f s, as another machine was asked", it->key,
		             (double)(end_ms - rnow) / 1e3);
	}
}

/* --- while Redis cannot be reached --- */

/* Items that never had a lease get their part over `hosts`; a window's chunk that
 * ended is followed by the next window's part (windows placed on Redis's clock as
 * last seen).  Leases in hand stay as they are. */
void fleet_outage_shares(struct fleet *f)
{
	struct sl_shm_header *h = f->d->shm.hdr;
	uint32_t hosts = SL_MAX(f->d->cfg->global.hosts, 1u);
	int64_t now = sl_clock_mono_ns(), rms = fleet_realtime_ms() + (f->have_off ? f->off_ms : 0);
	size_t n = fleet_collect(f, now);

	if (!n || sl_shm_lock(h, f->d->shm.self, SL_NS_PER_S) < 0)
		return;
	for (size_t j = 0; j < n; j++) {
		const struct sl_fleet_item *it = &f->items[j];
		struct sl_state *st = fleet_item_state(f, it);
		struct sl_grant g = {0};

		if (!st)
			continue;
		/* This daemon is alive: what it holds stays usable while Redis is away. */
		sl_lease_extend(st, now + (int64_t)f->conf.ttl_ms * SL_NS_PER_MS);
		if (!sl_fleet_outage_grant(it, &sl_state_more(st)->lease, hosts, now, rms, &g))
			continue;
		g.valid_ns = now + (int64_t)f->conf.ttl_ms * SL_NS_PER_MS;
		fleet_write_grant(f, it, &g, now);
	}
	sl_shm_unlock(h, f->d->shm.self);
}
