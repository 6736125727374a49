/* Config parsing: every good form of docs/config.md, and bad inputs with their messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice/calendar.h"
#include "sluice/config.h"
#include "sluice/config_keys.h"
#include "sluice/config_types.h"
#include "sluice/common.h"
#include "sluice/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sl_config *cfg;

/* A compiled section's patterns. */
#define PATS(s) sl_config_patterns(cfg, (s))

static int setup(void **state)
{
	(void)state;
	cfg = calloc(1, sizeof(*cfg));
	return cfg ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	sl_config_free(cfg);
	free(cfg);
	return 0;
}

static const struct sl_spec *section(const char *name)
{
	for (unsigned i = 0; i < cfg->nsections; i++)
		if (strcmp(cfg->sections[i].spec.name, name) == 0)
			return &cfg->sections[i].spec;
	fail_msg("no section [%s]", name);
	return NULL;
}

static void test_full_sample(void **state)
{
	const char *text =
		"; global settings\n"
		"[sluice]\n"
		"shm_name       = /sluice-test    ; POSIX shared-memory name\n"
		"control_socket = /tmp/sl.sock\n"
		"shm_mode       = 0640\n"
		"fallback       = closed\n"
		"log_level      = debug\n"
		"\n"
		"[github-spacing]\n"
		"match    = api.github.com\n"
		"rate     = 10/s\n"
		"burst    = 1\n"
		"tolerance = 1.5ms\n"
		"# hash comments too\n"
		"[tok]\n"
		"match = *.example.com:443, 203.0.113.0/24, [2001:db8::/32]:8000-8999\n"
		"rate = 3/5m\n"
		"strategy = token-bucket\n"
		"max_wait = forever\n"
		"mode = observe\n"
		"refuse = ETIMEDOUT\n"
		"[short]\n"
		"match = *\n"
		"rate = 1/250ms\n"
		"max_wait = 0\n";

	(void)state;
	assert_int_equal(sl_config_load_string(cfg, "t.ini", text), 0);
	assert_int_equal(cfg->nerrors, 0);
	assert_int_equal(cfg->nsections, 3);
	assert_string_equal(cfg->global.shm_name, "/sluice-test");
	assert_string_equal(cfg->global.control_socket, "/tmp/sl.sock");
	assert_int_equal(cfg->global.shm_mode, 0640);
	assert_int_equal(cfg->global.fallback, SL_FALLBACK_CLOSED);
	assert_int_equal(cfg->global.log_level, SL_LOG_DEBUG);

	const struct sl_spec *g = section("github-spacing");
	assert_int_equal(g->amount, 10);
	assert_int_equal(g->window_ns, SL_NS_PER_S);
	assert_int_equal(g->burst, 1);
	assert_int_equal(g->tolerance_us, 1500);
	assert_int_equal(g->max_wait_ns, 30 * SL_NS_PER_S);
	assert_int_equal(g->npatterns, 1);
	assert_int_equal(PATS(g)[0].kind, SL_PAT_NAME);
	assert_string_equal(PATS(g)[0].name, "api.github.com");

	const struct sl_spec *t = section("tok");
	assert_int_equal(t->strategy, SL_STRAT_TOKEN_BUCKET);
	assert_int_equal(t->burst, 3); /* token-bucket: burst defaults to AMOUNT */
	assert_int_equal(t->window_ns, 300 * SL_NS_PER_S);
	assert_true(t->max_wait_ns < 0);
	assert_int_equal(t->mode, SL_MODE_OBSERVE);
	assert_int_equal(t->refuse, ETIMEDOUT);
	assert_int_equal(t->npatterns, 3);
	assert_int_equal(PATS(t)[0].kind, SL_PAT_SUFFIX);
	assert_int_equal(PATS(t)[0].port_lo, 443);
	assert_int_equal(PATS(t)[1].kind, SL_PAT_V4);
	assert_int_equal(PATS(t)[1].prefix, 24);
	assert_int_equal(PATS(t)[2].kind, SL_PAT_V6);
	assert_int_equal(PATS(t)[2].prefix, 32);
	assert_int_equal(PATS(t)[2].port_lo, 8000);
	assert_int_equal(PATS(t)[2].port_hi, 8999);

	const struct sl_spec *s = section("short");
	assert_int_equal(s->window_ns, 250 * SL_NS_PER_MS);
	assert_int_equal(s->max_wait_ns, 0);
	assert_int_equal(PATS(s)[0].kind, SL_PAT_ANY);
}

