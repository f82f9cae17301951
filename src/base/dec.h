/*
 * dec.h -- unsigned 64-bit integers written in decimal, for the wire: the
 * server's RESP replies and the client's RESP commands put a number in
 * every header line, so this is on both hot paths (snprintf costs about
 * ten times as many instructions).
 *
 * dec_u64() writes the digits only: no sign, no terminating NUL; the
 * caller guarantees DEC_U64_MAX bytes at dst.
 */
#ifndef ORDO_DEC_H
#define ORDO_DEC_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define DEC_U64_MAX 20 /* UINT64_MAX is 18446744073709551615 */

static const char dec_digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline size_t dec_u64_digits(uint64_t v)
{
    size_t n = 1;
    for (;;) {
        if (v < 10) return n;
        if (v < 100) return n + 1;
        if (v < 1000) return n + 2;
        if (v < 10000) return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* dec_u64() -- write v in decimal at dst (room for DEC_U64_MAX bytes), two
 * digits per division from the end. Returns the number of bytes written. */
static inline size_t dec_u64(char *dst, uint64_t v)
{
    size_t n = dec_u64_digits(v);
    size_t i = n;
    while (v >= 100) {
        size_t d = (size_t)(v % 100) * 2;
        v /= 100;
        dst[--i] = dec_digit_pairs[d + 1];
        dst[--i] = dec_digit_pairs[d];
    }
    if (v >= 10) {
        dst[--i] = dec_digit_pairs[v * 2 + 1];
        dst[--i] = dec_digit_pairs[v * 2];
    } else {
        dst[--i] = (char)('0' + v);
    }
    assert(i == 0);
    return n;
}

#endif
