/*
 * coord_wait.c -- the writer's side of leases, locks and elections: who
 * waits on which lock or election, serving them when a record frees it,
 * the ELECT.OBSERVE observers (and the Q.WATCH observers of queues, which
 * share their bookkeeping: a watch id, the connection's list, KV.UNWATCH),
 * and the timer that ends holdings on time.
 * cmd_coord.c parses the commands, makes the clients' records and renders
 * their outcomes; what happens later, when a record or a deadline frees
 * something, happens here, and is told to the client as an outcome
 * (outcome.h) through the server's answer hook: never RESP.
 *
 * Waiters. LOCK.ACQUIRE WAIT and ELECT.CAMPAIGN park their connection
 * (block.h) on a FIFO wait list, one per lock name and one per election
 * name (a waitq_t in a keyed table). A newcomer never overtakes a waiter:
 * if the list is not empty it queues behind it (or, without WAIT, gets nil)
 * without trying. When the core reports COORD_EV_LOCK_FREE or
 * COORD_EV_VACANT, the callback only notes the wait list as pending: no
 * record may be applied inside another record's apply or inside the event
 * callback. coord_wait_after_apply(), which the door calls once each
 * record's apply has returned, then serves the pending lists: for each,
 * one acquire / campaign record for the first waiter. So one release
 * wakes exactly one waiter (no herd); the grant is a record of its own, at
 * its own revision, and replay needs no knowledge of who waited. A waiter
 * whose LEASE has ended gets -NOTFOUND and the next one is tried; a waiter
 * whose WAIT runs out gets nil (block.c's timer); a waiter that
 * disconnects leaves the list (on_cancel), and so does one answered
 * -READONLY when the log fails (block.c; a newcomer is refused then
 * instead of parked). Wait lists that became empty are freed by a sweep at the next safe point (their waiter may be unlinked
 * only after our callback returns).
 *
 * Memory. Parked waiters hold their request (name, value) and a wait list
 * per lock / election name; cc->wait_bytes counts them, each waiter
 * charged for its request and its list (O(1) per park and wake; the
 * figure is 0 whenever nobody waits) and coord_wait_bytes() adds them to
 * the state's coord_bytes(): INFO's used_memory_coord, counted by max-memory-bytes. A
 * newcomer that would park past the limit gets -LIMIT instead.
 *
 * Observers. ELECT.OBSERVE registers an observer on an election name; the
 * LEADER / VACANT events are given to every observer as they are applied
 * (telling a client is not applying a record, so this happens inside the
 * callback). Each observer is also on its client's list, which the
 * command layer owns and hands in (coord_wait_observe(),
 * coord_wait_unobserve()); it counts them as watches: against
 * max-watches-per-client, for RESP2 watch mode, and KV.UNWATCH removes them.
 *
 * Time. Deadlines (leases, locks, leaderships) are coord state; the writer
 * owns one timer (timer.h) at coord_next_deadline() and, when it fires, applies a
 * REC_COORD_EXPIRE record for everything coord_due() names at the writer's
 * clock. cmd_dispatch() does the same before each command, so a command
 * never sees a holding whose expiry record is merely late. Expiry is never
 * early (apply re-checks deadline <= the record's time, and the writer
 * stamps expire records only once its ms clock has passed the deadline,
 * see coord_wait_expire_due()); it is late by 1 ms of clock rounding plus
 * the timer's resolution (1 ms) plus the event loop's latency (the batch of
 * commands being processed when the deadline passes), and a watcher of a
 * lease-attached key additionally waits for the log sync under
 * `fsync always`.
 */
#include "coord_wait.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "block.h"
#include "core/coord.h"
#include "turn.h"

