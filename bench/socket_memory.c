/*
 * socket_memory PORT N follow|wait: what N sockets cost this process's memory.
 *   follow: N connections to 127.0.0.1:PORT, each sending one HTTP/1.1 request
 *           and reading its answer, then kept open (under the shim: followed,
 *           their answers read);
 *   wait:   N non-blocking connects at once (under a slow rate: all but the
 *           first deferred, waiting for their slots).
 * Prints "KB_BEFORE KB_AFTER": VmRSS before the first socket and with all N.
 * Run with and without the shim; the difference over N is what the shim keeps
 * per socket (the kernel's own socket memory is not in RSS).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* One request, its whole answer read (Content-Length framed). */
static int ask(int fd, int i)
{
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "GET /m%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", i);
	size_t got = 0;
	long want = -1;

	if (write(fd, buf, (size_t)n) != n)
		return -1;
	for (;;) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
		char *end, *cl;

		if (r <= 0)
			return -1;
		got += (size_t)r;
		buf[got] = '\0';
		if (!(end = strstr(buf, "\r\n\r\n")))
			continue;
		if (want < 0)
			want = (cl = strcasestr(buf, "Content-Length:")) ? atol(cl + 15) : 0;
		if ((long)(got - (size_t)(end + 4 - buf)) >= want)
			return 0;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	long before, after;
	int n, wait;

	if (argc != 4 || (n = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: socket_memory PORT N follow|wait\n");
		return 2;
	}
	wait = strcmp(argv[3], "wait") == 0;
	sa.sin_port = htons((uint16_t)atoi(argv[1]));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	before = rss_kb();
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | (wait ? SOCK_NONBLOCK : 0), 0);

		if (fd < 0 || (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS)) {
			perror("socket_memory: connect");
			return 1;
		}
		if (!wait && ask(fd, i) != 0) {
			fprintf(stderr, "socket_memory: request %d failed\n", i);
			return 1;
		}
	}
	after = rss_kb();
	printf("%ld %ld\n", before, after);
	return 0;
}
