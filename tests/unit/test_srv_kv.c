/*
 * test_srv_kv.c -- the multi-version key store: version semantics, reads at
 * every revision against a naive reference model, ranges in byte order over
 * binary keys, compaction (full and stepwise), the change log and its
 * cursors, a seeded randomized run against the model (also with the index
 * deferred and settled between rounds of checks), and memory per key
 * for a million keys.
 *
 * The reference model is a plain array of operations (rev, key, value or
 * delete) replayed from the start for every question; it is slow and
 * obviously right, which is the point.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/kv.h"

/* ---- reference model ------------------------------------------------------------ */

typedef struct {
    uint64_t rev;
    char key[8];
    size_t klen;
    char val[24];  /* NUL-terminated; the stored value is the string without NUL */
    uint64_t lease;
    bool del;
} op_t;

typedef struct {
    op_t *ops;
    size_t n, cap;
} model_t;

typedef struct {
    bool present;
    uint64_t create_rev, mod_rev, version, lease;
    char val[24]; /* a copy: the model's array moves as it grows */
} mstate_t;

static void model_add(model_t *m, uint64_t rev, const void *key, size_t klen, const char *val,
                      uint64_t lease, bool del)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->ops = realloc(m->ops, m->cap * sizeof *m->ops);
        assert_non_null(m->ops);
    }
    op_t *o = &m->ops[m->n++];
    memset(o, 0, sizeof *o);
    o->rev = rev;
    assert_true(klen <= sizeof o->key);
    memcpy(o->key, key, klen);
    o->klen = klen;
    if (val != NULL)
        snprintf(o->val, sizeof o->val, "%s", val);
    o->lease = lease;
    o->del = del;
}

static bool same_key(const op_t *o, const void *key, size_t klen)
{
    return o->klen == klen && (klen == 0 || memcmp(o->key, key, klen) == 0);
}

/* The key's state as of rev, by replaying every operation up to it. */
static mstate_t model_at(const model_t *m, const void *key, size_t klen, uint64_t rev)
{
    mstate_t s = {0};
    for (size_t i = 0; i < m->n && m->ops[i].rev <= rev; i++) {
        const op_t *o = &m->ops[i];
        if (!same_key(o, key, klen))
            continue;
        if (o->del) {
            memset(&s, 0, sizeof s);
            continue;
        }
        if (!s.present) {
            s.present = true;
            s.create_rev = o->rev;
            s.version = 0;
        }
        s.version++;
        s.mod_rev = o->rev;
        s.lease = o->lease;
        memcpy(s.val, o->val, sizeof s.val);
    }
    return s;
}

/* The version a change replaced, which must exist; and whether there is one. */
static kv_version_t prev_of(const kv_change_t *ch)
{
    kv_version_t buf;
    assert_non_null(kv_change_prev(ch, &buf));
    return buf;
}

static bool has_prev(const kv_change_t *ch) { return kv_change_prev(ch, &(kv_version_t){0}) != NULL; }

static void check_version(const kv_version_t *v, const mstate_t *s, const void *key, size_t klen)
{
    if (!s->present) {
        assert_null(v);
        return;
    }
    assert_non_null(v);
    assert_false(v->deleted);
    assert_int_equal(v->mod_rev, s->mod_rev);
    assert_int_equal(v->create_rev, s->create_rev);
    assert_int_equal(v->version, s->version);
    assert_int_equal(v->lease, s->lease);
    assert_int_equal(v->vlen, strlen(s->val));
    assert_memory_equal(v->value, s->val, v->vlen);
    assert_int_equal(v->klen, klen);
    if (klen)
        assert_memory_equal(v->key, key, klen);
}

/* Apply to both the store and the model. */
static void do_put(kv_t *kv, model_t *m, const void *key, size_t klen, const char *val, uint64_t rev)
{
    kv_change_t ch;
    mstate_t before = model_at(m, key, klen, rev);
    assert_int_equal(kv_put(kv, key, klen, val, strlen(val), rev % 5, rev, &ch), KV_OK);
    model_add(m, rev, key, klen, val, rev % 5, false);
    mstate_t after = model_at(m, key, klen, rev);
    check_version(&ch.cur, &after, key, klen);
    check_version(kv_change_prev(&ch, &(kv_version_t){0}), &before, key, klen);
}

static int do_del(kv_t *kv, model_t *m, const void *key, size_t klen, uint64_t rev)
{
    kv_change_t ch;
    mstate_t before = model_at(m, key, klen, rev);
    int rc = kv_del(kv, key, klen, rev, &ch);
    assert_int_equal(rc, before.present ? 1 : 0);
    if (rc == 1) {
        model_add(m, rev, key, klen, NULL, 0, true);
        assert_true(ch.cur.deleted);
        assert_int_equal(ch.cur.mod_rev, rev);
        assert_int_equal(ch.cur.version, 0);
        assert_int_equal(ch.cur.create_rev, 0);
        assert_int_equal(ch.cur.vlen, 0);
        check_version(kv_change_prev(&ch, &(kv_version_t){0}), &before, key, klen);
    }
    return rc;
}

/* Keys and prefixes: every string of length 0..3 over {0x00, 'a', 'b', 0xff},
 * so NUL bytes, 0xFF bytes, the empty key and keys that are prefixes of
 * others all occur. */
enum { ALPHA = 4, NKEYS = 1 + ALPHA + ALPHA * ALPHA + ALPHA * ALPHA * ALPHA };
static const char alphabet[ALPHA] = {'\0', 'a', 'b', (char)0xff};

typedef struct {
    char b[4];
    size_t len;
} bkey_t;

static void make_keys(bkey_t keys[NKEYS])
{
    size_t n = 0;
    for (size_t len = 0; len <= 3; len++) {
        size_t combos = 1;
        for (size_t i = 0; i < len; i++)
            combos *= ALPHA;
        for (size_t c = 0; c < combos; c++) {
            size_t x = c;
            for (size_t i = 0; i < len; i++) {
                keys[n].b[i] = alphabet[x % ALPHA];
                x /= ALPHA;
            }
            keys[n].len = len;
            n++;
        }
    }
    assert_int_equal(n, NKEYS);
}

/* Byte order, written independently of kv.c: byte by byte, unsigned. */
static int ref_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < alen && i < blen; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int bkey_qsort_cmp(const void *a, const void *b)
{
    const bkey_t *x = a, *y = b;
    return ref_cmp(x->b, x->len, y->b, y->len);
}

/* ---- range collection ------------------------------------------------------------- */

typedef struct {
    kv_version_t v[NKEYS + 16]; /* copies: the callback's struct lives for the call only */
    size_t n;
    size_t stop_after; /* 0: never stop */
} collect_t;

