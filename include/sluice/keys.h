/*
 * keys.h - keyed sections (`per = host | host:port | address[/N] | address:port`):
 * one queue, one set of counters and one set of concurrency places per key, all
 * with the section's settings, kept in the segment's key table (shm-t.h).
 *
 * A key is made on first use and lives in one of SL_KEY_PROBE records from the one
 * its hash picks.  Lookups compare 8-byte tags first and touch a record only on a
 * tag hit.  When those records are all taken, the least recently used idle one is
 * evicted: idle means a fresh state would answer every call exactly as the kept one
 * would (sl_strategy_idle), so evicting it is indistinguishable from keeping it.  A
 * call whose records are all busy is refused as the section's `refuse` says, and
 * counted (key_full).  Everything here runs under the segment lock, which every
 * admission takes anyway; nothing walks the table on the hot path.
 */
#ifndef SLUICE_KEYS_H
#define SLUICE_KEYS_H

#include "sluice/match.h"
#include "sluice/shm-t.h"

#include <stddef.h>
#include <stdint.h>

/* What a call's keys are made from: its destination's address, copied, and its
 * name, pointed at - a match or ticket must find its key again by identity after
 * the key's record was evicted and reused, so the name must live as long as
 * they do (the shim keeps it with the socket's record, the supervisor with the
 * call; docs/design.md, "What a socket costs"). */
struct sl_keysrc {
	uint8_t family;   /* AF_INET or AF_INET6 */
	uint8_t pad;
	uint16_t port;    /* host order */
	uint16_t name_len; /* 0: no name known */
	uint16_t pad2;
	uint8_t addr[16];
	const char *name; /* name_len bytes, not NUL-terminated; NULL when none */
};

/* What keys are made of, from d (a name longer than SL_HOST_MAX - 1 is left out:
 * the address keys it then). */
void sl_keysrc_from_dest(struct sl_keysrc *k, const struct sl_dest *d);

/* The key of src under spec s (s->per != SL_PER_NONE). */
void sl_keyid_make(struct sl_keyid *id, const struct sl_spec *s, const struct sl_keysrc *src);

/* Write the key as a user reads it ("api.example.com:443", "198.51.100.0/24",
 * "[2001:db8::]/64").  Treats id as untrusted.  Returns what snprintf returns. */
int sl_keyid_format(const struct sl_keyid *id, char *buf, size_t size);

/* Under the segment lock: the record of section i's key for src.  With `create`, a
 * missing key is made (in a free record, a stale one, or the least recently used
 * idle one, evicted); NULL when it is missing (create = 0) or every record it may
 * use is busy (create = 1; counted in the section's key_full).  `now` decides
 * idleness (with the segment's wall_off) and is the key's last use. */
struct sl_key *sl_keys_find(struct sl_shm_header *h, unsigned i, const struct sl_keysrc *src,
                            int create, int64_t now);
/* The same for a key already made into its id (a saved quota restored: quota.h). */
struct sl_key *sl_keys_find_id(struct sl_shm_header *h, unsigned i, const struct sl_keyid *id,
                               int create, int64_t now);

/* Under the lock: the record `slot` if it still holds section i's key it held at
 * `serial` (so a reference taken earlier is good), else NULL. */
struct sl_key *sl_keys_ref(struct sl_shm_header *h, unsigned i, uint32_t slot, uint32_t serial);

/* A copy of record k of h for a reader (no lock: it may be torn), with its more
 * when the segment's key records carry one, else zeros: the copy's state has its
 * more after it, as in the segment. */
void sl_key_read(struct sl_shm_header *h, const struct sl_key *k, struct sl_key_more *out);

/* Whether record k holds a key of a live section (its owner's serial unchanged). */
int sl_key_live(struct sl_shm_header *h, const struct sl_key *k);

/* Index of record k in the table. */
uint32_t sl_key_slot(struct sl_shm_header *h, const struct sl_key *k);

/* Under the lock, at reload: free every record of a section no longer live.  Walks
 * the whole table: reload only. */
void sl_keys_sweep(struct sl_shm_header *h);

/* Place every live key of `from` in `to` (a new segment of another table size, its
 * sections copied from `from`).  Keys that find no room are dropped. */
void sl_keys_carry(struct sl_shm_header *to, struct sl_shm_header *from);

/* Call fn for every record holding a live key, without the lock (a reader's view:
 * stat, or the daemon choosing which keys to look at under the lock).  Stops when
 * fn returns nonzero. */
void sl_keys_each(struct sl_shm_header *h, int (*fn)(struct sl_key *k, uint32_t slot, void *arg),
                  void *arg);

#endif
