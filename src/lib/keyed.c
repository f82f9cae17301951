/*
 * keyed.c -- the keyed serial executor; see ordo/keyed.h for the contract.
 *
 * Shape. One mutex (mu) guards everything below except the tasks' payloads:
 *
 *   keys   hash table of key states, one per key that has pending tasks;
 *          a key state holds the key bytes, a ring of its queued task
 *          entries (not yet started; KEYED_RING_INLINE entries inside the
 *          key state, then a power-of-two array that doubles when full),
 *          its pending count and a running flag;
 *   ready  FIFO of key states that have queued tasks and are not running,
 *          a ring of pointers with room for every active key (so pushing
 *          never fails; it grows when a key is created).
 *
 * A worker pops a turn's worth of ready keys from the head (up to
 * KEYED_BATCH_MAX, and no more than its share of the ready keys, see
 * batch_share()), marks them running and copies the head entry of each.
 * With mu released it runs those tasks one after another, completing each
 * future (its callback runs on the worker, the key still marked running, so
 * same-key completions are ordered too). It then retakes mu once for the
 * whole turn and, for each key, either puts it back at the tail of ready
 * (more tasks: one task per key per turn is what keeps a hot key from
 * starving the others) or, with nothing left, removes it from the table.
 * Finishing one turn and taking the next share a critical section.
 *
 * Invariants, under mu:
 *   - a key state is in the table iff its pending count > 0;
 *   - ready_cap >= keys.count;
 *   - a key state is in ready iff !running && its ring is non-empty;
 *   - ready_len is the length of ready;
 *   - sum of key pending counts == ex->pending;
 *   - pending > 0 implies some key is ready or running, and a worker that
 *     runs a key only leaves the loop when ready is empty, so a stop cannot
 *     strand accepted work.
 *
 * Costs. A post takes mu once, looks its key up once, and allocates
 * nothing in the steady state (key states are recycled, see below, and
 * rings reused); a submit adds one allocation, its future, made before mu
 * is taken. A worker takes mu once per turn, i.e. once per up to
 * KEYED_BATCH_MAX tasks, and prefetches the turn's key states and entries
 * so that their cache misses overlap. mu is an adaptive mutex: critical
 * sections are short, so a brief spin usually beats a futex sleep. A
 * worker that finds nothing ready spins a little before sleeping
 * (spin_for_work(); one at a time), and producers signal no one while it
 * does. Otherwise idle workers are signalled only when a key becomes ready
 * and more workers are idle than were already signalled (wakes_pending),
 * so a stream of posts to idle keys costs one wake-up per sleeping worker,
 * not one per post; a worker whose turn leaves keys in ready passes a
 * wake-up on the same way. Blocked producers are
 * woken with a broadcast on one condition variable, only while any
 * producer is blocked, and only when a count falls to its low-water mark
 * (see crossed_low_mark()): a full executor then wakes its producers once
 * per quarter-bound of finished tasks, not once per task. A producer
 * blocked on one key's bound may be woken by another key's progress and
 * simply waits again.
 *
 * Recycling. Key states with short keys are kept on a free list (under mu)
 * with their ring if it is small (KEYED_RING_KEEP entries or fewer),
 * instead of being freed, so a steady stream of posts to keys that come and
 * go costs no malloc/free pair (which, freed on a worker and allocated on a
 * producer, crossed threads every time). The list holds up to keys_high
 * states (the most keys active at once; at least KEYED_CACHE_MAX), and the
 * table keeps buckets for as many (ordo_htab_set_floor()), so that the
 * number of active keys can swing without a malloc per key or a rehash;
 * after KEYED_TRIM_IDLE_MS with nothing pending a sleeping worker trims
 * both back (key_cache_trim()). A key's ring never shrinks while the key
 * has pending tasks: it is at most the next power of two above
 * key_pending_max entries.
 *
 * Cancellation. A cancelling stop sets ex->cancel; from then on a worker
 * that pops a key empties its whole ring and completes the tasks with
 * ORDO_ECANCELED (or calls the post's cancel_fn) in submission order, on
 * the worker thread, while the key is marked running. A worker checks the
 * flag again before each task of its turn, so a task taken but not yet
 * started when the stop begins is cancelled too; tasks already running
 * finish normally.
 */
#include "ordo/keyed.h"

#include <assert.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "future_impl.h"
#include "base/htab.h"
#include "sync.h"

/* Recycled key states kept even when idle: at ~250 bytes a state plus at
 * most KEYED_RING_KEEP entries of 32 bytes, at most ~750 KiB, which covers
 * the turnover of a busy executor. */
