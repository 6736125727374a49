#include "sluice/daemon.h"
#include "sluice/conc.h"
#include "control.h"
#include "fleet.h"
#include "keeper.h"
#include "metrics.h"
#include "quotas.h"
#include "sdnotify.h"
#include "segserve.h"
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
#include "sluice/roster.h"
#include "sluice/segsock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#define HEARTBEAT_S 0.5 /* reclaim what dead processes held within a second */

/* Who may attach the segment: the config's shm_mode, and shm_group's members
 * (auto: the daemon's own group).  -EINVAL when the group does not exist. */
static int policy_of(const struct sl_config *cfg, struct sl_segpolicy *p)
{
	const char *name = cfg->global.shm_group;
	struct group *g;

	p->mode = cfg->global.shm_mode & 0777;
	p->gid = getegid();
	if (!name[0])
		return 0;
	if (!(g = getgrnam(name))) {
		sl_log_warnx("shm_group %s: no such group (groupadd %s)", name, name);
		return -EINVAL;
	}
	p->gid = g->gr_gid;
	return 0;
}

/* shm_group: the segment socket and the control socket belong to that group, so
 * its members may attach and ask (docs/operations.md, "Running it on a machine"); the keeper
 * is told, as it checks each attaching process.  Not for `sluice run`'s private
 * segment. */
