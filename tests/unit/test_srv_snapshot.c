/*
 * test_srv_snapshot.c -- the snapshot file (log/snapshot.h): a core with
 * keys (history, a deletion, an expiry deadline), a lease, a lock, an
 * election and a queue (waiting, in-flight and acked messages, a dedup
 * entry, an idempotency key, a result) is written and loaded back into the
 * same state, also when the file says it is of the previous format; then,
 * as test_srv_wal.c does for the log, the file cut at every offset, with
 * any one byte flipped, or with another format number is refused with a
 * message -- no crash, and nothing loaded into the core; so is a queue
 * message in flight behind another of its key.
 *
 * Every test works in its own mkdtemp() directory under $TMPDIR (or /tmp).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "srvtest.h"

#include "base/bytes.h"
#include "base/crc32c.h"
#include "core/coord.h"
#include "core/core.h"
#include "core/schedule.h"
#include "log/snapshot.h"

/* ---- files ------------------------------------------------------------------ */

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *b = malloc(1 << 20);
    *len = fread(b, 1, 1 << 20, f);
    assert_true(*len < (1 << 20));
    fclose(f);
    return b;
}

/* ---- a core worth snapshotting ------------------------------------------------ */

static void apply_ok(core_t *c, record_t r)
{
    apply_result_t res;
    core_apply(c, &r, &res);
    assert_int_equal(res.status, AP_OK);
}

static core_t *build_core(void)
{
    core_t *c = core_create(1000);
    uint64_t t = 1000;
    apply_ok(c, (record_t){.type = REC_PUT, .time_ms = t, .put = {.key = "a", .klen = 1, .val = "1", .vlen = 1}});
    apply_ok(c, (record_t){.type = REC_PUT, .time_ms = t, .put = {.key = "a", .klen = 1, .val = "22", .vlen = 2}});
    apply_ok(c, (record_t){.type = REC_PUT, .time_ms = t,
                           .put = {.key = "b", .klen = 1, .val = "x", .vlen = 1, .expire_at_ms = 99000}});
    apply_ok(c, (record_t){.type = REC_PUT, .time_ms = t, .put = {.key = "c", .klen = 1, .val = "y", .vlen = 1}});
    apply_ok(c, (record_t){.type = REC_DEL, .time_ms = t, .del = {.key = "c", .klen = 1}});
    apply_ok(c, (record_t){.type = REC_COMPACT, .time_ms = t, .compact = {.rev = 3}});
    apply_ok(c, (record_t){.type = REC_LEASE_GRANT, .time_ms = t, .lease = {.ttl_ms = 60000}});
    apply_ok(c, (record_t){.type = REC_LOCK_ACQUIRE, .time_ms = t, .lock = {.name = "lk", .nlen = 2, .ttl_ms = 60000}});
    apply_ok(c, (record_t){.type = REC_ELECT_CAMPAIGN, .time_ms = t,
                           .elect = {.name = "el", .nlen = 2, .val = "me", .vlen = 2, .ttl_ms = 60000}});
    for (int i = 0; i < 3; i++)
        apply_ok(c, (record_t){.type = REC_Q_PUSH, .time_ms = t,
                               .q_push = {.queue = "q", .qlen = 1, .key = i ? "k2" : "k1", .klen = 2, .payload = "p",
                                          .plen = 1, .dedup_id = i == 0 ? "d0" : NULL, .dlen = i == 0 ? 2 : 0}});
    record_t pull = {.type = REC_Q_DELIVER, .time_ms = t, .q_deliver = {.queue = "q", .qlen = 1, .lease_ms = 30000}};
    apply_result_t res;
    core_apply(c, &pull, &res);
    assert_int_equal(res.status, AP_OK);
    uint64_t id = res.queue.delivery.id, token = res.queue.delivery.token;
    apply_ok(c, (record_t){.type = REC_Q_ACK, .time_ms = t, .flags = REC_F_RESULT,
                           .q_ack = {.queue = "q", .qlen = 1, .msg_id = id, .token = token, .result = "ok",
                                     .rlen = 2}});
    core_apply(c, &pull, &res); /* one in flight */
    assert_int_equal(res.status, AP_OK);
    apply_ok(c, (record_t){.type = REC_Q_PUSH, .time_ms = t, .flags = REC_F_IDEM,
                           .q_push = {.queue = "q", .qlen = 1, .key = "k3", .klen = 2, .payload = "p", .plen = 1,
                                      .dedup_id = "idem", .dlen = 4, .idem_hash = 4242, .idem_ms = 86400000}});
    return c;
}

