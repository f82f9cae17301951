/*
 * test_keyed.c -- the keyed serial executor: results and handler failures,
 * argument errors, binary keys, per-key order and exclusion, fairness,
 * parallelism across keys, both bounds with every timeout mode, drain and
 * cancel stops (also racing producers), work submitted from callbacks, and
 * key state following active keys.
 *
 * No test sleeps to let something happen: handlers block on gates the test
 * opens, and the test waits on observable state (stats, counters) with a
 * deadline, so a failure is an assertion, not a hang. Stress counts are
 * small enough for TSan on a busy two-core machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>

#include "ordo/keyed.h"
#include "lib/sync.h"

#define DEADLINE_NS (10ull * 1000000000u) /* generous: TSan on a busy machine */

/* ---- helpers ------------------------------------------------------------ */

static void yield_a_bit(void)
{
    struct timespec ts = {0, 100000}; /* 0.1 ms: a poll interval, not a wait for an effect */
    nanosleep(&ts, NULL);
}

/* A gate: handlers that reach it count themselves in and block until open. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int open;
    int entered;
} gate_t;

static void gate_init(gate_t *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = 0;
    g->entered = 0;
}

static void gate_destroy(gate_t *g)
{
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->mu);
}

static void gate_open(gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

static void gate_wait_entered(gate_t *g, int n)
{
    pthread_mutex_lock(&g->mu);
    while (g->entered < n)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static int gate_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    gate_t *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered++;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

static int count_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    atomic_fetch_add((atomic_int *)arg, 1);
    return 0;
}

static int fail_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len;
    *result = arg;
    return 42;
}

static int echo_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len;
    *result = arg;
    return 0;
}

static ordo_keyed_t *make_ex(unsigned workers, size_t pending_max, size_t key_pending_max)
{
    ordo_keyed_options_t o = {.workers = workers,
                              .pending_max = pending_max,
                              .key_pending_max = key_pending_max};
    ordo_keyed_t *ex = NULL;
    assert_int_equal(ordo_keyed_create(&o, &ex), ORDO_OK);
    assert_non_null(ex);
    return ex;
}

static ordo_keyed_stats_t stats_of(ordo_keyed_t *ex)
{
    ordo_keyed_stats_t s;
    ordo_keyed_stats(ex, &s);
    return s;
}

static void wait_producers_waiting(ordo_keyed_t *ex, size_t n)
{
    uint64_t deadline = ordo_now_ns() + DEADLINE_NS;
    while (stats_of(ex).producers_waiting < n) {
        assert_true(ordo_now_ns() < deadline);
        yield_a_bit();
    }
}

static void wait_stopping(ordo_keyed_t *ex)
{
    uint64_t deadline = ordo_now_ns() + DEADLINE_NS;
    while (!stats_of(ex).stopping) {
        assert_true(ordo_now_ns() < deadline);
        yield_a_bit();
    }
}

/* Everyone who calls meet() spins until n have arrived; false on timeout.
 * Two handlers can both return true only if they ran at the same time. */
