/*
 * ordo/keyed.h -- the keyed serial executor: tasks with the same key run one
 * at a time, in submission order; tasks with different keys run in parallel
 * on a fixed pool of worker threads.
 *
 * A key is a binary-safe byte string of key_len bytes (NUL bytes allowed, the
 * empty key too). The executor copies it; the caller's buffer is free to be
 * reused as soon as the submitting call returns.
 *
 * Guarantees, per key:
 *   - order: tasks start in the order their submits were accepted (for two
 *     submits racing from different threads, whichever took the lock of
 *     the key's shard first);
 *   - exclusion: at most one task of a key runs at any moment;
 *   - completion order: a task's future is completed, and its callback has
 *     returned, before the next task of the same key starts. Cancelled tasks
 *     are completed in submission order too.
 * Across keys: keys are spread by hash over shards (at least as many as
 * workers), and a shard's keys with queued tasks wait in its FIFO ready
 * queue. A worker takes a turn in one shard: up to 4 tasks from each of the
 * keys at the head of the queue (up to 16 keys, and no more than its share
 * of them, so workers not in a turn find work too), runs them one after
 * another, then puts each key that has more tasks back at the tail. It
 * looks for its next turn in the following shard, so every shard with
 * ready keys is served within a pass over the shards. A key thus runs at
 * most 4 tasks per pass over its shard's ready keys, and a key with
 * thousands of pending tasks delays a newly active key by at most 4 tasks
 * (per turn that key's worker takes). Short tasks are assumed: a key taken
 * into a turn waits for the tasks before it in that turn even if another
 * worker is idle.
 *
 * Bounds: a task is "pending" from the moment its submit is accepted until
 * its handler has returned and its future's callback (if any) has returned
 * (or until it is cancelled). pending_max bounds the pending tasks of the
 * whole executor, key_pending_max those of one key. A submit that finds a
 * bound reached waits for room as its timeout_ms says (ordo/common.h):
 *   ORDO_WAIT_FOREVER  block until there is room (or a stop: ORDO_ESTOPPED);
 *   0                  fail at once with ORDO_EFULL;
 *   n > 0              block at most n ms, then fail with ORDO_ETIMEDOUT.
 * A blocked submit is woken when the count it waits on has fallen to a
 * quarter of its bound below the bound (at least one below), not at every
 * finished task: producers of a full executor proceed in batches.
 * A submit made on one of the executor's own worker threads (from a handler
 * or a completion callback) never blocks: blocking could wait for the very
 * worker that is blocked. It fails with ORDO_EFULL instead.
 *
 * Thread safety: every function may be called from any thread, except that
 * ordo_keyed_stop() and ordo_keyed_destroy() must not be called from a worker
 * thread of the executor they stop (stop returns ORDO_EBUSY there).
 *
 * Memory: the executor holds state only for keys that have pending tasks
 * (keys_active); a key leaves the table as soon as it has none, so memory
 * follows the number of active keys, not the number of keys ever seen. The
 * states of keys of up to 32 bytes that went idle are kept for reuse, up to
 * the most keys active at once, until the executor has been idle (nothing
 * pending) for 100 ms; then all but 1024 are freed. A longer key's state is
 * freed as soon as the key is idle. A key's first 8 queued tasks live in
 * its state, more in blocks of 16 that are kept for reuse (at most
 * pending_max tasks' worth) until the same 100 ms of idleness. Keys are hashed with a per-executor secret
 * SipHash key, so hostile keys cannot degrade lookups.
 *
 * Costs: a post takes the lock of its key's shard once (posts to keys of
 * different shards do not contend), takes its place in the executor-wide
 * pending count from places its shard holds in reserve (one atomic
 * operation on the shared count per 32 posts of a shard, while the count
 * is more than 32 per shard below pending_max; one per post nearer) and,
 * in the steady state, allocates nothing: its task is 32 bytes in its key's queue, and the
 * key's state and any block it needs are recycled ones. It allocates when
 * the key's state is new (a key longer than 32 bytes becoming active, or
 * more keys active at once than ever before) or its queue needs more
 * blocks than were ever in use. A submit allocates one more thing, its
 * future. A worker takes a shard's lock twice per turn. Idle workers are
 * woken only when no worker is already polling for work.
 */
