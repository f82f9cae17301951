/*
 * aclient.c -- the asynchronous client on a caller-owned libuv loop
 * (ordo/client_uv.h). Shares the reply parser and encoder (cresp.h) and
 * the backoff (client_int.h) with the blocking client.
 *
 * States: IDLE (no socket; maybe a retry timer running) -> RESOLVING ->
 * CONNECTING -> HANDSHAKE (HELLO / AUTH written, replies handled here) ->
 * READY -> RESETTING (uv_close in progress) -> IDLE.
 *
 * Command lists, each in issue order:
 *   redirected -- answered -NOTLEADER; sent first on the next connection;
 *   unsent     -- issued, not yet written;
 *   inflight   -- written on the current connection, awaiting replies.
 * Invariant: a command is on exactly one list until its callback is
 * called, and then it is freed; inflight is empty whenever the state is
 * not HANDSHAKE or READY. Nothing is written while `draining` (a
 * -NOTLEADER arrived): the connection is reset once inflight empties.
 * Write requests carry the connection's generation, so a completion from
 * an old socket is ignored.
 *
 * Addresses: the members of members.c, as for the blocking client. A
 * failed connect moves to the next member (pausing with backoff after a
 * whole round); -NOTLEADER moves to the member it names, or to the next
 * one if it names no member; the first handshake, and the first after a
 * failure or an unknown redirect, asks `CLUSTER MEMBERS` (stage 3) so
 * the others are known before they are needed. Replies are bounded as the
 * blocking client's are (reply_bytes_max, reply_elems_max); pushes go
 * straight to the push callback, so nothing queues them.
 *
 * TLS (opts.tls): in HANDSHAKE, the TLS handshake comes first (the engine
 * of base/tls.h over the stream: what is read is fed to the session and
 * the plaintext it gives parsed; what write_bytes() is handed is
 * encrypted, and every write sends the session's ciphertext); HELLO is
 * written once it is done. A certificate that does not verify, a
 * handshake the server refuses, or files that do not load fail the queued
 * commands with ORDO_ETLS at once, as a refused password does, and the
 * client goes on retrying slowly.
 */
#include "ordo/client_uv.h"

#include "client/client_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often deadlines are checked while commands are outstanding. */
#define ACLIENT_TICK_MS 10

enum { ST_IDLE, ST_RESOLVING, ST_CONNECTING, ST_HANDSHAKE, ST_READY, ST_RESETTING };

typedef struct acmd {
    struct acmd *next;
    char *data;
    size_t len;
    int64_t deadline_ms; /* -1: none */
    int hops;
    ordo_areply_cb cb;
    void *arg;
} acmd_t;

typedef struct alist {
    acmd_t *head, *tail;
} alist_t;

typedef struct awrite {
    uv_write_t req;
    ordo_aclient_t *c;
    uint64_t gen;
    char *data;
} awrite_t;

struct ordo_aclient {
    uv_loop_t *loop;
    client_members_t members;
    int learn; /* ask CLUSTER MEMBERS in the next handshake */
    char *password;
    char *user; /* NULL: "default" (opts.user) */
    int connect_timeout_ms, call_timeout_ms, reconnect_timeout_ms;
    int backoff_min_ms, backoff_max_ms, redirects_max, resp2_only;
    int64_t reply_bytes_max, reply_elems_max;
    int pushes_max; /* unused here: pushes are not queued */

    int state, proto, hs_stage, draining;
    uint64_t gen;
    int attempt;
    int64_t connect_started_ms, budget_deadline_ms;
    uint64_t rng;

    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_getaddrinfo_t gai;
    uv_timer_t retry_timer, tick_timer;
    cresp_parser_t parser;
    cresp_buf_t in;
    alist_t redirected, unsent, inflight;

    ordo_apush_cb push_cb;
    void *push_arg;
    ordo_aconnect_cb connect_cb;
    void *connect_arg;

