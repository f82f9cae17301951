/*
 * ordo/client.h -- the C client of ordod: one blocking connection that
 * speaks RESP3, and typed calls for every command family on top of it.
 *
 * The connection (ordo_client_t)
 *   - Connects to host:port, sends `HELLO 3` (with `AUTH <user> <password>`
 *     when a password is set; the user is opts.user, `default` if NULL) and from then on reads RESP3: replies and push
 *     frames (`>`) interleave; pushes are kept in arrival order in a FIFO and
 *     handed out by ordo_client_next_push(), never mixed with replies.
 *     A server that refuses HELLO (an older ordod, a Redis speaking RESP2)
 *     gets `AUTH [user] password` alone and the connection stays RESP2.
 *   - Pipelines: ordo_client_append() queues commands (nothing is sent),
 *     ordo_client_get_reply() flushes what is queued and returns the replies
 *     one by one, in order. ordo_client_command() is append + get_reply.
 *   - Times out per call: every call has a deadline (opts.call_timeout_ms,
 *     or the timeout_ms the call is given) that bounds all of it --
 *     connecting, following redirects, riding out an election, waiting
 *     for the reply -- within a few milliseconds, however the server
 *     behaves. When a deadline passes with a reply outstanding the
 *     connection is closed, because a reply that arrived later would be
 *     taken for the next command's; the call returns ORDO_ETIMEDOUT and the
 *     command may or may not have run.
 *   - Knows several addresses: opts.addrs ("h1:p1,h2:p2,...") or
 *     opts.host:opts.port are the seeds; the first connection (and the
 *     first after a failure) asks `CLUSTER MEMBERS` and adds the members
 *     it lists. A connect that fails moves to the next address at once;
 *     after a whole round fails, it retries with exponential backoff and
 *     full jitter (a uniform draw in [0, min(backoff_max_ms, backoff_min_ms
 *     * 2^round)]) until opts.reconnect_timeout_ms (or the call's deadline)
 *     has passed; the error then names every address tried. A connection
 *     that breaks while a command is outstanding is not resent behind the
 *     caller's back (ORDO_ECONN: "may or may not have run"), except by the
 *     typed calls the server makes safe to repeat (see "Safe retries" at
 *     the typed calls). An idle connection the server closed is noticed
 *     before a command is written to it. Server-side state of a connection
 *     (watches, observers) does not survive a reconnect;
 *     ordo_client_epoch() tells the caller a reconnect happened so it can
 *     set them up again.
 *   - Follows `-NOTLEADER host:port` (cluster mode): a follower did not run
 *     the command, so ordo_client_command() sends it again to host:port --
 *     only if that address is a member (configured, or listed by a
 *     member's `CLUSTER MEMBERS`, which is asked when the address is new):
 *     the password goes to no other address. `-NOTLEADER ?` (an election)
 *     or an address that is no member: the next member is tried after a
 *     backoff. Redirects are followed until the call's deadline, pausing
 *     with backoff after opts.redirects_max hops; at the deadline the
 *     caller gets the -NOTLEADER reply (ORDO_ENOTLEADER in typed calls),
 *     or ORDO_ETIMEDOUT if the deadline fell while the last attempt's
 *     answer was still outstanding (that attempt may have run).
 *     On the pipelined path (ordo_client_get_reply()) the -NOTLEADER reply
 *     is returned, and the next ordo_client_append() after the pipeline's
 *     replies are read goes to the member it named. The address may be
 *     `[v6 address]:port`; one that does not parse is taken as `?`. The
 *     asynchronous client (ordo/client_uv.h) does the same. A redirect
 *     never replaces the seeds.
 *   - Bounded: one reply costs at most reply_bytes_max bytes and
 *     reply_elems_max elements, and at most pushes_max push frames queue
 *     unread (see the defaults below). A server that passes a bound gets
 *     its connection closed and the call ORDO_EPROTO.
 *
 * Objects: one shape for every object of this header and of
 * ordo/client_uv.h (ordo_client_t, ordo_txn_t, ordo_producer_t,
 * ordo_consumer_t, ordo_lock_holder_t, ordo_aclient_t):
 *   int  ordo_X_new(ordo_X_t **out, <what it needs>, const ordo_X_opts_t *opts);
 *   void ordo_X_free(ordo_X_t *x);
 *   - _new() returns ORDO_OK with *out, or an error with *out NULL (never
 *     a half-built object). It copies every string of the options, so the
 *     caller's options may go away after it returns; opts NULL means all
 *     defaults where the object has defaults.
 *   - _free() accepts NULL, stops whatever the object runs (threads,
 *     keepers, connections), waits for it, and frees everything the object
 *     owns. It returns nothing: an object whose ending has an outcome the
 *     caller may want (the producer's unreported messages, a lock that
 *     lapsed, a consumer's final counts) has a step for it before _free()
 *     -- ordo_producer_close(), ordo_lock_holder_release(),
 *     ordo_consumer_stop() + ordo_consumer_wait() + ordo_consumer_stats()
 *     -- which leaves the object valid for queries until _free().
 *   - Results a call fills for the caller are freed with the matching
 *     function: ordo_reply_free() (NULL is fine), ordo_msgs_free(msgs, n),
 *     ordo_kv_clear() for an ordo_kv_t the caller owns, free() where a
 *     call says so.
 *
 * Ownership and lifetimes
 *   - ordo_client_free() closes the socket and frees every queued push.
 *   - A reply (ordo_reply_t) returned to the caller is owned by the caller
 *     and freed with ordo_reply_free(); all its strings and children go with
 *     it. Strings in replies are binary-safe and also NUL-terminated.
 *   - Typed results (ordo_kv_t, ordo_msg_t arrays, hand-over values, call
 *     results) are malloc'd for the caller and freed as "Objects" says.
 *   - Argument strings are only read during the call.
 *
 * Stop flags: the long-running calls (ordo_watch_run(), ordo_career_run())
 * take a `const atomic_bool *stop` that another thread or a signal handler
 * sets with atomic_store(&flag, true); they read it with atomic_load().
 * (From C++, <stdatomic.h> needs C++23.)
 *
 * Threads: an ordo_client_t is not thread-safe. One thread at a time uses a
 * client; different clients are independent and may be used from different
 * threads (the producer, consumer runner and career in this header each own
 * their connections). SIGPIPE is never raised (sends use MSG_NOSIGNAL).
 *
 * Errors: every function returns ORDO_OK (0), or a negative code from
 * ordo/common.h (ORDO_EINVAL, ORDO_ENOMEM, ORDO_ETIMEDOUT, ORDO_ENOTFOUND,
 * ORDO_EFULL, ORDO_EBUSY, ORDO_ESTOPPED) or from the ORDO_E* list below;
 * ordo_strerror() (ordo/common.h) names them all, and
 * ordo_client_errstr() holds the text of the last error on that client (the server's error line, or the
 * system error). Every path (typed calls, transactions, the producer, the
 * consumer runner, ordo_client_reply_error()) maps the server's error codes
 * (docs/protocol.md, "Errors") with one table:
 *   -CONFLICT -> ORDO_ECONFLICT   -NOTHOLDER -> ORDO_ENOTHOLDER
 *   -NOTFOUND -> ORDO_ENOTFOUND   -TIMEOUT   -> ORDO_ETIMEDOUT
 *   -BUSY     -> ORDO_EBUSY       -COMPACTED -> ORDO_ECOMPACTED
 *   -LIMIT    -> ORDO_ELIMIT      -DEADLETTER-> ORDO_EDEADLETTER
 *   -NOAUTH, -WRONGPASS, -DENIED -> ORDO_EAUTH -READONLY -> ORDO_EREADONLY
 *   -NOTLEADER (after redirects ran out) -> ORDO_ENOTLEADER
 *   -ERR, -NOPROTO, -EXECABORT -> ORDO_ESERVER (the EXEC outcomes: see
 *   ordo_txn_exec()), and so is any error code not in that table.
 * The revision carried by -CONFLICT and -COMPACTED is available from
 * ordo_client_err_rev().
 */
