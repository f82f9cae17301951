/*
 * heap.c -- intrusive binary min-heap; see heap.h for the contract.
 *
 * Sifting moves a hole rather than swapping: the moving entry is held aside
 * and each entry it passes is written once, into the hole, with its new
 * slot. The result is the same array a swap-based sift would leave.
 */
#include "heap.h"

#include <assert.h>
#include <stdlib.h>

static void heap_check(const ordo_heap_t *h)
{
    assert(h != NULL && h->less != NULL);
    assert(h->len <= h->cap);
    assert((h->v == NULL) == (h->cap == 0));
}

static void put(ordo_heap_t *h, size_t i, ordo_heap_node_t *n)
{
    h->v[i] = n;
    n->slot = i;
}

static void sift_up(ordo_heap_t *h, size_t i)
{
    ordo_heap_node_t *n = h->v[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!h->less(n, h->v[p]))
            break;
        put(h, i, h->v[p]);
        i = p;
    }
    put(h, i, n);
}

static void sift_down(ordo_heap_t *h, size_t i)
{
    ordo_heap_node_t *n = h->v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && h->less(h->v[c + 1], h->v[c]))
            c++;
        if (!h->less(h->v[c], n))
            break;
        put(h, i, h->v[c]);
        i = c;
    }
    put(h, i, n);
}

/* Halve the array when it is under a quarter full, for ORDO_HEAP_SHRINK.
 * A failed realloc keeps the larger array, which still works. */
static void maybe_shrink(ordo_heap_t *h)
{
    if (h->mem != ORDO_HEAP_SHRINK || h->cap <= h->cap_min || h->len >= h->cap / 4)
        return;
    ordo_heap_node_t **v = realloc(h->v, h->cap / 2 * sizeof *v);
    if (v == NULL)
        return;
    h->v = v;
    h->cap /= 2;
}

void ordo_heap_init(ordo_heap_t *h, ordo_heap_less_fn less, size_t cap_min, ordo_heap_mem_t mem)
{
    assert(less != NULL && cap_min > 0);
    h->v = NULL;
    h->len = h->cap = 0;
    h->cap_min = cap_min;
    h->mem = mem;
    h->less = less;
}

void ordo_heap_destroy(ordo_heap_t *h)
{
    /* Not heap_check(): a zeroed, never initialised heap is fine here. */
    assert(h->len <= h->cap && (h->v == NULL) == (h->cap == 0));
    free(h->v);
    h->v = NULL;
    h->len = h->cap = 0;
}

int ordo_heap_push(ordo_heap_t *h, ordo_heap_node_t *n)
{
    heap_check(h);
    assert(n != NULL);
    if (h->len == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : h->cap_min;
        if (cap < h->cap || cap > SIZE_MAX / sizeof *h->v)
            return -1;
        ordo_heap_node_t **v = realloc(h->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        h->v = v;
        h->cap = cap;
    }
    put(h, h->len++, n);
    sift_up(h, n->slot);
    return 0;
}

void ordo_heap_remove(ordo_heap_t *h, ordo_heap_node_t *n)
{
    heap_check(h);
    size_t i = n->slot;
    assert(i < h->len && h->v[i] == n);
    h->len--;
    if (i < h->len) {
        put(h, i, h->v[h->len]);
        sift_down(h, i);
        sift_up(h, i);
    }
    n->slot = ORDO_HEAP_NONE;
    maybe_shrink(h);
}

ordo_heap_node_t *ordo_heap_pop(ordo_heap_t *h)
{
    heap_check(h);
    if (h->len == 0)
        return NULL;
    ordo_heap_node_t *n = h->v[0];
    ordo_heap_remove(h, n);
    return n;
}

void ordo_heap_update(ordo_heap_t *h, ordo_heap_node_t *n)
{
    heap_check(h);
    assert(n->slot < h->len && h->v[n->slot] == n);
    sift_down(h, n->slot);
    sift_up(h, n->slot);
}
