/*
 * test_srv_txn.c -- transactions in the core: core_check() judges guards
 * without changing anything, following the transaction's own earlier KV
 * writes, pushes and acks; a REC_TXN record applies its sub-records in
 * order at consecutive revisions, and replaying its byte form on a fresh
 * core reaches the same state.
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
#include "core/core.h"
#include "core/record.h"

static record_t put(const char *k, const char *v)
{
    record_t r = {.type = REC_PUT, .time_ms = 1,
                  .put = {.key = k, .klen = (uint32_t)strlen(k), .val = v, .vlen = (uint32_t)strlen(v)}};
    return r;
}

static record_t incr(const char *k)
{
    record_t r = {.type = REC_INCR, .time_ms = 1, .incr = {.key = k, .klen = (uint32_t)strlen(k), .by = 1}};
    return r;
}

static void test_check_changes_nothing_and_follows_the_transaction(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    apply_result_t res;
    record_t r = put("n", "text");
    core_apply(c, &r, &res);
    uint64_t rev = core_rev(c);
    core_txn_check_t t;
    core_txn_check_init(c, &t);
    record_t in = incr("n");
    assert_false(core_check(c, &t, &in, &res));             /* INCR of a non-integer */
    assert_int_equal(res.status, AP_NOTINT);
    record_t p = put("n", "41");
    assert_true(core_check(c, &t, &p, &res));              /* ... unless the transaction wrote a number */
    assert_true(core_check(c, &t, &in, &res));
    record_t guarded = put("n", "x");
    guarded.flags = REC_F_IFREV;
    guarded.put.ifrev = rev + 2;                            /* the INCR's predicted revision */
    assert_true(core_check(c, &t, &guarded, &res));
    guarded.put.ifrev = rev;
    assert_false(core_check(c, &t, &guarded, &res));
    assert_int_equal(res.status, AP_CONFLICT);
    assert_int_equal(res.cur_rev, rev + 3);
    record_t nx = put("n", "y");
    nx.flags = REC_F_NX;                                    /* NX not holding: no guard */
    assert_true(core_check(c, &t, &nx, &res));
    core_txn_check_free(&t);
    assert_int_equal(core_rev(c), rev);                     /* nothing applied */
    assert_memory_equal(kv_get(core_kv(c), "n", 1, &(kv_version_t){0})->value, "text", 4);
    core_destroy(c);
}

static void test_check_delivery_tokens(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    apply_result_t res;
    record_t push = {.type = REC_Q_PUSH, .time_ms = 1,
                     .q_push = {.queue = "q", .qlen = 1, .key = "k", .klen = 1, .payload = "p", .plen = 1}};
    core_apply(c, &push, &res);
    uint64_t id = res.queue.id;
    record_t dl = {.type = REC_Q_DELIVER, .time_ms = 1, .q_deliver = {.queue = "q", .qlen = 1, .lease_ms = 1000}};
    core_apply(c, &dl, &res);
    uint64_t token = res.queue.delivery.token;
    core_txn_check_t t;
    core_txn_check_init(c, &t);
    record_t ack = {.type = REC_Q_ACK, .time_ms = 2, .q_ack = {.queue = "q", .qlen = 1, .msg_id = id, .token = token + 1}};
    assert_false(core_check(c, &t, &ack, &res));           /* stale */
    ack.q_ack.token = token;
    assert_true(core_check(c, &t, &ack, &res));
    assert_false(core_check(c, &t, &ack, &res));           /* acked already, by this transaction */
    core_txn_check_free(&t);
    core_destroy(c);
}

/* The transaction's own pushes count per key and per queue (MAXPERKEY,
 * MAXLEN), kept apart by queue and by key, across many keys: the check
 * looks them up by hash (a scan per push made a 1,000-push batch
 * quadratic), and must count exactly what the scan counted. */
