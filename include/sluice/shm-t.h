/*
 * shm-t.h - the layout of the shared segment (types only).
 *
 * One segment per machine (or per `sluice run`) holds every compiled section: its
 * config (written only by the daemon, under the segment lock and the spec seqlock) and
 * its state (written by any shim, under the segment lock).  Its tables are sized
 * when it is made (struct sl_shm_dims, from the config) and laid out one after the
 * other by sl_shm_layout() (shm.h); every offset follows from the sizes.  Layout
 * rules:
 *   - fixed-size records, found by index, never by pointer;
 *   - explicit padding and a reserved tail, so a minor version can grow into it;
 *   - every size and offset a reader depends on is pinned by _Static_assert;
 *   - a reader that sees another magic, major version or size passes traffic through
 *     untouched (see sl_shm_validate());
 *   - an all-zero section is a valid, unused slot.
 * Any process may scribble on the segment, so readers bounds-check every index and
 * length they take from it.
 */
#ifndef SLUICE_SHM_T_H
#define SLUICE_SHM_T_H

#include "sluice/grid.h"

#include <stddef.h>
#include <stdint.h>

#define SL_SHM_MAGIC 0x45434c53u /* "SLCE" read as little-endian bytes */
#define SL_SHM_MAJOR 14          /* incompatible layout changes: 14, a lease's claims */
#define SL_SHM_MINOR 0           /* compatible additions inside reserved space */

/* The largest tables a segment may have: a segment holding more is not one this
 * build reads (and a config asking for more is refused). */
#define SL_SECTIONS_MAX 1048576
#define SL_PATTERNS_MAX 4194304
#define SL_HOLDERS_MAX 4194304 /* a power of two */
#define SL_PROCS_MAX 1048575   /* entries of the roster: a token's index is 20 bits */
#define SL_SECTION_NAME_MAX 64
#define SL_HOST_MAX 256     /* 253 characters of DNS name, NUL, padding */
#define SL_WAIT_BUCKETS 64  /* wait histogram, see sl_stats_bucket() */
#define SL_SLIDE_BUCKETS 64 /* sliding-window resolution: WINDOW/63 per bucket */
#define SL_KEYID_BYTES 32   /* a key's bytes: an address, a short name, or ... */
#define SL_KEYID_NAME_HEAD 24 /* ... a long name's head, and its hash after it */
#define SL_PATH_MAX 256

/* Pattern kinds.  A zero kind is "no pattern". */
enum sl_pattern_kind {
	SL_PAT_NONE = 0,
	SL_PAT_ANY = 1,    /* "*": every destination */
	SL_PAT_NAME = 2,   /* exact host name, lower case, no trailing dot */
	SL_PAT_SUFFIX = 3, /* "*.example.com": stored as ".example.com" */
	SL_PAT_V4 = 4,     /* IPv4 address or CIDR; addr[0..3] */
	SL_PAT_V6 = 5,     /* IPv6 address or CIDR; addr[0..15] */
};

enum sl_meter {
	SL_METER_CONNECTIONS = 0,
	SL_METER_REQUESTS = 1,
	SL_METER_BYTES = 2,
	SL_METER_DATAGRAMS = 3,
};

enum sl_strategy {
	SL_STRAT_LEAKY_BUCKET = 0,
	SL_STRAT_TOKEN_BUCKET = 1,
	SL_STRAT_FIXED_WINDOW = 2,
	SL_STRAT_SLIDING_WINDOW = 3,
	SL_STRAT_SESSION_WINDOW = 4,
};

/* What a keyed section (`per = ...`) keeps one queue for.  Zero: the section is one
 * queue for all its destinations. */
enum sl_per {
	SL_PER_NONE = 0,
	SL_PER_HOST = 1,         /* the host name (the address when none is known) */
	SL_PER_HOST_PORT = 2,    /* the host name and the port */
	SL_PER_ADDRESS = 3,      /* the peer address, cut to per_prefix4 / per_prefix6 bits */
	SL_PER_ADDRESS_PORT = 4, /* the same and the port */
};

enum sl_mode {
	SL_MODE_ENFORCE = 0,
	SL_MODE_OBSERVE = 1,
};

/* Whose limit a section is (`scope`): this machine's alone, or the fleet's, shared
 * with the other machines through Redis (each holding a lease on a part of it). */
enum sl_scope {
	SL_SCOPE_MACHINE = 0,
	SL_SCOPE_FLEET = 1,
};

/* One pattern of a section's `match`.  In the segment, patterns lie in one table,
 * each section's in a run of its own (sl_spec.pattern_first, npatterns). */
