/* Host names as the protocol readers and the matcher compare them (sluice/name.h). */
#include "sluice/name.h"

size_t sl_name_normalise(char *name, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (name[i] >= 'A' && name[i] <= 'Z')
			name[i] = (char)(name[i] - 'A' + 'a');
	if (len > 0 && name[len - 1] == '.')
		name[--len] = '\0';
	return len;
}
