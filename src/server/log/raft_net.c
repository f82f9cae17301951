/*
 * raft_net.c -- the members' transport of raft_net.h, on the loop.
 *
 * Owns: the listener; every connection (conn_t: a TCP stream, its read
 * buffer, its one write in flight); one peer_t per member it has talked
 * to, holding the output queued to that member, the redial timer, and
 * the snapshot stream being sent to it; the snapshot streams being
 * received (one per connection, then, once the last chunk is in, one per
 * file being synced).
 *
 * Connections. Each side of a connection first sends a hello, and the
 * first frame read from a connection must be a hello (the header check
 * limits it to a hello's size, so junk is refused after 5 bytes, not
 * after a gigabyte). The dialer checks the hello it gets names the member
 * it dialed. Frames read from a connection are the member's its hello
 * named. TCP_NODELAY on every stream, accepted or connected: with Nagle's
 * algorithm on, a small append after a small one waits for the peer's
 * delayed ACK (40 ms stalls on loopback; C raft's own transport had that
 * trap).
 *
 * Output. A member's raft messages and pings are encoded into its peer's
 * queue (the frames are whole: encoding happens before raft_net_send()
 * returns). Every connection has at most one uv_write in flight: when it
 * completes, the connection's own frames (hello, pongs) go first, then the
 * whole peer queue is swapped into the write buffer and written as one.
 * queued(peer) = queue + the write in flight; raft_net_send() drops a
 * message when that is RAFT_NET_OUT_MAX or more. While no connection is up
 * the queue waits: the member is dialled, and after a failed dial
 * redialled after a backoff (REDIAL_MIN_MS doubling to REDIAL_MAX_MS,
 * reset once the member's hello comes back) while anything waits. An
 * established connection that is lost drops the queue and any snapshot
 * stream to the member: bytes of them were in a write that may have been
 * cut, so what follows would not be whole messages or a whole snapshot to
 * the receiver; raft retransmits.
 *
 * Snapshots. Sending: the install snapshot frame (the engine's message
 * without data), then chunks, each read with pread() on the loop only when
 * queued(peer) < RAFT_NET_CHUNK, so one chunk at most waits in memory per
 * stream. pread and not uv_fs_read: the file is the member's own snapshot,
 * just written and usually in the page cache, so a 1 MiB read costs tens
 * of microseconds; uv_fs_read would add a thread-pool round trip per chunk
 * and a request that must outlive a lost connection. Receiving: the
 * install snapshot frame opens "<recv_dir>/snapshot-<from>-<term>-<index>-
 * <n>.tmp"; chunks must follow at consecutive offsets with the same
 * index, term and total (total <= snapshot_max_bytes), and are write()n as
 * they come (into the page cache). After the last one, the file is
 * fsync'd on the thread pool (uv_fs_fsync: a large file's sync can take
 * seconds, which the loop must not spend), then renamed without ".tmp",
 * the directory synced, and the engine given the install snapshot whose
 * data is the final path. A chunk that fits no stream is ignored (the
 * rest of a stream whose start was lost); a stream that breaks its order
 * is abandoned and its file removed.
 *
 * Closing: raft_net_close() closes every handle and cancels or waits for
 * every request (name resolution, fsync); `pending` counts them, and the
 * last completion frees the net and calls back.
 *
 * Threads: loop thread only.
 */
#include "raft_net.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "raft_wire.h"

/* Members a net keeps state for: a cluster has at most 16, and ids of
 * removed members linger until restart. A hello from one more is refused. */
#define PEERS_MAX 64
/* Connections at once (accepted and dialled): a member has about two per
 * other member; more means something that is not a member is connecting. */
#define CONNS_MAX 256
/* The partition seam's blocked ids. */
#define BLOCKED_MAX 16
/* Redial backoff: the leader's heartbeat is about 30 ms, so a member that
 * comes back is reached within a heartbeat or two; 1 s bounds the dialling
 * of one that stays away. */
#define REDIAL_MIN_MS 25u
#define REDIAL_MAX_MS 1000u
/* Read buffers grow in steps of this much. */
#define READ_STEP (64u << 10)
/* An empty buffer keeps its allocation up to this size (one chunk and its
 * frame), so a large frame does not pin its memory. */
#define BUF_KEEP_BYTES (RAFT_NET_CHUNK + 4096u)
#define LISTEN_BACKLOG 128

_Static_assert(RAFT_NET_CHUNK <= RAFT_WIRE_CHUNK_MAX, "a chunk fits a frame");

typedef struct conn_s conn_t;
typedef struct peer_s peer_t;

/* A snapshot stream being received (from one connection), then synced. */
typedef struct recv_snap_s {
    raft_net_t *n;
    uint64_t from;
    char from_address[RAFT_WIRE_ADDRESS_MAX + 1];
    struct raft_message m;      /* the install snapshot, conf owned; data set on delivery */
    int fd;
    uint64_t received, total;   /* total: UINT64_MAX until the first chunk */
    char *tmp, *final;
    uv_fs_t fsync_req;
    struct recv_snap_s *next;   /* in n->syncing */
} recv_snap_t;

/* The snapshot stream being sent to one member. */
typedef struct send_snap_s {
    int fd;                     /* -1: none */
    uint64_t index, term, offset, total;
} send_snap_t;

