/*
 * test_srv_core.c -- the core state machine: conditions decided by apply,
 * revisions taken only by changes, expiry as records, automatic compaction,
 * and determinism (the same records applied to two cores give the same
 * results and the same state), also when one of them applies them as a bulk
 * replay (core_replay_begin/end), which tells no observer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "core/record.h"

static record_t put(const char *k, const char *v, uint64_t t)
{
    record_t r = {.type = REC_PUT, .time_ms = t,
                  .put = {.key = k, .klen = (uint32_t)strlen(k), .val = v, .vlen = (uint32_t)strlen(v)}};
    return r;
}

static void test_conditions_and_revisions(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    apply_result_t res;
    record_t r = put("a", "1", 1);
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.rev, 1);
    /* IFREV mismatch: CONFLICT with the current mod rev, no revision taken. */
    r = put("a", "2", 2);
    r.flags = REC_F_IFREV;
    r.put.ifrev = 7;
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_CONFLICT);
    assert_int_equal(res.cur_rev, 1);
    assert_int_equal(core_rev(c), 1);
    r.put.ifrev = 1;
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.rev, 2);
    /* IFREV 0: only if absent. */
    r = put("b", "x", 3);
    r.flags = REC_F_IFREV;
    r.put.ifrev = 0;
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_OK);
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_CONFLICT);
    assert_int_equal(res.cur_rev, 3);
    /* NX / XX. */
    r = put("a", "nx", 4);
    r.flags = REC_F_NX;
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_NOOP);
    r = put("zz", "xx", 4);
    r.flags = REC_F_XX;
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_NOOP);
    assert_int_equal(core_rev(c), 3);
    /* DEL of an absent key takes no revision. */
    record_t d = {.type = REC_DEL, .time_ms = 5, .del = {.key = "nope", .klen = 4}};
    core_apply(c, &d, &res);
    assert_int_equal(res.status, AP_NOOP);
    d.del.key = "a";
    d.del.klen = 1;
    core_apply(c, &d, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.rev, 4);
    assert_null(kv_get(core_kv(c), "a", 1, &(kv_version_t){0}));
    core_destroy(c);
}

static void test_incr(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    apply_result_t res;
    record_t r = {.type = REC_INCR, .incr = {.key = "n", .klen = 1, .by = 5}};
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.kv.incr, 5);
    r.incr.by = -7;
    core_apply(c, &r, &res);
    assert_int_equal(res.kv.incr, -2);
    record_t p = put("n", "9223372036854775807", 1);
    core_apply(c, &p, &res);
    r.incr.by = 1;
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_OVERFLOW);
    p = put("s", "12a", 1);
    core_apply(c, &p, &res);
    record_t q = {.type = REC_INCR, .incr = {.key = "s", .klen = 1, .by = 1}};
    core_apply(c, &q, &res);
    assert_int_equal(res.status, AP_NOTINT);
    p = put("z", "007", 1); /* leading zeros are not an integer, as in Redis */
    core_apply(c, &p, &res);
    q.incr.key = "z";
    core_apply(c, &q, &res);
    assert_int_equal(res.status, AP_NOTINT);
    core_destroy(c);
}

static int changes_seen;
static void count_change(void *arg, const kv_change_t *ch)
{
    (void)arg;
    (void)ch;
    changes_seen++;
}

/* EXPIRE / PERSIST as REC_KEY_TTL: conditions decided at apply, a revision
 * per change and none for a no-op, no version (the value is untouched), a
 * past deadline deletes the key. */