    int closing, handles_open;
    void (*closed_cb)(void *);
    void *closed_arg;

    /* TLS: tls_ctx set (or tls_bad, the reason it could not be) when on;
     * tls is the current connection's session. */
    ordo_tls_ctx_t *tls_ctx;
    char *tls_server_name, *tls_bad;
    ordo_tls_t *tls;
    char *tls_rbuf;        /* CLIENT_READ_CHUNK bytes of ciphertext, read and fed at once */
};

static void start_connect(ordo_aclient_t *c);
static void conn_reset(ordo_aclient_t *c, int inflight_status);
static void on_tick(uv_timer_t *t);

static void on_retry(uv_timer_t *t)
{
    start_connect(t->data);
}

/* budget_check() -- after a failed attempt: once the reconnect budget
 * (counted from when the connection was lost) is spent, the queued
 * commands fail with ORDO_ECONN and a new budget starts. */
static void fail_all_queued(ordo_aclient_t *c, int status);
static void budget_check(ordo_aclient_t *c)
{
    int64_t now = client_now_ms();
    if (c->reconnect_timeout_ms >= 0 && now >= c->budget_deadline_ms) {
        c->budget_deadline_ms = now + c->reconnect_timeout_ms;
        fail_all_queued(c, ORDO_ECONN);
    }
}

/* ---- lists ------------------------------------------------------------------ */

static void list_push(alist_t *l, acmd_t *m)
{
    assert(m != NULL && (l->head == NULL) == (l->tail == NULL));
    m->next = NULL;
    if (l->tail)
        l->tail->next = m;
    else
        l->head = m;
    l->tail = m;
}

static acmd_t *list_pop(alist_t *l)
{
    acmd_t *m = l->head;
    if (m) {
        l->head = m->next;
        if (l->head == NULL)
            l->tail = NULL;
        m->next = NULL;
    }
    return m;
}

/* a then b, as one list in a */
static void list_join(alist_t *a, alist_t *b)
{
    assert(a != b);
    if (b->head == NULL)
        return;
    if (a->tail)
        a->tail->next = b->head;
    else
        a->head = b->head;
    a->tail = b->tail;
    b->head = b->tail = NULL;
}

static void finish(ordo_aclient_t *c, acmd_t *m, int status, const ordo_reply_t *r)
{
    assert(m != NULL && m->cb != NULL && m->next == NULL);
    m->cb(c, status, r, m->arg);
    free(m->data);
    free(m);
}

/* Fail every command of l with status (callbacks may close the client:
 * the list is detached first, so that is safe). */
static void fail_all(ordo_aclient_t *c, alist_t *l, int status)
{
    alist_t mine = *l;
    l->head = l->tail = NULL;
    acmd_t *m;
    while ((m = list_pop(&mine)) != NULL)
        finish(c, m, status, NULL);
}

static void fail_all_queued(ordo_aclient_t *c, int status)
{
    fail_all(c, &c->redirected, status);
    if (!c->closing)
        fail_all(c, &c->unsent, status);
}

/* ---- handles and lifetime ---------------------------------------------------- */

/* Free what ordo_aclient_new() made from the options, and c. */
static void free_config(ordo_aclient_t *c)
{
    ordo_tls_ctx_free(c->tls_ctx);
    free(c->tls_server_name);
    free(c->tls_bad);
    free(c->tls_rbuf);
    free(c->password);
    free(c->user);
    free(c);
}

static void maybe_free(ordo_aclient_t *c)
{
    assert(c->handles_open >= 0);
    if (!c->closing || c->handles_open > 0)
        return;
    void (*cb)(void *) = c->closed_cb;
    void *arg = c->closed_arg;
    cresp_reset(&c->parser);
    cresp_buf_free(&c->in);
    ordo_tls_free(c->tls);
    free_config(c);
    if (cb)
        cb(arg);
}

