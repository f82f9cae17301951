/*
 * raft_wire.c -- the codec of raft_wire.h.
 *
 * WIRE FORMAT
 *
 * A connection carries frames back to back. Every integer is
 * little-endian; u8/u16/u32/u64 are 1, 2, 4 and 8 bytes. A frame:
 *
 *    offset  size  field
 *         0     4  len: body bytes, <= RAFT_WIRE_FRAME_MAX
 *         4     1  type (enum raft_wire_type)
 *         5   len  body
 *
 * Bodies, by type; a body must be exactly as long as its fields (no
 * trailing bytes), and the header already refuses a length no body of
 * its type can have:
 *
 *  16 hello (the first frame each side sends on a connection):
 *       magic "ORDORAFT" (8) | version u32 = 1 | sender id u64 (> 0)
 *       | address length u32 (1..RAFT_WIRE_ADDRESS_MAX) | address (no NUL)
 *  17 ping, 18 pong: seq u64 | term u64
 *  19 chunk: snapshot index u64 | snapshot term u64 | offset u64
 *       | total u64 | last u8 (0 or 1) | length u32 (<= RAFT_WIRE_CHUNK_MAX)
 *       | data; offset + length <= total, and a last chunk ends at total
 *
 * The raft messages (the engine's structs, field for field; "version" is
 * the struct's own version byte, carried unchanged):
 *
 *   1 append entries: version u8 | term u64 | prev_log_index u64
 *       | prev_log_term u64 | leader_commit u64
 *       | n u32 (<= RAFT_WIRE_ENTRIES_MAX), then n entries:
 *       term u64 | type u8 (RAFT_COMMAND, RAFT_BARRIER, RAFT_CHANGE)
 *       | length u32 | data
 *   2 append entries result: version u8 | term u64 | rejected u64
 *       | last_log_index u64 | features u16 | capacity u16
 *   3 request vote: version u8 | term u64 | candidate_id u64
 *       | last_log_index u64 | last_log_term u64
 *       | flags u8 (bit 0 disrupt_leader, bit 1 pre_vote; others zero)
 *   4 request vote result: version u8 | term u64
 *       | flags u8 (bit 0 vote_granted, bit 1 pre_vote; others zero)
 *       | features u16 | capacity u16
 *   5 install snapshot: version u8 | term u64 | last_index u64
 *       | last_term u64 | conf_index u64 | conf length u32
 *       (1..RAFT_WIRE_CONF_MAX) | conf (raft_configuration_encode's bytes)
 *       -- no data: the snapshot follows as chunks (raft_net.c)
 *   6 timeout now: version u8 | term u64 | last_log_index u64
 *       | last_log_term u64
 *
 * The conf is checked here before raft_configuration_decode() sees it:
 * that decoder reads its 8-byte fields without looking at the length, so
 * the walk below (format byte 1 | u64 n | n x (u64 id > 0 | address, NUL
 * ended, <= RAFT_WIRE_ADDRESS_MAX | u8 role 0..2) | at most 7 zero bytes
 * of padding) makes sure every byte it reads is inside the buffer.
 *
 * A decoded append entries is one raft_malloc'd batch: the entries array,
 * then each entry's data at an 8-byte aligned offset.
 */
#include "raft_wire.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"

#define HELLO_FIXED 24u      /* magic, version, id, address length */
#define PING_BYTES 16u
#define CHUNK_FIXED 37u
#define AE_FIXED 37u
#define AE_ENTRY_FIXED 13u
#define AER_BYTES 29u
#define RV_BYTES 34u
#define RVR_BYTES 14u
#define IS_FIXED 37u
#define TN_BYTES 25u
#define CONF_FORMAT 1u       /* raft_configuration_encode's format byte */
#define CONF_MIN 9u          /* format byte and server count */
#define CONF_SERVER_MIN 10u  /* id, an empty address's NUL, role */

_Static_assert((int)RAFT_WIRE_APPEND_ENTRIES == (int)RAFT_APPEND_ENTRIES &&
                   (int)RAFT_WIRE_TIMEOUT_NOW == (int)RAFT_TIMEOUT_NOW &&
                   (int)RAFT_WIRE_INSTALL_SNAPSHOT == (int)RAFT_INSTALL_SNAPSHOT,
               "raft frame types are the engine's message codes");
