/*
 * suq.c -- the singular update queue (ordo/suq.h): many producers, one
 * worker, submission order, bounded, drain-or-cancel stop.
 *
 * Structure. Producers push nodes on a lock-free LIFO list (`head`, a
 * Treiber stack that is only ever pushed to or swapped out whole). The
 * worker takes the whole list with one atomic exchange, reverses it into
 * submission order and applies it. Because nothing ever pops a single node,
 * the push CAS has no ABA problem: if it succeeds, node->next is the head.
 * Each item costs a producer one malloc, one CAS on `count` and one CAS on
 * `head`; the worker pays one exchange per list and one subtraction per
 * batch. No lock and no system call on either side while both are busy.
 *
 * The counter. `count` holds the number of items accepted and not yet
 * finished (applied or cancelled), plus SUQ_STOP_BIT once a stop started.
 * A producer reserves a slot by CAS-incrementing it, only while it is below
 * capacity and the stop bit is clear, and pushes its node afterwards; the
 * worker subtracts a batch once the batch is finished. Hence:
 *   Invariant: (count & ~SUQ_STOP_BIT) <= capacity, and it is >= the number
 *   of nodes on `head` plus those the worker holds.
 *   Invariant: once the stop bit is set, count never grows again, so when
 *   the worker sees count == SUQ_STOP_BIT every accepted item has been
 *   finished and no producer can add one: it may exit.
 *
 * Sleeping. The slow paths use one mutex and three condition variables.
 * The worker spins briefly on an empty list, then sets `worker_sleeping`
 * and rechecks the list under `mu` before waiting on `work_cv`; a producer
 * signals only if it reads `worker_sleeping` set after its push. Push and
 * flag read, flag write and list recheck are all seq_cst, so at least one
 * side sees the other (Dekker): no lost wake-up, and no system call per push
 * while the worker is awake. Producers blocked on a full queue count
 * themselves in `full_waiters` (under `mu`) before their last recheck of
 * `count`; the worker broadcasts `space_cv` after a subtraction only if it
 * sees a waiter, by the same argument. A stop sets the stop bit and then
 * broadcasts both conditions under `mu`, so every sleeper re-evaluates.
 */
#include "ordo/suq.h"

#include <assert.h>
#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "future_impl.h"
#include "sync.h"

#define SUQ_STOP_BIT ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* The worker's polling. Each poll of `head` pulls its cache line away from
 * the producers, so the worker polls with growing pauses in between (from
 * SUQ_BACKOFF_MIN to SUQ_BACKOFF_MAX pause instructions, about 0.1 ms in
 * all on current x86) before it sleeps, and after a short list (fewer than
 * SUQ_GATHER_MIN items) it pauses SUQ_BACKOFF_MIN before taking the next
 * one, so that under load lists arrive long and the line moves once per
 * list, not once per item. */
#define SUQ_BACKOFF_MIN 32u
#define SUQ_BACKOFF_MAX 2048u
#define SUQ_GATHER_MIN 32u

#define SUQ_CACHE_LINE 64

/* A node (ordo/suq.h) is one of three kinds:
 * submitted (future set, freed with the future), posted (malloc'd here,
 * freed here) or the caller's (post_node: never freed here). */
typedef ordo_suq_node_t suq_node_t;

/* A submitted item: node and future in one allocation, freed when the
 * future's last reference goes (future_impl.h). */
typedef struct {
    suq_node_t node;
    ordo_future_t future;
} suq_fnode_t;

enum { SUQ_RUNNING, SUQ_STOPPING, SUQ_JOINED };

