/*
 * hiredis_test.c -- a real C client (hiredis, unmodified) against ordod:
 * plain keys, versioned keys, a queue cycle and a transaction that writes
 * and acks in one EXEC, then one whose stale token aborts it.
 *
 * usage: hiredis_test port. Exits 0 if every reply is as expected, else
 * prints the first mismatch and exits 1. Run by
 * tests/integration/test_hiredis.py.
 */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static redisContext *ctx;

static void fail(const char *what, const redisReply *r)
{
    fprintf(stderr, "hiredis_test: %s: reply type %d", what, r ? r->type : -1);
    if (r && (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING))
        fprintf(stderr, " '%s'", r->str);
    if (r && r->type == REDIS_REPLY_INTEGER)
        fprintf(stderr, " %lld", r->integer);
    fprintf(stderr, "%s\n", ctx->err ? ctx->errstr : "");
    exit(1);
}

/* Send a command; the reply is the caller's to free. */
static redisReply *cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    if (r == NULL)
        fail("no reply (connection lost)", NULL);
    return r;
}

static void expect_status(redisReply *r, const char *status, const char *what)
{
    if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, status) != 0)
        fail(what, r);
    freeReplyObject(r);
}

static long long expect_int(redisReply *r, const char *what)
{
    if (r->type != REDIS_REPLY_INTEGER)
        fail(what, r);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static void expect_str(redisReply *r, const char *s, const char *what)
{
    if (r->type != REDIS_REPLY_STRING || strcmp(r->str, s) != 0)
        fail(what, r);
    freeReplyObject(r);
}

/* Pull one message of queue q: its id and token. */
static void pull(const char *q, long long *id, long long *token)
{
    redisReply *r = cmd("Q.PULL %s", q);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 || r->element[0]->type != REDIS_REPLY_ARRAY ||
        r->element[0]->elements != 5)
        fail("Q.PULL", r);
    *id = r->element[0]->element[0]->integer;
    *token = r->element[0]->element[4]->integer;
    freeReplyObject(r);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hiredis_test port\n");
        return 2;
    }
    struct timeval tv = {20, 0};
    ctx = redisConnectWithTimeout("127.0.0.1", atoi(argv[1]), tv);
    if (ctx == NULL || ctx->err) {
        fprintf(stderr, "hiredis_test: connect: %s\n", ctx ? ctx->errstr : "out of memory");
        return 1;
    }
    redisSetTimeout(ctx, tv);

    expect_status(cmd("SET %s %b", "k", "v\0w", (size_t)3), "OK", "SET");
    redisReply *r = cmd("GET k");
    if (r->type != REDIS_REPLY_STRING || r->len != 3 || memcmp(r->str, "v\0w", 3) != 0)
        fail("GET binary", r);
    freeReplyObject(r);
    long long rev = expect_int(cmd("KV.PUT vk one"), "KV.PUT");
    r = cmd("KV.PUT vk two IFREV %lld", rev + 100);
    if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "CONFLICT", 8) != 0)
        fail("KV.PUT IFREV conflict", r);
    freeReplyObject(r);

    long long id, token;
    expect_int(cmd("Q.PUSH q cart:1 add"), "Q.PUSH");
    pull("q", &id, &token);
    if (expect_int(cmd("Q.ACK q %lld %lld", id, token), "Q.ACK") != 1)
        fail("Q.ACK answered 0", NULL);

    /* The recipe: state and ack in one transaction. */
    expect_int(cmd("Q.PUSH q cart:1 add"), "Q.PUSH 2");
    pull("q", &id, &token);
    expect_status(cmd("MULTI"), "OK", "MULTI");
    expect_status(cmd("SET state:cart:1 %s", "one item"), "QUEUED", "queue SET");
    expect_status(cmd("INCR count:cart:1"), "QUEUED", "queue INCR");
    expect_status(cmd("Q.ACK q %lld %lld", id, token), "QUEUED", "queue Q.ACK");
    r = cmd("EXEC");
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || r->element[1]->integer != 1 ||
        r->element[2]->integer != 1)
        fail("EXEC", r);
    freeReplyObject(r);
    expect_str(cmd("GET state:cart:1"), "one item", "GET after EXEC");

    /* The same ack again: its token is stale, nothing applies. */
    expect_status(cmd("MULTI"), "OK", "MULTI 2");
    expect_status(cmd("INCR count:cart:1"), "QUEUED", "queue INCR 2");
    expect_status(cmd("Q.ACK q %lld %lld", id, token), "QUEUED", "queue stale Q.ACK");
    r = cmd("EXEC");
    if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "CONFLICT 2 ", 11) != 0)
        fail("EXEC with a stale token", r);
    freeReplyObject(r);
    expect_str(cmd("GET count:cart:1"), "1", "count after the refused EXEC");

    redisFree(ctx);
    printf("hiredis_test: ok\n");
    return 0;
}
