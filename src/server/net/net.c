/*
 * net.c -- listeners and connections on libuv: accept, read, parse, hand
 * each command to the command layer, write replies. It moves bytes; it
 * never touches server state beyond the connection list.
 *
 * Reads: libuv reads into the connection's input buffer; every complete
 * command in it is dispatched in order (pipelining), then the parsed bytes
 * are consumed. An incomplete command waits for need_bytes so a large bulk
 * is parsed once, not once per read. Reading stops for one connection
 * while its unsent output is large (CONN_PAUSE_READ_BYTES), and for every
 * connection while the log is behind the disk (s->wal_paused, persist.h);
 * start_reading() never starts one during the latter.
 *
 * Writes: replies of one read batch go out in one write. uv_try_write sends
 * what the socket takes at once without allocating a request; only the rest
 * waits for a uv_write.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "writer/writer.h"
#include "cmd/cmd.h"
#include "conn.h"
#include "net.h"
#include "http.h"
#include "writer/apply.h"
#include "writer/persist.h"

size_t conn_pending(const conn_t *c) { return c->out.len + c->wbuf.len; }

/* Empty b, freeing its memory if it grew past keep; large frees are counted
 * toward the next trim (net_cron). */
static void buf_drop(server_t *s, ordo_buf_t *b, size_t keep)
{
    if (b->cap > keep && b->cap >= NET_TRIM_COUNT_BYTES)
        s->net.released_bytes += b->cap;
    ordo_buf_reset(b, keep);
}

size_t net_client_memory(const server_t *s)
{
    size_t n = 0;
    for (const conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        n += sizeof *c + c->in.cap + c->out.cap + c->wbuf.cap;
    return n;
}

void net_cron(server_t *s)
{
    http_cron(s);
    if (s->net.released_bytes >= NET_TRIM_AFTER_BYTES) {
        s->net.released_bytes = 0;
        malloc_trim(0);
        s->stats.allocator_trims++;
    }
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        if (!c->closing && conn_pending(c) > (size_t)s->cfg.output_soft_bytes)
            conn_check_output(c);
}

static void on_close(uv_handle_t *h)
{
    conn_t *c = h->data;
    server_t *s = c->srv;
    assert(!ordo_list_linked(&c->dirty_ln, NULL) && !ordo_list_linked(&c->held_ln, NULL) &&
           !ordo_list_linked(&c->resume_ln, NULL) && c->waiter == NULL); /* conn_close() unlinked it */
    ordo_list_remove(&s->net.conns, &c->link);
    buf_drop(s, &c->in, 0);
    buf_drop(s, &c->out, 0);
    buf_drop(s, &c->wbuf, 0);
    resp_cmd_free(&c->cmd);
    http_conn_free(c);
    free(c->name);
    free(c);
}

#define CONN_OF(n, member) ORDO_LIST_ENTRY(n, conn_t, member)

void conn_mark_dirty(conn_t *c)
{
    if (ordo_list_linked(&c->dirty_ln, NULL) || c->closing)
        return;
    ordo_list_push_front(&c->srv->net.dirty, &c->dirty_ln);
}

void conn_flush_dirty(server_t *s)
{
    ordo_list_node_t *n;
    while ((n = ordo_list_pop_front(&s->net.dirty)) != NULL)
        conn_flush(CONN_OF(n, dirty_ln));
}

static void unhold(conn_t *c)
{
    if (ordo_list_linked(&c->held_ln, NULL))
        ordo_list_remove(c->held_ln.list, &c->held_ln); /* net.held, or a list taken from it */
}

/* Flushing a connection may hold it again (output past the new durable
 * revision): those wait for the next release, so the list is taken whole
 * first and only the connections in it are flushed. */
void conn_release_held(server_t *s)
{
    ordo_list_t list = {0};
    ordo_list_node_t *n;
    while ((n = ordo_list_pop_front(&s->net.held)) != NULL)
        ordo_list_push_back(&list, n);
    while ((n = ordo_list_pop_front(&list)) != NULL)
        conn_flush(CONN_OF(n, held_ln));
}

void conn_close_held(server_t *s)
{
    ordo_list_node_t *n;
    while ((n = ordo_list_pop_front(&s->net.held)) != NULL)
        conn_close(CONN_OF(n, held_ln));
}

static void unresume(conn_t *c)
{
    if (ordo_list_linked(&c->resume_ln, NULL))
        ordo_list_remove(c->resume_ln.list, &c->resume_ln); /* net.resumed, or a list taken from it */
}

static void process_input(conn_t *c);
static void start_reading(conn_t *c);

void conn_resume(conn_t *c)
{
    if (ordo_list_linked(&c->resume_ln, NULL) || c->closing)
        return;
    ordo_list_push_front(&c->srv->net.resumed, &c->resume_ln);
}

void conn_run_resumed(server_t *s)
{
    ordo_list_node_t *n;
    while ((n = ordo_list_pop_front(&s->net.resumed)) != NULL) {
        conn_t *c = CONN_OF(n, resume_ln);
        process_input(c);
        if (!c->closing && !c->reading && c->waiter == NULL && conn_pending(c) < CONN_PAUSE_READ_BYTES)
            start_reading(c);
        conn_mark_dirty(c);
    }
}

static void undirty(conn_t *c)
{
    if (ordo_list_linked(&c->dirty_ln, NULL))
        ordo_list_remove(c->dirty_ln.list, &c->dirty_ln); /* net.dirty, or a list taken from it */
}

void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    undirty(c);
    unhold(c);
    unresume(c);
    writer_conn_closed(c->srv, c);
    cmd_conn_closed(c);
    if (c->srv->cfg.verbose)
        fprintf(stderr, "ordod: client %llu (%s) closed\n", (unsigned long long)c->id, c->addr);
    uv_close(&c->h.handle, on_close);
}

