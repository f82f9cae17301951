/*
 * producer_spill.c -- a producer that survives the server's restart and its
 * own crash, with a spill file (examples/, run by
 * tests/integration/test_client_producer.py).
 *
 *   producer_spill (-p PORT | -a H:P,H:P...) -q QUEUE -f SPILL -n COUNT [-k KEYS] [-l LINGER_MS]
 *                  [-w PACE_US] [-t] [-C CA]
 *
 * Message i (0 <= i < COUNT) has key "k<i % KEYS>" and payload "<i>"; it
 * is the producer's sequence number i + 1, so a run restarted on the same
 * spill file resumes at the first i the file does not hold: the file, not
 * the program, remembers what was accepted. Prints "accepted I" once
 * ordo_producer_send() has returned for message I, and "done" when every
 * message is reported. A report with an error prints "failed I ERR".
 * -w paces the sends (microseconds between two), standing for an
 * application that produces over time; "recovered N" counts the reports
 * of messages an earlier run accepted. -t prints "acked I MS" for each
 * reported message, MS being CLOCK_MONOTONIC milliseconds (a test's
 * clock: the time from a server's kill to the next acknowledgement).
 * -C speaks TLS to the servers' tls-ports, verifying them against the CA
 * certificate file CA.
 */
#include "ordo/client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct app {
    long recovered;
    int times;             /* -t */
} app_t;

static void on_report(void *arg, const ordo_delivery_t *d)
{
    app_t *a = arg;
    a->recovered += d->recovered;
    if (a->times && d->err == ORDO_OK) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        printf("acked %" PRIu64 " %lld\n", d->seq - 1, (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        fflush(stdout);
    }
    if (d->err != ORDO_OK) {
        printf("failed %" PRIu64 " %s\n", d->seq - 1, ordo_strerror(d->err));
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    app_t a = { 0 };
    ordo_producer_opts_t o = { .report = on_report, .report_arg = &a };
    long count = 0, keys = 10, pace_us = 0;
    int opt;
    while ((opt = getopt(argc, argv, "p:a:q:f:n:k:l:w:tC:")) != -1) {
        switch (opt) {
        case 'p': o.conn.port = atoi(optarg); break;
        case 'a': o.conn.addrs = optarg; break; /* a cluster's members */
        case 'q': o.queue = optarg; break;
        case 'f': o.spill_path = optarg; break;
        case 'n': count = atol(optarg); break;
        case 'k': keys = atol(optarg); break;
        case 'l': o.linger_ms = atoi(optarg); break;
        case 'w': pace_us = atol(optarg); break;
        case 't': a.times = 1; break;
        case 'C': o.conn.tls = 1; o.conn.tls_ca_file = optarg; break; /* a tls-port, verified against CA */
        default: fprintf(stderr, "usage: producer_spill -p PORT -q QUEUE -f SPILL -n COUNT [-k KEYS] [-l MS] [-C CA]\n"); return 2;
        }
    }
    if (o.queue == NULL || count <= 0 || keys <= 0)
        return 2;
    o.conn.reconnect_timeout_ms = ORDO_WAIT_FOREVER;
    ordo_producer_t *p;
    int rc = ordo_producer_new(&p, &o);
    if (rc != ORDO_OK) {
        fprintf(stderr, "producer: %s\n", ordo_strerror(rc));
        return 1;
    }
    for (long i = (long)ordo_producer_next_seq(p) - 1; i < count; i++) {
        char key[32], payload[32];
        snprintf(key, sizeof key, "k%ld", i % keys);
        snprintf(payload, sizeof payload, "%ld", i);
        rc = ordo_producer_send(p, key, strlen(key), payload, strlen(payload), NULL, ORDO_WAIT_FOREVER, NULL);
        if (rc != ORDO_OK) {
            fprintf(stderr, "producer: send: %s\n", ordo_strerror(rc));
            return 1;
        }
        printf("accepted %ld\n", i);
        fflush(stdout);
        if (pace_us)
            usleep((useconds_t)pace_us);
    }
    size_t left = ordo_producer_close(p, ORDO_WAIT_FOREVER);
    ordo_producer_free(p);
    printf("recovered %ld\n", a.recovered);
    printf(left ? "unreported %zu\n" : "done\n", left);
    return left ? 1 : 0;
}
