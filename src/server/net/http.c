/*
 * http.c -- HTTP/1.1 on ordod's own loop (docs/http.md has the routes).
 *
 * An HTTP connection is a conn_t (net.c accepts, reads, writes, holds
 * output until the log commits it, parks blocking commands) with c->http
 * pointing at the state below. Requests are parsed with Node's
 * http-parser (Debian's libhttp-parser-dev: a callback parser over the
 * bytes we already have, no threads, no loop of its own). Each complete
 * request becomes one command -- the same one a RESP client would send --
 * given to cmd_dispatch(); the command writes its RESP reply into c->out
 * as for any client, and rewrite() (from http_before_flush()) turns those
 * bytes into an HTTP response. There is no second path into the core.
 *
 * Invariants:
 *   - out[0 .. raw_at) is HTTP; out[raw_at ..) is RESP not yet rewritten
 *     (raw_at is kept as an absolute count, raw_abs, since net.c consumes
 *     out from the front as it sends: raw_at = raw_abs - c->out_consumed).
 *     http_before_flush() runs before every send, so no RESP byte leaves.
 *   - One request at a time: while one waits (awaiting: Q.CALL parked, a
 *     reply held), the requests pipelined behind it stay in c->in, so
 *     responses leave in request order.
 *   - A connection turned into an event stream (sse) reads nothing more;
 *     its RESP pushes become events.
 *
 *   - Authorization is decided when a request's headers are complete
 *     (on_headers_complete()), before any body byte is read; trailers
 *     never change a header.
 *
 * Limits (docs/operations.md): http-header-max-bytes (431, raw bytes,
 * counted by the parser), http-body-max-bytes (413; max-bulk-bytes-unauth
 * before a valid token), http-max-clients (503), http-request-timeout-ms
 * (408: a request begun must arrive whole, against slow clients), and
 * http-idle-ms (an idle keep-alive connection is closed). Parsing is
 * strict where http-parser is lenient (header names, versions: 400/505).
 * Each error response closes the connection.
 */
#include <assert.h>
#include <http_parser.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/cmd.h"
#include "http.h"
#include "http_assets.h"
#include "net/conn.h"

struct http_listener_s {
    uv_tcp_t tcp;
    size_t nconns;          /* HTTP connections open (http-max-clients) */
};

enum route {
    R_NONE, R_CALL, R_PUSH, R_RESULT, R_PAUSE, R_KV_GET, R_KV_PUT, R_KV_DEL, R_WATCH, R_WATCH_SNAP,
};

/* Headers we read; the others are skipped. */
enum hdr { H_AUTH, H_IDEM, H_IF_MATCH, H_IF_NONE_MATCH, H_LAST_EVENT_ID, H_EXPECT, H_COUNT };
static const char *const hdr_names[H_COUNT] = {"authorization", "idempotency-key", "if-match", "if-none-match",
                                               "last-event-id", "expect"};

#define HTTP_ARGS_MAX 12

struct http_conn_s {
    http_parser p;
    ordo_buf_t url, body, field, value;
    ordo_buf_t hdr[H_COUNT];
    bool has_hdr[H_COUNT];
    bool in_value;          /* the last header callback was a value */
    int limit_status;       /* a callback stopped the parser: 400, 401, 413, 505 */
    const char *limit_why;  /* ... and why (a 400's or 505's text), NULL for the limits' own */
    size_t body_max;        /* body bytes this request may send: set when its headers are complete */
    bool begun;             /* bytes of a request arrived */
    uint64_t begun_ms;      /* when its first byte arrived */
    uint64_t last_ms;       /* when the last response was written (http-idle-ms) */
    bool keep_alive;
    bool awaiting;          /* a dispatched command's reply is not yet rewritten */
    bool sse;               /* this connection is an event stream */
    bool counted;           /* counted in the listener's nconns */
    int route;
    uint64_t raw_abs;       /* see the invariants */
    ordo_buf_t scratch;     /* decoded path segments and the command's words */
    ordo_buf_t queue;       /* the queue of a call (for Location) */
    ordo_buf_t watch_key;   /* a watch's key or prefix, for the snapshot retry */
    bool watch_prefix;
};

/* ---- a RESP reply, decoded ------------------------------------------------ */

#define RV_NODES_MAX 64

typedef struct rv_s {
    char type;              /* '+', '-', ':', '$', '*' (arrays, maps, pushes, sets), '_' (nil) */
    int64_t i;
    const char *s;
    size_t len;             /* bytes of s, or elements of an array */
    struct rv_s *el;        /* first element (arrays) */
} rv_t;

typedef struct {
    rv_t nodes[RV_NODES_MAX];
    size_t n;
} rv_arena_t;

/* Decode one value at p[0..len): returns bytes used, 0 if incomplete, or
 * (size_t)-1 if it is not RESP we can read (attributes, which ordo never
 * sends, or more than RV_NODES_MAX elements: no reply of a command HTTP
 * makes has more than seven). Strings point into p. */
