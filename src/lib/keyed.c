/*
 * keyed.c -- the keyed serial executor; see ordo/keyed.h for the contract.
 *
 * Shape. One mutex (mu) guards everything below except the tasks' payloads:
 *
 *   keys   hash table of key states, one per key that has pending tasks;
 *          a key state holds the key bytes, the FIFO of its queued tasks
 *          (not yet started), its pending count and a running flag;
 *   ready  FIFO of key states that have queued tasks and are not running.
 *
 * A worker pops the ready key at the head, marks it running, takes its head
 * task and runs it with mu released. It then completes the future (its
 * callback runs on the worker, still with mu released and the key still
 * marked running, so same-key completions are ordered too), retakes mu, and
 * either puts the key back at the tail of ready (more tasks: one task per
 * turn is what keeps a hot key from starving the others) or, with nothing
 * left, removes it from the table and frees it.
 *
 * Invariants, under mu:
 *   - a key state exists iff its pending count > 0;
 *   - a key state is in ready iff !running && its FIFO is non-empty;
 *   - sum of key pending counts == ex->pending;
 *   - pending > 0 implies some key is ready or running, and a worker that
 *     runs a key only leaves the loop when ready is empty, so a stop cannot
 *     strand accepted work.
 *
 * Costs. A submit takes mu once and allocates its task (plus a key state
 * when the key was idle); a task run takes mu once (finishing one task and
 * popping the next share a critical section). Idle workers are signalled
 * only when a key becomes ready and some worker is idle; blocked producers
 * are woken with a broadcast on one condition variable, only while any
 * producer is blocked, and only when a count falls to its low-water mark
 * (see crossed_low_mark()): a full executor then wakes its producers once
 * per quarter-bound of finished tasks, not once per task. A producer blocked
 * on one key's bound may be woken by another key's progress and simply
 * waits again.
 *
 * Recycling. Fire-and-forget task blocks and key states with short keys are
 * kept on two free lists (under mu, at most KEYED_CACHE_MAX each) instead of
 * being freed, so a steady stream of posts to keys that come and go costs no
 * malloc/free pair (which, freed on a worker and allocated on a producer,
 * crossed threads every time). Tasks with futures are freed by the future's
 * last release, which may come after the executor is gone, so they are not
 * recycled.
 *
 * Cancellation. A cancelling stop sets ex->cancel; from then on a worker that
 * pops a key detaches its whole FIFO and completes the tasks with
 * ORDO_ECANCELED (or calls the post's cancel_fn) in submission order, on the
 * worker thread, while the key is marked running. Tasks already running
 * finish normally.
 */
#include "ordo/keyed.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "future_impl.h"
#include "htab.h"
#include "sync.h"

/* Recycled blocks kept per free list: at ~80 bytes a block, at most ~160 KiB
 * for both lists, which covers the turnover of a busy executor. */
#define KEYED_CACHE_MAX 1024
/* Key states are allocated with room for at least this many key bytes, so
 * that most can be recycled for any other short key. */
#define KEYED_KEY_INLINE_LEN 32

typedef struct keyed_task_s {
    struct keyed_task_s *next; /* in its key's FIFO */
    ordo_keyed_fn fn;
    ordo_keyed_cancel_fn cancel_fn; /* posts only */
    void *arg;
    bool has_future;           /* a submit: embedded in a keyed_ftask_t */
} keyed_task_t;

/* A submitted task and its future, in one block freed by the future's last
 * release. A post is a bare keyed_task_t, freed when it has run. */
typedef struct keyed_ftask_s {
    keyed_task_t task;
    ordo_future_t future;
} keyed_ftask_t;

typedef struct keyed_key_s {
    ordo_hnode_t node;         /* in ex->keys; first, so a node is its key */
    struct keyed_key_s *next;  /* in ex->ready */
    keyed_task_t *head, *tail; /* queued, not started */
    size_t pending;            /* queued + running */
    bool running;
    size_t len;
    size_t cap;                /* bytes allocated for the key */
    unsigned char bytes[];
} keyed_key_t;

