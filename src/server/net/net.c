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
 * connection while the log is behind the disk (persist_backlogged(): then
 * net.reading_paused, until persist_paused() says the log caught up);
 * start_reading() never starts one during the latter.
 *
 * Held output (durability marks, conn.h): each flush marks the output a
 * connection made since the last one with the log position it waits for
 * (writer_output_mark()) and sends what the committed position
 * (persist_committed()) allows; the rest waits on net.held, which every
 * per-turn flush (net_flush(), the writer's flush hook) looks at again.
 * A read's replies are marked at once but sent by the turn's flush (see
 * on_read()), so a turn's writes follow all its reads.
 *
 * Writes: replies of one read batch go out in one write. uv_try_write sends
 * what the socket takes at once without allocating a request; only the rest
 * waits for a uv_write.
 *
 * The writer's hooks (server.h) that concern connections are here, so the
 * writer names nothing of net: net_answer() renders an outcome into a
 * connection (through cmd_render()), net_park() / net_resume() set and
 * clear its waiter (a parked connection runs no further command),
 * net_flush() is the per-turn flush, net_drop_unsure() and
 * net_drop_unmarked() close what a deposed leader or a failed log cannot
 * vouch for. The bookkeeping cmd/ also uses (pending output, shared blobs,
 * the dirty list) is net/conn.c.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "writer/writer.h"
#include "cmd/cmd.h"
#include "conn.h"
#include "net.h"
#include "http.h"
#include "net_tls.h"
#include "writer/apply.h"
#include "writer/outcome.h"
#include "writer/persist.h"

/* ---- shared blobs in the output (conn.h) ---------------------------------- */

static void shared_pop_front(conn_shared_list_t *l)
{
    assert(l->n > 0 && l->v[0].off == l->v[0].blob->len);
    ordo_blob_unref(l->v[0].blob);
    memmove(l->v, l->v + 1, (l->n - 1) * sizeof *l->v);
    l->n--;
}

static void shared_clear(conn_shared_list_t *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        ordo_blob_unref(l->v[i].blob);
    l->n = 0;
    l->bytes = 0;
}

static void shared_free(conn_shared_list_t *l)
{
    shared_clear(l);
    free(l->v);
    l->v = NULL;
    l->cap = 0;
}

/* Empty b, freeing its memory if it grew past keep; large frees are counted
 * toward the next trim (net_cron). */
static void buf_drop(server_t *s, ordo_buf_t *b, size_t keep)
{
    if (b->cap > keep && b->cap >= NET_TRIM_COUNT_BYTES)
        s->net.released_bytes += b->cap;
    ordo_buf_reset(b, keep);
}

void net_cron(server_t *s)
{
    http_cron(s);
    net_tls_cron(s);
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
    shared_free(&c->shared);
    shared_free(&c->wshared);
    resp_cmd_free(&c->cmd);
    http_conn_free(c);
    ordo_tls_free(c->tls);
    free(c->name);
    free(c->user);
    free(c);
}

#define CONN_OF(n, member) ORDO_LIST_ENTRY(n, conn_t, member)

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

static inline void hold(conn_t *c);

/* Output held for a log position goes once the log has committed it: the
 * writer only records the committed position (persist_committed()), and
 * every per-turn flush compares it with each held connection's first
 * mark. Flushing a connection may hold it again (output past the new
 * position): the list is taken whole first and only the connections in it
 * are looked at. Once the log has failed nothing more will be committed:
 * a connection still waiting after what was committed is sent is closed
 * (its outcome is unknown to its client). */
static __attribute__((noinline)) void release_held(server_t *s)
{
    log_pos_t committed = persist_committed(s);
    bool failed = server_readonly(s) != NULL;
    s->net.held_seen = persist_commits(s);
    ordo_list_t list = {0};
    ordo_list_node_t *n;
    while ((n = ordo_list_pop_front(&s->net.held)) != NULL)
        ordo_list_push_back(&list, n);
    while ((n = ordo_list_pop_front(&list)) != NULL) {
        conn_t *c = CONN_OF(n, held_ln);
        if (!failed && c->nmarks > 0 && log_pos_before(committed, c->marks[0].pos)) {
            hold(c); /* nothing of it is committed yet */
            continue;
        }
        conn_flush(c);
        if (failed && ordo_list_linked(&c->held_ln, NULL))
            conn_close(c);
    }
}

/* c holds output made since its last flush, not yet marked (it may depend
 * on revisions a failed log never stored). */
static bool conn_output_unmarked(const conn_t *c) { return c->out.len > c->checked_len; }

/* Close every connection whose output waits for a log position (a deposed
 * leader cannot say whether it will commit). */
static void conn_close_held(server_t *s)
{
    ordo_list_node_t *n;
    while ((n = ordo_list_pop_front(&s->net.held)) != NULL)
        conn_close(CONN_OF(n, held_ln));
}

void net_drop_unmarked(server_t *s)
{
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        if (!c->closing && conn_output_unmarked(c))
            conn_close(c);
}

/* hooks.answer: an event goes out at the end of the turn (another
 * client's command made it); a parked client's answer is flushed when
 * hooks.resume follows. */
void net_answer(server_t *s, conn_t *c, const struct outcome_s *o)
{
    assert(c->srv == s);
    if (c->closing)
        return;
    cmd_render(s, &c->out, c->proto, o);
    if (o->kind == OUTCOME_LEADER || o->kind == OUTCOME_QEVENT)
        conn_mark_dirty(c);
}

/* hooks.park: one blocking command at a time per connection; its later
 * pipelined commands stay in its input until it resumes. */
void net_park(conn_t *c, struct waiter_s *w)
{
    assert(c->waiter == NULL && w != NULL);
    c->waiter = w;
}

/* hooks.resume */
void net_resume(conn_t *c)
{
    assert(c->waiter != NULL);
    c->waiter = NULL;
    conn_resume(c);
    conn_mark_dirty(c);
}

/* hooks.drop_unsure: leadership was lost. Besides the connections held
 * for a position and the watchers, those whose output of this turn is not
 * held yet: output marked (on_read()) for a read round this member will
 * never start, and output not marked yet (HTTP marks at the flush), made
 * from the state of a member that led when it ran and leads no more; a
 * mark taken now would be the committed position and send it as it is. */
void net_drop_unsure(server_t *s)
{
    conn_close_held(s);
    log_pos_t committed = persist_committed(s);
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c)) {
        bool waits = c->nmarks > 0 && log_pos_before(committed, c->marks[c->nmarks - 1].pos);
        if (!c->closing && (c->nwatches > 0 || waits || conn_output_unmarked(c)))
            conn_close(c);
    }
}

