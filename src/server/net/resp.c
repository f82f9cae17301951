/*
 * resp.c -- the RESP request parser and reply encoder of resp.h.
 *
 * Parser. resp_parse() is resumable: resp_cmd_t records how far it got into
 * a partial command, as offsets from the command's first byte (the caller
 * passes the same command's start every time, though the bytes may have
 * moved; see resp.h). For a multibulk command that is the argument count,
 * the number of complete arguments (their offsets and lengths already in
 * argv), the offset of the next argument, and that argument's body offset
 * and length once its "$<len>" header is parsed. A call resumes there, so
 * no byte of a complete header, argument or CRLF is examined twice; the
 * only re-scan is of a header cut short, at most HEADER_SCAN_MAX bytes per
 * call. Bulk bodies are skipped by length, and need_bytes lets the caller
 * skip calls while a body is outstanding.
 *
 * Before all that, a new multibulk command gets one try of a fast path
 * (parse_multibulk_fast): when the whole command is already in the input
 * in the usual shape (plain lengths, every CRLF in place), as pipelined
 * clients send it, one pass over its headers makes argv directly, with no
 * offsets and no per-header state. Anything else (a cut command, an error,
 * "*0", a sign) makes it decline, at most once per command
 * (mb_fast_declined), and the general parser starts over; so the fast path
 * adds at most one more pass over the command's headers. A multibulk
 * command costs
 *     bytes examined <= 2 * its size + HEADER_SCAN_MAX * calls
 * (one partial header or one CR awaiting its LF per call), linear however
 * the command is split: a client trickling a command of args_max small
 * arguments one byte per read no longer costs args_max^2 steps (the counter
 * cmd->scanned_bytes lets the tests and the fuzzer check it). Argument
 * pointers are made from the offsets when the command completes, so the
 * command stays zero-copy. Inline lines are bounded by inline_max; the
 * newline search resumes where the previous call stopped (inline_scanned),
 * so a line costs at most twice its length (search, then split).
 *
 * A partial command is re-checked against each call's limits (they are
 * server options and may change between reads): a lowered args_max or
 * bulk_max rejects it as a protocol error rather than breaking the
 * invariants below.
 *
 * Invariants, checked by tests/fuzz/fuzz_resp.c on arbitrary input:
 *   - no byte outside in[0..len) is ever read;
 *   - RESP_NEED_MORE consumes nothing and *need_bytes > len;
 *   - RESP_COMMAND/RESP_EMPTY consume at most len bytes;
 *   - a command has 1 <= argc <= args_max, every argument is at most
 *     bulk_max bytes and lies inside in[0..consumed) (multibulk) or inside
 *     cmd->argbuf (inline);
 *   - memory grows only with bytes actually received, never with a length
 *     a client merely claims: argv grows one present argument at a time and
 *     argbuf is bounded by the inline line (at most inline_max).
 *
 * Length headers ("*<n>\r\n", "$<n>\r\n") are strict decimal: an optional
 * '-', no leading zeros, no '+', no blanks, at most 19 digits, then CRLF. A
 * header is rejected as soon as a byte makes it invalid, without waiting for
 * its CRLF; so a header never waits on more than 22 bytes (HEADER_SCAN_MAX),
 * which subsumes Redis's "too big mbulk count string" bound on an
 * unterminated header.
 *
 * Encoder. Each resp_add_* reserves its worst case once and writes in
 * place; integers go through base/dec.h's two-digits-per-division
 * conversion (the reply path of every command).
 */
#include "resp.h"

#include "base/dec.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- request parser ---------------------------------------------------- */

#define LEN_DIGITS_MAX 19  /* INT64_MAX has 19 digits; a 20th is always invalid */
#define ARGV_CAP_MIN 8     /* most commands have few arguments */
#define PARSE_OK 100       /* internal: a step succeeded, keep going */
#define FAST_NO 101        /* internal: the fast path declines; the general parser runs */
#define FAST_DIGITS_MAX 18 /* the fast path's lengths: below 10^18, no overflow to check */
/* Bytes a header cut short can hold: type, '-', 19 digits, CR. */
#define HEADER_SCAN_MAX (1 + 1 + LEN_DIGITS_MAX + 1)

