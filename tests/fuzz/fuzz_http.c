/*
 * fuzz_http.c -- libFuzzer target for the HTTP request path
 * (net/http.c): bytes read from a connection, through http-parser and
 * http.c's callbacks (limits, headers it keeps, 100-continue), routing
 * (path segments, percent-decoding, query parameters, If-Match, ...) up
 * to the command handed to cmd_dispatch(), and the rewriting of its RESP
 * reply into an HTTP response.
 *
 * The seam is the link: http.c is linked alone, and this file provides
 * what it calls outside itself -- cmd_dispatch() (records the command and
 * writes a canned RESP reply, as a command would), cmd_http_*(), the
 * users' (cmd_acl_*(): the default user and a user "u"), the
 * connection calls of net.c and the dashboard's assets. http.c is not
 * changed for it. A server_t and conn_t are made by hand; the HTTP
 * listener record, private to http.c, is mirrored below (http_conn_init()
 * counts connections in it).
 *
 * Input: byte 0 is the mode: bits 0-3 a chunk size k (0: all at once; the
 * stream then arrives in pieces of k bytes), bit 4 requirepass "pw" (so
 * 401s and the bearer check run), bit 5 small limits (header 256 bytes,
 * body 64, values 32), bits 6-7 shift the choice of canned replies (3:
 * and /healthz finds the server unhealthy);
 * bytes 1.. are what the client sends. Whole, most requests are read by
 * http.c's own reading of the plainest ones (fast_request()); in pieces,
 * every request that does not arrive whole in one piece goes through
 * http-parser, so the check below compares the two readings. After each piece the harness does
 * what net.c does: http_process_input(), then http_before_flush(), then
 * "sends" out (moving it to a transcript, advancing out_consumed).
 *
 * Checked (abort on violation):
 *   - every command dispatched has 1..HTTP_ARGS_MAX arguments, all
 *     readable (hashed);
 *   - everything sent parses as HTTP/1.1 responses (http-parser in
 *     response mode, to the end of the stream): no RESP byte leaves;
 *   - the commands dispatched and the bytes sent are the same whether the
 *     stream arrives whole or in pieces (but for which refusal ends a
 *     stream that ends in one: 400, 413 and 431 may trade places).
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=http).
 */
#include <http_parser.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "fuzz.h"
#include "net/conn.h"
#include "net/http.h"
#include "net/http_assets.h"
#include "server.h"

/* http.c's HTTP_ARGS_MAX: the most arguments a route makes. */
#define ARGS_MAX 12

/* http.c's listener record (private there), mirrored: only nconns,
 * header_max and shapes (http.c's, freed here) are read and written on
 * the paths fuzzed here. */
struct http_listener_s {
    uv_tcp_t tcp;
    size_t nconns;
    size_t header_max;
    void *shapes;
};

/* ---- what http.c calls outside itself ------------------------------------------ */

typedef struct harness_s {
    uint64_t hash;          /* FNV-1a over the transcript */
    unsigned reply_shift;   /* mode bits 6-7 */
    unsigned calls;
    bool unhealthy;
} harness_t;

static harness_t *hs;

static void hash_bytes(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ s[i]) * 0x100000001b3ull;
}

/* Replies a command of the routes could give (RESP3, as for an HTTP
 * connection), one picked per dispatch. */
static const char *const replies[] = {
    "+OK\r\n",
    ":7\r\n",
    ":0\r\n",
    "$5\r\nhello\r\n",
    "_\r\n",
    "*3\r\n$1\r\nv\r\n:3\r\n:5\r\n",
    "-ERR wrong number of arguments\r\n",
    "-CONFLICT 12\r\n",
    "-TIMEOUT message 42 not done within the timeout\r\n",
    "-COMPACTED 3\r\n",
    "-NOAUTH authentication required\r\n",
    "-DEADLETTER moved\r\n",
    "-READONLY the log cannot be written\r\n",
    "-LIMIT too large\r\n",
    "%1\r\n+a\r\n:1\r\n",
};
#define NREPLIES (sizeof replies / sizeof replies[0])

