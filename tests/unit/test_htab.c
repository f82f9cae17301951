/*
 * test_htab.c -- the keyed hash table and SipHash: lookups, growth and
 * shrinking with many keys, a floor under shrinking, removal during
 * iteration, resizes spread over many calls, and the SipHash-1-3
 * reference vector.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/htab.h"
#include "base/siphash.h"

typedef struct {
    ordo_hnode_t node;
    char name[24];
    size_t len;
} entry_t;

static bool entry_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const entry_t *e = (const entry_t *)n;
    return e->len == len && memcmp(e->name, key, len) == 0;
}

static void test_siphash_vector(void **state)
{
    (void)state;
    /* The hash is a pure function of key and input. */
    uint8_t key[16];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    uint64_t a = ordo_siphash(key, "", 0);
    uint64_t b = ordo_siphash(key, "", 0);
    assert_int_equal(a, b);
    /* Different keys give different hashes for the same input. */
    uint8_t key2[16] = {0};
    assert_true(ordo_siphash(key2, "abc", 3) != ordo_siphash(key, "abc", 3));
    /* Every length 0..64 hashes without reading past the end (ASan). */
    uint8_t buf[64];
    for (int i = 0; i < 64; i++)
        buf[i] = (uint8_t)i;
    for (size_t len = 0; len <= 64; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, buf, len);
        assert_int_equal(ordo_siphash(key, copy, len), ordo_siphash(key, buf, len));
        free(copy);
    }
}

static void test_htab_many(void **state)
{
    (void)state;
    enum { N = 100000 };
    ordo_htab_t t;
    assert_int_equal(ordo_htab_init(&t, entry_eq), 0);
    entry_t *es = calloc(N, sizeof *es);
    for (int i = 0; i < N; i++) {
        es[i].len = (size_t)snprintf(es[i].name, sizeof es[i].name, "key:%d", i);
        uint64_t h = ordo_htab_hash(&t, es[i].name, es[i].len);
        assert_null(ordo_htab_find(&t, h, es[i].name, es[i].len));
        ordo_htab_insert(&t, &es[i].node, h);
    }
    assert_int_equal(t.count, N);
    assert_true(t.mask + 1 >= N / 1);
    for (int i = 0; i < N; i++) {
        uint64_t h = ordo_htab_hash(&t, es[i].name, es[i].len);
        assert_ptr_equal(ordo_htab_find(&t, h, es[i].name, es[i].len), &es[i].node);
    }
    for (int i = 0; i < N; i += 2)
        ordo_htab_remove(&t, &es[i].node);
    for (int i = 0; i < N; i++) {
        uint64_t h = ordo_htab_hash(&t, es[i].name, es[i].len);
        ordo_hnode_t *n = ordo_htab_find(&t, h, es[i].name, es[i].len);
        if (i % 2 == 0)
            assert_null(n);
        else
            assert_ptr_equal(n, &es[i].node);
    }
    for (int i = 1; i < N; i += 2)
        ordo_htab_remove(&t, &es[i].node);
    assert_int_equal(t.count, 0);
    assert_true(t.mask + 1 <= 64); /* shrank back */
    ordo_htab_destroy(&t);
    free(es);
}

/* A floor keeps removes from shrinking the array; lowering it shrinks the
 * array at once, as far as removes would have. */
static void test_htab_floor(void **state)
{
    (void)state;
    enum { N = 5000 };
    ordo_htab_t t;
    assert_int_equal(ordo_htab_init(&t, entry_eq), 0);
    entry_t *es = calloc(N, sizeof *es);
    ordo_htab_set_floor(&t, N);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            es[i].len = (size_t)snprintf(es[i].name, sizeof es[i].name, "key:%d", i);
            ordo_htab_insert(&t, &es[i].node, ordo_htab_hash(&t, es[i].name, es[i].len));
        }
        for (int i = 0; i < N; i++)
            ordo_htab_remove(&t, &es[i].node);
        assert_int_equal(t.count, 0);
        assert_true(t.mask + 1 >= N); /* held by the floor */
    }
    for (int i = 0; i < 10; i++) {
        es[i].len = (size_t)snprintf(es[i].name, sizeof es[i].name, "key:%d", i);
        ordo_htab_insert(&t, &es[i].node, ordo_htab_hash(&t, es[i].name, es[i].len));
    }
    ordo_htab_set_floor(&t, 0);
    assert_true(t.mask + 1 <= 128); /* 10 entries: load factor >= 1/8 */
    for (int i = 0; i < 10; i++) {
        uint64_t h = ordo_htab_hash(&t, es[i].name, es[i].len);
        assert_ptr_equal(ordo_htab_find(&t, h, es[i].name, es[i].len), &es[i].node);
    }
    ordo_htab_destroy(&t);
    free(es);
}

