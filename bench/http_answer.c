/*
 * http_answer PORT_FILE SECONDS: an HTTP/1 server on 127.0.0.1 (a port of the
 * kernel's choosing, written to PORT_FILE) that answers every request with a
 * two-byte 200 and closes, for SECONDS, then exits.  bench/clients.sh drives event
 * loops at 1,000-5,000 connections a second against it: python's threaded
 * test server tops out near 1,200 a second on a two-core machine, so it, not
 * the client or the shim, set the figures there.  One epoll loop, no logging:
 * the destination's kernel stamps (syn_witness.py) are the witness.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

/* A request is whole at its blank line, looked for in each read alone: nothing
 * is kept between reads, so a request whose blank line is cut across two reads
 * is never answered.  The bench's clients write each request whole, in one
 * segment on loopback; this server is for them only. */
static void serve(int ep, int fd)
{
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0 && !memmem(buf, (size_t)n, "\r\n\r\n", 4))
		return;
	if (n > 0 && write(fd, answer, sizeof(answer) - 1) < 0)
		perror("http_answer: write");
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	struct epoll_event evs[256], ev = {.events = EPOLLIN};
	int one = 1, lfd, ep;
	time_t end;
	FILE *f;

	if (argc != 3) {
		fprintf(stderr, "usage: http_answer PORT_FILE SECONDS\n");
		return 2;
	}
	end = time(NULL) + atol(argv[2]);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ep = epoll_create1(0);
	if (lfd < 0 || ep < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(lfd, 4096) ||
	    getsockname(lfd, (struct sockaddr *)&sin, &len)) {
		perror("http_answer");
		return 1;
	}
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	/* The port file is written whole, then renamed, so a reader never sees half. */
	{
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
		if (!(f = fopen(tmp, "w")) || fprintf(f, "%d\n", ntohs(sin.sin_port)) < 0 || fclose(f) ||
		    rename(tmp, argv[1])) {
			perror("http_answer: port file");
			return 1;
		}
	}
	while (time(NULL) < end) {
		int n = epoll_wait(ep, evs, 256, 1000);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd, c;

			if (fd != lfd) {
				serve(ep, fd);
				continue;
			}
			while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
				ev.data.fd = c;
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
			}
		}
	}
	return 0;
}
