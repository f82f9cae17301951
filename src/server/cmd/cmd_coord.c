/*
 * cmd_coord.c -- leases (LEASE.*), locks (LOCK.*) and leader election
 * (ELECT.*): the commands, their server-side waiters and observers, and the
 * writer's timer that ends holdings on time.
 *
 * The state machine is coord.h, applied by the core; this file only turns
 * requests into records, keeps who waits and who observes, and speaks RESP.
 *
 * Waiters. LOCK.ACQUIRE WAIT and ELECT.CAMPAIGN park their connection
 * (block.h) on a FIFO wait list, one per lock name and one per election
 * name (a waitq_t in a keyed table). A newcomer never overtakes a waiter:
 * if the list is not empty it queues behind it (or, without WAIT, gets nil)
 * without trying. When the core reports COORD_EV_LOCK_FREE or
 * COORD_EV_VACANT, the callback only notes the wait list as pending: no
 * record may be applied inside another record's apply or inside the event
 * callback. cmd_coord_after_apply(), which cmd_apply() calls once each
 * record's apply has returned, then serves the pending lists: for each,
 * one acquire / campaign record for the first waiter. So one release
 * wakes exactly one waiter (no herd); the grant is a record of its own, at
 * its own revision, and replay needs no knowledge of who waited. A waiter
 * whose LEASE has ended gets -NOTFOUND and the next one is tried; a waiter
 * whose WAIT runs out gets nil (block.c's timer); a waiter that
 * disconnects leaves the list (on_cancel), and so does one answered
 * -READONLY when the log fails (block.c; a newcomer is refused then
 * instead of parked). Wait lists that became empty are
 * freed by a sweep at the next safe point (their waiter may be unlinked
 * only after our callback returns).
 *
 * Memory. Parked waiters hold their request (name, value) and a wait list
 * per lock / election name; cc->wait_bytes counts them, each waiter
 * charged for its request and its list (O(1) per park and wake; the
 * figure is 0 whenever nobody waits) and cmd_coord_bytes() adds them to the state's
 * coord_bytes(): INFO's used_memory_coord, counted by max-memory-bytes. A
 * newcomer that would park past the limit gets -LIMIT instead.
 *
 * Observers. ELECT.OBSERVE registers an observer on an election name; the
 * LEADER / VACANT events are pushed to every observer as they are applied
 * (writing into a connection's output is not applying a record, so this
 * happens inside the callback). Observers count as watches: against
 * max-watches-per-client, for RESP2 watch mode, and KV.UNWATCH removes them.
 *
 * Time. Deadlines (leases, locks, leaderships) are coord state; the writer
 * owns one uv timer at coord_next_deadline() and, when it fires, applies a
 * REC_COORD_EXPIRE record for everything coord_due() names at the writer's
 * clock. cmd_dispatch() does the same before each command, so a command
 * never sees a holding whose expiry record is merely late. Expiry is never
 * early (apply re-checks deadline <= the record's time, and the writer
 * stamps expire records only once its ms clock has passed the deadline,
 * see cmd_coord_expire_due()); it is late by 1 ms of clock rounding plus
 * the timer's resolution (1 ms) plus the event loop's latency (the batch of
 * commands being processed when the deadline passes), and a watcher of a
 * lease-attached key additionally waits for the log sync under
 * `fsync always`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writer/block.h"
#include "cmd.h"
#include "core/coord.h"

#define CONTAINER_OF(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* The longest TTL and the longest WAIT a command accepts: one year. Longer
 * holdings should keep themselves alive; the bound also keeps now + ttl far
 * from overflowing, which coord.h asks of its callers. */
#define COORD_TTL_MAX_MS (365ull * 24 * 3600 * 1000)

enum { WQ_LOCK = 0, WQ_ELECT = 1 };

/* The waiters of one lock or one election. */
typedef struct waitq_s {
    ordo_hnode_t node;
    wait_list_t list;
    int kind;                  /* WQ_LOCK / WQ_ELECT */
    bool pending;              /* in cc->pending: its lock/election became free */
    bool swept;                /* in cc->sweep: may be empty, free it later */
    struct waitq_s *pnext;     /* pending list */
    struct waitq_s *snext;     /* sweep list */
    size_t nlen;
    char name[];
} waitq_t;

/* What a parked LOCK.ACQUIRE / ELECT.CAMPAIGN asked for. */
typedef struct coord_wait_s {
    uint64_t ttl_ms;
    uint64_t lease;
    bool handover;             /* ELECT.CAMPAIGN HANDOVER: reply [term, value] */
    size_t charged;            /* what it adds to cc->wait_bytes */
    size_t vlen;
    char value[];              /* ELECT.CAMPAIGN: the candidate's value */
} coord_wait_t;

