/*
 * cmd_queue.c -- the Q.* commands: keyed work queues over the wire, their
 * server-side blocking, and the writer's queue timers.
 *
 * Every change to a queue is a record (core.h, REC_Q_*) that enters through
 * cmd_write() / cmd_apply(), so it is logged and replayed; queue.h is the
 * state machine those records drive. This file decides *which* records to
 * make and when, and only it speaks RESP about queues.
 *
 * Blocking. Q.PULL BLOCK, Q.CALL, Q.RESULT BLOCK and Q.PUSH under ONFULL
 * block park their connection (block.h) on a wait list of the queue's name:
 * pullers and pushers each have a FIFO, and callers waiting for one
 * message's fate have a FIFO per message id. A Q.CALL on a full queue under
 * ONFULL block waits twice without resuming in between: among the pushers
 * until its push fits, then (block_move(), same deadline: TIMEOUT bounds
 * the whole call) among the callers of the message it pushed. A record
 * never serves a waiter from inside its apply. After a write returns, serve() looks at the queue:
 * while a pusher is parked and a push now fits, it applies that push; while
 * a puller is parked and a message is deliverable, it applies deliver
 * records for the first puller (the writer decides who gets which delivery,
 * and the log says so), writes the reply and completes the waiter; it
 * loops until neither makes progress. A message's completion (an ack, a
 * NOACK delivery, a dead letter) answers the callers parked on its id.
 * Invariant: after every write, a parked puller means nothing is
 * deliverable and a parked pusher means the queue is full, so a newcomer
 * never overtakes a waiter.
 *
 * Wait lists live as long as someone waits. A waiter leaves its list inside
 * block.c (done, timed out, cancelled), sometimes while its list is still in
 * use, so empty lists are collected later: each leaving marks the list, and
 * gc() frees marked lists that are still empty at the start of every Q.*
 * command and timer turn.
 *
 * Timers. queue.h keeps each queue's deadlines (leases, delays, dedup
 * windows, result retention). One uv timer fires at the earliest; its
 * callback logs one record per due deadline (REC_Q_REDELIVER, PROMOTE,
 * DEDUP_END, RESULT_END) stamped with the writer's clock and serves
 * waiters the record made ready. After a write that may move a deadline
 * earlier, note_timer() re-arms it (O(1): only the written queue's earliest
 * deadline is looked at; a timer that fires early finds nothing due and
 * re-arms from the whole set, O(queues)). Before a command touches a
 * queue, its due deadlines are applied first (catch_up()), as cmd_dispatch
 * expires keys first: the command sees one consistent state, and a push or
 * deliver never promotes delayed messages without a record saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writer/block.h"
#include "cmd.h"
#include "net/conn.h"

/* COUNT of Q.PULL, Q.PEEK and Q.TOPKEYS: one reply stays a bounded size
 * (a thousand messages), and a pull holds the loop for at most this many
 * records. */
#define QCMD_COUNT_MAX 1000
/* Due queue deadlines applied per timer turn before the loop goes back to
 * I/O (the timer re-arms at once if more are due). */
#define QCMD_TIMERS_PER_TURN 4096

/* ---- wait lists -------------------------------------------------------------- */

typedef struct qwait_s qwait_t;

typedef struct idwait_s {
    ordo_hnode_t hnode;       /* in qwait.ids, by id */
    uint64_t id;
    wait_list_t list;         /* Q.CALL / Q.RESULT BLOCK waiters of this message */
    qwait_t *qw;
    struct idwait_s *gc_next;
    bool in_gc;
} idwait_t;

struct qwait_s {
    ordo_hnode_t hnode;       /* in qcmd.waits, by name */
    wait_list_t pullers;
    wait_list_t pushers;
    ordo_htab_t ids;          /* message id -> idwait_t */
    qwait_t *gc_next;
    bool in_gc;
    size_t nlen;
    char name[];
};

typedef struct qcmd_s {
    ordo_htab_t waits;        /* queue name -> qwait_t */
    qwait_t *gc;              /* maybe empty */
    idwait_t *idgc;
    ordo_buf_t scratch;       /* a pull's messages before their count is known */
} qcmd_t;

enum { QW_PULL, QW_PUSH, QW_RESULT };

/* What a parked command waits with (waiter_t.data). Push arguments are
 * copied: the request's bytes leave the input buffer while it waits. */
typedef struct qwaiter_s {
    int kind;
    qwait_t *qw;
    idwait_t *iw;             /* QW_RESULT */
    uint64_t id;              /* QW_RESULT */
    uint64_t timeout_ms;
    uint32_t count;           /* QW_PULL */
    uint64_t lease_ms;        /* QW_PULL */
    bool noack;               /* QW_PULL */
    bool coalesce;            /* QW_PUSH */
    uint64_t delay_ms;        /* QW_PUSH */
    uint32_t klen, plen, dlen;/* QW_PUSH: key, payload, dedup id in bytes */
    bool has_dedup;
    bool call;                /* QW_RESULT: Q.CALL (times out with -TIMEOUT), else Q.RESULT (nil);
                                 QW_PUSH: Q.CALL (waits for the result once pushed) */
    char bytes[];
} qwaiter_t;

static bool qw_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const qwait_t *w = (const qwait_t *)n;
    return w->nlen == len && memcmp(w->name, key, len) == 0;
}

static bool iw_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    return len == sizeof(uint64_t) && memcmp(&((const idwait_t *)n)->id, key, len) == 0;
}

static qwait_t *qw_get(server_t *s, const void *name, size_t nlen, bool create)
{
    qcmd_t *qc = s->qcmd;
    uint64_t h = ordo_htab_hash(&qc->waits, name, nlen);
    qwait_t *w = (qwait_t *)ordo_htab_find(&qc->waits, h, name, nlen);
    if (w != NULL || !create)
        return w;
    w = ordo_xcalloc(1, sizeof *w + nlen);
    if (ordo_htab_init(&w->ids, iw_eq) != 0) {
        fprintf(stderr, "ordod: out of memory\n");
        abort();
    }
    w->nlen = nlen;
    memcpy(w->name, name, nlen);
    ordo_htab_insert(&qc->waits, &w->hnode, h);
    return w;
}

static idwait_t *iw_get(qwait_t *qw, uint64_t id, bool create)
{
    uint64_t h = ordo_htab_hash(&qw->ids, &id, sizeof id);
    idwait_t *w = (idwait_t *)ordo_htab_find(&qw->ids, h, &id, sizeof id);
    if (w != NULL || !create)
        return w;
    w = ordo_xcalloc(1, sizeof *w);
    w->id = id;
    w->qw = qw;
    ordo_htab_insert(&qw->ids, &w->hnode, h);
    return w;
}

static void gc_mark(server_t *s, qwaiter_t *d)
{
    qcmd_t *qc = s->qcmd;
    if (d->iw != NULL && !d->iw->in_gc) {
        d->iw->in_gc = true;
        d->iw->gc_next = qc->idgc;
        qc->idgc = d->iw;
    }
    if (!d->qw->in_gc) {
        d->qw->in_gc = true;
        d->qw->gc_next = qc->gc;
        qc->gc = d->qw;
    }
}