struct ordo_keyed_s {
    pthread_mutex_t mu;
    pthread_cond_t work_cond;  /* workers: a key became ready, or stop */
    pthread_cond_t space_cond; /* producers: room freed, or stop */
    pthread_cond_t stop_cond;  /* later stop callers: workers joined */
    ordo_htab_t keys;
    keyed_key_t *ready_head, *ready_tail;
    size_t pending;
    size_t producers_waiting;
    unsigned workers_idle;
    uint64_t post_failures;
    keyed_task_t *task_cache;  /* free post blocks, linked by next */
    size_t task_cached;
    keyed_key_t *key_cache;    /* free key states of cap KEYED_KEY_INLINE_LEN */
    size_t key_cached;
    bool stopping;
    bool cancel;
    bool joining;
    bool joined;
    ordo_keyed_options_t opts;
    unsigned nthreads;         /* threads started */
    pthread_t *threads;        /* written under mu, read under mu */
};

/* ---- small helpers ------------------------------------------------------ */

static bool key_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const keyed_key_t *k = (const keyed_key_t *)n;
    return k->len == len && (len == 0 || memcmp(k->bytes, key, len) == 0);
}

static void ftask_free(ordo_future_t *f)
{
    free((char *)f - offsetof(keyed_ftask_t, future));
}

static ordo_future_t *task_future(keyed_task_t *t)
{
    assert(t->has_future);
    return &((keyed_ftask_t *)t)->future;
}

/* Is the calling thread one of ex's workers? mu held. O(workers), called
 * only on slow paths (a submit about to block, a stop). */
static bool on_worker(const ordo_keyed_t *ex)
{
    pthread_t self = pthread_self();
    for (unsigned i = 0; i < ex->nthreads; i++)
        if (pthread_equal(ex->threads[i], self))
            return true;
    return false;
}

static void ready_push(ordo_keyed_t *ex, keyed_key_t *k)
{
    assert(!k->running && k->head != NULL);
    k->next = NULL;
    if (ex->ready_tail != NULL)
        ex->ready_tail->next = k;
    else
        ex->ready_head = k;
    ex->ready_tail = k;
}

static keyed_key_t *ready_pop(ordo_keyed_t *ex)
{
    keyed_key_t *k = ex->ready_head;
    if (k != NULL) {
        ex->ready_head = k->next;
        if (ex->ready_head == NULL)
            ex->ready_tail = NULL;
        k->next = NULL;
    }
    return k;
}

/* Did a pending count fall from above its bound's low-water mark (a quarter
 * of the bound below it, at least one) to at or below it? Blocked producers
 * are woken only then: waking them on every finished task would cost a
 * futex wake-up per task while the executor is full. */
static bool crossed_low_mark(size_t before, size_t after, size_t max)
{
    size_t low = max - (max / 4 > 0 ? max / 4 : 1);
    return before > low && after <= low;
}

/* Account for n tasks of k that are finished or cancelled. mu held. */
static void tasks_done(ordo_keyed_t *ex, keyed_key_t *k, size_t n)
{
    assert(k->pending >= n && ex->pending >= n);
    size_t key_before = k->pending, ex_before = ex->pending;
    k->pending -= n;
    ex->pending -= n;
    if (ex->producers_waiting > 0 &&
        (crossed_low_mark(ex_before, ex->pending, ex->opts.pending_max) ||
         crossed_low_mark(key_before, k->pending, ex->opts.key_pending_max)))
        pthread_cond_broadcast(&ex->space_cond);
}

/* ---- creation ------------------------------------------------------------ */

static void *worker_main(void *p);

static int options_resolve(const ordo_keyed_options_t *in, ordo_keyed_options_t *out)
{
    ordo_keyed_options_t o = {0};
    if (in != NULL)
        o = *in;
    if (o.workers == 0)
        o.workers = ORDO_KEYED_WORKERS_DEFAULT;
    if (o.pending_max == 0)
        o.pending_max = ORDO_KEYED_PENDING_MAX_DEFAULT;
    if (o.key_pending_max == 0)
        o.key_pending_max = ORDO_KEYED_KEY_PENDING_MAX_DEFAULT;
    if (o.key_len_max == 0)
        o.key_len_max = ORDO_KEYED_KEY_LEN_MAX_DEFAULT;
    if (o.workers > ORDO_KEYED_WORKERS_MAX)
        return ORDO_EINVAL;
    *out = o;
    return ORDO_OK;
}

