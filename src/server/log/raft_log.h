/*
 * raft_log.h -- the log seam (log.h) over the C raft engine: cluster mode.
 *
 * ordod drives the engine (raft_step: it decides elections, replication
 * and commitment) and does all of its I/O itself: the term, vote, entries
 * and snapshot metadata in its own store (raft_store.h, under
 * <dir>/raft), messages over its own transport (raft_net.h), the engine's
 * timer on the loop, and snapshots in ordod's own format, taken when and
 * how ordod chooses. One raft entry is one loop turn's records: the batch
 * the writer appended since the last flush, in one buffer:
 *
 *     "ORDB" | batch length u32 | the batch (log.h: len u32 | 0 u32 | rev u64 | record,
 *     back to back)
 *
 * WHO APPLIES WHAT: the leader's writer applies at propose, exactly as on
 * a single server (the command layer builds every reply from what it
 * applied), and proposes the turn's records as one entry; its replies are
 * held until that entry is committed. Followers apply committed entries
 * with hooks.deliver, the same apply code as recovery; a record at or
 * below the revision the state already holds (a snapshot newer than its
 * metadata) is skipped. So the leader's state runs ahead of the log by the
 * entries in flight; the log keeps them in a FIFO with the raft index each
 * was given, and when raft commits that index with the same term it is
 * not applied again. If the leader loses leadership with entries in
 * flight, or another entry is committed where its own was, its state may
 * hold records the cluster never committed: the log says so (the role
 * hook, diverged), and the server restarts in place to rebuild its state
 * from the snapshot and the log (writer/cluster.c).
 *
 * MARKS AND READS: output waits for a position (log_pos_t), not a
 * revision. Every proposal (an entry, a barrier, a read round) takes the
 * next position; positions commit in order. log_mark() hands out the
 * position the end of this turn proposes: the turn's entry if it has
 * records, and else a read round. A read round is no log write: at the
 * turn's flush the leader pings every other voter (raft_net_ping) and the
 * round is confirmed when a majority of voters, itself included, answer
 * a ping sent after the round began with the leader's own term. Such an
 * answer means that member had not moved to a later term when it
 * answered; a later leader needs the votes of a majority, which shares a
 * member with the one that answered, so no later leader was elected, and
 * nothing was committed by one, before the read arrived. The leader
 * serves only after its first entry of the term (a barrier) commits, so
 * it holds every entry committed before; its output waits for the
 * positions before the round too, so no reply shows a write not yet
 * committed. Unanswered rounds are pinged again every heartbeat.
 *
 * FAILURE: if the store cannot write (no space, an I/O error) it retries
 * the write until it succeeds; meanwhile the log reports itself
 * backlogged, so the writer stops taking input, and CLUSTER INFO says so.
 * If a committed entry does not apply here, or the term and vote cannot
 * be made durable, log_failed() says why from then on: the server turns
 * read-only as a single server does, this member applies nothing more,
 * serves nothing (if raft elects it, it hands leadership away), and is
 * not restarted in place; an operator restarts it.
 *
 * SNAPSHOTS: ordod's own sliced snapshot (snapshot.h), written a slice per
 * loop turn by the writer (persist.c) when log stats say one is wanted
 * (cluster-snapshot-entries applied since the last), never stalling the
 * loop. It holds the state as of revision R, the core's when it began; it
 * is committed to disk only once R is committed (a leader's state runs
 * ahead of the log), then its metadata (the last index whose records are
 * all at or below R, its term, the configuration) goes to the store,
 * which compacts the log, and to the engine (RAFT_SNAPSHOT): at an index
 * the log still holds, always. A member far behind is sent the snapshot
 * file in chunks by the net; it becomes the member's snapshot and state
 * once raft commits its index.
 */
#ifndef ORDO_RAFT_LOG_H
#define ORDO_RAFT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"
#include "base/tls.h"
#include "log/log.h"

#define RAFT_LOG_MAX_MEMBERS 16
/* Member ids are positive and at most this: they appear in logs, INFO and
 * the wire as decimal, and 2^63 keeps them safe in signed 64-bit tools. */