struct sl_pattern {
	uint8_t kind;     /* enum sl_pattern_kind */
	uint8_t prefix;   /* CIDR prefix length in bits (32 or 128 for one address) */
	uint16_t port_lo; /* inclusive port range in host order; 0-65535 = any port */
	uint16_t port_hi;
	uint16_t name_len; /* bytes of name[] in use, < SL_HOST_MAX */
	uint8_t addr[16];  /* network byte order */
	uint32_t section;  /* in the segment: the index of the section it belongs to */
	uint32_t pad;
	char name[SL_HOST_MAX];
};
_Static_assert(sizeof(struct sl_pattern) == 288, "sl_pattern is part of the shm ABI");
_Static_assert(offsetof(struct sl_pattern, addr) == 8, "sl_pattern is part of the shm ABI");
_Static_assert(offsetof(struct sl_pattern, name) == 32, "sl_pattern is part of the shm ABI");

#define SL_REFUND_CODES 7   /* statuses a refund list may name one by one */
#define SL_REFUND_FAILED 1u /* sl_refund.classes: a connection that failed before an answer */

/* A section's compiled config.  Written by the daemon only; read by shims under the
 * header's spec seqlock. */
/* The longest `tolerance = DURATION` a section may have (docs/config.md): a minute. */
#define SL_TOLERANCE_MAX_US 60000000u

struct sl_spec {
	char name[SL_SECTION_NAME_MAX];
	uint32_t npatterns; /* its patterns: pattern_first .. + npatterns - 1 of the
	                     * pattern table (of the config's, before it is loaded);
	                     * readers clamp both to the table */
	uint32_t meter;     /* enum sl_meter */
	uint32_t strategy;  /* enum sl_strategy */
	uint32_t mode;      /* enum sl_mode */
	int32_t refuse;     /* errno for a refused call; 0 = the call's default */
	uint32_t concurrency; /* 0 = no concurrency limit */
	uint64_t amount;    /* requests (or bytes) per window; 0 = no rate limit */
	int64_t window_ns;  /* length of the rate's window */
	uint64_t burst;     /* how many may go back to back after an idle spell, >= 1 */
	int64_t max_wait_ns; /* longest hold; 0 = refuse rather than wait; <0 = forever */
	uint8_t per;         /* enum sl_per: a queue per key instead of one */
	uint8_t per_prefix4; /* per = address: IPv4 bits kept (1-32) */
	uint8_t per_prefix6; /* per = address: IPv6 bits kept (1-128) */
	uint8_t scope;       /* enum sl_scope */
	uint32_t tolerance_us; /* rate strategies: how late a release may come and have
	                        * the next one make it up, in microseconds (at most
	                        * SL_TOLERANCE_MAX_US) */
	uint32_t pattern_first; /* index of its first pattern */
	uint8_t signals;     /* 1: responses on its connections are read (pause.h) */
	uint8_t adapt;       /* 1: 429s halve the rate, good answers climb back */
	uint8_t pad1[2];
	int64_t max_pause_ns; /* the longest pause a response may ask; <0: no clamp */
	uint8_t calendar;     /* enum sl_calendar: the rate's window is a calendar week,
	                       * month or year (window_ns its nominal length) */
	uint8_t durable;      /* 1: a quota the daemon keeps on disk (quota.h): releases
	                       * spend quota_left, granted only after a save */
	uint8_t pad2[2];
	uint32_t override_of; /* an `override` line of a keyed section, made a section of
	                       * its own: its base's slot + 1 (in a config, its index +
	                       * 1); 0: none.  It applies only where its base matches,
	                       * and there in place of it (matchset.c) */
	/* refund = ...: answers the destination does not count give their request (or
	 * connection) back (src/core/refund.c) */
	struct sl_refund {
		uint8_t classes;   /* bit c: every status c00-c99 (1-5); SL_REFUND_FAILED */
		uint8_t ncodes;    /* codes[0..ncodes) */
		uint16_t codes[SL_REFUND_CODES];
	} refund;
};
_Static_assert(offsetof(struct sl_spec, amount) == 88, "sl_spec is part of the shm ABI");
_Static_assert(sizeof(struct sl_spec) == 168, "sl_spec is part of the shm ABI");

/* A sliding window's counts: SL_SLIDE_BUCKETS buckets of ceil(WINDOW/(BUCKETS-1))
 * each, a ring indexed by bucket number; entries older than `newest` - BUCKETS + 1
 * are stale (read as 0). */
struct sl_slide {
	int64_t newest; /* bucket number of the newest entry written */
	uint64_t count[SL_SLIDE_BUCKETS];
};

