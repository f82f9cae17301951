/*
 * queue.h -- keyed work queues: the state machine behind Q.*.
 *
 * A registry of queues by name (queue_set_t). In one queue every message has
 * a key, and the module keeps docs/protocol.md's promise ("Queues"): at most
 * one message of a key in flight at a time (KEYCONCURRENCY n: n, started in
 * order); a key's messages are delivered in the order they became
 * available (push order, for pushes without DELAY); different keys go to
 * consumers in parallel, the key whose head message is oldest first.
 *
 * Like kv.h this is a pure data structure owned by the core thread: it never
 * reads the clock (every call that depends on time takes now_ms, the time
 * the writer put in the record), never allocates revisions (message ids,
 * delivery tokens and dead-letter ids are revisions the caller passes in),
 * never speaks RESP, never blocks. Applying the same calls with the same
 * arguments gives the same state and the same results. Blocking (Q.PULL
 * BLOCK, Q.CALL, ONFULL block) belongs to the writer (writer/queue_wait.c):
 * it parks the client and, when an apply reports room or a completion,
 * serves it with records of its own.
 *
 * Timers are records (docs/architecture.md, "The one rule"): the writer
 * reads the deadlines below (queue_next_timer() and friends), and when one
 * is due it logs a record whose apply calls queue_redeliver(),
 * queue_promote(), queue_dedup_expire() or queue_result_expire(). Each of these re-checks its condition against the
 * record's time and the current state, so a record made stale by an apply in
 * between (an ack, an extend) changes nothing. A deadline d is due at a
 * time t when d < t (not <=): times are whole ms, so an operation stamped
 * t began up to 1 ms after t, and a lease, delay or window must never end
 * before its full length has passed in real time.
 *
 * Memory: out of memory aborts (buf.h's allocators), as everywhere in ordod.
 * Pointers handed out (names, keys, payloads, results in views) stay valid
 * until the next call that changes the set, unless said otherwise.
 *
 * Not thread-safe: the core thread owns it.
 */
#ifndef ORDO_QUEUE_H
#define ORDO_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- limits and defaults ------------------------------------------------------- */

/* A key's waiting count is a 30-bit field (it keeps the per-key state at 40
 * bytes), so MAXLEN and MAXPERKEY stop there: a billion waiting messages is
 * ~100 GB, far beyond what one queue should hold. */
#define QUEUE_MAXLEN_MAX ((1u << 30) - 1)

/* Defaults, each with its reason:
 * MAXLEN 1,000,000: a queue is bounded by default (docs/protocol.md,
 *   "Defaults"); a million 100-byte messages is ~200 MB, enough backlog
 *   for real bursts, and a producer that outruns its consumers for longer
 *   gets -BUSY instead of taking the server's memory.
 * MAXPERKEY 0 (no cap): MAXLEN already bounds memory; a per-key cap is a
 *   fairness policy the user opts into.
 * ONFULL reject: a producer learns at once that the queue is full; blocking
 *   is opt-in because it moves the backlog into parked connections.
 * LEASE 30,000 ms: SQS's visibility timeout, long enough for typical work,
 *   short enough that a crashed consumer's key resumes within a minute.
 * MAXATTEMPTS 10: a message that failed ten deliveries is poison; unlimited
 *   attempts would block its key for ever (0 still means unlimited).
 * ONPOISON deadletter: the key moves on when a dead-letter queue takes the
 *   message; without one the key is parked (as ONPOISON park), so nothing
 *   is ever discarded unless the queue was configured ONPOISON drop.
 * DEDUP 60,000 ms: covers client retries after timeouts and reconnects.
 * RESULTTTL 60,000 ms: long enough for a Q.CALL caller that timed out to come
 *   back with Q.RESULT, and for a Q.CALL ID repeat inside the default dedup
 *   window to replay the result; short enough that results of a busy queue
 *   do not pile up. */
#define QUEUE_DEFAULT_MAXLEN 1000000u
#define QUEUE_DEFAULT_MAXPERKEY 0u
#define QUEUE_DEFAULT_LEASE_MS 30000u
#define QUEUE_DEFAULT_MAXATTEMPTS 10u
#define QUEUE_DEFAULT_DEDUP_MS 60000u
#define QUEUE_DEFAULT_RESULTTTL_MS 60000u

/* Backoff (queue_backoff_delay()), off by default so a queue without a
 * policy retries as it always did. Its defaults, used once BACKOFF is set:
 * BACKOFFBASE 1,000 ms: one second is long enough for a flapping
 *   dependency to recover and short enough that a transient error costs
 *   little; BACKOFFCAP 300,000 ms: past five minutes a retry waits behind
 *   work the key's later messages could be doing, and MAXAGE or
 *   MAXATTEMPTS is the better tool. MAXAGE 0: no limit (MAXATTEMPTS
 *   already ends a poison message). */
/* Rate limits (RATE n PER ms for the queue, KEYRATE n PER ms for each
 * key): token buckets of n tokens refilled n per `per` ms, one token a
 * delivery. n is at most QUEUE_RATE_MAX and per at most
 * QUEUE_RATE_PER_MS_MAX, so a bucket's level (n * per, in units of
 * 1/per token) stays far inside 64 bits; a million deliveries a day is
 * the slowest rate, a million a millisecond the fastest. */
#define QUEUE_RATE_MAX 1000000u
/* KEYCONCURRENCY: deliveries of one key in flight at once, 1 (the
 * default: strict per-key order) to QUEUE_KEYCONC_MAX. A key's deliveries
 * in flight are the first of its FIFO and some operations walk them, so
 * the bound keeps those walks short. */
