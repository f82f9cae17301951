/*
 * put_load.c -- closed-loop put load for bench/durable.sh: C connections,
 * each with exactly one put in flight, for D seconds; counts the puts the
 * server acknowledged.
 *
 *   put_load ordo|etcd PORT[,PORT...] [-c conns] [-d seconds] [-k keys]
 *                           [-v value_bytes] [-p path] [-f] [-g]
 *
 * The load has the same shape for both servers: -c connections (default
 * 16), each sending its next put as soon as the reply to the previous one
 * arrives; keys "key:<i>" with i cycling over -k keys (default 100000);
 * values of -v bytes (default 16).
 *   - ordo: RESP2 `SET key:<i> <value>`; the reply is +OK or an error.
 *   - etcd: HTTP/1.1 keep-alive `POST <path>` (default /v3/kv/put) with the
 *     JSON body {"key": base64, "value": base64} to the gRPC gateway on
 *     etcd's client port; a 200 answer is an acknowledged put.
 *
 * -g: reads instead of puts, of the same shape: ordo `GET key:<i>` (a bulk
 * string or nil is an answer); etcd `POST /v3/kv/range` (give -p) with
 * {"key": base64}, a linearizable read by etcd's default. The counts are
 * then reads (puts_per_s names them all the same).
 *
 * -f (ordo only; for a cluster, bench/cluster.sh): follow the leader. Every
 * connection starts on the first PORT. A `-NOTLEADER host:port` reply sends
 * that connection to port (on 127.0.0.1) and its put again there; a
 * `-NOTLEADER ?` reply (no leader known), a closed connection or a refused
 * connect moves it to the next PORT of the list after 20 ms and sends its
 * put again. None of these counts as an error; the output adds
 * redirects= (NOTLEADER replies) and reconnects= (lost connections and
 * refused connects). Without -f there is one PORT and each of these is
 * fatal or an error, as before.
 *
 * Measurement starts once every connection is open and lasts -d seconds
 * (default 10); only replies that arrive inside it count. Puts still in
 * flight at the end are not counted.
 *
 * One thread, poll(). The tool's CPU is a ceiling on what it can measure,
 * so it prints its CPU use (tool_cpu, 1.00 = one core busy).
 *
 * Output: one line of key=value pairs on stdout. Exit status 1 if any put
 * failed.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loadlib.h"

#define CONNS_MAX 1024
#define RBUF_BYTES 65536 /* one reply at a time, so small replies fit easily */
#define WBUF_BYTES 16384
#define PORTS_MAX 16
#define RETRY_S 0.02 /* before reconnecting when no leader is known */

enum proto { PROTO_ORDO, PROTO_ETCD };

typedef struct conn {
    int fd;          /* -1 while lost (-f): reconnect at retry_at */
    int port;
    double retry_at;
    bool busy;       /* a put is in flight (or waits to be sent again) */
    char rbuf[RBUF_BYTES];
    size_t rlen;
    char wbuf[WBUF_BYTES];
    size_t wlen, woff;
} conn_t;

typedef struct load {
    enum proto proto;
    int ports[PORTS_MAX];
    int ports_n;
    bool follow;
    bool get;        /* -g: reads */
    int conns_n;
    double seconds;
    int keys;
    int value_bytes;
    const char *path;
    conn_t *conns;
    bool measuring;
    uint64_t puts;   /* acknowledged while measuring */
    uint64_t sent;
    uint64_t errors;
    uint64_t redirects;  /* -f: NOTLEADER replies */
    uint64_t reconnects; /* -f: lost connections, refused connects */
    uint64_t key_next;
    char value[1024];
    char value_b64[1400];
} load_t;

/* Queues the next put on c (which has none in flight). */
static void queue_put(load_t *L, conn_t *c)
{
    char key[64];
    int kn = snprintf(key, sizeof key, "key:%llu", (unsigned long long)(L->key_next++ % (uint64_t)L->keys));
    int n;
    if (L->proto == PROTO_ORDO) {
        n = L->get ? resp_format(c->wbuf, WBUF_BYTES, 2, (const char *[]){"GET", key})
                   : resp_format(c->wbuf, WBUF_BYTES, 3, (const char *[]){"SET", key, L->value});
    } else {
        char k[128], body[2048];
        base64(key, (size_t)kn, k);
        if (L->get)
            snprintf(body, sizeof body, "{\"key\":\"%s\"}", k);
        else
            snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"%s\"}", k, L->value_b64);
        n = http_post_format(c->wbuf, WBUF_BYTES, L->path, "HTTP/1.1", body);
    }
    if (n < 0) {
        fprintf(stderr, "put_load: request too large\n");
        exit(1);
    }
    c->wlen = (size_t)n;
    c->woff = 0;
    c->busy = true;
    L->sent++;
}

