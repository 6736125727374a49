/*
 * connect_loop ADDR PORT COUNT [refused]: open a TCP connection to ADDR:PORT and
 * close it, COUNT times, then print the mean nanoseconds per connect+close.  With
 * "refused", nothing listens there and a refused connect counts as done: the
 * kernel's part is then a few microseconds, so the shim's own cost shows.  Used by
 * the benchmarks (with and without the shim) and by the test that counts system
 * calls.
 */
#include "sluice/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	long count;
	struct linger reset = {.l_onoff = 1, .l_linger = 0};
	int64_t start;

	int refused = argc == 5 && strcmp(argv[4], "refused") == 0;

	if (argc != 4 && !refused) {
		fprintf(stderr, "usage: connect_loop ADDR PORT COUNT [refused]\n");
		return 2;
	}
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, argv[1], &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		((struct sockaddr_in *)&ss)->sin_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)atoi(argv[2]));
		len = sizeof(struct sockaddr_in);
	} else if (inet_pton(AF_INET6, argv[1], &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)atoi(argv[2]));
		len = sizeof(struct sockaddr_in6);
	} else {
		fprintf(stderr, "connect_loop: bad address %s\n", argv[1]);
		return 2;
	}
	count = atol(argv[3]);
	start = sl_clock_mono_ns();
	for (long i = 0; i < count; i++) {
		int fd = socket(ss.ss_family, SOCK_STREAM, 0);

		if (fd < 0 || (connect(fd, (struct sockaddr *)&ss, len) != 0 &&
		               !(refused && errno == ECONNREFUSED))) {
			perror("connect_loop");
			return 1;
		}
		/* Reset rather than linger, so a long loop does not run out of ports to
		 * connections sitting in TIME_WAIT. */
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
		close(fd);
	}
	printf("%.0f\n", (double)(sl_clock_mono_ns() - start) / (double)(count > 0 ? count : 1));
	return 0;
}