#define CONTAINER_OF(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* The waiters of one lock or one election. */
typedef struct waitq_s {
    ordo_hnode_t node;
    wait_list_t list;
    int kind;                  /* COORD_WAIT_LOCK / COORD_WAIT_ELECT */
    ordo_list_node_t pending_ln; /* in cc->pending: its lock / election became free */
    bool swept;                /* in cc->sweep: may be empty, free it later */
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

/* One ELECT.OBSERVE, or one Q.WATCH (queue: its group is in qwatched,
 * and key, if has_key, filters the events by message key). */
typedef struct observer_s {
    uint64_t id;               /* from the watch id counter: KV.UNWATCH id */
    struct conn_s *client;     /* opaque: handed to hooks.answer */
    ordo_list_t *client_list;  /* the client's list of observers (the command layer's) */
    obs_group_t *group;
    ordo_list_node_t gln;      /* in group->observers */
    ordo_list_node_t cln;      /* in *client_list */
    bool queue;
    bool has_key;
    size_t klen;
    char *key;
} observer_t;

struct obs_group_s {
    ordo_hnode_t node;
    ordo_list_t observers;     /* observer_t by gln, newest first */
    size_t nlen;
    char name[];
};

typedef struct coord_waits_s {
    ordo_htab_t lockq;         /* lock name -> waitq_t */
    ordo_htab_t electq;        /* election name -> waitq_t */
    ordo_htab_t observed;      /* election name -> obs_group_t */
    ordo_htab_t qwatched;      /* queue name -> obs_group_t (Q.WATCH) */
    ordo_list_t qhist;         /* qhist_t, oldest first: every queue's recent events */
    size_t qhist_bytes;        /* their cost, at most queue-watch-history-bytes */
    uint64_t qhist_floor;      /* the history holds every event with a revision above this */
    ordo_list_t pending;       /* waitq_t by pending_ln, in the order they became free */
    waitq_t *sweep;
    bool serving;              /* inside serve_pending(): no re-entry */
    writer_timer_t timer;      /* at coord_next_deadline(), from coord_wait_start() */
    size_t wait_bytes;         /* parked waiters' requests and wait lists (see Memory) */
} coord_waits_t;

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

static ordo_htab_t *wq_table(coord_waits_t *cc, int kind) { return kind == COORD_WAIT_LOCK ? &cc->lockq : &cc->electq; }

static waitq_t *waitq_find(coord_waits_t *cc, int kind, const void *name, size_t nlen)
{
    ordo_htab_t *t = wq_table(cc, kind);
    return (waitq_t *)ordo_htab_find(t, ordo_htab_hash(t, name, nlen), name, nlen);
}

static waitq_t *waitq_get(coord_waits_t *cc, int kind, const void *name, size_t nlen)
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
static void waitq_maybe_empty(coord_waits_t *cc, waitq_t *q)
{
    if (q->swept)
        return;
    q->swept = true;
    q->snext = cc->sweep;
    cc->sweep = q;
}

/* Free the wait lists that ended up empty. Called only where no waiter is
 * being timed out or served (a command handler, the end of serving). */
static void sweep(coord_waits_t *cc)
{
    while (cc->sweep != NULL) {
        waitq_t *q = cc->sweep;
        cc->sweep = q->snext;
        q->swept = false;
        if (q->list.len == 0 && !ordo_list_linked(&q->pending_ln, NULL)) {
            ordo_htab_remove(wq_table(cc, q->kind), &q->node);
            free(q);
        }
    }
}

static waitq_t *waitq_of(waiter_t *w) { return CONTAINER_OF(w->list, waitq_t, list); }

/* ---- replies to parked connections ----------------------------------------------- */

/* Free a waiter's request. */
static void wait_data_free(server_t *s, waiter_t *w)
{
    coord_wait_t *d = w->data;
    if (d != NULL)
        s->writer.coord->wait_bytes -= d->charged;
    free(d);
    w->data = NULL;
}

static void on_wait_cancel(waiter_t *w)
{
    server_t *s = w->srv;
    wait_data_free(s, w);
    waitq_maybe_empty(s->writer.coord, waitq_of(w));
}

static void on_wait_timeout(waiter_t *w, outcome_t *o, char *buf, size_t blen)
{
    (void)buf;
    (void)blen;
    *o = (outcome_t){.kind = OUTCOME_NIL};
    on_wait_cancel(w);
}

void coord_wait_lease_gone_text(char *buf, size_t blen, uint64_t lease)
{
    snprintf(buf, blen, "NOTFOUND lease %llu does not exist or has expired", (unsigned long long)lease);
}

/* Give waiter w its outcome. */
static void finish(server_t *s, waiter_t *w, const outcome_t *o)
{
    wait_data_free(s, w);
    waitq_maybe_empty(s->writer.coord, waitq_of(w));
    block_answer(s, w, o);
}

/* The lock / election of q became free: try its waiters in order until one
 * takes it (one wake-up per release) or it is taken by someone else. */
static void serve_one(server_t *s, waitq_t *q)
{
    while (wait_list_first(&q->list) != NULL && server_readonly(s) == NULL) {
        waiter_t *w = wait_list_first(&q->list);
        coord_wait_t *d = w->data;
        record_t rec;
        apply_result_t res;
        if (q->kind == COORD_WAIT_LOCK) {
            rec = (record_t){.type = REC_LOCK_ACQUIRE,
                             .lock = {.name = q->name, .nlen = (uint32_t)q->nlen, .ttl_ms = d->ttl_ms,
                                      .lease_id = d->lease}};
        } else {
            rec = (record_t){.type = REC_ELECT_CAMPAIGN,
                             .elect = {.name = q->name, .nlen = (uint32_t)q->nlen, .ttl_ms = d->ttl_ms,
                                       .lease_id = d->lease, .val = d->value, .vlen = (uint32_t)d->vlen}};
        }
        if (writer_submit(s, &rec, WRITER_SELF, &res, NULL, 0) != WRITER_APPLIED)
            return; /* refused, or the log refused the grant: nobody may hold that token */
        if (res.status == AP_BUSY)
            return; /* still held: the waiter keeps its place */
        if (res.status == AP_NOTFOUND) {
            char text[WRITER_REFUSAL_MAX];
            coord_wait_lease_gone_text(text, sizeof text, d->lease);
            finish(s, w, &(outcome_t){.kind = OUTCOME_ERROR, .error.text = text});
            continue; /* its lease ended while it waited: the next one */
        }
        outcome_t o;
        if (q->kind == COORD_WAIT_LOCK)
            o = (outcome_t){.kind = OUTCOME_UINT, .uint = res.coord.granted};
        else
            o = (outcome_t){.kind = OUTCOME_CAMPAIGN,
                            .campaign = {.term = res.coord.granted, .handover = d->handover,
                                         .lapsed = res.coord.handover_lapsed, .value = res.coord.handover,
                                         .vlen = res.coord.hlen}};
        finish(s, w, &o);
        return;
    }
}

static void serve_pending(server_t *s)
{
    coord_waits_t *cc = s->writer.coord;
    if (cc->serving)
        return; /* the outer loop below takes what this record added */
    cc->serving = true;
    ordo_list_node_t *n;
    while ((n = ordo_list_pop_front(&cc->pending)) != NULL) {
        waitq_t *q = ORDO_LIST_ENTRY(n, waitq_t, pending_ln);
        serve_one(s, q);
        waitq_maybe_empty(cc, q);
    }
    cc->serving = false;
    s->writer.coord_pending = false;
    sweep(cc);
}

static void note_free(server_t *s, int kind, const char *name, size_t nlen)
{
    coord_waits_t *cc = s->writer.coord;
    waitq_t *q = waitq_find(cc, kind, name, nlen);
    if (q == NULL || q->list.len == 0 || ordo_list_linked(&q->pending_ln, NULL))
        return;
    ordo_list_push_back(&cc->pending, &q->pending_ln);
    s->writer.coord_pending = true;
}

/* ---- observers -------------------------------------------------------------------- */

static void notify_observers(server_t *s, const coord_event_t *ev, uint64_t term)
{
    ordo_htab_t *t = &s->writer.coord->observed;
    obs_group_t *g = (obs_group_t *)ordo_htab_find(t, ordo_htab_hash(t, ev->name, ev->nlen), ev->name, ev->nlen);
    if (g == NULL)
        return;
    outcome_t out = {.kind = OUTCOME_LEADER,
                     .leader = {.name = ev->name, .nlen = ev->nlen, .term = term, .value = ev->value,
                                .vlen = ev->vlen}};
    ORDO_LIST_FOREACH(n, &g->observers) {
        observer_t *o = ORDO_LIST_ENTRY(n, observer_t, gln);
        s->hooks.answer(s, o->client, &out);
    }
}

/* The core's coordination callback: after the core handled the event. */
static void on_coord_event(void *arg, const coord_event_t *ev)
{
    server_t *s = arg;
    switch (ev->type) {
    case COORD_EV_LOCK_FREE:
        note_free(s, COORD_WAIT_LOCK, ev->name, ev->nlen);
        break;
    case COORD_EV_LEADER:
        notify_observers(s, ev, ev->id);
        break;
    case COORD_EV_VACANT:
        notify_observers(s, ev, 0);
        note_free(s, COORD_WAIT_ELECT, ev->name, ev->nlen);
        break;
    default:
        break;
    }
}

static void observer_free(server_t *s, observer_t *o)
{
    obs_group_t *g = o->group;
    ordo_list_remove(&g->observers, &o->gln);
    if (ordo_list_empty(&g->observers)) {
        ordo_htab_remove(o->queue ? &s->writer.coord->qwatched : &s->writer.coord->observed, &g->node);
        free(g);
    }
    ordo_list_remove(o->client_list, &o->cln);
    free(o->key);
    free(o);
}

/* ---- Q.WATCH: a queue's message events ------------------------------------------------ */

/* One retained queue event: queue, key and data bytes follow the struct. */
typedef struct qhist_s {
    ordo_list_node_t ln;       /* in qhist */
    uint64_t rev, id, n;
    uint8_t type;
    bool has_data;             /* data is not NULL (an empty result is a result) */
    uint32_t qlen, klen, dlen;
    char bytes[];
} qhist_t;

static size_t qhist_cost(const qhist_t *h) { return alloc_cost(sizeof *h + h->qlen + h->klen + h->dlen); }

static void qhist_event(const qhist_t *h, queue_event_t *ev)
{
    *ev = (queue_event_t){.type = h->type, .queue = h->bytes, .qlen = h->qlen, .key = h->bytes + h->qlen,
                          .klen = h->klen, .id = h->id, .n = h->n,
                          .data = h->has_data ? h->bytes + h->qlen + h->klen : NULL, .dlen = h->dlen};
}

/* Drop the oldest event of the history; the floor rises to it. */
static void qhist_drop_oldest(coord_waits_t *cc)
{
    qhist_t *old = ORDO_LIST_ENTRY(ordo_list_pop_front(&cc->qhist), qhist_t, ln);
    cc->qhist_bytes -= qhist_cost(old);
    if (old->rev > cc->qhist_floor)
        cc->qhist_floor = old->rev;
    free(old);
}

/* Keep ev (of revision rev) in the bounded history; the oldest events go
 * first, and the floor rises to the last one dropped. */
static void qhist_add(server_t *s, uint64_t rev, const queue_event_t *ev)
{
    coord_waits_t *cc = s->writer.coord;
    size_t max = (size_t)s->cfg.queue_watch_history_bytes;
    if (max == 0) {
        cc->qhist_floor = rev; /* no history: every FROM before now is compacted */
        return;
    }
    size_t dlen = ev->data ? ev->dlen : 0;
    qhist_t *h = ordo_xmalloc(sizeof *h + ev->qlen + ev->klen + dlen);
    *h = (qhist_t){.rev = rev, .id = ev->id, .n = ev->n, .type = (uint8_t)ev->type, .has_data = ev->data != NULL,
                   .qlen = (uint32_t)ev->qlen, .klen = (uint32_t)ev->klen, .dlen = (uint32_t)dlen};
    memcpy(h->bytes, ev->queue, ev->qlen);
    memcpy(h->bytes + ev->qlen, ev->key, ev->klen);
    if (dlen)
        memcpy(h->bytes + ev->qlen + ev->klen, ev->data, dlen);
    ordo_list_push_back(&cc->qhist, &h->ln);
    cc->qhist_bytes += qhist_cost(h);
    while (cc->qhist_bytes > max && !ordo_list_empty(&cc->qhist))
        qhist_drop_oldest(cc);
}

static void qhist_clear(coord_waits_t *cc)
{
    while (!ordo_list_empty(&cc->qhist))
        free(ORDO_LIST_ENTRY(ordo_list_pop_front(&cc->qhist), qhist_t, ln));
    cc->qhist_bytes = 0;
}

static void push_qevent(server_t *s, struct conn_s *c, uint64_t id, uint64_t rev, const queue_event_t *ev)
{
    outcome_t o = {.kind = OUTCOME_QEVENT, .qevent = {.watch_id = id, .rev = rev, .ev = ev}};
    s->hooks.answer(s, c, &o);
}

/* The queue registry's event callback, inside an apply: the event belongs
 * to the record being applied, whose revision is the next one. */
static void on_queue_event(void *arg, const queue_event_t *ev)
{
    server_t *s = arg;
    assert(ev->type >= QUEUE_EV_PUSHED && ev->type <= QUEUE_EV_PARKED);
    uint64_t rev = core_rev(s->core) + 1;
    qhist_add(s, rev, ev);
    ordo_htab_t *t = &s->writer.coord->qwatched;
    if (t->count == 0)
        return;
    obs_group_t *g = (obs_group_t *)ordo_htab_find(t, ordo_htab_hash(t, ev->queue, ev->qlen), ev->queue, ev->qlen);
    if (g == NULL)
        return;
    ORDO_LIST_FOREACH(n, &g->observers) {
        observer_t *o = ORDO_LIST_ENTRY(n, observer_t, gln);
        if (o->has_key && (o->klen != ev->klen || memcmp(o->key, ev->key, o->klen) != 0))
            continue;
        push_qevent(s, o->client, o->id, rev, ev);
    }
}

size_t coord_wait_unobserve(server_t *s, ordo_list_t *observers, uint64_t id)
{
    size_t n = 0;
    ORDO_LIST_FOREACH_SAFE(ln, next, observers) {
        observer_t *o = ORDO_LIST_ENTRY(ln, observer_t, cln);
        assert(o->client_list == observers);
        if (id == 0 || o->id == id) {
            observer_free(s, o);
            n++;
        }
    }
    return n;
}

/* ---- the expiry timer ---------------------------------------------------------------- */

static void on_coord_timer(writer_timer_t *t)
{
    server_t *s = t->data;
    server_tick(s);
    coord_wait_expire_due(s);
    turn_run_resumed(s);
    turn_flush(s);
}

void coord_wait_schedule(server_t *s)
{
    coord_waits_t *cc = s->writer.coord;
    uint64_t next = coord_next_deadline(core_coord(s->core));
    /* Only a writer that makes records ends holdings (apply.h); cluster.c
     * re-arms this when a member starts to lead. */
    if (next == 0 || !writer_makes_records(s))
        writer_timer_stop(&cc->timer);
    else
        writer_timer_arm_earlier(&cc->timer, next); /* one that fires sooner re-arms then */
}

/* End everything due by the writer's clock, one expire record each.
 * "Due" is deadline < now_ms, not <=: the clock is in whole ms, so a
 * holding granted at now_ms began up to 1 ms after it, and its expire
 * record must be stamped at least deadline + 1 to come no earlier than
 * grant + TTL in real time. */
void coord_wait_expire_due(server_t *s)
{
    char stackname[256];
    coord_due_t d;
    while (writer_makes_records(s) && s->now_ms > 0 && coord_due(core_coord(s->core), s->now_ms - 1, &d)) {
        char *name = d.nlen <= sizeof stackname ? stackname : ordo_xmalloc(d.nlen);
        if (d.nlen > 0)
            memcpy(name, d.name, d.nlen); /* apply frees what d.name points into */
        record_t rec = {.type = REC_COORD_EXPIRE,
                        .coord_expire = {.kind = (uint8_t)d.kind, .id = d.id, .name = name, .nlen = (uint32_t)d.nlen}};
        apply_result_t res;
        writer_submit(s, &rec, WRITER_SELF, &res, NULL, 0);
        if (name != stackname)
            free(name);
        if (res.status != AP_OK)
            break; /* coord_due() and expire disagree: never spin */
    }
    coord_wait_schedule(s);
}

void coord_wait_after_apply(server_t *s, bool schedule)
{
    coord_waits_t *cc = s->writer.coord;
    if (cc == NULL)
        return;
    if (!ordo_list_empty(&cc->pending))
        serve_pending(s);
    if (schedule)
        coord_wait_schedule(s);
}

/* Park the current connection on q with the request's arguments; or, if
 * the server is read-only (nothing could grant it) or past
 * max-memory-bytes (the request would grow it), refuse as a write would. */
bool coord_wait_park(server_t *s, struct conn_s *c, int kind, const char *name, size_t nlen, uint64_t wait_ms,
                     uint64_t ttl_ms, uint64_t lease, bool handover, const char *value, size_t vlen, char *refusal,
                     size_t rlen)
{
    waitq_t *q = waitq_get(s->writer.coord, kind, name, nlen);
    if (server_readonly(s) != NULL) {
        snprintf(refusal, rlen, "READONLY the log cannot be written, so writes are refused: %s", server_readonly(s));
        waitq_maybe_empty(s->writer.coord, q);
        return false;
    }
    if (writer_memory_refused(s, refusal, rlen)) {
        waitq_maybe_empty(s->writer.coord, q);
        return false;
    }
    coord_wait_t *d = ordo_xcalloc(1, sizeof *d + (vlen ? vlen : 1));
    /* Charged per waiter: its request and the list it waits on with the
     * name (shared by the list's waiters, and freed lazily by sweep(), so
     * charging it to each waiter keeps the figure exact at every moment). */
    d->charged = alloc_cost(sizeof *d + (vlen ? vlen : 1)) + alloc_cost(sizeof *q + (q->nlen ? q->nlen : 1));
    s->writer.coord->wait_bytes += d->charged;
    d->ttl_ms = ttl_ms;
    d->lease = lease;
    d->handover = handover;
    d->vlen = vlen;
    if (vlen)
        memcpy(d->value, value, vlen);
    /* block.c ends a wait only once the clock is past its deadline, so a
     * WAIT never runs out before wait_ms have passed since the request. */
    waiter_t *w = block_wait(s, c, &q->list, wait_ms ? s->now_ms + wait_ms : 0,
                             q->kind == COORD_WAIT_LOCK ? BLOCK_LOCK : BLOCK_ELECT);
    w->on_timeout = on_wait_timeout;
    w->on_cancel = on_wait_cancel;
    w->data = d;
    return true;
}


/* ---- the handlers' side ---------------------------------------------------------------- */

void coord_wait_sweep(server_t *s) { sweep(s->writer.coord); }

size_t coord_wait_len(server_t *s, int kind, const char *name, size_t nlen)
{
    waitq_t *q = waitq_find(s->writer.coord, kind, name, nlen);
    return q ? q->list.len : 0;
}

static uint64_t observe(server_t *s, ordo_htab_t *t, struct conn_s *c, ordo_list_t *list, const char *name,
                        size_t nlen, observer_t **out)
{
    uint64_t h = ordo_htab_hash(t, name, nlen);
    obs_group_t *g = (obs_group_t *)ordo_htab_find(t, h, name, nlen);
    if (g == NULL) {
        g = ordo_xcalloc(1, sizeof *g + (nlen ? nlen : 1));
        g->nlen = nlen;
        memcpy(g->name, name, nlen);
        ordo_htab_insert(t, &g->node, h);
    }
    observer_t *o = ordo_xcalloc(1, sizeof *o);
    o->id = ++s->next_watch_id;
    o->client = c;
    o->client_list = list;
    o->group = g;
    ordo_list_push_front(&g->observers, &o->gln);
    ordo_list_push_front(list, &o->cln);
    if (out != NULL)
        *out = o;
    return o->id;
}

uint64_t coord_wait_observe(server_t *s, struct conn_s *c, ordo_list_t *list, const char *name, size_t nlen)
{
    return observe(s, &s->writer.coord->observed, c, list, name, nlen, NULL);
}

uint64_t coord_wait_qwatch_floor(const server_t *s) { return s->writer.coord->qhist_floor; }

size_t coord_wait_qwatch_history_bytes(const server_t *s) { return s->writer.coord->qhist_bytes; }

size_t coord_wait_qwatch_catchup(server_t *s, struct conn_s *c, uint64_t id, const char *queue, size_t qlen,
                                 const char *key, size_t klen, uint64_t from)
{
    coord_waits_t *cc = s->writer.coord;
    assert(from >= cc->qhist_floor);
    size_t n = 0;
    ORDO_LIST_FOREACH(ln, &cc->qhist) {
        const qhist_t *h = ORDO_LIST_ENTRY(ln, qhist_t, ln);
        if (h->rev <= from || h->qlen != qlen || memcmp(h->bytes, queue, qlen) != 0 ||
            (key != NULL && (h->klen != klen || memcmp(h->bytes + h->qlen, key, klen) != 0)))
            continue;
        queue_event_t ev;
        qhist_event(h, &ev);
        push_qevent(s, c, id, h->rev, &ev);
        n++;
    }
    return n;
}

uint64_t coord_wait_qwatch(server_t *s, struct conn_s *c, ordo_list_t *list, const char *queue, size_t qlen,
                           const char *key, size_t klen)
{
    observer_t *o;
    uint64_t id = observe(s, &s->writer.coord->qwatched, c, list, queue, qlen, &o);
    o->queue = true;
    if (key != NULL) {
        o->has_key = true;
        o->klen = klen;
        o->key = ordo_xmalloc(klen ? klen : 1);
        memcpy(o->key, key, klen);
    }
    return id;
}

/* ---- life cycle ---------------------------------------------------------------------- */

void coord_wait_init(server_t *s)
{
    coord_waits_t *cc = ordo_xcalloc(1, sizeof *cc);
    if (ordo_htab_init(&cc->lockq, waitq_eq) != 0 || ordo_htab_init(&cc->electq, waitq_eq) != 0 ||
        ordo_htab_init(&cc->observed, group_eq) != 0 || ordo_htab_init(&cc->qwatched, group_eq) != 0) {
        fprintf(stderr, "ordod: out of memory\n");
        abort();
    }
    s->writer.coord = cc;
    core_set_coord_cb(s->core, on_coord_event, s);
    core_set_queue_cb(s->core, on_queue_event, s);
}

void coord_wait_start(server_t *s)
{
    coord_waits_t *cc = s->writer.coord;
    /* Replaying the log after the snapshot made the events of its records
     * again (queue events are not muted during replay), so the history
     * holds every event after the snapshot's revision that still fits:
     * a Q.WATCH FROM taken before a restart resumes across it. Events up
     * to the snapshot were not replayed. */
    if (cc->qhist_floor < s->persist.snapshot_loaded_rev)
        cc->qhist_floor = s->persist.snapshot_loaded_rev;
    while (!ordo_list_empty(&cc->qhist) && ORDO_LIST_ENTRY(cc->qhist.head, qhist_t, ln)->rev <= cc->qhist_floor)
        qhist_drop_oldest(cc);
    writer_timer_init(&cc->timer, s->loop, s, on_coord_timer, s);
    coord_wait_schedule(s);
}

void coord_wait_close_handles(server_t *s)
{
    coord_waits_t *cc = s->writer.coord;
    writer_timer_close(&cc->timer);
}

static void free_node(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

size_t coord_wait_bytes(const server_t *s)
{
    const coord_waits_t *cc = s->writer.coord;
    return coord_bytes(core_coord(s->core)) + (cc ? cc->wait_bytes : 0);
}

void coord_wait_destroy(server_t *s)
{
    coord_waits_t *cc = s->writer.coord;
    if (cc == NULL)
        return;
    /* Connections are closed by now: no waiter or observer is left. */
    ordo_htab_foreach(&cc->lockq, free_node, NULL);
    ordo_htab_foreach(&cc->electq, free_node, NULL);
    ordo_htab_foreach(&cc->observed, free_node, NULL);
    ordo_htab_foreach(&cc->qwatched, free_node, NULL);
    qhist_clear(cc);
    ordo_htab_destroy(&cc->qwatched);
    ordo_htab_destroy(&cc->lockq);
    ordo_htab_destroy(&cc->electq);
    ordo_htab_destroy(&cc->observed);
    free(cc);
    s->writer.coord = NULL;
}
