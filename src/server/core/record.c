/*
 * record.c -- what each record type holds, and its byte form; the layout
 * is in record.h.
 *
 * One table ties the typed record to the bytes: bind() says, per type,
 * which field of record_t's union sits in which slot of the byte form, and
 * uses() which slots a type (with its flags) actually carries. Encoding
 * format 3 writes the used slots; decoding any format fills them back; and
 * record_valid() requires every bound slot the type does not use to be
 * zero. Invariant: every field of a type's struct is bound to a slot, so
 * "every slot the type does not use is zero" covers the whole struct, and
 * uses(type, flags) is a subset of the slots bind() binds for the type.
 *
 * Nothing here depends on the numeric order of enum record_type: every
 * per-type fact is a case of a switch.
 */
#include "record.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include "base/bytes.h"
#include "coord.h"

/* ---- what each type is -------------------------------------------------- */


unsigned record_flags_allowed(unsigned type)
{
    switch (type) {
    case REC_PUT: return REC_F_IFREV | REC_F_NX | REC_F_XX | REC_F_KEEPTTL | REC_F_FENCE;
    case REC_DEL: return REC_F_IFREV | REC_F_FENCE;
    case REC_KEY_TTL: return REC_F_NX | REC_F_XX | REC_F_GT | REC_F_LT;
    case REC_ELECT_RESIGN: return REC_F_HANDOVER;
    case REC_Q_PUSH: return REC_F_COALESCE | REC_F_IDEM;
    case REC_Q_DEDUP_END: return REC_F_IDEM;
    case REC_Q_DELIVER: return REC_F_NOACK;
    case REC_Q_ACK: return REC_F_RESULT;
    default: return 0;
    }
}

const char *record_queue(const record_t *r, uint32_t *len)
{
    switch (r->type) {
    case REC_Q_PUSH: *len = r->q_push.qlen; return r->q_push.queue;
    case REC_Q_DELIVER: *len = r->q_deliver.qlen; return r->q_deliver.queue;
    case REC_Q_ACK: *len = r->q_ack.qlen; return r->q_ack.queue;
    case REC_Q_NACK: *len = r->q_nack.qlen; return r->q_nack.queue;
    case REC_Q_EXTEND: *len = r->q_extend.qlen; return r->q_extend.queue;
    case REC_Q_CONFIG: *len = r->q_config.qlen; return r->q_config.queue;
    case REC_Q_DROP: case REC_Q_PROMOTE: *len = r->q.qlen; return r->q.queue;
    case REC_Q_UNPARK: *len = r->q_unpark.qlen; return r->q_unpark.queue;
    case REC_Q_REDELIVER: *len = r->q_redeliver.qlen; return r->q_redeliver.queue;
    case REC_Q_DEDUP_END: *len = r->q_dedup_end.qlen; return r->q_dedup_end.queue;
    case REC_Q_RESULT_END: *len = r->q_result_end.qlen; return r->q_result_end.queue;
    case REC_Q_RETRY: *len = r->q_retry.qlen; return r->q_retry.queue;
    case REC_Q_PAUSE: *len = r->q_pause.qlen; return r->q_pause.queue;
    case REC_Q_REDRIVE: *len = r->q_redrive.qlen; return r->q_redrive.queue;
    case REC_Q_CANCEL: case REC_Q_EXPIRE: *len = r->q_msg.qlen; return r->q_msg.queue;
    case REC_Q_SCHEDULE_ADD: case REC_Q_SCHEDULE_DEL: case REC_Q_TICK: *len = r->q_sched.qlen; return r->q_sched.queue;
    default: *len = 0; return NULL;
    }
}

/* ---- slots ----------------------------------------------------------------
 * The slots of the byte form, in their on-disk order (record.h). */

enum slot {
    SL_LEASE, SL_IFREV, SL_EXPIRE, SL_INCR, SL_ARG, SL_TTL, SL_TOKEN, /* u64 */
    SL_KIND,                                                         /* u8 */
    SL_KEY, SL_VAL, SL_NAME, SL_AUX,                                 /* u32 length + bytes */
    SL_COUNT
};
#define SL_U64_COUNT SL_KIND
#define SL_BYTES_FIRST SL_KEY
#define B(s) (1u << (s))

