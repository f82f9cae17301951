/*
 * keyed.c -- the keyed serial executor; see ordo/keyed.h for the contract.
 *
 * Shape. Keys are spread by hash over nshards shards (a power of two, at
 * least the number of workers, see shard_count()). A shard's mutex (mu)
 * guards everything in the shard:
 *
 *   keys   hash table of key states, one per key of the shard that has
 *          pending tasks; a key state holds the key bytes, a chain of
 *          blocks of its queued task entries (not yet started; the first
 *          block, of KEYED_INLINE_ENTRIES, inside the key state, the others
 *          of KEYED_BLOCK_ENTRIES from the shard's free list), its pending
 *          count and a running flag;
 *   blocks the shard's free list of entry blocks;
 *   ready  FIFO of the shard's key states that have queued tasks and are
 *          not running, a ring of pointers with room for every active key
 *          of the shard (so pushing never fails; it grows when a key is
 *          created).
 *
 * What spans shards lives in ex, as atomics or under its own mutexes that
 * only slow paths take: the executor's pending count (places taken by
 * shards, under their mu, in batches that a shard keeps as credit, and
 * given back by workers, see place_take() and place_give()), the stop
 * flags, the counts of idle and spinning workers (idle_mu
 * and work_cond put workers to sleep), the count of blocked producers
 * (space_mu and space_cond), and the worker threads (life_mu). Lock order:
 * space_mu, then a shard's mu, then life_mu; idle_mu is never held with
 * another lock, and no one holds two shards' mus except ordo_keyed_stats(),
 * which takes them in index order.
 *
 * A worker looks for a ready key in every shard, starting after the shard
 * of its last turn, so each shard with ready keys is visited within
 * nshards turns of any worker and no shard starves. In the shard it finds,
 * it pops a turn's worth of ready keys from the head (up to
 * KEYED_BATCH_MAX, and no more than its share of them, see batch_share()),
 * marks them running and copies up to KEYED_KEY_QUANTUM head entries of
 * each. With mu released it runs those tasks one after another, key by
 * key, completing each future (its callback runs on the worker, the key
 * still marked running, so same-key completions are ordered too). It then
 * retakes mu once for the whole turn and, for each key, either puts it
 * back at the tail of ready (more tasks: a bounded quantum per key per
 * turn is what keeps a hot key from starving the others) or, with nothing
 * left, removes it from the table.
 *
 * Invariants, under a shard's mu (for that shard):
 *   - a key state is in the table iff its pending count > 0;
 *   - ready_cap >= keys.count;
 *   - a key state is in ready iff !running && its queue is non-empty;
 *   - ready_len is the length of ready;
 * and across shards:
 *   - ex->pending == sum of key pending counts + sum of shard credits
 *     (places a shard holds that none of its tasks uses), whenever no
 *     shard's mu is held: a submit takes its place and appends under one
 *     hold of its shard's mu, a worker gives places back under one;
 *   - a shard with no keys holds no credit once its mu is released;
 *   - pending > 0 implies some key is ready or running, and a worker that
 *     runs a key only leaves the loop after it has found every shard's
 *     ready empty with the stop sealed, so a stop cannot strand accepted
 *     work. "Sealed" means the stop has set `stopping` and then taken and
 *     released every shard's mu: every submit that saw `stopping` clear has
 *     finished appending by then (it held its shard's mu throughout).
 *
 * Costs. A post hashes its key with mu released, takes one shard's mu,
 * looks its key up once, takes its place from the shard's credit (a
 * compare-and-swap on the executor-wide count once per KEYED_CREDIT_BATCH
 * posts of the shard while the count is far from its bound; near it, one
 * per post, and a shard that finds it at the bound first reclaims every
 * shard's spare credit, credits_reclaim()), and allocates nothing in the
 * steady state (key
 * states are recycled, see below, and entry blocks reused); a submit adds
 * one allocation, its future, made before mu is taken. Two producers contend
 * only when their keys share a shard. A worker takes a shard's mu twice
 * per turn, i.e. twice per up to KEYED_BATCH_MAX x KEYED_KEY_QUANTUM
 * tasks, and prefetches the turn's key states and entries so that their
 * cache misses overlap. The mutexes are plain (not adaptive): on a machine
 * with more runnable threads than cores, spinning on a lock whose holder
 * was preempted only burns the time the holder needs. A worker that finds
 * nothing ready polls the shards' ready counts a little before sleeping
 * (spin_for_work(); one at a time), and producers signal no one while it
 * does. Otherwise idle workers are signalled only when a key becomes ready
 * and more workers are idle than were already signalled (wakes_pending),
 * so a stream of posts to idle keys costs one wake-up per sleeping worker,
 * not one per post; a worker that starts a turn while keys are ready in
 * any shard passes a wake-up on the same way (their producers may have
 * signalled no one because it was the spinning worker). A producer stores the ready count and then,
 * after a seq_cst fence, reads the idle count; a worker going to sleep
 * counts itself idle (seq_cst) and then reads the ready counts (Dekker), so
 * a producer that sees no idle worker is certain a worker about to sleep
 * will see its key. Which workers are taking a turn is counted
 * (workers_turning) so that a turn leaves ready keys to the others. Blocked producers are woken with a
 * broadcast on one condition variable, only while any producer is blocked,
 * and only when a count falls to its low-water mark (see
 * crossed_low_mark()): a full executor then wakes its producers once per
 * quarter-bound of finished tasks, not once per task. A producer blocked on
 * one key's bound may be woken by another key's progress and simply waits
 * again.
 *
 * Recycling. Key states with short keys are kept on their shard's free
 * list (under mu), instead of being freed, so a steady stream of posts to keys
 * that come and go costs no malloc/free pair (which, freed on a worker and
 * allocated on a producer, crossed threads every time). A shard's list
 * holds up to its keys_high states (the most keys active in it at once; at
 * least its part of KEYED_CACHE_MAX), and its table keeps buckets for as
 * many (ordo_htab_set_floor()), so that the number of active keys can
 * swing without a malloc per key or a rehash; after KEYED_TRIM_IDLE_MS with
 * nothing pending a sleeping worker trims every shard back
 * (key_cache_trim()). Entry blocks are recycled the same way: a block goes
 * back to its shard's list as soon as its last entry is taken, the list
 * keeps at most blocks_max (the shard's part of pending_max, in blocks),
 * and the idle trim frees them all. A key's backlog thus grows by a block
 * at a time, with no copy, and a hot key that comes and goes reuses warm
 * memory rather than a fresh allocation.
 *
 * Cancellation. A cancelling stop sets ex->cancel once the stop is sealed;
 * from then on a worker that pops a key empties its whole queue and
 * completes the tasks with ORDO_ECANCELED (or calls the post's cancel_fn)
 * in submission order, on the worker thread, while the key is marked
 * running. A worker checks the flag again before each task of its turn, so
 * a task taken but not yet started when the stop begins is cancelled too;
 * tasks already running finish normally.
 */
#include "ordo/keyed.h"

#include <assert.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "future_impl.h"
#include "base/htab.h"
#include "sync.h"