static void write_snapshot(const char *dir, const core_t *c)
{
    snap_writer_t w;
    char err[256];
    assert_int_equal(snap_writer_begin(&w, dir, c, 5000, err, sizeof err), 0);
    int rc;
    while ((rc = snap_writer_step(&w, c, 2, err, sizeof err)) == 0)
        ;
    assert_int_equal(rc, 1);
    assert_int_equal(snap_writer_commit(&w, err, sizeof err), 0);
    snap_writer_abort(&w);
}

/* Load dir's snapshot into a fresh core: its result, and (on success) the
 * same revision, keys and queue as the original. */
static int load_into_fresh(const char *dir, const core_t *orig, char *err, size_t elen)
{
    core_t *c = core_create(1000);
    uint64_t rev = 77, entries = 77;
    int rc = snap_load(c, dir, &rev, &entries, err, elen);
    if (rc != 0) {
        /* A clear refusal: a message, nothing reported loaded, and
         * nothing in the core (the checks come before any entry loads). */
        assert_true(err[0] != '\0');
        assert_int_equal(rev, 0);
        assert_int_equal(entries, 0);
        assert_int_equal(core_rev(c), 0);
        assert_int_equal(kv_count(core_kv(c)), 0);
        assert_null(queue_get(core_queues(c), "q", 1));
    } else {
        assert_int_equal(rev, core_rev(orig));
        assert_int_equal(core_rev(c), core_rev(orig));
        const kv_version_t *v = kv_get(core_kv(c), "a", 1, &(kv_version_t){0});
        assert_non_null(v);
        assert_memory_equal(v->value, "22", 2);
        assert_null(kv_get(core_kv(c), "c", 1, &(kv_version_t){0}));
        assert_int_equal(core_expiry_of(c, "b", 1), 99000);
        assert_int_equal(kv_oldest_rev(core_kv(c)), kv_oldest_rev(core_kv(orig)));
        const queue_t *q = queue_get(core_queues(c), "q", 1);
        assert_non_null(q);
        queue_result_t qr;
        assert_int_equal(queue_result(q, 10, &qr), QUEUE_FATE_DONE); /* the first push took revision 10 */
        assert_memory_equal(qr.result, "ok", 2);
        queue_idem_t ie;
        assert_true(queue_idem_lookup(q, "k3", 2, "idem", 4, 1000, &ie));
        assert_int_equal(ie.hash, 4242);
        assert_int_equal(ie.end_ms, 1000 + 86400000);
        assert_false(queue_idem_lookup(q, "k1", 2, "idem", 4, 1000, &ie)); /* scoped to its key */
        assert_int_equal(queue_set_idem_count(core_queues(c)), 1);
    }
    core_destroy(c);
    return rc;
}

static void test_round_trip(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-snap-");
    core_t *c = build_core();
    write_snapshot(dir, c);
    char err[512];
    assert_int_equal(load_into_fresh(dir, c, err, sizeof err), 0);
    core_destroy(c);
    tmpdir_free(dir);
}

/* A snapshot of build_core() written to a fresh directory, read back
 * whole into b for the damage tests; snapfile_close frees it all. */
typedef struct {
    char *dir;
    core_t *c;
    char path[4200];
    unsigned char *b;
    size_t len;
} snapfile_t;

static void snapfile_open(snapfile_t *t)
{
    t->dir = tmpdir_new("ordo-snap-");
    t->c = build_core();
    write_snapshot(t->dir, t->c);
    snprintf(t->path, sizeof t->path, "%s/%s", t->dir, SNAP_FILE);
    t->b = read_all(t->path, &t->len);
}

