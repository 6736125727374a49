/*
 * deepbind.c - libraries loaded with RTLD_DEEPBIND (docs/design.md, "Libraries
 * loaded with RTLD_DEEPBIND").
 *
 * A library opened with RTLD_DEEPBIND looks its symbols up in its own
 * dependencies before the global scope, so its connect, send and close bind to
 * libc's and never reach a preloaded shim.  PHP opens every extension that way:
 * curl_exec went unshaped while file_get_contents in the same process was held.
 *
 * The hook opens such a library itself and then points each of the new objects'
 * GOT slots that name one of our hooks at the hook - the binding the library
 * would have had without RTLD_DEEPBIND.  Every other dlopen is a sibling call to
 * libc's (glibc finds the caller from the return address: its RUNPATH, $ORIGIN,
 * its namespace), and so is a RTLD_DEEPBIND load whose search could depend on
 * who asked (a bare name or one with '$' from a caller with a run path, or a
 * caller outside the base namespace): that one is said, once, with the
 * workaround (sluice run --seccomp sees system calls whoever makes them).
 */
#include "shim.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SL_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define SL_R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define SL_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define SL_R_GLOB_DAT R_AARCH64_GLOB_DAT
#endif

#define SL_R_SYM(info) ELF64_R_SYM(info)
#define SL_R_TYPE(info) ELF64_R_TYPE(info)

/* Every name the shim exports (hooks.def): a library bound past us needs all of
 * them, the descriptor hooks as much as the sends, or the shim's records would
 * miss its closes. */
static const char *const hook_names[] = {
#define SL_HOOK(ret, name, params) #name,
#define SL_EXPORT_ONLY(name) #name,
#include "hooks.def"
#undef SL_HOOK
#undef SL_EXPORT_ONLY
};
#define HOOK_COUNT (sizeof(hook_names) / sizeof(hook_names[0]))

/* The objects loaded before the call, by program header address. */
struct known {
	const void **phdr;
	size_t n, cap;
};

static int note_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct known *k = arg;

	(void)size;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 64;
		const void **p = realloc(k->phdr, cap * sizeof(*p));

		if (!p)
			return 1; /* stop: unknown objects are then patched too, harmlessly */
		k->phdr = p;
		k->cap = cap;
	}
	k->phdr[k->n++] = info->dlpi_phdr;
	return 0;
}

static int is_known(const struct known *k, const void *phdr)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->phdr[i] == phdr)
			return 1;
	return 0;
}

/* Our own definition of a hook, looked up in the shim's own object so that a
 * later preload of the same names cannot stand in for it. */
static void *own_hook(const char *name)
{
	static void *self;
	Dl_info di;

	if (!self) {
		if (!dladdr((void *)own_hook, &di) || !di.dli_fname)
			return NULL;
		self = sl_real.dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
		if (!self)
			return NULL;
	}
	return dlsym(self, name);
}

static int hook_index(const char *name)
{
	for (size_t i = 0; i < HOOK_COUNT; i++)
		if (strcmp(hook_names[i], name) == 0)
			return (int)i;
	return -1;
}

/* Dynamic entries hold addresses glibc has already relocated on these targets;
 * one written relative to the object is made absolute. */
static uintptr_t dyn_addr(ElfW(Addr) base, ElfW(Addr) v)
{
	return v < base ? base + v : v;
}

struct relro {
	uintptr_t start, end; /* page-aligned; start == end when none */
};

/* Point one GOT slot at a hook; a slot under RELRO is made writable for the write
 * and read-only again after it. */
static int write_slot(uintptr_t slot, void *hook, const struct relro *r)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t p = slot & ~(uintptr_t)(page - 1);
	int guarded = r->start <= slot && slot < r->end;

	if (guarded && mprotect((void *)p, (size_t)page, PROT_READ | PROT_WRITE) != 0)
		return -1;
	__atomic_store_n((void **)slot, hook, __ATOMIC_RELEASE);
	if (guarded)
		mprotect((void *)p, (size_t)page, PROT_READ);
	return 0;
}

struct relocs {
	const ElfW(Rela) * rela;
	size_t count;
};

static int patch_relocs(const struct dl_phdr_info *info, struct relocs rl, const ElfW(Sym) * symtab,
                        const char *strtab, const struct relro *r)
{
	int patched = 0;

	for (size_t i = 0; i < rl.count; i++) {
		const ElfW(Rela) *e = &rl.rela[i];
		unsigned long type = SL_R_TYPE(e->r_info);
		const ElfW(Sym) *sym = &symtab[SL_R_SYM(e->r_info)];
		int h;
		void *hook;

		if ((type != SL_R_JUMP_SLOT && type != SL_R_GLOB_DAT) || SL_R_SYM(e->r_info) == 0 ||
		    sym->st_shndx != SHN_UNDEF)
			continue; /* not an import: an object defining connect keeps its own */
		h = hook_index(strtab + sym->st_name);
		if (h < 0 || !(hook = own_hook(hook_names[h])))
			continue;
		if (write_slot(info->dlpi_addr + e->r_offset, hook, r) == 0)
			patched++;
	}
	return patched;
}