#ifndef ORDO_KEYED_H
#define ORDO_KEYED_H

#include "ordo/common.h"
#include "ordo/future.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ordo_keyed_s ordo_keyed_t;

/* Defaults for the options, used when an option is 0. */
#define ORDO_KEYED_WORKERS_DEFAULT 4 /* a small pool; tasks are assumed short */
#define ORDO_KEYED_WORKERS_MAX 1024  /* beyond this threads cost more than they give */
/* A pending post costs 32 bytes, a submit about 180 with its future; 64Ki
 * of them is at most ~12 MiB. */
#define ORDO_KEYED_PENDING_MAX_DEFAULT 65536
/* One key may hold up to this many; enough to batch, small enough that one
 * hot key cannot take the whole executor's room. */
#define ORDO_KEYED_KEY_PENDING_MAX_DEFAULT 4096
/* Keys are names, not payloads; a longer key is an argument error. */
#define ORDO_KEYED_KEY_LEN_MAX_DEFAULT 1024

typedef struct ordo_keyed_options_s {
    unsigned workers;       /* worker threads, 1..ORDO_KEYED_WORKERS_MAX */
    size_t pending_max;     /* pending tasks in the executor, >= 1 */
    size_t key_pending_max; /* pending tasks of one key, >= 1 */
    size_t key_len_max;     /* longest accepted key, in bytes */
} ordo_keyed_options_t;

/* The work of one task. Runs on a worker thread with no executor lock held.
 * key[0..key_len) is the executor's copy, valid for the duration of the call
 * only. *result_out starts as NULL; what the handler stores there becomes the
 * future's result (the executor never reads or frees it). Return 0 for
 * success; any other value completes the future with ORDO_EHANDLER (the
 * result is still delivered). The handler may submit to this executor (see
 * the note on bounds) but must not wait on a future of this executor that
 * could need this worker, nor call stop or destroy. */
typedef int (*ordo_keyed_fn)(void *arg, const void *key, size_t key_len, void **result_out);

/* Called instead of the handler for a fire-and-forget task (ordo_keyed_post)
 * that a cancelling stop removed before it ran, so the owner can free arg.
 * Runs on a worker thread; key is valid for the duration of the call only. */
typedef void (*ordo_keyed_cancel_fn)(void *arg, const void *key, size_t key_len);

/* Stop modes. */
enum {
    ORDO_KEYED_DRAIN = 0,  /* run every accepted task, then stop */
    ORDO_KEYED_CANCEL = 1, /* let running tasks finish, cancel the rest */
};

/* A snapshot of the executor's counters; exact at the moment it was taken. */
typedef struct ordo_keyed_stats_s {
    size_t pending;           /* accepted, not yet finished or cancelled */
    size_t keys_active;       /* keys holding state (having pending tasks) */
    size_t producers_waiting; /* submits blocked on a bound right now */
    uint64_t post_failures;   /* fire-and-forget handlers that returned non-zero */
    int stopping;             /* 1 once a stop has begun (submits fail), else 0 */
    int cancelling;           /* 1 once a cancelling stop has begun, else 0 */
} ordo_keyed_stats_t;

/* ordo_keyed_create() -- start an executor and its worker threads.
 * opts may be NULL (all defaults); a 0 field takes its default.
 * On success *out is the executor, owned by the caller, who must eventually
 * call ordo_keyed_destroy().
 * Returns ORDO_OK, ORDO_EINVAL (out NULL, or an option out of range),
 * ORDO_ENOMEM, or ORDO_ESYS (a thread could not be started; none is left
 * running). */
int ordo_keyed_create(const ordo_keyed_options_t *opts, ordo_keyed_t **out);

