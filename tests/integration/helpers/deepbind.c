/*
 * deepbind.c - a program that loads a library the ways plugin hosts do, for
 * t_deepbind.sh.  Built twice from this file: with -DDEEPBIND_LIB as the library
 * (db_fetch: N HTTP requests to 127.0.0.1:PORT, each on a connection of its own,
 * through libc's connect, write and close), else as the host:
 *
 *   deepbind deep LIBPATH PORT N   dlopen(LIBPATH, RTLD_NOW | RTLD_DEEPBIND) (PHP's way)
 *   deepbind bare PORT N           dlopen("libdbfetch.so", RTLD_NOW): found only
 *                                  through this program's RUNPATH ($ORIGIN/lib)
 *   deepbind deepbare PORT N       the same name, with RTLD_DEEPBIND
 *
 * Exits 0 when the library loaded and every request was answered.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef DEEPBIND_LIB
int db_fetch(int port, int n);

int db_fetch(int port, int n)
{
	static const char req[] = "GET /deepbind HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";

	for (int i = 0; i < n; i++) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
		char buf[512];
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
		    write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1) || read(fd, buf, sizeof(buf)) <= 0) {
			perror("db_fetch");
			return -1;
		}
		close(fd);
	}
	return 0;
}
#else
int main(int argc, char **argv)
{
	int (*fetch)(int, int);
	const char *lib = "libdbfetch.so";
	int mode = RTLD_NOW, a = 2;
	void *h;

	if (argc < 4) {
		fprintf(stderr, "usage: deepbind deep LIBPATH PORT N | bare PORT N | deepbare PORT N\n");
		return 2;
	}
	if (strcmp(argv[1], "deep") == 0) {
		if (argc < 5)
			return 2;
		lib = argv[2];
		mode |= RTLD_DEEPBIND;
		a = 3;
	} else if (strcmp(argv[1], "deepbare") == 0)
		mode |= RTLD_DEEPBIND;
	h = dlopen(lib, mode);
	if (!h) {
		fprintf(stderr, "deepbind: %s\n", dlerror());
		return 1;
	}
	fetch = (int (*)(int, int))dlsym(h, "db_fetch");
	if (!fetch)
		return 1;
	return fetch(atoi(argv[a]), atoi(argv[a + 1])) == 0 ? 0 : 1;
}
#endif
