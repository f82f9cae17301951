/*
 * suq.c -- the singular update queue (ordo/suq.h): many producers, one
 * worker, submission order, bounded, drain-or-cancel stop.
 *
 * Structure. The queue is a ring of `size` slots (capacity rounded up to a
 * power of two), after Vyukov's bounded queue. Positions count up forever;
 * position pos lives in slot pos % size. Two counters bound the live ones:
 *   enq   the next position to reserve (producers CAS it);
 *   done  the first position not yet finished, published by the worker
 *         after each batch (its private copy is `deq`).
 * A producer may reserve pos only while pos - done < size: the slot's
 * previous item (pos - size) is then finished. It CASes enq from pos to
 * pos + 1, writes the item (or its job) and publishes it with a release
 * store of slot.seq = pos + 1. The worker, alone, walks positions from deq, applies
 * every published slot in order (a batch: at most batch_max, all that are
 * there), and only then moves `done` past the batch. So a slot counts
 * against capacity from its reservation until its item is finished
 * (applied or cancelled) and its batch is over; and the worker never
 * writes a slot, so slot lines only travel from producers to the worker.
 *
 * Cost. A post is one CAS and two stores on the producer side (the slot
 * line fetched for writing a few lines ahead) and no allocation at all;
 * the worker does no atomic read-modify-write per item, and one read of
 * `enq` and one store of `done` per batch, with batches kept long under a
 * steady stream (see the gathering rules below). Producers check room
 * against `done_seen`, a copy of `done` kept on the line of `enq` (which
 * they write anyway), and read `done` (a line the worker writes after
 * every batch) only when the copy shows the ring full; since done only
 * grows, the copy errs only towards "full", and a "full" is always
 * confirmed against `done` itself. A submit adds one allocation, a job
 * holding the future and the item; the slot then points at the job and
 * its seq carries SUQ_SEQ_JOB.
 *
 * Stopping. The top bit of `enq` is SUQ_STOP_BIT. A stop sets it; a CAS
 * that would reserve then fails, and the producer reports ORDO_ESTOPPED.
 *   Invariant: done <= deq <= (enq & ~SUQ_STOP_BIT) <= done + size, and
 *   every position from deq to enq is reserved and will be published.
 *   Invariant: once the stop bit is set enq never moves again, so when the
 *   worker reaches deq == enq & ~SUQ_STOP_BIT every accepted item has been
 *   finished and none can be added: it may exit.
 *
 * Sleeping. The slow paths use one mutex and three condition variables.
 * The worker polls with growing pauses when nothing is published, then sets
 * `worker_sleeping` and rechecks `enq` under `mu` before waiting on
 * `work_cv`; a producer signals only if it reads `worker_sleeping` set after
 * its CAS, and only the producer that clears it signals. CAS and flag read,
 * flag write and `enq` recheck are all seq_cst, so one side sees the other
 * (Dekker): no lost wake-up, and no system call per post while the worker
 * is awake. (The worker rechecks `enq`, not the slot: a reserved slot is
 * published by a producer that will not sleep first, so the worker may
 * wait for it by polling.) Producers blocked on a full ring count
 * themselves in `full_waiters` under `mu` before their last recheck of
 * `done`; the worker, after its seq_cst store of `done`, broadcasts
 * `space_cv` if it sees a waiter (the same Dekker argument) and at most
 * half the ring is in use. A stop sets the stop bit and then broadcasts
 * both conditions under `mu`, so every sleeper re-evaluates.
 */
#include "ordo/suq.h"

#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "future_impl.h"
#include "sync.h"

#define SUQ_STOP_BIT ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* The worker's polling. Each poll pulls a line the producers write, so the
 * worker polls with growing pauses in between (from SUQ_BACKOFF_MIN to
 * SUQ_BACKOFF_MAX pause instructions, a few microseconds in all), then
 * yields the CPU between polls, up to SUQ_POLLS polls, before it sleeps:
 * on a machine with more runnable threads than cores, a spinning worker
 * would take the time of the very producer it waits for, and yielding
 * costs nothing when no one else is waiting for the core.
 *
 * A batch that ends before batch_max has caught up with the producers, and
 * its last look was at the line they are writing: that look pulls the line
 * away from the producer, which must take it back for its next slot (and
 * waits for that in its next compare-and-swap). Chasing the producers item
 * by item would pay this per item. So after such a batch the worker pauses
 * before its next look, `gather` pause instructions, doubling after each
 * short batch up to SUQ_GATHER_MAX and halving after each full one: under a
 * steady stream batches settle near batch_max long and the producers' lines
 * are disturbed once per batch. While enq moves (producers are posting),
 * the worker also stays SUQ_LAG positions behind it: reading slots right
 * behind the producers lets the worker core's prefetcher run ahead into
 * lines they are still writing. An item that arrives during a pause waits
 * for it; once the pause has grown to SUQ_GATHER_MAX (a few microseconds,
 * as long as the polls of an idle worker) or enq stands still, the worker
 * takes everything published. */
