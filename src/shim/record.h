/*
 * record.h - a held socket's record and the parts it takes while a state needs
 * them (record.c, talk.c; docs/design.md, "What a socket costs").
 *
 * A matched non-blocking connect() whose place is not due yet is deferred: the
 * program sees EINPROGRESS, the socket a record in state DEFERRED, and the real
 * connect is made at the release.  A connection first named by its first write
 * (SNI, Host, CONNECT) is already open: its record starts in FIRST, and that write
 * reserves a place (WAITING) and is refused with EAGAIN until it is released.
 * A record that has nothing more to hold goes at the connection's next write; one
 * that meters requests or bytes, or holds concurrency places, lives until close.
 */
#ifndef SLUICE_SHIM_RECORD_H
#define SLUICE_SHIM_RECORD_H

#include "shim.h"
#include "sluice/http1.h"
#include "sluice/pending.h"
#include "sluice/response.h"
#include "slab.h"

#include <netinet/in.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>

enum sl_record_state {
	SL_REC_FIRST = 1,     /* nothing reserved yet: the next write takes a place */
	SL_REC_WAITING = 2,   /* the place is reserved: writes wait for release_ns */
	SL_REC_DEFERRED = 3,  /* non-blocking connect not made yet (the program saw
	                        * EINPROGRESS): its admission (pend) waits for a
	                        * concurrency place or for its rate slot; stepped again at
	                        * release_ns and made once it answers GO.  Meanwhile the
	                        * socket shows no events at all */
	SL_REC_OPEN = 4,      /* released: only what it meters or holds is looked at */
	SL_REC_REFUSED = 5,   /* a deferred connect refused (max_wait) or failed at once:
	                        * SO_ERROR reports refuse_errno, writes fail with it */
};

/* What a record stands for, which decides what happens after its release. */
enum sl_record_kind {
	SL_KIND_CONNECTION = 0,    /* a connection's first write; the record then goes */
	SL_KIND_DATAGRAM = 1,      /* one datagram sent with an address; then goes */
	SL_KIND_CONNECTED_UDP = 2, /* a UDP socket connected to a matched peer: every
	                            * datagram takes a place; stays until close/connect */
};

/* One registration of an fd with an epoll set. */
struct sl_epreg {
	int epfd; /* 0: none recorded */
	uint32_t events;
	epoll_data_t data;
};

/* An fd may be registered in several epoll sets (a library's loop and the
 * program's); this many are followed per fd, the oldest replaced beyond that. */
#define SL_EPREGS 4
struct sl_epregs {
	struct sl_epreg r[SL_EPREGS];
};

/* What a record's sections are there for (a bit per position, sl_rec_sects). */
enum {
	SL_USE_CONN = 1,  /* the connection's own place: its connect, its first write, a
	                   * datagram - cleared once released */
	SL_USE_REQ = 2,   /* meter = requests: each request takes a place */
	SL_USE_BYTES = 4, /* meter = bytes: each piece of bytes takes a place */
	SL_USE_SIG = 8,   /* its answers are read (answers.c) */
	SL_USE_PLACE = 16, /* the connection holds a concurrency place of this section */
};

/* A record's sections: one position for every section it is held, metered or
 * followed under, as in a struct sl_match (tickets name positions), and what each
 * is there for; for a connection holding places in keyed sections, the keys of
 * those places.  One piece (slab.c), sized to what it holds; replaced, never
 * shrunk in place, so positions only ever grow. */
struct sl_rec_sects {
	uint8_t n;          /* positions 0..n-1 */
	uint8_t overflow;   /* more sections apply than a match holds */
	uint8_t nkeys;      /* conc keys kept (0 or SL_CONC_KEYS) */
	uint8_t pad;
	uint32_t size;      /* the piece's size */
	uint64_t keyed;     /* positions with a queue per key */
	struct sl_rec_sect {
		uint32_t idx, serial;
		uint32_t use;   /* SL_USE_* */
	} e[];
	/* then struct sl_conc_key keys[nkeys] */
};