void cmd_dispatch(conn_t *c, const resp_cmd_t *cmd)
{
    CHECK(cmd->argc >= 1 && cmd->argc <= ARGS_MAX);
    uint64_t h0 = 0xcbf29ce484222325ull;
    hash_bytes(&hs->hash, "D", 1);
    for (size_t i = 0; i < cmd->argc; i++) {
        hash_bytes(&hs->hash, &cmd->argv[i].len, sizeof cmd->argv[i].len);
        hash_bytes(&hs->hash, cmd->argv[i].ptr, cmd->argv[i].len);
    }
    hash_bytes(&h0, cmd->argv[0].ptr, cmd->argv[0].len);
    const char *r = replies[(h0 + hs->reply_shift + 7u * hs->calls++) % NREPLIES];
    if (cmd->argc >= 1 && cmd->argv[0].len == 8 && memcmp(cmd->argv[0].ptr, "KV.WATCH", 8) == 0 &&
        (hs->calls % 3) != 0) {
        /* A watch that starts, then an event and a synced marker: the
         * watch layer writes them as SSE, the connection being a stream
         * (c->sse, which http.c sets before it dispatches a watch). */
        CHECK(c->sse);
        ordo_buf_puts(&c->out, ":1\r\n");
        ordo_buf_puts(&c->out, "id: 9\nevent: put\ndata: {\"key\":\"k\",\"value\":\"v\",\"revision\":9}\n\n");
        ordo_buf_puts(&c->out, "id: 9\nevent: synced\ndata: {\"revision\":9}\n\n");
        return;
    }
    ordo_buf_puts(&c->out, r);
}

const char *cmd_http_unhealthy(conn_t *c)
{
    (void)c;
    return hs->unhealthy ? "the log cannot be written" : NULL;
}

void cmd_http_metrics(conn_t *c, ordo_buf_t *out)
{
    (void)c;
    ordo_buf_puts(out, "ordo_up 1\n");
}

void cmd_http_status(conn_t *c, ordo_buf_t *out, uint64_t history_since)
{
    (void)c;
    (void)history_since;
    ordo_buf_puts(out, "{\"ok\":true}\n");
}

/* The state the door reads besides commands, a function of its arguments
 * only (so the answer cannot depend on how the input was split): every
 * queue exists but "nosuchq", every key but "nokey" at revision 7, the
 * current revision 42; JSON recognition and text encoding stand in by
 * size (the response's bytes are what the transcript hashes). */
bool cmd_http_queue_exists(conn_t *c, const char *name, size_t n)
{
    (void)c;
    return n != 7 || memcmp(name, "nosuchq", 7) != 0;
}

bool cmd_http_key_rev(conn_t *c, const char *key, size_t n, uint64_t *rev)
{
    (void)c;
    *rev = 7;
    return n != 5 || memcmp(key, "nokey", 5) != 0;
}

uint64_t cmd_http_rev(conn_t *c)
{
    (void)c;
    return 42;
}

bool cmd_http_is_json(const char *s, size_t n)
{
    return n > 0 && (s[0] == '{' || s[0] == '[');
}

void cmd_http_json_text(ordo_buf_t *b, const char *s, size_t n)
{
    (void)s;
    ordo_buf_printf(b, "\"%zu bytes\"", n);
}

void cmd_http_json_field(ordo_buf_t *b, const char *name, const char *s, size_t n)
{
    ordo_buf_printf(b, "\"%s_len\":%zu", name, n);
    hash_bytes(&hs->hash, s, n);
}

/* Users (cmd_acl.c): the default user is requirepass's (nopass without
 * one); user "u" with password "pw" exists too, so the Basic and Bearer
 * user:password paths run, and may not run INFO (/metrics: 403). */