/* Where a record's fields live, per slot. Only the slots in `bound` are
 * set (bind() does not clear the others: this runs for every record). */
typedef struct slots_s {
    unsigned bound;                  /* B(slot) for every slot the type has */
    uint64_t *u64[SL_U64_COUNT];
    uint8_t *kind;
    const char **bytes[SL_COUNT - SL_BYTES_FIRST];
    uint32_t *len[SL_COUNT - SL_BYTES_FIRST];
} slots_t;

#define U64(sl, field) (s->u64[sl] = &(field), s->bound |= B(sl))
#define KIND(field) (s->kind = &(field), s->bound |= B(SL_KIND))
#define BYTES(sl, ptr, n) \
    (s->bytes[(sl) - SL_BYTES_FIRST] = &(ptr), s->len[(sl) - SL_BYTES_FIRST] = &(n), s->bound |= B(sl))

/* Bind every field of r's type to its slot. Returns false for an unknown
 * type. (INCR's signed field is reached through its unsigned alias, which C
 * allows.) */
static bool bind(record_t *r, slots_t *s)
{
    s->bound = 0;
    switch (r->type) {
    case REC_PUT:
        U64(SL_LEASE, r->put.lease_id);
        U64(SL_IFREV, r->put.ifrev);
        U64(SL_EXPIRE, r->put.expire_at_ms);
        U64(SL_TOKEN, r->put.fence_token);
        BYTES(SL_KEY, r->put.key, r->put.klen);
        BYTES(SL_VAL, r->put.val, r->put.vlen);
        BYTES(SL_NAME, r->put.fence_lock, r->put.fence_llen);
        return true;
    case REC_DEL:
        U64(SL_IFREV, r->del.ifrev);
        U64(SL_TOKEN, r->del.fence_token);
        BYTES(SL_KEY, r->del.key, r->del.klen);
        BYTES(SL_NAME, r->del.fence_lock, r->del.fence_llen);
        return true;
    case REC_INCR:
        s->u64[SL_INCR] = (uint64_t *)(void *)&r->incr.by;
        s->bound |= B(SL_INCR);
        BYTES(SL_KEY, r->incr.key, r->incr.klen);
        return true;
    case REC_EXPIRE:
        BYTES(SL_KEY, r->expire.key, r->expire.klen);
        return true;
    case REC_COMPACT:
        U64(SL_ARG, r->compact.rev);
        return true;
    case REC_KEY_TTL:
        U64(SL_EXPIRE, r->key_ttl.expire_at_ms);
        BYTES(SL_KEY, r->key_ttl.key, r->key_ttl.klen);
        return true;
    case REC_APPEND:
        BYTES(SL_KEY, r->append.key, r->append.klen);
        BYTES(SL_VAL, r->append.val, r->append.vlen);
        return true;
    case REC_FLUSH:
        return true; /* no fields */
    case REC_LEASE_GRANT: case REC_LEASE_KEEPALIVE: case REC_LEASE_REVOKE:
        U64(SL_LEASE, r->lease.lease_id);
        U64(SL_TTL, r->lease.ttl_ms);
        return true;
    case REC_LOCK_ACQUIRE: case REC_LOCK_RELEASE: case REC_LOCK_EXTEND:
        U64(SL_LEASE, r->lock.lease_id);
        U64(SL_TTL, r->lock.ttl_ms);
        U64(SL_TOKEN, r->lock.token);
        BYTES(SL_KEY, r->lock.name, r->lock.nlen);
        return true;
    case REC_ELECT_CAMPAIGN: case REC_ELECT_PROCLAIM: case REC_ELECT_KEEPALIVE: case REC_ELECT_RESIGN:
        U64(SL_LEASE, r->elect.lease_id);
        U64(SL_TTL, r->elect.ttl_ms);
        U64(SL_TOKEN, r->elect.term);
        BYTES(SL_KEY, r->elect.name, r->elect.nlen);
        BYTES(SL_VAL, r->elect.val, r->elect.vlen);
        return true;
    case REC_COORD_EXPIRE:
        U64(SL_TOKEN, r->coord_expire.id);
        KIND(r->coord_expire.kind);
        BYTES(SL_KEY, r->coord_expire.name, r->coord_expire.nlen);
        return true;
    case REC_Q_PUSH:
        U64(SL_TTL, r->q_push.delay_ms);
        BYTES(SL_KEY, r->q_push.key, r->q_push.klen);
        BYTES(SL_VAL, r->q_push.payload, r->q_push.plen);
        BYTES(SL_NAME, r->q_push.queue, r->q_push.qlen);
        BYTES(SL_AUX, r->q_push.dedup_id, r->q_push.dlen);
        U64(SL_ARG, r->q_push.idem_hash);
        U64(SL_EXPIRE, r->q_push.idem_ms);
        return true;
    case REC_Q_DELIVER:
        U64(SL_TTL, r->q_deliver.lease_ms);
        BYTES(SL_NAME, r->q_deliver.queue, r->q_deliver.qlen);
        return true;
    case REC_Q_ACK:
        U64(SL_ARG, r->q_ack.msg_id);
        U64(SL_TOKEN, r->q_ack.token);
        BYTES(SL_VAL, r->q_ack.result, r->q_ack.rlen);
        BYTES(SL_NAME, r->q_ack.queue, r->q_ack.qlen);
        return true;
    case REC_Q_NACK:
        U64(SL_ARG, r->q_nack.msg_id);
        U64(SL_TTL, r->q_nack.delay_ms);
        U64(SL_TOKEN, r->q_nack.token);
        BYTES(SL_NAME, r->q_nack.queue, r->q_nack.qlen);
        return true;
    case REC_Q_EXTEND:
        U64(SL_ARG, r->q_extend.msg_id);
        U64(SL_TTL, r->q_extend.ttl_ms);
        U64(SL_TOKEN, r->q_extend.token);
        BYTES(SL_NAME, r->q_extend.queue, r->q_extend.qlen);
        return true;
    case REC_Q_CONFIG:
        BYTES(SL_KEY, r->q_config.deadletter, r->q_config.dllen);
        BYTES(SL_VAL, r->q_config.config, r->q_config.clen);
        BYTES(SL_NAME, r->q_config.queue, r->q_config.qlen);
        return true;
    case REC_Q_DROP: case REC_Q_PROMOTE:
        BYTES(SL_NAME, r->q.queue, r->q.qlen);
        return true;
    case REC_Q_UNPARK:
        BYTES(SL_KEY, r->q_unpark.key, r->q_unpark.klen);
        BYTES(SL_NAME, r->q_unpark.queue, r->q_unpark.qlen);
        return true;
    case REC_Q_REDELIVER:
        U64(SL_ARG, r->q_redeliver.msg_id);
        U64(SL_TOKEN, r->q_redeliver.token);
        BYTES(SL_NAME, r->q_redeliver.queue, r->q_redeliver.qlen);
        return true;
    case REC_Q_DEDUP_END:
        BYTES(SL_NAME, r->q_dedup_end.queue, r->q_dedup_end.qlen);
        BYTES(SL_AUX, r->q_dedup_end.dedup_id, r->q_dedup_end.dlen);
        BYTES(SL_KEY, r->q_dedup_end.key, r->q_dedup_end.klen);
        return true;
    case REC_Q_RESULT_END:
        U64(SL_ARG, r->q_result_end.msg_id);
        BYTES(SL_NAME, r->q_result_end.queue, r->q_result_end.qlen);
        return true;
    case REC_Q_RETRY:
        U64(SL_ARG, r->q_retry.msg_id);
        U64(SL_TTL, r->q_retry.delay_ms);
        U64(SL_TOKEN, r->q_retry.token);
        KIND(r->q_retry.kind);
        BYTES(SL_NAME, r->q_retry.queue, r->q_retry.qlen);
        return true;
    case REC_Q_PAUSE:
        U64(SL_EXPIRE, r->q_pause.until_ms);
        KIND(r->q_pause.op);
        BYTES(SL_KEY, r->q_pause.key, r->q_pause.klen);
        BYTES(SL_NAME, r->q_pause.queue, r->q_pause.qlen);
        return true;
    case REC_Q_REDRIVE:
        U64(SL_ARG, r->q_redrive.msg_id);
        BYTES(SL_KEY, r->q_redrive.key, r->q_redrive.klen);
        BYTES(SL_NAME, r->q_redrive.queue, r->q_redrive.qlen);
        BYTES(SL_AUX, r->q_redrive.dlq, r->q_redrive.dlen);
        return true;
    case REC_Q_CANCEL: case REC_Q_EXPIRE:
        U64(SL_ARG, r->q_msg.msg_id);
        BYTES(SL_KEY, r->q_msg.key, r->q_msg.klen);
        BYTES(SL_NAME, r->q_msg.queue, r->q_msg.qlen);
        return true;
    case REC_Q_SCHEDULE_ADD: case REC_Q_SCHEDULE_DEL: case REC_Q_TICK:
        U64(SL_EXPIRE, r->q_sched.tick_ms);
        BYTES(SL_KEY, r->q_sched.key, r->q_sched.klen);
        BYTES(SL_VAL, r->q_sched.spec, r->q_sched.slen);
        BYTES(SL_NAME, r->q_sched.queue, r->q_sched.qlen);
        BYTES(SL_AUX, r->q_sched.name, r->q_sched.nlen);
        return true;
    case REC_TXN:
        U64(SL_ARG, r->txn.count);
        BYTES(SL_VAL, r->txn.recs, r->txn.len);
        return true;
    case REC_ACL_SETUSER: case REC_ACL_DELUSER:
        BYTES(SL_KEY, r->acl.name, r->acl.nlen);
        BYTES(SL_VAL, r->acl.rules, r->acl.rlen);
        return true;
    default:
        return false;
    }
}

