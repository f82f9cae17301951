/*
 * persist.c -- recovery, the log stream, what the log committed,
 * back-pressure, read-only, snapshots; see persist.h for the contract.
 * Everything it asks of the log goes through the log seam (log/log.h);
 * only persist_open() names the implementation (log_wal_open(): the local
 * WAL; in cluster mode it hands over to writer/cluster.c, which opens the
 * raft log) and fills its options.
 * The log's thread-to-loop wake-up (uv_async) is here: log/ has no libuv.
 *
 * Recovery: the snapshot (if any) is loaded at its revision R, then every
 * log record after R is decoded and applied with the time it carries. A
 * record's revision in the log is the revision the state reached when it
 * was first applied; replay checks it reaches the same one, so a log that
 * does not match its snapshot is refused instead of silently diverging.
 *
 * Snapshots: taken at the store's compaction point (see snapshot.h), with
 * automatic compaction pinned there until the file is in place; written a
 * slice of keys per loop turn from an idle handle (log_snapshot_slice);
 * committed (synced and renamed) on libuv's thread pool; then the log
 * drops the files it covers (log_snapshot_end).
 *
 * The record stream: persist_record() encodes each applied record
 * straight into s->persist.batch; the batch is handed to the log
 * (log_append) after each read of client input (persist_backlogged(), so
 * back-pressure counts it) and at the end of the loop turn (persist_kick(),
 * which then calls log_flush(): the turn's records are one write). A
 * failed log or an oversized record is seen at persist_record() already,
 * so the command that made it learns it was not stored.
 */
#include "persist.h"
#include "server.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "block.h"
#include "cluster.h"
#include "core/record.h"
#include "log/log_wal.h"

/* Keys encoded per loop turn while a snapshot is written: small enough that
 * commands between slices wait well under a millisecond. */
#define SNAP_SLICE_KEYS 2048

/* ---- the test seams -----------------------------------------------------------
 * debug-wal-fault makes the log's Nth write (or sync) and every later one
 * fail with the chosen errno, so integration tests can watch the server
 * stop acknowledging without touching the disk. append-eio:N is the same
 * failure seen from the loop: the Nth record handed to the log is refused
 * at once, as when the log thread failed an instant before (a window the
 * other kinds hit only by chance), so tests can check what a command
 * answers when its own record is refused. debug-wal-stall makes every
 * write and sync wait while a file exists: a disk that stalls for as long
 * as the test wants (back-pressure). Off unless configured. */

/* While the stall file exists, wait, looking again this often. */
#define STALL_POLL_NS 2000000L

enum { FAULT_WRITE, FAULT_SYNC, FAULT_APPEND };

typedef struct fault_s {
    bool armed;         /* debug-wal-fault is set */
    int where;          /* FAULT_*: which call fails */
    int err;
    uint64_t after;     /* calls that succeed first */
    _Atomic uint64_t calls; /* counted by every log thread */
    char stall[sizeof ((ordo_config_t *)0)->debug_wal_stall]; /* "" if none */
} fault_t;

static void stall_wait(const fault_t *f)
{
    if (f->stall[0] == '\0')
        return;
    struct timespec ts = {0, STALL_POLL_NS};
    while (access(f->stall, F_OK) == 0)
        nanosleep(&ts, NULL);
}

static ssize_t fault_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    fault_t *f = ctx;
    stall_wait(f);
    if (f->armed && f->where == FAULT_WRITE && atomic_fetch_add(&f->calls, 1) + 1 > f->after) {
        errno = f->err;
        return -1;
    }
    return pwrite(fd, buf, n, off);
}

static int fault_fdatasync(void *ctx, int fd)
{
    fault_t *f = ctx;
    stall_wait(f);
    if (f->armed && f->where == FAULT_SYNC && atomic_fetch_add(&f->calls, 1) + 1 > f->after) {
        errno = f->err;
        return -1;
    }
    return fdatasync(fd);
}

/* The largest N debug-wal-fault takes: far more calls than any test makes,
 * and small enough that "N - 1 calls succeed" is exact. */
#define FAULT_AFTER_MAX 1000000000000ULL

