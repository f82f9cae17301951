/*
 * tls.h -- a TLS engine over memory, with OpenSSL 3: ciphertext in,
 * plaintext out, and the reverse. It owns no socket and no loop, so the
 * server's listeners (net/), the raft transport (log/) and the client
 * (client/) drive it each over their own I/O.
 *
 * Two objects. A context (ordo_tls_ctx_t) is what a side is configured
 * with: its certificate and key, the CA its peers are verified against,
 * whether a peer must show a certificate, the protocol versions and cipher
 * suites. It is built from files once and never changes; a reload builds a
 * new one and swaps it in (ordo_tls_ctx_reload), so a file that fails to
 * load leaves the old context serving. A session (ordo_tls_t) is one
 * connection's state; it holds its own reference to the context it was
 * made from, so freeing or replacing a context never disturbs a live
 * session.
 *
 * Driving a session. Bytes read from the peer go in with ordo_tls_feed();
 * ordo_tls_read() then returns the plaintext they carry, running the
 * handshake first while it is not done; ordo_tls_write() encrypts the
 * plaintext to send. Every call may leave ciphertext for the peer
 * (handshake messages, alerts, TLS 1.3 tickets, the encrypted writes):
 * after each one the caller takes ordo_tls_out_pending() bytes with
 * ordo_tls_out_take() and sends them. Nothing here blocks or waits.
 *
 * Errors. A failed call returns ORDO_TLS_ERR and the session is dead: the
 * caller sends what is pending (an alert, if any) and closes.
 * ordo_tls_error() says why in one line fit for a log ("certificate
 * verify failed: certificate has expired", "wrong version number").
 * Renegotiation is refused on both sides, so a peer cannot make a session
 * redo its handshake.
 *
 * Thread safety: a context may be shared by threads (OpenSSL reference
 * counts it); a session belongs to one thread at a time.
 */
#ifndef ORDO_TLS_H
#define ORDO_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"

typedef enum {
    ORDO_TLS_SERVER,
    ORDO_TLS_CLIENT,
} ordo_tls_role_t;

/* Whether a peer must present a certificate signed by the CA. A server
 * asks its clients; a client always verifies its server unless verify is
 * off. */
typedef enum {
    ORDO_TLS_AUTH_NO,       /* not asked for */
    ORDO_TLS_AUTH_OPTIONAL, /* asked for; if shown, it must verify */
    ORDO_TLS_AUTH_YES,      /* required and verified */
} ordo_tls_auth_t;

/* What a context is built from. Strings are read during ordo_tls_ctx_new()
 * only; NULL or "" leaves a field unset. */
typedef struct {
    ordo_tls_role_t role;
    const char *cert_file;   /* PEM chain; a server's is required, a client's optional */
    const char *key_file;    /* PEM private key of cert_file (unencrypted) */
    const char *ca_file;     /* PEM CA(s) peers are verified against; a client
                                without one uses the system's default store */
    ordo_tls_auth_t auth;    /* server: client certificates */
    bool no_verify;          /* client: accept any server (tests only) */
    const char *protocols;   /* "TLSv1.2 TLSv1.3" (the default): the versions allowed */
    const char *ciphers;     /* TLS 1.2 cipher list (OpenSSL syntax); unset: OpenSSL's */
    const char *ciphersuites;/* TLS 1.3 suites (OpenSSL syntax); unset: OpenSSL's */
} ordo_tls_config_t;

typedef struct ordo_tls_ctx_s ordo_tls_ctx_t;
typedef struct ordo_tls_s ordo_tls_t;

/* Return values of the session calls. */
#define ORDO_TLS_ERR (-1) /* the session failed; ordo_tls_error() says why */
#define ORDO_TLS_EOF (-2) /* the peer closed the session cleanly (close_notify) */

/* A line of an error's text, as long as ordo_tls_error() returns at most. */
#define ORDO_TLS_ERROR_MAX 200

/* ordo_tls_ctx_new() -- build a context from cfg, reading its files now.
 * Returns 0 and the context in *out (the caller's to free), or -1 with the
 * reason in err[0..errlen) ("tls-cert-file /x.crt: No such file or
 * directory", "tls-protocols: unknown protocol 'SSLv3'"). */
