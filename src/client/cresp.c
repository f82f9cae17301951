/*
 * cresp.c -- RESP2/RESP3 reply parsing and command encoding for the
 * client (the format is in cresp.h; the server's own parser parses
 * requests, not replies, so the client has its own).
 *
 * Invariant of cresp_parse(): bytes before *used are fully represented in
 * the parser (as a finished reply or inside the open aggregates of the
 * stack); nothing past *used has been looked at as consumed. Every element
 * is validated completely (header digits, CRLF after a bulk body) before it
 * is consumed, so a torn element costs one re-scan of its header only.
 */
#include "cresp.h"

#include "base/dec.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void ordo_reply_free(ordo_reply_t *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n; i++)
        ordo_reply_free(r->elem[i]);
    free(r->elem);
    free(r->str);
    free(r);
}

void cresp_init(cresp_parser_t *p)
{
    memset(p, 0, sizeof *p);
}

void cresp_set_limits(cresp_parser_t *p, int64_t bytes_max, int64_t elems_max)
{
    assert(p != NULL && bytes_max >= 0 && elems_max >= 0);
    p->bytes_max = bytes_max;
    p->elems_max = elems_max;
}

void cresp_reset(cresp_parser_t *p)
{
    assert(p != NULL && p->depth >= 0 && p->depth <= CRESP_DEPTH_MAX);
    for (int i = 0; i < p->depth; i++)
        ordo_reply_free(p->stack[i].agg);
    p->depth = 0;
    p->bytes = 0;
    p->elems = 0;
}

/* over() -- would one more element of str_len string bytes pass the
 * reply's bounds? 1 if so, else 0. Nothing is counted until the element
 * is consumed (account()), so a torn element judged twice costs once. */
static int over(const cresp_parser_t *p, int64_t str_len)
{
    assert(str_len >= 0 && p->bytes >= 0 && p->elems >= 0);
    int64_t cost = CRESP_ELEM_COST + str_len + 1;
    if (p->elems_max > 0 && p->elems + 1 > p->elems_max)
        return 1;
    return p->bytes_max > 0 && cost > p->bytes_max - p->bytes;
}

static void account(cresp_parser_t *p, int64_t str_len)
{
    p->elems++;
    p->bytes += CRESP_ELEM_COST + str_len + 1;
}

static const char ERR_BOUND[] = "reply larger than the client's reply_bytes_max or reply_elems_max";

/* Strict decimal int64: optional '-', at least one digit, nothing else. */
static int parse_i64(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0;
    if (n > 0 && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == n)
        return -1;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
    }
    return 0;
}

static ordo_reply_t *leaf(ordo_reply_type_t t, const char *s, size_t n)
{
    ordo_reply_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->type = t;
    if (s != NULL) {
        r->str = malloc(n + 1);
        if (r->str == NULL) {
            free(r);
            return NULL;
        }
        memcpy(r->str, s, n);
        r->str[n] = '\0';
        r->len = n;
    }
    return r;
}

static int fail(cresp_parser_t *p, const char *why)
{
    p->error = why;
    cresp_reset(p);
    return CRESP_ERROR;
}

/* attach() -- give a finished element to the innermost open aggregate,
 * closing every aggregate it completes. Returns CRESP_DONE with *out when a
 * top-level reply is complete, CRESP_NEED_MORE when the element went into
 * an aggregate (or was a finished attribute, dropped), CRESP_NOMEM. */
static int attach(cresp_parser_t *p, ordo_reply_t *el, int is_attr, ordo_reply_t **out)
{
    assert(p->depth >= 0 && p->depth <= CRESP_DEPTH_MAX);
    assert(el != NULL && out != NULL);
    for (;;) {
        if (is_attr) {
            ordo_reply_free(el);
            return CRESP_NEED_MORE;
        }
        if (p->depth == 0) {
            *out = el;
            return CRESP_DONE;
        }
        cresp_frame_t *f = &p->stack[p->depth - 1];
        assert((int64_t)f->agg->n < f->want && f->agg->n <= f->cap);
        if (f->agg->n == f->cap) {
            size_t cap = f->cap ? f->cap * 2 : 16;
            if ((int64_t)cap > f->want)
                cap = (size_t)f->want;
            ordo_reply_t **e = realloc(f->agg->elem, cap * sizeof *e);
            if (e == NULL) {
                ordo_reply_free(el);
                return CRESP_NOMEM;
            }
            f->agg->elem = e;
            f->cap = cap;
        }
        f->agg->elem[f->agg->n++] = el;
        if ((int64_t)f->agg->n < f->want)
            return CRESP_NEED_MORE;
        el = f->agg;
        is_attr = f->attribute;
        p->depth--;
    }
}

