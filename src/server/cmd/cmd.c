/*
 * cmd.c -- the helpers every handler uses: arguments, replies, fences and
 * cmd_write(), a command's way to the writer's one door (writer_submit(),
 * writer/apply.h): it submits the record and, when the door refuses it or
 * the log cannot store it, answers the reason, so a handler that gets
 * false just returns.
 */
#include "cmd.h"
#include "core/coord.h"
#include "writer/apply.h"
#include "writer/cluster.h"
#include "writer/expire.h"
#include "writer/queue_wait.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- helpers ---------------------------------------------------------------- */

bool arg_is(const cmd_ctx_t *x, size_t i, const char *word)
{
    size_t n = strlen(word);
    return i < x->argc && x->argv[i].len == n && strncasecmp(x->argv[i].ptr, word, n) == 0;
}

static bool parse_i64_strict(const char *p, size_t n, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (isspace((unsigned char)buf[0]) || buf[0] == '+')
        return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

void cmd_quote(char *dst, size_t dlen, const resp_arg_t *a)
{
    assert(dlen >= 6);
    size_t j = 0, n = a->len < 64 ? a->len : 64;
    for (size_t i = 0; i < n && j + 5 < dlen; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        if (isprint(ch) && ch != '\'')
            dst[j++] = (char)ch;
        else
            j += (size_t)snprintf(dst + j, dlen - j, "\\x%02x", ch);
    }
    dst[j] = '\0';
}

/* Is word (n bytes) an option token of the syntax: an upper-case word of
 * it, whole, compared without case? */
static bool syntax_has_token(const char *syntax, const char *word, size_t n)
{
    for (const char *p = syntax; p != NULL && *p != '\0';) {
        while (*p != '\0' && !isupper((unsigned char)*p))
            p++;
        const char *q = p;
        while (*q != '\0' && (isupper((unsigned char)*q) || isdigit((unsigned char)*q) || *q == '_' || *q == '-'))
            q++;
        if (q > p && (size_t)(q - p) == n && strncasecmp(p, word, n) == 0)
            return true;
        p = q;
    }
    return false;
}

/* The name of argument i for an error: the option token before it (IFREV,
 * DELAY) when that is a token of the command's syntax, else the syntax's
 * placeholder at that place when every argument before it is a plain one
 * ("key increment"), else "argument i". Written into buf. */
static void arg_label(const cmd_ctx_t *x, size_t i, char *buf, size_t len)
{
    const char *syn = x->def != NULL ? x->def->syntax : NULL;
    if (syn != NULL && i >= 2 && syntax_has_token(syn, x->argv[i - 1].ptr, x->argv[i - 1].len)) {
        size_t n = x->argv[i - 1].len < len - 1 ? x->argv[i - 1].len : len - 1;
        for (size_t k = 0; k < n; k++)
            buf[k] = (char)toupper((unsigned char)x->argv[i - 1].ptr[k]);
        buf[n] = '\0';
        return;
    }
    for (size_t k = 1; syn != NULL; k++) { /* the syntax's words after the name */
        while (*syn == ' ')
            syn++;
        size_t w = strcspn(syn, " ");
        if (w == 0 || strcspn(syn, "[]{}|.") < w)
            break; /* not a plain placeholder: places after it vary */
        if (k == i) {
            snprintf(buf, len, "%.*s", (int)w, syn);
            return;
        }
        syn += w;
    }
    snprintf(buf, len, "argument %zu", i);
}

/* -ERR value is not an integer or out of range, naming the argument, its
 * value and the range wanted; the text Redis clients know comes first. */
static void reply_not_int(cmd_ctx_t *x, size_t i, const char *range)
{
    char label[64], word[300];
    arg_label(x, i, label, sizeof label);
    cmd_quote(word, sizeof word, &x->argv[i]);
    reply_errf(x, "ERR value is not an integer or out of range: %s is '%s' (%s)", label, word, range);
}

bool arg_i64(cmd_ctx_t *x, size_t i, int64_t *out)
{
    assert(i < x->argc && out != NULL);
    if (parse_i64_strict(x->argv[i].ptr, x->argv[i].len, out))
        return true;
    reply_not_int(x, i, "an integer from -9223372036854775808 to 9223372036854775807");
    return false;
}

bool arg_u64(cmd_ctx_t *x, size_t i, uint64_t *out)
{
    assert(i < x->argc && out != NULL);
    char buf[32];
    size_t n = x->argv[i].len;
    if (n > 0 && n < sizeof buf && x->argv[i].ptr[0] >= '0' && x->argv[i].ptr[0] <= '9') {
        memcpy(buf, x->argv[i].ptr, n);
        buf[n] = '\0';
        errno = 0;
        char *end = NULL;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno == 0 && *end == '\0') {
            *out = v;
            return true;
        }
    }
    reply_not_int(x, i, "an integer from 0 to 18446744073709551615");
    return false;
}