enum scan_result { SCAN_OK, SCAN_MORE, SCAN_BAD };

static const char ERR_MBULK_LEN[] = "invalid multibulk length";
static const char ERR_BULK_LEN[] = "invalid bulk length";
static const char ERR_BULK_CRLF[] = "bulk string not terminated by CRLF";
static const char ERR_INLINE_BIG[] = "too big inline request";
static const char ERR_INLINE_QUOTES[] = "unbalanced quotes in request";
static const char ERR_INLINE_ARGS[] = "too many arguments in inline request";

/*
 * "expected '$', got 'X'" for every byte X, built at compile time so *err
 * stays a static string. Bytes that are not printable ASCII are shown as
 * \xHH so the reply line stays clean.
 */
#define PRINTABLE(c) ((c) >= 0x20 && (c) < 0x7f)
#define HEXDIGIT(n) ((char)((n) < 10 ? '0' + (n) : 'a' + (n) - 10))
#define EXPECT_MSG(c)                                                              \
    {'e', 'x', 'p', 'e', 'c', 't', 'e', 'd', ' ', '\'', '$', '\'', ',', ' ', 'g',  \
     'o', 't', ' ', '\'', PRINTABLE(c) ? (char)(c) : '\\',                         \
     PRINTABLE(c) ? '\'' : 'x', PRINTABLE(c) ? '\0' : HEXDIGIT((c) >> 4),          \
     PRINTABLE(c) ? '\0' : HEXDIGIT((c) & 15), PRINTABLE(c) ? '\0' : '\'', '\0'}
#define EXPECT_MSG4(c) EXPECT_MSG(c), EXPECT_MSG((c) + 1), EXPECT_MSG((c) + 2), EXPECT_MSG((c) + 3)
#define EXPECT_MSG16(c) EXPECT_MSG4(c), EXPECT_MSG4((c) + 4), EXPECT_MSG4((c) + 8), EXPECT_MSG4((c) + 12)

static const char expect_dollar_msg[256][28] = {
    EXPECT_MSG16(0x00), EXPECT_MSG16(0x10), EXPECT_MSG16(0x20), EXPECT_MSG16(0x30),
    EXPECT_MSG16(0x40), EXPECT_MSG16(0x50), EXPECT_MSG16(0x60), EXPECT_MSG16(0x70),
    EXPECT_MSG16(0x80), EXPECT_MSG16(0x90), EXPECT_MSG16(0xa0), EXPECT_MSG16(0xb0),
    EXPECT_MSG16(0xc0), EXPECT_MSG16(0xd0), EXPECT_MSG16(0xe0), EXPECT_MSG16(0xf0),
};

static int proto_error(const char **err, const char *msg)
{
    *err = msg;
    return RESP_PROTO_ERROR;
}

/* Grow cmd->argv geometrically so that one more argument fits. Called only
 * for arguments present in the input, so argv is bounded by the input. */
static void argv_grow(resp_cmd_t *cmd)
{
    size_t cap = cmd->argv_cap ? cmd->argv_cap * 2 : ARGV_CAP_MIN;
    assert(cap <= SIZE_MAX / sizeof *cmd->argv);
    cmd->argv = ordo_xrealloc(cmd->argv, cap * sizeof *cmd->argv);
    cmd->argv_cap = cap;
}

static inline resp_arg_t *argv_next(resp_cmd_t *cmd)
{
    ORDO_DEBUG_ASSERT(cmd->argc <= cmd->argv_cap);
    if (cmd->argc == cmd->argv_cap)
        argv_grow(cmd);
    return &cmd->argv[cmd->argc++];
}

static void argv_push(resp_cmd_t *cmd, const char *ptr, size_t len)
{
    resp_arg_t *a = argv_next(cmd);
    a->ptr = ptr;
    a->len = len;
}

/* A multibulk argument, recorded by offset until the command completes. */
static void argv_push_off(resp_cmd_t *cmd, size_t off, size_t len)
{
    resp_arg_t *a = argv_next(cmd);
    a->off = off;
    a->len = len;
}

