/*
 * test_heap.c -- the intrusive min-heap: random operations against a sorted
 * reference, removal from the middle, updates up and down, ties under a
 * partial and a total order, and the array's growth and shrinking.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/heap.h"

typedef struct {
    ordo_heap_node_t hn;
    uint64_t key;
    uint64_t id;
} item_t;

#define ITEM(n) ((item_t *)(void *)((char *)(n) - offsetof(item_t, hn)))

/* Key only: equal keys are ties the heap may order either way. */
static bool key_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    return ITEM(a)->key < ITEM(b)->key;
}

/* (key, id): a total order, as coord.c uses for determinism. */
static bool key_id_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    const item_t *x = ITEM(a), *y = ITEM(b);
    return x->key < y->key || (x->key == y->key && x->id < y->id);
}

/* Every heap invariant of heap.h, checked in full. */
static void check_heap(const ordo_heap_t *h)
{
    assert_true(h->len <= h->cap);
    for (size_t i = 0; i < h->len; i++) {
        assert_int_equal(h->v[i]->slot, i);
        if (i > 0)
            assert_false(h->less(h->v[i], h->v[(i - 1) / 2]));
    }
}

/* The sorted reference: a multiset of keys kept in an ascending array. */
typedef struct {
    uint64_t *v;
    size_t n;
} ref_t;

static void ref_add(ref_t *r, uint64_t k)
{
    size_t i = r->n;
    while (i > 0 && r->v[i - 1] > k) {
        r->v[i] = r->v[i - 1];
        i--;
    }
    r->v[i] = k;
    r->n++;
}

static void ref_del(ref_t *r, uint64_t k)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i] == k) {
            memmove(&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof *r->v);
            r->n--;
            return;
        }
    }
    fail_msg("key %llu not in the reference", (unsigned long long)k);
}

static void test_empty(void **state)
{
    (void)state;
    ordo_heap_t h;
    ordo_heap_init(&h, key_less, 4, ORDO_HEAP_KEEP);
    assert_int_equal(ordo_heap_len(&h), 0);
    assert_null(ordo_heap_peek(&h));
    assert_null(ordo_heap_pop(&h));
    item_t a = {.key = 7};
    ordo_heap_node_init(&a.hn);
    assert_false(ordo_heap_linked(&a.hn));
    assert_int_equal(ordo_heap_push(&h, &a.hn), 0);
    assert_true(ordo_heap_linked(&a.hn));
    assert_ptr_equal(ordo_heap_peek(&h), &a.hn);
    assert_ptr_equal(ordo_heap_pop(&h), &a.hn);
    assert_false(ordo_heap_linked(&a.hn));
    assert_null(ordo_heap_pop(&h));
    ordo_heap_destroy(&h);
    /* A zeroed heap that was never initialised can be destroyed. */
    ordo_heap_t zero = {0};
    ordo_heap_destroy(&zero);
}

static void test_random_vs_reference(void **state)
{
    (void)state;
    enum { N = 2000, OPS = 200000 };
    item_t *items = calloc(N, sizeof *items);
    ref_t ref = {calloc(N, sizeof(uint64_t)), 0};
    assert_non_null(items);
    assert_non_null(ref.v);
    for (size_t i = 0; i < N; i++)
        ordo_heap_node_init(&items[i].hn);
    ordo_heap_t h;
    ordo_heap_init(&h, key_less, 16, ORDO_HEAP_SHRINK);
    srand(12345);
    for (int op = 0; op < OPS; op++) {
        item_t *it = &items[(size_t)rand() % N];
        int what = rand() % 4;
        if (!ordo_heap_linked(&it->hn)) {
            /* Few distinct keys, so ties are common. */
            it->key = (uint64_t)(rand() % 500);
            assert_int_equal(ordo_heap_push(&h, &it->hn), 0);
            ref_add(&ref, it->key);
        } else if (what == 0) {
            ordo_heap_node_t *n = ordo_heap_pop(&h);
            assert_non_null(n);
            assert_false(ordo_heap_linked(n));
            assert_int_equal(ITEM(n)->key, ref.v[0]);
            ref_del(&ref, ITEM(n)->key);
        } else if (what == 1) {
            ordo_heap_remove(&h, &it->hn);
            assert_false(ordo_heap_linked(&it->hn));
            ref_del(&ref, it->key);
        } else {
            ref_del(&ref, it->key);
            it->key = (uint64_t)(rand() % 500);
            ordo_heap_update(&h, &it->hn);
            ref_add(&ref, it->key);
        }
        assert_int_equal(ordo_heap_len(&h), ref.n);
        if (ref.n > 0)
            assert_int_equal(ITEM(ordo_heap_peek(&h))->key, ref.v[0]);
        if (op % 997 == 0)
            check_heap(&h);
    }
    check_heap(&h);
    /* Draining gives the reference in order. */
    for (size_t i = 0; i < ref.n; i++)
        assert_int_equal(ITEM(ordo_heap_pop(&h))->key, ref.v[i]);
    assert_null(ordo_heap_pop(&h));
    ordo_heap_destroy(&h);
    free(ref.v);
    free(items);
}