static int parse_fault(const char *spec, fault_t *f, char *err, size_t elen)
{
    /* KIND:N, N a decimal count from 1 (the Nth call fails): a sign, a
     * zero, an overflow or trailing bytes once made a seam that never
     * fired, silently. */
    const char *colon = strchr(spec, ':');
    const char *digits = colon != NULL ? colon + 1 : NULL;
    size_t klen = colon != NULL ? (size_t)(colon - spec) : 0;
    unsigned long long n = 0;
    if (digits == NULL || *digits == '\0' || strspn(digits, "0123456789") != strlen(digits) || strlen(digits) > 13)
        goto bad;
    n = strtoull(digits, NULL, 10);
    if (n < 1 || n > FAULT_AFTER_MAX)
        goto bad;
    f->armed = true;
    f->after = n - 1;
    if (klen == 9 && strncmp(spec, "write-eio", klen) == 0)
        f->err = EIO;
    else if (klen == 12 && strncmp(spec, "write-enospc", klen) == 0)
        f->err = ENOSPC;
    else if (klen == 8 && strncmp(spec, "sync-eio", klen) == 0) {
        f->err = EIO;
        f->where = FAULT_SYNC;
    } else if (klen == 10 && strncmp(spec, "append-eio", klen) == 0) {
        f->err = EIO;
        f->where = FAULT_APPEND;
    } else
        goto bad;
    return 0;
bad:
    f->armed = false;
    snprintf(err, elen, "debug-wal-fault: expected write-eio:N, write-enospc:N, sync-eio:N or append-eio:N "
             "with N from 1 to %llu, got '%s'", FAULT_AFTER_MAX, spec);
    return -1;
}

/* ---- recovery ----------------------------------------------------------------- */

typedef struct replay_ctx_s {
    server_t *s;
    char *err;
    size_t elen;
    bool old_format_told; /* the one line saying older-format records were read */
} replay_ctx_t;

int persist_apply_stored(server_t *s, uint64_t rev, const void *bytes, size_t len, char *err, size_t elen)
{
    record_t rec;
    if (record_decode(bytes, len, &rec) != 0) {
        snprintf(err, elen, "log record at revision %llu is not a valid record", (unsigned long long)rev);
        return -1;
    }
    apply_result_t res;
    core_apply_stored(s->core, &rec, &res);
    if (core_rev(s->core) != rev) {
        snprintf(err, elen, "log record of revision %llu replays to revision %llu: the log does not follow the snapshot",
                 (unsigned long long)rev, (unsigned long long)core_rev(s->core));
        return -1;
    }
    return 0;
}

static int replay_one(void *arg, uint64_t rev, const void *bytes, size_t len)
{
    replay_ctx_t *x = arg;
    if (record_format(bytes, len) != RECORD_FORMAT && !x->old_format_told) {
        fprintf(stderr, "ordod: the log holds records of an older format (%d, first at revision %llu); they were "
                        "read, and new records are written in format %d\n",
                record_format(bytes, len), (unsigned long long)rev, RECORD_FORMAT);
        x->old_format_told = true;
    }
    if (persist_apply_stored(x->s, rev, bytes, len, x->err, x->elen) != 0)
        return -1;
    x->s->persist.recovered_records++;
    return 0;
}

/* The log's wake-up (log.h hooks.wake): any thread. */
static void on_log_wake(void *arg)
{
    server_t *s = arg;
    uv_async_send(&s->persist.wake); /* thread-safe; coalesces */
}

/* The log failed: refuse writes. Output marked before now waits for its
 * position, and net sends what the log committed and closes the rest at
 * the turn's flush (net_flush()). Output made since a connection's last
 * flush carries no mark yet and may depend on records the log will never
 * hold, and from here on output made cannot be told from it: those
 * connections are closed now, the one moment the line between the two is
 * known. From here on nothing that depends on the unstored revisions is
 * produced (cmd_dispatch refuses such commands), so new output needs no
 * mark (net.c). */
static void enter_readonly(server_t *s, const char *why)
{
    if (s->persist.readonly[0] != '\0')
        return;
    snprintf(s->persist.readonly, sizeof s->persist.readonly, "%s", why);
    fprintf(stderr, "ordod: the log cannot be written, refusing writes (READONLY): %s\n", why);
    s->hooks.drop_unmarked(s);
    block_readonly(s); /* parked clients: -READONLY at the next loop turn */
}

static uint64_t pending_bytes(const server_t *s)
{
    log_stats_t st;
    log_stats(s->persist.log, &st);
    return st.pending_bytes;
}

/* Back-pressure ends: the log caught up (or failed, and holds nothing
 * more). Net reads clients again at the turn's flush (persist_paused()). */