#ifndef ORDO_CLIENT_H
#define ORDO_CLIENT_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ordo/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Client error codes (below the libordo range in common.h). */
enum {
    ORDO_ECONN = -100,       /* could not connect, or the connection broke: a
                                command in flight may or may not have run */
    ORDO_EPROTO = -101,      /* the server sent bytes that are not RESP, or
                                a reply of an unexpected shape */
    ORDO_ESERVER = -102,     /* an error reply with no more specific code */
    ORDO_ECONFLICT = -103,   /* -CONFLICT: a condition failed */
    ORDO_ENOTHOLDER = -104,  /* -NOTHOLDER: a fencing token is stale */
    ORDO_ECOMPACTED = -105,  /* -COMPACTED: history before a revision is gone */
    ORDO_ELIMIT = -106,      /* -LIMIT: a size or count limit */
    ORDO_EDEADLETTER = -107, /* -DEADLETTER: the message exhausted its attempts */
    ORDO_EAUTH = -108,       /* -NOAUTH / -WRONGPASS */
    ORDO_EREADONLY = -109,   /* -READONLY: the server's log cannot be written */
    ORDO_ENOTLEADER = -110,  /* -NOTLEADER and redirects ran out */
    ORDO_ESTALE = -111,      /* a token no longer holds (ack/extend/release 0) */
    ORDO_ETLS = -120,        /* TLS failed: the options do not load (a file, a
                                protocol name), the server's certificate does not
                                verify (CA, expiry, name), or the server refused
                                the handshake (a client certificate it requires);
                                the errstr says which. Final: not retried */
};

/* Named defaults (used when an option is 0). */
#define ORDO_CLIENT_PORT_DEFAULT 7379
#define ORDO_CLIENT_CONNECT_TIMEOUT_MS_DEFAULT 5000   /* one connect attempt */
#define ORDO_CLIENT_CALL_TIMEOUT_MS_DEFAULT 10000     /* a reply to a non-blocking command */
#define ORDO_CLIENT_RECONNECT_TIMEOUT_MS_DEFAULT 30000 /* keep retrying a connect this long */
#define ORDO_CLIENT_BACKOFF_MIN_MS_DEFAULT 20         /* first retry within 20 ms */
#define ORDO_CLIENT_BACKOFF_MAX_MS_DEFAULT 1000       /* never wait more than 1 s between tries */
#define ORDO_CLIENT_REDIRECTS_MAX_DEFAULT 5           /* -NOTLEADER hops per call before pausing */
/* Bounds on what a server may make the client hold. One reply (a reply or
 * a push frame) may cost at most reply_bytes_max of memory, counting every
 * element's node (about 64 bytes) and its string bytes: 256 MiB is four
 * times ordod's default max-reply-bytes (64m), room for an operator who
 * raised it. At most reply_elems_max elements per reply: a Q.PULL COUNT of
 * small messages filling 64 MiB is about 5 million elements. At most
 * pushes_max push frames (watch events) queued unread, together within
 * reply_bytes_max: they queue only while a reply is awaited, and a watcher
 * reads them as they come. A server that passes a bound gets its
 * connection closed; the call fails with ORDO_EPROTO, the errstr naming the
 * bound. */
#define ORDO_CLIENT_REPLY_BYTES_MAX_DEFAULT ((int64_t)256 * 1024 * 1024)
#define ORDO_CLIENT_REPLY_ELEMS_MAX_DEFAULT ((int64_t)8 * 1024 * 1024)
#define ORDO_CLIENT_PUSHES_MAX_DEFAULT 65536
/* Addresses in opts.addrs, configured and learned together. */
#define ORDO_CLIENT_ADDRS_MAX 16

typedef struct ordo_client ordo_client_t;

typedef struct ordo_client_opts {
    const char *host;            /* NULL: "127.0.0.1" (ignored when addrs is set) */
    int port;                    /* 0: 7379 (ignored when addrs is set) */
    const char *addrs;           /* NULL: host:port; else "h1:p1,h2:p2,..." (a host may
                                    be [v6]), at most ORDO_CLIENT_ADDRS_MAX */
    const char *password;        /* NULL: no AUTH */
    int connect_timeout_ms;      /* 0: default */
    int call_timeout_ms;         /* 0: default; a blocking command adds its wait */
    int reconnect_timeout_ms;    /* 0: default; ORDO_WAIT_FOREVER: no limit */
    int backoff_min_ms;          /* 0: default */
    int backoff_max_ms;          /* 0: default */
    int redirects_max;           /* 0: default */
    int resp2;                   /* nonzero: do not send HELLO 3 */
    int64_t reply_bytes_max;     /* 0: default */
    int64_t reply_elems_max;     /* 0: default */
    int pushes_max;              /* 0: default */
    /* TLS (a server's tls-port): on when tls is nonzero. The server's
     * certificate is verified against tls_ca_file and must name
     * tls_server_name (a DNS name or an IP address), unless tls_no_verify.
     * Files are read by ordo_client_new(); a file that does not load makes
     * every connect fail with ORDO_ETLS and the reason. */
    int tls;                     /* nonzero: speak TLS */
    const char *tls_ca_file;     /* PEM CA(s) to verify the server; NULL: the system's store */
    const char *tls_cert_file;   /* PEM client certificate (tls-auth-clients); NULL: none */
    const char *tls_key_file;    /* its private key (PEM, unencrypted) */
    const char *tls_server_name; /* the name to verify and send as SNI; NULL: the host connected to */
    int tls_no_verify;           /* nonzero: accept any server certificate (tests only: no protection) */
    const char *user;            /* the user password is for (ACL SETUSER); NULL: "default" */
} ordo_client_opts_t;

/* Reply types: RESP2 and RESP3. Maps hold 2*n elements, key then value. */
typedef enum {
    ORDO_REPLY_STRING = 1, /* bulk string, verbatim string (format stripped) */
    ORDO_REPLY_STATUS,     /* +simple string */
    ORDO_REPLY_ERROR,      /* -error or !blob error */
    ORDO_REPLY_INTEGER,    /* :n, also #t/#f as 1/0 */
    ORDO_REPLY_DOUBLE,     /* ,d (dbl; str holds the text) */
    ORDO_REPLY_BIGNUM,     /* (n as text */
    ORDO_REPLY_NIL,        /* _ or $-1 or *-1 */
    ORDO_REPLY_ARRAY,      /* * and ~ (set) */
    ORDO_REPLY_MAP,        /* % */
    ORDO_REPLY_PUSH,       /* > */
} ordo_reply_type_t;

typedef struct ordo_reply {
    ordo_reply_type_t type;
    int64_t integer;
    double dbl;
    char *str;                  /* NUL-terminated, len bytes; NULL for aggregates */
    size_t len;
    struct ordo_reply **elem;   /* aggregates: n children */
    size_t n;
} ordo_reply_t;