/* Recycled key states kept even when idle, over all shards: at ~400 bytes
 * a state (with its inline block), at most ~400 KiB, which covers the
 * turnover of a busy executor. */
#define KEYED_CACHE_MAX 1024
/* Beyond its part of KEYED_CACHE_MAX, a shard's cache keeps as many key
 * states as were active in it at once (keys_high), and its table keeps
 * buckets for as many, until the executor has been idle this long. */
#define KEYED_TRIM_IDLE_MS 100
/* Key states are allocated with room for at least this many key bytes, so
 * that most can be recycled for any other short key. */
#define KEYED_KEY_INLINE_LEN 32
/* A key's queued entries live in a chain of blocks. The first block, of
 * this many entries, is inside the key state, so a key with few queued
 * tasks needs no allocation for them ... */
#define KEYED_INLINE_ENTRIES 8
/* ... and the others hold this many each (512 bytes). They come from their
 * shard's free list and go back to it once run, so a hot key's backlog
 * costs no malloc and no copy as it grows, and its memory stays warm. */
#define KEYED_BLOCK_ENTRIES 16
/* Keys one worker takes per turn (from one shard): the shard's mu is taken
 * twice per turn. Small enough that a turn of short tasks is short. */
#define KEYED_BATCH_MAX 16
/* Tasks a worker takes from one key in one turn: the most a key with a
 * backlog delays a newly ready key of its shard by. A turn then costs two
 * lock acquisitions and one miss on the key state per KEYED_KEY_QUANTUM
 * tasks of a busy key, not per task. */
#define KEYED_KEY_QUANTUM 4
/* Shards: at least as many as workers (so each worker usually finds a shard
 * no other worker is in), a power of two, at most this many (each costs a
 * table, a ready ring and a mutex, and an idle worker polls them all). */
#define KEYED_SHARDS_MAX 64
/* Places in the executor's pending count a shard takes at once, while the
 * count is far from its bound (more than KEYED_CREDIT_BATCH per shard
 * below it), and keeps, as spare credit, while it has keys: a post then
 * touches the executor-wide count once per KEYED_CREDIT_BATCH posts of its
 * shard, and a worker gives places back about as rarely. */
#define KEYED_CREDIT_BATCH 32
/* A shard's ready ring starts (and, once the executor idles, shrinks back
 * to) this many slots; it grows with the shard's active keys. A power of
 * two. */
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

#define KEYED_CACHE_LINE 64

/* One queued task. A post has future == NULL. */
typedef struct keyed_entry_s {
    ordo_keyed_fn fn;
    ordo_keyed_cancel_fn cancel_fn; /* posts only */
    void *arg;
    ordo_future_t *future;          /* submits: the future, freed by its last release */
} keyed_entry_t;

/* A block of queued entries: cap of them, in a key's chain. */
typedef struct keyed_block_s {
    struct keyed_block_s *next; /* towards the tail; in the free list: next free */
    size_t cap;
    keyed_entry_t e[];
} keyed_block_t;

/* A key state, in one allocation: this header, key_cap bytes for the key,
 * then the inline block (key_inline_block()). The fields a submit and a
 * turn touch come first and the key bytes right after, so a lookup or a
 * turn touches few cache lines. The queued entries (not started) are the
 * count entries from head_blk->e[head_i] on, along the chain to
 * tail_blk->e[tail_i - 1]; with none queued, both ends are at the start of
 * the inline block. */
typedef struct keyed_key_s {
    ordo_hnode_t node;         /* in its shard's keys; first, so a node is its key */
    keyed_block_t *head_blk, *tail_blk;
    size_t head_i, tail_i, count;
    size_t pending;            /* queued + running */
    struct keyed_key_s *next;  /* in its shard's key_cache */
    size_t len;
    size_t key_cap;            /* bytes allocated for the key, a multiple of 8 */
    bool running;
    unsigned char bytes[];
} keyed_key_t;

/* One shard: a line of its own for what producers and workers write. */
typedef struct keyed_shard_s {
    alignas(KEYED_CACHE_LINE) pthread_mutex_t mu;
    ordo_htab_t keys;
    keyed_key_t **ready;       /* ring of ready_cap >= keys.count key states */
    size_t ready_cap, ready_first;
    atomic_size_t ready_len;   /* written under mu; idle workers read it without */
    keyed_key_t *key_cache;    /* free key states of key_cap KEYED_KEY_INLINE_LEN */
    size_t key_cached;
    size_t keys_high;          /* most keys active at once since the cache was last trimmed */
    keyed_block_t *block_cache; /* free blocks of KEYED_BLOCK_ENTRIES */
    size_t blocks_cached;
    size_t credit;             /* places held in ex->pending that no task of the shard uses */
} keyed_shard_t;