#undef U64
#undef BYTES
#undef KIND

/* The slots a record of this type and flags carries (record.h's table). */
static unsigned uses(unsigned type, unsigned flags)
{
    unsigned ifrev = (flags & REC_F_IFREV) ? B(SL_IFREV) : 0;
    unsigned fence = (flags & REC_F_FENCE) ? B(SL_TOKEN) | B(SL_NAME) : 0;
    unsigned idem = (flags & REC_F_IDEM) ? B(SL_ARG) | B(SL_EXPIRE) : 0;
    switch (type) {
    case REC_PUT: return B(SL_LEASE) | B(SL_EXPIRE) | B(SL_KEY) | B(SL_VAL) | ifrev | fence;
    case REC_DEL: return B(SL_KEY) | ifrev | fence;
    case REC_INCR: return B(SL_INCR) | B(SL_KEY);
    case REC_EXPIRE: return B(SL_KEY);
    case REC_COMPACT: return B(SL_ARG);
    case REC_KEY_TTL: return B(SL_EXPIRE) | B(SL_KEY);
    case REC_APPEND: return B(SL_KEY) | B(SL_VAL);
    case REC_FLUSH: return 0;
    case REC_LEASE_GRANT: return B(SL_TTL);
    case REC_LEASE_KEEPALIVE: case REC_LEASE_REVOKE: return B(SL_LEASE);
    case REC_LOCK_ACQUIRE: return B(SL_LEASE) | B(SL_TTL) | B(SL_KEY);
    case REC_LOCK_RELEASE: return B(SL_TOKEN) | B(SL_KEY);
    case REC_LOCK_EXTEND: return B(SL_TTL) | B(SL_TOKEN) | B(SL_KEY);
    case REC_ELECT_CAMPAIGN: return B(SL_LEASE) | B(SL_TTL) | B(SL_KEY) | B(SL_VAL);
    case REC_ELECT_PROCLAIM: return B(SL_TOKEN) | B(SL_KEY) | B(SL_VAL);
    case REC_ELECT_KEEPALIVE: return B(SL_TOKEN) | B(SL_KEY);
    case REC_ELECT_RESIGN: return B(SL_TOKEN) | B(SL_KEY) | ((flags & REC_F_HANDOVER) ? B(SL_VAL) : 0);
    case REC_COORD_EXPIRE: return B(SL_TOKEN) | B(SL_KIND) | B(SL_KEY);
    case REC_Q_PUSH: return B(SL_TTL) | B(SL_KEY) | B(SL_VAL) | B(SL_NAME) | B(SL_AUX) | idem;
    case REC_Q_DELIVER: return B(SL_TTL) | B(SL_NAME);
    case REC_Q_ACK: return B(SL_ARG) | B(SL_TOKEN) | B(SL_NAME) | ((flags & REC_F_RESULT) ? B(SL_VAL) : 0);
    case REC_Q_NACK: case REC_Q_EXTEND: return B(SL_ARG) | B(SL_TTL) | B(SL_TOKEN) | B(SL_NAME);
    case REC_Q_CONFIG: return B(SL_KEY) | B(SL_VAL) | B(SL_NAME);
    case REC_Q_DROP: case REC_Q_PROMOTE: return B(SL_NAME);
    case REC_Q_UNPARK: return B(SL_KEY) | B(SL_NAME);
    case REC_Q_REDELIVER: return B(SL_ARG) | B(SL_TOKEN) | B(SL_NAME);
    case REC_Q_DEDUP_END: return B(SL_NAME) | B(SL_AUX) | ((flags & REC_F_IDEM) ? B(SL_KEY) : 0);
    case REC_Q_RESULT_END: return B(SL_ARG) | B(SL_NAME);
    case REC_Q_RETRY: return B(SL_ARG) | B(SL_TTL) | B(SL_TOKEN) | B(SL_KIND) | B(SL_NAME);
    case REC_Q_PAUSE: return B(SL_EXPIRE) | B(SL_KIND) | B(SL_KEY) | B(SL_NAME);
    case REC_Q_REDRIVE: return B(SL_ARG) | B(SL_KEY) | B(SL_NAME) | B(SL_AUX);
    case REC_Q_CANCEL: case REC_Q_EXPIRE: return B(SL_ARG) | B(SL_KEY) | B(SL_NAME);
    case REC_Q_SCHEDULE_ADD: return B(SL_KEY) | B(SL_VAL) | B(SL_NAME) | B(SL_AUX);
    case REC_Q_SCHEDULE_DEL: return B(SL_NAME) | B(SL_AUX);
    case REC_Q_TICK: return B(SL_EXPIRE) | B(SL_NAME) | B(SL_AUX);
    case REC_TXN: return B(SL_ARG) | B(SL_VAL);
    case REC_ACL_SETUSER: return B(SL_KEY) | B(SL_VAL);
    case REC_ACL_DELUSER: return B(SL_KEY);
    default: return 0;
    }
}

