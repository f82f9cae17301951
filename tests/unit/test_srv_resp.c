/*
 * test_srv_resp.c -- the RESP parser and encoder (src/server/net/resp.c).
 *
 * Parser tests drive resp_parse() the way a connection does (append what
 * arrived, parse until NEED_MORE, consume; so every call passes input that
 * starts at the current command's first byte, as the resumable parser
 * requires, while the buffer may move as it grows) and compare a transcript of what
 * came out: "[arg|arg]" per command, "E" per empty request, "!msg" for a
 * protocol error. Feeding the same bytes whole, split at every point, and
 * byte by byte must give the same transcript; and for valid input no
 * progress may happen before the need_bytes hint said it could.
 * Encoder tests compare exact bytes for RESP2 and RESP3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/resp.h"

static const resp_limits_t default_limits = {
    .args_max = 1024,
    .bulk_max = 1 << 20,
    .inline_max = 64 * 1024,
};

/* ---- a simulated connection ---------------------------------------------- */

typedef struct conn_s {
    resp_limits_t lim;
    ordo_buf_t in;
    ordo_buf_t log;     /* transcript */
    resp_cmd_t cmd;
    size_t need;        /* last need_bytes hint (0 after progress) */
    int closed;
    int check_need;     /* assert no progress before the hint (valid input) */
} conn_t;

static void conn_init(conn_t *c, const resp_limits_t *lim, int check_need)
{
    memset(c, 0, sizeof *c);
    c->lim = *lim;
    c->check_need = check_need;
}

static void conn_free(conn_t *c)
{
    ordo_buf_free(&c->in);
    ordo_buf_free(&c->log);
    resp_cmd_free(&c->cmd);
}

static void log_arg(ordo_buf_t *log, const resp_arg_t *a)
{
    for (size_t i = 0; i < a->len; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '|' && ch != '\\')
            ordo_buf_append(log, &ch, 1);
        else
            ordo_buf_printf(log, "\\x%02x", ch);
    }
}

/* Every argument lies in the input (multibulk) or in argbuf (inline). */
static void check_args(const conn_t *c, size_t consumed)
{
    const resp_cmd_t *cmd = &c->cmd;
    assert_true(cmd->argc >= 1 && cmd->argc <= c->lim.args_max);
    for (size_t i = 0; i < cmd->argc; i++) {
        const resp_arg_t *a = &cmd->argv[i];
        assert_true(a->len <= c->lim.bulk_max);
        int in_input = a->ptr >= c->in.data && a->ptr + a->len <= c->in.data + consumed;
        int in_argbuf = cmd->argbuf.data != NULL && a->ptr >= cmd->argbuf.data &&
                        a->ptr + a->len <= cmd->argbuf.data + cmd->argbuf.len;
        assert_true(in_input || in_argbuf);
    }
}

static void conn_feed(conn_t *c, const void *p, size_t n)
{
    if (c->closed)
        return;
    ordo_buf_append(&c->in, p, n);
    for (;;) {
        size_t consumed = 99, need = 99;
        const char *err = "x";
        int s = resp_parse(c->in.data, c->in.len, &c->lim, &c->cmd, &consumed, &need, &err);
        if (s == RESP_NEED_MORE) {
            assert_int_equal(consumed, 0);
            assert_true(need > c->in.len);
            c->need = need;
            return;
        }
        if (c->check_need)
            assert_true(c->in.len >= c->need);
        if (s == RESP_PROTO_ERROR) {
            assert_non_null(err);
            ordo_buf_printf(&c->log, "!%s", err);
            c->closed = 1;
            return;
        }
        assert_true(consumed >= 1 && consumed <= c->in.len);
        if (s == RESP_EMPTY) {
            ordo_buf_puts(&c->log, "E");
        } else {
            assert_int_equal(s, RESP_COMMAND);
            check_args(c, consumed);
            ordo_buf_puts(&c->log, "[");
            for (size_t i = 0; i < c->cmd.argc; i++) {
                if (i > 0)
                    ordo_buf_puts(&c->log, "|");
                log_arg(&c->log, &c->cmd.argv[i]);
            }
            ordo_buf_puts(&c->log, "]");
        }
        ordo_buf_consume(&c->in, consumed);
        c->need = 0;
    }
}

/* The transcript of data fed at the given cut points (ascending). */
static char *transcript_cuts(const char *data, size_t len, const resp_limits_t *lim,
                             const size_t *cuts, size_t ncuts, int check_need)
{
    conn_t c;
    conn_init(&c, lim, check_need);
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        /* Feed through a heap copy of exactly the new bytes so ASan sees
         * any read beyond what has arrived. */
        char *chunk = malloc(end - at + 1);
        memcpy(chunk, data + at, end - at);
        conn_feed(&c, chunk, end - at);
        free(chunk);
        at = end;
    }
    ordo_buf_append(&c.log, "", 1);
    char *out = strdup(c.log.data);
    conn_free(&c);
    return out;
}

static char *transcript(const char *data, size_t len, const resp_limits_t *lim)
{
    return transcript_cuts(data, len, lim, NULL, 0, 0);
}

