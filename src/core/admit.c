#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/critical.h"
#include "sluice/delivery.h"
#include "sluice/index.h"
#include "sluice/keys.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/pause.h"
#include "sluice/quota.h"
#include "sluice/refund.h"
#include "sluice/shm.h"
#include "sluice/stats.h"
#include "sluice/strategy.h"
#include "sluice/summary.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))
#define LOCK_TIMEOUT_NS (2 * SL_NS_PER_S)
#define SL_ACT_GUARD_NS (250 * SL_NS_PER_MS) /* see sl_admit_release_act */
#define MAX_WAIT_GRACE_NS (100 * SL_NS_PER_MS) /* see reserve_locked */


/* The section at index i if it is still the one the caller matched. */
static struct sl_section *live_section(struct sl_shm_header *h, unsigned i, uint32_t serial)
{
	struct sl_section *sec = sl_shm_section(h, i);

	return sec && sec->in_use && sec->serial == serial ? sec : NULL;
}

/* The segment's view of UTC: fixed windows align to it. */
static int64_t wall_off(const struct sl_shm_header *h)
{
	return sl_sane_ns(h->wall_off_ns);
}

/* The state that holds section i's limit for a call to `src`: the section's own,
 * or (per = ...) its key's - the one `ref` names while it is still that key's,
 * else found again by identity, or with `create` made (ref then names it).  NULL
 * when the key cannot be had: missing, or every record it may use busy. */
static struct sl_state *limit_state(struct sl_shm_header *h, unsigned i, struct sl_section *sec,
                                    const struct sl_keysrc *src, struct sl_keyref *ref,
                                    int create, int64_t now)
{
	struct sl_key *k = NULL;

	if (sec->spec.per == SL_PER_NONE)
		return &sec->state;
	if (sl_spec_needs_more(&sec->spec) && !sl_shm_dims_of(h).key_more)
		return NULL; /* its keys would need more than their records hold (sl_shm_fits) */
	if (ref->serial)
		k = sl_keys_ref(h, i, ref->slot, ref->serial);
	if (!k && (k = sl_keys_find(h, i, src, create, now))) {
		ref->slot = sl_key_slot(h, k);
		ref->serial = k->serial;
	}
	if (k)
		k->last_used_ns = SL_MAX(k->last_used_ns, now);
	return k ? &k->state : NULL;
}

/* The same for a ticket's section at position k (its key found again or made). */
static struct sl_state *ticket_state(struct sl_shm_header *h, struct sl_ticket *t, unsigned k,
                                     struct sl_section *sec, int create, int64_t now)
{
	return limit_state(h, t->sec[k].idx, sec, &t->src, &t->sec[k].key, create, now);
}

/* Reset st, section sec's own state or one of its keys', when it lies further
 * ahead than any admission can put it (sl_strategy_repair), counted in the
 * section's repaired; 1 when it did. */
static int repair(struct sl_shm_header *h, struct sl_section *sec, struct sl_state *st, int64_t now)
{
	if (!sl_limit_repair(&sec->spec, st, now, wall_off(h)))
		return 0;
	atomic_fetch_add_explicit(A(&sec->more.repaired), 1, memory_order_relaxed);
	return 1;
}

/* The ticket's section at position k if it is still the one reserved in. */
static struct sl_section *ticket_section(struct sl_shm_header *h, const struct sl_ticket *t,
                                         unsigned k)
{
	return live_section(h, t->sec[k].idx, t->sec[k].serial);
}

/* Count a refusal in every section of the ticket's mask. */
static void count_refused(struct sl_shm_header *h, const struct sl_ticket *t)
{
	for (uint64_t bits = t->mask; bits; bits &= bits - 1) {
		struct sl_section *sec = sl_shm_section(h, t->sec[__builtin_ctzll(bits)].idx);

		if (sec)
			atomic_fetch_add_explicit(A(&sec->more.refused), 1, memory_order_relaxed);
	}
}

/* A key counts its own admissions too (`sluice stat --top`); the section's state
 * holds the sums. */
static void count_key(struct sl_section *sec, struct sl_state *st, uint64_t units)
{
	if (st != &sec->state)
		atomic_fetch_add_explicit(A(&st->admitted), units, memory_order_relaxed);
}

/* What a request costs in a section: its bytes for meter = bytes, else 1. */
static uint64_t cost_in(const struct sl_section *sec, const struct sl_ticket *t)
{
	return sec->spec.meter == SL_METER_BYTES ? t->cost : 1;
}

/* A fresh ticket for a request of `bytes` (0: one request) arriving now. */
static void ticket_begin(struct sl_ticket *t, const struct sl_match *m, int64_t now, uint64_t bytes)
{
	t->mask = 0;
	t->arrival_ns = now;
	t->give_up_ns = INT64_MAX;
	t->cost = bytes ? bytes : 1;
	t->refuse_errno = 0;
	t->refusing_section = -1;
	t->key_full = 0;
	if (m->keyed)
		t->src = m->src;
}