#define QUEUE_KEYCONC_MAX 1000u
#define QUEUE_RATE_PER_MS_MAX 86400000u
#define QUEUE_DEFAULT_BACKOFF_BASE_MS 1000u
#define QUEUE_DEFAULT_BACKOFF_CAP_MS 300000u

/* ---- status codes --------------------------------------------------------------- */

enum queue_status {
    QUEUE_OK = 0,          /* push: a new message was enqueued (or delayed) */
    QUEUE_MERGED = 1,      /* push COALESCE: the payload replaced the key's newest waiting message */
    QUEUE_DUPLICATE = 2,   /* push ID: seen inside the dedup window; nothing enqueued */
    QUEUE_FULL = -1,       /* push: MAXLEN messages pending (command layer: -BUSY or wait) */
    QUEUE_LIMIT = -2,      /* push: MAXPERKEY messages of this key waiting */
    QUEUE_EINVAL = -3,     /* configure: a value out of range, or DEADLETTER names the queue itself */
};

enum queue_onfull { QUEUE_ONFULL_REJECT = 0, QUEUE_ONFULL_BLOCK = 1 };
/* ONPOISON: deadletter moves an exhausted message to the DEADLETTER queue,
 * or parks its key when none is configured (nothing is lost by default);
 * park always parks; drop moves it to the DEADLETTER queue or, without
 * one, discards it (its fate kept RESULTTTL): the only way a message is
 * thrown away, and only for a queue configured so. */
enum queue_onpoison { QUEUE_ONPOISON_DEADLETTER = 0, QUEUE_ONPOISON_PARK = 1, QUEUE_ONPOISON_DROP = 2 };
/* BACKOFF: how long a delivery that came back without a DELAY (a nack, a
 * lease that ran out) holds its key before the next attempt. none: ready
 * at once (as before policies existed); fixed: BACKOFFBASE every time;
 * exponential: full jitter, a uniform draw in [0, min(BACKOFFCAP,
 * BACKOFFBASE * 2^(attempt-1))] (queue_backoff_delay()). */
enum queue_backoff { QUEUE_BACKOFF_NONE = 0, QUEUE_BACKOFF_FIXED = 1, QUEUE_BACKOFF_EXPONENTIAL = 2 };
/* FAIRNESS: which ready key goes next. oldest (the default): the key whose
 * head message is oldest; roundrobin: the key that has been ready longest
 * (a key served goes behind every key ready before it came back), so
 * with k ready keys each gets a delivery within k. */
enum queue_fairness { QUEUE_FAIR_OLDEST = 0, QUEUE_FAIR_ROUNDROBIN = 1 };

typedef struct queue_set_s queue_set_t;
typedef struct queue_s queue_t;

/* A queue's configuration. deadletter is NULL (none) or dl_len bytes; in a
 * queue_config() answer it points into the queue, valid until the next
 * queue_configure() or drop. */
typedef struct queue_config_s {
    uint32_t maxlen;          /* pending (waiting + delayed) messages; 1..QUEUE_MAXLEN_MAX */
    uint32_t maxperkey;       /* waiting messages per key; 0: no cap */
    uint8_t onfull;           /* enum queue_onfull (the command layer acts on it) */
    uint8_t onpoison;         /* enum queue_onpoison */
    uint32_t maxattempts;     /* deliveries before a message is poison; 0: unlimited */
    uint64_t lease_ms;        /* default lease of a delivery; >= 1 */
    uint64_t dedup_ms;        /* dedup window; 0: ID is ignored */
    uint64_t resultttl_ms;    /* how long results and fates are kept; 0: not kept */
    const char *deadletter;   /* dead-letter queue name, or NULL */
    size_t dl_len;
    uint8_t backoff;          /* enum queue_backoff */
    uint64_t backoff_base_ms; /* >= 1 */
    uint64_t backoff_cap_ms;  /* exponential: >= backoff_base_ms */
    uint64_t maxage_ms;       /* a message older than this (since its push) that comes back
                                 is dead-lettered rather than retried; 0: no limit */
    uint64_t maxwait_ms;      /* a message never delivered this long after its push is
                                 dead-lettered (queue_expire()); 0: no limit */
    uint32_t rate_n;          /* RATE: deliveries per rate_per_ms for the queue; 0: no limit */
    uint64_t rate_per_ms;     /* 1..QUEUE_RATE_PER_MS_MAX when rate_n > 0, else 0 */
    uint32_t keyrate_n;       /* KEYRATE: deliveries per keyrate_per_ms for each key; 0: none */
    uint64_t keyrate_per_ms;
    uint32_t keyconc;         /* KEYCONCURRENCY: 1..QUEUE_KEYCONC_MAX deliveries of a key in flight */
    uint8_t fairness;         /* enum queue_fairness */
} queue_config_t;

/* queue_policy_active() -- true if the queue has a retry policy (BACKOFF
 * or MAXAGE): only then does the writer decide retries itself
 * (REC_Q_RETRY); a queue without one pays nothing for policies. */
bool queue_policy_active(const queue_config_t *cfg);
/* queue_backoff_delay() -- the delay before attempt + 1, for a delivery
 * that came back after `attempt` attempts, by cfg's BACKOFF; `draw` is a
 * uniform 64-bit random number the writer drew (apply reads no random
 * source: the delay travels in the record). 0 for BACKOFF none. Pure. */
uint64_t queue_backoff_delay(const queue_config_t *cfg, uint32_t attempt, uint64_t draw);

