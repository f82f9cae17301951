/*
 * coord.h -- the coordination state machine: leases, locks with fencing
 * tokens, leader elections, and the deadlines that end them.
 *
 * A pure module owned by the core, in the style of kv.h: it never reads the
 * clock (every function that depends on time takes the record's now_ms),
 * never allocates revisions (the core passes in the revision it would assign,
 * and spends it only when the outcome says it was used), never speaks RESP,
 * never waits. Waiters (LOCK.ACQUIRE WAIT, ELECT.CAMPAIGN WAIT) and observers
 * (ELECT.OBSERVE) live in the writer (writer/coord_wait.c), which learns
 * from the events below when a lock became free or leadership changed. Not thread-safe: the
 * core thread is its only user.
 *
 * Model
 * -----
 *   - A lease has an id (the revision that granted it), a TTL and a
 *     deadline. Keepalive moves the deadline to now + TTL. Kv keys, locks and
 *     leaderships may be attached to it; when the lease ends (revoke, or an
 *     expire record) all of them end with it, in one apply.
 *   - A lock is free or held by one token (the revision of the acquire that
 *     took it). Holding ends by release, by its own deadline (expire record)
 *     or by the end of its lease. A free lock has no state here.
 *   - An election is vacant or led by one term (the revision of the campaign
 *     that won it) with a value. A resigning leader may leave a hand-over
 *     value; the next successful campaign receives it and it is cleared.
 *   - Identifiers are revisions: lease ids, lock tokens and terms come from
 *     one strictly increasing counter, so they are unique across all three
 *     kinds, a lock's tokens strictly increase across holders, and an
 *     election's terms strictly increase and never overlap (a term starts
 *     only on a vacant election). The module asserts that every revision it
 *     uses is above every revision it used (or loaded) before.
 *
 * Time, lapse and expiry
 * ----------------------
 * Ending on time is an explicit record, never a side effect of reading: the
 * writer asks coord_due() what is due at its clock, logs the matching
 * expire record (coord_lease_expire / coord_lock_expire /
 * coord_elect_expire, naming the id/token/term) and applies it. Apply
 * re-checks: the thing must still exist with that id/token/term and its
 * deadline must be <= the record's now_ms (a keepalive or extend applied in
 * between makes the expire a no-op).
 *
 * Between its deadline and its expire record a holding is *lapsed*: it still
 * occupies the lock or election (acquire and campaign answer BUSY, info and
 * leader still show it, with 0 ms remaining), but it has lost its rights:
 * check, fence, release, extend, keepalive, proclaim and resign with its
 * token/term answer 0 / NOTHOLDER, and a lapsed lease refuses keepalive and
 * attach (NOTFOUND). A holding is lapsed when its own deadline has passed or
 * its lease is lapsed. So a token is never honoured past its deadline, and a
 * lock only changes hands through a record that frees it first.
 *
 * Events
 * ------
 * Every change the core or the writer must react to is reported through
 * the event callback (coord_set_event_cb(): the core's, which hands it on
 * to the writer's, core_set_coord_cb()), synchronously, inside the mutating
 * call, in this deterministic order:
 *   - COORD_EV_LOCK_FREE when a lock becomes free (release, expire, lease
 *     end): wake its first waiter by applying an acquire record for it;
 *   - COORD_EV_LEADER when an election gets a new leader (campaign) or the
 *     leader proclaims a new value; COORD_EV_VACANT when it becomes vacant
 *     (resign, expire, lease end): what ELECT.OBSERVE pushes, and the cue to
 *     wake the first waiting candidate;
 *   - when a lease ends: first COORD_EV_KEY for each attached key, in attach
 *     order (the caller deletes the key, each at its own revision; the key
 *     is already detached), then COORD_EV_LOCK_FREE for each lock under it
 *     in acquire order (= token order), then COORD_EV_VACANT for each
 *     leadership under it in campaign order (= term order), then
 *     COORD_EV_LEASE_END.
 * The callback must not call any mutating coord function (reads are fine
 * and see the state after the change being reported). Pointers in an event
 * are valid only during the callback.
 *
 * Revisions: a function's outcome says whether it changed state; a caller
 * following the protocol spends one revision per successful mutation and one
 * per event of a lease end (each deleted key, freed lock, vacated
 * leadership), in event order.
 *
 * Complexity: names are binary-safe, kept in keyed (SipHash) hash tables.
 * Every function is O(1) expected plus O(log n) for the deadline heap
 * (n = leases + locks + leaderships with a deadline), plus O(length) of the
 * names and values it copies, except: ending a lease is O(attached keys +
 * locks + leaderships under it) (times the heap's log n), coord_snapshot()
 * is O(everything).
 *
 * Pointers returned (names, values in outs) stay valid until the next
 * mutating call.
 *
 * Arguments are validated by the command layer before a record is made:
 * TTLs are > 0 where required and bounded so that now_ms + ttl_ms cannot
 * overflow; the module asserts what it relies on.
 */
