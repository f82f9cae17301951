/*
 * test_srv_wal.c -- the write-ahead log: round trips across segment rolls,
 * durable-revision semantics per sync policy and group commit, torn tails
 * cut at every byte, mid-log corruption refused with file and offset, stale
 * bytes rejected by the per-segment salt, I/O failures through the seam
 * (EIO, ENOSPC) making the log fail for good, CRC-32C vectors, and two
 * small benchmarks (ORDO_WAL_BENCH_MS, ORDO_WAL_BENCH_RECORDS make them
 * longer; by default they take well under a second).
 *
 * Every test works in its own mkdtemp() directory under $TMPDIR (or /tmp).
 * Tests that reopen a log hundreds of times make fdatasync a no-op through
 * the seam: what they check is the reading, not the disk.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "srvtest.h"

#include "base/crc32c.h"
#include "log/wal.h"

#define HDR_BYTES 40   /* segment header (see wal.c) */
#define FRAME_BYTES 16 /* record frame header */

/* ---- files and directories ----------------------------------------------- */

/* The segment files of dir, sorted; returns how many (at most max). */
static int seg_files(const char *dir, char names[][32], int max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l == 24 && strcmp(e->d_name + 20, ".wal") == 0 && n < max)
            memcpy(names[n++], e->d_name, l + 1);
    }
    closedir(d);
    qsort(names, (size_t)n, 32, (int (*)(const void *, const void *))strcmp);
    return n;
}

static unsigned char *file_get(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return b;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* ---- records ------------------------------------------------------------ */

/* Record i: a length that varies (0 included), bytes derived from i, and a
 * revision that sometimes repeats (revisions are non-decreasing). */
static size_t rec_len(uint32_t i, uint32_t len_max)
{
    return (size_t)((i * 2654435761u) >> 8) % (len_max + 1);
}

static uint64_t rec_rev(uint32_t i)
{
    return (uint64_t)i * 2 / 3 + 1;
}

static void rec_fill(uint32_t i, unsigned char *out, size_t len)
{
    for (size_t j = 0; j < len; j++)
        out[j] = (unsigned char)(i * 31 + j * 7);
}

static void append_range(wal_t *w, uint32_t from, uint32_t to, uint32_t len_max)
{
    unsigned char buf[4096];
    for (uint32_t i = from; i < to; i++) {
        size_t len = rec_len(i, len_max);
        rec_fill(i, buf, len);
        assert_int_equal(wal_append(w, rec_rev(i), buf, len), 0);
    }
}

/* What a replay saw. */
typedef struct seen_s {
    uint32_t n;
    uint64_t revs[20000];
    uint32_t lens[20000];
    uint32_t bad;       /* records whose bytes differ from rec_fill(first + k) */
    uint32_t first;     /* index of the first record expected */
    uint32_t len_max;
} seen_t;

static int seen_fn(void *arg, uint64_t rev, const void *rec, size_t len)
{
    seen_t *s = arg;
    unsigned char want[4096];
    uint32_t i = s->first + s->n;
    size_t wl = rec_len(i, s->len_max);
    rec_fill(i, want, wl);
    if (len != wl || rev != rec_rev(i) || memcmp(rec, want, len) != 0)
        s->bad++;
    if (s->n < 20000) {
        s->revs[s->n] = rev;
        s->lens[s->n] = (uint32_t)len;
    }
    s->n++;
    return 0;
}

/* ---- the seam ----------------------------------------------------------- */

/* Counts calls and fails them on demand; shared with the log thread. */
typedef struct io_ctx_s {
    atomic_uint pwrites, syncs;
    atomic_int pwrite_errno, sync_errno; /* 0: succeed */
    atomic_bool fake_sync;               /* true: fdatasync does nothing */
    atomic_uint short_writes;            /* > 0: write at most this many bytes per call */
    atomic_uint_fast64_t written_rev;    /* highest revision passed to pwrite */
    atomic_uint_fast64_t synced_rev;     /* written_rev at the last successful sync */
    atomic_uint_fast64_t published_bad;  /* durable_rev seen above synced_rev */
    _Atomic(wal_t *) w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint durable_calls;
    atomic_bool stalled;                 /* true: pwrite and fdatasync wait (a stalled disk) */
    atomic_uint sync_us;                 /* > 0: each fdatasync takes this long first (a slow disk) */
    atomic_uint in_sync, in_sync_max;    /* fdatasync calls under way now, and at most at once */
    atomic_uint stall_entered;           /* calls that found the disk stalled */
    atomic_bool woke_below;              /* on_durable saw pending bytes at most pending_max */
    uint64_t pending_max;
} io_ctx_t;

static void stall_wait(io_ctx_t *io)
{
    if (atomic_load(&io->stalled))
        atomic_fetch_add(&io->stall_entered, 1);
    while (atomic_load(&io->stalled))
        usleep(1000);
}

static ssize_t t_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    io_ctx_t *io = ctx;
    stall_wait(io);
    atomic_fetch_add(&io->pwrites, 1);
    int e = atomic_load(&io->pwrite_errno);
    if (e != 0) {
        errno = e;
        return -1;
    }
    /* Records written: the frames of a batch start at a frame boundary. */
    if (off >= HDR_BYTES) {
        const unsigned char *p = buf;
        for (size_t pos = 0; pos + FRAME_BYTES <= n;) {
            uint32_t len;
            uint64_t rev;
            memcpy(&len, p + pos, 4);
            memcpy(&rev, p + pos + 8, 8);
            if (rev > atomic_load(&io->written_rev))
                atomic_store(&io->written_rev, rev);
            pos += FRAME_BYTES + len;
        }
    }
    unsigned lim = atomic_load(&io->short_writes);
    if (lim > 0 && n > lim)
        n = lim;
    return pwrite(fd, buf, n, off);
}

static int t_fdatasync(void *ctx, int fd)
{
    io_ctx_t *io = ctx;
    stall_wait(io);
    /* A sync covers what was written before it began, no more. */
    uint64_t written = atomic_load(&io->written_rev);
    unsigned in = atomic_fetch_add(&io->in_sync, 1) + 1;
    for (unsigned m = atomic_load(&io->in_sync_max); in > m && !atomic_compare_exchange_weak(&io->in_sync_max, &m, in);)
        ;
    if (atomic_load(&io->sync_us) > 0)
        usleep(atomic_load(&io->sync_us));
    int e = atomic_load(&io->sync_errno);
    int rc = 0;
    if (e != 0) {
        errno = e;
        rc = -1;
    } else {
        atomic_fetch_add(&io->syncs, 1);
        if (!atomic_load(&io->fake_sync) && fsync(fd) != 0)
            rc = -1;
    }
    /* Syncs in flight end in any order: synced_rev only grows. */
    for (uint64_t m = atomic_load(&io->synced_rev); rc == 0 && written > m &&
         !atomic_compare_exchange_weak(&io->synced_rev, &m, written);)
        ;
    atomic_fetch_sub(&io->in_sync, 1);
    return rc;
}

static void t_on_durable(void *arg)
{
    io_ctx_t *io = arg;
    wal_t *w = atomic_load(&io->w);
    if (w != NULL && wal_failed(w) == NULL && wal_durable_rev(w) > atomic_load(&io->synced_rev))
        atomic_store(&io->published_bad, wal_durable_rev(w));
    if (w != NULL && wal_pending_bytes(w) <= io->pending_max)
        atomic_store(&io->woke_below, true);
    atomic_fetch_add(&io->durable_calls, 1);
    pthread_mutex_lock(&io->mu);
    pthread_cond_broadcast(&io->cv);
    pthread_mutex_unlock(&io->mu);
}

static void io_init(io_ctx_t *io)
{
    memset(io, 0, sizeof *io);
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->cv, NULL);
}