/* Refuse t as section i says (-1 or gone: the default errno).  The refusal is
 * counted in every section t had charged so far, and in i when count_i; nothing
 * stays charged. */
static int ticket_refuse(struct sl_shm_header *h, struct sl_ticket *t, int i, int count_i)
{
	struct sl_section *sec = i >= 0 ? sl_shm_section(h, (unsigned)i) : NULL;

	count_refused(h, t);
	if (sec && count_i)
		atomic_fetch_add_explicit(A(&sec->more.refused), 1, memory_order_relaxed);
	t->mask = 0;
	t->refusing_section = sec ? i : -1;
	t->refuse_errno = sec ? sec->spec.refuse : 0;
	return -ECONNREFUSED;
}

/* An observing section (mode = observe): model what enforcing would do - count
 * what it would have held or refused, charge what it would have let go - without
 * holding anyone. */
static void observe(struct sl_section *sec, struct sl_state *st, int64_t slot, int64_t now,
                    uint64_t cost, int64_t wall)
{
	struct sl_undo ignored;

	if (slot > now)
		atomic_fetch_add_explicit(A(&sec->more.observed), 1, memory_order_relaxed);
	if (sec->spec.max_wait_ns >= 0 && slot - now > sec->spec.max_wait_ns)
		atomic_fetch_add_explicit(A(&sec->more.refused), 1, memory_order_relaxed);
	else
		sl_limit_charge(&sec->spec, st, slot, cost, wall, &ignored);
	atomic_fetch_add_explicit(A(&sec->state.admitted), 1, memory_order_relaxed);
	count_key(sec, st, 1);
}

/* What the first pass of a reservation finds over a match. */
struct plan {
	int64_t release;  /* the latest slot over the enforcing sections (>= now) */
	int64_t max_wait; /* the tightest max_wait among them; -1: none */
	int limiting;     /* the section whose slot that is; -1: none */
	int live;         /* sections still the ones matched */
	int fleet;        /* some enforcing section keeps a fleet share */
};

/* Pass 1: for each enforcing section of m, its key (made when charging) and the
 * slot it would give; t->mask gathers them.  Observing sections are modelled here
 * (when charging).  0, or a refusal when a key has no room: never let through
 * unlimited for want of a record. */
static int plan_sections(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                         struct sl_ticket *t, int charge, struct plan *p)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec = sl_shm_section(h, i);
		struct sl_state *st;
		int64_t slot;

		/* Scribbled since the daemon wrote it: nothing is decided on it (not
		 * even that it is gone), until the daemon writes it back. */
		if (sec && !sl_section_sealed(sec))
			return -EBADMSG;
		if (!(sec = live_section(h, i, m->serial[k])))
			continue;
		p->live++;
		if (!sl_limit_rated(&sec->spec))
			continue;
		t->sec[k].idx = i;
		t->sec[k].key.serial = 0;
		if (!(st = limit_state(h, i, sec, &m->src, &t->sec[k].key, charge, now))) {
			if (!charge || sec->spec.mode == SL_MODE_OBSERVE)
				continue; /* a check makes no key; observing holds no one */
			t->key_full = 1;
			return ticket_refuse(h, t, (int)i, 1);
		}
		repair(h, sec, st, now); /* never sleep on a scribble */
		slot = sl_limit_slot(&sec->spec, st, now, cost_in(sec, t), wall_off(h));
		if (sec->spec.mode == SL_MODE_OBSERVE) {
			if (charge)
				observe(sec, st, slot, now, cost_in(sec, t), wall_off(h));
			continue;
		}
		slot = sl_pause_slot(st, &sec->spec, slot, now, 0); /* the destination's word */
		slot = SL_MAX(slot, sl_shm_hold(h, now));         /* a successor's hold */
		t->mask |= 1ULL << k;
		t->sec[k].serial = m->serial[k];
		p->fleet |= sl_limit_fleet(&sec->spec);
		if (slot > p->release || p->limiting < 0) {
			p->release = SL_MAX(p->release, slot);
			p->limiting = (int)i;
		}
		if (sec->spec.max_wait_ns >= 0 && (p->max_wait < 0 || sec->spec.max_wait_ns < p->max_wait))
			p->max_wait = sec->spec.max_wait_ns;
	}
	return 0;
}

/* Pass 2: charge every section of t->mask at the common release time (each key
 * found in pass 1 is where its ref says: nothing was evicted in between, as an
 * evicted key is idle and these are not, or were made just now), remembering
 * what returning each charge restores. */
