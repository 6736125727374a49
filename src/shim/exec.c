/*
 * exec: the shim goes on into children (docs/design.md, "Send paths and event loops").  A
 * program that runs another with an environment of its own making (env -i, Python's
 * subprocess with env={}, a daemon that sanitises its environment) would otherwise start
 * it unshaped.  Each exec call gets LD_PRELOAD and the SLUICE_* variables this process
 * started with put back when its environment lacks them; variables it sets itself are
 * kept, and an LD_PRELOAD of its own gets the shim appended.
 *
 * These hooks run in vfork children (Python's subprocess, posix_spawn), which share
 * their parent's memory: they allocate nothing, take no lock and write only their
 * own stack.  What they add was copied into static buffers at start-up.
 */
#include "shim.h"
#include "sluice/clock.h"
#include "sluice/say.h"

#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

#define ENV_MAX 4096      /* a longer environment goes unchanged (stack use is bounded) */
#define ARGS_MAX 65536    /* execl-style argument lists longer than this fail with E2BIG */
#define PRELOAD_MAX 4096  /* a longer LD_PRELOAD of the program's own goes unchanged */

static const char *const carried_names[] = {
	"LD_PRELOAD", "SLUICE_CONFIG", "SLUICE_SEGMENT", "SLUICE_FALLBACK", "SLUICE_DEBUG", "SLUICE_LOG",
	"SLUICE_SECCOMP", /* sluice/seccomp.h: a child under the filter makes its calls marked too */
	"SLUICE_SAY",     /* sluice/say.h: held and refused calls are told to `sluice run` */
	SL_REALTIME_ENV, /* sluice/clock.h: 0 keeps the kicker an ordinary thread */
};
#define CARRY_MAX SL_ARRAY_LEN(carried_names)

/* "NAME=value" as this process started with it, or "" when it was unset. */
static char carried[CARRY_MAX][SL_PATH_MAX + 32];
static char shim_path[SL_PATH_MAX];
static int carrying; /* 1 when this process was started with the shim in LD_PRELOAD */

void sl_exec_capture(void)
{
	const char *preload = getenv("LD_PRELOAD");
	Dl_info info;

	if (!preload || !strstr(preload, "libsluice") || !dladdr((void *)sl_exec_capture, &info) ||
	    !info.dli_fname || sl_strlcpy(shim_path, info.dli_fname, sizeof(shim_path)) < 0)
		return;
	for (size_t i = 0; i < CARRY_MAX; i++) {
		const char *v = getenv(carried_names[i]);

		carried[i][0] = '\0';
		if (v && (size_t)snprintf(carried[i], sizeof(carried[i]), "%s=%s", carried_names[i], v) >=
		             sizeof(carried[i]))
			carried[i][0] = '\0'; /* too long to carry whole: not carried */
	}
	carrying = 1;
}

static size_t env_count(char *const *envp)
{
	size_t n = 0;

	while (envp && envp[n] && n <= ENV_MAX)
		n++;
	return n;
}

/* envp with what is missing added, written into out (room for n + CARRY_MAX + 1
 * pointers) and `preload`; envp itself when nothing is missing. */
static char *const *fix_env(char *const *envp, size_t n, char **out, char *preload, size_t size)
{
	int have[CARRY_MAX] = {0}, changed = 0;
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		out[k++] = envp[i];
		for (size_t c = 0; c < CARRY_MAX; c++) {
			size_t len = strlen(carried_names[c]);

			if (strncmp(envp[i], carried_names[c], len) != 0 || envp[i][len] != '=')
				continue;
			have[c] = 1;
			/* The program's own LD_PRELOAD: the shim goes after its libraries. */
			if (c == 0 && !strstr(envp[i] + len + 1, shim_path)) {
				size_t have_len = strlen(envp[i]), add = strlen(shim_path);

				if (have_len + 1 + add < size) {
					memcpy(preload, envp[i], have_len);
					preload[have_len] = envp[i][len + 1] ? ':' : '\0';
					memcpy(preload + have_len + (envp[i][len + 1] ? 1 : 0), shim_path, add + 1);
					out[k - 1] = preload;
					changed = 1;
				}
			}
		}
	}
	for (size_t c = 0; c < CARRY_MAX; c++) {
		if (!have[c] && carried[c][0]) {
			out[k++] = carried[c];
			changed = 1;
		}
	}
	out[k] = NULL;
	return changed ? out : envp;
}

