/*
 * ordo/coalesce.h -- the coalescing FIFO: a blocking queue of (key, item)
 * in which a key appears at most once.
 *
 * Putting a key that is already waiting does not add a second entry: the
 * waiting item is replaced by the new one, or combined with it through the
 * queue's merge function, in O(1), and the entry keeps its place in line.
 * A key that is updated constantly is therefore never starved: it is taken
 * in its turn, with its latest value. Consumers see, per key, the most
 * recent state rather than every intermediate one ("last value" queue).
 *
 * Keys are binary-safe byte strings (any bytes, any length, the empty key
 * included). The queue copies them: the caller's key buffer is not
 * referenced after a call returns.
 *
 * Items are opaque pointers owned by the caller; the queue never frees or
 * dereferences one. Ownership moves as follows:
 *   put       the queue holds the item until it is taken, removed or
 *             drained, or until a later put of the same key replaces it:
 *             the replaced item is handed back to that put's caller
 *             (*replaced_out), who must free it; with a merge function the
 *             merge function receives both items instead (see below);
 *   take      the item moves to the caller;
 *   remove    the item moves to the caller;
 *   drain     each item left moves to the drain callback.
 *
 * Thread safety: every function except ordo_coalesce_destroy() may be called
 * from any thread at any time, concurrently. Blocking calls wait on
 * CLOCK_MONOTONIC and follow the timeout convention of ordo/common.h.
 *
 * Complexity: put, take and remove are O(1) expected (one hash lookup, a few
 * pointer moves). Each waiting key costs one allocation holding the entry
 * and its key bytes.
 */
#ifndef ORDO_COALESCE_H
#define ORDO_COALESCE_H

#include "ordo/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ordo_coalesce_s ordo_coalesce_t;

/* Called by a put when its key is already waiting, with the waiting item and
 * the incoming one; returns the item that waits from now on. It takes
 * ownership of both: whichever it does not return (possibly neither, if it
 * returns a new item) it must free or keep. It runs on the putting thread
 * with the queue's lock held: it must be short and must not call into this
 * queue. The key is valid for the duration of the call only. */
typedef void *(*ordo_coalesce_merge_fn)(void *waiting, void *incoming, const void *key,
                                        size_t key_len, void *arg);

/* Called by ordo_coalesce_drain() and ordo_coalesce_destroy() for each item
 * still waiting, oldest first; the item moves to the callback. The key is
 * valid for the duration of the call only. Runs without the queue's lock. */
typedef void (*ordo_coalesce_drain_fn)(const void *key, size_t key_len, void *item, void *arg);

typedef struct {
    /* Most distinct keys that may wait at once; 0 means unbounded. A put of
     * a new key into a full queue blocks, fails or times out as its timeout
     * says; a put that coalesces never needs room and always succeeds. */
    size_t capacity;
    /* NULL: a put replaces the waiting item and hands the old one back. */
    ordo_coalesce_merge_fn merge;
    void *merge_arg;
} ordo_coalesce_opts_t;

/* What a successful put did (its non-negative return value). */
enum {
    ORDO_COALESCE_INSERTED = 0, /* the key was not waiting: appended at the tail */
    ORDO_COALESCE_REPLACED = 1, /* the waiting item was replaced, in place;
                                 * *replaced_out holds the old item */
    ORDO_COALESCE_MERGED = 2,   /* the merge function combined the two, in place */
};

/* ordo_coalesce_create() -- a new, empty, open queue in *q_out. opts may be
 * NULL (unbounded, replace). Returns ORDO_OK, ORDO_ENOMEM, or ORDO_ESYS if
 * a mutex or condition variable could not be created. */
int ordo_coalesce_create(const ordo_coalesce_opts_t *opts, ordo_coalesce_t **q_out);

/* ordo_coalesce_destroy() -- free the queue. No thread may be inside or
 * enter any call on it. Items still waiting go to drain_fn (oldest first);
 * drain_fn may be NULL only if the queue is empty (asserted). */