/* ---- events (Q.WATCH) ---------------------------------------------------------------
 * A message's life as it happens: the registry calls its event callback at
 * each transition, inside the call that makes it (so within one apply, in
 * apply order). Pointers are valid for the duration of the callback only.
 * Not emitted: merges (COALESCE), promotions of delayed messages, lease-out
 * redeliveries (the next delivery shows as delivered with a higher attempt),
 * unparks, drops, and anything a snapshot load rebuilds. */
enum queue_event_type {
    QUEUE_EV_PUSHED = 1,       /* data: the payload (also a dead letter arriving in its queue) */
    QUEUE_EV_DELIVERED = 2,    /* n: the attempt */
    QUEUE_EV_ACKED = 3,        /* data: the result, NULL if none */
    QUEUE_EV_NACKED = 4,       /* n: when the next attempt may start (ms), 0 if at once */
    QUEUE_EV_DEADLETTERED = 5, /* n: its id in the dead-letter queue, 0 if discarded */
    QUEUE_EV_PARKED = 6,       /* its key is parked (the poison message stays its head) */
};

typedef struct queue_event_s {
    int type;                  /* enum queue_event_type */
    const char *queue;
    size_t qlen;
    const char *key;
    size_t klen;
    uint64_t id;               /* the message */
    uint64_t n;                /* per type, above */
    const char *data;          /* per type, above */
    size_t dlen;
} queue_event_t;

typedef void (*queue_event_cb)(void *arg, const queue_event_t *ev);

/* ---- the registry ---------------------------------------------------------------- */

/* queue_set_create() -- an empty registry (aborts if out of memory). */
queue_set_t *queue_set_create(void);
/* queue_set_destroy() -- free the registry and every queue in it. */
void queue_set_destroy(queue_set_t *s);
/* queue_set_event_cb() -- call cb(arg, event) at each message transition
 * (NULL: none). */
void queue_set_event_cb(queue_set_t *s, queue_event_cb cb, void *arg);
/* queue_set_copy_event_cb() -- dst tells whom src tells. */
void queue_set_copy_event_cb(queue_set_t *dst, const queue_set_t *src);

/* queue_get() -- the queue called name, or NULL. O(1). */
queue_t *queue_get(const queue_set_t *s, const void *name, size_t len);
/* queue_open() -- the queue called name, created with the defaults if absent
 * (a queue exists from its first push or Q.CONFIG). O(1). The queue is
 * owned by the set; the pointer is valid until it is dropped. */
queue_t *queue_open(queue_set_t *s, const void *name, size_t len);
/* queue_drop() -- delete the queue and everything in it (messages, in-flight
 * deliveries, dedup entries, results). Returns 1, or 0 if there was no such
 * queue. O(size of the queue). */
int queue_drop(queue_set_t *s, const void *name, size_t len);
/* queue_set_count() -- number of queues. */
size_t queue_set_count(const queue_set_t *s);
/* queue_set_foreach() -- call fn for every queue, in no particular order
 * (Q.LIST; snapshots). fn must not create or drop queues. */
void queue_set_foreach(const queue_set_t *s, void (*fn)(void *arg, queue_t *q), void *arg);
/* queue_name() -- the queue's name (*len receives its length). */
const char *queue_name(const queue_t *q, size_t *len);

/* queue_config() -- the queue's configuration into *out. */
void queue_config(const queue_t *q, queue_config_t *out);
/* queue_configure() -- replace the configuration (the command layer reads
 * the current one, changes the options given, and passes it back). The
 * dead-letter name is copied. Returns QUEUE_OK or QUEUE_EINVAL (nothing
 * changed): a value out of range, or a KEYCONCURRENCY below what a key
 * has in flight now. New limits apply to later pushes; messages already
 * queued stay; a new LEASE applies to later deliveries; a new KEYRATE
 * ends every throttle; a new KEYCONCURRENCY or FAIRNESS rebuilds the
 * ready keys (O(keys log keys)). */
int queue_configure(queue_t *q, const queue_config_t *cfg);
/* queue_config_defaults() -- the defaults above into *out. */
void queue_config_defaults(queue_config_t *out);

/* ---- push ------------------------------------------------------------------------- */

typedef struct queue_push_s {
    const void *key;          /* binary-safe, copied */
    size_t klen;              /* < 2^32 */
    const void *payload;      /* copied */
    size_t plen;              /* < 2^32 */
    const void *dedup_id;     /* ID dedup-id, or NULL */
    size_t dlen;
    bool coalesce;            /* COALESCE */
    uint64_t delay_ms;        /* DELAY; 0 for none */
    const void *idem;         /* an idempotency key of this message key, or NULL (then no dedup_id) */
    size_t ilen;
    uint64_t idem_hash;       /* idem: the request it is bound to */
    uint64_t idem_ms;         /* idem: kept this long after the push */
} queue_push_t;

/* queue_push() -- Q.PUSH. id is the new message's id (the record's
 * revision). Checks, in order:
 *   1. ID: a live dedup entry (window end > now_ms) -> QUEUE_DUPLICATE, *id_out
 *      = the first push's id, nothing changes. (An entry whose window has
 *      ended is replaced, whether or not its expiry record came yet.) An
 *      idempotency key (idem) is the same with its own entry, scoped to
 *      the message key: whatever the entry's request hash (the command
 *      layer compares hashes before it makes the record).
 *   2. COALESCE: the key has a waiting message -> its newest waiting message
 *      takes the payload, keeps its place and id; QUEUE_MERGED, *id_out = its
 *      id. Merging adds nothing, so it succeeds even when the queue is full.
 *   3. MAXLEN pending -> QUEUE_FULL; MAXPERKEY waiting of the key -> QUEUE_LIMIT.
 *   4. Otherwise QUEUE_OK, *id_out = id: appended to the key's FIFO, or, with
 *      DELAY, held until now_ms + delay_ms (see queue_promote()).
 * With ID and a dedup window, outcomes 2 and 4 record dedup_id -> *id_out
 * until now_ms + dedup_ms; with idem, outcome 4 records (key, idem) ->
 * (idem_hash, *id_out) until now_ms + idem_ms. Due delayed messages are promoted first.
 * Delayed messages are pending (they count towards MAXLEN) but belong to no
 * key until due: they are neither COALESCE targets nor counted by MAXPERKEY,
 * and a push that merges ignores its DELAY. O(log n). */
