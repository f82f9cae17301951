/*
 * http.c -- HTTP/1.1 on ordod's own loop (docs/http.md has the routes).
 *
 * An HTTP connection is a conn_t (net.c accepts, reads, writes, holds
 * output until the log commits it, parks blocking commands) with c->http
 * pointing at the state below. Requests are parsed with Node's
 * http-parser (Debian's libhttp-parser-dev: a callback parser over the
 * bytes we already have, no threads, no loop of its own). Each complete
 * request is looked up in the route table (routes[]) and becomes one
 * command -- the same one a RESP client would send -- given to
 * cmd_dispatch(); the command writes its RESP reply into c->out
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
 *   - Every error response to a /v1 request is problem details (RFC 9457,
 *     respond_problem()): a command's error carries its RESP code; the
 *     errors of /healthz, /metrics and the dashboard's files stay text.
 *
 *   - Authorization is decided when a request's headers are complete
 *     (on_headers_complete()), before any body byte is read; trailers
 *     never change a header. It names the request's user (authorized()),
 *     whose rules its command meets in dispatch like a RESP client's. A
 *     connection keeps its last credentials that held, with the users'
 *     generation then: the same credentials again, with the users
 *     unchanged, are the same user without a lookup or a password hash.
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
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/dec.h"
#include "cmd/cmd.h"
#include "http.h"
#include "http_assets.h"
#include "net/conn.h"

/* The longest "user:password" of a Basic header: a name of ACL_NAME_MAX
 * bytes and a password as long as requirepass may be. Longer: 401. */
#define HTTP_BASIC_MAX_BYTES 1024

struct http_listener_s {
    uv_tcp_t tcp;
    size_t nconns;          /* HTTP connections open (http-max-clients) */
    size_t header_max;      /* the parser's header limit, as last set (http_conn_init()) */
    struct route_shape_s *shapes; /* the routes' paths split (route_shapes_new()), from the first connection */
};

/* How a command's reply is answered (answer()). */
enum answer_kind {
    R_NONE, R_CALL, R_PUSH, R_RESULT, R_KV_GET, R_KV_PUT, R_KV_DEL, R_WATCH, R_WATCH_SNAP,
    R_PAUSE,        /* Q.PAUSE, Q.RESUME, Q.UNPARK, Q.DROP: {"changed":n} */
    R_MOVED,        /* Q.REDRIVE: {"moved":n} */
    R_DONE,         /* +OK: {"ok":true} (CLUSTER TRANSFER) */
    R_PULL,         /* Q.PULL: the messages as JSON */
    R_ONE_ZERO,     /* 1: 204; 0: 409 with h->why (a stale token, a term that does not lead) */
    R_RANGE,        /* KV.RANGE: a page as JSON */
    R_LOCK_ACQUIRE, /* a token, or nil: 409 */
    R_LOCK_INFO,
    R_CAMPAIGN,     /* a term, or nil: 409 */
    R_LEADER,
    R_KEEPALIVE,    /* remaining ms, or NOTHOLDER: 409 */
};

/* Q.PULL's count over HTTP: Q.PULL's own bound (a thousand messages). */
#define HTTP_PULL_COUNT_MAX 1000
/* A page of GET /v1/kv: 100 keys unless limit= says otherwise, 1000 at
 * most, so one reply stays bounded (max-reply-bytes bounds its bytes) and
 * a long listing pages with the cursor. */
#define HTTP_RANGE_LIMIT_DEFAULT 100
#define HTTP_RANGE_LIMIT_MAX 1000

/* Headers we read; the others are skipped. */
enum hdr { H_AUTH, H_IDEM, H_IF_MATCH, H_IF_NONE_MATCH, H_LAST_EVENT_ID, H_EXPECT, H_ORIGIN, H_ACR_METHOD, H_COUNT };
#define HDR(name) {name, sizeof name - 1}
static const struct {
    const char *name;
    size_t len;
} hdr_names[H_COUNT] = {HDR("authorization"), HDR("idempotency-key"), HDR("if-match"), HDR("if-none-match"),
                        HDR("last-event-id"), HDR("expect"),          HDR("origin"),   HDR("access-control-request-method")};
#undef HDR

/* What a browser on an allowed origin may send and read (CORS). */
#define CORS_METHODS "GET, PUT, POST, DELETE, OPTIONS"
#define CORS_HEADERS "Authorization, Content-Type, Idempotency-Key, If-Match, If-None-Match, Last-Event-ID"
#define CORS_EXPOSE "ETag, Location"
#define CORS_MAX_AGE_S 600

#define HTTP_ARGS_MAX 12
/* A reply rewrite() copies out of out on the stack when it is this small
 * (a call's result, an id, a token), on the heap when larger. */
#define HTTP_REPLY_STACK_BYTES 1024

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
    bool in_message;        /* the parser began a message (on_message_begin()) not yet complete */
    uint64_t begun_ms;      /* when its first byte arrived */
    uint64_t last_ms;       /* when the last response was written (http-idle-ms) */
    bool keep_alive;
    bool awaiting;          /* a dispatched command's reply is not yet rewritten */
    bool sse;               /* this connection is an event stream */
    bool cors;              /* the request's Origin is allowed (http-cors-origins): responses say so */
    char start[32];         /* the first bytes of this request the parser consumed (is_v1()) */
    bool v1;                /* the request was routed, and its path is under /v1 (is_v1()) */
    bool head;              /* the request is a HEAD: routed as GET, answered without the body */
    size_t start_len;
    bool counted;           /* counted in the listener's nconns */
    int route;
    uint64_t raw_abs;       /* see the invariants */
    ordo_buf_t scratch;     /* decoded path segments and the command's words */
    ordo_buf_t queue;       /* the queue of a call (for Location) */
    ordo_buf_t watch_key;   /* a watch's key or prefix, for the snapshot retry */
    bool watch_prefix;
    ordo_buf_t why;         /* a 409's text, NUL-terminated (R_ONE_ZERO and the nil answers) */
    size_t range_limit;     /* R_RANGE: the page's size ... */
    uint64_t range_rev;     /* ... and the revision it was read at */
    size_t reply_nodes;     /* the reply's decoded values at most (a pull's messages, a range's keys) */
    bool authed;            /* this request's credentials hold (on_headers_complete()) */
    bool held;              /* the last credentials that held, while the users are as then: */
    uint64_t held_gen;      /* ... the users' generation then (cmd_acl_users_gen()) */
    bool held_has;          /* ... whether there was an Authorization header */
    ordo_buf_t held_auth;   /* ... and its bytes */
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
    rv_t *nodes;
    size_t n, cap;
} rv_arena_t;

/* Decode one value at p[0..len): returns bytes used, 0 if incomplete, or
 * (size_t)-1 if it is not RESP we can read (attributes, which ordo never
 * sends, or more values than the arena holds: RV_NODES_MAX for every
 * reply but a pull's and a range's, whose routes size it). Strings point
 * into p. */
static size_t rv_decode(const char *p, size_t len, rv_arena_t *a, rv_t *v)
{
    const char *eol = memchr(p, '\r', len);
    if (eol == NULL || (size_t)(eol - p) + 2 > len)
        return 0;
    size_t head = (size_t)(eol - p) + 2;
    char t = p[0];
    const char *body = p + 1;
    size_t blen = (size_t)(eol - body);
    int64_t n = 0;
    if (blen < 32 && strchr(":$*%>~=!(", t) != NULL) {
        /* Read as strtoll reads what ordod writes (a sign, digits; a
         * value past the range clamped), without it: this is every
         * reply's path. */
        bool neg = blen > 0 && body[0] == '-';
        uint64_t u = 0;
        for (size_t k = neg; k < blen && body[k] >= '0' && body[k] <= '9'; k++)
            u = u > (UINT64_MAX - 9) / 10 ? UINT64_MAX : u * 10 + (uint64_t)(body[k] - '0');
        if (neg)
            n = u > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)u;
        else
            n = u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
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
        if (count > a->cap - a->n)
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

/* The strings of v and of the arena's values, decoded from from[], now
 * point at the same bytes of to[], a copy. */
static void rv_move(rv_t *v, rv_arena_t *a, const char *from, const char *to)
{
    if (v->s != NULL)
        v->s = to + (v->s - from);
    for (size_t i = 0; i < a->n; i++)
        if (a->nodes[i].s != NULL)
            a->nodes[i].s = to + (a->nodes[i].s - from);
}

/* An error's code ("CONFLICT" of "CONFLICT 12"), compared to code. */
static bool err_is(const rv_t *v, const char *code)
{
    size_t n = strlen(code);
    return v->type == '-' && v->len >= n && memcmp(v->s, code, n) == 0 && (v->len == n || v->s[n] == ' ');
}

/* Does the If-None-Match list b ("*", or ETags separated by commas, weak
 * ones included: W/"12") name revision rev? A malformed member matches
 * nothing (handle_request() refused a malformed list already). */
static bool etag_listed(const ordo_buf_t *b, uint64_t rev)
{
    const char *p = b->data ? b->data : "", *end = p + b->len;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        if (p < end && *p == '*')
            return true;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/')
            p += 2;
        if (p >= end || *p != '"')
            return false;
        p++;
        uint64_t v = 0;
        int digits = 0;
        for (; p < end && *p >= '0' && *p <= '9' && digits < 20; p++, digits++)
            v = v * 10 + (uint64_t)(*p - '0');
        if (p >= end || *p != '"' || digits == 0)
            return false;
        p++;
        if (v == rev)
            return true;
    }
    return false;
}

/* Is b a well-formed list of ETags ("12", W/"12", separated by commas)? */
static bool etag_list_ok(const ordo_buf_t *b)
{
    const char *p = b->data ? b->data : "", *end = p + b->len;
    bool any = false;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end)
            break;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/')
            p += 2;
        if (p >= end || *p != '"')
            return false;
        const char *d = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d || p - d > 19 || p >= end || *p != '"')
            return false;
        p++;
        any = true;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p < end && *p++ != ',')
            return false;
    }
    return any;
}

/* ---- writing responses ---------------------------------------------------- */

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
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
/* The CORS lines of a response to an allowed origin (the origin echoed,
 * so a browser may send credentials), else nothing. */
static void add_cors(conn_t *c)
{
    struct http_conn_s *h = c->http;
    if (!h->cors)
        return;
    ordo_buf_puts(&c->out, "Access-Control-Allow-Origin: ");
    ordo_buf_append(&c->out, h->hdr[H_ORIGIN].data, h->hdr[H_ORIGIN].len);
    ordo_buf_puts(&c->out, "\r\nVary: Origin\r\nAccess-Control-Expose-Headers: " CORS_EXPOSE "\r\n");
}

/* Append a string literal (its length known at compile time). */
#define PUT_LIT(b, lit) ordo_buf_append((b), lit, sizeof lit - 1)

/* Append v in decimal. */
static void put_dec(ordo_buf_t *b, uint64_t v)
{
    char *p = ordo_buf_reserve(b, DEC_U64_MAX);
    b->len += dec_u64(p, v);
}