void ordo_reply_free(ordo_reply_t *r);

/* ordo_client_new() -- a client; does not connect (the first call does).
 * ORDO_OK with *out, or ORDO_ENOMEM. opts may be NULL (all defaults). */
int ordo_client_new(ordo_client_t **out, const ordo_client_opts_t *opts);
/* (ORDO_EINVAL too: an address of opts.addrs, opts.host or opts.port that
 * does not parse -- a port outside 1..65535, a host of 256 bytes or more,
 * an empty entry, more than ORDO_CLIENT_ADDRS_MAX addresses.) */
/* ordo_client_free() -- close and free; NULL is fine. */
void ordo_client_free(ordo_client_t *c);

/* ordo_client_connect() -- connect now (with retries within the reconnect
 * budget). ORDO_OK, ORDO_ECONN, ORDO_EAUTH, ORDO_ETIMEDOUT. */
int ordo_client_connect(ordo_client_t *c);
/* ordo_client_close() -- drop the connection; the next call reconnects. */
void ordo_client_close(ordo_client_t *c);
/* Number of successful connects so far: changes on every reconnect. */
uint64_t ordo_client_epoch(const ordo_client_t *c);
/* 3 or 2 while connected; 0 when not connected. */
int ordo_client_proto(const ordo_client_t *c);
/* Text of the last error on this client ("" if none); valid until the next
 * call on the client. */
const char *ordo_client_errstr(const ordo_client_t *c);
/* Revision carried by the last -CONFLICT or -COMPACTED (else 0). */
int64_t ordo_client_err_rev(const ordo_client_t *c);
/* Host and port the client talks to now (after -NOTLEADER redirects). */
const char *ordo_client_host(const ordo_client_t *c);
int ordo_client_port(const ordo_client_t *c);
/* ordo_client_addrs() -- every address the client knows, configured then
 * learned from `CLUSTER MEMBERS`, as "h1:p1,h2:p2" into out (cap bytes,
 * NUL-terminated, truncated if need be). */
void ordo_client_addrs(const ordo_client_t *c, char *out, size_t cap);

/* ordo_client_command() -- send one command and wait for its reply:
 * argc arguments, argv[i] of lens[i] bytes (lens NULL: strlen each).
 * timeout_ms: 0 means opts.call_timeout_ms; ORDO_WAIT_FOREVER waits without
 * limit (for blocking commands). On ORDO_OK, *reply is the reply, which may
 * be an ORDO_REPLY_ERROR (error replies are replies: the typed calls map
 * them). -NOTLEADER is followed as described above. Errors: ORDO_ECONN,
 * ORDO_ETIMEDOUT, ORDO_EPROTO, ORDO_ENOMEM, ORDO_EAUTH (at reconnect). Any
 * replies still expected from earlier ordo_client_append()s are read and
 * discarded first. */
int ordo_client_command(ordo_client_t *c, int timeout_ms, int argc,
                        const char *const *argv, const size_t *lens,
                        ordo_reply_t **reply);
/* ordo_client_command_strs() -- as ordo_client_command() for text
 * arguments: the variable arguments are NUL-terminated strings, one per
 * command argument, ended by a NULL (nothing is formatted or split:
 * ordo_client_command_strs(c, 0, &r, "GET", key, NULL)). At most 64
 * arguments (ORDO_EINVAL beyond). */
int ordo_client_command_strs(ordo_client_t *c, int timeout_ms, ordo_reply_t **reply, ...)
#if defined(__GNUC__)
    __attribute__((sentinel))
#endif
    ;

/* Pipelining. ordo_client_append() queues a command (connecting first if
 * needed, so ORDO_ECONN is possible); ordo_client_get_reply() sends all
 * queued commands and returns the oldest outstanding reply. A -NOTLEADER
 * reply is returned to the caller (that command did not run), and the
 * first append once the pipeline's replies are read goes to the member it
 * named (or the next member): a pipeline is never resent to a follower. ordo_client_pending()
 * is the number of replies still expected. */
int ordo_client_append(ordo_client_t *c, int argc, const char *const *argv,
                       const size_t *lens);
int ordo_client_get_reply(ordo_client_t *c, int timeout_ms, ordo_reply_t **reply);
size_t ordo_client_pending(const ordo_client_t *c);

/* ordo_client_next_push() -- the oldest push frame received (RESP3), reading
 * the socket for at most timeout_ms (0: only what is buffered or readable
 * now; ORDO_WAIT_FOREVER: no limit) if none is queued. Must not be called
 * while replies are pending. ORDO_OK with *push owned by the caller,
 * ORDO_ETIMEDOUT, ORDO_ECONN (the connection broke: pushes stopped). */
int ordo_client_next_push(ordo_client_t *c, int timeout_ms, ordo_reply_t **push);

/* ordo_client_reply_error() -- map an error reply to a code (as listed
 * above) and remember its text and revision; ORDO_OK for any other reply. */
int ordo_client_reply_error(ordo_client_t *c, const ordo_reply_t *r);

/* ======================================================================
 * Typed calls. Each sends one command with ordo_client_command() and maps
 * the reply.
 *
 * Safe retries: the calls whose command the server recognises when it
 * comes twice -- ordo_q_push() with an id, ordo_q_ack(), ordo_q_nack(),
 * ordo_q_extend() (guarded by the delivery token), ordo_lock_extend(),
 * ordo_elect_keepalive() (guarded by the token or term), and
 * ordo_kv_put() with a fence -- are sent again, within the call's
 * deadline, when the connection breaks with them outstanding (a member
 * killed, a leader change), instead of returning ORDO_ECONN. A repeat
 * whose first attempt had applied answers as the server answers a repeat:
 * the push's first id; for an ack or nack, ORDO_ESTALE (the token was
 * spent by the first). Every other call returns ORDO_ECONN: it may or may
 * not have run. Keys, values, payloads are binary-safe (pointer + length);
 * queue, lock and election names are NUL-terminated strings.
 * ====================================================================== */

/* ---- versioned keys ---------------------------------------------------- */

typedef struct ordo_kv {
    char *key;  size_t key_len;     /* NUL-terminated copies */
    char *value; size_t value_len;
    int64_t create_rev, mod_rev, version, lease;
} ordo_kv_t;

void ordo_kv_clear(ordo_kv_t *kv); /* frees key and value, zeroes the struct */

/* Conditions of a put or delete. ifrev < 0: none; 0: only if absent;
 * n: only if the key's mod revision is n. lease 0: none. fence_lock NULL:
 * no fencing. */
typedef struct ordo_kv_cond {
    int64_t ifrev;
    int64_t lease;
    const char *fence_lock;
    int64_t fence_token;
} ordo_kv_cond_t;

/* ordo_kv_get() -- ORDO_OK with *out filled, ORDO_ENOTFOUND. rev > 0: as of
 * that revision (ORDO_ECOMPACTED if gone). */
int ordo_kv_get(ordo_client_t *c, const void *key, size_t key_len, int64_t rev,
                ordo_kv_t *out);
/* ordo_kv_put() -- *rev_out (may be NULL) = the new revision. cond may be
 * NULL. ORDO_ECONFLICT (ordo_client_err_rev: the current mod rev, 0 if
 * absent), ORDO_ENOTHOLDER. */
