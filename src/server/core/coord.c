/*
 * coord.c -- leases, locks, elections; see coord.h for the contract.
 *
 * Data layout
 * -----------
 * Four keyed hash tables (htab.h, SipHash with a per-table key):
 *   leases  by id (its 8 bytes)        -> lease_t
 *   atts    by kv key name              -> att_t   (a key is on at most one lease)
 *   locks   by lock name                -> lock_t  (held locks only)
 *   elects  by election name            -> elect_t (led, or vacant keeping a hand-over)
 * Names live in the same allocation as their struct (flexible array).
 *
 * A lease heads three intrusive circular lists: its attachments (attach
 * order), its locks (acquire order) and its leaderships (campaign order).
 * Those orders are the order of the events when the lease ends, so they are
 * part of the state: they follow from the log, and a snapshot lists members
 * in list order so loading rebuilds them. Acquire and campaign orders are
 * token and term orders (revisions increase), attach order is not.
 *
 * Memory: c->bytes is a running estimate of the heap the state holds
 * (each lease, attachment, lock and election with its name, each leader
 * value and hand-over value, with malloc's overhead: alloc_cost()),
 * updated O(1) wherever one is allocated or freed. It counts items, not the
 * tables' and heap's arrays, so it is a function of the state alone: a
 * snapshot load and a log replay reaching the same state give the same
 * total. max-memory-bytes counts it (coord_bytes()).
 *
 * Deadlines: every lease, lock and leadership embeds a deadline_t; those
 * with a deadline sit in one binary min-heap ordered by (at, id). ids are
 * revisions, unique across kinds, so the order is total and depends only on
 * the state, not on the history of heap operations: coord_due() names the
 * same thing on a replica, and after a restore, as on the original.
 */
#include "coord.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/heap.h"
#include "base/htab.h"

#define CONTAINER_OF(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

typedef struct dlink_s {
    struct dlink_s *prev, *next;
} dlink_t;

typedef struct deadline_s {
    uint64_t at;         /* valid when hn is linked */
    uint64_t id;         /* lease id / token / term: the heap's tie-break */
    ordo_heap_node_t hn; /* linked into the heap iff there is a deadline */
    uint8_t kind;        /* enum coord_kind */
} deadline_t;

typedef struct lease_s {
    ordo_hnode_t node;
    uint64_t id;
    uint64_t ttl_ms;
    deadline_t dl;   /* always in the heap */
    dlink_t keys, locks, elects;
    size_t nkeys;
} lease_t;

typedef struct att_s {
    ordo_hnode_t node;
    dlink_t link;    /* in lease->keys */
    lease_t *lease;
    uint32_t klen;
    char key[];
} att_t;

typedef struct lock_s {
    ordo_hnode_t node;
    uint64_t token;
    deadline_t dl;
    lease_t *lease;  /* NULL for none */
    dlink_t link;    /* in lease->locks when lease != NULL */
    uint32_t nlen;
    char name[];
} lock_t;

typedef struct elect_s {
    ordo_hnode_t node;
    uint64_t term;   /* 0: vacant (then has_handover) */
    uint64_t ttl_ms; /* 0: none (lease-bound) */
    deadline_t dl;
    lease_t *lease;
    dlink_t link;
    char *value;     /* malloc'd, NULL when vacant or empty */
    uint32_t vlen;
    bool has_handover;
    bool handover_lapsed; /* the hand-over is the last value of a term that ended
                           * without resigning (deadline, lease), not handed over */
    char *handover;
    uint32_t hlen;
    uint32_t nlen;
    char name[];
} elect_t;

struct coord_s {
    ordo_htab_t leases, atts, locks, elects;
    ordo_heap_t heap;        /* deadline_t with a deadline, by dl_less */
    uint64_t last_rev;       /* the highest revision used or loaded */
    size_t nleaders, nhandovers;
    size_t bytes;            /* the items' heap estimate: see Memory above */
    ordo_buf_t scratch;      /* the hand-over handed to the last campaign */
    coord_event_cb cb;
    void *cb_arg;
};

/* ---- small helpers --------------------------------------------------------- */

/* What a malloc of n bytes costs (header, 16-byte rounding, minimum
 * chunk), as kv.c and queue.c estimate it. */