/* Forget the progress through a partial command. */
static void progress_reset(resp_cmd_t *cmd)
{
    cmd->mb_count = 0;
    cmd->mb_done = 0;
    cmd->mb_pos = 0;
    cmd->mb_body = 0;
    cmd->mb_blen = 0;
    cmd->inline_scanned = 0;
    cmd->mb_fast_declined = 0;
}

/*
 * scan_len() -- parse a strict decimal length "[-]<digits>\r\n" at in[p].
 * Outputs on SCAN_OK: *val, *next (index just after the LF). Always: the
 * bytes read are added to *scanned.
 * Returns SCAN_MORE if the bytes so far are a valid prefix, SCAN_BAD as soon
 * as they cannot be.
 */
static int scan_len(const char *in, size_t len, size_t p, int64_t *val, size_t *next,
                    uint64_t *scanned)
{
    size_t i = p;
    int neg = 0;
    if (i < len && in[i] == '-') {
        neg = 1;
        i++;
    }
    size_t start = i;
    uint64_t v = 0;
    for (; i < len && in[i] >= '0' && in[i] <= '9'; i++) {
        if (i - start == LEN_DIGITS_MAX || (i > start && in[start] == '0')) {
            *scanned += i - p + 1;
            return SCAN_BAD; /* too long, or a leading zero */
        }
        v = v * 10 + (uint64_t)(in[i] - '0');
    }
    *scanned += i - p + (i < len) + (i + 1 < len);
    if (v > INT64_MAX)
        return SCAN_BAD;
    if (i == len)
        return SCAN_MORE;
    if (in[i] != '\r' || i == start || (neg && v == 0))
        return SCAN_BAD;
    if (i + 1 == len)
        return SCAN_MORE;
    if (in[i + 1] != '\n')
        return SCAN_BAD;
    *val = neg ? -(int64_t)v : (int64_t)v;
    *next = i + 2;
    return SCAN_OK;
}

/*
 * parse_bulk() -- the multibulk argument at cmd->mb_pos:
 * "$<len>\r\n<bytes>\r\n", resuming after its header if an earlier call
 * parsed it (cmd->mb_body != 0).
 * Outputs: on PARSE_OK the argument is pushed (by offset) and cmd->mb_pos
 * moves past it; on RESP_NEED_MORE the header, once parsed, is kept in
 * cmd->mb_body/mb_blen and *need_bytes is set when the body is not all here.
 * Returns PARSE_OK, RESP_NEED_MORE or RESP_PROTO_ERROR.
 */
static int parse_bulk(const char *in, size_t len, size_t bulk_max, resp_cmd_t *cmd,
                      size_t *need_bytes, const char **err)
{
    if (cmd->mb_body == 0) {
        size_t p = cmd->mb_pos;
        if (p >= len)
            return RESP_NEED_MORE;
        cmd->scanned_bytes++;
        if (in[p] != '$')
            return proto_error(err, expect_dollar_msg[(unsigned char)in[p]]);
        int64_t blen;
        size_t q;
        int s = scan_len(in, len, p + 1, &blen, &q, &cmd->scanned_bytes);
        if (s == SCAN_MORE)
            return RESP_NEED_MORE; /* the partial header is re-scanned next time */
        if (s == SCAN_BAD || blen < 0 || (uint64_t)blen > SIZE_MAX - 2 - q)
            return proto_error(err, ERR_BULK_LEN);
        cmd->mb_body = q;
        cmd->mb_blen = (size_t)blen;
    }
    if (cmd->mb_blen > bulk_max) { /* checked on every call: the limit may have dropped */
        cmd->over = RESP_OVER_BULK;
        cmd->over_limit = cmd->mb_blen;
        cmd->over_body = cmd->mb_body;
        return proto_error(err, ERR_BULK_LEN);
    }
    size_t q = cmd->mb_body;
    size_t n = cmd->mb_blen;
    size_t end = q + n + 2; /* cannot overflow: checked with the header */
    if (end > len) {
        if (len > q + n) {
            cmd->scanned_bytes++;
            if (in[q + n] != '\r')
                return proto_error(err, ERR_BULK_CRLF);
        }
        *need_bytes = end; /* the body is opaque: nothing to do before it is all here */
        return RESP_NEED_MORE;
    }
    cmd->scanned_bytes += 2;
    if (in[q + n] != '\r' || in[q + n + 1] != '\n')
        return proto_error(err, ERR_BULK_CRLF);
    argv_push_off(cmd, q, n);
    cmd->mb_pos = end;
    cmd->mb_body = 0;
    return PARSE_OK;
}

