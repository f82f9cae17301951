/*
 * fuzz_records.c -- one valid record of every type, for the seeds of the
 * targets that read records (record, WAL, raft entry, snapshot). Applied
 * in order to an empty core they build a little of every kind of state:
 * keys, a lease, a lock, an election, a queue with messages in each
 * state, a transaction, users. Ids and tokens aim at what earlier records of the
 * list create; one that misses (applies as a no-op or an error) does no
 * harm: seeds only need to be well formed.
 */
#include "fuzz_records.h"

#include <string.h>

#include "base/bytes.h"
#include "core/coord.h"
#include "core/schedule.h"
#include "core/record.h"

#define T0 1700000000000ull

size_t fuzz_sample_records(record_t *out, size_t max)
{
    static char qcfg[CORE_QCONFIG_BYTES];
    static char txn[64];
    static char sched[64];
    queue_config_t cfg;
    queue_config_defaults(&cfg);
    cfg.keyrate_n = 2; /* buckets and throttles in the snapshot seeds too */
    cfg.keyrate_per_ms = 1000;
    core_qconfig_encode(&cfg, qcfg);
    /* A schedule's value: every 100 ms, payload "s". */
    ordo_buf_t sv = ORDO_BUF_INIT;
    sched_encode(&(sched_spec_t){.every_ms = 100, .start_ms = T0}, "s", 1, &sv);
    CHECK(sv.len <= sizeof sched);
    memcpy(sched, sv.data, sv.len);
    uint32_t sched_len = (uint32_t)sv.len;
    ordo_buf_free(&sv);
    /* A transaction of one sub-record, a PUT. */
    ordo_buf_t sub = ORDO_BUF_INIT;
    record_t put = {.type = REC_PUT, .time_ms = T0, .put = {.key = "t", .klen = 1, .val = "x", .vlen = 1}};
    record_encode(&put, &sub);
    CHECK(4 + sub.len <= sizeof txn);
    put_u32(txn, (uint32_t)sub.len);
    memcpy(txn + 4, sub.data, sub.len);
    uint32_t txn_len = (uint32_t)(4 + sub.len);
    ordo_buf_free(&sub);

    const record_t all[] = {
        {.type = REC_PUT, .time_ms = T0, .put = {.key = "a", .klen = 1, .val = "1", .vlen = 1}},      /* 1 */
        {.type = REC_PUT, .time_ms = T0, .flags = REC_F_IFREV, .put = {.key = "a", .klen = 1, .val = "22", .vlen = 2,
                                                                        .ifrev = 1}},                 /* 2 */
        {.type = REC_PUT, .time_ms = T0, .put = {.key = "b", .klen = 1, .val = "x", .vlen = 1,
                                                 .expire_at_ms = T0 + 99000}},                        /* 3 */
        {.type = REC_INCR, .time_ms = T0, .incr = {.key = "n", .klen = 1, .by = -7}},                   /* 4 */
        {.type = REC_KEY_TTL, .time_ms = T0, .flags = REC_F_XX,
         .key_ttl = {.key = "a", .klen = 1, .expire_at_ms = T0 + 5000}},                              /* 5 */
        {.type = REC_DEL, .time_ms = T0, .del = {.key = "n", .klen = 1}},                               /* 6 */
        {.type = REC_EXPIRE, .time_ms = T0 + 6000, .expire = {.key = "a", .klen = 1}},                  /* 7 */
        {.type = REC_COMPACT, .time_ms = T0, .compact = {.rev = 3}},                                    /* 8 */
        {.type = REC_LEASE_GRANT, .time_ms = T0, .lease = {.ttl_ms = 60000}},                           /* 9 */
        {.type = REC_LEASE_KEEPALIVE, .time_ms = T0, .lease = {.lease_id = 9}},                         /* 10 */
        {.type = REC_LOCK_ACQUIRE, .time_ms = T0, .lock = {.name = "lk", .nlen = 2, .ttl_ms = 60000}},  /* 11 */
        {.type = REC_LOCK_EXTEND, .time_ms = T0, .lock = {.name = "lk", .nlen = 2, .token = 11, .ttl_ms = 9000}},
        {.type = REC_PUT, .time_ms = T0, .flags = REC_F_FENCE,
         .put = {.key = "f", .klen = 1, .val = "v", .vlen = 1, .fence_token = 11, .fence_lock = "lk",
                 .fence_llen = 2}},
        {.type = REC_LOCK_RELEASE, .time_ms = T0, .lock = {.name = "lk", .nlen = 2, .token = 11}},
        {.type = REC_ELECT_CAMPAIGN, .time_ms = T0,
         .elect = {.name = "el", .nlen = 2, .val = "me", .vlen = 2, .ttl_ms = 60000, .lease_id = 9}},
        {.type = REC_ELECT_PROCLAIM, .time_ms = T0, .elect = {.name = "el", .nlen = 2, .term = 15, .val = "v2",
                                                              .vlen = 2}},
        {.type = REC_ELECT_KEEPALIVE, .time_ms = T0, .elect = {.name = "el", .nlen = 2, .term = 15}},
        {.type = REC_ELECT_RESIGN, .time_ms = T0, .flags = REC_F_HANDOVER,
         .elect = {.name = "el", .nlen = 2, .term = 15, .val = "next", .vlen = 4}},
        {.type = REC_COORD_EXPIRE, .time_ms = T0 + 70000,
         .coord_expire = {.kind = COORD_LEASE, .id = 9}},
        {.type = REC_LEASE_REVOKE, .time_ms = T0, .lease = {.lease_id = 9}},
        {.type = REC_Q_CONFIG, .time_ms = T0,
         .q_config = {.queue = "q", .qlen = 1, .config = qcfg, .clen = CORE_QCONFIG_BYTES, .deadletter = "dlq",
                      .dllen = 3}},
        {.type = REC_Q_PUSH, .time_ms = T0,
         .q_push = {.queue = "q", .qlen = 1, .key = "k1", .klen = 2, .payload = "p1", .plen = 2, .dedup_id = "d",
                    .dlen = 1}},
        {.type = REC_Q_PUSH, .time_ms = T0, .flags = REC_F_COALESCE,
         .q_push = {.queue = "q", .qlen = 1, .key = "k2", .klen = 2, .payload = "p2", .plen = 2}},
        {.type = REC_Q_PUSH, .time_ms = T0,
         .q_push = {.queue = "q", .qlen = 1, .key = "k3", .klen = 2, .payload = "p3", .plen = 2, .delay_ms = 500}},
        {.type = REC_Q_DELIVER, .time_ms = T0, .q_deliver = {.queue = "q", .qlen = 1, .lease_ms = 30000}},
        {.type = REC_Q_ACK, .time_ms = T0, .flags = REC_F_RESULT,
         .q_ack = {.queue = "q", .qlen = 1, .msg_id = 22, .token = 25, .result = "ok", .rlen = 2}},
        {.type = REC_Q_DELIVER, .time_ms = T0, .flags = REC_F_NOACK, .q_deliver = {.queue = "q", .qlen = 1}},
        {.type = REC_Q_NACK, .time_ms = T0, .q_nack = {.queue = "q", .qlen = 1, .msg_id = 23, .token = 27,
                                                       .delay_ms = 10}},
        {.type = REC_Q_EXTEND, .time_ms = T0, .q_extend = {.queue = "q", .qlen = 1, .msg_id = 23, .token = 27,
                                                           .ttl_ms = 1000}},
        {.type = REC_Q_REDELIVER, .time_ms = T0 + 40000,
         .q_redeliver = {.queue = "q", .qlen = 1, .msg_id = 23, .token = 27}},
        {.type = REC_Q_PROMOTE, .time_ms = T0 + 1000, .q = {.queue = "q", .qlen = 1}},
        {.type = REC_Q_UNPARK, .time_ms = T0, .q_unpark = {.queue = "q", .qlen = 1, .key = "k2", .klen = 2}},
        {.type = REC_Q_DEDUP_END, .time_ms = T0 + 1000, .q_dedup_end = {.queue = "q", .qlen = 1, .dedup_id = "d",
                                                                      .dlen = 1}},
        {.type = REC_Q_RESULT_END, .time_ms = T0 + 1000, .q_result_end = {.queue = "q", .qlen = 1, .msg_id = 22}},
        {.type = REC_TXN, .time_ms = T0, .txn = {.count = 1, .recs = txn, .len = txn_len}},
        {.type = REC_Q_PUSH, .time_ms = T0,
         .q_push = {.queue = "w", .qlen = 1, .key = "k", .klen = 1, .payload = "p", .plen = 1}},
        {.type = REC_Q_DROP, .time_ms = T0, .q = {.queue = "w", .qlen = 1}},
        /* An idempotency key (HTTP Idempotency-Key): kept past every
         * other record, so the snapshot seeds carry an 'I' entry. */
        {.type = REC_Q_PUSH, .time_ms = T0, .flags = REC_F_IDEM,
         .q_push = {.queue = "q", .qlen = 1, .key = "k4", .klen = 2, .payload = "p4", .plen = 2,
                    .dedup_id = "idem-1", .dlen = 6, .idem_hash = 0x1234abcd, .idem_ms = 86400000}},
        {.type = REC_ACL_SETUSER, .time_ms = T0,
         .acl = {.name = "alice", .nlen = 5, .rules = "on nopass ~a* %Q~q %C~l -@all +@read +q.push", .rlen = 44}},
        {.type = REC_ACL_SETUSER, .time_ms = T0, .acl = {.name = "bob", .nlen = 3, .rules = "off -@all", .rlen = 9}},
        {.type = REC_ACL_DELUSER, .time_ms = T0, .acl = {.name = "bob", .nlen = 3}},
        {.type = REC_Q_PAUSE, .time_ms = T0, .q_pause = {.queue = "q", .qlen = 1, .key = "k3", .klen = 2,
                                                         .until_ms = T0 + 5000, .op = Q_PAUSE_KEY}},
        {.type = REC_Q_PAUSE, .time_ms = T0, .q_pause = {.queue = "p", .qlen = 1, .op = Q_PAUSE_QUEUE}},
        {.type = REC_Q_RETRY, .time_ms = T0, .q_retry = {.queue = "q", .qlen = 1, .msg_id = 23, .token = 27,
                                                         .delay_ms = 40}},
        {.type = REC_Q_CANCEL, .time_ms = T0, .q_msg = {.queue = "q", .qlen = 1, .key = "k1", .klen = 2,
                                                        .msg_id = 22}},
        {.type = REC_Q_REDRIVE, .time_ms = T0, .q_redrive = {.queue = "q", .qlen = 1, .dlq = "dlq", .dlen = 3,
                                                             .key = "k1", .klen = 2}},
        {.type = REC_Q_SCHEDULE_ADD, .time_ms = T0,
         .q_sched = {.queue = "q", .qlen = 1, .name = "s", .nlen = 1, .key = "k4", .klen = 2, .spec = sched,
                     .slen = sched_len}},
        {.type = REC_Q_TICK, .time_ms = T0 + 101,
         .q_sched = {.queue = "q", .qlen = 1, .name = "s", .nlen = 1, .tick_ms = T0 + 100}},
    };
    size_t n = sizeof all / sizeof all[0];
    CHECK(n <= max);
    for (size_t i = 0; i < n; i++)
        CHECK(record_valid(&all[i]));
    memcpy(out, all, sizeof all);
    return n;
}
