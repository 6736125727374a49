/*
 * attach_cost SOCKET [N]: what a program's attach to the segment costs - the round
 * trip to the segment's socket (connect, one line, the memfd in reply; segsock.h),
 * then the map and the header's check (sl_shm_map_fd) - as the shim pays it once,
 * at its first call that needs the segment (docs/design.md, "The segment").  N
 * attaches of this process (the keeper knows it after the first and answers with
 * the same token), each unmapped after; prints the p50, p99 and largest, in
 * microseconds.
 */
#include "sluice/clock.h"
#include "sluice/segsock.h"
#include "sluice/shm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 1000;
	int64_t *took;
	char why[200];

	if (argc < 2 || n < 1 || n > 1000000) {
		fprintf(stderr, "usage: attach_cost SOCKET [N]\n");
		return 2;
	}
	if (!(took = calloc((size_t)n, sizeof(*took))))
		return 1;
	for (long i = 0; i < n; i++) {
		struct sl_shm shm = {.fd = -1};
		int64_t t0 = sl_clock_mono_ns();
		int rc = sl_segsock_attach(argv[1], 1, SL_SEGSOCK_TIMEOUT_NS, &shm, why, sizeof(why));

		took[i] = sl_clock_mono_ns() - t0;
		if (rc < 0) {
			fprintf(stderr, "attach_cost: %s: %s\n", argv[1], rc == -EACCES ? why : strerror(-rc));
			free(took);
			return 1;
		}
		sl_shm_detach(&shm);
	}
	qsort(took, (size_t)n, sizeof(*took), cmp_i64);
	printf("%.0f %.0f %.0f\n", took[n / 2] / 1e3, took[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 1e3,
	       took[n - 1] / 1e3);
	free(took);
	return 0;
}
