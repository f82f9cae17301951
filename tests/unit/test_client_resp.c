/*
 * test_client_resp.c -- the client's reply parser (src/client/cresp.c).
 *
 * Each case is a byte string and the transcript of the replies it must
 * give ("s:OK", "e:ERR x", "i:5", "n", "b:bytes", "[..]" arrays, "{..}"
 * maps, ">[..]" pushes). The same bytes are fed whole, split at every
 * point into two reads, and one byte at a time, the way a connection gets
 * them; every way must give the same transcript, with the consumed bytes
 * removed from the front of the buffer as the connection does. Malformed
 * input must be refused, never half-accepted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cresp.h"

static void dump(const ordo_reply_t *r, char *out, size_t cap)
{
    size_t n = strlen(out);
    switch (r->type) {
    case ORDO_REPLY_STATUS: snprintf(out + n, cap - n, "s:%s", r->str); break;
    case ORDO_REPLY_ERROR: snprintf(out + n, cap - n, "e:%s", r->str); break;
    case ORDO_REPLY_STRING: snprintf(out + n, cap - n, "b:%.*s", (int)r->len, r->str); break;
    case ORDO_REPLY_BIGNUM: snprintf(out + n, cap - n, "big:%s", r->str); break;
    case ORDO_REPLY_DOUBLE: snprintf(out + n, cap - n, "d:%g", r->dbl); break;
    case ORDO_REPLY_INTEGER: snprintf(out + n, cap - n, "i:%lld", (long long)r->integer); break;
    case ORDO_REPLY_NIL: snprintf(out + n, cap - n, "n"); break;
    case ORDO_REPLY_ARRAY:
    case ORDO_REPLY_MAP:
    case ORDO_REPLY_PUSH:
        snprintf(out + n, cap - n, "%s", r->type == ORDO_REPLY_MAP ? "{" : r->type == ORDO_REPLY_PUSH ? ">[" : "[");
        for (size_t i = 0; i < r->n; i++) {
            if (i)
                strncat(out, ",", cap - strlen(out) - 1);
            dump(r->elem[i], out, cap);
        }
        strncat(out, r->type == ORDO_REPLY_MAP ? "}" : "]", cap - strlen(out) - 1);
        break;
    }
}

/* Feed input in pieces of `step` bytes (0: whole) after the first `split`
 * bytes; returns the transcript, or "!" + error on a protocol error. */
static void feed(const char *in, size_t len, size_t split, size_t step, char *out, size_t cap)
{
    cresp_parser_t p;
    cresp_init(&p);
    cresp_buf_t b = { 0 };
    size_t given = 0;
    out[0] = '\0';
    while (given < len || b.len) {
        size_t k = len - given;
        if (split && given == 0)
            k = split < len ? split : len;
        else if (step && k > step)
            k = step;
        assert_int_equal(cresp_buf_append(&b, in + given, k), 0);
        given += k;
        for (;;) {
            size_t used;
            ordo_reply_t *r = NULL;
            int rc = cresp_parse(&p, b.data, b.len, &used, &r);
            cresp_buf_consume(&b, used);
            if (rc == CRESP_DONE) {
                if (out[0])
                    strncat(out, " ", cap - strlen(out) - 1);
                dump(r, out, cap);
                ordo_reply_free(r);
                continue;
            }
            if (rc == CRESP_ERROR) {
                snprintf(out + strlen(out), cap - strlen(out), "!%s", p.error);
                cresp_buf_free(&b);
                return;
            }
            assert_int_equal(rc, CRESP_NEED_MORE);
            break;
        }
        if (given == len)
            break;
    }
    if (b.len || p.depth)
        strncat(out, " ?incomplete", cap - strlen(out) - 1);
    cresp_reset(&p);
    cresp_buf_free(&b);
}

static void check_all_ways(const char *in, const char *want)
{
    size_t len = strlen(in);
    char got[4096];
    feed(in, len, 0, 0, got, sizeof got);
    assert_string_equal(got, want);
    feed(in, len, 0, 1, got, sizeof got);
    assert_string_equal(got, want);
    for (size_t s = 1; s < len; s++) {
        feed(in, len, s, 0, got, sizeof got);
        assert_string_equal(got, want);
    }
}

static void test_scalars(void **st)
{
    (void)st;
    check_all_ways("+OK\r\n-ERR bad thing\r\n:42\r\n:-7\r\n$3\r\nf\r\n\r\n$0\r\n\r\n$-1\r\n_\r\n",
                   "s:OK e:ERR bad thing i:42 i:-7 b:f\r\n b: n n");
    check_all_ways("#t\r\n#f\r\n,1.5\r\n(123456789012345678901234567890\r\n!7\r\nERR abc\r\n=8\r\ntxt:some\r\n",
                   "i:1 i:0 d:1.5 big:123456789012345678901234567890 e:ERR abc b:some");
}

