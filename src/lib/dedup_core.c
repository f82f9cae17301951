/*
 * dedup_core.c -- the dedup automaton's state machine; see ordo/dedup.h for
 * the states and the contract.
 *
 * Shape. A key out of Init has one kstate_t, allocated with the key bytes
 * inline and linked into a keyed hash table (htab.h). Init is the absence of
 * an entry: the entry is freed on the transition back, so memory follows the
 * number of active keys (the table also shrinks as they go).
 *
 * Deadlines. Every waiter's deadline is its arrival time plus the one
 * safety timeout, and time never goes backwards (now_ms is clamped to the
 * latest seen), so deadlines are non-decreasing in arrival order. Keys in
 * Block therefore sit on a plain FIFO list, oldest deadline at the head:
 * joining is an append, leaving (promotion, withdrawal) an O(1) unlink, and
 * expire pops from the head. No heap, no timer wheel.
 *
 * No locks, no clock, no blocking: the caller serialises and supplies time.
 *
 * Invariants:
 *   - an entry exists  <=>  the key is in Process or Block; holder != 0;
 *   - waiter != 0  <=>  Block  <=>  the entry is on the waiting list;
 *   - tickets are unique and increasing (next_ticket only grows);
 *   - the waiting list is sorted by waiter_deadline_ms.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/htab.h"
#include "ordo/dedup.h"

/* Keys longer than this are refused: it keeps the entry size computation far
 * from overflow. */
#define DEDUP_KEY_LEN_MAX ((size_t)1 << 30)

typedef struct wlink_s {
    struct wlink_s *prev;
    struct wlink_s *next;
} wlink_t;

typedef struct {
    ordo_hnode_t hnode; /* first: the table hands back hnode pointers */
    wlink_t wlink;      /* on the waiting list while in Block */
    ordo_dedup_ticket_t holder;
    ordo_dedup_ticket_t waiter; /* 0: none */
    void *waiter_udata;
    int64_t waiter_deadline_ms;
    size_t key_len;
    unsigned char key[];
} kstate_t;

struct ordo_dedup_core_s {
    ordo_htab_t map;
    wlink_t waiting; /* sentinel; waiting.next has the earliest deadline */
    int64_t safety_timeout_ms;
    int64_t latest_ms; /* the latest now_ms seen */
    ordo_dedup_ticket_t next_ticket;
};

static bool kstate_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const kstate_t *k = (const kstate_t *)n;
    return k->key_len == len && (len == 0 || memcmp(k->key, key, len) == 0);
}

static bool key_ok(const void *key, size_t key_len)
{
    return (key != NULL || key_len == 0) && key_len <= DEDUP_KEY_LEN_MAX;
}

static kstate_t *kstate_of_wlink(wlink_t *l)
{
    return (kstate_t *)((char *)l - offsetof(kstate_t, wlink));
}

static kstate_t *find(const ordo_dedup_core_t *c, const void *key, size_t key_len)
{
    uint64_t h = ordo_htab_hash(&c->map, key, key_len);
    return (kstate_t *)ordo_htab_find(&c->map, h, key, key_len);
}

/* Clamp now_ms so time never goes backwards; returns the time to use. */
static int64_t advance(ordo_dedup_core_t *c, int64_t now_ms)
{
    if (now_ms > c->latest_ms)
        c->latest_ms = now_ms;
    return c->latest_ms;
}

static ordo_dedup_ticket_t new_ticket(ordo_dedup_core_t *c)
{
    assert(c->next_ticket != 0);
    return c->next_ticket++;
}

/* ---- create / destroy ------------------------------------------------------- */

int ordo_dedup_core_create(int64_t safety_timeout_ms, ordo_dedup_core_t **core_out)
{
    if (safety_timeout_ms < 0 || core_out == NULL)
        return ORDO_EINVAL;
    ordo_dedup_core_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ORDO_ENOMEM;
    if (ordo_htab_init(&c->map, kstate_eq) != 0) {
        free(c);
        return ORDO_ENOMEM;
    }
    c->waiting.prev = c->waiting.next = &c->waiting;
    c->safety_timeout_ms = safety_timeout_ms;
    c->latest_ms = INT64_MIN;
    c->next_ticket = 1;
    *core_out = c;
    return ORDO_OK;
}

static void free_kstate(ordo_hnode_t *n, void *arg)
{
    ordo_htab_remove(arg, n);
    free(n);
}

void ordo_dedup_core_destroy(ordo_dedup_core_t *c)
{
    if (c == NULL)
        return;
    ordo_htab_foreach(&c->map, free_kstate, &c->map);
    ordo_htab_destroy(&c->map);
    free(c);
}

/* ---- the waiting list ----------------------------------------------------------- */

static void wait_append(ordo_dedup_core_t *c, kstate_t *k)
{
    assert(c->waiting.prev == &c->waiting ||
           kstate_of_wlink(c->waiting.prev)->waiter_deadline_ms <= k->waiter_deadline_ms);
    k->wlink.prev = c->waiting.prev;
    k->wlink.next = &c->waiting;
    c->waiting.prev->next = &k->wlink;
    c->waiting.prev = &k->wlink;
}

static void wait_unlink(kstate_t *k)
{
    k->wlink.prev->next = k->wlink.next;
    k->wlink.next->prev = k->wlink.prev;
    k->wlink.prev = k->wlink.next = NULL;
}

