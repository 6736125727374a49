/*
 * libFuzzer target for the config parser and the pattern parser (`make fuzz`).
 * Any input must come back as a config or as errors, never a crash; a config that
 * parses must also compile into a segment and print.
 */
#include "sluice/config.h"
#include "sluice/match.h"
#include "sluice/shm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sl_config cfg;
	static struct sl_shm shm;
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (sl_config_load_string(&cfg, "fuzz.ini", text) == 0) {
		FILE *null = fopen("/dev/null", "w");

		if (!shm.hdr)
			sl_shm_create_anonymous(&shm);
		if (shm.hdr)
			sl_shm_apply_config(shm.hdr, &cfg, 1);
		if (null) {
			sl_config_dump(&cfg, null);
			fclose(null);
		}
	}
	/* The first line alone as one pattern. */
	text[strcspn(text, "\n")] = '\0';
	{
		struct sl_pattern p;
		char err[200], out[400];

		if (sl_pattern_parse(&p, text, err, sizeof(err)) == 0)
			sl_pattern_format(&p, out, sizeof(out));
	}
	free(text);
	return 0;
}