static void on_handle_closed(uv_handle_t *h)
{
    ordo_aclient_t *c = h->data;
    assert(c != NULL && c->handles_open > 0);
    c->handles_open--;
    if (h == (uv_handle_t *)&c->tcp && !c->closing) {
        c->state = ST_IDLE;
        if (c->attempt > 0)
            budget_check(c);
        if (c->closing)
            return;
        /* A failed attempt: try the next member at once, and back off
         * after a whole round. A redirect: go to the leader at once. */
        int n = c->members.n, wait;
        if (c->attempt > 0) {
            client_members_next(&c->members);
            c->learn = 1;
        }
        if (c->attempt == 0 && c->redirected.head)
            wait = 0;
        else if (c->attempt % n != 0)
            wait = 0;
        else
            wait = client_backoff_ms(&c->rng, c->attempt / n, c->backoff_min_ms, c->backoff_max_ms);
        uv_timer_start(&c->retry_timer, on_retry, (uint64_t)wait, 0);
        return;
    }
    maybe_free(c);
}

static void tick_start(ordo_aclient_t *c)
{
    if (!c->closing && !uv_is_active((uv_handle_t *)&c->tick_timer))
        uv_timer_start(&c->tick_timer, on_tick, ACLIENT_TICK_MS, ACLIENT_TICK_MS);
}

/* ---- writing ---------------------------------------------------------------- */

static void on_write(uv_write_t *req, int status)
{
    awrite_t *w = (awrite_t *)req;
    ordo_aclient_t *c = w->c;
    uint64_t gen = w->gen;
    free(w->data);
    free(w);
    if (status < 0 && !c->closing && gen == c->gen && (c->state == ST_HANDSHAKE || c->state == ST_READY))
        conn_reset(c, ORDO_ECONN);
}

/* Write bytes as they are on the current connection (takes ownership of
 * data). */
static int raw_write(ordo_aclient_t *c, char *data, size_t len)
{
    assert(c->state == ST_HANDSHAKE || c->state == ST_READY);
    assert(data != NULL && len > 0);
    awrite_t *w = malloc(sizeof *w);
    if (w == NULL) {
        free(data);
        return ORDO_ENOMEM;
    }
    w->c = c;
    w->gen = c->gen;
    w->data = data;
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        free(data);
        free(w);
        return ORDO_ECONN;
    }
    return ORDO_OK;
}

/* Write the TLS session's pending ciphertext. */
static int tls_send(ordo_aclient_t *c)
{
    size_t n = ordo_tls_out_pending(c->tls);
    if (n == 0)
        return ORDO_OK;
    char *buf = malloc(n);
    if (buf == NULL)
        return ORDO_ENOMEM;
    n = ordo_tls_out_take(c->tls, buf, n);
    return raw_write(c, buf, n);
}

/* Write bytes on the current connection, encrypted on a TLS one (takes
 * ownership of data). */
static int write_bytes(ordo_aclient_t *c, char *data, size_t len)
{
    if (c->tls == NULL)
        return raw_write(c, data, len);
    ssize_t w = ordo_tls_write(c->tls, data, len);
    free(data);
    if (w != (ssize_t)len)
        return ORDO_ECONN; /* HELLO waits for the handshake, so this is a failed session */
    return tls_send(c);
}

/* flush() -- write every unsent command as one buffer. */
static void flush(ordo_aclient_t *c)
{
    if (c->state != ST_READY || c->draining || c->unsent.head == NULL)
        return;
    size_t total = 0;
    for (acmd_t *m = c->unsent.head; m; m = m->next)
        total += m->len;
    char *buf = malloc(total ? total : 1);
    if (buf == NULL)
        return; /* stays unsent; the next flush tries again */
    size_t off = 0;
    for (acmd_t *m = c->unsent.head; m; m = m->next) {
        memcpy(buf + off, m->data, m->len);
        off += m->len;
    }
    list_join(&c->inflight, &c->unsent);
    if (write_bytes(c, buf, total) != ORDO_OK)
        conn_reset(c, ORDO_ECONN);
}

