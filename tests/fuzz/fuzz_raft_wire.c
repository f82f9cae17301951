/*
 * fuzz_raft_wire.c -- libFuzzer target for the members' wire codec
 * (log/raft_wire.c): what a member does with the bytes another sends.
 *
 * Input: a stream of frames, read as raft_net.c reads a connection:
 * raft_wire_header() on what is left, then raft_wire_decode() of the
 * body, until the header refuses, the bytes run out or a body is refused.
 *
 * Checked (abort on violation):
 *   - the header and the decoder agree on which lengths a type may have;
 *   - a decoded append's entries are one batch: the array first, each
 *     entry's data inside the batch after it, batch set on every entry;
 *   - round trip: every frame decoded encodes again to the same bytes,
 *     but install snapshot, whose conf may carry less padding than
 *     raft_configuration_encode writes: it decodes again to the same
 *     message;
 *   - releasing every decoded frame leaves no leak (ASan's leak check).
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=raft_wire).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log/raft_wire.h"

static void check_batch(const struct raft_append_entries *ae)
{
    if (ae->n_entries == 0) {
        CHECK(ae->entries == NULL);
        return;
    }
    const char *lo = (const char *)(ae->entries + ae->n_entries);
    for (unsigned i = 0; i < ae->n_entries; i++) {
        const struct raft_entry *e = &ae->entries[i];
        CHECK(e->batch == (void *)ae->entries);
        CHECK((const char *)e->buf.base >= lo);
        CHECK(e->type >= RAFT_COMMAND && e->type <= RAFT_CHANGE);
        lo = (const char *)e->buf.base + e->buf.len;
    }
}

static void encode(const raft_wire_frame_t *f, ordo_buf_t *b)
{
    switch (f->type) {
    case RAFT_WIRE_HELLO: raft_wire_put_hello(b, f->hello.id, f->hello.address); break;
    case RAFT_WIRE_PING:
    case RAFT_WIRE_PONG: raft_wire_put_ping(b, f->type, f->ping.seq, f->ping.term); break;
    case RAFT_WIRE_CHUNK: raft_wire_put_chunk(b, &f->chunk); break;
    default: CHECK(raft_wire_put_message(b, &f->message) == 0); break;
    }
}

static void check_same_install(const struct raft_install_snapshot *a, const struct raft_install_snapshot *b)
{
    CHECK(a->version == b->version && a->term == b->term && a->last_index == b->last_index);
    CHECK(a->last_term == b->last_term && a->conf_index == b->conf_index && a->conf.n == b->conf.n);
    for (unsigned i = 0; i < a->conf.n; i++) {
        CHECK(a->conf.servers[i].id == b->conf.servers[i].id);
        CHECK(a->conf.servers[i].role == b->conf.servers[i].role);
        CHECK(strcmp(a->conf.servers[i].address, b->conf.servers[i].address) == 0);
    }
}

static void check_round_trip(const raft_wire_frame_t *f, const uint8_t *frame, size_t len)
{
    ordo_buf_t b = ORDO_BUF_INIT;
    encode(f, &b);
    if (f->type != RAFT_WIRE_INSTALL_SNAPSHOT) {
        CHECK(b.len == len && memcmp(b.data, frame, len) == 0);
    } else {
        uint8_t type;
        uint32_t blen;
        const char *why;
        raft_wire_frame_t g;
        CHECK(raft_wire_header(b.data, b.len, &type, &blen, &why) == 1 && type == f->type);
        CHECK(raft_wire_decode(type, b.data + RAFT_WIRE_HEADER_BYTES, blen, &g, &why) == 0);
        check_same_install(&f->message.install_snapshot, &g.message.install_snapshot);
        raft_wire_frame_free(&g);
    }
    ordo_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t pos = 0;
    for (;;) {
        uint8_t type;
        uint32_t blen;
        const char *why = NULL;
        int h = raft_wire_header(data + pos, size - pos, &type, &blen, &why);
        if (h <= 0) {
            CHECK(h == 0 || why != NULL);
            return 0;
        }
        if (blen > size - pos - RAFT_WIRE_HEADER_BYTES)
            return 0;
        const uint8_t *body = data + pos + RAFT_WIRE_HEADER_BYTES;
        raft_wire_frame_t f;
        if (raft_wire_decode(type, body, blen, &f, &why) != 0) {
            CHECK(why != NULL);
            return 0;
        }
        CHECK(f.type == type);
        if (type == RAFT_WIRE_APPEND_ENTRIES)
            check_batch(&f.message.append_entries);
        if (type == RAFT_WIRE_CHUNK)
            CHECK((const uint8_t *)f.chunk.data >= body && (const uint8_t *)f.chunk.data + f.chunk.len <= body + blen);
        check_round_trip(&f, data + pos, RAFT_WIRE_HEADER_BYTES + blen);
        raft_wire_frame_free(&f);
        pos += RAFT_WIRE_HEADER_BYTES + blen;
    }
}

/* Seeds: one frame of each type, and all of them in one stream. */
void fuzz_seeds(void)
{
    ordo_buf_t all = ORDO_BUF_INIT, b = ORDO_BUF_INIT;
    raft_wire_put_hello(&b, 2, "127.0.0.1:17002");
    fuzz_seed("hello", b.data, b.len);
    ordo_buf_append(&all, b.data, b.len);

    b.len = 0;
    raft_wire_put_ping(&b, RAFT_WIRE_PING, 1, 3);
    raft_wire_put_ping(&b, RAFT_WIRE_PONG, 1, 3);
    fuzz_seed("ping-pong", b.data, b.len);
    ordo_buf_append(&all, b.data, b.len);

    b.len = 0;
    raft_wire_chunk_t c = {.index = 9, .term = 2, .offset = 4, .total = 10, .last = true, .data = "snapsh", .len = 6};
    raft_wire_put_chunk(&b, &c);
    fuzz_seed("chunk", b.data, b.len);
    ordo_buf_append(&all, b.data, b.len);

    struct raft_entry e[3] = {{.term = 2, .type = RAFT_COMMAND, .buf = {"ORDBrecords", 11}},
                              {.term = 2, .type = RAFT_BARRIER, .buf = {NULL, 0}},
                              {.term = 3, .type = RAFT_CHANGE, .buf = {"conf", 4}}};
    struct raft_message m[6] = {{.type = RAFT_APPEND_ENTRIES},     {.type = RAFT_APPEND_ENTRIES_RESULT},
                                {.type = RAFT_REQUEST_VOTE},       {.type = RAFT_REQUEST_VOTE_RESULT},
                                {.type = RAFT_INSTALL_SNAPSHOT},   {.type = RAFT_TIMEOUT_NOW}};
    m[0].append_entries = (struct raft_append_entries){0, 3, 7, 2, 6, e, 3};
    m[1].append_entries_result = (struct raft_append_entries_result){1, 3, 0, 10, 1, 0};
    m[2].request_vote = (struct raft_request_vote){2, 4, 1, 10, 3, true, true};
    m[3].request_vote_result = (struct raft_request_vote_result){2, 4, true, true, 1, 0};
    m[4].install_snapshot.term = 4;
    m[4].install_snapshot.last_index = 100;
    m[4].install_snapshot.last_term = 3;
    m[4].install_snapshot.conf_index = 1;
    raft_configuration_init(&m[4].install_snapshot.conf);
    CHECK(raft_configuration_add(&m[4].install_snapshot.conf, 1, "127.0.0.1:17001", RAFT_VOTER) == 0);
    CHECK(raft_configuration_add(&m[4].install_snapshot.conf, 2, "127.0.0.1:17002", RAFT_STANDBY) == 0);
    m[5].timeout_now = (struct raft_timeout_now){0, 4, 10, 3};
    static const char *names[6] = {"append", "append-result", "vote", "vote-result", "install", "timeout-now"};
    for (int i = 0; i < 6; i++) {
        b.len = 0;
        CHECK(raft_wire_put_message(&b, &m[i]) == 0);
        fuzz_seed(names[i], b.data, b.len);
        ordo_buf_append(&all, b.data, b.len);
    }
    raft_configuration_close(&m[4].install_snapshot.conf);
    fuzz_seed("stream", all.data, all.len);
    ordo_buf_free(&b);
    ordo_buf_free(&all);
}