/* A queue's live state: a section's, or (per = ...) one key's.  Each strategy keeps a
 * scheduling part (which slot the next request gets: what reservations are made
 * against) and an enforcement part (checked against actual release instants, so a
 * late waker can never make the limit looser than it is).  Both change under the
 * segment lock only; the counters are atomic and may be bumped without it.  It
 * holds only what every queue needs; what some need (a sliding window's buckets, a
 * lease, the destination's pause) is in struct sl_state_more, which follows it
 * where it is kept (sl_state_more()). */
struct sl_state {
	/* leaky-bucket, token-bucket (GCRA) */
	int64_t tat_ns;     /* scheduling: earliest slot the next request may get */
	int64_t rel_tat_ns; /* enforcement: GCRA over actual release instants */
	uint64_t admitted;  /* requests released (count) */
	/* The last reservation handed out, so the daemon can return it when its holder
	 * dies before its slot (docs/design.md, "The queue": a caller that gives up returns its
	 * slot when it is still the last one handed out).  last_owner 0: nothing to return. */
	int64_t last_slot;     /* its release time */
	int32_t last_owner;    /* its taker's roster token (roster.h) */
	uint32_t seq;          /* reservations handed out (wraps); unchanged = still the last */
	uint32_t last_seq;     /* seq right after the last reservation */
	/* concurrency: places taken now (each also counted in a holder entry, so the
	 * daemon can give back what dead processes held); conc_futex is bumped at every
	 * place given back, and waiters sleep on it */
	uint32_t conc_open;
	uint32_t conc_waiters;
	uint32_t conc_futex;
	uint32_t conc_recount; /* the daemon's scratch while it recounts places (conc.c) */
	uint32_t quota_left;   /* spec.durable: what releases may still spend (requests, or
	                        * bytes) before the daemon's next save (quota.h) */
	struct sl_undo {       /* what undoing the last reservation restores (strategy.c) */
		int64_t tat_ns;
		int64_t win;       /* fixed: window number; session: window start */
		uint64_t win_used;
		int64_t slide_bucket; /* sliding: the bucket it was counted in */
		uint64_t cost;
	} last_undo;
	union {
		/* fixed-window (win = window number, UTC-aligned) and session-window
		 * (win = start, CLOCK_MONOTONIC); win_used = requests (or bytes)
		 * counted in it */
		struct {
			int64_t win, rel_win;
			uint64_t win_used, rel_win_used;
		};
		/* rate strategies (GCRA), meter = connections: the line the first
		 * writes of deferred connects keep - the earliest slot the next may
		 * have (CLOCK_MONOTONIC; docs/design.md, "First writes on time") */
		int64_t first_tat_ns;
	};
	/* What the destination said (src/core/pause.c): written under the lock by the
	 * shim that read the response, read by every admission under it.  signals = on
	 * is the default, so every key keeps one. */
	struct sl_pause {
		int64_t until_ns;        /* CLOCK_MONOTONIC: nothing is released before it */
		int64_t budget_until_ns; /* a budget (RateLimit r=R;t=T) lasts until then */
		int64_t pace_until_ns;   /* after a pause, releases go one a pace apart
		                          * until then (no herd of every waiter at once) */
		int64_t sched_ns;        /* pacing: the next reservation's earliest slot */
		int64_t cursor_ns;       /* pacing: the next release's earliest instant */
		uint32_t budget_left;    /* ... and this many may still go in it */
		uint32_t count;          /* pauses so far (count, wraps) */
		uint16_t status;         /* the last pause's response status */
		uint8_t kind;            /* its enum sl_signal_kind */
		uint8_t streak;          /* bare 429s in a row: each doubles the back-off */
		uint32_t adapt_ppm;      /* adapt: millionths of the rate in force (0: all) */
	} pause;
};
_Static_assert(sizeof(struct sl_pause) == 56, "sl_pause is part of the shm ABI");
_Static_assert(sizeof(struct sl_state) == 192, "sl_state is part of the shm ABI");

#define SL_LEASE_CLAIMS 32 /* claimed slots a lease keeps (struct sl_lease) */

/* What only some queues need, kept right after their struct sl_state: every
 * section's (struct sl_section), and a key's only in a segment whose key records
 * carry it (sl_shm_dims.key_more: some keyed section needs it, sl_spec_needs_more).
 * Code reaches it through sl_state_more() and only for a spec that needs the part it
 * reads - a key of any other section has none. */
