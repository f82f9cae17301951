/*
 * net_tls.c -- TLS on the server's doors: the context, the TLS listener,
 * each connection's handshake, its timeout, counters and log lines; see
 * net_tls.h. The encryption of output is in net.c's conn_flush (it needs
 * the output's layout), the decryption of input here.
 *
 * Invariants: s->net.tls.ctx != NULL exactly while TLS is on; a TLS
 * connection is on s->net.tls.handshaking exactly while its handshake is
 * under way (not done, not failed), and is counted once, when it leaves
 * that list (ok, failed or timed out); the list is in accept order, so
 * cron stops at the first connection still within its time.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/cmd.h"
#include "config.h"
#include "net/conn.h"
#include "net/net_tls.h"

#define TLS_OF(n) ORDO_LIST_ENTRY(n, conn_t, tls_ln)

/* cfg's tls-* options as an engine configuration (strings point into
 * cfg). Returns 0, or -1 with err. */
static int engine_config(const ordo_config_t *cfg, ordo_tls_config_t *out, char *err, size_t elen)
{
    *out = (ordo_tls_config_t){.role = ORDO_TLS_SERVER,
                               .cert_file = cfg->tls_cert_file,
                               .key_file = cfg->tls_key_file,
                               .ca_file = cfg->tls_ca_cert_file,
                               .protocols = cfg->tls_protocols,
                               .ciphers = cfg->tls_ciphers,
                               .ciphersuites = cfg->tls_ciphersuites};
    if (strcasecmp(cfg->tls_auth_clients, "no") == 0)
        out->auth = ORDO_TLS_AUTH_NO;
    else if (strcasecmp(cfg->tls_auth_clients, "optional") == 0)
        out->auth = ORDO_TLS_AUTH_OPTIONAL;
    else if (strcasecmp(cfg->tls_auth_clients, "yes") == 0)
        out->auth = ORDO_TLS_AUTH_YES;
    else {
        snprintf(err, elen, "tls-auth-clients: expected no, yes or optional, got '%s'", cfg->tls_auth_clients);
        return -1;
    }
    if (strcasecmp(cfg->tls_auth_clients_user, "off") != 0 && strcasecmp(cfg->tls_auth_clients_user, "CN") != 0) {
        snprintf(err, elen, "tls-auth-clients-user: expected off or CN, got '%s'", cfg->tls_auth_clients_user);
        return -1;
    }
    if (strcasecmp(cfg->tls_auth_clients_user, "CN") == 0 && out->auth == ORDO_TLS_AUTH_NO) {
        snprintf(err, elen, "tls-auth-clients-user CN needs client certificates: set tls-auth-clients yes or optional");
        return -1;
    }
    return 0;
}

int net_tls_init(server_t *s, char *err, size_t elen)
{
    if (s->cfg.tls_port == 0 && !s->cfg.tls_http)
        return 0;
    ordo_tls_config_t ec;
    if (engine_config(&s->cfg, &ec, err, elen) != 0 || ordo_tls_ctx_new(&ec, &s->net.tls.ctx, err, elen) != 0)
        return -1;
    s->net.tls.rbuf = ordo_xmalloc(CONN_READ_CHUNK);
    return 0;
}

int net_tls_reload(server_t *s, const ordo_config_t *cfg, char *err, size_t elen)
{
    if (s->net.tls.ctx == NULL) {
        snprintf(err, elen, "TLS is off (tls-port and tls-http are set at start)");
        return -1;
    }
    ordo_tls_config_t ec;
    if (engine_config(cfg, &ec, err, elen) != 0)
        return -1;
    return ordo_tls_ctx_reload(&s->net.tls.ctx, &ec, err, elen);
}

