/*
 * ordo_bench.c -- ordo-bench, the queue load tool of bench/queue.sh:
 * push -> pull -> ack cycles against ordod, beanstalkd or Redis streams,
 * or Q.CALL round trips against ordod.
 *
 *   ordo_bench ordo|ordo-eo|beanstalkd|redis-streams|call PORT [-n producers]
 *       [-m consumers] [-c callers] [-d seconds] [-k keys] [-v payload_bytes]
 *       [-w window] [-q queue]
 *
 * Cycle mode (ordo, beanstalkd, redis-streams): -n producer connections
 * (default 8) and -m consumer connections (default 8), each with exactly
 * one request in flight:
 *   - a producer pushes its next message as soon as the previous push is
 *     acknowledged, as long as fewer than -w messages (default 1000) are
 *     pushed and not yet acked (so the backlog stays bounded and the run
 *     measures the steady state, not a growing queue);
 *   - a consumer pulls (blocking, 1 s), acks what it got, pulls again.
 * The commands, one request per round trip for every backend:
 *   - ordo:          Q.PUSH q <key> <payload> / Q.PULL q BLOCK 1000 /
 *                    Q.ACK q <id> <token>; keys "k<i>" with i cycling over
 *                    -k keys (default 1000);
 *   - beanstalkd:    put 0 0 60 <bytes> / reserve-with-timeout 1 /
 *                    delete <id>, on tube q (use / watch + ignore default);
 *   - redis-streams: XADD q * k <key> p <payload> /
 *                    XREADGROUP GROUP g c<i> COUNT 1 BLOCK 1000 STREAMS q > /
 *                    XACK q g <id>, after XGROUP CREATE q g $ MKSTREAM.
 *   - ordo-eo:       as ordo, but the ack is the exactly-once cycle
 *                    (docs/exactly-once.md): MULTI / SET eo:<key> <payload>
 *                    / Q.ACK q <id> <token> / EXEC, pipelined in one write
 *                    (four replies, one round trip);
 * Call mode (call): -c callers (default 8) each do Q.CALL q <key> <payload>
 * TIMEOUT 30000 round trips while -m consumers pull and Q.ACK ... RESULT
 * <payload>; the figure is calls/s. -c 0 runs the consumers alone, for
 * calls another tool makes (bench/instr_http.sh: wrk, redis-benchmark).
 *
 * Measurement starts once every connection is open and set up and lasts -d
 * seconds (default 10); only replies that arrive inside it count. Then the
 * producers (callers) stop and the consumers drain what is left (for up to
 * 10 s, uncounted), and the queue is removed (Q.DROP, DEL; a beanstalkd tube
 * goes away once empty). -q names the queue / tube / stream (default
 * "ob-<pid>-<time>", so rounds against one server never share one).
 *
 * Progress: a line a second on stderr (pushed/s, acked/s, backlog; calls/s).
 * Result: one line of key=value pairs on stdout (acked_all / calls_all count
 * the drain too: what the server did for the whole run). One thread, poll(); the
 * tool's CPU is a ceiling on what it can measure, so it prints its CPU use
 * (tool_cpu, 1.00 = one core busy). Exit status 1 if any request failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "loadlib.h"

#define CONNS_MAX 1024
#define RBUF_BYTES 65536
#define WBUF_BYTES 16384
#define PAYLOAD_MAX 4096
#define ELS_MAX 64
#define DRAIN_SECONDS 10.0

enum mode { M_ORDO, M_BEANSTALK, M_REDIS, M_CALL, M_ORDO_EO };
enum role { R_PRODUCER, R_CONSUMER, R_CALLER };
enum op { OP_NONE, OP_PUSH, OP_PULL, OP_ACK, OP_CALL };

static const char *mode_names[] = {"ordo", "beanstalkd", "redis-streams", "call", "ordo-eo"};
#define MODES 5

typedef struct conn {
    int fd;
    int idx;          /* index among the connections of its role */
    enum role role;
    enum op op;       /* the request in flight, OP_NONE if none */
    int skip;         /* ordo-eo: replies to read before the EXEC's (+OK, +QUEUED...) */
    char rbuf[RBUF_BYTES];
    size_t rlen;
    char wbuf[WBUF_BYTES];
    size_t wlen, woff;
} conn_t;

