/*
 * Memory for the parts of hold records (slab.h): size classes 16 bytes apart up to
 * 1 KiB, then 2, 4 and 8 KiB, each a free list of pieces cut from 64 KiB chunks
 * mmap'd as needed.  Never malloc: the hooks that allocate may run inside a signal
 * handler of the program's (a send from a handler), or inside its malloc (a
 * write to a socket from a malloc hook), and a part is allocated under a record's
 * lock.  A piece freed goes back to its class's list, never to the kernel: a
 * process keeps what it used at most at once, as the record pool does.
 */
#include "slab.h"

#include <stdatomic.h>
#include <sys/mman.h>

#define CHUNK (64 * 1024)
#define SMALL_STEP 16
#define SMALL_MAX 1024
#define CLASSES (SMALL_MAX / SMALL_STEP + 3) /* 16..1024, 2048, 4096, 8192 */

struct piece {
	struct piece *next;
};

struct class {
	struct sl_mutex lock;
	struct piece *free;
	char *cut;      /* the current chunk's unused part */
	size_t left;    /* its bytes */
};

static struct class classes[CLASSES];
static _Atomic size_t mapped; /* bytes mmap'd for parts (sl_slab_mapped) */

static int class_of(size_t size, size_t *piece)
{
	int c;

	if (size <= SMALL_MAX) {
		c = (int)((size + SMALL_STEP - 1) / SMALL_STEP) - 1;
		if (c < 0)
			c = 0;
		*piece = (size_t)(c + 1) * SMALL_STEP;
		return c;
	}
	for (c = SMALL_MAX / SMALL_STEP, *piece = 2 * SMALL_MAX; c < CLASSES; c++, *piece *= 2)
		if (size <= *piece)
			return c;
	return -1;
}

void *sl_slab_alloc(size_t size)
{
	struct class *k;
	size_t piece;
	void *p = NULL;
	int c = class_of(size, &piece);

	if (c < 0)
		return NULL;
	k = &classes[c];
	sl_shim_lock(&k->lock);
	if (k->free) {
		p = k->free;
		k->free = k->free->next;
	} else {
		if (k->left < piece) {
			void *chunk = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (chunk != MAP_FAILED) {
				k->cut = chunk;
				k->left = CHUNK;
				atomic_fetch_add_explicit(&mapped, CHUNK, memory_order_relaxed);
			}
		}
		if (k->left >= piece) {
			p = k->cut;
			k->cut += piece;
			k->left -= piece;
		}
	}
	sl_shim_unlock(&k->lock);
	return p;
}

void sl_slab_free(void *p, size_t size)
{
	struct class *k;
	size_t piece;
	int c = class_of(size, &piece);

	if (!p || c < 0)
		return;
	k = &classes[c];
	sl_shim_lock(&k->lock);
	((struct piece *)p)->next = k->free;
	k->free = p;
	sl_shim_unlock(&k->lock);
}

size_t sl_slab_piece(size_t size)
{
	size_t piece;

	return class_of(size, &piece) < 0 ? 0 : piece;
}

size_t sl_slab_mapped(void)
{
	return atomic_load_explicit(&mapped, memory_order_relaxed);
}

void sl_slab_after_fork(void)
{
	for (int c = 0; c < CLASSES; c++)
		sl_mutex_reset(&classes[c].lock);
}
