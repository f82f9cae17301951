/*
 * fuzz_resp.c -- libFuzzer target for the RESP request parser.
 *
 * Input: byte 0 picks how the rest arrives: bits 0-3 a chunk size k (0: all
 * at once), bit 4 chunks of pseudo-random sizes 1..k instead of exactly k,
 * bit 5 skip parse calls while the input is shorter than the last
 * need_bytes hint (as net.c does); bytes 1.. are the stream. The target
 * plays a connection: append a chunk, parse until RESP_NEED_MORE, consume,
 * repeat; stop at the first protocol error. Each parse sees a fresh heap
 * copy of exactly the unconsumed bytes, so ASan catches any read past
 * in[len), and the input moves on every call, as the resumable parser's
 * contract allows (same command start, offsets kept, pointers not).
 *
 * Checked on every call (abort on violation):
 *   - consumed <= len; NEED_MORE consumes nothing and need_bytes > len;
 *   - a command has 1 <= argc <= args_max, each argument <= bulk_max bytes
 *     and inside in[0..consumed) or cmd->argbuf;
 *   - an error has a short static message;
 *   - the transcript (a hash of commands, empties and the error) is the
 *     same whether the stream arrives whole or in chunks;
 *   - the parser resumes rather than re-scans: the bytes it examined
 *     (cmd.scanned_bytes) stay within 2 per input byte (an inline line is
 *     searched, then split; a multibulk command's headers may be read by
 *     the fast path once before the general parser) plus HEADER_SCAN_MAX
 *     per call (a header cut short is re-read).
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=resp).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "net/resp.h"

/* Small limits so the fuzzer reaches every limit branch quickly. */
static const resp_limits_t limits = {.args_max = 8, .bulk_max = 64, .inline_max = 128};

/* A header cut short (type, '-', 19 digits, CR) is re-read on each call. */
#define HEADER_SCAN_MAX 22

typedef struct conn_s {
    ordo_buf_t in;
    resp_cmd_t cmd;
    uint64_t hash;      /* FNV-1a over the transcript */
    int closed;
    int honor_need;     /* skip calls below the need_bytes hint */
    size_t need;        /* last hint */
    uint64_t calls;     /* resp_parse calls */
    uint64_t fed;       /* bytes appended */
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
        if (c->honor_need && len < c->need)
            return;
        c->calls++;
        char *in = malloc(len ? len : 1);
        if (len > 0)
            memcpy(in, c->in.data, len);
        size_t consumed = SIZE_MAX, need = 0;
        const char *err = NULL;
        int s = resp_parse(in, len, &limits, &c->cmd, &consumed, &need, &err);
        CHECK(consumed <= len);
        CHECK(c->cmd.scanned_bytes <= 2 * c->fed + HEADER_SCAN_MAX * c->calls);
        if (s == RESP_NEED_MORE) {
            CHECK(consumed == 0 && need > len);
            CHECK(c->cmd.argc == 0);
            c->need = need;
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
        CHECK(c->cmd.mb_count == 0 && c->cmd.inline_scanned == 0); /* progress reset */
        c->need = 0;
        if (s != RESP_PROTO_ERROR)
            ordo_buf_consume(&c->in, consumed);
    }
}

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Feed data in chunks of step bytes (of 1..step bytes if vary). */
static uint64_t run(const uint8_t *data, size_t size, size_t step, int vary, int honor_need)
{
    conn_t c = {ORDO_BUF_INIT, {0}, 0xcbf29ce484222325ull, 0, honor_need, 0, 0, 0};
    uint64_t rnd = 0x9e3779b97f4a7c15ull ^ size;
    for (size_t at = 0; at < size && !c.closed;) {
        size_t want = vary ? 1 + (size_t)(next_rand(&rnd) % step) : step;
        size_t n = size - at < want ? size - at : want;
        ordo_buf_append(&c.in, data + at, n);
        c.fed += n;
        at += n;
        conn_drain(&c);
    }
    /* The end of the stream: one more call whatever the hint (a hint only
     * says when progress is possible; an early error is found either way). */
    c.honor_need = 0;
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
    int vary = (data[0] >> 4) & 1;
    int honor_need = (data[0] >> 5) & 1;
    data++;
    size--;
    uint64_t whole = run(data, size, size ? size : 1, 0, 0);
    if (step != 0)
        CHECK(run(data, size, step, vary, honor_need) == whole);
    return 0;
}

/* Seeds: byte 0 selects how the stream is chunked (see above), then the
 * stream. */
#define SEED(name, lit) fuzz_seed(name, lit, sizeof lit - 1)

void fuzz_seeds(void)
{
    SEED("ping", "\x00*1\r\n$4\r\nPING\r\n");
    SEED("set", "\x03*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n");
    SEED("pipeline", "\x01*2\r\n$3\r\nGET\r\n$1\r\na\r\n*0\r\n*-1\r\nPING\r\n\r\n");
    SEED("inline", "\x05set k \"a b\\x41\\n\" 'it\\'s'\r\n");
    SEED("binary", "\x02*1\r\n$5\r\na\x00\r\nb\r\n");
    SEED("error", "\x00*1\r\n*1\r\n$1\r\na\r\n");
    SEED("trickle", "\x01*8\r\n$1\r\na\r\n$1\r\nb\r\n$0\r\n\r\n$2\r\ncd\r\n$1\r\ne\r\n$1\r\nf\r\n"
                    "$1\r\ng\r\n$1\r\nh\r\n");
    SEED("varied", "\x37*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\nPING\r\n*1\r\n$4\r\nPING\r\n");
}
