/*
 * fdtab.h - held sockets: the fd table and the records (fdtab.c), their life
 * (held.c), the masking of their epoll registrations (epoll.c).
 *
 * A matched non-blocking connect() whose place is not due yet is deferred: the
 * program sees EINPROGRESS, the socket a record in state DEFERRED, and the real
 * connect is made at the release.  A connection first named by its first write
 * (SNI, Host, CONNECT) is already open: its record starts in FIRST, and that write
 * reserves a place (WAITING) and is refused with EAGAIN until it is released.
 * A record that has nothing more to hold goes at the connection's next write; one
 * that meters requests or bytes, or holds concurrency places, lives until close.
 */
#ifndef SLUICE_SHIM_FDTAB_H
#define SLUICE_SHIM_FDTAB_H

#include "shim.h"
#include "sluice/http1.h"
#include "sluice/pending.h"
#include "sluice/response.h"
#include "slab.h"

#include <netinet/in.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define SL_RECORDS (1024 * 1024) /* sockets with a hold record at once, at most */

/* An fd-table entry that is no record: a TCP connection no section matched by
 * address, whose first write is read for a name (SNI, Host, CONNECT) before it goes.
 * Set only when some section matches by name; cleared by that write or by close. */
#define SL_FD_SNIFF 0xffffffffu

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
	uint8_t pad[2];
	int64_t first_released_ns; /* ... released then: its first write moves the
	                            * instant (0: none) */
	uint64_t credit;           /* meter = bytes: bytes released and not yet written */
	uint64_t piece_max;        /* the most bytes one release covers */
	uint64_t pending;          /* bytes the reservation in hand covers */
};

/* The parsers a record runs over its connection (talk.c): its requests (HTTP/1,
 * for meter = requests and for the HEADs whose answers have no body) and its
 * responses (signals).  Parked between calls; whole (lines) only while a line
 * spans two calls. */
