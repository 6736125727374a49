/*
 * HTTPS through libssl (docs/shaping.md, "Signals from the destination"): SSL_read,
 * SSL_read_ex, SSL_write, SSL_write_ex, SSL_connect and SSL_do_handshake are
 * interposed so that the plaintext of a shaped connection's answers can be read for
 * the destination's signals, and its requests followed (a HEAD's answer has no
 * body).  Bytes are only read, never changed; every call goes to libssl as made.
 *
 * Finding libssl: a program may load it with RTLD_LOCAL (python3's _ssl module
 * does), where RTLD_NEXT cannot see it - yet its calls still come here, since the
 * preloaded library is searched first.  So the real functions are looked up at the
 * first call (libssl is loaded by then): RTLD_NEXT, else the loaded libssl found
 * by dl_iterate_phdr and opened again with RTLD_NOLOAD.
 *
 * Which connection an SSL* is: SSL_get_rfd/SSL_get_wfd when its BIO is a socket;
 * else (curl's own BIO) the socket the call itself read or wrote, seen by the
 * read and write hooks while the call is under way on this thread, remembered per
 * SSL* for calls served from libssl's buffers.  Every call that touches a socket
 * refreshes what is remembered, and a handshake always does, so an SSL* freed and
 * made again for another connection is known afresh before any data.
 *
 * Programs that carry TLS of their own (Go, the official node binaries) never come
 * here: their answers stay unread, said once under SLUICE_DEBUG (answers.c).
 */
#include "answers.h"
#include "fdtab.h"
#include "record.h"
#include "stream.h"
#include "tls.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

typedef struct ssl_st SSL;

struct ssl_fns {
	int (*read)(SSL *, void *, int);
	int (*read_ex)(SSL *, void *, size_t, size_t *);
	int (*write)(SSL *, const void *, int);
	int (*write_ex)(SSL *, const void *, size_t, size_t *);
	int (*connect)(SSL *);
	int (*do_handshake)(SSL *);
	int (*get_rfd)(const SSL *);
	int (*get_wfd)(const SSL *);
	void (*alpn_selected)(const SSL *, const unsigned char **, unsigned int *);
};

static struct ssl_fns fns;
static pthread_once_t fns_once = PTHREAD_ONCE_INIT;

/* The call under way on this thread, and the socket it touched (-1: none yet;
 * -2: an fd the shim does not follow). */
/* initial-exec: the shim is preloaded, and every read of every program looks at
 * sl_tls_call - one thread-pointer load, not a call to __tls_get_addr. */
__thread __attribute__((tls_model("initial-exec"))) void *sl_tls_call;
static __thread __attribute__((tls_model("initial-exec"))) int tl_fd = -1;
#define tl_ssl sl_tls_call

SL_EXPORT int SSL_read(SSL *, void *, int);
SL_EXPORT int SSL_read_ex(SSL *, void *, size_t, size_t *);
SL_EXPORT int SSL_write(SSL *, const void *, int);
SL_EXPORT int SSL_write_ex(SSL *, const void *, size_t, size_t *);
SL_EXPORT int SSL_connect(SSL *);
SL_EXPORT int SSL_do_handshake(SSL *);

static int find_libssl(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (base && strncmp(base, "libssl.so", 9) == 0) {
		*(void **)arg = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
		return *(void **)arg != NULL;
	}
	return 0;
}

static void *lookup(void *lib, const char *name, void *self)
{
	void *p = dlsym(RTLD_NEXT, name);

	if ((!p || p == self) && lib)
		p = dlsym(lib, name);
	return p == self ? NULL : p;
}