/* Run `call` with envp fixed up in a stack frame of its own.  Every hook below is
 * this, around its real function. */
#define WITH_ENV(envp, fixed, call)                                                      \
	do {                                                                                 \
		size_t n_ = env_count(envp);                                                     \
		sl_say_sums(); /* the image's holds, before the new image starts its own */      \
		if (!carrying || n_ > ENV_MAX) {                                                 \
			char *const *fixed = (envp);                                                 \
			return call;                                                                 \
		} else {                                                                         \
			char *out_[n_ + CARRY_MAX + 1];                                              \
			char preload_[PRELOAD_MAX];                                                  \
			char *const *fixed = fix_env((envp), n_, out_, preload_, sizeof(preload_));  \
			return call;                                                                 \
		}                                                                                \
	} while (0)

static int no_real(void)
{
	errno = ENOSYS;
	return -1;
}

SL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	int (*real)(const char *, char *const[], char *const[]) = SL_REAL(execve, execve);

	WITH_ENV(envp, e, real ? real(path, argv, e) : (int)sl_sys(SYS_execve, path, argv, e));
}

SL_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	int (*real)(int, const char *, char *const[], char *const[], int) = SL_REAL(execveat, execveat);

	WITH_ENV(envp, e, real ? real(dirfd, path, argv, e, flags)
	                       : (int)sl_sys(SYS_execveat, dirfd, path, argv, e, flags));
}

SL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	int (*real)(int, char *const[], char *const[]) = SL_REAL(fexecve, fexecve);

	WITH_ENV(envp, e, real ? real(fd, argv, e) : no_real());
}

SL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	int (*real)(const char *, char *const[], char *const[]) = SL_REAL(execvpe, execvpe);

	WITH_ENV(envp, e, real ? real(file, argv, e) : no_real());
}

/* glibc's execv, execvp and execl* call its internal execve, which no preload
 * sees: each is its own hook, over the environment-taking call. */
SL_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

SL_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* execl-style lists: counted, then copied onto the stack as an argv. */
#define COLLECT_ARGS(first, ap_start, argv_name, envp_out, body)                         \
	do {                                                                                 \
		va_list ap_;                                                                     \
		size_t n_ = 1;                                                                   \
		va_start(ap_, ap_start);                                                         \
		while (va_arg(ap_, char *) && n_ < ARGS_MAX)                                     \
			n_++;                                                                        \
		va_end(ap_);                                                                     \
		if (n_ >= ARGS_MAX) {                                                            \
			errno = E2BIG;                                                               \
			return -1;                                                                   \
		}                                                                                \
		char *argv_name[n_ + 1];                                                         \
		va_start(ap_, ap_start);                                                         \
		argv_name[0] = (char *)(first);                                                  \
		for (size_t i_ = 1; i_ <= n_; i_++)                                              \
			argv_name[i_] = va_arg(ap_, char *);                                         \
		envp_out;                                                                        \
		va_end(ap_);                                                                     \
		body;                                                                            \
	} while (0)

SL_EXPORT int execl(const char *path, const char *arg, ...)
{
	COLLECT_ARGS(arg, arg, argv, (void)0, return execve(path, argv, environ));
}

SL_EXPORT int execlp(const char *file, const char *arg, ...)
{
	COLLECT_ARGS(arg, arg, argv, (void)0, return execvpe(file, argv, environ));
}

SL_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp = NULL;

	COLLECT_ARGS(arg, arg, argv, envp = va_arg(ap_, char *const *),
	             return execve(path, argv, envp));
}

SL_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	int (*real)(pid_t *, const char *, const posix_spawn_file_actions_t *,
	            const posix_spawnattr_t *, char *const[], char *const[]) = SL_REAL(posix_spawn, posix_spawn);

	WITH_ENV(envp, e, real ? real(pid, path, fa, attr, argv, e) : ENOSYS);
}

SL_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	int (*real)(pid_t *, const char *, const posix_spawn_file_actions_t *,
	            const posix_spawnattr_t *, char *const[], char *const[]) = SL_REAL(posix_spawnp, posix_spawnp);

	WITH_ENV(envp, e, real ? real(pid, file, fa, attr, argv, e) : ENOSYS);
}
