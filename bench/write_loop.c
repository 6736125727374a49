/*
 * write_loop COUNT: write 64 bytes into one end of a TCP loopback connection and
 * read them from the other, COUNT times; print the mean nanoseconds per round.
 * Under the shim the written socket is an unmatched inet socket, so this is the
 * cost every send of every shaped program pays: one fd-table look-up.
 */
#include "sluice/clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	long count = argc > 1 ? atol(argv[1]) : 100000;
	char buf[64] = {0};
	int lfd, a, b;
	int64_t start;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(lfd, 1) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sin, &len) != 0)
		return 1;
	a = socket(AF_INET, SOCK_STREAM, 0);
	if (a < 0 || connect(a, (struct sockaddr *)&sin, sizeof(sin)) != 0 || (b = accept(lfd, NULL, NULL)) < 0)
		return 1;
	start = sl_clock_mono_ns();
	for (long i = 0; i < count; i++) {
		if (write(a, buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
		    read(b, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			return 1;
	}
	printf("%.0f\n", (double)(sl_clock_mono_ns() - start) / (double)(count > 0 ? count : 1));
	return 0;
}
