/*
 * raft_transport.c -- the raft transport ordod gives C raft: its own TCP
 * transport (raft_uv_tcp) wrapped to fix one trap and add one test seam.
 *
 * Owns: the wrapped transport, the list of streams it handed to raft (to
 * cut them), the set of blocked member ids. Loop thread only.
 *
 * TCP_NODELAY: raft_uv_tcp (0.22.1 included) leaves Nagle's algorithm on,
 * so a small AppendEntries after a small one waits for the peer's delayed
 * ACK: 40 ms stalls on loopback. Every stream, accepted or connected, gets
 * TCP_NODELAY before raft sees it.
 *
 * DEBUG PARTITION (only with --debug-cluster-faults): connecting to a
 * blocked member fails (raft retries later), a connection accepted from
 * one is closed, and the connections already open to or from one are shut
 * down (raft sees an error and reconnects, which then fails). Streams are
 * remembered by descriptor and both addresses, so a descriptor reused for
 * another connection is never cut by mistake.
 */
#include "raft_transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/buf.h"

#define MAX_BLOCKED 16

typedef struct known_stream_s {
    raft_id id;
    int fd;
    struct sockaddr_storage local, peer;
} known_stream_t;

typedef struct wrap_s {
    struct raft_uv_transport inner;
    struct raft_uv_transport *outer;
    raft_uv_accept_cb accept_cb;
    raft_id blocked[MAX_BLOCKED];
    int nblocked;
    known_stream_t *streams;
    size_t nstreams, cap;
    raft_uv_transport_close_cb close_cb;
} wrap_t;

typedef struct wconnect_s {
    struct raft_uv_connect inner;
    struct raft_uv_connect *outer;
    wrap_t *w;
    raft_id id;
} wconnect_t;

static bool is_blocked(const wrap_t *w, raft_id id)
{
    for (int i = 0; i < w->nblocked; i++)
        if (w->blocked[i] == id)
            return true;
    return false;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* Is the remembered stream still the connection it was (its descriptor
 * may have been closed by raft and reused)? */
static bool still_open(const known_stream_t *k)
{
    struct sockaddr_storage local, peer;
    socklen_t l1 = sizeof local, l2 = sizeof peer;
    memset(&local, 0, sizeof local);
    memset(&peer, 0, sizeof peer);
    return getsockname(k->fd, (struct sockaddr *)&local, &l1) == 0 &&
           getpeername(k->fd, (struct sockaddr *)&peer, &l2) == 0 && same_addr(&local, &k->local) &&
           same_addr(&peer, &k->peer);
}

/* Forget the streams that are gone (so reconnects do not grow the list),
 * and cut those to or from a blocked member. */
static void sweep(wrap_t *w)
{
    size_t keep = 0;
    for (size_t i = 0; i < w->nstreams; i++) {
        known_stream_t *k = &w->streams[i];
        if (!still_open(k))
            continue;
        if (is_blocked(w, k->id)) {
            shutdown(k->fd, SHUT_RDWR);
            continue;
        }
        w->streams[keep++] = *k;
    }
    w->nstreams = keep;
}

/* Remember a stream handed to raft, and make its writes leave at once. */
static void adopt(wrap_t *w, raft_id id, struct uv_stream_s *stream)
{
    uv_tcp_nodelay((uv_tcp_t *)stream, 1);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)stream, &fd) != 0)
        return;
    known_stream_t k = {.id = id, .fd = fd};
    socklen_t l1 = sizeof k.local, l2 = sizeof k.peer;
    if (getsockname(fd, (struct sockaddr *)&k.local, &l1) != 0 || getpeername(fd, (struct sockaddr *)&k.peer, &l2) != 0)
        return;
    if (w->nstreams == w->cap)
        sweep(w);
    if (w->nstreams == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 8;
        w->streams = ordo_xrealloc(w->streams, w->cap * sizeof *w->streams);
    }
    w->streams[w->nstreams++] = k;
}

static void close_free(uv_handle_t *h) { raft_free(h); }

static void on_accept(struct raft_uv_transport *inner, raft_id id, const char *address, struct uv_stream_s *stream)
{
    wrap_t *w = inner->data;
    if (is_blocked(w, id)) {
        uv_close((uv_handle_t *)stream, close_free);
        return;
    }
    adopt(w, id, stream);
    w->accept_cb(w->outer, id, address, stream);
}

static void on_connect(struct raft_uv_connect *req, struct uv_stream_s *stream, int status)
{
    wconnect_t *c = req->data;
    wrap_t *w = c->w;
    struct raft_uv_connect *outer = c->outer;
    raft_id id = c->id;
    free(c);
    if (status == 0 && is_blocked(w, id)) {
        uv_close((uv_handle_t *)stream, close_free);
        stream = NULL;
        status = RAFT_NOCONNECTION;
    } else if (status == 0) {
        adopt(w, id, stream);
    }
    outer->cb(outer, stream, status);
}

static int t_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    wrap_t *w = t->impl;
    return w->inner.init(&w->inner, id, address);
}

static int t_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    wrap_t *w = t->impl;
    w->accept_cb = cb;
    return w->inner.listen(&w->inner, on_accept);
}

static int t_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id, const char *address,
                     raft_uv_connect_cb cb)
{
    wrap_t *w = t->impl;
    if (is_blocked(w, id))
        return RAFT_NOCONNECTION; /* raft retries after its connect delay */
    req->cb = cb;
    wconnect_t *c = ordo_xcalloc(1, sizeof *c);
    c->outer = req;
    c->w = w;
    c->id = id;
    c->inner.data = c;
    int rv = w->inner.connect(&w->inner, &c->inner, id, address, on_connect);
    if (rv != 0)
        free(c);
    return rv;
}

static void on_inner_closed(struct raft_uv_transport *inner)
{
    wrap_t *w = inner->data;
    struct raft_uv_transport *outer = w->outer;
    raft_uv_transport_close_cb cb = w->close_cb;
    if (cb != NULL)
        cb(outer);
}

static void t_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    wrap_t *w = t->impl;
    w->close_cb = cb;
    w->inner.close(&w->inner, on_inner_closed);
}

int raft_transport_init(struct raft_uv_transport *t, uv_loop_t *loop)
{
    memset(t, 0, sizeof *t);
    wrap_t *w = ordo_xcalloc(1, sizeof *w);
    w->inner.version = 1;
    int rv = raft_uv_tcp_init(&w->inner, loop);
    if (rv != 0) {
        free(w);
        return rv;
    }
    w->inner.data = w;
    w->outer = t;
    t->version = 1;
    t->impl = w;
    t->init = t_init;
    t->listen = t_listen;
    t->connect = t_connect;
    t->close = t_close;
    return 0;
}

int raft_transport_bind(struct raft_uv_transport *t, const char *address)
{
    wrap_t *w = t->impl;
    return raft_uv_tcp_set_bind_address(&w->inner, address);
}

void raft_transport_free(struct raft_uv_transport *t)
{
    wrap_t *w = t->impl;
    if (w == NULL)
        return;
    raft_uv_tcp_close(&w->inner);
    free(w->streams);
    free(w);
    t->impl = NULL;
}

int raft_transport_partition(struct raft_uv_transport *t, const uint64_t *ids, int n)
{
    wrap_t *w = t->impl;
    if (n < 0 || n > MAX_BLOCKED)
        return -1;
    w->nblocked = n;
    for (int i = 0; i < n; i++)
        w->blocked[i] = ids[i];
    sweep(w); /* cut what is open to or from a blocked member */
    return 0;
}
