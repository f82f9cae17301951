/*
 * test_srv_record.c -- the record codec (core/record.h): every record type
 * round-trips through format 3; records in format 2 (and 1), built here by
 * a copy of the encoder that wrote them, decode to the same typed record
 * with their bit-0 flags remapped; records whose fields do not fit their
 * type, of unknown types or flags, or with trailing bytes are refused; and
 * a record cut at every length is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/bytes.h"
#include "core/coord.h"
#include "core/core.h"
#include "core/record.h"

/* ---- the format-2 encoder, as it was ------------------------------------------
 * The flat record of formats 1 and 2 (every field of every type) and the
 * encoder that wrote it, copied from record.c before format 3, so these
 * bytes are the bytes old logs hold. */

typedef struct old_s {
    uint8_t type, flags;
    uint64_t time_ms, lease, ifrev, expire_at_ms;
    int64_t incr;
    uint64_t arg_rev, ttl_ms, token;
    uint8_t kind;
    const char *key;
    uint32_t klen;
    const char *val;
    uint32_t vlen;
    const char *name;
    uint32_t nlen;
    const char *aux;
    uint32_t alen;
} old_t;

static void old_encode(const old_t *r, int format, ordo_buf_t *out)
{
    size_t n = 84 + r->klen + r->vlen + r->nlen + r->alen - (format == 1 ? 4 : 0);
    char *p = ordo_buf_reserve(out, n);
    p[0] = (char)format;
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
    const char *b[4] = {r->key, r->val, r->name, r->aux};
    uint32_t l[4] = {r->klen, r->vlen, r->nlen, r->alen};
    for (int i = 0; i < (format == 1 ? 3 : 4); i++) {
        put_u32(q, l[i]);
        if (l[i])
            memcpy(q + 4, b[i], l[i]);
        q += 4 + l[i];
    }
    out->len += n;
}

/* ---- one record of every type ---------------------------------------------------
 * Each case: the typed record, and the flat record today's ordod wrote for
 * it in format 2 (the same command). Every field the type uses is set, to
 * a value distinct from the others, so a field landing in the wrong place
 * shows. */

typedef struct case_s {
    record_t rec;
    old_t old;
} case_t;

#define TXN_ONE "\x14\x00\x00\x00" "\x03\x05\x00\x00" "\x01\x00\x00\x00\x00\x00\x00\x00" \
                "\x07\x00\x00\x00\x00\x00\x00\x00"