/* Does bound slot sl of s hold a non-zero value (a non-empty byte string)? */
/* A pause record's operation is known; the queue-wide ones name no key
 * and only pauses carry an end. */
static bool q_pause_valid(const rec_q_pause_t *p)
{
    bool whole = p->op == Q_PAUSE_QUEUE || p->op == Q_RESUME_QUEUE || p->op == Q_PAUSE_END_QUEUE;
    bool pause = p->op == Q_PAUSE_KEY || p->op == Q_PAUSE_QUEUE;
    return p->op >= Q_PAUSE_KEY && p->op <= Q_PAUSE_END_QUEUE && (!whole || p->klen == 0) &&
           (pause || p->until_ms == 0);
}

static inline bool slot_set(const slots_t *s, int sl)
{
    if (sl < SL_U64_COUNT)
        return *s->u64[sl] != 0;
    if (sl == SL_KIND)
        return *s->kind != 0;
    return *s->len[sl - SL_BYTES_FIRST] != 0;
}

static inline bool slot_bound(const slots_t *s, int sl) { return (s->bound & B(sl)) != 0; }

#define BYTES_SLOTS (B(SL_KEY) | B(SL_VAL) | B(SL_NAME) | B(SL_AUX))

/* The slots of r (bound in s) fit its type: every used slot is bound,
 * every bound slot it does not use is zero, every used byte string with a
 * length has bytes. Walks the set bits only: this runs before every
 * record is written. */
