/*
 * apply.c -- the one door through which every record (a command's, a
 * timer's, a served waiter's) enters the core: stamp it with the writer's
 * clock, apply it, hand it to the log, then let the waiters it freed be
 * served. Also the memory figure max-memory-bytes bounds. See apply.h.
 */
#include "apply.h"
#include "cluster.h"

#include <assert.h>

#include <string.h>

#include "base/bytes.h"
#include "core/record.h"
#include "coord_wait.h"
#include "persist.h"

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

bool writer_memory_refused(server_t *s, ordo_buf_t *out)
{
    if (s->cfg.max_memory_bytes <= 0)
        return false;
    size_t bytes = writer_data_bytes(s);
    if (bytes <= (size_t)s->cfg.max_memory_bytes)
        return false;
    s->stats.errors_total++;
    resp_add_errorf(out, "LIMIT stored data is %zu bytes, above max-memory-bytes (%lld); "
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
            coord_wait_after_apply(s, &rec);
    }
    core_txn_check_free(&t->check);
    ordo_buf_free(&t->recs);
    return stored;
}

/* A record inside a transaction (apply.h, "Transactions"). */
static bool txn_apply(server_t *s, writer_txn_t *t, record_t *rec, apply_result_t *res)
{
    if (t->mode == WTXN_CHECK) {
        if (!core_check(s->core, &t->check, rec, res) && !t->failed) {
            t->failed = true;
            t->fail_status = res->status;
            t->fail_cur_rev = res->cur_rev;
        }
        return true;
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
    return true;
}

const uint64_t writer_apply_bucket_ns[WRITER_APPLY_BUCKETS] = {1000,   2500,   5000,    10000,  25000,
                                                               100000, 500000, 2500000, 10000000};
_Static_assert(WRITER_APPLY_BUCKETS + 1 <= sizeof ((server_stats_t *)0)->apply_hist / sizeof(uint64_t), "hist");

/* Count one apply of ns nanoseconds (two clock reads per record: tens of
 * ns against the microsecond an apply takes). */
static void count_apply(server_t *s, uint64_t ns)
{
    size_t b = 0;
    while (b < WRITER_APPLY_BUCKETS && ns > writer_apply_bucket_ns[b])
        b++;
    s->stats.applies++;
    s->stats.apply_ns_sum += ns;
    s->stats.apply_hist[b]++;
}

bool writer_apply(server_t *s, record_t *rec, apply_result_t *res)
{
    /* A cluster member that does not lead applies only what raft delivers:
     * a record made here would put its state ahead of the cluster's. Every
     * caller is gated before (cmd_dispatch, the timers); this is the net. */
    if (!cluster_leads(s)) {
        memset(res, 0, sizeof *res);
        res->status = AP_NOOP;
        return false;
    }
    rec->time_ms = s->now_ms;
    if (s->writer.txn != NULL)
        return txn_apply(s, s->writer.txn, rec, res);
    uint64_t t0 = uv_hrtime();
    core_apply(s->core, rec, res);
    count_apply(s, uv_hrtime() - t0);
    /* Only records that changed something are logged: a failed condition
     * leaves no trace, and replay reaches the same state without it. */
    bool stored = true;
    if (res->status == AP_OK && s->persist.log != NULL)
        stored = persist_record(s, rec, core_rev(s->core)) == 0;
    if (stored)
        coord_wait_after_apply(s, rec); /* serve lock waiters and candidates: records of their own */
    return stored;
}