struct ordo_keyed_s {
    keyed_shard_t *shards;
    unsigned nshards;          /* a power of two */
    size_t cache_max;          /* a shard's part of KEYED_CACHE_MAX */
    size_t blocks_max;         /* free blocks a shard keeps: its part of pending_max */
    ordo_keyed_options_t opts;
    uint8_t hash_key[ORDO_SIPHASH_KEY_LEN]; /* shared by the shards' tables */
    /* Written by every submit and every turn. */
    alignas(KEYED_CACHE_LINE) atomic_size_t pending;
    atomic_uint workers_turning; /* workers between taking a turn and finishing it */
    atomic_size_t producers_waiting;
    atomic_uint_fast64_t post_failures;
    /* Read on every submit, written rarely. */
    alignas(KEYED_CACHE_LINE) atomic_uint workers_idle;     /* workers asleep or going to sleep */
    atomic_uint workers_spinning; /* 0 or 1: a worker polling the shards */
    atomic_bool stopping;      /* submits fail */
    atomic_bool sealed;        /* stopping, and no submit is still appending */
    atomic_bool cancel_asked;  /* a cancelling stop has begun (stats) */
    atomic_bool cancel;        /* a cancelling stop is sealed (workers cancel) */
    atomic_bool trim_wanted;   /* some shard keeps more than its part of the cache */
    atomic_uint next_worker;   /* gives each worker its first shard */
    pthread_mutex_t idle_mu;
    pthread_cond_t work_cond;  /* workers: a key became ready, or stop */
    unsigned wakes_pending;    /* under idle_mu: signals no woken worker has counted yet */
    pthread_mutex_t space_mu;
    pthread_cond_t space_cond; /* producers: room freed, or stop */
    pthread_mutex_t life_mu;
    pthread_cond_t stop_cond;  /* later stop callers: workers joined */
    bool joining;              /* under life_mu */
    bool joined;               /* under life_mu */
    unsigned nthreads;         /* threads started; under life_mu */
    pthread_t *threads;        /* under life_mu */
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

static bool stopping(const ordo_keyed_t *ex)
{
    return atomic_load_explicit(&ex->stopping, memory_order_relaxed);
}

/* The shard of a key with this hash. The tables pick buckets by the low
 * bits, so the shard is picked by high ones. */
static keyed_shard_t *shard_of(ordo_keyed_t *ex, uint64_t hash)
{
    return &ex->shards[(hash >> 40) & (ex->nshards - 1)];
}

/* Is the calling thread one of ex's workers? Takes life_mu. O(workers),
 * called only on slow paths (a submit about to block, a stop). */
static bool on_worker(ordo_keyed_t *ex)
{
    pthread_t self = pthread_self();
    bool found = false;
    pthread_mutex_lock(&ex->life_mu);
    for (unsigned i = 0; i < ex->nthreads && !found; i++)
        found = pthread_equal(ex->threads[i], self);
    pthread_mutex_unlock(&ex->life_mu);
    return found;
}

/* Length of a shard's ready. mu held (without it, only a hint). */
static size_t ready_count(const keyed_shard_t *sh)
{
    return atomic_load_explicit(&sh->ready_len, memory_order_relaxed);
}

/* Append k to ready. Never fails: ready_cap >= keys.count, and a key is in
 * ready at most once. The store is relaxed: wake_worker(), after it, opens
 * with a seq_cst fence before it reads the idle count, and a worker going
 * to sleep counts itself (seq_cst) before it reads ready_len (seq_cst). */
static void ready_push(keyed_shard_t *sh, keyed_key_t *k)
{
    assert(!k->running && k->count > 0);
    size_t len = ready_count(sh);
    assert(len < sh->ready_cap);
    sh->ready[(sh->ready_first + len) & (sh->ready_cap - 1)] = k;
    atomic_store_explicit(&sh->ready_len, len + 1, memory_order_relaxed);
}

static keyed_key_t *ready_pop(keyed_shard_t *sh)
{
    size_t len = ready_count(sh);
    if (len == 0)
        return NULL;
    keyed_key_t *k = sh->ready[sh->ready_first];
    sh->ready_first = (sh->ready_first + 1) & (sh->ready_cap - 1);
    atomic_store_explicit(&sh->ready_len, len - 1, memory_order_relaxed);
    return k;
}

/* Resize a shard's ready to cap slots (a power of two >= its length),
 * keeping its order. Returns false if out of memory (ready unchanged). */
static bool ready_resize(keyed_shard_t *sh, size_t cap)
{
    keyed_key_t **r = malloc(cap * sizeof *r);
    if (r == NULL)
        return false;
    size_t len = ready_count(sh);
    assert(len <= cap);
    for (size_t i = 0; i < len; i++)
        r[i] = sh->ready[(sh->ready_first + i) & (sh->ready_cap - 1)];
    free(sh->ready);
    sh->ready = r;
    sh->ready_cap = cap;
    sh->ready_first = 0;
    return true;
}

/* Does any shard have a ready key? seq_cst loads: see ready_push(). */
static bool any_ready(ordo_keyed_t *ex)
{
    for (unsigned i = 0; i < ex->nshards; i++)
        if (atomic_load_explicit(&ex->shards[i].ready_len, memory_order_seq_cst) > 0)
            return true;
    return false;
}

/* Signal one idle worker, unless a worker is spinning (it will find the
 * ready key without a system call), none is idle, or every idle worker has
 * a wake-up on its way already. Called with no lock held, after a key was
 * made ready. The fence orders that store before the loads (Dekker with
 * worker_sleep()); on x86 it comes right after the mutex's unlock, a
 * locked instruction, so it costs little. */
static void wake_worker(ordo_keyed_t *ex)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&ex->workers_spinning, memory_order_seq_cst) != 0 ||
        atomic_load_explicit(&ex->workers_idle, memory_order_seq_cst) == 0)
        return;
    pthread_mutex_lock(&ex->idle_mu);
    if (atomic_load_explicit(&ex->workers_idle, memory_order_relaxed) > ex->wakes_pending) {
        ex->wakes_pending++;
        pthread_cond_signal(&ex->work_cond);
    }
    pthread_mutex_unlock(&ex->idle_mu);
}

/* Wake the producers blocked on a bound. Called with no lock held. */
static void wake_producers(ordo_keyed_t *ex)
{
    pthread_mutex_lock(&ex->space_mu);
    pthread_cond_broadcast(&ex->space_cond);
    pthread_mutex_unlock(&ex->space_mu);
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

/* Take a place for one task of shard sh: from its credit, or from the
 * executor's pending count if that is below its bound (KEYED_CREDIT_BATCH
 * at once while far from it, the rest kept as credit). sh's mu held. */
static bool place_take(ordo_keyed_t *ex, keyed_shard_t *sh)
{
    if (sh->credit > 0) {
        sh->credit--;
        return true;
    }
    size_t max = ex->opts.pending_max;
    size_t far = (size_t)ex->nshards * KEYED_CREDIT_BATCH;
    size_t n = atomic_load_explicit(&ex->pending, memory_order_seq_cst);
    while (n < max) {
        size_t want = max - n > far ? KEYED_CREDIT_BATCH : 1;
        if (atomic_compare_exchange_weak_explicit(&ex->pending, &n, n + want, memory_order_seq_cst,
                                                  memory_order_seq_cst)) {
            sh->credit += want - 1;
            return true;
        }
    }
    return false;
}

/* Give back n places to the executor's count. Returns whether blocked
 * producers should be woken (the count crossed its low-water mark with
 * some waiting; seq_cst, pairing with wait_for_space()'s count of
 * itself). */
static bool pending_release(ordo_keyed_t *ex, size_t n)
{
    if (n == 0)
        return false;
    size_t before = atomic_fetch_sub_explicit(&ex->pending, n, memory_order_seq_cst);
    assert(before >= n);
    return crossed_low_mark(before, before - n, ex->opts.pending_max) &&
           atomic_load_explicit(&ex->producers_waiting, memory_order_seq_cst) > 0;
}

/* n places of shard sh's tasks are free (finished, cancelled or never
 * used): keep them as credit, up to 2 x KEYED_CREDIT_BATCH (then down to
 * one batch), while the shard has keys, no producer waits and the count
 * is far from its bound; else give all back. sh's mu held. Returns
 * whether blocked producers should be woken. */
static bool place_give(ordo_keyed_t *ex, keyed_shard_t *sh, size_t n)
{
    sh->credit += n;
    size_t keep = KEYED_CREDIT_BATCH;
    if (sh->keys.count == 0 ||
        atomic_load_explicit(&ex->producers_waiting, memory_order_seq_cst) > 0 ||
        atomic_load_explicit(&ex->pending, memory_order_relaxed) + (size_t)ex->nshards * KEYED_CREDIT_BATCH >=
            ex->opts.pending_max)
        keep = 0;
    else if (sh->credit <= 2 * KEYED_CREDIT_BATCH)
        return false;
    size_t back = sh->credit - keep;
    sh->credit = keep;
    return pending_release(ex, back);
}

/* Move every shard's spare credit back to the executor's count, so that a
 * producer finding the count at its bound sees what is really in use.
 * No shard's mu held (takes each in turn). Returns whether blocked
 * producers should be woken. */
static bool credits_reclaim(ordo_keyed_t *ex)
{
    bool wake = false;
    for (unsigned s = 0; s < ex->nshards; s++) {
        keyed_shard_t *sh = &ex->shards[s];
        pthread_mutex_lock(&sh->mu);
        size_t back = sh->credit;
        sh->credit = 0;
        pthread_mutex_unlock(&sh->mu);
        wake |= pending_release(ex, back);
    }
    return wake;
}

/* Account for n tasks of k that are finished or cancelled, in k's pending
 * count only. Its shard's mu held. Returns whether k's count crossed its
 * low-water mark. */
static bool key_tasks_done(const ordo_keyed_t *ex, keyed_key_t *k, size_t n)
{
    assert(k->pending >= n);
    size_t before = k->pending;
    k->pending -= n;
    return crossed_low_mark(before, k->pending, ex->opts.key_pending_max);
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

/* The number of shards for this many workers: the power of two at or
 * above it, at most KEYED_SHARDS_MAX. */
static unsigned shard_count(unsigned workers)
{
    unsigned n = 1;
    while (n < workers && n < KEYED_SHARDS_MAX)
        n *= 2;
    return n;
}

static void shard_destroy(keyed_shard_t *sh);

/* Initialise shard sh. Returns ORDO_OK, ORDO_ENOMEM or ORDO_ESYS (nothing
 * left allocated). */
static int shard_init(ordo_keyed_t *ex, keyed_shard_t *sh)
{
    sh->ready_cap = KEYED_READY_MIN;
    sh->ready_first = 0;
    atomic_init(&sh->ready_len, 0);
    sh->key_cache = NULL;
    sh->key_cached = 0;
    sh->keys_high = 0;
    sh->block_cache = NULL;
    sh->blocks_cached = 0;
    sh->credit = 0;
    sh->ready = malloc(sh->ready_cap * sizeof *sh->ready);
    if (sh->ready == NULL)
        return ORDO_ENOMEM;
    if (ordo_htab_init_keyed(&sh->keys, key_eq, ex->hash_key) != 0) {
        free(sh->ready);
        return ORDO_ENOMEM;
    }
    if (pthread_mutex_init(&sh->mu, NULL) != 0) {
        ordo_htab_destroy(&sh->keys);
        free(sh->ready);
        return ORDO_ESYS;
    }
    return ORDO_OK;
}

/* Start the workers; on failure stop and join those already started. */
static int workers_start(ordo_keyed_t *ex)
{
    for (unsigned i = 0; i < ex->opts.workers; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker_main, ex) != 0) {
            atomic_store(&ex->stopping, true);
            atomic_store(&ex->sealed, true); /* no submit can have started */
            pthread_mutex_lock(&ex->idle_mu);
            pthread_cond_broadcast(&ex->work_cond);
            pthread_mutex_unlock(&ex->idle_mu);
            for (unsigned j = 0; j < i; j++)
                pthread_join(ex->threads[j], NULL);
            return ORDO_ESYS;
        }
        pthread_mutex_lock(&ex->life_mu);
        ex->threads[i] = t;
        ex->nthreads = i + 1;
        pthread_mutex_unlock(&ex->life_mu);
    }
    return ORDO_OK;
}

