#include "sluice/daemon.h"
#include "sluice/conc.h"
#include "control.h"
#include "fleet.h"
#include "metrics.h"
#include "quotas.h"
#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/common.h"
#include "sluice/delivery.h"
#include "sluice/golden.h"
#include "sluice/shm.h"
#include "sluice/segments.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/log.h"
#include "sluice/pause.h"

#include <errno.h>
#include <stdatomic.h>
#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>


#define HEARTBEAT_S 0.5 /* reclaim what dead processes held within a second */

/* shm_group: the segment and the control socket belong to that group, so its
 * members may attach and ask (README, "Running it on a machine").  Not for the
 * private segment of `sluice run`'s own daemon. */
static int apply_group(struct sl_daemon *d)
{
	const char *name = d->cfg->global.shm_group;
	struct group *g;
	struct shmid_ds ds;

	if (!name[0] || d->opts.unlink_shm_on_exit)
		return 0;
	if (!(g = getgrnam(name))) {
		sl_log_warnx("shm_group %s: no such group (groupadd %s)", name, name);
		return -EINVAL;
	}
	if (shmctl(d->shm.id, IPC_STAT, &ds) != 0 ||
	    (ds.shm_perm.gid = g->gr_gid, shmctl(d->shm.id, IPC_SET, &ds) != 0)) {
		int e = errno;

		sl_log_warn("segment %s: cannot give it group %s", d->shm_name, name);
		return -e;
	}
	if (d->ctl_path[0] && chown(d->ctl_path, (uid_t)-1, g->gr_gid) != 0) {
		int e = errno;

		sl_log_warn("control socket %s: cannot give it group %s", d->ctl_path, name);
		return -e;
	}
	return 0;
}

#define REFUSALS_EVERY_NS (10 * SL_NS_PER_S)

/* What the shims did that an operator should read, from the segment's counters
 * (only the daemon has the log): a line for each pause the destination asked,
 * and every 10 s, per section, how many calls were refused - one line however
 * many, so a refusing section cannot fill the log. */
static void log_news(struct sl_daemon *d, int64_t now)
{
	struct sl_shm_header *h = d->shm.hdr;
	uint32_t used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections);
	int tally = now - d->refused_since >= REFUSALS_EVERY_NS;

	if (used > d->nseen) {
		struct sl_section_seen *more = realloc(d->seen, (size_t)used * sizeof(*more));

		if (!more)
			return;
		for (uint32_t i = d->nseen; i < used; i++) { /* counted from now on */
			more[i].pauses = sl_shm_section(h, i)->state.pause.count;
			more[i].refused = sl_shm_section(h, i)->more.refused;
		}
		d->seen = more;
		d->nseen = used;
	}
	if (!d->refused_since || tally)
		d->refused_since = now;
	for (uint32_t i = 0; i < used; i++) {
		const struct sl_section *sec = sl_shm_section(h, i);
		const struct sl_pause *p = &sec->state.pause;
		uint64_t n = p->count, was = d->seen[i].pauses, refused = sec->more.refused;

		if (tally) {
			if (sec->in_use && refused > d->seen[i].refused)
				sl_log_notice("[%.*s]: %llu refused in the last 10 s (max_wait, a full key table, or "
				              "fallback = closed)", SL_SECTION_NAME_MAX - 1, sec->spec.name,
				              (unsigned long long)(refused - d->seen[i].refused));
			d->seen[i].refused = refused;
		}
		d->seen[i].pauses = n;
		if (!sec->in_use || !sec->spec.signals || n <= was)
			continue;
		if (p->kind == SL_SIGNAL_FLEET)
			sl_log_info("[%.*s]: paused as another machine of the fleet was answered (%llu pauses so far)",
			            SL_SECTION_NAME_MAX - 1, sec->spec.name, (unsigned long long)n);
		else if (sec->spec.per != SL_PER_NONE)
			sl_log_info("[%.*s]: the destination answered %u (%s): a key paused (%llu pauses so far)",
			            SL_SECTION_NAME_MAX - 1, sec->spec.name, p->status, sl_signal_name(p->kind),
			            (unsigned long long)n);
		else
			sl_log_info("[%.*s]: the destination answered %u (%s): paused until %.1f s from now "
			            "(%llu pauses so far)", SL_SECTION_NAME_MAX - 1, sec->spec.name, p->status,
			            sl_signal_name(p->kind),
			            (double)SL_MAX(sl_sane_ns(p->until_ns) - now, (int64_t)0) / 1e9, (unsigned long long)n);
	}
}

static void retake_golden(struct sl_daemon *d);
static int apply_group(struct sl_daemon *d);

