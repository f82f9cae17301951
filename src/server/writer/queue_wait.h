/*
 * queue_wait.h -- the writer's side of the queues: who waits on which
 * queue (Q.PULL BLOCK, Q.PUSH under ONFULL block, Q.CALL, Q.RESULT BLOCK),
 * serving them when a record makes what they wait for appear, and the
 * queue timer that logs a record for every due deadline (leases, delays,
 * dedup windows, result retention). See queue_wait.c for the design.
 *
 * cmd_queue.c parses the Q.* commands, makes the client's records and
 * renders their outcomes, and parks with the qwait_park_*() calls. It
 * serves nobody and arms no timer: the door's after-apply step
 * (qwait_after_apply(), writer/apply.h) marks the queue and re-arms the
 * timer, and writer_settle(), after the command, serves the parked. What a
 * parked client is told later is an outcome (outcome.h), never RESP.
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
#include "writer/outcome.h"

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
 * memory limit) through the door, unless the log has failed. Returns true
 * if it changed something and the log stored it. */
bool qwait_apply(server_t *s, record_t *rec, apply_result_t *res);
/* qwait_after_apply() -- the queue family's after-apply step (the door's
 * table, apply.h), for a queue record that applied (AP_OK): answer the
 * callers a completion finished (an ack, a NOACK delivery, a dead letter),
 * answer a dropped queue's callers and pushers, re-arm the queue timer,
 * and mark the queue (and a dead-letter queue) for serving at the next
 * settle. */
void qwait_after_apply(server_t *s, const record_t *rec, const apply_result_t *res);
/* qwait_settle() -- serve every queue marked since the last settle, until
 * serving marks none (writer_settle()). */
void qwait_settle(server_t *s);

/* qwait_retry_record() -- if queue name has a retry policy (BACKOFF or
 * MAXAGE), fill *rec with the REC_Q_RETRY record for delivery (id, token)
 * coming back (lease: its lease ran out, else a nack without DELAY): the
 * delay drawn now by the policy, and the MAXAGE verdict (queue_wait.c,
 * "Retry policies"); rec's queue points at name. Returns false, leaving
 * *rec alone, for a queue without a policy (or none at all). */
bool qwait_retry_record(server_t *s, const char *name, size_t nlen, uint64_t id, uint64_t token, bool lease,
                        record_t *rec);
/* A drawn delay never exceeds ten years, as a client's DELAY. */
#define QWAIT_DELAY_MAX_MS (10ull * 366 * 24 * 3600 * 1000)

/* qwait_arm_expire_scan() -- while some queue has MAXWAIT, scan for
 * messages past it within a second (queue_wait.c, "Expiry"). */
void qwait_arm_expire_scan(server_t *s);

/* qwait_arm_schedules() -- arm the schedule timer for the next tick
 * (queue_wait.c, "Schedules"). */
void qwait_arm_schedules(server_t *s);

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
 * messages delivered, with their framing, reach max-reply-bytes), handing
 * each delivered message to each(arg, d) right after its record (d is
 * valid during the call only); returns how many. */
typedef void (*qwait_sink_fn)(void *arg, const queue_delivery_t *d);
/* What one message counts against max-reply-bytes besides its key and
 * payload, in a Q.PULL (qwait_deliver()) and a Q.PEEK alike: its framing
 * (five elements, three of them numbers of up to 20 digits), rounded up. */
#define QWAIT_MESSAGE_FRAMING_BYTES 96
size_t qwait_deliver(server_t *s, const char *name, size_t nlen, uint32_t count, uint64_t lease_ms, bool noack,
                     qwait_sink_fn each, void *arg);
/* qwait_gc() -- free the wait lists that were left empty. */
void qwait_gc(server_t *s);
/* qwait_limit_text() -- the -LIMIT text for a push over queue name's
 * MAXPERKEY, into buf of blen bytes (a handler's and a parked pusher's). */
void qwait_limit_text(server_t *s, const char *name, size_t nlen, char *buf, size_t blen);

/* Park client c (an opaque pointer; its outcome is given when served or
 * timed out):
 * until message id is done (call: Q.CALL's -TIMEOUT, else nil); until the
 * push rec fits (a copy of it is kept); until count messages can be
 * delivered. has_timeout false or timeout 0: no deadline (for a pull,
 * block_ms 0 waits for ever as BLOCK 0 does). */
void qwait_park_result(server_t *s, struct conn_s *c, const char *name, size_t nlen, uint64_t id, uint64_t timeout_ms,
                       bool has_timeout, bool call);
void qwait_park_push(server_t *s, struct conn_s *c, const record_t *rec, bool coalesce, uint64_t delay_ms,
                     uint64_t timeout_ms, bool has_timeout, bool call);
void qwait_park_pull(server_t *s, struct conn_s *c, const char *name, size_t nlen, uint32_t count, uint64_t lease_ms,
                     bool noack, uint64_t block_ms);
/* qwait_dropped() -- queue name was dropped: its callers and pushers get
 * -NOTFOUND; its pullers keep waiting on the name. */
void qwait_dropped(server_t *s, const char *name, size_t nlen);
/* qwait_blocked() -- parked pullers and pushers of queue name (Q.INFO). */
void qwait_blocked(server_t *s, const char *name, size_t nlen, size_t *pullers, size_t *pushers);

#endif /* ORDO_QUEUE_WAIT_H */
