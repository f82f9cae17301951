/*
 * record.h -- the byte form of a record_t (core.h), as the write-ahead log
 * stores it: the record's payload inside a log frame (wal.c).
 *
 * FORMAT 3 (RECORD_FORMAT, written from now on): only the fields the
 * record's type uses. All integers little-endian.
 *
 *   offset  size  field
 *        0     1  format, 3
 *        1     1  type (enum record_type)
 *        2     2  flags (enum record_flags; only record_flags_allowed(type))
 *        4     8  time_ms
 *       12     .  the type's fields, in the order of the slots below; a
 *                 slot is present if and only if the type's row names it
 *
 *   slot     size        slot     size
 *   LEASE    8           KIND     1
 *   IFREV    8           KEY      4 (length) + bytes
 *   EXPIRE   8           VAL      4 (length) + bytes
 *   INCR     8 (two's c) NAME     4 (length) + bytes
 *   ARG      8           AUX      4 (length) + bytes
 *   TTL      8
 *   TOKEN    8
 *
 *   type              slots (record_t field)
 *   PUT               LEASE (put.lease_id), IFREV (put.ifrev) if IFREV,
 *                     EXPIRE (put.expire_at_ms), TOKEN (put.fence_token) if
 *                     FENCE, KEY (put.key), VAL (put.val), NAME
 *                     (put.fence_lock) if FENCE
 *   DEL               IFREV if IFREV, TOKEN if FENCE, KEY, NAME if FENCE
 *   INCR              INCR (incr.by), KEY
 *   EXPIRE            KEY (expire.key)
 *   COMPACT           ARG (compact.rev)
 *   KEY_TTL           EXPIRE (key_ttl.expire_at_ms), KEY (key_ttl.key)
 *   APPEND            KEY (append.key), VAL (append.val)
 *   FLUSH             (none)
 *   LEASE_GRANT       TTL (lease.ttl_ms)
 *   LEASE_KEEPALIVE,
 *   LEASE_REVOKE      LEASE (lease.lease_id)
 *   LOCK_ACQUIRE      LEASE (lock.lease_id), TTL (lock.ttl_ms), KEY (lock.name)
 *   LOCK_RELEASE      TOKEN (lock.token), KEY
 *   LOCK_EXTEND       TTL, TOKEN, KEY
 *   ELECT_CAMPAIGN    LEASE (elect.lease_id), TTL (elect.ttl_ms), KEY
 *                     (elect.name), VAL (elect.val)
 *   ELECT_PROCLAIM    TOKEN (elect.term), KEY, VAL
 *   ELECT_KEEPALIVE   TOKEN, KEY
 *   ELECT_RESIGN      TOKEN, KEY, VAL if HANDOVER
 *   COORD_EXPIRE      TOKEN (coord_expire.id), KIND (.kind), KEY (.name)
 *   Q_PUSH            TTL (q_push.delay_ms), KEY (.key), VAL (.payload),
 *                     NAME (.queue), AUX (.dedup_id), ARG (.idem_hash) and
 *                     EXPIRE (.idem_ms) if IDEM
 *   Q_DELIVER         TTL (q_deliver.lease_ms), NAME
 *   Q_ACK             ARG (q_ack.msg_id), TOKEN (.token), VAL (.result) if
 *                     RESULT, NAME
 *   Q_NACK            ARG (msg_id), TTL (q_nack.delay_ms), TOKEN, NAME
 *   Q_EXTEND          ARG (msg_id), TTL (q_extend.ttl_ms), TOKEN, NAME
 *   Q_CONFIG          KEY (q_config.deadletter), VAL (.config), NAME
 *   Q_DROP, Q_PROMOTE NAME (q.queue)
 *   Q_UNPARK          KEY (q_unpark.key), NAME
 *   Q_REDELIVER       ARG (msg_id), TOKEN, NAME
 *   Q_DEDUP_END       NAME, AUX (q_dedup_end.dedup_id), KEY (.key) if IDEM
 *   Q_RESULT_END      ARG (msg_id), NAME
 *   Q_RETRY           ARG (q_retry.msg_id), TTL (.delay_ms), TOKEN (.token),
 *                     KIND (.kind: enum queue_retry_flags), NAME
 *   Q_PAUSE           EXPIRE (q_pause.until_ms), KIND (.op: enum q_pause_op),
 *                     KEY (.key), NAME
 *   Q_REDRIVE         ARG (q_redrive.msg_id), KEY (.key), NAME (.queue), AUX (.dlq)
 *   Q_CANCEL,
 *   Q_EXPIRE          ARG (q_msg.msg_id), KEY (.key), NAME (.queue)
 *   Q_SCHEDULE_ADD    KEY (q_sched.key), VAL (.spec), NAME (.queue), AUX (.name)
 *   Q_SCHEDULE_DEL    NAME (q_sched.queue), AUX (.name)
 *   Q_TICK            EXPIRE (q_sched.tick_ms), NAME, AUX
 *   TXN               ARG (txn.count), VAL (txn.recs): count sub-records,
 *                     each a u32 length and then its own format-3 byte
 *                     form, never a TXN; decode checks every one
 *   ACL_SETUSER       KEY (acl.name), VAL (acl.rules: the user's canonical
 *                     description, acl.h; passwords as SHA-256 hashes)
 *   ACL_DELUSER       KEY (acl.name)
 *
 * The slots are the fields of formats 1 and 2 below, in their order, so a
 * record of any format maps to the same typed record through one table
 * (record.c, bind() and uses()).
 *
 * FORMATS 2 AND 1 (read only): every slot of every type, fixed size.
 *
 *   offset  size  field
 *        0     1  format, 2 (or 1)
 *        1     1  type
 *        2     1  flags: bit 0 meant COALESCE in Q_PUSH, NOACK in
 *                 Q_DELIVER and RESULT in Q_ACK (IFREV elsewhere); decode
 *                 remaps it by type to today's distinct bits
 *        3     8  time_ms
 *       11     8  LEASE        43     8  ARG
 *       19     8  IFREV        51     8  TTL
 *       27     8  EXPIRE       59     8  TOKEN
 *       35     8  INCR         67     1  KIND
 *       68     .  KEY, VAL, NAME (each a u32 length + bytes), then AUX
 *                 (format 2 only: format 1 predates queues)
 *
 * Decode refuses (returns -1) an unknown format or type, flags the type
 * does not allow, a slot its type does not use holding a non-zero value
 * (formats 1 and 2), a short record and trailing bytes. A record carries
 * every input of its apply, so decoding and applying the log reproduces
 * the state exactly.
 */