static void unresume(conn_t *c)
{
    if (ordo_list_linked(&c->resume_ln, NULL))
        ordo_list_remove(c->resume_ln.list, &c->resume_ln); /* net.resumed, or a list taken from it */
}

static void process_input(conn_t *c);
static void start_reading(conn_t *c);
static void pause_reading_all(server_t *s);

static void on_resume_idle(uv_idle_t *h) { (void)h; /* only keeps the loop from sleeping */ }

void conn_resume(conn_t *c)
{
    if (ordo_list_linked(&c->resume_ln, NULL) || c->closing)
        return;
    net_t *n = &c->srv->net;
    ordo_list_push_front(&n->resumed, &c->resume_ln);
    /* A resume made after this turn's run (by a flush that drained, say)
     * runs in the next turn; until then the loop must not block in poll. */
    if (n->resume_idle_on)
        uv_idle_start(&n->resume_idle, on_resume_idle);
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
    if (s->net.resume_idle_on)
        uv_idle_stop(&s->net.resume_idle);
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
    cmd_conn_closed(c);
    net_tls_conn_closed(c);
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
    if (c->tls != NULL) {
        /* Ciphertext: decrypted into c->in by on_read at once, so one
         * buffer serves every TLS connection. */
        buf->base = c->srv->net.tls.rbuf;
        buf->len = CONN_READ_CHUNK;
        return;
    }
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
    /* Commands left in the input by the output bound (process_input) run
     * at the end of the turn, not here: this may be called from inside
     * process_input's own flush. */
    if (c->in.len > 0 && c->waiter == NULL && !c->closing)
        conn_resume(c);
    resume_reading(c);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status; /* the connection may be gone (UV_ECANCELED): touch only the request */
    free(req);
}

/* The error is sent and the input is being dropped: end our half, so the
 * client sees the end after the error (conn.h, CONN_DISCARD_MAX_BYTES). */
static void shut_write(conn_t *c)
{
    if (c->shut_down || c->closing)
        return;
    c->shut_down = true;
    uv_shutdown_t *req = ordo_xmalloc(sizeof *req);
    if (uv_shutdown(req, &c->h.stream, on_shutdown) != 0) {
        free(req);
        conn_close(c);
    }
}