struct peer_s {
    raft_net_t *n;
    uint64_t id;
    char address[RAFT_WIRE_ADDRESS_MAX + 1];  /* where to dial ("" until known) */
    conn_t *out;                /* the outbound connection (dialling or up) */
    ordo_buf_t queue;           /* whole frames waiting for out's next write */
    uv_timer_t redial;
    bool redial_armed, resolving;
    uint32_t backoff_ms;
    uv_getaddrinfo_t resolve;
    uint64_t last_recv_ms;
    send_snap_t snap;
};

struct conn_s {
    uv_tcp_t tcp;
    raft_net_t *n;
    conn_t *prev, *next;        /* in n->conns */
    peer_t *peer;               /* outbound: the member dialled; inbound: its hello's */
    bool outbound, connected, hello_in, writing, closing, logged;
    char address[RAFT_WIRE_ADDRESS_MAX + 1];  /* the sender's, from its hello */
    uv_connect_t connect;
    uv_write_t write;
    ordo_buf_t own;             /* this connection's frames: hello, pongs */
    ordo_buf_t inflight;        /* the buffer of the write in flight */
    ordo_buf_t in;              /* bytes read (plaintext), not yet a whole frame */
    recv_snap_t *rsnap;
    ordo_tls_t *tls;            /* the session, with mutual TLS on */
    char tls_name[64];          /* the peer certificate's common name, once verified */
    uint64_t made_ms;           /* uv_now when it was made: the hello's deadline counts from it */
};

struct raft_net_s {
    uv_loop_t *loop;
    uint64_t id;
    char *address, *recv_dir;
    uint64_t snapshot_max_bytes;
    raft_net_hooks_t hooks;
    uv_tcp_t listener;
    peer_t *peers[PEERS_MAX];
    int npeers;
    conn_t *conns;
    int nconns;
    recv_snap_t *syncing;       /* received streams whose fsync runs */
    uint64_t stream_seq;        /* names temporary files */
    uint64_t blocked[BLOCKED_MAX];
    int nblocked;
    raft_net_stats_t stats;
    char *scratch;              /* RAFT_NET_CHUNK bytes: a chunk read from a file */
    ordo_tls_ctx_t *tls_server, *tls_client; /* mutual TLS: both or neither */
    char *tls_rbuf;             /* READ_STEP bytes: one read's ciphertext, with TLS on */
    bool closing;
    uv_timer_t sweep;           /* closes connections past RAFT_NET_HELLO_TIMEOUT_MS without a hello */
    int pending;                /* handles being closed, requests running */
    void (*close_cb)(void *arg);
    void *close_arg;
};

static void conn_close(conn_t *c);
static void conn_flush(conn_t *c);
static void peer_dial(peer_t *p);
static void snap_pump(peer_t *p);

/* ---- small things ----------------------------------------------------- */

static bool is_blocked(const raft_net_t *n, uint64_t id)
{
    for (int i = 0; i < n->nblocked; i++)
        if (n->blocked[i] == id)
            return true;
    return false;
}

static void buf_done(ordo_buf_t *b)
{
    b->len = 0;
    if (b->cap > BUF_KEEP_BYTES)
        ordo_buf_free(b);
}

static char *xstrdup(const char *s)
{
    size_t len = strlen(s) + 1;
    return memcpy(ordo_xmalloc(len), s, len);
}

/* Split "host:port" (the last ':'; "[v6]:port" loses its brackets). */
static int split_address(const char *address, char *host, size_t hlen, char *port, size_t plen)
{
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon == address || colon[1] == '\0' || strlen(colon + 1) >= plen)
        return -1;
    const char *h = address;
    size_t len = (size_t)(colon - address);
    if (len >= 2 && h[0] == '[' && h[len - 1] == ']')
        h++, len -= 2;
    if (len == 0 || len >= hlen)
        return -1;
    memcpy(host, h, len);
    host[len] = '\0';
    strcpy(port, colon + 1);
    return 0;
}

static void pending_done(raft_net_t *n);

/* ---- peers ------------------------------------------------------------ */

static peer_t *peer_find(const raft_net_t *n, uint64_t id)
{
    for (int i = 0; i < n->npeers; i++)
        if (n->peers[i]->id == id)
            return n->peers[i];
    return NULL;
}

static void on_redial(uv_timer_t *t)
{
    peer_t *p = t->data;
    p->redial_armed = false;
    if (p->queue.len > 0 || p->snap.fd >= 0)
        peer_dial(p);
}

/* The peer of member id, made if new (NULL: the table is full); a known
 * address replaces the one held. */
static peer_t *peer_get(raft_net_t *n, uint64_t id, const char *address)
{
    assert(id > 0);
    peer_t *p = peer_find(n, id);
    if (p == NULL) {
        if (n->npeers == PEERS_MAX)
            return NULL;
        p = ordo_xcalloc(1, sizeof *p);
        p->n = n;
        p->id = id;
        p->snap.fd = -1;
        uv_timer_init(n->loop, &p->redial);
        p->redial.data = p;
        n->peers[n->npeers++] = p;
    }
    if (address != NULL && address[0] != '\0' && strlen(address) <= RAFT_WIRE_ADDRESS_MAX &&
        strcmp(p->address, address) != 0)
        strcpy(p->address, address);
    return p;
}

/* Bytes waiting to go to the member: the queue and the write in flight. */
static size_t peer_queued(const peer_t *p)
{
    size_t n = p->queue.len;
    if (p->out != NULL && p->out->writing)
        n += p->out->inflight.len;
    return n;
}

static void snap_send_stop(peer_t *p)
{
    if (p->snap.fd >= 0)
        close(p->snap.fd);
    p->snap.fd = -1;
}