static void charge_sections(struct sl_shm_header *h, struct sl_ticket *t, int64_t release,
                            int64_t now, int32_t self)
{
	for (uint64_t bits = t->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);
		struct sl_section *sec = sl_shm_section(h, t->sec[k].idx);
		struct sl_state *st;

		if (!(st = ticket_state(h, t, k, sec, 1, now)))
			continue;
		sl_limit_charge(&sec->spec, st, release, cost_in(sec, t), wall_off(h), &t->sec[k].undo);
		sl_pause_slot(st, &sec->spec, release, now, 1);
		t->sec[k].seq = ++st->seq;
		st->last_owner = self;
		st->last_seq = t->sec[k].seq;
		st->last_undo = t->sec[k].undo;
		st->last_slot = release;
		if (t->release_ns > now && sl_limit_fleet(&sec->spec))
			sl_lease_held(st, t->release_ns); /* its next look (note_held) */
	}
}

/* Under the lock.  charge = 0: only tell whether a reservation now would be
 * refused (no state changes but the refusal counter). */
static int reserve_locked(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                          int32_t self, struct sl_ticket *t, int charge, uint64_t bytes)
{
	struct plan p = {.release = now, .max_wait = -1, .limiting = -1};
	int rc;

	ticket_begin(t, m, now, bytes);
	/* More sections apply than a match can hold: refused, never let through with
	 * some of its limits unchecked. */
	if (m->overflow)
		return ticket_refuse(h, t, m->mask ? (int)m->idx[0] : -1, 0);
	if ((rc = plan_sections(h, m, now, t, charge, &p)) < 0)
		return rc;
	if (p.live == 0)
		return -ESTALE;
	if (p.max_wait >= 0 && p.release - now > p.max_wait)
		return ticket_refuse(h, t, p.limiting, 0);
	if (!charge) {
		t->mask = 0;
		return 0;
	}
	/* Charged at its slot; a caller on a fleet share looks again sooner (lease.h). */
	t->release_ns = p.fleet ? sl_limit_wake(&sl_shm_section(h, (unsigned)p.limiting)->spec, p.release, now)
	                        : p.release;
	charge_sections(h, t, p.release, now, self);
	/* A release that finds its gate still closed past max_wait - the queue pushed
	 * on by what happened after the reservation, a wall-clock step moving the
	 * windows, a repaired state - is refused then rather than held on (docs/config.md, max_wait:
	 * a wait longer than max_wait fails).  The grace keeps the ordinary lateness of
	 * a queue, milliseconds, from turning into refusals. */
	if (p.max_wait >= 0)
		t->give_up_ns = now + p.max_wait + MAX_WAIT_GRACE_NS + p.max_wait / 10;
	t->slot_ns = p.release;
	t->held = p.release > now;
	return 0;
}

static int reserve(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                   int32_t self, struct sl_ticket *t, int charge, uint64_t bytes)
{
	int rc = sl_shm_lock(h, self, LOCK_TIMEOUT_NS);

	if (rc < 0)
		return rc; /* 1 said the lock was taken over from a dead holder: no matter */
	rc = reserve_locked(h, m, now, self, t, charge, bytes);
	sl_shm_unlock(h, self);
	return rc;
}

int sl_admit_reserve(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                     int32_t self, struct sl_ticket *t)
{
	return reserve(h, m, now, self, t, 1, 0);
}

int sl_admit_reserve_bytes(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                           int32_t self, struct sl_ticket *t, uint64_t bytes)
{
	return reserve(h, m, now, self, t, 1, bytes);
}

int sl_admit_check(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                   int32_t self, struct sl_ticket *t)
{
	return reserve(h, m, now, self, t, 0, 0);
}

int sl_admit_release(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self,
                     int64_t *retry_ns)
{
	return sl_admit_release_act(h, t, now, self, retry_ns, NULL, NULL);
}

int64_t sl_admit_peek(struct sl_shm_header *h, const struct sl_ticket *t, int64_t now)
{
	int64_t at = now;

	for (uint64_t bits = t->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits);
		const struct sl_section *sec = ticket_section(h, t, k);
		const struct sl_state *st = sec ? &sec->state : NULL;
		const struct sl_key *key;

		if (!sec)
			continue;
		/* A fleet share and a key not where the ticket left it: the locked
		 * check looks (it may count a miss, or make the key). */
		if (sl_limit_fleet(&sec->spec))
			return now;
		if (sec->spec.per != SL_PER_NONE) {
			if (!t->sec[k].key.serial ||
			    !(key = sl_keys_ref(h, t->sec[k].idx, t->sec[k].key.slot, t->sec[k].key.serial)))
				return now;
			st = &key->state;
		}
		at = SL_MAX(at, sl_strategy_release_at(&sec->spec, st, now, cost_in(sec, t), wall_off(h)));
		at = SL_MAX(at, sl_pause_release_at(st, &sec->spec, now));
	}
	at = SL_MAX(at, sl_shm_hold(h, now));
	return SL_MIN(at, now + SL_PEEK_MAX_NS);
}