static void test_defaults_and_continuation(void **state)
{
	const char *text = "[a]\n"
	                   "match = one.example\n"
	                   "  two.example, 10.0.0.1\n"
	                   "\t[::1]:443\n"
	                   "rate = 600/m\n";

	(void)state;
	assert_int_equal(sl_config_load_string(cfg, "c.ini", text), 0);
	assert_string_equal(cfg->global.shm_name, "/sluice");
	assert_string_equal(cfg->global.control_socket, "/run/sluice/sluice.sock");
	assert_int_equal(cfg->global.fallback, SL_FALLBACK_LOCAL);
	assert_int_equal(cfg->global.shm_mode, 0660);
	const struct sl_spec *a = section("a");
	assert_int_equal(a->npatterns, 4);
	assert_int_equal(a->amount, 600);
	assert_int_equal(a->window_ns, 60 * SL_NS_PER_S);
	assert_int_equal(a->meter, SL_METER_CONNECTIONS);
	assert_int_equal(a->strategy, SL_STRAT_LEAKY_BUCKET);
	assert_int_equal(a->mode, SL_MODE_ENFORCE);
	assert_int_equal(a->refuse, 0);
}

static void test_rate_forms(void **state)
{
	static const struct {
		const char *rate;
		uint64_t amount;
		int64_t window;
		unsigned calendar;
		const char *back; /* as `sluice check` writes it */
	} forms[] = {
		{"10/s", 10, SL_NS_PER_S, 0, "10/s"},           {"600/m", 600, 60 * SL_NS_PER_S, 0, "600/m"},
		{"5000/h", 5000, 3600 * SL_NS_PER_S, 0, "5000/h"}, {"10000/d", 10000, 86400 * SL_NS_PER_S, 0, "10000/d"},
		{"3/5m", 3, 300 * SL_NS_PER_S, 0, "3/5m"},      {"1/250ms", 1, 250 * SL_NS_PER_MS, 0, "1/250ms"},
		{"7/1.5s", 7, 1500 * SL_NS_PER_MS, 0, "7/1500ms"},
		/* calendar windows: the unit's nominal length, and the calendar */
		{"5000/mo", 5000, 30 * 86400 * SL_NS_PER_S, SL_CAL_MONTH, "5000/mo"},
		{"100/w", 100, 7 * 86400 * SL_NS_PER_S, SL_CAL_WEEK, "100/w"},
		{"1000000/y", 1000000, 365 * 86400 * SL_NS_PER_S, SL_CAL_YEAR, "1000000/y"},
		{"3/1mo", 3, 30 * 86400 * SL_NS_PER_S, SL_CAL_MONTH, "3/mo"},
	};
	char text[256], err[200];
	uint64_t amount;
	int64_t window;
	unsigned calendar;

	(void)state;
	for (size_t i = 0; i < SL_ARRAY_LEN(forms); i++) {
		snprintf(text, sizeof(text), "[r]\nmatch = *\nrate = %s\nstrategy = fixed-window\n", forms[i].rate);
		assert_int_equal(sl_config_load_string(cfg, "r.ini", text), 0);
		assert_int_equal(section("r")->amount, forms[i].amount);
		assert_int_equal(section("r")->window_ns, forms[i].window);
		assert_int_equal(section("r")->calendar, forms[i].calendar);
		sl_format_rate(section("r")->amount, section("r")->window_ns, section("r")->calendar, 0, text,
		               sizeof(text));
		assert_string_equal(text, forms[i].back);
	}
	/* More than one calendar unit is no calendar window: refused, saying so. */
	assert_int_equal(sl_parse_rate("3/2mo", 0, &amount, &window, &calendar, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "one week, month or year"));
	assert_int_equal(sl_parse_rate("3/10w", 0, &amount, &window, &calendar, err, sizeof(err)), -EINVAL);
	assert_int_equal(sl_parse_rate("3/mon", 0, &amount, &window, &calendar, err, sizeof(err)), -EINVAL);
	/* A fleet does not share calendar windows (yet). */
	assert_int_equal(sl_config_load_string(cfg, "r.ini", "[sluice]\nredis = 127.0.0.1:6379\n"
	                                                      "[r]\nmatch = *\nrate = 5/mo\nscope = fleet\n"),
	                 -EINVAL);
	assert_true(cfg->nerrors >= 1 && strstr(cfg->errors[0], "calendar window"));
}

