/*
 * conn.h -- one client connection: its socket, buffers, protocol version,
 * authentication, name and watches.
 *
 * Buffers: `in` holds bytes read and not yet parsed; commands point into it
 * while they run. Replies accumulate in `out`; when a write is in flight its
 * bytes sit in `wbuf` (libuv needs them stable until the callback) and new
 * replies keep going to `out`. Pending output is out.len + wbuf.len plus
 * the unsent bytes of shared blobs (on a TLS connection the plaintext
 * wbuf's ciphertext carries instead of wbuf.len); it is bounded by output-hard-bytes /
 * output-soft-bytes (the client is closed past them), and commands stop
 * running (and reading pauses) while it is above CONN_PAUSE_READ_BYTES so
 * a pipelining client cannot queue unbounded replies.
 *
 * Shared blobs: a large watch event is one blob referenced by every
 * watcher's output (conn_add_shared()) instead of copied into each (on an
 * HTTP connection only once it is an event stream, `sse`: before that its
 * output is RESP that net/http.c rewrites). A
 * blob is spliced into the stream right before out[at], in out's current
 * coordinates (at moves down as out's front is sent); `shared` lists them
 * in stream order. The same holds for wbuf and `wshared` while a write is
 * in flight. A blob at `at` belongs to the output before out[at]: it is
 * sent once out[0..at) may be, and the durability marks (ends in out)
 * cover it when their end is >= at (an event's head bytes always precede
 * its blob, so a mark taken before the event ends below it).
 *
 * Waits and observers: `waiter` is set and cleared by net's park and
 * resume hooks (net.c), and dropped when the connection closes
 * (cmd_conn_closed()); while set, no further command of the connection
 * runs. `observers` is the list the writer links this connection's
 * ELECT.OBSERVE / Q.WATCH observers on (writer/coord_wait.h); the command
 * layer counts them in `nwatches` and hands the list to the writer when
 * the connection closes (cmd_conn_closed()).
 */
#ifndef ORDO_CONN_H
#define ORDO_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/blob.h"
#include "base/buf.h"
#include "base/list.h"
#include "base/tls.h"
#include "net/resp.h"
#include "writer/persist.h" /* log_pos_t, the marks' positions */

/* The owner and the parts a connection points at, by name only: net/ sees
 * none of their fields' types (check-layers.sh). */
typedef struct server_s server_t;
typedef struct conn_s conn_t;
struct watch_s;
struct waiter_s;
struct txn_s;

/* A blob spliced into a connection's output (see above): its bytes from
 * off on go right before out[at] (or wbuf[at]). */
typedef struct conn_shared_s {
    size_t at;
    size_t off;
    ordo_blob_t *blob;         /* one reference, the connection's */
} conn_shared_t;

typedef struct conn_shared_list_s {
    conn_shared_t *v;          /* in stream order, at non-decreasing */
    uint32_t n, cap;
    size_t bytes;              /* unsent bytes of these blobs */
} conn_shared_list_t;
struct http_conn_s;

/* Pending output above which we stop reading from the client until it
 * drains: large enough for deep pipelines, small against memory. */
#define CONN_PAUSE_READ_BYTES (4u << 20)
/* Input buffer kept between reads; a larger one is freed when emptied. */
#define CONN_IN_KEEP_BYTES (64u << 10)
/* Input kept from a connection whose blocking command waits: its later
 * pipelined commands are buffered up to this, then reading pauses. */
#define CONN_BLOCKED_IN_MAX (1u << 20)
/* Durability marks kept per connection; when full, the newest mark
 * absorbs more output (those replies then wait for its later revision). */
#define CONN_MARKS_MAX 8
/* Socket send buffer of a TCP client (SO_SNDBUF; Linux doubles it): what
 * the kernel holds of a connection's output beyond its pending output.
 * A reader on a network drains it in a round trip's worth of its rate. */
#define CONN_SNDBUF_BYTES (256 << 10)
/* Read buffer offered to libuv per read. */
#define CONN_READ_CHUNK (16u << 10)
/* An argument above max-bulk-bytes is refused with an error naming the
 * limit; a client such as redis-cli writes the whole command before it
 * reads, so closing at once resets the connection under its write and the
 * error is lost. Up to this many bytes of the refused argument are read
 * and dropped before the connection closes, so the client finishes its
 * write and reads the error; past it the connection closes at once.
 * Once the error is sent the write half is shut down, so a client that
 * reads before it writes the rest sees the error and the end at once. A
 * few multiples of the default max-bulk-bytes. */
#define CONN_DISCARD_MAX_BYTES (64ull << 20)
/* Freed buffers at least this large count toward the next malloc_trim, and
 * a trim runs (from cron) once NET_TRIM_AFTER_BYTES of them were freed. */
#define NET_TRIM_COUNT_BYTES (64u << 10)
#define NET_TRIM_AFTER_BYTES (1u << 20)

