/*
 * test_srv_raft_store.c -- raft's durable state as ordod keeps it
 * (log/raft_store.h): term, vote, snapshot metadata and entries round trip
 * across close and open; a truncation is not undone by a reload; a torn or
 * corrupt tail is cut and counted; a torn meta slot leaves the other;
 * compaction drops whole segments and the rest loads; install drops
 * everything, writes in flight included (their callback reports nothing);
 * appends of one loop turn are one write and one callback; a failing
 * write is retried until it succeeds, stats.failing set meanwhile; a
 * snapshot past what reached the disk restarts the log after it; close
 * waits for a write in flight and writes what is left; a missing segment
 * is refused.
 *
 * Every test works in its own mkdtemp() directory under $TMPDIR (or
 * /tmp), on its own libuv loop. Writes are made to fail, or held on the
 * worker until the test lets them go, through the store's test seam
 * (raft_store_set_seam()); small segments come through it too.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "srvtest.h"

#include "base/bytes.h"
#include "log/raft_store.h"

#define SEG_HEADER_BYTES 32 /* raft_store.c's format */
#define REC_HEADER_BYTES 32
#define META_SLOT_BYTES (4096u + RAFT_STORE_CONF_BYTES_MAX)
#define CALLS_MAX 64

/* ---- the seam: failing and held writes ------------------------------------- */

typedef struct gate_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fail_errno;        /* non-zero: every write fails with it */
    int fail_seg_errno;    /* non-zero: writes to segment files fail with it */
    bool hold;             /* the next write waits for released (then hold clears) */
    bool entered, released;
    int pwrites;
} gate_t;

static ssize_t gate_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    gate_t *g = ctx;
    pthread_mutex_lock(&g->mu);
    g->pwrites++;
    if (g->hold) {
        g->hold = false;
        g->entered = true;
        pthread_cond_broadcast(&g->cv);
        while (!g->released)
            pthread_cond_wait(&g->cv, &g->mu);
    }
    int e = g->fail_errno;
    if (e == 0 && g->fail_seg_errno != 0) {
        char link[64], target[4200];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        if (strstr(target, "/seg-") != NULL)
            e = g->fail_seg_errno;
    }
    pthread_mutex_unlock(&g->mu);
    if (e != 0) {
        errno = e;
        return -1;
    }
    return pwrite(fd, buf, n, off);
}

static void gate_init(gate_t *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
}

static void gate_set_fail(gate_t *g, int e)
{
    pthread_mutex_lock(&g->mu);
    g->fail_errno = e;
    pthread_mutex_unlock(&g->mu);
}

