/*
 * bench_keyed.c -- tasks per second through the keyed serial executor
 * against a baseline of "one mutex per key".
 *
 * The baseline is what people write first: a plain thread pool with one
 * shared mutex + condition-variable queue, where each task locks its key's
 * mutex while it runs. It gives per-key exclusion but NOT per-key order
 * (two workers can pick up tasks of one key and run them in either order),
 * and a hot key parks workers on its mutex. The executor gives both order
 * and exclusion.
 *
 * Both sides use the same worker count, producer count, bound on queued
 * tasks, key counts and key sequence; the task body is a counter increment.
 * A round times producers submitting TASKS tasks until every task has run
 * (executor: stop with drain; pool: workers exit on an empty, closed
 * queue). Creation of threads is outside the timing for the executor and
 * inside for the pool's workers, which is a few tens of microseconds.
 * Each configuration runs ROUNDS times; we print median, min and max.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ordo/keyed.h"
#include "lib/sync.h"

#define WORKERS 4
#define PRODUCERS 2
#define TASKS 200000   /* per round: big enough to dwarf start-up, small enough to keep < 20 s */
#define ROUNDS 5
#define QUEUE_MAX 65536 /* bound on queued tasks, both sides */

static const size_t key_counts[] = {16, 10000};

/* ---- workload --------------------------------------------------------------- */

typedef struct {
    size_t nkeys;
    uint64_t *counters;      /* one per key */
    pthread_mutex_t *locks;  /* baseline only */
} workload_t;

static uint32_t next_key(uint32_t *rnd, size_t nkeys)
{
    *rnd ^= *rnd << 13;
    *rnd ^= *rnd >> 17;
    *rnd ^= *rnd << 5;
    return *rnd % (uint32_t)nkeys;
}

/* ---- keyed executor ------------------------------------------------------------ */

typedef struct {
    ordo_keyed_t *ex;
    workload_t *w;
    int producer;
    int with_future;
} keyed_producer_t;

static int keyed_task(void *arg, const void *key, size_t len, void **result)
{
    (void)result, (void)len;
    workload_t *w = arg;
    uint32_t k;
    memcpy(&k, key, sizeof k);
    w->counters[k]++; /* the executor serialises this key */
    return 0;
}

static void *keyed_producer(void *p)
{
    keyed_producer_t *kp = p;
    uint32_t rnd = 2463534242u + (uint32_t)kp->producer;
    for (int i = 0; i < TASKS / PRODUCERS; i++) {
        uint32_t k = next_key(&rnd, kp->w->nkeys);
        int rc;
        if (kp->with_future) {
            ordo_future_t *f;
            rc = ordo_keyed_submit(kp->ex, &k, sizeof k, keyed_task, kp->w, ORDO_WAIT_FOREVER, &f);
            if (rc == ORDO_OK)
                ordo_future_release(f);
        } else {
            rc = ordo_keyed_post(kp->ex, &k, sizeof k, keyed_task, NULL, kp->w, ORDO_WAIT_FOREVER);
        }
        if (rc != ORDO_OK) {
            fprintf(stderr, "submit: %s\n", ordo_strerror(rc));
            exit(1);
        }
    }
    return NULL;
}

static double run_keyed(workload_t *w, int with_future)
{
    ordo_keyed_options_t o = {.workers = WORKERS, .pending_max = QUEUE_MAX,
                              .key_pending_max = QUEUE_MAX};
    ordo_keyed_t *ex;
    if (ordo_keyed_create(&o, &ex) != ORDO_OK) {
        fprintf(stderr, "create failed\n");
        exit(1);
    }
    keyed_producer_t kp[PRODUCERS];
    pthread_t th[PRODUCERS];
    uint64_t t0 = ordo_now_ns();
    for (int p = 0; p < PRODUCERS; p++) {
        kp[p] = (keyed_producer_t){ex, w, p, with_future};
        pthread_create(&th[p], NULL, keyed_producer, &kp[p]);
    }
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(th[p], NULL);
    ordo_keyed_stop(ex, ORDO_KEYED_DRAIN);
    uint64_t t1 = ordo_now_ns();
    ordo_keyed_destroy(ex);
    return (double)(TASKS / PRODUCERS * PRODUCERS) / ((double)(t1 - t0) / 1e9);
}

/* ---- baseline: shared queue + one mutex per key ------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    uint32_t *ring;
    size_t head, count;
    int closed;
    workload_t *w;
} pool_t;

typedef struct {
    pool_t *pool;
    int producer;
} pool_producer_t;

static void pool_push(pool_t *q, uint32_t k)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == QUEUE_MAX)
        pthread_cond_wait(&q->not_full, &q->mu);
    q->ring[(q->head + q->count) % QUEUE_MAX] = k;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

/* Returns 0 with *k set, or -1 when the queue is closed and empty. */
static int pool_pop(pool_t *q, uint32_t *k)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->mu);
    if (q->count == 0) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    *k = q->ring[q->head];
    q->head = (q->head + 1) % QUEUE_MAX;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

static void *pool_worker(void *p)
{
    pool_t *q = p;
    uint32_t k;
    while (pool_pop(q, &k) == 0) {
        pthread_mutex_lock(&q->w->locks[k]);
        q->w->counters[k]++;
        pthread_mutex_unlock(&q->w->locks[k]);
    }
    return NULL;
}

