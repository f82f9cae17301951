/*
 * conn.c -- the blocking connection of ordo/client.h: connect and
 * handshake (HELLO 3 / AUTH), pipelined writes and reads with a deadline
 * per call, push frames kept apart from replies, reconnection with
 * jittered exponential backoff across the members it knows, and
 * -NOTLEADER redirects. Over TLS (opts.tls) the handshake follows the TCP
 * connect and the bytes pass through tls_conn.c; everything else here
 * sees plaintext.
 *
 * Every socket is non-blocking; waiting is poll() against a deadline in
 * CLOCK_MONOTONIC milliseconds (-1: none). Writing a long pipeline also
 * reads, so a server that stops reading until its replies are taken can
 * never deadlock with us. The deadline is checked on every turn of the
 * read loop, not only when poll() waits, so a server that never stops
 * sending cannot hold a call past it.
 *
 * One call, one deadline: connecting (to any member, with backoff),
 * following -NOTLEADER (to members only: members.c) and waiting for the
 * reply all happen before the call's deadline; connecting is also bounded
 * by the reconnect budget. A server is bounded in what it makes us hold:
 * the parser's reply_bytes_max / reply_elems_max, and pushes_max frames
 * queued (cresp.h, ordo/client.h).
 *
 * Failure rule: any I/O error, protocol error, passed bound or deadline
 * with a reply outstanding closes the connection (client_drop) -- the
 * stream position is unknown after it -- and the next call reconnects.
 * Nothing already written is ever sent again by this file, except after
 * -NOTLEADER, which says the command did not run, and for a call its
 * caller marked safe to repeat (client_call(), CLIENT_CALL_SAFE: the
 * server recognises the repeat).
 */
#include "client_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ordo_client_command_strs() takes at most this many arguments: more than
 * any ordod command has, and a stack array of pointers. */
#define CLIENT_COMMAND_STRS_MAX 64

int64_t client_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void client_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}

void client_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
    int64_t left = deadline_ms - client_now_ms();
    if (left > 0)
        client_cond_wait_ms(cv, mu, left);
}

static void sleep_ms(int ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

int client_backoff_ms(uint64_t *rng, int attempt, int min_ms, int max_ms)
{
    assert(rng != NULL && *rng != 0 && attempt >= 0);
    int64_t cap = min_ms;
    for (int i = 0; i < attempt && cap < max_ms; i++)
        cap *= 2;
    if (cap > max_ms)
        cap = max_ms;
    if (cap <= 0)
        return 0;
    return (int)(rng_next(rng) % (uint64_t)(cap + 1));
}

int client_seterr(ordo_client_t *c, int code, const char *fmt, ...)
{
    assert(c != NULL && fmt != NULL);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errstr, sizeof c->errstr, fmt, ap);
    va_end(ap);
    return code;
}

int ordo_client_new(ordo_client_t **out, const ordo_client_opts_t *opts)
{
    assert(out != NULL);
    *out = NULL;
    ordo_client_opts_t o = { 0 };
    if (opts)
        o = *opts;
    ordo_client_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ORDO_ENOMEM;
    if (client_members_init(&c->members, o.addrs, o.host, o.port) != ORDO_OK)
        goto fail_addrs;
    if (o.password) {
        c->password = strdup(o.password);
        if (c->password == NULL)
            goto fail_password;
    }
    if (o.user) {
        c->user = strdup(o.user);
        if (c->user == NULL)
            goto fail_user;
    }
    CLIENT_OPTS_APPLY(c, o);
    if (client_tls_init(c, &o) != ORDO_OK)
        goto fail_tls;
    c->fd = -1;
    c->learn = 1;
    c->move_to = -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^
             (uint64_t)(uintptr_t)c;
    if (c->rng == 0)
        c->rng = 1;
    cresp_init(&c->parser);
    cresp_set_limits(&c->parser, c->reply_bytes_max, c->reply_elems_max);
    *out = c;
    return ORDO_OK;
fail_tls:
    client_tls_free(c);
    free(c->user);
fail_user:
    free(c->password);
fail_password:
    free(c);
    return ORDO_ENOMEM;
fail_addrs:
    free(c);
    return ORDO_EINVAL;
}

