/*
 * oneliner.c - a limit from the command line (oneliner.h).
 */
#include "oneliner.h"

#include "sluice/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const keys[] = {"match", "rate", "meter", "per", "max_wait", "concurrency", "strategy",
                                   "burst", "tolerance"};

int sl_oneliner_opt(struct sl_oneliner *o, int opt, const char *arg)
{
	if (opt < 0x100 || opt >= 0x100 + (int)(sizeof(keys) / sizeof(keys[0])))
		return 0;
	/* A value is one line of a config: no line breaks, no comment that would cut
	 * it short, nothing that opens a section. */
	for (const char *p = arg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == ';' || *p == '#' || *p == '[') {
			fprintf(stderr, "sluice: --%s '%s': not a value a config can hold\n", keys[opt - 0x100], arg);
			return -1;
		}
	o->value[opt - 0x100] = arg;
	return 1;
}

int sl_oneliner_given(const struct sl_oneliner *o)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (o->value[i])
			return 1;
	return 0;
}

int sl_oneliner_section(const struct sl_oneliner *o, char *buf, size_t size)
{
	size_t used = (size_t)snprintf(buf, size, "[cli]\n");

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && used < size; i++)
		if (o->value[i])
			used += (size_t)snprintf(buf + used, size - used, "%s = %s\n", keys[i], o->value[i]);
	return used < size ? 0 : -1;
}

/* Option i's flag, as SL_ONELINER_OPTIONS spells it: its key, '-' for '_'. */
static const char *flag_of(size_t i, char *buf, size_t size)
{
	size_t n = 0;

	for (const char *k = keys[i]; *k && n + 1 < size; k++)
		buf[n++] = *k == '_' ? '-' : *k;
	buf[n] = '\0';
	return buf;
}

/* The flag whose value is on line `line` of the section sl_oneliner_section
 * makes (line 1 is its header, then one line for each option given, in keys[]
 * order); -1 for the header. */
static int flag_of_line(const struct sl_oneliner *o, long line)
{
	long at = 1;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (o->value[i] && ++at == line)
			return (int)i;
	return -1;
}

int sl_oneliner_check(const struct sl_oneliner *o, const char *who)
{
	static const char name[] = "(command line)";
	static char text[4096];
	struct sl_config *cfg = calloc(1, sizeof(*cfg));
	int rc = 0;

	if (!cfg || sl_oneliner_section(o, text, sizeof(text)) < 0) {
		fprintf(stderr, "%s: the one-liner is too long\n", who);
		free(cfg);
		return -1;
	}
	if (sl_config_load_string(cfg, name, text) != 0) {
		for (unsigned i = 0; i < cfg->nerrors && i < SL_CONFIG_MAX_ERRORS; i++) {
			const char *e = cfg->errors[i], *msg = e;
			char *end, flag[32];
			long line = 0;
			int f;

			/* "(command line):N: what": said of the flag that gave line N. */
			if (strncmp(e, name, sizeof(name) - 1) == 0 && e[sizeof(name) - 1] == ':') {
				line = strtol(e + sizeof(name), &end, 10);
				if (end[0] == ':' && end[1] == ' ')
					msg = end + 2;
			}
			f = flag_of_line(o, line);
			if (f >= 0)
				fprintf(stderr, "%s: --%s %s: %s\n", who, flag_of((size_t)f, flag, sizeof(flag)), o->value[f], msg);
			else if (strstr(msg, "[cli] has no match"))
				fprintf(stderr, "%s: the one-liner needs --match HOST[:PORT]: which destinations does it limit?\n",
				        who);
			else if (strstr(msg, "[cli] needs a rate"))
				fprintf(stderr, "%s: the one-liner needs --rate R (e.g. --rate 10/s) or --concurrency N\n", who);
			else
				fprintf(stderr, "%s: the one-liner: %s\n", who, strncmp(msg, "[cli] ", 6) ? msg : msg + 6);
		}
		rc = -1;
	}
	sl_config_free(cfg);
	free(cfg);
	return rc;
}

int sl_oneliner_file(const struct sl_oneliner *o, char *path, size_t size)
{
	const char *dir = getenv("TMPDIR");
	char text[4096], head[256];
	int fd, n;

	if (!dir || dir[0] != '/')
		dir = "/tmp";
	if (snprintf(path, size, "%s/sluice-run-%d-XXXXXX.ini", dir, (int)getpid()) >= (int)size ||
	    sl_oneliner_section(o, text, sizeof(text)) < 0) {
		fprintf(stderr, "sluice: the one-liner's config is too long\n");
		return -1;
	}
	/* A segment and a control socket of its own: a one-liner never joins (or
	 * disturbs) the machine's queues. */
	n = snprintf(head, sizeof(head), "[sluice]\nshm_name = /sluice-cli-%d\ncontrol_socket = %s/sluice-cli-%d.sock\n\n",
	             (int)getpid(), dir, (int)getpid());
	if ((fd = mkstemps(path, 4)) < 0) {
		fprintf(stderr, "sluice: cannot make the one-liner's config in %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (write(fd, head, (size_t)n) != n || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		fprintf(stderr, "sluice: cannot write %s: %s\n", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}
