/*
 * wal.c -- the write-ahead log of wal.h.
 *
 * ON-DISK FORMAT
 *
 * A log is a directory of segment files. A segment is named by its
 * sequence number in 20 decimal digits, "00000000000000000001.wal", so the
 * names sort in log order; other names in the directory are ignored. Every
 * integer is little-endian.
 *
 * Segment header, WAL_HEADER_BYTES = 40 bytes at offset 0:
 *
 *    offset  size  field
 *         0     8  magic "ORDOWAL\0"
 *         8     4  format version, 1
 *        12     4  header size, 40 (a later version may grow it)
 *        16     8  sequence number, equal to the one in the file name, so a
 *                  renamed or copied file does not pass for another segment
 *        24     8  salt: random, fresh for every segment
 *        32     4  CRC-32C of bytes 0..31
 *        36     4  zero
 *
 * Records follow from offset 40, back to back, without padding. A record
 * frame is WAL_FRAME_BYTES = 16 bytes of header and the payload:
 *
 *    offset  size  field
 *         0     4  len: payload bytes, <= WAL_RECORD_BYTES_LIMIT
 *         4     4  crc: CRC-32C of salt(8) || rev(8) || len(4) || payload
 *         8     8  rev: the revision the state reaches once it is applied
 *        16   len  payload, opaque to the log
 *
 * The salt in the checksum ties a record to the segment it was written in:
 * bytes left over from an older file, a recycled block, or records copied
 * from another segment do not check, because their checksums were computed
 * with another salt. Salts are drawn so that a frame of zeros never checks.
 *
 * Revisions never decrease along the log (they may repeat).
 *
 * The manifest, "manifest" in the same directory, WAL_MANIFEST_BYTES = 32:
 *
 *    offset  size  field
 *         0     8  magic "ORDOMAN\0"
 *         8     8  sequence number of the newest segment ever created
 *        16     8  gapless_from: from this segment on, numbers have no gaps
 *        24     4  CRC-32C of bytes 0..23
 *        28     4  zero
 *
 * It is what must exist: segments are numbered without gaps, old ones go
 * only from the front (wal_remove_before() keeps the last), so the log is
 * every number from the first present one to the manifest's. Logs written
 * before the manifest existed could skip a number after a torn segment
 * creation; their first start writes the manifest with gapless_from set to
 * the newest segment then, and a gap below it is left to the revision
 * check of replay (records must follow each other). A deleted
 * last segment (or every segment) would otherwise pass for a log that
 * simply ended earlier, and revisions, tokens and ids would be handed out
 * again. Written after a new segment's header and directory entry are
 * synced (tmp file, fdatasync, rename, directory fsync), so it never
 * names a segment a crash could take back; written again at the end of
 * recovery, so a log made before the manifest existed gets one.
 *
 * WRITING
 *
 * The core thread appends frames with a zero crc to a pending buffer under
 * the mutex (a memcpy: it never waits for the disk). A log thread swaps
 * the pending buffer for an empty one, fills in the checksums with the salt
 * of the segment each record lands in, writes the batch with one pwrite per
 * segment touched, syncs per the policy and publishes the durable revision.
 * With sync_inline_max, wal_kick() may do the same itself on the core
 * thread; `writing` (under mu) says who owns the segment state, so no two
 * ever write at once, and batches reach the file in the order appended.
 *
 * Syncs in flight (ALWAYS, sync_parallel > 1): there are that many log
 * threads. One that has written its batch gives up `writing` before it
 * syncs, so another can write the next batch and start its own sync while
 * the first is under way; a disk that completes concurrent flushes
 * together answers those records a sync sooner. The rules:
 *  - a sync covers the chunks written before it began (write_seq then):
 *    a revision is published once a sync that began after its batch was
 *    written has returned. Syncs may end in any order; publish() keeps
 *    the highest revision, since a later sync that returned covers every
 *    earlier batch too.
 *  - each log thread syncs through a descriptor of its own (sync_fd),
 *    opened when the segment was created, before any record: the kernel
 *    reports a write-back error once per open file, so with one shared
 *    descriptor a sync could return 0 because another consumed the error
 *    of a page it covers. With its own, a sync that returns 0 saw no
 *    error on any page written before it began.
 *  - a roll waits (roll_cv) until no sync is in flight before it seals the
 *    segment and closes its descriptors, so no sync runs on a closed one.
 *  - the core writes inline under ALWAYS only while no sync is in flight.
 *  - the first failure fails the log for good, as with one thread
 *    (wal_fail() and publish() meet under mu).
 * A segment takes records while it is shorter than segment_bytes, so it
 * exceeds that by at most one record.
 *
 * Gathering (ALWAYS, sync_interval_ms 0, sync_gather_max_us > 0): when
 * many writers each wait for their record's sync before they send the
 * next, a log thread that syncs whatever is pending the moment a sync
 * ends splits them into two groups that alternate: those answered by sync
 * n come back during sync n+1 and wait for sync n+2, so each writer gets
 * one answer every two syncs. After a sync the log thread therefore sets
 * a target, the records that sync carried plus those pending when it
 * ended, and waits for the pending records to reach it, at most
 * min(sync_gather_max_us, the duration of that sync) from its end; then
 * one sync carries everybody. While it waits, wal_kick() neither writes
 * inline (that would sync a record alone in the middle of the gathering)
 * nor lets the target pass unsignalled. A writer that does not come back
 * costs a wait of at most one sync's duration, once: the next target
 * counts only what the next sync carried.
 *
 * A sync counts in syncs_in_flight until its gathering target is set,
 * after its revision is published: a writer it answered that comes back
 * before is not written inline (inline_due()) but joins the gathering.
 *
 * Back-pressure: pending_bytes counts the frames appended and not yet done
 * (written, and synced if the policy wants it): wal_append() adds, the log
 * thread subtracts a batch once it is done (or dropped after a failure).
 * wal_backlogged() sets drain_wanted before it reads pending_bytes again;
 * the log thread subtracts before it looks at drain_wanted; both sequentially
 * consistent, so either the core sees the drop or the log thread sees the
 * flag and calls on_durable: a paused core is always woken.
 *
 * Rolling to a new segment: fdatasync the finished segment (under every
 * policy, so that only the last segment can ever have a torn tail), create
 * the next one (O_EXCL), write its header, fdatasync it, fsync the
 * directory; only then do records go into it.
 *
 * RECOVERY
 *
 * wal_open() reads the segments in order. A record is good if its frame
 * fits in the file, its length is within the format limit and its salted
 * checksum matches. At the first bad record of a segment it looks at every
 * later offset for a good frame (with a plausible revision, which keeps the
 * search linear); if there is one, records were written after the bad one:
 * that is corruption, never a torn write, and wal_open() fails naming the
 * file and the offset. Otherwise, in the last segment, the bad bytes are a
 * torn tail: the file is cut there and synced. In any other segment a bad
 * record is corruption (those were synced whole before the next segment
 * was created). A last segment whose header never made it to disk (short,
 * or all zeros) was being created when the process died; it held no
 * record and is removed.
 *
 * REPAIR (opt.repair, off by default)
 *
 * Corruption (a bad record followed by a good one, a bad record or header
 * in a sealed segment, a revision going down) then cuts the log at the
 * first bad record instead of refusing, keeping every cut byte: the later
 * segments are renamed to "<name>.cut" (last first, so what remains is
 * always a prefix of the log), the directory synced; the bytes of the bad
 * segment from the bad record on are copied to "<name>.cut-at-<offset>"
 * and synced, and only then is the segment truncated there and synced (a
 * bad header: the whole segment is renamed aside). A crash in the middle
 * leaves either the same corruption (repair again) or the repaired log.
 * Those names end in neither digits nor ".wal", so the log ignores them;
 * an existing name gets ".1", ".2", ... appended. Replay stops at the cut:
 * recovery ends at the last good record.
 */
#include "wal.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "log.h"
#include "base/crc32c.h"
#include "base/siphash.h"

#define WAL_MAGIC "ORDOWAL"          /* with its NUL: 8 bytes */
#define WAL_VERSION 1u
#define WAL_HEADER_BYTES 40u
#define WAL_NAME_BYTES 24u           /* 20 digits + ".wal" */
#define WAL_MANIFEST_BYTES 32u
#define WAL_MANIFEST_NAME "manifest"
#define WAL_MANIFEST_TMP "manifest.tmp"
#define WAL_MANIFEST_MAGIC "ORDOMAN"     /* 7 chars + NUL = 8 bytes */
/* EVERYSEC: how long written records may stay unsynced. */
#define WAL_EVERYSEC_MS 1000u
/* Progress of a replay is printed this often. */
#define WAL_PROGRESS_MS 2000u
/* After a bad record, a later frame counts as "good" only if its revision
 * is at most this far past the last good one: a cheap test that rejects
 * almost every offset of random bytes before any checksum is computed. */
#define WAL_SCAN_REV_JUMP_MAX (UINT64_C(1) << 32)
/* The batch buffer is kept between batches up to this size. */
#define WAL_BATCH_KEEP_BYTES (4u << 20)

/* What the log knows about one segment file. */
typedef struct wal_seg_s {
    uint64_t seq;
    uint64_t bytes;                /* file size, header included */
    uint64_t records;
    uint64_t first_rev, last_rev;  /* of its records, if records > 0 */
} wal_seg_t;

typedef struct wal_thread_s {
    struct wal_s *w;
    uint32_t i;                    /* which sync_fd is this thread's */
} wal_thread_t;