static void peer_arm_redial(peer_t *p)
{
    if (p->redial_armed || p->n->closing)
        return;
    p->backoff_ms = p->backoff_ms == 0 ? REDIAL_MIN_MS
                    : p->backoff_ms >= REDIAL_MAX_MS / 2 ? REDIAL_MAX_MS
                                                        : p->backoff_ms * 2;
    p->redial_armed = true;
    uv_timer_start(&p->redial, on_redial, p->backoff_ms, 0);
}

/* Something waits for the member: write it, or get a connection. */
static void peer_kick(peer_t *p)
{
    if (p->out != NULL)
        conn_flush(p->out);
    else
        peer_dial(p);
}

/* ---- connections: setup and teardown --------------------------------- */

static conn_t *conn_new(raft_net_t *n, bool outbound)
{
    conn_t *c = ordo_xcalloc(1, sizeof *c);
    c->n = n;
    c->outbound = outbound;
    c->tcp.data = c;
    c->connect.data = c;
    c->write.data = c;
    c->made_ms = uv_now(n->loop);
    if (uv_tcp_init(n->loop, &c->tcp) != 0) {
        free(c);
        return NULL;
    }
    c->next = n->conns;
    if (n->conns != NULL)
        n->conns->prev = c;
    n->conns = c;
    n->nconns++;
    return c;
}

static void rsnap_free(recv_snap_t *s)
{
    raft_wire_message_free(&s->m);
    free(s->tmp);
    free(s->final);
    free(s);
}

/* Give up a stream being received: its file goes. */
static void rsnap_abandon(recv_snap_t *s, const char *why)
{
    if (why != NULL)
        fprintf(stderr, "ordod: cluster: snapshot from member %" PRIu64 " abandoned: %s\n", s->from, why);
    if (s->fd >= 0)
        close(s->fd);
    unlink(s->tmp);
    rsnap_free(s);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    raft_net_t *n = c->n;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        n->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    n->nconns--;
    ordo_tls_free(c->tls);
    ordo_buf_free(&c->own);
    ordo_buf_free(&c->inflight);
    ordo_buf_free(&c->in);
    free(c);
    pending_done(n);
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    raft_net_t *n = c->n;
    c->closing = true;
    if (c->rsnap != NULL) {
        rsnap_abandon(c->rsnap, n->closing ? NULL : "connection lost");
        c->rsnap = NULL;
    }
    if (c->outbound && c->peer->out == c) {
        peer_t *p = c->peer;
        p->out = NULL;
        if (!c->connected && !n->closing)
            n->stats.dials_failed++;
        if (c->connected) {
            /* Part of the queue's last write may be lost: see the head. */
            buf_done(&p->queue);
            snap_send_stop(p);
        }
        if (p->queue.len > 0 || p->snap.fd >= 0)
            peer_arm_redial(p);
    }
    n->pending++;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* A malformed frame: counted, logged once, the connection closed. */
static void conn_bad(conn_t *c, const char *why)
{
    c->n->stats.bad_frames++;
    if (!c->logged) {
        c->logged = true;
        if (c->peer != NULL)
            fprintf(stderr, "ordod: cluster: closing a connection %s member %" PRIu64 ": %s\n",
                    c->outbound ? "to" : "from", c->peer->id, why);
        else
            fprintf(stderr, "ordod: cluster: closing a connection before its hello: %s\n", why);
    }
    conn_close(c);
}

/* A connection refused by mutual TLS: counted, logged once, closed. */
static void tls_refuse(conn_t *c, const char *why)
{
    c->n->stats.tls_refused++;
    if (!c->logged) {
        c->logged = true;
        char who[RAFT_WIRE_ADDRESS_MAX + 64] = "an unknown peer";
        struct sockaddr_storage ss;
        int len = sizeof ss;
        if (c->outbound && c->peer != NULL)
            snprintf(who, sizeof who, "member %" PRIu64 " (%s)", c->peer->id, c->peer->address);
        else if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_INET)
            uv_ip4_name((struct sockaddr_in *)&ss, who, sizeof who);
        else if (ss.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&ss, who, sizeof who);
        fprintf(stderr, "ordod: cluster: TLS connection %s %s refused: %s\n", c->outbound ? "to" : "from", who,
                why);
    }
    /* The alert that says why, if the socket takes it now (it is closing). */
    char alert[256];
    size_t n = c->writing ? 0 : ordo_tls_out_take(c->tls, alert, sizeof alert);
    if (n > 0) {
        uv_buf_t b = uv_buf_init(alert, (unsigned)n);
        (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    }
    conn_close(c);
}

/* The peer's certificate after the handshake: its name is kept, and a
 * dialled member's must be the one dialled. Returns false if refused. */
static bool tls_peer_checked(conn_t *c)
{
    if (ordo_tls_peer_name(c->tls, c->tls_name, sizeof c->tls_name) != 0) {
        tls_refuse(c, "no verified certificate");
        return false;
    }
    if (c->outbound) {
        char want[32];
        snprintf(want, sizeof want, RAFT_NET_TLS_NAME, c->peer->id);
        if (strcmp(c->tls_name, want) != 0) {
            char why[160];
            snprintf(why, sizeof why, "its certificate names '%.64s', not '%s'", c->tls_name, want);
            tls_refuse(c, why);
            return false;
        }
    }
    return true;
}

/* ---- writing ---------------------------------------------------------- */

static void on_write(uv_write_t *req, int status)
{
    conn_t *c = req->data;
    c->writing = false;
    if (status < 0) {
        conn_close(c);
        return;
    }
    c->n->stats.bytes_out += c->inflight.len;
    buf_done(&c->inflight);
    if (c->closing)
        return;
    conn_flush(c);
    if (c->outbound && c->peer->out == c)
        snap_pump(c->peer);
}

/* conn_flush() of a TLS connection: advance the handshake, encrypt from
 * (once the handshake is done) and write the session's ciphertext. */
static void tls_flush(conn_t *c, ordo_buf_t *from)
{
    if (!ordo_tls_done(c->tls) && ordo_tls_handshake(c->tls) == ORDO_TLS_ERR) {
        tls_refuse(c, ordo_tls_error(c->tls));
        return;
    }
    if (ordo_tls_done(c->tls) && from->len > 0) {
        if (ordo_tls_write(c->tls, from->data, from->len) != (ssize_t)from->len) {
            tls_refuse(c, ordo_tls_error(c->tls));
            return;
        }
        buf_done(from);
    }
    size_t pending = ordo_tls_out_pending(c->tls);
    if (pending == 0)
        return;
    assert(c->inflight.len == 0);
    char *p = ordo_buf_reserve(&c->inflight, pending);
    c->inflight.len += ordo_tls_out_take(c->tls, p, pending);
    uv_buf_t b = uv_buf_init(c->inflight.data, (unsigned)c->inflight.len);
    if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        conn_close(c);
        return;
    }
    c->writing = true;
}

