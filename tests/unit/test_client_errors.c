/*
 * test_client_errors.c -- what the client reads in the server's error
 * replies (src/client/errors.c), shared by the blocking and the
 * asynchronous client: the -NOTLEADER redirect in every form the protocol
 * allows and the malformed ones it must refuse, and the password-refusal
 * test of the handshake.
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
    e.str = (char *)"ERR unknown command 'HELLO'";
    assert_false(client_is_auth_error(&e));
    ordo_reply_t s = { .type = ORDO_REPLY_STATUS, .str = (char *)"WRONGPASS" };
    assert_false(client_is_auth_error(&s));
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