static int has_error(const char *want)
{
	for (unsigned i = 0; i < SL_MIN(cfg->nerrors, (unsigned)SL_CONFIG_MAX_ERRORS); i++)
		if (strstr(cfg->errors[i], want))
			return 1;
	return 0;
}

/* Each bad input must fail with status -EINVAL, name the right line, and say why. */
/* A config with no limit sections loads (the installed default is one): it
 * shapes nothing, and [sluice] is still read. */
static void test_no_sections(void **state)
{
	(void)state;
	assert_int_equal(sl_config_load_string(cfg, "t.ini", ""), 0);
	assert_int_equal(cfg->nsections, 0);
	assert_int_equal(sl_config_load_string(cfg, "t.ini", "[sluice]\nshm_mode = 0640\n;[a]\n;match = *\n"), 0);
	assert_int_equal(cfg->nsections, 0);
	assert_int_equal(cfg->global.shm_mode, 0640);
}

/* Redis made highly available: Sentinels with the master's name, or a Cluster's
 * nodes; one way of finding Redis at a time, each list of HOST:PORT. */
static void test_redis_ha(void **state)
{
	static const struct {
		const char *text, *expect;
	} bad[] = {
		{"redis_sentinels = 127.0.0.1:26379\n", "want redis_master too"},
		{"redis_master = mymaster\n", "only with redis_sentinels"},
		{"redis = 127.0.0.1:6379\nredis_cluster = 127.0.0.1:7000\n", "give one of them, not 2"},
		{"redis_cluster = 127.0.0.1\n", "'127.0.0.1': want HOST:PORT"},
		{"redis_cluster = /run/redis.sock\n", "want HOST:PORT"},
		{"redis_sentinels = 127.0.0.1:1 x:0\nredis_master = m\n", "'x:0'"},
		{"redis_sentinels = ,\nredis_master = m\n", "want HOST:PORT HOST:PORT"},
		{"redis_sentinels = 127.0.0.1:1\nredis_master = bad name\n", "bad redis_master"},
		{"redis_sentinels = 127.0.0.1:1\nredis_master = m\nredis_sentinel_auth = s.pass\n", "absolute path"},
		{"redis_cluster = 127.0.0.1:7000\nredis_sentinel_auth = /s.pass\n", "only with redis_sentinels"},
		{"redis_cluster = 1:1 1:2 1:3 1:4 1:5 1:6 1:7 1:8 1:9 1:10 1:11 1:12 1:13 1:14 1:15 1:16 1:17\n",
		 "at most 16"},
	};
	char text[512];

	(void)state;
	assert_int_equal(sl_config_load_string(cfg, "r.ini", "[sluice]\nredis_sentinels = 127.0.0.1:26379, "
	                                                      "[::1]:26380  host.example:26381\n"
	                                                      "redis_master = mymaster\n[r]\nmatch = *\n"
	                                                      "rate = 5/s\nscope = fleet\n"),
	                 0);
	assert_string_equal(cfg->global.redis_sentinels, "127.0.0.1:26379 [::1]:26380 host.example:26381");
	assert_string_equal(cfg->global.redis_master, "mymaster");
	assert_true(sl_config_has_redis(cfg));
	assert_int_equal(sl_config_load_string(cfg, "r.ini", "[sluice]\nredis_cluster = 127.0.0.1:7000\n[r]\n"
	                                                      "match = *\nrate = 5/s\nscope = fleet\n"),
	                 0);
	assert_string_equal(cfg->global.redis_cluster, "127.0.0.1:7000");
	assert_int_equal(sl_config_load_string(cfg, "r.ini", "[sluice]\nredis_cluster = none\n[r]\n"
	                                                      "match = *\nrate = 5/s\nscope = fleet\n"),
	                 -EINVAL);
	assert_true(has_error("names no usable redis"));
	for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
		snprintf(text, sizeof(text), "[sluice]\n%s", bad[i].text);
		assert_int_equal(sl_config_load_string(cfg, "r.ini", text), -EINVAL);
		if (!has_error(bad[i].expect))
			fail_msg("%s: no error saying '%s' (first: %s)", bad[i].text, bad[i].expect,
			         cfg->nerrors ? cfg->errors[0] : "none");
	}
}