struct wal_s {
    wal_options_t opt;             /* opt.dir points at dir below */
    char *dir;
    int dir_fd;                    /* also holds the flock on the directory */
    pthread_t threads[WAL_SYNC_PARALLEL_MAX];
    wal_thread_t targ[WAL_SYNC_PARALLEL_MAX]; /* what each log thread is given */
    uint32_t nthreads;             /* log threads: sync_parallel under ALWAYS, else 1 */
    bool running;                  /* the log threads were started */

    pthread_mutex_t mu;
    pthread_cond_t cv;             /* wakes a log thread */
    pthread_cond_t roll_cv;        /* wakes the writer that waits to roll (roll_waits) */
    /* Under mu. */
    ordo_buf_t pending;            /* frames appended, crc not yet filled */
    uint32_t pending_records;
    bool kicked;                   /* defer_wake: the core handed the pending records over */
    bool writing;                  /* a batch is being written, by the log thread or inline by
                                      the core: whoever set it owns the segment state below */
    uint64_t pending_since_ms;     /* when the oldest pending record came */
    uint64_t pending_peak;         /* highest pending_bytes seen */
    bool closing;
    wal_seg_t *segs;               /* oldest first; the last is being written */
    uint32_t nsegs, segs_cap;
    wal_stats_t stats;

    /* Core thread only. */
    uint64_t appended_rev;
    uint64_t appends, kicked_appends;  /* core thread only: appends made / handed over by wal_kick */
    ordo_buf_t inline_batch;       /* core thread only: the batch wal_kick writes itself */

    /* Log thread only (wal_open() before the thread starts), or the core
     * while it writes a batch inline: whoever set `writing`. */
    int fd;                        /* the segment being written */
    /* One more descriptor of that segment per log thread, opened when the
     * segment was created (or resumed), before any record went in: each
     * log thread syncs through its own, so a write-back error is reported
     * to every sync that covers it (see "Syncs in flight"). */
    int sync_fd[WAL_SYNC_PARALLEL_MAX];
    uint64_t seq, salt, off;
    uint64_t gapless_from;         /* the manifest's (see the format) */
    char path[4096];
    uint64_t written_rev;
    /* mu: chunks written so far, and how many of them a finished sync
     * covers; the segment is unsynced while they differ. */
    uint64_t write_seq, synced_seq;
    uint64_t last_sync_ms;         /* mu */
    uint32_t syncs_in_flight;      /* mu: log threads inside a sync (never the core's inline one) */
    bool roll_waits;               /* mu: the writer waits on roll_cv for syncs_in_flight to reach 0 */
    /* mu: log threads that wait for another writer (the core's inline batch,
     * or another log thread) to end (writer_waits), or one that waits for
     * the EVERYSEC deadline (sync_timer); a writer that ends wakes one
     * unless only the timed one waits. */
    uint32_t writer_waits;
    bool sync_timer;
    /* mu: gathering (see the format's head): the records to wait for (0:
     * not gathering) and until when (now_us()). */
    uint32_t gather_target;
    uint64_t gather_until_us;
    uint64_t last_sync_us;         /* mu: the last sync's duration */

    /* Any thread. failed_reason is written once, before failed is set. */
    _Atomic uint64_t durable_rev;
    _Atomic uint64_t pending_bytes; /* see Back-pressure */
    atomic_bool drain_wanted;      /* the core waits for pending_bytes to fall */
    atomic_bool failing;           /* claimed by the one wal_fail() that writes failed_reason */
    atomic_bool failed;
    char failed_reason[4352];
};

/* ---- little helpers -------------------------------------------------- */

const uint64_t wal_sync_bucket_us[WAL_SYNC_BUCKETS] = {50,    100,   250,   500,    1000,   2500,
                                                        5000,  10000, 25000, 50000, 100000, 250000};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* One more sync, of us microseconds, in the stats. With mu held (the loop
 * thread reads them). */
static void count_sync(wal_t *w, uint64_t us)
{
    size_t b = 0;
    while (b < WAL_SYNC_BUCKETS && us > wal_sync_bucket_us[b])
        b++;
    w->stats.syncs++;
    w->stats.sync_us_sum += us;
    w->stats.sync_hist[b]++;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const char *errstr(int e, char *buf, size_t n)
{
    return strerror_r(e, buf, n); /* GNU: returns the message */
}

/* Copy src into dst[0..n), cut if need be, always terminated. */
static void str_copy(char *dst, size_t n, const char *src)
{
    assert(n > 0);
    size_t k = strlen(src);
    if (k >= n)
        k = n - 1;
    memcpy(dst, src, k);
    dst[k] = '\0';
}

static void seg_name(char out[WAL_NAME_BYTES + 1], uint64_t seq)
{
    snprintf(out, WAL_NAME_BYTES + 1, "%020" PRIu64 ".wal", seq);
}

/* Sequence number of a segment file name, or 0 if name is not one. */
static uint64_t seg_parse_name(const char *name)
{
    if (strlen(name) != WAL_NAME_BYTES || strcmp(name + 20, ".wal") != 0)
        return 0;
    uint64_t seq = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        uint64_t d = (uint64_t)(name[i] - '0');
        if (seq > (UINT64_MAX - d) / 10)
            return 0;
        seq = seq * 10 + d;
    }
    return seq;
}

static void seg_path(const wal_t *w, uint64_t seq, char *out, size_t n)
{
    char name[WAL_NAME_BYTES + 1];
    seg_name(name, seq);
    snprintf(out, n, "%s/%s", w->dir, name);
}

/* Checksum of a frame: salt || rev || len || payload (see the format). */
static uint32_t frame_crc(uint64_t salt, uint64_t rev, uint32_t len, const void *payload)
{
    unsigned char pre[20];
    put_u64(pre, salt);
    put_u64(pre + 8, rev);
    put_u32(pre + 16, len);
    return ordo_crc32c(ordo_crc32c(0, pre, sizeof pre), payload, len);
}

/* ---- system calls through the seam -------------------------------------- */

static ssize_t io_pwrite(const wal_t *w, int fd, const void *buf, size_t n, off_t off)
{
    if (w->opt.io.pwrite_fn != NULL)
        return w->opt.io.pwrite_fn(w->opt.io.ctx, fd, buf, n, off);
    return pwrite(fd, buf, n, off);
}

static int io_fdatasync(const wal_t *w, int fd)
{
    if (w->opt.io.fdatasync_fn != NULL)
        return w->opt.io.fdatasync_fn(w->opt.io.ctx, fd);
    return fdatasync(fd);
}

/* A directory is made durable with fsync; through the seam it is one more
 * fdatasync call, so tests can fail it too. */
static int io_sync_dir(const wal_t *w)
{
    if (w->opt.io.fdatasync_fn != NULL)
        return w->opt.io.fdatasync_fn(w->opt.io.ctx, w->dir_fd);
    return fsync(w->dir_fd);
}

/* Write all n bytes at off (a short write is continued). Returns 0, or -1
 * with errno. */