/* The port after c's in the list (the first if c's is not in it). */
static int next_port(const load_t *L, const conn_t *c)
{
    for (int i = 0; i < L->ports_n; i++)
        if (L->ports[i] == c->port)
            return L->ports[(i + 1) % L->ports_n];
    return L->ports[0];
}

/* -f: drop c's connection; it reconnects to port after delay seconds and
 * sends its put (if one is pending) again from the start. */
static void move_to(conn_t *c, int port, double delay)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->port = port;
    c->retry_at = now_s() + delay;
    c->rlen = 0;
    c->woff = 0;
}

/* Sends what it can of the queued request. */
static void flush(load_t *L, conn_t *c)
{
    if (send_some(c->fd, c->wbuf, c->wlen, &c->woff) != 0 && errno != EAGAIN && errno != EINTR) {
        if (!L->follow)
            die("send");
        L->reconnects++;
        move_to(c, next_port(L, c), RETRY_S);
    }
}

/* -f: a -NOTLEADER reply at the head of c->rbuf (n bytes, up to its \r\n)
 * moves c to the leader it names, or to the next port if it names none. */
static void not_leader(load_t *L, conn_t *c, size_t n)
{
    L->redirects++;
    const char *colon = NULL;
    for (const char *q = c->rbuf; q < c->rbuf + n; q++)
        if (*q == ':')
            colon = q;
    int port = colon != NULL ? atoi(colon + 1) : 0;
    if (port > 0 && port < 65536)
        move_to(c, port, 0);
    else
        move_to(c, next_port(L, c), RETRY_S);
}

static void reply_done(load_t *L, conn_t *c, bool ok, const char *p, size_t n)
{
    if (!ok) {
        /* The first line says why: an error reply, or an HTTP status. */
        const char *eol = memchr(p, '\r', n);
        if (L->errors++ < 3)
            fprintf(stderr, "put_load: put failed: %.*s\n", (int)(eol ? (size_t)(eol - p) : n), p);
    } else if (L->measuring) {
        L->puts++;
    }
    c->busy = false;
}

/* Returns the length of the whole reply at the head of c->rbuf, or 0 if it
 * has not all arrived. A SET reply is one line: +OK or -ERR. */
static size_t ordo_reply(load_t *L, conn_t *c)
{
    const char *nl = memchr(c->rbuf, '\n', c->rlen);
    if (nl == NULL)
        return 0;
    size_t n = (size_t)(nl + 1 - c->rbuf);
    if (L->get && c->rbuf[0] == '$') {
        long blen = strtol(c->rbuf + 1, NULL, 10);
        if (blen >= 0) {
            if (c->rlen < n + (size_t)blen + 2)
                return 0;
            n += (size_t)blen + 2;
        }
        reply_done(L, c, true, c->rbuf, n);
        return n;
    }
    if (c->rbuf[0] == '$' || c->rbuf[0] == '*') {
        fprintf(stderr, "put_load: unexpected reply to SET: %.*s\n", (int)n, c->rbuf);
        exit(1);
    }
    if (L->follow && n > 10 && memcmp(c->rbuf, "-NOTLEADER", 10) == 0) {
        not_leader(L, c, n);
        return n;
    }
    reply_done(L, c, c->rbuf[0] == '+', c->rbuf, n);
    return n;
}

static size_t etcd_reply(load_t *L, conn_t *c)
{
    bool ok = false;
    long n = http_reply_len(c->rbuf, c->rlen, &ok);
    if (n < 0) {
        const char *h = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
        fprintf(stderr, "put_load: etcd reply without a length: %.*s\n", (int)(h - c->rbuf), c->rbuf);
        exit(1);
    }
    if (n > 0)
        reply_done(L, c, ok, c->rbuf, (size_t)n);
    return (size_t)n;
}