static void io_done(io_ctx_t *io)
{
    pthread_mutex_destroy(&io->mu);
    pthread_cond_destroy(&io->cv);
}

/* Every test runs twice: with one sync at a time, then with
 * WAL_SYNC_PARALLEL_MAX syncs in flight (main() sets it between the runs). */
static uint32_t sync_parallel;

static wal_options_t opts(const char *dir, int policy, io_ctx_t *io)
{
    wal_options_t o = {.dir = dir, .policy = policy, .segment_bytes = 4096, .record_bytes_max = 4096,
                       .sync_parallel = sync_parallel};
    if (io != NULL) {
        o.io.pwrite_fn = t_pwrite;
        o.io.fdatasync_fn = t_fdatasync;
        o.io.ctx = io;
        o.on_durable = t_on_durable;
        o.on_durable_arg = io;
    }
    return o;
}

/* Wait (up to 10 s) until durable_rev >= rev or the log failed. */
static void wait_durable(wal_t *w, io_ctx_t *io, uint64_t rev)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&io->mu);
    while (wal_durable_rev(w) < rev && wal_failed(w) == NULL)
        if (pthread_cond_timedwait(&io->cv, &io->mu, &dl) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&io->mu);
}

/* Wait (up to 5 s) until nothing appended waits for a write or sync: every
 * sync under way has ended. */
static void wait_idle(wal_t *w)
{
    for (int k = 0; k < 5000 && wal_pending_bytes(w) > 0; k++)
        usleep(1000);
    assert_int_equal(wal_pending_bytes(w), 0);
}

/* Wait (up to 5 s) until on_durable was called more than n times: it runs
 * just after the revision (or the failure) a waiter may already have seen. */
