/*
 * fuzz_cresp.c -- libFuzzer target for the client's RESP2/RESP3 reply
 * parser (client/cresp.c: cresp_parse()).
 *
 * Input: byte 0 picks how the rest arrives: bits 0-3 a chunk size k (0:
 * all at once), bit 4 chunks of pseudo-random sizes 1..k instead of
 * exactly k; bytes 1.. are the server's stream. The target plays the
 * client's connection: append a chunk to the unread bytes, parse until
 * CRESP_NEED_MORE, drop what was used, repeat; stop at the first protocol
 * error. Each parse sees a fresh heap copy of exactly the unread bytes,
 * so ASan catches any read past them.
 *
 * Checked on every call (abort on violation):
 *   - *used <= len, and a finished reply used at least one byte;
 *   - a reply is a well-formed tree: strings NUL-terminated at len,
 *     aggregates holding n children, a map an even number, at most
 *     CRESP_DEPTH_MAX + 1 levels;
 *   - round trip: a reply encoded again (each type in its RESP3 form)
 *     parses, whole, into the same tree;
 *   - an error has a short static message and leaves the parser empty;
 *   - the transcript (a hash of the replies and the error) is the same
 *     whether the stream arrives whole or in chunks.
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=cresp).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cresp.h"
#include "fuzz.h"

static void hash_bytes(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ s[i]) * 0x100000001b3ull;
}

static bool is_string(ordo_reply_type_t t)
{
    return t == ORDO_REPLY_STRING || t == ORDO_REPLY_STATUS || t == ORDO_REPLY_ERROR || t == ORDO_REPLY_DOUBLE ||
           t == ORDO_REPLY_BIGNUM;
}

static bool is_aggregate(ordo_reply_type_t t)
{
    return t == ORDO_REPLY_ARRAY || t == ORDO_REPLY_MAP || t == ORDO_REPLY_PUSH;
}

/* Check r's shape; fold it into *h. */
static void check_reply(const ordo_reply_t *r, int depth, uint64_t *h)
{
    CHECK(r != NULL && depth <= CRESP_DEPTH_MAX + 1);
    hash_bytes(h, &r->type, sizeof r->type);
    if (is_string(r->type)) {
        CHECK(r->str != NULL && r->str[r->len] == '\0' && r->n == 0);
        hash_bytes(h, &r->len, sizeof r->len);
        hash_bytes(h, r->str, r->len);
    } else if (is_aggregate(r->type)) {
        CHECK(r->str == NULL && (r->n == 0 || r->elem != NULL));
        CHECK(r->type != ORDO_REPLY_MAP || r->n % 2 == 0);
        hash_bytes(h, &r->n, sizeof r->n);
        for (size_t i = 0; i < r->n; i++)
            check_reply(r->elem[i], depth + 1, h);
    } else {
        CHECK(r->type == ORDO_REPLY_INTEGER || r->type == ORDO_REPLY_NIL);
        CHECK(r->str == NULL && r->n == 0);
        if (r->type == ORDO_REPLY_INTEGER)
            hash_bytes(h, &r->integer, sizeof r->integer);
    }
}

/* r in RESP3, each type in the form that parses back to it. */
static void encode(const ordo_reply_t *r, cresp_buf_t *b)
{
    char head[64];
    int k;
    switch (r->type) {
    case ORDO_REPLY_STRING: case ORDO_REPLY_ERROR:
        k = snprintf(head, sizeof head, "%c%zu\r\n", r->type == ORDO_REPLY_STRING ? '$' : '!', r->len);
        CHECK(cresp_buf_append(b, head, (size_t)k) == 0 && cresp_buf_append(b, r->str, r->len) == 0 &&
              cresp_buf_append(b, "\r\n", 2) == 0);
        return;
    case ORDO_REPLY_STATUS: case ORDO_REPLY_DOUBLE: case ORDO_REPLY_BIGNUM:
        head[0] = r->type == ORDO_REPLY_STATUS ? '+' : r->type == ORDO_REPLY_DOUBLE ? ',' : '(';
        CHECK(cresp_buf_append(b, head, 1) == 0 && cresp_buf_append(b, r->str, r->len) == 0 &&
              cresp_buf_append(b, "\r\n", 2) == 0);
        return;
    case ORDO_REPLY_INTEGER:
        k = snprintf(head, sizeof head, ":%lld\r\n", (long long)r->integer);
        CHECK(cresp_buf_append(b, head, (size_t)k) == 0);
        return;
    case ORDO_REPLY_NIL:
        CHECK(cresp_buf_append(b, "_\r\n", 3) == 0);
        return;
    default:
        k = snprintf(head, sizeof head, "%c%zu\r\n",
                     r->type == ORDO_REPLY_MAP ? '%' : r->type == ORDO_REPLY_PUSH ? '>' : '*',
                     r->type == ORDO_REPLY_MAP ? r->n / 2 : r->n);
        CHECK(cresp_buf_append(b, head, (size_t)k) == 0);
        for (size_t i = 0; i < r->n; i++)
            encode(r->elem[i], b);
    }
}

