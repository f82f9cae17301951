/*
 * siphash.c -- SipHash-1-3 over a byte string; see siphash.h.
 *
 * Written from the paper's description: the state is four 64-bit words
 * initialised from the key and the constant "somepseudorandomlygeneratedbytes";
 * each 8-byte little-endian block is mixed in with one SipRound, the last
 * block carries the length in its top byte, and three SipRounds finalise.
 */
#include "siphash.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                               \
    do {                                                                       \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);              \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                 \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                 \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);              \
    } while (0)

/* One unaligned load (memcpy), byte-swapped on big-endian hosts; inline,
 * since every key lookup hashes and this runs once per 8 bytes. */
static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

uint64_t ordo_siphash(const uint8_t key[ORDO_SIPHASH_KEY_LEN], const void *in, size_t len)
{
    const uint8_t *p = in;
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    const uint8_t *end = p + (len & ~(size_t)7);

    for (; p != end; p += 8) {
        uint64_t m = load_le64(p);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    switch (len & 7) {
    case 7: b |= (uint64_t)p[6] << 48; /* fall through */
    case 6: b |= (uint64_t)p[5] << 40; /* fall through */
    case 5: b |= (uint64_t)p[4] << 32; /* fall through */
    case 4: b |= (uint64_t)p[3] << 24; /* fall through */
    case 3: b |= (uint64_t)p[2] << 16; /* fall through */
    case 2: b |= (uint64_t)p[1] << 8;  /* fall through */
    case 1: b |= (uint64_t)p[0];       /* fall through */
    case 0: break;
    }
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

int ordo_random_key(uint8_t key[ORDO_SIPHASH_KEY_LEN])
{
    size_t got = 0;
    while (got < ORDO_SIPHASH_KEY_LEN) {
        ssize_t n = getrandom(key + got, ORDO_SIPHASH_KEY_LEN - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got == ORDO_SIPHASH_KEY_LEN)
        return 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t a = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32);
    uint64_t b = (uint64_t)(uintptr_t)&ts ^ (uint64_t)(uintptr_t)key;
    memcpy(key, &a, 8);
    memcpy(key + 8, &b, 8);
    return -1;
}