int net_tls_listen(server_t *s, uv_connection_cb on_connection, char *err, size_t elen)
{
    if (s->cfg.tls_port == 0)
        return 0;
    assert(s->net.tls.ctx != NULL);
    struct sockaddr_storage ss;
    if (uv_ip4_addr(s->cfg.bind, (int)s->cfg.tls_port, (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(s->cfg.bind, (int)s->cfg.tls_port, (struct sockaddr_in6 *)&ss) != 0) {
        snprintf(err, elen, "bind: '%s' is not an IPv4 or IPv6 address", s->cfg.bind);
        return -1;
    }
    uv_tcp_init(s->loop, &s->net.tls.listener);
    s->net.tls.listener.data = s;
    s->net.tls.listener_on = true;
    int rc;
    if ((rc = uv_tcp_bind(&s->net.tls.listener, (struct sockaddr *)&ss, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&s->net.tls.listener, 511, on_connection)) != 0) {
        snprintf(err, elen, "cannot listen on %s:%lld (tls-port): %s", s->cfg.bind, (long long)s->cfg.tls_port,
                 uv_strerror(rc));
        return -1;
    }
    return 0;
}

bool net_tls_is_listener(const server_t *s, const uv_stream_t *l)
{
    return s->net.tls.listener_on && l == (const uv_stream_t *)&s->net.tls.listener;
}

void net_tls_close(server_t *s)
{
    if (s->net.tls.listener_on) {
        uv_close((uv_handle_t *)&s->net.tls.listener, NULL);
        s->net.tls.listener_on = false;
    }
    ordo_tls_ctx_free(s->net.tls.ctx);
    s->net.tls.ctx = NULL;
    free(s->net.tls.rbuf);
    s->net.tls.rbuf = NULL;
}

/* Log that c's handshake was refused and why, within NET_TLS_LOG_BURST
 * lines a second. */
static void log_refused(conn_t *c, const char *why)
{
    net_tls_t *t = &c->srv->net.tls;
    uint64_t now = server_tick(c->srv);
    if (now - t->log_window_ms >= 1000) {
        t->log_window_ms = now;
        t->logged_in_window = 0;
    }
    if (t->logged_in_window >= NET_TLS_LOG_BURST) {
        t->unlogged++;
        return;
    }
    t->logged_in_window++;
    const char *hint = strstr(why, "wrong version number") != NULL || strstr(why, "http request") != NULL
                           ? " (not TLS: a plaintext client on a TLS port?)"
                           : "";
    fprintf(stderr, "ordod: TLS handshake from %s refused: %s%s", c->addr, why, hint);
    if (t->unlogged > 0)
        fprintf(stderr, " (and %llu more refused, not logged)", (unsigned long long)t->unlogged);
    fputc('\n', stderr);
    t->unlogged = 0;
}

/* c's handshake ended without success: count and log it. */
static void handshake_failed(conn_t *c, const char *why)
{
    assert(ordo_list_linked(&c->tls_ln, &c->srv->net.tls.handshaking));
    ordo_list_remove(&c->srv->net.tls.handshaking, &c->tls_ln);
    c->srv->stats.tls_handshakes_failed++;
    log_refused(c, why);
}

int net_tls_conn_start(conn_t *c)
{
    net_tls_t *t = &c->srv->net.tls;
    assert(t->ctx != NULL && c->tls == NULL);
    c->tls = ordo_tls_new(t->ctx, NULL);
    if (c->tls == NULL)
        return -1;
    ordo_list_push_back(&t->handshaking, &c->tls_ln);
    return 0;
}

/* Send what the session has for the peer now (an alert before a close),
 * if the socket takes it at once; the connection is closing anyway. */
static void send_last_words(conn_t *c)
{
    char buf[512];
    size_t n = ordo_tls_out_take(c->tls, buf, sizeof buf);
    if (n == 0)
        return;
    uv_buf_t b = uv_buf_init(buf, (unsigned)n);
    int w = uv_try_write(&c->h.stream, &b, 1);
    if (w > 0)
        c->srv->stats.net_out_bytes += (uint64_t)w;
}

int net_tls_input(conn_t *c, const char *data, size_t n)
{
    assert(c->tls != NULL);
    bool was_done = ordo_tls_done(c->tls);
    int got = ordo_tls_decrypt(c->tls, data, n, &c->in, CONN_READ_CHUNK);
    if (got != 0) {
        if (got == ORDO_TLS_ERR && !was_done) {
            handshake_failed(c, ordo_tls_error(c->tls));
            send_last_words(c);
        } else if (got == ORDO_TLS_ERR && c->srv->cfg.verbose) {
            fprintf(stderr, "ordod: client %llu (%s): TLS error: %s\n", (unsigned long long)c->id, c->addr,
                    ordo_tls_error(c->tls));
        }
        return -1;
    }
    if (!was_done && ordo_tls_done(c->tls)) {
        ordo_list_remove(&c->srv->net.tls.handshaking, &c->tls_ln);
        c->srv->stats.tls_handshakes_ok++;
        /* tls-auth-clients-user CN: the verified certificate names the
         * user (cmd_acl.c); a name that is no user, or one that is off,
         * leaves the connection as any other (AUTH still works). */
        char user[256];
        if (strcasecmp(c->srv->cfg.tls_auth_clients_user, "CN") == 0 &&
            ordo_tls_peer_name(c->tls, user, sizeof user) == 0 && !cmd_acl_cert_login(c, user, strlen(user)) &&
            c->srv->cfg.verbose)
            fprintf(stderr, "ordod: client %llu (%s): certificate CN=%s is no user that is on: not logged in\n",
                    (unsigned long long)c->id, c->addr, user);
        if (c->srv->cfg.verbose) {
            char cn[256];
            bool named = ordo_tls_peer_name(c->tls, cn, sizeof cn) == 0;
            fprintf(stderr, "ordod: client %llu (%s): TLS %s%s%s\n", (unsigned long long)c->id, c->addr,
                    ordo_tls_describe(c->tls), named ? ", certificate CN=" : "", named ? cn : "");
        }
    }
    return 0;
}

void net_tls_conn_closed(conn_t *c)
{
    if (c->tls != NULL && ordo_list_linked(&c->tls_ln, &c->srv->net.tls.handshaking))
        handshake_failed(c, "the connection closed before the handshake finished");
}

void net_tls_cron(server_t *s)
{
    net_tls_t *t = &s->net.tls;
    uint64_t now = server_tick(s);
    uint64_t limit = (uint64_t)s->cfg.tls_handshake_timeout_ms;
    ordo_list_node_t *n;
    while ((n = t->handshaking.head) != NULL) {
        conn_t *c = TLS_OF(n);
        if (now - c->created_ms < limit)
            break; /* in accept order: the rest are younger */
        ordo_list_remove(&t->handshaking, n);
        s->stats.tls_handshakes_timedout++;
        char why[96];
        snprintf(why, sizeof why, "no handshake within %lld ms (tls-handshake-timeout-ms)",
                 (long long)s->cfg.tls_handshake_timeout_ms);
        log_refused(c, why);
        conn_close(c);
    }
}
