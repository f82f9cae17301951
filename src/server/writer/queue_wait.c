/*
 * queue_wait.c -- the writer's side of the queues: the wait lists of
 * blocked Q.* commands, serving them, and the queue timer. cmd_queue.c
 * parses the Q.* commands and speaks RESP about them; everything here runs
 * when a record made something ready or a deadline passed.
 *
 * Blocking. Q.PULL BLOCK, Q.CALL, Q.RESULT BLOCK and Q.PUSH under ONFULL
 * block park their connection (block.h) on a wait list of the queue's name:
 * pullers and pushers each have a FIFO, and callers waiting for one
 * message's fate have a FIFO per message id. A Q.CALL on a full queue under
 * ONFULL block waits twice without resuming in between: among the pushers
 * until its push fits, then (block_move(), same deadline: TIMEOUT bounds
 * the whole call) among the callers of the message it pushed. A record
 * never serves a waiter from inside its apply: the door's after-apply step
 * (qwait_after_apply()) marks the queue, and the settle that follows the
 * command (writer_settle(): after each command, each command of an EXEC,
 * each timer turn, and a catch-up) runs qwait_serve(): while a pusher is
 * parked and a push now fits, it applies that push; while a puller is
 * parked and a message is deliverable, it applies deliver records for the
 * first puller (the writer decides who gets which delivery, and the log
 * says so) and gives it the messages as its outcome (outcome.h); it loops
 * until neither makes progress. A message's completion (an ack, a NOACK
 * delivery, a dead letter) answers the callers parked on its id at once,
 * from the after-apply step. Invariant: after every command, a parked
 * puller means nothing is deliverable and a parked pusher means the queue
 * is full, so a newcomer never overtakes a waiter.
 *
 * Wait lists live as long as someone waits. A waiter leaves its list inside
 * block.c (done, timed out, cancelled), sometimes while its list is still in
 * use, so empty lists are collected later: each leaving marks the list, and
 * qwait_gc() frees marked lists that are still empty at the start of every
 * Q.* command and timer turn.
 *
 * Timers. queue.h keeps each queue's deadlines (leases, delays, dedup
 * windows, result retention). One timer (timer.h) fires at the earliest;
 * its callback logs one record per due deadline (REC_Q_REDELIVER, or
 * REC_Q_RETRY for a queue with a retry policy; PROMOTE for delays and
 * rate tokens coming back, DEDUP_END,
 * RESULT_END, PAUSE for a pause's end) through the door, then settles: the waiters the
 * records made ready are served. After a write that may move a deadline
 * earlier, qwait_note_timer() re-arms it (O(1): only the written queue's
 * earliest deadline is looked at; a timer that fires early finds nothing
 * due and re-arms from the whole set, O(queues)). Before a command touches
 * a queue, its due deadlines are applied first (qwait_catch_up()), as
 * cmd_dispatch expires keys first: the command sees one consistent state,
 * and a push or deliver never promotes delayed messages without a record
 * saying so; the catch-up settles before the command goes on, so what its
 * deadlines readied goes to the parked first.
 */
#include "queue_wait.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "base/bytes.h"
#include "base/siphash.h"
#include "block.h"
#include "core/schedule.h"
#include "turn.h"

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
    ordo_hnode_t hnode;       /* in qwaits.waits, by name */
    wait_list_t pullers;
    wait_list_t pushers;
    ordo_htab_t ids;          /* message id -> idwait_t */
    qwait_t *gc_next;
    bool in_gc;
    size_t nlen;
    char name[];
};

