/*
 * consumer.c -- the consumer runner (ordo_consumer_*, ordo/client.h).
 *
 * Threads: `concurrency` workers, each owning one connection, and one
 * keeper owning another. A worker's cycle: Q.PULL BLOCK (one message),
 * register the delivery in the in-flight table, run the handler,
 * unregister, Q.ACK with the result or Q.NACK with a delay. An ack (or
 * the exactly-once EXEC holding it) is written together with the
 * worker's next Q.PULL (client_pull_t): one round trip per message
 * instead of two, and the server syncs the ack's record and the next
 * delivery's in one batch; the ack comes first on the connection, so the
 * pull may already get the key's next message. A message a carried pull
 * got is handled next even when the EXEC was refused and its message is
 * nacked: that message still holds its key, so the two never share one.
 * The keeper wakes every lease_ms/3 and sends Q.EXTEND for each
 * registered delivery.
 *
 * Invariants: a slot of the in-flight table is owned by one worker and
 * is `busy` exactly while that worker's handler runs and its ack or nack
 * is being committed; the keeper only reads
 * slots under the lock and never blocks a worker for longer than a copy.
 * Acks and nacks carry the delivery's token, so a delivery that lost its
 * lease (the keeper was too late) cannot release the key's next message:
 * the server answers 0 and the runner counts it as neither acked nor
 * nacked. Stopping is a flag read before every pull (also before an ack
 * that would carry one): no message is pulled after it, and each
 * in-flight one, including one a carried pull got, is finished (acked or
 * nacked).
 * With opts.txn_handler the ack is the last command of a transaction
 * holding the handler's writes (client_txn_ack, txn.c): a stale token
 * aborts it all and counts as stale.
 *
 * Commit retries: an ack, nack or exactly-once EXEC that meets a broken
 * connection or a leader change is sent again (commit()) until it gets an
 * answer, the message's lease would have run out, or the runner stops.
 * The delivery token makes a repeat harmless: if the first attempt
 * applied, the repeat is refused as stale and changes nothing. So a
 * server killed under the runner costs the in-flight message about one
 * reconnect, not a whole lease. A carrying ack or EXEC whose reply never
 * came is repeated alone; the pull that went with it is lost with the
 * connection, as a lone pull would be.
 */
#include "client_int.h"

#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Pause after a failed pull (server unreachable past the client's own
 * reconnect budget) before trying again. */
#define CONSUMER_RETRY_PAUSE_MS 100
/* Longest pause between two commit attempts: the server's return is
 * noticed within it (plus a reconnect). */
#define CONSUMER_COMMIT_RETRY_MAX_MS 200

typedef struct slot {
    int busy;
    int64_t id, token;
} slot_t;

typedef struct worker {
    struct ordo_consumer *owner;
    int index;
    pthread_t th;
} worker_t;

struct ordo_consumer {
    ordo_consumer_opts_t o;
    char *queue;
    char *host, *addrs, *password, *user;
    atomic_bool stopping;     /* ordo_consumer_stop(): pull no more */
    atomic_bool keeper_stop;  /* set once every worker has ended */
    atomic_uint_fast64_t acked, nacked, stale;

    pthread_mutex_t mu;
    pthread_cond_t keeper_cv;
    slot_t *slots;
    int keeper_started;
    pthread_t keeper;
    worker_t *workers;
    int started;
    int joined;               /* ordo_consumer_wait() has joined every thread */
};

static void pause_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* A commit outcome that says nothing about the message: the connection
 * broke, the call timed out, or the leader changed. */
static int unanswered(int rc)
{
    return rc == ORDO_ECONN || rc == ORDO_ETIMEDOUT || rc == ORDO_ENOTLEADER || rc == ORDO_EREADONLY;
}

enum { COMMIT_ACK, COMMIT_TXN, COMMIT_NACK };

/* commit() -- ack, exactly-once EXEC or nack message m, again and again
 * while unanswered() and before until_ms (and the runner is not
 * stopping). The first attempt of an ack or an EXEC carries pull (NULL:
 * none); a repeat goes alone. Returns the last outcome. */
