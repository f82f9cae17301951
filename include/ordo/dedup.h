/*
 * ordo/dedup.h -- the dedup automaton: at most one holder processing a key,
 * at most one waiting behind it, every further arrival declined.
 *
 * Per key:
 *
 *   state    holder  waiter   an arrival     the holder finishes
 *   Init     -       -        -> Process     (no holder)
 *   Process  h       -        -> Block       -> Init
 *   Block    h       w        declined       -> Process, w is the holder
 *
 * ("Decline" is the outcome of an arrival in Block: ORDO_EDECLINED; the
 * state does not change.) The waiter stands for all the work that arrived
 * while h was running: one more run after h covers it, so the rest can be
 * dropped. A waiter whose holder never finishes is released after the
 * safety timeout: it becomes the holder (Block -> Process) and the old
 * holder is stale. Every admitted arrival gets a ticket, unique within the
 * automaton; a finish names its ticket, so a stale holder's late finish is
 * recognised, changes nothing, and is reported to it (ORDO_DEDUP_STALE).
 *
 * A key's state is allocated when it leaves Init and freed when it returns,
 * so memory follows the number of active keys. Keys are binary-safe and
 * copied.
 *
 * Two layers:
 *
 * - ordo_dedup_core_t, the state machine alone: NOT thread-safe, never reads
 *   a clock, never blocks. Every call takes the current time in
 *   milliseconds, and waiters are released only by an explicit
 *   ordo_dedup_core_expire(now_ms). Its outcome is therefore a function of
 *   its inputs, which is what a deterministic log-apply loop needs (ordod
 *   feeds it the time of each log record). Times need not start anywhere in
 *   particular but must not go backwards: a now_ms below the latest one seen
 *   is treated as that latest one.
 *
 * - ordo_dedup_t, a thread-safe blocking wrapper for in-process use: an
 *   arrival that has to wait blocks until it becomes the holder.
 */
#ifndef ORDO_DEDUP_H
#define ORDO_DEDUP_H

#include "ordo/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Identifies one admitted arrival; never 0. */
typedef uint64_t ordo_dedup_ticket_t;

/* Outcomes (non-negative return values). */
enum {
    ORDO_DEDUP_HOLDER = 0,    /* arrive: the caller holds the key at once */
    ORDO_DEDUP_WAITER = 1,    /* core arrive: the caller waits behind the holder */
    ORDO_DEDUP_PROMOTED = 2,  /* finish: the waiter became the holder;
                               * blocking arrive: the caller waited and its
                               * holder finished, so it holds the key now */
    ORDO_DEDUP_TAKEOVER = 3,  /* blocking arrive: the caller waited until the
                               * safety timeout released it; it holds the key,
                               * and the old holder may still be running */
    ORDO_DEDUP_IDLE = 4,      /* finish: nobody waited; the key is back in Init */
    ORDO_DEDUP_STALE = 5,     /* finish: the ticket does not hold the key (its
                               * waiter was released, or it finished already);
                               * nothing changed */
    ORDO_DEDUP_WITHDRAWN = 6, /* core finish with the waiter's ticket: the
                               * waiter gave up, the key is back in Process */
};

/* Key states, as reported by ordo_dedup_core_state(). */
typedef enum {
    ORDO_DEDUP_INIT = 0,
    ORDO_DEDUP_PROCESS = 1,
    ORDO_DEDUP_BLOCK = 2,
} ordo_dedup_state_t;

/* ---- the core state machine ------------------------------------------------ */

typedef struct ordo_dedup_core_s ordo_dedup_core_t;

/* What an admitted arrival gets back from the core. */
typedef struct {
    ordo_dedup_ticket_t ticket;
    int64_t deadline_ms; /* a waiter: when expire() releases it; a holder: 0 */
} ordo_dedup_arrival_t;

/* A waiter that became holder: its ticket and the udata it arrived with. */
typedef struct {
    ordo_dedup_ticket_t ticket;
    void *udata;
} ordo_dedup_promotion_t;

/* Called by ordo_dedup_core_expire() for each waiter it releases, oldest
 * deadline first. stale is the ticket of the holder it displaced. The key is
 * valid for the duration of the call only; the callback must not call into
 * the core. */
typedef void (*ordo_dedup_expire_fn)(const void *key, size_t key_len,
                                     ordo_dedup_promotion_t promoted,
                                     ordo_dedup_ticket_t stale, void *arg);

/* ordo_dedup_core_create() -- an empty automaton whose waiters are released
 * safety_timeout_ms (>= 0) after they arrive. Returns ORDO_OK, ORDO_EINVAL
 * or ORDO_ENOMEM. */
int ordo_dedup_core_create(int64_t safety_timeout_ms, ordo_dedup_core_t **core_out);

/* ordo_dedup_core_destroy() -- free it and every key state; udata pointers
 * are the caller's and are not touched. */
void ordo_dedup_core_destroy(ordo_dedup_core_t *core);

