/*
 * watch.c -- watch membership and matching; see watch.h.
 *
 * Invariants: every watch is in exactly one group, whose name and kind
 * (exact or prefix) equal the watch's; a group exists only while it has a
 * watch; plens holds exactly the lengths of the existing prefix groups, with
 * plen_refs[i] the number of prefix groups of length plens[i].
 */
#include "watch.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

struct watch_group_s {
    ordo_hnode_t node;
    watch_t *head;
    bool prefix;
    size_t nlen;
    char name[];
};

static bool group_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const watch_group_t *g = (const watch_group_t *)n;
    return g->nlen == len && memcmp(g->name, key, len) == 0;
}

int watch_registry_init(watch_registry_t *r)
{
    memset(r, 0, sizeof *r);
    if (ordo_htab_init(&r->exact, group_eq) != 0)
        return -1;
    if (ordo_htab_init(&r->prefixes, group_eq) != 0) {
        ordo_htab_destroy(&r->exact);
        return -1;
    }
    return 0;
}

static void free_group(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

void watch_registry_destroy(watch_registry_t *r)
{
    ordo_htab_foreach(&r->exact, free_group, NULL);
    ordo_htab_foreach(&r->prefixes, free_group, NULL);
    ordo_htab_destroy(&r->exact);
    ordo_htab_destroy(&r->prefixes);
    free(r->plens);
    free(r->plen_refs);
}

/* Binary search for len in plens; returns its index or where it would go. */
static size_t plen_find(const watch_registry_t *r, size_t len)
{
    size_t lo = 0, hi = r->nplens;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->plens[mid] < len)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void plen_ref(watch_registry_t *r, size_t len)
{
    size_t i = plen_find(r, len);
    if (i < r->nplens && r->plens[i] == len) {
        r->plen_refs[i]++;
        return;
    }
    if (r->nplens == r->plens_cap) {
        r->plens_cap = r->plens_cap ? r->plens_cap * 2 : 8;
        r->plens = ordo_xrealloc(r->plens, r->plens_cap * sizeof *r->plens);
        r->plen_refs = ordo_xrealloc(r->plen_refs, r->plens_cap * sizeof *r->plen_refs);
    }
    memmove(r->plens + i + 1, r->plens + i, (r->nplens - i) * sizeof *r->plens);
    memmove(r->plen_refs + i + 1, r->plen_refs + i, (r->nplens - i) * sizeof *r->plen_refs);
    r->plens[i] = len;
    r->plen_refs[i] = 1;
    r->nplens++;
}

static void plen_unref(watch_registry_t *r, size_t len)
{
    size_t i = plen_find(r, len);
    assert(i < r->nplens && r->plens[i] == len);
    if (--r->plen_refs[i] > 0)
        return;
    memmove(r->plens + i, r->plens + i + 1, (r->nplens - i - 1) * sizeof *r->plens);
    memmove(r->plen_refs + i, r->plen_refs + i + 1, (r->nplens - i - 1) * sizeof *r->plen_refs);
    r->nplens--;
}

void watch_add(watch_registry_t *r, watch_t *w)
{
    ordo_htab_t *t = w->prefix ? &r->prefixes : &r->exact;
    uint64_t h = ordo_htab_hash(t, w->name, w->nlen);
    watch_group_t *g = (watch_group_t *)ordo_htab_find(t, h, w->name, w->nlen);
    if (g == NULL) {
        g = ordo_xmalloc(sizeof *g + w->nlen);
        g->head = NULL;
        g->prefix = w->prefix;
        g->nlen = w->nlen;
        memcpy(g->name, w->name, w->nlen);
        ordo_htab_insert(t, &g->node, h);
        if (w->prefix)
            plen_ref(r, w->nlen);
    }
    w->group = g;
    w->gprev = NULL;
    w->gnext = g->head;
    if (g->head != NULL)
        g->head->gprev = w;
    g->head = w;
    r->count++;
}

void watch_remove(watch_registry_t *r, watch_t *w)
{
    watch_group_t *g = w->group;
    assert(g != NULL);
    if (w->gprev != NULL)
        w->gprev->gnext = w->gnext;
    else
        g->head = w->gnext;
    if (w->gnext != NULL)
        w->gnext->gprev = w->gprev;
    w->group = NULL;
    w->gnext = w->gprev = NULL;
    r->count--;
    if (g->head != NULL)
        return;
    ordo_htab_remove(g->prefix ? &r->prefixes : &r->exact, &g->node);
    if (g->prefix)
        plen_unref(r, g->nlen);
    free(g);
}

static void visit_group(const watch_group_t *g, void (*fn)(watch_t *w, void *arg), void *arg)
{
    for (watch_t *w = g->head; w != NULL; w = w->gnext)
        fn(w, arg);
}

void watch_match(const watch_registry_t *r, const void *key, size_t klen,
                 void (*fn)(watch_t *w, void *arg), void *arg)
{
    if (r->count == 0)
        return;
    if (r->exact.count > 0) {
        uint64_t h = ordo_htab_hash(&r->exact, key, klen);
        const watch_group_t *g = (const watch_group_t *)ordo_htab_find(&r->exact, h, key, klen);
        if (g != NULL)
            visit_group(g, fn, arg);
    }
    for (size_t i = 0; i < r->nplens && r->plens[i] <= klen; i++) {
        size_t len = r->plens[i];
        uint64_t h = ordo_htab_hash(&r->prefixes, key, len);
        const watch_group_t *g = (const watch_group_t *)ordo_htab_find(&r->prefixes, h, key, len);
        if (g != NULL)
            visit_group(g, fn, arg);
    }
}

bool watch_covers(const watch_t *w, const void *key, size_t klen)
{
    if (w->prefix)
        return klen >= w->nlen && memcmp(key, w->name, w->nlen) == 0;
    return klen == w->nlen && memcmp(key, w->name, klen) == 0;
}
