/*
 * The hold decision shared by every interposed call: which sections apply, and then
 * reserve, sleep, release (or refuse).  Sleeping happens with no lock held and with
 * signals deliverable; the short critical sections run with signals blocked so a
 * handler that siglongjmps out can never leave the segment lock taken.
 */
#include "shim.h"
#include "sluice/clock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

int sl_hold_match(struct sl_dest *d, char *namebuf, size_t namelen, struct sl_match *m)
{
	struct sl_shm_header *h = sl_shim.shm.hdr;
	int n;

	if (h->has_names) {
		size_t len = sl_namemap_get(d->family, d->addr, namebuf, namelen);

		if (len) {
			d->name = namebuf;
			d->name_len = len;
		}
	}
	n = sl_admit_match(h, d, m);
	if (n < 0)
		sl_debug("segment is being rewritten too often to read: passing through");
	return n < 0 ? 0 : n;
}

static void section_names(const struct sl_match *m, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < SL_MAX_SECTIONS && used + 2 < size; i++) {
		struct sl_section *sec;

		if (!(m->mask & (1ULL << i)))
			continue;
		sec = sl_shm_section(sl_shim.shm.hdr, i);
		used += (size_t)snprintf(buf + used, size - used, "%s%.*s", used ? "," : "",
		                         SL_SECTION_NAME_MAX - 1, sec->spec.name);
	}
}

struct critical {
	sigset_t old;
};

static void enter_critical(struct critical *c)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &c->old);
}

static void leave_critical(struct critical *c)
{
	pthread_sigmask(SIG_SETMASK, &c->old, NULL);
}

/* Thread cancelled while asleep: hand the slot back. */
static void refund_on_cancel(void *arg)
{
	struct critical c;

	enter_critical(&c);
	sl_admit_refund(sl_shim.shm.hdr, arg, sl_shim.pid);
	leave_critical(&c);
}

/* Sleep to the ticket's slot, then until the strict release check agrees (it asks
 * for more only when an earlier waiter woke late).  Bounded: a corrupt segment can
 * not keep a caller here for ever. */
static void sleep_until_released(struct sl_shm_header *h, struct sl_ticket *t)
{
	int64_t at = t->release_ns, retry;
	struct critical c;
	int slack = -1;

	for (int rounds = 0; rounds < 1000; rounds++) {
		int rc;

		if (at > sl_clock_mono_ns()) {
			/* The default 50us timer slack would make every release late by that
			 * much, and in a backlog each late release pushes the next one: sleep
			 * precisely, and put the thread's own setting back afterwards. */
			if (slack < 0 && (slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) > 1)
				prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
			/* EINTR: a handler ran; resume towards the same absolute deadline. */
			while (sl_clock_sleep_until(at) == -EINTR)
				;
		}
		enter_critical(&c);
		rc = sl_admit_release(h, t, sl_clock_mono_ns(), sl_shim.pid, &retry);
		leave_critical(&c);
		if (rc == 0)
			break;
		at = retry;
	}
	if (slack > 1)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
}

int sl_hold_wait(const struct sl_dest *d, const struct sl_match *m, const char *what,
                 int default_refuse)
{
	struct sl_shm_header *h = sl_shim.shm.hdr;
	struct sl_ticket t;
	struct critical c;
	char dest[SL_HOST_MAX + 80], names[256];
	int64_t now;
	int rc;

	if (sl_shim.debug) {
		sl_dest_format(d, dest, sizeof(dest));
		section_names(m, names, sizeof(names));
	}
	if (sl_shim.mode == SL_SHIM_CLOSED) {
		sl_admit_count_refused(h, m);
		sl_debug("%s %s sections=%s: refused (fallback = closed)", what, dest, names);
		return -default_refuse;
	}
	now = sl_clock_mono_ns();
	enter_critical(&c);
	rc = sl_admit_reserve(h, m, now, sl_shim.pid, &t);
	leave_critical(&c);
	if (rc == -ECONNREFUSED) {
		sl_debug("%s %s sections=%s: refused (wait would exceed max_wait of [%s])", what,
		         dest, names,
		         t.refusing_section >= 0 ? sl_shm_section(h, (unsigned)t.refusing_section)->spec.name : "?");
		return -(t.refuse_errno ? t.refuse_errno : default_refuse);
	}
	if (rc < 0) {
		sl_debug("%s %s sections=%s: passing through (%s)", what, dest, names,
		         rc == -ETIMEDOUT ? "segment lock unavailable" : "sections changed");
		return 0;
	}
	if (t.mask == 0) {
		sl_debug("%s %s sections=%s: go (observe only)", what, dest, names);
		return 0;
	}
	pthread_cleanup_push(refund_on_cancel, &t);
	sleep_until_released(h, &t);
	pthread_cleanup_pop(0);
	now = sl_clock_mono_ns();
	sl_debug("%s %s sections=%s: go waited=%.3fms slot=%lld released=%lld", what, dest,
	         names, (double)(now - t.arrival_ns) / 1e6, (long long)t.release_ns,
	         (long long)now);
	return 0;
}
