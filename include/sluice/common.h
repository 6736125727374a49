/*
 * common.h - small helpers shared by every part of sluice.
 *
 * Conventions: internal functions return 0 (or a count) on success and -errno on
 * failure; only the shim's exported hooks and the programs' main() turn that into
 * errno or an exit status.  Times are int64_t nanoseconds of CLOCK_MONOTONIC unless a
 * name says otherwise.
 */
#ifndef SLUICE_COMMON_H
#define SLUICE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define SL_NS_PER_US 1000LL
#define SL_NS_PER_MS 1000000LL
#define SL_NS_PER_S 1000000000LL

#define SL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SL_MAX(a, b) ((a) > (b) ? (a) : (b))

#define sl_likely(x) __builtin_expect(!!(x), 1)
#define sl_unlikely(x) __builtin_expect(!!(x), 0)

/* A spin-wait hint to the processor (pause on x86, yield on arm64, nothing
 * elsewhere): lets the other hardware thread run while a lock is polled. */
static inline void sl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The smallest power of two at least n (1 for 0). */
static inline uint64_t sl_pow2_at_least(uint64_t n)
{
	uint64_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/* Symbols visible outside libsluice.so; everything else is hidden. */
#define SL_EXPORT __attribute__((visibility("default")))

/* Copy a C string into a fixed buffer, always terminated; returns -ENAMETOOLONG
 * (and writes nothing) when it does not fit. */
int sl_strlcpy(char *dst, const char *src, size_t size);

/* The absolute, resolved form of path into a buffer of size bytes (which may be
 * shorter than PATH_MAX, as realpath's own buffer may not); -errno when it cannot
 * be resolved, -ENAMETOOLONG (nothing written) when it does not fit. */
int sl_realpath(const char *path, char *out, size_t size);

#endif
