#include "sluice/common.h"

#include <errno.h>
#include <string.h>

int sl_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size == 0 || n >= size)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}
