/* segsock.c: the client side of a segment's socket - the socket's path from a
 * config, one request and its reply (with a descriptor or not), a server that is
 * not there, dead, silent or speaking nonsense, and an attach that maps what is
 * handed over only when it is a segment and was granted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/clock.h"
#include "sluice/segsock.h"
#include "sluice/shm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char path[108];

/* One connection served by a thread: its request kept, `reply` sent (with fd when
 * >= 0), or nothing at all (silent: the connection kept open until `hold_ms`). */
struct server {
	int lfd;
	const char *reply;
	int fd;
	int hold_ms;
	char request[256];
	pthread_t thread;
};

static void *serve_one(void *arg)
{
	struct server *s = arg;
	int c = accept(s->lfd, NULL, NULL);
	ssize_t n;

	if (c < 0)
		return NULL;
	n = recv(c, s->request, sizeof(s->request) - 1, 0);
	s->request[n > 0 ? n : 0] = '\0';
	if (s->reply) {
		char cbuf[CMSG_SPACE(sizeof(int))] = {0};
		struct iovec iov = {.iov_base = (void *)s->reply, .iov_len = strlen(s->reply)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

		if (s->fd >= 0)
			sl_segsock_put_fd(&mh, cbuf, sizeof(cbuf), s->fd);
		sendmsg(c, &mh, MSG_NOSIGNAL);
	}
	if (s->hold_ms)
		usleep((useconds_t)s->hold_ms * 1000);
	close(c);
	return NULL;
}

static void serve(struct server *s, const char *reply, int fd, int hold_ms)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};

	unlink(path);
	memcpy(sun.sun_path, path, strlen(path));
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(s->lfd, 4), 0);
	s->reply = reply;
	s->fd = fd;
	s->hold_ms = hold_ms;
	assert_int_equal(pthread_create(&s->thread, NULL, serve_one, s), 0);
}

static void done(struct server *s)
{
	pthread_join(s->thread, NULL);
	close(s->lfd);
	unlink(path);
}

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/tmp/sluice-unit-segsock-%d.segment", (int)getpid());
	return 0;
}

static void test_path(void **state)
{
	struct sl_global g = {.control_socket = "/run/sluice/sluice.sock", .shm_name = "/sluice"};
	char out[108];

	(void)state;
	assert_int_equal(sl_segsock_path(&g, out, sizeof(out)), 0);
	assert_string_equal(out, "/run/sluice/sluice.segment");
	snprintf(g.shm_name, sizeof(g.shm_name), "/api-fleet");
	snprintf(g.control_socket, sizeof(g.control_socket), "ctl.sock");
	assert_int_equal(sl_segsock_path(&g, out, sizeof(out)), 0);
	assert_string_equal(out, "api-fleet.segment");
	snprintf(g.control_socket, sizeof(g.control_socket), "none");
	assert_int_equal(sl_segsock_path(&g, out, sizeof(out)), -ENOENT);
	/* A socket's path has 107 bytes at most: the name must fit beside it. */
	memset(g.control_socket, 'a', 106);
	g.control_socket[0] = '/';
	g.control_socket[96] = '/';
	g.control_socket[106] = '\0';
	assert_int_equal(sl_segsock_path(&g, out, sizeof(out)), -ENAMETOOLONG);
}