static void test_bad_inputs(void **state)
{
	static const struct {
		const char *text;
		const char *expect; /* substring of the first error */
	} bad[] = {
		{"[a]\nmatch = *\nrat = 10/s\n", "t.ini:3: unknown key 'rat' in [a] (did you mean 'rate'?)"},
		{"[sluice]\nshm_nmae = /x\n[a]\nmatch=*\nrate=1/s\n", "t.ini:2: unknown key 'shm_nmae' in [sluice] (did you mean 'shm_name'?)"},
		{"[a]\nmatch = *\nrate = 10\n", "t.ini:3: rate: bad rate"},
		{"[a]\nmatch = *\nrate = 10/fortnight\n", "t.ini:3: rate: bad rate window"},
		{"[a]\nmatch = *\nrate = 0/s\n", "t.ini:3: rate: bad rate amount"},
		{"[a]\nmatch = *\nrate = -1/s\n", "t.ini:3: rate: bad rate amount"},
		{"[a]\nmatch = *\nrate = 5K/s\n", "K/M/G amounts are for meter = bytes only"},
		{"[a]\nrate = 10/s\n", "t.ini:1: [a] has no match"},
		{"[a]\nmatch = *\n", "t.ini:1: [a] needs a rate"},
		{"[a]\nmatch = 300.1.1.1\nrate=1/s\n", "t.ini:2: match: bad IPv4 address"},
		{"[a]\nmatch = 10.0.0.0/33\nrate=1/s\n", "t.ini:2: match: bad prefix length"},
		{"[a]\nmatch = host:0\nrate=1/s\n", "port out of range"},
		{"[a]\nmatch = host:70000\nrate=1/s\n", "port out of range"},
		{"[a]\nmatch = host:90-80\nrate=1/s\n", "runs backwards"},
		{"[a]\nmatch = [2001:db8::1\nrate=1/s\n", "missing ']'"},
		{"[a]\nmatch = *.\nrate=1/s\n", "bad wildcard"},
		{"[a]\nmatch = exa mple!.com\nrate=1/s\n", "bad host name"},
		{"[a]\nmatch = *\nrate = 1/s\nburst = 0\n", "t.ini:4: burst: not a positive integer"},
		{"[a]\nmatch = *\nrate = 1/s\nmax_wait = soon\n", "t.ini:4: max_wait: bad duration"},
		{"[a]\nmatch = *\nrate = 1/s\nmode = loud\n", "t.ini:4: bad mode 'loud' (want enforce | observe)"},
		{"[a]\nmatch = *\nrate = 1/s\nrefuse = EBOGUS\n", "t.ini:4: refuse: unknown errno name"},
		{"[a]\nmatch = *\nrate = 1/s\nmeter = packets\n", "t.ini:4: bad meter 'packets'"},
		{"[a]\nmatch = *\nrate = 5/s\nstrategy = fixed-window\nburst = 3\n", "t.ini:5: burst is for leaky-bucket and token-bucket"},
		{"[a]\nmatch = *\nconcurrency = 3\nstrategy = sliding-window\n", "strategy needs a rate"},
		{"[a]\nmatch = *\nconcurrency = 3\nmeter = datagrams\n", "t.ini:3: concurrency is for meter = connections and requests, not datagrams (it limits open connections, or requests in flight)"},
		{"[a]\nmatch = *\nconcurrency = 0\n", "t.ini:3: concurrency:"},
		{"[a]\nmatch = *\nrate = 1/s\nrate = 2/s\n", "t.ini:4: duplicate key 'rate' in [a] (first at line 3)"},
		{"[a]\nmatch = *\nrate = 1/s\n[a]\nmatch=*\nrate=1/s\n", "t.ini:4: duplicate section [a] (first at line 1)"},
		{"match = *\n", "t.ini:1: 'match' is outside any section (it belongs in a limit section"},
		{"redis = 127.0.0.1:6379\n[a]\nmatch = *\nrate = 1/s\n", "t.ini:1: 'redis' is outside any section (it belongs in [sluice])"},
		{"[a]\nmatch = *\nrate = 1/s\nfallback = open\n", "t.ini:4: 'fallback' belongs in [sluice], not in [a]"},
		{"[sluice]\nfallback = maybe\n[a]\nmatch=*\nrate=1/s\n", "t.ini:2: bad fallback 'maybe' (want local | open | closed)"},
		{"[sluice]\nshm_name = noslash\n[a]\nmatch=*\nrate=1/s\n", "t.ini:2: bad shm_name"},
		{"[sluice]\nshm_mode = 999\n[a]\nmatch=*\nrate=1/s\n", "t.ini:2: bad shm_mode"},
		{"[a]\nmatch = *\nrate 10/s\n", "t.ini:3: syntax error"},
		{"[a\nmatch = *\n", "t.ini:1: syntax error"},
		{"[bad name!]\nmatch = *\nrate=1/s\n", "t.ini:1: bad section name"},
		{"[a]\nmatch =\nrate=1/s\n", "t.ini:2: 'match' has no value"},
		{"[a]\nmatch = *\nrate = 1/s\n  2/s\n", "only match may continue"},
		{"[a]\nmatch = *\nrate = 1/s\nburst = 99999999999\n", "burst: '99999999999' is larger"},
		{"[a]\nmatch = *\nrate = 1/s\ntolerance = 2m\n", "t.ini:4: tolerance: 2m: at most 1m"},
		{"[a]\nmatch = *\nrate = 1/s\ntolerance = 1500ns\n", "t.ini:4: tolerance: bad duration"},
		{"[a]\nmatch = *\nrate = 1/s\ntolerance = forever\n", "t.ini:4: tolerance: bad duration"},
		{"[a]\nmatch = *\nrate = 5/s\nstrategy = sliding-window\ntolerance = 1ms\n",
		 "t.ini:5: tolerance is for leaky-bucket and token-bucket"},
		{"[sluice]\nredis = 127.0.0.1:6379\n[a]\nmatch = *\nrate = 5/s\nscope = fleet\ntolerance = 1ms\n",
		 "[a]: tolerance is not kept by a fleet's shares yet"},
		/* Errors that say what was meant. */
		{"[a]\nmatch = https://api.example.com/v1\nrate=1/s\n",
		 "'https://api.example.com/v1' is a URL: match takes HOST[:PORT] - write api.example.com:443"},
		{"[a]\nmatch = http://10.0.0.1:8080/\nrate=1/s\n", "write 10.0.0.1:8080"},
		{"[a]\nmatch = gopher://x.example/\nrate=1/s\n", "write x.example:PORT"},
		{"[a]\nmatch = *\nrate = 0/s\n", "a rate lets at least one through each window"},
		{"[a]\nmatch = *\nrate = 1/s\nrefuse = ECONNREFUSD\n", "(did you mean ECONNREFUSED?)"},
		{"[a]\nmatch = *\nrate = 1/s\nper = hostname\n", "'hostname' (did you mean 'host'?)"},
		{"[a]\nmatch = *\nrate = 1/s\nstrategy = leaky\n", "(did you mean leaky-bucket? want"},
		{"[a]\nmatch = *\nrate = 1/s\nmeter = request\n", "(did you mean requests? want"},
	};

	(void)state;
	for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
		int rc = sl_config_load_string(cfg, "t.ini", bad[i].text);

		if (rc != -EINVAL || cfg->nerrors == 0)
			fail_msg("input %zu was accepted: %s", i, bad[i].text);
		if (!has_error(bad[i].expect))
			fail_msg("input %zu: got \"%s\", want \"%s\"", i, cfg->errors[0], bad[i].expect);
	}
}