/* A new segment under the name in place of the one in use, with cfg loaded and
 * the state carried over (sl_shm_move); remove_old: take the name from the old
 * one first (a reload that needs more room).  0, or -errno with nothing changed. */
static int move_segment(struct sl_daemon *d, const struct sl_config *cfg, int remove_old)
{
	struct sl_shm next, old = d->shm;
	struct sl_shm_dims dims;
	int rc;

	sl_config_dims(cfg, &dims);
	if ((rc = sl_shm_move(&next, &old, d->shm_name, cfg->global.shm_mode, &dims, cfg, (int32_t)getpid(),
	                      remove_old)) < 0)
		return rc;
	d->shm = next;
	sl_shm_publish(d->shm.hdr);
	d->shm.hdr->daemon_pid = (int32_t)getpid();
	d->shm.hdr->heartbeat_ns = sl_clock_mono_ns();
	sl_shm_detach(&old);
	if (apply_group(d) < 0)
		sl_log_warnx("segment %s: its group could not be set", d->shm_name);
	retake_golden(d);
	return 0;
}

/* The copy of what this load wrote, that each heartbeat checks the segment
 * against (golden.h). */
static void retake_golden(struct sl_daemon *d)
{
	sl_golden_free(d->golden);
	if (!(d->golden = sl_golden_take(d->shm.hdr)))
		sl_log_warnx("segment %s: out of memory for the copy of its configuration: scribbles on it "
		             "go unrepaired", d->shm_name);
}

/* Bytes of the configuration part compared per heartbeat: a config of 10,000
 * sections and 100,000 patterns (about 40 MB) in a few beats, at a few ms each. */
#define GOLDEN_BUDGET (16u << 20)

static void beat(struct sl_daemon *d)
{
	struct sl_shm_header *h = d->shm.hdr;

	h->daemon_pid = (int32_t)getpid();
	h->heartbeat_ns = sl_clock_mono_ns();
	{
		/* A step of the wall clock: fixed windows renumbered with it, under
		 * the lock (sl_admit_wall_step); slewing is noise and moves nothing. */
		int64_t was = h->wall_off_ns, off = sl_clock_wall_offset_follow(was);

		if (!was)
			h->wall_off_ns = off;
		else if (off != was && sl_admit_wall_step(h, (int32_t)getpid(), h->heartbeat_ns, off) == 0)
			sl_log_info("the wall clock stepped %+.3f s: fixed windows follow it", (double)(off - was) / 1e9);
	}
	if (sl_shm_reap_lock(h))
		sl_log_warnx("took the segment lock back from a process that died holding it");
	{
		uint32_t which[8];
		unsigned fixed = sl_admit_repair(h, h->heartbeat_ns, (int32_t)getpid(), which, 8);

		for (unsigned j = 0; j < SL_MIN(fixed, 8u); j++) {
			struct sl_section *sec = sl_shm_section(h, which[j]);

			if (sec)
				sl_log_warnx("section [%.*s]: its state lay further ahead than any admission can put "
				             "it (a scribbled segment?): reset", SL_SECTION_NAME_MAX - 1, sec->spec.name);
		}
		if (fixed > 8)
			sl_log_warnx("%u more sections' states were reset as well", fixed - 8);
	}
	/* The segment in use is never moved (move_segment leaves the old one): a
	 * mark here is a scribble, and every admission would be refused the lock
	 * and look for a successor that is not there. */
	if (atomic_load_explicit((_Atomic uint32_t *)&h->moved, memory_order_acquire)) {
		atomic_store_explicit((_Atomic uint32_t *)&h->moved, 0, memory_order_release);
		sl_log_warnx("segment %s: marked moved, which it was not (scribbled?): cleared", d->shm_name);
	}
	if (d->golden) {
		const char *what = "";
		int fixed = sl_golden_check(h, d->golden, (int32_t)getpid(), GOLDEN_BUDGET, &what);

		if (fixed > 0)
			sl_log_warnx("segment %s: %s was not what sluiced wrote (scribbled?): written back%s",
			             d->shm_name, what, fixed > 1 ? ", with more" : "");
	}
	if (!d->shm.anonymous && !sl_shm_is_named(&d->shm, d->shm_name)) {
		/* Removed (ipcrm: its owner or root).  Those attached keep it, programs
		 * started from now on would find none: a new one is made under the name,
		 * the state carried over, and the programs attached to the old one move
		 * to it at their next admission - one queue again within a heartbeat. */
		int rc = move_segment(d, d->cfg, 0);

		if (rc == 0)
			sl_log_warnx("segment %s was removed (ipcrm?): made anew, its state carried over; the "
			             "programs attached to the old one move to it at their next admission", d->shm_name);
		else if (!d->shm_gone)
			sl_log_warnx("segment %s was removed (ipcrm?) and cannot be made anew (%s): programs "
			             "attached before keep sharing it, new ones apply their fallback; trying again "
			             "at each heartbeat", d->shm_name, strerror(-rc));
		d->shm_gone = rc != 0;
		h = d->shm.hdr; /* the new one, when made: the old is detached */
	}
	{
		int slots = sl_admit_reap_dead(h, h->heartbeat_ns, (int32_t)getpid(), sl_pid_is_dead);
		int places = sl_conc_reap_dead(h, (int32_t)getpid(), sl_pid_is_dead);

		if (slots > 0)
			sl_log_info("returned %d queue slot%s of processes that died waiting", slots, slots > 1 ? "s" : "");
		if (places > 0)
			sl_log_info("reclaimed %d concurrency place%s held by processes that died", places,
			            places > 1 ? "s" : "");
	}
	log_news(d, h->heartbeat_ns);
	for (uint32_t i = 0, used = SL_MIN(h->slots_used, sl_shm_dims_of(h).sections); i < used; i++) {
		struct sl_section *sec = sl_shm_section(h, i);

		if (sec && sec->in_use)
			sl_delivery_measure(sec, h->heartbeat_ns,
			                    sec->spec.per ? 0 : sl_limit_queued(&sec->spec, &sec->state, h->heartbeat_ns,
			                                                        sl_sane_ns(h->wall_off_ns)));
	}
}

