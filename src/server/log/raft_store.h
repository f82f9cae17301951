/*
 * raft_store.h -- a cluster member's durable raft state, kept by ordod
 * (not by C raft's legacy storage): its term and vote, the metadata of its
 * last snapshot, and its log entries after that snapshot.
 *
 * The raft engine (raft_step) decides what must be durable; the driver
 * (raft_log.c) asks this store, and tells the engine when it is. The
 * engine itself keeps no entry data, so the store also holds every entry
 * it has in memory, by index, for the driver to send to members behind
 * and to apply: the store's memory is the log since the last compaction
 * (bounded by how often snapshots are taken: cluster-snapshot-entries).
 *
 * Files under the directory given to raft_store_open() (<data>/raft):
 *   meta            term, vote and snapshot metadata, in two slots written
 *                   alternately (sequence number and crc32c each): the valid
 *                   slot with the higher sequence is the state, so a torn
 *                   write of one slot leaves the other;
 *   seg-*           entry segments, appended in index order; a torn or
 *                   corrupt tail (crc mismatch) is cut at load, and
 *                   nothing after the first bad record is believed.
 * The on-disk format is stated at the head of raft_store.c.
 *
 * Durability and order: operations take effect in memory at once and
 * reach the disk in the order they were made. Entry writes and their
 * fsync run on a worker thread (libuv's pool), one write at a time, every
 * append made meanwhile joining the next (group commit); the persisted
 * callback then reports, on the loop, the last index of the batch that is
 * durable. Term, vote and snapshot metadata are written and synced before
 * the call returns (they are small and rare: elections and snapshots).
 *
 * Threads: every call on the loop thread; the callback runs on it too.
 */
#ifndef ORDO_RAFT_STORE_H
#define ORDO_RAFT_STORE_H

#include <raft.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

typedef struct raft_store_s raft_store_t;

/* A failed entry write is tried again this long after it failed: a full
 * disk or a passing I/O error clears on an operator's time scale, and
 * five tries a second keep the pool thread and the log quiet while
 * costing at most a fifth of a second once the disk is back. */
#define RAFT_STORE_RETRY_MS 200u
/* A segment takes entries while it is shorter than this (so it exceeds it
 * by at most one entry): large enough that a busy log rolls rarely, small
 * enough that compaction, which deletes whole segments, frees the disk
 * soon after a snapshot. */
#define RAFT_STORE_SEGMENT_BYTES (UINT64_C(8) << 20)
/* The largest entry the format takes (its length is a u32): far above any
 * entry the driver builds. raft_store_append() refuses a larger one. */
#define RAFT_STORE_ENTRY_BYTES_MAX (1u << 30)
/* The largest encoded configuration a meta slot holds: a slot is written
 * whole on every vote, and raft clusters have a handful of members (a
 * member costs its address and ten bytes). */
#define RAFT_STORE_CONF_BYTES_MAX 16384u

/* A snapshot's metadata as raft knows it. index 0: no snapshot. */
typedef struct raft_store_snap_s {
    uint64_t index, term;
    uint64_t conf_index;
    struct raft_configuration conf;   /* owned by whoever holds the struct */
} raft_store_snap_t;

typedef struct raft_store_stats_s {
    uint64_t entries;            /* held in memory (first..last) */
    uint64_t bytes;              /* their data bytes */
    uint64_t disk_bytes;         /* segment files on disk (once the writes queued are done) */
    uint64_t writes, syncs;      /* worker writes and fsyncs done */
    uint64_t write_errors;       /* writes that failed (and are retried) */
    const char *failing;         /* non-NULL: the last write failed, why (retried until it
                                    succeeds); valid until the next call on the store */
    uint64_t segments;           /* segment files (those planned by writes not yet done included) */
} raft_store_stats_t;

/* Called on the loop when entries first..last (inclusive) are durable:
 * the entries of the batch just synced. Entries replaced (an append at an
 * index at or below theirs) after the batch went to the worker are left
 * out (last is lowered, and nothing is reported if none is left), and a
 * batch dropped by raft_store_install() reports nothing: first..last are
 * always entries held now, unless a snapshot dropped them meanwhile. The
 * callback may call the store. */
typedef void (*raft_store_persisted_cb)(void *arg, uint64_t first, uint64_t last);

/* raft_store_open() -- create dir (and its files) if absent, or load
 * them: term, vote, snapshot metadata and every entry of the segments
 * kept, which may begin at or below the snapshot's index (the trailing
 * entries the last raft_store_set_snapshot() kept, or more: compaction
 * deletes whole segments; raft_store_first() says). A torn tail
 * is cut (raft_store_cut() says how much, for the caller to log). Returns
 * 0, or -1 with a message naming the file and the fault when the files
 * cannot be believed (both meta slots bad, a gap between segments or
 * between the snapshot and the first entry). */