static void snapfile_close(snapfile_t *t)
{
    free(t->b);
    core_destroy(t->c);
    tmpdir_free(t->dir);
}

/* A file of the previous format (no idempotency keys then, and none
 * needed) loads: the format was bumped by adding an entry kind. */
static void test_previous_format_loads(void **state)
{
    (void)state;
    snapfile_t t;
    snapfile_open(&t);
    char err[512];
    const uint32_t versions[] = {SNAP_FORMAT_V3, SNAP_FORMAT_V4, SNAP_FORMAT};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        put_u32(t.b + 8, versions[i]);
        put_u32(t.b + t.len - 4, ordo_crc32c(0, t.b, t.len - 4));
        file_put(t.path, t.b, t.len);
        assert_int_equal(load_into_fresh(t.dir, t.c, err, sizeof err), 0);
    }
    snapfile_close(&t);
}

/* Cut at every offset: refused (a snapshot is renamed into place whole, so
 * a short one is damage, not a tail to cut). */
static void test_torn_at_every_offset(void **state)
{
    (void)state;
    snapfile_t t;
    snapfile_open(&t);
    char err[512];
    assert_true(t.len > 100);
    for (size_t cut = 0; cut < t.len; cut++) {
        file_put(t.path, t.b, cut);
        if (load_into_fresh(t.dir, t.c, err, sizeof err) != -1)
            fail_msg("a snapshot cut at %zu of %zu bytes loaded", cut, t.len);
    }
    file_put(t.path, t.b, t.len);
    assert_int_equal(load_into_fresh(t.dir, t.c, err, sizeof err), 0);
    snapfile_close(&t);
}

/* Any one byte flipped, anywhere: refused. */
static void test_flipped_byte(void **state)
{
    (void)state;
    snapfile_t t;
    snapfile_open(&t);
    char err[512];
    for (size_t at = 0; at < t.len; at++) {
        t.b[at] ^= 0x20;
        file_put(t.path, t.b, t.len);
        if (load_into_fresh(t.dir, t.c, err, sizeof err) != -1)
            fail_msg("a snapshot with byte %zu of %zu flipped loaded", at, t.len);
        t.b[at] ^= 0x20;
    }
    snapfile_close(&t);
}

/* Another format number, with a checksum that matches: refused by the
 * header check, saying so. */
static void test_wrong_version(void **state)
{
    (void)state;
    snapfile_t t;
    snapfile_open(&t);
    char err[512];
    const uint32_t versions[] = {0, 1, SNAP_FORMAT + 1, 0xffffffffu};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        put_u32(t.b + 8, versions[i]);
        put_u32(t.b + t.len - 4, ordo_crc32c(0, t.b, t.len - 4));
        file_put(t.path, t.b, t.len);
        assert_int_equal(load_into_fresh(t.dir, t.c, err, sizeof err), -1);
        assert_non_null(strstr(err, "format"));
    }
    /* Not a snapshot at all. */
    memcpy(t.b, "ORDOWAL\0", 8);
    file_put(t.path, t.b, t.len);
    assert_int_equal(load_into_fresh(t.dir, t.c, err, sizeof err), -1);
    snapfile_close(&t);
}

/* The in-memory snapshot (a raft snapshot) loads into the same state as
 * the file, and its digest is the state's: equal for a core loaded from
 * it (whatever order its tables were filled in), different once one more
 * record applies. */
