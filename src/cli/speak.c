/* `sluice run` saying held and refused calls (speak.h). */
#include "speak.h"
#include "sluice/clock.h"
#include "sluice/lease.h"
#include "sluice/limiter.h"
#include "sluice/say.h"
#include "sluice/segsock.h"
#include "sluice/shm.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void printable(char *text);

/* A section's name and its queue now, read from the segment (attached for the
 * moment, read-only, through its socket: the run may have joined the machine's,
 * or host its own). */
static void describe(const struct speaker *s, int section, char *name, size_t nlen, char *queue, size_t qlen)
{
	struct sl_shm shm;
	static struct sl_section copy; /* large: off the stack */
	struct sl_section *sec;
	struct timespec ts;

	snprintf(name, nlen, "section %d", section);
	queue[0] = '\0';
	if (section < 0)
		return;
	if (s->local)
		shm = *s->local;
	else if (sl_segsock_attach(s->seg_path, 0, SL_SEGSOCK_TIMEOUT_NS, &shm, NULL, 0) < 0)
		return;
	if ((unsigned)section < shm.hdr->slots_used && (sec = sl_shm_section(shm.hdr, (unsigned)section))) {
		memcpy(&copy, sec, sizeof(copy));
		/* The copy's name, bounded: the segment is anyone's to scribble. */
		if (copy.spec.name[0]) {
			snprintf(name, nlen, "%.*s", (int)sizeof(copy.spec.name), copy.spec.name);
			printable(name);
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (copy.spec.per == SL_PER_NONE)
			snprintf(queue, qlen, ", %llu queued",
			         (unsigned long long)sl_limit_queued(&copy.spec, &copy.state,
			                                             ts.tv_sec * 1000000000LL + ts.tv_nsec,
			                                             sl_sane_ns(shm.hdr->wall_off_ns)));
	}
	if (!s->local)
		sl_shm_detach(&shm);
}

/* Say the news in n that is due at `now` (all of it when `all`). */
static void say_due(struct speaker *s, struct speaker_news *n, ev_tstamp now, int all)
{
	int section = n->section;
	char name[96], queue[48];

	if (!n->held_max_ms && !n->refused)
		return;
	describe(s, section, name, sizeof(name), queue, sizeof(queue));
	if (n->held_max_ms && (all || now - n->said_held >= SPEAK_EVERY_S)) {
		fprintf(stderr, "sluice run: held %.1f s by [%s]%s\n", (double)n->held_max_ms / 1000, name, queue);
		n->held_max_ms = 0;
		n->said_held = now;
	}
	if (n->refused && (all || now - n->said_refused >= SPEAK_EVERY_S)) {
		if (section < 0)
			fprintf(stderr, "sluice run: refused: %s", n->why);
		else
			fprintf(stderr, "sluice run: refused by [%s]: %s", name, n->why);
		if (n->refused > 1)
			fprintf(stderr, " (%u calls)", n->refused);
		fputc('\n', stderr);
		n->refused = 0;
		n->said_refused = now;
	}
}

/* Control characters (escape sequences among them) made '?': what is printed on
 * the terminal is text, whatever a datagram or the segment held.  A line ends at
 * its first newline. */
static void printable(char *text)
{
	text[strcspn(text, "\n")] = '\0';
	for (char *p = text; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* The next datagram into buf (NUL not added): its length; 0 for one another user
 * sent (the kernel's SCM_CREDENTIALS, the socket having SO_PASSCRED: only this
 * user's processes, the ones it runs, may speak through `sluice run`); -1 when
 * none is waiting. */
static ssize_t recv_own(int fd, char *buf, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(struct ucred))];
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	int own = 0;

	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		struct ucred cred;

		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(cred))) {
			memcpy(&cred, CMSG_DATA(c), sizeof(cred));
			own = cred.uid == geteuid() || cred.uid == getuid();
		}
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) /* never asked for */
			for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
				int fd2;

				memcpy(&fd2, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
				close(fd2);
			}
	}
	return own ? n : 0;
}

/* A notice a process said once: printed once per run whatever the number of its
 * processes that say it (a loop of curl says it once, not once per curl). */