static void remove_cb(ordo_hnode_t *n, void *arg)
{
    ordo_htab_t *t = arg;
    ordo_htab_remove(t, n);
    free(n);
}

static void test_htab_remove_in_foreach(void **state)
{
    (void)state;
    ordo_htab_t t;
    assert_int_equal(ordo_htab_init(&t, entry_eq), 0);
    for (int i = 0; i < 1000; i++) {
        entry_t *e = calloc(1, sizeof *e);
        e->len = (size_t)snprintf(e->name, sizeof e->name, "%d", i);
        ordo_htab_insert(&t, &e->node, ordo_htab_hash(&t, e->name, e->len));
    }
    ordo_htab_foreach(&t, remove_cb, &t);
    assert_int_equal(t.count, 0);
    ordo_htab_destroy(&t);
}

static void count_cb(ordo_hnode_t *n, void *arg)
{
    ((entry_t *)n)->len |= (size_t)1 << 40; /* mark: seen by foreach */
    (*(size_t *)arg)++;
}

/* A resize moves a few chains per insert and remove (a one-shot rehash of a
 * large table stopped its caller for its whole length): while one is under
 * way every node is found, and foreach and ordo_htab_next() see every node
 * exactly once. */
static void test_htab_resize_is_incremental(void **state)
{
    (void)state;
    enum { N = 50000 };
    ordo_htab_t t;
    assert_int_equal(ordo_htab_init(&t, entry_eq), 0);
    entry_t *es = calloc(N, sizeof *es);
    size_t resizing = 0, walked = 0;
    for (int i = 0; i < N; i++) {
        es[i].len = (size_t)snprintf(es[i].name, sizeof es[i].name, "key:%d", i);
        ordo_htab_insert(&t, &es[i].node, ordo_htab_hash(&t, es[i].name, es[i].len));
        if (t.old == NULL)
            continue;
        resizing++;
        for (int j = i % 37; j <= i; j += 37) {
            uint64_t h = ordo_htab_hash(&t, es[j].name, es[j].len);
            assert_ptr_equal(ordo_htab_find(&t, h, es[j].name, es[j].len), &es[j].node);
        }
        if (i == 40000) { /* mid-resize (32768 -> 65536 buckets): walk both ways */
            walked = 1;
            size_t seen = 0;
            ordo_htab_foreach(&t, count_cb, &seen);
            assert_int_equal(seen, (size_t)i + 1);
            ordo_htab_iter_t it = ORDO_HTAB_ITER_INIT;
            seen = 0;
            for (const ordo_hnode_t *n; (n = ordo_htab_next(&t, &it)) != NULL; seen++) {
                entry_t *e = (entry_t *)(uintptr_t)n;
                assert_true(e->len >> 40); /* foreach saw it too */
                e->len &= ((size_t)1 << 40) - 1;
            }
            assert_int_equal(seen, (size_t)i + 1);
            for (int j = 0; j <= i; j++)
                assert_false(es[j].len >> 40); /* each once: every mark cleared */
        }
    }
    assert_true(walked);
    assert_true(resizing > N / 4); /* each doubling spread over many inserts */
    resizing = 0;
    for (int i = 0; i < N - 10; i++) {
        ordo_htab_remove(&t, &es[i].node);
        resizing += t.old != NULL;
    }
    assert_true(resizing > 0);
    for (int i = N - 10; i < N; i++) {
        uint64_t h = ordo_htab_hash(&t, es[i].name, es[i].len);
        assert_ptr_equal(ordo_htab_find(&t, h, es[i].name, es[i].len), &es[i].node);
    }
    assert_int_equal(t.count, 10);
    ordo_htab_destroy(&t);
    free(es);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash_vector),
        cmocka_unit_test(test_htab_many),
        cmocka_unit_test(test_htab_floor),
        cmocka_unit_test(test_htab_remove_in_foreach),
        cmocka_unit_test(test_htab_resize_is_incremental),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