bool arg_name_ok(cmd_ctx_t *x, size_t i)
{
    assert(i < x->argc);
    if (x->argv[i].len <= (size_t)x->srv->cfg.max_name_bytes)
        return true;
    reply_errf(x, "LIMIT name is %zu bytes, above max-name-bytes (%lld)", x->argv[i].len,
               (long long)x->srv->cfg.max_name_bytes);
    return false;
}

bool arg_value_ok(cmd_ctx_t *x, size_t i)
{
    assert(i < x->argc);
    if (x->argv[i].len <= (size_t)x->srv->cfg.max_value_bytes)
        return true;
    reply_errf(x, "LIMIT value is %zu bytes, above max-value-bytes (%lld)", x->argv[i].len,
               (long long)x->srv->cfg.max_value_bytes);
    return false;
}

bool reply_fits(cmd_ctx_t *x, size_t bytes, const char *hint)
{
    if (bytes <= (size_t)x->srv->cfg.max_reply_bytes)
        return true;
    reply_errf(x, "LIMIT reply would be %zu bytes, above max-reply-bytes (%lld); %s", bytes,
               (long long)x->srv->cfg.max_reply_bytes, hint);
    return false;
}

/* ---- fences ------------------------------------------------------------------- */

size_t cmd_fence_parse(cmd_ctx_t *x, size_t i, cmd_fence_t *f)
{
    assert(arg_is(x, i, "FENCE")); /* the caller found the word */
    memset(f, 0, sizeof *f);
    if (arg_is(x, i + 1, "ELECTION") && i + 3 < x->argc) {
        if (!arg_name_ok(x, i + 2) || !arg_u64(x, i + 3, &f->token))
            return 0;
        f->kind = FENCE_ELECTION;
        f->name = x->argv[i + 2].ptr;
        f->nlen = x->argv[i + 2].len;
        return 4;
    }
    if (arg_is(x, i + 1, "DELIVERY") && i + 4 < x->argc) {
        if (!arg_name_ok(x, i + 2) || !arg_u64(x, i + 3, &f->id) || !arg_u64(x, i + 4, &f->token))
            return 0;
        f->kind = FENCE_DELIVERY;
        f->name = x->argv[i + 2].ptr;
        f->nlen = x->argv[i + 2].len;
        return 5;
    }
    if (i + 2 < x->argc) {
        if (!arg_name_ok(x, i + 1) || !arg_u64(x, i + 2, &f->token))
            return 0;
        f->kind = FENCE_LOCK;
        f->name = x->argv[i + 1].ptr;
        f->nlen = x->argv[i + 1].len;
        return 3;
    }
    reply_syntax_at(x, i);
    return 0;
}

bool cmd_fence_holds(cmd_ctx_t *x, const cmd_fence_t *f)
{
    assert(f->kind >= FENCE_NONE && f->kind <= FENCE_DELIVERY);
    server_t *s = x->srv;
    int n = f->nlen > 64 ? 64 : (int)f->nlen;
    if (f->kind == FENCE_ELECTION) {
        if (coord_elect_check(core_coord(s->core), f->name, f->nlen, f->token, s->now_ms))
            return true;
        reply_errf(x, "NOTHOLDER term %llu does not lead election '%.*s' now", (unsigned long long)f->token, n,
                   f->name);
        return false;
    }
    if (f->kind == FENCE_DELIVERY) {
        qwait_catch_up(s, f->name, f->nlen); /* a lease that ran out ends its delivery first */
        const queue_t *q = queue_get(core_queues(s->core), f->name, f->nlen);
        if (q != NULL && f->token != 0 && queue_delivery_current(q, f->id, f->token))
            return true;
        reply_errf(x, "NOTHOLDER delivery %llu of message %llu in queue '%.*s' is no longer current",
                   (unsigned long long)f->token, (unsigned long long)f->id, n, f->name);
        return false;
    }
    return true;
}

