/*
 * h2_frames COUNT: HTTP/2 frames both ways over a TCP loopback connection, in one
 * process: the connecting end writes the preface, SETTINGS and one request's
 * HEADERS, then COUNT 64-byte DATA frames, one write each, which the far end reads;
 * the far end answers SETTINGS, a response HEADERS (:status 200) and COUNT 64-byte
 * DATA frames, one write each, which the connecting end reads frame by frame.
 * Prints the mean nanoseconds per frame written and read.  Under the shim with
 * meter = requests and signals = on for 127.0.0.1 (bench/run.sh, item 19) every
 * frame the connecting end writes is followed for new streams and every frame it
 * reads goes through the answers' reader: callgrind's count of this program with
 * and without the shim, at two COUNTs, gives the instructions per frame.
 */
#include "sluice/clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAYLOAD 64

static int put(int fd, const void *buf, size_t n)
{
	return write(fd, buf, n) == (ssize_t)n ? 0 : -1;
}

static int take(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void head(uint8_t *h, uint32_t len, uint8_t type, uint8_t flags, uint32_t stream)
{
	h[0] = (uint8_t)(len >> 16);
	h[1] = (uint8_t)(len >> 8);
	h[2] = (uint8_t)len;
	h[3] = type;
	h[4] = flags;
	h[5] = (uint8_t)(stream >> 24);
	h[6] = (uint8_t)(stream >> 16);
	h[7] = (uint8_t)(stream >> 8);
	h[8] = (uint8_t)stream;
}

int main(int argc, char **argv)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	/* :method GET, :scheme http, :path /, :authority b */
	static const uint8_t request[] = {0x82, 0x86, 0x84, 0x41, 0x01, 'b'};
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	long count = argc > 1 ? atol(argv[1]) : 100000;
	uint8_t frame[9 + PAYLOAD], in[9 + PAYLOAD], hs[9 + sizeof(request)];
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
	head(frame, 0, 4, 0, 0); /* SETTINGS, empty */
	head(hs, sizeof(request), 1, 0x4, 1);
	memcpy(hs + 9, request, sizeof(request));
	if (put(a, preface, 24) || put(a, frame, 9) || put(a, hs, sizeof(hs)) || take(b, in, 24) ||
	    take(b, in, 9) || take(b, in, sizeof(hs)))
		return 1;
	memset(frame + 9, 'x', PAYLOAD);
	head(frame, PAYLOAD, 0, 0, 1);
	start = sl_clock_mono_ns();
	for (long i = 0; i < count; i++)
		if (put(a, frame, sizeof(frame)) || take(b, in, sizeof(frame)))
			return 1;
	{ /* the answer: SETTINGS, HEADERS :status 200, then the DATA frames */
		uint8_t answer[9 + 9 + 1];

		head(answer, 0, 4, 0, 0);
		head(answer + 9, 1, 1, 0x4, 1);
		answer[18] = 0x88;
		if (put(b, answer, sizeof(answer)) || take(a, answer, sizeof(answer)))
			return 1;
	}
	for (long i = 0; i < count; i++)
		if (put(b, frame, sizeof(frame)) || take(a, in, sizeof(frame)))
			return 1;
	printf("%.0f\n", (double)(sl_clock_mono_ns() - start) / (double)(2 * (count > 0 ? count : 1)));
	return 0;
}