static bool meet(atomic_int *arrived, int n)
{
    atomic_fetch_add(arrived, 1);
    uint64_t deadline = ordo_now_ns() + DEADLINE_NS;
    while (atomic_load(arrived) < n) {
        if (ordo_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

typedef struct {
    ordo_keyed_t *ex;
    int mode;
    int rc;
} stop_arg_t;

static void *stop_thread(void *p)
{
    stop_arg_t *a = p;
    a->rc = ordo_keyed_stop(a->ex, a->mode);
    return NULL;
}

/* ---- results, errors, keys ------------------------------------------------ */

static void test_submit_result_and_handler_failure(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(2, 0, 0);
    int token = 7;
    ordo_future_t *f = NULL;
    void *result = NULL;

    assert_int_equal(ordo_keyed_submit(ex, "k", 1, echo_fn, &token, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_wait(f, &result), ORDO_OK);
    assert_ptr_equal(result, &token);
    assert_true(ordo_future_done(f));
    ordo_future_release(f);

    result = NULL;
    assert_int_equal(ordo_keyed_submit(ex, "k", 1, fail_fn, &token, ORDO_WAIT_FOREVER, &f),
                     ORDO_OK);
    assert_int_equal(ordo_future_timedwait(f, ORDO_WAIT_FOREVER, &result), ORDO_EHANDLER);
    assert_ptr_equal(result, &token);
    ordo_future_release(f);
    ordo_keyed_destroy(ex);
}

static void test_post_runs_and_counts_failures(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(3, 0, 0);
    atomic_int ran = 0;
    for (int i = 0; i < 50; i++)
        assert_int_equal(ordo_keyed_post(ex, &i, sizeof i, count_fn, NULL, &ran, 0), ORDO_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ordo_keyed_post(ex, "x", 1, fail_fn, NULL, NULL, 0), ORDO_OK);
    assert_int_equal(ordo_keyed_stop(ex, ORDO_KEYED_DRAIN), ORDO_OK);
    assert_int_equal(atomic_load(&ran), 50);
    ordo_keyed_stats_t s = stats_of(ex);
    assert_int_equal(s.post_failures, 3);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.keys_active, 0);
    ordo_keyed_destroy(ex);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    ordo_keyed_t *ex = NULL;
    assert_int_equal(ordo_keyed_create(NULL, NULL), ORDO_EINVAL);
    ordo_keyed_options_t o = {.workers = ORDO_KEYED_WORKERS_MAX + 1};
    assert_int_equal(ordo_keyed_create(&o, &ex), ORDO_EINVAL);
    assert_null(ex);

    o = (ordo_keyed_options_t){.workers = 1, .key_len_max = 8};
    assert_int_equal(ordo_keyed_create(&o, &ex), ORDO_OK);
    ordo_future_t *f = NULL;
    int token = 0;
    assert_int_equal(ordo_keyed_submit(NULL, "k", 1, echo_fn, NULL, 0, &f), ORDO_EINVAL);
    assert_int_equal(ordo_keyed_submit(ex, "k", 1, NULL, NULL, 0, &f), ORDO_EINVAL);
    assert_int_equal(ordo_keyed_submit(ex, "k", 1, echo_fn, NULL, 0, NULL), ORDO_EINVAL);
    assert_int_equal(ordo_keyed_submit(ex, NULL, 1, echo_fn, NULL, 0, &f), ORDO_EINVAL);
    assert_int_equal(ordo_keyed_submit(ex, "123456789", 9, echo_fn, NULL, 0, &f), ORDO_EINVAL);
    assert_null(f);
    assert_int_equal(ordo_keyed_post(ex, "k", 1, NULL, NULL, NULL, 0), ORDO_EINVAL);
    assert_int_equal(ordo_keyed_post(NULL, "k", 1, echo_fn, NULL, NULL, 0), ORDO_EINVAL);
    assert_int_equal(ordo_keyed_post(ex, NULL, 3, echo_fn, NULL, NULL, 0), ORDO_EINVAL);
    assert_int_equal(ordo_keyed_post(ex, "123456789", 9, echo_fn, NULL, NULL, 0), ORDO_EINVAL);
    /* The limit itself and the empty (NULL, 0) key are fine. */
    assert_int_equal(ordo_keyed_submit(ex, "12345678", 8, echo_fn, &token, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_wait(f, NULL), ORDO_OK);
    ordo_future_release(f);
    assert_int_equal(ordo_keyed_submit(ex, NULL, 0, echo_fn, &token, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_wait(f, NULL), ORDO_OK);
    ordo_future_release(f);
    assert_int_equal(ordo_keyed_stop(NULL, ORDO_KEYED_DRAIN), ORDO_EINVAL);
    assert_int_equal(ordo_keyed_stop(ex, 99), ORDO_EINVAL);
    assert_false(stats_of(ex).stopping);
    ordo_keyed_destroy(ex);
    ordo_keyed_destroy(NULL);
}

typedef struct {
    unsigned char seen[8];
    size_t seen_len;
} key_probe_t;

static int probe_key_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)result;
    key_probe_t *p = arg;
    p->seen_len = len;
    memcpy(p->seen, key, len < sizeof p->seen ? len : sizeof p->seen);
    return 0;
}

/* Keys are binary: "a\0b" and "a\0c" differ (a held "a\0b" does not stop
 * "a\0c"), the executor copies the caller's buffer, and handlers see it. */
static void test_binary_keys_are_distinct_and_copied(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(2, 0, 0);
    gate_t g;
    gate_init(&g);
    ordo_future_t *held, *f;
    assert_int_equal(ordo_keyed_submit(ex, "a\0b", 3, gate_fn, &g, 0, &held), ORDO_OK);
    gate_wait_entered(&g, 1);

    char buf[3] = {'a', '\0', 'c'};
    key_probe_t probe = {{0}, 0};
    assert_int_equal(ordo_keyed_submit(ex, buf, sizeof buf, probe_key_fn, &probe, 0, &f), ORDO_OK);
    memset(buf, 'z', sizeof buf); /* the executor kept its own copy */
    assert_int_equal(ordo_future_wait(f, NULL), ORDO_OK);
    assert_int_equal(probe.seen_len, 3);
    assert_memory_equal(probe.seen, "a\0c", 3);
    ordo_future_release(f);
    /* "a\0c" is finished once pending drops to the held task alone; its key
     * state goes in the same critical section. */
    uint64_t deadline = ordo_now_ns() + DEADLINE_NS;
    while (stats_of(ex).pending > 1) {
        assert_true(ordo_now_ns() < deadline);
        yield_a_bit();
    }
    assert_int_equal(stats_of(ex).keys_active, 1);

    gate_open(&g);
    assert_int_equal(ordo_future_wait(held, NULL), ORDO_OK);
    ordo_future_release(held);
    ordo_keyed_destroy(ex);
    gate_destroy(&g);
}

/* ---- order, fairness, parallelism ----------------------------------------- */

typedef struct {
    int next;           /* guarded by the executor's per-key exclusion */
    atomic_int running; /* 1 while a task of the key runs */
    atomic_int violations;
} seq_state_t;

typedef struct {
    seq_state_t *s;
    int seq;
} seq_arg_t;

static int seq_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    seq_arg_t *a = arg;
    if (atomic_exchange(&a->s->running, 1) != 0)
        atomic_fetch_add(&a->s->violations, 1);
    if (a->s->next != a->seq)
        atomic_fetch_add(&a->s->violations, 1);
    a->s->next = a->seq + 1;
    atomic_store(&a->s->running, 0);
    return 0;
}

static void test_single_key_order_with_many_workers(void **state)
{
    (void)state;
    enum { N = 2000 };
    ordo_keyed_t *ex = make_ex(4, N, N);
    seq_state_t s = {0, 0, 0};
    seq_arg_t *args = calloc(N, sizeof *args);
    for (int i = 0; i < N; i++) {
        args[i] = (seq_arg_t){&s, i};
        assert_int_equal(ordo_keyed_post(ex, "one", 3, seq_fn, NULL, &args[i], 0), ORDO_OK);
    }
    assert_int_equal(ordo_keyed_stop(ex, ORDO_KEYED_DRAIN), ORDO_OK);
    assert_int_equal(s.next, N);
    assert_int_equal(atomic_load(&s.violations), 0);
    ordo_keyed_destroy(ex);
    free(args);
}

typedef struct {
    pthread_mutex_t mu;
    char order[256];
    int n;
} trace_t;

typedef struct {
    trace_t *t;
    char tag;
} trace_arg_t;

static int trace_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    trace_arg_t *a = arg;
    pthread_mutex_lock(&a->t->mu);
    a->t->order[a->t->n++] = a->tag;
    pthread_mutex_unlock(&a->t->mu);
    return 0;
}

/* With one worker, a key that arrives behind a key holding 100 tasks waits
 * only for the busy key's running task, not for all of them. */
static void test_fairness_one_task_per_turn(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(1, 0, 0);
    gate_t g;
    gate_init(&g);
    trace_t tr = {.n = 0};
    pthread_mutex_init(&tr.mu, NULL);
    trace_arg_t a = {&tr, 'A'}, b = {&tr, 'B'};

    assert_int_equal(ordo_keyed_post(ex, "A", 1, gate_fn, NULL, &g, 0), ORDO_OK);
    gate_wait_entered(&g, 1);
    for (int i = 0; i < 100; i++)
        assert_int_equal(ordo_keyed_post(ex, "A", 1, trace_fn, NULL, &a, 0), ORDO_OK);
    assert_int_equal(ordo_keyed_post(ex, "B", 1, trace_fn, NULL, &b, 0), ORDO_OK);
    gate_open(&g);
    assert_int_equal(ordo_keyed_stop(ex, ORDO_KEYED_DRAIN), ORDO_OK);
    assert_int_equal(tr.n, 101);
    /* The gate task was A's turn; B's turn comes before A's next one. */
    assert_int_equal(tr.order[0], 'B');
    for (int i = 1; i < 101; i++)
        assert_int_equal(tr.order[i], 'A');
    ordo_keyed_destroy(ex);
    pthread_mutex_destroy(&tr.mu);
    gate_destroy(&g);
}

static int meet_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    return meet(arg, 2) ? 0 : 1;
}

