/*
 * raw_syscalls.c - a client that reaches the network only through libc's
 * syscall(), as libuv does for sendmmsg (t_syscall.sh).
 *
 *   raw_syscalls connect PORT N    N TCP connections to 127.0.0.1:PORT, each made
 *                                  with syscall(SYS_connect), a request written
 *                                  with syscall(SYS_write), closed with SYS_close
 *   raw_syscalls sendmmsg PORT N   N datagrams to 127.0.0.1:PORT over a socket
 *                                  connected with syscall(SYS_connect): one
 *                                  syscall(SYS_sendmmsg) of two, then one each
 *   raw_syscalls others            numbers the shim does not route still reach
 *                                  the kernel with all their arguments
 * Exits 0 when every call did what the kernel says it should.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int die(const char *what)
{
	fprintf(stderr, "raw_syscalls: %s: %s\n", what, strerror(errno));
	return 1;
}

static struct sockaddr_in to(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sa;
}

static int connections(int port, int n)
{
	static const char req[] = "GET /raw HTTP/1.0\r\n\r\n";
	struct sockaddr_in sa = to(port);

	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			return die("socket");
		if (syscall(SYS_connect, fd, &sa, sizeof sa) != 0)
			return die("syscall(SYS_connect)");
		if (syscall(SYS_write, fd, req, sizeof req - 1) != (long)sizeof req - 1)
			return die("syscall(SYS_write)");
		char buf[256];
		while (syscall(SYS_read, fd, buf, sizeof buf) > 0)
			;
		if (syscall(SYS_close, fd) != 0)
			return die("syscall(SYS_close)");
	}
	return 0;
}

static int datagrams(int port, int n)
{
	struct sockaddr_in sa = to(port);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	char text[2][16];
	struct iovec iov[2];
	struct mmsghdr vec[2];

	if (fd < 0)
		return die("socket");
	if (syscall(SYS_connect, fd, &sa, sizeof sa) != 0)
		return die("syscall(SYS_connect) of a datagram socket");
	for (int sent = 0; sent < n;) {
		int k = sent == 0 && n >= 2 ? 2 : 1;

		memset(vec, 0, sizeof vec);
		for (int j = 0; j < k; j++) {
			int len = snprintf(text[j], sizeof text[j], "dgram%d", sent + j);

			iov[j] = (struct iovec){text[j], (size_t)len};
			vec[j].msg_hdr.msg_iov = &iov[j];
			vec[j].msg_hdr.msg_iovlen = 1;
		}
		long r = syscall(SYS_sendmmsg, fd, vec, k, 0);
		if (r < 1)
			return die("syscall(SYS_sendmmsg)");
		sent += (int)r;
	}
	return syscall(SYS_close, fd) == 0 ? 0 : die("syscall(SYS_close)");
}

static int others(void)
{
	uint32_t word = 0;

	if (syscall(SYS_getpid) != getpid())
		return die("syscall(SYS_getpid)");
	/* six arguments, none of them routed: a wake with no waiter wakes none */
	if (syscall(SYS_futex, &word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0) != 0)
		return die("syscall(SYS_futex)");
	/* an error comes back as -1 and errno, as from libc's own */
	errno = 0;
	if (syscall(SYS_close, -1) != -1 || errno != EBADF)
		return die("syscall(SYS_close, -1)");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "connect") == 0)
		return connections(atoi(argv[2]), atoi(argv[3]));
	if (argc == 4 && strcmp(argv[1], "sendmmsg") == 0)
		return datagrams(atoi(argv[2]), atoi(argv[3]));
	if (argc == 2 && strcmp(argv[1], "others") == 0)
		return others();
	fprintf(stderr, "usage: raw_syscalls connect|sendmmsg PORT N | others\n");
	return 2;
}
