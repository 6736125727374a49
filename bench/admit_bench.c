/*
 * admit_bench [PROCS] [ITERATIONS]: the cost of one admission - match, reserve and
 * release across the shared segment - in nanoseconds, with PROCS processes doing it
 * at once on one section (so they contend for the segment lock).  The section's rate
 * is so high that nobody ever sleeps: this measures the bookkeeping alone.
 */
#include "sluice/admit.h"
#include "sluice/clock.h"
#include "sluice/shm.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static double run(struct sl_shm_header *h, long iterations)
{
	struct sl_dest d = {.family = AF_INET, .port = 443};
	int32_t self = (int32_t)getpid();
	int64_t start;

	inet_pton(AF_INET, "203.0.113.7", d.addr);
	start = sl_clock_mono_ns();
	for (long i = 0; i < iterations; i++) {
		struct sl_match m;
		struct sl_ticket t;
		int64_t retry;

		if (sl_admit_match(h, &d, &m, (int32_t)getpid()) <= 0 ||
		    sl_admit_reserve(h, &m, sl_clock_mono_ns(), self, &t) != 0)
			return -1;
		sl_admit_release(h, &t, sl_clock_mono_ns(), self, &retry);
	}
	return (double)(sl_clock_mono_ns() - start) / (double)iterations;
}

int main(int argc, char **argv)
{
	int procs = argc > 1 ? atoi(argv[1]) : 1;
	long iterations = argc > 2 ? atol(argv[2]) : 1000000;
	static struct sl_config cfg;
	char name[64];
	struct sl_shm shm;
	int reattached;
	double *results;

	snprintf(name, sizeof(name), "/sluice-bench-%d", (int)getpid());
	if (sl_config_load_string(&cfg, "bench.ini",
	                          "[other]\nmatch = 198.51.100.0/24\nrate = 1/s\n"
	                          "[api]\nmatch = *.example.com, 203.0.113.0/24:443\n"
	                          "rate = 1000000000/s\nburst = 1000000000\n") != 0 ||
	    sl_shm_open_or_create(&shm, name, 0600, &reattached) != 0 ||
	    sl_shm_apply_config(shm.hdr, &cfg, (int32_t)getpid()) != 0) {
		fprintf(stderr, "admit_bench: set-up failed\n");
		return 1;
	}
	results = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	for (int p = 0; p < procs; p++) {
		if (fork() == 0) {
			results[p] = run(shm.hdr, iterations);
			_exit(0);
		}
	}
	for (int p = 0; p < procs; p++)
		wait(NULL);
	sl_shm_remove(name);
	for (int p = 0; p < procs; p++) {
		if (results[p] < 0) {
			fprintf(stderr, "admit_bench: admission failed\n");
			return 1;
		}
	}
	double sum = 0;
	for (int p = 0; p < procs; p++)
		sum += results[p];
	printf("%.0f\n", sum / procs);
	return 0;
}