static const case_t cases[] = {
    {{.type = REC_PUT, .time_ms = 11, .flags = REC_F_IFREV | REC_F_FENCE | REC_F_KEEPTTL,
      .put = {.key = "key", .klen = 3, .val = "value", .vlen = 5, .lease_id = 21, .ifrev = 22,
              .expire_at_ms = 23, .fence_token = 24, .fence_lock = "lock", .fence_llen = 4}},
     {.type = REC_PUT, .time_ms = 11, .flags = REC_F_IFREV | REC_F_FENCE | REC_F_KEEPTTL, .key = "key", .klen = 3,
      .val = "value", .vlen = 5, .lease = 21, .ifrev = 22, .expire_at_ms = 23, .token = 24, .name = "lock",
      .nlen = 4}},
    {{.type = REC_PUT, .time_ms = 12, .flags = REC_F_NX, .put = {.key = "k", .klen = 1, .val = "", .vlen = 0}},
     {.type = REC_PUT, .time_ms = 12, .flags = REC_F_NX, .key = "k", .klen = 1, .val = "", .vlen = 0}},
    {{.type = REC_PUT, .time_ms = 13, .flags = REC_F_XX, .put = {.key = "k", .klen = 1, .val = "v", .vlen = 1}},
     {.type = REC_PUT, .time_ms = 13, .flags = REC_F_XX, .key = "k", .klen = 1, .val = "v", .vlen = 1}},
    {{.type = REC_DEL, .time_ms = 14, .flags = REC_F_IFREV | REC_F_FENCE,
      .del = {.key = "d", .klen = 1, .ifrev = 31, .fence_token = 32, .fence_lock = "L", .fence_llen = 1}},
     {.type = REC_DEL, .time_ms = 14, .flags = REC_F_IFREV | REC_F_FENCE, .key = "d", .klen = 1, .ifrev = 31,
      .token = 32, .name = "L", .nlen = 1}},
    {{.type = REC_INCR, .time_ms = 15, .incr = {.key = "n", .klen = 1, .by = -41}},
     {.type = REC_INCR, .time_ms = 15, .key = "n", .klen = 1, .incr = -41}},
    {{.type = REC_EXPIRE, .time_ms = 16, .expire = {.key = "gone", .klen = 4}},
     {.type = REC_EXPIRE, .time_ms = 16, .key = "gone", .klen = 4}},
    {{.type = REC_COMPACT, .time_ms = 17, .compact = {.rev = 51}},
     {.type = REC_COMPACT, .time_ms = 17, .arg_rev = 51}},
    {{.type = REC_LEASE_GRANT, .time_ms = 18, .lease = {.ttl_ms = 61}},
     {.type = REC_LEASE_GRANT, .time_ms = 18, .ttl_ms = 61}},
    {{.type = REC_LEASE_KEEPALIVE, .time_ms = 19, .lease = {.lease_id = 62}},
     {.type = REC_LEASE_KEEPALIVE, .time_ms = 19, .lease = 62}},
    {{.type = REC_LEASE_REVOKE, .time_ms = 20, .lease = {.lease_id = 63}},
     {.type = REC_LEASE_REVOKE, .time_ms = 20, .lease = 63}},
    {{.type = REC_LOCK_ACQUIRE, .time_ms = 21, .lock = {.name = "lk", .nlen = 2, .ttl_ms = 71, .lease_id = 72}},
     {.type = REC_LOCK_ACQUIRE, .time_ms = 21, .key = "lk", .klen = 2, .ttl_ms = 71, .lease = 72}},
    {{.type = REC_LOCK_RELEASE, .time_ms = 22, .lock = {.name = "lk", .nlen = 2, .token = 73}},
     {.type = REC_LOCK_RELEASE, .time_ms = 22, .key = "lk", .klen = 2, .token = 73}},
    {{.type = REC_LOCK_EXTEND, .time_ms = 23, .lock = {.name = "lk", .nlen = 2, .token = 74, .ttl_ms = 75}},
     {.type = REC_LOCK_EXTEND, .time_ms = 23, .key = "lk", .klen = 2, .token = 74, .ttl_ms = 75}},
    {{.type = REC_ELECT_CAMPAIGN, .time_ms = 24,
      .elect = {.name = "el", .nlen = 2, .val = "me", .vlen = 2, .ttl_ms = 81, .lease_id = 82}},
     {.type = REC_ELECT_CAMPAIGN, .time_ms = 24, .key = "el", .klen = 2, .val = "me", .vlen = 2, .ttl_ms = 81,
      .lease = 82}},
    {{.type = REC_ELECT_PROCLAIM, .time_ms = 25,
      .elect = {.name = "el", .nlen = 2, .term = 83, .val = "v2", .vlen = 2}},
     {.type = REC_ELECT_PROCLAIM, .time_ms = 25, .key = "el", .klen = 2, .token = 83, .val = "v2", .vlen = 2}},
    {{.type = REC_ELECT_KEEPALIVE, .time_ms = 26, .elect = {.name = "el", .nlen = 2, .term = 84}},
     {.type = REC_ELECT_KEEPALIVE, .time_ms = 26, .key = "el", .klen = 2, .token = 84}},
    {{.type = REC_ELECT_RESIGN, .time_ms = 27, .flags = REC_F_HANDOVER,
      .elect = {.name = "el", .nlen = 2, .term = 85, .val = "next", .vlen = 4}},
     {.type = REC_ELECT_RESIGN, .time_ms = 27, .flags = REC_F_HANDOVER, .key = "el", .klen = 2, .token = 85,
      .val = "next", .vlen = 4}},
    {{.type = REC_ELECT_RESIGN, .time_ms = 28, .elect = {.name = "el", .nlen = 2, .term = 86}},
     {.type = REC_ELECT_RESIGN, .time_ms = 28, .key = "el", .klen = 2, .token = 86}},
    {{.type = REC_COORD_EXPIRE, .time_ms = 29, .coord_expire = {.kind = COORD_LOCK, .id = 91, .name = "lk", .nlen = 2}},
     {.type = REC_COORD_EXPIRE, .time_ms = 29, .kind = COORD_LOCK, .token = 91, .key = "lk", .klen = 2}},
    {{.type = REC_COORD_EXPIRE, .time_ms = 30, .coord_expire = {.kind = COORD_LEASE, .id = 92}},
     {.type = REC_COORD_EXPIRE, .time_ms = 30, .kind = COORD_LEASE, .token = 92}},
    {{.type = REC_Q_PUSH, .time_ms = 31, .flags = REC_F_COALESCE,
      .q_push = {.queue = "q", .qlen = 1, .key = "mk", .klen = 2, .payload = "pay", .plen = 3, .dedup_id = "dd",
                 .dlen = 2, .delay_ms = 101}},
     {.type = REC_Q_PUSH, .time_ms = 31, .flags = 1, .name = "q", .nlen = 1, .key = "mk", .klen = 2, .val = "pay",
      .vlen = 3, .aux = "dd", .alen = 2, .ttl_ms = 101}},
    {{.type = REC_Q_DELIVER, .time_ms = 32, .flags = REC_F_NOACK,
      .q_deliver = {.queue = "q", .qlen = 1, .lease_ms = 102}},
     {.type = REC_Q_DELIVER, .time_ms = 32, .flags = 1, .name = "q", .nlen = 1, .ttl_ms = 102}},
    {{.type = REC_Q_ACK, .time_ms = 33, .flags = REC_F_RESULT,
      .q_ack = {.queue = "q", .qlen = 1, .msg_id = 103, .token = 104, .result = "res", .rlen = 3}},
     {.type = REC_Q_ACK, .time_ms = 33, .flags = 1, .name = "q", .nlen = 1, .arg_rev = 103, .token = 104,
      .val = "res", .vlen = 3}},
    {{.type = REC_Q_ACK, .time_ms = 34, .q_ack = {.queue = "q", .qlen = 1, .msg_id = 105, .token = 106}},
     {.type = REC_Q_ACK, .time_ms = 34, .name = "q", .nlen = 1, .arg_rev = 105, .token = 106}},
    {{.type = REC_Q_NACK, .time_ms = 35,
      .q_nack = {.queue = "q", .qlen = 1, .msg_id = 107, .token = 108, .delay_ms = 109}},
     {.type = REC_Q_NACK, .time_ms = 35, .name = "q", .nlen = 1, .arg_rev = 107, .token = 108, .ttl_ms = 109}},
    {{.type = REC_Q_EXTEND, .time_ms = 36,
      .q_extend = {.queue = "q", .qlen = 1, .msg_id = 110, .token = 111, .ttl_ms = 112}},
     {.type = REC_Q_EXTEND, .time_ms = 36, .name = "q", .nlen = 1, .arg_rev = 110, .token = 111, .ttl_ms = 112}},
    {{.type = REC_Q_CONFIG, .time_ms = 37,
      .q_config = {.queue = "q", .qlen = 1, .config = "cfgbytes", .clen = 8, .deadletter = "dlq", .dllen = 3}},
     {.type = REC_Q_CONFIG, .time_ms = 37, .name = "q", .nlen = 1, .val = "cfgbytes", .vlen = 8, .key = "dlq",
      .klen = 3}},
    {{.type = REC_Q_DROP, .time_ms = 38, .q = {.queue = "q", .qlen = 1}},
     {.type = REC_Q_DROP, .time_ms = 38, .name = "q", .nlen = 1}},
    {{.type = REC_Q_UNPARK, .time_ms = 39, .q_unpark = {.queue = "q", .qlen = 1, .key = "mk", .klen = 2}},
     {.type = REC_Q_UNPARK, .time_ms = 39, .name = "q", .nlen = 1, .key = "mk", .klen = 2}},
    {{.type = REC_Q_REDELIVER, .time_ms = 40, .q_redeliver = {.queue = "q", .qlen = 1, .msg_id = 113, .token = 114}},
     {.type = REC_Q_REDELIVER, .time_ms = 40, .name = "q", .nlen = 1, .arg_rev = 113, .token = 114}},
    {{.type = REC_Q_PROMOTE, .time_ms = 41, .q = {.queue = "qq", .qlen = 2}},
     {.type = REC_Q_PROMOTE, .time_ms = 41, .name = "qq", .nlen = 2}},
    {{.type = REC_Q_DEDUP_END, .time_ms = 42, .q_dedup_end = {.queue = "q", .qlen = 1, .dedup_id = "dd", .dlen = 2}},
     {.type = REC_Q_DEDUP_END, .time_ms = 42, .name = "q", .nlen = 1, .aux = "dd", .alen = 2}},
    {{.type = REC_Q_RESULT_END, .time_ms = 43, .q_result_end = {.queue = "q", .qlen = 1, .msg_id = 115}},
     {.type = REC_Q_RESULT_END, .time_ms = 43, .name = "q", .nlen = 1, .arg_rev = 115}},
    {{.type = REC_Q_RETRY, .time_ms = 45,
      .q_retry = {.queue = "q", .qlen = 1, .msg_id = 116, .token = 117, .delay_ms = 118,
                  .kind = QUEUE_RETRY_F_LEASE | QUEUE_RETRY_F_GIVEUP}},
     {.type = REC_Q_RETRY, .time_ms = 45, .name = "q", .nlen = 1, .arg_rev = 116, .token = 117, .ttl_ms = 118,
      .kind = QUEUE_RETRY_F_LEASE | QUEUE_RETRY_F_GIVEUP}},
    {{.type = REC_Q_PAUSE, .time_ms = 46,
      .q_pause = {.queue = "q", .qlen = 1, .key = "mk", .klen = 2, .until_ms = 119, .op = Q_PAUSE_KEY}},
     {.type = REC_Q_PAUSE, .time_ms = 46, .name = "q", .nlen = 1, .key = "mk", .klen = 2, .expire_at_ms = 119,
      .kind = Q_PAUSE_KEY}},
    {{.type = REC_Q_REDRIVE, .time_ms = 47,
      .q_redrive = {.queue = "q", .qlen = 1, .dlq = "dlq", .dlen = 3, .key = "mk", .klen = 2, .msg_id = 120}},
     {.type = REC_Q_REDRIVE, .time_ms = 47, .name = "q", .nlen = 1, .aux = "dlq", .alen = 3, .key = "mk", .klen = 2,
      .arg_rev = 120}},
    {{.type = REC_Q_CANCEL, .time_ms = 48, .q_msg = {.queue = "q", .qlen = 1, .key = "mk", .klen = 2, .msg_id = 121}},
     {.type = REC_Q_CANCEL, .time_ms = 48, .name = "q", .nlen = 1, .key = "mk", .klen = 2, .arg_rev = 121}},
    {{.type = REC_Q_EXPIRE, .time_ms = 49, .q_msg = {.queue = "q", .qlen = 1, .key = "mk", .klen = 2, .msg_id = 122}},
     {.type = REC_Q_EXPIRE, .time_ms = 49, .name = "q", .nlen = 1, .key = "mk", .klen = 2, .arg_rev = 122}},
    {{.type = REC_Q_SCHEDULE_ADD, .time_ms = 50,
      .q_sched = {.queue = "q", .qlen = 1, .name = "s", .nlen = 1, .key = "mk", .klen = 2, .spec = "spec", .slen = 4}},
     {.type = REC_Q_SCHEDULE_ADD, .time_ms = 50, .name = "q", .nlen = 1, .aux = "s", .alen = 1, .key = "mk", .klen = 2,
      .val = "spec", .vlen = 4}},
    {{.type = REC_Q_SCHEDULE_DEL, .time_ms = 51, .q_sched = {.queue = "q", .qlen = 1, .name = "s", .nlen = 1}},
     {.type = REC_Q_SCHEDULE_DEL, .time_ms = 51, .name = "q", .nlen = 1, .aux = "s", .alen = 1}},
    {{.type = REC_Q_TICK, .time_ms = 52, .q_sched = {.queue = "q", .qlen = 1, .name = "s", .nlen = 1, .tick_ms = 123}},
     {.type = REC_Q_TICK, .time_ms = 52, .name = "q", .nlen = 1, .aux = "s", .alen = 1, .expire_at_ms = 123}},
    /* A transaction holding one COMPACT (time 1, rev 7) in format 3. */
    {{.type = REC_TXN, .time_ms = 44, .txn = {.count = 1, .recs = TXN_ONE, .len = 24}},
     {.type = REC_TXN, .time_ms = 44, .arg_rev = 1, .val = TXN_ONE, .vlen = 24}},
    {{.type = REC_KEY_TTL, .time_ms = 18, .flags = REC_F_XX,
      .key_ttl = {.key = "ttl", .klen = 3, .expire_at_ms = 41}},
     {.type = REC_KEY_TTL, .time_ms = 18, .flags = REC_F_XX, .key = "ttl", .klen = 3, .expire_at_ms = 41}},
    {{.type = REC_APPEND, .time_ms = 45, .append = {.key = "ak", .klen = 2, .val = "tail", .vlen = 4}},
     {.type = REC_APPEND, .time_ms = 45, .key = "ak", .klen = 2, .val = "tail", .vlen = 4}},
    {{.type = REC_FLUSH, .time_ms = 46}, {.type = REC_FLUSH, .time_ms = 46}},
    {{.type = REC_ACL_SETUSER, .time_ms = 45, .acl = {.name = "alice", .nlen = 5, .rules = "on -@all", .rlen = 8}},
     {.type = REC_ACL_SETUSER, .time_ms = 45, .key = "alice", .klen = 5, .val = "on -@all", .vlen = 8}},
    {{.type = REC_ACL_DELUSER, .time_ms = 46, .acl = {.name = "bob", .nlen = 3}},
     {.type = REC_ACL_DELUSER, .time_ms = 46, .key = "bob", .klen = 3}},
};

