/*
 * Unit tests for gatewayd/transport/grpc_wire.c: grpc-timeout parsing, grpc-message
 * percent-encoding, quoting, content-type and prefix helpers.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "shm_testlib.h"

#include "gatewayd/transport/grpc_wire.h"

static int64_t timeout(const char *s)
{
	int64_t ns = -1;
	int rc = grpc_timeout_parse((const uint8_t *)s, strlen(s), &ns);
	return rc < 0 ? rc : ns;
}

static void test_timeout(void)
{
	CHECK_EQ(timeout("1n"), 1);
	CHECK_EQ(timeout("7u"), 7000);
	CHECK_EQ(timeout("100m"), 100000000);
	CHECK_EQ(timeout("5S"), 5000000000LL);
	CHECK_EQ(timeout("2M"), 120000000000LL);
	CHECK_EQ(timeout("1H"), 3600000000000LL);
	CHECK_EQ(timeout("0S"), 0);
	CHECK_EQ(timeout("99999999n"), 99999999);
	/* 99999999 hours overflow int64 nanoseconds: clamped as grpc-go does. */
	CHECK_EQ(timeout("99999999H"), INT64_MAX);
	CHECK_EQ(timeout("S"), -EINVAL);
	CHECK_EQ(timeout(""), -EINVAL);
	CHECK_EQ(timeout("123456789S"), -EINVAL); /* nine digits */
	CHECK_EQ(timeout("10s"), -EINVAL);        /* unit is case-sensitive */
	CHECK_EQ(timeout("-1S"), -EINVAL);
	CHECK_EQ(timeout("+1S"), -EINVAL);
	CHECK_EQ(timeout("1 S"), -EINVAL);
	CHECK_EQ(timeout("1x"), -EINVAL);
}

static void test_message_encoding(void)
{
	char out[256], back[256];
	const char *plain = "etcdserver: key not found";
	size_t n = grpc_message_encode(plain, strlen(plain), out, sizeof(out));
	CHECK_EQ(n, strlen(plain));
	CHECK(memcmp(out, plain, n) == 0);

	const char *odd = "100%\n\xc3\xa9~ ";
	n = grpc_message_encode(odd, strlen(odd), out, sizeof(out));
	out[n] = '\0';
	CHECK(strcmp(out, "100%25%0A%C3%A9~ ") == 0);
	size_t m = grpc_message_decode(out, n, back);
	CHECK_EQ(m, strlen(odd));
	CHECK(memcmp(back, odd, m) == 0);

	/* An escape is never split by the output limit. */
	n = grpc_message_encode("ab\n", 3, out, 4);
	CHECK_EQ(n, 2);
	n = grpc_message_encode("ab\n", 3, out, 5);
	CHECK_EQ(n, 5);

	/* Malformed escapes decode as themselves. */
	m = grpc_message_decode("%zz%4", 5, back);
	CHECK_EQ(m, 5);
	CHECK(memcmp(back, "%zz%4", 5) == 0);
	m = grpc_message_decode("%41%62", 6, back);
	CHECK_EQ(m, 2);
	CHECK(memcmp(back, "Ab", 2) == 0);
}

static void test_quote(void)
{
	char q[64];
	grpc_quote(q, sizeof(q), (const uint8_t *)"/a\"b\\c", 6, 100);
	CHECK(strcmp(q, "\"/a\\\"b\\\\c\"") == 0);
	grpc_quote(q, sizeof(q), (const uint8_t *)"x\x01\xff", 3, 100);
	CHECK(strcmp(q, "\"x\\x01\\xff\"") == 0);
	grpc_quote(q, sizeof(q), (const uint8_t *)"abcdef", 6, 3);
	CHECK(strcmp(q, "\"abc\"...") == 0);
	grpc_quote(q, sizeof(q), (const uint8_t *)"", 0, 3);
	CHECK(strcmp(q, "\"\"") == 0);
	/* A small buffer cuts the text and still closes the quote. */
	char small[12];
	size_t n = grpc_quote(small, sizeof(small), (const uint8_t *)"abcdefghijklmnop", 16, 100);
	CHECK_EQ(n, strlen(small));
	CHECK(n < sizeof(small));
	CHECK(small[0] == '"');
	CHECK(strstr(small + 1, "\"") != NULL);
}

static bool ct(const char *s)
{
	return grpc_content_type_ok((const uint8_t *)s, strlen(s));
}

static void test_content_type(void)
{
	CHECK(ct("application/grpc"));
	CHECK(ct("application/grpc+proto"));
	CHECK(ct("application/grpc;charset=utf-8"));
	CHECK(ct("application/grpc+"));
	CHECK(!ct("application/grpcx"));
	CHECK(!ct("application/json"));
	CHECK(!ct("Application/grpc"));
	CHECK(!ct(""));
}

static void test_prefix_and_names(void)
{
	uint8_t p[GRPC_PREFIX_LEN];
	grpc_prefix_write(p, false, 0x01020304u);
	CHECK_EQ(p[0], 0);
	CHECK_EQ(p[1], 1);
	CHECK_EQ(p[4], 4);
	CHECK_EQ(grpc_prefix_len(p), 0x01020304u);
	grpc_prefix_write(p, true, 0xffffffffu);
	CHECK_EQ(p[0], 1);
	CHECK_EQ(grpc_prefix_len(p), 0xffffffffu);
	CHECK(strcmp(grpc_status_name(GRPC_STATUS_OK), "OK") == 0);
	CHECK(strcmp(grpc_status_name(GRPC_STATUS_CANCELLED), "Canceled") == 0);
	CHECK(strcmp(grpc_status_name(GRPC_STATUS_RESOURCE_EXHAUSTED), "ResourceExhausted") == 0);
	CHECK(strcmp(grpc_status_name(GRPC_STATUS_UNAUTHENTICATED), "Unauthenticated") == 0);
	CHECK(strcmp(grpc_status_name((enum grpc_status)99), "Unknown") == 0);
	CHECK_EQ(GRPC_OVERHEAD_BYTES, 512 * 1024);
}

int main(void)
{
	test_timeout();
	test_message_encoding();
	test_quote();
	test_content_type();
	test_prefix_and_names();
	printf("test_grpc_wire: all passed\n");
	return 0;
}
