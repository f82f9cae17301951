/*
 * persist.h -- ordod's durability: recovery at start-up, the record stream
 * into the write-ahead log, the durable revision that releases replies, and
 * snapshots. It joins the core (records), the log (wal.c) and the snapshot
 * file (snapshot.c); it never speaks RESP.
 *
 * The rule (DESIGN.md): no reply before its record is durable. Every record
 * that changes state is appended to the log as it is applied, tagged with
 * the revision the state reached. Under `fsync always` each connection's
 * output is marked with the revision it depends on (net.c) and is sent
 * only once s->durable_rev reaches it; the log thread publishes progress
 * and persist moves s->durable_rev on the loop thread (at once, in
 * persist_kick(), when the loop thread synced a small batch itself:
 * fsync-inline-max). Under `everysec` and
 * `no`, replies are not held (durable_rev follows the applied revision).
 *
 * Back-pressure: while more than wal-pending-max-bytes of records wait
 * for the disk, s->wal_paused is set and no client is read (net.c); the
 * log's wake-up clears it once they no longer do. Nothing accepted is
 * dropped: the commands already read run, their records queue.
 *
 * If the log fails, s->readonly says why: writes are refused with
 * -READONLY, and output that waits for revisions the log never stored is
 * never sent (those connections are closed).
 */
#ifndef ORDO_PERSIST_H
#define ORDO_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server.h"

/* persist_open() -- load the snapshot, replay the log after it, open the
 * log for appending. Returns 0, or -1 with a message in err. */
int persist_open(server_t *s, char *err, size_t elen);

/* persist_record() -- append an applied record (its state change reached
 * revision rev). Returns 0 or -1 if the log has failed. */
int persist_record(server_t *s, const record_t *rec, uint64_t rev);

/* persist_kick() -- end of a loop turn: hand the turn's records to the log
 * thread as one batch. */
void persist_kick(server_t *s);

/* persist_backlogged() -- after taking in client input: true while the
 * log's pending bytes exceed wal-pending-max-bytes. On the change to true
 * it sets s->wal_paused (the caller stops reading clients); once the log
 * catches up, persist clears it and calls net_resume_reading(). */
bool persist_backlogged(server_t *s);

/* persist_durable() -- the revision replies may depend on now. */
uint64_t persist_durable(const server_t *s);

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
 * loop can end). */
void persist_close_handles(server_t *s);

/* persist_close() -- sync what was appended, stop the log thread. */
void persist_close(server_t *s);

#endif /* ORDO_PERSIST_H */