static void on_write(uv_write_t *req, int status)
{
    conn_t *c = req->data;
    c->writing = false;
    c->tls_wplain = 0;
    buf_drop(c->srv, &c->wbuf, CONN_IN_KEEP_BYTES);
    shared_clear(&c->wshared);
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->out.len > 0 || c->shared.n > 0) {
        conn_flush(c);
        return;
    }
    if (c->close_after_write) {
        conn_close(c);
        return;
    }
    if (c->discard_bytes > 0) {
        shut_write(c);
        return;
    }
    drained(c);
    if (!c->closing)
        conn_flush(c);
}

/* The durability marks' invariant (conn.h): ends and positions strictly
 * increase along the array, and every end is within out. */
/* Re-checks what sendable_bytes() and consume_out() maintain: debug
 * builds only (the sanitizer suites run them), as it walks the marks on
 * every flush. */
static void check_marks(const conn_t *c)
{
#ifdef ORDO_DEBUG
    assert(c->nmarks >= 0 && c->nmarks <= CONN_MARKS_MAX);
    for (int i = 0; i < c->nmarks; i++) {
        assert(c->marks[i].end <= c->out.len);
        assert(i == 0 ||
               (c->marks[i - 1].end < c->marks[i].end && log_pos_before(c->marks[i - 1].pos, c->marks[i].pos)));
    }
#else
    (void)c;
#endif
}

/* Mark the output produced since the last look with the log position it
 * must wait for, unless that position is committed already. The mark is
 * taken only for new output that may depend on state: in cluster mode
 * taking one asks for a raft barrier (writer_output_mark()). */
static void take_mark(conn_t *c, log_pos_t committed)
{
    size_t last_end = c->nmarks ? c->marks[c->nmarks - 1].end : 0;
    bool stateless_tail = c->nostate_end == c->out.len && c->nostate_end > c->checked_len && c->shared.n == 0;
    bool fresh = c->out.len > last_end && !stateless_tail;
    c->checked_len = c->out.len;
    if (!fresh)
        return;
    log_pos_t pos = writer_output_mark(c->srv);
    if (!log_pos_before(committed, pos))
        return;
    /* Full, or not past the last mark (a member that stopped leading
     * hands out its committed position): the last mark covers it, and
     * never moves back. */
    if (c->nmarks > 0 && (c->nmarks == CONN_MARKS_MAX || !log_pos_before(c->marks[c->nmarks - 1].pos, pos))) {
        c->marks[c->nmarks - 1].end = c->out.len;
        if (log_pos_before(c->marks[c->nmarks - 1].pos, pos))
            c->marks[c->nmarks - 1].pos = pos;
    } else {
        c->marks[c->nmarks].end = c->out.len;
        c->marks[c->nmarks].pos = pos;
        c->nmarks++;
    }
}

static inline void hold(conn_t *c)
{
    if (!ordo_list_linked(&c->held_ln, NULL) && !c->closing)
        ordo_list_push_front(&c->srv->net.held, &c->held_ln);
}

static size_t sendable_bytes(conn_t *c)
{
    server_t *s = c->srv;
    log_pos_t committed = persist_committed(s);
    if (server_readonly(s) != NULL) {
        /* The log failed: output not yet marked then was dropped with its
         * connection (persist.c), and what is produced since depends on no
         * unstored revision, so it needs no mark (one would never be
         * committed). Marks taken before still hold their output:
         * release_held() closes the connection once the committed part is
         * sent. */
        c->checked_len = c->out.len;
    } else {
        take_mark(c, committed);
    }
    if (c->nmarks == 0)
        return c->out.len;
    int done = 0;
    while (done < c->nmarks && !log_pos_before(committed, c->marks[done].pos))
        done++;
    if (done == c->nmarks) {
        c->nmarks = 0;
        return c->out.len; /* every mark is committed, and so is the tail */
    }
    size_t ok = done ? c->marks[done - 1].end : 0;
    memmove(c->marks, c->marks + done, (size_t)(c->nmarks - done) * sizeof c->marks[0]);
    c->nmarks -= done;
    check_marks(c);
    assert(ok < c->marks[0].end); /* what is sent now ends before the first held byte */
    hold(c);
    return ok;
}

/* out lost its first n bytes: move the marks and the blobs' places with it. */
static void consume_out(conn_t *c, size_t n)
{
    assert(n <= c->out.len && (c->nmarks == 0 || n < c->marks[0].end)); /* held bytes are never sent */
    ordo_buf_consume(&c->out, n);
    c->out_consumed += n;
    c->checked_len = c->checked_len > n ? c->checked_len - n : 0;
    c->nostate_end = c->nostate_end > n ? c->nostate_end - n : 0;
    for (int i = 0; i < c->nmarks; i++)
        c->marks[i].end -= n;
    for (uint32_t i = 0; i < c->shared.n; i++) {
        assert(c->shared.v[i].at >= n); /* a blob is sent before the bytes after it */
        c->shared.v[i].at -= n;
    }
    check_marks(c);
}

