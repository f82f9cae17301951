/*
 * core.h -- the state machine: the global revision, the versioned store,
 * key expiry, and the one way to change them: apply a record.
 *
 * The rule the server is built around (docs/architecture.md, "The one
 * rule") lives here. Every mutation is a record_t that carries everything
 * its effect depends on, including the time the writer assigned to it
 * (time_ms, the writer's clock: writer/turn.c); core_apply() never reads
 * a clock, a random source or a connection, so applying the same records
 * in the same order always reaches the same state and the same results. The outcome of a
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

/* Record types. Each type names the member of record_t's union it fills
 * (record_t below) and nothing else. The numbers are the on-disk type byte
 * (record.h) and must never change; no code may rely on their order or
 * ranges: what a type is (its family, whether it can grow the store...)
 * comes from explicit switches (record_family()). */
enum record_type {
    REC_PUT = 1,     /* put: KV.PUT, SET: key, value, conditions, expiry */
    REC_DEL = 2,     /* del: KV.DEL, DEL (one key per record) */
    REC_INCR = 3,    /* incr: INCR/INCRBY */
    REC_EXPIRE = 4,  /* expire: the writer's expiry decision: delete key (if live) */
    REC_COMPACT = 5, /* compact: KV.COMPACT */
    REC_KEY_TTL = 6, /* key_ttl: EXPIRE, PEXPIRE, PERSIST: set or clear a live key's deadline */
    REC_APPEND = 7,  /* append: APPEND: the key's value (empty if absent) followed by val */
    REC_FLUSH = 8,   /* flush (no payload): FLUSHALL, FLUSHDB: delete every live key, one
                      * revision each, in key order; leases, locks, elections, queues stay */
    /* 9: reserved for the Redis-compatibility commands */
    /* leases, locks, elections (coord.h) */
    REC_LEASE_GRANT = 10,     /* lease: ttl_ms -> lease id (a revision) */
    REC_LEASE_KEEPALIVE = 11, /* lease: lease_id; takes a revision (core.c, "Revisions") */
    REC_LEASE_REVOKE = 12,    /* lease: lease_id */
    REC_LOCK_ACQUIRE = 13,    /* lock: name, ttl_ms, lease_id -> token (a revision) */
    REC_LOCK_RELEASE = 14,    /* lock: name, token */
    REC_LOCK_EXTEND = 15,     /* lock: name, token, ttl_ms; takes a revision */
    REC_ELECT_CAMPAIGN = 16,  /* elect: name, val, ttl_ms, lease_id -> term (a revision) */
    REC_ELECT_PROCLAIM = 17,  /* elect: name, term, val */
    REC_ELECT_KEEPALIVE = 18, /* elect: name, term; takes a revision */
    REC_ELECT_RESIGN = 19,    /* elect: name, term, val if REC_F_HANDOVER */
    REC_COORD_EXPIRE = 20,    /* coord_expire: the writer's expiry decision */
    /* keyed work queues (queue.h); every queue record names its queue */
    REC_Q_PUSH = 30,          /* q_push -> message id */
    REC_Q_DELIVER = 31,       /* q_deliver -> a delivery, token = its revision */
    REC_Q_ACK = 32,           /* q_ack */
    REC_Q_NACK = 33,          /* q_nack */
    REC_Q_EXTEND = 34,        /* q_extend */
    REC_Q_CONFIG = 35,        /* q_config */
    REC_Q_DROP = 36,          /* q (the queue only) */
    REC_Q_UNPARK = 37,        /* q_unpark */
    REC_Q_REDELIVER = 38,     /* q_redeliver: the writer's "lease ran out" decision */
    REC_Q_PROMOTE = 39,       /* q (the queue only): the writer's "delayed messages are due" */
    REC_Q_DEDUP_END = 40,     /* q_dedup_end: the writer's "dedup window ended" */
    REC_Q_RESULT_END = 41,    /* q_result_end: the writer's "result retention ended" */
    REC_Q_RETRY = 42,         /* q_retry: a nack without DELAY, or a lease that ran out, under the
                                 queue's retry policy, with the delay the writer drew */
    REC_Q_PAUSE = 43,         /* q_pause: pause or resume a key or the queue; the writer's
                                 "pause ended" */
    REC_Q_REDRIVE = 44,       /* q_redrive: dead letters of a key (or one) back to their queue */
    REC_Q_CANCEL = 45,        /* q_msg: Q.CANCEL of a waiting or delayed message */
    REC_Q_EXPIRE = 46,        /* q_msg: the writer's "waited past MAXWAIT": dead-letter it */
    REC_Q_SCHEDULE_ADD = 47,  /* q_sched: add or replace a schedule (schedule.h) */
    REC_Q_SCHEDULE_DEL = 48,  /* q_sched: remove a schedule */
    REC_Q_TICK = 49,          /* q_sched: the writer's "a schedule's tick is due" */
    /* transactions (MULTI/EXEC): one record carrying the sub-records */
    REC_TXN = 50,             /* txn: the EXEC's records, applied in order as one */
    /* users (acl.h): ACL SETUSER, ACL DELUSER, an --aclfile's seeding */
    REC_ACL_SETUSER = 60,     /* acl: name, rules (the user's whole canonical description) */
    REC_ACL_DELUSER = 61,     /* acl: name */
};

