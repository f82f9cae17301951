/*
 * dedup.c -- the thread-safe, blocking dedup automaton: the core state
 * machine (dedup_core.c) behind one mutex, fed by the monotonic clock.
 *
 * Waiting. A waiter parks on a condition variable in its own stack frame and
 * hands a pointer to it to the core as the arrival's udata. Whoever promotes
 * it -- the holder's finish, or an expire -- sets its outcome and signals
 * exactly that variable, under the mutex, so there is no thundering herd and
 * the frame cannot go away before the signal (the waiter needs the mutex to
 * return). Nobody runs a timer: a waiter sleeps until its own deadline and
 * then runs the core's expire itself, which also releases any other waiter
 * that is overdue.
 *
 * Time. The core gets milliseconds since the wrapper was created, read
 * under the mutex, so they never go backwards. A waiter's deadline in ns is
 * exactly its core deadline in ms, so when the timed wait ends the core
 * agrees the waiter is overdue.
 *
 * Invariant: a waiter_t is reachable from the core only while its thread is
 * inside ordo_dedup_arrive() with outcome WAITING.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

#include "ordo/dedup.h"
#include "sync.h"

#define WAITING (-1)

typedef struct {
    pthread_cond_t cond;
    int outcome; /* WAITING, then ORDO_DEDUP_PROMOTED or _TAKEOVER */
} waiter_t;

struct ordo_dedup_s {
    pthread_mutex_t mu;
    ordo_dedup_core_t *core;
    uint64_t epoch_ns; /* the core's time 0 */
};

int ordo_dedup_create(int64_t safety_timeout_ms, ordo_dedup_t **dedup_out)
{
    if (safety_timeout_ms < 0 || dedup_out == NULL)
        return ORDO_EINVAL;
    ordo_dedup_t *d = calloc(1, sizeof *d);
    if (d == NULL)
        return ORDO_ENOMEM;
    int rc = ordo_dedup_core_create(safety_timeout_ms, &d->core);
    if (rc != ORDO_OK)
        goto fail_core;
    rc = ORDO_ESYS;
    if (pthread_mutex_init(&d->mu, NULL) != 0)
        goto fail_mutex;
    d->epoch_ns = ordo_now_ns();
    *dedup_out = d;
    return ORDO_OK;

fail_mutex:
    ordo_dedup_core_destroy(d->core);
fail_core:
    free(d);
    return rc;
}

void ordo_dedup_destroy(ordo_dedup_t *d)
{
    if (d == NULL)
        return;
    pthread_mutex_destroy(&d->mu);
    ordo_dedup_core_destroy(d->core);
    free(d);
}

/* Milliseconds since create; mutex held. */
static int64_t now_ms_locked(const ordo_dedup_t *d)
{
    return (int64_t)((ordo_now_ns() - d->epoch_ns) / 1000000u);
}

static void wake(void *udata, int outcome)
{
    waiter_t *w = udata;
    assert(w != NULL && w->outcome == WAITING);
    w->outcome = outcome;
    pthread_cond_signal(&w->cond);
}

static void on_expire(const void *key, size_t key_len, ordo_dedup_promotion_t promoted,
                      ordo_dedup_ticket_t stale, void *arg)
{
    (void)key;
    (void)key_len;
    (void)stale;
    (void)arg;
    wake(promoted.udata, ORDO_DEDUP_TAKEOVER);
}

/* Block until w is promoted; mutex held. Returns its outcome. */
static int wait_promoted_locked(ordo_dedup_t *d, waiter_t *w, int64_t deadline_ms)
{
    uint64_t deadline_ns = d->epoch_ns + (uint64_t)deadline_ms * 1000000u;
    while (w->outcome == WAITING) {
        if (ordo_now_ns() >= deadline_ns) {
            ordo_dedup_core_expire(d->core, now_ms_locked(d), on_expire, NULL);
            assert(w->outcome != WAITING);
            break;
        }
        ordo_cond_wait_until(&w->cond, &d->mu, deadline_ns);
    }
    return w->outcome;
}

int ordo_dedup_arrive(ordo_dedup_t *d, const void *key, size_t key_len,
                      ordo_dedup_ticket_t *ticket_out)
{
    if (d == NULL || ticket_out == NULL)
        return ORDO_EINVAL;
    waiter_t w = {.outcome = WAITING};
    ordo_dedup_arrival_t arrival;
    pthread_mutex_lock(&d->mu);
    int rc = ordo_dedup_core_arrive(d->core, key, key_len, now_ms_locked(d), &w, &arrival);
    if (rc == ORDO_DEDUP_WAITER) {
        if (ordo_cond_init(&w.cond) == 0) {
            rc = wait_promoted_locked(d, &w, arrival.deadline_ms);
            pthread_cond_destroy(&w.cond);
        } else {
            ordo_dedup_core_finish(d->core, key, key_len, arrival.ticket, now_ms_locked(d), NULL);
            rc = ORDO_ESYS;
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (rc >= 0)
        *ticket_out = arrival.ticket;
    return rc;
}

int ordo_dedup_finish(ordo_dedup_t *d, const void *key, size_t key_len,
                      ordo_dedup_ticket_t ticket)
{
    if (d == NULL)
        return ORDO_EINVAL;
    ordo_dedup_promotion_t p;
    pthread_mutex_lock(&d->mu);
    int rc = ordo_dedup_core_finish(d->core, key, key_len, ticket, now_ms_locked(d), &p);
    if (rc == ORDO_DEDUP_PROMOTED)
        wake(p.udata, ORDO_DEDUP_PROMOTED);
    pthread_mutex_unlock(&d->mu);
    assert(rc != ORDO_DEDUP_WITHDRAWN); /* waiters never call finish while waiting */
    return rc;
}

ordo_dedup_state_t ordo_dedup_state(ordo_dedup_t *d, const void *key, size_t key_len)
{
    pthread_mutex_lock(&d->mu);
    ordo_dedup_state_t s = ordo_dedup_core_state(d->core, key, key_len);
    pthread_mutex_unlock(&d->mu);
    return s;
}

size_t ordo_dedup_active(ordo_dedup_t *d)
{
    pthread_mutex_lock(&d->mu);
    size_t n = ordo_dedup_core_active(d->core);
    pthread_mutex_unlock(&d->mu);
    return n;
}