int ordo_tls_ctx_new(const ordo_tls_config_t *cfg, ordo_tls_ctx_t **out, char *err, size_t errlen);

/* ordo_tls_ctx_reload() -- build a context from cfg and, only if that
 * succeeds, free *ctx and put the new one there (sessions of the old one
 * keep it alive until they end). Returns 0, or -1 with err set and *ctx
 * untouched. */
int ordo_tls_ctx_reload(ordo_tls_ctx_t **ctx, const ordo_tls_config_t *cfg, char *err, size_t errlen);

/* ordo_tls_ctx_free() -- drop the caller's reference; NULL is allowed. */
void ordo_tls_ctx_free(ordo_tls_ctx_t *ctx);

/* ordo_tls_new() -- a session of ctx. A client's server_name (may be NULL)
 * is sent as SNI (unless it is an IP address) and the server's certificate
 * must name it (a DNS name or an IP address in its subject alternative
 * names). Returns NULL only if out of memory. */
ordo_tls_t *ordo_tls_new(ordo_tls_ctx_t *ctx, const char *server_name);

/* ordo_tls_free() -- end the session without a word to the peer; NULL is
 * allowed. */
void ordo_tls_free(ordo_tls_t *t);

/* ordo_tls_feed() -- hand over len bytes received from the peer. They are
 * only queued; ordo_tls_read() or ordo_tls_handshake() consume them. */
void ordo_tls_feed(ordo_tls_t *t, const void *data, size_t len);

/* ordo_tls_handshake() -- advance the handshake with what was fed. Returns
 * 1 when it is done (and on every call after), 0 when it needs more input
 * from the peer, ORDO_TLS_ERR when it failed. */
int ordo_tls_handshake(ordo_tls_t *t);

/* ordo_tls_read() -- up to cap bytes of plaintext into buf, handshaking
 * first if needed. Returns the count (> 0), 0 when no more plaintext is
 * there until more is fed, ORDO_TLS_EOF or ORDO_TLS_ERR. */
ssize_t ordo_tls_read(ordo_tls_t *t, void *buf, size_t cap);

/* ordo_tls_decrypt() -- feed len bytes received from the peer, then read
 * all the plaintext they complete onto the end of in, growing it by step
 * bytes at a time. Returns 0 (all of it read; maybe none), ORDO_TLS_EOF or
 * ORDO_TLS_ERR; the plaintext read before an end stays in in. */
int ordo_tls_decrypt(ordo_tls_t *t, const void *data, size_t len, ordo_buf_t *in, size_t step);

/* ordo_tls_write() -- encrypt data[0..len) for the peer. Returns len once
 * the handshake is done (memory never refuses bytes), 0 while the
 * handshake is still under way (keep the data and try again later), or
 * ORDO_TLS_ERR. */
ssize_t ordo_tls_write(ordo_tls_t *t, const void *data, size_t len);

/* ordo_tls_close() -- queue a close_notify alert for the peer (take it with
 * ordo_tls_out_take). */
void ordo_tls_close(ordo_tls_t *t);

/* ordo_tls_out_pending() -- bytes of ciphertext waiting to be sent. */
size_t ordo_tls_out_pending(const ordo_tls_t *t);

/* ordo_tls_out_take() -- move up to cap bytes of pending ciphertext into
 * buf; returns how many. */
size_t ordo_tls_out_take(ordo_tls_t *t, void *buf, size_t cap);

/* ordo_tls_done() -- the handshake completed. */
bool ordo_tls_done(const ordo_tls_t *t);

/* ordo_tls_error() -- why the last call failed, one line; "" if none. Valid
 * until the next call on t. */
const char *ordo_tls_error(const ordo_tls_t *t);

/* ordo_tls_peer_name() -- the common name of the peer's verified
 * certificate into buf[0..cap), NUL-terminated. Returns 0, or -1 if the
 * peer showed none (or the handshake is not done). */
int ordo_tls_peer_name(const ordo_tls_t *t, char *buf, size_t cap);

/* ordo_tls_describe() -- the session's protocol and cipher ("TLSv1.3
 * TLS_AES_256_GCM_SHA384"), for logs; valid while t lives. */
const char *ordo_tls_describe(ordo_tls_t *t);

#endif /* ORDO_TLS_H */