static void test_key_ttl(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    apply_result_t res;
    record_t r = put("k", "v", 1000);
    core_apply(c, &r, &res);
    uint64_t rev = core_rev(c);
    record_t t = {.type = REC_KEY_TTL, .time_ms = 1000, .flags = REC_F_XX,
                  .key_ttl = {.key = "k", .klen = 1, .expire_at_ms = 5000}};
    core_apply(c, &t, &res); /* XX without a deadline: no */
    assert_int_equal(res.status, AP_NOOP);
    assert_int_equal(core_rev(c), rev);
    t.flags = REC_F_LT; /* no deadline is infinite: 5000 is earlier */
    core_apply(c, &t, &res);
    assert_int_equal(res.status, AP_OK);
    assert_true(res.kv.changed);
    assert_int_equal(core_rev(c), rev + 1);
    assert_int_equal(core_expiry_of(c, "k", 1), 5000);
    assert_int_equal(kv_get(core_kv(c), "k", 1, &(kv_version_t){0})->mod_rev, rev); /* no new version */
    t.flags = REC_F_GT;
    t.key_ttl.expire_at_ms = 4000;
    core_apply(c, &t, &res);
    assert_int_equal(res.status, AP_NOOP);
    t.flags = REC_F_NX;
    core_apply(c, &t, &res);
    assert_int_equal(res.status, AP_NOOP);
    record_t p = {.type = REC_KEY_TTL, .time_ms = 1000, .key_ttl = {.key = "k", .klen = 1}};
    core_apply(c, &p, &res); /* PERSIST */
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(core_expiry_of(c, "k", 1), 0);
    core_apply(c, &p, &res); /* nothing to remove */
    assert_int_equal(res.status, AP_NOOP);
    record_t none = {.type = REC_KEY_TTL, .time_ms = 1000, .key_ttl = {.key = "x", .klen = 1, .expire_at_ms = 9}};
    core_apply(c, &none, &res);
    assert_int_equal(res.status, AP_NOOP);
    t.flags = 0;
    t.key_ttl.expire_at_ms = 1000; /* not in the future: deleted now */
    core_apply(c, &t, &res);
    assert_int_equal(res.status, AP_OK);
    assert_null(kv_get(core_kv(c), "k", 1, &(kv_version_t){0}));
    core_destroy(c);
}

/* APPEND computes from the state (absent: empty), keeps the deadline and
 * takes a revision; FLUSH deletes every live key, one revision and one
 * change event each, and leaves nothing to do the second time. */
static void test_append_and_flush(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    core_set_change_cb(c, count_change, NULL);
    apply_result_t res;
    record_t a = {.type = REC_APPEND, .time_ms = 1000, .append = {.key = "a", .klen = 1, .val = "xy", .vlen = 2}};
    core_apply(c, &a, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.kv.length, 2);
    record_t t = {.type = REC_KEY_TTL, .time_ms = 1000, .key_ttl = {.key = "a", .klen = 1, .expire_at_ms = 9000}};
    core_apply(c, &t, &res);
    core_apply(c, &a, &res);
    assert_int_equal(res.kv.length, 4);
    const kv_version_t *v = kv_get(core_kv(c), "a", 1, &(kv_version_t){0});
    assert_memory_equal(v->value, "xyxy", 4);
    assert_int_equal(core_expiry_of(c, "a", 1), 9000);
    record_t p = put("b", "1", 1000);
    core_apply(c, &p, &res);
    uint64_t rev = core_rev(c);
    changes_seen = 0;
    record_t f = {.type = REC_FLUSH, .time_ms = 1000};
    core_apply(c, &f, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.kv.length, 2);
    assert_int_equal(core_rev(c), rev + 2);
    assert_int_equal(changes_seen, 2);
    assert_int_equal(kv_count(core_kv(c)), 0);
    assert_int_equal(core_expiry_of(c, "a", 1), 0);
    core_apply(c, &f, &res);
    assert_int_equal(res.status, AP_NOOP);
    assert_int_equal(core_rev(c), rev + 2);
    core_destroy(c);
}

