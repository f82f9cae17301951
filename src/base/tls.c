/*
 * tls.c -- the TLS engine of tls.h: OpenSSL 3 sessions over a pair of
 * memory BIOs.
 *
 * A session is an SSL object whose read BIO holds the ciphertext the
 * caller fed and not yet consumed, and whose write BIO holds the
 * ciphertext made for the peer and not yet taken. Both are memory BIOs set
 * to answer "retry" when empty, so OpenSSL reports WANT_READ instead of an
 * end of file and the caller decides when input is over. Neither is
 * bounded here: the caller feeds what it read (one read's worth at a time)
 * and drains the plaintext before feeding more, and takes the ciphertext
 * after every call, so each holds at most one read's or one write's worth.
 *
 * A context is an SSL_CTX (the struct ordo_tls_ctx_s is never defined:
 * the pointer is the SSL_CTX's). SSL_new() takes a reference on it, which
 * is what lets a reload free the old context under live sessions.
 *
 * Invariants: t->ssl != NULL for a live session; once t->failed is set
 * every call returns ORDO_TLS_ERR and t->err says why.
 */
#include "tls.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct ordo_tls_s {
    SSL *ssl;
    BIO *in;      /* ciphertext from the peer (owned by ssl) */
    BIO *out;     /* ciphertext for the peer (owned by ssl) */
    bool failed;
    char err[ORDO_TLS_ERROR_MAX];
    char desc[96];
};

static SSL_CTX *ssl_ctx(ordo_tls_ctx_t *ctx)
{
    return (SSL_CTX *)(void *)ctx;
}

/* Empty this thread's OpenSSL error queue before a call whose failure
 * SSL_get_error() will judge (a stale entry would turn a "want more
 * input" into a failure). Peeking first: ERR_clear_error() walks and
 * resets every slot of the queue, several times the cost of a look at an
 * empty one, and on the data path the queue is empty almost always. */
static void errors_clear(void)
{
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

/* The first error on OpenSSL's queue as text ("wrong version number"),
 * clearing the queue; fallback if it is empty. */
static void openssl_reason(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_peek_error();
    const char *why = e ? ERR_reason_error_string(e) : NULL;
    if (why != NULL)
        snprintf(buf, cap, "%s", why);
    else if (e != 0)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "%s", fallback);
    ERR_clear_error();
}

/* ---- contexts ---------------------------------------------------------- */

/* The versions tls-protocols may name, by OpenSSL's numbers. */
static const struct {
    const char *name;
    int version;
} tls_versions[] = {
    {"TLSv1.2", TLS1_2_VERSION},
    {"TLSv1.3", TLS1_3_VERSION},
};

/* Parse "TLSv1.2 TLSv1.3" into the lowest and highest version listed.
 * Returns 0, or -1 with err set. */
static int parse_protocols(const char *s, int *min, int *max, char *err, size_t errlen)
{
    *min = TLS1_2_VERSION;
    *max = TLS1_3_VERSION;
    if (s == NULL || *s == '\0')
        return 0;
    int lo = 0, hi = 0;
    const char *p = s;
    while (*p != '\0') {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, " ,");
        if (n == 0)
            break;
        int v = 0;
        for (size_t i = 0; i < sizeof tls_versions / sizeof tls_versions[0]; i++)
            if (strlen(tls_versions[i].name) == n && strncasecmp(p, tls_versions[i].name, n) == 0)
                v = tls_versions[i].version;
        if (v == 0) {
            snprintf(err, errlen, "tls-protocols: unknown protocol '%.*s' (TLSv1.2, TLSv1.3)", (int)n, p);
            return -1;
        }
        if (lo == 0 || v < lo)
            lo = v;
        if (v > hi)
            hi = v;
        p += n;
    }
    if (lo == 0) {
        snprintf(err, errlen, "tls-protocols: no protocol named (TLSv1.2, TLSv1.3)");
        return -1;
    }
    *min = lo;
    *max = hi;
    return 0;
}

static bool set(const char *s)
{
    return s != NULL && *s != '\0';
}

