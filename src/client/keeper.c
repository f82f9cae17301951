/*
 * keeper.c -- the renewal thread of keeper.h. Invariant: valid_until_ms
 * only moves forward, and only to (send time of a renewal the server
 * accepted) + ttl; lost, once set, stays set.
 */
#include "keeper.h"

#include "client_int.h"

#include <assert.h>

static void *keeper_main(void *arg)
{
    keeper_t *k = arg;
    int64_t every = k->ttl_ms / 3 > 0 ? k->ttl_ms / 3 : 1;
    pthread_mutex_lock(&k->mu);
    int64_t next = client_now_ms() + every;
    while (!atomic_load(&k->stop) && !k->lost) {
        if (client_now_ms() < next) {
            client_cond_wait_until(&k->cv, &k->mu, next);
            continue;
        }
        pthread_mutex_unlock(&k->mu);
        int64_t sent = client_now_ms();
        int rc = k->renew(k->c, k->arg);
        pthread_mutex_lock(&k->mu);
        if (rc == ORDO_OK) {
            if (sent + k->ttl_ms > k->valid_until_ms)
                k->valid_until_ms = sent + k->ttl_ms;
            next = sent + every;
        } else if (rc == ORDO_ESTALE || rc == ORDO_ENOTHOLDER || rc == ORDO_ENOTFOUND) {
            k->lost = 1;
        } else {
            next = client_now_ms() + (every / 4 > 0 ? every / 4 : 1); /* retry sooner */
        }
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

int keeper_start(keeper_t *k, const ordo_client_opts_t *conn, int64_t ttl_ms, int64_t valid_until_ms,
                 keeper_renew_fn renew, void *arg)
{
    assert(k != NULL && conn != NULL && renew != NULL && ttl_ms > 0);
    *k = (keeper_t){ .ttl_ms = ttl_ms, .valid_until_ms = valid_until_ms, .renew = renew, .arg = arg };
    ordo_client_opts_t co = *conn;
    /* A renewal must give up well before the deadline it protects. */
    if (co.call_timeout_ms == 0 || co.call_timeout_ms > ttl_ms / 3)
        co.call_timeout_ms = (int)(ttl_ms / 3 > 0 ? ttl_ms / 3 : 1);
    if (co.reconnect_timeout_ms == 0 || co.reconnect_timeout_ms > ttl_ms / 3)
        co.reconnect_timeout_ms = (int)(ttl_ms / 3 > 0 ? ttl_ms / 3 : 1);
    int rc = ordo_client_new(&k->c, &co);
    if (rc != ORDO_OK)
        return rc;
    /* A holding won by a command that waited server-side (a queued
     * campaign or lock waiter) began at an unknown moment after
     * valid_until_ms - ttl was sent; renew once now, so the deadline counts
     * from a send that surely followed the grant. */
    int64_t sent = client_now_ms();
    rc = renew(k->c, arg);
    if (rc == ORDO_OK && sent + ttl_ms > k->valid_until_ms)
        k->valid_until_ms = sent + ttl_ms;
    else if (rc == ORDO_ESTALE || rc == ORDO_ENOTHOLDER || rc == ORDO_ENOTFOUND)
        k->lost = 1;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    if (pthread_create(&k->th, NULL, keeper_main, k) != 0) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        ordo_client_free(k->c);
        return ORDO_ESYS;
    }
    return ORDO_OK;
}

int keeper_valid(keeper_t *k)
{
    assert(k != NULL && k->c != NULL);
    pthread_mutex_lock(&k->mu);
    int ok = !k->lost && client_now_ms() < k->valid_until_ms;
    pthread_mutex_unlock(&k->mu);
    return ok;
}

void keeper_stop(keeper_t *k)
{
    assert(k != NULL && k->c != NULL);
    pthread_mutex_lock(&k->mu);
    atomic_store(&k->stop, true);
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->th, NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    ordo_client_free(k->c);
}