static void test_too_long_line(void **state)
{
	char text[1024];

	(void)state;
	snprintf(text, sizeof(text), "[a]\nmatch = %0400d\nrate = 1/s\nmode = x\n", 7);
	assert_int_equal(sl_config_load_string(cfg, "t.ini", text), -EINVAL);
	assert_true(has_error("t.ini:2: line longer than"));
	assert_true(has_error("t.ini:4: bad mode")); /* line numbers stay right after it */
	/* The match given on the long line is not also missing. */
	assert_false(has_error("has no match"));
	assert_int_equal(cfg->nerrors, 2);
}

static void test_every_error_reported(void **state)
{
	const char *text = "[a]\nmatch = *\nrate = x\nburst = y\nmode = z\n";

	(void)state;
	assert_int_equal(sl_config_load_string(cfg, "t.ini", text), -EINVAL);
	assert_int_equal(cfg->nerrors, 3);
	/* all three, in line order */
	assert_non_null(strstr(cfg->errors[0], "t.ini:3: rate"));
	assert_non_null(strstr(cfg->errors[1], "t.ini:4: burst"));
	assert_non_null(strstr(cfg->errors[2], "t.ini:5: bad mode"));
}

static void test_missing_file(void **state)
{
	(void)state;
	assert_int_equal(sl_config_load(cfg, "/nonexistent/sluice.ini"), -ENOENT);
	assert_non_null(strstr(cfg->errors[0], "/nonexistent/sluice.ini: cannot read"));
}