/* Flags: one bit each, never shared between families, so a flag read from
 * a record always means one thing. record_flags_allowed() says which a type
 * may carry. (Log formats 1 and 2 stored COALESCE, NOACK and RESULT in
 * IFREV's bit; record.c remaps them by type when it reads those.) */
enum record_flags {
    REC_F_IFREV = 1 << 0,    /* PUT/DEL: only if the key's mod_rev == ifrev (0: only if absent) */
    REC_F_NX = 1 << 1,       /* PUT: only if absent */
    REC_F_XX = 1 << 2,       /* PUT: only if present */
    REC_F_KEEPTTL = 1 << 3,  /* PUT: keep the key's current expiry */
    REC_F_FENCE = 1 << 4,    /* PUT/DEL: only if fence_token holds lock fence_lock */
    REC_F_HANDOVER = 1 << 5, /* ELECT_RESIGN: val is a hand-over value */
    REC_F_COALESCE = 1 << 6, /* Q_PUSH: merge into the key's waiting message */
    REC_F_NOACK = 1 << 7,    /* Q_DELIVER: no acknowledgement expected */
    REC_F_RESULT = 1 << 8,   /* Q_ACK: result is a result (an empty one included) */
    REC_F_GT = 1 << 9,       /* KEY_TTL: only if the new deadline is later (none counts as infinite) */
    REC_F_LT = 1 << 10,      /* KEY_TTL: only if the new deadline is earlier */
    REC_F_IDEM = 1 << 11,    /* Q_PUSH: dedup_id is an idempotency key of the message key (queue.h,
                                "Idempotency keys"), idem_hash its request, idem_ms its retention;
                                Q_DEDUP_END: the entry that ends is (key, dedup_id)'s idempotency key */
};

/* The families record types belong to, for the layers that treat a family
 * alike (the command layer's coordination scheduling, memory checks). */
enum record_family {
    REC_FAM_NONE = 0, /* not a record type */
    REC_FAM_KV,
    REC_FAM_COORD,
    REC_FAM_QUEUE,
    REC_FAM_TXN,      /* REC_TXN: its sub-records have families of their own */
    REC_FAM_ACL,      /* the users (acl.h) */
};

/* Per-type payloads. A byte field is a pointer and a length; the bytes
 * belong to the record's maker (a command's arguments, a decoded log
 * record) and stay valid while the record is used. */
typedef struct rec_put_s {
    const char *key;
    uint32_t klen;
    const char *val;
    uint32_t vlen;
    uint64_t lease_id;       /* 0: none */
    uint64_t ifrev;          /* REC_F_IFREV only */
    uint64_t expire_at_ms;   /* absolute deadline, 0 for none */
    uint64_t fence_token;    /* REC_F_FENCE only: the lock token */
    const char *fence_lock;  /* REC_F_FENCE only: the lock's name */
    uint32_t fence_llen;
} rec_put_t;

typedef struct rec_del_s {
    const char *key;
    uint32_t klen;
    uint64_t ifrev;          /* REC_F_IFREV only */
    uint64_t fence_token;    /* REC_F_FENCE only */
    const char *fence_lock;  /* REC_F_FENCE only */
    uint32_t fence_llen;
} rec_del_t;

typedef struct rec_incr_s {
    const char *key;
    uint32_t klen;
    int64_t by;
} rec_incr_t;

typedef struct rec_expire_s { /* REC_EXPIRE */
    const char *key;
    uint32_t klen;
} rec_expire_t;