/* Two keys' handlers meet at a rendezvous: only possible if they overlap. */
static void test_different_keys_run_in_parallel(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(2, 0, 0);
    atomic_int arrived = 0;
    ordo_future_t *f1, *f2;
    assert_int_equal(ordo_keyed_submit(ex, "x", 1, meet_fn, &arrived, 0, &f1), ORDO_OK);
    assert_int_equal(ordo_keyed_submit(ex, "y", 1, meet_fn, &arrived, 0, &f2), ORDO_OK);
    assert_int_equal(ordo_future_wait(f1, NULL), ORDO_OK);
    assert_int_equal(ordo_future_wait(f2, NULL), ORDO_OK);
    ordo_future_release(f1);
    ordo_future_release(f2);
    ordo_keyed_destroy(ex);
}

/* ---- bounds --------------------------------------------------------------- */

typedef struct {
    ordo_keyed_t *ex;
    const char *key;
    int64_t timeout_ms;
    int rc;
    ordo_future_t *f;
} producer_arg_t;

static void *producer_thread(void *p)
{
    producer_arg_t *a = p;
    a->rc = ordo_keyed_submit(a->ex, a->key, strlen(a->key), echo_fn, NULL, a->timeout_ms, &a->f);
    return NULL;
}

static void test_total_bound_every_timeout_mode(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(1, 2, 0);
    gate_t g;
    gate_init(&g);
    ordo_future_t *held, *queued, *f = NULL;
    assert_int_equal(ordo_keyed_submit(ex, "a", 1, gate_fn, &g, 0, &held), ORDO_OK);
    assert_int_equal(ordo_keyed_submit(ex, "b", 1, echo_fn, NULL, 0, &queued), ORDO_OK);
    gate_wait_entered(&g, 1);

    assert_int_equal(ordo_keyed_submit(ex, "c", 1, echo_fn, NULL, 0, &f), ORDO_EFULL);
    assert_int_equal(ordo_keyed_post(ex, "c", 1, echo_fn, NULL, NULL, 0), ORDO_EFULL);
    uint64_t t0 = ordo_now_ns();
    assert_int_equal(ordo_keyed_submit(ex, "c", 1, echo_fn, NULL, 20, &f), ORDO_ETIMEDOUT);
    assert_true(ordo_now_ns() - t0 >= 20u * 1000000u);
    assert_null(f);
    assert_int_equal(stats_of(ex).pending, 2);

    /* A blocked producer gets in once room frees. */
    producer_arg_t pa = {ex, "c", ORDO_WAIT_FOREVER, 1, NULL};
    pthread_t th;
    pthread_create(&th, NULL, producer_thread, &pa);
    wait_producers_waiting(ex, 1);
    gate_open(&g);
    pthread_join(th, NULL);
    assert_int_equal(pa.rc, ORDO_OK);
    assert_int_equal(ordo_future_wait(pa.f, NULL), ORDO_OK);
    ordo_future_release(pa.f);
    ordo_future_release(held);
    ordo_future_release(queued);
    ordo_keyed_destroy(ex);
    gate_destroy(&g);
}

/* With a bound large enough for shards to take places in batches (and keep
 * spare ones), posts to keys of every shard are accepted up to exactly the
 * bound: a shard that finds the count at the bound reclaims the others'
 * spare places before it refuses. */
static void test_total_bound_exact_across_shards(void **state)
{
    (void)state;
    enum { MAX = 400 };
    ordo_keyed_t *ex = make_ex(4, MAX, 0);
    gate_t g;
    gate_init(&g);
    int accepted = 0, rc;
    while ((rc = ordo_keyed_post(ex, &accepted, sizeof accepted, gate_fn, NULL, &g, 0)) == ORDO_OK)
        accepted++; /* a new key each time */
    assert_int_equal(rc, ORDO_EFULL);
    assert_int_equal(accepted, MAX);
    assert_int_equal(stats_of(ex).pending, MAX);
    gate_open(&g);
    assert_int_equal(ordo_keyed_stop(ex, ORDO_KEYED_DRAIN), ORDO_OK);
    assert_int_equal(stats_of(ex).pending, 0);
    ordo_keyed_destroy(ex);
    gate_destroy(&g);
}

/* One key at its bound refuses; other keys still get in and run. */
static void test_per_key_bound(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(2, 0, 2);
    gate_t g;
    gate_init(&g);
    ordo_future_t *held, *queued, *f = NULL;
    assert_int_equal(ordo_keyed_submit(ex, "hot", 3, gate_fn, &g, 0, &held), ORDO_OK);
    assert_int_equal(ordo_keyed_submit(ex, "hot", 3, echo_fn, NULL, 0, &queued), ORDO_OK);
    gate_wait_entered(&g, 1);
    assert_int_equal(ordo_keyed_submit(ex, "hot", 3, echo_fn, NULL, 0, &f), ORDO_EFULL);
    assert_int_equal(ordo_keyed_submit(ex, "hot", 3, echo_fn, NULL, 10, &f), ORDO_ETIMEDOUT);
    assert_int_equal(ordo_keyed_submit(ex, "cold", 4, echo_fn, NULL, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_wait(f, NULL), ORDO_OK);
    ordo_future_release(f);
    gate_open(&g);
    assert_int_equal(ordo_future_wait(queued, NULL), ORDO_OK);
    ordo_future_release(held);
    ordo_future_release(queued);
    ordo_keyed_destroy(ex);
    gate_destroy(&g);
}

typedef struct {
    ordo_keyed_t *ex;
    int rc;
} inner_arg_t;

static int submit_inside_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    inner_arg_t *a = arg;
    ordo_future_t *f = NULL;
    a->rc = ordo_keyed_submit(a->ex, "other", 5, echo_fn, NULL, ORDO_WAIT_FOREVER, &f);
    if (f != NULL)
        ordo_future_release(f);
    return 0;
}