#ifndef ORDO_COORD_H
#define ORDO_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Outcomes of functions that can fail in more than one way. */
enum coord_status {
    COORD_OK = 0,        /* done; state changed */
    COORD_BUSY = 1,      /* lock held / election led by someone else (incl. lapsed) */
    COORD_NOTFOUND = 2,  /* the lease does not exist or is lapsed */
    COORD_NOTHOLDER = 3, /* the token/term does not hold (anymore), or is lapsed */
};

enum coord_event_type {
    COORD_EV_KEY = 1,       /* a lease ended: delete key `name` (already detached); lease = id */
    COORD_EV_LOCK_FREE = 2, /* lock `name` became free; id = the token that held it */
    COORD_EV_LEADER = 3,    /* election `name` is led by term `id` with `value` */
    COORD_EV_VACANT = 4,    /* election `name` became vacant; id = the term that ended */
    COORD_EV_LEASE_END = 5, /* lease `id` ended, after all its KEY/LOCK_FREE/VACANT events */
};

enum coord_reason {
    COORD_R_RELEASE = 1,  /* LOCK.RELEASE / ELECT.RESIGN / LEASE.REVOKE */
    COORD_R_EXPIRE = 2,   /* its own deadline: an expire record */
    COORD_R_LEASE = 3,    /* its lease ended (revoke or expiry) */
    COORD_R_CAMPAIGN = 4, /* COORD_EV_LEADER: a new term */
    COORD_R_PROCLAIM = 5, /* COORD_EV_LEADER: the same term, a new value */
};

typedef struct coord_event_s {
    int type;           /* enum coord_event_type */
    int reason;         /* enum coord_reason */
    const char *name;   /* key / lock / election name (NULL for LEASE_END) */
    size_t nlen;
    uint64_t id;        /* token (LOCK_FREE), term (LEADER, VACANT), lease id (LEASE_END) */
    uint64_t lease;     /* the lease the thing was attached to, 0 for none */
    const char *value;  /* LEADER: the leader's value */
    size_t vlen;
} coord_event_t;

typedef void (*coord_event_cb)(void *arg, const coord_event_t *ev);

/* What is due: the writer logs the matching expire record. */
enum coord_kind { COORD_LEASE = 1, COORD_LOCK = 2, COORD_ELECT = 3 };
typedef struct coord_due_s {
    int kind;             /* enum coord_kind */
    uint64_t id;          /* lease id, lock token or term */
    const char *name;     /* lock / election name (NULL for a lease) */
    size_t nlen;
    uint64_t deadline_ms;
} coord_due_t;

typedef struct coord_lock_info_s {
    uint64_t token;       /* holder's token */
    uint64_t remaining_ms;/* until its lock deadline or its lease's, whichever is first; 0 if lapsed */
    uint64_t deadline_ms; /* own deadline, 0 for none (lease-bound only) */
    uint64_t lease;       /* lease id, 0 for none */
} coord_lock_info_t;