static void *pool_producer(void *p)
{
    pool_producer_t *pp = p;
    uint32_t rnd = 2463534242u + (uint32_t)pp->producer;
    for (int i = 0; i < TASKS / PRODUCERS; i++)
        pool_push(pp->pool, next_key(&rnd, pp->pool->w->nkeys));
    return NULL;
}

static double run_pool(workload_t *w)
{
    pool_t q = {.head = 0, .count = 0, .closed = 0, .w = w};
    q.ring = malloc(QUEUE_MAX * sizeof *q.ring);
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.not_empty, NULL);
    pthread_cond_init(&q.not_full, NULL);
    pthread_t workers[WORKERS], producers[PRODUCERS];
    pool_producer_t pp[PRODUCERS];
    uint64_t t0 = ordo_now_ns();
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&workers[i], NULL, pool_worker, &q);
    for (int p = 0; p < PRODUCERS; p++) {
        pp[p] = (pool_producer_t){&q, p};
        pthread_create(&producers[p], NULL, pool_producer, &pp[p]);
    }
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(producers[p], NULL);
    pthread_mutex_lock(&q.mu);
    q.closed = 1;
    pthread_cond_broadcast(&q.not_empty);
    pthread_mutex_unlock(&q.mu);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(workers[i], NULL);
    uint64_t t1 = ordo_now_ns();
    pthread_cond_destroy(&q.not_full);
    pthread_cond_destroy(&q.not_empty);
    pthread_mutex_destroy(&q.mu);
    free(q.ring);
    return (double)(TASKS / PRODUCERS * PRODUCERS) / ((double)(t1 - t0) / 1e9);
}

/* ---- driver ------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double median, min, max;
} summary_t;

static summary_t summarise(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return (summary_t){v[n / 2], v[0], v[n - 1]};
}

static void check_counts(const workload_t *w)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < w->nkeys; k++)
        sum += w->counters[k];
    if (sum != (uint64_t)(TASKS / PRODUCERS * PRODUCERS)) {
        fprintf(stderr, "lost tasks: %llu\n", (unsigned long long)sum);
        exit(1);
    }
}

/* x^(1/n) by bisection, so the benchmark needs no libm. x > 0. */
static double nth_root(double x, int n)
{
    double lo = 0, hi = x > 1 ? x : 1;
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2, p = 1;
        for (int j = 0; j < n; j++)
            p *= mid;
        if (p < x)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

static void print_row(size_t nkeys, const char *impl, summary_t s)
{
    printf("%6zu  %-22s %12.0f %12.0f %12.0f\n", nkeys, impl, s.median, s.min, s.max);
}

int main(void)
{
    printf("bench_keyed: workers=%d producers=%d tasks/round=%d rounds=%d queue bound=%d\n",
           WORKERS, PRODUCERS, TASKS, ROUNDS, QUEUE_MAX);
    printf("note: the mutex-per-key baseline does NOT preserve per-key order.\n");
    printf("%6s  %-22s %12s %12s %12s   (tasks/s)\n", "keys", "impl", "median", "min", "max");
    double ratio_product = 1;
    size_t nconf = sizeof key_counts / sizeof key_counts[0];
    for (size_t c = 0; c < nconf; c++) {
        workload_t w = {.nkeys = key_counts[c]};
        w.counters = calloc(w.nkeys, sizeof *w.counters);
        w.locks = malloc(w.nkeys * sizeof *w.locks);
        for (size_t k = 0; k < w.nkeys; k++)
            pthread_mutex_init(&w.locks[k], NULL);
        double post[ROUNDS], fut[ROUNDS], pool[ROUNDS];
        /* Interleave the implementations so machine noise hits all alike. */
        for (int r = 0; r < ROUNDS; r++) {
            memset(w.counters, 0, w.nkeys * sizeof *w.counters);
            post[r] = run_keyed(&w, 0);
            check_counts(&w);
            memset(w.counters, 0, w.nkeys * sizeof *w.counters);
            fut[r] = run_keyed(&w, 1);
            check_counts(&w);
            memset(w.counters, 0, w.nkeys * sizeof *w.counters);
            pool[r] = run_pool(&w);
            check_counts(&w);
        }
        summary_t sp = summarise(post, ROUNDS), sf = summarise(fut, ROUNDS),
                  sb = summarise(pool, ROUNDS);
        print_row(w.nkeys, "keyed (post)", sp);
        print_row(w.nkeys, "keyed (submit+future)", sf);
        print_row(w.nkeys, "mutex-per-key*", sb);
        printf("%6zu  keyed(post)/mutex-per-key: %.2f\n", w.nkeys, sp.median / sb.median);
        ratio_product *= sp.median / sb.median;
        for (size_t k = 0; k < w.nkeys; k++)
            pthread_mutex_destroy(&w.locks[k]);
        free(w.locks);
        free(w.counters);
    }
    printf("* no per-key order. Ratio below: geometric mean over key counts of median "
           "keyed(post) / median mutex-per-key.\n");
    printf("keyed/mutex-per-key ratio: %.2f\n", nth_root(ratio_product, (int)nconf));
    return 0;
}