void ordo_coalesce_destroy(ordo_coalesce_t *q, ordo_coalesce_drain_fn drain_fn, void *arg);

/* ordo_coalesce_put() -- queue item under key[0..key_len), or coalesce it
 * with the item already waiting under that key (see the merge function).
 * key may be NULL when key_len is 0. The item may be NULL.
 *
 * When the key is new and the queue is full, the call waits for room for at
 * most timeout_ms (ORDO_WAIT_FOREVER: no limit; 0: not at all). If the same
 * key is put by another thread meanwhile, this put coalesces with it.
 *
 * *replaced_out (may be NULL) receives the replaced item on
 * ORDO_COALESCE_REPLACED and NULL otherwise. Passing NULL drops a replaced
 * item: do that only when items own nothing.
 *
 * Returns ORDO_COALESCE_INSERTED, _REPLACED or _MERGED (>= 0), or
 *   ORDO_EFULL      full, and timeout_ms was 0;
 *   ORDO_ETIMEDOUT  full for all of timeout_ms > 0;
 *   ORDO_ESTOPPED   the queue is closed (also when closed while waiting);
 *   ORDO_ENOMEM     the entry could not be allocated;
 *   ORDO_EINVAL     key is NULL with key_len > 0, or key_len is absurd.
 * On any error the queue is unchanged and the item stays the caller's. */
int ordo_coalesce_put(ordo_coalesce_t *q, const void *key, size_t key_len, void *item,
                      int64_t timeout_ms, void **replaced_out);

/* ordo_coalesce_take() -- remove the oldest entry, waiting up to timeout_ms
 * for one while the queue is empty. *item_out receives its item.
 *
 * The key is copied to key_buf (may be NULL when key_cap is 0), at most
 * key_cap bytes; *key_len_out (may be NULL) receives the key's full length,
 * so a result above key_cap means the copy was truncated.
 *
 * Returns ORDO_OK, or
 *   ORDO_ETIMEDOUT  empty for all of timeout_ms (at once if it was 0);
 *   ORDO_ESTOPPED   the queue is closed (also when closed while waiting);
 *                   what is left must be drained by the owner;
 *   ORDO_EINVAL     item_out is NULL, or key_buf is NULL with key_cap > 0. */
int ordo_coalesce_take(ordo_coalesce_t *q, int64_t timeout_ms, void **item_out, void *key_buf,
                       size_t key_cap, size_t *key_len_out);

/* ordo_coalesce_remove() -- take the entry of key out of line, wherever it
 * is, in O(1). *item_out (may be NULL only if items own nothing) receives
 * its item. Works on a closed queue too. Returns ORDO_OK, ORDO_ENOTFOUND if
 * the key is not waiting, or ORDO_EINVAL as for put. */
int ordo_coalesce_remove(ordo_coalesce_t *q, const void *key, size_t key_len, void **item_out);

/* ordo_coalesce_close() -- stop the queue: every later put and take returns
 * ORDO_ESTOPPED, and every thread blocked in one wakes and returns it. The
 * items left stay in the queue for ordo_coalesce_drain() or
 * ordo_coalesce_destroy(), so nothing is lost. Idempotent. */
void ordo_coalesce_close(ordo_coalesce_t *q);

/* ordo_coalesce_drain() -- hand waiting entries to fn (not NULL), oldest
 * first, one at a time, until it finds the queue empty. Meant for a closed
 * queue; on an open one it races with putters and takers like any taker
 * (and may not end while putters keep up). Returns how many entries were
 * drained. */
size_t ordo_coalesce_drain(ordo_coalesce_t *q, ordo_coalesce_drain_fn fn, void *arg);

/* ordo_coalesce_len() -- how many keys are waiting now (a snapshot). */
size_t ordo_coalesce_len(ordo_coalesce_t *q);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_COALESCE_H */
