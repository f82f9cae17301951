/*
 * log.h -- the log seam: the one interface between the writer and the log.
 *
 * The writer (writer/persist.c) drives a log_t through this interface only;
 * what lies behind it is an implementation: the local write-ahead log and
 * snapshot file (log_wal.c, over wal.c and snapshot.c), or in cluster mode
 * the raft log (raft_log.c, over C raft). Only persist_open() and
 * writer/cluster.c name them. What every implementation shares is here
 * too, in log.c: the batch (log_batch_t, below) and the data directory's
 * lock (log_lock_dir()).
 *
 * What a log does for the writer:
 *   - open: take the data directory for this process (a lock), nothing
 *     more, so a second server on a busy directory is refused before it
 *     reads anything;
 *   - load the snapshot into a fresh core, then replay the records after
 *     its revision (recovery), after which the log takes appends;
 *   - append a batch of records (one buffer per batch: what the writer
 *     made since it last handed records over, at most a loop turn's),
 *     each tagged with the revision the state reaches with it, and flush
 *     at the end of the loop turn: the log starts committing everything
 *     appended since the last flush as one unit (one write, one sync);
 *   - hand out the position output made now waits for (log_mark()), and
 *     tell when a position is committed: the log calls hooks.wake from
 *     any thread; the writer turns that into a loop wake-up
 *     (uv_async_send, in writer/persist.c: no libuv in log/ except raft),
 *     then asks log_poll() on the loop thread for the committed position
 *     and log_committed_rev() for the revision its records reach;
 *   - snapshots: begin / slice / commit / end, the file format one for
 *     every implementation (snapshot.h), so a raft member can ship it;
 *   - stats for INFO, and close.
 *
 * WHO APPLIES: the writer, at propose, with either log. It applies a
 * record at once (the core reaches revision R), appends it tagged R and
 * builds the reply from what it applied; the reply is held (net.c's
 * durability marks) until the log has committed its position. A record
 * the log refuses leaves the state ahead of the log, so the server turns
 * read-only (persist.h). Records the member did not make itself (a raft
 * follower's: its leader made them) come back through hooks.deliver once
 * committed, and are applied with the same code as replay; the WAL never
 * delivers. Both keep the same snapshot format and the same replay: a
 * member that restarts loads its snapshot and replays its committed
 * entries after it; a raft follower that is sent the leader's snapshot
 * loads it the same way. (Applying only on delivery was the first sketch
 * for raft; raft_log.h says why it was not built.)
 *
 * POSITIONS AND REVISIONS: a position (log_pos_t) is where something
 * stands in what the log commits, in commit order; a revision (uint64_t)
 * is the state's. The WAL's positions are its records' revisions; raft's
 * count its proposals (entries, each a turn's records, and barriers), so
 * there one position holds many revisions and many positions none.
 * Output waits for positions; the command layer, which speaks revisions,
 * asks log_committed_rev(). log_pos_t is a struct so that the compiler
 * keeps the two apart.
 *
 * Threads: everything is called on the loop thread, except hooks.wake,
 * which the log calls from any thread (it must only hand the news over),
 * and log_snapshot_commit(), which blocks and runs on a worker thread.
 */
#ifndef ORDO_LOG_H
#define ORDO_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/core.h"

typedef struct log_s log_t;

/* A position in the log (see above). Positions only grow. */
typedef struct log_pos_s {
    uint64_t v;
} log_pos_t;

#define LOG_POS(n) ((log_pos_t){.v = (n)})

/* log_pos_before() -- a comes before b. */
static inline bool log_pos_before(log_pos_t a, log_pos_t b) { return a.v < b.v; }

/* ---- batches ---------------------------------------------------------------
 * A batch is one buffer holding entries back to back, each
 *     len u32 | 0 u32 | rev u64 | len bytes of an encoded record (record.h)
 * little-endian, revisions non-decreasing. The header is the WAL's frame
 * header with its checksum still zero (wal.c), so the local log takes a
 * whole batch with one copy; the zero word is reserved for the log. The writer fills one and hands
 * it over with log_append(), which copies what it keeps: after each read
 * of client input (so log_backlogged() counts it) and at the end of the
 * loop turn. */
#define LOG_ENTRY_HEADER_BYTES 16u

typedef struct log_batch_s {
    ordo_buf_t buf;
    uint32_t records;
    uint64_t last_rev;
} log_batch_t;

/* log_batch_begin() -- start an entry of revision rev: the caller then
 * appends the record's bytes to b->buf and calls log_batch_end() with the
 * returned offset, or log_batch_cancel() to take the entry back. */
size_t log_batch_begin(log_batch_t *b, uint64_t rev);
/* log_batch_end() -- finish the entry begun at `at`; returns its record's
 * length in bytes. */