/* A worker that finds the executor full is refused instead of blocked. */
static void test_worker_submit_never_blocks(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(1, 1, 0);
    inner_arg_t a = {ex, 1};
    ordo_future_t *f;
    assert_int_equal(ordo_keyed_submit(ex, "k", 1, submit_inside_fn, &a, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_wait(f, NULL), ORDO_OK);
    assert_int_equal(a.rc, ORDO_EFULL);
    ordo_future_release(f);
    ordo_keyed_destroy(ex);
}

static int stop_inside_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    inner_arg_t *a = arg;
    a->rc = ordo_keyed_stop(a->ex, ORDO_KEYED_DRAIN);
    return 0;
}

static void test_stop_on_worker_is_busy(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(1, 0, 0);
    inner_arg_t a = {ex, 1};
    ordo_future_t *f;
    assert_int_equal(ordo_keyed_submit(ex, "k", 1, stop_inside_fn, &a, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_wait(f, NULL), ORDO_OK);
    assert_int_equal(a.rc, ORDO_EBUSY);
    assert_false(stats_of(ex).stopping);
    ordo_future_release(f);
    ordo_keyed_destroy(ex);
}

/* ---- stop ------------------------------------------------------------------ */

static void test_drain_runs_everything_then_refuses(void **state)
{
    (void)state;
    enum { N = 300 };
    ordo_keyed_t *ex = make_ex(3, 0, 0);
    ordo_future_t *fs[N];
    int token = 1;
    atomic_int ran = 0;
    for (int i = 0; i < N; i++) {
        int key = i % 7;
        assert_int_equal(ordo_keyed_submit(ex, &key, sizeof key, echo_fn, &token, 0, &fs[i]),
                         ORDO_OK);
        assert_int_equal(ordo_keyed_post(ex, &key, sizeof key, count_fn, NULL, &ran, 0), ORDO_OK);
    }
    assert_int_equal(ordo_keyed_stop(ex, ORDO_KEYED_DRAIN), ORDO_OK);
    for (int i = 0; i < N; i++) {
        assert_true(ordo_future_done(fs[i]));
        assert_int_equal(ordo_future_wait(fs[i], NULL), ORDO_OK);
        ordo_future_release(fs[i]);
    }
    assert_int_equal(atomic_load(&ran), N);
    ordo_future_t *f = NULL;
    assert_int_equal(ordo_keyed_submit(ex, "k", 1, echo_fn, NULL, 0, &f), ORDO_ESTOPPED);
    assert_int_equal(ordo_keyed_post(ex, "k", 1, echo_fn, NULL, NULL, ORDO_WAIT_FOREVER),
                     ORDO_ESTOPPED);
    assert_null(f);
    /* Stopping again, in either mode, is harmless. */
    assert_int_equal(ordo_keyed_stop(ex, ORDO_KEYED_CANCEL), ORDO_OK);
    assert_int_equal(ordo_keyed_stop(ex, ORDO_KEYED_DRAIN), ORDO_OK);
    ordo_keyed_destroy(ex);
}

static void test_destroy_without_stop_drains(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(2, 0, 0);
    atomic_int ran = 0;
    for (int i = 0; i < 200; i++)
        assert_int_equal(ordo_keyed_post(ex, &i, 1, count_fn, NULL, &ran, 0), ORDO_OK);
    ordo_keyed_destroy(ex);
    assert_int_equal(atomic_load(&ran), 200);
}

typedef struct {
    pthread_mutex_t mu;
    int cancelled_futures[8];
    int ncf;
    int cancelled_posts[8];
    int ncp;
    int key_ok;
} cancel_log_t;

typedef struct {
    cancel_log_t *log;
    int id;
} cancel_arg_t;

static void future_cancel_cb(ordo_future_t *f, int status, void *result, void *arg)
{
    (void)f;
    cancel_arg_t *a = arg;
    assert_int_equal(status, ORDO_ECANCELED);
    assert_null(result);
    pthread_mutex_lock(&a->log->mu);
    a->log->cancelled_futures[a->log->ncf++] = a->id;
    pthread_mutex_unlock(&a->log->mu);
}

static void post_cancel_fn(void *arg, const void *key, size_t len)
{
    cancel_arg_t *a = arg;
    pthread_mutex_lock(&a->log->mu);
    a->log->cancelled_posts[a->log->ncp++] = a->id;
    if (len == 1 && memcmp(key, "B", 1) == 0)
        a->log->key_ok++;
    pthread_mutex_unlock(&a->log->mu);
}

static int must_not_run_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)arg, (void)key, (void)len, (void)result;
    fail_msg("a cancelled task ran");
    return 0;
}

/* Cancel: the running task finishes; queued futures complete ECANCELED and
 * queued posts get cancel_fn, each exactly once and in submission order. */
static void test_cancel_completes_queued_in_order(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(1, 0, 0);
    gate_t g;
    gate_init(&g);
    cancel_log_t log = {.ncf = 0, .ncp = 0, .key_ok = 0};
    pthread_mutex_init(&log.mu, NULL);
    cancel_arg_t args[10];
    ordo_future_t *held, *fs[5];

    assert_int_equal(ordo_keyed_submit(ex, "A", 1, gate_fn, &g, 0, &held), ORDO_OK);
    gate_wait_entered(&g, 1);
    for (int i = 0; i < 5; i++) {
        args[i] = (cancel_arg_t){&log, i};
        assert_int_equal(ordo_keyed_submit(ex, "A", 1, must_not_run_fn, NULL, 0, &fs[i]), ORDO_OK);
        assert_int_equal(ordo_future_then(fs[i], future_cancel_cb, &args[i]), ORDO_OK);
        args[5 + i] = (cancel_arg_t){&log, i};
        assert_int_equal(ordo_keyed_post(ex, "B", 1, must_not_run_fn, post_cancel_fn, &args[5 + i], 0),
                         ORDO_OK);
    }
    assert_int_equal(stats_of(ex).pending, 11);
    assert_int_equal(stats_of(ex).keys_active, 2);

    stop_arg_t sa = {ex, ORDO_KEYED_CANCEL, 1};
    pthread_t th;
    pthread_create(&th, NULL, stop_thread, &sa);
    wait_stopping(ex);
    assert_true(stats_of(ex).cancelling);
    gate_open(&g);
    pthread_join(th, NULL);
    assert_int_equal(sa.rc, ORDO_OK);

    assert_int_equal(ordo_future_wait(held, NULL), ORDO_OK);
    assert_int_equal(log.ncf, 5);
    assert_int_equal(log.ncp, 5);
    assert_int_equal(log.key_ok, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(log.cancelled_futures[i], i);
        assert_int_equal(log.cancelled_posts[i], i);
        assert_int_equal(ordo_future_wait(fs[i], NULL), ORDO_ECANCELED);
        ordo_future_release(fs[i]);
    }
    ordo_future_release(held);
    ordo_keyed_stats_t s = stats_of(ex);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.keys_active, 0);
    ordo_keyed_destroy(ex);
    pthread_mutex_destroy(&log.mu);
    gate_destroy(&g);
}