typedef struct obs_group_s obs_group_t;

/* One ELECT.OBSERVE. */
typedef struct observer_s {
    uint64_t id;               /* from the watch id counter: KV.UNWATCH id */
    conn_t *conn;
    obs_group_t *group;
    struct observer_s *gnext, *gprev;  /* in the group */
    struct observer_s *cnext, *cprev;  /* in conn->observers */
} observer_t;

struct obs_group_s {
    ordo_hnode_t node;
    observer_t *head;
    size_t nlen;
    char name[];
};

typedef struct coord_cmd_s {
    ordo_htab_t lockq;         /* lock name -> waitq_t */
    ordo_htab_t electq;        /* election name -> waitq_t */
    ordo_htab_t observed;      /* election name -> obs_group_t */
    waitq_t *pending, *pending_tail;
    waitq_t *sweep;
    bool serving;              /* inside serve_pending(): no re-entry */
    bool timer_on;             /* cmd_coord_start() ran */
    uv_timer_t timer;          /* at coord_next_deadline() */
    uint64_t timer_at_ms;      /* its deadline, 0 if idle */
    size_t wait_bytes;         /* parked waiters' requests and wait lists (see Memory) */
} coord_cmd_t;

/* What a malloc of n bytes costs, as coord.c estimates it. */
static size_t alloc_cost(size_t n)
{
    size_t c = (n + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

/* ---- tables ------------------------------------------------------------------- */

static bool waitq_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const waitq_t *q = (const waitq_t *)n;
    return q->nlen == len && memcmp(q->name, key, len) == 0;
}

static bool group_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const obs_group_t *g = (const obs_group_t *)n;
    return g->nlen == len && memcmp(g->name, key, len) == 0;
}

static ordo_htab_t *wq_table(coord_cmd_t *cc, int kind) { return kind == WQ_LOCK ? &cc->lockq : &cc->electq; }

static waitq_t *waitq_find(coord_cmd_t *cc, int kind, const void *name, size_t nlen)
{
    ordo_htab_t *t = wq_table(cc, kind);
    return (waitq_t *)ordo_htab_find(t, ordo_htab_hash(t, name, nlen), name, nlen);
}

static waitq_t *waitq_get(coord_cmd_t *cc, int kind, const void *name, size_t nlen)
{
    waitq_t *q = waitq_find(cc, kind, name, nlen);
    if (q != NULL)
        return q;
    ordo_htab_t *t = wq_table(cc, kind);
    q = ordo_xcalloc(1, sizeof *q + (nlen ? nlen : 1));
    q->kind = kind;
    q->nlen = nlen;
    memcpy(q->name, name, nlen);
    ordo_htab_insert(t, &q->node, ordo_htab_hash(t, name, nlen));
    return q;
}

/* Remember that q may have become empty; sweep() frees it once it is. */
static void waitq_maybe_empty(coord_cmd_t *cc, waitq_t *q)
{
    if (q->swept)
        return;
    q->swept = true;
    q->snext = cc->sweep;
    cc->sweep = q;
}

/* Free the wait lists that ended up empty. Called only where no waiter is
 * being timed out or served (a command handler, the end of serving). */
static void sweep(coord_cmd_t *cc)
{
    while (cc->sweep != NULL) {
        waitq_t *q = cc->sweep;
        cc->sweep = q->snext;
        q->swept = false;
        if (q->list.len == 0 && !q->pending) {
            ordo_htab_remove(wq_table(cc, q->kind), &q->node);
            free(q);
        }
    }
}

static waitq_t *waitq_of(waiter_t *w) { return CONTAINER_OF(w->list, waitq_t, list); }

/* ---- replies to parked connections ----------------------------------------------- */

static cmd_ctx_t ctx_of(server_t *s, conn_t *c)
{
    cmd_ctx_t x = {s, c, &c->out, c->proto, 0, NULL};
    return x;
}

/* Free a waiter's request. */
static void wait_data_free(server_t *s, waiter_t *w)
{
    coord_wait_t *d = w->data;
    if (d != NULL)
        s->coordcmd->wait_bytes -= d->charged;
    free(d);
    w->data = NULL;
}

static void on_wait_timeout(waiter_t *w)
{
    server_t *s = w->conn->srv;
    resp_add_null(&w->conn->out, w->conn->proto);
    wait_data_free(s, w);
    waitq_maybe_empty(s->coordcmd, waitq_of(w));
}

static void on_wait_cancel(waiter_t *w)
{
    server_t *s = w->conn->srv;
    wait_data_free(s, w);
    waitq_maybe_empty(s->coordcmd, waitq_of(w));
}

