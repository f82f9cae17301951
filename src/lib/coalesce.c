/*
 * coalesce.c -- the coalescing FIFO; see ordo/coalesce.h for the contract.
 *
 * Shape. Each waiting key is one entry_t, allocated once with the key bytes
 * inline after it. An entry is linked twice: into the hash table (htab.h,
 * keyed SipHash, so hostile keys cannot build long chains) for O(1) lookup by
 * key, and into a doubly linked list in arrival order for O(1) take from the
 * head, append at the tail and unlink from anywhere (remove by key). A
 * coalescing put finds the entry and swaps its item: the entry does not
 * move, which is what keeps a hot key from being pushed back forever.
 *
 * Locking. One mutex guards everything. Takers wait on not_empty, putters of
 * new keys on not_full; each condition is signalled only when a thread is
 * counted as waiting on it, so the uncontended path makes no system call.
 * The merge function runs under the lock (it must see a consistent entry);
 * drain callbacks run outside it.
 *
 * Invariants (mutex held):
 *   - map.count == len == number of entries on the list;
 *   - capacity == 0 || len <= capacity;
 *   - every entry is on both the list and the map, or on neither (freed or
 *     being handed out);
 *   - a key appears at most once.
 */
#include "ordo/coalesce.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/htab.h"
#include "sync.h"

typedef struct link_s {
    struct link_s *prev;
    struct link_s *next;
} link_t;

typedef struct {
    ordo_hnode_t hnode; /* first: the map hands back hnode pointers */
    link_t link;
    void *item;
    size_t key_len;
    unsigned char key[]; /* key_len bytes, copied at insert */
} entry_t;

struct ordo_coalesce_s {
    pthread_mutex_t mu;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    ordo_htab_t map;
    link_t list; /* sentinel: list.next is the oldest entry */
    size_t len;
    size_t capacity; /* 0: unbounded */
    ordo_coalesce_merge_fn merge;
    void *merge_arg;
    unsigned takers_waiting;
    unsigned putters_waiting;
    bool closed;
};

/* Keys longer than this are refused (ORDO_EINVAL): it keeps the entry size
 * computation far from overflow. No real key comes near it. */
#define COALESCE_KEY_LEN_MAX ((size_t)1 << 30)

static entry_t *entry_of_link(link_t *l)
{
    return (entry_t *)((char *)l - offsetof(entry_t, link));
}

static bool entry_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const entry_t *e = (const entry_t *)n;
    return e->key_len == len && (len == 0 || memcmp(e->key, key, len) == 0);
}

static bool key_ok(const void *key, size_t key_len)
{
    return (key != NULL || key_len == 0) && key_len <= COALESCE_KEY_LEN_MAX;
}

/* ---- list and map, mutex held ------------------------------------------- */

static void list_append(ordo_coalesce_t *q, entry_t *e)
{
    e->link.prev = q->list.prev;
    e->link.next = &q->list;
    q->list.prev->next = &e->link;
    q->list.prev = &e->link;
}

static void list_unlink(entry_t *e)
{
    e->link.prev->next = e->link.next;
    e->link.next->prev = e->link.prev;
    e->link.prev = e->link.next = NULL;
}

static entry_t *find_locked(ordo_coalesce_t *q, uint64_t hash, const void *key, size_t key_len)
{
    return (entry_t *)ordo_htab_find(&q->map, hash, key, key_len);
}

/* Unlink e from list and map; a slot frees up, so wake one blocked putter. */
static void detach_locked(ordo_coalesce_t *q, entry_t *e)
{
    assert(q->len > 0);
    list_unlink(e);
    ordo_htab_remove(&q->map, &e->hnode);
    q->len--;
    assert(q->map.count == q->len);
    if (q->putters_waiting > 0)
        pthread_cond_signal(&q->not_full);
}

/* The oldest entry, detached, or NULL if the queue is empty. */
static entry_t *pop_locked(ordo_coalesce_t *q)
{
    if (q->len == 0)
        return NULL;
    entry_t *e = entry_of_link(q->list.next);
    detach_locked(q, e);
    return e;
}

/* ---- create / destroy ----------------------------------------------------- */