static void gate_wait_entered(gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_release(gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    g->released = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void *gate_release_thread(void *arg)
{
    gate_release(arg);
    return NULL;
}

/* ---- the fixture --------------------------------------------------------------- */

typedef struct fx_s {
    uv_loop_t loop;
    char *dir;
    raft_store_t *s;
    gate_t gate;
    uint64_t seg_bytes;    /* for the seam; 0: the default */
    int calls;
    uint64_t first[CALLS_MAX], last[CALLS_MAX];
} fx_t;

static void on_persisted(void *arg, uint64_t first, uint64_t last)
{
    fx_t *f = arg;
    assert_true(f->calls < CALLS_MAX);
    assert_true(first <= last);
    f->first[f->calls] = first;
    f->last[f->calls] = last;
    f->calls++;
}

static void fx_open(fx_t *f)
{
    char err[512] = "";
    int rc = raft_store_open(f->dir, &f->loop, on_persisted, f, &f->s, err, sizeof err);
    if (rc != 0)
        fail_msg("raft_store_open: %s", err);
    raft_store_seam_t seam = {.pwrite_fn = gate_pwrite, .ctx = &f->gate, .segment_bytes = f->seg_bytes};
    raft_store_set_seam(f->s, &seam);
}

static fx_t *fx_new(uint64_t seg_bytes)
{
    fx_t *f = calloc(1, sizeof *f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->dir = tmpdir_new("ordo-raft-store-");
    f->seg_bytes = seg_bytes;
    gate_init(&f->gate);
    fx_open(f);
    return f;
}

/* Runs the loop until the store has nothing left to do. */
static void drain(fx_t *f)
{
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

static void fx_close(fx_t *f)
{
    raft_store_close(f->s);
    f->s = NULL;
    uv_run(&f->loop, UV_RUN_DEFAULT); /* what the loop still owes the store */
}

static void fx_reopen(fx_t *f)
{
    fx_close(f);
    fx_open(f);
}

static void fx_free(fx_t *f)
{
    if (f->s != NULL)
        fx_close(f);
    assert_int_equal(uv_loop_close(&f->loop), 0); /* nothing left behind */
    tmpdir_free(f->dir);
    pthread_cond_destroy(&f->gate.cv);
    pthread_mutex_destroy(&f->gate.mu);
    free(f);
}

/* ---- entries --------------------------------------------------------------------- */

/* The data of entry index in generation gen: its length varies. */
static size_t ent_data(uint64_t index, uint64_t gen, char *out, size_t cap)
{
    int n = snprintf(out, cap, "entry %" PRIu64 " gen %" PRIu64 " %.*s", index, gen, (int)(index % 13),
                     "xxxxxxxxxxxxxxxx");
    return (size_t)n;
}

/* Append n entries at index, of term and generation gen. */
static void append(fx_t *f, uint64_t index, unsigned n, uint64_t term, uint64_t gen)
{
    struct raft_entry e[64];
    char data[64][64];
    assert_true(n <= 64);
    for (unsigned i = 0; i < n; i++) {
        e[i].term = term;
        e[i].type = i % 5 == 4 ? RAFT_BARRIER : RAFT_COMMAND;
        e[i].buf.len = ent_data(index + i, gen, data[i], sizeof data[i]);
        e[i].buf.base = data[i];
        e[i].batch = NULL;
    }
    char err[256];
    assert_int_equal(raft_store_append(f->s, index, e, n, err, sizeof err), 0);
}

static void check_entry(fx_t *f, uint64_t index, uint64_t term, uint64_t gen)
{
    char want[64];
    size_t len = ent_data(index, gen, want, sizeof want);
    const struct raft_entry *e = raft_store_entry(f->s, index);
    assert_non_null(e);
    assert_int_equal(e->term, term);
    assert_null(e->batch);
    assert_int_equal(e->buf.len, len);
    assert_memory_equal(e->buf.base, want, len);
}

static void check_entries(fx_t *f, uint64_t from, uint64_t to, uint64_t term, uint64_t gen)
{
    for (uint64_t i = from; i <= to; i++)
        check_entry(f, i, term, gen);
}

/* ---- files ------------------------------------------------------------------------ */

static int seg_count(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "seg-", 4) == 0)
            n++;
    closedir(d);
    return n;
}

/* The path of the newest segment. */
static void seg_last(const char *dir, char *out, size_t n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char best[256] = "";
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "seg-", 4) == 0 && strlen(e->d_name) < sizeof best && strcmp(e->d_name, best) > 0)
            memcpy(best, e->d_name, strlen(e->d_name) + 1);
    closedir(d);
    assert_true(best[0] != '\0');
    snprintf(out, n, "%s/%s", dir, best);
}

static unsigned char *file_get(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *size = (size_t)n;
    return b;
}

/* Offset of the record of entry index in segment bytes b (it must be there). */
static size_t rec_offset(const unsigned char *b, size_t size, uint64_t index)
{
    size_t off = SEG_HEADER_BYTES;
    while (off + REC_HEADER_BYTES <= size) {
        if (get_u64(b + off + 8) == index)
            return off;
        off += REC_HEADER_BYTES + get_u32(b + off + 4);
    }
    fail_msg("entry %" PRIu64 " not found", index);
    return 0;
}

/* ---- tests ------------------------------------------------------------------------ */

static void conf_two(struct raft_configuration *c)
{
    raft_configuration_init(c);
    assert_int_equal(raft_configuration_add(c, 1, "127.0.0.1:7001", RAFT_VOTER), 0);
    assert_int_equal(raft_configuration_add(c, 2, "127.0.0.1:7002", RAFT_STANDBY), 0);
}

