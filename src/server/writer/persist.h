/*
 * persist.h -- ordod's durability: recovery at start-up, the record stream
 * into the log, what the log has committed, back-pressure, read-only, and
 * snapshots. It joins the core (records) and the log, which it drives only
 * through the log seam (log/log.h): persist_open() opens the local WAL
 * (log/log_wal.h), or in cluster mode has writer/cluster.c open the raft
 * log. It owns s->persist (persist_t, below) and the loop's side of the
 * log (the wake-up from the log's thread, the snapshot's idle and worker
 * handles); it never speaks RESP.
 *
 * The rule: no reply before its record is committed. Every record that
 * changes state is appended to the log as it is applied, tagged with the
 * revision the state reached (one batch per loop turn, handed over by
 * persist_kick()). Each connection's output is marked with the log
 * position it waits for (net.c, writer_output_mark()). When the log wakes
 * the loop, persist only records what it committed: the position
 * (persist_committed()) and the highest committed revision
 * (persist_durable_rev(), the one the command layer compares revisions
 * with). It calls nothing: the turn's flush, later in the same loop
 * iteration, is where net sends what the new position allows
 * (net_flush()). Committed means synced under `fsync always`, written to
 * the kernel under `everysec` and `no`; in cluster mode, committed by a
 * majority.
 *
 * Back-pressure: while more than wal-pending-max-bytes of records wait
 * for the log, s->persist.paused is set (persist_paused()) and net reads
 * no client; the log's wake-up clears it once they no longer do, and net
 * reads clients again at that turn's flush. Nothing accepted is dropped:
 * the commands already read run, their records queue.
 *
 * If the log fails, server_readonly() says why, for good: writes, and
 * reads of state the log may not hold, are refused with -READONLY; output
 * that waits for positions the log never committed is never sent (net
 * closes those connections), and output not yet marked when it failed is
 * dropped with its connection (persist.c, enter_readonly()).
 *
 * Outside the writer, persist calls only the core (records, replay) and
 * the log (through the seam, and log_wal_open()); closing the connections
 * above when the log fails is net's, through the drop_unmarked hook
 * main.c installs (server.h).
 */
#ifndef ORDO_PERSIST_H
#define ORDO_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/buf.h"
#include "core/core.h"
#include "log/log.h"

typedef struct server_s server_t;

/* The snapshot being written, and the last ones' outcome (INFO). */
typedef struct persist_snap_s {
    bool running;
    uint64_t rev;                    /* the revision of the snapshot being written */
    uv_idle_t idle;                  /* writes the snapshot a slice per loop turn */
    uv_work_t work;                  /* syncs and renames it off the loop thread */
    int result;
    char err[512];
    uint64_t last_rev, last_ms, taken;
    uint64_t failed;                 /* snapshots that failed (INFO persistence) */
    char last_error[512];            /* why the last one failed; "" once one succeeds */
} persist_snap_t;

/* The server's durability (s->persist): owned by persist.c, loop thread
 * only. */
typedef struct persist_s {
    log_t *log;                      /* the log seam (log/log.h): the local WAL, or the raft log */
    log_batch_t batch;               /* this turn's records, handed to the log by persist_kick() */
    log_pos_t committed;             /* the log's committed position: output marked above it waits */
    uint64_t commits;                /* how often committed moved: net compares it, not positions */
    uint64_t committed_rev;          /* the highest revision whose record is committed */
    uv_async_t wake;                 /* the log thread's wake-up */
    char readonly[512];              /* non-empty: the log failed, writes are refused */
    void *fault;                     /* debug-wal-fault/-stall state, NULL unless testing */
    bool paused;                     /* back-pressure: clients are not read (persist.h) */
    uint64_t backpressure_events, backpressure_ms, backpressure_since_ms;
    persist_snap_t snap;
    uint64_t recovered_records, recovery_ms, snapshot_loaded_rev;
} persist_t;