static size_t rv_decode(const char *p, size_t len, rv_arena_t *a, rv_t *v)
{
    const char *eol = memchr(p, '\r', len);
    if (eol == NULL || (size_t)(eol - p) + 2 > len)
        return 0;
    size_t head = (size_t)(eol - p) + 2;
    char t = p[0];
    const char *body = p + 1;
    size_t blen = (size_t)(eol - body);
    char num[32];
    int64_t n = 0;
    if (blen < sizeof num && strchr(":$*%>~=!(", t) != NULL) {
        memcpy(num, body, blen);
        num[blen] = '\0';
        n = strtoll(num, NULL, 10);
    }
    memset(v, 0, sizeof *v);
    switch (t) {
    case '+': case '-': case ',': case '(':
        v->type = t == '-' ? '-' : '+';
        v->s = body;
        v->len = blen;
        return head;
    case ':':
        v->type = ':';
        v->i = n;
        return head;
    case '_':
        v->type = '_';
        return head;
    case '#':
        v->type = ':';
        v->i = blen > 0 && body[0] == 't';
        return head;
    case '$': case '=': case '!':
        if (n < 0) {
            v->type = '_';
            return head;
        }
        if (len - head < (size_t)n + 2)
            return 0;
        v->type = t == '!' ? '-' : '$';
        v->s = p + head;
        v->len = (size_t)n;
        if (t == '=' && v->len >= 4) { /* verbatim: "txt:" first */
            v->s += 4;
            v->len -= 4;
        }
        return head + (size_t)n + 2;
    case '*': case '%': case '>': case '~': {
        if (n < 0) {
            v->type = '_';
            return head;
        }
        size_t count = (size_t)n * (t == '%' ? 2 : 1);
        if (a->n + count > RV_NODES_MAX)
            return (size_t)-1;
        v->type = '*';
        v->el = &a->nodes[a->n];
        v->len = count;
        a->n += count;
        size_t off = head;
        for (size_t i = 0; i < count; i++) {
            size_t used = rv_decode(p + off, len - off, a, &v->el[i]);
            if (used == 0 || used == (size_t)-1)
                return used;
            off += used;
        }
        return off;
    }
    default:
        return (size_t)-1;
    }
}

/* An error's code ("CONFLICT" of "CONFLICT 12"), compared to code. */
static bool err_is(const rv_t *v, const char *code)
{
    size_t n = strlen(code);
    return v->type == '-' && v->len >= n && memcmp(v->s, code, n) == 0 && (v->len == n || v->s[n] == ' ');
}

/* ---- writing responses ---------------------------------------------------- */

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

static size_t raw_at(const conn_t *c)
{
    assert(c->http->raw_abs >= c->out_consumed && c->http->raw_abs - c->out_consumed <= c->out.len);
    return (size_t)(c->http->raw_abs - c->out_consumed);
}

static void mark_http(conn_t *c) { c->http->raw_abs = c->out_consumed + c->out.len; }

/* Append a whole response to out; headers is "" or lines ending in CRLF.
 * Responses that close the connection say so. */
static void respond(conn_t *c, int status, const char *ctype, const char *headers, const void *body, size_t blen)
{
    struct http_conn_s *h = c->http;
    bool close = !h->keep_alive || status == 400 || status == 408 || status == 413 || status == 431;
    ordo_buf_printf(&c->out, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n%s%s%s%s%s", status, reason(status), blen,
                    ctype ? "Content-Type: " : "", ctype ? ctype : "", ctype ? "\r\n" : "", headers,
                    close ? "Connection: close\r\n\r\n" : "\r\n");
    ordo_buf_append(&c->out, body, blen);
    mark_http(c);
    h->last_ms = c->srv->now_ms;
    if (close)
        c->close_after_write = true;
}

static void respond_text(conn_t *c, int status, const char *text)
{
    ordo_buf_t b = ORDO_BUF_INIT;
    ordo_buf_printf(&b, "%s\n", text);
    respond(c, status, "text/plain; charset=utf-8", "", b.data, b.len);
    ordo_buf_free(&b);
}

/* An error reply's status: the contract's (412 conflict, 502 dead letter),
 * else the nearest HTTP meaning of the RESP error code. */
static int error_status(const rv_t *v)
{
    if (err_is(v, "CONFLICT")) return 412;
    if (err_is(v, "DEADLETTER")) return 502;
    if (err_is(v, "IDEMPOTENCY")) return 422;
    if (err_is(v, "NOTFOUND")) return 404;
    if (err_is(v, "NOAUTH") || err_is(v, "WRONGPASS")) return 401;
    if (err_is(v, "LIMIT")) return 413;
    if (err_is(v, "BUSY")) return 429;
    if (err_is(v, "READONLY") || err_is(v, "DENIED") || err_is(v, "NOTLEADER")) return 503;
    if (err_is(v, "TIMEOUT")) return 504;
    if (err_is(v, "ERR") || err_is(v, "COMPACTED") || err_is(v, "NOTHOLDER")) return 400;
    return 500;
}

static void respond_error(conn_t *c, const rv_t *v)
{
    ordo_buf_t b = ORDO_BUF_INIT;
    ordo_buf_append(&b, v->s, v->len);
    ordo_buf_append(&b, "\n", 1);
    respond(c, error_status(v), "text/plain; charset=utf-8", "", b.data, b.len);
    ordo_buf_free(&b);
}

/* ---- the reply of a command, as HTTP --------------------------------------- */

static void dispatch(conn_t *c, int route, const resp_arg_t *argv, size_t argc);

/* The SSE stream starts: headers without a length (the body is the
 * stream), then the events the watch layer writes (c->sse, set when the
 * watch was asked for). */
static void start_stream(conn_t *c)
{
    assert(c->sse);
    ordo_buf_puts(&c->out, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                           "X-Accel-Buffering: no\r\n\r\n: ordo watch\n\n");
    mark_http(c);
    c->http->sse = true;
}

