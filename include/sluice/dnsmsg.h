/*
 * dnsmsg.h - reading DNS messages (RFC 1035, section 4): the name a query asks
 * about and the addresses its answer gives, for `sluice run --seccomp`, which
 * learns a static program's names from its own lookups (docs/design.md,
 * "Names of static programs").  Every length is checked against the message;
 * nothing is written past the caller's buffers.
 */
#ifndef SLUICE_DNSMSG_H
#define SLUICE_DNSMSG_H

#include <stddef.h>
#include <stdint.h>

struct sl_dns_addr {
	int family;       /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order; IPv4 in the first 4 bytes */
};

/* The first question's name (lower case, no trailing dot) into name[size].
 * 0, or -1 when msg is not a DNS message with a question or the name does not
 * fit. */
int sl_dns_question(const uint8_t *msg, size_t len, char *name, size_t size);

/* An answer's A and AAAA records (up to max, into out), whatever name each is
 * for (a CNAME chain ends in the addresses of the name asked).  Its question's
 * name into name[size] as sl_dns_question.  The count, or -1 when msg is not a
 * DNS answer (the QR bit) with a question. */
int sl_dns_answer_addrs(const uint8_t *msg, size_t len, char *name, size_t size, struct sl_dns_addr *out,
                        int max);

#endif
