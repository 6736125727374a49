/*
 * The parts of a hold record (record.h): its sections, its destination's name, its
 * admission under way, what it follows of its writes, its parsers.  Each is a
 * piece from slab.c taken when the record's state first needs it and given back
 * when no state needs it any more (docs/design.md, "What a socket costs").  All
 * under the record's lock.
 */
#include "held.h"
#include "record.h"
#include "firstbox.h"

#include <errno.h>
#include <string.h>

/* --- sections --- */

static struct sl_conc_key *keys_of(struct sl_rec_sects *s)
{
	return (struct sl_conc_key *)(void *)&s->e[s->n];
}

static size_t sects_size(unsigned n, unsigned nkeys)
{
	return sizeof(struct sl_rec_sects) + n * sizeof(struct sl_rec_sect) +
	       nkeys * sizeof(struct sl_conc_key);
}

/* rec's sections with those of m added for `use`: m's sections it has take the
 * use, the others new positions after its own.  0, or -ENOMEM (nothing changed). */
int sl_rec_add_sects(struct sl_record *rec, const struct sl_match *m, unsigned use)
{
	const struct sl_rec_sects *old = rec->sects;
	unsigned n = old ? old->n : 0, add = 0, nkeys;
	struct sl_rec_sects *s;
	size_t size;

	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), j;

		for (j = 0; j < n && old->e[j].idx != m->idx[k]; j++)
			;
		if (j == n)
			add++;
	}
	if (n + add > SL_MATCH_MAX)
		add = SL_MATCH_MAX - n; /* the rest: overflow, refused by who reserves */
	nkeys = (old && old->nkeys) || (m->keyed & m->mask) ? SL_CONC_KEYS : 0;
	size = sects_size(n + add, nkeys);
	if (!(s = sl_slab_alloc(size)))
		return -ENOMEM;
	memset(s, 0, size);
	s->size = (uint32_t)size;
	s->nkeys = (uint8_t)nkeys;
	if (old) {
		memcpy(s->e, old->e, n * sizeof(s->e[0]));
		s->overflow = old->overflow;
		s->keyed = old->keyed;
	}
	s->n = (uint8_t)n;
	s->overflow |= (uint8_t)(m->overflow != 0);
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), j;

		for (j = 0; j < s->n && s->e[j].idx != m->idx[k]; j++)
			;
		if (j == s->n) {
			if (s->n == n + add) {
				s->overflow = 1;
				continue;
			}
			s->e[j] = (struct sl_rec_sect){m->idx[k], m->serial[k], 0};
			s->n++;
		}
		s->e[j].use |= use;
		s->e[j].serial = m->serial[k]; /* the newer match knows the section as it is */
		if (m->keyed & (1ULL << k))
			s->keyed |= 1ULL << j;
	}
	if (old && old->nkeys)
		memcpy(keys_of(s), keys_of((struct sl_rec_sects *)old), old->nkeys * sizeof(struct sl_conc_key));
	sl_rec_keep_keys_in(s, m);
	if (old)
		sl_slab_free((void *)old, old->size);
	rec->sects = s;
	return 0;
}

void sl_rec_keep_keys_in(struct sl_rec_sects *s, const struct sl_match *m)
{
	struct sl_conc_key *k = keys_of(s);

	for (unsigned i = 0; i < s->nkeys && i < SL_CONC_KEYS; i++)
		if (m->conc_key[i].section)
			k[i] = m->conc_key[i];
}

void sl_rec_keep_keys(struct sl_record *rec, const struct sl_match *m)
{
	if (rec->sects)
		sl_rec_keep_keys_in(rec->sects, m);
}

uint64_t sl_rec_mask(const struct sl_record *rec, unsigned use)
{
	const struct sl_rec_sects *s = rec->sects;
	uint64_t mask = 0;

	for (unsigned j = 0; s && j < s->n; j++)
		if (s->e[j].use & use)
			mask |= 1ULL << j;
	return mask;
}

void sl_rec_drop_use(struct sl_record *rec, unsigned use)
{
	struct sl_rec_sects *s = rec->sects;

	for (unsigned j = 0; s && j < s->n; j++)
		s->e[j].use &= ~use;
}

void sl_rec_set_places(struct sl_record *rec, uint64_t mask)
{
	struct sl_rec_sects *s = rec->sects;

	for (unsigned j = 0; s && j < s->n; j++)
		s->e[j].use = (s->e[j].use & ~(uint32_t)SL_USE_PLACE) | ((mask >> j) & 1 ? SL_USE_PLACE : 0);
}

void sl_rec_match_mask(const struct sl_record *rec, uint64_t mask, struct sl_match *out)
{
	const struct sl_rec_sects *s = rec->sects;

	out->mask = 0;
	out->keyed = 0;
	out->overflow = s ? s->overflow : 0;
	out->pad = 0;
	memset(out->conc_key, 0, sizeof(out->conc_key));
	if (!s)
		return;
	mask &= s->n >= 64 ? ~0ULL : (1ULL << s->n) - 1;
	for (uint64_t bits = mask; bits; bits &= bits - 1) {
		unsigned j = (unsigned)__builtin_ctzll(bits);

		out->idx[j] = s->e[j].idx;
		out->serial[j] = s->e[j].serial;
	}
	out->mask = mask;
	out->keyed = s->keyed & mask;
	if (s->nkeys)
		memcpy(out->conc_key, keys_of((struct sl_rec_sects *)s), sizeof(out->conc_key));
	if (out->keyed) {
		struct sl_dest d;

		sl_keysrc_from_dest(&out->src, sl_rec_dest(rec, &d)); /* its name lives with rec */
	} else {
		memset(&out->src, 0, sizeof(out->src));
	}
}

