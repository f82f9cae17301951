/*
 * ordo/future.h -- the completion handle that ordo's queues return.
 *
 * A future is completed exactly once, by the thread that ran (or cancelled)
 * the work, with a status and a result pointer:
 *   status ORDO_OK         the handler returned 0; result is what it set;
 *   status ORDO_EHANDLER   the handler returned non-zero; result is what it set;
 *   status ORDO_ECANCELED  the work was accepted and then cancelled by a stop
 *                          that did not drain; result is NULL.
 *
 * Ownership: the call that creates a future (ordo_suq_submit(),
 * ordo_keyed_submit()) hands the caller one reference. The caller must drop
 * it with ordo_future_release() exactly once, whether or not it waited. The
 * queue keeps its own reference until it has completed the future and run
 * its callback, so releasing early is always safe: the work still runs.
 *
 * Thread safety: every function may be called from any thread. A future may
 * be waited on by several threads at once.
 */
#ifndef ORDO_FUTURE_H
#define ORDO_FUTURE_H

#include "ordo/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ordo_future_s ordo_future_t;

/* Called once when the future completes. Runs on the completing thread (a
 * queue's worker), or at once on the caller's thread if the future had
 * already completed when ordo_future_then() was called. The future pointer
 * is valid for the duration of the callback only, unless the caller still
 * holds its own reference. The callback may submit to other queues (that is
 * how stages are chained), but must not wait on a future that the same
 * worker would have to complete. */
typedef void (*ordo_future_cb)(ordo_future_t *f, int status, void *result, void *arg);

/* ordo_future_wait() -- block until the future completes.
 * Returns its status; *result_out (may be NULL) receives its result. */
int ordo_future_wait(ordo_future_t *f, void **result_out);

/* ordo_future_timedwait() -- as ordo_future_wait() but for at most
 * timeout_ms milliseconds (ORDO_WAIT_FOREVER: no limit; 0: just poll).
 * Returns ORDO_ETIMEDOUT if it had not completed by then (the work goes on;
 * wait again or release), else its status. */
int ordo_future_timedwait(ordo_future_t *f, int64_t timeout_ms, void **result_out);

/* ordo_future_done() -- 1 if the future has completed, else 0. Never blocks. */
int ordo_future_done(const ordo_future_t *f);

/* ordo_future_then() -- register the completion callback (at most one per
 * future). Returns ORDO_OK, or ORDO_EBUSY if a callback was registered
 * already. */
int ordo_future_then(ordo_future_t *f, ordo_future_cb cb, void *arg);

/* ordo_future_release() -- drop the caller's reference. The future must not
 * be touched afterwards by this caller. */
void ordo_future_release(ordo_future_t *f);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_FUTURE_H */
