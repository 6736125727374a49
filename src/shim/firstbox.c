/* A deferred connect's first write kept until its slot (firstbox.h). */
#include "firstbox.h"
#include "answers.h"
#include "slab.h"
#include "stream.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

int sl_firstbox_holds(const struct sl_record *rec)
{
	return rec->wait && rec->wait->box_len;
}

size_t sl_firstbox_take(struct sl_record *rec, const struct iovec *iov, int iovcnt)
{
	struct sl_rec_wait *w = rec->wait;
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	if (!w || n == 0 || n > SL_FIRSTBOX_MAX - w->box_len)
		return 0;
	if (w->box_len + n > w->box_cap) {
		/* A piece as large as the slab gives for what it must hold. */
		uint32_t cap = (uint32_t)sl_slab_piece(w->box_len + n);
		uint8_t *box = sl_slab_alloc(cap);

		if (!box)
			return 0;
		if (w->box_len)
			memcpy(box, w->box, w->box_len);
		if (w->box)
			sl_slab_free(w->box, w->box_cap);
		w->box = box;
		w->box_cap = cap;
	}
	for (int i = 0; i < iovcnt; i++) {
		memcpy(w->box + w->box_len, iov[i].iov_base, iov[i].iov_len);
		w->box_len += (uint32_t)iov[i].iov_len;
	}
	return n;
}

int sl_firstbox_flush(struct sl_record *rec, int fd)
{
	struct sl_rec_wait *w = rec->wait;
	struct iovec iov;
	struct stat st;
	ssize_t sent;

	if (!w || !w->box_len)
		return 0;
	/* Only on the socket it was taken for: a number closed and given to another
	 * file meanwhile (close_range, another thread) must never get its bytes. */
	if (fstat(fd, &st) != 0 || st.st_ino != w->sock_ino || st.st_dev != w->sock_dev) {
		w->box_len = 0;
		return -EBADF;
	}
	iov = (struct iovec){.iov_base = w->box, .iov_len = w->box_len};
	sent = sl_real.send ? sl_real.send(fd, w->box, w->box_len, MSG_DONTWAIT | MSG_NOSIGNAL)
	                    : sl_sys(SYS_sendto, fd, w->box, w->box_len, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
	if (sent < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return -EAGAIN;
		w->box_len = 0; /* the program's next call on the socket hears of it */
		return -errno;
	}
	/* Followed as written, as a write the program made. */
	sl_stream_wrote(rec, &iov, 1, (size_t)sent);
	if (sl_rec_mask(rec, SL_USE_SIG))
		sl_signals_wrote(rec, &iov, 1, (size_t)sent);
	memmove(w->box, w->box + sent, w->box_len - (size_t)sent);
	w->box_len -= (uint32_t)sent;
	return w->box_len ? -EAGAIN : 0;
}

void sl_firstbox_free(struct sl_rec_wait *w)
{
	if (w->box)
		sl_slab_free(w->box, w->box_cap);
	w->box = NULL;
	w->box_len = w->box_cap = 0;
}
