/*
 * test_srv_raft_wire.c -- the members' wire codec (log/raft_wire.h): every
 * frame type survives a round trip field for field, a decoded append is
 * one batch, and every malformed or oversized frame is refused, by the
 * header where its length already says so, else by the decoder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/bytes.h"
#include "log/raft_wire.h"

/* Decode the one frame b holds (header, then body); returns decode's result. */
static int decode_one(const ordo_buf_t *b, raft_wire_frame_t *f)
{
    uint8_t type;
    uint32_t blen;
    const char *why = NULL;
    assert_int_equal(raft_wire_header(b->data, b->len, &type, &blen, &why), 1);
    assert_int_equal(b->len, RAFT_WIRE_HEADER_BYTES + blen);
    int rc = raft_wire_decode(type, b->data + RAFT_WIRE_HEADER_BYTES, blen, f, &why);
    if (rc != 0)
        assert_non_null(why);
    return rc;
}

/* The body's decode result after the caller patched it (header unchanged). */
static int decode_body(const ordo_buf_t *b, const char **why)
{
    raft_wire_frame_t f;
    int rc = raft_wire_decode((uint8_t)b->data[4], b->data + RAFT_WIRE_HEADER_BYTES, b->len - RAFT_WIRE_HEADER_BYTES,
                              &f, why);
    if (rc == 0)
        raft_wire_frame_free(&f);
    return rc;
}

static void test_hello_ping_chunk(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    raft_wire_frame_t f;
    raft_wire_put_hello(&b, 7, "10.0.0.7:17379");
    assert_int_equal(decode_one(&b, &f), 0);
    assert_int_equal(f.type, RAFT_WIRE_HELLO);
    assert_int_equal(f.hello.id, 7);
    assert_string_equal(f.hello.address, "10.0.0.7:17379");

    b.len = 0;
    raft_wire_put_ping(&b, RAFT_WIRE_PONG, 99, 5);
    assert_int_equal(decode_one(&b, &f), 0);
    assert_int_equal(f.type, RAFT_WIRE_PONG);
    assert_int_equal(f.ping.seq, 99);
    assert_int_equal(f.ping.term, 5);

    b.len = 0;
    raft_wire_chunk_t c = {.index = 40, .term = 3, .offset = 10, .total = 15, .last = true, .data = "hello",
                           .len = 5};
    raft_wire_put_chunk(&b, &c);
    assert_int_equal(decode_one(&b, &f), 0);
    assert_int_equal(f.chunk.index, 40);
    assert_int_equal(f.chunk.term, 3);
    assert_int_equal(f.chunk.offset, 10);
    assert_int_equal(f.chunk.total, 15);
    assert_true(f.chunk.last);
    assert_int_equal(f.chunk.len, 5);
    assert_memory_equal(f.chunk.data, "hello", 5);
    ordo_buf_free(&b);
}