static bool slots_valid(const record_t *r, const slots_t *s, unsigned used)
{
    if ((used & ~s->bound) != 0)
        return false; /* the table contradicts itself */
    for (unsigned extra = s->bound & ~used; extra != 0; extra &= extra - 1)
        if (slot_set(s, __builtin_ctz(extra)))
            return false; /* a field the type (with these flags) does not use */
    for (unsigned b = used & BYTES_SLOTS; b != 0; b &= b - 1) {
        int sl = __builtin_ctz(b);
        if (*s->len[sl - SL_BYTES_FIRST] != 0 && *s->bytes[sl - SL_BYTES_FIRST] == NULL)
            return false;
    }
    if (r->type == REC_COORD_EXPIRE && r->coord_expire.kind != COORD_LEASE && r->coord_expire.kind != COORD_LOCK &&
        r->coord_expire.kind != COORD_ELECT)
        return false;
    if (r->type == REC_Q_RETRY && (r->q_retry.kind & ~(unsigned)(QUEUE_RETRY_F_LEASE | QUEUE_RETRY_F_GIVEUP)) != 0)
        return false;
    if (r->type == REC_Q_PAUSE && !q_pause_valid(&r->q_pause))
        return false;
    if (r->type == REC_TXN) { /* every sub-record well formed, none a TXN, as many as it says */
        size_t off = 0;
        uint64_t n = 0;
        record_t sub;
        int rc;
        while ((rc = record_txn_next(&r->txn, &off, &sub)) == 1)
            n++;
        if (rc < 0 || n != r->txn.count)
            return false;
    }
    return true;
}

