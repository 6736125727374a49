/*
 * hold_open HOST PORT: one connection, held open until the process is killed -
 * a process holding a concurrency place, for tests (t_many_holders) that need
 * thousands of them without thousands of interpreters.  Exits 1 if the connect
 * fails.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd;

	if (argc != 3 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "usage: hold_open HOST PORT\n");
		return 2;
	}
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("hold_open: connect");
		return 1;
	}
	for (;;)
		pause();
}
