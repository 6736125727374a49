/*
 * libFuzzer target for the DNS message reader (`make fuzz`): any bytes, read as
 * a query and as an answer from an exact-size copy (ASan sees any overread); the
 * names it gives are terminated and within the buffer, the counts within max.
 */
#include "sluice/dnsmsg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *msg = malloc(size ? size : 1);
	struct sl_dns_addr a[4];
	char name[64];
	int n;

	if (!msg)
		return 0;
	memcpy(msg, data, size);
	if (sl_dns_question(msg, size, name, sizeof(name)) == 0 && strlen(name) >= sizeof(name))
		abort();
	n = sl_dns_answer_addrs(msg, size, name, sizeof(name), a, 4);
	if (n > 4 || (n >= 0 && strlen(name) >= sizeof(name)))
		abort();
	free(msg);
	return 0;
}