int queue_push(queue_t *q, const queue_push_t *p, uint64_t id, uint64_t now_ms, uint64_t *id_out);

/* ---- delivery --------------------------------------------------------------------- */

/* A delivered (or peeked) message. Pointers are into the queue. */
typedef struct queue_delivery_s {
    uint64_t id;
    const char *key;
    size_t klen;
    const char *payload;
    size_t plen;
    uint32_t attempt;         /* 1 for the first delivery */
    uint64_t token;           /* the delivery's fencing token (0 in a peek) */
    uint64_t deadline_ms;     /* lease end (0 for NOACK or a peek) */
} queue_delivery_t;

/* queue_deliver() -- one message for Q.PULL: the ready key whose head is
 * oldest; its head goes in flight with `token` (the record's revision,
 * hence larger than every earlier token of the key) until now_ms +
 * lease_ms (0: the queue's LEASE). With noack the message is done at once
 * (at most once; no result kept) and the key's next message is ready.
 * Due delayed messages are promoted first. Returns 1 with *out filled, or 0
 * if nothing is ready. O(log n). */
int queue_deliver(queue_t *q, uint64_t now_ms, uint64_t lease_ms, uint64_t token, bool noack,
                  queue_delivery_t *out);

/* What happened to a message that came back (nack, lease ran out). */
enum queue_retry_kind {
    QUEUE_RETRY_READY = 0,     /* back at its key's head, ready at once */
    QUEUE_RETRY_LATER = 1,     /* nack DELAY: the key stays held until the delay ends */
    QUEUE_RETRY_DEADLETTER = 2,/* attempts exhausted: moved to the dead-letter queue (or discarded) */
    QUEUE_RETRY_PARKED = 3,    /* attempts exhausted, ONPOISON park: the key is parked */
};

typedef struct queue_retry_s {
    int kind;                 /* enum queue_retry_kind */
    uint64_t id;              /* the message */
    queue_t *dlq;             /* DEADLETTER: the queue it went to, NULL if none configured */
    uint64_t dl_id;           /* DEADLETTER with dlq: its id there (the rev passed in) */
} queue_retry_t;

/* queue_ack() -- Q.ACK: id's current delivery is `token` -> the message is
 * done, the key's next message is ready, and if result is non-NULL (rlen
 * bytes, copied) and RESULTTTL > 0 the result is kept until now_ms +
 * RESULTTTL. Returns 1, or 0 if token is not the message's current delivery
 * (a stale ack: nothing changes). O(log n). */
int queue_ack(queue_t *q, uint64_t id, uint64_t token, const void *result, size_t rlen,
              uint64_t now_ms);

/* queue_nack() -- Q.NACK: give the delivery back. Without delay the message
 * is ready again at once (at its key's head: it is still the key's oldest);
 * with delay_ms the key stays held (no token owns it; keyinfo shows it
 * processing with token 0) until now_ms + delay_ms, when the writer's lease
 * timer redelivers it. Either way the attempt is spent: if it was the
 * MAXATTEMPTS-th, the message is dead-lettered (the DLQ, created if absent,
 * gets it as a new waiting message with id rev, whatever its MAXLEN: dead
 * letters are never lost) or its key parked. *out (may be NULL) says which;
 * out->dlq is valid until that queue is dropped. Returns 1, or 0 for a
 * stale token. O(log n). */
int queue_nack(queue_t *q, uint64_t id, uint64_t token, uint64_t delay_ms, uint64_t now_ms,
               uint64_t rev, queue_retry_t *out);

/* queue_delivery_current() -- true if token is id's current delivery (what
 * Q.ACK, Q.NACK and Q.EXTEND require); changes nothing. */
bool queue_delivery_current(const queue_t *q, uint64_t id, uint64_t token);

/* queue_extend() -- Q.EXTEND: the lease now ends at now_ms + ms. Returns 1,
 * or 0 for a stale token. O(log n). */
int queue_extend(queue_t *q, uint64_t id, uint64_t token, uint64_t ms, uint64_t now_ms);

/* queue_redeliver() -- apply of the writer's "lease expired" record: if
 * token is still id's current delivery (or 0 for a nack-delayed message) and
 * its deadline is < now_ms, the delivery ends as by a nack without delay
 * (same attempt accounting, same dead-letter/park outcome, with rev as the
 * dead-letter id). Returns 1, or 0 if the record is stale (acked, extended,
 * redelivered already): nothing changes. O(log n). */
int queue_redeliver(queue_t *q, uint64_t id, uint64_t token, uint64_t now_ms, uint64_t rev,
                    queue_retry_t *out);

/* Flags of queue_retry(). */
enum queue_retry_flags {
    QUEUE_RETRY_F_LEASE = 1,  /* the lease ran out (else: a nack) */
    QUEUE_RETRY_F_GIVEUP = 2, /* MAXAGE passed: the message is exhausted whatever its attempts */
};