static void check_round_trip(const ordo_reply_t *r, uint64_t want)
{
    cresp_buf_t b = {0};
    encode(r, &b);
    cresp_parser_t p;
    cresp_init(&p);
    size_t used = 0;
    ordo_reply_t *again = NULL;
    CHECK(cresp_parse(&p, b.data, b.len, &used, &again) == CRESP_DONE && used == b.len);
    uint64_t h = 0xcbf29ce484222325ull;
    check_reply(again, 0, &h);
    CHECK(h == want);
    ordo_reply_free(again);
    cresp_reset(&p);
    cresp_buf_free(&b);
}

typedef struct conn_s {
    cresp_buf_t in;
    cresp_parser_t p;
    uint64_t hash;
    bool closed;
} conn_t;

static void conn_drain(conn_t *c)
{
    while (!c->closed) {
        size_t len = c->in.len;
        char *in = malloc(len ? len : 1);
        if (len > 0)
            memcpy(in, c->in.data, len);
        size_t used = SIZE_MAX;
        ordo_reply_t *r = NULL;
        int rc = cresp_parse(&c->p, in, len, &used, &r);
        free(in);
        CHECK(used <= len);
        cresp_buf_consume(&c->in, used);
        if (rc == CRESP_NEED_MORE) {
            CHECK(r == NULL);
            return;
        }
        if (rc == CRESP_ERROR) {
            CHECK(c->p.error != NULL && strlen(c->p.error) < 64 && c->p.depth == 0 && r == NULL);
            hash_bytes(&c->hash, c->p.error, strlen(c->p.error));
            c->closed = true;
            return;
        }
        CHECK(rc == CRESP_DONE && used > 0 && c->p.depth == 0);
        uint64_t h = 0xcbf29ce484222325ull;
        check_reply(r, 0, &h);
        check_round_trip(r, h);
        hash_bytes(&c->hash, &h, sizeof h);
        ordo_reply_free(r);
    }
}

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uint64_t run(const uint8_t *data, size_t size, size_t step, bool vary)
{
    conn_t c = {.hash = 0xcbf29ce484222325ull};
    cresp_init(&c.p);
    uint64_t rnd = 0x9e3779b97f4a7c15ull ^ size;
    for (size_t at = 0; at < size && !c.closed;) {
        size_t want = vary ? 1 + (size_t)(next_rand(&rnd) % step) : step;
        size_t n = size - at < want ? size - at : want;
        CHECK(cresp_buf_append(&c.in, data + at, n) == 0);
        at += n;
        conn_drain(&c);
    }
    cresp_reset(&c.p);
    cresp_buf_free(&c.in);
    return c.hash;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t step = data[0] & 15;
    bool vary = (data[0] >> 4) & 1;
    uint64_t whole = run(data + 1, size - 1, size, false);
    if (step != 0)
        CHECK(run(data + 1, size - 1, step, vary) == whole);
    return 0;
}

/* Seeds: replies ordod sends (RESP2 and RESP3), pipelined; byte 0 as
 * above. */
#define SEED(name, lit) fuzz_seed(name, lit, sizeof lit - 1)

void fuzz_seeds(void)
{
    SEED("simple", "\x00+OK\r\n-ERR unknown command\r\n:42\r\n:-7\r\n$5\r\nhello\r\n$-1\r\n*-1\r\n");
    SEED("resp3", "\x03_\r\n#t\r\n#f\r\n,3.25\r\n,inf\r\n(12345678901234567890\r\n=8\r\ntxt:abcd\r\n"
                  "!9\r\nERR boom!\r\n");
    SEED("array", "\x11*3\r\n$1\r\na\r\n:1\r\n*2\r\n+x\r\n_\r\n~2\r\n:1\r\n:2\r\n");
    SEED("map", "\x05%2\r\n+key\r\n$3\r\nval\r\n+n\r\n:5\r\n|1\r\n+ttl\r\n:3\r\n$2\r\nok\r\n");
    SEED("push", "\x02>4\r\n$5\r\nwatch\r\n:1\r\n:9\r\n*2\r\n$3\r\nput\r\n$1\r\nk\r\n");
    SEED("qpull", "\x17*1\r\n*5\r\n:10\r\n$2\r\nk1\r\n$7\r\npayload\r\n:1\r\n:12\r\n");
    SEED("empty", "\x01*0\r\n%0\r\n$0\r\n\r\n");
}