static int write_command(ordo_aclient_t *c, int argc, const char *const *argv)
{
    cresp_buf_t b = { 0 };
    if (cresp_encode(&b, argc, argv, NULL) != 0) {
        cresp_buf_free(&b);
        return ORDO_ENOMEM;
    }
    return write_bytes(c, b.data, b.len);
}

/* ---- connection state ----------------------------------------------------------- */

/* conn_reset() -- drop the connection: commands in flight get
 * inflight_status (they may have run); unsent ones stay for the next. */
static void conn_reset(ordo_aclient_t *c, int inflight_status)
{
    if (c->state != ST_HANDSHAKE && c->state != ST_READY && c->state != ST_CONNECTING)
        return;
    int was = c->state;
    c->state = ST_RESETTING;
    if (was == ST_READY)
        c->budget_deadline_ms = client_now_ms() + (c->reconnect_timeout_ms >= 0 ? c->reconnect_timeout_ms : 0);
    c->gen++;
    c->proto = 0;
    c->draining = 0;
    cresp_reset(&c->parser);
    c->in.len = 0;
    ordo_tls_free(c->tls);
    c->tls = NULL;
    if (was != ST_READY)
        c->attempt++;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    fail_all(c, &c->inflight, inflight_status);
}

/* connect_failed() -- a connect or handshake did not complete (no socket
 * open). Queued commands fail once the reconnect budget is spent. */
static void connect_failed(ordo_aclient_t *c, int status)
{
    c->state = ST_IDLE;
    c->attempt++;
    /* The next member may answer (and know who leads now). */
    client_members_next(&c->members);
    c->learn = 1;
    if (c->connect_cb)
        c->connect_cb(c, status, c->connect_arg);
    if (c->closing)
        return;
    budget_check(c);
    if (c->closing)
        return;
    int wait = c->attempt % c->members.n != 0
                   ? 0
                   : client_backoff_ms(&c->rng, c->attempt / c->members.n, c->backoff_min_ms, c->backoff_max_ms);
    uv_timer_start(&c->retry_timer, on_retry, (uint64_t)wait, 0);
}

static void ready(ordo_aclient_t *c)
{
    assert(c->state == ST_HANDSHAKE && c->inflight.head == NULL);
    c->state = ST_READY;
    c->attempt = 0;
    c->budget_deadline_ms = client_now_ms() + (c->reconnect_timeout_ms >= 0 ? c->reconnect_timeout_ms : 0);
    /* Redirected commands go first, in their order. */
    list_join(&c->redirected, &c->unsent);
    c->unsent = c->redirected;
    c->redirected.head = c->redirected.tail = NULL;
    if (c->connect_cb)
        c->connect_cb(c, ORDO_OK, c->connect_arg);
    if (!c->closing)
        flush(c);
}

/* learn_or_ready() -- the handshake's last stage: CLUSTER MEMBERS when
 * the member list wants refreshing, else ready. */
static void learn_or_ready(ordo_aclient_t *c)
{
    if (!c->learn) {
        ready(c);
        return;
    }
    c->learn = 0;
    c->hs_stage = 3;
    const char *argv[] = { "CLUSTER", "MEMBERS" };
    if (write_command(c, 2, argv) != ORDO_OK)
        conn_reset(c, ORDO_ECONN);
}

