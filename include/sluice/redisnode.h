/*
 * redisnode.h - finding the Redis that holds the fleet's keys when Redis is made
 * highly available (docs/design.md, "Across machines: Sentinel and Cluster"):
 * the answers of Sentinels and Cluster nodes read into an address, with no I/O.
 * src/daemon/fleet_find.c asks the questions; the daemon's fleet.c and the
 * probe (fleet_probe.c) act on the answers.  Every answer is untrusted: anything
 * not of the documented shape is "no address" (-1), never a guess.
 */
#ifndef SLUICE_REDISNODE_H
#define SLUICE_REDISNODE_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#define SL_REDIS_SLOTS 16384
#define SL_REDIS_HOST_MAX 256

/* A node's address: a host name or address, and a TCP port. */
struct sl_redis_addr {
	char host[SL_REDIS_HOST_MAX];
	int port;
};

/* The Cluster hash slot of a key: CRC16 (XMODEM) of the key, or of the text
 * between its first '{' and the next '}' when that is not empty, mod 16384. */
unsigned sl_redis_slot(const char *key, size_t len);

/* "HOST:PORT" or "[IPV6]:PORT" into a; 0, or -1 for anything else. */
int sl_redis_addr_parse(const char *s, size_t len, struct sl_redis_addr *a);

/* "HOST:PORT", with brackets around an IPv6 address. */
void sl_redis_addr_format(const struct sl_redis_addr *a, char *buf, size_t size);

/* A redirection error: "MOVED SLOT HOST:PORT" or "ASK SLOT HOST:PORT".  Returns 1
 * for MOVED, 2 for ASK, 0 for any other error.  An empty host (a node that
 * does not know its own address) is `self`'s host. */
int sl_redis_redirect(const char *err, const struct sl_redis_addr *self, struct sl_redis_addr *to);

/* SENTINEL get-master-addr-by-name's answer ([host, port]).  0, or -1 (nil: the
 * Sentinel does not know the name; anything else). */
int sl_redis_sentinel_master(const redisReply *r, struct sl_redis_addr *a);

/* A +switch-master message's text, "NAME OLDHOST OLDPORT NEWHOST NEWPORT", for
 * `name`: 0 and the new master in a, or -1 (another master's, or malformed). */
int sl_redis_switch_master(const char *msg, const char *name, struct sl_redis_addr *a);

/* CLUSTER SLOTS's answer: the master serving `slot` (an empty host is `self`'s).
 * 0, or -1 (no range holds it; anything malformed). */
int sl_redis_cluster_master(const redisReply *r, unsigned slot, const struct sl_redis_addr *self,
                            struct sl_redis_addr *a);

/* ROLE's answer: 1 when the node says it is a master, else 0. */
int sl_redis_role_master(const redisReply *r);

/* The run_id line of INFO server's text into id (41 bytes); 0, or -1. */
int sl_redis_run_id(const char *info, char id[41]);

#endif