bool cmd_acl_default_nopass(server_t *s) { return s->cfg.requirepass[0] == '\0'; }

void cmd_acl_set_user(conn_t *c, const char *name, size_t nlen)
{
    free(c->user);
    c->user = NULL;
    if (!(nlen == 7 && memcmp(name, "default", 7) == 0)) {
        c->user = malloc(nlen + 1);
        CHECK(c->user != NULL);
        memcpy(c->user, name, nlen);
        c->user[nlen] = '\0';
    }
    hash_bytes(&hs->hash, name, nlen);
}

/* The users never change here. */
uint64_t cmd_acl_users_gen(server_t *s)
{
    (void)s;
    return 1;
}

bool cmd_acl_http_login(conn_t *c, const char *user, size_t ulen, const char *pass, size_t plen)
{
    const char *want = c->srv->cfg.requirepass;
    bool ok;
    if (user == NULL)
        ok = want[0] == '\0' || (plen == strlen(want) && memcmp(pass, want, plen) == 0);
    else
        ok = ulen == 1 && user[0] == 'u' && plen == 2 && memcmp(pass, "pw", 2) == 0;
    if (ok)
        cmd_acl_set_user(c, user ? user : "default", user ? ulen : 7);
    return ok;
}

bool cmd_acl_route_allowed(conn_t *c, const char *cmd)
{
    (void)cmd;
    return c->user == NULL;
}

void conn_flush(conn_t *c) { (void)c; }
void conn_close(conn_t *c) { c->closing = true; }

static const unsigned char asset_index[] = "<html>ordo</html>";
const http_asset_t http_assets[] = {
    {"/", "text/html; charset=utf-8", asset_index, sizeof asset_index - 1},
};
const size_t http_assets_count = 1;

/* ---- one connection ---------------------------------------------------------------- */

/* Where the responses of a stream start, and the last one's status; the
 * methods of the requests they answer, in order (a response to HEAD has
 * the GET's Content-Length and no body). */
#define FUZZ_REQUESTS_MAX 256
typedef struct responses_s {
    const char *base;
    size_t last_at;
    unsigned last_status;
    const unsigned char *methods;
    size_t nmethods, answered;
} responses_t;

/* The requests' methods as a parser reading the input whole sees them. */
typedef struct {
    unsigned char m[FUZZ_REQUESTS_MAX];
    size_t n;
} methods_t;

static int on_request_headers(http_parser *p)
{
    methods_t *m = p->data;
    if (m->n < FUZZ_REQUESTS_MAX)
        m->m[m->n++] = (unsigned char)p->method;
    return 0;
}

/* http.c refuses a header name that is not a token (its token_chars(),
 * mirrored) before the request's headers are complete, where http-parser
 * takes it: such a request is no HEAD the response must answer without
 * a body, and nothing after it is read. */
static int on_request_field(http_parser *p, const char *at, size_t n)
{
    (void)p;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)at[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL)))
            return -1;
    }
    return 0;
}

static void request_methods(const uint8_t *data, size_t size, methods_t *m)
{
    http_parser p;
    http_parser_settings settings;
    memset(&settings, 0, sizeof settings);
    settings.on_headers_complete = on_request_headers;
    settings.on_header_field = on_request_field;
    http_parser_init(&p, HTTP_REQUEST);
    m->n = 0;
    p.data = m;
    http_parser_execute(&p, &settings, (const char *)data, size);
}

/* A response's headers are complete: one to a HEAD request has no body
 * (return 1: skip it); an interim 1xx answers no request by itself. */
static int on_response_headers(http_parser *p)
{
    responses_t *r = p->data;
    if (p->status_code >= 100 && p->status_code < 200)
        return 0;
    size_t i = r->answered++;
    return i < r->nmethods && r->methods[i] == HTTP_HEAD ? 1 : 0;
}