static void wait_calls(io_ctx_t *io, unsigned n)
{
    for (int k = 0; k < 5000 && atomic_load(&io->durable_calls) <= n; k++)
        usleep(1000);
    assert_true(atomic_load(&io->durable_calls) > n);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static wal_t *reopen(const wal_options_t *o, uint64_t after_rev, seen_t *s, uint32_t first, wal_recovery_t *rec,
                     char *err, size_t err_len)
{
    memset(s, 0, sizeof *s);
    s->first = first;
    s->len_max = o->record_bytes_max < 4096 ? o->record_bytes_max : 700;
    return wal_open(o, after_rev, seen_fn, s, rec, err, err_len);
}

/* ---- CRC-32C ----------------------------------------------------------------- */

static void test_crc32c_vectors(void **state)
{
    (void)state;
    unsigned char b[32];
    assert_int_equal(ordo_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(ordo__crc32c_sw(0, "123456789", 9), 0xE3069283u);
    memset(b, 0, sizeof b);
    assert_int_equal(ordo_crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xff, sizeof b); /* RFC 3720, B.4 */
    assert_int_equal(ordo_crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)i;
    assert_int_equal(ordo_crc32c(0, b, 32), 0x46DD794Eu);
    assert_int_equal(ordo_crc32c(ordo_crc32c(0, b, 13), b + 13, 19), 0x46DD794Eu);
    assert_int_equal(ordo_crc32c(0, b, 0), 0);
}

static void test_crc32c_hw_matches_sw(void **state)
{
    (void)state;
    unsigned char b[256 + 16];
    uint64_t x = 88172645463325252u;
    for (size_t i = 0; i < sizeof b; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
    }
    bool hw = ordo__crc32c_hw_available();
    if (!hw)
        fprintf(stderr, "crc32c: no CRC instruction on this CPU; checking the portable path only\n");
    for (size_t start = 0; start < 16; start++)
        for (size_t len = 0; len <= 256; len++) {
            uint32_t sw = ordo__crc32c_sw(0x12345678u * (uint32_t)start, b + start, len);
            if (hw)
                assert_int_equal(ordo__crc32c_hw(0x12345678u * (uint32_t)start, b + start, len), sw);
            assert_int_equal(ordo_crc32c(0x12345678u * (uint32_t)start, b + start, len), sw);
        }
}

/* ---- round trips ------------------------------------------------------------ */

static void test_round_trip_across_segments(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.record_bytes_max = 700;
    seen_t *s = calloc(1, sizeof *s);
    wal_recovery_t rec;
    wal_t *w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, 0);
    assert_int_equal(rec.last_rev, 0);
    atomic_store(&io.w, w);
    append_range(w, 0, 600, 700);
    assert_int_equal(wal_append(w, rec_rev(600), err, 701), -1); /* over record_bytes_max */
    wait_durable(w, &io, rec_rev(599));
    assert_int_equal(wal_durable_rev(w), rec_rev(599));
    wal_stats_t st;
    wal_get_stats(w, &st);
    assert_int_equal(st.records_written, 600);
    assert_true(st.segments >= 5);
    wal_close(w);

    char names[64][32];
    int nseg = seg_files(dir, names, 64);
    assert_true(nseg >= 5);
    assert_string_equal(names[0], "00000000000000000001.wal");

    /* Everything, in order, bytes exact. */
    w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, 600);
    assert_int_equal(s->bad, 0);
    assert_int_equal(rec.records, 600);
    assert_int_equal(rec.last_rev, rec_rev(599));
    assert_int_equal(rec.truncated_bytes, 0);
    assert_string_equal(rec.truncated_file, "");
    assert_int_equal(wal_durable_rev(w), rec_rev(599));
    /* Append more after the reopen, across more rolls. */
    atomic_store(&io.w, w);
    append_range(w, 600, 900, 700);
    wal_close(w);

    /* after_rev skips exactly the records at or below it. */
    uint64_t after = rec_rev(450); /* records 450 and 451 share it */
    assert_int_equal(rec_rev(451), after);
    assert_true(rec_rev(449) < after && rec_rev(452) > after);
    w = reopen(&o, after, s, 452, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, 900 - 452);
    assert_int_equal(s->bad, 0);
    assert_int_equal(rec.last_rev, rec_rev(899));
    wal_close(w);

    /* A snapshot ahead of the whole log: nothing replayed, durable at it. */
    w = reopen(&o, 5000, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, 0);
    assert_int_equal(wal_durable_rev(w), 5000);
    wal_close(w);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

/* Writes cut short by the kernel are continued. */
static void test_short_writes(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    atomic_store(&io.short_writes, 7);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.record_bytes_max = 300;
    seen_t *s = calloc(1, sizeof *s);
    wal_t *w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    append_range(w, 0, 100, 300);
    wal_close(w);
    atomic_store(&io.short_writes, 0);
    w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, 100);
    assert_int_equal(s->bad, 0);
    wal_close(w);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

/* ---- policies and group commit ------------------------------------------------ */

static void test_always_publishes_after_sync(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 1 << 20;
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    atomic_store(&io.w, w);
    /* Many appends at once: group commit syncs far fewer times. */
    unsigned char rec[100] = {0};
    for (uint64_t r = 1; r <= 2000; r++)
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
    wait_durable(w, &io, 2000);
    assert_int_equal(wal_durable_rev(w), 2000);
    assert_int_equal(atomic_load(&io.published_bad), 0);
    wait_calls(&io, 0);
    wait_idle(w); /* a sync that began earlier may end after the last */
    wal_stats_t st;
    wal_get_stats(w, &st);
    assert_int_equal(st.records_written, 2000);
    assert_true(st.syncs >= 1);
    assert_true(st.syncs < 1000);
    assert_true(st.batches <= st.syncs);
    /* One at a time: each is published, each after its sync. */
    for (uint64_t r = 2001; r <= 2010; r++) {
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
        wait_durable(w, &io, r);
        assert_int_equal(wal_durable_rev(w), r);
        assert_true(atomic_load(&io.synced_rev) >= r);
    }
    assert_int_equal(atomic_load(&io.published_bad), 0);
    wal_close(w);
    io_done(&io);
    tmpdir_free(dir);
}

/* sync_interval_ms holds a batch open; sync_batch_max closes it early. */
static void test_always_batch_window(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 1 << 20;
    o.sync_interval_ms = 1000; /* wide enough that no stall of a loaded machine mimics it */
    o.sync_batch_max = 50;
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    atomic_store(&io.w, w);
    unsigned base = atomic_load(&io.syncs);
    unsigned char rec[10] = {0};
    double t0 = now_s();
    for (uint64_t r = 1; r <= 50; r++) /* one full batch */
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
    wait_durable(w, &io, 50);
    assert_int_equal(wal_durable_rev(w), 50);
    assert_true(now_s() - t0 < 0.75); /* the count closed the batch, not the clock */
    assert_int_equal(atomic_load(&io.syncs) - base, 1);
    /* A lone record waits for the window, then goes. */
    t0 = now_s();
    assert_int_equal(wal_append(w, 51, rec, sizeof rec), 0);
    wait_durable(w, &io, 51);
    double dt = now_s() - t0;
    assert_int_equal(wal_durable_rev(w), 51);
    assert_true(dt >= 0.75 && dt < 10.0);
    assert_int_equal(atomic_load(&io.published_bad), 0);
    wal_close(w);
    io_done(&io);
    tmpdir_free(dir);
}

/* sync_gather_max_us: after a sync of n records, the next sync waits
 * (at most as long as that sync took) until n records are pending, so the
 * writers it answered share one sync; meanwhile wal_kick() writes nothing
 * inline. A lone record still goes once the wait is over. */
static void test_always_gathers_the_answered_writers(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 1 << 20;
    o.defer_wake = true;
    o.sync_inline_max = 1;
    o.sync_gather_max_us = 10 * 1000 * 1000;
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    atomic_store(&io.w, w);
    atomic_store(&io.sync_us, 300 * 1000); /* so the gathering lasts up to 0.3 s */
    unsigned char rec[10] = {0};
    for (uint64_t r = 1; r <= 3; r++) /* three writers, answered by one sync */
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
    assert_int_equal(wal_kick(w), 0);
    wait_durable(w, &io, 3);
    assert_int_equal(wal_durable_rev(w), 3);
    unsigned syncs = atomic_load(&io.syncs);
    /* They come back one by one: the first is neither written inline nor
     * synced alone; the three go in one sync. */
    assert_int_equal(wal_append(w, 4, rec, sizeof rec), 0);
    assert_int_equal(wal_kick(w), 0);
    for (uint64_t r = 5; r <= 6; r++) {
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
        assert_int_equal(wal_kick(w), 0);
    }
    wait_durable(w, &io, 6);
    assert_int_equal(wal_durable_rev(w), 6);
    assert_int_equal(atomic_load(&io.syncs) - syncs, 1);
    /* One comes back, the others do not: it goes when the wait is over. */
    assert_int_equal(wal_append(w, 7, rec, sizeof rec), 0);
    assert_int_equal(wal_kick(w), 0);
    wait_durable(w, &io, 7);
    assert_int_equal(wal_durable_rev(w), 7);
    assert_int_equal(atomic_load(&io.syncs) - syncs, 2);
    assert_int_equal(atomic_load(&io.published_bad), 0);
    atomic_store(&io.sync_us, 0);
    wal_close(w);
    io_done(&io);
    tmpdir_free(dir);
}

/* Poll (up to 5 s) until n fdatasync calls are under way at once. */
static void wait_in_sync(io_ctx_t *io, unsigned n)
{
    for (int k = 0; k < 5000 && atomic_load(&io->in_sync) < n; k++)
        usleep(1000);
    assert_true(atomic_load(&io->in_sync) >= n);
}

/* sync_parallel: a record that arrives while a sync is under way starts its
 * own sync at once on another log thread, across segment rolls (which wait
 * for the syncs on the old segment); each revision is published only once
 * a sync that began after it was written has ended, whatever order the
 * syncs end in. With one log thread the second sync waits for the first. */
static void test_syncs_in_flight(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 2048; /* a roll every few records */
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    atomic_store(&io.w, w);
    atomic_store(&io.sync_us, 50 * 1000);
    uint32_t i = 0, overlapped = 0;
    for (int round = 0; round < 12; round++, i += 2) {
        append_range(w, i, i + 1, 700);
        wait_in_sync(&io, 1);
        append_range(w, i + 1, i + 2, 700);
        /* Its sync starts now, unless it rolls the segment: a roll waits
         * for the syncs on the old one. */
        while (atomic_load(&io.in_sync) < 2 && wal_durable_rev(w) < rec_rev(i + 1))
            usleep(500);
        overlapped += atomic_load(&io.in_sync) == 2;
        wait_durable(w, &io, rec_rev(i + 1));
        assert_int_equal(wal_durable_rev(w), rec_rev(i + 1));
        wait_idle(w); /* revisions repeat: the second record's may be the first's */
        assert_int_equal(atomic_load(&io.in_sync), 0);
    }
    wal_stats_t st;
    wal_get_stats(w, &st);
    assert_true(st.segments >= 3);
    assert_int_equal(atomic_load(&io.in_sync_max), o.sync_parallel > 1 ? 2 : 1);
    if (o.sync_parallel > 1)
        assert_true(overlapped >= 6);
    assert_int_equal(atomic_load(&io.published_bad), 0);
    /* The syncs of the next two records fail: neither is published. */
    unsigned calls = atomic_load(&io.durable_calls);
    atomic_store(&io.sync_errno, EIO);
    append_range(w, i, i + 1, 700);
    wait_in_sync(&io, 1);
    append_range(w, i + 1, i + 2, 700);
    wait_calls(&io, calls);
    for (int k = 0; k < 5000 && (wal_failed(w) == NULL || atomic_load(&io.in_sync) > 0); k++)
        usleep(1000);
    assert_non_null(wal_failed(w));
    assert_int_equal(wal_durable_rev(w), rec_rev(i - 1));
    assert_int_equal(atomic_load(&io.published_bad), 0);
    atomic_store(&io.sync_errno, 0);
    atomic_store(&io.sync_us, 0);
    wal_close(w);

    /* Every record acknowledged is read back, in order, across the rolls. */
    seen_t *s = calloc(1, sizeof *s);
    w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    assert_true(s->n >= i);
    assert_int_equal(s->bad, 0);
    wal_close(w);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

static void test_everysec_and_no(void **state)
{
    (void)state;
    for (int policy = WAL_SYNC_EVERYSEC; policy <= WAL_SYNC_NO; policy++) {
        char *dir = tmpdir_new("ordo-wal-");
        char err[1024];
        io_ctx_t io;
        io_init(&io);
        wal_options_t o = opts(dir, policy, &io);
        o.segment_bytes = 1 << 20;
        double t0 = now_s(); /* the second counts from the open's sync, after this */
        wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
        assert_non_null(w);
        unsigned base = atomic_load(&io.syncs); /* the new segment's header and directory */
        unsigned char rec[10] = {0};
        for (uint64_t r = 1; r <= 10; r++)
            assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
        wait_durable(w, &io, 10);
        /* Published once written, before any sync. */
        assert_int_equal(wal_durable_rev(w), 10);
        assert_int_equal(atomic_load(&io.syncs), base);
        /* EVERYSEC syncs about a second later (waited for, with a generous
         * deadline); NO never (1.3 s without a sync). */
        if (policy == WAL_SYNC_EVERYSEC) {
            while (atomic_load(&io.syncs) == base && now_s() - t0 < 30)
                usleep(1000);
            assert_true(now_s() - t0 >= 0.95);
        } else {
            usleep(1300 * 1000);
        }
        assert_int_equal(atomic_load(&io.syncs), base + (policy == WAL_SYNC_EVERYSEC ? 1u : 0u));
        wal_close(w);
        /* Close syncs what was written, under every policy. */
        assert_int_equal(atomic_load(&io.syncs), base + 1);
        io_done(&io);
        tmpdir_free(dir);
    }
}

/* sync_inline_max: a small batch finding the log thread idle is written,
 * synced and published by wal_kick() itself, before it returns and without
 * on_durable; with the log thread busy, or more records, it is handed over. */
static void test_kick_inline(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 4096;
    o.defer_wake = true;
    o.sync_inline_max = 2;
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    atomic_store(&io.w, w);
    unsigned char rec[300] = {0};
    uint64_t r = 1;
    for (; r <= 40; r++) { /* rolls segments inline too */
        unsigned calls = atomic_load(&io.durable_calls), syncs = atomic_load(&io.syncs);
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
        assert_int_equal(wal_kick(w), 1);
        assert_int_equal(wal_durable_rev(w), r);
        assert_true(atomic_load(&io.synced_rev) >= r);
        assert_true(atomic_load(&io.syncs) > syncs);
        assert_int_equal(atomic_load(&io.durable_calls), calls);
        assert_int_equal(wal_pending_bytes(w), 0);
    }
    assert_int_equal(wal_kick(w), 0); /* nothing new */
    /* Three records: the log thread's. */
    for (int k = 0; k < 3; k++, r++)
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
    assert_int_equal(wal_kick(w), 0);
    wait_durable(w, &io, r - 1);
    assert_int_equal(wal_durable_rev(w), r - 1);
    /* The log thread busy (stalled in its write of three records): one
     * record is handed over, not written by the core. */
    atomic_store(&io.stalled, true);
    for (int k = 0; k < 3; k++, r++)
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
    assert_int_equal(wal_kick(w), 0);
    for (int k = 0; k < 5000 && atomic_load(&io.stall_entered) == 0; k++)
        usleep(1000); /* the log thread takes the batch, then waits in the seam */
    assert_int_equal(atomic_load(&io.stall_entered), 1);
    assert_int_equal(wal_append(w, r++, rec, sizeof rec), 0);
    assert_int_equal(wal_kick(w), 0);
    atomic_store(&io.stalled, false);
    wait_durable(w, &io, r - 1);
    assert_int_equal(wal_durable_rev(w), r - 1);
    wal_stats_t st;
    wal_get_stats(w, &st);
    assert_int_equal(st.inline_batches, 40);
    assert_int_equal(atomic_load(&io.published_bad), 0);
    wal_close(w);
    o.sync_inline_max = 0;
    w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(wal_durable_rev(w), r - 1); /* every record is in the log */
    wal_close(w);
    /* EVERYSEC and NO: the core only writes; the sync stays with the log
     * thread (EVERYSEC: about a second later; NO: never). */
    for (int policy = WAL_SYNC_EVERYSEC; policy <= WAL_SYNC_NO; policy++) {
        o.policy = policy;
        o.sync_inline_max = 1;
        w = wal_open(&o, r - 1, NULL, NULL, NULL, err, sizeof err);
        assert_non_null(w);
        unsigned syncs = atomic_load(&io.syncs);
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
        assert_int_equal(wal_kick(w), 1);
        assert_int_equal(wal_durable_rev(w), r);
        assert_int_equal(atomic_load(&io.syncs), syncs);
        r++;
        /* Any number of records: still only a write, so still the core's
         * (the log thread is idle until the sync is due). A segment roll
         * among them syncs the finished segment, as it always does. */
        for (int k = 0; k < 5; k++, r++)
            assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
        assert_int_equal(wal_kick(w), 1);
        assert_int_equal(wal_durable_rev(w), r - 1);
        syncs = atomic_load(&io.syncs);
        if (policy == WAL_SYNC_EVERYSEC) {
            double t0 = now_s();
            while (atomic_load(&io.syncs) == syncs && now_s() - t0 < 30)
                usleep(1000);
            assert_int_equal(atomic_load(&io.syncs), syncs + 1);
        }
        wal_close(w);
    }
    io_done(&io);
    tmpdir_free(dir);
}

/* ---- back-pressure ---------------------------------------------------------------- */

/* A stalled disk: pending bytes count every appended frame until it is done,
 * wal_backlogged() says so past the limit, and once the disk moves again
 * on_durable comes with the pending bytes back under the limit. */
static void test_backlogged_until_the_log_catches_up(void **state)
{
    (void)state;
    for (int policy = WAL_SYNC_ALWAYS; policy <= WAL_SYNC_NO; policy++) {
        char *dir = tmpdir_new("ordo-wal-");
        char err[1024];
        io_ctx_t io;
        io_init(&io);
        atomic_store(&io.fake_sync, true);
        io.pending_max = 10000;
        wal_options_t o = opts(dir, policy, &io);
        o.segment_bytes = 1 << 20;
        o.pending_bytes_max = io.pending_max;
        wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
        assert_non_null(w);
        atomic_store(&io.w, w);
        unsigned char rec[100] = {0};
        assert_int_equal(wal_append(w, 1, rec, sizeof rec), 0);
        wait_durable(w, &io, 1);
        for (int k = 0; k < 5000 && wal_pending_bytes(w) != 0; k++)
            usleep(1000);
        assert_int_equal(wal_pending_bytes(w), 0);
        assert_false(wal_backlogged(w));

        atomic_store(&io.stalled, true);
        uint64_t r = 2;
        for (; wal_pending_bytes(w) <= io.pending_max; r++) {
            assert_false(wal_backlogged(w));
            assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
        }
        uint64_t frames = r - 2, want = frames * (FRAME_BYTES + sizeof rec);
        assert_int_equal(frames, io.pending_max / (FRAME_BYTES + sizeof rec) + 1);
        assert_int_equal(wal_pending_bytes(w), want);
        atomic_store(&io.woke_below, false);
        assert_true(wal_backlogged(w));
        wal_stats_t st;
        wal_get_stats(w, &st);
        assert_int_equal(st.pending_bytes, want);
        assert_int_equal(st.pending_bytes_peak, want);
        assert_false(atomic_load(&io.woke_below));

        atomic_store(&io.stalled, false);
        for (int k = 0; k < 5000 && !atomic_load(&io.woke_below); k++)
            usleep(1000);
        assert_true(atomic_load(&io.woke_below));
        assert_false(wal_backlogged(w));
        wait_durable(w, &io, r - 1);
        assert_int_equal(wal_durable_rev(w), r - 1);
        wal_close(w);
        io_done(&io);
        tmpdir_free(dir);
    }
}

/* Without a limit the log is never backlogged. With one, a log that fails
 * drops its pending records and stops being backlogged, and on_durable
 * tells of the failure. */
static void test_backlogged_never_without_limit_or_after_failure(void **state)
{
    (void)state;
    for (int limited = 0; limited <= 1; limited++) {
        char *dir = tmpdir_new("ordo-wal-");
        char err[1024];
        io_ctx_t io;
        io_init(&io);
        atomic_store(&io.fake_sync, true);
        io.pending_max = limited ? 50000 : UINT64_MAX;
        wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
        o.segment_bytes = 1 << 20;
        o.pending_bytes_max = limited ? io.pending_max : 0;
        wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
        assert_non_null(w);
        atomic_store(&io.w, w);
        atomic_store(&io.stalled, true);
        unsigned char rec[1000] = {0};
        for (uint64_t r = 1; r <= 100; r++)
            assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
        assert_true(wal_pending_bytes(w) >= 99 * sizeof rec);
        assert_int_equal(wal_backlogged(w), limited);
        unsigned calls = atomic_load(&io.durable_calls);
        atomic_store(&io.pwrite_errno, EIO);
        atomic_store(&io.stalled, false);
        wait_durable(w, &io, 100);
        assert_non_null(wal_failed(w));
        for (int k = 0; k < 5000 && wal_pending_bytes(w) != 0; k++)
            usleep(1000);
        assert_int_equal(wal_pending_bytes(w), 0); /* dropped with the failure */
        assert_false(wal_backlogged(w));
        wait_calls(&io, calls); /* the failure is news: a paused core wakes to it */
        wal_close(w);
        io_done(&io);
        tmpdir_free(dir);
    }
}

/* ---- torn tails --------------------------------------------------------------- */

/* A log of n records in one segment; returns the segment path and the
 * offsets where records start (offs[n] = end). */
static char *torn_setup(const char *dir, io_ctx_t *io, uint32_t n, size_t *offs)
{
    char err[1024];
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, io);
    o.segment_bytes = 1 << 20;
    o.record_bytes_max = 60;
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    append_range(w, 0, n, 60);
    wal_close(w);
    offs[0] = HDR_BYTES;
    for (uint32_t i = 0; i < n; i++)
        offs[i + 1] = offs[i] + FRAME_BYTES + rec_len(i, 60);
    char *path = malloc(4200);
    snprintf(path, 4200, "%s/00000000000000000001.wal", dir);
    assert_int_equal(file_size(path), offs[n]);
    return path;
}

/* Reopen dir after its segment was replaced by b[0..size), good up to
 * good_end: expect exactly the records that end at or before good_end,
 * and a cut at the end of the last of them. */
static void torn_check_at(const char *dir, const char *path, const unsigned char *b, size_t size, size_t good_end,
                          io_ctx_t *io, const size_t *offs, uint32_t n, seen_t *s)
{
    char err[1024];
    wal_recovery_t rec;
    file_put(path, b, size);
    uint32_t want = 0;
    while (want < n && offs[want + 1] <= good_end)
        want++;
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, io);
    o.segment_bytes = 1 << 20;
    o.record_bytes_max = 60;
    wal_t *w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    if (w == NULL)
        fail_msg("cut at %zu: %s", size, err);
    assert_int_equal(s->n, want);
    assert_int_equal(s->bad, 0);
    assert_int_equal(file_size(path), offs[want]);
    if (offs[want] == size) {
        assert_int_equal(rec.truncated_bytes, 0);
    } else {
        assert_int_equal(rec.truncated_at, offs[want]);
        assert_int_equal(rec.truncated_bytes, size - offs[want]);
        assert_string_equal(rec.truncated_file, path);
    }
    wal_close(w);
}

