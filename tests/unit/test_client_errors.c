/*
 * test_client_errors.c -- what the client reads in the server's error
 * replies (src/client/errors.c), shared by the blocking and the
 * asynchronous client: the -NOTLEADER redirect in every form the protocol
 * allows and the malformed ones it must refuse, the password-refusal
 * test of the handshake, and the one map from the server's error codes
 * (docs/protocol.md, "Errors") to ORDO_E* codes; and ordo_strerror(),
 * the one function that names every code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client_int.h"

/* parse() -- client_parse_notleader() into a host buffer that starts
 * poisoned, so a refused line can be checked to have written nothing. */
static int parse(const char *err, char *host, size_t cap, int *port)
{
    memset(host, 'X', cap);
    host[cap - 1] = '\0';
    *port = -7;
    return client_parse_notleader(err, host, cap, port);
}

static void test_redirect_host_port(void **st)
{
    (void)st;
    char host[CLIENT_HOST_MAX];
    int port;
    assert_int_equal(parse("NOTLEADER 10.0.0.2:7001", host, sizeof host, &port), CLIENT_REDIRECT_TO);
    assert_string_equal(host, "10.0.0.2");
    assert_int_equal(port, 7001);
    assert_int_equal(parse("NOTLEADER db-2.example:65535", host, sizeof host, &port), CLIENT_REDIRECT_TO);
    assert_string_equal(host, "db-2.example");
    assert_int_equal(port, 65535);
    /* Text after the address (a reason) is allowed after a space. */
    assert_int_equal(parse("NOTLEADER h:1 term 4", host, sizeof host, &port), CLIENT_REDIRECT_TO);
    assert_string_equal(host, "h");
    assert_int_equal(port, 1);
}

static void test_redirect_v6(void **st)
{
    (void)st;
    char host[CLIENT_HOST_MAX];
    int port;
    assert_int_equal(parse("NOTLEADER [::1]:7002", host, sizeof host, &port), CLIENT_REDIRECT_TO);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7002);
    assert_int_equal(parse("NOTLEADER [fe80::1:2]:80", host, sizeof host, &port), CLIENT_REDIRECT_TO);
    assert_string_equal(host, "fe80::1:2");
    assert_int_equal(port, 80);
    assert_int_equal(parse("NOTLEADER []:80", host, sizeof host, &port), CLIENT_REDIRECT_BAD);
}

static void test_redirect_unknown_leader(void **st)
{
    (void)st;
    char host[CLIENT_HOST_MAX];
    int port;
    assert_int_equal(parse("NOTLEADER ?", host, sizeof host, &port), CLIENT_REDIRECT_UNKNOWN);
    assert_int_equal(port, -7);
    assert_int_equal(host[0], 'X');
}

static void test_redirect_bad_port(void **st)
{
    (void)st;
    static const char *const bad[] = {
        "NOTLEADER h:0",     "NOTLEADER h:65536", "NOTLEADER h:99999999999999999999",
        "NOTLEADER h:abc",   "NOTLEADER h:12ab",  "NOTLEADER h:-1",
        "NOTLEADER h:+80",   "NOTLEADER h: 80",   "NOTLEADER h:",
        "NOTLEADER h",       "NOTLEADER :80",     "NOTLEADER",
        "NOTLEADERX h:80",   "ERR h:80",
    };
    char host[CLIENT_HOST_MAX];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int port;
        assert_int_equal(parse(bad[i], host, sizeof host, &port), CLIENT_REDIRECT_BAD);
        assert_int_equal(port, -7);
        assert_int_equal(host[0], 'X');
    }
}

static void test_redirect_overlong_host(void **st)
{
    (void)st;
    char line[CLIENT_HOST_MAX + 64];
    char host[CLIENT_HOST_MAX];
    int port;
    /* A host of CLIENT_HOST_MAX - 1 bytes fits (with its NUL); one more
     * does not. */
    int n = snprintf(line, sizeof line, "NOTLEADER %0*d:7001", CLIENT_HOST_MAX - 1, 0);
    assert_true(n > 0 && (size_t)n < sizeof line);
    assert_int_equal(parse(line, host, sizeof host, &port), CLIENT_REDIRECT_TO);
    assert_int_equal(strlen(host), CLIENT_HOST_MAX - 1);
    snprintf(line, sizeof line, "NOTLEADER %0*d:7001", CLIENT_HOST_MAX, 0);
    assert_int_equal(parse(line, host, sizeof host, &port), CLIENT_REDIRECT_BAD);
    assert_int_equal(port, -7);
    /* The bound is the caller's buffer, not a constant. */
    char small[8];
    assert_int_equal(parse("NOTLEADER 1234567:80", small, sizeof small, &port), CLIENT_REDIRECT_TO);
    assert_int_equal(parse("NOTLEADER 12345678:80", small, sizeof small, &port), CLIENT_REDIRECT_BAD);
}