int raft_store_open(const char *dir, uv_loop_t *loop, raft_store_persisted_cb cb, void *arg, raft_store_t **out,
                    char *err, size_t elen);

/* raft_store_quiesce() -- shutting down: a failing write is retried no
 * more (its timer would keep the loop alive); close() makes the last
 * attempt. */
void raft_store_quiesce(raft_store_t *s);

/* raft_store_close() -- waits (blocking the loop thread) for a write in
 * flight on the worker, then writes what is still unwritten once, on the
 * calling thread (no callback reports it; a failure is printed), and frees
 * everything. The loop still owes the store's work request and handles
 * their completion callbacks, which free only their own memory: run the
 * loop once more (uv_run) before uv_loop_close(). NULL is a no-op. */
void raft_store_close(raft_store_t *s);

uint64_t raft_store_term(const raft_store_t *s);
uint64_t raft_store_vote(const raft_store_t *s);
/* The last snapshot's metadata (index 0: none). Borrowed. */
const raft_store_snap_t *raft_store_snapshot(const raft_store_t *s);
/* The first entry held (last + 1 when none is held). */
uint64_t raft_store_first(const raft_store_t *s);
/* The last entry held, or the snapshot's index when none is. */
uint64_t raft_store_last(const raft_store_t *s);
/* The entry at index, or NULL if not held. Borrowed until the next call
 * that changes the store. entry->batch is NULL (the store owns the data). */
const struct raft_entry *raft_store_entry(const raft_store_t *s, uint64_t index);
/* Bytes the last load cut from a torn or corrupt tail (0: none). */
uint64_t raft_store_cut(const raft_store_t *s);

/* raft_store_set_term_vote() -- durable on return. Returns 0 or -1. */
int raft_store_set_term_vote(raft_store_t *s, uint64_t term, uint64_t vote, char *err, size_t elen);

/* raft_store_append() -- entries[0..n) at index, index <= last + 1: every
 * entry held from index on is replaced first (a follower's conflict).
 * The data is copied. Written on the worker; the callback reports it.
 * A write that fails (no space, an I/O error) is kept and retried every
 * RAFT_STORE_RETRY_MS until it succeeds; stats say so meanwhile, and
 * later appends wait behind it (the driver stops submitting).
 * Appends made in one loop turn go to the worker together, at the end of
 * the turn (an idle handle), as one write and one fsync.
 * Returns 0, or -1 (no memory, an entry over RAFT_STORE_ENTRY_BYTES_MAX)
 * with nothing changed. */
int raft_store_append(raft_store_t *s, uint64_t index, const struct raft_entry *entries, unsigned n, char *err,
                      size_t elen);

/* raft_store_set_snapshot() -- a snapshot at snap->index (an index held,
 * or below the first held) is complete on disk: record its metadata
 * (copied), durable on return, and drop the entries up to
 * snap->index - trailing from memory and disk (whole segment files whose
 * entries all go). Returns 0 or -1. */
int raft_store_set_snapshot(raft_store_t *s, const raft_store_snap_t *snap, uint64_t trailing, char *err,
                            size_t elen);

/* raft_store_install() -- a snapshot received from the leader replaces
 * the log: its metadata recorded (durable on return), every entry dropped
 * (memory and disk, writes in flight included: their callback reports
 * nothing), and the next append is at snap->index + 1. Returns 0 or -1. */
int raft_store_install(raft_store_t *s, const raft_store_snap_t *snap, char *err, size_t elen);

void raft_store_stats(const raft_store_t *s, raft_store_stats_t *out);

/* A test seam: the system calls that write the store's files (segments
 * and meta) and sync them (files and the directory), so tests can make
 * them fail (EIO, ENOSPC) without mocking the file system; each returns
 * what the system call would (-1 and errno on failure). NULL members mean
 * the real calls. segment_bytes, when not 0, replaces
 * RAFT_STORE_SEGMENT_BYTES for segments started from then on, so tests
 * roll segments without writing megabytes. The worker reads a copy taken
 * when each write is handed to it. */
typedef struct raft_store_seam_s {
    ssize_t (*pwrite_fn)(void *ctx, int fd, const void *buf, size_t n, off_t off);
    int (*fsync_fn)(void *ctx, int fd);
    void *ctx;
    uint64_t segment_bytes;
} raft_store_seam_t;
void raft_store_set_seam(raft_store_t *s, const raft_store_seam_t *seam);

#endif /* ORDO_RAFT_STORE_H */
