/*
 * career.c -- the leader career (ordo_career_run) and held locks
 * (ordo_lock_holder_*), both a holding kept alive by a keeper (keeper.h).
 *
 * Held locks: ordo_lock_holder_new() acquires and starts the keeper;
 * ordo_lock_holder_release() stops it and releases; ordo_lock_holder_free()
 * releases a lock still held, then frees.
 *
 * Career: campaign (ELECT.CAMPAIGN ... WAIT HANDOVER, in slices of
 * ORDO_CAREER_CAMPAIGN_SLICE_MS so a stop is seen), inaugurate with the
 * term and the hand-over value, then call execute(term) again and again
 * while the keeper says the term is valid. Invariant: execute is never
 * called once the local deadline (send time of the last accepted
 * keepalive + ttl) has passed or the server refused a keepalive, so a
 * deposed leader stops before the server can seat the next one (up to
 * clock-rate differences between the two machines). Handing over is
 * ELECT.RESIGN with the value hand_over() returns.
 */
#include "client_int.h"
#include "keeper.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- career ----------------------------------------------------------------- */

typedef struct term_ref {
    const char *name;
    int64_t term;
} term_ref_t;

static int renew_term(ordo_client_t *c, void *arg)
{
    assert(arg != NULL);
    term_ref_t *t = arg;
    int64_t left;
    return ordo_elect_keepalive(c, t->name, t->term, &left);
}

static void pause_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

int ordo_career_run(const ordo_career_opts_t *o, const atomic_bool *stop)
{
    if (o == NULL || o->election == NULL || o->execute == NULL)
        return ORDO_EINVAL;
    int64_t ttl = o->ttl_ms > 0 ? o->ttl_ms : ORDO_CAREER_TTL_MS_DEFAULT;
    ordo_client_opts_t co = client_sliced(o->conn);
    ordo_client_t *c;
    if (ordo_client_new(&c, &co) != ORDO_OK)
        return ORDO_ENOMEM;
    int rc = ORDO_OK;
    while (!client_stopped(stop)) {
        int64_t term;
        char *ho;
        size_t ho_len;
        int handed;
        int64_t sent = client_now_ms();
        rc = ordo_elect_campaign(c, o->election, o->value ? o->value : "", o->value ? o->value_len : 0, ttl,
                                 ORDO_CAREER_CAMPAIGN_SLICE_MS, &term, &ho, &ho_len, &handed);
        if (rc == ORDO_ETIMEDOUT)
            continue;
        if (rc == ORDO_EAUTH || rc == ORDO_ETLS || rc == ORDO_EINVAL || rc == ORDO_ENOMEM || rc == ORDO_ESERVER)
            break;
        if (rc != ORDO_OK) {
            pause_ms(ORDO_CAREER_RETRY_MS);
            continue;
        }
        term_ref_t ref = { o->election, term };
        keeper_t k;
        if ((rc = keeper_start(&k, &o->conn, ttl, sent + ttl, renew_term, &ref)) != ORDO_OK) {
            free(ho);
            (void)ordo_elect_resign(c, o->election, term, NULL, 0);
            break;
        }
        int go = o->inaugurate ? o->inaugurate(o->arg, term, ho, ho_len, handed) == 0 : 1;
        free(ho);
        int done = !go;
        while (go && !client_stopped(stop) && keeper_valid(&k)) {
            if (o->execute(o->arg, term) != 0) {
                done = 1;
                break;
            }
        }
        int lost = !keeper_valid(&k);
        keeper_stop(&k);
        if (lost) { /* the term is gone: campaign again */
            if (o->lost)
                o->lost(o->arg, term);
            continue;
        }
        size_t vlen = 0;
        char *v = go && o->hand_over ? o->hand_over(o->arg, term, &vlen) : NULL;
        rc = ordo_elect_resign(c, o->election, term, v, vlen);
        free(v);
        if (rc == ORDO_ESTALE)
            rc = ORDO_OK; /* it had just expired: nothing to hand over to */
        if (done || client_stopped(stop))
            break;
    }
    ordo_client_free(c);
    return rc == ORDO_ETIMEDOUT || rc == ORDO_ECONN ? ORDO_OK : rc;
}

/* ---- held locks ------------------------------------------------------------- */

/* A holder is holding from ordo_lock_holder_new() until
 * ordo_lock_holder_release() (or free); `released` says the keeper is
 * stopped and the lock given back, so nothing may touch k after it. */
struct ordo_lock_holder {
    keeper_t k;
    ordo_client_t *c;
    char *name;
    int64_t token, ttl_ms;
    int released;
};

static int renew_lock(ordo_client_t *c, void *arg)
{
    assert(arg != NULL);
    ordo_lock_holder_t *h = arg;
    return ordo_lock_extend(c, h->name, h->token, h->ttl_ms);
}

int ordo_lock_holder_new(ordo_lock_holder_t **out, const ordo_client_opts_t *conn, const char *name,
                         int64_t ttl_ms, int64_t wait_ms)
{
    assert(out != NULL);
    *out = NULL;
    if (name == NULL || ttl_ms <= 0 || wait_ms < 0)
        return ORDO_EINVAL;
    ordo_lock_holder_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return ORDO_ENOMEM;
    int rc = ORDO_ENOMEM;
    h->name = strdup(name);
    h->ttl_ms = ttl_ms;
    if (h->name == NULL || (rc = ordo_client_new(&h->c, conn)) != ORDO_OK)
        goto fail;
    int64_t sent = client_now_ms();
    if ((rc = ordo_lock_acquire(h->c, name, ttl_ms, wait_ms, 0, &h->token)) != ORDO_OK)
        goto fail;
    if ((rc = keeper_start(&h->k, conn ? conn : &(ordo_client_opts_t){ 0 }, ttl_ms, sent + ttl_ms, renew_lock, h)) !=
        ORDO_OK) {
        (void)ordo_lock_release(h->c, name, h->token);
        goto fail;
    }
    *out = h;
    return ORDO_OK;
fail:
    ordo_client_free(h->c);
    free(h->name);
    free(h);
    return rc;
}

int64_t ordo_lock_holder_token(const ordo_lock_holder_t *h)
{
    assert(h != NULL);
    return h->token;
}

int ordo_lock_holder_valid(ordo_lock_holder_t *h)
{
    assert(h != NULL);
    return !h->released && keeper_valid(&h->k);
}

int ordo_lock_holder_release(ordo_lock_holder_t *h)
{
    assert(h != NULL);
    if (h->released)
        return ORDO_ESTOPPED;
    int valid = keeper_valid(&h->k);
    keeper_stop(&h->k);
    h->released = 1;
    int rc = ordo_lock_release(h->c, h->name, h->token);
    if (rc == ORDO_OK && !valid)
        rc = ORDO_ESTALE; /* released, but it had lapsed locally: work was at risk */
    return rc;
}

void ordo_lock_holder_free(ordo_lock_holder_t *h)
{
    if (h == NULL)
        return;
    if (!h->released)
        (void)ordo_lock_holder_release(h);
    ordo_client_free(h->c);
    free(h->name);
    free(h);
}