bool conn_check_output(conn_t *c)
{
    const ordo_config_t *cfg = &c->srv->cfg;
    size_t pending = conn_pending(c);
    if (pending > (size_t)cfg->output_hard_bytes) {
        fprintf(stderr, "ordod: client %llu closed: %zu bytes of unsent output (output-hard-bytes)\n",
                (unsigned long long)c->id, pending);
        c->srv->stats.clients_closed_output++;
        conn_close(c);
        return false;
    }
    if (pending <= (size_t)cfg->output_soft_bytes) {
        c->soft_since_ms = 0;
        return true;
    }
    uint64_t now = server_tick(c->srv);
    if (c->soft_since_ms == 0)
        c->soft_since_ms = now;
    else if (now - c->soft_since_ms >= (uint64_t)cfg->output_soft_seconds * 1000u) {
        fprintf(stderr, "ordod: client %llu closed: output above output-soft-bytes for %llds\n",
                (unsigned long long)c->id, (long long)cfg->output_soft_seconds);
        c->srv->stats.clients_closed_output++;
        conn_close(c);
        return false;
    }
    return true;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn_t *c = h->data;
    /* Grow with what actually arrives, doubling, never to what a header
     * merely claims: a client announcing a 16 MiB bulk and sending nothing
     * costs a read chunk, not 16 MiB. */
    size_t want = CONN_READ_CHUNK;
    if (c->need_bytes > c->in.len) {
        size_t missing = c->need_bytes - c->in.len;
        size_t grow = c->in.len > want ? c->in.len : want;
        want = missing < grow ? missing : grow;
    }
    buf->base = ordo_buf_reserve(&c->in, want);
    buf->len = c->in.cap - c->in.len;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* Input that should wait: the connection's unsent output is large, or it
 * is parked with a full buffer of pipelined commands behind it. */
static bool input_held(const conn_t *c)
{
    return conn_pending(c) >= CONN_PAUSE_READ_BYTES || (c->waiter != NULL && c->in.len >= CONN_BLOCKED_IN_MAX);
}

/* Read c again if it was paused and nothing holds its input any more. */
static void resume_reading(conn_t *c)
{
    if (!c->closing && !c->reading && !input_held(c))
        start_reading(c);
}

/* Everything pending was sent (by libuv, or at once by uv_try_write):
 * let watches catch up, and read again if output had paused reading. */
static void drained(conn_t *c)
{
    cmd_conn_drained(c);
    resume_reading(c);
}

static void on_write(uv_write_t *req, int status)
{
    conn_t *c = req->data;
    c->writing = false;
    buf_drop(c->srv, &c->wbuf, CONN_IN_KEEP_BYTES);
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->out.len > 0) {
        conn_flush(c);
        return;
    }
    if (c->close_after_write) {
        conn_close(c);
        return;
    }
    drained(c);
    if (!c->closing)
        conn_flush(c);
}

/* The durability marks' invariant (conn.h): ends and revisions strictly
 * increase along the array, and every end is within out. */
static void check_marks(const conn_t *c)
{
    assert(c->nmarks >= 0 && c->nmarks <= CONN_MARKS_MAX);
    for (int i = 0; i < c->nmarks; i++) {
        assert(c->marks[i].end <= c->out.len);
        assert(i == 0 || (c->marks[i - 1].end < c->marks[i].end && c->marks[i - 1].rev < c->marks[i].rev));
    }
}