/* Free marked lists that are still empty. Message lists first: freeing
 * the last one can empty its queue's entry (which is marked with it). */
static void gc(server_t *s)
{
    qcmd_t *qc = s->qcmd;
    while (qc->idgc != NULL) {
        idwait_t *iw = qc->idgc;
        qc->idgc = iw->gc_next;
        iw->in_gc = false;
        if (iw->list.len == 0) {
            ordo_htab_remove(&iw->qw->ids, &iw->hnode);
            free(iw);
        }
    }
    while (qc->gc != NULL) {
        qwait_t *qw = qc->gc;
        qc->gc = qw->gc_next;
        qw->in_gc = false;
        if (qw->pullers.len == 0 && qw->pushers.len == 0 && qw->ids.count == 0) {
            ordo_htab_remove(&qc->waits, &qw->hnode);
            ordo_htab_destroy(&qw->ids);
            free(qw);
        }
    }
}

/* The waiter's reply is written: complete it and mark its lists. */
static void finish(server_t *s, waiter_t *w)
{
    qwaiter_t *d = w->data;
    block_done(s, w);
    gc_mark(s, d);
    free(d);
}

static void on_cancel(waiter_t *w)
{
    qwaiter_t *d = w->data;
    gc_mark(w->conn->srv, d);
    free(d);
}

static void on_timeout(waiter_t *w)
{
    qwaiter_t *d = w->data;
    server_t *s = w->conn->srv;
    ordo_buf_t *out = &w->conn->out;
    switch (d->kind) {
    case QW_PULL:
        resp_add_array(out, 0);
        break;
    case QW_PUSH:
        s->stats.errors_total++;
        resp_add_errorf(out, "TIMEOUT queue still full after %llu ms (ONFULL block); nothing was pushed",
                        (unsigned long long)d->timeout_ms);
        break;
    default:
        if (!d->call) {
            resp_add_null(out, w->conn->proto);
            break;
        }
        s->stats.errors_total++;
        resp_add_errorf(out, "TIMEOUT message %llu not done after %llu ms; it stays queued (Q.RESULT fetches it)",
                        (unsigned long long)d->id, (unsigned long long)d->timeout_ms);
        break;
    }
    /* block.c completes the waiter after this returns; d goes with it, and
     * its lists are collected later. */
    gc_mark(s, d);
    w->data = NULL;
    free(d);
}

static waiter_t *park(server_t *s, conn_t *c, wait_list_t *list, uint64_t timeout_ms, bool has_timeout,
                      qwaiter_t *d)
{
    d->timeout_ms = timeout_ms;
    uint64_t deadline = 0;
    if (has_timeout && timeout_ms > 0)
        deadline = timeout_ms > UINT64_MAX - s->now_ms ? UINT64_MAX : s->now_ms + timeout_ms;
    int kind = d->kind == QW_PULL ? BLOCK_PULL : d->call ? BLOCK_CALL : d->kind == QW_PUSH ? BLOCK_PUSH : BLOCK_RESULT;
    waiter_t *w = block_wait(s, c, list, deadline, kind);
    w->on_timeout = on_timeout;
    w->on_cancel = on_cancel;
    w->data = d;
    return w;
}

/* ---- records ------------------------------------------------------------------ */

/* Apply a record the writer decided (not a client's: no memory limit; a
 * parked pusher's push is checked by serve_pushers()), unless the log has
 * failed. Returns true if it changed something. */
static bool q_apply(server_t *s, record_t *rec, apply_result_t *res)
{
    if (s->readonly[0] != '\0') {
        memset(res, 0, sizeof *res);
        res->status = AP_NOOP;
        return false;
    }
    /* A record the log refused changed memory only: it is no success, and
     * nobody may be told it is (the server is read-only from now on). */
    bool stored = cmd_apply(s, rec, res);
    return stored && res->status == AP_OK;
}

static void reply_readonly(cmd_ctx_t *x)
{
    reply_errf(x, "READONLY the log cannot be written, so writes are refused: %s", x->srv->readonly);
}

static bool writable(cmd_ctx_t *x)
{
    if (x->srv->readonly[0] == '\0')
        return true;
    reply_readonly(x);
    return false;
}

/* After a write command that passed writable() applied its records: if
 * the log refused one of them (the server turned read-only meanwhile), the
 * change exists only in memory, so the command answers -READONLY, never 0
 * or an empty array as if nothing had happened. Returns true if it did. */
static bool refused(cmd_ctx_t *x)
{
    if (x->srv->readonly[0] == '\0')
        return false;
    reply_readonly(x);
    return true;
}

static void on_queue_timer(uv_timer_t *t);

static void arm_at(server_t *s, uint64_t due_ms)
{
    if (!s->queue_timer_on || s->stopping)
        return;
    if (s->queue_timer_at_ms != 0 && s->queue_timer_at_ms <= due_ms)
        return;
    uint64_t now = server_now_ms();
    s->queue_timer_at_ms = due_ms ? due_ms : 1;
    /* + 1: a deadline is due once now_ms passes it (queue.h) */
    uv_timer_start(&s->queue_timer, on_queue_timer, due_ms + 1 > now ? due_ms + 1 - now : 0, 0);
}

/* A write to the queue may have made a deadline earlier than the timer. */
static void note_timer(server_t *s, const char *name, size_t nlen)
{
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_timer_t t;
    if (q != NULL && queue_next_timer(q, &t))
        arm_at(s, t.due_ms);
}

static void add_msg(ordo_buf_t *out, const queue_delivery_t *d)
{
    resp_add_array(out, 5);
    resp_add_uint(out, d->id);
    resp_add_bulk(out, d->key, d->klen);
    resp_add_bulk(out, d->payload, d->plen);
    resp_add_uint(out, d->attempt);
    resp_add_uint(out, d->token);
}

/* Write a message's fate to one waiter's connection. fate: QUEUE_FATE_DONE
 * (the kept result, or nil if none was kept), QUEUE_FATE_DEADLETTER, or
 * QUEUE_FATE_NONE (done without a result: nil). */
static void add_fate(server_t *s, conn_t *c, uint64_t id, int fate, const queue_result_t *r)
{
    if (fate == QUEUE_FATE_DEADLETTER) {
        s->stats.errors_total++;
        resp_add_errorf(&c->out, "DEADLETTER message %llu exhausted its attempts", (unsigned long long)id);
    } else if (fate == QUEUE_FATE_DONE && r != NULL && r->fate == QUEUE_FATE_DONE) {
        resp_add_bulk(&c->out, r->result, r->rlen);
    } else {
        resp_add_null(&c->out, c->proto);
    }
}

/* Message id of queue name is finished: answer everyone parked on it. */
static void complete_id(server_t *s, const char *name, size_t nlen, uint64_t id, int fate)
{
    qwait_t *qw = qw_get(s, name, nlen, false);
    idwait_t *iw = qw ? iw_get(qw, id, false) : NULL;
    if (iw == NULL || iw->list.len == 0)
        return;
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_result_t r = {0};
    if (q != NULL && fate == QUEUE_FATE_DONE)
        queue_result(q, id, &r);
    while (iw->list.head != NULL) {
        waiter_t *w = iw->list.head;
        add_fate(s, w->conn, id, fate, &r);
        finish(s, w);
    }
}

