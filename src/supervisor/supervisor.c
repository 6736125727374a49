/*
 * supervisor.c - starting and stopping the seccomp supervisor (supervise.h;
 * docs/design.md, "Seccomp"); its parts are listed in internal.h.
 */
#include "sluice/segments.h"
#include "sluice/segsock.h"
#include "internal.h"

struct sl_supervisor *sl_supervise_start(struct ev_loop *loop, int listener, const char *seg_path,
                                         struct sl_shm *daemons, const struct sl_config *cfg, int verbose,
                                         void (*on_gone)(void *), void *arg)
{
	struct sl_supervisor *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return NULL;
	s->loop = loop;
	s->fd = listener;
	s->diag = -1;
	s->tfd = -1;
	s->self = (int32_t)getpid();
	s->verbose = verbose;
	s->cfg = cfg;
	s->on_gone = on_gone;
	s->gone_arg = arg;
	s->fallback = (int)cfg->global.fallback;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &s->sizes) != 0 ||
	    !(s->req = calloc(1, SL_MAX(s->sizes.seccomp_notif, (uint16_t)sizeof(*s->req)))) ||
	    !(s->resp = calloc(1, SL_MAX(s->sizes.seccomp_notif_resp, (uint16_t)sizeof(*s->resp))))) {
		fprintf(stderr, "sluice run: seccomp: cannot size its notifications: %s\n", strerror(errno));
		goto fail;
	}
	s->sizes.seccomp_notif = SL_MAX(s->sizes.seccomp_notif, (uint16_t)sizeof(*s->req));
	s->sizes.seccomp_notif_resp = SL_MAX(s->sizes.seccomp_notif_resp, (uint16_t)sizeof(*s->resp));
	snprintf(s->seg_path, sizeof(s->seg_path), "%s", seg_path);
	s->shm = daemons ? daemons : &s->own;
	if (!daemons) {
		char why[256], about[320];

		if ((rc = sl_segsock_attach(seg_path, 1, 3 * SL_SEGSOCK_TIMEOUT_NS, &s->own, why, sizeof(why))) < 0) {
			sl_segment_about(seg_path, about, sizeof(about));
			fprintf(stderr, "sluice run: seccomp: cannot attach %s: %s\n", about,
			        rc == -EPROTO ? "not a sluice segment of this version" : rc == -EACCES ? why : strerror(-rc));
			goto fail;
		}
	}
	{
		unsigned n = 0;
		char (*names)[SL_HOST_MAX] = sup_config_names(cfg, &n);

		/* The first time here, before any answer: a connect the program makes at
		 * once to a name of the config's must match as that name. */
		if (names)
			s->names = sup_resolve((const char (*)[SL_HOST_MAX])names, n, &s->nnames);
		free(names);
	}
	ev_async_init(&s->names_ready, sup_on_names_ready);
	s->names_ready.data = s;
	ev_async_start(loop, &s->names_ready);
	s->diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	ev_init(&s->track_timer, sup_on_track);
	s->track_timer.repeat = TRACK_S;
	s->track_timer.data = s;
	{
		/* SLUICE_NAMES_REFRESH_S: another period, for the tests (0.1 s to an hour). */
		const char *env = getenv("SLUICE_NAMES_REFRESH_S");
		double every = env ? atof(env) : NAMES_REFRESH_S;

		if (!(every >= 0.1 && every <= 3600))
			every = NAMES_REFRESH_S;
		ev_timer_init(&s->names_timer, sup_on_names, every, every);
	}
	s->names_timer.data = s;
	ev_timer_start(loop, &s->names_timer);
	/* Linux 6.6: the caller and this process hand over on one CPU, as a pipe's two
	 * ends do, rather than wake each other across CPUs: a trapped call costs a
	 * fraction as much (make bench, item 17).  Older kernels: as it was. */
	(void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (uint64_t)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
	if ((s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0) {
		fprintf(stderr, "sluice run: seccomp: no timerfd: %s\n", strerror(errno));
		goto fail;
	}
	ev_io_init(&s->tfd_io, sup_on_tfd, s->tfd, EV_READ);
	s->tfd_io.data = s;
	ev_io_start(loop, &s->tfd_io);
	sl_clock_prefer_wakeups();
	sup_go_realtime(s);
	ev_io_init(&s->io, sup_on_notify, listener, EV_READ);
	s->io.data = s;
	ev_io_start(loop, &s->io);
	return s;
fail:
	free(s->req);
	free(s->resp);
	free(s);
	return NULL;
}

void sl_supervise_finish(struct sl_supervisor *s, const volatile int *stop)
{
	/* Bounded: each held datagram is released or refused by its max_wait, and
	 * the timerfd wakes the loop for it. */
	while (s && !*stop) {
		const struct call *c = s->calls;

		while (c && !c->relayed)
			c = c->next;
		if (!c)
			return;
		ev_run(s->loop, EVRUN_ONCE);
	}
}

void sl_supervise_stop(struct sl_supervisor *s)
{
	if (!s)
		return;
	ev_io_stop(s->loop, &s->io);
	sup_realtime_stop(s);
	ev_timer_stop(s->loop, &s->names_timer);
	ev_async_stop(s->loop, &s->names_ready);
	if (s->job) { /* a refresh still under way: its thread frees the job */
		pthread_mutex_lock(&s->job->lock);
		s->job->orphaned = 1;
		pthread_mutex_unlock(&s->job->lock);
		sup_job_put(s->job);
	}
	ev_timer_stop(s->loop, &s->track_timer);
	while (s->places) {
		struct place *p = s->places;

		sl_pending_give_back(s->shm->hdr, p->taken, &p->m, s->shm->self, sup_give_back_segment, s);
		s->places = p->next;
		free(p);
	}
	if (s->diag >= 0)
		close(s->diag);
	ev_io_stop(s->loop, &s->tfd_io);
	if (s->tfd >= 0)
		close(s->tfd);
	while (s->calls)
		sup_call_free(s->calls); /* their slots and places given back */
	sup_relay_stop(s);
	sup_say(s, "%llu calls trapped: %llu went, %llu of them held, %llu refused", (unsigned long long)s->trapped,
	    (unsigned long long)s->passed, (unsigned long long)s->held, (unsigned long long)s->refused);
	close(s->fd);
	if (s->shm == &s->own)
		sl_shm_detach(&s->own);
	free(s->names);
	free(s->req);
	free(s->resp);
	free(s);
}
