/*
 * exactly_once.c -- a consumer whose effects count once: for each message
 * of QUEUE it adds 1 to the key "count:<message key>", in one transaction
 * with the message's ack (the consumer runner's txn_handler option). A
 * message redelivered because a consumer stalled past its lease is counted
 * by whichever consumer's transaction holds the current delivery token;
 * the stalled one's transaction is refused whole (counted as stale).
 *
 *   exactly_once (-p PORT | -h H:P,H:P...) [-a PASSWORD] -q QUEUE [-c CONCURRENCY]
 *                [-l LEASE_MS] [-s] [-C CA]
 *
 * Prints "ready" once started. Reads commands on stdin: "go" releases a
 * stalled handler (-s: the first message's handler prints
 * "holding <key> <id>" and waits for "go", so a test can stop the process
 * and let the lease run out); end of input stops the runner, which prints
 * "acked A nacked N stale S" and exits 0. -C speaks TLS to the servers'
 * tls-ports, verifying them against the CA certificate file CA.
 */
#include "ordo/client.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COUNT_PREFIX "count:"
#define COUNT_KEY_MAX 512

typedef struct app {
    int stall;             /* -s: hold the first message until "go" */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stalled_once, go;
} app_t;

static int count_one(void *arg, ordo_client_t *c, const ordo_msg_t *m, ordo_txn_t *txn,
                     char **result, size_t *result_len)
{
    app_t *a = arg;
    (void)c;
    (void)result;
    (void)result_len;
    char key[COUNT_KEY_MAX];
    if (m->key_len + sizeof COUNT_PREFIX > sizeof key)
        return -1;
    memcpy(key, COUNT_PREFIX, sizeof COUNT_PREFIX - 1);
    memcpy(key + sizeof COUNT_PREFIX - 1, m->key, m->key_len);
    if (ordo_txn_incrby(txn, key, sizeof COUNT_PREFIX - 1 + m->key_len, 1) != ORDO_OK)
        return -1;
    pthread_mutex_lock(&a->mu);
    if (a->stall && !a->stalled_once) {
        a->stalled_once = 1;
        printf("holding %.*s %" PRId64 "\n", (int)m->key_len, m->key, m->id);
        fflush(stdout);
        while (!a->go)
            pthread_cond_wait(&a->cv, &a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return 0; /* the runner adds Q.ACK and executes */
}

int main(int argc, char **argv)
{
    ordo_consumer_opts_t o = { .concurrency = 1 };
    app_t a = { .stall = 0 };
    int opt;
    while ((opt = getopt(argc, argv, "p:h:a:q:c:l:sC:")) != -1) {
        switch (opt) {
        case 'p': o.conn.port = atoi(optarg); break;
        case 'h': o.conn.addrs = optarg; break; /* a cluster's members */
        case 'a': o.conn.password = optarg; break;
        case 'q': o.queue = optarg; break;
        case 'c': o.concurrency = atoi(optarg); break;
        case 'l': o.lease_ms = atoll(optarg); break;
        case 's': a.stall = 1; break;
        case 'C': o.conn.tls = 1; o.conn.tls_ca_file = optarg; break; /* a tls-port, verified against CA */
        default:
            fprintf(stderr, "usage: %s (-p PORT | -h H:P,...) [-a PASSWORD] -q QUEUE [-c N] [-l LEASE_MS] [-s] [-C CA]\n", argv[0]);
            return 2;
        }
    }
    if (o.queue == NULL) {
        fprintf(stderr, "-q QUEUE is required\n");
        return 2;
    }
    pthread_mutex_init(&a.mu, NULL);
    pthread_cond_init(&a.cv, NULL);
    o.txn_handler = count_one;
    o.arg = &a;
    o.nack_delay_ms = -1;
    ordo_consumer_t *k;
    int rc = ordo_consumer_new(&k, &o);
    if (rc != ORDO_OK) {
        fprintf(stderr, "consumer: %s\n", ordo_strerror(rc));
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin) != NULL) {
        if (strncmp(line, "go", 2) == 0) {
            pthread_mutex_lock(&a.mu);
            a.go = 1;
            pthread_cond_broadcast(&a.cv);
            pthread_mutex_unlock(&a.mu);
        }
    }
    /* A handler still waiting for "go" would never finish: release it. */
    pthread_mutex_lock(&a.mu);
    a.go = 1;
    pthread_cond_broadcast(&a.cv);
    pthread_mutex_unlock(&a.mu);
    ordo_consumer_stop(k);
    ordo_consumer_wait(k);
    ordo_consumer_stats_t stats;
    ordo_consumer_stats(k, &stats);
    ordo_consumer_free(k);
    printf("acked %" PRIu64 " nacked %" PRIu64 " stale %" PRIu64 "\n", stats.acked, stats.nacked, stats.stale);
    return 0;
}
