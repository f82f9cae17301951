/*
 * queue.c -- keyed work queues; see queue.h for the contract.
 *
 * The states a message moves through
 * ----------------------------------
 *
 *   push ──> WAITING ──deliver──> IN FLIGHT ──ack──> done (result kept RESULTTTL, then gone)
 *     │         ^                  │   │  └─noack: done at once, nothing kept
 *     │DELAY    │ nack, lease out  │   │
 *     v         └──────────────────┘   └─nack DELAY: held (still the key's in-flight
 *   DELAYED ──due──> WAITING           slot, token 0) until the delay ends, then WAITING
 *
 *   attempts exhausted on the way back (nack or lease) ->
 *     ONPOISON deadletter: moved to the DEADLETTER queue as a new WAITING message;
 *                          fate DEADLETTER kept RESULTTTL. Without a DEADLETTER
 *                          queue: as park (never discarded by default)
 *     ONPOISON park:       stays WAITING at its key's head, the key PARKED until unpark
 *     ONPOISON drop:       as deadletter, but discarded when there is no
 *                          DEADLETTER queue (fate DEADLETTER kept RESULTTTL)
 *   a retry policy (BACKOFF, MAXAGE; queue_retry()): a nack without DELAY or
 *     a lease that ran out comes back nack-delayed by the delay the writer
 *     drew, or exhausted at once when the writer found MAXAGE passed
 *   COALESCE onto a key with a waiting message: no new message (merged into it)
 *   ID inside the dedup window: no new message (deduped onto the first)
 *
 * The invariant per key
 * ---------------------
 * A key that has messages has one qkey_t holding its FIFO in delivery order.
 * A key's in-flight messages are the first of its FIFO (they stay there
 * until acked, so a nack or a lease expiry makes one waiting again, moved
 * behind the ones still in flight: with one at most, still first). Hence:
 *   K1 at most KEYCONCURRENCY messages of a key are in flight (nflight:
 *      the inflight bit, and past one a count in queue.conc), and they
 *      are the first nflight of its FIFO (with the default 1: the head);
 *   K2 nwait = FIFO length - nflight, and the tail is waiting iff
 *      nwait > 0 (COALESCE's target);
 *   K3 the key is in the ready heap iff nwait > 0, nflight <
 *      KEYCONCURRENCY, and it is not parked, paused (queue_pause()) or
 *      throttled (KEYRATE) -- and then exactly once (a queue paused as a
 *      whole keeps its ready heap; deliver and peek look at the queue's
 *      pause first);
 *   K4 a qkey_t exists iff its FIFO is non-empty (delayed messages are not
 *      in any FIFO and hold no key state; they carry their key bytes).
 * FAIRNESS roundrobin keeps the ready keys in a ring instead, in the
 * order they became ready (ready_push() and friends choose); the rest of
 * this paragraph is about the heap of FAIRNESS oldest.
 * The ready heap is a binary min-heap of keys ordered by their head's id
 * (with KEYCONCURRENCY 1, the head of a ready key is its next message;
 * above 1 it may be in flight, and an ack or nack that moves the head of a
 * key in the heap takes the key out and puts it back, O(ready keys)).
 * Ids are revisions, so the smallest is the oldest; a key whose in-flight
 * message is acked re-enters with its next message, which may be older than
 * heads already there, and nacked or dead-lettered messages keep old ids,
 * so a FIFO of ready keys would not be oldest-first: the heap is. With
 * KEYCONCURRENCY 1 heads change only while a key is out of the heap
 * (deliver pops it), so the plain path only pushes and pops the least, and
 * keys carry no back-pointer; the rarer changes (a pause, a cancel or
 * expiry of a ready key's head, KEYCONCURRENCY above 1) remove a key by a
 * search, qheap_remove().
 *
 * Delays: a push with DELAY waits in a min-heap ordered by (due, id) and
 * joins its key's FIFO when due; a key's order is the order messages become
 * available (for pushes without DELAY, push order). The move happens in
 * queue_promote(now_ms), which push and deliver call first with their
 * record's time and which the writer's "delay due" record calls: it depends
 * only on record times, so replay moves the same messages at the same
 * point. A nack DELAY is different: the message must keep its place at the
 * head, so it keeps the key's in-flight slot with token 0 and a deadline,
 * and the lease timer brings it back.
 *
 * Data layout and memory (x86-64, glibc chunks: +8 bytes, rounded to 16)
 * -------------------------------------------------------------------------
 *   qmsg_t  next|id|attempt|plen (24) + payload        one allocation per message
 *   qkey_t  hnode|head|tailp|klen|nwait+flags (40) + key bytes
 *   qflight_t one per in-flight delivery: hash node by id, key, message,
 *           token, since, deadline, lease-heap position (64 bytes, an
 *           80-byte chunk: the message pointer KEYCONCURRENCY needs took it
 *           from 64; paid per delivery in flight, not by waiting messages)
 *   ready heap (or ring, FAIRNESS roundrobin): 8 bytes per ready key; key
 *           table: 8 bytes per key (bucket)
 *   pauses, rate buckets, counts past one in flight: side tables, each
 *           allocated at its first entry, so a queue that uses none of
 *           them pays a NULL pointer each
 * A waiting 64-byte payload costs a 96-byte chunk (32 overhead); a distinct
 * 16-byte key a 64-byte chunk (48), plus ~8.4 + ~8.4 for its bucket and
 * heap slot (power-of-two arrays, here ~95% full). Measured by
 * test_srv_queue for a million waiting messages (16-byte keys, 64-byte
 * payloads; queue_info() and glibc's mallinfo2() agree): 96.8 bytes of
 * overhead per message with distinct keys, 32.1 with 1000 keys. The
 * in-flight record (~64 bytes) is paid only by delivered messages.
 * tailp points at the pointer that points at the tail (&head, or the
 * previous message's next), so COALESCE can realloc the tail in place in
 * O(1) with a singly linked FIFO.
 *
 * Dedup entries, idempotency entries and results are in hash tables (by
 * dedup id, by message key and idempotency key, by message id) with a
 * deadline min-heap each; entries know their heap position so an expiry
 * record for any entry removes it in O(log n). An idempotency entry's bytes
 * are its table key: the message key's length (u32, little-endian), the
 * message key, then the idempotency key, so (key, idem) pairs never alias.
 *
 * Memory accounting. Each queue knows its heap bytes in O(1) (queue_bytes():
 * its entry chunks, counted as they are allocated and freed, plus its
 * tables' and heaps' arrays and its own struct). The set keeps the sum over
 * its queues for max-memory-bytes: each queue remembers the share it last
 * added (counted), and queue_account() moves the sum by the difference, so
 * keeping the sum is O(1) per change. Invariant: after queue_open(),
 * queue_drop(), the queue_load_*() calls, and queue_account() on every
 * queue a change touched (core.c does it after each queue record, for the
 * queue and its dead-letter queue), set->bytes == the sum of queue_bytes().
 */
#include "queue.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/heap.h"
#include "base/htab.h"

#define CONTAINER_OF(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* ---- structures ----------------------------------------------------------------- */

typedef struct qmsg_s {
    union {
        struct qmsg_s *next;  /* in a key FIFO */
        size_t klen;          /* delayed: key length; payload is followed by due (8) and key */
    } u;
    uint64_t id;
    uint32_t attempt;
    uint32_t plen;
    char payload[];
} qmsg_t;

typedef struct qkey_s {
    ordo_hnode_t hnode;
    qmsg_t *head;
    qmsg_t **tailp;           /* the pointer that points at the tail (&head if <= 1) */
    uint32_t klen;
    uint32_t nwait : 30;      /* waiting messages (FIFO minus the in-flight head) */
    uint32_t inflight : 1;
    uint32_t parked : 1;
    char bytes[];
} qkey_t;

_Static_assert(offsetof(qkey_t, bytes) == 40, "qkey_t header is 40 bytes");
_Static_assert(offsetof(qmsg_t, payload) == 24, "qmsg_t header is 24 bytes");

typedef struct qflight_s {
    ordo_hnode_t hnode;       /* by message id */
    qkey_t *key;
    qmsg_t *msg;              /* in key's FIFO, among its first nflight (K1) */
    uint64_t token;           /* 0: nack-delayed */
    uint64_t since_ms;
    uint64_t deadline_ms;
    ordo_heap_node_t hn;      /* in the lease heap */
} qflight_t;

typedef struct qdedup_s {
    ordo_hnode_t hnode;
    uint64_t msg_id;
    uint64_t end_ms;
    ordo_heap_node_t hn;      /* in the dedup heap */
    uint32_t dlen;
    char bytes[];
} qdedup_t;

typedef struct qidem_s {
    ordo_hnode_t hnode;
    uint64_t msg_id;
    uint64_t end_ms;
    uint64_t hash;            /* the request the key is bound to */
    ordo_heap_node_t hn;      /* in the idempotency heap */
    uint32_t len;             /* of bytes: 4 + message key + idempotency key */
    char bytes[];
} qidem_t;

typedef struct qresult_s {
    ordo_hnode_t hnode;       /* by message id */
    uint64_t id;
    uint64_t expire_ms;
    uint64_t dl_id;
    ordo_heap_node_t hn;      /* in the result heap */
    uint32_t rlen;
    uint8_t fate;
    char bytes[];
} qresult_t;

/* A key's pause (queue_pause()). Pauses live apart from the keys: a
 * paused key may have no messages (K4: then it has no qkey_t), and a
 * qkey_t has no bit left for it. */
typedef struct qpause_s {
    ordo_hnode_t hnode;       /* in qpauses.keys, by key */
    uint64_t until_ms;        /* 0: until resumed */
    ordo_heap_node_t hn;      /* in qpauses.ends iff until_ms > 0 */
    uint32_t klen;
    char bytes[];
} qpause_t;

/* A queue's paused keys, allocated at its first key pause: a queue that
 * never pauses a key pays one NULL pointer. */
typedef struct qpauses_s {
    ordo_htab_t keys;
    ordo_heap_t ends;         /* timed pauses by until_ms */
} qpauses_t;

/* A key's token bucket (KEYRATE), kept while not full. In exactly one of
 * qrates' heaps: `throttled` (its key is out of turn until release_ms) or
 * `sweep` (freed once full, at full_ms). */
typedef struct qrate_s {
    ordo_hnode_t hnode;       /* in qrates.keys, by key */
    uint64_t level;           /* units of 1/per token, as of last_ms */
    uint64_t last_ms;
    uint64_t event_ms;        /* throttled: release; else when full */
    ordo_heap_node_t hn;
    bool throttled;
    uint32_t klen;
    char bytes[];
} qrate_t;

typedef struct qrates_s {
    ordo_htab_t keys;
    ordo_heap_t throttled;    /* by event_ms: the release */
    ordo_heap_t sweep;        /* by event_ms: when full */
} qrates_t;

/* A key with two or more deliveries in flight (KEYCONCURRENCY > 1): its
 * count. A key with one has only its inflight bit, so a queue that never
 * delivers two of a key at once has no table. */
typedef struct qconc_s {
    ordo_hnode_t hnode;       /* in queue.conc, by the key's address */
    const qkey_t *key;
    uint32_t n;               /* >= 2 */
} qconc_t;

/* Every heap's array starts at this many entries and halves when under a
 * quarter full (never below): queue_info() counts the arrays, so memory
 * follows the live entries. */
#define QUEUE_HEAP_CAP_MIN 16

/* A binary min-heap of pointers, for the ready and delay heaps: they only
 * push and pop the least, so their entries carry no slot (qkey_t and qmsg_t
 * keep their 40- and 24-byte headers, see the layout above). The heaps that
 * remove and re-position entries are ordo_heap (heap.h), whose sift rules
 * and array policy this one shares. */
typedef struct qheap_s {
    void **v;
    size_t n, cap;
    bool (*less)(const void *a, const void *b);
} qheap_t;

/* A FIFO ring of keys: the ready keys of a FAIRNESS roundrobin queue, in
 * the order they became ready. */
typedef struct qring_s {
    qkey_t **v;
    size_t head, n, cap;
} qring_t;

struct queue_s {
    ordo_hnode_t hnode;       /* in the set, by name */
    queue_set_t *set;
    queue_config_t cfg;       /* cfg.deadletter points at dl_name */
    char *dl_name;
    ordo_htab_t keys, flights, dedups, results, idems;
    qheap_t ready, delays;    /* ready: FAIRNESS oldest */
    qring_t rr;               /* ready keys in turn order: FAIRNESS roundrobin */
    ordo_heap_t leases, dedup_heap, result_heap, idem_heap;
    size_t nwaiting, ndelayed, nparked;
    size_t bytes;             /* chunks allocated for entries (arrays added in queue_bytes()) */
    size_t counted;           /* this queue's share of set->bytes, as of its last queue_account() */
    qpauses_t *pauses;        /* paused keys, NULL if none was ever paused */
    ordo_htab_t *conc;        /* keys with 2 or more in flight -> count (KEYCONCURRENCY > 1), or NULL */
    qrates_t *rates;          /* KEYRATE buckets, NULL until a key first spends a token */
    uint64_t rate_level, rate_last_ms; /* RATE: the queue's bucket (level 0, last 0: full) */
    bool paused;              /* the whole queue: nothing is delivered */
    uint64_t paused_until_ms; /* paused: when it ends by itself, 0 for never */
    qmsg_t *limbo_msg;        /* NOACK: freed at the next change, so views stay valid */
    qkey_t *limbo_key;
    uint64_t pushed, merged, deduped, delivered, acked, nacked, redelivered, deadlettered, nparks;
    uint32_t nlen;
    char name[];
};

struct queue_set_s {
    ordo_htab_t queues;
    size_t bytes;             /* the sum of the queues' counted shares */
    size_t nidem;             /* idempotency entries over every queue */
    size_t npaused_keys;      /* paused keys over every queue */
    size_t npaused_queues;    /* queues paused as a whole */
    size_t nmaxwait;          /* queues with MAXWAIT set */
    queue_event_cb event_cb;  /* Q.WATCH: NULL for none */
    void *event_arg;
};

/* Tell the event callback, if any, about a transition of message id. */
static void emit(const queue_t *q, int type, const char *key, size_t klen, uint64_t id, uint64_t n,
                 const char *data, size_t dlen)
{
    if (q->set->event_cb == NULL)
        return;
    queue_event_t ev = {.type = type, .queue = q->name, .qlen = q->nlen, .key = key, .klen = klen, .id = id,
                        .n = n, .data = data, .dlen = dlen};
    q->set->event_cb(q->set->event_arg, &ev);
}

static size_t rate_release_keys(queue_t *q, uint64_t now_ms);

/* ---- small helpers ---------------------------------------------------------------- */

/* Estimated heap cost of an n-byte malloc (glibc: 8-byte header, 16-byte
 * rounding, 32-byte minimum), as kv.c counts it. */