static int collect_cb(void *arg, const kv_version_t *v)
{
    collect_t *c = arg;
    assert_true(c->n < sizeof c->v / sizeof c->v[0]);
    c->v[c->n++] = *v;
    return c->stop_after != 0 && c->n == c->stop_after;
}

/* The model's answer to a range, compared with the store's. */
static void check_range(const kv_t *kv, const model_t *m, const bkey_t *sorted, const void *prefix,
                        size_t plen, const void *after, size_t alen, uint64_t at_rev, size_t limit)
{
    collect_t c = {.n = 0};
    long got = kv_range(kv, prefix, plen, after, alen, at_rev, limit, collect_cb, &c);
    assert_true(got >= 0);
    assert_int_equal((size_t)got, c.n);
    uint64_t rev = at_rev ? at_rev : kv_last_rev(kv);
    size_t want = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        const bkey_t *k = &sorted[i];
        if (k->len < plen || (plen && memcmp(k->b, prefix, plen) != 0))
            continue;
        if (after != NULL && ref_cmp(k->b, k->len, after, alen) <= 0)
            continue;
        mstate_t s = model_at(m, k->b, k->len, rev);
        if (!s.present)
            continue;
        if (limit && want == limit)
            break;
        assert_true(want < c.n);
        check_version(&c.v[want], &s, k->b, k->len);
        want++;
    }
    assert_int_equal(want, c.n);
}

/* ---- tests --------------------------------------------------------------------- */

static void test_versions(void **state)
{
    (void)state;
    kv_t *kv = kv_create();
    assert_non_null(kv);
    kv_change_t ch;
    assert_int_equal(kv_last_rev(kv), 0);
    assert_int_equal(kv_oldest_rev(kv), 1);
    assert_null(kv_get(kv, "a", 1, &(kv_version_t){0}));
    assert_int_equal(kv_del(kv, "a", 1, 1, &ch), 0); /* absent: nothing changes */
    assert_int_equal(kv_last_rev(kv), 0);

    assert_int_equal(kv_put(kv, "a", 1, "v1", 2, 7, 3, &ch), KV_OK);
    assert_false(has_prev(&ch));
    assert_int_equal(ch.cur.create_rev, 3);
    assert_int_equal(ch.cur.mod_rev, 3);
    assert_int_equal(ch.cur.version, 1);
    assert_int_equal(ch.cur.lease, 7);
    assert_int_equal(kv_count(kv), 1);

    assert_int_equal(kv_put(kv, "a", 1, "v2", 2, 0, 5, &ch), KV_OK);
    assert_int_equal(ch.cur.create_rev, 3);
    assert_int_equal(ch.cur.mod_rev, 5);
    assert_int_equal(ch.cur.version, 2);
    assert_int_equal(ch.cur.lease, 0);
    assert_true(has_prev(&ch));
    assert_int_equal(prev_of(&ch).mod_rev, 3);
    assert_memory_equal(prev_of(&ch).value, "v1", 2);

    /* Revisions must increase: equal and lower are refused, nothing changes. */
    assert_int_equal(kv_put(kv, "a", 1, "x", 1, 0, 5, NULL), KV_EREV);
    assert_int_equal(kv_put(kv, "b", 1, "x", 1, 0, 4, NULL), KV_EREV);
    assert_int_equal(kv_del(kv, "a", 1, 5, NULL), KV_EREV);
    assert_int_equal(kv_compact(kv, 7), KV_EREV); /* beyond last + 1 */
    assert_int_equal(kv_compact_step(kv, 7, 10), KV_EREV);
    assert_null(kv_get(kv, "b", 1, &(kv_version_t){0}));
    assert_int_equal(kv_get(kv, "a", 1, &(kv_version_t){0})->mod_rev, 5);

    assert_int_equal(kv_del(kv, "a", 1, 8, &ch), 1);
    assert_true(ch.cur.deleted);
    assert_int_equal(ch.cur.version, 0);
    assert_int_equal(ch.cur.create_rev, 0);
    assert_int_equal(ch.cur.mod_rev, 8);
    assert_int_equal(prev_of(&ch).mod_rev, 5);
    assert_null(kv_get(kv, "a", 1, &(kv_version_t){0}));
    assert_int_equal(kv_count(kv), 0);
    assert_int_equal(kv_del(kv, "a", 1, 9, &ch), 0); /* already deleted */
    assert_int_equal(kv_last_rev(kv), 8);

    /* A put after a delete starts a new life. */
    assert_int_equal(kv_put(kv, "a", 1, "", 0, 0, 10, &ch), KV_OK);
    assert_false(has_prev(&ch)); /* the replaced version was a tombstone */
    assert_int_equal(ch.cur.create_rev, 10);
    assert_int_equal(ch.cur.version, 1);
    assert_int_equal(ch.cur.vlen, 0);
    assert_non_null(ch.cur.value);
    assert_int_equal(kv_count(kv), 1);
    assert_int_equal(kv_last_rev(kv), 10);

    /* change_out may be NULL. */
    assert_int_equal(kv_put(kv, "b", 1, "x", 1, 0, 11, NULL), KV_OK);
    assert_int_equal(kv_del(kv, "b", 1, 12, NULL), 1);

    kv_stats_t st;
    kv_stats(kv, &st);
    assert_int_equal(st.keys, 1);
    assert_int_equal(st.versions, 6);
    assert_int_equal(st.log_entries, 6);
    assert_true(st.bytes > 0);
    kv_destroy(kv);
    kv_destroy(NULL);
}

/* A scripted history over a few keys, sparse revisions, read at every
 * revision. */
static void scripted_history(kv_t *kv, model_t *m)
{
    do_put(kv, m, "k1", 2, "a", 2);
    do_put(kv, m, "k2", 2, "b", 3);
    do_put(kv, m, "k1", 2, "c", 6);
    assert_int_equal(do_del(kv, m, "k2", 2, 7), 1);
    do_put(kv, m, "k3", 2, "d", 9);
    assert_int_equal(do_del(kv, m, "k1", 2, 10), 1);
    do_put(kv, m, "k2", 2, "e", 14);
    do_put(kv, m, "k1", 2, "f", 15);
    do_put(kv, m, "k2", 2, "g", 16);
    assert_int_equal(do_del(kv, m, "k3", 2, 20), 1);
    do_put(kv, m, "k4", 2, "h", 21);
    assert_int_equal(do_del(kv, m, "k4", 2, 22), 1);
    do_put(kv, m, "k1", 2, "i", 25);
}

static const char *const script_keys[] = {"k1", "k2", "k3", "k4", "k5"};