static void test_expiry_is_a_record(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    core_set_change_cb(c, count_change, NULL);
    changes_seen = 0;
    apply_result_t res;
    record_t r = put("t1", "v", 1000);
    r.put.expire_at_ms = 1500;
    core_apply(c, &r, &res);
    r = put("t2", "v", 1000);
    r.put.expire_at_ms = 1200;
    core_apply(c, &r, &res);
    r = put("keep", "v", 1000);
    core_apply(c, &r, &res);
    assert_int_equal(core_next_expiry(c), 1200);
    assert_int_equal(core_expiring(c), 2);
    /* An expiry record deletes exactly the key it names, whatever the
     * deadlines say: the writer decided, apply obeys. */
    size_t klen = 0;
    assert_memory_equal(core_first_expiring(c, &klen), "t2", 2);
    assert_int_equal(klen, 2);
    record_t e = {.type = REC_EXPIRE, .time_ms = 1200, .expire = {.key = "t2", .klen = 2}};
    core_apply(c, &e, &res);
    assert_int_equal(res.status, AP_OK);
    assert_true(res.kv.changed);
    assert_null(kv_get(core_kv(c), "t2", 2, &(kv_version_t){0}));
    assert_non_null(kv_get(core_kv(c), "t1", 2, &(kv_version_t){0}));
    core_apply(c, &e, &res); /* already gone: nothing to do, no revision */
    assert_int_equal(res.status, AP_NOOP);
    uint64_t rev = core_rev(c);
    record_t e2 = {.type = REC_EXPIRE, .time_ms = 0, .expire = {.key = "keep", .klen = 4}};
    core_apply(c, &e2, &res); /* no deadline, yet named: deleted */
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(core_rev(c), rev + 1);
    /* A SET without expiry clears it; KEEPTTL keeps it. */
    r = put("t1", "w", 1300);
    r.flags = REC_F_KEEPTTL;
    core_apply(c, &r, &res);
    assert_int_equal(core_expiry_of(c, "t1", 2), 1500);
    r = put("t1", "w2", 1301);
    core_apply(c, &r, &res);
    assert_int_equal(core_expiry_of(c, "t1", 2), 0);
    assert_int_equal(core_expiring(c), 0);
    assert_null(core_first_expiring(c, &klen));
    /* Apply never expires by itself: a key past its deadline stays until
     * the writer's record removes it. */
    r = put("x", "1", 2000);
    r.put.expire_at_ms = 2100;
    core_apply(c, &r, &res);
    r = put("x", "2", 5000);
    r.flags = REC_F_NX;
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_NOOP);
    assert_int_equal(changes_seen, 8); /* 3 puts, 2 expiries, 3 puts */
    core_destroy(c);
}

