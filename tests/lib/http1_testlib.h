/*
 * tests/lib/http1_testlib.h: feeding an HTTP/1.1 connection of
 * gatewayd/transport/http1.h and taking what it answered, for its unit
 * tests (tests/unit/gatewayd/transport/test_http1*.c). Include after
 * shm_testlib.h (CHECK, CHECK_EQ).
 */
#ifndef CETCD_TESTS_HTTP1_TESTLIB_H
#define CETCD_TESTS_HTTP1_TESTLIB_H

#include <string.h>

#include "gatewayd/transport/http1.h"

/* The whole output of conn so far, as a string (valid until the next
 * call); marks it written. */
static inline char *take(struct http1_conn *c)
{
	static char buf[1 << 20];
	size_t n = http1_conn_out_len(c);
	CHECK(n < sizeof(buf));
	memcpy(buf, c->out.data + c->out_off, n);
	buf[n] = '\0';
	http1_conn_out_done(c, n);
	return buf;
}

/* The client sends s. */
static inline void feed(struct http1_conn *c, const char *s)
{
	CHECK_EQ(http1_conn_recv(c, (const uint8_t *)s, strlen(s)), 0);
}

#endif