size_t log_batch_end(log_batch_t *b, size_t at);
void log_batch_cancel(log_batch_t *b, size_t at);
/* log_batch_next() -- iterate: *pos starts at 0. Returns false after the
 * last entry, else true with the entry's revision and record (pointing into
 * the batch, valid until it changes). */
bool log_batch_next(const log_batch_t *b, size_t *pos, uint64_t *rev, const void **rec, size_t *len);
/* log_batch_clear() -- empty it, keeping a modest buffer for the next turn. */
void log_batch_clear(log_batch_t *b);
void log_batch_free(log_batch_t *b);

/* log_lock_dir() -- open dir and flock it, so a second process on the same
 * directory is refused before it reads anything: the first thing every
 * log's open does. Returns the descriptor (close it to release; it is
 * close-on-exec), or -1 with a message naming the directory. */
int log_lock_dir(const char *dir, char *err, size_t elen);

/* log_file_read() -- the whole file open on fd into *out (malloc'd,
 * *size_out bytes): the WAL's and the raft store's loads. Returns 0, or
 * -1 with errno (EIO if the file shrank while read). */
int log_file_read(int fd, unsigned char **out, size_t *size_out);

/* ---- what the log calls ---------------------------------------------------- */

/* One record: its revision (the entry's index, for raft) and bytes, valid
 * for the duration of the call. Return 0 to go on, non-zero to stop (the
 * log then fails the operation). */
typedef int (*log_record_fn)(void *arg, uint64_t rev, const void *rec, size_t len);

typedef struct log_hooks_s {
    /* Any thread: the committed revision advanced, the log failed, or it is
     * no longer backlogged. Must be cheap and thread-safe; the writer wakes
     * its loop, which calls log_poll(). */
    void (*wake)(void *arg);
    /* A committed record this member did not make (a raft follower's),
     * to apply: on the loop thread, in log order. NULL for the WAL. */
    log_record_fn deliver;
    void *arg;
} log_hooks_t;

/* ---- reports ----------------------------------------------------------------- */

typedef struct log_snapshot_s {
    uint64_t rev;                 /* the revision it holds */
    uint64_t point;               /* compaction point: pin compaction here until it ends */
    uint64_t entries;             /* entries written (known at the end) */
    int log_files_removed;        /* at the end: files of the log it made redundant */
} log_snapshot_t;

typedef struct log_stats_s {
    uint64_t bytes;               /* the log on disk (the snapshot trigger) */
    uint32_t files;               /* its files (WAL segments) */
    uint64_t records_written;
    uint64_t batches;             /* writes to disk */
    uint64_t syncs;
    uint64_t sync_us_sum;         /* total duration of the syncs (overlapping ones each count whole) */
    uint64_t syncs_overlapped;    /* syncs begun while another was under way */
    const uint64_t *sync_bucket_us; /* upper bounds (us) of the sync latency buckets, nsync_buckets of them */
    size_t nsync_buckets;
    uint64_t sync_hist[16];       /* syncs per bucket, not cumulative; [nsync_buckets]: above every bound */
    uint64_t inline_batches;      /* batches written on the loop thread itself */
    uint64_t pending_bytes;       /* appended, not yet committed */
    uint64_t pending_bytes_peak;
    bool snapshot_wanted;         /* the log asks for a snapshot now (raft: entries since the last) */
} log_stats_t;

/* ---- the interface --------------------------------------------------------- */

typedef struct log_ops_s {
    int (*load_snapshot)(log_t *l, core_t *core, uint64_t *rev_out, uint64_t *entries_out, char *err, size_t elen);
    int (*replay)(log_t *l, uint64_t after_rev, log_record_fn fn, void *arg, char *err, size_t elen);
    int (*append)(log_t *l, const log_batch_t *b);
    int (*flush)(log_t *l);
    log_pos_t (*poll)(log_t *l);
    uint64_t (*committed_rev)(const log_t *l);
    log_pos_t (*mark)(log_t *l, uint64_t rev);
    const char *(*failed)(const log_t *l);
    bool (*backlogged)(log_t *l);
    int (*snapshot_begin)(log_t *l, const core_t *core, uint64_t now_ms, log_snapshot_t *out, char *err,
                          size_t elen);
    int (*snapshot_slice)(log_t *l, const core_t *core, size_t max_keys, char *err, size_t elen);
    int (*snapshot_commit)(log_t *l, char *err, size_t elen);
    void (*snapshot_end)(log_t *l, bool ok, log_snapshot_t *out);
    void (*stats)(const log_t *l, log_stats_t *out);
    void (*close)(log_t *l);
} log_ops_t;

/* Every implementation's handle starts with this. */
struct log_s {
    const log_ops_t *ops;
    size_t record_bytes_max;      /* the longest record log_append() takes */
    log_hooks_t hooks;
    bool marks_are_revs;          /* a revision's position is the revision (the local log):
                                   * log_mark() needs no call, and ops->mark may be NULL */
};

