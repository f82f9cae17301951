/*
 * client_int.h -- the connection's state, shared by the files of
 * src/client/ (conn.c owns it; calls.c and the helpers only read the error
 * fields and call through conn.c's functions).
 *
 * Invariants: fd >= 0 exactly while connected; pending counts the replies
 * expected for commands already in out or already sent; out holds encoded
 * commands not yet written; in holds bytes read but not yet parsed;
 * pushes is a FIFO of push frames not yet handed out.
 */
#ifndef ORDO_CLIENT_INT_H
#define ORDO_CLIENT_INT_H

#include <stdint.h>

#include "cresp.h"
#include "ordo/client.h"

#define CLIENT_HOST_MAX 256
#define CLIENT_ERRSTR_MAX 512
/* Bytes read from the socket per recv(). */
#define CLIENT_READ_CHUNK (64 * 1024)

typedef struct push_node {
    struct push_node *next;
    ordo_reply_t *push;
} push_node_t;

struct ordo_client {
    /* configuration (copied) */
    char seed_host[CLIENT_HOST_MAX];
    int seed_port;
    char *password;
    int connect_timeout_ms, call_timeout_ms, reconnect_timeout_ms;
    int backoff_min_ms, backoff_max_ms, redirects_max;
    int resp2_only;

    /* where we talk now (a redirect changes it) */
    char host[CLIENT_HOST_MAX];
    int port;

    int fd;
    int proto;
    uint64_t epoch;
    uint64_t rng;

    cresp_parser_t parser;
    cresp_buf_t in, out;
    size_t pending;
    push_node_t *push_head, *push_tail;

    char errstr[CLIENT_ERRSTR_MAX];
    int64_t err_rev;
};

/* client_backoff_ms() -- full jitter: uniform in [0, min(max, min*2^attempt)]
 * drawn from *rng (xorshift64*; *rng must be nonzero). */
int client_backoff_ms(uint64_t *rng, int attempt, int min_ms, int max_ms);
int client_seterr(ordo_client_t *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int64_t client_now_ms(void);

/* Helpers that retry for ever in their own loop (producer sender, consumer
 * workers, watcher, career) connect in slices of at most this long, so a
 * stop is noticed within it even while the server is unreachable. */
#define CLIENT_CONNECT_SLICE_MS 1000

/* client_sliced() -- opts with the reconnect budget capped to the slice. */
static inline ordo_client_opts_t client_sliced(ordo_client_opts_t o)
{
    if (o.reconnect_timeout_ms <= 0 || o.reconnect_timeout_ms > CLIENT_CONNECT_SLICE_MS)
        o.reconnect_timeout_ms = CLIENT_CONNECT_SLICE_MS;
    return o;
}

/* client_txn_ack() (txn.c) -- the consumer runner's exactly-once step:
 * append `Q.ACK queue id token [RESULT]` to t and execute it. ORDO_OK
 * (applied), ORDO_ESTALE (the ack's token was stale: nothing applied), or
 * ordo_txn_exec()'s other codes (ORDO_ECONFLICT: an earlier guard). */
int client_txn_ack(ordo_client_t *c, ordo_txn_t *t, const char *queue, const ordo_msg_t *m,
                   const char *result, size_t result_len);

#endif