static void resolve(void)
{
	void *lib = NULL;

	if (!dlsym(RTLD_NEXT, "SSL_read"))
		dl_iterate_phdr(find_libssl, &lib); /* loaded RTLD_LOCAL */
	fns.read = lookup(lib, "SSL_read", (void *)SSL_read);
	fns.read_ex = lookup(lib, "SSL_read_ex", (void *)SSL_read_ex);
	fns.write = lookup(lib, "SSL_write", (void *)SSL_write);
	fns.write_ex = lookup(lib, "SSL_write_ex", (void *)SSL_write_ex);
	fns.connect = lookup(lib, "SSL_connect", (void *)SSL_connect);
	fns.do_handshake = lookup(lib, "SSL_do_handshake", (void *)SSL_do_handshake);
	fns.get_rfd = lookup(lib, "SSL_get_rfd", NULL);
	fns.get_wfd = lookup(lib, "SSL_get_wfd", NULL);
	fns.alpn_selected = lookup(lib, "SSL_get0_alpn_selected", NULL);
	sl_debug("libssl %s: %s", lib ? "loaded locally" : "in the global scope",
	         fns.read && fns.write ? "its reads and writes are followed on shaped connections"
	                               : "not all of SSL_read/SSL_write found: calls fail");
}

static const struct ssl_fns *real(void)
{
	pthread_once(&fns_once, resolve);
	return &fns;
}

/* --- which socket an SSL* is --- */

#define MEMO_SLOTS 1024 /* SSL* -> fd, a cache; a missed entry only means unread */

static struct {
	struct sl_mutex lock;
	struct {
		const SSL *ssl;
		int fd;
	} e[MEMO_SLOTS];
} memo = {SL_MUTEX_INIT, {{0, 0}}};

void sl_tls_after_fork(void)
{
	sl_mutex_reset(&memo.lock);
}

static size_t memo_slot(const SSL *ssl)
{
	return (size_t)(((uintptr_t)ssl >> 4) * 0x9e3779b97f4a7c15ull >> 54) % MEMO_SLOTS;
}

static void memo_put(const SSL *ssl, int fd)
{
	size_t i = memo_slot(ssl);

	sl_shim_lock(&memo.lock);
	memo.e[i].ssl = ssl;
	memo.e[i].fd = fd;
	sl_shim_unlock(&memo.lock);
}

static int memo_get(const SSL *ssl)
{
	size_t i = memo_slot(ssl);
	int fd;

	sl_shim_lock(&memo.lock);
	fd = memo.e[i].ssl == ssl ? memo.e[i].fd : -1;
	sl_shim_unlock(&memo.lock);
	return fd;
}

int sl_tls_in_call(int fd)
{
	if (sl_likely(!tl_ssl))
		return 0;
	tl_fd = fd;
	return 1;
}

void sl_tls_saw(int fd)
{
	/* -2: a socket the shim does not follow (remembered as such, so the SSL*
	 * is never taken for another connection's). */
	tl_fd = sl_fdtab_get(fd) ? fd : -2;
}

/* Before a call: note it on this thread (calls do not nest, but a callback of
 * the program's inside one could make another: the outer one is kept). */
struct call {
	void *outer;
	int outer_fd;
};

static struct call begin(SSL *ssl)
{
	struct call c = {tl_ssl, tl_fd};

	tl_ssl = ssl;
	tl_fd = -1;
	return c;
}

/* After it: the tracked fd it is, or -1. */
static int end(SSL *ssl, struct call c, int reading)
{
	int fd = -1, touched = tl_fd;

	tl_ssl = c.outer;
	tl_fd = c.outer_fd;
	if (reading ? real()->get_rfd : real()->get_wfd)
		fd = reading ? real()->get_rfd(ssl) : real()->get_wfd(ssl);
	if (fd >= 0)
		return sl_fdtab_get(fd) ? fd : -1;
	if (touched >= 0 || touched == -2) {
		memo_put(ssl, touched);
		return touched;
	}
	return memo_get(ssl);
}

SL_EXPORT int SSL_read(SSL *ssl, void *buf, int num)
{
	const struct ssl_fns *f = real();
	struct call c;
	int r, fd;

	if (!f->read)
		return -1;
	c = begin(ssl);
	r = f->read(ssl, buf, num);
	fd = end(ssl, c, 1);
	if (r > 0 && fd >= 0)
		sl_signals_plain(fd, buf, (size_t)r, 1);
	return r;
}