static void torn_check(const char *dir, const char *path, const unsigned char *b, size_t size, io_ctx_t *io,
                       const size_t *offs, uint32_t n, seen_t *s)
{
    torn_check_at(dir, path, b, size, size, io, offs, n, s);
}

static void test_torn_tail_every_byte(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    enum { N = 40 };
    size_t offs[N + 1];
    char *path = torn_setup(dir, &io, N, offs);
    size_t size;
    unsigned char *orig = file_get(path, &size);
    seen_t *s = calloc(1, sizeof *s);
    /* Every cut inside the last three records (and at their starts). */
    for (size_t cut = offs[N - 3]; cut <= size; cut++)
        torn_check(dir, path, orig, cut, &io, offs, N, s);
    /* Zeros over the last 512-byte sector, file size kept. */
    unsigned char *b = malloc(size + 4096);
    memcpy(b, orig, size);
    size_t sector = (size - 1) / 512 * 512;
    memset(b + sector, 0, size - sector);
    torn_check_at(dir, path, b, size, sector, &io, offs, N, s);
    /* A whole sector of zeros after the last record (preallocated space). */
    memcpy(b, orig, size);
    memset(b + size, 0, 512);
    torn_check(dir, path, b, size + 512, &io, offs, N, s);
    /* Random garbage after the last record. */
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (size_t i = size; i < size + 4096; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
    }
    torn_check(dir, path, b, size + 4096, &io, offs, N, s);
    /* After a cut, appending resumes at the cut and reads back. */
    torn_check(dir, path, orig, offs[N - 1] + 5, &io, offs, N, s);
    char err[1024];
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 1 << 20;
    o.record_bytes_max = 60;
    wal_t *w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    append_range(w, N - 1, N + 5, 60);
    wal_close(w);
    w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, N + 5);
    assert_int_equal(s->bad, 0);
    wal_close(w);
    free(b);
    free(orig);
    free(path);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