static void check_all_reads(const kv_t *kv, const model_t *m, uint64_t from_rev, uint64_t to_rev)
{
    for (uint64_t r = 0; r <= to_rev; r++) {
        for (size_t i = 0; i < sizeof script_keys / sizeof script_keys[0]; i++) {
            const kv_version_t *v = (const kv_version_t *)1;
            int rc = kv_get_at(kv, script_keys[i], 2, r, &(kv_version_t){0}, &v);
            if (r < from_rev) {
                assert_int_equal(rc, KV_ECOMPACTED);
                continue;
            }
            assert_int_equal(rc, KV_OK);
            mstate_t s = model_at(m, script_keys[i], 2, r);
            check_version(v, &s, script_keys[i], 2);
        }
    }
}

static void test_get_at_scripted(void **state)
{
    (void)state;
    kv_t *kv = kv_create();
    model_t m = {0};
    scripted_history(kv, &m);
    check_all_reads(kv, &m, 1, 30);
    for (size_t i = 0; i < 5; i++) {
        mstate_t s = model_at(&m, script_keys[i], 2, 100);
        check_version(kv_get(kv, script_keys[i], 2, &(kv_version_t){0}), &s, script_keys[i], 2);
    }
    /* Compact at every point in turn; reads at and above stay exact. */
    for (uint64_t p = 2; p <= kv_last_rev(kv) + 1; p++) {
        assert_int_equal(kv_compact(kv, p), KV_OK);
        assert_int_equal(kv_oldest_rev(kv), p);
        check_all_reads(kv, &m, p, 30);
    }
    /* At 26 only live keys remain: k1 and k2. */
    kv_stats_t st;
    kv_stats(kv, &st);
    assert_int_equal(st.keys, 2);
    assert_int_equal(st.versions, 2);
    assert_int_equal(st.log_entries, 0);
    free(m.ops);
    kv_destroy(kv);
}

static void test_range(void **state)
{
    (void)state;
    kv_t *kv = kv_create();
    model_t m = {0};
    bkey_t keys[NKEYS], sorted[NKEYS];
    make_keys(keys);
    memcpy(sorted, keys, sizeof keys);
    qsort(sorted, NKEYS, sizeof sorted[0], bkey_qsort_cmp);

    /* Put every key, in the generation order (not sorted). */
    uint64_t rev = 1;
    for (size_t i = 0; i < NKEYS; i++) {
        char val[16];
        snprintf(val, sizeof val, "v%zu", i);
        do_put(kv, &m, keys[i].b, keys[i].len, val, rev++);
    }
    uint64_t all_rev = rev - 1;
    /* The full walk is in byte order: 0x00 < 'a' < 'b' < 0xff, shorter first. */
    collect_t c = {.n = 0};
    assert_int_equal(kv_range(kv, NULL, 0, NULL, 0, 0, 0, collect_cb, &c), NKEYS);
    for (size_t i = 0; i < NKEYS; i++) {
        assert_int_equal(c.v[i].klen, sorted[i].len);
        assert_memory_equal(c.v[i].key, sorted[i].b, sorted[i].len);
    }
    assert_int_equal(c.v[0].klen, 0); /* the empty key sorts first */

    /* Delete a third of the keys, rewrite another third. */
    for (size_t i = 0; i < NKEYS; i++) {
        if (i % 3 == 0)
            do_del(kv, &m, keys[i].b, keys[i].len, rev++);
        else if (i % 3 == 1)
            do_put(kv, &m, keys[i].b, keys[i].len, "w", rev++);
    }

    /* Every prefix of length 0..2 (incl. ones equal to a key and ones ending
     * in 0xFF), with and without `after`, limits, now and at old revisions. */
    const uint64_t revs[] = {0, 1, 5, all_rev, all_rev + 7, rev - 1};
    const size_t limits[] = {0, 1, 3};
    for (size_t pi = 0; pi < NKEYS; pi++) {
        if (keys[pi].len > 2)
            continue;
        for (size_t ri = 0; ri < sizeof revs / sizeof revs[0]; ri++) {
            for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++) {
                check_range(kv, &m, sorted, keys[pi].b, keys[pi].len, NULL, 0, revs[ri], limits[li]);
                for (size_t ai = 0; ai < NKEYS; ai += 7)
                    check_range(kv, &m, sorted, keys[pi].b, keys[pi].len, keys[ai].b, keys[ai].len,
                                revs[ri], limits[li]);
            }
        }
    }
    /* Prefix equal to a key: the key itself is included, `after` it is not. */
    c.n = 0;
    long n = kv_range(kv, "a", 1, NULL, 0, all_rev, 0, collect_cb, &c);
    assert_int_equal(n, 1 + ALPHA + ALPHA * ALPHA);
    assert_int_equal(c.v[0].klen, 1);
    c.n = 0;
    n = kv_range(kv, "a", 1, "a", 1, all_rev, 0, collect_cb, &c);
    assert_int_equal(n, ALPHA + ALPHA * ALPHA);
    /* A prefix ending in 0xFF: exactly the keys under it. */
    c.n = 0;
    n = kv_range(kv, "\xff\xff", 2, NULL, 0, all_rev, 0, collect_cb, &c);
    assert_int_equal(n, 1 + ALPHA);
    /* A prefix that no key has, after every key. */
    c.n = 0;
    assert_int_equal(kv_range(kv, "\xff\xff\xff\xff", 4, NULL, 0, 0, 0, collect_cb, &c), 0);
    /* The callback stops the walk. */
    c.n = 0;
    c.stop_after = 2;
    assert_int_equal(kv_range(kv, NULL, 0, NULL, 0, all_rev, 0, collect_cb, &c), 2);
    c.stop_after = 0;

    /* Ranges below the compaction point are refused; current ones are not. */
    assert_int_equal(kv_compact(kv, all_rev + 1), KV_OK);
    c.n = 0;
    assert_int_equal(kv_range(kv, NULL, 0, NULL, 0, all_rev, 0, collect_cb, &c), KV_ECOMPACTED);
    assert_int_equal(c.n, 0);
    for (size_t ri = 3; ri < sizeof revs / sizeof revs[0]; ri++)
        if (revs[ri] > all_rev)
            check_range(kv, &m, sorted, NULL, 0, NULL, 0, revs[ri], 0);
    check_range(kv, &m, sorted, NULL, 0, NULL, 0, 0, 0);
    free(m.ops);
    kv_destroy(kv);
}

