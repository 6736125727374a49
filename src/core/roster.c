/* Who is attached to a segment, and whether they live (roster.h). */
#include "sluice/roster.h"
#include "sluice/common.h"
#include "sluice/proc.h"
#include "sluice/shm.h"
#include "sluice/sys.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define A(p) ((_Atomic __typeof__(*(p)) *)(p))

/* The number a /proc link names: "1234" (/proc/self) or "pid:[4026531836]"
 * (/proc/self/ns/pid).  0 when unreadable. */
static uint64_t link_number(const char *path)
{
	char buf[64];
	long n = sl_sys(SYS_readlinkat, AT_FDCWD, path, buf, sizeof(buf) - 1);
	const char *p = buf;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	while (*p && (*p < '0' || *p > '9'))
		p++;
	return strtoull(p, NULL, 10);
}

struct sl_proc_id sl_roster_me(void)
{
	static struct sl_proc_id cached;
	static _Atomic int32_t cached_pid;
	struct sl_proc_id me = {.pid = (int32_t)sl_sys(SYS_getpid)};

	if (atomic_load_explicit(&cached_pid, memory_order_acquire) == me.pid)
		return cached;
	me.stamp = sl_proc_self_stamp(me.pid);
	/* Only when this process's /proc numbers processes as its own pid namespace
	 * does (a container may see the host's /proc) may others of that namespace
	 * look its pid up there. */
	if (link_number("/proc/self") == (uint64_t)me.pid)
		me.pidns = link_number("/proc/self/ns/pid");
	/* Racing threads write the same values. */
	cached = me;
	atomic_store_explicit(&cached_pid, me.pid, memory_order_release);
	return me;
}

struct sl_proc *sl_roster(struct sl_shm_header *h, uint32_t *n)
{
	const struct sl_shm_view *v = h ? sl_shm_view(h) : NULL;

	*n = v ? v->dims.procs : 0;
	return v && v->dims.procs ? (struct sl_proc *)(void *)((char *)h + v->at.procs) : NULL;
}

static int32_t token_of(uint32_t index, uint32_t gen)
{
	return (int32_t)(((gen >> 1) & SL_TOKEN_GEN_MASK) << SL_TOKEN_INDEX_BITS | (index + 1));
}

/* The entry `token` names and the generation it was handed out under, or NULL. */
static struct sl_proc *named(struct sl_shm_header *h, int32_t token, uint32_t *gen)
{
	uint32_t n, index = ((uint32_t)token & SL_TOKEN_INDEX_MASK) - 1;
	struct sl_proc *r = sl_roster(h, &n);
	uint32_t g;

	if (token <= 0 || !r || index >= n)
		return NULL;
	g = atomic_load_explicit(A(&r[index].gen), memory_order_acquire);
	if (!(g & 1) || ((g >> 1) & SL_TOKEN_GEN_MASK) != ((uint32_t)token >> SL_TOKEN_INDEX_BITS))
		return NULL;
	*gen = g;
	return &r[index];
}

static uint32_t random_nonce(void)
{
	uint32_t x = 0;

	if (sl_sys(SYS_getrandom, &x, sizeof(x), 0) != (long)sizeof(x) || x == 0) {
		/* No entropy to be had: any value but 0 does, a nonce guards against
		 * scribbles and stale words, not against guessing. */
		x = (uint32_t)sl_sys(SYS_getpid) * 2654435761u ^ (uint32_t)(uintptr_t)&x;
		x = x ? x : 1;
	}
	return x;
}

int32_t sl_roster_enter(struct sl_shm_header *h, const struct sl_proc_id *who, int32_t kpid, uint32_t kstamp,
                        uint32_t *nonce)
{
	uint32_t n;
	struct sl_proc *r = sl_roster(h, &n);
	/* Start anywhere, so registrars racing for entries rarely meet. */
	uint32_t start = n ? random_nonce() % n : 0;

	for (uint32_t j = 0; r && j < n; j++) {
		uint32_t i = (start + j) % n, g = atomic_load_explicit(A(&r[i].gen), memory_order_relaxed);

		if ((g & 1) || !atomic_compare_exchange_strong(A(&r[i].gen), &g, g + 1))
			continue;
		/* Ours.  Written before the token is handed out: nobody names the entry
		 * until then. */
		r[i].nonce = random_nonce();
		r[i].pid = who->pid;
		r[i].stamp = who->stamp;
		r[i].pidns = who->pidns;
		r[i].kpid = kpid;
		r[i].kstamp = kstamp;
		atomic_thread_fence(memory_order_release);
		if (nonce)
			*nonce = r[i].nonce;
		return token_of(i, g + 1);
	}
	return -ENOSPC;
}

int sl_roster_leave(struct sl_shm_header *h, int32_t token)
{
	uint32_t g;
	struct sl_proc *e = named(h, token, &g);

	return e && atomic_compare_exchange_strong(A(&e->gen), &g, g + 1);
}

struct sl_proc *sl_roster_entry(struct sl_shm_header *h, int32_t token)
{
	uint32_t g;

	return named(h, token, &g);
}

uint32_t sl_roster_nonce(struct sl_shm_header *h, int32_t token)
{
	struct sl_proc *e = sl_roster_entry(h, token);

	return e ? atomic_load_explicit(A(&e->nonce), memory_order_relaxed) : 0;
}

int sl_roster_gone(struct sl_shm_header *h, int32_t token, uint32_t nonce)
{
	struct sl_proc *e = sl_roster_entry(h, token);
	struct sl_proc_id me;
	int32_t pid;
	uint64_t ns;

	if (!e || (nonce && atomic_load_explicit(A(&e->nonce), memory_order_relaxed) != nonce))
		return 1;
	pid = atomic_load_explicit(A(&e->pid), memory_order_relaxed);
	ns = atomic_load_explicit(A(&e->pidns), memory_order_relaxed);
	me = sl_roster_me();
	if (ns && ns == me.pidns && pid > 0)
		return sl_proc_owner(pid, atomic_load_explicit(A(&e->stamp), memory_order_relaxed)) == SL_PROC_GONE;
	return 0; /* another namespace: its registrar says when it ends */
}

uint32_t sl_roster_each(struct sl_shm_header *h, int (*fn)(int32_t token, struct sl_proc *e, void *arg),
                        void *arg)
{
	uint32_t n, live = 0;
	struct sl_proc *r = sl_roster(h, &n);

	for (uint32_t i = 0; r && i < n; i++) {
		uint32_t g = atomic_load_explicit(A(&r[i].gen), memory_order_acquire);

		if (!(g & 1))
			continue;
		live++;
		if (fn && fn(token_of(i, g), &r[i], arg))
			break;
	}
	return live;
}

void sl_roster_carry(struct sl_shm_header *to, struct sl_shm_header *from)
{
	uint32_t nf, nt;
	struct sl_proc *f = sl_roster(from, &nf), *t = sl_roster(to, &nt);

	if (f && t)
		memcpy(t, f, (size_t)SL_MIN(nf, nt) * sizeof(*t));
}