#define NCASES (sizeof cases / sizeof cases[0])

/* Two records are the same if they encode to the same bytes: format 3
 * writes every field the type uses, and nothing else. */
static void assert_same(const record_t *a, const record_t *b)
{
    ordo_buf_t x = ORDO_BUF_INIT, y = ORDO_BUF_INIT;
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->flags, b->flags);
    assert_int_equal(a->time_ms, b->time_ms);
    record_encode(a, &x);
    record_encode(b, &y);
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.data, y.data, x.len);
    ordo_buf_free(&x);
    ordo_buf_free(&y);
}

/* A transaction's sub-records: read back in order; a count that does not
 * match, a truncated sub-record or a nested TXN is refused. */
static void test_txn_sub_records(void **state)
{
    (void)state;
    record_t t = {.type = REC_TXN, .time_ms = 1, .txn = {.count = 1, .recs = TXN_ONE, .len = 24}}, sub;
    size_t off = 0;
    assert_int_equal(record_txn_next(&t.txn, &off, &sub), 1);
    assert_int_equal(sub.type, REC_COMPACT);
    assert_int_equal(sub.compact.rev, 7);
    assert_int_equal(record_txn_next(&t.txn, &off, &sub), 0);
    t.txn.count = 2;
    assert_false(record_valid(&t));
    t.txn.count = 1;
    t.txn.len = 23;
    assert_false(record_valid(&t));
    t.txn.len = 24;
    ordo_buf_t b = ORDO_BUF_INIT, nested = ORDO_BUF_INIT;
    record_encode(&t, &b);
    put_u32(ordo_buf_reserve(&nested, 4), (uint32_t)b.len);
    nested.len += 4;
    ordo_buf_append(&nested, b.data, b.len);
    record_t outer = {.type = REC_TXN, .txn = {.count = 1, .recs = nested.data, .len = (uint32_t)nested.len}};
    assert_false(record_valid(&outer));
    ordo_buf_free(&b);
    ordo_buf_free(&nested);
}