static void client_drop(ordo_client_t *c)
{
    assert(c != NULL);
    client_tls_drop(c);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->proto = 0;
    c->pending = 0;
    c->in.len = 0;
    c->out.len = 0;
    cresp_reset(&c->parser);
}

void ordo_client_close(ordo_client_t *c)
{
    client_drop(c);
}

void ordo_client_free(ordo_client_t *c)
{
    if (c == NULL)
        return;
    client_drop(c);
    while (c->push_head) {
        push_node_t *n = c->push_head;
        c->push_head = n->next;
        ordo_reply_free(n->push);
        free(n);
    }
    c->npushes = 0;
    c->push_bytes = 0;
    cresp_buf_free(&c->in);
    cresp_buf_free(&c->out);
    client_tls_free(c);
    free(c->password);
    free(c->user);
    free(c);
}

uint64_t ordo_client_epoch(const ordo_client_t *c) { return c->epoch; }
int ordo_client_proto(const ordo_client_t *c) { return c->fd >= 0 ? c->proto : 0; }
const char *ordo_client_errstr(const ordo_client_t *c) { return c->errstr; }
int64_t ordo_client_err_rev(const ordo_client_t *c) { return c->err_rev; }
const char *ordo_client_host(const ordo_client_t *c) { return c->members.m[c->members.cur].host; }
int ordo_client_port(const ordo_client_t *c) { return c->members.m[c->members.cur].port; }

void ordo_client_addrs(const ordo_client_t *c, char *out, size_t cap)
{
    client_members_format(&c->members, out, cap);
}
size_t ordo_client_pending(const ordo_client_t *c) { return c->pending; }

/* ---- low-level I/O ------------------------------------------------------- */

static int remaining_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - client_now_ms();
    return left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Reads whatever is there into c->in. ORDO_OK, ORDO_ECONN (closed). */
static int read_some(ordo_client_t *c)
{
    assert(c->fd >= 0 && c->in.len <= c->in.cap);
    if (cresp_buf_reserve(&c->in, CLIENT_READ_CHUNK) != 0)
        return ORDO_ENOMEM;
    for (;;) {
        ssize_t k = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
        if (k > 0) {
            c->in.len += (size_t)k;
            return ORDO_OK;
        }
        if (k == 0)
            return client_seterr(c, ORDO_ECONN, "connection closed by server");
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return ORDO_OK;
        return client_seterr(c, ORDO_ECONN, "recv: %s", strerror(errno));
    }
}

/* wait_io() -- poll for readable (and writable if out has bytes) until
 * deadline; reads what is readable, writes what it can. ORDO_OK when
 * something happened, ORDO_ETIMEDOUT, ORDO_ECONN. */
static int wait_io(ordo_client_t *c, int64_t deadline, int want_read)
{
    assert(c->fd >= 0);
    /* Over TLS what goes on the wire is tls_out, encrypted from out. */
    cresp_buf_t *wire = c->tls != NULL ? &c->tls_out : &c->out;
    if (c->tls != NULL) {
        int rc = client_tls_encrypt(c);
        if (rc != ORDO_OK)
            return rc;
    }
    struct pollfd pfd = { .fd = c->fd, .events = 0 };
    if (want_read)
        pfd.events |= POLLIN;
    if (wire->len)
        pfd.events |= POLLOUT;
    for (;;) {
        int n = poll(&pfd, 1, remaining_ms(deadline));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return client_seterr(c, ORDO_ECONN, "poll: %s", strerror(errno));
        if (n == 0)
            return client_seterr(c, ORDO_ETIMEDOUT, "timed out waiting for the server");
        break;
    }
    if (pfd.revents & POLLOUT) {
        ssize_t k = send(c->fd, wire->data, wire->len, MSG_NOSIGNAL);
        if (k > 0)
            cresp_buf_consume(wire, (size_t)k);
        else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return client_seterr(c, ORDO_ECONN, "send: %s", strerror(errno));
    }
    if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
        return c->tls != NULL ? client_tls_read(c) : read_some(c);
    return ORDO_OK;
}