/* Deliver up to count messages (one record each) into out; returns how many. */
static size_t deliver(server_t *s, const char *name, size_t nlen, uint32_t count, uint64_t lease_ms, bool noack,
                      ordo_buf_t *out)
{
    size_t n = 0;
    for (; n < count; n++) {
        record_t rec = {.type = REC_Q_DELIVER, .name = name, .nlen = (uint32_t)nlen, .ttl_ms = lease_ms,
                        .flags = noack ? REC_F_NOACK : 0};
        apply_result_t res;
        if (!q_apply(s, &rec, &res))
            break;
        add_msg(out, &res.qd);
        if (noack)
            complete_id(s, name, nlen, res.qd.id, QUEUE_FATE_NONE);
    }
    if (n > 0)
        note_timer(s, name, nlen);
    return n;
}

static void push_record(record_t *rec, const char *name, size_t nlen, const qwaiter_t *d)
{
    memset(rec, 0, sizeof *rec);
    rec->type = REC_Q_PUSH;
    rec->name = name;
    rec->nlen = (uint32_t)nlen;
    rec->key = d->bytes;
    rec->klen = d->klen;
    rec->val = d->bytes + d->klen;
    rec->vlen = d->plen;
    rec->aux = d->has_dedup ? d->bytes + d->klen + d->plen : NULL;
    rec->alen = d->dlen;
    rec->ttl_ms = d->delay_ms;
    rec->flags = d->coalesce ? REC_F_COALESCE : 0;
}

static void reply_limit(server_t *s, ordo_buf_t *out, const char *name, size_t nlen)
{
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_config_t cfg = {0};
    if (q != NULL)
        queue_config(q, &cfg);
    s->stats.errors_total++;
    resp_add_errorf(out, "LIMIT the key has MAXPERKEY (%u) messages waiting", cfg.maxperkey);
}

/* A Q.CALL parked for room got its push in (res: AP_OK, or AP_NOOP for a
 * repeat of an ID inside the dedup window): it answers a repeat whose first
 * call is done at once, else it waits on the message's callers, with the
 * deadline it had (TIMEOUT bounds the whole call). Runs before the pullers
 * are served, so a NOACK delivery of the message finds it there. */
static void call_pushed(server_t *s, qwait_t *qw, waiter_t *w, const apply_result_t *res)
{
    qwaiter_t *d = w->data;
    uint64_t id = (uint64_t)res->value;
    if (res->status == AP_NOOP) {
        const queue_t *q = queue_get(core_queues(s->core), qw->name, qw->nlen);
        queue_result_t r = {0};
        int fate = q != NULL ? queue_result(q, id, &r) : QUEUE_FATE_NONE;
        if (fate != QUEUE_FATE_NONE) {
            add_fate(s, w->conn, id, fate, &r);
            return; /* the caller finishes it */
        }
    }
    d->kind = QW_RESULT;
    d->id = id;
    d->iw = iw_get(qw, id, true);
    block_move(w, &d->iw->list);
}

/* Does the queue have room for one more message (MAXLEN)? A parked pusher
 * over max-memory-bytes is refused only then: before, it waits as it would. */
static bool has_room(server_t *s, const qwait_t *qw)
{
    const queue_t *q = queue_get(core_queues(s->core), qw->name, qw->nlen);
    if (q == NULL)
        return true;
    queue_len_t l;
    queue_config_t cfg;
    queue_len(q, &l);
    queue_config(q, &cfg);
    return l.waiting + l.delayed < cfg.maxlen;
}

/* Parked pushers (Q.PUSH and Q.CALL), first come first served, while their
 * pushes fit. */
static bool serve_pushers(server_t *s, qwait_t *qw)
{
    bool progress = false;
    while (qw->pushers.head != NULL) {
        waiter_t *w = qw->pushers.head;
        qwaiter_t *d = w->data;
        record_t rec;
        apply_result_t res;
        if (has_room(s, qw) && cmd_memory_refused(s, &w->conn->out)) {
            finish(s, w); /* room, but refused as the push would be if it came now */
            progress = true;
            continue;
        }
        push_record(&rec, qw->name, qw->nlen, d);
        q_apply(s, &rec, &res);
        if (res.status == AP_QFULL || s->readonly[0] != '\0')
            break;
        progress = true;
        if (res.status == AP_QLIMIT)
            reply_limit(s, &w->conn->out, qw->name, qw->nlen);
        else if (d->call)
            call_pushed(s, qw, w, &res);
        else
            resp_add_uint(&w->conn->out, (uint64_t)res.value);
        if (w->list == &qw->pushers)
            finish(s, w);
    }
    if (progress)
        note_timer(s, qw->name, qw->nlen);
    return progress;
}

/* Parked pullers, first come first served, while messages are deliverable. */
static bool serve_pullers(server_t *s, qwait_t *qw)
{
    bool progress = false;
    ordo_buf_t *tmp = &s->qcmd->scratch;
    while (qw->pullers.head != NULL) {
        waiter_t *w = qw->pullers.head;
        qwaiter_t *d = w->data;
        tmp->len = 0;
        size_t n = deliver(s, qw->name, qw->nlen, d->count, d->lease_ms, d->noack, tmp);
        if (n == 0 || s->readonly[0] != '\0')
            break; /* nothing, or deliveries the log refused: the puller keeps waiting */
        resp_add_array(&w->conn->out, n);
        ordo_buf_append(&w->conn->out, tmp->data, tmp->len);
        finish(s, w);
        progress = true;
    }
    return progress;
}

/* After a write to queue name: serve its parked pushers and pullers until
 * neither can move (a delivery makes room; a push makes work). */
static void serve(server_t *s, const char *name, size_t nlen)
{
    qwait_t *qw = qw_get(s, name, nlen, false);
    if (qw == NULL)
        return;
    bool more = true;
    while (more) {
        more = serve_pushers(s, qw);
        more = serve_pullers(s, qw) || more;
    }
}

/* A nack or a lease expiry came back with res->qr: a dead letter finishes
 * the message for its callers and may make the dead-letter queue's
 * pullers' day. */
static void after_retry(server_t *s, const char *name, size_t nlen, const apply_result_t *res)
{
    if (res->qr.kind != QUEUE_RETRY_DEADLETTER)
        return;
    complete_id(s, name, nlen, res->qr.id, QUEUE_FATE_DEADLETTER);
    if (res->qr.dlq != NULL) {
        size_t dlen;
        const char *dn = queue_name(res->qr.dlq, &dlen);
        char *copy = ordo_xmalloc(dlen ? dlen : 1);
        memcpy(copy, dn, dlen);
        serve(s, copy, dlen);
        free(copy);
    }
}

/* ---- timers -------------------------------------------------------------------- */