#define KEYED_CACHE_MAX 1024
/* Beyond KEYED_CACHE_MAX, the cache keeps as many key states as were active
 * at once (keys_high), and the table keeps buckets for as many, until the
 * executor has been idle this long. */
#define KEYED_TRIM_IDLE_MS 100
/* Key states are allocated with room for at least this many key bytes, so
 * that most can be recycled for any other short key. */
#define KEYED_KEY_INLINE_LEN 32
/* A key's ring starts as this many entries (a power of two) inside the key
 * state, so a key with few queued tasks needs no allocation for them ... */
#define KEYED_RING_INLINE 4
/* ... and a recycled key state keeps a grown ring of at most this many. */
#define KEYED_RING_KEEP 16
/* Tasks one worker takes per turn (one each of as many ready keys): mu is
 * taken once per turn. Small enough that a turn of short tasks is short. */
#define KEYED_BATCH_MAX 16
/* The ready ring starts (and, once the executor idles, shrinks back to)
 * this many slots; it grows with the active keys. A power of two. */
#define KEYED_READY_MIN 16
/* A worker that finds nothing ready polls before it sleeps: pauses from
 * KEYED_SPIN_PAUSE_MIN to KEYED_SPIN_PAUSE_MAX pause instructions, doubling
 * (a few microseconds in all), then yields the CPU between polls, up to
 * KEYED_SPIN_POLLS polls. Only one worker spins at a time, and producers do
 * not signal while one does: with short tasks, a worker that has just run
 * out of work usually finds the next key this way, where sleeping would
 * cost a futex wake-up (and often a context switch) per task. Yielding, on
 * a machine with more runnable threads than cores, hands the core to the
 * producer the worker is waiting for. */
#define KEYED_SPIN_PAUSE_MIN 32u
#define KEYED_SPIN_PAUSE_MAX 256u
#define KEYED_SPIN_POLLS 12u

/* One queued task. A post has future == NULL. */
typedef struct keyed_entry_s {
    ordo_keyed_fn fn;
    ordo_keyed_cancel_fn cancel_fn; /* posts only */
    void *arg;
    ordo_future_t *future;          /* submits: the future, freed by its last release */
} keyed_entry_t;

/* A key state, in one block: this header, key_cap bytes for the key, then
 * the inline ring (key_inline_ring()). The fields a submit and a turn touch
 * come first and the key bytes right after, so a lookup or a turn touches
 * few cache lines. */
typedef struct keyed_key_s {
    ordo_hnode_t node;         /* in ex->keys; first, so a node is its key */
    keyed_entry_t *ring;       /* queued, not started: count from head */
    size_t head, count;
    size_t cap;                /* ring entries, a power of two */
    size_t pending;            /* queued + running */
    struct keyed_key_s *next;  /* in ex->key_cache */
    size_t len;
    size_t key_cap;            /* bytes allocated for the key, a multiple of 8 */
    bool running;
    unsigned char bytes[];
} keyed_key_t;

struct ordo_keyed_s {
    pthread_mutex_t mu;
    pthread_cond_t work_cond;  /* workers: a key became ready, or stop */
    pthread_cond_t space_cond; /* producers: room freed, or stop */
    pthread_cond_t stop_cond;  /* later stop callers: workers joined */
    ordo_htab_t keys;
    keyed_key_t **ready;       /* ring of ready_cap >= keys.count key states */
    size_t ready_cap, ready_first;
    atomic_size_t ready_len;   /* written under mu; a spinning worker reads it without */
    size_t pending;
    size_t producers_waiting;
    unsigned workers_idle;     /* workers waiting on work_cond */
    unsigned workers_spinning; /* 0 or 1: a worker polling ready_len, mu released */
    unsigned wakes_pending;    /* signals sent that no woken worker has counted yet */
    uint64_t post_failures;
    keyed_key_t *key_cache;    /* free key states of key_cap KEYED_KEY_INLINE_LEN */
    size_t key_cached;
    size_t keys_high;          /* most keys active at once since the cache was last trimmed */
    bool stopping;
    atomic_bool cancel;        /* written under mu; read without it by workers mid-turn */
    bool joining;
    bool joined;
    ordo_keyed_options_t opts;
    unsigned nthreads;         /* threads started */
    pthread_t *threads;        /* written under mu, read under mu */
};

/* ---- small helpers ------------------------------------------------------ */

static bool key_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const keyed_key_t *k = (const keyed_key_t *)n;
    return k->len == len && (len == 0 || memcmp(k->bytes, key, len) == 0);
}

