/*
 * apply.h -- the writer's one door into the core: every record, a
 * command's or one the writer makes itself (an expiry, a delivery to a
 * parked puller, a lock grant), a transaction's and (in cluster mode) the
 * leader's alike, enters through writer_submit(). The door checks, once
 * and in this order, that the member leads, that the log has not failed,
 * and, for a client's record that grows the data, max-memory-bytes; then
 * it stamps the record with the writer's clock, applies it, hands it to
 * the log, and runs its family's after-apply step from one table:
 *
 *   KV      a key given a deadline re-arms the expiry timer
 *   queue   completions (an ack, a NOACK delivery, a dead letter answer
 *           the callers of the message), the queue timer, and the queue
 *           marked for serving its parked clients at the next settle
 *   all     lock waiters and candidates the record freed are served, and
 *           (after any record but a KV one) the coordination timer is
 *           re-armed (coord_wait_after_apply())
 *
 * Serving a queue's parked clients waits for writer_settle(), which the
 * command layer calls after each command (and EXEC after each of its
 * commands), and the writer after its timers' records and after a
 * command's catch-up of due queue deadlines: a Q.CALL parks before the
 * pullers it feeds are served, and a newcomer never overtakes a parked
 * client. Loop thread only.
 */
#ifndef ORDO_WRITER_APPLY_H
#define ORDO_WRITER_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server.h"
#include "writer/cluster.h"

/* Who made a record: a client's command (refused past max-memory-bytes if
 * it grows the data) or the writer itself (a timer's, a served waiter's,
 * an ack's: never refused for memory; a parked pusher is judged when
 * served, queue_wait.c). */
enum writer_origin { WRITER_CLIENT = 0, WRITER_SELF = 1 };

/* What the door did with a record. */
enum writer_verdict {
    WRITER_APPLIED = 0,   /* applied (res says how) and handed to the log */
    WRITER_NOTLEADER,     /* not applied: this cluster member does not lead */
    WRITER_READONLY,      /* not applied: the log failed earlier */
    WRITER_MEMORY,        /* not applied: past max-memory-bytes */
    WRITER_UNSTORED,      /* applied in memory, but the log refused it: read-only from now
                           * on, and its effect must never be acknowledged */
};

/* writer_submit() -- the one door (see above). Returns the verdict; on
 * anything but WRITER_APPLIED, why (if not NULL, wlen bytes) holds the
 * refusal's text, "CODE message" (NOTLEADER: the leader's address). res
 * is zeroed with status AP_NOOP when nothing was applied. */
int writer_submit(server_t *s, record_t *rec, int origin, apply_result_t *res, char *why, size_t wlen);

/* writer_makes_records() -- may the writer make records of its own now:
 * the member leads (always, on a single server), the log has not failed,
 * the server is not stopping? The one gate of every timer that makes
 * records (expiry, queue deadlines, lease, lock and leadership ends): one
 * that may not is not armed, and one that fires anyway does nothing;
 * cluster.c re-arms them all when a member starts to lead. The door
 * (writer_submit()) asks the same of every record, with a verdict for
 * each refusal. */
static inline bool writer_makes_records(const server_t *s)
{
    return !s->stopping && server_readonly(s) == NULL && cluster_leads(s);
}

/* writer_settle() -- serve the queues whose parked clients records since
 * the last settle may have unblocked (see above). A flag test when none:
 * it runs after every command. */
void writer_settle_marked(server_t *s);
static inline void writer_settle(server_t *s)
{
    if (s->writer.to_settle)
        writer_settle_marked(s);
}

