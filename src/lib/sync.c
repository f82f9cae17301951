/*
 * sync.c -- monotonic condition variables; see sync.h.
 */
#include "sync.h"

#include <errno.h>

int ordo_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

int ordo_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline_ns)
{
    if (deadline_ns == UINT64_MAX)
        return pthread_cond_wait(cond, mutex);
    if (ordo_now_ns() >= deadline_ns)
        return ETIMEDOUT;
    struct timespec ts = {
        .tv_sec = (time_t)(deadline_ns / 1000000000u),
        .tv_nsec = (long)(deadline_ns % 1000000000u),
    };
    return pthread_cond_timedwait(cond, mutex, &ts);
}