/* Every type occurs among the cases (a new type needs a case here). */
static void test_cases_cover_every_type(void **state)
{
    (void)state;
    for (unsigned t = 0; t < 256; t++) {
        if (record_family(t) == REC_FAM_NONE)
            continue;
        bool found = false;
        for (size_t i = 0; i < NCASES; i++)
            found |= cases[i].rec.type == t;
        assert_true(found);
    }
    for (size_t i = 0; i < NCASES; i++)
        assert_true(record_valid(&cases[i].rec));
}

static void test_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        const record_t *r = &cases[i].rec;
        ordo_buf_t b = ORDO_BUF_INIT;
        record_encode(r, &b);
        assert_int_equal(record_format(b.data, b.len), RECORD_FORMAT);
        assert_true(b.len <= RECORD_HEADER_BYTES + 64);
        record_t d;
        memset(&d, 0xa5, sizeof d);
        assert_int_equal(record_decode(b.data, b.len, &d), 0);
        assert_same(r, &d);
        ordo_buf_free(&b);
    }
    /* Spot checks that the fields land where their names say. */
    ordo_buf_t b = ORDO_BUF_INIT;
    record_t d;
    record_encode(&cases[0].rec, &b);
    assert_int_equal(record_decode(b.data, b.len, &d), 0);
    assert_int_equal(d.put.lease_id, 21);
    assert_int_equal(d.put.ifrev, 22);
    assert_int_equal(d.put.expire_at_ms, 23);
    assert_int_equal(d.put.fence_token, 24);
    assert_memory_equal(d.put.fence_lock, "lock", 4);
    assert_memory_equal(d.put.val, "value", 5);
    ordo_buf_free(&b);
}