struct sl_state_more {
	/* sliding-window (strategy = sliding-window) */
	struct sl_slide slide, rel_slide;
	/* scope = fleet: this machine's lease on the fleet's limit (src/core/lease.c),
	 * written by the daemon from Redis's answers under the lock, read by every
	 * admission under it.  Zero: no lease yet - nothing goes. */
	struct sl_lease {
		uint32_t flags;      /* SL_LEASE_* */
		uint32_t places;     /* concurrency: the places this machine may hold */
		uint64_t amount;     /* rate strategies: the share, requests (or bytes) per
		                      * window_ns; window strategies: what this machine may
		                      * send in the chunk (count) */
		int64_t window_ns;   /* rate strategies: the window the share is per */
		uint64_t burst;      /* rate strategies: the share's burst (>= 1) */
		int64_t until_ns;    /* window strategies: the chunk is usable until this
		                      * CLOCK_MONOTONIC time */
		uint64_t chunk;      /* window strategies: which chunk; a new one starts the
		                      * counts below afresh */
		uint64_t sched_used; /* window strategies: reserved from the chunk (count) */
		uint64_t rel_used;   /* window strategies: released from the chunk (count) */
		int64_t granted_ns;  /* when the daemon wrote it (CLOCK_MONOTONIC) */
		uint32_t machines;   /* machines sharing it at the last answer (count) */
		uint32_t misses;     /* callers that found no usable share, counted at each
		                      * look (wraps): the daemon reads the demand of a
		                      * machine holding nothing from it */
		int64_t valid_ns;    /* usable until (CLOCK_MONOTONIC): the daemon renews it
		                      * with each answer, or while Redis is away; a machine
		                      * whose daemon died stops using its share before the
		                      * fleet gives it to the others */
		struct sl_grid grid; /* rate strategies counting requests: this machine's
		                      * slots of the fleet's grid (grid.h); releases go at
		                      * them only.  No usable grid: the share's GCRA */
		uint32_t nclaims;    /* a rate on the grid: slots in claim_k (lease.c) */
		uint32_t claims_wanted; /* looks that found no slot of this machine's ahead:
		                      * the daemon claims as many and sets it back to 0 */
		int64_t claims_asked_ns; /* when the daemon last took claims_wanted */
		int64_t claims_got_ns;  /* when claims were last added (CLOCK_MONOTONIC) */
		int64_t claims_look_ns; /* the look last counted in claims_wanted: a release
		                      * check may read the lease twice at one instant */
		int64_t claim_k[SL_LEASE_CLAIMS]; /* slots of the fleet's grid claimed for
		                      * this machine, one request each, ascending
		                      * (docs/design.md, "Claims") */
		int64_t held_until_ns; /* a rate: the latest instant a caller held on it
		                      * said it would look again (CLOCK_MONOTONIC; every
		                      * held caller looks within SL_LEASE_RECHECK_NS, so
		                      * past it by more than a late wake-up, nobody is
		                      * held - one killed while held lapses with it) */
	} lease;
	/* adapt = on: how the last cut and climb went (pause.c) */
	struct sl_adapt {
		uint32_t peak_ppm;  /* the share in force at the last 429 */
		uint32_t floor_ppm; /* the share the last 429 cut it to */
		int64_t cut_ns;     /* when it was last cut */
		int64_t at_ns;      /* when it last climbed */
	} adapt;
	/* A section's own, never a key's: its counters (counters.def: a keyed
	 * section's are summed over its keys), the last pause any of its queues took,
	 * its waits (sl_stats_record_wait) and, when it is keyed, its keys. */
	uint64_t held;      /* of those admitted, requests that had to wait (count) */
	uint64_t refused;   /* requests refused: max_wait exceeded or fallback closed */
	uint64_t given_up;  /* reservations returned by callers that gave up */
	uint64_t observed;  /* mode = observe: requests that would have waited */
	uint64_t undecided; /* calls the shared state could not decide (lock unavailable,
	                     * holder table full, release check never agreeing): decided
	                     * by the fallback policy instead, never simply let go (count) */
	uint64_t repaired;  /* times a state of it was found further ahead than any
	                     * admission can put it, and reset (sl_strategy_repair) */
	int64_t pause_set_ns; /* when the last pause was set (CLOCK_MONOTONIC) */
	uint64_t wait_max_ns;
	uint64_t wait_sum_ns;
	uint64_t wait_hist[SL_WAIT_BUCKETS]; /* counts per bucket of sl_stats_bucket() */
	uint64_t keys;          /* keys held in the key table now */
	uint64_t key_evictions; /* idle keys evicted to make room for new ones */
	uint64_t key_full;      /* calls refused because every key slot it could use was busy */
	uint64_t refunded;      /* requests given back by refund = ... (refund.c) */
};
_Static_assert(sizeof(struct sl_state_more) % 8 == 0, "sl_state_more keeps 8-byte alignment");

/* Whether a queue of spec s reads its more: a sliding window, a fleet lease, adapt.
 * A keyed section's keys carry one only in a segment whose key records have it;
 * one that needs it and finds none is undecided (admit.c), never let go. */
static inline int sl_spec_needs_more(const struct sl_spec *s)
{
	return s->strategy == SL_STRAT_SLIDING_WINDOW || s->scope == SL_SCOPE_FLEET || s->adapt;
}