static void test_aggregates(void **st)
{
    (void)st;
    check_all_ways("*2\r\n:1\r\n*2\r\n$1\r\na\r\n_\r\n*0\r\n*-1\r\n",
                   "[i:1,[b:a,n]] [] n");
    check_all_ways("%2\r\n+server\r\n+ordo\r\n+proto\r\n:3\r\n", "{s:server,s:ordo,s:proto,i:3}");
    check_all_ways("~2\r\n:1\r\n:2\r\n", "[i:1,i:2]");
    /* A push between two replies stays a separate, marked frame. */
    check_all_ways(":1\r\n>6\r\n$5\r\nwatch\r\n:1\r\n:9\r\n$3\r\nput\r\n$1\r\nk\r\n$1\r\nv\r\n:2\r\n",
                   "i:1 >[b:watch,i:1,i:9,b:put,b:k,b:v] i:2");
    /* Attributes are dropped, at the top and inside an aggregate. */
    check_all_ways("|1\r\n+ttl\r\n:3\r\n:5\r\n*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", "i:5 [i:1,i:2]");
}

static void test_torn_keeps_progress(void **st)
{
    (void)st;
    /* The first element of an array arrives, the second is torn: the first
     * is consumed and stays in the parser. */
    cresp_parser_t p;
    cresp_init(&p);
    const char *part = "*2\r\n$3\r\nabc\r\n$5\r\nde";
    size_t used;
    ordo_reply_t *r = NULL;
    assert_int_equal(cresp_parse(&p, part, strlen(part), &used, &r), CRESP_NEED_MORE);
    assert_int_equal(used, strlen("*2\r\n$3\r\nabc\r\n"));
    assert_int_equal(p.depth, 1);
    const char *rest = "$5\r\ndefgh\r\n";
    assert_int_equal(cresp_parse(&p, rest, strlen(rest), &used, &r), CRESP_DONE);
    assert_int_equal(used, strlen(rest));
    assert_int_equal(r->n, 2);
    assert_string_equal(r->elem[1]->str, "defgh");
    ordo_reply_free(r);
    /* A torn partial tree is freed by reset (ASan checks the leak). */
    assert_int_equal(cresp_parse(&p, part, strlen(part), &used, &r), CRESP_NEED_MORE);
    cresp_reset(&p);
    assert_int_equal(p.depth, 0);
}

static void test_binary_bulk(void **st)
{
    (void)st;
    const char in[] = "$4\r\na\0\r\n\r\n";
    cresp_parser_t p;
    cresp_init(&p);
    size_t used;
    ordo_reply_t *r;
    assert_int_equal(cresp_parse(&p, in, sizeof in - 1, &used, &r), CRESP_DONE);
    assert_int_equal(r->len, 4);
    assert_memory_equal(r->str, "a\0\r\n", 4);
    ordo_reply_free(r);
}

static void test_malformed(void **st)
{
    (void)st;
    const char *bad[] = {
        "?x\r\n",           /* unknown type */
        ":12a\r\n",         /* bad integer */
        ":\r\n",            /* empty integer */
        "$3\r\nabcd\r\n",   /* body longer than said */
        "$-2\r\n",          /* bad length */
        "*-5\r\n",          /* bad count */
        "+OK\n",            /* LF without CR */
        ":99999999999999999999\r\n", /* overflow */
        "#x\r\n",
        "!-1\r\n",
        "=3\r\nabc\r\n",    /* verbatim without format */
    };
    char got[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        feed(bad[i], strlen(bad[i]), 0, 0, got, sizeof got);
        assert_true(got[0] == '!');
    }
    /* Nesting beyond the limit is refused. */
    char deep[CRESP_DEPTH_MAX * 4 + 16] = "";
    for (int i = 0; i <= CRESP_DEPTH_MAX; i++)
        strcat(deep, "*1\r\n");
    strcat(deep, ":1\r\n");
    feed(deep, strlen(deep), 0, 0, got, sizeof got);
    assert_true(got[0] == '!');
    /* A header line with no end in sight is refused once past the limit. */
    size_t n = CRESP_LINE_MAX + 8;
    char *longline = malloc(n + 1);
    memset(longline, 'a', n);
    longline[0] = '+';
    longline[n] = '\0';
    feed(longline, n, 0, 0, got, sizeof got);
    assert_true(got[0] == '!');
    free(longline);
}

static void test_encode(void **st)
{
    (void)st;
    cresp_buf_t b = { 0 };
    const char *argv[] = { "SET", "k", "a\0b" };
    size_t lens[] = { 3, 1, 3 };
    assert_int_equal(cresp_encode(&b, 3, argv, lens), 0);
    const char want[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n";
    assert_int_equal(b.len, sizeof want - 1);
    assert_memory_equal(b.data, want, b.len);
    /* A second command is appended; counts of several digits, an empty
     * argument. */
    char big[1234];
    memset(big, 'x', sizeof big);
    const char *argv12[12] = { "Q.PULL", "", big };
    size_t lens12[12] = { 6, 0, sizeof big };
    for (int i = 3; i < 12; i++) {
        argv12[i] = "9";
        lens12[i] = 1;
    }
    assert_int_equal(cresp_encode(&b, 12, argv12, lens12), 0);
    const char *p = b.data + sizeof want - 1;
    const char head[] = "*12\r\n$6\r\nQ.PULL\r\n$0\r\n\r\n$1234\r\n";
    assert_memory_equal(p, head, sizeof head - 1);
    p += sizeof head - 1 + sizeof big;
    assert_memory_equal(p, "\r\n$1\r\n9\r\n", 9);
    assert_int_equal(b.len, sizeof want - 1 + sizeof head - 1 + sizeof big + 2 + 9 * 7);
    cresp_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_aggregates),
        cmocka_unit_test(test_torn_keeps_progress),
        cmocka_unit_test(test_binary_bulk),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_encode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
