/*
 * snapshot.h -- the snapshot file: the whole state as of one revision R,
 * with the retained history, so recovery replays only the log after R.
 *
 * What it holds, all as of R (the revision when the snapshot began):
 *   - the coordination state (leases, locks, elections; coord.h), captured
 *     at once when the snapshot begins (it is small);
 *   - the queues (queue.h): each queue's configuration, messages (waiting,
 *     in flight with their tokens and lease deadlines, delayed), dedup
 *     entries, idempotency keys and kept results, also captured at once when the snapshot
 *     begins (encoding is O(messages) on the loop thread: a million waiting
 *     messages cost a pause of the order of 100 ms, and the buffer holds
 *     them until the first slice writes it);
 *   - the users (acl.h), each as its canonical description (passwords as
 *     hashes only), captured at once when the snapshot begins;
 *   - the store's retained history: each key's base version (the value
 *     visible just below the compaction point P), then every change of the
 *     change log from P to R. Versions at or below R never change and
 *     compaction is pinned at P meanwhile, so these can be written a slice
 *     per loop turn while the server goes on;
 *   - key expiry deadlines, as they are when written: any record after R
 *     that changed a deadline is replayed after the load and sets it again
 *     (expiry itself is an explicit record, so replay never depends on a
 *     deadline to delete a key).
 * Loading rebuilds the store's versions, create revisions and change log
 * exactly, so reads and watches at any retained revision work after a
 * restart as before it. Log segments with records <= R can then go.
 *
 * File layout (integers little-endian):
 *
 *   header  "ORDOSNAP" (8) | format u32 (5; 4, 3 and 2 are read) | rev u64 | point u64 | created_ms u64
 *   'C'     coordination item: kind u8 | id u64 | lease u64 | ttl_ms u64 | deadline_ms u64
 *           | nlen u32 | name | vlen u32 | value | has_handover u8 (0 none, 1 handed over by
 *           a resign, 2 a lapsed term's last value) | hlen u32 | handover
 *   'Q'     queue: nlen u32 | name | clen u32 | config (core_qconfig_encode) | dlen u32 | dead-letter name
 *           (empty: none); the 'M', 'U', 'I', 'R', 'Z', 'T', 'O' entries after it belong to it
 *   'M'     message: state u8 | id u64 | klen u32 | key | plen u32 | payload | attempt u64
 *           | parked u8 | token u64 | since_ms u64 | deadline_ms u64
 *   'U'     dedup entry: dlen u32 | dedup id | msg_id u64 | end_ms u64
 *   'I'     idempotency key (format 4): klen u32 | message key | ilen u32 | idempotency key
 *           | hash u64 | msg_id u64 | end_ms u64
 *   'R'     result: id u64 | fate u8 | rlen u32 | result | expire_ms u64 | dl_id u64
 *   'A'     user (format 5): nlen u32 | name | rlen u32 | rules (acl_user_describe())
 *   'Z'     pause (format 5): is_key u8 (0: the queue's own) | until_ms u64 (0: until resumed)
 *           | klen u32 | key (empty for the queue's own)
 *   'T'     rate bucket (format 5): flags u8 (1: a key's, else the queue's; 2: the key is
 *           throttled) | level u64 | last_ms u64 | release_ms u64 | klen u32 | key
 *   'O'     ready order (format 5; FAIRNESS roundrobin, after the queue's other entries): n u64
 *           | n x (klen u32 | key), the ready keys in turn order
 *   'S'     schedule (format 5; after the queues): name | queue | key | payload (each u32
 *           length + bytes) | missed u8 | every_ms u64 | start_ms u64 | cron (u32 + bytes)
 *           | next_ms u64 | pushed u64 | skipped u64
 *   'B'     base: klen u32 | key | vlen u32 | value | create_rev u64 | mod_rev u64
 *           | version u64 | lease u64
 *   'P'/'D' change (put / delete): klen u32 | key | vlen u32 | value | lease u64 | rev u64
 *   'X'     deadline: klen u32 | key | deadline_ms u64
 *   'E'     trailer: entries u64 | crc32c u32 of every byte before the crc
 *
 * The file is written as <dir>/snapshot.tmp, synced, renamed over
 * <dir>/snapshot.ordo, and the directory synced: at every moment the
 * directory holds one complete snapshot (the old or the new) or none.
 */
#ifndef ORDO_SNAPSHOT_H
#define ORDO_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/core.h"

