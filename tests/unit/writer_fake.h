/*
 * writer_fake.h -- a server_t for the writer's unit tests
 * (test_srv_writer*.c), with no network: a real core, a real uv loop and
 * the writer brought up as main.c brings it up (writer_init(), the clock,
 * writer_start()), a FAKE log behind the log seam (log/log.h) and fake
 * hooks (server.h's server_hooks_t).
 *
 * The fake log keeps the type (and, for a REC_TXN, the sub-record count)
 * of every record appended to it, commits at once, and can be told to
 * have failed (log_failed() answers: the next record the door hands to
 * persist is refused) or to refuse the next append (persist_kick() then
 * turns the server read-only).
 *
 * The fake hooks record, in order, every answer (client, outcome, with
 * what the outcome points at copied: it is valid during the call only),
 * park and resume; clients are fake pointers (fix_client(i)), never looked
 * into. One fixture at a time (the park and resume hooks get no server,
 * so they find it in g_fix). Include after <cmocka.h>: failures are cmocka
 * assertions.
 */
#ifndef ORDO_TESTS_WRITER_FAKE_H
#define ORDO_TESTS_WRITER_FAKE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/record.h"
#include "log/log.h"
#include "server.h"
#include "writer/apply.h"
#include "writer/block.h"
#include "writer/outcome.h"
#include "writer/persist.h"
#include "writer/writer.h"

/* What a test's fake log and hooks can hold: far more than any test makes. */
#define FAKE_LOG_RECORDS_MAX 256
#define FIX_EVENTS_MAX 64
#define FIX_CLIENTS_MAX 8
#define FIX_TEXT_MAX 512
/* How long run_until() lets the loop run before the test fails: the
 * deadlines the tests wait for are a few ms; this only keeps a broken
 * writer from hanging the suite. */
#define FIX_RUN_MAX_MS 5000

/* ---- the fake log ------------------------------------------------------------ */

typedef struct fake_log_s {
    log_t base;                            /* first: a log_t * is a fake_log_t * */
    uint8_t types[FAKE_LOG_RECORDS_MAX];   /* the appended records' types, in order */
    uint64_t txn_count[FAKE_LOG_RECORDS_MAX]; /* a REC_TXN's sub-records */
    size_t n;
    uint64_t committed;                    /* the last revision appended */
    const char *failed;                    /* non-NULL: log_failed() says this */
    bool fail_next_append;                 /* the next log_append() fails the log */
} fake_log_t;

static int fake_load_snapshot(log_t *l, core_t *core, uint64_t *rev_out, uint64_t *entries_out, char *err,
                              size_t elen)
{
    (void)l, (void)core, (void)err, (void)elen;
    *rev_out = *entries_out = 0;
    return 0;
}

static int fake_replay(log_t *l, uint64_t after_rev, log_record_fn fn, void *arg, char *err, size_t elen)
{
    (void)l, (void)after_rev, (void)fn, (void)arg, (void)err, (void)elen;
    return 0;
}

static int fake_append(log_t *l, const log_batch_t *b)
{
    fake_log_t *f = (fake_log_t *)l;
    if (f->failed != NULL)
        return -1;
    if (f->fail_next_append) {
        f->fail_next_append = false;
        f->failed = "fake log: the append failed (Input/output error)";
        return -1;
    }
    size_t pos = 0;
    uint64_t rev;
    const void *p;
    size_t len;
    while (log_batch_next(b, &pos, &rev, &p, &len)) {
        record_t rec;
        assert_int_equal(record_decode(p, len, &rec), 0);
        assert_true(f->n < FAKE_LOG_RECORDS_MAX);
        f->types[f->n] = rec.type;
        f->txn_count[f->n] = rec.type == REC_TXN ? rec.txn.count : 0;
        f->n++;
        f->committed = rev;
    }
    return 0;
}

static int fake_flush(log_t *l)
{
    (void)l;
    return 1; /* committed on this thread, at once */
}

static log_pos_t fake_poll(log_t *l) { return (log_pos_t){((fake_log_t *)l)->committed}; }
static uint64_t fake_committed_rev(const log_t *l) { return ((const fake_log_t *)l)->committed; }
/* Positions are revisions here, as in the local log. */
static log_pos_t fake_mark(log_t *l, uint64_t rev)
{
    (void)l;
    return (log_pos_t){rev};
}
static const char *fake_failed(const log_t *l) { return ((const fake_log_t *)l)->failed; }
static bool fake_backlogged(log_t *l)
{
    (void)l;
    return false;
}

static int fake_snapshot_begin(log_t *l, const core_t *core, uint64_t now_ms, log_snapshot_t *out, char *err,
                               size_t elen)
{
    (void)l, (void)core, (void)now_ms, (void)out;
    snprintf(err, elen, "the fake log takes no snapshots");
    return -1;
}