/* Turn the reply v (of the command of h->route) into a response. */
static void answer(conn_t *c, const rv_t *v)
{
    struct http_conn_s *h = c->http;
    char hb[512];
    switch (h->route) {
    case R_CALL:
        if (err_is(v, "TIMEOUT")) {
            /* "TIMEOUT message <id> not done ...": the message stays queued. */
            unsigned long long id = 0;
            if (v->len > 16 && sscanf(v->s, "TIMEOUT message %llu", &id) == 1) {
                ordo_buf_t loc = ORDO_BUF_INIT;
                ordo_buf_t body = ORDO_BUF_INIT;
                ordo_buf_printf(&body, "{\"id\":%llu}\n", id);
                ordo_buf_puts(&loc, "Location: /v1/queues/");
                for (size_t i = 0; i < h->queue.len; i++) {
                    unsigned char ch = (unsigned char)h->queue.data[i];
                    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                        strchr("-._~", ch))
                        ordo_buf_append(&loc, &h->queue.data[i], 1);
                    else
                        ordo_buf_printf(&loc, "%%%02X", ch);
                }
                ordo_buf_printf(&loc, "/results/%llu\r\n", id);
                ordo_buf_append(&loc, "", 1);
                respond(c, 202, "application/json", loc.data, body.data, body.len);
                ordo_buf_free(&loc);
                ordo_buf_free(&body);
                return;
            }
        }
        /* a result or an error answers as for Q.RESULT */
        /* fall through */
    case R_RESULT:
        if (v->type == '$')
            respond(c, 200, "application/octet-stream", "", v->s, v->len);
        else if (v->type == '_')
            respond(c, h->route == R_CALL ? 200 : 204, NULL, "", "", 0);
        else if (v->type == '-')
            respond_error(c, v);
        else
            respond_text(c, 500, "unexpected reply");
        return;
    case R_PUSH:
        if (v->type == ':') {
            int n = snprintf(hb, sizeof hb, "{\"id\":%" PRId64 "}\n", v->i);
            respond(c, 202, "application/json", "", hb, (size_t)n);
        } else if (v->type == '-')
            respond_error(c, v);
        else
            respond_text(c, 500, "unexpected reply");
        return;
    case R_PAUSE:
        if (v->type == ':') {
            int n = snprintf(hb, sizeof hb, "{\"changed\":%" PRId64 "}\n", v->i);
            respond(c, 200, "application/json", "", hb, (size_t)n);
        } else if (v->type == '-')
            respond_error(c, v);
        else
            respond_text(c, 500, "unexpected reply");
        return;
    case R_KV_GET:
        if (v->type == '_')
            respond_text(c, 404, "no such key");
        else if (v->type == '*' && v->len >= 3 && v->el[0].type == '$') {
            snprintf(hb, sizeof hb, "ETag: \"%" PRId64 "\"\r\n", v->el[2].i);
            respond(c, 200, "application/octet-stream", hb, v->el[0].s, v->el[0].len);
        } else if (v->type == '-')
            respond_error(c, v);
        else
            respond_text(c, 500, "unexpected reply");
        return;
    case R_KV_PUT:
    case R_KV_DEL:
        if (v->type == ':' && v->i == 0 && h->route == R_KV_DEL)
            respond_text(c, 404, "no such key");
        else if (v->type == ':') {
            snprintf(hb, sizeof hb, "ETag: \"%" PRId64 "\"\r\n", v->i);
            char body[64];
            int bn = snprintf(body, sizeof body, "{\"revision\":%" PRId64 "}\n", v->i);
            respond(c, 200, "application/json", hb, body, (size_t)bn);
        } else if (v->type == '-')
            respond_error(c, v);
        else
            respond_text(c, 500, "unexpected reply");
        return;
    case R_WATCH:
    case R_WATCH_SNAP:
        if (v->type == ':') {
            start_stream(c);
            return;
        }
        if (h->route == R_WATCH && err_is(v, "COMPACTED")) {
            /* The history after Last-Event-ID is gone: the current keys,
             * then `synced` (the contract), through a SNAPSHOT watch. */
            resp_arg_t argv[4] = {{{"KV.WATCH"}, 8}, {{h->watch_key.data}, h->watch_key.len}};
            size_t argc = 2;
            if (h->watch_prefix)
                argv[argc++] = (resp_arg_t){{"PREFIX"}, 6};
            argv[argc++] = (resp_arg_t){{"SNAPSHOT"}, 8};
            dispatch(c, R_WATCH_SNAP, argv, argc);
            return;
        }
        c->sse = false; /* no stream: the watch was refused */
        if (v->type == '-')
            respond_error(c, v);
        else
            respond_text(c, 500, "unexpected reply");
        return;
    default:
        respond_text(c, 500, "unexpected reply");
    }
}

/* Rewrite the RESP at out[raw_at ..) into HTTP. An event stream's
 * output is final already (the watch layer writes its events as SSE,
 * c->sse): it passes through, so a catch-up of any length costs no copy
 * here. A reply is taken out of out with what follows it (the events of a
 * watch's catch-up, after KV.WATCH's reply): that is one copy per
 * request, never per event. */
static void rewrite(conn_t *c)
{
    struct http_conn_s *h = c->http;
    for (;;) {
        size_t at = raw_at(c);
        if (h->sse) {
            mark_http(c);
            return;
        }
        if (at == c->out.len)
            return;
        if (h->awaiting && c->waiter != NULL)
            return; /* parked: nothing is its reply yet */
        /* Blobs are shared into an event stream only (conn_add_shared()),
         * which rewrites nothing: out may be cut and rebuilt below. */
        assert(c->shared.n == 0 || c->shared.v[c->shared.n - 1].at <= at);
        rv_arena_t a = {.n = 0};
        rv_t v;
        size_t used = rv_decode(c->out.data + at, c->out.len - at, &a, &v);
        if (used == 0 || used == (size_t)-1) {
            /* Not a whole reply we can read (replies and events are
             * written whole, so this is a bug): drop it, never send RESP. */
            c->out.len = at;
            h->awaiting = false;
            h->keep_alive = false;
            respond_text(c, 500, "internal error: unreadable reply");
            return;
        }
        /* The reply leaves out (v points into its copy); what follows it
         * (more events) waits in tail and is put back, still RESP. */
        ordo_buf_t reply = ORDO_BUF_INIT, tail = ORDO_BUF_INIT;
        ordo_buf_append(&reply, c->out.data + at, used);
        ordo_buf_append(&tail, c->out.data + at + used, c->out.len - at - used);
        c->out.len = at;
        a.n = 0;
        rv_decode(reply.data, reply.len, &a, &v);
        if (h->awaiting) {
            h->awaiting = false;
            answer(c, &v);
        } else {
            /* Written by net.c with no request: a refusal at accept
             * (max-clients, protected mode). */
            h->keep_alive = false;
            if (v.type == '-')
                respond(c, 503, "text/plain; charset=utf-8", "", v.s, v.len);
            else
                respond_text(c, 500, "unexpected output");
        }
        ordo_buf_free(&reply);
        if (!h->awaiting) /* (answer() may have dispatched again: the snapshot retry) */
            ordo_buf_append(&c->out, tail.data, tail.len);
        ordo_buf_free(&tail);
        if (h->awaiting)
            return;
    }
}

