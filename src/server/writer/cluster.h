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
 * state from raft's files: simpler and surer than undoing records.
 */
#ifndef ORDO_WRITER_CLUSTER_H
#define ORDO_WRITER_CLUSTER_H

#include <stdbool.h>

#include "log/raft_log.h"
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

/* The command layer's CLUSTER and DEBUG: see raft_log.h for the calls. */
void cluster_info(server_t *s, ordo_buf_t *b);
/* Start a change for c, which waits parked (block.h, kind cluster) for
 * its reply. Returns 0, or -1 with a message (nothing started). */
int cluster_change(server_t *s, conn_t *c, enum raft_log_change op, uint64_t id, const char *addr, char *err,
                   size_t elen);

#endif /* ORDO_WRITER_CLUSTER_H */