static void test_small_messages(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    raft_wire_frame_t f;
    struct raft_message m = {.type = RAFT_REQUEST_VOTE};
    m.request_vote = (struct raft_request_vote){2, 9, 3, 100, 8, false, true};
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    assert_int_equal(decode_one(&b, &f), 0);
    assert_int_equal(f.message.type, RAFT_REQUEST_VOTE);
    assert_int_equal(f.message.request_vote.version, 2);
    assert_int_equal(f.message.request_vote.term, 9);
    assert_int_equal(f.message.request_vote.candidate_id, 3);
    assert_int_equal(f.message.request_vote.last_log_index, 100);
    assert_int_equal(f.message.request_vote.last_log_term, 8);
    assert_false(f.message.request_vote.disrupt_leader);
    assert_true(f.message.request_vote.pre_vote);

    b.len = 0;
    m = (struct raft_message){.type = RAFT_REQUEST_VOTE_RESULT};
    m.request_vote_result = (struct raft_request_vote_result){2, 9, true, false, 1, 65535};
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    assert_int_equal(decode_one(&b, &f), 0);
    assert_int_equal(f.message.request_vote_result.term, 9);
    assert_true(f.message.request_vote_result.vote_granted);
    assert_false(f.message.request_vote_result.pre_vote);
    assert_int_equal(f.message.request_vote_result.features, 1);
    assert_int_equal(f.message.request_vote_result.capacity, 65535);

    b.len = 0;
    m = (struct raft_message){.type = RAFT_APPEND_ENTRIES_RESULT};
    m.append_entries_result = (struct raft_append_entries_result){1, 4, 17, 20, 3, 7};
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    assert_int_equal(decode_one(&b, &f), 0);
    assert_int_equal(f.message.type, RAFT_APPEND_ENTRIES_RESULT);
    assert_int_equal(f.message.append_entries_result.version, 1);
    assert_int_equal(f.message.append_entries_result.rejected, 17);
    assert_int_equal(f.message.append_entries_result.last_log_index, 20);
    assert_int_equal(f.message.append_entries_result.features, 3);
    assert_int_equal(f.message.append_entries_result.capacity, 7);

    b.len = 0;
    m = (struct raft_message){.type = RAFT_TIMEOUT_NOW};
    m.timeout_now = (struct raft_timeout_now){0, 6, 50, 5};
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    assert_int_equal(decode_one(&b, &f), 0);
    assert_int_equal(f.message.type, RAFT_TIMEOUT_NOW);
    assert_int_equal(f.message.timeout_now.term, 6);
    assert_int_equal(f.message.timeout_now.last_log_index, 50);
    assert_int_equal(f.message.timeout_now.last_log_term, 5);
    ordo_buf_free(&b);
}

static void test_append_entries(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    raft_wire_frame_t f;
    struct raft_entry e[3] = {
        {.term = 4, .type = RAFT_COMMAND, .buf = {"abc", 3}},
        {.term = 4, .type = RAFT_BARRIER, .buf = {NULL, 0}},
        {.term = 5, .type = RAFT_CHANGE, .buf = {"0123456789", 10}},
    };
    struct raft_message m = {.type = RAFT_APPEND_ENTRIES};
    m.append_entries = (struct raft_append_entries){0, 5, 10, 4, 9, e, 3};
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    assert_int_equal(decode_one(&b, &f), 0);
    struct raft_append_entries *ae = &f.message.append_entries;
    assert_int_equal(ae->term, 5);
    assert_int_equal(ae->prev_log_index, 10);
    assert_int_equal(ae->prev_log_term, 4);
    assert_int_equal(ae->leader_commit, 9);
    assert_int_equal(ae->n_entries, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ae->entries[i].term, e[i].term);
        assert_int_equal(ae->entries[i].type, e[i].type);
        assert_int_equal(ae->entries[i].buf.len, e[i].buf.len);
        if (e[i].buf.len > 0)
            assert_memory_equal(ae->entries[i].buf.base, e[i].buf.base, e[i].buf.len);
        /* One batch holds the array and every entry's data. */
        assert_ptr_equal(ae->entries[i].batch, ae->entries);
        assert_true((char *)ae->entries[i].buf.base >= (char *)(ae->entries + 3));
    }
    raft_wire_frame_free(&f); /* ASan: one free releases all */

    /* A heartbeat: no entries, nothing allocated. */
    b.len = 0;
    m.append_entries.n_entries = 0;
    m.append_entries.entries = NULL;
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    assert_int_equal(decode_one(&b, &f), 0);
    assert_int_equal(f.message.append_entries.n_entries, 0);
    assert_null(f.message.append_entries.entries);
    raft_wire_frame_free(&f);
    ordo_buf_free(&b);
}

static void make_conf(struct raft_configuration *c)
{
    raft_configuration_init(c);
    assert_int_equal(raft_configuration_add(c, 1, "127.0.0.1:17001", RAFT_VOTER), 0);
    assert_int_equal(raft_configuration_add(c, 2, "127.0.0.1:17002", RAFT_STANDBY), 0);
    assert_int_equal(raft_configuration_add(c, 30, "host.example:17003", RAFT_SPARE), 0);
}