void http_before_flush(conn_t *c)
{
    rewrite(c);
}

/* ---- requests ------------------------------------------------------------- */

static void dispatch(conn_t *c, int route, const resp_arg_t *argv, size_t argc)
{
    struct http_conn_s *h = c->http;
    resp_cmd_t cmd = {0};
    cmd.argv = (resp_arg_t *)argv;
    cmd.argc = argc;
    h->route = route;
    h->awaiting = true;
    assert(raw_at(c) == c->out.len);
    bool authed = c->authed;
    c->authed = true; /* the HTTP layer checked the bearer token */
    cmd_dispatch(c, &cmd);
    c->authed = authed;
    rewrite(c);
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) onto b. Returns false on a malformed escape. */
static bool pct_decode(ordo_buf_t *b, const char *s, size_t n, bool plus_space)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%') {
            if (i + 2 >= n)
                return false;
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0)
                return false;
            char o = (char)(hi << 4 | lo);
            ordo_buf_append(b, &o, 1);
            i += 2;
        } else if (ch == '+' && plus_space)
            ordo_buf_append(b, " ", 1);
        else
            ordo_buf_append(b, &ch, 1);
    }
    return true;
}

/* The first malformed escape of s[0..n) (a '%' not followed by two hex
 * digits), or NULL. */
static const char *bad_escape(const char *s, size_t n)
{
    for (const char *p = memchr(s, '%', n); p != NULL; p = memchr(p + 1, '%', n - (size_t)(p + 1 - s)))
        if ((size_t)(p - s) + 2 >= n || hexval(p[1]) < 0 || hexval(p[2]) < 0)
            return p;
    return NULL;
}

typedef struct {
    size_t off, len;
} span_t;

/* The value of query parameter name, decoded onto scratch; false if absent. */
static bool query_param(struct http_conn_s *h, const char *query, size_t qlen, const char *name, span_t *out)
{
    size_t nl = strlen(name);
    const char *p = query, *end = query + qlen;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        if (eq && (size_t)(eq - p) == nl && memcmp(p, name, nl) == 0) {
            out->off = h->scratch.len;
            if (!pct_decode(&h->scratch, eq + 1, (size_t)(e - eq - 1), true))
                return false;
            out->len = h->scratch.len - out->off;
            return true;
        }
        p = e + 1;
    }
    return false;
}

static bool span_u64(const struct http_conn_s *h, span_t s, uint64_t *v)
{
    if (s.len == 0 || s.len > 19)
        return false;
    uint64_t n = 0;
    for (size_t i = 0; i < s.len; i++) {
        char ch = h->scratch.data[s.off + i];
        if (ch < '0' || ch > '9')
            return false;
        n = n * 10 + (uint64_t)(ch - '0');
    }
    *v = n;
    return true;
}

