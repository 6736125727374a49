/*
 * HPACK, from a well-kept decoder (hpack.h): nghttp2's inflater, rather than one
 * written here.  libnghttp2 is opened with dlopen the first time an HTTP/2
 * connection's answers are to be read, so that every other program pays nothing
 * for it and the shim does not depend on it: without it (not installed), HTTP/2
 * answers are not read, said once under SLUICE_DEBUG.
 *
 * The decoder's memory comes from the shim's pieces (slab.h), never malloc - the
 * hooks run with the record's lock held, possibly inside the program's malloc -
 * and, for a piece above what the slab keeps (a field of more than 8 KiB), from
 * mmap directly.  Each block carries its size in front of it.
 */
#include "hpack.h"
#include "shim.h"
#include "slab.h"

#include <dlfcn.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#define SLAB_MAX 8192
#define HEAD 32 /* the block's size, in front of it (keeps the slab's alignment) */

struct fns {
	int (*inflate_new2)(nghttp2_hd_inflater **, nghttp2_mem *);
	void (*inflate_del)(nghttp2_hd_inflater *);
	int (*change_table_size)(nghttp2_hd_inflater *, size_t);
	ssize_t (*inflate_hd2)(nghttp2_hd_inflater *, nghttp2_nv *, int *, const uint8_t *, size_t, int);
	int (*end_headers)(nghttp2_hd_inflater *);
};

static struct fns fns;
static int loaded; /* 1: fns usable */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *lib = dlopen("libnghttp2.so.14", RTLD_LAZY | RTLD_LOCAL);

	if (!lib) {
		sl_debug("HTTP/2 answers: libnghttp2.so.14 cannot be opened (%s): they are not read", dlerror());
		return;
	}
	*(void **)&fns.inflate_new2 = dlsym(lib, "nghttp2_hd_inflate_new2");
	*(void **)&fns.inflate_del = dlsym(lib, "nghttp2_hd_inflate_del");
	*(void **)&fns.change_table_size = dlsym(lib, "nghttp2_hd_inflate_change_table_size");
	*(void **)&fns.inflate_hd2 = dlsym(lib, "nghttp2_hd_inflate_hd2");
	*(void **)&fns.end_headers = dlsym(lib, "nghttp2_hd_inflate_end_headers");
	loaded = fns.inflate_new2 && fns.inflate_del && fns.change_table_size && fns.inflate_hd2 && fns.end_headers;
	if (!loaded)
		sl_debug("HTTP/2 answers: libnghttp2 lacks the HPACK decoder's calls: they are not read");
}

int sl_hpack_available(void)
{
	pthread_once(&load_once, load);
	return loaded;
}

/* --- memory --- */

static void *mem_alloc(size_t size, void *ud)
{
	size_t total = size + HEAD;
	char *p;

	(void)ud;
	if (total < size)
		return NULL;
	if (total <= SLAB_MAX) {
		p = sl_slab_alloc(total);
	} else {
		p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			p = NULL;
	}
	if (!p)
		return NULL;
	memcpy(p, &total, sizeof(total));
	return p + HEAD;
}

static void mem_free(void *ptr, void *ud)
{
	char *p = (char *)ptr - HEAD;
	size_t total;

	(void)ud;
	if (!ptr)
		return;
	memcpy(&total, p, sizeof(total));
	if (total <= SLAB_MAX)
		sl_slab_free(p, total);
	else
		munmap(p, total);
}

static void *mem_calloc(size_t nmemb, size_t size, void *ud)
{
	void *p;

	if (size && nmemb > SIZE_MAX / size)
		return NULL;
	if ((p = mem_alloc(nmemb * size, ud)))
		memset(p, 0, nmemb * size);
	return p;
}

static void *mem_realloc(void *ptr, size_t size, void *ud)
{
	size_t old;
	void *p;

	if (!ptr)
		return mem_alloc(size, ud);
	if (!size) {
		mem_free(ptr, ud);
		return NULL;
	}
	memcpy(&old, (char *)ptr - HEAD, sizeof(old));
	if (!(p = mem_alloc(size, ud)))
		return NULL;
	memcpy(p, ptr, SL_MIN(old - HEAD, size));
	mem_free(ptr, ud);
	return p;
}

static nghttp2_mem shim_mem = {NULL, mem_alloc, mem_free, mem_calloc, mem_realloc};

/* --- the decoder --- */

struct sl_hpack *sl_hpack_new(void)
{
	nghttp2_hd_inflater *h = NULL;

	if (!sl_hpack_available() || fns.inflate_new2(&h, &shim_mem) != 0)
		return NULL;
	return (struct sl_hpack *)h;
}

void sl_hpack_free(struct sl_hpack *h)
{
	if (h)
		fns.inflate_del((nghttp2_hd_inflater *)h);
}

int sl_hpack_table(struct sl_hpack *h, size_t max)
{
	return fns.change_table_size((nghttp2_hd_inflater *)h, max) == 0 ? 0 : -1;
}

int sl_hpack_feed(struct sl_hpack *h, const uint8_t *in, size_t n, int last, sl_hpack_field_fn fn, void *arg)
{
	nghttp2_hd_inflater *inf = (nghttp2_hd_inflater *)h;

	for (;;) {
		nghttp2_nv nv;
		int flags = 0;
		ssize_t used = fns.inflate_hd2(inf, &nv, &flags, in, n, last);

		if (used < 0)
			return -1;
		if (used > 0) { /* (an empty block's end comes with no bytes at all) */
			in += used;
			n -= (size_t)used;
		}
		if (flags & NGHTTP2_HD_INFLATE_EMIT)
			fn(arg, (const char *)nv.name, nv.namelen, (const char *)nv.value, nv.valuelen);
		if (flags & NGHTTP2_HD_INFLATE_FINAL) {
			fns.end_headers(inf);
			return 0;
		}
		if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && n == 0)
			return 0;
	}
}