struct sl_rec_lines {
	struct sl_http1 h1;
	struct sl_response resp;
};
struct sl_rec_talk {
	struct sl_h1_parked h1;
	struct sl_resp_parked resp;
	struct sl_rec_lines *lines; /* non-NULL: the parsers are these, not the parked */
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
	uint8_t pad;
	int32_t fd;            /* the fd that connected, for epoll re-arming */
	int32_t refuse_errno;  /* REFUSED: what SO_ERROR and writes report */
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

enum sl_stream_mode {
	SL_STREAM_UNDECIDED = 0, /* decided by the connection's first write */
	SL_STREAM_HTTP1 = 1,     /* request messages, found by core/http1.c */
	SL_STREAM_TURNS = 2,     /* TLS or other: each write after a read, and the first */
	SL_STREAM_TLS_HTTP1 = 4, /* TLS made through libssl (tls.c): requests are found
	                          * in the plaintext of SSL_write, which marks the socket
	                          * write that begins one (tls_start); until the first
	                          * plaintext shows HTTP/1 nothing is counted, then turns
	                          * if it does not */
	SL_STREAM_CONNECTION = 3, /* HTTP/2 (the plaintext preface, or TLS offering h2):
	                           * multiplexed streams cannot be held by turns without
	                           * answering EAGAIN where clients take it as fatal, so
	                           * the connection counts as one request, taken with its
	                           * connect (or its first write when named by it) */
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

extern _Atomic unsigned sl_records_high; /* records ever made: 1..high, for scans */
extern _Atomic int sl_records_active;
extern _Atomic int sl_fd_max;
extern _Atomic int sl_sniff_marks; /* fds marked SL_FD_SNIFF */

/* The record index+1 for fd, 0 when it holds nothing.  One or two loads. */
unsigned sl_fdtab_get(int fd);

struct sl_record *sl_record_new(int fd);   /* NULL when the pool or table is full */
struct sl_record *sl_record_of(int fd);
struct sl_record *sl_record_at(unsigned index); /* the record of an index+1, or NULL */
int sl_record_share(int oldfd, int newfd); /* dup: newfd shares oldfd's record */
struct sl_record *sl_record_unlink(int fd);  /* non-NULL: fd held its last reference */
void sl_record_free(struct sl_record *rec);

/* SL_FD_SNIFF marks (see above).  claim: 1 when this caller took fd's mark away
 * (so it alone reads the first write), 0 when there was none. */
void sl_fdtab_mark_sniff(int fd);
int sl_fdtab_claim_sniff(int fd);

struct sl_epregs *sl_epregs(int fd, int create);

void sl_fdtab_after_fork(void);

/* held.c: the life of held sockets.  sl_held_connect gives fd a record of
 * `kind` for destination d and sections m (-ENOSPC when the pool is full). */
int sl_held_set_target(struct sl_record *rec, const struct sl_dest *d, const struct sl_match *m);
int sl_held_add_sects(struct sl_record *rec, const struct sl_dest *d, const struct sl_match *m,
                      unsigned use);
/* Under rec->lock, rec->wait set: one step of its admission, with m and d filled
 * with the sections and destination it is for (the caller's, which the admission
 * points at: valid while the caller looks at the answer). */
int sl_held_step(struct sl_record *rec, struct sl_match *m, struct sl_dest *d, int64_t now, sl_act_fn act,
                 void *arg);
/* Under rec->lock: its admission under way given up (slot and places back), and
 * the concurrency places its connection holds given back. */
void sl_held_cancel(struct sl_record *rec);
void sl_held_put_places(struct sl_record *rec);
/* Under no lock: the record fd points at, locked, or NULL. */
struct sl_record *sl_held_lock_record(int fd);
int sl_held_connect(int fd, const struct sl_dest *d, const struct sl_match *m, int kind);
int sl_held_datagram(int fd, const struct sl_dest *d, const struct sl_match *m, int dontwait);
/* A released connection that holds concurrency places (`conc`) until it closes.
 * -ENOSPC when the pool is full. */
int sl_held_open(int fd, const struct sl_dest *d, const struct sl_match *m, uint64_t conc);
/* A non-blocking connect deferred: its admission p (sl_pending_step answered
 * WAIT) goes on in a new record for fd, and the connect to `addr` is made when it
 * answers GO.  -ENOSPC when the pool is full (nothing is kept: the caller still
 * owns p). */
int sl_held_defer(int fd, const struct sl_dest *d, const struct sl_match *m,
                  const struct sl_pending *p, const struct sockaddr *addr, socklen_t alen);
/* Calls that look at a socket's connect, on an fd with a table entry: connect()
 * again, getsockopt(SO_ERROR), shutdown().  Each returns 1 when it answered for a
 * deferred (or refused) connect, with *rc the call's result or -errno, and 0 when
 * the real call is to run. */
int sl_held_reconnect(int fd, int *rc);
int sl_held_so_error(int fd, int *err);
int sl_held_shutdown(int fd, int *rc);
/* A read on fd failed with ENOTCONN: whether fd is a deferred connect, which a
 * program must see as still connecting (EAGAIN). */
int sl_held_is_deferred(int fd);
/* epoll_ctl on a deferred fd: kept here, not given to the kernel yet.  1 if handled. */
int sl_epoll_virtual_ctl(int epfd, int op, int fd, const struct epoll_event *ev);
void sl_held_drop_udp(int fd);
void sl_held_drop_failed(int fd);
int sl_held_write(int fd, int dontwait);
/* The same for a write of `iov` on a stream: *limit receives how many of its bytes
 * may go (SIZE_MAX: all), *track what follows the stream (SL_TRACK_*: nonzero,
 * sl_held_wrote must be told what went). */
int sl_held_write_data(int fd, int dontwait, const struct iovec *iov, int iovcnt, size_t *limit,
                       int *track);
enum {
	SL_TRACK_STREAM = 1, /* meter = requests */
	SL_TRACK_BYTES = 2,  /* meter = bytes: a blocking write goes piece by piece, each
	                      * released in turn, inside the one call */
	SL_TRACK_SIGNALS = 8, /* its responses are read: the requests are followed */
	SL_TRACK_MOVE = 4,   /* the write was held and released just now: once made, its
	                      * release is moved on to that instant (sl_held_made) */
};
/* After the real write: `n` bytes of iov went (iov NULL: n bytes from a file). */
void sl_held_wrote(int fd, const struct iovec *iov, int iovcnt, size_t n);
/* After the real write of a held write released just now (SL_TRACK_MOVE), made or
 * failed: its sections' enforcement is moved on to now, so that whatever the
 * write spent getting out (a preemption, a slow SYN) cannot bring the next release
 * closer to it than an interval. */
void sl_held_made(int fd);
/* A read on fd returned data (turns: the next write starts a request). */
/* A read on fd returned n > 0 bytes in iov (or the connection's end, n = 0). */
void sl_held_read(int fd, const struct iovec *iov, int iovcnt, size_t n);
/* A connection to d whose sections in m may read its answers: kept in a record
 * for its life when some of them do (answers.c).  0, or -ENOSPC. */
int sl_held_follow(int fd, const struct sl_dest *d, const struct sl_match *m);
/* answers.c, under rec->lock: what was written (requests followed) and read. */
void sl_signals_wrote(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);
/* Whether rec's writes are still of use to its answers' reader: when not, the
 * send path need not report them (no lock taken after the write). */
int sl_signals_follows_writes(const struct sl_record *rec);
void sl_signals_read(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);
/* The plaintext of a TLS connection on fd, read (`reading`) or written through
 * libssl (tls.c); takes the record's lock. */
void sl_signals_plain(int fd, const void *buf, size_t n, int reading);
/* stream.c, meter = requests through libssl: an SSL_write of `n` plaintext bytes
 * is about to be made on fd (whether it begins a request; h2: the server chose
 * HTTP/2), and `n` went. */
void sl_stream_tls_write(int fd, const void *buf, size_t n, int h2);
void sl_stream_tls_wrote(int fd, const void *buf, size_t n);

/* tls.c: the SSL* whose call is under way on this thread (NULL: none).  The read
 * hooks tell it which socket the call read (sl_tls_saw), the answer reader and
 * request follower ask whether their bytes are ciphertext read or written inside
 * a call (sl_tls_in_call: 1, and the socket is noted). */
extern __thread __attribute__((tls_model("initial-exec"))) void *sl_tls_call;
int sl_tls_in_call(int fd);
void sl_tls_saw(int fd);
/* Give a connection its requests sections (meter = requests) and bytes sections
 * (meter = bytes): its record stays for its whole life.  first_admitted: its first
 * request already has its place (taken with the connect).  -ENOSPC when none could
 * be had. */
int sl_held_stream(int fd, const struct sl_dest *d, const struct sl_match *rm,
                   const struct sl_match *bm, int first_admitted);

/* stream.c, all under the record's lock. */
int sl_stream_starts(struct sl_record *rec, const struct iovec *iov, int iovcnt);
size_t sl_stream_limit(struct sl_record *rec, const struct iovec *iov, int iovcnt);
void sl_stream_wrote(struct sl_record *rec, const struct iovec *iov, int iovcnt, size_t n);
void sl_held_close(int fd);
/* close() in two steps: whether fd's record holds concurrency places (then the fd
 * is unlinked, really closed, and only then is its last record finished: places
 * and reservations given back, record freed). */
int sl_held_closing_keeps_place(int fd);
void sl_held_finish(struct sl_record *last);
/* When fd's held write (or deferred connect) is due, 0 when nothing waits.  With
 * `deferred`: a deferred connect that is due and finds a place is made first, and
 * *deferred says whether fd is still one (its socket then shows no events). */
int64_t sl_held_due(int fd, int *deferred);
/* epoll.c: the earliest release among fd's held in epfd (0: none), putting back
 * the registrations of those due; deferred connects that are due are made. */
int64_t sl_epoll_due(int epfd, int64_t now);
/* epoll.c, under rec->lock: take EPOLLOUT out of rec's registrations while its
 * write is held (the program's loop then waits for it as for a full buffer), put
 * them back (those in `which`, or all), and keep a deferred connect's
 * registrations out of the kernel until it is made, then restore them. */
void sl_epoll_mask(struct sl_record *rec);
void sl_epoll_unmask_some(struct sl_record *rec, unsigned which);
void sl_epoll_unmask(struct sl_record *rec);
void sl_epoll_withhold(struct sl_record *rec);
void sl_epoll_restore(struct sl_record *rec);
/* held.c, under rec->lock: a deferred connect that is due takes what it waits for
 * and is made, or is refused; 1 when it stopped being deferred.  fd is the
 * descriptor the caller looks at (it shares rec). */
int sl_held_kick_locked(struct sl_record *rec, int fd, int64_t now);
int sl_fd_nonblocking(int fd); /* O_NONBLOCK, asked through the real fcntl */
int sl_socket_type(int fd);    /* SO_TYPE (SOCK_STREAM, SOCK_DGRAM), -1 if no socket */

/* A connect made inside its release (sl_wait_release_act): so no other release can
 * come between the check and the SYN, and the next one is counted from after it.
 * sl_connect_act makes it non-blocking whatever the socket is (nothing may wait
 * under the segment lock) and records the outcome; `blocking` says the caller
 * still has to wait for the connection as a blocking connect would. */
struct sl_made_connect {
	int fd;
	const struct sockaddr *addr;
	socklen_t alen;
	int done;     /* the connect was made */
	int rc, err;  /* its result and errno */
	int blocking; /* the socket is blocking */
};
int sl_connect_act(void *arg);

/* connect.c: a new TCP connection to sections m, by connect() or
 * sendto(MSG_FASTOPEN) to addr (dontwait: MSG_DONTWAIT, as a non-blocking socket):
 * 0 to go, or -errno (-EINPROGRESS: deferred, the connect is not to be made now).
 * With `made` (connect() only), the connect may have been made inside its release:
 * made->done then says so, and the caller returns its outcome. */

int sl_connect_admit(int fd, const struct sl_dest *d, struct sl_match *m, const char *what,
                       const struct sockaddr *addr, socklen_t alen, int dontwait,
                       struct sl_made_connect *made);
int sl_is_fresh_tcp(int fd);

/* sniff.c: the first write of a marked connection (SL_FD_SNIFF), read for a name;
 * fd's mark is already claimed.  0 to go, or -errno. */
int sl_sniff_first_write(int fd, const struct iovec *iov, int iovcnt, int dontwait, size_t *limit,
                         int *track);
/* The destination a write names, with its matching sections in m: a count, 0 when
 * it names none or none matches.  peer: the connection's peer, or NULL to ask fd's. */
int sl_name_from_write(int fd, const struct sl_dest *peer, const struct iovec *iov, int iovcnt,
                       struct sl_dest *d, char *name, size_t namelen, struct sl_match *m);

#endif