/* "<digits>" or <digits> of an If-Match / Last-Event-ID header. */
static bool header_rev(const ordo_buf_t *b, uint64_t *rev)
{
    size_t i = 0, n = b->len;
    while (i < n && (b->data[i] == ' ' || b->data[i] == '"' || b->data[i] == 'W' || b->data[i] == '/'))
        i++;
    while (n > i && (b->data[n - 1] == ' ' || b->data[n - 1] == '"'))
        n--;
    if (i == n || n - i > 19)
        return false;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (b->data[i] < '0' || b->data[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(b->data[i] - '0');
    }
    *rev = v;
    return true;
}

static bool authorized(conn_t *c)
{
    const char *pass = c->srv->cfg.requirepass;
    if (pass[0] == '\0')
        return true;
    struct http_conn_s *h = c->http;
    size_t pl = strlen(pass);
    const ordo_buf_t *a = &h->hdr[H_AUTH];
    if (!h->has_hdr[H_AUTH] || a->len != 7 + pl || strncasecmp(a->data, "Bearer ", 7) != 0)
        return false;
    unsigned char diff = 0; /* constant time in the password's bytes */
    for (size_t i = 0; i < pl; i++)
        diff |= (unsigned char)(a->data[7 + i] ^ pass[i]);
    return diff == 0;
}

static void respond_unauthorized(conn_t *c)
{
    static const char text[] = "Authorization: Bearer <password> required\n";
    respond(c, 401, "text/plain; charset=utf-8", "WWW-Authenticate: Bearer realm=\"ordo\"\r\n", text,
            sizeof text - 1);
}

/* The routes served without a token: /healthz (a load balancer's probe)
 * and the dashboard's files (GET). Judged on the raw path, before the
 * body, so a request spelling them with escapes needs a token. */
static bool open_route(const struct http_conn_s *h, int method)
{
    const char *url = h->url.data ? h->url.data : "";
    const char *q = memchr(url, '?', h->url.len);
    size_t plen = q ? (size_t)(q - url) : h->url.len;
    if (plen == 8 && memcmp(url, "/healthz", 8) == 0)
        return true;
    if (method != HTTP_GET)
        return false;
    for (size_t i = 0; i < http_assets_count; i++)
        if (strlen(http_assets[i].path) == plen && memcmp(http_assets[i].path, url, plen) == 0)
            return true;
    return false;
}

#define SEGS_MAX 8

/* Route the complete request in h (url, headers, body). */
static void handle_request(conn_t *c)
{
    struct http_conn_s *h = c->http;
    server_t *s = c->srv;
    h->keep_alive = http_should_keep_alive(&h->p);
    c->last_cmd_ms = s->now_ms; /* CLIENT LIST's idle, the dashboard's */
    int method = h->p.method;
    h->scratch.len = 0;
    const char *url = h->url.data ? h->url.data : "";
    size_t ulen = h->url.len;
    const char *q = memchr(url, '?', ulen);
    size_t plen = q ? (size_t)(q - url) : ulen;
    const char *query = q ? q + 1 : "";
    size_t qlen = q ? ulen - plen - 1 : 0;
    if (plen == 0 || url[0] != '/') {
        respond_text(c, 400, "bad request target");
        return;
    }
    /* Every escape is judged here, once, so an error names the bad one
     * (a parameter that fails to decode is never taken for an absent one). */
    const char *bad = bad_escape(url, ulen);
    if (bad != NULL) {
        char msg[128];
        size_t shown = ulen - (size_t)(bad - url) < 3 ? ulen - (size_t)(bad - url) : 3;
        snprintf(msg, sizeof msg, "malformed percent-encoding '%.*s' in the %s: %% must be followed by two hex digits",
                 (int)shown, bad, bad < url + plen ? "path" : "query");
        respond_text(c, 400, msg);
        return;
    }
    /* Split the path on '/' (before decoding: %2F is a byte of a name). */
    span_t seg[SEGS_MAX];
    size_t nseg = 0;
    const char *kv_rest = NULL; /* /v1/kv/<rest>: the key may hold raw slashes */
    size_t kv_rest_len = 0;
    for (size_t i = 1; i <= plen && nseg < SEGS_MAX;) {
        const char *st = url + i;
        const char *sl = memchr(st, '/', plen - i);
        size_t n = sl ? (size_t)(sl - st) : plen - i;
        if (nseg == 2 && seg[0].len == 2 && memcmp(h->scratch.data + seg[0].off, "v1", 2) == 0 &&
            seg[1].len == 2 && memcmp(h->scratch.data + seg[1].off, "kv", 2) == 0) {
            kv_rest = st;
            kv_rest_len = plen - i;
        }
        seg[nseg].off = h->scratch.len;
        if (!pct_decode(&h->scratch, st, n, false)) {
            respond_text(c, 400, "malformed percent-encoding in the path");
            return;
        }
        seg[nseg].len = h->scratch.len - seg[nseg].off;
        nseg++;
        i += n + 1;
        if (sl == NULL)
            break;
    }
#define SEG(i, lit) (seg[i].len == strlen(lit) && memcmp(h->scratch.data + seg[i].off, lit, strlen(lit)) == 0)
    if (nseg == 1 && SEG(0, "healthz")) {
        const char *why = cmd_http_unhealthy(c);
        if (why != NULL)
            respond_text(c, 503, why);
        else
            respond_text(c, 200, "ok");
        return;
    }
    if (method == HTTP_GET) {
        for (size_t i = 0; i < http_assets_count; i++)
            if (strlen(http_assets[i].path) == plen && memcmp(http_assets[i].path, url, plen) == 0) {
                respond(c, 200, http_assets[i].content_type, "Cache-Control: no-cache\r\n", http_assets[i].data,
                        http_assets[i].len);
                return;
            }
    }
    if (!authorized(c)) { /* on_headers_complete() refused it already: kept as the rule's statement */
        respond_unauthorized(c);
        return;
    }
    if (nseg == 1 && SEG(0, "metrics")) {
        if (method != HTTP_GET) {
            respond_text(c, 405, "GET only");
            return;
        }
        ordo_buf_t b = ORDO_BUF_INIT;
        cmd_http_metrics(c, &b);
        respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", "", b.data, b.len);
        ordo_buf_free(&b);
        return;
    }
    resp_arg_t argv[HTTP_ARGS_MAX];
    size_t argc = 0;
#define ARG_LIT(lit) (argv[argc++] = (resp_arg_t){{lit}, strlen(lit)})
#define ARG_SEG(i) (argv[argc++] = (resp_arg_t){{h->scratch.data + seg[i].off}, seg[i].len})
#define ARG_SPAN(sp) (argv[argc++] = (resp_arg_t){{h->scratch.data + (sp).off}, (sp).len})
    span_t sp;
    uint64_t n64;
    /* Numbers we print for arguments live in nums (stable while dispatching). */
    char nums[2][24];
    /* Pauses: POST .../pause[?for=ms|?until=unix-ms] is Q.PAUSE, DELETE
     * .../pause is Q.RESUME, of a queue or of one of its keys. */
    if (nseg >= 4 && SEG(0, "v1") && SEG(1, "queues") &&
        ((nseg == 4 && SEG(3, "pause")) || (nseg == 6 && SEG(3, "keys") && SEG(5, "pause")))) {
        if (method != HTTP_POST && method != HTTP_DELETE) {
            respond_text(c, 405, "POST (pause) or DELETE (resume) only");
            return;
        }
        span_t t = {0, 0};
        bool has_for = method == HTTP_POST && query_param(h, query, qlen, "for", &t);
        bool has_until = !has_for && method == HTTP_POST && query_param(h, query, qlen, "until", &t);
        if ((has_for || has_until) && !span_u64(h, t, &n64)) {
            respond_text(c, 400, "for and until are numbers of milliseconds");
            return;
        }
        ARG_LIT(method == HTTP_POST ? "Q.PAUSE" : "Q.RESUME");
        ARG_SEG(2);
        if (nseg == 6) {
            ARG_LIT("KEY");
            ARG_SEG(4);
        }
        if (has_for || has_until) {
            snprintf(nums[0], sizeof nums[0], "%" PRIu64, n64);
            ARG_LIT(has_for ? "FOR" : "UNTIL");
            ARG_LIT(nums[0]);
        }
        dispatch(c, R_PAUSE, argv, argc);
        return;
    }
    if (nseg >= 2 && SEG(0, "v1") && SEG(1, "queues") && nseg >= 5 && SEG(3, "keys") &&
        (nseg == 5 || (nseg == 6 && SEG(5, "call")))) {
        if (method != HTTP_POST) {
            respond_text(c, 405, "POST only");
            return;
        }
        if (h->body.len > (size_t)s->cfg.max_value_bytes) {
            respond_text(c, 413, "payload above max-value-bytes");
            return;
        }
        bool call = nseg == 6;
        span_t timeout = {0, 0};
        bool has_timeout = call && query_param(h, query, qlen, "timeout", &timeout);
        if (has_timeout && !span_u64(h, timeout, &n64)) {
            respond_text(c, 400, "timeout must be a number of milliseconds");
            return;
        }
        ARG_LIT(call ? "Q.CALL" : "Q.PUSH");
        ARG_SEG(2);
        ARG_SEG(4);
        argv[argc++] = (resp_arg_t){{h->body.data ? h->body.data : ""}, h->body.len};
        if (has_timeout && n64 > 0) {
            snprintf(nums[0], sizeof nums[0], "%" PRIu64, n64);
            ARG_LIT("TIMEOUT");
            ARG_LIT(nums[0]);
        }
        /* The key is bound to this queue, key and request (cmd_queue.c,
         * "Idempotency keys"); another request with it is 422. */
        if (h->has_hdr[H_IDEM]) {
            ARG_LIT("IDEMPOTENCY");
            argv[argc++] = (resp_arg_t){{h->hdr[H_IDEM].data ? h->hdr[H_IDEM].data : ""}, h->hdr[H_IDEM].len};
        }
        h->queue.len = 0;
        ordo_buf_append(&h->queue, h->scratch.data + seg[2].off, seg[2].len);
        dispatch(c, call ? R_CALL : R_PUSH, argv, argc);
        return;
    }
    if (nseg == 5 && SEG(0, "v1") && SEG(1, "queues") && SEG(3, "results")) {
        if (method != HTTP_GET) {
            respond_text(c, 405, "GET only");
            return;
        }
        /* The query first: decoding it onto scratch may move scratch, and
         * the arguments below point into it. */
        bool has_wait = query_param(h, query, qlen, "wait", &sp);
        if (has_wait && !span_u64(h, sp, &n64)) {
            respond_text(c, 400, "wait must be a number of milliseconds");
            return;
        }
        ARG_LIT("Q.RESULT");
        ARG_SEG(2);
        ARG_SEG(4);
        if (has_wait && n64 > 0) {
            snprintf(nums[0], sizeof nums[0], "%" PRIu64, n64);
            ARG_LIT("BLOCK");
            ARG_LIT(nums[0]);
        }
        dispatch(c, R_RESULT, argv, argc);
        return;
    }
    if (nseg >= 3 && SEG(0, "v1") && SEG(1, "kv") && kv_rest != NULL) {
        span_t key = {h->scratch.len, 0};
        if (!pct_decode(&h->scratch, kv_rest, kv_rest_len, false)) {
            respond_text(c, 400, "malformed percent-encoding in the path");
            return;
        }
        key.len = h->scratch.len - key.off;
        uint64_t rev = 0;
        bool cond = false;
        if (h->has_hdr[H_IF_MATCH]) {
            if (!header_rev(&h->hdr[H_IF_MATCH], &rev)) {
                respond_text(c, 400, "If-Match must be an ETag this server gave (\"<revision>\")");
                return;
            }
            cond = true;
        } else if (h->has_hdr[H_IF_NONE_MATCH] && h->hdr[H_IF_NONE_MATCH].len == 1 &&
                   h->hdr[H_IF_NONE_MATCH].data[0] == '*')
            cond = true, rev = 0;
        snprintf(nums[0], sizeof nums[0], "%" PRIu64, rev);
        if (method == HTTP_GET) {
            ARG_LIT("KV.GET");
            ARG_SPAN(key);
            dispatch(c, R_KV_GET, argv, argc);
        } else if (method == HTTP_PUT || method == HTTP_DELETE) {
            if (method == HTTP_PUT && h->body.len > (size_t)s->cfg.max_value_bytes) {
                respond_text(c, 413, "value above max-value-bytes");
                return;
            }
            ARG_LIT(method == HTTP_PUT ? "KV.PUT" : "KV.DEL");
            ARG_SPAN(key);
            if (method == HTTP_PUT)
                argv[argc++] = (resp_arg_t){{h->body.data ? h->body.data : ""}, h->body.len};
            if (cond) {
                ARG_LIT("IFREV");
                ARG_LIT(nums[0]);
            }
            dispatch(c, method == HTTP_PUT ? R_KV_PUT : R_KV_DEL, argv, argc);
        } else
            respond_text(c, 405, "GET, PUT or DELETE");
        return;
    }
    if (nseg == 2 && SEG(0, "v1") && SEG(1, "watch")) {
        if (method != HTTP_GET) {
            respond_text(c, 405, "GET only");
            return;
        }
        span_t key;
        bool prefix = false;
        if (query_param(h, query, qlen, "key", &key))
            prefix = false;
        else if (query_param(h, query, qlen, "prefix", &key))
            prefix = true;
        else {
            respond_text(c, 400, "key= or prefix= is required");
            return;
        }
        h->watch_key.len = 0;
        ordo_buf_append(&h->watch_key, h->scratch.data + key.off, key.len);
        h->watch_prefix = prefix;
        ARG_LIT("KV.WATCH");
        ARG_SPAN(key);
        if (prefix)
            ARG_LIT("PREFIX");
        if (h->has_hdr[H_LAST_EVENT_ID] && header_rev(&h->hdr[H_LAST_EVENT_ID], &n64)) {
            snprintf(nums[1], sizeof nums[1], "%" PRIu64, n64);
            ARG_LIT("FROM");
            ARG_LIT(nums[1]);
        }
        c->sse = true; /* the watch's events are written as SSE from its first on */
        dispatch(c, R_WATCH, argv, argc);
        return;
    }
    if (nseg == 2 && SEG(0, "v1") && SEG(1, "status")) {
        ordo_buf_t b = ORDO_BUF_INIT;
        cmd_http_status(c, &b);
        respond(c, 200, "application/json", "Cache-Control: no-store\r\n", b.data, b.len);
        ordo_buf_free(&b);
        return;
    }
    respond_text(c, 404, "no such route");
#undef SEG
#undef ARG_LIT
#undef ARG_SEG
#undef ARG_SPAN
}

/* ---- the parser's callbacks ------------------------------------------------- */

static struct http_conn_s *H(http_parser *p) { return ((conn_t *)p->data)->http; }

/* Stop the parser with status (the response http_process_input() writes)
 * and its text. */
static int refuse(http_parser *p, int status, const char *why)
{
    struct http_conn_s *h = H(p);
    h->limit_status = status;
    h->limit_why = why;
    return -1;
}

/* A field name is a token (RFC 9110, 5.6.2): no space, no control, none
 * of the separators. http-parser, built lenient, lets "Foo Bar" and
 * "Transfer-Encoding " (a space before the colon) through, which a proxy
 * in front of us may read otherwise: such a request is refused. */
static bool token_chars(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL)))
            return false;
    }
    return true;
}

