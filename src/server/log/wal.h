/*
 * wal.h -- the write-ahead log: segmented files of checksummed records,
 * written and synced in batches by a dedicated thread (group commit), read
 * back at start-up with torn-tail repair and corruption detection.
 *
 * The core thread appends records (opaque bytes, each tagged with the
 * revision the state reaches once it is applied) and learns, through a
 * callback, how far the log is durable. It does not block on the disk: the
 * log thread takes everything appended so far, writes it in one go, syncs
 * it according to the policy, then publishes the new durable revision.
 * Under ALWAYS, sync_parallel log threads may each have a sync in flight.
 * The one exception is opt-in (sync_inline_max): a batch that finds the
 * log thread idle is written by the core in wal_kick() (under ALWAYS only
 * a batch of a record or few, and synced too), which is what a lone client
 * would wait for anyway, minus two thread wake-ups. The EVERYSEC sync
 * stays on the log thread.
 *
 * Policies (wal_options_t.policy):
 *   WAL_SYNC_ALWAYS    a revision is published as durable only after the
 *                      fdatasync that covers it returned. A crash loses
 *                      nothing that was published.
 *   WAL_SYNC_EVERYSEC  records are written at once and synced about once a
 *                      second; revisions are published as soon as they are
 *                      written. A crash of the machine (not of the process)
 *                      can lose about the last second.
 *   WAL_SYNC_NO        not synced by ordo (the OS writes back when it
 *                      likes); published when written. A machine crash can
 *                      lose everything since the OS last wrote back.
 * Under every policy a finished segment is synced before the next one is
 * created (and wal_close() syncs), so only the last segment can ever have a
 * torn tail: that is what lets recovery call a bad record in any other
 * segment corruption.
 * Under ALWAYS, sync_batch_max and sync_interval_ms tune group commit: the
 * log thread syncs as soon as it has records, unless sync_interval_ms > 0,
 * in which case it waits up to that long for more records to join the
 * batch, syncing early once sync_batch_max records are pending.
 *
 * Back-pressure: bytes appended and not yet written and synced per the
 * policy ("pending": the pending buffer plus the batch the log thread is
 * writing) are counted. wal_append() never refuses for that (the core has
 * applied the record already); instead the core asks wal_backlogged()
 * after taking in work, and stops taking in more (ordod stops reading its
 * clients) while pending exceeds pending_bytes_max. The log then calls
 * on_durable once pending is back at or below the limit, so memory stays
 * bounded by the limit plus what was already read, and nothing accepted is
 * dropped.
 *
 * Failure: if a write or sync fails, the log enters the failed state for
 * good (it never retries a sync and then acknowledges: after a failed
 * fdatasync the kernel may have dropped the dirty pages). wal_failed()
 * reports it with the reason; no revision is published after the failure.
 *
 * Thread safety: wal_append(), wal_kick(), wal_backlogged() and
 * wal_close() are called from one thread (the core); wal_durable_rev(),
 * wal_failed(), wal_bytes(), wal_pending_bytes(), wal_get_stats() and
 * wal_remove_before() from any thread. The durable callback runs on the
 * log thread (or the core, for a drain or a failure met inline) and must
 * only hand the news over (uv_async_send).
 */
#ifndef ORDO_WAL_H
#define ORDO_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Format limit on a record's payload: wal_open() refuses a larger
 * record_bytes_max, and recovery believes any length up to it (so lowering
 * record_bytes_max never makes a stored record unreadable). */
#define WAL_RECORD_BYTES_LIMIT (1u << 30)
/* Most syncs in flight at once (wal_options_t.sync_parallel). */
#define WAL_SYNC_PARALLEL_MAX 4u
/* Defaults taken when the option is 0. */
#define WAL_RECORD_BYTES_DEFAULT (64u << 20)
#define WAL_SEGMENT_BYTES_DEFAULT (UINT64_C(64) << 20)

enum wal_sync_policy { WAL_SYNC_ALWAYS = 0, WAL_SYNC_EVERYSEC = 1, WAL_SYNC_NO = 2 };

/* The seam through which every write and sync goes, so tests can make
 * them fail (EIO, ENOSPC) without mocking the file system. Each returns
 * what the system call would (-1 and errno on failure); a short write is
 * continued. NULL members mean the real calls. The directory's fsync (after
 * a segment is created) also goes through fdatasync_fn, with the
 * directory's fd. */
typedef struct wal_io_s {
    ssize_t (*pwrite_fn)(void *ctx, int fd, const void *buf, size_t n, off_t off);
    int (*fdatasync_fn)(void *ctx, int fd);
    void *ctx;
} wal_io_t;