static void test_auth_error(void **st)
{
    (void)st;
    ordo_reply_t e = { .type = ORDO_REPLY_ERROR };
    e.str = (char *)"WRONGPASS invalid username-password pair";
    assert_true(client_is_auth_error(&e));
    e.str = (char *)"NOAUTH Authentication required.";
    assert_true(client_is_auth_error(&e));
    e.str = (char *)"ERR AUTH <password> called without any password configured";
    assert_true(client_is_auth_error(&e));
    e.str = (char *)"DENIED ordod is in protected mode";
    assert_true(client_is_auth_error(&e));
    e.str = (char *)"ERR unknown command 'HELLO'";
    assert_false(client_is_auth_error(&e));
    ordo_reply_t s = { .type = ORDO_REPLY_STATUS, .str = (char *)"WRONGPASS" };
    assert_false(client_is_auth_error(&s));
}

/* docs/protocol.md's table of error codes, row by row, with the code each
 * must map to. A row added there and to the client's map without a line
 * here fails test_error_map_is_covered. */
static const struct {
    const char *line;
    int code;
} protocol_errors[] = {
    { "ERR syntax error", ORDO_ESERVER },
    { "CONFLICT 17", ORDO_ECONFLICT },
    { "EXECABORT Transaction discarded because of previous errors.", ORDO_ESERVER },
    { "COMPACTED 5", ORDO_ECOMPACTED },
    { "LIMIT max-value-bytes", ORDO_ELIMIT },
    { "NOTFOUND lease 9", ORDO_ENOTFOUND },
    { "NOTHOLDER token 3 does not hold lock 'l' now", ORDO_ENOTHOLDER },
    { "BUSY queue q is full", ORDO_EBUSY },
    { "TIMEOUT message 4 still queued", ORDO_ETIMEDOUT },
    { "DEADLETTER message 4", ORDO_EDEADLETTER },
    { "NOAUTH Authentication required.", ORDO_EAUTH },
    { "WRONGPASS invalid username-password pair", ORDO_EAUTH },
    { "NOPROTO unsupported protocol version", ORDO_ESERVER },
    { "DENIED ordod is in protected mode", ORDO_EAUTH },
    { "NOTLEADER 127.0.0.1:7001", ORDO_ENOTLEADER },
    { "READONLY the log cannot be written", ORDO_EREADONLY },
};
#define PROTOCOL_ERRORS (sizeof protocol_errors / sizeof protocol_errors[0])

static void test_error_map(void **st)
{
    (void)st;
    for (size_t i = 0; i < PROTOCOL_ERRORS; i++)
        assert_int_equal(client_error_code(protocol_errors[i].line, NULL), protocol_errors[i].code);
    /* -BUSY is "the queue is full, it refused": ORDO_EBUSY, not the
     * in-process ORDO_EFULL of a caller that chose not to wait. */
    assert_int_equal(client_error_code("BUSY", NULL), ORDO_EBUSY);
    /* The whole first word, not a prefix. */
    assert_int_equal(client_error_code("BUSYX", NULL), ORDO_ESERVER);
    assert_int_equal(client_error_code("NOTLEADERS h:1", NULL), ORDO_ESERVER);
    assert_int_equal(client_error_code("", NULL), ORDO_ESERVER);
    assert_int_equal(client_error_code("WHATEVER else", NULL), ORDO_ESERVER);
    /* Revisions of CONFLICT and COMPACTED; 0 for the others. */
    int64_t rev = -1;
    assert_int_equal(client_error_code("CONFLICT 42", &rev), ORDO_ECONFLICT);
    assert_int_equal(rev, 42);
    assert_int_equal(client_error_code("COMPACTED 7", &rev), ORDO_ECOMPACTED);
    assert_int_equal(rev, 7);
    assert_int_equal(client_error_code("LIMIT 99", &rev), ORDO_ELIMIT);
    assert_int_equal(rev, 0);
}