static void test_check_counts_pushes_per_key_and_per_queue(void **state)
{
    (void)state;
    enum { KEYS = 300, MAXLEN = 700 };
    core_t *c = core_create(1000);
    apply_result_t res;
    queue_config_t cfg;
    queue_config_defaults(&cfg);
    cfg.maxperkey = 2;
    cfg.maxlen = MAXLEN;
    char enc[CORE_QCONFIG_BYTES];
    core_qconfig_encode(&cfg, enc);
    record_t conf = {.type = REC_Q_CONFIG, .time_ms = 1,
                     .q_config = {.queue = "q", .qlen = 1, .config = enc, .clen = CORE_QCONFIG_BYTES}};
    core_apply(c, &conf, &res);
    assert_int_equal(res.status, AP_OK);
    static char keys[KEYS][8];
    core_txn_check_t t;
    core_txn_check_init(c, &t);
    size_t pushed = 0;
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < KEYS; k++) {
            snprintf(keys[k], sizeof keys[k], "k%d", k);
            record_t p = {.type = REC_Q_PUSH, .time_ms = 1,
                          .q_push = {.queue = "q", .qlen = 1, .key = keys[k], .klen = (uint32_t)strlen(keys[k]),
                                     .payload = "p", .plen = 1}};
            bool ok = core_check(c, &t, &p, &res);
            if (round < 2) {
                assert_true(ok); /* two per key fit: 600 of MAXLEN 700 */
                pushed++;
            } else {
                assert_false(ok); /* a third of a key never fits */
                assert_int_equal(res.status, AP_QLIMIT);
            }
            /* Queue q2 (q's name and one byte more), same keys: its own counts. */
            record_t o = p;
            o.q_push.queue = "q2";
            o.q_push.qlen = 2;
            assert_true(core_check(c, &t, &o, &res));
        }
    }
    assert_int_equal(pushed, 2 * KEYS);
    core_txn_check_free(&t);

    /* MAXLEN counts the transaction's pushes to the queue over every key. */
    core_txn_check_init(c, &t);
    for (int k = 0; k < KEYS; k++) {
        record_t p = {.type = REC_Q_PUSH, .time_ms = 1,
                      .q_push = {.queue = "q", .qlen = 1, .key = keys[k], .klen = (uint32_t)strlen(keys[k]),
                                 .payload = "p", .plen = 1}};
        assert_true(core_check(c, &t, &p, &res));
        assert_true(core_check(c, &t, &p, &res));
    }
    static char others[MAXLEN - 2 * KEYS][16]; /* the check keeps pointers to them until it ends */
    for (int k = 0; k < MAXLEN - 2 * KEYS; k++) {
        snprintf(others[k], sizeof others[k], "other%d", k);
        record_t p = {.type = REC_Q_PUSH, .time_ms = 1,
                      .q_push = {.queue = "q", .qlen = 1, .key = others[k], .klen = (uint32_t)strlen(others[k]),
                                 .payload = "p", .plen = 1}};
        assert_true(core_check(c, &t, &p, &res));
    }
    record_t last = {.type = REC_Q_PUSH, .time_ms = 1,
                     .q_push = {.queue = "q", .qlen = 1, .key = "new", .klen = 3, .payload = "p", .plen = 1}};
    assert_false(core_check(c, &t, &last, &res));
    assert_int_equal(res.status, AP_QFULL);
    core_txn_check_free(&t);
    assert_int_equal(core_rev(c), 1); /* nothing applied but the config */
    core_destroy(c);
}

/* Append rec's byte form to a rec_txn_t's buffer. */
static void add(ordo_buf_t *b, const record_t *rec)
{
    size_t at = b->len;
    ordo_buf_reserve(b, 4);
    b->len += 4;
    record_encode(rec, b);
    put_u32(b->data + at, (uint32_t)(b->len - at - 4));
}

static void test_txn_record_applies_in_order_and_replays(void **state)
{
    (void)state;
    core_t *a = core_create(1000), *b = core_create(1000);
    apply_result_t res;
    ordo_buf_t subs = ORDO_BUF_INIT, bytes = ORDO_BUF_INIT;
    record_t r1 = put("x", "1"), r2 = put("y", "2"), r3 = incr("x");
    add(&subs, &r1);
    add(&subs, &r2);
    add(&subs, &r3);
    record_t txn = {.type = REC_TXN, .time_ms = 1, .txn = {.count = 3, .recs = subs.data, .len = (uint32_t)subs.len}};
    core_apply(a, &txn, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.rev, 3);
    assert_memory_equal(kv_get(core_kv(a), "x", 1, &(kv_version_t){0})->value, "2", 1);
    assert_int_equal(kv_get(core_kv(a), "y", 1, &(kv_version_t){0})->mod_rev, 2);
    record_encode(&txn, &bytes);
    record_t back;
    assert_int_equal(record_decode(bytes.data, bytes.len, &back), 0);
    core_apply(b, &back, &res);
    assert_int_equal(core_rev(b), 3);
    assert_int_equal(kv_get(core_kv(b), "x", 1, &(kv_version_t){0})->mod_rev, 3);
    ordo_buf_free(&subs);
    ordo_buf_free(&bytes);
    core_destroy(a);
    core_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_changes_nothing_and_follows_the_transaction),
        cmocka_unit_test(test_check_delivery_tokens),
        cmocka_unit_test(test_check_counts_pushes_per_key_and_per_queue),
        cmocka_unit_test(test_txn_record_applies_in_order_and_replays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