static inline bool type_and_flags_ok(const record_t *r)
{
    return record_family(r->type) != REC_FAM_NONE && (r->flags & ~record_flags_allowed(r->type)) == 0;
}

bool record_valid(const record_t *r)
{
    if (!type_and_flags_ok(r))
        return false;
    slots_t s;
    bind((record_t *)r, &s); /* read only */
    return slots_valid(r, &s, uses(r->type, r->flags));
}

int record_txn_next(const rec_txn_t *t, size_t *off, record_t *sub)
{
    if (*off == t->len)
        return 0;
    if (t->len - *off < 4)
        return -1;
    uint32_t n = get_u32(t->recs + *off);
    if (n > t->len - *off - 4)
        return -1;
    const char *p = t->recs + *off + 4;
    if (record_format(p, n) != RECORD_FORMAT || n < 2 || (unsigned char)p[1] == REC_TXN ||
        record_decode(p, n, sub) != 0)
        return -1;
    *off += 4 + (size_t)n;
    return 1;
}

/* ---- encode ------------------------------------------------------------------ */

#define V3_FIXED_BYTES 12 /* format, type, flags u16, time_ms */

static size_t slot_bytes(const slots_t *s, int sl)
{
    if (sl < SL_U64_COUNT)
        return 8;
    if (sl == SL_KIND)
        return 1;
    return 4 + (size_t)*s->len[sl - SL_BYTES_FIRST];
}