static void notice(struct speaker *s, char *text)
{
	uint32_t h = 2166136261u;

	for (char *p = text; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	for (unsigned i = 0; i < SPEAK_NOTICES; i++)
		if (s->noticed[i] == h)
			return;
	s->noticed[s->nnoticed++ % SPEAK_NOTICES] = h;
	fprintf(stderr, "sluice run: %s\n", text);
}

/* "S SECTION CALLS WAIT_MS MAX_MS PID BORN": a process image's sums so far; what
 * they add since its last word goes to the section's totals. */
static void summed(struct speaker *s, const char *buf)
{
	int section, pid;
	unsigned long long calls, wait_ms, max_ms, born;
	struct speaker_sum *e = NULL;
	struct speaker_total *t;

	if (sscanf(buf, "S %d %llu %llu %llu %d %llu", &section, &calls, &wait_ms, &max_ms, &pid, &born) != 6 ||
	    section < 0 || pid <= 0)
		return;
	for (unsigned i = 0; i < SL_MIN(s->nsums, (unsigned)SPEAK_SUMS); i++)
		if (s->sums[i].pid == pid && s->sums[i].born == born && s->sums[i].section == section)
			e = &s->sums[i];
	if (!e) {
		e = &s->sums[s->nsums++ % SPEAK_SUMS];
		*e = (struct speaker_sum){.pid = pid, .section = section, .born = born};
	}
	if (calls < e->calls || wait_ms < e->wait_ms)
		return; /* an older word come late (cumulative sums only grow) */
	t = &s->total[(unsigned)section % SPEAK_SLOTS];
	t->calls += calls - e->calls;
	t->wait_ms += wait_ms - e->wait_ms;
	t->max_ms = SL_MAX(t->max_ms, max_ms);
	e->calls = calls;
	e->wait_ms = wait_ms;
}

void speaker_summary(struct speaker *s)
{
	for (int i = 0; i < SPEAK_SLOTS; i++) {
		const struct speaker_total *t = &s->total[i];
		char name[96], queue[48];

		if (!t->calls)
			continue;
		describe(s, i, name, sizeof(name), queue, sizeof(queue));
		fprintf(stderr, "sluice run: [%s] held %llu call%s, %.1f s in all, the longest %.1f s\n", name,
		        (unsigned long long)t->calls, t->calls > 1 ? "s" : "", (double)t->wait_ms / 1000,
		        (double)t->max_ms / 1000);
	}
}

static void on_word(struct ev_loop *loop, ev_io *w, int revents)
{
	struct speaker *s = w->data;
	char buf[256], why[96];
	long long a, b;
	int section;
	ssize_t n;

	(void)revents;
	/* Bounded: what the socket holds now, at most 256 datagrams a wake-up. */
	for (int i = 0; i < 256 && (n = recv_own(s->fd, buf, sizeof(buf) - 1)) >= 0; i++) {
		struct speaker_news *news;
		int held;

		if (n == 0)
			continue; /* another user's: not said */
		buf[n] = '\0';
		printable(buf);
		if (buf[0] == 'N' && buf[1] == ' ') {
			notice(s, buf + 2);
			continue;
		}
		if (buf[0] == 'S' && buf[1] == ' ') {
			summed(s, buf);
			continue;
		}
		held = sscanf(buf, "H %d %lld %lld", &section, &a, &b) == 3;
		if (!held && sscanf(buf, "R %d %lld %95[^\n]", &section, &a, why) != 3)
			continue; /* not ours to believe: anyone may send to the name */
		if (section < -1 || a < 0)
			continue;
		news = &s->news[(unsigned)(section + 1) % SPEAK_SLOTS];
		if (news->section != section) {
			say_due(s, news, ev_now(loop), 1);
			memset(news, 0, sizeof(*news));
			news->section = section;
		}
		if (held && a > news->held_max_ms)
			news->held_max_ms = a;
		if (!held && a > 0) {
			news->refused += (uint32_t)(a > 1000000 ? 1000000 : a);
			snprintf(news->why, sizeof(news->why), "%s", why);
		}
		say_due(s, news, ev_now(loop), 0);
	}
}

static void on_flush(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct speaker *s = w->data;

	(void)revents;
	for (int i = 0; i < SPEAK_SLOTS; i++)
		say_due(s, &s->news[i], ev_now(loop), 0);
}

int speaker_start(struct speaker *s, struct ev_loop *loop, const char *seg_path, const struct sl_shm *local)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char name[SL_SAY_NAME_MAX];
	unsigned rnd = 0;
	int n;

	memset(s, 0, sizeof(*s));
	for (int i = 0; i < SPEAK_SLOTS; i++)
		s->news[i].section = i - 1; /* each slot's own first section: nothing to say */
	s->seg_path = seg_path;
	s->local = local;
	if (getentropy(&rnd, sizeof(rnd)) != 0)
		rnd = (unsigned)time(NULL);
	n = snprintf(name, sizeof(name), "sluice-say-%d-%08x", (int)getpid(), rnd);
	memcpy(a.sun_path + 1, name, (size_t)n);
	s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0)
		return -errno;
	if (setsockopt(s->fd, SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int)) != 0 ||
	    bind(s->fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0 ||
	    setenv(SL_SAY_ENV, name, 1) != 0) {
		int e = errno;

		close(s->fd);
		s->fd = -1;
		return -e;
	}
	sl_say_setup(name); /* the supervisor, in this process, says through it too */
	ev_io_init(&s->io, on_word, s->fd, EV_READ);
	s->io.data = s;
	ev_io_start(loop, &s->io);
	ev_timer_init(&s->flush, on_flush, SPEAK_EVERY_S, SPEAK_EVERY_S);
	s->flush.data = s;
	ev_timer_start(loop, &s->flush);
	return 0;
}

void speaker_stop(struct speaker *s, struct ev_loop *loop)
{
	if (s->fd < 0)
		return;
	ev_io_stop(loop, &s->io);
	ev_timer_stop(loop, &s->flush);
	sl_say_sums(); /* this process's own (the seccomp supervisor's holds) */
	on_word(loop, &s->io, EV_READ); /* the last words in the socket */
	for (int i = 0; i < SPEAK_SLOTS; i++)
		say_due(s, &s->news[i], ev_now(loop), 1);
	sl_say_setup(NULL);
	close(s->fd);
	s->fd = -1;
}