/* Start the workers; on failure stop and join those already started. */
static int workers_start(ordo_keyed_t *ex)
{
    for (unsigned i = 0; i < ex->opts.workers; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker_main, ex) != 0) {
            pthread_mutex_lock(&ex->mu);
            ex->stopping = true;
            pthread_cond_broadcast(&ex->work_cond);
            pthread_mutex_unlock(&ex->mu);
            for (unsigned j = 0; j < i; j++)
                pthread_join(ex->threads[j], NULL);
            return ORDO_ESYS;
        }
        pthread_mutex_lock(&ex->mu);
        ex->threads[i] = t;
        ex->nthreads = i + 1;
        pthread_mutex_unlock(&ex->mu);
    }
    return ORDO_OK;
}

int ordo_keyed_create(const ordo_keyed_options_t *opts, ordo_keyed_t **out)
{
    if (out == NULL)
        return ORDO_EINVAL;
    ordo_keyed_options_t o;
    int rc = options_resolve(opts, &o);
    if (rc != ORDO_OK)
        return rc;
    ordo_keyed_t *ex = calloc(1, sizeof *ex);
    if (ex == NULL)
        return ORDO_ENOMEM;
    ex->opts = o;
    rc = ORDO_ENOMEM;
    ex->threads = calloc(o.workers, sizeof *ex->threads);
    if (ex->threads == NULL)
        goto fail_threads;
    if (ordo_htab_init(&ex->keys, key_eq) != 0)
        goto fail_htab;
    rc = ORDO_ESYS;
    if (pthread_mutex_init(&ex->mu, NULL) != 0)
        goto fail_mu;
    if (ordo_cond_init(&ex->work_cond) != 0)
        goto fail_work_cond;
    if (ordo_cond_init(&ex->space_cond) != 0)
        goto fail_space_cond;
    if (ordo_cond_init(&ex->stop_cond) != 0)
        goto fail_stop_cond;
    rc = workers_start(ex);
    if (rc != ORDO_OK)
        goto fail_workers;
    *out = ex;
    return ORDO_OK;

fail_workers:
    pthread_cond_destroy(&ex->stop_cond);
fail_stop_cond:
    pthread_cond_destroy(&ex->space_cond);
fail_space_cond:
    pthread_cond_destroy(&ex->work_cond);
fail_work_cond:
    pthread_mutex_destroy(&ex->mu);
fail_mu:
    ordo_htab_destroy(&ex->keys);
fail_htab:
    free(ex->threads);
fail_threads:
    free(ex);
    return rc;
}

/* ---- submitting -------------------------------------------------------- */

/* Wait (mu held) until key (hash) has room in both bounds. Returns ORDO_OK,
 * or the error the submit returns. */
static int wait_for_room(ordo_keyed_t *ex, uint64_t hash, const void *key, size_t len,
                         int64_t timeout_ms)
{
    uint64_t deadline_ns = 0;
    bool timed_out = false;
    for (;;) {
        if (ex->stopping)
            return ORDO_ESTOPPED;
        const keyed_key_t *k = (const keyed_key_t *)ordo_htab_find(&ex->keys, hash, key, len);
        size_t key_pending = k != NULL ? k->pending : 0;
        if (ex->pending < ex->opts.pending_max && key_pending < ex->opts.key_pending_max)
            return ORDO_OK;
        if (timeout_ms == 0 || on_worker(ex))
            return ORDO_EFULL;
        if (timed_out)
            return ORDO_ETIMEDOUT;
        if (deadline_ns == 0)
            deadline_ns = ordo_deadline_ns(timeout_ms);
        ex->producers_waiting++;
        timed_out = ordo_cond_wait_until(&ex->space_cond, &ex->mu, deadline_ns) != 0;
        ex->producers_waiting--;
    }
}

