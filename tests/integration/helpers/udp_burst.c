/*
 * udp_burst PORT COUNT: connect a UDP socket to 127.0.0.1:PORT, send COUNT
 * datagrams on it with send() as fast as it may, and exit at once - a sender that
 * fires and forgets (t_resolver builds it static, so sluice run holds it through
 * seccomp and its datagrams through the relay).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in to = {.sin_family = AF_INET};
	int fd, count;

	if (argc != 3)
		return 2;
	to.sin_port = htons((unsigned short)atoi(argv[1]));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	count = atoi(argv[2]);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0) {
		perror("udp_burst: connect");
		return 1;
	}
	for (int i = 0; i < count && i < 1000; i++) {
		char msg[32];
		int n = snprintf(msg, sizeof(msg), "burst %d\n", i);

		if (send(fd, msg, (size_t)n, 0) != n) {
			perror("udp_burst: send");
			return 1;
		}
	}
	return 0;
}
