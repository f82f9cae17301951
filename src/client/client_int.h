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

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tls.h"
#include "cresp.h"
#include "ordo/client.h"

#define CLIENT_HOST_MAX 256
#define CLIENT_ERRSTR_MAX 512
/* Bytes read from the socket per recv(). */
#define CLIENT_READ_CHUNK (64 * 1024)

/* The addresses a client may talk to (members.c owns the rules). A
 * cluster has 3 to 7 voters; 16 leaves room for learners and for a member
 * listed under two names (a seed "localhost:p" and its "127.0.0.1:p"). */
#define CLIENT_MEMBERS_MAX ORDO_CLIENT_ADDRS_MAX

typedef struct client_member {
    char host[CLIENT_HOST_MAX];
    int port;
} client_member_t;

typedef struct client_members {
    client_member_t m[CLIENT_MEMBERS_MAX];
    int n;       /* known: seeds first, then learned */
    int nseeds;  /* m[0..nseeds) are the configured seeds, never replaced */
    int cur;     /* the member talked to now, or tried next */
} client_members_t;

/* client_members_init() -- the seeds from addrs ("h:p,h:p", when non-NULL
 * and non-empty), else host:port (NULL/0: the defaults). ORDO_OK, or
 * ORDO_EINVAL for an address that does not parse (port outside 1..65535,
 * an empty or overlong host, more than CLIENT_MEMBERS_MAX). */
int client_members_init(client_members_t *ms, const char *addrs, const char *host, int port);
/* client_parse_addr() -- "host:port" or "[v6]:port" from s[0..n). 0 with
 * host (host_cap bytes, output) and *port (output) set, or -1. */
int client_parse_addr(const char *s, size_t n, char *host, size_t host_cap, int *port);
/* client_members_find() -- the index of host:port, or -1. */
int client_members_find(const client_members_t *ms, const char *host, int port);
/* client_members_add() -- the index of host:port, added if new; -1 when
 * the list is full. */
int client_members_add(client_members_t *ms, const char *host, int port);
/* client_members_next() -- move cur to the next member, round robin. */
void client_members_next(client_members_t *ms);
/* client_members_learn() -- add the members of a `CLUSTER MEMBERS` reply
 * r ([id, "host:port", role, voter] each). Returns the index of the one
 * whose role is "leader", or -1 (none, or r is not such a reply). */
int client_members_learn(client_members_t *ms, const ordo_reply_t *r);
/* client_members_format() -- "h:p,h:p" of every member into out (cap
 * bytes, truncated if need be), for error texts and ORDO_ADDRS. */
void client_members_format(const client_members_t *ms, char *out, size_t cap);

typedef struct push_node {
    struct push_node *next;
    ordo_reply_t *push;
    int64_t bytes; /* what it costs against reply_bytes_max */
} push_node_t;

struct ordo_client {
    /* configuration (copied) */
    char *password;
    char *user;                 /* NULL: "default" (opts.user) */
    int connect_timeout_ms, call_timeout_ms, reconnect_timeout_ms;
    int backoff_min_ms, backoff_max_ms, redirects_max;
    int resp2_only;
    int64_t reply_bytes_max, reply_elems_max;
    int pushes_max;

    /* who we may talk to, and who now (members.cur) */
    client_members_t members;
    int learn;    /* ask CLUSTER MEMBERS after the next handshake */
    int moved;    /* a pipelined reply said -NOTLEADER: reconnect once pending drains */
    int move_to;  /* ... to this member (-1: the next one) */

    int fd;
    int proto;
    uint64_t epoch;
    uint64_t rng;

    cresp_parser_t parser;
    cresp_buf_t in, out;
    size_t pending;
    push_node_t *push_head, *push_tail;
    int npushes;          /* frames in the FIFO (at most pushes_max) */
    int64_t push_bytes;   /* their cost (at most reply_bytes_max) */

    char errstr[CLIENT_ERRSTR_MAX];
    int64_t err_rev;

    /* TLS (tls_conn.c): tls_ctx != NULL when on; tls is the session of the
     * connection (non-NULL exactly while connected over TLS); out is then
     * plaintext not yet encrypted and tls_out ciphertext not yet sent. */
    ordo_tls_ctx_t *tls_ctx;
    ordo_tls_t *tls;
    cresp_buf_t tls_out;
    char *tls_server_name;       /* NULL: the member's host */
    char *tls_bad;               /* the options did not load: why (every connect fails with it) */
};

/* tls_conn.c: TLS under the blocking connection (see its head). */

/* client_tls_opts() -- the TLS context (*ctx), server name (*server_name,
 * strdup'd or NULL) and, when the files do not load, why (*bad, strdup'd;
 * *ctx is then NULL) from o; all NULL if o->tls is 0. ORDO_OK or
 * ORDO_ENOMEM. The blocking and the asynchronous client both build theirs
 * with it. */
int client_tls_opts(const ordo_client_opts_t *o, ordo_tls_ctx_t **ctx, char **server_name, char **bad);
/* client_tls_init() -- c's TLS context from o (nothing if o->tls is 0).
 * ORDO_OK or ORDO_ENOMEM; options that do not load leave c->tls_bad. */
