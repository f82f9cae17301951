/*
 * raft_wire.h -- the byte form of what members say to each other
 * (raft_net.c): frames, and the encoding of the raft engine's six message
 * types, the hello, ping/pong and snapshot chunks. Pure: no I/O, no libuv;
 * the format itself is stated at the head of raft_wire.c.
 *
 * Encoders append whole frames to an ordo_buf_t (which aborts when memory
 * runs out, as every ordo buffer does). Decoding is two steps: the header
 * (raft_wire_header) says the frame's type and length as soon as 5 bytes
 * are in, and refuses a type or length that cannot be valid before the
 * body is read; raft_wire_decode() then checks the body against the format
 * and every limit below, and never reads outside body[0..len).
 *
 * Ownership of a decoded raft message (raft_wire_message_free releases
 * it): append entries hold one raft_malloc'd batch, the entries array
 * followed by every entry's data, with entries[i].batch pointing at it
 * (the raft convention: one free releases them all); install snapshot
 * holds its conf (raft_configuration_decode's allocations) and no data.
 * A chunk's data points into the body it was decoded from.
 */
#ifndef ORDO_RAFT_WIRE_H
#define ORDO_RAFT_WIRE_H

#include <raft.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Limits (each checked by the encoder, which refuses, and the decoder,
 * which calls the frame malformed). */

/* A frame's body. One entry holds the records of one loop turn, each at
 * most the log's record limit (1 GiB, WAL_RECORD_BYTES_LIMIT), so a frame
 * must hold at least that and its headers; this bounds what one frame can
 * make a member allocate. The driver splits appends to stay under it. */
#define RAFT_WIRE_FRAME_MAX ((1u << 30) + (1u << 20))
/* Entries in one append: a follower catching up gets them in appends of
 * at most this many (the driver splits). 65536 entries are 2 MiB of
 * struct raft_entry on a 64-bit host, allocated before any data. */
#define RAFT_WIRE_ENTRIES_MAX 65536u
/* A raft address "host:port": a DNS name is at most 253 bytes, then ':'
 * and 5 digits. */
#define RAFT_WIRE_ADDRESS_MAX 259u
/* An encoded configuration (raft_configuration_encode): about 270 bytes
 * per member with the longest address, so room for some 240 members; a
 * cluster has at most 16 (RAFT_LOG_MAX_MEMBERS). */
#define RAFT_WIRE_CONF_MAX (64u << 10)
/* A snapshot chunk's data: raft_net sends RAFT_NET_CHUNK (1 MiB). */
#define RAFT_WIRE_CHUNK_MAX (1u << 20)

#define RAFT_WIRE_HEADER_BYTES 5u  /* len u32 | type u8 */
#define RAFT_WIRE_MAGIC "ORDORAFT" /* 8 bytes, no NUL: the start of a hello */
#define RAFT_WIRE_VERSION 1u

/* Frame types. The six raft messages keep their enum raft_message_type
 * codes. */
enum raft_wire_type {
    RAFT_WIRE_APPEND_ENTRIES = 1,
    RAFT_WIRE_APPEND_ENTRIES_RESULT = 2,
    RAFT_WIRE_REQUEST_VOTE = 3,
    RAFT_WIRE_REQUEST_VOTE_RESULT = 4,
    RAFT_WIRE_INSTALL_SNAPSHOT = 5,
    RAFT_WIRE_TIMEOUT_NOW = 6,
    RAFT_WIRE_HELLO = 16,
    RAFT_WIRE_PING = 17,
    RAFT_WIRE_PONG = 18,
    RAFT_WIRE_CHUNK = 19,
};

typedef struct raft_wire_hello_s {
    uint64_t id;                                /* the sender, > 0 */
    char address[RAFT_WIRE_ADDRESS_MAX + 1];    /* its raft address, NUL-ended */
} raft_wire_hello_t;

/* Ping and pong: round seq; the sender's current term. */
typedef struct raft_wire_ping_s {
    uint64_t seq, term;
} raft_wire_ping_t;

/* Bytes [offset, offset + len) of the snapshot at (index, term), total
 * bytes long; last: the stream ends with this chunk. */
typedef struct raft_wire_chunk_s {
    uint64_t index, term;
    uint64_t offset, total;
    bool last;
    const void *data;
    uint32_t len;
} raft_wire_chunk_t;

/* A decoded frame: type says which member of the union is filled. */
typedef struct raft_wire_frame_s {
    uint8_t type;
    union {
        raft_wire_hello_t hello;
        raft_wire_ping_t ping;      /* RAFT_WIRE_PING and RAFT_WIRE_PONG */
        raft_wire_chunk_t chunk;
        struct raft_message message;    /* types 1..6; server_id 0, server_address NULL */
    };
} raft_wire_frame_t;

/* raft_wire_put_hello() -- append a hello; address is at most
 * RAFT_WIRE_ADDRESS_MAX bytes (asserted), id > 0. */
void raft_wire_put_hello(ordo_buf_t *b, uint64_t id, const char *address);

/* raft_wire_put_ping() -- append a ping or pong (type RAFT_WIRE_PING or
 * RAFT_WIRE_PONG). */
void raft_wire_put_ping(ordo_buf_t *b, uint8_t type, uint64_t seq, uint64_t term);

/* raft_wire_put_chunk() -- append a chunk; c->len <= RAFT_WIRE_CHUNK_MAX
 * and offset + len <= total (asserted). */
void raft_wire_put_chunk(ordo_buf_t *b, const raft_wire_chunk_t *c);

/* raft_wire_put_message() -- append a raft message; install snapshot
 * without its data (chunks carry it). Returns 0, or -1 with nothing
 * appended: too many entries, a frame past RAFT_WIRE_FRAME_MAX, a conf
 * past RAFT_WIRE_CONF_MAX, an entry of an unknown type, an unknown
 * message type, or no memory to encode the conf. */
int raft_wire_put_message(ordo_buf_t *b, const struct raft_message *m);

/* raft_wire_header() -- read a frame's header from buf[0..len). Returns 1
 * when a full header is there (*type and *body_len set: the frame is
 * RAFT_WIRE_HEADER_BYTES + *body_len bytes), 0 when fewer than
 * RAFT_WIRE_HEADER_BYTES bytes are, -1 when the header cannot start a
 * valid frame (unknown type, or a length no frame of that type has), with
 * *why saying which (a static string). */
int raft_wire_header(const void *buf, size_t len, uint8_t *type, uint32_t *body_len, const char **why);

/* raft_wire_decode() -- decode the body of a frame of the given type.
 * Returns 0 with *out filled (release with raft_wire_frame_free), or -1
 * with *why set (static) and nothing to release. Memory running out
 * aborts, as for every ordo buffer. */
int raft_wire_decode(uint8_t type, const void *body, size_t len, raft_wire_frame_t *out, const char **why);

/* raft_wire_frame_free() -- release what a decoded frame owns (its raft
 * message's allocations); other types own nothing. */
void raft_wire_frame_free(raft_wire_frame_t *f);

/* raft_wire_message_free() -- release a decoded raft message's entries
 * batch, conf and snapshot data (whichever its type has). */
void raft_wire_message_free(struct raft_message *m);

#endif /* ORDO_RAFT_WIRE_H */