/* queue_retry() -- apply of REC_Q_RETRY: a delivery comes back under the
 * queue's retry policy, with the delay and the MAXAGE verdict the writer
 * decided. A nack (flags without QUEUE_RETRY_F_LEASE) needs token to be
 * current, as queue_nack(); a lease that ran out needs it current and its
 * deadline < now_ms, as queue_redeliver(). Then as queue_nack() with
 * delay_ms (0: ready at once), except that QUEUE_RETRY_F_GIVEUP
 * dead-letters (or parks) the message as if its last attempt were spent.
 * Returns 1, or 0 for a stale record. O(log n). */
int queue_retry(queue_t *q, uint64_t id, uint64_t token, unsigned flags, uint64_t delay_ms, uint64_t now_ms,
                uint64_t rev, queue_retry_t *out);
/* queue_delivery_attempt() -- the attempt of id's delivery `token` (0 if
 * it is not current). O(1). */
uint32_t queue_delivery_attempt(const queue_t *q, uint64_t id, uint64_t token);

/* queue_unpark() -- Q.UNPARK: the key's backlog flows again; its head (the
 * poison message) starts over at attempt 0. Returns 1, or 0 if the key was
 * not parked. O(log n). */
int queue_unpark(queue_t *q, const void *key, size_t klen);

/* queue_promote() -- move delayed messages due before now_ms to their
 * keys' FIFOs, in due order (ties: id order); then give back the ready
 * heap the keys whose rate throttle ended before now_ms, and refill an
 * empty queue bucket whose token is back ("Rate limits"); each counts. Push and deliver do this
 * themselves; the writer also logs a "delay due" record calling it when
 * queue_next_delay() comes, so blocked pullers wake. Returns how many moved.
 * O(k log n) for k moved. */
size_t queue_promote(queue_t *q, uint64_t now_ms);

/* ---- redrive, cancel, expire ----------------------------------------------------------
 *
 * Each removes a waiting message from the middle of its key's FIFO, never
 * the one in flight, so per-key order and K1 hold: the key's next message
 * is its next oldest. The writer finds the message (the key it is under,
 * from a read) and the record names the key, so apply is O(key's FIFO). */

/* queue_redrive() -- move from dlq to q the waiting messages of key (all,
 * or only id if id != 0), in their order in dlq, to the tail of the key's
 * FIFO in q, each keeping its id, its attempts reset; whatever q's MAXLEN
 * (as dead-lettering ignores the dead-letter queue's). A parked key of dlq
 * that is emptied is parked no more. Returns how many moved. O(key's FIFO
 * + ready keys of dlq when the key's head moves). */
size_t queue_redrive(queue_t *dlq, queue_t *q, const void *key, size_t klen, uint64_t id);
/* queue_cancel() -- Q.CANCEL: the waiting (or delayed) message id of key
 * is removed, its fate CANCELLED kept RESULTTTL. Returns 1, or 0 if key
 * has no such message waiting or delayed (in flight, done, unknown).
 * O(key's FIFO + delayed messages). */
int queue_cancel(queue_t *q, const void *key, size_t klen, uint64_t id, uint64_t now_ms);
/* queue_expire() -- apply of the writer's "MAXWAIT passed": the waiting,
 * never delivered message id of key is dead-lettered (to DEADLETTER as a
 * new message with id rev; without one, discarded), its fate DEADLETTER
 * with reason QUEUE_REASON_MAXWAIT. Returns 1, or 0 if it is no longer
 * such a message. *out as queue_nack()'s. */
int queue_expire(queue_t *q, const void *key, size_t klen, uint64_t id, uint64_t now_ms, uint64_t rev,
                 queue_retry_t *out);
/* queue_foreach_key() -- every key with messages and its waiting ones,
 * oldest first (in-flight head skipped), until fn returns false; for the
 * writer's scans (redrive all, cancel by id, MAXWAIT). O(messages). */
void queue_foreach_waiting(const queue_t *q,
                           bool (*fn)(void *arg, const char *key, size_t klen, uint64_t id, uint32_t attempt),
                           void *arg);
/* queue_delayed_key() -- the key of delayed message id (*klen its
 * length), or NULL. O(delayed). */
const char *queue_delayed_key(const queue_t *q, uint64_t id, size_t *klen);
/* queue_set_maxwait_count() -- queues with MAXWAIT set (the writer scans
 * only while there are some). O(1). */
size_t queue_set_maxwait_count(const queue_set_t *s);

/* ---- rate limits ------------------------------------------------------------------------
 *
 * Token buckets, exact in integers: a bucket of RATE n PER p holds up to
 * n * p units, gains n units a ms (by record times) and a delivery costs
 * p, so n deliveries may go at once and then n every p ms. The queue's
 * bucket is in the queue; a key's is kept only while it is not full (a
 * full bucket is what a key without one has), so memory follows the keys
 * delivered in the last window. A delivery needs a token in both. A key
 * whose bucket is empty when its turn comes is throttled: it leaves the
 * ready heap until a token is back, when a promote (push, deliver, or the
 * writer's "due" record: QUEUE_TIMER_RATE) puts it back; a queue whose
 * bucket is empty delivers nothing until a token is back. Buckets and
 * throttles are state: in the snapshot, so replay reaches the same. */

/* queue_rate_tokens() -- the tokens (rounded down) in key's bucket (NULL:
 * the queue's) as of now_ms, and *throttled_until_ms the end of the key's
 * throttle (0: not throttled). Returns 0 if the limit is not set. O(1). */
uint64_t queue_rate_tokens(const queue_t *q, const void *key, size_t klen, uint64_t now_ms,
                           uint64_t *throttled_until_ms);
