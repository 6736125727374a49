/* say.c: held and refused calls told to `sluice run` - only past a second's hold,
 * once per section per SL_SAY_EVERY_NS, every refusal, errno kept, nothing when
 * off or when nobody listens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/common.h"
#include "sluice/say.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int listener(const char *name)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	memcpy(a.sun_path + 1, name, n);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)),
	                 0);
	return fd;
}

/* The next word heard, or "" when none is waiting. */
static const char *heard(int fd)
{
	static char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void test_held_refused(void **state)
{
	char name[64], want[64];
	int fd;
	int64_t now = 10 * SL_NS_PER_S;

	(void)state;
	snprintf(name, sizeof(name), "sluice-test-say-%d", (int)getpid());
	fd = listener(name);
	assert_int_equal(sl_say_setup(name), 0);
	assert_true(sl_say_on);

	sl_say_held(3, SL_SAY_HELD_NS - 1, now); /* under a second: not said */
	assert_string_equal(heard(fd), "");
	sl_say_held(3, 3200 * SL_NS_PER_MS, now);
	snprintf(want, sizeof(want), "H 3 3200 %d\n", (int)getpid());
	assert_string_equal(heard(fd), want);
	sl_say_held(3, 5 * SL_NS_PER_S, now + SL_SAY_EVERY_NS - 1); /* too soon for section 3 */
	assert_string_equal(heard(fd), "");
	sl_say_held(4, 2 * SL_NS_PER_S, now); /* another section speaks for itself */
	snprintf(want, sizeof(want), "H 4 2000 %d\n", (int)getpid());
	assert_string_equal(heard(fd), want);
	sl_say_held(3, 5 * SL_NS_PER_S, now + SL_SAY_EVERY_NS);
	snprintf(want, sizeof(want), "H 3 5000 %d\n", (int)getpid());
	assert_string_equal(heard(fd), want);

	/* Every refusal, and the host program's errno untouched. */
	errno = EAGAIN;
	sl_say_refused(3, "the wait would exceed max_wait", now);
	assert_int_equal(errno, EAGAIN);
	assert_string_equal(heard(fd), "R 3 1 the wait would exceed max_wait\n");
	sl_say_refused(-1, "fallback = closed", now);
	assert_string_equal(heard(fd), "R -1 1 fallback = closed\n");

	/* Nobody listening: nothing fails, errno kept. */
	close(fd);
	errno = EINTR;
	sl_say_refused(3, "x", now);
	assert_int_equal(errno, EINTR);

	/* Off: nothing is sent. */
	fd = listener(name);
	assert_int_equal(sl_say_setup(NULL), 0);
	assert_false(sl_say_on);
	sl_say_refused(3, "x", now);
	sl_say_held(9, 9 * SL_NS_PER_S, now);
	assert_string_equal(heard(fd), "");
	close(fd);
}

static void test_bad_names(void **state)
{
	char long_name[SL_SAY_NAME_MAX + 2];

	(void)state;
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_int_equal(sl_say_setup(long_name), -EINVAL);
	assert_false(sl_say_on);
	assert_int_equal(sl_say_setup(""), 0);
	assert_false(sl_say_on);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_held_refused),
		cmocka_unit_test(test_bad_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
