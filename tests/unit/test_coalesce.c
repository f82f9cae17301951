/*
 * test_coalesce.c -- the coalescing FIFO: order, replace in place, merge,
 * remove by key, bounds and timeouts, close and drain, binary keys, the
 * no-starvation guarantee, and a threaded stress run with checkers.
 *
 * Timing tests only assert lower bounds (a timeout did not fire early); no
 * test sleeps to order threads: where a thread must be blocked first, the
 * test polls an observable state or accepts either interleaving.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>

#include "ordo/coalesce.h"
#include "lib/sync.h"

#define ITEM(n) ((void *)(uintptr_t)(n))
#define NUM(p) ((uintptr_t)(p))

static ordo_coalesce_t *make_queue(size_t capacity)
{
    ordo_coalesce_opts_t opts = {.capacity = capacity};
    ordo_coalesce_t *q = NULL;
    assert_int_equal(ordo_coalesce_create(&opts, &q), ORDO_OK);
    return q;
}

static void put_str(ordo_coalesce_t *q, const char *key, uintptr_t n, int expect)
{
    assert_int_equal(ordo_coalesce_put(q, key, strlen(key), ITEM(n), 0, NULL), expect);
}

/* Take one entry at once and check its key and item. */
static void expect_take(ordo_coalesce_t *q, const char *key, uintptr_t n)
{
    char buf[64];
    size_t len = 0;
    void *item = NULL;
    assert_int_equal(ordo_coalesce_take(q, 0, &item, buf, sizeof buf, &len), ORDO_OK);
    assert_int_equal(len, strlen(key));
    assert_memory_equal(buf, key, len);
    assert_int_equal(NUM(item), n);
}

static void expect_empty(ordo_coalesce_t *q)
{
    void *item;
    assert_int_equal(ordo_coalesce_take(q, 0, &item, NULL, 0, NULL), ORDO_ETIMEDOUT);
    assert_int_equal(ordo_coalesce_len(q), 0);
}

static void test_fifo_order(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(0);
    put_str(q, "a", 1, ORDO_COALESCE_INSERTED);
    put_str(q, "b", 2, ORDO_COALESCE_INSERTED);
    put_str(q, "c", 3, ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_len(q), 3);
    expect_take(q, "a", 1);
    expect_take(q, "b", 2);
    expect_take(q, "c", 3);
    expect_empty(q);
    ordo_coalesce_destroy(q, NULL, NULL);
}

static void test_replace_keeps_place(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(0);
    put_str(q, "a", 1, ORDO_COALESCE_INSERTED);
    put_str(q, "b", 2, ORDO_COALESCE_INSERTED);
    put_str(q, "c", 3, ORDO_COALESCE_INSERTED);
    void *old = NULL;
    assert_int_equal(ordo_coalesce_put(q, "a", 1, ITEM(10), 0, &old), ORDO_COALESCE_REPLACED);
    assert_int_equal(NUM(old), 1);
    assert_int_equal(ordo_coalesce_put(q, "a", 1, ITEM(11), 0, &old), ORDO_COALESCE_REPLACED);
    assert_int_equal(NUM(old), 10);
    /* An insert reports no replaced item. */
    old = ITEM(99);
    assert_int_equal(ordo_coalesce_put(q, "d", 1, ITEM(4), 0, &old), ORDO_COALESCE_INSERTED);
    assert_null(old);
    assert_int_equal(ordo_coalesce_len(q), 4);
    expect_take(q, "a", 11);
    expect_take(q, "b", 2);
    expect_take(q, "c", 3);
    expect_take(q, "d", 4);
    /* Once taken, the key is new again: it goes to the tail. */
    put_str(q, "b", 5, ORDO_COALESCE_INSERTED);
    put_str(q, "a", 6, ORDO_COALESCE_INSERTED);
    expect_take(q, "b", 5);
    expect_take(q, "a", 6);
    ordo_coalesce_destroy(q, NULL, NULL);
}