static void test_round_trip(void **state)
{
    (void)state;
    fx_t *f = fx_new(0);
    char err[256];
    assert_int_equal(raft_store_term(f->s), 0);
    assert_int_equal(raft_store_vote(f->s), 0);
    assert_int_equal(raft_store_snapshot(f->s)->index, 0);
    assert_int_equal(raft_store_first(f->s), 1);
    assert_int_equal(raft_store_last(f->s), 0);
    assert_null(raft_store_entry(f->s, 1));

    assert_int_equal(raft_store_set_term_vote(f->s, 3, 2, err, sizeof err), 0);
    append(f, 1, 10, 3, 0);
    assert_int_equal(raft_store_last(f->s), 10);
    check_entries(f, 1, 10, 3, 0); /* held at once */
    drain(f);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->first[0], 1);
    assert_int_equal(f->last[0], 10);

    fx_reopen(f);
    assert_int_equal(raft_store_cut(f->s), 0);
    assert_int_equal(raft_store_term(f->s), 3);
    assert_int_equal(raft_store_vote(f->s), 2);
    assert_int_equal(raft_store_first(f->s), 1);
    assert_int_equal(raft_store_last(f->s), 10);
    check_entries(f, 1, 10, 3, 0);
    assert_int_equal(raft_store_entry(f->s, 5)->type, RAFT_BARRIER);

    /* A snapshot at 5 keeping 2 trailing entries. */
    raft_store_snap_t snap = {.index = 5, .term = 3, .conf_index = 4};
    conf_two(&snap.conf);
    assert_int_equal(raft_store_set_snapshot(f->s, &snap, 2, err, sizeof err), 0);
    raft_configuration_close(&snap.conf);
    assert_int_equal(raft_store_first(f->s), 4);
    assert_null(raft_store_entry(f->s, 3));
    raft_store_stats_t st;
    raft_store_stats(f->s, &st);
    assert_int_equal(st.entries, 7);
    drain(f);

    fx_reopen(f);
    const raft_store_snap_t *got = raft_store_snapshot(f->s);
    assert_int_equal(got->index, 5);
    assert_int_equal(got->term, 3);
    assert_int_equal(got->conf_index, 4);
    assert_int_equal(got->conf.n, 2);
    assert_int_equal(got->conf.servers[0].id, 1);
    assert_string_equal(got->conf.servers[1].address, "127.0.0.1:7002");
    assert_int_equal(got->conf.servers[1].role, RAFT_STANDBY);
    /* Compaction deletes whole segments: the one segment stays, whole. */
    assert_true(raft_store_first(f->s) <= 4);
    assert_int_equal(raft_store_last(f->s), 10);
    check_entries(f, 4, 10, 3, 0);
    assert_int_equal(raft_store_term(f->s), 3);
    fx_free(f);
}

static void test_truncate_then_reload(void **state)
{
    (void)state;
    fx_t *f = fx_new(256); /* a few entries a segment */
    append(f, 1, 20, 1, 0);
    drain(f);
    int segs_before = seg_count(f->dir);
    assert_true(segs_before >= 4);
    f->calls = 0;
    append(f, 8, 2, 2, 1); /* a new leader's entries from 8 on */
    assert_int_equal(raft_store_last(f->s), 9);
    assert_null(raft_store_entry(f->s, 10));
    drain(f);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->first[0], 8);
    assert_int_equal(f->last[0], 9);
    assert_true(seg_count(f->dir) < segs_before);

    fx_reopen(f);
    assert_int_equal(raft_store_cut(f->s), 0);
    assert_int_equal(raft_store_last(f->s), 9);
    check_entries(f, 1, 7, 1, 0);
    check_entries(f, 8, 9, 2, 1);

    /* Truncation inside the pending batch, then more entries. */
    append(f, 10, 5, 2, 1);
    append(f, 12, 1, 3, 2);
    append(f, 13, 3, 3, 2);
    drain(f);
    fx_reopen(f);
    assert_int_equal(raft_store_last(f->s), 15);
    check_entries(f, 10, 11, 2, 1);
    check_entries(f, 12, 15, 3, 2);

    /* A pure truncation (no entry) survives a reload too. */
    append(f, 11, 0, 0, 0);
    assert_int_equal(raft_store_last(f->s), 10);
    drain(f);
    fx_reopen(f);
    assert_int_equal(raft_store_last(f->s), 10);
    check_entries(f, 8, 10, 2, 1);
    fx_free(f);
}

