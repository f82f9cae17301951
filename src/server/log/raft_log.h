/*
 * raft_log.h -- the log seam (log.h) over C raft: cluster mode.
 *
 * Each member keeps raft's own files under <dir>/raft (C raft's libuv
 * storage) and runs raft on ordod's loop with ordod's transport
 * (raft_transport.h). One raft entry is one loop turn's records: the
 * batch the writer appended since the last flush, in one buffer (C raft's
 * multi-buffer entries are unreliable):
 *
 *     "ORDB" | batch length u32 | the batch (log.h: len u32 | 0 u32 | rev u64 | record,
 *     back to back) | zero bytes up to a multiple of 8 (raft_uv takes no other length)
 *
 * WHO APPLIES WHAT, deliberately unlike the first sketch (a leader that
 * proposes without applying, and applies on delivery like every member,
 * which would have parked every command until its entry came back): the
 * leader's writer applies at propose, exactly as
 * on a single server (the command layer builds every reply from what it
 * applied), and proposes the turn's records as one entry; its replies are
 * held until that entry is committed. Followers apply committed entries
 * with hooks.deliver, the same apply code as recovery, checking each
 * record reaches the revision the leader tagged it with. So the leader's
 * state runs ahead of the log by the entries in flight; the log keeps
 * them in a FIFO with a hash each, and when raft delivers one of them it
 * is matched and not applied again. If the leader loses leadership with
 * entries in flight, or raft delivers an entry that is not the FIFO's
 * head, its state may hold records the cluster never committed: the log
 * says so (hooks.role with diverged), and the server restarts in place to
 * rebuild its state from raft's files (writer/cluster.c).
 *
 * MARKS: output waits for a position (log_pos_t), not a revision. Every
 * proposal (an entry, or a barrier) takes the next position; log_mark()
 * hands out the position the end of this turn will propose, and asks for
 * a barrier if the turn has no records. Output is released when its
 * position is committed. A read is thus answered only after a majority
 * confirmed, after the read arrived, that this member still leads: a
 * deposed leader never answers from stale state (a barrier per loop turn
 * that read, not per read). log_poll() returns the committed position;
 * log_committed_rev() the revision the committed entries reach.
 *
 * A new leader proposes a barrier and serves nothing until it is
 * committed: then every entry of earlier terms is applied.
 *
 * FAILURE: if raft cannot store a proposal of this member (its callback
 * reports a disk error, no space, no memory), or a committed entry does
 * not apply here, log_failed() says why from then on: the server turns
 * read-only as a single server does, this member applies nothing more,
 * serves nothing (if raft elects it, it hands leadership away), and is
 * not restarted in place; an operator restarts it.
 *
 * SNAPSHOTS: raft asks for one every cluster-snapshot-entries entries;
 * the state is encoded in ordod's snapshot format (snapshot.h) on the
 * loop thread (C raft 0.22 takes it synchronously; measured in
 * docs/operations.md). A leader's state must be the committed state to be
 * a snapshot, so while entries are in flight it answers "busy" and
 * reports itself backlogged (the writer stops taking input) until the
 * FIFO drains; raft asks again at its next event.
 */
#ifndef ORDO_RAFT_LOG_H
#define ORDO_RAFT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"
#include "log/log.h"

#define RAFT_LOG_MAX_MEMBERS 16

typedef struct raft_log_member_s {
    uint64_t id;
    char client[256];    /* host:port clients use */
    char raft[256];      /* host:port raft uses (client port + offset) */
} raft_log_member_t;

/* What the server gives the raft log beyond log_hooks_t. Loop thread. */
typedef struct raft_log_fsm_s {
    /* Encode the state (all of it committed) as a snapshot into out. */
    void (*snapshot)(void *arg, ordo_buf_t *out);
    /* Replace the state with this snapshot; *rev_out is the revision it
     * holds. Returns 0, or -1 (fatal). */
    int (*restore)(void *arg, const void *data, size_t len, uint64_t *rev_out);
    /* Leadership changed: leading (a barrier of this term is committed,
     * the member may serve), or not; diverged: the state holds records
     * that may never be committed and must be rebuilt. */
    void (*role)(void *arg, bool leading, bool diverged);
    /* A membership change or transfer asked for finished: status 0, or an
     * error message. */
    void (*change_done)(void *arg, int status, const char *msg);
    void *arg;
} raft_log_fsm_t;