/* A walk over the sections a ticket was charged in that are still the ones it
 * reserved in, each with its state - the section's own, or its key's, made again
 * when asked (NULL: the key is not to be had). */
struct ticket_walk {
	struct sl_shm_header *h;
	struct sl_ticket *t;
	uint64_t bits;          /* positions still to visit */
	unsigned k;             /* the position visited */
	struct sl_section *sec; /* its section */
	struct sl_state *st;    /* its state, or NULL */
};

static struct ticket_walk ticket_walk(struct sl_shm_header *h, struct sl_ticket *t)
{
	return (struct ticket_walk){.h = h, .t = t, .bits = t->mask};
}

/* The next live section of the walk (0: none left); its key made when `make`. */
static int ticket_next(struct ticket_walk *w, int make, int64_t now)
{
	while (w->bits) {
		w->k = (unsigned)__builtin_ctzll(w->bits);
		w->bits &= w->bits - 1;
		if ((w->sec = ticket_section(w->h, w->t, w->k))) {
			w->st = ticket_state(w->h, w->t, w->k, w->sec, make, now);
			return 1;
		}
	}
	return 0;
}

/* Return a ticket's charge to state st (NULL: none) if it is still the last one
 * handed out there: later callers hold theirs. */
static void give_back(const struct sl_spec *spec, struct sl_state *st, const struct sl_ticket_sec *ts)
{
	if (st && st->seq == ts->seq) {
		sl_limit_undo(spec, st, &ts->undo);
		st->seq--;
		st->last_owner = 0;
	}
}

/* Under the lock: t's gate lies past its max_wait.  Its slots are given back
 * where they are still the last handed out (as a caller giving up gives them),
 * the refusal counted in each of its sections, and the errno of the section whose
 * gate it was taken. */
static void refuse_late(struct sl_shm_header *h, struct sl_ticket *t, int limiting)
{
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 0, t->arrival_ns);) {
		give_back(&w.sec->spec, w.st, &t->sec[w.k]);
		atomic_fetch_add_explicit(A(&w.sec->more.refused), 1, memory_order_relaxed);
	}
	t->refusing_section = limiting;
	t->refuse_errno = limiting >= 0 && sl_shm_section(h, (unsigned)limiting)
	                  ? sl_shm_section(h, (unsigned)limiting)->spec.refuse : 0;
	/* t->mask stays: callers tell a refusal by the result, never by an empty
	 * mask, which means "nothing to wait for". */
}

/* t is held until `until`: each fleet lease it waits on learns that a caller
 * looks again then (lease.h, held_until_ns) - the daemon's sign that this
 * machine has callers held, which a queue read from the schedule misses once
 * the slots a caller reserved have passed (docs/design.md, "Across machines"). */
static void note_held(struct sl_shm_header *h, struct sl_ticket *t, int64_t until, int64_t now)
{
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 0, now);)
		if (w.st && sl_limit_fleet(&w.sec->spec))
			sl_lease_held(w.st, until);
}

/* When t's gate opens: the latest over its sections of the strategy's release
 * time and the destination's pause (now when every gate is open), and the section
 * it is latest in (*limiting; -1 if none).  -ETIMEDOUT when a key evicted since
 * the reservation (it went idle: the caller woke that late) finds no room to be
 * made again: with no state to check, nothing is decided. */
static int64_t gate_of(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int sealed,
                       int *limiting, int64_t *saving)
{
	int64_t later = now;

	*limiting = -1;
	*saving = now;
	for (uint64_t bits = sealed ? 0 : t->mask; bits; bits &= bits - 1) {
		const struct sl_section *sec = sl_shm_section(h, t->sec[__builtin_ctzll(bits)].idx);

		if (sec && !sl_section_sealed(sec))
			return -EBADMSG; /* scribbled: no gate is read from it (summary.h) */
	}
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 1, now);) {
		int64_t at;

		if (!w.st)
			return -ETIMEDOUT;
		repair(h, w.sec, w.st, now);
		at = SL_MAX(sl_limit_release_at(&w.sec->spec, w.st, now, cost_in(w.sec, t), wall_off(h)),
		            sl_pause_release_at(w.st, &w.sec->spec, now));
		at = SL_MAX(at, sl_shm_hold(h, now));
		*saving = SL_MAX(*saving, sl_quota_release_at(h, &w.sec->spec, w.st, now, cost_in(w.sec, t)));
		if (at > later) {
			later = at;
			*limiting = (int)t->sec[w.k].idx;
		}
	}
	return later;
}

/* The released call itself, made before anyone else may be released: the release
 * is then moved on to the moment it was made, not left at a check the caller
 * could be preempted after (docs/design.md, "Where the bound is kept"). */