static void test_error_map_is_covered(void **st)
{
    (void)st;
    assert_int_equal(client_error_map_len, PROTOCOL_ERRORS);
    for (size_t i = 0; i < client_error_map_len; i++) {
        const char *w = client_error_map[i].word;
        size_t found = 0;
        for (size_t k = 0; k < PROTOCOL_ERRORS; k++) {
            size_t n = strcspn(protocol_errors[k].line, " ");
            if (strlen(w) == n && memcmp(w, protocol_errors[k].line, n) == 0) {
                assert_int_equal(client_error_map[i].code, protocol_errors[k].code);
                found++;
            }
        }
        assert_int_equal(found, 1);
    }
}

/* ordo_client_reply_error() is the map plus the client's error fields. */
static void test_reply_error(void **st)
{
    (void)st;
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, NULL), ORDO_OK);
    ordo_reply_t e = { .type = ORDO_REPLY_ERROR, .str = (char *)"COMPACTED 12", .len = 12 };
    assert_int_equal(ordo_client_reply_error(c, &e), ORDO_ECOMPACTED);
    assert_int_equal(ordo_client_err_rev(c), 12);
    assert_string_equal(ordo_client_errstr(c), "COMPACTED 12");
    ordo_reply_t ok = { .type = ORDO_REPLY_INTEGER, .integer = 1 };
    assert_int_equal(ordo_client_reply_error(c, &ok), ORDO_OK);
    assert_int_equal(ordo_client_err_rev(c), 0);
    ordo_client_free(c);
}

/* Every code libordo returns: ordo/common.h's, then ordo/client.h's. */
static const int all_codes[] = {
    ORDO_OK,         ORDO_EINVAL,      ORDO_ENOMEM,     ORDO_EFULL,       ORDO_ETIMEDOUT,
    ORDO_ECANCELED,  ORDO_ESTOPPED,    ORDO_EHANDLER,   ORDO_ENOTFOUND,   ORDO_EDECLINED,
    ORDO_EBUSY,      ORDO_ESYS,        ORDO_ECONN,      ORDO_EPROTO,      ORDO_ESERVER,
    ORDO_ECONFLICT,  ORDO_ENOTHOLDER,  ORDO_ECOMPACTED, ORDO_ELIMIT,      ORDO_EDEADLETTER,
    ORDO_EAUTH,      ORDO_EREADONLY,   ORDO_ENOTLEADER, ORDO_ESTALE,     ORDO_ETLS,
};
#define ALL_CODES (sizeof all_codes / sizeof all_codes[0])

static void test_strerror_names_every_code(void **st)
{
    (void)st;
    const char *unknown = ordo_strerror(1);
    assert_string_equal(unknown, "unknown error");
    for (size_t i = 0; i < ALL_CODES; i++) {
        const char *n = ordo_strerror(all_codes[i]);
        assert_non_null(n);
        assert_true(n[0] != '\0');
        assert_string_not_equal(n, unknown);
        for (size_t k = 0; k < i; k++)
            assert_string_not_equal(n, ordo_strerror(all_codes[k]));
    }
    /* And no code outside that list has a name: a new code must be added
     * to all_codes (and so checked for a distinct name) to get one. */
    for (int e = -1000; e <= 0; e++) {
        size_t listed = 0;
        for (size_t i = 0; i < ALL_CODES; i++)
            listed += all_codes[i] == e;
        if (!listed)
            assert_string_equal(ordo_strerror(e), unknown);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redirect_host_port),
        cmocka_unit_test(test_redirect_v6),
        cmocka_unit_test(test_redirect_unknown_leader),
        cmocka_unit_test(test_redirect_bad_port),
        cmocka_unit_test(test_redirect_overlong_host),
        cmocka_unit_test(test_auth_error),
        cmocka_unit_test(test_error_map),
        cmocka_unit_test(test_error_map_is_covered),
        cmocka_unit_test(test_reply_error),
        cmocka_unit_test(test_strerror_names_every_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