/* persist_record_bytes_max() -- the longest record the writer can make
 * under the configured limits, which either log must take: one command's
 * (its names and value) or one transaction's (max-multi-bytes counts a
 * record header per queued argument, cmd_txn.c). A log sized below it
 * would turn a valid EXEC into a refused record and the server read-only. */
uint32_t persist_record_bytes_max(const server_t *s);

/* persist_open() -- open the log on the data directory (which must exist):
 * take its lock, read nothing, so a busy directory is refused at once.
 * Returns 0, or -1 with a message in err; persist_close() either way. */
int persist_open(server_t *s, char *err, size_t elen);

/* persist_recover() -- after persist_open(): load the snapshot, replay the
 * log after it, open the log for appending, start the loop handles.
 * Returns 0, or -1 with a message in err (the handles are closed again:
 * run the loop before persist_close()). */
int persist_recover(server_t *s, char *err, size_t elen);

/* persist_apply_stored() -- apply a record read back from a log (recovery,
 * or a committed entry a cluster member did not make itself) with the
 * same code, checking the state reaches the revision it was stored with.
 * Returns 0, or -1 with a message (not a record; another revision). */
int persist_apply_stored(server_t *s, uint64_t rev, const void *bytes, size_t len, char *err, size_t elen);

/* persist_record() -- add an applied record (its state change reached
 * revision rev) to this turn's batch. Returns 0, or -1 if the log has
 * failed or the record is larger than it takes (the server is read-only
 * now). */
int persist_record(server_t *s, const record_t *rec, uint64_t rev);

/* persist_kick() -- end of a loop turn, after the turn's flush: hand the
 * records not yet handed over to the log and flush it (log_flush: the
 * turn's records are written as one batch). Returns true if the log
 * committed them on this thread and the committed position moved (or the
 * log failed): then the caller flushes again, so their replies go in
 * this turn (no wake-up comes for them). */
bool persist_kick(server_t *s);

/* persist_backlogged() -- after taking in client input: hand the records
 * it made to the log (so they count), then true while the log's pending
 * bytes exceed wal-pending-max-bytes. On the change to true it sets
 * s->persist.paused (the caller stops reading clients); the log's wake-up
 * clears it once the log caught up. */
bool persist_backlogged(server_t *s);

/* persist_paused() -- back-pressure holds: no client may be read. Net
 * asks at every flush, and reads clients again once it is false. */
/* (inline, server.h) bool persist_paused(const server_t *s); */

/* persist_committed() -- the committed position, as of the log's last
 * wake-up: output marked with positions up to it may go (net.c). */
/* (inline, server.h) log_pos_t persist_committed(const server_t *s); */

/* persist_durable_rev() -- the highest revision whose record is
 * committed: on a single server the WAL's durable revision, in cluster
 * mode the revision the committed entries reach. What the command layer
 * compares revisions with; never a position. */
/* (inline, server.h) uint64_t persist_durable_rev(const server_t *s); */

/* persist_commits() -- how often the committed position moved: output
 * held at one count cannot go before it changes (net.c). (inline, server.h) */

/* persist_snapshot() -- start a snapshot unless one is running. Returns the
 * revision it covers, 0 if there is nothing to snapshot yet, or -1 with a
 * message. */
int64_t persist_snapshot(server_t *s, char *err, size_t elen);

/* persist_cron() -- periodic: start a snapshot when the log has grown past
 * snapshot-log-bytes. */
void persist_cron(server_t *s);

/* persist_info() -- the `# Persistence` section of INFO. */
void persist_info(server_t *s, ordo_buf_t *out);

/* persist_close_handles() -- close the loop handles (at shutdown, so the
 * loop can end). Only after persist_recover() succeeded. */
void persist_close_handles(server_t *s);

/* persist_close() -- hand over the last batch, commit what was appended,
 * close the log (releasing the directory). A no-op without a log. */
void persist_close(server_t *s);

#endif /* ORDO_PERSIST_H */