void record_encode(const record_t *r, ordo_buf_t *out)
{
    assert(type_and_flags_ok(r));
    slots_t s;
    bind((record_t *)r, &s); /* read only */
    unsigned used = uses(r->type, r->flags);
    /* record_valid(r), with the slots bound once. The whole check runs in
     * debug builds (the sanitizer suites): it costs a third of an encode,
     * and every record reaching here was built by one of a few command
     * functions whose shapes test_srv_record checks type by type; release
     * builds keep the type and flags check above. */
    ORDO_DEBUG_ASSERT(slots_valid(r, &s, used));
    size_t n = V3_FIXED_BYTES, fixed = V3_FIXED_BYTES;
    for (unsigned b = used; b != 0; b &= b - 1) {
        int sl = __builtin_ctz(b);
        n += slot_bytes(&s, sl);
        fixed += sl < SL_BYTES_FIRST ? slot_bytes(&s, sl) : 4;
    }
    assert(fixed <= RECORD_HEADER_BYTES); /* the log's record size limit counts on it */
    char *p = ordo_buf_reserve(out, n), *q = p + V3_FIXED_BYTES;
    p[0] = RECORD_FORMAT;
    p[1] = (char)r->type;
    p[2] = (char)(r->flags & 0xff);
    p[3] = (char)(r->flags >> 8);
    put_u64(p + 4, r->time_ms);
    for (unsigned b = used; b != 0; b &= b - 1) { /* in slot order: lowest bit first */
        int sl = __builtin_ctz(b);
        if (sl < SL_U64_COUNT) {
            put_u64(q, *s.u64[sl]);
            q += 8;
        } else if (sl == SL_KIND) {
            *q++ = (char)*s.kind;
        } else {
            uint32_t len = *s.len[sl - SL_BYTES_FIRST];
            put_u32(q, len);
            if (len)
                memcpy(q + 4, *s.bytes[sl - SL_BYTES_FIRST], len);
            q += 4 + (size_t)len;
        }
    }
    assert((size_t)(q - p) == n);
    out->len += n;
}

/* ---- decode ------------------------------------------------------------------ */

typedef struct rd_s {
    const unsigned char *p;
    size_t left;
    bool bad;  /* a read overran: every later read is refused too */
} rd_t;

static uint64_t rd_u64(rd_t *r)
{
    if (r->bad || r->left < 8) {
        r->bad = true;
        return 0;
    }
    uint64_t v = get_u64(r->p);
    r->p += 8;
    r->left -= 8;
    return v;
}

static uint8_t rd_u8(rd_t *r)
{
    if (r->bad || r->left < 1) {
        r->bad = true;
        return 0;
    }
    r->left--;
    return *r->p++;
}

static const char *rd_bytes(rd_t *r, uint32_t *len)
{
    if (r->bad || r->left < 4 || get_u32(r->p) > r->left - 4) {
        r->bad = true;
        *len = 0;
        return NULL;
    }
    *len = get_u32(r->p);
    const char *b = (const char *)r->p + 4;
    r->p += 4 + (size_t)*len;
    r->left -= 4 + (size_t)*len;
    return b;
}

/* One slot's value as read, whatever the type. */
typedef struct raw_s {
    uint64_t u64[SL_U64_COUNT];
    uint8_t kind;
    const char *bytes[SL_COUNT - SL_BYTES_FIRST];
    uint32_t len[SL_COUNT - SL_BYTES_FIRST];
} raw_t;

static void rd_slot(rd_t *rd, int sl, raw_t *v)
{
    if (sl < SL_U64_COUNT)
        v->u64[sl] = rd_u64(rd);
    else if (sl == SL_KIND)
        v->kind = rd_u8(rd);
    else
        v->bytes[sl - SL_BYTES_FIRST] = rd_bytes(rd, &v->len[sl - SL_BYTES_FIRST]);
}

static bool raw_set(const raw_t *v, int sl)
{
    if (sl < SL_U64_COUNT)
        return v->u64[sl] != 0;
    if (sl == SL_KIND)
        return v->kind != 0;
    return v->len[sl - SL_BYTES_FIRST] != 0;
}

