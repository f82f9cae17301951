/*
 * apply.c -- the one door through which every record (a command's, a
 * timer's, a served waiter's) enters the core: check, stamp, apply, hand
 * to the log, then the family's after-apply step from one table. Also the
 * memory figure max-memory-bytes bounds. See apply.h.
 */
#include "apply.h"
#include "cluster.h"

#include <assert.h>

#include <stdio.h>
#include <string.h>

#include "base/bytes.h"
#include "core/record.h"
#include "coord_wait.h"
#include "expire.h"
#include "persist.h"
#include "queue_wait.h"

log_pos_t writer_output_mark(server_t *s)
{
    uint64_t rev = core_rev(s->core);
    return s->persist.log != NULL ? log_mark(s->persist.log, rev) : LOG_POS(rev);
}

size_t writer_data_bytes(const server_t *s)
{
    kv_stats_t st;
    kv_stats(core_kv(s->core), &st);
    return st.bytes + queue_set_bytes(core_queues(s->core)) + coord_wait_bytes(s);
}

bool writer_memory_refused(server_t *s, char *buf, size_t blen)
{
    if (s->cfg.max_memory_bytes <= 0)
        return false;
    size_t bytes = writer_data_bytes(s);
    if (bytes <= (size_t)s->cfg.max_memory_bytes)
        return false;
    snprintf(buf, blen,
             "LIMIT stored data is %zu bytes, above max-memory-bytes (%lld); "
             "delete, compact, consume queued messages or release leases, locks and "
             "leaderships to write again",
             bytes, (long long)s->cfg.max_memory_bytes);
    return true;
}

void writer_txn_begin(server_t *s, writer_txn_t *t, int mode)
{
    assert(s->writer.txn == NULL);
    memset(t, 0, sizeof *t);
    t->mode = mode;
    if (mode == WTXN_CHECK)
        core_txn_check_init(s->core, &t->check);
    s->writer.txn = t;
}

bool writer_txn_end(server_t *s, writer_txn_t *t)
{
    assert(s->writer.txn == t);
    s->writer.txn = NULL;
    bool stored = true;
    if (t->mode == WTXN_APPLY && t->count > 0) {
        record_t rec = {.type = REC_TXN, .time_ms = s->now_ms,
                        .txn = {.count = t->count, .recs = t->recs.data, .len = (uint32_t)t->recs.len}};
        if (s->persist.log != NULL)
            stored = persist_record(s, &rec, core_rev(s->core)) == 0;
        if (stored)
            coord_wait_after_apply(s, true);
    }
    core_txn_check_free(&t->check);
    ordo_buf_free(&t->recs);
    return stored;
}

/* A record inside a transaction (apply.h, "Transactions"). */
static void txn_apply(server_t *s, writer_txn_t *t, record_t *rec, apply_result_t *res)
{
    if (t->mode == WTXN_SYNTAX) {
        memset(res, 0, sizeof *res);
        res->status = AP_NOOP;
        t->count++;
        return;
    }
    if (t->mode == WTXN_CHECK) {
        if (!core_check(s->core, &t->check, rec, res) && !t->failed) {
            t->failed = true;
            t->fail_status = res->status;
            t->fail_cur_rev = res->cur_rev;
        }
        return;
    }
    core_apply(s->core, rec, res);
    if (res->status == AP_OK) {
        size_t at = t->recs.len;
        ordo_buf_reserve(&t->recs, 4);
        t->recs.len += 4;
        record_encode(rec, &t->recs);
        put_u32(t->recs.data + at, (uint32_t)(t->recs.len - at - 4));
        t->count++;
    }
}

const uint64_t writer_apply_bucket_ns[WRITER_APPLY_BUCKETS] = {1000,   2500,   5000,    10000,  25000,
                                                               100000, 500000, 2500000, 10000000};
_Static_assert(WRITER_APPLY_BUCKETS + 1 <= sizeof ((server_stats_t *)0)->apply_hist / sizeof(uint64_t), "hist");

/* Count one apply of ns nanoseconds (two clock reads per record: tens of
 * ns against the microsecond an apply takes). The bucket by halving the
 * bounds: four comparisons for nine bounds, where a scan takes one to nine. */
static void count_apply(server_t *s, uint64_t ns)
{
    size_t lo = 0, hi = WRITER_APPLY_BUCKETS; /* the bucket is the first bound >= ns, in [lo, hi] */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ns > writer_apply_bucket_ns[mid])
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t b = lo;
    s->stats.applies++;
    s->stats.apply_ns_sum += ns;
    s->stats.apply_hist[b]++;
}

/* Can the record make the stored data larger? Deletions, releases and
 * keepalives are allowed past max-memory-bytes: they are how to get back. */
static bool grows(const server_t *s, const record_t *rec)
{
    switch (rec->type) {
    case REC_Q_CONFIG: /* creating a queue grows; changing one (a shorter RESULTTTL...) must work */
        return queue_get(core_queues(s->core), rec->q_config.queue, rec->q_config.qlen) == NULL;
    case REC_Q_PAUSE: /* a pause holds a little memory (and may create its queue); a resume frees */
        return rec->q_pause.op == Q_PAUSE_KEY || rec->q_pause.op == Q_PAUSE_QUEUE;
    case REC_DEL: case REC_COMPACT: case REC_LEASE_KEEPALIVE: case REC_LEASE_REVOKE: case REC_LOCK_RELEASE:
    case REC_LOCK_EXTEND: case REC_ELECT_KEEPALIVE: case REC_ELECT_RESIGN:
    case REC_KEY_TTL: /* EXPIRE is a way to free memory */
    case REC_FLUSH:
    case REC_ACL_DELUSER:
        return false;
    default:
        /* Queue records other than pushes free memory or move bookkeeping:
         * an ack must work when the store is full. */
        return record_family(rec->type) != REC_FAM_QUEUE || rec->type == REC_Q_PUSH;
    }
}