/* A key state block with room for len bytes, recycled if it can be. mu held. */
static keyed_key_t *key_alloc(ordo_keyed_t *ex, size_t len)
{
    if (len <= KEYED_KEY_INLINE_LEN && ex->key_cache != NULL) {
        keyed_key_t *k = ex->key_cache;
        ex->key_cache = k->next;
        ex->key_cached--;
        return k;
    }
    size_t cap = len > KEYED_KEY_INLINE_LEN ? len : KEYED_KEY_INLINE_LEN;
    keyed_key_t *k = malloc(sizeof *k + cap);
    if (k != NULL)
        k->cap = cap;
    return k;
}

/* Unlink idle key state k from the table and recycle or free it. mu held. */
static void key_discard(ordo_keyed_t *ex, keyed_key_t *k)
{
    assert(k->pending == 0 && k->head == NULL && !k->running);
    ordo_htab_remove(&ex->keys, &k->node);
    if (k->cap == KEYED_KEY_INLINE_LEN && ex->key_cached < KEYED_CACHE_MAX) {
        k->next = ex->key_cache;
        ex->key_cache = k;
        ex->key_cached++;
        return;
    }
    free(k);
}

/* A post's task block, recycled if it can be. mu held. NULL if out of
 * memory. */
static keyed_task_t *task_alloc(ordo_keyed_t *ex)
{
    keyed_task_t *t = ex->task_cache;
    if (t == NULL)
        return malloc(sizeof *t);
    ex->task_cache = t->next;
    ex->task_cached--;
    return t;
}

/* Recycle or free a post's task block once it is done with. mu held. */
static void task_recycle(ordo_keyed_t *ex, keyed_task_t *t)
{
    assert(!t->has_future);
    if (ex->task_cached < KEYED_CACHE_MAX) {
        t->next = ex->task_cache;
        ex->task_cache = t;
        ex->task_cached++;
        return;
    }
    free(t);
}

/* The key state for key, created (empty, not ready) if absent. mu held.
 * Returns NULL only when a new state could not be allocated. */
static keyed_key_t *key_get(ordo_keyed_t *ex, uint64_t hash, const void *key, size_t len)
{
    keyed_key_t *k = (keyed_key_t *)ordo_htab_find(&ex->keys, hash, key, len);
    if (k != NULL)
        return k;
    k = key_alloc(ex, len);
    if (k == NULL)
        return NULL;
    k->next = NULL;
    k->head = k->tail = NULL;
    k->pending = 0;
    k->running = false;
    k->len = len;
    if (len > 0)
        memcpy(k->bytes, key, len);
    ordo_htab_insert(&ex->keys, &k->node, hash);
    return k;
}

/* Append t to k's FIFO, count it, and make k ready if it was idle. mu held. */
static void key_append(ordo_keyed_t *ex, keyed_key_t *k, keyed_task_t *t)
{
    bool was_idle = k->pending == 0;
    t->next = NULL;
    if (k->tail != NULL)
        k->tail->next = t;
    else
        k->head = t;
    k->tail = t;
    k->pending++;
    ex->pending++;
    if (was_idle) {
        ready_push(ex, k);
        if (ex->workers_idle > 0)
            pthread_cond_signal(&ex->work_cond);
    }
}

/* Accept a task like tmpl under key, or return the reason not to. For a
 * submit, ft is the caller's block (its future is initialised only when the
 * task is accepted); for a post, ft is NULL and the block comes from the
 * cache. */
static int enqueue(ordo_keyed_t *ex, const void *key, size_t len, const keyed_task_t *tmpl,
                   keyed_ftask_t *ft, int64_t timeout_ms)
{
    uint64_t hash = ordo_htab_hash(&ex->keys, key, len);
    pthread_mutex_lock(&ex->mu);
    int rc = wait_for_room(ex, hash, key, len, timeout_ms);
    if (rc != ORDO_OK)
        goto out;
    keyed_key_t *k = key_get(ex, hash, key, len);
    if (k == NULL) {
        rc = ORDO_ENOMEM;
        goto out;
    }
    keyed_task_t *t = ft != NULL ? &ft->task : task_alloc(ex);
    if (t == NULL) {
        rc = ORDO_ENOMEM;
        goto fail_task;
    }
    *t = *tmpl;
    if (ft != NULL && ordo__future_init(&ft->future, ftask_free) != ORDO_OK) {
        rc = ORDO_ESYS;
        goto fail_task;
    }
    key_append(ex, k, t);
out:
    pthread_mutex_unlock(&ex->mu);
    return rc;

fail_task:
    if (k->pending == 0)
        key_discard(ex, k);
    pthread_mutex_unlock(&ex->mu);
    return rc;
}