#define SUQ_BACKOFF_MIN 32u
#define SUQ_BACKOFF_MAX 256u
#define SUQ_POLLS 16u
#define SUQ_GATHER_MAX 256u
#define SUQ_LAG 128u /* 32 lines of slots */

#define SUQ_CACHE_LINE 64
#define SUQ_PREFETCH_SLOTS 16  /* 4 lines of 4 slots ahead */

/* Fetch the line at p for writing: in exclusive state, so that the store
 * that follows need not ask the worker's core for it (a read prefetch
 * would fetch it shared, and the store would still wait). PREFETCHW is a
 * no-op on x86 processors that lack it. */
static inline void suq_prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

/* Set in a slot's seq when its pointer is a suq_job_t (a submit), clear
 * when it is the item itself (a post). Positions never reach this bit. */
#define SUQ_SEQ_JOB ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* 16 bytes: four slots a cache line, so each line the worker pulls from a
 * producer's cache brings four items. */
typedef struct {
    atomic_size_t seq;  /* pos + 1 once published, | SUQ_SEQ_JOB */
    void *ptr;          /* the posted item, or the submit's suq_job_t */
} suq_slot_t;

/* A submitted item: its future and the item in one allocation, freed when
 * the future's last reference goes (future_impl.h). */
typedef struct {
    ordo_future_t future;
    void *item;
} suq_job_t;

enum { SUQ_RUNNING, SUQ_STOPPING, SUQ_JOINED };

struct ordo_suq_s {
    /* Written by every reservation. */
    alignas(SUQ_CACHE_LINE) atomic_size_t enq;
    /* A value `done` had (it only grows): producers check room against it,
     * on the line they write anyway, and read `done` itself only when it
     * shows the ring full. Written by producers only. */
    atomic_size_t done_seen;
    /* Read by every post; written only around sleeps and stops. */
    alignas(SUQ_CACHE_LINE) atomic_int worker_sleeping;
    atomic_int full_waiters;
    atomic_int cancel;
    atomic_int stopping;     /* set after the stop bit, for the worker's polls */
    /* Written by the worker once per batch; read by every reservation. */
    alignas(SUQ_CACHE_LINE) atomic_size_t done;
    /* Worker-owned: the next position to apply; done lags it within a
     * batch. */
    alignas(SUQ_CACHE_LINE) size_t deq;
    /* Read-only after create. */
    alignas(SUQ_CACHE_LINE) suq_slot_t *slots;
    size_t mask;             /* size - 1 */
    ordo_suq_handler_fn handler;
    ordo_suq_cancel_fn cancel_fn;
    ordo_suq_batch_fn batch_fn;
    void *ctx;
    size_t batch_max;
    pthread_t thread;        /* written under mu before the worker runs */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* the worker waits for items or a stop */
    pthread_cond_t space_cv; /* producers wait for capacity or a stop */
    pthread_cond_t stop_cv;  /* late stop callers wait for the join */
    int stop_state;          /* SUQ_*; guarded by mu */
};

static inline void suq_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void suq_pause(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        suq_cpu_relax();
}

/* ---- producer side ------------------------------------------------------ */

/* Reserve one position. Returns ORDO_OK with *slot_out and *pos_out set,
 * ORDO_EFULL or ORDO_ESTOPPED. Inlined into the post and submit paths, so
 * that a hand-off is one call and its outputs stay in registers. */