static void reply_campaign(cmd_ctx_t *x, bool handover, uint64_t term, const char *hv, size_t hlen)
{
    if (!handover) {
        resp_add_uint(x->out, term);
        return;
    }
    resp_add_array(x->out, 2);
    resp_add_uint(x->out, term);
    if (hv == NULL)
        resp_add_null(x->out, x->proto);
    else
        resp_add_bulk(x->out, hv, hlen);
}

static void reply_lease_gone(cmd_ctx_t *x, uint64_t lease)
{
    reply_errf(x, "NOTFOUND lease %llu does not exist or has expired", (unsigned long long)lease);
}

/* Finish waiter w, whose reply has been written. */
static void finish(server_t *s, waiter_t *w)
{
    wait_data_free(s, w);
    waitq_maybe_empty(s->coordcmd, waitq_of(w));
    block_done(s, w);
}

/* The lock / election of q became free: try its waiters in order until one
 * takes it (one wake-up per release) or it is taken by someone else. */
static void serve_one(server_t *s, waitq_t *q)
{
    while (q->list.head != NULL && s->readonly[0] == '\0') {
        waiter_t *w = q->list.head;
        coord_wait_t *d = w->data;
        cmd_ctx_t x = ctx_of(s, w->conn);
        record_t rec = {.key = q->name, .klen = (uint32_t)q->nlen, .ttl_ms = d->ttl_ms, .lease = d->lease};
        apply_result_t res;
        if (q->kind == WQ_LOCK) {
            rec.type = REC_LOCK_ACQUIRE;
        } else {
            rec.type = REC_ELECT_CAMPAIGN;
            rec.val = d->value;
            rec.vlen = (uint32_t)d->vlen;
        }
        if (!cmd_apply(s, &rec, &res))
            return; /* the log refused the grant: nobody may hold that token */
        if (res.status == AP_BUSY)
            return; /* still held: the waiter keeps its place */
        if (res.status == AP_NOTFOUND) {
            reply_lease_gone(&x, d->lease);
            finish(s, w);
            continue; /* its lease ended while it waited: the next one */
        }
        if (q->kind == WQ_LOCK)
            resp_add_uint(x.out, (uint64_t)res.value);
        else
            reply_campaign(&x, d->handover, (uint64_t)res.value, res.data, res.dlen);
        finish(s, w);
        return;
    }
}

static void serve_pending(server_t *s)
{
    coord_cmd_t *cc = s->coordcmd;
    if (cc->serving)
        return; /* the outer loop below takes what this record added */
    cc->serving = true;
    while (cc->pending != NULL) {
        waitq_t *q = cc->pending;
        cc->pending = q->pnext;
        if (cc->pending == NULL)
            cc->pending_tail = NULL;
        q->pending = false;
        serve_one(s, q);
        waitq_maybe_empty(cc, q);
    }
    cc->serving = false;
    sweep(cc);
}

static void note_free(coord_cmd_t *cc, int kind, const char *name, size_t nlen)
{
    waitq_t *q = waitq_find(cc, kind, name, nlen);
    if (q == NULL || q->list.len == 0 || q->pending)
        return;
    q->pending = true;
    q->pnext = NULL;
    if (cc->pending_tail)
        cc->pending_tail->pnext = q;
    else
        cc->pending = q;
    cc->pending_tail = q;
}

/* ---- observers -------------------------------------------------------------------- */

/* ["leader", name, term, value] (term 0 and nil: vacant). */
static void push_leader(conn_t *c, const char *name, size_t nlen, uint64_t term, const char *value, size_t vlen)
{
    resp_add_push(&c->out, c->proto, 4);
    resp_add_bulk_str(&c->out, "leader");
    resp_add_bulk(&c->out, name, nlen);
    resp_add_uint(&c->out, term);
    if (term == 0)
        resp_add_null(&c->out, c->proto);
    else
        resp_add_bulk(&c->out, value, vlen);
    c->srv->stats.watch_events_total++;
}

static void notify_observers(coord_cmd_t *cc, const coord_event_t *ev, uint64_t term)
{
    ordo_htab_t *t = &cc->observed;
    obs_group_t *g = (obs_group_t *)ordo_htab_find(t, ordo_htab_hash(t, ev->name, ev->nlen), ev->name, ev->nlen);
    if (g == NULL)
        return;
    for (observer_t *o = g->head; o != NULL; o = o->gnext) {
        if (o->conn->closing)
            continue;
        push_leader(o->conn, ev->name, ev->nlen, term, ev->value, ev->vlen);
        conn_mark_dirty(o->conn);
    }
}