/* Load cfg's certificate, key and CA into c. Returns 0 or -1 with err. */
static int ctx_load_files(SSL_CTX *c, const ordo_tls_config_t *cfg, char *err, size_t errlen)
{
    char why[ORDO_TLS_ERROR_MAX];
    if (set(cfg->cert_file) != set(cfg->key_file)) {
        snprintf(err, errlen, "tls: a certificate needs its key (tls-cert-file and tls-key-file go together)");
        return -1;
    }
    if (set(cfg->cert_file)) {
        if (SSL_CTX_use_certificate_chain_file(c, cfg->cert_file) != 1) {
            openssl_reason(why, sizeof why, "cannot load");
            snprintf(err, errlen, "tls-cert-file %s: %s", cfg->cert_file, why);
            return -1;
        }
        if (SSL_CTX_use_PrivateKey_file(c, cfg->key_file, SSL_FILETYPE_PEM) != 1) {
            openssl_reason(why, sizeof why, "cannot load");
            snprintf(err, errlen, "tls-key-file %s: %s", cfg->key_file, why);
            return -1;
        }
        if (SSL_CTX_check_private_key(c) != 1) {
            openssl_reason(why, sizeof why, "does not match");
            snprintf(err, errlen, "tls-key-file %s: not the key of %s (%s)", cfg->key_file, cfg->cert_file, why);
            return -1;
        }
    }
    if (set(cfg->ca_file)) {
        if (SSL_CTX_load_verify_locations(c, cfg->ca_file, NULL) != 1) {
            openssl_reason(why, sizeof why, "cannot load");
            snprintf(err, errlen, "tls-ca-cert-file %s: %s", cfg->ca_file, why);
            return -1;
        }
        if (cfg->role == ORDO_TLS_SERVER) {
            STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->ca_file);
            if (names != NULL)
                SSL_CTX_set_client_CA_list(c, names);
        }
    } else if (cfg->role == ORDO_TLS_CLIENT) {
        SSL_CTX_set_default_verify_paths(c);
    }
    ERR_clear_error();
    return 0;
}

/* Protocol versions, ciphers and verification of cfg onto c. */
static int ctx_set_policy(SSL_CTX *c, const ordo_tls_config_t *cfg, char *err, size_t errlen)
{
    char why[ORDO_TLS_ERROR_MAX];
    int min, max;
    if (parse_protocols(cfg->protocols, &min, &max, err, errlen) != 0)
        return -1;
    SSL_CTX_set_min_proto_version(c, min);
    SSL_CTX_set_max_proto_version(c, max);
    if (set(cfg->ciphers) && SSL_CTX_set_cipher_list(c, cfg->ciphers) != 1) {
        openssl_reason(why, sizeof why, "no cipher matches");
        snprintf(err, errlen, "tls-ciphers '%s': %s", cfg->ciphers, why);
        return -1;
    }
    if (set(cfg->ciphersuites) && SSL_CTX_set_ciphersuites(c, cfg->ciphersuites) != 1) {
        openssl_reason(why, sizeof why, "no suite matches");
        snprintf(err, errlen, "tls-ciphersuites '%s': %s", cfg->ciphersuites, why);
        return -1;
    }
    /* No renegotiation either way (a peer cannot restart the handshake on
     * a live session), no compression (CRIME). */
    SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
    int mode = SSL_VERIFY_NONE;
    if (cfg->role == ORDO_TLS_CLIENT)
        mode = cfg->no_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER;
    else if (cfg->auth == ORDO_TLS_AUTH_OPTIONAL)
        mode = SSL_VERIFY_PEER;
    else if (cfg->auth == ORDO_TLS_AUTH_YES)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    if (cfg->role == ORDO_TLS_SERVER && mode != SSL_VERIFY_NONE && !set(cfg->ca_file)) {
        snprintf(err, errlen, "tls-auth-clients needs tls-ca-cert-file (the CA client certificates are verified against)");
        return -1;
    }
    SSL_CTX_set_verify(c, mode, NULL);
    if (cfg->role == ORDO_TLS_SERVER) {
        /* Sessions resumed under client verification must belong to this
         * server's context, which OpenSSL checks by this id. */
        static const unsigned char sid[] = "ordo";
        SSL_CTX_set_session_id_context(c, sid, sizeof sid - 1);
    }
    return 0;
}

