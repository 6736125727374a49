/*
 * The segment, asked for over its socket (sluice/segsock.h): at the first call that
 * needs it, again in a fork child (which must be entered in the roster under its
 * own token), and whenever the one in use was marked moved.  A process that cannot
 * reach it never shapes on its own: it compiles the config only to know what
 * matches, and its matched calls wait for the shared queue as the fallback says
 * (docs/design.md, "Never a silent split").  Said once per process (sl_shim_tell).
 */
#include "shim.h"
#include "sluice/clock.h"
#include "sluice/config.h"
#include "sluice/say.h"
#include "sluice/segsock.h"
#include "sluice/summary.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

static struct sl_mutex attach_lock = SL_MUTEX_INIT;
static int64_t next_try_ns; /* under attach_lock */
static int told;            /* under attach_lock: the user was told once */
static int last_rc;         /* under attach_lock: why the last try failed */
static int64_t next_orphan_ns; /* under attach_lock: when to ask again whether the
                                * segment is still served */
static struct sl_shm_header *lost; /* under attach_lock: the segment found lost,
                                    * whose releases its successor must wait out */
static char last_why[256];

void sl_attach_after_fork(void)
{
	sl_mutex_reset(&attach_lock);
	next_try_ns = 0;
	next_orphan_ns = 0;
}

/* Whether fd 2 may take a line: a terminal, a pipe, a file, /dev/null, or a unix
 * socket (the journal's stream); never a network socket a program may have put
 * there, whose peer would take the line for data. */
static int stderr_is_safe(void)
{
	struct stat st;
	int domain = 0;
	socklen_t len = sizeof(domain);

	if (sl_sys(SYS_fstat, 2, &st) != 0)
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode);
	return sl_sys(SYS_getsockopt, 2, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX;
}

void sl_shim_tell(const char *fmt, ...)
{
	char line[600];
	va_list ap;
	int n, saved = errno;

	n = snprintf(line, sizeof(line), "sluice: ");
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	sl_debug("%.*s", n - 9, line + 8); /* without "sluice: " and the newline */
	if (sl_say_on)
		sl_say_notice(line + 8, (size_t)n - 9);
	else if (!sl_shim.debug && stderr_is_safe())
		sl_sys(SYS_write, 2, line, n);
	errno = saved;
}

/* How this process's user is seen outside a user namespace it is in: "" when it
 * is in none (its uid maps to itself), else " (uid U here is uid V to the
 * daemon)" - what an operator must map, or let in. */
static void mapped_as(char *out, size_t len)
{
	char buf[256];
	unsigned inside, outside, count, uid = (unsigned)sl_sys(SYS_getuid);
	int fd = sl_sys_open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? sl_sys_read(fd, buf, sizeof(buf) - 1) : -1;
	const char *p = buf;

	out[0] = '\0';
	if (fd >= 0)
		sl_sys_close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (sscanf(p, " %u %u %u", &inside, &outside, &count) == 3) {
		if (uid >= inside && uid - inside < count) {
			if (inside != outside || count != 4294967295u)
				snprintf(out, len, " (uid %u here is uid %u outside this user namespace)", uid,
				         outside + (uid - inside));
			return;
		}
		if (!(p = strchr(p, '\n')))
			break;
		p++;
	}
	snprintf(out, len, " (uid %u here has no uid outside this user namespace: map it)", uid);
}

/* Why an attach failed, in words. */
static const char *attach_error(int rc, const char *why)
{
	switch (rc) {
	case -EACCES: return why && *why ? why : strerror(EACCES);
	case -EPROTO: return "not a sluice segment of this version";
	case -EPERM: return "not sealed against resizing (it could be shrunk under the mapping): refused";
	case -EBADF: return "not a memory file: refused";
	case -ENOENT: return "no such socket";
	case -ECONNREFUSED: return "nobody answers (the daemon's keeper is gone)";
	default: return strerror(-rc);
	}
}

/* What the user is told when the segment cannot be had: why, and what the calls
 * do meanwhile. */