/* The core's coordination callback: after the core handled the event. */
static void on_coord_event(void *arg, const coord_event_t *ev)
{
    server_t *s = arg;
    coord_cmd_t *cc = s->coordcmd;
    switch (ev->type) {
    case COORD_EV_LOCK_FREE:
        note_free(cc, WQ_LOCK, ev->name, ev->nlen);
        break;
    case COORD_EV_LEADER:
        notify_observers(cc, ev, ev->id);
        break;
    case COORD_EV_VACANT:
        notify_observers(cc, ev, 0);
        note_free(cc, WQ_ELECT, ev->name, ev->nlen);
        break;
    default:
        break;
    }
}

static void observer_free(server_t *s, observer_t *o)
{
    obs_group_t *g = o->group;
    if (o->gprev)
        o->gprev->gnext = o->gnext;
    else
        g->head = o->gnext;
    if (o->gnext)
        o->gnext->gprev = o->gprev;
    if (g->head == NULL) {
        ordo_htab_remove(&s->coordcmd->observed, &g->node);
        free(g);
    }
    conn_t *c = o->conn;
    if (o->cprev)
        o->cprev->cnext = o->cnext;
    else
        c->observers = o->cnext;
    if (o->cnext)
        o->cnext->cprev = o->cprev;
    c->nwatches--;
    free(o);
}

size_t cmd_coord_unobserve(conn_t *c, uint64_t id)
{
    size_t n = 0;
    observer_t *next;
    for (observer_t *o = c->observers; o != NULL; o = next) {
        next = o->cnext;
        if (id == 0 || o->id == id) {
            observer_free(c->srv, o);
            n++;
        }
    }
    return n;
}

void cmd_coord_conn_closed(conn_t *c) { cmd_coord_unobserve(c, 0); }

/* ---- the expiry timer ---------------------------------------------------------------- */

static void on_coord_timer(uv_timer_t *t)
{
    server_t *s = t->data;
    s->coordcmd->timer_at_ms = 0;
    server_tick(s);
    cmd_coord_expire_due(s);
    conn_run_resumed(s);
    conn_flush_dirty(s);
}

void cmd_coord_schedule(server_t *s)
{
    coord_cmd_t *cc = s->coordcmd;
    if (!cc->timer_on)
        return;
    uint64_t next = coord_next_deadline(core_coord(s->core));
    if (next == 0) {
        if (cc->timer_at_ms != 0)
            uv_timer_stop(&cc->timer);
        cc->timer_at_ms = 0;
        return;
    }
    if (cc->timer_at_ms != 0 && cc->timer_at_ms <= next)
        return; /* fires sooner and re-arms then */
    uint64_t now = server_now_ms();
    cc->timer_at_ms = next;
    uv_timer_start(&cc->timer, on_coord_timer, next + 1 > now ? next + 1 - now : 0, 0);
}

/* End everything due by the writer's clock, one expire record each.
 * "Due" is deadline < now_ms, not <=: the clock is in whole ms, so a
 * holding granted at now_ms began up to 1 ms after it, and its expire
 * record must be stamped at least deadline + 1 to come no earlier than
 * grant + TTL in real time. */
void cmd_coord_expire_due(server_t *s)
{
    char stackname[256];
    coord_due_t d;
    while (s->readonly[0] == '\0' && s->now_ms > 0 && coord_due(core_coord(s->core), s->now_ms - 1, &d)) {
        char *name = d.nlen <= sizeof stackname ? stackname : ordo_xmalloc(d.nlen);
        if (d.nlen > 0)
            memcpy(name, d.name, d.nlen); /* apply frees what d.name points into */
        record_t rec = {.type = REC_COORD_EXPIRE, .kind = (uint8_t)d.kind, .token = d.id, .key = name,
                        .klen = (uint32_t)d.nlen};
        apply_result_t res;
        cmd_apply(s, &rec, &res);
        if (name != stackname)
            free(name);
        if (res.status != AP_OK)
            break; /* coord_due() and expire disagree: never spin */
    }
    cmd_coord_schedule(s);
}

void cmd_coord_after_apply(server_t *s, const record_t *rec)
{
    coord_cmd_t *cc = s->coordcmd;
    if (cc == NULL)
        return;
    if (cc->pending != NULL)
        serve_pending(s);
    if (rec->type >= REC_LEASE_GRANT)
        cmd_coord_schedule(s);
}

/* ---- argument helpers -------------------------------------------------------------------- */

