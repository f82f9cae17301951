/*
 * watch_load.c -- load generator for bench/watch.sh: one writer, many
 * prefix watchers, count the events the watchers receive per second.
 *
 *   watch_load ordo|etcd PORT [-w watchers] [-d seconds] [-i inflight]
 *                             [-k keys] [-v value_bytes] [-t threads]
 *
 * The load has the same shape for both servers:
 *   - W watchers (default 100), each on its own TCP connection, each with
 *     one watch on the prefix "wbench/";
 *   - one writer putting keys "wbench/k%06d" (cycling over -k keys, default
 *     1000) with a value of -v bytes (default 16), keeping -i puts in
 *     flight (default 16) and sending the next one as each reply arrives.
 *     For ordod that is one connection pipelining KV.PUT; for etcd it is -i
 *     HTTP/1.1 keep-alive connections with one PUT each, because etcd's
 *     HTTP gateway answers one request at a time per connection;
 *   - measurement starts once every watch is confirmed and lasts -d
 *     seconds (default 10); only events received inside it count.
 *
 * ordod is spoken to in RESP2 (KV.WATCH wbench/ PREFIX; events are
 * ["watch", id, rev, "put", key, value] arrays). etcd is spoken to through
 * its gRPC gateway's HTTP/JSON API on the client port: POST /v3/kv/put and
 * a streaming POST /v3/watch per watcher (HTTP/1.0, so the stream is not
 * chunked); every event in the JSON stream carries one "kv" object, which
 * is what we count. The gateway translates JSON to gRPC inside etcd, which
 * costs etcd some CPU that a native gRPC client would not; bench/watch.sh
 * says so next to the figures.
 *
 * Threads (the same for both servers): the writer connection(s) have a
 * thread of their own, so the next put goes out as soon as a reply arrives
 * rather than after every watcher's input has been parsed; the watchers are
 * spread round-robin over -t threads (default 2), each with its own epoll.
 * Every connection belongs to one thread, so its counters need no locks;
 * they are summed after the threads stop. The tool's CPU (all threads) is
 * still a possible ceiling on the figure it reports: it prints its CPU time
 * (tool_cpu, 1.00 = one core busy) so that a reader can tell whether the
 * server or the tool was the limit.
 *
 * Output: one line of key=value pairs on stdout.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "loadlib.h"

#define PREFIX "wbench/"
#define PREFIX_END "wbench0" /* etcd range_end: the prefix with its last byte + 1 */
#define RBUF_BYTES (1 << 20) /* per connection; a watcher reads up to this per recv */
#define WATCHERS_MAX 4096
#define INFLIGHT_MAX 1024
#define THREADS_MAX 64
#define SETUP_TIMEOUT_S 30   /* all watches must be confirmed within this */

enum proto { PROTO_ORDO, PROTO_ETCD };
enum role { ROLE_WATCHER, ROLE_WRITER };

typedef struct conn {
    int fd;
    enum role role;
    bool ready;     /* watcher: its watch is confirmed */
    bool busy;      /* etcd writer connection: a PUT is in flight */
    bool in_body;   /* etcd watcher: past the HTTP headers */
    char *rbuf;
    size_t rlen;
    char *wbuf;     /* pending output */
    size_t wlen, woff, wcap;
    /* counted by the connection's thread; summed at the end */
    uint64_t events;     /* watcher: events received while measuring */
    uint64_t puts;       /* writer: replies received while measuring */
    uint64_t cancelled;
    uint64_t errors;
} conn_t;

typedef struct load {
    enum proto proto;
    int port;
    int watchers;
    double seconds;
    int inflight;
    int keys;
    int value_bytes;
    int threads;         /* watcher threads */
    int epfd;            /* setup: every connection */
    int epfds[THREADS_MAX + 1]; /* measuring: [0] the writer's, then the watcher threads' */
    conn_t *conns; /* watchers first, then writer connections */
    int nconns;
    int ready_watchers;  /* setup only (main thread) */
    atomic_bool measuring;
    atomic_bool stop;
    /* writer thread only */
    uint64_t puts_sent;
    int outstanding;     /* ordo writer: puts sent and not yet answered */
    uint64_t key_next;
    char value[4096];
} load_t;