/* Only HTTP/1.0 and HTTP/1.1 are served: an HTTP/0.9 request ("GET /",
 * no version) has no headers to carry a token and expects no status
 * line. Judged when the headers are complete, so the answer does not
 * depend on how the request was split into reads. */
static int check_version(http_parser *p)
{
    if (p->http_major == 1)
        return 0;
    return p->http_major == 0 ? refuse(p, 400, "HTTP/0.9 is not served: send HTTP/1.1")
                              : refuse(p, 505, "only HTTP/1.0 and HTTP/1.1 are served");
}

static void commit_header(struct http_conn_s *h)
{
    if (h->field.len == 0)
        return;
    for (int i = 0; i < H_COUNT; i++)
        if (h->field.len == strlen(hdr_names[i]) && strncasecmp(h->field.data, hdr_names[i], h->field.len) == 0) {
            h->hdr[i].len = 0;
            ordo_buf_append(&h->hdr[i], h->value.data ? h->value.data : "", h->value.len);
            h->has_hdr[i] = true;
        }
    h->field.len = 0;
    h->value.len = 0;
}

static int on_message_begin(http_parser *p)
{
    struct http_conn_s *h = H(p);
    h->url.len = h->body.len = h->field.len = h->value.len = 0;
    for (int i = 0; i < H_COUNT; i++) {
        h->has_hdr[i] = false;
        h->hdr[i].len = 0;
    }
    h->in_value = false;
    h->body_max = 0;
    return 0;
}