/* Snapshots: every bucket kept (key NULL: the queue's), with its state. */
typedef struct queue_bucket_s {
    uint64_t level;           /* units of 1/per token */
    uint64_t last_ms;         /* when level was computed */
    bool throttled;           /* a key's: out of the ready heap until release_ms */
    uint64_t release_ms;
} queue_bucket_t;
void queue_foreach_bucket(const queue_t *q,
                          void (*fn)(void *arg, const char *key, size_t klen, const queue_bucket_t *b), void *arg);
void queue_load_bucket(queue_t *q, const void *key, size_t klen, const queue_bucket_t *b);

/* ---- pauses --------------------------------------------------------------------------
 *
 * A pause stops deliveries, not the rest: pushes, acks, nacks and lease
 * ends go on, and a delivery in flight when its key (or queue) is paused
 * finishes normally. A paused key keeps its place: its messages stay in
 * its FIFO, in order, and it leaves the ready heap until resumed (K3).
 * A key can be paused with no messages (a pause set before the work
 * arrives holds). A pause may end by itself at until_ms (0: never): the
 * writer's timer (QUEUE_TIMER_PAUSE) logs the record that calls
 * queue_pause_end(). */

/* queue_pause() -- pause key (NULL: the whole queue) until until_ms (0:
 * until resumed); an existing pause of the same scope takes the new
 * until. Returns 1 if anything changed. Pausing a key that is ready costs
 * O(ready keys) (the ready heap keeps no positions); else O(log n). */
int queue_pause(queue_t *q, const void *key, size_t klen, uint64_t until_ms);
/* queue_resume() -- end the pause of key (NULL: of the queue). Returns 1,
 * or 0 if it was not paused. O(log n). */
int queue_resume(queue_t *q, const void *key, size_t klen);
/* queue_pause_end() -- apply of the writer's "pause ended": resume key
 * (NULL: the queue) if its pause has an end before now_ms. Returns 1 if
 * it resumed. */
int queue_pause_end(queue_t *q, const void *key, size_t klen, uint64_t now_ms);
/* queue_paused() -- is key (NULL: the queue) paused; *until_ms gets its
 * end (0: none, or not paused). A paused queue does not make its keys
 * paused: each scope answers for itself. O(1). */
bool queue_paused(const queue_t *q, const void *key, size_t klen, uint64_t *until_ms);
/* Paused keys and paused queues over every queue (INFO). O(1). */
size_t queue_set_paused_keys(const queue_set_t *s);
size_t queue_set_paused_queues(const queue_set_t *s);
/* queue_foreach_pause() -- every pause, the queue's own first (key NULL),
 * for snapshots; queue_load_pause() puts one back. */
void queue_foreach_pause(const queue_t *q, void (*fn)(void *arg, const char *key, size_t klen, uint64_t until_ms),
                         void *arg);
void queue_load_pause(queue_t *q, const void *key, size_t klen, uint64_t until_ms);

/* ---- dedup and results ------------------------------------------------------------- */

/* queue_dedup_lookup() -- the message id a live dedup entry points at (0 if
 * none, or its window ended at or before now_ms). O(1). */
uint64_t queue_dedup_lookup(const queue_t *q, const void *dedup_id, size_t dlen, uint64_t now_ms);
/* queue_dedup_expire() -- apply of "dedup window end": drop the entry if
 * its window ended at or before now_ms. Returns 1 if dropped. O(log n). */
int queue_dedup_expire(queue_t *q, const void *dedup_id, size_t dlen, uint64_t now_ms);

/* ---- idempotency keys ----------------------------------------------------------------
 *
 * Idempotency keys (HTTP's Idempotency-Key, Q.PUSH/Q.CALL IDEMPOTENCY) are
 * dedup entries with two differences: an entry is scoped to its message key
 * (the entity: the same idempotency key on another key is another entry),
 * and it holds the hash of the request that made it, so the command layer
 * can refuse the same key with another request. Each lives idem_ms (the
 * server's http-idempotency-ms, carried in the push record) and ends by the
 * writer's record, as dedup windows do. The set counts the entries of all
 * its queues (queue_set_idem_count()) so the command layer can bound them. */

typedef struct queue_idem_s {
    uint64_t hash;            /* the request the key is bound to */
    uint64_t msg_id;          /* the message its push made */
    uint64_t end_ms;          /* kept until then */
} queue_idem_t;

/* queue_idem_lookup() -- the live entry of (key, idem) into *out: true, or
 * false if there is none or it ended at or before now_ms. O(1). */
bool queue_idem_lookup(const queue_t *q, const void *key, size_t klen, const void *idem, size_t ilen,
                       uint64_t now_ms, queue_idem_t *out);
/* queue_idem_expire() -- apply of "idempotency key end": drop the entry if
 * it ended at or before now_ms. Returns 1 if dropped. O(log n). */
int queue_idem_expire(queue_t *q, const void *key, size_t klen, const void *idem, size_t ilen, uint64_t now_ms);
/* queue_set_idem_count() -- idempotency entries over every queue. O(1). */
size_t queue_set_idem_count(const queue_set_t *s);

enum queue_fate {
    QUEUE_FATE_NONE = 0,       /* unknown id, not done yet, or its result expired */
    QUEUE_FATE_DONE = 1,       /* acked with a result */
    QUEUE_FATE_DEADLETTER = 2, /* exhausted its attempts, passed MAXAGE or MAXWAIT (the result
                                  holds the reason: empty, QUEUE_REASON_MAXAGE, QUEUE_REASON_MAXWAIT) */
    QUEUE_FATE_CANCELLED = 3,  /* Q.CANCEL took it before any delivery */
};

/* Why a message was dead-lettered, kept as its DEADLETTER result's bytes
 * (none: its attempts ran out). */
#define QUEUE_REASON_MAXAGE "maxage"
#define QUEUE_REASON_MAXWAIT "maxwait"