static void tell_unreached(int rc, const char *why)
{
	char map[128] = "", reason[320];
	const char *then = sl_shim.fallback == SL_FALLBACK_OPEN     ? "calls to shaped destinations go unshaped"
	                   : sl_shim.fallback == SL_FALLBACK_CLOSED ? "calls to shaped destinations are refused"
	                                                            : "calls to shaped destinations wait for it "
	                                                              "(up to max_wait) and are refused after";

	if (rc == -EACCES || rc == -EPERM)
		mapped_as(map, sizeof(map));
	if (rc == -ENOENT)
		snprintf(reason, sizeof(reason), "no such socket: no sluiced runs, or (in a container) its "
		         "directory is not mounted here");
	else
		snprintf(reason, sizeof(reason), "%s%s", attach_error(rc, why), map);
	sl_shim_tell("cannot use the shared queues at %s: %s; %s", sl_shim.seg_path, reason, then);
}

/* A config compiled into private memory, only to know what matches: its sections
 * carry serials no daemon hands out (the high bit), so a match made here is never
 * taken for one of the shared segment's, and the segment is marked moved, so
 * every admission asks for the shared one first (pending.h).  0 or -errno. */
static int stand_in(struct sl_shm *out)
{
	struct sl_config *cfg;
	struct sl_shm_dims dims;
	struct sl_shm shm;
	int rc = -ENOENT;

	if (!sl_shim.config_path[0] || !(cfg = calloc(1, sizeof(*cfg))))
		return rc;
	if (sl_config_load(cfg, sl_shim.config_path) == 0) {
		if (!sl_shim.fallback_forced)
			sl_shim.fallback = cfg->global.fallback;
		sl_config_dims(cfg, &dims);
		if ((rc = sl_shm_create_anonymous_dims(&shm, &dims)) == 0 &&
		    (rc = sl_shm_apply_config(shm.hdr, cfg, shm.self)) < 0)
			sl_shm_detach(&shm);
		if (rc == 0) {
			for (uint32_t i = 0; i < shm.hdr->slots_used; i++) {
				struct sl_section *sec = sl_shm_section(shm.hdr, i);

				if (sec) {
					sec->serial |= 0x80000000u;
					sl_section_seal(sec); /* as it now is: its own (summary.h) */
				}
			}
			__atomic_store_n(&shm.hdr->moved, 1, __ATOMIC_RELEASE);
			*out = shm;
		}
	}
	sl_config_free(cfg);
	free(cfg);
	return rc;
}

/* The lost segment `old`'s successor `next` releases nothing before `old` would
 * have released again (each section's enforcement instant, its rel_tat): what
 * went from the lost one just before it was found lost is not sent again at
 * once from the new.  The greatest of them, within SL_HOLD_MAX_NS, raised in
 * next's hold (shared: every process that finds the loss raises it alike). */
static void carry_hold(struct sl_shm_header *old, struct sl_shm_header *next, int64_t now)
{
	uint32_t used = SL_MIN(old->slots_used, sl_shm_dims_of(old).sections);
	int64_t want = now, cur;

	for (uint32_t i = 0; i < used; i++) {
		const struct sl_section *sec = sl_shm_section(old, i);
		int64_t at = sec ? __atomic_load_n(&sec->state.rel_tat_ns, __ATOMIC_RELAXED) : 0;

		if (sec && sec->in_use && at > want && at - now <= SL_HOLD_MAX_NS)
			want = at;
	}
	cur = __atomic_load_n(&next->hold_until_ns, __ATOMIC_RELAXED);
	while (want > cur && !__atomic_compare_exchange_n(&next->hold_until_ns, &cur, want, 0, __ATOMIC_RELAXED,
	                                                  __ATOMIC_RELAXED))
		;
}

/* Use `next` from now on: one store of the header pointer, which every reader
 * loads first (the token before it; a reader pairing the old header with the new
 * token, or the other way, finds the lock refused once and asks again). */
static void use(const struct sl_shm *next)
{
	__atomic_store_n(&sl_shim.shm.size, next->size, __ATOMIC_RELAXED);
	__atomic_store_n(&sl_shim.shm.self, next->self, __ATOMIC_RELAXED);
	__atomic_store_n(&sl_shim.shm.ino, next->ino, __ATOMIC_RELAXED);
	sl_shim.shm.anonymous = next->anonymous;
	__atomic_store_n(&sl_shim.shm.hdr, next->hdr, __ATOMIC_RELEASE);
}

/* A process on a segment marked moved asks which is served before it attaches
 * one: the same (a scribbled mark, which the daemon clears; or a successor not
 * handed to the keeper yet) is no reason to be entered in the roster again.
 * 1 when another segment is served. */
