/*
 * test_srv_watch.c -- the watch registry: exact and prefix matching agree
 * with a brute-force scan over every watch, for random keys and prefixes
 * (binary, empty prefix included), across adds and removes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/watch.h"

enum { NW = 400, NKEYS = 2000 };

static void mark(watch_t *w, void *arg)
{
    int *hits = arg;
    hits[w->id]++;
}

static void test_match_equals_bruteforce(void **state)
{
    (void)state;
    watch_registry_t r;
    assert_int_equal(watch_registry_init(&r), 0);
    watch_t *ws = calloc(NW, sizeof *ws);
    static const char alphabet[] = {'a', 'b', '\0', (char)0xff};
    uint64_t seed = 7;
    for (int i = 0; i < NW; i++) {
        seed = seed * 6364136223846793005ULL + 1;
        size_t len = (seed >> 40) % 4; /* 0..3: includes the empty prefix */
        ws[i].id = (uint64_t)i;
        ws[i].nlen = len;
        ws[i].name = malloc(len ? len : 1);
        for (size_t j = 0; j < len; j++)
            ws[i].name[j] = alphabet[(seed >> (8 + 2 * j)) & 3];
        ws[i].prefix = (seed >> 50) & 1;
        watch_add(&r, &ws[i]);
    }
    int removed[NW] = {0};
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < NKEYS; k++) {
            seed = seed * 6364136223846793005ULL + 1;
            char key[4];
            size_t klen = (seed >> 40) % 5;
            for (size_t j = 0; j < klen; j++)
                key[j] = alphabet[(seed >> (8 + 2 * j)) & 3];
            int hits[NW] = {0};
            watch_match(&r, key, klen, mark, hits);
            for (int i = 0; i < NW; i++) {
                int want = !removed[i] && watch_covers(&ws[i], key, klen);
                assert_int_equal(hits[i], want);
            }
        }
        /* Remove every third watch and check again. */
        for (int i = round; i < NW; i += 3) {
            if (removed[i])
                continue;
            watch_remove(&r, &ws[i]);
            removed[i] = 1;
        }
    }
    for (int i = 0; i < NW; i++) {
        if (!removed[i])
            watch_remove(&r, &ws[i]);
        free(ws[i].name);
    }
    assert_int_equal(r.count, 0);
    assert_int_equal(r.nplens, 0);
    watch_registry_destroy(&r);
    free(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_equals_bruteforce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
