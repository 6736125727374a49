/*
 * sigjump PORT SECONDS sigaction|signal: connect to 127.0.0.1:PORT over and over
 * for SECONDS while a SIGALRM handler, every 300 us, siglongjmps out of wherever
 * the program is - the classic alarm() timeout around connect.  Prints the connects
 * that returned (made or refused) and the jumps taken.
 *
 * sigjump semantics: what the program sees of its own handlers under the shim is
 * what it would see without it: sigaction and signal answer with the program's
 * handler, sysv_signal's handler runs once and leaves the default, sigset holds.
 * Prints "ok" or the first difference, and exits 0 or 1.
 *
 * Built by the test that runs it (tests/integration/t_signals.sh).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static sigjmp_buf env;
static volatile sig_atomic_t jumps, hits;

static void on_alarm(int sig)
{
	(void)sig;
	jumps++;
	siglongjmp(env, 1);
}

static void on_usr(int sig)
{
	(void)sig;
	hits++;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int jump_loop(int port, double secs, const char *how)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct itimerval it = {{0, 300}, {0, 300}}, off = {{0, 0}, {0, 0}};
	volatile long done = 0;
	double end = now() + secs;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (strcmp(how, "signal") == 0) {
		signal(SIGALRM, on_alarm);
	} else {
		struct sigaction sa = {.sa_handler = on_alarm};

		sigaction(SIGALRM, &sa, NULL);
	}
	setitimer(ITIMER_REAL, &it, NULL);
	while (now() < end) {
		volatile int fd = -1;

		if (sigsetjmp(env, 1) == 0) {
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (fd >= 0) {
				connect(fd, (struct sockaddr *)&a, sizeof(a));
				done++;
			}
		}
		if (fd >= 0)
			close(fd);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	printf("%ld %d\n", (long)done, (int)jumps);
	return 0;
}

#define CHECK(cond, what)                    \
	do {                                     \
		if (!(cond)) {                       \
			printf("differs: %s\n", what);   \
			return 1;                        \
		}                                    \
	} while (0)

static int semantics(void)
{
	struct sigaction sa = {.sa_handler = on_usr, .sa_flags = SA_RESTART}, old;
	sigset_t mask;

	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction set");
	CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == on_usr, "sigaction query");
	CHECK(old.sa_flags & SA_RESTART, "sigaction flags");
	CHECK(signal(SIGUSR1, SIG_IGN) == on_usr, "signal returns the old handler");
	CHECK(signal(SIGUSR1, on_usr) == SIG_IGN, "signal returns SIG_IGN");
	raise(SIGUSR1);
	CHECK(hits == 1, "a handler set by signal runs");
	CHECK(sysv_signal(SIGUSR2, on_usr) == SIG_DFL, "sysv_signal returns the old action");
	raise(SIGUSR2);
	CHECK(hits == 2, "a sysv_signal handler runs");
	CHECK(sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_handler == SIG_DFL,
	      "after one delivery a sysv_signal action is the default");
	CHECK(sigset(SIGUSR1, SIG_HOLD) == on_usr, "sigset hold returns the action");
	raise(SIGUSR1);
	CHECK(hits == 2, "a held signal waits");
	CHECK(sigset(SIGUSR1, on_usr) == SIG_HOLD, "sigset returns SIG_HOLD for a held signal");
	CHECK(hits == 3, "a held signal arrives when let go");
	CHECK(sigprocmask(SIG_BLOCK, NULL, &mask) == 0 && !sigismember(&mask, SIGUSR1), "sigset unblocks");
	CHECK(siginterrupt(SIGUSR1, 1) == 0 && sigaction(SIGUSR1, NULL, &old) == 0 &&
	      !(old.sa_flags & SA_RESTART), "siginterrupt");
	/* A vfork child resets its handlers before it execs (Python's subprocess
	 * does), in its parent's memory: the parent's stay as they are. */
	{
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		pid_t pid = vfork();

		if (pid == 0) {
			sigaction(SIGUSR1, &dfl, NULL);
			_exit(0);
		}
		CHECK(pid > 0 && waitpid(pid, NULL, 0) == pid, "vfork");
	}
	CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == on_usr,
	      "a vfork child's reset changed the parent's handler");
	raise(SIGUSR1);
	CHECK(hits == 4, "the parent's handler runs after a vfork child's reset");
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "semantics") == 0)
		return semantics();
	if (argc != 4) {
		fprintf(stderr, "usage: sigjump PORT SECONDS sigaction|signal | sigjump semantics\n");
		return 2;
	}
	return jump_loop(atoi(argv[1]), atof(argv[2]), argv[3]);
}
