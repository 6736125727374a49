/*
 * upload HOST PORT TOTAL CHUNK MODE: send TOTAL bytes to HOST:PORT and print
 * "BYTES SECONDS CPU_SECONDS START_NS END_NS" (wall time from the first write to
 * the last one done, the user+system CPU the process used, and CLOCK_MONOTONIC at
 * both ends, so runs in parallel can be added up).  MODE:
 *   block   blocking writes of CHUNK bytes
 *   single  one blocking write of all TOTAL bytes
 *   epoll   a non-blocking socket written in CHUNK pieces whenever epoll says it
 *           is writable
 * For make bench: the same uploads with no shaper, under sluice and under trickle.
 */
#include "sluice/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	size_t total, chunk, done = 0;
	char *buf;
	int fd;
	int64_t start;

	if (argc != 6) {
		fprintf(stderr, "usage: upload HOST PORT TOTAL CHUNK block|single|epoll\n");
		return 2;
	}
	total = strtoull(argv[3], NULL, 10);
	chunk = strtoull(argv[4], NULL, 10);
	sin.sin_port = htons((uint16_t)atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &sin.sin_addr) != 1 || !chunk || !(buf = calloc(1, total)))
		return 2;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		perror("connect");
		return 1;
	}
	start = sl_clock_mono_ns();
	if (strcmp(argv[5], "epoll") == 0) {
		int ep = epoll_create1(0);
		struct epoll_event ev = {.events = EPOLLOUT}, out;

		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		while (done < total) {
			ssize_t w = write(fd, buf + done, total - done < chunk ? total - done : chunk);

			if (w > 0) {
				done += (size_t)w;
			} else if (w < 0 && errno == EAGAIN) {
				if (epoll_wait(ep, &out, 1, 5000) < 0 && errno != EINTR)
					return 1;
			} else if (w < 0 && errno != EINTR) {
				perror("write");
				return 1;
			}
		}
	} else {
		size_t step = strcmp(argv[5], "single") == 0 ? total : chunk;

		while (done < total) {
			ssize_t w = write(fd, buf + done, total - done < step ? total - done : step);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				perror("write");
				return 1;
			}
			done += (size_t)w;
		}
	}
	{
		int64_t end = sl_clock_mono_ns();

		printf("%zu %.6f %.6f %lld %lld\n", done, (double)(end - start) / 1e9, cpu_seconds(),
		       (long long)start, (long long)end);
	}
	close(fd);
	return 0;
}
