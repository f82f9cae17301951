/*
 * bytes.h -- little-endian integers in byte buffers, for the on-disk formats
 * (records, WAL segments, snapshots) and the queue configuration blob.
 *
 * Every persisted integer is little-endian whatever the host, so files move
 * between machines. p need not be aligned, and the caller guarantees 4 or 8
 * bytes at p. On a little-endian host each access is one unaligned memcpy
 * (a single load or store once compiled); elsewhere, byte by byte. Records
 * are encoded on every write and decoded on every replayed one, so this is
 * on both hot paths.
 */
#ifndef ORDO_BYTES_H
#define ORDO_BYTES_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ORDO_BYTES_LE 1
#else
#define ORDO_BYTES_LE 0
#endif

static inline void put_u32(void *p, uint32_t v)
{
#if ORDO_BYTES_LE
    memcpy(p, &v, sizeof v);
#else
    unsigned char *b = p;
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
#endif
}

static inline void put_u64(void *p, uint64_t v)
{
#if ORDO_BYTES_LE
    memcpy(p, &v, sizeof v);
#else
    unsigned char *b = p;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
#endif
}

static inline uint32_t get_u32(const void *p)
{
#if ORDO_BYTES_LE
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    const unsigned char *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
#endif
}

static inline uint64_t get_u64(const void *p)
{
#if ORDO_BYTES_LE
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    const unsigned char *b = p;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
#endif
}

#endif /* ORDO_BYTES_H */
