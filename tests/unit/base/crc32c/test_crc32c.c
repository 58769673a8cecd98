/*
 * Unit tests for base/crc32c/crc32c.c: published CRC32C vectors, chaining the
 * way etcd's WAL chains record checksums, and the hardware path against
 * the table path over every alignment and many lengths.
 */
#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "base/crc32c/crc32c.h"

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(test_mix(seed + i) >> 24);
}

static void test_vectors(void)
{
	uint8_t buf[48];

	CHECK_EQ(crc32c_update(0, NULL, 0), 0);
	CHECK_EQ(crc32c_update(0, "123456789", 9), 0xe3069283u);
	CHECK_EQ(crc32c_update_table(0, "123456789", 9), 0xe3069283u);
	/* RFC 3720, appendix B.4 */
	memset(buf, 0, 32);
	CHECK_EQ(crc32c_update(0, buf, 32), 0x8a9136aau);
	memset(buf, 0xff, 32);
	CHECK_EQ(crc32c_update(0, buf, 32), 0x62a8ab43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	CHECK_EQ(crc32c_update(0, buf, 32), 0x46dd794eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	CHECK_EQ(crc32c_update(0, buf, 32), 0x113fdb5cu);
	static const uint8_t iscsi[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	CHECK_EQ(crc32c_update(0, iscsi, sizeof(iscsi)), 0xd9963a56u);
	CHECK_EQ(crc32c_update_table(0, iscsi, sizeof(iscsi)), 0xd9963a56u);
	/* etcd's WAL: the CRC of the 4-byte metadata "meta" after a crc
	 * record of 0 (as in a WAL etcd 3.4 created). */
	CHECK_EQ(crc32c_update(0, "meta", 4), 0x1b071095u);
}

static void test_chaining(void)
{
	uint8_t buf[1000];
	fill(buf, sizeof(buf), 7);
	uint32_t whole = crc32c_update(0, buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut += 37) {
		uint32_t c = crc32c_update(0, buf, cut);
		CHECK_EQ(crc32c_update(c, buf + cut, sizeof(buf) - cut), whole);
	}
}

static void test_hw_matches_table(void)
{
	static uint8_t buf[9000];
	fill(buf, sizeof(buf), 42);
	printf("crc32c: %s\n", crc32c_has_hw() ? "sse4.2" : "table");
	for (size_t align = 0; align < 8; align++)
		for (size_t len = 0; len + align <= sizeof(buf); len += len < 64 ? 1 : 997) {
			uint32_t seed = (uint32_t)(len * 2654435761u);
			CHECK_EQ(crc32c_update(seed, buf + align, len),
				 crc32c_update_table(seed, buf + align, len));
		}
}

static void test_speed(void)
{
	static uint8_t buf[1 << 20];
	fill(buf, sizeof(buf), 3);
	int64_t t0 = clock_now_ns();
	uint32_t c = 0;
	for (int i = 0; i < 64; i++)
		c = crc32c_update(c, buf, sizeof(buf));
	int64_t ns = clock_now_ns() - t0;
	printf("crc32c: 64 MiB in %.1f ms (%.2f GB/s), crc %08x\n", ns / 1e6,
	       64.0 * (1 << 20) / (double)ns, c);
	uint32_t t = 0;
	for (int i = 0; i < 64; i++)
		t = crc32c_update_table(t, buf, sizeof(buf));
	CHECK_EQ(c, t);
}

int main(void)
{
	test_vectors();
	test_chaining();
	test_hw_matches_table();
	test_speed();
	printf("test_crc32c: ok\n");
	return 0;
}