static void test_memory_and_digest(void **state)
{
    (void)state;
    core_t *c = build_core();
    ordo_buf_t mem = ORDO_BUF_INIT;
    assert_int_equal(snap_encode_mem(c, 5000, &mem), 0);
    core_t *d = core_create(1000);
    uint64_t rev = 0, entries = 0;
    char err[256];
    assert_int_equal(snap_load_mem(d, mem.data, mem.len, "mem", &rev, &entries, err, sizeof err), 0);
    assert_int_equal(rev, core_rev(c));
    assert_true(entries > 5);
    uint64_t dc = snap_digest(c), dd = snap_digest(d);
    assert_true(dc == dd);
    /* A damaged buffer is refused, not loaded. */
    mem.data[mem.len / 2] ^= 0x40;
    core_t *e = core_create(1000);
    assert_int_equal(snap_load_mem(e, mem.data, mem.len, "mem", &rev, &entries, err, sizeof err), -1);
    assert_non_null(strstr(err, "mem"));
    core_destroy(e);
    apply_ok(d, (record_t){.type = REC_PUT, .time_ms = 2000, .put = {.key = "z", .klen = 1, .val = "1", .vlen = 1}});
    assert_true(snap_digest(d) != dc);
    /* A queue message's digest depends on its queue. */
    core_t *q1 = core_create(1000), *q2 = core_create(1000);
    apply_ok(q1, (record_t){.type = REC_Q_PUSH, .time_ms = 1,
                            .q_push = {.queue = "a", .qlen = 1, .key = "k", .klen = 1, .payload = "p", .plen = 1}});
    apply_ok(q2, (record_t){.type = REC_Q_PUSH, .time_ms = 1,
                            .q_push = {.queue = "b", .qlen = 1, .key = "k", .klen = 1, .payload = "p", .plen = 1}});
    assert_true(snap_digest(q1) != snap_digest(q2));
    core_destroy(q1);
    core_destroy(q2);
    ordo_buf_free(&mem);
    core_destroy(c);
    core_destroy(d);
}

/* The digest is the replicated state's, not the history window: two cores
 * given the same writes, one keeping a change of history and the other a
 * thousand, hold the same keys at the same revision and have the same
 * digest; the history digest compares the changes both still hold and
 * refuses a revision the short history no longer reaches. */
static void test_digest_leaves_out_the_history_window(void **state)
{
    (void)state;
    core_t *shortc = core_create(1), *longc = core_create(1000);
    core_t *both[2] = {shortc, longc};
    for (int i = 0; i < 2; i++) {
        for (int n = 0; n < 20; n++) {
            char v[8];
            int vlen = snprintf(v, sizeof v, "%d", n);
            apply_ok(both[i], (record_t){.type = REC_PUT, .time_ms = 1,
                                         .put = {.key = n % 2 ? "a" : "b", .klen = 1, .val = v, .vlen = (uint32_t)vlen}});
        }
        apply_ok(both[i], (record_t){.type = REC_DEL, .time_ms = 1, .del = {.key = "b", .klen = 1}});
    }
    uint64_t oldest = kv_oldest_rev(core_kv(shortc));
    assert_true(oldest > kv_oldest_rev(core_kv(longc)));
    assert_int_equal(core_rev(shortc), core_rev(longc));
    assert_true(snap_digest(shortc) == snap_digest(longc));
    uint64_t hs = 0, hl = 0;
    assert_int_equal(snap_digest_history(shortc, oldest - 1, &hs), 0);
    assert_int_equal(snap_digest_history(longc, oldest - 1, &hl), 0);
    assert_true(hs == hl && hs != snap_digest(shortc));
    assert_int_equal(snap_digest_history(shortc, oldest - 2, &hs), -1);
    assert_int_equal(snap_digest_history(longc, 0, &hl), 0);
    core_destroy(shortc);
    core_destroy(longc);
}

/* A queue message in flight behind another message of its key (only a
 * key's oldest can be): refused as an inconsistent entry, not an assertion
 * in the queue (found by tests/fuzz/fuzz_snapshot.c). The snapshot of a
 * queue with key k's head in flight and a second message waiting behind
 * it, that second message's state changed to in flight, checksum fixed. */
