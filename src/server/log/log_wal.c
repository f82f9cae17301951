/*
 * log_wal.c -- the log seam (log.h) over the write-ahead log (wal.c) and
 * the snapshot file (snapshot.c): the local log of a single ordod.
 *
 * Owns: the lock on the data directory (an open fd with flock, held from
 * log_wal_open() to log_close()), the wal_t once replay has opened it, and
 * the snapshot being written. Invariants: wal is NULL until log_replay()
 * succeeded, and after it never again (until then flushing and polling do
 * nothing and appending fails: a start-up that failed may still run the
 * writer's per-turn hook once while it closes); at most one snapshot is written at
 * a time (snap_on), and the log files it covers are removed only after
 * its commit returned.
 *
 * Committed = published durable by the WAL under its policy; the writer
 * applies at propose and makes every record, so nothing is delivered.
 * Appending a batch is one wal_append_frames() (its entries are already
 * WAL frames with the checksum still zero: one memcpy under the WAL's
 * mutex for the lot; the WAL runs with defer_wake, so nothing is written
 * yet); log_flush() is wal_kick(), which may write the
 * records on the calling thread (sync_inline_max): it then returns 1.
 */
#include "log_wal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/snapshot.h"

typedef struct log_wal_s {
    log_t base;                   /* first: a log_t * is a log_wal_t * */
    wal_options_t opt;
    char dir[1024];               /* the data directory */
    char waldir[1100];            /* <dir>/wal */
    int dir_fd;                   /* open and flocked while the log lives */
    wal_t *wal;                   /* NULL until log_replay() */
    snap_writer_t snap;
    bool snap_on;                 /* snap is being written */
} log_wal_t;

static const log_ops_t log_wal_ops;

static log_wal_t *lw_of(log_t *l)
{
    assert(l->ops == &log_wal_ops);
    return (log_wal_t *)l;
}

static const log_wal_t *lw_of_c(const log_t *l)
{
    assert(l->ops == &log_wal_ops);
    return (const log_wal_t *)l;
}

/* ---- recovery --------------------------------------------------------------- */

static int lw_load_snapshot(log_t *l, core_t *core, uint64_t *rev_out, uint64_t *entries_out, char *err,
                            size_t elen)
{
    log_wal_t *lw = lw_of(l);
    if (snap_load(core, lw->dir, rev_out, entries_out, err, elen) != 0)
        return -1;
    if (*rev_out != 0)
        fprintf(stderr, "ordod: loaded snapshot at revision %llu (%llu entries)\n", (unsigned long long)*rev_out,
                (unsigned long long)*entries_out);
    return 0;
}

static void report_recovery(const wal_recovery_t *rec)
{
    if (rec->repaired)
        fprintf(stderr, "ordod: wal-repair: the log was corrupt (%s); cut %s at byte offset %llu, %llu bytes in "
                "all (%u later log files), kept in %s%s; the log now ends at revision %llu\n",
                rec->repair_reason, rec->repair_file, (unsigned long long)rec->repair_at,
                (unsigned long long)rec->repair_bytes, rec->repair_segments_moved, rec->repair_saved,
                rec->repair_segments_moved ? " and <name>.cut" : "", (unsigned long long)rec->repair_last_rev);
    if (rec->truncated_bytes > 0)
        fprintf(stderr, "ordod: cut a torn tail of %llu bytes from %s at offset %llu\n",
                (unsigned long long)rec->truncated_bytes, rec->truncated_file,
                (unsigned long long)rec->truncated_at);
}