static void on_readable(load_t *L, conn_t *c)
{
    switch (recv_all(c->fd, c->rbuf, RBUF_BYTES, &c->rlen)) {
    case RECV_CLOSED:
        if (L->follow) {
            L->reconnects++;
            move_to(c, next_port(L, c), RETRY_S);
            return;
        }
        fprintf(stderr, "put_load: the server closed a connection\n");
        exit(1);
    case RECV_FULL:
        fprintf(stderr, "put_load: a reply larger than %d bytes\n", RBUF_BYTES);
        exit(1);
    case RECV_AGAIN:
        break;
    }
    for (;;) {
        if (!c->busy) {
            if (c->rlen > 0) {
                fprintf(stderr, "put_load: %zu unexpected bytes from the server\n", c->rlen);
                exit(1);
            }
            return;
        }
        size_t used = L->proto == PROTO_ORDO ? ordo_reply(L, c) : etcd_reply(L, c);
        if (used == 0 || c->fd < 0)
            return; /* incomplete, or moved (-f): its buffer is gone */
        memmove(c->rbuf, c->rbuf + used, c->rlen - used);
        c->rlen -= used;
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: put_load ordo|etcd PORT[,PORT...] [-c conns] [-d seconds] [-k keys] "
                    "[-v value_bytes] [-p path] [-f] [-g]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    load_t L = {.conns_n = 16, .seconds = 10, .keys = 100000, .value_bytes = 16, .path = "/v3/kv/put"};
    if (argc < 3)
        usage();
    if (strcmp(argv[1], "ordo") == 0)
        L.proto = PROTO_ORDO;
    else if (strcmp(argv[1], "etcd") == 0)
        L.proto = PROTO_ETCD;
    else
        usage();
    for (const char *q = argv[2]; *q != '\0'; q++) {
        int port = atoi(q);
        if (L.ports_n == PORTS_MAX || port < 1 || port > 65535)
            usage();
        L.ports[L.ports_n++] = port;
        q = strchr(q, ',');
        if (q == NULL)
            break;
    }
    for (int i = 3; i < argc; i += 2) {
        if (strcmp(argv[i], "-f") == 0) {
            L.follow = true;
            i--;
            continue;
        }
        if (strcmp(argv[i], "-g") == 0) {
            L.get = true;
            i--;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[i + 1];
        if (strcmp(argv[i], "-c") == 0)
            L.conns_n = atoi(v);
        else if (strcmp(argv[i], "-d") == 0)
            L.seconds = atof(v);
        else if (strcmp(argv[i], "-k") == 0)
            L.keys = atoi(v);
        else if (strcmp(argv[i], "-v") == 0)
            L.value_bytes = atoi(v);
        else if (strcmp(argv[i], "-p") == 0)
            L.path = v;
        else
            usage();
    }
    if (L.ports_n < 1 || (L.ports_n > 1 && !L.follow) || (L.follow && L.proto != PROTO_ORDO) || L.conns_n < 1 || L.conns_n > CONNS_MAX || L.keys < 1 ||
        L.value_bytes < 1 || L.value_bytes >= (int)sizeof L.value || L.seconds <= 0 ||
        strlen(L.path) > 200 || L.path[0] != '/')
        usage();
    memset(L.value, 'v', (size_t)L.value_bytes);
    base64(L.value, (size_t)L.value_bytes, L.value_b64);

    L.conns = calloc((size_t)L.conns_n, sizeof *L.conns);
    struct pollfd *pfd = calloc((size_t)L.conns_n, sizeof *pfd);
    if (L.conns == NULL || pfd == NULL)
        die("calloc");
    for (int i = 0; i < L.conns_n; i++) {
        conn_t *c = &L.conns[i];
        c->port = L.ports[0];
        c->fd = L.follow ? try_connect(c->port) : connect_to(c->port);
        if (c->fd >= 0)
            set_nonblock(c->fd);
        else
            move_to(c, next_port(&L, c), 0);
    }

    L.measuring = true;
    double cpu0 = cpu_s(), t0 = now_s(), end = t0 + L.seconds, t;
    while ((t = now_s()) < end) {
        for (int i = 0; i < L.conns_n; i++) {
            conn_t *c = &L.conns[i];
            if (c->fd < 0 && t >= c->retry_at) {
                c->fd = try_connect(c->port);
                if (c->fd >= 0) {
                    set_nonblock(c->fd);
                } else {
                    L.reconnects++;
                    move_to(c, next_port(&L, c), RETRY_S);
                }
            }
            if (c->fd >= 0) {
                if (!c->busy)
                    queue_put(&L, c);
                flush(&L, c);
            }
            pfd[i].fd = c->fd; /* poll() skips a negative fd */
            pfd[i].events = POLLIN | (c->fd >= 0 && c->woff < c->wlen ? POLLOUT : 0);
        }
        int n = poll_turn(pfd, L.conns_n, end, t);
        if (n < 0)
            continue;
        for (int i = 0; i < L.conns_n && n > 0; i++) {
            if (pfd[i].revents == 0)
                continue;
            n--;
            if ((pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) && L.conns[i].fd >= 0)
                on_readable(&L, &L.conns[i]);
        }
    }
    L.measuring = false;
    double elapsed = t - t0, cpu = cpu_s() - cpu0;

    printf("puts=%llu seconds=%.3f puts_per_s=%.0f conns=%d errors=%llu tool_cpu=%.2f",
           (unsigned long long)L.puts, elapsed, (double)L.puts / elapsed, L.conns_n,
           (unsigned long long)L.errors, cpu / elapsed);
    if (L.follow)
        printf(" redirects=%llu reconnects=%llu", (unsigned long long)L.redirects,
               (unsigned long long)L.reconnects);
    printf("\n");
    for (int i = 0; i < L.conns_n; i++)
        if (L.conns[i].fd >= 0)
            close(L.conns[i].fd);
    free(L.conns);
    free(pfd);
    return L.errors > 0 ? 1 : 0;
}