static inline __attribute__((always_inline)) int suq_try_reserve(ordo_suq_t *q,
                                                                 suq_slot_t **slot_out,
                                                                 size_t *pos_out)
{
    size_t pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
    for (;;) {
        if (pos & SUQ_STOP_BIT)
            return ORDO_ESTOPPED;
        /* done_seen <= done, so room against it is room. Acquire: the
         * producer that stored it had acquired it from the worker's store
         * of done, after the worker's last reads of the slots it frees. */
        size_t done = atomic_load_explicit(&q->done_seen, memory_order_acquire);
        if (pos - done > q->mask) {
            done = atomic_load_explicit(&q->done, memory_order_seq_cst);
            atomic_store_explicit(&q->done_seen, done, memory_order_release);
        }
        if (pos - done > q->mask) {
            /* Full, unless enq moved meanwhile (then pos was stale, which
             * can also make pos - done wrap around). */
            size_t now = atomic_load_explicit(&q->enq, memory_order_seq_cst);
            if (now == pos)
                return ORDO_EFULL;
            pos = now;
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&q->enq, &pos, pos + 1, memory_order_seq_cst,
                                                  memory_order_relaxed)) {
            /* Ours alone now: only this producer publishes pos. */
            *slot_out = &q->slots[pos & q->mask];
            *pos_out = pos;
            return ORDO_OK;
        }
    }
}

/* The slow path: wait on space_cv until a slot frees, the deadline passes
 * (ORDO_ETIMEDOUT) or a stop starts (ORDO_ESTOPPED). */
