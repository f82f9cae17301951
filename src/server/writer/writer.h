/*
 * writer.h -- the single writer's machinery, as one part of the server:
 * applying records (apply.h), parked connections (block.h), the wait lists
 * and timers of each family (queue_wait.h, coord_wait.h, expire.h).
 * main.c brings the part up and down with four calls; the order matters
 * and is said here once.
 *
 *   writer_init()          before recovery: empty wait lists, the core's
 *                          callbacks (replay already fires them)
 *   writer_start()         after recovery: the timers, armed for the
 *                          deadlines the state holds
 *   writer_close_handles() at shutdown, so the loop can end
 *   writer_destroy()       after the loop ended (connections are gone)
 */
#ifndef ORDO_WRITER_H
#define ORDO_WRITER_H

#include <stddef.h>
#include <uv.h>

#include "base/heap.h"
#include "base/list.h"
#include "writer/timer.h"

typedef struct server_s server_t;

/* Parked clients (block.c). Invariant: blocked_clients is the number of
 * parked waiters, the length of `all` and the sum of blocked_by_kind; the
 * heap holds exactly the parked waiters that have a deadline. */
#define WRITER_BLOCK_KINDS 7 /* enum block_kind (block.h) */
typedef struct block_state_s {
    ordo_heap_t wait_heap;           /* waiters with a deadline, earliest first */
    ordo_list_t all;                 /* every parked waiter (waiter_t.all_ln), oldest first */
    writer_timer_t timer;            /* at the earliest deadline (0: at once, read-only) */
    size_t blocked_clients;          /* parked waiters (INFO clients) */
    size_t blocked_by_kind[WRITER_BLOCK_KINDS];
} block_state_t;

/* The writer's part of the server (s->writer). Each part keeps its timer
 * in its own state: block.timer, expire_timer, queues->timer,
 * coord->timer; all are started by writer_start() and closed by
 * writer_close_handles(). */
typedef struct writer_s {
    block_state_t block;             /* block.c */
    writer_timer_t expire_timer;     /* expire.c: at the next key expiry */
    struct qwaits_s *queues;         /* queue_wait.c: wait lists by queue name, the queue timer */
    struct coord_waits_s *coord;     /* coord_wait.c: lock/election waiters, observers, the timer */
    uv_check_t flusher;              /* turn.c: after each loop turn */
    uv_prepare_t timer_prep;         /* turn.c: before each poll, to time the turns */
    uint64_t turn_pre_busy_ns;       /* turn.c: the busy time of this turn before its poll */
    uint64_t turn_logged_ns;         /* turn.c: when a long turn was last logged */
    uv_timer_t cron;                 /* turn.c: every TURN_CRON_INTERVAL_MS */
    struct writer_txn_s *txn;        /* apply.c: the transaction EXEC runs, NULL outside one */
    bool to_settle;                  /* queue_wait.c: queues are marked for serving (writer_settle()) */
    bool coord_pending;              /* coord_wait.c: a lock or election with waiters became free */
} writer_t;

void writer_init(server_t *s);
void writer_start(server_t *s);
void writer_close_handles(server_t *s);
void writer_destroy(server_t *s);

/* writer_client_gone() -- a client went away (the command layer, when
 * its connection closes): its parked command w, if not NULL, is dropped
 * without an answer, and the ELECT.OBSERVE / Q.WATCH observers on its
 * list `observers` are removed. */
struct waiter_s;
void writer_client_gone(server_t *s, struct waiter_s *w, ordo_list_t *observers);

#endif /* ORDO_WRITER_H */
