/*
 * ordo/suq.h -- the singular update queue: many producers, one worker.
 *
 * Any number of threads submit items; one worker thread, owned by the queue,
 * passes them to a single handler one at a time, in submission order. The
 * state the handler touches is therefore owned by the worker and needs no
 * lock. "Submission order" is the order in which submits were accepted; two
 * submits made one after the other by the same thread keep their order.
 *
 * Items and ownership:
 *   - An item is an opaque `void *` chosen by the producer; the queue never
 *     dereferences it. Ownership passes to the queue when a submit or post
 *     returns ORDO_OK, and from the queue to exactly one of:
 *       the handler (the item was applied), or
 *       the cancel callback (a stop in ORDO_SUQ_CANCEL mode dropped it).
 *     An accepted item is never dropped without one of those two calls.
 *     When a submit or post fails, ownership stays with the caller.
 *   - ordo_suq_submit() also returns a future (ordo/future.h) that completes
 *     after the handler (status ORDO_OK or ORDO_EHANDLER, with the result the
 *     handler set) or after the cancel callback (status ORDO_ECANCELED,
 *     result NULL). submit allocates it; the caller owns one reference
 *     and must release it; the memory goes when both the caller's and the
 *     queue's references are gone, so the pointer stays valid until the
 *     caller's ordo_future_release(), however late.
 *   - ordo_suq_post() is fire-and-forget: no future, no allocation at all
 *     (the item pointer is stored in the queue's ring), and the handler's
 *     return value is ignored.
 *
 * Capacity: the queue is a ring of `capacity` slots, rounded up to a power
 * of two; a slot is taken from the moment a submit is accepted until its
 * item is finished (applied or cancelled) and its batch is over. A submit
 * to a full queue blocks, fails at once or waits at most timeout_ms, as its
 * caller chooses (see common.h). The ring is allocated once, at create:
 * 16 bytes a slot.
 *
 * Batching: the worker takes everything published so far, in order, in
 * batches of at most `batch_max` items. After each batch it calls batch_fn
 * (if set) and gives the batch's slots back to producers. Producers asleep
 * on a full queue are woken once at most half of it is in use (fewer
 * context switches on a busy machine); a producer that polls (timeout 0)
 * or whose timeout runs out takes any slot already free. (A stop in cancel
 * mode does not wait for a batch to end: cancel is checked before every
 * item.)
 *
 * Thread safety: ordo_suq_submit(), ordo_suq_post() and ordo_suq_stop() may
 * be called from any thread at the same time. ordo_suq_destroy() must be
 * called once, by one thread, when no other call on the queue is running or
 * can start. The handler, batch_fn and cancel_fn run on the worker thread
 * only, never concurrently with each other, and so do future callbacks
 * registered before completion.
 *
 * Waiting: an idle worker polls for a few microseconds, then yields the
 * CPU between a few more polls, then sleeps on a condition variable; a
 * producer makes a system call only to wake a sleeping worker (once per
 * sleep) or to sleep itself on a full queue. A worker that has caught up
 * with a steady stream of items pauses before it looks again, longer
 * (up to a few microseconds) while its batches stay short, so that it
 * takes them in long batches instead of chasing the producers item by
 * item; an item may wait that long before it is applied.
 *
 * Re-entrancy: the handler and future callbacks may submit to other queues
 * (that is how pipeline stages are chained). They may submit to their own
 * queue only with timeout_ms == 0 (a blocking submit there would wait for
 * space only the worker itself can free), and must not call ordo_suq_stop()
 * or ordo_suq_destroy() on their own queue (ORDO_EBUSY).
 */
#ifndef ORDO_SUQ_H
#define ORDO_SUQ_H

#include "ordo/common.h"
#include "ordo/future.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ordo_suq_s ordo_suq_t;

/* Limits. The default capacity keeps the ring (64 KiB) within a core's L2
 * cache while leaving producers room to run ahead of a worker that stalls
 * briefly; the maximum keeps the ring's size computation and allocation
 * (16 GiB) far from overflow; the default batch bounds the time between
 * capacity returns. */
#define ORDO_SUQ_CAPACITY_DEFAULT 4096u
#define ORDO_SUQ_CAPACITY_MAX (1u << 30)
#define ORDO_SUQ_BATCH_MAX_DEFAULT 256u

/* The handler: apply one item. Runs on the worker. *result_out starts as
 * NULL; whatever the handler stores there becomes the future's result (for
 * posted items it is discarded). Return 0 on success; any other value
 * completes the future with ORDO_EHANDLER. The handler owns the item from
 * the moment it is called. */
typedef int (*ordo_suq_handler_fn)(void *ctx, void *item, void **result_out);

/* Called on the worker for each accepted item that a stop in cancel mode
 * drops instead of applying, before its future (if any) completes with
 * ORDO_ECANCELED. Owns the item from the moment it is called: free it here. */
typedef void (*ordo_suq_cancel_fn)(void *ctx, void *item);

