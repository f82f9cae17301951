/*
 * core.h -- the state machine: the global revision, the versioned store,
 * key expiry, and the one way to change them: apply a record.
 *
 * DESIGN.md's rule lives here. Every mutation is a record_t that carries
 * everything its effect depends on, including the wall-clock time the writer
 * assigned to it (time_ms); core_apply() never reads a clock, a random
 * source or a connection, so applying the same records in the same order
 * always reaches the same state and the same results. The outcome of a
 * record -- a failed IFREV, a SET NX on an existing key, INCR of a
 * non-number -- is computed by apply, deterministically.
 *
 * Revisions: a record that changes the store takes the next revision; a
 * record whose condition fails, or that finds nothing to change, takes none.
 *
 * Timers are records too: the writer asks core_next_expiry() when the next
 * key expires and, when that time has come, applies one REC_EXPIRE record
 * naming the key. Apply deletes exactly that key: deadlines are state the
 * writer reads to decide, never state apply reads, so replaying the log
 * from a snapshot gives the same deletions whatever deadlines it restored.
 *
 * Observers: after each change to a key the core calls the change callback
 * (the watch layer) with the change, except during a bulk replay
 * (core_replay_begin()); the callback must not apply records.
 *
 * Not thread-safe: owned by the core thread.
 */
#ifndef ORDO_CORE_H
#define ORDO_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "kv.h"
#include "queue.h"

enum record_type {
    REC_PUT = 1,     /* KV.PUT, SET: key, value, conditions, expiry */
    REC_DEL = 2,     /* KV.DEL, DEL (one key per record) */
    REC_INCR = 3,    /* INCR/INCRBY: key, incr */
    REC_EXPIRE = 4,  /* the writer's expiry decision: delete key (if live) */
    REC_COMPACT = 5, /* KV.COMPACT: arg_rev */
    /* leases, locks, elections (coord.h); key = the lock/election name */
    REC_LEASE_GRANT = 10,     /* ttl_ms -> lease id (a revision) */
    REC_LEASE_KEEPALIVE = 11, /* lease; logged, takes no revision */
    REC_LEASE_REVOKE = 12,    /* lease */
    REC_LOCK_ACQUIRE = 13,    /* key, ttl_ms, lease -> token (a revision) */
    REC_LOCK_RELEASE = 14,    /* key, token */
    REC_LOCK_EXTEND = 15,     /* key, token, ttl_ms; takes no revision */
    REC_ELECT_CAMPAIGN = 16,  /* key, val, ttl_ms, lease -> term (a revision) */
    REC_ELECT_PROCLAIM = 17,  /* key, token (term), val */
    REC_ELECT_KEEPALIVE = 18, /* key, token (term); takes no revision */
    REC_ELECT_RESIGN = 19,    /* key, token (term), val if REC_F_HANDOVER */
    REC_COORD_EXPIRE = 20,    /* kind (enum coord_kind), token (id), key: the writer's expiry decision */
    /* keyed work queues (queue.h); name = the queue, key = a message key,
     * arg_rev = a message id, token = a delivery's token */
    REC_Q_PUSH = 30,          /* key, val (payload), aux (dedup id), ttl_ms (DELAY), COALESCE -> id */
    REC_Q_DELIVER = 31,       /* ttl_ms (lease, 0: the queue's), NOACK -> a delivery, token = its revision */
    REC_Q_ACK = 32,           /* arg_rev, token, val (result) if REC_F_RESULT */
    REC_Q_NACK = 33,          /* arg_rev, token, ttl_ms (DELAY) */
    REC_Q_EXTEND = 34,        /* arg_rev, token, ttl_ms */
    REC_Q_CONFIG = 35,        /* val: the whole new configuration (core_qconfig_encode), key: DEADLETTER */
    REC_Q_DROP = 36,          /* the queue */
    REC_Q_UNPARK = 37,        /* key */
    REC_Q_REDELIVER = 38,     /* arg_rev, token: the writer's "lease ran out" decision */
    REC_Q_PROMOTE = 39,       /* the writer's "delayed messages are due" decision */
    REC_Q_DEDUP_END = 40,     /* aux: the writer's "dedup window ended" */
    REC_Q_RESULT_END = 41,    /* arg_rev: the writer's "result retention ended" */
};