static void test_compact(void **state)
{
    (void)state;
    kv_t *kv = kv_create();
    model_t m = {0};
    kv_stats_t before, after;
    scripted_history(kv, &m);
    kv_stats(kv, &before);
    assert_int_equal(before.versions, 13);

    /* A point at or below the current one does nothing. */
    assert_int_equal(kv_compact(kv, 1), KV_OK);
    assert_int_equal(kv_compact(kv, 0), KV_OK);
    assert_int_equal(kv_oldest_rev(kv), 1);

    /* Compact at 15: k1's put at 15 replaced the tombstone at 10, k2's at 14
     * replaced its tombstone at 7. */
    assert_int_equal(kv_compact(kv, 15), KV_OK);
    assert_int_equal(kv_oldest_rev(kv), 15);
    const kv_version_t *v;
    assert_int_equal(kv_get_at(kv, "k1", 2, 14, &(kv_version_t){0}, &v), KV_ECOMPACTED);
    assert_int_equal(kv_get_at(kv, "k1", 2, 15, &(kv_version_t){0}, &v), KV_OK);
    assert_int_equal(v->mod_rev, 15);
    assert_int_equal(kv_get_at(kv, "k2", 2, 15, &(kv_version_t){0}, &v), KV_OK);
    assert_int_equal(v->mod_rev, 14);
    assert_int_equal(kv_get_at(kv, "k3", 2, 19, &(kv_version_t){0}, &v), KV_OK);
    assert_int_equal(v->mod_rev, 9);
    check_all_reads(kv, &m, 15, 30);
    kv_stats(kv, &after);
    assert_true(after.versions < before.versions);
    assert_true(after.bytes < before.bytes);
    assert_true(after.log_entries < before.log_entries);

    /* The change at the point still carries its PREVVAL. */
    kv_cursor_t cur;
    kv_change_t ch;
    assert_int_equal(kv_log_seek(kv, 14, &cur), KV_OK);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 15);
    assert_false(has_prev(&ch)); /* k1 was deleted before 15 */
    assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 16);
    assert_true(has_prev(&ch));
    assert_int_equal(prev_of(&ch).mod_rev, 14);
    assert_memory_equal(prev_of(&ch).value, "e", 1);

    /* Compact at 16: the change at 16 (k2: e -> g) keeps its PREVVAL. */
    assert_int_equal(kv_compact(kv, 16), KV_OK);
    assert_int_equal(kv_log_seek(kv, 15, &cur), KV_OK);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 16);
    assert_true(has_prev(&ch));
    assert_memory_equal(prev_of(&ch).value, "e", 1);

    /* Compact at 23: k3 (deleted at 20) and k4 (deleted at 22) disappear
     * entirely; k1 and k2 stay. */
    assert_int_equal(kv_compact(kv, 23), KV_OK);
    check_all_reads(kv, &m, 23, 30);
    collect_t c = {.n = 0};
    assert_int_equal(kv_range(kv, NULL, 0, NULL, 0, 23, 0, collect_cb, &c), 2);
    kv_stats(kv, &after);
    assert_int_equal(after.keys, 2);
    /* k1: tombstone at 10 is gone, f at 15 (visible at 23) and i at 25 stay;
     * k2: g at 16. */
    assert_int_equal(after.versions, 3);
    assert_int_equal(after.log_entries, 1);

    /* A tombstone at or above the point keeps its key. */
    assert_int_equal(do_del(kv, &m, "k2", 2, 30), 1);
    assert_int_equal(kv_compact(kv, 30), KV_OK);
    kv_stats(kv, &after);
    assert_int_equal(after.versions, 3); /* k1: i; k2: g and its tombstone */
    assert_int_equal(kv_get_at(kv, "k2", 2, 30, &(kv_version_t){0}, &v), KV_OK);
    assert_null(v);
    assert_int_equal(kv_compact(kv, 31), KV_OK);
    kv_stats(kv, &after);
    assert_int_equal(after.versions, 1);
    assert_int_equal(after.keys, 1);
    assert_int_equal(kv_get_at(kv, "k2", 2, 31, &(kv_version_t){0}, &v), KV_OK);
    assert_null(v);
    assert_int_equal(kv_get_at(kv, "k1", 2, 31, &(kv_version_t){0}, &v), KV_OK);
    assert_memory_equal(v->value, "i", 1);
    /* Compacting to last + 1 empties the log; a new put revives a removed key. */
    assert_int_equal(kv_oldest_rev(kv), kv_last_rev(kv) + 1);
    do_put(kv, &m, "k2", 2, "z", 40);
    assert_int_equal(kv_get(kv, "k2", 2, &(kv_version_t){0})->create_rev, 40);
    assert_int_equal(kv_get(kv, "k2", 2, &(kv_version_t){0})->version, 1);
    free(m.ops);
    kv_destroy(kv);
}

static void test_log(void **state)
{
    (void)state;
    kv_t *kv = kv_create();
    model_t m = {0};
    kv_cursor_t cur;
    kv_change_t ch;

    /* Empty log. */
    assert_int_equal(kv_log_seek(kv, 0, &cur), KV_OK);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 0);

    scripted_history(kv, &m);
    /* From every revision, the log yields exactly the model's changes after
     * it, in order, with their previous values. */
    for (uint64_t r = 0; r <= 30; r++) {
        assert_int_equal(kv_log_seek(kv, r, &cur), KV_OK);
        assert_int_equal(cur.after_rev, r);
        size_t i = 0;
        while (i < m.n && m.ops[i].rev <= r)
            i++;
        while (kv_log_next(kv, &cur, &ch) == 1) {
            assert_true(i < m.n);
            const op_t *o = &m.ops[i++];
            assert_int_equal(ch.cur.mod_rev, o->rev);
            assert_int_equal(cur.after_rev, o->rev);
            assert_int_equal(ch.cur.deleted, o->del);
            mstate_t now = model_at(&m, o->key, o->klen, o->rev);
            mstate_t prev = model_at(&m, o->key, o->klen, o->rev - 1);
            if (!o->del)
                check_version(&ch.cur, &now, o->key, o->klen);
            check_version(kv_change_prev(&ch, &(kv_version_t){0}), &prev, o->key, o->klen);
        }
        assert_int_equal(i, m.n);
    }

    /* A cursor at the end sees later changes. */
    assert_int_equal(kv_log_seek(kv, 25, &cur), KV_OK);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 0);
    do_put(kv, &m, "k9", 2, "n", 27);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 27);

    /* Compaction: seeking below the point is refused; a cursor parked at or
     * after the point survives; one whose unread changes went is told. */
    kv_cursor_t slow, fast;
    assert_int_equal(kv_log_seek(kv, 5, &slow), KV_OK);
    assert_int_equal(kv_log_seek(kv, 15, &fast), KV_OK);
    assert_int_equal(kv_compact(kv, 14), KV_OK);
    assert_int_equal(kv_log_seek(kv, 12, &cur), KV_ECOMPACTED);
    assert_int_equal(kv_log_seek(kv, 13, &cur), KV_OK); /* the first change > 13 is kept */
    assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 14);
    assert_int_equal(kv_log_next(kv, &slow, &ch), KV_ECOMPACTED);
    assert_int_equal(slow.after_rev, 5); /* the caller resumes from here */
    assert_int_equal(kv_log_next(kv, &fast, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 16);
    /* Sparse revisions: a point in a gap. Changes at 14,15 < 16; seeking 15
     * (point - 1) is fine and yields 16. */
    assert_int_equal(kv_compact(kv, 16), KV_OK);
    assert_int_equal(kv_log_seek(kv, 15, &cur), KV_OK);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 16);
    assert_int_equal(kv_compact(kv, 18), KV_OK); /* 17 was never a change */
    assert_int_equal(kv_log_seek(kv, 17, &cur), KV_OK);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 20);
    assert_int_equal(kv_log_seek(kv, 16, &cur), KV_ECOMPACTED);
    assert_int_equal(kv_log_seek(kv, UINT64_MAX, &cur), KV_OK);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 0);
    free(m.ops);
    kv_destroy(kv);
}

