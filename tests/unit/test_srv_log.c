/*
 * test_srv_log.c -- the log seam (log/log.h) and its WAL implementation
 * (log/log_wal.c): batches round-trip entry by entry (and cancel), a
 * batch appended and flushed is committed (the wake hook comes, log_poll()
 * reaches its revision) and replayed in order after a reopen, and the data
 * directory is locked by open alone, before anything in it is read.
 *
 * Every test works in its own mkdtemp() directory under $TMPDIR (or /tmp).
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/core.h"
#include "log/log.h"
#include "log/log_wal.h"

/* How long a test waits for the log thread to commit. */
#define COMMIT_WAIT_MS 10000

static char *tmpdir_new(void)
{
    const char *base = getenv("TMPDIR");
    char *path = malloc(4096);
    snprintf(path, 4096, "%s/ordo-log-XXXXXX", base != NULL ? base : "/tmp");
    assert_non_null(mkdtemp(path));
    return path;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void tmpdir_free(char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(path);
}

/* ---- batches ----------------------------------------------------------------- */

static void add(log_batch_t *b, uint64_t rev, const char *text)
{
    size_t at = log_batch_begin(b, rev);
    ordo_buf_append(&b->buf, text, strlen(text));
    assert_int_equal(log_batch_end(b, at), strlen(text));
}

static void test_batch_round_trip(void **state)
{
    (void)state;
    log_batch_t b;
    memset(&b, 0, sizeof b);
    add(&b, 1, "one");
    add(&b, 2, "");
    size_t at = log_batch_begin(&b, 3);
    ordo_buf_append(&b.buf, "taken back", 10);
    log_batch_cancel(&b, at);
    add(&b, 3, "three");
    assert_int_equal(b.records, 3);
    assert_int_equal(b.last_rev, 3);
    const char *want[] = {"one", "", "three"};
    size_t pos = 0, len, i = 0;
    uint64_t rev;
    const void *rec;
    while (log_batch_next(&b, &pos, &rev, &rec, &len)) {
        assert_true(i < 3);
        assert_int_equal(rev, i + 1);
        assert_int_equal(len, strlen(want[i]));
        assert_memory_equal(rec, want[i], len);
        i++;
    }
    assert_int_equal(i, 3);
    log_batch_clear(&b);
    assert_int_equal(b.records, 0);
    pos = 0;
    assert_false(log_batch_next(&b, &pos, &rev, &rec, &len));
    log_batch_free(&b);
}

/* ---- the WAL behind the seam ------------------------------------------------------ */

typedef struct seen_s {
    atomic_int wakes;
    uint64_t revs[16];
    char recs[16][16];
    size_t n;
} seen_t;

static void on_wake(void *arg)
{
    seen_t *s = arg;
    atomic_fetch_add(&s->wakes, 1);
}

static int on_replay(void *arg, uint64_t rev, const void *rec, size_t len)
{
    seen_t *s = arg;
    assert_true(s->n < 16 && len < 16);
    s->revs[s->n] = rev;
    memcpy(s->recs[s->n], rec, len);
    s->recs[s->n][len] = '\0';
    s->n++;
    return 0;
}

static log_t *open_log(const char *dir, seen_t *seen, char *err, size_t elen)
{
    log_wal_options_t opt;
    memset(&opt, 0, sizeof opt);
    opt.dir = dir;
    opt.wal.policy = WAL_SYNC_NO;
    log_hooks_t hooks = {.wake = on_wake, .deliver = NULL, .arg = seen};
    return log_wal_open(&opt, &hooks, err, elen);
}

/* Open, load the (absent) snapshot, replay into seen. */
static log_t *open_and_recover(const char *dir, core_t *core, seen_t *seen)
{
    char err[512];
    log_t *l = open_log(dir, seen, err, sizeof err);
    assert_non_null(l);
    assert_null(l->hooks.deliver);
    uint64_t snap_rev = 99, entries = 99;
    assert_int_equal(log_load_snapshot(l, core, &snap_rev, &entries, err, sizeof err), 0);
    assert_int_equal(snap_rev, 0);
    assert_int_equal(log_replay(l, snap_rev, on_replay, seen, err, sizeof err), 0);
    return l;
}

static void wait_committed(log_t *l, uint64_t rev)
{
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < COMMIT_WAIT_MS && log_committed_rev(l) < rev; i++)
        nanosleep(&ts, NULL);
    assert_true(log_committed_rev(l) >= rev);
}