/* Merge: items are heap ints; the sum is kept, the incoming item freed. */
static void *merge_sum(void *waiting, void *incoming, const void *key, size_t key_len, void *arg)
{
    int *calls = arg;
    (*calls)++;
    assert_int_equal(key_len, 1);
    assert_memory_equal(key, "k", 1);
    *(int *)waiting += *(int *)incoming;
    free(incoming);
    return waiting;
}

static int *heap_int(int v)
{
    int *p = malloc(sizeof *p);
    assert_non_null(p);
    *p = v;
    return p;
}

static void free_item(const void *key, size_t key_len, void *item, void *arg)
{
    (void)key;
    (void)key_len;
    (*(int *)arg)++;
    free(item);
}

static void test_merge(void **state)
{
    (void)state;
    int calls = 0;
    ordo_coalesce_opts_t opts = {.merge = merge_sum, .merge_arg = &calls};
    ordo_coalesce_t *q = NULL;
    assert_int_equal(ordo_coalesce_create(&opts, &q), ORDO_OK);
    void *old = ITEM(1);
    assert_int_equal(ordo_coalesce_put(q, "k", 1, heap_int(1), 0, &old), ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_put(q, "x", 1, heap_int(100), 0, NULL), ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_put(q, "k", 1, heap_int(2), 0, &old), ORDO_COALESCE_MERGED);
    assert_null(old);
    assert_int_equal(ordo_coalesce_put(q, "k", 1, heap_int(3), 0, &old), ORDO_COALESCE_MERGED);
    assert_int_equal(calls, 2);
    void *item = NULL;
    assert_int_equal(ordo_coalesce_take(q, 0, &item, NULL, 0, NULL), ORDO_OK);
    assert_int_equal(*(int *)item, 6);
    free(item);
    /* What is left goes to the drain callback at destroy. */
    int drained = 0;
    ordo_coalesce_destroy(q, free_item, &drained);
    assert_int_equal(drained, 1);
}

static void test_remove(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(0);
    put_str(q, "a", 1, ORDO_COALESCE_INSERTED);
    put_str(q, "b", 2, ORDO_COALESCE_INSERTED);
    put_str(q, "c", 3, ORDO_COALESCE_INSERTED);
    void *item = NULL;
    assert_int_equal(ordo_coalesce_remove(q, "b", 1, &item), ORDO_OK);
    assert_int_equal(NUM(item), 2);
    assert_int_equal(ordo_coalesce_remove(q, "b", 1, &item), ORDO_ENOTFOUND);
    assert_int_equal(ordo_coalesce_remove(q, "zz", 2, &item), ORDO_ENOTFOUND);
    assert_int_equal(ordo_coalesce_remove(q, "c", 1, &item), ORDO_OK); /* the tail */
    assert_int_equal(NUM(item), 3);
    put_str(q, "d", 4, ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_len(q), 2);
    expect_take(q, "a", 1);
    expect_take(q, "d", 4);
    expect_empty(q);
    ordo_coalesce_destroy(q, NULL, NULL);
}

