/*
 * net_tls.h -- TLS on the server's doors: RESP on tls-port, HTTPS on the
 * HTTP listener (tls-http). One context (base/tls.h) serves both; each
 * TLS connection has a session (c->tls) that net.c feeds what it reads
 * (net_tls_input(), plaintext into c->in) and encrypts what it sends
 * (net.c's conn_flush, at the point where a plain connection writes).
 * Everything above the bytes -- RESP, HTTP, limits, durability holds --
 * sees plaintext and does not know TLS is there.
 *
 * Handshakes run on the loop, never blocking: a connection is on
 * net.tls.handshaking from accept until its handshake ends, and cron
 * closes it once tls-handshake-timeout-ms has passed. Every handshake is
 * counted (ok, failed, timed out: INFO stats, /metrics) and every refused
 * one is logged with the peer and the reason, at most NET_TLS_LOG_BURST
 * lines a second (the rest are counted in the next line).
 *
 * Reload: net_tls_reload() builds a context from the options given and
 * swaps it in only if that worked; live sessions keep the old one. SIGHUP
 * (main.c) and CONFIG SET tls-... (cmd/, through the server's tls_reload
 * hook) call it. Loop thread only.
 */
#ifndef ORDO_NET_TLS_H
#define ORDO_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "net/conn.h"

struct ordo_config_s;

/* At most this many refused handshakes are logged in one second. */
#define NET_TLS_LOG_BURST 20
/* Plaintext encrypted by one flush of a connection at most (the rest waits
 * for the write to complete): the ciphertext in flight stays near this. */
#define NET_TLS_WRITE_BYTES (256u << 10)

/* net_tls_init() -- build the context if tls-port or tls-http is set (else
 * nothing). Returns 0, or -1 with the reason in err. */
int net_tls_init(server_t *s, char *err, size_t elen);
/* net_tls_listen() -- open bind:tls-port (if set); accepted connections go
 * to on_connection. Returns 0, or -1 with err. */
int net_tls_listen(server_t *s, uv_connection_cb on_connection, char *err, size_t elen);
/* net_tls_is_listener() -- l is the TLS RESP listener. */
bool net_tls_is_listener(const server_t *s, const uv_stream_t *l);
/* net_tls_close() -- close the listener and drop the server's context
 * (shutdown); sessions still open keep theirs. */
void net_tls_close(server_t *s);
/* net_tls_reload() -- the server's tls_reload hook: a new context from
 * cfg's tls-* options. Returns 0, or -1 with err (the old one serves on). */
int net_tls_reload(server_t *s, const struct ordo_config_s *cfg, char *err, size_t elen);

/* net_tls_conn_start() -- make the accepted c a TLS connection. Returns 0,
 * or -1 if out of memory. */
int net_tls_conn_start(conn_t *c);
/* net_tls_input() -- n bytes read from c's socket: decrypt them into c->in.
 * Returns 0, or -1 when c must close (its handshake was refused, or the
 * peer ended the session; logged and counted). */
int net_tls_input(conn_t *c, const char *data, size_t n);
/* net_tls_conn_closed() -- c is closing: a handshake still under way ends
 * as failed. */
void net_tls_conn_closed(conn_t *c);
/* net_tls_cron() -- close the connections past tls-handshake-timeout-ms. */
void net_tls_cron(server_t *s);

#endif /* ORDO_NET_TLS_H */
