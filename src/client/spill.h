/*
 * spill.h -- the producer's spill file: an append-only log of accepted
 * messages and of how far they have been reported.
 *
 * Format (little-endian):
 *   "ORDOSPL1"                                  8-byte magic
 *   records: u32 body_len, u32 crc32(body), body
 *     body 'H': u16 id_len, id, u16 queue_len, queue      (first record)
 *     body 'M': u64 seq, u32 key_len, u32 payload_len, key, payload
 *     body 'A': u64 seq   -- every message with seq <= this is reported
 * A torn or corrupt tail (a crash mid-append) ends the log: recovery keeps
 * the valid prefix and truncates the rest, so the next append starts on a
 * record boundary. Records are never modified in place; the file is
 * replaced as a whole (write to PATH.tmp, fsync, rename) to compact it.
 */
#ifndef ORDO_CLIENT_SPILL_H
#define ORDO_CLIENT_SPILL_H

#include <stddef.h>
#include <stdint.h>

#define SPILL_MAGIC "ORDOSPL1"
#define SPILL_MAGIC_LEN 8
/* A record body above this is corruption, not a message: keys and payloads
 * are bounded by the producer (ORDO_PRODUCER_MSG_MAX). */
#define SPILL_BODY_MAX ((uint32_t)64 * 1024 * 1024)

uint32_t spill_crc32(const void *p, size_t n);

/* spill_frame() -- frame body as a record into out (out must have
 * 8 + n bytes). Returns the record's length. */
size_t spill_frame(char *out, const void *body, uint32_t n);

typedef struct spill_msg {
    uint64_t seq;
    const char *key; uint32_t key_len;
    const char *payload; uint32_t payload_len;
} spill_msg_t;

/* spill_scan() -- walk the records of a file image, calling on_msg for
 * every 'M' record in file order (the caller drops those at or below the
 * final *acked, known only at the end). *valid_len: length of the valid
 * prefix; *acked: highest 'A'; id/queue from 'H' (pointers into buf).
 * Returns 0, or -1 if the file is not a spill file. */
int spill_scan(const char *buf, size_t len, size_t *valid_len, uint64_t *acked,
               const char **id, size_t *id_len, const char **queue, size_t *queue_len,
               void (*on_msg)(void *arg, const spill_msg_t *m), void *arg);

#endif