#ifndef ORDO_RECORD_H
#define ORDO_RECORD_H

#include <stddef.h>

#include "base/buf.h"
#include "core.h"

#define RECORD_FORMAT 3        /* written */
#define RECORD_FORMAT_V2 2     /* read only: every slot, one flags byte */
#define RECORD_FORMAT_V1 1     /* read only: format 2 without AUX */
/* At most this many bytes of a record, in any format, are not key, value,
 * name or aux bytes (format 2's fixed part; format 3's is at most 56), so
 * a log sized with it takes any record. */
#define RECORD_HEADER_BYTES 84

/* record_encode() -- append rec's byte form (format 3) to out. rec must be
 * record_valid() (asserted). */
void record_encode(const record_t *rec, ordo_buf_t *out);

/* record_decode() -- parse p[0..len) of any format into *rec, whose byte
 * fields point into p. Returns 0, or -1 if the bytes are not a well-formed
 * record (*rec is then undefined). */
int record_decode(const void *p, size_t len, record_t *rec);

/* record_txn_next() -- the sub-record of a REC_TXN at *off (start at 0)
 * into *sub (byte fields point into t->recs), advancing *off. Returns 1, 0
 * at the end, or -1 if the bytes there are no well-formed sub-record. */
int record_txn_next(const rec_txn_t *t, size_t *off, record_t *sub);

/* record_format() -- the format a record's bytes were written in (its first
 * byte), 0 if len is 0: recovery tells when it read an older format. */
int record_format(const void *p, size_t len);

#endif /* ORDO_RECORD_H */