struct ordo_suq_s {
    /* Written by every push and taken by the worker once per list. */
    alignas(SUQ_CACHE_LINE) _Atomic(suq_node_t *) head;
    /* Written by every reserve and by the worker once per batch. */
    alignas(SUQ_CACHE_LINE) atomic_size_t count;
    /* Read by every push; written only around sleeps and stops. */
    alignas(SUQ_CACHE_LINE) atomic_int worker_sleeping;
    atomic_int full_waiters;
    atomic_int cancel;
    atomic_int stopping;     /* set after the stop bit, for the worker's polls */
    /* Worker-owned: the current list in submission order. */
    suq_node_t **order;
    size_t order_cap;
    /* Read-only after create. */
    alignas(SUQ_CACHE_LINE) ordo_suq_handler_fn handler;
    ordo_suq_cancel_fn cancel_fn;
    ordo_suq_batch_fn batch_fn;
    void *ctx;
    size_t capacity;
    size_t batch_max;
    pthread_t thread;       /* written under mu before the worker runs */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* the worker waits for items or a stop */
    pthread_cond_t space_cv; /* producers wait for capacity or a stop */
    pthread_cond_t stop_cv;  /* late stop callers wait for the join */
    int stop_state;          /* SUQ_*; guarded by mu */
};

static inline void suq_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---- producer side ------------------------------------------------------ */

/* Take one unit of capacity. Returns ORDO_OK, ORDO_EFULL or ORDO_ESTOPPED. */
static int suq_try_reserve(ordo_suq_t *q)
{
    size_t c = atomic_load_explicit(&q->count, memory_order_seq_cst);
    for (;;) {
        if (c & SUQ_STOP_BIT)
            return ORDO_ESTOPPED;
        if (c >= q->capacity)
            return ORDO_EFULL;
        if (atomic_compare_exchange_weak_explicit(&q->count, &c, c + 1, memory_order_seq_cst,
                                                  memory_order_seq_cst))
            return ORDO_OK;
    }
}

/* The slow path: wait on space_cv until a slot frees, the deadline passes
 * (ORDO_ETIMEDOUT) or a stop starts (ORDO_ESTOPPED). */
