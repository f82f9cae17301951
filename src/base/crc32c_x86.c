/*
 * crc32c_x86.c -- CRC-32C with the SSE4.2 crc32 instruction (x86 and
 * x86-64), about 8 bytes per 3 cycles in one dependency chain: several
 * GB/s, far more than a disk. Compiled for SSE4.2 by a function attribute
 * only, so the binary still runs on CPUs without it (the caller checks
 * ordo__crc32c_hw_available() first).
 *
 * It also defines ordo_crc32c() itself, which picks between the two.
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

/* The choice is made on every call, from the flag the compiler runtime's
 * constructor set before main (__builtin_cpu_supports without
 * __builtin_cpu_init: a load and a test, inlined here), so there is no
 * mutable state of ours to initialise or race on. No caller runs before
 * main; one that did would get the portable version, which is still
 * correct. */
uint32_t ordo_crc32c(uint32_t crc, const void *buf, size_t len)
{
    if (__builtin_cpu_supports("sse4.2"))
        return ordo__crc32c_hw(crc, buf, len);
    return ordo__crc32c_sw(crc, buf, len);
}

/* 8 bytes at a time (4 on 32-bit) with unaligned loads through memcpy (one
 * mov; x86 loads unaligned words at full speed within a cache line), then a
 * 4-, 2- and 1-byte step for the rest: a WAL record of ~100 bytes is a
 * dozen crc32 instructions and no per-byte loop. */
__attribute__((target("sse4.2"))) uint32_t ordo__crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    crc = ~crc;
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
    if (len >= 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        crc = _mm_crc32_u16(crc, v);
        p += 2;
        len -= 2;
    }
    if (len > 0)
        crc = _mm_crc32_u8(crc, *p);
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

uint32_t ordo_crc32c(uint32_t crc, const void *buf, size_t len)
{
    return ordo__crc32c_sw(crc, buf, len);
}

#endif