#define RAFT_LOG_MAX_ID ((uint64_t)INT64_MAX)

typedef struct raft_log_member_s {
    uint64_t id;
    char client[256];    /* host:port clients use */
    char raft[256];      /* host:port raft uses (client port + offset) */
} raft_log_member_t;

/* What the server gives the raft log beyond log_hooks_t. Loop thread. */
typedef struct raft_log_fsm_s {
    /* Replace the state with the snapshot file in dir (snapshot.h's
     * snap_load); *rev_out is the revision it holds. A snapshot being
     * written must be given up first. Returns 0, or -1 (fatal). */
    int (*restore)(void *arg, const char *dir, uint64_t *rev_out);
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
    unsigned install_snapshot_timeout_ms; /* a snapshot stream to a member is started again after this */
    uint64_t catch_up_timeout_ms;    /* CLUSTER ADD: a member not caught up by then is removed again */
    uint64_t snapshot_max_bytes;     /* a larger snapshot from the leader is refused */
    uint64_t pending_bytes_max;      /* proposed, not committed, above which the writer stops reading */
    uint32_t record_bytes_max;
    /* Mutual TLS between members (log/raft_net.h): both or neither, read
     * while opening only. */
    const ordo_tls_config_t *tls_server, *tls_client;
} raft_log_options_t;

/* raft_cluster_parse() -- "ID=HOST:PORT,..." into members (raft address:
 * port + offset). Returns the count, or -1 with a message. */
int raft_cluster_parse(const char *spec, uint16_t port_offset, raft_log_member_t *members, int max, char *err,
                       size_t elen);

/* raft_log_open() -- lock <dir>, open the store and the net, set the
 * engine up (bootstrapping the store from the member list on the first
 * start: term 1 and the configuration as entry 1); nothing runs until
 * raft_log_start(). */
log_t *raft_log_open(const raft_log_options_t *opt, const log_hooks_t *hooks, const raft_log_fsm_t *fsm, char *err,
                     size_t elen);
/* raft_log_start() -- start raft: the snapshot (if any) is restored through
 * fsm->restore now; committed entries follow as raft learns they are. */
int raft_log_start(log_t *l, char *err, size_t elen);

/* raft_log_stop() -- start closing (shutdown): the timers and the net
 * close, so the loop can end; log_close() finishes. */
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
    uint64_t read_rounds;            /* leadership confirmations started for reads */
    uint64_t snapshot_index;         /* the index the last snapshot covers */
    const char *store_failing;       /* non-NULL: the store's writes fail, why (they are retried) */
} raft_log_info_t;

void raft_log_info(log_t *l, raft_log_info_t *out);

/* raft_log_leading() -- the info's `leading`, alone: this member leads and
 * serves (the role hook reports each change of it). */
bool raft_log_leading(const log_t *l);

/* What CLUSTER MEMBERS shows of one member. */
typedef struct raft_log_member_info_s {
    uint64_t id;
    char client[256];
    const char *role;                /* "leader", "voter", "standby", "spare" */
    bool self;                       /* this member */
    bool live;                       /* heard from within an election timeout (self: true) */
    uint64_t last_contact_ms;        /* since a frame last came from it (UINT64_MAX: never) */
    uint64_t match_index;            /* on the leader: the last index it has (self: the last index) */
    uint64_t lag_entries;            /* on the leader: entries it lacks */
} raft_log_member_info_t;

/* raft_log_member() -- the i-th member of the current configuration:
 * false past the last. */
bool raft_log_member(log_t *l, int i, raft_log_member_info_t *out);

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

/* raft_log_tls_reload() -- new mutual TLS contexts for the members'
 * connections (raft_net_tls_reload()). */
int raft_log_tls_reload(log_t *l, const ordo_tls_config_t *server, const ordo_tls_config_t *client, char *err,
                        size_t elen);
/* raft_log_partition() -- the test seam (raft_net.h). */
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