static void future_free(ordo_future_t *f)
{
    free(f);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static bool cancelling(const ordo_keyed_t *ex)
{
    return atomic_load_explicit(&ex->cancel, memory_order_relaxed);
}

/* Is the calling thread one of ex's workers? mu held. O(workers), called
 * only on slow paths (a submit about to block, a stop). */
static bool on_worker(const ordo_keyed_t *ex)
{
    pthread_t self = pthread_self();
    for (unsigned i = 0; i < ex->nthreads; i++)
        if (pthread_equal(ex->threads[i], self))
            return true;
    return false;
}

/* Length of ready. mu held (without it, only a hint). */
static size_t ready_count(const ordo_keyed_t *ex)
{
    return atomic_load_explicit(&ex->ready_len, memory_order_relaxed);
}

/* Append k to ready. Never fails: ready_cap >= keys.count, and a key is in
 * ready at most once. */
static void ready_push(ordo_keyed_t *ex, keyed_key_t *k)
{
    assert(!k->running && k->count > 0);
    size_t len = ready_count(ex);
    assert(len < ex->ready_cap);
    ex->ready[(ex->ready_first + len) & (ex->ready_cap - 1)] = k;
    atomic_store_explicit(&ex->ready_len, len + 1, memory_order_relaxed);
}

static keyed_key_t *ready_pop(ordo_keyed_t *ex)
{
    size_t len = ready_count(ex);
    if (len == 0)
        return NULL;
    keyed_key_t *k = ex->ready[ex->ready_first];
    ex->ready_first = (ex->ready_first + 1) & (ex->ready_cap - 1);
    atomic_store_explicit(&ex->ready_len, len - 1, memory_order_relaxed);
    return k;
}

/* Resize ready to cap slots (a power of two >= its length), keeping its
 * order. Returns false if out of memory (ready unchanged). */
static bool ready_resize(ordo_keyed_t *ex, size_t cap)
{
    keyed_key_t **r = malloc(cap * sizeof *r);
    if (r == NULL)
        return false;
    size_t len = ready_count(ex);
    assert(len <= cap);
    for (size_t i = 0; i < len; i++)
        r[i] = ex->ready[(ex->ready_first + i) & (ex->ready_cap - 1)];
    free(ex->ready);
    ex->ready = r;
    ex->ready_cap = cap;
    ex->ready_first = 0;
    return true;
}

/* Signal one idle worker, unless a worker is spinning (it will find the
 * ready key without a system call) or every idle worker has a wake-up on its
 * way already. mu held. */
static void wake_worker(ordo_keyed_t *ex)
{
    if (ex->workers_spinning == 0 && ex->workers_idle > ex->wakes_pending) {
        ex->wakes_pending++;
        pthread_cond_signal(&ex->work_cond);
    }
}

/* Did a pending count fall from above its bound's low-water mark (a quarter
 * of the bound below it, at least one) to at or below it? Blocked producers
 * are woken only then: waking them on every finished task would cost a
 * futex wake-up per task while the executor is full. */
static bool crossed_low_mark(size_t before, size_t after, size_t max)
{
    size_t low = max - (max / 4 > 0 ? max / 4 : 1);
    return before > low && after <= low;
}

/* Account for n tasks of k that are finished or cancelled. mu held. */
static void tasks_done(ordo_keyed_t *ex, keyed_key_t *k, size_t n)
{
    assert(k->pending >= n && ex->pending >= n);
    size_t key_before = k->pending, ex_before = ex->pending;
    k->pending -= n;
    ex->pending -= n;
    if (ex->producers_waiting > 0 &&
        (crossed_low_mark(ex_before, ex->pending, ex->opts.pending_max) ||
         crossed_low_mark(key_before, k->pending, ex->opts.key_pending_max)))
        pthread_cond_broadcast(&ex->space_cond);
}

/* ---- creation ------------------------------------------------------------ */

static void *worker_main(void *p);

static int options_resolve(const ordo_keyed_options_t *in, ordo_keyed_options_t *out)
{
    ordo_keyed_options_t o = {0};
    if (in != NULL)
        o = *in;
    if (o.workers == 0)
        o.workers = ORDO_KEYED_WORKERS_DEFAULT;
    if (o.pending_max == 0)
        o.pending_max = ORDO_KEYED_PENDING_MAX_DEFAULT;
    if (o.key_pending_max == 0)
        o.key_pending_max = ORDO_KEYED_KEY_PENDING_MAX_DEFAULT;
    if (o.key_len_max == 0)
        o.key_len_max = ORDO_KEYED_KEY_LEN_MAX_DEFAULT;
    if (o.workers > ORDO_KEYED_WORKERS_MAX)
        return ORDO_EINVAL;
    *out = o;
    return ORDO_OK;
}

/* Start the workers; on failure stop and join those already started. */
static int workers_start(ordo_keyed_t *ex)
{
    for (unsigned i = 0; i < ex->opts.workers; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker_main, ex) != 0) {
            pthread_mutex_lock(&ex->mu);
            ex->stopping = true;
            pthread_cond_broadcast(&ex->work_cond);
            pthread_mutex_unlock(&ex->mu);
            for (unsigned j = 0; j < i; j++)
                pthread_join(ex->threads[j], NULL);
            return ORDO_ESYS;
        }
        pthread_mutex_lock(&ex->mu);
        ex->threads[i] = t;
        ex->nthreads = i + 1;
        pthread_mutex_unlock(&ex->mu);
    }
    return ORDO_OK;
}