/* Start the next write: the connection's own frames first, then (dialled
 * connections) the member's queue. */
static void conn_flush(conn_t *c)
{
    if (c->closing || !c->connected || c->writing)
        return;
    ordo_buf_t *from = &c->own;
    if (from->len == 0 && c->outbound && c->hello_in)
        from = &c->peer->queue;
    if (c->tls != NULL) {
        tls_flush(c, from);
        return;
    }
    if (from->len == 0)
        return;
    assert(c->inflight.len == 0 && from->len <= UINT32_MAX); /* queue <= OUT_MAX + a frame */
    ordo_buf_t t = c->inflight;
    c->inflight = *from;
    *from = t;
    uv_buf_t b = uv_buf_init(c->inflight.data, (unsigned)c->inflight.len);
    if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        conn_close(c);
        return;
    }
    c->writing = true;
}

/* ---- snapshots: sending ----------------------------------------------- */

/* Queue the stream's next chunks while the member's output is below a
 * chunk (see the head). */
static void snap_pump(peer_t *p)
{
    raft_net_t *n = p->n;
    send_snap_t *s = &p->snap;
    bool queued = false;
    while (s->fd >= 0 && peer_queued(p) < RAFT_NET_CHUNK) {
        uint64_t left = s->total - s->offset;
        uint32_t len = left < RAFT_NET_CHUNK ? (uint32_t)left : RAFT_NET_CHUNK;
        if (n->scratch == NULL)
            n->scratch = ordo_xmalloc(RAFT_NET_CHUNK);
        size_t got = 0;
        while (got < len) {
            ssize_t r = pread(s->fd, n->scratch + got, len - got, (off_t)(s->offset + got));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                fprintf(stderr, "ordod: cluster: snapshot to member %" PRIu64 " stopped: %s\n", p->id,
                        r < 0 ? strerror(errno) : "the file shrank");
                snap_send_stop(p);
                return;
            }
            got += (size_t)r;
        }
        raft_wire_chunk_t c = {.index = s->index, .term = s->term, .offset = s->offset, .total = s->total,
                               .last = s->offset + len == s->total, .data = n->scratch, .len = len};
        raft_wire_put_chunk(&p->queue, &c);
        s->offset += len;
        n->stats.snapshot_bytes_sent += len;
        queued = true;
        if (c.last) {
            n->stats.snapshots_sent++;
            snap_send_stop(p);
        }
    }
    if (queued)
        peer_kick(p);
}

/* ---- snapshots: receiving --------------------------------------------- */

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static void on_snap_synced(uv_fs_t *req)
{
    recv_snap_t *s = req->data;
    raft_net_t *n = s->n;
    ssize_t result = req->result;
    uv_fs_req_cleanup(req);
    recv_snap_t **pp = &n->syncing;
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    if (n->closing || is_blocked(n, s->from) || result < 0) {
        rsnap_abandon(s, n->closing ? NULL : result < 0 ? uv_strerror((int)result) : "member partitioned away");
        pending_done(n);
        return;
    }
    close(s->fd);
    s->fd = -1;
    if (rename(s->tmp, s->final) != 0) {
        rsnap_abandon(s, strerror(errno));
        pending_done(n);
        return;
    }
    sync_dir(n->recv_dir);
    size_t plen = strlen(s->final) + 1;
    s->m.install_snapshot.data.base = raft_malloc(plen);
    if (s->m.install_snapshot.data.base == NULL) {
        fprintf(stderr, "ordod: out of memory\n");
        abort();
    }
    memcpy(s->m.install_snapshot.data.base, s->final, plen);
    s->m.install_snapshot.data.len = plen;
    s->m.server_id = s->from;
    s->m.server_address = s->from_address;
    n->stats.snapshots_received++;
    n->stats.received++;
    n->hooks.receive(n->hooks.arg, &s->m);
    rsnap_free(s);
    pending_done(n);
}