int ordo_kv_put(ordo_client_t *c, const void *key, size_t key_len,
                const void *val, size_t val_len, const ordo_kv_cond_t *cond,
                int64_t *rev_out);
/* ordo_kv_del() -- *rev_out = the deletion's revision, 0 if no key. */
int ordo_kv_del(ordo_client_t *c, const void *key, size_t key_len,
                const ordo_kv_cond_t *cond, int64_t *rev_out);
/* ordo_kv_cas() -- put only if the mod revision is expect_rev (0: absent).
 * ORDO_OK (*rev_out new revision) or ORDO_ECONFLICT (*rev_out = the current
 * revision, 0 if absent). */
int ordo_kv_cas(ordo_client_t *c, const void *key, size_t key_len,
                const void *val, size_t val_len, int64_t expect_rev,
                int64_t *rev_out);
/* ordo_kv_rev() -- [current, oldest retained]. */
int ordo_kv_rev(ordo_client_t *c, int64_t *current, int64_t *oldest);

/* ---- watches ----------------------------------------------------------- */

typedef enum {
    ORDO_WATCH_PUT = 1,
    ORDO_WATCH_DEL,
    ORDO_WATCH_SYNCED,    /* the snapshot ended at rev */
    ORDO_WATCH_PROGRESS,  /* nothing watched changed up to rev */
    ORDO_WATCH_CANCELLED, /* the server stopped the watch; rev = last delivered */
    ORDO_WATCH_RESET,     /* (ordo_watch_run only) the history after the resume
                             point is gone: a snapshot of the current keys
                             follows as PUT events, then SYNCED; rebuild state */
} ordo_watch_kind_t;

typedef struct ordo_watch_event {
    ordo_watch_kind_t kind;
    int64_t watch_id;
    int64_t rev;
    const char *key; size_t key_len;        /* put/del */
    const char *value; size_t value_len;    /* put; NULL for del */
    const char *reason;                     /* cancelled */
} ordo_watch_event_t;

#define ORDO_WATCH_PREFIX 1u   /* key is a prefix */
#define ORDO_WATCH_SNAPSHOT 2u /* start with the current keys (ignores from_rev) */
#define ORDO_WATCH_RESYNC 4u   /* with from_rev: snapshot if compacted */

/* ordo_kv_watch() -- start a watch on this connection (RESP3 only:
 * ORDO_EINVAL over RESP2). from_rev >= 0: every change after from_rev
 * (FROM); < 0: from the next change on. SNAPSHOT ignores from_rev.
 * *watch_id is the server's id. Events then arrive as pushes. */
int ordo_kv_watch(ordo_client_t *c, const void *key, size_t key_len,
                  unsigned flags, int64_t from_rev, int64_t *watch_id);
/* ordo_watch_event_parse() -- decode a push into *ev, whose strings point
 * into push (valid while push lives). ORDO_OK, or ORDO_EPROTO for a push
 * that is not a watch event (such as an ELECT.OBSERVE "leader" push). */
int ordo_watch_event_parse(const ordo_reply_t *push, ordo_watch_event_t *ev);

/* ---- queues ------------------------------------------------------------- */

typedef struct ordo_push_opts {
    const char *id; size_t id_len;   /* dedup id; NULL: none */
    int coalesce;
    int64_t delay_ms;                /* 0: none */
} ordo_push_opts_t;

typedef struct ordo_msg {
    int64_t id;
    char *key; size_t key_len;
    char *payload; size_t payload_len;
    int64_t attempt;
    int64_t token;
} ordo_msg_t;

void ordo_msgs_free(ordo_msg_t *msgs, size_t n);

/* ordo_q_push() -- *id_out = the message id. ORDO_EBUSY (-BUSY),
 * ORDO_ELIMIT, ORDO_ETIMEDOUT. */
int ordo_q_push(ordo_client_t *c, const char *queue, const void *key, size_t key_len,
                const void *payload, size_t payload_len, const ordo_push_opts_t *o,
                int64_t *id_out);
/* ordo_q_pull() -- up to count messages; block_ms < 0: do not block; 0:
 * block without limit; lease_ms 0: the queue's. *msgs (malloc'd, free with
 * ordo_msgs_free) and *n; *n == 0 on timeout (ORDO_OK). */
int ordo_q_pull(ordo_client_t *c, const char *queue, int count, int64_t block_ms,
                int64_t lease_ms, ordo_msg_t **msgs, size_t *n);
/* ordo_q_ack() / nack() / extend() -- ORDO_OK, or ORDO_ESTALE when token is
 * no longer the message's current delivery. */
int ordo_q_ack(ordo_client_t *c, const char *queue, int64_t id, int64_t token,
               const void *result, size_t result_len, int with_result);
int ordo_q_nack(ordo_client_t *c, const char *queue, int64_t id, int64_t token,
                int64_t delay_ms);
int ordo_q_extend(ordo_client_t *c, const char *queue, int64_t id, int64_t token,
                  int64_t ms);
/* ordo_q_pause() -- Q.PAUSE: stop deliveries of key (key_len bytes; NULL:
 * the whole queue) for for_ms (0: until ordo_q_resume()). Messages keep
 * their order and place; a delivery in flight finishes. *changed (may be
 * NULL) is 1, or 0 if it was paused so already. ordo_q_resume() --
 * Q.RESUME: *changed 1, or 0 if it was not paused. */
int ordo_q_pause(ordo_client_t *c, const char *queue, const void *key, size_t key_len, int64_t for_ms,
                 int *changed);
int ordo_q_resume(ordo_client_t *c, const char *queue, const void *key, size_t key_len, int *changed);
/* ordo_q_redrive() -- Q.REDRIVE: move dead letters back to queue, from
 * `from` (NULL: the queue's DEADLETTER queue): key's (key_len bytes), or
 * message id's (key NULL, id > 0), or every key's (key NULL, id 0; at most
 * a thousand keys a call: repeat until *moved is 0). Each key's keep
 * their order. *moved (may be NULL): how many moved. */
int ordo_q_redrive(ordo_client_t *c, const char *queue, const char *from, const void *key, size_t key_len,
                   int64_t id, int64_t *moved);
/* ordo_q_cancel() -- Q.CANCEL: remove waiting or delayed message id before
 * any delivery; its Q.CALL caller gets -CANCELLED (ORDO_ESERVER, the text
 * in ordo_client_errstr()). ORDO_ENOTFOUND if no message waits with it (in
 * flight, done, unknown). */
int ordo_q_cancel(ordo_client_t *c, const char *queue, int64_t id);
/* ordo_q_schedule_add() -- Q.SCHEDULE ADD: schedule `name` pushes
 * (key, payload) into queue on every tick, replacing a schedule of that
 * name. Ticks: every every_ms from start_ms (0: now), or, with cron, a
 * five-field cron expression in UTC. skip_missed: ticks missed while the
 * server was down push nothing (else they push once). ORDO_ESERVER (the
 * reason in ordo_client_errstr()) for a spec the server refuses.
 * ordo_q_schedule_del() -- ORDO_OK, or ORDO_ENOTFOUND. */
typedef struct ordo_schedule_opts {
    int64_t every_ms;
    int64_t start_ms;
    const char *cron;         /* NULL: every_ms */
    bool skip_missed;
} ordo_schedule_opts_t;
int ordo_q_schedule_add(ordo_client_t *c, const char *name, const char *queue, const void *key, size_t key_len,
                        const void *payload, size_t payload_len, const ordo_schedule_opts_t *o);