static void out_append(conn_t *c, const char *p, size_t n)
{
    if (c->wlen + n > c->wcap) {
        if (c->woff > 0) {
            memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
            c->wlen -= c->woff;
            c->woff = 0;
        }
        while (c->wlen + n > c->wcap)
            c->wcap = c->wcap ? c->wcap * 2 : 65536;
        c->wbuf = realloc(c->wbuf, c->wcap);
        if (c->wbuf == NULL)
            die("realloc");
    }
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
}

/* Sends what it can; returns 0, or -1 if the connection failed. */
static int out_flush(conn_t *c)
{
    if (send_some(c->fd, c->wbuf, c->wlen, &c->woff) != 0)
        return errno == EAGAIN ? 0 : -1;
    c->woff = c->wlen = 0;
    return 0;
}

/* Append the request of length n (-1: it did not fit its buffer). */
static void out_request(conn_t *c, const char *req, int n)
{
    if (n < 0) {
        fprintf(stderr, "watch_load: request too large\n");
        exit(1);
    }
    out_append(c, req, (size_t)n);
}

/* ---- requests ------------------------------------------------------------ */

static void send_watch(load_t *L, conn_t *c)
{
    char req[512];
    int n;
    if (L->proto == PROTO_ORDO) {
        n = resp_format(req, sizeof req, 3, (const char *[]){"KV.WATCH", PREFIX, "PREFIX"});
    } else {
        char k[64], e[64], body[256];
        base64(PREFIX, strlen(PREFIX), k);
        base64(PREFIX_END, strlen(PREFIX_END), e);
        snprintf(body, sizeof body, "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\"}}", k, e);
        n = http_post_format(req, sizeof req, "/v3/watch", "HTTP/1.0", body);
    }
    out_request(c, req, n);
}

static void send_put(load_t *L, conn_t *c)
{
    char key[64], req[16384];
    int kn = snprintf(key, sizeof key, PREFIX "k%06llu", (unsigned long long)(L->key_next++ % (uint64_t)L->keys));
    int n;
    if (L->proto == PROTO_ORDO) {
        n = resp_format(req, sizeof req, 3, (const char *[]){"KV.PUT", key, L->value});
    } else {
        char k[128], v[6000], body[8192];
        base64(key, (size_t)kn, k);
        base64(L->value, (size_t)L->value_bytes, v);
        snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
        n = http_post_format(req, sizeof req, "/v3/kv/put", "HTTP/1.1", body);
        c->busy = true;
    }
    out_request(c, req, n);
    L->puts_sent++;
}

/* ---- RESP (ordod) --------------------------------------------------------- */

/* The signed decimal after the type byte at p, ending at CRLF: stores it in
 * *n and returns the start of the next line, or NULL if the line is not all
 * in [p, e) yet. Hand-rolled: strtol and memchr cost the tool more per event
 * than the server spends producing it. */
static const char *resp_line(const char *p, const char *e, long *n)
{
    const char *q = p + 1;
    bool neg = q < e && *q == '-';
    long v = 0;
    q += neg;
    while (q < e && *q >= '0' && *q <= '9')
        v = v * 10 + (*q++ - '0');
    while (q < e && *q != '\n') /* a simple string or error: skip its text */
        q++;
    if (q >= e)
        return NULL;
    *n = neg ? -v : v;
    return q + 1;
}

/* Returns the end of the RESP value at p, or NULL if it is not all in
 * [p, e) yet. */
static const char *resp_skip(const char *p, const char *e)
{
    if (p >= e)
        return NULL;
    long n;
    const char *nl1 = resp_line(p, e, &n);
    if (nl1 == NULL)
        return NULL;
    switch (*p) {
    case '$':
    case '=':
    case '!':
        if (n < 0)
            return nl1;
        return e - nl1 < n + 2 ? NULL : nl1 + n + 2;
    case '%':
        n *= 2;
        /* fall through */
    case '*':
    case '>':
    case '~':
        for (const char *q = nl1; n-- > 0;) {
            q = resp_skip(q, e);
            if (q == NULL)
                return NULL;
            if (n == 0)
                return q;
        }
        return nl1;
    default:
        return nl1;
    }
}

static bool starts(const char *p, const char *e, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(e - p) >= n && memcmp(p, lit, n) == 0;
}