/*
 * parse_multibulk() -- "*<n>\r\n" then n bulks; in[0] is '*'. Resumes the
 * command recorded in cmd if its header was parsed by an earlier call.
 * On RESP_NEED_MORE the progress stays in cmd (argc is left at the number
 * of complete arguments; resp_parse hides it).
 */
static int parse_multibulk(const char *in, size_t len, const resp_limits_t *lim, resp_cmd_t *cmd,
                           size_t *consumed, size_t *need_bytes, const char **err)
{
    assert(len > 0 && in[0] == '*');
    if (cmd->mb_count == 0) {
        int64_t n;
        size_t p;
        int s = scan_len(in, len, 1, &n, &p, &cmd->scanned_bytes);
        cmd->scanned_bytes++; /* the '*' */
        if (s == SCAN_MORE)
            return RESP_NEED_MORE;
        if (s == SCAN_BAD || n < -1)
            return proto_error(err, ERR_MBULK_LEN);
        if (n > 0 && (uint64_t)n > lim->args_max) {
            cmd->over = RESP_OVER_ARGS;
            cmd->over_limit = (uint64_t)n;
            cmd->over_body = 0;
            return proto_error(err, ERR_MBULK_LEN);
        }
        if (n <= 0) {
            *consumed = p;
            return RESP_EMPTY;
        }
        cmd->mb_count = (size_t)n;
        cmd->mb_done = 0;
        cmd->mb_pos = p;
        cmd->mb_body = 0;
    } else if (cmd->mb_count > lim->args_max) {
        return proto_error(err, ERR_MBULK_LEN); /* the limit dropped mid-command */
    }
    cmd->argc = cmd->mb_done;
    while (cmd->argc < cmd->mb_count) {
        int s = parse_bulk(in, len, lim->bulk_max, cmd, need_bytes, err);
        if (s != PARSE_OK) {
            cmd->mb_done = cmd->argc;
            return s;
        }
    }
    /* Complete: offsets become pointers into this call's input. */
    for (size_t i = 0; i < cmd->argc; i++) {
        resp_arg_t *a = &cmd->argv[i];
        if (a->len > lim->bulk_max)
            return proto_error(err, ERR_BULK_LEN); /* received before the limit dropped */
        a->ptr = in + a->off;
    }
    *consumed = cmd->mb_pos;
    return RESP_COMMAND;
}

/*
 * fast_len() -- the digits and CRLF of a length header at *pp, in the shape
 * every client sends: 1 to FAST_DIGITS_MAX digits, no sign, no leading zero
 * (but "0" itself). Outputs: *val; *pp moved past the CRLF on success, else
 * to the end of what was examined. Returns false for anything else (a
 * sign, a long number, a cut header, a bad byte): scan_len() then decides.
 */
static inline bool fast_len(const char **pp, const char *end, uint64_t *val)
{
    const char *p = *pp, *start = p;
    const char *stop = end - p > FAST_DIGITS_MAX ? p + FAST_DIGITS_MAX : end;
    uint64_t v = 0;
    while (p < stop && (unsigned char)(*p - '0') < 10) {
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    size_t digits = (size_t)(p - start);
    if (digits == 0 || (digits > 1 && *start == '0') || end - p < 2 || p[0] != '\r' ||
        p[1] != '\n') {
        *pp = end - p < 2 ? end : p + 2;
        return false;
    }
    *pp = p + 2;
    *val = v;
    return true;
}

/*
 * parse_multibulk_fast() -- the common case: a new multibulk command that
 * is all in in[0..len) (in[0] is '*', no progress recorded) and written the
 * usual way. One pass over its headers, each argument pushed as a pointer
 * at once; bodies are skipped by length as in parse_bulk().
 * Returns RESP_COMMAND (*consumed set), or FAST_NO, leaving cmd with no
 * progress (argc 0) for the general parser to start over: that happens on
 * anything unusual (an error, "*0", a cut command) and costs at most one
 * more pass over the headers present, once per command.
 */
static int parse_multibulk_fast(const char *in, size_t len, const resp_limits_t *lim,
                                resp_cmd_t *cmd, size_t *consumed)
{
    const char *p = in + 1, *end = in + len;
    size_t skipped = 0; /* body bytes: not examined */
    uint64_t n;
    if (!fast_len(&p, end, &n) || n == 0 || n > lim->args_max)
        goto no;
    cmd->argc = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (p == end || *p != '$') {
            p += p != end;
            goto no;
        }
        p++;
        uint64_t blen;
        if (!fast_len(&p, end, &blen))
            goto no;
        if (blen > lim->bulk_max || blen + 2 > (uint64_t)(end - p))
            goto no;
        if (p[blen] != '\r' || p[blen + 1] != '\n') {
            skipped += blen;
            p += blen + 2;
            goto no;
        }
        resp_arg_t *a = argv_next(cmd);
        a->ptr = p;
        a->len = (size_t)blen;
        skipped += blen;
        p += blen + 2;
    }
    *consumed = (size_t)(p - in);
    cmd->scanned_bytes += *consumed - skipped;
    return RESP_COMMAND;
no:
    cmd->scanned_bytes += (size_t)(p - in) - skipped;
    cmd->argc = 0;
    return FAST_NO;
}