int ordo_q_schedule_del(ordo_client_t *c, const char *name);
/* ordo_q_call() -- push and wait for the consumer's result. timeout_ms 0:
 * no limit. *result malloc'd (free()); NULL with *result_len 0 if the
 * consumer acked without one. ORDO_ETIMEDOUT, ORDO_EDEADLETTER, ORDO_EBUSY. */
int ordo_q_call(ordo_client_t *c, const char *queue, const void *key, size_t key_len,
                const void *payload, size_t payload_len, int64_t timeout_ms,
                const char *dedup_id, char **result, size_t *result_len);

/* ---- leases, locks, elections ----------------------------------------- */

int ordo_lease_grant(ordo_client_t *c, int64_t ttl_ms, int64_t *lease_id);
/* ORDO_ENOTFOUND if the lease expired. */
int ordo_lease_keepalive(ordo_client_t *c, int64_t lease_id, int64_t *remaining_ms);
int ordo_lease_revoke(ordo_client_t *c, int64_t lease_id);

/* ordo_lock_acquire() -- wait_ms 0: do not wait; ORDO_WAIT_FOREVER is not
 * allowed (pass a bound). ORDO_OK with *token, ORDO_ETIMEDOUT if it did not
 * get the lock in time. lease 0: none. */
int ordo_lock_acquire(ordo_client_t *c, const char *name, int64_t ttl_ms,
                      int64_t wait_ms, int64_t lease, int64_t *token);
int ordo_lock_release(ordo_client_t *c, const char *name, int64_t token); /* ORDO_ESTALE */
int ordo_lock_extend(ordo_client_t *c, const char *name, int64_t token, int64_t ttl_ms);
int ordo_lock_check(ordo_client_t *c, const char *name, int64_t token); /* OK or ESTALE */

/* ordo_elect_campaign() -- wait_ms < 0: wait without limit. ORDO_OK with
 * *term and, if handover != NULL, the hand-over value (*handover malloc'd,
 * NULL if none; free()): the value the previous leader resigned with, or,
 * if its term ended by expiry, the last value it proclaimed (the state a
 * successor resumes from either way). *handed_over (output, may be NULL)
 * tells them apart: 1 when the previous leader resigned with the value, 0
 * when its term ended by expiry (it died or stalled: the value is its last
 * proclamation) or there is no value. ORDO_ETIMEDOUT if WAIT ran out. */
int ordo_elect_campaign(ordo_client_t *c, const char *name, const void *value,
                        size_t value_len, int64_t ttl_ms, int64_t wait_ms,
                        int64_t *term, char **handover, size_t *handover_len,
                        int *handed_over);
/* ORDO_ENOTHOLDER once the term is lost. */
int ordo_elect_keepalive(ordo_client_t *c, const char *name, int64_t term,
                         int64_t *remaining_ms);
/* value NULL: resign without a hand-over value. ORDO_ESTALE if term does
 * not lead. */
int ordo_elect_resign(ordo_client_t *c, const char *name, int64_t term,
                      const void *value, size_t value_len);
int ordo_elect_proclaim(ordo_client_t *c, const char *name, int64_t term,
                        const void *value, size_t value_len);
/* ordo_elect_leader() -- ORDO_OK with *term (and *value malloc'd, may be
 * NULL), ORDO_ENOTFOUND if vacant. */
int ordo_elect_leader(ordo_client_t *c, const char *name, int64_t *term,
                      char **value, size_t *value_len);

/* ======================================================================
 * Transactions: MULTI ... EXEC as one pipeline, all or nothing.
 *
 * An ordo_txn_t is a list of commands built by the caller and sent by
 * ordo_txn_exec() as `[WATCH keys...] MULTI <commands> EXEC` in one write.
 * The server applies every write of the transaction in one log record, or
 * none of them (docs/protocol.md, "Transactions").
 *
 * Ownership and lifetimes: the caller owns the builder (ordo_txn_new /
 * ordo_txn_free, as "Objects" above). Every adder copies its arguments, so they may go away
 * when it returns. ordo_txn_exec() does not consume the builder: it can be
 * executed again (after a WATCH conflict, say) or emptied with
 * ordo_txn_reset() and reused.
 * Threads: a builder is not thread-safe; it is independent of any client
 * until ordo_txn_exec(), which follows the client's rule (one thread at a
 * time).
 * Adders return ORDO_OK, ORDO_ENOMEM, or ORDO_EINVAL (argc <= 0, a NULL
 * name). Commands are numbered from 1 in the order added: that is the
 * index in failed_index and, minus one, in the reply array.
 * ====================================================================== */
typedef struct ordo_txn ordo_txn_t;

/* ORDO_OK with *out (an empty builder), or ORDO_ENOMEM. */
int ordo_txn_new(ordo_txn_t **out);
void ordo_txn_free(ordo_txn_t *t);          /* NULL is fine */
void ordo_txn_reset(ordo_txn_t *t);         /* drop every command, keep the builder */
size_t ordo_txn_count(const ordo_txn_t *t); /* commands added */

/* ordo_txn_add() -- any command: argc arguments, argv[i] of lens[i] bytes
 * (lens NULL: strlen each). It is checked by the server, at queueing. */
int ordo_txn_add(ordo_txn_t *t, int argc, const char *const *argv, const size_t *lens);
/* KV.PUT key value [IFREV n] [LEASE id] [FENCE lock token]; cond may be
 * NULL (see ordo_kv_cond_t). A failed IFREV or FENCE aborts the whole
 * transaction (ORDO_ECONFLICT with this command's index). */
int ordo_txn_kv_put(ordo_txn_t *t, const void *key, size_t key_len, const void *val,
                    size_t val_len, const ordo_kv_cond_t *cond);
/* KV.DEL key [IFREV n] [FENCE lock token]; cond may be NULL. */
int ordo_txn_kv_del(ordo_txn_t *t, const void *key, size_t key_len, const ordo_kv_cond_t *cond);
/* SET key value (no NX/XX/expiry: use ordo_txn_add for those). */
int ordo_txn_set(ordo_txn_t *t, const void *key, size_t key_len, const void *val, size_t val_len);
/* INCRBY key by. A non-integer value aborts the transaction. */
int ordo_txn_incrby(ordo_txn_t *t, const void *key, size_t key_len, int64_t by);
/* Q.PUSH queue key payload [ID id] [COALESCE] [DELAY ms]; o may be NULL. A
 * queue without room aborts the transaction (it never waits). */
int ordo_txn_q_push(ordo_txn_t *t, const char *queue, const void *key, size_t key_len,
                    const void *payload, size_t payload_len, const ordo_push_opts_t *o);
/* Q.ACK queue id token [RESULT result] (with_result nonzero: even an empty
 * result). A token that is no longer the message's current delivery aborts
 * the transaction: that is the exactly-once guard. */
int ordo_txn_q_ack(ordo_txn_t *t, const char *queue, int64_t id, int64_t token,
                   const void *result, size_t result_len, int with_result);