/* The request line and the headers count against http-header-max-bytes
 * raw, every byte the parser reads before the body (CR, LF, colons and
 * the names of headers we skip included): http-parser counts them
 * (http_parser_set_max_header_size(), HPE_HEADER_OVERFLOW: 431), so the
 * callbacks only store. */
static int on_url(http_parser *p, const char *at, size_t n)
{
    ordo_buf_append(&H(p)->url, at, n);
    return 0;
}

/* Trailer fields (after a chunked body) are read and dropped: a header
 * decided when the headers were complete (Authorization above all) is
 * never overridden by one that arrives after the body. */
static int on_header_field(http_parser *p, const char *at, size_t n)
{
    struct http_conn_s *h = H(p);
    if (!token_chars(at, n))
        return refuse(p, 400, "malformed header name (a space or a separator in it, or before the colon)");
    if (p->flags & F_TRAILING)
        return 0;
    if (h->in_value) {
        commit_header(h);
        h->in_value = false;
    }
    ordo_buf_append(&h->field, at, n);
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    struct http_conn_s *h = H(p);
    if (p->flags & F_TRAILING)
        return 0;
    h->in_value = true;
    ordo_buf_append(&h->value, at, n);
    return 0;
}

/* Authorization is decided here, when the headers are complete and
 * before any body byte is read: a request that needs a token and has no
 * valid one is answered 401 at once (and the connection closed, its body
 * unread), never `100 Continue`. A request that needs none (open_route())
 * without a valid token may send a body of max-bulk-bytes-unauth at most,
 * RESP's bound before AUTH. */
static int on_headers_complete(http_parser *p)
{
    struct http_conn_s *h = H(p);
    commit_header(h);
    h->in_value = false;
    conn_t *c = p->data;
    if (check_version(p) != 0)
        return -1;
    bool authed = authorized(c);
    if (!authed && !open_route(h, p->method))
        return refuse(p, 401, NULL);
    h->body_max = (size_t)(authed ? c->srv->cfg.http_body_max_bytes : c->srv->cfg.max_bulk_bytes_unauth);
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > (uint64_t)h->body_max)
        return refuse(p, 413, NULL);
    /* curl and others wait (a second) for this before sending a body. */
    if (h->has_hdr[H_EXPECT] && h->hdr[H_EXPECT].len == 12 && strncasecmp(h->hdr[H_EXPECT].data, "100-continue", 12) == 0) {
        ordo_buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
        mark_http(c);
    }
    return 0;
}

/* A chunk's size is known before its bytes: one that cannot fit what the
 * request may still send is refused at once, not after the bytes came. */
static int on_chunk_header(http_parser *p)
{
    struct http_conn_s *h = H(p);
    if (p->content_length > (uint64_t)(h->body_max - h->body.len))
        return refuse(p, 413, NULL);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct http_conn_s *h = H(p);
    if (h->body.len + n > h->body_max)
        return refuse(p, 413, NULL);
    ordo_buf_append(&h->body, at, n);
    return 0;
}