SL_EXPORT int SSL_read_ex(SSL *ssl, void *buf, size_t num, size_t *got)
{
	const struct ssl_fns *f = real();
	struct call c;
	int r, fd;

	if (!f->read_ex)
		return 0;
	c = begin(ssl);
	r = f->read_ex(ssl, buf, num, got);
	fd = end(ssl, c, 1);
	if (r == 1 && got && *got > 0 && fd >= 0)
		sl_signals_plain(fd, buf, *got, 1);
	return r;
}

/* The followed socket an SSL* is known to be before a call, or -1. */
static int known_fd(SSL *ssl)
{
	int fd = real()->get_wfd ? real()->get_wfd(ssl) : -1;

	if (fd < 0)
		fd = memo_get(ssl);
	return fd >= 0 && sl_fdtab_get(fd) ? fd : -1;
}

/* A write: whether it begins a request is told before it is made (meter =
 * requests holds its first socket write, inside the call: stream.c), and what
 * went is followed after.  Returns how much of it the call may carry: HTTP/2
 * frames opening two streams are cut before the second (SIZE_MAX: all). */
static size_t before_write(SSL *ssl, const void *buf, size_t n)
{
	int fd = known_fd(ssl), h2 = 0;

	if (fd < 0)
		return SIZE_MAX;
	/* The protocol the server chose: a ClientHello offering h2 made the
	 * connection count as one request, which holds unless h2 was chosen. */
	if (real()->alpn_selected) {
		const unsigned char *p = NULL;
		unsigned int len = 0;

		real()->alpn_selected(ssl, &p, &len);
		h2 = p && len == 2 && p[0] == 'h' && p[1] == '2';
	}
	return sl_stream_tls_write(fd, buf, n, h2);
}

static void after_write(int fd, const void *buf, size_t n)
{
	if (fd < 0)
		return;
	sl_stream_tls_wrote(fd, buf, n);
	sl_signals_plain(fd, buf, n, 0);
}

SL_EXPORT int SSL_write(SSL *ssl, const void *buf, int num)
{
	const struct ssl_fns *f = real();
	struct call c;
	int r, fd;

	if (!f->write)
		return -1;
	if (num > 0 && buf)
		num = (int)SL_MIN((size_t)num, before_write(ssl, buf, (size_t)num));
	c = begin(ssl);
	r = f->write(ssl, buf, num);
	fd = end(ssl, c, 0);
	if (r > 0)
		after_write(fd, buf, (size_t)r);
	return r;
}

SL_EXPORT int SSL_write_ex(SSL *ssl, const void *buf, size_t num, size_t *put)
{
	const struct ssl_fns *f = real();
	struct call c;
	int r, fd;

	if (!f->write_ex)
		return 0;
	if (num > 0 && buf)
		num = SL_MIN(num, before_write(ssl, buf, num));
	c = begin(ssl);
	r = f->write_ex(ssl, buf, num, put);
	fd = end(ssl, c, 0);
	if (r == 1 && put && *put > 0)
		after_write(fd, buf, *put);
	return r;
}

/* The handshakes: only to learn which socket the SSL* is. */
SL_EXPORT int SSL_connect(SSL *ssl)
{
	const struct ssl_fns *f = real();
	struct call c;
	int r;

	if (!f->connect)
		return -1;
	c = begin(ssl);
	r = f->connect(ssl);
	end(ssl, c, 0);
	return r;
}

SL_EXPORT int SSL_do_handshake(SSL *ssl)
{
	const struct ssl_fns *f = real();
	struct call c;
	int r;

	if (!f->do_handshake)
		return -1;
	c = begin(ssl);
	r = f->do_handshake(ssl);
	end(ssl, c, 0);
	return r;
}