/* A TTL or WAIT in ms: 1..COORD_TTL_MAX_MS, or 0 too if zero_ok. */
static bool arg_ms(cmd_ctx_t *x, size_t i, bool zero_ok, const char *what, uint64_t *out)
{
    if (!arg_u64(x, i, out))
        return false;
    if ((*out == 0 && !zero_ok) || *out > COORD_TTL_MAX_MS) {
        reply_errf(x, "ERR %s must be between %d and %llu ms", what, zero_ok ? 0 : 1,
                   (unsigned long long)COORD_TTL_MAX_MS);
        return false;
    }
    return true;
}

static const coord_t *cst(cmd_ctx_t *x) { return core_coord(x->srv->core); }

static void reply_notholder(cmd_ctx_t *x, const char *what, uint64_t token)
{
    reply_errf(x, "NOTHOLDER %s %llu does not hold it now", what, (unsigned long long)token);
}

/* Park the current connection on q with the request's arguments; or, if
 * the server is read-only (nothing could grant it) or past
 * max-memory-bytes (the request would grow it), refuse as a write would. */
static void park(cmd_ctx_t *x, waitq_t *q, uint64_t wait_ms, uint64_t ttl_ms, uint64_t lease, bool handover,
                 const resp_arg_t *value)
{
    if (x->srv->readonly[0] != '\0') {
        reply_errf(x, "READONLY the log cannot be written, so writes are refused: %s", x->srv->readonly);
        waitq_maybe_empty(x->srv->coordcmd, q);
        return;
    }
    if (cmd_memory_refused(x->srv, x->out)) {
        waitq_maybe_empty(x->srv->coordcmd, q);
        return;
    }
    size_t vlen = value ? value->len : 0;
    coord_wait_t *d = ordo_xcalloc(1, sizeof *d + (vlen ? vlen : 1));
    /* Charged per waiter: its request and the list it waits on with the
     * name (shared by the list's waiters, and freed lazily by sweep(), so
     * charging it to each waiter keeps the figure exact at every moment). */
    d->charged = alloc_cost(sizeof *d + (vlen ? vlen : 1)) + alloc_cost(sizeof *q + (q->nlen ? q->nlen : 1));
    x->srv->coordcmd->wait_bytes += d->charged;
    d->ttl_ms = ttl_ms;
    d->lease = lease;
    d->handover = handover;
    d->vlen = vlen;
    if (vlen)
        memcpy(d->value, value->ptr, vlen);
    /* block.c ends a wait only once the clock is past its deadline, so a
     * WAIT never runs out before wait_ms have passed since the request. */
    waiter_t *w = block_wait(x->srv, x->conn, &q->list, wait_ms ? x->srv->now_ms + wait_ms : 0,
                             q->kind == WQ_LOCK ? BLOCK_LOCK : BLOCK_ELECT);
    w->on_timeout = on_wait_timeout;
    w->on_cancel = on_wait_cancel;
    w->data = d;
}

/* ---- leases ------------------------------------------------------------------------------ */

static void cmd_lease_grant(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LEASE_GRANT};
    if (!arg_ms(x, 1, false, "ttl", &rec.ttl_ms))
        return;
    apply_result_t res;
    if (cmd_write(x, &rec, &res))
        resp_add_uint(x->out, (uint64_t)res.value);
}

static void cmd_lease_keepalive(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LEASE_KEEPALIVE};
    if (!arg_u64(x, 1, &rec.lease))
        return;
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (res.status == AP_OK)
        resp_add_uint(x->out, (uint64_t)res.value);
    else
        reply_lease_gone(x, rec.lease);
}

/* Write rec and answer 1 if it changed something, 0 if it did not (a stale
 * token, an ended lease); nothing more if cmd_write answered already. */
static void write_answer(cmd_ctx_t *x, record_t *rec)
{
    apply_result_t res;
    if (cmd_write(x, rec, &res))
        resp_add_int(x->out, res.status == AP_OK ? 1 : 0);
}

static void cmd_lease_revoke(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LEASE_REVOKE};
    if (!arg_u64(x, 1, &rec.lease))
        return;
    write_answer(x, &rec);
}

static void cmd_lease_ttl(cmd_ctx_t *x)
{
    uint64_t id, rem;
    size_t nkeys;
    if (!arg_u64(x, 1, &id))
        return;
    if (!coord_lease_ttl(cst(x), id, x->srv->now_ms, &rem, &nkeys)) {
        reply_lease_gone(x, id);
        return;
    }
    resp_add_array(x->out, 2);
    resp_add_uint(x->out, rem);
    resp_add_uint(x->out, nkeys);
}

/* ---- locks -------------------------------------------------------------------------------- */

