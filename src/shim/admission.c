/*
 * Admission for one interposed call: which sections apply to its destination (by
 * meter), and then reserve, sleep, release (or refuse) through wait.h.  Calls on
 * sockets that keep a record across calls (deferred connects, held writes,
 * requests, bytes) go through held.c; the records themselves are fdtab.c's.
 */
#include "shim.h"
#include "sluice/clock.h"
#include "sluice/wait.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

int sl_shim_follow_slow(void)
{
	static pthread_mutex_t follow_lock = PTHREAD_MUTEX_INITIALIZER;
	int rc;

	/* One thread attaches; the others find it done. */
	sl_shim_lock(&follow_lock);
	rc = sl_shm_follow(&sl_shim.shm, sl_shim.shm_name);
	sl_shim_unlock(&follow_lock);
	if (rc > 0)
		__atomic_store_n(&sl_shim.followed_ns, sl_clock_mono_ns(), __ATOMIC_RELEASE);
	if (rc > 0)
		sl_debug("segment %s moved: attached its successor (generation %llu)", sl_shim.shm_name,
		         (unsigned long long)sl_shim.shm.hdr->generation);
	else if (rc < 0 && rc != -ESTALE)
		sl_debug("segment %s moved, and its successor cannot be attached: %s", sl_shim.shm_name,
		         strerror(-rc));
	return rc > 0;
}

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
	n = sl_admit_match(h, &x, m, sl_shim.pid);
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

const char *sl_admission_refusal(const struct sl_ticket *t)
{
	return t->key_full ? "no room in the key table for this destination's key"
	                   : "wait would exceed max_wait";
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

/* Thread cancelled while asleep: hand the slot back. */
static void refund_on_cancel(void *arg)
{
	sl_wait_refund(sl_shim.shm.hdr, arg, sl_shim.pid);
}

int sl_admission_wait(const struct sl_dest *d, const struct sl_match *m, const char *what,
                 int default_refuse)
{
	return sl_admission_wait_act(d, m, what, default_refuse, NULL, NULL);
}

int sl_admission_wait_act(const struct sl_dest *d, const struct sl_match *m, const char *what,
                     int default_refuse, sl_act_fn act, void *arg)
{
	struct sl_shm_header *h = sl_shim.shm.hdr;
	struct sl_ticket t;
	char dest[SL_HOST_MAX + 80], names[256];
	int64_t retry;
	int rc, went;

	if (sl_shim.debug) {
		sl_dest_format(d, dest, sizeof(dest));
		sl_admission_sections(m, names, sizeof(names));
	}
	if (sl_shim.mode == SL_SHIM_CLOSED) {
		sl_admit_count_refused(h, m);
		sl_debug("%s %s sections=%s: refused (fallback = closed)", what, dest, names);
		return -default_refuse;
	}
	rc = sl_wait_reserve_go_act(h, m, sl_clock_mono_ns(), sl_shim.pid, &t, &went, &retry, act, arg);
	if (rc == -ECONNREFUSED) {
		sl_debug("%s %s sections=%s: refused (%s of [%.*s])", what, dest, names, sl_admission_refusal(&t),
		         SL_SECTION_NAME_MAX - 1, sl_section_name(h, t.refusing_section));
		return -(t.refuse_errno ? t.refuse_errno : default_refuse);
	}
	if (rc < 0)
		return sl_undecided(d, m, what, default_refuse,
		                    rc == -ETIMEDOUT ? "segment lock unavailable" : "sections changed");
	if (t.mask == 0) {
		sl_debug("%s %s sections=%s: go (no rate to wait for, or observe only)", what, dest, names);
		return 0;
	}
	if (went != 0) { /* not released with the reservation: wait for the slot */
		pthread_cleanup_push(refund_on_cancel, &t);
		rc = sl_wait_release_act(h, &t, sl_shim.pid, NULL, act, arg);
		pthread_cleanup_pop(0);
	}
	if (rc == -ECONNREFUSED) {
		sl_debug("%s %s sections=%s: refused (its queue ran past max_wait of [%.*s])", what, dest, names,
		         SL_SECTION_NAME_MAX - 1, sl_section_name(h, t.refusing_section));
		return -(t.refuse_errno ? t.refuse_errno : default_refuse);
	}
	if (rc < 0)
		return sl_undecided(d, m, what, default_refuse, "release check unavailable");
	/* released= is the instant the release check let it go, the quantity the
	 * spacing guarantee is about; the real call follows at once. */
	sl_debug("%s %s sections=%s: go waited=%.3fms slot=%lld released=%lld", what, dest,
	         names, (double)(t.released_ns - t.arrival_ns) / 1e6, (long long)t.release_ns,
	         (long long)t.released_ns);
	return 0;
}