/* A worker takes one task from each of several ready keys per turn; a
 * cancelling stop that begins while the first of them runs cancels the
 * others, which were taken but had not started. */
static void test_cancel_reaches_tasks_taken_in_a_turn(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(1, 0, 0);
    gate_t gx, ga;
    gate_init(&gx);
    gate_init(&ga);
    cancel_log_t log = {.ncf = 0, .ncp = 0, .key_ok = 0};
    pthread_mutex_init(&log.mu, NULL);
    cancel_arg_t args[3];

    /* While X blocks the only worker, A, B, C, D become ready; its next
     * turn takes all four (its share: 4 ready keys, 1 worker). */
    assert_int_equal(ordo_keyed_post(ex, "X", 1, gate_fn, NULL, &gx, 0), ORDO_OK);
    gate_wait_entered(&gx, 1);
    assert_int_equal(ordo_keyed_post(ex, "A", 1, gate_fn, NULL, &ga, 0), ORDO_OK);
    const char *keys[3] = {"B", "C", "D"};
    for (int i = 0; i < 3; i++) {
        args[i] = (cancel_arg_t){&log, i};
        assert_int_equal(ordo_keyed_post(ex, keys[i], 1, must_not_run_fn, post_cancel_fn, &args[i], 0),
                         ORDO_OK);
    }
    gate_open(&gx);
    gate_wait_entered(&ga, 1);
    assert_int_equal(stats_of(ex).pending, 4);

    stop_arg_t sa = {ex, ORDO_KEYED_CANCEL, 1};
    pthread_t th;
    pthread_create(&th, NULL, stop_thread, &sa);
    wait_stopping(ex);
    gate_open(&ga);
    pthread_join(th, NULL);
    assert_int_equal(sa.rc, ORDO_OK);

    assert_int_equal(log.ncp, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(log.cancelled_posts[i], i);
    ordo_keyed_stats_t s = stats_of(ex);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.keys_active, 0);
    ordo_keyed_destroy(ex);
    pthread_mutex_destroy(&log.mu);
    gate_destroy(&ga);
    gate_destroy(&gx);
}

/* A producer blocked on a bound is woken by a stop with ORDO_ESTOPPED. */
static void test_stop_wakes_blocked_producer(void **state)
{
    (void)state;
    for (int mode = ORDO_KEYED_DRAIN; mode <= ORDO_KEYED_CANCEL; mode++) {
        ordo_keyed_t *ex = make_ex(1, 1, 0);
        gate_t g;
        gate_init(&g);
        ordo_future_t *held;
        assert_int_equal(ordo_keyed_submit(ex, "a", 1, gate_fn, &g, 0, &held), ORDO_OK);
        gate_wait_entered(&g, 1);
        producer_arg_t pa = {ex, "b", ORDO_WAIT_FOREVER, 1, NULL};
        pthread_t prod, stopper;
        pthread_create(&prod, NULL, producer_thread, &pa);
        wait_producers_waiting(ex, 1);
        stop_arg_t sa = {ex, mode, 1};
        pthread_create(&stopper, NULL, stop_thread, &sa);
        pthread_join(prod, NULL); /* returns while the gate is still shut */
        assert_int_equal(pa.rc, ORDO_ESTOPPED);
        assert_null(pa.f);
        gate_open(&g);
        pthread_join(stopper, NULL);
        assert_int_equal(sa.rc, ORDO_OK);
        assert_int_equal(ordo_future_wait(held, NULL), ORDO_OK);
        ordo_future_release(held);
        ordo_keyed_destroy(ex);
        gate_destroy(&g);
    }
}

/* ---- callbacks that submit ----------------------------------------------- */

typedef struct {
    ordo_keyed_t *ex;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int steps_done;
    int side_done;
    int next_seq;  /* same-key chain order check; per-key exclusion guards it */
    int bad;
} chain_t;

enum { CHAIN_STEPS = 200 };

typedef struct {
    chain_t *c;
    int seq;
} chain_arg_t;

static int chain_step_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len;
    chain_arg_t *a = arg;
    if (a->c->next_seq != a->seq)
        a->c->bad++;
    a->c->next_seq = a->seq + 1;
    *result = a;
    return 0;
}

static int chain_side_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    chain_t *c = arg;
    pthread_mutex_lock(&c->mu);
    c->side_done++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static void chain_cb(ordo_future_t *f, int status, void *result, void *arg);

static void chain_submit(chain_t *c, int seq)
{
    chain_arg_t *a = malloc(sizeof *a);
    *a = (chain_arg_t){c, seq};
    ordo_future_t *f;
    assert_int_equal(ordo_keyed_submit(c->ex, "chain", 5, chain_step_fn, a, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_then(f, chain_cb, c), ORDO_OK);
    ordo_future_release(f);
}

/* Each completion submits the next step to the same key, and a side task to
 * another key, from the worker thread that completed it. */
static void chain_cb(ordo_future_t *f, int status, void *result, void *arg)
{
    (void)f;
    chain_t *c = arg;
    chain_arg_t *a = result;
    assert_int_equal(status, ORDO_OK);
    int seq = a->seq;
    free(a);
    assert_int_equal(ordo_keyed_post(c->ex, "side", 4, chain_side_fn, NULL, c, 0), ORDO_OK);
    if (seq + 1 < CHAIN_STEPS)
        chain_submit(c, seq + 1);
    pthread_mutex_lock(&c->mu);
    c->steps_done++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
}

static void test_callbacks_submit_to_same_and_other_keys(void **state)
{
    (void)state;
    chain_t c = {.steps_done = 0, .side_done = 0, .next_seq = 0, .bad = 0};
    c.ex = make_ex(2, 0, 0);
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cond, NULL);
    chain_submit(&c, 0);
    pthread_mutex_lock(&c.mu);
    while (c.steps_done < CHAIN_STEPS || c.side_done < CHAIN_STEPS)
        pthread_cond_wait(&c.cond, &c.mu);
    pthread_mutex_unlock(&c.mu);
    ordo_keyed_destroy(c.ex);
    assert_int_equal(c.bad, 0);
    assert_int_equal(c.next_seq, CHAIN_STEPS);
    pthread_cond_destroy(&c.cond);
    pthread_mutex_destroy(&c.mu);
}