typedef struct bench {
    enum mode mode;
    int port;
    int producers, consumers, callers;
    double seconds;
    int keys;
    int payload_bytes;
    long window;
    char queue[128];
    char payload[PAYLOAD_MAX + 1];
    conn_t *conns;
    int conns_n;
    bool measuring, stopping;
    uint64_t key_next;
    /* all counted from the start, measured or not */
    uint64_t pushed_all, acked_all, calls_all;
    /* counted while measuring */
    uint64_t pushed, pulled, acked, calls, empty_pulls;
    uint64_t errors;
} bench_t;

/* ---- small helpers ---------------------------------------------------- */

static void fail(const char *fmt, const char *p, size_t n)
{
    fprintf(stderr, "ordo-bench: ");
    fprintf(stderr, fmt, (int)(n > 200 ? 200 : n), p);
    fprintf(stderr, "\n");
    exit(1);
}

/* ---- request building ------------------------------------------------- */

typedef struct wb {
    char *p;
    size_t n, cap;
} wb_t;

static void wb_raw(wb_t *w, const char *s, size_t n)
{
    if (w->n + n > w->cap) {
        fprintf(stderr, "ordo-bench: request too large\n");
        exit(1);
    }
    memcpy(w->p + w->n, s, n);
    w->n += n;
}

/* Appends one RESP2 command of argc bulk strings (lengths from strlen
 * unless lens gives them). */
static void resp_cmd(wb_t *w, int argc, const char *const *argv, const size_t *lens)
{
    char hdr[32];
    wb_raw(w, hdr, (size_t)snprintf(hdr, sizeof hdr, "*%d\r\n", argc));
    for (int i = 0; i < argc; i++) {
        size_t n = lens && lens[i] != (size_t)-1 ? lens[i] : strlen(argv[i]);
        wb_raw(w, hdr, (size_t)snprintf(hdr, sizeof hdr, "$%zu\r\n", n));
        wb_raw(w, argv[i], n);
        wb_raw(w, "\r\n", 2);
    }
}

static wb_t conn_wb(conn_t *c)
{
    return (wb_t){.p = c->wbuf, .n = 0, .cap = WBUF_BYTES};
}

static void conn_send(conn_t *c, wb_t *w, enum op op)
{
    c->wlen = w->n;
    c->woff = 0;
    c->op = op;
}

static void next_key(bench_t *B, char *key, size_t cap)
{
    snprintf(key, cap, "k%llu", (unsigned long long)(B->key_next++ % (uint64_t)B->keys));
}

static void queue_push(bench_t *B, conn_t *c)
{
    wb_t w = conn_wb(c);
    char key[32];
    next_key(B, key, sizeof key);
    switch (B->mode) {
    case M_ORDO:
    case M_ORDO_EO: {
        const char *a[] = {"Q.PUSH", B->queue, key, B->payload};
        resp_cmd(&w, 4, a, NULL);
        break;
    }
    case M_REDIS: {
        const char *a[] = {"XADD", B->queue, "*", "k", key, "p", B->payload};
        resp_cmd(&w, 7, a, NULL);
        break;
    }
    case M_BEANSTALK: {
        char hdr[64];
        wb_raw(&w, hdr, (size_t)snprintf(hdr, sizeof hdr, "put 0 0 60 %d\r\n", B->payload_bytes));
        wb_raw(&w, B->payload, (size_t)B->payload_bytes);
        wb_raw(&w, "\r\n", 2);
        break;
    }
    case M_CALL: {
        const char *a[] = {"Q.CALL", B->queue, key, B->payload, "TIMEOUT", "30000"};
        resp_cmd(&w, 6, a, NULL);
        conn_send(c, &w, OP_CALL);
        return;
    }
    }
    conn_send(c, &w, OP_PUSH);
}

static void queue_pull(bench_t *B, conn_t *c)
{
    wb_t w = conn_wb(c);
    switch (B->mode) {
    case M_ORDO:
    case M_ORDO_EO:
    case M_CALL: {
        const char *a[] = {"Q.PULL", B->queue, "BLOCK", "1000"};
        resp_cmd(&w, 4, a, NULL);
        break;
    }
    case M_REDIS: {
        char name[32];
        snprintf(name, sizeof name, "c%d", c->idx);
        const char *a[] = {"XREADGROUP", "GROUP", "g", name, "COUNT", "1", "BLOCK", "1000",
                           "STREAMS", B->queue, ">"};
        resp_cmd(&w, 11, a, NULL);
        break;
    }
    case M_BEANSTALK:
        wb_raw(&w, "reserve-with-timeout 1\r\n", 24);
        break;
    }
    conn_send(c, &w, OP_PULL);
}