/* The executor's own mutexes and condition variables. Returns 0 or -1
 * (nothing left initialised). */
static int sync_init(ordo_keyed_t *ex)
{
    if (pthread_mutex_init(&ex->idle_mu, NULL) != 0)
        goto fail_idle_mu;
    if (pthread_mutex_init(&ex->space_mu, NULL) != 0)
        goto fail_space_mu;
    if (pthread_mutex_init(&ex->life_mu, NULL) != 0)
        goto fail_life_mu;
    if (ordo_cond_init(&ex->work_cond) != 0)
        goto fail_work_cond;
    if (ordo_cond_init(&ex->space_cond) != 0)
        goto fail_space_cond;
    if (ordo_cond_init(&ex->stop_cond) != 0)
        goto fail_stop_cond;
    return 0;

fail_stop_cond:
    pthread_cond_destroy(&ex->space_cond);
fail_space_cond:
    pthread_cond_destroy(&ex->work_cond);
fail_work_cond:
    pthread_mutex_destroy(&ex->life_mu);
fail_life_mu:
    pthread_mutex_destroy(&ex->space_mu);
fail_space_mu:
    pthread_mutex_destroy(&ex->idle_mu);
fail_idle_mu:
    return -1;
}

static void sync_destroy(ordo_keyed_t *ex)
{
    pthread_cond_destroy(&ex->stop_cond);
    pthread_cond_destroy(&ex->space_cond);
    pthread_cond_destroy(&ex->work_cond);
    pthread_mutex_destroy(&ex->life_mu);
    pthread_mutex_destroy(&ex->space_mu);
    pthread_mutex_destroy(&ex->idle_mu);
}

int ordo_keyed_create(const ordo_keyed_options_t *opts, ordo_keyed_t **out)
{
    if (out == NULL)
        return ORDO_EINVAL;
    ordo_keyed_options_t o;
    int rc = options_resolve(opts, &o);
    if (rc != ORDO_OK)
        return rc;
    ordo_keyed_t *ex = aligned_alloc(alignof(ordo_keyed_t), sizeof *ex);
    if (ex == NULL)
        return ORDO_ENOMEM;
    memset(ex, 0, sizeof *ex);
    ex->opts = o;
    ex->nshards = shard_count(o.workers);
    ex->cache_max = KEYED_CACHE_MAX / ex->nshards;
    ex->blocks_max = o.pending_max / KEYED_BLOCK_ENTRIES / ex->nshards + 1;
    atomic_init(&ex->pending, 0);
    atomic_init(&ex->producers_waiting, 0);
    atomic_init(&ex->post_failures, 0);
    atomic_init(&ex->workers_idle, 0);
    atomic_init(&ex->workers_turning, 0);
    atomic_init(&ex->workers_spinning, 0);
    atomic_init(&ex->stopping, false);
    atomic_init(&ex->sealed, false);
    atomic_init(&ex->cancel_asked, false);
    atomic_init(&ex->cancel, false);
    atomic_init(&ex->trim_wanted, false);
    atomic_init(&ex->next_worker, 0);
    /* Without the kernel's randomness the key is still unpredictable
     * enough (siphash.h). */
    (void)ordo_random_key(ex->hash_key);
    rc = ORDO_ENOMEM;
    ex->threads = calloc(o.workers, sizeof *ex->threads);
    if (ex->threads == NULL)
        goto fail_threads;
    ex->shards = aligned_alloc(alignof(keyed_shard_t), ex->nshards * sizeof *ex->shards);
    if (ex->shards == NULL)
        goto fail_shards;
    unsigned made = 0;
    for (; made < ex->nshards; made++)
        if ((rc = shard_init(ex, &ex->shards[made])) != ORDO_OK)
            goto fail_shard;
    rc = ORDO_ESYS;
    if (sync_init(ex) != 0)
        goto fail_shard;
    rc = workers_start(ex);
    if (rc != ORDO_OK)
        goto fail_workers;
    *out = ex;
    return ORDO_OK;

fail_workers:
    sync_destroy(ex);
fail_shard:
    while (made > 0)
        shard_destroy(&ex->shards[--made]);
    free(ex->shards);
fail_shards:
    free(ex->threads);
fail_threads:
    free(ex);
    return rc;
}