/* Store the used slots of v into r (type and flags set, the rest zero). */
static void fill(record_t *r, unsigned used, const raw_t *v)
{
    slots_t s;
    bool known = bind(r, &s);
    assert(known);
    (void)known;
    for (int sl = 0; sl < SL_COUNT; sl++) {
        if (!(used & B(sl)))
            continue;
        assert(slot_bound(&s, sl));
        if (sl < SL_U64_COUNT) {
            *s.u64[sl] = v->u64[sl];
        } else if (sl == SL_KIND) {
            *s.kind = v->kind;
        } else {
            *s.bytes[sl - SL_BYTES_FIRST] = v->bytes[sl - SL_BYTES_FIRST];
            *s.len[sl - SL_BYTES_FIRST] = v->len[sl - SL_BYTES_FIRST];
        }
    }
}

static int decode_v3(const unsigned char *p, size_t len, record_t *r)
{
    if (len < V3_FIXED_BYTES)
        return -1;
    unsigned type = p[1], flags = (unsigned)p[2] | (unsigned)p[3] << 8;
    if (record_family(type) == REC_FAM_NONE || (flags & ~record_flags_allowed(type)) != 0)
        return -1;
    unsigned used = uses(type, flags);
    raw_t v;
    memset(&v, 0, sizeof v);
    rd_t rd = {.p = p + V3_FIXED_BYTES, .left = len - V3_FIXED_BYTES};
    for (int sl = 0; sl < SL_COUNT; sl++)
        if (used & B(sl))
            rd_slot(&rd, sl, &v);
    if (rd.bad || rd.left != 0)
        return -1;
    memset(r, 0, sizeof *r);
    r->type = (uint8_t)type;
    r->flags = (uint16_t)flags;
    r->time_ms = get_u64(p + 4);
    fill(r, used, &v);
    return 0;
}

/* Formats 1 and 2 stored three queue flags in bit 0 (IFREV's): give them
 * their own bits back. */
static unsigned legacy_flags(unsigned type, unsigned b)
{
    unsigned bit0 = b & 1u, rest = b & ~1u;
    switch (type) {
    case REC_Q_PUSH: return rest | (bit0 ? REC_F_COALESCE : 0);
    case REC_Q_DELIVER: return rest | (bit0 ? REC_F_NOACK : 0);
    case REC_Q_ACK: return rest | (bit0 ? REC_F_RESULT : 0);
    default: return b;
    }
}

static int decode_legacy(const unsigned char *p, size_t len, bool has_aux, record_t *r)
{
    if (len < 3)
        return -1;
    unsigned type = p[1], flags = legacy_flags(type, p[2]);
    if (record_family(type) == REC_FAM_NONE || (flags & ~record_flags_allowed(type)) != 0)
        return -1;
    raw_t v;
    memset(&v, 0, sizeof v);
    rd_t rd = {.p = p + 3, .left = len - 3};
    uint64_t time_ms = rd_u64(&rd);
    for (int sl = 0; sl < SL_COUNT; sl++)
        if (sl != SL_AUX || has_aux)
            rd_slot(&rd, sl, &v);
    if (rd.bad || rd.left != 0)
        return -1;
    unsigned used = uses(type, flags);
    for (int sl = 0; sl < SL_COUNT; sl++)
        if (!(used & B(sl)) && raw_set(&v, sl))
            return -1; /* a field its type does not use */
    memset(r, 0, sizeof *r);
    r->type = (uint8_t)type;
    r->flags = (uint16_t)flags;
    r->time_ms = time_ms;
    fill(r, used, &v);
    return 0;
}

int record_decode(const void *bytes, size_t len, record_t *r)
{
    const unsigned char *p = bytes;
    int rc = -1;
    switch (len > 0 ? p[0] : 0) {
    case RECORD_FORMAT: rc = decode_v3(p, len, r); break;
    case RECORD_FORMAT_V2: rc = decode_legacy(p, len, true, r); break;
    case RECORD_FORMAT_V1: rc = decode_legacy(p, len, false, r); break;
    default: break;
    }
    /* Decoding only fills what the type uses: check it again, whole. */
    if (rc == 0 && !record_valid(r))
        rc = -1;
    return rc;
}

int record_format(const void *bytes, size_t len) { return len > 0 ? ((const unsigned char *)bytes)[0] : 0; }