static void test_binary_keys(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(0);
    const char k1[] = {'a', 0, 'b'};
    const char k2[] = {'a', 0, 'c'};
    const char k3[] = {'a'};
    assert_int_equal(ordo_coalesce_put(q, k1, 3, ITEM(1), 0, NULL), ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_put(q, k2, 3, ITEM(2), 0, NULL), ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_put(q, k3, 1, ITEM(3), 0, NULL), ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_put(q, NULL, 0, ITEM(4), 0, NULL), ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_put(q, "", 0, ITEM(5), 0, NULL), ORDO_COALESCE_REPLACED);
    assert_int_equal(ordo_coalesce_put(q, k1, 3, ITEM(6), 0, NULL), ORDO_COALESCE_REPLACED);
    assert_int_equal(ordo_coalesce_len(q), 4);
    /* A short buffer gets a truncated copy and the full length. */
    char buf[2];
    size_t len = 0;
    void *item = NULL;
    assert_int_equal(ordo_coalesce_take(q, 0, &item, buf, sizeof buf, &len), ORDO_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, k1, 2);
    assert_int_equal(NUM(item), 6);
    char big[8];
    assert_int_equal(ordo_coalesce_take(q, 0, &item, big, sizeof big, &len), ORDO_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(big, k2, 3);
    assert_int_equal(ordo_coalesce_take(q, 0, &item, big, sizeof big, &len), ORDO_OK);
    assert_int_equal(len, 1);
    assert_int_equal(ordo_coalesce_take(q, 0, &item, big, sizeof big, &len), ORDO_OK);
    assert_int_equal(len, 0);
    assert_int_equal(NUM(item), 5);
    ordo_coalesce_destroy(q, NULL, NULL);
}

static void test_invalid_args(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(0);
    void *item;
    assert_int_equal(ordo_coalesce_create(NULL, NULL), ORDO_EINVAL);
    assert_int_equal(ordo_coalesce_put(q, NULL, 3, ITEM(1), 0, NULL), ORDO_EINVAL);
    assert_int_equal(ordo_coalesce_remove(q, NULL, 3, &item), ORDO_EINVAL);
    assert_int_equal(ordo_coalesce_take(q, 0, NULL, NULL, 0, NULL), ORDO_EINVAL);
    assert_int_equal(ordo_coalesce_take(q, 0, &item, NULL, 4, NULL), ORDO_EINVAL);
    assert_string_equal(ordo_strerror(ORDO_EFULL), "queue full");
    ordo_coalesce_destroy(q, NULL, NULL);
}

static void test_bounds(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(2);
    put_str(q, "a", 1, ORDO_COALESCE_INSERTED);
    put_str(q, "b", 2, ORDO_COALESCE_INSERTED);
    /* A new key on a full queue: fail at once, or after the timeout. */
    assert_int_equal(ordo_coalesce_put(q, "c", 1, ITEM(3), 0, NULL), ORDO_EFULL);
    uint64_t t0 = ordo_now_ns();
    assert_int_equal(ordo_coalesce_put(q, "c", 1, ITEM(3), 30, NULL), ORDO_ETIMEDOUT);
    assert_true(ordo_now_ns() - t0 >= 30u * 1000000u);
    /* A replace adds nothing: it succeeds on a full queue, even with 0. */
    void *old = NULL;
    assert_int_equal(ordo_coalesce_put(q, "b", 1, ITEM(20), 0, &old), ORDO_COALESCE_REPLACED);
    assert_int_equal(NUM(old), 2);
    assert_int_equal(ordo_coalesce_len(q), 2);
    /* Room again after a take or a remove. */
    expect_take(q, "a", 1);
    put_str(q, "c", 3, ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_remove(q, "b", 1, &old), ORDO_OK);
    put_str(q, "d", 4, ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_put(q, "e", 1, ITEM(5), 0, NULL), ORDO_EFULL);
    expect_take(q, "c", 3);
    expect_take(q, "d", 4);
    ordo_coalesce_destroy(q, NULL, NULL);
}

static void test_take_timeout(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(0);
    void *item = NULL;
    assert_int_equal(ordo_coalesce_take(q, 0, &item, NULL, 0, NULL), ORDO_ETIMEDOUT);
    uint64_t t0 = ordo_now_ns();
    assert_int_equal(ordo_coalesce_take(q, 30, &item, NULL, 0, NULL), ORDO_ETIMEDOUT);
    assert_true(ordo_now_ns() - t0 >= 30u * 1000000u);
    /* An item already there is taken at once, whatever the timeout. */
    put_str(q, "a", 1, ORDO_COALESCE_INSERTED);
    assert_int_equal(ordo_coalesce_take(q, 30, &item, NULL, 0, NULL), ORDO_OK);
    assert_int_equal(NUM(item), 1);
    ordo_coalesce_destroy(q, NULL, NULL);
}

/* ---- blocking calls on other threads ------------------------------------- */

typedef struct {
    ordo_coalesce_t *q;
    const char *key;
    int64_t timeout_ms;
    atomic_int started;
    int rc;
    void *item;
} call_t;

static void *taker_main(void *p)
{
    call_t *c = p;
    atomic_store(&c->started, 1);
    c->rc = ordo_coalesce_take(c->q, c->timeout_ms, &c->item, NULL, 0, NULL);
    return NULL;
}

static void *putter_main(void *p)
{
    call_t *c = p;
    atomic_store(&c->started, 1);
    c->rc = ordo_coalesce_put(c->q, c->key, strlen(c->key), ITEM(7), c->timeout_ms, NULL);
    return NULL;
}

static void wait_started(call_t *c)
{
    while (!atomic_load(&c->started))
        sched_yield();
}

static void test_blocked_take_woken_by_put(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(0);
    call_t c = {.q = q, .timeout_ms = ORDO_WAIT_FOREVER};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, taker_main, &c), 0);
    wait_started(&c);
    /* Whether the taker is already blocked or not, it gets this item. */
    put_str(q, "a", 7, ORDO_COALESCE_INSERTED);
    pthread_join(th, NULL);
    assert_int_equal(c.rc, ORDO_OK);
    assert_int_equal(NUM(c.item), 7);
    ordo_coalesce_destroy(q, NULL, NULL);
}