static void backpressure_end(server_t *s)
{
    s->persist.paused = false;
    s->persist.backpressure_ms += server_mono_ms() - s->persist.backpressure_since_ms;
    if (s->cfg.verbose)
        fprintf(stderr, "ordod: the log caught up (%llu bytes pending): reading clients again\n",
                (unsigned long long)pending_bytes(s));
}

/* On the loop, after the log's wake-up (or a batch committed inline):
 * record the committed position and revision, and whether the log failed
 * or caught up. Nothing is sent from here: the turn's flush, which runs
 * after this in the same loop iteration (the wake-up is a uv_async, run
 * in the poll phase; the flush hook is the check phase's, which follows
 * it), releases what the new position allows. Returns true if anything
 * changed for output (the position moved, or the log failed). */
static bool log_progress(server_t *s)
{
    const char *failed = log_failed(s->persist.log);
    log_pos_t before = s->persist.committed;
    s->persist.committed = log_poll(s->persist.log);
    /* Where positions are revisions, the committed position is the
     * committed revision too. */
    s->persist.committed_rev = s->persist.log->marks_are_revs ? s->persist.committed.v
                                                              : log_committed_rev(s->persist.log);
    assert(!log_pos_before(s->persist.committed, before)); /* positions only grow */
    if (failed != NULL) {
        enter_readonly(s, failed);
        if (s->persist.paused)
            backpressure_end(s);
        return true;
    }
    if (s->persist.paused && !log_backlogged(s->persist.log))
        backpressure_end(s);
    if (!log_pos_before(before, s->persist.committed))
        return false;
    s->persist.commits++;
    return true;
}

static void on_durable_async(uv_async_t *h) { log_progress(h->data); }

/* Hand the records made since the last hand-over to the log. */
static void hand_over(server_t *s)
{
    if (s->persist.batch.records == 0)
        return;
    int rc = log_append(s->persist.log, &s->persist.batch);
    log_batch_clear(&s->persist.batch);
    if (rc < 0) {
        const char *why = log_failed(s->persist.log);
        enter_readonly(s, why != NULL ? why : "the log refused a batch");
    }
}

bool persist_backlogged(server_t *s)
{
    if (s->persist.paused)
        return true;
    if (s->persist.log == NULL)
        return false;
    /* What this read made counts against the limit: the log must hold it
     * to say (and to wake the loop once it no longer is backlogged). */
    hand_over(s);
    if (!log_backlogged(s->persist.log))
        return false;
    s->persist.paused = true;
    s->persist.backpressure_events++;
    s->persist.backpressure_since_ms = server_mono_ms();
    if (s->cfg.verbose)
        fprintf(stderr, "ordod: %llu bytes of log records wait for the disk (wal-pending-max-bytes): "
                "not reading clients until it catches up\n", (unsigned long long)pending_bytes(s));
    return true;
}

/* The test seams (see above) go between the WAL and the disk. */
static int fault_setup(server_t *s, wal_io_t *io, char *err, size_t elen)
{
    if (s->cfg.debug_wal_fault[0] == '\0' && s->cfg.debug_wal_stall[0] == '\0')
        return 0;
    fault_t *fault = ordo_xcalloc(1, sizeof *fault); /* freed by persist_close */
    s->persist.fault = fault;
    if (s->cfg.debug_wal_fault[0] != '\0' && parse_fault(s->cfg.debug_wal_fault, fault, err, elen) != 0)
        return -1;
    snprintf(fault->stall, sizeof fault->stall, "%s", s->cfg.debug_wal_stall);
    io->pwrite_fn = fault_pwrite;
    io->fdatasync_fn = fault_fdatasync;
    io->ctx = fault;
    if (fault->armed)
        fprintf(stderr, "ordod: debug-wal-fault %s is on: the log will fail on purpose\n", s->cfg.debug_wal_fault);
    if (fault->stall[0] != '\0')
        fprintf(stderr, "ordod: debug-wal-stall is on: the log waits while %s exists\n", fault->stall);
    return 0;
}

uint32_t persist_record_bytes_max(const server_t *s)
{
    /* At most 84 + 3 x 64 MiB + 512 MiB (config.c's ranges): below the
     * WAL's 1 GiB limit, and a uint32_t. */
    uint64_t command = RECORD_HEADER_BYTES + 3 * (uint64_t)s->cfg.max_name_bytes + (uint64_t)s->cfg.max_value_bytes;
    uint64_t txn = RECORD_HEADER_BYTES + (uint64_t)s->cfg.max_multi_bytes;
    return (uint32_t)(command > txn ? command : txn);
}