static size_t alloc_cost(size_t n)
{
    size_t c = (n + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

static void htab_init_or_die(ordo_htab_t *t, ordo_htab_eq_fn eq)
{
    if (ordo_htab_init(t, eq) != 0) {
        fprintf(stderr, "ordod: out of memory (queue table)\n");
        abort();
    }
}

static bool key_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qkey_t *k = (const qkey_t *)n;
    return k->klen == len && memcmp(k->bytes, key, len) == 0;
}

static bool flight_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qflight_t *f = (const qflight_t *)n;
    uint64_t id;
    assert(len == sizeof id);
    memcpy(&id, key, sizeof id);
    return f->msg->id == id;
}

static bool dedup_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qdedup_t *d = (const qdedup_t *)n;
    return d->dlen == len && memcmp(d->bytes, key, len) == 0;
}

static bool idem_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qidem_t *e = (const qidem_t *)n;
    return e->len == len && memcmp(e->bytes, key, len) == 0;
}

static bool result_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qresult_t *r = (const qresult_t *)n;
    uint64_t id;
    assert(len == sizeof id);
    memcpy(&id, key, sizeof id);
    return r->id == id;
}

static bool pause_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qpause_t *p = (const qpause_t *)n;
    return p->klen == len && memcmp(p->bytes, key, len) == 0;
}

static bool conc_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qkey_t *k;
    assert(len == sizeof k);
    memcpy(&k, key, sizeof k);
    return ((const qconc_t *)n)->key == k;
}

static bool rate_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qrate_t *r = (const qrate_t *)n;
    return r->klen == len && memcmp(r->bytes, key, len) == 0;
}

static bool queue_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const queue_t *q = (const queue_t *)n;
    return q->nlen == len && memcmp(q->name, key, len) == 0;
}

/* ---- the ready and delay heaps ------------------------------------------------------ */

static void qheap_up(qheap_t *h, size_t i)
{
    void *e = h->v[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!h->less(e, h->v[p]))
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = e;
}

static void qheap_down(qheap_t *h, size_t i)
{
    void *e = h->v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->less(h->v[c + 1], h->v[c]))
            c++;
        if (!h->less(h->v[c], e))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    h->v[i] = e;
}

static void qheap_push(qheap_t *h, void *e)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : QUEUE_HEAP_CAP_MIN;
        h->v = ordo_xrealloc(h->v, h->cap * sizeof *h->v);
    }
    h->v[h->n++] = e;
    qheap_up(h, h->n - 1);
}

/* Remove and return the least element; the heap must not be empty. */
static void *qheap_pop(qheap_t *h)
{
    assert(h->n > 0);
    void *e = h->v[0];
    h->n--;
    if (h->n > 0) {
        h->v[0] = h->v[h->n];
        qheap_down(h, 0);
    }
    /* Give memory back when the heap shrinks to a quarter. */
    if (h->cap > QUEUE_HEAP_CAP_MIN && h->n < h->cap / 4) {
        h->cap /= 2;
        h->v = ordo_xrealloc(h->v, h->cap * sizeof *h->v);
    }
    return e;
}

static void qheap_free(qheap_t *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}

static bool ready_less(const void *a, const void *b)
{
    return ((const qkey_t *)a)->head->id < ((const qkey_t *)b)->head->id;
}

#define FLIGHT_OF(n) CONTAINER_OF(n, qflight_t, hn)
#define DEDUP_OF(n) CONTAINER_OF(n, qdedup_t, hn)
#define RESULT_OF(n) CONTAINER_OF(n, qresult_t, hn)
#define IDEM_OF(n) CONTAINER_OF(n, qidem_t, hn)
#define PAUSE_OF(n) CONTAINER_OF(n, qpause_t, hn)
#define RATE_OF(n) CONTAINER_OF(n, qrate_t, hn)

static bool lease_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    const qflight_t *x = FLIGHT_OF(a), *y = FLIGHT_OF(b);
    if (x->deadline_ms != y->deadline_ms)
        return x->deadline_ms < y->deadline_ms;
    return x->msg->id < y->msg->id;
}

static uint64_t delayed_due(const qmsg_t *m)
{
    uint64_t due;
    memcpy(&due, m->payload + m->plen, sizeof due);
    return due;
}

static const char *delayed_key(const qmsg_t *m)
{
    return m->payload + m->plen + sizeof(uint64_t);
}

static bool delay_less(const void *a, const void *b)
{
    const qmsg_t *x = a, *y = b;
    uint64_t dx = delayed_due(x), dy = delayed_due(y);
    return dx != dy ? dx < dy : x->id < y->id;
}

static bool dedup_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    const qdedup_t *x = DEDUP_OF(a), *y = DEDUP_OF(b);
    return x->end_ms != y->end_ms ? x->end_ms < y->end_ms : x->msg_id < y->msg_id;
}

static bool idem_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    const qidem_t *x = IDEM_OF(a), *y = IDEM_OF(b);
    return x->end_ms != y->end_ms ? x->end_ms < y->end_ms : x->msg_id < y->msg_id;
}

static bool result_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    const qresult_t *x = RESULT_OF(a), *y = RESULT_OF(b);
    return x->expire_ms != y->expire_ms ? x->expire_ms < y->expire_ms : x->id < y->id;
}

static bool pause_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    const qpause_t *x = PAUSE_OF(a), *y = PAUSE_OF(b);
    if (x->until_ms != y->until_ms)
        return x->until_ms < y->until_ms;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = n ? memcmp(x->bytes, y->bytes, n) : 0;
    return c != 0 ? c < 0 : x->klen < y->klen;
}

static bool rate_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    const qrate_t *x = RATE_OF(a), *y = RATE_OF(b);
    if (x->event_ms != y->event_ms)
        return x->event_ms < y->event_ms;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = n ? memcmp(x->bytes, y->bytes, n) : 0;
    return c != 0 ? c < 0 : x->klen < y->klen;
}

/* Remove e from a ready heap (it must be there): O(n) to find it, as the
 * ready heap keeps no positions (its entries stay 40 bytes); only a key
 * pause, an operator's or a consumer's decision, pays it. */
static void qheap_remove(qheap_t *h, const void *e)
{
    size_t i = 0;
    while (i < h->n && h->v[i] != e)
        i++;
    assert(i < h->n);
    h->n--;
    if (i == h->n)
        return;
    h->v[i] = h->v[h->n];
    qheap_up(h, i);
    qheap_down(h, i);
}

/* ---- the ready keys: a heap (oldest) or a ring (roundrobin) ---- */

static bool fair_rr(const queue_t *q) { return q->cfg.fairness == QUEUE_FAIR_ROUNDROBIN; }

static void ring_push(qring_t *r, qkey_t *k)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : QUEUE_HEAP_CAP_MIN;
        qkey_t **v = ordo_xmalloc(cap * sizeof *v);
        for (size_t i = 0; i < r->n; i++)
            v[i] = r->v[(r->head + i) % r->cap];
        free(r->v);
        r->v = v;
        r->head = 0;
        r->cap = cap;
    }
    r->v[(r->head + r->n++) % r->cap] = k;
}

static qkey_t *ring_pop(qring_t *r)
{
    assert(r->n > 0);
    qkey_t *k = r->v[r->head];
    r->head = (r->head + 1) % r->cap;
    r->n--;
    return k;
}

/* Remove k (it must be there), keeping the others' order: O(n). */
static void ring_remove(qring_t *r, const qkey_t *k)
{
    size_t i = 0;
    while (i < r->n && r->v[(r->head + i) % r->cap] != k)
        i++;
    assert(i < r->n);
    for (; i + 1 < r->n; i++)
        r->v[(r->head + i) % r->cap] = r->v[(r->head + i + 1) % r->cap];
    r->n--;
}

static qkey_t *ring_at(const qring_t *r, size_t i) { return r->v[(r->head + i) % r->cap]; }

static void ready_push(queue_t *q, qkey_t *k)
{
    if (fair_rr(q))
        ring_push(&q->rr, k);
    else
        qheap_push(&q->ready, k);
}

static qkey_t *ready_pop(queue_t *q) { return fair_rr(q) ? ring_pop(&q->rr) : qheap_pop(&q->ready); }

static void ready_remove(queue_t *q, const qkey_t *k)
{
    if (fair_rr(q))
        ring_remove(&q->rr, k);
    else
        qheap_remove(&q->ready, k);
}

static size_t ready_count(const queue_t *q) { return fair_rr(q) ? q->rr.n : q->ready.n; }

/* ---- allocation with accounting ------------------------------------------------------- */

static void *q_alloc(queue_t *q, size_t n)
{
    q->bytes += alloc_cost(n);
    return ordo_xmalloc(n);
}

static void q_free(queue_t *q, void *p, size_t n)
{
    q->bytes -= alloc_cost(n);
    free(p);
}

static size_t msg_size(const qmsg_t *m)
{
    return sizeof(qmsg_t) + m->plen;
}

static size_t delayed_size(const qmsg_t *m)
{
    return sizeof(qmsg_t) + m->plen + sizeof(uint64_t) + m->u.klen;
}

static qmsg_t *msg_new(queue_t *q, uint64_t id, const void *payload, size_t plen)
{
    qmsg_t *m = q_alloc(q, sizeof *m + plen);
    m->u.next = NULL;
    m->id = id;
    m->attempt = 0;
    m->plen = (uint32_t)plen;
    if (plen)
        memcpy(m->payload, payload, plen);
    return m;
}

/* Free anything a NOACK delivery left for its caller to read. */
static void settle(queue_t *q)
{
    if (q->limbo_msg) {
        q_free(q, q->limbo_msg, msg_size(q->limbo_msg));
        q->limbo_msg = NULL;
    }
    if (q->limbo_key) {
        q_free(q, q->limbo_key, sizeof(qkey_t) + q->limbo_key->klen);
        q->limbo_key = NULL;
    }
}

/* ---- keys -------------------------------------------------------------------------------- */

static uint64_t id_hash(const ordo_htab_t *t, uint64_t id)
{
    return ordo_htab_hash(t, &id, sizeof id);
}

static qkey_t *key_find(const queue_t *q, const void *key, size_t klen)
{
    uint64_t h = ordo_htab_hash(&q->keys, key, klen);
    return (qkey_t *)ordo_htab_find(&q->keys, h, key, klen);
}

static qkey_t *key_get(queue_t *q, const void *key, size_t klen)
{
    uint64_t h = ordo_htab_hash(&q->keys, key, klen);
    qkey_t *k = (qkey_t *)ordo_htab_find(&q->keys, h, key, klen);
    if (k)
        return k;
    assert(klen <= UINT32_MAX);
    k = q_alloc(q, sizeof *k + klen);
    k->head = NULL;
    k->tailp = &k->head;
    k->klen = (uint32_t)klen;
    k->nwait = 0;
    k->inflight = 0;
    k->parked = 0;
    if (klen)
        memcpy(k->bytes, key, klen);
    ordo_htab_insert(&q->keys, &k->hnode, h);
    return k;
}

static qpause_t *pause_find(const queue_t *q, const void *key, size_t klen)
{
    if (q->pauses == NULL)
        return NULL;
    return (qpause_t *)ordo_htab_find(&q->pauses->keys, ordo_htab_hash(&q->pauses->keys, key, klen), key, klen);
}

static void pause_free(queue_t *q, qpause_t *p)
{
    ordo_htab_remove(&q->pauses->keys, &p->hnode);
    if (ordo_heap_linked(&p->hn))
        ordo_heap_remove(&q->pauses->ends, &p->hn);
    assert(q->set->npaused_keys > 0);
    q->set->npaused_keys--;
    q_free(q, p, sizeof *p + p->klen);
}

static qrate_t *rate_find(const queue_t *q, const void *key, size_t klen)
{
    if (q->rates == NULL)
        return NULL;
    return (qrate_t *)ordo_htab_find(&q->rates->keys, ordo_htab_hash(&q->rates->keys, key, klen), key, klen);
}

/* Is k out of turn by its rate (KEYRATE)? */
static bool key_throttled(const queue_t *q, const qkey_t *k)
{
    const qrate_t *r = rate_find(q, k->bytes, k->klen);
    return r != NULL && r->throttled;
}

/* Is k held out of the ready heap whatever its messages: parked, paused
 * or throttled (K3)? The lookups are skipped while the queue has never
 * paused a key or rate-limited one. */
static bool key_held(const queue_t *q, const qkey_t *k)
{
    return k->parked || pause_find(q, k->bytes, k->klen) != NULL || key_throttled(q, k);
}

static void rate_free(queue_t *q, qrate_t *r)
{
    ordo_htab_remove(&q->rates->keys, &r->hnode);
    if (ordo_heap_linked(&r->hn))
        ordo_heap_remove(r->throttled ? &q->rates->throttled : &q->rates->sweep, &r->hn);
    q_free(q, r, sizeof *r + r->klen);
}

/* ---- in-flight counts (K1) ---- */

static qconc_t *conc_find(const queue_t *q, const qkey_t *k)
{
    if (q->conc == NULL)
        return NULL;
    return (qconc_t *)ordo_htab_find(q->conc, ordo_htab_hash(q->conc, &k, sizeof k), &k, sizeof k);
}

/* Deliveries of k in flight: its bit, or its count past one. O(1). */
static uint32_t key_nflight(const queue_t *q, const qkey_t *k)
{
    if (!k->inflight)
        return 0;
    const qconc_t *c = conc_find(q, k);
    return c != NULL ? c->n : 1;
}

static void key_flight_inc(queue_t *q, qkey_t *k)
{
    if (!k->inflight) {
        k->inflight = 1;
        return;
    }
    qconc_t *c = conc_find(q, k);
    if (c != NULL) {
        c->n++;
        return;
    }
    if (q->conc == NULL) {
        q->conc = ordo_xcalloc(1, sizeof *q->conc);
        q->bytes += alloc_cost(sizeof *q->conc);
        htab_init_or_die(q->conc, conc_eq);
    }
    c = q_alloc(q, sizeof *c);
    c->key = k;
    c->n = 2;
    ordo_htab_insert(q->conc, &c->hnode, ordo_htab_hash(q->conc, &k, sizeof k));
}

static void key_flight_dec(queue_t *q, qkey_t *k)
{
    assert(k->inflight);
    qconc_t *c = conc_find(q, k);
    if (c == NULL) {
        k->inflight = 0;
    } else if (--c->n == 1) {
        ordo_htab_remove(q->conc, &c->hnode);
        q_free(q, c, sizeof *c);
    }
}

/* The pointer that points at k's first waiting message (after its nflight
 * in-flight ones, K1), *prevpp at the one before (NULL if none). */
static qmsg_t **key_first_waiting(const queue_t *q, qkey_t *k, qmsg_t ***prevpp)
{
    qmsg_t **pp = &k->head;
    *prevpp = NULL;
    for (uint32_t i = key_nflight(q, k); i > 0; i--) {
        assert(*pp != NULL);
        *prevpp = pp;
        pp = &(*pp)->u.next;
    }
    return pp;
}

/* k's first waiting message (after its in-flight ones), or NULL. */
static const qmsg_t *first_waiting_msg(const queue_t *q, const qkey_t *k)
{
    const qmsg_t *m = k->head;
    for (uint32_t i = key_nflight(q, k); i > 0 && m != NULL; i--)
        m = m->u.next;
    return m;
}

