/*
 * record.h -- the byte form of a record_t, as the write-ahead log stores it.
 *
 * Layout (all integers little-endian):
 *
 *   offset  size  field
 *        0     1  format (RECORD_FORMAT, 1)
 *        1     1  type (enum record_type)
 *        2     1  flags (enum record_flags)
 *        3     8  time_ms
 *       11     8  lease
 *       19     8  ifrev
 *       27     8  expire_at_ms
 *       35     8  incr (two's complement)
 *       43     8  arg_rev
 *       51     8  ttl_ms
 *       59     8  token
 *       67     1  kind
 *       68     4  klen
 *       72  klen  key
 *        .     4  vlen
 *        .  vlen  value
 *        .     4  nlen
 *        .  nlen  name (FENCE's lock; a queue's name)
 *        .     4  alen                      (format 2 only)
 *        .  alen  aux (Q.PUSH's dedup id)   (format 2 only)
 *
 * A record carries every input of its apply, so decoding and applying the
 * log reproduces the state exactly. The format byte lets a later version
 * read older logs: format 1 (before queues) has no aux field and decodes
 * with an empty one; encoding always writes format 2.
 */
#ifndef ORDO_RECORD_H
#define ORDO_RECORD_H

#include <stddef.h>

#include "base/buf.h"
#include "core.h"

#define RECORD_FORMAT 2
#define RECORD_FORMAT_V1 1     /* read only: no aux field */
#define RECORD_HEADER_BYTES 84 /* everything but key, value, name and aux bytes */

/* record_encode() -- append rec's byte form to out. */
void record_encode(const record_t *rec, ordo_buf_t *out);

/* record_decode() -- parse p[0..len) into *rec, whose key and value point
 * into p. Returns 0, or -1 if the bytes are not a well-formed record. */
int record_decode(const void *p, size_t len, record_t *rec);

#endif /* ORDO_RECORD_H */