/* Whether only a daemon can keep a limit of spec s: a window's count (fixed,
 * sliding or session), a durable quota, a fleet's share.  A process that limits
 * itself (control_socket = none) refuses its calls rather than count them alone:
 * each short-lived process would start a window afresh (docs/design.md, "Never a
 * silent split"). */
static inline int sl_spec_needs_daemon(const struct sl_spec *s)
{
	return s->durable || s->scope == SL_SCOPE_FLEET || s->strategy == SL_STRAT_FIXED_WINDOW ||
	       s->strategy == SL_STRAT_SLIDING_WINDOW || s->strategy == SL_STRAT_SESSION_WINDOW;
}

/* The more that follows st: for a section's state always; for a key's only in a
 * segment whose key records carry it (see above). */
static inline struct sl_state_more *sl_state_more(const struct sl_state *st)
{
	return (struct sl_state_more *)(void *)((char *)(void *)(uintptr_t)st + sizeof(*st));
}

/* sl_lease.flags */
#define SL_LEASE_RATE 1u     /* amount, window_ns and burst hold a rate share */
#define SL_LEASE_CHUNK 2u    /* amount, until_ns and chunk hold a window chunk */
#define SL_LEASE_PLACES 4u   /* places holds a concurrency share */
#define SL_LEASE_CLAIMING 16u /* a rate on the grid served by claims: callers with no
                              * slot of this machine's soon ask the daemon for one */
#define SL_LEASE_OUTAGE 8u   /* the daemon cannot reach Redis: the last lease, or the
                              * fleet's limit over `hosts` when there was none */

/* How a section delivers (src/core/delivery.c): each release's lateness after
 * its slot, counted by whoever releases it, and the daemon's figures over its last
 * measured window.  Counts wrap; only their differences are read. */
#define SL_LATE_BUCKETS 24 /* 0: under 1 us; b: [2^(b-1), 2^b) us; the last: above */
struct sl_delivery {
	uint32_t late[SL_LATE_BUCKETS];  /* releases by lateness (count) */
	/* the daemon's: two snapshots half of SL_DELIVERY_WINDOW_NS apart, the
	 * figures are measured from the older one */
	struct sl_delivery_snap {
		int64_t at_ns;                  /* CLOCK_MONOTONIC; 0: not taken */
		uint64_t admitted;              /* the section's admitted then (count) */
		uint64_t queued;                /* callers waiting for their slot then (count) */
		uint32_t late[SL_LATE_BUCKETS];
	} snap[2];
	int64_t window_ns;     /* the window the figures cover (0: none yet) */
	uint64_t per_s_milli;  /* units delivered per second over it, x1000 */
	int64_t late_p50_ns;   /* lateness over it */
	int64_t late_p99_ns;
	uint64_t releases;     /* releases in it (count) */
	uint32_t backlog;      /* 1: callers waited at both ends of it, so the rate
	                        * delivered is what the section can give */
	uint32_t pad;
};

struct sl_section {
	uint32_t in_use;  /* 1 when the slot holds a configured section */
	uint32_t serial;  /* bumped whenever the slot's state is reset or reassigned; a
	                   * shim that matched under one serial charges only that one */
	struct sl_spec spec;
	uint64_t seal;    /* the daemon's checksum of in_use, serial and spec, written
	                   * with them under the spec seqlock: a shim acts on a section
	                   * only while it agrees (summary.h, sl_section_sealed) */
	struct sl_state state;
	struct sl_state_more more; /* right after state: sl_state_more() */
	struct sl_delivery delivery;
};
_Static_assert(offsetof(struct sl_section, more) == offsetof(struct sl_section, state) + sizeof(struct sl_state),
               "a section's more follows its state");
_Static_assert(offsetof(struct sl_section, spec) == 8, "sl_section ABI");
_Static_assert(offsetof(struct sl_section, seal) == 8 + sizeof(struct sl_spec),
               "a section's seal follows the words it seals");
_Static_assert(sizeof(struct sl_section) % 8 == 0, "sl_section keeps 8-byte alignment");