/* Log the record for one due deadline of q and serve what it readied.
 * Returns false if the record changed nothing (it should not happen: the
 * deadline came from the same state). */
static bool fire(server_t *s, const queue_t *q, const queue_timer_t *t)
{
    size_t nlen;
    const char *qn = queue_name(q, &nlen);
    char stack[256];
    size_t need = nlen + (t->kind == QUEUE_TIMER_DEDUP ? t->dlen : 0);
    char *name = need <= sizeof stack ? stack : ordo_xmalloc(need);
    memcpy(name, qn, nlen); /* the apply may free what q points at */
    record_t rec = {.name = name, .nlen = (uint32_t)nlen};
    switch (t->kind) {
    case QUEUE_TIMER_LEASE:
        rec.type = REC_Q_REDELIVER;
        rec.arg_rev = t->id;
        rec.token = t->token;
        break;
    case QUEUE_TIMER_DELAY:
        rec.type = REC_Q_PROMOTE;
        break;
    case QUEUE_TIMER_DEDUP:
        rec.type = REC_Q_DEDUP_END;
        memcpy(name + nlen, t->dedup_id, t->dlen);
        rec.aux = name + nlen;
        rec.alen = (uint32_t)t->dlen;
        break;
    default:
        rec.type = REC_Q_RESULT_END;
        rec.arg_rev = t->id;
        break;
    }
    apply_result_t res;
    bool ok = q_apply(s, &rec, &res);
    if (ok && rec.type == REC_Q_REDELIVER)
        after_retry(s, name, nlen, &res);
    if (ok && (rec.type == REC_Q_REDELIVER || rec.type == REC_Q_PROMOTE))
        serve(s, name, nlen);
    if (name != stack)
        free(name);
    return ok;
}

/* Apply every deadline due by the writer's clock: of queue only, or of
 * every queue (only == NULL). Returns false if it stopped early. */
static bool run_due(server_t *s, const queue_t *only)
{
    for (int i = 0; i < QCMD_TIMERS_PER_TURN; i++) {
        if (s->readonly[0] != '\0')
            return true; /* could not be logged; deadlines wait for writes to work */
        queue_t *q = NULL;
        queue_timer_t t;
        bool have = only ? queue_next_timer(only, &t) : queue_set_next_timer(core_queues(s->core), &q, &t);
        if (!have || t.due_ms >= s->now_ms)
            return true;
        if (!fire(s, only ? only : q, &t)) {
            if (s->readonly[0] != '\0')
                return true; /* the log refused it */
            fprintf(stderr, "ordod: queue deadline (kind %d, due %llu) changed nothing; retrying later\n", t.kind,
                    (unsigned long long)t.due_ms);
            return false;
        }
    }
    return false;
}

static void on_queue_timer(uv_timer_t *t)
{
    server_t *s = t->data;
    s->queue_timer_at_ms = 0;
    uint64_t now = server_tick(s);
    gc(s);
    bool all = run_due(s, NULL);
    queue_t *q;
    queue_timer_t next;
    if (!all)
        arm_at(s, now + 1);
    else if (s->readonly[0] == '\0' && queue_set_next_timer(core_queues(s->core), &q, &next))
        arm_at(s, next.due_ms);
    conn_run_resumed(s);
    conn_flush_dirty(s);
}

/* Before a command uses queue name: its due deadlines first. Returns
 * false if the log refused one of their records: the state now holds a
 * change the log does not, and the command must not show it (-READONLY). */
static bool catch_up(server_t *s, const char *name, size_t nlen)
{
    gc(s);
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_timer_t t;
    if (q == NULL || s->readonly[0] != '\0' || !queue_next_timer(q, &t) || t.due_ms >= s->now_ms)
        return true;
    run_due(s, q);
    return s->readonly[0] == '\0';
}

void cmd_queue_init(server_t *s)
{
    uv_timer_init(s->loop, &s->queue_timer);
    s->queue_timer.data = s;
    s->queue_timer_on = true;
    queue_t *q;
    queue_timer_t t;
    if (queue_set_next_timer(core_queues(s->core), &q, &t))
        arm_at(s, t.due_ms); /* deadlines recovered from the log */
}

void cmd_queue_close_handles(server_t *s)
{
    if (!s->queue_timer_on)
        return;
    uv_timer_stop(&s->queue_timer);
    uv_close((uv_handle_t *)&s->queue_timer, NULL);
}

