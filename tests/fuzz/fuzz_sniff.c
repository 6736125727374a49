/*
 * libFuzzer target for the first-write name parser (`make fuzz`): any bytes give a
 * name or none, never a crash or a read past the end; a name found is a valid,
 * normalised host (no upper case, no trailing dot, only host characters).
 */
#include "sluice/sniff.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_sniffed s;
	/* An exact-size copy, so ASan catches any read beyond `size`. */
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (sl_sniff(copy, size, &s) != SL_SNIFF_NONE) {
		size_t n = strlen(s.name);

		if (n == 0 || n > 253 || s.name[n - 1] == '.')
			abort();
		for (size_t i = 0; i < n; i++)
			if ((s.name[i] >= 'A' && s.name[i] <= 'Z') || !strchr("abcdefghijklmnopqrstuvwxyz0123456789.-_:", s.name[i]))
				abort();
	}
	free(copy);
	return 0;
}