static void test_auto_compaction(void **state)
{
    (void)state;
    core_t *c = core_create(100);
    apply_result_t res;
    for (int i = 0; i < 5000; i++) {
        record_t r = put("k", "v", (uint64_t)i);
        core_apply(c, &r, &res);
    }
    kv_stats_t st;
    kv_stats(core_kv(c), &st);
    /* Automatic compaction keeps history near history_revs, not 5000. */
    assert_true(st.versions <= 200);
    assert_true(kv_oldest_rev(core_kv(c)) >= 5000 - 200);
    const kv_version_t *v;
    assert_int_equal(kv_get_at(core_kv(c), "k", 1, 4990, &(kv_version_t){0}, &v), KV_OK);
    assert_int_equal(v->mod_rev, 4990);
    record_t cp = {.type = REC_COMPACT, .compact = {.rev = 6000}};
    core_apply(c, &cp, &res);
    assert_int_equal(res.status, AP_FUTURE);
    cp.compact.rev = 1;
    core_apply(c, &cp, &res);
    assert_int_equal(res.status, AP_COMPACTED);
    cp.compact.rev = 5000;
    core_apply(c, &cp, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(kv_oldest_rev(core_kv(c)), 5000);
    core_destroy(c);
}

/* Apply one pseudo-random record stream to two cores: results and final
 * state must be identical. */
static void test_determinism(void **state)
{
    (void)state;
    core_t *a = core_create(50), *b = core_create(50);
    uint64_t seed = 42;
    char key[16], val[16];
    for (int i = 0; i < 20000; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned x = (unsigned)(seed >> 33);
        snprintf(key, sizeof key, "k%u", x % 64);
        snprintf(val, sizeof val, "%u", x % 1000);
        uint32_t klen = (uint32_t)strlen(key), vlen = (uint32_t)strlen(val);
        record_t r;
        switch (x % 5) {
        case 0: r = (record_t){.type = REC_DEL, .del = {.key = key, .klen = klen}}; break;
        case 1: r = (record_t){.type = REC_INCR, .incr = {.key = key, .klen = klen, .by = 1}}; break;
        case 2:
            r = (record_t){.type = REC_PUT,
                           .put = {.key = key, .klen = klen, .val = val, .vlen = vlen,
                                   .expire_at_ms = (uint64_t)i + x % 50}};
            break;
        case 3: r = (record_t){.type = REC_EXPIRE, .expire = {.key = key, .klen = klen}}; break; /* names key */
        default:
            r = (record_t){.type = REC_PUT, .flags = REC_F_IFREV,
                           .put = {.key = key, .klen = klen, .val = val, .vlen = vlen, .ifrev = x % 100}};
            break;
        }
        r.time_ms = (uint64_t)i;
        apply_result_t ra, rb;
        core_apply(a, &r, &ra);
        core_apply(b, &r, &rb);
        assert_memory_equal(&ra, &rb, sizeof ra);
    }
    assert_int_equal(core_rev(a), core_rev(b));
    for (int k = 0; k < 64; k++) {
        snprintf(key, sizeof key, "k%d", k);
        const kv_version_t *va = kv_get(core_kv(a), key, strlen(key), &(kv_version_t){0});
        const kv_version_t *vb = kv_get(core_kv(b), key, strlen(key), &(kv_version_t){0});
        assert_int_equal(va == NULL, vb == NULL);
        if (va != NULL) {
            assert_int_equal(va->mod_rev, vb->mod_rev);
            assert_int_equal(va->vlen, vb->vlen);
            assert_memory_equal(va->value, vb->value, va->vlen);
        }
    }
    core_destroy(a);
    core_destroy(b);
}

/* Ranges are read into these, to compare two stores key by key in order. */
typedef struct {
    kv_version_t v[512];
    size_t n;
} seen_t;

static int seen_cb(void *arg, const kv_version_t *v)
{
    seen_t *s = arg;
    assert_true(s->n < sizeof s->v / sizeof s->v[0]);
    s->v[s->n++] = *v; /* a copy: the struct lives for the call only */
    return 0;
}

static void count_changes_into(void *arg, const kv_change_t *ch)
{
    (void)ch;
    (*(size_t *)arg)++;
}

static void same_range(const core_t *a, const core_t *b, uint64_t at_rev)
{
    seen_t sa = {.n = 0}, sb = {.n = 0};
    long na = kv_range(core_kv(a), NULL, 0, NULL, 0, at_rev, 0, seen_cb, &sa);
    long nb = kv_range(core_kv(b), NULL, 0, NULL, 0, at_rev, 0, seen_cb, &sb);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < sa.n; i++) {
        assert_int_equal(sa.v[i].klen, sb.v[i].klen);
        assert_memory_equal(sa.v[i].key, sb.v[i].key, sa.v[i].klen);
        assert_int_equal(sa.v[i].mod_rev, sb.v[i].mod_rev);
        assert_int_equal(sa.v[i].create_rev, sb.v[i].create_rev);
        assert_int_equal(sa.v[i].version, sb.v[i].version);
        assert_int_equal(sa.v[i].vlen, sb.v[i].vlen);
        assert_memory_equal(sa.v[i].value, sb.v[i].value, sa.v[i].vlen);
    }
}

/* The same stream applied live and as a bulk replay (as recovery does):
 * same results, same revisions, same keys in the same order with the same
 * history and compaction point; the replaying core tells its observer
 * nothing. Keys come and go (deletes, expiries, compaction of tombstones)
 * while the replay defers indexing them. */
