/*
 * bytes.h -- little-endian integers in byte buffers, for the on-disk formats
 * (records, WAL segments, snapshots) and the queue configuration blob.
 *
 * Every persisted integer is little-endian whatever the host, so files move
 * between machines. The functions read and write byte by byte: p need not be
 * aligned, and the caller guarantees 4 or 8 bytes at p.
 */
#ifndef ORDO_BYTES_H
#define ORDO_BYTES_H

#include <stdint.h>

static inline void put_u32(void *p, uint32_t v)
{
    unsigned char *b = p;
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static inline void put_u64(void *p, uint64_t v)
{
    unsigned char *b = p;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t get_u32(const void *p)
{
    const unsigned char *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t get_u64(const void *p)
{
    const unsigned char *b = p;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

#endif /* ORDO_BYTES_H */