/* The first n bytes of the output stream (out's bytes with the blobs
 * spliced in) were sent: drop them. Returns how many were out's. */
static size_t consume_stream(conn_t *c, size_t n)
{
    size_t out_bytes = 0;
    conn_shared_list_t *l = &c->shared;
    while (n > 0) {
        if (l->n > 0 && l->v[0].at == 0) {
            conn_shared_t *sh = &l->v[0];
            size_t k = sh->blob->len - sh->off < n ? sh->blob->len - sh->off : n;
            sh->off += k;
            l->bytes -= k;
            n -= k;
            if (sh->off == sh->blob->len)
                shared_pop_front(l);
            continue;
        }
        size_t limit = l->n > 0 ? l->v[0].at : c->out.len;
        size_t k = limit < n ? limit : n;
        assert(k > 0);
        consume_out(c, k);
        out_bytes += k;
        n -= k;
    }
    return out_bytes;
}

/* At most this many pieces (runs of buffer bytes and blobs) go to one
 * write; the rest goes with the next. */
#define CONN_WRITE_BUFS 64

/* Lay out the stream of b with the blobs of l up to b's byte `upto` (the
 * blobs at or before it included) as bufs for one write. Returns the
 * number of bufs; *bytes gets their total, *upto_out how far into b they
 * reach and *nblobs how many of l's blobs they hold (all of those up to
 * upto, unless CONN_WRITE_BUFS ran out first). */
static int compose(const ordo_buf_t *b, const conn_shared_list_t *l, size_t upto, uv_buf_t *bufs, size_t *bytes,
                   size_t *upto_out, uint32_t *nblobs)
{
    if (l->n == 0) { /* the common case: one run of bytes */
        bufs[0].base = b->data;
        bufs[0].len = upto;
        *bytes = upto;
        *upto_out = upto;
        *nblobs = 0;
        return upto > 0 ? 1 : 0;
    }
    int nb = 0;
    size_t pos = 0, total = 0;
    uint32_t i = 0;
    bool full = false;
    for (; i < l->n && l->v[i].at <= upto; i++) {
        const conn_shared_t *sh = &l->v[i];
        if (nb + 2 > CONN_WRITE_BUFS) {
            full = true;
            break;
        }
        if (sh->at > pos) {
            bufs[nb++] = uv_buf_init(b->data + pos, (unsigned)(sh->at - pos));
            total += sh->at - pos;
            pos = sh->at;
        }
        bufs[nb++] = uv_buf_init((char *)sh->blob->data + sh->off, (unsigned)(sh->blob->len - sh->off));
        total += sh->blob->len - sh->off;
    }
    if (!full && pos < upto) {
        bufs[nb++] = uv_buf_init(b->data + pos, (unsigned)(upto - pos));
        total += upto - pos;
        pos = upto;
    }
    *bytes = total;
    *upto_out = pos;
    *nblobs = i;
    return nb;
}

/* Encrypt up to NET_TLS_WRITE_BYTES of c's sendable output (out's bytes
 * with the blobs spliced in, as a plain write would send them) into its
 * TLS session, consuming it from out. Returns the plaintext bytes
 * encrypted, or -1 if the session failed. */
static ssize_t encrypt_output(conn_t *c)
{
    if ((c->out.len == 0 && c->shared.n == 0) || !ordo_tls_done(c->tls))
        return 0;
    size_t ready = sendable_bytes(c), total = 0, bytes, upto;
    uv_buf_t bufs[CONN_WRITE_BUFS];
    uint32_t nblobs;
    while (total < NET_TLS_WRITE_BYTES) {
        size_t room = NET_TLS_WRITE_BYTES - total;
        int nb = compose(&c->out, &c->shared, ready < room ? ready : room, bufs, &bytes, &upto, &nblobs);
        if (bytes == 0)
            break;
        for (int i = 0; i < nb; i++)
            if (bufs[i].len > 0 && ordo_tls_write(c->tls, bufs[i].base, bufs[i].len) != (ssize_t)bufs[i].len)
                return -1;
        ready -= consume_stream(c, bytes);
        total += bytes;
    }
    return (ssize_t)total;
}