struct sl_shm_header {
	uint32_t magic;        /* SL_SHM_MAGIC */
	uint16_t major;        /* SL_SHM_MAJOR */
	uint16_t minor;        /* SL_SHM_MINOR */
	uint64_t size;         /* total bytes of the segment */
	uint32_t header_size;  /* sizeof(struct sl_shm_header) */
	uint32_t section_size; /* sizeof(struct sl_section) */
	uint32_t sections_off; /* byte offset of sections[0] from the segment start */
	uint32_t max_sections; /* records in the section table */
	uint64_t generation;   /* config generation: +1 per successful load or reload */
	uint32_t spec_seq;     /* seqlock over every spec: odd while the daemon writes */
	uint32_t lock_waiters; /* processes sleeping on the lock's futex */
	uint64_t lock;         /* segment lock, 0 when free: the holder's roster token in
	                        * the low 32 bits (the futex word) and its registration's
	                        * nonce in the high 32, so a holder that died, or a
	                        * scribbled word, is known not to be one (lock.c) */
	int32_t daemon_pid;    /* pid of the daemon that last attached, in its own pid
	                        * namespace (0: none): for people to read; whether it
	                        * lives is daemon_owner's to say */
	uint32_t has_names;    /* some section matches by host name */
	int64_t heartbeat_ns;  /* CLOCK_MONOTONIC of the daemon's last beat */
	uint32_t fallback;     /* the config's fallback, for information */
	uint32_t quota_want;   /* 1: a durable state's quota_left ran low; the daemon saves
	                        * and grants more (quota.h) */
	uint64_t lock_recoveries; /* times a dead holder's lock was taken over (count) */
	char config_path[SL_PATH_MAX]; /* config the daemon loaded, for `sluice run` */
	uint32_t slots_used;   /* sections at index >= this are all unused: readers stop
	                        * there instead of touching every slot */
	uint32_t meters;       /* bit (1 << enum sl_meter) for each meter some section
	                        * uses: the shim skips paths no section meters */
	int64_t wall_off_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC, refreshed by the
	                        * daemon's heartbeat: aligns fixed windows to UTC */
	uint32_t max_keys;     /* records in the key table, fixed at creation */
	uint32_t keys_used;    /* records holding a key (count) */
	/* The rest of the table sizes, fixed at creation (with max_sections and
	 * max_keys they give every offset: sl_shm_layout). */
	uint32_t max_patterns; /* records in the pattern table */
	uint32_t max_holders;  /* entries in the holder table, a power of two */
	uint32_t index_slots;  /* slots of the match index: a power of two, at least
	                        * twice max_patterns (index.c) */
	uint32_t patterns_used; /* patterns of the loaded config (count) */
	/* The match index's summary (index.c), rewritten with it under the seqlock:
	 * which kinds of key it holds and which address prefix lengths, so a lookup
	 * probes only for what is there, and how far any key lies from its home
	 * slot, which bounds every probe. */
	uint32_t index_kinds;  /* bit (kind * 2 + has port): kinds present */
	uint32_t index_run;    /* longest probe run any key needs (slots) */
	uint64_t index_v4_lens;   /* bit n: an IPv4 pattern of prefix length n */
	uint64_t index_v6_lens[3]; /* bit n of the 192: an IPv6 one of length n */
	/* The fleet's Redis as the daemon last saw it (src/daemon/fleet.c), for stat. */
	uint32_t redis_state;  /* enum sl_redis_state */
	uint32_t redis_machines; /* machines the last answer named, at most (count) */
	int64_t redis_answer_ns; /* CLOCK_MONOTONIC of the last answer; 0 none */
	int64_t redis_down_ns;   /* when it was last lost (CLOCK_MONOTONIC); 0 up */
	uint64_t redis_calls;    /* lease calls made (count) */
	uint64_t summary_sum;    /* checksum of the summary fields above (meters,
	                          * has_names, index_*) and the generation, sealed by
	                          * their writer: a reader believes them only when it
	                          * agrees (summary.h) */
	uint32_t moved;          /* 1: a newer segment under the same name took over
	                          * from this one (shm.h, sl_shm_move): every admission
	                          * here is refused the lock and follows the name */
	uint32_t key_size;       /* bytes of a key record: sizeof(struct sl_key), or with
	                          * a struct sl_state_more after it (sl_shm_dims.key_more) */
	char shm_name[40];       /* the name it was made under (shm_name), cut to 39
	                          * bytes: for `sluice segments` (from layout 8.1 on;
	                          * empty in older segments) */
	/* From layout 13 on: the segment is a sealed memfd handed over a socket, and
	 * processes are named by roster tokens (docs/design.md, "The segment"). */
	uint32_t max_procs;      /* entries in the roster (struct sl_proc) */
	int32_t daemon_owner;    /* the daemon's roster token (0: none): it is alive while
	                          * its registration is (roster.h) */
	uint64_t segment_id;     /* random at creation, never 0: tells one segment from
	                          * another (a successor, an orphan) whatever its name */
	int64_t hold_until_ns;   /* CLOCK_MONOTONIC: nothing is released from this
	                          * segment before it - a segment made in place of one
	                          * that was lost, while the programs still on that one
	                          * find it (docs/design.md, "Never a silent split").
	                          * Read only when within SL_HOLD_MAX_NS of now: a
	                          * scribble further ahead is none */
	/* Claims ([sluice] claims = on; docs/design.md, "Claims"), both ways woken
	 * rather than looked for: */
	uint32_t claims_bell;    /* bumped, and woken, by a caller that asks for a
	                          * claim: the daemon's bell thread sleeps on it
	                          * (fleet_claims.c) */
	uint32_t claims_seq;     /* bumped, and woken, by the daemon when claims join
	                          * a lease: callers waiting for one sleep on it */
	uint32_t claims_pad[2];
	uint8_t reserved[472];   /* zero; minor versions grow into it */
};