/* REC_KEY_TTL: the key's deadline becomes expire_at_ms (0: none, PERSIST).
 * Only for a live key, and only if the flags' condition holds: NX (no
 * deadline now), XX (one now), GT, LT. A deadline at or before time_ms
 * deletes the key now, as Redis does. */
typedef struct rec_key_ttl_s {
    const char *key;
    uint32_t klen;
    uint64_t expire_at_ms;
} rec_key_ttl_t;

/* REC_APPEND: the key's new value is its current one (none: empty) with
 * val after it; the key keeps its lease and its deadline, as APPEND does
 * in Redis. Apply computes it from the state, so the log carries only the
 * appended bytes. */
typedef struct rec_append_s {
    const char *key;
    uint32_t klen;
    const char *val;
    uint32_t vlen;
} rec_append_t;

typedef struct rec_compact_s {
    uint64_t rev;            /* the new compaction point */
} rec_compact_t;

typedef struct rec_lease_s {
    uint64_t lease_id;       /* KEEPALIVE, REVOKE */
    uint64_t ttl_ms;         /* GRANT */
} rec_lease_t;

typedef struct rec_lock_s {
    const char *name;        /* the lock */
    uint32_t nlen;
    uint64_t token;          /* RELEASE, EXTEND */
    uint64_t ttl_ms;         /* ACQUIRE, EXTEND */
    uint64_t lease_id;       /* ACQUIRE: 0 for none */
} rec_lock_t;

typedef struct rec_elect_s {
    const char *name;        /* the election */
    uint32_t nlen;
    uint64_t term;           /* PROCLAIM, KEEPALIVE, RESIGN */
    const char *val;         /* CAMPAIGN, PROCLAIM, RESIGN with REC_F_HANDOVER */
    uint32_t vlen;
    uint64_t ttl_ms;         /* CAMPAIGN */
    uint64_t lease_id;       /* CAMPAIGN: 0 for none */
} rec_elect_t;

typedef struct rec_coord_expire_s {
    uint8_t kind;            /* enum coord_kind */
    uint64_t id;             /* the lease id, lock token or term that expires */
    const char *name;        /* the lock or election (empty for a lease) */
    uint32_t nlen;
} rec_coord_expire_t;

typedef struct rec_q_s {     /* REC_Q_DROP, REC_Q_PROMOTE */
    const char *queue;
    uint32_t qlen;
} rec_q_t;

typedef struct rec_q_push_s {
    const char *queue;
    uint32_t qlen;
    const char *key;         /* the message key */
    uint32_t klen;
    const char *payload;
    uint32_t plen;
    const char *dedup_id;    /* empty: none; with REC_F_IDEM the idempotency key */
    uint32_t dlen;
    uint64_t delay_ms;       /* DELAY, 0 for none */
    uint64_t idem_hash;      /* REC_F_IDEM: the hash of the request the key is bound to */
    uint64_t idem_ms;        /* REC_F_IDEM: how long the key is kept after this push */
} rec_q_push_t;

typedef struct rec_q_deliver_s {
    const char *queue;
    uint32_t qlen;
    uint64_t lease_ms;       /* 0: the queue's */
} rec_q_deliver_t;

typedef struct rec_q_ack_s {
    const char *queue;
    uint32_t qlen;
    uint64_t msg_id;
    uint64_t token;          /* the delivery's token */
    const char *result;      /* REC_F_RESULT only */
    uint32_t rlen;
} rec_q_ack_t;

typedef struct rec_q_nack_s {
    const char *queue;
    uint32_t qlen;
    uint64_t msg_id;
    uint64_t token;
    uint64_t delay_ms;       /* DELAY before the retry, 0 for none */
} rec_q_nack_t;

typedef struct rec_q_extend_s {
    const char *queue;
    uint32_t qlen;
    uint64_t msg_id;
    uint64_t token;
    uint64_t ttl_ms;         /* the new lease, from now */
} rec_q_extend_t;

typedef struct rec_q_redeliver_s {
    const char *queue;
    uint32_t qlen;
    uint64_t msg_id;
    uint64_t token;
} rec_q_redeliver_t;

typedef struct rec_q_config_s {
    const char *queue;
    uint32_t qlen;
    const char *config;      /* the whole new configuration (core_qconfig_encode) */
    uint32_t clen;
    const char *deadletter;  /* the dead-letter queue, empty: none */
    uint32_t dllen;
} rec_q_config_t;