int ordo_tls_ctx_new(const ordo_tls_config_t *cfg, ordo_tls_ctx_t **out, char *err, size_t errlen)
{
    assert(cfg != NULL && out != NULL && err != NULL);
    *out = NULL;
    if (cfg->role == ORDO_TLS_SERVER && !set(cfg->cert_file)) {
        snprintf(err, errlen, "tls: a server needs tls-cert-file and tls-key-file");
        return -1;
    }
    ERR_clear_error();
    SSL_CTX *c = SSL_CTX_new(cfg->role == ORDO_TLS_SERVER ? TLS_server_method() : TLS_client_method());
    if (c == NULL) {
        openssl_reason(err, errlen, "cannot make an SSL context");
        return -1;
    }
    if (ctx_set_policy(c, cfg, err, errlen) != 0 || ctx_load_files(c, cfg, err, errlen) != 0) {
        SSL_CTX_free(c);
        ERR_clear_error();
        return -1;
    }
    *out = (ordo_tls_ctx_t *)(void *)c;
    return 0;
}

int ordo_tls_ctx_reload(ordo_tls_ctx_t **ctx, const ordo_tls_config_t *cfg, char *err, size_t errlen)
{
    assert(ctx != NULL);
    ordo_tls_ctx_t *fresh;
    if (ordo_tls_ctx_new(cfg, &fresh, err, errlen) != 0)
        return -1;
    ordo_tls_ctx_free(*ctx);
    *ctx = fresh;
    return 0;
}

void ordo_tls_ctx_free(ordo_tls_ctx_t *ctx)
{
    if (ctx != NULL)
        SSL_CTX_free(ssl_ctx(ctx));
}

/* ---- sessions ---------------------------------------------------------- */

ordo_tls_t *ordo_tls_new(ordo_tls_ctx_t *ctx, const char *server_name)
{
    assert(ctx != NULL);
    ordo_tls_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ssl = SSL_new(ssl_ctx(ctx));
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->in == NULL || t->out == NULL)
        goto fail;
    BIO_set_mem_eof_return(t->in, -1);
    BIO_set_mem_eof_return(t->out, -1);
    SSL_set_bio(t->ssl, t->in, t->out);
    if (SSL_is_server(t->ssl)) {
        SSL_set_accept_state(t->ssl);
    } else {
        SSL_set_connect_state(t->ssl);
        if (set(server_name)) {
            unsigned char ip[16];
            bool literal = inet_pton(AF_INET, server_name, ip) == 1 || inet_pton(AF_INET6, server_name, ip) == 1;
            X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
            int ok = literal ? X509_VERIFY_PARAM_set1_ip_asc(param, server_name)
                             : (SSL_set_tlsext_host_name(t->ssl, server_name) == 1 &&
                                X509_VERIFY_PARAM_set1_host(param, server_name, 0) == 1);
            if (!ok)
                goto fail_ssl;
        }
    }
    ERR_clear_error();
    return t;
fail:
    BIO_free(t->in);
    BIO_free(t->out);
    SSL_free(t->ssl);
    free(t);
    ERR_clear_error();
    return NULL;
fail_ssl:
    SSL_free(t->ssl); /* frees the BIOs it owns */
    free(t);
    ERR_clear_error();
    return NULL;
}

void ordo_tls_free(ordo_tls_t *t)
{
    if (t == NULL)
        return;
    SSL_free(t->ssl);
    free(t);
}

void ordo_tls_feed(ordo_tls_t *t, const void *data, size_t len)
{
    assert(t != NULL && (data != NULL || len == 0));
    while (len > 0) {
        int n = len > INT32_MAX ? INT32_MAX : (int)len;
        int w = BIO_write(t->in, data, n);
        assert(w == n); /* a memory BIO takes everything or aborts on OOM */
        data = (const char *)data + w;
        len -= (size_t)w;
    }
}

/* Record why the session failed: OpenSSL's reason, with the certificate
 * verification result when that is what failed. Returns ORDO_TLS_ERR. */
static int fail(ordo_tls_t *t, int ret)
{
    int e = SSL_get_error(t->ssl, ret);
    char why[ORDO_TLS_ERROR_MAX / 2];
    if (e == SSL_ERROR_SSL) {
        openssl_reason(why, sizeof why, "protocol error");
        long v = SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK)
            snprintf(t->err, sizeof t->err, "%s: %s", why, X509_verify_cert_error_string(v));
        else
            snprintf(t->err, sizeof t->err, "%s", why);
    } else {
        ERR_clear_error();
        snprintf(t->err, sizeof t->err, "TLS error %d", e);
    }
    t->failed = true;
    return ORDO_TLS_ERR;
}