/* id and token are the strings the pull reply carried. */
static void queue_ack(bench_t *B, conn_t *c, const char *id, size_t idn, const char *tok, size_t tokn,
                      const char *key, size_t keyn)
{
    wb_t w = conn_wb(c);
    switch (B->mode) {
    case M_ORDO_EO: { /* the exactly-once cycle: the state write and the ack in one transaction */
        char skey[128];
        int sn = snprintf(skey, sizeof skey, "eo:%.*s", (int)(keyn > 100 ? 100 : keyn), key);
        const char *m[] = {"MULTI"};
        resp_cmd(&w, 1, m, NULL);
        const char *st[] = {"SET", skey, B->payload};
        size_t stl[] = {(size_t)-1, (size_t)sn, (size_t)-1};
        resp_cmd(&w, 3, st, stl);
        const char *a[] = {"Q.ACK", B->queue, id, tok};
        size_t l[] = {(size_t)-1, (size_t)-1, idn, tokn};
        resp_cmd(&w, 4, a, l);
        const char *e[] = {"EXEC"};
        resp_cmd(&w, 1, e, NULL);
        c->skip = 3;
        break;
    }
    case M_ORDO: {
        const char *a[] = {"Q.ACK", B->queue, id, tok};
        size_t l[] = {(size_t)-1, (size_t)-1, idn, tokn};
        resp_cmd(&w, 4, a, l);
        break;
    }
    case M_CALL: {
        const char *a[] = {"Q.ACK", B->queue, id, tok, "RESULT", B->payload};
        size_t l[] = {(size_t)-1, (size_t)-1, idn, tokn, (size_t)-1, (size_t)-1};
        resp_cmd(&w, 6, a, l);
        break;
    }
    case M_REDIS: {
        const char *a[] = {"XACK", B->queue, "g", id};
        size_t l[] = {(size_t)-1, (size_t)-1, (size_t)-1, idn};
        resp_cmd(&w, 4, a, l);
        break;
    }
    case M_BEANSTALK:
        wb_raw(&w, "delete ", 7);
        wb_raw(&w, id, idn);
        wb_raw(&w, "\r\n", 2);
        break;
    }
    conn_send(c, &w, OP_ACK);
}

/* ---- reply parsing ---------------------------------------------------- */

/* One RESP2 element; a reply is parsed into a flat pre-order list. */
typedef struct el {
    char t;          /* '+', '-', ':', '$', '*', or 'N' for a nil */
    const char *s;   /* simple/error/bulk text, integer digits */
    size_t n;
    long long i;     /* integer value, array length */
} el_t;

/* Returns the bytes of the whole reply at p, 0 if it has not all arrived;
 * exits on a malformed one or one with more than ELS_MAX elements. */
static size_t resp_parse(const char *p, const char *e, el_t *els, int *nel)
{
    const char *nl = memchr(p, '\n', (size_t)(e - p));
    if (nl == NULL)
        return 0;
    if (nl == p || nl[-1] != '\r')
        fail("malformed reply: %.*s", p, (size_t)(nl - p));
    if (*nel >= ELS_MAX)
        fail("reply with too many elements: %.*s", p, (size_t)(nl - p));
    el_t *x = &els[(*nel)++];
    x->t = p[0];
    x->s = p + 1;
    x->n = (size_t)(nl - 1 - (p + 1));
    x->i = 0;
    const char *after = nl + 1;
    switch (p[0]) {
    case '+':
    case '-':
        return (size_t)(after - p);
    case ':':
        x->i = strtoll(x->s, NULL, 10);
        return (size_t)(after - p);
    case '_':
        x->t = 'N';
        return (size_t)(after - p);
    case '$': {
        long long n = strtoll(x->s, NULL, 10);
        if (n < 0) {
            x->t = 'N';
            return (size_t)(after - p);
        }
        if (e - after < n + 2)
            return 0;
        x->s = after;
        x->n = (size_t)n;
        return (size_t)(after + n + 2 - p);
    }
    case '*': {
        long long n = strtoll(x->s, NULL, 10);
        if (n < 0) {
            x->t = 'N';
            return (size_t)(after - p);
        }
        x->i = n;
        const char *q = after;
        for (long long k = 0; k < n; k++) {
            size_t used = resp_parse(q, e, els, nel);
            if (used == 0)
                return 0;
            q += used;
        }
        return (size_t)(q - p);
    }
    default:
        fail("unexpected reply: %.*s", p, (size_t)(nl - p));
    }
    return 0;
}

