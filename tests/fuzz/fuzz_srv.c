/*
 * Fuzz target: a DNS server's answer to --discovery-srv's SRV query
 * (config/srv.c, config_srv_parse), the bytes as the resolver hands them
 * over. Whatever the answer, the count is -1 (with a reason) or at most
 * the records asked for, and each record's target is a NUL-ended name
 * within its buffer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_int.h"

#define MAX_RR 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct srv_rr rr[MAX_RR];
	char why[64];

	if (size > 65535)
		return 0; /* a DNS message over TCP is at most this long */
	why[0] = '\0';
	memset(rr, 0x5a, sizeof(rr));
	int n = config_srv_parse(data, (int)size, rr, MAX_RR, why, sizeof(why));
	if (n < -1 || n > MAX_RR || (n == -1 && !why[0])) {
		fprintf(stderr, "fuzz_srv: count %d, reason \"%s\"\n", n, why);
		abort();
	}
	for (int i = 0; i < n; i++) {
		if (!memchr(rr[i].target, '\0', sizeof(rr[i].target)) || rr[i].port > 65535) {
			fprintf(stderr, "fuzz_srv: record %d not well formed\n", i);
			abort();
		}
	}
	return 0;
}