/* ---- memory follows active keys ------------------------------------------- */

static void test_key_state_follows_active_keys(void **state)
{
    (void)state;
    enum { K = 100 };
    ordo_keyed_t *ex = make_ex(1, 0, 0);
    gate_t g;
    gate_init(&g);
    atomic_int ran = 0;
    ordo_future_t *held;
    assert_int_equal(ordo_keyed_submit(ex, "gate", 4, gate_fn, &g, 0, &held), ORDO_OK);
    gate_wait_entered(&g, 1);
    for (int i = 0; i < K; i++)
        for (int j = 0; j < 3; j++)
            assert_int_equal(ordo_keyed_post(ex, &i, sizeof i, count_fn, NULL, &ran, 0), ORDO_OK);
    ordo_keyed_stats_t s = stats_of(ex);
    assert_int_equal(s.keys_active, K + 1);
    assert_int_equal(s.pending, 3 * K + 1);
    gate_open(&g);
    uint64_t deadline = ordo_now_ns() + DEADLINE_NS;
    while (stats_of(ex).pending > 0) {
        assert_true(ordo_now_ns() < deadline);
        yield_a_bit();
    }
    /* Taken under one lock: no pending task means no key state left. */
    assert_int_equal(stats_of(ex).keys_active, 0);
    assert_int_equal(atomic_load(&ran), 3 * K);
    ordo_future_release(held);
    ordo_keyed_destroy(ex);
    gate_destroy(&g);
}

/* ---- stress ---------------------------------------------------------------- */

enum { S_PRODUCERS = 4, S_KEYS = 32, S_TASKS = 3000 };

typedef struct {
    atomic_int running[S_KEYS];
    int next[S_PRODUCERS][S_KEYS]; /* per (producer, key); guarded by key exclusion */
    atomic_int violations;
    atomic_int ran;
    atomic_int completed;
} stress_t;

typedef struct {
    stress_t *s;
    uint16_t producer, key;
    int seq;
} stress_arg_t;

static int stress_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)result;
    stress_arg_t *a = arg;
    stress_t *s = a->s;
    if (len != sizeof a->key || memcmp(key, &a->key, len) != 0)
        atomic_fetch_add(&s->violations, 1);
    if (atomic_exchange(&s->running[a->key], 1) != 0)
        atomic_fetch_add(&s->violations, 1);
    if (s->next[a->producer][a->key] != a->seq)
        atomic_fetch_add(&s->violations, 1);
    s->next[a->producer][a->key] = a->seq + 1;
    atomic_store(&s->running[a->key], 0);
    atomic_fetch_add(&s->ran, 1);
    return 0;
}

static void stress_cb(ordo_future_t *f, int status, void *result, void *arg)
{
    (void)f, (void)result;
    stress_t *s = arg;
    if (status != ORDO_OK)
        atomic_fetch_add(&s->violations, 1);
    atomic_fetch_add(&s->completed, 1);
}

typedef struct {
    ordo_keyed_t *ex;
    stress_t *s;
    int producer;
    stress_arg_t *args;
} stress_producer_t;

static void *stress_producer(void *p)
{
    stress_producer_t *sp = p;
    int seqs[S_KEYS] = {0};
    uint32_t rnd = 2463534242u + (uint32_t)sp->producer;
    for (int i = 0; i < S_TASKS; i++) {
        rnd ^= rnd << 13, rnd ^= rnd >> 17, rnd ^= rnd << 5;
        uint16_t key = (uint16_t)(rnd % S_KEYS);
        stress_arg_t *a = &sp->args[i];
        *a = (stress_arg_t){sp->s, (uint16_t)sp->producer, key, seqs[key]++};
        int rc;
        if (i % 4 == 0) {
            ordo_future_t *f;
            rc = ordo_keyed_submit(sp->ex, &a->key, sizeof a->key, stress_fn, a, ORDO_WAIT_FOREVER, &f);
            if (rc == ORDO_OK) {
                ordo_future_then(f, stress_cb, sp->s);
                ordo_future_release(f);
            }
        } else {
            rc = ordo_keyed_post(sp->ex, &a->key, sizeof a->key, stress_fn, NULL, a, ORDO_WAIT_FOREVER);
        }
        if (rc != ORDO_OK)
            atomic_fetch_add(&sp->s->violations, 1);
    }
    return NULL;
}

/* Many producers x many keys through small bounds (producers block often):
 * per-(producer, key) order holds, no key ever runs twice at once, nothing
 * is lost. */
static void test_stress_order_and_exclusion(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(4, 64, 8);
    stress_t *s = calloc(1, sizeof *s);
    stress_producer_t sp[S_PRODUCERS];
    pthread_t th[S_PRODUCERS];
    for (int p = 0; p < S_PRODUCERS; p++) {
        sp[p] = (stress_producer_t){ex, s, p, calloc(S_TASKS, sizeof(stress_arg_t))};
        pthread_create(&th[p], NULL, stress_producer, &sp[p]);
    }
    for (int p = 0; p < S_PRODUCERS; p++)
        pthread_join(th[p], NULL);
    assert_int_equal(ordo_keyed_stop(ex, ORDO_KEYED_DRAIN), ORDO_OK);
    assert_int_equal(atomic_load(&s->violations), 0);
    assert_int_equal(atomic_load(&s->ran), S_PRODUCERS * S_TASKS);
    assert_int_equal(atomic_load(&s->completed), S_PRODUCERS * S_TASKS / 4);
    int total = 0;
    for (int p = 0; p < S_PRODUCERS; p++)
        for (int k = 0; k < S_KEYS; k++)
            total += s->next[p][k];
    assert_int_equal(total, S_PRODUCERS * S_TASKS);
    ordo_keyed_destroy(ex);
    for (int p = 0; p < S_PRODUCERS; p++)
        free(sp[p].args);
    free(s);
}

