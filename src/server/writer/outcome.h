/*
 * outcome.h -- the writer's one exit: what it tells a parked client or an
 * observer, as data. The writer never writes RESP and never touches a
 * connection: a client is an opaque pointer it was handed when the client
 * parked or observed, and what happened to it is an outcome_t the writer
 * passes to the server's answer hook (server_hooks_t, server.h). The
 * command layer renders outcomes as RESP (cmd/cmd_outcome.c), and its
 * handlers render their own immediate replies of the same shapes with the
 * same code, so the shape of a Q.PULL reply or a won campaign is written
 * once.
 *
 * Pointers inside an outcome are valid for the duration of the hook call
 * only. Loop thread only.
 */
#ifndef ORDO_WRITER_OUTCOME_H
#define ORDO_WRITER_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/queue.h"

enum outcome_kind {
    OUTCOME_OK = 1,    /* done, nothing to say: a cluster change applied */
    OUTCOME_UINT,      /* a number: a parked push's message id, a granted lock's token */
    OUTCOME_NIL,       /* nothing: a LOCK.ACQUIRE WAIT, ELECT.CAMPAIGN or Q.RESULT BLOCK ran out */
    OUTCOME_MESSAGES,  /* delivered messages (Q.PULL); none: a pull that ran out */
    OUTCOME_FATE,      /* a finished message (Q.CALL, Q.RESULT): its result, none, or a dead letter */
    OUTCOME_CAMPAIGN,  /* a won campaign: the term, with HANDOVER the value it took over */
    OUTCOME_ERROR,     /* a refusal: "CODE text" (TIMEOUT, NOTFOUND, LIMIT, READONLY, NOTLEADER, ERR) */
    OUTCOME_LEADER,    /* an ELECT.OBSERVE event: an election's new term (0: vacant) */
    OUTCOME_QEVENT,    /* a Q.WATCH event: one message event of a queue */
};

typedef struct outcome_s {
    int kind; /* enum outcome_kind */
    union {
        uint64_t uint; /* OUTCOME_UINT */
        struct {
            const queue_delivery_t *v;
            size_t n;
        } messages;    /* OUTCOME_MESSAGES */
        struct {
            uint64_t id;
            int fate;                   /* QUEUE_FATE_DONE, _DEADLETTER or _NONE (done, no result) */
            const queue_result_t *result; /* DONE: the kept result, NULL or not DONE if none */
        } fate;        /* OUTCOME_FATE */
        struct {
            uint64_t term;
            bool handover;              /* asked for the handed-over value */
            bool lapsed;                /* the value is a lapsed term's last, not handed over */
            const char *value;          /* NULL: none */
            size_t vlen;
        } campaign;    /* OUTCOME_CAMPAIGN */
        struct {
            const char *text;           /* "CODE message", one line */
        } error;       /* OUTCOME_ERROR */
        struct {
            const char *name;
            size_t nlen;
            uint64_t term;              /* 0: vacant (value none) */
            const char *value;
            size_t vlen;
        } leader;      /* OUTCOME_LEADER */
        struct {
            uint64_t watch_id, rev;
            const queue_event_t *ev;
        } qevent;      /* OUTCOME_QEVENT */
    };
} outcome_t;

#endif /* ORDO_WRITER_OUTCOME_H */
