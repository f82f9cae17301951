/*
 * test_srv_watch.c -- the watch registry: exact and prefix matching agree
 * with a brute-force scan over every watch, for random keys and prefixes
 * (binary, empty prefix included), across adds and removes; the prefix
 * tree stays small; matching costs the key's length, not the number or
 * lengths of the watched prefixes.
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

/* Random watches with names of up to maxlen - 1 bytes over `nalpha`
 * letters, random keys of up to maxlen bytes; every match checked against
 * watch_covers() over all watches, through two rounds of removals. */
static void bruteforce(size_t maxlen, unsigned nalpha, uint64_t seed)
{
    watch_registry_t r;
    assert_int_equal(watch_registry_init(&r), 0);
    watch_t *ws = calloc(NW, sizeof *ws);
    static const char alphabet[] = {'a', 'b', '\0', (char)0xff};
    assert_true(nalpha >= 1 && nalpha <= 4 && maxlen <= 16);
    for (int i = 0; i < NW; i++) {
        seed = seed * 6364136223846793005ULL + 1;
        size_t len = (seed >> 40) % maxlen; /* includes the empty prefix */
        ws[i].id = (uint64_t)i;
        ws[i].nlen = len;
        ws[i].name = malloc(len ? len : 1);
        for (size_t j = 0; j < len; j++)
            ws[i].name[j] = alphabet[((seed >> (8 + 2 * j)) & 3) % nalpha];
        ws[i].prefix = (seed >> 50) & 1;
        watch_add(&r, &ws[i]);
    }
    int removed[NW] = {0};
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < NKEYS; k++) {
            seed = seed * 6364136223846793005ULL + 1;
            char key[16];
            size_t klen = (seed >> 40) % (maxlen + 1);
            for (size_t j = 0; j < klen; j++)
                key[j] = alphabet[((seed >> (4 + 3 * j)) & 3) % nalpha];
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
    assert_int_equal(r.pnodes, 1); /* the root alone: every node was pruned */
    watch_registry_destroy(&r);
    free(ws);
}

static void test_match_equals_bruteforce(void **state)
{
    (void)state;
    bruteforce(4, 4, 7);    /* short names, four letters: many exact hits */
    bruteforce(13, 2, 11);  /* long names, two letters: deep shared paths, splits and merges */
    bruteforce(16, 1, 13);  /* one letter: a chain of nested prefixes */
}

/* The tree has fewer than two nodes per prefix group (plus the root). */
static void test_tree_stays_small(void **state)
{
    (void)state;
    watch_registry_t r;
    assert_int_equal(watch_registry_init(&r), 0);
    enum { N = 2000 };
    watch_t *ws = calloc(N, sizeof *ws);
    uint64_t seed = 5;
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ULL + 1;
        ws[i].nlen = 1 + (seed >> 40) % 24;
        ws[i].name = malloc(ws[i].nlen);
        for (size_t j = 0; j < ws[i].nlen; j++)
            ws[i].name[j] = (char)('a' + ((seed >> (j % 48)) & 1));
        ws[i].prefix = true;
        watch_add(&r, &ws[i]);
        assert_true(r.pnodes <= 2 * r.prefixes.count + 1);
    }
    for (int i = 0; i < N; i++) {
        watch_remove(&r, &ws[i]);
        assert_true(r.pnodes <= 2 * r.prefixes.count + 1);
        free(ws[i].name);
    }
    assert_int_equal(r.pnodes, 1);
    watch_registry_destroy(&r);
    free(ws);
}

static void count(watch_t *w, void *arg)
{
    (void)w;
    (*(size_t *)arg)++;
}

/* Issue 14, item 4: 16,384 distinct watched prefix lengths made a SET of a
 * 16 KiB key cost one hash per length (27.6 ms). Matching walks the key
 * once: at most 2 * |K| + 1 steps, with P = 4,096 nested prefixes of the
 * key watched, and with P prefixes that leave the key one byte before
 * their end. (P is smaller than the key so the test stays quick under the
 * sanitizers: adding P nested prefixes costs their P^2/2 bytes.) */
static void test_match_cost_follows_key_length(void **state)
{
    (void)state;
    enum { K = 16384, P = 4096 };
    char *key = malloc(K);
    memset(key, 'x', K);
    for (int shape = 0; shape < 2; shape++) {
        watch_registry_t r;
        assert_int_equal(watch_registry_init(&r), 0);
        watch_t *ws = calloc(P, sizeof *ws);
        for (int i = 0; i < P; i++) {
            ws[i].nlen = (size_t)i + 1;
            ws[i].name = malloc(ws[i].nlen);
            memset(ws[i].name, 'x', ws[i].nlen);
            if (shape == 1 && i > 0)
                ws[i].name[i] = 'y'; /* "x...xy": each prefix of the key but one byte */
            ws[i].prefix = true;
            ws[i].id = (uint64_t)i;
            watch_add(&r, &ws[i]);
        }
        size_t hits = 0;
        r.match_steps = 0;
        watch_match(&r, key, K, count, &hits);
        assert_int_equal(hits, shape == 0 ? P : 1);
        assert_true(r.match_steps <= 2 * (uint64_t)K + 1);
        r.match_steps = 0;
        watch_match(&r, key, 100, count, &hits);
        assert_true(r.match_steps <= 2 * 100 + 1);
        for (int i = 0; i < P; i++) {
            watch_remove(&r, &ws[i]);
            free(ws[i].name);
        }
        assert_int_equal(r.pnodes, 1);
        watch_registry_destroy(&r);
        free(ws);
    }
    free(key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_equals_bruteforce),
        cmocka_unit_test(test_tree_stays_small),
        cmocka_unit_test(test_match_cost_follows_key_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