/* REC_Q_RETRY: the writer decided how a delivery comes back under its
 * queue's BACKOFF / MAXAGE (queue_retry()); kind is enum queue_retry_flags. */
typedef struct rec_q_retry_s {
    const char *queue;
    uint32_t qlen;
    uint64_t msg_id;
    uint64_t token;
    uint64_t delay_ms;       /* before the next attempt, jitter included; 0: at once */
    uint8_t kind;            /* QUEUE_RETRY_F_LEASE | QUEUE_RETRY_F_GIVEUP */
} rec_q_retry_t;

/* REC_Q_PAUSE's operations (queue_pause() and friends). The key is empty
 * for the queue-wide ones; until_ms is set only by the pauses. */
enum q_pause_op {
    Q_PAUSE_KEY = 1,        /* pause key until until_ms (0: until resumed) */
    Q_PAUSE_QUEUE = 2,      /* pause the queue until until_ms (0: until resumed) */
    Q_RESUME_KEY = 3,
    Q_RESUME_QUEUE = 4,
    Q_PAUSE_END_KEY = 5,    /* the writer's timer: the key's pause ended (if it still has) */
    Q_PAUSE_END_QUEUE = 6,  /* the writer's timer: the queue's pause ended (if it still has) */
};

typedef struct rec_q_pause_s {
    const char *queue;
    uint32_t qlen;
    const char *key;         /* the key ops: the message key */
    uint32_t klen;
    uint64_t until_ms;       /* Q_PAUSE_*: the pause's end, 0 for none */
    uint8_t op;              /* enum q_pause_op */
} rec_q_pause_t;

/* REC_Q_REDRIVE: from the dead-letter queue dlq, key's waiting messages
 * (only msg_id if not 0) move to queue (queue_redrive()). */
typedef struct rec_q_redrive_s {
    const char *queue;       /* where they go */
    uint32_t qlen;
    const char *dlq;         /* where they are */
    uint32_t dlen;
    const char *key;
    uint32_t klen;
    uint64_t msg_id;         /* 0: all of key's waiting messages */
} rec_q_redrive_t;

/* REC_Q_CANCEL, REC_Q_EXPIRE: one message, under the key the writer found
 * it at. */
typedef struct rec_q_msg_s {
    const char *queue;
    uint32_t qlen;
    const char *key;
    uint32_t klen;
    uint64_t msg_id;
} rec_q_msg_t;

/* REC_Q_SCHEDULE_ADD / _DEL / REC_Q_TICK: schedule `name`, whose pushes
 * go to queue (ADD: its message key and sched_encode()'s value; TICK: the
 * tick's time). */
typedef struct rec_q_sched_s {
    const char *queue;
    uint32_t qlen;
    const char *name;
    uint32_t nlen;
    const char *key;         /* ADD */
    uint32_t klen;
    const char *spec;        /* ADD: sched_encode(): when, and the payload */
    uint32_t slen;
    uint64_t tick_ms;        /* TICK */
} rec_q_sched_t;

typedef struct rec_q_unpark_s {
    const char *queue;
    uint32_t qlen;
    const char *key;
    uint32_t klen;
} rec_q_unpark_t;

typedef struct rec_q_dedup_end_s {
    const char *queue;
    uint32_t qlen;
    const char *dedup_id;    /* with REC_F_IDEM: the idempotency key */
    uint32_t dlen;
    const char *key;         /* REC_F_IDEM: the message key it is scoped to */
    uint32_t klen;
} rec_q_dedup_end_t;

typedef struct rec_q_result_end_s {
    const char *queue;
    uint32_t qlen;
    uint64_t msg_id;
} rec_q_result_end_t;

/* REC_ACL_SETUSER: the user called name becomes exactly what rules
 * describes (acl_user_describe()'s canonical form: passwords as hashes
 * only); REC_ACL_DELUSER: the user is removed (rules empty). */
typedef struct rec_acl_s {
    const char *name;
    uint32_t nlen;
    const char *rules;
    uint32_t rlen;
} rec_acl_t;

/* REC_TXN: the records one EXEC applied, each as u32 length + its byte
 * form (record.h, format 3), count of them; never a REC_TXN inside. Read
 * them with record_txn_next(). */
typedef struct rec_txn_s {
    uint64_t count;
    const char *recs;
    uint32_t len;
} rec_txn_t;

