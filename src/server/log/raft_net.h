/*
 * raft_net.h -- how members talk: ordod's own transport for the raft
 * engine's messages (raft_step), a leadership-confirmation round for
 * reads, and snapshots streamed from a file in chunks. It replaces C
 * raft's legacy TCP transport (raft_uv_tcp), so ordod controls framing,
 * bounds, back-pressure and, later, TLS between members.
 *
 * Connections: each member dials every member it sends to (one outbound
 * connection per peer, redialled with a backoff while messages wait) and
 * accepts connections from the others. Every connection starts with a
 * hello naming the sender (id and raft address); frames flow both ways on
 * any connection: raft messages go out on the outbound connection, a pong
 * goes back on the connection its ping came in on.
 *
 * Frames (the wire format, with its limits, is stated in raft_wire.h):
 * raft messages of the six types, hello, ping/pong, and snapshot chunks.
 * A peer that sends a malformed or oversized frame is disconnected and
 * logged once per connection; neither that frame nor anything after it
 * reaches the engine (the whole frames before it did). The first frame
 * read from a connection must be a hello.
 *
 * Sending never blocks and never grows without bound: a message to a
 * member whose output already holds RAFT_NET_OUT_MAX bytes is dropped
 * (raft retransmits; a dropped message is counted).
 *
 * Snapshots: raft_net_send_snapshot() streams a snapshot file to one
 * member in RAFT_NET_CHUNK bytes chunks, the next chunk read when the
 * connection's output has drained below RAFT_NET_CHUNK (so a large file
 * never sits in memory, and the loop never waits on it). The receiver
 * writes the chunks to a temporary file in recv_dir, and when the last
 * one is in and the file synced, renames it and hands the engine an
 * InstallSnapshot message whose data is the file's path (a NUL-ended
 * string in a raft_malloc'd buffer): the engine passes data through
 * untouched to the driver, which loads the file and then owns it (removes
 * it when done). One stream per member at a time: a second send while one
 * runs is ignored.
 *
 * Mutual TLS (options tls_server and tls_client): every connection is
 * TLS, both ends show a certificate from the cluster's CA, and a member's
 * certificate must name it: its common name is "node-<id>"
 * (RAFT_NET_TLS_NAME), the id of the member dialled (checked by the
 * dialer once the handshake is done) or the id the hello claims (checked
 * by the acceptor before the hello is taken, with the id in the cluster's
 * configuration: hooks.is_member). A connection that fails
 * either check, or whose handshake fails (no certificate, another CA,
 * expired, plaintext), is closed, logged once and counted (tls_refused);
 * nothing it sent reaches the engine. Frames and hellos are those of a
 * plain connection, inside TLS; the output bound counts the ciphertext
 * of the write in flight. raft_net_tls_reload() swaps the certificates
 * for new connections (SIGHUP).
 *
 * Every connection, TLS or not, must have its hello in within
 * RAFT_NET_HELLO_TIMEOUT_MS of being made, or it is closed (counted in
 * refused; logged with TLS on).
 *
 * Threads: loop thread only.
 */
#ifndef ORDO_RAFT_NET_H
#define ORDO_RAFT_NET_H

#include <inttypes.h>
#include <raft.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/tls.h"

#define RAFT_NET_OUT_MAX (64u << 20)   /* bytes queued to one member before messages to it are dropped */
#define RAFT_NET_CHUNK (1u << 20)      /* snapshot chunk size */
#define RAFT_NET_TLS_NAME "node-%" PRIu64 /* the common name of member id's certificate (printf) */
/* A connection that has not finished its handshake (with TLS) and its
 * hello within this is closed and logged: a member does both in a round
 * trip or two, and CONNS_MAX connections held open by something else
 * would keep the members out. */
#define RAFT_NET_HELLO_TIMEOUT_MS 5000u

typedef struct raft_net_s raft_net_t;

typedef struct raft_net_hooks_s {
    /* A raft message arrived. m->server_id and m->server_address name the
     * sender (from its hello). The message is the callee's for the call
     * only: afterwards the net frees it (append entries: the entries array
     * and their data; install snapshot: conf and data), so the callee
     * copies what it keeps (raft_step does not keep entries: the store
     * copies them). */
    void (*receive)(void *arg, struct raft_message *m);
    /* This member's current term, for answering a ping. */
    uint64_t (*term)(void *arg);
    /* A pong: member id answered ping round seq with its current term. */
    void (*pong)(void *arg, uint64_t id, uint64_t seq, uint64_t term);
    /* With mutual TLS: whether id is in the cluster's configuration (a
     * hello from another id is refused even with a valid certificate).
     * NULL: not asked. */
    bool (*is_member)(void *arg, uint64_t id);
    void *arg;
} raft_net_hooks_t;