typedef struct coord_leader_s {
    uint64_t term;
    const char *value;
    size_t vlen;
    uint64_t remaining_ms;/* as for locks; 0 if lapsed */
    uint64_t lease;
    /* coord_elect_campaign(): the hand-over value the previous leader left
     * (NULL: none; non-NULL with hlen 0: an empty value). */
    const char *handover;
    size_t hlen;
    bool handover_lapsed; /* handover is the last value of a term that ended
                           * without resigning (expiry, lease end): not handed over */
} coord_leader_t;

typedef struct coord_stats_s {
    size_t leases;
    size_t attached_keys;
    size_t locks;          /* held locks */
    size_t leaders;        /* led elections */
    size_t handovers;      /* vacant elections keeping a hand-over value */
    size_t deadlines;      /* entries in the deadline heap */
} coord_stats_t;

typedef struct coord_s coord_t;

/* coord_create() -- empty state; NULL if out of memory. */
coord_t *coord_create(void);
/* coord_destroy() -- free everything (no events). NULL is fine. */
void coord_destroy(coord_t *c);

/* coord_set_event_cb() -- where events go (NULL: nowhere). */
void coord_set_event_cb(coord_t *c, coord_event_cb cb, void *arg);

/* ---- leases ---------------------------------------------------------------- */

/* coord_lease_grant() -- a lease of ttl_ms (> 0) from now_ms; its id is rev.
 * Always succeeds (uses rev). */
uint64_t coord_lease_grant(coord_t *c, uint64_t ttl_ms, uint64_t now_ms, uint64_t rev);

/* coord_lease_keepalive() -- deadline = now + the granted TTL.
 * COORD_OK (*remaining_ms = TTL) or COORD_NOTFOUND (absent or lapsed). */
int coord_lease_keepalive(coord_t *c, uint64_t id, uint64_t now_ms, uint64_t *remaining_ms);

/* coord_lease_revoke() -- end the lease now (even if lapsed), with its
 * events. 1 if it ended, 0 if there was no such lease. O(attached). */
int coord_lease_revoke(coord_t *c, uint64_t id);

/* coord_lease_expire() -- apply of the writer's expire record: end lease id
 * if it exists and its deadline is <= now_ms. 1 if it ended, 0 (no-op). */
int coord_lease_expire(coord_t *c, uint64_t id, uint64_t now_ms);

/* coord_lease_ttl() -- 1 if the lease exists (*remaining_ms: 0 if lapsed;
 * *nkeys: attached keys; either out may be NULL), else 0. */
int coord_lease_ttl(const coord_t *c, uint64_t id, uint64_t now_ms, uint64_t *remaining_ms, size_t *nkeys);

/* coord_lease_live() -- the lease exists and is not lapsed (what KV.PUT
 * LEASE, LOCK.ACQUIRE LEASE, ELECT.CAMPAIGN LEASE require). */
bool coord_lease_live(const coord_t *c, uint64_t id, uint64_t now_ms);

/* coord_lease_attach() -- record that kv key `key` (its current version) is
 * attached to lease id. A key is attached to at most one lease: attaching
 * it to another moves it (to the end of the new lease's order); attaching
 * it again to the same lease keeps its place. COORD_OK or COORD_NOTFOUND (no
 * such lease; nothing changes). The caller checks coord_lease_live() before
 * it writes the key, and calls this after. */
int coord_lease_attach(coord_t *c, const void *key, size_t klen, uint64_t id);

/* coord_lease_detach() -- the key was deleted, or put without this lease:
 * forget its attachment. 1 if it was attached, else 0. */
int coord_lease_detach(coord_t *c, const void *key, size_t klen);

/* coord_lease_of() -- the lease a key is attached to, 0 for none. */
uint64_t coord_lease_of(const coord_t *c, const void *key, size_t klen);

/* ---- locks -------------------------------------------------------------------- */

