/*
 * queue_wait.h -- the writer's side of the queues: who waits on which
 * queue (Q.PULL BLOCK, Q.PUSH under ONFULL block, Q.CALL, Q.RESULT BLOCK),
 * serving them when a record makes what they wait for appear, and the
 * queue timer that logs a record for every due deadline (leases, delays,
 * dedup windows, result retention). See queue_wait.c for the design.
 *
 * cmd_queue.c parses the Q.* commands, makes the client's records and
 * speaks RESP about them; after each write it calls qwait_note_timer()
 * and qwait_serve() here, and parks with the qwait_park_*() calls.
 *
 * Owner: s->writer.queues (qwait_init() .. qwait_destroy()); the loop
 * thread only.
 */
#ifndef ORDO_QUEUE_WAIT_H
#define ORDO_QUEUE_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server.h"

/* qwait_init() -- the empty wait lists (before recovery); qwait_start()
 * -- after recovery: the timer, armed for the recovered deadlines;
 * qwait_close_handles() at shutdown; qwait_destroy() frees the wait lists
 * after the loop ends. */
void qwait_init(server_t *s);
void qwait_start(server_t *s);
/* qwait_rearm() -- arm the queue timer for the earliest deadline in the
 * state (a new cluster leader takes the deadlines over). */
void qwait_rearm(server_t *s);
void qwait_close_handles(server_t *s);
void qwait_destroy(server_t *s);

/* qwait_apply() -- apply a record the writer decided (not a client's: no
 * memory limit), unless the log has failed. Returns true if it changed
 * something and the log stored it. */
bool qwait_apply(server_t *s, record_t *rec, apply_result_t *res);

/* qwait_catch_up() -- before a command uses queue name: apply its due
 * deadlines first. Returns false if the log refused one of their records
 * (the command must answer -READONLY). */
bool qwait_catch_up(server_t *s, const char *name, size_t nlen);
/* qwait_note_timer() -- a write to queue name may have moved its earliest
 * deadline before the timer's: re-arm. O(1). */
void qwait_note_timer(server_t *s, const char *name, size_t nlen);
/* qwait_serve() -- after a write to queue name: serve its parked pushers
 * and pullers until neither can move. */
void qwait_serve(server_t *s, const char *name, size_t nlen);
/* qwait_complete_id() -- message id of queue name is finished (fate:
 * QUEUE_FATE_*): answer everyone parked on it. */
void qwait_complete_id(server_t *s, const char *name, size_t nlen, uint64_t id, int fate);
/* qwait_after_retry() -- a nack or lease expiry came back with res->qr: a
 * dead letter finishes the message for its callers and may serve the
 * dead-letter queue's pullers. */
void qwait_after_retry(server_t *s, const char *name, size_t nlen, const apply_result_t *res);
/* qwait_deliver() -- apply up to count deliver records (fewer once the
 * messages written reach max-reply-bytes), writing each
 * message into out; returns how many. */
size_t qwait_deliver(server_t *s, const char *name, size_t nlen, uint32_t count, uint64_t lease_ms, bool noack,
                     ordo_buf_t *out);
/* qwait_gc() -- free the wait lists that were left empty. */
void qwait_gc(server_t *s);
/* qwait_scratch() -- a buffer for a pull's messages before their count is
 * known; valid until the next qwait_* call. */
ordo_buf_t *qwait_scratch(server_t *s);

/* Replies the writer and the handlers share: a message's fate on c (see
 * queue_wait.c), -LIMIT for MAXPERKEY into out, and one delivered message
 * ([id, key, payload, attempt, token]). */
void qwait_add_msg(ordo_buf_t *out, const queue_delivery_t *d);
void qwait_add_fate(server_t *s, conn_t *c, uint64_t id, int fate, const queue_result_t *r);
void qwait_reply_limit(server_t *s, ordo_buf_t *out, const char *name, size_t nlen);

/* Park connection c (its reply is written when served or timed out):
 * until message id is done (call: Q.CALL's -TIMEOUT, else nil); until the
 * push rec fits (a copy of it is kept); until count messages can be
 * delivered. has_timeout false or timeout 0: no deadline (for a pull,
 * block_ms 0 waits for ever as BLOCK 0 does). */
void qwait_park_result(server_t *s, conn_t *c, const char *name, size_t nlen, uint64_t id, uint64_t timeout_ms,
                       bool has_timeout, bool call);
void qwait_park_push(server_t *s, conn_t *c, const record_t *rec, bool coalesce, uint64_t delay_ms,
                     uint64_t timeout_ms, bool has_timeout, bool call);
void qwait_park_pull(server_t *s, conn_t *c, const char *name, size_t nlen, uint32_t count, uint64_t lease_ms,
                     bool noack, uint64_t block_ms);
/* qwait_dropped() -- queue name was dropped: its callers and pushers get
 * -NOTFOUND; its pullers keep waiting on the name. */
void qwait_dropped(server_t *s, const char *name, size_t nlen);
/* qwait_blocked() -- parked pullers and pushers of queue name (Q.INFO). */
void qwait_blocked(server_t *s, const char *name, size_t nlen, size_t *pullers, size_t *pushers);

#endif /* ORDO_QUEUE_WAIT_H */