static void handshake_reply(ordo_aclient_t *c, const ordo_reply_t *r)
{
    assert(c->state == ST_HANDSHAKE && c->hs_stage >= 1 && c->hs_stage <= 3);
    if (c->hs_stage == 3) { /* CLUSTER MEMBERS: an error teaches nothing */
        (void)client_members_learn(&c->members, r);
        ready(c);
        return;
    }
    if (client_is_auth_error(r)) {
        /* A refused password will not get better by retrying fast:
         * queued commands learn it now; the client keeps retrying slowly. */
        c->attempt = 30;
        fail_all_queued(c, ORDO_EAUTH);
        if (!c->closing)
            conn_reset(c, ORDO_EAUTH);
        return;
    }
    if (c->hs_stage == 1 && r->type != ORDO_REPLY_ERROR) {
        c->proto = 3;
        learn_or_ready(c);
        return;
    }
    if (c->hs_stage == 1 && c->password) {
        c->proto = 2;
        c->hs_stage = 2;
        const char *auth[] = { "AUTH", c->user ? c->user : c->password, c->password };
        if (write_command(c, c->user ? 3 : 2, auth) != ORDO_OK)
            conn_reset(c, ORDO_ECONN);
        return;
    }
    c->proto = 2;
    learn_or_ready(c);
}

static void take_reply(ordo_aclient_t *c, const ordo_reply_t *r)
{
    assert(c->state == ST_READY && r != NULL);
    acmd_t *m = list_pop(&c->inflight);
    if (m == NULL) {
        conn_reset(c, ORDO_EPROTO);
        return;
    }
    if (r->type == ORDO_REPLY_ERROR && client_error_code(r->str, NULL) == ORDO_ENOTLEADER &&
        m->hops < c->redirects_max) {
        if (!c->draining) {
            /* Go to the member it names; no leader known, a garbled line
             * or an address that is no member: to the next member, which
             * is asked who the members are. */
            char host[CLIENT_HOST_MAX];
            int port, to = -1;
            if (client_parse_notleader(r->str, host, sizeof host, &port) == CLIENT_REDIRECT_TO)
                to = client_members_find(&c->members, host, port);
            if (to >= 0 && to != c->members.cur) {
                c->members.cur = to;
            } else {
                client_members_next(&c->members);
                c->learn = 1;
            }
        }
        m->hops++;
        list_push(&c->redirected, m);
        c->draining = 1;
        return;
    }
    finish(c, m, ORDO_OK, r);
}

/* A TLS failure: as a refused password (handshake_reply), the queued
 * commands learn it now and the client retries slowly; the connect
 * callback hears ORDO_ETLS. */
static void tls_failed(ordo_aclient_t *c)
{
    if (c->connect_cb)
        c->connect_cb(c, ORDO_ETLS, c->connect_arg);
    if (c->closing)
        return;
    c->attempt = 30;
    fail_all_queued(c, ORDO_ETLS);
    if (!c->closing)
        conn_reset(c, ORDO_ETLS);
}

/* The first handshake step on a fresh connection: HELLO (and AUTH). */
static void send_hello(ordo_aclient_t *c)
{
    int rc;
    c->hs_stage = 1;
    if (c->resp2_only) {
        const char *ping[] = { "HELLO", "2" };
        rc = write_command(c, 2, ping); /* an error reply leads to RESP2 + AUTH */
    } else {
        const char *hello[] = { "HELLO", "3", "AUTH", c->user ? c->user : "default", c->password };
        rc = write_command(c, c->password ? 5 : 2, hello);
    }
    if (rc != ORDO_OK)
        conn_reset(c, ORDO_ECONN);
}

/* Ciphertext read: decrypt it into c->in, send what the session has for
 * the server, and write HELLO once the handshake is done. Returns 0, or
 * -1 if the connection was reset. */