void reply_notholder_lock(cmd_ctx_t *x, const cmd_fence_t *f)
{
    int n = f->nlen > 64 ? 64 : (int)f->nlen;
    reply_errf(x, "NOTHOLDER token %llu does not hold lock '%.*s' now", (unsigned long long)f->token, n, f->name);
}

void reply_ok(cmd_ctx_t *x) { resp_add_simple(x->out, "OK"); }

/* The error codes counted by code for /metrics (docs/protocol.md's table);
 * any other code counts as the last, "other". */
static const char *const error_codes[] = {"ERR",      "CONFLICT", "COMPACTED", "LIMIT",    "NOTFOUND",
                                          "NOTHOLDER", "BUSY",     "TIMEOUT",   "DEADLETTER", "NOAUTH",
                                          "WRONGPASS", "NOPROTO",  "DENIED",    "READONLY", "other"};
#define ERROR_CODES (sizeof error_codes / sizeof error_codes[0])
_Static_assert(ERROR_CODES <= sizeof ((server_stats_t *)0)->errors_by_code / sizeof(uint64_t), "errors_by_code");

static void count_error(server_t *s, const char *msg)
{
    size_t n = strcspn(msg, " ");
    size_t i = 0;
    while (i < ERROR_CODES - 1 && !(strlen(error_codes[i]) == n && memcmp(error_codes[i], msg, n) == 0))
        i++;
    s->stats.errors_by_code[i]++;
}

void cmd_foreach_error_code(server_t *s, void (*fn)(void *arg, const char *code, uint64_t n), void *arg)
{
    for (size_t i = 0; i < ERROR_CODES; i++)
        fn(arg, error_codes[i], s->stats.errors_by_code[i]);
}

void reply_err(cmd_ctx_t *x, const char *msg)
{
    /* An error is one line with its code first: a CR or LF would split
     * the stream (the client's words are quoted before they get here). */
    assert(msg != NULL && msg[0] != '\0' && msg[0] != ' ');
    ORDO_DEBUG_ASSERT(strpbrk(msg, "\r\n") == NULL);
    x->srv->stats.errors_total++;
    count_error(x->srv, msg);
    resp_add_error(x->out, msg);
}

void reply_errf(cmd_ctx_t *x, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reply_err(x, msg);
}

void reply_syntax(cmd_ctx_t *x) { reply_err(x, "ERR syntax error"); }

void reply_syntax_at(cmd_ctx_t *x, size_t i)
{
    assert(i < x->argc);
    char word[300];
    cmd_quote(word, sizeof word, &x->argv[i]);
    if (x->def != NULL && x->def->syntax != NULL)
        reply_errf(x, "ERR syntax error at '%s' (argument %zu); syntax: %s %s", word, i, x->def->name, x->def->syntax);
    else
        reply_errf(x, "ERR syntax error at '%s' (argument %zu)", word, i);
}

void reply_notleader(cmd_ctx_t *x)
{
    char leader[256];
    reply_errf(x, "NOTLEADER %s", cluster_leader(x->srv, leader, sizeof leader));
}

bool cmd_write(cmd_ctx_t *x, record_t *rec, apply_result_t *res)
{
    ORDO_DEBUG_ASSERT(rec != NULL && res != NULL && record_valid(rec)); /* handlers validate arguments before they make a record */
    char why[WRITER_REFUSAL_MAX];
    if (writer_submit(x->srv, rec, WRITER_CLIENT, res, why, sizeof why) == WRITER_APPLIED)
        return true;
    reply_err(x, why); /* a refusal, or applied in memory but never stored: never OK */
    return false;
}