/* Mark the output appended since the last mark with the revision it may
 * depend on (the current one), unless that revision is already durable.
 * Returns how many bytes of out may be sent now. */
static size_t sendable_bytes(conn_t *c)
{
    server_t *s = c->srv;
    if (server_readonly(s) != NULL) {
        /* The log failed: output pending then was dropped with its
         * connection (persist.c), and what is produced since depends on no
         * unstored revision, so nothing waits (it would wait forever). */
        c->nmarks = 0;
        return c->out.len;
    }
    uint64_t rev = writer_rev(s), durable = s->durable_rev;
    size_t last_end = c->nmarks ? c->marks[c->nmarks - 1].end : 0;
    if (c->out.len > last_end && rev > durable) {
        if (c->nmarks == CONN_MARKS_MAX || (c->nmarks > 0 && c->marks[c->nmarks - 1].rev == rev)) {
            c->marks[c->nmarks - 1].end = c->out.len;
            c->marks[c->nmarks - 1].rev = rev;
        } else {
            c->marks[c->nmarks].end = c->out.len;
            c->marks[c->nmarks].rev = rev;
            c->nmarks++;
        }
    }
    if (c->nmarks == 0)
        return c->out.len;
    int done = 0;
    while (done < c->nmarks && c->marks[done].rev <= durable)
        done++;
    if (done == c->nmarks) {
        c->nmarks = 0;
        return c->out.len; /* every mark is durable, and so is the tail */
    }
    size_t ok = done ? c->marks[done - 1].end : 0;
    memmove(c->marks, c->marks + done, (size_t)(c->nmarks - done) * sizeof c->marks[0]);
    c->nmarks -= done;
    check_marks(c);
    assert(ok < c->marks[0].end); /* what is sent now ends before the first held byte */
    if (!ordo_list_linked(&c->held_ln, NULL) && !c->closing)
        ordo_list_push_front(&s->net.held, &c->held_ln);
    return ok;
}

/* out lost its first n bytes: move the marks with it. */
static void consume_out(conn_t *c, size_t n)
{
    assert(n <= c->out.len && (c->nmarks == 0 || n < c->marks[0].end)); /* held bytes are never sent */
    ordo_buf_consume(&c->out, n);
    c->out_consumed += n;
    for (int i = 0; i < c->nmarks; i++)
        c->marks[i].end -= n;
    check_marks(c);
}

void conn_flush(conn_t *c)
{
    if (c->closing || c->writing)
        return;
    if (c->http != NULL)
        http_before_flush(c); /* its RESP replies become HTTP responses */
    size_t ready = c->out.len ? sendable_bytes(c) : 0;
    if (c->out.len == 0) {
        if (c->close_after_write)
            conn_close(c);
        return;
    }
    assert(ready <= c->out.len);
    if (ready == 0)
        return; /* held until the log reaches its revision */
    uv_buf_t b = uv_buf_init(c->out.data, (unsigned)ready);
    int n = uv_try_write(&c->h.stream, &b, 1);
    if (n > 0) {
        c->srv->stats.net_out_bytes += (uint64_t)n;
        consume_out(c, (size_t)n);
        ready -= (size_t)n;
    } else if (n < 0 && n != UV_EAGAIN) {
        conn_close(c);
        return;
    }
    if (c->out.len == 0) {
        buf_drop(c->srv, &c->out, CONN_IN_KEEP_BYTES);
        if (c->close_after_write)
            conn_close(c);
        else
            drained(c);
        return;
    }
    if (ready == 0)
        return; /* the rest is held */
    /* The sendable rest waits for the socket: hand it to libuv. */
    if (ready == c->out.len) {
        ordo_buf_t t = c->wbuf;
        c->wbuf = c->out;
        c->out = t;
        c->out.len = 0;
        c->out_consumed += ready;
        c->nmarks = 0;
    } else {
        c->wbuf.len = 0;
        ordo_buf_append(&c->wbuf, c->out.data, ready);
        consume_out(c, ready);
    }
    c->writing = true;
    c->wreq.data = c;
    c->srv->stats.net_out_bytes += c->wbuf.len;
    b = uv_buf_init(c->wbuf.data, (unsigned)c->wbuf.len);
    if (uv_write(&c->wreq, &c->h.stream, &b, 1, on_write) != 0) {
        c->writing = false;
        conn_close(c);
        return;
    }
    conn_check_output(c);
}

static void start_reading(conn_t *c)
{
    if (c->srv->wal_paused)
        return; /* back-pressure: net_resume_reading() starts it */
    if (uv_read_start(&c->h.stream, on_alloc, on_read) == 0)
        c->reading = true;
}