static void request_failed(bench_t *B, enum op op, const char *p, size_t n)
{
    static const char *ops[] = {"none", "push", "pull", "ack", "call"};
    if (B->errors++ < 3)
        fprintf(stderr, "ordo-bench: %s failed: %.*s\n", ops[op], (int)(n > 200 ? 200 : n), p);
}

static void on_pushed(bench_t *B)
{
    B->pushed_all++;
    if (B->measuring)
        B->pushed++;
}

static void on_acked(bench_t *B)
{
    B->acked_all++;
    if (B->measuring)
        B->acked++;
}

/* Handles one RESP reply to c's request; returns its length or 0. */
static size_t resp_reply(bench_t *B, conn_t *c)
{
    el_t els[ELS_MAX];
    int nel = 0;
    size_t used = resp_parse(c->rbuf, c->rbuf + c->rlen, els, &nel);
    if (used == 0)
        return 0;
    if (c->skip > 0) { /* ordo-eo: MULTI's +OK, the +QUEUEDs */
        c->skip--;
        if (els[0].t == '-')
            request_failed(B, c->op, els[0].s, els[0].n);
        return used;
    }
    enum op op = c->op;
    c->op = OP_NONE;
    if (els[0].t == '-') {
        request_failed(B, op, els[0].s, els[0].n);
        if (op == OP_PULL || op == OP_ACK)
            queue_pull(B, c); /* keep consuming */
        return used;
    }
    switch (op) {
    case OP_PUSH:
        on_pushed(B);
        break;
    case OP_CALL:
        B->calls_all++;
        if (B->measuring)
            B->calls++;
        break;
    case OP_ACK:
        if (B->mode == M_ORDO_EO ? !(els[0].t == '*' && nel >= 3 && els[2].t == ':' && els[2].i == 1)
                                 : !(els[0].t == ':' && els[0].i == 1)) {
            request_failed(B, op, "acked nothing (0)", 17);
        } else {
            on_acked(B);
        }
        queue_pull(B, c);
        break;
    case OP_PULL:
        if (B->mode == M_REDIS) {
            /* nil, or [[stream, [[id, [k, key, p, payload]]]]] */
            if (els[0].t == 'N' || nel < 6) {
                if (B->measuring)
                    B->empty_pulls++;
                queue_pull(B, c);
            } else {
                if (els[5].t != '$')
                    fail("unexpected XREADGROUP reply: %.*s", c->rbuf, used);
                if (B->measuring)
                    B->pulled++;
                queue_ack(B, c, els[5].s, els[5].n, NULL, 0, NULL, 0);
            }
        } else {
            /* [] or [[id, key, payload, attempt, token]] */
            if (els[0].t != '*')
                fail("unexpected Q.PULL reply: %.*s", c->rbuf, used);
            if (els[0].i == 0) {
                if (B->measuring)
                    B->empty_pulls++;
                queue_pull(B, c);
            } else {
                if (nel < 7 || els[1].t != '*' || els[1].i != 5)
                    fail("unexpected Q.PULL reply: %.*s", c->rbuf, used);
                if (B->measuring)
                    B->pulled++;
                queue_ack(B, c, els[2].s, els[2].n, els[6].s, els[6].n, els[3].s, els[3].n);
            }
        }
        break;
    case OP_NONE:
        fail("reply with no request: %.*s", c->rbuf, used);
    }
    return used;
}

