/*
 * spelling.c - "did you mean" for a word a config or a command line got wrong:
 * how far two words are apart, and the nearest of a list (sluice/config.h).  The
 * parser, the key types and the units all ask it; it asks none of them.
 */
#include "sluice/config.h"
#include "sluice/common.h"

#include <ctype.h>
#include <string.h>

unsigned sl_edit_distance(const char *a, const char *b)
{
	unsigned row[64], la = (unsigned)strlen(a), lb = (unsigned)strlen(b);

	if (la >= SL_ARRAY_LEN(row) || lb >= SL_ARRAY_LEN(row))
		return 99;
	for (unsigned j = 0; j <= lb; j++)
		row[j] = j;
	for (unsigned i = 1; i <= la; i++) {
		unsigned diag = row[0];

		row[0] = i;
		for (unsigned j = 1; j <= lb; j++) {
			unsigned up = row[j];
			unsigned cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);

			row[j] = SL_MIN(SL_MIN(row[j] + 1, row[j - 1] + 1), diag + cost);
			diag = up;
		}
	}
	return row[lb];
}

const char *sl_nearest_name(const char *s, const char *const *names, unsigned n)
{
	const char *near = NULL, *within = NULL;
	unsigned best = 3; /* at most two edits away */
	size_t len = strlen(s);

	for (unsigned i = 0; i < n; i++) {
		size_t nlen = strlen(names[i]);
		unsigned d;

		if (len >= 3 && strncmp(names[i], s, len) == 0)
			return names[i]; /* a word cut short: "leaky" for leaky-bucket */
		if (nlen >= 3 && strncmp(s, names[i], nlen) == 0 && (!within || nlen > strlen(within)))
			within = names[i]; /* a word run on: "hostname" for host */
		if ((d = sl_edit_distance(s, names[i])) < best) {
			best = d;
			near = names[i];
		}
	}
	return near ? near : within;
}