int ordo_coalesce_create(const ordo_coalesce_opts_t *opts, ordo_coalesce_t **q_out)
{
    static const ordo_coalesce_opts_t defaults = {0, NULL, NULL};
    if (q_out == NULL)
        return ORDO_EINVAL;
    if (opts == NULL)
        opts = &defaults;
    ordo_coalesce_t *q = calloc(1, sizeof *q);
    if (q == NULL)
        return ORDO_ENOMEM;
    int rc = ORDO_ESYS;
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto fail_mutex;
    if (ordo_cond_init(&q->not_empty) != 0)
        goto fail_not_empty;
    if (ordo_cond_init(&q->not_full) != 0)
        goto fail_not_full;
    if (ordo_htab_init(&q->map, entry_eq) != 0) {
        rc = ORDO_ENOMEM;
        goto fail_map;
    }
    q->list.prev = q->list.next = &q->list;
    q->capacity = opts->capacity;
    q->merge = opts->merge;
    q->merge_arg = opts->merge_arg;
    *q_out = q;
    return ORDO_OK;

fail_map:
    pthread_cond_destroy(&q->not_full);
fail_not_full:
    pthread_cond_destroy(&q->not_empty);
fail_not_empty:
    pthread_mutex_destroy(&q->mu);
fail_mutex:
    free(q);
    return rc;
}