/* A record waiting for its admission - a held write (WAITING), a deferred connect
 * (DEFERRED): allocated as it starts waiting, freed once it has its answer. */
struct sl_rec_wait {
	uint32_t size;       /* the piece's size */
	socklen_t peer_len;  /* DEFERRED: the address to connect to */
	uint64_t want;       /* the positions its admission is for */
	uint32_t first_line; /* OPEN: kept from the deferred connect its ticket
	                      * released, for the first write's slot on the first
	                      * writes' line (gate.c, first_write_due) */
	uint32_t box_len;    /* ... and the bytes taken while it waits (firstbox.h), */
	uint32_t box_cap;    /* in a slab piece of this size */
	uint32_t pad;
	uint8_t *box;        /* (NULL: none) */
	uint64_t sock_ino;   /* DEFERRED: the socket's inode and device, so the kicker */
	uint64_t sock_dev;   /* acts on this socket only (kicker.c) */
	union {
		struct sockaddr sa;
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} peer;
	struct sl_epreg ep[SL_EPREGS]; /* the registrations masked or withheld, as the
	                                * program made them (ep_masked, ep_withheld) */
	struct sl_pending pend; /* last: its ticket has room for the record's positions */
};

/* meter = requests or bytes (stream.c): what the record follows of its writes. */
struct sl_rec_stream {
	uint8_t mode;              /* enum sl_stream_mode */
	uint8_t admitted_next;     /* the request at the current boundary has its place */
	uint8_t read_since_write;  /* turns: a read returned data since the last write */
	uint8_t wrote_any;         /* turns: the first write is a turn */
	uint8_t tls_start;         /* SL_STREAM_TLS_HTTP1: the SSL_write under way begins
	                            * a request (its first socket write takes the place) */
	uint8_t first_at_connect;  /* the first request's place was taken with the connect */
	uint8_t drain;             /* meter = bytes: a piece waits for the last to leave
	                            * the kernel (drain.h) */
	uint8_t tls_went;          /* through libssl: the socket write that began the
	                            * SSL_write's request went, the call is not done (a
	                            * retry after WANT_WRITE begins nothing more) */
	int64_t first_released_ns; /* ... released then: its first write moves the
	                            * instant (0: none) */
	uint64_t credit;           /* meter = bytes: bytes released and not yet written */
	uint64_t piece_max;        /* meter = bytes: the largest piece (sl_bytes_piece) */
	uint64_t pending;          /* bytes the reservation in hand covers */
	/* concurrency with meter = requests (inflight.c): the places requests hold
	 * until their answers end */
	uint64_t inflight_mask;    /* positions whose places they hold */
	uint32_t inflight;         /* requests holding one there each, not answered in full */
	uint32_t stuck;            /* meter = bytes: bytes that reached the destination
	                            * late (drain.h); the next piece waits their time */
	uint32_t tail;             /* meter = bytes: unsent in the kernel when the last
	                            * piece had been written out ... */
	uint32_t late_ns;          /* meter = bytes: how late the writer has come for its
	                            * pieces lately (gate.c, piece_size) */
	int64_t tail_ns;           /* ... and when that was */
	uint64_t ended_seen;       /* answers ended, as last counted (sl_resp_ended) */
};

/* The parsers a record runs over its connection (talk.c): its requests (HTTP/1,
 * for meter = requests and for the HEADs whose answers have no body) and its
 * responses (signals).  Parked between calls; whole (lines) only while a line
 * spans two calls. */
struct sl_rec_lines {
	struct sl_http1 h1;
	struct sl_response resp;
};
/* refund = ... (refund.h): what may be given back when the answers say so - the
 * connection's release (meter = connections) until its first answer, and each
 * request's (meter = requests) until its own.  A piece of its own, only for a
 * connection to a section with a refund list. */
