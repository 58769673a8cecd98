/*
 * CRC32C (Castagnoli, reflected polynomial 0x82f63b78), the checksum of
 * etcd's WAL records and snapshot files.
 *
 * crc32c_update continues a checksum the way Go's crc32.Update does: pass 0
 * to start, or a previous result to chain, so that
 *   crc32c_update(crc32c_update(0, a), b) == crc32c_update(0, a || b).
 * It uses the SSE4.2 crc32 instruction when the CPU has it and a
 * slicing-by-8 table otherwise; both give the same results. Thread-safe.
 */
#ifndef CETCD_BASE_CRC32C_H
#define CETCD_BASE_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);

/* The table implementation alone (tests compare it with the fast path). */
uint32_t crc32c_update_table(uint32_t crc, const void *buf, size_t len);

/* Whether crc32c_update uses the CPU's crc32 instruction. */
bool crc32c_has_hw(void);

#endif