/* Is k in the ready heap now (K3)? */
static bool key_is_ready(const queue_t *q, const qkey_t *k)
{
    return k->nwait > 0 && key_nflight(q, k) < q->cfg.keyconc && !key_held(q, k);
}

/* k, out of the ready heap, enters it if it is ready (K3). */
static void key_ready(queue_t *q, qkey_t *k)
{
    if (key_is_ready(q, k))
        ready_push(q, k);
}

/* Link m at the tail of k's FIFO as a waiting message; a key that just got
 * its first message becomes ready (K3: a new key is neither in flight nor
 * parked, but may be paused). */
static void key_append(queue_t *q, qkey_t *k, qmsg_t *m)
{
    m->u.next = NULL;
    if (k->head == NULL) {
        k->head = m;
        k->tailp = &k->head;
    } else {
        qmsg_t *last = *k->tailp;
        last->u.next = m;
        k->tailp = &last->u.next;
    }
    assert(k->nwait < QUEUE_MAXLEN_MAX);
    k->nwait++;
    q->nwaiting++;
    if (k->nwait == 1) /* its first waiting message: it was not in the ready heap */
        key_ready(q, k);
}

/* After k's head left (done or dead-lettered) while not in the ready heap:
 * re-enter with the next message, or free the key (K4). With limbo, the key
 * is freed at the next change instead (a NOACK view points at its bytes). */
static void key_next(queue_t *q, qkey_t *k, bool limbo)
{
    if (k->head != NULL) {
        key_ready(q, k);
        return;
    }
    assert(!k->inflight && k->nwait == 0); /* in-flight messages are in the FIFO (K1) */
    ordo_htab_remove(&q->keys, &k->hnode);
    if (limbo) {
        assert(q->limbo_key == NULL);
        q->limbo_key = k;
    } else {
        q_free(q, k, sizeof *k + k->klen);
    }
}

/* ---- in-flight deliveries ------------------------------------------------------------------ */

static qflight_t *flight_find(const queue_t *q, uint64_t id)
{
    return (qflight_t *)ordo_htab_find(&q->flights, id_hash(&q->flights, id), &id, sizeof id);
}

/* The delivery id/token, if token is current (0 matches only a nack-delayed
 * message, and only when allow_zero). */
static qflight_t *flight_check(const queue_t *q, uint64_t id, uint64_t token, bool allow_zero)
{
    if (token == 0 && !allow_zero)
        return NULL;
    qflight_t *f = flight_find(q, id);
    return f != NULL && f->token == token ? f : NULL;
}

bool queue_delivery_current(const queue_t *q, uint64_t id, uint64_t token)
{
    return flight_check(q, id, token, false) != NULL;
}

static void flight_end(queue_t *q, qflight_t *f)
{
    qkey_t *k = f->key;
    ordo_htab_remove(&q->flights, &f->hnode);
    ordo_heap_remove(&q->leases, &f->hn);
    key_flight_dec(q, k);
    q_free(q, f, sizeof *f);
}

/* Unlink m from k's FIFO (found by a walk: m is among the first few, K1). */
static void key_unlink_msg(qkey_t *k, qmsg_t *m)
{
    qmsg_t **pp = &k->head, **prevpp = NULL;
    while (*pp != m) {
        assert(*pp != NULL);
        prevpp = pp;
        pp = &(*pp)->u.next;
    }
    if (*k->tailp == m)              /* m is the tail: its predecessor is now */
        k->tailp = prevpp != NULL ? prevpp : &k->head;
    else if (k->tailp == &m->u.next) /* m precedes the tail: pp points at it now */
        k->tailp = pp;
    *pp = m->u.next;
    m->u.next = NULL;
}

/* Link m where *pp points (before what is there). */
static void key_insert_at(qkey_t *k, qmsg_t **pp, qmsg_t *m)
{
    m->u.next = *pp;
    *pp = m;
    if (m->u.next == NULL)
        k->tailp = pp;
    else if (k->tailp == pp)
        k->tailp = &m->u.next;
}

/* m, in flight until now (its flight ended), becomes k's first waiting
 * message: behind the ones still in flight, ahead of the rest (K1). With
 * one in flight at most (KEYCONCURRENCY 1) it is the head and stays. A key
 * in the ready heap (in_heap, as it was before the flight ended) whose
 * head moves leaves it first (*requeue). */
static void key_requeue_msg(queue_t *q, qkey_t *k, qmsg_t *m, bool in_heap, bool *requeue)
{
    qmsg_t **prevpp, **pp;
    if (m == k->head && !k->inflight)
        return; /* nothing in flight before it: it is first already */
    if (in_heap && m == k->head && !*requeue) {
        ready_remove(q, k);
        *requeue = true;
    }
    key_unlink_msg(k, m);
    pp = key_first_waiting(q, k, &prevpp);
    key_insert_at(k, pp, m);
}

/* ---- results ---------------------------------------------------------------------------------- */

static qresult_t *result_find(const queue_t *q, uint64_t id)
{
    return (qresult_t *)ordo_htab_find(&q->results, id_hash(&q->results, id), &id, sizeof id);
}

static void result_free(queue_t *q, qresult_t *r)
{
    ordo_htab_remove(&q->results, &r->hnode);
    ordo_heap_remove(&q->result_heap, &r->hn);
    q_free(q, r, sizeof *r + r->rlen);
}

static void result_put(queue_t *q, uint64_t id, int fate, const void *res, size_t rlen,
                       uint64_t expire_ms, uint64_t dl_id)
{
    qresult_t *old = result_find(q, id);
    if (old)
        result_free(q, old);
    assert(rlen <= UINT32_MAX);
    qresult_t *r = q_alloc(q, sizeof *r + rlen);
    r->id = id;
    r->expire_ms = expire_ms;
    r->dl_id = dl_id;
    r->rlen = (uint32_t)rlen;
    r->fate = (uint8_t)fate;
    if (rlen)
        memcpy(r->bytes, res, rlen);
    ordo_htab_insert(&q->results, &r->hnode, id_hash(&q->results, id));
    ordo_heap_xpush(&q->result_heap, &r->hn);
}

/* ---- dedup ----------------------------------------------------------------------------------- */

static qdedup_t *dedup_find(const queue_t *q, const void *d, size_t dlen)
{
    return (qdedup_t *)ordo_htab_find(&q->dedups, ordo_htab_hash(&q->dedups, d, dlen), d, dlen);
}

static void dedup_free(queue_t *q, qdedup_t *e)
{
    ordo_htab_remove(&q->dedups, &e->hnode);
    ordo_heap_remove(&q->dedup_heap, &e->hn);
    q_free(q, e, sizeof *e + e->dlen);
}

static void dedup_put(queue_t *q, const void *d, size_t dlen, uint64_t msg_id, uint64_t end_ms)
{
    qdedup_t *e = dedup_find(q, d, dlen);
    if (e) {
        e->msg_id = msg_id;
        e->end_ms = end_ms;
        ordo_heap_update(&q->dedup_heap, &e->hn);
        return;
    }
    assert(dlen <= UINT32_MAX);
    e = q_alloc(q, sizeof *e + dlen);
    e->msg_id = msg_id;
    e->end_ms = end_ms;
    e->dlen = (uint32_t)dlen;
    if (dlen)
        memcpy(e->bytes, d, dlen);
    ordo_htab_insert(&q->dedups, &e->hnode, ordo_htab_hash(&q->dedups, d, dlen));
    ordo_heap_xpush(&q->dedup_heap, &e->hn);
}

/* ---- idempotency entries ------------------------------------------------------------------- */

/* The table key of (key, idem) (see the head): in buf if it fits, else in
 * memory the caller frees (*heap). */
#define IDEM_STACK_BYTES 256

static char *idem_bytes(const void *key, size_t klen, const void *idem, size_t ilen, char *buf, size_t *len,
                        char **heap)
{
    assert(klen <= UINT32_MAX && ilen <= UINT32_MAX - 4 - klen);
    *len = 4 + klen + ilen;
    *heap = NULL;
    char *b = *len <= IDEM_STACK_BYTES ? buf : (*heap = ordo_xmalloc(*len));
    uint32_t k32 = (uint32_t)klen;
    b[0] = (char)(k32 & 0xff), b[1] = (char)(k32 >> 8 & 0xff), b[2] = (char)(k32 >> 16 & 0xff),
    b[3] = (char)(k32 >> 24);
    if (klen)
        memcpy(b + 4, key, klen);
    if (ilen)
        memcpy(b + 4 + klen, idem, ilen);
    return b;
}

static size_t idem_klen(const qidem_t *e)
{
    const unsigned char *b = (const unsigned char *)e->bytes;
    return (size_t)b[0] | (size_t)b[1] << 8 | (size_t)b[2] << 16 | (size_t)b[3] << 24;
}

static qidem_t *idem_find(const queue_t *q, const void *b, size_t len)
{
    return (qidem_t *)ordo_htab_find(&q->idems, ordo_htab_hash(&q->idems, b, len), b, len);
}

static void idem_free(queue_t *q, qidem_t *e)
{
    ordo_htab_remove(&q->idems, &e->hnode);
    ordo_heap_remove(&q->idem_heap, &e->hn);
    assert(q->set->nidem > 0);
    q->set->nidem--;
    q_free(q, e, sizeof *e + e->len);
}

/* Record (key, idem) -> e, replacing an entry there (one that ended). */
static void idem_put(queue_t *q, const void *key, size_t klen, const void *idem, size_t ilen, const queue_idem_t *v)
{
    char buf[IDEM_STACK_BYTES], *heap;
    size_t len;
    const char *b = idem_bytes(key, klen, idem, ilen, buf, &len, &heap);
    qidem_t *e = idem_find(q, b, len);
    if (e == NULL) {
        e = q_alloc(q, sizeof *e + len);
        e->len = (uint32_t)len;
        memcpy(e->bytes, b, len);
        e->msg_id = v->msg_id;
        e->end_ms = v->end_ms;
        ordo_htab_insert(&q->idems, &e->hnode, ordo_htab_hash(&q->idems, b, len));
        ordo_heap_xpush(&q->idem_heap, &e->hn);
        q->set->nidem++;
    } else {
        e->msg_id = v->msg_id;
        e->end_ms = v->end_ms;
        ordo_heap_update(&q->idem_heap, &e->hn);
    }
    e->hash = v->hash;
    free(heap);
}

bool queue_idem_lookup(const queue_t *q, const void *key, size_t klen, const void *idem, size_t ilen,
                       uint64_t now_ms, queue_idem_t *out)
{
    char buf[IDEM_STACK_BYTES], *heap;
    size_t len;
    const char *b = idem_bytes(key, klen, idem, ilen, buf, &len, &heap);
    const qidem_t *e = idem_find(q, b, len);
    free(heap);
    if (e == NULL || e->end_ms < now_ms)
        return false;
    *out = (queue_idem_t){.hash = e->hash, .msg_id = e->msg_id, .end_ms = e->end_ms};
    return true;
}

int queue_idem_expire(queue_t *q, const void *key, size_t klen, const void *idem, size_t ilen, uint64_t now_ms)
{
    settle(q);
    char buf[IDEM_STACK_BYTES], *heap;
    size_t len;
    const char *b = idem_bytes(key, klen, idem, ilen, buf, &len, &heap);
    qidem_t *e = idem_find(q, b, len);
    free(heap);
    if (e == NULL || e->end_ms >= now_ms)
        return 0;
    idem_free(q, e);
    return 1;
}

size_t queue_set_idem_count(const queue_set_t *s)
{
    return s->nidem;
}

/* ---- the registry ------------------------------------------------------------------------------ */

void queue_config_defaults(queue_config_t *out)
{
    memset(out, 0, sizeof *out);
    out->maxlen = QUEUE_DEFAULT_MAXLEN;
    out->maxperkey = QUEUE_DEFAULT_MAXPERKEY;
    out->onfull = QUEUE_ONFULL_REJECT;
    out->onpoison = QUEUE_ONPOISON_DEADLETTER;
    out->maxattempts = QUEUE_DEFAULT_MAXATTEMPTS;
    out->lease_ms = QUEUE_DEFAULT_LEASE_MS;
    out->dedup_ms = QUEUE_DEFAULT_DEDUP_MS;
    out->resultttl_ms = QUEUE_DEFAULT_RESULTTTL_MS;
    out->backoff = QUEUE_BACKOFF_NONE;
    out->backoff_base_ms = QUEUE_DEFAULT_BACKOFF_BASE_MS;
    out->backoff_cap_ms = QUEUE_DEFAULT_BACKOFF_CAP_MS;
    out->keyconc = 1;
}

bool queue_policy_active(const queue_config_t *cfg)
{
    return cfg->backoff != QUEUE_BACKOFF_NONE || cfg->maxage_ms > 0;
}

uint64_t queue_backoff_delay(const queue_config_t *cfg, uint32_t attempt, uint64_t draw)
{
    switch (cfg->backoff) {
    case QUEUE_BACKOFF_FIXED:
        return cfg->backoff_base_ms;
    case QUEUE_BACKOFF_EXPONENTIAL: {
        /* base * 2^(attempt-1), capped; the shift stops before it could
         * overflow (2^63 ms is far past any cap). */
        uint64_t ceil = cfg->backoff_base_ms;
        for (uint32_t i = 1; i < attempt && ceil < cfg->backoff_cap_ms; i++)
            ceil = ceil > UINT64_MAX / 2 ? UINT64_MAX : ceil * 2;
        if (ceil > cfg->backoff_cap_ms)
            ceil = cfg->backoff_cap_ms;
        /* Full jitter: uniform in [0, ceil]. The modulo's bias is below
         * ceil / 2^64, nothing a retry schedule can notice. */
        return ceil == UINT64_MAX ? draw : draw % (ceil + 1);
    }
    default:
        return 0;
    }
}

void queue_set_event_cb(queue_set_t *s, queue_event_cb cb, void *arg)
{
    s->event_cb = cb;
    s->event_arg = arg;
}

void queue_set_copy_event_cb(queue_set_t *dst, const queue_set_t *src)
{
    dst->event_cb = src->event_cb;
    dst->event_arg = src->event_arg;
}

queue_set_t *queue_set_create(void)
{
    queue_set_t *s = ordo_xcalloc(1, sizeof *s);
    htab_init_or_die(&s->queues, queue_eq);
    return s;
}

static void free_key_cb(ordo_hnode_t *n, void *arg)
{
    queue_t *q = arg;
    qkey_t *k = (qkey_t *)n;
    qmsg_t *m = k->head;
    while (m) {
        qmsg_t *next = m->u.next;
        q_free(q, m, msg_size(m));
        m = next;
    }
    ordo_htab_remove(&q->keys, n);
    q_free(q, k, sizeof *k + k->klen);
}

static void free_flight_cb(ordo_hnode_t *n, void *arg)
{
    queue_t *q = arg;
    ordo_htab_remove(&q->flights, n);
    q_free(q, n, sizeof(qflight_t));
}

