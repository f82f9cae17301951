/*
 * limits.c -- what this machine can do at most, for the benchmarks'
 * "distance to the physical limit": the rate of small durable appends, the
 * loopback round trip and bandwidth, and memory bandwidth.
 *
 *   limits [-d dir] [-s seconds]
 *
 * Each figure is the best a program can expect from the resource alone,
 * measured in the simplest way that uses it as the servers do:
 *   - sync: append 64 bytes to a file in dir (default /tmp, where the
 *     benches keep their data) and fdatasync it, one after the other, for
 *     s seconds (default 2): syncs/s and the median sync. A server that
 *     answers a write only after its sync can answer at most this many
 *     sync rounds a second; with group commit, writes/s <= syncs/s x writes
 *     per sync. (Again with 4 KiB appends: a batch of records; and with
 *     two threads appending and syncing the same file at once, each its
 *     own records: how much a second sync in flight adds.)
 *   - loopback round trip: one byte there and back over a TCP connection
 *     on 127.0.0.1 between two threads, s seconds: round trips/s. A client
 *     with one request in flight cannot do more.
 *   - loopback bandwidth: 1 MiB writes from one thread to another over
 *     TCP on 127.0.0.1, s seconds: GB/s.
 *   - memory bandwidth: memcpy of 64 MiB buffers, s seconds: GB/s copied.
 * Every figure here uses both cores at most as the servers would (one
 * thread, or a pair of threads talking); on a busy machine they fall.
 *
 * Output: one "limit: name value unit" line per figure, on stdout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "limits: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- sync rate --------------------------------------------------------------- */

#define SYNC_SAMPLES_MAX 1000000

/* A new file in dir, already unlinked: gone when closed. */
static int temp_file(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ordo-limits-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0)
        die("mkstemp");
    unlink(path);
    return fd;
}

static void sync_rate(const char *dir, double secs, size_t bytes)
{
    int fd = temp_file(dir);
    char *buf = calloc(1, bytes);
    double *lat = malloc(SYNC_SAMPLES_MAX * sizeof *lat);
    if (buf == NULL || lat == NULL)
        die("malloc");
    size_t n = 0;
    off_t off = 0;
    double t0 = now_s(), t = t0;
    while (t - t0 < secs && n < SYNC_SAMPLES_MAX) {
        if (pwrite(fd, buf, bytes, off) != (ssize_t)bytes)
            die("pwrite");
        off += (off_t)bytes;
        double a = now_s();
        if (fdatasync(fd) != 0)
            die("fdatasync");
        t = now_s();
        lat[n++] = t - a;
    }
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("limit: sync_%zub %.0f syncs/s (median fdatasync %.0f us, p99 %.0f us; %s)\n", bytes,
           (double)n / (t - t0), lat[n / 2] * 1e6, lat[n * 99 / 100] * 1e6, dir);
    close(fd);
    free(buf);
    free(lat);
}

/* Two threads, each appending 64 bytes to one shared file and syncing it,
 * one after the other, at once. */
typedef struct {
    int fd;
    double secs;
    _Atomic long long *off;
    double *lat;
    size_t n;
} syncer_t;

static void *syncer_main(void *arg)
{
    syncer_t *y = arg;
    char buf[64] = {0};
    double t0 = now_s(), t = t0;
    while (t - t0 < y->secs && y->n < SYNC_SAMPLES_MAX / 2) {
        long long off = atomic_fetch_add(y->off, (long long)sizeof buf);
        if (pwrite(y->fd, buf, sizeof buf, (off_t)off) != (ssize_t)sizeof buf)
            die("pwrite");
        double a = now_s();
        if (fdatasync(y->fd) != 0)
            die("fdatasync");
        t = now_s();
        y->lat[y->n++] = t - a;
    }
    return NULL;
}