/* enqueue_push() -- keep a push frame (costing `bytes`) for
 * ordo_client_next_push(). ORDO_EPROTO past pushes_max frames or
 * reply_bytes_max bytes queued (the caller drops the connection: a push
 * cannot be skipped without breaking a watch's promise), ORDO_ENOMEM. */
static int enqueue_push(ordo_client_t *c, ordo_reply_t *r, int64_t bytes)
{
    assert(r != NULL && r->type == ORDO_REPLY_PUSH);
    assert((c->push_head == NULL) == (c->push_tail == NULL));
    assert(c->npushes <= c->pushes_max && c->push_bytes <= c->reply_bytes_max);
    if (c->npushes == c->pushes_max || bytes > c->reply_bytes_max - c->push_bytes) {
        ordo_reply_free(r);
        return client_seterr(c, ORDO_EPROTO,
                             "more than pushes_max (%d) push frames or reply_bytes_max (%lld bytes) "
                             "queued unread",
                             c->pushes_max, (long long)c->reply_bytes_max);
    }
    push_node_t *n = malloc(sizeof *n);
    if (n == NULL) {
        ordo_reply_free(r);
        return ORDO_ENOMEM;
    }
    n->next = NULL;
    n->push = r;
    n->bytes = bytes;
    if (c->push_tail)
        c->push_tail->next = n;
    else
        c->push_head = n;
    c->push_tail = n;
    c->npushes++;
    c->push_bytes += bytes;
    return ORDO_OK;
}

/* parse_buffered() -- one reply or push from c->in. 1 with *out, 0 if more
 * bytes are needed, or a negative error. */
static int parse_buffered(ordo_client_t *c, ordo_reply_t **out)
{
    assert(c->fd >= 0 && c->in.len > 0 && out != NULL);
    size_t used = 0;
    int rc = cresp_parse(&c->parser, c->in.data, c->in.len, &used, out);
    cresp_buf_consume(&c->in, used);
    if (rc == CRESP_DONE)
        return 1;
    if (rc == CRESP_NEED_MORE)
        return 0;
    if (rc == CRESP_NOMEM)
        return ORDO_ENOMEM;
    return client_seterr(c, ORDO_EPROTO, "protocol error: %s", c->parser.error);
}

/* read_reply() -- the next non-push reply (pushes are queued), flushing
 * c->out as it waits. Any error drops the connection. */
static int read_reply(ordo_client_t *c, int64_t deadline, ordo_reply_t **out)
{
    assert(c->fd >= 0 && out != NULL);
    int rc;
    for (;;) {
        ordo_reply_t *r = NULL;
        rc = c->in.len ? parse_buffered(c, &r) : 0;
        if (rc < 0)
            goto drop;
        if (rc == 1) {
            if (r->type == ORDO_REPLY_PUSH) {
                if ((rc = enqueue_push(c, r, c->parser.last_bytes)) != ORDO_OK)
                    goto drop;
                continue;
            }
            *out = r;
            return ORDO_OK;
        }
        if (deadline >= 0 && client_now_ms() >= deadline) {
            /* Checked here too: a server that keeps sending never lets
             * poll() time out. */
            rc = client_seterr(c, ORDO_ETIMEDOUT, "timed out waiting for the server");
            goto drop;
        }
        if ((rc = wait_io(c, deadline, 1)) != ORDO_OK)
            goto drop;
    }
drop:
    client_drop(c);
    return rc;
}

static int flush_out(ordo_client_t *c, int64_t deadline)
{
    assert(c->fd >= 0);
    while (c->out.len || c->tls_out.len) {
        int rc = wait_io(c, deadline, 1);
        if (rc != ORDO_OK) {
            client_drop(c);
            return rc;
        }
    }
    return ORDO_OK;
}

/* ---- connecting ---------------------------------------------------------- */

