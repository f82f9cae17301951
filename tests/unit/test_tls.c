/*
 * test_tls.c -- the TLS engine (base/tls.c): a client and a server session
 * joined in memory. Handshakes and data both ways, peer verification
 * (wrong CA, expired certificate, wrong host name, client certificates
 * required or optional), protocol and suite options, garbage and truncated
 * handshakes, a clean close, and reloading a context under a live session.
 * The certificates come from scripts/make-certs.sh, run into a fresh
 * temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/tls.h"

static char dir[256];

/* A path to one of make-certs.sh's files, e.g. pem("server", "crt"). Valid
 * until the fourth call after. */
static const char *pem(const char *name, const char *ext)
{
    static char paths[4][320];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s.%s", dir, name, ext);
    return p;
}

static int make_certs(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ordo-test-tls-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "bash %s/scripts/make-certs.sh %s >/dev/null", ORDO_SOURCE_DIR, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int remove_certs(void **state)
{
    (void)state;
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A server context with the certificate name (server, expired, ...). */
static ordo_tls_ctx_t *server_ctx(const char *name, ordo_tls_auth_t auth, const char *protocols)
{
    ordo_tls_config_t cfg = {.role = ORDO_TLS_SERVER, .auth = auth, .protocols = protocols};
    char cert[320], key[320];
    snprintf(cert, sizeof cert, "%s", pem(name, "crt"));
    snprintf(key, sizeof key, "%s", pem(name, "key"));
    cfg.cert_file = cert;
    cfg.key_file = key;
    cfg.ca_file = pem("ca", "crt");
    ordo_tls_ctx_t *c = NULL;
    char err[256];
    int r = ordo_tls_ctx_new(&cfg, &c, err, sizeof err);
    if (r != 0)
        fprintf(stderr, "server_ctx: %s\n", err);
    assert_int_equal(r, 0);
    return c;
}

/* A client context trusting ca, showing certificate name if not NULL. */
static ordo_tls_ctx_t *client_ctx(const char *ca, const char *name, const char *protocols)
{
    ordo_tls_config_t cfg = {.role = ORDO_TLS_CLIENT, .protocols = protocols};
    char cafile[320], cert[320], key[320];
    snprintf(cafile, sizeof cafile, "%s", pem(ca, "crt"));
    cfg.ca_file = cafile;
    if (name != NULL) {
        snprintf(cert, sizeof cert, "%s", pem(name, "crt"));
        snprintf(key, sizeof key, "%s", pem(name, "key"));
        cfg.cert_file = cert;
        cfg.key_file = key;
    }
    ordo_tls_ctx_t *c = NULL;
    char err[256];
    int r = ordo_tls_ctx_new(&cfg, &c, err, sizeof err);
    if (r != 0)
        fprintf(stderr, "client_ctx: %s\n", err);
    assert_int_equal(r, 0);
    return c;
}

/* Move every pending ciphertext byte of from into to; returns how many. */
static size_t carry(ordo_tls_t *from, ordo_tls_t *to)
{
    char buf[4096];
    size_t total = 0, n;
    while ((n = ordo_tls_out_take(from, buf, sizeof buf)) > 0) {
        ordo_tls_feed(to, buf, n);
        total += n;
    }
    return total;
}

/* Run both handshakes until each is done or failed, or nothing moves.
 * Returns the server's last result; *client_r gets the client's. */
static int pump(ordo_tls_t *c, ordo_tls_t *s, int *client_r)
{
    int rc = 0, rs = 0;
    for (int round = 0; round < 20; round++) {
        rc = ordo_tls_handshake(c);
        size_t moved = carry(c, s);
        rs = ordo_tls_handshake(s);
        moved += carry(s, c);
        if ((rc != 0 && rs != 0) || moved == 0)
            break;
    }
    rc = ordo_tls_handshake(c); /* the client reads the server's last words */
    *client_r = rc;
    return rs;
}

/* Send len bytes from a to b and read them back, checking every byte. */
static void roundtrip(ordo_tls_t *a, ordo_tls_t *b, size_t len)
{
    char *src = malloc(len), *dst = malloc(len);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < len; i++)
        src[i] = (char)(i * 31 + 7);
    assert_int_equal(ordo_tls_write(a, src, len), (ssize_t)len);
    carry(a, b);
    size_t got = 0;
    while (got < len) {
        ssize_t n = ordo_tls_read(b, dst + got, len - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    assert_memory_equal(src, dst, len);
    assert_int_equal(ordo_tls_read(b, dst, len), 0);
    free(src);
    free(dst);
}

static void test_handshake_and_data(void **state)
{
    (void)state;
    ordo_tls_ctx_t *sc = server_ctx("server", ORDO_TLS_AUTH_NO, NULL);
    ordo_tls_ctx_t *cc = client_ctx("ca", NULL, NULL);
    ordo_tls_t *s = ordo_tls_new(sc, NULL), *c = ordo_tls_new(cc, "localhost");
    assert_false(ordo_tls_done(c));
    /* A client's write before the handshake is refused for now, not lost. */
    assert_int_equal(ordo_tls_write(c, "x", 1), 0);
    int rc, rs = pump(c, s, &rc);
    assert_int_equal(rs, 1);
    assert_int_equal(rc, 1);
    assert_true(ordo_tls_done(c) && ordo_tls_done(s));
    assert_non_null(strstr(ordo_tls_describe(s), "TLSv1.3"));
    char name[64];
    assert_int_equal(ordo_tls_peer_name(s, name, sizeof name), -1); /* no client cert */
    assert_int_equal(ordo_tls_peer_name(c, name, sizeof name), 0);
    assert_string_equal(name, "localhost");
    roundtrip(c, s, 5);
    roundtrip(s, c, 1 << 20);
    roundtrip(c, s, 100000);
    /* A clean close reads as the end on the other side. */
    ordo_tls_close(c);
    carry(c, s);
    char b[16];
    assert_int_equal(ordo_tls_read(s, b, sizeof b), ORDO_TLS_EOF);
    ordo_tls_free(c);
    ordo_tls_free(s);
    ordo_tls_ctx_free(cc);
    ordo_tls_ctx_free(sc);
}

/* A handshake the client must refuse; its error must contain why. */
static void refused_by_client(const char *server_cert, const char *ca, const char *host, const char *why)
{
    ordo_tls_ctx_t *sc = server_ctx(server_cert, ORDO_TLS_AUTH_NO, NULL);
    ordo_tls_ctx_t *cc = client_ctx(ca, NULL, NULL);
    ordo_tls_t *s = ordo_tls_new(sc, NULL), *c = ordo_tls_new(cc, host);
    int rc, rs = pump(c, s, &rc);
    assert_int_equal(rc, ORDO_TLS_ERR);
    assert_int_equal(rs, ORDO_TLS_ERR); /* the client's alert ends the server's side */
    if (strstr(ordo_tls_error(c), why) == NULL)
        fail_msg("client error '%s' lacks '%s'", ordo_tls_error(c), why);
    assert_false(ordo_tls_done(c));
    /* A failed session stays failed. */
    char b[8];
    assert_int_equal(ordo_tls_read(c, b, sizeof b), ORDO_TLS_ERR);
    assert_int_equal(ordo_tls_write(c, "x", 1), ORDO_TLS_ERR);
    ordo_tls_free(c);
    ordo_tls_free(s);
    ordo_tls_ctx_free(cc);
    ordo_tls_ctx_free(sc);
}

static void test_wrong_ca(void **state)
{
    (void)state;
    refused_by_client("server", "other-ca", "localhost", "certificate verify failed");
    refused_by_client("other", "ca", "localhost", "certificate verify failed: unable to get local issuer");
}

static void test_expired(void **state)
{
    (void)state;
    refused_by_client("expired", "ca", "localhost", "certificate has expired");
}

static void test_wrong_host(void **state)
{
    (void)state;
    refused_by_client("server", "ca", "db.example", "hostname mismatch");
    refused_by_client("wronghost", "ca", "localhost", "hostname mismatch");
    refused_by_client("server", "ca", "127.0.0.2", "mismatch");
    /* The address the certificate names passes. */
    ordo_tls_ctx_t *sc = server_ctx("server", ORDO_TLS_AUTH_NO, NULL);
    ordo_tls_ctx_t *cc = client_ctx("ca", NULL, NULL);
    ordo_tls_t *s = ordo_tls_new(sc, NULL), *c = ordo_tls_new(cc, "127.0.0.1");
    int rc;
    assert_int_equal(pump(c, s, &rc), 1);
    assert_int_equal(rc, 1);
    ordo_tls_free(c);
    ordo_tls_free(s);
    ordo_tls_ctx_free(cc);
    ordo_tls_ctx_free(sc);
}

/* A handshake between a server asking auth and a client showing cert
 * (NULL: none); returns the server's result, its peer name in name. */
static int client_auth(ordo_tls_auth_t auth, const char *cert, char *name, size_t cap)
{
    ordo_tls_ctx_t *sc = server_ctx("server", auth, NULL);
    ordo_tls_ctx_t *cc = client_ctx("ca", cert, NULL);
    ordo_tls_t *s = ordo_tls_new(sc, NULL), *c = ordo_tls_new(cc, "localhost");
    int rc, rs = pump(c, s, &rc);
    if (rs == 1)
        roundtrip(c, s, 10);
    if (ordo_tls_peer_name(s, name, cap) != 0)
        name[0] = '\0';
    ordo_tls_free(c);
    ordo_tls_free(s);
    ordo_tls_ctx_free(cc);
    ordo_tls_ctx_free(sc);
    return rs;
}

static void test_client_certificates(void **state)
{
    (void)state;
    char name[64];
    assert_int_equal(client_auth(ORDO_TLS_AUTH_YES, "client", name, sizeof name), 1);
    assert_string_equal(name, "client");
    assert_int_equal(client_auth(ORDO_TLS_AUTH_YES, NULL, name, sizeof name), ORDO_TLS_ERR);
    assert_int_equal(client_auth(ORDO_TLS_AUTH_YES, "other", name, sizeof name), ORDO_TLS_ERR);
    assert_int_equal(client_auth(ORDO_TLS_AUTH_YES, "expired", name, sizeof name), ORDO_TLS_ERR);
    assert_int_equal(client_auth(ORDO_TLS_AUTH_OPTIONAL, NULL, name, sizeof name), 1);
    assert_string_equal(name, "");
    assert_int_equal(client_auth(ORDO_TLS_AUTH_OPTIONAL, "client", name, sizeof name), 1);
    assert_string_equal(name, "client");
    assert_int_equal(client_auth(ORDO_TLS_AUTH_OPTIONAL, "other", name, sizeof name), ORDO_TLS_ERR);
    /* Not asked for: a certificate shown anyway names nobody. */
    assert_int_equal(client_auth(ORDO_TLS_AUTH_NO, "client", name, sizeof name), 1);
}

static void test_options(void **state)
{
    (void)state;
    ordo_tls_config_t cfg = {.role = ORDO_TLS_SERVER};
    ordo_tls_ctx_t *c = NULL;
    char err[256];
    char cert[320], key[320];
    snprintf(cert, sizeof cert, "%s", pem("server", "crt"));
    snprintf(key, sizeof key, "%s", pem("server", "key"));
    /* A server needs a certificate, and a certificate its key. */
    assert_int_equal(ordo_tls_ctx_new(&cfg, &c, err, sizeof err), -1);
    assert_null(c);
    cfg.cert_file = cert;
    assert_int_equal(ordo_tls_ctx_new(&cfg, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "tls-key-file"));
    cfg.key_file = "/nonexistent.key";
    assert_int_equal(ordo_tls_ctx_new(&cfg, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "tls-key-file /nonexistent.key"));
    cfg.key_file = pem("client", "key"); /* not server.crt's key */
    assert_int_equal(ordo_tls_ctx_new(&cfg, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "key values mismatch"));
    cfg.key_file = key;
    cfg.protocols = "TLSv1.2 SSLv3";
    assert_int_equal(ordo_tls_ctx_new(&cfg, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown protocol 'SSLv3'"));
    cfg.protocols = "TLSv1.3";
    cfg.ciphersuites = "TLS_NOT_A_SUITE";
    assert_int_equal(ordo_tls_ctx_new(&cfg, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "tls-ciphersuites"));
    cfg.ciphersuites = "TLS_CHACHA20_POLY1305_SHA256";
    cfg.auth = ORDO_TLS_AUTH_YES; /* without a CA to verify against */
    assert_int_equal(ordo_tls_ctx_new(&cfg, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "tls-ca-cert-file"));
    cfg.auth = ORDO_TLS_AUTH_NO;
    assert_int_equal(ordo_tls_ctx_new(&cfg, &c, err, sizeof err), 0);

    /* TLS 1.3 and the one suite it allows; a client on TLS 1.2 only is
     * refused. */
    ordo_tls_ctx_t *c12 = client_ctx("ca", NULL, "TLSv1.2");
    ordo_tls_t *s = ordo_tls_new(c, NULL), *cl = ordo_tls_new(c12, "localhost");
    int rc;
    assert_int_equal(pump(cl, s, &rc), ORDO_TLS_ERR);
    assert_int_equal(rc, ORDO_TLS_ERR);
    ordo_tls_free(cl);
    ordo_tls_free(s);
    ordo_tls_ctx_t *c13 = client_ctx("ca", NULL, "TLSv1.3");
    s = ordo_tls_new(c, NULL);
    cl = ordo_tls_new(c13, "localhost");
    assert_int_equal(pump(cl, s, &rc), 1);
    assert_string_equal(ordo_tls_describe(s), "TLSv1.3 TLS_CHACHA20_POLY1305_SHA256");
    ordo_tls_free(cl);
    ordo_tls_free(s);
    /* TLS 1.2 where both allow it. */
    ordo_tls_ctx_t *s12 = server_ctx("server", ORDO_TLS_AUTH_NO, "TLSv1.2");
    s = ordo_tls_new(s12, NULL);
    cl = ordo_tls_new(c12, "localhost");
    assert_int_equal(pump(cl, s, &rc), 1);
    assert_non_null(strstr(ordo_tls_describe(s), "TLSv1.2"));
    roundtrip(cl, s, 3000);
    ordo_tls_free(cl);
    ordo_tls_free(s);
    ordo_tls_ctx_free(s12);
    ordo_tls_ctx_free(c13);
    ordo_tls_ctx_free(c12);
    ordo_tls_ctx_free(c);
}

/* Bytes that are not TLS fail the server's session at once with a reason;
 * nothing is read as plaintext. */
static void garbage(const char *bytes, size_t len, const char *why)
{
    ordo_tls_ctx_t *sc = server_ctx("server", ORDO_TLS_AUTH_NO, NULL);
    ordo_tls_t *s = ordo_tls_new(sc, NULL);
    ordo_tls_feed(s, bytes, len);
    char b[64];
    assert_int_equal(ordo_tls_read(s, b, sizeof b), ORDO_TLS_ERR);
    if (why != NULL && strstr(ordo_tls_error(s), why) == NULL)
        fail_msg("server error '%s' lacks '%s'", ordo_tls_error(s), why);
    assert_false(ordo_tls_done(s));
    ordo_tls_free(s);
    ordo_tls_ctx_free(sc);
}

static void test_garbage(void **state)
{
    (void)state;
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    garbage(ping, sizeof ping - 1, "wrong version number");
    static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    garbage(get, sizeof get - 1, "http request");
    /* A record header announcing a handshake, then nonsense. */
    char junk[600];
    junk[0] = 0x16;
    junk[1] = 0x03;
    junk[2] = 0x01;
    junk[3] = 0x02;
    junk[4] = 0x00;
    for (size_t i = 5; i < sizeof junk; i++)
        junk[i] = (char)(i * 131 + 17);
    garbage(junk, sizeof junk, NULL);
    /* A record longer than TLS allows. */
    static const char huge[] = {0x17, 0x03, 0x03, 0x7f, 0xff, 0x00};
    garbage(huge, sizeof huge, NULL);
}

/* A handshake cut short: the server has part of a ClientHello, the client
 * part of the server's reply. Neither fails nor finishes; each waits for
 * the rest (the server's timeout is the caller's), and each frees
 * cleanly. */
static void test_truncated_handshake(void **state)
{
    (void)state;
    ordo_tls_ctx_t *sc = server_ctx("server", ORDO_TLS_AUTH_NO, NULL);
    ordo_tls_ctx_t *cc = client_ctx("ca", NULL, NULL);
    ordo_tls_t *s = ordo_tls_new(sc, NULL), *c = ordo_tls_new(cc, "localhost");
    assert_int_equal(ordo_tls_handshake(c), 0);
    char hello[4096];
    size_t n = ordo_tls_out_take(c, hello, sizeof hello);
    assert_true(n > 20);
    ordo_tls_feed(s, hello, n / 2);
    assert_int_equal(ordo_tls_handshake(s), 0);
    assert_int_equal(ordo_tls_out_pending(s), 0);
    char b[16];
    assert_int_equal(ordo_tls_read(s, b, sizeof b), 0);
    ordo_tls_feed(s, hello + n / 2, n - n / 2);
    assert_int_equal(ordo_tls_handshake(s), 0); /* it needs the client's Finished */
    char reply[8192];
    size_t m = ordo_tls_out_take(s, reply, sizeof reply);
    assert_true(m > 100);
    ordo_tls_feed(c, reply, m - 10);
    assert_int_equal(ordo_tls_handshake(c), 0);
    assert_false(ordo_tls_done(c));
    assert_string_equal(ordo_tls_error(c), "");
    ordo_tls_free(c);
    ordo_tls_free(s);
    ordo_tls_ctx_free(cc);
    ordo_tls_ctx_free(sc);
}

/* A reload swaps the certificate for new sessions; a live session goes on
 * with the old one; a reload that fails leaves the context as it was. */
static void test_reload(void **state)
{
    (void)state;
    ordo_tls_ctx_t *sc = server_ctx("server", ORDO_TLS_AUTH_NO, NULL);
    ordo_tls_ctx_t *cc = client_ctx("ca", NULL, NULL);
    ordo_tls_ctx_t *cc_other = client_ctx("other-ca", NULL, NULL);
    ordo_tls_t *old = ordo_tls_new(sc, NULL), *oldc = ordo_tls_new(cc, "localhost");
    int rc;
    assert_int_equal(pump(oldc, old, &rc), 1);

    ordo_tls_config_t cfg = {.role = ORDO_TLS_SERVER, .key_file = "/nonexistent.key"};
    char cert[320], key[320], err[256];
    snprintf(cert, sizeof cert, "%s", pem("other", "crt"));
    cfg.cert_file = cert;
    ordo_tls_ctx_t *kept = sc;
    assert_int_equal(ordo_tls_ctx_reload(&sc, &cfg, err, sizeof err), -1);
    assert_ptr_equal(sc, kept);
    snprintf(key, sizeof key, "%s", pem("other", "key"));
    cfg.key_file = key;
    assert_int_equal(ordo_tls_ctx_reload(&sc, &cfg, err, sizeof err), 0);
    assert_ptr_not_equal(sc, kept);

    ordo_tls_t *s = ordo_tls_new(sc, NULL), *c = ordo_tls_new(cc_other, "localhost");
    assert_int_equal(pump(c, s, &rc), 1);
    assert_int_equal(rc, 1);
    ordo_tls_free(c);
    ordo_tls_free(s);
    s = ordo_tls_new(sc, NULL);
    c = ordo_tls_new(cc, "localhost");
    pump(c, s, &rc);
    assert_int_equal(rc, ORDO_TLS_ERR); /* the old CA no longer vouches for it */
    ordo_tls_free(c);
    ordo_tls_free(s);
    roundtrip(oldc, old, 1000);
    roundtrip(old, oldc, 1000);
    ordo_tls_free(oldc);
    ordo_tls_free(old);
    ordo_tls_ctx_free(cc_other);
    ordo_tls_ctx_free(cc);
    ordo_tls_ctx_free(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_and_data),
        cmocka_unit_test(test_wrong_ca),
        cmocka_unit_test(test_expired),
        cmocka_unit_test(test_wrong_host),
        cmocka_unit_test(test_client_certificates),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_truncated_handshake),
        cmocka_unit_test(test_reload),
    };
    return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