/* Blanks separate inline words; the set is C's isspace() in the "C" locale,
 * as Redis uses, so a stray CR or VT splits rather than joins. */
static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte a backslash escape inside double quotes stands for. */
static char unescape(char c)
{
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'b': return '\b';
    case 'a': return '\a';
    default: return c;
    }
}

/*
 * dquote_step() -- one step inside "double quotes" at s[*ip] (*ip < n).
 * Outputs: the byte(s) written at out[*op]; *ip, *op advanced.
 * Returns 1 at the closing quote, 0 to go on, -1 if the closing quote is
 * followed by something other than a blank or the end.
 */
static int dquote_step(const char *s, size_t n, size_t *ip, char *out, size_t *op)
{
    size_t i = *ip;
    if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' && hex_value(s[i + 2]) >= 0 &&
        hex_value(s[i + 3]) >= 0) {
        out[(*op)++] = (char)(hex_value(s[i + 2]) * 16 + hex_value(s[i + 3]));
        *ip = i + 4;
        return 0;
    }
    if (s[i] == '\\' && i + 1 < n) {
        out[(*op)++] = unescape(s[i + 1]);
        *ip = i + 2;
        return 0;
    }
    if (s[i] == '"') {
        *ip = i + 1;
        return (i + 1 < n && !is_blank(s[i + 1])) ? -1 : 1;
    }
    out[(*op)++] = s[i];
    *ip = i + 1;
    return 0;
}

/* squote_step() -- as dquote_step, inside 'single quotes' (only \' escaped). */
static int squote_step(const char *s, size_t n, size_t *ip, char *out, size_t *op)
{
    size_t i = *ip;
    if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\'') {
        out[(*op)++] = '\'';
        *ip = i + 2;
        return 0;
    }
    if (s[i] == '\'') {
        *ip = i + 1;
        return (i + 1 < n && !is_blank(s[i + 1])) ? -1 : 1;
    }
    out[(*op)++] = s[i];
    *ip = i + 1;
    return 0;
}

/*
 * inline_word() -- unescape one word starting at s[*ip] (not a blank) into
 * out[*op...]. A quote may open anywhere in a word (foo"bar baz" is one
 * word), and a closing quote must end it, as in redis-cli and Redis.
 * Returns 0, or -1 for unbalanced quotes. Writes at most as many bytes as
 * it reads.
 */
static int inline_word(const char *s, size_t n, size_t *ip, char *out, size_t *op)
{
    enum { PLAIN, DQUOTE, SQUOTE } st = PLAIN;
    while (st != PLAIN || (*ip < n && !is_blank(s[*ip]))) {
        if (st == PLAIN) {
            char c = s[(*ip)++];
            if (c == '"')
                st = DQUOTE;
            else if (c == '\'')
                st = SQUOTE;
            else
                out[(*op)++] = c;
            continue;
        }
        if (*ip == n)
            return -1; /* the line ended inside quotes */
        int r = st == DQUOTE ? dquote_step(s, n, ip, out, op) : squote_step(s, n, ip, out, op);
        if (r < 0)
            return -1;
        if (r > 0)
            break;
    }
    return 0;
}