/* No cap on sections or patterns but the segment's largest tables: 10,000 sections
 * of 10 patterns each (100,000 patterns), one section with a match of 20,000
 * patterns over continuation lines, and a duplicate found among them all. */
static void test_many_sections(void **state)
{
	size_t cap = 16u << 20, used = 0;
	char *text = malloc(cap);

	(void)state;
	assert_non_null(text);
	for (unsigned i = 0; i < 10000; i++) {
		used += (size_t)snprintf(text + used, cap - used, "[s%u]\nmatch =", i);
		for (unsigned p = 0; p < 10; p++) /* five to a line: inih reads 200 bytes a line */
			used += (size_t)snprintf(text + used, cap - used, "%s h%u-%u.example:%u", p == 5 ? "\n " : "",
			                         i, p, 1000 + p);
		used += (size_t)snprintf(text + used, cap - used, "\nrate = %u/s\n", i % 50 + 1);
	}
	used += (size_t)snprintf(text + used, cap - used, "[wide]\nmatch = 10.0.0.1\n");
	for (unsigned p = 0; p < 20000; p++)
		used += (size_t)snprintf(text + used, cap - used, "%s10.%u.%u.0/24%s", p % 8 ? " " : "  ",
		                         p / 256 % 256, p % 256, p % 8 == 7 ? "\n" : "");
	used += (size_t)snprintf(text + used, cap - used, "\nrate = 1/s\n");
	assert_int_equal(sl_config_load_string(cfg, "big.ini", text), 0);
	assert_int_equal(cfg->nsections, 10001);
	assert_int_equal(cfg->npatterns, 100000 + 20001);
	const struct sl_spec *s = section("s9999");
	assert_int_equal(s->npatterns, 10);
	assert_int_equal(PATS(s)[9].port_lo, 1009);
	assert_string_equal(PATS(s)[9].name, "h9999-9.example");
	s = section("wide");
	assert_int_equal(s->npatterns, 20001);
	assert_int_equal(PATS(s)[20000].kind, SL_PAT_V4);

	/* The same name twice, thousands of sections apart: found, with both lines. */
	used += (size_t)snprintf(text + used, cap - used, "[s42]\nmatch = x.example\nrate = 1/s\n");
	assert_int_equal(sl_config_load_string(cfg, "big.ini", text), -EINVAL);
	assert_non_null(strstr(cfg->errors[0], "duplicate section [s42] (first at line 169)"));
	free(text);
}