static void test_install_snapshot(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    raft_wire_frame_t f;
    struct raft_message m = {.type = RAFT_INSTALL_SNAPSHOT};
    m.install_snapshot.term = 8;
    m.install_snapshot.last_index = 1000;
    m.install_snapshot.last_term = 7;
    m.install_snapshot.conf_index = 900;
    m.install_snapshot.data = (struct raft_buffer){"ignored", 7};
    make_conf(&m.install_snapshot.conf);
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    assert_int_equal(decode_one(&b, &f), 0);
    struct raft_install_snapshot *is = &f.message.install_snapshot;
    assert_int_equal(is->term, 8);
    assert_int_equal(is->last_index, 1000);
    assert_int_equal(is->last_term, 7);
    assert_int_equal(is->conf_index, 900);
    assert_null(is->data.base);
    assert_int_equal(is->conf.n, 3);
    assert_int_equal(is->conf.servers[2].id, 30);
    assert_string_equal(is->conf.servers[2].address, "host.example:17003");
    assert_int_equal(is->conf.servers[2].role, RAFT_SPARE);
    assert_int_equal(is->conf.servers[1].role, RAFT_STANDBY);
    raft_wire_frame_free(&f);
    raft_configuration_close(&m.install_snapshot.conf);
    ordo_buf_free(&b);
}

/* Two frames back to back, fed a byte at a time to the header reader. */
static void test_header_stream(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    raft_wire_put_ping(&b, RAFT_WIRE_PING, 1, 2);
    size_t first = b.len;
    raft_wire_put_hello(&b, 3, "a:1");
    uint8_t type;
    uint32_t blen;
    const char *why;
    for (size_t n = 0; n < RAFT_WIRE_HEADER_BYTES; n++)
        assert_int_equal(raft_wire_header(b.data, n, &type, &blen, &why), 0);
    assert_int_equal(raft_wire_header(b.data, b.len, &type, &blen, &why), 1);
    assert_int_equal(type, RAFT_WIRE_PING);
    assert_int_equal(RAFT_WIRE_HEADER_BYTES + blen, first);
    assert_int_equal(raft_wire_header(b.data + first, b.len - first, &type, &blen, &why), 1);
    assert_int_equal(type, RAFT_WIRE_HELLO);
    ordo_buf_free(&b);
}

static void header_refused(uint32_t len, uint8_t type, const char *what)
{
    unsigned char h[RAFT_WIRE_HEADER_BYTES];
    put_u32(h, len);
    h[4] = type;
    uint8_t t;
    uint32_t blen;
    const char *why = NULL;
    assert_int_equal(raft_wire_header(h, sizeof h, &t, &blen, &why), -1);
    if (why == NULL || strstr(why, what) == NULL)
        fail_msg("header len %u type %u: '%s' lacks '%s'", len, type, why ? why : "(null)", what);
}

static void test_header_refusals(void **state)
{
    (void)state;
    header_refused(16, 0, "unknown frame type");
    header_refused(16, 7, "unknown frame type");
    header_refused(16, 255, "unknown frame type");
    header_refused(RAFT_WIRE_FRAME_MAX + 1, RAFT_WIRE_APPEND_ENTRIES, "out of range");
    header_refused(UINT32_MAX, RAFT_WIRE_APPEND_ENTRIES, "out of range");
    header_refused(15, RAFT_WIRE_PING, "out of range");
    header_refused(17, RAFT_WIRE_PONG, "out of range");
    header_refused(24 + RAFT_WIRE_ADDRESS_MAX + 1, RAFT_WIRE_HELLO, "out of range");
    header_refused(37 + RAFT_WIRE_CHUNK_MAX + 1, RAFT_WIRE_CHUNK, "out of range");
    header_refused(37 + RAFT_WIRE_CONF_MAX + 1, RAFT_WIRE_INSTALL_SNAPSHOT, "out of range");
    header_refused(36, RAFT_WIRE_APPEND_ENTRIES, "out of range");
    header_refused(30, RAFT_WIRE_APPEND_ENTRIES_RESULT, "out of range");
}