/* ordo_txn_exec() -- run the transaction: sends `WATCH k...` (if nwatch >
 * 0; watch_lens NULL: strlen each), MULTI, every command, EXEC as one
 * pipeline, and reads all their replies (each within the client's call
 * timeout). replies and failed_index may be NULL; *replies is set to NULL
 * and *failed_index to 0 unless said otherwise.
 *   ORDO_OK: applied. *replies is EXEC's array (caller frees it with
 *     ordo_reply_free), elem[i] the reply of command i+1; it may hold
 *     error replies or nils of commands that applied as such (a SET NX
 *     that did not hold, see docs/protocol.md).
 *   ORDO_ECONFLICT, *failed_index 0: a watched key changed (EXEC answered
 *     nil); nothing applied. Read again and retry.
 *   ORDO_ECONFLICT, *failed_index i: command i's guard failed (`-CONFLICT
 *     i reason`: IFREV, FENCE, a stale token in Q.ACK, a queue without
 *     room, ...); nothing applied. ordo_client_errstr() has the server's
 *     line ("CONFLICT 2 stale delivery token ..."); err_rev is 0.
 *   The mapped code of a refused command (ORDO_ESERVER for -ERR, ORDO_ELIMIT,
 *     ...), *failed_index its index: the server refused to queue it (unknown,
 *     arity, syntax, a blocking form, a limit) and EXEC answered -EXECABORT;
 *     nothing applied; ordo_client_errstr() has the refusal.
 *   Any other error reply to WATCH, MULTI or EXEC: its mapped code (for
 *     instance ORDO_ENOTLEADER: -NOTLEADER is not followed inside a
 *     transaction; ORDO_EREADONLY); nothing applied.
 *   ORDO_ECONN, ORDO_ETIMEDOUT: the connection broke or a reply was late
 *     (the connection is closed): the transaction may or may not have been
 *     applied, as one piece. Make the retry safe with a guard (an IFREV, a
 *     delivery token), as the consumer runner does.
 *   ORDO_EINVAL (nwatch < 0, or watch_keys NULL with nwatch > 0),
 *   ORDO_ENOMEM, ORDO_EPROTO (EXEC answered something else).
 * Replies still expected from earlier ordo_client_append()s are read and
 * discarded first. WATCHes end with the EXEC, as on the server. */
int ordo_txn_exec(ordo_client_t *c, ordo_txn_t *t, int nwatch, const char *const *watch_keys,
                  const size_t *watch_lens, ordo_reply_t **replies, size_t *failed_index);

/* ======================================================================
 * The watcher: a callback per event, resuming after reconnects.
 *
 * ordo_watch_run() runs in the caller's thread until the callback returns
 * nonzero, *stop becomes true (checked at least every ORDO_WATCH_POLL_MS;
 * stop may be NULL), or an error that reconnecting cannot cure: a refused
 * password (ORDO_EAUTH), a watch the server refuses (ORDO_ESERVER: a
 * revision in the future, a bad argument), a server that breaks the
 * protocol or the client's bounds (ORDO_EPROTO), ORDO_EINVAL, ORDO_ENOMEM.
 * It owns its connection. on_error (may be NULL) is told every error, with
 * its text (empty when the server or connection gave none: ordo_strerror()
 * names the code): final 0 for one that is retried (a lost server), 1 for
 * the one that ends the run (the return value).
 *   - Start: from_set (or from_rev > 0): every change after from_rev;
 *     snapshot: the current keys first; else: changes after the current
 *     revision (read
 *     with KV.REV before the watch starts, so a reconnect before the first
 *     event still resumes from there).
 *   - Resume point: the revision of the last PUT/DEL delivered, moved by
 *     PROGRESS and SYNCED events. After a disconnect or a watch-cancelled
 *     push it watches again FROM the resume point, so the callback sees
 *     every change once, in revision order, with no gap: events at or below
 *     the resume point are dropped (outside a snapshot).
 *   - Compaction: if the history after the resume point is gone, the
 *     callback gets ORDO_WATCH_RESET, then the snapshot, then SYNCED.
 *   - Connection loss is retried forever (with the client's backoff) until
 *     stopped: a watcher outlives server restarts.
 * Event strings are valid during the callback only. Returns ORDO_OK when
 * stopped (callback or *stop), or the error. */
#define ORDO_WATCH_POLL_MS 100

typedef int (*ordo_watch_fn)(void *arg, const ordo_watch_event_t *ev);
/* An error of the watch: its code, its text (valid during the call), and
 * whether it ends the run. Called on the watcher's thread. */
typedef void (*ordo_watch_error_fn)(void *arg, int err, const char *text, int final);

typedef struct ordo_watch_opts {
    ordo_client_opts_t conn;
    const void *key; size_t key_len;
    int prefix;
    int64_t from_rev;
    int from_set;               /* from_rev counts even when 0 */
    int snapshot;
    ordo_watch_fn fn;
    void *arg;
    ordo_watch_error_fn on_error; /* may be NULL; gets arg too */
} ordo_watch_opts_t;

int ordo_watch_run(const ordo_watch_opts_t *o, const atomic_bool *stop);

/* ======================================================================
 * The consumer runner: N workers, each with its own connection, pull one
 * message at a time (Q.PULL BLOCK), run the handler, and ack with its
 * result (handler returned 0) or nack with nack_delay_ms (nonzero); an
 * ack (or the exactly-once EXEC holding it) goes out in one write with
 * the worker's next pull, so a message costs one round trip. A
 * keeper thread with its own connection extends every in-flight
 * delivery's lease each lease_ms/3 while its handler runs, so a slow
 * handler keeps its message; a handler that stalls past what the keeper
 * can reach (the process is stopped or killed) loses the lease and the
 * message is delivered again, to anyone.
 *
 * Handler: called on a worker thread, concurrently with other workers'
 * calls (at most `concurrency` at once; at most one per key, by the
 * queue's promise). msg and its strings are valid during the call only. To
 * ack with a result, set *result to a malloc'd buffer (the runner frees
 * it) and *result_len; leave *result NULL to ack without one.
 *
 * Stop: ordo_consumer_stop() (any thread, also from a handler) asks every
 * worker to finish the message it is handling (ack or nack as usual) and
 * pull no more; ordo_consumer_wait() waits for that, within
 * pull_block_ms plus the longest handler; ordo_consumer_free() does both
 * (if not done yet) and frees the runner.
 * ======================================================================= */
#define ORDO_CONSUMER_LEASE_MS_DEFAULT 30000
#define ORDO_CONSUMER_PULL_BLOCK_MS_DEFAULT 1000  /* stop latency when idle */
#define ORDO_CONSUMER_NACK_DELAY_MS_DEFAULT 1000
#define ORDO_CONSUMER_CONCURRENCY_MAX 1024

typedef int (*ordo_handler_fn)(void *arg, const ordo_msg_t *msg, char **result,
                               size_t *result_len);

/* A handler (either kind) that learns its key's downstream wants it to
 * wait (an HTTP 429 or 503 with Retry-After for one tenant) returns
 * ORDO_HANDLER_PAUSE(ms), 1 <= ms <= ORDO_HANDLER_PAUSE_MS_MAX: the runner
 * pauses the message's key for ms (Q.PAUSE KEY FOR: the key's later
 * messages wait too, other keys go on) and then nacks the message, which
 * stays its key's head. Every other nonzero value nacks as before; the
 * values ORDO_HANDLER_PAUSE() makes are below INT_MIN + 2^30, which no
 * ordinary error return reaches. */
#define ORDO_HANDLER_PAUSE_MS_MAX ((1 << 30) - 1)
#define ORDO_HANDLER_PAUSE(ms) (INT_MIN + (int)(ms))