typedef struct raft_log_options_s {
    const char *dir;                 /* ordod's --dir: raft's files go in <dir>/raft */
    uv_loop_t *loop;
    uint64_t id;
    raft_log_member_t members[RAFT_LOG_MAX_MEMBERS];
    int nmembers;
    int nmembers_bootstrap;          /* 0: join (wait to be added), else bootstrap on a first start */
    uint16_t port_offset;
    unsigned election_timeout_ms;
    unsigned snapshot_entries, snapshot_trailing;
    uint64_t pending_bytes_max;      /* proposed, not committed, above which the writer stops reading */
    uint32_t record_bytes_max;
} raft_log_options_t;

/* raft_cluster_parse() -- "ID=HOST:PORT,..." into members (raft address:
 * port + offset). Returns the count, or -1 with a message. */
int raft_cluster_parse(const char *spec, uint16_t port_offset, raft_log_member_t *members, int max, char *err,
                       size_t elen);

/* raft_log_open() -- lock <dir>, set raft up (bootstrapping it from the
 * member list on the first start); nothing runs until raft_log_start(). */
log_t *raft_log_open(const raft_log_options_t *opt, const log_hooks_t *hooks, const raft_log_fsm_t *fsm, char *err,
                     size_t elen);
/* raft_log_start() -- start raft: the snapshot (if any) is restored through
 * fsm->restore now; committed entries follow as the leader reports them. */
int raft_log_start(log_t *l, char *err, size_t elen);

/* raft_log_stop() -- start closing raft (shutdown): its handles close, so
 * the loop can end; log_close() finishes. */
void raft_log_stop(log_t *l);

typedef struct raft_log_info_s {
    const char *role;                /* "leader", "follower", "candidate", "unavailable" */
    bool leading;                    /* leader, and serving */
    uint64_t leader_id;              /* 0: none known */
    char leader_client[256];         /* its client address, "" if none */
    uint64_t term, commit_index, applied_index, last_index;
    int members;
    uint64_t entries_proposed, barriers_proposed, snapshots_taken, snapshots_restored;
    uint64_t inflight_entries, inflight_bytes;
} raft_log_info_t;

void raft_log_info(log_t *l, raft_log_info_t *out);

/* raft_log_leading() -- the info's `leading`, alone: this member leads and
 * serves (the role hook reports each change of it). */
bool raft_log_leading(const log_t *l);

/* raft_log_member() -- the i-th member of the current configuration:
 * false past the last. role: "leader", "voter", "standby", "spare". */
bool raft_log_member(log_t *l, int i, uint64_t *id, char *client, size_t clen, const char **role);

/* raft_log_change() -- membership and leadership, on the leader: ADD id
 * (client: its client address; it joins as a spare, then becomes a voter
 * once caught up), REMOVE id, TRANSFER to id (0: raft picks). Starts the
 * change; fsm->change_done reports its end, one change at a time.
 * Returns 0, or -1 with a message (nothing started).
 *
 * A started TRANSFER ends this member's serving at once: raft takes no
 * entry or barrier until the transfer ends, so log_mark() and the
 * info's `leading` say so now, and the caller drops its clients as a
 * deposed leader's (the role hook is not called for it). If the transfer
 * does not happen, this member leads again once a new barrier commits
 * (the role hook, leading). */
enum raft_log_change { RAFT_LOG_ADD, RAFT_LOG_REMOVE, RAFT_LOG_TRANSFER };
int raft_log_change(log_t *l, enum raft_log_change op, uint64_t id, const char *client, char *err, size_t elen);

/* raft_log_partition() -- the test seam (raft_transport.h). */
int raft_log_partition(log_t *l, const uint64_t *ids, int n);

/* raft_entry_batch() -- how a committed entry's bytes (the format above)
 * become records: *out is set to the entry's batch, to walk with
 * log_batch_next(). out->buf points into entry (borrowed: never append to
 * it or free it). Every record's frame is checked to lie inside the batch;
 * the records themselves are not decoded. Pure: the raft log calls it for
 * every entry it applies, and the fuzzer (tests/fuzz/fuzz_raft_entry.c)
 * with any bytes. Returns 0, RAFT_ENTRY_FOREIGN (no "ORDB" header: not an
 * ordo entry) or RAFT_ENTRY_MALFORMED (the batch or a frame overruns). */
enum { RAFT_ENTRY_FOREIGN = -1, RAFT_ENTRY_MALFORMED = -2 };
int raft_entry_batch(const void *entry, size_t len, log_batch_t *out);

#endif /* ORDO_RAFT_LOG_H */