static void free_iw(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

static void free_qw(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    qwait_t *qw = (qwait_t *)n;
    ordo_htab_foreach(&qw->ids, free_iw, NULL);
    ordo_htab_destroy(&qw->ids);
    free(qw);
}

void cmd_queue_destroy(server_t *s)
{
    qcmd_t *qc = s->qcmd;
    if (qc == NULL)
        return;
    ordo_htab_foreach(&qc->waits, free_qw, NULL);
    ordo_htab_destroy(&qc->waits);
    ordo_buf_free(&qc->scratch);
    free(qc);
    s->qcmd = NULL;
}

/* ---- argument helpers ------------------------------------------------------------ */

/* Times in ms are at most ten years: now + ms never overflows, and a
 * larger value is a client's mistake. */
#define QCMD_MS_MAX (10ull * 366 * 24 * 3600 * 1000)

static bool arg_ms(cmd_ctx_t *x, size_t i, uint64_t *out)
{
    if (i >= x->argc) {
        reply_syntax(x);
        return false;
    }
    if (!arg_u64(x, i, out))
        return false;
    if (*out > QCMD_MS_MAX) {
        reply_errf(x, "ERR %llu ms is more than ten years", (unsigned long long)*out);
        return false;
    }
    return true;
}

static bool arg_count(cmd_ctx_t *x, size_t i, uint32_t *out)
{
    uint64_t n;
    if (i >= x->argc) {
        reply_syntax(x);
        return false;
    }
    if (!arg_u64(x, i, &n))
        return false;
    if (n < 1 || n > QCMD_COUNT_MAX) {
        reply_errf(x, "ERR COUNT must be 1..%d", QCMD_COUNT_MAX);
        return false;
    }
    *out = (uint32_t)n;
    return true;
}

/* The queue name (argument 1): within max-name-bytes and not empty. */
static bool queue_arg_ok(cmd_ctx_t *x)
{
    if (!arg_name_ok(x, 1))
        return false;
    if (x->argv[1].len == 0) {
        reply_err(x, "ERR the queue name is empty");
        return false;
    }
    return true;
}

#define QNAME(x) (x)->argv[1].ptr, (x)->argv[1].len

static qwaiter_t *waiter_data(int kind, qwait_t *qw, size_t extra)
{
    qwaiter_t *d = ordo_xcalloc(1, sizeof *d + extra);
    d->kind = kind;
    d->qw = qw;
    return d;
}

/* Park x's connection until message id of the queue is done. */
static void park_result(cmd_ctx_t *x, uint64_t id, uint64_t timeout_ms, bool has_timeout, bool call)
{
    qwait_t *qw = qw_get(x->srv, QNAME(x), true);
    qwaiter_t *d = waiter_data(QW_RESULT, qw, 0);
    d->call = call;
    d->iw = iw_get(qw, id, true);
    d->id = id;
    park(x->srv, x->conn, &d->iw->list, timeout_ms, has_timeout, d);
}

/* Reply with message id's fate if it has one; false if it is not done. */
static bool reply_fate_now(cmd_ctx_t *x, uint64_t id)
{
    const queue_t *q = queue_get(core_queues(x->srv->core), QNAME(x));
    queue_result_t r = {0};
    int fate = q != NULL ? queue_result(q, id, &r) : QUEUE_FATE_NONE;
    if (fate == QUEUE_FATE_NONE)
        return false;
    add_fate(x->srv, x->conn, id, fate, &r);
    return true;
}

/* ---- push, call --------------------------------------------------------------------- */

typedef struct push_args_s {
    size_t dedup_arg;         /* index of the ID value, 0 if none */
    bool coalesce;
    uint64_t delay_ms;
    uint64_t timeout_ms;
    bool has_timeout;
} push_args_t;

static bool parse_push_opts(cmd_ctx_t *x, bool call, push_args_t *a)
{
    memset(a, 0, sizeof *a);
    for (size_t i = 4; i < x->argc; i++) {
        if (arg_is(x, i, "ID") && i + 1 < x->argc && a->dedup_arg == 0) {
            a->dedup_arg = ++i;
            if (!arg_name_ok(x, i))
                return false;
        } else if (!call && arg_is(x, i, "COALESCE")) {
            a->coalesce = true;
        } else if (!call && arg_is(x, i, "DELAY")) {
            if (!arg_ms(x, ++i, &a->delay_ms))
                return false;
        } else if (arg_is(x, i, "TIMEOUT") && !a->has_timeout) {
            if (!arg_ms(x, ++i, &a->timeout_ms))
                return false;
            a->has_timeout = true;
        } else {
            reply_syntax(x);
            return false;
        }
    }
    return true;
}

static void push_from_args(record_t *rec, cmd_ctx_t *x, const push_args_t *a)
{
    memset(rec, 0, sizeof *rec);
    rec->type = REC_Q_PUSH;
    rec->name = x->argv[1].ptr;
    rec->nlen = (uint32_t)x->argv[1].len;
    rec->key = x->argv[2].ptr;
    rec->klen = (uint32_t)x->argv[2].len;
    rec->val = x->argv[3].ptr;
    rec->vlen = (uint32_t)x->argv[3].len;
    if (a->dedup_arg) {
        rec->aux = x->argv[a->dedup_arg].ptr;
        rec->alen = (uint32_t)x->argv[a->dedup_arg].len;
    }
    rec->ttl_ms = a->delay_ms;
    rec->flags = a->coalesce ? REC_F_COALESCE : 0;
}

/* A full queue under ONFULL block: wait, with a copy of the push; a call
 * then waits for its result (call_pushed()). */
static void park_push(cmd_ctx_t *x, const record_t *rec, const push_args_t *a, bool call)
{
    qwait_t *qw = qw_get(x->srv, QNAME(x), true);
    qwaiter_t *d = waiter_data(QW_PUSH, qw, (size_t)rec->klen + rec->vlen + rec->alen);
    d->klen = rec->klen;
    d->plen = rec->vlen;
    d->dlen = rec->alen;
    d->has_dedup = rec->aux != NULL;
    d->coalesce = a->coalesce;
    d->delay_ms = a->delay_ms;
    d->call = call;
    if (rec->klen)
        memcpy(d->bytes, rec->key, rec->klen);
    if (rec->vlen)
        memcpy(d->bytes + rec->klen, rec->val, rec->vlen);
    if (rec->alen)
        memcpy(d->bytes + rec->klen + rec->vlen, rec->aux, rec->alen);
    park(x->srv, x->conn, &qw->pushers, a->timeout_ms, a->has_timeout, d);
}

static bool onfull_block(server_t *s, const char *name, size_t nlen)
{
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_config_t cfg;
    if (q == NULL)
        return false;
    queue_config(q, &cfg);
    return cfg.onfull == QUEUE_ONFULL_BLOCK;
}

static void reply_full(cmd_ctx_t *x)
{
    const queue_t *q = queue_get(core_queues(x->srv->core), QNAME(x));
    queue_config_t cfg = {0};
    if (q != NULL)
        queue_config(q, &cfg);
    reply_errf(x, "BUSY the queue is full (MAXLEN %u pending messages)", cfg.maxlen);
}

/* The front half of Q.PUSH and Q.CALL: check the arguments, apply the
 * queue's due timers, make the push record and write it. Returns false
 * (reply written) if it never reached the core. */
static bool push_write(cmd_ctx_t *x, bool call, push_args_t *a, record_t *rec, apply_result_t *res)
{
    if (!queue_arg_ok(x) || !arg_name_ok(x, 2) || !arg_value_ok(x, 3) || !parse_push_opts(x, call, a))
        return false;
    catch_up(x->srv, QNAME(x));
    push_from_args(rec, x, a);
    return cmd_write(x, rec, res);
}

static void cmd_qpush(cmd_ctx_t *x)
{
    push_args_t a;
    record_t rec;
    apply_result_t res;
    if (!push_write(x, false, &a, &rec, &res))
        return;
    switch (res.status) {
    case AP_OK:
    case AP_NOOP: /* a duplicate: the first push's id */
        resp_add_uint(x->out, (uint64_t)res.value);
        break;
    case AP_QLIMIT:
        reply_limit(x->srv, x->out, QNAME(x));
        return;
    default: /* AP_QFULL */
        if (onfull_block(x->srv, QNAME(x)))
            park_push(x, &rec, &a, false);
        else
            reply_full(x);
        return;
    }
    if (res.status == AP_OK) {
        note_timer(x->srv, QNAME(x));
        serve(x->srv, QNAME(x));
    }
}

static void cmd_qcall(cmd_ctx_t *x)
{
    push_args_t a;
    record_t rec;
    apply_result_t res;
    if (!push_write(x, true, &a, &rec, &res))
        return;
    if (res.status == AP_QLIMIT) {
        reply_limit(x->srv, x->out, QNAME(x));
        return;
    }
    if (res.status == AP_QFULL) {
        if (onfull_block(x->srv, QNAME(x)))
            park_push(x, &rec, &a, true);
        else
            reply_full(x);
        return;
    }
    uint64_t id = (uint64_t)res.value;
    /* A repeat (ID inside the window) replays the first call's fate. */
    if (res.status == AP_NOOP && reply_fate_now(x, id))
        return;
    /* Park before serving: a NOACK puller may finish it at once. */
    park_result(x, id, a.timeout_ms, a.has_timeout, true);
    if (res.status == AP_OK) {
        note_timer(x->srv, QNAME(x));
        serve(x->srv, QNAME(x));
    }
}

/* ---- pull, ack, nack, extend -------------------------------------------------------- */

static void cmd_qpull(cmd_ctx_t *x)
{
    uint32_t count = 1;
    uint64_t block_ms = 0, lease_ms = 0;
    bool block = false, noack = false;
    if (!queue_arg_ok(x))
        return;
    for (size_t i = 2; i < x->argc; i++) {
        if (arg_is(x, i, "COUNT")) {
            if (!arg_count(x, ++i, &count))
                return;
        } else if (arg_is(x, i, "BLOCK")) {
            if (!arg_ms(x, ++i, &block_ms))
                return;
            block = true;
        } else if (arg_is(x, i, "LEASE")) {
            if (!arg_ms(x, ++i, &lease_ms))
                return;
            if (lease_ms == 0) {
                reply_err(x, "ERR LEASE must be at least 1 ms");
                return;
            }
        } else if (arg_is(x, i, "NOACK")) {
            noack = true;
        } else {
            reply_syntax(x);
            return;
        }
    }
    if (!writable(x))
        return;
    catch_up(x->srv, QNAME(x));
    ordo_buf_t *tmp = &x->srv->qcmd->scratch;
    tmp->len = 0;
    size_t n = deliver(x->srv, QNAME(x), count, lease_ms, noack, tmp);
    if (refused(x))
        return;
    if (n > 0) {
        resp_add_array(x->out, n);
        ordo_buf_append(x->out, tmp->data, tmp->len);
        serve(x->srv, QNAME(x)); /* deliveries made room for parked pushers */
        return;
    }
    if (!block) {
        resp_add_array(x->out, 0);
        return;
    }
    qwait_t *qw = qw_get(x->srv, QNAME(x), true);
    qwaiter_t *d = waiter_data(QW_PULL, qw, 0);
    d->count = count;
    d->lease_ms = lease_ms;
    d->noack = noack;
    park(x->srv, x->conn, &qw->pullers, block_ms, true, d);
}

/* Q.ACK / Q.NACK / Q.EXTEND: queue id token ... */
static bool id_token(cmd_ctx_t *x, uint64_t *id, uint64_t *token)
{
    return queue_arg_ok(x) && arg_u64(x, 2, id) && arg_u64(x, 3, token);
}

/* The tail of the commands that answer 0 or 1 for one record of the queue
 * named by argv[1]: its due deadlines first, then rec (only if valid: a
 * token 0 never names a delivery), then the reply. Returns whether rec
 * changed something; false also when the log refused a record (the reply
 * is then -READONLY). */
static bool apply_answer(cmd_ctx_t *x, record_t *rec, bool valid, apply_result_t *res)
{
    catch_up(x->srv, QNAME(x));
    bool ok = valid && q_apply(x->srv, rec, res);
    if (refused(x))
        return false;
    resp_add_int(x->out, ok);
    return ok;
}

static void cmd_qack(cmd_ctx_t *x)
{
    uint64_t id, token;
    if (!id_token(x, &id, &token))
        return;
    record_t rec = {.type = REC_Q_ACK, .name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len,
                    .arg_rev = id, .token = token};
    if (x->argc == 6 && arg_is(x, 4, "RESULT")) {
        if (!arg_value_ok(x, 5))
            return;
        rec.flags = REC_F_RESULT;
        rec.val = x->argv[5].ptr;
        rec.vlen = (uint32_t)x->argv[5].len;
    } else if (x->argc != 4) {
        reply_syntax(x);
        return;
    }
    apply_result_t res;
    if (!writable(x) || !apply_answer(x, &rec, token != 0, &res))
        return;
    complete_id(x->srv, QNAME(x), id, QUEUE_FATE_DONE);
    note_timer(x->srv, QNAME(x));
    serve(x->srv, QNAME(x));
}

static void cmd_qnack(cmd_ctx_t *x)
{
    uint64_t id, token, delay_ms = 0;
    if (!id_token(x, &id, &token))
        return;
    if (x->argc == 6 && arg_is(x, 4, "DELAY")) {
        if (!arg_ms(x, 5, &delay_ms))
            return;
    } else if (x->argc != 4) {
        reply_syntax(x);
        return;
    }
    record_t rec = {.type = REC_Q_NACK, .name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len,
                    .arg_rev = id, .token = token, .ttl_ms = delay_ms};
    apply_result_t res;
    if (!writable(x) || !apply_answer(x, &rec, token != 0, &res))
        return;
    after_retry(x->srv, QNAME(x), &res);
    note_timer(x->srv, QNAME(x));
    serve(x->srv, QNAME(x));
}

static void cmd_qextend(cmd_ctx_t *x)
{
    uint64_t id, token, ms;
    if (!id_token(x, &id, &token) || !arg_ms(x, 4, &ms))
        return;
    if (ms == 0) {
        reply_err(x, "ERR the lease must be at least 1 ms");
        return;
    }
    record_t rec = {.type = REC_Q_EXTEND, .name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len,
                    .arg_rev = id, .token = token, .ttl_ms = ms};
    apply_result_t res;
    if (writable(x) && apply_answer(x, &rec, token != 0, &res))
        note_timer(x->srv, QNAME(x));
}

static void cmd_qresult(cmd_ctx_t *x)
{
    uint64_t id, block_ms = 0;
    bool block = false;
    if (!queue_arg_ok(x) || !arg_u64(x, 2, &id))
        return;
    if (x->argc == 5 && arg_is(x, 3, "BLOCK")) {
        if (!arg_ms(x, 4, &block_ms))
            return;
        block = true;
    } else if (x->argc != 3) {
        reply_syntax(x);
        return;
    }
    if (!catch_up(x->srv, QNAME(x))) {
        reply_readonly(x);
        return;
    }
    if (reply_fate_now(x, id))
        return;
    if (block)
        park_result(x, id, block_ms, true, false);
    else
        resp_add_null(x->out, x->proto);
}

/* ---- config, unpark, drop ------------------------------------------------------------ */

static bool parse_u32_opt(cmd_ctx_t *x, size_t i, uint32_t lo, uint32_t hi, const char *what, uint32_t *out)
{
    uint64_t v;
    if (i >= x->argc) {
        reply_syntax(x);
        return false;
    }
    if (!arg_u64(x, i, &v))
        return false;
    if (v < lo || v > hi) {
        reply_errf(x, "ERR %s must be %u..%u", what, lo, hi);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static void cmd_qconfig(cmd_ctx_t *x)
{
    if (!queue_arg_ok(x))
        return;
    const queue_t *q = queue_get(core_queues(x->srv->core), QNAME(x));
    queue_config_t cfg;
    if (q != NULL)
        queue_config(q, &cfg);
    else
        queue_config_defaults(&cfg);
    for (size_t i = 2; i < x->argc; i++) {
        bool ok = true;
        if (arg_is(x, i, "MAXLEN")) {
            ok = parse_u32_opt(x, ++i, 1, QUEUE_MAXLEN_MAX, "MAXLEN", &cfg.maxlen);
        } else if (arg_is(x, i, "MAXPERKEY")) {
            ok = parse_u32_opt(x, ++i, 0, QUEUE_MAXLEN_MAX, "MAXPERKEY", &cfg.maxperkey);
        } else if (arg_is(x, i, "MAXATTEMPTS")) {
            ok = parse_u32_opt(x, ++i, 0, UINT32_MAX, "MAXATTEMPTS", &cfg.maxattempts);
        } else if (arg_is(x, i, "ONFULL") && i + 1 < x->argc) {
            i++;
            if (arg_is(x, i, "reject"))
                cfg.onfull = QUEUE_ONFULL_REJECT;
            else if (arg_is(x, i, "block"))
                cfg.onfull = QUEUE_ONFULL_BLOCK;
            else
                ok = false, reply_err(x, "ERR ONFULL is reject or block");
        } else if (arg_is(x, i, "ONPOISON") && i + 1 < x->argc) {
            i++;
            if (arg_is(x, i, "deadletter"))
                cfg.onpoison = QUEUE_ONPOISON_DEADLETTER;
            else if (arg_is(x, i, "park"))
                cfg.onpoison = QUEUE_ONPOISON_PARK;
            else
                ok = false, reply_err(x, "ERR ONPOISON is deadletter or park");
        } else if (arg_is(x, i, "LEASE")) {
            ok = arg_ms(x, ++i, &cfg.lease_ms);
            if (ok && cfg.lease_ms == 0)
                ok = false, reply_err(x, "ERR LEASE must be at least 1 ms");
        } else if (arg_is(x, i, "DEDUP")) {
            ok = arg_ms(x, ++i, &cfg.dedup_ms);
        } else if (arg_is(x, i, "RESULTTTL")) {
            ok = arg_ms(x, ++i, &cfg.resultttl_ms);
        } else if (arg_is(x, i, "DEADLETTER") && i + 1 < x->argc) {
            ok = arg_name_ok(x, ++i);
            cfg.deadletter = x->argv[i].len ? x->argv[i].ptr : NULL;
            cfg.dl_len = x->argv[i].len;
            if (ok && cfg.dl_len == x->argv[1].len && memcmp(cfg.deadletter, x->argv[1].ptr, cfg.dl_len) == 0)
                ok = false, reply_err(x, "ERR a queue cannot be its own DEADLETTER queue");
        } else {
            ok = false;
            reply_syntax(x);
        }
        if (!ok)
            return;
    }
    if (!writable(x))
        return;
    char blob[CORE_QCONFIG_BYTES];
    core_qconfig_encode(&cfg, blob);
    record_t rec = {.type = REC_Q_CONFIG, .name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len,
                    .val = blob, .vlen = sizeof blob, .key = cfg.deadletter, .klen = (uint32_t)cfg.dl_len};
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (res.status != AP_OK) {
        reply_err(x, "ERR the configuration was refused");
        return;
    }
    reply_ok(x);
    serve(x->srv, QNAME(x)); /* a larger MAXLEN makes room */
}

static void cmd_qunpark(cmd_ctx_t *x)
{
    if (!queue_arg_ok(x) || !arg_name_ok(x, 2) || !writable(x))
        return;
    record_t rec = {.type = REC_Q_UNPARK, .name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len,
                    .key = x->argv[2].ptr, .klen = (uint32_t)x->argv[2].len};
    apply_result_t res;
    if (apply_answer(x, &rec, true, &res))
        serve(x->srv, QNAME(x));
}

static void drop_ids(ordo_hnode_t *n, void *arg)
{
    server_t *s = arg;
    idwait_t *iw = (idwait_t *)n;
    while (iw->list.head != NULL) {
        waiter_t *w = iw->list.head;
        s->stats.errors_total++;
        resp_add_errorf(&w->conn->out, "NOTFOUND the queue was dropped");
        finish(s, w);
    }
}

static void cmd_qdrop(cmd_ctx_t *x)
{
    if (!queue_arg_ok(x) || !writable(x))
        return;
    gc(x->srv);
    record_t rec = {.type = REC_Q_DROP, .name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len};
    apply_result_t res;
    bool ok = q_apply(x->srv, &rec, &res);
    if (refused(x))
        return;
    resp_add_int(x->out, ok);
    qwait_t *qw = ok ? qw_get(x->srv, QNAME(x), false) : NULL;
    if (qw == NULL)
        return;
    /* Callers and blocked pushers were waiting on what is gone; pullers
     * wait on the name and get whatever a later push brings. */
    ordo_htab_foreach(&qw->ids, drop_ids, x->srv);
    while (qw->pushers.head != NULL) {
        waiter_t *w = qw->pushers.head;
        x->srv->stats.errors_total++;
        resp_add_errorf(&w->conn->out, "NOTFOUND the queue was dropped; nothing was pushed");
        finish(x->srv, w);
    }
}

/* ---- reads -------------------------------------------------------------------------- */

/* The queue a read command looks at, its due deadlines applied, in *q
 * (NULL if there is none). Returns false (reply written) if the log
 * refused a deadline's record. */
static bool read_queue(cmd_ctx_t *x, const queue_t **q)
{
    if (!catch_up(x->srv, QNAME(x))) {
        reply_readonly(x);
        return false;
    }
    *q = queue_get(core_queues(x->srv->core), QNAME(x));
    return true;
}

static void cmd_qlen(cmd_ctx_t *x)
{
    const queue_t *q;
    if (!queue_arg_ok(x) || !read_queue(x, &q))
        return;
    queue_len_t l = {0};
    if (q != NULL)
        queue_len(q, &l);
    resp_add_array(x->out, 3);
    resp_add_uint(x->out, l.waiting);
    resp_add_uint(x->out, l.inflight);
    resp_add_uint(x->out, l.delayed);
}

static void add_field_u(ordo_buf_t *out, const char *name, uint64_t v)
{
    resp_add_bulk_str(out, name);
    resp_add_uint(out, v);
}

static void cmd_qinfo(cmd_ctx_t *x)
{
    const queue_t *q;
    if (!queue_arg_ok(x) || !read_queue(x, &q))
        return;
    if (q == NULL) {
        reply_err(x, "NOTFOUND no such queue");
        return;
    }
    queue_info_t in;
    queue_info(q, &in);
    ordo_buf_t *o = x->out;
    resp_add_map(o, x->proto, 29);
    add_field_u(o, "maxlen", in.config.maxlen);
    add_field_u(o, "maxperkey", in.config.maxperkey);
    resp_add_bulk_str(o, "onfull");
    resp_add_bulk_str(o, in.config.onfull == QUEUE_ONFULL_BLOCK ? "block" : "reject");
    resp_add_bulk_str(o, "onpoison");
    resp_add_bulk_str(o, in.config.onpoison == QUEUE_ONPOISON_PARK ? "park" : "deadletter");
    add_field_u(o, "maxattempts", in.config.maxattempts);
    add_field_u(o, "lease", in.config.lease_ms);
    add_field_u(o, "dedup", in.config.dedup_ms);
    add_field_u(o, "resultttl", in.config.resultttl_ms);
    resp_add_bulk_str(o, "deadletter");
    if (in.config.deadletter != NULL)
        resp_add_bulk(o, in.config.deadletter, in.config.dl_len);
    else
        resp_add_null(o, x->proto);
    add_field_u(o, "waiting", in.len.waiting);
    add_field_u(o, "inflight", in.len.inflight);
    add_field_u(o, "delayed", in.len.delayed);
    add_field_u(o, "keys", in.keys);
    add_field_u(o, "ready_keys", in.ready_keys);
    add_field_u(o, "parked_keys", in.parked_keys);
    add_field_u(o, "dedup_entries", in.dedup_entries);
    add_field_u(o, "results", in.results);
    add_field_u(o, "bytes", in.bytes);
    add_field_u(o, "pushed", in.pushed);
    add_field_u(o, "merged", in.merged);
    add_field_u(o, "deduped", in.deduped);
    add_field_u(o, "delivered", in.delivered);
    add_field_u(o, "acked", in.acked);
    add_field_u(o, "nacked", in.nacked);
    add_field_u(o, "redelivered", in.redelivered);
    add_field_u(o, "deadlettered", in.deadlettered);
    add_field_u(o, "parked", in.parked);
    qwait_t *qw = qw_get(x->srv, QNAME(x), false);
    add_field_u(o, "blocked_pullers", qw ? qw->pullers.len : 0);
    add_field_u(o, "blocked_pushers", qw ? qw->pushers.len : 0);
}

static void add_name(void *arg, queue_t *q)
{
    size_t n;
    const char *name = queue_name(q, &n);
    resp_add_bulk(arg, name, n);
}

static void cmd_qlist(cmd_ctx_t *x)
{
    const queue_set_t *set = core_queues(x->srv->core);
    resp_add_array(x->out, queue_set_count(set));
    queue_set_foreach(set, add_name, x->out);
}

/* `queue [COUNT n]`, as Q.PEEK and Q.TOPKEYS take: *count keeps its default
 * without COUNT. Replies the error and returns false on bad arguments. */
static bool queue_count_args(cmd_ctx_t *x, uint32_t *count)
{
    if (!queue_arg_ok(x))
        return false;
    if (x->argc == 4 && arg_is(x, 2, "COUNT"))
        return arg_count(x, 3, count);
    if (x->argc != 2) {
        reply_syntax(x);
        return false;
    }
    return true;
}

static void cmd_qpeek(cmd_ctx_t *x)
{
    uint32_t count = 1;
    const queue_t *q;
    if (!queue_count_args(x, &count) || !read_queue(x, &q))
        return;
    queue_delivery_t *m = ordo_xmalloc(count * sizeof *m);
    size_t n = q ? queue_peek(q, count, m) : 0;
    resp_add_array(x->out, n);
    for (size_t i = 0; i < n; i++)
        add_msg(x->out, &m[i]);
    free(m);
}

static void cmd_qkeyinfo(cmd_ctx_t *x)
{
    static const char *const states[] = {"idle", "processing", "waiting", "parked"};
    const queue_t *q;
    if (!queue_arg_ok(x) || !arg_name_ok(x, 2) || !read_queue(x, &q))
        return;
    queue_keyinfo_t k = {0};
    if (q != NULL)
        queue_keyinfo(q, x->argv[2].ptr, x->argv[2].len, &k);
    ordo_buf_t *o = x->out;
    resp_add_map(o, x->proto, 7);
    resp_add_bulk_str(o, "state");
    resp_add_bulk_str(o, states[k.state & 3]);
    add_field_u(o, "id", k.inflight_id);
    add_field_u(o, "since", k.since_ms);
    add_field_u(o, "deadline", k.deadline_ms);
    add_field_u(o, "attempt", k.attempt);
    add_field_u(o, "waiting", k.waiting);
    add_field_u(o, "token", k.token);
}

static void cmd_qtopkeys(cmd_ctx_t *x)
{
    uint32_t count = 10;
    const queue_t *q;
    if (!queue_count_args(x, &count) || !read_queue(x, &q))
        return;
    queue_topkey_t *t = ordo_xmalloc(count * sizeof *t);
    size_t n = q ? queue_topkeys(q, count, t) : 0;
    resp_add_array(x->out, n);
    for (size_t i = 0; i < n; i++) {
        resp_add_array(x->out, 2);
        resp_add_bulk(x->out, t[i].key, t[i].klen);
        resp_add_uint(x->out, t[i].waiting);
    }
    free(t);
}

/* ---- registration -------------------------------------------------------------------- */

static const cmd_def_t queue_cmds[] = {
    {"Q.PUSH", -4, CMD_WRITE, cmd_qpush,
     "Q.PUSH queue key payload [ID dedup-id] [COALESCE] [DELAY ms] [TIMEOUT ms] -> message id"},
    {"Q.CALL", -4, CMD_WRITE, cmd_qcall, "Q.CALL queue key payload [TIMEOUT ms] [ID dedup-id] -> result"},
    {"Q.PULL", -2, CMD_WRITE, cmd_qpull,
     "Q.PULL queue [COUNT n] [BLOCK ms] [LEASE ms] [NOACK] -> [[id, key, payload, attempt, token]...]"},
    {"Q.ACK", -4, CMD_WRITE, cmd_qack, "Q.ACK queue id token [RESULT payload] -> 1/0"},
    {"Q.NACK", -4, CMD_WRITE, cmd_qnack, "Q.NACK queue id token [DELAY ms] -> 1/0"},
    {"Q.EXTEND", 5, CMD_WRITE, cmd_qextend, "Q.EXTEND queue id token ms -> 1/0"},
    {"Q.RESULT", -3, 0, cmd_qresult, "Q.RESULT queue id [BLOCK ms] -> result or nil"},
    {"Q.CONFIG", -2, CMD_WRITE, cmd_qconfig, "Q.CONFIG queue [MAXLEN n] [MAXPERKEY n] [ONFULL reject|block] ..."},
    {"Q.UNPARK", 3, CMD_WRITE, cmd_qunpark, "Q.UNPARK queue key -> 1/0"},
    {"Q.DROP", 2, CMD_WRITE, cmd_qdrop, "Q.DROP queue -> 1/0"},
    {"Q.LEN", 2, 0, cmd_qlen, "Q.LEN queue -> [waiting, in flight, delayed]"},
    {"Q.INFO", 2, 0, cmd_qinfo, "Q.INFO queue -> configuration and counters"},
    {"Q.LIST", 1, 0, cmd_qlist, "Q.LIST -> queue names"},
    {"Q.PEEK", -2, 0, cmd_qpeek, "Q.PEEK queue [COUNT n] -> the next messages a pull would get"},
    {"Q.KEYINFO", 3, 0, cmd_qkeyinfo, "Q.KEYINFO queue key -> the key's state"},
    {"Q.TOPKEYS", -2, 0, cmd_qtopkeys, "Q.TOPKEYS queue [COUNT n] -> [[key, waiting]...]"},
};

void cmd_queue_register(server_t *s)
{
    qcmd_t *qc = ordo_xcalloc(1, sizeof *qc);
    if (ordo_htab_init(&qc->waits, qw_eq) != 0) {
        fprintf(stderr, "ordod: out of memory\n");
        abort();
    }
    s->qcmd = qc;
    cmd_register(s, queue_cmds, sizeof queue_cmds / sizeof queue_cmds[0]);
}