/* Exactly-once handler (opts.txn_handler, instead of handler): adds the
 * message's state writes to txn (owned by the runner, empty on entry, valid
 * during the call only) and may read through c, the worker's connection
 * (KV.GET for an IFREV; do not leave replies pending on it). Return 0: the
 * runner appends `Q.ACK queue id token [RESULT *result]` and executes the
 * transaction, so the writes and the ack apply together or not at all;
 * nonzero: nothing is executed and the message is nacked. *result as for
 * ordo_handler_fn. */
typedef int (*ordo_txn_handler_fn)(void *arg, ordo_client_t *c, const ordo_msg_t *msg,
                                   ordo_txn_t *txn, char **result, size_t *result_len);

typedef struct ordo_consumer_opts {
    ordo_client_opts_t conn;
    const char *queue;
    int concurrency;          /* 0: 1 */
    int64_t lease_ms;         /* 0: default */
    int64_t pull_block_ms;    /* 0: default */
    int64_t nack_delay_ms;    /* 0: default; < 0: nack without delay (a queue with a retry
                                 policy, Q.CONFIG BACKOFF / MAXAGE, then decides the delay) */
    ordo_handler_fn handler;
    void *arg;
    /* Exactly-once (set this or handler, not both; arg is passed to it):
     * the handler's writes and the ack are one transaction. Its outcome:
     *   applied: counted as acked;
     *   the ack's token was stale (the lease ran out and the message went
     *     to another consumer, which does the work): nothing applied,
     *     counted as stale (ordo_consumer_stats_t.stale), not retried;
     *   another guard of the handler's writes failed (an IFREV), or a
     *     command was refused: nothing applied, the message is nacked
     *     (nack_delay_ms) so the handler runs again on fresh reads;
     *   the connection broke or the leader changed: the same transaction
     *     is sent again until answered (or the lease would have run out);
     *     if the first had applied, the repeat's token is stale and
     *     nothing applies twice.
     * A crash before EXEC leaves nothing applied. See docs/client.md,
     * "Exactly-once". */
    ordo_txn_handler_fn txn_handler;
} ordo_consumer_opts_t;

typedef struct ordo_consumer ordo_consumer_t;

/* Counts of a runner's outcomes. acked / nacked: acks and nacks the server
 * accepted (a handler's ORDO_HANDLER_PAUSE() nack counts as nacked). stale: acks (plain or in a transaction) the server refused
 * because the delivery was no longer current. */
typedef struct ordo_consumer_stats {
    uint64_t acked, nacked, stale;
} ordo_consumer_stats_t;

/* ordo_consumer_new() -- start the workers and the keeper. ORDO_OK with
 * *out, ORDO_EINVAL, ORDO_ENOMEM, ORDO_ESYS. Connections are made by the
 * workers (and retried), so an unreachable server is not an error here. */
int ordo_consumer_new(ordo_consumer_t **out, const ordo_consumer_opts_t *o);
void ordo_consumer_stop(ordo_consumer_t *c);
/* ordo_consumer_wait() -- wait for the workers to end (they end only after
 * ordo_consumer_stop(), or when the server refuses the password) and stop
 * the keeper. Not from a handler. Calling it again returns at once. */
void ordo_consumer_wait(ordo_consumer_t *c);
/* ordo_consumer_stats() -- the counts so far (any thread); final once
 * ordo_consumer_wait() has returned. */
void ordo_consumer_stats(const ordo_consumer_t *c, ordo_consumer_stats_t *out);
/* ordo_consumer_free() -- stop, wait, free; NULL is fine. Not from a
 * handler. */
void ordo_consumer_free(ordo_consumer_t *c);

/* ======================================================================
 * The producer: messages buffered in memory, sent in batches, reported one
 * by one, never lost or duplicated by retries or a restart.
 *
 * ordo_producer_send() accepts a message into a bounded buffer and returns;
 * a sender thread (owning one connection) sends what is buffered as a
 * pipeline of Q.PUSH commands once linger_ms has passed since the oldest
 * unsent message was accepted or batch_max messages are waiting, whichever
 * comes first. A batch is one write() and one read: of a single Q.PUSH,
 * or, for more than one message, of a transaction (MULTI, the pushes,
 * EXEC), which the server applies as one record, whole or not at all. (A
 * plain pipeline of pushes could be split by a leader change: a member
 * that refused the first push as a follower could apply later ones as the
 * new leader, putting the refused push, resent, behind later pushes of its
 * key.) A batch also stays under 4 MiB of arguments; a transaction the
 * server refuses because of one push is sent again as the pushes before
 * it, down to that push alone.
 *
 * Idempotence and order: every message gets a sequence number and is
 * pushed with `ID <producer id>:<seq>`. A batch cut by a lost connection, a
 * timeout or a refusal is sent again from its first unreported message, in
 * the same order and with the same ids: the pushes the server had already
 * applied are recognised by their ids (inside the queue's DEDUP window,
 * 60 s by default) and answer their first id without enqueuing anything.
 * Batches are applied whole and in order, so per-key order holds across
 * retries, reconnects and leader changes; a full queue refuses a whole
 * batch (-CONFLICT), and the producer then sends the pushes that fit.
 *
 * Delivery reports: report() is called once per accepted message, in
 * acceptance order, on the sender thread, with the message id the server
 * gave it (err ORDO_OK) or a final error (err < 0): ORDO_ELIMIT or
 * ORDO_ESERVER for a push the server refuses for good (too large, bad
 * name). Transient failures (no connection, -BUSY, -READONLY, -TIMEOUT,
 * -NOTLEADER) are retried with backoff, forever, until close.
 *
 * Spill file (spill_path set): each accepted message is appended to the
 * file before ordo_producer_send() returns (a write(), so a crash of the
 * process loses nothing accepted), and fdatasync()ed every
 * spill_sync_every_msgs messages or spill_sync_every_ms ms, whichever
 * comes first (the window a power loss may lose). Reported messages are
 * marked in the file. A producer opened on an existing spill file takes its
 * producer id and next sequence number from it and sends its unreported
 * messages first, with their old ids: nothing accepted is lost and nothing
 * is duplicated, provided it restarts within the DEDUP window. Their
 * reports come with `recovered` set and opaque NULL. Only one producer may
 * use a spill file at a time (an flock() makes sure: ORDO_EBUSY). The file
 * is rewritten to its unreported messages when it passes spill_max_bytes.
 *
 * Threads: send/flush may be called from any threads at once; close and
 * free after they return. report() must not call ordo_producer_send() with a
 * timeout other than 0, nor flush or close.
 * ====================================================================== */
#define ORDO_PRODUCER_LINGER_MS_DEFAULT 5        /* as librdkafka's linger.ms */
#define ORDO_PRODUCER_BATCH_MAX_DEFAULT 1000     /* pushes per pipeline */
#define ORDO_PRODUCER_BUFFER_MAX_DEFAULT 100000  /* accepted, unreported messages */
#define ORDO_PRODUCER_SPILL_SYNC_MS_DEFAULT 100
#define ORDO_PRODUCER_SPILL_SYNC_MSGS_DEFAULT 1000
#define ORDO_PRODUCER_SPILL_MAX_BYTES_DEFAULT ((int64_t)64 * 1024 * 1024)
#define ORDO_PRODUCER_ID_MAX 64

