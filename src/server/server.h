/*
 * server.h -- the owner of everything ordod runs. One server_t is created
 * by main() and passed to every module that needs it; there are no mutable
 * globals. It keeps the parts, and each part keeps its own state:
 *
 *   cfg, loop, signals     start-up and shutdown (main.c)
 *   net      (net_t)       listeners and connections (net/net.h)
 *   writer   (writer_t)    parked clients, wait lists, timers, the per-turn
 *                          hook and cron (writer/writer.h)
 *   core, watches          the state machine and the watch registry (core/)
 *   commands               the command table (cmd/table.c)
 *   stats                  the counters INFO and /metrics show
 *   persist  (persist_t)   the log, what it committed, back-pressure,
 *                          snapshots, read-only (writer/persist.h)
 *   hooks                  what the writer asks of net and cmd (main.c
 *                          installs them)
 *   cluster                cluster mode's part of the writer
 *                          (writer/cluster.h)
 *
 * The writer and the layers above it: the writer calls nothing of cmd/
 * or net/ (scripts/check-layers.sh holds that). What it must ask of them
 * goes through the hooks below: for one client, park it, answer it
 * (an outcome, writer/outcome.h) and resume it (block.c, coord_wait.c);
 * as a whole, run resumed input, flush -- which also releases held
 * output and resumes reading -- and their cron (turn.c), drop the
 * connections a deposed leader cannot vouch for (cluster.c) and those
 * whose output was made after the log failed (persist.c). Net and cmd
 * read what the writer recorded (persist_committed(), server_readonly(),
 * persist_paused()) when they run.
 *
 * Threads: the event-loop thread is the core thread. It runs the network
 * layer, the command layer, the writer and the core, each in its own
 * module: the net layer moves bytes and never touches state; the command
 * layer turns requests into records and reads and speaks RESP; the writer
 * applies records, parks clients and keeps the deadlines; the core
 * applies records and never sees a socket.
 */
#ifndef ORDO_SERVER_H
#define ORDO_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"
#include "config.h"
#include "core/core.h"
#include "base/heap.h"
#include "base/htab.h"
#include "net/net.h"
#include "net/resp.h"
#include "writer/writer.h"
#include "core/watch.h"
#include "log/log.h"
#include "writer/persist.h"

#define ORDO_VERSION "0.1.0"

typedef struct conn_s conn_t;
typedef struct server_s server_t;

typedef struct server_stats_s {
    uint64_t connections_total;
    uint64_t connections_rejected;
    uint64_t tls_handshakes_ok;       /* TLS handshakes completed (net/net_tls.c) */
    uint64_t tls_handshakes_failed;   /* refused: bad certificate, not TLS, closed midway */
    uint64_t tls_handshakes_timedout; /* not finished within tls-handshake-timeout-ms */
    uint64_t commands_total;
    uint64_t errors_total;
    uint64_t net_in_bytes;
    uint64_t net_out_bytes;
    uint64_t watch_events_total;
    uint64_t watch_cancelled_total;
    uint64_t expired_keys_total;
    uint64_t clients_closed_output;   /* closed for passing an output limit */
    uint64_t allocator_trims;         /* malloc_trim calls after large buffers were freed */
    uint64_t auth_failures;           /* AUTH / HELLO AUTH with a wrong user or password */
    uint64_t acl_denied_cmd;          /* commands a user's rules refused (-NOPERM, cmd_acl.c) */
    uint64_t acl_denied_name;         /* keys, queues, locks, elections a user's rules refused */
    uint64_t transactions_total;      /* EXECs that applied */
    uint64_t transactions_aborted;    /* EXECs that applied nothing: EXECABORT, a WATCH, a guard */
    uint64_t auth_fail_logged_ms;     /* when the last one was logged (rate limit), 0: never */
    uint64_t auth_fail_unlogged;      /* failures since then, not logged */
    uint64_t errors_by_code[16];      /* error replies of the command layer by code (cmd.c's table) */
    uint64_t applies;                 /* records applied (writer_submit) */
    uint64_t apply_ns_sum;            /* their total time in core_apply */
    uint64_t apply_hist[16];          /* applies per bucket of writer/apply.h's bounds, not cumulative */
    uint64_t loop_turn_max_us;        /* the longest loop turn's busy time (writer/turn.c) */
    uint64_t loop_turns_slow;         /* turns busy for TURN_SLOW_MS or longer */
} server_stats_t;

/* What the writer asks of the layers above it (net, cmd), installed by
 * main.c before the loop runs: the writer never calls up itself, by name
 * (scripts/check-layers.sh reads the calls). A client is an opaque
 * pointer to the writer (a connection, to net and cmd). */
