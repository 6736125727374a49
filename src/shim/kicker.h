/*
 * kicker.h - the shim's one thread of its own, which acts on held sockets at
 * their release instants (kicker.c): deferred connects made, held writes'
 * registrations put back.
 */
#ifndef SLUICE_SHIM_KICKER_H
#define SLUICE_SHIM_KICKER_H

struct sl_record;

/* Under rec->lock: rec is to be looked at when rec->release_ns comes (a deferred
 * connect's slot, or a held write's).  Starts the thread on first use; a thread
 * that cannot be started leaves it to the program's own hooks, as before. */
void sl_kicker_due(struct sl_record *rec);

/* Under rec->lock, as its connect is deferred: note which socket rec->fd is, so
 * the thread never acts on another that took the descriptor's number. */
void sl_kicker_note_socket(struct sl_record *rec);

/* Whether the thread may ask to be realtime (kicker.c): set once, at the shim's
 * start, from SLUICE_REALTIME - read then, as the program's own threads may
 * change the environment later. */
void sl_kicker_allow_realtime(int allowed);

/* Whether the thread runs (in this process): records with an entry are its. */
int sl_kicker_running(void);

/* Whether the running kicker is woken when claims come (futex_waitv): an
 * admission stepped for a held socket may then look again for a claim seldom
 * (sl_pending.claims_wakeable). */
int sl_kicker_claims_wakeable(void);

/* Whether the thread runs and has records to act on: an instant to come at which
 * it may call epoll_ctl on one of the program's sets (a hint, read without lock). */
int sl_kicker_has_work(void);

/* In a fork child: no thread, nothing queued (the records are the parent's). */
void sl_kicker_after_fork(void);

#endif