/* Parse and dispatch every complete command in the input buffer. */
static void process_input(conn_t *c)
{
    size_t off = 0;
    resp_limits_t lim;
    if (c->http != NULL) {
        http_process_input(c);
        return;
    }
    while (!c->closing && !c->close_after_write && c->waiter == NULL && off < c->in.len) {
        if (c->in.len - off < c->need_bytes)
            break;
        cmd_limits(c, &lim);
        size_t consumed = 0, need = 0;
        const char *err = NULL;
        int rc = resp_parse(c->in.data + off, c->in.len - off, &lim, &c->cmd, &consumed, &need, &err);
        if (rc == RESP_NEED_MORE) {
            c->need_bytes = need;
            break;
        }
        c->need_bytes = 0;
        if (rc == RESP_PROTO_ERROR) {
            resp_add_errorf(&c->out, "ERR Protocol error: %s", err);
            c->srv->stats.errors_total++;
            c->close_after_write = true;
            break;
        }
        off += consumed;
        if (rc == RESP_COMMAND)
            cmd_dispatch(c, &c->cmd);
    }
    if (off > 0) {
        ordo_buf_consume(&c->in, off);
        if (c->in.len == 0)
            buf_drop(c->srv, &c->in, CONN_IN_KEEP_BYTES);
    }
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    conn_t *c = st->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0 || c->closing)
        return;
    c->in.len += (size_t)nread;
    c->srv->stats.net_in_bytes += (uint64_t)nread;
    server_tick(c->srv);
    process_input(c);
    if (c->closing)
        return;
    /* The log is behind the disk by more than wal-pending-max-bytes: read
     * no client until it catches up. */
    if (!c->srv->wal_paused && persist_backlogged(c->srv))
        net_pause_reading(c->srv);
    /* A blocked connection keeps being read (so a disconnect is seen), but
     * its pipelined commands wait; past a bound, stop reading it too. */
    if (c->reading && input_held(c)) {
        uv_read_stop(&c->h.stream);
        c->reading = false;
    }
    conn_flush(c);
}

void net_pause_reading(server_t *s)
{
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        if (c->reading && !c->closing) {
            uv_read_stop(&c->h.stream);
            c->reading = false;
        }
}

void net_resume_reading(server_t *s)
{
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        resume_reading(c);
}

/* Loopback peers: 127.0.0.0/8, ::1, and Unix sockets. */
static bool peer_is_loopback(conn_t *c, bool is_unix)
{
    if (is_unix)
        return true;
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) != 0)
        return false;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a, c->addr, sizeof c->addr);
        snprintf(c->addr + strlen(c->addr), sizeof c->addr - strlen(c->addr), ":%d", ntohs(a->sin_port));
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        char ip[48];
        uv_ip6_name(a, ip, sizeof ip);
        snprintf(c->addr, sizeof c->addr, "[%s]:%d", ip, ntohs(a->sin6_port));
        static const unsigned char lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(&a->sin6_addr, lo, 16) == 0)
            return true;
        return memcmp(&a->sin6_addr, mapped, 12) == 0 && a->sin6_addr.s6_addr[12] == 127;
    }
    return false;
}

/* Refuse a connection with one error line, then close it. */
static void refuse(conn_t *c, const char *msg)
{
    c->srv->stats.connections_rejected++;
    resp_add_error(&c->out, msg);
    c->close_after_write = true;
    conn_flush(c);
}

static void on_connection(uv_stream_t *listener, int status)
{
    server_t *s = listener->data;
    if (status < 0)
        return;
    bool is_unix = listener == (uv_stream_t *)&s->net.unix_listener;
    bool is_http = http_is_listener(s, listener);
    conn_t *c = ordo_xcalloc(1, sizeof *c);
    c->srv = s;
    c->id = ++s->net.next_client_id;
    c->proto = 2;
    c->authed = s->cfg.requirepass[0] == '\0';
    c->created_ms = c->last_cmd_ms = server_tick(s);
    int rc = is_unix ? uv_pipe_init(s->loop, &c->h.pipe, 0) : uv_tcp_init(s->loop, &c->h.tcp);
    if (rc != 0) {
        free(c);
        return;
    }
    c->h.handle.data = c;
    ordo_list_push_front(&s->net.conns, &c->link);
    if (uv_accept(listener, &c->h.stream) != 0) {
        c->closing = true;
        uv_close(&c->h.handle, on_close);
        return;
    }
    s->stats.connections_total++;
    if (is_unix)
        snprintf(c->addr, sizeof c->addr, "unix:%.58s", s->cfg.unixsocket);
    else
        uv_tcp_nodelay(&c->h.tcp, 1);
    bool loopback = peer_is_loopback(c, is_unix);
    if (is_http && http_conn_init(c) != 0)
        return; /* refused (http-max-clients): 503 written, closing */
    if (s->net.conns.len > (size_t)s->cfg.max_clients) {
        refuse(c, "ERR max number of clients reached (max-clients)");
        return;
    }
    if (s->cfg.protected_mode && s->cfg.requirepass[0] == '\0' && !loopback) {
        refuse(c, "DENIED ordod is in protected mode: no password is set (requirepass), so only "
                  "loopback clients are accepted. Set requirepass, or protected-mode no.");
        return;
    }
    if (s->cfg.verbose)
        fprintf(stderr, "ordod: client %llu connected from %s\n", (unsigned long long)c->id, c->addr);
    start_reading(c);
}