static int check_args(const ordo_keyed_t *ex, const void *key, size_t key_len, ordo_keyed_fn fn)
{
    if (ex == NULL || fn == NULL || (key == NULL && key_len > 0))
        return ORDO_EINVAL;
    if (key_len > ex->opts.key_len_max)
        return ORDO_EINVAL;
    return ORDO_OK;
}

int ordo_keyed_submit(ordo_keyed_t *ex, const void *key, size_t key_len, ordo_keyed_fn fn,
                      void *arg, int64_t timeout_ms, ordo_future_t **future_out)
{
    int rc = check_args(ex, key, key_len, fn);
    if (rc != ORDO_OK || future_out == NULL)
        return ORDO_EINVAL;
    keyed_ftask_t *ft = malloc(sizeof *ft);
    if (ft == NULL)
        return ORDO_ENOMEM;
    keyed_task_t tmpl = {.fn = fn, .cancel_fn = NULL, .arg = arg, .has_future = true};
    /* Once enqueue unlocks a worker may complete the future at any time;
     * the caller's reference keeps ft alive until it releases it. */
    rc = enqueue(ex, key, key_len, &tmpl, ft, timeout_ms);
    if (rc != ORDO_OK) {
        free(ft);
        return rc;
    }
    *future_out = &ft->future;
    return ORDO_OK;
}

int ordo_keyed_post(ordo_keyed_t *ex, const void *key, size_t key_len, ordo_keyed_fn fn,
                    ordo_keyed_cancel_fn cancel_fn, void *arg, int64_t timeout_ms)
{
    int rc = check_args(ex, key, key_len, fn);
    if (rc != ORDO_OK)
        return rc;
    keyed_task_t tmpl = {.fn = fn, .cancel_fn = cancel_fn, .arg = arg, .has_future = false};
    return enqueue(ex, key, key_len, &tmpl, NULL, timeout_ms);
}

/* ---- workers ------------------------------------------------------------- */

/* Run t (already detached from k) and complete it. mu not held. Returns 1 if
 * it was a post whose handler failed, else 0. A submit's t is gone on return;
 * a post's is left for the caller to recycle. */
static int task_run(keyed_task_t *t, const keyed_key_t *k)
{
    void *result = NULL;
    int rc = t->fn(t->arg, k->bytes, k->len, &result);
    if (t->has_future) {
        ordo__future_complete(task_future(t), rc == 0 ? ORDO_OK : ORDO_EHANDLER, result);
        return 0;
    }
    return rc != 0;
}

/* Complete t (already detached) as cancelled. mu not held. t is gone. */
static void task_cancel(keyed_task_t *t, const keyed_key_t *k)
{
    if (t->has_future) {
        ordo__future_complete(task_future(t), ORDO_ECANCELED, NULL);
        return;
    }
    if (t->cancel_fn != NULL)
        t->cancel_fn(t->arg, k->bytes, k->len);
    free(t);
}

/* Run the head task of running key k. Called and returns with mu held. */
static void key_run_one(ordo_keyed_t *ex, keyed_key_t *k)
{
    keyed_task_t *t = k->head;
    k->head = t->next;
    if (k->head == NULL)
        k->tail = NULL;
    bool is_post = !t->has_future;
    pthread_mutex_unlock(&ex->mu);
    int failed = task_run(t, k);
    pthread_mutex_lock(&ex->mu);
    if (is_post)
        task_recycle(ex, t);
    ex->post_failures += (uint64_t)failed;
    tasks_done(ex, k, 1);
}

/* Cancel every queued task of running key k, in order. mu held on entry and
 * return. */
static void key_cancel_all(ordo_keyed_t *ex, keyed_key_t *k)
{
    keyed_task_t *t = k->head;
    k->head = k->tail = NULL;
    pthread_mutex_unlock(&ex->mu);
    size_t n = 0;
    while (t != NULL) {
        keyed_task_t *next = t->next;
        task_cancel(t, k);
        t = next;
        n++;
    }
    pthread_mutex_lock(&ex->mu);
    tasks_done(ex, k, n);
}