/* An install snapshot frame: a new stream on this connection. */
static void snap_recv_start(conn_t *c, raft_wire_frame_t *f)
{
    raft_net_t *n = c->n;
    if (c->rsnap != NULL) {
        rsnap_abandon(c->rsnap, "a new stream started");
        c->rsnap = NULL;
    }
    recv_snap_t *s = ordo_xcalloc(1, sizeof *s);
    s->n = n;
    s->from = c->peer->id;
    strcpy(s->from_address, c->address);
    s->m = f->message;
    f->type = 0; /* the message is the stream's now */
    s->total = UINT64_MAX;
    const struct raft_install_snapshot *is = &s->m.install_snapshot;
    ordo_buf_t path = ORDO_BUF_INIT;
    ordo_buf_printf(&path, "%s/snapshot-%" PRIu64 "-%llu-%llu-%" PRIu64, n->recv_dir, s->from,
                    (unsigned long long)is->last_term, (unsigned long long)is->last_index, ++n->stream_seq);
    ordo_buf_append(&path, "", 1);
    s->final = xstrdup(path.data);
    path.len--;
    ordo_buf_puts(&path, ".tmp");
    ordo_buf_append(&path, "", 1);
    s->tmp = xstrdup(path.data);
    ordo_buf_free(&path);
    s->fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->fd < 0) {
        rsnap_abandon(s, strerror(errno));
        return;
    }
    c->rsnap = s;
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w, len -= (size_t)w;
    }
    return 0;
}

static void snap_recv_chunk(conn_t *c, const raft_wire_chunk_t *ch)
{
    raft_net_t *n = c->n;
    recv_snap_t *s = c->rsnap;
    if (s == NULL)
        return; /* the rest of a stream whose start was lost */
    const struct raft_install_snapshot *is = &s->m.install_snapshot;
    const char *why = NULL;
    if (ch->index != is->last_index || ch->term != is->last_term)
        why = "a chunk of another snapshot";
    else if (ch->offset != s->received)
        why = "a chunk out of order";
    else if (s->total != UINT64_MAX && ch->total != s->total)
        why = "the total changed";
    else if (ch->total > n->snapshot_max_bytes)
        why = "larger than snapshot-max-bytes";
    else if (write_all(s->fd, ch->data, ch->len) != 0)
        why = strerror(errno);
    if (why != NULL) {
        rsnap_abandon(s, why);
        c->rsnap = NULL;
        return;
    }
    s->total = ch->total;
    s->received += ch->len;
    n->stats.snapshot_bytes_received += ch->len;
    if (!ch->last)
        return;
    assert(s->received == s->total);
    c->rsnap = NULL;
    s->next = n->syncing;
    n->syncing = s;
    s->fsync_req.data = s;
    if (uv_fs_fsync(n->loop, &s->fsync_req, s->fd, on_snap_synced) != 0) {
        n->syncing = s->next;
        rsnap_abandon(s, "cannot start the file's sync");
        return;
    }
    n->pending++;
}

/* ---- reading ---------------------------------------------------------- */

static void on_hello(conn_t *c, const raft_wire_hello_t *h)
{
    raft_net_t *n = c->n;
    if (c->hello_in) {
        conn_bad(c, "a second hello");
        return;
    }
    if (is_blocked(n, h->id)) {
        n->stats.refused++;
        conn_close(c);
        return;
    }
    if (c->outbound) {
        if (h->id != c->peer->id) {
            conn_bad(c, "the hello names another member than the one dialled");
            return;
        }
        c->peer->backoff_ms = 0; /* the member answers: the next loss redials at once */
    } else {
        if (c->tls != NULL) {
            char want[32];
            snprintf(want, sizeof want, RAFT_NET_TLS_NAME, h->id);
            if (strcmp(c->tls_name, want) != 0) {
                char why[160];
                snprintf(why, sizeof why, "its hello claims member %" PRIu64 " but its certificate names '%.64s'",
                         h->id, c->tls_name);
                tls_refuse(c, why);
                return;
            }
            if (n->hooks.is_member != NULL && !n->hooks.is_member(n->hooks.arg, h->id)) {
                char why[96];
                snprintf(why, sizeof why, "member %" PRIu64 " is not in the cluster's configuration", h->id);
                tls_refuse(c, why);
                return;
            }
        }
        peer_t *p = peer_get(n, h->id, NULL);
        if (p == NULL) {
            n->stats.refused++;
            conn_close(c);
            return;
        }
        if (p->address[0] == '\0')
            strcpy(p->address, h->address);
        c->peer = p;
    }
    strcpy(c->address, h->address);
    c->hello_in = true;
    conn_flush(c); /* a dialled connection's queue waited for the hello */
}

static void on_ping(conn_t *c, uint64_t seq)
{
    raft_net_t *n = c->n;
    if (c->own.len >= RAFT_NET_OUT_MAX) {
        n->stats.dropped++;
        return;
    }
    raft_wire_put_ping(&c->own, RAFT_WIRE_PONG, seq, n->hooks.term(n->hooks.arg));
    conn_flush(c);
}