static int on_message_complete(http_parser *p)
{
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_header = on_chunk_header,
    .on_message_complete = on_message_complete,
};

void http_process_input(conn_t *c)
{
    struct http_conn_s *h = c->http;
    rewrite(c); /* a parked request whose reply came */
    if (h->sse) {
        c->in.len = 0; /* an event stream reads nothing more */
        return;
    }
    size_t off = 0;
    while (!c->closing && !c->close_after_write && !h->awaiting && !h->sse && off < c->in.len) {
        if (!h->begun) {
            h->begun = true;
            h->begun_ms = c->srv->now_ms;
        }
        size_t n = http_parser_execute(&h->p, &settings, c->in.data + off, c->in.len - off);
        off += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&h->p);
        if (e == HPE_PAUSED) {
            http_parser_pause(&h->p, 0);
            h->begun = false;
            handle_request(c);
            continue;
        }
        if (e != HPE_OK) {
            int status = h->limit_status ? h->limit_status : e == HPE_HEADER_OVERFLOW ? 431 : 400;
            h->keep_alive = false;
            if (status == 401)
                respond_unauthorized(c);
            else
                respond_text(c, status,
                             h->limit_why        ? h->limit_why
                             : status == 431     ? "request headers above http-header-max-bytes"
                             : status == 413     ? "request body above http-body-max-bytes (or max-bulk-bytes-unauth "
                                                   "before a valid token)"
                                                 : http_errno_description(e));
            break;
        }
    }
    if (off > 0)
        ordo_buf_consume(&c->in, off);
    if (h->sse || c->close_after_write)
        c->in.len = 0;
}

/* ---- connections and the listener ------------------------------------------ */

int http_conn_init(conn_t *c)
{
    struct http_listener_s *l = c->srv->net.http;
    struct http_conn_s *h = ordo_xcalloc(1, sizeof *h);
    c->http = h;
    c->proto = 3; /* replies as RESP3: typed nils, pushes for watch events */
    /* The parser's header limit is one for the process (http-parser keeps
     * it in a static): set from the option at every accept, so a CONFIG
     * SET applies to the next connection. */
    http_parser_set_max_header_size((uint32_t)c->srv->cfg.http_header_max_bytes);
    http_parser_init(&h->p, HTTP_REQUEST);
    h->p.data = c;
    h->keep_alive = true;
    h->last_ms = c->srv->now_ms;
    mark_http(c);
    if (l->nconns >= (size_t)c->srv->cfg.http_max_clients) {
        h->keep_alive = false;
        respond_text(c, 503, "too many HTTP connections (http-max-clients)");
        conn_flush(c);
        return -1;
    }
    l->nconns++;
    h->counted = true;
    return 0;
}

void http_conn_free(conn_t *c)
{
    struct http_conn_s *h = c->http;
    if (h == NULL)
        return;
    if (h->counted && c->srv->net.http != NULL)
        c->srv->net.http->nconns--;
    ordo_buf_free(&h->url);
    ordo_buf_free(&h->body);
    ordo_buf_free(&h->field);
    ordo_buf_free(&h->value);
    for (int i = 0; i < H_COUNT; i++)
        ordo_buf_free(&h->hdr[i]);
    ordo_buf_free(&h->scratch);
    ordo_buf_free(&h->queue);
    ordo_buf_free(&h->watch_key);
    free(h);
    c->http = NULL;
}

void http_cron(server_t *s)
{
    if (s->net.http == NULL)
        return;
    uint64_t now = s->now_ms;
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c)) {
        struct http_conn_s *h = c->http;
        if (h == NULL || c->closing || c->close_after_write || h->sse || h->awaiting)
            continue;
        if (h->begun && now - h->begun_ms >= (uint64_t)s->cfg.http_request_timeout_ms) {
            h->keep_alive = false;
            respond_text(c, 408, "request not received whole within http-request-timeout-ms");
            c->in.len = 0;
            conn_flush(c);
        } else if (!h->begun && c->in.len == 0 && conn_pending(c) == 0 &&
                   now - h->last_ms >= (uint64_t)s->cfg.http_idle_ms) {
            conn_close(c);
        }
    }
}

int http_listen(server_t *s, uv_connection_cb on_connection, char *err, size_t elen)
{
    if (s->cfg.http_port == 0)
        return 0;
    struct sockaddr_storage ss;
    if (uv_ip4_addr(s->cfg.bind, (int)s->cfg.http_port, (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(s->cfg.bind, (int)s->cfg.http_port, (struct sockaddr_in6 *)&ss) != 0) {
        snprintf(err, elen, "bind: '%s' is not an IPv4 or IPv6 address", s->cfg.bind);
        return -1;
    }
    struct http_listener_s *l = ordo_xcalloc(1, sizeof *l);
    s->net.http = l;
    uv_tcp_init(s->loop, &l->tcp);
    l->tcp.data = s;
    int rc;
    if ((rc = uv_tcp_bind(&l->tcp, (struct sockaddr *)&ss, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&l->tcp, 511, on_connection)) != 0) {
        snprintf(err, elen, "cannot listen on %s:%lld (http-port): %s", s->cfg.bind, (long long)s->cfg.http_port,
                 uv_strerror(rc));
        return -1;
    }
    return 0;
}

bool http_is_listener(server_t *s, const uv_stream_t *l)
{
    return s->net.http != NULL && l == (const uv_stream_t *)&s->net.http->tcp;
}

static void on_listener_closed(uv_handle_t *h) { free(h->data); }

void http_close(server_t *s)
{
    struct http_listener_s *l = s->net.http;
    if (l == NULL)
        return;
    /* Connections close first (net_close_all); their frees look at
     * net.http, so it is cleared and the count no longer kept. */
    s->net.http = NULL;
    l->tcp.data = l;
    uv_close((uv_handle_t *)&l->tcp, on_listener_closed);
}