static void test_log_grows_and_shrinks(void **state)
{
    (void)state;
    kv_t *kv = kv_create();
    enum { N = 5000 };
    char key[16];
    for (uint64_t r = 1; r <= N; r++) {
        int n = snprintf(key, sizeof key, "k%u", (unsigned)(r % 97));
        assert_int_equal(kv_put(kv, key, (size_t)n, key, (size_t)n, 0, r * 2, NULL), KV_OK);
    }
    kv_cursor_t cur;
    kv_change_t ch;
    for (uint64_t r = 0; r <= 2 * N + 1; r += 13) {
        assert_int_equal(kv_log_seek(kv, r, &cur), KV_OK);
        if (r < 2 * N) {
            assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
            assert_int_equal(ch.cur.mod_rev, (r / 2 + 1) * 2);
        } else {
            assert_int_equal(kv_log_next(kv, &cur, &ch), 0);
        }
    }
    kv_stats_t big, small;
    kv_stats(kv, &big);
    assert_int_equal(kv_compact(kv, 2 * N - 10), KV_OK);
    kv_stats(kv, &small);
    assert_int_equal(small.log_entries, 6);
    assert_int_equal(small.keys, 97);
    assert_true(small.bytes < big.bytes / 4);
    assert_int_equal(kv_log_seek(kv, 2 * N - 11, &cur), KV_OK);
    assert_int_equal(kv_log_next(kv, &cur, &ch), 1);
    assert_int_equal(ch.cur.mod_rev, 2 * N - 10);
    kv_destroy(kv);
}

/* kv_compact_step frees at most max_versions per call and always
 * progresses; the intermediate points are consistent. */
static void test_compact_step(void **state)
{
    (void)state;
    kv_t *kv = kv_create();
    model_t m = {0};
    enum { N = 3000, NK = 50 };
    uint64_t rev = 0;
    for (int i = 0; i < N; i++) {
        char key[8], val[16];
        snprintf(key, sizeof key, "s%02d", i % NK);
        snprintf(val, sizeof val, "%d", i);
        rev += 1 + (uint64_t)(i % 3);
        if (i % 11 == 5)
            do_del(kv, &m, key, 3, rev);
        else
            do_put(kv, &m, key, 3, val, rev);
    }
    uint64_t target = rev - 100;
    kv_stats_t st;
    kv_stats(kv, &st);
    size_t prev_versions = st.versions;
    uint64_t prev_point = kv_oldest_rev(kv);
    int calls = 0, rc;
    do {
        rc = kv_compact_step(kv, target, 8);
        assert_true(rc == 0 || rc == 1);
        calls++;
        kv_stats(kv, &st);
        assert_true(prev_versions - st.versions <= 8);
        assert_true(kv_oldest_rev(kv) >= prev_point);
        assert_true(kv_oldest_rev(kv) <= target);
        prev_versions = st.versions;
        prev_point = kv_oldest_rev(kv);
        if (calls % 50 == 0) {
            /* Reads at the intermediate point are exact. */
            for (int k = 0; k < NK; k++) {
                char key[8];
                snprintf(key, sizeof key, "s%02d", k);
                const kv_version_t *v;
                assert_int_equal(kv_get_at(kv, key, 3, prev_point, &(kv_version_t){0}, &v), KV_OK);
                mstate_t s = model_at(&m, key, 3, prev_point);
                check_version(v, &s, key, 3);
            }
        }
    } while (rc == 0);
    assert_int_equal(kv_oldest_rev(kv), target);
    assert_true(calls > 50);
    /* A budget of 0 or 1 still progresses. */
    do {
        rc = kv_compact_step(kv, rev, 0);
    } while (rc == 0);
    assert_int_equal(kv_oldest_rev(kv), rev);
    assert_int_equal(kv_compact_step(kv, rev, 0), 1);
    free(m.ops);
    kv_destroy(kv);
}

/* Seeded randomized run: thousands of puts and deletes over binary keys, with
 * compactions (full and stepwise) interleaved, every answer checked against
 * the model. */
static uint64_t rnd_state;

static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* With defer, the store runs with deferred indexing (kv_index_defer) and
 * settles it just before each round of checks, so keys created, tombstoned
 * and compacted away while pending, and settling into an index that already
 * holds keys, all meet the same model. */