_Static_assert(RAFT_WIRE_FRAME_MAX < UINT32_MAX, "a length fits its u32");

/* ---- writing ---------------------------------------------------------- */

static void put8(ordo_buf_t *b, uint8_t v) { ordo_buf_append(b, &v, 1); }

static void put16(ordo_buf_t *b, uint16_t v)
{
    unsigned char p[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    ordo_buf_append(b, p, 2);
}

static void put32(ordo_buf_t *b, uint32_t v)
{
    put_u32(ordo_buf_reserve(b, 4), v);
    b->len += 4;
}

static void put64(ordo_buf_t *b, uint64_t v)
{
    put_u64(ordo_buf_reserve(b, 8), v);
    b->len += 8;
}

/* Start a frame of type; returns where its length goes (frame_end fills it). */
static size_t frame_begin(ordo_buf_t *b, uint8_t type)
{
    size_t at = b->len;
    put32(b, 0);
    put8(b, type);
    return at;
}

static void frame_end(ordo_buf_t *b, size_t at)
{
    size_t body = b->len - at - RAFT_WIRE_HEADER_BYTES;
    assert(body <= RAFT_WIRE_FRAME_MAX);
    put_u32(b->data + at, (uint32_t)body);
}

void raft_wire_put_hello(ordo_buf_t *b, uint64_t id, const char *address)
{
    size_t alen = strlen(address);
    assert(id > 0 && alen > 0 && alen <= RAFT_WIRE_ADDRESS_MAX);
    size_t at = frame_begin(b, RAFT_WIRE_HELLO);
    ordo_buf_append(b, RAFT_WIRE_MAGIC, 8);
    put32(b, RAFT_WIRE_VERSION);
    put64(b, id);
    put32(b, (uint32_t)alen);
    ordo_buf_append(b, address, alen);
    frame_end(b, at);
}

void raft_wire_put_ping(ordo_buf_t *b, uint8_t type, uint64_t seq, uint64_t term)
{
    assert(type == RAFT_WIRE_PING || type == RAFT_WIRE_PONG);
    size_t at = frame_begin(b, type);
    put64(b, seq);
    put64(b, term);
    frame_end(b, at);
}

void raft_wire_put_chunk(ordo_buf_t *b, const raft_wire_chunk_t *c)
{
    assert(c->len <= RAFT_WIRE_CHUNK_MAX && c->offset <= c->total && c->len <= c->total - c->offset);
    assert(!c->last || c->offset + c->len == c->total);
    size_t at = frame_begin(b, RAFT_WIRE_CHUNK);
    put64(b, c->index);
    put64(b, c->term);
    put64(b, c->offset);
    put64(b, c->total);
    put8(b, c->last ? 1 : 0);
    put32(b, c->len);
    ordo_buf_append(b, c->data, c->len);
    frame_end(b, at);
}

/* The body an append entries needs, or 0 if it breaks a limit. */
static size_t append_body_bytes(const struct raft_append_entries *ae)
{
    if (ae->n_entries > RAFT_WIRE_ENTRIES_MAX)
        return 0;
    size_t n = AE_FIXED;
    for (unsigned i = 0; i < ae->n_entries; i++) {
        const struct raft_entry *e = &ae->entries[i];
        if (e->type < RAFT_COMMAND || e->type > RAFT_CHANGE || e->buf.len > RAFT_WIRE_FRAME_MAX)
            return 0;
        n += AE_ENTRY_FIXED + e->buf.len;
        if (n > RAFT_WIRE_FRAME_MAX)
            return 0;
    }
    return n;
}

static int put_append(ordo_buf_t *b, const struct raft_append_entries *ae)
{
    size_t body = append_body_bytes(ae);
    if (body == 0)
        return -1;
    size_t at = frame_begin(b, RAFT_WIRE_APPEND_ENTRIES);
    ordo_buf_reserve(b, body);
    put8(b, ae->version);
    put64(b, ae->term);
    put64(b, ae->prev_log_index);
    put64(b, ae->prev_log_term);
    put64(b, ae->leader_commit);
    put32(b, ae->n_entries);
    for (unsigned i = 0; i < ae->n_entries; i++) {
        const struct raft_entry *e = &ae->entries[i];
        put64(b, e->term);
        put8(b, (uint8_t)e->type);
        put32(b, (uint32_t)e->buf.len);
        ordo_buf_append(b, e->buf.base, e->buf.len);
    }
    frame_end(b, at);
    assert(b->len - at - RAFT_WIRE_HEADER_BYTES == body);
    return 0;
}

static int put_install(ordo_buf_t *b, const struct raft_install_snapshot *is)
{
    if (is->conf.n == 0)
        return -1;
    struct raft_buffer conf;
    if (raft_configuration_encode(&is->conf, &conf) != 0)
        return -1;
    if (conf.len == 0 || conf.len > RAFT_WIRE_CONF_MAX) {
        raft_free(conf.base);
        return -1;
    }
    size_t at = frame_begin(b, RAFT_WIRE_INSTALL_SNAPSHOT);
    put8(b, is->version);
    put64(b, is->term);
    put64(b, is->last_index);
    put64(b, is->last_term);
    put64(b, is->conf_index);
    put32(b, (uint32_t)conf.len);
    ordo_buf_append(b, conf.base, conf.len);
    frame_end(b, at);
    raft_free(conf.base);
    return 0;
}

int raft_wire_put_message(ordo_buf_t *b, const struct raft_message *m)
{
    size_t at;
    switch (m->type) {
    case RAFT_APPEND_ENTRIES:
        return put_append(b, &m->append_entries);
    case RAFT_INSTALL_SNAPSHOT:
        return put_install(b, &m->install_snapshot);
    case RAFT_APPEND_ENTRIES_RESULT: {
        const struct raft_append_entries_result *r = &m->append_entries_result;
        at = frame_begin(b, RAFT_WIRE_APPEND_ENTRIES_RESULT);
        put8(b, r->version);
        put64(b, r->term);
        put64(b, r->rejected);
        put64(b, r->last_log_index);
        put16(b, r->features);
        put16(b, r->capacity);
        break;
    }
    case RAFT_REQUEST_VOTE: {
        const struct raft_request_vote *r = &m->request_vote;
        at = frame_begin(b, RAFT_WIRE_REQUEST_VOTE);
        put8(b, r->version);
        put64(b, r->term);
        put64(b, r->candidate_id);
        put64(b, r->last_log_index);
        put64(b, r->last_log_term);
        put8(b, (uint8_t)((r->disrupt_leader ? 1 : 0) | (r->pre_vote ? 2 : 0)));
        break;
    }
    case RAFT_REQUEST_VOTE_RESULT: {
        const struct raft_request_vote_result *r = &m->request_vote_result;
        at = frame_begin(b, RAFT_WIRE_REQUEST_VOTE_RESULT);
        put8(b, r->version);
        put64(b, r->term);
        put8(b, (uint8_t)((r->vote_granted ? 1 : 0) | (r->pre_vote ? 2 : 0)));
        put16(b, r->features);
        put16(b, r->capacity);
        break;
    }
    case RAFT_TIMEOUT_NOW: {
        const struct raft_timeout_now *r = &m->timeout_now;
        at = frame_begin(b, RAFT_WIRE_TIMEOUT_NOW);
        put8(b, r->version);
        put64(b, r->term);
        put64(b, r->last_log_index);
        put64(b, r->last_log_term);
        break;
    }
    default:
        return -1;
    }
    frame_end(b, at);
    return 0;
}

/* ---- reading ---------------------------------------------------------- */

/* A cursor over a body; every get checks the bytes are there. */
typedef struct rd_s {
    const unsigned char *p;
    size_t left;
} rd_t;

static bool has(const rd_t *r, size_t n) { return r->left >= n; }

static uint8_t get8(rd_t *r)
{
    assert(has(r, 1));
    uint8_t v = r->p[0];
    r->p++, r->left--;
    return v;
}

static uint16_t get16(rd_t *r)
{
    assert(has(r, 2));
    uint16_t v = (uint16_t)(r->p[0] | r->p[1] << 8);
    r->p += 2, r->left -= 2;
    return v;
}

static uint32_t get32(rd_t *r)
{
    assert(has(r, 4));
    uint32_t v = get_u32(r->p);
    r->p += 4, r->left -= 4;
    return v;
}

static uint64_t get64(rd_t *r)
{
    assert(has(r, 8));
    uint64_t v = get_u64(r->p);
    r->p += 8, r->left -= 8;
    return v;
}

/* The lengths a body of type may have; false for an unknown type. */
static bool body_range(uint8_t type, uint32_t *min, uint32_t *max)
{
    switch (type) {
    case RAFT_WIRE_HELLO: *min = HELLO_FIXED + 1, *max = HELLO_FIXED + RAFT_WIRE_ADDRESS_MAX; return true;
    case RAFT_WIRE_PING:
    case RAFT_WIRE_PONG: *min = *max = PING_BYTES; return true;
    case RAFT_WIRE_CHUNK: *min = CHUNK_FIXED, *max = CHUNK_FIXED + RAFT_WIRE_CHUNK_MAX; return true;
    case RAFT_WIRE_APPEND_ENTRIES: *min = AE_FIXED, *max = RAFT_WIRE_FRAME_MAX; return true;
    case RAFT_WIRE_APPEND_ENTRIES_RESULT: *min = *max = AER_BYTES; return true;
    case RAFT_WIRE_REQUEST_VOTE: *min = *max = RV_BYTES; return true;
    case RAFT_WIRE_REQUEST_VOTE_RESULT: *min = *max = RVR_BYTES; return true;
    case RAFT_WIRE_INSTALL_SNAPSHOT: *min = IS_FIXED + CONF_MIN, *max = IS_FIXED + RAFT_WIRE_CONF_MAX; return true;
    case RAFT_WIRE_TIMEOUT_NOW: *min = *max = TN_BYTES; return true;
    default: return false;
    }
}

int raft_wire_header(const void *buf, size_t len, uint8_t *type, uint32_t *body_len, const char **why)
{
    if (len < RAFT_WIRE_HEADER_BYTES)
        return 0;
    const unsigned char *p = buf;
    uint32_t n = get_u32(p), min, max;
    if (!body_range(p[4], &min, &max)) {
        *why = "unknown frame type";
        return -1;
    }
    if (n < min || n > max) {
        *why = "frame length out of range for its type";
        return -1;
    }
    *type = p[4];
    *body_len = n;
    return 1;
}

static int bad(const char **why, const char *what)
{
    *why = what;
    return -1;
}

static int dec_hello(rd_t *r, raft_wire_hello_t *h, const char **why)
{
    if (!has(r, HELLO_FIXED))
        return bad(why, "hello too short");
    if (memcmp(r->p, RAFT_WIRE_MAGIC, 8) != 0)
        return bad(why, "hello: bad magic");
    r->p += 8, r->left -= 8;
    if (get32(r) != RAFT_WIRE_VERSION)
        return bad(why, "hello: unknown version");
    h->id = get64(r);
    uint32_t alen = get32(r);
    if (h->id == 0)
        return bad(why, "hello: id 0");
    if (alen == 0 || alen > RAFT_WIRE_ADDRESS_MAX || alen != r->left)
        return bad(why, "hello: bad address length");
    if (memchr(r->p, '\0', alen) != NULL)
        return bad(why, "hello: NUL in address");
    memcpy(h->address, r->p, alen);
    h->address[alen] = '\0';
    r->p += alen, r->left = 0;
    return 0;
}

static int dec_chunk(rd_t *r, raft_wire_chunk_t *c, const char **why)
{
    if (!has(r, CHUNK_FIXED))
        return bad(why, "chunk too short");
    c->index = get64(r);
    c->term = get64(r);
    c->offset = get64(r);
    c->total = get64(r);
    uint8_t last = get8(r);
    c->len = get32(r);
    if (last > 1)
        return bad(why, "chunk: bad last flag");
    c->last = last == 1;
    if (c->len > RAFT_WIRE_CHUNK_MAX || c->len != r->left)
        return bad(why, "chunk: bad data length");
    if (c->offset > c->total || c->len > c->total - c->offset)
        return bad(why, "chunk: past the snapshot's total");
    if (c->last && c->offset + c->len != c->total)
        return bad(why, "chunk: last chunk short of the total");
    c->data = r->p;
    r->p += c->len, r->left = 0;
    return 0;
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* First pass over the entries: everything checked, the batch's size. */
static int scan_entries(rd_t r, uint32_t n, size_t *batch_bytes, const char **why)
{
    size_t bytes = align8((size_t)n * sizeof(struct raft_entry));
    for (uint32_t i = 0; i < n; i++) {
        if (!has(&r, AE_ENTRY_FIXED))
            return bad(why, "append: entries past the frame");
        (void)get64(&r);
        uint8_t type = get8(&r);
        uint32_t len = get32(&r);
        if (type < RAFT_COMMAND || type > RAFT_CHANGE)
            return bad(why, "append: unknown entry type");
        if (!has(&r, len))
            return bad(why, "append: entry data past the frame");
        r.p += len, r.left -= len;
        bytes += align8(len);
    }
    if (r.left != 0)
        return bad(why, "append: bytes after the last entry");
    *batch_bytes = bytes;
    return 0;
}

static void *xraft_malloc(size_t n)
{
    void *p = raft_malloc(n);
    if (p == NULL) {
        fprintf(stderr, "ordod: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

static int dec_append(rd_t *r, struct raft_append_entries *ae, const char **why)
{
    ae->version = get8(r);
    ae->term = get64(r);
    ae->prev_log_index = get64(r);
    ae->prev_log_term = get64(r);
    ae->leader_commit = get64(r);
    uint32_t n = get32(r);
    ae->entries = NULL;
    ae->n_entries = 0;
    if (n > RAFT_WIRE_ENTRIES_MAX)
        return bad(why, "append: too many entries");
    if ((size_t)n * AE_ENTRY_FIXED > r->left)
        return bad(why, "append: entries past the frame");
    size_t bytes;
    if (scan_entries(*r, n, &bytes, why) != 0)
        return -1;
    if (n == 0)
        return 0;
    char *batch = xraft_malloc(bytes);
    struct raft_entry *entries = (struct raft_entry *)batch;
    size_t off = align8((size_t)n * sizeof *entries);
    for (uint32_t i = 0; i < n; i++) {
        struct raft_entry *e = &entries[i];
        e->term = get64(r);
        e->type = (enum raft_entry_type)get8(r);
        e->buf.len = get32(r);
        e->buf.base = batch + off;
        e->batch = batch;
        memcpy(e->buf.base, r->p, e->buf.len);
        r->p += e->buf.len, r->left -= e->buf.len;
        off += align8(e->buf.len);
    }
    assert(off == bytes && r->left == 0);
    ae->entries = entries;
    ae->n_entries = n;
    return 0;
}

/* Walk an encoded configuration (the format at the head) within its
 * bytes; true if raft_configuration_decode() may be given it. */
static bool conf_fits(const unsigned char *p, size_t len)
{
    rd_t r = {p, len};
    if (!has(&r, CONF_MIN) || get8(&r) != CONF_FORMAT)
        return false;
    uint64_t n = get64(&r);
    if (n == 0 || n > len / CONF_SERVER_MIN)
        return false;
    for (uint64_t i = 0; i < n; i++) {
        if (!has(&r, 8) || get64(&r) == 0)
            return false;
        const unsigned char *nul = memchr(r.p, '\0', r.left);
        if (nul == NULL || (size_t)(nul - r.p) > RAFT_WIRE_ADDRESS_MAX)
            return false;
        size_t slen = (size_t)(nul - r.p) + 1;
        r.p += slen, r.left -= slen;
        if (!has(&r, 1) || get8(&r) > RAFT_SPARE)
            return false;
    }
    if (r.left > 7)
        return false;
    for (size_t i = 0; i < r.left; i++)
        if (r.p[i] != 0)
            return false;
    return true;
}

static int dec_install(rd_t *r, struct raft_install_snapshot *is, const char **why)
{
    is->version = get8(r);
    is->term = get64(r);
    is->last_index = get64(r);
    is->last_term = get64(r);
    is->conf_index = get64(r);
    uint32_t clen = get32(r);
    raft_configuration_init(&is->conf);
    is->data.base = NULL;
    is->data.len = 0;
    if (clen == 0 || clen > RAFT_WIRE_CONF_MAX || clen != r->left)
        return bad(why, "install snapshot: bad conf length");
    if (!conf_fits(r->p, clen))
        return bad(why, "install snapshot: malformed conf");
    struct raft_buffer buf = {(void *)r->p, clen};
    int rc = raft_configuration_decode(&buf, &is->conf);
    if (rc == RAFT_NOMEM) {
        fprintf(stderr, "ordod: out of memory decoding a configuration\n");
        abort();
    }
    if (rc != 0) {
        raft_configuration_init(&is->conf);
        return bad(why, "install snapshot: conf refused (duplicate id or address)");
    }
    r->p += clen, r->left = 0;
    return 0;
}

static int dec_flags(uint8_t flags, bool *a, bool *b, const char **why)
{
    if (flags > 3)
        return bad(why, "unknown flag bits");
    *a = (flags & 1) != 0;
    *b = (flags & 2) != 0;
    return 0;
}

static int dec_message(uint8_t type, rd_t *r, struct raft_message *m, const char **why)
{
    memset(m, 0, sizeof *m);
    m->type = (enum raft_message_type)type;
    switch (type) {
    case RAFT_WIRE_APPEND_ENTRIES:
        return dec_append(r, &m->append_entries, why);
    case RAFT_WIRE_INSTALL_SNAPSHOT:
        return dec_install(r, &m->install_snapshot, why);
    case RAFT_WIRE_APPEND_ENTRIES_RESULT: {
        struct raft_append_entries_result *x = &m->append_entries_result;
        x->version = get8(r);
        x->term = get64(r);
        x->rejected = get64(r);
        x->last_log_index = get64(r);
        x->features = get16(r);
        x->capacity = get16(r);
        return 0;
    }
    case RAFT_WIRE_REQUEST_VOTE: {
        struct raft_request_vote *x = &m->request_vote;
        x->version = get8(r);
        x->term = get64(r);
        x->candidate_id = get64(r);
        x->last_log_index = get64(r);
        x->last_log_term = get64(r);
        return dec_flags(get8(r), &x->disrupt_leader, &x->pre_vote, why);
    }
    case RAFT_WIRE_REQUEST_VOTE_RESULT: {
        struct raft_request_vote_result *x = &m->request_vote_result;
        x->version = get8(r);
        x->term = get64(r);
        if (dec_flags(get8(r), &x->vote_granted, &x->pre_vote, why) != 0)
            return -1;
        x->features = get16(r);
        x->capacity = get16(r);
        return 0;
    }
    case RAFT_WIRE_TIMEOUT_NOW: {
        struct raft_timeout_now *x = &m->timeout_now;
        x->version = get8(r);
        x->term = get64(r);
        x->last_log_index = get64(r);
        x->last_log_term = get64(r);
        return 0;
    }
    default:
        return bad(why, "unknown frame type");
    }
}

int raft_wire_decode(uint8_t type, const void *body, size_t len, raft_wire_frame_t *out, const char **why)
{
    uint32_t min, max;
    memset(out, 0, sizeof *out);
    if (!body_range(type, &min, &max))
        return bad(why, "unknown frame type");
    if (len < min || len > max)
        return bad(why, "frame length out of range for its type");
    rd_t r = {body, len};
    out->type = type;
    int rc;
    switch (type) {
    case RAFT_WIRE_HELLO: rc = dec_hello(&r, &out->hello, why); break;
    case RAFT_WIRE_PING:
    case RAFT_WIRE_PONG:
        out->ping.seq = get64(&r);
        out->ping.term = get64(&r);
        rc = 0;
        break;
    case RAFT_WIRE_CHUNK: rc = dec_chunk(&r, &out->chunk, why); break;
    default: rc = dec_message(type, &r, &out->message, why); break;
    }
    if (rc != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    assert(r.left == 0);
    return 0;
}

void raft_wire_message_free(struct raft_message *m)
{
    switch (m->type) {
    case RAFT_APPEND_ENTRIES:
        if (m->append_entries.entries != NULL) {
            assert(m->append_entries.entries[0].batch == (void *)m->append_entries.entries);
            raft_free(m->append_entries.entries);
        }
        m->append_entries.entries = NULL;
        m->append_entries.n_entries = 0;
        break;
    case RAFT_INSTALL_SNAPSHOT:
        raft_configuration_close(&m->install_snapshot.conf);
        raft_configuration_init(&m->install_snapshot.conf);
        raft_free(m->install_snapshot.data.base);
        m->install_snapshot.data.base = NULL;
        m->install_snapshot.data.len = 0;
        break;
    default:
        break;
    }
}

void raft_wire_frame_free(raft_wire_frame_t *f)
{
    if (f->type >= RAFT_WIRE_APPEND_ENTRIES && f->type <= RAFT_WIRE_TIMEOUT_NOW)
        raft_wire_message_free(&f->message);
}