static int on_status(http_parser *p, const char *at, size_t n)
{
    (void)n;
    responses_t *r = p->data;
    /* "HTTP/1.1 ddd " comes before the reason: 13 bytes. */
    CHECK(at - r->base >= 13 && memcmp(at - 13, "HTTP/1.1 ", 9) == 0);
    r->last_at = (size_t)(at - 13 - r->base);
    r->last_status = p->status_code;
    return 0;
}

/* Check that sent is a stream of HTTP responses; *r says where the last
 * one starts. */
static void check_responses(const ordo_buf_t *sent, responses_t *r)
{
    http_parser p;
    http_parser_settings settings;
    memset(&settings, 0, sizeof settings);
    settings.on_status = on_status;
    settings.on_headers_complete = on_response_headers;
    http_parser_init(&p, HTTP_RESPONSE);
    const unsigned char *methods = r->methods;
    size_t nmethods = r->nmethods;
    *r = (responses_t){.base = sent->data, .methods = methods, .nmethods = nmethods};
    p.data = r;
    size_t n = http_parser_execute(&p, &settings, sent->data ? sent->data : "", sent->len);
    if (HTTP_PARSER_ERRNO(&p) == HPE_OK)
        http_parser_execute(&p, &settings, NULL, 0); /* the end of the stream */
    if (n != sent->len || HTTP_PARSER_ERRNO(&p) != HPE_OK) {
        fprintf(stderr, "fuzz_http: output is not HTTP (%s at byte %zu of %zu): %.*s\n",
                http_errno_name(HTTP_PARSER_ERRNO(&p)), n, sent->len, (int)(sent->len < 2000 ? sent->len : 2000),
                sent->data);
        abort();
    }
}

static uint64_t run(const uint8_t *data, size_t size, size_t step, unsigned mode)
{
    harness_t h = {.hash = 0xcbf29ce484222325ull, .reply_shift = mode >> 6, .unhealthy = (mode >> 6) == 3};
    hs = &h;
    server_t *s = calloc(1, sizeof *s);
    conn_t *c = calloc(1, sizeof *c);
    struct http_listener_s *l = calloc(1, sizeof *l);
    s->net.http = l;
    s->now_ms = 1700000000000ull;
    s->cfg.http_max_clients = 8;
    bool small = (mode & 32) != 0;
    s->cfg.http_header_max_bytes = small ? 256 : 8192;
    s->cfg.http_body_max_bytes = small ? 64 : 1 << 20;
    s->cfg.max_value_bytes = small ? 32 : 1 << 20;
    if (mode & 16)
        strcpy(s->cfg.requirepass, "pw");
    c->srv = s;
    c->id = 1;
    CHECK(http_conn_init(c) == 0);
    ordo_buf_t sent = ORDO_BUF_INIT;
    for (size_t at = 0; at < size && !c->closing && !c->close_after_write;) {
        size_t n = size - at < step ? size - at : step;
        ordo_buf_append(&c->in, data + at, n);
        at += n;
        http_process_input(c);
        http_before_flush(c);
        ordo_buf_append(&sent, c->out.data ? c->out.data : "", c->out.len);
        c->out_consumed += c->out.len;
        c->out.len = 0;
    }
    /* A request refused by the parser or a limit ends the stream; which
     * refusal (400, 413, 431) can depend on how the bytes arrived (a size
     * limit may be reached before a bad byte further on is seen), so the
     * transcript keeps only that there was one. */
    methods_t m;
    request_methods(data, size, &m);
    responses_t r = {.methods = m.m, .nmethods = m.n};
    check_responses(&sent, &r);
    size_t keep = sent.len;
    if (c->close_after_write && (r.last_status == 400 || r.last_status == 413 || r.last_status == 431)) {
        keep = r.last_at;
        hash_bytes(&h.hash, "refused", 7);
    }
    hash_bytes(&h.hash, sent.data ? sent.data : "", keep);
    http_conn_free(c);
    CHECK(l->nconns == 0);
    free(c->user);
    ordo_buf_free(&sent);
    ordo_buf_free(&c->in);
    ordo_buf_free(&c->out);
    free(c);
    free(l->shapes);
    free(l);
    free(s);
    hs = NULL;
    return h.hash;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned mode = data[0];
    size_t step = mode & 15;
    uint64_t whole = run(data + 1, size - 1, size, mode);
    if (step != 0)
        CHECK(run(data + 1, size - 1, step, mode) == whole);
    return 0;
}

