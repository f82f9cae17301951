/*
 * net.h -- the network layer's face to the server: listeners, closing
 * every connection at shutdown, memory held by connections, and net's
 * periodic work. What the rest of the server asks of one connection (and
 * of all of them: flush, resume, release held output, back-pressure) is
 * in conn.h. Implemented by net.c. Loop thread only.
 */
#ifndef ORDO_NET_H
#define ORDO_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/list.h"
#include "base/tls.h"

typedef struct server_s server_t;

/* TLS on the doors (net/net_tls.c): the context, the TLS listener, the
 * handshakes under way and the refusal log's rate limit. */
typedef struct net_tls_s {
    ordo_tls_ctx_t *ctx;             /* NULL while TLS is off */
    uv_tcp_t listener;               /* RESP over TLS on tls-port */
    bool listener_on;
    ordo_list_t handshaking;         /* connections mid-handshake (conn_t.tls_ln), in accept order */
    char *rbuf;                      /* one read's ciphertext (CONN_READ_CHUNK), while TLS is on */
    uint64_t log_window_ms;          /* the second refusals are being logged in */
    uint32_t logged_in_window;       /* lines logged in it */
    uint64_t unlogged;               /* refusals not logged since the last line */
} net_tls_t;

/* The network layer's part of the server (s->net). Every connection is in
 * conns from accept until its handle is closed; besides, it is in dirty
 * while it has events to flush at the end of the turn, in resumed while
 * its pending input waits to run, and in held while its output waits for
 * a position the log has not committed (each at most once: list.h asserts it). */
typedef struct net_s {
    uv_tcp_t tcp;
    bool tcp_on;
    uv_pipe_t unix_listener;
    bool unix_on;
    bool unix_bound;                 /* we created the socket file: removed at close */
    ordo_list_t conns;               /* live connections (conn_t.link); conns.len is INFO's count */
    ordo_list_t dirty;               /* replies and events to flush (conn_t.dirty_ln), newest first */
    ordo_list_t resumed;             /* input to run at the end of the turn (conn_t.resume_ln) */
    uv_idle_t resume_idle;           /* active while resumed is not empty: the loop must not sleep */
    bool resume_idle_on;             /* initialised (net_listen) and not closed */
    ordo_list_t held;                /* output waiting for a log position (conn_t.held_ln) */
    uint64_t held_seen;              /* persist_commits() when release_held() last looked at them */
    bool reading_paused;             /* back-pressure: no client is read (persist_backlogged()) */
    size_t released_bytes;           /* large connection buffers freed since the last trim */
    uint64_t next_client_id;
    struct http_listener_s *http;    /* the HTTP listener (net/http.c), NULL if off */
    size_t fd_clients_max;           /* connections the descriptor limit leaves room for (net_listen) */
    uint64_t refused_log_ms;         /* when a refusal at accept was last logged (rate limit) */
    uint64_t refused_unlogged;       /* refusals since, not logged yet */
    net_tls_t tls;                   /* TLS on RESP and HTTP (net/net_tls.h) */
} net_t;

/* net_listen() -- open the TCP listener (and the unix socket if
 * configured). Returns 0, or -1 with a message in err. */
int net_listen(server_t *s, char *err, size_t elen);
/* net_close_all() -- close the listeners and every connection (shutdown). */
void net_close_all(server_t *s);
/* Bytes held by connections: the structures and their buffers' capacity. */
size_t net_client_memory(const server_t *s);
/* Cron's net hook (s->hooks.net_cron): once NET_TRIM_AFTER_BYTES of large
 * connection buffers have been freed, hand the free pages back to the
 * system (malloc_trim), so a flood of large requests leaves no resident
 * memory behind however the heap is fragmented; then apply the output
 * limits to every connection above output-soft-bytes. */
void net_cron(server_t *s);
/* net_drop_unsure() -- the server's drop_unsure hook (server.h): this
 * cluster member stopped leading, so every connection whose output waits
 * for a log position that may never commit, and every watcher, is closed
 * (clients reconnect and resume on the new leader). */
void net_drop_unsure(server_t *s);
/* net_drop_unmarked() -- the server's drop_unmarked hook (server.h): the
 * log failed, so every connection with output not yet judged against the
 * committed position is closed (persist.c says why). */
void net_drop_unmarked(server_t *s);
/* The writer's answer, park and resume hooks (server.h): render an
 * outcome (writer/outcome.h) into the connection's output (through cmd);
 * mark the connection parked (its pipeline waits); resume it. */
struct conn_s;
struct outcome_s;
struct waiter_s;
void net_answer(server_t *s, struct conn_s *c, const struct outcome_s *o);
void net_park(struct conn_s *c, struct waiter_s *w);
void net_resume(struct conn_s *c);

#endif /* ORDO_NET_H */