static int tls_input(ordo_aclient_t *c, const char *data, size_t n)
{
    int was_done = ordo_tls_done(c->tls);
    int got = client_tls_decrypt(c->tls, data, n, &c->in);
    if (got == CLIENT_TLS_NOMEM) {
        conn_reset(c, ORDO_ENOMEM);
        return -1;
    }
    if (got != 0) {
        if (got == ORDO_TLS_EOF)
            conn_reset(c, ORDO_ECONN);
        else
            tls_failed(c);
        return -1;
    }
    if (tls_send(c) != ORDO_OK) {
        conn_reset(c, ORDO_ECONN);
        return -1;
    }
    if (!was_done && ordo_tls_done(c->tls)) {
        uint64_t gen = c->gen;
        send_hello(c);
        if (c->closing || gen != c->gen)
            return -1;
    }
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    ordo_aclient_t *c = h->data;
    if (c->tls != NULL) {
        *buf = uv_buf_init(c->tls_rbuf, CLIENT_READ_CHUNK);
        return;
    }
    if (cresp_buf_reserve(&c->in, CLIENT_READ_CHUNK) != 0) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init(c->in.data + c->in.len, (unsigned)(c->in.cap - c->in.len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    ordo_aclient_t *c = s->data;
    if (c->closing)
        return;
    if (nread < 0) {
        conn_reset(c, ORDO_ECONN);
        return;
    }
    if (c->tls == NULL)
        c->in.len += (size_t)nread;
    else if (tls_input(c, buf->base, (size_t)nread) != 0)
        return;
    uint64_t gen = c->gen;
    while (!c->closing && gen == c->gen && c->in.len) {
        size_t used;
        ordo_reply_t *r = NULL;
        int rc = cresp_parse(&c->parser, c->in.data, c->in.len, &used, &r);
        cresp_buf_consume(&c->in, used);
        if (rc == CRESP_NEED_MORE)
            break;
        if (rc != CRESP_DONE) {
            conn_reset(c, ORDO_EPROTO);
            return;
        }
        if (r->type == ORDO_REPLY_PUSH) {
            if (c->push_cb)
                c->push_cb(c, r, c->push_arg);
        } else if (c->state == ST_HANDSHAKE) {
            handshake_reply(c, r);
        } else {
            take_reply(c, r);
        }
        ordo_reply_free(r);
    }
    if (!c->closing && gen == c->gen && c->draining && c->inflight.head == NULL)
        conn_reset(c, ORDO_ECONN); /* nothing in flight: go to the leader */
    /* A server that keeps the socket readable (a push flood) keeps libuv in
     * this callback for many reads before its timers run: the deadlines
     * are checked here too, so they hold within a read's worth of work. */
    if (!c->closing && uv_is_active((uv_handle_t *)&c->tick_timer))
        on_tick(&c->tick_timer);
}

static void on_connected(uv_connect_t *req, int status)
{
    ordo_aclient_t *c = req->data;
    if (c->closing || c->state != ST_CONNECTING)
        return;
    if (status < 0) {
        c->state = ST_RESETTING;
        c->gen++;
        /* the close callback schedules the retry with backoff */
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
        c->attempt++;
        if (c->connect_cb)
            c->connect_cb(c, ORDO_ECONN, c->connect_arg);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->state = ST_HANDSHAKE;
    if (c->tls_bad != NULL) {
        tls_failed(c);
        return;
    }
    if (c->tls_ctx != NULL) {
        /* The TLS handshake first; tls_input() writes HELLO after it. */
        const char *host = c->members.m[c->members.cur].host;
        c->tls = ordo_tls_new(c->tls_ctx, c->tls_server_name != NULL ? c->tls_server_name : host);
        if (c->tls == NULL || ordo_tls_handshake(c->tls) == ORDO_TLS_ERR || tls_send(c) != ORDO_OK) {
            conn_reset(c, ORDO_ECONN);
            return;
        }
    }
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_reset(c, ORDO_ECONN);
        return;
    }
    if (c->tls == NULL)
        send_hello(c);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    ordo_aclient_t *c = req->data;
    c->handles_open--;
    if (c->closing) {
        if (res)
            uv_freeaddrinfo(res);
        maybe_free(c);
        return;
    }
    if (status < 0 || res == NULL) {
        if (res)
            uv_freeaddrinfo(res);
        connect_failed(c, ORDO_ECONN);
        return;
    }
    uv_tcp_init(c->loop, &c->tcp);
    c->tcp.data = c;
    c->handles_open++;
    c->state = ST_CONNECTING;
    c->creq.data = c;
    int rc = uv_tcp_connect(&c->creq, &c->tcp, res->ai_addr, on_connected);
    uv_freeaddrinfo(res);
    if (rc != 0) {
        c->state = ST_RESETTING;
        c->attempt++;
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    }
}

static void start_connect(ordo_aclient_t *c)
{
    if (c->closing || c->state != ST_IDLE)
        return;
    c->state = ST_RESOLVING;
    c->connect_started_ms = client_now_ms();
    char port[16];
    snprintf(port, sizeof port, "%d", c->members.m[c->members.cur].port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    c->gai.data = c;
    c->handles_open++;
    if (uv_getaddrinfo(c->loop, &c->gai, on_resolved, c->members.m[c->members.cur].host, port, &hints) != 0) {
        c->handles_open--;
        connect_failed(c, ORDO_ECONN);
    }
    tick_start(c);
}

/* ---- deadlines ---------------------------------------------------------------- */

static void expire_queued(ordo_aclient_t *c, alist_t *l, int64_t now)
{
    alist_t keep = { 0 }, gone = { 0 };
    acmd_t *m;
    while ((m = list_pop(l)) != NULL)
        list_push(m->deadline_ms >= 0 && now >= m->deadline_ms ? &gone : &keep, m);
    *l = keep;
    fail_all(c, &gone, ORDO_ETIMEDOUT);
}

static void on_tick(uv_timer_t *t)
{
    ordo_aclient_t *c = t->data;
    int64_t now = client_now_ms();
    if ((c->state == ST_CONNECTING || c->state == ST_HANDSHAKE) &&
        now >= c->connect_started_ms + c->connect_timeout_ms) {
        conn_reset(c, ORDO_ECONN);
        if (c->closing)
            return;
    }
    for (acmd_t *m = c->inflight.head; m; m = m->next) {
        if (m->deadline_ms >= 0 && now >= m->deadline_ms) {
            /* The stream position is unknown past a late reply: the late
             * command gets ETIMEDOUT, the others in flight ECONN. */
            alist_t one = { 0 };
            alist_t rest = { 0 };
            acmd_t *x;
            while ((x = list_pop(&c->inflight)) != NULL)
                list_push(x == m ? &one : &rest, x);
            c->inflight = rest;
            conn_reset(c, ORDO_ECONN);
            fail_all(c, &one, ORDO_ETIMEDOUT);
            if (c->closing)
                return;
            break;
        }
    }
    expire_queued(c, &c->unsent, now);
    if (c->closing)
        return;
    expire_queued(c, &c->redirected, now);
    if (c->closing)
        return;
    int busy = c->unsent.head || c->inflight.head || c->redirected.head || c->state == ST_CONNECTING ||
               c->state == ST_HANDSHAKE || c->state == ST_RESOLVING;
    if (!busy)
        uv_timer_stop(&c->tick_timer);
}

/* ---- public ------------------------------------------------------------------- */

int ordo_aclient_new(ordo_aclient_t **out, uv_loop_t *loop, const ordo_client_opts_t *opts)
{
    assert(out != NULL && loop != NULL);
    *out = NULL;
    ordo_client_opts_t o = { 0 };
    if (opts)
        o = *opts;
    ordo_aclient_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ORDO_ENOMEM;
    c->loop = loop;
    if (client_members_init(&c->members, o.addrs, o.host, o.port) != ORDO_OK) {
        free(c);
        return ORDO_EINVAL;
    }
    c->learn = 1;
    if ((o.password && (c->password = strdup(o.password)) == NULL) || (o.user && (c->user = strdup(o.user)) == NULL)) {
        free(c->password);
        free(c);
        return ORDO_ENOMEM;
    }
    CLIENT_OPTS_APPLY(c, o);
    if (client_tls_opts(&o, &c->tls_ctx, &c->tls_server_name, &c->tls_bad) != ORDO_OK ||
        (o.tls && (c->tls_rbuf = malloc(CLIENT_READ_CHUNK)) == NULL)) {
        free_config(c);
        return ORDO_ENOMEM;
    }
    c->rng = (uint64_t)(uintptr_t)c ^ (uint64_t)uv_hrtime();
    if (c->rng == 0)
        c->rng = 1;
    cresp_init(&c->parser);
    cresp_set_limits(&c->parser, c->reply_bytes_max, c->reply_elems_max);
    c->budget_deadline_ms = client_now_ms() + (c->reconnect_timeout_ms >= 0 ? c->reconnect_timeout_ms : 0);
    if (uv_timer_init(loop, &c->retry_timer) != 0 || uv_timer_init(loop, &c->tick_timer) != 0) {
        free_config(c);
        return ORDO_ESYS;
    }
    c->retry_timer.data = c->tick_timer.data = c;
    c->handles_open = 2;
    /* uv_timer_start's callback for tick: set here once */
    uv_timer_start(&c->tick_timer, on_tick, ACLIENT_TICK_MS, ACLIENT_TICK_MS);
    uv_timer_start(&c->retry_timer, on_retry, 0, 0);
    *out = c;
    return ORDO_OK;
}

void ordo_aclient_on_push(ordo_aclient_t *c, ordo_apush_cb cb, void *arg)
{
    c->push_cb = cb;
    c->push_arg = arg;
}

void ordo_aclient_on_connect(ordo_aclient_t *c, ordo_aconnect_cb cb, void *arg)
{
    c->connect_cb = cb;
    c->connect_arg = arg;
}

int ordo_aclient_proto(const ordo_aclient_t *c)
{
    return c->state == ST_READY ? c->proto : 0;
}

int ordo_aclient_command(ordo_aclient_t *c, int timeout_ms, int argc, const char *const *argv,
                         const size_t *lens, ordo_areply_cb cb, void *arg)
{
    if (argc <= 0 || cb == NULL)
        return ORDO_EINVAL;
    if (c->closing)
        return ORDO_ESTOPPED;
    acmd_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return ORDO_ENOMEM;
    cresp_buf_t b = { 0 };
    if (cresp_encode(&b, argc, argv, lens) != 0) {
        cresp_buf_free(&b);
        free(m);
        return ORDO_ENOMEM;
    }
    m->data = b.data;
    m->len = b.len;
    m->cb = cb;
    m->arg = arg;
    m->deadline_ms = timeout_ms == ORDO_WAIT_FOREVER ? -1
                     : client_now_ms() + (timeout_ms > 0 ? timeout_ms : c->call_timeout_ms);
    list_push(&c->unsent, m);
    tick_start(c);
    flush(c);
    return ORDO_OK;
}

void ordo_aclient_on_closed(ordo_aclient_t *c, void (*cb)(void *arg), void *arg)
{
    assert(c != NULL);
    c->closed_cb = cb;
    c->closed_arg = arg;
}

void ordo_aclient_free(ordo_aclient_t *c)
{
    if (c == NULL || c->closing)
        return;
    c->closing = 1;
    fail_all(c, &c->inflight, ORDO_ECANCELED);
    fail_all(c, &c->redirected, ORDO_ECANCELED);
    fail_all(c, &c->unsent, ORDO_ECANCELED);
    uv_timer_stop(&c->retry_timer);
    uv_timer_stop(&c->tick_timer);
    uv_close((uv_handle_t *)&c->retry_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->tick_timer, on_handle_closed);
    if (c->state == ST_RESOLVING)
        uv_cancel((uv_req_t *)&c->gai);
    if (c->state == ST_CONNECTING || c->state == ST_HANDSHAKE || c->state == ST_READY)
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    /* ST_RESETTING: the tcp close is already under way and counted. */
}