int ordo_tls_handshake(ordo_tls_t *t)
{
    assert(t != NULL);
    if (t->failed)
        return ORDO_TLS_ERR;
    if (SSL_is_init_finished(t->ssl))
        return 1;
    errors_clear();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1)
        return 1;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    return fail(t, r);
}

ssize_t ordo_tls_read(ordo_tls_t *t, void *buf, size_t cap)
{
    assert(t != NULL && buf != NULL && cap > 0);
    if (t->failed)
        return ORDO_TLS_ERR;
    errors_clear();
    size_t n = 0;
    int r = SSL_read_ex(t->ssl, buf, cap, &n);
    if (r == 1)
        return (ssize_t)n;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    if (e == SSL_ERROR_ZERO_RETURN)
        return ORDO_TLS_EOF;
    return fail(t, r);
}

int ordo_tls_decrypt(ordo_tls_t *t, const void *data, size_t len, ordo_buf_t *in, size_t step)
{
    assert(step > 0);
    ordo_tls_feed(t, data, len);
    for (;;) {
        char *p = ordo_buf_reserve(in, step);
        ssize_t got = ordo_tls_read(t, p, in->cap - in->len);
        if (got <= 0)
            return (int)got;
        in->len += (size_t)got;
        /* Nothing fed is left and nothing decrypted is unread: another
         * read would only answer "want more input", at the cost of a
         * failed call into OpenSSL. */
        if (BIO_ctrl_pending(t->in) == 0 && SSL_pending(t->ssl) == 0)
            return 0;
    }
}

ssize_t ordo_tls_write(ordo_tls_t *t, const void *data, size_t len)
{
    assert(t != NULL && (data != NULL || len == 0));
    if (t->failed)
        return ORDO_TLS_ERR;
    if (len == 0)
        return 0;
    if (!SSL_is_init_finished(t->ssl)) {
        int h = ordo_tls_handshake(t);
        if (h != 1)
            return h;
    }
    errors_clear();
    size_t n = 0;
    int r = SSL_write_ex(t->ssl, data, len, &n);
    if (r == 1) {
        assert(n == len); /* partial writes are off, and memory takes all */
        return (ssize_t)n;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    return fail(t, r);
}

void ordo_tls_close(ordo_tls_t *t)
{
    assert(t != NULL);
    if (t->failed || !SSL_is_init_finished(t->ssl))
        return;
    ERR_clear_error();
    (void)SSL_shutdown(t->ssl);
    ERR_clear_error();
}

size_t ordo_tls_out_pending(const ordo_tls_t *t)
{
    assert(t != NULL);
    return BIO_ctrl_pending(t->out);
}

size_t ordo_tls_out_take(ordo_tls_t *t, void *buf, size_t cap)
{
    assert(t != NULL && buf != NULL);
    size_t n = 0;
    if (cap > 0 && BIO_read_ex(t->out, buf, cap, &n) != 1)
        n = 0;
    return n;
}

bool ordo_tls_done(const ordo_tls_t *t)
{
    assert(t != NULL);
    return !t->failed && SSL_is_init_finished(t->ssl);
}

const char *ordo_tls_error(const ordo_tls_t *t)
{
    assert(t != NULL);
    return t->failed ? t->err : "";
}

int ordo_tls_peer_name(const ordo_tls_t *t, char *buf, size_t cap)
{
    assert(t != NULL && buf != NULL && cap > 0);
    buf[0] = '\0';
    if (!ordo_tls_done(t) || SSL_get_verify_result(t->ssl) != X509_V_OK)
        return -1;
    X509 *peer = SSL_get0_peer_certificate(t->ssl);
    if (peer == NULL)
        return -1;
    int n = X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, buf, (int)cap);
    if (n < 0) {
        buf[0] = '\0';
        return -1;
    }
    return 0;
}

const char *ordo_tls_describe(ordo_tls_t *t)
{
    assert(t != NULL);
    snprintf(t->desc, sizeof t->desc, "%s %s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl));
    return t->desc;
}