/* Consumes whole values from c->rbuf; returns bytes consumed. */
static size_t ordo_parse(load_t *L, conn_t *c)
{
    const char *p = c->rbuf, *e = c->rbuf + c->rlen;
    for (;;) {
        const char *q = resp_skip(p, e);
        if (q == NULL)
            break;
        if (c->role == ROLE_WRITER) {
            if (*p == '-') {
                if (c->errors++ < 3)
                    fprintf(stderr, "watch_load: put error: %.*s", (int)(q - p), p);
            } else if (atomic_load_explicit(&L->measuring, memory_order_relaxed)) {
                c->puts++;
            }
            L->outstanding--;
        } else if (*p == ':') {
            c->ready = true;
            L->ready_watchers++;
        } else if (*p == '*' || *p == '>') {
            long n;
            const char *first = resp_line(p, q, &n);
            if (starts(first, q, "$5\r\nwatch\r\n")) {
                if (atomic_load_explicit(&L->measuring, memory_order_relaxed))
                    c->events++;
            } else if (starts(first, q, "$15\r\nwatch-cancelled\r\n")) {
                c->cancelled++;
            }
        } else if (*p == '-') {
            fprintf(stderr, "watch_load: watch error: %.*s", (int)(q - p), p);
            exit(1);
        }
        p = q;
    }
    return (size_t)(p - c->rbuf);
}

/* ---- HTTP/JSON (etcd) ---------------------------------------------------- */

static size_t count_substr(const char *p, size_t n, const char *lit)
{
    size_t k = strlen(lit), count = 0;
    const char *e = p + n;
    while ((p = memmem(p, (size_t)(e - p), lit, k)) != NULL) {
        count++;
        p += k;
    }
    return count;
}

static size_t etcd_watcher_parse(load_t *L, conn_t *c)
{
    const char *p = c->rbuf, *e = c->rbuf + c->rlen;
    if (!c->in_body) {
        const char *h = memmem(p, c->rlen, "\r\n\r\n", 4);
        if (h == NULL)
            return 0;
        if (!starts(p, e, "HTTP/1.1 200") && !starts(p, e, "HTTP/1.0 200")) {
            fprintf(stderr, "watch_load: etcd watch refused: %.*s\n", (int)(h - p), p);
            exit(1);
        }
        c->in_body = true;
        p = h + 4;
    }
    /* Count on whole lines only (the gateway ends each message with a
     * newline), so a "kv": split across two reads is not missed. */
    const char *last_nl = NULL;
    for (const char *q = e; q > p; q--) {
        if (q[-1] == '\n') {
            last_nl = q;
            break;
        }
    }
    if (last_nl == NULL)
        return (size_t)(p - c->rbuf);
    size_t n = (size_t)(last_nl - p);
    if (!c->ready && memmem(p, n, "\"created\":true", 14) != NULL) {
        c->ready = true;
        L->ready_watchers++;
    }
    if (atomic_load_explicit(&L->measuring, memory_order_relaxed))
        c->events += count_substr(p, n, "\"kv\":");
    if (memmem(p, n, "\"canceled\":true", 15) != NULL)
        c->cancelled++;
    return (size_t)(last_nl - c->rbuf);
}

static size_t etcd_writer_parse(load_t *L, conn_t *c)
{
    const char *p = c->rbuf;
    const char *h = memmem(p, c->rlen, "\r\n\r\n", 4);
    if (h == NULL)
        return 0;
    const char *body = h + 4, *end;
    const char *cl = memmem(p, (size_t)(h - p), "Content-Length:", 15);
    if (cl != NULL) {
        long n = strtol(cl + 15, NULL, 10);
        if (c->rbuf + c->rlen - body < n)
            return 0;
        end = body + n;
    } else {
        const char *z = memmem(body, (size_t)(c->rbuf + c->rlen - body), "\r\n0\r\n\r\n", 7);
        if (z == NULL)
            return 0;
        end = z + 7;
    }
    if (!starts(p, h, "HTTP/1.1 200")) {
        if (c->errors++ < 3)
            fprintf(stderr, "watch_load: put error: %.*s\n", (int)(end - p), p);
    } else if (atomic_load_explicit(&L->measuring, memory_order_relaxed)) {
        c->puts++;
    }
    c->busy = false;
    return (size_t)(end - c->rbuf);
}

/* ---- event loop ------------------------------------------------------------ */