/* Whether a segment's header carries shm_name (layout 8.1 and every later one). */
static inline int sl_shm_has_name(const struct sl_shm_header *h)
{
	return h->major > 8 || (h->major == 8 && h->minor >= 1);
}

enum sl_redis_state {
	SL_REDIS_NONE = 0,       /* no fleet section: no Redis */
	SL_REDIS_CONNECTING = 1,
	SL_REDIS_UP = 2,
	SL_REDIS_DOWN = 3,       /* unreachable: shaping on the last leases */
	SL_REDIS_LATE = 4,       /* reached, but no answer in time: the leases lapse */
};
_Static_assert(sizeof(struct sl_shm_header) == 1024, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, max_procs) == 512, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, generation) == 32, "sl_shm_header ABI");
/* 8-aligned: the lock is one 64-bit compare-and-swap. */
_Static_assert(offsetof(struct sl_shm_header, lock) == 48, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, config_path) == 88, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, slots_used) == 344, "sl_shm_header ABI");
/* The summary the shims trust (summary.h), where tests scribble on it. */
_Static_assert(offsetof(struct sl_shm_header, has_names) == 60, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, meters) == 348, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, index_kinds) == 384, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, index_run) == 388, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, index_v4_lens) == 392, "sl_shm_header ABI");
_Static_assert(offsetof(struct sl_shm_header, summary_sum) == 456, "sl_shm_header ABI");

/* Who holds concurrency places: one entry per (process, section), in a table of
 * max_holders entries.  owner 0: free. */
struct sl_holder {
	int32_t owner;    /* the holder's roster token (roster.h) */
	uint32_t section; /* index */
	uint32_t serial;  /* the section's serial when the places were taken */
	uint32_t count;   /* places this process holds in it */
};
_Static_assert(sizeof(struct sl_holder) == 16, "sl_holder ABI");
/* (process, section) pairs holding places at once when the config says nothing:
 * a table hashed on the pair (src/core/conc.c), a power of two. */
#define SL_HOLDERS_DEFAULT 16384

/* A holder entry's `section` with this bit set names a key record (its index in
 * the low bits) and `serial` is that record's serial. */
#define SL_HOLDER_KEY 0x80000000u

/* --- the roster: who is attached (src/core/roster.c) ---
 *
 * One entry per process that was handed the segment, written by whoever handed it
 * over (the keeper or a `sluice run`: src/daemon/segserve.c) and ended when the
 * kernel says the process exited (a pidfd).  A process is named in the segment -
 * lock word, holder entries, a state's last reservation - by its token: its
 * entry's index and the generation of its registration (roster.h), never by a pid,
 * which means another process in another pid namespace. */
struct sl_proc {
	uint32_t gen;    /* odd: a live registration; even: free.  +1 at each
	                  * registration and at each end */
	uint32_t nonce;  /* random, never 0: the lock word's high half */
	int32_t pid;     /* as the process sees itself (getpid(), its pid namespace) */
	uint32_t stamp;  /* its start stamp as it read it (proc.h) */
	uint64_t pidns;  /* the inode of its pid namespace; 0 when its /proc does not
	                  * show it its own pids (then nobody reads /proc for it) */
	int32_t kpid;    /* as its registrar saw it (SO_PEERCRED; 0: not visible) */
	uint32_t kstamp; /* its start stamp as the registrar read it (0: unknown) */
};
_Static_assert(sizeof(struct sl_proc) == 32, "sl_proc ABI");
#define SL_PROCS_DEFAULT 16384 /* processes attached at once when the config says nothing */

/* A segment whose daemon has not beaten for this long may have been lost and made
 * anew (its keeper and daemon both gone): its programs ask its socket which one
 * is served, at most once per SL_ORPHAN_CHECK_NS each (docs/design.md, "Never a
 * silent split").  A segment made in place of a lost one holds its releases for
 * SL_ORPHAN_HOLD_NS, so those programs find it before it releases anything. */
#define SL_ORPHAN_NS (3 * 1000000000LL)
#define SL_ORPHAN_CHECK_NS (1000000000LL)
#define SL_ORPHAN_HOLD_NS (SL_ORPHAN_NS + 2 * SL_ORPHAN_CHECK_NS)
#define SL_HOLD_MAX_NS (60 * 1000000000LL)