static void sync_rate_two(const char *dir, double secs)
{
    int fd = temp_file(dir);
    _Atomic long long off = 0;
    syncer_t y[2];
    pthread_t th[2];
    double t0 = now_s();
    for (int i = 0; i < 2; i++) {
        y[i] = (syncer_t){.fd = fd, .secs = secs, .off = &off, .lat = malloc(SYNC_SAMPLES_MAX / 2 * sizeof(double))};
        if (y[i].lat == NULL)
            die("malloc");
        if (pthread_create(&th[i], NULL, syncer_main, &y[i]) != 0)
            die("pthread_create");
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    double t = now_s();
    size_t n = y[0].n + y[1].n;
    double *lat = malloc(n * sizeof *lat);
    if (lat == NULL)
        die("malloc");
    memcpy(lat, y[0].lat, y[0].n * sizeof *lat);
    memcpy(lat + y[0].n, y[1].lat, y[1].n * sizeof *lat);
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("limit: sync_64b_two_threads %.0f syncs/s (median fdatasync %.0f us, p99 %.0f us; %s)\n",
           (double)n / (t - t0), lat[n / 2] * 1e6, lat[n * 99 / 100] * 1e6, dir);
    close(fd);
    free(lat);
    free(y[0].lat);
    free(y[1].lat);
}

/* ---- loopback ------------------------------------------------------------------ */

typedef struct {
    int fd;
    size_t chunk;     /* 1: echo one byte; > 1: read and discard */
} peer_t;

static void *peer_main(void *arg)
{
    peer_t *p = arg;
    char *buf = malloc(p->chunk);
    if (buf == NULL)
        die("malloc");
    for (;;) {
        ssize_t r = read(p->fd, buf, p->chunk);
        if (r <= 0)
            break;
        if (p->chunk == 1 && write(p->fd, buf, 1) != 1)
            break;
    }
    free(buf);
    return NULL;
}

/* A connected pair of TCP sockets on 127.0.0.1. */
static void tcp_pair(int fds[2])
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) != 0)
        die("listen");
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    fds[1] = accept(l, NULL, NULL);
    if (fds[1] < 0)
        die("accept");
    close(l);
    int one = 1;
    setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void loopback(double secs)
{
    int fds[2];
    tcp_pair(fds);
    peer_t echo = {fds[1], 1};
    pthread_t th;
    pthread_create(&th, NULL, peer_main, &echo);
    char c = 'x';
    uint64_t n = 0;
    double t0 = now_s(), t = t0;
    while (t - t0 < secs) {
        if (write(fds[0], &c, 1) != 1 || read(fds[0], &c, 1) != 1)
            die("ping");
        n++;
        if ((n & 255) == 0)
            t = now_s();
    }
    t = now_s();
    printf("limit: loopback_round_trip %.0f round trips/s (one byte each way, one in flight)\n", (double)n / (t - t0));
    shutdown(fds[0], SHUT_WR);
    pthread_join(th, NULL);
    close(fds[0]);
    close(fds[1]);

    tcp_pair(fds);
    const size_t chunk = 1 << 20;
    peer_t sink = {fds[1], chunk};
    pthread_create(&th, NULL, peer_main, &sink);
    char *buf = calloc(1, chunk);
    if (buf == NULL)
        die("malloc");
    uint64_t bytes = 0;
    t0 = now_s();
    t = t0;
    while (t - t0 < secs) {
        ssize_t w = write(fds[0], buf, chunk);
        if (w <= 0)
            die("write");
        bytes += (uint64_t)w;
        t = now_s();
    }
    shutdown(fds[0], SHUT_WR);
    pthread_join(th, NULL);
    printf("limit: loopback_bandwidth %.2f GB/s (1 MiB writes, one connection)\n", (double)bytes / (t - t0) / 1e9);
    free(buf);
    close(fds[0]);
    close(fds[1]);
}

/* ---- memory ---------------------------------------------------------------------- */

static void memory(double secs)
{
    const size_t len = 64u << 20;
    char *a = malloc(len), *b = malloc(len);
    if (a == NULL || b == NULL)
        die("malloc");
    memset(a, 1, len);
    memset(b, 2, len);
    uint64_t bytes = 0;
    double t0 = now_s(), t = t0;
    while (t - t0 < secs) {
        memcpy(b, a, len);
        bytes += len;
        char *x = a;
        a = b;
        b = x;
        t = now_s();
    }
    volatile char sink = a[len / 2]; /* the copies are used */
    (void)sink;
    printf("limit: memory_copy %.2f GB/s (memcpy of 64 MiB, one thread)\n", (double)bytes / (t - t0) / 1e9);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    double secs = 2;
    int opt;
    while ((opt = getopt(argc, argv, "d:s:")) != -1) {
        if (opt == 'd')
            dir = optarg;
        else if (opt == 's')
            secs = atof(optarg);
        else {
            fprintf(stderr, "usage: limits [-d dir] [-s seconds]\n");
            return 2;
        }
    }
    if (secs <= 0) {
        fprintf(stderr, "limits: -s must be positive\n");
        return 2;
    }
    sync_rate(dir, secs, 64);
    sync_rate(dir, secs, 4096);
    sync_rate_two(dir, secs);
    loopback(secs);
    memory(secs);
    return 0;
}
