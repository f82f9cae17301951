/*
 * fuzz_resp.c -- libFuzzer target for the RESP request parser.
 *
 * Input: byte 0 picks how the rest arrives (0: all at once, k: in chunks of
 * k bytes); bytes 1.. are the stream. The target plays a connection:
 * append a chunk, parse until RESP_NEED_MORE, consume, repeat; stop at the
 * first protocol error. Each parse sees a heap copy of exactly the
 * unconsumed bytes, so ASan catches any read past in[len).
 *
 * Checked on every call (abort on violation):
 *   - consumed <= len; NEED_MORE consumes nothing and need_bytes > len;
 *   - a command has 1 <= argc <= args_max, each argument <= bulk_max bytes
 *     and inside in[0..consumed) or cmd->argbuf;
 *   - an error has a short static message;
 *   - the transcript (a hash of commands, empties and the error) is the
 *     same whether the stream arrives whole or in chunks.
 *
 * Build and run: scripts/fuzz.sh [seconds].
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "fuzz_resp: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                        \
        }                                                                   \
    } while (0)

/* Small limits so the fuzzer reaches every limit branch quickly. */
static const resp_limits_t limits = {.args_max = 8, .bulk_max = 64, .inline_max = 128};

typedef struct conn_s {
    ordo_buf_t in;
    resp_cmd_t cmd;
    uint64_t hash;      /* FNV-1a over the transcript */
    int closed;
} conn_t;

static void hash_bytes(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        *h ^= s[i];
        *h *= 0x100000001b3ull;
    }
}

static int within(const char *p, size_t n, const char *base, size_t base_len)
{
    return base != NULL && p >= base && n <= base_len && p - base <= (ptrdiff_t)(base_len - n);
}

static void check_command(conn_t *c, const char *in, size_t consumed)
{
    const resp_cmd_t *cmd = &c->cmd;
    CHECK(cmd->argc >= 1 && cmd->argc <= limits.args_max);
    CHECK(cmd->argc <= cmd->argv_cap);
    hash_bytes(&c->hash, "C", 1);
    for (size_t i = 0; i < cmd->argc; i++) {
        const resp_arg_t *a = &cmd->argv[i];
        CHECK(a->len <= limits.bulk_max);
        CHECK(within(a->ptr, a->len, in, consumed) ||
              within(a->ptr, a->len, cmd->argbuf.data, cmd->argbuf.len));
        hash_bytes(&c->hash, &a->len, sizeof a->len);
        hash_bytes(&c->hash, a->ptr, a->len);
    }
}

/* Parse everything parseable in c->in; returns when more bytes are needed
 * or the connection is closed by an error. */
static void conn_drain(conn_t *c)
{
    while (!c->closed) {
        size_t len = c->in.len;
        char *in = malloc(len ? len : 1);
        if (len > 0)
            memcpy(in, c->in.data, len);
        size_t consumed = SIZE_MAX, need = 0;
        const char *err = NULL;
        int s = resp_parse(in, len, &limits, &c->cmd, &consumed, &need, &err);
        CHECK(consumed <= len);
        if (s == RESP_NEED_MORE) {
            CHECK(consumed == 0 && need > len);
        } else if (s == RESP_PROTO_ERROR) {
            CHECK(err != NULL && strlen(err) < 64);
            hash_bytes(&c->hash, err, strlen(err));
            c->closed = 1;
        } else if (s == RESP_EMPTY) {
            CHECK(consumed > 0);
            hash_bytes(&c->hash, "E", 1);
        } else {
            CHECK(s == RESP_COMMAND && consumed > 0);
            check_command(c, in, consumed);
        }
        free(in);
        if (s == RESP_NEED_MORE)
            return;
        if (s != RESP_PROTO_ERROR)
            ordo_buf_consume(&c->in, consumed);
    }
}

static uint64_t run(const uint8_t *data, size_t size, size_t step)
{
    conn_t c = {ORDO_BUF_INIT, {0}, 0xcbf29ce484222325ull, 0};
    for (size_t at = 0; at < size && !c.closed;) {
        size_t n = size - at < step ? size - at : step;
        ordo_buf_append(&c.in, data + at, n);
        at += n;
        conn_drain(&c);
    }
    if (size == 0)
        conn_drain(&c);
    ordo_buf_free(&c.in);
    resp_cmd_free(&c.cmd);
    return c.hash;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t step = data[0] & 15;
    data++;
    size--;
    uint64_t whole = run(data, size, size ? size : 1);
    if (step != 0)
        CHECK(run(data, size, step) == whole);
    return 0;
}