typedef struct queue_result_s {
    int fate;                 /* enum queue_fate */
    const char *result;       /* DONE: the result bytes */
    size_t rlen;
    uint64_t expire_ms;       /* when the record goes */
    uint64_t dl_id;           /* DEADLETTER: its id in the DLQ (0 if discarded) */
} queue_result_t;

/* queue_result() -- a message's final fate (Q.RESULT, Q.CALL replay): fills
 * *out and returns its fate. Kept RESULTTTL ms after the ack or the dead
 * letter, until the expiry record. Acks without RESULT and NOACK deliveries
 * keep nothing. O(1). */
int queue_result(const queue_t *q, uint64_t id, queue_result_t *out);
/* queue_result_expire() -- apply of "result expire": drop id's result if it
 * expires at or before now_ms. Returns 1 if dropped. O(log n). */
int queue_result_expire(queue_t *q, uint64_t id, uint64_t now_ms);

/* ---- timers ------------------------------------------------------------------------ */

enum queue_timer_kind {
    QUEUE_TIMER_NONE = 0,
    QUEUE_TIMER_LEASE = 1,    /* log "redeliver id token" -> queue_redeliver() */
    QUEUE_TIMER_DELAY = 2,    /* log "delay due" -> queue_promote() */
    QUEUE_TIMER_DEDUP = 3,    /* log "dedup end dedup_id" -> queue_dedup_expire() */
    QUEUE_TIMER_RESULT = 4,   /* log "result expire id" -> queue_result_expire() */
    QUEUE_TIMER_IDEM = 5,     /* log "dedup end key idem" (IDEM) -> queue_idem_expire() */
    QUEUE_TIMER_PAUSE = 6,    /* log "pause ended" key (or queue_wide) -> queue_pause_end() */
    QUEUE_TIMER_RATE = 7,     /* log "due" (REC_Q_PROMOTE) -> queue_promote(): a token is back */
};

typedef struct queue_timer_s {
    int kind;                 /* enum queue_timer_kind */
    uint64_t due_ms;
    uint64_t id;              /* LEASE, DELAY, RESULT: the message */
    uint64_t token;           /* LEASE: the delivery (0 for a nack delay) */
    uint32_t attempt;         /* LEASE: the delivery's attempt */
    const char *dedup_id;     /* DEDUP, IDEM: the dedup id or idempotency key */
    size_t dlen;
    const char *key;          /* IDEM: the message key; PAUSE: the paused key */
    size_t klen;
    bool queue_wide;          /* PAUSE: the queue's own pause (key unused) */
} queue_timer_t;

/* The earliest deadline of each kind, O(1): each returns true and fills
 * *out, or false if there is none of that kind. */
bool queue_next_lease(const queue_t *q, queue_timer_t *out);
bool queue_next_delay(const queue_t *q, queue_timer_t *out);
bool queue_next_dedup(const queue_t *q, queue_timer_t *out);
bool queue_next_result(const queue_t *q, queue_timer_t *out);
bool queue_next_idem(const queue_t *q, queue_timer_t *out);
bool queue_next_pause_end(const queue_t *q, queue_timer_t *out);
bool queue_next_rate(const queue_t *q, queue_timer_t *out);
/* queue_next_timer() -- the earliest of the seven (ties: the order above). */
bool queue_next_timer(const queue_t *q, queue_timer_t *out);
/* queue_set_next_timer() -- the earliest over every queue; *qout receives its
 * queue. O(queues): the writer may instead keep its own per-queue wakeups. */
bool queue_set_next_timer(const queue_set_t *s, queue_t **qout, queue_timer_t *out);

/* ---- introspection ------------------------------------------------------------------ */

enum queue_key_state {
    QUEUE_KEY_IDLE = 0,        /* no messages */
    QUEUE_KEY_PROCESSING = 1,  /* a message in flight (waiting may be > 0) */
    QUEUE_KEY_WAITING = 2,     /* messages waiting, none in flight */
    QUEUE_KEY_PARKED = 3,      /* poison: set aside until unpark */
};

typedef struct queue_keyinfo_s {
    int state;                /* enum queue_key_state */
    uint64_t inflight_id;     /* PROCESSING: the message; PARKED: the poison message */
    uint64_t since_ms;        /* PROCESSING: when it was delivered */
    uint64_t deadline_ms;     /* PROCESSING: lease end (or nack delay end) */
    uint64_t next_attempt_ms; /* PROCESSING with token 0: when the held retry becomes ready */
    uint64_t token;           /* PROCESSING: the current delivery (0: nack-delayed) */
    uint32_t attempt;         /* PROCESSING/PARKED: attempts spent on the head */
    size_t waiting;           /* waiting messages (not in flight; parked backlog included) */
    bool paused;              /* the key is paused (queue_pause()), whatever its state */
    uint64_t paused_until_ms; /* paused: when the pause ends by itself, 0 for never */
    uint64_t throttled_until_ms; /* KEYRATE: out of turn until then (0: not throttled) */
    uint32_t inflight;        /* deliveries of the key in flight (nack-delayed included) */
} queue_keyinfo_t;

/* queue_keyinfo() -- Q.KEYINFO; returns out->state. O(1). */
int queue_keyinfo(const queue_t *q, const void *key, size_t klen, queue_keyinfo_t *out);

typedef struct queue_topkey_s {
    const char *key;
    size_t klen;
    size_t waiting;
} queue_topkey_t;

/* queue_topkeys() -- Q.TOPKEYS: up to n keys with the most waiting messages,
 * most first, into out[0..n). Returns how many. Diagnostics: O(keys log n),
 * it walks every key of the queue. */