static void test_edit_distance(void **state)
{
	(void)state;
	assert_int_equal(sl_edit_distance("rate", "rate"), 0);
	assert_int_equal(sl_edit_distance("rat", "rate"), 1);
	assert_int_equal(sl_edit_distance("max-wait", "max_wait"), 1);
	assert_int_equal(sl_edit_distance("", "abc"), 3);
}

/* Every key's default is config text its own parser takes, so the defaults are the
 * parser's values: loading a section that gives nothing but what it must, every
 * other field holds what its default text says. */
static void test_key_defaults_parse(void **state)
{
	static struct sl_config cfg;
	const struct sl_spec *s;

	(void)state;
	assert_int_equal(sl_config_load_string(&cfg, "t.ini", "[a]\nmatch = *\nrate = 5/s\n"), 0);
	assert_int_equal(cfg.nerrors, 0);
	s = &cfg.sections[0].spec;
	assert_int_equal(s->meter, SL_METER_CONNECTIONS);
	assert_int_equal(s->strategy, SL_STRAT_LEAKY_BUCKET);
	assert_int_equal(s->max_wait_ns, 30 * SL_NS_PER_S);
	assert_int_equal(s->mode, SL_MODE_ENFORCE);
	assert_int_equal(s->burst, 1);
	assert_string_equal(cfg.global.shm_name, "/sluice");
	assert_int_equal(cfg.global.shm_mode, 0660);
	/* Each key with a default names one, and each without says what it is. */
	for (int k = 0; k < SL_KEY_COUNT; k++)
		assert_true(sl_keys[k].def || sl_keys[k].def_doc);
}

/* Every kind of value has its operations (config_types.c), and what each key's
 * default parses to is said again as the same value: format(parse(x)) parses to
 * what x did. */
static void test_every_kind_round_trips(void **state)
{
	static struct sl_config cfg, again;
	char text[512], buf[600];

	(void)state;
	for (int t = 0; t < SL_KT_KINDS; t++) {
		assert_non_null(sl_key_types[t].parse);
		assert_non_null(sl_key_types[t].format);
		for (unsigned c = 0; c < sl_key_types[t].nchoices; c++)
			assert_int_equal(sl_key_choice((enum sl_key_type)t, sl_key_types[t].choices[c]), (int)c);
	}
	assert_int_equal(sl_key_choice(SL_KT_METER, "furlongs"), -1);
	assert_int_equal(sl_config_load_string(&cfg, "t.ini",
	                                       "[sluice]\nshm_mode = 0640\nkeys = 5000\n"
	                                       "[a]\nmatch = *\nrate = 5/s\nstrategy = token-bucket\n"
	                                       "burst = 7\nmax_wait = 2m\nrefuse = ECONNRESET\nmode = observe\n"
	                                       "per = address/24\n"), 0);
	/* Said again, each limit key of the section parses to the same value. */
	for (int k = 0; k < SL_KEY_COUNT; k++) {
		const struct sl_key_def *d = &sl_keys[k];
		const void *base = d->global ? (const void *)&cfg.global : (const void *)&cfg.sections[0].spec;

		if (d->type == SL_KT_PATTERNS || d->type == SL_KT_RATE || d->type == SL_KT_PER)
			continue; /* printed with more than their value (sl_spec_dump) */
		sl_key_types[d->type].format(d, base, buf, sizeof(buf));
		if (d->type == SL_KT_ERRNO && strchr(buf, '('))
			continue; /* the call's own default, said in words */
		if (d->global)
			snprintf(text, sizeof(text), "[sluice]\n%s = %s\n[a]\nmatch = *\nrate = 5/s\n", d->name, buf);
		else
			snprintf(text, sizeof(text), "[a]\nmatch = *\nrate = 5/s\nstrategy = token-bucket\n%s = %s\n",
			         d->name, buf);
		if (buf[0] == '\0' || (!d->global && (sl_keys[k].strategies != SL_FOR_ANY ||
		                                        sl_keys[k].meters != SL_FOR_ANY || d->needs != SL_NEEDS_NONE)))
			continue; /* keys that need company are compiled in their own tests */
		if (sl_config_load_string(&again, "t.ini", text) != 0)
			fail_msg("%s = %s: %s", d->name, buf, again.nerrors ? again.errors[0] : "?");
		{
			const void *b2 = d->global ? (const void *)&again.global : (const void *)&again.sections[0].spec;
			char buf2[600];

			sl_key_types[d->type].format(d, b2, buf2, sizeof(buf2));
			assert_string_equal(buf, buf2);
		}
		sl_config_free(&again);
	}
	sl_config_free(&cfg);
}

