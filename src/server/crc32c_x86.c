/*
 * crc32c_x86.c -- CRC-32C with the SSE4.2 crc32 instruction (x86 and
 * x86-64), about 8 bytes per 3 cycles in one dependency chain: several
 * GB/s, far more than a disk. Compiled for SSE4.2 by a function attribute
 * only, so the binary still runs on CPUs without it (the caller checks
 * ordo__crc32c_hw_available() first).
 *
 * On other architectures this file provides the same names backed by the
 * portable version, so the rest of the code has no #ifdef.
 */
#include "crc32c.h"

#if defined(__x86_64__) || defined(__i386__)

#include <nmmintrin.h>
#include <string.h>

bool ordo__crc32c_hw_available(void)
{
    __builtin_cpu_init(); /* idempotent; needed if called from a constructor */
    return __builtin_cpu_supports("sse4.2");
}

/* Bytes one at a time until p is 8-aligned, then 8 at a time (4 on 32-bit),
 * then the rest. Unaligned loads go through memcpy (one mov). */
__attribute__((target("sse4.2"))) uint32_t ordo__crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    crc = ~crc;
    while (len > 0 && ((uintptr_t)p & 7u) != 0) {
        crc = _mm_crc32_u8(crc, *p++);
        len--;
    }
#if defined(__x86_64__)
    uint64_t crc64 = crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        crc64 = _mm_crc32_u64(crc64, v);
        p += 8;
        len -= 8;
    }
    crc = (uint32_t)crc64;
#endif
    while (len >= 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        crc = _mm_crc32_u32(crc, v);
        p += 4;
        len -= 4;
    }
    while (len > 0) {
        crc = _mm_crc32_u8(crc, *p++);
        len--;
    }
    return ~crc;
}

#else /* no CRC instruction known here: the portable version stands in */

bool ordo__crc32c_hw_available(void)
{
    return false;
}

uint32_t ordo__crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    return ordo__crc32c_sw(crc, buf, len);
}

#endif