/* coord_lock_acquire() -- take lock `name` for ttl_ms and/or under lease
 * (at least one non-zero; with both, it ends at whichever comes first).
 *   COORD_OK:       it was free; now held, *token = rev (rev used).
 *   COORD_BUSY:     held (perhaps lapsed, awaiting its expire record);
 *                   *token = the holder's token. rev not used.
 *   COORD_NOTFOUND: lease given but not live. rev not used. */
int coord_lock_acquire(coord_t *c, const void *name, size_t nlen, uint64_t ttl_ms, uint64_t lease,
                       uint64_t now_ms, uint64_t rev, uint64_t *token);

/* coord_lock_release() -- free the lock if token holds it and is not
 * lapsed: 1 (event LOCK_FREE, reason RELEASE), else 0 and nothing changes. */
int coord_lock_release(coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t now_ms);

/* coord_lock_extend() -- if token holds the lock and is not lapsed, its own
 * deadline becomes now + ttl_ms (> 0): 1; else 0. The lease binding stays. */
int coord_lock_extend(coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t ttl_ms,
                      uint64_t now_ms);

/* coord_lock_info() -- 1 and *out if held (lapsed included), 0 if free. */
int coord_lock_info(const coord_t *c, const void *name, size_t nlen, uint64_t now_ms, coord_lock_info_t *out);

/* coord_lock_check() -- 1 if token holds the lock now and is not lapsed,
 * else 0: LOCK.CHECK, and the FENCE condition of KV.PUT / KV.DEL. */
int coord_lock_check(const coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t now_ms);
static inline int coord_fence_ok(const coord_t *c, const void *lock, size_t nlen, uint64_t token, uint64_t now_ms)
{
    return coord_lock_check(c, lock, nlen, token, now_ms);
}

/* coord_lock_expire() -- apply of the writer's expire record: free the lock
 * if token still holds it and its own deadline is <= now_ms: 1 (event
 * LOCK_FREE, reason EXPIRE), else 0 (no-op). */
int coord_lock_expire(coord_t *c, const void *name, size_t nlen, uint64_t token, uint64_t now_ms);

/* ---- elections --------------------------------------------------------------- */

/* coord_elect_campaign() -- lead election `name` with value for ttl_ms
 * and/or under lease (as for locks).
 *   COORD_OK:       it was vacant; term = rev (rev used); out->handover is
 *                   the value the last leader left on resigning, consumed
 *                   now (NULL if none). Event LEADER (reason CAMPAIGN).
 *   COORD_BUSY:     led (perhaps lapsed): out describes the leader (term,
 *                   value); rev not used.
 *   COORD_NOTFOUND: lease given but not live; rev not used.
 * out may be NULL. */
int coord_elect_campaign(coord_t *c, const void *name, size_t nlen, const void *value, size_t vlen,
                         uint64_t ttl_ms, uint64_t lease, uint64_t now_ms, uint64_t rev, coord_leader_t *out);

/* coord_elect_leader() -- 1 and *out (handover NULL) if led (lapsed
 * included), 0 if vacant. */
int coord_elect_leader(const coord_t *c, const void *name, size_t nlen, uint64_t now_ms, coord_leader_t *out);

/* coord_elect_proclaim() -- if term leads and is not lapsed, its value
 * becomes value: 1 (event LEADER, reason PROCLAIM), else 0. */
int coord_elect_proclaim(coord_t *c, const void *name, size_t nlen, uint64_t term, const void *value,
                         size_t vlen, uint64_t now_ms);

/* coord_elect_keepalive() -- if term leads and is not lapsed, its deadline
 * becomes now + its TTL (lease-bound without a TTL: unchanged; the lease's
 * keepalive is the lease's business). COORD_OK and *remaining_ms, or
 * COORD_NOTHOLDER. */
int coord_elect_keepalive(coord_t *c, const void *name, size_t nlen, uint64_t term, uint64_t now_ms,
                          uint64_t *remaining_ms);