/* ---- submitting -------------------------------------------------------- */

/* Sleep on space_cond until deadline_ns, counted in producers_waiting, with
 * sh's mu released meanwhile. Called and returns with sh's mu held.
 * Returns whether the deadline passed. The count is taken before the
 * bounds are checked again under mu (seq_cst), so a worker that frees room
 * after that check sees the count and broadcasts under space_mu, which
 * this thread holds until it waits: no lost wake-up. */
static bool wait_for_space(ordo_keyed_t *ex, keyed_shard_t *sh, uint64_t hash, const void *key,
                           size_t len, uint64_t deadline_ns)
{
    pthread_mutex_unlock(&sh->mu);
    pthread_mutex_lock(&ex->space_mu);
    atomic_fetch_add_explicit(&ex->producers_waiting, 1, memory_order_seq_cst);
    /* Spare credit parked in shards is room; this thread holds space_mu,
     * so it broadcasts to no one but others already asleep. */
    if (credits_reclaim(ex))
        pthread_cond_broadcast(&ex->space_cond);
    pthread_mutex_lock(&sh->mu);
    keyed_key_t *k = (keyed_key_t *)ordo_htab_find(&sh->keys, hash, key, len);
    bool room = atomic_load_explicit(&ex->pending, memory_order_seq_cst) < ex->opts.pending_max &&
                (k == NULL || k->pending < ex->opts.key_pending_max);
    pthread_mutex_unlock(&sh->mu);
    bool timed_out = false;
    if (!room && !stopping(ex))
        timed_out = ordo_cond_wait_until(&ex->space_cond, &ex->space_mu, deadline_ns) != 0;
    atomic_fetch_sub_explicit(&ex->producers_waiting, 1, memory_order_relaxed);
    pthread_mutex_unlock(&ex->space_mu);
    pthread_mutex_lock(&sh->mu);
    return timed_out;
}

/* Wait (sh's mu held) until key (hash) has room in both bounds, and take
 * its place in the executor's count. Returns ORDO_OK with *k_out set to
 * key's state (NULL if it has none), or the error the submit returns. */
static int wait_for_room(ordo_keyed_t *ex, keyed_shard_t *sh, uint64_t hash, const void *key,
                         size_t len, int64_t timeout_ms, keyed_key_t **k_out)
{
    uint64_t deadline_ns = 0;
    bool timed_out = false, reclaimed = false;
    for (;;) {
        if (stopping(ex))
            return ORDO_ESTOPPED;
        keyed_key_t *k = (keyed_key_t *)ordo_htab_find(&sh->keys, hash, key, len);
        *k_out = k;
        size_t key_pending = k != NULL ? k->pending : 0;
        if (key_pending < ex->opts.key_pending_max) {
            if (place_take(ex, sh))
                return ORDO_OK;
            if (!reclaimed) {
                /* At the bound, unless other shards hold spare credit. */
                reclaimed = true;
                pthread_mutex_unlock(&sh->mu);
                if (credits_reclaim(ex))
                    wake_producers(ex);
                pthread_mutex_lock(&sh->mu);
                continue;
            }
        }
        if (timeout_ms == 0 || on_worker(ex))
            return ORDO_EFULL;
        if (timed_out)
            return ORDO_ETIMEDOUT;
        if (deadline_ns == 0)
            deadline_ns = ordo_deadline_ns(timeout_ms);
        timed_out = wait_for_space(ex, sh, hash, key, len, deadline_ns);
    }
}

/* The block a key state starts with, after its key bytes. */
static keyed_block_t *key_inline_block(keyed_key_t *k)
{
    return (keyed_block_t *)((char *)k + sizeof *k + k->key_cap);
}

/* A key state block with room for len bytes, recycled if it can be. mu held.
 * Its chain is empty, at the start of its inline block. */
static keyed_key_t *key_alloc(keyed_shard_t *sh, size_t len)
{
    if (len <= KEYED_KEY_INLINE_LEN && sh->key_cache != NULL) {
        keyed_key_t *k = sh->key_cache;
        sh->key_cache = k->next;
        sh->key_cached--;
        return k;
    }
    size_t key_cap = len > KEYED_KEY_INLINE_LEN ? (len + 7) / 8 * 8 : KEYED_KEY_INLINE_LEN;
    keyed_key_t *k = malloc(sizeof *k + key_cap + sizeof(keyed_block_t) +
                            KEYED_INLINE_ENTRIES * sizeof(keyed_entry_t));
    if (k != NULL) {
        k->key_cap = key_cap;
        keyed_block_t *b = key_inline_block(k);
        b->next = NULL;
        b->cap = KEYED_INLINE_ENTRIES;
        k->head_blk = k->tail_blk = b;
        k->head_i = k->tail_i = k->count = 0;
    }
    return k;
}

static void key_free(keyed_key_t *k)
{
    assert(k->count == 0 && k->head_blk == key_inline_block(k));
    free(k);
}

/* Give block b, no longer in k's chain, back to sh's free list (or free
 * it), unless it is k's inline block. mu held. */
static void block_put(const ordo_keyed_t *ex, keyed_shard_t *sh, keyed_key_t *k, keyed_block_t *b)
{
    if (b == key_inline_block(k))
        return;
    if (sh->blocks_cached >= ex->blocks_max) {
        free(b);
        return;
    }
    b->next = sh->block_cache;
    sh->block_cache = b;
    sh->blocks_cached++;
}

/* A block of KEYED_BLOCK_ENTRIES from sh's free list, or a new one; NULL
 * if out of memory. mu held. */
static keyed_block_t *block_get(keyed_shard_t *sh)
{
    keyed_block_t *b = sh->block_cache;
    if (b != NULL) {
        sh->block_cache = b->next;
        sh->blocks_cached--;
    } else {
        b = malloc(sizeof *b + KEYED_BLOCK_ENTRIES * sizeof(keyed_entry_t));
        if (b == NULL)
            return NULL;
        b->cap = KEYED_BLOCK_ENTRIES;
    }
    b->next = NULL;
    return b;
}

/* k's queue is empty: give back its blocks and start again at the inline
 * block. mu held. */
static void chain_reset(const ordo_keyed_t *ex, keyed_shard_t *sh, keyed_key_t *k)
{
    assert(k->count == 0);
    for (keyed_block_t *b = k->head_blk, *next; b != NULL; b = next) {
        next = b->next;
        block_put(ex, sh, k, b);
    }
    keyed_block_t *inl = key_inline_block(k);
    inl->next = NULL;
    k->head_blk = k->tail_blk = inl;
    k->head_i = k->tail_i = 0;
}

/* Unlink idle key state k from its shard's table and recycle or free it.
 * mu held. The cache keeps at most keys_high states (or the shard's part
 * of KEYED_CACHE_MAX if that is more), so that the number of active keys
 * can swing back up to where it was without a malloc per key;
 * key_cache_trim() gives the surplus back once the executor is idle. */
