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

/* The next word heard that is not a sum ("S ...", test_sums), or "". */
static const char *heard_word(int fd)
{
	const char *w;

	while ((w = heard(fd))[0] == 'S')
		;
	return w;
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
	assert_string_equal(heard_word(fd), "");
	sl_say_held(3, 3200 * SL_NS_PER_MS, now);
	snprintf(want, sizeof(want), "H 3 3200 %d\n", (int)getpid());
	assert_string_equal(heard_word(fd), want);
	sl_say_held(3, 5 * SL_NS_PER_S, now + SL_SAY_EVERY_NS - 1); /* too soon for section 3 */
	assert_string_equal(heard_word(fd), "");
	sl_say_held(4, 2 * SL_NS_PER_S, now); /* another section speaks for itself */
	snprintf(want, sizeof(want), "H 4 2000 %d\n", (int)getpid());
	assert_string_equal(heard_word(fd), want);
	sl_say_held(3, 5 * SL_NS_PER_S, now + SL_SAY_EVERY_NS);
	snprintf(want, sizeof(want), "H 3 5000 %d\n", (int)getpid());
	assert_string_equal(heard_word(fd), want);

	/* Every refusal, and the host program's errno untouched. */
	errno = EAGAIN;
	sl_say_refused(3, "the wait would exceed max_wait", now);
	assert_int_equal(errno, EAGAIN);
	assert_string_equal(heard_word(fd), "R 3 1 the wait would exceed max_wait\n");
	sl_say_refused(-1, "fallback = closed", now);
	assert_string_equal(heard_word(fd), "R -1 1 fallback = closed\n");

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
	assert_string_equal(heard_word(fd), "");
	close(fd);
}

/* The next word heard is a sum starting with `want` ("S SECTION CALLS WAIT MAX
 * PID "): its BORN, the process image's mark. */
static unsigned long long sum_heard(int fd, const char *want)
{
	const char *w = heard(fd);
	unsigned long long born = 0;

	if (strncmp(w, want, strlen(want)) != 0 || sscanf(w + strlen(want), "%llu", &born) != 1)
		fail_msg("heard \"%s\", want \"%sBORN\"", w, want);
	return born;
}

/* Every hold is summed, however short, and the sums are sent whole: at the
 * first hold, then at most every SL_SAY_EVERY_NS, and by sl_say_sums (at exit,
 * before an exec); SLUICE_NOTICE moves the live notice's threshold, not the
 * sums; a fork's child starts from nothing, under a mark of its own. */
static void test_sums(void **state)
{
	char name[64], want[96];
	int fd;
	int64_t now = 100 * SL_NS_PER_S;
	unsigned long long born;

	(void)state;
	snprintf(name, sizeof(name), "sluice-test-sums-%d", (int)getpid());
	fd = listener(name);
	assert_int_equal(sl_say_setup(name), 0);
	sl_say_threshold(NULL);
	sl_say_held(7, 250 * SL_NS_PER_MS, now); /* short: summed and sent, not said */
	snprintf(want, sizeof(want), "S 7 1 250 250 %d ", (int)getpid());
	born = sum_heard(fd, want);
	assert_string_equal(heard(fd), "");
	sl_say_held(7, 100 * SL_NS_PER_MS, now + SL_NS_PER_S); /* within 2 s: kept */
	sl_say_held(7, 400 * SL_NS_PER_MS, now + SL_NS_PER_S);
	assert_string_equal(heard(fd), "");
	sl_say_sums(); /* at exit: what was kept */
	snprintf(want, sizeof(want), "S 7 3 750 400 %d ", (int)getpid());
	assert_true(sum_heard(fd, want) == born);
	sl_say_sums(); /* nothing new: nothing sent */
	assert_string_equal(heard(fd), "");

	/* SLUICE_NOTICE=100ms: a 250 ms hold is said live too. */
	sl_say_threshold("100ms");
	sl_say_held(8, 250 * SL_NS_PER_MS, now);
	snprintf(want, sizeof(want), "S 8 1 250 250 %d ", (int)getpid());
	sum_heard(fd, want);
	snprintf(want, sizeof(want), "H 8 250 %d\n", (int)getpid());
	assert_string_equal(heard(fd), want);
	sl_say_threshold("bogus"); /* back to a second */
	sl_say_held(9, 500 * SL_NS_PER_MS, now);
	snprintf(want, sizeof(want), "S 9 1 500 500 %d ", (int)getpid());
	sum_heard(fd, want);
	assert_string_equal(heard(fd), "");

	/* A fork's child: its sums are its own, under another mark. */
	sl_say_after_fork();
	sl_say_held(7, 10 * SL_NS_PER_MS, now + 10 * SL_NS_PER_S);
	snprintf(want, sizeof(want), "S 7 1 10 10 %d ", (int)getpid());
	assert_true(sum_heard(fd, want) != born);
	sl_say_setup(NULL);
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
		cmocka_unit_test(test_sums),
		cmocka_unit_test(test_bad_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