static void make_call(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, sl_act_fn act, void *arg)
{
	int64_t end, checked[SL_MATCH_MAX];
	int sent;

	/* Until the call is made, a GCRA counts it as made SL_ACT_GUARD_NS from now: a
	 * caller killed -9 inside it - after its SYN, before the clock below - then
	 * leaves the next release at least that far behind, not an interval after the
	 * check, which a call preempted before its SYN would have the destination see
	 * too early (make chaos: 10.7 ms, once).  The next holder of the lock can only
	 * come after; the truth replaces the guard below. */
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 1, now);) {
		if (!w.st || !sl_limit_is_gcra(&w.sec->spec))
			continue;
		checked[w.k] = w.st->rel_tat_ns;
		sl_limit_moved(&w.sec->spec, w.st, now, now + SL_ACT_GUARD_NS, cost_in(w.sec, t), wall_off(h));
	}
	sent = act(arg);
	end = sl_clock_mono_ns();
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 1, end);) {
		int64_t from;

		if (!w.st)
			continue;
		/* Sent here: counted as the rule says; left to the caller: from after it
		 * at least. */
		from = sent ? sl_limit_counted_from(&w.sec->spec, w.st, cost_in(w.sec, t), now, end) : end;
		if (sl_limit_is_gcra(&w.sec->spec))
			/* The truth in place of the guard in one store: killed on either side
			 * of it, the caller leaves the guard or the truth.  Put back first
			 * and moved on after, a kill between the two left the release
			 * counted from its check while its SYN had gone up to 8 ms later
			 * (make chaos: the next came 12 ms after it at a 20 ms interval). */
			w.st->rel_tat_ns = sl_limit_moved_tat(&w.sec->spec, w.st, checked[w.k], from, cost_in(w.sec, t));
		else
			sl_limit_moved(&w.sec->spec, w.st, now, from, cost_in(w.sec, t), wall_off(h));
	}
}

/* Under the lock: sl_admit_release_act's work.  sealed: the caller found the
 * ticket's sections' seals whole in this hold of the lock (else gate_of looks). */
static int release_locked(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int sealed,
                          int64_t *retry_ns, sl_act_fn act, void *arg)
{
	int64_t later, saving;
	int limiting;

	if (now == SL_ADMIT_NOW)
		now = sl_clock_mono_ns();
	if ((later = gate_of(h, t, now, sealed, &limiting, &saving)) < 0)
		return (int)later;
	if (later > now && later > t->give_up_ns) {
		refuse_late(h, t, limiting);
		return -ECONNREFUSED;
	}
	/* A durable quota's save is not the limit's wait: a call the limit lets go
	 * waits for it past max_wait (even 0), up to SL_QUOTA_SAVE_GRACE_NS - more
	 * means the daemon is not saving, and nothing uncounted goes (quota.h). */
	if (saving > now && t->give_up_ns < INT64_MAX - SL_QUOTA_SAVE_GRACE_NS &&
	    now > t->give_up_ns + SL_QUOTA_SAVE_GRACE_NS) {
		refuse_late(h, t, -1);
		return -ECONNREFUSED;
	}
	later = SL_MAX(later, saving);
	if (later > now) {
		t->held = 1;
		*retry_ns = later;
		note_held(h, t, later, now);
		return 1;
	}
	/* Charged first, then made: a process killed inside the call below (under
	 * overload it may sit there, preempted, for milliseconds) leaves its release
	 * counted, not an uncounted SYN that the next holder of the lock would follow
	 * at once. */
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 1, now);) {
		if (!w.st)
			continue;
		sl_limit_released(&w.sec->spec, w.st, now, cost_in(w.sec, t), wall_off(h));
		sl_pause_released(w.st, &w.sec->spec, now);
		sl_quota_released(h, &w.sec->spec, w.st, cost_in(w.sec, t));
	}
	if (act)
		make_call(h, t, now, act, arg);
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 0, now);) {
		sl_stats_record_wait(w.sec, now - t->arrival_ns, t->held, cost_in(w.sec, t));
		sl_delivery_count(w.sec, now - sl_sane_ns(t->slot_ns));
		if (w.st)
			count_key(w.sec, w.st, cost_in(w.sec, t));
	}
	t->released_ns = now;
	return 0;
}

int sl_admit_release_act(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self,
                         int64_t *retry_ns, sl_act_fn act, void *arg)
{
	int rc = sl_shm_lock(h, self, LOCK_TIMEOUT_NS);

	if (rc < 0)
		return rc; /* cannot check: the caller's fallback decides, never "go" */
	rc = release_locked(h, t, now, 0, retry_ns, act, arg);
	sl_shm_unlock(h, self);
	return rc;
}