/* After a turn: requeue k at the tail of ready, or free it if idle. mu held. */
static void key_release(ordo_keyed_t *ex, keyed_key_t *k)
{
    k->running = false;
    if (k->head != NULL) {
        ready_push(ex, k);
        return;
    }
    key_discard(ex, k);
}

/* Next ready key, waiting for one; NULL when stopping with none left. */
static keyed_key_t *next_key(ordo_keyed_t *ex)
{
    for (;;) {
        keyed_key_t *k = ready_pop(ex);
        if (k != NULL)
            return k;
        if (ex->stopping)
            return NULL;
        ex->workers_idle++;
        pthread_cond_wait(&ex->work_cond, &ex->mu);
        ex->workers_idle--;
    }
}

static void *worker_main(void *p)
{
    ordo_keyed_t *ex = p;
    pthread_mutex_lock(&ex->mu);
    keyed_key_t *k;
    while ((k = next_key(ex)) != NULL) {
        assert(!k->running && k->head != NULL);
        k->running = true;
        if (ex->cancel)
            key_cancel_all(ex, k);
        else
            key_run_one(ex, k);
        key_release(ex, k);
    }
    pthread_mutex_unlock(&ex->mu);
    return NULL;
}

/* ---- stopping ------------------------------------------------------------ */

int ordo_keyed_stop(ordo_keyed_t *ex, int mode)
{
    if (ex == NULL || (mode != ORDO_KEYED_DRAIN && mode != ORDO_KEYED_CANCEL))
        return ORDO_EINVAL;
    pthread_mutex_lock(&ex->mu);
    if (on_worker(ex)) {
        pthread_mutex_unlock(&ex->mu);
        return ORDO_EBUSY;
    }
    ex->stopping = true;
    if (mode == ORDO_KEYED_CANCEL)
        ex->cancel = true;
    pthread_cond_broadcast(&ex->work_cond);
    pthread_cond_broadcast(&ex->space_cond);
    if (ex->joining) {
        while (!ex->joined)
            pthread_cond_wait(&ex->stop_cond, &ex->mu);
        pthread_mutex_unlock(&ex->mu);
        return ORDO_OK;
    }
    ex->joining = true;
    pthread_mutex_unlock(&ex->mu);
    /* Only this caller joins; nthreads and threads no longer change. */
    for (unsigned i = 0; i < ex->nthreads; i++)
        pthread_join(ex->threads[i], NULL);
    pthread_mutex_lock(&ex->mu);
    assert(ex->pending == 0 && ex->keys.count == 0 && ex->ready_head == NULL);
    ex->joined = true;
    pthread_cond_broadcast(&ex->stop_cond);
    pthread_mutex_unlock(&ex->mu);
    return ORDO_OK;
}

void ordo_keyed_stats(ordo_keyed_t *ex, ordo_keyed_stats_t *out)
{
    pthread_mutex_lock(&ex->mu);
    out->pending = ex->pending;
    out->keys_active = ex->keys.count;
    out->producers_waiting = ex->producers_waiting;
    out->post_failures = ex->post_failures;
    out->stopping = ex->stopping;
    out->cancelling = ex->cancel;
    pthread_mutex_unlock(&ex->mu);
}

void ordo_keyed_destroy(ordo_keyed_t *ex)
{
    if (ex == NULL)
        return;
    if (ordo_keyed_stop(ex, ORDO_KEYED_DRAIN) != ORDO_OK)
        abort(); /* called on a worker: it would join itself */
    pthread_cond_destroy(&ex->stop_cond);
    pthread_cond_destroy(&ex->space_cond);
    pthread_cond_destroy(&ex->work_cond);
    pthread_mutex_destroy(&ex->mu);
    ordo_htab_destroy(&ex->keys);
    while (ex->task_cache != NULL) {
        keyed_task_t *t = ex->task_cache;
        ex->task_cache = t->next;
        free(t);
    }
    while (ex->key_cache != NULL) {
        keyed_key_t *k = ex->key_cache;
        ex->key_cache = k->next;
        free(k);
    }
    free(ex->threads);
    free(ex);
}
