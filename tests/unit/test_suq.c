/*
 * test_suq.c -- the singular update queue: order, futures (wait, timed
 * wait, then), handler failure, full queue (EFULL, ETIMEDOUT, blocking),
 * stop in drain and cancel mode with per-item accounting, ESTOPPED, EBUSY,
 * batching, a three-stage pipeline, and multi-producer stress with and
 * without a cancel stop racing the producers.
 *
 * No test sleeps to synchronise: a "gate" handler holds the worker inside
 * an item until the test opens it, and waits use condition variables or
 * futures. Where a test checks that something does NOT happen (a producer
 * stays blocked), it waits a bounded time for it and expects a timeout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "ordo/suq.h"
#include "lib/sync.h"

/* ---- helpers ------------------------------------------------------------- */

/* One tracked item: how often each fate happened to it. */
typedef struct {
    int value;
    atomic_int applied;
    atomic_int cancelled;
    atomic_int completed;   /* future callback runs */
    atomic_int status;      /* the future's status, from the callback */
} item_t;

/* The queue's context: records the order of application and can hold the
 * worker inside a handler until opened. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int gate_closed;        /* handler blocks while set */
    int entered;            /* handlers entered */
    int fail_value;         /* handler fails for this item value (or -1) */
    int order[256];
    int n_applied;          /* worker-owned until the queue is stopped */
    size_t batch_max_seen;
    size_t batch_total;
    int stop_rc;            /* ordo_suq_stop() called from the handler */
    ordo_suq_t *self;
} ctx_t;

static void ctx_init(ctx_t *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    ordo_cond_init(&c->cond);
    c->fail_value = -1;
    c->stop_rc = 1;
}

static void ctx_fini(ctx_t *c)
{
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->mu);
}

static void gate_open(ctx_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->gate_closed = 0;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
}