int client_tls_init(ordo_client_t *c, const ordo_client_opts_t *o);
/* client_tls_decrypt() -- feed n bytes the server sent to session t and
 * read all the plaintext they complete onto in (both clients). 0, or
 * CLIENT_TLS_NOMEM, ORDO_TLS_EOF, ORDO_TLS_ERR (the plaintext read before
 * stays in in). */
#define CLIENT_TLS_NOMEM (-3) /* apart from ORDO_TLS_ERR (-1) and ORDO_TLS_EOF (-2) */
int client_tls_decrypt(ordo_tls_t *t, const char *data, size_t n, cresp_buf_t *in);
/* client_tls_free() -- the context and what init kept. */
void client_tls_free(ordo_client_t *c);
/* client_tls_start() -- TLS handshake on the fresh connection to host,
 * before deadline. ORDO_OK, ORDO_ETLS (refused: errstr), ORDO_ECONN,
 * ORDO_ETIMEDOUT, ORDO_ENOMEM. */
int client_tls_start(ordo_client_t *c, const char *host, int64_t deadline);
/* client_tls_encrypt() -- move plaintext from c->out into ciphertext in
 * c->tls_out (at most CLIENT_TLS_WRITE_BYTES waiting). ORDO_OK, ORDO_ETLS. */
int client_tls_encrypt(ordo_client_t *c);
/* client_tls_read() -- recv() ciphertext and decrypt it into c->in.
 * ORDO_OK (also when nothing was there), ORDO_ECONN, ORDO_ETLS. */
int client_tls_read(ordo_client_t *c);
/* client_tls_drop() -- end the session (the socket is closed by the caller). */
void client_tls_drop(ordo_client_t *c);
/* Ciphertext kept waiting for the socket at most, before more of out is
 * encrypted. */
#define CLIENT_TLS_WRITE_BYTES (256 * 1024)

/* client_backoff_ms() -- full jitter: uniform in [0, min(max, min*2^attempt)]
 * drawn from *rng (xorshift64*; *rng must be nonzero). */
int client_backoff_ms(uint64_t *rng, int attempt, int min_ms, int max_ms);
int client_seterr(ordo_client_t *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int64_t client_now_ms(void);
/* client_cond_wait_ms() -- pthread_cond_timedwait on cv (mu held) for at
 * most ms > 0 milliseconds from now. client_cond_wait_until() -- the same
 * up to the client_now_ms() time deadline_ms; returns at once if it is
 * already past. Either may return early (signal, spurious wake-up). */
void client_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms);
void client_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);

/* CLIENT_OPTS_APPLY() -- the tunables of a client struct c (ordo_client_t
 * or ordo_aclient_t: the same field names) from opts o, with the defaults
 * of ordo/client.h for what o leaves 0. The addresses are
 * client_members_init()'s. */
#define CLIENT_OPTS_APPLY(c, o)                                                                     \
    do {                                                                                            \
        (c)->connect_timeout_ms = (o).connect_timeout_ms != 0 ? (o).connect_timeout_ms              \
                                                              : ORDO_CLIENT_CONNECT_TIMEOUT_MS_DEFAULT; \
        (c)->call_timeout_ms = (o).call_timeout_ms != 0 ? (o).call_timeout_ms                       \
                                                        : ORDO_CLIENT_CALL_TIMEOUT_MS_DEFAULT;      \
        (c)->reconnect_timeout_ms = (o).reconnect_timeout_ms != 0                                   \
                                        ? (o).reconnect_timeout_ms                                  \
                                        : ORDO_CLIENT_RECONNECT_TIMEOUT_MS_DEFAULT;                 \
        (c)->backoff_min_ms = (o).backoff_min_ms != 0 ? (o).backoff_min_ms                          \
                                                      : ORDO_CLIENT_BACKOFF_MIN_MS_DEFAULT;         \
        (c)->backoff_max_ms = (o).backoff_max_ms != 0 ? (o).backoff_max_ms                          \
                                                      : ORDO_CLIENT_BACKOFF_MAX_MS_DEFAULT;         \
        (c)->redirects_max = (o).redirects_max != 0 ? (o).redirects_max                             \
                                                    : ORDO_CLIENT_REDIRECTS_MAX_DEFAULT;            \
        (c)->resp2_only = (o).resp2;                                                                \
        (c)->reply_bytes_max = (o).reply_bytes_max > 0 ? (o).reply_bytes_max                        \
                                                       : ORDO_CLIENT_REPLY_BYTES_MAX_DEFAULT;       \
        (c)->reply_elems_max = (o).reply_elems_max > 0 ? (o).reply_elems_max                        \
                                                       : ORDO_CLIENT_REPLY_ELEMS_MAX_DEFAULT;       \
        (c)->pushes_max = (o).pushes_max > 0 ? (o).pushes_max : ORDO_CLIENT_PUSHES_MAX_DEFAULT;     \
    } while (0)

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