/* Handles one beanstalkd reply to c's request; returns its length or 0. */
static size_t beanstalk_reply(bench_t *B, conn_t *c)
{
    const char *p = c->rbuf;
    const char *nl = memmem(p, c->rlen, "\r\n", 2);
    if (nl == NULL)
        return 0;
    size_t line = (size_t)(nl - p), used = line + 2;
    enum op op = c->op;
    c->op = OP_NONE;
    switch (op) {
    case OP_PUSH:
        if (line > 9 && memcmp(p, "INSERTED ", 9) == 0)
            on_pushed(B);
        else
            request_failed(B, op, p, line);
        break;
    case OP_PULL:
        if (line > 9 && memcmp(p, "RESERVED ", 9) == 0) {
            const char *id = p + 9;
            const char *sp = memchr(id, ' ', line - 9);
            if (sp == NULL)
                fail("unexpected reserve reply: %.*s", p, line);
            long bytes = strtol(sp + 1, NULL, 10);
            if (bytes < 0 || c->rlen < used + (size_t)bytes + 2) {
                c->op = op;
                return 0; /* the job body has not all arrived */
            }
            used += (size_t)bytes + 2;
            if (B->measuring)
                B->pulled++;
            queue_ack(B, c, id, (size_t)(sp - id), NULL, 0, NULL, 0);
        } else if (line == 9 && memcmp(p, "TIMED_OUT", 9) == 0) {
            if (B->measuring)
                B->empty_pulls++;
            queue_pull(B, c);
        } else {
            request_failed(B, op, p, line);
            queue_pull(B, c);
        }
        break;
    case OP_ACK:
        if (line == 7 && memcmp(p, "DELETED", 7) == 0)
            on_acked(B);
        else
            request_failed(B, op, p, line);
        queue_pull(B, c);
        break;
    default:
        fail("reply with no request: %.*s", p, line);
    }
    return used;
}

/* ---- I/O -------------------------------------------------------------- */

static void flush(conn_t *c)
{
    while (c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            die("send");
        }
        c->woff += (size_t)n;
    }
}

static void on_readable(bench_t *B, conn_t *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, RBUF_BYTES - c->rlen, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            die("recv");
        }
        if (n == 0) {
            fprintf(stderr, "ordo-bench: the server closed a connection\n");
            exit(1);
        }
        c->rlen += (size_t)n;
        if (c->rlen == RBUF_BYTES) {
            fprintf(stderr, "ordo-bench: a reply larger than %d bytes\n", RBUF_BYTES);
            exit(1);
        }
    }
    while (c->rlen > 0) {
        if (c->op == OP_NONE)
            fail("unexpected bytes from the server: %.*s", c->rbuf, c->rlen);
        size_t used = B->mode == M_BEANSTALK ? beanstalk_reply(B, c) : resp_reply(B, c);
        if (used == 0)
            return;
        memmove(c->rbuf, c->rbuf + used, c->rlen - used);
        c->rlen -= used;
    }
}

/* Sends req on a blocking fd and waits for a reply line starting with
 * want (RESP or text); exits otherwise. For setup and teardown only. */
static void sync_cmd(int fd, const char *req, size_t n, const char *want)
{
    if (send(fd, req, n, MSG_NOSIGNAL) != (ssize_t)n)
        die("send");
    char buf[4096];
    size_t len = 0;
    while (memmem(buf, len, "\r\n", 2) == NULL) {
        ssize_t r = recv(fd, buf + len, sizeof buf - len, 0);
        if (r <= 0)
            die("recv (setup)");
        len += (size_t)r;
        if (len == sizeof buf)
            break;
    }
    if (len < strlen(want) || memcmp(buf, want, strlen(want)) != 0)
        fail("setup failed: %.*s", buf, len);
}

static void sync_resp(int fd, int argc, const char *const *argv, const char *want)
{
    char req[1024];
    wb_t w = {.p = req, .cap = sizeof req};
    resp_cmd(&w, argc, argv, NULL);
    sync_cmd(fd, req, w.n, want);
}

static void setup_conn(bench_t *B, conn_t *c)
{
    char req[256];
    if (B->mode == M_BEANSTALK) {
        if (c->role == R_PRODUCER) {
            int n = snprintf(req, sizeof req, "use %s\r\n", B->queue);
            sync_cmd(c->fd, req, (size_t)n, "USING ");
        } else {
            int n = snprintf(req, sizeof req, "watch %s\r\n", B->queue);
            sync_cmd(c->fd, req, (size_t)n, "WATCHING 2");
            sync_cmd(c->fd, "ignore default\r\n", 16, "WATCHING 1");
        }
    }
    set_nonblock(c->fd);
}

