/*
 * bench_suq.c -- hand-offs per second through the singular update queue
 * against a textbook mutex + condition variable queue.
 *
 * The textbook queue: producer lock, push, signal, unlock; consumer lock,
 * wait while empty, pop one, unlock. It stores item pointers in an array
 * allocated before the round and large enough for all of it, as the suq
 * stores them in its ring allocated at create: neither allocates per item.
 * Both are run in two variants that differ only in what the producers do:
 *   ptr     hand off preallocated items (nothing is allocated while timing:
 *           this measures the hand-off itself);
 *   malloc  each item is malloc'd by its producer and freed by the consumer
 *           (glibc's malloc/free then weighs on both).
 * Both consumers do the same trivial work: count the item. The suq gets a
 * capacity large enough that a round rarely blocks, as the textbook queue
 * never does.
 *
 * A round: P producer threads wait on a barrier with the timing thread,
 * push ITEMS/P items each, and the round ends when the consumer has counted
 * all of them. Rounds of the two queues alternate so that noise from other
 * processes falls on both. Printed: median, min and max over ROUNDS rounds,
 * in millions of hand-offs per second. The last line is the 1-producer
 * ratio of medians in the ptr variant, "suq/mutex ratio: X".
 */
#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ordo/suq.h"
#include "lib/sync.h"

#define BENCH_ITEMS 1000000    /* per round; ~10-100 ms per round */
#define BENCH_ROUNDS 7
#define BENCH_PRODUCERS_MAX 2
#define BENCH_SUQ_CAPACITY (1u << 16)

enum { VARIANT_PTR, VARIANT_MALLOC, VARIANTS };
static const char *const variant_name[VARIANTS] = {"ptr", "malloc"};

typedef struct {
    uint64_t payload[2];
} bench_item_t;

typedef struct {
    pthread_barrier_t start;
    int variant;
    uint64_t per_producer;
    void *queue;                              /* ordo_suq_t or mutex_queue_t */
    bench_item_t *items[BENCH_PRODUCERS_MAX]; /* ptr variant: per producer */
    int next_producer;                        /* guarded by mu */
    pthread_mutex_t mu;
} round_t;

/* The producer's preallocated items, or NULL in the malloc variant. */
static bench_item_t *round_items(round_t *r)
{
    pthread_mutex_lock(&r->mu);
    bench_item_t *items = r->items[r->next_producer++];
    pthread_mutex_unlock(&r->mu);
    return items;
}

static void *item_make(bench_item_t *items, uint64_t i)
{
    if (items != NULL)
        return &items[i];
    bench_item_t *it = malloc(sizeof *it);
    assert(it != NULL);
    it->payload[0] = i;
    return it;
}

/* ---- the textbook queue -------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t nonempty;
    void **array;               /* holds every item of the round */
    size_t head, tail;          /* guarded by mu */
    int variant;
    uint64_t expect;            /* items the consumer takes before it exits */
    uint64_t consumed;          /* consumer-owned */
} mutex_queue_t;

static void mq_push(mutex_queue_t *q, void *item)
{
    pthread_mutex_lock(&q->mu);
    q->array[q->tail++] = item;
    pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->mu);
}

static void *mq_pop(mutex_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->head == q->tail)
        pthread_cond_wait(&q->nonempty, &q->mu);
    void *item = q->array[q->head++];
    pthread_mutex_unlock(&q->mu);
    return item;
}

static void *mq_consumer(void *arg)
{
    mutex_queue_t *q = arg;
    while (q->consumed < q->expect) {
        void *item = mq_pop(q);
        if (q->variant == VARIANT_MALLOC)
            free(item);
        q->consumed++;
    }
    return NULL;
}

static void *mq_producer(void *arg)
{
    round_t *r = arg;
    bench_item_t *items = round_items(r);
    pthread_barrier_wait(&r->start);
    for (uint64_t i = 0; i < r->per_producer; i++)
        mq_push(r->queue, item_make(items, i));
    return NULL;
}

/* ---- the suq ------------------------------------------------------------- */

typedef struct {
    int variant;
    uint64_t consumed;          /* worker-owned */
} suq_ctx_t;

static int suq_count(void *ctx, void *item, void **result_out)
{
    suq_ctx_t *c = ctx;
    (void)result_out;
    if (c->variant == VARIANT_MALLOC)
        free(item);
    c->consumed++;
    return 0;
}

static void suq_drop(void *ctx, void *item)
{
    suq_ctx_t *c = ctx;
    if (c->variant == VARIANT_MALLOC)
        free(item);
}

static void *suq_producer(void *arg)
{
    round_t *r = arg;
    bench_item_t *items = round_items(r);
    pthread_barrier_wait(&r->start);
    for (uint64_t i = 0; i < r->per_producer; i++) {
        int rc = ordo_suq_post(r->queue, item_make(items, i), ORDO_WAIT_FOREVER);
        assert(rc == ORDO_OK);
        (void)rc;
    }
    return NULL;
}

/* ---- rounds -------------------------------------------------------------- */

