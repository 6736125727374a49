/* Requests in flight (inflight.h). */
#include "inflight.h"
#include "sluice/wait.h"

/* n requests' places back (not a fork child's copy: the parent holds them). */
static void put(struct sl_record *rec, uint32_t n)
{
	struct sl_rec_stream *st = rec->stream;
	struct sl_match m;

	n = st->inflight < n ? st->inflight : n;
	if (!n || !st->inflight_mask)
		return;
	st->inflight -= n;
	sl_debug("requests on fd %d: %u answered, their places back (%u in flight)", rec->fd, n, st->inflight);
	if (rec->inherited)
		return;
	sl_rec_match_mask(rec, st->inflight_mask, &m);
	for (uint32_t i = 0; i < n; i++)
		sl_shim_give_back(st->inflight_mask, &m);
}

uint64_t sl_inflight_positions(const struct sl_record *rec, uint64_t mask)
{
	uint64_t out = 0;

	for (uint64_t bits = mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);
		const struct sl_section *sec;

		if (rec->sects && k < rec->sects->n && (sec = sl_shm_section(sl_shim.shm.hdr, rec->sects->e[k].idx)) &&
		    sec->spec.meter == SL_METER_REQUESTS)
			out |= 1ULL << k;
	}
	return out;
}

void sl_inflight_took(struct sl_record *rec, uint64_t taken)
{
	if (!taken)
		return;
	if (!rec->stream) { /* no stream to follow answers with: held until close */
		sl_rec_set_places(rec, sl_rec_places(rec) | taken);
		return;
	}
	/* One set of sections per connection: a reload that changes it mid-way puts
	 * back the union, which only a reload can make differ. */
	rec->stream->inflight_mask |= taken;
	rec->stream->inflight++;
	sl_debug("requests on fd %d: a place taken (%u in flight)", rec->fd, rec->stream->inflight);
}

void sl_inflight_from_connect(struct sl_record *rec)
{
	uint64_t req = sl_inflight_positions(rec, sl_rec_places(rec));

	if (!req || !rec->stream)
		return;
	sl_rec_set_places(rec, sl_rec_places(rec) & ~req);
	sl_inflight_took(rec, req);
}

void sl_inflight_answers(struct sl_record *rec, uint64_t ended)
{
	struct sl_rec_stream *st = rec->stream;

	if (!st || ended <= st->ended_seen)
		return;
	put(rec, (uint32_t)(ended - st->ended_seen < UINT32_MAX ? ended - st->ended_seen : UINT32_MAX));
	st->ended_seen = ended;
}

void sl_inflight_turn(struct sl_record *rec)
{
	if (rec->stream)
		put(rec, 1);
}

void sl_inflight_put_all(struct sl_record *rec)
{
	if (rec->stream)
		put(rec, UINT32_MAX);
}
