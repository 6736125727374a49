/*
 * Admission for one interposed call: which sections apply to its destination (by
 * meter), and then the steps of core/pending.c - places, reservation, release, or
 * a refusal, and the fallback when the segment cannot decide - with the shim's
 * own ways of following a moved segment and of waiting.  Calls on sockets that
 * keep a record across calls (deferred connects, held writes, requests, bytes)
 * step from held.c; the records themselves are fdtab.c's.
 */
#include "kicker.h"
#include "shim.h"
#include "sluice/clock.h"
#include "sluice/config.h"
#include "sluice/pending.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

void sl_admission_name(struct sl_dest *d, char *namebuf, size_t namelen)
{
	size_t len;

	if (!sl_shim_has_names())
		return;
	len = sl_namemap_get(d->family, d->addr, namebuf, namelen);
	if (len) {
		d->name = namebuf;
		d->name_len = len;
	}
}

int sl_admission_match_meter(const struct sl_dest *d, uint32_t meter, struct sl_match *m)
{
	struct sl_shm_header *h;
	struct sl_dest x = *d;
	int n;

	sl_shim_follow(); /* a segment moved: its successor decides from now on */
	h = sl_shim.shm.hdr;
	m->mask = 0;
	m->keyed = 0;
	m->overflow = 0;
	if (!(sl_shim_meters() & (1u << (meter & 31))))
		return 0; /* no section meters that: nothing to look at */
	x.meter = meter;
	n = sl_match_sections(h, &x, m, sl_shim_self());
	return n < 0 ? 0 : n;
}

int sl_admission_match(struct sl_dest *d, char *namebuf, size_t namelen, struct sl_match *m)
{
	sl_admission_name(d, namebuf, namelen);
	return sl_admission_match_meter(d, d->meter, m);
}

void sl_admission_match_tcp(const struct sl_dest *d, struct sl_tcp_match *t)
{
	t->n = sl_admission_match_meter(d, SL_METER_CONNECTIONS, &t->m);
	t->nr = sl_admission_match_meter(d, SL_METER_REQUESTS, &t->rm);
	t->nb = sl_admission_match_meter(d, SL_METER_BYTES, &t->bm);
}

void sl_admission_sections(const struct sl_match *m, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (uint64_t bits = m->mask; bits && used + 2 < size; bits &= bits - 1) {
		struct sl_section *sec = sl_shm_section(sl_shim.shm.hdr, m->idx[__builtin_ctzll(bits)]);

		if (sec)
			used += (size_t)snprintf(buf + used, size - used, "%s%.*s", used ? "," : "",
			                         SL_SECTION_NAME_MAX - 1, sec->spec.name);
	}
}

void sl_admission_ask(struct sl_pending_ask *a, const struct sl_dest *d, struct sl_match *m,
                      int default_refuse, int places)
{
	a->m = m;
	a->d = d;
	a->cost = 0;
	a->self = sl_shim_self();
	a->fallback = sl_shim.fallback;
	a->default_errno = default_refuse;
	a->places = places;
	a->segment = sl_shim_segment; /* places given back follow a moved segment */
	a->segment_ctx = NULL;
	/* No daemon by design (control_socket = none): closed refuses every matched
	 * call, and a section only a daemon can keep is never limited per process. */
	a->refuse_all = sl_shim.mode == SL_SHIM_LOCAL &&
	                (sl_shim.fallback == SL_FALLBACK_CLOSED || sl_match_needs_daemon(sl_shim.shm.hdr, m));
	a->orphans = sl_shim.mode == SL_SHIM_SHARED;
}

int sl_admission_step(struct sl_pending *p, int64_t now, sl_act_fn act, void *arg)
{
	/* A held socket's look again for a claim is the kicker's, which claims
	 * wake where the kernel lets it. */
	p->claims_wakeable = (uint8_t)sl_kicker_claims_wakeable();
	/* MOVED: followed, and stepped again at once; CHECK: asked, and stepped
	 * again; the stepper bounds both. */
	for (;;) {
		int rc = sl_pending_step(p, sl_shim.shm.hdr, now, act, arg);

		if (rc != SL_PEND_MOVED && rc != SL_PEND_CHECK)
			return rc;
		sl_shim_segment(NULL, rc == SL_PEND_MOVED ? SL_SEGMENT_FOLLOW : SL_SEGMENT_CHECK, &p->ask.self);
	}
}