static void test_ask(void **state)
{
	struct sl_segsock_reply r;
	struct server s;
	char v[32];
	int64_t t0;
	int fd;

	(void)state;
	unlink(path);
	assert_int_equal(sl_segsock_ask(path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r), -ENOENT);
	/* A socket nobody listens on any more: a server that died. */
	{
		struct sockaddr_un sun = {.sun_family = AF_UNIX};

		memcpy(sun.sun_path, path, strlen(path));
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
		close(fd);
		assert_int_equal(sl_segsock_ask(path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r), -ECONNREFUSED);
	}
	serve(&s, "ok pid=12 id=00ab config=/a b\n", -1, 0);
	assert_int_equal(sl_segsock_ask(path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r), 0);
	done(&s);
	assert_string_equal(s.request, "info\n");
	assert_string_equal(r.line, "ok pid=12 id=00ab config=/a b");
	assert_int_equal(r.fd, -1);
	assert_int_equal(sl_segsock_value(r.line, "id", v, sizeof(v)), 0);
	assert_string_equal(v, "00ab");
	assert_int_equal(sl_segsock_value(r.line, "d", v, sizeof(v)), -ENOENT);
	/* Closed with no reply; silent past the deadline. */
	serve(&s, NULL, -1, 0);
	assert_int_equal(sl_segsock_ask(path, "info\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r), -EPROTO);
	done(&s);
	serve(&s, NULL, -1, 600);
	t0 = sl_clock_mono_ns();
	assert_int_equal(sl_segsock_ask(path, "info\n", -1, 100 * 1000000LL, &r), -ETIMEDOUT);
	assert_true(sl_clock_mono_ns() - t0 < 500 * 1000000LL);
	done(&s);
	/* A descriptor with the reply. */
	fd = dup(0);
	serve(&s, "ok\n", fd, 0);
	assert_int_equal(sl_segsock_ask(path, "get\n", -1, SL_SEGSOCK_TIMEOUT_NS, &r), 0);
	done(&s);
	close(fd);
	assert_true(r.fd >= 0);
	close(r.fd);
}

static void test_attach(void **state)
{
	struct sl_shm_dims dims = SL_SHM_DIMS_DEFAULT;
	struct sl_shm seg, a;
	struct server s;
	char why[128];

	(void)state;
	assert_int_equal(sl_shm_create(&seg, "unit", &dims), 0);
	sl_shm_publish(seg.hdr);
	serve(&s, "ok mode=rw token=5 nonce=7 id=1\n", seg.fd, 0);
	assert_int_equal(sl_segsock_attach(path, 1, SL_SEGSOCK_TIMEOUT_NS, &a, why, sizeof(why)), 0);
	done(&s);
	/* The asker says how it sees itself. */
	assert_true(strncmp(s.request, "attach rw ", 10) == 0);
	assert_int_equal(a.self, 5);
	assert_int_equal(a.fd, -1); /* the memfd closed once mapped */
	assert_true(a.ino == seg.ino);
	sl_shm_section(seg.hdr, 2)->state.tat_ns = 99;
	assert_int_equal(sl_shm_section(a.hdr, 2)->state.tat_ns, 99);
	sl_shm_detach(&a);
	/* Refused, with the server's words (no control characters kept). */
	serve(&s, "error: uid 7 may \x1b[31mnot\n", -1, 0);
	assert_int_equal(sl_segsock_attach(path, 1, SL_SEGSOCK_TIMEOUT_NS, &a, why, sizeof(why)), -EACCES);
	done(&s);
	assert_string_equal(why, "uid 7 may ?[31mnot");
	/* Granted only reading, when it asked to write. */
	serve(&s, "ok mode=ro id=1\n", seg.fd, 0);
	assert_int_equal(sl_segsock_attach(path, 1, SL_SEGSOCK_TIMEOUT_NS, &a, why, sizeof(why)), -EACCES);
	done(&s);
	/* No protocol at all, or an "ok" with no segment. */
	serve(&s, "\x01\x02 hello\n", seg.fd, 0);
	assert_int_equal(sl_segsock_attach(path, 1, SL_SEGSOCK_TIMEOUT_NS, &a, why, sizeof(why)), -EPROTO);
	done(&s);
	serve(&s, "ok mode=rw token=5\n", -1, 0);
	assert_int_equal(sl_segsock_attach(path, 1, SL_SEGSOCK_TIMEOUT_NS, &a, why, sizeof(why)), -EPROTO);
	done(&s);
	sl_shm_detach(&seg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_ask),
		cmocka_unit_test(test_attach),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