/* Wait until n handlers have been entered. */
static void gate_wait_entered(ctx_t *c, int n)
{
    pthread_mutex_lock(&c->mu);
    while (c->entered < n)
        pthread_cond_wait(&c->cond, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static int handler(void *ctx, void *p, void **result_out)
{
    ctx_t *c = ctx;
    item_t *it = p;
    pthread_mutex_lock(&c->mu);
    c->entered++;
    pthread_cond_broadcast(&c->cond);
    while (c->gate_closed)
        pthread_cond_wait(&c->cond, &c->mu);
    pthread_mutex_unlock(&c->mu);
    atomic_fetch_add(&it->applied, 1);
    if (c->n_applied < (int)(sizeof c->order / sizeof c->order[0]))
        c->order[c->n_applied] = it->value;
    c->n_applied++;
    *result_out = it;
    return it->value == c->fail_value ? -1 : 0;
}

static void cancel_fn(void *ctx, void *p)
{
    (void)ctx;
    atomic_fetch_add(&((item_t *)p)->cancelled, 1);
}

static void batch_fn(void *ctx, size_t n)
{
    ctx_t *c = ctx;
    if (n > c->batch_max_seen)
        c->batch_max_seen = n;
    c->batch_total += n;
}

static void on_done(ordo_future_t *f, int status, void *result, void *arg)
{
    (void)f;
    item_t *it = arg;
    assert_true(result == NULL || result == it);
    atomic_store(&it->status, status);
    atomic_fetch_add(&it->completed, 1);
}

static ordo_suq_t *make_queue(ctx_t *c, size_t capacity, size_t batch_max)
{
    ordo_suq_options_t o = {.handler = handler, .cancel_fn = cancel_fn, .batch_fn = batch_fn,
                            .ctx = c, .capacity = capacity, .batch_max = batch_max};
    ordo_suq_t *q = NULL;
    assert_int_equal(ordo_suq_create(&o, &q), ORDO_OK);
    assert_non_null(q);
    c->self = q;
    return q;
}

static void items_init(item_t *items, int n)
{
    for (int i = 0; i < n; i++) {
        memset(&items[i], 0, sizeof items[i]);
        items[i].value = i;
        atomic_init(&items[i].status, 1);
    }
}

/* A thread that makes one blocking submit and reports its return code. */
typedef struct {
    ordo_suq_t *q;
    item_t *item;
    int64_t timeout_ms;
    int rc;
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    ordo_future_t *f;
} submitter_t;

static void *submitter_main(void *arg)
{
    submitter_t *s = arg;
    int rc = ordo_suq_submit(s->q, s->item, s->timeout_ms, &s->f);
    pthread_mutex_lock(&s->mu);
    s->rc = rc;
    s->done = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void submitter_start(submitter_t *s, pthread_t *t, ordo_suq_t *q, item_t *it)
{
    memset(s, 0, sizeof *s);
    s->q = q;
    s->item = it;
    s->timeout_ms = ORDO_WAIT_FOREVER;
    pthread_mutex_init(&s->mu, NULL);
    ordo_cond_init(&s->cond);
    assert_int_equal(pthread_create(t, NULL, submitter_main, s), 0);
}

/* 1 if the submitter returned within timeout_ms. */
static int submitter_returned_within(submitter_t *s, int64_t timeout_ms)
{
    uint64_t deadline = ordo_deadline_ns(timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (!s->done && ordo_cond_wait_until(&s->cond, &s->mu, deadline) == 0)
        ;
    int done = s->done;
    pthread_mutex_unlock(&s->mu);
    return done;
}

static void submitter_join(submitter_t *s, pthread_t t)
{
    pthread_join(t, NULL);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
}

typedef struct {
    ordo_suq_t *q;
    ordo_suq_stop_mode_t mode;
    int rc;
} stopper_t;

static void *stopper_main(void *arg)
{
    stopper_t *s = arg;
    s->rc = ordo_suq_stop(s->q, s->mode);
    return NULL;
}

/* ---- arguments ----------------------------------------------------------- */

static void test_invalid_arguments(void **state)
{
    (void)state;
    ordo_suq_t *q = NULL;
    ordo_suq_options_t o = {.handler = NULL};
    assert_int_equal(ordo_suq_create(&o, &q), ORDO_EINVAL);
    assert_int_equal(ordo_suq_create(NULL, &q), ORDO_EINVAL);
    o.handler = handler;
    assert_int_equal(ordo_suq_create(&o, NULL), ORDO_EINVAL);
    o.capacity = (size_t)ORDO_SUQ_CAPACITY_MAX + 1;
    assert_int_equal(ordo_suq_create(&o, &q), ORDO_EINVAL);
    assert_null(q);

    /* Without cancel_fn, fire-and-forget posts are refused. */
    ctx_t c;
    ctx_init(&c);
    o.capacity = 0;
    o.ctx = &c;
    assert_int_equal(ordo_suq_create(&o, &q), ORDO_OK);
    item_t it;
    items_init(&it, 1);
    assert_int_equal(ordo_suq_post(q, &it, 0), ORDO_EINVAL);
    assert_int_equal(ordo_suq_submit(q, &it, 0, NULL), ORDO_EINVAL);
    ordo_future_t *f = (ordo_future_t *)&it;
    assert_int_equal(ordo_suq_submit(NULL, &it, 0, &f), ORDO_EINVAL);
    assert_null(f);
    assert_int_equal(ordo_suq_stop(q, (ordo_suq_stop_mode_t)7), ORDO_EINVAL);
    assert_int_equal(ordo_suq_stop(NULL, ORDO_SUQ_DRAIN), ORDO_EINVAL);
    ordo_suq_destroy(q);
    ordo_suq_destroy(NULL);
    ctx_fini(&c);
}

/* ---- order, futures, failure --------------------------------------------- */

static void test_order_and_wait(void **state)
{
    (void)state;
    enum { N = 200 };
    ctx_t c;
    ctx_init(&c);
    ordo_suq_t *q = make_queue(&c, 0, 0);
    item_t items[N];
    items_init(items, N);
    ordo_future_t *f[N];
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0)
            assert_int_equal(ordo_suq_post(q, &items[i], ORDO_WAIT_FOREVER), ORDO_OK);
        else if (i % 3 == 1)
            assert_int_equal(ordo_suq_post(q, &items[i], 0), ORDO_OK);
        else
            assert_int_equal(ordo_suq_submit(q, &items[i], ORDO_WAIT_FOREVER, &f[i]), ORDO_OK);
    }
    for (int i = 2; i < N; i += 3) {
        void *res = NULL;
        assert_int_equal(ordo_future_wait(f[i], &res), ORDO_OK);
        assert_ptr_equal(res, &items[i]);
        assert_int_equal(ordo_future_done(f[i]), 1);
        ordo_future_release(f[i]);
    }
    assert_int_equal(ordo_suq_stop(q, ORDO_SUQ_DRAIN), ORDO_OK);
    assert_int_equal(c.n_applied, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(c.order[i], i);
        assert_int_equal(atomic_load(&items[i].applied), 1);
        assert_int_equal(atomic_load(&items[i].cancelled), 0);
    }
    ordo_suq_destroy(q);
    ctx_fini(&c);
}

static void test_timedwait_then_failure(void **state)
{
    (void)state;
    ctx_t c;
    ctx_init(&c);
    c.gate_closed = 1;
    c.fail_value = 1;
    ordo_suq_t *q = make_queue(&c, 0, 0);
    item_t items[2];
    items_init(items, 2);
    ordo_future_t *f0, *f1;
    assert_int_equal(ordo_suq_submit(q, &items[0], 0, &f0), ORDO_OK);
    assert_int_equal(ordo_suq_submit(q, &items[1], 0, &f1), ORDO_OK);
    gate_wait_entered(&c, 1);
    /* Held by the gate: a poll and a short timed wait both time out. */
    assert_int_equal(ordo_future_done(f0), 0);
    assert_int_equal(ordo_future_timedwait(f0, 0, NULL), ORDO_ETIMEDOUT);
    assert_int_equal(ordo_future_timedwait(f0, 5, NULL), ORDO_ETIMEDOUT);
    /* Callbacks registered before completion run on the worker. */
    assert_int_equal(ordo_future_then(f0, on_done, &items[0]), ORDO_OK);
    assert_int_equal(ordo_future_then(f0, on_done, &items[0]), ORDO_EBUSY);
    assert_int_equal(ordo_future_then(f1, on_done, &items[1]), ORDO_OK);
    gate_open(&c);
    void *res = NULL;
    assert_int_equal(ordo_future_timedwait(f0, ORDO_WAIT_FOREVER, &res), ORDO_OK);
    assert_ptr_equal(res, &items[0]);
    /* The handler failed on item 1: ORDO_EHANDLER with the result it set. */
    res = NULL;
    assert_int_equal(ordo_future_wait(f1, &res), ORDO_EHANDLER);
    assert_ptr_equal(res, &items[1]);
    ordo_future_release(f0);
    ordo_future_release(f1);
    assert_int_equal(ordo_suq_stop(q, ORDO_SUQ_DRAIN), ORDO_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(atomic_load(&items[i].completed), 1);
    assert_int_equal(atomic_load(&items[0].status), ORDO_OK);
    assert_int_equal(atomic_load(&items[1].status), ORDO_EHANDLER);

    /* then() on a completed future runs at once, on this thread. */
    ctx_t c2;
    ctx_init(&c2);
    q = make_queue(&c2, 0, 0);
    item_t late;
    items_init(&late, 1);
    ordo_future_t *f;
    assert_int_equal(ordo_suq_submit(q, &late, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_wait(f, NULL), ORDO_OK);
    assert_int_equal(ordo_future_then(f, on_done, &late), ORDO_OK);
    assert_int_equal(atomic_load(&late.completed), 1);
    ordo_future_release(f);
    ordo_suq_destroy(q);
    ordo_suq_destroy(c.self);
    ctx_fini(&c);
    ctx_fini(&c2);
}

/* A future released before completion: the work still runs. */
static void test_release_early(void **state)
{
    (void)state;
    ctx_t c;
    ctx_init(&c);
    c.gate_closed = 1;
    ordo_suq_t *q = make_queue(&c, 0, 0);
    item_t it;
    items_init(&it, 1);
    ordo_future_t *f;
    assert_int_equal(ordo_suq_submit(q, &it, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_then(f, on_done, &it), ORDO_OK);
    ordo_future_release(f);
    gate_open(&c);
    assert_int_equal(ordo_suq_stop(q, ORDO_SUQ_DRAIN), ORDO_OK);
    assert_int_equal(atomic_load(&it.applied), 1);
    assert_int_equal(atomic_load(&it.completed), 1);
    ordo_suq_destroy(q);
    ctx_fini(&c);
}

/* ---- capacity ------------------------------------------------------------ */

static void test_full(void **state)
{
    (void)state;
    ctx_t c;
    ctx_init(&c);
    c.gate_closed = 1;
    ordo_suq_t *q = make_queue(&c, 2, 0);
    item_t items[4];
    items_init(items, 4);
    ordo_future_t *f[4];
    assert_int_equal(ordo_suq_submit(q, &items[0], 0, &f[0]), ORDO_OK);
    gate_wait_entered(&c, 1);  /* item 0 is being applied: still counted */
    assert_int_equal(ordo_suq_submit(q, &items[1], 0, &f[1]), ORDO_OK);
    ordo_future_t *none = (ordo_future_t *)&items[3];
    assert_int_equal(ordo_suq_submit(q, &items[2], 0, &none), ORDO_EFULL);
    assert_null(none);
    assert_int_equal(ordo_suq_post(q, &items[2], 0), ORDO_EFULL);
    assert_int_equal(ordo_suq_submit(q, &items[2], 10, &none), ORDO_ETIMEDOUT);
    assert_int_equal(ordo_suq_post(q, &items[2], 10), ORDO_ETIMEDOUT);

    /* A blocking submit waits for space... */
    submitter_t s;
    pthread_t t;
    submitter_start(&s, &t, q, &items[2]);
    assert_int_equal(submitter_returned_within(&s, 30), 0);
    /* ...and gets it when the worker finishes its batch. */
    gate_open(&c);
    assert_int_equal(submitter_returned_within(&s, ORDO_WAIT_FOREVER), 1);
    submitter_join(&s, t);
    assert_int_equal(s.rc, ORDO_OK);
    f[2] = s.f;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ordo_future_wait(f[i], NULL), ORDO_OK);
        ordo_future_release(f[i]);
    }
    assert_int_equal(ordo_suq_stop(q, ORDO_SUQ_DRAIN), ORDO_OK);
    assert_int_equal(c.n_applied, 3);
    assert_int_equal(c.order[2], 2);
    assert_int_equal(atomic_load(&items[3].applied), 0);
    ordo_suq_destroy(q);
    ctx_fini(&c);
}

/* Capacity is rounded up to a power of two: 3 gives 4 slots. */
static void test_capacity_rounding(void **state)
{
    (void)state;
    ctx_t c;
    ctx_init(&c);
    c.gate_closed = 1;
    ordo_suq_t *q = make_queue(&c, 3, 0);
    item_t items[5];
    items_init(items, 5);
    assert_int_equal(ordo_suq_post(q, &items[0], 0), ORDO_OK);
    gate_wait_entered(&c, 1);
    for (int i = 1; i < 4; i++)
        assert_int_equal(ordo_suq_post(q, &items[i], 0), ORDO_OK);
    assert_int_equal(ordo_suq_post(q, &items[4], 0), ORDO_EFULL);
    gate_open(&c);
    assert_int_equal(ordo_suq_stop(q, ORDO_SUQ_DRAIN), ORDO_OK);
    assert_int_equal(c.n_applied, 4);
    ordo_suq_destroy(q);
    ctx_fini(&c);
}

/* ---- stop ---------------------------------------------------------------- */

static void test_stop_drain(void **state)
{
    (void)state;
    enum { N = 64 };
    ctx_t c;
    ctx_init(&c);
    c.gate_closed = 1;
    ordo_suq_t *q = make_queue(&c, N, 4);
    item_t items[N + 1];
    items_init(items, N + 1);
    for (int i = 0; i < N; i++) {
        ordo_future_t *f;
        if (i % 2) {
            assert_int_equal(ordo_suq_post(q, &items[i], 0), ORDO_OK);
            continue;
        }
        assert_int_equal(ordo_suq_submit(q, &items[i], 0, &f), ORDO_OK);
        assert_int_equal(ordo_future_then(f, on_done, &items[i]), ORDO_OK);
        ordo_future_release(f);
    }
    gate_wait_entered(&c, 1);

    /* A producer blocked on the full queue is woken by the stop. */
    submitter_t s;
    pthread_t t;
    submitter_start(&s, &t, q, &items[N]);
    stopper_t st = {.q = q, .mode = ORDO_SUQ_DRAIN};
    pthread_t ts;
    assert_int_equal(pthread_create(&ts, NULL, stopper_main, &st), 0);
    assert_int_equal(submitter_returned_within(&s, ORDO_WAIT_FOREVER), 1);
    submitter_join(&s, t);
    assert_int_equal(s.rc, ORDO_ESTOPPED);
    assert_null(s.f);
    /* The stop has started: nothing more is accepted. */
    ordo_future_t *f = (ordo_future_t *)&c;
    assert_int_equal(ordo_suq_submit(q, &items[N], ORDO_WAIT_FOREVER, &f), ORDO_ESTOPPED);
    assert_null(f);
    assert_int_equal(ordo_suq_post(q, &items[N], ORDO_WAIT_FOREVER), ORDO_ESTOPPED);

    gate_open(&c);
    pthread_join(ts, NULL);
    assert_int_equal(st.rc, ORDO_OK);
    assert_int_equal(ordo_suq_stop(q, ORDO_SUQ_CANCEL), ORDO_ESTOPPED);
    /* Every accepted item applied once, in order; futures completed once. */
    assert_int_equal(c.n_applied, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(c.order[i], i);
        assert_int_equal(atomic_load(&items[i].applied), 1);
        assert_int_equal(atomic_load(&items[i].cancelled), 0);
        assert_int_equal(atomic_load(&items[i].completed), i % 2 ? 0 : 1);
    }
    assert_int_equal(atomic_load(&items[N].applied), 0);
    assert_true(c.batch_max_seen <= 4);
    assert_int_equal(c.batch_total, N);
    ordo_suq_destroy(q);
    ctx_fini(&c);
}

static void test_stop_cancel(void **state)
{
    (void)state;
    enum { N = 64 };
    ctx_t c;
    ctx_init(&c);
    c.gate_closed = 1;
    ordo_suq_t *q = make_queue(&c, N, 0);
    item_t items[N + 1];
    items_init(items, N + 1);
    for (int i = 0; i < N; i++) {
        ordo_future_t *f;
        if (i % 3 == 1) {
            assert_int_equal(ordo_suq_post(q, &items[i], 0), ORDO_OK);
        } else if (i % 3 == 2) {
            assert_int_equal(ordo_suq_post(q, &items[i], ORDO_WAIT_FOREVER), ORDO_OK);
        } else {
            assert_int_equal(ordo_suq_submit(q, &items[i], 0, &f), ORDO_OK);
            assert_int_equal(ordo_future_then(f, on_done, &items[i]), ORDO_OK);
            ordo_future_release(f);
        }
    }
    gate_wait_entered(&c, 1);
    /* Item 0 is in the handler. A blocked producer tells us when the stop
     * has started (its ESTOPPED); only then is the gate opened. */
    submitter_t s;
    pthread_t t;
    submitter_start(&s, &t, q, &items[N]);
    stopper_t st = {.q = q, .mode = ORDO_SUQ_CANCEL};
    pthread_t ts;
    assert_int_equal(pthread_create(&ts, NULL, stopper_main, &st), 0);
    assert_int_equal(submitter_returned_within(&s, ORDO_WAIT_FOREVER), 1);
    submitter_join(&s, t);
    assert_int_equal(s.rc, ORDO_ESTOPPED);
    gate_open(&c);
    pthread_join(ts, NULL);
    assert_int_equal(st.rc, ORDO_OK);

    /* Item 0 finished normally; every other accepted item was cancelled
     * exactly once, its future completed once with ORDO_ECANCELED. */
    assert_int_equal(atomic_load(&items[0].applied), 1);
    assert_int_equal(atomic_load(&items[0].completed), 1);
    assert_int_equal(atomic_load(&items[0].status), ORDO_OK);
    for (int i = 1; i < N; i++) {
        assert_int_equal(atomic_load(&items[i].applied), 0);
        assert_int_equal(atomic_load(&items[i].cancelled), 1);
        if (i % 3 == 0) {
            assert_int_equal(atomic_load(&items[i].completed), 1);
            assert_int_equal(atomic_load(&items[i].status), ORDO_ECANCELED);
        }
    }
    assert_int_equal(atomic_load(&items[N].cancelled), 0);
    assert_int_equal(c.batch_total, N);
    ordo_suq_destroy(q);
    ctx_fini(&c);
}

/* A later stop in cancel mode cuts a draining stop short. */
static void test_stop_upgrade(void **state)
{
    (void)state;
    enum { N = 16 };
    ctx_t c;
    ctx_init(&c);
    c.gate_closed = 1;
    ordo_suq_t *q = make_queue(&c, N, 0);
    item_t items[N + 1];
    items_init(items, N + 1);
    for (int i = 0; i < N; i++)
        assert_int_equal(ordo_suq_post(q, &items[i], 0), ORDO_OK);
    gate_wait_entered(&c, 1);
    submitter_t s;
    pthread_t t;
    submitter_start(&s, &t, q, &items[N]);
    stopper_t st = {.q = q, .mode = ORDO_SUQ_DRAIN};
    pthread_t ts;
    assert_int_equal(pthread_create(&ts, NULL, stopper_main, &st), 0);
    assert_int_equal(submitter_returned_within(&s, ORDO_WAIT_FOREVER), 1);
    submitter_join(&s, t);
    assert_int_equal(s.rc, ORDO_ESTOPPED);
    stopper_t st2 = {.q = q, .mode = ORDO_SUQ_CANCEL};
    pthread_t ts2;
    assert_int_equal(pthread_create(&ts2, NULL, stopper_main, &st2), 0);
    /* st2 may not have set the cancel flag yet; whatever the split, each
     * item has exactly one fate and applied items form a prefix. */
    gate_open(&c);
    pthread_join(ts, NULL);
    pthread_join(ts2, NULL);
    assert_int_equal(st.rc, ORDO_OK);
    assert_int_equal(st2.rc, ORDO_ESTOPPED);
    for (int i = 0; i < N; i++) {
        int a = atomic_load(&items[i].applied), x = atomic_load(&items[i].cancelled);
        assert_int_equal(a + x, 1);
        if (i > 0 && a)
            assert_int_equal(atomic_load(&items[i - 1].applied), 1);
    }
    ordo_suq_destroy(q);
    ctx_fini(&c);
}

/* ---- re-entrancy and pipelines ------------------------------------------- */

static int stopping_handler(void *ctx, void *p, void **result_out)
{
    ctx_t *c = ctx;
    (void)p;
    (void)result_out;
    c->stop_rc = ordo_suq_stop(c->self, ORDO_SUQ_DRAIN);
    return 0;
}

static void test_stop_from_worker(void **state)
{
    (void)state;
    ctx_t c;
    ctx_init(&c);
    ordo_suq_options_t o = {.handler = stopping_handler, .ctx = &c};
    ordo_suq_t *q;
    assert_int_equal(ordo_suq_create(&o, &q), ORDO_OK);
    c.self = q;
    ordo_future_t *f;
    assert_int_equal(ordo_suq_submit(q, NULL, 0, &f), ORDO_OK);
    assert_int_equal(ordo_future_wait(f, NULL), ORDO_OK);
    ordo_future_release(f);
    assert_int_equal(c.stop_rc, ORDO_EBUSY);
    ordo_suq_destroy(q);
    ctx_fini(&c);
}

/* A three-stage pipeline: stage k adds 10^k to the value. Each stage's
 * future callback forwards the item to the next stage (submit for stage 1,
 * post for stage 2). Stage 0 holds its first item until every callback is
 * registered, so all stage-0 callbacks run on stage 0's worker, in order,
 * and stage 1 sees the items in order. (Stage 2's order is not asserted: a
 * stage-1 callback registered after completion runs on the registering
 * thread, which may race the stage-1 worker's later callbacks.) */
typedef struct {
    ordo_suq_t *stage[3];
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int gate_closed;        /* stage 0 holds its first item while set */
    int entered;
    int order1[64];         /* stage 1's worker owns it until stopped */
    int n1;
    int out[64];            /* stage 2's worker owns it until stopped */
    int n_out;
    atomic_int forward_errors;
} pipe_t;

typedef struct {
    int value;
    int k;                  /* the stage it is at */
} pipe_item_t;

static void pipe_hold(pipe_t *pp)
{
    pthread_mutex_lock(&pp->mu);
    pp->entered++;
    pthread_cond_broadcast(&pp->cond);
    while (pp->gate_closed)
        pthread_cond_wait(&pp->cond, &pp->mu);
    pthread_mutex_unlock(&pp->mu);
}

static int pipe_handler(void *ctx, void *p, void **result_out)
{
    static const int add[3] = {1, 10, 100};
    pipe_t *pp = ctx;
    pipe_item_t *it = p;
    if (it->k == 0)
        pipe_hold(pp);
    it->value += add[it->k];
    if (it->k == 1)
        pp->order1[pp->n1++] = it->value / 1000;
    if (it->k == 2)
        pp->out[pp->n_out++] = it->value;
    *result_out = it;
    return 0;
}

static void pipe_cancel(void *ctx, void *p)
{
    (void)p;
    atomic_fetch_add(&((pipe_t *)ctx)->forward_errors, 1);
}

static void pipe_forward(ordo_future_t *f, int status, void *result, void *arg)
{
    (void)f;
    pipe_t *pp = arg;
    pipe_item_t *it = result;
    if (status != ORDO_OK) {
        atomic_fetch_add(&pp->forward_errors, 1);
        return;
    }
    it->k++;
    if (it->k == 2) {
        if (ordo_suq_post(pp->stage[2], it, ORDO_WAIT_FOREVER) != ORDO_OK)
            atomic_fetch_add(&pp->forward_errors, 1);
        return;
    }
    ordo_future_t *next;
    if (ordo_suq_submit(pp->stage[it->k], it, ORDO_WAIT_FOREVER, &next) != ORDO_OK) {
        atomic_fetch_add(&pp->forward_errors, 1);
        return;
    }
    if (ordo_future_then(next, pipe_forward, pp) != ORDO_OK)
        atomic_fetch_add(&pp->forward_errors, 1);
    ordo_future_release(next);
}

static void test_pipeline(void **state)
{
    (void)state;
    enum { N = 64 };
    pipe_t pp;
    memset(&pp, 0, sizeof pp);
    pthread_mutex_init(&pp.mu, NULL);
    ordo_cond_init(&pp.cond);
    pp.gate_closed = 1;
    /* Stages 1 and 2 are small, so forwarding callbacks block at times. */
    static const size_t capacity[3] = {N, 4, 4};
    for (int s = 0; s < 3; s++) {
        ordo_suq_options_t o = {.handler = pipe_handler, .cancel_fn = pipe_cancel, .ctx = &pp,
                                .capacity = capacity[s]};
        assert_int_equal(ordo_suq_create(&o, &pp.stage[s]), ORDO_OK);
    }
    pipe_item_t items[N];
    for (int i = 0; i < N; i++) {
        items[i] = (pipe_item_t){.value = i * 1000, .k = 0};
        ordo_future_t *f;
        assert_int_equal(ordo_suq_submit(pp.stage[0], &items[i], 0, &f), ORDO_OK);
        assert_int_equal(ordo_future_then(f, pipe_forward, &pp), ORDO_OK);
        ordo_future_release(f);
    }
    pthread_mutex_lock(&pp.mu);
    while (pp.entered < 1)
        pthread_cond_wait(&pp.cond, &pp.mu);
    pp.gate_closed = 0;
    pthread_cond_broadcast(&pp.cond);
    pthread_mutex_unlock(&pp.mu);
    /* Stopping stage by stage in drain mode flushes the pipeline. */
    for (int s = 0; s < 3; s++)
        assert_int_equal(ordo_suq_stop(pp.stage[s], ORDO_SUQ_DRAIN), ORDO_OK);
    assert_int_equal(atomic_load(&pp.forward_errors), 0);
    assert_int_equal(pp.n1, N);
    assert_int_equal(pp.n_out, N);
    int seen[N] = {0};
    for (int i = 0; i < N; i++) {
        assert_int_equal(pp.order1[i], i);
        assert_int_equal(pp.out[i] % 1000, 111);
        seen[pp.out[i] / 1000]++;
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);
    for (int s = 0; s < 3; s++)
        ordo_suq_destroy(pp.stage[s]);
    pthread_cond_destroy(&pp.cond);
    pthread_mutex_destroy(&pp.mu);
}

/* ---- stress -------------------------------------------------------------- */

/* Several producers submit (every 8th with a future) and post items
 * tagged (producer, seq). The worker checks that handlers never
 * overlap and that each producer's items arrive in sequence; every item's
 * fate is counted, so "accounted == accepted" and "nothing twice" hold. */
enum { STRESS_PRODUCERS = 4, STRESS_PER_PRODUCER = 20000 };

typedef struct {
    int producer, seq;
    atomic_int fate;        /* handler + cancel_fn + future callback runs */
    int with_future;
} sitem_t;

typedef struct {
    atomic_int in_handler;
    atomic_int overlaps;
    atomic_int order_errors;
    int last_seq[STRESS_PRODUCERS];   /* worker-owned */
    long applied;                     /* worker-owned */
    long cancelled;                   /* worker-owned */
    atomic_long completions;
    /* Raised once `applied` reaches `signal_at` (for the cancel race). */
    long signal_at;
    int signalled;
    pthread_mutex_t mu;
    pthread_cond_t cond;
} stress_t;

typedef struct {
    stress_t *st;
    ordo_suq_t *q;
    int producer;
    sitem_t *items;
    int accepted;           /* items 0..accepted-1 were accepted */
    int last_rc;
} producer_t;

static int stress_handler(void *ctx, void *p, void **result_out)
{
    stress_t *st = ctx;
    sitem_t *it = p;
    if (atomic_fetch_add(&st->in_handler, 1) != 0)
        atomic_fetch_add(&st->overlaps, 1);
    if (it->seq != st->last_seq[it->producer] + 1)
        atomic_fetch_add(&st->order_errors, 1);
    st->last_seq[it->producer] = it->seq;
    atomic_fetch_add(&it->fate, 1);
    st->applied++;
    if (st->applied == st->signal_at) {
        pthread_mutex_lock(&st->mu);
        st->signalled = 1;
        pthread_cond_broadcast(&st->cond);
        pthread_mutex_unlock(&st->mu);
    }
    *result_out = it;
    atomic_fetch_sub(&st->in_handler, 1);
    return 0;
}

static void stress_cancel(void *ctx, void *p)
{
    stress_t *st = ctx;
    sitem_t *it = p;
    atomic_fetch_add(&it->fate, 1);
    st->cancelled++;
}

static void stress_done(ordo_future_t *f, int status, void *result, void *arg)
{
    (void)f;
    (void)result;
    stress_t *st = arg;
    if (status == ORDO_OK || status == ORDO_ECANCELED)
        atomic_fetch_add(&st->completions, 1);
}

static int stress_one(producer_t *p, sitem_t *it)
{
    switch (it->seq % 8) {
    case 0: {
        ordo_future_t *f;
        int rc = ordo_suq_submit(p->q, it, ORDO_WAIT_FOREVER, &f);
        if (rc == ORDO_OK) {
            it->with_future = 1;
            rc = ordo_future_then(f, stress_done, p->st);
            ordo_future_release(f);
        }
        return rc;
    }
    default:
        return ordo_suq_post(p->q, it, it->seq % 2 ? ORDO_WAIT_FOREVER : 60000);
    }
}

static void *producer_main(void *arg)
{
    producer_t *p = arg;
    p->last_rc = ORDO_OK;
    for (int i = 0; i < STRESS_PER_PRODUCER; i++) {
        sitem_t *it = &p->items[i];
        it->producer = p->producer;
        it->seq = i;
        int rc = stress_one(p, it);
        if (rc != ORDO_OK) {
            p->last_rc = rc;
            break;
        }
        p->accepted = i + 1;
    }
    return NULL;
}

static void stress_run(ordo_suq_stop_mode_t mode, long stop_after)
{
    stress_t st;
    memset(&st, 0, sizeof st);
    for (int i = 0; i < STRESS_PRODUCERS; i++)
        st.last_seq[i] = -1;
    st.signal_at = stop_after;
    pthread_mutex_init(&st.mu, NULL);
    ordo_cond_init(&st.cond);
    ordo_suq_options_t o = {.handler = stress_handler, .cancel_fn = stress_cancel, .ctx = &st,
                            .capacity = 64, .batch_max = 16};
    ordo_suq_t *q;
    assert_int_equal(ordo_suq_create(&o, &q), ORDO_OK);
    producer_t prod[STRESS_PRODUCERS];
    pthread_t threads[STRESS_PRODUCERS];
    for (int i = 0; i < STRESS_PRODUCERS; i++) {
        prod[i] = (producer_t){.st = &st, .q = q, .producer = i};
        prod[i].items = calloc(STRESS_PER_PRODUCER, sizeof(sitem_t));
        assert_non_null(prod[i].items);
        assert_int_equal(pthread_create(&threads[i], NULL, producer_main, &prod[i]), 0);
    }
    if (mode == ORDO_SUQ_CANCEL) {
        /* Stop while the producers are still going. */
        pthread_mutex_lock(&st.mu);
        while (!st.signalled)
            pthread_cond_wait(&st.cond, &st.mu);
        pthread_mutex_unlock(&st.mu);
        assert_int_equal(ordo_suq_stop(q, ORDO_SUQ_CANCEL), ORDO_OK);
    }
    for (int i = 0; i < STRESS_PRODUCERS; i++)
        pthread_join(threads[i], NULL);
    if (mode == ORDO_SUQ_DRAIN)
        assert_int_equal(ordo_suq_stop(q, ORDO_SUQ_DRAIN), ORDO_OK);

    long accepted = 0, futures = 0;
    for (int i = 0; i < STRESS_PRODUCERS; i++) {
        if (mode == ORDO_SUQ_DRAIN) {
            assert_int_equal(prod[i].accepted, STRESS_PER_PRODUCER);
        } else if (prod[i].accepted < STRESS_PER_PRODUCER) {
            assert_int_equal(prod[i].last_rc, ORDO_ESTOPPED);
        }
        accepted += prod[i].accepted;
        for (int k = 0; k < STRESS_PER_PRODUCER; k++) {
            sitem_t *it = &prod[i].items[k];
            assert_int_equal(atomic_load(&it->fate), k < prod[i].accepted ? 1 : 0);
            futures += it->with_future;
        }
        free(prod[i].items);
    }
    assert_int_equal(atomic_load(&st.overlaps), 0);
    assert_int_equal(atomic_load(&st.order_errors), 0);
    assert_int_equal(st.applied + st.cancelled, accepted);
    assert_int_equal(atomic_load(&st.completions), futures);
    if (mode == ORDO_SUQ_DRAIN)
        assert_int_equal(st.cancelled, 0);
    assert_true(st.applied >= stop_after);
    ordo_suq_destroy(q);
    pthread_cond_destroy(&st.cond);
    pthread_mutex_destroy(&st.mu);
}

static void test_stress_drain(void **state)
{
    (void)state;
    stress_run(ORDO_SUQ_DRAIN, 0);
}

static void test_stress_cancel_race(void **state)
{
    (void)state;
    /* A few rounds with the stop landing at different points. */
    for (long at = 1; at <= 40000; at *= 8)
        stress_run(ORDO_SUQ_CANCEL, at);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_order_and_wait),
        cmocka_unit_test(test_timedwait_then_failure),
        cmocka_unit_test(test_release_early),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_capacity_rounding),
        cmocka_unit_test(test_stop_drain),
        cmocka_unit_test(test_stop_cancel),
        cmocka_unit_test(test_stop_upgrade),
        cmocka_unit_test(test_stop_from_worker),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_stress_drain),
        cmocka_unit_test(test_stress_cancel_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