int persist_open(server_t *s, char *err, size_t elen)
{
    if (cluster_enabled(s)) {
        if (s->cfg.debug_wal_fault[0] != '\0' || s->cfg.debug_wal_stall[0] != '\0') {
            snprintf(err, elen, "debug-wal-fault and debug-wal-stall test the local log, not cluster mode");
            return -1;
        }
        log_hooks_t wake = {.wake = on_log_wake, .arg = s};
        return cluster_open(s, &wake, err, elen);
    }
    log_wal_options_t opt = {
        .dir = s->cfg.dir,
        .wal = {
            .policy = s->cfg.fsync == FSYNC_ALWAYS ? WAL_SYNC_ALWAYS
                      : s->cfg.fsync == FSYNC_EVERYSEC ? WAL_SYNC_EVERYSEC : WAL_SYNC_NO,
            .segment_bytes = (uint64_t)s->cfg.wal_segment_bytes,
            .sync_batch_max = (uint32_t)s->cfg.fsync_batch_max,
            .sync_interval_ms = (uint32_t)s->cfg.fsync_interval_ms,
            .record_bytes_max = persist_record_bytes_max(s),
            .pending_bytes_max = (uint64_t)s->cfg.wal_pending_max_bytes,
            .repair = s->cfg.wal_repair != 0,
            .sync_inline_max = (uint32_t)s->cfg.fsync_inline_max,
            .sync_gather_max_us = (uint32_t)s->cfg.fsync_gather_max_us,
            .sync_parallel = (uint32_t)s->cfg.fsync_parallel,
        },
    };
    if (fault_setup(s, &opt.wal.io, err, elen) != 0)
        return -1;
    log_hooks_t hooks = {.wake = on_log_wake, .deliver = NULL, .arg = s};
    s->persist.log = log_wal_open(&opt, &hooks, err, elen);
    return s->persist.log != NULL ? 0 : -1;
}

int persist_recover(server_t *s, char *err, size_t elen)
{
    uint64_t t0 = server_mono_ms(), snap_rev = 0, entries = 0;
    uv_async_init(s->loop, &s->persist.wake, on_durable_async);
    s->persist.wake.data = s;
    uv_idle_init(s->loop, &s->persist.snap.idle);
    s->persist.snap.idle.data = s;
    if (cluster_enabled(s)) {
        /* Raft restores its snapshot now; committed entries follow as the
         * leader reports them (writer/cluster.c). */
        if (cluster_start(s, err, elen) != 0)
            goto fail;
        s->persist.committed = log_poll(s->persist.log);
        s->persist.committed_rev = log_committed_rev(s->persist.log);
        s->persist.recovery_ms = server_mono_ms() - t0;
        fprintf(stderr, "ordod: cluster member %lld started at revision %llu\n", (long long)s->cfg.node_id,
                (unsigned long long)core_rev(s->core));
        return 0;
    }
    if (log_load_snapshot(s->persist.log, s->core, &snap_rev, &entries, err, elen) != 0)
        goto fail;
    s->persist.snapshot_loaded_rev = snap_rev;
    replay_ctx_t x = {.s = s, .err = err, .elen = elen};
    core_replay_begin(s->core);
    int rc = log_replay(s->persist.log, snap_rev, replay_one, &x, err, elen);
    core_replay_end(s->core);
    if (rc != 0)
        goto fail;
    /* Everything replayed is committed; the WAL's positions are revisions. */
    s->persist.committed = LOG_POS(core_rev(s->core));
    s->persist.committed_rev = core_rev(s->core);
    s->persist.recovery_ms = server_mono_ms() - t0;
    fprintf(stderr, "ordod: recovered to revision %llu (%llu log records) in %llu ms\n",
            (unsigned long long)core_rev(s->core), (unsigned long long)s->persist.recovered_records,
            (unsigned long long)s->persist.recovery_ms);
    return 0;
fail:
    persist_close_handles(s);
    return -1;
}

