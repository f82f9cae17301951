/*
 * client_load.c -- load generator for bench/client.sh: the client
 * library's producer and consumer runner against a running ordod.
 *
 *   client_load produce  PORT [-n N] [-b BATCH] [-l LINGER_MS] [-v BYTES] [-k KEYS]
 *       N messages through ordo_producer_* (batches of BATCH, linger
 *       LINGER_MS); prints "msgs_per_s=X n=N" from the first send to the
 *       last report.
 *   client_load produce1 PORT [-n N] [-v BYTES] [-k KEYS]
 *       N messages with ordo_q_push(), one round trip each.
 *   client_load consume  PORT [-n N] [-c CONCURRENCY] [-v BYTES] [-k KEYS]
 *       pushes N messages (producer), then times the consumer runner until
 *       it has acked all N: "acked_per_s=X n=N".
 *   client_load memory   [-n N] [-v BYTES] [-k KEYS]
 *       buffers N messages in a producer whose server is unreachable and
 *       prints the resident memory added per message: "bytes_per_msg=X".
 * Queue names carry the pid, so runs never share a queue.
 */
#include "ordo/client.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct cfg {
    int port;
    long n, batch, linger, bytes, keys, conc;
} cfg_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * sysconf(_SC_PAGESIZE);
}

static void key_of(long i, long keys, char *k, size_t cap)
{
    snprintf(k, cap, "key%ld", i % keys);
}

/* send_n() -- c->n messages of c->bytes of payload through p, keyed by
 * key_of(), each send waiting at most timeout_ms for room. 0, or 1 at the
 * first send that was refused. */
static int send_n(const cfg_t *c, ordo_producer_t *p, const char *payload, int timeout_ms)
{
    for (long i = 0; i < c->n; i++) {
        char k[32];
        key_of(i, c->keys, k, sizeof k);
        if (ordo_producer_send(p, k, strlen(k), payload, (size_t)c->bytes, NULL, timeout_ms, NULL) != ORDO_OK)
            return 1;
    }
    return 0;
}

static int produce(const cfg_t *c, const char *queue, int report_time)
{
    ordo_producer_opts_t o = { .queue = queue, .batch_max = (int)c->batch, .linger_ms = (int)c->linger,
                               .buffer_max = (int)(c->n < 1000000 ? (c->n > 1000 ? c->n : 1000) : 1000000) };
    o.conn.port = c->port;
    ordo_producer_t *p;
    if (ordo_producer_new(&p, &o) != ORDO_OK)
        return 1;
    char *payload = malloc((size_t)c->bytes + 1);
    memset(payload, 'x', (size_t)c->bytes);
    double t0 = now_s();
    if (send_n(c, p, payload, ORDO_WAIT_FOREVER) != 0)
        return 1;
    ordo_producer_flush(p, ORDO_WAIT_FOREVER);
    double t = now_s() - t0;
    ordo_producer_close(p, ORDO_WAIT_FOREVER);
    ordo_producer_free(p);
    free(payload);
    if (report_time)
        printf("msgs_per_s=%.0f n=%ld\n", c->n / t, c->n);
    return 0;
}

static int produce1(const cfg_t *c, const char *queue)
{
    ordo_client_opts_t co = { .port = c->port };
    ordo_client_t *cl;
    if (ordo_client_new(&cl, &co) != ORDO_OK)
        return 1;
    char *payload = malloc((size_t)c->bytes + 1);
    memset(payload, 'x', (size_t)c->bytes);
    double t0 = now_s();
    for (long i = 0; i < c->n; i++) {
        char k[32];
        int64_t id;
        key_of(i, c->keys, k, sizeof k);
        if (ordo_q_push(cl, queue, k, strlen(k), payload, (size_t)c->bytes, NULL, &id) != ORDO_OK)
            return 1;
    }
    printf("msgs_per_s=%.0f n=%ld\n", c->n / (now_s() - t0), c->n);
    free(payload);
    ordo_client_free(cl);
    return 0;
}

typedef struct counter {
    atomic_long acked;
    long want;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} counter_t;

