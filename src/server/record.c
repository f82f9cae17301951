/*
 * record.c -- encode and decode records; the layout is in record.h.
 */
#include "record.h"

#include <string.h>

static void put_u64(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (char)(v >> (8 * i));
}

static void put_u32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void record_encode(const record_t *r, ordo_buf_t *out)
{
    size_t n = RECORD_HEADER_BYTES + r->klen + r->vlen;
    char *p = ordo_buf_reserve(out, n);
    p[0] = RECORD_FORMAT;
    p[1] = (char)r->type;
    p[2] = (char)r->flags;
    put_u64(p + 3, r->time_ms);
    put_u64(p + 11, r->lease);
    put_u64(p + 19, r->ifrev);
    put_u64(p + 27, r->expire_at_ms);
    put_u64(p + 35, (uint64_t)r->incr);
    put_u64(p + 43, r->arg_rev);
    put_u32(p + 51, r->klen);
    if (r->klen)
        memcpy(p + 55, r->key, r->klen);
    put_u32(p + 55 + r->klen, r->vlen);
    if (r->vlen)
        memcpy(p + 59 + r->klen, r->val, r->vlen);
    out->len += n;
}

int record_decode(const void *bytes, size_t len, record_t *r)
{
    const unsigned char *p = bytes;
    if (len < RECORD_HEADER_BYTES || p[0] != RECORD_FORMAT)
        return -1;
    memset(r, 0, sizeof *r);
    r->type = p[1];
    if (r->type < REC_PUT || r->type > REC_COMPACT)
        return -1;
    r->flags = p[2];
    r->time_ms = get_u64(p + 3);
    r->lease = get_u64(p + 11);
    r->ifrev = get_u64(p + 19);
    r->expire_at_ms = get_u64(p + 27);
    r->incr = (int64_t)get_u64(p + 35);
    r->arg_rev = get_u64(p + 43);
    r->klen = get_u32(p + 51);
    if (r->klen > len - RECORD_HEADER_BYTES)
        return -1;
    r->key = (const char *)p + 55;
    r->vlen = get_u32(p + 55 + r->klen);
    if (r->vlen != len - RECORD_HEADER_BYTES - r->klen)
        return -1;
    r->val = (const char *)p + 59 + r->klen;
    return 0;
}