typedef struct raft_net_options_s {
    uv_loop_t *loop;
    uint64_t id;                 /* this member */
    const char *address;         /* its raft address host:port (sent in hellos) */
    const char *bind;            /* where to listen (host:port), usually address */
    const char *recv_dir;        /* where received snapshots are written */
    uint64_t snapshot_max_bytes; /* a larger snapshot stream is refused (0: no limit) */
    /* Mutual TLS (see the head): both set, or neither (plain TCP). Read
     * during raft_net_open() only: the net builds its contexts from them.
     * tls_server's auth is forced to ORDO_TLS_AUTH_YES. */
    const ordo_tls_config_t *tls_server; /* for accepted connections */
    const ordo_tls_config_t *tls_client; /* for dialled ones */
} raft_net_options_t;

typedef struct raft_net_stats_s {
    uint64_t sent, received;                /* raft messages queued, handed to the engine */
    uint64_t dropped;                       /* messages, pings and pongs refused by the output bound,
                                               the frame limits or a partition */
    uint64_t bytes_out, bytes_in;           /* bytes written and read, frames of every kind */
    uint64_t bad_frames;                    /* connections closed for a malformed frame */
    uint64_t refused;                       /* connections closed at the hello: a member partitioned
                                               away, or too many members or connections */
    uint64_t dials_failed;                  /* connections to members that could not be made */
    uint64_t tls_refused;                   /* connections closed by mutual TLS: a failed handshake,
                                               or a certificate that does not name the member */
    uint64_t snapshots_sent, snapshots_received;   /* sent: the last chunk queued */
    uint64_t snapshot_bytes_sent, snapshot_bytes_received;
} raft_net_stats_t;

/* Per peer, for CLUSTER MEMBERS: when a frame last arrived from it (ms of
 * the loop's clock, uv_now; 0: never), whether an outbound connection is up. */
typedef struct raft_net_peer_s {
    uint64_t last_recv_ms;
    bool connected;
} raft_net_peer_t;

/* raft_net_open() -- listen. Returns 0, or -1 with a message (the address
 * cannot be bound). */
int raft_net_open(const raft_net_options_t *opt, const raft_net_hooks_t *hooks, raft_net_t **out, char *err,
                  size_t elen);

/* raft_net_send() -- encode m (to m->server_id at m->server_address) and
 * queue it. Append entries carry m->append_entries.entries (borrowed: the
 * net encodes them before it returns). Install snapshot is not sent this
 * way (raft_net_send_snapshot). Returns 0, or -1 if dropped (counted):
 * the output bound, a partition, or a message past the wire's limits
 * (RAFT_WIRE_FRAME_MAX, RAFT_WIRE_ENTRIES_MAX in raft_wire.h: the driver
 * splits appends below them). */
int raft_net_send(raft_net_t *n, const struct raft_message *m);

/* raft_net_send_snapshot() -- stream the snapshot file at path to member
 * m->server_id; m is the engine's install snapshot message with conf
 * filled (data ignored). The net holds the file open while the stream
 * runs: the driver may unlink it, not rewrite it. Returns 0 (started, or already running to
 * that member), or -1 (the file cannot be opened, the conf is past
 * RAFT_WIRE_CONF_MAX, or the member is partitioned away). A stream ends
 * with its last chunk queued, or stops when the connection carrying it
 * is lost: the engine sends the snapshot again. */
int raft_net_send_snapshot(raft_net_t *n, const struct raft_message *m, const char *path);

/* raft_net_ping() -- send ping round seq to every member in ids. */
void raft_net_ping(raft_net_t *n, const uint64_t *ids, int nids, const char *const *addresses, uint64_t seq);

/* raft_net_peer() -- what the net knows of member id. */
void raft_net_peer(const raft_net_t *n, uint64_t id, raft_net_peer_t *out);

/* raft_net_partition() -- the test seam for DEBUG PARTITION: from now on
 * no frame to or from these ids (n == 0: none blocked), and connections
 * with them are closed. Returns 0, or -1 if more than 16 ids. */
int raft_net_partition(raft_net_t *n, const uint64_t *ids, int nids);

void raft_net_stats(const raft_net_t *n, raft_net_stats_t *out);

/* raft_net_tls_reload() -- build the mutual TLS contexts again from
 * server and client (as raft_net_open() does) and use them for new
 * connections; live ones keep theirs. Returns 0, or -1 with err and the
 * old contexts kept (also when the net was opened without TLS: it cannot
 * be turned on while running). */
int raft_net_tls_reload(raft_net_t *n, const ordo_tls_config_t *server, const ordo_tls_config_t *client, char *err,
                        size_t elen);

/* raft_net_close() -- close every handle; cb runs when all are closed
 * (the loop can then end) and n is freed. */
void raft_net_close(raft_net_t *n, void (*cb)(void *arg), void *arg);

#endif /* ORDO_RAFT_NET_H */
