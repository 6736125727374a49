/*
 * static_client: a statically linked test client for `sluice run --seccomp`
 * (built with -static -pthread: no preload reaches it).
 *
 *   static_client http PORT N THREADS   N HTTP/1.0 GETs of /static/T-I to
 *                                       127.0.0.1:PORT from THREADS threads, each
 *                                       on a connection of its own
 *   static_client fork PORT N CHILDREN  the same from CHILDREN forked processes
 *   static_client udp PORT N            N datagrams to 127.0.0.1:PORT by sendto(),
 *                                       then N by sendmsg()
 *   static_client hold PORT N THREADS MS  N connections from THREADS threads, each
 *                                       kept open MS ms; prints each one's
 *                                       "CONNECTED CLOSING" (CLOCK_MONOTONIC ns)
 *   static_client odd PORT              connect()s the supervisor must pass
 *                                       through untouched: an unreadable address,
 *                                       a short one, AF_UNIX
 *
 * Prints "done OK FAILED [ERRNO-NAME]" (the first failure's errno); exits 1 when
 * any failed.  `odd` prints each call's result and exits 0 when each failed as the
 * kernel alone would have it fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port, total, workers, hold_ms;
static int next_request, ok, failed, first_errno;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const char *errno_name(int e)
{
	switch (e) {
	case ECONNREFUSED: return "ECONNREFUSED";
	case ECONNRESET: return "ECONNRESET";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case ENOSYS: return "ENOSYS";
	case EFAULT: return "EFAULT";
	case EINVAL: return "EINVAL";
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	default: return "other";
	}
}

static void count(int good, int err)
{
	pthread_mutex_lock(&lock);
	if (good) {
		ok++;
	} else {
		failed++;
		if (!first_errno)
			first_errno = err ? err : EPROTO;
	}
	pthread_mutex_unlock(&lock);
}

/* One GET on a new connection; 0, or the errno that failed it. */
static int one_get(int who, int i)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	char req[128], resp[512];
	size_t got = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0), err;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		err = errno;
		close(fd);
		return err;
	}
	snprintf(req, sizeof(req), "GET /static/%d-%d HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", who, i);
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		err = errno;
		close(fd);
		return err ? err : EIO;
	}
	while (got < sizeof(resp) - 1 && (n = read(fd, resp + got, sizeof(resp) - 1 - got)) > 0)
		got += (size_t)n;
	resp[got] = '\0';
	close(fd);
	return strstr(resp, "hello /static/") ? 0 : EPROTO;
}

static void *worker(void *arg)
{
	int who = (int)(intptr_t)arg;

	for (;;) {
		int i, err;

		pthread_mutex_lock(&lock);
		i = next_request < total ? next_request++ : -1;
		pthread_mutex_unlock(&lock);
		if (i < 0)
			return NULL;
		err = one_get(who, i);
		count(err == 0, err);
	}
}

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* hold: connect, keep it open hold_ms, close; the interval it was open. */
static void *holder(void *arg)
{
	(void)arg;
	for (;;) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		struct timespec nap = {.tv_sec = hold_ms / 1000, .tv_nsec = (hold_ms % 1000) * 1000000L};
		long long opened, closing;
		int i, fd, err = 0;

		pthread_mutex_lock(&lock);
		i = next_request < total ? next_request++ : -1;
		pthread_mutex_unlock(&lock);
		if (i < 0)
			return NULL;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			err = errno;
			close(fd);
			count(0, err);
			continue;
		}
		opened = mono_ns();
		nanosleep(&nap, NULL);
		closing = mono_ns();
		close(fd);
		pthread_mutex_lock(&lock);
		printf("%lld %lld\n", opened, closing);
		pthread_mutex_unlock(&lock);
		count(1, 0);
	}
}

static int report(void)
{
	printf("done %d %d%s%s\n", ok, failed, failed ? " " : "", failed ? errno_name(first_errno) : "");
	return failed ? 1 : 0;
}

static int run_threads(void *(*fn)(void *))
{
	pthread_t t[256];

	if (workers < 1 || workers > 256)
		return 2;
	for (int w = 0; w < workers; w++)
		pthread_create(&t[w], NULL, fn, (void *)(intptr_t)w);
	for (int w = 0; w < workers; w++)
		pthread_join(t[w], NULL);
	return report();
}

/* Children each make total/workers GETs; the parent sums their exit statuses. */
static int run_forks(void)
{
	int each = total / workers, bad = 0;

	for (int c = 0; c < workers; c++) {
		pid_t p = fork();

		if (p == 0) {
			int fails = 0;

			for (int i = 0; i < each; i++)
				fails += one_get(100 + c, i) != 0;
			_exit(fails ? 1 : 0);
		}
	}
	for (int c = 0; c < workers; c++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	}
	ok = (workers - bad) * each;
	failed = bad * each;
	first_errno = bad ? EPROTO : 0;
	return report();
}

static int run_udp(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < 2 * total; i++) {
		char buf[32];
		int len = snprintf(buf, sizeof(buf), "datagram %d", i);
		ssize_t n;

		if (i < total) {
			n = sendto(fd, buf, (size_t)len, 0, (struct sockaddr *)&a, sizeof(a));
		} else {
			struct iovec iov = {.iov_base = buf, .iov_len = (size_t)len};
			struct msghdr m = {.msg_name = &a, .msg_namelen = sizeof(a), .msg_iov = &iov, .msg_iovlen = 1};

			n = sendmsg(fd, &m, 0);
		}
		count(n == len, errno);
	}
	close(fd);
	return report();
}

static int run_odd(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct sockaddr_un u = {.sun_family = AF_UNIX};
	int fd, bad = 0, r, e;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* An address the process cannot read: the kernel's EFAULT. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	r = connect(fd, (struct sockaddr *)(uintptr_t)8, sizeof(a));
	e = errno;
	printf("unreadable: %d %s\n", r, errno_name(e));
	bad += !(r == -1 && e == EFAULT);
	close(fd);
	/* Too short for its family: the kernel's EINVAL. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	r = connect(fd, (struct sockaddr *)&a, 4);
	e = errno;
	printf("short: %d %s\n", r, errno_name(e));
	bad += !(r == -1 && e == EINVAL);
	close(fd);
	/* A Unix socket that is not there: the kernel's ENOENT. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(u.sun_path, sizeof(u.sun_path), "/nonexistent/sluice-%d", (int)getpid());
	r = connect(fd, (struct sockaddr *)&u, sizeof(u));
	e = errno;
	printf("unix: %d %s\n", r, errno_name(e));
	bad += !(r == -1 && e == ENOENT);
	close(fd);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	port = atoi(argv[2]);
	total = argc > 3 ? atoi(argv[3]) : 0;
	workers = argc > 4 ? atoi(argv[4]) : 1;
	hold_ms = argc > 5 ? atoi(argv[5]) : 0;
	if (strcmp(argv[1], "http") == 0)
		return run_threads(worker);
	if (strcmp(argv[1], "hold") == 0)
		return run_threads(holder);
	if (strcmp(argv[1], "fork") == 0)
		return workers > 0 ? run_forks() : 2;
	if (strcmp(argv[1], "udp") == 0)
		return run_udp();
	if (strcmp(argv[1], "odd") == 0)
		return run_odd();
	return 2;
}