static void key_discard(ordo_keyed_t *ex, keyed_shard_t *sh, keyed_key_t *k)
{
    assert(k->pending == 0 && k->count == 0 && !k->running);
    ordo_htab_remove(&sh->keys, &k->node);
    size_t cache_max = sh->keys_high > ex->cache_max ? sh->keys_high : ex->cache_max;
    if (k->key_cap == KEYED_KEY_INLINE_LEN && sh->key_cached < cache_max) {
        k->next = sh->key_cache;
        sh->key_cache = k;
        sh->key_cached++;
        return;
    }
    key_free(k);
}

/* A new key state for key (absent from the table), empty, not ready. mu
 * held. Returns NULL when it could not be allocated. */
static keyed_key_t *key_create(ordo_keyed_t *ex, keyed_shard_t *sh, uint64_t hash,
                               const void *key, size_t len)
{
    if (sh->keys.count + 1 > sh->ready_cap && !ready_resize(sh, sh->ready_cap * 2))
        return NULL;
    keyed_key_t *k = key_alloc(sh, len);
    if (k == NULL)
        return NULL;
    k->next = NULL;
    assert(k->count == 0 && k->head_blk == key_inline_block(k) && k->tail_i == 0);
    k->pending = 0;
    k->running = false;
    k->len = len;
    if (len > 0)
        memcpy(k->bytes, key, len);
    ordo_htab_insert(&sh->keys, &k->node, hash);
    if (sh->keys.count > sh->keys_high) {
        sh->keys_high = sh->keys.count;
        if (sh->keys_high > sh->keys.floor)
            ordo_htab_set_floor(&sh->keys, sh->keys_high);
        if (sh->keys_high > ex->cache_max)
            atomic_store_explicit(&ex->trim_wanted, true, memory_order_relaxed);
    }
    return k;
}

/* Append e to k's queue, chaining a block if the tail one is full. mu
 * held. Returns false if out of memory (k unchanged). */
static bool entry_push(keyed_shard_t *sh, keyed_key_t *k, const keyed_entry_t *e)
{
    if (k->tail_i == k->tail_blk->cap) {
        keyed_block_t *b = block_get(sh);
        if (b == NULL)
            return false;
        k->tail_blk->next = b;
        k->tail_blk = b;
        k->tail_i = 0;
    }
    k->tail_blk->e[k->tail_i++] = *e;
    k->count++;
    return true;
}

/* Take the head entry of k's queue, giving back a block it empties. mu
 * held; k->count > 0. */
static keyed_entry_t entry_shift(const ordo_keyed_t *ex, keyed_shard_t *sh, keyed_key_t *k)
{
    assert(k->count > 0);
    keyed_entry_t e = k->head_blk->e[k->head_i++];
    if (--k->count == 0) {
        if (k->head_blk == key_inline_block(k))
            k->head_i = k->tail_i = 0; /* the usual case: no block to give back */
        else
            chain_reset(ex, sh, k);
    } else if (k->head_i == k->head_blk->cap) {
        keyed_block_t *b = k->head_blk;
        k->head_blk = b->next;
        k->head_i = 0;
        block_put(ex, sh, k, b);
    }
    return e;
}

