/*
 * filter.c - the seccomp filter of `sluice run --seccomp` and the listener
 * passed from the child that installs it to the supervisor (supervise.h).
 */
#include "internal.h"

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + (i) * sizeof(uint64_t))
#define ARG_HI(i) (ARG_LO(i) + sizeof(uint32_t))
#define STMT(code, k) ((struct sock_filter)BPF_STMT((code), (k)))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP((code), (k), (jt), (jf)))

int sl_supervise_install(int datagrams)
{
	/* Positions, and jumps as distances to them (a jump goes to pc + 1 + k). */
	enum { CHECK_PASS = 6, SENDTO = 10, ALLOW = 14, NOTIFY = 15, LEN = 16 };
#define TO(from, to) ((unsigned char)((to) - (from) - 1))
	const uint32_t never = UINT32_MAX; /* no system call has this number */
	struct sock_filter f[LEN] = {
		/* 0 */ STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		/* 1 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SL_AUDIT_ARCH, 0, TO(1, ALLOW)),
		/* 2 */ STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* 3 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_connect, TO(3, CHECK_PASS), 0),
		/* 4 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, datagrams ? SYS_sendmsg : never, TO(4, CHECK_PASS), 0),
		/* 5 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, datagrams ? SYS_sendto : never, TO(5, SENDTO), TO(5, ALLOW)),
		/* 6: args[3] == SL_SECCOMP_PASS: the shim decided it already */
		/* 6 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3)),
		/* 7 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SL_SECCOMP_PASS_LO, 0, TO(7, NOTIFY)),
		/* 8 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HI(3)),
		/* 9 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SL_SECCOMP_PASS_HI, TO(9, ALLOW), TO(9, NOTIFY)),
		/* 10: sendto with no destination (a connected socket's) is not seen */
		/* 10 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(4)),
		/* 11 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, TO(11, NOTIFY)),
		/* 12 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HI(4)),
		/* 13 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, TO(13, ALLOW), TO(13, NOTIFY)),
		/* 14 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* 15 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
#undef TO
	struct sock_fprog prog = {.len = LEN, .filter = f};
	int fd;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	/* WAIT_KILLABLE_RECV (5.19): once a call is being held, only a fatal signal
	 * interrupts it - a program's other signals (Go preempts with SIGURG) wait for
	 * its answer rather than restart the call at the back of the queue. */
	fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	                  SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
	if (fd < 0 && errno == EINVAL)
		fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	return fd < 0 ? -errno : fd;
}

int sl_supervise_send_fd(int sock, int fd)
{
	char byte = 'f', ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	/* Sent from under the filter just installed, which may trap sendmsg: marked,
	 * or it would wait for an answer from the very process it is sending to. */
	return syscall(SYS_sendmsg, sock, &msg, MSG_NOSIGNAL, SL_SECCOMP_PASS) == 1 ? 0 : -errno;
}

int sl_supervise_recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -EPROTO;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}