/* LOCK.ACQUIRE name ttl [WAIT ms] [LEASE id] */
static void cmd_lock_acquire(cmd_ctx_t *x)
{
    uint64_t ttl, wait_ms = 0, lease = 0;
    bool has_wait = false, has_lease = false;
    if (!arg_u64(x, 2, &ttl))
        return;
    for (size_t i = 3; i < x->argc; i++) {
        if (arg_is(x, i, "WAIT") && i + 1 < x->argc && !has_wait) {
            if (!arg_ms(x, ++i, true, "WAIT", &wait_ms))
                return;
            has_wait = true;
        } else if (arg_is(x, i, "LEASE") && i + 1 < x->argc && !has_lease) {
            if (!arg_u64(x, ++i, &lease))
                return;
            has_lease = lease != 0;
        } else {
            reply_syntax(x);
            return;
        }
    }
    /* ttl 0 means "as long as the lease": only with a lease. */
    if (!arg_ms(x, 2, has_lease, "ttl", &ttl) || !arg_name_ok(x, 1))
        return;
    coord_cmd_t *cc = x->srv->coordcmd;
    const resp_arg_t *name = &x->argv[1];
    sweep(cc);
    if (has_lease && !coord_lease_live(cst(x), lease, x->srv->now_ms)) {
        reply_lease_gone(x, lease);
        return;
    }
    waitq_t *q = waitq_find(cc, WQ_LOCK, name->ptr, name->len);
    if (q == NULL || q->list.len == 0) {
        record_t rec = {.type = REC_LOCK_ACQUIRE, .key = name->ptr, .klen = (uint32_t)name->len, .ttl_ms = ttl,
                        .lease = lease};
        apply_result_t res;
        if (!cmd_write(x, &rec, &res))
            return;
        if (res.status == AP_OK) {
            resp_add_uint(x->out, (uint64_t)res.value);
            return;
        }
        if (res.status == AP_NOTFOUND) {
            reply_lease_gone(x, lease);
            return;
        }
    }
    /* Held, or others wait before us. */
    if (wait_ms == 0) {
        resp_add_null(x->out, x->proto);
        return;
    }
    park(x, waitq_get(cc, WQ_LOCK, name->ptr, name->len), wait_ms, ttl, lease, false, NULL);
}

static bool lock_args(cmd_ctx_t *x, uint64_t *token)
{
    return arg_name_ok(x, 1) && arg_u64(x, 2, token);
}

static void cmd_lock_release(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LOCK_RELEASE, .key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len};
    if (!lock_args(x, &rec.token))
        return;
    write_answer(x, &rec);
}

static void cmd_lock_extend(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LOCK_EXTEND, .key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len};
    if (!lock_args(x, &rec.token) || !arg_ms(x, 3, false, "ttl", &rec.ttl_ms))
        return;
    write_answer(x, &rec);
}

static void cmd_lock_info(cmd_ctx_t *x)
{
    if (!arg_name_ok(x, 1))
        return;
    coord_lock_info_t li;
    const resp_arg_t *name = &x->argv[1];
    waitq_t *q = waitq_find(x->srv->coordcmd, WQ_LOCK, name->ptr, name->len);
    resp_add_array(x->out, 3);
    if (coord_lock_info(cst(x), name->ptr, name->len, x->srv->now_ms, &li)) {
        resp_add_uint(x->out, li.token);
        resp_add_uint(x->out, li.remaining_ms);
    } else {
        resp_add_null(x->out, x->proto);
        resp_add_uint(x->out, 0);
    }
    resp_add_uint(x->out, q ? q->list.len : 0);
}

static void cmd_lock_check(cmd_ctx_t *x)
{
    uint64_t token;
    if (!lock_args(x, &token))
        return;
    resp_add_int(x->out, coord_lock_check(cst(x), x->argv[1].ptr, x->argv[1].len, token, x->srv->now_ms));
}

/* ---- elections --------------------------------------------------------------------------- */

