/*
 * conn.c -- the connection record's bookkeeping that the command layer
 * uses too (with conn.h's inline conn_pending()): the shared blobs spliced
 * into it, the dirty list of connections to flush at the end of the turn,
 * and the memory connections hold. No I/O and no libuv: sending is net.c's.
 * It sits below cmd/ (scripts/check-layers.sh), so a watch stream can
 * queue an event into a connection without calling up into net.c.
 */
#include <assert.h>
#include <string.h>

#include "conn.h"
#include "net.h"
#include "server.h"

void conn_shared_push(conn_shared_list_t *l, size_t at, ordo_blob_t *b)
{
    assert(l->n == 0 || l->v[l->n - 1].at <= at);
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4;
        l->v = ordo_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = (conn_shared_t){.at = at, .off = 0, .blob = b};
    l->bytes += b->len;
}

/* What c's references to blobs cost, each blob's bytes split between
 * the connections that share it. */
static size_t shared_memory(const conn_shared_list_t *l)
{
    size_t n = l->cap * sizeof *l->v;
    for (uint32_t i = 0; i < l->n; i++)
        n += l->v[i].blob->len / l->v[i].blob->refs;
    return n;
}

void conn_add_shared(conn_t *c, ordo_blob_t *b)
{
    assert(b->len > 0 && !c->closing);
    if (c->http != NULL && !c->sse) {
        /* HTTP rewrites the RESP it finds in out into its own framing
         * (http_before_flush), so its connections take a copy; an event
         * stream's events are final bytes, shared as for RESP. */
        ordo_buf_append(&c->out, b->data, b->len);
        return;
    }
    conn_shared_push(&c->shared, c->out.len, ordo_blob_ref(b));
}

size_t net_client_memory(const server_t *s)
{
    size_t n = 0;
    for (const conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c))
        n += sizeof *c + c->in.cap + c->out.cap + c->wbuf.cap + shared_memory(&c->shared) +
             shared_memory(&c->wshared);
    return n;
}

void conn_mark_dirty(conn_t *c)
{
    if (ordo_list_linked(&c->dirty_ln, NULL) || c->closing)
        return;
    ordo_list_push_front(&c->srv->net.dirty, &c->dirty_ln);
}