int cresp_parse(cresp_parser_t *p, const char *buf, size_t len, size_t *used,
                ordo_reply_t **out)
{
    assert(p != NULL && used != NULL && out != NULL);
    assert(buf != NULL || len == 0);
    assert(p->depth >= 0 && p->depth <= CRESP_DEPTH_MAX);
    size_t pos = 0;
    *out = NULL;
    for (;;) {
        *used = pos;
        if (pos == len)
            return CRESP_NEED_MORE;
        size_t avail = len - pos;
        size_t scan = avail < CRESP_LINE_MAX ? avail : CRESP_LINE_MAX;
        const char *nl = memchr(buf + pos, '\n', scan);
        if (nl == NULL)
            return avail >= CRESP_LINE_MAX ? fail(p, "header line too long") : CRESP_NEED_MORE;
        if (nl == buf + pos || nl[-1] != '\r')
            return fail(p, "header line not ended by CRLF");
        char t = buf[pos];
        const char *line = buf + pos + 1;
        size_t line_len = (size_t)(nl - 1 - line);
        size_t end = (size_t)(nl + 1 - buf);
        ordo_reply_t *el = NULL;
        int is_attr = 0;
        int64_t n;
        int64_t slen = 0; /* string bytes the element holds */

        switch (t) {
        case '+':
        case '-':
        case '(':
            slen = (int64_t)line_len;
            el = leaf(t == '+' ? ORDO_REPLY_STATUS : t == '-' ? ORDO_REPLY_ERROR : ORDO_REPLY_BIGNUM,
                      line, line_len);
            break;
        case ':':
            if (parse_i64(line, line_len, &n) != 0)
                return fail(p, "bad integer");
            el = leaf(ORDO_REPLY_INTEGER, NULL, 0);
            if (el)
                el->integer = n;
            break;
        case '_':
            if (line_len != 0)
                return fail(p, "bad null");
            el = leaf(ORDO_REPLY_NIL, NULL, 0);
            break;
        case '#':
            if (line_len != 1 || (line[0] != 't' && line[0] != 'f'))
                return fail(p, "bad boolean");
            el = leaf(ORDO_REPLY_INTEGER, NULL, 0);
            if (el)
                el->integer = line[0] == 't';
            break;
        case ',': {
            char tmp[128];
            if (line_len == 0 || line_len >= sizeof tmp)
                return fail(p, "bad double");
            memcpy(tmp, line, line_len);
            tmp[line_len] = '\0';
            char *e;
            double d = strtod(tmp, &e);
            if (*e != '\0')
                return fail(p, "bad double");
            el = leaf(ORDO_REPLY_DOUBLE, line, line_len);
            if (el)
                el->dbl = d;
            break;
        }
        case '$':
        case '!':
        case '=':
            if (parse_i64(line, line_len, &n) != 0 || n < -1 || n > CRESP_BULK_MAX)
                return fail(p, "bad bulk length");
            slen = n > 0 ? n : 0;
            if (over(p, slen)) /* judged before the body is awaited */
                return fail(p, ERR_BOUND);
            if (n == -1) {
                if (t != '$')
                    return fail(p, "bad bulk length");
                el = leaf(ORDO_REPLY_NIL, NULL, 0);
                break;
            }
            if (len - end < (size_t)n + 2)
                return CRESP_NEED_MORE; /* torn body: come back with more */
            if (buf[end + (size_t)n] != '\r' || buf[end + (size_t)n + 1] != '\n')
                return fail(p, "bulk string not ended by CRLF");
            if (t == '=') {
                if (n < 4 || buf[end + 3] != ':')
                    return fail(p, "bad verbatim string");
                el = leaf(ORDO_REPLY_STRING, buf + end + 4, (size_t)n - 4);
            } else {
                el = leaf(t == '$' ? ORDO_REPLY_STRING : ORDO_REPLY_ERROR, buf + end, (size_t)n);
            }
            end += (size_t)n + 2;
            break;
        case '*':
        case '~':
        case '%':
        case '>':
        case '|':
            if (parse_i64(line, line_len, &n) != 0 || n < -1 || n > CRESP_AGG_MAX)
                return fail(p, "bad aggregate length");
            if (over(p, 0))
                return fail(p, ERR_BOUND);
            if (n == -1) {
                if (t != '*')
                    return fail(p, "bad aggregate length");
                el = leaf(ORDO_REPLY_NIL, NULL, 0);
                break;
            }
            el = leaf(t == '%' || t == '|' ? ORDO_REPLY_MAP : t == '>' ? ORDO_REPLY_PUSH : ORDO_REPLY_ARRAY,
                      NULL, 0);
            if (el == NULL)
                return CRESP_NOMEM;
            if (t == '%' || t == '|')
                n *= 2;
            if (n > 0) {
                if (p->depth == CRESP_DEPTH_MAX) {
                    ordo_reply_free(el);
                    return fail(p, "replies nested too deeply");
                }
                p->stack[p->depth++] = (cresp_frame_t){ .agg = el, .want = n, .cap = 0,
                                                        .attribute = t == '|' };
                account(p, 0);
                pos = end;
                continue;
            }
            is_attr = t == '|';
            break;
        default:
            return fail(p, "unknown reply type byte");
        }
        if (el == NULL)
            return CRESP_NOMEM;
        if (over(p, slen)) {
            ordo_reply_free(el);
            return fail(p, ERR_BOUND);
        }
        account(p, slen);
        pos = end;
        int rc = attach(p, el, is_attr, out);
        if (rc == CRESP_DONE) {
            p->last_bytes = p->bytes;
            p->bytes = 0;
            p->elems = 0;
        }
        if (rc != CRESP_NEED_MORE) {
            *used = pos;
            return rc;
        }
    }
}