/* One whole frame: handle it. c may be closing afterwards. */
static void on_frame(conn_t *c, uint8_t type, const char *body, uint32_t len)
{
    raft_net_t *n = c->n;
    raft_wire_frame_t f;
    const char *why;
    if (raft_wire_decode(type, body, len, &f, &why) != 0) {
        conn_bad(c, why);
        return;
    }
    if (type == RAFT_WIRE_HELLO) {
        on_hello(c, &f.hello);
        return;
    }
    assert(c->hello_in && c->peer != NULL);
    peer_t *p = c->peer;
    p->last_recv_ms = uv_now(n->loop);
    switch (type) {
    case RAFT_WIRE_PING: on_ping(c, f.ping.seq); break;
    case RAFT_WIRE_PONG: n->hooks.pong(n->hooks.arg, p->id, f.ping.seq, f.ping.term); break;
    case RAFT_WIRE_CHUNK: snap_recv_chunk(c, &f.chunk); break;
    case RAFT_WIRE_INSTALL_SNAPSHOT: snap_recv_start(c, &f); break;
    default:
        f.message.server_id = p->id;
        f.message.server_address = c->address;
        n->stats.received++;
        n->hooks.receive(n->hooks.arg, &f.message);
        break;
    }
    raft_wire_frame_free(&f);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *out)
{
    (void)hint;
    conn_t *c = h->data;
    if (c->tls != NULL) {
        *out = uv_buf_init(c->n->tls_rbuf, READ_STEP); /* decrypted into c->in at once */
        return;
    }
    char *p = ordo_buf_reserve(&c->in, READ_STEP);
    size_t room = c->in.cap - c->in.len;
    *out = uv_buf_init(p, room > UINT32_MAX ? UINT32_MAX : (unsigned)room);
}

/* Decrypt n bytes read from c into c->in; the handshake's end checks the
 * peer. Returns false if c closed. */
static bool tls_input(conn_t *c, const char *data, size_t n)
{
    bool was_done = ordo_tls_done(c->tls);
    int got = ordo_tls_decrypt(c->tls, data, n, &c->in, READ_STEP);
    if (got != 0) {
        if (got == ORDO_TLS_EOF)
            conn_close(c);
        else
            tls_refuse(c, ordo_tls_error(c->tls));
        return false;
    }
    if (!was_done && ordo_tls_done(c->tls) && !tls_peer_checked(c))
        return false;
    conn_flush(c); /* handshake messages, then what waited for the handshake */
    return !c->closing;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = stream->data;
    raft_net_t *n = c->n;
    if (nread < 0) {
        if (c->tls != NULL && !ordo_tls_done(c->tls))
            tls_refuse(c, "the connection closed during the handshake");
        else
            conn_close(c);
        return;
    }
    n->stats.bytes_in += (uint64_t)nread;
    if (c->tls == NULL)
        c->in.len += (size_t)nread;
    else if (!tls_input(c, buf->base, (size_t)nread))
        return;
    size_t pos = 0;
    while (!c->closing) {
        uint8_t type;
        uint32_t blen;
        const char *why;
        int h = raft_wire_header(c->in.data + pos, c->in.len - pos, &type, &blen, &why);
        if (h == 0)
            break;
        if (h < 0) {
            conn_bad(c, why);
            break;
        }
        if (!c->hello_in && type != RAFT_WIRE_HELLO) {
            conn_bad(c, "the first frame is not a hello");
            break;
        }
        if (c->in.len - pos - RAFT_WIRE_HEADER_BYTES < blen)
            break;
        /* From a member partitioned away since this connection's hello:
         * nothing it sends is taken (the connection is closed already, but
         * bytes read with it in the same turn are dropped here too). */
        if (c->hello_in && is_blocked(n, c->peer->id)) {
            conn_close(c);
            break;
        }
        on_frame(c, type, c->in.data + pos + RAFT_WIRE_HEADER_BYTES, blen);
        pos += RAFT_WIRE_HEADER_BYTES + blen;
    }
    if (c->closing)
        return;
    ordo_buf_consume(&c->in, pos);
    if (c->in.len == 0)
        buf_done(&c->in);
}

static void conn_start(conn_t *c)
{
    raft_net_t *n = c->n;
    c->connected = true;
    uv_tcp_nodelay(&c->tcp, 1);
    if (n->tls_server != NULL) {
        /* No host name check: the dialer checks the member's name in the
         * certificate instead (tls_peer_checked). */
        c->tls = ordo_tls_new(c->outbound ? n->tls_client : n->tls_server, NULL);
        if (c->tls == NULL) {
            conn_close(c);
            return;
        }
    }
    raft_wire_put_hello(&c->own, n->id, n->address);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    conn_flush(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    raft_net_t *n = server->data;
    if (status < 0 || n->closing)
        return;
    conn_t *c = conn_new(n, false);
    if (c == NULL)
        return;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || n->nconns > CONNS_MAX) {
        if (n->nconns > CONNS_MAX)
            n->stats.refused++;
        conn_close(c);
        return;
    }
    conn_start(c);
}

/* ---- dialling ---------------------------------------------------------- */

static void on_connect(uv_connect_t *req, int status)
{
    conn_t *c = req->data;
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c); /* keeps the queue, arms the redial */
        return;
    }
    conn_start(c);
    if (!c->closing)
        snap_pump(c->peer);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *ai)
{
    peer_t *p = req->data;
    raft_net_t *n = p->n;
    p->resolving = false;
    if (n->closing || status < 0 || is_blocked(n, p->id)) {
        if (status < 0 && !n->closing) {
            n->stats.dials_failed++;
            peer_arm_redial(p);
        }
        uv_freeaddrinfo(ai);
        pending_done(n);
        return;
    }
    conn_t *c = n->nconns < CONNS_MAX ? conn_new(n, true) : NULL;
    if (c == NULL) {
        peer_arm_redial(p);
    } else {
        c->peer = p;
        p->out = c;
        if (uv_tcp_connect(&c->connect, &c->tcp, ai->ai_addr, on_connect) != 0)
            conn_close(c);
    }
    uv_freeaddrinfo(ai);
    pending_done(n);
}

