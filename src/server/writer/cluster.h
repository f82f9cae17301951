/*
 * cluster.h -- the writer in cluster mode (--node-id, --cluster): opens the
 * raft log (log/raft_log.h), applies the entries it delivers, follows the
 * member's role, and answers what the command layer asks about it.
 *
 * Roles, as the writer sees them:
 *   - leading: the writer applies records and makes them from its timers,
 *     as a single server does; replies wait for their raft position;
 *   - not leading: nothing is applied but what raft delivers; timers make
 *     no records (a new leader re-arms them from the replicated
 *     deadlines); commands that touch state answer -NOTLEADER.
 * On losing leadership, connections whose output waits for a position
 * and watchers are closed (their outcome is not known here; clients
 * reconnect and follow -NOTLEADER); parked clients get -NOTLEADER. If the state holds
 * records the cluster may never commit (diverged), the process restarts
 * in place (execv of itself, same pid and arguments) and rebuilds its
 * state from raft's files: simpler and surer than undoing records. Not
 * when the log failed (raft_log.h, FAILURE): the member stays up,
 * read-only with the reason, serving nothing, until an operator restarts
 * it.
 */
#ifndef ORDO_WRITER_CLUSTER_H
#define ORDO_WRITER_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "server.h"

/* cluster_enabled() -- started with --node-id (and --cluster). */
static inline bool cluster_enabled(const server_t *s) { return s->cfg.node_id != 0; }

/* cluster_open() -- open the raft log into s->log, with persist.c's wake
 * hook (the deliver hook is this file's). Returns 0, or -1 with a
 * message. */
int cluster_open(server_t *s, const log_hooks_t *wake, char *err, size_t elen);
/* cluster_start() -- after the writer is set up: start raft. */
int cluster_start(server_t *s, char *err, size_t elen);

/* cluster_leads() -- true on a single server, and on the member that leads
 * and may serve. */
bool cluster_leads(const server_t *s);
/* cluster_leader() -- the leader's client address, or "?" if none known. */
const char *cluster_leader(server_t *s, char *buf, size_t blen);

/* ---- what the command layer asks (CLUSTER, DEBUG, /metrics, /v1/status) ----
 * In ordo's terms: nothing above writer/ names the raft log. Cluster mode
 * only (cluster_enabled()). */

/* This member's view of the cluster. */
typedef struct cluster_status_s {
    const char *role;                /* "leader", "follower", "candidate", "unavailable" */
    bool serving;                    /* leads, and serves (cluster_leads()) */
    uint64_t leader_id;              /* 0: none known */
    uint64_t term;
    uint64_t commit_index, applied_index; /* raft's indexes: committed, applied here */
    int members;                     /* in the configuration */
    uint64_t entries_proposed, barriers_proposed, snapshots_taken;
    uint64_t read_rounds;            /* leadership confirmations for reads (no log write) */
    bool store_failing;              /* the raft store's writes fail (a full disk): retried */
} cluster_status_t;
void cluster_status(server_t *s, cluster_status_t *out);

/* One member of the configuration. */
typedef struct cluster_member_s {
    uint64_t id;
    char addr[256];                  /* the address clients use */
    const char *role;                /* "leader", "voter", "standby", "spare" */
    bool live;                       /* heard from within an election timeout (this member: true) */
    int64_t last_contact_ms;         /* since it was last heard from; -1: never (0 for this member) */
    int64_t lag_entries;             /* entries it lacks, known on the leader; -1 elsewhere */
} cluster_member_t;
/* cluster_member() -- the i-th member (from 0): false past the last. */
bool cluster_member(server_t *s, int i, cluster_member_t *out);

/* cluster_info() -- CLUSTER INFO's name:value lines. */
void cluster_info(server_t *s, ordo_buf_t *b);

/* Membership and leadership changes (CLUSTER ADD / REMOVE / TRANSFER). */
enum cluster_change { CLUSTER_ADD, CLUSTER_REMOVE, CLUSTER_TRANSFER };
/* cluster_change() -- start a change for c, which waits parked (block.h,
 * kind cluster) for its reply: ADD id (addr: its client address; a spare
 * first, a voter once caught up), REMOVE id, TRANSFER to id (0: raft
 * picks). Returns 0, or -1 with a message (nothing started). */
int cluster_change(server_t *s, struct conn_s *c, enum cluster_change op, uint64_t id, const char *addr, char *err,
                   size_t elen);

/* cluster_tls_reload() -- with tls-cluster, the members' certificates
 * again from cfg's tls-* options (new connections use them). 0 (also when
 * there is nothing to reload), or -1 with err and the old ones kept. */
int cluster_tls_reload(server_t *s, const ordo_config_t *cfg, char *err, size_t elen);
/* cluster_partition() -- the test seam of DEBUG PARTITION: exchange raft
 * messages only with these members (none: heal). Returns 0, or -1. */
int cluster_partition(server_t *s, const uint64_t *ids, int n);

/* cluster_stop() -- shutdown: start closing raft's handles, so the loop
 * can end (persist_close() closes the log after). */
void cluster_stop(server_t *s);

#endif /* ORDO_WRITER_CLUSTER_H */