/* ---- buffers and encoding ---------------------------------------------- */

int cresp_buf_reserve(cresp_buf_t *b, size_t extra)
{
    assert(b != NULL && b->len <= b->cap);
    if (b->cap - b->len >= extra)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (d == NULL)
        return -1;
    b->data = d;
    b->cap = cap;
    return 0;
}

int cresp_buf_append(cresp_buf_t *b, const void *p, size_t n)
{
    if (cresp_buf_reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void cresp_buf_consume(cresp_buf_t *b, size_t n)
{
    assert(b != NULL && n <= b->len);
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

void cresp_buf_free(cresp_buf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* A header line at most: a type byte, a count, CRLF. */
#define HEADER_MAX (1 + DEC_U64_MAX + 2)

/* Write "<t><n>\r\n" at p (room for HEADER_MAX); returns the end. */
static char *put_header(char *p, char t, size_t n)
{
    *p++ = t;
    p += dec_u64(p, (uint64_t)n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

int cresp_encode(cresp_buf_t *b, int argc, const char *const *argv, const size_t *lens)
{
    assert(b != NULL && argc >= 0 && (argv != NULL || argc == 0));
    size_t mark = b->len;
    if (cresp_buf_reserve(b, HEADER_MAX) != 0)
        goto undo;
    b->len = (size_t)(put_header(b->data + b->len, '*', (size_t)argc) - b->data);
    for (int i = 0; i < argc; i++) {
        /* One reserve per argument: its header, its bytes, CRLF. */
        size_t n = lens ? lens[i] : strlen(argv[i]);
        if (n > SIZE_MAX - HEADER_MAX - 2 || cresp_buf_reserve(b, HEADER_MAX + n + 2) != 0)
            goto undo;
        char *p = put_header(b->data + b->len, '$', n);
        if (n)
            memcpy(p, argv[i], n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
        b->len = (size_t)(p - b->data);
    }
    return 0;
undo:
    b->len = mark;
    return -1;
}
