/*
 * crc32c.h -- ordo_crc32c(), the checksum of every log record, and the two
 * implementations behind it, exposed so tests can check that they agree.
 *
 * All three functions compute the standard CRC-32C (Castagnoli, reflected
 * polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF) and chain:
 * f(f(0, a), b) == f(0, a || b). crc 0 starts a new checksum.
 */
#ifndef ORDO_CRC32C_H
#define ORDO_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ordo_crc32c() -- CRC-32C (Castagnoli) of buf, continuing from crc (0 to
 * start: ordo_crc32c(ordo_crc32c(0, a), b) is the CRC of a || b); the
 * SSE4.2 instruction where the CPU has it (crc32c_x86.c chooses). */
uint32_t ordo_crc32c(uint32_t crc, const void *buf, size_t len);

/* Portable table-driven version (crc32c.c). */
uint32_t ordo__crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* True if this CPU can run ordo__crc32c_hw() (crc32c_x86.c; false on other
 * architectures, where ordo__crc32c_hw() is the portable version). */
bool ordo__crc32c_hw_available(void);

/* The CPU's CRC32 instruction (SSE4.2). Call only if available. */
uint32_t ordo__crc32c_hw(uint32_t crc, const void *buf, size_t len);

#endif /* ORDO_CRC32C_H */