static int write_all(const wal_t *w, int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = io_pwrite(w, fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0) {
            errno = EIO; /* no progress: do not spin */
            return -1;
        }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* ---- failure ------------------------------------------------------------- */

/* Enter the failed state for good: record why, stop publishing, tell the
 * core (on_durable). Called on a log thread, or the core writing inline. */
static void wal_fail(wal_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wal_fail(wal_t *w, const char *fmt, ...)
{
    if (atomic_exchange(&w->failing, true))
        return; /* another thread failed it first (two syncs in flight) */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->failed_reason, sizeof w->failed_reason, fmt, ap);
    va_end(ap);
    /* Under mu, so that publish() either sees it or has published before. */
    pthread_mutex_lock(&w->mu);
    atomic_store_explicit(&w->failed, true, memory_order_release);
    pthread_mutex_unlock(&w->mu);
    if (!w->running)
        return; /* wal_open() reports it as its error */
    fprintf(stderr, "wal: %s; the log accepts no more records\n", w->failed_reason);
    if (w->opt.on_durable != NULL)
        w->opt.on_durable(w->opt.on_durable_arg);
}

/* The failure of call on the file at path, with errno. Returns -1. */
static int fail_io(wal_t *w, const char *call, const char *path, uint64_t off)
{
    char eb[128];
    int e = errno;
    if (strcmp(call, "pwrite") == 0)
        wal_fail(w, "pwrite of %s at offset %" PRIu64 " failed: %s", path, off, errstr(e, eb, sizeof eb));
    else
        wal_fail(w, "%s of %s failed: %s", call, path, errstr(e, eb, sizeof eb));
    return -1;
}

/* ---- segments ------------------------------------------------------------ */

static void header_encode(unsigned char h[WAL_HEADER_BYTES], uint64_t seq, uint64_t salt)
{
    memset(h, 0, WAL_HEADER_BYTES);
    memcpy(h, WAL_MAGIC, 8);
    put_u32(h + 8, WAL_VERSION);
    put_u32(h + 12, WAL_HEADER_BYTES);
    put_u64(h + 16, seq);
    put_u64(h + 24, salt);
    put_u32(h + 32, ordo_crc32c(0, h, 32));
}

enum { HDR_OK, HDR_BAD, HDR_VERSION };

/* Check a header read back; *salt_out is set if HDR_OK. */
static int header_decode(const unsigned char *h, size_t size, uint64_t seq, uint64_t *salt_out)
{
    if (size < WAL_HEADER_BYTES || memcmp(h, WAL_MAGIC, 8) != 0)
        return HDR_BAD;
    if (get_u32(h + 32) != ordo_crc32c(0, h, 32) || get_u64(h + 16) != seq)
        return HDR_BAD;
    if (get_u32(h + 8) != WAL_VERSION || get_u32(h + 12) != WAL_HEADER_BYTES)
        return HDR_VERSION;
    *salt_out = get_u64(h + 24);
    return HDR_OK;
}

/* A random salt under which a frame of zeros does not check. */
static uint64_t salt_new(void)
{
    static const unsigned char zero[1];
    for (;;) {
        uint8_t key[ORDO_SIPHASH_KEY_LEN];
        (void)ordo_random_key(key); /* falls back to clock and ASLR bits */
        uint64_t salt = get_u64(key);
        if (frame_crc(salt, 0, 0, zero) != 0)
            return salt;
    }
}

static void segs_push(wal_t *w, const wal_seg_t *s)
{
    if (w->nsegs == w->segs_cap) {
        w->segs_cap = w->segs_cap ? 2 * w->segs_cap : 8;
        w->segs = ordo_xrealloc(w->segs, w->segs_cap * sizeof *w->segs);
    }
    w->segs[w->nsegs++] = *s;
}

/* Give each log thread a descriptor of segment `name` (sync_fd), closing
 * those of the segment before. The caller owns the segment state and no
 * sync is in flight; no record is in the segment yet, so every later
 * write-back error of the file reaches each descriptor's next sync.
 * Returns 0, or -1 with errno set. */
static int sync_fds_open(wal_t *w, const char *name)
{
    for (uint32_t i = 0; i < w->nthreads; i++) {
        int fd = openat(w->dir_fd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        if (w->sync_fd[i] >= 0)
            close(w->sync_fd[i]);
        w->sync_fd[i] = fd;
    }
    return 0;
}

/* manifest_write() -- record seq as the newest segment created (see the
 * format above). Plain system calls, not the test seams: a fault injected
 * into the Nth write means the Nth write of records. Returns 0, or -1
 * with errno set. */
static int manifest_write(const wal_t *w, uint64_t seq)
{
    assert(w->gapless_from >= 1 && w->gapless_from <= seq);
    unsigned char m[WAL_MANIFEST_BYTES] = {0};
    memcpy(m, WAL_MANIFEST_MAGIC, 8);
    put_u64(m + 8, seq);
    put_u64(m + 16, w->gapless_from);
    put_u32(m + 24, ordo_crc32c(0, m, 24));
    int fd = openat(w->dir_fd, WAL_MANIFEST_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int rc = pwrite(fd, m, sizeof m, 0) == (ssize_t)sizeof m && fdatasync(fd) == 0 ? 0 : -1;
    int e = errno;
    close(fd);
    if (rc == 0)
        rc = renameat(w->dir_fd, WAL_MANIFEST_TMP, w->dir_fd, WAL_MANIFEST_NAME);
    if (rc == 0)
        rc = fsync(w->dir_fd);
    else
        errno = e;
    return rc;
}

/* manifest_read() -- *seq_out gets the manifest's newest segment number
 * and *from_out its gapless_from, both 0 if there is no manifest (a new
 * log, or one written before it existed). Returns 0, or -1 if it cannot
 * be read or is damaged (err says which). */
static int manifest_read(const wal_t *w, uint64_t *seq_out, uint64_t *from_out, char *err, size_t err_len)
{
    char eb[128];
    unsigned char m[WAL_MANIFEST_BYTES];
    *seq_out = 0;
    *from_out = 0;
    int fd = openat(w->dir_fd, WAL_MANIFEST_NAME, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0) {
        snprintf(err, err_len, "wal: cannot open %s/%s: %s", w->dir, WAL_MANIFEST_NAME, errstr(errno, eb, sizeof eb));
        return -1;
    }
    ssize_t n = pread(fd, m, sizeof m, 0);
    close(fd);
    if (n != (ssize_t)sizeof m || memcmp(m, WAL_MANIFEST_MAGIC, 8) != 0 || get_u32(m + 24) != ordo_crc32c(0, m, 24) ||
        get_u64(m + 16) == 0 || get_u64(m + 16) > get_u64(m + 8)) {
        snprintf(err, err_len, "wal corrupt: %s/%s is damaged (%zd bytes); it names the newest log segment, so "
                 "a missing one can be told from a log that ended; --wal-repair yes rewrites it from the "
                 "segments present", w->dir, WAL_MANIFEST_NAME, n);
        return -1;
    }
    *seq_out = get_u64(m + 8);
    *from_out = get_u64(m + 16);
    assert(*from_out >= 1 && *from_out <= *seq_out);
    return 0;
}

/* Create segment seq, write and sync its header, sync the directory, make
 * it the segment being written. Returns 0, or -1 with the log failed. */
static int segment_create(wal_t *w, uint64_t seq)
{
    char path[sizeof w->path];
    unsigned char h[WAL_HEADER_BYTES];
    seg_path(w, seq, path, sizeof path);
    char name[WAL_NAME_BYTES + 1];
    seg_name(name, seq);
    int fd = openat(w->dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail_io(w, "open", path, 0);
    uint64_t salt = salt_new();
    header_encode(h, seq, salt);
    uint64_t check;
    assert(header_decode(h, sizeof h, seq, &check) == HDR_OK && check == salt);
    if (write_all(w, fd, h, sizeof h, 0) != 0) {
        fail_io(w, "pwrite", path, 0);
        goto fail_close;
    }
    if (io_fdatasync(w, fd) != 0) {
        fail_io(w, "fdatasync", path, 0);
        goto fail_close;
    }
    if (io_sync_dir(w) != 0) {
        fail_io(w, "fsync", w->dir, 0);
        goto fail_close;
    }
    if (manifest_write(w, seq) != 0) {
        char mpath[sizeof w->path];
        snprintf(mpath, sizeof mpath, "%s/%s", w->dir, WAL_MANIFEST_NAME);
        fail_io(w, "write", mpath, 0);
        goto fail_close;
    }
    if (sync_fds_open(w, name) != 0) {
        fail_io(w, "open", path, 0);
        goto fail_close;
    }
    if (w->fd >= 0)
        close(w->fd);
    w->fd = fd;
    w->seq = seq;
    w->salt = salt;
    w->off = WAL_HEADER_BYTES;
    memcpy(w->path, path, sizeof path);
    wal_seg_t s = {.seq = seq, .bytes = WAL_HEADER_BYTES};
    pthread_mutex_lock(&w->mu);
    segs_push(w, &s);
    w->stats.segments = w->nsegs;
    pthread_mutex_unlock(&w->mu);
    return 0;
fail_close:
    close(fd);
    return -1;
}

/* fdatasync fd, a descriptor of the segment being written, which covers
 * the first seq chunks written; count it. Returns 0, or -1 with the log
 * failed. No mutex held; the caller owns the segment state or counts in
 * syncs_in_flight, so no roll changes the segment meanwhile. */
static int sync_through(wal_t *w, int fd, uint64_t seq)
{
    uint64_t t0 = now_us();
    if (io_fdatasync(w, fd) != 0)
        return fail_io(w, "fdatasync", w->path, 0);
    uint64_t us = now_us() - t0;
    pthread_mutex_lock(&w->mu);
    if (seq > w->synced_seq)
        w->synced_seq = seq;
    w->last_sync_us = us;
    w->last_sync_ms = now_ms();
    count_sync(w, us);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* Seal the segment being written (sync it) and start the next one. The
 * caller owns the segment state; syncs in flight on the old segment's
 * descriptors end first. */
static int segment_roll(wal_t *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->syncs_in_flight > 0) {
        w->roll_waits = true;
        pthread_cond_wait(&w->roll_cv, &w->mu);
    }
    w->roll_waits = false;
    uint64_t seq = w->write_seq;
    bool unsynced = w->synced_seq != seq;
    pthread_mutex_unlock(&w->mu);
    if (unsynced && sync_through(w, w->fd, seq) != 0)
        return -1;
    return segment_create(w, w->seq + 1);
}

/* ---- the log thread --------------------------------------------------------- */

/* Fill in the checksums of the frames in b[0..n) with the current salt and
 * count them; *first_rev and *last_rev get their revisions. */
static uint64_t frames_seal(wal_t *w, unsigned char *b, size_t n, uint64_t *first_rev, uint64_t *last_rev)
{
    uint64_t records = 0;
    for (size_t pos = 0; pos < n;) {
        uint32_t len = get_u32(b + pos);
        uint64_t rev = get_u64(b + pos + 8);
        assert(len <= w->opt.record_bytes_max);
        assert(pos + WAL_FRAME_BYTES + len <= n);
        assert(rev >= w->written_rev);
        put_u32(b + pos + 4, frame_crc(w->salt, rev, len, b + pos + WAL_FRAME_BYTES));
        if (records++ == 0)
            *first_rev = rev;
        *last_rev = rev;
        w->written_rev = rev;
        pos += WAL_FRAME_BYTES + len;
    }
    return records;
}

/* How many bytes of frames from b[pos..n) go into the current segment:
 * frames are taken while the segment is shorter than segment_bytes. */
static size_t chunk_bytes(const wal_t *w, const unsigned char *b, size_t pos, size_t n)
{
    size_t end = pos;
    while (end < n && w->off + (end - pos) < w->opt.segment_bytes)
        end += WAL_FRAME_BYTES + get_u32(b + end);
    return end - pos;
}

/* Write frames b[pos..pos+k) at the end of the current segment. */
static int chunk_write(wal_t *w, unsigned char *b, size_t pos, size_t k)
{
    uint64_t first_rev = 0, last_rev = 0;
    uint64_t records = frames_seal(w, b + pos, k, &first_rev, &last_rev);
    if (write_all(w, w->fd, b + pos, k, w->off) != 0)
        return fail_io(w, "pwrite", w->path, w->off);
    w->off += k;
    pthread_mutex_lock(&w->mu);
    w->write_seq++;
    wal_seg_t *s = &w->segs[w->nsegs - 1];
    assert(s->seq == w->seq);
    if (s->records == 0)
        s->first_rev = first_rev;
    s->last_rev = last_rev;
    s->records += records;
    s->bytes = w->off;
    w->stats.records_written += records;
    w->stats.bytes_written += k;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* Write a batch of frames, rolling segments as they fill. */
static int batch_write(wal_t *w, ordo_buf_t *batch)
{
    unsigned char *b = (unsigned char *)batch->data;
    size_t pos = 0;
    while (pos < batch->len) {
        if (w->off >= w->opt.segment_bytes && w->off > WAL_HEADER_BYTES && segment_roll(w) != 0)
            return -1;
        size_t k = chunk_bytes(w, b, pos, batch->len);
        if (k == 0) /* only a fresh, tiny segment_bytes gets here */
            k = WAL_FRAME_BYTES + get_u32(b + pos);
        if (chunk_write(w, b, pos, k) != 0)
            return -1;
        pos += k;
    }
    if (batch->len > 0) {
        pthread_mutex_lock(&w->mu);
        w->stats.batches++;
        pthread_mutex_unlock(&w->mu);
    }
    return 0;
}

/* With mu held: the segment has chunks no finished sync covers, and the
 * policy (or closing) wants them synced now. */
static bool sync_due(const wal_t *w, bool closing)
{
    if (w->synced_seq == w->write_seq)
        return false;
    return closing || w->opt.policy == WAL_SYNC_ALWAYS ||
           (w->opt.policy == WAL_SYNC_EVERYSEC && now_ms() - w->last_sync_ms >= WAL_EVERYSEC_MS);
}

/* Publish rev as durable, as the policy lets us call it once its batch is
 * written (and synced, if due), and say so. Syncs in flight may end out of
 * order: the highest revision stays. Nothing after a failure (under mu,
 * as wal_fail() sets it). */
static void publish(wal_t *w, uint64_t rev, bool notify)
{
    pthread_mutex_lock(&w->mu);
    bool advanced = !atomic_load_explicit(&w->failed, memory_order_relaxed) &&
                    rev > atomic_load_explicit(&w->durable_rev, memory_order_relaxed);
    if (advanced)
        atomic_store_explicit(&w->durable_rev, rev, memory_order_release);
    pthread_mutex_unlock(&w->mu);
    if (advanced && notify && w->opt.on_durable != NULL)
        w->opt.on_durable(w->opt.on_durable_arg);
}

/* A batch of n bytes is done (or dropped): it is no longer pending. Wake a
 * core that waits for the pending bytes to fall (see Back-pressure). */
static void batch_done(wal_t *w, size_t n)
{
    if (n == 0)
        return;
    uint64_t left = atomic_fetch_sub(&w->pending_bytes, (uint64_t)n) - (uint64_t)n;
    if (!atomic_load(&w->drain_wanted))
        return;
    if (left > w->opt.pending_bytes_max && !atomic_load(&w->failed))
        return;
    if (atomic_exchange(&w->drain_wanted, false) && w->opt.on_durable != NULL)
        w->opt.on_durable(w->opt.on_durable_arg);
}

static void cv_wait_until(wal_t *w, uint64_t deadline_ms)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000u),
                          .tv_nsec = (long)(deadline_ms % 1000u) * 1000000L};
    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
}

static void cv_wait_until_us(wal_t *w, uint64_t deadline_us)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_us / 1000000u),
                          .tv_nsec = (long)(deadline_us % 1000000u) * 1000L};
    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
}

