/* The key table of keyed sections (keys.h). */
#include "sluice/keys.h"
#include "sluice/common.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/shm.h"
#include "sluice/strategy.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

void sl_keysrc_from_dest(struct sl_keysrc *k, const struct sl_dest *d)
{
	k->family = (uint8_t)d->family;
	k->pad = 0;
	k->port = d->port;
	k->pad2 = 0;
	memcpy(k->addr, d->addr, sizeof(k->addr));
	k->name_len = 0;
	k->name = NULL;
	if (d->name && d->name_len > 0 && d->name_len < SL_HOST_MAX) {
		k->name = d->name;
		k->name_len = (uint16_t)d->name_len;
	}
}

/* The address cut to `bits`, the rest zero. */
static void cut(uint8_t *out, const uint8_t *addr, unsigned len, unsigned bits)
{
	memset(out, 0, len);
	for (unsigned i = 0; i < len && bits; i++) {
		unsigned take = bits >= 8 ? 8 : bits;

		out[i] = (uint8_t)(addr[i] & (0xff00u >> take));
		bits -= take;
	}
}

/* FNV-1a over a name, then a 64-bit finaliser: what tells two long names with one
 * head apart.  Two that still agree share a queue: stricter, never looser. */
static uint64_t name_hash(const char *name, size_t len)
{
	uint64_t x = 0x84222325cbf29ce4ull;

	for (size_t i = 0; i < len; i++)
		x = (x ^ (uint8_t)name[i]) * 0x100000001b3ull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* Bytes of id->bytes in use (clamped: the record may have been scribbled on). */
static unsigned stored(const struct sl_keyid *id)
{
	return SL_MIN((unsigned)id->len, (unsigned)SL_KEYID_BYTES);
}

void sl_keyid_make(struct sl_keyid *id, const struct sl_spec *s, const struct sl_keysrc *src)
{
	int by_name = (s->per == SL_PER_HOST || s->per == SL_PER_HOST_PORT) && src->name &&
	              src->name_len > 0 && src->name_len < SL_HOST_MAX;
	int with_port = s->per == SL_PER_HOST_PORT || s->per == SL_PER_ADDRESS_PORT;

	memset(id, 0, sizeof(*id));
	id->per = s->per;
	id->port = with_port ? src->port : 0;
	if (by_name) {
		id->len = src->name_len;
		if (src->name_len <= SL_KEYID_BYTES) {
			memcpy(id->bytes, src->name, src->name_len);
		} else {
			/* A long name: its head, for people, and a hash of all of it, for
			 * telling keys apart (shm-t.h, struct sl_keyid). */
			uint64_t x = name_hash(src->name, src->name_len);

			memcpy(id->bytes, src->name, SL_KEYID_NAME_HEAD);
			memcpy(id->bytes + SL_KEYID_NAME_HEAD, &x, sizeof(x));
		}
		return;
	}
	/* An address: per = address, or a host with no name known (the address is
	 * then the only name the destination has). */
	{
		int v6 = src->family == AF_INET6;
		unsigned width = v6 ? 128u : 32u, len = width / 8;
		unsigned prefix = v6 ? s->per_prefix6 : s->per_prefix4;
		unsigned bits = (s->per == SL_PER_ADDRESS || s->per == SL_PER_ADDRESS_PORT) && prefix
		                ? SL_MIN(prefix, width) : width;

		id->family = v6 ? AF_INET6 : AF_INET;
		cut(id->bytes, src->addr, len, bits);
		id->bytes[len] = (uint8_t)bits;
		id->len = (uint16_t)(len + 1);
	}
}

int sl_keyid_format(const struct sl_keyid *id, char *buf, size_t size)
{
	char addr[INET6_ADDRSTRLEN] = "?", port[8] = "";
	unsigned len = stored(id);

	if (id->port)
		snprintf(port, sizeof(port), ":%u", id->port);
	if (id->family == AF_INET6 && len == 17) {
		inet_ntop(AF_INET6, id->bytes, addr, sizeof(addr));
		if (id->bytes[16] == 128)
			return snprintf(buf, size, id->port ? "[%s]%s" : "%s%s", addr, port);
		return snprintf(buf, size, "[%s]/%u%s", addr, id->bytes[16], port);
	}
	if (id->family == AF_INET && len == 5) {
		inet_ntop(AF_INET, id->bytes, addr, sizeof(addr));
		if (id->bytes[4] == 32)
			return snprintf(buf, size, "%s%s", addr, port);
		return snprintf(buf, size, "%s/%u%s", addr, id->bytes[4], port);
	}
	/* A name: printed only up to its first byte that is no name's; a long one's
	 * head and "...". */
	{
		unsigned n = 0, whole = id->len <= SL_KEYID_BYTES;

		if (!whole)
			len = SL_KEYID_NAME_HEAD;
		while (n < len && id->bytes[n] > 0x20 && id->bytes[n] < 0x7f)
			n++;
		return snprintf(buf, size, "%.*s%s%s", (int)n, (const char *)id->bytes, whole ? "" : "...", port);
	}
}

static uint64_t hash_of(const struct sl_keyid *id, unsigned section, uint32_t serial)
{
	uint64_t x = 0xcbf29ce484222325ull; /* FNV-1a, then a 64-bit finaliser */
	unsigned len = stored(id);
	uint8_t head[8] = {id->per, id->family, (uint8_t)id->port, (uint8_t)(id->port >> 8),
	                   (uint8_t)section, (uint8_t)(section >> 8), (uint8_t)serial,
	                   (uint8_t)(serial >> 8)};

	for (unsigned i = 0; i < sizeof(head); i++)
		x = (x ^ head[i]) * 0x100000001b3ull;
	x = (x ^ (serial >> 16)) * 0x100000001b3ull;
	for (unsigned i = 0; i < len; i++)
		x = (x ^ id->bytes[i]) * 0x100000001b3ull;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x | 1; /* a tag is never 0, which marks a free record */
}

static int same_id(const struct sl_keyid *a, const struct sl_keyid *b)
{
	return a->per == b->per && a->family == b->family && a->port == b->port && a->len == b->len &&
	       memcmp(a->bytes, b->bytes, stored(a)) == 0;
}

uint32_t sl_key_slot(struct sl_shm_header *h, const struct sl_key *k)
{
	struct sl_shm_dims d = sl_shm_dims_of(h);

	return (uint32_t)((size_t)((const char *)k - (const char *)sl_shm_key_at(h, 0)) / sl_shm_key_size(&d));
}

int sl_key_live(struct sl_shm_header *h, const struct sl_key *k)
{
	struct sl_section *sec = sl_shm_section(h, k->section);

	return k->in_use && sec && sec->in_use && sec->spec.per != SL_PER_NONE &&
	       sec->serial == k->section_serial;
}

struct sl_key *sl_keys_ref(struct sl_shm_header *h, unsigned i, uint32_t slot, uint32_t serial)
{
	struct sl_key *k = sl_shm_key_at(h, slot);

	return k && k->serial == serial && k->section == i && sl_key_live(h, k) ? k : NULL;
}

/* Free record k (its tag first: a lookup never finds a half-cleared record). */
static void release_record(struct sl_shm_header *h, struct sl_key *k, uint32_t slot)
{
	sl_shm_key_tags(h)[slot] = 0;
	k->in_use = 0;
	if (h->keys_used)
		h->keys_used--;
}

struct sl_key *sl_keys_find(struct sl_shm_header *h, unsigned i, const struct sl_keysrc *src,
                            int create, int64_t now)
{
	struct sl_section *sec = sl_shm_section(h, i);
	struct sl_keyid id;

	if (!sec || !sec->in_use)
		return NULL;
	sl_keyid_make(&id, &sec->spec, src);
	return sl_keys_find_id(h, i, &id, create, now);
}

struct sl_key *sl_keys_find_id(struct sl_shm_header *h, unsigned i, const struct sl_keyid *idp,
                               int create, int64_t now)
{
	struct sl_section *sec = sl_shm_section(h, i);
	uint32_t n = sl_shm_nkeys(h), probe, start, slot;
	uint64_t *tags = sl_shm_key_tags(h), tag;
	struct sl_keyid id = *idp;
	struct sl_key *k, *victim = NULL;
	int64_t victim_used = INT64_MAX;
	uint32_t victim_slot = 0;
	int victim_free = 0;

	if (!sec || !sec->in_use)
		return NULL;
	if (n == 0)
		goto full;
	tag = hash_of(&id, i, sec->serial);
	probe = SL_MIN(n, (uint32_t)SL_KEY_PROBE);
	start = (uint32_t)(tag % n);
	/* Pass 1, tags only: is the key there? */
	for (uint32_t j = 0, s = start; j < probe; j++, s = s + 1 == n ? 0 : s + 1) {
		if (tags[s] != tag)
			continue;
		k = sl_shm_key_at(h, s);
		if (k->section == i && k->section_serial == sec->serial && k->in_use && same_id(&k->id, &id)) {
			k->last_used_ns = now;
			return k;
		}
	}
	if (!create)
		return NULL;
	/* Pass 2: a free record, one whose section is gone, or the least recently used
	 * idle one. */
	for (uint32_t j = 0, s = start; j < probe; j++, s = s + 1 == n ? 0 : s + 1) {
		struct sl_section *owner;

		k = sl_shm_key_at(h, s);
		if (tags[s] == 0 || !sl_key_live(h, k)) {
			victim = k;
			victim_slot = s;
			victim_free = 1;
			break;
		}
		owner = sl_shm_section(h, k->section);
		/* A key used at `now` belongs to the reservation being made (a zero
		 * state is idle, but it is about to be charged): never its victim. */
		if (k->last_used_ns < victim_used && k->last_used_ns < now &&
		    sl_limit_idle(&owner->spec, &k->state, now, sl_sane_ns(h->wall_off_ns))) {
			victim = k;
			victim_slot = s;
			victim_used = k->last_used_ns;
		}
	}
	if (!victim)
		goto full;
	if (victim_free) {
		/* A stale record (its section reset or gone: its count went with it). */
		if (tags[victim_slot] != 0)
			release_record(h, victim, victim_slot);
	} else {
		struct sl_section *owner = sl_shm_section(h, victim->section);

		if (owner->more.keys)
			owner->more.keys--;
		owner->more.key_evictions++;
		release_record(h, victim, victim_slot);
	}
	slot = victim_slot;
	k = victim;
	k->serial++;
	k->section = i;
	k->section_serial = sec->serial;
	k->last_used_ns = now;
	k->id = id;
	memset(&k->state, 0, sizeof(k->state));
	if (sl_shm_dims_of(h).key_more)
		memset(sl_state_more(&k->state), 0, sizeof(struct sl_state_more));
	k->in_use = 1;
	tags[slot] = tag;
	h->keys_used++;
	sec->more.keys++;
	return k;
full:
	sec->more.key_full++;
	return NULL;
}

void sl_keys_each(struct sl_shm_header *h, int (*fn)(struct sl_key *k, uint32_t slot, void *arg),
                  void *arg)
{
	uint32_t n = sl_shm_nkeys(h);
	const uint64_t *tags = sl_shm_key_tags(h);

	for (uint32_t s = 0; s < n; s++) {
		struct sl_key *k;

		if (!__atomic_load_n(&tags[s], __ATOMIC_RELAXED))
			continue;
		k = sl_shm_key_at(h, s);
		if (sl_key_live(h, k) && fn(k, s, arg))
			return;
	}
}

void sl_keys_sweep(struct sl_shm_header *h)
{
	uint32_t n = sl_shm_nkeys(h);
	uint32_t used = 0;
	uint64_t *tags = sl_shm_key_tags(h);

	for (uint32_t s = 0; s < n; s++) {
		struct sl_key *k;

		if (!tags[s])
			continue;
		k = sl_shm_key_at(h, s);
		if (!sl_key_live(h, k)) {
			tags[s] = 0;
			k->in_use = 0;
		} else {
			used++;
		}
	}
	h->keys_used = used;
}

void sl_keys_carry(struct sl_shm_header *to, struct sl_shm_header *from)
{
	uint32_t n = sl_shm_nkeys(from), m = sl_shm_nkeys(to);
	const uint64_t *ftags = sl_shm_key_tags(from);
	uint64_t *ttags = sl_shm_key_tags(to);
	int more_from = sl_shm_dims_of(from).key_more, more_to = sl_shm_dims_of(to).key_more;

	for (uint32_t i = 0, sections = sl_shm_dims_of(to).sections; i < sections; i++)
		sl_shm_section(to, i)->more.keys = 0;
	to->keys_used = 0;
	for (uint32_t s = 0; s < n && m > 0; s++) {
		struct sl_key *k;
		struct sl_section *owner;
		uint32_t start, probe = SL_MIN(m, (uint32_t)SL_KEY_PROBE);

		if (!ftags[s])
			continue;
		k = sl_shm_key_at(from, s);
		if (!sl_key_live(from, k) || !(owner = sl_shm_section(to, k->section)))
			continue; /* gone, or its section did not come along */
		start = (uint32_t)(ftags[s] % m);
		for (uint32_t j = 0, t = start; j < probe; j++, t = t + 1 == m ? 0 : t + 1) {
			if (ttags[t])
				continue;
			*sl_shm_key_at(to, t) = *k;
			if (more_to) /* a key's more comes along when both records have one */
				*sl_state_more(&sl_shm_key_at(to, t)->state) =
					more_from ? *sl_state_more(&k->state) : (struct sl_state_more){0};
			ttags[t] = ftags[s];
			to->keys_used++;
			owner->more.keys++;
			break;
		}
	}
}

void sl_key_read(struct sl_shm_header *h, const struct sl_key *k, struct sl_key_more *out)
{
	memcpy(&out->key, k, sizeof(out->key));
	if (sl_shm_dims_of(h).key_more)
		memcpy(&out->more, sl_state_more(&k->state), sizeof(out->more));
	else
		memset(&out->more, 0, sizeof(out->more));
}
