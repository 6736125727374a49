/*
 * oneliner.h - a limit given on the command line, as trickle takes one:
 * `sluice run --match api.example.com:443 --rate 5/s -- cmd` (docs/commands.md, "One-liners").
 * The options make one section, [cli], of a private config; `sluice check` with
 * the same options prints it.
 */
#ifndef SLUICE_CLI_ONELINER_H
#define SLUICE_CLI_ONELINER_H

#include <getopt.h>
#include <stddef.h>

/* The long options a one-liner takes, for a command's getopt_long table (they
 * answer with the values below). */
#define SL_ONELINER_OPTIONS                                                                         \
	{"match", required_argument, NULL, 0x100}, {"rate", required_argument, NULL, 0x101},        \
	{"meter", required_argument, NULL, 0x102}, {"per", required_argument, NULL, 0x103},         \
	{"max-wait", required_argument, NULL, 0x104}, {"concurrency", required_argument, NULL, 0x105}, \
	{"strategy", required_argument, NULL, 0x106}, {"burst", required_argument, NULL, 0x107},   \
	{"tolerance", required_argument, NULL, 0x108}

#define SL_ONELINER_USAGE "[--match HOST[:PORT] (--rate R | --concurrency N) [--meter M] [--per P] " \
	"[--strategy S] [--burst N] [--tolerance D] [--max-wait D]]"

struct sl_oneliner {
	const char *value[9]; /* by option, 0x100 + i; NULL: not given */
};

/* Take option `opt` (one of SL_ONELINER_OPTIONS) with its argument: 1 when it was
 * one, 0 when not, -1 with a message on stderr for a value no config may hold. */
int sl_oneliner_opt(struct sl_oneliner *o, int opt, const char *arg);

/* Whether any one-liner option was given. */
int sl_oneliner_given(const struct sl_oneliner *o);

/* The section the options make, as INI text into buf.  0, or -1 (too long). */
int sl_oneliner_section(const struct sl_oneliner *o, char *buf, size_t size);

/* Whether the section the options make is a valid one: 0, or -1 with each error
 * on stderr said of the flag that caused it ("WHO: --rate 0/s: ..."), never of a
 * file the user did not write. */
int sl_oneliner_check(const struct sl_oneliner *o, const char *who);

/* A private config file holding [sluice] for a private segment and the section,
 * 0600 under $TMPDIR (or /tmp); its path into path.  0, or -1 (said on stderr).
 * The caller removes it. */
int sl_oneliner_file(const struct sl_oneliner *o, char *path, size_t size);

#endif