/* min_deadline() -- the earlier of two deadlines (-1: none). */
static int64_t min_deadline(int64_t a, int64_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

static int past(int64_t deadline)
{
    return deadline >= 0 && client_now_ms() >= deadline;
}

/* pause_until() -- sleep ms, but never past deadline (-1: none). */
static void pause_until(int ms, int64_t deadline)
{
    if (deadline >= 0) {
        int left = remaining_ms(deadline);
        if (ms > left)
            ms = left;
    }
    sleep_ms(ms);
}

static int connect_once(ordo_client_t *c, const char *host, int port, int64_t deadline)
{
    assert(c->fd < 0 && host != NULL && port > 0);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    int g = getaddrinfo(host, portstr, &hints, &res);
    if (g != 0)
        return client_seterr(c, ORDO_ECONN, "%s: %s", host, gai_strerror(g));
    int rc = client_seterr(c, ORDO_ECONN, "%s:%d: no address", host, port);
    deadline = min_deadline(client_now_ms() + c->connect_timeout_ms, deadline);
    for (ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            rc = client_seterr(c, ORDO_ECONN, "socket: %s", strerror(errno));
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            rc = client_seterr(c, ORDO_ECONN, "connect %s:%d: %s", host, port, strerror(errno));
            close(fd);
            continue;
        }
        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
        int n;
        while ((n = poll(&pfd, 1, remaining_ms(deadline))) < 0 && errno == EINTR)
            ;
        int err = 0;
        socklen_t el = sizeof err;
        if (n <= 0) {
            rc = client_seterr(c, ORDO_ECONN, "connect %s:%d: timed out", host, port);
            close(fd);
            continue;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
            rc = client_seterr(c, ORDO_ECONN, "connect %s:%d: %s", host, port, strerror(err ? err : errno));
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        rc = ORDO_OK;
        break;
    }
    freeaddrinfo(res);
    return rc;
}

/* handshake_call() -- one command on a fresh connection, raw reply. */
static int handshake_call(ordo_client_t *c, int argc, const char *const *argv, int64_t deadline,
                          ordo_reply_t **r)
{
    assert(c->fd >= 0 && c->pending == 0 && c->out.len == 0);
    if (cresp_encode(&c->out, argc, argv, NULL) != 0)
        return ORDO_ENOMEM;
    deadline = min_deadline(client_now_ms() + c->call_timeout_ms, deadline);
    int rc = flush_out(c, deadline);
    if (rc == ORDO_OK)
        rc = read_reply(c, deadline, r);
    return rc;
}

static int handshake(ordo_client_t *c, int64_t deadline)
{
    assert(c->fd >= 0 && c->proto == 0);
    ordo_reply_t *r = NULL;
    int rc;
    if (!c->resp2_only) {
        const char *hello[] = { "HELLO", "3", "AUTH", c->user ? c->user : "default", c->password };
        if ((rc = handshake_call(c, c->password ? 5 : 2, hello, deadline, &r)) != ORDO_OK)
            return rc;
        if (r->type != ORDO_REPLY_ERROR) {
            ordo_reply_free(r);
            c->proto = 3;
            return ORDO_OK;
        }
        if (client_is_auth_error(r)) {
            rc = client_seterr(c, ORDO_EAUTH, "%s", r->str);
            ordo_reply_free(r);
            client_drop(c);
            return rc;
        }
        ordo_reply_free(r); /* no RESP3 here: stay on RESP2 */
    }
    c->proto = 2;
    if (c->password) {
        const char *auth[] = { "AUTH", c->user ? c->user : c->password, c->password };
        if ((rc = handshake_call(c, c->user ? 3 : 2, auth, deadline, &r)) != ORDO_OK)
            return rc;
        if (r->type == ORDO_REPLY_ERROR) {
            rc = client_seterr(c, ORDO_EAUTH, "%s", r->str);
            ordo_reply_free(r);
            client_drop(c);
            return rc;
        }
        ordo_reply_free(r);
    }
    return ORDO_OK;
}

/* ask_members() -- `CLUSTER MEMBERS` on the connection (nothing pending)
 * and learn what it lists. A server outside cluster mode answers an error,
 * which teaches nothing. Returns ORDO_OK, or the error that dropped the
 * connection. */
static int ask_members(ordo_client_t *c, int64_t deadline)
{
    assert(c->fd >= 0 && c->pending == 0);
    c->learn = 0;
    const char *argv[] = { "CLUSTER", "MEMBERS" };
    ordo_reply_t *r = NULL;
    int rc = handshake_call(c, 2, argv, deadline, &r);
    if (rc != ORDO_OK)
        return rc;
    (void)client_members_learn(&c->members, r);
    ordo_reply_free(r);
    return ORDO_OK;
}

/* connect_retry() -- connect to members.cur, and on failure to the next
 * member at once; after a whole round of failures, pause with backoff.
 * Bounded by the reconnect budget and by deadline (-1: none). An
 * authentication failure is final. On failure the error text names every
 * address tried. */
static int connect_retry(ordo_client_t *c, int64_t deadline)
{
    assert(c->fd < 0);
    int64_t budget = c->reconnect_timeout_ms < 0 ? -1 : client_now_ms() + c->reconnect_timeout_ms;
    deadline = min_deadline(budget, deadline);
    for (int attempt = 0;; attempt++) {
        client_member_t *m = &c->members.m[c->members.cur];
        int rc = connect_once(c, m->host, m->port, deadline);
        if (rc == ORDO_OK && c->tls_ctx != NULL) {
            rc = client_tls_start(c, m->host, min_deadline(client_now_ms() + c->connect_timeout_ms, deadline));
            /* A handshake cut short (the member closed, was killed, or
             * timed out) leaves no connection: the next member's connect
             * starts from none. */
            if (rc != ORDO_OK)
                client_drop(c);
        } else if (rc == ORDO_OK && c->tls_bad != NULL) {
            rc = client_seterr(c, ORDO_ETLS, "TLS options: %s", c->tls_bad);
        }
        if (rc == ORDO_OK) {
            rc = handshake(c, deadline);
            if (rc == ORDO_OK && c->learn)
                rc = ask_members(c, deadline);
            if (rc == ORDO_OK) {
                c->epoch++;
                return ORDO_OK;
            }
            client_drop(c);
            if (rc == ORDO_EAUTH || rc == ORDO_ENOMEM)
                return rc;
        }
        if (rc == ORDO_ETLS) {
            client_drop(c);
            return rc; /* the next try would meet the same certificate */
        }
        /* A member that does not answer may be a deposed leader: the others
         * know who leads now, and may know members we do not. */
        c->learn = 1;
        client_members_next(&c->members);
        if (past(deadline)) {
            char last[CLIENT_ERRSTR_MAX], tried[CLIENT_ERRSTR_MAX];
            memcpy(last, c->errstr, sizeof last);
            client_members_format(&c->members, tried, sizeof tried);
            return client_seterr(c, ORDO_ECONN, "no server reachable at %.240s (last: %.200s)", tried, last);
        }
        if ((attempt + 1) % c->members.n == 0)
            pause_until(client_backoff_ms(&c->rng, (attempt + 1) / c->members.n - 1, c->backoff_min_ms,
                                          c->backoff_max_ms),
                        deadline);
    }
}

/* settle_move() -- once a pipelined -NOTLEADER's replies have all been
 * read, leave that member for the one it named (or the next). */
static void settle_move(ordo_client_t *c)
{
    if (!c->moved || c->pending != 0)
        return;
    client_drop(c);
    if (c->move_to >= 0 && c->move_to < c->members.n)
        c->members.cur = c->move_to;
    else
        client_members_next(&c->members);
    c->moved = 0;
    c->move_to = -1;
}

static int connect_until(ordo_client_t *c, int64_t deadline)
{
    settle_move(c);
    if (c->fd >= 0)
        return ORDO_OK;
    return connect_retry(c, deadline);
}

int ordo_client_connect(ordo_client_t *c)
{
    return connect_until(c, -1);
}

/* ---- commands ------------------------------------------------------------ */

static int64_t call_deadline(const ordo_client_t *c, int timeout_ms)
{
    if (timeout_ms == ORDO_WAIT_FOREVER)
        return -1;
    return client_now_ms() + (timeout_ms > 0 ? timeout_ms : c->call_timeout_ms);
}

static int is_notleader(const ordo_reply_t *r)
{
    return r->type == ORDO_REPLY_ERROR && client_error_code(r->str, NULL) == ORDO_ENOTLEADER;
}

/* redirect_target() -- the member a -NOTLEADER text names, or -1 (no
 * leader known, or an address that is not a member). With ask set and the
 * connection idle, an unknown address is looked up in this member's
 * `CLUSTER MEMBERS` first. */
static int redirect_target(ordo_client_t *c, const char *text, int ask, int64_t deadline)
{
    char host[CLIENT_HOST_MAX];
    int port;
    if (client_parse_notleader(text, host, sizeof host, &port) != CLIENT_REDIRECT_TO)
        return -1;
    int idx = client_members_find(&c->members, host, port);
    if (idx < 0 && ask && c->fd >= 0 && c->pending == 0) {
        (void)ask_members(c, deadline);
        idx = client_members_find(&c->members, host, port);
    }
    if (idx < 0)
        c->learn = 1; /* the next member asked may list it */
    return idx == c->members.cur ? -1 : idx;
}

int ordo_client_append(ordo_client_t *c, int argc, const char *const *argv, const size_t *lens)
{
    assert(c != NULL);
    if (argc <= 0)
        return ORDO_EINVAL;
    int rc = connect_until(c, -1);
    if (rc != ORDO_OK)
        return rc;
    if (cresp_encode(&c->out, argc, argv, lens) != 0)
        return ORDO_ENOMEM;
    c->pending++;
    return ORDO_OK;
}

int ordo_client_get_reply(ordo_client_t *c, int timeout_ms, ordo_reply_t **reply)
{
    assert(c != NULL && reply != NULL);
    *reply = NULL;
    if (c->pending == 0)
        return ORDO_EINVAL;
    if (c->fd < 0)
        return client_seterr(c, ORDO_ECONN, "not connected");
    int64_t deadline = call_deadline(c, timeout_ms);
    int rc = read_reply(c, deadline, reply);
    if (rc != ORDO_OK)
        return rc;
    c->pending--;
    if (is_notleader(*reply) && !c->moved) {
        /* The command did not run; the ones after it on this connection
         * will not either. The caller sees the reply; the next append goes
         * to the member it names once this pipeline is read. */
        c->moved = 1;
        c->move_to = redirect_target(c, (*reply)->str, 0, deadline);
    }
    return ORDO_OK;
}

/* peer_gone() -- an idle connection the server has closed (a member that
 * was killed or restarted while we had nothing to say) is dropped before a
 * command is written to it, so the command goes to a live member instead
 * of becoming "may or may not have run". Costs one poll() per call. */
static void peer_gone(ordo_client_t *c)
{
    if (c->fd < 0 || c->pending != 0)
        return;
    struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
    if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    if (read_some(c) != ORDO_OK) /* closed; bytes read (a push) stay in c->in */
        client_drop(c);
}

/* drain() -- read and drop the replies of earlier appends nobody asked for. */
static void drain(ordo_client_t *c)
{
    while (c->pending) {
        ordo_reply_t *r;
        if (ordo_client_get_reply(c, 0, &r) != ORDO_OK)
            break;
        ordo_reply_free(r);
    }
}

int client_call(ordo_client_t *c, int timeout_ms, int argc, const char *const *argv,
                const size_t *lens, int flags, ordo_reply_t **reply)
{
    assert(c != NULL && reply != NULL);
    *reply = NULL;
    if (argc <= 0)
        return ORDO_EINVAL;
    drain(c);
    int64_t deadline = call_deadline(c, timeout_ms);
    ordo_reply_t *last = NULL; /* the last -NOTLEADER of this call */
    for (int hop = 0, retry = 0;;) {
        peer_gone(c);
        int rc = connect_until(c, deadline);
        if (rc != ORDO_OK && last != NULL && rc != ORDO_EAUTH && rc != ORDO_ENOMEM && rc != ORDO_ETLS) {
            /* The deadline passed while looking for the leader: the
             * command never ran, which is what -NOTLEADER says. */
            *reply = last;
            return ORDO_OK;
        }
        ordo_reply_free(last);
        last = NULL;
        if (rc != ORDO_OK)
            return rc;
        if (cresp_encode(&c->out, argc, argv, lens) != 0)
            return ORDO_ENOMEM;
        c->pending++;
        rc = read_reply(c, deadline, reply);
        if (rc == ORDO_ECONN && (flags & CLIENT_CALL_SAFE) && !past(deadline)) {
            /* The connection broke with the command outstanding: it may
             * have run, and the caller said a repeat is recognised. */
            pause_until(client_backoff_ms(&c->rng, retry++, c->backoff_min_ms, c->backoff_max_ms), deadline);
            continue;
        }
        if (rc != ORDO_OK)
            return rc;
        c->pending--;
        if (!is_notleader(*reply))
            return ORDO_OK;
        /* -NOTLEADER: it did not run here. Go where it says if that is a
         * member, else to another member; pause once the hops run out,
         * and give up (the caller sees -NOTLEADER) only at the deadline. */
        int to = redirect_target(c, (*reply)->str, 1, deadline);
        client_drop(c);
        if (to >= 0)
            c->members.cur = to;
        else
            client_members_next(&c->members);
        if (to < 0 || hop >= c->redirects_max)
            pause_until(client_backoff_ms(&c->rng, hop, c->backoff_min_ms, c->backoff_max_ms), deadline);
        hop++;
        if (past(deadline))
            return ORDO_OK;
        last = *reply;
        *reply = NULL;
    }
}

int ordo_client_command(ordo_client_t *c, int timeout_ms, int argc, const char *const *argv,
                        const size_t *lens, ordo_reply_t **reply)
{
    return client_call(c, timeout_ms, argc, argv, lens, 0, reply);
}

int ordo_client_command_strs(ordo_client_t *c, int timeout_ms, ordo_reply_t **reply, ...)
{
    const char *argv[CLIENT_COMMAND_STRS_MAX];
    int argc = 0;
    va_list ap;
    va_start(ap, reply);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL) {
        if (argc == CLIENT_COMMAND_STRS_MAX) {
            va_end(ap);
            *reply = NULL;
            return ORDO_EINVAL;
        }
        argv[argc++] = a;
    }
    va_end(ap);
    return ordo_client_command(c, timeout_ms, argc, argv, NULL, reply);
}