/* With mu held: a gathering is under way and its target not reached. */
static bool gathering(const wal_t *w)
{
    return w->gather_target > 0 && w->pending_records < w->gather_target && now_us() < w->gather_until_us;
}

/* With mu held, after a synced batch of n records (ALWAYS): start a
 * gathering for the next one (see the format's head), unless it is off
 * or already met. */
static void gather_start(wal_t *w, uint32_t n)
{
    w->gather_target = 0;
    if (w->opt.sync_gather_max_us == 0 || w->opt.policy != WAL_SYNC_ALWAYS || w->opt.sync_interval_ms != 0 ||
        w->closing)
        return;
    uint64_t target = (uint64_t)n + w->pending_records;
    if (target <= w->pending_records || target > UINT32_MAX)
        return;
    uint64_t wait = w->last_sync_us < w->opt.sync_gather_max_us ? w->last_sync_us : w->opt.sync_gather_max_us;
    w->gather_target = (uint32_t)target;
    w->gather_until_us = now_us() + wait;
}

/* With mu held, wait until no one else writes and there is something to
 * do: records to write (after the group-commit wait, under ALWAYS with
 * sync_interval_ms), an EVERYSEC sync that is due, or closing. */
static void log_wait(wal_t *w)
{
    for (;;) {
        if (w->writing) { /* the core (wal_kick) or another log thread writes a batch */
            w->writer_waits++;
            pthread_cond_wait(&w->cv, &w->mu);
            w->writer_waits--;
            continue;
        }
        if (w->closing)
            return;
        if (w->pending_records > 0 && (w->kicked || !w->opt.defer_wake)) {
            if (w->opt.policy != WAL_SYNC_ALWAYS || w->opt.sync_interval_ms == 0) {
                if (gathering(w)) {
                    cv_wait_until_us(w, w->gather_until_us);
                    continue;
                }
                w->gather_target = 0;
                return;
            }
            if (w->opt.sync_batch_max > 0 && w->pending_records >= w->opt.sync_batch_max)
                return;
            uint64_t deadline = w->pending_since_ms + w->opt.sync_interval_ms;
            if (now_ms() >= deadline)
                return;
            cv_wait_until(w, deadline);
            continue;
        }
        if (w->opt.policy == WAL_SYNC_EVERYSEC && w->synced_seq != w->write_seq) {
            uint64_t deadline = w->last_sync_ms + WAL_EVERYSEC_MS;
            if (now_ms() >= deadline)
                return;
            w->sync_timer = true;
            cv_wait_until(w, deadline);
            w->sync_timer = false;
            continue;
        }
        pthread_cond_wait(&w->cv, &w->mu);
    }
}

/* One log thread: take what is pending, write it (owning the segment
 * state), hand the segment over, then sync what it wrote through its own
 * descriptor while the next log thread may already write the next batch,
 * and publish. */
static void *log_main(void *arg)
{
    const wal_thread_t *t = arg;
    wal_t *w = t->w;
    ordo_buf_t batch = ORDO_BUF_INIT;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        log_wait(w);
        w->writing = true;
        bool closing = w->closing;
        ordo_buf_t tmp = w->pending;
        w->pending = batch;
        batch = tmp;
        uint32_t n = w->pending_records;
        w->pending_records = 0;
        w->kicked = false;
        pthread_mutex_unlock(&w->mu);

        bool ok = !atomic_load_explicit(&w->failed, memory_order_relaxed) && batch_write(w, &batch) == 0;
        uint64_t rev = w->written_rev;
        int fd = w->sync_fd[t->i];
        pthread_mutex_lock(&w->mu);
        uint64_t seq = w->write_seq;
        bool sync = ok && sync_due(w, closing);
        if (sync && w->syncs_in_flight++ > 0)
            w->stats.syncs_overlapped++;
        w->writing = false;
        bool wake = w->writer_waits > 0;
        pthread_mutex_unlock(&w->mu);
        if (wake)
            pthread_cond_signal(&w->cv);

        if (sync)
            ok = sync_through(w, fd, seq) == 0;
        /* Under ALWAYS everything written is synced by now (by this sync,
         * or one before it that covered it all); under EVERYSEC and NO a
         * written revision is published. */
        if (ok)
            publish(w, rev, true);
        batch_done(w, batch.len);
        ordo_buf_reset(&batch, WAL_BATCH_KEEP_BYTES);

        pthread_mutex_lock(&w->mu);
        if (sync) {
            /* The sync counts as in flight until its gathering target is
             * set: a writer it answered that comes back first is not
             * written inline (inline_due()). */
            assert(w->syncs_in_flight > 0);
            w->syncs_in_flight--;
            if (ok && n > 0)
                gather_start(w, n);
            if (w->roll_waits && w->syncs_in_flight == 0)
                pthread_cond_signal(&w->roll_cv);
        }
        if (closing && w->pending.len == 0)
            break;
    }
    pthread_mutex_unlock(&w->mu);
    ordo_buf_free(&batch);
    return NULL;
}

/* ---- the core's side ------------------------------------------------------ */

int wal_append(wal_t *w, uint64_t rev, const void *rec, size_t len)
{
    if (atomic_load_explicit(&w->failed, memory_order_acquire) || len > w->opt.record_bytes_max)
        return -1;
    assert(rev >= w->appended_rev);
    w->appended_rev = rev;
    w->appends++;
    pthread_mutex_lock(&w->mu);
    unsigned char *p = (unsigned char *)ordo_buf_reserve(&w->pending, WAL_FRAME_BYTES + len);
    put_u32(p, (uint32_t)len);
    put_u32(p + 4, 0); /* the log thread fills in the salted crc */
    put_u64(p + 8, rev);
    if (len > 0)
        memcpy(p + WAL_FRAME_BYTES, rec, len);
    w->pending.len += WAL_FRAME_BYTES + len;
    uint64_t q = atomic_fetch_add(&w->pending_bytes, WAL_FRAME_BYTES + len) + WAL_FRAME_BYTES + len;
    if (q > w->pending_peak)
        w->pending_peak = q;
    if (w->pending_records++ == 0)
        w->pending_since_ms = now_ms();
    bool wake = !w->opt.defer_wake && (w->pending_records == 1 || w->pending_records == w->opt.sync_batch_max ||
                                       w->pending_records == w->gather_target);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->cv);
    return 0;
}