int ordo_keyed_create(const ordo_keyed_options_t *opts, ordo_keyed_t **out)
{
    if (out == NULL)
        return ORDO_EINVAL;
    ordo_keyed_options_t o;
    int rc = options_resolve(opts, &o);
    if (rc != ORDO_OK)
        return rc;
    ordo_keyed_t *ex = calloc(1, sizeof *ex);
    if (ex == NULL)
        return ORDO_ENOMEM;
    ex->opts = o;
    rc = ORDO_ENOMEM;
    ex->threads = calloc(o.workers, sizeof *ex->threads);
    if (ex->threads == NULL)
        goto fail_threads;
    ex->ready_cap = KEYED_READY_MIN;
    ex->ready = malloc(ex->ready_cap * sizeof *ex->ready);
    if (ex->ready == NULL)
        goto fail_ready;
    if (ordo_htab_init(&ex->keys, key_eq) != 0)
        goto fail_htab;
    atomic_init(&ex->cancel, false);
    atomic_init(&ex->ready_len, 0);
    rc = ORDO_ESYS;
    pthread_mutexattr_t ma;
    if (pthread_mutexattr_init(&ma) != 0)
        goto fail_mu;
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    int merr = pthread_mutex_init(&ex->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    if (merr != 0)
        goto fail_mu;
    if (ordo_cond_init(&ex->work_cond) != 0)
        goto fail_work_cond;
    if (ordo_cond_init(&ex->space_cond) != 0)
        goto fail_space_cond;
    if (ordo_cond_init(&ex->stop_cond) != 0)
        goto fail_stop_cond;
    rc = workers_start(ex);
    if (rc != ORDO_OK)
        goto fail_workers;
    *out = ex;
    return ORDO_OK;

fail_workers:
    pthread_cond_destroy(&ex->stop_cond);
fail_stop_cond:
    pthread_cond_destroy(&ex->space_cond);
fail_space_cond:
    pthread_cond_destroy(&ex->work_cond);
fail_work_cond:
    pthread_mutex_destroy(&ex->mu);
fail_mu:
    ordo_htab_destroy(&ex->keys);
fail_htab:
    free(ex->ready);
fail_ready:
    free(ex->threads);
fail_threads:
    free(ex);
    return rc;
}

/* ---- submitting -------------------------------------------------------- */

/* Wait (mu held) until key (hash) has room in both bounds. Returns ORDO_OK
 * with *k_out set to key's state (NULL if it has none), or the error the
 * submit returns. */
static int wait_for_room(ordo_keyed_t *ex, uint64_t hash, const void *key, size_t len,
                         int64_t timeout_ms, keyed_key_t **k_out)
{
    uint64_t deadline_ns = 0;
    bool timed_out = false;
    for (;;) {
        if (ex->stopping)
            return ORDO_ESTOPPED;
        keyed_key_t *k = (keyed_key_t *)ordo_htab_find(&ex->keys, hash, key, len);
        *k_out = k;
        size_t key_pending = k != NULL ? k->pending : 0;
        if (ex->pending < ex->opts.pending_max && key_pending < ex->opts.key_pending_max)
            return ORDO_OK;
        if (timeout_ms == 0 || on_worker(ex))
            return ORDO_EFULL;
        if (timed_out)
            return ORDO_ETIMEDOUT;
        if (deadline_ns == 0)
            deadline_ns = ordo_deadline_ns(timeout_ms);
        ex->producers_waiting++;
        timed_out = ordo_cond_wait_until(&ex->space_cond, &ex->mu, deadline_ns) != 0;
        ex->producers_waiting--;
    }
}

/* The ring a key state starts with, after its key bytes. */
static keyed_entry_t *key_inline_ring(keyed_key_t *k)
{
    return (keyed_entry_t *)((char *)k + sizeof *k + k->key_cap);
}

/* A key state block with room for len bytes, recycled if it can be. mu held.
 * A recycled block keeps its ring (inline, or grown up to KEYED_RING_KEEP);
 * a new one has the inline ring. */
static keyed_key_t *key_alloc(ordo_keyed_t *ex, size_t len)
{
    if (len <= KEYED_KEY_INLINE_LEN && ex->key_cache != NULL) {
        keyed_key_t *k = ex->key_cache;
        ex->key_cache = k->next;
        ex->key_cached--;
        return k;
    }
    size_t key_cap = len > KEYED_KEY_INLINE_LEN ? (len + 7) / 8 * 8 : KEYED_KEY_INLINE_LEN;
    keyed_key_t *k = malloc(sizeof *k + key_cap + KEYED_RING_INLINE * sizeof(keyed_entry_t));
    if (k != NULL) {
        k->key_cap = key_cap;
        k->ring = key_inline_ring(k);
        k->cap = KEYED_RING_INLINE;
    }
    return k;
}

/* Go back to the inline ring, freeing a grown one. k's ring is empty. */
static void ring_shrink(keyed_key_t *k)
{
    assert(k->count == 0);
    if (k->ring != key_inline_ring(k))
        free(k->ring);
    k->ring = key_inline_ring(k);
    k->cap = KEYED_RING_INLINE;
    k->head = 0;
}

static void key_free(keyed_key_t *k)
{
    ring_shrink(k);
    free(k);
}

/* Unlink idle key state k from the table and recycle or free it. mu held.
 * The cache keeps at most keys_high states (or KEYED_CACHE_MAX if that is
 * more), so that the number of active keys can swing back up to where it
 * was without a malloc per key; key_cache_trim() gives the surplus back
 * once the executor is idle. */
static void key_discard(ordo_keyed_t *ex, keyed_key_t *k)
{
    assert(k->pending == 0 && k->count == 0 && !k->running);
    ordo_htab_remove(&ex->keys, &k->node);
    size_t cache_max = ex->keys_high > KEYED_CACHE_MAX ? ex->keys_high : KEYED_CACHE_MAX;
    if (k->key_cap == KEYED_KEY_INLINE_LEN && ex->key_cached < cache_max) {
        if (k->cap > KEYED_RING_KEEP)
            ring_shrink(k);
        k->next = ex->key_cache;
        ex->key_cache = k;
        ex->key_cached++;
        return;
    }
    key_free(k);
}

/* A new key state for key (absent from the table), empty, not ready. mu
 * held. Returns NULL when it could not be allocated. */
static keyed_key_t *key_create(ordo_keyed_t *ex, uint64_t hash, const void *key, size_t len)
{
    if (ex->keys.count + 1 > ex->ready_cap && !ready_resize(ex, ex->ready_cap * 2))
        return NULL;
    keyed_key_t *k = key_alloc(ex, len);
    if (k == NULL)
        return NULL;
    k->next = NULL;
    k->head = k->count = 0;
    k->pending = 0;
    k->running = false;
    k->len = len;
    if (len > 0)
        memcpy(k->bytes, key, len);
    ordo_htab_insert(&ex->keys, &k->node, hash);
    if (ex->keys.count > ex->keys_high) {
        ex->keys_high = ex->keys.count;
        if (ex->keys_high > ex->keys.floor)
            ordo_htab_set_floor(&ex->keys, ex->keys_high);
    }
    return k;
}

/* Make room for one more entry in k's ring, doubling it if full. mu held.
 * Returns false if out of memory (k unchanged). */
static bool ring_reserve(keyed_key_t *k)
{
    if (k->count < k->cap)
        return true;
    size_t cap = k->cap * 2;
    keyed_entry_t *ring = malloc(cap * sizeof *ring);
    if (ring == NULL)
        return false;
    /* Unwrap: the queued entries go to [0, count) of the new ring. */
    size_t first = k->cap - k->head < k->count ? k->cap - k->head : k->count;
    if (k->count > 0) {
        memcpy(ring, k->ring + k->head, first * sizeof *ring);
        memcpy(ring + first, k->ring, (k->count - first) * sizeof *ring);
    }
    if (k->ring != key_inline_ring(k))
        free(k->ring);
    k->ring = ring;
    k->cap = cap;
    k->head = 0;
    return true;
}

/* Take the head entry of k's ring. mu held; k->count > 0. */
static keyed_entry_t ring_shift(keyed_key_t *k)
{
    assert(k->count > 0);
    keyed_entry_t e = k->ring[k->head];
    k->head = (k->head + 1) & (k->cap - 1);
    k->count--;
    return e;
}

/* Accept entry e under key, or return the reason not to. */
static int enqueue(ordo_keyed_t *ex, const void *key, size_t len, const keyed_entry_t *e,
                   int64_t timeout_ms)
{
    uint64_t hash = ordo_htab_hash(&ex->keys, key, len);
    pthread_mutex_lock(&ex->mu);
    keyed_key_t *k;
    int rc = wait_for_room(ex, hash, key, len, timeout_ms, &k);
    if (rc != ORDO_OK)
        goto out;
    if (k == NULL && (k = key_create(ex, hash, key, len)) == NULL) {
        rc = ORDO_ENOMEM;
        goto out;
    }
    if (!ring_reserve(k)) {
        if (k->pending == 0)
            key_discard(ex, k);
        rc = ORDO_ENOMEM;
        goto out;
    }
    k->ring[(k->head + k->count) & (k->cap - 1)] = *e;
    k->count++;
    ex->pending++;
    if (k->pending++ == 0) {
        /* The key was idle: it becomes ready. */
        ready_push(ex, k);
        wake_worker(ex);
    }
out:
    pthread_mutex_unlock(&ex->mu);
    return rc;
}

static int check_args(const ordo_keyed_t *ex, const void *key, size_t key_len, ordo_keyed_fn fn)
{
    if (ex == NULL || fn == NULL || (key == NULL && key_len > 0))
        return ORDO_EINVAL;
    if (key_len > ex->opts.key_len_max)
        return ORDO_EINVAL;
    return ORDO_OK;
}

int ordo_keyed_submit(ordo_keyed_t *ex, const void *key, size_t key_len, ordo_keyed_fn fn,
                      void *arg, int64_t timeout_ms, ordo_future_t **future_out)
{
    int rc = check_args(ex, key, key_len, fn);
    if (rc != ORDO_OK || future_out == NULL)
        return ORDO_EINVAL;
    ordo_future_t *f = malloc(sizeof *f);
    if (f == NULL)
        return ORDO_ENOMEM;
    if (ordo__future_init(f, future_free) != ORDO_OK) {
        free(f);
        return ORDO_ESYS;
    }
    keyed_entry_t e = {.fn = fn, .cancel_fn = NULL, .arg = arg, .future = f};
    /* Once enqueue unlocks a worker may complete the future at any time;
     * the caller's reference keeps f alive until it releases it. */
    rc = enqueue(ex, key, key_len, &e, timeout_ms);
    if (rc != ORDO_OK) {
        /* Never accepted: drop both references (the executor's and the
         * caller's); the second frees f. */
        ordo_future_release(f);
        ordo_future_release(f);
        return rc;
    }
    *future_out = f;
    return ORDO_OK;
}

int ordo_keyed_post(ordo_keyed_t *ex, const void *key, size_t key_len, ordo_keyed_fn fn,
                    ordo_keyed_cancel_fn cancel_fn, void *arg, int64_t timeout_ms)
{
    int rc = check_args(ex, key, key_len, fn);
    if (rc != ORDO_OK)
        return rc;
    keyed_entry_t e = {.fn = fn, .cancel_fn = cancel_fn, .arg = arg, .future = NULL};
    return enqueue(ex, key, key_len, &e, timeout_ms);
}

/* ---- workers ------------------------------------------------------------- */

/* One task of a worker's turn: its running key and the entry taken from it. */
typedef struct keyed_turn_s {
    keyed_key_t *k;
    keyed_entry_t e;
} keyed_turn_t;

/* Complete e (already detached from k) as cancelled. mu not held. */
static void entry_cancel(const keyed_entry_t *e, const keyed_key_t *k)
{
    if (e->future != NULL)
        ordo__future_complete(e->future, ORDO_ECANCELED, NULL);
    else if (e->cancel_fn != NULL)
        e->cancel_fn(e->arg, k->bytes, k->len);
}

/* Run e (already detached from k) and complete it, or cancel it if a
 * cancelling stop began since it was taken. mu not held. Returns 1 if it
 * was a post whose handler failed, else 0. */
static int entry_run(ordo_keyed_t *ex, const keyed_entry_t *e, const keyed_key_t *k)
{
    if (cancelling(ex)) {
        entry_cancel(e, k);
        return 0;
    }
    void *result = NULL;
    int rc = e->fn(e->arg, k->bytes, k->len, &result);
    if (e->future != NULL) {
        ordo__future_complete(e->future, rc == 0 ? ORDO_OK : ORDO_EHANDLER, result);
        return 0;
    }
    return rc != 0;
}

/* Cancel every queued task of running key k, in order. mu held on entry and
 * return. The ring is read with mu released: the stop that set cancel set
 * stopping first, so no submit can append to it meanwhile, and k is
 * running, so no other worker touches it. */
static void key_cancel_all(ordo_keyed_t *ex, keyed_key_t *k)
{
    assert(ex->stopping);
    const keyed_entry_t *ring = k->ring;
    size_t mask = k->cap - 1, head = k->head, n = k->count;
    pthread_mutex_unlock(&ex->mu);
    for (size_t i = 0; i < n; i++)
        entry_cancel(&ring[(head + i) & mask], k);
    pthread_mutex_lock(&ex->mu);
    k->head = k->count = 0;
    tasks_done(ex, k, n);
}

/* After a turn: requeue k at the tail of ready, or free it if idle. mu held. */
static void key_release(ordo_keyed_t *ex, keyed_key_t *k)
{
    k->running = false;
    if (k->count > 0) {
        ready_push(ex, k);
        return;
    }
    key_discard(ex, k);
}

/* Poll ready_len with mu released, with growing pauses and then yields
 * (KEYED_SPIN_* above), while this worker is the spinning one. Returns
 * with mu held. */
static void spin_for_work(ordo_keyed_t *ex)
{
    ex->workers_spinning = 1;
    pthread_mutex_unlock(&ex->mu);
    unsigned pauses = KEYED_SPIN_PAUSE_MIN;
    for (unsigned poll = 0; poll < KEYED_SPIN_POLLS; poll++) {
        if (pauses <= KEYED_SPIN_PAUSE_MAX) {
            for (unsigned i = 0; i < pauses; i++)
                cpu_relax();
            pauses *= 2;
        } else {
            sched_yield();
        }
        if (ready_count(ex) > 0)
            break;
    }
    pthread_mutex_lock(&ex->mu);
    ex->workers_spinning = 0;
}

/* The executor has been idle (nothing pending) for KEYED_TRIM_IDLE_MS:
 * free the cached key states beyond KEYED_CACHE_MAX, with mu released
 * meanwhile, start keys_high afresh and let the table shrink. Called and
 * returns with mu held. */
static void key_cache_trim(ordo_keyed_t *ex)
{
    keyed_key_t *surplus = NULL;
    while (ex->key_cached > KEYED_CACHE_MAX) {
        keyed_key_t *k = ex->key_cache;
        ex->key_cache = k->next;
        ex->key_cached--;
        k->next = surplus;
        surplus = k;
    }
    ex->keys_high = ex->keys.count;
    ordo_htab_set_floor(&ex->keys, 0);
    if (ex->ready_cap > KEYED_READY_MIN && ex->keys.count <= KEYED_READY_MIN)
        (void)ready_resize(ex, KEYED_READY_MIN); /* out of memory: stays big */
    if (surplus == NULL)
        return;
    pthread_mutex_unlock(&ex->mu);
    while (surplus != NULL) {
        keyed_key_t *k = surplus;
        surplus = k->next;
        key_free(k);
    }
    pthread_mutex_lock(&ex->mu);
}

/* Next ready key, waiting for one; NULL when stopping with none left. One
 * worker at a time spins before it sleeps; the others sleep at once. */
static keyed_key_t *next_key(ordo_keyed_t *ex)
{
    bool spun = false;
    for (;;) {
        keyed_key_t *k = ready_pop(ex);
        if (k != NULL)
            return k;
        if (ex->stopping)
            return NULL;
        if (!spun && ex->workers_spinning == 0) {
            spin_for_work(ex);
            spun = true;
            continue;
        }
        spun = false;
        /* With a surplus of cached key states, sleep at most
         * KEYED_TRIM_IDLE_MS and trim if the executor stayed idle. */
        bool surplus = ex->keys_high > KEYED_CACHE_MAX;
        uint64_t deadline = surplus ? ordo_deadline_ns(KEYED_TRIM_IDLE_MS) : UINT64_MAX;
        ex->workers_idle++;
        int timed_out = ordo_cond_wait_until(&ex->work_cond, &ex->mu, deadline);
        ex->workers_idle--;
        /* Counted as the signalled worker even if it was not (a timeout,
         * a spurious wake-up): at worst a later post signals once more. */
        if (ex->wakes_pending > 0)
            ex->wakes_pending--;
        if (timed_out && ex->pending == 0)
            key_cache_trim(ex);
    }
}

/* How many keys a worker takes for one turn, given that it has popped one
 * and ready_len more are ready: its share of them (so that the other
 * workers find work too), at least 1, at most KEYED_BATCH_MAX. mu held. */
static size_t batch_share(const ordo_keyed_t *ex)
{
    size_t share = (ready_count(ex) + 1 + ex->opts.workers - 1) / ex->opts.workers;
    return share < KEYED_BATCH_MAX ? share : KEYED_BATCH_MAX;
}

/* Take a turn starting with ready key k: mark up to batch_share() ready
 * keys running and detach the head entry of each into turns. Returns the
 * number taken. mu held. */
static size_t turn_take(ordo_keyed_t *ex, keyed_key_t *k, keyed_turn_t *turns)
{
    size_t n = 1, want = batch_share(ex);
    turns[0].k = k;
    /* The key states and their head entries were last written by other
     * threads: fetch them all first, so that their misses overlap. */
    while (n < want && (k = ready_pop(ex)) != NULL) {
        __builtin_prefetch(k, 1);
        turns[n++].k = k;
    }
    for (size_t i = 0; i < n; i++)
        __builtin_prefetch(&turns[i].k->ring[turns[i].k->head]);
    for (size_t i = 0; i < n; i++) {
        k = turns[i].k;
        assert(!k->running && k->count > 0);
        k->running = true;
        turns[i].e = ring_shift(k);
    }
    if (ready_count(ex) > 0)
        wake_worker(ex); /* keys are left for an idle worker */
    return n;
}

static void *worker_main(void *p)
{
    ordo_keyed_t *ex = p;
    keyed_turn_t turns[KEYED_BATCH_MAX];
    pthread_mutex_lock(&ex->mu);
    keyed_key_t *k;
    while ((k = next_key(ex)) != NULL) {
        if (cancelling(ex)) {
            assert(!k->running && k->count > 0);
            k->running = true;
            key_cancel_all(ex, k);
            key_release(ex, k);
            continue;
        }
        size_t n = turn_take(ex, k, turns);
        pthread_mutex_unlock(&ex->mu);
        uint64_t failed = 0;
        for (size_t i = 0; i < n; i++)
            failed += (uint64_t)entry_run(ex, &turns[i].e, turns[i].k);
        pthread_mutex_lock(&ex->mu);
        ex->post_failures += failed;
        for (size_t i = 0; i < n; i++) {
            tasks_done(ex, turns[i].k, 1);
            key_release(ex, turns[i].k);
        }
    }
    pthread_mutex_unlock(&ex->mu);
    return NULL;
}

/* ---- stopping ------------------------------------------------------------ */

int ordo_keyed_stop(ordo_keyed_t *ex, int mode)
{
    if (ex == NULL || (mode != ORDO_KEYED_DRAIN && mode != ORDO_KEYED_CANCEL))
        return ORDO_EINVAL;
    pthread_mutex_lock(&ex->mu);
    if (on_worker(ex)) {
        pthread_mutex_unlock(&ex->mu);
        return ORDO_EBUSY;
    }
    ex->stopping = true;
    if (mode == ORDO_KEYED_CANCEL)
        atomic_store_explicit(&ex->cancel, true, memory_order_relaxed);
    pthread_cond_broadcast(&ex->work_cond);
    pthread_cond_broadcast(&ex->space_cond);
    if (ex->joining) {
        while (!ex->joined)
            pthread_cond_wait(&ex->stop_cond, &ex->mu);
        pthread_mutex_unlock(&ex->mu);
        return ORDO_OK;
    }
    ex->joining = true;
    pthread_mutex_unlock(&ex->mu);
    /* Only this caller joins; nthreads and threads no longer change. */
    for (unsigned i = 0; i < ex->nthreads; i++)
        pthread_join(ex->threads[i], NULL);
    pthread_mutex_lock(&ex->mu);
    assert(ex->pending == 0 && ex->keys.count == 0 && ready_count(ex) == 0);
    ex->joined = true;
    pthread_cond_broadcast(&ex->stop_cond);
    pthread_mutex_unlock(&ex->mu);
    return ORDO_OK;
}

void ordo_keyed_stats(ordo_keyed_t *ex, ordo_keyed_stats_t *out)
{
    pthread_mutex_lock(&ex->mu);
    out->pending = ex->pending;
    out->keys_active = ex->keys.count;
    out->producers_waiting = ex->producers_waiting;
    out->post_failures = ex->post_failures;
    out->stopping = ex->stopping;
    out->cancelling = cancelling(ex);
    pthread_mutex_unlock(&ex->mu);
}

void ordo_keyed_destroy(ordo_keyed_t *ex)
{
    if (ex == NULL)
        return;
    if (ordo_keyed_stop(ex, ORDO_KEYED_DRAIN) != ORDO_OK)
        abort(); /* called on a worker: it would join itself */
    pthread_cond_destroy(&ex->stop_cond);
    pthread_cond_destroy(&ex->space_cond);
    pthread_cond_destroy(&ex->work_cond);
    pthread_mutex_destroy(&ex->mu);
    ordo_htab_destroy(&ex->keys);
    free(ex->ready);
    while (ex->key_cache != NULL) {
        keyed_key_t *k = ex->key_cache;
        ex->key_cache = k->next;
        key_free(k);
    }
    free(ex->threads);
    free(ex);
}