static void free_dedup_cb(ordo_hnode_t *n, void *arg)
{
    queue_t *q = arg;
    ordo_htab_remove(&q->dedups, n);
    q_free(q, n, sizeof(qdedup_t) + ((qdedup_t *)n)->dlen);
}

static void free_idem_cb(ordo_hnode_t *n, void *arg)
{
    queue_t *q = arg;
    ordo_htab_remove(&q->idems, n);
    assert(q->set->nidem > 0);
    q->set->nidem--;
    q_free(q, n, sizeof(qidem_t) + ((qidem_t *)n)->len);
}

static void free_result_cb(ordo_hnode_t *n, void *arg)
{
    queue_t *q = arg;
    ordo_htab_remove(&q->results, n);
    q_free(q, n, sizeof(qresult_t) + ((qresult_t *)n)->rlen);
}

static void free_pause_cb(ordo_hnode_t *n, void *arg)
{
    queue_t *q = arg;
    pause_free(q, (qpause_t *)n);
}

static void free_rate_cb(ordo_hnode_t *n, void *arg)
{
    rate_free(arg, (qrate_t *)n);
}

static void free_conc_cb(ordo_hnode_t *n, void *arg)
{
    queue_t *q = arg;
    ordo_htab_remove(q->conc, n);
    q_free(q, n, sizeof(qconc_t));
}

static void queue_free(queue_t *q)
{
    settle(q);
    if (q->conc != NULL) {
        ordo_htab_foreach(q->conc, free_conc_cb, q);
        ordo_htab_destroy(q->conc);
        free(q->conc);
        q->bytes -= alloc_cost(sizeof *q->conc);
    }
    if (q->cfg.maxwait_ms > 0)
        q->set->nmaxwait--;
    if (q->paused) {
        assert(q->set->npaused_queues > 0);
        q->set->npaused_queues--;
    }
    if (q->rates != NULL) {
        ordo_htab_foreach(&q->rates->keys, free_rate_cb, q);
        ordo_htab_destroy(&q->rates->keys);
        ordo_heap_destroy(&q->rates->throttled);
        ordo_heap_destroy(&q->rates->sweep);
        free(q->rates);
        q->bytes -= alloc_cost(sizeof *q->rates);
    }
    if (q->pauses != NULL) {
        ordo_htab_foreach(&q->pauses->keys, free_pause_cb, q);
        ordo_htab_destroy(&q->pauses->keys);
        ordo_heap_destroy(&q->pauses->ends);
        free(q->pauses);
        q->bytes -= alloc_cost(sizeof *q->pauses);
    }
    /* Flights point at keys: free them first. */
    ordo_htab_foreach(&q->flights, free_flight_cb, q);
    ordo_htab_foreach(&q->keys, free_key_cb, q);
    ordo_htab_foreach(&q->dedups, free_dedup_cb, q);
    ordo_htab_foreach(&q->results, free_result_cb, q);
    ordo_htab_foreach(&q->idems, free_idem_cb, q);
    for (size_t i = 0; i < q->delays.n; i++) {
        qmsg_t *m = q->delays.v[i];
        q_free(q, m, delayed_size(m));
    }
    assert(q->bytes == 0);
    ordo_htab_destroy(&q->keys);
    ordo_htab_destroy(&q->flights);
    ordo_htab_destroy(&q->dedups);
    ordo_htab_destroy(&q->results);
    ordo_htab_destroy(&q->idems);
    qheap_free(&q->ready);
    free(q->rr.v);
    qheap_free(&q->delays);
    ordo_heap_destroy(&q->leases);
    ordo_heap_destroy(&q->dedup_heap);
    ordo_heap_destroy(&q->result_heap);
    ordo_heap_destroy(&q->idem_heap);
    free(q->dl_name);
    free(q);
}

static void free_queue_cb(ordo_hnode_t *n, void *arg)
{
    queue_set_t *s = arg;
    ordo_htab_remove(&s->queues, n);
    queue_free((queue_t *)n);
}

void queue_set_destroy(queue_set_t *s)
{
    if (s == NULL)
        return;
    ordo_htab_foreach(&s->queues, free_queue_cb, s);
    ordo_htab_destroy(&s->queues);
    free(s);
}

queue_t *queue_get(const queue_set_t *s, const void *name, size_t len)
{
    uint64_t h = ordo_htab_hash(&s->queues, name, len);
    return (queue_t *)ordo_htab_find(&s->queues, h, name, len);
}

queue_t *queue_open(queue_set_t *s, const void *name, size_t len)
{
    queue_t *q = queue_get(s, name, len);
    if (q)
        return q;
    assert(len <= UINT32_MAX);
    q = ordo_xcalloc(1, sizeof *q + len);
    q->set = s;
    queue_config_defaults(&q->cfg);
    htab_init_or_die(&q->keys, key_eq);
    htab_init_or_die(&q->flights, flight_eq);
    htab_init_or_die(&q->dedups, dedup_eq);
    htab_init_or_die(&q->results, result_eq);
    htab_init_or_die(&q->idems, idem_eq);
    q->ready.less = ready_less;
    q->delays.less = delay_less;
    ordo_heap_init(&q->leases, lease_less, QUEUE_HEAP_CAP_MIN, ORDO_HEAP_SHRINK);
    ordo_heap_init(&q->dedup_heap, dedup_less, QUEUE_HEAP_CAP_MIN, ORDO_HEAP_SHRINK);
    ordo_heap_init(&q->result_heap, result_less, QUEUE_HEAP_CAP_MIN, ORDO_HEAP_SHRINK);
    ordo_heap_init(&q->idem_heap, idem_less, QUEUE_HEAP_CAP_MIN, ORDO_HEAP_SHRINK);
    q->nlen = (uint32_t)len;
    memcpy(q->name, name, len);
    ordo_htab_insert(&s->queues, &q->hnode, ordo_htab_hash(&s->queues, name, len));
    queue_account(q);
    return q;
}

int queue_drop(queue_set_t *s, const void *name, size_t len)
{
    queue_t *q = queue_get(s, name, len);
    if (q == NULL)
        return 0;
    ordo_htab_remove(&s->queues, &q->hnode);
    s->bytes -= q->counted;
    queue_free(q);
    return 1;
}

size_t queue_set_count(const queue_set_t *s)
{
    return s->queues.count;
}

struct set_foreach_arg {
    void (*fn)(void *arg, queue_t *q);
    void *arg;
};

static void set_foreach_cb(ordo_hnode_t *n, void *arg)
{
    struct set_foreach_arg *a = arg;
    a->fn(a->arg, (queue_t *)n);
}

void queue_set_foreach(const queue_set_t *s, void (*fn)(void *arg, queue_t *q), void *arg)
{
    struct set_foreach_arg a = {fn, arg};
    ordo_htab_foreach((ordo_htab_t *)(uintptr_t)&s->queues, set_foreach_cb, &a);
}

const char *queue_name(const queue_t *q, size_t *len)
{
    *len = q->nlen;
    return q->name;
}

void queue_config(const queue_t *q, queue_config_t *out)
{
    *out = q->cfg;
}

struct conc_above_arg {
    uint32_t n;
    bool found;
};

static void conc_above_cb(ordo_hnode_t *node, void *arg)
{
    struct conc_above_arg *a = arg;
    if (((const qconc_t *)node)->n > a->n)
        a->found = true;
}

/* Does a key have more than n deliveries in flight? KEYCONCURRENCY may not
 * go below that (K1 bounds a key's in-flight ones by it). */
static bool conc_above(const queue_t *q, uint32_t n)
{
    struct conc_above_arg a = {n, false};
    if (n >= 2 && q->conc != NULL)
        ordo_htab_foreach(q->conc, conc_above_cb, &a);
    else if (n < 2)
        a.found = q->conc != NULL && q->conc->count > 0;
    return a.found;
}

static void ready_rebuild_cb(ordo_hnode_t *node, void *arg)
{
    queue_t *q = arg;
    qkey_t *k = (qkey_t *)node;
    if (key_is_ready(q, k))
        qheap_push(&q->ready, k);
}

/* Every ready key in the ready heap (or ring), afresh (K3). The keys go
 * through the heap either way: the ring takes them in head order, which
 * every member reaches alike (a table's walk order is each member's own). */
static void ready_rebuild(queue_t *q)
{
    q->ready.n = 0;
    q->rr.n = 0;
    q->rr.head = 0;
    ordo_htab_foreach(&q->keys, ready_rebuild_cb, q);
    if (fair_rr(q))
        while (q->ready.n > 0)
            ring_push(&q->rr, qheap_pop(&q->ready));
}

int queue_configure(queue_t *q, const queue_config_t *cfg)
{
    if (cfg->maxlen < 1 || cfg->maxlen > QUEUE_MAXLEN_MAX || cfg->maxperkey > QUEUE_MAXLEN_MAX)
        return QUEUE_EINVAL;
    if (cfg->lease_ms < 1 || cfg->onfull > QUEUE_ONFULL_BLOCK || cfg->onpoison > QUEUE_ONPOISON_DROP)
        return QUEUE_EINVAL;
    if ((cfg->rate_n > 0) != (cfg->rate_per_ms > 0) || cfg->rate_n > QUEUE_RATE_MAX ||
        cfg->rate_per_ms > QUEUE_RATE_PER_MS_MAX || (cfg->keyrate_n > 0) != (cfg->keyrate_per_ms > 0) ||
        cfg->keyrate_n > QUEUE_RATE_MAX || cfg->keyrate_per_ms > QUEUE_RATE_PER_MS_MAX)
        return QUEUE_EINVAL;
    if (cfg->keyconc < 1 || cfg->keyconc > QUEUE_KEYCONC_MAX || conc_above(q, cfg->keyconc) ||
        cfg->fairness > QUEUE_FAIR_ROUNDROBIN)
        return QUEUE_EINVAL;
    if (cfg->backoff > QUEUE_BACKOFF_EXPONENTIAL || cfg->backoff_base_ms < 1 ||
        (cfg->backoff == QUEUE_BACKOFF_EXPONENTIAL && cfg->backoff_cap_ms < cfg->backoff_base_ms))
        return QUEUE_EINVAL;
    if (cfg->deadletter != NULL &&
        (cfg->dl_len == 0 || (cfg->dl_len == q->nlen && memcmp(cfg->deadletter, q->name, q->nlen) == 0)))
        return QUEUE_EINVAL;
    char *dl = NULL;
    if (cfg->deadletter) {
        dl = ordo_xmalloc(cfg->dl_len);
        memcpy(dl, cfg->deadletter, cfg->dl_len);
    }
    bool keyrate_changed = cfg->keyrate_n != q->cfg.keyrate_n || cfg->keyrate_per_ms != q->cfg.keyrate_per_ms;
    bool keyconc_changed = cfg->keyconc != q->cfg.keyconc || cfg->fairness != q->cfg.fairness;
    free(q->dl_name);
    q->set->nmaxwait += (cfg->maxwait_ms > 0) - (q->cfg.maxwait_ms > 0);
    q->cfg = *cfg;
    q->dl_name = dl;
    q->cfg.deadletter = dl;
    q->cfg.dl_len = dl ? cfg->dl_len : 0;
    /* A new KEYRATE judges keys afresh: every throttle ends now. */
    if (keyrate_changed)
        rate_release_keys(q, UINT64_MAX);
    /* A new KEYCONCURRENCY changes which keys are ready, a new FAIRNESS
     * where they wait: rebuild (O(keys log keys); configurations are rare). */
    if (keyconc_changed)
        ready_rebuild(q);
    queue_account(q);
    return QUEUE_OK;
}

/* ---- rate limits -------------------------------------------------------------------------
 * The buckets of queue.h's "Rate limits". Units: a bucket of n per p ms
 * holds up to n * p units, gains n a ms, and a token is p units. */

static uint64_t bucket_cap(uint32_t n, uint64_t per_ms)
{
    return (uint64_t)n * per_ms;
}

/* The level of a bucket (level at last_ms) at now_ms: full after a whole
 * window, and full if never spent (last_ms 0). */
static uint64_t bucket_level(uint64_t level, uint64_t last_ms, uint32_t n, uint64_t per_ms, uint64_t now_ms)
{
    uint64_t cap = bucket_cap(n, per_ms);
    if (last_ms == 0)
        return cap;
    if (level > cap)
        level = cap; /* the limit was lowered */
    if (now_ms <= last_ms)
        return level;
    uint64_t el = now_ms - last_ms;
    if (el >= per_ms)
        return cap;
    return cap - level <= el * n ? cap : level + el * n;
}

/* ms from a bucket at `level` until it holds `want` units. */
static uint64_t bucket_wait(uint64_t level, uint64_t want, uint32_t n)
{
    return level >= want ? 0 : (want - level + n - 1) / n;
}

static void rate_heap_put(queue_t *q, qrate_t *r, bool throttled, uint64_t event_ms)
{
    ordo_heap_t *from = r->throttled ? &q->rates->throttled : &q->rates->sweep;
    if (ordo_heap_linked(&r->hn))
        ordo_heap_remove(from, &r->hn);
    r->throttled = throttled;
    r->event_ms = event_ms;
    ordo_heap_xpush(throttled ? &q->rates->throttled : &q->rates->sweep, &r->hn);
}

static qrate_t *rate_get(queue_t *q, const void *key, size_t klen)
{
    qrate_t *r = rate_find(q, key, klen);
    if (r != NULL)
        return r;
    if (q->rates == NULL) {
        q->rates = ordo_xcalloc(1, sizeof *q->rates);
        q->bytes += alloc_cost(sizeof *q->rates);
        htab_init_or_die(&q->rates->keys, rate_eq);
        ordo_heap_init(&q->rates->throttled, rate_less, QUEUE_HEAP_CAP_MIN, ORDO_HEAP_SHRINK);
        ordo_heap_init(&q->rates->sweep, rate_less, QUEUE_HEAP_CAP_MIN, ORDO_HEAP_SHRINK);
    }
    assert(klen <= UINT32_MAX);
    r = q_alloc(q, sizeof *r + klen);
    memset(r, 0, sizeof *r);
    r->klen = (uint32_t)klen;
    if (klen)
        memcpy(r->bytes, key, klen);
    ordo_heap_node_init(&r->hn);
    ordo_htab_insert(&q->rates->keys, &r->hnode, ordo_htab_hash(&q->rates->keys, key, klen));
    return r;
}

/* Buckets full by now_ms are what a key without one has: free up to two
 * (each spend sweeps a little, so the table follows the keys delivered in
 * the last window without a pass of its own). */
static void rate_sweep(queue_t *q, uint64_t now_ms)
{
    const ordo_heap_node_t *n;
    for (int i = 0; i < 2 && (n = ordo_heap_peek(&q->rates->sweep)) != NULL && RATE_OF(n)->event_ms < now_ms; i++)
        rate_free(q, RATE_OF(n));
}