/* A last segment that died being created (no header yet) is removed. */
static void test_torn_segment_creation(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024], p2[4200];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    enum { N = 10 };
    size_t offs[N + 1];
    char *path = torn_setup(dir, &io, N, offs);
    snprintf(p2, sizeof p2, "%s/00000000000000000002.wal", dir);
    unsigned char half[HDR_BYTES];
    size_t size;
    unsigned char *orig = file_get(path, &size);
    memcpy(half, orig, 20); /* the start of a header */
    file_put(p2, half, 20);
    seen_t *s = calloc(1, sizeof *s);
    wal_recovery_t rec;
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 1 << 20;
    o.record_bytes_max = 60;
    wal_t *w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, N);
    assert_string_equal(rec.truncated_file, p2);
    assert_int_equal(rec.truncated_bytes, 20);
    append_range(w, N, N + 3, 60);
    wal_close(w);
    w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, N + 3);
    assert_int_equal(s->bad, 0);
    wal_close(w);
    free(orig);
    free(path);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

/* ---- corruption --------------------------------------------------------------- */

/* Flip byte at in the segment; reopening must fail naming file and offset. */
static void expect_corrupt(const char *dir, const char *path, const unsigned char *orig, size_t size, size_t at,
                           size_t bad_off, io_ctx_t *io)
{
    char err[1024], want[64];
    unsigned char *b = malloc(size);
    memcpy(b, orig, size);
    b[at] ^= 0x40;
    file_put(path, b, size);
    seen_t *s = calloc(1, sizeof *s);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, io);
    o.segment_bytes = 1 << 20;
    o.record_bytes_max = 60;
    err[0] = '\0';
    wal_t *w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    if (w != NULL)
        fail_msg("flip at %zu: opened", at);
    assert_non_null(strstr(err, path));
    snprintf(want, sizeof want, "offset %zu,", bad_off);
    if (strstr(err, want) == NULL)
        fail_msg("flip at %zu: \"%s\" lacks \"%s\"", at, err, want);
    assert_int_equal(file_size(path), size); /* nothing cut */
    free(s);
    free(b);
}

static void test_midlog_corruption(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    enum { N = 30 };
    size_t offs[N + 1];
    char *path = torn_setup(dir, &io, N, offs);
    size_t size;
    unsigned char *orig = file_get(path, &size);
    /* Every byte of record 10 (length, crc, revision, payload), and of the
     * record just before the last one. */
    for (size_t at = offs[10]; at < offs[11]; at++)
        expect_corrupt(dir, path, orig, size, at, offs[10], &io);
    for (size_t at = offs[N - 2]; at < offs[N - 1]; at++)
        expect_corrupt(dir, path, orig, size, at, offs[N - 2], &io);
    /* The first record. */
    expect_corrupt(dir, path, orig, size, offs[0] + 4, offs[0], &io);
    /* A flip in the last record is a torn tail, not corruption. */
    seen_t *s = calloc(1, sizeof *s);
    unsigned char *b = malloc(size);
    memcpy(b, orig, size);
    b[offs[N - 1] + 3] ^= 1;
    torn_check_at(dir, path, b, size, offs[N - 1], &io, offs, N, s);
    assert_int_equal(s->n, N - 1);
    free(b);
    free(s);
    free(orig);
    free(path);
    io_done(&io);
    tmpdir_free(dir);
}