static void test_remove_middle(void **state)
{
    (void)state;
    enum { N = 100 };
    item_t items[N];
    ordo_heap_t h;
    ordo_heap_init(&h, key_id_less, 8, ORDO_HEAP_KEEP);
    for (size_t i = 0; i < N; i++) {
        items[i].key = (i * 37) % N;
        items[i].id = i;
        assert_int_equal(ordo_heap_push(&h, &items[i].hn), 0);
    }
    check_heap(&h);
    /* Remove every entry whose key is odd, wherever it sits. */
    for (size_t i = 0; i < N; i++) {
        if (items[i].key % 2 == 1) {
            assert_true(items[i].hn.slot < ordo_heap_len(&h));
            ordo_heap_remove(&h, &items[i].hn);
            check_heap(&h);
        }
    }
    assert_int_equal(ordo_heap_len(&h), N / 2);
    /* The last entry of the array can be removed too. */
    ordo_heap_node_t *last = h.v[h.len - 1];
    ordo_heap_remove(&h, last);
    check_heap(&h);
    ordo_heap_push(&h, last);
    for (uint64_t k = 0; k < N; k += 2)
        assert_int_equal(ITEM(ordo_heap_pop(&h))->key, k);
    assert_int_equal(ordo_heap_len(&h), 0);
    ordo_heap_destroy(&h);
}

static void test_update_up_and_down(void **state)
{
    (void)state;
    enum { N = 64 };
    item_t items[N];
    ordo_heap_t h;
    ordo_heap_init(&h, key_id_less, 4, ORDO_HEAP_KEEP);
    for (size_t i = 0; i < N; i++) {
        items[i].key = 100 + i;
        items[i].id = i;
        ordo_heap_push(&h, &items[i].hn);
    }
    /* Up: a deep entry becomes the least. */
    items[N - 1].key = 1;
    ordo_heap_update(&h, &items[N - 1].hn);
    check_heap(&h);
    assert_ptr_equal(ordo_heap_peek(&h), &items[N - 1].hn);
    /* Down: the least becomes the greatest. */
    items[N - 1].key = 1000;
    ordo_heap_update(&h, &items[N - 1].hn);
    check_heap(&h);
    assert_ptr_equal(ordo_heap_peek(&h), &items[0].hn);
    /* Unchanged: stays put. */
    size_t slot = items[10].hn.slot;
    ordo_heap_update(&h, &items[10].hn);
    assert_int_equal(items[10].hn.slot, slot);
    for (size_t i = 0; i < N - 1; i++)
        assert_ptr_equal(ordo_heap_pop(&h), &items[i].hn);
    assert_ptr_equal(ordo_heap_pop(&h), &items[N - 1].hn);
    ordo_heap_destroy(&h);
}

static void test_ties(void **state)
{
    (void)state;
    enum { N = 50 };
    item_t items[N];
    ordo_heap_t h;
    /* A total order on equal keys: pops follow the ids whatever the push
     * order, as coord.c relies on for replicas. */
    ordo_heap_init(&h, key_id_less, 4, ORDO_HEAP_KEEP);
    for (size_t i = 0; i < N; i++) {
        size_t j = (i * 7) % N;
        items[j].key = 5;
        items[j].id = j;
        ordo_heap_push(&h, &items[j].hn);
    }
    for (size_t i = 0; i < N; i++)
        assert_ptr_equal(ordo_heap_pop(&h), &items[i].hn);
    ordo_heap_destroy(&h);
    /* Key only: equal keys never move past one another, so pushing equal
     * keys leaves them in push order in the array. */
    ordo_heap_init(&h, key_less, 4, ORDO_HEAP_KEEP);
    for (size_t i = 0; i < N; i++) {
        items[i].key = 5;
        ordo_heap_push(&h, &items[i].hn);
    }
    for (size_t i = 0; i < N; i++)
        assert_ptr_equal(h.v[i], &items[i].hn);
    /* Popping moves the last entry to the root and it stays there. */
    assert_ptr_equal(ordo_heap_pop(&h), &items[0].hn);
    assert_ptr_equal(ordo_heap_peek(&h), &items[N - 1].hn);
    ordo_heap_destroy(&h);
}

static void test_capacity(void **state)
{
    (void)state;
    enum { N = 1000 };
    item_t *items = calloc(N, sizeof *items);
    assert_non_null(items);
    ordo_heap_t keep, shrink;
    ordo_heap_init(&keep, key_less, 64, ORDO_HEAP_KEEP);
    ordo_heap_init(&shrink, key_less, 16, ORDO_HEAP_SHRINK);
    assert_int_equal(keep.cap, 0);
    item_t one = {.key = 1};
    ordo_heap_push(&shrink, &one.hn);
    assert_int_equal(shrink.cap, 16);
    ordo_heap_pop(&shrink);
    for (size_t i = 0; i < N; i++) {
        items[i].key = (uint64_t)i;
        ordo_heap_push(i % 2 ? &keep : &shrink, &items[i].hn);
    }
    assert_int_equal(keep.cap, 512);
    assert_int_equal(shrink.cap, 512);
    while (ordo_heap_len(&keep) > 0)
        ordo_heap_pop(&keep);
    while (ordo_heap_len(&shrink) > 0)
        ordo_heap_pop(&shrink);
    assert_int_equal(keep.cap, 512);
    assert_int_equal(shrink.cap, 16);
    ordo_heap_destroy(&keep);
    ordo_heap_destroy(&shrink);
    assert_null(keep.v);
    free(items);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_random_vs_reference),
        cmocka_unit_test(test_remove_middle),
        cmocka_unit_test(test_update_up_and_down),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