/*
 * record_t -- one mutation: a tagged union. `type` says which member of the
 * union is meaningful (the comment on each enum record_type value names
 * it); every other member is unused and must be left zero. Why a union of
 * per-type structs rather than one flat struct: each field's name says
 * what it holds (a lease id is never called "token", a message id never
 * "arg_rev"), a record cannot carry a field its type does not read, and
 * the log encodes exactly the fields of the type (record.h, format 3).
 * The compiler cannot stop code from reading the wrong member, so
 * record_valid() checks a record against its type, and the codec asserts
 * it before writing and checks it again after reading.
 * Build one with a designated initialiser:
 *     record_t r = {.type = REC_LOCK_RELEASE, .lock = {.name = n, .nlen = l, .token = t}};
 */
typedef struct record_s {
    uint8_t type;            /* enum record_type */
    uint16_t flags;          /* enum record_flags, only record_flags_allowed(type) */
    uint64_t time_ms;        /* the writer's wall clock, ms since the epoch */
    union {
        rec_put_t put;                   /* REC_PUT */
        rec_del_t del;                   /* REC_DEL */
        rec_incr_t incr;                 /* REC_INCR */
        rec_expire_t expire;             /* REC_EXPIRE */
        rec_compact_t compact;           /* REC_COMPACT */
        rec_key_ttl_t key_ttl;           /* REC_KEY_TTL */
        rec_append_t append;             /* REC_APPEND */
        rec_lease_t lease;               /* REC_LEASE_* */
        rec_lock_t lock;                 /* REC_LOCK_* */
        rec_elect_t elect;               /* REC_ELECT_* */
        rec_coord_expire_t coord_expire; /* REC_COORD_EXPIRE */
        rec_q_t q;                       /* REC_Q_DROP, REC_Q_PROMOTE */
        rec_q_push_t q_push;             /* REC_Q_PUSH */
        rec_q_deliver_t q_deliver;       /* REC_Q_DELIVER */
        rec_q_ack_t q_ack;               /* REC_Q_ACK */
        rec_q_nack_t q_nack;             /* REC_Q_NACK */
        rec_q_extend_t q_extend;         /* REC_Q_EXTEND */
        rec_q_config_t q_config;         /* REC_Q_CONFIG */
        rec_q_unpark_t q_unpark;         /* REC_Q_UNPARK */
        rec_q_redeliver_t q_redeliver;   /* REC_Q_REDELIVER */
        rec_q_dedup_end_t q_dedup_end;   /* REC_Q_DEDUP_END */
        rec_q_result_end_t q_result_end; /* REC_Q_RESULT_END */
        rec_q_retry_t q_retry;           /* REC_Q_RETRY */
        rec_q_pause_t q_pause;           /* REC_Q_PAUSE */
        rec_q_redrive_t q_redrive;       /* REC_Q_REDRIVE */
        rec_q_msg_t q_msg;               /* REC_Q_CANCEL, REC_Q_EXPIRE */
        rec_q_sched_t q_sched;           /* REC_Q_SCHEDULE_ADD, REC_Q_SCHEDULE_DEL, REC_Q_TICK */
        rec_txn_t txn;                   /* REC_TXN */
        rec_acl_t acl;                   /* REC_ACL_* */
    };
} record_t;

/* record_family() -- the family of a record type, REC_FAM_NONE if the
 * number is no record type. */
/* (inline: the writer asks it for every record it applies.) */
static inline int record_family(unsigned type)
{
    switch (type) {
    case REC_PUT: case REC_DEL: case REC_INCR: case REC_EXPIRE: case REC_COMPACT: case REC_KEY_TTL:
    case REC_APPEND: case REC_FLUSH:
        return REC_FAM_KV;
    case REC_LEASE_GRANT: case REC_LEASE_KEEPALIVE: case REC_LEASE_REVOKE: case REC_LOCK_ACQUIRE:
    case REC_LOCK_RELEASE: case REC_LOCK_EXTEND: case REC_ELECT_CAMPAIGN: case REC_ELECT_PROCLAIM:
    case REC_ELECT_KEEPALIVE: case REC_ELECT_RESIGN: case REC_COORD_EXPIRE:
        return REC_FAM_COORD;
    case REC_Q_PUSH: case REC_Q_DELIVER: case REC_Q_ACK: case REC_Q_NACK: case REC_Q_EXTEND:
    case REC_Q_CONFIG: case REC_Q_DROP: case REC_Q_UNPARK: case REC_Q_REDELIVER: case REC_Q_PROMOTE:
    case REC_Q_DEDUP_END: case REC_Q_RESULT_END: case REC_Q_RETRY: case REC_Q_PAUSE: case REC_Q_REDRIVE:
    case REC_Q_CANCEL: case REC_Q_EXPIRE: case REC_Q_SCHEDULE_ADD: case REC_Q_SCHEDULE_DEL: case REC_Q_TICK:
        return REC_FAM_QUEUE;
    case REC_TXN:
        return REC_FAM_TXN;
    case REC_ACL_SETUSER: case REC_ACL_DELUSER:
        return REC_FAM_ACL;
    default:
        return REC_FAM_NONE;
    }
}
/* record_flags_allowed() -- the flags a record of this type may carry. */
unsigned record_flags_allowed(unsigned type);
/* record_queue() -- a queue record's queue name (*len its length); NULL
 * for a record of another family. */