/* Reads until the socket is drained. A read shorter than the room offered
 * means it was drained then: edge-triggered epoll reports the next arrival
 * anew, so the tool skips the recv that would only say EAGAIN (half the
 * tool's syscalls per event; the same for both servers). */
static void on_readable(load_t *L, conn_t *c)
{
    for (;;) {
        size_t room = RBUF_BYTES - c->rlen;
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, room, 0);
        if (n < 0) {
            if (errno == EAGAIN)
                return;
            die("recv");
        }
        if (n == 0) {
            fprintf(stderr, "watch_load: server closed a %s connection\n",
                    c->role == ROLE_WATCHER ? "watcher" : "writer");
            exit(1);
        }
        c->rlen += (size_t)n;
        size_t used;
        if (L->proto == PROTO_ORDO)
            used = ordo_parse(L, c);
        else if (c->role == ROLE_WATCHER)
            used = etcd_watcher_parse(L, c);
        else
            used = etcd_writer_parse(L, c);
        memmove(c->rbuf, c->rbuf + used, c->rlen - used);
        c->rlen -= used;
        if (c->rlen == RBUF_BYTES) {
            fprintf(stderr, "watch_load: a message larger than %d bytes\n", RBUF_BYTES);
            exit(1);
        }
        if ((size_t)n < room)
            return;
    }
}

static void writer_refill(load_t *L, bool writing)
{
    for (int i = L->watchers; i < L->nconns; i++) {
        conn_t *c = &L->conns[i];
        if (writing) {
            if (L->proto == PROTO_ORDO) {
                while (L->outstanding < L->inflight) {
                    send_put(L, c);
                    L->outstanding++;
                }
            } else if (!c->busy) {
                send_put(L, c);
            }
        }
        if (out_flush(c) != 0)
            die("send");
    }
}

static void poll_once(load_t *L, int epfd, int timeout_ms)
{
    struct epoll_event evs[256];
    int n = epoll_wait(epfd, evs, 256, timeout_ms);
    if (n < 0 && errno != EINTR)
        die("epoll_wait");
    for (int i = 0; i < n; i++)
        on_readable(L, &L->conns[evs[i].data.u32]);
}

static void *writer_main(void *arg)
{
    load_t *L = arg;
    while (!atomic_load(&L->stop)) {
        writer_refill(L, true);
        poll_once(L, L->epfds[0], 10);
    }
    return NULL;
}

typedef struct watcher_arg {
    load_t *L;
    int epfd;
} watcher_arg_t;

