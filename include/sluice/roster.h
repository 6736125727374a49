/*
 * roster.h - who is attached to a segment, named so that every pid namespace agrees
 * (docs/design.md, "Who holds what").
 *
 * A process that is handed the segment is entered in its roster (struct sl_proc,
 * shm-t.h) by whoever handed it over, and is named in the segment by the token of
 * that entry: lock words, holder entries and a state's last reservation hold
 * tokens, never pids.  A token is the entry's index + 1 in its low 20 bits and
 * the registration's generation in the 11 above, so it is positive, never 0, and
 * a token of an entry that was since freed and given to another process is known
 * for a stale one (2,048 registrations of one entry later it could be taken for
 * the new one; the daemon reaps what a dead token held within a second).
 *
 * Whether a token's process lives is decided by, in order:
 *   - its entry: freed (even generation), another generation, or another nonce
 *     (for a lock word) - gone;
 *   - its pid, when the asker shares its pid namespace and /proc shows both of
 *     them their own pids: gone when /proc says so (no such process, a zombie,
 *     another start stamp), as before there were namespaces;
 *   - otherwise alive: the registrar ends the entry when the kernel says the
 *     process exited (a pidfd polls readable at its exit, zombie or not).
 * A process killed -9 while its registrar is down is seen dead by the askers of
 * its own namespace at once, by the others when a registrar is back and checks
 * what the previous one entered (sl_roster_each).
 */
#ifndef SLUICE_ROSTER_H
#define SLUICE_ROSTER_H

#include "sluice/shm-t.h"

#include <stdint.h>

#define SL_TOKEN_INDEX_BITS 20
#define SL_TOKEN_INDEX_MASK ((1u << SL_TOKEN_INDEX_BITS) - 1)
#define SL_TOKEN_GEN_MASK 0x7ffu

/* How a process sees itself: its pid, start stamp and pid namespace, as it can
 * read them (sl_roster_me).  pidns 0: its /proc shows it no pids of its own. */
struct sl_proc_id {
	int32_t pid;
	uint32_t stamp;
	uint64_t pidns;
};

/* This process as it sees itself (cached per pid: a fork child reads again). */
struct sl_proc_id sl_roster_me(void);

/* The roster of h (its view's length in *n), or NULL when h has none this
 * process may index. */
struct sl_proc *sl_roster(struct sl_shm_header *h, uint32_t *n);

/* Enter a process: `who` as it says it sees itself, kpid and kstamp as the
 * registrar sees it (0: not visible).  Takes a free entry (compare-and-swap: any
 * number of registrars may enter at once), writes it, and returns its token, or
 * -ENOSPC when every entry is taken.  *nonce gets the registration's nonce. */
int32_t sl_roster_enter(struct sl_shm_header *h, const struct sl_proc_id *who, int32_t kpid, uint32_t kstamp,
                        uint32_t *nonce);

/* End the registration `token` names (its process exited): 1 when it did, 0 when
 * the entry had ended or moved on already. */
int sl_roster_leave(struct sl_shm_header *h, int32_t token);

/* The entry `token` names while its registration is live, else NULL. */
struct sl_proc *sl_roster_entry(struct sl_shm_header *h, int32_t token);

/* Whether the process `token` names is gone (above).  nonce != 0: a lock word's
 * high half, which must be the registration's too.  A few system calls when the
 * pid is looked up in /proc: for slow paths only. */
int sl_roster_gone(struct sl_shm_header *h, int32_t token, uint32_t nonce);

/* The nonce of the live registration `token` names (0: none). */
uint32_t sl_roster_nonce(struct sl_shm_header *h, int32_t token);

/* Live registrations: fn(token, entry, arg) for each; fn returns non-zero to stop.
 * Returns how many were live. */
uint32_t sl_roster_each(struct sl_shm_header *h, int (*fn)(int32_t token, struct sl_proc *e, void *arg),
                        void *arg);

/* Copy every live entry of `from` into `to` at the same index (a moved segment:
 * tokens mean the same in both).  to's roster is at least as long. */
void sl_roster_carry(struct sl_shm_header *to, struct sl_shm_header *from);

#endif
