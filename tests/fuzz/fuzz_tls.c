/*
 * fuzz_tls.c -- libFuzzer target for the server side of the TLS engine
 * (base/tls.c) as a TLS port meets it: whatever a peer sends before and
 * during the handshake.
 *
 * Input: byte 0 picks how the rest arrives: bits 0-3 a chunk size k (0:
 * all at once), bit 4 chunks of pseudo-random sizes 1..k; bytes 1.. are
 * the peer's stream. A fresh server session of one context (a
 * self-signed EC certificate made at start, written under fuzz_tmpdir())
 * is fed each chunk, read after each (ordo_tls_read, as net/net_tls.c
 * does) and drained of its ciphertext.
 *
 * Checked on every input (abort on violation):
 *   - no plaintext before the handshake is done, and never more than
 *     asked for;
 *   - a failed session stays failed (read, write and handshake all
 *     answer ORDO_TLS_ERR), with a non-empty reason;
 *   - what the session has for the peer is taken whole.
 *
 * Seeds: a real client's first flight (ClientHello) for TLS 1.3 and for
 * TLS 1.2, and a ClientHello cut in half.
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=tls).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "base/tls.h"
#include "fuzz.h"

static ordo_tls_ctx_t *server_ctx;
static char cert_path[512], key_path[512];

/* A self-signed certificate for CN=localhost and its key, as PEM files. */
static void make_cert(void)
{
    const char *dir = fuzz_tmpdir();
    snprintf(cert_path, sizeof cert_path, "%s/tls.crt", dir);
    snprintf(key_path, sizeof key_path, "%s/tls.key", dir);
    EVP_PKEY *key = EVP_EC_gen("P-256");
    CHECK(key != NULL);
    X509 *x = X509_new();
    CHECK(x != NULL);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600L * 24 * 365);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(x, name);
    CHECK(X509_sign(x, key, EVP_sha256()) > 0);
    FILE *f = fopen(cert_path, "w");
    CHECK(f != NULL && PEM_write_X509(f, x) == 1);
    fclose(f);
    f = fopen(key_path, "w");
    CHECK(f != NULL && PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) == 1);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(key);
}

static ordo_tls_ctx_t *ctx_of(ordo_tls_role_t role, const char *protocols)
{
    ordo_tls_config_t cfg = {.role = role, .protocols = protocols, .no_verify = true};
    if (role == ORDO_TLS_SERVER) {
        cfg.cert_file = cert_path;
        cfg.key_file = key_path;
    }
    ordo_tls_ctx_t *c = NULL;
    char err[256];
    if (ordo_tls_ctx_new(&cfg, &c, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tls: %s\n", err);
        abort();
    }
    return c;
}

static void setup(void)
{
    if (server_ctx != NULL)
        return;
    make_cert();
    server_ctx = ctx_of(ORDO_TLS_SERVER, NULL);
}

/* A client's first flight under protocols into buf; returns its length. */
static size_t client_hello(const char *protocols, char *buf, size_t cap)
{
    ordo_tls_ctx_t *cc = ctx_of(ORDO_TLS_CLIENT, protocols);
    ordo_tls_t *c = ordo_tls_new(cc, "localhost");
    CHECK(c != NULL && ordo_tls_handshake(c) == 0);
    size_t n = ordo_tls_out_take(c, buf, cap);
    ordo_tls_free(c);
    ordo_tls_ctx_free(cc);
    return n;
}

void fuzz_seeds(void)
{
    setup();
    char in[8192];
    in[0] = 0;
    size_t n = client_hello(NULL, in + 1, sizeof in - 1);
    fuzz_seed("hello13", in, n + 1);
    n = client_hello("TLSv1.2", in + 1, sizeof in - 1);
    fuzz_seed("hello12", in, n + 1);
    in[0] = 0x17; /* random chunks of up to 7 bytes */
    fuzz_seed("hello12-half", in, n / 2 + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size == 0)
        return 0;
    unsigned k = data[0] & 0x0f;
    bool random_sizes = (data[0] & 0x10) != 0;
    const uint8_t *p = data + 1;
    size_t left = size - 1;
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ size;
    ordo_tls_t *s = ordo_tls_new(server_ctx, NULL);
    CHECK(s != NULL);
    bool failed = false;
    char plain[4096], out[4096];
    while (left > 0 && !failed) {
        size_t chunk = left;
        if (k != 0) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            chunk = random_sizes ? 1 + (size_t)((rng >> 33) % k) : k;
            if (chunk > left)
                chunk = left;
        }
        ordo_tls_feed(s, p, chunk);
        p += chunk;
        left -= chunk;
        for (;;) {
            ssize_t got = ordo_tls_read(s, plain, sizeof plain);
            CHECK(got <= (ssize_t)sizeof plain);
            if (got > 0) {
                CHECK(ordo_tls_done(s)); /* no plaintext before the handshake */
                continue;
            }
            if (got == ORDO_TLS_ERR) {
                failed = true;
                CHECK(ordo_tls_error(s)[0] != '\0');
            }
            break;
        }
        size_t pending = ordo_tls_out_pending(s);
        size_t taken = 0, t;
        while ((t = ordo_tls_out_take(s, out, sizeof out)) > 0)
            taken += t;
        CHECK(taken == pending && ordo_tls_out_pending(s) == 0);
    }
    if (failed) {
        CHECK(ordo_tls_read(s, plain, sizeof plain) == ORDO_TLS_ERR);
        CHECK(ordo_tls_write(s, "x", 1) == ORDO_TLS_ERR);
        CHECK(ordo_tls_handshake(s) == ORDO_TLS_ERR);
    }
    ordo_tls_free(s);
    return 0;
}