static void respond(conn_t *c, int status, const char *ctype, const char *headers, const void *body, size_t blen)
{
    struct http_conn_s *h = c->http;
    bool close = !h->keep_alive || status == 400 || status == 408 || status == 413 || status == 431;
    /* Every response comes this way: its head is appended piece by piece,
     * as ordod writes RESP, not formatted. */
    PUT_LIT(&c->out, "HTTP/1.1 ");
    put_dec(&c->out, (uint64_t)status);
    ordo_buf_append(&c->out, " ", 1);
    ordo_buf_puts(&c->out, reason(status));
    /* 204 and 304 carry no body, and no Content-Length either (RFC 9110). */
    if (status != 204 && status != 304) {
        PUT_LIT(&c->out, "\r\nContent-Length: ");
        put_dec(&c->out, blen);
    }
    ordo_buf_append(&c->out, "\r\n", 2);
    add_cors(c);
    if (ctype) {
        PUT_LIT(&c->out, "Content-Type: ");
        ordo_buf_puts(&c->out, ctype);
        ordo_buf_append(&c->out, "\r\n", 2);
    }
    ordo_buf_puts(&c->out, headers);
    if (close)
        PUT_LIT(&c->out, "Connection: close\r\n\r\n");
    else
        PUT_LIT(&c->out, "\r\n");
    if (!h->head) /* HEAD: the GET's headers, Content-Length included, and no body */
        ordo_buf_append(&c->out, body, blen);
    h->head = false; /* this was its response: a later refusal, before the next request's headers are
                      * complete, is no answer to a HEAD */
    mark_http(c);
    h->last_ms = c->srv->now_ms;
    if (close)
        c->close_after_write = true;
}

/* Is the request one of /v1? Its errors are problem details; those of
 * /healthz, /metrics and the dashboard's files stay text, as probes and
 * scrapers read them. A routed request is judged on the path the routes
 * saw (h->v1), so a command's error is always one. A request refused
 * before routing is judged on its first bytes the parser consumed
 * (h->start), not on the URL the callbacks gathered: a request refused
 * inside its request line has a URL of which the callbacks saw more or
 * less depending on how the bytes were read, while the bytes consumed up
 * to the refusal are the same however they arrived. */
static bool is_v1(const struct http_conn_s *h)
{
    if (h->v1)
        return true; /* routed: the path the routes saw */
    const char *sp = memchr(h->start, ' ', h->start_len);
    if (sp == NULL)
        return false;
    /* The parser takes more than one space before the target ("POST
     * /v1/..." with two routes as /v1), so this does too. */
    const char *u = sp + 1, *end = h->start + h->start_len;
    while (u < end && *u == ' ')
        u++;
    size_t rest = (size_t)(end - u);
    return rest >= 4 && memcmp(u, "/v1", 3) == 0 && (u[3] == '/' || u[3] == '?' || u[3] == ' ');
}

/* An error as problem details (RFC 9457): type about:blank (the status
 * says what happened), title the status's reason, detail the text, and
 * code the RESP error code when the error is a command's (code NULL: none).
 * headers: extra lines, or "". */
static void respond_problem(conn_t *c, int status, const char *code, size_t code_len, const char *headers,
                            const char *detail, size_t dlen)
{
    ordo_buf_t b = ORDO_BUF_INIT;
    ordo_buf_printf(&b, "{\"type\":\"about:blank\",\"title\":\"%s\",\"status\":%d,\"detail\":", reason(status),
                    status);
    cmd_http_json_text(&b, detail, dlen);
    if (code != NULL) {
        ordo_buf_puts(&b, ",\"code\":");
        cmd_http_json_text(&b, code, code_len);
    }
    ordo_buf_puts(&b, "}\n");
    respond(c, status, "application/problem+json", headers, b.data, b.len);
    ordo_buf_free(&b);
}

/* An error the door itself gives (or any response with a text body):
 * problem details on /v1, else the text and a newline. */
static void respond_error_text(conn_t *c, int status, const char *headers, const char *text)
{
    if (status >= 400 && is_v1(c->http)) {
        respond_problem(c, status, NULL, 0, headers, text, strlen(text));
        return;
    }
    ordo_buf_t b = ORDO_BUF_INIT;
    ordo_buf_printf(&b, "%s\n", text);
    respond(c, status, "text/plain; charset=utf-8", headers, b.data, b.len);
    ordo_buf_free(&b);
}

static void respond_text(conn_t *c, int status, const char *text) { respond_error_text(c, status, "", text); }

/* An error reply's status: the contract's (412 conflict, 502 dead letter),
 * else the nearest HTTP meaning of the RESP error code. */
static int error_status(const rv_t *v)
{
    if (err_is(v, "CONFLICT")) return 412;
    if (err_is(v, "DEADLETTER")) return 502;
    if (err_is(v, "CANCELLED")) return 410;
    if (err_is(v, "IDEMPOTENCY")) return 422;
    if (err_is(v, "NOTFOUND")) return 404;
    if (err_is(v, "NOAUTH") || err_is(v, "WRONGPASS")) return 401;
    if (err_is(v, "NOPERM")) return 403;
    if (err_is(v, "LIMIT")) return 413;
    if (err_is(v, "BUSY")) return 429;
    if (err_is(v, "READONLY") || err_is(v, "DENIED") || err_is(v, "NOTLEADER")) return 503;
    if (err_is(v, "TIMEOUT")) return 504;
    if (err_is(v, "ERR") || err_is(v, "COMPACTED") || err_is(v, "NOTHOLDER")) return 400;
    return 500;
}

/* A command's error reply v, as problem details: its status by code, the
 * text as the detail, and the code (the first word, when it is one: "CONFLICT" of "CONFLICT 12"). */
static void respond_error(conn_t *c, const rv_t *v)
{
    size_t n = 0;
    while (n < v->len && v->s[n] >= 'A' && v->s[n] <= 'Z')
        n++;
    bool coded = n > 0 && (n == v->len || v->s[n] == ' ');
    assert(is_v1(c->http)); /* only /v1 routes send commands */
    respond_problem(c, error_status(v), coded ? v->s : NULL, n, "", v->s, v->len);
}

/* ---- the reply of a command, as HTTP --------------------------------------- */

static void dispatch(conn_t *c, int route, const resp_arg_t *argv, size_t argc);

/* The SSE stream starts: headers without a length (the body is the
 * stream), then the events the watch layer writes (c->sse, set when the
 * watch was asked for). */
static void start_stream(conn_t *c)
{
    assert(c->sse);
    ordo_buf_puts(&c->out, "HTTP/1.1 200 OK\r\n");
    add_cors(c);
    ordo_buf_puts(&c->out, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                           "X-Accel-Buffering: no\r\n\r\n: ordo watch\n\n");
    mark_http(c);
    c->http->sse = true;
}

/* A reply no route expects: an error answers as its code says. */
static void answer_other(conn_t *c, const rv_t *v)
{
    if (v->type == '-')
        respond_error(c, v);
    else
        respond_text(c, 500, "unexpected reply");
}

/* Q.PULL's messages ([id, key, payload, attempt, token] each) as a JSON
 * array of objects; false if the reply is not that. */
static bool json_messages(ordo_buf_t *b, const rv_t *v, const struct http_conn_s *h)
{
    (void)h;
    if (v->type != '*')
        return false;
    ordo_buf_puts(b, "[");
    for (size_t i = 0; i < v->len; i++) {
        const rv_t *m = &v->el[i];
        if (m->type != '*' || m->len != 5 || m->el[0].type != ':' || m->el[1].type != '$' || m->el[2].type != '$' ||
            m->el[3].type != ':' || m->el[4].type != ':')
            return false;
        ordo_buf_printf(b, "%s{\"id\":%" PRId64 ",", i ? "," : "", m->el[0].i);
        cmd_http_json_field(b, "key", m->el[1].s, m->el[1].len);
        ordo_buf_puts(b, ",");
        cmd_http_json_field(b, "payload", m->el[2].s, m->el[2].len);
        ordo_buf_printf(b, ",\"attempt\":%" PRId64 ",\"token\":%" PRId64 "}", m->el[3].i, m->el[4].i);
    }
    ordo_buf_puts(b, "]\n");
    return true;
}

/* KV.RANGE's reply (up to limit + 1 items [key, value, create_rev,
 * mod_rev, version, lease]) as a page: its first limit items, and a
 * cursor ("<rev>.<the last key in hex>") when there was one more. */
static bool json_range(ordo_buf_t *b, const rv_t *v, const struct http_conn_s *h)
{
    size_t limit = h->range_limit;
    uint64_t rev = h->range_rev;
    if (v->type != '*')
        return false;
    size_t n = v->len < limit ? v->len : limit;
    ordo_buf_printf(b, "{\"revision\":%" PRIu64 ",\"items\":[", rev);
    for (size_t i = 0; i < n; i++) {
        const rv_t *m = &v->el[i];
        if (m->type != '*' || m->len != 6 || m->el[0].type != '$' || m->el[1].type != '$')
            return false;
        for (size_t k = 2; k < 6; k++)
            if (m->el[k].type != ':')
                return false;
        ordo_buf_puts(b, i ? ",{" : "{");
        cmd_http_json_field(b, "key", m->el[0].s, m->el[0].len);
        ordo_buf_puts(b, ",");
        cmd_http_json_field(b, "value", m->el[1].s, m->el[1].len);
        ordo_buf_printf(b, ",\"create_revision\":%" PRId64 ",\"mod_revision\":%" PRId64 ",\"version\":%" PRId64
                           ",\"lease\":%" PRId64 "}",
                        m->el[2].i, m->el[3].i, m->el[4].i, m->el[5].i);
    }
    ordo_buf_puts(b, "],\"cursor\":");
    if (v->len > limit && n > 0) {
        const rv_t *last = &v->el[n - 1].el[0];
        ordo_buf_printf(b, "\"%" PRIu64 ".", rev);
        for (size_t i = 0; i < last->len; i++)
            ordo_buf_printf(b, "%02x", (unsigned char)last->s[i]);
        ordo_buf_puts(b, "\"");
    } else
        ordo_buf_puts(b, "null");
    ordo_buf_puts(b, "}\n");
    return true;
}

/* LOCK.INFO's [token or nil, remaining ms, waiters] as an object. */
static bool json_lock_info(ordo_buf_t *b, const rv_t *v, const struct http_conn_s *h)
{
    (void)h;
    if (v->type != '*' || v->len != 3 || (v->el[0].type != ':' && v->el[0].type != '_') || v->el[1].type != ':' ||
        v->el[2].type != ':')
        return false;
    if (v->el[0].type == ':')
        ordo_buf_printf(b, "{\"token\":%" PRId64, v->el[0].i);
    else
        ordo_buf_puts(b, "{\"token\":null");
    ordo_buf_printf(b, ",\"remaining_ms\":%" PRId64 ",\"waiters\":%" PRId64 "}\n", v->el[1].i, v->el[2].i);
    return true;
}

/* ELECT.LEADER's [value, term], or nil (vacant: term 0, value null). */
static bool json_leader(ordo_buf_t *b, const rv_t *v, const struct http_conn_s *h)
{
    (void)h;
    if (v->type == '_') {
        ordo_buf_puts(b, "{\"term\":0,\"value\":null}\n");
        return true;
    }
    if (v->type != '*' || v->len != 2 || v->el[0].type != '$' || v->el[1].type != ':')
        return false;
    ordo_buf_printf(b, "{\"term\":%" PRId64 ",", v->el[1].i);
    cmd_http_json_field(b, "value", v->el[0].s, v->el[0].len);
    ordo_buf_puts(b, "}\n");
    return true;
}

/* A read's reply v as 200 JSON, written by build (false: not the reply it
 * reads); an error answers as its code says. */
