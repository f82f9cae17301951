/*
 * test_client_spill.c -- the producer's spill file format (src/client/
 * spill.c): records framed with a length and a CRC are read back in
 * order; a torn tail (every possible cut of the last record) or a flipped
 * byte ends the valid prefix exactly at the last whole record, so recovery
 * never takes half a message and never loses a whole one before it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spill.h"

typedef struct seen {
    int n;
    uint64_t seqs[16];
    char payloads[16][16];
} seen_t;

static void on_msg(void *arg, const spill_msg_t *m)
{
    seen_t *s = arg;
    s->seqs[s->n] = m->seq;
    snprintf(s->payloads[s->n], sizeof s->payloads[0], "%.*s", (int)m->payload_len, m->payload);
    s->n++;
}

static size_t put_rec(char *out, const char *body, size_t n)
{
    return spill_frame(out, body, (uint32_t)n);
}

static size_t msg_body(char *b, uint64_t seq, const char *key, const char *payload)
{
    uint32_t kl = (uint32_t)strlen(key), pl = (uint32_t)strlen(payload);
    b[0] = 'M';
    for (int i = 0; i < 8; i++)
        b[1 + i] = (char)(seq >> (8 * i));
    for (int i = 0; i < 4; i++) {
        b[9 + i] = (char)(kl >> (8 * i));
        b[13 + i] = (char)(pl >> (8 * i));
    }
    memcpy(b + 17, key, kl);
    memcpy(b + 17 + kl, payload, pl);
    return 17 + kl + pl;
}

/* A file: magic, header (id "p1", queue "q"), M1, M2, A1, M3. */
static size_t build(char *f, size_t *ends)
{
    char body[128];
    size_t len = 0, n;
    memcpy(f, SPILL_MAGIC, SPILL_MAGIC_LEN);
    len = SPILL_MAGIC_LEN;
    const char hdr[] = { 'H', 2, 0, 'p', '1', 1, 0, 'q' };
    len += put_rec(f + len, hdr, sizeof hdr);
    ends[0] = len;
    n = msg_body(body, 1, "k", "one");
    len += put_rec(f + len, body, n);
    ends[1] = len;
    n = msg_body(body, 2, "k", "two");
    len += put_rec(f + len, body, n);
    ends[2] = len;
    char ack[9] = { 'A', 1, 0, 0, 0, 0, 0, 0, 0 };
    len += put_rec(f + len, ack, sizeof ack);
    ends[3] = len;
    n = msg_body(body, 3, "j", "three");
    len += put_rec(f + len, body, n);
    ends[4] = len;
    return len;
}

static void test_whole_file(void **st)
{
    (void)st;
    char f[1024];
    size_t ends[5];
    size_t len = build(f, ends);
    seen_t s = { 0 };
    size_t valid, idl, ql;
    uint64_t acked;
    const char *id, *q;
    assert_int_equal(spill_scan(f, len, &valid, &acked, &id, &idl, &q, &ql, on_msg, &s), 0);
    assert_int_equal(valid, len);
    assert_int_equal(acked, 1);
    assert_int_equal(idl, 2);
    assert_memory_equal(id, "p1", 2);
    assert_int_equal(ql, 1);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.payloads[2], "three");
    assert_int_equal(s.seqs[2], 3);
}

static void test_every_torn_tail(void **st)
{
    (void)st;
    char f[1024];
    size_t ends[5];
    size_t len = build(f, ends);
    for (size_t cut = ends[3]; cut < len; cut++) {
        seen_t s = { 0 };
        size_t valid, idl, ql;
        uint64_t acked;
        const char *id, *q;
        assert_int_equal(spill_scan(f, cut, &valid, &acked, &id, &idl, &q, &ql, on_msg, &s), 0);
        assert_int_equal(valid, ends[3]);
        assert_int_equal(s.n, 2);
    }
}

static void test_flipped_byte_ends_log(void **st)
{
    (void)st;
    char f[1024];
    size_t ends[5];
    size_t len = build(f, ends);
    f[ends[1] + 10] ^= 0x40; /* inside M2's body */
    seen_t s = { 0 };
    size_t valid, idl, ql;
    uint64_t acked;
    const char *id, *q;
    assert_int_equal(spill_scan(f, len, &valid, &acked, &id, &idl, &q, &ql, on_msg, &s), 0);
    assert_int_equal(valid, ends[1]);
    assert_int_equal(s.n, 1);
    assert_int_equal(acked, 0);
}

static void test_not_a_spill_file(void **st)
{
    (void)st;
    seen_t s = { 0 };
    size_t valid, idl, ql;
    uint64_t acked;
    const char *id, *q;
    assert_int_equal(spill_scan("hello world", 11, &valid, &acked, &id, &idl, &q, &ql, on_msg, &s), -1);
    assert_int_equal(spill_scan("", 0, &valid, &acked, &id, &idl, &q, &ql, on_msg, &s), 0);
    assert_int_equal(valid, 0);
    /* the CRC is the standard CRC-32 */
    assert_int_equal(spill_crc32("123456789", 9), 0xCBF43926u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_file),
        cmocka_unit_test(test_every_torn_tail),
        cmocka_unit_test(test_flipped_byte_ends_log),
        cmocka_unit_test(test_not_a_spill_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