int sl_admit_reserve_go_act(struct sl_shm_header *h, const struct sl_match *m, int64_t now,
                            int32_t self, struct sl_ticket *t, uint64_t bytes, int *release_rc,
                            int64_t *retry_ns, sl_act_fn act, void *arg)
{
	int rc = sl_shm_lock(h, self, LOCK_TIMEOUT_NS);

	*release_rc = 1;
	*retry_ns = 0;
	if (rc < 0)
		return rc;
	rc = reserve_locked(h, m, now, self, t, 1, bytes);
	if (rc == 0) {
		*retry_ns = t->release_ns;
		if (!t->mask)
			*release_rc = 0; /* nothing to wait for */
		else if (t->release_ns <= sl_clock_mono_ns())
			/* sealed: the reservation found every seal whole in this hold of
			 * the lock, a moment ago. */
			*release_rc = release_locked(h, t, SL_ADMIT_NOW, 1, retry_ns, act, arg);
	}
	sl_shm_unlock(h, self);
	return rc;
}

int64_t sl_admit_first_write(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self)
{
	int64_t at = now;

	if (!t->mask || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return now;
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 0, now);)
		if (w.st && !sl_limit_fleet(&w.sec->spec))
			at = SL_MAX(at, sl_strategy_first_at(&w.sec->spec, w.st, now));
	for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 0, now);)
		if (w.st && !sl_limit_fleet(&w.sec->spec))
			sl_strategy_first_count(&w.sec->spec, w.st, at);
	sl_shm_unlock(h, self);
	return at;
}

/* Under the lock: how many more bytes t's piece may take on at `now` in every
 * bytes section it was charged in - 0 unless each is a GCRA of this machine's own
 * (no fleet share, no durable quota to count them against) in which t is still
 * the last reservation handed out, so no caller queued after it is pushed back. */
static uint64_t grow_room(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, uint64_t most)
{
	for (struct ticket_walk w = ticket_walk(h, t); most && ticket_next(&w, 0, now);) {
		const struct sl_spec *s = &w.sec->spec;

		if (s->meter != SL_METER_BYTES)
			continue; /* charged one request a piece, however large */
		if (!w.st || sl_limit_fleet(s) || s->durable || w.st->seq != t->sec[w.k].seq)
			return 0;
		most = SL_MIN(most, sl_strategy_room(s, w.st, now, t->cost));
	}
	return most;
}