/* Get an outbound connection to the member, unless one is there or coming. */
static void peer_dial(peer_t *p)
{
    raft_net_t *n = p->n;
    if (p->out != NULL || p->resolving || p->redial_armed || n->closing || is_blocked(n, p->id))
        return;
    char host[RAFT_WIRE_ADDRESS_MAX + 1], port[8];
    if (split_address(p->address, host, sizeof host, port, sizeof port) != 0) {
        peer_arm_redial(p); /* no address yet: a later send may bring one */
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    p->resolve.data = p;
    if (uv_getaddrinfo(n->loop, &p->resolve, on_resolved, host, port, &hints) != 0) {
        peer_arm_redial(p);
        return;
    }
    p->resolving = true;
    n->pending++;
}

/* ---- the calls ---------------------------------------------------------- */

/* Every second: close the connections whose hello has not come within
 * RAFT_NET_HELLO_TIMEOUT_MS (a dial still connecting is the connect's
 * own business). */
static void on_sweep(uv_timer_t *t)
{
    raft_net_t *n = t->data;
    uint64_t now = uv_now(n->loop);
    for (conn_t *c = n->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->closing || !c->connected || c->hello_in || now - c->made_ms < RAFT_NET_HELLO_TIMEOUT_MS)
            continue;
        if (c->tls != NULL) {
            tls_refuse(c, ordo_tls_done(c->tls) ? "no hello within the deadline" : "no handshake within the deadline");
        } else {
            n->stats.refused++;
            conn_close(c);
        }
    }
}

static void free_unopened(uv_handle_t *h) { free(h->data); }

/* The two contexts of mutual TLS from server and client: 0, or -1 with
 * err (neither made). */
static int tls_contexts(const ordo_tls_config_t *server, const ordo_tls_config_t *client, ordo_tls_ctx_t **sctx,
                        ordo_tls_ctx_t **cctx, char *err, size_t elen)
{
    ordo_tls_config_t sc = *server, cc = *client;
    sc.role = ORDO_TLS_SERVER;
    sc.auth = ORDO_TLS_AUTH_YES;
    cc.role = ORDO_TLS_CLIENT;
    cc.no_verify = false;
    char why[256];
    *sctx = *cctx = NULL;
    if (ordo_tls_ctx_new(&sc, sctx, why, sizeof why) != 0 || ordo_tls_ctx_new(&cc, cctx, why, sizeof why) != 0) {
        snprintf(err, elen, "tls-cluster: %s", why);
        ordo_tls_ctx_free(*sctx);
        *sctx = NULL;
        return -1;
    }
    return 0;
}

int raft_net_tls_reload(raft_net_t *n, const ordo_tls_config_t *server, const ordo_tls_config_t *client, char *err,
                        size_t elen)
{
    if (n->tls_server == NULL) {
        snprintf(err, elen, "tls-cluster is off (it is set at start)");
        return -1;
    }
    ordo_tls_ctx_t *s, *c;
    if (tls_contexts(server, client, &s, &c, err, elen) != 0)
        return -1;
    ordo_tls_ctx_free(n->tls_server);
    ordo_tls_ctx_free(n->tls_client);
    n->tls_server = s;
    n->tls_client = c;
    return 0;
}

int raft_net_open(const raft_net_options_t *opt, const raft_net_hooks_t *hooks, raft_net_t **out, char *err,
                  size_t elen)
{
    assert(opt->id > 0 && opt->address != NULL && opt->recv_dir != NULL);
    assert(hooks->receive != NULL && hooks->term != NULL && hooks->pong != NULL);
    char host[RAFT_WIRE_ADDRESS_MAX + 1], port[8];
    const char *bind = opt->bind != NULL ? opt->bind : opt->address;
    if (strlen(opt->address) > RAFT_WIRE_ADDRESS_MAX ||
        split_address(opt->address, host, sizeof host, port, sizeof port) != 0 ||
        split_address(bind, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, elen, "raft address '%s' (bind '%s') is not HOST:PORT", opt->address, bind);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, elen, "raft bind address '%s': %s", bind, gai_strerror(rc));
        return -1;
    }
    assert((opt->tls_server == NULL) == (opt->tls_client == NULL));
    ordo_tls_ctx_t *tls_server = NULL, *tls_client = NULL;
    if (opt->tls_server != NULL &&
        tls_contexts(opt->tls_server, opt->tls_client, &tls_server, &tls_client, err, elen) != 0) {
        freeaddrinfo(ai);
        return -1;
    }
    raft_net_t *n = ordo_xcalloc(1, sizeof *n);
    n->tls_server = tls_server;
    n->tls_client = tls_client;
    if (tls_server != NULL)
        n->tls_rbuf = ordo_xmalloc(READ_STEP);
    n->loop = opt->loop;
    n->id = opt->id;
    n->hooks = *hooks;
    n->snapshot_max_bytes = opt->snapshot_max_bytes != 0 ? opt->snapshot_max_bytes : UINT64_MAX;
    uv_tcp_init(n->loop, &n->listener);
    n->listener.data = n;
    rc = uv_tcp_bind(&n->listener, ai->ai_addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&n->listener, LISTEN_BACKLOG, on_connection);
    freeaddrinfo(ai);
    if (rc != 0) {
        snprintf(err, elen, "raft bind address '%s': %s", bind, uv_strerror(rc));
        goto close_listener;
    }
    n->address = xstrdup(opt->address);
    n->recv_dir = xstrdup(opt->recv_dir);
    uv_timer_init(n->loop, &n->sweep);
    n->sweep.data = n;
    uv_timer_start(&n->sweep, on_sweep, 1000, 1000);
    *out = n;
    return 0;

