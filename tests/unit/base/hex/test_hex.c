/*
 * Unit tests for base/hex/hex.c: every byte's digit value against the
 * C library's reading of it, whole strings against Go's
 * strconv.ParseUint(s, 16, 64) (the answers below are Go's), and byte
 * strings decoded against the bytes they spell.
 */
#include "shm_testlib.h"

#include <ctype.h>
#include <errno.h>

#include "base/hex/hex.h"

static void test_digit(void)
{
	for (int c = -128; c < 256; c++) {
		int want = -1;
		if (c >= 0 && isxdigit(c)) {
			char s[2] = { (char)c, 0 };
			want = (int)strtol(s, NULL, 16);
		}
		CHECK_EQ(hex_digit(c), want);
	}
	/* a plain char from a byte >= 0x80 is no digit either way */
	CHECK_EQ(hex_digit((char)0xe1), -1);
	CHECK_EQ(hex_digit((unsigned char)0xe1), -1);
}

static int parse(const char *s, uint64_t *v)
{
	return hex_parse_u64(s, strlen(s), v);
}

static void test_parse(void)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t v;
	} cases[] = {
		{ "0", 0, 0 },
		{ "f", 0, 15 },
		{ "F", 0, 15 },
		{ "8e9e05c52164694d", 0, 0x8e9e05c52164694dull },
		{ "8E9E05C52164694D", 0, 0x8e9e05c52164694dull },
		{ "ffffffffffffffff", 0, UINT64_MAX },
		{ "00000000000000000000001", 0, 1 },     /* leading zeros */
		{ "10000000000000000", -ERANGE, 0 },     /* 2^64 */
		{ "fffffffffffffffff", -ERANGE, 0 },
		{ "10000000000000000x", -ERANGE, 0 },    /* Go: range first */
		{ "", -EINVAL, 0 },
		{ "0x1f", -EINVAL, 0 },
		{ "+1f", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },
		{ " 1f", -EINVAL, 0 },
		{ "1f ", -EINVAL, 0 },
		{ "1g", -EINVAL, 0 },
		{ "ffffffffffffffffx", -EINVAL, 0 },     /* Go: syntax first */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 7;
		int rc = parse(cases[i].s, &v);
		if (rc != cases[i].rc)
			printf("\"%s\": %d, want %d\n", cases[i].s, rc, cases[i].rc);
		CHECK_EQ(rc, cases[i].rc);
		CHECK_EQ(v, rc ? 7 : cases[i].v); /* untouched on failure */
	}
	/* the length bounds the string: a NUL inside is a byte like any */
	uint64_t v = 0;
	CHECK_EQ(hex_parse_u64("12ab", 2, &v), 0);
	CHECK_EQ(v, 0x12);
	CHECK_EQ(hex_parse_u64("1\0002", 3, &v), -EINVAL);
	CHECK_EQ(hex_parse_u64("1", 0, &v), -EINVAL);
}

static void test_decode(void)
{
	uint8_t out[8];

	memset(out, 0xee, sizeof(out));
	CHECK_EQ(hex_decode("00fF7a", 6, out), 3);
	CHECK(out[0] == 0x00 && out[1] == 0xff && out[2] == 0x7a && out[3] == 0xee);
	CHECK_EQ(hex_decode("", 0, out), 0);
	CHECK_EQ(hex_decode("abc", 3, out), -EINVAL);   /* odd */
	CHECK_EQ(hex_decode("ab c", 4, out), -EINVAL);  /* a blank */
	CHECK_EQ(hex_decode("+f", 2, out), -EINVAL);    /* a sign */
	CHECK_EQ(hex_decode("0x", 2, out), -EINVAL);
	memset(out, 0xee, sizeof(out));
	CHECK_EQ(hex_decode("12g4", 4, out), -EINVAL);  /* the bytes before */
	CHECK(out[0] == 0x12 && out[1] == 0xee);
	CHECK_EQ(hex_decode("12\0", 4, out), -EINVAL); /* a NUL ends it */
	/* every byte value, both cases */
	for (int v = 0; v < 256; v++) {
		char s[3];
		snprintf(s, sizeof(s), v % 2 ? "%02X" : "%02x", v);
		CHECK_EQ(hex_decode(s, 2, out), 1);
		CHECK_EQ(out[0], v);
	}
}

int main(void)
{
	test_digit();
	test_parse();
	test_decode();
	printf("test_hex: ok\n");
	return 0;
}