/* ELECT.CAMPAIGN name value ttl [WAIT ms] [HANDOVER] */
static void cmd_elect_campaign(cmd_ctx_t *x)
{
    uint64_t ttl, wait_ms = 0;
    bool has_wait = false, handover = false;
    for (size_t i = 4; i < x->argc; i++) {
        if (arg_is(x, i, "WAIT") && i + 1 < x->argc && !has_wait) {
            if (!arg_ms(x, ++i, true, "WAIT", &wait_ms))
                return;
            has_wait = true;
        } else if (arg_is(x, i, "HANDOVER") && !handover) {
            handover = true;
        } else {
            reply_syntax(x);
            return;
        }
    }
    if (!arg_name_ok(x, 1) || !arg_value_ok(x, 2) || !arg_ms(x, 3, false, "ttl", &ttl))
        return;
    coord_cmd_t *cc = x->srv->coordcmd;
    const resp_arg_t *name = &x->argv[1];
    sweep(cc);
    waitq_t *q = waitq_find(cc, WQ_ELECT, name->ptr, name->len);
    if (q == NULL || q->list.len == 0) {
        record_t rec = {.type = REC_ELECT_CAMPAIGN, .key = name->ptr, .klen = (uint32_t)name->len,
                        .val = x->argv[2].ptr, .vlen = (uint32_t)x->argv[2].len, .ttl_ms = ttl};
        apply_result_t res;
        if (!cmd_write(x, &rec, &res))
            return;
        if (res.status == AP_OK) {
            reply_campaign(x, handover, (uint64_t)res.value, res.data, res.dlen);
            return;
        }
    }
    /* Led, or other candidates queue before us. No WAIT: wait as long as it
     * takes (a campaign answers once it leads); WAIT 0: do not wait. */
    if (has_wait && wait_ms == 0) {
        resp_add_null(x->out, x->proto);
        return;
    }
    park(x, waitq_get(cc, WQ_ELECT, name->ptr, name->len), wait_ms, ttl, 0, handover, &x->argv[2]);
}

static void cmd_elect_leader(cmd_ctx_t *x)
{
    coord_leader_t ld;
    if (!arg_name_ok(x, 1))
        return;
    if (!coord_elect_leader(cst(x), x->argv[1].ptr, x->argv[1].len, x->srv->now_ms, &ld)) {
        resp_add_null(x->out, x->proto);
        return;
    }
    resp_add_array(x->out, 2);
    resp_add_bulk(x->out, ld.value, ld.vlen);
    resp_add_uint(x->out, ld.term);
}

static void cmd_elect_proclaim(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_ELECT_PROCLAIM, .key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len,
                    .val = x->argv[3].ptr, .vlen = (uint32_t)x->argv[3].len};
    if (!lock_args(x, &rec.token) || !arg_value_ok(x, 3))
        return;
    write_answer(x, &rec);
}

static void cmd_elect_keepalive(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_ELECT_KEEPALIVE, .key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len};
    if (!lock_args(x, &rec.token))
        return;
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (res.status == AP_OK)
        resp_add_uint(x->out, (uint64_t)res.value);
    else
        reply_notholder(x, "term", rec.token);
}

/* ELECT.RESIGN name term [HANDOVER value] */
static void cmd_elect_resign(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_ELECT_RESIGN, .key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len};
    if (!lock_args(x, &rec.token))
        return;
    if (x->argc == 5 && arg_is(x, 3, "HANDOVER")) {
        if (!arg_value_ok(x, 4))
            return;
        rec.flags |= REC_F_HANDOVER;
        rec.val = x->argv[4].ptr;
        rec.vlen = (uint32_t)x->argv[4].len;
    } else if (x->argc != 3) {
        reply_syntax(x);
        return;
    }
    write_answer(x, &rec);
}

/* ELECT.OBSERVE name: the observer id, then ["leader", name, term, value]
 * now and on every change. */
static void cmd_elect_observe(cmd_ctx_t *x)
{
    conn_t *c = x->conn;
    server_t *s = x->srv;
    if (!arg_name_ok(x, 1))
        return;
    if (c->nwatches >= (size_t)s->cfg.max_watches_per_client) {
        reply_errf(x, "LIMIT this connection has %zu watches (max-watches-per-client)", c->nwatches);
        return;
    }
    const resp_arg_t *name = &x->argv[1];
    ordo_htab_t *t = &s->coordcmd->observed;
    uint64_t h = ordo_htab_hash(t, name->ptr, name->len);
    obs_group_t *g = (obs_group_t *)ordo_htab_find(t, h, name->ptr, name->len);
    if (g == NULL) {
        g = ordo_xcalloc(1, sizeof *g + (name->len ? name->len : 1));
        g->nlen = name->len;
        memcpy(g->name, name->ptr, name->len);
        ordo_htab_insert(t, &g->node, h);
    }
    observer_t *o = ordo_xcalloc(1, sizeof *o);
    o->id = ++s->next_watch_id;
    o->conn = c;
    o->group = g;
    o->gnext = g->head;
    if (g->head)
        g->head->gprev = o;
    g->head = o;
    o->cnext = c->observers;
    if (c->observers)
        c->observers->cprev = o;
    c->observers = o;
    c->nwatches++;
    resp_add_uint(x->out, o->id);
    coord_leader_t ld;
    if (coord_elect_leader(cst(x), name->ptr, name->len, s->now_ms, &ld))
        push_leader(c, name->ptr, name->len, ld.term, ld.value, ld.vlen);
    else
        push_leader(c, name->ptr, name->len, 0, NULL, 0);
}