static void body_refused(const ordo_buf_t *b, const char *what)
{
    const char *why = NULL;
    assert_int_equal(decode_body(b, &why), -1);
    if (why == NULL || strstr(why, what) == NULL)
        fail_msg("'%s' lacks '%s'", why ? why : "(null)", what);
}

/* Body offsets of fields patched below (raft_wire.c's format). */
#define B(off) (b.data + RAFT_WIRE_HEADER_BYTES + (off))

static void test_hello_refusals(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    raft_wire_put_hello(&b, 7, "host:1");
    B(0)[0] = 'X';
    body_refused(&b, "magic");
    b.len = 0;
    raft_wire_put_hello(&b, 7, "host:1");
    put_u32(B(8), 2);
    body_refused(&b, "version");
    put_u32(B(8), RAFT_WIRE_VERSION);
    put_u64(B(12), 0);
    body_refused(&b, "id 0");
    put_u64(B(12), 7);
    put_u32(B(20), 5);
    body_refused(&b, "address length");
    put_u32(B(20), 6);
    B(24)[2] = '\0';
    body_refused(&b, "NUL");
    ordo_buf_free(&b);
}

static void test_chunk_refusals(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    raft_wire_chunk_t c = {.index = 1, .term = 1, .offset = 0, .total = 10, .last = false, .data = "abcd", .len = 4};
    raft_wire_put_chunk(&b, &c);
    B(32)[0] = 2;
    body_refused(&b, "last flag");
    B(32)[0] = 1;
    body_refused(&b, "last chunk short");
    B(32)[0] = 0;
    put_u64(B(24), 3);
    body_refused(&b, "past the snapshot's total");
    put_u64(B(24), 10);
    put_u64(B(16), 11);
    body_refused(&b, "past the snapshot's total");
    put_u64(B(16), 0);
    put_u32(B(33), 5);
    body_refused(&b, "data length");
    ordo_buf_free(&b);
}

