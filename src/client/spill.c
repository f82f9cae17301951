/*
 * spill.c -- framing, checksums and scanning of the producer's spill file
 * (format in spill.h). Pure functions over byte buffers: the producer owns
 * the file descriptor, the lock and the policy of when to write and sync.
 */
#include "spill.h"

#include <string.h>

/* CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), bitwise: spill
 * records are written once per accepted message, far from a hot loop
 * compared with the network round trip they wait for. */
uint32_t spill_crc32(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void put32(char *o, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        o[i] = (char)(v >> (8 * i));
}

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static uint64_t get64(const char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint16_t get16(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint16_t)(u[0] | u[1] << 8);
}

size_t spill_frame(char *out, const void *body, uint32_t n)
{
    put32(out, n);
    put32(out + 4, spill_crc32(body, n));
    memcpy(out + 8, body, n);
    return 8 + (size_t)n;
}

int spill_scan(const char *buf, size_t len, size_t *valid_len, uint64_t *acked, const char **id,
               size_t *id_len, const char **queue, size_t *queue_len,
               void (*on_msg)(void *arg, const spill_msg_t *m), void *arg)
{
    *valid_len = 0;
    *acked = 0;
    *id = *queue = NULL;
    *id_len = *queue_len = 0;
    if (len < SPILL_MAGIC_LEN || memcmp(buf, SPILL_MAGIC, SPILL_MAGIC_LEN) != 0)
        return len == 0 ? 0 : -1;
    size_t pos = SPILL_MAGIC_LEN;
    *valid_len = pos;
    while (len - pos >= 8) {
        uint32_t n = get32(buf + pos);
        if (n == 0 || n > SPILL_BODY_MAX || len - pos - 8 < n)
            break;
        const char *b = buf + pos + 8;
        if (spill_crc32(b, n) != get32(buf + pos + 4))
            break;
        if (b[0] == 'H' && n >= 5) {
            uint16_t il = get16(b + 1);
            if ((size_t)3 + il + 2 > n)
                break;
            uint16_t ql = get16(b + 3 + il);
            if ((size_t)5 + il + ql != n)
                break;
            *id = b + 3;
            *id_len = il;
            *queue = b + 5 + il;
            *queue_len = ql;
        } else if (b[0] == 'M' && n >= 17) {
            spill_msg_t m = { .seq = get64(b + 1), .key_len = get32(b + 9), .payload_len = get32(b + 13) };
            if ((uint64_t)17 + m.key_len + m.payload_len != n)
                break;
            m.key = b + 17;
            m.payload = b + 17 + m.key_len;
            on_msg(arg, &m);
        } else if (b[0] == 'A' && n == 9) {
            uint64_t s = get64(b + 1);
            if (s > *acked)
                *acked = s;
        } else {
            break;
        }
        pos += 8 + n;
        *valid_len = pos;
    }
    return 0;
}