void ordo_coalesce_destroy(ordo_coalesce_t *q, ordo_coalesce_drain_fn drain_fn, void *arg)
{
    if (q == NULL)
        return;
    assert(drain_fn != NULL || q->len == 0);
    assert(q->takers_waiting == 0 && q->putters_waiting == 0);
    if (drain_fn != NULL)
        ordo_coalesce_drain(q, drain_fn, arg);
    ordo_htab_destroy(&q->map);
    pthread_cond_destroy(&q->not_full);
    pthread_cond_destroy(&q->not_empty);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* ---- put ------------------------------------------------------------------ */

/* Coalesce item into the waiting entry e; returns the put outcome. */
static int coalesce_locked(ordo_coalesce_t *q, entry_t *e, void *item, void **replaced_out)
{
    if (q->merge != NULL) {
        e->item = q->merge(e->item, item, e->key, e->key_len, q->merge_arg);
        return ORDO_COALESCE_MERGED;
    }
    if (replaced_out != NULL)
        *replaced_out = e->item;
    e->item = item;
    return ORDO_COALESCE_REPLACED;
}

/* Append a new entry for key; returns ORDO_COALESCE_INSERTED or ORDO_ENOMEM. */
static int insert_locked(ordo_coalesce_t *q, uint64_t hash, const void *key, size_t key_len,
                         void *item)
{
    assert(q->capacity == 0 || q->len < q->capacity);
    entry_t *e = malloc(sizeof *e + key_len);
    if (e == NULL)
        return ORDO_ENOMEM;
    e->item = item;
    e->key_len = key_len;
    if (key_len > 0)
        memcpy(e->key, key, key_len);
    ordo_htab_insert(&q->map, &e->hnode, hash);
    list_append(q, e);
    q->len++;
    assert(q->map.count == q->len);
    if (q->takers_waiting > 0)
        pthread_cond_signal(&q->not_empty);
    return ORDO_COALESCE_INSERTED;
}

static bool has_room_locked(const ordo_coalesce_t *q)
{
    return q->capacity == 0 || q->len < q->capacity;
}

/* One attempt at a put, mutex held: coalesce or insert. Returns the put
 * outcome, ORDO_ESTOPPED, ORDO_ENOMEM, or ORDO_EFULL when it must wait. */
static int put_step_locked(ordo_coalesce_t *q, uint64_t hash, const void *key, size_t key_len,
                           void *item, void **replaced_out)
{
    if (q->closed)
        return ORDO_ESTOPPED;
    entry_t *e = find_locked(q, hash, key, key_len);
    if (e != NULL)
        return coalesce_locked(q, e, item, replaced_out);
    if (has_room_locked(q))
        return insert_locked(q, hash, key, key_len, item);
    return ORDO_EFULL;
}

int ordo_coalesce_put(ordo_coalesce_t *q, const void *key, size_t key_len, void *item,
                      int64_t timeout_ms, void **replaced_out)
{
    if (replaced_out != NULL)
        *replaced_out = NULL;
    if (q == NULL || !key_ok(key, key_len))
        return ORDO_EINVAL;
    /* The table's hash key is fixed at create, so hashing needs no lock. */
    uint64_t hash = ordo_htab_hash(&q->map, key, key_len);
    uint64_t deadline_ns = ordo_deadline_ns(timeout_ms);
    bool timed_out = false;
    int rc;
    pthread_mutex_lock(&q->mu);
    while ((rc = put_step_locked(q, hash, key, key_len, item, replaced_out)) == ORDO_EFULL) {
        if (timeout_ms == 0)
            break;
        if (timed_out) {
            rc = ORDO_ETIMEDOUT;
            break;
        }
        q->putters_waiting++;
        timed_out = ordo_cond_wait_until(&q->not_full, &q->mu, deadline_ns) != 0;
        q->putters_waiting--;
    }
    /* A putter woken for a free slot may have coalesced instead of taking
     * it: pass the wake-up on so the slot does not sit idle. */
    if (q->putters_waiting > 0 && has_room_locked(q))
        pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* ---- take / remove ----------------------------------------------------------- */

/* Copy e's key out and free e (already detached). */
static void hand_out(entry_t *e, void **item_out, void *key_buf, size_t key_cap,
                     size_t *key_len_out)
{
    *item_out = e->item;
    size_t n = e->key_len < key_cap ? e->key_len : key_cap;
    if (n > 0)
        memcpy(key_buf, e->key, n);
    if (key_len_out != NULL)
        *key_len_out = e->key_len;
    free(e);
}

int ordo_coalesce_take(ordo_coalesce_t *q, int64_t timeout_ms, void **item_out, void *key_buf,
                       size_t key_cap, size_t *key_len_out)
{
    if (q == NULL || item_out == NULL || (key_buf == NULL && key_cap > 0))
        return ORDO_EINVAL;
    uint64_t deadline_ns = ordo_deadline_ns(timeout_ms);
    bool timed_out = false;
    entry_t *e = NULL;
    int rc = ORDO_OK;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (q->closed) {
            rc = ORDO_ESTOPPED;
            break;
        }
        if ((e = pop_locked(q)) != NULL)
            break;
        if (timeout_ms == 0 || timed_out) {
            rc = ORDO_ETIMEDOUT;
            break;
        }
        q->takers_waiting++;
        timed_out = ordo_cond_wait_until(&q->not_empty, &q->mu, deadline_ns) != 0;
        q->takers_waiting--;
    }
    pthread_mutex_unlock(&q->mu);
    if (e == NULL)
        return rc;
    hand_out(e, item_out, key_buf, key_cap, key_len_out);
    return ORDO_OK;
}

int ordo_coalesce_remove(ordo_coalesce_t *q, const void *key, size_t key_len, void **item_out)
{
    if (q == NULL || !key_ok(key, key_len))
        return ORDO_EINVAL;
    uint64_t hash = ordo_htab_hash(&q->map, key, key_len);
    pthread_mutex_lock(&q->mu);
    entry_t *e = find_locked(q, hash, key, key_len);
    if (e != NULL)
        detach_locked(q, e);
    pthread_mutex_unlock(&q->mu);
    if (e == NULL)
        return ORDO_ENOTFOUND;
    if (item_out != NULL)
        *item_out = e->item;
    free(e);
    return ORDO_OK;
}

/* ---- close / drain / len ----------------------------------------------------- */

void ordo_coalesce_close(ordo_coalesce_t *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

size_t ordo_coalesce_drain(ordo_coalesce_t *q, ordo_coalesce_drain_fn fn, void *arg)
{
    assert(fn != NULL);
    size_t n = 0;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        entry_t *e = pop_locked(q);
        pthread_mutex_unlock(&q->mu);
        if (e == NULL)
            return n;
        fn(e->key, e->key_len, e->item, arg);
        free(e);
        n++;
    }
}

size_t ordo_coalesce_len(ordo_coalesce_t *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->len;
    pthread_mutex_unlock(&q->mu);
    return n;
}