/* coord_elect_resign() -- if term leads and is not lapsed, the election
 * becomes vacant (event VACANT, reason RELEASE) and, if handover is not
 * NULL, keeps handover[0..hlen) for the next successful campaign: 1. Else 0. */
int coord_elect_resign(coord_t *c, const void *name, size_t nlen, uint64_t term, const void *handover,
                       size_t hlen, uint64_t now_ms);

/* coord_elect_check() -- 1 if term leads now and is not lapsed (a term used
 * as a fencing token), else 0. */
int coord_elect_check(const coord_t *c, const void *name, size_t nlen, uint64_t term, uint64_t now_ms);

/* coord_elect_expire() -- apply of the writer's expire record: vacate if
 * term still leads and its own deadline is <= now_ms: 1 (event VACANT,
 * reason EXPIRE), else 0. A pending hand-over cannot exist while led; the
 * term's last value becomes one, marked lapsed (as when its lease ends). */
int coord_elect_expire(coord_t *c, const void *name, size_t nlen, uint64_t term, uint64_t now_ms);

/* ---- deadlines ------------------------------------------------------------------ */

/* coord_next_deadline() -- the earliest deadline of any lease, lock or
 * leadership, 0 if none. O(1). */
uint64_t coord_next_deadline(const coord_t *c);

/* coord_due() -- if the earliest deadline is <= now_ms, 1 and *out names it
 * (ties: the smallest id first, so the order is a function of the state);
 * else 0. The writer logs the expire record for *out and applies it, and
 * asks again. O(1). */
int coord_due(const coord_t *c, uint64_t now_ms, coord_due_t *out);

/* ---- snapshot -------------------------------------------------------------------- */

/* One item of the full state. A snapshot is a sequence of items: for each
 * lease, the LEASE, then its KEYs (attach order), LOCKs (token order) and
 * ELECTs (term order); then every LOCK and ELECT without a lease (a vacant
 * ELECT is one keeping a hand-over value). Loading the items in that order
 * into an empty coord_t restores the same state, orders included. */
enum coord_item_kind { COORD_ITEM_LEASE = 1, COORD_ITEM_KEY = 2, COORD_ITEM_LOCK = 3, COORD_ITEM_ELECT = 4 };
typedef struct coord_item_s {
    int kind;              /* enum coord_item_kind */
    uint64_t id;           /* LEASE: id; LOCK: token; ELECT: term (0: vacant) */
    uint64_t lease;        /* KEY, LOCK, ELECT: lease id, 0 for none */
    uint64_t ttl_ms;       /* LEASE, ELECT: the TTL keepalive renews (ELECT: 0 for none) */
    uint64_t deadline_ms;  /* LEASE, LOCK, ELECT: own deadline, 0 for none */
    const char *name;      /* KEY, LOCK, ELECT */
    size_t nlen;
    const char *value;     /* ELECT: leader's value */
    size_t vlen;
    const char *handover;  /* ELECT (vacant): pending hand-over, NULL for none */
    size_t hlen;
    bool handover_lapsed;  /* ELECT (vacant): the hand-over was not handed over (coord_leader_t) */
} coord_item_t;

typedef void (*coord_item_cb)(void *arg, const coord_item_t *item);

/* coord_snapshot() -- visit every item (state unchanged; the callback must
 * not mutate c). O(everything). */
void coord_snapshot(const coord_t *c, coord_item_cb cb, void *arg);

/* coord_load() -- add one item (no events); its id counts as a used
 * revision (later ones must be above it). 0, or -1 if it contradicts
 * what is loaded (unknown lease, duplicate name or id, bad fields);
 * nothing changes then. */
int coord_load(coord_t *c, const coord_item_t *item);

void coord_stats(const coord_t *c, coord_stats_t *out);

/* coord_bytes() -- heap estimate of the state (leases, attachments, locks,
 * elections with their names, leader and hand-over values, incl. malloc
 * overhead), a function of the state alone: what max-memory-bytes counts.
 * O(1). */
size_t coord_bytes(const coord_t *c);

#endif /* ORDO_COORD_H */