/* Write a well-formed frame (salted crc of the segment at b) at b + off. */
static void frame_forge(unsigned char *b, size_t off, uint64_t rev, const void *p, uint32_t len)
{
    unsigned char pre[20];
    memcpy(pre, b + 24, 8); /* the salt */
    memcpy(pre + 8, &rev, 8);
    memcpy(pre + 16, &len, 4);
    uint32_t crc = ordo_crc32c(ordo_crc32c(0, pre, 20), p, len);
    memcpy(b + off, &len, 4);
    memcpy(b + off + 4, &crc, 4);
    memcpy(b + off + 8, &rev, 8);
    memcpy(b + off + FRAME_BYTES, p, len);
}

static void test_revision_going_back(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    enum { N = 10 };
    size_t offs[N + 1];
    char *path = torn_setup(dir, &io, N, offs);
    size_t size;
    unsigned char *b = file_get(path, &size);
    unsigned char *c = malloc(size + 64);
    memcpy(c, b, size);
    frame_forge(c, size, 1, "back", 4); /* a good frame, revision 1 after higher ones */
    file_put(path, c, size + FRAME_BYTES + 4);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_null(w);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "revision"));
    free(c);
    free(b);
    free(path);
    io_done(&io);
    tmpdir_free(dir);
}

/* A bad record in a segment that is not the last: corruption, even with
 * nothing after it in that segment. */
static void test_corrupt_sealed_segment(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024], p1[4200], want[64];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.record_bytes_max = 700;
    seen_t *s = calloc(1, sizeof *s);
    wal_t *w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    append_range(w, 0, 100, 700);
    wal_close(w);
    snprintf(p1, sizeof p1, "%s/00000000000000000001.wal", dir);
    size_t size;
    unsigned char *b = file_get(p1, &size);
    size_t off = HDR_BYTES, last = 0;
    for (uint32_t i = 0; off < size; i++) {
        last = off;
        off += FRAME_BYTES + rec_len(i, 700);
    }
    assert_int_equal(off, size);
    b[size - 1] ^= 0x10; /* the last record of segment 1 */
    file_put(p1, b, size);
    w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_null(w);
    assert_non_null(strstr(err, p1));
    snprintf(want, sizeof want, "offset %zu,", last);
    assert_non_null(strstr(err, want));
    /* A bad header in a sealed segment. */
    b[size - 1] ^= 0x10;
    b[25] ^= 1;
    file_put(p1, b, size);
    w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_null(w);
    assert_non_null(strstr(err, p1));
    assert_non_null(strstr(err, "header"));
    free(b);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

/* ---- repair ---------------------------------------------------------------------- */

/* The bytes of path equal want[0..n). */
static void assert_file_is(const char *path, const unsigned char *want, size_t n)
{
    size_t size;
    unsigned char *b = file_get(path, &size);
    assert_int_equal(size, n);
    assert_memory_equal(b, want, n);
    free(b);
}

/* Mid-log corruption with repair on: the log is cut at the first bad
 * record, exactly the prefix is replayed, the cut bytes are kept in a file
 * beside it, and appending resumes at the cut. Without repair it is still
 * refused. A revision going back is cut the same way. */
static void test_repair_cuts_at_the_first_bad_record(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024], saved[4300];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    enum { N = 30 };
    size_t offs[N + 1];
    char *path = torn_setup(dir, &io, N, offs);
    size_t size;
    unsigned char *b = file_get(path, &size);
    b[offs[10] + 5] ^= 0x20; /* record 10's crc */
    file_put(path, b, size);
    seen_t *s = calloc(1, sizeof *s);
    wal_recovery_t rec;
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 1 << 20;
    o.record_bytes_max = 60;
    assert_null(reopen(&o, 0, s, 0, &rec, err, sizeof err));
    assert_non_null(strstr(err, path));
    assert_int_equal(file_size(path), size);
    o.repair = true;
    wal_t *w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, 10);
    assert_int_equal(s->bad, 0);
    assert_true(rec.repaired);
    assert_string_equal(rec.repair_file, path);
    assert_int_equal(rec.repair_at, offs[10]);
    assert_int_equal(rec.repair_bytes, size - offs[10]);
    assert_int_equal(rec.repair_last_rev, rec_rev(9));
    assert_int_equal(rec.repair_segments_moved, 0);
    snprintf(saved, sizeof saved, "%s.cut-at-%zu", path, offs[10]);
    assert_string_equal(rec.repair_saved, saved);
    assert_non_null(strstr(rec.repair_reason, "followed by a good one"));
    assert_file_is(saved, b + offs[10], size - offs[10]);
    assert_int_equal(file_size(path), offs[10]);
    append_range(w, 10, 15, 60);
    wal_close(w);
    o.repair = false;
    w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, 15);
    assert_int_equal(s->bad, 0);
    assert_false(rec.repaired);
    wal_close(w);
    assert_file_is(saved, b + offs[10], size - offs[10]); /* kept */

    /* A good frame whose revision goes back, then more: cut at it; a second
     * cut at the same offset gets a name of its own. */
    size = file_size(path);
    free(b);
    b = file_get(path, &size);
    unsigned char *c = malloc(size + 64);
    memcpy(c, b, size);
    frame_forge(c, size, 1, "back", 4);
    frame_forge(c, size + FRAME_BYTES + 4, rec_rev(20), "more", 4);
    file_put(path, c, size + 2 * (FRAME_BYTES + 4));
    o.repair = true;
    w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, 15);
    assert_int_equal(rec.repair_at, size);
    assert_int_equal(rec.repair_bytes, 2 * (FRAME_BYTES + 4));
    assert_non_null(strstr(rec.repair_reason, "revision"));
    assert_file_is(rec.repair_saved, c + size, 2 * (FRAME_BYTES + 4));
    wal_close(w);
    memcpy(c + size, "garbage!", 8); /* not a frame; the last segment: a torn tail, not a repair */
    file_put(path, c, size + 8);
    w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_false(rec.repaired);
    assert_int_equal(rec.truncated_bytes, 8);
    wal_close(w);
    free(c);
    free(b);
    free(s);
    free(path);
    io_done(&io);
    tmpdir_free(dir);
}

/* Corruption in a sealed segment with repair on: every later segment is
 * renamed aside whole, the bad one cut (or, with a bad header, renamed
 * aside too), and the log resumes at the end of what is good. */