static __attribute__((noinline, cold)) int suq_wait_slot(ordo_suq_t *q, uint64_t deadline_ns, suq_slot_t **slot_out,
                         size_t *pos_out)
{
    int rc;
    pthread_mutex_lock(&q->mu);
    atomic_fetch_add_explicit(&q->full_waiters, 1, memory_order_seq_cst);
    while ((rc = suq_try_reserve(q, slot_out, pos_out)) == ORDO_EFULL) {
        if (ordo_cond_wait_until(&q->space_cv, &q->mu, deadline_ns) == ETIMEDOUT) {
            rc = suq_try_reserve(q, slot_out, pos_out);
            if (rc == ORDO_EFULL)
                rc = ORDO_ETIMEDOUT;
            break;
        }
    }
    atomic_fetch_sub_explicit(&q->full_waiters, 1, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static __attribute__((noinline, cold)) void suq_wake_worker(ordo_suq_t *q)
{
    pthread_mutex_lock(&q->mu);
    pthread_cond_signal(&q->work_cv);
    pthread_mutex_unlock(&q->mu);
}

/* Reserve a slot (waiting as timeout_ms says), fill and publish it. */
static inline __attribute__((always_inline)) int suq_enqueue(ordo_suq_t *q, void *ptr, size_t job_bit, int64_t timeout_ms)
{
    suq_slot_t *slot;
    size_t pos;
    int rc = suq_try_reserve(q, &slot, &pos);
    if (rc == ORDO_EFULL && timeout_ms != 0)
        rc = suq_wait_slot(q, ordo_deadline_ns(timeout_ms), &slot, &pos);
    if (rc != ORDO_OK)
        return rc;
    /* Fetch a line ahead for writing: it is usually free (its items were
     * finished a lap ago), and having it here keeps the next CAS from
     * waiting on a store that misses. */
    suq_prefetch_write(&q->slots[(pos + SUQ_PREFETCH_SLOTS) & q->mask]);
    slot->ptr = ptr;
    atomic_store_explicit(&slot->seq, (pos + 1) | job_bit, memory_order_release);
    /* Only the producer that clears the flag signals: while the worker is
     * waking up, the others post without touching the mutex. */
    if (atomic_load_explicit(&q->worker_sleeping, memory_order_seq_cst) &&
        atomic_exchange_explicit(&q->worker_sleeping, 0, memory_order_seq_cst))
        suq_wake_worker(q);
    return ORDO_OK;
}

static void suq_job_free(ordo_future_t *f)
{
    free((char *)f - offsetof(suq_job_t, future));
}

int ordo_suq_submit(ordo_suq_t *q, void *item, int64_t timeout_ms, ordo_future_t **future_out)
{
    if (future_out == NULL)
        return ORDO_EINVAL;
    *future_out = NULL;
    if (q == NULL)
        return ORDO_EINVAL;
    suq_job_t *job = malloc(sizeof *job);
    if (job == NULL)
        return ORDO_ENOMEM;
    if (ordo__future_init(&job->future, suq_job_free) != ORDO_OK) {
        free(job);
        return ORDO_ESYS;
    }
    job->item = item;
    int rc = suq_enqueue(q, job, SUQ_SEQ_JOB, timeout_ms);
    if (rc != ORDO_OK) {
        /* Never published: drop both references (queue's and caller's);
         * the second frees the job. */
        ordo_future_release(&job->future);
        ordo_future_release(&job->future);
        return rc;
    }
    *future_out = &job->future;
    return ORDO_OK;
}

int ordo_suq_post(ordo_suq_t *q, void *item, int64_t timeout_ms)
{
    if (q == NULL || q->cancel_fn == NULL)
        return ORDO_EINVAL;
    return suq_enqueue(q, item, 0, timeout_ms);
}

/* ---- worker side -------------------------------------------------------- */

/* Apply or cancel one item and complete its future (f may be NULL). */
static void suq_finish(ordo_suq_t *q, void *item, ordo_future_t *f)
{
    if (atomic_load_explicit(&q->cancel, memory_order_relaxed)) {
        if (q->cancel_fn != NULL)
            q->cancel_fn(q->ctx, item);
        if (f != NULL)
            ordo__future_complete(f, ORDO_ECANCELED, NULL);
        return;
    }
    void *result = NULL;
    int rc = q->handler(q->ctx, item, &result);
    if (f != NULL)
        ordo__future_complete(f, rc == 0 ? ORDO_OK : ORDO_EHANDLER, result);
}

/* Whether blocked producers should be woken now: once at most half the
 * ring is in use. Waking them as soon as one batch is free would, on a
 * busy machine where producer and worker share a core, switch between
 * them once per batch; this way it is once per half ring. The worker
 * keeps finishing published items, so it does get here; a timed waiter
 * that runs out first still takes a slot if there is one. */
static bool suq_room_for_waiters(ordo_suq_t *q)
{
    size_t enq = atomic_load_explicit(&q->enq, memory_order_relaxed) & ~SUQ_STOP_BIT;
    return enq - q->deq <= (q->mask + 1) / 2;
}

/* Hand the n slots from deq back to producers and wake blocked ones. The
 * seq_cst store and load make a Dekker pair with suq_wait_slot(), which
 * counts itself in full_waiters before it reads `done`. */
static void suq_release(ordo_suq_t *q, size_t n)
{
    assert(n > 0 && n <= q->batch_max);
    q->deq += n;
    atomic_store_explicit(&q->done, q->deq, memory_order_seq_cst);
    if (atomic_load_explicit(&q->full_waiters, memory_order_seq_cst) > 0 &&
        suq_room_for_waiters(q)) {
        pthread_mutex_lock(&q->mu);
        pthread_cond_broadcast(&q->space_cv);
        pthread_mutex_unlock(&q->mu);
    }
}

/* Finish one batch: every published slot from deq up to end (exclusive),
 * at most batch_max. Returns its length (0 if the slot at deq is not
 * published). */
static size_t suq_batch(ordo_suq_t *q, size_t end)
{
    size_t n = 0;
    while (n < q->batch_max && q->deq + n != end) {
        size_t pos = q->deq + n;
        suq_slot_t *slot = &q->slots[pos & q->mask];
        size_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        if ((seq & ~SUQ_SEQ_JOB) != pos + 1)
            break;
        if (seq & SUQ_SEQ_JOB) {
            suq_job_t *job = slot->ptr;
            suq_finish(q, job->item, &job->future);
        } else {
            suq_finish(q, slot->ptr, NULL);
        }
        n++;
    }
    if (n == 0)
        return 0;
    if (q->batch_fn != NULL)
        q->batch_fn(q->ctx, n);
    suq_release(q, n);
    return n;
}

/* Whether some position is reserved (published or about to be) or a stop
 * started: what keeps the worker from sleeping. */
static bool suq_has_work(ordo_suq_t *q)
{
    size_t enq = atomic_load_explicit(&q->enq, memory_order_seq_cst);
    return enq != q->deq;  /* differs if reserved, or if the stop bit is set */
}

/* Poll the next slot with growing pauses. Polls read the slot, not `enq`:
 * the worker must read that slot's line anyway, while every read of `enq`
 * costs the next reservation a cache miss. Returns true when the slot is
 * published, false when a stop started or the polls ran out. */
static bool suq_spin(ordo_suq_t *q)
{
    const suq_slot_t *slot = &q->slots[q->deq & q->mask];
    unsigned spins = SUQ_BACKOFF_MIN;
    for (unsigned round = 0; round < SUQ_POLLS; round++) {
        if (spins <= SUQ_BACKOFF_MAX) {
            suq_pause(spins);
            spins *= 2;
        } else {
            sched_yield();
        }
        size_t seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);
        if ((seq & ~SUQ_SEQ_JOB) == q->deq + 1)
            return true;
        if (atomic_load_explicit(&q->stopping, memory_order_relaxed))
            return false;
    }
    return false;
}

/* Sleep until some position is reserved or a stop started. */
static void suq_sleep(ordo_suq_t *q)
{
    pthread_mutex_lock(&q->mu);
    for (;;) {
        /* Set before every check: a producer may have cleared it. */
        atomic_store_explicit(&q->worker_sleeping, 1, memory_order_seq_cst);
        if (suq_has_work(q))
            break;
        pthread_cond_wait(&q->work_cv, &q->mu);
    }
    atomic_store_explicit(&q->worker_sleeping, 0, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
}

/* The worker: look at enq once per batch (a line the producers write, so
 * once per batch is what it may cost), apply up to the position the
 * gathering rules above allow, then pause or poll or sleep. */
static void *suq_worker(void *arg)
{
    ordo_suq_t *q = arg;
    /* Pairs with create, which sets q->thread under mu. */
    pthread_mutex_lock(&q->mu);
    pthread_mutex_unlock(&q->mu);
    unsigned gather = SUQ_BACKOFF_MIN;
    size_t last_enq = 0;
    for (;;) {
        size_t enq = atomic_load_explicit(&q->enq, memory_order_relaxed) & ~SUQ_STOP_BIT;
        size_t end = enq; /* enq stands still, or gathering is at its longest */
        if (enq != last_enq && gather < SUQ_GATHER_MAX)
            end = enq - q->deq > SUQ_LAG ? enq - SUQ_LAG : q->deq;
        last_enq = enq;
        size_t n = end != q->deq ? suq_batch(q, end) : 0;
        if (n == q->batch_max) {
            if (gather > SUQ_BACKOFF_MIN)
                gather /= 2;
            continue;
        }
        if (n > 0 || enq != q->deq) {
            /* Caught up, or held back by the lag: gather. */
            suq_pause(gather);
            if (gather < SUQ_GATHER_MAX)
                gather *= 2;
            if (n > 0 || end != enq)
                continue;
            /* Nothing published at deq although enq is past it: poll. */
        }
        gather = SUQ_BACKOFF_MIN;
        if (suq_spin(q))
            continue;
        enq = atomic_load_explicit(&q->enq, memory_order_seq_cst);
        if (enq == (q->deq | SUQ_STOP_BIT))
            return NULL;
        if ((enq & ~SUQ_STOP_BIT) != q->deq) {
            /* Reserved, not yet published: the producer is between its CAS
             * and its store, or was preempted there. */
            sched_yield();
            continue;
        }
        suq_sleep(q);
    }
}

/* ---- life cycle --------------------------------------------------------- */

static size_t suq_ring_size(size_t capacity)
{
    size_t size = 1;
    while (size < capacity)
        size *= 2;
    return size;
}

static int suq_init_fields(ordo_suq_t *q, const ordo_suq_options_t *opts)
{
    size_t capacity = opts->capacity ? opts->capacity : ORDO_SUQ_CAPACITY_DEFAULT;
    size_t size = suq_ring_size(capacity);
    q->slots = malloc(size * sizeof *q->slots);
    if (q->slots == NULL)
        return ORDO_ENOMEM;
    /* seq 0 never equals pos + 1 for a position of the first lap. */
    for (size_t i = 0; i < size; i++) {
        atomic_init(&q->slots[i].seq, 0);
        q->slots[i].ptr = NULL;
    }
    assert(size >= capacity && (size & (size - 1)) == 0);
    q->mask = size - 1;
    atomic_init(&q->enq, 0);
    atomic_init(&q->worker_sleeping, 0);
    atomic_init(&q->full_waiters, 0);
    atomic_init(&q->cancel, 0);
    atomic_init(&q->stopping, 0);
    atomic_init(&q->done, 0);
    atomic_init(&q->done_seen, 0);
    q->deq = 0;
    q->handler = opts->handler;
    q->cancel_fn = opts->cancel_fn;
    q->batch_fn = opts->batch_fn;
    q->ctx = opts->ctx;
    q->batch_max = opts->batch_max ? opts->batch_max : ORDO_SUQ_BATCH_MAX_DEFAULT;
    q->stop_state = SUQ_RUNNING;
    return ORDO_OK;
}

int ordo_suq_create(const ordo_suq_options_t *opts, ordo_suq_t **q_out)
{
    if (q_out == NULL || opts == NULL || opts->handler == NULL ||
        opts->capacity > ORDO_SUQ_CAPACITY_MAX)
        return ORDO_EINVAL;
    int rc = ORDO_ENOMEM;
    ordo_suq_t *q = aligned_alloc(alignof(ordo_suq_t), sizeof *q);
    if (q == NULL)
        return ORDO_ENOMEM;
    if (suq_init_fields(q, opts) != ORDO_OK)
        goto fail_slots;
    rc = ORDO_ESYS;
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto fail_mu;
    if (ordo_cond_init(&q->work_cv) != 0)
        goto fail_work_cv;
    if (ordo_cond_init(&q->space_cv) != 0)
        goto fail_space_cv;
    if (ordo_cond_init(&q->stop_cv) != 0)
        goto fail_stop_cv;
    pthread_mutex_lock(&q->mu);
    int err = pthread_create(&q->thread, NULL, suq_worker, q);
    pthread_mutex_unlock(&q->mu);
    if (err != 0)
        goto fail_thread;
    *q_out = q;
    return ORDO_OK;

fail_thread:
    pthread_cond_destroy(&q->stop_cv);
fail_stop_cv:
    pthread_cond_destroy(&q->space_cv);
fail_space_cv:
    pthread_cond_destroy(&q->work_cv);
fail_work_cv:
    pthread_mutex_destroy(&q->mu);
fail_mu:
    free(q->slots);
fail_slots:
    free(q);
    return rc;
}

/* A later stop: upgrade to cancel if asked, wait for the first to join. */
static int suq_stop_late(ordo_suq_t *q, ordo_suq_stop_mode_t mode)
{
    if (mode == ORDO_SUQ_CANCEL)
        atomic_store_explicit(&q->cancel, 1, memory_order_seq_cst);
    while (q->stop_state != SUQ_JOINED)
        pthread_cond_wait(&q->stop_cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
    return ORDO_ESTOPPED;
}

int ordo_suq_stop(ordo_suq_t *q, ordo_suq_stop_mode_t mode)
{
    if (q == NULL || (mode != ORDO_SUQ_DRAIN && mode != ORDO_SUQ_CANCEL))
        return ORDO_EINVAL;
    pthread_mutex_lock(&q->mu);
    /* Only while the worker lives: a joined thread's id may be reused. */
    if (q->stop_state != SUQ_JOINED && pthread_equal(pthread_self(), q->thread)) {
        pthread_mutex_unlock(&q->mu);
        return ORDO_EBUSY;
    }
    if (q->stop_state != SUQ_RUNNING)
        return suq_stop_late(q, mode);
    q->stop_state = SUQ_STOPPING;
    if (mode == ORDO_SUQ_CANCEL)
        atomic_store_explicit(&q->cancel, 1, memory_order_seq_cst);
    atomic_fetch_or_explicit(&q->enq, SUQ_STOP_BIT, memory_order_seq_cst);
    atomic_store_explicit(&q->stopping, 1, memory_order_seq_cst);
    pthread_cond_broadcast(&q->work_cv);
    pthread_cond_broadcast(&q->space_cv);
    pthread_mutex_unlock(&q->mu);

    pthread_join(q->thread, NULL);

    pthread_mutex_lock(&q->mu);
    assert(atomic_load(&q->enq) == (q->deq | SUQ_STOP_BIT));
    q->stop_state = SUQ_JOINED;
    pthread_cond_broadcast(&q->stop_cv);
    pthread_mutex_unlock(&q->mu);
    return ORDO_OK;
}

void ordo_suq_destroy(ordo_suq_t *q)
{
    if (q == NULL)
        return;
    pthread_mutex_lock(&q->mu);
    int state = q->stop_state;
    pthread_mutex_unlock(&q->mu);
    if (state == SUQ_RUNNING) {
        int rc = ordo_suq_stop(q, ORDO_SUQ_DRAIN);
        assert(rc == ORDO_OK); /* not on the worker thread */
        (void)rc;
    }
    assert(q->stop_state == SUQ_JOINED);
    pthread_cond_destroy(&q->stop_cv);
    pthread_cond_destroy(&q->space_cv);
    pthread_cond_destroy(&q->work_cv);
    pthread_mutex_destroy(&q->mu);
    free(q->slots);
    free(q);
}
