/*
 * block.h -- blocking commands: a client parked on a wait list until the
 * state it waits for appears, its deadline passes, or it disconnects.
 *
 * Q.PULL BLOCK, Q.CALL, LOCK.ACQUIRE WAIT and the like wait server-side,
 * never by polling. A command that cannot answer yet is parked (through
 * its family's wait code: queue_wait.h, coord_wait.h) with block_wait(),
 * and the waiter joins a FIFO wait list of that family (one per queue, per
 * lock, ...). When a record makes the awaited state appear, the family's
 * wait code takes waiters from the list's head, in arrival order, and
 * answers them with block_answer(); at the deadline the waiter's
 * on_timeout gives the timeout outcome; if the client disconnects the
 * waiter is dropped (on_cancel); if the server turns read-only it gets
 * -READONLY (block_readonly()).
 *
 * The client is an opaque pointer (a connection, to the layers above):
 * block.c never looks inside it. What parking and answering mean to the
 * client goes through the server's hooks (server.h): hooks.park when it
 * parks (its later pipelined commands wait in its input), hooks.answer
 * with the outcome (writer/outcome.h), hooks.resume once answered (it runs
 * its pipeline at the end of the loop turn).
 *
 * Waiting is never state: the core does not know who waits. Serving a
 * waiter is a new record (a delivery, a grant) applied at that moment, so
 * the log and replay stay deterministic.
 *
 * Not thread-safe: the loop thread owns every waiter.
 */
#ifndef ORDO_BLOCK_H
#define ORDO_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/heap.h"
#include "base/list.h"
#include "server.h"
#include "writer/outcome.h"

typedef struct waiter_s waiter_t;

/* What a parked command waits for: INFO clients counts each kind
 * (blocked_<kind>), and their sum is blocked_clients. A Q.CALL stays a
 * BLOCK_CALL while it waits for room and then for its result. */
enum block_kind {
    BLOCK_PULL = 0,   /* Q.PULL BLOCK: a deliverable message */
    BLOCK_PUSH,       /* Q.PUSH under ONFULL block: room in the queue */
    BLOCK_CALL,       /* Q.CALL: room, then the message's fate */
    BLOCK_RESULT,     /* Q.RESULT BLOCK: the message's fate */
    BLOCK_LOCK,       /* LOCK.ACQUIRE WAIT: the lock */
    BLOCK_ELECT,      /* ELECT.CAMPAIGN (WAIT): leadership */
    BLOCK_CLUSTER,    /* CLUSTER ADD/REMOVE/TRANSFER: raft's answer */
    BLOCK_KINDS
};
/* "pull", "push", ...: the INFO field suffix of a kind. */
const char *block_kind_name(int kind);

/* A FIFO of waiters (intrusive, base/list.h). Zero-initialised is empty. */
typedef ordo_list_t wait_list_t;

struct waiter_s {
    server_t *srv;
    struct conn_s *client;           /* opaque: handed to the hooks, never looked into */
    ordo_list_node_t all_ln;         /* in s->writer.block.all while parked */
    wait_list_t *list;               /* the list it waits on (kept after leaving it, for on_cancel) */
    ordo_list_node_t ln;             /* in list while parked */
    uint64_t deadline_ms;            /* 0: no deadline */
    int kind;                        /* enum block_kind */
    ordo_heap_node_t hn;             /* in the server's deadline heap iff deadline_ms != 0 */
    /* The deadline passed: fill *o with the timeout outcome (text, if an
     * error, in buf of blen bytes) and release data. */
    void (*on_timeout)(waiter_t *w, outcome_t *o, char *buf, size_t blen);
    /* The connection went away: release data (no reply). May be NULL. */
    void (*on_cancel)(waiter_t *w);
    void *data;                      /* the handler's: what it waits for */
};

/* The waiter at the head of list (the first to be served), NULL if none. */
static inline waiter_t *wait_list_first(const wait_list_t *list)
{
    return list->head != NULL ? ORDO_LIST_ENTRY(list->head, waiter_t, ln) : NULL;
}

/* block_wait() -- park client on list until deadline_ms (0: none) has
 * passed (the clock is past it: a wait never ends early in real time),
 * counted as `kind` (enum block_kind). The waiter is allocated here and
 * freed by block_answer() / timeout / cancel; fill in on_timeout,
 * on_cancel and data on the returned waiter. */
waiter_t *block_wait(server_t *s, struct conn_s *client, wait_list_t *list, uint64_t deadline_ms, int kind);

/* block_answer() -- give the waiter its outcome (hooks.answer), unlink it,
 * free it, resume the client at the end of the loop turn. The family's
 * data must be released before (w->data is not looked at). */
void block_answer(server_t *s, waiter_t *w, const outcome_t *o);
/* block_answer_error() -- block_answer() with an OUTCOME_ERROR of text. */
void block_answer_error(server_t *s, waiter_t *w, const char *text);

/* block_move() -- w now waits on list `to` (at its tail) instead, with the
 * same deadline: a command that waits in two stages (Q.CALL under ONFULL
 * block: for room, then for its result) stays parked throughout, so its
 * connection does not resume in between. */
void block_move(waiter_t *w, wait_list_t *to);

/* block_cancel() -- the client of w went away: drop w (calls on_cancel;
 * no answer). */
void block_cancel(server_t *s, waiter_t *w);

/* block_readonly() -- the server just turned read-only: every parked
 * waiter (and any that parks from now on) is answered "-READONLY <reason>"
 * at the next loop turn, never left to its deadline. Safe to call anywhere,
 * inside a record's apply included. */
void block_readonly(server_t *s);

/* block_init() (writer_start()) / block_close_handles() (at shutdown) --
 * the wait heap and the deadline timer (s->writer.block, writer.h). */
/* block_notleader() -- this cluster member stopped leading: every parked
 * waiter but a CLUSTER change's is answered "-NOTLEADER <leader>" now
 * (what it waits for will happen on the new leader, if at all). Not from
 * inside an apply. */
void block_notleader(server_t *s, const char *leader);

void block_init(server_t *s);
void block_close_handles(server_t *s);

#endif /* ORDO_BLOCK_H */