/* Called on the worker after each batch of n_items (1 <= n <= batch_max)
 * items were applied or cancelled. Use it for per-batch work such as one
 * flush for many records. */
typedef void (*ordo_suq_batch_fn)(void *ctx, size_t n_items);

typedef struct {
    ordo_suq_handler_fn handler; /* required */
    ordo_suq_cancel_fn cancel_fn;/* optional; required for ordo_suq_post() */
    ordo_suq_batch_fn batch_fn;  /* optional */
    void *ctx;                   /* passed to the three callbacks */
    size_t capacity;             /* 0: ORDO_SUQ_CAPACITY_DEFAULT; rounded
                                  * up to a power of two */
    size_t batch_max;            /* 0: ORDO_SUQ_BATCH_MAX_DEFAULT */
} ordo_suq_options_t;

/* How ordo_suq_stop() treats items accepted but not yet applied. */
typedef enum {
    ORDO_SUQ_DRAIN = 0,  /* apply every one of them, then stop */
    ORDO_SUQ_CANCEL = 1, /* hand each to cancel_fn, complete its future
                          * with ORDO_ECANCELED; the item being applied
                          * when the stop starts finishes normally */
} ordo_suq_stop_mode_t;

/* ordo_suq_create() -- allocate a queue and start its worker thread.
 * opts is copied; it need not outlive the call. *q_out (output) receives the
 * queue, to be freed with ordo_suq_destroy().
 * Returns ORDO_OK, or:
 *   ORDO_EINVAL  q_out, opts or opts->handler is NULL, or capacity is above
 *                ORDO_SUQ_CAPACITY_MAX;
 *   ORDO_ENOMEM  the queue or its ring could not be allocated;
 *   ORDO_ESYS    a mutex, condition variable or the thread could not be
 *                created.
 * On error nothing is left allocated and *q_out is untouched. */
int ordo_suq_create(const ordo_suq_options_t *opts, ordo_suq_t **q_out);

/* ordo_suq_submit() -- queue item and get a future for its outcome.
 * timeout_ms applies only when the queue is full: ORDO_WAIT_FOREVER blocks
 * until there is space, 0 fails at once, n > 0 waits at most n ms.
 * *future_out (output) receives a future with one reference owned by the
 * caller (release it with ordo_future_release()); it is set to NULL on
 * error. Returns ORDO_OK, or:
 *   ORDO_EINVAL     q or future_out is NULL;
 *   ORDO_ENOMEM     the future could not be allocated;
 *   ORDO_EFULL      the queue was full and timeout_ms was 0;
 *   ORDO_ETIMEDOUT  the queue stayed full for timeout_ms > 0;
 *   ORDO_ESTOPPED   a stop had started (also when it starts while the
 *                   caller is blocked on a full queue);
 *   ORDO_ESYS       the future's mutex or condition could not be made.
 * On error the item still belongs to the caller. */
int ordo_suq_submit(ordo_suq_t *q, void *item, int64_t timeout_ms, ordo_future_t **future_out);

/* ordo_suq_post() -- queue item without a future (for hot paths). The
 * handler's status and result are ignored. timeout_ms as for submit.
 * Allocates nothing. Returns ORDO_OK, or:
 *   ORDO_EINVAL     q is NULL, or the queue has no cancel_fn (a cancel stop
 *                   would have no way to hand the item back);
 *   ORDO_EFULL, ORDO_ETIMEDOUT, ORDO_ESTOPPED  as for submit.
 * On error the item still belongs to the caller. */
int ordo_suq_post(ordo_suq_t *q, void *item, int64_t timeout_ms);

/* ordo_suq_stop() -- stop accepting, finish every accepted item as mode says,
 * and wait for the worker thread to exit. From the moment it starts, submits
 * and posts fail with ORDO_ESTOPPED and producers blocked on a full queue
 * wake with ORDO_ESTOPPED. Items accepted before that are all applied
 * (ORDO_SUQ_DRAIN) or all cancelled but the one being applied
 * (ORDO_SUQ_CANCEL). When it returns, every accepted item has been handed
 * to the handler or cancel_fn and every future has completed.
 * Returns ORDO_OK, or:
 *   ORDO_EINVAL    q is NULL or mode is not an ordo_suq_stop_mode_t;
 *   ORDO_EBUSY     called on the queue's own worker thread (from the
 *                  handler or a callback): nothing was done;
 *   ORDO_ESTOPPED  another stop had already started; this call waited for
 *                  it to finish. A later ORDO_SUQ_CANCEL still cancels
 *                  what an earlier ORDO_SUQ_DRAIN has not applied yet. */
int ordo_suq_stop(ordo_suq_t *q, ordo_suq_stop_mode_t mode);

/* ordo_suq_destroy() -- stop (ORDO_SUQ_DRAIN) if no stop was made, then
 * free the queue and its ring; q must not be used afterwards. q may be
 * NULL. Futures obtained from the queue stay valid until released. Must not
 * be called from the worker thread. */
void ordo_suq_destroy(ordo_suq_t *q);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_SUQ_H */