/* conn_flush() of a TLS connection: encrypt what may be sent, then send
 * the session's ciphertext (handshake messages included) as a plain
 * connection sends its output: at once what the socket takes, the rest in
 * wbuf through one uv_write. wbuf's plaintext worth (tls_wplain) is what
 * the output limits count. */
static void flush_tls(conn_t *c)
{
    assert(!c->writing && c->wbuf.len == 0);
    for (;;) {
        ssize_t plain = encrypt_output(c);
        if (plain < 0) {
            conn_close(c);
            return;
        }
        size_t pending = ordo_tls_out_pending(c->tls);
        if (pending == 0)
            break;
        char *p = ordo_buf_reserve(&c->wbuf, pending);
        c->wbuf.len += ordo_tls_out_take(c->tls, p, pending);
        uv_buf_t b = uv_buf_init(c->wbuf.data, (unsigned)c->wbuf.len);
        int n = uv_try_write(&c->h.stream, &b, 1);
        if (n < 0 && n != UV_EAGAIN) {
            conn_close(c);
            return;
        }
        if (n > 0) {
            c->srv->stats.net_out_bytes += (uint64_t)n;
            ordo_buf_consume(&c->wbuf, (size_t)n);
        }
        if (c->wbuf.len > 0) {
            c->tls_wplain = (size_t)plain < c->wbuf.len ? (size_t)plain : c->wbuf.len;
            b = uv_buf_init(c->wbuf.data, (unsigned)c->wbuf.len);
            c->writing = true;
            c->wreq.data = c;
            c->srv->stats.net_out_bytes += c->wbuf.len;
            if (uv_write(&c->wreq, &c->h.stream, &b, 1, on_write) != 0) {
                c->writing = false;
                conn_close(c);
                return;
            }
            conn_check_output(c);
            return;
        }
        if (plain == 0 || (c->out.len == 0 && c->shared.n == 0))
            break; /* all sent, or only handshake bytes or held output: nothing more to encrypt now */
    }
    buf_drop(c->srv, &c->wbuf, CONN_IN_KEEP_BYTES);
    if (c->out.len > 0 || c->shared.n > 0 || !ordo_tls_done(c->tls))
        return; /* held for the log, or waiting for the handshake */
    buf_drop(c->srv, &c->out, CONN_IN_KEEP_BYTES);
    if (c->close_after_write)
        conn_close(c);
    else
        drained(c);
}