#define SL_REFUND_RING 16
struct sl_rec_refunds {
	int64_t conn_ns;                /* the connection's release; 0: none, or settled */
	int64_t req_ns[SL_REFUND_RING]; /* requests released, not yet answered: a ring,
	                                 * oldest at head (one beyond it is not kept and
	                                 * not given back) */
	uint8_t head, n;
	uint8_t answered;               /* an answer came: the connection did not fail */
	uint8_t pad[5];
};
struct sl_rec_h2;
struct sl_rec_talk {
	struct sl_h1_parked h1;
	struct sl_resp_parked resp;
	struct sl_rec_lines *lines; /* non-NULL: the parsers are these, not the parked */
	struct sl_rec_refunds *refunds; /* NULL: nothing to give back */
	struct sl_rec_h2 *h2;       /* the connection speaks HTTP/2 (h2.h): its frames
	                             * are followed instead of the parsers above */
};

/* A socket the shim holds, meters or follows.  This much for every such socket;
 * each part only while its state needs it (docs/design.md, "What a socket
 * costs"). */
struct sl_record {
	struct sl_mutex lock;  /* guards everything below but refs, index and next_free */
	uint32_t index;        /* its index+1 in the pool, what fd-table entries hold: fixed */
	int32_t refs;          /* fds sharing it (dup); guarded by fdtab's alloc lock */
	uint32_t next_free;    /* free: the next free record's index (alloc lock) */
	uint8_t state;         /* enum sl_record_state */
	uint8_t kind;          /* enum sl_record_kind */
	uint8_t inherited;     /* copied into a fork child: the parent owns the place, so
	                        * the child closing its fd must not give it back */
	uint8_t so_error_read; /* REFUSED: SO_ERROR was read once (then it says 0) */
	uint8_t ep_masked;     /* bit i: EPOLLOUT taken out of registration wait->ep[i] */
	uint8_t ep_withheld;   /* DEFERRED: bit i: registration wait->ep[i] is not in the
	                        * kernel (an unconnected socket would report EPOLLHUP) */
	uint8_t tls;           /* TLS on the socket: answers are read through libssl
	                        * (tls.c) or not at all */
	uint8_t retry;         /* enum sl_rec_retry: how the program comes back after
	                        * an EAGAIN of a held write (gate.c) */
	int32_t fd;            /* the fd that connected, for epoll re-arming */
	int32_t refuse_errno;  /* REFUSED: what SO_ERROR and writes report */
	_Atomic uint32_t reads_begun; /* reads of the socket begun and ended (recv.c), */
	_Atomic uint32_t reads_done;  /* without the lock: a peek ahead of the program
	                               * looks only when they are equal (h2.h) */
	int64_t release_ns;    /* WAITING, DEFERRED: when its admission is stepped next */
	int64_t kick_at;       /* the instant of its entry in the kicker's heap (0: none) */
	struct sl_rec_dest {   /* its destination (sl_rec_dest() makes an sl_dest of it) */
		uint8_t family;
		uint8_t pad;
		uint16_t port;
		uint16_t name_len;
		uint16_t pad2;
		uint8_t addr[16];
		char *name;    /* kept where keys or debug lines need it: a piece of
		                * name_len + 1 bytes; NULL: none */
	} dest;
	struct sl_rec_sects *sects;
	struct sl_rec_wait *wait;     /* WAITING, DEFERRED */
	struct sl_rec_stream *stream; /* meter = requests or bytes */
	struct sl_rec_talk *talk;     /* requests followed or answers read */
};

/* A non-blocking socket's held write is told EAGAIN, and the program is to wait
 * for it to turn writable (poll.c, epoll.c show it so at its release).  A program
 * that writes again without waiting sleeps between tries instead (perl LWP sleeps
 * 100 ms): its later held writes wait in the call, as a blocking socket's do
 * (docs/design.md, "Send paths and event loops"). */
enum sl_rec_retry {
	SL_RETRY_TOLD = 1,    /* the last held write was told EAGAIN, and no wait on the
	                       * socket (poll, select) has been seen since */
	SL_RETRY_SLEEPER = 2, /* it wrote again without waiting: held in the call */
};