static int served_elsewhere(void)
{
	struct sl_segsock_reply r;
	char id[32];
	int rc = sl_segsock_ask(sl_shim.seg_path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r);

	if (r.fd >= 0)
		sl_sys_close(r.fd);
	return rc == 0 && strncmp(r.line, "ok", 2) == 0 && sl_segsock_value(r.line, "id", id, sizeof(id)) == 0 &&
	       strtoull(id, NULL, 16) != sl_shim.shm.hdr->segment_id;
}

/* Ask for the segment once (attach_lock held).  1 when one is in use now that was
 * not, 0 when nothing changed; unreached: told once, unless `quiet` (the caller
 * tells). */
static int try_attach(int64_t now, int quiet)
{
	struct sl_shm next;
	char why[256];
	int rc;

	next_try_ns = now + SL_ATTACH_RETRY_NS;
	if (sl_shim.mode == SL_SHIM_SHARED && sl_shim.shm.self && !served_elsewhere())
		return 0;
	rc = sl_segsock_attach(sl_shim.seg_path, 1, SL_SEGSOCK_TIMEOUT_NS, &next, why, sizeof(why));
	if (rc == 0 && (!next.self || sl_shm_moved(next.hdr))) {
		/* No token: nothing to lock with.  Moved already: its successor is not
		 * handed over yet; asked again at the next admission. */
		if (next.self) {
			sl_shm_detach(&next);
			return 0;
		}
		rc = -EACCES;
		snprintf(why, sizeof(why), "it gave this process no place in its roster");
		sl_shm_detach(&next);
	}
	if (rc < 0) {
		sl_debug("cannot attach the segment at %s: %s", sl_shim.seg_path, attach_error(rc, why));
		last_rc = rc;
		snprintf(last_why, sizeof(last_why), "%s", why);
		if (!quiet && !told++)
			tell_unreached(rc, why);
		return 0;
	}
	if (sl_shim.mode == SL_SHIM_SHARED && !sl_shm_moved(sl_shim.shm.hdr) && next.ino == sl_shim.shm.ino) {
		/* A fork child entered under its own token: the mapping it has is the one
		 * served, kept (records may point into it). */
		__atomic_store_n(&sl_shim.shm.self, next.self, __ATOMIC_RELAXED);
		sl_shm_detach(&next);
		return 0;
	}
	if (lost) {
		carry_hold(lost, next.hdr, now);
		lost = NULL;
	}
	/* The fallback the daemon's config says decides from now on, unless the
	 * environment said otherwise (init.c). */
	if (!sl_shim.fallback_forced && next.hdr->fallback <= SL_FALLBACK_CLOSED)
		sl_shim.fallback = (int)next.hdr->fallback;
	use(&next);
	sl_shim.mode = SL_SHIM_SHARED;
	__atomic_store_n(&sl_shim.followed_ns, now, __ATOMIC_RELEASE);
	if (told) {
		sl_shim_tell("reached the shared queues at %s: shaping with them from now on", sl_shim.seg_path);
		told = 0;
	}
	sl_debug("attached segment %.39s at %s (generation %llu)", next.hdr->shm_name, sl_shim.seg_path,
	         (unsigned long long)next.hdr->generation);
	return 1;
}

void sl_shim_check_orphan(void)
{
	struct sl_shm_header *h = __atomic_load_n(&sl_shim.shm.hdr, __ATOMIC_ACQUIRE);
	int64_t now = sl_clock_mono_ns();
	struct sl_segsock_reply r;
	char id[32];

	if (sl_shim.mode != SL_SHIM_SHARED || !h)
		return;
	sl_shim_lock(&attach_lock);
	if (!sl_shm_moved(h) && now >= next_orphan_ns) {
		next_orphan_ns = now + SL_ORPHAN_CHECK_NS;
		/* A keeper that answers with another segment: this one was lost with
		 * its keeper and daemon, and made anew.  Marked moved, every process
		 * still on it follows at its next admission - no release is made in
		 * both (docs/design.md, "Never a silent split").  Nobody answering, or
		 * the same one: the daemon is away, the queue goes on. */
		if (sl_segsock_ask(sl_shim.seg_path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS / 2, &r) == 0 &&
		    strncmp(r.line, "ok", 2) == 0 && sl_segsock_value(r.line, "id", id, sizeof(id)) == 0 &&
		    strtoull(id, NULL, 16) != h->segment_id) {
			__atomic_store_n(&h->moved, 1, __ATOMIC_RELEASE);
			lost = h;
			sl_shim_tell("the shared queues at %s were made anew (their keeper was lost): following them",
			             sl_shim.seg_path);
		}
		if (r.fd >= 0)
			sl_sys_close(r.fd);
	}
	sl_shim_unlock(&attach_lock);
}