static void test_inflight_behind_head_refused(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    for (int i = 0; i < 2; i++)
        apply_ok(c, (record_t){.type = REC_Q_PUSH, .time_ms = 1,
                               .q_push = {.queue = "q", .qlen = 1, .key = "k", .klen = 1, .payload = "p",
                                          .plen = 1}});
    apply_ok(c, (record_t){.type = REC_Q_DELIVER, .time_ms = 1, .q_deliver = {.queue = "q", .qlen = 1}});
    ordo_buf_t mem = ORDO_BUF_INIT;
    assert_int_equal(snap_encode_mem(c, 5000, &mem), 0);
    /* Header (36), then 'Q' q (its config, no dead-letter queue), then the
     * two 'M' entries of k, the head first. */
    size_t q_bytes = 1 + 4 + 1 + 4 + CORE_QCONFIG_BYTES + 4;
    size_t m_bytes = 1 + 1 + 8 + 4 + 1 + 4 + 1 + 8 + 1 + 8 + 8 + 8;
    size_t first = 36 + q_bytes, second = first + m_bytes;
    assert_true(second + m_bytes < mem.len);
    assert_int_equal(mem.data[36], 'Q');
    assert_int_equal(mem.data[first], 'M');
    assert_int_equal(mem.data[first + 1], QUEUE_MSG_INFLIGHT);
    assert_int_equal(mem.data[second], 'M');
    assert_int_equal(mem.data[second + 1], QUEUE_MSG_WAITING);
    mem.data[second + 1] = QUEUE_MSG_INFLIGHT;
    put_u32(mem.data + mem.len - 4, ordo_crc32c(0, mem.data, mem.len - 4));
    core_t *d = core_create(1000);
    uint64_t rev = 0, entries = 0;
    char err[256];
    assert_int_equal(snap_load_mem(d, mem.data, mem.len, "mem", &rev, &entries, err, sizeof err), -1);
    assert_non_null(strstr(err, "inconsistent entry"));
    core_destroy(d);
    ordo_buf_free(&mem);
    core_destroy(c);
}

/* Pauses (format 5's 'Z'): a key's timed pause, a key paused with no
 * messages, and the queue's own pause come back, and the paused key's
 * message stays out of reach of a pull. */
static void test_pauses_round_trip(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    apply_ok(c, (record_t){.type = REC_Q_PUSH, .time_ms = 1,
                           .q_push = {.queue = "q", .qlen = 1, .key = "k", .klen = 1, .payload = "p", .plen = 1}});
    apply_ok(c, (record_t){.type = REC_Q_PAUSE, .time_ms = 2,
                           .q_pause = {.queue = "q", .qlen = 1, .key = "k", .klen = 1, .until_ms = 9000,
                                       .op = Q_PAUSE_KEY}});
    apply_ok(c, (record_t){.type = REC_Q_PAUSE, .time_ms = 3,
                           .q_pause = {.queue = "q", .qlen = 1, .key = "idle", .klen = 4, .op = Q_PAUSE_KEY}});
    apply_ok(c, (record_t){.type = REC_Q_PAUSE, .time_ms = 4,
                           .q_pause = {.queue = "p", .qlen = 1, .until_ms = 7000, .op = Q_PAUSE_QUEUE}});
    ordo_buf_t mem = ORDO_BUF_INIT;
    assert_int_equal(snap_encode_mem(c, 5000, &mem), 0);
    core_t *d = core_create(1000);
    uint64_t rev = 0, entries = 0, until = 0;
    char err[256];
    assert_int_equal(snap_load_mem(d, mem.data, mem.len, "mem", &rev, &entries, err, sizeof err), 0);
    const queue_t *q = queue_get(core_queues(d), "q", 1), *p = queue_get(core_queues(d), "p", 1);
    assert_non_null(q);
    assert_non_null(p);
    assert_true(queue_paused(q, "k", 1, &until));
    assert_int_equal(until, 9000);
    assert_true(queue_paused(q, "idle", 4, &until));
    assert_int_equal(until, 0);
    assert_false(queue_paused(q, NULL, 0, &until));
    assert_true(queue_paused(p, NULL, 0, &until));
    assert_int_equal(until, 7000);
    assert_int_equal(queue_oldest_ready_id(q), 0); /* k's message is not ready */
    assert_int_equal(queue_set_paused_keys(core_queues(d)), 2);
    assert_int_equal(queue_set_paused_queues(core_queues(d)), 1);
    assert_int_equal(snap_digest(c), snap_digest(d));
    core_destroy(d);
    ordo_buf_free(&mem);
    core_destroy(c);
}

/* Rate buckets and throttles ('T'): a core loaded from the snapshot
 * answers the same records as the one it was taken of (same deliveries,
 * same revisions), a throttled key included. */