/* The hold of segment h at `now` (hold_until_ns): an instant nothing is released
 * before, or `now` when none (or a scribble). */
static inline int64_t sl_shm_hold(const struct sl_shm_header *h, int64_t now)
{
	int64_t v = __atomic_load_n(&h->hold_until_ns, __ATOMIC_RELAXED);

	return v > now && v - now <= SL_HOLD_MAX_NS ? v : now;
}

struct sl_shm_header;
/* Whether the process a token names is gone (sl_roster_gone, or a test's own). */
typedef int (*sl_gone_fn)(struct sl_shm_header *h, int32_t owner);

/* --- the match index: which patterns a destination's name or address may take ---
 *
 * An open-addressing table of index_slots slots (a power of two), each a key's
 * 64-bit tag (never 0; 0 marks a free slot) and the run of the refs array (one
 * pattern index each, max_patterns long) listing the patterns with that key.  A
 * key is a kind (exact name, name suffix, IPv4 or IPv6 prefix, any), its bytes (the
 * name or suffix, the address cut to the prefix) and the pattern's port when it
 * has one port, else 0 (src/core/index.c). */
struct sl_index_slot {
	uint64_t tag;
	uint32_t first; /* refs[first .. first + count - 1] */
	uint32_t count;
};
_Static_assert(sizeof(struct sl_index_slot) == 16, "sl_index_slot ABI");

/* --- the key table (per = ...): one record per (section, key) in use ---
 *
 * Two arrays after the holder table, both max_keys long: tags (the key's 64-bit
 * hash, never 0; 0 = a free record) that a lookup scans, 8 bytes each, and the
 * records they stand for.  A key lives within SL_KEY_PROBE records from the one
 * its hash picks (src/core/keys.c). */
struct sl_keyid {
	uint8_t per;      /* enum sl_per it was made under */
	uint8_t family;   /* AF_INET, AF_INET6, or 0 for a host name */
	uint16_t port;    /* host order; 0 unless per includes the port */
	uint16_t len;     /* the address's bytes, or the whole name's length */
	uint16_t pad;
	/* The address cut to its prefix; or a name of up to SL_KEYID_BYTES bytes; or a
	 * longer one's first SL_KEYID_NAME_HEAD bytes and a 64-bit hash of all of it
	 * (keys.c: two names alike in length, head and hash share one queue - stricter
	 * for both, never looser). */
	uint8_t bytes[SL_KEYID_BYTES];
};
_Static_assert(sizeof(struct sl_keyid) == 40, "sl_keyid is part of the shm ABI");

struct sl_key {
	uint32_t in_use;         /* 1: holds a key of section `section` */
	uint32_t section;        /* index of the owning section */
	uint32_t section_serial; /* its serial then: another serial makes the record free */
	uint32_t serial;         /* bumped at each reuse of the record: a ticket holding an
	                          * older serial finds its key again by identity */
	int64_t last_used_ns;    /* last admission: of idle keys, the least recent goes first */
	struct sl_keyid id;
	struct sl_state state;   /* the key's queue, counters and places; in a segment
	                          * whose key_size says so, its struct sl_state_more
	                          * follows the record */
};
_Static_assert(sizeof(struct sl_key) == 256, "a key record is 256 bytes (docs/design.md, \"Keys\")");
_Static_assert(offsetof(struct sl_key, state) + sizeof(struct sl_state) == sizeof(struct sl_key),
               "a key's more follows its state");

/* A key record that carries its more. */
struct sl_key_more {
	struct sl_key key;
	struct sl_state_more more;
};

#define SL_SHM_SECTIONS_OFF 4096 /* sections start on their own page */
#define SL_KEYS_DEFAULT 4096   /* `keys` when the config says nothing */
#define SL_KEYS_MAX 1048576    /* the largest key table: ~2 GiB of segment */
#define SL_KEY_PROBE 32        /* records a key may live in, from its hash's pick */

/* The size of every table of a segment. */
struct sl_shm_dims {
	uint32_t sections; /* section records */
	uint32_t patterns; /* pattern records (the index has twice as many slots, or more) */
	uint32_t holders;  /* holder entries, a power of two */
	uint32_t keys;     /* key records */
	uint32_t key_more; /* 1: each key record carries a struct sl_state_more */
	uint32_t procs;    /* roster entries (processes attached at once) */
};
/* The dims of a segment made without a config (tests, the embedded defaults). */
#define SL_SHM_DIMS_DEFAULT {64, 1024, SL_HOLDERS_DEFAULT, SL_KEYS_DEFAULT, 1, SL_PROCS_DEFAULT}

#endif