static void test_blocked_put_woken_by_take(void **state)
{
    (void)state;
    ordo_coalesce_t *q = make_queue(1);
    put_str(q, "a", 1, ORDO_COALESCE_INSERTED);
    call_t c = {.q = q, .key = "b", .timeout_ms = ORDO_WAIT_FOREVER};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, putter_main, &c), 0);
    wait_started(&c);
    expect_take(q, "a", 1);
    pthread_join(th, NULL);
    assert_int_equal(c.rc, ORDO_COALESCE_INSERTED);
    expect_take(q, "b", 7);
    ordo_coalesce_destroy(q, NULL, NULL);
}

static void count_item(const void *key, size_t key_len, void *item, void *arg)
{
    (void)key_len;
    uintptr_t *order = arg;
    /* Record the keys in drain order: one decimal digit each. */
    *order = *order * 10 + (uintptr_t)(((const char *)key)[0] - '0');
    (void)item;
}

static void test_close(void **state)
{
    (void)state;
    /* A blocked taker wakes with ORDO_ESTOPPED. */
    ordo_coalesce_t *q = make_queue(2);
    call_t t = {.q = q, .timeout_ms = ORDO_WAIT_FOREVER};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, taker_main, &t), 0);
    wait_started(&t);
    ordo_coalesce_close(q);
    pthread_join(th, NULL);
    assert_int_equal(t.rc, ORDO_ESTOPPED);
    ordo_coalesce_destroy(q, NULL, NULL);

    /* A putter blocked on a full queue wakes with ORDO_ESTOPPED too; what
     * was queued stays for the owner to drain, in order. */
    q = make_queue(2);
    put_str(q, "1", 1, ORDO_COALESCE_INSERTED);
    put_str(q, "2", 2, ORDO_COALESCE_INSERTED);
    call_t p = {.q = q, .key = "3", .timeout_ms = ORDO_WAIT_FOREVER};
    assert_int_equal(pthread_create(&th, NULL, putter_main, &p), 0);
    wait_started(&p);
    ordo_coalesce_close(q);
    ordo_coalesce_close(q); /* idempotent */
    pthread_join(th, NULL);
    assert_int_equal(p.rc, ORDO_ESTOPPED);
    void *item;
    assert_int_equal(ordo_coalesce_put(q, "1", 1, ITEM(9), 0, NULL), ORDO_ESTOPPED);
    assert_int_equal(ordo_coalesce_take(q, 0, &item, NULL, 0, NULL), ORDO_ESTOPPED);
    assert_int_equal(ordo_coalesce_take(q, ORDO_WAIT_FOREVER, &item, NULL, 0, NULL),
                     ORDO_ESTOPPED);
    assert_int_equal(ordo_coalesce_len(q), 2);
    uintptr_t order = 0;
    assert_int_equal(ordo_coalesce_drain(q, count_item, &order), 2);
    assert_int_equal(order, 12);
    assert_int_equal(ordo_coalesce_len(q), 0);
    ordo_coalesce_destroy(q, NULL, NULL);
}