/* REC_F_IDEM (format 3 only): a push carries its idempotency key's
 * request hash and retention, the dedup end its message key; without the
 * flag those fields must be zero. */
static void test_idem_flag(void **state)
{
    (void)state;
    record_t push = {.type = REC_Q_PUSH, .time_ms = 5, .flags = REC_F_IDEM,
                     .q_push = {.queue = "q", .qlen = 1, .key = "cart", .klen = 4, .payload = "p", .plen = 1,
                                .dedup_id = "idem", .dlen = 4, .idem_hash = 0xfeedull, .idem_ms = 86400000}};
    record_t end = {.type = REC_Q_DEDUP_END, .time_ms = 6, .flags = REC_F_IDEM,
                    .q_dedup_end = {.queue = "q", .qlen = 1, .dedup_id = "idem", .dlen = 4, .key = "cart", .klen = 4}};
    const record_t *rs[] = {&push, &end};
    for (size_t i = 0; i < 2; i++) {
        assert_true(record_valid(rs[i]));
        ordo_buf_t b = ORDO_BUF_INIT;
        record_encode(rs[i], &b);
        record_t d;
        assert_int_equal(record_decode(b.data, b.len, &d), 0);
        assert_same(rs[i], &d);
        if (i == 0) {
            assert_int_equal(d.q_push.idem_hash, 0xfeedull);
            assert_int_equal(d.q_push.idem_ms, 86400000);
        } else {
            assert_memory_equal(d.q_dedup_end.key, "cart", 4);
        }
        ordo_buf_free(&b);
    }
    push.flags = 0;
    assert_false(record_valid(&push));
    end.flags = 0;
    assert_false(record_valid(&end));
}