typedef struct ordo_delivery {
    uint64_t seq;               /* the producer's sequence number */
    const char *key; size_t key_len;
    int64_t id;                 /* the message id (err == ORDO_OK) */
    int err;                    /* ORDO_OK or a final error */
    void *opaque;               /* as given to send (NULL if recovered) */
    int recovered;              /* accepted by an earlier run (spill file) */
} ordo_delivery_t;

typedef void (*ordo_report_fn)(void *arg, const ordo_delivery_t *d);

typedef struct ordo_producer_opts {
    ordo_client_opts_t conn;
    const char *queue;
    int linger_ms;              /* 0: default; < 0: send at once */
    int batch_max;              /* 0: default */
    int buffer_max;             /* 0: default */
    const char *producer_id;    /* NULL: from the spill file, else random */
    const char *spill_path;     /* NULL: memory only */
    int spill_sync_every_ms;    /* 0: default */
    int spill_sync_every_msgs;  /* 0: default */
    int64_t spill_max_bytes;    /* 0: default */
    ordo_report_fn report;      /* may be NULL */
    void *report_arg;
} ordo_producer_opts_t;

typedef struct ordo_producer ordo_producer_t;

/* ORDO_OK with *out; ORDO_EINVAL; ORDO_ENOMEM; ORDO_ESYS (spill file or
 * thread); ORDO_EBUSY (spill file in use); ORDO_EPROTO (spill file is not
 * one, or another queue's). Recovered messages are in the buffer on
 * return (they count against buffer_max). */
int ordo_producer_new(ordo_producer_t **out, const ordo_producer_opts_t *o);
/* ordo_producer_send() -- accept a message. timeout_ms: ORDO_WAIT_FOREVER
 * blocks while the buffer is full, 0 fails at once (ORDO_EFULL), n waits
 * at most n ms (ORDO_ETIMEDOUT). *seq (may be NULL): its sequence number.
 * ORDO_ESTOPPED after close began; ORDO_ESYS if the spill write failed
 * (the message was not accepted). */
int ordo_producer_send(ordo_producer_t *p, const void *key, size_t key_len, const void *payload,
                       size_t payload_len, void *opaque, int timeout_ms, uint64_t *seq);
/* ordo_producer_flush() -- wait until every message accepted before the
 * call is reported. ORDO_OK, ORDO_ETIMEDOUT, or ORDO_ESTOPPED (closed with
 * messages unreported). */
int ordo_producer_flush(ordo_producer_t *p, int timeout_ms);
/* The sequence number the next accepted message will get (after a
 * recovery: one past the last message the spill file holds), so an
 * application can resume its own numbering from the file. */
uint64_t ordo_producer_next_seq(ordo_producer_t *p);
/* Number of accepted, unreported messages. */
size_t ordo_producer_buffered(ordo_producer_t *p);
/* ordo_producer_close() -- flush for at most timeout_ms, then stop the
 * sender (sends fail with ORDO_ESTOPPED from then on). Messages still
 * unreported stay in the spill file (if any) for the next run; without one
 * they are lost, and the return value says how many (0 when all were
 * reported). The producer stays valid for queries until
 * ordo_producer_free(); closing again returns the same count at once. */
size_t ordo_producer_close(ordo_producer_t *p, int timeout_ms);
/* ordo_producer_free() -- close (timeout 0) if not closed yet, and free;
 * NULL is fine. */
void ordo_producer_free(ordo_producer_t *p);

/* ======================================================================
 * The leader career: campaign, inaugurate, execute(term) while leading,
 * hand over.
 *
 * ordo_career_run() runs in the caller's thread. It campaigns for
 * `election` (ELECT.CAMPAIGN with HANDOVER, waiting in slices so *stop is
 * seen), and once leading calls inaugurate(term, hand-over value of the
 * previous leader or NULL, handed_over), then execute(term) repeatedly.
 * handed_over is 1 when the previous leader resigned with the value (a
 * clean hand-over), 0 when its term ended by expiry -- it died or stalled,
 * and the value is only the last it proclaimed -- or there is none. A keeper thread
 * (own connection) sends ELECT.KEEPALIVE every ttl_ms/3. execute is never
 * called after the term is lost -- a keepalive refused, or no keepalive
 * accepted for ttl_ms counted from when it was sent (so the local deadline
 * comes before the server's). Use the term to fence writes downstream.
 *   - execute returns 0: called again; nonzero: the career ends: hand_over
 *     (may be NULL) gives the value for the next leader (malloc'd, freed
 *     here; NULL for none) and the leader resigns with it.
 *   - *stop set (stop may be NULL): the same clean hand-over after the
 *     current execute.
 *   - inaugurate returns nonzero: resign at once, without a value, and end.
 *   - term lost: lost(term) (may be NULL) is called and the career
 *     campaigns again.
 * The hand-over value is valid during inaugurate only. Returns ORDO_OK
 * when the career ended, or ORDO_EAUTH / ORDO_ENOMEM / ORDO_ESYS /
 * ORDO_ESERVER (an election error reply, such as a bad name).
 * ====================================================================== */
#define ORDO_CAREER_TTL_MS_DEFAULT 10000
#define ORDO_CAREER_CAMPAIGN_SLICE_MS 1000  /* how often a waiting campaign sees *stop */
#define ORDO_CAREER_RETRY_MS 100            /* pause after an unreachable server */

typedef struct ordo_career_opts {
    ordo_client_opts_t conn;
    const char *election;
    const void *value; size_t value_len;   /* the candidate's value */
    int64_t ttl_ms;                        /* 0: default */
    int (*inaugurate)(void *arg, int64_t term, const char *handover, size_t handover_len,
                      int handed_over);
    int (*execute)(void *arg, int64_t term);
    char *(*hand_over)(void *arg, int64_t term, size_t *len);
    void (*lost)(void *arg, int64_t term);
    void *arg;
} ordo_career_opts_t;

int ordo_career_run(const ordo_career_opts_t *o, const atomic_bool *stop);

/* ======================================================================
 * Held locks: LOCK.ACQUIRE with a bounded wait, then automatic LOCK.EXTEND
 * every ttl_ms/3 on a keeper thread until ordo_lock_holder_release().
 * ordo_lock_holder_valid() is 1 while the lock is surely held (same local
 * deadline rule as the career); check it before each protected act, and
 * pass ordo_lock_holder_token() as the fencing token (KV.PUT ... FENCE).
 * ordo_lock_holder_new(): ORDO_OK, ORDO_EINVAL, ORDO_ETIMEDOUT (not
 * acquired within wait_ms), or a connection error; conn may be NULL.
 * ordo_lock_holder_release() stops the keeper and releases: ORDO_OK,
 * ORDO_ESTALE if the lock had been lost (the work was unprotected), a
 * connection error, or ORDO_ESTOPPED if already released; the holder stays
 * valid (valid() is 0, token() unchanged) until ordo_lock_holder_free(),
 * which releases a lock still held (ignoring the outcome) and frees; NULL
 * is fine.
 * ====================================================================== */
typedef struct ordo_lock_holder ordo_lock_holder_t;

int ordo_lock_holder_new(ordo_lock_holder_t **out, const ordo_client_opts_t *conn, const char *name,
                         int64_t ttl_ms, int64_t wait_ms);
int64_t ordo_lock_holder_token(const ordo_lock_holder_t *h);
int ordo_lock_holder_valid(ordo_lock_holder_t *h);
int ordo_lock_holder_release(ordo_lock_holder_t *h);
void ordo_lock_holder_free(ordo_lock_holder_t *h);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_CLIENT_H */