/* ---- starvation ---------------------------------------------------------------- */

/* One hot key is re-put before every take while new keys keep arriving
 * behind it. It must still be taken in its turn: after exactly the entries
 * that were ahead of it, with its latest value. */
static void test_no_starvation(void **state)
{
    (void)state;
    enum { AHEAD = 50, ROUNDS = 20 };
    ordo_coalesce_t *q = make_queue(0);
    char key[32];
    unsigned next_filler = 0;
    for (unsigned i = 0; i < AHEAD; i++) {
        snprintf(key, sizeof key, "f%u", next_filler++);
        put_str(q, key, 0, ORDO_COALESCE_INSERTED);
    }
    for (unsigned round = 0; round < ROUNDS; round++) {
        uintptr_t version = 0;
        size_t ahead = ordo_coalesce_len(q);
        assert_true(ahead >= AHEAD);
        put_str(q, "hot", ++version, ORDO_COALESCE_INSERTED);
        unsigned taken = 0;
        for (;;) {
            put_str(q, "hot", ++version, ORDO_COALESCE_REPLACED);
            snprintf(key, sizeof key, "f%u", next_filler++);
            put_str(q, key, 0, ORDO_COALESCE_INSERTED);
            char buf[32];
            size_t len;
            void *item;
            assert_int_equal(ordo_coalesce_take(q, 0, &item, buf, sizeof buf, &len), ORDO_OK);
            taken++;
            if (len == 3 && memcmp(buf, "hot", 3) == 0) {
                assert_int_equal(NUM(item), version);
                break;
            }
        }
        /* Exactly the entries ahead of it were served first. */
        assert_int_equal(taken, ahead + 1);
    }
    ordo_coalesce_close(q);
    uintptr_t ignored = 0;
    assert_int_equal(ordo_coalesce_drain(q, count_item, &ignored), AHEAD + ROUNDS);
    ordo_coalesce_destroy(q, NULL, NULL);
}

/* ---- threaded stress --------------------------------------------------------------- */

/* Producers own disjoint keys and put each key's versions 1..VERSIONS in
 * order, as heap items. Consumers check, per key, that versions increase in
 * the order they take them (exact: one consumer's takes are ordered by the
 * queue's lock), that no version is taken twice, and that every key's last
 * version is taken eventually (nothing lost). The consumer that sees the
 * last final version closes the queue, which releases the others. */
enum { STRESS_KEYS = 64, STRESS_VERSIONS = 1500, STRESS_MAX_THREADS = 4 };

typedef struct {
    uint32_t key;
    uint32_t version;
} sitem_t;

typedef struct {
    ordo_coalesce_t *q;
    unsigned producers;
    atomic_uint finals_seen;
    atomic_uint max_taken[STRESS_KEYS];
    atomic_uchar seen[STRESS_KEYS][STRESS_VERSIONS + 1];
    atomic_ulong replaced;
} stress_t;

typedef struct {
    stress_t *s;
    unsigned id;
} worker_t;

static void stress_put(stress_t *s, uint32_t k, uint32_t v)
{
    sitem_t *it = malloc(sizeof *it);
    assert_non_null(it);
    it->key = k;
    it->version = v;
    void *old = NULL;
    int rc = ordo_coalesce_put(s->q, &k, sizeof k, it, ORDO_WAIT_FOREVER, &old);
    assert_true(rc >= 0);
    if (rc == ORDO_COALESCE_REPLACED) {
        sitem_t *o = old;
        assert_int_equal(o->key, k);
        assert_true(o->version < v);
        atomic_fetch_add(&s->replaced, 1);
        free(o);
    }
}

static void *producer_main(void *p)
{
    worker_t *w = p;
    stress_t *s = w->s;
    for (uint32_t v = 1; v <= STRESS_VERSIONS; v++)
        for (uint32_t k = w->id; k < STRESS_KEYS; k += s->producers)
            stress_put(s, k, v);
    return NULL;
}