static void test_bulk_replay_same_state(void **state)
{
    (void)state;
    core_t *a = core_create(300), *b = core_create(300);
    size_t changes_a = 0, changes_b = 0;
    core_set_change_cb(a, count_changes_into, &changes_a);
    core_set_change_cb(b, count_changes_into, &changes_b);
    for (int round = 0; round < 3; round++) {
        core_replay_begin(b);
        uint64_t seed = 7 + (uint64_t)round;
        char key[16], val[16];
        for (int i = 0; i < 5000; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            unsigned x = (unsigned)(seed >> 33);
            snprintf(key, sizeof key, "k%u", x % 400);
            snprintf(val, sizeof val, "%u", x % 1000);
            uint32_t klen = (uint32_t)strlen(key), vlen = (uint32_t)strlen(val);
            record_t r;
            switch (x % 7) {
            case 0: case 1: r = (record_t){.type = REC_DEL, .del = {.key = key, .klen = klen}}; break;
            case 2: r = (record_t){.type = REC_INCR, .incr = {.key = key, .klen = klen, .by = 1}}; break;
            case 3: r = (record_t){.type = REC_EXPIRE, .expire = {.key = key, .klen = klen}}; break;
            case 4:
                r = (record_t){.type = REC_COMPACT, .compact = {.rev = kv_oldest_rev(core_kv(a)) + x % 200}};
                break;
            default:
                r = (record_t){.type = REC_PUT, .put = {.key = key, .klen = klen, .val = val, .vlen = vlen}};
                break;
            }
            r.time_ms = (uint64_t)i;
            apply_result_t ra, rb;
            core_apply(a, &r, &ra);
            core_apply(b, &r, &rb);
            assert_memory_equal(&ra, &rb, sizeof ra);
            assert_int_equal(core_rev(a), core_rev(b));
        }
        assert_int_equal(changes_b, 0);
        core_replay_end(b);
        assert_true(changes_a > 0);
        assert_int_equal(kv_oldest_rev(core_kv(a)), kv_oldest_rev(core_kv(b)));
        assert_int_equal(kv_count(core_kv(a)), kv_count(core_kv(b)));
        same_range(a, b, 0);
        same_range(a, b, kv_oldest_rev(core_kv(a)));
        same_range(a, b, (kv_oldest_rev(core_kv(a)) + core_rev(a)) / 2);
        /* After the replay the observer hears of changes again. */
        record_t r = put("after", "x", 1);
        apply_result_t res;
        core_apply(b, &r, &res);
        core_apply(a, &r, &res);
        assert_int_equal(changes_b, 1);
        changes_a = changes_b = 0;
    }
    core_destroy(a);
    core_destroy(b);
}

/* Queue records: revisions as core.c documents them, and the byte form
 * (format 2 with the aux field) round-trips into the same state. */
static record_t qrec(uint8_t type, uint64_t t)
{
    record_t r = {.type = type, .time_ms = t};
    switch (type) {
    case REC_Q_PUSH: r.q_push.queue = "q"; r.q_push.qlen = 1; break;
    case REC_Q_DELIVER: r.q_deliver.queue = "q"; r.q_deliver.qlen = 1; break;
    case REC_Q_EXTEND: r.q_extend.queue = "q"; r.q_extend.qlen = 1; break;
    case REC_Q_REDELIVER: r.q_redeliver.queue = "q"; r.q_redeliver.qlen = 1; break;
    case REC_Q_ACK: r.q_ack.queue = "q"; r.q_ack.qlen = 1; break;
    case REC_Q_CONFIG: r.q_config.queue = "q"; r.q_config.qlen = 1; break;
    default: r.q.queue = "q"; r.q.qlen = 1; break;
    }
    return r;
}

static void apply_both(core_t *a, core_t *b, const record_t *r, apply_result_t *res)
{
    ordo_buf_t buf = ORDO_BUF_INIT;
    record_encode(r, &buf);
    record_t d;
    assert_int_equal(record_decode(buf.data, buf.len, &d), 0);
    if (r->type == REC_Q_PUSH)
        assert_int_equal(d.q_push.dlen, r->q_push.dlen);
    apply_result_t res2;
    core_apply(a, r, res);
    core_apply(b, &d, &res2);
    assert_int_equal(res->status, res2.status);
    assert_int_equal(core_rev(a), core_rev(b));
    ordo_buf_free(&buf);
}