void conn_flush(conn_t *c)
{
    if (c->closing)
        return;
    if (c->writing) {
        /* The rest goes when the write completes (on_write). Its mark is
         * taken now, at the end of the turn that produced it, as for any
         * output: taken then, on a cluster member that had lost leadership
         * meanwhile, it would wait for nothing, and a read's reply would go
         * out without the barrier that confirms the leadership. Waiting,
         * the connection stays on net.held, where a lost leadership finds
         * it (conn_close_held()). HTTP output is marked once it is made
         * into responses (http_before_flush()), so only after the write. */
        if (c->http == NULL && server_readonly(c->srv) == NULL) {
            log_pos_t committed = persist_committed(c->srv);
            take_mark(c, committed);
            if (c->nmarks > 0 && log_pos_before(committed, c->marks[c->nmarks - 1].pos))
                hold(c);
        }
        return;
    }
    if (c->http != NULL)
        http_before_flush(c); /* its RESP replies become HTTP responses */
    if (c->tls != NULL) {
        flush_tls(c);
        return;
    }
    if (c->out.len == 0 && c->shared.n == 0) {
        if (c->close_after_write)
            conn_close(c);
        else if (c->discard_bytes > 0)
            shut_write(c);
        return;
    }
    size_t ready = sendable_bytes(c), bytes, upto;
    assert(ready <= c->out.len);
    uv_buf_t bufs[CONN_WRITE_BUFS];
    uint32_t nblobs;
    int nb = compose(&c->out, &c->shared, ready, bufs, &bytes, &upto, &nblobs);
    if (bytes == 0)
        return; /* held until the log reaches its revision */
    int n = uv_try_write(&c->h.stream, bufs, (unsigned)nb);
    if (n > 0) {
        c->srv->stats.net_out_bytes += (uint64_t)n;
        ready -= consume_stream(c, (size_t)n);
    } else if (n < 0 && n != UV_EAGAIN) {
        conn_close(c);
        return;
    }
    if (c->out.len == 0 && c->shared.n == 0) {
        buf_drop(c->srv, &c->out, CONN_IN_KEEP_BYTES);
        if (c->close_after_write)
            conn_close(c);
        else if (c->discard_bytes > 0)
            shut_write(c);
        else
            drained(c);
        return;
    }
    nb = compose(&c->out, &c->shared, ready, bufs, &bytes, &upto, &nblobs);
    if (bytes == 0)
        return; /* the rest is held */
    /* The sendable rest waits for the socket: hand it to libuv, out's
     * bytes up to `upto` in wbuf and the blobs among them in wshared (at
     * the same places: wbuf starts where out did). */
    assert(c->wbuf.len == 0 && c->wshared.n == 0 && c->wshared.bytes == 0);
    if (upto == c->out.len && nblobs == c->shared.n) {
        ordo_buf_t t = c->wbuf;
        c->wbuf = c->out;
        c->out = t;
        c->out.len = 0;
        c->out_consumed += upto;
        c->nmarks = 0;
        conn_shared_list_t ts = c->wshared;
        c->wshared = c->shared;
        c->shared = ts;
    } else {
        ordo_buf_append(&c->wbuf, c->out.data, upto);
        for (uint32_t i = 0; i < nblobs; i++) {
            const conn_shared_t *sh = &c->shared.v[i];
            conn_shared_push(&c->wshared, sh->at, sh->blob); /* the reference moves */
            c->wshared.v[c->wshared.n - 1].off = sh->off;
            c->wshared.bytes -= sh->off;
            c->shared.bytes -= sh->blob->len - sh->off;
        }
        memmove(c->shared.v, c->shared.v + nblobs, (c->shared.n - nblobs) * sizeof *c->shared.v);
        c->shared.n -= nblobs;
        consume_out(c, upto);
    }
    nb = compose(&c->wbuf, &c->wshared, c->wbuf.len, bufs, &bytes, &upto, &nblobs);
    assert(upto == c->wbuf.len && nblobs == c->wshared.n && bytes == c->wbuf.len + c->wshared.bytes);
    c->writing = true;
    c->wreq.data = c;
    c->srv->stats.net_out_bytes += bytes;
    if (uv_write(&c->wreq, &c->h.stream, bufs, (unsigned)nb, on_write) != 0) {
        c->writing = false;
        conn_close(c);
        return;
    }
    conn_check_output(c);
}

static void start_reading(conn_t *c)
{
    if (c->srv->net.reading_paused)
        return; /* back-pressure: resume_reading_all() starts it */
    if (uv_read_start(&c->h.stream, on_alloc, on_read) == 0)
        c->reading = true;
}

/* The reply to a protocol error: the parser's text and, when a limit
 * was passed, the limit by name; for an oversized argument, the rest of
 * it is read and dropped first (CONN_DISCARD_MAX_BYTES). off: where the
 * command began in c->in. */
static void protocol_error(conn_t *c, const char *err, size_t off, const resp_limits_t *lim)
{
    const resp_cmd_t *cmd = &c->cmd;
    c->srv->stats.errors_total++;
    const char *unauth = c->authed ? "" : "-unauth (before AUTH)";
    switch (cmd->over) {
    case RESP_OVER_ARGS:
        resp_add_errorf(&c->out, "ERR Protocol error: %s: %llu arguments, above max-args%s (%zu)", err,
                        (unsigned long long)cmd->over_limit, unauth, lim->args_max);
        break;
    case RESP_OVER_INLINE:
        resp_add_errorf(&c->out, "ERR Protocol error: %s: a line longer than max-inline-bytes (%zu)", err,
                        lim->inline_max);
        break;
    case RESP_OVER_BULK: {
        resp_add_errorf(&c->out, "ERR Protocol error: %s: an argument of %llu bytes, above max-bulk-bytes%s (%zu)",
                        err, (unsigned long long)cmd->over_limit, unauth, lim->bulk_max);
        uint64_t end = (uint64_t)off + cmd->over_body + cmd->over_limit + 2; /* the argument's end in c->in */
        if (cmd->over_body != 0 && end > c->in.len && end - c->in.len <= CONN_DISCARD_MAX_BYTES) {
            c->discard_bytes = end - c->in.len;
            c->in.len = 0; /* the command is dropped; process_input() drops the rest as it comes */
            return;
        }
        break;
    }
    default:
        resp_add_errorf(&c->out, "ERR Protocol error: %s", err);
        break;
    }
    c->close_after_write = true;
}

/* Drop input of a refused argument; once all of it came, close after the
 * error is sent. */