static void usage(void)
{
    fprintf(stderr, "usage: ordo_bench ordo|ordo-eo|beanstalkd|redis-streams|call PORT [-n producers] "
                    "[-m consumers] [-c callers] [-d seconds] [-k keys] [-v payload_bytes] "
                    "[-w window] [-q queue]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bench_t B = {.producers = 8, .consumers = 8, .callers = 8, .seconds = 10, .keys = 1000,
                 .payload_bytes = 64, .window = 1000};
    if (argc < 3)
        usage();
    int m;
    for (m = 0; m < MODES && strcmp(argv[1], mode_names[m]) != 0; m++)
        ;
    if (m == MODES)
        usage();
    B.mode = (enum mode)m;
    B.port = atoi(argv[2]);
    snprintf(B.queue, sizeof B.queue, "ob-%ld-%ld", (long)getpid(), (long)time(NULL));
    for (int i = 3; i + 1 < argc; i += 2) {
        const char *v = argv[i + 1];
        if (strcmp(argv[i], "-n") == 0)
            B.producers = atoi(v);
        else if (strcmp(argv[i], "-m") == 0)
            B.consumers = atoi(v);
        else if (strcmp(argv[i], "-c") == 0)
            B.callers = atoi(v);
        else if (strcmp(argv[i], "-d") == 0)
            B.seconds = atof(v);
        else if (strcmp(argv[i], "-k") == 0)
            B.keys = atoi(v);
        else if (strcmp(argv[i], "-v") == 0)
            B.payload_bytes = atoi(v);
        else if (strcmp(argv[i], "-w") == 0)
            B.window = atol(v);
        else if (strcmp(argv[i], "-q") == 0 && strlen(v) > 0 && strlen(v) < 100 && !strpbrk(v, " \r\n"))
            snprintf(B.queue, sizeof B.queue, "%s", v);
        else
            usage();
    }
    int fronts = B.mode == M_CALL ? B.callers : B.producers;
    if (B.port < 1 || B.port > 65535 || fronts < (B.mode == M_CALL ? 0 : 1) || B.consumers < 1 ||
        fronts + B.consumers > CONNS_MAX || B.keys < 1 || B.payload_bytes < 1 ||
        B.payload_bytes > PAYLOAD_MAX || B.seconds <= 0 || B.window < 1)
        usage();
    memset(B.payload, 'p', (size_t)B.payload_bytes);

    /* Setup: the stream and its group first, then every connection. */
    if (B.mode == M_REDIS) {
        int fd = connect_to(B.port);
        const char *a[] = {"XGROUP", "CREATE", B.queue, "g", "$", "MKSTREAM"};
        sync_resp(fd, 6, a, "+OK");
        close(fd);
    }
    B.conns_n = fronts + B.consumers;
    B.conns = calloc((size_t)B.conns_n, sizeof *B.conns);
    struct pollfd *pfd = calloc((size_t)B.conns_n, sizeof *pfd);
    if (B.conns == NULL || pfd == NULL)
        die("calloc");
    for (int i = 0; i < B.conns_n; i++) {
        conn_t *c = &B.conns[i];
        c->fd = connect_to(B.port);
        c->role = i < fronts ? (B.mode == M_CALL ? R_CALLER : R_PRODUCER) : R_CONSUMER;
        c->idx = i < fronts ? i : i - fronts;
        setup_conn(&B, c);
        pfd[i].fd = c->fd;
    }

    const char *what = B.mode == M_CALL ? "callers" : "producers";
    fprintf(stderr, "  %s: %d %s, %d consumers, %gs, %d-byte payloads, queue %s\n",
            mode_names[B.mode], fronts, what, B.consumers, B.seconds, B.payload_bytes, B.queue);

    for (int i = fronts; i < B.conns_n; i++)
        queue_pull(&B, &B.conns[i]);

    B.measuring = true;
    double cpu0 = cpu_s(), t0 = now_s(), end = t0 + B.seconds, tick = t0 + 1, t;
    double drain_end = 0, t_end = 0, cpu_end = 0;
    uint64_t tick_pushed = 0, tick_acked = 0, tick_calls = 0;
    int second = 0;
    for (;;) {
        t = now_s();
        if (B.measuring && t >= tick - 1e-3) {
            second++;
            if (B.mode == M_CALL)
                fprintf(stderr, "    %2ds calls/s %8llu\n", second,
                        (unsigned long long)(B.calls - tick_calls));
            else
                fprintf(stderr, "    %2ds pushed/s %8llu  acked/s %8llu  backlog %6llu\n", second,
                        (unsigned long long)(B.pushed - tick_pushed),
                        (unsigned long long)(B.acked - tick_acked),
                        (unsigned long long)(B.pushed_all - B.acked_all));
            tick_pushed = B.pushed;
            tick_acked = B.acked;
            tick_calls = B.calls;
            tick += 1;
        }
        if (B.measuring && t >= end) {
            B.measuring = false;
            t_end = t;
            cpu_end = cpu_s();
            drain_end = t + DRAIN_SECONDS;
        }
        if (!B.measuring) {
            bool fronts_idle = true;
            for (int i = 0; i < fronts; i++)
                fronts_idle = fronts_idle && B.conns[i].op == OP_NONE;
            bool drained = B.mode == M_CALL ? fronts_idle : B.acked_all >= B.pushed_all;
            if ((fronts_idle && drained) || t >= drain_end)
                break;
        }
        for (int i = 0; i < B.conns_n; i++) {
            conn_t *c = &B.conns[i];
            if (c->role != R_CONSUMER && c->op == OP_NONE && B.measuring &&
                (B.mode == M_CALL || (long)(B.pushed_all - B.acked_all) < B.window))
                queue_push(&B, c);
            flush(c);
            pfd[i].events = POLLIN | (c->woff < c->wlen ? POLLOUT : 0);
        }
        double until = B.measuring ? (tick < end ? tick : end) : drain_end;
        int ms = (int)((until - t) * 1000) + 1;
        int n = poll(pfd, (nfds_t)B.conns_n, ms < 10 ? ms : 10);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        for (int i = 0; i < B.conns_n && n > 0; i++) {
            if (pfd[i].revents == 0)
                continue;
            n--;
            if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP))
                on_readable(&B, &B.conns[i]);
        }
    }
    double elapsed = t_end - t0, cpu = cpu_end - cpu0;
    uint64_t left = B.mode == M_CALL ? 0 : B.pushed_all - B.acked_all;

    for (int i = 0; i < B.conns_n; i++)
        close(B.conns[i].fd);
    /* Remove the queue so that rounds against one server start alike. */
    if (B.mode != M_BEANSTALK) {
        int fd = connect_to(B.port);
        if (B.mode == M_REDIS) {
            const char *a[] = {"DEL", B.queue};
            sync_resp(fd, 2, a, ":");
        } else {
            const char *a[] = {"Q.DROP", B.queue};
            sync_resp(fd, 2, a, ":");
        }
        close(fd);
    }

    if (B.mode == M_CALL)
        printf("backend=%s callers=%d consumers=%d seconds=%.3f calls=%llu calls_per_s=%.0f "
               "calls_all=%llu errors=%llu tool_cpu=%.2f\n",
               mode_names[B.mode], B.callers, B.consumers, elapsed, (unsigned long long)B.calls,
               (double)B.calls / elapsed, (unsigned long long)B.calls_all,
               (unsigned long long)B.errors, cpu / elapsed);
    else
        printf("backend=%s producers=%d consumers=%d seconds=%.3f pushed=%llu pulled=%llu "
               "acked=%llu pushed_per_s=%.0f acked_per_s=%.0f acked_all=%llu empty_pulls=%llu "
               "undrained=%llu errors=%llu tool_cpu=%.2f\n",
               mode_names[B.mode], B.producers, B.consumers, elapsed, (unsigned long long)B.pushed,
               (unsigned long long)B.pulled, (unsigned long long)B.acked,
               (double)B.pushed / elapsed, (double)B.acked / elapsed,
               (unsigned long long)B.acked_all, (unsigned long long)B.empty_pulls, (unsigned long long)left,
               (unsigned long long)B.errors, cpu / elapsed);
    free(B.conns);
    free(pfd);
    return B.errors > 0 || left > 0 ? 1 : 0;
}