static void check_taken(stress_t *s, uint32_t last_mine[STRESS_KEYS], const sitem_t *it)
{
    assert_true(it->key < STRESS_KEYS);
    assert_true(it->version >= 1 && it->version <= STRESS_VERSIONS);
    assert_true(it->version > last_mine[it->key]); /* never older than before */
    last_mine[it->key] = it->version;
    assert_int_equal(atomic_exchange(&s->seen[it->key][it->version], 1), 0); /* once */
    unsigned prev = atomic_load(&s->max_taken[it->key]);
    while (prev < it->version &&
           !atomic_compare_exchange_weak(&s->max_taken[it->key], &prev, it->version))
        ;
    if (it->version == STRESS_VERSIONS && atomic_fetch_add(&s->finals_seen, 1) + 1 == STRESS_KEYS)
        ordo_coalesce_close(s->q);
}

static void *consumer_main(void *p)
{
    worker_t *w = p;
    uint32_t last_mine[STRESS_KEYS] = {0};
    for (;;) {
        void *item = NULL;
        uint32_t k;
        size_t len = 0;
        int rc = ordo_coalesce_take(w->s->q, ORDO_WAIT_FOREVER, &item, &k, sizeof k, &len);
        if (rc == ORDO_ESTOPPED)
            return NULL;
        assert_int_equal(rc, ORDO_OK);
        assert_int_equal(len, sizeof k);
        const sitem_t *it = item;
        assert_int_equal(it->key, k);
        check_taken(w->s, last_mine, it);
        free(item);
    }
}

static void run_stress(unsigned producers, unsigned consumers, size_t capacity)
{
    assert_true(producers <= STRESS_MAX_THREADS && consumers <= STRESS_MAX_THREADS);
    stress_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->q = make_queue(capacity);
    s->producers = producers;
    pthread_t pt[STRESS_MAX_THREADS], ct[STRESS_MAX_THREADS];
    worker_t pw[STRESS_MAX_THREADS], cw[STRESS_MAX_THREADS];
    for (unsigned i = 0; i < consumers; i++) {
        cw[i] = (worker_t){s, i};
        assert_int_equal(pthread_create(&ct[i], NULL, consumer_main, &cw[i]), 0);
    }
    for (unsigned i = 0; i < producers; i++) {
        pw[i] = (worker_t){s, i};
        assert_int_equal(pthread_create(&pt[i], NULL, producer_main, &pw[i]), 0);
    }
    for (unsigned i = 0; i < producers; i++)
        pthread_join(pt[i], NULL);
    for (unsigned i = 0; i < consumers; i++)
        pthread_join(ct[i], NULL);
    /* Every key's final version was taken, and nothing is left over. */
    assert_int_equal(atomic_load(&s->finals_seen), STRESS_KEYS);
    for (unsigned k = 0; k < STRESS_KEYS; k++)
        assert_int_equal(atomic_load(&s->max_taken[k]), STRESS_VERSIONS);
    assert_int_equal(ordo_coalesce_len(s->q), 0);
    ordo_coalesce_destroy(s->q, NULL, NULL);
    free(s);
}

static void test_stress_one_consumer(void **state)
{
    (void)state;
    run_stress(3, 1, 0);
}

static void test_stress_many_consumers(void **state)
{
    (void)state;
    run_stress(2, 3, 0);
}

static void test_stress_bounded(void **state)
{
    (void)state;
    run_stress(4, 2, 8); /* putters block for room */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_replace_keeps_place),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_binary_keys),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_take_timeout),
        cmocka_unit_test(test_blocked_take_woken_by_put),
        cmocka_unit_test(test_blocked_put_woken_by_take),
        cmocka_unit_test(test_close),
        cmocka_unit_test(test_no_starvation),
        cmocka_unit_test(test_stress_one_consumer),
        cmocka_unit_test(test_stress_many_consumers),
        cmocka_unit_test(test_stress_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