/* Whole, every single split, and byte by byte give the same transcript. */
static void check_all_splits(const char *data, size_t len, const resp_limits_t *lim,
                             const char *expect, int valid)
{
    char *whole = transcript(data, len, lim);
    assert_string_equal(whole, expect);
    for (size_t k = 0; k <= len; k++) {
        char *t = transcript_cuts(data, len, lim, &k, 1, valid);
        assert_string_equal(t, expect);
        free(t);
    }
    size_t *cuts = malloc((len + 1) * sizeof *cuts);
    for (size_t k = 0; k < len; k++)
        cuts[k] = k + 1;
    char *t = transcript_cuts(data, len, lim, cuts, len, valid);
    assert_string_equal(t, expect);
    free(t);
    free(cuts);
    free(whole);
}

#define S(lit) (lit), (sizeof(lit) - 1)

/* Parse the whole of lit once; expect status and, for errors, the message. */
static void expect_once(const char *data, size_t len, const resp_limits_t *lim, int status,
                        const char *msg)
{
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    char *copy = malloc(len + 1);
    memcpy(copy, data, len);
    int s = resp_parse(copy, len, lim, &cmd, &consumed, &need, &err);
    if (s != status)
        fail_msg("input %.*s: status %d, expected %d (err %s)", (int)len, data, s, status,
                 s == RESP_PROTO_ERROR ? err : "-");
    if (status == RESP_PROTO_ERROR)
        assert_string_equal(err, msg);
    if (status == RESP_NEED_MORE)
        assert_int_equal(consumed, 0);
    free(copy);
    resp_cmd_free(&cmd);
}

/* ---- parser: valid input --------------------------------------------------- */

