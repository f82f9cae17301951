/*
 * snapshot.h -- the snapshot file: the live keys as of one revision, so
 * recovery need not replay the whole log.
 *
 * Which revision: the store's compaction point R. Every change after R is
 * still in the log (segments are removed only up to R), so loading the
 * snapshot and replaying the log after it rebuilds not only the current
 * state but the retained history too: watches can resume from any revision
 * >= R after a restart, as before it.
 *
 * File layout (integers little-endian):
 *
 *   header   "ORDOSNAP" (8) | format u32 (1) | rev u64 | created_ms u64
 *   entries  tag u8 = 'K' | klen u32 | key | vlen u32 | value
 *            | create_rev u64 | mod_rev u64 | version u64 | lease u64
 *            | expire_at_ms u64
 *   trailer  tag u8 = 'E' | entries u64 | crc32c u32 of every byte before it
 *
 * The file is written as <dir>/snapshot.tmp, synced, renamed over
 * <dir>/snapshot.ordo, and the directory synced: at every moment the
 * directory holds one complete snapshot (the old or the new) or none.
 *
 * A snapshot is written by the core thread a slice at a time between other
 * work (snap_writer_step), so taking one never stops the server; only the
 * final sync runs on a worker thread.
 */
#ifndef ORDO_SNAPSHOT_H
#define ORDO_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "core.h"

#define SNAP_FILE "snapshot.ordo"
#define SNAP_TMP_FILE "snapshot.tmp"
#define SNAP_FORMAT 1

typedef struct snap_writer_s {
    int fd;
    uint64_t rev;
    uint64_t entries;
    uint32_t crc;
    ordo_buf_t buf;        /* encoded, not yet written */
    ordo_buf_t after;      /* last key written: the next slice starts after it */
    bool have_after;
    bool finished;         /* every key encoded and the trailer written */
    char tmp_path[1100];
    char path[1100];
    char dir[1024];
} snap_writer_t;

/* snap_writer_begin() -- create dir/snapshot.tmp for revision rev and write
 * the header. Returns 0, or -1 with a message in err. */
int snap_writer_begin(snap_writer_t *w, const char *dir, uint64_t rev, uint64_t now_ms, char *err, size_t elen);

/* snap_writer_step() -- encode and write up to max_keys more keys (as of
 * w->rev, which must stay >= the store's compaction point meanwhile).
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

#endif /* ORDO_SNAPSHOT_H */