typedef struct wal_options_s {
    const char *dir;              /* directory of the segment files (created if missing) */
    int policy;                   /* enum wal_sync_policy */
    uint64_t segment_bytes;       /* roll to a new segment past this size
                                     (0: WAL_SEGMENT_BYTES_DEFAULT) */
    uint32_t sync_batch_max;      /* see above; 0: no count trigger */
    uint32_t sync_interval_ms;    /* see above; 0: sync at once */
    uint32_t record_bytes_max;    /* longest record wal_append() accepts, at most
                                     WAL_RECORD_BYTES_LIMIT (0: ..._DEFAULT) */
    /* true: wal_append() never wakes the log thread; the core calls
     * wal_kick() once it has appended everything of a loop turn, so one
     * batch (one write, one sync) carries the whole turn. */
    bool defer_wake;
    /* true: wal_open() cuts a corrupt log at its first bad record instead
     * of refusing it, keeping the cut bytes aside (see wal_open()). */
    bool repair;
    /* wal_backlogged() is true while more than this many bytes are pending
     * (see Back-pressure); 0: no limit. */
    uint64_t pending_bytes_max;
    /* With defer_wake: when wal_kick() finds the log thread idle, the
     * calling (core) thread writes the pending records itself, under
     * EVERYSEC and NO whatever their number (a write to the OS), under
     * ALWAYS (with sync_interval_ms 0) only if at most this many, and then
     * syncs them too, saving the two
     * thread wake-ups of a round trip through the log thread (one client
     * writing alone waits for them on every write). 0: never. */
    uint32_t sync_inline_max;
    /* ALWAYS with sync_interval_ms 0: after a sync, the log thread waits
     * up to this many microseconds (and never longer than that sync took)
     * for as many records as the sync answered plus those already waiting:
     * the writers it just answered send their next records about a round
     * trip later, and one sync then carries them with the others instead
     * of the next-but-one. 0: never wait. See "Gathering" in wal.c. */
    uint32_t sync_gather_max_us;
    /* ALWAYS: how many syncs may be in flight at once, 1 to
     * WAL_SYNC_PARALLEL_MAX (0: 1), each on a log thread of its own. With
     * more than one, records that arrive while a sync runs are written and
     * synced at once by another log thread instead of waiting for it to
     * end; a disk that completes concurrent flushes together then answers
     * them a sync sooner. Batches are still written one at a time, in
     * order. Under EVERYSEC and NO there is one log thread. See "Syncs in
     * flight" in wal.c. */
    uint32_t sync_parallel;
    wal_io_t io;
    /* Called on the log thread after the durable revision advanced, the log
     * failed, or pending bytes fell back to the limit after wal_backlogged()
     * said true. Must be cheap and thread-safe (uv_async_send). */
    void (*on_durable)(void *arg);
    void *on_durable_arg;
} wal_options_t;

typedef struct wal_s wal_t;

/* Recovery: called for each valid record in log order, with its revision
 * and bytes (valid for the duration of the call). Return 0 to go on,
 * non-zero to abort recovery: wal_open() then fails, its err naming the
 * record (revision, file, offset) and the value returned. */
typedef int (*wal_replay_fn)(void *arg, uint64_t rev, const void *rec, size_t len);

typedef struct wal_recovery_s {
    uint64_t records;             /* records replayed */
    uint64_t last_rev;            /* revision of the last valid record (0 if none) */
    uint64_t truncated_bytes;     /* bytes cut from a torn tail */
    char truncated_file[512];     /* which file was cut, "" if none */
    uint64_t truncated_at;        /* ... and at which offset */
    /* repair (wal_options_t.repair): */
    bool repaired;                /* the log was cut at corruption */
    char repair_file[512];        /* the segment cut */
    uint64_t repair_at;           /* byte offset of its first bad record (0: bad header) */
    uint64_t repair_bytes;        /* bytes cut: its tail and every later segment */
    uint64_t repair_last_rev;     /* revision of the last record kept (0 if none) */
    uint32_t repair_segments_moved; /* later segments renamed aside */
    char repair_saved[512];       /* where the cut bytes of repair_file went */
    char repair_reason[512];      /* the corruption found */
} wal_recovery_t;

/* wal_open() -- scan the segments in dir, replay every valid record whose
 * revision is > after_rev through fn (in order), repair a torn tail of the
 * last segment (cut at the last good record: a tail of garbage, zeros, or a
 * partial record), then start the log thread, appending after the last good
 * record. A bad record followed by a good one (mid-log corruption) is
 * refused: wal_open() fails and err names the file and byte offset.
 * Revisions going down along the log are corruption too, and so is a bad
 * record or header in any segment but the last. With opt->repair, the log
 * is cut at the first bad record instead: later segments are renamed to
 * "<name>.cut", the bad segment's bytes from there on are saved to
 * "<name>.cut-at-<offset>" in the same directory, nothing is deleted, the
 * rec_out->repair_* fields (and stderr) say what was cut, and the log
 * resumes after the last good record.
 * A last segment that died being created (shorter than its header, or all
 * zeros) is removed and reported like a cut.
 * The last segment is synced before appending resumes (under NO or
 * EVERYSEC its records may have been only in the page cache), and the
 * durable revision starts at max(after_rev, last valid revision).
 * Records with a revision equal to after_rev are skipped: a snapshot at
 * revision R must hold the effect of every record of revision <= R.
 * The directory is locked (flock) against a second opener.
 * Progress of a long replay is printed to stderr every few seconds.
 * Returns the log, or NULL with a message in err; on failure fn may already
 * have been called for the records before the bad one, so the caller must
 * discard what it built. */
