#include "sluice/common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sl_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size == 0 || n >= size)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

int sl_realpath(const char *path, char *out, size_t size)
{
	char *full = realpath(path, NULL);
	int rc;

	if (!full)
		return -errno;
	rc = sl_strlcpy(out, full, size);
	free(full);
	return rc;
}