static size_t alloc_cost(size_t n)
{
    size_t c = (n + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

/* A value or hand-over: dup_bytes() allocates nothing for n == 0. */
static size_t value_cost(size_t n) { return n ? alloc_cost(n) : 0; }

static void dl_init(dlink_t *h) { h->prev = h->next = h; }
static bool dl_empty(const dlink_t *h) { return h->next == h; }

static void dl_push_back(dlink_t *h, dlink_t *n)
{
    n->prev = h->prev;
    n->next = h;
    h->prev->next = n;
    h->prev = n;
}

static void dl_remove(dlink_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}

static bool bytes_eq(const char *a, size_t alen, const void *b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static void copy_bytes(char *dst, const void *src, size_t n)
{
    if (n > 0)
        memcpy(dst, src, n);
}

static char *dup_bytes(const void *src, size_t n)
{
    if (n == 0)
        return NULL;
    char *p = ordo_xmalloc(n);
    memcpy(p, src, n);
    return p;
}

static bool lease_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const lease_t *l = (const lease_t *)n;
    return len == sizeof l->id && memcmp(&l->id, key, len) == 0;
}

static bool att_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const att_t *a = (const att_t *)n;
    return bytes_eq(a->key, a->klen, key, len);
}

static bool lock_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const lock_t *l = (const lock_t *)n;
    return bytes_eq(l->name, l->nlen, key, len);
}

static bool elect_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const elect_t *e = (const elect_t *)n;
    return bytes_eq(e->name, e->nlen, key, len);
}

static void emit(coord_t *c, const coord_event_t *ev)
{
    if (c->cb != NULL)
        c->cb(c->cb_arg, ev);
}

static void use_rev(coord_t *c, uint64_t rev)
{
    /* Ids are revisions: every one used is above every one before. */
    assert(rev > c->last_rev);
    c->last_rev = rev;
}

static uint64_t remaining(uint64_t at, uint64_t now) { return at > now ? at - now : 0; }

/* ---- the deadline heap ------------------------------------------------------ */

#define DL_HEAP_CAP_MIN 64 /* the first array: small servers never regrow it */

#define DL_OF(n) CONTAINER_OF(n, deadline_t, hn)

/* (at, id): total, since ids are unique revisions (see the top). */
static bool dl_less(const ordo_heap_node_t *na, const ordo_heap_node_t *nb)
{
    const deadline_t *a = DL_OF(na), *b = DL_OF(nb);
    return a->at < b->at || (a->at == b->at && a->id < b->id);
}

static const deadline_t *dl_first(const coord_t *c)
{
    const ordo_heap_node_t *n = ordo_heap_peek(&c->heap);
    return n ? DL_OF(n) : NULL;
}

/* Set (insert or move) d's deadline to at. */
static void heap_set(coord_t *c, deadline_t *d, uint64_t at)
{
    d->at = at;
    if (ordo_heap_linked(&d->hn))
        ordo_heap_update(&c->heap, &d->hn);
    else
        ordo_heap_xpush(&c->heap, &d->hn);
}

static void heap_del(coord_t *c, deadline_t *d)
{
    if (!ordo_heap_linked(&d->hn))
        return;
    ordo_heap_remove(&c->heap, &d->hn);
    d->at = 0;
}

static void dl_reset(deadline_t *d, uint8_t kind, uint64_t id)
{
    d->at = 0;
    d->id = id;
    ordo_heap_node_init(&d->hn);
    d->kind = kind;
}

/* The deadline, 0 if none. */
static uint64_t dl_at(const deadline_t *d) { return ordo_heap_linked(&d->hn) ? d->at : 0; }

/* A deadline that has passed (none: never). */
static bool dl_passed(const deadline_t *d, uint64_t now) { return ordo_heap_linked(&d->hn) && d->at <= now; }

/* ---- lookups ------------------------------------------------------------------ */

static lease_t *lease_find(const coord_t *c, uint64_t id)
{
    if (id == 0)
        return NULL;
    uint64_t h = ordo_htab_hash(&c->leases, &id, sizeof id);
    return (lease_t *)ordo_htab_find(&c->leases, h, &id, sizeof id);
}

static att_t *att_find(const coord_t *c, const void *key, size_t klen)
{
    uint64_t h = ordo_htab_hash(&c->atts, key, klen);
    return (att_t *)ordo_htab_find(&c->atts, h, key, klen);
}

static lock_t *lock_find(const coord_t *c, const void *name, size_t nlen)
{
    uint64_t h = ordo_htab_hash(&c->locks, name, nlen);
    return (lock_t *)ordo_htab_find(&c->locks, h, name, nlen);
}

static elect_t *elect_find(const coord_t *c, const void *name, size_t nlen)
{
    uint64_t h = ordo_htab_hash(&c->elects, name, nlen);
    return (elect_t *)ordo_htab_find(&c->elects, h, name, nlen);
}

static bool lease_lapsed(const lease_t *l, uint64_t now) { return l->dl.at <= now; }

/* A holding (own deadline, optional lease) that has lost its rights. */
static bool holding_lapsed(const deadline_t *d, const lease_t *l, uint64_t now)
{
    return dl_passed(d, now) || (l != NULL && lease_lapsed(l, now));
}