/* ---- registration ---------------------------------------------------------------------- */

static const cmd_def_t coord_cmds[] = {
    {"LEASE.GRANT", 2, CMD_WRITE, cmd_lease_grant, "LEASE.GRANT ttl: the lease id"},
    {"LEASE.KEEPALIVE", 2, CMD_WRITE, cmd_lease_keepalive, "LEASE.KEEPALIVE id: remaining ms, or -NOTFOUND"},
    {"LEASE.REVOKE", 2, CMD_WRITE, cmd_lease_revoke, "LEASE.REVOKE id: 1/0"},
    {"LEASE.TTL", 2, 0, cmd_lease_ttl, "LEASE.TTL id: [remaining ms, attached keys], or -NOTFOUND"},
    {"LOCK.ACQUIRE", -3, CMD_WRITE, cmd_lock_acquire,
     "LOCK.ACQUIRE name ttl [WAIT ms] [LEASE id]: the fencing token, or nil"},
    {"LOCK.RELEASE", 3, CMD_WRITE, cmd_lock_release, "LOCK.RELEASE name token: 1/0"},
    {"LOCK.EXTEND", 4, CMD_WRITE, cmd_lock_extend, "LOCK.EXTEND name token ttl: 1/0"},
    {"LOCK.INFO", 2, 0, cmd_lock_info, "LOCK.INFO name: [token or nil, remaining ms, waiters]"},
    {"LOCK.CHECK", 3, 0, cmd_lock_check, "LOCK.CHECK name token: 1 if token holds the lock now"},
    {"ELECT.CAMPAIGN", -4, CMD_WRITE, cmd_elect_campaign,
     "ELECT.CAMPAIGN name value ttl [WAIT ms] [HANDOVER]: the term (or [term, handover]), or nil"},
    {"ELECT.LEADER", 2, 0, cmd_elect_leader, "ELECT.LEADER name: [value, term] or nil"},
    {"ELECT.PROCLAIM", 4, CMD_WRITE, cmd_elect_proclaim, "ELECT.PROCLAIM name term value: 1/0"},
    {"ELECT.KEEPALIVE", 3, CMD_WRITE, cmd_elect_keepalive, "ELECT.KEEPALIVE name term: remaining ms, or -NOTHOLDER"},
    {"ELECT.RESIGN", -3, CMD_WRITE, cmd_elect_resign, "ELECT.RESIGN name term [HANDOVER value]: 1/0"},
    {"ELECT.OBSERVE", 2, CMD_WATCHMODE, cmd_elect_observe,
     "ELECT.OBSERVE name: the observer id, then [\"leader\", name, term, value] pushes"},
};

void cmd_coord_register(server_t *s)
{
    coord_cmd_t *cc = ordo_xcalloc(1, sizeof *cc);
    if (ordo_htab_init(&cc->lockq, waitq_eq) != 0 || ordo_htab_init(&cc->electq, waitq_eq) != 0 ||
        ordo_htab_init(&cc->observed, group_eq) != 0) {
        fprintf(stderr, "ordod: out of memory\n");
        abort();
    }
    s->coordcmd = cc;
    cmd_register(s, coord_cmds, sizeof coord_cmds / sizeof coord_cmds[0]);
    core_set_coord_cb(s->core, on_coord_event, s);
}

void cmd_coord_start(server_t *s)
{
    coord_cmd_t *cc = s->coordcmd;
    uv_timer_init(s->loop, &cc->timer);
    cc->timer.data = s;
    cc->timer_on = true;
    cmd_coord_schedule(s);
}

void cmd_coord_close_handles(server_t *s)
{
    coord_cmd_t *cc = s->coordcmd;
    if (cc->timer_on) {
        uv_close((uv_handle_t *)&cc->timer, NULL);
        cc->timer_on = false;
    }
}

static void free_node(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

size_t cmd_coord_bytes(const server_t *s)
{
    const coord_cmd_t *cc = s->coordcmd;
    return coord_bytes(core_coord(s->core)) + (cc ? cc->wait_bytes : 0);
}

void cmd_coord_destroy(server_t *s)
{
    coord_cmd_t *cc = s->coordcmd;
    if (cc == NULL)
        return;
    /* Connections are closed by now: no waiter or observer is left. */
    ordo_htab_foreach(&cc->lockq, free_node, NULL);
    ordo_htab_foreach(&cc->electq, free_node, NULL);
    ordo_htab_foreach(&cc->observed, free_node, NULL);
    ordo_htab_destroy(&cc->lockq);
    ordo_htab_destroy(&cc->electq);
    ordo_htab_destroy(&cc->observed);
    free(cc);
    s->coordcmd = NULL;
}