/* docs/config.md and conf/sluice.ini, the two places a user reads about keys,
 * mention every key of the table (run from the repository's top). */
static void test_every_key_documented(void **state)
{
	static const char *const files[] = {"docs/config.md", "conf/sluice.ini"};
	static char text[1 << 20];

	(void)state;
	for (unsigned f = 0; f < SL_ARRAY_LEN(files); f++) {
		FILE *in = fopen(files[f], "r");
		size_t n;

		if (!in)
			fail_msg("cannot read %s (run the unit tests from the repository's top)", files[f]);
		n = fread(text, 1, sizeof(text) - 1, in);
		fclose(in);
		text[n] = '\0';
		for (int k = 0; k < SL_KEY_COUNT; k++) {
			char pattern[64];

			snprintf(pattern, sizeof(pattern), f == 0 ? "`%s`" : "%s ", sl_keys[k].name);
			if (!strstr(text, pattern))
				fail_msg("%s does not mention the key %s", files[f], sl_keys[k].name);
		}
	}
}

/* docs/config.md's "At reload" table says of every [sluice] key what the key
 * table does (the daemon names the restart keys from it). */
static void test_reload_table_documented(void **state)
{
	static char text[1 << 20];
	FILE *in = fopen("docs/config.md", "r");
	size_t n;

	(void)state;
	if (!in)
		fail_msg("cannot read docs/config.md (run the unit tests from the repository's top)");
	n = fread(text, 1, sizeof(text) - 1, in);
	fclose(in);
	text[n] = '\0';
	for (int k = 0; k < SL_KEY_COUNT; k++) {
		char row[128];

		if (!sl_keys[k].global)
			continue;
		snprintf(row, sizeof(row), "| `%s` | %s", sl_keys[k].name, sl_at_reload_name(sl_keys[k].at_reload));
		if (!strstr(text, row))
			fail_msg("docs/config.md's At reload table has no row \"%s\"", row);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_sample),
		cmocka_unit_test(test_defaults_and_continuation),
		cmocka_unit_test(test_rate_forms),
		cmocka_unit_test(test_bad_inputs),
		cmocka_unit_test(test_redis_ha),
		cmocka_unit_test(test_too_long_line),
		cmocka_unit_test(test_every_error_reported),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_many_sections),
		cmocka_unit_test(test_edit_distance),
		cmocka_unit_test(test_key_defaults_parse),
		cmocka_unit_test(test_no_sections),
		cmocka_unit_test(test_every_kind_round_trips),
		cmocka_unit_test(test_every_key_documented),
		cmocka_unit_test(test_reload_table_documented),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