static int commit(struct ordo_consumer *k, ordo_client_t *c, int what, const ordo_msg_t *m, ordo_txn_t *txn,
                  const char *result, size_t result_len, int64_t until_ms, client_pull_t *pull)
{
    int rc;
    for (int attempt = 0;; attempt++) {
        client_pull_t *carry = attempt == 0 ? pull : NULL;
        if (what == COMMIT_TXN) {
            rc = attempt == 0 ? client_txn_ack(c, txn, k->queue, m, result, result_len, carry)
                              : client_txn_retry(c, txn, k->queue, m);
        } else if (what == COMMIT_ACK) {
            rc = carry != NULL ? client_ack_pull(c, k->queue, m, result, result_len, result != NULL, carry)
                               : ordo_q_ack(c, k->queue, m->id, m->token, result, result_len, result != NULL);
        } else {
            rc = ordo_q_nack(c, k->queue, m->id, m->token, k->o.nack_delay_ms < 0 ? 0 : k->o.nack_delay_ms);
        }
        if (!unanswered(rc) || client_now_ms() >= until_ms || atomic_load(&k->stopping))
            return rc;
        int wait = CONSUMER_COMMIT_RETRY_MAX_MS;
        for (int i = 0; i < 4 - attempt && wait > 25; i++)
            wait /= 2; /* 25, 50, 100, then 200 ms */
        pause_ms(wait);
    }
}

/* run_one() -- handle m, then ack or nack it. An ack (plain or in the
 * exactly-once EXEC) made while the runner is not stopping carries the
 * worker's next pull: what that pull got is left in *next and *next_n
 * (NULL and 0 when it got nothing, failed, or was not sent). */
static void run_one(struct ordo_consumer *k, ordo_client_t *c, int index, const ordo_msg_t *m, ordo_msg_t **next,
                    size_t *next_n)
{
    assert(k != NULL && c != NULL && m != NULL && next != NULL && next_n != NULL);
    *next = NULL;
    *next_n = 0;
    assert(index >= 0 && index < k->o.concurrency);
    pthread_mutex_lock(&k->mu);
    assert(!k->slots[index].busy); /* a slot belongs to one worker */
    k->slots[index] = (slot_t){ .busy = 1, .id = m->id, .token = m->token };
    pthread_mutex_unlock(&k->mu);

    char *result = NULL;
    size_t result_len = 0;
    ordo_txn_t *txn = NULL;
    int hr;
    if (k->o.txn_handler) {
        hr = ordo_txn_new(&txn) == ORDO_OK ? k->o.txn_handler(k->o.arg, c, m, txn, &result, &result_len) : -1;
    } else {
        hr = k->o.handler(k->o.arg, m, &result, &result_len);
    }

    /* The slot stays busy while committing, so the keeper extends the
     * lease of a commit that is being retried. */
    int64_t until_ms = client_now_ms() + k->o.lease_ms;
    int rc = ORDO_OK;
    client_pull_t pull = { .queue = k->queue, .block_ms = k->o.pull_block_ms, .lease_ms = k->o.lease_ms,
                           .rc = ORDO_EINVAL };
    client_pull_t *carry = atomic_load(&k->stopping) ? NULL : &pull;
    if (hr == 0 && txn) {
        rc = commit(k, c, COMMIT_TXN, m, txn, result, result_len, until_ms, carry);
        /* Refused before applying (a guard of the handler's, a command
         * refused): nack, so the handler runs again on fresh reads. */
        if (rc != ORDO_OK && rc != ORDO_ESTALE && !unanswered(rc))
            hr = 1;
    } else if (hr == 0) {
        rc = commit(k, c, COMMIT_ACK, m, NULL, result, result_len, until_ms, carry);
    }
    if (hr == 0) {
        if (rc == ORDO_OK)
            atomic_fetch_add(&k->acked, 1);
        else if (rc == ORDO_ESTALE)
            atomic_fetch_add(&k->stale, 1);
    } else {
        /* Pause first: once nacked, the message would be ready for any
         * worker before a later pause stopped its key. A pause that fails
         * (the connection broke) still nacks: the lease must not be held. */
        if (hr > INT_MIN && hr <= INT_MIN + ORDO_HANDLER_PAUSE_MS_MAX)
            (void)ordo_q_pause(c, k->queue, m->key, m->key_len, (int64_t)hr - INT_MIN, NULL);
        rc = commit(k, c, COMMIT_NACK, m, NULL, NULL, 0, until_ms, NULL);
        if (rc == ORDO_OK)
            atomic_fetch_add(&k->nacked, 1);
    }
    pthread_mutex_lock(&k->mu);
    k->slots[index].busy = 0;
    pthread_mutex_unlock(&k->mu);
    if (pull.rc == ORDO_OK) {
        *next = pull.msgs;
        *next_n = pull.n;
    }
    /* ORDO_ESTALE: the lease was lost and the message is someone else's
     * now; ORDO_ECONN: the server will redeliver when the lease ends. */
    free(result);
    ordo_txn_free(txn);
}

