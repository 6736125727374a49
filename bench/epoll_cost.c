/*
 * epoll_cost PORT N CALLS: open N TCP connections to 127.0.0.1:PORT and keep them,
 * then time CALLS calls of epoll_wait(timeout 0) on a set holding one idle eventfd.
 * Prints nanoseconds per call.  Run under the shim with a section metering
 * requests to PORT, each connection keeps a hold record for its life: this is what
 * epoll_wait pays for the records a process holds.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct epoll_event ev = {.events = EPOLLIN}, out;
	int n, calls, ep, efd;
	long long start;

	if (argc != 4) {
		fprintf(stderr, "usage: epoll_cost PORT N CALLS\n");
		return 2;
	}
	sin.sin_port = htons((unsigned short)atoi(argv[1]));
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	n = atoi(argv[2]);
	calls = atoi(argv[3]);
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
			perror("epoll_cost: connect");
			return 1;
		}
	}
	ep = epoll_create1(0);
	efd = eventfd(0, 0);
	if (ep < 0 || efd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) != 0) {
		perror("epoll_cost: epoll");
		return 1;
	}
	start = now_ns();
	for (int i = 0; i < calls; i++)
		epoll_wait(ep, &out, 1, 0);
	printf("%.0f\n", (double)(now_ns() - start) / calls);
	return 0;
}