/* client_call() flags. CLIENT_CALL_SAFE: the server recognises a repeat of
 * this command (a push with an ID, an ack or EXEC guarded by a delivery
 * token, a fenced or IFREV write), so a connection that breaks with it
 * outstanding is not the caller's problem: it is sent again, within the
 * call's deadline. */
#define CLIENT_CALL_SAFE 1

/* client_call() -- ordo_client_command() with flags (above). */
int client_call(ordo_client_t *c, int timeout_ms, int argc, const char *const *argv,
                const size_t *lens, int flags, ordo_reply_t **reply);

/* errors.c: what the server's error replies mean (see its head). */

/* The largest TCP port. */
#define CLIENT_PORT_MAX 65535

/* client_parse_notleader() outcomes. */
enum {
    CLIENT_REDIRECT_TO = 1,      /* host and port name the leader */
    CLIENT_REDIRECT_UNKNOWN = 0, /* "NOTLEADER ?": no leader known yet */
    CLIENT_REDIRECT_BAD = -1,    /* not a NOTLEADER line, or a malformed one */
};

/* client_parse_notleader() -- read the error text err ("NOTLEADER
 * host:port", "NOTLEADER [v6]:port" or "NOTLEADER ?"). On
 * CLIENT_REDIRECT_TO, host (host_cap bytes, output) holds the leader's host
 * without brackets and *port (output) its port; on any other outcome
 * neither is written. */
int client_parse_notleader(const char *err, char *host, size_t host_cap, int *port);
/* client_error_map -- every error code of docs/protocol.md and its
 * ORDO_E* code (client_error_map_len rows). */
typedef struct client_error_map {
    const char *word;
    int code;
} client_error_map_t;
extern const client_error_map_t client_error_map[];
extern const size_t client_error_map_len;
/* client_error_code() -- the ORDO_E* code of an error reply's text (its
 * first word, looked up in client_error_map; ORDO_ESERVER for any other).
 * *rev (output, may be NULL): the revision a CONFLICT or COMPACTED
 * carries, else 0. */
int client_error_code(const char *text, int64_t *rev);
/* client_is_auth_error() -- 1 if a handshake reply refuses the password
 * (-WRONGPASS, -NOAUTH, or an error that names the password), else 0. */
int client_is_auth_error(const ordo_reply_t *r);

/* client_stopped() -- has the caller's stop flag (may be NULL: never) been
 * set? Stop flags are set from other threads or signal handlers, so they
 * are atomics read with an explicit load. */
static inline bool client_stopped(const atomic_bool *stop)
{
    return stop != NULL && atomic_load(stop);
}

/* client_txn_ack() (txn.c) -- the consumer runner's exactly-once step:
 * append `Q.ACK queue id token [RESULT]` to t and execute it, with pull
 * (NULL: none; client_pull_t is below) written behind the EXEC. ORDO_OK
 * (applied), ORDO_ESTALE (the ack's token was stale: nothing applied), or
 * ordo_txn_exec()'s other codes (ORDO_ECONFLICT: an earlier guard). */
struct client_pull;
int client_txn_ack(ordo_client_t *c, ordo_txn_t *t, const char *queue, const ordo_msg_t *m,
                   const char *result, size_t result_len, struct client_pull *pull);
/* client_txn_retry() -- execute again a transaction client_txn_ack() built
 * (the ack already its last command), after an unanswered attempt: the
 * ack's token makes a repeat of an applied one stale. Same returns. */
int client_txn_retry(ordo_client_t *c, ordo_txn_t *t, const char *queue, const ordo_msg_t *m);

/* A Q.PULL (one message) written behind another command on the same
 * connection, so the two share a round trip and the server syncs their
 * records together: the consumer runner's next pull, carried by its ack
 * (client_ack_pull()) or its exactly-once EXEC (client_txn_ack()).
 * queue, block_ms and lease_ms are the pull's; msgs, n and rc are what it
 * got, as ordo_q_pull() answers (rc: ORDO_EINVAL if it was never
 * appended; the error that broke the connection if its reply never
 * came). */
typedef struct client_pull {
    const char *queue;
    int64_t block_ms, lease_ms;
    ordo_msg_t *msgs;
    size_t n;
    int rc;
} client_pull_t;

/* client_pull_append() (calls.c) -- append p's Q.PULL; p->rc. */
int client_pull_append(ordo_client_t *c, client_pull_t *p);
/* client_pull_read() -- read the reply of p's appended pull into p, once
 * the replies before it are read; rc is the last of those reads' outcome
 * (not ORDO_OK: the connection is gone and the pull's reply with it). */
void client_pull_read(ordo_client_t *c, client_pull_t *p, int rc);
/* client_ack_pull() -- `Q.ACK queue id token [RESULT]` for done with pull
 * behind it. Nothing may be outstanding on c. Returns the ack's outcome,
 * as ordo_q_ack() answers (ORDO_ECONN and the like: it may or may not
 * have applied; the caller repeats it, the token guarding it). */
int client_ack_pull(ordo_client_t *c, const char *queue, const ordo_msg_t *done, const void *result,
                    size_t result_len, int with_result, client_pull_t *pull);

#endif