int wal_append_frames(wal_t *w, const void *frames, size_t bytes, uint32_t records, uint64_t last_rev)
{
    if (atomic_load_explicit(&w->failed, memory_order_acquire))
        return -1;
    assert(records > 0 && bytes >= (size_t)records * WAL_FRAME_BYTES && last_rev >= w->appended_rev);
#ifdef ORDO_DEBUG
    {   /* Each frame: a length within the limit, a zero crc, revisions that do not go down. */
        const unsigned char *f = frames;
        size_t off = 0;
        uint64_t prev = w->appended_rev;
        for (uint32_t i = 0; i < records; i++) {
            assert(off + WAL_FRAME_BYTES <= bytes);
            uint32_t len = get_u32(f + off);
            assert(len <= w->opt.record_bytes_max && get_u32(f + off + 4) == 0 && get_u64(f + off + 8) >= prev);
            prev = get_u64(f + off + 8);
            off += WAL_FRAME_BYTES + len;
        }
        assert(off == bytes && prev == last_rev);
    }
#endif
    w->appended_rev = last_rev;
    w->appends += records;
    pthread_mutex_lock(&w->mu);
    ordo_buf_append(&w->pending, frames, bytes);
    uint64_t q = atomic_fetch_add(&w->pending_bytes, bytes) + bytes;
    if (q > w->pending_peak)
        w->pending_peak = q;
    uint32_t before = w->pending_records;
    if (before == 0)
        w->pending_since_ms = now_ms();
    w->pending_records += records;
    uint32_t max = (uint32_t)w->opt.sync_batch_max;
    bool wake = !w->opt.defer_wake && (before == 0 || (max > 0 && before < max && w->pending_records >= max) ||
                                       (w->gather_target > before && w->pending_records >= w->gather_target));
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->cv);
    return 0;
}

/* With mu held: the core should write the pending records itself (see
 * wal_options_t.sync_inline_max). */
static bool inline_due(const wal_t *w)
{
    if (w->opt.sync_inline_max == 0 || w->writing || w->closing || w->pending_records == 0 || gathering(w))
        return false;
    if (w->syncs_in_flight > 0 && w->opt.policy == WAL_SYNC_ALWAYS)
        return false; /* a log thread is syncing: the core would wait behind it */
    if (w->opt.policy != WAL_SYNC_ALWAYS)
        return true; /* only a write to the OS: cheap at any batch size */
    return w->opt.sync_interval_ms == 0 && w->pending_records <= w->opt.sync_inline_max;
}

/* The core writes, syncs and publishes the pending records itself, as the
 * log thread would, without waking it or being woken. */
static void kick_inline(wal_t *w)
{
    w->writing = true;
    ordo_buf_t t = w->pending;
    w->pending = w->inline_batch;
    w->inline_batch = t;
    w->pending_records = 0;
    w->kicked = false;
    pthread_mutex_unlock(&w->mu);
    /* Under EVERYSEC and NO the core only writes: the periodic sync stays
     * on the log thread, so the core never waits for the disk's flush. */
    bool ok = !atomic_load_explicit(&w->failed, memory_order_relaxed) && batch_write(w, &w->inline_batch) == 0;
    if (ok && w->opt.policy == WAL_SYNC_ALWAYS) {
        pthread_mutex_lock(&w->mu);
        uint64_t seq = w->write_seq;
        bool due = sync_due(w, false);
        pthread_mutex_unlock(&w->mu);
        ok = !due || sync_through(w, w->fd, seq) == 0;
    }
    if (ok)
        publish(w, w->written_rev, false);
    batch_done(w, w->inline_batch.len);
    ordo_buf_reset(&w->inline_batch, WAL_BATCH_KEEP_BYTES);
    pthread_mutex_lock(&w->mu);
    w->writing = false;
    w->stats.inline_batches++;
    /* A log thread may wait for this batch to end, or sleep without a
     * deadline while an EVERYSEC sync is now owed: let it look again. */
    bool wake = w->writer_waits > 0 ||
                (w->opt.policy == WAL_SYNC_EVERYSEC && w->synced_seq != w->write_seq && !w->sync_timer);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->cv);
}

int wal_kick(wal_t *w)
{
    if (w->appends == w->kicked_appends)
        return 0; /* nothing appended since the last kick */
    w->kicked_appends = w->appends;
    pthread_mutex_lock(&w->mu);
    if (inline_due(w)) {
        kick_inline(w);
        return 1;
    }
    /* Set the flag only over records that are there: the log thread may
     * have taken them already, and a flag left set over nothing would
     * swallow the wake-up of the next real kick. */
    bool wake = w->pending_records > 0 &&
                (!w->kicked || (w->gather_target > 0 && w->pending_records >= w->gather_target));
    if (w->pending_records > 0)
        w->kicked = true;
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->cv);
    return 0;
}

bool wal_backlogged(wal_t *w)
{
    uint64_t max = w->opt.pending_bytes_max;
    if (max == 0 || atomic_load(&w->pending_bytes) <= max || atomic_load(&w->failed))
        return false;
    atomic_store(&w->drain_wanted, true);
    return atomic_load(&w->pending_bytes) > max; /* if it fell meanwhile, a spare wake-up is harmless */
}

uint64_t wal_pending_bytes(const wal_t *w)
{
    return atomic_load(&w->pending_bytes);
}

uint64_t wal_durable_rev(const wal_t *w)
{
    return atomic_load_explicit(&w->durable_rev, memory_order_acquire);
}

const char *wal_failed(const wal_t *w)
{
    if (!atomic_load_explicit(&w->failed, memory_order_acquire))
        return NULL;
    return w->failed_reason;
}

int wal_remove_before(wal_t *w, uint64_t rev)
{
    int removed = 0;
    pthread_mutex_lock(&w->mu);
    while ((uint32_t)removed + 1 < w->nsegs) {
        const wal_seg_t *s = &w->segs[removed];
        if (s->records > 0 && s->last_rev > rev)
            break;
        char name[WAL_NAME_BYTES + 1];
        seg_name(name, s->seq);
        if (unlinkat(w->dir_fd, name, 0) != 0 && errno != ENOENT)
            break;
        removed++;
    }
    memmove(w->segs, w->segs + removed, (w->nsegs - (uint32_t)removed) * sizeof *w->segs);
    w->nsegs -= (uint32_t)removed;
    w->stats.segments = w->nsegs;
    pthread_mutex_unlock(&w->mu);
    return removed;
}

uint64_t wal_bytes(const wal_t *w)
{
    uint64_t n = 0;
    pthread_mutex_lock((pthread_mutex_t *)&w->mu);
    for (uint32_t i = 0; i < w->nsegs; i++)
        n += w->segs[i].bytes;
    pthread_mutex_unlock((pthread_mutex_t *)&w->mu);
    return n;
}

void wal_get_stats(const wal_t *w, wal_stats_t *out)
{
    pthread_mutex_lock((pthread_mutex_t *)&w->mu);
    *out = w->stats;
    out->pending_bytes = atomic_load(&w->pending_bytes);
    out->pending_bytes_peak = w->pending_peak;
    pthread_mutex_unlock((pthread_mutex_t *)&w->mu);
}

static void wal_free(wal_t *w)
{
    if (w->fd >= 0)
        close(w->fd);
    for (uint32_t i = 0; i < WAL_SYNC_PARALLEL_MAX; i++)
        if (w->sync_fd[i] >= 0)
            close(w->sync_fd[i]);
    if (w->dir_fd >= 0)
        close(w->dir_fd); /* releases the flock */
    ordo_buf_free(&w->pending);
    ordo_buf_free(&w->inline_batch);
    pthread_cond_destroy(&w->cv);
    pthread_cond_destroy(&w->roll_cv);
    pthread_mutex_destroy(&w->mu);
    free(w->segs);
    free(w->dir);
    free(w);
}