/* k is being delivered (it was ready, so its bucket has a token: a key is
 * throttled by the delivery that takes its last token, never by a turn
 * that finds none, so a pull that delivers nothing changes nothing).
 * Spend the token; if none is left, throttle k until one is back. After
 * a KEYRATE change a bucket may hold less than a token: it still goes
 * once, and is throttled from then. */
static void rate_key_spend(queue_t *q, qkey_t *k, uint64_t now_ms)
{
    uint32_t n = q->cfg.keyrate_n;
    uint64_t per = q->cfg.keyrate_per_ms, cap = bucket_cap(n, per);
    qrate_t *r = rate_find(q, k->bytes, k->klen);
    uint64_t level = r != NULL ? bucket_level(r->level, r->last_ms, n, per, now_ms) : cap;
    if (r == NULL)
        r = rate_get(q, k->bytes, k->klen);
    r->level = level > per ? level - per : 0;
    r->last_ms = now_ms;
    if (r->level < per)
        rate_heap_put(q, r, true, now_ms + bucket_wait(r->level, per, n));
    else
        rate_heap_put(q, r, false, now_ms + bucket_wait(r->level, cap, n));
    rate_sweep(q, now_ms);
}

/* Give back the keys whose throttle ended before now_ms (those still
 * deliverable re-enter the ready heap) and refill an empty queue bucket
 * whose token is back. Returns how many throttles ended plus 1 for the
 * queue's refill. Like the promotion of delayed messages, this may happen
 * in a record that is not logged (a pull that found nothing): that only
 * brings forward what any later record's promote does the same way, so a
 * replay reaches the same deliveries, and a logged "due" record changes at
 * least what it did when it was made. */
static size_t rate_release_keys(queue_t *q, uint64_t now_ms)
{
    size_t changed = 0;
    const ordo_heap_node_t *n;
    while (q->rates != NULL && (n = ordo_heap_peek(&q->rates->throttled)) != NULL &&
           RATE_OF(n)->event_ms < now_ms) {
        qrate_t *r = RATE_OF(n);
        uint32_t rn = q->cfg.keyrate_n;
        uint64_t full = rn ? r->last_ms + bucket_wait(r->level, bucket_cap(rn, q->cfg.keyrate_per_ms), rn) : 0;
        rate_heap_put(q, r, false, full);
        qkey_t *k = key_find(q, r->bytes, r->klen);
        if (k != NULL)
            key_ready(q, k); /* it was held: out of the heap */
        changed++;
    }
    return changed;
}

static size_t rate_release(queue_t *q, uint64_t now_ms)
{
    size_t changed = 0;
    /* The queue's bucket, emptied by a delivery: refilled once its token
     * is due (strictly before now_ms, as every deadline). */
    if (q->cfg.rate_n > 0 && q->rate_last_ms != 0 && q->rate_level < q->cfg.rate_per_ms &&
        q->rate_last_ms + bucket_wait(q->rate_level, q->cfg.rate_per_ms, q->cfg.rate_n) < now_ms) {
        q->rate_level = bucket_level(q->rate_level, q->rate_last_ms, q->cfg.rate_n, q->cfg.rate_per_ms, now_ms);
        q->rate_last_ms = now_ms;
        changed++;
    }
    return changed + rate_release_keys(q, now_ms);
}

/* May the queue's bucket (RATE) give a token at now_ms? */
static bool rate_queue_has(const queue_t *q, uint64_t now_ms)
{
    return q->cfg.rate_n == 0 ||
           bucket_level(q->rate_level, q->rate_last_ms, q->cfg.rate_n, q->cfg.rate_per_ms, now_ms) >=
               q->cfg.rate_per_ms;
}

static void rate_queue_spend(queue_t *q, uint64_t now_ms)
{
    if (q->cfg.rate_n == 0)
        return;
    q->rate_level =
        bucket_level(q->rate_level, q->rate_last_ms, q->cfg.rate_n, q->cfg.rate_per_ms, now_ms) - q->cfg.rate_per_ms;
    q->rate_last_ms = now_ms;
}

uint64_t queue_rate_tokens(const queue_t *q, const void *key, size_t klen, uint64_t now_ms,
                           uint64_t *throttled_until_ms)
{
    *throttled_until_ms = 0;
    if (key == NULL)
        return q->cfg.rate_n ? bucket_level(q->rate_level, q->rate_last_ms, q->cfg.rate_n, q->cfg.rate_per_ms,
                                            now_ms) / q->cfg.rate_per_ms
                             : 0;
    if (q->cfg.keyrate_n == 0)
        return 0;
    const qrate_t *r = rate_find(q, key, klen);
    if (r == NULL)
        return q->cfg.keyrate_n;
    if (r->throttled)
        *throttled_until_ms = r->event_ms;
    return bucket_level(r->level, r->last_ms, q->cfg.keyrate_n, q->cfg.keyrate_per_ms, now_ms) /
           q->cfg.keyrate_per_ms;
}

bool queue_next_rate(const queue_t *q, queue_timer_t *out)
{
    bool found = false;
    memset(out, 0, sizeof *out);
    out->kind = QUEUE_TIMER_RATE;
    const ordo_heap_node_t *n = q->rates ? ordo_heap_peek(&q->rates->throttled) : NULL;
    if (n != NULL) {
        out->due_ms = RATE_OF(n)->event_ms;
        found = true;
    }
    /* The queue's bucket matters only while something waits for it. */
    if (q->cfg.rate_n > 0 && q->rate_last_ms != 0 && !q->paused && ready_count(q) > 0 &&
        q->rate_level < q->cfg.rate_per_ms) {
        uint64_t due = q->rate_last_ms + bucket_wait(q->rate_level, q->cfg.rate_per_ms, q->cfg.rate_n);
        if (!found || due < out->due_ms)
            out->due_ms = due;
        found = true;
    }
    return found;
}

struct foreach_bucket_arg {
    void (*fn)(void *arg, const char *key, size_t klen, const queue_bucket_t *b);
    void *arg;
};

static void foreach_bucket_cb(ordo_hnode_t *node, void *arg)
{
    struct foreach_bucket_arg *a = arg;
    const qrate_t *r = (const qrate_t *)node;
    queue_bucket_t b = {.level = r->level, .last_ms = r->last_ms, .throttled = r->throttled,
                        .release_ms = r->throttled ? r->event_ms : 0};
    a->fn(a->arg, r->bytes, r->klen, &b);
}

void queue_foreach_bucket(const queue_t *q,
                          void (*fn)(void *arg, const char *key, size_t klen, const queue_bucket_t *b), void *arg)
{
    if (q->rate_level != 0 || q->rate_last_ms != 0) {
        queue_bucket_t b = {.level = q->rate_level, .last_ms = q->rate_last_ms};
        fn(arg, NULL, 0, &b);
    }
    if (q->rates != NULL) {
        struct foreach_bucket_arg a = {fn, arg};
        ordo_htab_foreach(&q->rates->keys, foreach_bucket_cb, &a);
    }
}

void queue_load_bucket(queue_t *q, const void *key, size_t klen, const queue_bucket_t *b)
{
    settle(q);
    if (key == NULL) {
        q->rate_level = b->level;
        q->rate_last_ms = b->last_ms;
        return;
    }
    qrate_t *r = rate_get(q, key, klen);
    r->level = b->level;
    r->last_ms = b->last_ms;
    qkey_t *k = key_find(q, key, klen);
    /* Loaded after the messages: a throttled key leaves the ready heap. */
    bool was_ready = k != NULL && key_is_ready(q, k);
    uint64_t full = q->cfg.keyrate_n ? b->last_ms + bucket_wait(b->level, bucket_cap(q->cfg.keyrate_n,
                                                                                     q->cfg.keyrate_per_ms),
                                                                q->cfg.keyrate_n)
                                     : 0;
    rate_heap_put(q, r, b->throttled, b->throttled ? b->release_ms : full);
    if (b->throttled && was_ready)
        ready_remove(q, k);
    queue_account(q);
}

/* ---- push ------------------------------------------------------------------------------------- */

/* A delayed message: payload, then its due time, then its key bytes. */
static void push_delayed(queue_t *q, const queue_push_t *p, uint64_t id, uint64_t due)
{
    qmsg_t *m = q_alloc(q, sizeof *m + p->plen + sizeof due + p->klen);
    m->u.klen = p->klen;
    m->id = id;
    m->attempt = 0;
    m->plen = (uint32_t)p->plen;
    if (p->plen)
        memcpy(m->payload, p->payload, p->plen);
    memcpy(m->payload + p->plen, &due, sizeof due);
    if (p->klen)
        memcpy(m->payload + p->plen + sizeof due, p->key, p->klen);
    qheap_push(&q->delays, m);
    q->ndelayed++;
}

/* COALESCE: the key's newest waiting message (its tail, K2) takes payload. */
static uint64_t coalesce(queue_t *q, qkey_t *k, const void *payload, size_t plen)
{
    qmsg_t *t = *k->tailp;
    if (t->plen != plen) {
        size_t old = msg_size(t);
        q->bytes -= alloc_cost(old);
        q->bytes += alloc_cost(sizeof *t + plen);
        /* Only *tailp points at the tail (the ready heap holds the key). */
        t = ordo_xrealloc(t, sizeof *t + plen);
        *k->tailp = t;
        t->plen = (uint32_t)plen;
    }
    if (plen)
        memcpy(t->payload, payload, plen);
    q->merged++;
    return t->id;
}

int queue_push(queue_t *q, const queue_push_t *p, uint64_t id, uint64_t now_ms, uint64_t *id_out)
{
    assert(p->klen <= UINT32_MAX && p->plen <= UINT32_MAX);
    settle(q);
    queue_promote(q, now_ms);
    assert(p->idem == NULL || p->dedup_id == NULL);
    if (p->idem != NULL) {
        queue_idem_t e;
        if (queue_idem_lookup(q, p->key, p->klen, p->idem, p->ilen, now_ms, &e)) {
            q->deduped++;
            *id_out = e.msg_id;
            return QUEUE_DUPLICATE;
        }
    }
    bool dedup = p->dedup_id != NULL && q->cfg.dedup_ms > 0;
    if (dedup) {
        qdedup_t *e = dedup_find(q, p->dedup_id, p->dlen);
        if (e && e->end_ms >= now_ms) {
            q->deduped++;
            *id_out = e->msg_id;
            return QUEUE_DUPLICATE;
        }
    }
    int st = QUEUE_OK;
    qkey_t *k = key_find(q, p->key, p->klen);
    if (p->coalesce && k != NULL && k->nwait > 0) {
        *id_out = coalesce(q, k, p->payload, p->plen);
        st = QUEUE_MERGED;
    } else if (q->nwaiting + q->ndelayed >= q->cfg.maxlen) {
        return QUEUE_FULL;
    } else if (q->cfg.maxperkey && k != NULL && k->nwait >= q->cfg.maxperkey) {
        return QUEUE_LIMIT;
    } else {
        if (p->delay_ms > 0) {
            push_delayed(q, p, id, now_ms + p->delay_ms);
        } else {
            if (k == NULL)
                k = key_get(q, p->key, p->klen);
            key_append(q, k, msg_new(q, id, p->payload, p->plen));
        }
        q->pushed++;
        *id_out = id;
        emit(q, QUEUE_EV_PUSHED, p->key, p->klen, id, 0, p->payload, p->plen);
    }
    if (dedup)
        dedup_put(q, p->dedup_id, p->dlen, *id_out, now_ms + q->cfg.dedup_ms);
    if (p->idem != NULL && st == QUEUE_OK)
        idem_put(q, p->key, p->klen, p->idem, p->ilen,
                 &(queue_idem_t){.hash = p->idem_hash, .msg_id = *id_out, .end_ms = now_ms + p->idem_ms});
    return st;
}

size_t queue_promote(queue_t *q, uint64_t now_ms)
{
    size_t moved = 0;
    settle(q);
    while (q->delays.n > 0 && delayed_due(q->delays.v[0]) < now_ms) {
        qmsg_t *m = qheap_pop(&q->delays);
        size_t klen = m->u.klen;
        qkey_t *k = key_get(q, delayed_key(m), klen);
        /* Drop the due time and key bytes: m is linked nowhere yet. */
        q->bytes -= alloc_cost(delayed_size(m));
        m = ordo_xrealloc(m, sizeof *m + m->plen);
        q->bytes += alloc_cost(msg_size(m));
        q->ndelayed--;
        key_append(q, k, m);
        moved++;
    }
    return moved + rate_release(q, now_ms);
}

/* ---- delivery ------------------------------------------------------------------------------- */

static void fill_delivery(const qkey_t *k, const qmsg_t *m, queue_delivery_t *out)
{
    out->id = m->id;
    out->key = k->bytes;
    out->klen = k->klen;
    out->payload = m->payload;
    out->plen = m->plen;
    out->attempt = m->attempt;
    out->token = 0;
    out->deadline_ms = 0;
}

int queue_deliver(queue_t *q, uint64_t now_ms, uint64_t lease_ms, uint64_t token, bool noack,
                  queue_delivery_t *out)
{
    settle(q);
    queue_promote(q, now_ms);
    if (ready_count(q) == 0 || q->paused || !rate_queue_has(q, now_ms))
        return 0;
    qkey_t *k = ready_pop(q);
    if (q->cfg.keyrate_n > 0)
        rate_key_spend(q, k, now_ms);
    rate_queue_spend(q, now_ms);
    assert(k->head && !k->parked && k->nwait > 0 && key_nflight(q, k) < q->cfg.keyconc);
    qmsg_t **prevpp, *m = *key_first_waiting(q, k, &prevpp);
    assert(m != NULL);
    k->nwait--;
    q->nwaiting--;
    m->attempt++;
    q->delivered++;
    fill_delivery(k, m, out);
    emit(q, QUEUE_EV_DELIVERED, k->bytes, k->klen, m->id, m->attempt, NULL, 0);
    out->token = token;
    if (noack) {
        key_unlink_msg(k, m);
        q->limbo_msg = m;
        key_next(q, k, true);
        return 1;
    }
    qflight_t *f = q_alloc(q, sizeof *f);
    f->key = k;
    f->msg = m;
    f->token = token;
    f->since_ms = now_ms;
    f->deadline_ms = now_ms + (lease_ms ? lease_ms : q->cfg.lease_ms);
    key_flight_inc(q, k);
    ordo_htab_insert(&q->flights, &f->hnode, id_hash(&q->flights, m->id));
    ordo_heap_xpush(&q->leases, &f->hn);
    out->deadline_ms = f->deadline_ms;
    key_ready(q, k); /* KEYCONCURRENCY > 1: its next may go too */
    return 1;
}