/* Transactions (MULTI/EXEC). While s->writer.txn is set, writer_submit()
 * does not log record by record:
 *   WTXN_CHECK: nothing is applied; each record is judged by core_check()
 *     (core.h) after the ones before it, and comes back with res->status
 *     AP_NOOP (it would pass its guards) or the guard's failing outcome;
 *     the first failure is kept in the writer_txn_t. The command layer
 *     runs the queued commands this way first, so nothing is applied if
 *     any would fail.
 *   WTXN_APPLY: each record is applied as usual, and those that changed
 *     something are collected (their byte form) instead of logged;
 *     writer_txn_end() logs them as one REC_TXN record, so a crash keeps
 *     all of them or none, and only then serves the lock waiters and
 *     candidates they freed. The queue family's step runs per record, as
 *     outside a transaction, and the settle after each of EXEC's commands
 *     serves parked queue clients with records that join the same REC_TXN:
 *     their answers are written before it is logged, and like every reply
 *     they leave only once it is committed; if the log refuses it, the
 *     connections holding them are closed unsent (the drop_unmarked hook).
 *   WTXN_SYNTAX: nothing is applied or judged; each record is only
 *     counted (count), and comes back AP_NOOP. The command layer runs a
 *     write this way when MULTI queues it, to learn whether it makes a
 *     record at all (an argument error makes none): judging it against
 *     the state would cost as much as the write, for a verdict EXEC
 *     gives again.
 * Either way the verdict is WRITER_APPLIED. */
enum writer_txn_mode { WTXN_CHECK = 1, WTXN_APPLY = 2, WTXN_SYNTAX = 3 };
typedef struct writer_txn_s {
    int mode;
    core_txn_check_t check;   /* WTXN_CHECK: what the records so far would leave */
    bool failed;              /* WTXN_CHECK: a record failed a guard */
    int fail_status;          /* ... its outcome (enum apply_status) */
    uint64_t fail_cur_rev;    /* ... AP_CONFLICT: the key's revision */
    ordo_buf_t recs;          /* WTXN_APPLY: the sub-records (rec_txn_t's form) */
    uint64_t count;           /* WTXN_APPLY: records collected; WTXN_SYNTAX: records made */
} writer_txn_t;
/* writer_txn_begin() -- set s->writer.txn to t (zeroed here) in mode. */
void writer_txn_begin(server_t *s, writer_txn_t *t, int mode);
/* writer_txn_end() -- clear s->writer.txn and free t's buffers; in
 * WTXN_APPLY, first log the collected records as one REC_TXN (if any) and
 * serve waiters. Returns false if the log refused it (read-only now). */
bool writer_txn_end(server_t *s, writer_txn_t *t);
/* The apply latency histogram (s->stats.apply_hist, /metrics): upper
 * bounds in nanoseconds of its buckets; one more bucket holds the rest.
 * From a plain put (~1 us) to a record that walks much state (> 10 ms). */
#define WRITER_APPLY_BUCKETS 9
extern const uint64_t writer_apply_bucket_ns[WRITER_APPLY_BUCKETS];

/* writer_output_mark() -- the mark output written now must wait for
 * (net.c takes one per flush and sends the output once the log has
 * committed it; log_mark()): on a single server the position of the
 * revision the applied state has reached; in cluster mode the raft
 * position the end of this turn proposes. Not a getter: in cluster mode, on a turn that proposes no
 * entry, it makes the turn propose a raft barrier (log/raft_log.h), so
 * call it only for output that may depend on state. */
log_pos_t writer_output_mark(server_t *s);

/* writer_data_bytes() -- the stored data max-memory-bytes bounds: the
 * versioned store (keys, values, history) plus the queues (messages,
 * payloads, per-key state, deliveries, dedup entries, results) plus
 * coordination (coord_wait_bytes(): leases, attachments, locks, elections,
 * values, hand-overs, parked lock and election waiters). O(1). */
size_t writer_data_bytes(const server_t *s);
/* The longest refusal text the writer makes (an error outcome's). */
#define WRITER_REFUSAL_MAX 512
/* writer_memory_refused() -- if max-memory-bytes is set and stored data is
 * above it, write the -LIMIT text ("LIMIT ...") into buf (blen bytes) and
 * return true: a write that grows the data is refused (the door for
 * commands; blocked pushers served later get it too). */
bool writer_memory_refused(server_t *s, char *buf, size_t blen);

#endif /* ORDO_WRITER_APPLY_H */