static int fake_snapshot_slice(log_t *l, const core_t *core, size_t max_keys, char *err, size_t elen)
{
    (void)l, (void)core, (void)max_keys;
    snprintf(err, elen, "the fake log takes no snapshots");
    return -1;
}

static int fake_snapshot_commit(log_t *l, char *err, size_t elen)
{
    (void)l;
    snprintf(err, elen, "the fake log takes no snapshots");
    return -1;
}

static void fake_snapshot_end(log_t *l, bool ok, log_snapshot_t *out)
{
    (void)l, (void)ok;
    memset(out, 0, sizeof *out);
}

static void fake_stats(const log_t *l, log_stats_t *out)
{
    (void)l;
    memset(out, 0, sizeof *out);
}

static void fake_close(log_t *l) { (void)l; }

static const log_ops_t fake_log_ops = {
    .load_snapshot = fake_load_snapshot, .replay = fake_replay, .append = fake_append, .flush = fake_flush,
    .poll = fake_poll, .committed_rev = fake_committed_rev, .mark = fake_mark, .failed = fake_failed, .backlogged = fake_backlogged,
    .snapshot_begin = fake_snapshot_begin, .snapshot_slice = fake_snapshot_slice,
    .snapshot_commit = fake_snapshot_commit, .snapshot_end = fake_snapshot_end, .stats = fake_stats,
    .close = fake_close,
};

/* ---- the fake hooks ---------------------------------------------------------- */

/* One answer, with what its outcome pointed at copied. */
typedef struct fix_answer_s {
    struct conn_s *client;
    int kind;                         /* enum outcome_kind */
    uint64_t uint;                    /* OUTCOME_UINT */
    char text[FIX_TEXT_MAX];          /* OUTCOME_ERROR */
    size_t n;                         /* OUTCOME_MESSAGES: how many */
    uint64_t msg_id;                  /* ... the first one's id, key and payload */
    char key[64], payload[64];
    uint64_t fate_id;                 /* OUTCOME_FATE */
    int fate;
    bool has_result;
    char result[64];
    uint64_t term;                    /* OUTCOME_LEADER, OUTCOME_CAMPAIGN */
    char name[64], value[64];         /* OUTCOME_LEADER */
} fix_answer_t;

/* One hook call, in the order they came. */
enum { EV_ANSWER = 1, EV_PARK, EV_RESUME };
typedef struct fix_event_s {
    int what;
    struct conn_s *client;
} fix_event_t;

typedef struct fix_s {
    server_t s;
    uv_loop_t loop;
    fake_log_t log;
    fix_answer_t answers[FIX_EVENTS_MAX];
    size_t nanswers;
    fix_event_t events[FIX_EVENTS_MAX];
    size_t nevents;
    int clients[FIX_CLIENTS_MAX];     /* their addresses are the fake clients */
    waiter_t *parked_as[FIX_CLIENTS_MAX]; /* the waiter a client is parked as, NULL if none */
} fix_t;

static fix_t *g_fix;

static inline struct conn_s *fix_client(fix_t *f, int i) { return (struct conn_s *)(void *)&f->clients[i]; }

static inline int fix_client_index(fix_t *f, struct conn_s *c)
{
    for (int i = 0; i < FIX_CLIENTS_MAX; i++)
        if (c == fix_client(f, i))
            return i;
    fail_msg("a hook was given a client the test never made");
    return -1;
}

static void fix_event(fix_t *f, int what, struct conn_s *c)
{
    assert_true(f->nevents < FIX_EVENTS_MAX);
    f->events[f->nevents++] = (fix_event_t){.what = what, .client = c};
}