#define SNAP_FILE "snapshot.ordo"
#define SNAP_TMP_FILE "snapshot.tmp"
#define SNAP_FORMAT 5
#define SNAP_FORMAT_V4 4  /* read: the same without users ('A'), pauses ('Z'), buckets ('T'), schedules
                            ('S') and with 38-byte queue configurations */
#define SNAP_FORMAT_V3 3  /* read: the same without idempotency keys ('I') */
#define SNAP_FORMAT_V2 2  /* read: the same without queue entries */

typedef struct snap_writer_s {
    int fd;
    int phase;             /* 0 bases, 1 changes, 2 deadlines, 3 done */
    uint64_t rev;
    uint64_t point;        /* compaction point when the snapshot began */
    uint64_t log_after;    /* changes: the last revision written */
    uint64_t entries;
    uint32_t crc;
    ordo_buf_t buf;        /* encoded, not yet written */
    ordo_buf_t after;      /* last key written: the next slice starts after it */
    bool have_after;
    bool finished;         /* every key encoded and the trailer written */
    bool mem;              /* no file: the snapshot stays in buf (snap_encode_mem, snap_digest) */
    bool digest_on;        /* snap_digest: entries are hashed into digest, then dropped; no header's
                              time, history bases or trailer, and live keys as 'K' entries */
    size_t entry_at;       /* digest: where the entry being encoded starts in buf */
    uint64_t digest, digest_queue;
    char tmp_path[1100];
    char path[1100];
    char dir[1024];
} snap_writer_t;

/* snap_writer_begin() -- create dir/snapshot.tmp for the core's current
 * revision, write the header and the coordination state. The caller pins
 * compaction at w->point until the snapshot ends. Returns 0, or -1 with a
 * message in err. */
int snap_writer_begin(snap_writer_t *w, const char *dir, const core_t *core, uint64_t now_ms, char *err,
                      size_t elen);

/* snap_writer_step() -- encode and write up to max_keys more entries.
 * Returns 1 when the last key and the trailer are written, 0 if more
 * remain, -1 on a write error (message in err). */
int snap_writer_step(snap_writer_t *w, const core_t *core, size_t max_keys, char *err, size_t elen);

/* snap_writer_commit() -- fdatasync the file, rename it into place, sync
 * the directory. Blocking: run it off the core thread. Returns 0 or -1. */
int snap_writer_commit(snap_writer_t *w, char *err, size_t elen);

/* snap_writer_abort() -- close and remove the temporary file. */
void snap_writer_abort(snap_writer_t *w);

/* snap_load() -- load dir/snapshot.ordo into a fresh core. *rev_out is the
 * snapshot's revision (0 and nothing loaded if there is no snapshot).
 * Returns 0, or -1 if the file is damaged (message names it). */
int snap_load(core_t *core, const char *dir, uint64_t *rev_out, uint64_t *entries_out, char *err, size_t elen);

/* snap_load_mem() -- the same from a snapshot's bytes in memory (a raft
 * member sent one); what names it in messages. */
int snap_load_mem(core_t *core, const void *data, size_t len, const char *what, uint64_t *rev_out,
                  uint64_t *entries_out, char *err, size_t elen);

/* snap_encode_mem() -- the whole snapshot of the core as it is now, in one
 * pass on the calling thread, into *out (the caller frees it): a raft
 * snapshot. Its cost is the file's: O(state) with the loop waiting.
 * Returns 0. */
int snap_encode_mem(const core_t *core, uint64_t now_ms, ordo_buf_t *out);

/* snap_digest() -- a 64-bit digest of the state raft replicates
 * deterministically (DEBUG DIGEST): the revision, every live key's current
 * version (key, value, create_rev, mod_rev, version, lease), the key
 * deadlines, coordination, queues, users and schedules; not the time, and
 * not the retained history or tombstones, whose window is this member's
 * own (its history bounds, its snapshot's pin, the snapshot it installed).
 * Independent of the order tables are walked in: members that applied the
 * same entries have the same digest. O(state): it walks every key, on the
 * calling thread. */
uint64_t snap_digest(const core_t *core);

/* snap_digest_history() -- snap_digest() with every key change after
 * from_rev hashed in as well (DEBUG DIGEST HISTORY), into *digest_out.
 * Returns 0, or -1 if this member no longer holds the changes after
 * from_rev (from_rev + 1 < kv_oldest_rev()). O(state + changes). */
int snap_digest_history(const core_t *core, uint64_t from_rev, uint64_t *digest_out);

#endif /* ORDO_SNAPSHOT_H */