static void test_rate_state_replays_the_same(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    queue_config_t cfg;
    queue_config_defaults(&cfg);
    cfg.keyrate_n = 1;
    cfg.keyrate_per_ms = 1000;
    cfg.rate_n = 5;
    cfg.rate_per_ms = 1000;
    char blob[CORE_QCONFIG_BYTES];
    core_qconfig_encode(&cfg, blob);
    apply_ok(c, (record_t){.type = REC_Q_CONFIG, .time_ms = 1,
                           .q_config = {.queue = "q", .qlen = 1, .config = blob, .clen = sizeof blob}});
    const char *keys[] = {"a", "a", "b", "c"};
    for (int i = 0; i < 4; i++)
        apply_ok(c, (record_t){.type = REC_Q_PUSH, .time_ms = 10,
                               .q_push = {.queue = "q", .qlen = 1, .key = keys[i], .klen = 1, .payload = "p",
                                          .plen = 1}});
    record_t pull = {.type = REC_Q_DELIVER, .time_ms = 10, .flags = REC_F_NOACK, .q_deliver = {.queue = "q", .qlen = 1}};
    apply_ok(c, pull);   /* a: its bucket is empty now */
    ordo_buf_t mem = ORDO_BUF_INIT;
    assert_int_equal(snap_encode_mem(c, 5000, &mem), 0);
    core_t *d = core_create(1000);
    uint64_t rev = 0, entries = 0;
    char err[256];
    assert_int_equal(snap_load_mem(d, mem.data, mem.len, "mem", &rev, &entries, err, sizeof err), 0);
    assert_int_equal(snap_digest(c), snap_digest(d));
    /* Then both: b, c, and a throttled (nothing), a promote at 1011 (a back), a. */
    record_t seq[] = {pull, pull, pull,
                      {.type = REC_Q_PROMOTE, .time_ms = 1011, .q = {.queue = "q", .qlen = 1}},
                      {.type = REC_Q_DELIVER, .time_ms = 1011, .flags = REC_F_NOACK,
                       .q_deliver = {.queue = "q", .qlen = 1}}};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        apply_result_t r1, r2;
        core_apply(c, &seq[i], &r1);
        core_apply(d, &seq[i], &r2);
        assert_int_equal(r1.status, r2.status);
        assert_int_equal(r1.rev, r2.rev);
        if (seq[i].type == REC_Q_DELIVER && r1.status == AP_OK) {
            assert_int_equal(r1.queue.delivery.id, r2.queue.delivery.id);
        }
        if (i == 2)
            assert_int_equal(r1.status, AP_NOOP); /* a is throttled: nothing */
        if (i == 3)
            assert_int_equal(r1.status, AP_OK);   /* its throttle ended: a change */
    }
    assert_int_equal(snap_digest(c), snap_digest(d));
    core_destroy(d);
    ordo_buf_free(&mem);
    core_destroy(c);
}

/* Schedules ('S'): a core loaded from the snapshot ticks as the one it
 * was taken of: the same record pushes once there and is stale after. */