static void answer_json(conn_t *c, const rv_t *v,
                        bool (*build)(ordo_buf_t *b, const rv_t *v, const struct http_conn_s *h))
{
    if (v->type == '-') {
        respond_error(c, v);
        return;
    }
    ordo_buf_t b = ORDO_BUF_INIT;
    if (build(&b, v, c->http))
        respond(c, 200, "application/json", "Cache-Control: no-store\r\n", b.data, b.len);
    else
        respond_text(c, 500, "unexpected reply");
    ordo_buf_free(&b);
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
            respond(c, 200, cmd_http_is_json(v->s, v->len) ? "application/json" : "application/octet-stream", "",
                    v->s, v->len);
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
    case R_MOVED:
        if (v->type == ':') {
            int n = snprintf(hb, sizeof hb, "{\"%s\":%" PRId64 "}\n", h->route == R_MOVED ? "moved" : "changed", v->i);
            respond(c, 200, "application/json", "", hb, (size_t)n);
        } else if (v->type == '-')
            respond_error(c, v);
        else
            respond_text(c, 500, "unexpected reply");
        return;
    case R_DONE:
        if (v->type == '+')
            respond(c, 200, "application/json", "", "{\"ok\":true}\n", 12);
        else if (v->type == '-')
            respond_error(c, v);
        else
            respond_text(c, 500, "unexpected reply");
        return;
    case R_KV_GET:
        if (v->type == '_')
            respond_text(c, 404, "no such key");
        else if (v->type == '*' && v->len >= 3 && v->el[0].type == '$') {
            snprintf(hb, sizeof hb, "ETag: \"%" PRId64 "\"\r\n", v->el[2].i);
            if (h->has_hdr[H_IF_NONE_MATCH] && etag_listed(&h->hdr[H_IF_NONE_MATCH], (uint64_t)v->el[2].i))
                respond(c, 304, NULL, hb, "", 0); /* the client's copy is current */
            else
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
    case R_PULL:
        answer_json(c, v, json_messages);
        return;
    case R_ONE_ZERO:
        if (v->type == ':' && v->i == 1)
            respond(c, 204, NULL, "", "", 0);
        else if (v->type == ':' && v->i == 0)
            respond_text(c, 409, h->why.data);
        else
            answer_other(c, v);
        return;
    case R_RANGE:
        answer_json(c, v, json_range);
        return;
    case R_LOCK_ACQUIRE:
    case R_CAMPAIGN:
        if (v->type == ':') {
            int n = snprintf(hb, sizeof hb, "{\"%s\":%" PRId64 "}\n", h->route == R_CAMPAIGN ? "term" : "token", v->i);
            respond(c, 200, "application/json", "", hb, (size_t)n);
        } else if (v->type == '_')
            respond_text(c, 409, h->why.data);
        else
            answer_other(c, v);
        return;
    case R_KEEPALIVE:
        if (v->type == ':') {
            int n = snprintf(hb, sizeof hb, "{\"remaining_ms\":%" PRId64 "}\n", v->i);
            respond(c, 200, "application/json", "", hb, (size_t)n);
        } else if (err_is(v, "NOTHOLDER"))
            respond_text(c, 409, h->why.data);
        else
            answer_other(c, v);
        return;
    case R_LOCK_INFO:
        answer_json(c, v, json_lock_info);
        return;
    case R_LEADER:
        answer_json(c, v, json_leader);
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
        rv_t stack_nodes[RV_NODES_MAX];
        rv_arena_t a = {stack_nodes, 0, RV_NODES_MAX};
        if (h->awaiting && h->reply_nodes > RV_NODES_MAX)
            a = (rv_arena_t){ordo_xcalloc(h->reply_nodes, sizeof(rv_t)), 0, h->reply_nodes};
        rv_t v;
        size_t used = rv_decode(c->out.data + at, c->out.len - at, &a, &v);
        if (used == 0 || used == (size_t)-1) {
            /* Not a whole reply we can read (replies and events are
             * written whole, so this is a bug): drop it, never send RESP. */
            c->out.len = at;
            h->awaiting = false;
            h->keep_alive = false;
            if (a.nodes != stack_nodes)
                free(a.nodes);
            respond_text(c, 500, "internal error: unreadable reply");
            return;
        }
        /* The reply leaves out (v points into its copy); what follows it
         * (more events) waits in tail and is put back, still RESP. */
        char small[HTTP_REPLY_STACK_BYTES];
        char *reply = used <= sizeof small ? small : ordo_xmalloc(used);
        memcpy(reply, c->out.data + at, used);
        rv_move(&v, &a, c->out.data + at, reply);
        ordo_buf_t tail = ORDO_BUF_INIT;
        if (at + used < c->out.len)
            ordo_buf_append(&tail, c->out.data + at + used, c->out.len - at - used);
        c->out.len = at;
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
        if (a.nodes != stack_nodes)
            free(a.nodes);
        if (reply != small)
            free(reply);
        if (!h->awaiting && tail.len > 0) /* (answer() may have dispatched again: the snapshot retry) */
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

/* Percent-decode s[0..n) onto b. Returns false on a malformed escape.
 * The bytes between escapes are appended a run at a time. */
static bool pct_decode(ordo_buf_t *b, const char *s, size_t n, bool plus_space)
{
    size_t run = 0; /* the first byte not yet appended */
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch != '%' && !(ch == '+' && plus_space))
            continue;
        ordo_buf_append(b, s + run, i - run);
        if (ch == '+') {
            ordo_buf_append(b, " ", 1);
        } else {
            if (i + 2 >= n)
                return false;
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0)
                return false;
            char o = (char)(hi << 4 | lo);
            ordo_buf_append(b, &o, 1);
            i += 2;
        }
        run = i + 1;
    }
    ordo_buf_append(b, s + run, n - run);
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

/* Standard base64 (RFC 4648, padding optional) of s[0..n) into out,
 * which has room for 3 * n / 4 bytes. Returns the length, or -1. */
static ssize_t b64_decode(const char *s, size_t n, char *out)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    while (n > 0 && s[n - 1] == '=')
        n--;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int v = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
              : ch >= '0' && ch <= '9' ? ch - '0' + 52 : ch == '+' ? 62 : ch == '/' ? 63 : -1;
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)(acc >> bits & 0xff);
        }
    }
    return (ssize_t)o;
}

/* Who the request is (docs/http.md, "Authorization"): no header is the
 * default user, who needs no password if it is nopass; "Basic
 * base64(user:pass)" is that user; "Bearer token" is the default user
 * with token as its password, else, if token is "user:pass", that user.
 * Sets the connection's user; false if the credentials do not hold. */
static bool check_credentials(conn_t *c)
{
    struct http_conn_s *h = c->http;
    const ordo_buf_t *a = &h->hdr[H_AUTH];
    if (!h->has_hdr[H_AUTH] || a->len == 0) {
        cmd_acl_set_user(c, "default", 7);
        return cmd_acl_default_nopass(c->srv);
    }
    if (a->len > 7 && strncasecmp(a->data, "Bearer ", 7) == 0) {
        const char *tok = a->data + 7;
        size_t tlen = a->len - 7;
        if (cmd_acl_http_login(c, NULL, 0, tok, tlen))
            return true;
        const char *colon = memchr(tok, ':', tlen);
        return colon != NULL &&
               cmd_acl_http_login(c, tok, (size_t)(colon - tok), colon + 1, tlen - (size_t)(colon - tok) - 1);
    }
    if (a->len > 6 && strncasecmp(a->data, "Basic ", 6) == 0) {
        char pair[HTTP_BASIC_MAX_BYTES];
        if ((a->len - 6) / 4 * 3 + 3 > sizeof pair)
            return false;
        ssize_t n = b64_decode(a->data + 6, a->len - 6, pair);
        const char *colon = n > 0 ? memchr(pair, ':', (size_t)n) : NULL;
        return colon != NULL &&
               cmd_acl_http_login(c, pair, (size_t)(colon - pair), colon + 1, (size_t)n - (size_t)(colon - pair) - 1);
    }
    return false;
}

/* check_credentials(), once per connection while its requests bring the
 * same Authorization (or none) and the users do not change: what they
 * decided depends on nothing else (the implicit default user is fixed at
 * start), and the connection's user is still the one they set, since an
 * HTTP connection changes it no other way. A user changed, deleted or
 * switched off changes the generation, and the next request is judged
 * afresh. Only credentials that held are kept. */
static bool authorized(conn_t *c)
{
    struct http_conn_s *h = c->http;
    const ordo_buf_t *a = &h->hdr[H_AUTH];
    bool has = h->has_hdr[H_AUTH] && a->len > 0;
    uint64_t gen = cmd_acl_users_gen(c->srv);
    if (h->held && h->held_gen == gen && h->held_has == has &&
        (!has || (h->held_auth.len == a->len && memcmp(h->held_auth.data, a->data, a->len) == 0)))
        return true;
    h->held = check_credentials(c);
    if (h->held) {
        h->held_gen = gen;
        h->held_has = has;
        h->held_auth.len = 0;
        if (has)
            ordo_buf_append(&h->held_auth, a->data, a->len);
    }
    return h->held;
}

static void respond_unauthorized(conn_t *c)
{
    /* Bearer only: a Basic challenge makes a browser ask for credentials
     * in a dialog of its own, over the dashboard's. Basic is accepted all
     * the same. */
    respond_error_text(c, 401, "WWW-Authenticate: Bearer realm=\"ordo\"\r\n",
                       "Authorization: Bearer <password>, Bearer <user:password> or Basic required");
}

/* The first parameter of query whose name is not one of allowed (a NULL-
 * terminated list), or NULL; *nlen is its name's length. A misspelt
 * parameter (timout=50) is an error, not a silently absent one. */
static const char *unknown_param(const char *query, size_t qlen, const char *const *allowed, size_t *nlen)
{
    const char *p = query, *end = query + qlen;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        size_t n = (size_t)((eq ? eq : e) - p);
        bool known = n == 0 && e == p; /* an empty pair ("a=1&&b=2") names nothing */
        for (size_t i = 0; !known && allowed[i] != NULL; i++)
            known = strlen(allowed[i]) == n && memcmp(allowed[i], p, n) == 0;
        if (!known) {
            *nlen = n;
            return p;
        }
        p = e + 1;
    }
    return NULL;
}

/* Answers 400 and returns true if query has a parameter not in allowed. */
static bool refuse_unknown_params(conn_t *c, const char *query, size_t qlen, const char *const *allowed)
{
    size_t n;
    const char *bad = unknown_param(query, qlen, allowed, &n);
    if (bad == NULL)
        return false;
    ordo_buf_t b = ORDO_BUF_INIT;
    ordo_buf_printf(&b, "unknown query parameter '%.*s'; this route takes ", (int)(n > 64 ? 64 : n), bad);
    if (allowed[0] == NULL)
        ordo_buf_puts(&b, "none");
    for (size_t i = 0; allowed[i] != NULL; i++)
        ordo_buf_printf(&b, "%s%s", i ? ", " : "", allowed[i]);
    ordo_buf_append(&b, "", 1);
    respond_text(c, 400, b.data);
    ordo_buf_free(&b);
    return true;
}

/* Is origin o[0..n) one that http-cors-origins allows ("*": any; else a
 * comma-separated list of exact origins, "https://app.example:8443")? */
static bool cors_allowed(const server_t *s, const char *o, size_t n)
{
    const char *list = s->cfg.http_cors_origins;
    if (list[0] == '\0' || n == 0)
        return false;
    if (strcmp(list, "*") == 0)
        return true;
    for (const char *p = list; *p != '\0';) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e != '\0' && *e != ',' && *e != ' ')
            e++;
        if ((size_t)(e - p) == n && memcmp(p, o, n) == 0)
            return true;
        p = e;
    }
    return false;
}