int queue_ack(queue_t *q, uint64_t id, uint64_t token, const void *result, size_t rlen,
              uint64_t now_ms)
{
    settle(q);
    qflight_t *f = flight_check(q, id, token, false);
    if (f == NULL)
        return 0;
    qkey_t *k = f->key;
    qmsg_t *m = f->msg;
    /* KEYCONCURRENCY > 1: a key in the ready heap stays there unless its
     * head (its place in the heap) is the message leaving. */
    bool in_heap = k->nwait > 0 && key_is_ready(q, k), requeue = false;
    if (in_heap && m == k->head) {
        ready_remove(q, k);
        requeue = true;
    }
    flight_end(q, f);
    emit(q, QUEUE_EV_ACKED, k->bytes, k->klen, id, 0, result, result ? rlen : 0);
    key_unlink_msg(k, m);
    q_free(q, m, msg_size(m));
    q->acked++;
    if (result != NULL && q->cfg.resultttl_ms > 0)
        result_put(q, id, QUEUE_FATE_DONE, result, rlen, now_ms + q->cfg.resultttl_ms, 0);
    if (!in_heap || requeue)
        key_next(q, k, false);
    return 1;
}

/* Move m, taken from k's FIFO, to the dead-letter queue as a new message
 * with id rev, or discard it if none is configured; its fate DEADLETTER
 * keeps reason (NULL: its attempts ran out). k is left to the caller. */
static void dead_letter_msg(queue_t *q, qkey_t *k, qmsg_t *m, const char *reason, uint64_t now_ms, uint64_t rev,
                            queue_retry_t *out)
{
    uint64_t id = m->id;
    out->kind = QUEUE_RETRY_DEADLETTER;
    out->dlq = NULL;
    out->dl_id = 0;
    q->deadlettered++;
    if (q->dl_name != NULL) {
        queue_t *dlq = queue_open(q->set, q->dl_name, q->cfg.dl_len);
        assert(dlq != q);
        settle(dlq);
        /* The allocation moves: nothing else points at it. */
        q->bytes -= alloc_cost(msg_size(m));
        dlq->bytes += alloc_cost(msg_size(m));
        m->id = rev;
        m->attempt = 0;
        key_append(dlq, key_get(dlq, k->bytes, k->klen), m);
        dlq->pushed++;
        out->dlq = dlq;
        out->dl_id = rev;
        emit(q, QUEUE_EV_DEADLETTERED, k->bytes, k->klen, id, rev, NULL, 0);
        emit(dlq, QUEUE_EV_PUSHED, k->bytes, k->klen, rev, 0, m->payload, m->plen);
    } else {
        emit(q, QUEUE_EV_DEADLETTERED, k->bytes, k->klen, id, 0, NULL, 0);
        q_free(q, m, msg_size(m));
    }
    if (q->cfg.resultttl_ms > 0)
        result_put(q, id, QUEUE_FATE_DEADLETTER, reason, reason ? strlen(reason) : 0, now_ms + q->cfg.resultttl_ms,
                   out->dl_id);
}

/* Dead-letter m, k's message whose flight just ended, then move the key
 * on; in_heap: k was in the ready heap before (KEYCONCURRENCY > 1). */
static void dead_letter(queue_t *q, qkey_t *k, qmsg_t *m, bool in_heap, const char *reason, uint64_t now_ms,
                        uint64_t rev, queue_retry_t *out)
{
    bool requeue = false;
    if (in_heap && m == k->head) {
        ready_remove(q, k);
        requeue = true;
    }
    key_unlink_msg(k, m);
    dead_letter_msg(q, k, m, reason, now_ms, rev, out);
    if (!in_heap || requeue)
        key_next(q, k, false);
}

/* Is the delivery f, coming back, the message's last (MAXATTEMPTS spent,
 * or MAXAGE passed as the writer decided: give_up)? */
static bool exhausted_by(const queue_t *q, const qflight_t *f, bool give_up)
{
    return give_up || (q->cfg.maxattempts > 0 && f->msg->attempt >= q->cfg.maxattempts);
}

/* When the next attempt of f may start if it comes back with delay_ms. */
static uint64_t next_attempt_at(const queue_t *q, const qflight_t *f, uint64_t delay_ms, bool give_up,
                                uint64_t now_ms)
{
    return delay_ms > 0 && !exhausted_by(q, f, give_up) ? now_ms + delay_ms : 0;
}

/* A delivery came back (nack, lease out): spend the attempt. */
static void give_back(queue_t *q, qflight_t *f, uint64_t delay_ms, bool give_up, uint64_t now_ms, uint64_t rev,
                      queue_retry_t *out)
{
    qkey_t *k = f->key;
    qmsg_t *m = f->msg;
    out->id = m->id;
    out->dlq = NULL;
    out->dl_id = 0;
    bool exhausted = exhausted_by(q, f, give_up);
    if (!exhausted && delay_ms > 0) {
        f->token = 0;
        f->deadline_ms = now_ms + delay_ms;
        ordo_heap_update(&q->leases, &f->hn);
        out->kind = QUEUE_RETRY_LATER;
        return;
    }
    bool in_heap = k->nwait > 0 && key_is_ready(q, k), requeue = false;
    flight_end(q, f);
    if (!exhausted) {
        key_requeue_msg(q, k, m, in_heap, &requeue);
        k->nwait++;
        q->nwaiting++;
        if (!in_heap || requeue)
            key_ready(q, k);
        out->kind = QUEUE_RETRY_READY;
    } else if (q->cfg.onpoison == QUEUE_ONPOISON_PARK ||
               (q->cfg.onpoison == QUEUE_ONPOISON_DEADLETTER && q->dl_name == NULL)) {
        /* Nowhere to keep it but here: park the key rather than lose it. */
        key_requeue_msg(q, k, m, in_heap, &requeue);
        if (in_heap && !requeue)
            ready_remove(q, k);
        k->nwait++;
        q->nwaiting++;
        k->parked = 1;
        q->nparked++;
        q->nparks++;
        out->kind = QUEUE_RETRY_PARKED;
        emit(q, QUEUE_EV_PARKED, k->bytes, k->klen, m->id, 0, NULL, 0);
    } else {
        /* A MAXAGE verdict says why; attempts that ran out need no word. */
        bool by_age = give_up && !(q->cfg.maxattempts > 0 && m->attempt >= q->cfg.maxattempts);
        dead_letter(q, k, m, in_heap, by_age ? QUEUE_REASON_MAXAGE : NULL, now_ms, rev, out);
    }
}

int queue_nack(queue_t *q, uint64_t id, uint64_t token, uint64_t delay_ms, uint64_t now_ms,
               uint64_t rev, queue_retry_t *out)
{
    settle(q);
    qflight_t *f = flight_check(q, id, token, false);
    if (f == NULL)
        return 0;
    queue_retry_t tmp;
    q->nacked++;
    emit(q, QUEUE_EV_NACKED, f->key->bytes, f->key->klen, id, next_attempt_at(q, f, delay_ms, false, now_ms),
         NULL, 0);
    give_back(q, f, delay_ms, false, now_ms, rev, out ? out : &tmp);
    return 1;
}

int queue_retry(queue_t *q, uint64_t id, uint64_t token, unsigned flags, uint64_t delay_ms, uint64_t now_ms,
                uint64_t rev, queue_retry_t *out)
{
    settle(q);
    qflight_t *f = flight_check(q, id, token, false);
    bool lease = (flags & QUEUE_RETRY_F_LEASE) != 0, give_up = (flags & QUEUE_RETRY_F_GIVEUP) != 0;
    if (f == NULL || (lease && f->deadline_ms >= now_ms))
        return 0;
    queue_retry_t tmp;
    if (lease) {
        q->redelivered++;
    } else {
        q->nacked++;
        emit(q, QUEUE_EV_NACKED, f->key->bytes, f->key->klen, id, next_attempt_at(q, f, delay_ms, give_up, now_ms),
             NULL, 0);
    }
    give_back(q, f, delay_ms, give_up, now_ms, rev, out ? out : &tmp);
    return 1;
}

uint32_t queue_delivery_attempt(const queue_t *q, uint64_t id, uint64_t token)
{
    const qflight_t *f = flight_check(q, id, token, false);
    return f != NULL ? f->msg->attempt : 0;
}

int queue_extend(queue_t *q, uint64_t id, uint64_t token, uint64_t ms, uint64_t now_ms)
{
    settle(q);
    qflight_t *f = flight_check(q, id, token, false);
    if (f == NULL)
        return 0;
    f->deadline_ms = now_ms + ms;
    ordo_heap_update(&q->leases, &f->hn);
    return 1;
}

int queue_redeliver(queue_t *q, uint64_t id, uint64_t token, uint64_t now_ms, uint64_t rev,
                    queue_retry_t *out)
{
    settle(q);
    qflight_t *f = flight_check(q, id, token, true);
    if (f == NULL || f->deadline_ms >= now_ms)
        return 0;
    queue_retry_t tmp;
    if (f->token != 0)
        q->redelivered++;
    /* A nack-delayed message spent its attempt when it was nacked. */
    if (f->token == 0) {
        qkey_t *k = f->key;
        qmsg_t *m = f->msg;
        bool in_heap = k->nwait > 0 && key_is_ready(q, k), requeue = false;
        flight_end(q, f);
        key_requeue_msg(q, k, m, in_heap, &requeue);
        k->nwait++;
        q->nwaiting++;
        if (!in_heap || requeue)
            key_ready(q, k);
        if (out) {
            out->kind = QUEUE_RETRY_READY;
            out->id = id;
            out->dlq = NULL;
            out->dl_id = 0;
        }
        return 1;
    }
    give_back(q, f, 0, false, now_ms, rev, out ? out : &tmp);
    return 1;
}

int queue_unpark(queue_t *q, const void *key, size_t klen)
{
    settle(q);
    qkey_t *k = key_find(q, key, klen);
    if (k == NULL || !k->parked)
        return 0;
    k->parked = 0;
    q->nparked--;
    qmsg_t **prevpp;
    (*key_first_waiting(q, k, &prevpp))->attempt = 0; /* the poison message */
    key_ready(q, k);
    return 1;
}

/* ---- redrive, cancel, expire ------------------------------------------------------------- */

/* Unlink the waiting message id from k's FIFO (never the in-flight head)
 * and return it, or NULL. A ready key whose head goes leaves the ready
 * heap first (it is ordered by heads) and *requeue (false before the
 * first take of a key) says to put it back with key_settle(). */
static qmsg_t *key_take(queue_t *q, qkey_t *k, uint64_t id, bool *requeue)
{
    qmsg_t **prevpp, **pp = key_first_waiting(q, k, &prevpp);
    while (*pp != NULL && (*pp)->id != id) {
        prevpp = pp;
        pp = &(*pp)->u.next;
    }
    qmsg_t *m = *pp;
    if (m == NULL)
        return NULL;
    if (m == k->head && !*requeue && key_is_ready(q, k)) {
        ready_remove(q, k);
        *requeue = true; /* out of the heap until key_settle(), whatever later takes find */
    }
    if (*k->tailp == m)                 /* m is the tail: its predecessor is now */
        k->tailp = prevpp != NULL ? prevpp : &k->head;
    else if (k->tailp == &m->u.next)    /* m precedes the tail: pp points at it now */
        k->tailp = pp;
    *pp = m->u.next;
    m->u.next = NULL;
    assert(k->nwait > 0);
    k->nwait--;
    q->nwaiting--;
    return m;
}

/* After key_take()s: a key left empty is freed (K4; a parked one is parked
 * no more), a key that left the ready heap goes back with its new head. */
static void key_settle(queue_t *q, qkey_t *k, bool requeue)
{
    if (k->head == NULL) {
        if (k->parked) {
            k->parked = 0;
            q->nparked--;
        }
        key_next(q, k, false);
    } else if (requeue) {
        key_next(q, k, false);
    }
}

size_t queue_redrive(queue_t *dlq, queue_t *q, const void *key, size_t klen, uint64_t id)
{
    assert(dlq != q);
    settle(dlq);
    settle(q);
    qkey_t *k = key_find(dlq, key, klen);
    if (k == NULL)
        return 0;
    bool requeue = false;
    size_t moved = 0;
    qkey_t *to = NULL;
    for (;;) {
        const qmsg_t *first = first_waiting_msg(dlq, k);
        uint64_t want = id != 0 ? id : first != NULL ? first->id : 0;
        qmsg_t *m = want != 0 ? key_take(dlq, k, want, &requeue) : NULL;
        if (m == NULL)
            break;
        /* The allocation moves: nothing else points at it. */
        dlq->bytes -= alloc_cost(msg_size(m));
        q->bytes += alloc_cost(msg_size(m));
        m->attempt = 0;
        if (to == NULL)
            to = key_get(q, key, klen);
        key_append(q, to, m);
        q->pushed++;
        emit(q, QUEUE_EV_PUSHED, to->bytes, to->klen, m->id, 0, m->payload, m->plen);
        moved++;
        if (id != 0)
            break;
    }
    key_settle(dlq, k, requeue);
    return moved;
}

/* Remove delayed message id (of key) from the delay heap; NULL if none. */
static qmsg_t *delayed_take(queue_t *q, const void *key, size_t klen, uint64_t id)
{
    for (size_t i = 0; i < q->delays.n; i++) {
        qmsg_t *m = q->delays.v[i];
        if (m->id == id && m->u.klen == klen && (klen == 0 || memcmp(delayed_key(m), key, klen) == 0)) {
            qheap_remove(&q->delays, m);
            q->ndelayed--;
            return m;
        }
    }
    return NULL;
}

int queue_cancel(queue_t *q, const void *key, size_t klen, uint64_t id, uint64_t now_ms)
{
    settle(q);
    qkey_t *k = key_find(q, key, klen);
    bool requeue = false;
    qmsg_t *m = k != NULL ? key_take(q, k, id, &requeue) : NULL;
    if (m != NULL) {
        key_settle(q, k, requeue);
        q_free(q, m, msg_size(m));
    } else if ((m = delayed_take(q, key, klen, id)) != NULL) {
        q_free(q, m, delayed_size(m));
    } else {
        return 0;
    }
    if (q->cfg.resultttl_ms > 0)
        result_put(q, id, QUEUE_FATE_CANCELLED, NULL, 0, now_ms + q->cfg.resultttl_ms, 0);
    return 1;
}

int queue_expire(queue_t *q, const void *key, size_t klen, uint64_t id, uint64_t now_ms, uint64_t rev,
                 queue_retry_t *out)
{
    settle(q);
    qkey_t *k = key_find(q, key, klen);
    if (k == NULL)
        return 0;
    /* Only a message nobody took: one that was delivered is MAXAGE's. */
    const qmsg_t *w = first_waiting_msg(q, k);
    while (w != NULL && w->id != id)
        w = w->u.next;
    if (w == NULL || w->attempt != 0)
        return 0;
    bool requeue = false;
    qmsg_t *m = key_take(q, k, id, &requeue);
    out->id = id;
    out->kind = QUEUE_RETRY_DEADLETTER;
    dead_letter_msg(q, k, m, QUEUE_REASON_MAXWAIT, now_ms, rev, out);
    key_settle(q, k, requeue);
    return 1;
}

void queue_foreach_waiting(const queue_t *q,
                           bool (*fn)(void *arg, const char *key, size_t klen, uint64_t id, uint32_t attempt),
                           void *arg)
{
    ordo_htab_iter_t it = ORDO_HTAB_ITER_INIT;
    for (const ordo_hnode_t *n; (n = ordo_htab_next(&q->keys, &it)) != NULL;) {
        const qkey_t *k = (const qkey_t *)n;
        for (const qmsg_t *m = first_waiting_msg(q, k); m != NULL; m = m->u.next)
            if (!fn(arg, k->bytes, k->klen, m->id, m->attempt))
                return;
    }
}

