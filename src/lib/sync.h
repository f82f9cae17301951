/*
 * sync.h -- small helpers over pthreads and the monotonic clock, shared by
 * libordo's threaded primitives.
 *
 * All timed waits in libordo measure against CLOCK_MONOTONIC, so a change of
 * the wall clock never shortens or stretches a timeout. Condition variables
 * must therefore be created with ordo_cond_init(), which binds them to that
 * clock; ordo_cond_wait_until() waits on such a variable until an absolute
 * monotonic deadline.
 */
#ifndef ORDO_SYNC_H
#define ORDO_SYNC_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* ordo_now_ns() -- nanoseconds on CLOCK_MONOTONIC. */
static inline uint64_t ordo_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ordo_deadline_ns() -- the absolute monotonic deadline timeout_ms from now;
 * UINT64_MAX for ORDO_WAIT_FOREVER (any negative timeout). */
static inline uint64_t ordo_deadline_ns(int64_t timeout_ms)
{
    if (timeout_ms < 0)
        return UINT64_MAX;
    return ordo_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

/* ordo_cond_init() -- a condition variable on CLOCK_MONOTONIC.
 * Returns 0 or an errno value. */
int ordo_cond_init(pthread_cond_t *cond);

/* ordo_cond_wait_until() -- wait on cond (mutex held) until signalled or
 * until deadline_ns (UINT64_MAX: no deadline). Returns 0 when woken (perhaps
 * spuriously: callers loop on their predicate) or ETIMEDOUT. */
int ordo_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline_ns);

#endif /* ORDO_SYNC_H */