/* Stop racing producers: every accepted item is completed exactly once,
 * as run or as cancelled; refused items are never seen. */
enum { R_ITEMS = 40000, R_PRODUCERS = 3 };

typedef struct {
    ordo_keyed_t *ex;
    atomic_int claimed;  /* items handed out to producers */
    atomic_int accepted;
    atomic_int refused;
    atomic_int ran;
    atomic_int cancelled;
    atomic_int twice;
    atomic_int seen[R_ITEMS]; /* completions per item */
    uint16_t keys[R_ITEMS];
} race_t;

typedef struct {
    race_t *r;
    int item;
} race_ref_t;

static void race_mark(race_t *r, int item)
{
    if (atomic_fetch_add(&r->seen[item], 1) != 0)
        atomic_fetch_add(&r->twice, 1);
}

static int race_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    race_ref_t *ref = arg;
    atomic_fetch_add(&ref->r->ran, 1);
    race_mark(ref->r, ref->item);
    return 0;
}

static void race_cancel_fn(void *arg, const void *key, size_t len)
{
    (void)key, (void)len;
    race_ref_t *ref = arg;
    atomic_fetch_add(&ref->r->cancelled, 1);
    race_mark(ref->r, ref->item);
}

static int race_submit_fn(void *arg, const void *key, size_t len, void **result)
{
    (void)key, (void)len, (void)result;
    race_ref_t *ref = arg;
    atomic_fetch_add(&ref->r->ran, 1);
    return 0;
}

static void race_cb(ordo_future_t *f, int status, void *result, void *arg)
{
    (void)f, (void)result;
    race_ref_t *ref = arg;
    if (status == ORDO_ECANCELED)
        atomic_fetch_add(&ref->r->cancelled, 1);
    else if (status != ORDO_OK)
        atomic_fetch_add(&ref->r->twice, 1); /* no other status is possible */
    race_mark(ref->r, ref->item);
}

static void *race_producer(void *p)
{
    race_t *r = p;
    race_ref_t *refs = calloc(R_ITEMS, sizeof *refs);
    for (;;) {
        int item = atomic_fetch_add(&r->claimed, 1);
        if (item >= R_ITEMS)
            break;
        race_ref_t *ref = &refs[item];
        *ref = (race_ref_t){r, item};
        int rc;
        if (item % 2 == 0) {
            ordo_future_t *f;
            rc = ordo_keyed_submit(r->ex, &r->keys[item], 2, race_submit_fn, ref, ORDO_WAIT_FOREVER, &f);
            if (rc == ORDO_OK) {
                ordo_future_then(f, race_cb, ref);
                ordo_future_release(f);
            }
        } else {
            rc = ordo_keyed_post(r->ex, &r->keys[item], 2, race_fn, race_cancel_fn, ref,
                                 ORDO_WAIT_FOREVER);
        }
        if (rc == ORDO_OK) {
            atomic_fetch_add(&r->accepted, 1);
        } else {
            if (rc != ORDO_ESTOPPED)
                atomic_fetch_add(&r->twice, 1);
            atomic_fetch_add(&r->refused, 1);
            break;
        }
    }
    return refs; /* kept alive until the executor is stopped */
}

static void race_one(int mode)
{
    race_t *r = calloc(1, sizeof *r);
    r->ex = make_ex(2, 256, 16);
    for (int i = 0; i < R_ITEMS; i++)
        r->keys[i] = (uint16_t)(i * 7919 % 101);
    pthread_t th[R_PRODUCERS];
    for (int p = 0; p < R_PRODUCERS; p++)
        pthread_create(&th[p], NULL, race_producer, r);
    uint64_t deadline = ordo_now_ns() + DEADLINE_NS;
    while (atomic_load(&r->accepted) < 2000 && ordo_now_ns() < deadline)
        sched_yield();
    assert_int_equal(ordo_keyed_stop(r->ex, mode), ORDO_OK);
    void *refs[R_PRODUCERS];
    for (int p = 0; p < R_PRODUCERS; p++)
        pthread_join(th[p], &refs[p]);
    int accepted = atomic_load(&r->accepted);
    int ran = atomic_load(&r->ran);
    int cancelled = atomic_load(&r->cancelled);
    print_message("%s: accepted %d, ran %d, cancelled %d, refused %d\n",
                  mode == ORDO_KEYED_DRAIN ? "drain" : "cancel", accepted, ran, cancelled,
                  atomic_load(&r->refused));
    assert_int_equal(atomic_load(&r->twice), 0);
    assert_int_equal(ran + cancelled, accepted);
    if (mode == ORDO_KEYED_DRAIN)
        assert_int_equal(cancelled, 0);
    int marked = 0;
    for (int i = 0; i < R_ITEMS; i++)
        marked += atomic_load(&r->seen[i]);
    /* Every accepted item was marked once (submit items are marked by their
     * callback, posts by handler or cancel_fn). */
    assert_int_equal(marked, accepted);
    ordo_keyed_stats_t s = stats_of(r->ex);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.keys_active, 0);
    ordo_keyed_destroy(r->ex);
    for (int p = 0; p < R_PRODUCERS; p++)
        free(refs[p]);
    free(r);
}

/* ---- shards ------------------------------------------------------------------ */

/* Keys spread over the executor's shards, each with its own lock, while the
 * bound on pending tasks is one for the whole executor. */
enum { B_PINGS = 400 };

typedef struct {
    ordo_keyed_t *ex;
    size_t pending_max;
    stress_t *s;
    atomic_int over_bound; /* stats seen above pending_max */
    atomic_int checks;
} bound_t;

typedef struct {
    bound_t *b;
    stress_arg_t sa;
} bound_arg_t;

static int bound_fn(void *arg, const void *key, size_t len, void **result)
{
    bound_arg_t *a = arg;
    if (a->sa.seq % 8 == 0) {
        ordo_keyed_stats_t st;
        ordo_keyed_stats(a->b->ex, &st);
        if (st.pending > a->b->pending_max)
            atomic_fetch_add(&a->b->over_bound, 1);
        atomic_fetch_add(&a->b->checks, 1);
    }
    return stress_fn(&a->sa, key, len, result);
}