static int suq_wait_slot(ordo_suq_t *q, uint64_t deadline_ns)
{
    int rc;
    pthread_mutex_lock(&q->mu);
    atomic_fetch_add_explicit(&q->full_waiters, 1, memory_order_seq_cst);
    while ((rc = suq_try_reserve(q)) == ORDO_EFULL) {
        if (ordo_cond_wait_until(&q->space_cv, &q->mu, deadline_ns) == ETIMEDOUT) {
            rc = suq_try_reserve(q);
            if (rc == ORDO_EFULL)
                rc = ORDO_ETIMEDOUT;
            break;
        }
    }
    atomic_fetch_sub_explicit(&q->full_waiters, 1, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static int suq_reserve(ordo_suq_t *q, int64_t timeout_ms)
{
    int rc = suq_try_reserve(q);
    if (rc != ORDO_EFULL || timeout_ms == 0)
        return rc;
    return suq_wait_slot(q, ordo_deadline_ns(timeout_ms));
}

static void suq_wake_worker(ordo_suq_t *q)
{
    pthread_mutex_lock(&q->mu);
    pthread_cond_signal(&q->work_cv);
    pthread_mutex_unlock(&q->mu);
}

/* Publish a node whose slot is reserved. The CAS releases node's fields to
 * the worker's acquiring exchange. */
static void suq_push(ordo_suq_t *q, suq_node_t *node)
{
    suq_node_t *head = atomic_load_explicit(&q->head, memory_order_relaxed);
    do {
        node->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&q->head, &head, node, memory_order_seq_cst,
                                                    memory_order_relaxed));
    /* Only the producer that clears the flag signals: while the worker is
     * waking up, the others push without touching the mutex. */
    if (atomic_load_explicit(&q->worker_sleeping, memory_order_seq_cst) &&
        atomic_exchange_explicit(&q->worker_sleeping, 0, memory_order_seq_cst))
        suq_wake_worker(q);
}

static int suq_enqueue(ordo_suq_t *q, suq_node_t *node, int64_t timeout_ms)
{
    int rc = suq_reserve(q, timeout_ms);
    if (rc != ORDO_OK)
        return rc;
    suq_push(q, node);
    return ORDO_OK;
}

static void suq_fnode_free(ordo_future_t *f)
{
    free((char *)f - offsetof(suq_fnode_t, future));
}

int ordo_suq_submit(ordo_suq_t *q, void *item, int64_t timeout_ms, ordo_future_t **future_out)
{
    if (future_out == NULL)
        return ORDO_EINVAL;
    *future_out = NULL;
    if (q == NULL)
        return ORDO_EINVAL;
    suq_fnode_t *fn = malloc(sizeof *fn);
    if (fn == NULL)
        return ORDO_ENOMEM;
    if (ordo__future_init(&fn->future, suq_fnode_free) != ORDO_OK) {
        free(fn);
        return ORDO_ESYS;
    }
    fn->node.item = item;
    fn->node.future = &fn->future;
    fn->node.owned = 0;
    int rc = suq_enqueue(q, &fn->node, timeout_ms);
    if (rc != ORDO_OK) {
        /* Never published: drop both references (queue's and caller's);
         * the second frees the block. */
        ordo_future_release(&fn->future);
        ordo_future_release(&fn->future);
        return rc;
    }
    *future_out = &fn->future;
    return ORDO_OK;
}

int ordo_suq_post(ordo_suq_t *q, void *item, int64_t timeout_ms)
{
    if (q == NULL || q->cancel_fn == NULL)
        return ORDO_EINVAL;
    suq_node_t *node = malloc(sizeof *node);
    if (node == NULL)
        return ORDO_ENOMEM;
    node->item = item;
    node->future = NULL;
    node->owned = 1;
    int rc = suq_enqueue(q, node, timeout_ms);
    if (rc != ORDO_OK)
        free(node);
    return rc;
}

int ordo_suq_post_node(ordo_suq_t *q, ordo_suq_node_t *node, void *item, int64_t timeout_ms)
{
    if (q == NULL || node == NULL || q->cancel_fn == NULL)
        return ORDO_EINVAL;
    node->item = item;
    node->future = NULL;
    node->owned = 0;
    return suq_enqueue(q, node, timeout_ms);
}

/* ---- worker side -------------------------------------------------------- */

/* The list comes newest first; return it oldest first. */
static suq_node_t *suq_reverse(suq_node_t *list)
{
    suq_node_t *out = NULL;
    while (list != NULL) {
        suq_node_t *next = list->next;
        list->next = out;
        out = list;
        list = next;
    }
    return out;
}

/* Apply or cancel one node, complete its future, free what the queue owns.
 * The node must not be touched afterwards: completing the future may free
 * it. */
static void suq_finish(ordo_suq_t *q, suq_node_t *node)
{
    void *item = node->item;
    ordo_future_t *f = node->future;
    if (node->owned)
        free(node);
    if (atomic_load_explicit(&q->cancel, memory_order_relaxed)) {
        if (q->cancel_fn != NULL)
            q->cancel_fn(q->ctx, item);
        if (f != NULL)
            ordo__future_complete(f, ORDO_ECANCELED, NULL);
        return;
    }
    void *result = NULL;
    int rc = q->handler(q->ctx, item, &result);
    if (f != NULL)
        ordo__future_complete(f, rc == 0 ? ORDO_OK : ORDO_EHANDLER, result);
}

/* Give n finished items' capacity back and wake blocked producers, if any. */
static void suq_release(ordo_suq_t *q, size_t n)
{
    size_t before = atomic_fetch_sub_explicit(&q->count, n, memory_order_seq_cst);
    assert((before & ~SUQ_STOP_BIT) >= n);
    (void)before;
    if (atomic_load_explicit(&q->full_waiters, memory_order_seq_cst) > 0) {
        pthread_mutex_lock(&q->mu);
        pthread_cond_broadcast(&q->space_cv);
        pthread_mutex_unlock(&q->mu);
    }
}

/* Finish n nodes in order, batch_max at a time. */
static void suq_run(ordo_suq_t *q, suq_node_t *const *nodes, size_t n_nodes)
{
    for (size_t done = 0; done < n_nodes;) {
        size_t n = n_nodes - done < q->batch_max ? n_nodes - done : q->batch_max;
        for (size_t i = 0; i < n; i++)
            suq_finish(q, nodes[done + i]);
        if (q->batch_fn != NULL)
            q->batch_fn(q->ctx, n);
        suq_release(q, n);
        done += n;
    }
}

/* Make room for n pointers in the worker's order array. */
static bool suq_order_reserve(ordo_suq_t *q, size_t n)
{
    if (n <= q->order_cap)
        return true;
    size_t cap = q->order_cap ? q->order_cap : 64;
    while (cap < n)
        cap *= 2;
    suq_node_t **order = realloc(q->order, cap * sizeof *order);
    if (order == NULL)
        return false;
    q->order = order;
    q->order_cap = cap;
    return true;
}

/* Finish a list taken from `head` (newest first) in submission order.
 * The list is walked once into the order array and finished from its end,
 * so the worker only reads the producers' nodes: writing them (reversing in
 * place) would pull each line back and forth once more. Without memory for
 * the array it reverses in place. Returns the list's length. */
static size_t suq_take(ordo_suq_t *q, suq_node_t *list)
{
    size_t n = 0;
    for (suq_node_t *p = list; p != NULL; p = p->next)
        n++;
    if (!suq_order_reserve(q, n)) {
        suq_node_t *rev = suq_reverse(list);
        for (size_t i = 0; rev != NULL; i++) {
            suq_node_t *next = rev->next;
            suq_run(q, &rev, 1);
            rev = next;
        }
        return n;
    }
    size_t i = n;
    for (suq_node_t *p = list; p != NULL; p = p->next)
        q->order[--i] = p;
    assert(i == 0);
    suq_run(q, q->order, n);
    return n;
}

static bool suq_has_work(ordo_suq_t *q)
{
    return atomic_load_explicit(&q->head, memory_order_seq_cst) != NULL ||
           (atomic_load_explicit(&q->stopping, memory_order_seq_cst) &&
            atomic_load_explicit(&q->count, memory_order_seq_cst) == SUQ_STOP_BIT);
}

static void suq_pause(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        suq_cpu_relax();
}

/* Wait until there is a list to take or the worker may exit. */
static void suq_idle(ordo_suq_t *q)
{
    for (unsigned spins = SUQ_BACKOFF_MIN; spins <= SUQ_BACKOFF_MAX; spins *= 2) {
        suq_pause(spins);
        if (suq_has_work(q))
            return;
    }
    pthread_mutex_lock(&q->mu);
    for (;;) {
        /* Set before every check: a producer may have cleared it. */
        atomic_store_explicit(&q->worker_sleeping, 1, memory_order_seq_cst);
        if (suq_has_work(q))
            break;
        pthread_cond_wait(&q->work_cv, &q->mu);
    }
    atomic_store_explicit(&q->worker_sleeping, 0, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
}

static void *suq_worker(void *arg)
{
    ordo_suq_t *q = arg;
    /* Pairs with create, which sets q->thread under mu. */
    pthread_mutex_lock(&q->mu);
    pthread_mutex_unlock(&q->mu);
    for (;;) {
        suq_node_t *list = atomic_exchange_explicit(&q->head, NULL, memory_order_acquire);
        if (list != NULL) {
            if (suq_take(q, list) < SUQ_GATHER_MIN)
                suq_pause(SUQ_BACKOFF_MIN);
            continue;
        }
        if (atomic_load_explicit(&q->count, memory_order_acquire) == SUQ_STOP_BIT)
            return NULL;
        suq_idle(q);
    }
}

/* ---- life cycle --------------------------------------------------------- */

static void suq_init_fields(ordo_suq_t *q, const ordo_suq_options_t *opts)
{
    atomic_init(&q->head, NULL);
    atomic_init(&q->count, 0);
    atomic_init(&q->worker_sleeping, 0);
    atomic_init(&q->full_waiters, 0);
    atomic_init(&q->cancel, 0);
    atomic_init(&q->stopping, 0);
    q->order = NULL;
    q->order_cap = 0;
    q->handler = opts->handler;
    q->cancel_fn = opts->cancel_fn;
    q->batch_fn = opts->batch_fn;
    q->ctx = opts->ctx;
    q->capacity = opts->capacity ? opts->capacity : ORDO_SUQ_CAPACITY_DEFAULT;
    q->batch_max = opts->batch_max ? opts->batch_max : ORDO_SUQ_BATCH_MAX_DEFAULT;
    q->stop_state = SUQ_RUNNING;
}

int ordo_suq_create(const ordo_suq_options_t *opts, ordo_suq_t **q_out)
{
    if (q_out == NULL || opts == NULL || opts->handler == NULL ||
        opts->capacity > ORDO_SUQ_CAPACITY_MAX)
        return ORDO_EINVAL;
    ordo_suq_t *q = aligned_alloc(alignof(ordo_suq_t), sizeof *q);
    if (q == NULL)
        return ORDO_ENOMEM;
    suq_init_fields(q, opts);
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto fail_mu;
    if (ordo_cond_init(&q->work_cv) != 0)
        goto fail_work_cv;
    if (ordo_cond_init(&q->space_cv) != 0)
        goto fail_space_cv;
    if (ordo_cond_init(&q->stop_cv) != 0)
        goto fail_stop_cv;
    pthread_mutex_lock(&q->mu);
    int rc = pthread_create(&q->thread, NULL, suq_worker, q);
    pthread_mutex_unlock(&q->mu);
    if (rc != 0)
        goto fail_thread;
    *q_out = q;
    return ORDO_OK;

fail_thread:
    pthread_cond_destroy(&q->stop_cv);
fail_stop_cv:
    pthread_cond_destroy(&q->space_cv);
fail_space_cv:
    pthread_cond_destroy(&q->work_cv);
fail_work_cv:
    pthread_mutex_destroy(&q->mu);
fail_mu:
    free(q);
    return ORDO_ESYS;
}

/* A later stop: upgrade to cancel if asked, wait for the first to join. */
static int suq_stop_late(ordo_suq_t *q, ordo_suq_stop_mode_t mode)
{
    if (mode == ORDO_SUQ_CANCEL)
        atomic_store_explicit(&q->cancel, 1, memory_order_seq_cst);
    while (q->stop_state != SUQ_JOINED)
        pthread_cond_wait(&q->stop_cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
    return ORDO_ESTOPPED;
}

int ordo_suq_stop(ordo_suq_t *q, ordo_suq_stop_mode_t mode)
{
    if (q == NULL || (mode != ORDO_SUQ_DRAIN && mode != ORDO_SUQ_CANCEL))
        return ORDO_EINVAL;
    pthread_mutex_lock(&q->mu);
    /* Only while the worker lives: a joined thread's id may be reused. */
    if (q->stop_state != SUQ_JOINED && pthread_equal(pthread_self(), q->thread)) {
        pthread_mutex_unlock(&q->mu);
        return ORDO_EBUSY;
    }
    if (q->stop_state != SUQ_RUNNING)
        return suq_stop_late(q, mode);
    q->stop_state = SUQ_STOPPING;
    if (mode == ORDO_SUQ_CANCEL)
        atomic_store_explicit(&q->cancel, 1, memory_order_seq_cst);
    atomic_fetch_or_explicit(&q->count, SUQ_STOP_BIT, memory_order_seq_cst);
    atomic_store_explicit(&q->stopping, 1, memory_order_seq_cst);
    pthread_cond_broadcast(&q->work_cv);
    pthread_cond_broadcast(&q->space_cv);
    pthread_mutex_unlock(&q->mu);

    pthread_join(q->thread, NULL);

    pthread_mutex_lock(&q->mu);
    assert(atomic_load(&q->count) == SUQ_STOP_BIT);
    assert(atomic_load(&q->head) == NULL);
    q->stop_state = SUQ_JOINED;
    pthread_cond_broadcast(&q->stop_cv);
    pthread_mutex_unlock(&q->mu);
    return ORDO_OK;
}

void ordo_suq_destroy(ordo_suq_t *q)
{
    if (q == NULL)
        return;
    pthread_mutex_lock(&q->mu);
    int state = q->stop_state;
    pthread_mutex_unlock(&q->mu);
    if (state == SUQ_RUNNING) {
        int rc = ordo_suq_stop(q, ORDO_SUQ_DRAIN);
        assert(rc == ORDO_OK); /* not on the worker thread */
        (void)rc;
    }
    assert(q->stop_state == SUQ_JOINED);
    pthread_cond_destroy(&q->stop_cv);
    pthread_cond_destroy(&q->space_cv);
    pthread_cond_destroy(&q->work_cv);
    pthread_mutex_destroy(&q->mu);
    free(q->order);
    free(q);
}