/* ordo_dedup_core_arrive() -- an arrival for key at now_ms. udata is the
 * caller's (may be NULL), stored with the arrival and handed back when it is
 * promoted. On success *arrival_out gets the ticket (and a waiter's
 * deadline). Returns
 *   ORDO_DEDUP_HOLDER  Init -> Process: the caller holds the key;
 *   ORDO_DEDUP_WAITER  Process -> Block: the caller waits;
 *   ORDO_EDECLINED     Block: declined, nothing changed, no ticket;
 *   ORDO_ENOMEM        the key state could not be allocated (Init only);
 *   ORDO_EINVAL        key is NULL with key_len > 0, or arrival_out is NULL. */
int ordo_dedup_core_arrive(ordo_dedup_core_t *core, const void *key, size_t key_len,
                           int64_t now_ms, void *udata, ordo_dedup_arrival_t *arrival_out);

/* ordo_dedup_core_finish() -- the arrival with ticket is done with key.
 * *promoted_out (may be NULL) gets the new holder on ORDO_DEDUP_PROMOTED and
 * is zeroed otherwise. Returns
 *   ORDO_DEDUP_IDLE       the holder finished, nobody waited: Process -> Init;
 *   ORDO_DEDUP_PROMOTED   the holder finished: Block -> Process;
 *   ORDO_DEDUP_WITHDRAWN  ticket was the waiter's: Block -> Process;
 *   ORDO_DEDUP_STALE      ticket neither holds nor waits for key: no change;
 *   ORDO_EINVAL           key is NULL with key_len > 0. */
int ordo_dedup_core_finish(ordo_dedup_core_t *core, const void *key, size_t key_len,
                           ordo_dedup_ticket_t ticket, int64_t now_ms,
                           ordo_dedup_promotion_t *promoted_out);

/* ordo_dedup_core_expire() -- release every waiter whose deadline is at or
 * before now_ms: each becomes its key's holder (Block -> Process) and is
 * reported to fn (may be NULL). Returns how many were released. O(1) per
 * released waiter: all waiters share one timeout, so deadlines are kept in
 * arrival order. */
size_t ordo_dedup_core_expire(ordo_dedup_core_t *core, int64_t now_ms, ordo_dedup_expire_fn fn,
                              void *arg);

/* ordo_dedup_core_next_deadline() -- the earliest waiter deadline in
 * *deadline_ms_out: call expire() then. Returns ORDO_OK, or ORDO_ENOTFOUND
 * when nobody waits. */
int ordo_dedup_core_next_deadline(const ordo_dedup_core_t *core, int64_t *deadline_ms_out);

/* ordo_dedup_core_state() -- the state of key. */
ordo_dedup_state_t ordo_dedup_core_state(const ordo_dedup_core_t *core, const void *key,
                                         size_t key_len);

/* ordo_dedup_core_active() -- how many keys are out of Init (= allocated
 * key states). */
size_t ordo_dedup_core_active(const ordo_dedup_core_t *core);

/* ---- the blocking wrapper ------------------------------------------------------ */

typedef struct ordo_dedup_s ordo_dedup_t;

/* ordo_dedup_create() -- a thread-safe automaton whose waiters are released
 * after safety_timeout_ms (>= 0) on the monotonic clock. Returns ORDO_OK,
 * ORDO_EINVAL, ORDO_ENOMEM or ORDO_ESYS. */
int ordo_dedup_create(int64_t safety_timeout_ms, ordo_dedup_t **dedup_out);

/* ordo_dedup_destroy() -- free it. No thread may be inside or enter a call
 * on it; keys still held are forgotten. */
void ordo_dedup_destroy(ordo_dedup_t *dedup);

/* ordo_dedup_arrive() -- arrive for key; if a holder is running, wait
 * behind it. *ticket_out receives the caller's ticket, which it must pass to
 * ordo_dedup_finish() when done (on every non-negative return). Returns
 *   ORDO_DEDUP_HOLDER    the caller holds the key, without waiting;
 *   ORDO_DEDUP_PROMOTED  it waited, the holder finished, it holds the key;
 *   ORDO_DEDUP_TAKEOVER  it waited safety_timeout_ms and was released: it
 *                        holds the key and the old holder is stale;
 *   ORDO_EDECLINED       one holder and one waiter exist already: the
 *                        caller's work is covered by the waiter's run;
 *   ORDO_ENOMEM, ORDO_EINVAL as for ordo_dedup_core_arrive();
 *   ORDO_ESYS            a condition variable could not be made. */
int ordo_dedup_arrive(ordo_dedup_t *dedup, const void *key, size_t key_len,
                      ordo_dedup_ticket_t *ticket_out);

/* ordo_dedup_finish() -- the holder with ticket is done with key; wakes the
 * waiter, if any, as the new holder. Returns ORDO_DEDUP_IDLE,
 * ORDO_DEDUP_PROMOTED, ORDO_DEDUP_STALE (the caller had been displaced by a
 * safety timeout: its finish changed nothing) or ORDO_EINVAL. */
int ordo_dedup_finish(ordo_dedup_t *dedup, const void *key, size_t key_len,
                      ordo_dedup_ticket_t ticket);

/* ordo_dedup_state() -- the state of key now (a snapshot). */
ordo_dedup_state_t ordo_dedup_state(ordo_dedup_t *dedup, const void *key, size_t key_len);

/* ordo_dedup_active() -- how many keys are held now (a snapshot). */
size_t ordo_dedup_active(ordo_dedup_t *dedup);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_DEDUP_H */