/* OPTIONS: a CORS preflight (Origin and Access-Control-Request-Method)
 * gets the methods and headers a browser may use, if its origin is
 * allowed (403 naming the option if not); any other OPTIONS the methods. */
static void respond_options(conn_t *c)
{
    struct http_conn_s *h = c->http;
    if (h->has_hdr[H_ORIGIN] && h->has_hdr[H_ACR_METHOD]) {
        if (!h->cors) {
            respond_text(c, 403, "this origin is not allowed: list it in http-cors-origins");
            return;
        }
        char hb[512];
        snprintf(hb, sizeof hb,
                 "Access-Control-Allow-Methods: " CORS_METHODS "\r\nAccess-Control-Allow-Headers: " CORS_HEADERS
                 "\r\nAccess-Control-Max-Age: %d\r\n",
                 CORS_MAX_AGE_S);
        respond(c, 204, NULL, hb, "", 0);
        return;
    }
    respond(c, 204, NULL, "Allow: " CORS_METHODS "\r\n", "", 0);
}

/* The routes served without a token: /healthz (a load balancer's probe),
 * the files of the binary (GET: the dashboard's, and the OpenAPI
 * description, /v1/openapi.json) and OPTIONS. Judged on the raw path,
 * before the body, so a request spelling them with escapes needs a token. */
static bool open_route(const struct http_conn_s *h, int method)
{
    if (method == HTTP_OPTIONS)
        return true; /* a browser's preflight carries no credentials */
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
#define NUMS_MAX 4

/* A request being routed: its path's segments (decoded onto scratch), its
 * query, and the command it becomes. Arguments are kept as offsets into
 * scratch until send_cmd() (decoding a query parameter may move scratch),
 * so a handler may read parameters and add arguments in any order. */
typedef struct {
    int method;
    const char *query;
    size_t qlen;
    span_t seg[SEGS_MAX];
    size_t nseg;
    bool more;              /* the path has more segments than SEGS_MAX */
    size_t seg_at[SEGS_MAX]; /* where each segment starts in the raw path */
    const char *path;       /* the raw path, plen bytes */
    size_t plen;
    span_t rest;            /* a route's trailing {key}: the rest of the path, decoded */
    char nums[NUMS_MAX][DEC_U64_MAX + 1]; /* numbers written for arguments, NUL-terminated */
    size_t nnums;
    struct {
        const char *p;      /* a literal, the body or a header; NULL: scratch at sp */
        span_t sp;
    } args[HTTP_ARGS_MAX];
    size_t argc;
} req_t;

static void arg_lit(req_t *r, const char *s, size_t n)
{
    assert(r->argc < HTTP_ARGS_MAX);
    r->args[r->argc].p = s;
    r->args[r->argc++].sp = (span_t){0, n};
}

static void arg_str(req_t *r, const char *s) { arg_lit(r, s, strlen(s)); }

static void arg_span(req_t *r, span_t sp)
{
    assert(r->argc < HTTP_ARGS_MAX);
    r->args[r->argc].p = NULL;
    r->args[r->argc++].sp = sp;
}

static void arg_num(req_t *r, uint64_t v)
{
    assert(r->nnums < NUMS_MAX);
    char *s = r->nums[r->nnums++];
    size_t n = dec_u64(s, v);
    s[n] = '\0';
    arg_lit(r, s, n);
}

static void arg_body(conn_t *c, req_t *r)
{
    arg_lit(r, c->http->body.data ? c->http->body.data : "", c->http->body.len);
}

/* The command built in r, to cmd_dispatch(), answered as route. */
static void send_cmd(conn_t *c, req_t *r, int route)
{
    struct http_conn_s *h = c->http;
    resp_arg_t argv[HTTP_ARGS_MAX];
    for (size_t i = 0; i < r->argc; i++)
        argv[i] = (resp_arg_t){{r->args[i].p ? r->args[i].p : h->scratch.data + r->args[i].sp.off},
                               r->args[i].sp.len};
    dispatch(c, route, argv, r->argc);
}

/* Segment i of the path, decoded. */
static span_t seg_of(const req_t *r, size_t i)
{
    assert(i < r->nseg);
    return r->seg[i];
}

/* No bound of the route's own: the command judges the number (a TTL's
 * range, a token's staleness); this keeps it a valid signed 64-bit one. */
#define PARAM_ANY (UINT64_MAX / 2)

/* Query parameter name as a number in min..max (what says what it is,
 * with its unit, for the error). Returns false after answering 400;
 * absent: true with *present false, or, when present is NULL (the
 * parameter is required), the 400 naming it. */
static bool param_u64(conn_t *c, req_t *r, const char *name, uint64_t min, uint64_t max, const char *what,
                      bool *present, uint64_t *v)
{
    struct http_conn_s *h = c->http;
    span_t sp;
    bool has = query_param(h, r->query, r->qlen, name, &sp);
    if (present != NULL)
        *present = has;
    if (!has && present != NULL)
        return true;
    char msg[192];
    if (!has) {
        snprintf(msg, sizeof msg, "%s= is required (%s)", name, what);
        respond_text(c, 400, msg);
        return false;
    }
    if (!span_u64(h, sp, v) || *v < min || *v > max) {
        int n = snprintf(msg, sizeof msg, "%s must be %s", name, what);
        if (max < PARAM_ANY)
            snprintf(msg + n, sizeof msg - (size_t)n, ", %" PRIu64 "..%" PRIu64, min, max);
        respond_text(c, 400, msg);
        return false;
    }
    return true;
}

/* Is the body (what: a payload, a value) above max-value-bytes? Then
 * answers 413 naming the size and the limit, and returns true. */
static bool body_over_value_max(conn_t *c, const char *what)
{
    size_t max = (size_t)c->srv->cfg.max_value_bytes, len = c->http->body.len;
    if (len <= max)
        return false;
    char msg[160];
    snprintf(msg, sizeof msg, "%s of %zu bytes above max-value-bytes (%zu)", what, len, max);
    respond_text(c, 413, msg);
    return true;
}

/* Path segment i as a number (a message id): false after answering 400. */
static bool seg_u64(conn_t *c, const req_t *r, size_t i, const char *what, uint64_t *v)
{
    if (!span_u64(c->http, seg_of(r, i), v)) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s in the path must be a number", what);
        respond_text(c, 400, msg);
        return false;
    }
    return true;
}

/* The text a 409 says when the command answers 0 or nil (a stale token, a
 * lock held): set by the route before it sends, kept in h->why. */
