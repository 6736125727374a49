/*
 * The parsers a record runs over its connection (record.h, struct sl_rec_talk):
 * parked between calls - about fifty bytes for both - and whole, with their line
 * buffers, only while a line spans two calls.  A call that feeds them opens them
 * (into the caller's scratch when parked), feeds, and closes them (parked again
 * when it can be).  All under the record's lock.
 */
#include "h2.h"
#include "record.h"

#include <errno.h>
#include <string.h>

int sl_talk_begin(struct sl_record *rec)
{
	struct sl_rec_lines fresh;

	if (rec->talk)
		return 0;
	if (!(rec->talk = sl_slab_alloc(sizeof(*rec->talk))))
		return -ENOMEM;
	sl_http1_init(&fresh.h1);
	sl_resp_init(&fresh.resp);
	memset(rec->talk, 0, sizeof(*rec->talk));
	sl_http1_park(&fresh.h1, &rec->talk->h1);
	sl_resp_park(&fresh.resp, &rec->talk->resp);
	return 0;
}

void sl_talk_free(struct sl_record *rec)
{
	if (!rec->talk)
		return;
	if (rec->talk->lines)
		sl_slab_free(rec->talk->lines, sizeof(*rec->talk->lines));
	if (rec->talk->refunds)
		sl_slab_free(rec->talk->refunds, sizeof(*rec->talk->refunds));
	sl_h2_free(rec);
	sl_slab_free(rec->talk, sizeof(*rec->talk));
	rec->talk = NULL;
}

struct sl_rec_lines *sl_talk_open(struct sl_record *rec, struct sl_rec_lines *scratch)
{
	if (!rec->talk)
		return NULL;
	if (rec->talk->lines)
		return rec->talk->lines;
	sl_http1_unpark(&scratch->h1, &rec->talk->h1);
	sl_resp_unpark(&scratch->resp, &rec->talk->resp);
	return scratch;
}

void sl_talk_close(struct sl_record *rec, struct sl_rec_lines *l)
{
	struct sl_rec_talk *t = rec->talk;
	struct sl_h1_parked h1;
	struct sl_resp_parked resp;

	if (!t || !l)
		return;
	if (sl_http1_park(&l->h1, &h1) && sl_resp_park(&l->resp, &resp)) {
		t->h1 = h1;
		t->resp = resp;
		if (t->lines) {
			sl_slab_free(t->lines, sizeof(*t->lines));
			t->lines = NULL;
		}
		return;
	}
	if (l == t->lines)
		return; /* a line still under way, in the parsers kept whole */
	if ((t->lines = sl_slab_alloc(sizeof(*t->lines)))) {
		*t->lines = *l;
		return;
	}
	/* No room to keep a line under way: the parsers give up on the connection,
	 * as they do on what they cannot follow. */
	l->h1.state = SL_H1_LOST;
	l->resp.state = SL_RESP_LOST;
	sl_http1_park(&l->h1, &t->h1);
	sl_resp_park(&l->resp, &t->resp);
}

int sl_talk_h1_state(const struct sl_record *rec)
{
	const struct sl_rec_talk *t = rec->talk;

	return !t ? SL_H1_LOST : t->lines ? t->lines->h1.state : t->h1.state;
}

uint64_t sl_talk_h1_requests(const struct sl_record *rec)
{
	const struct sl_rec_talk *t = rec->talk;

	return !t ? 0 : t->lines ? t->lines->h1.requests : t->h1.requests;
}

int sl_talk_resp_state(const struct sl_record *rec)
{
	const struct sl_rec_talk *t = rec->talk;

	return !t ? SL_RESP_LOST : t->lines ? t->lines->resp.state : t->resp.state;
}