/* unix_path_clear() -- make `path` free for a Unix socket. Nothing there:
 * fine. A socket nobody accepts on (left behind by a process that died):
 * removed. Anything else -- a socket another process listens on, a file
 * that is not a socket -- is left alone and refused with a message.
 * Returns 0 or -1. */
static int unix_path_clear(const char *path, char *err, size_t elen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, elen, "unixsocket %s: path longer than %zu bytes", path, sizeof sa.sun_path - 1);
        return -1;
    }
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, elen, "unixsocket %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, elen, "unixsocket %s exists and is not a socket; refusing to remove it", path);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, elen, "unixsocket %s: socket: %s", path, strerror(errno));
        return -1;
    }
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    close(fd);
    if (rc == 0) {
        snprintf(err, elen, "unixsocket %s is in use: another process accepts connections on it", path);
        return -1;
    }
    if (e != ECONNREFUSED) {
        snprintf(err, elen, "unixsocket %s: cannot tell whether it is in use: %s", path, strerror(e));
        return -1;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, elen, "unixsocket %s: cannot remove the stale socket: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int net_listen(server_t *s, char *err, size_t elen)
{
    int rc;
    if (s->cfg.port != 0) {
        struct sockaddr_storage ss;
        if (uv_ip4_addr(s->cfg.bind, (int)s->cfg.port, (struct sockaddr_in *)&ss) != 0 &&
            uv_ip6_addr(s->cfg.bind, (int)s->cfg.port, (struct sockaddr_in6 *)&ss) != 0) {
            snprintf(err, elen, "bind: '%s' is not an IPv4 or IPv6 address", s->cfg.bind);
            return -1;
        }
        uv_tcp_init(s->loop, &s->net.tcp);
        s->net.tcp.data = s;
        s->net.tcp_on = true;
        if ((rc = uv_tcp_bind(&s->net.tcp, (struct sockaddr *)&ss, 0)) != 0 ||
            (rc = uv_listen((uv_stream_t *)&s->net.tcp, 511, on_connection)) != 0) {
            snprintf(err, elen, "cannot listen on %s:%lld: %s", s->cfg.bind, (long long)s->cfg.port,
                     uv_strerror(rc));
            return -1;
        }
    }
    if (s->cfg.unixsocket[0] != '\0') {
        if (unix_path_clear(s->cfg.unixsocket, err, elen) != 0)
            return -1;
        uv_pipe_init(s->loop, &s->net.unix_listener, 0);
        s->net.unix_listener.data = s;
        s->net.unix_on = true;
        rc = uv_pipe_bind(&s->net.unix_listener, s->cfg.unixsocket);
        if (rc == 0) {
            s->net.unix_bound = true; /* the file is ours: removed at close */
            rc = uv_listen((uv_stream_t *)&s->net.unix_listener, 511, on_connection);
        }
        if (rc != 0) {
            snprintf(err, elen, "cannot listen on %s: %s", s->cfg.unixsocket, uv_strerror(rc));
            return -1;
        }
    }
    if (http_listen(s, on_connection, err, elen) != 0)
        return -1;
    if (!s->net.tcp_on && !s->net.unix_on) {
        snprintf(err, elen, "nothing to listen on: port is 0 and no unixsocket is set");
        return -1;
    }
    return 0;
}

void net_close_all(server_t *s)
{
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        conn_close(c);
    if (s->net.tcp_on)
        uv_close((uv_handle_t *)&s->net.tcp, NULL);
    http_close(s);
    if (s->net.unix_on) {
        uv_close((uv_handle_t *)&s->net.unix_listener, NULL);
        if (s->net.unix_bound)
            unlink(s->cfg.unixsocket);
    }
}