enum record_flags {
    REC_F_IFREV = 1 << 0,   /* only if the key's mod_rev == ifrev (0: only if absent) */
    REC_F_NX = 1 << 1,      /* only if absent */
    REC_F_XX = 1 << 2,      /* only if present */
    REC_F_KEEPTTL = 1 << 3, /* keep the key's current expiry */
    REC_F_FENCE = 1 << 4,   /* KV.PUT/DEL: only if token holds lock `name` */
    REC_F_HANDOVER = 1 << 5,/* ELECT.RESIGN: val is a hand-over value */
    REC_F_COALESCE = 1 << 0,/* REC_Q_PUSH (queue records reuse the low bits) */
    REC_F_NOACK = 1 << 0,   /* REC_Q_DELIVER */
    REC_F_RESULT = 1 << 0,  /* REC_Q_ACK: val is a result (an empty one included) */
};

typedef struct record_s {
    uint8_t type;
    uint8_t flags;
    uint64_t time_ms;        /* the writer's wall clock, ms since the epoch */
    const char *key;
    uint32_t klen;
    const char *val;
    uint32_t vlen;
    uint64_t lease;
    uint64_t ifrev;
    uint64_t expire_at_ms;   /* REC_PUT: absolute deadline, 0 for none */
    int64_t incr;            /* REC_INCR */
    uint64_t arg_rev;        /* REC_COMPACT: the new compaction point */
    uint64_t ttl_ms;         /* leases, locks, elections */
    uint64_t token;          /* lock token / term / id of what expires; FENCE token */
    uint8_t kind;            /* REC_COORD_EXPIRE: enum coord_kind */
    const char *name;        /* FENCE: the lock; queue records: the queue */
    uint32_t nlen;
    const char *aux;         /* REC_Q_PUSH, REC_Q_DEDUP_END: the dedup id */
    uint32_t alen;
} record_t;

enum apply_status {
    AP_OK = 0,          /* applied; result.rev is its revision */
    AP_NOOP = 1,        /* nothing to do (DEL of an absent key, NX/XX false); no revision */
    AP_CONFLICT = 2,    /* IFREV failed; result.cur_rev is the key's mod_rev (0 if absent) */
    AP_NOTINT = 3,      /* INCR: the value is not an integer */
    AP_OVERFLOW = 4,    /* INCR would overflow */
    AP_COMPACTED = 5,   /* KV.COMPACT: the point is already past rev */
    AP_FUTURE = 6,      /* KV.COMPACT: rev is beyond the current revision */
    AP_BUSY = 7,        /* lock held / election led: result.value is the holder's token/term */
    AP_NOTFOUND = 8,    /* the lease does not exist (or has lapsed) */
    AP_NOTHOLDER = 9,   /* the token/term does not hold (FENCE, ELECT.KEEPALIVE) */
    AP_QFULL = 10,      /* Q.PUSH: MAXLEN messages pending */
    AP_QLIMIT = 11,     /* Q.PUSH: MAXPERKEY messages of the key waiting */
    AP_INVALID = 12,    /* Q.CONFIG: the configuration was refused */
};

typedef struct apply_result_s {
    int status;
    uint64_t rev;
    uint64_t cur_rev;
    int64_t value;      /* REC_INCR: the new value; REC_EXPIRE: 1 if the key was deleted;
                           coord: 1/0 for release-like calls, remaining ms for keepalives,
                           the id/token/term granted */
    const char *data;   /* REC_ELECT_CAMPAIGN: the hand-over value, NULL if none (valid until the next apply) */
    size_t dlen;
    /* Queue records. value: REC_Q_PUSH the message id (the first one for a
     * duplicate: AP_NOOP), 1/0 for ack-like records. qstatus: REC_Q_PUSH's
     * enum queue_status. qd: REC_Q_DELIVER's delivery (pointers valid until
     * the next apply). qr: REC_Q_NACK / REC_Q_REDELIVER's outcome. */
    int qstatus;
    queue_delivery_t qd;
    queue_retry_t qr;
} apply_result_t;

/* Coordination events (coord.h) after the core has handled them (keys of
 * an ended lease deleted, revisions spent): for the command layer's lock
 * waiters, candidates and observers. Must not apply records. */
