/* meter = bytes kept at the destination: see drain.h. */
#include "drain.h"
#include "shim.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>

int sl_drain_arm(int fd)
{
	int one = 1;

	return sl_sys(SYS_setsockopt, fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &one, sizeof(one)) == 0;
}

uint32_t sl_drain_queued(int fd)
{
	int unsent = 0;

	return sl_sys(SYS_ioctl, fd, SIOCOUTQNSD, &unsent) == 0 && unsent > 0 ? (uint32_t)unsent : 0;
}

uint32_t sl_drain_unsent(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	uint32_t unsent = sl_drain_queued(fd);

	if (!unsent)
		return 0;
	/* The writer will wait for these to leave, on the kernel's readiness: 1 again
	 * (a program may have set its own), and the kernel's own poll, which marks the
	 * socket so that their leaving wakes whoever polls it next.  Writable by then
	 * (they left meanwhile): no wait, or an edge-triggered waiter would miss it. */
	sl_drain_arm(fd);
	if (sl_real.poll ? sl_real.poll(&p, 1, 0) != 0 : sl_sys(SYS_ppoll, &p, 1, &(struct timespec){0}, NULL, 0) != 0)
		return 0;
	return unsent;
}

int64_t sl_drain_time_ns(const struct sl_record *rec, uint64_t bytes)
{
	int64_t longest = 0;

	for (uint64_t bits = sl_rec_mask(rec, SL_USE_BYTES); bits; bits &= bits - 1) {
		const struct sl_section *sec =
			sl_shm_section(sl_shim.shm.hdr, rec->sects->e[__builtin_ctzll(bits)].idx);

		if (sec && sec->spec.amount && sec->spec.window_ns > 0)
			longest = SL_MAX(longest, (int64_t)((__int128)bytes * sec->spec.window_ns / sec->spec.amount));
	}
	return longest;
}