size_t queue_topkeys(const queue_t *q, size_t n, queue_topkey_t *out);

typedef struct queue_len_s {
    size_t waiting;           /* in key FIFOs, not in flight (parked included) */
    size_t inflight;          /* delivered, not acked (nack-delayed included) */
    size_t delayed;           /* pushed with DELAY, not yet due */
} queue_len_t;

/* queue_len() -- Q.LEN. O(1). */
void queue_len(const queue_t *q, queue_len_t *out);

typedef struct queue_info_s {
    queue_config_t config;
    queue_len_t len;
    size_t keys;              /* distinct keys with messages */
    size_t ready_keys;        /* keys whose head can be delivered now */
    size_t parked_keys;
    bool paused;              /* the queue is paused as a whole */
    uint64_t paused_until_ms; /* paused: its end, 0 for never */
    size_t paused_keys;
    size_t throttled_keys;    /* KEYRATE: keys out of turn until a token is back */
    size_t dedup_entries;
    size_t idem_entries;      /* idempotency keys kept (queue.h, "Idempotency keys") */
    size_t results;
    size_t bytes;             /* heap bytes of the queue (estimate incl. malloc overhead) */
    uint64_t pushed, merged, deduped, delivered, acked, nacked, redelivered, deadlettered, parked;
} queue_info_t;

/* queue_info() -- Q.INFO. O(1). */
void queue_info(const queue_t *q, queue_info_t *out);

/* queue_account() -- bring the set's byte total up to date with q after a
 * change to q (the core calls it after every queue record, for the queue
 * and for a dead-letter queue the record moved a message to). O(1). */
void queue_account(queue_t *q);
/* queue_set_bytes() -- the heap bytes of every queue in the set (the sum
 * of queue_info()'s bytes) as of the last queue_account() of each, for
 * max-memory-bytes. O(1). */
size_t queue_set_bytes(const queue_set_t *s);

/* queue_peek() -- Q.PEEK: the next (up to) n messages deliver would hand
 * out if nothing else happened, i.e. the n oldest heads of ready keys, into
 * out[0..n). Returns how many. O(n log n). */
size_t queue_peek(const queue_t *q, size_t n, queue_delivery_t *out);
/* queue_oldest_ready_id() -- the id of the message a pull would get next
 * (the oldest head of a ready key), 0 if none is ready. O(1). */
uint64_t queue_oldest_ready_id(const queue_t *q);

/* ---- snapshots ------------------------------------------------------------------------
 *
 * A snapshot enumerates each queue's configuration (queue_config()), its
 * messages, dedup entries, idempotency entries and results, and reloads them into an empty queue
 * of a fresh set with the load functions, in the order the iteration gave
 * them. Counters are not state and start at 0. */

enum queue_msg_state {
    QUEUE_MSG_WAITING = 0,
    QUEUE_MSG_INFLIGHT = 1,   /* token (0: nack-delayed), since_ms, deadline_ms */
    QUEUE_MSG_DELAYED = 2,    /* deadline_ms = due time */
};

typedef struct queue_snap_msg_s {
    int state;                /* enum queue_msg_state */
    uint64_t id;
    const char *key;
    size_t klen;
    const char *payload;
    size_t plen;
    uint32_t attempt;
    bool parked;              /* its key is parked */
    uint64_t token, since_ms, deadline_ms;
} queue_snap_msg_t;

/* queue_foreach_ready() -- FAIRNESS roundrobin: the ready keys in their
 * turn order (the order is state: replay must reach the same one; under
 * oldest it follows from the messages and nothing is walked).
 * queue_load_ready() -- after a queue's messages, pauses and buckets are
 * loaded: put its ready keys in that order. Returns 0, or -1 if the keys
 * are not exactly the ready ones. */
void queue_foreach_ready(const queue_t *q, void (*fn)(void *arg, const char *key, size_t klen), void *arg);
int queue_load_ready(queue_t *q, const char *const *keys, const size_t *klens, size_t n);

/* queue_foreach_msg() -- every message: per key, its FIFO in order (the
 * in-flight head first), then the delayed ones. fn must not change the queue. */
void queue_foreach_msg(const queue_t *q, void (*fn)(void *arg, const queue_snap_msg_t *m), void *arg);
/* queue_foreach_dedup() -- every dedup entry (id, the message id, window end). */
void queue_foreach_dedup(const queue_t *q,
                         void (*fn)(void *arg, const char *dedup_id, size_t dlen, uint64_t msg_id,
                                    uint64_t end_ms),
                         void *arg);
/* queue_foreach_idem() -- every idempotency entry (message key, key, entry). */
void queue_foreach_idem(const queue_t *q,
                        void (*fn)(void *arg, const char *key, size_t klen, const char *idem, size_t ilen,
                                   const queue_idem_t *e),
                        void *arg);
/* queue_foreach_result() -- every kept result, with its message id. */
void queue_foreach_result(const queue_t *q,
                          void (*fn)(void *arg, uint64_t id, const queue_result_t *r), void *arg);

/* Load what the iterations gave, in their order, into an empty queue.
 * queue_load_msg() returns 0, or -1 (nothing loaded) for a message no
 * iteration gives: in flight behind another message of its key. */
int queue_load_msg(queue_t *q, const queue_snap_msg_t *m);
void queue_load_dedup(queue_t *q, const void *dedup_id, size_t dlen, uint64_t msg_id, uint64_t end_ms);
void queue_load_result(queue_t *q, uint64_t id, const queue_result_t *r);
void queue_load_idem(queue_t *q, const void *key, size_t klen, const void *idem, size_t ilen, const queue_idem_t *e);

#endif /* ORDO_QUEUE_H */