/* The byte string the format-2 encoder wrote decodes to the typed record,
 * the queue flags that shared bit 0 moved to their own bits. Format 1
 * (no aux field) too, for the types that existed then. */
static void test_format2_decodes_to_typed(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        ordo_buf_t b = ORDO_BUF_INIT;
        old_encode(&cases[i].old, 2, &b);
        assert_int_equal(record_format(b.data, b.len), RECORD_FORMAT_V2);
        record_t d;
        assert_int_equal(record_decode(b.data, b.len, &d), 0);
        assert_same(&cases[i].rec, &d);
        ordo_buf_free(&b);
        if (record_family(cases[i].rec.type) == REC_FAM_QUEUE)
            continue;
        old_encode(&cases[i].old, 1, &b);
        assert_int_equal(record_decode(b.data, b.len, &d), 0);
        assert_same(&cases[i].rec, &d);
        ordo_buf_free(&b);
    }
    ordo_buf_t b = ORDO_BUF_INIT;
    record_t d;
    old_t push = {.type = REC_Q_PUSH, .flags = 1, .name = "q", .nlen = 1};
    old_encode(&push, 2, &b);
    assert_int_equal(record_decode(b.data, b.len, &d), 0);
    assert_int_equal(d.flags, REC_F_COALESCE);
    assert_false(d.flags & REC_F_IFREV);
    ordo_buf_free(&b);
}