/* Seeds: requests of every route, pipelined, with the headers http.c
 * reads; byte 0 as above. */
#define SEED(name, lit) fuzz_seed(name, lit, sizeof lit - 1)

void fuzz_seeds(void)
{
    SEED("kv-get", "\x00GET /v1/kv/a%2Fb/c HTTP/1.1\r\nHost: x\r\n\r\n");
    SEED("kv-put", "\x03PUT /v1/kv/key HTTP/1.1\r\nIf-Match: \"12\"\r\nContent-Length: 5\r\n\r\nvalue"
                   "DELETE /v1/kv/key HTTP/1.1\r\nIf-None-Match: *\r\n\r\n");
    SEED("push", "\x05POST /v1/queues/jobs/keys/k1 HTTP/1.1\r\nIdempotency-Key: abc\r\n"
                 "Content-Length: 3\r\n\r\npay");
    SEED("call", "\x41POST /v1/queues/jobs/keys/k1/call?timeout=500 HTTP/1.1\r\nExpect: 100-continue\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    SEED("result", "\x82GET /v1/queues/jobs/results/42?wait=100 HTTP/1.1\r\n\r\n"
                   "GET /v1/queues/jobs/results/43 HTTP/1.0\r\n\r\n");
    SEED("watch", "\x07GET /v1/watch?prefix=a%20b&x=1 HTTP/1.1\r\nLast-Event-ID: 7\r\n\r\n");
    SEED("auth", "\x11GET /metrics HTTP/1.1\r\nAuthorization: Bearer pw\r\n\r\n"
                 "GET /v1/status HTTP/1.1\r\nauthorization: bearer nope\r\n\r\n");
    SEED("users", "\x11GET /v1/kv/a HTTP/1.1\r\nAuthorization: Basic dTpwdw==\r\n\r\n"
                  "GET /metrics HTTP/1.1\r\nAuthorization: Bearer u:pw\r\n\r\n"
                  "GET /v1/kv/b HTTP/1.1\r\nAuthorization: Basic !!!\r\n\r\n");
    SEED("misc", "\x02GET /healthz HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\nHEAD /nowhere HTTP/1.1\r\n\r\n"
                 "GET /v1/kv/%zz HTTP/1.1\r\nConnection: close\r\n\r\n");
    SEED("limits", "\x21POST /v1/queues/q/keys/k HTTP/1.1\r\nContent-Length: 100\r\n\r\n"
                   "0123456789012345678901234567890123456789012345678901234567890123456789");
    SEED("garbage", "\x01GET\x00 / HTTP/9.9\r\n\r\n");
    /* A bug this target found: the path's segments, 64 bytes decoded
     * ("v1", "queues", 48 bytes of queue, "results", "7"), fill the
     * decoding buffer, so decoding ?wait= moved it under the arguments
     * that pointed into it (a use after free). */
    /* Another: two spaces before the target. The parser routed it as
     * /v1, is_v1() (which reads the request line itself) said no, and an
     * error reply to the push tripped respond_error()'s assertion. */
    SEED("regress-two-spaces", "!POST  /v1/queues/q/keys/k HTTP/1.1\r\nContent-Legth: 100\r\n\r\n"
                               "0123456789012345678901234567890123456789012345678901234567890123456789");
    SEED("regress-results-wait", "\x00GET /v1/queues/qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq/results/7?wait=15000 "
                                 "HTTP/1.1\r\n\r\n");
}