static void randomized(bool defer)
{
    rnd_state = 0x9e3779b97f4a7c15ULL;
    kv_t *kv = kv_create();
    if (defer) {
        /* Settling with nothing pending changes nothing (and passes no NULL
         * array to qsort: UBSan). */
        kv_index_defer(kv);
        kv_index_settle(kv);
        assert_int_equal(kv_range(kv, NULL, 0, NULL, 0, 0, 0, collect_cb, &(collect_t){.n = 0}), 0);
    }
    model_t m = {0};
    bkey_t keys[NKEYS], sorted[NKEYS];
    make_keys(keys);
    memcpy(sorted, keys, sizeof keys);
    qsort(sorted, NKEYS, sizeof sorted[0], bkey_qsort_cmp);
    enum { OPS = 6000, CHECK_EVERY = 150 };
    uint64_t rev = 0;
    kv_cursor_t watcher;
    size_t watched = 0; /* model ops the watcher has seen */
    assert_int_equal(kv_log_seek(kv, 0, &watcher), KV_OK);

    for (int i = 0; i < OPS; i++) {
        if (defer && i % CHECK_EVERY == 0)
            kv_index_defer(kv);
        const bkey_t *k = &keys[rnd() % 30]; /* a hot subset: deep histories */
        if (rnd() % 4 == 0)
            k = &keys[rnd() % NKEYS];
        rev += 1 + rnd() % 4;
        if (rnd() % 3 == 0) {
            if (do_del(kv, &m, k->b, k->len, rev) == 0)
                rev--; /* the core does not spend it; fine either way */
        } else {
            char val[16];
            snprintf(val, sizeof val, "%d", i);
            do_put(kv, &m, k->b, k->len, val, rev);
        }

        if (rnd() % 100 == 0) {
            /* Compact to a random point between the current one and last + 1. */
            uint64_t lo = kv_oldest_rev(kv), hi = kv_last_rev(kv) + 1;
            uint64_t p = lo + rnd() % (hi - lo + 1);
            if (rnd() % 2) {
                assert_int_equal(kv_compact(kv, p), KV_OK);
            } else {
                while (kv_compact_step(kv, p, 1 + rnd() % 5) == 0)
                    ;
            }
            assert_int_equal(kv_oldest_rev(kv), p > lo ? p : lo);
        }

        /* The watcher reads a few changes now and then. */
        for (int j = (int)(rnd() % 3); j > 0; j--) {
            kv_change_t ch;
            int rc = kv_log_next(kv, &watcher, &ch);
            if (rc == KV_ECOMPACTED) {
                assert_true(watcher.after_rev + 1 < kv_oldest_rev(kv));
                assert_int_equal(kv_log_seek(kv, watcher.after_rev, &watcher), KV_ECOMPACTED);
                assert_int_equal(kv_log_seek(kv, kv_oldest_rev(kv) - 1, &watcher), KV_OK);
                watched = 0;
                while (watched < m.n && m.ops[watched].rev < kv_oldest_rev(kv))
                    watched++;
                continue;
            }
            if (rc == 0) {
                assert_int_equal(watched, m.n);
                break;
            }
            assert_int_equal(rc, 1);
            assert_true(watched < m.n);
            const op_t *o = &m.ops[watched++];
            assert_int_equal(ch.cur.mod_rev, o->rev);
            assert_int_equal(ch.cur.deleted, o->del);
            assert_int_equal(ch.cur.klen, o->klen);
            mstate_t prev = model_at(&m, o->key, o->klen, o->rev - 1);
            check_version(kv_change_prev(&ch, &(kv_version_t){0}), &prev, o->key, o->klen);
        }

        if (i % CHECK_EVERY != CHECK_EVERY - 1)
            continue;
        kv_index_settle(kv);
        uint64_t oldest = kv_oldest_rev(kv), last = kv_last_rev(kv);
        /* Point reads: current, and at random revisions around the history. */
        size_t live = 0;
        for (size_t ki = 0; ki < NKEYS; ki++) {
            mstate_t s = model_at(&m, keys[ki].b, keys[ki].len, last);
            check_version(kv_get(kv, keys[ki].b, keys[ki].len, &(kv_version_t){0}), &s, keys[ki].b, keys[ki].len);
            size_t vlen = 0;
            const char *val = kv_get_value(kv, keys[ki].b, keys[ki].len, &vlen);
            assert_int_equal(val != NULL, s.present);
            if (s.present) {
                assert_int_equal(vlen, strlen(s.val));
                assert_memory_equal(val, s.val, vlen);
            }
            live += s.present;
            for (int j = 0; j < 3; j++) {
                uint64_t r = rnd() % (last + 3);
                const kv_version_t *v;
                int rc = kv_get_at(kv, keys[ki].b, keys[ki].len, r, &(kv_version_t){0}, &v);
                if (r < oldest) {
                    assert_int_equal(rc, KV_ECOMPACTED);
                    continue;
                }
                assert_int_equal(rc, KV_OK);
                s = model_at(&m, keys[ki].b, keys[ki].len, r);
                check_version(v, &s, keys[ki].b, keys[ki].len);
            }
        }
        assert_int_equal(kv_count(kv), live);
        kv_stats_t st;
        kv_stats(kv, &st);
        assert_int_equal(st.keys, live);
        /* Ranges at random revisions with random prefixes, afters, limits. */
        for (int j = 0; j < 10; j++) {
            const bkey_t *p = &keys[rnd() % (1 + ALPHA + ALPHA * ALPHA)];
            const bkey_t *a = rnd() % 2 ? &keys[rnd() % NKEYS] : NULL;
            uint64_t r = rnd() % 2 ? 0 : oldest + rnd() % (last - oldest + 2);
            size_t limit = rnd() % 3 == 0 ? 1 + rnd() % 5 : 0;
            check_range(kv, &m, sorted, p->b, p->len, a ? a->b : NULL, a ? a->len : 0, r, limit);
        }
        /* The whole log from the point on is the model's tail. */
        kv_cursor_t cur;
        kv_change_t ch;
        assert_int_equal(kv_log_seek(kv, oldest - 1, &cur), KV_OK);
        size_t oi = 0;
        while (oi < m.n && m.ops[oi].rev < oldest)
            oi++;
        assert_int_equal(st.log_entries, m.n - oi);
        while (kv_log_next(kv, &cur, &ch) == 1)
            assert_int_equal(ch.cur.mod_rev, m.ops[oi++].rev);
        assert_int_equal(oi, m.n);
    }
    if (defer) {
        /* Destroying a store with keys still pending frees them too (ASan). */
        kv_index_defer(kv);
        rev = kv_last_rev(kv);
        assert_int_equal(kv_put(kv, "pending1", 8, "x", 1, 0, ++rev, NULL), KV_OK);
        assert_int_equal(kv_put(kv, "pending2", 8, "y", 1, 0, ++rev, NULL), KV_OK);
        assert_int_equal(kv_del(kv, "pending2", 8, ++rev, NULL), 1);
    }
    free(m.ops);
    kv_destroy(kv);
}

/* kv_trim_step(): the history keeps the last N key changes (and no more
 * than B of their key and value bytes) however far apart their revisions
 * are; a cursor at a revision after the last kept change still resumes;
 * the pin stops it; reads at the point are exact. */