/* ---- after apply: one step per family ------------------------------------------ */

/* KV: a key given a deadline may be the next to expire. */
static void after_kv(server_t *s, const record_t *rec, const apply_result_t *res)
{
    if (res->status != AP_OK)
        return;
    if ((rec->type == REC_PUT && rec->put.expire_at_ms != 0) ||
        (rec->type == REC_KEY_TTL && rec->key_ttl.expire_at_ms != 0))
        expire_schedule(s);
}

static void after_queue(server_t *s, const record_t *rec, const apply_result_t *res)
{
    if (res->status == AP_OK)
        qwait_after_apply(s, rec, res);
}

static void after_none(server_t *s, const record_t *rec, const apply_result_t *res)
{
    (void)s;
    (void)rec;
    (void)res;
}

typedef void (*after_fn)(server_t *s, const record_t *rec, const apply_result_t *res);

/* By enum record_family; every family's record is followed by the
 * coordination step too (coord_wait_after_apply(): it serves what a
 * record freed and re-arms the coordination timer). */
static const after_fn after_apply[] = {
    [REC_FAM_NONE] = after_none, [REC_FAM_KV] = after_kv, [REC_FAM_COORD] = after_none,
    [REC_FAM_QUEUE] = after_queue, [REC_FAM_TXN] = after_none, [REC_FAM_ACL] = after_none,
};

/* Run the family's step of the table; returns the family. */
static int family_step(server_t *s, const record_t *rec, const apply_result_t *res)
{
    int fam = record_family(rec->type);
    assert(fam >= 0 && (size_t)fam < sizeof after_apply / sizeof after_apply[0]);
    after_apply[fam](s, rec, res);
    return fam;
}

static void run_after(server_t *s, const record_t *rec, const apply_result_t *res)
{
    int fam = family_step(s, rec, res);
    /* Serve lock waiters and candidates (records of their own); a KV
     * record moves no coordination deadline, so unless it freed a lock
     * (a key's lease...) it has nothing to do there. */
    if (fam != REC_FAM_KV || s->writer.coord_pending)
        coord_wait_after_apply(s, fam != REC_FAM_KV);
}

void writer_settle_marked(server_t *s) { qwait_settle(s); }

/* ---- the door ------------------------------------------------------------------ */

static int refuse(int verdict, apply_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->status = AP_NOOP;
    return verdict;
}

/* The refusals' texts: a caller that passes no buffer wants none. */
static void say_leader(server_t *s, char *why, size_t wlen)
{
    char leader[256];
    if (why != NULL)
        snprintf(why, wlen, "NOTLEADER %s", cluster_leader(s, leader, sizeof leader));
}

static void say_readonly(server_t *s, char *why, size_t wlen)
{
    if (why != NULL)
        snprintf(why, wlen, "READONLY the log cannot be written, so writes are refused: %s",
                 server_readonly(s) != NULL ? server_readonly(s) : "the log refused the record");
}

/* A client's record that grows the data past max-memory-bytes (set: the
 * door asks only then). Inside EXEC's apply pass the limit was judged by
 * its check pass, before anything applied: judging it again half-way would
 * split the transaction. */
static bool memory_refused(server_t *s, const record_t *rec, char *why, size_t wlen)
{
    if ((s->writer.txn != NULL && s->writer.txn->mode == WTXN_APPLY) || !grows(s, rec))
        return false;
    char none[WRITER_REFUSAL_MAX];
    return writer_memory_refused(s, why != NULL ? why : none, why != NULL ? wlen : sizeof none);
}

int writer_submit(server_t *s, record_t *rec, int origin, apply_result_t *res, char *why, size_t wlen)
{
    /* A cluster member that does not lead applies only what raft delivers:
     * a record made here would put its state ahead of the cluster's. */
    if (!cluster_leads(s)) {
        say_leader(s, why, wlen);
        return refuse(WRITER_NOTLEADER, res);
    }
    if (server_readonly(s) != NULL) {
        say_readonly(s, why, wlen);
        return refuse(WRITER_READONLY, res);
    }
    if (origin == WRITER_CLIENT && s->cfg.max_memory_bytes > 0 && memory_refused(s, rec, why, wlen))
        return refuse(WRITER_MEMORY, res);
    rec->time_ms = s->now_ms;
    if (s->writer.txn != NULL) {
        txn_apply(s, s->writer.txn, rec, res);
        if (s->writer.txn->mode == WTXN_APPLY && res->status == AP_OK)
            family_step(s, rec, res); /* coordination waits for the transaction's end */
        return WRITER_APPLIED;
    }
    uint64_t t0 = uv_hrtime();
    core_apply(s->core, rec, res);
    count_apply(s, uv_hrtime() - t0);
    /* Only records that changed something are logged: a failed condition
     * leaves no trace, and replay reaches the same state without it. */
    if (res->status == AP_OK && s->persist.log != NULL && persist_record(s, rec, core_rev(s->core)) != 0) {
        say_readonly(s, why, wlen);
        return WRITER_UNSTORED; /* applied in memory only: never acknowledged, nobody served */
    }
    run_after(s, rec, res);
    return WRITER_APPLIED;
}