static void test_wal_append_flush_replay(void **state)
{
    (void)state;
    char *dir = tmpdir_new();
    core_t *core = core_create(1000);
    seen_t seen;
    memset(&seen, 0, sizeof seen);
    log_t *l = open_and_recover(dir, core, &seen);
    assert_int_equal(seen.n, 0);
    assert_null(log_failed(l));
    assert_false(log_backlogged(l));

    log_batch_t b;
    memset(&b, 0, sizeof b);
    add(&b, 1, "a");
    add(&b, 2, "bb");
    assert_int_equal(log_append(l, &b), 0);
    log_batch_clear(&b);
    add(&b, 2, "bb2"); /* revisions may repeat */
    add(&b, 5, "ccccc");
    assert_int_equal(log_append(l, &b), 0);
    int rc = log_flush(l);
    assert_true(rc == 0 || rc == 1);
    wait_committed(l, 5);
    if (rc == 0)
        assert_true(atomic_load(&seen.wakes) >= 1); /* committed by the log thread: it said so */
    log_stats_t st;
    log_stats(l, &st);
    assert_int_equal(st.records_written, 4);
    assert_true(st.bytes > 0 && st.files >= 1);
    log_close(l);

    memset(&seen, 0, sizeof seen);
    l = open_and_recover(dir, core, &seen);
    assert_int_equal(seen.n, 4);
    assert_int_equal(seen.revs[0], 1);
    assert_string_equal(seen.recs[0], "a");
    assert_int_equal(seen.revs[2], 2);
    assert_string_equal(seen.recs[2], "bb2");
    assert_int_equal(seen.revs[3], 5);
    assert_string_equal(seen.recs[3], "ccccc");
    /* The WAL's positions are its records' revisions. */
    assert_int_equal(log_poll(l).v, 5);
    assert_int_equal(log_committed_rev(l), 5);
    assert_int_equal(log_mark(l, 7).v, 7);
    log_close(l);
    log_batch_free(&b);
    core_destroy(core);
    tmpdir_free(dir);
}

static void test_open_locks_the_directory(void **state)
{
    (void)state;
    char *dir = tmpdir_new();
    seen_t seen;
    memset(&seen, 0, sizeof seen);
    char err[512];
    log_t *first = open_log(dir, &seen, err, sizeof err);
    assert_non_null(first);
    /* Refused by open alone: nothing loaded, nothing replayed. */
    log_t *second = open_log(dir, &seen, err, sizeof err);
    assert_null(second);
    assert_non_null(strstr(err, "in use by another process"));
    assert_non_null(strstr(err, dir));
    log_close(first); /* never recovered: closing is fine */
    second = open_log(dir, &seen, err, sizeof err);
    assert_non_null(second);
    log_close(second);
    tmpdir_free(dir);
}

static void test_open_refuses_a_missing_directory(void **state)
{
    (void)state;
    char *dir = tmpdir_new();
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/not-there", dir);
    seen_t seen;
    memset(&seen, 0, sizeof seen);
    char err[512];
    assert_null(open_log(missing, &seen, err, sizeof err));
    assert_non_null(strstr(err, missing));
    assert_int_not_equal(access(missing, F_OK), 0); /* and did not create it */
    tmpdir_free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_round_trip),
        cmocka_unit_test(test_wal_append_flush_replay),
        cmocka_unit_test(test_open_locks_the_directory),
        cmocka_unit_test(test_open_refuses_a_missing_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