void wal_close(wal_t *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->closing = true;
    pthread_mutex_unlock(&w->mu);
    pthread_cond_broadcast(&w->cv);
    for (uint32_t i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    wal_free(w);
}

/* ---- recovery ----------------------------------------------------------------- */

/* State of a recovery, carried from segment to segment. */
typedef struct scan_s {
    wal_t *w;
    uint64_t after_rev;
    wal_replay_fn fn;
    void *arg;
    wal_recovery_t *rec;
    uint64_t prev_rev;             /* revision of the last good record */
    uint64_t scanned;              /* good records read, replayed or not */
    uint64_t progress_ms;          /* when progress was last printed */
    bool corrupt;                  /* the error is corruption at corrupt_at (repairable) */
    size_t corrupt_at;
    char *err;
    size_t err_len;
} scan_t;

/* The frame at b[off..size) if good: its length in *len_out, revision in
 * *rev_out. Checks that it fits and that its salted checksum matches. */
static bool frame_good(const unsigned char *b, size_t size, size_t off, uint64_t salt, uint32_t *len_out,
                       uint64_t *rev_out)
{
    if (size - off < WAL_FRAME_BYTES)
        return false;
    uint32_t len = get_u32(b + off);
    if (len > WAL_RECORD_BYTES_LIMIT || len > size - off - WAL_FRAME_BYTES)
        return false;
    uint64_t rev = get_u64(b + off + 8);
    if (get_u32(b + off + 4) != frame_crc(salt, rev, len, b + off + WAL_FRAME_BYTES))
        return false;
    *len_out = len;
    *rev_out = rev;
    return true;
}

/* Offset of the first good frame starting in b(from..size) with a plausible
 * revision (see WAL_SCAN_REV_JUMP_MAX), or 0 if there is none. */
static size_t frame_find(const unsigned char *b, size_t size, size_t from, uint64_t salt, uint64_t prev_rev)
{
    for (size_t off = from; off + WAL_FRAME_BYTES <= size; off++) {
        uint64_t rev = get_u64(b + off + 8);
        if (rev < prev_rev || rev - prev_rev > WAL_SCAN_REV_JUMP_MAX)
            continue;
        uint32_t len;
        if (frame_good(b, size, off, salt, &len, &rev))
            return off;
    }
    return 0;
}

static void scan_progress(scan_t *sc, const char *path)
{
    uint64_t t = now_ms();
    if (t - sc->progress_ms < WAL_PROGRESS_MS)
        return;
    sc->progress_ms = t;
    fprintf(stderr, "wal: reading %s: %" PRIu64 " records so far (%" PRIu64 " replayed), revision %" PRIu64 "\n",
            path, sc->scanned, sc->rec->records, sc->prev_rev);
}

/* One good record at path:off: check its revision, replay it. */
static int scan_record(scan_t *sc, const char *path, size_t off, uint64_t rev, const unsigned char *p, uint32_t len)
{
    if (rev < sc->prev_rev) {
        snprintf(sc->err, sc->err_len, "wal corrupt: %s: record at byte offset %zu has revision %" PRIu64
                 ", below the revision %" PRIu64 " before it", path, off, rev, sc->prev_rev);
        sc->corrupt = true;
        sc->corrupt_at = off;
        return -1;
    }
    sc->prev_rev = rev;
    sc->rec->last_rev = rev;
    if ((++sc->scanned & 4095u) == 0)
        scan_progress(sc, path);
    if (rev <= sc->after_rev)
        return 0;
    int rc = sc->fn != NULL ? sc->fn(sc->arg, rev, p, len) : 0;
    if (rc != 0) {
        snprintf(sc->err, sc->err_len, "wal replay: record of revision %" PRIu64 " at %s byte offset %zu refused (%d)",
                 rev, path, off, rc);
        return -1;
    }
    sc->rec->records++;
    return 0;
}

/* Replay the records of a segment's contents b[0..size); on a bad record,
 * decide between a torn tail (*end_out = its offset, last segment only) and
 * corruption (-1). s gets the segment's revisions and record count. */
static int scan_records(scan_t *sc, const char *path, const unsigned char *b, size_t size, uint64_t salt,
                        bool last, wal_seg_t *s, size_t *end_out)
{
    size_t off = WAL_HEADER_BYTES;
    while (off < size) {
        uint32_t len;
        uint64_t rev;
        if (!frame_good(b, size, off, salt, &len, &rev))
            break;
        assert(off + WAL_FRAME_BYTES + len <= size);
        if (scan_record(sc, path, off, rev, b + off + WAL_FRAME_BYTES, len) != 0) {
            *end_out = off;
            return -1;
        }
        if (s->records++ == 0)
            s->first_rev = rev;
        s->last_rev = rev;
        off += WAL_FRAME_BYTES + len;
    }
    *end_out = off;
    if (off == size)
        return 0;
    size_t next = frame_find(b, size, off + 1, salt, sc->prev_rev);
    if (next != 0) {
        snprintf(sc->err, sc->err_len, "wal corrupt: %s: bad record at byte offset %zu, followed by a good one at "
                 "offset %zu", path, off, next);
        sc->corrupt = true;
        sc->corrupt_at = off;
        return -1;
    }
    if (!last) {
        snprintf(sc->err, sc->err_len, "wal corrupt: %s: bad record at byte offset %zu, and it is not the last "
                 "segment", path, off);
        sc->corrupt = true;
        sc->corrupt_at = off;
        return -1;
    }
    return 0;
}

static bool all_zero(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return false;
    return true;
}

enum { SEG_OK, SEG_TORN_CREATE, SEG_CORRUPT, SEG_ERROR };

/* Recover segment s->seq (the last one if last): replay, cut a torn tail.
 * Returns SEG_OK (s filled in, *salt_out, *end_out where appending would
 * resume), SEG_TORN_CREATE (a last segment without a header, removed),
 * SEG_CORRUPT (repair is on and the segment is corrupt from sc->corrupt_at
 * on, 0 for a bad header: s, *salt_out and *end_out cover what is good
 * before it; nothing was changed on disk), or SEG_ERROR with sc->err. */
static int scan_segment(scan_t *sc, wal_seg_t *s, bool last, uint64_t *salt_out, uint64_t *end_out)
{
    wal_t *w = sc->w;
    char path[sizeof w->path], eb[128];
    char name[WAL_NAME_BYTES + 1];
    unsigned char *b = NULL;
    size_t size = 0, end = 0;
    int rc = SEG_ERROR;
    seg_path(w, s->seq, path, sizeof path);
    seg_name(name, s->seq);
    int fd = openat(w->dir_fd, name, O_RDWR | O_CLOEXEC);
    if (fd < 0 || log_file_read(fd, &b, &size) != 0) {
        snprintf(sc->err, sc->err_len, "wal: cannot read %s: %s", path, errstr(errno, eb, sizeof eb));
        goto out_close;
    }
    int h = header_decode(b, size, s->seq, salt_out);
    if (h == HDR_BAD && last && (size <= WAL_HEADER_BYTES || all_zero(b, size))) {
        s->bytes = size;
        rc = SEG_TORN_CREATE;
        goto out_free;
    }
    if (h != HDR_OK) {
        snprintf(sc->err, sc->err_len, "wal corrupt: %s: %s segment header", path,
                 h == HDR_VERSION ? "unsupported format version in" : "bad");
        if (h == HDR_BAD && w->opt.repair) {
            sc->corrupt = true;
            sc->corrupt_at = 0;
            s->bytes = size;
            rc = SEG_CORRUPT;
        }
        goto out_free;
    }
    if (scan_records(sc, path, b, size, *salt_out, last, s, &end) != 0) {
        if (sc->corrupt && w->opt.repair) {
            s->bytes = size; /* the cut moves [end, size) aside */
            *end_out = end;
            rc = SEG_CORRUPT;
        }
        goto out_free;
    }
    if (end < size && sc->rec->truncated_file[0] == '\0') {
        if (ftruncate(fd, (off_t)end) != 0 || io_fdatasync(w, fd) != 0) {
            snprintf(sc->err, sc->err_len, "wal: cannot cut the torn tail of %s at %zu: %s", path, end,
                     errstr(errno, eb, sizeof eb));
            goto out_free;
        }
        sc->rec->truncated_bytes = size - end;
        sc->rec->truncated_at = end;
        str_copy(sc->rec->truncated_file, sizeof sc->rec->truncated_file, path);
        fprintf(stderr, "wal: cut a torn tail of %zu bytes from %s at offset %zu\n", size - end, path, end);
    }
    s->bytes = end;
    *end_out = end;
    rc = SEG_OK;
out_free:
    free(b);
out_close:
    if (fd >= 0)
        close(fd);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The sequence numbers of the segments in the directory, sorted. */
static int segs_list(wal_t *w, uint64_t **out, size_t *n_out)
{
    int fd = dup(w->dir_fd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    uint64_t *seqs = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t seq = seg_parse_name(e->d_name);
        if (seq == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            seqs = ordo_xrealloc(seqs, cap * sizeof *seqs);
        }
        seqs[n++] = seq;
    }
    closedir(d);
    if (n > 0)
        qsort(seqs, n, sizeof *seqs, cmp_u64);
    *out = seqs;
    *n_out = n;
    return 0;
}

/* Make the last recovered segment the one being written: reopen it, sync
 * what a crash under NO/EVERYSEC may have left only in the page cache. */
static int resume_segment(wal_t *w, uint64_t seq, uint64_t salt, uint64_t end, char *err, size_t err_len)
{
    char name[WAL_NAME_BYTES + 1], eb[128];
    seg_name(name, seq);
    seg_path(w, seq, w->path, sizeof w->path);
    w->fd = openat(w->dir_fd, name, O_RDWR | O_CLOEXEC);
    if (w->fd < 0 || io_fdatasync(w, w->fd) != 0 || sync_fds_open(w, name) != 0) {
        snprintf(err, err_len, "wal: cannot reopen %s: %s", w->path, errstr(errno, eb, sizeof eb));
        return -1;
    }
    w->seq = seq;
    w->salt = salt;
    w->off = end;
    return 0;
}

/* Remove a last segment whose creation was torn (no header on disk, so no
 * record in it was ever acknowledged), and report it as a cut. */
static int remove_torn(scan_t *sc, const wal_seg_t *s)
{
    wal_t *w = sc->w;
    char name[WAL_NAME_BYTES + 1], path[sizeof w->path], eb[128];
    seg_name(name, s->seq);
    seg_path(w, s->seq, path, sizeof path);
    if (unlinkat(w->dir_fd, name, 0) != 0 || io_sync_dir(w) != 0) {
        snprintf(sc->err, sc->err_len, "wal: cannot remove the half-created %s: %s", path,
                 errstr(errno, eb, sizeof eb));
        return -1;
    }
    sc->rec->truncated_bytes = s->bytes;
    sc->rec->truncated_at = 0;
    str_copy(sc->rec->truncated_file, sizeof sc->rec->truncated_file, path);
    fprintf(stderr, "wal: removed %s, whose creation was cut short (%" PRIu64 " bytes, no header)\n", path,
            s->bytes);
    return 0;
}

/* ---- repair ---------------------------------------------------------------- */

/* A free name in the log directory for bytes moved aside: base, or base.N. */
static void aside_name(wal_t *w, const char *base, char *out, size_t n)
{
    snprintf(out, n, "%s", base);
    for (unsigned i = 1; faccessat(w->dir_fd, out, F_OK, 0) == 0; i++)
        snprintf(out, n, "%s.%u", base, i);
}

/* Rename segment seq aside ("<name>.cut"); its new path into moved. */
static int move_aside(scan_t *sc, uint64_t seq, char *moved, size_t n)
{
    wal_t *w = sc->w;
    char name[WAL_NAME_BYTES + 1], base[WAL_NAME_BYTES + 8], to[WAL_NAME_BYTES + 32], eb[128];
    seg_name(name, seq);
    snprintf(base, sizeof base, "%s.cut", name);
    aside_name(w, base, to, sizeof to);
    if (renameat(w->dir_fd, name, w->dir_fd, to) != 0) {
        snprintf(sc->err, sc->err_len, "wal repair: cannot rename %s/%s to %s: %s", w->dir, name, to,
                 errstr(errno, eb, sizeof eb));
        return -1;
    }
    snprintf(moved, n, "%s/%s", w->dir, to);
    return 0;
}

/* Copy segment seq's bytes from at to its end into "<name>.cut-at-<at>",
 * sync it and the directory, then truncate the segment at `at` and sync
 * it. *bytes_out gets how many bytes were cut. */
static int cut_tail(scan_t *sc, uint64_t seq, uint64_t at, uint64_t *bytes_out, char *saved, size_t n)
{
    wal_t *w = sc->w;
    char name[WAL_NAME_BYTES + 1], base[WAL_NAME_BYTES + 40], to[WAL_NAME_BYTES + 64], eb[128];
    const char *what = "read";
    unsigned char *b = NULL;
    size_t size = 0;
    int out = -1, rc = -1;
    seg_name(name, seq);
    int fd = openat(w->dir_fd, name, O_RDWR | O_CLOEXEC);
    if (fd < 0 || log_file_read(fd, &b, &size) != 0 || size < at)
        goto fail;
    snprintf(base, sizeof base, "%s.cut-at-%" PRIu64, name, at);
    aside_name(w, base, to, sizeof to);
    what = "save the cut bytes to";
    out = openat(w->dir_fd, to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0 || write_all(w, out, b + at, size - at, 0) != 0 || io_fdatasync(w, out) != 0 || io_sync_dir(w) != 0)
        goto fail;
    what = "truncate";
    if (ftruncate(fd, (off_t)at) != 0 || io_fdatasync(w, fd) != 0)
        goto fail;
    *bytes_out = size - at;
    snprintf(saved, n, "%s/%s", w->dir, to);
    rc = 0;
    goto done;
fail:
    snprintf(sc->err, sc->err_len, "wal repair: cannot %s %s/%s: %s", what, w->dir,
             strcmp(what, "truncate") == 0 || strcmp(what, "read") == 0 ? name : to, errstr(errno, eb, sizeof eb));
done:
    if (out >= 0)
        close(out);
    if (fd >= 0)
        close(fd);
    free(b);
    return rc;
}

/* The first steps of every repair: note it in sc->rec (the file cut and
 * where, the revision the log now ends at, why), then move segments
 * seqs[from..n) aside, last first, and sync the directory if any moved.
 * `what` names those segments in the messages. Returns 0 or -1. */
static int repair_start(scan_t *sc, uint64_t cut_seq, uint64_t cut_at, const uint64_t *seqs, size_t from, size_t n,
                        const char *what)
{
    wal_t *w = sc->w;
    wal_recovery_t *r = sc->rec;
    char moved[sizeof r->repair_saved], eb[128];
    r->repaired = true;
    seg_path(w, cut_seq, r->repair_file, sizeof r->repair_file);
    r->repair_at = cut_at;
    r->repair_last_rev = sc->prev_rev;
    str_copy(r->repair_reason, sizeof r->repair_reason, sc->err);
    fprintf(stderr, "wal: repair: %s\n", sc->err);
    for (size_t j = n; j-- > from;) {
        struct stat st;
        char name[WAL_NAME_BYTES + 1];
        seg_name(name, seqs[j]);
        uint64_t bytes = fstatat(w->dir_fd, name, &st, 0) == 0 ? (uint64_t)st.st_size : 0;
        if (move_aside(sc, seqs[j], moved, sizeof moved) != 0)
            return -1;
        r->repair_bytes += bytes;
        r->repair_segments_moved++;
        fprintf(stderr, "wal: repair: moved the %s %s/%s (%" PRIu64 " bytes) aside to %s\n", what, w->dir, name,
                bytes, moved);
    }
    if (r->repair_segments_moved > 0 && io_sync_dir(w) != 0) {
        snprintf(sc->err, sc->err_len, "wal repair: cannot sync %s: %s", w->dir, errstr(errno, eb, sizeof eb));
        return -1;
    }
    return 0;
}

/* Cut the log at segs[i], offset sc->corrupt_at (see REPAIR): every later
 * segment is moved aside first, then the tail of this one (or all of it,
 * for a bad header). *keep_out: the segment keeps records and stays. */
static int repair(scan_t *sc, const uint64_t *seqs, size_t n, size_t i, const wal_seg_t *s, bool *keep_out)
{
    wal_t *w = sc->w;
    wal_recovery_t *r = sc->rec;
    char eb[128];
    if (repair_start(sc, seqs[i], sc->corrupt_at, seqs, i + 1, n, "later segment") != 0)
        return -1;
    uint64_t cut = 0;
    if (sc->corrupt_at == 0) {
        if (move_aside(sc, seqs[i], r->repair_saved, sizeof r->repair_saved) != 0)
            return -1;
        if (io_sync_dir(w) != 0) {
            snprintf(sc->err, sc->err_len, "wal repair: cannot sync %s: %s", w->dir, errstr(errno, eb, sizeof eb));
            return -1;
        }
        cut = s->bytes;
        *keep_out = false;
    } else {
        if (cut_tail(sc, seqs[i], sc->corrupt_at, &cut, r->repair_saved, sizeof r->repair_saved) != 0)
            return -1;
        *keep_out = true;
    }
    r->repair_bytes += cut;
    fprintf(stderr, "wal: repair: cut %s at byte offset %" PRIu64 ": %" PRIu64 " bytes moved to %s; %" PRIu64
            " bytes cut in all (%u later segments moved aside); the log now ends at revision %" PRIu64 "\n",
            r->repair_file, r->repair_at, cut, r->repair_saved, r->repair_bytes, r->repair_segments_moved,
            r->repair_last_rev);
    sc->corrupt = false;
    sc->err[0] = '\0';
    return 0;
}

/* Segments seqs[i..n) follow a gap (seqs[i-1] + 1 is missing): refuse,
 * naming the gap, or under repair move them aside so the log ends before
 * it. Returns 0 (repaired) or -1 (sc->err says why). */
static int segment_gap(scan_t *sc, const uint64_t *seqs, size_t n, size_t i)
{
    wal_t *w = sc->w;
    char before[WAL_NAME_BYTES + 1], after[WAL_NAME_BYTES + 1], first[WAL_NAME_BYTES + 1];
    seg_name(before, seqs[i - 1]);
    seg_name(after, seqs[i]);
    seg_name(first, seqs[i - 1] + 1);
    snprintf(sc->err, sc->err_len, "wal: log segment%s %s%s%s missing between %s and %s in %s: the records "
             "after revision %" PRIu64 " are not all there",
             seqs[i] - seqs[i - 1] > 2 ? "s" : "", first, seqs[i] - seqs[i - 1] > 2 ? " and up" : "",
             seqs[i] - seqs[i - 1] > 2 ? " are" : " is", before, after, w->dir, sc->prev_rev);
    if (!w->opt.repair) {
        size_t l = strlen(sc->err);
        snprintf(sc->err + l, sc->err_len - l, "; restore the missing file%s, or start with --wal-repair yes to end "
                 "the log at the gap (the later segments are kept aside as *.cut)",
                 seqs[i] - seqs[i - 1] > 2 ? "s" : "");
        return -1;
    }
    if (repair_start(sc, seqs[i - 1], w->nsegs > 0 ? w->segs[w->nsegs - 1].bytes : 0, seqs, i, n,
                     "segment after the gap") != 0)
        return -1;
    sc->err[0] = '\0';
    return 0;
}

/* The manifest names segment want, the newest present is have (0: none):
 * the end of the log is gone. Refuse, naming what is missing, or under
 * repair say so and go on from what is there. Returns 0 or -1. */
static int segment_tail_missing(scan_t *sc, uint64_t want, uint64_t have)
{
    wal_t *w = sc->w;
    char last[WAL_NAME_BYTES + 1], first[WAL_NAME_BYTES + 1];
    seg_name(last, want);
    seg_name(first, have + 1);
    snprintf(sc->err, sc->err_len, "wal: the end of the log in %s is missing: its manifest says segment %s was "
             "created, but %s; the log found ends at revision %" PRIu64 " and what came after it is gone (%s%s%s)",
             w->dir, last, have == 0 ? "no segment is there" : "the newest there is the one before", sc->prev_rev,
             first, want > have + 1 ? " to " : "", want > have + 1 ? last : "");
    if (!w->opt.repair) {
        size_t l = strlen(sc->err);
        snprintf(sc->err + l, sc->err_len - l, "; restore it, or start with --wal-repair yes to go on from revision "
                 "%" PRIu64 " (revisions, ids and tokens after it will be handed out again)", sc->prev_rev);
        return -1;
    }
    wal_recovery_t *r = sc->rec;
    r->repaired = true;
    snprintf(r->repair_file, sizeof r->repair_file, "%s/%s", w->dir, last);
    r->repair_last_rev = sc->prev_rev;
    str_copy(r->repair_reason, sizeof r->repair_reason, sc->err);
    fprintf(stderr, "wal: repair: %s; going on from revision %" PRIu64 "\n", sc->err, sc->prev_rev);
    sc->err[0] = '\0';
    return 0;
}

/* Recover every segment; leave the log ready to append. */
static int recover(wal_t *w, scan_t *sc)
{
    uint64_t *seqs = NULL;
    size_t n = 0;
    char eb[128];
    uint64_t manifest_seq = 0, gapless_from = 0;
    if (manifest_read(w, &manifest_seq, &gapless_from, sc->err, sc->err_len) != 0) {
        if (!w->opt.repair)
            return -1;
        fprintf(stderr, "wal: repair: %s; rewriting it from the segments present\n", sc->err);
        sc->err[0] = '\0';
        manifest_seq = gapless_from = 0;
    }
    if (segs_list(w, &seqs, &n) != 0) {
        snprintf(sc->err, sc->err_len, "wal: cannot list %s: %s", w->dir, errstr(errno, eb, sizeof eb));
        return -1;
    }
    int rc = -1;
    uint64_t salt = 0, end = 0, next_seq = 1;
    bool gap_cut = false;
    for (size_t i = 0; i < n; i++) {
        wal_seg_t s = {.seq = seqs[i]};
        if (i > 0 && seqs[i] != seqs[i - 1] + 1 && gapless_from != 0 && seqs[i] > gapless_from) {
            if (segment_gap(sc, seqs, n, i) != 0)
                goto out;
            gap_cut = true;
            break;
        }
        next_seq = seqs[i] + 1;
        int r = scan_segment(sc, &s, i + 1 == n, &salt, &end);
        if (r == SEG_ERROR)
            goto out;
        if (r == SEG_CORRUPT) {
            bool keep = false;
            if (repair(sc, seqs, n, i, &s, &keep) != 0)
                goto out;
            if (keep) {
                s.bytes = end;
                segs_push(w, &s);
            } else {
                next_seq = seqs[i];
            }
            break;
        }
        if (r == SEG_TORN_CREATE) {
            if (remove_torn(sc, &s) != 0)
                goto out;
            next_seq = seqs[i]; /* its number is reused: numbers have no gaps */
            continue;
        }
        segs_push(w, &s);
    }
    /* Every segment up to the manifest's must be here, unless repair just
     * cut the log at a gap or at corruption (it said so). */
    uint64_t have = w->nsegs > 0 ? w->segs[w->nsegs - 1].seq : 0;
    if (!gap_cut && !sc->rec->repaired && manifest_seq > have && segment_tail_missing(sc, manifest_seq, have) != 0)
        goto out;
    /* The segment written from now on: the last one kept, or a new one. No
     * manifest yet (a new log, or one from before it): numbers are gapless
     * from it on. A repair may have cut the log below the manifest's. */
    bool resume = w->nsegs > 0 && w->segs[w->nsegs - 1].seq + 1 == next_seq;
    uint64_t cur = resume ? next_seq - 1 : next_seq;
    w->gapless_from = gapless_from != 0 && gapless_from <= cur ? gapless_from : cur;
    if (resume)
        rc = resume_segment(w, next_seq - 1, salt, end, sc->err, sc->err_len);
    else if (segment_create(w, next_seq) == 0)
        rc = 0;
    else
        str_copy(sc->err, sc->err_len, w->failed_reason);
    if (rc == 0 && manifest_seq != w->seq && manifest_write(w, w->seq) != 0) {
        snprintf(sc->err, sc->err_len, "wal: cannot write %s/%s: %s", w->dir, WAL_MANIFEST_NAME,
                 errstr(errno, eb, sizeof eb));
        rc = -1;
    }
out:
    free(seqs);
    return rc;
}

/* ---- opening ---------------------------------------------------------------- */

/* Copy the options, with defaults for the zeros; NULL and err if invalid. */
static wal_t *wal_new(const wal_options_t *opt, char *err, size_t err_len)
{
    if (opt->dir == NULL || opt->dir[0] == '\0' || opt->policy < WAL_SYNC_ALWAYS || opt->policy > WAL_SYNC_NO ||
        opt->record_bytes_max > WAL_RECORD_BYTES_LIMIT || opt->sync_parallel > WAL_SYNC_PARALLEL_MAX) {
        snprintf(err, err_len, "wal: invalid options (dir, policy, record_bytes_max or sync_parallel)");
        return NULL;
    }
    wal_t *w = ordo_xcalloc(1, sizeof *w);
    w->opt = *opt;
    w->dir = ordo_xmalloc(strlen(opt->dir) + 1);
    strcpy(w->dir, opt->dir);
    w->opt.dir = w->dir;
    if (w->opt.segment_bytes == 0)
        w->opt.segment_bytes = WAL_SEGMENT_BYTES_DEFAULT;
    if (w->opt.record_bytes_max == 0)
        w->opt.record_bytes_max = WAL_RECORD_BYTES_DEFAULT;
    w->fd = -1;
    w->dir_fd = -1;
    w->nthreads = w->opt.policy == WAL_SYNC_ALWAYS && w->opt.sync_parallel > 1 ? w->opt.sync_parallel : 1;
    for (uint32_t i = 0; i < WAL_SYNC_PARALLEL_MAX; i++) {
        w->sync_fd[i] = -1;
        w->targ[i] = (wal_thread_t){.w = w, .i = i};
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->roll_cv, NULL);
    pthread_mutex_init(&w->mu, NULL);
    atomic_init(&w->durable_rev, 0);
    atomic_init(&w->pending_bytes, 0);
    atomic_init(&w->drain_wanted, false);
    atomic_init(&w->failed, false);
    return w;
}

/* fsync the directory holding path (a directory just made there): its
 * entry is only durable once its parent is synced. */
static int sync_parent(const char *path)
{
    char parent[4096];
    int n = snprintf(parent, sizeof parent, "%s", path);
    if (n <= 0 || (size_t)n >= sizeof parent)
        return -1;
    while (n > 1 && parent[n - 1] == '/')
        parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    if (slash == NULL)
        snprintf(parent, sizeof parent, ".");
    else
        slash[slash == parent ? 1 : 0] = '\0';
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Create (if missing), open and lock the directory: two processes
 * appending to one log would interleave garbage. A directory made here is
 * synced into its parent before anything is written in it: a power loss
 * after the first acknowledged write must not take the whole directory. */
static int dir_open(wal_t *w, char *err, size_t err_len)
{
    char eb[128];
    if (mkdir(w->dir, 0755) == 0) {
        if (sync_parent(w->dir) != 0) {
            snprintf(err, err_len, "wal: cannot sync the directory holding %s: %s", w->dir,
                     errstr(errno, eb, sizeof eb));
            return -1;
        }
    } else if (errno != EEXIST) {
        snprintf(err, err_len, "wal: cannot create %s: %s", w->dir, errstr(errno, eb, sizeof eb));
        return -1;
    }
    w->dir_fd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dir_fd < 0) {
        snprintf(err, err_len, "wal: cannot open %s: %s", w->dir, errstr(errno, eb, sizeof eb));
        return -1;
    }
    if (flock(w->dir_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, err_len, "wal: %s is in use by another process (%s)", w->dir, errstr(errno, eb, sizeof eb));
        return -1;
    }
    return 0;
}

wal_t *wal_open(const wal_options_t *opt, uint64_t after_rev, wal_replay_fn fn, void *arg,
                wal_recovery_t *rec_out, char *err, size_t err_len)
{
    wal_recovery_t rec_local;
    wal_recovery_t *rec = rec_out != NULL ? rec_out : &rec_local;
    memset(rec, 0, sizeof *rec);
    wal_t *w = wal_new(opt, err, err_len);
    if (w == NULL)
        return NULL;
    if (dir_open(w, err, err_len) != 0)
        goto fail_free;
    scan_t sc = {.w = w, .after_rev = after_rev, .fn = fn, .arg = arg, .rec = rec,
                 .progress_ms = now_ms(), .err = err, .err_len = err_len};
    if (recover(w, &sc) != 0)
        goto fail_free;
    w->written_rev = sc.prev_rev;
    w->appended_rev = sc.prev_rev;
    w->last_sync_ms = now_ms();
    w->stats.segments = w->nsegs;
    atomic_store(&w->durable_rev, sc.prev_rev > after_rev ? sc.prev_rev : after_rev);
    w->running = true; /* before the threads exist: they read this */
    for (uint32_t i = 0; i < w->nthreads; i++) {
        if (pthread_create(&w->threads[i], NULL, log_main, &w->targ[i]) != 0) {
            snprintf(err, err_len, "wal: cannot start a log thread");
            w->nthreads = i; /* wal_close() joins those started */
            wal_close(w);
            return NULL;
        }
    }
    return w;
fail_free:
    wal_free(w);
    return NULL;
}
