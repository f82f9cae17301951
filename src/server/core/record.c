/*
 * record.c -- encode and decode records; the layout is in record.h.
 */
#include "record.h"

#include <stdbool.h>
#include <string.h>

#include "base/bytes.h"

void record_encode(const record_t *r, ordo_buf_t *out)
{
    size_t n = RECORD_HEADER_BYTES + r->klen + r->vlen + r->nlen + r->alen;
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
    put_u64(p + 51, r->ttl_ms);
    put_u64(p + 59, r->token);
    p[67] = (char)r->kind;
    char *q = p + 68;
    put_u32(q, r->klen);
    if (r->klen)
        memcpy(q + 4, r->key, r->klen);
    q += 4 + r->klen;
    put_u32(q, r->vlen);
    if (r->vlen)
        memcpy(q + 4, r->val, r->vlen);
    q += 4 + r->vlen;
    put_u32(q, r->nlen);
    if (r->nlen)
        memcpy(q + 4, r->name, r->nlen);
    q += 4 + r->nlen;
    put_u32(q, r->alen);
    if (r->alen)
        memcpy(q + 4, r->aux, r->alen);
    out->len += n;
}

/* Read a u32 length and the bytes after it; false if they overrun. */
static bool take_bytes(const unsigned char **p, size_t *left, const char **bytes, uint32_t *len)
{
    if (*left < 4)
        return false;
    uint32_t n = get_u32(*p);
    if (n > *left - 4)
        return false;
    *len = n;
    *bytes = (const char *)*p + 4;
    *p += 4 + n;
    *left -= 4 + (size_t)n;
    return true;
}

int record_decode(const void *bytes, size_t len, record_t *r)
{
    const unsigned char *p = bytes;
    bool v1 = len > 0 && p[0] == RECORD_FORMAT_V1;
    if (len < RECORD_HEADER_BYTES - (v1 ? 4 : 0) || (p[0] != RECORD_FORMAT && !v1))
        return -1;
    memset(r, 0, sizeof *r);
    r->type = p[1];
    r->flags = p[2];
    r->time_ms = get_u64(p + 3);
    r->lease = get_u64(p + 11);
    r->ifrev = get_u64(p + 19);
    r->expire_at_ms = get_u64(p + 27);
    r->incr = (int64_t)get_u64(p + 35);
    r->arg_rev = get_u64(p + 43);
    r->ttl_ms = get_u64(p + 51);
    r->token = get_u64(p + 59);
    r->kind = p[67];
    const unsigned char *q = p + 68;
    size_t left = len - 68;
    if (!take_bytes(&q, &left, &r->key, &r->klen) || !take_bytes(&q, &left, &r->val, &r->vlen) ||
        !take_bytes(&q, &left, &r->name, &r->nlen) || (!v1 && !take_bytes(&q, &left, &r->aux, &r->alen)) ||
        left != 0)
        return -1;
    bool known = (r->type >= REC_PUT && r->type <= REC_COMPACT) ||
                 (r->type >= REC_LEASE_GRANT && r->type <= REC_COORD_EXPIRE) ||
                 (r->type >= REC_Q_PUSH && r->type <= REC_Q_RESULT_END);
    return known ? 0 : -1;
}
