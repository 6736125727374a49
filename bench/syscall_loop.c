/*
 * syscall_loop COUNT: call libc's syscall(SYS_getppid) COUNT times and print the
 * mean nanoseconds per call.  Under the shim this is what a number it does not
 * route pays (src/shim/syscall.c): the variadic arguments read and a switch on
 * the number, before the same system call.
 */
#include "sluice/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 100000;
	int64_t start = sl_clock_mono_ns();

	for (long i = 0; i < count; i++)
		if (syscall(SYS_getppid) < 0)
			return 1;
	printf("%.0f\n", (double)(sl_clock_mono_ns() - start) / (double)(count > 0 ? count : 1));
	return 0;
}