/* Formats 1 and 2: a field the type does not use, holding anything but
 * zero, is refused -- one such field at a time, for every type. The cases
 * set every field their type uses, so the zero fields of a case are the
 * ones its type (with its flags) does not use; the two cases that leave a
 * used field zero (a plain PUT, a lease's expiry without a name) are
 * skipped. */
static void test_misfit_fields_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        const old_t *o = &cases[i].old;
        if ((o->type == REC_PUT && !(o->flags & REC_F_FENCE)) || (o->type == REC_COORD_EXPIRE && o->klen == 0))
            continue;
        for (int f = 0; f < 12; f++) {
            old_t m = *o;
            uint64_t *u[] = {&m.lease, &m.ifrev, &m.expire_at_ms, (uint64_t *)(void *)&m.incr, &m.arg_rev,
                             &m.ttl_ms, &m.token};
            const char **bp[] = {&m.key, &m.val, &m.name, &m.aux};
            uint32_t *lp[] = {&m.klen, &m.vlen, &m.nlen, &m.alen};
            if (f < 7) {
                if (*u[f] != 0)
                    continue;
                *u[f] = 1;
            } else if (f == 7) {
                if (m.kind != 0)
                    continue;
                m.kind = 1;
            } else {
                if (*lp[f - 8] != 0)
                    continue;
                *bp[f - 8] = "x";
                *lp[f - 8] = 1;
            }
            ordo_buf_t b = ORDO_BUF_INIT;
            old_encode(&m, 2, &b);
            record_t d;
            if (record_decode(b.data, b.len, &d) != -1)
                fail_msg("case %zu (type %u): field %d accepted", i, m.type, f);
            ordo_buf_free(&b);
        }
    }
    /* Flags the type does not allow, an unknown type, an unknown format. */
    ordo_buf_t b = ORDO_BUF_INIT;
    record_t d;
    old_t bad = {.type = REC_INCR, .flags = REC_F_NX, .key = "n", .klen = 1};
    old_encode(&bad, 2, &b);
    assert_int_equal(record_decode(b.data, b.len, &d), -1);
    b.len = 0;
    old_t unknown = {.type = 99}; /* no record type */
    old_encode(&unknown, 2, &b);
    assert_int_equal(record_decode(b.data, b.len, &d), -1);
    b.data[0] = 4;
    assert_int_equal(record_decode(b.data, b.len, &d), -1);
    b.data[0] = 0;
    assert_int_equal(record_decode(b.data, b.len, &d), -1);
    assert_int_equal(record_decode(b.data, 0, &d), -1);
    /* Format 3: a flag of another family, an unknown type, trailing bytes. */
    b.len = 0;
    record_encode(&cases[4].rec, &b); /* INCR */
    b.data[2] = (char)REC_F_COALESCE;
    assert_int_equal(record_decode(b.data, b.len, &d), -1);
    b.data[2] = 0;
    assert_int_equal(record_decode(b.data, b.len, &d), 0);
    b.data[1] = 99;
    assert_int_equal(record_decode(b.data, b.len, &d), -1);
    b.data[1] = REC_INCR;
    ordo_buf_append(&b, "", 1);
    assert_int_equal(record_decode(b.data, b.len, &d), -1);
    ordo_buf_free(&b);
    /* record_valid(): a field the type does not use, a length without bytes. */
    record_t r = {.type = REC_LEASE_GRANT, .lease = {.ttl_ms = 5, .lease_id = 9}};
    assert_false(record_valid(&r));
    r = (record_t){.type = REC_PUT, .put = {.key = "k", .klen = 1, .ifrev = 3}}; /* ifrev without IFREV */
    assert_false(record_valid(&r));
    r = (record_t){.type = REC_EXPIRE, .expire = {.key = NULL, .klen = 1}};
    assert_false(record_valid(&r));
    r = (record_t){.type = REC_COORD_EXPIRE, .coord_expire = {.kind = 9, .id = 1}};
    assert_false(record_valid(&r));
}