int persist_record(server_t *s, const record_t *rec, uint64_t rev)
{
    fault_t *f = s->persist.fault;
    if (f != NULL && f->armed && f->where == FAULT_APPEND && atomic_fetch_add(&f->calls, 1) + 1 > f->after) {
        enter_readonly(s, "debug-wal-fault: the log refused a record (Input/output error)");
        return -1;
    }
    const char *failed = log_failed(s->persist.log);
    if (failed != NULL) {
        enter_readonly(s, failed);
        return -1;
    }
    size_t at = log_batch_begin(&s->persist.batch, rev);
    record_encode(rec, &s->persist.batch.buf);
    if (s->persist.batch.buf.len - at - LOG_ENTRY_HEADER_BYTES > s->persist.log->record_bytes_max) {
        log_batch_cancel(&s->persist.batch, at);
        enter_readonly(s, "record larger than the log accepts");
        return -1;
    }
    log_batch_end(&s->persist.batch, at);
    /* Under every policy replies wait for the log to commit the record:
     * after its fdatasync under always, after its write (to the kernel)
     * under everysec and no, so a crash of the process loses nothing
     * acknowledged under any policy. */
    return 0;
}

bool persist_kick(server_t *s)
{
    if (s->persist.log == NULL)
        return false;
    hand_over(s);
    /* A batch the log committed on this thread: no wake-up comes for it,
     * so its position is recorded now, and the caller flushes again. */
    return log_flush(s->persist.log) > 0 && log_progress(s);
}

/* ---- snapshots ------------------------------------------------------------------ */

static void snap_done(server_t *s, int ok)
{
    uv_idle_stop(&s->persist.snap.idle);
    core_set_compact_pin(s->core, 0);
    s->persist.snap.running = false;
    log_snapshot_t done;
    log_snapshot_end(s->persist.log, ok, &done);
    if (!ok) {
        fprintf(stderr, "ordod: snapshot at revision %llu failed: %s\n", (unsigned long long)s->persist.snap.rev,
                s->persist.snap.err);
        s->persist.snap.failed++;
        snprintf(s->persist.snap.last_error, sizeof s->persist.snap.last_error, "%s",
                 s->persist.snap.err[0] ? s->persist.snap.err : "unknown");
        return;
    }
    s->persist.snap.last_error[0] = '\0';
    s->persist.snap.last_rev = done.rev;
    s->persist.snap.last_ms = server_now_ms();
    s->persist.snap.taken++;
    if (s->cfg.verbose)
        fprintf(stderr, "ordod: snapshot at revision %llu written (%llu keys); %d log files removed\n",
                (unsigned long long)done.rev, (unsigned long long)done.entries, done.log_files_removed);
}

static void snap_commit_work(uv_work_t *req)
{
    server_t *s = req->data;
    s->persist.snap.result = log_snapshot_commit(s->persist.log, s->persist.snap.err, sizeof s->persist.snap.err);
}

static void snap_commit_after(uv_work_t *req, int status)
{
    server_t *s = req->data;
    snap_done(s, status == 0 && s->persist.snap.result == 0);
}

static void snap_step(uv_idle_t *h)
{
    server_t *s = h->data;
    int rc = log_snapshot_slice(s->persist.log, s->core, SNAP_SLICE_KEYS, s->persist.snap.err,
                                sizeof s->persist.snap.err);
    if (rc == 0)
        return;
    uv_idle_stop(&s->persist.snap.idle);
    if (rc < 0) {
        snap_done(s, 0);
        return;
    }
    s->persist.snap.work.data = s;
    uv_queue_work(s->loop, &s->persist.snap.work, snap_commit_work, snap_commit_after);
}

int64_t persist_snapshot(server_t *s, char *err, size_t elen)
{
    if (s->persist.snap.running)
        return (int64_t)s->persist.snap.rev;
    uint64_t rev = core_rev(s->core);
    if (rev == 0 || rev <= s->persist.snap.last_rev)
        return 0;
    log_snapshot_t snap;
    if (log_snapshot_begin(s->persist.log, s->core, s->now_ms, &snap, err, elen) != 0)
        return -1;
    /* The history the snapshot is copying must stay until it is copied. */
    core_set_compact_pin(s->core, snap.point);
    s->persist.snap.rev = snap.rev;
    s->persist.snap.running = true;
    uv_idle_start(&s->persist.snap.idle, snap_step);
    return (int64_t)rev;
}