/* log_load_snapshot() -- load the snapshot (if any) into a fresh core.
 * *rev_out is its revision, 0 if there is none. Returns 0, or -1 with a
 * message in err (a damaged file is named). */
static inline int log_load_snapshot(log_t *l, core_t *core, uint64_t *rev_out, uint64_t *entries_out, char *err,
                                    size_t elen)
{
    return l->ops->load_snapshot(l, core, rev_out, entries_out, err, elen);
}

/* log_replay() -- call fn for every record stored after after_rev (the
 * snapshot's revision), in order, then open the log for appending. Once.
 * Returns 0, or -1 with a message in err (fn may have been called for the
 * records before the failure: the caller discards what it built). */
static inline int log_replay(log_t *l, uint64_t after_rev, log_record_fn fn, void *arg, char *err, size_t elen)
{
    return l->ops->replay(l, after_rev, fn, arg, err, elen);
}

/* log_append() -- hand over a batch (copied); it counts as pending at
 * once (log_backlogged()), and is committed from the next log_flush() on.
 * Returns 0, or -1 if the log has failed (log_failed() says why). */
static inline int log_append(log_t *l, const log_batch_t *b) { return l->ops->append(l, b); }

/* log_flush() -- the end of a loop turn: start committing what was
 * appended since the last flush, as one unit. Returns 1 if it is committed
 * already (written on the calling thread: call log_poll() now, no wake
 * comes for it), else 0 (hooks.wake will come; also when there was
 * nothing to flush). */
static inline int log_flush(log_t *l) { return l->ops->flush(l); }

/* log_poll() -- after a wake: the committed position: output marked with
 * positions up to it may go. */
static inline log_pos_t log_poll(log_t *l) { return l->ops->poll(l); }

/* log_committed_rev() -- the highest revision whose record is committed
 * (what a single server calls its durable revision). */
static inline uint64_t log_committed_rev(const log_t *l) { return l->ops->committed_rev(l); }

/* log_mark() -- the position output made now must wait for, the state
 * having reached revision rev. Not a getter: raft's asks for a barrier
 * at this turn's flush if the turn proposes nothing (raft_log.h). */
static inline log_pos_t log_mark(log_t *l, uint64_t rev)
{
    return l->marks_are_revs ? LOG_POS(rev) : l->ops->mark(l, rev);
}

/* log_failed() -- NULL while healthy, else why the log cannot be written;
 * for good (valid until log_close()). */
static inline const char *log_failed(const log_t *l) { return l->ops->failed(l); }

/* log_backlogged() -- true while more is appended than committed beyond
 * the log's limit: the writer stops taking in work. When it returns true,
 * hooks.wake is called once it no longer is. */
static inline bool log_backlogged(log_t *l) { return l->ops->backlogged(l); }

/* log_snapshot_begin() -- start a snapshot of the core as it is now; *out
 * says its revision and the compaction point the caller pins until
 * log_snapshot_end(). One at a time. Returns 0, or -1 with a message. */
static inline int log_snapshot_begin(log_t *l, const core_t *core, uint64_t now_ms, log_snapshot_t *out,
                                     char *err, size_t elen)
{
    return l->ops->snapshot_begin(l, core, now_ms, out, err, elen);
}

/* log_snapshot_slice() -- write up to max_keys more keys. Returns 1 when
 * all is written, 0 if more remain, -1 on an error (message in err). */
static inline int log_snapshot_slice(log_t *l, const core_t *core, size_t max_keys, char *err, size_t elen)
{
    return l->ops->snapshot_slice(l, core, max_keys, err, elen);
}

/* log_snapshot_commit() -- make the written snapshot durable and current.
 * Blocks on the disk: call it on a worker thread, nothing else of this log
 * meanwhile but what runs on the loop. Returns 0, or -1 with a message. */
static inline int log_snapshot_commit(log_t *l, char *err, size_t elen)
{
    return l->ops->snapshot_commit(l, err, elen);
}

/* log_snapshot_end() -- loop thread, after a commit (ok) or a failure at
 * any step (!ok): drop what the snapshot made redundant (ok) or its
 * temporary file, and free. *out is filled for the report. */
static inline void log_snapshot_end(log_t *l, bool ok, log_snapshot_t *out) { l->ops->snapshot_end(l, ok, out); }

static inline void log_stats(const log_t *l, log_stats_t *out) { l->ops->stats(l, out); }

/* log_close() -- commit what was appended (unless failed), release the
 * directory, free. A snapshot still running is abandoned. */
static inline void log_close(log_t *l) { l->ops->close(l); }

#endif /* ORDO_LOG_H */
