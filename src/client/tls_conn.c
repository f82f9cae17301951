/*
 * tls_conn.c -- TLS under the blocking connection of conn.c, with the
 * engine of base/tls.h.
 *
 * conn.c keeps speaking plaintext: commands are encoded into c->out and
 * replies parsed from c->in. On a TLS connection, client_tls_encrypt()
 * turns c->out into ciphertext in c->tls_out (which conn.c's wait_io()
 * sends instead of out), and client_tls_read() takes the place of recv():
 * it reads ciphertext and puts the plaintext it carries into c->in. The
 * handshake (client_tls_start()) runs right after the TCP connect, before
 * HELLO, within the connect's deadline.
 *
 * Failures. A certificate that does not verify, a handshake the server
 * refuses, or options whose files do not load end in ORDO_ETLS, which the
 * reconnect loop does not retry (a retry would meet the same certificate).
 * A broken socket is ORDO_ECONN as on a plain connection.
 *
 * Invariants: c->tls != NULL only while c->fd >= 0; c->tls_out holds only
 * ciphertext of the current session (emptied when the connection drops).
 */
#include "client_int.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Ciphertext read per recv(): one TLS record's worth. */
#define CLIENT_TLS_READ_CHUNK (16 * 1024 + 512)

int client_tls_opts(const ordo_client_opts_t *o, ordo_tls_ctx_t **ctx, char **server_name, char **bad)
{
    *ctx = NULL;
    *server_name = *bad = NULL;
    if (!o->tls)
        return ORDO_OK;
    if (o->tls_server_name != NULL && (*server_name = strdup(o->tls_server_name)) == NULL)
        return ORDO_ENOMEM;
    ordo_tls_config_t cfg = {.role = ORDO_TLS_CLIENT,
                             .ca_file = o->tls_ca_file,
                             .cert_file = o->tls_cert_file,
                             .key_file = o->tls_key_file,
                             .no_verify = o->tls_no_verify != 0};
    char err[CLIENT_ERRSTR_MAX];
    if (ordo_tls_ctx_new(&cfg, ctx, err, sizeof err) != 0 && (*bad = strdup(err)) == NULL) {
        free(*server_name);
        *server_name = NULL;
        return ORDO_ENOMEM;
    }
    return ORDO_OK;
}

int client_tls_init(ordo_client_t *c, const ordo_client_opts_t *o)
{
    return client_tls_opts(o, &c->tls_ctx, &c->tls_server_name, &c->tls_bad);
}

void client_tls_free(ordo_client_t *c)
{
    client_tls_drop(c);
    ordo_tls_ctx_free(c->tls_ctx);
    c->tls_ctx = NULL;
    cresp_buf_free(&c->tls_out);
    free(c->tls_server_name);
    free(c->tls_bad);
    c->tls_server_name = c->tls_bad = NULL;
}

void client_tls_drop(ordo_client_t *c)
{
    ordo_tls_free(c->tls);
    c->tls = NULL;
    c->tls_out.len = 0;
}

/* Move the session's pending ciphertext into c->tls_out. */
static int take_ciphertext(ordo_client_t *c)
{
    size_t n = ordo_tls_out_pending(c->tls);
    if (n == 0)
        return ORDO_OK;
    if (cresp_buf_reserve(&c->tls_out, n) != 0)
        return ORDO_ENOMEM;
    c->tls_out.len += ordo_tls_out_take(c->tls, c->tls_out.data + c->tls_out.len, n);
    return ORDO_OK;
}

static int tls_failed(ordo_client_t *c)
{
    return client_seterr(c, ORDO_ETLS, "TLS with %s:%d: %s", c->members.m[c->members.cur].host,
                         c->members.m[c->members.cur].port, ordo_tls_error(c->tls));
}

