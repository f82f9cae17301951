/*
 * lock_load.c -- closed-loop lock load for bench/lock.sh: C connections,
 * each acquiring and releasing its own lock name in a loop, for D seconds;
 * counts completed acquire+release cycles.
 *
 *   lock_load ordo|redis|etcd PORT [-c conns] [-d seconds] [-t ttl_ms]
 *
 * The shape is the same for every server: -c connections (default 16),
 * connection i uses lock "lock:<pid>:<i>", one request in flight per connection,
 * the next sent as soon as the previous reply arrives.
 *   - ordo:  LOCK.ACQUIRE lock:<i> <ttl>  -> :token
 *            LOCK.RELEASE lock:<i> <token> -> :1
 *   - redis: SET lock:<i> <token> NX PX <ttl> -> +OK
 *            EVALSHA <compare-and-delete> 1 lock:<i> <token> -> :1
 *            (the script, loaded once per connection with SCRIPT LOAD, is
 *            the usual `if GET == token then DEL`; the token is a
 *            per-connection counter: Redis has no fencing tokens of its own)
 *   - etcd:  its v3lock service through the HTTP/JSON gateway, keep-alive:
 *            POST /v3/lock/lock {"name", "lease"} -> {"key"}
 *            POST /v3/lock/unlock {"key"}
 *            with one lease per connection granted before measuring
 *            (POST /v3/lease/grant, TTL = ttl rounded up to seconds).
 * A cycle counts when its release is acknowledged inside the measurement.
 * A failed acquire or release (nil, 0, an error, a non-200) is an error:
 * with one connection per lock name nothing else contends.
 *
 * One thread, poll(). Output: one line of key=value pairs on stdout
 * (cycles, cycles_per_s, errors, tool_cpu). Exit status 1 on any error.
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
#define RBUF_BYTES 65536
#define WBUF_BYTES 4096

enum proto { P_ORDO, P_REDIS, P_ETCD };
enum phase { PH_ACQUIRE, PH_RELEASE };

/* Redis compare-and-delete: release only our own token. */
static const char CAD_SCRIPT[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

typedef struct conn {
    int fd;
    int idx;
    enum phase phase;
    bool busy;
    char name[48];
    char token[128];     /* ordo: the token; redis: our value; etcd: the lock key (base64) */
    uint64_t counter;
    char lease[32];      /* etcd */
    char sha[48];        /* redis */
    char rbuf[RBUF_BYTES];
    size_t rlen;
    char wbuf[WBUF_BYTES];
    size_t wlen, woff;
} conn_t;

typedef struct load {
    enum proto proto;
    int port, conns_n;
    double seconds;
    long ttl_ms;
    conn_t *conns;
    bool measuring;
    uint64_t cycles, errors;
} load_t;

/* Append a RESP array of n bulk strings. */
/* Queue the request of length n (-1: it did not fit) in c->wbuf. */
static void queue_request(conn_t *c, int n)
{
    if (n < 0) {
        fprintf(stderr, "lock_load: request too large\n");
        exit(1);
    }
    c->wlen = (size_t)n;
    c->woff = 0;
    c->busy = true;
}

static void resp_cmd(conn_t *c, int n, const char **args)
{
    queue_request(c, resp_format(c->wbuf, WBUF_BYTES, n, args));
}

static void http_post(conn_t *c, const char *path, const char *body)
{
    queue_request(c, http_post_format(c->wbuf, WBUF_BYTES, path, "HTTP/1.1", body));
}

static void queue_next(load_t *L, conn_t *c)
{
    char ttl[32], body[512], nb[64];
    snprintf(ttl, sizeof ttl, "%ld", L->ttl_ms);
    switch (L->proto) {
    case P_ORDO:
        if (c->phase == PH_ACQUIRE)
            resp_cmd(c, 3, (const char *[]){"LOCK.ACQUIRE", c->name, ttl});
        else
            resp_cmd(c, 3, (const char *[]){"LOCK.RELEASE", c->name, c->token});
        break;
    case P_REDIS:
        if (c->phase == PH_ACQUIRE) {
            snprintf(c->token, sizeof c->token, "%d-%llu", c->idx, (unsigned long long)++c->counter);
            resp_cmd(c, 6, (const char *[]){"SET", c->name, c->token, "NX", "PX", ttl});
        } else {
            resp_cmd(c, 5, (const char *[]){"EVALSHA", c->sha, "1", c->name, c->token});
        }
        break;
    case P_ETCD:
        if (c->phase == PH_ACQUIRE) {
            base64(c->name, strlen(c->name), nb);
            snprintf(body, sizeof body, "{\"name\":\"%s\",\"lease\":\"%s\"}", nb, c->lease);
            http_post(c, "/v3/lock/lock", body);
        } else {
            snprintf(body, sizeof body, "{\"key\":\"%s\"}", c->token);
            http_post(c, "/v3/lock/unlock", body);
        }
        break;
    }
}

static void flush(conn_t *c)
{
    if (send_some(c->fd, c->wbuf, c->wlen, &c->woff) != 0 && errno != EAGAIN && errno != EINTR)
        die("send");
}

/* Length of the complete RESP reply (a line, or a bulk) at the head of
 * buf, 0 if incomplete. */
static size_t resp_len(const char *buf, size_t len)
{
    const char *nl = memchr(buf, '\n', len);
    if (nl == NULL)
        return 0;
    size_t n = (size_t)(nl + 1 - buf);
    if (buf[0] == '$') {
        long bl = strtol(buf + 1, NULL, 10);
        if (bl < 0)
            return n;
        if (len < n + (size_t)bl + 2)
            return 0;
        return n + (size_t)bl + 2;
    }
    return n;
}

/* Length of the complete HTTP response at the head of buf, 0 if
 * incomplete; *body / *blen receive its body. */
static size_t http_len(const char *p, size_t len, const char **body, size_t *blen)
{
    const char *h = memmem(p, len, "\r\n\r\n", 4);
    if (h == NULL)
        return 0;
    const char *cl = memmem(p, (size_t)(h - p), "Content-Length:", 15);
    if (cl == NULL) {
        fprintf(stderr, "lock_load: etcd reply without Content-Length: %.*s\n", (int)(h - p), p);
        exit(1);
    }
    long n = strtol(cl + 15, NULL, 10);
    *body = h + 4;
    if ((size_t)(p + len - *body) < (size_t)n)
        return 0;
    *blen = (size_t)n;
    return (size_t)(*body + n - p);
}

/* Copy the JSON string value of "field" from body into out. */
static bool json_str(const char *body, size_t blen, const char *field, char *out, size_t olen)
{
    char pat[64];
    int pn = snprintf(pat, sizeof pat, "\"%s\":\"", field);
    const char *f = memmem(body, blen, pat, (size_t)pn);
    if (f == NULL)
        return false;
    f += pn;
    const char *e = memchr(f, '"', (size_t)(body + blen - f));
    if (e == NULL || (size_t)(e - f) >= olen)
        return false;
    memcpy(out, f, (size_t)(e - f));
    out[e - f] = '\0';
    return true;
}

static void fail(load_t *L, const char *what, const char *p, size_t n)
{
    const char *eol = memchr(p, '\r', n);
    if (L->errors++ < 3)
        fprintf(stderr, "lock_load: %s failed: %.*s\n", what, (int)(eol ? (size_t)(eol - p) : n), p);
}

/* Consume one reply at the head of c->rbuf; returns its length or 0. */
static size_t on_reply(load_t *L, conn_t *c)
{
    const char *p = c->rbuf;
    size_t n;
    bool ok;
    if (L->proto == P_ETCD) {
        const char *body;
        size_t blen;
        n = http_len(p, c->rlen, &body, &blen);
        if (n == 0)
            return 0;
        ok = c->rlen >= 12 && memcmp(p, "HTTP/1.1 200", 12) == 0;
        if (ok && c->phase == PH_ACQUIRE)
            ok = json_str(body, blen, "key", c->token, sizeof c->token);
    } else {
        n = resp_len(p, c->rlen);
        if (n == 0)
            return 0;
        if (c->phase == PH_ACQUIRE && L->proto == P_ORDO) {
            ok = p[0] == ':';
            if (ok) {
                const char *nl = memchr(p, '\r', n);
                snprintf(c->token, sizeof c->token, "%.*s", (int)(nl - p - 1), p + 1);
            }
        } else if (c->phase == PH_ACQUIRE) {
            ok = n >= 3 && memcmp(p, "+OK", 3) == 0;
        } else {
            ok = n >= 2 && memcmp(p, ":1", 2) == 0;
        }
    }
    c->busy = false;
    if (!ok) {
        fail(L, c->phase == PH_ACQUIRE ? "acquire" : "release", p, n);
        c->phase = PH_ACQUIRE; /* start over (its TTL frees the lock) */
        return n;
    }
    if (c->phase == PH_RELEASE && L->measuring)
        L->cycles++;
    c->phase = c->phase == PH_ACQUIRE ? PH_RELEASE : PH_ACQUIRE;
    return n;
}

static void on_readable(load_t *L, conn_t *c)
{
    switch (recv_all(c->fd, c->rbuf, RBUF_BYTES, &c->rlen)) {
    case RECV_CLOSED:
        fprintf(stderr, "lock_load: the server closed a connection\n");
        exit(1);
    case RECV_FULL:
        fprintf(stderr, "lock_load: reply too large\n");
        exit(1);
    case RECV_AGAIN:
        break;
    }
    while (c->busy) {
        size_t used = on_reply(L, c);
        if (used == 0)
            return;
        memmove(c->rbuf, c->rbuf + used, c->rlen - used);
        c->rlen -= used;
    }
}

/* Blocking request/response for the set-up (SCRIPT LOAD, lease grant). */
static void setup_call(load_t *L, conn_t *c, char *out, size_t olen)
{
    flush(c);
    for (;;) {
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, RBUF_BYTES - c->rlen, 0);
        if (n <= 0)
            die("recv (setup)");
        c->rlen += (size_t)n;
        const char *body;
        size_t blen, len;
        if (L->proto == P_ETCD) {
            len = http_len(c->rbuf, c->rlen, &body, &blen);
            if (len == 0)
                continue;
            if (!json_str(body, blen, "ID", out, olen)) {
                fprintf(stderr, "lock_load: lease grant failed: %.*s\n", (int)len, c->rbuf);
                exit(1);
            }
        } else {
            len = resp_len(c->rbuf, c->rlen);
            if (len == 0)
                continue;
            if (c->rbuf[0] != '$') {
                fprintf(stderr, "lock_load: SCRIPT LOAD failed: %.*s\n", (int)len, c->rbuf);
                exit(1);
            }
            const char *nl = memchr(c->rbuf, '\n', len);
            snprintf(out, olen, "%.*s", (int)(len - (size_t)(nl + 1 - c->rbuf) - 2), nl + 1);
        }
        c->rlen = 0;
        c->busy = false;
        return;
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: lock_load ordo|redis|etcd PORT [-c conns] [-d seconds] [-t ttl_ms]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    load_t L = {.conns_n = 16, .seconds = 10, .ttl_ms = 10000};
    if (argc < 3)
        usage();
    if (strcmp(argv[1], "ordo") == 0)
        L.proto = P_ORDO;
    else if (strcmp(argv[1], "redis") == 0)
        L.proto = P_REDIS;
    else if (strcmp(argv[1], "etcd") == 0)
        L.proto = P_ETCD;
    else
        usage();
    L.port = atoi(argv[2]);
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-c") == 0)
            L.conns_n = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-d") == 0)
            L.seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "-t") == 0)
            L.ttl_ms = atol(argv[i + 1]);
        else
            usage();
    }
    if (L.port < 1 || L.port > 65535 || L.conns_n < 1 || L.conns_n > CONNS_MAX || L.seconds <= 0 ||
        L.ttl_ms < 1)
        usage();
    L.conns = calloc((size_t)L.conns_n, sizeof *L.conns);
    struct pollfd *pfd = calloc((size_t)L.conns_n, sizeof *pfd);
    if (L.conns == NULL || pfd == NULL)
        die("calloc");
    for (int i = 0; i < L.conns_n; i++) {
        conn_t *c = &L.conns[i];
        c->fd = connect_to(L.port);
        c->idx = i;
        /* Names unique to this run: a lock the previous run left held (its
         * last acquire landed after the measurement ended) must not block. */
        snprintf(c->name, sizeof c->name, "lock:%ld:%d", (long)getpid(), i);
        if (L.proto == P_REDIS) {
            resp_cmd(c, 3, (const char *[]){"SCRIPT", "LOAD", CAD_SCRIPT});
            setup_call(&L, c, c->sha, sizeof c->sha);
        } else if (L.proto == P_ETCD) {
            char body[64];
            snprintf(body, sizeof body, "{\"TTL\":%ld}", (L.ttl_ms + 999) / 1000 + 60);
            http_post(c, "/v3/lease/grant", body);
            setup_call(&L, c, c->lease, sizeof c->lease);
        }
        set_nonblock(c->fd);
        pfd[i].fd = c->fd;
    }

    L.measuring = true;
    double cpu0 = cpu_s(), t0 = now_s(), end = t0 + L.seconds, t;
    while ((t = now_s()) < end) {
        for (int i = 0; i < L.conns_n; i++) {
            conn_t *c = &L.conns[i];
            if (!c->busy)
                queue_next(&L, c);
            flush(c);
            pfd[i].events = POLLIN | (c->woff < c->wlen ? POLLOUT : 0);
        }
        if (poll_turn(pfd, L.conns_n, end, t) < 0)
            continue;
        for (int i = 0; i < L.conns_n; i++)
            if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP))
                on_readable(&L, &L.conns[i]);
    }
    double el = now_s() - t0, cpu = cpu_s() - cpu0;
    printf("cycles=%llu cycles_per_s=%.0f errors=%llu tool_cpu=%.2f conns=%d seconds=%.2f\n",
           (unsigned long long)L.cycles, (double)L.cycles / el, (unsigned long long)L.errors, cpu / el, L.conns_n,
           el);
    for (int i = 0; i < L.conns_n; i++)
        close(L.conns[i].fd);
    free(L.conns);
    free(pfd);
    return L.errors ? 1 : 0;
}