/*
 * split_inline() -- split line[0..n) into words in cmd->argbuf and argv.
 * argbuf is reserved once for the whole line (unescaping never lengthens a
 * word), so it never moves while argv pointers into it are being made.
 */
static int split_inline(const char *line, size_t n, const resp_limits_t *lim, resp_cmd_t *cmd,
                        const char **err)
{
    cmd->argbuf.len = 0;
    char *out = ordo_buf_reserve(&cmd->argbuf, n + 1);
    size_t i = 0, o = 0;
    for (;;) {
        while (i < n && is_blank(line[i]))
            i++;
        if (i == n)
            break;
        size_t start = o;
        if (inline_word(line, n, &i, out, &o) < 0)
            return proto_error(err, ERR_INLINE_QUOTES);
        assert(o <= i && i <= n);
        if (cmd->argc == lim->args_max) {
            cmd->over = RESP_OVER_ARGS;
            cmd->over_limit = cmd->argc + 1;
            return proto_error(err, ERR_INLINE_ARGS);
        }
        if (o - start > lim->bulk_max) {
            cmd->over = RESP_OVER_BULK;
            cmd->over_limit = o - start;
            cmd->over_body = 0; /* the line is all here: nothing to drop */
            return proto_error(err, ERR_INLINE_BIG);
        }
        argv_push(cmd, out + start, o - start);
    }
    assert(out == cmd->argbuf.data);
    cmd->argbuf.len = o;
    return PARSE_OK;
}

/* parse_inline() -- one line ending at '\n' (a preceding '\r' is dropped).
 * The newline search resumes after the cmd->inline_scanned bytes an
 * earlier call searched. */
static int parse_inline(const char *in, size_t len, const resp_limits_t *lim, resp_cmd_t *cmd,
                        size_t *consumed, const char **err)
{
    /* Look no further than inline_max bytes: a line longer than that is an
     * error whether or not its newline has arrived. */
    size_t scan = len > lim->inline_max ? lim->inline_max + 1 : len;
    size_t from = cmd->inline_scanned < scan ? cmd->inline_scanned : scan;
    const char *nl = memchr(in + from, '\n', scan - from);
    if (nl == NULL) {
        cmd->scanned_bytes += scan - from;
        if (len > lim->inline_max) {
            cmd->over = RESP_OVER_INLINE;
            cmd->over_limit = 0;
            return proto_error(err, ERR_INLINE_BIG);
        }
        cmd->inline_scanned = scan;
        return RESP_NEED_MORE;
    }
    size_t n = (size_t)(nl - in);
    assert(n <= lim->inline_max);
    cmd->scanned_bytes += n + 1 - from;
    size_t line_len = (n > 0 && in[n - 1] == '\r') ? n - 1 : n;
    cmd->scanned_bytes += line_len; /* split_inline reads the line once more */
    int s = split_inline(in, line_len, lim, cmd, err);
    if (s != PARSE_OK)
        return s;
    *consumed = n + 1;
    return cmd->argc == 0 ? RESP_EMPTY : RESP_COMMAND;
}

/* Does the recorded progress fit this input? Only a caller breaking the
 * contract in resp.h makes it not; then the progress is dropped (asserted
 * in debug builds) and parsing starts over, which is always memory-safe. */
static int progress_fits(const char *in, size_t len, const resp_cmd_t *cmd)
{
    if (cmd->mb_count != 0)
        return len > 0 && in[0] == '*' && cmd->mb_pos <= len && cmd->mb_body <= len;
    if (cmd->inline_scanned != 0)
        return len >= cmd->inline_scanned && in[0] != '*';
    return 1;
}

