/*
 * server.h -- the owner of everything ordod runs: configuration, the event
 * loop, listeners, connections, the core state machine, the watch registry,
 * counters. One server_t is created by main() and passed to every module
 * that needs it; there are no mutable globals.
 *
 * Threads: the event-loop thread is the core thread. It runs the network
 * layer, the command layer and the core, each in its own module: the net
 * layer (net.c) moves bytes and never touches state; the command layer
 * (cmd*.c) turns requests into records and reads and speaks RESP; the core
 * (core.c, kv.c, watch.c) applies records and never sees a socket.
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
#include "net/resp.h"
#include "core/watch.h"
#include "log/snapshot.h"
#include "log/wal.h"

#define ORDO_VERSION "0.1.0"

typedef struct conn_s conn_t;

typedef struct server_stats_s {
    uint64_t connections_total;
    uint64_t connections_rejected;
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
    uint64_t auth_fail_logged_ms;     /* when the last one was logged (rate limit), 0: never */
    uint64_t auth_fail_unlogged;      /* failures since then, not logged */
} server_stats_t;

typedef struct server_s {
    ordo_config_t cfg;
    uv_loop_t *loop;
    uv_tcp_t tcp;
    bool tcp_on;
    uv_pipe_t unix_listener;
    bool unix_on;
    bool unix_bound;                 /* we created the socket file: removed at close */
    uv_signal_t sigint, sigterm;
    uv_timer_t expire_timer;         /* fires at the next key expiry */
    uint64_t expire_timer_at_ms;     /* its deadline, 0 if idle */
    uv_timer_t cron;                 /* periodic: watch progress, output limits */
    uint64_t next_progress_ms;       /* when cron next looks for idle watches */
    uv_check_t flusher;              /* after each loop turn: flush connections given events */
    conn_t *dirty;                   /* connections with events to flush (dirty_next list) */
    core_t *core;
    watch_registry_t watches;
    ordo_htab_t commands;            /* name (lower case) -> command */
    conn_t *conns;                   /* list of live connections */
    size_t nconns;
    size_t released_bytes;           /* large connection buffers freed since the last trim */
    uint64_t next_client_id;
    uint64_t next_watch_id;
    uint64_t start_ms;
    uint64_t now_ms;                 /* the writer's clock: see server_tick() */
    server_stats_t stats;
    bool stopping;
    /* durability (persist.c) */
    wal_t *wal;
    uint64_t durable_rev;            /* replies depending on revisions above it wait */
    uv_async_t durable_async;        /* the log thread's wake-up */
    conn_t *held;                    /* connections with output waiting on durable_rev */
    char readonly[512];              /* non-empty: the log failed, writes are refused */
    ordo_buf_t rec_scratch;          /* encoding buffer for records */
    void *wal_fault;                 /* debug-wal-fault/-stall state, NULL unless testing */
    bool wal_paused;                 /* back-pressure: clients are not read (persist.h) */
    uint64_t backpressure_events, backpressure_ms, backpressure_since_ms;
    bool snap_running;
    snap_writer_t snap;
    uv_idle_t snap_idle;             /* writes the snapshot a slice per loop turn */
    uv_work_t snap_work;             /* syncs and renames it off the loop thread */
    int snap_result;
    char snap_err[512];
    uint64_t last_snap_rev, last_snap_ms, snaps_total;
    uint64_t recovered_records, recovery_ms, snapshot_loaded_rev;
    /* blocking commands (block.c) */
    ordo_heap_t wait_heap;           /* waiters with a deadline, earliest first */
    uv_timer_t wait_timer;
    uint64_t wait_timer_at_ms;
    size_t blocked_clients;          /* parked waiters (INFO clients) */
    size_t blocked_by_kind[6];       /* by enum block_kind (BLOCK_KINDS) */
    conn_t *resumed;                 /* connections to resume at the end of the turn */
    /* leases, locks, elections: waiters, observers, deadline timer (cmd_coord.c) */
    struct coord_cmd_s *coordcmd;
    /* queues (cmd_queue.c) */
    struct qcmd_s *qcmd;             /* wait lists of blocked Q.* commands, by queue name */
    uv_timer_t queue_timer;          /* fires at the earliest queue deadline */
    uint64_t queue_timer_at_ms;      /* its deadline, 0 if idle */
    bool queue_timer_on;             /* initialised (cmd_queue_init) */
} server_t;

/* Wall clock in ms since the epoch. */
uint64_t server_now_ms(void);
/* server_tick() -- read the wall clock into s->now_ms, never moving it
 * backwards. Called once per loop callback (a read batch, a timer), so
 * every command of a batch, and every record it makes, sees one time, and
 * record times never decrease even if the system clock steps back. */
uint64_t server_tick(server_t *s);

/* net.c */
int net_listen(server_t *s, char *err, size_t elen);
void net_close_all(server_t *s);
/* Bytes held by connections: the structures and their buffers' capacity. */
size_t net_client_memory(const server_t *s);
/* Called by cron: once NET_TRIM_AFTER_BYTES of large connection buffers
 * have been freed, hand the free pages back to the system (malloc_trim), so
 * a flood of large requests leaves no resident memory behind however the
 * heap is fragmented. */
void net_cron(server_t *s);
/* Stop reading every client (back-pressure, s->wal_paused set) / read
 * again every client no other reason keeps paused. */
void net_pause_reading(server_t *s);
void net_resume_reading(server_t *s);

#endif /* ORDO_SERVER_H */