/* Cut at every length: refused, never read past the end. */
static void test_torn_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        for (int fmt = 2; fmt <= 3; fmt++) {
            ordo_buf_t b = ORDO_BUF_INIT;
            if (fmt == 3)
                record_encode(&cases[i].rec, &b);
            else
                old_encode(&cases[i].old, 2, &b);
            for (size_t len = 0; len < b.len; len++) {
                char *copy = malloc(len ? len : 1); /* exactly len bytes: ASan sees any overrun */
                memcpy(copy, b.data, len);
                record_t d;
                if (record_decode(copy, len, &d) != -1)
                    fail_msg("case %zu format %d cut at %zu of %zu accepted", i, fmt, len, b.len);
                free(copy);
            }
            ordo_buf_free(&b);
        }
    }
}

/* Random damage (a deterministic stream of byte flips, cuts and
 * extensions of every case, both formats): decode never reads outside the
 * bytes (ASan watches the exact-size copy), and whatever it accepts is a
 * valid record; format-3 bytes it accepts are canonical: encoding the
 * decoded record gives the same bytes back. */
static void test_damage_never_misreads(void **state)
{
    (void)state;
    uint64_t seed = 12345;
    size_t accepted = 0;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < NCASES; i++) {
            ordo_buf_t b = ORDO_BUF_INIT;
            if (round & 1)
                record_encode(&cases[i].rec, &b);
            else
                old_encode(&cases[i].old, 2, &b);
            ordo_buf_append(&b, "\0\0\0\0\0\0\0\0", 8);
            size_t len = b.len - 8;
            for (int k = 0; k < 3; k++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                uint32_t x = (uint32_t)(seed >> 33);
                switch (x % 4) {
                case 0: len = x % (len + 1); break;               /* cut */
                case 1: len += len < b.len ? 1 : 0; break;         /* one more byte */
                default: b.data[(x >> 2) % b.len] ^= (char)(1u << (x % 8)); break; /* flip */
                }
            }
            char *copy = malloc(len ? len : 1);
            memcpy(copy, b.data, len);
            record_t d;
            if (record_decode(copy, len, &d) == 0) {
                accepted++;
                assert_true(record_valid(&d));
                ordo_buf_t again = ORDO_BUF_INIT;
                record_encode(&d, &again);
                if (record_format(copy, len) == RECORD_FORMAT) {
                    assert_int_equal(again.len, len);
                    assert_memory_equal(again.data, copy, len);
                }
                record_t d2;
                assert_int_equal(record_decode(again.data, again.len, &d2), 0);
                assert_same(&d, &d2);
                ordo_buf_free(&again);
            }
            free(copy);
            ordo_buf_free(&b);
        }
    }
    assert_true(accepted > 0); /* some flips land in values and stay records */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases_cover_every_type),
        cmocka_unit_test(test_txn_sub_records),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_idem_flag),
        cmocka_unit_test(test_format2_decodes_to_typed),
        cmocka_unit_test(test_misfit_fields_refused),
        cmocka_unit_test(test_torn_refused),
        cmocka_unit_test(test_damage_never_misreads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