static void test_repair_moves_later_segments_aside(void **state)
{
    (void)state;
    for (int bad_header = 0; bad_header <= 1; bad_header++) {
        char *dir = tmpdir_new("ordo-wal-");
        char err[1024], names[64][32], p[4300];
        io_ctx_t io;
        io_init(&io);
        atomic_store(&io.fake_sync, true);
        wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
        o.record_bytes_max = 700;
        seen_t *s = calloc(1, sizeof *s);
        wal_t *w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
        assert_non_null(w);
        append_range(w, 0, 100, 700);
        wal_close(w);
        int nseg = seg_files(dir, names, 64);
        assert_true(nseg >= 4);
        /* Records per segment, and the bytes of every segment. */
        unsigned char *seg[64];
        size_t segsize[64];
        uint32_t first_of[65];
        for (int i = 0, rec_i = 0; i < nseg; i++) {
            snprintf(p, sizeof p, "%s/%s", dir, names[i]);
            seg[i] = file_get(p, &segsize[i]);
            first_of[i] = (uint32_t)rec_i;
            for (size_t off = HDR_BYTES; off < segsize[i]; rec_i++)
                off += FRAME_BYTES + rec_len((uint32_t)rec_i, 700);
            first_of[i + 1] = (uint32_t)rec_i;
        }
        int victim = 1; /* the second segment */
        size_t at = bad_header ? 0 : segsize[victim] - FRAME_BYTES - rec_len(first_of[victim + 1] - 1, 700);
        unsigned char *b = malloc(segsize[victim]);
        memcpy(b, seg[victim], segsize[victim]);
        b[bad_header ? 25 : segsize[victim] - 1] ^= 0x10;
        snprintf(p, sizeof p, "%s/%s", dir, names[victim]);
        file_put(p, b, segsize[victim]);
        wal_recovery_t rec;
        assert_null(reopen(&o, 0, s, 0, &rec, err, sizeof err));
        o.repair = true;
        w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
        assert_non_null(w);
        uint32_t kept = bad_header ? first_of[victim] : first_of[victim + 1] - 1;
        assert_int_equal(s->n, kept);
        assert_int_equal(s->bad, 0);
        assert_true(rec.repaired);
        assert_string_equal(rec.repair_file, p);
        assert_int_equal(rec.repair_at, at);
        assert_int_equal(rec.repair_last_rev, rec_rev(kept - 1));
        assert_int_equal(rec.repair_segments_moved, nseg - victim - 1);
        size_t cut = segsize[victim] - at;
        for (int i = victim + 1; i < nseg; i++)
            cut += segsize[i];
        assert_int_equal(rec.repair_bytes, cut);
        char want[4400];
        if (bad_header)
            snprintf(want, sizeof want, "%s/%s.cut", dir, names[victim]);
        else
            snprintf(want, sizeof want, "%s/%s.cut-at-%zu", dir, names[victim], at);
        assert_string_equal(rec.repair_saved, want);
        assert_file_is(want, b + at, segsize[victim] - at);
        for (int i = victim + 1; i < nseg; i++) {
            snprintf(want, sizeof want, "%s/%s.cut", dir, names[i]);
            assert_file_is(want, seg[i], segsize[i]);
        }
        append_range(w, kept, kept + 20, 700);
        wal_close(w);
        o.repair = false;
        w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
        assert_non_null(w);
        assert_int_equal(s->n, kept + 20);
        assert_int_equal(s->bad, 0);
        wal_close(w);
        for (int i = 0; i < nseg; i++)
            free(seg[i]);
        free(b);
        free(s);
        io_done(&io);
        tmpdir_free(dir);
    }
}

/* Records written under another segment's salt never check: records
 * copied behind a fresh header, and a file renamed to another number. */
static void test_stale_bytes_rejected(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024], p1[4200], p2[4200], p3[4200];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    enum { N = 10 };
    size_t offs[N + 1];
    char *path = torn_setup(dir, &io, N, offs);
    snprintf(p1, sizeof p1, "%s", path);
    /* Reopen and append one more so segment 2 exists with its own salt. */
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 64; /* roll at once */
    o.record_bytes_max = 60;
    seen_t *s = calloc(1, sizeof *s);
    wal_t *w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    append_range(w, N, N + 1, 60);
    wal_close(w);
    snprintf(p2, sizeof p2, "%s/00000000000000000002.wal", dir);
    size_t s1, s2;
    unsigned char *b1 = file_get(p1, &s1), *b2 = file_get(p2, &s2);
    assert_memory_not_equal(b1 + 24, b2 + 24, 8); /* salts differ */
    /* Segment 2 = its header + its record + segment 1's records. */
    unsigned char *c = malloc(s2 + s1);
    memcpy(c, b2, s2);
    memcpy(c + s2, b1 + HDR_BYTES, s1 - HDR_BYTES);
    file_put(p2, c, s2 + s1 - HDR_BYTES);
    wal_recovery_t rec;
    w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(s->n, N + 1); /* the copies did not pass */
    assert_int_equal(rec.truncated_at, s2);
    assert_int_equal(rec.truncated_bytes, s1 - HDR_BYTES);
    wal_close(w);
    /* Segment 1 copied as segment 3: its header names segment 1. */
    snprintf(p3, sizeof p3, "%s/00000000000000000003.wal", dir);
    file_put(p3, b1, s1);
    w = reopen(&o, 0, s, 0, &rec, err, sizeof err);
    assert_null(w);
    assert_non_null(strstr(err, p3));
    free(c);
    free(b1);
    free(b2);
    free(path);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

/* ---- I/O failures --------------------------------------------------------------- */

/* Fail the next pwrite (or fdatasync) with e; expect the sticky failure. */
static void fault_case(bool in_sync, int e, const char *call, const char *msg)
{
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    atomic_store(&io.w, w);
    unsigned char rec[50] = {1};
    for (uint64_t r = 1; r <= 5; r++)
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
    wait_durable(w, &io, 5);
    assert_int_equal(wal_durable_rev(w), 5);
    assert_null(wal_failed(w));
    unsigned calls = atomic_load(&io.durable_calls);
    if (in_sync)
        atomic_store(&io.sync_errno, e);
    else
        atomic_store(&io.pwrite_errno, e);
    assert_int_equal(wal_append(w, 6, rec, sizeof rec), 0);
    wait_durable(w, &io, 6);
    const char *why = wal_failed(w);
    assert_non_null(why);
    assert_non_null(strstr(why, call));
    assert_non_null(strstr(why, "00000000000000000001.wal"));
    assert_non_null(strstr(why, msg));
    assert_int_equal(wal_durable_rev(w), 5);
    wait_calls(&io, calls); /* the core is told */
    /* Sticky: the disk is fine again, the log is not. */
    atomic_store(&io.sync_errno, 0);
    atomic_store(&io.pwrite_errno, 0);
    assert_int_equal(wal_append(w, 7, rec, sizeof rec), -1);
    usleep(20 * 1000);
    assert_int_equal(wal_durable_rev(w), 5);
    unsigned syncs = atomic_load(&io.syncs);
    wal_close(w);
    assert_int_equal(atomic_load(&io.syncs), syncs); /* close does not retry */
    /* What was acknowledged is there. */
    seen_t *s = calloc(1, sizeof *s);
    s->len_max = 50;
    w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    assert_true(wal_durable_rev(w) >= 5);
    wal_close(w);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

static void test_pwrite_eio(void **state)
{
    (void)state;
    fault_case(false, EIO, "pwrite", "Input/output error");
}

static void test_pwrite_enospc(void **state)
{
    (void)state;
    fault_case(false, ENOSPC, "pwrite", "No space left on device");
}

static void test_fdatasync_eio(void **state)
{
    (void)state;
    fault_case(true, EIO, "fdatasync", "Input/output error");
}

/* A failure while rolling to a new segment (its header write). */
static void test_roll_failure(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 200;
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    atomic_store(&io.w, w);
    unsigned char rec[100] = {0};
    assert_int_equal(wal_append(w, 1, rec, sizeof rec), 0);
    assert_int_equal(wal_append(w, 2, rec, sizeof rec), 0);
    wait_durable(w, &io, 2); /* 40 + 2 * 116 > 200: the next record rolls */
    assert_int_equal(wal_durable_rev(w), 2);
    atomic_store(&io.pwrite_errno, ENOSPC);
    assert_int_equal(wal_append(w, 3, rec, sizeof rec), 0);
    wait_durable(w, &io, 3);
    assert_non_null(wal_failed(w));
    assert_non_null(strstr(wal_failed(w), "00000000000000000002.wal"));
    assert_int_equal(wal_durable_rev(w), 2);
    wal_close(w);
    io_done(&io);
    tmpdir_free(dir);
}

static int refuse_fn(void *arg, uint64_t rev, const void *rec, size_t len)
{
    (void)arg, (void)rec, (void)len;
    return rev == rec_rev(7) ? 42 : 0;
}

/* A replay callback that refuses a record stops wal_open(). */
static void test_replay_refused(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    enum { N = 10 };
    size_t offs[N + 1];
    char *path = torn_setup(dir, &io, N, offs);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    assert_null(wal_open(&o, 0, refuse_fn, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "(42)"));
    free(path);
    io_done(&io);
    tmpdir_free(dir);
}

/* ---- housekeeping ----------------------------------------------------------------- */

static void test_remove_before_and_bytes(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024], names[64][32], p[4200];
    io_ctx_t io;
    io_init(&io);
    atomic_store(&io.fake_sync, true);
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.record_bytes_max = 700;
    seen_t *s = calloc(1, sizeof *s);
    wal_t *w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    append_range(w, 0, 300, 700);
    wait_durable(w, &io, rec_rev(299));
    int n = seg_files(dir, names, 64);
    assert_true(n >= 4);
    uint64_t on_disk = 0;
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        on_disk += file_size(p);
    }
    assert_int_equal(wal_bytes(w), on_disk);
    /* Segment 1's last revision: read it back by a replay from its file. */
    wal_close(w);
    w = reopen(&o, 0, s, 0, NULL, err, sizeof err);
    assert_non_null(w);
    snprintf(p, sizeof p, "%s/%s", dir, names[0]);
    uint64_t seg1_bytes = file_size(p), off = HDR_BYTES;
    uint32_t i = 0;
    while (off < seg1_bytes)
        off += FRAME_BYTES + rec_len(i++, 700);
    uint64_t seg1_last = rec_rev(i - 1);
    assert_int_equal(wal_remove_before(w, seg1_last - 1), 0);
    assert_int_equal(wal_remove_before(w, seg1_last), 1);
    /* Everything: all but the segment being written. */
    assert_int_equal(wal_remove_before(w, UINT64_MAX), n - 2);
    wal_stats_t st;
    wal_get_stats(w, &st);
    assert_int_equal(seg_files(dir, names, 64), 1);
    assert_int_equal(st.segments, 1);
    snprintf(p, sizeof p, "%s/%s", dir, names[0]);
    assert_int_equal(wal_bytes(w), file_size(p));
    wal_close(w);
    free(s);
    io_done(&io);
    tmpdir_free(dir);
}