/* Remaining ms of a holding: to the first of its own deadline and its lease's. */
static uint64_t holding_remaining(const deadline_t *d, const lease_t *l, uint64_t now)
{
    uint64_t at = UINT64_MAX;
    if (ordo_heap_linked(&d->hn))
        at = d->at;
    if (l != NULL && l->dl.at < at)
        at = l->dl.at;
    return remaining(at, now);
}

/* ---- lifecycle ------------------------------------------------------------------ */

coord_t *coord_create(void)
{
    coord_t *c = ordo_xcalloc(1, sizeof *c);
    ordo_heap_init(&c->heap, dl_less, DL_HEAP_CAP_MIN, ORDO_HEAP_KEEP);
    int n = 0;
    if (ordo_htab_init(&c->leases, lease_eq) == 0 && ++n && ordo_htab_init(&c->atts, att_eq) == 0 && ++n &&
        ordo_htab_init(&c->locks, lock_eq) == 0 && ++n && ordo_htab_init(&c->elects, elect_eq) == 0)
        return c;
    if (n > 0)
        ordo_htab_destroy(&c->leases);
    if (n > 1)
        ordo_htab_destroy(&c->atts);
    if (n > 2)
        ordo_htab_destroy(&c->locks);
    free(c);
    return NULL;
}