int resp_parse(const char *in, size_t len, const resp_limits_t *lim, resp_cmd_t *cmd,
               size_t *consumed, size_t *need_bytes, const char **err)
{
    ORDO_DEBUG_ASSERT(in != NULL || len == 0);
    ORDO_DEBUG_ASSERT(lim != NULL && cmd != NULL && consumed != NULL && need_bytes != NULL && err != NULL);
    assert(len < SIZE_MAX);
    *consumed = 0;
    *need_bytes = len + 1;
    *err = NULL;
    cmd->argc = 0;
    if (!progress_fits(in, len, cmd)) {
        assert(!"resp_parse: input does not continue the partial command (see resp.h)");
        progress_reset(cmd);
    }
    if (len == 0)
        return RESP_NEED_MORE;
    int s = FAST_NO;
    if (in[0] == '*' && cmd->mb_count == 0 && !cmd->mb_fast_declined)
        s = parse_multibulk_fast(in, len, lim, cmd, consumed);
    if (s == FAST_NO) {
        cmd->mb_fast_declined = in[0] == '*';
        s = in[0] == '*' ? parse_multibulk(in, len, lim, cmd, consumed, need_bytes, err)
                         : parse_inline(in, len, lim, cmd, consumed, err);
    }
    if (s != RESP_COMMAND)
        cmd->argc = 0;
    if (s != RESP_NEED_MORE) {
        *need_bytes = 0;
        progress_reset(cmd);
    }
    assert(s != RESP_NEED_MORE || (*consumed == 0 && *need_bytes > len));
    assert(s != RESP_COMMAND || (cmd->argc >= 1 && cmd->argc <= lim->args_max));
    assert(*consumed <= len);
    assert(s != RESP_PROTO_ERROR || *err != NULL);
    return s;
}

void resp_cmd_reset(resp_cmd_t *cmd)
{
    progress_reset(cmd);
    cmd->argc = 0;
}

void resp_cmd_free(resp_cmd_t *cmd)
{
    free(cmd->argv);
    cmd->argv = NULL;
    cmd->argc = 0;
    cmd->argv_cap = 0;
    ordo_buf_free(&cmd->argbuf);
    progress_reset(cmd);
    cmd->scanned_bytes = 0;
}

/* ---- reply encoder ----------------------------------------------------- */

#define HEADER_MAX (1 + 1 + DEC_U64_MAX + 2) /* type, sign, digits, CRLF */

