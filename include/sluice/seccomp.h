/*
 * seccomp.h - what `sluice run --seccomp` (src/supervisor/) and the shim agree
 * on, so that a dynamically linked program under the supervisor is held once for
 * one call, not twice (docs/programs.md, "What reaches what").
 *
 * The supervisor's filter traps connect(), and sendto()/sendmsg() with a
 * destination when a section meters datagrams.  A call carrying SL_SECCOMP_PASS in
 * an argument register the kernel ignores for that call is let through untrapped:
 * connect's fourth, sendmsg's fourth.  The shim, told by SLUICE_SECCOMP=1 that
 * it runs under the filter, makes its real calls that way (sendto as the sendmsg
 * it is the same as): it has already decided them.  This is a courtesy between
 * two parts of sluice, not a boundary: a program that wanted to go unshaped could
 * do the same, as it could skip the preload.
 */
#ifndef SLUICE_SECCOMP_H
#define SLUICE_SECCOMP_H

#include <stdint.h>

#define SL_SECCOMP_PASS UINT64_C(0x736c756963652e31) /* "sluice.1" */
#define SL_SECCOMP_PASS_LO ((uint32_t)(SL_SECCOMP_PASS & 0xffffffffu))
#define SL_SECCOMP_PASS_HI ((uint32_t)(SL_SECCOMP_PASS >> 32))

/* The environment variable that tells the shim it runs under the filter. */
#define SL_SECCOMP_ENV "SLUICE_SECCOMP"

#endif