static void test_trim_by_changes_and_bytes(void **state)
{
    (void)state;
    kv_t *kv = kv_create();
    model_t m = {0};
    uint64_t rev = 0;
    for (int i = 0; i < 200; i++) {
        char key[8], val[16];
        snprintf(key, sizeof key, "t%02d", i % 20);
        snprintf(val, sizeof val, "v%05d", i); /* 3 + 6 bytes a change */
        rev += 1000; /* revisions spent elsewhere between the changes */
        do_put(kv, &m, key, 3, val, rev);
    }
    kv_stats_t st;
    kv_stats(kv, &st);
    assert_int_equal(st.log_entries, 200);
    assert_int_equal(st.log_bytes, 200 * 9);
    /* pinned at the 51st change: nothing from it on goes */
    while (kv_trim_step(kv, 100, 0, 51 * 1000, 8) == 0)
        ;
    kv_stats(kv, &st);
    assert_int_equal(st.log_entries, 150);
    assert_int_equal(kv_oldest_rev(kv), 51 * 1000);
    while (kv_trim_step(kv, 100, 0, UINT64_MAX, 8) == 0)
        ;
    kv_stats(kv, &st);
    assert_int_equal(st.log_entries, 100);
    assert_int_equal(kv_oldest_rev(kv), 101 * 1000); /* the first change kept */
    /* a watcher that saw revision 500000 (after the last change, 200000,
     * as queue traffic moved the revision on) resumes */
    kv_cursor_t cur;
    assert_int_equal(kv_log_seek(kv, 500000, &cur), KV_OK);
    kv_change_t ch;
    assert_int_equal(kv_log_next(kv, &cur, &ch), 0);
    assert_int_equal(kv_log_seek(kv, 101 * 1000 - 1, &cur), KV_OK);
    assert_int_equal(kv_log_seek(kv, 101 * 1000 - 2, &cur), KV_ECOMPACTED);
    /* reads at the point are exact */
    for (int k = 0; k < 20; k++) {
        char key[8];
        snprintf(key, sizeof key, "t%02d", k);
        const kv_version_t *v;
        assert_int_equal(kv_get_at(kv, key, 3, 101 * 1000, &(kv_version_t){0}, &v), KV_OK);
        assert_non_null(v);
    }
    /* the byte bound: 45 bytes keep 5 changes */
    while (kv_trim_step(kv, 100, 45, UINT64_MAX, 8) == 0)
        ;
    kv_stats(kv, &st);
    assert_int_equal(st.log_entries, 5);
    assert_int_equal(st.log_bytes, 45);
    assert_int_equal(kv_oldest_rev(kv), 196 * 1000);
    assert_int_equal(kv_trim_step(kv, 100, 45, UINT64_MAX, 8), 1); /* within the bounds: nothing to do */
    free(m.ops);
    kv_destroy(kv);
}

static void test_randomized(void **state)
{
    (void)state;
    randomized(false);
}

static void test_randomized_deferred_index(void **state)
{
    (void)state;
    randomized(true);
}

/* A cold key is one allocation: once compaction leaves a key only its
 * newest version, that version moves into the key's node, whose size then
 * follows it (the node grows, shrinks or stays, and may move: its hash
 * link and index links must follow). Checked in both index modes, over
 * enough keys that each moved node has index predecessors on every level,
 * against the byte count of a store that held only the final values. */
/* Range callback: the keys come as k00000, k00001, ... (*arg counts). */
static int in_order_cb(void *arg, const kv_version_t *v)
{
    int *next = arg;
    char key[16];
    int n = snprintf(key, sizeof key, "k%05d", (*next)++);
    assert_int_equal(v->klen, (size_t)n);
    assert_memory_equal(v->key, key, (size_t)n);
    return 0;
}

static void slot_moves(bool deferred)
{
    enum { N = 2000 };
    kv_t *kv = kv_create();
    kv_t *fresh = kv_create();
    if (deferred)
        kv_index_defer(kv);
    char key[16], val[64];
    uint64_t rev = 0;
    for (int i = 0; i < N; i++) { /* first values: 8 bytes */
        int n = snprintf(key, sizeof key, "k%05d", i);
        assert_int_equal(kv_put(kv, key, (size_t)n, "12345678", 8, 0, ++rev, NULL), KV_OK);
    }
    /* Second values: key i gets (i % 3) * 20 bytes, so a third of the
     * nodes keep their size, a third grow and a third shrink (to 0); every
     * fifth one has a lease, which is stored only then. */
    for (int i = 0; i < N; i++) {
        int n = snprintf(key, sizeof key, "k%05d", i);
        size_t vlen = (size_t)(i % 3) * 20;
        memset(val, 'a' + i % 26, vlen);
        uint64_t lease = i % 5 == 0 ? (uint64_t)i + 1 : 0;
        assert_int_equal(kv_put(kv, key, (size_t)n, val, vlen, lease, ++rev, NULL), KV_OK);
    }
    kv_stats_t st;
    kv_stats(kv, &st);
    assert_int_equal(st.versions, 2 * N);
    assert_int_equal(kv_compact(kv, rev + 1), KV_OK);
    kv_stats(kv, &st);
    assert_int_equal(st.versions, N);
    kv_index_settle(kv);

    uint64_t frev = 0;
    for (int i = 0; i < N; i++) {
        int n = snprintf(key, sizeof key, "k%05d", i);
        size_t vlen = (size_t)(i % 3) * 20;
        memset(val, 'a' + i % 26, vlen);
        uint64_t lease = i % 5 == 0 ? (uint64_t)i + 1 : 0;
        /* the same version numbers: a put, then this one */
        assert_int_equal(kv_put(fresh, key, (size_t)n, "x", 1, 0, ++frev, NULL), KV_OK);
        assert_int_equal(kv_put(fresh, key, (size_t)n, val, vlen, lease, ++frev, NULL), KV_OK);
        const kv_version_t *v = kv_get(kv, key, (size_t)n, &(kv_version_t){0});
        assert_non_null(v);
        assert_int_equal(v->vlen, vlen);
        assert_memory_equal(v->value, val, vlen);
        assert_int_equal(v->lease, lease);
        assert_int_equal(v->version, 2);
        assert_int_equal(v->create_rev, (uint64_t)i + 1);
        assert_int_equal(v->mod_rev, (uint64_t)N + (uint64_t)i + 1);
        assert_int_equal(v->klen, (size_t)n);
        assert_memory_equal(v->key, key, (size_t)n);
    }
    /* Fresh holds each key's final value in its node too, once compacted;
     * the first values there were 1 byte, so nodes there were resized as
     * well, and the counts must agree exactly. */
    assert_int_equal(kv_compact(fresh, frev + 1), KV_OK);
    kv_stats_t fst;
    kv_stats(fresh, &fst);
    assert_int_equal(st.bytes, fst.bytes);

    /* The index still holds every key once, in order. */
    int next = 0;
    assert_int_equal(kv_range(kv, "k", 1, NULL, 0, 0, 0, in_order_cb, &next), N);
    assert_int_equal(next, N);
    /* And the moved nodes unlink cleanly: delete all, compact, empty. */
    for (int i = 0; i < N; i++) {
        int n = snprintf(key, sizeof key, "k%05d", i);
        assert_int_equal(kv_del(kv, key, (size_t)n, ++rev, NULL), 1);
    }
    assert_int_equal(kv_compact(kv, rev + 1), KV_OK);
    kv_stats(kv, &st);
    assert_int_equal(st.versions, 0);
    assert_int_equal(kv_range(kv, NULL, 0, NULL, 0, 0, 0, in_order_cb, &next), 0);
    kv_destroy(kv);
    kv_destroy(fresh);
}

/* Keys of every length from 0 to 80 that differ from each other in one
 * byte only, at every position: each lookup finds its own key, and a key
 * one byte off is absent (the hash table compares keys a word at a time,
 * from the last word). */