/* Another daemon that is alive and beating owns the segment (two daemons with one
 * shm_name would overwrite each other's sections).  A daemon killed -9 leaves its pid
 * behind: dead, or recycled by then but no longer beating. */
static int owned_by_live_daemon(const struct sl_shm_header *h)
{
	int32_t pid = h->daemon_pid;

	return pid > 0 && pid != (int32_t)getpid() && !sl_pid_is_dead(pid) &&
	       sl_clock_mono_ns() - h->heartbeat_ns < 3 * SL_NS_PER_S;
}

static void on_heartbeat(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	beat(w->data);
}

static void on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop;
	(void)revents;
	sl_daemon_reload(w->data, NULL);
}

/* Only breaks the loop: watchers already pending in this iteration (a control
 * request arriving with the signal) still run, and must find the segment there.
 * The caller of ev_run stops the daemon once the loop has returned. */
static void on_term(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	sl_log_info("signal %d: stopping", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

static int load(struct sl_daemon *d, struct sl_config *cfg, FILE *errors)
{
	int rc = sl_config_load(cfg, d->config_path);

	if (rc == 0 && cfg->nsections == 0)
		sl_log_notice("%s has no limit sections: nothing is shaped until one is added (then reload)",
		              d->config_path);
	if (rc != 0) {
		for (unsigned i = 0; i < SL_MIN(cfg->nerrors, (unsigned)SL_CONFIG_MAX_ERRORS); i++)
			sl_log_warnx("%s", cfg->errors[i]);
		if (errors)
			sl_config_print_errors(cfg, errors);
	}
	return rc;
}

int sl_daemon_start(struct sl_daemon *d, struct ev_loop *loop, const struct sl_daemon_opts *o)
{
	struct sl_shm_dims want, have;
	char why[200];
	int reattached = 0, rc;

	memset(d, 0, sizeof(*d));
	d->loop = loop;
	d->opts = *o;
	d->ctl_fd = -1;
	if (sl_realpath(o->config_path, d->config_path, sizeof(d->config_path)) != 0)
		snprintf(d->config_path, sizeof(d->config_path), "%s", o->config_path);
	d->cfg = calloc(1, sizeof(*d->cfg));
	if (!d->cfg)
		return -ENOMEM;
	if ((rc = load(d, d->cfg, NULL)) != 0)
		goto fail;
	/* `sluice run`'s private daemon keeps quotas only where its config says. */
	sl_quotas_dir(d->cfg, o->unlink_shm_on_exit ? NULL : o->state_dir, d->quota_dir, sizeof(d->quota_dir));
	sl_quotas_mark(d->cfg, d->quota_dir);
	snprintf(d->shm_name, sizeof(d->shm_name), "%s", o->shm_name ? o->shm_name : d->cfg->global.shm_name);

	if (o->control && (rc = sl_control_open(d)) < 0)
		goto fail;
	sl_config_dims(d->cfg, &want);
	rc = sl_shm_open_or_create_dims(&d->shm, d->shm_name, d->cfg->global.shm_mode, &want, &reattached);
	if (rc < 0) {
		char about[256], fix[256];

		sl_segment_about(d->shm_name, about, sizeof(about));
		sl_segment_fix(d->shm_name, rc, fix, sizeof(fix));
		sl_log_warnx("cannot create %s: %s%s%s", about, strerror(-rc), fix[0] ? "; " : "", fix);
		goto fail;
	}
	have = sl_shm_dims_of(d->shm.hdr);
	if (reattached && owned_by_live_daemon(d->shm.hdr)) {
		sl_log_warnx("segment %s belongs to a running sluiced (pid %d): not taking it over",
		             d->shm_name, d->shm.hdr->daemon_pid);
		rc = -EADDRINUSE;
		goto fail;
	}
	if (sl_shm_fits(d->shm.hdr, d->cfg, why, sizeof(why)) < 0) {
		/* Programs attached to it keep it (else it would have been made anew):
		 * a larger one takes over from it, and they move to it at their next
		 * admission. */
		if ((rc = move_segment(d, d->cfg, 1)) < 0) {
			sl_log_warnx("segment %s: %s, and no larger one could be made: %s", d->shm_name, why,
			             strerror(-rc));
			goto fail;
		}
		sl_log_info("segment %s (%u sections, %u patterns, %u holders, %u keys) made anew larger for "
		            "the config; the programs attached to the old one move to it", d->shm_name,
		            have.sections, have.patterns, have.holders, have.keys);
	} else {
		if (have.sections != want.sections || have.patterns != want.patterns ||
		    have.holders != want.holders || have.keys != want.keys || have.key_more != want.key_more)
			sl_log_info("segment %s keeps its tables (%u sections, %u patterns, %u holders, %u keys; "
			            "the config asks for %u, %u, %u, %u): programs still attached share it",
			            d->shm_name, have.sections, have.patterns, have.holders, have.keys,
			            want.sections, want.patterns, want.holders, want.keys);
		if ((rc = sl_shm_apply_config(d->shm.hdr, d->cfg, (int32_t)getpid())) < 0) {
			sl_log_warnx("segment %s: %s", d->shm_name, rc == -ENOMEM ? "out of memory" : "lock unavailable");
			goto fail;
		}
		retake_golden(d);
	}
	if ((rc = apply_group(d)) < 0 || (rc = sl_metrics_start(d)) < 0)
		goto fail;
	/* A new segment gets the saved quotas before any program can see it. */
	if ((rc = sl_quotas_start(d, !reattached)) < 0)
		goto fail;
	sl_shm_publish(d->shm.hdr);
	beat(d);
	if ((rc = sl_fleet_start(d)) < 0) {
		sl_log_warnx("cannot share the fleet's limits: %s", strerror(-rc));
		goto fail;
	}
	sl_log_info("%s segment %s, %u sections, %u patterns from %s (generation %llu)",
	            reattached ? "re-attached" : "created", d->shm_name, d->cfg->nsections,
	            d->cfg->npatterns, d->config_path, (unsigned long long)d->shm.hdr->generation);

	ev_timer_init(&d->heartbeat, on_heartbeat, 0., HEARTBEAT_S);
	d->heartbeat.data = d;
	ev_timer_again(loop, &d->heartbeat);
	if (o->handle_signals) {
		ev_signal_init(&d->sig_hup, on_hup, SIGHUP);
		ev_signal_init(&d->sig_term, on_term, SIGTERM);
		ev_signal_init(&d->sig_int, on_term, SIGINT);
		d->sig_hup.data = d->sig_term.data = d->sig_int.data = d;
		ev_signal_start(loop, &d->sig_hup);
		ev_signal_start(loop, &d->sig_term);
		ev_signal_start(loop, &d->sig_int);
	}
	return 0;
fail:
	sl_quotas_stop(d);
	sl_control_close(d);
	sl_shm_detach(&d->shm);
	sl_config_free(d->cfg);
	free(d->cfg);
	d->cfg = NULL;
	return rc;
}

/* Whether `next` fits the running segment; says why not in the log and on
 * `errors`.  Its tables cannot grow in place, and the programs attached to it must
 * go on sharing one queue per destination: the message says what to do instead. */
/* Whether the running segment has room for `next`: 1, or 0 when a larger one is
 * needed (more keys, holders, sections or patterns than its tables hold). */
static int room_for(struct sl_daemon *d, const struct sl_config *next)
{
	struct sl_shm_dims have = sl_shm_dims_of(d->shm.hdr), want;

	sl_config_dims(next, &want);
	return next->global.keys <= have.keys && next->global.holders <= have.holders &&
	       next->nsections <= have.sections && next->npatterns <= have.patterns &&
	       want.key_more <= have.key_more;
}

int sl_daemon_reload(struct sl_daemon *d, FILE *errors)
{
	struct sl_config *next = calloc(1, sizeof(*next));
	int rc;

	if (!next)
		return -ENOMEM;
	if ((rc = load(d, next, errors)) != 0) {
		sl_log_warnx("reload refused: keeping the configuration of generation %llu",
		             (unsigned long long)d->shm.hdr->generation);
		rc = -EINVAL;
		goto out;
	}
	if (strcmp(next->global.shm_name, d->cfg->global.shm_name) != 0)
		sl_log_warnx("shm_name changed to %s: takes effect at restart", next->global.shm_name);
	if (strcmp(next->global.state_dir, d->cfg->global.state_dir) != 0)
		sl_log_warnx("state_dir changed: takes effect at restart (quotas stay in %s)",
		             d->quota_dir[0] ? d->quota_dir : "none");
	sl_quotas_mark(next, d->quota_dir);
	if (!room_for(d, next)) {
		/* More room than the segment has: a larger one takes over from it, the
		 * shaped programs moving to it at their next admission (sl_shm_move). */
		struct sl_shm_dims had = sl_shm_dims_of(d->shm.hdr);

		if ((rc = move_segment(d, next, 1)) < 0) {
			sl_log_warnx("reload refused: the config needs a larger segment and none could be made "
			             "(%s); keeping generation %llu", strerror(-rc),
			             (unsigned long long)d->shm.hdr->generation);
			if (errors)
				fprintf(errors, "%s: needs a larger segment and none could be made: %s\n", d->config_path,
				        strerror(-rc));
			goto out;
		}
		sl_log_info("segment %s made anew for the larger config (%u sections, %u patterns, %u "
		            "holders, %u keys; it had %u, %u, %u, %u): the shaped programs move to it at their "
		            "next admission", d->shm_name, sl_shm_dims_of(d->shm.hdr).sections,
		            sl_shm_dims_of(d->shm.hdr).patterns, sl_shm_dims_of(d->shm.hdr).holders,
		            sl_shm_dims_of(d->shm.hdr).keys, had.sections, had.patterns, had.holders, had.keys);
	} else {
		if (next->global.keys < sl_shm_nkeys(d->shm.hdr))
			sl_log_info("keys = %u: the key table keeps its %u records until sluiced restarts",
			            next->global.keys, sl_shm_nkeys(d->shm.hdr));
		if ((rc = sl_shm_apply_config(d->shm.hdr, next, (int32_t)getpid())) < 0) {
			sl_log_warnx("reload failed: %s", rc == -ENOMEM ? "out of memory" : "segment lock unavailable");
			goto out;
		}
		retake_golden(d);
	}
	{
		struct sl_config *old = d->cfg;

		d->cfg = next;
		if ((rc = sl_fleet_reload(d, old)) < 0)
			sl_log_warnx("reloaded, but the fleet's limits cannot be shared: %s", strerror(-rc));
		sl_config_free(old);
		free(old);
	}
	sl_log_set_level(next->global.log_level);
	sl_log_info("reloaded %s: %u sections, %u patterns (generation %llu; the segment lock held "
	            "%.1f ms)", d->config_path, next->nsections, next->npatterns,
	            (unsigned long long)d->shm.hdr->generation, (double)sl_shm_apply_held_ns() / 1e6);
	return 0;
out:
	sl_config_free(next);
	free(next);
	return rc;
}

void sl_daemon_stop(struct sl_daemon *d)
{
	if (!d->cfg)
		return;
	ev_timer_stop(d->loop, &d->heartbeat);
	sl_quotas_stop(d);
	sl_golden_free(d->golden);
	d->golden = NULL;
	free(d->seen);
	d->seen = NULL;
	d->nseen = 0;
	sl_metrics_stop(d);
	sl_fleet_stop(d);
	if (d->opts.handle_signals) {
		ev_signal_stop(d->loop, &d->sig_hup);
		ev_signal_stop(d->loop, &d->sig_term);
		ev_signal_stop(d->loop, &d->sig_int);
	}
	sl_control_close(d);
	if (d->shm.hdr && d->shm.hdr->daemon_pid == (int32_t)getpid())
		d->shm.hdr->daemon_pid = 0;
	sl_shm_detach(&d->shm);
	if (d->opts.unlink_shm_on_exit)
		sl_shm_remove(d->shm_name);
	sl_config_free(d->cfg);
	free(d->cfg);
	d->cfg = NULL;
}