int client_tls_encrypt(ordo_client_t *c)
{
    assert(c->tls != NULL);
    while (c->out.len > 0 && c->tls_out.len < CLIENT_TLS_WRITE_BYTES && ordo_tls_done(c->tls)) {
        size_t n = c->out.len < CLIENT_TLS_WRITE_BYTES ? c->out.len : CLIENT_TLS_WRITE_BYTES;
        ssize_t w = ordo_tls_write(c->tls, c->out.data, n);
        if (w < 0)
            return tls_failed(c);
        if (w == 0)
            break;
        cresp_buf_consume(&c->out, (size_t)w);
        if (take_ciphertext(c) != ORDO_OK)
            return ORDO_ENOMEM;
    }
    return ORDO_OK;
}

int client_tls_read(ordo_client_t *c)
{
    assert(c->fd >= 0 && c->tls != NULL);
    char buf[CLIENT_TLS_READ_CHUNK];
    ssize_t k;
    for (;;) {
        k = recv(c->fd, buf, sizeof buf, 0);
        if (k > 0)
            break;
        if (k == 0)
            return client_seterr(c, ORDO_ECONN, "connection closed by server");
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return ORDO_OK;
        return client_seterr(c, ORDO_ECONN, "recv: %s", strerror(errno));
    }
    int n = client_tls_decrypt(c->tls, buf, (size_t)k, &c->in);
    if (n == CLIENT_TLS_NOMEM)
        return ORDO_ENOMEM;
    if (n != 0) {
        if (n == ORDO_TLS_EOF)
            return client_seterr(c, ORDO_ECONN, "connection closed by server (TLS close)");
        /* After the handshake too: TLS 1.3 refuses a client certificate
         * once the client has finished, on its first read. */
        return tls_failed(c);
    }
    return take_ciphertext(c);
}

int client_tls_decrypt(ordo_tls_t *t, const char *data, size_t n, cresp_buf_t *in)
{
    ordo_tls_feed(t, data, n);
    for (;;) {
        if (cresp_buf_reserve(in, CLIENT_READ_CHUNK) != 0)
            return CLIENT_TLS_NOMEM;
        ssize_t got = ordo_tls_read(t, in->data + in->len, in->cap - in->len);
        if (got <= 0)
            return (int)got;
        in->len += (size_t)got;
    }
}

int client_tls_start(ordo_client_t *c, const char *host, int64_t deadline)
{
    assert(c->fd >= 0 && c->tls == NULL && c->tls_ctx != NULL);
    c->tls = ordo_tls_new(c->tls_ctx, c->tls_server_name != NULL ? c->tls_server_name : host);
    if (c->tls == NULL)
        return ORDO_ENOMEM;
    for (;;) {
        int h = ordo_tls_handshake(c->tls);
        if (h == ORDO_TLS_ERR)
            return tls_failed(c);
        int rc = take_ciphertext(c);
        if (rc != ORDO_OK)
            return rc;
        if (h == 1 && c->tls_out.len == 0)
            return ORDO_OK;
        struct pollfd pfd = {.fd = c->fd, .events = (short)((h == 1 ? 0 : POLLIN) | (c->tls_out.len ? POLLOUT : 0))};
        int64_t left = deadline < 0 ? -1 : deadline - client_now_ms();
        if (deadline >= 0 && left <= 0)
            return client_seterr(c, ORDO_ETIMEDOUT, "TLS handshake with %s: timed out", host);
        int n = poll(&pfd, 1, left < 0 ? -1 : left > INT32_MAX ? INT32_MAX : (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return client_seterr(c, ORDO_ECONN, "poll: %s", strerror(errno));
        if (n == 0)
            return client_seterr(c, ORDO_ETIMEDOUT, "TLS handshake with %s: timed out", host);
        if (pfd.revents & POLLOUT) {
            ssize_t k = send(c->fd, c->tls_out.data, c->tls_out.len, MSG_NOSIGNAL);
            if (k > 0)
                cresp_buf_consume(&c->tls_out, (size_t)k);
            else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return client_seterr(c, ORDO_ECONN, "send: %s", strerror(errno));
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            rc = client_tls_read(c);
            if (rc != ORDO_OK)
                return rc;
        }
    }
}