static void discard_input(conn_t *c)
{
    size_t n = c->in.len < c->discard_bytes ? c->in.len : (size_t)c->discard_bytes;
    c->discard_bytes -= n;
    ordo_buf_consume(&c->in, n);
    if (c->discard_bytes == 0)
        c->close_after_write = true;
}

/* Parse and dispatch every complete command in the input buffer, while
 * the connection's unsent output stays below CONN_PAUSE_READ_BYTES: a
 * pipeline of commands with large replies (GETs of a big value) waits in
 * the input buffer until the client reads what it already has (drained()
 * resumes it), so one client's output is bounded by that plus one reply,
 * not by how much it pipelined. */
static void process_input(conn_t *c)
{
    size_t off = 0;
    resp_limits_t lim;
    if (c->http != NULL) {
        http_process_input(c);
        return;
    }
    if (c->discard_bytes > 0) {
        discard_input(c);
        return;
    }
    while (!c->closing && !c->close_after_write && c->waiter == NULL && off < c->in.len &&
           conn_pending(c) < CONN_PAUSE_READ_BYTES) {
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
            protocol_error(c, err, off, &lim);
            if (c->discard_bytes > 0)
                return; /* the input is dropped */
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
    conn_t *c = st->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0 || c->closing)
        return;
    c->srv->stats.net_in_bytes += (uint64_t)nread;
    server_tick(c->srv);
    if (c->tls == NULL) {
        c->in.len += (size_t)nread;
    } else if (net_tls_input(c, buf->base, (size_t)nread) != 0) {
        conn_close(c);
        return;
    }
    process_input(c);
    if (c->closing)
        return;
    /* The log is behind the disk by more than wal-pending-max-bytes: read
     * no client until it catches up. */
    if (!c->srv->net.reading_paused && persist_backlogged(c->srv))
        pause_reading_all(c->srv);
    /* A blocked connection keeps being read (so a disconnect is seen), but
     * its pipelined commands wait; past a bound, stop reading it too. */
    if (c->reading && input_held(c)) {
        uv_read_stop(&c->h.stream);
        c->reading = false;
    }
    /* The replies go out with the turn's flush (net_flush()), after every
     * read of the turn: the turn's writes come together, and a client
     * woken by one does not preempt the reads of the others (on two cores
     * that halved the server's context switches at 50 clients). They are
     * marked now, with the log position the commands they answer
     * depend on: a mark taken at the end of the turn would also cover the
     * records of commands read after them. HTTP output is made into
     * responses when flushed (http_before_flush()), and a connection
     * being written has its output marked by conn_flush() now. */
    if (c->http != NULL || c->writing) {
        conn_flush(c);
        return;
    }
    if (server_readonly(c->srv) == NULL)
        take_mark(c, persist_committed(c->srv));
    conn_mark_dirty(c);
}

static void pause_reading_all(server_t *s)
{
    s->net.reading_paused = true;
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        if (c->reading && !c->closing) {
            uv_read_stop(&c->h.stream);
            c->reading = false;
        }
}

/* Back-pressure ends when persist says so (persist_paused(), cleared by
 * the log's wake-up): the per-turn flush looks. */
static __attribute__((noinline)) void resume_reading_all(server_t *s)
{
    if (persist_paused(s))
        return;
    s->net.reading_paused = false;
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        resume_reading(c);
}

/* Each part runs only when it has something to do: the writer calls this
 * once or twice per loop turn. Held output waits while the log commits
 * nothing more: every held connection was held against a committed
 * position no later than the one it had when held_seen was taken. */