int ordo_client_next_push(ordo_client_t *c, int timeout_ms, ordo_reply_t **push)
{
    assert(c != NULL && push != NULL);
    *push = NULL;
    if (c->pending)
        return ORDO_EINVAL;
    int64_t deadline = timeout_ms == ORDO_WAIT_FOREVER ? -1 : client_now_ms() + timeout_ms;
    for (;;) {
        if (c->push_head) {
            push_node_t *n = c->push_head;
            c->push_head = n->next;
            if (c->push_head == NULL)
                c->push_tail = NULL;
            *push = n->push;
            c->npushes--;
            c->push_bytes -= n->bytes;
            free(n);
            return ORDO_OK;
        }
        if (c->fd < 0)
            return client_seterr(c, ORDO_ECONN, "not connected");
        ordo_reply_t *r = NULL;
        int rc = c->in.len ? parse_buffered(c, &r) : 0;
        if (rc == 1) {
            if (r->type != ORDO_REPLY_PUSH) {
                ordo_reply_free(r);
                client_drop(c);
                return client_seterr(c, ORDO_EPROTO, "a reply arrived with no command outstanding");
            }
            if ((rc = enqueue_push(c, r, c->parser.last_bytes)) != ORDO_OK) {
                client_drop(c);
                return rc;
            }
            continue;
        }
        if (rc == 0)
            rc = wait_io(c, deadline, 1);
        if (rc == ORDO_ETIMEDOUT)
            return rc; /* nothing outstanding: the stream is intact */
        if (rc != ORDO_OK) {
            client_drop(c);
            return rc;
        }
    }
}