enum sl_stream_mode {
	SL_STREAM_UNDECIDED = 0, /* decided by the connection's first write */
	SL_STREAM_HTTP1 = 1,     /* request messages, found by proto/http1.c */
	SL_STREAM_TURNS = 2,     /* TLS or other: each write after a read, and the first */
	SL_STREAM_TLS_HTTP1 = 4, /* TLS made through libssl (tls.c): requests are found
	                          * in the plaintext of SSL_write, which marks the socket
	                          * write that begins one (tls_start); until the first
	                          * plaintext shows HTTP/1 nothing is counted, then turns
	                          * if it does not */
	SL_STREAM_CONNECTION = 3, /* the connection counts as one request, taken with its
	                           * connect (or its first write when named by it): TLS
	                           * offering h2 not through libssl (its frames are not
	                           * seen), or HTTP/2 with no memory to follow its frames */
	SL_STREAM_H2 = 5,         /* HTTP/2 in plaintext (prior knowledge, or after an
	                           * Upgrade to h2c): each new stream's HEADERS is a
	                           * request, found by proto/http2.c (h2.h) */
	SL_STREAM_TLS_H2 = 6,     /* HTTP/2 through libssl: the same in SSL_write's
	                           * plaintext, which marks the socket write that begins
	                           * one (tls_start), as SL_STREAM_TLS_HTTP1 does */
};

/* record.c: a record's parts, under its lock. */
int sl_rec_add_sects(struct sl_record *rec, const struct sl_match *m, unsigned use);

void sl_rec_keep_keys_in(struct sl_rec_sects *s, const struct sl_match *m);

void sl_rec_keep_keys(struct sl_record *rec, const struct sl_match *m); /* places' keys, after a take */

uint64_t sl_rec_mask(const struct sl_record *rec, unsigned use);       /* positions with any of use */

void sl_rec_drop_use(struct sl_record *rec, unsigned use);

/* The positions whose concurrency place the connection holds (SL_USE_PLACE), and
 * setting them: kept in the positions' use bits, not in the record (whose every
 * byte each followed socket pays for). */
static inline uint64_t sl_rec_places(const struct sl_record *rec)
{
	return sl_rec_mask(rec, SL_USE_PLACE);
}

void sl_rec_set_places(struct sl_record *rec, uint64_t mask);

/* A match of rec's positions in mask (or with any of `use`), for the core's calls:
 * its key source names rec's destination. */
void sl_rec_match_mask(const struct sl_record *rec, uint64_t mask, struct sl_match *out);

uint64_t sl_rec_match(const struct sl_record *rec, unsigned use, struct sl_match *out);

/* The positions of rec where m's sections are. */
uint64_t sl_rec_positions(const struct sl_record *rec, const struct sl_match *m);

/* rec's destination is d; its name kept when keep_name (keys, debug lines). */
int sl_rec_set_dest(struct sl_record *rec, const struct sl_dest *d, int keep_name);

/* rec's destination as the core takes it (its name is rec's: valid as long as rec
 * keeps it). */
struct sl_dest *sl_rec_dest(const struct sl_record *rec, struct sl_dest *out);

/* The waiting part for an admission of the positions in want (NULL: no memory),
 * and its end (once the registrations it kept are back in the kernel). */
struct sl_rec_wait *sl_rec_wait_begin(struct sl_record *rec, uint64_t want);

unsigned sl_rec_wait_room(const struct sl_record *rec);

void sl_rec_wait_end(struct sl_record *rec);

struct sl_rec_stream *sl_rec_stream_part(struct sl_record *rec); /* NULL: no memory */

/* Every part given back (the record is being freed). */
void sl_rec_free_parts(struct sl_record *rec);

/* talk.c: the parsers, under rec->lock.  open gives them whole (in scratch when
 * parked), close parks them again when it can (or keeps them whole). */
int sl_talk_begin(struct sl_record *rec);

void sl_talk_free(struct sl_record *rec);

struct sl_rec_lines *sl_talk_open(struct sl_record *rec, struct sl_rec_lines *scratch);

void sl_talk_close(struct sl_record *rec, struct sl_rec_lines *l);

int sl_talk_h1_state(const struct sl_record *rec);

uint64_t sl_talk_h1_requests(const struct sl_record *rec);

int sl_talk_resp_state(const struct sl_record *rec);

#endif