static void test_truncate_in_flight(void **state)
{
    (void)state;
    fx_t *f = fx_new(0);
    f->gate.hold = true;
    append(f, 1, 5, 1, 0);
    uv_run(&f->loop, UV_RUN_NOWAIT); /* the idle handle hands the batch over */
    gate_wait_entered(&f->gate);     /* the worker holds it */
    append(f, 3, 1, 2, 1);           /* replaces 3..5 */
    gate_release(&f->gate);
    drain(f);
    /* The first batch reports only what was not replaced; the second, 3. */
    assert_int_equal(f->calls, 2);
    assert_int_equal(f->first[0], 1);
    assert_int_equal(f->last[0], 2);
    assert_int_equal(f->first[1], 3);
    assert_int_equal(f->last[1], 3);
    fx_reopen(f);
    assert_int_equal(raft_store_last(f->s), 3);
    check_entries(f, 1, 2, 1, 0);
    check_entry(f, 3, 2, 1);
    fx_free(f);
}

static void test_torn_tail(void **state)
{
    (void)state;
    fx_t *f = fx_new(0);
    append(f, 1, 10, 1, 0);
    drain(f);
    fx_close(f);
    char path[4200];
    seg_last(f->dir, path, sizeof path);
    size_t size;
    unsigned char *b = file_get(path, &size);

    /* Cut mid-record: the last record goes, and its bytes are counted. */
    size_t at10 = rec_offset(b, size, 10);
    assert_int_equal(truncate(path, (off_t)(size - 5)), 0);
    fx_open(f);
    assert_int_equal(raft_store_last(f->s), 9);
    assert_int_equal(raft_store_cut(f->s), size - 5 - at10);
    check_entries(f, 1, 9, 1, 0);
    fx_close(f);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((size_t)st.st_size, at10);

    /* A byte flipped in entry 7's data: 7 and everything after go. */
    free(b);
    b = file_get(path, &size);
    size_t at7 = rec_offset(b, size, 7);
    b[at7 + REC_HEADER_BYTES + 2] ^= 0x40;
    file_put(path, b, size);
    fx_open(f);
    assert_int_equal(raft_store_last(f->s), 6);
    assert_int_equal(raft_store_cut(f->s), size - at7);
    check_entries(f, 1, 6, 1, 0);

    /* The log goes on from there, and reloads clean. */
    append(f, 7, 2, 2, 1);
    drain(f);
    fx_reopen(f);
    assert_int_equal(raft_store_cut(f->s), 0);
    assert_int_equal(raft_store_last(f->s), 8);
    check_entries(f, 7, 8, 2, 1);
    free(b);
    fx_free(f);
}

static void test_torn_tail_spans_segments(void **state)
{
    (void)state;
    fx_t *f = fx_new(200);
    append(f, 1, 12, 1, 0);
    drain(f);
    fx_close(f);
    int segs = seg_count(f->dir);
    assert_true(segs >= 3);
    /* Damage the first segment's second record: every later segment goes. */
    char path[4200];
    snprintf(path, sizeof path, "%s/seg-%020d", f->dir, 1);
    size_t size;
    unsigned char *b = file_get(path, &size);
    size_t at2 = rec_offset(b, size, 2);
    b[at2] ^= 1; /* the crc */
    file_put(path, b, size);
    fx_open(f);
    assert_int_equal(raft_store_last(f->s), 1);
    assert_true(raft_store_cut(f->s) > size - at2);
    assert_int_equal(seg_count(f->dir), 1);
    free(b);
    fx_free(f);
}