/* No config says what matches, and the keeper took the connection but did not
 * answer in time (-ETIMEDOUT: it is there, and busy - one of 200 daemons starting
 * on two cores kept a client's first ask past its 500 ms).  Giving up would shape
 * nothing for the rest of the process's life on one slow answer: the calling
 * thread (and any other that needs it) waits for it instead, asking again every
 * SL_ATTACH_RETRY_NS for up to SL_ATTACH_PATIENCE_NS (docs/design.md, "Never a
 * silent split").  Nothing listening (-ENOENT, refused) is no daemon, and is
 * not waited for.  Called and returns with attach_lock held; 1 when another
 * mode than SL_SHIM_LATER was reached meanwhile (the segment in use, or another
 * thread's giving up). */
static int wait_for_busy_keeper(int64_t now)
{
	int64_t give_up = now + SL_ATTACH_PATIENCE_NS;

	if (last_rc != -ETIMEDOUT)
		return 0;
	if (!told++) /* once, whichever thread waits first */
		sl_shim_tell("the shared queues at %s did not answer in time; waiting for them (up to %d s)",
		             sl_shim.seg_path, (int)(SL_ATTACH_PATIENCE_NS / SL_NS_PER_S));
	while (sl_shim.mode == SL_SHIM_LATER && last_rc == -ETIMEDOUT && now < give_up) {
		int64_t at = next_try_ns;

		/* Asleep without the lock: another thread, or a handler of a signal
		 * this one takes, waits the same way rather than on the lock. */
		sl_shim_unlock(&attach_lock);
		sl_clock_sleep_until(at);
		sl_shim_lock(&attach_lock);
		now = sl_clock_mono_ns();
		if (sl_shim.mode == SL_SHIM_LATER && now >= next_try_ns)
			try_attach(now, 1);
	}
	if (sl_shim.mode != SL_SHIM_LATER)
		return 1; /* in use now (by this thread's try or another's) */
	sl_shim_tell("the shared queues at %s gave no answer in %d s", sl_shim.seg_path,
	             (int)(SL_ATTACH_PATIENCE_NS / SL_NS_PER_S));
	told = 0;
	return 0;
}

void sl_shim_attach_slow(void)
{
	int64_t now = sl_clock_mono_ns();

	sl_shim_lock(&attach_lock);
	if (sl_shim.mode == SL_SHIM_LATER || (sl_shim.mode == SL_SHIM_SHARED && !sl_shim.shm.self)) {
		if (now >= next_try_ns)
			try_attach(now, sl_shim.mode == SL_SHIM_LATER);
		/* Not reached: the config says what matches, and matched calls wait. */
		if (sl_shim.mode == SL_SHIM_LATER) {
			struct sl_shm s;

			if (stand_in(&s) == 0) {
				use(&s);
				sl_shim.mode = SL_SHIM_WAITING;
				if (!told++)
					tell_unreached(last_rc, last_why);
			} else if (!wait_for_busy_keeper(now)) {
				if (!told++)
					sl_shim_tell("cannot reach the shared queues at %s, and no config (SLUICE_CONFIG) says "
					             "what is shaped: nothing is", sl_shim.seg_path);
				sl_shim.mode = SL_SHIM_OFF;
			}
		}
	}
	sl_shim_unlock(&attach_lock);
}

int sl_shim_follow_slow(void)
{
	int64_t now = sl_clock_mono_ns();
	int rc = 0;

	/* One thread asks; the others find it done, or not due yet. */
	sl_shim_lock(&attach_lock);
	if (sl_shm_moved(sl_shim.shm.hdr) && now >= next_try_ns)
		rc = try_attach(now, 0);
	sl_shim_unlock(&attach_lock);
	return rc;
}