static void free_node(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

static void free_elect(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    elect_t *e = (elect_t *)n;
    free(e->value);
    free(e->handover);
    free(e);
}

void coord_destroy(coord_t *c)
{
    if (c == NULL)
        return;
    ordo_htab_foreach(&c->atts, free_node, NULL);
    ordo_htab_foreach(&c->locks, free_node, NULL);
    ordo_htab_foreach(&c->elects, free_elect, NULL);
    ordo_htab_foreach(&c->leases, free_node, NULL);
    ordo_htab_destroy(&c->atts);
    ordo_htab_destroy(&c->locks);
    ordo_htab_destroy(&c->elects);
    ordo_htab_destroy(&c->leases);
    ordo_buf_free(&c->scratch);
    ordo_heap_destroy(&c->heap);
    free(c);
}

void coord_set_event_cb(coord_t *c, coord_event_cb cb, void *arg)
{
    c->cb = cb;
    c->cb_arg = arg;
}

/* ---- ending things ------------------------------------------------------------- */

/* Free a held lock: out of its lease, the heap and the table; event. */
static void lock_free(coord_t *c, lock_t *lk, int reason)
{
    uint64_t lease = lk->lease ? lk->lease->id : 0;
    if (lk->lease != NULL)
        dl_remove(&lk->link);
    lk->lease = NULL;
    heap_del(c, &lk->dl);
    ordo_htab_remove(&c->locks, &lk->node);
    coord_event_t ev = {.type = COORD_EV_LOCK_FREE, .reason = reason, .name = lk->name, .nlen = lk->nlen,
                        .id = lk->token, .lease = lease};
    emit(c, &ev);
    c->bytes -= alloc_cost(sizeof *lk + lk->nlen);
    free(lk);
}

/* Vacate a led election; it stays in the table only if it keeps a
 * hand-over (set before calling by a resign). A term that ends without
 * resigning -- its deadline passed, its lease ended or was revoked -- keeps
 * its last value as the hand-over, marked lapsed (not handed over), so the
 * next leader can recover the state a crashed leader proclaimed. */
static void elect_vacate(coord_t *c, elect_t *e, int reason)
{
    assert(e->term != 0);
    if (reason != COORD_R_RELEASE) {
        assert(!e->has_handover);
        e->has_handover = true;
        e->handover_lapsed = true;
        e->handover = e->value; /* moved: its bytes are counted as the hand-over's now */
        e->hlen = e->vlen;
        e->value = NULL;
        e->vlen = 0;
    }
    uint64_t lease = e->lease ? e->lease->id : 0;
    if (e->lease != NULL)
        dl_remove(&e->link);
    e->lease = NULL;
    heap_del(c, &e->dl);
    uint64_t term = e->term;
    e->term = 0;
    e->ttl_ms = 0;
    c->bytes -= value_cost(e->vlen);
    free(e->value);
    e->value = NULL;
    e->vlen = 0;
    c->nleaders--;
    if (!e->has_handover)
        ordo_htab_remove(&c->elects, &e->node);
    else
        c->nhandovers++;
    coord_event_t ev = {.type = COORD_EV_VACANT, .reason = reason, .name = e->name, .nlen = e->nlen,
                        .id = term, .lease = lease};
    emit(c, &ev);
    if (!e->has_handover) {
        c->bytes -= alloc_cost(sizeof *e + e->nlen);
        free(e);
    }
}

static void att_unlink(coord_t *c, att_t *a)
{
    dl_remove(&a->link);
    a->lease->nkeys--;
    a->lease = NULL;
    ordo_htab_remove(&c->atts, &a->node);
    c->bytes -= alloc_cost(sizeof *a + a->klen); /* the caller frees it */
}

/* End a lease: it leaves the table and the heap first (so reads from the
 * callback see it gone), then each member, in list order, with its event. */
static void lease_end(coord_t *c, lease_t *l, int reason)
{
    ordo_htab_remove(&c->leases, &l->node);
    heap_del(c, &l->dl);
    while (!dl_empty(&l->keys)) {
        att_t *a = CONTAINER_OF(l->keys.next, att_t, link);
        att_unlink(c, a);
        coord_event_t ev = {.type = COORD_EV_KEY, .reason = COORD_R_LEASE, .name = a->key, .nlen = a->klen,
                            .lease = l->id};
        emit(c, &ev);
        free(a);
    }
    while (!dl_empty(&l->locks))
        lock_free(c, CONTAINER_OF(l->locks.next, lock_t, link), COORD_R_LEASE);
    while (!dl_empty(&l->elects))
        elect_vacate(c, CONTAINER_OF(l->elects.next, elect_t, link), COORD_R_LEASE);
    coord_event_t ev = {.type = COORD_EV_LEASE_END, .reason = reason, .id = l->id};
    emit(c, &ev);
    c->bytes -= alloc_cost(sizeof *l);
    free(l);
}

/* ---- leases ---------------------------------------------------------------------- */

static lease_t *lease_new(coord_t *c, uint64_t id, uint64_t ttl_ms)
{
    lease_t *l = ordo_xcalloc(1, sizeof *l);
    c->bytes += alloc_cost(sizeof *l);
    l->id = id;
    l->ttl_ms = ttl_ms;
    dl_reset(&l->dl, COORD_LEASE, id);
    dl_init(&l->keys);
    dl_init(&l->locks);
    dl_init(&l->elects);
    ordo_htab_insert(&c->leases, &l->node, ordo_htab_hash(&c->leases, &id, sizeof id));
    return l;
}

uint64_t coord_lease_grant(coord_t *c, uint64_t ttl_ms, uint64_t now_ms, uint64_t rev)
{
    assert(ttl_ms > 0);
    use_rev(c, rev);
    lease_t *l = lease_new(c, rev, ttl_ms);
    heap_set(c, &l->dl, now_ms + ttl_ms);
    return rev;
}

int coord_lease_keepalive(coord_t *c, uint64_t id, uint64_t now_ms, uint64_t *remaining_ms)
{
    lease_t *l = lease_find(c, id);
    if (l == NULL || lease_lapsed(l, now_ms))
        return COORD_NOTFOUND;
    heap_set(c, &l->dl, now_ms + l->ttl_ms);
    if (remaining_ms != NULL)
        *remaining_ms = l->ttl_ms;
    return COORD_OK;
}

int coord_lease_revoke(coord_t *c, uint64_t id)
{
    lease_t *l = lease_find(c, id);
    if (l == NULL)
        return 0;
    lease_end(c, l, COORD_R_RELEASE);
    return 1;
}

int coord_lease_expire(coord_t *c, uint64_t id, uint64_t now_ms)
{
    lease_t *l = lease_find(c, id);
    if (l == NULL || !lease_lapsed(l, now_ms))
        return 0;
    lease_end(c, l, COORD_R_EXPIRE);
    return 1;
}

int coord_lease_ttl(const coord_t *c, uint64_t id, uint64_t now_ms, uint64_t *remaining_ms, size_t *nkeys)
{
    const lease_t *l = lease_find(c, id);
    if (l == NULL)
        return 0;
    if (remaining_ms != NULL)
        *remaining_ms = remaining(l->dl.at, now_ms);
    if (nkeys != NULL)
        *nkeys = l->nkeys;
    return 1;
}

bool coord_lease_live(const coord_t *c, uint64_t id, uint64_t now_ms)
{
    const lease_t *l = lease_find(c, id);
    return l != NULL && !lease_lapsed(l, now_ms);
}

static void att_link(att_t *a, lease_t *l)
{
    a->lease = l;
    dl_push_back(&l->keys, &a->link);
    l->nkeys++;
}

int coord_lease_attach(coord_t *c, const void *key, size_t klen, uint64_t id)
{
    lease_t *l = lease_find(c, id);
    if (l == NULL)
        return COORD_NOTFOUND;
    assert(klen <= UINT32_MAX);
    uint64_t h = ordo_htab_hash(&c->atts, key, klen);
    att_t *a = (att_t *)ordo_htab_find(&c->atts, h, key, klen);
    if (a != NULL) {
        if (a->lease == l)
            return COORD_OK;
        dl_remove(&a->link);
        a->lease->nkeys--;
        att_link(a, l);
        return COORD_OK;
    }
    a = ordo_xmalloc(sizeof *a + klen);
    c->bytes += alloc_cost(sizeof *a + klen);
    a->klen = (uint32_t)klen;
    copy_bytes(a->key, key, klen);
    ordo_htab_insert(&c->atts, &a->node, h);
    att_link(a, l);
    return COORD_OK;
}

int coord_lease_detach(coord_t *c, const void *key, size_t klen)
{
    if (c->atts.count == 0)
        return 0;
    att_t *a = att_find(c, key, klen);
    if (a == NULL)
        return 0;
    att_unlink(c, a);
    free(a);
    return 1;
}

uint64_t coord_lease_of(const coord_t *c, const void *key, size_t klen)
{
    if (c->atts.count == 0)
        return 0;
    const att_t *a = att_find(c, key, klen);
    return a ? a->lease->id : 0;
}

/* ---- locks ------------------------------------------------------------------------- */

/* The lock if token holds it with its rights (not lapsed), else NULL. */
static lock_t *lock_holding(const coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t now)
{
    lock_t *lk = lock_find(c, name, nlen);
    if (lk == NULL || lk->token != token || holding_lapsed(&lk->dl, lk->lease, now))
        return NULL;
    return lk;
}

static lock_t *lock_new(coord_t *c, const void *name, size_t nlen, uint64_t token, lease_t *l)
{
    assert(nlen <= UINT32_MAX);
    lock_t *lk = ordo_xmalloc(sizeof *lk + nlen);
    lk->token = token;
    dl_reset(&lk->dl, COORD_LOCK, token);
    lk->lease = l;
    dl_init(&lk->link);
    if (l != NULL)
        dl_push_back(&l->locks, &lk->link);
    lk->nlen = (uint32_t)nlen;
    copy_bytes(lk->name, name, nlen);
    c->bytes += alloc_cost(sizeof *lk + nlen);
    ordo_htab_insert(&c->locks, &lk->node, ordo_htab_hash(&c->locks, name, nlen));
    return lk;
}

int coord_lock_acquire(coord_t *c, const void *name, size_t nlen, uint64_t ttl_ms, uint64_t lease,
                       uint64_t now_ms, uint64_t rev, uint64_t *token)
{
    assert(ttl_ms > 0 || lease != 0);
    lease_t *l = NULL;
    if (lease != 0) {
        l = lease_find(c, lease);
        if (l == NULL || lease_lapsed(l, now_ms))
            return COORD_NOTFOUND;
    }
    lock_t *lk = lock_find(c, name, nlen);
    if (lk != NULL) {
        if (token != NULL)
            *token = lk->token;
        return COORD_BUSY;
    }
    use_rev(c, rev);
    lk = lock_new(c, name, nlen, rev, l);
    if (ttl_ms > 0)
        heap_set(c, &lk->dl, now_ms + ttl_ms);
    if (token != NULL)
        *token = rev;
    return COORD_OK;
}

int coord_lock_release(coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t now_ms)
{
    lock_t *lk = lock_holding(c, name, nlen, token, now_ms);
    if (lk == NULL)
        return 0;
    lock_free(c, lk, COORD_R_RELEASE);
    return 1;
}

int coord_lock_extend(coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t ttl_ms,
                      uint64_t now_ms)
{
    assert(ttl_ms > 0);
    lock_t *lk = lock_holding(c, name, nlen, token, now_ms);
    if (lk == NULL)
        return 0;
    heap_set(c, &lk->dl, now_ms + ttl_ms);
    return 1;
}

int coord_lock_info(const coord_t *c, const void *name, size_t nlen, uint64_t now_ms, coord_lock_info_t *out)
{
    const lock_t *lk = lock_find(c, name, nlen);
    if (lk == NULL)
        return 0;
    if (out != NULL) {
        out->token = lk->token;
        out->remaining_ms = holding_remaining(&lk->dl, lk->lease, now_ms);
        out->deadline_ms = dl_at(&lk->dl);
        out->lease = lk->lease ? lk->lease->id : 0;
    }
    return 1;
}

int coord_lock_check(const coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t now_ms)
{
    if (c->locks.count == 0)
        return 0;
    return lock_holding(c, name, nlen, token, now_ms) != NULL;
}

int coord_lock_expire(coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t now_ms)
{
    lock_t *lk = lock_find(c, name, nlen);
    if (lk == NULL || lk->token != token || !dl_passed(&lk->dl, now_ms))
        return 0;
    lock_free(c, lk, COORD_R_EXPIRE);
    return 1;
}

/* ---- elections ------------------------------------------------------------------------ */

static elect_t *elect_holding(const coord_t *c, const void *name, size_t nlen, uint64_t term, uint64_t now)
{
    if (term == 0)
        return NULL;
    elect_t *e = elect_find(c, name, nlen);
    if (e == NULL || e->term != term || holding_lapsed(&e->dl, e->lease, now))
        return NULL;
    return e;
}

static void leader_out(const elect_t *e, uint64_t now, coord_leader_t *out)
{
    out->term = e->term;
    out->value = e->value;
    out->vlen = e->vlen;
    out->remaining_ms = holding_remaining(&e->dl, e->lease, now);
    out->lease = e->lease ? e->lease->id : 0;
    out->handover = NULL;
    out->hlen = 0;
    out->handover_lapsed = false;
}

static elect_t *elect_new(coord_t *c, const void *name, size_t nlen)
{
    assert(nlen <= UINT32_MAX);
    elect_t *e = ordo_xcalloc(1, sizeof *e + nlen);
    dl_reset(&e->dl, COORD_ELECT, 0);
    dl_init(&e->link);
    e->nlen = (uint32_t)nlen;
    copy_bytes(e->name, name, nlen);
    c->bytes += alloc_cost(sizeof *e + nlen);
    ordo_htab_insert(&c->elects, &e->node, ordo_htab_hash(&c->elects, name, nlen));
    return e;
}

/* Make a vacant (or new) election led by term. */
static void elect_lead(coord_t *c, elect_t *e, uint64_t term, const void *value, size_t vlen, uint64_t ttl_ms,
                       lease_t *l)
{
    assert(e->term == 0 && vlen <= UINT32_MAX);
    e->term = term;
    e->dl.id = term;
    e->ttl_ms = ttl_ms;
    e->value = dup_bytes(value, vlen);
    e->vlen = (uint32_t)vlen;
    c->bytes += value_cost(vlen);
    e->lease = l;
    if (l != NULL)
        dl_push_back(&l->elects, &e->link);
    c->nleaders++;
}

int coord_elect_campaign(coord_t *c, const void *name, size_t nlen, const void *value, size_t vlen,
                         uint64_t ttl_ms, uint64_t lease, uint64_t now_ms, uint64_t rev, coord_leader_t *out)
{
    assert(ttl_ms > 0 || lease != 0);
    lease_t *l = NULL;
    if (lease != 0) {
        l = lease_find(c, lease);
        if (l == NULL || lease_lapsed(l, now_ms))
            return COORD_NOTFOUND;
    }
    elect_t *e = elect_find(c, name, nlen);
    if (e != NULL && e->term != 0) {
        if (out != NULL)
            leader_out(e, now_ms, out);
        return COORD_BUSY;
    }
    use_rev(c, rev);
    if (e == NULL)
        e = elect_new(c, name, nlen);
    /* The hand-over moves to scratch: it is this campaign's, then gone. */
    bool had = e->has_handover, lapsed = e->handover_lapsed;
    c->scratch.len = 0;
    if (had) {
        if (e->hlen > 0)
            ordo_buf_append(&c->scratch, e->handover, e->hlen);
        c->bytes -= value_cost(e->hlen);
        free(e->handover);
        e->handover = NULL;
        e->hlen = 0;
        e->has_handover = false;
        e->handover_lapsed = false;
        c->nhandovers--;
    }
    elect_lead(c, e, rev, value, vlen, ttl_ms, l);
    if (ttl_ms > 0)
        heap_set(c, &e->dl, now_ms + ttl_ms);
    if (out != NULL) {
        leader_out(e, now_ms, out);
        if (had) {
            out->handover = c->scratch.data != NULL ? c->scratch.data : "";
            out->hlen = c->scratch.len;
            out->handover_lapsed = lapsed;
        }
    }
    coord_event_t ev = {.type = COORD_EV_LEADER, .reason = COORD_R_CAMPAIGN, .name = e->name, .nlen = e->nlen,
                        .id = e->term, .lease = lease, .value = e->value, .vlen = e->vlen};
    emit(c, &ev);
    return COORD_OK;
}

int coord_elect_leader(const coord_t *c, const void *name, size_t nlen, uint64_t now_ms, coord_leader_t *out)
{
    const elect_t *e = elect_find(c, name, nlen);
    if (e == NULL || e->term == 0)
        return 0;
    if (out != NULL)
        leader_out(e, now_ms, out);
    return 1;
}

int coord_elect_proclaim(coord_t *c, const void *name, size_t nlen, uint64_t term, const void *value,
                         size_t vlen, uint64_t now_ms)
{
    elect_t *e = elect_holding(c, name, nlen, term, now_ms);
    if (e == NULL)
        return 0;
    assert(vlen <= UINT32_MAX);
    char *v = dup_bytes(value, vlen);
    c->bytes = c->bytes - value_cost(e->vlen) + value_cost(vlen);
    free(e->value);
    e->value = v;
    e->vlen = (uint32_t)vlen;
    coord_event_t ev = {.type = COORD_EV_LEADER, .reason = COORD_R_PROCLAIM, .name = e->name, .nlen = e->nlen,
                        .id = e->term, .lease = e->lease ? e->lease->id : 0, .value = e->value, .vlen = e->vlen};
    emit(c, &ev);
    return 1;
}

int coord_elect_keepalive(coord_t *c, const void *name, size_t nlen, uint64_t term, uint64_t now_ms,
                          uint64_t *remaining_ms)
{
    elect_t *e = elect_holding(c, name, nlen, term, now_ms);
    if (e == NULL)
        return COORD_NOTHOLDER;
    if (e->ttl_ms > 0)
        heap_set(c, &e->dl, now_ms + e->ttl_ms);
    if (remaining_ms != NULL)
        *remaining_ms = holding_remaining(&e->dl, e->lease, now_ms);
    return COORD_OK;
}

int coord_elect_resign(coord_t *c, const void *name, size_t nlen, uint64_t term, const void *handover,
                       size_t hlen, uint64_t now_ms)
{
    elect_t *e = elect_holding(c, name, nlen, term, now_ms);
    if (e == NULL)
        return 0;
    assert(!e->has_handover && hlen <= UINT32_MAX);
    if (handover != NULL) {
        e->has_handover = true;
        e->handover = dup_bytes(handover, hlen);
        e->hlen = (uint32_t)hlen;
        c->bytes += value_cost(hlen);
    }
    elect_vacate(c, e, COORD_R_RELEASE);
    return 1;
}

int coord_elect_check(const coord_t *c, const void *name, size_t nlen, uint64_t term, uint64_t now_ms)
{
    if (c->elects.count == 0)
        return 0;
    return elect_holding(c, name, nlen, term, now_ms) != NULL;
}

int coord_elect_expire(coord_t *c, const void *name, size_t nlen, uint64_t term, uint64_t now_ms)
{
    elect_t *e = elect_find(c, name, nlen);
    if (e == NULL || term == 0 || e->term != term || !dl_passed(&e->dl, now_ms))
        return 0;
    elect_vacate(c, e, COORD_R_EXPIRE);
    return 1;
}

/* ---- deadlines ---------------------------------------------------------------------------- */

uint64_t coord_next_deadline(const coord_t *c)
{
    const deadline_t *d = dl_first(c);
    return d ? d->at : 0;
}

int coord_due(const coord_t *c, uint64_t now_ms, coord_due_t *out)
{
    const deadline_t *d = dl_first(c);
    if (d == NULL || d->at > now_ms)
        return 0;
    out->kind = d->kind;
    out->id = d->id;
    out->deadline_ms = d->at;
    out->name = NULL;
    out->nlen = 0;
    if (d->kind == COORD_LOCK) {
        const lock_t *lk = CONTAINER_OF(d, lock_t, dl);
        out->name = lk->name;
        out->nlen = lk->nlen;
    } else if (d->kind == COORD_ELECT) {
        const elect_t *e = CONTAINER_OF(d, elect_t, dl);
        out->name = e->name;
        out->nlen = e->nlen;
    }
    return 1;
}

/* ---- snapshot --------------------------------------------------------------------------------- */

typedef struct snap_ctx_s {
    coord_item_cb cb;
    void *arg;
} snap_ctx_t;

static void snap_lock(const lock_t *lk, const snap_ctx_t *s)
{
    coord_item_t it = {.kind = COORD_ITEM_LOCK, .id = lk->token, .lease = lk->lease ? lk->lease->id : 0,
                       .deadline_ms = dl_at(&lk->dl), .name = lk->name, .nlen = lk->nlen};
    s->cb(s->arg, &it);
}

static void snap_elect(const elect_t *e, const snap_ctx_t *s)
{
    coord_item_t it = {.kind = COORD_ITEM_ELECT, .id = e->term, .lease = e->lease ? e->lease->id : 0,
                       .ttl_ms = e->ttl_ms, .deadline_ms = dl_at(&e->dl),
                       .name = e->name, .nlen = e->nlen, .value = e->value, .vlen = e->vlen};
    if (e->has_handover) {
        it.handover = e->handover != NULL ? e->handover : "";
        it.hlen = e->hlen;
        it.handover_lapsed = e->handover_lapsed;
    }
    s->cb(s->arg, &it);
}

static void snap_lease(ordo_hnode_t *n, void *arg)
{
    const snap_ctx_t *s = arg;
    const lease_t *l = (const lease_t *)n;
    coord_item_t it = {.kind = COORD_ITEM_LEASE, .id = l->id, .ttl_ms = l->ttl_ms, .deadline_ms = l->dl.at};
    s->cb(s->arg, &it);
    for (const dlink_t *p = l->keys.next; p != &l->keys; p = p->next) {
        const att_t *a = CONTAINER_OF(p, att_t, link);
        coord_item_t k = {.kind = COORD_ITEM_KEY, .lease = l->id, .name = a->key, .nlen = a->klen};
        s->cb(s->arg, &k);
    }
    for (const dlink_t *p = l->locks.next; p != &l->locks; p = p->next)
        snap_lock(CONTAINER_OF(p, lock_t, link), s);
    for (const dlink_t *p = l->elects.next; p != &l->elects; p = p->next)
        snap_elect(CONTAINER_OF(p, elect_t, link), s);
}

static void snap_free_lock(ordo_hnode_t *n, void *arg)
{
    const lock_t *lk = (const lock_t *)n;
    if (lk->lease == NULL)
        snap_lock(lk, arg);
}

static void snap_free_elect(ordo_hnode_t *n, void *arg)
{
    const elect_t *e = (const elect_t *)n;
    if (e->lease == NULL)
        snap_elect(e, arg);
}

void coord_snapshot(const coord_t *c, coord_item_cb cb, void *arg)
{
    /* ordo_htab_foreach() only counts its iteration; the state is unchanged. */
    coord_t *m = (coord_t *)c;
    snap_ctx_t s = {cb, arg};
    ordo_htab_foreach(&m->leases, snap_lease, &s);
    ordo_htab_foreach(&m->locks, snap_free_lock, &s);
    ordo_htab_foreach(&m->elects, snap_free_elect, &s);
}

static void note_rev(coord_t *c, uint64_t id)
{
    if (id > c->last_rev)
        c->last_rev = id;
}

int coord_load(coord_t *c, const coord_item_t *it)
{
    lease_t *l = NULL;
    if (it->kind != COORD_ITEM_LEASE && it->lease != 0) {
        l = lease_find(c, it->lease);
        if (l == NULL)
            return -1;
    }
    if (it->nlen > UINT32_MAX || it->vlen > UINT32_MAX || it->hlen > UINT32_MAX)
        return -1;
    switch (it->kind) {
    case COORD_ITEM_LEASE:
        if (it->id == 0 || it->ttl_ms == 0 || it->deadline_ms == 0 || lease_find(c, it->id) != NULL)
            return -1;
        l = lease_new(c, it->id, it->ttl_ms);
        heap_set(c, &l->dl, it->deadline_ms);
        note_rev(c, it->id);
        return 0;
    case COORD_ITEM_KEY:
        if (l == NULL || att_find(c, it->name, it->nlen) != NULL)
            return -1;
        return coord_lease_attach(c, it->name, it->nlen, it->lease) == COORD_OK ? 0 : -1;
    case COORD_ITEM_LOCK: {
        if (it->id == 0 || (l == NULL && it->deadline_ms == 0) || lock_find(c, it->name, it->nlen) != NULL)
            return -1;
        lock_t *lk = lock_new(c, it->name, it->nlen, it->id, l);
        if (it->deadline_ms != 0)
            heap_set(c, &lk->dl, it->deadline_ms);
        note_rev(c, it->id);
        return 0;
    }
    case COORD_ITEM_ELECT: {
        if (elect_find(c, it->name, it->nlen) != NULL)
            return -1;
        if (it->id == 0) {
            /* vacant: only to keep a hand-over */
            if (it->handover == NULL || l != NULL || it->deadline_ms != 0)
                return -1;
        } else if (it->handover != NULL || (l == NULL && it->deadline_ms == 0) ||
                   (it->deadline_ms == 0) != (it->ttl_ms == 0)) {
            return -1;
        }
        elect_t *e = elect_new(c, it->name, it->nlen);
        if (it->id == 0) {
            e->has_handover = true;
            e->handover_lapsed = it->handover_lapsed;
            e->handover = dup_bytes(it->handover, it->hlen);
            e->hlen = (uint32_t)it->hlen;
            c->bytes += value_cost(it->hlen);
            c->nhandovers++;
            return 0;
        }
        elect_lead(c, e, it->id, it->value, it->vlen, it->ttl_ms, l);
        if (it->deadline_ms != 0)
            heap_set(c, &e->dl, it->deadline_ms);
        note_rev(c, it->id);
        return 0;
    }
    default:
        return -1;
    }
}

void coord_stats(const coord_t *c, coord_stats_t *out)
{
    out->leases = c->leases.count;
    out->attached_keys = c->atts.count;
    out->locks = c->locks.count;
    out->leaders = c->nleaders;
    out->handovers = c->nhandovers;
    out->deadlines = ordo_heap_len(&c->heap);
}

size_t coord_bytes(const coord_t *c) { return c->bytes; }
