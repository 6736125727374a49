/*
 * sendto_loop COUNT: send COUNT 64-byte UDP datagrams, each with its address, to a
 * socket of this process on 127.0.0.1 and read each back; print the mean
 * nanoseconds per round.  Under the shim with a datagram section for some other
 * destination, this is what every unmatched datagram pays: matching its address
 * against the compiled patterns (no system call, lock or allocation).
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
	int rx, tx;
	int64_t start;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	tx = socket(AF_INET, SOCK_DGRAM, 0);
	if (rx < 0 || tx < 0 || bind(rx, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    getsockname(rx, (struct sockaddr *)&sin, &len) != 0)
		return 1;
	start = sl_clock_mono_ns();
	for (long i = 0; i < count; i++) {
		if (sendto(tx, buf, sizeof(buf), 0, (struct sockaddr *)&sin, sizeof(sin)) != (ssize_t)sizeof(buf) ||
		    recv(rx, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			return 1;
	}
	printf("%.0f\n", (double)(sl_clock_mono_ns() - start) / (double)(count > 0 ? count : 1));
	return 0;
}