/* The slot of meta with the higher sequence number. */
static size_t meta_newest_slot(const unsigned char *m, size_t size)
{
    uint64_t s0 = get_u64(m + 16);
    uint64_t s1 = size > META_SLOT_BYTES + 24 ? get_u64(m + META_SLOT_BYTES + 16) : 0;
    return s1 > s0 ? 1 : 0;
}

static void test_meta_slot_torn(void **state)
{
    (void)state;
    fx_t *f = fx_new(0);
    char err[512];
    assert_int_equal(raft_store_set_term_vote(f->s, 1, 1, err, sizeof err), 0);
    assert_int_equal(raft_store_set_term_vote(f->s, 2, 2, err, sizeof err), 0);
    fx_close(f);
    char path[4200];
    snprintf(path, sizeof path, "%s/meta", f->dir);
    size_t size;
    unsigned char *m = file_get(path, &size);
    size_t newest = meta_newest_slot(m, size);
    m[newest * META_SLOT_BYTES + 30] ^= 0xff; /* inside the term */
    file_put(path, m, size);
    fx_open(f);
    assert_int_equal(raft_store_term(f->s), 1);
    assert_int_equal(raft_store_vote(f->s), 1);
    /* The next write goes to the torn slot, and wins again. */
    assert_int_equal(raft_store_set_term_vote(f->s, 4, 0, err, sizeof err), 0);
    fx_reopen(f);
    assert_int_equal(raft_store_term(f->s), 4);
    assert_int_equal(raft_store_vote(f->s), 0);
    fx_close(f);

    /* Both slots bad: refused, naming the file. */
    free(m);
    m = file_get(path, &size);
    m[30] ^= 0xff;
    m[META_SLOT_BYTES + 30] ^= 0xff;
    file_put(path, m, size);
    raft_store_t *s = NULL;
    assert_int_equal(raft_store_open(f->dir, &f->loop, on_persisted, f, &s, err, sizeof err), -1);
    assert_null(s);
    assert_non_null(strstr(err, "meta"));
    uv_run(&f->loop, UV_RUN_DEFAULT);
    free(m);
    fx_free(f);
}

static void test_compaction(void **state)
{
    (void)state;
    fx_t *f = fx_new(200);
    char err[256];
    append(f, 1, 40, 1, 0);
    drain(f);
    raft_store_stats_t st;
    raft_store_stats(f->s, &st);
    int before = seg_count(f->dir);
    assert_int_equal(st.segments, (uint64_t)before);
    assert_true(before >= 8);

    raft_store_snap_t snap = {.index = 30, .term = 1, .conf_index = 1};
    conf_two(&snap.conf);
    assert_int_equal(raft_store_set_snapshot(f->s, &snap, 5, err, sizeof err), 0);
    assert_int_equal(raft_store_first(f->s), 26);
    raft_store_stats(f->s, &st);
    assert_int_equal(st.entries, 15);
    assert_true(st.segments < (uint64_t)before);
    drain(f);
    assert_int_equal(seg_count(f->dir), (int)st.segments);

    fx_reopen(f);
    assert_true(raft_store_first(f->s) <= 26 && raft_store_first(f->s) > 1);
    assert_int_equal(raft_store_last(f->s), 40);
    check_entries(f, raft_store_first(f->s), 40, 1, 0);
    assert_int_equal(raft_store_snapshot(f->s)->index, 30);

    /* Everything covered: every segment goes, and the log goes on after. */
    snap.index = 40;
    assert_int_equal(raft_store_set_snapshot(f->s, &snap, 0, err, sizeof err), 0);
    raft_configuration_close(&snap.conf);
    assert_int_equal(raft_store_first(f->s), 41);
    assert_int_equal(raft_store_last(f->s), 40);
    drain(f);
    assert_int_equal(seg_count(f->dir), 0);
    fx_reopen(f);
    assert_int_equal(raft_store_first(f->s), 41);
    assert_int_equal(raft_store_last(f->s), 40);
    append(f, 41, 3, 2, 1);
    drain(f);
    fx_reopen(f);
    assert_int_equal(raft_store_last(f->s), 43);
    check_entries(f, 41, 43, 2, 1);
    fx_free(f);
}