static void test_schedules_round_trip(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    sched_spec_t spec = {.every_ms = 100, .start_ms = 1000};
    ordo_buf_t val = ORDO_BUF_INIT;
    sched_encode(&spec, "p", 1, &val);
    apply_ok(c, (record_t){.type = REC_Q_SCHEDULE_ADD, .time_ms = 1050,
                           .q_sched = {.queue = "q", .qlen = 1, .name = "s", .nlen = 1, .key = "k", .klen = 1,
                                       .spec = val.data, .slen = (uint32_t)val.len}});
    record_t tick = {.type = REC_Q_TICK, .time_ms = 1101, .q_sched = {.queue = "q", .qlen = 1, .name = "s", .nlen = 1,
                                                                      .tick_ms = 1100}};
    apply_ok(c, tick);
    ordo_buf_t mem = ORDO_BUF_INIT;
    assert_int_equal(snap_encode_mem(c, 5000, &mem), 0);
    core_t *d = core_create(1000);
    uint64_t rev = 0, entries = 0;
    char err[256];
    assert_int_equal(snap_load_mem(d, mem.data, mem.len, "mem", &rev, &entries, err, sizeof err), 0);
    assert_int_equal(snap_digest(c), snap_digest(d));
    sched_view_t v;
    assert_true(sched_get(core_scheds(d), "s", 1, &v));
    assert_int_equal(v.next_ms, 1200);
    assert_int_equal(v.pushed, 1);
    apply_result_t r1, r2;
    core_apply(d, &tick, &r2); /* the tick already applied: stale */
    assert_int_equal(r2.status, AP_NOOP);
    tick.q_sched.tick_ms = 1200;
    tick.time_ms = 1201;
    core_apply(c, &tick, &r1);
    core_apply(d, &tick, &r2);
    assert_int_equal(r1.status, AP_OK);
    assert_int_equal(r1.rev, r2.rev);
    assert_int_equal(r1.queue.id, r2.queue.id);
    queue_len_t l;
    queue_len(queue_get(core_queues(d), "q", 1), &l);
    assert_int_equal(l.waiting, 2);
    assert_int_equal(snap_digest(c), snap_digest(d));
    core_destroy(d);
    core_destroy(c);
    ordo_buf_free(&mem);
    ordo_buf_free(&val);
}

/* FAIRNESS roundrobin ('O'): the turn order is state; a core loaded from
 * the snapshot delivers in the same order as the one it was taken of. */
static void test_ready_order_round_trip(void **state)
{
    (void)state;
    core_t *c = core_create(1000);
    queue_config_t cfg;
    queue_config_defaults(&cfg);
    cfg.fairness = QUEUE_FAIR_ROUNDROBIN;
    char blob[CORE_QCONFIG_BYTES];
    core_qconfig_encode(&cfg, blob);
    apply_ok(c, (record_t){.type = REC_Q_CONFIG, .time_ms = 1,
                           .q_config = {.queue = "q", .qlen = 1, .config = blob, .clen = sizeof blob}});
    const char *keys[] = {"a", "b", "c", "d", "a", "b"};
    for (int i = 0; i < 6; i++)
        apply_ok(c, (record_t){.type = REC_Q_PUSH, .time_ms = 2,
                               .q_push = {.queue = "q", .qlen = 1, .key = keys[i], .klen = 1, .payload = "p",
                                          .plen = 1}});
    record_t pull = {.type = REC_Q_DELIVER, .time_ms = 3, .flags = REC_F_NOACK, .q_deliver = {.queue = "q", .qlen = 1}};
    apply_ok(c, pull); /* a, which goes behind d */
    ordo_buf_t mem = ORDO_BUF_INIT;
    assert_int_equal(snap_encode_mem(c, 5000, &mem), 0);
    core_t *d = core_create(1000);
    uint64_t rev = 0, entries = 0;
    char err[256];
    assert_int_equal(snap_load_mem(d, mem.data, mem.len, "mem", &rev, &entries, err, sizeof err), 0);
    assert_int_equal(snap_digest(c), snap_digest(d));
    const char want[] = "bcdab";
    for (int i = 0; i < 5; i++) {
        apply_result_t r1, r2;
        core_apply(c, &pull, &r1);
        core_apply(d, &pull, &r2);
        assert_int_equal(r1.status, AP_OK);
        assert_int_equal(r2.status, AP_OK);
        assert_int_equal(r1.queue.delivery.key[0], want[i]);
        assert_int_equal(r2.queue.delivery.key[0], want[i]);
    }
    core_destroy(d);
    core_destroy(c);
    ordo_buf_free(&mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_torn_at_every_offset),
        cmocka_unit_test(test_flipped_byte),
        cmocka_unit_test(test_wrong_version),
        cmocka_unit_test(test_previous_format_loads),
        cmocka_unit_test(test_memory_and_digest),
        cmocka_unit_test(test_digest_leaves_out_the_history_window),
        cmocka_unit_test(test_inflight_behind_head_refused),
        cmocka_unit_test(test_pauses_round_trip),
        cmocka_unit_test(test_rate_state_replays_the_same),
        cmocka_unit_test(test_schedules_round_trip),
        cmocka_unit_test(test_ready_order_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