static void set_why(conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_why(conn_t *c, const char *fmt, ...)
{
    struct http_conn_s *h = c->http;
    h->why.len = 0;
    va_list ap;
    va_start(ap, fmt);
    char text[512];
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ordo_buf_puts(&h->why, text);
    ordo_buf_append(&h->why, "", 1);
}

/* A span of scratch, for a message (names are cut at 64 bytes). */
#define SPAN_FMT(h, sp) (int)((sp).len > 64 ? 64 : (sp).len), (h)->scratch.data + (sp).off

/* ---- the routes -------------------------------------------------------------- */

static void route_healthz(conn_t *c, req_t *r)
{
    (void)r;
    const char *why = cmd_http_unhealthy(c);
    if (why != NULL)
        respond_text(c, 503, why);
    else
        respond_text(c, 200, "ok");
}

/* The routes that are no command are judged as INFO, which shows the
 * same (the user's rules, cmd_acl.c): false after answering 403. */
static bool info_allowed(conn_t *c, const char *route)
{
    if (cmd_acl_route_allowed(c, "INFO"))
        return true;
    char msg[160];
    snprintf(msg, sizeof msg, "NOPERM this user may not run INFO, which %s shows", route);
    respond_error_text(c, 403, "", msg);
    return false;
}

static void route_metrics(conn_t *c, req_t *r)
{
    (void)r;
    if (!info_allowed(c, "/metrics"))
        return;
    ordo_buf_t b = ORDO_BUF_INIT;
    cmd_http_metrics(c, &b);
    respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", "", b.data, b.len);
    ordo_buf_free(&b);
}

static void route_status(conn_t *c, req_t *r)
{
    if (!info_allowed(c, "/v1/status"))
        return;
    struct http_conn_s *h = c->http;
    span_t sp;
    uint64_t since = 0; /* history=T: the samples from unix second T on (1: all of them) */
    if (query_param(h, r->query, r->qlen, "history", &sp) && (!span_u64(h, sp, &since) || since == 0)) {
        respond_text(c, 400, "history must be a unix time in seconds (1: the whole history)");
        return;
    }
    ordo_buf_t b = ORDO_BUF_INIT;
    cmd_http_status(c, &b, since);
    respond(c, 200, "application/json", "Cache-Control: no-store\r\n", b.data, b.len);
    ordo_buf_free(&b);
}

/* A file of the binary (http_assets): the OpenAPI description, and the
 * dashboard's files when no route has their path. */
static bool serve_asset(conn_t *c, const req_t *r)
{
    for (size_t i = 0; i < http_assets_count; i++)
        if (strlen(http_assets[i].path) == r->plen && memcmp(http_assets[i].path, r->path, r->plen) == 0) {
            respond(c, 200, http_assets[i].content_type, "Cache-Control: no-cache\r\n", http_assets[i].data,
                    http_assets[i].len);
            return true;
        }
    return false;
}

static void route_openapi(conn_t *c, req_t *r)
{
    if (!serve_asset(c, r))
        respond_text(c, 500, "the OpenAPI description is not in this binary");
}

/* POST /v1/queues/{q}/keys/{k}[/call]: Q.PUSH or Q.CALL with the body. */
static void push_or_call(conn_t *c, req_t *r, bool call)
{
    struct http_conn_s *h = c->http;
    server_t *s = c->srv;
    if (body_over_value_max(c, "payload"))
        return;
    bool has_timeout = false;
    uint64_t timeout = 0;
    if (call && !param_u64(c, r, "timeout", 0, PARAM_ANY, "a number of milliseconds", &has_timeout, &timeout))
        return;
    if (call && !has_timeout)
        timeout = (uint64_t)s->cfg.http_call_timeout_ms; /* timeout=0 waits with no limit */
    arg_str(r, call ? "Q.CALL" : "Q.PUSH");
    arg_span(r, seg_of(r, 2));
    arg_span(r, seg_of(r, 4));
    arg_body(c, r);
    if (timeout > 0) {
        arg_str(r, "TIMEOUT");
        arg_num(r, timeout);
    }
    /* The key is bound to this queue, key and request (cmd_queue.c,
     * "Idempotency keys"); another request with it is 422. */
    if (h->has_hdr[H_IDEM]) {
        arg_str(r, "IDEMPOTENCY");
        arg_lit(r, h->hdr[H_IDEM].data ? h->hdr[H_IDEM].data : "", h->hdr[H_IDEM].len);
    }
    h->queue.len = 0;
    ordo_buf_append(&h->queue, h->scratch.data + seg_of(r, 2).off, seg_of(r, 2).len);
    send_cmd(c, r, call ? R_CALL : R_PUSH);
}

static void route_push(conn_t *c, req_t *r) { push_or_call(c, r, false); }
static void route_call(conn_t *c, req_t *r) { push_or_call(c, r, true); }

static void route_result(conn_t *c, req_t *r)
{
    struct http_conn_s *h = c->http;
    span_t q = seg_of(r, 2);
    if (!cmd_http_queue_exists(c, h->scratch.data + q.off, q.len)) {
        respond_text(c, 404, "no such queue");
        return;
    }
    bool has_wait;
    uint64_t wait;
    if (!param_u64(c, r, "wait", 0, PARAM_ANY, "a number of milliseconds", &has_wait, &wait))
        return;
    arg_str(r, "Q.RESULT");
    arg_span(r, q);
    arg_span(r, seg_of(r, 4));
    if (has_wait && wait > 0) {
        arg_str(r, "BLOCK");
        arg_num(r, wait);
    }
    send_cmd(c, r, R_RESULT);
}

/* POST .../pause[?for=ms|?until=unix-ms] is Q.PAUSE, DELETE .../pause is
 * Q.RESUME, of a queue (/v1/queues/{q}/pause) or of one of its keys
 * (/v1/queues/{q}/keys/{k}/pause). */
static void route_pause(conn_t *c, req_t *r)
{
    bool has_for = false, has_until = false;
    uint64_t ms = 0;
    if (r->method == HTTP_POST) {
        if (!param_u64(c, r, "for", 0, PARAM_ANY, "a number of milliseconds", &has_for, &ms))
            return;
        if (!has_for && !param_u64(c, r, "until", 0, PARAM_ANY, "a unix time in milliseconds", &has_until, &ms))
            return;
    }
    arg_str(r, r->method == HTTP_POST ? "Q.PAUSE" : "Q.RESUME");
    arg_span(r, seg_of(r, 2));
    if (r->nseg == 6) {
        arg_str(r, "KEY");
        arg_span(r, seg_of(r, 4));
    }
    if (has_for || has_until) {
        arg_str(r, has_for ? "FOR" : "UNTIL");
        arg_num(r, ms);
    }
    send_cmd(c, r, R_PAUSE);
}

/* POST /v1/queues/{q}/redrive?from=&key=|id=: Q.REDRIVE, the dead letters
 * moved back ({"moved":n}); the dashboard's "retry" of dead letters. */
static void route_redrive(conn_t *c, req_t *r)
{
    struct http_conn_s *h = c->http;
    span_t from, key;
    bool has_from = query_param(h, r->query, r->qlen, "from", &from);
    bool has_key = query_param(h, r->query, r->qlen, "key", &key);
    bool has_id;
    uint64_t id;
    if (!param_u64(c, r, "id", 1, PARAM_ANY, "a message id", &has_id, &id))
        return;
    if (has_key && has_id) {
        respond_text(c, 400, "key= and id= exclude each other");
        return;
    }
    arg_str(r, "Q.REDRIVE");
    arg_span(r, seg_of(r, 2));
    if (has_from) {
        arg_str(r, "FROM");
        arg_span(r, from);
    }
    if (has_key) {
        arg_str(r, "KEY");
        arg_span(r, key);
    } else if (has_id) {
        arg_str(r, "ID");
        arg_num(r, id);
    }
    send_cmd(c, r, R_MOVED);
}

/* POST /v1/queues/{q}/keys/{k}/unpark: Q.UNPARK ({"changed":n}). */
static void route_unpark(conn_t *c, req_t *r)
{
    arg_str(r, "Q.UNPARK");
    arg_span(r, seg_of(r, 2));
    arg_span(r, seg_of(r, 4));
    send_cmd(c, r, R_PAUSE);
}

/* DELETE /v1/queues/{q}/messages/{id}: Q.CANCEL, a waiting or delayed
 * message removed before any delivery ({"changed":n}; its waiting caller
 * gets -CANCELLED). */
static void route_cancel(conn_t *c, req_t *r)
{
    arg_str(r, "Q.CANCEL");
    arg_span(r, seg_of(r, 2));
    arg_span(r, seg_of(r, 4));
    send_cmd(c, r, R_PAUSE);
}

/* PUT /v1/schedules/{name}?queue=&key=&every=&start=|cron=&missed=: Q.SCHEDULE
 * ADD, the body the payload ({"ok":true}); DELETE: Q.SCHEDULE DEL
 * ({"changed":n}). */
static void route_schedule(conn_t *c, req_t *r)
{
    struct http_conn_s *h = c->http;
    if (r->method == HTTP_DELETE) {
        arg_str(r, "Q.SCHEDULE");
        arg_str(r, "DEL");
        arg_span(r, seg_of(r, 2));
        send_cmd(c, r, R_PAUSE);
        return;
    }
    span_t queue, key, cron, missed;
    bool has_every, has_start;
    uint64_t every, start;
    if (!query_param(h, r->query, r->qlen, "queue", &queue) || !query_param(h, r->query, r->qlen, "key", &key)) {
        respond_text(c, 400, "queue= and key= are required: the message each tick pushes");
        return;
    }
    bool has_cron = query_param(h, r->query, r->qlen, "cron", &cron);
    bool has_missed = query_param(h, r->query, r->qlen, "missed", &missed);
    if (!param_u64(c, r, "every", 1, PARAM_ANY, "a number of milliseconds", &has_every, &every) ||
        !param_u64(c, r, "start", 1, PARAM_ANY, "a unix time in milliseconds", &has_start, &start))
        return;
    if (has_every == has_cron) {
        respond_text(c, 400, "one of every= (milliseconds) and cron= (five fields, UTC) is required");
        return;
    }
    arg_str(r, "Q.SCHEDULE");
    arg_str(r, "ADD");
    arg_span(r, seg_of(r, 2));
    arg_span(r, queue);
    arg_span(r, key);
    arg_body(c, r);
    if (has_every) {
        arg_str(r, "EVERY");
        arg_num(r, every);
        if (has_start) {
            arg_str(r, "START");
            arg_num(r, start);
        }
    } else {
        arg_str(r, "CRON");
        arg_span(r, cron);
    }
    if (has_missed) {
        arg_str(r, "MISSED");
        arg_span(r, missed);
    }
    send_cmd(c, r, R_DONE);
}

/* DELETE /v1/queues/{q}: Q.DROP, the queue and every message in it
 * ({"changed":n}); the dashboard's "drop" of a dead-letter queue. */
static void route_drop(conn_t *c, req_t *r)
{
    arg_str(r, "Q.DROP");
    arg_span(r, seg_of(r, 2));
    send_cmd(c, r, R_PAUSE);
}

/* POST /v1/cluster/transfer[?to=id]: CLUSTER TRANSFER [id], answered once
 * another member leads ({"ok":true}). */
static void route_transfer(conn_t *c, req_t *r)
{
    bool has_to;
    uint64_t to;
    if (!param_u64(c, r, "to", 1, PARAM_ANY, "a member id", &has_to, &to))
        return;
    arg_str(r, "CLUSTER");
    arg_str(r, "TRANSFER");
    if (has_to)
        arg_num(r, to);
    send_cmd(c, r, R_DONE);
}

/* POST /v1/queues/{q}/pull?count=&lease=&wait=: Q.PULL, the messages as
 * JSON. Without wait=, or wait=0, it does not wait. */
static void route_pull(conn_t *c, req_t *r)
{
    bool has_lease, has_wait, has_count;
    uint64_t count = 1, lease = 0, wait = 0;
    if (!param_u64(c, r, "count", 1, HTTP_PULL_COUNT_MAX, "a number of messages", &has_count, &count) ||
        !param_u64(c, r, "lease", 0, PARAM_ANY, "a number of milliseconds", &has_lease, &lease) ||
        !param_u64(c, r, "wait", 0, PARAM_ANY, "a number of milliseconds", &has_wait, &wait))
        return;
    arg_str(r, "Q.PULL");
    arg_span(r, seg_of(r, 2));
    arg_str(r, "COUNT");
    arg_num(r, count);
    if (has_lease) {
        arg_str(r, "LEASE");
        arg_num(r, lease);
    }
    if (has_wait && wait > 0) {
        arg_str(r, "BLOCK");
        arg_num(r, wait);
    }
    c->http->reply_nodes = 1 + (size_t)count * 6;
    send_cmd(c, r, R_PULL);
}

/* POST /v1/queues/{q}/messages/{id}/{ack,nack,extend}?token=...: the
 * delivery's command; 204, or 409 when the token is stale. */
static void delivery_cmd(conn_t *c, req_t *r, const char *cmd)
{
    struct http_conn_s *h = c->http;
    uint64_t id, token, ms = 0;
    bool has_ms = false;
    bool ack = strcmp(cmd, "Q.ACK") == 0, nack = strcmp(cmd, "Q.NACK") == 0;
    span_t q = seg_of(r, 2);
    if (!cmd_http_queue_exists(c, h->scratch.data + q.off, q.len)) {
        respond_text(c, 404, "no such queue");
        return;
    }
    if (!seg_u64(c, r, 4, "the message id", &id) ||
        !param_u64(c, r, "token", 0, PARAM_ANY, "the delivery's token (Q.PULL's fifth element)", NULL, &token))
        return;
    if (nack && !param_u64(c, r, "delay", 0, PARAM_ANY, "a number of milliseconds", &has_ms, &ms))
        return;
    if (!ack && !nack && !param_u64(c, r, "lease", 0, PARAM_ANY, "a number of milliseconds", NULL, &ms))
        return;
    if (ack && body_over_value_max(c, "result"))
        return;
    arg_str(r, cmd);
    arg_span(r, seg_of(r, 2));
    arg_num(r, id);
    arg_num(r, token);
    if (ack && h->body.len > 0) {
        arg_str(r, "RESULT");
        arg_body(c, r);
    } else if (nack && has_ms) {
        arg_str(r, "DELAY");
        arg_num(r, ms);
    } else if (!ack && !nack)
        arg_num(r, ms);
    set_why(c, "token %" PRIu64 " is not the current delivery of message %" PRIu64 " of queue '%.*s' (its lease ran "
               "out and it went to another consumer, or it was acked already): nothing changed",
            token, id, SPAN_FMT(h, seg_of(r, 2)));
    send_cmd(c, r, R_ONE_ZERO);
}

static void route_ack(conn_t *c, req_t *r) { delivery_cmd(c, r, "Q.ACK"); }
static void route_nack(conn_t *c, req_t *r) { delivery_cmd(c, r, "Q.NACK"); }
static void route_extend(conn_t *c, req_t *r) { delivery_cmd(c, r, "Q.EXTEND"); }

/* GET, PUT, DELETE /v1/kv/{key}: the key is the rest of the path. */
static void route_kv(conn_t *c, req_t *r)
{
    struct http_conn_s *h = c->http;
    int method = r->method;
    span_t key = r->rest;
    uint64_t rev = 0;
    bool cond = false;
    bool star_match = h->has_hdr[H_IF_MATCH] && h->hdr[H_IF_MATCH].len == 1 && h->hdr[H_IF_MATCH].data[0] == '*';
    if (h->has_hdr[H_IF_MATCH] && method != HTTP_GET) {
        if (star_match) {
            /* "*": only if the key exists, at whatever revision it has
             * now (read and written in this one loop turn: nothing runs
             * between the two). */
            if (!cmd_http_key_rev(c, h->scratch.data + key.off, key.len, &rev)) {
                respond_text(c, 412, "If-Match: * and there is no such key");
                return;
            }
        } else if (!header_rev(&h->hdr[H_IF_MATCH], &rev)) {
            respond_text(c, 400, "If-Match must be * or an ETag this server gave (\"<revision>\")");
            return;
        }
        cond = true;
    } else if (h->has_hdr[H_IF_NONE_MATCH] && method != HTTP_GET) {
        if (!(h->hdr[H_IF_NONE_MATCH].len == 1 && h->hdr[H_IF_NONE_MATCH].data[0] == '*')) {
            respond_text(c, 400, "If-None-Match on PUT or DELETE must be * (only if absent)");
            return;
        }
        cond = true, rev = 0;
    }
    if (method == HTTP_GET) {
        arg_str(r, "KV.GET");
        arg_span(r, key);
        send_cmd(c, r, R_KV_GET);
        return;
    }
    if (method == HTTP_PUT && body_over_value_max(c, "value"))
        return;
    arg_str(r, method == HTTP_PUT ? "KV.PUT" : "KV.DEL");
    arg_span(r, key);
    if (method == HTTP_PUT)
        arg_body(c, r);
    if (cond) {
        arg_str(r, "IFREV");
        arg_num(r, rev);
    }
    send_cmd(c, r, method == HTTP_PUT ? R_KV_PUT : R_KV_DEL);
}

/* A range cursor: "<rev>.<the last key, in hex>" (URL-safe as it is). */
static bool cursor_parse(conn_t *c, span_t sp, uint64_t *rev, span_t *after)
{
    struct http_conn_s *h = c->http;
    const char *s = h->scratch.data + sp.off;
    const char *dot = memchr(s, '.', sp.len);
    size_t dl = dot ? (size_t)(dot - s) : 0;
    size_t hl = dot ? sp.len - dl - 1 : 0;
    span_t d = {sp.off, dl};
    if (dot == NULL || !span_u64(h, d, rev) || *rev == 0 || hl % 2 != 0)
        return false;
    for (size_t i = 0; i < hl; i++)
        if (hexval(dot[1 + i]) < 0)
            return false;
    /* Decoded after the span (scratch may move: offsets only). */
    size_t at = h->scratch.len, from = sp.off + dl + 1;
    for (size_t i = 0; i < hl; i += 2) {
        char o = (char)(hexval(h->scratch.data[from + i]) << 4 | hexval(h->scratch.data[from + i + 1]));
        ordo_buf_append(&h->scratch, &o, 1);
    }
    *after = (span_t){at, hl / 2};
    return true;
}

/* GET /v1/kv?prefix=&limit=&rev=&cursor=: KV.RANGE, one page as JSON. The
 * page is read at one revision (the current one for a first page), which
 * the cursor carries, so the pages of a listing are one consistent view. */
static void route_kv_range(conn_t *c, req_t *r)
{
    struct http_conn_s *h = c->http;
    span_t prefix = {0, 0}, cur, after = {0, 0};
    bool has_limit, has_rev;
    uint64_t limit = HTTP_RANGE_LIMIT_DEFAULT, rev = 0;
    query_param(h, r->query, r->qlen, "prefix", &prefix); /* absent: every key */
    if (!param_u64(c, r, "limit", 1, HTTP_RANGE_LIMIT_MAX, "a number of keys", &has_limit, &limit) ||
        !param_u64(c, r, "rev", 0, PARAM_ANY, "a revision", &has_rev, &rev))
        return;
    bool has_cursor = query_param(h, r->query, r->qlen, "cursor", &cur);
    if (has_cursor) {
        uint64_t crev;
        if (!cursor_parse(c, cur, &crev, &after)) {
            respond_text(c, 400, "cursor must be one this server gave (\"cursor\" of a page)");
            return;
        }
        if (has_rev && rev != crev) {
            respond_text(c, 400, "rev= and cursor= name two revisions: send the cursor alone");
            return;
        }
        rev = crev;
    }
    if (rev == 0)
        rev = cmd_http_rev(c);
    arg_str(r, "KV.RANGE");
    arg_span(r, prefix);
    if (has_cursor) {
        arg_str(r, "AFTER");
        arg_span(r, after);
    }
    arg_str(r, "LIMIT");
    arg_num(r, limit + 1); /* one more than the page: is there a next page? */
    arg_str(r, "REV");
    arg_num(r, rev);
    h->range_limit = (size_t)limit;
    h->range_rev = rev;
    h->reply_nodes = 1 + ((size_t)limit + 1) * 7;
    send_cmd(c, r, R_RANGE);
}

static void route_watch(conn_t *c, req_t *r)
{
    struct http_conn_s *h = c->http;
    uint64_t n64;
    if (h->has_hdr[H_LAST_EVENT_ID] && !header_rev(&h->hdr[H_LAST_EVENT_ID], &n64)) {
        respond_text(c, 400, "Last-Event-ID must be the id of an event this server sent (a revision)");
        return;
    }
    span_t key;
    bool prefix = false;
    if (query_param(h, r->query, r->qlen, "key", &key))
        prefix = false;
    else if (query_param(h, r->query, r->qlen, "prefix", &key))
        prefix = true;
    else {
        respond_text(c, 400, "key= or prefix= is required");
        return;
    }
    h->watch_key.len = 0;
    ordo_buf_append(&h->watch_key, h->scratch.data + key.off, key.len);
    h->watch_prefix = prefix;
    arg_str(r, "KV.WATCH");
    arg_span(r, key);
    if (prefix)
        arg_str(r, "PREFIX");
    if (h->has_hdr[H_LAST_EVENT_ID]) {
        arg_str(r, "FROM");
        arg_num(r, n64);
    }
    c->sse = true; /* the watch's events are written as SSE from its first on */
    send_cmd(c, r, R_WATCH);
}

/* How long a lock acquire or a campaign waits: timeout= (0: do not wait,
 * as the commands' WAIT 0), else http-call-timeout-ms. */
static bool wait_param(conn_t *c, req_t *r, uint64_t *wait)
{
    bool has;
    if (!param_u64(c, r, "timeout", 0, PARAM_ANY, "a number of milliseconds", &has, wait))
        return false;
    if (!has)
        *wait = (uint64_t)c->srv->cfg.http_call_timeout_ms;
    return true;
}

/* POST /v1/locks/{name}/acquire?ttl=&timeout=: LOCK.ACQUIRE name ttl WAIT. */
static void route_lock_acquire(conn_t *c, req_t *r)
{
    uint64_t ttl, wait;
    if (!param_u64(c, r, "ttl", 0, PARAM_ANY, "the lock's time to live in milliseconds", NULL, &ttl) ||
        !wait_param(c, r, &wait))
        return;
    arg_str(r, "LOCK.ACQUIRE");
    arg_span(r, seg_of(r, 2));
    arg_num(r, ttl);
    arg_str(r, "WAIT");
    arg_num(r, wait);
    set_why(c, "lock '%.*s' is held by another holder (waited %" PRIu64 " ms)", SPAN_FMT(c->http, seg_of(r, 2)),
            wait);
    send_cmd(c, r, R_LOCK_ACQUIRE);
}

/* POST /v1/locks/{name}/{release,extend}?token=[&ttl=]: 204, or 409. */
static void lock_cmd(conn_t *c, req_t *r, bool extend)
{
    uint64_t token, ttl = 0;
    if (!param_u64(c, r, "token", 0, PARAM_ANY, "the lock's fencing token", NULL, &token) ||
        (extend && !param_u64(c, r, "ttl", 0, PARAM_ANY, "the lock's time to live in milliseconds", NULL, &ttl)))
        return;
    arg_str(r, extend ? "LOCK.EXTEND" : "LOCK.RELEASE");
    arg_span(r, seg_of(r, 2));
    arg_num(r, token);
    if (extend)
        arg_num(r, ttl);
    set_why(c, "token %" PRIu64 " does not hold lock '%.*s' now: nothing changed", token,
            SPAN_FMT(c->http, seg_of(r, 2)));
    send_cmd(c, r, R_ONE_ZERO);
}

static void route_lock_release(conn_t *c, req_t *r) { lock_cmd(c, r, false); }
static void route_lock_extend(conn_t *c, req_t *r) { lock_cmd(c, r, true); }

static void route_lock_info(conn_t *c, req_t *r)
{
    arg_str(r, "LOCK.INFO");
    arg_span(r, seg_of(r, 2));
    send_cmd(c, r, R_LOCK_INFO);
}

/* POST /v1/elections/{name}/campaign?ttl=&timeout=, the body the value. */
static void route_campaign(conn_t *c, req_t *r)
{
    uint64_t ttl, wait;
    if (!param_u64(c, r, "ttl", 0, PARAM_ANY, "the leadership's time to live in milliseconds", NULL, &ttl) ||
        !wait_param(c, r, &wait))
        return;
    if (body_over_value_max(c, "value"))
        return;
    arg_str(r, "ELECT.CAMPAIGN");
    arg_span(r, seg_of(r, 2));
    arg_body(c, r);
    arg_num(r, ttl);
    arg_str(r, "WAIT");
    arg_num(r, wait);
    set_why(c, "another candidate leads election '%.*s' (waited %" PRIu64 " ms)", SPAN_FMT(c->http, seg_of(r, 2)),
            wait);
    send_cmd(c, r, R_CAMPAIGN);
}

/* POST /v1/elections/{name}/{proclaim,resign,keepalive}?term=. */
static void elect_cmd(conn_t *c, req_t *r, const char *cmd, int route)
{
    uint64_t term;
    if (!param_u64(c, r, "term", 0, PARAM_ANY, "the term the campaign answered", NULL, &term))
        return;
    bool proclaim = strcmp(cmd, "ELECT.PROCLAIM") == 0;
    if (proclaim && body_over_value_max(c, "value"))
        return;
    arg_str(r, cmd);
    arg_span(r, seg_of(r, 2));
    arg_num(r, term);
    if (proclaim)
        arg_body(c, r);
    set_why(c, "term %" PRIu64 " does not lead election '%.*s' now: nothing changed", term,
            SPAN_FMT(c->http, seg_of(r, 2)));
    send_cmd(c, r, route);
}

static void route_proclaim(conn_t *c, req_t *r) { elect_cmd(c, r, "ELECT.PROCLAIM", R_ONE_ZERO); }
static void route_resign(conn_t *c, req_t *r) { elect_cmd(c, r, "ELECT.RESIGN", R_ONE_ZERO); }
static void route_keepalive(conn_t *c, req_t *r) { elect_cmd(c, r, "ELECT.KEEPALIVE", R_KEEPALIVE); }

static void route_leader(conn_t *c, req_t *r)
{
    arg_str(r, "ELECT.LEADER");
    arg_span(r, seg_of(r, 2));
    send_cmd(c, r, R_LEADER);
}

/* The route table: every route the door serves but the dashboard's files
 * (http_assets), as docs/http.md lists them and the OpenAPI description
 * (src/server/net/api/openapi.json, served at /v1/openapi.json) describes
 * them; scripts/check-openapi.py (a unit test) reads the rows and the
 * parameter lists below and fails when the two differ. A path is literal
 * segments and {names}; `rest` marks a route whose last {name} takes the
 * rest of the path, slashes included; `open` a route served without a
 * token (open_route() lets its request in). */
typedef struct {
    int method;
    const char *path;
    bool rest;
    bool open;
    const char *const *params;   /* the query parameters it takes, NULL-terminated; NULL: not checked */
    void (*fn)(conn_t *c, req_t *r);
} route_t;

static const char *const p_none[] = {NULL};
static const char *const p_call[] = {"timeout", NULL};
static const char *const p_result[] = {"wait", NULL};
static const char *const p_status[] = {"history", NULL};
static const char *const p_pause[] = {"for", "until", NULL};
static const char *const p_redrive[] = {"from", "key", "id", NULL};
static const char *const p_transfer[] = {"to", NULL};
static const char *const p_schedule[] = {"queue", "key", "every", "start", "cron", "missed", NULL};
static const char *const p_pull[] = {"count", "lease", "wait", NULL};
static const char *const p_ack[] = {"token", NULL};
static const char *const p_nack[] = {"token", "delay", NULL};
static const char *const p_extend[] = {"token", "lease", NULL};
static const char *const p_range[] = {"prefix", "limit", "rev", "cursor", NULL};
static const char *const p_watch[] = {"key", "prefix", NULL};
static const char *const p_acquire[] = {"ttl", "timeout", NULL};
static const char *const p_lock_token[] = {"token", NULL};
static const char *const p_lock_extend[] = {"token", "ttl", NULL};
static const char *const p_term[] = {"term", NULL};

static const route_t routes[] = {
    {HTTP_GET, "/healthz", false, true, NULL, route_healthz},
    {HTTP_GET, "/metrics", false, false, NULL, route_metrics},
    {HTTP_GET, "/v1/openapi.json", false, true, p_none, route_openapi},
    {HTTP_GET, "/v1/status", false, false, p_status, route_status},
    {HTTP_POST, "/v1/queues/{queue}/keys/{key}", false, false, p_none, route_push},
    {HTTP_POST, "/v1/queues/{queue}/keys/{key}/call", false, false, p_call, route_call},
    {HTTP_GET, "/v1/queues/{queue}/results/{id}", false, false, p_result, route_result},
    {HTTP_POST, "/v1/queues/{queue}/pull", false, false, p_pull, route_pull},
    {HTTP_DELETE, "/v1/queues/{queue}", false, false, p_none, route_drop},
    {HTTP_DELETE, "/v1/queues/{queue}/messages/{id}", false, false, p_none, route_cancel},
    {HTTP_PUT, "/v1/schedules/{name}", false, false, p_schedule, route_schedule},
    {HTTP_DELETE, "/v1/schedules/{name}", false, false, p_none, route_schedule},
    {HTTP_POST, "/v1/queues/{queue}/redrive", false, false, p_redrive, route_redrive},
    {HTTP_POST, "/v1/queues/{queue}/keys/{key}/unpark", false, false, p_none, route_unpark},
    {HTTP_POST, "/v1/cluster/transfer", false, false, p_transfer, route_transfer},
    {HTTP_POST, "/v1/queues/{queue}/pause", false, false, p_pause, route_pause},
    {HTTP_DELETE, "/v1/queues/{queue}/pause", false, false, p_none, route_pause},
    {HTTP_POST, "/v1/queues/{queue}/keys/{key}/pause", false, false, p_pause, route_pause},
    {HTTP_DELETE, "/v1/queues/{queue}/keys/{key}/pause", false, false, p_none, route_pause},
    {HTTP_POST, "/v1/queues/{queue}/messages/{id}/ack", false, false, p_ack, route_ack},
    {HTTP_POST, "/v1/queues/{queue}/messages/{id}/nack", false, false, p_nack, route_nack},
    {HTTP_POST, "/v1/queues/{queue}/messages/{id}/extend", false, false, p_extend, route_extend},
    {HTTP_GET, "/v1/kv", false, false, p_range, route_kv_range},
    {HTTP_GET, "/v1/kv/{key}", true, false, p_none, route_kv},
    {HTTP_PUT, "/v1/kv/{key}", true, false, p_none, route_kv},
    {HTTP_DELETE, "/v1/kv/{key}", true, false, p_none, route_kv},
    {HTTP_GET, "/v1/watch", false, false, p_watch, route_watch},
    {HTTP_GET, "/v1/locks/{name}", false, false, p_none, route_lock_info},
    {HTTP_POST, "/v1/locks/{name}/acquire", false, false, p_acquire, route_lock_acquire},
    {HTTP_POST, "/v1/locks/{name}/release", false, false, p_lock_token, route_lock_release},
    {HTTP_POST, "/v1/locks/{name}/extend", false, false, p_lock_extend, route_lock_extend},
    {HTTP_GET, "/v1/elections/{name}", false, false, p_none, route_leader},
    {HTTP_POST, "/v1/elections/{name}/campaign", false, false, p_acquire, route_campaign},
    {HTTP_POST, "/v1/elections/{name}/proclaim", false, false, p_term, route_proclaim},
    {HTTP_POST, "/v1/elections/{name}/resign", false, false, p_term, route_resign},
    {HTTP_POST, "/v1/elections/{name}/keepalive", false, false, p_term, route_keepalive},
};

#define ROUTES_COUNT (sizeof routes / sizeof routes[0])

/* A route's path split once: each segment's place in the path, its
 * length, and whether it is a {name}. */
struct route_shape_s {
    size_t nseg;
    struct {
        uint8_t at, len;
        bool param;
    } seg[SEGS_MAX];
};

static struct route_shape_s *route_shapes_new(void)
{
    struct route_shape_s *sh = ordo_xcalloc(ROUTES_COUNT, sizeof *sh);
    for (size_t k = 0; k < ROUTES_COUNT; k++) {
        const char *path = routes[k].path;
        for (const char *p = path + 1;;) {
            const char *sl = strchr(p, '/');
            size_t n = sl ? (size_t)(sl - p) : strlen(p);
            assert(sh[k].nseg < SEGS_MAX && n <= UINT8_MAX && p - path <= UINT8_MAX);
            sh[k].seg[sh[k].nseg].at = (uint8_t)(p - path);
            sh[k].seg[sh[k].nseg].len = (uint8_t)n;
            sh[k].seg[sh[k].nseg].param = n >= 2 && p[0] == '{';
            sh[k].nseg++;
            if (sl == NULL)
                break;
            p = sl + 1;
        }
    }
    return sh;
}

/* Does the request's path fit route t's path? A rest route's last {name}
 * gets the rest of the raw path, decoded onto scratch (r->rest). Returns
 * false after answering 400 for a malformed rest. */
static bool route_fits(conn_t *c, req_t *r, const route_t *t, bool *answered)
{
    /* The path split once (every connection's listener has the shapes):
     * the segments counted, the literals compared whole. A rest route's
     * last {name} takes the rest of the path, however many segments. */
    const struct http_listener_s *l = c->srv->net.http;
    assert(l != NULL && l->shapes != NULL);
    const struct route_shape_s *sh = &l->shapes[t - routes];
    if (t->rest ? r->nseg < sh->nseg : (sh->nseg != r->nseg || r->more))
        return false;
    for (size_t i = 0; i < sh->nseg; i++)
        if (!sh->seg[i].param &&
            (r->seg[i].len != sh->seg[i].len ||
             memcmp(c->http->scratch.data + r->seg[i].off, t->path + sh->seg[i].at, sh->seg[i].len) != 0))
            return false;
    if (!t->rest)
        return true;
    size_t last = sh->nseg - 1;
    assert(sh->seg[last].param);
    struct http_conn_s *h = c->http;
    r->rest.off = h->scratch.len;
    if (!pct_decode(&h->scratch, r->path + r->seg_at[last], r->plen - r->seg_at[last], false)) {
        respond_text(c, 400, "malformed percent-encoding in the path");
        *answered = true;
        return false;
    }
    r->rest.len = h->scratch.len - r->rest.off;
    return true;
}

static const char *method_name(int m) { return http_method_str((enum http_method)m); }

/* Route r: the route whose path and method fit, else 405 with Allow when
 * the path fits another method, else a dashboard file (GET), else 404. */
static void route(conn_t *c, req_t *r)
{
    /* The routes of the request's method first: a request that has one
     * (every request but a 405, a file or a 404) is not matched against
     * the others. */
    const route_t *t = NULL;
    for (size_t i = 0; i < ROUTES_COUNT && t == NULL; i++) {
        bool answered = false;
        if (routes[i].method != r->method)
            continue;
        if (route_fits(c, r, &routes[i], &answered))
            t = &routes[i];
        else if (answered)
            return;
    }
    char allow[128] = "";
    for (size_t i = 0; i < ROUTES_COUNT && t == NULL; i++) {
        bool answered = false;
        if (routes[i].method == r->method)
            continue;
        if (route_fits(c, r, &routes[i], &answered)) {
            size_t at = strlen(allow);
            snprintf(allow + at, sizeof allow - at, "%s%s", at ? ", " : "", method_name(routes[i].method));
        } else if (answered)
            return;
    }
    if (t != NULL) {
        if (t->params != NULL && refuse_unknown_params(c, r->query, r->qlen, t->params))
            return;
        if (c->http->head && t->fn == route_watch) {
            respond_error_text(c, 405, "Allow: GET\r\n", "HEAD is not served for an event stream: GET it");
            return;
        }
        if (!t->open && !c->http->authed) {
            respond_unauthorized(c); /* on_headers_complete() refused it already: kept as the rule's statement */
            return;
        }
        t->fn(c, r);
        return;
    }
    if (allow[0] == '\0' && r->method == HTTP_GET && serve_asset(c, r))
        return;
    if (allow[0] != '\0') {
        char hb[160], msg[192];
        snprintf(hb, sizeof hb, "Allow: %s\r\n", allow);
        snprintf(msg, sizeof msg, "%s is not served here; this route takes %s", method_name(r->method), allow);
        respond_error_text(c, 405, hb, msg);
        return;
    }
    respond_text(c, 404, "no such route");
}

/* Route the complete request in h (url, headers, body). */
static void handle_request(conn_t *c)
{
    struct http_conn_s *h = c->http;
    server_t *s = c->srv;
    h->keep_alive = http_should_keep_alive(&h->p);
    c->last_cmd_ms = s->now_ms; /* CLIENT LIST's idle, the dashboard's */
    h->scratch.len = 0;
    h->reply_nodes = RV_NODES_MAX;
    h->head = h->p.method == HTTP_HEAD;
    req_t r = {.method = h->head ? HTTP_GET : (int)h->p.method};
    const char *url = h->url.data ? h->url.data : "";
    size_t ulen = h->url.len;
    const char *q = memchr(url, '?', ulen);
    size_t plen = q ? (size_t)(q - url) : ulen;
    r.query = q ? q + 1 : "";
    r.qlen = q ? ulen - plen - 1 : 0;
    r.path = url;
    r.plen = plen;
    h->v1 = plen >= 3 && memcmp(url, "/v1", 3) == 0 && (plen == 3 || url[3] == '/');
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
    /* Split the path on '/' (before decoding: %2F is a byte of a name).
     * A path without escapes is its own decoding: copied onto scratch
     * once, its segments are spans of that copy. */
    size_t plain_at = SIZE_MAX;
    if (memchr(url, '%', plen) == NULL) {
        plain_at = h->scratch.len;
        ordo_buf_append(&h->scratch, url, plen);
    }
    for (size_t i = 1; i <= plen;) {
        const char *st = url + i;
        const char *sl = memchr(st, '/', plen - i);
        size_t n = sl ? (size_t)(sl - st) : plen - i;
        if (r.nseg == SEGS_MAX) {
            r.more = true;
            break;
        }
        r.seg_at[r.nseg] = i;
        if (plain_at != SIZE_MAX) {
            r.seg[r.nseg] = (span_t){plain_at + i, n};
        } else {
            r.seg[r.nseg].off = h->scratch.len;
            if (!pct_decode(&h->scratch, st, n, false)) {
                respond_text(c, 400, "malformed percent-encoding in the path");
                return;
            }
            r.seg[r.nseg].len = h->scratch.len - r.seg[r.nseg].off;
        }
        r.nseg++;
        i += n + 1;
        if (sl == NULL)
            break;
    }
    if (r.method == HTTP_OPTIONS) {
        respond_options(c);
        return;
    }
    bool v1 = r.nseg >= 1 && r.seg[0].len == 2 && memcmp(h->scratch.data + r.seg[0].off, "v1", 2) == 0;
    if (v1 && h->has_hdr[H_IF_NONE_MATCH] && !(h->hdr[H_IF_NONE_MATCH].len == 1 &&
        h->hdr[H_IF_NONE_MATCH].data[0] == '*') && !etag_list_ok(&h->hdr[H_IF_NONE_MATCH])) {
        respond_text(c, 400, "If-None-Match must be * or ETags this server gave (\"<revision>\", comma-separated)");
        return;
    }
    route(c, &r);
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
static bool token_char(unsigned char ch)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-')
        return true; /* the usual, without a search */
    return ch != 0 && strchr("!#$%&'*+.^_`|~", ch) != NULL;
}

static bool token_chars(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!token_char((unsigned char)s[i]))
            return false;
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

/* Keep the header name: value if it is one we read (the last of a name
 * wins). */
static void keep_header(struct http_conn_s *h, const char *name, size_t nlen, const char *value, size_t vlen)
{
    for (int i = 0; i < H_COUNT; i++)
        if (nlen == hdr_names[i].len && strncasecmp(name, hdr_names[i].name, nlen) == 0) {
            h->hdr[i].len = 0;
            ordo_buf_append(&h->hdr[i], value, vlen);
            h->has_hdr[i] = true;
        }
}

static void commit_header(struct http_conn_s *h)
{
    if (h->field.len == 0)
        return;
    keep_header(h, h->field.data, h->field.len, h->value.data ? h->value.data : "", h->value.len);
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
    h->cors = false;
    h->start_len = 0;
    h->v1 = false;
    h->head = false;
    h->authed = false;
    h->in_message = true;
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
    h->head = p->method == HTTP_HEAD; /* from here on, even a refusal of it has no body */
    conn_t *c = p->data;
    h->cors = h->has_hdr[H_ORIGIN] && cors_allowed(c->srv, h->hdr[H_ORIGIN].data, h->hdr[H_ORIGIN].len);
    if (check_version(p) != 0)
        return -1;
    bool authed = h->authed = authorized(c);
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

/* ---- the plainest request, without the parser ------------------------------- */

/* What clients send most, and all of one call: a request line "<method>
 * <origin-form target> HTTP/1.1", headers each a token, a colon,
 * optional spaces and a value of visible characters and inner spaces, no
 * Connection, Proxy-Connection, Transfer-Encoding or Upgrade header, at
 * most one Content-Length of digits, and the whole body, all already read.
 * Such a request is read here in one pass, and the parser's callbacks
 * are called as http-parser calls them for it (one call per piece, the
 * parser's fields as it sets them): everything http-parser would read
 * differently, or refuse, or wait for, is left to it (FP_NO), from the
 * request's first byte. The parser's state is untouched: it is at a
 * message's start before a request read here and after it (it resets its
 * fields there). */
enum fast_result {
    FP_NO,          /* not such a request: the parser reads it */
    FP_DONE,        /* read, callbacks run: a complete request */
    FP_REFUSED,     /* a callback refused it (h->limit_status) */
};

/* Headers a request read here may carry; more: the parser reads it. */
#define FP_HEADERS_MAX 16

static bool fp_target_char(unsigned char ch) { return ch > 0x20 && ch < 0x7f && ch != '#'; }
static bool fp_value_char(unsigned char ch) { return (ch >= 0x20 && ch < 0x7f) || ch == '\t'; }

/* Does name[0..n) begin with the name of a header http-parser acts on
 * (Content-Length itself excepted)? The parser matches those names as
 * they arrive, and a longer name that begins with one ("Transfer-
 * Encoding1") is not always the plain header to it: such a request is
 * left to it. */
static bool fp_parser_header(const char *name, size_t n)
{
    static const struct {
        const char *s;
        size_t n;
    } names[] = {{"connection", 10}, {"proxy-connection", 16}, {"transfer-encoding", 17}, {"upgrade", 7},
                 {"content-length", 14}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (n >= names[i].n && strncasecmp(name, names[i].s, names[i].n) == 0)
            return true;
    return false;
}

/* Read d[0..len) as the plainest request (above). *used: the bytes of
 * the request (FP_DONE), or read up to a refusal (FP_REFUSED). */
static enum fast_result fast_request(conn_t *c, const char *d, size_t len, size_t *used)
{
    static const struct {
        const char *s;
        size_t n;
        enum http_method m;
    } methods[] = {{"GET ", 4, HTTP_GET},   {"POST ", 5, HTTP_POST}, {"PUT ", 4, HTTP_PUT},
                   {"DELETE ", 7, HTTP_DELETE}, {"HEAD ", 5, HTTP_HEAD}, {"OPTIONS ", 8, HTTP_OPTIONS}};
    const struct http_listener_s *l = c->srv->net.http;
    if (l == NULL || l->header_max < 64)
        return FP_NO;
    /* The head stays well inside the parser's limit, which counts every
     * byte of it (431 is the parser's to give). */
    const char *end = d + (len < l->header_max - 8 ? len : l->header_max - 8);
    size_t mi = 0;
    while (mi < sizeof methods / sizeof methods[0] &&
           !(len >= methods[mi].n && memcmp(d, methods[mi].s, methods[mi].n) == 0))
        mi++;
    if (mi == sizeof methods / sizeof methods[0])
        return FP_NO;
    const char *url = d + methods[mi].n, *p = url;
    while (p < end && fp_target_char((unsigned char)*p))
        p++;
    if (p == url || url[0] != '/' || end - p < 11 || memcmp(p, " HTTP/1.1\r\n", 11) != 0)
        return FP_NO;
    size_t ulen = (size_t)(p - url);
    p += 11;
    struct {
        const char *name, *value;
        size_t nlen, vlen;
    } hd[FP_HEADERS_MAX];
    size_t nh = 0;
    bool has_cl = false;
    uint64_t cl = 0;
    for (;;) {
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') {
            p += 2;
            break;
        }
        if (nh == FP_HEADERS_MAX)
            return FP_NO;
        const char *name = p;
        while (p < end && token_char((unsigned char)*p))
            p++;
        if (p == name || p == end || *p != ':')
            return FP_NO;
        size_t nlen = (size_t)(p - name);
        p++;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *value = p;
        while (p < end && fp_value_char((unsigned char)*p))
            p++;
        /* An empty value, or one ending in a space, is the parser's. */
        if (p == value || p[-1] == ' ' || p[-1] == '\t' || end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return FP_NO;
        size_t vlen = (size_t)(p - value);
        p += 2;
        if (nlen == 14 && strncasecmp(name, "content-length", 14) == 0) {
            if (has_cl || vlen > 15)
                return FP_NO;
            for (size_t i = 0; i < vlen; i++) {
                if (value[i] < '0' || value[i] > '9')
                    return FP_NO;
                cl = cl * 10 + (uint64_t)(value[i] - '0');
            }
            has_cl = true;
        } else if (fp_parser_header(name, nlen)) { /* a longer name beginning with content-length too */
            return FP_NO;
        }
        hd[nh].name = name;
        hd[nh].nlen = nlen;
        hd[nh].value = value;
        hd[nh].vlen = vlen;
        nh++;
    }
    size_t head = (size_t)(p - d);
    if (has_cl && cl > len - head)
        return FP_NO; /* the body is not all here: the parser takes what is */
    http_parser *hp = &c->http->p;
    hp->method = methods[mi].m;
    hp->http_major = 1;
    hp->http_minor = 1;
    hp->flags = has_cl ? F_CONTENTLENGTH : 0;
    hp->content_length = has_cl ? cl : ULLONG_MAX;
    *used = head;
    on_message_begin(hp);
    on_url(hp, url, ulen);
    /* What on_header_field() and on_header_value() would do: the names
     * are tokens (read so above), and no field is pending. */
    assert(c->http->field.len == 0 && c->http->value.len == 0);
    for (size_t i = 0; i < nh; i++)
        keep_header(c->http, hd[i].name, hd[i].nlen, hd[i].value, hd[i].vlen);
    if (on_headers_complete(hp) != 0)
        return FP_REFUSED;
    if (has_cl && cl > 0 && on_body(hp, d + head, (size_t)cl) != 0)
        return FP_REFUSED;
    *used = head + (has_cl ? (size_t)cl : 0);
    return FP_DONE;
}

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
        /* A request the parser has not begun may be the plainest. */
        bool fresh = !h->begun;
        if (!h->begun) {
            h->begun = true;
            h->begun_ms = c->srv->now_ms;
        }
        size_t n = 0;
        enum fast_result fast = fresh ? fast_request(c, c->in.data + off, c->in.len - off, &n) : FP_NO;
        enum http_errno e;
        /* Blank lines before a request are the parser's to skip, and no
         * byte of it: start begins after them. */
        size_t lead = 0;
        while (!h->in_message && fast == FP_NO && off + lead < c->in.len &&
               (c->in.data[off + lead] == '\r' || c->in.data[off + lead] == '\n'))
            lead++;
        if (fast == FP_NO) {
            n = http_parser_execute(&h->p, &settings, c->in.data + off, c->in.len - off);
            e = HTTP_PARSER_ERRNO(&h->p);
        } else {
            e = fast == FP_DONE ? HPE_PAUSED : HPE_CB_headers_complete;
        }
        /* The parser stops at the end of a message (paused) or at a
         * refusal, so these bytes are this request's (on_message_begin()
         * emptied start when it began). */
        size_t mine = n > lead ? n - lead : 0;
        size_t keep = sizeof h->start - h->start_len < mine ? sizeof h->start - h->start_len : mine;
        memcpy(h->start + h->start_len, c->in.data + off + lead, keep);
        h->start_len += keep;
        off += n;
        if (e == HPE_PAUSED) {
            if (fast == FP_NO)
                http_parser_pause(&h->p, 0);
            h->begun = false;
            h->in_message = false;
            handle_request(c);
            continue;
        }
        if (e != HPE_OK) {
            int status = h->limit_status ? h->limit_status : e == HPE_HEADER_OVERFLOW ? 431 : 400;
            h->keep_alive = false;
            char msg[192];
            if (status == 431)
                snprintf(msg, sizeof msg, "request headers above http-header-max-bytes (%lld bytes)",
                         (long long)c->srv->cfg.http_header_max_bytes);
            else if (status == 413)
                snprintf(msg, sizeof msg, "request body above its limit of %zu bytes (http-body-max-bytes, or "
                         "max-bulk-bytes-unauth before a valid token)", h->body_max);
            if (status == 401)
                respond_unauthorized(c);
            else
                respond_text(c, status,
                             h->limit_why                    ? h->limit_why
                             : status == 431 || status == 413 ? msg
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
    l->header_max = (size_t)c->srv->cfg.http_header_max_bytes;
    if (l->shapes == NULL)
        l->shapes = route_shapes_new();
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
    ordo_buf_free(&h->why);
    ordo_buf_free(&h->held_auth);
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
    free(l->shapes);
    l->shapes = NULL;
    l->tcp.data = l;
    uv_close((uv_handle_t *)&l->tcp, on_listener_closed);
}