/* own_client() -- a connection of the consumer's own, for one of its
 * threads: its options, host and password, connecting in slices. */
static ordo_client_t *own_client(struct ordo_consumer *k)
{
    ordo_client_opts_t co = k->o.conn;
    co.host = k->host;
    co.addrs = k->addrs;
    co.password = k->password;
    co.user = k->user;
    co = client_sliced(co);
    ordo_client_t *c;
    return ordo_client_new(&c, &co) == ORDO_OK ? c : NULL;
}

static void *worker_main(void *arg)
{
    assert(arg != NULL);
    worker_t *wk = arg;
    struct ordo_consumer *k = wk->owner;
    ordo_client_t *c = own_client(k);
    if (c == NULL)
        return NULL;
    ordo_msg_t *msgs = NULL; /* delivered to this worker, not yet handled */
    size_t n = 0;
    /* A message pulled is handled even if the runner stops meanwhile. */
    while (n > 0 || !atomic_load(&k->stopping)) {
        if (n == 0) {
            int rc = ordo_q_pull(c, k->queue, 1, k->o.pull_block_ms, k->o.lease_ms, &msgs, &n);
            if (rc != ORDO_OK) {
                if (rc == ORDO_EAUTH || rc == ORDO_ETLS)
                    break;
                pause_ms(CONSUMER_RETRY_PAUSE_MS);
            }
            continue;
        }
        assert(n == 1); /* every pull asks for one */
        ordo_msg_t *next;
        size_t next_n;
        run_one(k, c, wk->index, &msgs[0], &next, &next_n);
        ordo_msgs_free(msgs, n);
        msgs = next;
        n = next_n;
    }
    ordo_client_free(c);
    return NULL;
}

static void *keeper_main(void *arg)
{
    assert(arg != NULL);
    struct ordo_consumer *k = arg;
    ordo_client_t *c = own_client(k);
    if (c == NULL)
        return NULL;
    int64_t every_ms = k->o.lease_ms / 3 > 0 ? k->o.lease_ms / 3 : 1;
    int n = k->o.concurrency;
    slot_t *copy = calloc((size_t)n, sizeof *copy);
    pthread_mutex_lock(&k->mu);
    while (copy && !atomic_load(&k->keeper_stop)) {
        client_cond_wait_ms(&k->keeper_cv, &k->mu, every_ms);
        if (atomic_load(&k->keeper_stop))
            break;
        memcpy(copy, k->slots, (size_t)n * sizeof *copy);
        pthread_mutex_unlock(&k->mu);
        for (int i = 0; i < n; i++)
            if (copy[i].busy)
                (void)ordo_q_extend(c, k->queue, copy[i].id, copy[i].token, k->o.lease_ms);
        pthread_mutex_lock(&k->mu);
    }
    pthread_mutex_unlock(&k->mu);
    free(copy);
    ordo_client_free(c);
    return NULL;
}