void net_flush(server_t *s)
{
    if (!ordo_list_empty(&s->net.dirty))
        conn_flush_dirty(s);
    if (!ordo_list_empty(&s->net.held) && (s->net.held_seen != persist_commits(s) || server_readonly(s) != NULL))
        release_held(s);
    if (s->net.reading_paused)
        resume_reading_all(s);
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

/* Descriptors kept for what is not a client: the log's segments and
 * directory, a snapshot being written, the listeners, the loop's own
 * (epoll, its wake-up pipes), the cluster's peers. */
#define NET_RESERVED_FDS 64
/* At most one line per this many ms says connections are being refused
 * (with the count since the last line): a flood must not flood the log. */
#define NET_REFUSED_LOG_MS 1000

/* Log a refusal at accept, at most once per NET_REFUSED_LOG_MS. */
static void log_refused(server_t *s, const char *why)
{
    uint64_t now = server_tick(s);
    s->net.refused_unlogged++;
    if (s->net.refused_log_ms != 0 && now - s->net.refused_log_ms < NET_REFUSED_LOG_MS)
        return;
    fprintf(stderr, "ordod: refused %llu connection(s): %s\n", (unsigned long long)s->net.refused_unlogged, why);
    s->net.refused_unlogged = 0;
    s->net.refused_log_ms = now;
}

/* Raise the soft descriptor limit toward the hard one, as far as
 * max-clients needs, and note how many clients the result leaves room
 * for: past it a client is refused with an error it can read, not closed
 * by libuv unanswered for want of a descriptor (libuv accepts and closes
 * when accept() fails with EMFILE, and tells nobody). */
static void fd_budget(server_t *s)
{
    struct rlimit rl;
    size_t want = (size_t)s->cfg.max_clients + NET_RESERVED_FDS;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        s->net.fd_clients_max = (size_t)s->cfg.max_clients;
        return;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    size_t room = rl.rlim_cur == RLIM_INFINITY ? want : (size_t)rl.rlim_cur;
    s->net.fd_clients_max = room > NET_RESERVED_FDS ? room - NET_RESERVED_FDS : 1;
    if (s->net.fd_clients_max < (size_t)s->cfg.max_clients)
        fprintf(stderr,
                "ordod: the descriptor limit (%zu) leaves room for %zu clients, below max-clients (%lld); "
                "raise it (ulimit -n) to serve more\n",
                room, s->net.fd_clients_max, (long long)s->cfg.max_clients);
}

static void on_connection(uv_stream_t *listener, int status)
{
    server_t *s = listener->data;
    if (status < 0) {
        log_refused(s, uv_strerror(status)); /* accept failed: nothing to answer on */
        return;
    }
    bool is_unix = listener == (uv_stream_t *)&s->net.unix_listener;
    bool is_http = http_is_listener(s, listener);
    bool is_tls = net_tls_is_listener(s, listener) || (is_http && s->cfg.tls_http);
    conn_t *c = ordo_xcalloc(1, sizeof *c);
    c->srv = s;
    c->id = ++s->net.next_client_id;
    c->proto = 2;
    c->authed = cmd_acl_default_nopass(s);
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
    else {
        uv_tcp_nodelay(&c->h.tcp, 1);
        /* The kernel's share of a slow reader's output is bounded too:
         * autotuned, a socket whose peer does not read took 4 MiB, which
         * no output limit counted and each large fan-out copied. */
        int sndbuf = CONN_SNDBUF_BYTES;
        uv_send_buffer_size(&c->h.handle, &sndbuf);
    }
    bool loopback = peer_is_loopback(c, is_unix);
    /* A TLS connection's refusals below reach it once its handshake is
     * done, encrypted. */
    if (is_tls && net_tls_conn_start(c) != 0) {
        conn_close(c);
        return;
    }
    if (is_http && http_conn_init(c) != 0)
        return; /* refused (http-max-clients): 503 written, closing */
    if (s->net.conns.len > (size_t)s->cfg.max_clients) {
        log_refused(s, "max-clients reached");
        refuse(c, "ERR max number of clients reached (max-clients)");
        return;
    }
    if (s->net.conns.len > s->net.fd_clients_max) {
        log_refused(s, "the descriptor limit is reached (ulimit -n)");
        refuse(c, "ERR max number of clients reached (the server's descriptor limit)");
        return;
    }
    if (s->cfg.protected_mode && cmd_acl_default_nopass(s) && !loopback) {
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
    fd_budget(s);
    uv_idle_init(s->loop, &s->net.resume_idle);
    s->net.resume_idle_on = true;
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
    if (net_tls_init(s, err, elen) != 0 || net_tls_listen(s, on_connection, err, elen) != 0)
        return -1;
    if (http_listen(s, on_connection, err, elen) != 0)
        return -1;
    if (!s->net.tcp_on && !s->net.unix_on && !s->net.tls.listener_on) {
        snprintf(err, elen, "nothing to listen on: port and tls-port are 0 and no unixsocket is set");
        return -1;
    }
    return 0;
}

void net_close_all(server_t *s)
{
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        conn_close(c);
    if (s->net.resume_idle_on) {
        uv_close((uv_handle_t *)&s->net.resume_idle, NULL);
        s->net.resume_idle_on = false;
    }
    if (s->net.tcp_on)
        uv_close((uv_handle_t *)&s->net.tcp, NULL);
    http_close(s);
    net_tls_close(s);
    if (s->net.unix_on) {
        uv_close((uv_handle_t *)&s->net.unix_listener, NULL);
        if (s->net.unix_bound)
            unlink(s->cfg.unixsocket);
    }
}