static void test_multibulk_zero_copy(void **state)
{
    (void)state;
    const char in[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\nextra";
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    int s = resp_parse(in, sizeof in - 1, &default_limits, &cmd, &consumed, &need, &err);
    assert_int_equal(s, RESP_COMMAND);
    assert_int_equal(consumed, sizeof in - 1 - 5);
    assert_int_equal(cmd.argc, 3);
    assert_ptr_equal(cmd.argv[0].ptr, in + 8);
    assert_int_equal(cmd.argv[0].len, 3);
    assert_memory_equal(cmd.argv[1].ptr, "k", 1);
    assert_ptr_equal(cmd.argv[2].ptr, in + 24);
    assert_int_equal(cmd.argv[2].len, 5);
    /* The same cmd is reused for the next parse. */
    s = resp_parse(in + consumed, 5, &default_limits, &cmd, &consumed, &need, &err);
    assert_int_equal(s, RESP_NEED_MORE);
    assert_int_equal(cmd.argc, 0);
    resp_cmd_free(&cmd);
    resp_cmd_free(&cmd); /* idempotent */
}

static const char pipeline[] =
    "*1\r\n$4\r\nPING\r\n"
    "*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n"
    "*0\r\n"
    "*-1\r\n"
    "PING\r\n"
    "\r\n"
    "\n"
    "set k \"a b\"\n"
    "*3\r\n$3\r\nSET\r\n$0\r\n\r\n$12\r\nbin\0\r\n\r\nx\r\n\n\r\n"
    "  echo  'it\\'s'\t\"\\x41\\n\"  \r\n"
    "*2\r\n$4\r\nECHO\r\n$10\r\n0123456789\r\n";

static const char pipeline_expect[] =
    "[PING][GET|foo]EE[PING]EE[set|k|a b][SET||bin\\x00\\x0d\\x0a\\x0d\\x0ax\\x0d\\x0a\\x0a]"
    "[echo|it's|A\\x0a][ECHO|0123456789]";

static void test_pipeline_all_splits(void **state)
{
    (void)state;
    check_all_splits(pipeline, sizeof pipeline - 1, &default_limits, pipeline_expect, 1);
}

static void test_binary_safe_bulk(void **state)
{
    (void)state;
    const char in[] = "*2\r\n$3\r\n\0\r\n\r\n$6\r\n\r\n\r\n\0\n\r\n";
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    assert_int_equal(resp_parse(in, sizeof in - 1, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_COMMAND);
    assert_int_equal(consumed, sizeof in - 1);
    assert_int_equal(cmd.argv[0].len, 3);
    assert_memory_equal(cmd.argv[0].ptr, "\0\r\n", 3);
    assert_int_equal(cmd.argv[1].len, 6);
    assert_memory_equal(cmd.argv[1].ptr, "\r\n\r\n\0\n", 6);
    resp_cmd_free(&cmd);
}

/* Each case below is a different partial command on the same cmd, so the
 * progress of the previous one is dropped with resp_cmd_reset() (resp.h:
 * the input must continue the partial command). */
static void test_need_bytes(void **state)
{
    (void)state;
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    /* Nothing at all. */
    assert_int_equal(resp_parse(NULL, 0, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_NEED_MORE);
    assert_int_equal(need, 1);
    /* A header cut short: unknown, len + 1. */
    const char a[] = "*2\r\n$3";
    assert_int_equal(resp_parse(a, 6, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_NEED_MORE);
    assert_int_equal(need, 7);
    /* Header known, body of 1000 outstanding: 4 + 7 + 1000 + 2. */
    resp_cmd_reset(&cmd); /* a different command: drop the partial one */
    const char b[] = "*1\r\n$1000\r\nabc";
    assert_int_equal(resp_parse(b, sizeof b - 1, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_NEED_MORE);
    assert_int_equal(consumed, 0);
    assert_int_equal(need, 4 + 7 + 1000 + 2);
    /* Second bulk of 5 outstanding after a complete first one. */
    resp_cmd_reset(&cmd); /* a different command: drop the partial one */
    const char c[] = "*2\r\n$1\r\na\r\n$5\r\n";
    assert_int_equal(resp_parse(c, sizeof c - 1, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_NEED_MORE);
    assert_int_equal(need, sizeof c - 1 + 5 + 2);
    /* Body here but its CRLF is not. */
    resp_cmd_reset(&cmd); /* a different command: drop the partial one */
    const char d[] = "*1\r\n$2\r\nab\r";
    assert_int_equal(resp_parse(d, sizeof d - 1, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_NEED_MORE);
    assert_int_equal(need, sizeof d);
    /* Inline without its newline. */
    resp_cmd_reset(&cmd); /* a different command: drop the partial one */
    assert_int_equal(resp_parse("PIN", 3, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_NEED_MORE);
    assert_int_equal(need, 4);
    resp_cmd_free(&cmd);
}

/* A client claiming a huge count or length must not make the parser
 * allocate for it: argv grows only with arguments actually received. */
static void test_no_allocation_from_claims(void **state)
{
    (void)state;
    resp_limits_t lim = {.args_max = (size_t)1 << 40, .bulk_max = (size_t)1 << 40, .inline_max = 1024};
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    const char a[] = "*1000000000\r\n$1\r\na\r\n$2000000000\r\nxy";
    int s = resp_parse(a, sizeof a - 1, &lim, &cmd, &consumed, &need, &err);
    assert_int_equal(s, RESP_NEED_MORE);
    assert_int_equal(need, 20 + 13 + 2000000000ull + 2);
    assert_true(cmd.argv_cap <= 8);
    resp_cmd_free(&cmd);
}

static void test_empty_requests(void **state)
{
    (void)state;
    check_all_splits(S("*0\r\n*-1\r\n\r\n\n   \t \r\n"), &default_limits, "EEEEE", 1);
}

/* ---- parser: errors -------------------------------------------------------- */

static void test_bad_multibulk_length(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "*-2\r\n", "*abc\r\n", "*+1\r\n", "* 1\r\n", "*1 \r\n", "*01\r\n", "*-0\r\n",
        "*\r\n", "*-\r\n", "*1\rX", "*1\n", "*--1\r\n", "*1x",
        "*9223372036854775808\r\n", "*99999999999999999999", "*18446744073709551617\r\n",
        "*1025\r\n", /* above args_max */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_once(bad[i], strlen(bad[i]), &default_limits, RESP_PROTO_ERROR,
                    "invalid multibulk length");
    /* Valid prefixes wait. */
    static const char *const more[] = {"*", "*1", "*-", "*-1", "*1024", "*1\r", "*922337203685477580"};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        expect_once(more[i], strlen(more[i]), &default_limits, RESP_NEED_MORE, NULL);
    expect_once(S("*1024\r\n"), &default_limits, RESP_NEED_MORE, NULL);
}

/* An unterminated header is an error well before any sane bound, not a
 * reason to wait forever. */
static void test_unterminated_header(void **state)
{
    (void)state;
    size_t n = 70000;
    char *in = malloc(n);
    in[0] = '*';
    memset(in + 1, '1', n - 1);
    expect_once(in, n, &default_limits, RESP_PROTO_ERROR, "invalid multibulk length");
    memcpy(in, "*1\r\n$", 5);
    expect_once(in, n, &default_limits, RESP_PROTO_ERROR, "invalid bulk length");
    /* 19 digits are still a valid prefix; the 20th is not. */
    expect_once(in, 4 + 1 + 19, &default_limits, RESP_NEED_MORE, NULL);
    expect_once(in, 4 + 1 + 20, &default_limits, RESP_PROTO_ERROR, "invalid bulk length");
    free(in);
}

static void test_bad_bulk_length(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "*1\r\n$-1\r\n", "*1\r\n$-5\r\n", "*1\r\n$abc\r\n", "*1\r\n$+3\r\n", "*1\r\n$03\r\n",
        "*1\r\n$\r\n", "*1\r\n$ 3\r\n", "*1\r\n$3 \r\n", "*1\r\n$3\rx", "*1\r\n$3\n",
        "*1\r\n$9223372036854775807\r\n", "*1\r\n$9223372036854775808\r\n",
        "*1\r\n$1048577\r\n", /* above bulk_max */
        "*2\r\n$1\r\na\r\n$x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_once(bad[i], strlen(bad[i]), &default_limits, RESP_PROTO_ERROR,
                    "invalid bulk length");
    expect_once(S("*1\r\n$1048576\r\n"), &default_limits, RESP_NEED_MORE, NULL);
}

static void test_expected_dollar(void **state)
{
    (void)state;
    expect_once(S("*1\r\nX"), &default_limits, RESP_PROTO_ERROR, "expected '$', got 'X'");
    expect_once(S("*2\r\n$1\r\na\r\n:1\r\n"), &default_limits, RESP_PROTO_ERROR,
                "expected '$', got ':'");
    expect_once(S("*1\r\n\x01"), &default_limits, RESP_PROTO_ERROR, "expected '$', got '\\x01'");
    expect_once(S("*1\r\n\xff"), &default_limits, RESP_PROTO_ERROR, "expected '$', got '\\xff'");
    expect_once(S("*1\r\n\r\n"), &default_limits, RESP_PROTO_ERROR, "expected '$', got '\\x0d'");
    /* Nested arrays: arguments must be bulk strings. */
    expect_once(S("*1\r\n*1\r\n$1\r\na\r\n"), &default_limits, RESP_PROTO_ERROR,
                "expected '$', got '*'");
}

static void test_bulk_not_crlf(void **state)
{
    (void)state;
    const char *msg = "bulk string not terminated by CRLF";
    expect_once(S("*1\r\n$3\r\nabcXY"), &default_limits, RESP_PROTO_ERROR, msg);
    expect_once(S("*1\r\n$3\r\nabc\rX"), &default_limits, RESP_PROTO_ERROR, msg);
    expect_once(S("*1\r\n$3\r\nabc\n\r"), &default_limits, RESP_PROTO_ERROR, msg);
    expect_once(S("*1\r\n$3\r\nabcd\r\n"), &default_limits, RESP_PROTO_ERROR, msg);
    /* Found as soon as the byte after the body is here. */
    expect_once(S("*1\r\n$3\r\nabcX"), &default_limits, RESP_PROTO_ERROR, msg);
    expect_once(S("*1\r\n$3\r\nabc\r"), &default_limits, RESP_NEED_MORE, NULL);
}

/* An error stops the stream however the bytes arrive; commands before it
 * come out. */
static void test_error_after_commands_all_splits(void **state)
{
    (void)state;
    check_all_splits(S("*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n*1\r\n$1\r\na\r\nPING\r\n"),
                     &default_limits, "[PING][PING]!expected '$', got '*'", 0);
    check_all_splits(S("GET a\r\n*1\r\n$2\r\nabc\r\n"), &default_limits,
                     "[GET|a]!bulk string not terminated by CRLF", 0);
    check_all_splits(S("*2\r\n$1\r\na\r\n$-1\r\n"), &default_limits, "!invalid bulk length", 0);
}

static void test_limits(void **state)
{
    (void)state;
    resp_limits_t lim = {.args_max = 2, .bulk_max = 4, .inline_max = 16};
    check_all_splits(S("*2\r\n$4\r\nabcd\r\n$0\r\n\r\n"), &lim, "[abcd|]", 1);
    expect_once(S("*3\r\n"), &lim, RESP_PROTO_ERROR, "invalid multibulk length");
    expect_once(S("*1\r\n$5\r\n"), &lim, RESP_PROTO_ERROR, "invalid bulk length");
    /* Inline: line length, argument count and argument size. */
    check_all_splits(S("0123456789abcdef\n"), &lim, "!too big inline request", 0);
    check_all_splits(S("0123456789 bcdef\r\n"), &lim, "!too big inline request", 0);
    check_all_splits(S("abcd x\n"), &lim, "[abcd|x]", 1);
    check_all_splits(S("a b c\n"), &lim, "!too many arguments in inline request", 0);
    check_all_splits(S("a 01234\n"), &lim, "!too big inline request", 0);
    check_all_splits(S("\"0123\"\n"), &lim, "[0123]", 1);
    /* inline_max counts the line up to, not including, its '\n'. */
    lim.args_max = 100;
    lim.bulk_max = 100;
    check_all_splits(S("0123456789 bcdef\n"), &lim, "[0123456789|bcdef]", 1);
    check_all_splits(S("0123456789 bcde\r\n"), &lim, "[0123456789|bcde]", 1);
    /* Without a newline: wait up to inline_max bytes, then fail. */
    expect_once(S("0123456789abcdef"), &lim, RESP_NEED_MORE, NULL);
    expect_once(S("0123456789abcdefg"), &lim, RESP_PROTO_ERROR, "too big inline request");
}

/* ---- parser: inline quoting ------------------------------------------------ */

static void test_inline_quoting(void **state)
{
    (void)state;
    struct { const char *in, *expect; } cases[] = {
        {"PING\n", "[PING]"},
        {"PING\r\n", "[PING]"},
        {"  set\tk  v \t\r\n", "[set|k|v]"},
        {"set \"a b\" 'c d'\n", "[set|a b|c d]"},
        {"\"\\x41\\x7a\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n", "[Az\\x0a\\x0d\\x09\\x08\\x07\\x5c\"q]"},
        {"\"\\xZZ\" \"\\x4\"\n", "[xZZ|x4]"},
        {"'it\\'s' 'a\\nb' 'c\"d'\n", "[it's|a\\x5cnb|c\"d]"},
        {"foo\"bar baz\" x'y z'\n", "[foobar baz|xy z]"},
        {"\"\" ''\n", "[|]"},
        {"a\rb\n", "[a|b]"},
        {"\"a\\\"\n", "!unbalanced quotes in request"},
        {"\"abc\n", "!unbalanced quotes in request"},
        {"'abc\n", "!unbalanced quotes in request"},
        {"\"abc\"def\n", "!unbalanced quotes in request"},
        {"'abc'def\n", "!unbalanced quotes in request"},
        {"'abc\\'\n", "!unbalanced quotes in request"},
        {"\"abc\\\n", "!unbalanced quotes in request"},
        {"x \"a\"\t\"b\"\n", "[x|a|b]"},
        {"\x01\xff\0 z\n", "[\\x01\\xff\\x00|z]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].in);
        if (i == sizeof cases / sizeof cases[0] - 1)
            len = 6; /* the case with a NUL in it */
        check_all_splits(cases[i].in, len, &default_limits, cases[i].expect, cases[i].expect[0] != '!');
    }
}

/* Inline words live in argbuf, which may grow between commands; each
 * command's pointers are valid for that command. */
static void test_inline_argbuf(void **state)
{
    (void)state;
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    assert_int_equal(resp_parse(S("a b\n"), &default_limits, &cmd, &consumed, &need, &err),
                     RESP_COMMAND);
    assert_int_equal(cmd.argbuf.len, 2);
    size_t n = 5000;
    char *line = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        line[i] = (i % 10 == 9) ? ' ' : (char)('a' + i % 10);
    line[n] = '\n';
    assert_int_equal(resp_parse(line, n + 1, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_COMMAND);
    assert_int_equal(consumed, n + 1);
    assert_int_equal(cmd.argc, n / 10);
    for (size_t i = 0; i < cmd.argc; i++) {
        assert_int_equal(cmd.argv[i].len, 9);
        assert_memory_equal(cmd.argv[i].ptr, "abcdefghi", 9);
        assert_true(cmd.argv[i].ptr >= cmd.argbuf.data &&
                    cmd.argv[i].ptr + 9 <= cmd.argbuf.data + cmd.argbuf.len);
    }
    free(line);
    resp_cmd_free(&cmd);
}

/* ---- parser: resumption ---------------------------------------------------- */

/* The denial-of-service case: a command of many small arguments trickled
 * one byte per read. The parser resumes where it stopped, so the bytes it
 * examines stay linear in the command's size (a stateless parser re-scanned
 * every complete argument on every call: ~argc^2/2 * 7 bytes, ~1.5e10 here). */
static void test_trickled_many_args_linear(void **state)
{
    (void)state;
    const size_t nargs = 65536; /* the default max-args */
    resp_limits_t lim = default_limits;
    lim.args_max = nargs;
    ordo_buf_t cmdbytes = ORDO_BUF_INIT;
    ordo_buf_printf(&cmdbytes, "*%zu\r\n", nargs);
    for (size_t i = 0; i < nargs; i++)
        ordo_buf_printf(&cmdbytes, "$1\r\n%c\r\n", (char)('a' + i % 26));
    ordo_buf_puts(&cmdbytes, "PING\r\n"); /* a pipelined command after it */
    size_t size = cmdbytes.len - 6;

    /* As a connection does: one byte appended per read (the buffer moves
     * as it grows), resp_parse on every read, whatever need_bytes said. */
    conn_t c;
    conn_init(&c, &lim, 1);
    size_t calls_before_cmd = 0;
    for (size_t i = 0; i < cmdbytes.len; i++) {
        conn_feed(&c, cmdbytes.data + i, 1);
        if (c.log.len == 0)
            calls_before_cmd++;
        if (i + 1 == size) {
            /* The first command is out: check its cost. */
            assert_true(c.log.len > 0);
            uint64_t scanned = c.cmd.scanned_bytes;
            print_message("trickled %zu-argument command, %zu bytes, %zu reads: "
                          "%llu bytes examined (%.2f per byte)\n",
                          nargs, size, calls_before_cmd + 1, (unsigned long long)scanned,
                          (double)scanned / (double)size);
            assert_true(scanned <= 4 * (uint64_t)size);
        }
    }
    assert_false(c.closed);
    assert_int_equal(c.log.len, 1 + 2 * nargs - 1 + 1 + 6);
    for (size_t i = 0; i < nargs; i++)
        assert_int_equal(c.log.data[1 + 2 * i], (char)('a' + i % 26));
    assert_memory_equal(c.log.data + c.log.len - 6, "[PING]", 6);
    conn_free(&c);
    ordo_buf_free(&cmdbytes);
}

/* Partial progress is kept as offsets: the input may move between calls
 * (here: a different buffer each time) and the arguments point into the
 * input of the call that completes the command. */
static void test_resume_after_move(void **state)
{
    (void)state;
    const char full[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n";
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    char a[sizeof full], b[sizeof full];
    memcpy(a, full, 17); /* SET, then the header "$1\r\n" of k */
    assert_int_equal(resp_parse(a, 17, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_NEED_MORE);
    assert_int_equal(need, 20);
    assert_int_equal(cmd.argc, 0); /* partial arguments are not shown */
    assert_int_equal(cmd.mb_done, 1);
    assert_int_equal(cmd.mb_body, 17); /* k's header is not parsed again */
    memset(a, 'X', sizeof a); /* the old bytes are gone */
    memcpy(b, full, sizeof full);
    assert_int_equal(resp_parse(b, sizeof full - 1, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_COMMAND);
    assert_int_equal(consumed, sizeof full - 1);
    assert_int_equal(cmd.argc, 3);
    assert_ptr_equal(cmd.argv[0].ptr, b + 8);
    assert_ptr_equal(cmd.argv[1].ptr, b + 17);
    assert_ptr_equal(cmd.argv[2].ptr, b + 24);
    assert_memory_equal(cmd.argv[2].ptr, "value", 5);
    assert_int_equal(cmd.mb_count, 0); /* progress reset after the command */
    resp_cmd_free(&cmd);
}

/* resp_cmd_reset() abandons a partial command; the next call starts anew. */
static void test_cmd_reset(void **state)
{
    (void)state;
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    assert_int_equal(resp_parse(S("*2\r\n$1\r\na\r\n$"), &default_limits, &cmd, &consumed, &need,
                                &err),
                     RESP_NEED_MORE);
    assert_int_not_equal(cmd.mb_count, 0);
    resp_cmd_reset(&cmd);
    assert_int_equal(cmd.mb_count, 0);
    assert_int_equal(resp_parse(S("*1\r\n$4\r\nPING\r\n"), &default_limits, &cmd, &consumed,
                                &need, &err),
                     RESP_COMMAND);
    assert_int_equal(cmd.argc, 1);
    assert_memory_equal(cmd.argv[0].ptr, "PING", 4);
    /* An inline line's newline search resumes too, and resets. */
    assert_int_equal(resp_parse(S("GET ke"), &default_limits, &cmd, &consumed, &need, &err),
                     RESP_NEED_MORE);
    assert_int_equal(cmd.inline_scanned, 6);
    assert_int_equal(resp_parse(S("GET key\r\n"), &default_limits, &cmd, &consumed, &need, &err),
                     RESP_COMMAND);
    assert_int_equal(cmd.argc, 2);
    assert_int_equal(cmd.inline_scanned, 0);
    resp_cmd_free(&cmd);
}

/* Limits are those of each call: lowering one (CONFIG SET) while a command
 * is partial rejects it instead of breaking argc <= args_max or
 * len <= bulk_max. */
static void test_limits_drop_mid_command(void **state)
{
    (void)state;
    resp_limits_t lim = default_limits;
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    const char a[] = "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n";
    assert_int_equal(resp_parse(a, 12, &lim, &cmd, &consumed, &need, &err), RESP_NEED_MORE);
    lim.args_max = 2;
    assert_int_equal(resp_parse(a, sizeof a - 1, &lim, &cmd, &consumed, &need, &err),
                     RESP_PROTO_ERROR);
    assert_string_equal(err, "invalid multibulk length");
    const char b[] = "*2\r\n$5\r\nabcde\r\n$1\r\nx\r\n";
    lim = default_limits;
    assert_int_equal(resp_parse(b, 17, &lim, &cmd, &consumed, &need, &err), RESP_NEED_MORE);
    lim.bulk_max = 4; /* the complete first argument is now too long */
    assert_int_equal(resp_parse(b, sizeof b - 1, &lim, &cmd, &consumed, &need, &err),
                     RESP_PROTO_ERROR);
    assert_string_equal(err, "invalid bulk length");
    lim = default_limits;
    assert_int_equal(resp_parse(b, 10, &lim, &cmd, &consumed, &need, &err), RESP_NEED_MORE);
    lim.bulk_max = 4; /* the header of the partial argument is now too long */
    assert_int_equal(resp_parse(b, 11, &lim, &cmd, &consumed, &need, &err), RESP_PROTO_ERROR);
    assert_string_equal(err, "invalid bulk length");
    resp_cmd_free(&cmd);
}

/* ---- parser: junk ---------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random bytes biased towards protocol characters: whatever comes out,
 * the connection loop's invariants hold (checked in conn_feed). */
static void test_binary_junk(void **state)
{
    (void)state;
    static const char alphabet[] = "*$\r\n0123456789-+ \"'\\x\t";
    resp_limits_t lim = {.args_max = 8, .bulk_max = 32, .inline_max = 64};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 2000; round++) {
        size_t len = rng_next(&seed) % 96;
        char buf[96];
        for (size_t i = 0; i < len; i++) {
            uint64_t r = rng_next(&seed);
            buf[i] = (r & 1) ? alphabet[(r >> 8) % (sizeof alphabet - 1)] : (char)(r >> 16);
        }
        char *whole = transcript(buf, len, &lim);
        size_t cut = len ? rng_next(&seed) % len : 0;
        char *split = transcript_cuts(buf, len, &lim, &cut, 1, 0);
        assert_string_equal(whole, split);
        free(whole);
        free(split);
    }
}

/* ---- encoder ------------------------------------------------------------- */

#define EXPECT_OUT(call, lit)                                  \
    do {                                                       \
        ordo_buf_t out_ = ORDO_BUF_INIT;                       \
        call;                                                  \
        assert_int_equal(out_.len, sizeof(lit) - 1);           \
        assert_memory_equal(out_.data, lit, sizeof(lit) - 1);  \
        ordo_buf_free(&out_);                                  \
    } while (0)

static void test_encode_simple_error(void **state)
{
    (void)state;
    EXPECT_OUT(resp_add_simple(&out_, "OK"), "+OK\r\n");
    EXPECT_OUT(resp_add_simple(&out_, ""), "+\r\n");
    EXPECT_OUT(resp_add_error(&out_, "ERR bad"), "-ERR bad\r\n");
    EXPECT_OUT(resp_add_error(&out_, "ERR a\r\nb\nc"), "-ERR a  b c\r\n");
    EXPECT_OUT(resp_add_errorf(&out_, "CONFLICT %d %s", 42, "x\ny"), "-CONFLICT 42 x y\r\n");
    /* A long formatted error takes the regrow path. */
    ordo_buf_t out = ORDO_BUF_INIT;
    char big[300];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    resp_add_errorf(&out, "ERR %s", big);
    assert_int_equal(out.len, 1 + 4 + 299 + 2);
    assert_memory_equal(out.data + out.len - 3, "z\r\n", 3);
    ordo_buf_free(&out);
}

static void test_encode_integers(void **state)
{
    (void)state;
    EXPECT_OUT(resp_add_int(&out_, 0), ":0\r\n");
    EXPECT_OUT(resp_add_int(&out_, 7), ":7\r\n");
    EXPECT_OUT(resp_add_int(&out_, -1), ":-1\r\n");
    EXPECT_OUT(resp_add_int(&out_, 10), ":10\r\n");
    EXPECT_OUT(resp_add_int(&out_, 99), ":99\r\n");
    EXPECT_OUT(resp_add_int(&out_, 100), ":100\r\n");
    EXPECT_OUT(resp_add_int(&out_, -12345), ":-12345\r\n");
    EXPECT_OUT(resp_add_int(&out_, INT64_MAX), ":9223372036854775807\r\n");
    EXPECT_OUT(resp_add_int(&out_, INT64_MIN), ":-9223372036854775808\r\n");
    EXPECT_OUT(resp_add_uint(&out_, 0), ":0\r\n");
    EXPECT_OUT(resp_add_uint(&out_, UINT64_MAX), ":18446744073709551615\r\n");
    /* Every power of ten and its neighbours, and random values, agree
     * with printf. */
    ordo_buf_t out = ORDO_BUF_INIT;
    char want[64];
    uint64_t seed = 12345;
    for (int i = 0; i < 20000; i++) {
        uint64_t v;
        if (i < 60) {
            uint64_t p = 1;
            for (int k = 0; k < i / 3; k++)
                p *= 10;
            v = p + (uint64_t)(i % 3) - 1;
        } else {
            v = rng_next(&seed) >> (rng_next(&seed) % 64);
        }
        out.len = 0;
        resp_add_uint(&out, v);
        int n = snprintf(want, sizeof want, ":%llu\r\n", (unsigned long long)v);
        assert_int_equal(out.len, n);
        assert_memory_equal(out.data, want, (size_t)n);
        out.len = 0;
        resp_add_int(&out, (int64_t)v);
        n = snprintf(want, sizeof want, ":%lld\r\n", (long long)(int64_t)v);
        assert_int_equal(out.len, n);
        assert_memory_equal(out.data, want, (size_t)n);
    }
    ordo_buf_free(&out);
}

static void test_encode_bulk(void **state)
{
    (void)state;
    EXPECT_OUT(resp_add_bulk(&out_, "foo", 3), "$3\r\nfoo\r\n");
    EXPECT_OUT(resp_add_bulk(&out_, "", 0), "$0\r\n\r\n");
    EXPECT_OUT(resp_add_bulk(&out_, "a\0\r\nb", 5), "$5\r\na\0\r\nb\r\n");
    EXPECT_OUT(resp_add_bulk_str(&out_, "hello"), "$5\r\nhello\r\n");
    EXPECT_OUT(resp_add_verbatim(&out_, 3, "hello", 5), "=9\r\ntxt:hello\r\n");
    EXPECT_OUT(resp_add_verbatim(&out_, 2, "hello", 5), "$5\r\nhello\r\n");
    /* Large payloads round-trip through the parser. */
    size_t n = 100000;
    char *payload = malloc(n);
    for (size_t i = 0; i < n; i++)
        payload[i] = (char)i;
    ordo_buf_t out = ORDO_BUF_INIT;
    ordo_buf_puts(&out, "*1\r\n");
    resp_add_bulk(&out, payload, n);
    resp_cmd_t cmd = {0};
    size_t consumed, need;
    const char *err;
    assert_int_equal(resp_parse(out.data, out.len, &default_limits, &cmd, &consumed, &need, &err),
                     RESP_COMMAND);
    assert_int_equal(cmd.argv[0].len, n);
    assert_memory_equal(cmd.argv[0].ptr, payload, n);
    resp_cmd_free(&cmd);
    ordo_buf_free(&out);
    free(payload);
}

static void test_encode_null_and_aggregates(void **state)
{
    (void)state;
    EXPECT_OUT(resp_add_null(&out_, 2), "$-1\r\n");
    EXPECT_OUT(resp_add_null(&out_, 3), "_\r\n");
    EXPECT_OUT(resp_add_null_array(&out_, 2), "*-1\r\n");
    EXPECT_OUT(resp_add_null_array(&out_, 3), "_\r\n");
    EXPECT_OUT(resp_add_array(&out_, 0), "*0\r\n");
    EXPECT_OUT(resp_add_array(&out_, 12), "*12\r\n");
    EXPECT_OUT(resp_add_map(&out_, 2, 3), "*6\r\n");
    EXPECT_OUT(resp_add_map(&out_, 3, 3), "%3\r\n");
    EXPECT_OUT(resp_add_set(&out_, 2, 4), "*4\r\n");
    EXPECT_OUT(resp_add_set(&out_, 3, 4), "~4\r\n");
    EXPECT_OUT(resp_add_push(&out_, 2, 3), "*3\r\n");
    EXPECT_OUT(resp_add_push(&out_, 3, 3), ">3\r\n");
    EXPECT_OUT(resp_add_bool(&out_, 2, 1), ":1\r\n");
    EXPECT_OUT(resp_add_bool(&out_, 2, 0), ":0\r\n");
    EXPECT_OUT(resp_add_bool(&out_, 3, 5), "#t\r\n");
    EXPECT_OUT(resp_add_bool(&out_, 3, 0), "#f\r\n");
}

static void test_encode_double(void **state)
{
    (void)state;
    EXPECT_OUT(resp_add_double(&out_, 3, 1.5), ",1.5\r\n");
    EXPECT_OUT(resp_add_double(&out_, 3, 0.1), ",0.1\r\n");
    EXPECT_OUT(resp_add_double(&out_, 3, -2.0), ",-2\r\n");
    EXPECT_OUT(resp_add_double(&out_, 3, 1e300), ",1e+300\r\n");
    EXPECT_OUT(resp_add_double(&out_, 3, 1.0 / 3.0), ",0.3333333333333333\r\n");
    EXPECT_OUT(resp_add_double(&out_, 3, INFINITY), ",inf\r\n");
    EXPECT_OUT(resp_add_double(&out_, 3, -INFINITY), ",-inf\r\n");
    EXPECT_OUT(resp_add_double(&out_, 3, NAN), ",nan\r\n");
    EXPECT_OUT(resp_add_double(&out_, 3, -NAN), ",nan\r\n");
    EXPECT_OUT(resp_add_double(&out_, 2, 1.5), "$3\r\n1.5\r\n");
    EXPECT_OUT(resp_add_double(&out_, 2, INFINITY), "$3\r\ninf\r\n");
    EXPECT_OUT(resp_add_double(&out_, 2, -INFINITY), "$4\r\n-inf\r\n");
    EXPECT_OUT(resp_add_double(&out_, 2, NAN), "$3\r\nnan\r\n");
}

/* ---- buf ------------------------------------------------------------------ */

static void test_buf(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    assert_non_null(ordo_buf_reserve(&b, 0));
    ordo_buf_append(&b, NULL, 0);
    ordo_buf_puts(&b, "hello ");
    ordo_buf_printf(&b, "%d-%s", 42, "x");
    assert_int_equal(b.len, 10);
    assert_memory_equal(b.data, "hello 42-x", 10);
    ordo_buf_consume(&b, 6);
    assert_memory_equal(b.data, "42-x", 4);
    ordo_buf_consume(&b, 4);
    assert_int_equal(b.len, 0);
    for (int i = 0; i < 10000; i++)
        ordo_buf_append(&b, "abcdefgh", 8);
    assert_int_equal(b.len, 80000);
    assert_true(b.cap >= b.len);
    ordo_buf_reset(&b, 1 << 20);
    assert_int_equal(b.len, 0);
    assert_non_null(b.data); /* kept: below keep_max */
    ordo_buf_append(&b, "x", 1);
    ordo_buf_reset(&b, 64);
    assert_null(b.data); /* freed: above keep_max */
    assert_int_equal(b.cap, 0);
    ordo_buf_free(&b);
    ordo_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multibulk_zero_copy),
        cmocka_unit_test(test_pipeline_all_splits),
        cmocka_unit_test(test_binary_safe_bulk),
        cmocka_unit_test(test_need_bytes),
        cmocka_unit_test(test_no_allocation_from_claims),
        cmocka_unit_test(test_empty_requests),
        cmocka_unit_test(test_bad_multibulk_length),
        cmocka_unit_test(test_unterminated_header),
        cmocka_unit_test(test_bad_bulk_length),
        cmocka_unit_test(test_expected_dollar),
        cmocka_unit_test(test_bulk_not_crlf),
        cmocka_unit_test(test_error_after_commands_all_splits),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_inline_quoting),
        cmocka_unit_test(test_inline_argbuf),
        cmocka_unit_test(test_trickled_many_args_linear),
        cmocka_unit_test(test_resume_after_move),
        cmocka_unit_test(test_cmd_reset),
        cmocka_unit_test(test_limits_drop_mid_command),
        cmocka_unit_test(test_binary_junk),
        cmocka_unit_test(test_encode_simple_error),
        cmocka_unit_test(test_encode_integers),
        cmocka_unit_test(test_encode_bulk),
        cmocka_unit_test(test_encode_null_and_aggregates),
        cmocka_unit_test(test_encode_double),
        cmocka_unit_test(test_buf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