static void consumer_free(struct ordo_consumer *k)
{
    free(k->workers);
    free(k->slots);
    free(k->queue);
    free(k->host);
    free(k->addrs);
    free(k->password);
    free(k->user);
    pthread_cond_destroy(&k->keeper_cv);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

int ordo_consumer_new(ordo_consumer_t **out, const ordo_consumer_opts_t *o)
{
    assert(out != NULL);
    *out = NULL;
    if (o == NULL || o->queue == NULL || (o->handler == NULL) == (o->txn_handler == NULL) || o->concurrency < 0 ||
        o->concurrency > ORDO_CONSUMER_CONCURRENCY_MAX)
        return ORDO_EINVAL;
    client_members_t check; /* the workers connect later: judge the addresses now */
    if (client_members_init(&check, o->conn.addrs, o->conn.host, o->conn.port) != ORDO_OK)
        return ORDO_EINVAL;
    struct ordo_consumer *k = calloc(1, sizeof *k);
    if (k == NULL)
        return ORDO_ENOMEM;
    k->o = *o;
    if (k->o.concurrency == 0)
        k->o.concurrency = 1;
    if (k->o.lease_ms == 0)
        k->o.lease_ms = ORDO_CONSUMER_LEASE_MS_DEFAULT;
    if (k->o.pull_block_ms == 0)
        k->o.pull_block_ms = ORDO_CONSUMER_PULL_BLOCK_MS_DEFAULT;
    if (k->o.nack_delay_ms == 0)
        k->o.nack_delay_ms = ORDO_CONSUMER_NACK_DELAY_MS_DEFAULT;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->keeper_cv, NULL);
    int rc = ORDO_ENOMEM;
    k->queue = strdup(o->queue);
    k->host = o->conn.host ? strdup(o->conn.host) : NULL;
    k->addrs = o->conn.addrs ? strdup(o->conn.addrs) : NULL;
    k->password = o->conn.password ? strdup(o->conn.password) : NULL;
    k->user = o->conn.user ? strdup(o->conn.user) : NULL;
    k->slots = calloc((size_t)k->o.concurrency, sizeof *k->slots);
    k->workers = calloc((size_t)k->o.concurrency, sizeof *k->workers);
    if (!k->queue || (o->conn.host && !k->host) || (o->conn.addrs && !k->addrs) || (o->conn.password && !k->password) ||
        (o->conn.user && !k->user) ||
        !k->slots || !k->workers)
        goto fail_alloc;
    rc = ORDO_ESYS;
    if (pthread_create(&k->keeper, NULL, keeper_main, k) != 0)
        goto fail_alloc;
    k->keeper_started = 1;
    for (int i = 0; i < k->o.concurrency; i++) {
        k->workers[i] = (worker_t){ .owner = k, .index = i };
        if (pthread_create(&k->workers[i].th, NULL, worker_main, &k->workers[i]) != 0)
            goto fail_threads;
        k->started++;
    }
    *out = k;
    return ORDO_OK;
fail_threads:
    ordo_consumer_free(k);
    return rc;
fail_alloc:
    consumer_free(k);
    return rc;
}

void ordo_consumer_stop(ordo_consumer_t *k)
{
    assert(k != NULL);
    atomic_store(&k->stopping, true);
}

void ordo_consumer_stats(const ordo_consumer_t *k, ordo_consumer_stats_t *out)
{
    assert(k != NULL && out != NULL);
    out->acked = atomic_load(&k->acked);
    out->nacked = atomic_load(&k->nacked);
    out->stale = atomic_load(&k->stale);
}

void ordo_consumer_wait(ordo_consumer_t *k)
{
    assert(k != NULL);
    if (k->joined)
        return;
    for (int i = 0; i < k->started; i++)
        pthread_join(k->workers[i].th, NULL);
    /* Handlers still running kept their leases until here. */
    atomic_store(&k->keeper_stop, true);
    pthread_mutex_lock(&k->mu);
    pthread_cond_signal(&k->keeper_cv);
    pthread_mutex_unlock(&k->mu);
    if (k->keeper_started)
        pthread_join(k->keeper, NULL);
    k->joined = 1;
}

void ordo_consumer_free(ordo_consumer_t *k)
{
    if (k == NULL)
        return;
    ordo_consumer_stop(k);
    ordo_consumer_wait(k);
    consumer_free(k);
}