void persist_cron(server_t *s)
{
    if (s->persist.snap.running || s->persist.log == NULL || s->persist.readonly[0] != '\0')
        return;
    log_stats_t st;
    log_stats(s->persist.log, &st);
    /* In cluster mode the raft log says when (cluster-snapshot-entries). */
    if (cluster_enabled(s) ? !st.snapshot_wanted : st.bytes < (uint64_t)s->cfg.snapshot_log_bytes)
        return;
    char err[256];
    if (persist_snapshot(s, err, sizeof err) < 0)
        fprintf(stderr, "ordod: cannot start a snapshot: %s\n", err);
}

void persist_info(server_t *s, ordo_buf_t *b)
{
    log_stats_t st;
    memset(&st, 0, sizeof st);
    if (s->persist.log != NULL)
        log_stats(s->persist.log, &st);
    ordo_buf_printf(b,
                    "# Persistence\r\nfsync:%s\r\ndurable_revision:%llu\r\nreadonly:%s\r\nreadonly_reason:%s\r\n"
                    "wal_bytes:%llu\r\nwal_segments:%u\r\nwal_records_written:%llu\r\nwal_batches:%llu\r\n"
                    "wal_syncs:%llu\r\nwal_sync_us_sum:%llu\r\nwal_syncs_overlapped:%llu\r\nwal_batches_inline:%llu\r\nsnapshot_in_progress:%d\r\nlast_snapshot_revision:%llu\r\n"
                    "snapshots_taken:%llu\r\nrecovered_records:%llu\r\nrecovery_ms:%llu\r\n"
                    "snapshot_loaded_revision:%llu\r\nwal_pending_bytes:%llu\r\nwal_pending_bytes_peak:%llu\r\n"
                    "wal_pending_max_bytes:%llu\r\nwal_backpressure:%d\r\nwal_backpressure_events:%llu\r\n"
                    "wal_backpressure_ms:%llu\r\nsnapshots_failed:%llu\r\nlast_snapshot_status:%s\r\n"
                    "last_snapshot_error:%s\r\n\r\n",
                    s->cfg.fsync == FSYNC_ALWAYS ? "always" : s->cfg.fsync == FSYNC_EVERYSEC ? "everysec" : "no",
                    (unsigned long long)persist_durable_rev(s), s->persist.readonly[0] ? "yes" : "no", s->persist.readonly,
                    (unsigned long long)st.bytes, st.files,
                    (unsigned long long)st.records_written, (unsigned long long)st.batches,
                    (unsigned long long)st.syncs, (unsigned long long)st.sync_us_sum, (unsigned long long)st.syncs_overlapped, (unsigned long long)st.inline_batches, s->persist.snap.running ? 1 : 0, (unsigned long long)s->persist.snap.last_rev,
                    (unsigned long long)s->persist.snap.taken, (unsigned long long)s->persist.recovered_records,
                    (unsigned long long)s->persist.recovery_ms, (unsigned long long)s->persist.snapshot_loaded_rev,
                    (unsigned long long)st.pending_bytes, (unsigned long long)st.pending_bytes_peak,
                    (unsigned long long)s->cfg.wal_pending_max_bytes, s->persist.paused ? 1 : 0,
                    (unsigned long long)s->persist.backpressure_events,
                    (unsigned long long)(s->persist.backpressure_ms +
                                         (s->persist.paused ? server_mono_ms() - s->persist.backpressure_since_ms : 0)),
                    (unsigned long long)s->persist.snap.failed, s->persist.snap.last_error[0] ? "failed" : "ok", s->persist.snap.last_error);
}

void persist_close_handles(server_t *s)
{
    if (cluster_enabled(s))
        cluster_stop(s);
    uv_idle_stop(&s->persist.snap.idle);
    uv_close((uv_handle_t *)&s->persist.snap.idle, NULL);
    uv_close((uv_handle_t *)&s->persist.wake, NULL);
}

void persist_close(server_t *s)
{
    if (s->persist.snap.running) {
        core_set_compact_pin(s->core, 0);
        s->persist.snap.running = false;
        /* A commit on the thread pool finishes before uv_run returns. */
    }
    if (s->persist.log != NULL) {
        /* Records of the last turn (made while closing) join the log, which
         * commits them before it closes, as before the seam. */
        if (s->persist.readonly[0] == '\0')
            hand_over(s);
        log_close(s->persist.log);
    }
    s->persist.log = NULL;
    log_batch_free(&s->persist.batch);
    free(s->persist.fault);
    s->persist.fault = NULL;
}