static int lw_replay(log_t *l, uint64_t after_rev, log_record_fn fn, void *arg, char *err, size_t elen)
{
    log_wal_t *lw = lw_of(l);
    if (lw->wal != NULL) {
        snprintf(err, elen, "log: replayed twice");
        return -1;
    }
    wal_recovery_t rec;
    memset(&rec, 0, sizeof rec);
    lw->wal = wal_open(&lw->opt, after_rev, fn, arg, &rec, err, elen);
    if (lw->wal == NULL) {
        size_t n = strlen(err);
        if (!lw->opt.repair && strncmp(err, "wal corrupt", 11) == 0 && n + 1 < elen)
            snprintf(err + n, elen - n, "; keep a copy of %s, then start with --wal-repair yes to cut the log "
                     "at the first bad record (the cut bytes are kept aside) and lose what follows it", lw->dir);
        return -1;
    }
    report_recovery(&rec);
    return 0;
}

/* ---- the record stream --------------------------------------------------------- */

static int lw_append(log_t *l, const log_batch_t *b)
{
    log_wal_t *lw = lw_of(l);
    if (lw->wal == NULL)
        return -1; /* not recovered: nothing may be appended yet */
    if (b->records == 0)
        return 0;
    /* The batch's entries are WAL frames with a zero checksum (log.h). */
    _Static_assert(LOG_ENTRY_HEADER_BYTES == WAL_FRAME_BYTES, "a batch entry is a WAL frame");
    return wal_append_frames(lw->wal, b->buf.data, b->buf.len, b->records, b->last_rev);
}

static int lw_flush(log_t *l)
{
    log_wal_t *lw = lw_of(l);
    return lw->wal != NULL && wal_kick(lw->wal) > 0 ? 1 : 0;
}

/* A position of the WAL is the revision of its record: committed means
 * durable (log.h). */
static uint64_t lw_committed_rev(const log_t *l)
{
    const log_wal_t *lw = lw_of_c(l);
    return lw->wal != NULL ? wal_durable_rev(lw->wal) : 0;
}

static log_pos_t lw_poll(log_t *l) { return LOG_POS(lw_committed_rev(l)); }

static log_pos_t lw_mark(log_t *l, uint64_t rev)
{
    (void)l;
    return LOG_POS(rev);
}

static const char *lw_failed(const log_t *l)
{
    const log_wal_t *lw = lw_of_c(l);
    return lw->wal != NULL ? wal_failed(lw->wal) : NULL;
}

static bool lw_backlogged(log_t *l)
{
    log_wal_t *lw = lw_of(l);
    return lw->wal != NULL && wal_backlogged(lw->wal);
}

/* ---- snapshots ------------------------------------------------------------------ */

static int lw_snapshot_begin(log_t *l, const core_t *core, uint64_t now_ms, log_snapshot_t *out, char *err,
                             size_t elen)
{
    log_wal_t *lw = lw_of(l);
    if (lw->snap_on) {
        snprintf(err, elen, "a snapshot is being written already");
        return -1;
    }
    if (snap_writer_begin(&lw->snap, lw->dir, core, now_ms, err, elen) != 0)
        return -1;
    lw->snap_on = true;
    memset(out, 0, sizeof *out);
    out->rev = lw->snap.rev;
    out->point = lw->snap.point;
    return 0;
}

static int lw_snapshot_slice(log_t *l, const core_t *core, size_t max_keys, char *err, size_t elen)
{
    return snap_writer_step(&lw_of(l)->snap, core, max_keys, err, elen);
}

static int lw_snapshot_commit(log_t *l, char *err, size_t elen)
{
    return snap_writer_commit(&lw_of(l)->snap, err, elen);
}

static void lw_snapshot_end(log_t *l, bool ok, log_snapshot_t *out)
{
    log_wal_t *lw = lw_of(l);
    memset(out, 0, sizeof *out);
    if (!lw->snap_on)
        return;
    out->rev = lw->snap.rev;
    out->point = lw->snap.point;
    out->entries = lw->snap.entries;
    if (ok && lw->wal != NULL)
        out->log_files_removed = wal_remove_before(lw->wal, lw->snap.rev);
    snap_writer_abort(&lw->snap); /* frees buffers; after a commit the file is already renamed */
    lw->snap_on = false;
}