static void test_queue_records(void **state)
{
    (void)state;
    core_t *a = core_create(1000), *b = core_create(1000);
    apply_result_t res;
    record_t p = qrec(REC_Q_PUSH, 100);
    p.q_push.key = "k";
    p.q_push.klen = 1;
    p.q_push.payload = "v";
    p.q_push.plen = 1;
    p.q_push.dedup_id = "dd";
    p.q_push.dlen = 2;
    apply_both(a, b, &p, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.queue.id, 1); /* the id is the revision */
    apply_both(a, b, &p, &res);     /* duplicate: no revision */
    assert_int_equal(res.status, AP_NOOP);
    assert_int_equal(res.queue.id, 1);
    assert_int_equal(core_rev(a), 1);
    record_t d = qrec(REC_Q_DELIVER, 110);
    apply_both(a, b, &d, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.queue.delivery.token, 2);
    apply_both(a, b, &d, &res); /* nothing ready */
    assert_int_equal(res.status, AP_NOOP);
    record_t e = qrec(REC_Q_EXTEND, 120);
    e.q_extend.msg_id = 1;
    e.q_extend.token = 2;
    e.q_extend.ttl_ms = 5;
    apply_both(a, b, &e, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(core_rev(a), 3);
    record_t x = qrec(REC_Q_REDELIVER, 126); /* lease ends at 125: due once past it */
    x.q_redeliver.msg_id = 1;
    x.q_redeliver.token = 2;
    apply_both(a, b, &x, &res);
    assert_int_equal(res.status, AP_OK);
    assert_int_equal(res.queue.retry.kind, QUEUE_RETRY_READY);
    apply_both(a, b, &d, &res);
    assert_int_equal(res.queue.delivery.attempt, 2);
    assert_int_equal(res.queue.delivery.token, 5); /* extend and redelivery took 3 and 4 */
    record_t k = qrec(REC_Q_ACK, 130);
    k.q_ack.msg_id = 1;
    k.q_ack.token = 2; /* stale */
    apply_both(a, b, &k, &res);
    assert_int_equal(res.status, AP_NOOP);
    k.q_ack.token = 5;
    k.flags = REC_F_RESULT;
    k.q_ack.result = "r";
    k.q_ack.rlen = 1;
    apply_both(a, b, &k, &res);
    assert_int_equal(res.status, AP_OK);
    queue_result_t qr;
    assert_int_equal(queue_result(queue_get(core_queues(b), "q", 1), 1, &qr), QUEUE_FATE_DONE);
    /* config: the blob round-trips; a self dead-letter is refused and creates nothing */
    queue_config_t cfg;
    queue_config_defaults(&cfg);
    cfg.maxlen = 7;
    char blob[CORE_QCONFIG_BYTES];
    core_qconfig_encode(&cfg, blob);
    record_t c = qrec(REC_Q_CONFIG, 140);
    c.q_config.queue = "z";
    c.q_config.config = blob;
    c.q_config.clen = sizeof blob;
    c.q_config.deadletter = "z";
    c.q_config.dllen = 1;
    apply_both(a, b, &c, &res);
    assert_int_equal(res.status, AP_INVALID);
    assert_null(queue_get(core_queues(a), "z", 1));
    c.q_config.dllen = 0;
    apply_both(a, b, &c, &res);
    assert_int_equal(res.status, AP_OK);
    queue_config(queue_get(core_queues(b), "z", 1), &cfg);
    assert_int_equal(cfg.maxlen, 7);
    /* The retry policy round-trips; the first, 38-byte form (older logs
     * and snapshots) changes the rest and leaves the policy as it is. */
    cfg.backoff = QUEUE_BACKOFF_EXPONENTIAL;
    cfg.backoff_base_ms = 20;
    cfg.backoff_cap_ms = 900;
    cfg.maxage_ms = 5000;
    core_qconfig_encode(&cfg, blob);
    c.time_ms = 141;
    apply_both(a, b, &c, &res);
    assert_int_equal(res.status, AP_OK);
    cfg.maxlen = 9;
    core_qconfig_encode(&cfg, blob);
    c.q_config.clen = CORE_QCONFIG_V1_BYTES;
    c.time_ms = 142;
    apply_both(a, b, &c, &res);
    assert_int_equal(res.status, AP_OK);
    queue_config(queue_get(core_queues(b), "z", 1), &cfg);
    assert_int_equal(cfg.maxlen, 9);
    assert_int_equal(cfg.backoff, QUEUE_BACKOFF_EXPONENTIAL);
    assert_int_equal(cfg.backoff_base_ms, 20);
    assert_int_equal(cfg.backoff_cap_ms, 900);
    assert_int_equal(cfg.maxage_ms, 5000);
    c.q_config.clen = CORE_QCONFIG_V1_BYTES + 1;
    apply_both(a, b, &c, &res);
    assert_int_equal(res.status, AP_INVALID);
    record_t dr = qrec(REC_Q_DROP, 150);
    apply_both(a, b, &dr, &res);
    assert_int_equal(res.status, AP_OK);
    apply_both(a, b, &dr, &res);
    assert_int_equal(res.status, AP_NOOP);
    core_destroy(a);
    core_destroy(b);
}

/* A format-1 record (before queues: no aux field) still decodes. The
 * bytes are built by hand in format 1's layout (record.h), as the encoder
 * of that time wrote a PUT of "k" = "v". */
static void test_record_format1(void **state)
{
    (void)state;
    unsigned char b[RECORD_HEADER_BYTES + 2 + 4];
    memset(b, 0, sizeof b);
    b[0] = RECORD_FORMAT_V1;
    b[1] = REC_PUT;
    b[3] = 9; /* time_ms */
    b[68] = 1; /* klen */
    b[72] = 'k';
    b[73] = 1; /* vlen */
    b[77] = 'v';
    size_t len = RECORD_HEADER_BYTES + 2 - 4; /* nlen 0, and no aux length */
    record_t d;
    assert_int_equal(record_decode(b, len, &d), 0);
    assert_int_equal(d.type, REC_PUT);
    assert_int_equal(d.time_ms, 9);
    assert_int_equal(d.put.klen, 1);
    assert_int_equal(d.put.vlen, 1);
    assert_int_equal(record_decode(b, len + 4, &d), -1); /* trailing bytes */
}

/* core_time_of_rev(): at most a second early, sampled once a second, and
 * the oldest sample's time for revisions before every sample. */
static void test_time_of_rev(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    apply_result_t res;
    assert_int_equal(core_time_of_rev(c, 1), 0); /* no sample yet */
    uint64_t t0 = 1700000000000ull;
    for (uint64_t i = 0; i < 10000; i++) { /* revision i + 1 at t0 + 10 * i ms */
        record_t r = put("k", "v", t0 + 10 * i);
        core_apply(c, &r, &res);
        assert_int_equal(res.status, AP_OK);
    }
    for (uint64_t rev = 1; rev <= 10000; rev += 37) {
        uint64_t real = t0 + 10 * (rev - 1), got = core_time_of_rev(c, rev);
        assert_true(got <= real && real - got < 1000);
    }
    core_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conditions_and_revisions),
        cmocka_unit_test(test_incr),
        cmocka_unit_test(test_expiry_is_a_record),
        cmocka_unit_test(test_key_ttl),
        cmocka_unit_test(test_append_and_flush),
        cmocka_unit_test(test_auto_compaction),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_bulk_replay_same_state),
        cmocka_unit_test(test_queue_records),
        cmocka_unit_test(test_record_format1),
        cmocka_unit_test(test_time_of_rev),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