void sl_admission_said(const struct sl_pending *p, int rc, const char *what)
{
	char dest[SL_HOST_MAX + 80] = "-", names[256];
	const struct sl_ticket *t = &p->t;

	if (!sl_shim.debug)
		return;
	if (p->ask.d)
		sl_dest_format(p->ask.d, dest, sizeof(dest));
	sl_admission_sections(p->ask.m, names, sizeof(names));
	if (p->undecided_why)
		sl_debug("%s %s sections=%s: undecided (%s); fallback = %s", what, dest, names, p->undecided_why,
		         p->ask.fallback == SL_FALLBACK_OPEN     ? "open: goes unshaped"
		         : p->ask.fallback == SL_FALLBACK_CLOSED ? "closed: refused"
		                                                 : "local: waits for the shared queue, up to max_wait");
	if (rc == SL_PEND_REFUSED)
		sl_debug("%s %s sections=%s: refused (%s%s%.*s%s)", what, dest, names, p->why ? p->why : "refused",
		         p->refusing_section >= 0 ? " of [" : "", SL_SECTION_NAME_MAX - 1,
		         p->refusing_section >= 0 ? sl_section_name(sl_shim.shm.hdr, p->refusing_section) : "",
		         p->refusing_section >= 0 ? "]" : "");
	else if (rc == SL_PEND_WAIT)
		sl_debug("%s %s sections=%s: %s in %.3fms", what, dest, names,
		         p->phase == SL_PEND_PLACES ? "waits for a concurrency place; looks again"
		                                    : "waits for its slot",
		         (double)(p->at - p->asked_ns) / 1e6);
	else if (p->why)
		sl_debug("%s %s sections=%s: go (%s)", what, dest, names, p->why);
	else if (t->mask)
		/* released= is the instant the release check let it go, the quantity the
		 * spacing guarantee is about; the real call follows at once. */
		sl_debug("%s %s sections=%s: go waited=%.3fms slot=%lld released=%lld", what, dest, names,
		         (double)(t->released_ns - t->arrival_ns) / 1e6, (long long)t->release_ns,
		         (long long)t->released_ns);
	else
		sl_debug("%s %s sections=%s: go (no rate to wait for, or observe only)", what, dest, names);
}

struct sl_shm_header *sl_shim_segment(void *ctx, int ask, int32_t *self)
{
	(void)ctx;
	if (ask == SL_SEGMENT_CHECK)
		sl_shim_check_orphan();
	if (ask != SL_SEGMENT_AS_IS)
		sl_shim_follow();
	if (self)
		*self = sl_shim_self();
	return sl_shim.shm.hdr;
}

void sl_shim_give_back(uint64_t mask, struct sl_match *m)
{
	sl_pending_give_back(sl_shim.shm.hdr, mask, m, sl_shim_self(), sl_shim_segment, NULL);
}

/* Thread cancelled while asleep: hand the slot and places back. */
static void cancel_on_cancel(void *arg)
{
	sl_pending_cancel(arg, sl_shim.shm.hdr);
}

int sl_admission_wait(const struct sl_dest *d, struct sl_match *m, const char *what,
                      int default_refuse)
{
	return sl_admission_wait_act(d, m, what, default_refuse, NULL, NULL);
}

int sl_admission_wait_act(const struct sl_dest *d, struct sl_match *m, const char *what,
                          int default_refuse, sl_act_fn act, void *arg)
{
	struct sl_pending_ask a;
	union sl_pending_room p_room;
	struct sl_pending *const p = &p_room.p;
	int rc;

	sl_admission_ask(&a, d, m, default_refuse, 0);
	sl_pending_start(p, sl_shim.shm.hdr, &a, sl_clock_mono_ns());
	pthread_cleanup_push(cancel_on_cancel, p);
	rc = sl_pending_wait(p, sl_shim_segment, NULL, NULL, act, arg);
	pthread_cleanup_pop(0);
	sl_admission_said(p, rc, what);
	return rc == SL_PEND_GO ? 0 : -p->err;
}
