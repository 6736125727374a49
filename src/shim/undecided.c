/*
 * When the shared segment cannot decide (SPEC §4: "no timeout, full table, lost
 * race, reload or corrupt value turns into an unchecked release"): the section's
 * fallback policy decides, visibly.  `local` keeps a process-private copy of the
 * sections - their specs copied from the segment, their state this process's own -
 * and holds the call there, so the process limits itself as it would with no
 * daemon at all; the copy follows reloads by generation.  `closed` refuses, `open`
 * lets the call go (what the operator chose).  Each call so decided is counted in
 * its sections' `undecided` counter, which needs no lock.
 */
#include "shim.h"
#include "sluice/clock.h"
#include "sluice/wait.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static pthread_mutex_t local_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sl_shm local;        /* guarded by local_lock while (re)built */
static uint64_t local_generation;  /* the shared generation it was copied from */

/* Bring the private copy up to the shared segment's sections (same slots and
 * serials, so a match made against one is valid in the other).  Under local_lock.
 * 0, or -EAGAIN when the specs could not be read steadily. */
static int refresh_locked(void)
{
	struct sl_shm_header *h = sl_shim.shm.hdr;
	uint64_t gen = atomic_load_explicit((_Atomic uint64_t *)&h->generation, memory_order_acquire);

	if (local.hdr && gen == local_generation)
		return 0;
	if (!local.hdr && sl_shm_create_anonymous(&local) != 0)
		return -ENOMEM;
	for (int tries = 0; tries < 4; tries++) {
		uint32_t seq = atomic_load_explicit((_Atomic uint32_t *)&h->spec_seq, memory_order_acquire);

		if (seq & 1)
			continue;
		for (unsigned i = 0; i < SL_MAX_SECTIONS; i++) {
			struct sl_section *from = sl_shm_section(h, i), *to = sl_shm_section(local.hdr, i);

			memset(to, 0, sizeof(*to));
			to->in_use = from->in_use;
			to->serial = from->serial;
			to->spec = from->spec;
		}
		local.hdr->slots_used = SL_MIN(h->slots_used, (uint32_t)SL_MAX_SECTIONS);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit((_Atomic uint32_t *)&h->spec_seq, memory_order_relaxed) == seq) {
			local_generation = gen;
			return 0;
		}
	}
	return -EAGAIN;
}

static void count_undecided(const struct sl_match *m)
{
	for (unsigned i = 0; i < SL_MAX_SECTIONS; i++)
		if (m->mask & (1ULL << i))
			atomic_fetch_add_explicit(
				(_Atomic uint64_t *)&sl_shm_section(sl_shim.shm.hdr, i)->state.undecided, 1,
				memory_order_relaxed);
}

/* fallback = local: reserve and wait in the private copy. */
static int hold_locally(const struct sl_match *m, int default_refuse, const char *what,
                        const char *dest)
{
	struct sl_ticket t;
	int rc;

	pthread_mutex_lock(&local_lock);
	rc = refresh_locked();
	if (rc == 0)
		rc = sl_wait_reserve(local.hdr, m, sl_clock_mono_ns(), sl_shim.pid, &t);
	pthread_mutex_unlock(&local_lock);
	if (rc == -ECONNREFUSED) {
		sl_debug("%s %s: refused by the local fallback (max_wait)", what, dest);
		return -(t.refuse_errno ? t.refuse_errno : default_refuse);
	}
	if (rc < 0) {
		sl_debug("%s %s: the local fallback cannot read the sections either: refused", what, dest);
		return -default_refuse;
	}
	if (t.mask && sl_wait_release(local.hdr, &t, sl_shim.pid, NULL) != 0) {
		sl_debug("%s %s: the local fallback could not release it: refused", what, dest);
		return -default_refuse;
	}
	sl_debug("%s %s: go by the local fallback, waited=%.3fms", what, dest,
	         (double)(sl_clock_mono_ns() - t.arrival_ns) / 1e6);
	return 0;
}

int sl_undecided(const struct sl_dest *d, const struct sl_match *m, const char *what,
                 int default_refuse, const char *why)
{
	char dest[SL_HOST_MAX + 80] = "";

	if (sl_shim.debug)
		sl_dest_format(d, dest, sizeof(dest));
	count_undecided(m);
	switch (sl_shim.fallback) {
	case SL_FALLBACK_OPEN:
		sl_debug("%s %s: undecided (%s); fallback = open: goes unshaped", what, dest, why);
		return 0;
	case SL_FALLBACK_CLOSED:
		sl_debug("%s %s: undecided (%s); fallback = closed: refused", what, dest, why);
		return -default_refuse;
	default:
		sl_debug("%s %s: undecided (%s); fallback = local: held in this process alone", what, dest, why);
		return hold_locally(m, default_refuse, what, dest);
	}
}

/* A fork child starts with the parent's copy: its lock word may name a thread the
 * child does not have, and its state is the parent's to keep. */
void sl_undecided_after_fork(void)
{
	pthread_mutex_init(&local_lock, NULL);
	if (local.hdr)
		local.hdr->lock = 0;
}