const char *record_queue(const record_t *rec, uint32_t *len);
/* record_valid() -- true if rec is well formed for its type: a known
 * type, only its allowed flags, and every field its type (and flags) do
 * not use zero. Pure; the codec asserts it and decode checks it. */
bool record_valid(const record_t *rec);

enum apply_status {
    AP_OK = 0,          /* applied; result.rev is its revision */
    AP_NOOP = 1,        /* nothing to do (DEL of an absent key, NX/XX false); no revision */
    AP_CONFLICT = 2,    /* IFREV failed; result.cur_rev is the key's mod_rev (0 if absent) */
    AP_NOTINT = 3,      /* INCR: the value is not an integer */
    AP_OVERFLOW = 4,    /* INCR would overflow */
    AP_COMPACTED = 5,   /* KV.COMPACT: the point is already past rev */
    AP_FUTURE = 6,      /* KV.COMPACT: rev is beyond the current revision */
    AP_BUSY = 7,        /* lock held / election led: result.coord.granted is the holder's token/term */
    AP_NOTFOUND = 8,    /* the lease does not exist (or has lapsed) */
    AP_NOTHOLDER = 9,   /* the token/term does not hold (FENCE, ELECT.KEEPALIVE) */
    AP_QFULL = 10,      /* Q.PUSH: MAXLEN messages pending */
    AP_QLIMIT = 11,     /* Q.PUSH: MAXPERKEY messages of the key waiting */
    AP_INVALID = 12,    /* Q.CONFIG: the configuration was refused; ACL SETUSER: the rules
                           did not parse (a log edited by hand: the command checks them) */
};

/* What core_apply() (and core_check()) answer. status, rev and cur_rev
 * hold for every record; the union holds what the record answers, by its
 * type's family (record_family()): a reader looks only at its record's
 * family, so reading another family's member is visibly wrong. REC_TXN and
 * core_check() set no union member. core_apply() and core_check() zero the
 * whole result first, so a member the record did not set reads as zero
 * (false, NULL). Pointers are valid until the next apply. */
typedef struct apply_result_s {
    int status;                  /* enum apply_status */
    uint64_t rev;                /* AP_OK: the revision the state reached (most records
                                    also set it, to the current one, on other outcomes) */
    uint64_t cur_rev;            /* AP_CONFLICT: the key's mod_rev (0 if absent); AP_FUTURE:
                                    the current revision; AP_COMPACTED: the oldest kept */
    union {
        struct {                 /* REC_FAM_KV */
            int64_t incr;        /* REC_INCR, AP_OK: the new value */
            uint64_t length;     /* REC_APPEND, AP_OK: the value's new length in bytes;
                                    REC_FLUSH: the number of keys deleted */
            bool changed;        /* AP_OK: REC_EXPIRE deleted a live key; REC_KEY_TTL changed
                                    the deadline (or deleted the key past a new one) */
        } kv;
        struct {                 /* REC_FAM_COORD */
            uint64_t granted;    /* REC_LEASE_GRANT: the lease id; REC_LOCK_ACQUIRE: the token
                                    (AP_OK) or the holder's token (AP_BUSY); REC_ELECT_CAMPAIGN:
                                    the term (AP_OK) or the leader's term (AP_BUSY) */
            uint64_t remaining_ms; /* REC_LEASE_KEEPALIVE / REC_ELECT_KEEPALIVE, AP_OK: the TTL left */
            bool done;           /* REC_LEASE_REVOKE, REC_LOCK_RELEASE, REC_LOCK_EXTEND,
                                    REC_ELECT_PROCLAIM, REC_ELECT_RESIGN, REC_COORD_EXPIRE: the
                                    record did its work (then status is AP_OK) */
            const char *handover; /* REC_ELECT_CAMPAIGN, AP_OK: the value handed over, NULL if none */
            size_t hlen;
            bool handover_lapsed; /* ... and it is a lapsed term's last value, not handed over */
        } coord;
        struct {                 /* REC_FAM_QUEUE */
            uint64_t id;         /* REC_Q_PUSH: the message id (AP_OK), the first push's for a
                                    duplicate (AP_NOOP) */
            int push_status;     /* REC_Q_PUSH: queue_push()'s enum queue_status */
            bool done;           /* records for an existing queue (all but REC_Q_PUSH,
                                    REC_Q_CONFIG, REC_Q_DROP): it changed something
                                    (then status is AP_OK) */
            queue_delivery_t delivery; /* REC_Q_DELIVER, AP_OK: the message delivered */
            queue_retry_t retry; /* REC_Q_NACK / REC_Q_REDELIVER / REC_Q_RETRY / REC_Q_EXPIRE, AP_OK:
                                    what became of the message */
            size_t moved;        /* REC_Q_REDRIVE, AP_OK: how many messages moved */
        } queue;
    };
} apply_result_t;