static int apply_group(struct sl_daemon *d)
{
	struct sl_segpolicy p;
	int rc;

	if (d->opts.private_socket)
		return 0;
	if ((rc = policy_of(d->cfg, &p)) < 0)
		return rc;
	if (d->ctl_path[0] && p.gid != getegid() && chown(d->ctl_path, (uid_t)-1, p.gid) != 0) {
		int e = errno;

		sl_log_warn("control socket %s: cannot give it group %s", d->ctl_path, d->cfg->global.shm_group);
		return -e;
	}
	if (sl_keeper_policy(d->seg_path, &p) < 0)
		sl_log_warnx("segment socket %s: its keeper did not take the new shm_mode and shm_group", d->seg_path);
	else if ((chmod(d->seg_path, 0600 | (p.mode & 060 ? 060 : 0) | (p.mode & 006 ? 006 : 0)) != 0 ||
	          (p.gid != getegid() && chown(d->seg_path, (uid_t)-1, p.gid) != 0)))
		sl_log_warn("segment socket %s: cannot give it mode and group", d->seg_path);
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

/* Serve the segment in use from now on: hand its memfd to the keeper (or the
 * private server) in place of the one it served.  0 or -errno. */
static int serve_this(struct sl_daemon *d)
{
	if (d->serve)
		return sl_segserve_replace(d->serve, fcntl(d->shm.fd, F_DUPFD_CLOEXEC, 3));
	return sl_keeper_replace(d->seg_path, d->shm.fd);
}

/* A segment of cfg's sizes in place of the one in use, with cfg loaded and the
 * state carried over (sl_shm_move), served from now on: the programs attached to
 * the old one ask for it at their next admission.  0, or -errno with nothing changed. */
static int move_segment(struct sl_daemon *d, const struct sl_config *cfg)
{
	struct sl_shm next, old = d->shm;
	struct sl_shm_dims dims;
	int rc;

	sl_config_dims(cfg, &dims);
	if ((rc = sl_shm_move(&next, &old, d->shm_name, &dims, cfg, d->shm.self)) < 0)
		return rc;
	d->shm = next;
	d->shm.hdr->daemon_owner = d->shm.self;
	d->shm.hdr->daemon_pid = (int32_t)getpid();
	d->shm.hdr->heartbeat_ns = sl_clock_mono_ns();
	/* Before the start has served it, serve() does (the keeper is told then). */
	if (d->serving && !d->opts.private_socket)
		sl_sd_store_fd("segment", d->shm.fd);
	if (d->serving && (rc = serve_this(d)) < 0)
		/* Its keeper did not take it: the heartbeat starts a new one with it. */
		sl_log_warnx("segment %s: its keeper did not take the new segment (%s): starting another",
		             d->shm_name, strerror(-rc));
	sl_shm_detach(&old);
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

/* Whether the process a holder entry or a last reservation names is gone. */
static int owner_gone(struct sl_shm_header *h, int32_t owner)
{
	return sl_roster_gone(h, owner, 0);
}

/* Every few beats: the segment's keeper still answers, else a new one is started
 * with the segment in use (its registrations are adopted: segserve.h).  A keeper
 * killed meanwhile cost nothing but the attaching of new programs. */
#define KEEPER_CHECK_NS (2 * SL_NS_PER_S)
static void check_keeper(struct sl_daemon *d, int64_t now)
{
	struct sl_segsock_reply r;
	struct sl_segpolicy p;
	char id[32], ours[32];
	int rc;

	if (d->serve || now - d->keeper_checked_ns < KEEPER_CHECK_NS)
		return;
	d->keeper_checked_ns = now;
	rc = sl_segsock_ask(d->seg_path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r);
	if (r.fd >= 0)
		close(r.fd);
	snprintf(ours, sizeof(ours), "%016llx", (unsigned long long)d->shm.hdr->segment_id);
	if (rc == 0 && sl_segsock_value(r.line, "id", id, sizeof(id)) == 0 && strcmp(id, ours) != 0)
		rc = sl_keeper_replace(d->seg_path, d->shm.fd) == 0 ? 0 : -ESTALE;
	if (rc == 0 || rc == -ETIMEDOUT) {
		d->keeper_lost = 0;
		return;
	}
	if (policy_of(d->cfg, &p) == 0 && (rc = (int)sl_keeper_spawn(d->seg_path, d->shm.fd, &p, d->opts.foreground)) > 0) {
		sl_log_warnx("segment %s: its keeper at %s was gone: started another (pid %d); programs attached "
		             "meanwhile kept their queues", d->shm_name, d->seg_path, rc);
		d->keeper_lost = 0;
	} else if (!d->keeper_lost++) {
		sl_log_warnx("segment %s: its keeper at %s is gone and no other could be started (%s): programs "
		             "attached keep sharing it, new ones wait for it; trying again", d->shm_name, d->seg_path,
		             strerror(rc < 0 ? -rc : EINVAL));
	}
}

static void beat(struct sl_daemon *d)
{
	struct sl_shm_header *h = d->shm.hdr;

	h->daemon_owner = d->shm.self;
	h->daemon_pid = (int32_t)getpid();
	h->heartbeat_ns = sl_clock_mono_ns();
	{
		/* A step of the wall clock: fixed windows renumbered with it, under
		 * the lock (sl_admit_wall_step); slewing is noise and moves nothing. */
		int64_t was = h->wall_off_ns, off = sl_clock_wall_offset_follow(was);

		if (!was)
			h->wall_off_ns = off;
		else if (off != was && sl_admit_wall_step(h, d->shm.self, h->heartbeat_ns, off) == 0)
			sl_log_info("the wall clock stepped %+.3f s: fixed windows follow it", (double)(off - was) / 1e9);
	}
	if (sl_shm_reap_lock(h))
		sl_log_warnx("took the segment lock back from a process that died holding it");
	{
		uint32_t which[8];
		unsigned fixed = sl_admit_repair(h, h->heartbeat_ns, d->shm.self, which, 8);

		for (unsigned j = 0; j < SL_MIN(fixed, 8u); j++) {
			struct sl_section *sec = sl_shm_section(h, which[j]);

			if (sec)
				sl_log_warnx("section [%.*s]: its state lay further ahead than any admission can put "
				             "it (a scribbled segment?): reset", SL_SECTION_NAME_MAX - 1, sec->spec.name);
		}
		if (fixed > 8)
			sl_log_warnx("%u more sections' states were reset as well", fixed - 8);
	}
	if (sl_shm_repair_header(h, d->shm.size))
		sl_log_warnx("segment %s: its header no longer said what it is (scribbled?): written back, so "
		             "programs attach it", d->shm_name);
	/* A hold is set in a segment made in place of a lost one, and raised by the
	 * programs that come over from it, within SL_HOLD_MAX_NS of its making:
	 * any other is a scribble that would keep every release waiting. */
	if (sl_shm_hold(h, h->heartbeat_ns) > h->heartbeat_ns && h->heartbeat_ns > d->hold_allowed_until_ns) {
		__atomic_store_n(&h->hold_until_ns, 0, __ATOMIC_RELAXED);
		sl_log_warnx("segment %s: held its releases, which nothing asked (scribbled?): cleared", d->shm_name);
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
		int fixed = sl_golden_check(h, d->golden, d->shm.self, GOLDEN_BUDGET, &what);

		if (fixed > 0)
			sl_log_warnx("segment %s: %s was not what sluiced wrote (scribbled?): written back%s",
			             d->shm_name, what, fixed > 1 ? ", with more" : "");
	}
	check_keeper(d, h->heartbeat_ns);
	{
		int slots = sl_admit_reap_dead(h, h->heartbeat_ns, d->shm.self, owner_gone);
		int places = sl_conc_reap_dead(h, d->shm.self, owner_gone);

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
 * segment would overwrite each other's sections).  A daemon killed -9 leaves its
 * token behind: its registration ended by the keeper, and no longer beating. */
static int owned_by_live_daemon(struct sl_shm_header *h, int32_t self)
{
	int32_t owner = h->daemon_owner;

	return owner > 0 && owner != self && !sl_roster_gone(h, owner, 0) &&
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

/* The daemon enters itself in the roster of the segment it keeps, as its keeper
 * would: its token names it in lock words (the keeper watches it from its start,
 * or from the adopt asked in serve()).  0 or -ENOSPC. */
static int enter_self(struct sl_daemon *d)
{
	struct sl_proc_id me = sl_roster_me();
	int32_t t = sl_roster_enter(d->shm.hdr, &me, me.pid, me.stamp, NULL);

	if (t < 0) {
		sl_log_warnx("segment %s: its roster is full (processes = %u): not even the daemon can enter",
		             d->shm_name, sl_shm_dims_of(d->shm.hdr).procs);
		return -ENOSPC;
	}
	d->shm.self = t;
	return 0;
}

static int same_dims(const struct sl_shm_dims *a, const struct sl_shm_dims *b)
{
	return a->sections == b->sections && a->patterns == b->patterns && a->holders == b->holders &&
	       a->keys == b->keys && a->key_more == b->key_more && a->procs == b->procs;
}

struct others {
	struct sl_shm_header *h;
	int32_t self;
	int found;
};

static int live_other(int32_t token, struct sl_proc *e, void *arg)
{
	struct others *o = arg;

	(void)e;
	if (token != o->self && !sl_roster_gone(o->h, token, 0))
		o->found = 1;
	return o->found;
}

/* Whether a process other than this daemon is registered on the segment and not
 * gone (its keeper takes a program's entry out as it exits, segserve.h; one that
 * exited while no keeper watched is looked up). */
static int others_attached(struct sl_daemon *d)
{
	struct others o = {d->shm.hdr, d->shm.self, 0};

	sl_roster_each(d->shm.hdr, live_other, &o);
	return o.found;
}

/* Start serving the published segment: a keeper for the machine's (one already
 * serves it when re-attached: it is told to watch the daemon), the private server
 * for `sluice run`'s.  0 or -errno. */
static int serve(struct sl_daemon *d, int reattached)
{
	struct sl_segpolicy p;
	int lfd, fd, rc;

	if ((rc = policy_of(d->cfg, &p)) < 0)
		return rc;
	if (d->opts.private_socket) {
		p = (struct sl_segpolicy){.mode = 0600, .gid = getegid()};
		if ((lfd = sl_segserve_listen(d->seg_path, &p)) < 0) {
			sl_log_warnx("cannot serve the segment at %s: %s", d->seg_path, strerror(-lfd));
			return lfd;
		}
		fd = fcntl(d->shm.fd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0 || !(d->serve = sl_segserve_start(d->loop, fd, lfd, &p, NULL, NULL))) {
			rc = -errno;
			if (fd >= 0)
				close(fd);
			close(lfd);
			unlink(d->seg_path);
			return rc;
		}
		return 0;
	}
	/* Kept by systemd across a restart of the service: a new keeper serves it
	 * (the old one went with the service's processes). */
	sl_sd_store_fd("segment", d->shm.fd);
	if (reattached) {
		struct sl_segsock_reply r;
		char id[32], ours[32];

		snprintf(ours, sizeof(ours), "%016llx", (unsigned long long)d->shm.hdr->segment_id);
		rc = sl_segsock_ask(d->seg_path, "adopt\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r);
		if (r.fd >= 0)
			close(r.fd);
		if (rc == 0 && (rc = sl_segsock_ask(d->seg_path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r)) == 0 &&
		    sl_segsock_value(r.line, "id", id, sizeof(id)) == 0 && strcmp(id, ours) != 0)
			rc = sl_keeper_replace(d->seg_path, d->shm.fd);
		if (rc == 0 || rc == -ETIMEDOUT)
			return 0;
	}
	if ((rc = (int)sl_keeper_spawn(d->seg_path, d->shm.fd, &p, d->opts.foreground)) < 0) {
		sl_log_warnx("cannot start the segment's keeper at %s: %s", d->seg_path, strerror(-rc));
		return rc;
	}
	d->keeper_checked_ns = sl_clock_mono_ns();
	d->keeper_started = !reattached;
	return 0;
}

/* A private segment's server stops with the daemon; the machine's keeper does not. */
static void stop_serving(struct sl_daemon *d)
{
	if (!d->serve)
		return;
	sl_segserve_stop(d->serve);
	d->serve = NULL;
	unlink(d->seg_path);
}

int sl_daemon_start(struct sl_daemon *d, struct ev_loop *loop, const struct sl_daemon_opts *o)
{
	struct sl_shm_dims want, have;
	char why[200];
	int reattached = 0, stored = -1, rc;

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
	sl_quotas_dir(d->cfg, o->private_socket ? NULL : o->state_dir, d->quota_dir, sizeof(d->quota_dir));
	sl_quotas_mark(d->cfg, d->quota_dir);
	snprintf(d->shm_name, sizeof(d->shm_name), "%s", o->shm_name ? o->shm_name : d->cfg->global.shm_name);

	if (o->private_socket)
		rc = sl_strlcpy(d->seg_path, o->private_socket, sizeof(d->seg_path));
	else if ((rc = sl_segsock_path(&d->cfg->global, d->seg_path, sizeof(d->seg_path))) == -ENOENT)
		sl_log_warnx("%s: control_socket = none: sluiced serves the segment beside its control socket, so "
		             "it needs one", d->config_path);
	else if (rc < 0)
		sl_log_warnx("%s: the segment socket beside %s would be a path too long for a socket",
		             d->config_path, d->cfg->global.control_socket);
	if (rc < 0) {
		rc = -EINVAL;
		goto fail;
	}
	if (o->control && (rc = sl_control_open(d, sl_daemon_reload)) < 0)
		goto fail;
	sl_config_dims(d->cfg, &want);
	/* The machine's segment outlives its daemon - in systemd's store across a
	 * restart of the service, else in its keeper: taken back with its state, or
	 * made anew when none is kept. */
	if (o->private_socket)
		rc = -ENOENT;
	else if ((stored = sl_sd_take_fd("segment")) >= 0) {
		if ((rc = sl_shm_map_fd(&d->shm, stored, 1, 1)) < 0) {
			sl_log_warnx("the segment systemd kept for sluiced is not one: %s", strerror(-rc));
			close(stored);
			rc = sl_keeper_fetch(d->seg_path, &d->shm, why, sizeof(why));
		} else
			sl_log_info("took segment %s back from systemd's store", d->shm_name);
	} else
		rc = sl_keeper_fetch(d->seg_path, &d->shm, why, sizeof(why));
	if (rc == -EPERM) {
		/* Another user's segment where this daemon's belongs: never adopted (its
		 * maker could have set its limits), put aside loudly, and one of this
		 * daemon's made in its place (the keeper's listen replaces the socket). */
		sl_log_warnx("segment socket %s: %s; a segment of this daemon's is made in its place", d->seg_path,
		             why);
		rc = -ENOENT;
	}
	if (rc == 0) {
		reattached = 1;
	} else if (rc == -ENOENT || rc == -ECONNREFUSED) {
		int lost = rc == -ECONNREFUSED;

		if ((rc = sl_shm_create(&d->shm, d->shm_name, &want)) < 0) {
			sl_log_warnx("cannot make segment %s: %s", d->shm_name, strerror(-rc));
			goto fail;
		}
		if (stored < 0 && rc == 0 && lost) {
			/* Programs may still use the lost one: they find this one within
			 * SL_ORPHAN_HOLD_NS, and nothing goes from it before they have. */
			d->shm.hdr->hold_until_ns = sl_clock_mono_ns() + SL_ORPHAN_HOLD_NS;
			d->hold_allowed_until_ns = sl_clock_mono_ns() + SL_HOLD_MAX_NS;
			sl_log_warnx("segment %s: its keeper at %s died; a new segment is made, holding its releases "
			             "%.0f s while programs still on the lost one move to it (docs/design.md, \"Never "
			             "a silent split\")", d->shm_name, d->seg_path, (double)SL_ORPHAN_HOLD_NS / 1e9);
		}
	} else {
		sl_log_warnx("cannot take segment %s from its keeper at %s: %s", d->shm_name, d->seg_path,
		             rc == -EACCES ? why : strerror(-rc));
		goto fail;
	}
	have = sl_shm_dims_of(d->shm.hdr);
	if (reattached && owned_by_live_daemon(d->shm.hdr, 0)) {
		sl_log_warnx("segment %s belongs to a running sluiced (pid %d): not taking it over",
		             d->shm_name, d->shm.hdr->daemon_pid);
		rc = -EADDRINUSE;
		goto fail;
	}
	if ((rc = enter_self(d)) < 0)
		goto fail;
	if (reattached && sl_shm_fits(d->shm.hdr, d->cfg, why, sizeof(why)) < 0) {
		/* Programs attached to it keep it: a larger one takes over from it, and
		 * they move to it at their next admission. */
		if ((rc = move_segment(d, d->cfg)) < 0) {
			sl_log_warnx("segment %s: %s, and no larger one could be made: %s", d->shm_name, why,
			             strerror(-rc));
			goto fail;
		}
		sl_log_info("segment %s (%u sections, %u patterns, %u holders, %u keys) made anew larger for "
		            "the config; the programs attached to the old one move to it", d->shm_name,
		            have.sections, have.patterns, have.holders, have.keys);
	} else if (reattached && !same_dims(&have, &want) && !others_attached(d)) {
		/* Other sizes and nobody else on it: made to the config's sizes, its state
		 * carried over (a key table that shrinks drops what finds no room, as a
		 * restart would). */
		if ((rc = move_segment(d, d->cfg)) < 0) {
			sl_log_warnx("segment %s: cannot remake it to the config's sizes: %s", d->shm_name,
			             strerror(-rc));
			goto fail;
		}
		sl_log_info("segment %s (%u sections, %u patterns, %u holders, %u keys) made anew to the config's "
		            "sizes: no program was attached", d->shm_name, have.sections, have.patterns,
		            have.holders, have.keys);
	} else {
		if (!same_dims(&have, &want))
			sl_log_info("segment %s keeps its tables (%u sections, %u patterns, %u holders, %u keys; "
			            "the config asks for %u, %u, %u, %u): programs still attached share it",
			            d->shm_name, have.sections, have.patterns, have.holders, have.keys,
			            want.sections, want.patterns, want.holders, want.keys);
		if ((rc = sl_shm_apply_config(d->shm.hdr, d->cfg, d->shm.self)) < 0) {
			sl_log_warnx("segment %s: %s", d->shm_name, rc == -ENOMEM ? "out of memory" : "lock unavailable");
			goto fail;
		}
		retake_golden(d);
	}
	if ((rc = sl_metrics_start(d)) < 0)
		goto fail;
	/* A new segment gets the saved quotas before any program can see it. */
	if ((rc = sl_quotas_start(d, !reattached)) < 0)
		goto fail;
	sl_shm_publish(d->shm.hdr);
	if ((rc = serve(d, reattached)) < 0 || (rc = apply_group(d)) < 0)
		goto fail;
	d->serving = 1;
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
	stop_serving(d);
	/* A segment this failed start made and began to serve goes with it: none
	 * half-made is left for programs to find (they wait for a daemon instead). */
	if (d->keeper_started && sl_keeper_quit(d->seg_path) < 0)
		sl_log_warnx("segment %s: its keeper at %s would not stop", d->shm_name, d->seg_path);
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
	{
		/* Keys only a restart applies (config_keys.def): said to the log and to
		 * whoever asked, the rest of the config applied. */
		char names[256];
		size_t n = sl_config_restart_keys(&d->cfg->global, &next->global, names, sizeof(names));

		if (n) {
			sl_log_warnx("%s changed: %s effect when sluiced restarts", names, n > 1 ? "they take" : "takes");
			if (errors)
				fprintf(errors, "needs a restart: %s (the rest is applied)\n", names);
		}
	}
	sl_quotas_mark(next, d->quota_dir);
	if (!room_for(d, next)) {
		/* More room than the segment has: a larger one takes over from it, the
		 * shaped programs moving to it at their next admission (sl_shm_move). */
		struct sl_shm_dims had = sl_shm_dims_of(d->shm.hdr);

		if ((rc = move_segment(d, next)) < 0) {
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
		if ((rc = sl_shm_apply_config(d->shm.hdr, next, d->shm.self)) < 0) {
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
		{
			char want[sizeof(next->global.metrics)];

			snprintf(want, sizeof(want), "%s", next->global.metrics);
			if ((rc = sl_metrics_reload(d, old->global.metrics)) < 0 && errors)
				fprintf(errors, "metrics %s: cannot listen (%s): still served where they were\n", want,
				        strerror(-rc));
		}
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
	stop_serving(d);
	if (d->shm.hdr && d->shm.hdr->daemon_owner == d->shm.self) {
		d->shm.hdr->daemon_owner = 0;
		d->shm.hdr->daemon_pid = 0;
	}
	if (d->shm.hdr)
		sl_roster_leave(d->shm.hdr, d->shm.self);
	sl_shm_detach(&d->shm);
	sl_config_free(d->cfg);
	free(d->cfg);
	d->cfg = NULL;
}