static void round_init(round_t *r, int variant, int producers, void *queue)
{
    r->variant = variant;
    r->per_producer = BENCH_ITEMS / (uint64_t)producers;
    r->queue = queue;
    r->next_producer = 0;
    pthread_mutex_init(&r->mu, NULL);
    for (int i = 0; i < producers; i++) {
        r->items[i] = NULL;
        if (variant == VARIANT_PTR) {
            /* Touched here, so no page fault lands inside the round. */
            r->items[i] = malloc(r->per_producer * sizeof(bench_item_t));
            assert(r->items[i] != NULL);
            memset(r->items[i], 0, r->per_producer * sizeof(bench_item_t));
        }
    }
    pthread_barrier_init(&r->start, NULL, (unsigned)producers + 1);
}

static void round_fini(round_t *r, int producers)
{
    for (int i = 0; i < producers; i++)
        free(r->items[i]);
    pthread_barrier_destroy(&r->start);
    pthread_mutex_destroy(&r->mu);
}

/* Start producers, release them together, join them; returns the start
 * time. The caller stops its clock when its consumer has counted all. */
static uint64_t round_run(round_t *r, int producers, void *(*fn)(void *))
{
    pthread_t threads[BENCH_PRODUCERS_MAX];
    for (int i = 0; i < producers; i++)
        pthread_create(&threads[i], NULL, fn, r);
    /* Producers cannot start before this thread reaches the barrier, and
     * this thread may be descheduled right after it: time from here. */
    uint64_t t0 = ordo_now_ns();
    pthread_barrier_wait(&r->start);
    for (int i = 0; i < producers; i++)
        pthread_join(threads[i], NULL);
    return t0;
}

/* Returns millions of hand-offs per second. */
static double round_mutex(int variant, int producers)
{
    mutex_queue_t q = {.head = 0, .tail = 0, .variant = variant, .consumed = 0};
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.nonempty, NULL);
    q.array = malloc(BENCH_ITEMS * sizeof *q.array);
    assert(q.array != NULL);
    memset(q.array, 0, BENCH_ITEMS * sizeof *q.array);
    round_t r;
    round_init(&r, variant, producers, &q);
    q.expect = r.per_producer * (uint64_t)producers;
    pthread_t consumer;
    pthread_create(&consumer, NULL, mq_consumer, &q);
    uint64_t t0 = round_run(&r, producers, mq_producer);
    pthread_join(consumer, NULL);
    uint64_t t1 = ordo_now_ns();
    assert(q.consumed == q.expect);
    round_fini(&r, producers);
    free(q.array);
    pthread_cond_destroy(&q.nonempty);
    pthread_mutex_destroy(&q.mu);
    return (double)q.consumed * 1e3 / (double)(t1 - t0);
}

static double round_suq(int variant, int producers)
{
    suq_ctx_t ctx = {.variant = variant, .consumed = 0};
    ordo_suq_options_t opts = {
        .handler = suq_count,
        .cancel_fn = suq_drop,
        .ctx = &ctx,
        .capacity = BENCH_SUQ_CAPACITY,
    };
    ordo_suq_t *q;
    int rc = ordo_suq_create(&opts, &q);
    assert(rc == ORDO_OK);
    (void)rc;
    round_t r;
    round_init(&r, variant, producers, q);
    uint64_t t0 = round_run(&r, producers, suq_producer);
    ordo_suq_stop(q, ORDO_SUQ_DRAIN); /* returns once all are applied */
    uint64_t t1 = ordo_now_ns();
    uint64_t expect = r.per_producer * (uint64_t)producers;
    assert(ctx.consumed == expect);
    round_fini(&r, producers);
    ordo_suq_destroy(q);
    return (double)expect * 1e3 / (double)(t1 - t0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double report(const char *queue, int variant, int producers, double *v)
{
    qsort(v, BENCH_ROUNDS, sizeof *v, cmp_double);
    double median = v[BENCH_ROUNDS / 2];
    printf("%-5s %-6s %d producer%s: median %7.2f Mhandoffs/s  (min %.2f, max %.2f)\n", queue,
           variant_name[variant], producers, producers > 1 ? "s" : " ", median, v[0],
           v[BENCH_ROUNDS - 1]);
    return median;
}

int main(void)
{
    double suq[BENCH_ROUNDS], mtx[BENCH_ROUNDS];
    double ratio[VARIANTS][BENCH_PRODUCERS_MAX + 1];
    printf("bench_suq: %d items/round, %d rounds, median (min, max); suq capacity %u\n",
           BENCH_ITEMS, BENCH_ROUNDS, BENCH_SUQ_CAPACITY);
    for (int v = VARIANTS - 1; v >= 0; v--) {
        for (int p = 1; p <= BENCH_PRODUCERS_MAX; p++) {
            for (int i = 0; i < BENCH_ROUNDS; i++) {
                suq[i] = round_suq(v, p);
                mtx[i] = round_mutex(v, p);
            }
            double s = report("suq", v, p, suq);
            double m = report("mutex", v, p, mtx);
            ratio[v][p] = s / m;
        }
    }
    for (int v = VARIANTS - 1; v >= 0; v--)
        for (int p = 1; p <= BENCH_PRODUCERS_MAX; p++)
            printf("suq/mutex ratio (%s, %d producer%s): %.2f\n", variant_name[v], p,
                   p > 1 ? "s" : "", ratio[v][p]);
    printf("suq/mutex ratio: %.2f\n", ratio[VARIANT_PTR][1]);
    return 0;
}