/* Write "<type>[-]<v>\r\n" at p (room for HEADER_MAX); returns the end. */
static char *put_number(char *p, char type, int neg, uint64_t v)
{
    *p++ = type;
    if (neg)
        *p++ = '-';
    p += dec_u64(p, v);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* Append "<type>[-]<v>\r\n". */
static void add_number(ordo_buf_t *out, char type, int neg, uint64_t v)
{
    char *p = ordo_buf_reserve(out, HEADER_MAX);
    out->len += (size_t)(put_number(p, type, neg, v) - p);
}

/* Append "<type><n>\r\n" <prefix> <payload> "\r\n" with one reserve: the
 * shape of a bulk string and a verbatim string, the commonest replies. */
static void add_blob(ordo_buf_t *out, char type, const char *prefix, size_t prefix_len,
                     const void *payload, size_t n)
{
    assert(n <= SIZE_MAX - HEADER_MAX - prefix_len - 2);
    char *start = ordo_buf_reserve(out, HEADER_MAX + prefix_len + n + 2);
    char *p = put_number(start, type, 0, (uint64_t)prefix_len + n);
    memcpy(p, prefix, prefix_len);
    p += prefix_len;
    if (n > 0)
        memcpy(p, payload, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    out->len += (size_t)(p - start);
}

/* Append n bytes of s with CR and LF replaced by spaces (an error or status
 * line must stay one line). */
static void sanitize_line(char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\r' || s[i] == '\n')
            s[i] = ' ';
}

static void check_proto(int proto)
{
    assert(proto == 2 || proto == 3);
    (void)proto;
}

void resp_add_simple(ordo_buf_t *out, const char *s)
{
    ORDO_DEBUG_ASSERT(strpbrk(s, "\r\n") == NULL); /* callers pass constant words */
    size_t n = strlen(s);
    char *p = ordo_buf_reserve(out, n + 3);
    p[0] = '+';
    memcpy(p + 1, s, n);
    p[n + 1] = '\r';
    p[n + 2] = '\n';
    out->len += n + 3;
}

void resp_add_error(ordo_buf_t *out, const char *msg)
{
    ordo_buf_append(out, "-", 1);
    size_t start = out->len;
    ordo_buf_puts(out, msg);
    sanitize_line(out->data + start, out->len - start);
    ordo_buf_append(out, "\r\n", 2);
}

void resp_add_errorf(ordo_buf_t *out, const char *fmt, ...)
{
    ordo_buf_append(out, "-", 1);
    size_t start = out->len;
    va_list ap;
    va_start(ap, fmt);
    ordo_buf_vprintf(out, fmt, ap);
    va_end(ap);
    sanitize_line(out->data + start, out->len - start);
    ordo_buf_append(out, "\r\n", 2);
}

void resp_add_int(ordo_buf_t *out, int64_t v)
{
    /* 0 - (uint64_t)v is |v| for every negative v, INT64_MIN included. */
    add_number(out, ':', v < 0, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

void resp_add_uint(ordo_buf_t *out, uint64_t v)
{
    add_number(out, ':', 0, v);
}

void resp_add_bulk(ordo_buf_t *out, const void *p, size_t n)
{
    add_blob(out, '$', "", 0, p, n);
}

void resp_add_bulk_str(ordo_buf_t *out, const char *s)
{
    resp_add_bulk(out, s, strlen(s));
}

void resp_add_null(ordo_buf_t *out, int proto)
{
    check_proto(proto);
    if (proto == 3)
        ordo_buf_append(out, "_\r\n", 3);
    else
        ordo_buf_append(out, "$-1\r\n", 5);
}

void resp_add_null_array(ordo_buf_t *out, int proto)
{
    check_proto(proto);
    if (proto == 3)
        ordo_buf_append(out, "_\r\n", 3);
    else
        ordo_buf_append(out, "*-1\r\n", 5);
}

void resp_add_array(ordo_buf_t *out, size_t n)
{
    add_number(out, '*', 0, n);
}

void resp_add_map(ordo_buf_t *out, int proto, size_t n)
{
    check_proto(proto);
    assert(n <= SIZE_MAX / 2);
    if (proto == 3)
        add_number(out, '%', 0, n);
    else
        add_number(out, '*', 0, (uint64_t)n * 2);
}

void resp_add_set(ordo_buf_t *out, int proto, size_t n)
{
    check_proto(proto);
    add_number(out, proto == 3 ? '~' : '*', 0, n);
}

void resp_add_push(ordo_buf_t *out, int proto, size_t n)
{
    check_proto(proto);
    add_number(out, proto == 3 ? '>' : '*', 0, n);
}

/*
 * format_double() -- the shortest "%.<p>g" text (p = 15..17) that reads back
 * as v, and "inf", "-inf", "nan" for the non-finite values (never glibc's
 * "-nan"). Writes a NUL-terminated string into dst[0..cap); returns its
 * length. Doubles are not on a hot path, so snprintf + strtod is fine.
 */
static size_t format_double(char *dst, size_t cap, double v)
{
    if (isnan(v))
        return (size_t)snprintf(dst, cap, "nan");
    if (isinf(v))
        return (size_t)snprintf(dst, cap, v > 0 ? "inf" : "-inf");
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(dst, cap, "%.*g", prec, v);
        if (strtod(dst, NULL) == v)
            break;
    }
    assert(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

void resp_add_double(ordo_buf_t *out, int proto, double v)
{
    check_proto(proto);
    char text[40];
    size_t n = format_double(text, sizeof text, v);
    if (proto == 2) {
        resp_add_bulk(out, text, n);
        return;
    }
    ordo_buf_append(out, ",", 1);
    ordo_buf_append(out, text, n);
    ordo_buf_append(out, "\r\n", 2);
}

void resp_add_bool(ordo_buf_t *out, int proto, int v)
{
    check_proto(proto);
    if (proto == 3)
        ordo_buf_append(out, v ? "#t\r\n" : "#f\r\n", 4);
    else
        ordo_buf_append(out, v ? ":1\r\n" : ":0\r\n", 4);
}

void resp_add_verbatim(ordo_buf_t *out, int proto, const char *s, size_t n)
{
    check_proto(proto);
    if (proto == 2) {
        resp_add_bulk(out, s, n);
        return;
    }
    /* RESP3 verbatim: the length counts the "txt:" format prefix. */
    add_blob(out, '=', "txt:", 4, s, n);
}