static void test_bad_options_and_lock(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    wal_options_t o = opts(dir, 7, NULL);
    assert_null(wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err));
    o = opts(dir, WAL_SYNC_NO, NULL);
    o.record_bytes_max = WAL_RECORD_BYTES_LIMIT + 1;
    assert_null(wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err));
    o = opts(dir, WAL_SYNC_NO, NULL);
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    /* A second opener of the same directory is refused. */
    assert_null(wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "in use"));
    wal_close(w);
    tmpdir_free(dir);
}

/* ---- figures ---------------------------------------------------------------------- */

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v != NULL ? atol(v) : dflt;
}

/* ALWAYS, real fdatasync, 100-byte records: an open loop (append as fast
 * as possible, at most 10000 in flight) and a closed loop (append, wait
 * for durable, repeat). */
static void test_bench_always(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    io_ctx_t io;
    io_init(&io);
    double secs = (double)env_long("ORDO_WAL_BENCH_MS", 300) / 1000.0;
    wal_options_t o = opts(dir, WAL_SYNC_ALWAYS, &io);
    o.segment_bytes = 64 << 20;
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    unsigned char rec[100] = {0};
    uint64_t rev = 0;
    wal_stats_t a, b;
    wal_get_stats(w, &a);
    double t0 = now_s();
    while (now_s() - t0 < secs) {
        for (int k = 0; k < 1000; k++)
            assert_int_equal(wal_append(w, ++rev, rec, sizeof rec), 0);
        if (rev > wal_durable_rev(w) + 10000)
            wait_durable(w, &io, rev - 10000);
    }
    wait_durable(w, &io, rev);
    double dt = now_s() - t0;
    wal_get_stats(w, &b);
    fprintf(stderr, "bench wal ALWAYS open loop: %.0f appends/s, %.0f syncs/s, %.0f records/sync\n",
            (double)rev / dt, (double)(b.syncs - a.syncs) / dt, (double)rev / (double)(b.syncs - a.syncs));
    uint64_t start = rev;
    a = b;
    t0 = now_s();
    while (now_s() - t0 < secs) {
        assert_int_equal(wal_append(w, ++rev, rec, sizeof rec), 0);
        wait_durable(w, &io, rev);
    }
    dt = now_s() - t0;
    wal_get_stats(w, &b);
    fprintf(stderr, "bench wal ALWAYS closed loop: %.0f appends/s, %.0f syncs/s, %.1f us/append\n",
            (double)(rev - start) / dt, (double)(b.syncs - a.syncs) / dt, dt * 1e6 / (double)(rev - start));
    assert_null(wal_failed(w));
    wal_close(w);
    io_done(&io);
    tmpdir_free(dir);
}

static int count_fn(void *arg, uint64_t rev, const void *rec, size_t len)
{
    (void)rec;
    uint64_t *n = arg;
    if (len != 16 || rev != *n + 1)
        return 1;
    (*n)++;
    return 0;
}

/* Replay speed: write N records of 16 bytes (NO), reopen, time it. */
static void test_bench_replay(void **state)
{
    (void)state;
    char *dir = tmpdir_new("ordo-wal-");
    char err[1024];
    uint64_t n = (uint64_t)env_long("ORDO_WAL_BENCH_RECORDS", 100000);
    wal_options_t o = opts(dir, WAL_SYNC_NO, NULL);
    o.segment_bytes = 64 << 20;
    wal_t *w = wal_open(&o, 0, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(w);
    unsigned char rec[16] = {0};
    for (uint64_t r = 1; r <= n; r++)
        assert_int_equal(wal_append(w, r, rec, sizeof rec), 0);
    wal_close(w);
    uint64_t got = 0;
    wal_recovery_t rr;
    double t0 = now_s();
    w = wal_open(&o, 0, count_fn, &got, &rr, err, sizeof err);
    double dt = now_s() - t0;
    assert_non_null(w);
    assert_int_equal(got, n);
    fprintf(stderr, "bench wal replay: %" PRIu64 " records of 16 bytes in %.3f s: %.0f records/s (%.0f MB/s)\n", n,
            dt, (double)n / dt, (double)wal_bytes(w) / dt / 1e6);
    wal_close(w);
    tmpdir_free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_hw_matches_sw),
        cmocka_unit_test(test_round_trip_across_segments),
        cmocka_unit_test(test_short_writes),
        cmocka_unit_test(test_always_publishes_after_sync),
        cmocka_unit_test(test_always_batch_window),
        cmocka_unit_test(test_always_gathers_the_answered_writers),
        cmocka_unit_test(test_syncs_in_flight),
        cmocka_unit_test(test_everysec_and_no),
        cmocka_unit_test(test_kick_inline),
        cmocka_unit_test(test_backlogged_until_the_log_catches_up),
        cmocka_unit_test(test_backlogged_never_without_limit_or_after_failure),
        cmocka_unit_test(test_torn_tail_every_byte),
        cmocka_unit_test(test_torn_segment_creation),
        cmocka_unit_test(test_midlog_corruption),
        cmocka_unit_test(test_revision_going_back),
        cmocka_unit_test(test_corrupt_sealed_segment),
        cmocka_unit_test(test_stale_bytes_rejected),
        cmocka_unit_test(test_repair_cuts_at_the_first_bad_record),
        cmocka_unit_test(test_repair_moves_later_segments_aside),
        cmocka_unit_test(test_pwrite_eio),
        cmocka_unit_test(test_pwrite_enospc),
        cmocka_unit_test(test_fdatasync_eio),
        cmocka_unit_test(test_roll_failure),
        cmocka_unit_test(test_replay_refused),
        cmocka_unit_test(test_remove_before_and_bytes),
        cmocka_unit_test(test_bad_options_and_lock),
        cmocka_unit_test(test_bench_always),
        cmocka_unit_test(test_bench_replay),
    };
    sync_parallel = 1;
    int failed = cmocka_run_group_tests_name("wal, one sync at a time", tests, NULL, NULL);
    sync_parallel = WAL_SYNC_PARALLEL_MAX;
    return failed + cmocka_run_group_tests_name("wal, syncs in flight at once", tests, NULL, NULL);
}