const char *queue_delayed_key(const queue_t *q, uint64_t id, size_t *klen)
{
    for (size_t i = 0; i < q->delays.n; i++) {
        const qmsg_t *m = q->delays.v[i];
        if (m->id == id) {
            *klen = m->u.klen;
            return delayed_key(m);
        }
    }
    return NULL;
}

size_t queue_set_maxwait_count(const queue_set_t *s)
{
    return s->nmaxwait;
}

/* ---- pauses ------------------------------------------------------------------------------ */

/* Is k in the ready heap but for a pause (K3 without the pause: it would
 * be if unpaused)? */
static bool key_in_ready(const queue_t *q, const qkey_t *k)
{
    return k != NULL && k->nwait > 0 && key_nflight(q, k) < q->cfg.keyconc && !k->parked && !key_throttled(q, k);
}

static void pause_set_until(queue_t *q, qpause_t *p, uint64_t until_ms)
{
    bool was = ordo_heap_linked(&p->hn);
    p->until_ms = until_ms;
    if (until_ms == 0) {
        if (was)
            ordo_heap_remove(&q->pauses->ends, &p->hn);
    } else if (was) {
        ordo_heap_update(&q->pauses->ends, &p->hn);
    } else {
        ordo_heap_xpush(&q->pauses->ends, &p->hn);
    }
}

static int pause_key(queue_t *q, const void *key, size_t klen, uint64_t until_ms)
{
    qpause_t *p = pause_find(q, key, klen);
    if (p != NULL) {
        if (p->until_ms == until_ms)
            return 0;
        pause_set_until(q, p, until_ms);
        return 1;
    }
    if (q->pauses == NULL) {
        q->pauses = ordo_xcalloc(1, sizeof *q->pauses);
        q->bytes += alloc_cost(sizeof *q->pauses);
        htab_init_or_die(&q->pauses->keys, pause_eq);
        ordo_heap_init(&q->pauses->ends, pause_less, QUEUE_HEAP_CAP_MIN, ORDO_HEAP_SHRINK);
    }
    assert(klen <= UINT32_MAX);
    p = q_alloc(q, sizeof *p + klen);
    p->klen = (uint32_t)klen;
    if (klen)
        memcpy(p->bytes, key, klen);
    ordo_heap_node_init(&p->hn);
    p->until_ms = 0;
    ordo_htab_insert(&q->pauses->keys, &p->hnode, ordo_htab_hash(&q->pauses->keys, key, klen));
    q->set->npaused_keys++;
    pause_set_until(q, p, until_ms);
    qkey_t *k = key_find(q, key, klen);
    if (key_in_ready(q, k))
        ready_remove(q, k);
    return 1;
}

int queue_pause(queue_t *q, const void *key, size_t klen, uint64_t until_ms)
{
    settle(q);
    if (key != NULL)
        return pause_key(q, key, klen, until_ms);
    if (q->paused && q->paused_until_ms == until_ms)
        return 0;
    if (!q->paused)
        q->set->npaused_queues++;
    q->paused = true;
    q->paused_until_ms = until_ms;
    return 1;
}

int queue_resume(queue_t *q, const void *key, size_t klen)
{
    settle(q);
    if (key == NULL) {
        if (!q->paused)
            return 0;
        q->paused = false;
        q->paused_until_ms = 0;
        assert(q->set->npaused_queues > 0);
        q->set->npaused_queues--;
        return 1;
    }
    qpause_t *p = pause_find(q, key, klen);
    if (p == NULL)
        return 0;
    pause_free(q, p);
    qkey_t *k = key_find(q, key, klen);
    if (key_in_ready(q, k))
        ready_push(q, k);
    return 1;
}

int queue_pause_end(queue_t *q, const void *key, size_t klen, uint64_t now_ms)
{
    if (key == NULL) {
        if (!q->paused || q->paused_until_ms == 0 || q->paused_until_ms >= now_ms)
            return 0;
        return queue_resume(q, NULL, 0);
    }
    const qpause_t *p = pause_find(q, key, klen);
    if (p == NULL || p->until_ms == 0 || p->until_ms >= now_ms)
        return 0;
    return queue_resume(q, key, klen);
}

bool queue_paused(const queue_t *q, const void *key, size_t klen, uint64_t *until_ms)
{
    if (key == NULL) {
        *until_ms = q->paused ? q->paused_until_ms : 0;
        return q->paused;
    }
    const qpause_t *p = pause_find(q, key, klen);
    *until_ms = p != NULL ? p->until_ms : 0;
    return p != NULL;
}

size_t queue_set_paused_keys(const queue_set_t *s)
{
    return s->npaused_keys;
}

size_t queue_set_paused_queues(const queue_set_t *s)
{
    return s->npaused_queues;
}

struct foreach_pause_arg {
    void (*fn)(void *arg, const char *key, size_t klen, uint64_t until_ms);
    void *arg;
};

static void foreach_pause_cb(ordo_hnode_t *node, void *arg)
{
    struct foreach_pause_arg *a = arg;
    const qpause_t *p = (const qpause_t *)node;
    a->fn(a->arg, p->bytes, p->klen, p->until_ms);
}

void queue_foreach_pause(const queue_t *q, void (*fn)(void *arg, const char *key, size_t klen, uint64_t until_ms),
                         void *arg)
{
    if (q->paused)
        fn(arg, NULL, 0, q->paused_until_ms);
    if (q->pauses != NULL) {
        struct foreach_pause_arg a = {fn, arg};
        ordo_htab_foreach(&q->pauses->keys, foreach_pause_cb, &a);
    }
}

void queue_load_pause(queue_t *q, const void *key, size_t klen, uint64_t until_ms)
{
    queue_pause(q, key, klen, until_ms);
    queue_account(q);
}

/* ---- dedup and results --------------------------------------------------------------------- */

uint64_t queue_dedup_lookup(const queue_t *q, const void *dedup_id, size_t dlen, uint64_t now_ms)
{
    qdedup_t *e = dedup_find(q, dedup_id, dlen);
    return e && e->end_ms >= now_ms ? e->msg_id : 0;
}

int queue_dedup_expire(queue_t *q, const void *dedup_id, size_t dlen, uint64_t now_ms)
{
    settle(q);
    qdedup_t *e = dedup_find(q, dedup_id, dlen);
    if (e == NULL || e->end_ms >= now_ms)
        return 0;
    dedup_free(q, e);
    return 1;
}

static void fill_result(const qresult_t *r, queue_result_t *out)
{
    out->fate = r->fate;
    out->result = r->bytes;
    out->rlen = r->rlen;
    out->expire_ms = r->expire_ms;
    out->dl_id = r->dl_id;
}

int queue_result(const queue_t *q, uint64_t id, queue_result_t *out)
{
    qresult_t *r = result_find(q, id);
    if (r == NULL) {
        memset(out, 0, sizeof *out);
        return QUEUE_FATE_NONE;
    }
    fill_result(r, out);
    return r->fate;
}

int queue_result_expire(queue_t *q, uint64_t id, uint64_t now_ms)
{
    settle(q);
    qresult_t *r = result_find(q, id);
    if (r == NULL || r->expire_ms >= now_ms)
        return 0;
    result_free(q, r);
    return 1;
}

/* ---- timers ---------------------------------------------------------------------------------- */

bool queue_next_lease(const queue_t *q, queue_timer_t *out)
{
    const ordo_heap_node_t *n = ordo_heap_peek(&q->leases);
    if (n == NULL)
        return false;
    const qflight_t *f = FLIGHT_OF(n);
    memset(out, 0, sizeof *out);
    out->kind = QUEUE_TIMER_LEASE;
    out->due_ms = f->deadline_ms;
    out->id = f->msg->id;
    out->token = f->token;
    out->attempt = f->msg->attempt;
    return true;
}

bool queue_next_delay(const queue_t *q, queue_timer_t *out)
{
    if (q->delays.n == 0)
        return false;
    const qmsg_t *m = q->delays.v[0];
    memset(out, 0, sizeof *out);
    out->kind = QUEUE_TIMER_DELAY;
    out->due_ms = delayed_due(m);
    out->id = m->id;
    return true;
}

bool queue_next_dedup(const queue_t *q, queue_timer_t *out)
{
    const ordo_heap_node_t *n = ordo_heap_peek(&q->dedup_heap);
    if (n == NULL)
        return false;
    const qdedup_t *e = DEDUP_OF(n);
    memset(out, 0, sizeof *out);
    out->kind = QUEUE_TIMER_DEDUP;
    out->due_ms = e->end_ms;
    out->id = e->msg_id;
    out->dedup_id = e->bytes;
    out->dlen = e->dlen;
    return true;
}

bool queue_next_result(const queue_t *q, queue_timer_t *out)
{
    const ordo_heap_node_t *n = ordo_heap_peek(&q->result_heap);
    if (n == NULL)
        return false;
    const qresult_t *r = RESULT_OF(n);
    memset(out, 0, sizeof *out);
    out->kind = QUEUE_TIMER_RESULT;
    out->due_ms = r->expire_ms;
    out->id = r->id;
    return true;
}

bool queue_next_idem(const queue_t *q, queue_timer_t *out)
{
    const ordo_heap_node_t *n = ordo_heap_peek(&q->idem_heap);
    if (n == NULL)
        return false;
    const qidem_t *e = IDEM_OF(n);
    size_t klen = idem_klen(e);
    memset(out, 0, sizeof *out);
    out->kind = QUEUE_TIMER_IDEM;
    out->due_ms = e->end_ms;
    out->id = e->msg_id;
    out->key = e->bytes + 4;
    out->klen = klen;
    out->dedup_id = e->bytes + 4 + klen;
    out->dlen = e->len - 4 - klen;
    return true;
}

bool queue_next_pause_end(const queue_t *q, queue_timer_t *out)
{
    const ordo_heap_node_t *n = q->pauses ? ordo_heap_peek(&q->pauses->ends) : NULL;
    bool whole = q->paused && q->paused_until_ms > 0;
    if (n == NULL && !whole)
        return false;
    memset(out, 0, sizeof *out);
    out->kind = QUEUE_TIMER_PAUSE;
    if (n != NULL && (!whole || PAUSE_OF(n)->until_ms < q->paused_until_ms)) {
        const qpause_t *p = PAUSE_OF(n);
        out->due_ms = p->until_ms;
        out->key = p->bytes;
        out->klen = p->klen;
    } else {
        out->due_ms = q->paused_until_ms;
        out->queue_wide = true;
    }
    return true;
}

bool queue_next_timer(const queue_t *q, queue_timer_t *out)
{
    bool (*const kinds[])(const queue_t *, queue_timer_t *) = {
        queue_next_lease, queue_next_delay, queue_next_dedup, queue_next_result, queue_next_idem,
        queue_next_pause_end, queue_next_rate};
    bool found = false;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        queue_timer_t t;
        if (kinds[i](q, &t) && (!found || t.due_ms < out->due_ms)) {
            *out = t;
            found = true;
        }
    }
    return found;
}

struct next_timer_arg {
    queue_t *q;
    queue_timer_t t;
    bool found;
};

static void next_timer_cb(void *arg, queue_t *q)
{
    struct next_timer_arg *a = arg;
    queue_timer_t t;
    if (queue_next_timer(q, &t) && (!a->found || t.due_ms < a->t.due_ms)) {
        a->q = q;
        a->t = t;
        a->found = true;
    }
}

bool queue_set_next_timer(const queue_set_t *s, queue_t **qout, queue_timer_t *out)
{
    struct next_timer_arg a = {.found = false};
    queue_set_foreach(s, next_timer_cb, &a);
    if (a.found) {
        *qout = a.q;
        *out = a.t;
    }
    return a.found;
}

/* ---- introspection ------------------------------------------------------------------------------ */

int queue_keyinfo(const queue_t *q, const void *key, size_t klen, queue_keyinfo_t *out)
{
    memset(out, 0, sizeof *out);
    out->paused = queue_paused(q, key, klen, &out->paused_until_ms);
    const qrate_t *r = rate_find(q, key, klen);
    out->throttled_until_ms = r != NULL && r->throttled ? r->event_ms : 0;
    const qkey_t *k = key_find(q, key, klen);
    if (k == NULL)
        return out->state = QUEUE_KEY_IDLE;
    out->waiting = k->nwait;
    out->inflight = key_nflight(q, k);
    if (k->inflight) { /* the head is in flight (K1): the oldest of the key's deliveries */
        const qflight_t *f = flight_find(q, k->head->id);
        assert(f != NULL && f->key == k);
        out->state = QUEUE_KEY_PROCESSING;
        out->inflight_id = k->head->id;
        out->since_ms = f->since_ms;
        out->deadline_ms = f->deadline_ms;
        out->token = f->token;
        out->attempt = k->head->attempt;
        if (f->token == 0)
            out->next_attempt_ms = f->deadline_ms;
    } else if (k->parked) {
        const qmsg_t *poison = first_waiting_msg(q, k);
        out->state = QUEUE_KEY_PARKED;
        out->inflight_id = poison->id;
        out->attempt = poison->attempt;
    } else {
        out->state = QUEUE_KEY_WAITING;
    }
    return out->state;
}

/* Top keys: a min-heap of the n best seen so far, by (waiting, then key
 * bytes descending so that ties keep the smaller key). */
struct topkeys_arg {
    queue_topkey_t *v;
    size_t n, max;
};

static bool top_less(const queue_topkey_t *a, const queue_topkey_t *b)
{
    if (a->waiting != b->waiting)
        return a->waiting < b->waiting;
    size_t n = a->klen < b->klen ? a->klen : b->klen;
    int c = n ? memcmp(a->key, b->key, n) : 0;
    if (c == 0)
        c = a->klen < b->klen ? -1 : a->klen > b->klen;
    return c > 0;
}

static void top_sift_down(queue_topkey_t *v, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && top_less(&v[c + 1], &v[c]))
            c++;
        if (!top_less(&v[c], &v[i]))
            return;
        queue_topkey_t t = v[i];
        v[i] = v[c];
        v[c] = t;
        i = c;
    }
}