/* Bind one object's imports of hooked names to the hooks (x86-64 and arm64 use
 * RELA relocations; an object with REL ones is left as it is). */
static int patch_object(const struct dl_phdr_info *info)
{
	const ElfW(Dyn) *dyn = NULL;
	struct relro r = {0, 0};
	long page = sysconf(_SC_PAGESIZE);
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	struct relocs plt = {NULL, 0}, data = {NULL, 0};
	long pltrel = DT_RELA;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
		else if (ph->p_type == PT_GNU_RELRO) {
			r.start = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(page - 1);
			r.end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + (uintptr_t)page - 1) &
			        ~(uintptr_t)(page - 1);
		}
	}
	if (!dyn)
		return 0;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		ElfW(Addr) a = dyn_addr(info->dlpi_addr, dyn->d_un.d_ptr);

		switch (dyn->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)a; break;
		case DT_STRTAB: strtab = (const char *)a; break;
		case DT_JMPREL: plt.rela = (const ElfW(Rela) *)a; break;
		case DT_PLTRELSZ: plt.count = dyn->d_un.d_val / sizeof(ElfW(Rela)); break;
		case DT_PLTREL: pltrel = (long)dyn->d_un.d_val; break;
		case DT_RELA: data.rela = (const ElfW(Rela) *)a; break;
		case DT_RELASZ: data.count = dyn->d_un.d_val / sizeof(ElfW(Rela)); break;
		default: break;
		}
	}
	if (!symtab || !strtab || pltrel != DT_RELA)
		return 0;
	return (plt.rela ? patch_relocs(info, plt, symtab, strtab, &r) : 0) +
	       (data.rela ? patch_relocs(info, data, symtab, strtab, &r) : 0);
}

static int patch_new(struct dl_phdr_info *info, size_t size, void *arg)
{
	const struct known *k = arg;
	int n;

	(void)size;
	if (is_known(k, info->dlpi_phdr))
		return 0;
	n = patch_object(info);
	sl_debug("deepbind: %s: %d imports bound to the shim", info->dlpi_name, n);
	return 0;
}

/* Whether glibc's search for `file` could depend on the caller: a name without a
 * slash is searched through the caller's DT_RPATH/DT_RUNPATH, '$' expands $ORIGIN
 * from it, and a caller outside the base namespace loads into its own. */
static int caller_decides(const char *file, const void *caller)
{
	struct link_map *lm = NULL;
	Dl_info di;
	Lmid_t ns = LM_ID_BASE;

	if (!file)
		return 1;
	if (!dladdr1(caller, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return 1;
	if (dlinfo(lm, RTLD_DI_LMID, &ns) != 0 || ns != LM_ID_BASE)
		return 1;
	if (strchr(file, '$'))
		return 1;
	if (strchr(file, '/'))
		return 0;
	for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_RPATH || d->d_tag == DT_RUNPATH)
			return 1;
	return 0;
}

/* Whether the hook opens this RTLD_DEEPBIND load itself and binds it to the
 * shim; when the caller's search decides, it is said once instead. */
static int deepbind_ours(const char *file, const void *caller)
{
	static atomic_int told;

	if (!sl_shim_may_shape())
		return 0; /* nothing to shape: no reason to bind anything */
#if defined(SL_R_JUMP_SLOT)
	if (!caller_decides(file, caller))
		return 1;
#else
	(void)caller;
#endif
	if (!atomic_exchange(&told, 1))
		sl_shim_tell("%s is loaded with RTLD_DEEPBIND, so its calls bypass libsluice: "
		             "run the program with `sluice run --seccomp` to shape them",
		             file ? file : "(the program)");
	return 0;
}

/* Not inlined into dlopen(): the hook's common path must stay a sibling call. */
__attribute__((noinline)) static void *deepbind_open(const char *file, int mode)
{
	struct known k = {NULL, 0, 0};
	void *h;

	dl_iterate_phdr(note_object, &k);
	h = sl_real.dlopen(file, mode);
	if (h)
		dl_iterate_phdr(patch_new, &k);
	free(k.phdr);
	return h;
}

/* Sibling calls are asked for by name: at -O1 (make asan) gcc makes none, and a
 * call from here would make libsluice the caller of every dlopen. */
__attribute__((optimize("optimize-sibling-calls"))) SL_EXPORT void *dlopen(const char *file, int mode)
{
	void *(*real)(const char *, int) = SL_REAL(dlopen, dlopen);

	if (sl_unlikely(mode & RTLD_DEEPBIND) && real && deepbind_ours(file, __builtin_return_address(0)))
		return deepbind_open(file, mode);
	/* A sibling call: glibc reads its caller - whose RUNPATH and namespace the
	 * search follows - from the return address, which stays the program's. */
	return real ? real(file, mode) : NULL;
}