wal_t *wal_open(const wal_options_t *opt, uint64_t after_rev, wal_replay_fn fn, void *arg,
                wal_recovery_t *rec_out, char *err, size_t err_len);

/* The frame header before each record in a segment (wal.c's format):
 * len u32 | crc u32 | rev u64. */
#define WAL_FRAME_BYTES 16u

/* wal_append() -- queue one record reaching revision rev (non-decreasing
 * across calls, and not below the last revision recovered; asserted) for
 * the log thread. Copies the bytes; takes a mutex the log thread holds only
 * to swap buffers, so it never waits for the disk. Returns 0, or -1 if the
 * log has failed or len exceeds record_bytes_max. */
int wal_append(wal_t *w, uint64_t rev, const void *rec, size_t len);

/* wal_append_frames() -- queue `records` records already laid out as
 * frames (len u32 | crc u32 = 0 | rev u64 | payload, wal.c), `bytes` in
 * all, the last of revision last_rev: one copy for the lot. Same contract
 * as wal_append() for each; the frames are checked (asserted) first. */
int wal_append_frames(wal_t *w, const void *frames, size_t bytes, uint32_t records, uint64_t last_rev);

/* wal_kick() -- with defer_wake: hand what was appended so far to the log
 * thread now. Cheap when there is nothing new. Core thread. If
 * sync_inline_max allows, writes (and syncs) the records itself instead and
 * returns 1: the durable revision (or the failure) is then already
 * published, without on_durable being called for it. Else returns 0. */
int wal_kick(wal_t *w);

/* wal_backlogged() -- true while pending bytes exceed pending_bytes_max
 * (never while the log has failed: its pending records are dropped). When
 * it returns true, on_durable will be called once they no longer do. Core
 * thread. */
bool wal_backlogged(wal_t *w);

/* wal_pending_bytes() -- bytes appended and not yet written and synced per
 * the policy (frame headers included). Any thread. */
uint64_t wal_pending_bytes(const wal_t *w);

/* wal_durable_rev() -- the highest revision published durable (see the
 * policies). Any thread. */
uint64_t wal_durable_rev(const wal_t *w);

/* wal_failed() -- NULL while healthy, else the reason ("fdatasync of
 * .../00000000000000000001.wal failed: Input/output error"), valid until
 * wal_close(). Any thread. */
const char *wal_failed(const wal_t *w);

/* wal_remove_before() -- delete whole segments every record of which has a
 * revision <= rev (after a snapshot covering rev is durable), oldest first,
 * stopping at the first that cannot go. Never the segment being written.
 * The unlinks run on the calling thread. Returns the number of segments
 * removed. */
int wal_remove_before(wal_t *w, uint64_t rev);

/* wal_bytes() -- bytes in all segments on disk (for the snapshot trigger). */
uint64_t wal_bytes(const wal_t *w);

/* Sync latency histogram: upper bounds of its buckets in microseconds (a
 * last, unbounded bucket follows). From a fast NVMe flush (~50 us) to a
 * disk in trouble (> 250 ms). */
#define WAL_SYNC_BUCKETS 12
extern const uint64_t wal_sync_bucket_us[WAL_SYNC_BUCKETS];

typedef struct wal_stats_s {
    uint64_t syncs;               /* fdatasync calls made */
    uint64_t sync_us_sum;         /* their total duration (syncs in flight at once each count whole) */
    uint64_t syncs_overlapped;    /* syncs of a log thread that began while another's was under way */
    uint64_t sync_hist[WAL_SYNC_BUCKETS + 1]; /* syncs per bucket (not cumulative); the last: above all bounds */
    uint64_t records_written;
    uint64_t bytes_written;
    uint64_t batches;             /* write batches */
    uint32_t segments;
    uint64_t inline_batches;      /* batches wal_kick() wrote itself */
    uint64_t pending_bytes;       /* as wal_pending_bytes() */
    uint64_t pending_bytes_peak;  /* the most pending at once since wal_open() */
} wal_stats_t;
void wal_get_stats(const wal_t *w, wal_stats_t *out);

/* wal_close() -- write and sync what was appended (unless failed; under
 * every policy), stop the log thread, close files, free. NULL is a no-op. */
void wal_close(wal_t *w);

#endif /* ORDO_WAL_H */