/* Coordination events (coord.h) after the core has handled them (keys of
 * an ended lease deleted, revisions spent): for the command layer's lock
 * waiters, candidates and observers. Must not apply records. */
typedef struct coord_event_s coord_event_t;
typedef void (*core_coord_cb)(void *arg, const coord_event_t *ev);

typedef void (*core_change_cb)(void *arg, const kv_change_t *change);

typedef struct core_s core_t;

/* core_create() -- an empty state whose history keeps history_changes
 * key changes (core_set_history() adds a byte bound); NULL if out of
 * memory. */
core_t *core_create(uint64_t history_changes);
void core_destroy(core_t *c);

/* core_apply() -- apply one record; *res receives the outcome. A REC_TXN
 * applies its sub-records in order (each takes its revisions, watchers see
 * each change); its outcome is AP_OK with rev the last revision taken. */
void core_apply(core_t *c, const record_t *rec, apply_result_t *res);

/* core_apply_stored() -- core_apply() for a record the log holds (a
 * replay, a committed raft entry): its outcome must be the one it had
 * where it was made, so nothing only this member decides may change it.
 * The one such input is the history window (kv_oldest_rev()), member-local:
 * a stored KV.COMPACT takes its revision even where the window already
 * passed its point (core_apply() answers AP_COMPACTED or AP_NOOP there). */
void core_apply_stored(core_t *c, const record_t *rec, apply_result_t *res);

/* Guard checks for a transaction (MULTI/EXEC): core_check() says, without
 * changing anything, whether rec would fail a guard if applied after the
 * records checked before it in the same core_txn_check_t: an IFREV that
 * would conflict, a FENCE not held, a lease gone, an INCR of a non-integer
 * or past the range, a stale delivery token in Q.ACK/Q.NACK/Q.EXTEND, a
 * Q.PUSH with no room (MAXLEN, MAXPERKEY), a lock held (LOCK.ACQUIRE). It
 * follows the transaction's own earlier KV writes, pushes and settled
 * deliveries (so SET k then INCR k is judged on SET's value), but not its
 * coordination records (a LOCK.RELEASE then a FENCE on that lock is judged
 * on the lock as it was). Returns true and fills res (status AP_NOOP: the
 * record would do its work, or find nothing to do, as SET NX on a present
 * key) if no guard fails; false with res->status the failing outcome.
 * Pointers of the records checked must stay valid until the check ends. */
typedef struct core_txn_check_s {
    struct txn_index_s *ix;   /* KV keys written, pushes made and deliveries settled so far,
                               * hashed (owned; NULL until a record needs it) */
    const uint8_t *hash_key;  /* the core's key for that table (no getrandom() per check) */
    uint64_t rev;             /* the revision the next record would take */
    bool flushed;             /* a FLUSHALL came before: keys it did not write since are absent */
} core_txn_check_t;
void core_txn_check_init(const core_t *c, core_txn_check_t *t);
void core_txn_check_free(core_txn_check_t *t);
bool core_check(const core_t *c, core_txn_check_t *t, const record_t *rec, apply_result_t *res);