struct conn_s {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    server_t *srv;
    uint64_t id;
    char addr[64];
    char *name;                /* CLIENT SETNAME, NULL if none */
    int proto;                 /* 2 or 3 */
    bool authed;
    char *user;                /* the user it authenticated as (AUTH, HELLO, HTTP), NULL: default */
    const void *acl_user;      /* that user as last found (cmd/cmd_acl.c), valid while acl_gen holds */
    uint64_t acl_gen;          /* the users table's generation when it was found */
    bool closing;              /* uv_close called or due */
    bool close_after_write;    /* QUIT, protocol error: close once out is sent */
    uint64_t discard_bytes;    /* input still to drop (a refused argument) before closing (net.c) */
    bool shut_down;            /* our side's write half is shut down (the error sent, input dropped) */
    bool reading;
    bool writing;
    ordo_buf_t in;
    size_t need_bytes;         /* don't parse until in.len reaches this */
    ordo_buf_t out;
    ordo_buf_t wbuf;
    conn_shared_list_t shared;  /* blobs spliced into out */
    conn_shared_list_t wshared; /* blobs spliced into wbuf (in flight) */
    uv_write_t wreq;
    resp_cmd_t cmd;
    uint64_t created_ms;
    uint64_t last_cmd_ms;
    uint64_t soft_since_ms;    /* when pending output first passed the soft limit, 0 if below */
    uint64_t commands;
    const void *cmd_hint;      /* the command table entry it named last (cmd_find_hinted()) */
    /* Durability marks: out[0..marks[i].end) may be sent once the log has
     * committed position marks[i].pos (writer/persist.h). Positions and
     * ends increase along the array; bytes after the last mark were
     * appended while everything was committed, or are covered at the next
     * flush. */
    struct { size_t end; log_pos_t pos; } marks[CONN_MARKS_MAX];
    int nmarks;
    /* out[0..checked_len) was judged at the last flush (marked, or free to
     * go); if out[checked_len..nostate_end) holds only replies of commands
     * that read no state (cmd_dispatch, CMD_NOSTATE: PING, INFO, CLUSTER
     * ...) and nostate_end is out's end, that tail needs no mark. In
     * cluster mode a mark costs a raft barrier. */
    size_t checked_len, nostate_end;
    ordo_list_node_t held_ln;  /* in net.held: output waits for a position the log has not committed */
    struct waiter_s *waiter;   /* non-NULL while a blocking command waits */
    ordo_list_node_t resume_ln; /* in net.resumed: run its pending input */
    ordo_list_node_t dirty_ln; /* in net.dirty: has replies or events to flush */
    struct txn_s *txn;         /* MULTI/WATCH state (cmd/cmd_txn.c), NULL if none */
    struct watch_s *watches;   /* this connection's watches (onext list) */
    size_t nwatches;           /* watches + observers */
    ordo_list_t observers;     /* ELECT.OBSERVE and Q.WATCH observers (writer/coord_wait.c links them) */
    ordo_list_node_t link;     /* in net.conns */
    struct http_conn_s *http;  /* non-NULL on an HTTP connection (net/http.c) */
    bool sse;                  /* an HTTP watch: its watch events are written as Server-Sent Events
                                * (cmd/cmd_watch.c), final bytes net/http.c passes through, so
                                * they may be shared blobs (set by net/http.c for a watch request) */
    /* TLS (net/net_tls.h): the session, NULL on a plain connection; on
     * net.tls.handshaking while its handshake is under way. wbuf then
     * holds ciphertext, and tls_wplain is the plaintext it carries (at
     * most), which is what conn_pending() counts: the output limits are
     * on plaintext bytes, whatever the door. */
    ordo_tls_t *tls;
    ordo_list_node_t tls_ln;
    size_t tls_wplain;
    uint64_t out_consumed;     /* bytes taken from the front of out since accept: every path that
                                * removes bytes from out's front adds them here (http.c keeps
                                * its offsets into out in these terms) */
};

/* Iterate the live connections: for (c = conn_first(&s->net.conns); c; c = conn_next(c)). */
static inline conn_t *conn_first(const ordo_list_t *conns)
{
    return conns->head ? ORDO_LIST_ENTRY(conns->head, conn_t, link) : NULL;
}
static inline conn_t *conn_next(const conn_t *c)
{
    return c->link.next ? ORDO_LIST_ENTRY(c->link.next, conn_t, link) : NULL;
}

/* conn_mark_dirty() -- flush c at the end of this loop turn (its own
 * replies, marked at the read, or events written into it by another
 * connection's command). */
void conn_mark_dirty(conn_t *c);
/* conn_flush_dirty() -- flush every connection marked dirty. */
void conn_flush_dirty(server_t *s);

/* conn_resume() -- the connection's blocking command completed: run the
 * commands waiting in its input buffer at the end of this loop turn. */
void conn_resume(conn_t *c);
/* conn_run_resumed() -- run every resumed connection's pending input. */
void conn_run_resumed(server_t *s);


/* conn_flush() -- start sending out if nothing is in flight. */
void conn_flush(conn_t *c);
/* conn_shared_push() -- (net's) splice blob b, whose reference the list
 * takes, into l at position at (not before its last blob's). */
void conn_shared_push(conn_shared_list_t *l, size_t at, ordo_blob_t *b);
/* conn_add_shared() -- append blob b to c's output (taking a reference):
 * what conn_flush() sends next after the bytes already in out. */
void conn_add_shared(conn_t *c, ordo_blob_t *b);
/* conn_close() -- close now (pending output is dropped). */
void conn_close(conn_t *c);
/* conn_pending() -- bytes of unsent output (plaintext: see tls_wplain). */
static inline size_t conn_pending(const conn_t *c)
{
    return c->out.len + (c->tls == NULL ? c->wbuf.len : c->tls_wplain) + c->shared.bytes + c->wshared.bytes;
}
/* conn_check_output() -- apply the output limits; returns false if the
 * connection was closed for passing them. */
bool conn_check_output(conn_t *c);

/* net_flush() -- the writer's per-turn flush hook (s->hooks.flush): flush
 * every connection marked dirty, send held output the log has committed
 * since (closing what waits for positions a failed log will never
 * commit), and read clients again once back-pressure ended. */
void net_flush(server_t *s);

#endif /* ORDO_CONN_H */
