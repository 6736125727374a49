/* connect(): a matched stream connection waits for its slot before it is made. */
#include "shim.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

static int is_stream(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

/* Returns 0 to let the connect go, or -errno to fail it with. */
static int decide(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sl_dest d;
	struct sl_match m;
	char name[SL_HOST_MAX];

	if (sl_dest_from_sockaddr(&d, addr, len) != 0)
		return 0; /* other families, short or NULL addresses: the kernel's business */
	if (sl_hold_match(&d, name, sizeof(name), &m) == 0)
		return 0;
	if (!is_stream(fd))
		return 0; /* datagram meters come with the send paths */
	return sl_hold_wait(&d, &m, "connect", ECONNREFUSED);
}

SL_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int (*real)(int, const struct sockaddr *, socklen_t) = SL_REAL(connect, connect);
	int rc;

	if (sl_shim_active() && (rc = decide(fd, addr, len)) < 0) {
		errno = -rc;
		return -1;
	}
	if (sl_unlikely(!real))
		return (int)syscall(SYS_connect, fd, addr, len);
	return real(fd, addr, len);
}