static void topkeys_cb(ordo_hnode_t *node, void *arg)
{
    struct topkeys_arg *a = arg;
    const qkey_t *k = (const qkey_t *)node;
    if (k->nwait == 0)
        return;
    queue_topkey_t e = {k->bytes, k->klen, k->nwait};
    if (a->n < a->max) {
        size_t i = a->n++;
        a->v[i] = e;
        while (i > 0 && top_less(&a->v[i], &a->v[(i - 1) / 2])) {
            queue_topkey_t t = a->v[i];
            a->v[i] = a->v[(i - 1) / 2];
            a->v[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    } else if (top_less(&a->v[0], &e)) {
        a->v[0] = e;
        top_sift_down(a->v, a->n, 0);
    }
}

size_t queue_topkeys(const queue_t *q, size_t n, queue_topkey_t *out)
{
    if (n == 0)
        return 0;
    struct topkeys_arg a = {out, 0, n};
    ordo_htab_foreach((ordo_htab_t *)(uintptr_t)&q->keys, topkeys_cb, &a);
    /* Heap-sort: repeatedly move the smallest to the end -> most first. */
    for (size_t m = a.n; m > 1; m--) {
        queue_topkey_t t = out[0];
        out[0] = out[m - 1];
        out[m - 1] = t;
        top_sift_down(out, m - 1, 0);
    }
    return a.n;
}

void queue_len(const queue_t *q, queue_len_t *out)
{
    out->waiting = q->nwaiting;
    out->inflight = q->flights.count;
    out->delayed = q->ndelayed;
}

/* The cost of a heap's array of cap pointers. */
static size_t heap_bytes(size_t cap)
{
    return cap ? alloc_cost(cap * sizeof(void *)) : 0;
}

static size_t htab_bytes(const ordo_htab_t *t)
{
    return alloc_cost((t->mask + 1) * sizeof(ordo_hnode_t *)) +
           (t->old != NULL ? alloc_cost((t->old_mask + 1) * sizeof(ordo_hnode_t *)) : 0);
}

/* The queue's heap bytes (estimate incl. malloc overhead). O(1). */
static size_t queue_bytes(const queue_t *q)
{
    return q->bytes + alloc_cost(sizeof *q + q->nlen) + htab_bytes(&q->keys) + htab_bytes(&q->flights) +
           htab_bytes(&q->dedups) + htab_bytes(&q->results) + htab_bytes(&q->idems) + heap_bytes(q->ready.cap) + heap_bytes(q->rr.cap) +
           heap_bytes(q->leases.cap) + heap_bytes(q->delays.cap) + heap_bytes(q->dedup_heap.cap) +
           heap_bytes(q->result_heap.cap) + heap_bytes(q->idem_heap.cap) +
           (q->dl_name ? alloc_cost(q->cfg.dl_len) : 0) +
           (q->pauses ? htab_bytes(&q->pauses->keys) + heap_bytes(q->pauses->ends.cap) : 0) +
           (q->conc ? htab_bytes(q->conc) : 0) +
           (q->rates ? htab_bytes(&q->rates->keys) + heap_bytes(q->rates->throttled.cap) +
                           heap_bytes(q->rates->sweep.cap)
                     : 0);
}

void queue_account(queue_t *q)
{
    size_t now = queue_bytes(q);
    q->set->bytes = q->set->bytes - q->counted + now;
    q->counted = now;
}

size_t queue_set_bytes(const queue_set_t *s)
{
    return s->bytes;
}

void queue_info(const queue_t *q, queue_info_t *out)
{
    memset(out, 0, sizeof *out);
    out->config = q->cfg;
    queue_len(q, &out->len);
    out->keys = q->keys.count;
    out->ready_keys = ready_count(q);
    out->parked_keys = q->nparked;
    out->paused = q->paused;
    out->paused_until_ms = q->paused_until_ms;
    out->paused_keys = q->pauses ? q->pauses->keys.count : 0;
    out->throttled_keys = q->rates ? ordo_heap_len(&q->rates->throttled) : 0;
    out->dedup_entries = q->dedups.count;
    out->idem_entries = q->idems.count;
    out->results = q->results.count;
    out->bytes = queue_bytes(q);
    out->pushed = q->pushed;
    out->merged = q->merged;
    out->deduped = q->deduped;
    out->delivered = q->delivered;
    out->acked = q->acked;
    out->nacked = q->nacked;
    out->redelivered = q->redelivered;
    out->deadlettered = q->deadlettered;
    out->parked = q->nparks;
}

/* Peek: walk the ready heap in order with an auxiliary min-heap of its
 * positions (taking a position adds its two children): O(n log n). */
typedef struct peek_aux_s {
    const qheap_t *h;
    size_t *v;
    size_t n;
} peek_aux_t;

static bool aux_less(const peek_aux_t *a, size_t i, size_t j)
{
    return ready_less(a->h->v[a->v[i]], a->h->v[a->v[j]]);
}

static void aux_swap(peek_aux_t *a, size_t i, size_t j)
{
    size_t t = a->v[i];
    a->v[i] = a->v[j];
    a->v[j] = t;
}

static void aux_push(peek_aux_t *a, size_t pos)
{
    if (pos >= a->h->n)
        return;
    size_t i = a->n++;
    a->v[i] = pos;
    while (i > 0 && aux_less(a, i, (i - 1) / 2)) {
        aux_swap(a, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static size_t aux_pop(peek_aux_t *a)
{
    size_t top = a->v[0];
    a->v[0] = a->v[--a->n];
    for (size_t i = 0;;) {
        size_t c = 2 * i + 1;
        if (c >= a->n)
            break;
        if (c + 1 < a->n && aux_less(a, c + 1, c))
            c++;
        if (!aux_less(a, c, i))
            break;
        aux_swap(a, i, c);
        i = c;
    }
    return top;
}

uint64_t queue_oldest_ready_id(const queue_t *q)
{
    if (ready_count(q) == 0 || q->paused)
        return 0;
    const qkey_t *k = fair_rr(q) ? ring_at(&q->rr, 0) : q->ready.v[0];
    return first_waiting_msg(q, k)->id;
}

size_t queue_peek(const queue_t *q, size_t n, queue_delivery_t *out)
{
    if (q->paused)
        return 0;
    if (fair_rr(q)) { /* the ring is in turn order already */
        size_t got = 0;
        for (; got < n && got < q->rr.n; got++) {
            const qkey_t *k = ring_at(&q->rr, got);
            fill_delivery(k, first_waiting_msg(q, k), &out[got]);
        }
        return got;
    }
    if (n > q->ready.n)
        n = q->ready.n;
    if (n == 0)
        return 0;
    /* Each step takes one position and adds at most two: n + 1 slots. */
    peek_aux_t a = {&q->ready, ordo_xmalloc((n + 1) * sizeof(size_t)), 0};
    aux_push(&a, 0);
    size_t got = 0;
    while (got < n) {
        size_t pos = aux_pop(&a);
        const qkey_t *k = q->ready.v[pos];
        fill_delivery(k, first_waiting_msg(q, k), &out[got++]);
        aux_push(&a, 2 * pos + 1);
        aux_push(&a, 2 * pos + 2);
    }
    free(a.v);
    return got;
}

/* ---- snapshots ---------------------------------------------------------------------------------- */

struct foreach_msg_arg {
    const queue_t *q;
    void (*fn)(void *arg, const queue_snap_msg_t *m);
    void *arg;
};

static void foreach_key_cb(ordo_hnode_t *node, void *arg)
{
    struct foreach_msg_arg *a = arg;
    const qkey_t *k = (const qkey_t *)node;
    uint32_t nflight = key_nflight(a->q, k);
    for (const qmsg_t *m = k->head; m != NULL; m = m->u.next) {
        queue_snap_msg_t s = {.state = QUEUE_MSG_WAITING, .id = m->id, .key = k->bytes,
                              .klen = k->klen, .payload = m->payload, .plen = m->plen,
                              .attempt = m->attempt, .parked = k->parked};
        if (nflight > 0) { /* the first nflight are the ones in flight (K1) */
            nflight--;
            const qflight_t *f = flight_find(a->q, m->id);
            s.state = QUEUE_MSG_INFLIGHT;
            s.token = f->token;
            s.since_ms = f->since_ms;
            s.deadline_ms = f->deadline_ms;
        }
        a->fn(a->arg, &s);
    }
}

void queue_foreach_msg(const queue_t *q, void (*fn)(void *arg, const queue_snap_msg_t *m), void *arg)
{
    struct foreach_msg_arg a = {q, fn, arg};
    ordo_htab_foreach((ordo_htab_t *)(uintptr_t)&q->keys, foreach_key_cb, &a);
    for (size_t i = 0; i < q->delays.n; i++) {
        const qmsg_t *m = q->delays.v[i];
        queue_snap_msg_t s = {.state = QUEUE_MSG_DELAYED, .id = m->id, .key = delayed_key(m),
                              .klen = m->u.klen, .payload = m->payload, .plen = m->plen,
                              .attempt = m->attempt, .deadline_ms = delayed_due(m)};
        fn(arg, &s);
    }
}

struct foreach_dedup_arg {
    void (*fn)(void *arg, const char *dedup_id, size_t dlen, uint64_t msg_id, uint64_t end_ms);
    void *arg;
};

static void foreach_dedup_cb(ordo_hnode_t *node, void *arg)
{
    struct foreach_dedup_arg *a = arg;
    const qdedup_t *e = (const qdedup_t *)node;
    a->fn(a->arg, e->bytes, e->dlen, e->msg_id, e->end_ms);
}

void queue_foreach_dedup(const queue_t *q,
                         void (*fn)(void *arg, const char *dedup_id, size_t dlen, uint64_t msg_id,
                                    uint64_t end_ms),
                         void *arg)
{
    struct foreach_dedup_arg a = {fn, arg};
    ordo_htab_foreach((ordo_htab_t *)(uintptr_t)&q->dedups, foreach_dedup_cb, &a);
}

struct foreach_idem_arg {
    void (*fn)(void *arg, const char *key, size_t klen, const char *idem, size_t ilen, const queue_idem_t *e);
    void *arg;
};

static void foreach_idem_cb(ordo_hnode_t *node, void *arg)
{
    struct foreach_idem_arg *a = arg;
    const qidem_t *e = (const qidem_t *)node;
    size_t klen = idem_klen(e);
    queue_idem_t v = {.hash = e->hash, .msg_id = e->msg_id, .end_ms = e->end_ms};
    a->fn(a->arg, e->bytes + 4, klen, e->bytes + 4 + klen, e->len - 4 - klen, &v);
}

void queue_foreach_idem(const queue_t *q,
                        void (*fn)(void *arg, const char *key, size_t klen, const char *idem, size_t ilen,
                                   const queue_idem_t *e),
                        void *arg)
{
    struct foreach_idem_arg a = {fn, arg};
    ordo_htab_foreach((ordo_htab_t *)(uintptr_t)&q->idems, foreach_idem_cb, &a);
}

struct foreach_result_arg {
    void (*fn)(void *arg, uint64_t id, const queue_result_t *r);
    void *arg;
};

static void foreach_result_cb(ordo_hnode_t *node, void *arg)
{
    struct foreach_result_arg *a = arg;
    const qresult_t *r = (const qresult_t *)node;
    queue_result_t v;
    fill_result(r, &v);
    a->fn(a->arg, r->id, &v);
}

void queue_foreach_result(const queue_t *q, void (*fn)(void *arg, uint64_t id, const queue_result_t *r),
                          void *arg)
{
    struct foreach_result_arg a = {fn, arg};
    ordo_htab_foreach((ordo_htab_t *)(uintptr_t)&q->results, foreach_result_cb, &a);
}

int queue_load_msg(queue_t *q, const queue_snap_msg_t *s)
{
    settle(q);
    if (s->state == QUEUE_MSG_DELAYED) {
        queue_push_t p = {.key = s->key, .klen = s->klen, .payload = s->payload, .plen = s->plen};
        push_delayed(q, &p, s->id, s->deadline_ms);
        queue_account(q);
        return 0;
    }
    qkey_t *k = key_get(q, s->key, s->klen);
    bool first = k->head == NULL;
    /* A key's messages in flight are its first ones, at most KEYCONCURRENCY
     * of them (K1): a snapshot that says otherwise is damaged, and is
     * refused before anything changes (the key has a message, so
     * key_get() made nothing). */
    if (s->state == QUEUE_MSG_INFLIGHT && (k->nwait > 0 || key_nflight(q, k) >= q->cfg.keyconc))
        return -1;
    /* Mark a parked key before linking, so key_append() leaves it out of
     * the ready heap (K3). */
    if (first && s->parked) {
        k->parked = 1;
        q->nparked++;
    }
    qmsg_t *m = msg_new(q, s->id, s->payload, s->plen);
    m->attempt = s->attempt;
    if (s->state != QUEUE_MSG_INFLIGHT) {
        key_append(q, k, m);
    } else {
        /* Behind the key's other in-flight messages, before any waiting. */
        key_insert_at(k, first ? &k->head : &(*k->tailp)->u.next, m);
        qflight_t *f = q_alloc(q, sizeof *f);
        f->key = k;
        f->msg = m;
        f->token = s->token;
        f->since_ms = s->since_ms;
        f->deadline_ms = s->deadline_ms;
        key_flight_inc(q, k);
        ordo_htab_insert(&q->flights, &f->hnode, id_hash(&q->flights, m->id));
        ordo_heap_xpush(&q->leases, &f->hn);
    }
    queue_account(q);
    return 0;
}

void queue_load_dedup(queue_t *q, const void *dedup_id, size_t dlen, uint64_t msg_id, uint64_t end_ms)
{
    settle(q);
    dedup_put(q, dedup_id, dlen, msg_id, end_ms);
    queue_account(q);
}

void queue_load_result(queue_t *q, uint64_t id, const queue_result_t *r)
{
    settle(q);
    result_put(q, id, r->fate, r->result, r->rlen, r->expire_ms, r->dl_id);
    queue_account(q);
}

void queue_load_idem(queue_t *q, const void *key, size_t klen, const void *idem, size_t ilen, const queue_idem_t *e)
{
    settle(q);
    idem_put(q, key, klen, idem, ilen, e);
    queue_account(q);
}

void queue_foreach_ready(const queue_t *q, void (*fn)(void *arg, const char *key, size_t klen), void *arg)
{
    if (!fair_rr(q))
        return;
    for (size_t i = 0; i < q->rr.n; i++) {
        const qkey_t *k = ring_at(&q->rr, i);
        fn(arg, k->bytes, k->klen);
    }
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(qkey_t *const *)a, y = (uintptr_t)*(qkey_t *const *)b;
    return (x > y) - (x < y);
}

int queue_load_ready(queue_t *q, const char *const *keys, const size_t *klens, size_t n)
{
    if (!fair_rr(q) || n != q->rr.n)
        return -1;
    qkey_t **order = ordo_xmalloc((n ? n : 1) * sizeof *order);
    for (size_t i = 0; i < n; i++) {
        order[i] = key_find(q, keys[i], klens[i]);
        if (order[i] == NULL || !key_is_ready(q, order[i])) {
            free(order);
            return -1;
        }
    }
    /* Each ready key once: as many as there are, none twice. */
    qkey_t **sorted = ordo_xmalloc((n ? n : 1) * sizeof *sorted);
    memcpy(sorted, order, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_ptr);
    bool twice = false;
    for (size_t i = 1; i < n; i++)
        twice = twice || sorted[i] == sorted[i - 1];
    free(sorted);
    if (twice) {
        free(order);
        return -1;
    }
    q->rr.n = 0;
    q->rr.head = 0;
    for (size_t i = 0; i < n; i++)
        ring_push(&q->rr, order[i]);
    free(order);
    return 0;
}