uint64_t sl_rec_match(const struct sl_record *rec, unsigned use, struct sl_match *out)
{
	sl_rec_match_mask(rec, sl_rec_mask(rec, use), out);
	return out->mask;
}

uint64_t sl_rec_positions(const struct sl_record *rec, const struct sl_match *m)
{
	const struct sl_rec_sects *s = rec->sects;
	uint64_t mask = 0;

	for (uint64_t bits = m->mask; s && bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);

		for (unsigned j = 0; j < s->n; j++)
			if (s->e[j].idx == m->idx[k])
				mask |= 1ULL << j;
	}
	return mask;
}

/* --- destination --- */

int sl_rec_set_dest(struct sl_record *rec, const struct sl_dest *d, int keep_name)
{
	size_t n = d->name && keep_name ? SL_MIN(d->name_len, (size_t)SL_HOST_MAX - 1) : 0;
	char *name = NULL;

	if (n && !(name = sl_slab_alloc(n + 1)))
		n = 0; /* no room for it: keys by address, as for a destination without one */
	if (name) {
		memcpy(name, d->name, n);
		name[n] = '\0';
	}
	if (rec->dest.name)
		sl_slab_free(rec->dest.name, rec->dest.name_len + 1u);
	memset(&rec->dest, 0, sizeof(rec->dest));
	rec->dest.family = (uint8_t)d->family;
	rec->dest.port = d->port;
	memcpy(rec->dest.addr, d->addr, sizeof(rec->dest.addr));
	rec->dest.name = name;
	rec->dest.name_len = (uint16_t)n;
	return 0;
}

struct sl_dest *sl_rec_dest(const struct sl_record *rec, struct sl_dest *out)
{
	memset(out, 0, sizeof(*out));
	out->family = rec->dest.family;
	out->port = rec->dest.port;
	memcpy(out->addr, rec->dest.addr, sizeof(out->addr));
	out->name = rec->dest.name;
	out->name_len = rec->dest.name ? rec->dest.name_len : 0;
	return out;
}

/* --- waiting --- */

struct sl_rec_wait *sl_rec_wait_begin(struct sl_record *rec, uint64_t want)
{
	unsigned room = rec->sects ? rec->sects->n : 0;
	size_t size = offsetof(struct sl_rec_wait, pend) + SL_PENDING_SIZE(room ? room : 1);
	struct sl_rec_wait *w = rec->wait;

	if (w && w->size >= size) {
		w->want = want;
		w->first_line = 0; /* a new wait: nothing of a first write's is kept */
		sl_firstbox_free(w);
		return w;
	}
	if (w)
		sl_rec_wait_end(rec);
	if (!(w = sl_slab_alloc(size)))
		return NULL;
	memset(w, 0, offsetof(struct sl_rec_wait, pend) + sizeof(struct sl_pending));
	w->size = (uint32_t)size;
	w->want = want;
	rec->wait = w;
	return w;
}

unsigned sl_rec_wait_room(const struct sl_record *rec)
{
	const struct sl_rec_wait *w = rec->wait;

	return w ? (unsigned)((w->size - offsetof(struct sl_rec_wait, pend) - sizeof(struct sl_pending)) /
	                      sizeof(struct sl_ticket_sec))
	         : 0;
}

void sl_rec_wait_end(struct sl_record *rec)
{
	struct sl_rec_wait *w = rec->wait;

	/* Nothing of it may still be in the kernel's hands: the registrations it
	 * keeps are put back first (epoll.c). */
	if (!w || rec->ep_masked || rec->ep_withheld)
		return;
	rec->wait = NULL;
	sl_firstbox_free(w);
	sl_slab_free(w, w->size);
}

/* --- following --- */

struct sl_rec_stream *sl_rec_stream_part(struct sl_record *rec)
{
	if (!rec->stream && (rec->stream = sl_slab_alloc(sizeof(*rec->stream))))
		memset(rec->stream, 0, sizeof(*rec->stream));
	return rec->stream;
}

void sl_rec_free_parts(struct sl_record *rec)
{
	rec->ep_masked = rec->ep_withheld = 0; /* the kernel dropped them with the socket */
	sl_rec_wait_end(rec);
	if (rec->stream)
		sl_slab_free(rec->stream, sizeof(*rec->stream));
	rec->stream = NULL;
	sl_talk_free(rec);
	if (rec->sects)
		sl_slab_free(rec->sects, rec->sects->size);
	rec->sects = NULL;
	if (rec->dest.name)
		sl_slab_free(rec->dest.name, rec->dest.name_len + 1u);
	rec->dest.name = NULL;
	rec->dest.name_len = 0;
}