typedef struct {
    bound_t *b;
    int producer;
    bound_arg_t *args;
} bound_producer_t;

static void *bound_producer(void *p)
{
    bound_producer_t *bp = p;
    int seqs[S_KEYS] = {0};
    uint32_t rnd = 88172645u + (uint32_t)bp->producer;
    for (int i = 0; i < S_TASKS; i++) {
        rnd ^= rnd << 13, rnd ^= rnd >> 17, rnd ^= rnd << 5;
        uint16_t key = (uint16_t)(rnd % S_KEYS);
        bound_arg_t *a = &bp->args[i];
        *a = (bound_arg_t){bp->b, {bp->b->s, (uint16_t)bp->producer, key, seqs[key]++}};
        if (ordo_keyed_post(bp->b->ex, &a->sa.key, sizeof a->sa.key, bound_fn, NULL, a,
                            ORDO_WAIT_FOREVER) != ORDO_OK)
            atomic_fetch_add(&bp->b->s->violations, 1);
    }
    return NULL;
}

/* Producers on keys of every shard through an executor-wide bound:
 * per-(producer, key) order and per-key exclusion hold, nothing is lost,
 * and the pending count never exceeds the bound although its places are
 * taken under different shards' locks (and, far from the bound, in
 * batches kept by each shard). */
static void bound_run(size_t pending_max, size_t key_pending_max)
{
    bound_t b = {.ex = make_ex(4, pending_max, key_pending_max),
                 .pending_max = pending_max,
                 .s = calloc(1, sizeof(stress_t))};
    bound_producer_t bp[S_PRODUCERS];
    pthread_t th[S_PRODUCERS];
    for (int p = 0; p < S_PRODUCERS; p++) {
        bp[p] = (bound_producer_t){&b, p, calloc(S_TASKS, sizeof(bound_arg_t))};
        pthread_create(&th[p], NULL, bound_producer, &bp[p]);
    }
    for (int p = 0; p < S_PRODUCERS; p++)
        pthread_join(th[p], NULL);
    assert_int_equal(ordo_keyed_stop(b.ex, ORDO_KEYED_DRAIN), ORDO_OK);
    assert_int_equal(atomic_load(&b.s->violations), 0);
    assert_int_equal(atomic_load(&b.s->ran), S_PRODUCERS * S_TASKS);
    assert_int_equal(atomic_load(&b.over_bound), 0);
    assert_true(atomic_load(&b.checks) > 0);
    ordo_keyed_destroy(b.ex);
    for (int p = 0; p < S_PRODUCERS; p++)
        free(bp[p].args);
    free(b.s);
}

/* A bound too small for shards to take places in batches. */
static void test_shards_share_a_small_bound(void **state)
{
    (void)state;
    bound_run(16, 4);
}

/* A bound large enough that shards take places in batches until the count
 * nears it, then one at a time, reclaiming each other's spare ones. */
static void test_shards_share_a_large_bound(void **state)
{
    (void)state;
    bound_run(300, 64);
}

typedef struct {
    ordo_keyed_t *ex;
    int id;
    atomic_int *late;
} ping_t;

static void *ping_thread(void *p)
{
    ping_t *pg = p;
    for (int i = 0; i < B_PINGS; i++) {
        int key = pg->id * B_PINGS + i; /* a new key each time: every shard */
        ordo_future_t *f;
        if (ordo_keyed_submit(pg->ex, &key, sizeof key, echo_fn, NULL, ORDO_WAIT_FOREVER, &f) !=
            ORDO_OK) {
            atomic_fetch_add(pg->late, 1);
            continue;
        }
        /* A lost wake-up leaves the task queued with every worker asleep. */
        if (ordo_future_timedwait(f, 10000, NULL) == ORDO_ETIMEDOUT)
            atomic_fetch_add(pg->late, 1);
        ordo_future_release(f);
        if (i % 16 == 0)
            yield_a_bit(); /* let the workers run out of polls and sleep */
    }
    return NULL;
}

/* Two threads submit one task at a time and wait for it, so the workers
 * keep going to sleep and being woken through different shards: no task
 * is left waiting for a wake-up that never comes. */
static void test_no_lost_wakeup_across_shards(void **state)
{
    (void)state;
    ordo_keyed_t *ex = make_ex(4, 0, 0);
    atomic_int late = 0;
    ping_t pg[2] = {{ex, 0, &late}, {ex, 1, &late}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, ping_thread, &pg[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&late), 0);
    ordo_keyed_destroy(ex);
}

static void test_drain_races_producers(void **state)
{
    (void)state;
    race_one(ORDO_KEYED_DRAIN);
}

static void test_cancel_races_producers(void **state)
{
    (void)state;
    race_one(ORDO_KEYED_CANCEL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submit_result_and_handler_failure),
        cmocka_unit_test(test_post_runs_and_counts_failures),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_binary_keys_are_distinct_and_copied),
        cmocka_unit_test(test_single_key_order_with_many_workers),
        cmocka_unit_test(test_fairness_one_task_per_turn),
        cmocka_unit_test(test_different_keys_run_in_parallel),
        cmocka_unit_test(test_total_bound_every_timeout_mode),
        cmocka_unit_test(test_total_bound_exact_across_shards),
        cmocka_unit_test(test_per_key_bound),
        cmocka_unit_test(test_worker_submit_never_blocks),
        cmocka_unit_test(test_stop_on_worker_is_busy),
        cmocka_unit_test(test_drain_runs_everything_then_refuses),
        cmocka_unit_test(test_destroy_without_stop_drains),
        cmocka_unit_test(test_cancel_completes_queued_in_order),
        cmocka_unit_test(test_stop_wakes_blocked_producer),
        cmocka_unit_test(test_callbacks_submit_to_same_and_other_keys),
        cmocka_unit_test(test_key_state_follows_active_keys),
        cmocka_unit_test(test_cancel_reaches_tasks_taken_in_a_turn),
        cmocka_unit_test(test_stress_order_and_exclusion),
        cmocka_unit_test(test_shards_share_a_small_bound),
        cmocka_unit_test(test_shards_share_a_large_bound),
        cmocka_unit_test(test_no_lost_wakeup_across_shards),
        cmocka_unit_test(test_drain_races_producers),
        cmocka_unit_test(test_cancel_races_producers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