/* ---- the rest --------------------------------------------------------------------- */

static void lw_stats(const log_t *l, log_stats_t *out)
{
    const log_wal_t *lw = lw_of_c(l);
    memset(out, 0, sizeof *out);
    if (lw->wal == NULL)
        return;
    wal_stats_t st;
    wal_get_stats(lw->wal, &st);
    out->bytes = wal_bytes(lw->wal);
    out->files = st.segments;
    out->records_written = st.records_written;
    out->batches = st.batches;
    out->syncs = st.syncs;
    out->sync_us_sum = st.sync_us_sum;
    out->syncs_overlapped = st.syncs_overlapped;
    out->sync_bucket_us = wal_sync_bucket_us;
    out->nsync_buckets = WAL_SYNC_BUCKETS;
    _Static_assert(WAL_SYNC_BUCKETS + 1 <= sizeof out->sync_hist / sizeof out->sync_hist[0], "sync_hist");
    memcpy(out->sync_hist, st.sync_hist, sizeof st.sync_hist);
    out->inline_batches = st.inline_batches;
    out->pending_bytes = st.pending_bytes;
    out->pending_bytes_peak = st.pending_bytes_peak;
}

static void lw_close(log_t *l)
{
    log_wal_t *lw = lw_of(l);
    if (lw->snap_on) {
        /* A commit on a worker thread has finished before this is called
         * (the loop ran to its end); an unfinished snapshot is dropped. */
        snap_writer_abort(&lw->snap);
        lw->snap_on = false;
    }
    wal_close(lw->wal);
    lw->wal = NULL;
    if (lw->dir_fd >= 0)
        close(lw->dir_fd); /* releases the flock */
    free(lw);
}

static const log_ops_t log_wal_ops = {
    .load_snapshot = lw_load_snapshot,
    .replay = lw_replay,
    .append = lw_append,
    .flush = lw_flush,
    .poll = lw_poll,
    .committed_rev = lw_committed_rev,
    .mark = lw_mark,
    .failed = lw_failed,
    .backlogged = lw_backlogged,
    .snapshot_begin = lw_snapshot_begin,
    .snapshot_slice = lw_snapshot_slice,
    .snapshot_commit = lw_snapshot_commit,
    .snapshot_end = lw_snapshot_end,
    .stats = lw_stats,
    .close = lw_close,
};

log_t *log_wal_open(const log_wal_options_t *opt, const log_hooks_t *hooks, char *err, size_t elen)
{
    if (strlen(opt->dir) >= sizeof ((log_wal_t *)0)->dir) {
        snprintf(err, elen, "data directory name too long: %s", opt->dir);
        return NULL;
    }
    log_wal_t *lw = ordo_xcalloc(1, sizeof *lw);
    lw->base.ops = &log_wal_ops;
    lw->base.marks_are_revs = true; /* positions are revisions here (lw_mark()) */
    lw->base.hooks = *hooks;
    snprintf(lw->dir, sizeof lw->dir, "%s", opt->dir);
    snprintf(lw->waldir, sizeof lw->waldir, "%s/wal", opt->dir);
    lw->opt = opt->wal;
    lw->opt.dir = lw->waldir;
    lw->opt.on_durable = hooks->wake;
    lw->opt.on_durable_arg = hooks->arg;
    lw->opt.defer_wake = true; /* the WAL writes at log_flush() */
    lw->base.record_bytes_max = lw->opt.record_bytes_max != 0 ? lw->opt.record_bytes_max : WAL_RECORD_BYTES_DEFAULT;
    lw->snap.fd = -1;
    /* The lock comes first: two processes on one directory would each
     * append to the log and write snapshots over the other's. */
    lw->dir_fd = log_lock_dir(lw->dir, err, elen);
    if (lw->dir_fd < 0) {
        free(lw);
        return NULL;
    }
    return &lw->base;
}