typedef struct qwaits_s {
    ordo_htab_t waits;        /* queue name -> qwait_t */
    qwait_t *gc;              /* maybe empty */
    idwait_t *idgc;
    ordo_buf_t scratch;       /* a parked pull's messages before its answer */
    ordo_buf_t to_serve;      /* names of queues to serve at the next settle: u32 length, bytes */
    size_t last_mark;         /* offset in to_serve of the last name marked */
    writer_timer_t timer;     /* at the earliest queue deadline, from qwait_start() */
    writer_timer_t expire_timer; /* MAXWAIT scans, while a queue has MAXWAIT ("Expiry") */
    writer_timer_t sched_timer;  /* at the next schedule tick ("Schedules") */
    uint64_t rng;             /* xorshift64* state for backoff jitter (never 0); seeded at qwait_init() */
} qwaits_t;

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
    bool idem;                /* QW_PUSH: the dedup id is an idempotency key (REC_F_IDEM) */
    uint64_t idem_hash, idem_ms;
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
    qwaits_t *qc = s->writer.queues;
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
    qwaits_t *qc = s->writer.queues;
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
void qwait_gc(server_t *s)
{
    qwaits_t *qc = s->writer.queues;
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

/* Give the waiter its outcome: release its data, mark its lists, answer. */
static void finish(server_t *s, waiter_t *w, const outcome_t *o)
{
    qwaiter_t *d = w->data;
    gc_mark(s, d);
    free(d);
    w->data = NULL;
    block_answer(s, w, o);
}

static void finish_error(server_t *s, waiter_t *w, const char *text)
{
    outcome_t o = {.kind = OUTCOME_ERROR, .error.text = text};
    finish(s, w, &o);
}

static void on_cancel(waiter_t *w)
{
    qwaiter_t *d = w->data;
    gc_mark(w->srv, d);
    free(d);
    w->data = NULL;
}

static void on_timeout(waiter_t *w, outcome_t *o, char *buf, size_t blen)
{
    qwaiter_t *d = w->data;
    switch (d->kind) {
    case QW_PULL:
        *o = (outcome_t){.kind = OUTCOME_MESSAGES};
        break;
    case QW_PUSH:
        snprintf(buf, blen, "TIMEOUT queue still full after %llu ms (ONFULL block); nothing was pushed",
                 (unsigned long long)d->timeout_ms);
        *o = (outcome_t){.kind = OUTCOME_ERROR, .error.text = buf};
        break;
    default:
        if (!d->call) {
            *o = (outcome_t){.kind = OUTCOME_NIL};
            break;
        }
        snprintf(buf, blen, "TIMEOUT message %llu not done after %llu ms; it stays queued (Q.RESULT fetches it)",
                 (unsigned long long)d->id, (unsigned long long)d->timeout_ms);
        *o = (outcome_t){.kind = OUTCOME_ERROR, .error.text = buf};
        break;
    }
    /* block.c answers the waiter after this returns; its lists are
     * collected later. */
    on_cancel(w);
}

static waiter_t *park(server_t *s, struct conn_s *c, wait_list_t *list, uint64_t timeout_ms, bool has_timeout,
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
 * parked pusher's push is checked by serve_pushers()) through the door.
 * Returns true if it changed something and the log took it: a record the
 * log refused changed memory only, and nobody may be told it did. */
bool qwait_apply(server_t *s, record_t *rec, apply_result_t *res)
{
    return writer_submit(s, rec, WRITER_SELF, res, NULL, 0) == WRITER_APPLIED && res->status == AP_OK;
}

/* Mark queue name for serving at the next settle, if anyone is parked on
 * it (nobody can park on it in between: a pull or push parks only when
 * the state after the record leaves it nothing to do). */
static void mark_serve(server_t *s, const char *name, size_t nlen)
{
    qwaits_t *qc = s->writer.queues;
    if (qw_get(s, name, nlen, false) == NULL)
        return;
    ordo_buf_t *b = &qc->to_serve;
    if (b->len > 0 && get_u32(b->data + qc->last_mark) == nlen &&
        memcmp(b->data + qc->last_mark + 4, name, nlen) == 0)
        return; /* marked just before */
    s->writer.to_settle = true;
    qc->last_mark = b->len;
    ordo_buf_reserve(b, 4 + nlen);
    put_u32(b->data + b->len, (uint32_t)nlen);
    memcpy(b->data + b->len + 4, name, nlen);
    b->len += 4 + nlen;
}

void qwait_after_apply(server_t *s, const record_t *rec, const apply_result_t *res)
{
    assert(res->status == AP_OK);
    uint32_t nlen;
    const char *name = record_queue(rec, &nlen);
    assert(name != NULL);
    switch (rec->type) {
    case REC_Q_DELIVER:
        if (rec->flags & REC_F_NOACK)
            qwait_complete_id(s, name, nlen, res->queue.delivery.id, QUEUE_FATE_NONE);
        break;
    case REC_Q_ACK:
        qwait_complete_id(s, name, nlen, rec->q_ack.msg_id, QUEUE_FATE_DONE);
        break;
    case REC_Q_NACK: case REC_Q_REDELIVER: case REC_Q_RETRY:
        qwait_after_retry(s, name, nlen, res);
        break;
    case REC_Q_DROP:
        qwait_dropped(s, name, nlen);
        return;
    case REC_Q_CANCEL:
        qwait_complete_id(s, name, nlen, rec->q_msg.msg_id, QUEUE_FATE_CANCELLED);
        return;
    case REC_Q_EXPIRE:
        qwait_after_retry(s, name, nlen, res);
        return;
    case REC_Q_CONFIG:
        qwait_arm_expire_scan(s);
        break;
    case REC_Q_SCHEDULE_ADD: case REC_Q_SCHEDULE_DEL:
        qwait_arm_schedules(s);
        return;
    case REC_Q_TICK:
        if (res->queue.id != 0)
            mark_serve(s, name, nlen); /* it pushed: parked pullers may take it */
        return;
    case REC_Q_DEDUP_END: case REC_Q_RESULT_END:
        return;
    default:
        break;
    }
    if (rec->type != REC_Q_REDELIVER && rec->type != REC_Q_PROMOTE)
        qwait_note_timer(s, name, nlen); /* the timer's own records re-arm it when its turn ends */
    if (rec->type != REC_Q_EXTEND)
        mark_serve(s, name, nlen);
}

void qwait_settle(server_t *s)
{
    qwaits_t *qc = s->writer.queues;
    while (qc->to_serve.len > 0) {
        /* Serving marks again (its records): take the marks made so far. */
        ordo_buf_t marks = qc->to_serve;
        qc->to_serve = (ordo_buf_t){0};
        for (size_t off = 0; off < marks.len;) {
            uint32_t nlen = get_u32(marks.data + off);
            qwait_serve(s, marks.data + off + 4, nlen);
            off += 4 + nlen;
        }
        if (qc->to_serve.data == NULL) {
            marks.len = 0;
            qc->to_serve = marks; /* keep the buffer */
        } else {
            ordo_buf_free(&marks);
        }
    }
    s->writer.to_settle = false;
}


static void arm_at(server_t *s, uint64_t due_ms)
{
    if (!writer_makes_records(s))
        return; /* apply.h: cluster.c re-arms this when it leads */
    /* A deadline is due once now_ms passes it (queue.h), as timer.h fires. */
    writer_timer_arm_earlier(&s->writer.queues->timer, due_ms);
}

/* A write to the queue may have made a deadline earlier than the timer. */
void qwait_note_timer(server_t *s, const char *name, size_t nlen)
{
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_timer_t t;
    if (q != NULL && queue_next_timer(q, &t))
        arm_at(s, t.due_ms);
}

static void answer_fate(server_t *s, waiter_t *w, uint64_t id, int fate, const queue_result_t *r)
{
    outcome_t o = {.kind = OUTCOME_FATE, .fate = {.id = id, .fate = fate, .result = r}};
    finish(s, w, &o);
}

/* Message id of queue name is finished: answer everyone parked on it. */
void qwait_complete_id(server_t *s, const char *name, size_t nlen, uint64_t id, int fate)
{
    qwait_t *qw = qw_get(s, name, nlen, false);
    idwait_t *iw = qw ? iw_get(qw, id, false) : NULL;
    if (iw == NULL || iw->list.len == 0)
        return;
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_result_t r = {0};
    if (q != NULL && fate != QUEUE_FATE_NONE)
        queue_result(q, id, &r); /* a result, or why it was dead-lettered */
    while (wait_list_first(&iw->list) != NULL)
        answer_fate(s, wait_list_first(&iw->list), id, fate, &r);
}

/* Deliver up to count messages (one record each), handing each to each();
 * returns how many. */
size_t qwait_deliver(server_t *s, const char *name, size_t nlen, uint32_t count, uint64_t lease_ms, bool noack,
                     qwait_sink_fn each, void *arg)
{
    size_t n = 0, bytes = 0;
    for (; n < count; n++) {
        /* max-reply-bytes: past it, no further delivery (a message is never
         * split, and the first one is always delivered). */
        if (n > 0 && bytes >= (size_t)s->cfg.max_reply_bytes)
            break;
        record_t rec = {.type = REC_Q_DELIVER,
                        .flags = noack ? REC_F_NOACK : 0,
                        .q_deliver = {.queue = name, .qlen = (uint32_t)nlen, .lease_ms = lease_ms}};
        apply_result_t res;
        if (!qwait_apply(s, &rec, &res))
            break;
        bytes += res.queue.delivery.klen + res.queue.delivery.plen + QWAIT_MESSAGE_FRAMING_BYTES;
        each(arg, &res.queue.delivery); /* a NOACK delivery has answered its callers (qwait_after_apply()) */
    }
    return n;
}

static void push_record(record_t *rec, const char *name, size_t nlen, const qwaiter_t *d)
{
    memset(rec, 0, sizeof *rec);
    rec->type = REC_Q_PUSH;
    rec_q_push_t *p = &rec->q_push;
    p->queue = name;
    p->qlen = (uint32_t)nlen;
    p->key = d->bytes;
    p->klen = d->klen;
    p->payload = d->bytes + d->klen;
    p->plen = d->plen;
    p->dedup_id = d->has_dedup ? d->bytes + d->klen + d->plen : NULL;
    p->dlen = d->dlen;
    p->delay_ms = d->delay_ms;
    rec->flags = d->coalesce ? REC_F_COALESCE : 0;
    if (d->idem) {
        rec->flags |= REC_F_IDEM;
        p->idem_hash = d->idem_hash;
        p->idem_ms = d->idem_ms;
    }
}

void qwait_limit_text(server_t *s, const char *name, size_t nlen, char *buf, size_t blen)
{
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_config_t cfg = {0};
    if (q != NULL)
        queue_config(q, &cfg);
    snprintf(buf, blen, "LIMIT the key has MAXPERKEY (%u) messages waiting", cfg.maxperkey);
}

/* A Q.CALL parked for room got its push in (res: AP_OK, or AP_NOOP for a
 * repeat of an ID inside the dedup window): it answers a repeat whose first
 * call is done at once, else it waits on the message's callers, with the
 * deadline it had (TIMEOUT bounds the whole call). Runs before the pullers
 * are served, so a NOACK delivery of the message finds it there. */
static void call_pushed(server_t *s, qwait_t *qw, waiter_t *w, const apply_result_t *res)
{
    qwaiter_t *d = w->data;
    uint64_t id = res->queue.id;
    if (res->status == AP_NOOP) {
        const queue_t *q = queue_get(core_queues(s->core), qw->name, qw->nlen);
        queue_result_t r = {0};
        int fate = q != NULL ? queue_result(q, id, &r) : QUEUE_FATE_NONE;
        if (fate != QUEUE_FATE_NONE) {
            answer_fate(s, w, id, fate, &r);
            return;
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
    while (wait_list_first(&qw->pushers) != NULL) {
        waiter_t *w = wait_list_first(&qw->pushers);
        qwaiter_t *d = w->data;
        record_t rec;
        apply_result_t res;
        char text[WRITER_REFUSAL_MAX];
        if (has_room(s, qw) && writer_memory_refused(s, text, sizeof text)) {
            finish_error(s, w, text); /* room, but refused as the push would be if it came now */
            progress = true;
            continue;
        }
        push_record(&rec, qw->name, qw->nlen, d);
        if (writer_submit(s, &rec, WRITER_SELF, &res, NULL, 0) != WRITER_APPLIED || res.status == AP_QFULL)
            break; /* refused (read-only, not leading: block.c answers it), or still full */
        progress = true;
        if (res.status == AP_QLIMIT) {
            qwait_limit_text(s, qw->name, qw->nlen, text, sizeof text);
            finish_error(s, w, text);
        } else if (d->call) {
            call_pushed(s, qw, w, &res); /* answered, or now waits among the callers */
        } else {
            outcome_t o = {.kind = OUTCOME_UINT, .uint = res.queue.id};
            finish(s, w, &o);
        }
    }
    return progress;
}

/* A parked pull's deliveries, kept until its answer: the messages'
 * bytes are copied into the scratch buffer (a later record may free what
 * a delivery points at), their descriptions into msgs. */
typedef struct pulled_s {
    ordo_buf_t *bytes;
    queue_delivery_t *msgs;
    size_t n, cap;
} pulled_t;

static void keep_delivery(void *arg, const queue_delivery_t *d)
{
    pulled_t *p = arg;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 8;
        p->msgs = ordo_xrealloc(p->msgs, p->cap * sizeof *p->msgs);
    }
    queue_delivery_t *m = &p->msgs[p->n++];
    *m = *d;
    /* Offsets now, pointers once the buffer stops moving. */
    m->key = (const char *)(uintptr_t)p->bytes->len;
    ordo_buf_append(p->bytes, d->key, d->klen);
    m->payload = (const char *)(uintptr_t)p->bytes->len;
    ordo_buf_append(p->bytes, d->payload, d->plen);
}

/* Parked pullers, first come first served, while messages are deliverable. */
static bool serve_pullers(server_t *s, qwait_t *qw)
{
    bool progress = false;
    pulled_t p = {.bytes = &s->writer.queues->scratch};
    while (wait_list_first(&qw->pullers) != NULL) {
        waiter_t *w = wait_list_first(&qw->pullers);
        qwaiter_t *d = w->data;
        p.bytes->len = 0;
        p.n = 0;
        size_t n = qwait_deliver(s, qw->name, qw->nlen, d->count, d->lease_ms, d->noack, keep_delivery, &p);
        if (n == 0 || server_readonly(s) != NULL)
            break; /* nothing, or deliveries the log refused: the puller keeps waiting */
        assert(n == p.n);
        for (size_t i = 0; i < n; i++) {
            p.msgs[i].key = (const char *)p.bytes->data + (uintptr_t)p.msgs[i].key;
            p.msgs[i].payload = (const char *)p.bytes->data + (uintptr_t)p.msgs[i].payload;
        }
        outcome_t o = {.kind = OUTCOME_MESSAGES, .messages = {.v = p.msgs, .n = n}};
        finish(s, w, &o);
        progress = true;
    }
    free(p.msgs);
    return progress;
}

/* After a write to queue name: serve its parked pushers and pullers until
 * neither can move (a delivery makes room; a push makes work). */
void qwait_serve(server_t *s, const char *name, size_t nlen)
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

/* A nack or a lease expiry came back with res->queue.retry: a dead letter finishes
 * the message for its callers and may make the dead-letter queue's
 * pullers' day. */
void qwait_after_retry(server_t *s, const char *name, size_t nlen, const apply_result_t *res)
{
    if (res->queue.retry.kind != QUEUE_RETRY_DEADLETTER)
        return;
    qwait_complete_id(s, name, nlen, res->queue.retry.id, QUEUE_FATE_DEADLETTER);
    if (res->queue.retry.dlq != NULL) {
        size_t dlen;
        const char *dn = queue_name(res->queue.retry.dlq, &dlen);
        mark_serve(s, dn, dlen);
    }
}

/* ---- retry policies ---------------------------------------------------------------
 *
 * A queue with BACKOFF or MAXAGE (queue_policy_active()) has its retries
 * decided here, the random part included: the jitter is drawn from the
 * writer's generator and travels in the REC_Q_RETRY record, so apply,
 * replay and every cluster member reach the same state. MAXAGE measures a
 * message's age from its push, whose time is core_time_of_rev() of its id
 * (the record's revision): that is at most a second early, so the verdict
 * waits QWAIT_AGE_SLACK_MS more and is never early; a message pushed
 * before the last restart is measured from no earlier than the oldest
 * sample the core kept, hence late rather than early. */

#define QWAIT_AGE_SLACK_MS 1000

/* The next 64 bits of the writer's generator (xorshift64*). */
static uint64_t qwait_random(qwaits_t *qc)
{
    uint64_t x = qc->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    qc->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

bool qwait_retry_record(server_t *s, const char *name, size_t nlen, uint64_t id, uint64_t token, bool lease,
                        record_t *rec)
{
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    if (q == NULL)
        return false;
    queue_config_t cfg;
    queue_config(q, &cfg);
    if (!queue_policy_active(&cfg))
        return false;
    uint32_t attempt = queue_delivery_attempt(q, id, token);
    uint8_t kind = lease ? QUEUE_RETRY_F_LEASE : 0;
    uint64_t pushed_ms = core_time_of_rev(s->core, id);
    if (cfg.maxage_ms > 0 && pushed_ms > 0 && s->now_ms > pushed_ms &&
        s->now_ms - pushed_ms > cfg.maxage_ms + QWAIT_AGE_SLACK_MS)
        kind |= QUEUE_RETRY_F_GIVEUP;
    uint64_t delay = queue_backoff_delay(&cfg, attempt, qwait_random(s->writer.queues));
    if (delay > QWAIT_DELAY_MAX_MS)
        delay = QWAIT_DELAY_MAX_MS;
    *rec = (record_t){.type = REC_Q_RETRY,
                      .q_retry = {.queue = name, .qlen = (uint32_t)nlen, .msg_id = id, .token = token,
                                  .delay_ms = delay, .kind = kind}};
    return true;
}

/* ---- expiry (MAXWAIT) -----------------------------------------------------------------
 *
 * A message nobody took within its queue's MAXWAIT of its push is
 * dead-lettered by a REC_Q_EXPIRE record the writer makes. Ages come from
 * core_time_of_rev() of the message id with QWAIT_AGE_SLACK_MS, as for
 * MAXAGE: never early. Waiting messages have no deadline structure (that
 * would cost every queue per message), so while some queue has MAXWAIT a
 * scan every QWAIT_EXPIRE_SCAN_MS walks those queues' waiting messages:
 * O(their messages) a second, paid only by queues that asked, and an
 * expiry is up to a scan period plus the slack late. */

#define QWAIT_EXPIRE_SCAN_MS 1000
/* Expiries per scan: a backlog that all expired at once goes over several
 * scans rather than holding the loop. */
#define QWAIT_EXPIRES_PER_SCAN 4096

void qwait_arm_expire_scan(server_t *s)
{
    if (!writer_makes_records(s) || queue_set_maxwait_count(core_queues(s->core)) == 0)
        return;
    writer_timer_arm_earlier(&s->writer.queues->expire_timer, s->now_ms + QWAIT_EXPIRE_SCAN_MS);
}

typedef struct expire_scan_s {
    server_t *s;
    uint64_t maxwait_ms;
    ordo_buf_t *found;        /* u32 key length | key | u64 id, per message */
    size_t n;
} expire_scan_t;

static bool expire_pick(void *arg, const char *key, size_t klen, uint64_t id, uint32_t attempt)
{
    expire_scan_t *e = arg;
    uint64_t pushed_ms = core_time_of_rev(e->s->core, id);
    if (attempt == 0 && pushed_ms > 0 && e->s->now_ms > pushed_ms &&
        e->s->now_ms - pushed_ms > e->maxwait_ms + QWAIT_AGE_SLACK_MS) {
        char n[8];
        put_u32(n, (uint32_t)klen);
        ordo_buf_append(e->found, n, 4);
        ordo_buf_append(e->found, key, klen);
        put_u64(n, id);
        ordo_buf_append(e->found, n, 8);
        e->n++;
    }
    return e->n < QWAIT_EXPIRES_PER_SCAN;
}

static void note_maxwait_queue(void *arg, queue_t *q)
{
    queue_config_t cfg;
    queue_config(q, &cfg);
    if (cfg.maxwait_ms == 0)
        return;
    size_t nlen;
    const char *name = queue_name(q, &nlen);
    char n[4];
    put_u32(n, (uint32_t)nlen);
    ordo_buf_append(arg, n, 4);
    ordo_buf_append(arg, name, nlen);
}

/* Expire what one queue's scan found (records apply after the walk: an
 * expiry may create the dead-letter queue). */
static size_t expire_queue(server_t *s, const char *name, size_t nlen, size_t budget)
{
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    if (q == NULL || budget == 0)
        return 0;
    queue_config_t cfg;
    queue_config(q, &cfg);
    ordo_buf_t found = ORDO_BUF_INIT;
    expire_scan_t e = {.s = s, .maxwait_ms = cfg.maxwait_ms, .found = &found};
    queue_foreach_waiting(q, expire_pick, &e);
    size_t done = 0;
    for (size_t off = 0; off < found.len && done < budget && server_readonly(s) == NULL; done++) {
        uint32_t klen = get_u32(found.data + off);
        record_t rec = {.type = REC_Q_EXPIRE,
                        .q_msg = {.queue = name, .qlen = (uint32_t)nlen, .key = klen ? found.data + off + 4 : NULL,
                                  .klen = klen, .msg_id = get_u64(found.data + off + 4 + klen)}};
        apply_result_t res;
        qwait_apply(s, &rec, &res);
        off += 4 + (size_t)klen + 8;
    }
    ordo_buf_free(&found);
    return done;
}

static void on_expire_scan(writer_timer_t *t)
{
    server_t *s = t->data;
    server_tick(s);
    if (!writer_makes_records(s))
        return; /* apply.h: a new leader arms the scan again (qwait_rearm()) */
    qwait_gc(s);
    ordo_buf_t names = ORDO_BUF_INIT;
    queue_set_foreach(core_queues(s->core), note_maxwait_queue, &names);
    size_t budget = QWAIT_EXPIRES_PER_SCAN;
    for (size_t off = 0; off < names.len;) {
        uint32_t nlen = get_u32(names.data + off);
        budget -= expire_queue(s, names.data + off + 4, nlen, budget);
        off += 4 + (size_t)nlen;
    }
    ordo_buf_free(&names);
    qwait_arm_expire_scan(s);
    writer_settle(s);
    turn_run_resumed(s);
    turn_flush(s);
}

/* ---- schedules --------------------------------------------------------------------
 *
 * The writer makes each tick's record (schedule.h): when the earliest
 * next tick has passed on its clock, it logs REC_Q_TICK naming the
 * schedule and the tick's time, whose apply pushes (or not) and moves the
 * schedule on; a tick is a record like any other, made by the leader
 * only, so it happens once across restarts and leader changes. */

/* Ticks applied per timer turn (the timer re-arms at once if more are due). */
#define QWAIT_TICKS_PER_TURN 1024

void qwait_arm_schedules(server_t *s)
{
    sched_view_t v;
    if (!writer_makes_records(s) || !sched_next_due(core_scheds(s->core), &v))
        return;
    writer_timer_arm_earlier(&s->writer.queues->sched_timer, v.next_ms);
}

static void on_sched_timer(writer_timer_t *t)
{
    server_t *s = t->data;
    server_tick(s);
    if (!writer_makes_records(s))
        return; /* a new leader arms it again (qwait_rearm()) */
    qwait_gc(s);
    sched_view_t v;
    for (int i = 0; i < QWAIT_TICKS_PER_TURN && server_readonly(s) == NULL; i++) {
        if (!sched_next_due(core_scheds(s->core), &v) || v.next_ms >= s->now_ms)
            break;
        /* The apply may free what v points at: copy the names first. */
        ordo_buf_t names = ORDO_BUF_INIT;
        ordo_buf_append(&names, v.queue, v.qlen);
        ordo_buf_append(&names, v.name, v.nlen);
        record_t rec = {.type = REC_Q_TICK,
                        .q_sched = {.queue = names.data, .qlen = (uint32_t)v.qlen,
                                    .name = v.nlen ? names.data + v.qlen : NULL, .nlen = (uint32_t)v.nlen,
                                    .tick_ms = v.next_ms}};
        apply_result_t res;
        bool ok = qwait_apply(s, &rec, &res);
        ordo_buf_free(&names);
        if (!ok)
            break;
    }
    qwait_arm_schedules(s);
    writer_settle(s);
    turn_run_resumed(s);
    turn_flush(s);
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
    size_t need = nlen + (t->kind == QUEUE_TIMER_DEDUP || t->kind == QUEUE_TIMER_IDEM ? t->dlen : 0) +
                  (t->kind == QUEUE_TIMER_IDEM || t->kind == QUEUE_TIMER_PAUSE ? t->klen : 0);
    char *name = need <= sizeof stack ? stack : ordo_xmalloc(need);
    memcpy(name, qn, nlen); /* the apply may free what q points at */
    record_t rec;
    switch (t->kind) {
    case QUEUE_TIMER_LEASE:
        /* A lease that ran out under a retry policy comes back as its nack
         * would; a nack-delayed message (token 0) has had its delay. */
        if (t->token != 0 && qwait_retry_record(s, name, nlen, t->id, t->token, true, &rec))
            break;
        rec = (record_t){.type = REC_Q_REDELIVER,
                         .q_redeliver = {.queue = name, .qlen = (uint32_t)nlen, .msg_id = t->id, .token = t->token}};
        break;
    case QUEUE_TIMER_DELAY: case QUEUE_TIMER_RATE: /* promote: delayed messages, and tokens back */
        rec = (record_t){.type = REC_Q_PROMOTE, .q = {.queue = name, .qlen = (uint32_t)nlen}};
        break;
    case QUEUE_TIMER_DEDUP:
        rec = (record_t){.type = REC_Q_DEDUP_END, .q_dedup_end = {.queue = name, .qlen = (uint32_t)nlen}};
        memcpy(name + nlen, t->dedup_id, t->dlen);
        rec.q_dedup_end.dedup_id = name + nlen;
        rec.q_dedup_end.dlen = (uint32_t)t->dlen;
        break;
    case QUEUE_TIMER_IDEM:
        rec = (record_t){.type = REC_Q_DEDUP_END, .flags = REC_F_IDEM,
                         .q_dedup_end = {.queue = name, .qlen = (uint32_t)nlen}};
        memcpy(name + nlen, t->dedup_id, t->dlen);
        memcpy(name + nlen + t->dlen, t->key, t->klen);
        rec.q_dedup_end.dedup_id = t->dlen ? name + nlen : NULL;
        rec.q_dedup_end.dlen = (uint32_t)t->dlen;
        rec.q_dedup_end.key = t->klen ? name + nlen + t->dlen : NULL;
        rec.q_dedup_end.klen = (uint32_t)t->klen;
        break;
    case QUEUE_TIMER_PAUSE:
        rec = (record_t){.type = REC_Q_PAUSE,
                         .q_pause = {.queue = name, .qlen = (uint32_t)nlen,
                                     .op = t->queue_wide ? Q_PAUSE_END_QUEUE : Q_PAUSE_END_KEY}};
        if (!t->queue_wide) {
            memcpy(name + nlen, t->key, t->klen);
            rec.q_pause.key = t->klen ? name + nlen : NULL;
            rec.q_pause.klen = (uint32_t)t->klen;
        }
        break;
    default:
        rec = (record_t){.type = REC_Q_RESULT_END,
                         .q_result_end = {.queue = name, .qlen = (uint32_t)nlen, .msg_id = t->id}};
        break;
    }
    apply_result_t res;
    bool ok = qwait_apply(s, &rec, &res); /* the door answers and marks what it readied */
    if (name != stack)
        free(name);
    return ok;
}

/* Apply every deadline due by the writer's clock: of queue only, or of
 * every queue (only == NULL). Returns false if it stopped early. */
static bool run_due(server_t *s, const queue_t *only)
{
    for (int i = 0; i < QCMD_TIMERS_PER_TURN; i++) {
        if (server_readonly(s) != NULL)
            return true; /* could not be logged; deadlines wait for writes to work */
        queue_t *q = NULL;
        queue_timer_t t;
        bool have = only ? queue_next_timer(only, &t) : queue_set_next_timer(core_queues(s->core), &q, &t);
        if (!have || t.due_ms >= s->now_ms)
            return true;
        if (!fire(s, only ? only : q, &t)) {
            if (server_readonly(s) != NULL)
                return true; /* the log refused it */
            fprintf(stderr, "ordod: queue deadline (kind %d, due %llu) changed nothing; retrying later\n", t.kind,
                    (unsigned long long)t.due_ms);
            return false;
        }
    }
    return false;
}

static void on_queue_timer(writer_timer_t *t)
{
    server_t *s = t->data;
    uint64_t now = server_tick(s);
    if (!writer_makes_records(s))
        return; /* apply.h: cluster.c re-arms this when it starts to lead */
    qwait_gc(s);
    bool all = run_due(s, NULL);
    queue_t *q;
    queue_timer_t next;
    if (!all)
        arm_at(s, now + 1);
    else if (server_readonly(s) == NULL && queue_set_next_timer(core_queues(s->core), &q, &next))
        arm_at(s, next.due_ms);
    writer_settle(s);
    turn_run_resumed(s);
    turn_flush(s);
}

/* Before a command uses queue name: its due deadlines first. Returns
 * false if the log refused one of their records: the state now holds a
 * change the log does not, and the command must not show it (-READONLY). */
bool qwait_catch_up(server_t *s, const char *name, size_t nlen)
{
    qwait_gc(s);
    const queue_t *q = queue_get(core_queues(s->core), name, nlen);
    queue_timer_t t;
    if (q == NULL || server_readonly(s) != NULL || !queue_next_timer(q, &t) || t.due_ms >= s->now_ms)
        return true;
    run_due(s, q);
    /* What the deadlines readied goes to the parked first: the command
     * that comes after them must not overtake a waiter. */
    writer_settle(s);
    return server_readonly(s) == NULL;
}

void qwait_start(server_t *s)
{
    writer_timer_init(&s->writer.queues->timer, s->loop, s, on_queue_timer, s);
    writer_timer_init(&s->writer.queues->expire_timer, s->loop, s, on_expire_scan, s);
    writer_timer_init(&s->writer.queues->sched_timer, s->loop, s, on_sched_timer, s);
    qwait_rearm(s); /* deadlines recovered from the log */
}

void qwait_rearm(server_t *s)
{
    queue_t *q;
    queue_timer_t t;
    if (queue_set_next_timer(core_queues(s->core), &q, &t))
        arm_at(s, t.due_ms);
    qwait_arm_expire_scan(s);
    qwait_arm_schedules(s);
}

void qwait_close_handles(server_t *s)
{
    writer_timer_close(&s->writer.queues->timer);
    writer_timer_close(&s->writer.queues->expire_timer);
    writer_timer_close(&s->writer.queues->sched_timer);
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

void qwait_destroy(server_t *s)
{
    qwaits_t *qc = s->writer.queues;
    if (qc == NULL)
        return;
    ordo_htab_foreach(&qc->waits, free_qw, NULL);
    ordo_htab_destroy(&qc->waits);
    ordo_buf_free(&qc->scratch);
    ordo_buf_free(&qc->to_serve);
    free(qc);
    s->writer.queues = NULL;
}

/* ---- parking (the handlers' side) --------------------------------------------------- */

static qwaiter_t *waiter_data(int kind, qwait_t *qw, size_t extra)
{
    qwaiter_t *d = ordo_xcalloc(1, sizeof *d + extra);
    d->kind = kind;
    d->qw = qw;
    return d;
}

/* Park c until message id of queue name is done. */
void qwait_park_result(server_t *s, struct conn_s *c, const char *name, size_t nlen, uint64_t id, uint64_t timeout_ms,
                       bool has_timeout, bool call)
{
    qwait_t *qw = qw_get(s, name, nlen, true);
    qwaiter_t *d = waiter_data(QW_RESULT, qw, 0);
    d->call = call;
    d->iw = iw_get(qw, id, true);
    d->id = id;
    park(s, c, &d->iw->list, timeout_ms, has_timeout, d);
}

/* A full queue under ONFULL block: wait, with a copy of the push; a call
 * then waits for its result (call_pushed()). */
void qwait_park_push(server_t *s, struct conn_s *c, const record_t *rec, bool coalesce, uint64_t delay_ms,
                     uint64_t timeout_ms, bool has_timeout, bool call)
{
    const rec_q_push_t *p = &rec->q_push;
    assert(rec->type == REC_Q_PUSH);
    qwait_t *qw = qw_get(s, p->queue, p->qlen, true);
    qwaiter_t *d = waiter_data(QW_PUSH, qw, (size_t)p->klen + p->plen + p->dlen);
    d->klen = p->klen;
    d->plen = p->plen;
    d->dlen = p->dlen;
    d->has_dedup = p->dedup_id != NULL;
    d->idem = (rec->flags & REC_F_IDEM) != 0;
    d->idem_hash = p->idem_hash;
    d->idem_ms = p->idem_ms;
    d->coalesce = coalesce;
    d->delay_ms = delay_ms;
    d->call = call;
    if (p->klen)
        memcpy(d->bytes, p->key, p->klen);
    if (p->plen)
        memcpy(d->bytes + p->klen, p->payload, p->plen);
    if (p->dlen)
        memcpy(d->bytes + p->klen + p->plen, p->dedup_id, p->dlen);
    park(s, c, &qw->pushers, timeout_ms, has_timeout, d);
}

void qwait_park_pull(server_t *s, struct conn_s *c, const char *name, size_t nlen, uint32_t count, uint64_t lease_ms,
                     bool noack, uint64_t block_ms)
{
    qwait_t *qw = qw_get(s, name, nlen, true);
    qwaiter_t *d = waiter_data(QW_PULL, qw, 0);
    d->count = count;
    d->lease_ms = lease_ms;
    d->noack = noack;
    park(s, c, &qw->pullers, block_ms, true, d);
}

static void drop_ids(ordo_hnode_t *n, void *arg)
{
    server_t *s = arg;
    idwait_t *iw = (idwait_t *)n;
    while (wait_list_first(&iw->list) != NULL)
        finish_error(s, wait_list_first(&iw->list), "NOTFOUND the queue was dropped");
}

void qwait_dropped(server_t *s, const char *name, size_t nlen)
{
    qwait_t *qw = qw_get(s, name, nlen, false);
    if (qw == NULL)
        return;
    /* Callers and blocked pushers were waiting on what is gone; pullers
     * wait on the name and get whatever a later push brings. */
    ordo_htab_foreach(&qw->ids, drop_ids, s);
    while (wait_list_first(&qw->pushers) != NULL)
        finish_error(s, wait_list_first(&qw->pushers), "NOTFOUND the queue was dropped; nothing was pushed");
}

void qwait_blocked(server_t *s, const char *name, size_t nlen, size_t *pullers, size_t *pushers)
{
    qwait_t *qw = qw_get(s, name, nlen, false);
    *pullers = qw ? qw->pullers.len : 0;
    *pushers = qw ? qw->pushers.len : 0;
}

void qwait_init(server_t *s)
{
    qwaits_t *qc = ordo_xcalloc(1, sizeof *qc);
    if (ordo_htab_init(&qc->waits, qw_eq) != 0) {
        fprintf(stderr, "ordod: out of memory\n");
        abort();
    }
    /* Jitter needs no secret, only a different sequence per process. */
    uint8_t seed[ORDO_SIPHASH_KEY_LEN];
    (void)ordo_random_key(seed);
    memcpy(&qc->rng, seed, sizeof qc->rng);
    qc->rng |= 1;
    s->writer.queues = qc;
}
