/*
 * buf.c -- the growable byte buffer of buf.h, and the aborting allocators
 * (and heap push).
 *
 * Invariants of an ordo_buf_t:
 *   - data == NULL if and only if cap == 0;
 *   - len <= cap;
 *   - after any reserve/append, data != NULL (so data + len is never an
 *     offset applied to a null pointer).
 * The fast path of reserve/append is inline in buf.h; ordo_buf_grow() is
 * the rest. Growth doubles the capacity (amortised O(1) appends); a size that would
 * overflow size_t is treated like running out of memory.
 */
#include "buf.h"

#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap.h"

#define BUF_CAP_MIN 64 /* one small reply or request fits without a regrow */

static void buf_check(const ordo_buf_t *b)
{
    assert(b != NULL);
    assert(b->len <= b->cap);
    assert((b->data == NULL) == (b->cap == 0));
}

/* Out of memory is fatal for the server (see buf.h): say so and stop. */
static void oom(size_t n)
{
    fprintf(stderr, "ordod: out of memory allocating %zu bytes\n", n);
    abort();
}

void *ordo_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *ordo_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *ordo_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

void ordo_heap_xpush(ordo_heap_t *h, ordo_heap_node_t *n)
{
    if (ordo_heap_push(h, n) != 0)
        oom((h->cap ? 2 * h->cap : h->cap_min) * sizeof *h->v);
}

char *ordo_buf_grow(ordo_buf_t *b, size_t extra)
{
    buf_check(b);
    if (extra > SIZE_MAX - b->len)
        oom(SIZE_MAX);
    size_t need = b->len + extra;
    if (need > b->cap || b->data == NULL) {
        size_t cap = b->cap < BUF_CAP_MIN ? BUF_CAP_MIN : b->cap;
        while (cap < need)
            cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        b->data = ordo_xrealloc(b->data, cap);
        b->cap = cap;
    }
    return b->data + b->len;
}

void ordo_buf_puts(ordo_buf_t *b, const char *s)
{
    ordo_buf_append(b, s, strlen(s));
}

void ordo_buf_vprintf(ordo_buf_t *b, const char *fmt, va_list ap)
{
    /* Try in the free space first; most texts are short and fit. */
    char *dst = ordo_buf_reserve(b, 0);
    size_t room = b->cap - b->len;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(dst, room, fmt, ap2);
    va_end(ap2);
    assert(n >= 0);
    if ((size_t)n >= room) {
        dst = ordo_buf_reserve(b, (size_t)n + 1);
        int m = vsnprintf(dst, (size_t)n + 1, fmt, ap);
        assert(m == n);
        (void)m;
    }
    b->len += (size_t)n;
}

void ordo_buf_printf(ordo_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ordo_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void ordo_buf_consume(ordo_buf_t *b, size_t n)
{
    ORDO_DEBUG_ASSERT(b->len <= b->cap);
    assert(n <= b->len);
    if (n == 0)
        return;
    b->len -= n;
    if (b->len > 0)
        memmove(b->data, b->data + n, b->len);
}

void ordo_buf_reset(ordo_buf_t *b, size_t keep_max)
{
    buf_check(b);
    b->len = 0;
    if (b->cap > keep_max)
        ordo_buf_free(b);
}

void ordo_buf_free(ordo_buf_t *b)
{
    buf_check(b);
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