typedef struct coord_event_s coord_event_t;
typedef void (*core_coord_cb)(void *arg, const coord_event_t *ev);

typedef void (*core_change_cb)(void *arg, const kv_change_t *change);

typedef struct core_s core_t;

core_t *core_create(uint64_t history_revs);
void core_destroy(core_t *c);

/* core_apply() -- apply one record; *res receives the outcome. */
void core_apply(core_t *c, const record_t *rec, apply_result_t *res);

/* The store, for reads (read-only use). */
const kv_t *core_kv(const core_t *c);
/* The current revision (the last one taken). */
uint64_t core_rev(const core_t *c);

/* core_expiry_of() -- a key's expiry deadline in ms since the epoch, or 0. */
uint64_t core_expiry_of(const core_t *c, const void *key, size_t klen);
/* core_next_expiry() -- the earliest expiry deadline, or 0 if none. */
uint64_t core_next_expiry(const core_t *c);
/* core_first_expiring() -- the key with the earliest deadline (valid until
 * the next apply), or NULL; *klen receives its length. */
const char *core_first_expiring(const core_t *c, size_t *klen);
/* core_expiring() -- number of keys with an expiry. */
size_t core_expiring(const core_t *c);

void core_set_change_cb(core_t *c, core_change_cb cb, void *arg);
void core_set_coord_cb(core_t *c, core_coord_cb cb, void *arg);

/* The coordination state (leases, locks, elections), for reads. */
struct coord_s;
const struct coord_s *core_coord(const core_t *c);

/* Loading a snapshot into a fresh core (snapshot.h says what it holds):
 * core_load_coord() each coordination item, core_load_base() each key's
 * base version, core_load_bases_done(point), core_load_change() each logged
 * change in revision order, core_load_deadline() each expiry, then
 * core_load_done(rev): afterwards core_rev() == rev. No observer runs.
 * Each returns 0, or -1 if the snapshot contradicts itself. */
struct coord_item_s;
int core_load_coord(core_t *c, const struct coord_item_s *item);
int core_load_base(core_t *c, const void *key, size_t klen, const void *val, size_t vlen, uint64_t create_rev,
                   uint64_t mod_rev, uint64_t version, uint64_t lease);
int core_load_bases_done(core_t *c, uint64_t oldest);
int core_load_change(core_t *c, const void *key, size_t klen, const void *val, size_t vlen, uint64_t lease,
                     uint64_t rev, bool deleted);
void core_load_deadline(core_t *c, const void *key, size_t klen, uint64_t deadline_ms);
int core_load_done(core_t *c, uint64_t rev);

/* The queues (queue.h): read them through this; core_queues_load() is
 * for loading a snapshot into a fresh core only (every other change is a
 * record). */
const queue_set_t *core_queues(const core_t *c);
queue_set_t *core_queues_load(core_t *c);

/* Q.CONFIG's record carries the whole new configuration in val, in this
 * fixed form (little-endian): maxlen u32 | maxperkey u32 | onfull u8 |
 * onpoison u8 | maxattempts u32 | lease_ms u64 | dedup_ms u64 |
 * resultttl_ms u64; the dead-letter queue is the record's key (empty: none). */
#define CORE_QCONFIG_BYTES 38
void core_qconfig_encode(const queue_config_t *cfg, char out[CORE_QCONFIG_BYTES]);
/* Returns 0, or -1 if len is wrong. cfg->deadletter is left alone. */
int core_qconfig_decode(const void *p, size_t len, queue_config_t *cfg);

/* Compaction pin: automatic compaction never moves the point past pin
 * (0: no pin), so a snapshot being written at that revision stays readable. */
void core_set_compact_pin(core_t *c, uint64_t pin);
void core_set_history(core_t *c, uint64_t history_revs);
/* Bulk replay (recovery, before any client can watch): between
 * core_replay_begin() and core_replay_end() records apply as usual and reach
 * the same state, but the change callback is not called (there is no one to
 * tell; coordination events still are) and the store defers ordering new
 * keys (kv_index_defer()), so range reads (KV.RANGE, watches' snapshots,
 * snapshot writing) must wait for core_replay_end(). */
void core_replay_begin(core_t *c);
void core_replay_end(core_t *c);

#endif /* ORDO_CORE_H */
