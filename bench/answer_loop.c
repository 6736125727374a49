/*
 * answer_loop COUNT: the far end of a TCP loopback connection writes a 64-byte
 * HTTP/1.1 response (keep-alive, Content-Length framed) and the connecting end
 * reads it, COUNT times; print the mean nanoseconds per round.  Under the shim
 * with a section that matches 127.0.0.1 (bench/run.sh, item 15) the connecting
 * socket is a shaped connection whose answers are read for signals: this is what
 * reading one costs, against signals = off and no shim.
 */
#include "sluice/clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 19\r\n\r\n"
	                             "0123456789abcdefghi"; /* 64 bytes in all */
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	long count = argc > 1 ? atol(argv[1]) : 100000;
	char buf[sizeof(answer)];
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
		size_t got = 0;

		if (write(b, answer, sizeof(answer) - 1) != (ssize_t)(sizeof(answer) - 1))
			return 1;
		while (got < sizeof(answer) - 1) {
			ssize_t r = read(a, buf + got, sizeof(answer) - 1 - got);

			if (r <= 0)
				return 1;
			got += (size_t)r;
		}
	}
	if (memcmp(buf, answer, sizeof(answer) - 1) != 0)
		return 1;
	printf("%.0f\n", (double)(sl_clock_mono_ns() - start) / (double)(count > 0 ? count : 1));
	return 0;
}
