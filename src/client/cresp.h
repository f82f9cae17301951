/*
 * cresp.h -- the client's RESP2/RESP3 reply parser and command encoder.
 *
 * The parser is resumable at element granularity: cresp_parse() is given
 * the unread bytes of the connection (they must start where the previous
 * call's *used ended) and consumes complete elements only. A torn element
 * (a header line without its CRLF, a bulk string without all of its bytes)
 * is left unread and the call returns CRESP_NEED_MORE; the partial tree
 * built so far is kept in the parser, so a reply of a million elements
 * arriving in small pieces is parsed once, not once per piece.
 *
 * Invariants: stack[0..depth) are the open aggregates, innermost last;
 * each has filled < want children. A complete top-level reply is handed
 * out and the parser is empty again (depth 0, nothing held).
 * Attribute frames (`|`) are parsed and dropped, as RESP3 allows.
 * Streamed strings and aggregates (`$?`, `*?`) are refused as protocol
 * errors: ordod never sends them.
 *
 * Bounds: a server decides how much a reply holds, so the parser counts
 * what one top-level reply costs as it is built -- every element
 * (sizeof(ordo_reply_t) plus its slot in the parent) and every string byte
 * -- and fails the parse as soon as bytes_max or elems_max would be
 * passed. A bulk string is judged by its header, before its body is
 * awaited, so the connection's input buffer never holds more than one
 * reply's allowance either. 0 means no bound (the fake servers of the
 * tests, the fuzzer).
 */
#ifndef ORDO_CLIENT_CRESP_H
#define ORDO_CLIENT_CRESP_H

#include <stddef.h>
#include <stdint.h>

#include "ordo/client.h"

/* A header line longer than this is a protocol error: no RESP header needs
 * more than a type byte, a 20-digit number and CRLF; simple strings and
 * errors are short. 64 KiB leaves room for verbose error texts. */
#define CRESP_LINE_MAX (64 * 1024)
/* Bulk strings are capped as Redis caps them (proto-max-bulk-len). */
#define CRESP_BULK_MAX ((int64_t)512 * 1024 * 1024)
/* Aggregates: children are allocated as they arrive, so this only bounds a
 * count the server could not mean. */
#define CRESP_AGG_MAX ((int64_t)1 << 30)
/* Nesting: ordod's deepest reply is 3 levels; 32 is generous. */
#define CRESP_DEPTH_MAX 32

enum { CRESP_DONE = 1, CRESP_NEED_MORE = 0, CRESP_ERROR = -1, CRESP_NOMEM = -2 };

typedef struct cresp_frame {
    ordo_reply_t *agg;
    int64_t want;       /* children expected */
    size_t cap;         /* slots allocated in agg->elem */
    int attribute;      /* drop when complete */
} cresp_frame_t;

typedef struct cresp_parser {
    cresp_frame_t stack[CRESP_DEPTH_MAX];
    int depth;
    const char *error;  /* static text of the last protocol error */
    int64_t bytes_max;  /* one reply's memory; 0: no bound */
    int64_t elems_max;  /* one reply's elements; 0: no bound */
    int64_t bytes, elems;  /* the reply being built */
    int64_t last_bytes;    /* what the last finished reply cost */
} cresp_parser_t;

/* What one element costs against bytes_max besides its string: the node
 * and the parent's pointer to it. */
#define CRESP_ELEM_COST ((int64_t)(sizeof(ordo_reply_t) + sizeof(ordo_reply_t *)))

void cresp_init(cresp_parser_t *p);
/* cresp_set_limits() -- bound every later reply (0: no bound). */
void cresp_set_limits(cresp_parser_t *p, int64_t bytes_max, int64_t elems_max);
/* Frees a partly built reply. */
void cresp_reset(cresp_parser_t *p);

/* cresp_parse() -- parse from buf[0..len). *used is set to the bytes
 * consumed (also on NEED_MORE: those bytes are in the parser now and must
 * not be passed again). CRESP_DONE with *out a complete reply (owned by the
 * caller; p->last_bytes is what it cost), CRESP_NEED_MORE, CRESP_ERROR
 * (p->error says why, a bound included; the stream cannot be
 * resynchronised), CRESP_NOMEM. */
int cresp_parse(cresp_parser_t *p, const char *buf, size_t len, size_t *used,
                ordo_reply_t **out);

/* A growable byte buffer for encoded commands and unread input. */
typedef struct cresp_buf {
    char *data;
    size_t len, cap;
} cresp_buf_t;

int cresp_buf_reserve(cresp_buf_t *b, size_t extra);
int cresp_buf_append(cresp_buf_t *b, const void *p, size_t n);
void cresp_buf_consume(cresp_buf_t *b, size_t n);
void cresp_buf_free(cresp_buf_t *b);

/* cresp_encode() -- append a command as a RESP array of bulk strings. */
int cresp_encode(cresp_buf_t *b, int argc, const char *const *argv, const size_t *lens);

#endif