static void test_install(void **state)
{
    (void)state;
    fx_t *f = fx_new(200);
    char err[256];
    append(f, 1, 10, 1, 0);
    drain(f);
    raft_store_snap_t snap = {.index = 100, .term = 5, .conf_index = 90};
    conf_two(&snap.conf);
    assert_int_equal(raft_store_install(f->s, &snap, err, sizeof err), 0);
    assert_int_equal(raft_store_first(f->s), 101);
    assert_int_equal(raft_store_last(f->s), 100);
    assert_null(raft_store_entry(f->s, 5));
    drain(f);
    assert_int_equal(seg_count(f->dir), 0);
    f->calls = 0;
    append(f, 101, 3, 5, 1);
    drain(f);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->last[0], 103);
    fx_reopen(f);
    assert_int_equal(raft_store_snapshot(f->s)->index, 100);
    assert_int_equal(raft_store_snapshot(f->s)->conf.n, 2);
    assert_int_equal(raft_store_first(f->s), 101);
    assert_int_equal(raft_store_last(f->s), 103);
    check_entries(f, 101, 103, 5, 1);

    /* Install over a write in flight: it reports nothing, and the old
     * entries do not come back. A lower index than the log's is fine. */
    f->calls = 0;
    f->gate.hold = true;
    append(f, 104, 5, 5, 1);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    gate_wait_entered(&f->gate);
    append(f, 109, 2, 5, 1); /* pending behind it: dropped too */
    snap.index = 102;
    assert_int_equal(raft_store_install(f->s, &snap, err, sizeof err), 0);
    raft_configuration_close(&snap.conf);
    gate_release(&f->gate);
    drain(f);
    assert_int_equal(f->calls, 0);
    assert_int_equal(raft_store_last(f->s), 102);
    append(f, 103, 1, 6, 2);
    drain(f);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->first[0], 103);
    assert_int_equal(f->last[0], 103);
    fx_reopen(f);
    assert_int_equal(raft_store_first(f->s), 103);
    assert_int_equal(raft_store_last(f->s), 103);
    check_entry(f, 103, 6, 2);
    fx_free(f);
}

static void test_group_commit(void **state)
{
    (void)state;
    fx_t *f = fx_new(0);
    for (uint64_t i = 1; i <= 100; i++)
        append(f, i, 1, 1, 0);
    drain(f);
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->first[0], 1);
    assert_int_equal(f->last[0], 100);
    raft_store_stats_t st;
    raft_store_stats(f->s, &st);
    /* The new segment's header and one write of the records; the segment
     * and the directory synced. */
    assert_int_equal(st.writes, 2);
    assert_int_equal(st.syncs, 2);
    assert_int_equal(st.entries, 100);
    fx_free(f);
}

static void test_write_failure_retries(void **state)
{
    (void)state;
    fx_t *f = fx_new(0);
    char err[256];
    gate_set_fail(&f->gate, ENOSPC);
    append(f, 1, 3, 1, 0);
    raft_store_stats_t st;
    do {
        int more = uv_run(&f->loop, UV_RUN_ONCE);
        raft_store_stats(f->s, &st);
        if (!more && st.failing == NULL)
            fail_msg("the loop ran out of work and the store is not failing");
    } while (st.failing == NULL);
    assert_non_null(strstr(st.failing, "No space left on device"));
    assert_true(st.write_errors >= 1);
    assert_int_equal(f->calls, 0);
    append(f, 4, 1, 1, 0); /* waits behind the failed batch */
    /* The meta file fails too, and changes nothing. */
    assert_int_equal(raft_store_set_term_vote(f->s, 7, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "meta"));
    assert_int_equal(raft_store_term(f->s), 0);
    /* Still failing after a retry or two. */
    uint64_t errors = st.write_errors;
    do {
        int more = uv_run(&f->loop, UV_RUN_ONCE);
        raft_store_stats(f->s, &st);
        if (!more && st.write_errors == errors)
            fail_msg("the loop ran out of work without a retry");
    } while (st.write_errors == errors);
    assert_non_null(st.failing);
    assert_int_equal(f->calls, 0);

    gate_set_fail(&f->gate, 0); /* space again */
    drain(f);
    raft_store_stats(f->s, &st);
    assert_null(st.failing);
    assert_int_equal(f->calls, 2);
    assert_int_equal(f->first[0], 1);
    assert_int_equal(f->last[0], 3);
    assert_int_equal(f->first[1], 4);
    assert_int_equal(f->last[1], 4);
    fx_reopen(f);
    assert_int_equal(raft_store_last(f->s), 4);
    check_entries(f, 1, 4, 1, 0);
    fx_free(f);
}