/* Block -> Process: the waiter becomes the holder. Returns who it was. */
static ordo_dedup_promotion_t promote(kstate_t *k)
{
    assert(k->waiter != 0);
    ordo_dedup_promotion_t p = {k->waiter, k->waiter_udata};
    wait_unlink(k);
    k->holder = k->waiter;
    k->waiter = 0;
    k->waiter_udata = NULL;
    return p;
}

/* ---- transitions -------------------------------------------------------------------- */

/* Init -> Process. */
static int arrive_init(ordo_dedup_core_t *c, const void *key, size_t key_len,
                       ordo_dedup_arrival_t *arrival_out)
{
    kstate_t *k = malloc(sizeof *k + key_len);
    if (k == NULL)
        return ORDO_ENOMEM;
    memset(k, 0, sizeof *k);
    k->key_len = key_len;
    if (key_len > 0)
        memcpy(k->key, key, key_len);
    k->holder = new_ticket(c);
    ordo_htab_insert(&c->map, &k->hnode, ordo_htab_hash(&c->map, key, key_len));
    *arrival_out = (ordo_dedup_arrival_t){k->holder, 0};
    return ORDO_DEDUP_HOLDER;
}

/* Process -> Block. */
static int arrive_process(ordo_dedup_core_t *c, kstate_t *k, int64_t now_ms, void *udata,
                          ordo_dedup_arrival_t *arrival_out)
{
    assert(k->waiter == 0);
    k->waiter = new_ticket(c);
    k->waiter_udata = udata;
    k->waiter_deadline_ms = now_ms > INT64_MAX - c->safety_timeout_ms
                                ? INT64_MAX
                                : now_ms + c->safety_timeout_ms;
    wait_append(c, k);
    *arrival_out = (ordo_dedup_arrival_t){k->waiter, k->waiter_deadline_ms};
    return ORDO_DEDUP_WAITER;
}

int ordo_dedup_core_arrive(ordo_dedup_core_t *c, const void *key, size_t key_len,
                           int64_t now_ms, void *udata, ordo_dedup_arrival_t *arrival_out)
{
    if (c == NULL || !key_ok(key, key_len) || arrival_out == NULL)
        return ORDO_EINVAL;
    now_ms = advance(c, now_ms);
    kstate_t *k = find(c, key, key_len);
    if (k == NULL)
        return arrive_init(c, key, key_len, arrival_out);
    if (k->waiter == 0)
        return arrive_process(c, k, now_ms, udata, arrival_out);
    return ORDO_EDECLINED;
}

int ordo_dedup_core_finish(ordo_dedup_core_t *c, const void *key, size_t key_len,
                           ordo_dedup_ticket_t ticket, int64_t now_ms,
                           ordo_dedup_promotion_t *promoted_out)
{
    if (promoted_out != NULL)
        *promoted_out = (ordo_dedup_promotion_t){0, NULL};
    if (c == NULL || !key_ok(key, key_len))
        return ORDO_EINVAL;
    advance(c, now_ms);
    kstate_t *k = find(c, key, key_len);
    if (k == NULL || ticket == 0)
        return ORDO_DEDUP_STALE;
    if (ticket == k->waiter) {
        wait_unlink(k);
        k->waiter = 0;
        k->waiter_udata = NULL;
        return ORDO_DEDUP_WITHDRAWN;
    }
    if (ticket != k->holder)
        return ORDO_DEDUP_STALE;
    if (k->waiter == 0) {
        ordo_htab_remove(&c->map, &k->hnode);
        free(k);
        return ORDO_DEDUP_IDLE;
    }
    ordo_dedup_promotion_t p = promote(k);
    if (promoted_out != NULL)
        *promoted_out = p;
    return ORDO_DEDUP_PROMOTED;
}

size_t ordo_dedup_core_expire(ordo_dedup_core_t *c, int64_t now_ms, ordo_dedup_expire_fn fn,
                              void *arg)
{
    now_ms = advance(c, now_ms);
    size_t n = 0;
    while (c->waiting.next != &c->waiting) {
        kstate_t *k = kstate_of_wlink(c->waiting.next);
        if (k->waiter_deadline_ms > now_ms)
            break;
        ordo_dedup_ticket_t stale = k->holder;
        ordo_dedup_promotion_t p = promote(k);
        if (fn != NULL)
            fn(k->key, k->key_len, p, stale, arg);
        n++;
    }
    return n;
}

int ordo_dedup_core_next_deadline(const ordo_dedup_core_t *c, int64_t *deadline_ms_out)
{
    if (c->waiting.next == &c->waiting)
        return ORDO_ENOTFOUND;
    *deadline_ms_out = kstate_of_wlink(c->waiting.next)->waiter_deadline_ms;
    return ORDO_OK;
}

ordo_dedup_state_t ordo_dedup_core_state(const ordo_dedup_core_t *c, const void *key,
                                         size_t key_len)
{
    if (!key_ok(key, key_len))
        return ORDO_DEDUP_INIT;
    const kstate_t *k = find(c, key, key_len);
    if (k == NULL)
        return ORDO_DEDUP_INIT;
    return k->waiter != 0 ? ORDO_DEDUP_BLOCK : ORDO_DEDUP_PROCESS;
}

size_t ordo_dedup_core_active(const ordo_dedup_core_t *c)
{
    return c->map.count;
}