static void *watcher_main(void *arg)
{
    watcher_arg_t *a = arg;
    while (!atomic_load(&a->L->stop))
        poll_once(a->L, a->epfd, 10);
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: watch_load ordo|etcd PORT [-w watchers] [-d seconds] [-i inflight] "
                    "[-k keys] [-v value_bytes] [-t threads]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    load_t L = {.watchers = 100, .seconds = 10, .inflight = 16, .keys = 1000, .value_bytes = 16, .threads = 2};
    if (argc < 3)
        usage();
    if (strcmp(argv[1], "ordo") == 0)
        L.proto = PROTO_ORDO;
    else if (strcmp(argv[1], "etcd") == 0)
        L.proto = PROTO_ETCD;
    else
        usage();
    L.port = atoi(argv[2]);
    for (int i = 3; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (strcmp(argv[i], "-w") == 0)
            L.watchers = v;
        else if (strcmp(argv[i], "-d") == 0)
            L.seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "-i") == 0)
            L.inflight = v;
        else if (strcmp(argv[i], "-k") == 0)
            L.keys = v;
        else if (strcmp(argv[i], "-v") == 0)
            L.value_bytes = v;
        else if (strcmp(argv[i], "-t") == 0)
            L.threads = v;
        else
            usage();
    }
    if (L.watchers < 1 || L.watchers > WATCHERS_MAX || L.inflight < 1 || L.inflight > INFLIGHT_MAX ||
        L.keys < 1 || L.value_bytes < 1 || L.value_bytes >= (int)sizeof L.value || L.seconds <= 0 ||
        L.threads < 1 || L.threads > THREADS_MAX)
        usage();
    memset(L.value, 'v', (size_t)L.value_bytes);

    int writers = L.proto == PROTO_ORDO ? 1 : L.inflight;
    L.nconns = L.watchers + writers;
    L.conns = calloc((size_t)L.nconns, sizeof *L.conns);
    L.epfd = epoll_create1(0);
    if (L.conns == NULL || L.epfd < 0)
        die("setup");
    for (int i = 0; i < L.nconns; i++) {
        conn_t *c = &L.conns[i];
        c->fd = connect_to(L.port);
        c->role = i < L.watchers ? ROLE_WATCHER : ROLE_WRITER;
        c->rbuf = malloc(RBUF_BYTES);
        if (c->rbuf == NULL)
            die("malloc");
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u32 = (uint32_t)i};
        if (epoll_ctl(L.epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            die("epoll_ctl");
        if (c->role == ROLE_WATCHER) {
            send_watch(&L, c);
            if (out_flush(c) != 0)
                die("send");
        }
    }
    /* Non-blocking only after every watch request went out whole. */
    for (int i = 0; i < L.nconns; i++)
        set_nonblock(L.conns[i].fd);

    double deadline = now_s() + SETUP_TIMEOUT_S;
    while (L.ready_watchers < L.watchers) {
        if (now_s() > deadline) {
            fprintf(stderr, "watch_load: only %d of %d watches confirmed\n", L.ready_watchers, L.watchers);
            return 1;
        }
        poll_once(&L, L.epfd, 100);
    }

    /* Hand each connection to its thread's epoll (edge-triggered: adding a
     * connection with unread input reports it at once). */
    if (L.threads > L.watchers)
        L.threads = L.watchers;
    for (int t = 0; t <= L.threads; t++)
        if ((L.epfds[t] = epoll_create1(0)) < 0)
            die("epoll_create1");
    for (int i = 0; i < L.nconns; i++) {
        int t = i < L.watchers ? 1 + i % L.threads : 0;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u32 = (uint32_t)i};
        if (epoll_ctl(L.epfd, EPOLL_CTL_DEL, L.conns[i].fd, NULL) != 0 ||
            epoll_ctl(L.epfds[t], EPOLL_CTL_ADD, L.conns[i].fd, &ev) != 0)
            die("epoll_ctl");
    }

    pthread_t tids[THREADS_MAX + 1];
    watcher_arg_t args[THREADS_MAX];
    atomic_store(&L.measuring, true);
    double cpu0 = cpu_s(), t0 = now_s();
    for (int t = 0; t <= L.threads; t++) {
        int rc;
        if (t == 0) {
            rc = pthread_create(&tids[0], NULL, writer_main, &L);
        } else {
            args[t - 1] = (watcher_arg_t){&L, L.epfds[t]};
            rc = pthread_create(&tids[t], NULL, watcher_main, &args[t - 1]);
        }
        if (rc != 0) {
            errno = rc;
            die("pthread_create");
        }
    }
    struct timespec ts = {(time_t)L.seconds, (long)((L.seconds - (double)(time_t)L.seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    atomic_store(&L.measuring, false);
    double t_end = now_s();
    atomic_store(&L.stop, true);
    for (int i = 0; i <= L.threads; i++)
        pthread_join(tids[i], NULL);
    double elapsed = t_end - t0, cpu = cpu_s() - cpu0;

    uint64_t events = 0, puts = 0, cancelled = 0, errors = 0;
    for (int i = 0; i < L.nconns; i++) {
        events += L.conns[i].events;
        puts += L.conns[i].puts;
        cancelled += L.conns[i].cancelled;
        errors += L.conns[i].errors;
    }
    double expected = (double)puts * L.watchers;
    printf("events=%llu puts=%llu seconds=%.3f events_per_s=%.0f puts_per_s=%.0f "
           "delivered=%.3f cancelled=%llu errors=%llu tool_cpu=%.2f threads=%d\n",
           (unsigned long long)events, (unsigned long long)puts, elapsed,
           (double)events / elapsed, (double)puts / elapsed,
           expected > 0 ? (double)events / expected : 0.0,
           (unsigned long long)cancelled, (unsigned long long)errors, cpu / elapsed, L.threads);
    for (int i = 0; i < L.nconns; i++) {
        close(L.conns[i].fd);
        free(L.conns[i].rbuf);
        free(L.conns[i].wbuf);
    }
    free(L.conns);
    close(L.epfd);
    for (int t = 0; t <= L.threads; t++)
        close(L.epfds[t]);
    return errors > 0 ? 1 : 0;
}