static void test_message_refusals(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    struct raft_entry e[2] = {{.term = 1, .type = RAFT_COMMAND, .buf = {"abc", 3}},
                              {.term = 1, .type = RAFT_COMMAND, .buf = {"de", 2}}};
    struct raft_message m = {.type = RAFT_APPEND_ENTRIES};
    m.append_entries = (struct raft_append_entries){0, 1, 0, 0, 0, e, 2};
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    size_t ae_len = b.len;
    /* entries at body 37: term(8) type(1) len(4) data */
    B(37 + 8)[0] = 9;
    body_refused(&b, "unknown entry type");
    B(37 + 8)[0] = RAFT_COMMAND;
    /* the second entry at 37 + 13 + 3: its length at 62 */
    put_u32(B(62), 3);
    body_refused(&b, "entry data past the frame");
    put_u32(B(62), 2);
    put_u32(B(33), 1);
    body_refused(&b, "bytes after the last entry");
    put_u32(B(33), 3);
    body_refused(&b, "entries past the frame");
    put_u32(B(33), RAFT_WIRE_ENTRIES_MAX + 1);
    body_refused(&b, "too many entries");
    put_u32(B(33), 2);
    assert_int_equal(b.len, ae_len);

    b.len = 0;
    m = (struct raft_message){.type = RAFT_REQUEST_VOTE};
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    B(33)[0] = 4;
    body_refused(&b, "flag");
    b.len = 0;
    m = (struct raft_message){.type = RAFT_REQUEST_VOTE_RESULT};
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    B(9)[0] = (char)0x80;
    body_refused(&b, "flag");

    /* A conf that raft's own decoder would read past: every break of
     * the walk is refused before it sees the bytes. */
    b.len = 0;
    m = (struct raft_message){.type = RAFT_INSTALL_SNAPSHOT};
    make_conf(&m.install_snapshot.conf);
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    raft_configuration_close(&m.install_snapshot.conf);
    size_t conf_at = 37;
    B(conf_at)[0] = 2;
    body_refused(&b, "malformed conf");
    B(conf_at)[0] = 1;
    put_u64(B(conf_at + 1), 4); /* more servers than bytes */
    body_refused(&b, "malformed conf");
    put_u64(B(conf_at + 1), 1000000);
    body_refused(&b, "malformed conf");
    put_u64(B(conf_at + 1), 3);
    put_u64(B(conf_at + 9), 0); /* server id 0 */
    body_refused(&b, "malformed conf");
    put_u64(B(conf_at + 9), 2); /* duplicate of server 2 */
    body_refused(&b, "conf refused");
    put_u64(B(conf_at + 9), 1);
    /* role of server 1 after "127.0.0.1:17001\0" */
    B(conf_at + 9 + 8 + 16)[0] = 3;
    body_refused(&b, "malformed conf");
    B(conf_at + 9 + 8 + 16)[0] = RAFT_VOTER;
    put_u32(B(33), 1000);
    body_refused(&b, "conf length");
    put_u32(B(33), 0);
    body_refused(&b, "conf length");
    /* The address's NUL cut away: the frame ends inside the conf. */
    b.len = RAFT_WIRE_HEADER_BYTES + conf_at + 9 + 8 + 5;
    put_u32(B(33), 9 + 8 + 5);
    body_refused(&b, "malformed conf");
    ordo_buf_free(&b);
}

static void test_encoder_refusals(void **state)
{
    (void)state;
    ordo_buf_t b = ORDO_BUF_INIT;
    struct raft_entry *e = calloc(RAFT_WIRE_ENTRIES_MAX + 1, sizeof *e);
    for (unsigned i = 0; i <= RAFT_WIRE_ENTRIES_MAX; i++)
        e[i].type = RAFT_COMMAND;
    struct raft_message m = {.type = RAFT_APPEND_ENTRIES};
    m.append_entries.entries = e;
    m.append_entries.n_entries = RAFT_WIRE_ENTRIES_MAX + 1;
    assert_int_equal(raft_wire_put_message(&b, &m), -1);
    assert_int_equal(b.len, 0);
    m.append_entries.n_entries = RAFT_WIRE_ENTRIES_MAX;
    assert_int_equal(raft_wire_put_message(&b, &m), 0);
    b.len = 0;
    e[0].type = 0;
    assert_int_equal(raft_wire_put_message(&b, &m), -1);
    e[0].type = RAFT_COMMAND;
    /* An entry past the frame limit (its bytes are never read). */
    e[0].buf.len = RAFT_WIRE_FRAME_MAX;
    m.append_entries.n_entries = 1;
    assert_int_equal(raft_wire_put_message(&b, &m), -1);
    assert_int_equal(b.len, 0);
    free(e);

    m = (struct raft_message){.type = RAFT_INSTALL_SNAPSHOT};
    raft_configuration_init(&m.install_snapshot.conf);
    assert_int_equal(raft_wire_put_message(&b, &m), -1); /* an empty conf */
    m = (struct raft_message){.type = 42};
    assert_int_equal(raft_wire_put_message(&b, &m), -1);
    assert_int_equal(b.len, 0);
    ordo_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_ping_chunk),  cmocka_unit_test(test_small_messages),
        cmocka_unit_test(test_append_entries),    cmocka_unit_test(test_install_snapshot),
        cmocka_unit_test(test_header_stream),     cmocka_unit_test(test_header_refusals),
        cmocka_unit_test(test_hello_refusals),    cmocka_unit_test(test_chunk_refusals),
        cmocka_unit_test(test_message_refusals),  cmocka_unit_test(test_encoder_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
