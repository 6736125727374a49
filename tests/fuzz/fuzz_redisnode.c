/*
 * libFuzzer target for reading Sentinels' and Cluster nodes' answers (`make
 * fuzz`): any bytes, parsed by hiredis's own reader into a reply as the daemon
 * gets it, then read as a Sentinel's master, a CLUSTER SLOTS answer, a ROLE; the
 * same bytes, as text, as a redirection, a +switch-master message, INFO's run id
 * and an address.  Whatever is accepted is a terminated host and a port in range.
 */
#include "sluice/redisnode.h"

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(const struct sl_redis_addr *a)
{
	if (memchr(a->host, '\0', sizeof(a->host)) == NULL || a->port < 1 || a->port > 65535)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_redis_addr a, self = {"10.0.0.1", 7000};
	redisReader *rd = redisReaderCreate();
	void *reply = NULL;
	char *text = malloc(size + 1), id[41];

	if (!rd || !text) {
		free(text);
		if (rd)
			redisReaderFree(rd);
		return 0;
	}
	memcpy(text, data, size);
	text[size] = '\0';
	/* hiredis 0.14 (Debian 12's) has no cap on an announced array: it callocs
	 * room for every element announced, virtual memory that a real answer never
	 * touches but that libFuzzer counts.  Arrays of a million or more are left
	 * to the text checks below. */
	for (size_t i = 0; i + 7 < size; i++)
		if (data[i] == '*' && strspn(text + i + 1, "0123456789") >= 7)
			goto text_only;
	if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK && redisReaderGetReply(rd, &reply) == REDIS_OK &&
	    reply) {
		if (sl_redis_sentinel_master(reply, &a) == 0)
			check(&a);
		for (unsigned slot = 0; slot < SL_REDIS_SLOTS; slot += 4099)
			if (sl_redis_cluster_master(reply, slot, &self, &a) == 0)
				check(&a);
		(void)sl_redis_role_master(reply);
		freeReplyObject(reply);
	}
text_only:
	redisReaderFree(rd);
	if (sl_redis_redirect(text, &self, &a))
		check(&a);
	if (sl_redis_switch_master(text, "m", &a) == 0)
		check(&a);
	if (sl_redis_run_id(text, id) == 0 && strlen(id) != 40)
		abort();
	if (sl_redis_addr_parse(text, size, &a) == 0)
		check(&a);
	(void)sl_redis_slot(text, size);
	free(text);
	return 0;
}