static int handler(void *arg, const ordo_msg_t *m, char **result, size_t *len)
{
    (void)m;
    (void)result;
    (void)len;
    counter_t *k = arg;
    if (atomic_fetch_add(&k->acked, 1) + 1 >= k->want) {
        pthread_mutex_lock(&k->mu);
        pthread_cond_signal(&k->cv);
        pthread_mutex_unlock(&k->mu);
    }
    return 0;
}

static int consume(const cfg_t *c, const char *queue)
{
    if (produce(c, queue, 0) != 0)
        return 1;
    counter_t k = { .want = c->n };
    pthread_mutex_init(&k.mu, NULL);
    pthread_cond_init(&k.cv, NULL);
    ordo_consumer_opts_t o = { .queue = queue, .concurrency = (int)c->conc, .handler = handler, .arg = &k };
    o.conn.port = c->port;
    ordo_consumer_t *r;
    double t0 = now_s();
    if (ordo_consumer_new(&r, &o) != ORDO_OK)
        return 1;
    pthread_mutex_lock(&k.mu);
    while (atomic_load(&k.acked) < k.want)
        pthread_cond_wait(&k.cv, &k.mu);
    pthread_mutex_unlock(&k.mu);
    /* every handler has run; the last acks are one round trip away */
    double t = now_s() - t0;
    ordo_consumer_stop(r);
    ordo_consumer_wait(r);
    ordo_consumer_stats_t stats;
    ordo_consumer_stats(r, &stats);
    ordo_consumer_free(r);
    printf("acked_per_s=%.0f n=%ld acked=%" PRIu64 "\n", c->n / t, c->n, stats.acked);
    return 0;
}

static int memory(const cfg_t *c)
{
    /* Port 1 on loopback: nobody listens, the sender keeps retrying. */
    ordo_producer_opts_t o = { .queue = "mem", .buffer_max = (int)c->n + 1 };
    o.conn.port = 1;
    ordo_producer_t *p;
    if (ordo_producer_new(&p, &o) != ORDO_OK)
        return 1;
    char *payload = malloc((size_t)c->bytes + 1);
    memset(payload, 'x', (size_t)c->bytes);
    long before = rss_bytes();
    if (send_n(c, p, payload, 0) != 0)
        return 1;
    long after = rss_bytes();
    printf("bytes_per_msg=%.1f n=%ld payload=%ld\n", (double)(after - before) / c->n, c->n, c->bytes);
    ordo_producer_free(p);
    free(payload);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        goto usage;
    const char *mode = argv[1];
    cfg_t c = { .n = 100000, .batch = ORDO_PRODUCER_BATCH_MAX_DEFAULT, .linger = ORDO_PRODUCER_LINGER_MS_DEFAULT,
                .bytes = 64, .keys = 1000, .conc = 8 };
    int first = 2;
    if (strcmp(mode, "memory") != 0) {
        if (argc < 3)
            goto usage;
        c.port = atoi(argv[2]);
        first = 3;
    }
    for (int i = first; i + 1 < argc; i += 2) {
        long v = atol(argv[i + 1]);
        if (strcmp(argv[i], "-n") == 0) c.n = v;
        else if (strcmp(argv[i], "-b") == 0) c.batch = v;
        else if (strcmp(argv[i], "-l") == 0) c.linger = v;
        else if (strcmp(argv[i], "-v") == 0) c.bytes = v;
        else if (strcmp(argv[i], "-k") == 0) c.keys = v;
        else if (strcmp(argv[i], "-c") == 0) c.conc = v;
        else goto usage;
    }
    char queue[64];
    snprintf(queue, sizeof queue, "bench-%s-%d", mode, (int)getpid());
    if (strcmp(mode, "produce") == 0)
        return produce(&c, queue, 1);
    if (strcmp(mode, "produce1") == 0)
        return produce1(&c, queue);
    if (strcmp(mode, "consume") == 0)
        return consume(&c, queue);
    if (strcmp(mode, "memory") == 0)
        return memory(&c);
usage:
    fprintf(stderr, "usage: client_load produce|produce1|consume PORT [-n N] [-b BATCH] [-l MS] [-v BYTES] "
                    "[-k KEYS] [-c CONC] | memory [-n N] [-v BYTES]\n");
    return 2;
}