static void test_keys_differing_in_one_byte(void **state)
{
    (void)state;
    enum { MAXLEN = 80 };
    kv_t *kv = kv_create();
    assert_non_null(kv);
    uint64_t rev = 0;
    unsigned char key[MAXLEN];
    char val[32];
    for (size_t len = 0; len <= MAXLEN; len++) {
        memset(key, 'k', len);
        snprintf(val, sizeof val, "%zu", len);
        assert_int_equal(kv_put(kv, key, len, val, strlen(val), 0, ++rev, NULL), KV_OK);
        for (size_t pos = 0; pos < len; pos++) {
            key[pos] = 'x';
            snprintf(val, sizeof val, "%zu/%zu", len, pos);
            assert_int_equal(kv_put(kv, key, len, val, strlen(val), 0, ++rev, NULL), KV_OK);
            key[pos] = 'k';
        }
    }
    for (size_t len = 0; len <= MAXLEN; len++) {
        size_t vlen;
        const char *v;
        memset(key, 'k', len);
        snprintf(val, sizeof val, "%zu", len);
        assert_non_null(v = kv_get_value(kv, key, len, &vlen));
        assert_int_equal(vlen, strlen(val));
        assert_memory_equal(v, val, vlen);
        for (size_t pos = 0; pos < len; pos++) {
            key[pos] = 'x';
            snprintf(val, sizeof val, "%zu/%zu", len, pos);
            assert_non_null(v = kv_get_value(kv, key, len, &vlen));
            assert_int_equal(vlen, strlen(val));
            assert_memory_equal(v, val, vlen);
            key[pos] = 'y'; /* never written */
            assert_null(kv_get_value(kv, key, len, &vlen));
            assert_int_equal(kv_last_change(kv, key, len), 0);
            key[pos] = 'k';
        }
    }
    kv_destroy(kv);
}

static void test_cold_key_moves_into_its_node(void **state)
{
    (void)state;
    slot_moves(false);
    slot_moves(true);
}

/* A million small keys: memory per key as the store counts it. */
static void test_million_keys(void **state)
{
    (void)state;
    enum { N = 1000000 };
    kv_t *kv = kv_create();
    char key[32];
    for (uint64_t i = 0; i < N; i++) {
        int n = snprintf(key, sizeof key, "key:%07u", (unsigned)i);
        assert_int_equal(kv_put(kv, key, (size_t)n, "xxx", 3, 0, i + 1, NULL), KV_OK);
    }
    kv_stats_t st;
    kv_stats(kv, &st);
    assert_int_equal(st.keys, N);
    assert_int_equal(st.versions, N);
    printf("kv: %u keys (11-byte key, 3-byte value, one version each): %.1f bytes/key\n", N,
           (double)st.bytes / N);
    /* Without the change log (after compacting to the last revision + 1). */
    assert_int_equal(kv_compact(kv, N + 1), KV_OK);
    kv_stats(kv, &st);
    printf("kv: after full compaction: %.1f bytes/key\n", (double)st.bytes / N);
    assert_true(st.bytes / N < 96); /* one allocation per key (83 bytes when this was written) */
    /* A second version per key. */
    for (uint64_t i = 0; i < N; i += 10) {
        int n = snprintf(key, sizeof key, "key:%07u", (unsigned)i);
        assert_int_equal(kv_put(kv, key, (size_t)n, "yyy", 3, 0, N + 1 + i, NULL), KV_OK);
    }
    kv_stats_t st2;
    kv_stats(kv, &st2);
    printf("kv: %.1f bytes per extra version (incl. its log slot)\n",
           (double)(st2.bytes - st.bytes) / (N / 10));
    collect_t c = {.n = 0};
    assert_int_equal(kv_range(kv, "key:099999", 10, NULL, 0, 0, 0, collect_cb, &c), 10);
    kv_destroy(kv);
}

/* Every key of k<lo>..k<hi> (step) is found with its value "v". */
static void check_keys_found(const kv_t *kv, int lo, int hi, int step)
{
    char key[16];
    kv_version_t buf;
    for (int j = lo; j <= hi; j += step) {
        int n = snprintf(key, sizeof key, "k%d", j);
        const kv_version_t *v = kv_get(kv, key, (size_t)n, &buf);
        assert_non_null(v);
        assert_memory_equal(v->value, "v", 1);
    }
}

/* The hash table grows and shrinks a few chains per write (a resize of a
 * large store once stopped the loop for its whole length), and every key
 * stays reachable while its chain waits to move. */
static void test_table_resizes_a_few_chains_per_write(void **state)
{
    (void)state;
    enum { N = 20000, KEEP = 100 };
    kv_t *kv = kv_create();
    assert_non_null(kv);
    char key[16];
    uint64_t rev = 0;
    kv_stats_t st;
    size_t rehashing = 0;
    for (int i = 0; i < N; i++) {
        int n = snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(kv_put(kv, key, (size_t)n, "v", 1, 0, ++rev, NULL), KV_OK);
        kv_stats(kv, &st);
        if (st.rehashing) {
            rehashing++;
            check_keys_found(kv, i % 61, i, 61);
        }
    }
    /* Growing from 16 buckets to 32768 moved half the old array at most
     * per doubling's worth of writes: a resize spans many writes. */
    assert_true(rehashing > N / 4);
    check_keys_found(kv, 0, N - 1, 1);

    /* Shrinking: delete and compact away all but KEEP keys, one at a time. */
    rehashing = 0;
    for (int i = KEEP; i < N; i++) {
        int n = snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(kv_del(kv, key, (size_t)n, ++rev, NULL), 1);
        assert_int_equal(kv_compact(kv, rev + 1), KV_OK);
        kv_stats(kv, &st);
        rehashing += st.rehashing;
        if (i % 211 == 0)
            check_keys_found(kv, 0, KEEP - 1, 1);
    }
    assert_true(rehashing > 0);
    check_keys_found(kv, 0, KEEP - 1, 1);
    kv_version_t buf;
    for (int i = KEEP; i < N; i += 7) {
        int n = snprintf(key, sizeof key, "k%d", i);
        assert_null(kv_get(kv, key, (size_t)n, &buf));
    }
    kv_stats(kv, &st);
    assert_int_equal(st.keys, KEEP);
    kv_destroy(kv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_get_at_scripted),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_compact),
        cmocka_unit_test(test_log),
        cmocka_unit_test(test_log_grows_and_shrinks),
        cmocka_unit_test(test_compact_step),
        cmocka_unit_test(test_trim_by_changes_and_bytes),
        cmocka_unit_test(test_randomized),
        cmocka_unit_test(test_randomized_deferred_index),
        cmocka_unit_test(test_keys_differing_in_one_byte),
        cmocka_unit_test(test_cold_key_moves_into_its_node),
        cmocka_unit_test(test_million_keys),
        cmocka_unit_test(test_table_resizes_a_few_chains_per_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
