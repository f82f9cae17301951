/*
 * future.c -- futures: complete once, wait, timed wait, callback, release.
 *
 * The fast paths take no lock: ordo_future_done() and a wait on a completed
 * future read one atomic. The mutex is taken to register a callback, to
 * block, and to complete; completion signals the condition variable only
 * when someone is blocked on it, so a future nobody waits on costs no
 * system call.
 */
#include <stdlib.h>

#include "future_impl.h"
#include "sync.h"

int ordo__future_init(ordo_future_t *f, void (*free_fn)(ordo_future_t *f))
{
    atomic_init(&f->done, 0);
    atomic_init(&f->refs, 2);
    f->status = ORDO_OK;
    f->result = NULL;
    f->cb = NULL;
    f->cb_arg = NULL;
    f->waiters = 0;
    f->free_fn = free_fn;
    if (pthread_mutex_init(&f->mu, NULL) != 0)
        return ORDO_ESYS;
    if (ordo_cond_init(&f->cond) != 0) {
        pthread_mutex_destroy(&f->mu);
        return ORDO_ESYS;
    }
    return ORDO_OK;
}

static void future_unref(ordo_future_t *f)
{
    if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1) {
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->mu);
        f->free_fn(f);
    }
}

void ordo__future_complete(ordo_future_t *f, int status, void *result)
{
    pthread_mutex_lock(&f->mu);
    f->status = status;
    f->result = result;
    atomic_store_explicit(&f->done, 1, memory_order_release);
    ordo_future_cb cb = f->cb;
    void *arg = f->cb_arg;
    if (f->waiters > 0)
        pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    if (cb != NULL)
        cb(f, status, result, arg);
    future_unref(f);
}

int ordo_future_done(const ordo_future_t *f)
{
    return atomic_load_explicit(&((ordo_future_t *)f)->done, memory_order_acquire);
}

int ordo_future_timedwait(ordo_future_t *f, int64_t timeout_ms, void **result_out)
{
    if (!atomic_load_explicit(&f->done, memory_order_acquire)) {
        if (timeout_ms == 0)
            return ORDO_ETIMEDOUT;
        uint64_t deadline = ordo_deadline_ns(timeout_ms);
        pthread_mutex_lock(&f->mu);
        f->waiters++;
        while (!atomic_load_explicit(&f->done, memory_order_acquire)) {
            if (ordo_cond_wait_until(&f->cond, &f->mu, deadline) != 0 &&
                !atomic_load_explicit(&f->done, memory_order_acquire)) {
                f->waiters--;
                pthread_mutex_unlock(&f->mu);
                return ORDO_ETIMEDOUT;
            }
        }
        f->waiters--;
        pthread_mutex_unlock(&f->mu);
    }
    if (result_out != NULL)
        *result_out = f->result;
    return f->status;
}

int ordo_future_wait(ordo_future_t *f, void **result_out)
{
    return ordo_future_timedwait(f, ORDO_WAIT_FOREVER, result_out);
}

int ordo_future_then(ordo_future_t *f, ordo_future_cb cb, void *arg)
{
    pthread_mutex_lock(&f->mu);
    if (f->cb != NULL) {
        pthread_mutex_unlock(&f->mu);
        return ORDO_EBUSY;
    }
    if (!atomic_load_explicit(&f->done, memory_order_acquire)) {
        f->cb = cb;
        f->cb_arg = arg;
        pthread_mutex_unlock(&f->mu);
        return ORDO_OK;
    }
    /* Already completed: mark the slot taken, run here, outside the lock. */
    f->cb = cb;
    pthread_mutex_unlock(&f->mu);
    cb(f, f->status, f->result, arg);
    return ORDO_OK;
}

void ordo_future_release(ordo_future_t *f)
{
    future_unref(f);
}
