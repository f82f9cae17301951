/*
 * future_impl.h -- the inside of ordo_future_t, for the queues that create
 * and complete futures. Not installed.
 *
 * A future starts with two references: the caller's and the queue's. The
 * queue drops its own in ordo__future_complete(), after the waiters are woken
 * and the callback has run; the caller drops its own with
 * ordo_future_release(). The last release calls free_fn, so a queue may embed
 * the future in a larger block (its work item) and free the whole block.
 *
 * Invariant: state goes PENDING -> DONE once; status and result are written
 * before DONE is published (release) and read after it is observed (acquire).
 */
#ifndef ORDO_FUTURE_IMPL_H
#define ORDO_FUTURE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "ordo/future.h"

struct ordo_future_s {
    atomic_int done;           /* 0 pending, 1 completed */
    atomic_int refs;           /* references held: caller + queue */
    int status;                /* valid once done */
    void *result;              /* valid once done */
    ordo_future_cb cb;         /* guarded by mu until done */
    void *cb_arg;
    int waiters;               /* threads blocked in wait; guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    void (*free_fn)(ordo_future_t *f); /* frees the block holding f */
};

/* ordo__future_init() -- prepare an embedded or allocated future with two
 * references. free_fn releases the memory holding it (must not be NULL).
 * Returns ORDO_OK or ORDO_ESYS. */
int ordo__future_init(ordo_future_t *f, void (*free_fn)(ordo_future_t *f));

/* ordo__future_complete() -- publish status and result, wake waiters, run the
 * callback on this thread, then drop the queue's reference. Call once. */
void ordo__future_complete(ordo_future_t *f, int status, void *result);

#endif /* ORDO_FUTURE_IMPL_H */