/* A snapshot taken past what the disk holds (the entries failed to
 * write, then the process stopped): the log starts afresh past it. */
static void test_snapshot_outruns_writes(void **state)
{
    (void)state;
    fx_t *f = fx_new(0);
    char err[256];
    append(f, 1, 3, 1, 0);
    drain(f);
    pthread_mutex_lock(&f->gate.mu);
    f->gate.fail_seg_errno = EIO;
    pthread_mutex_unlock(&f->gate.mu);
    append(f, 4, 7, 1, 0);
    raft_store_stats_t st;
    do {
        int more = uv_run(&f->loop, UV_RUN_ONCE);
        raft_store_stats(f->s, &st);
        if (!more && st.failing == NULL)
            fail_msg("the loop ran out of work and the store is not failing");
    } while (st.failing == NULL);
    raft_store_snap_t snap = {.index = 10, .term = 1, .conf_index = 1};
    assert_int_equal(raft_store_set_snapshot(f->s, &snap, 100, err, sizeof err), 0); /* meta still writes */
    fx_close(f); /* its last try fails too */
    pthread_mutex_lock(&f->gate.mu);
    f->gate.fail_seg_errno = 0;
    pthread_mutex_unlock(&f->gate.mu);
    fx_open(f);
    assert_int_equal(raft_store_snapshot(f->s)->index, 10);
    assert_int_equal(raft_store_first(f->s), 11);
    assert_int_equal(raft_store_last(f->s), 10);
    assert_null(raft_store_entry(f->s, 3));
    assert_int_equal(seg_count(f->dir), 0);
    append(f, 11, 2, 2, 1);
    drain(f);
    fx_reopen(f);
    assert_int_equal(raft_store_first(f->s), 11);
    assert_int_equal(raft_store_last(f->s), 12);
    check_entries(f, 11, 12, 2, 1);
    fx_free(f);
}

static void test_close_in_flight(void **state)
{
    (void)state;
    fx_t *f = fx_new(0);
    f->gate.hold = true;
    append(f, 1, 5, 1, 0);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    gate_wait_entered(&f->gate);
    append(f, 6, 2, 1, 0); /* pending: close writes it */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, gate_release_thread, &f->gate), 0);
    raft_store_close(f->s); /* waits for the worker, whenever it is let go */
    f->s = NULL;
    pthread_join(t, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->calls, 0); /* nothing reported after close */
    fx_open(f);
    assert_int_equal(raft_store_last(f->s), 7);
    check_entries(f, 1, 7, 1, 0);
    fx_free(f);
}

static void test_gap_refused(void **state)
{
    (void)state;
    fx_t *f = fx_new(200);
    append(f, 1, 20, 1, 0);
    drain(f);
    fx_close(f);
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/seg-%020d", f->dir, 2);
    assert_int_equal(unlink(path), 0);
    raft_store_t *s = NULL;
    assert_int_equal(raft_store_open(f->dir, &f->loop, on_persisted, f, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "seg-00000000000000000002"));
    assert_non_null(strstr(err, "gap"));
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_truncate_then_reload),
        cmocka_unit_test(test_truncate_in_flight),
        cmocka_unit_test(test_torn_tail),
        cmocka_unit_test(test_torn_tail_spans_segments),
        cmocka_unit_test(test_meta_slot_torn),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_install),
        cmocka_unit_test(test_group_commit),
        cmocka_unit_test(test_write_failure_retries),
        cmocka_unit_test(test_snapshot_outruns_writes),
        cmocka_unit_test(test_close_in_flight),
        cmocka_unit_test(test_gap_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