static void copy_bytes(char *dst, size_t cap, const char *src, size_t n)
{
    assert_true(n < cap);
    if (n > 0)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

static void hook_answer(server_t *s, struct conn_s *c, const outcome_t *o)
{
    fix_t *f = (fix_t *)(void *)s;
    assert_ptr_equal(f, g_fix);
    fix_client_index(f, c);
    fix_event(f, EV_ANSWER, c);
    assert_true(f->nanswers < FIX_EVENTS_MAX);
    fix_answer_t *a = &f->answers[f->nanswers++];
    memset(a, 0, sizeof *a);
    a->client = c;
    a->kind = o->kind;
    switch (o->kind) {
    case OUTCOME_UINT:
        a->uint = o->uint;
        break;
    case OUTCOME_ERROR:
        snprintf(a->text, sizeof a->text, "%s", o->error.text);
        break;
    case OUTCOME_MESSAGES:
        a->n = o->messages.n;
        if (a->n > 0) {
            a->msg_id = o->messages.v[0].id;
            copy_bytes(a->key, sizeof a->key, o->messages.v[0].key, o->messages.v[0].klen);
            copy_bytes(a->payload, sizeof a->payload, o->messages.v[0].payload, o->messages.v[0].plen);
        }
        break;
    case OUTCOME_FATE:
        a->fate_id = o->fate.id;
        a->fate = o->fate.fate;
        if (o->fate.result != NULL && o->fate.result->fate == QUEUE_FATE_DONE) {
            a->has_result = true;
            copy_bytes(a->result, sizeof a->result, o->fate.result->result, o->fate.result->rlen);
        }
        break;
    case OUTCOME_CAMPAIGN:
        a->term = o->campaign.term;
        break;
    case OUTCOME_LEADER:
        a->term = o->leader.term;
        copy_bytes(a->name, sizeof a->name, o->leader.name, o->leader.nlen);
        copy_bytes(a->value, sizeof a->value, o->leader.value, o->leader.vlen);
        break;
    default:
        break;
    }
}

static void hook_park(struct conn_s *c, waiter_t *w)
{
    fix_t *f = g_fix;
    int i = fix_client_index(f, c);
    assert_null(f->parked_as[i]); /* one blocking command at a time per client, as net.c asserts */
    f->parked_as[i] = w;
    fix_event(f, EV_PARK, c);
}

static void hook_resume(struct conn_s *c)
{
    fix_t *f = g_fix;
    int i = fix_client_index(f, c);
    f->parked_as[i] = NULL;
    fix_event(f, EV_RESUME, c);
}

static void hook_none(server_t *s) { (void)s; }

/* ---- the fixture --------------------------------------------------------------- */

/* fix_new() -- a server as main.c brings it up, with the fake log (or
 * s->log NULL if !with_log) and the fake hooks. Free with fix_free(). */
static inline fix_t *fix_new(bool with_log)
{
    fix_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_null(g_fix);
    g_fix = f;
    server_t *s = &f->s;
    config_defaults(&s->cfg);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    s->loop = &f->loop;
    s->start_ms = server_mono_ms();
    s->core = core_create((uint64_t)s->cfg.history_revs);
    assert_non_null(s->core);
    if (with_log) {
        f->log.base = (log_t){.ops = &fake_log_ops, .record_bytes_max = 1u << 20};
        s->persist.log = &f->log.base;
    }
    s->hooks = (server_hooks_t){.run_resumed = hook_none, .flush = hook_none, .net_cron = hook_none,
                                .cmd_cron = hook_none, .answer = hook_answer, .park = hook_park,
                                .resume = hook_resume, .drop_unsure = hook_none,
                                .drop_unmarked = hook_none};
    writer_init(s);
    server_tick(s);
    server_clock_resume(s, core_last_time_ms(s->core));
    writer_start(s);
    return f;
}

/* fix_free() -- drop the clients still parked (as if they went away),
 * close the writer's handles, let the loop end, free everything. */
static inline void fix_free(fix_t *f)
{
    server_t *s = &f->s;
    while (s->writer.block.all.head != NULL)
        block_cancel(s, ORDO_LIST_ENTRY(s->writer.block.all.head, waiter_t, all_ln));
    writer_close_handles(s);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    writer_destroy(s);
    core_destroy(s->core);
    log_batch_free(&s->persist.batch);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    g_fix = NULL;
    free(f);
}

/* fix_kick() -- the end of a loop turn: this turn's records go to the log. */
static inline void fix_kick(fix_t *f) { persist_kick(&f->s); }

/* run_until() -- run the loop, a turn at a time, until *count reaches
 * want (the deadline a test waits for has passed and been served); fails
 * the test after FIX_RUN_MAX_MS. */
static inline void run_until(fix_t *f, const size_t *count, size_t want)
{
    uint64_t give_up = server_mono_ms() + FIX_RUN_MAX_MS;
    while (*count < want) {
        assert_true(server_mono_ms() < give_up);
        uv_run(&f->loop, UV_RUN_ONCE);
    }
}

/* ---- records -------------------------------------------------------------------- */

static inline record_t rec_put(const char *key, const char *val)
{
    return (record_t){.type = REC_PUT,
                      .put = {.key = key, .klen = (uint32_t)strlen(key), .val = val, .vlen = (uint32_t)strlen(val)}};
}

static inline record_t rec_qpush(const char *queue, const char *key, const char *payload)
{
    return (record_t){.type = REC_Q_PUSH,
                      .q_push = {.queue = queue, .qlen = (uint32_t)strlen(queue), .key = key,
                                 .klen = (uint32_t)strlen(key), .payload = payload,
                                 .plen = (uint32_t)strlen(payload)}};
}

/* submit() -- a record through the door, asserting the verdict; returns
 * the result. */
static inline apply_result_t submit(fix_t *f, record_t rec, int origin, int verdict)
{
    apply_result_t res;
    char why[WRITER_REFUSAL_MAX] = "";
    assert_int_equal(writer_submit(&f->s, &rec, origin, &res, why, sizeof why), verdict);
    return res;
}

/* key_live() -- the key has a live value in the store. */
static inline bool key_live(fix_t *f, const char *key)
{
    const kv_version_t *v = kv_get(core_kv(f->s.core), key, strlen(key), &(kv_version_t){0});
    return v != NULL && !v->deleted;
}

#endif