struct conn_s;
struct waiter_s;
struct outcome_s;
typedef struct server_hooks_s {
    void (*run_resumed)(server_t *s); /* run the input of connections whose wait ended */
    void (*flush)(server_t *s);       /* send what was written into connections and held output the log
                                       * committed since; read clients again after back-pressure */
    void (*net_cron)(server_t *s);    /* periodic: allocator trims, output limits */
    void (*cmd_cron)(server_t *s);    /* periodic: watch progress */
    /* The writer's one exit (writer/outcome.h): tell client o, the answer
     * to its parked command or an event it observes (a closing client
     * ignores it). */
    void (*answer)(server_t *s, struct conn_s *client, const struct outcome_s *o);
    /* client's command parked as w: its later pipelined commands wait. */
    void (*park)(struct conn_s *client, struct waiter_s *w);
    /* client's wait ended (answered): it runs its pipeline at the end of
     * the loop turn. */
    void (*resume)(struct conn_s *client);
    /* This cluster member stopped leading: close every connection whose
     * output waits for a position that may never commit or was made and
     * not yet judged (it came from the state it no longer vouches for),
     * and every watcher (they resume on the new leader). */
    void (*drop_unsure)(server_t *s);
    /* The log just failed: close every connection whose output was made
     * since it was last judged (it may depend on the unstored revisions;
     * persist.c, enter_readonly()). */
    void (*drop_unmarked)(server_t *s);
    /* Rebuild the TLS context from cfg's tls-* options (CONFIG SET
     * tls-...): 0, or -1 with err and the old context kept. */
    int (*tls_reload)(server_t *s, const ordo_config_t *cfg, char *err, size_t elen);
} server_hooks_t;

typedef struct cmd_history_s cmd_history_t; /* the dashboard's history (cmd/cmd_history.c) */

struct server_s {
    ordo_config_t cfg;
    uv_loop_t *loop;
    uv_signal_t sigint, sigterm, sighup;
    uint64_t next_progress_ms;       /* when cron next looks for idle watches (cmd_watch.c) */
    core_t *core;
    watch_registry_t watches;
    ordo_htab_t commands;            /* name (lower case) -> command */
    cmd_history_t *history;          /* samples of the last hour and day (cmd_init() makes it) */
    struct scan_cursors_s *scan;     /* SCAN's cursors (cmd/cmd_keyspace.c), NULL until the first SCAN */
    struct cmd_acl_state_s *acl;     /* the implicit default user and ACL LOG (cmd/cmd_acl.c) */
    net_t net;                       /* listeners and connections (net/net.h) */
    writer_t writer;                 /* the single writer's machinery (writer/writer.h) */
    uint64_t next_watch_id;
    uint64_t start_ms;               /* server_mono_ms() at start: uptime */
    uint64_t now_ms;                 /* the writer's clock: see server_tick() */
    uint64_t clock_base_ms;          /* the writer's clock at clock_mono_base_ms */
    uint64_t clock_mono_base_ms;     /* server_mono_ms() when the clock was set */
    server_stats_t stats;
    server_hooks_t hooks;
    bool stopping;
    persist_t persist;               /* durability: the log, what it committed, snapshots (writer/persist.h) */
    /* cluster mode (writer/cluster.c) */
    struct {
        char **argv;                 /* to restart in place with */
        struct waiter_s *change_waiter; /* the client waiting for CLUSTER ADD/REMOVE/TRANSFER */
        ordo_list_t change_list;     /* its wait list */
        uint64_t terms_led, last_snapshot_ms, last_snapshot_bytes;
        uint64_t time_ms;            /* the latest record time applied here (the replicated clock) */
        uint64_t time_mono_ms;       /* server_mono_ms() when it was seen */
        bool time_live;              /* seen from a leader in this process's life, not only loaded at start */
        bool started;                /* raft started: a restore is a leader's snapshot, not the start's load */
    } cluster;
};

/* server_readonly() -- why writes are refused (the log failed: persist.c
 * sets the reason once, and it never clears), or NULL while the server
 * accepts writes. */
static inline const char *server_readonly(const server_t *s)
{
    return s->persist.readonly[0] != '\0' ? s->persist.readonly : NULL;
}

/* persist's getters (writer/persist.h says what each means), inline: net
 * asks them at every flush. */
static inline bool persist_paused(const server_t *s) { return s->persist.paused; }
static inline log_pos_t persist_committed(const server_t *s) { return s->persist.committed; }
static inline uint64_t persist_durable_rev(const server_t *s) { return s->persist.committed_rev; }
static inline uint64_t persist_commits(const server_t *s) { return s->persist.commits; }

/* Wall clock in ms since the epoch: TIME, and times shown to people. Never
 * a deadline: see server_tick(). */
uint64_t server_now_ms(void);
/* Monotonic clock in ms (CLOCK_MONOTONIC): durations. */
uint64_t server_mono_ms(void);
/* server_tick() -- read the writer's clock into s->now_ms and return it.
 * The writer's clock is ms since the epoch that advances with the
 * monotonic clock: set from the wall clock at start (or from the last
 * record's time, if the wall clock is behind it), it ignores later steps
 * of the wall clock, so a deadline lasts its real length whatever NTP or
 * an operator does (writer/turn.c). Called once per loop callback (a read
 * batch, a timer), so every command of a batch, and every record it
 * makes, sees one time; record times never decrease. */
uint64_t server_tick(server_t *s);
/* server_clock_ms() -- the writer's clock now, without moving s->now_ms
 * (timers compute how far their deadline is). */
uint64_t server_clock_ms(const server_t *s);
/* server_clock_continue() -- a new cluster leader's clock: exactly at_ms
 * now (the replicated time: the last record's, advanced by this member's
 * monotonic clock since it saw it), then advancing with the monotonic
 * clock. Its own wall clock plays no part; if it is more than
 * CLOCK_SKEW_WARN_MS off, the log says so. */
void server_clock_continue(server_t *s, uint64_t at_ms);
/* server_clock_resume() -- after recovery: the clock continues from the
 * later of its reading and last_record_ms, never going back. */
void server_clock_resume(server_t *s, uint64_t last_record_ms);

#endif /* ORDO_SERVER_H */
