/*
 * CRC32C: the SSE4.2 instruction where present, slicing-by-8 otherwise.
 * Both work on the inverted register, as the standard CRC32C definition
 * and Go's crc32.Update do: invert on entry, invert on exit.
 */
#include "base/crc32c/crc32c.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY 0x82f63b78u

/* crc_table[k][b]: the register after feeding byte b followed by k zero
 * bytes; filled once by crc32c_init. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

static void crc32c_init(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
		crc_table[0][b] = c;
	}
	for (uint32_t b = 0; b < 256; b++)
		for (int k = 1; k < 8; k++)
			crc_table[k][b] = (crc_table[k - 1][b] >> 8) ^
					  crc_table[0][crc_table[k - 1][b] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_table_raw(uint32_t c, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7u)) {
		c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8); /* little-endian host (x86_64, aarch64) */
		uint32_t lo = (uint32_t)w ^ c;
		uint32_t hi = (uint32_t)(w >> 32);
		c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		    crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		    crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		    crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc_hw_raw(uint32_t c, const uint8_t *p, size_t len)
{
	uint64_t c64;

	while (len && ((uintptr_t)p & 7u)) {
		c = __builtin_ia32_crc32qi(c, *p++);
		len--;
	}
	c64 = c;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		len -= 8;
	}
	c = (uint32_t)c64;
	while (len--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t crc32c_update_table(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc32c_init);
	return ~crc_table_raw(~crc, buf, len);
}

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc32c_init);
#if defined(__x86_64__)
	if (crc_hw)
		return ~crc_hw_raw(~crc, buf, len);
#endif
	return ~crc_table_raw(~crc, buf, len);
}

bool crc32c_has_hw(void)
{
	pthread_once(&crc_once, crc32c_init);
	return crc_hw;
}