/* ordo_keyed_submit() -- queue fn(arg, key) behind the pending tasks of key
 * and return a future for its outcome in *future_out. The caller owns one
 * reference to the future and must drop it with ordo_future_release(). The
 * future completes with:
 *   ORDO_OK        fn returned 0; result is what fn stored;
 *   ORDO_EHANDLER  fn returned non-zero; result is what fn stored;
 *   ORDO_ECANCELED a cancelling stop removed the task before it ran (fn is
 *                  never called; result NULL). The owner of arg frees it
 *                  from the future's callback or after waiting.
 * arg is passed through untouched; the executor never frees it.
 * Returns ORDO_OK (accepted: the future will complete exactly once), or,
 * with nothing accepted and *future_out untouched:
 *   ORDO_EINVAL    ex, fn or future_out NULL; key NULL with key_len > 0;
 *                  key_len above key_len_max;
 *   ORDO_EFULL     a bound was reached and timeout_ms was 0, or the call was
 *                  made on a worker thread of ex;
 *   ORDO_ETIMEDOUT a bound held for all of timeout_ms > 0;
 *   ORDO_ESTOPPED  a stop has begun (also returned to submits blocked on a
 *                  bound when the stop begins);
 *   ORDO_ENOMEM, ORDO_ESYS. */
int ordo_keyed_submit(ordo_keyed_t *ex, const void *key, size_t key_len, ordo_keyed_fn fn,
                      void *arg, int64_t timeout_ms, ordo_future_t **future_out);

/* ordo_keyed_post() -- fire and forget: as ordo_keyed_submit() without a
 * future, so it costs no allocation of its own (see Costs above) and no
 * completion. fn's return value is only counted
 * (ordo_keyed_stats_t.post_failures). If a cancelling stop
 * removes the task before it runs, cancel_fn(arg, key, key_len) is called
 * instead (cancel_fn may be NULL when arg needs no freeing). Exactly one of
 * fn and cancel_fn is called for every accepted post.
 * Returns as ordo_keyed_submit() (ORDO_EINVAL also for a NULL fn). */
int ordo_keyed_post(ordo_keyed_t *ex, const void *key, size_t key_len, ordo_keyed_fn fn,
                    ordo_keyed_cancel_fn cancel_fn, void *arg, int64_t timeout_ms);

/* ordo_keyed_stop() -- refuse new work and wait until every accepted task is
 * finished (ORDO_KEYED_DRAIN) or finished-if-running and cancelled otherwise
 * (ORDO_KEYED_CANCEL), then join the workers. Submits blocked on a bound are
 * woken with ORDO_ESTOPPED. Drain runs tasks that handlers and callbacks
 * queued before the stop began; their submits during the stop fail with
 * ORDO_ESTOPPED.
 * May be called more than once and from several threads: a CANCEL while a
 * DRAIN is in progress turns the rest of the drain into a cancel; every call
 * returns once the workers are joined. After a stop ex answers only
 * ordo_keyed_stats() and ordo_keyed_destroy() usefully.
 * Returns ORDO_OK, ORDO_EINVAL (ex NULL, unknown mode), or ORDO_EBUSY when
 * called on a worker thread of ex (nothing is changed). */
int ordo_keyed_stop(ordo_keyed_t *ex, int mode);

/* ordo_keyed_stats() -- fill *out (not NULL) with a snapshot of ex's
 * counters. Valid until ordo_keyed_destroy(), stopped or not. */
void ordo_keyed_stats(ordo_keyed_t *ex, ordo_keyed_stats_t *out);

/* ordo_keyed_destroy() -- stop (draining, if no stop was made) and free ex.
 * ex must not be used afterwards, and no other thread may be using it.
 * Must not be called on a worker thread of ex (it aborts). NULL is a no-op.
 * Futures already returned stay valid until their holders release them. */
void ordo_keyed_destroy(ordo_keyed_t *ex);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_KEYED_H */