/* The store, for reads (read-only use). */
const kv_t *core_kv(const core_t *c);
/* The current revision (the last one taken). */
uint64_t core_rev(const core_t *c);
/* core_last_time_ms() -- the latest time a record applied carried (0 if
 * none since the core was created): where the writer's clock resumes. */
uint64_t core_last_time_ms(const core_t *c);
/* core_time_of_rev() -- about when revision rev was reached (ms since the
 * epoch, on the writer's clock), from samples of the records applied since
 * the core was created (one a second, the last hour): at most a second
 * early. A revision older than every sample (before a restart's snapshot,
 * or over an hour ago) gets the oldest sample's time; 0 if there is none.
 * For ages shown to people (the oldest waiting message), never for state. */
uint64_t core_time_of_rev(const core_t *c, uint64_t rev);

/* core_foreach_expiry() -- every key deadline, in no order: O(keys with
 * a deadline), where walking the keys would be O(keys). */
void core_foreach_expiry(const core_t *c, void (*fn)(void *arg, const char *key, size_t klen, uint64_t deadline_ms),
                         void *arg);
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
/* core_set_queue_cb() -- the queues' message events (queue.h), called
 * inside the apply of the record that makes them (Q.WATCH). */
void core_set_queue_cb(core_t *c, queue_event_cb cb, void *arg);
/* core_copy_callbacks() -- dst calls the change, coordination and queue
 * callbacks src calls (a core that replaces another: a cluster member
 * restoring a snapshot). */
void core_copy_callbacks(core_t *dst, const core_t *src);

/* The users (acl.h), for reads; core_acl_load() is for loading a
 * snapshot into a fresh core only (every other change is a record). */
struct acl_s;
const struct acl_s *core_acl(const core_t *c);
struct acl_s *core_acl_load(core_t *c);

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

/* The schedules (schedule.h), for reads; core_scheds_load() is for
 * loading a snapshot into a fresh core only. */
struct sched_set_s;
const struct sched_set_s *core_scheds(const core_t *c);
struct sched_set_s *core_scheds_load(core_t *c);

/* Q.CONFIG's record carries the whole new configuration in val, in this
 * fixed form (little-endian): maxlen u32 | maxperkey u32 | onfull u8 |
 * onpoison u8 | maxattempts u32 | lease_ms u64 | dedup_ms u64 |
 * resultttl_ms u64 (the first form, 38 bytes), then backoff u8 |
 * backoff_base_ms u64 | backoff_cap_ms u64 | maxage_ms u64 | maxwait_ms
 * u64 | rate_n u32 | rate_per_ms u64 | keyrate_n u32 | keyrate_per_ms u64
 * | keyconc u32 | fairness u8 (100 bytes in all); the dead-letter queue is the record's key
 * (empty: none). A 38-byte form (records and snapshots older than these
 * controls) leaves the later fields as they are. */
#define CORE_QCONFIG_V1_BYTES 38
#define CORE_QCONFIG_BYTES 100
void core_qconfig_encode(const queue_config_t *cfg, char out[CORE_QCONFIG_BYTES]);
/* Returns 0, or -1 if len is none of the forms. cfg->deadletter is left alone. */
int core_qconfig_decode(const void *p, size_t len, queue_config_t *cfg);

/* Compaction pin: automatic compaction never moves the point past pin
 * (0: no pin), so a snapshot being written at that revision stays readable. */
void core_set_compact_pin(core_t *c, uint64_t pin);
/* core_compact_pin() -- the pin set, 0 if none. */
uint64_t core_compact_pin(const core_t *c);
/* core_set_history() -- automatic compaction keeps the last
 * history_changes key changes and, if history_bytes is not 0, no more than
 * that many key and value bytes of them (core.c, "Automatic compaction"). */
void core_set_history(core_t *c, uint64_t history_changes, uint64_t history_bytes);
/* Bulk replay (recovery, before any client can watch): between
 * core_replay_begin() and core_replay_end() records apply as usual and reach
 * the same state, but the change callback is not called (there is no one to
 * tell; coordination events still are) and the store defers ordering new
 * keys (kv_index_defer()), so range reads (KV.RANGE, watches' snapshots,
 * snapshot writing) must wait for core_replay_end(). */
void core_replay_begin(core_t *c);
void core_replay_end(core_t *c);

#endif /* ORDO_CORE_H */
