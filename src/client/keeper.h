/*
 * keeper.h -- a thread that keeps something alive (a leadership term, a
 * lock) by renewing it every ttl/3 on its own connection, and the local
 * deadline that says until when the holder may still act.
 *
 * The deadline is conservative: it is the time a renewal was *sent* plus
 * the TTL, never the time its reply came, so the server's own deadline
 * (receipt + TTL) is always later. A renewal the server refuses marks the
 * holding lost at once; one that cannot reach the server leaves the
 * deadline where it was, so the holding lapses locally no later than on
 * the server. keeper_valid() is what a holder checks before each act.
 */
#ifndef ORDO_CLIENT_KEEPER_H
#define ORDO_CLIENT_KEEPER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ordo/client.h"

/* renew: ORDO_OK (renewed), ORDO_ESTALE or ORDO_ENOTHOLDER or
 * ORDO_ENOTFOUND (lost), anything else (transient: try again). */
typedef int (*keeper_renew_fn)(ordo_client_t *c, void *arg);

typedef struct keeper {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool stop;         /* keeper_stop(): end the thread */
    int lost;                 /* under mu */
    int64_t valid_until_ms;   /* CLOCK_MONOTONIC */
    int64_t ttl_ms;
    ordo_client_t *c;
    keeper_renew_fn renew;
    void *arg;
} keeper_t;

/* keeper_start() -- valid_until_ms: the deadline the acquisition gives
 * (its send time + ttl). Renews once before it returns (see keeper.c),
 * so keeper_valid() is meaningful at once. ORDO_OK, ORDO_ENOMEM,
 * ORDO_ESYS. */
int keeper_start(keeper_t *k, const ordo_client_opts_t *conn, int64_t ttl_ms, int64_t valid_until_ms,
                 keeper_renew_fn renew, void *arg);
/* 1 while not lost and before the deadline. */
int keeper_valid(keeper_t *k);
void keeper_stop(keeper_t *k);

#endif