/* Accept entry e under key, or return the reason not to. */
static int enqueue(ordo_keyed_t *ex, const void *key, size_t len, const keyed_entry_t *e,
                   int64_t timeout_ms)
{
    uint64_t hash = ordo_htab_hash(&ex->shards[0].keys, key, len);
    keyed_shard_t *sh = shard_of(ex, hash);
    bool became_ready = false, release_woke = false;
    pthread_mutex_lock(&sh->mu);
    keyed_key_t *k;
    int rc = wait_for_room(ex, sh, hash, key, len, timeout_ms, &k);
    if (rc != ORDO_OK)
        goto out;
    /* A place is reserved in ex->pending from here. */
    if ((k == NULL && (k = key_create(ex, sh, hash, key, len)) == NULL) ||
        !entry_push(sh, k, e)) {
        if (k != NULL && k->pending == 0)
            key_discard(ex, sh, k);
        /* Give the place back; a producer may be waiting for it. */
        release_woke = place_give(ex, sh, 1) ||
                       atomic_load_explicit(&ex->producers_waiting, memory_order_seq_cst) > 0;
        rc = ORDO_ENOMEM;
        goto out;
    }
    if (k->pending++ == 0) {
        /* The key was idle: it becomes ready. */
        ready_push(sh, k);
        became_ready = true;
    }
out:
    pthread_mutex_unlock(&sh->mu);
    if (became_ready)
        wake_worker(ex);
    if (release_woke)
        wake_producers(ex);
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

/* A worker's turn: keys running for it in one shard, and the entries taken
 * from them, key by key in order (count[i] entries of keys[i]). */
typedef struct keyed_turn_s {
    keyed_shard_t *sh;
    size_t nkeys, ntasks;
    keyed_key_t *keys[KEYED_BATCH_MAX];
    unsigned count[KEYED_BATCH_MAX];
    keyed_entry_t e[KEYED_BATCH_MAX * KEYED_KEY_QUANTUM];
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

/* After a turn: requeue k at the tail of ready, or free it if idle. mu held. */
static void key_release(ordo_keyed_t *ex, keyed_shard_t *sh, keyed_key_t *k)
{
    k->running = false;
    if (k->count > 0) {
        ready_push(sh, k);
        return;
    }
    key_discard(ex, sh, k);
}

/* Cancel every queued task of ready key k, popped from sh, in order, and
 * release it. sh's mu held on entry and return. The queue is read with mu
 * released: the stop that set cancel was sealed first, so no submit can
 * append to it meanwhile, and k is running, so no other worker touches it.
 * Returns whether blocked producers should be woken. */
static bool key_cancel_all(ordo_keyed_t *ex, keyed_shard_t *sh, keyed_key_t *k)
{
    assert(atomic_load(&ex->sealed) && !k->running && k->count > 0);
    k->running = true;
    const keyed_block_t *b = k->head_blk;
    size_t i = k->head_i, n = k->count;
    pthread_mutex_unlock(&sh->mu);
    for (size_t done = 0; done < n; done++) {
        if (i == b->cap) {
            b = b->next;
            i = 0;
        }
        entry_cancel(&b->e[i++], k);
    }
    pthread_mutex_lock(&sh->mu);
    k->count = 0;
    chain_reset(ex, sh, k);
    bool wake = key_tasks_done(ex, k, n);
    key_release(ex, sh, k);
    return place_give(ex, sh, n) || wake;
}

/* Poll the shards' ready counts with mu released, with growing pauses and
 * then yields (KEYED_SPIN_* above), while this worker is the spinning one
 * (the caller made it so). */
static void spin_for_work(ordo_keyed_t *ex)
{
    unsigned pauses = KEYED_SPIN_PAUSE_MIN;
    for (unsigned poll = 0; poll < KEYED_SPIN_POLLS; poll++) {
        if (pauses <= KEYED_SPIN_PAUSE_MAX) {
            for (unsigned i = 0; i < pauses; i++)
                cpu_relax();
            pauses *= 2;
        } else {
            sched_yield();
        }
        for (unsigned s = 0; s < ex->nshards; s++)
            if (ready_count(&ex->shards[s]) > 0)
                goto found;
    }
found:
    atomic_store_explicit(&ex->workers_spinning, 0, memory_order_seq_cst);
}

/* Free shard sh's cached key states beyond its part of KEYED_CACHE_MAX,
 * with mu released meanwhile, start keys_high afresh and let the table
 * shrink. Takes and releases mu. */
static void shard_trim(ordo_keyed_t *ex, keyed_shard_t *sh)
{
    keyed_key_t *surplus = NULL;
    pthread_mutex_lock(&sh->mu);
    while (sh->key_cached > ex->cache_max) {
        keyed_key_t *k = sh->key_cache;
        sh->key_cache = k->next;
        sh->key_cached--;
        k->next = surplus;
        surplus = k;
    }
    keyed_block_t *blocks = sh->block_cache;
    sh->block_cache = NULL;
    sh->blocks_cached = 0;
    sh->keys_high = sh->keys.count;
    ordo_htab_set_floor(&sh->keys, 0);
    if (sh->ready_cap > KEYED_READY_MIN && sh->keys.count <= KEYED_READY_MIN)
        (void)ready_resize(sh, KEYED_READY_MIN); /* out of memory: stays big */
    pthread_mutex_unlock(&sh->mu);
    while (surplus != NULL) {
        keyed_key_t *k = surplus;
        surplus = k->next;
        key_free(k);
    }
    while (blocks != NULL) {
        keyed_block_t *b = blocks;
        blocks = b->next;
        free(b);
    }
}

/* The executor has been idle (nothing pending) for KEYED_TRIM_IDLE_MS:
 * trim every shard. No lock held. */
static void key_cache_trim(ordo_keyed_t *ex)
{
    atomic_store_explicit(&ex->trim_wanted, false, memory_order_relaxed);
    for (unsigned s = 0; s < ex->nshards; s++)
        shard_trim(ex, &ex->shards[s]);
}

/* Sleep on work_cond, counted in workers_idle, unless a key is ready or
 * the stop is sealed. No lock held. The idle count goes up (seq_cst)
 * before the shards are checked, pairing with ready_push() and
 * wake_worker(). */
static void worker_sleep(ordo_keyed_t *ex)
{
    /* With a surplus of cached key states, sleep at most
     * KEYED_TRIM_IDLE_MS and trim if the executor stayed idle. */
    bool surplus = atomic_load_explicit(&ex->trim_wanted, memory_order_relaxed);
    uint64_t deadline = surplus ? ordo_deadline_ns(KEYED_TRIM_IDLE_MS) : UINT64_MAX;
    int timed_out = 0;
    pthread_mutex_lock(&ex->idle_mu);
    atomic_fetch_add_explicit(&ex->workers_idle, 1, memory_order_seq_cst);
    if (!any_ready(ex) && !atomic_load_explicit(&ex->sealed, memory_order_seq_cst)) {
        timed_out = ordo_cond_wait_until(&ex->work_cond, &ex->idle_mu, deadline);
        /* Counted as the signalled worker even if it was not (a timeout,
         * a spurious wake-up): at worst a later post signals once more. */
        if (ex->wakes_pending > 0)
            ex->wakes_pending--;
    }
    atomic_fetch_sub_explicit(&ex->workers_idle, 1, memory_order_relaxed);
    pthread_mutex_unlock(&ex->idle_mu);
    if (timed_out && atomic_load_explicit(&ex->pending, memory_order_relaxed) == 0)
        key_cache_trim(ex);
}

/* Next ready key, from the shards in turn starting at *cursor, waiting for
 * one. Returns it with its shard's mu held and *cursor at its shard, or
 * NULL (no lock held) once the stop is sealed and no key is ready. One
 * worker at a time spins before it sleeps; the others sleep at once. */
static keyed_key_t *next_key(ordo_keyed_t *ex, unsigned *cursor)
{
    bool spun = false;
    for (;;) {
        /* Read before the scan: once sealed, the scan sees every key. */
        bool sealed = atomic_load_explicit(&ex->sealed, memory_order_acquire);
        for (unsigned i = 0; i < ex->nshards; i++) {
            unsigned s = (*cursor + i) & (ex->nshards - 1);
            keyed_shard_t *sh = &ex->shards[s];
            if (ready_count(sh) == 0)
                continue;
            pthread_mutex_lock(&sh->mu);
            keyed_key_t *k = ready_pop(sh);
            if (k != NULL) {
                *cursor = s;
                return k;
            }
            pthread_mutex_unlock(&sh->mu);
        }
        if (sealed)
            return NULL;
        unsigned idle = 0;
        if (!spun && atomic_compare_exchange_strong(&ex->workers_spinning, &idle, 1)) {
            spin_for_work(ex);
            spun = true;
            continue;
        }
        spun = false;
        worker_sleep(ex);
    }
}

/* How many keys a worker takes from shard sh for one turn, given that it
 * has popped one and ready_len more are ready: a share of them for itself
 * and for each worker not in a turn (idle, spinning or looking: so that
 * they find work too; workers in a turn will come back), at least 1, at
 * most KEYED_BATCH_MAX. mu held; the caller counts in workers_turning. */
static size_t batch_share(ordo_keyed_t *ex, const keyed_shard_t *sh)
{
    unsigned turning = atomic_load_explicit(&ex->workers_turning, memory_order_relaxed);
    size_t takers = 1 + (turning < ex->opts.workers ? ex->opts.workers - turning : 0);
    size_t share = (ready_count(sh) + 1 + takers - 1) / takers;
    return share < KEYED_BATCH_MAX ? share : KEYED_BATCH_MAX;
}

/* Take a turn in shard t->sh starting with ready key k: mark up to
 * batch_share() ready keys running and detach up to KEYED_KEY_QUANTUM head
 * entries of each into t. mu held. Returns whether keys are left ready. */
static bool turn_take(ordo_keyed_t *ex, keyed_key_t *k, keyed_turn_t *t)
{
    keyed_shard_t *sh = t->sh;
    size_t want = batch_share(ex, sh);
    t->nkeys = 1;
    t->ntasks = 0;
    t->keys[0] = k;
    /* The key states and their head entries were last written by other
     * threads: fetch them all first, so that their misses overlap. */
    while (t->nkeys < want && (k = ready_pop(sh)) != NULL) {
        __builtin_prefetch(k, 1);
        t->keys[t->nkeys++] = k;
    }
    for (size_t i = 0; i < t->nkeys; i++)
        __builtin_prefetch(&t->keys[i]->head_blk->e[t->keys[i]->head_i]);
    for (size_t i = 0; i < t->nkeys; i++) {
        k = t->keys[i];
        assert(!k->running && k->count > 0);
        k->running = true;
        unsigned n = 0;
        while (n < KEYED_KEY_QUANTUM && k->count > 0)
            t->e[t->ntasks + n++] = entry_shift(ex, sh, k);
        t->count[i] = n;
        t->ntasks += n;
    }
    return ready_count(sh) > 0;
}

/* Run a taken turn with no lock held. Returns the posts whose handler
 * failed. */
static uint64_t turn_run(ordo_keyed_t *ex, const keyed_turn_t *t)
{
    uint64_t failed = 0;
    const keyed_entry_t *e = t->e;
    for (size_t i = 0; i < t->nkeys; i++)
        for (unsigned j = 0; j < t->count[i]; j++)
            failed += (uint64_t)entry_run(ex, e++, t->keys[i]);
    return failed;
}

/* Account for a run turn and release its keys. mu held. Returns whether
 * blocked producers should be woken. */
static bool turn_finish(ordo_keyed_t *ex, const keyed_turn_t *t)
{
    bool wake = false;
    for (size_t i = 0; i < t->nkeys; i++) {
        wake |= key_tasks_done(ex, t->keys[i], t->count[i]);
        key_release(ex, t->sh, t->keys[i]);
    }
    wake &= atomic_load_explicit(&ex->producers_waiting, memory_order_seq_cst) > 0;
    return place_give(ex, t->sh, t->ntasks) || wake;
}

static void *worker_main(void *p)
{
    ordo_keyed_t *ex = p;
    keyed_turn_t turn;
    unsigned cursor = atomic_fetch_add(&ex->next_worker, 1) & (ex->nshards - 1);
    keyed_key_t *k;
    while ((k = next_key(ex, &cursor)) != NULL) {
        keyed_shard_t *sh = &ex->shards[cursor];
        bool wake_space, left;
        if (cancelling(ex)) {
            wake_space = key_cancel_all(ex, sh, k);
            left = ready_count(sh) > 0;
        } else {
            turn.sh = sh;
            atomic_fetch_add_explicit(&ex->workers_turning, 1, memory_order_relaxed);
            left = turn_take(ex, k, &turn);
            pthread_mutex_unlock(&sh->mu);
            /* Keys are left for an idle worker, in this shard or another:
             * their producers may have signalled no one because this
             * worker was spinning when they made them ready. */
            if (left || any_ready(ex))
                wake_worker(ex);
            uint64_t failed = turn_run(ex, &turn);
            if (failed > 0)
                atomic_fetch_add_explicit(&ex->post_failures, failed, memory_order_relaxed);
            pthread_mutex_lock(&sh->mu);
            wake_space = turn_finish(ex, &turn);
            atomic_fetch_sub_explicit(&ex->workers_turning, 1, memory_order_relaxed);
            left = false; /* requeued keys: this worker comes back for them */
        }
        pthread_mutex_unlock(&sh->mu);
        if (left)
            wake_worker(ex);
        if (wake_space)
            wake_producers(ex);
        cursor = (cursor + 1) & (ex->nshards - 1);
    }
    return NULL;
}

/* ---- stopping ------------------------------------------------------------ */

/* Take and release every shard's mu: afterwards, every submit that saw
 * `stopping` clear has finished appending. */
static void stop_seal(ordo_keyed_t *ex)
{
    for (unsigned s = 0; s < ex->nshards; s++) {
        pthread_mutex_lock(&ex->shards[s].mu);
        pthread_mutex_unlock(&ex->shards[s].mu);
    }
    atomic_store_explicit(&ex->sealed, true, memory_order_seq_cst);
}

int ordo_keyed_stop(ordo_keyed_t *ex, int mode)
{
    if (ex == NULL || (mode != ORDO_KEYED_DRAIN && mode != ORDO_KEYED_CANCEL))
        return ORDO_EINVAL;
    if (on_worker(ex))
        return ORDO_EBUSY;
    if (mode == ORDO_KEYED_CANCEL)
        atomic_store_explicit(&ex->cancel_asked, true, memory_order_seq_cst);
    atomic_store_explicit(&ex->stopping, true, memory_order_seq_cst);
    stop_seal(ex);
    if (mode == ORDO_KEYED_CANCEL)
        atomic_store_explicit(&ex->cancel, true, memory_order_relaxed);
    pthread_mutex_lock(&ex->idle_mu);
    pthread_cond_broadcast(&ex->work_cond);
    pthread_mutex_unlock(&ex->idle_mu);
    wake_producers(ex);
    pthread_mutex_lock(&ex->life_mu);
    if (ex->joining) {
        while (!ex->joined)
            pthread_cond_wait(&ex->stop_cond, &ex->life_mu);
        pthread_mutex_unlock(&ex->life_mu);
        return ORDO_OK;
    }
    ex->joining = true;
    pthread_mutex_unlock(&ex->life_mu);
    /* Only this caller joins; nthreads and threads no longer change. */
    for (unsigned i = 0; i < ex->nthreads; i++)
        pthread_join(ex->threads[i], NULL);
    assert(atomic_load(&ex->pending) == 0);
    pthread_mutex_lock(&ex->life_mu);
    ex->joined = true;
    pthread_cond_broadcast(&ex->stop_cond);
    pthread_mutex_unlock(&ex->life_mu);
    return ORDO_OK;
}

void ordo_keyed_stats(ordo_keyed_t *ex, ordo_keyed_stats_t *out)
{
    /* Every shard's mu, in index order: the counts agree with each other. */
    size_t keys = 0, credit = 0;
    for (unsigned s = 0; s < ex->nshards; s++) {
        pthread_mutex_lock(&ex->shards[s].mu);
        keys += ex->shards[s].keys.count;
        credit += ex->shards[s].credit;
    }
    out->pending = atomic_load(&ex->pending) - credit;
    out->keys_active = keys;
    out->producers_waiting = atomic_load(&ex->producers_waiting);
    out->post_failures = atomic_load(&ex->post_failures);
    out->stopping = stopping(ex);
    out->cancelling = atomic_load(&ex->cancel_asked);
    for (unsigned s = ex->nshards; s-- > 0;)
        pthread_mutex_unlock(&ex->shards[s].mu);
}

static void shard_destroy(keyed_shard_t *sh)
{
    assert(sh->keys.count == 0 && ready_count(sh) == 0 && sh->credit == 0);
    pthread_mutex_destroy(&sh->mu);
    ordo_htab_destroy(&sh->keys);
    free(sh->ready);
    while (sh->key_cache != NULL) {
        keyed_key_t *k = sh->key_cache;
        sh->key_cache = k->next;
        key_free(k);
    }
    while (sh->block_cache != NULL) {
        keyed_block_t *b = sh->block_cache;
        sh->block_cache = b->next;
        free(b);
    }
}

void ordo_keyed_destroy(ordo_keyed_t *ex)
{
    if (ex == NULL)
        return;
    if (ordo_keyed_stop(ex, ORDO_KEYED_DRAIN) != ORDO_OK)
        abort(); /* called on a worker: it would join itself */
    sync_destroy(ex);
    for (unsigned s = 0; s < ex->nshards; s++)
        shard_destroy(&ex->shards[s]);
    free(ex->shards);
    free(ex->threads);
    free(ex);
}