uint64_t sl_admit_grow(struct sl_shm_header *h, struct sl_ticket *t, int64_t now, int32_t self, uint64_t most)
{
	uint64_t more;

	if (!t->mask || !most || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return 0;
	if ((more = grow_room(h, t, now, most))) {
		for (struct ticket_walk w = ticket_walk(h, t); ticket_next(&w, 0, now);) {
			if (w.sec->spec.meter != SL_METER_BYTES || !w.st)
				continue;
			sl_strategy_grow(&w.sec->spec, w.st, more);
			atomic_fetch_add_explicit(A(&w.sec->state.admitted), more, memory_order_relaxed);
			count_key(w.sec, w.st, more);
		}
		t->cost += more;
	}
	sl_shm_unlock(h, self);
	return more;
}

void sl_admit_moved(struct sl_shm_header *h, const struct sl_match *m, int64_t from, int64_t to,
                    int32_t self)
{
	if (to <= from || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return;
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec;
		struct sl_state *st;
		struct sl_keyref ref = {0, 0};

		if (!(sec = live_section(h, i, m->serial[k])) ||
		    sec->spec.mode == SL_MODE_OBSERVE || !(st = limit_state(h, i, sec, &m->src, &ref, 1, to)))
			continue;
		sl_limit_moved(&sec->spec, st, from, to, 1, wall_off(h));
	}
	sl_shm_unlock(h, self);
}

void sl_admit_made(struct sl_shm_header *h, const struct sl_match *m, int64_t checked, int64_t end,
                   int32_t self)
{
	if (end <= checked || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return;
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec;
		struct sl_state *st;
		struct sl_keyref ref = {0, 0};

		if (!(sec = live_section(h, i, m->serial[k])) ||
		    sec->spec.mode == SL_MODE_OBSERVE || !(st = limit_state(h, i, sec, &m->src, &ref, 1, end)))
			continue;
		sl_limit_moved(&sec->spec, st, checked, sl_limit_counted_from(&sec->spec, st, 1, checked, end), 1,
		               wall_off(h));
	}
	sl_shm_unlock(h, self);
}

void sl_admit_refund(struct sl_shm_header *h, const struct sl_ticket *t, int32_t self)
{
	if (sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return;
	for (uint64_t bits = t->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = t->sec[k].idx;
		struct sl_section *sec;
		struct sl_state *st;
		struct sl_keyref ref;

		if (!(sec = ticket_section(h, t, k)))
			continue;
		/* Only the last slot handed out can be returned: later callers hold theirs.
		 * A keyed section's slot only from the very record it was taken in: a
		 * key evicted and made again has counted nothing of it. */
		ref = t->sec[k].key;
		st = &sec->state;
		if (sec->spec.per != SL_PER_NONE) {
			struct sl_key *k = ref.serial ? sl_keys_ref(h, i, ref.slot, ref.serial) : NULL;

			st = k ? &k->state : NULL;
		}
		give_back(&sec->spec, st, &t->sec[k]);
		atomic_fetch_add_explicit(A(&sec->more.given_up), 1, memory_order_relaxed);
	}
	sl_shm_unlock(h, self);
}

/* Keys whose last reservation is still to come, picked without the lock (a whole
 * table is never walked under it); each is looked at again under the lock. */
#define KEY_BATCH 256

struct key_pick {
	int64_t now;
	unsigned n;
	struct sl_keyref ref[KEY_BATCH];
	unsigned section[KEY_BATCH];
};

/* Whether st's last reservation may be one to give back: its slot still to come. */
static int pending(const struct sl_state *st, int64_t now)
{
	return st->last_owner > 0 && st->seq == st->last_seq && st->last_slot > now;
}

static int pick_pending(struct sl_key *k, uint32_t slot, void *arg)
{
	struct key_pick *p = arg;

	if (pending(&k->state, p->now)) {
		p->ref[p->n] = (struct sl_keyref){slot, k->serial};
		p->section[p->n] = k->section;
		p->n++;
	}
	return p->n == KEY_BATCH;
}

/* Return the slot state `st` last handed out if its taker died before it came. */
static int reap_state(struct sl_shm_header *h, const struct sl_spec *spec, struct sl_state *st, int64_t now,
                      sl_gone_fn is_dead)
{
	if (st->last_owner <= 0)
		return 0;
	if (st->seq != st->last_seq || st->last_slot <= now) {
		st->last_owner = 0; /* no longer the last, or already due: nothing to return */
		return 0;
	}
	if (!is_dead(h, st->last_owner))
		return 0;
	sl_limit_undo(spec, st, &st->last_undo);
	st->seq--;
	st->last_owner = 0;
	return 1;
}

/* Sections picked without the lock for the daemon to look at under it: the
 * daemon's, one heartbeat at a time (each holds at most SECTION_BATCH; the rest
 * wait for the next beat). */
#define SECTION_BATCH 1024

struct section_pick {
	unsigned n;
	uint32_t idx[SECTION_BATCH], serial[SECTION_BATCH];
};

static void pick_section(struct section_pick *p, uint32_t i, const struct sl_section *sec)
{
	if (p->n < SECTION_BATCH) {
		p->idx[p->n] = i;
		p->serial[p->n] = sec->serial;
		p->n++;
	}
}

int sl_admit_reap_dead(struct sl_shm_header *h, int64_t now, int32_t self,
                       sl_gone_fn is_dead)
{
	static struct key_pick pick; /* daemon only: one heartbeat at a time */
	static struct section_pick secs;
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	int returned = 0;

	pick.now = now;
	pick.n = 0;
	sl_keys_each(h, pick_pending, &pick);
	secs.n = 0;
	for (uint32_t i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (sec->in_use && pending(&sec->state, now))
			pick_section(&secs, i, sec);
	}
	if ((!pick.n && !secs.n) || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return 0;
	for (unsigned j = 0; j < pick.n; j++) {
		struct sl_key *k = sl_keys_ref(h, pick.section[j], pick.ref[j].slot, pick.ref[j].serial);
		struct sl_section *sec = k ? sl_shm_section(h, k->section) : NULL;

		if (sec && reap_state(h, &sec->spec, &k->state, now, is_dead)) {
			atomic_fetch_add_explicit(A(&sec->more.given_up), 1, memory_order_relaxed);
			returned++;
		}
	}
	for (unsigned j = 0; j < secs.n; j++) {
		struct sl_section *sec = live_section(h, secs.idx[j], secs.serial[j]);

		if (!sec || !reap_state(h, &sec->spec, &sec->state, now, is_dead))
			continue;
		atomic_fetch_add_explicit(A(&sec->more.given_up), 1, memory_order_relaxed);
		returned++;
	}
	sl_shm_unlock(h, self);
	return returned;
}

/* Keys are not looked at here: every reservation and release repairs the state it
 * uses before it reads it, and a key nobody uses holds nobody. */
unsigned sl_admit_repair(struct sl_shm_header *h, int64_t now, int32_t self, uint32_t *out,
                         unsigned nout)
{
	static struct section_pick secs; /* daemon only */
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	unsigned fixed = 0;

	secs.n = 0;
	for (uint32_t i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (sec->in_use && sl_limit_needs_repair(&sec->spec, &sec->state, now, wall_off(h)))
			pick_section(&secs, i, sec);
	}
	if (!secs.n || sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return 0;
	for (unsigned j = 0; j < secs.n; j++) {
		struct sl_section *sec = live_section(h, secs.idx[j], secs.serial[j]);

		if (sec && repair(h, sec, &sec->state, now)) {
			if (fixed < nout)
				out[fixed] = secs.idx[j];
			fixed++;
		}
	}
	sl_shm_unlock(h, self);
	return fixed;
}

struct step_arg {
	struct sl_shm_header *h;
	int64_t now, from, to;
};

static int step_key(struct sl_key *k, uint32_t slot, void *arg)
{
	struct step_arg *a = arg;
	struct sl_section *sec = sl_shm_section(a->h, k->section);

	(void)slot;
	if (sec && sec->in_use && sec->spec.scope != SL_SCOPE_FLEET)
		sl_strategy_wall_step(&sec->spec, &k->state, a->now, a->from, a->to);
	return 0;
}

int sl_admit_wall_step(struct sl_shm_header *h, int32_t self, int64_t now, int64_t to)
{
	struct step_arg a = {h, now, sl_sane_ns(h->wall_off_ns), sl_sane_ns(to)};
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	int keyed = 0;

	if (sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return -ETIMEDOUT;
	for (uint32_t i = 0; i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (!sec->in_use || sec->spec.scope == SL_SCOPE_FLEET)
			continue;
		if (sec->spec.per != SL_PER_NONE)
			keyed |= sec->spec.strategy == SL_STRAT_FIXED_WINDOW;
		else
			sl_strategy_wall_step(&sec->spec, &sec->state, now, a.from, a.to);
	}
	if (keyed)
		sl_keys_each(h, step_key, &a);
	h->wall_off_ns = a.to;
	sl_shm_unlock(h, self);
	return 0;
}

void sl_admit_count_refused(struct sl_shm_header *h, const struct sl_match *m)
{
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		struct sl_section *sec = sl_shm_section(h, m->idx[__builtin_ctzll(bits)]);

		if (sec)
			atomic_fetch_add_explicit(A(&sec->more.refused), 1, memory_order_relaxed);
	}
}

int sl_admit_uncounted(struct sl_shm_header *h, const struct sl_match *m, unsigned status, int64_t at,
                       int64_t now, int32_t self)
{
	int done = 0;

	if (sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return -ETIMEDOUT; /* not given back: the count stays, which errs on the safe side */
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec = live_section(h, i, m->serial[k]);
		struct sl_keyref ref = {0, 0};
		struct sl_state *st;

		if (!sec || sec->spec.mode != SL_MODE_ENFORCE || sl_limit_fleet(&sec->spec) ||
		    (status ? !sl_refund_status(&sec->spec.refund, status)
		            : !(sec->spec.refund.classes & SL_REFUND_FAILED)))
			continue;
		if (!(st = limit_state(h, i, sec, &m->src, &ref, 0, now)))
			continue; /* its key went idle and was evicted: nothing left to give back */
		sl_strategy_refund(&sec->spec, st, at, 1, now, wall_off(h));
		atomic_fetch_add_explicit(A(&sec->more.refunded), 1, memory_order_relaxed);
		done++;
	}
	sl_shm_unlock(h, self);
	return done;
}

int sl_admit_signal(struct sl_shm_header *h, const struct sl_match *m, const struct sl_signal *sig,
                    int64_t now, int32_t self)
{
	int done = 0;

	if (sl_shm_lock(h, self, LOCK_TIMEOUT_NS) < 0)
		return -ETIMEDOUT; /* the signal is lost; admissions go on deciding as before */
	for (uint64_t bits = m->mask; bits; bits &= bits - 1) {
		unsigned k = (unsigned)__builtin_ctzll(bits), i = m->idx[k];
		struct sl_section *sec = live_section(h, i, m->serial[k]);
		struct sl_keyref ref = {0, 0};
		struct sl_state *st;
		int did;

		if (!sec || !sec->spec.signals || sec->spec.mode == SL_MODE_OBSERVE || !sl_limit_rated(&sec->spec))
			continue;
		/* A keyed section: the key of this connection's destination only. */
		if (!(st = limit_state(h, i, sec, &m->src, &ref, 0, now)))
			continue;
		did = sl_pause_apply(st, &sec->spec, sig, now);
		if (did & SL_PAUSE_SET)
			sec->more.pause_set_ns = now;
		if ((did & SL_PAUSE_SET) && st != &sec->state) {
			/* The section's own state counts its keys' pauses and shows the last. */
			struct sl_pause *sp = &sec->state.pause;

			sp->count++;
			sp->status = st->pause.status;
			sp->kind = st->pause.kind;
		}
		done |= did;
	}
	sl_shm_unlock(h, self);
	return done;
}
