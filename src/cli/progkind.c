/*
 * Whether a program is one the preload shim cannot reach: an ELF executable with
 * no program interpreter (statically linked: no ld.so, so no LD_PRELOAD), or a Go
 * program (Go makes its own system calls, dynamically linked or not).  `sluice
 * run` holds such programs through seccomp instead (src/supervisor/).
 */
#include "progkind.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file execvp would run for `cmd`, into out. */
static int locate(const char *cmd, char *out, size_t size)
{
	const char *path = getenv("PATH");
	struct stat st;

	if (strchr(cmd, '/'))
		return snprintf(out, size, "%s", cmd) < (int)size ? 0 : -ENAMETOOLONG;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *end = strchr(path, ':');
		size_t n = end ? (size_t)(end - path) : strlen(path);

		if (snprintf(out, size, "%.*s/%s", (int)n, n ? path : ".", cmd) < (int)size &&
		    stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
			return 0;
		path += n + (end ? 1 : 0);
	}
	return -ENOENT;
}

/* Read exactly n bytes at off; 0 or -1. */
static int read_at(int fd, void *buf, size_t n, off_t off)
{
	return pread(fd, buf, n, off) == (ssize_t)n ? 0 : -1;
}

int sl_prog_kind(const char *cmd, char *what, size_t size)
{
	char file[4096];
	Elf64_Ehdr eh;
	int fd, interp = 0, go = 0;

	if (locate(cmd, file, sizeof(file)) < 0 || (fd = open(file, O_RDONLY | O_CLOEXEC)) < 0)
		return SL_PROG_UNKNOWN;
	/* Only 64-bit ELF of this machine's byte order is looked into; anything else (a
	 * script, a 32-bit program) is left to the shim and the kernel. */
	if (read_at(fd, &eh, sizeof(eh), 0) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 4096) {
		close(fd);
		return SL_PROG_UNKNOWN;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		if (read_at(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) < 0)
			break;
		if (ph.p_type == PT_INTERP)
			interp = 1;
	}
	/* A Go program names its build in a section of its own. */
	if (eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum < 4096 && eh.e_shstrndx < eh.e_shnum) {
		Elf64_Shdr strs;

		if (read_at(fd, &strs, sizeof(strs), (off_t)(eh.e_shoff + (uint64_t)eh.e_shstrndx * sizeof(strs))) == 0)
			for (unsigned i = 0; i < eh.e_shnum && !go; i++) {
				Elf64_Shdr sh;
				char name[24] = "";

				if (read_at(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + (uint64_t)i * sizeof(sh))) < 0)
					break;
				if (pread(fd, name, sizeof(name) - 1, (off_t)(strs.sh_offset + sh.sh_name)) > 0 &&
				    (strcmp(name, ".go.buildinfo") == 0 || strcmp(name, ".note.go.buildid") == 0))
					go = 1;
			}
	}
	close(fd);
	snprintf(what, size, "%s", file);
	if (go)
		return SL_PROG_GO;
	return interp ? SL_PROG_DYNAMIC : SL_PROG_STATIC;
}