close_listener:
    ordo_tls_ctx_free(n->tls_server);
    ordo_tls_ctx_free(n->tls_client);
    free(n->tls_rbuf);
    /* The handle is closed through the loop: n goes when it is. */
    uv_close((uv_handle_t *)&n->listener, free_unopened);
    return -1;
}

int raft_net_send(raft_net_t *n, const struct raft_message *m)
{
    assert(m->type != RAFT_INSTALL_SNAPSHOT && !n->closing);
    peer_t *p = is_blocked(n, m->server_id) ? NULL : peer_get(n, m->server_id, m->server_address);
    if (p == NULL || peer_queued(p) >= RAFT_NET_OUT_MAX || raft_wire_put_message(&p->queue, m) != 0) {
        n->stats.dropped++;
        return -1;
    }
    n->stats.sent++;
    peer_kick(p);
    return 0;
}

int raft_net_send_snapshot(raft_net_t *n, const struct raft_message *m, const char *path)
{
    assert(m->type == RAFT_INSTALL_SNAPSHOT && !n->closing);
    peer_t *p = is_blocked(n, m->server_id) ? NULL : peer_get(n, m->server_id, m->server_address);
    if (p == NULL) {
        n->stats.dropped++;
        return -1;
    }
    if (p->snap.fd >= 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "ordod: cluster: cannot send snapshot %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (raft_wire_put_message(&p->queue, m) != 0) {
        fprintf(stderr, "ordod: cluster: cannot send snapshot %s: its configuration is too large\n", path);
        close(fd);
        return -1;
    }
    p->snap = (send_snap_t){.fd = fd, .index = m->install_snapshot.last_index,
                            .term = m->install_snapshot.last_term, .offset = 0, .total = (uint64_t)st.st_size};
    snap_pump(p);
    peer_kick(p);
    return 0;
}

void raft_net_ping(raft_net_t *n, const uint64_t *ids, int nids, const char *const *addresses, uint64_t seq)
{
    assert(!n->closing);
    uint64_t term = n->hooks.term(n->hooks.arg);
    for (int i = 0; i < nids; i++) {
        if (ids[i] == n->id || is_blocked(n, ids[i]))
            continue;
        peer_t *p = peer_get(n, ids[i], addresses != NULL ? addresses[i] : NULL);
        if (p == NULL || peer_queued(p) >= RAFT_NET_OUT_MAX) {
            n->stats.dropped++;
            continue;
        }
        raft_wire_put_ping(&p->queue, RAFT_WIRE_PING, seq, term);
        peer_kick(p);
    }
}

void raft_net_peer(const raft_net_t *n, uint64_t id, raft_net_peer_t *out)
{
    const peer_t *p = peer_find(n, id);
    out->last_recv_ms = p != NULL ? p->last_recv_ms : 0;
    out->connected = p != NULL && p->out != NULL && p->out->connected && !p->out->closing;
}

int raft_net_partition(raft_net_t *n, const uint64_t *ids, int nids)
{
    if (nids < 0 || nids > BLOCKED_MAX)
        return -1;
    for (int i = 0; i < nids; i++)
        n->blocked[i] = ids[i];
    n->nblocked = nids;
    for (int i = 0; i < n->npeers; i++) {
        peer_t *p = n->peers[i];
        if (!is_blocked(n, p->id))
            continue;
        buf_done(&p->queue);
        snap_send_stop(p);
        if (p->redial_armed) {
            uv_timer_stop(&p->redial);
            p->redial_armed = false;
        }
    }
    for (conn_t *c = n->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->peer != NULL && is_blocked(n, c->peer->id))
            conn_close(c);
    }
    return 0;
}

void raft_net_stats(const raft_net_t *n, raft_net_stats_t *out) { *out = n->stats; }

static void on_handle_closed(uv_handle_t *h)
{
    pending_done(h->data);
}

/* One handle closed or request ended; the last one, once closing, frees. */
static void pending_done(raft_net_t *n)
{
    assert(n->pending > 0);
    if (--n->pending > 0 || !n->closing)
        return;
    assert(n->conns == NULL && n->syncing == NULL);
    for (int i = 0; i < n->npeers; i++) {
        ordo_buf_free(&n->peers[i]->queue);
        free(n->peers[i]);
    }
    void (*cb)(void *) = n->close_cb;
    void *arg = n->close_arg;
    free(n->scratch);
    free(n->tls_rbuf);
    ordo_tls_ctx_free(n->tls_server);
    ordo_tls_ctx_free(n->tls_client);
    free(n->address);
    free(n->recv_dir);
    free(n);
    if (cb != NULL)
        cb(arg);
}

void raft_net_close(raft_net_t *n, void (*cb)(void *arg), void *arg)
{
    assert(!n->closing);
    n->closing = true;
    n->close_cb = cb;
    n->close_arg = arg;
    n->pending++;
    uv_close((uv_handle_t *)&n->listener, on_handle_closed);
    n->pending++;
    uv_close((uv_handle_t *)&n->sweep, on_handle_closed);
    for (conn_t *c = n->conns; c != NULL; c = c->next)
        conn_close(c);
    for (int i = 0; i < n->npeers; i++) {
        peer_t *p = n->peers[i];
        snap_send_stop(p);
        if (p->resolving)
            uv_cancel((uv_req_t *)&p->resolve);
        p->redial.data = n;
        n->pending++;
        uv_close((uv_handle_t *)&p->redial, on_handle_closed);
    }
}
