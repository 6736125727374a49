/*
 * progkind.h - what kind of program `sluice run` is asked to start: the shim
 * reaches dynamic ones; static and Go ones need --seccomp (docs/programs.md, "What reaches
 * what").
 */
#ifndef SLUICE_CLI_PROGKIND_H
#define SLUICE_CLI_PROGKIND_H

#include <stddef.h>

enum { SL_PROG_UNKNOWN, SL_PROG_DYNAMIC, SL_PROG_STATIC, SL_PROG_GO };

/* What `cmd` is, as execvp would find it (its path into `what`): SL_PROG_STATIC
 * (no program interpreter), SL_PROG_GO (a Go program, linked either way),
 * SL_PROG_DYNAMIC, or SL_PROG_UNKNOWN (not found, not a 64-bit ELF, a script). */
int sl_prog_kind(const char *cmd, char *what, size_t size);

#endif
