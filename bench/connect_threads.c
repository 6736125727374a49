/*
 * connect_threads ADDR PORT THREADS COUNT: THREADS threads of one process each open
 * a TCP connection to ADDR:PORT and close it, COUNT times, as fast as they may.
 * A blocking, threaded client for make bench's delivered table: the threads share
 * their process's place in the queue as separate processes do.  Prints the
 * connections made.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in addr;
static long count;
static long made;
static pthread_mutex_t made_lock = PTHREAD_MUTEX_INITIALIZER;

static void *loop(void *arg)
{
	struct linger reset = {.l_onoff = 1, .l_linger = 0};
	long mine = 0;

	(void)arg;
	for (long i = 0; i < count; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			break;
		if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
			mine++;
		/* Reset rather than linger: a long run must not run out of ports. */
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
		close(fd);
	}
	pthread_mutex_lock(&made_lock);
	made += mine;
	pthread_mutex_unlock(&made_lock);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t tid[256];
	int threads;

	if (argc != 5 || (threads = atoi(argv[3])) < 1 || threads > 256) {
		fprintf(stderr, "usage: connect_threads ADDR PORT THREADS(1-256) COUNT\n");
		return 2;
	}
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
		fprintf(stderr, "connect_threads: bad address %s\n", argv[1]);
		return 2;
	}
	count = atol(argv[4]);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, loop, NULL) != 0) {
			threads = i;
			break;
		}
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	printf("%ld\n", made);
	return made > 0 ? 0 : 1;
}
