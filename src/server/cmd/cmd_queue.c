/*
 * cmd_queue.c -- the Q.* commands: keyed work queues over the wire.
 *
 * Every change to a queue is a record (core.h, REC_Q_*) that enters through
 * the writer's door (cmd_write(), writer_submit()), so it is logged and replayed; queue.h is the
 * state machine those records drive. This file decides *which* records to
 * make for a client's command, and speaks RESP about queues.
 *
 * The wait lists of blocked commands, serving them (with the records that
 * makes) and the queue timer are the writer's: writer/queue_wait.h.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/siphash.h"
#include "cmd.h"
#include "core/coord.h"
#include "core/schedule.h"
#include "writer/apply.h"
#include "writer/coord_wait.h"
#include "writer/queue_wait.h"

/* COUNT of Q.PULL, Q.PEEK and Q.TOPKEYS: one reply stays a bounded size
 * (a thousand messages), and a pull holds the loop for at most this many
 * records. */
#define QCMD_COUNT_MAX 1000

static void reply_readonly(cmd_ctx_t *x)
{
    reply_errf(x, "READONLY the log cannot be written, so writes are refused: %s", server_readonly(x->srv));
}

/* After a write command tried its records: if the server is read-only
 * (the door refused them, or the log refused one of them and the change
 * exists only in memory), the command answers -READONLY, never 0 or an
 * empty array as if nothing had happened. Returns true if it did. */
static bool refused(cmd_ctx_t *x)
{
    if (server_readonly(x->srv) == NULL)
        return false;
    reply_readonly(x);
    return true;
}

/* ---- argument helpers ------------------------------------------------------------ */

/* Times in ms are at most ten years: now + ms never overflows, and a
 * larger value is a client's mistake. */
#define QCMD_MS_MAX (10ull * 366 * 24 * 3600 * 1000)

static bool arg_ms(cmd_ctx_t *x, size_t i, uint64_t *out)
{
    if (i >= x->argc) {
        reply_syntax_at(x, i - 1); /* the option lacks its value */
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
        reply_syntax_at(x, i - 1);
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

static void add_field_u(ordo_buf_t *out, const char *name, uint64_t v)
{
    resp_add_bulk_str(out, name);
    resp_add_uint(out, v);
}


/* Reply with message id's fate if it has one; false if it is not done. */
static bool reply_fate_now(cmd_ctx_t *x, uint64_t id)
{
    const queue_t *q = queue_get(core_queues(x->srv->core), QNAME(x));
    queue_result_t r = {0};
    int fate = q != NULL ? queue_result(q, id, &r) : QUEUE_FATE_NONE;
    if (fate == QUEUE_FATE_NONE)
        return false;
    outcome_t o = {.kind = OUTCOME_FATE, .fate = {.id = id, .fate = fate, .result = &r}};
    cmd_render(x->srv, x->out, x->proto, &o);
    return true;
}

/* ---- push, call --------------------------------------------------------------------- */

typedef struct push_args_s {
    size_t dedup_arg;         /* index of the ID value, 0 if none */
    size_t idem_arg;          /* index of the IDEMPOTENCY value, 0 if none */
    bool coalesce;
    uint64_t delay_ms;
    uint64_t timeout_ms;
    bool has_timeout;
    cmd_fence_t fence;        /* Q.PUSH FENCE ... (cmd.h); checked before the record is made */
    uint64_t idem_hash;       /* IDEMPOTENCY: request_hash() */
} push_args_t;

static bool parse_push_opts(cmd_ctx_t *x, bool call, push_args_t *a)
{
    memset(a, 0, sizeof *a);
    for (size_t i = 4; i < x->argc; i++) {
        if (arg_is(x, i, "ID") && i + 1 < x->argc && a->dedup_arg == 0 && a->idem_arg == 0) {
            a->dedup_arg = ++i;
            if (!arg_name_ok(x, i))
                return false;
        } else if (arg_is(x, i, "IDEMPOTENCY") && i + 1 < x->argc && a->dedup_arg == 0 && a->idem_arg == 0) {
            a->idem_arg = ++i;
            if (!arg_name_ok(x, i))
                return false;
            if (x->argv[i].len == 0) {
                reply_err(x, "ERR the idempotency key is empty");
                return false;
            }
        } else if (!call && arg_is(x, i, "COALESCE")) {
            a->coalesce = true;
        } else if (!call && arg_is(x, i, "DELAY")) {
            if (!arg_ms(x, ++i, &a->delay_ms))
                return false;
        } else if (arg_is(x, i, "TIMEOUT") && !a->has_timeout) {
            if (!arg_ms(x, ++i, &a->timeout_ms))
                return false;
            a->has_timeout = true;
        } else if (!call && arg_is(x, i, "FENCE") && a->fence.kind == FENCE_NONE) {
            size_t took = cmd_fence_parse(x, i, &a->fence);
            if (took == 0)
                return false;
            i += took - 1;
        } else {
            reply_syntax_at(x, i);
            return false;
        }
    }
    return true;
}

static void push_from_args(record_t *rec, cmd_ctx_t *x, const push_args_t *a)
{
    memset(rec, 0, sizeof *rec);
    rec->type = REC_Q_PUSH;
    rec_q_push_t *p = &rec->q_push;
    p->queue = x->argv[1].ptr;
    p->qlen = (uint32_t)x->argv[1].len;
    p->key = x->argv[2].ptr;
    p->klen = (uint32_t)x->argv[2].len;
    p->payload = x->argv[3].ptr;
    p->plen = (uint32_t)x->argv[3].len;
    if (a->dedup_arg) {
        p->dedup_id = x->argv[a->dedup_arg].ptr;
        p->dlen = (uint32_t)x->argv[a->dedup_arg].len;
    }
    p->delay_ms = a->delay_ms;
    rec->flags = a->coalesce ? REC_F_COALESCE : 0;
    if (a->idem_arg) {
        p->dedup_id = x->argv[a->idem_arg].ptr;
        p->dlen = (uint32_t)x->argv[a->idem_arg].len;
        p->idem_hash = a->idem_hash;
        p->idem_ms = (uint64_t)x->srv->cfg.http_idempotency_ms;
        rec->flags |= REC_F_IDEM;
    }
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

/* -LIMIT: the key has MAXPERKEY messages waiting. */
static void reply_limit(cmd_ctx_t *x)
{
    char text[WRITER_REFUSAL_MAX];
    qwait_limit_text(x->srv, QNAME(x), text, sizeof text);
    reply_err(x, text);
}

static void reply_full(cmd_ctx_t *x)
{
    const queue_t *q = queue_get(core_queues(x->srv->core), QNAME(x));
    queue_config_t cfg = {0};
    if (q != NULL)
        queue_config(q, &cfg);
    reply_errf(x, "BUSY the queue is full (MAXLEN %u pending messages)", cfg.maxlen);
}

/* A push's fence: a lock's is checked here too (a push record carries no
 * fence), like an election's or a delivery's, just before the record. */
static bool fence_holds_now(cmd_ctx_t *x, const cmd_fence_t *f)
{
    if (f->kind != FENCE_LOCK)
        return cmd_fence_holds(x, f);
    if (coord_fence_ok(core_coord(x->srv->core), f->name, f->nlen, f->token, x->srv->now_ms))
        return true;
    reply_notholder_lock(x, f);
    return false;
}

/* ---- idempotency keys ------------------------------------------------------------------
 *
 * IDEMPOTENCY key (what HTTP's Idempotency-Key becomes, net/http.c) binds
 * the key to this request for http-idempotency-ms: the entry is scoped to
 * the queue and the message key (queue.h, "Idempotency keys") and holds
 * request_hash(). The same key on the same entity with the same request is
 * a repeat (the first push's id, or the first call's answer); with another
 * request it is -IDEMPOTENCY (HTTP 422), and nothing is pushed. The hash is
 * computed here, from the command rather than from HTTP's bytes: the verb
 * and the queue and key are what the method and path name (so two spellings
 * of one path, %61 and a, are one request), and the payload is the body.
 * The query (?timeout=) says how long this caller waits, not what it asks,
 * so it is not part of the request.
 *
 * The entries are bounded by http-idempotency-keys-max over all queues: a
 * push with a new key past it is refused -BUSY (HTTP 429), while repeats of
 * kept keys and pushes without one go on; entries leave as their retention
 * ends. Refusing, rather than forgetting the oldest key early, keeps the
 * promise that a kept key never answers with a second message. */

/* A fixed key: the hash tells requests apart for a key's owner, so it must
 * be the same on every member and after a restart; it is no secret. */
static const uint8_t idem_sip_key[ORDO_SIPHASH_KEY_LEN] = "ordo-idempotent";

static uint64_t request_hash(const cmd_ctx_t *x, bool call)
{
    ordo_buf_t b = ORDO_BUF_INIT;
    char n[8];
    ordo_buf_puts(&b, call ? "Q.CALL" : "Q.PUSH");
    for (size_t i = 1; i <= 2; i++) {
        put_u32(n, (uint32_t)x->argv[i].len);
        ordo_buf_append(&b, n, 4);
        ordo_buf_append(&b, x->argv[i].ptr, x->argv[i].len);
    }
    put_u64(n, ordo_siphash(idem_sip_key, x->argv[3].ptr, x->argv[3].len));
    ordo_buf_append(&b, n, 8);
    uint64_t h = ordo_siphash(idem_sip_key, b.data, b.len);
    ordo_buf_free(&b);
    return h;
}

/* Before an IDEMPOTENCY push's record: false (reply written) if the key
 * is bound to another request, or it is new and the bound is reached. */
static bool idem_admits(cmd_ctx_t *x, bool call, push_args_t *a)
{
    const resp_arg_t *k = &x->argv[a->idem_arg];
    a->idem_hash = request_hash(x, call);
    const queue_t *q = queue_get(core_queues(x->srv->core), QNAME(x));
    queue_idem_t e;
    if (q != NULL && queue_idem_lookup(q, x->argv[2].ptr, x->argv[2].len, k->ptr, k->len, x->srv->now_ms, &e)) {
        if (e.hash == a->idem_hash)
            return true;
        reply_errf(x, "IDEMPOTENCY the idempotency key '%.*s' was used for another request to this queue and key "
                      "(message %llu); a key is bound to its first request",
                   (int)(k->len < 200 ? k->len : 200), k->ptr, (unsigned long long)e.msg_id);
        return false;
    }
    if (queue_set_idem_count(core_queues(x->srv->core)) >= (size_t)x->srv->cfg.http_idempotency_keys_max) {
        reply_errf(x, "BUSY %lld idempotency keys are kept (http-idempotency-keys-max); a new one is refused "
                      "until older ones end",
                   (long long)x->srv->cfg.http_idempotency_keys_max);
        return false;
    }
    return true;
}

/* The front half of Q.PUSH and Q.CALL: check the arguments, apply the
 * queue's due timers, make the push record and write it. Returns false
 * (reply written) if it never reached the core. */
static bool push_write(cmd_ctx_t *x, bool call, push_args_t *a, record_t *rec, apply_result_t *res)
{
    if (!queue_arg_ok(x) || !arg_name_ok(x, 2) || !arg_value_ok(x, 3) || !parse_push_opts(x, call, a))
        return false;
    qwait_catch_up(x->srv, QNAME(x));
    if (!fence_holds_now(x, &a->fence))
        return false;
    if (a->idem_arg && !idem_admits(x, call, a))
        return false;
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
        resp_add_uint(x->out, res.queue.id);
        break;
    case AP_QLIMIT:
        reply_limit(x);
        return;
    default: /* AP_QFULL; inside EXEC nothing parks (core_check() refuses it first) */
        if (onfull_block(x->srv, QNAME(x)) && x->srv->writer.txn == NULL)
            qwait_park_push(x->srv, x->conn, &rec, a.coalesce, a.delay_ms, a.timeout_ms, a.has_timeout, false);
        else
            reply_full(x);
        return;
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
        reply_limit(x);
        return;
    }
    if (res.status == AP_QFULL) {
        if (onfull_block(x->srv, QNAME(x)))
            qwait_park_push(x->srv, x->conn, &rec, a.coalesce, a.delay_ms, a.timeout_ms, a.has_timeout, true);
        else
            reply_full(x);
        return;
    }
    uint64_t id = res.queue.id;
    /* A repeat (ID inside the window, or IDEMPOTENCY) replays the first call's fate. */
    if (res.status == AP_NOOP && reply_fate_now(x, id))
        return;
    /* Parked before the queue's pullers are served (the settle after this
     * command): a NOACK puller may finish it at once. */
    qwait_park_result(x->srv, x->conn, QNAME(x), id, a.timeout_ms, a.has_timeout, true);
}

/* ---- pull, ack, nack, extend -------------------------------------------------------- */

static void render_message(void *arg, const queue_delivery_t *d) { cmd_render_message(arg, d); }

/* Deliver up to count messages and answer them, or nothing if none was
 * delivered or the log refused a delivery (refused() answers then).
 * The messages are rendered aside until their count is known: nothing
 * enters the connection's output while a record may still fail (a failed
 * log closes connections with output, persist.c). Returns how many. */
static size_t pull_now(cmd_ctx_t *x, uint32_t count, uint64_t lease_ms, bool noack)
{
    ordo_buf_t msgs = {0};
    size_t n = qwait_deliver(x->srv, QNAME(x), count, lease_ms, noack, render_message, &msgs);
    if (n > 0 && server_readonly(x->srv) == NULL) {
        resp_add_array(x->out, n);
        ordo_buf_append(x->out, msgs.data, msgs.len);
    }
    ordo_buf_free(&msgs);
    return n;
}

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
            reply_syntax_at(x, i);
            return;
        }
    }
    qwait_catch_up(x->srv, QNAME(x));
    size_t n = pull_now(x, count, lease_ms, noack);
    if (refused(x))
        return;
    if (n > 0)
        return; /* deliveries made room: parked pushers are served at the settle */
    if (!block) {
        resp_add_array(x->out, 0);
        return;
    }
    qwait_park_pull(x->srv, x->conn, QNAME(x), count, lease_ms, noack, block_ms);
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
    qwait_catch_up(x->srv, QNAME(x));
    bool ok = valid && writer_submit(x->srv, rec, WRITER_CLIENT, res, NULL, 0) == WRITER_APPLIED &&
              res->status == AP_OK;
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
    record_t rec = {.type = REC_Q_ACK,
                    .q_ack = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len, .msg_id = id, .token = token}};
    if (x->argc == 6 && arg_is(x, 4, "RESULT")) {
        if (!arg_value_ok(x, 5))
            return;
        rec.flags = REC_F_RESULT;
        rec.q_ack.result = x->argv[5].ptr;
        rec.q_ack.rlen = (uint32_t)x->argv[5].len;
    } else if (x->argc != 4) {
        reply_syntax_at(x, x->argc > 4 ? 4 : x->argc - 1);
        return;
    }
    apply_result_t res;
    apply_answer(x, &rec, token != 0, &res); /* the door answers the message's callers */
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
        reply_syntax_at(x, x->argc > 4 ? 4 : x->argc - 1);
        return;
    }
    record_t rec = {.type = REC_Q_NACK,
                    .q_nack = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len, .msg_id = id, .token = token,
                               .delay_ms = delay_ms}};
    /* Without DELAY, a queue's retry policy decides (after its due
     * deadlines, so the delivery's attempt is the current one). */
    if (x->argc == 4 && token != 0 && qwait_catch_up(x->srv, QNAME(x)))
        qwait_retry_record(x->srv, QNAME(x), id, token, false, &rec);
    apply_result_t res;
    apply_answer(x, &rec, token != 0, &res); /* a dead letter answers the callers at the door */
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
    record_t rec = {.type = REC_Q_EXTEND,
                    .q_extend = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len, .msg_id = id,
                                 .token = token, .ttl_ms = ms}};
    apply_result_t res;
    apply_answer(x, &rec, token != 0, &res);
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
        reply_syntax_at(x, x->argc > 3 ? 3 : x->argc - 1);
        return;
    }
    if (!qwait_catch_up(x->srv, QNAME(x))) {
        reply_readonly(x);
        return;
    }
    if (reply_fate_now(x, id))
        return;
    if (block)
        qwait_park_result(x->srv, x->conn, QNAME(x), id, block_ms, true, false);
    else
        resp_add_null(x->out, x->proto);
}

/* ---- config, unpark, drop ------------------------------------------------------------ */

static bool parse_u32_opt(cmd_ctx_t *x, size_t i, uint32_t lo, uint32_t hi, const char *what, uint32_t *out)
{
    uint64_t v;
    if (i >= x->argc) {
        reply_syntax_at(x, i - 1);
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

/* RATE|KEYRATE n PER ms (n 0: no limit, PER then optional): *i is at the
 * option's name and ends at its last argument. */
static bool parse_rate(cmd_ctx_t *x, size_t *i, uint32_t *n, uint64_t *per_ms)
{
    if (!parse_u32_opt(x, ++*i, 0, QUEUE_RATE_MAX, "RATE's count", n))
        return false;
    *per_ms = 0;
    if (*n == 0) {
        if (*i + 2 < x->argc && arg_is(x, *i + 1, "PER"))
            *i += 2;
        return true;
    }
    if (*i + 2 >= x->argc || !arg_is(x, *i + 1, "PER")) {
        reply_err(x, "ERR RATE and KEYRATE take n PER ms");
        return false;
    }
    *i += 2;
    uint64_t v;
    if (!arg_u64(x, *i, &v))
        return false;
    if (v < 1 || v > QUEUE_RATE_PER_MS_MAX) {
        reply_errf(x, "ERR PER must be 1..%u ms", QUEUE_RATE_PER_MS_MAX);
        return false;
    }
    *per_ms = v;
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
            else if (arg_is(x, i, "drop"))
                cfg.onpoison = QUEUE_ONPOISON_DROP;
            else
                ok = false, reply_err(x, "ERR ONPOISON is deadletter, park or drop");
        } else if (arg_is(x, i, "LEASE")) {
            ok = arg_ms(x, ++i, &cfg.lease_ms);
            if (ok && cfg.lease_ms == 0)
                ok = false, reply_err(x, "ERR LEASE must be at least 1 ms");
        } else if (arg_is(x, i, "DEDUP")) {
            ok = arg_ms(x, ++i, &cfg.dedup_ms);
        } else if (arg_is(x, i, "RESULTTTL")) {
            ok = arg_ms(x, ++i, &cfg.resultttl_ms);
        } else if (arg_is(x, i, "BACKOFF") && i + 1 < x->argc) {
            i++;
            if (arg_is(x, i, "none"))
                cfg.backoff = QUEUE_BACKOFF_NONE;
            else if (arg_is(x, i, "fixed"))
                cfg.backoff = QUEUE_BACKOFF_FIXED;
            else if (arg_is(x, i, "exponential"))
                cfg.backoff = QUEUE_BACKOFF_EXPONENTIAL;
            else
                ok = false, reply_err(x, "ERR BACKOFF is none, fixed or exponential");
        } else if (arg_is(x, i, "BACKOFFBASE")) {
            ok = arg_ms(x, ++i, &cfg.backoff_base_ms);
            if (ok && cfg.backoff_base_ms == 0)
                ok = false, reply_err(x, "ERR BACKOFFBASE must be at least 1 ms");
        } else if (arg_is(x, i, "BACKOFFCAP")) {
            ok = arg_ms(x, ++i, &cfg.backoff_cap_ms);
        } else if (arg_is(x, i, "MAXAGE")) {
            ok = arg_ms(x, ++i, &cfg.maxage_ms);
        } else if (arg_is(x, i, "MAXWAIT")) {
            ok = arg_ms(x, ++i, &cfg.maxwait_ms);
        } else if (arg_is(x, i, "FAIRNESS") && i + 1 < x->argc) {
            i++;
            if (arg_is(x, i, "oldest"))
                cfg.fairness = QUEUE_FAIR_OLDEST;
            else if (arg_is(x, i, "roundrobin"))
                cfg.fairness = QUEUE_FAIR_ROUNDROBIN;
            else
                ok = false, reply_err(x, "ERR FAIRNESS is oldest or roundrobin");
        } else if (arg_is(x, i, "KEYCONCURRENCY")) {
            ok = parse_u32_opt(x, ++i, 1, QUEUE_KEYCONC_MAX, "KEYCONCURRENCY", &cfg.keyconc);
        } else if (arg_is(x, i, "RATE") || arg_is(x, i, "KEYRATE")) {
            bool key = arg_is(x, i, "KEYRATE");
            ok = parse_rate(x, &i, key ? &cfg.keyrate_n : &cfg.rate_n, key ? &cfg.keyrate_per_ms : &cfg.rate_per_ms);
        } else if (arg_is(x, i, "DEADLETTER") && i + 1 < x->argc) {
            ok = arg_name_ok(x, ++i);
            cfg.deadletter = x->argv[i].len ? x->argv[i].ptr : NULL;
            cfg.dl_len = x->argv[i].len;
            if (ok && cfg.dl_len == x->argv[1].len && memcmp(cfg.deadletter, x->argv[1].ptr, cfg.dl_len) == 0)
                ok = false, reply_err(x, "ERR a queue cannot be its own DEADLETTER queue");
        } else {
            ok = false;
            reply_syntax_at(x, i);
        }
        if (!ok)
            return;
    }
    if (cfg.backoff == QUEUE_BACKOFF_EXPONENTIAL && cfg.backoff_cap_ms < cfg.backoff_base_ms) {
        reply_errf(x, "ERR BACKOFFCAP (%llu ms) is below BACKOFFBASE (%llu ms)",
                   (unsigned long long)cfg.backoff_cap_ms, (unsigned long long)cfg.backoff_base_ms);
        return;
    }
    /* The door logs the record after applying it, and the apply frees the
     * queue's dead-letter name, which cfg.deadletter points at when no
     * DEADLETTER was given: the record gets a copy. */
    ordo_buf_t dl = ORDO_BUF_INIT;
    if (cfg.deadletter != NULL) {
        ordo_buf_append(&dl, cfg.deadletter, cfg.dl_len);
        cfg.deadletter = dl.data;
    }
    char blob[CORE_QCONFIG_BYTES];
    core_qconfig_encode(&cfg, blob);
    record_t rec = {.type = REC_Q_CONFIG,
                    .q_config = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len, .config = blob,
                                 .clen = sizeof blob, .deadletter = cfg.deadletter, .dllen = (uint32_t)cfg.dl_len}};
    apply_result_t res;
    bool written = cmd_write(x, &rec, &res);
    ordo_buf_free(&dl);
    if (!written)
        return;
    if (res.status != AP_OK) {
        reply_err(x, "ERR the configuration was refused (KEYCONCURRENCY below what a key has in flight now?)");
        return;
    }
    reply_ok(x); /* a larger MAXLEN makes room: parked pushers are served at the settle */
}

static void cmd_qunpark(cmd_ctx_t *x)
{
    if (!queue_arg_ok(x) || !arg_name_ok(x, 2))
        return;
    record_t rec = {.type = REC_Q_UNPARK,
                    .q_unpark = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len, .key = x->argv[2].ptr,
                                 .klen = (uint32_t)x->argv[2].len}};
    apply_result_t res;
    apply_answer(x, &rec, true, &res);
}

/* Q.PAUSE queue [KEY key] [FOR ms|UNTIL ms] / Q.RESUME queue [KEY key]:
 * the key's index in *key_arg (0: the queue itself). FOR is from now, on
 * the writer's clock; UNTIL is ms since the epoch (an HTTP Retry-After
 * date, converted); a time already past makes a pause that the timer ends
 * at once. */
static bool pause_args(cmd_ctx_t *x, bool pause, size_t *key_arg, uint64_t *until_ms)
{
    *key_arg = 0;
    *until_ms = 0;
    bool timed = false;
    if (!queue_arg_ok(x))
        return false;
    for (size_t i = 2; i < x->argc; i++) {
        uint64_t v;
        if (arg_is(x, i, "KEY") && i + 1 < x->argc && *key_arg == 0) {
            *key_arg = ++i;
            if (!arg_name_ok(x, i))
                return false;
        } else if (pause && !timed && arg_is(x, i, "FOR")) {
            if (!arg_ms(x, ++i, &v))
                return false;
            if (v == 0) {
                reply_err(x, "ERR FOR must be at least 1 ms");
                return false;
            }
            *until_ms = x->srv->now_ms + v;
            timed = true;
        } else if (pause && !timed && arg_is(x, i, "UNTIL") && i + 1 < x->argc) {
            if (!arg_u64(x, ++i, &v))
                return false;
            if (v == 0 || v > x->srv->now_ms + QCMD_MS_MAX) {
                reply_err(x, "ERR UNTIL is ms since the epoch, at most ten years from now");
                return false;
            }
            *until_ms = v;
            timed = true;
        } else {
            reply_syntax(x);
            return false;
        }
    }
    return true;
}

static void qpause_or_resume(cmd_ctx_t *x, bool pause)
{
    size_t key_arg;
    uint64_t until_ms;
    if (!pause_args(x, pause, &key_arg, &until_ms))
        return;
    record_t rec = {.type = REC_Q_PAUSE,
                    .q_pause = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len, .until_ms = until_ms}};
    if (key_arg) {
        rec.q_pause.op = pause ? Q_PAUSE_KEY : Q_RESUME_KEY;
        rec.q_pause.key = x->argv[key_arg].ptr;
        rec.q_pause.klen = (uint32_t)x->argv[key_arg].len;
    } else {
        rec.q_pause.op = pause ? Q_PAUSE_QUEUE : Q_RESUME_QUEUE;
    }
    if (!pause) {
        apply_result_t res;
        apply_answer(x, &rec, true, &res); /* what it readies is served at the settle */
        return;
    }
    qwait_catch_up(x->srv, QNAME(x));
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    resp_add_int(x->out, res.status == AP_OK);
}

static void cmd_qpause(cmd_ctx_t *x) { qpause_or_resume(x, true); }
static void cmd_qresume(cmd_ctx_t *x) { qpause_or_resume(x, false); }

/* ---- redrive, cancel ------------------------------------------------------------------
 *
 * Both find their messages with a read (which key holds the id, which
 * keys have dead letters) and make records that name the key: apply
 * stays O(the key's FIFO) and never depends on the order a table is
 * walked in, which differs between members. */

/* Keys of one Q.REDRIVE without KEY or ID: a call moves at most this many
 * keys' dead letters (each key's, all of them) and answers how many
 * messages moved, so one call holds the loop for a bounded time; the
 * caller repeats until 0. */
#define QCMD_REDRIVE_KEYS_MAX 1000

typedef struct find_s {
    uint64_t id;              /* find: the message wanted */
    const char *key;          /* found: its key (or, listing keys, the last one) */
    size_t klen;
    ordo_buf_t *keys;         /* listing keys: u32 length | key, each distinct key once */
    size_t nkeys;
} find_t;

static bool find_id(void *arg, const char *key, size_t klen, uint64_t id, uint32_t attempt)
{
    (void)attempt;
    find_t *f = arg;
    if (id != f->id)
        return true;
    f->key = key;
    f->klen = klen;
    return false;
}

/* Messages of a key come together, oldest first: a key is new when it
 * differs from the one before. */
static bool list_key(void *arg, const char *key, size_t klen, uint64_t id, uint32_t attempt)
{
    (void)id, (void)attempt;
    find_t *f = arg;
    if (f->key == key && f->klen == klen)
        return true;
    if (f->nkeys == QCMD_REDRIVE_KEYS_MAX)
        return false;
    f->key = key;
    f->klen = klen;
    char n[4];
    put_u32(n, (uint32_t)klen);
    ordo_buf_append(f->keys, n, 4);
    ordo_buf_append(f->keys, key, klen);
    f->nkeys++;
    return true;
}

/* One REC_Q_REDRIVE; returns how many it moved (0 also when refused:
 * refused() tells). */
static size_t redrive_one(cmd_ctx_t *x, const resp_arg_t *from, const char *key, size_t klen, uint64_t id)
{
    record_t rec = {.type = REC_Q_REDRIVE,
                    .q_redrive = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len, .dlq = from->ptr,
                                  .dlen = (uint32_t)from->len, .key = klen ? key : NULL, .klen = (uint32_t)klen,
                                  .msg_id = id}};
    apply_result_t res;
    if (writer_submit(x->srv, &rec, WRITER_CLIENT, &res, NULL, 0) != WRITER_APPLIED || res.status != AP_OK)
        return 0;
    return res.queue.moved;
}

/* Q.REDRIVE queue [FROM dlq] [KEY key|ID id]: dead letters back to queue. */
static void cmd_qredrive(cmd_ctx_t *x)
{
    if (!queue_arg_ok(x))
        return;
    resp_arg_t from = {{NULL}, 0};
    size_t key_arg = 0;
    uint64_t id = 0;
    for (size_t i = 2; i < x->argc; i++) {
        if (arg_is(x, i, "FROM") && i + 1 < x->argc && from.ptr == NULL) {
            from = x->argv[++i];
            if (!arg_name_ok(x, i))
                return;
        } else if (arg_is(x, i, "KEY") && i + 1 < x->argc && key_arg == 0 && id == 0) {
            key_arg = ++i;
            if (!arg_name_ok(x, i))
                return;
        } else if (arg_is(x, i, "ID") && i + 1 < x->argc && key_arg == 0 && id == 0) {
            if (!arg_u64(x, ++i, &id))
                return;
            if (id == 0) {
                reply_err(x, "ERR ID must be a message id (at least 1)");
                return;
            }
        } else {
            reply_syntax(x);
            return;
        }
    }
    const queue_t *q = queue_get(core_queues(x->srv->core), QNAME(x));
    queue_config_t cfg = {0};
    if (q != NULL)
        queue_config(q, &cfg);
    if (from.ptr == NULL) {
        if (cfg.deadletter == NULL) {
            reply_err(x, "ERR the queue has no DEADLETTER queue; name the one to take from with FROM");
            return;
        }
        from.ptr = cfg.deadletter; /* valid until the next Q.CONFIG of the queue */
        from.len = cfg.dl_len;
    }
    if (from.len == x->argv[1].len && memcmp(from.ptr, x->argv[1].ptr, from.len) == 0) {
        reply_err(x, "ERR a queue cannot be redriven from itself");
        return;
    }
    qwait_catch_up(x->srv, QNAME(x));
    qwait_catch_up(x->srv, from.ptr, from.len);
    const queue_t *dlq = queue_get(core_queues(x->srv->core), from.ptr, from.len);
    size_t moved = 0;
    if (dlq == NULL) {
        /* nothing to move */
    } else if (key_arg != 0) {
        moved = redrive_one(x, &from, x->argv[key_arg].ptr, x->argv[key_arg].len, 0);
    } else if (id != 0) {
        find_t f = {.id = id};
        queue_foreach_waiting(dlq, find_id, &f);
        if (f.key != NULL) {
            ordo_buf_t k = ORDO_BUF_INIT; /* the record's apply may free what f.key points at */
            ordo_buf_append(&k, f.key, f.klen);
            moved = redrive_one(x, &from, k.data, f.klen, id);
            ordo_buf_free(&k);
        }
    } else {
        ordo_buf_t keys = ORDO_BUF_INIT;
        find_t f = {.keys = &keys};
        queue_foreach_waiting(dlq, list_key, &f);
        for (size_t off = 0; off < keys.len && server_readonly(x->srv) == NULL;) {
            uint32_t klen = get_u32(keys.data + off);
            moved += redrive_one(x, &from, keys.data + off + 4, klen, 0);
            off += 4 + (size_t)klen;
        }
        ordo_buf_free(&keys);
    }
    if (refused(x))
        return;
    resp_add_uint(x->out, moved);
}

/* Q.CANCEL queue id: 1, or 0 if no waiting or delayed message has it. */
static void cmd_qcancel(cmd_ctx_t *x)
{
    uint64_t id;
    if (!queue_arg_ok(x) || !arg_u64(x, 2, &id))
        return;
    qwait_catch_up(x->srv, QNAME(x));
    const queue_t *q = queue_get(core_queues(x->srv->core), QNAME(x));
    find_t f = {.id = id};
    if (q != NULL) {
        queue_foreach_waiting(q, find_id, &f);
        if (f.key == NULL)
            f.key = queue_delayed_key(q, id, &f.klen);
    }
    ordo_buf_t k = ORDO_BUF_INIT; /* the apply frees what f.key points at */
    if (f.key != NULL)
        ordo_buf_append(&k, f.key, f.klen);
    record_t rec = {.type = REC_Q_CANCEL,
                    .q_msg = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len,
                              .key = f.klen ? k.data : NULL, .klen = (uint32_t)f.klen, .msg_id = id}};
    apply_result_t res;
    apply_answer(x, &rec, f.key != NULL, &res); /* its callers are answered -CANCELLED at the door */
    ordo_buf_free(&k);
}

/* ---- schedules -------------------------------------------------------------------------
 *
 * Q.SCHEDULE ADD name queue key payload EVERY ms [START unix-ms]|CRON expr
 *            [MISSED FIRE|SKIP]          -> OK (replaces a schedule of that name)
 * Q.SCHEDULE DEL name                    -> 1/0
 * Q.SCHEDULE LIST                        -> one map per schedule, by name
 * Schedule names share max-name-bytes with queues; the records name the
 * schedule's queue, so they are queue records (schedule.h). */

/* The options of Q.SCHEDULE ADD after the payload into *spec; false
 * (reply written) if they are wrong. */
static bool sched_opts(cmd_ctx_t *x, sched_spec_t *spec)
{
    bool start = false;
    *spec = (sched_spec_t){.missed = SCHED_MISSED_FIRE};
    for (size_t i = 6; i < x->argc; i++) {
        if (arg_is(x, i, "EVERY") && i + 1 < x->argc && spec->every_ms == 0) {
            if (!arg_ms(x, ++i, &spec->every_ms))
                return false;
        } else if (arg_is(x, i, "START") && i + 1 < x->argc && !start) {
            if (!arg_u64(x, ++i, &spec->start_ms))
                return false;
            start = true;
        } else if (arg_is(x, i, "CRON") && i + 1 < x->argc && spec->cron == NULL) {
            i++;
            spec->cron = x->argv[i].ptr;
            spec->cron_len = x->argv[i].len;
        } else if (arg_is(x, i, "MISSED") && i + 1 < x->argc && (arg_is(x, i + 1, "fire") || arg_is(x, i + 1, "skip"))) {
            spec->missed = arg_is(x, ++i, "skip") ? SCHED_MISSED_SKIP : SCHED_MISSED_FIRE;
        } else {
            reply_syntax(x);
            return false;
        }
    }
    if (start && spec->cron != NULL) {
        reply_err(x, "ERR START goes with EVERY, not CRON");
        return false;
    }
    if (!start)
        spec->start_ms = x->srv->now_ms; /* the first tick is one interval from now */
    const char *why = sched_spec_valid(spec);
    if (why != NULL) {
        reply_errf(x, "ERR %s", why);
        return false;
    }
    if (sched_next_after(spec, x->srv->now_ms) == 0) {
        reply_err(x, "ERR the CRON expression matches no time in the next five years");
        return false;
    }
    return true;
}

static void sched_add_cmd(cmd_ctx_t *x)
{
    if (x->argc < 6) {
        reply_syntax(x);
        return;
    }
    if (!arg_name_ok(x, 2) || !arg_name_ok(x, 3) || !arg_name_ok(x, 4) || !arg_value_ok(x, 5))
        return;
    if (x->argv[3].len == 0) {
        reply_err(x, "ERR the queue name is empty");
        return;
    }
    sched_spec_t spec;
    if (!sched_opts(x, &spec))
        return;
    const struct sched_set_s *set = core_scheds(x->srv->core);
    sched_view_t old;
    if (!sched_get(set, x->argv[2].ptr, x->argv[2].len, &old) &&
        sched_count(set) >= (size_t)x->srv->cfg.max_schedules) {
        reply_errf(x, "LIMIT %zu schedules exist (max-schedules); delete one first", sched_count(set));
        return;
    }
    ordo_buf_t val = ORDO_BUF_INIT;
    sched_encode(&spec, x->argv[5].ptr, x->argv[5].len, &val);
    record_t rec = {.type = REC_Q_SCHEDULE_ADD,
                    .q_sched = {.queue = x->argv[3].ptr, .qlen = (uint32_t)x->argv[3].len, .name = x->argv[2].ptr,
                                .nlen = (uint32_t)x->argv[2].len, .key = x->argv[4].ptr,
                                .klen = (uint32_t)x->argv[4].len, .spec = val.data, .slen = (uint32_t)val.len}};
    apply_result_t res;
    if (cmd_write(x, &rec, &res)) {
        if (res.status == AP_OK)
            reply_ok(x);
        else
            reply_err(x, "ERR the schedule was refused");
    }
    ordo_buf_free(&val);
}

static void sched_del_cmd(cmd_ctx_t *x)
{
    if (x->argc != 3) {
        reply_syntax(x);
        return;
    }
    if (!arg_name_ok(x, 2))
        return;
    sched_view_t v;
    if (!sched_get(core_scheds(x->srv->core), x->argv[2].ptr, x->argv[2].len, &v)) {
        resp_add_int(x->out, 0);
        return;
    }
    ordo_buf_t q = ORDO_BUF_INIT; /* the apply frees what v points at */
    ordo_buf_append(&q, v.queue, v.qlen);
    record_t rec = {.type = REC_Q_SCHEDULE_DEL,
                    .q_sched = {.queue = q.data, .qlen = (uint32_t)v.qlen, .name = x->argv[2].ptr,
                                .nlen = (uint32_t)x->argv[2].len}};
    apply_result_t res;
    bool ok = writer_submit(x->srv, &rec, WRITER_CLIENT, &res, NULL, 0) == WRITER_APPLIED && res.status == AP_OK;
    ordo_buf_free(&q);
    if (refused(x))
        return;
    resp_add_int(x->out, ok);
}

/* Views stay valid while nothing changes (a read does not). */
static void sched_collect_into(void *arg, const sched_view_t *v)
{
    struct { sched_view_t *v; size_t n; } *acc = arg;
    acc->v[acc->n++] = *v;
}

static int sched_by_name(const void *a, const void *b)
{
    const sched_view_t *x = *(const sched_view_t *const *)a, *y = *(const sched_view_t *const *)b;
    size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
    int c = n ? memcmp(x->name, y->name, n) : 0;
    return c != 0 ? c : (x->nlen > y->nlen) - (x->nlen < y->nlen);
}

static void sched_list_cmd(cmd_ctx_t *x)
{
    if (x->argc != 2) {
        reply_syntax(x);
        return;
    }
    const struct sched_set_s *set = core_scheds(x->srv->core);
    size_t n = sched_count(set);
    sched_view_t *views = ordo_xmalloc((n ? n : 1) * sizeof *views);
    const sched_view_t **order = ordo_xmalloc((n ? n : 1) * sizeof *order);
    struct { sched_view_t *v; size_t n; } acc = {views, 0};
    sched_foreach(set, sched_collect_into, &acc);
    for (size_t i = 0; i < n; i++)
        order[i] = &views[i];
    qsort(order, n, sizeof *order, sched_by_name);
    ordo_buf_t *o = x->out;
    resp_add_array(o, n);
    for (size_t i = 0; i < n; i++) {
        const sched_view_t *v = order[i];
        resp_add_map(o, x->proto, 11);
        resp_add_bulk_str(o, "name");
        resp_add_bulk(o, v->name, v->nlen);
        resp_add_bulk_str(o, "queue");
        resp_add_bulk(o, v->queue, v->qlen);
        resp_add_bulk_str(o, "key");
        resp_add_bulk(o, v->key, v->klen);
        resp_add_bulk_str(o, "payload");
        resp_add_bulk(o, v->payload, v->plen);
        add_field_u(o, "every", v->spec.every_ms);
        add_field_u(o, "start", v->spec.cron ? 0 : v->spec.start_ms);
        resp_add_bulk_str(o, "cron");
        if (v->spec.cron)
            resp_add_bulk(o, v->spec.cron, v->spec.cron_len);
        else
            resp_add_null(o, x->proto);
        resp_add_bulk_str(o, "missed");
        resp_add_bulk_str(o, v->spec.missed == SCHED_MISSED_SKIP ? "skip" : "fire");
        add_field_u(o, "next", v->next_ms);
        add_field_u(o, "pushed", v->pushed);
        add_field_u(o, "skipped", v->skipped);
    }
    free(order);
    free(views);
}

static void cmd_qschedule(cmd_ctx_t *x)
{
    if (arg_is(x, 1, "ADD"))
        sched_add_cmd(x);
    else if (arg_is(x, 1, "DEL"))
        sched_del_cmd(x);
    else if (arg_is(x, 1, "LIST"))
        sched_list_cmd(x);
    else
        reply_err(x, "ERR Q.SCHEDULE takes ADD, DEL or LIST");
}

static void cmd_qdrop(cmd_ctx_t *x)
{
    if (!queue_arg_ok(x))
        return;
    qwait_gc(x->srv);
    record_t rec = {.type = REC_Q_DROP, .q = {.queue = x->argv[1].ptr, .qlen = (uint32_t)x->argv[1].len}};
    apply_result_t res;
    bool ok = qwait_apply(x->srv, &rec, &res);
    if (refused(x))
        return;
    resp_add_int(x->out, ok); /* the door answered its callers and pushers -NOTFOUND */
}

/* ---- reads -------------------------------------------------------------------------- */

/* The queue a read command looks at, its due deadlines applied, in *q
 * (NULL if there is none). Returns false (reply written) if the log
 * refused a deadline's record. */
static bool read_queue(cmd_ctx_t *x, const queue_t **q)
{
    if (!qwait_catch_up(x->srv, QNAME(x))) {
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
    resp_add_map(o, x->proto, 45);
    add_field_u(o, "maxlen", in.config.maxlen);
    add_field_u(o, "maxperkey", in.config.maxperkey);
    resp_add_bulk_str(o, "onfull");
    resp_add_bulk_str(o, in.config.onfull == QUEUE_ONFULL_BLOCK ? "block" : "reject");
    resp_add_bulk_str(o, "onpoison");
    resp_add_bulk_str(o, in.config.onpoison == QUEUE_ONPOISON_PARK   ? "park"
                         : in.config.onpoison == QUEUE_ONPOISON_DROP ? "drop"
                                                                     : "deadletter");
    add_field_u(o, "maxattempts", in.config.maxattempts);
    add_field_u(o, "lease", in.config.lease_ms);
    add_field_u(o, "dedup", in.config.dedup_ms);
    add_field_u(o, "resultttl", in.config.resultttl_ms);
    static const char *const backoffs[] = {"none", "fixed", "exponential"};
    resp_add_bulk_str(o, "backoff");
    resp_add_bulk_str(o, backoffs[in.config.backoff <= QUEUE_BACKOFF_EXPONENTIAL ? in.config.backoff : 0]);
    add_field_u(o, "backoff_base", in.config.backoff_base_ms);
    add_field_u(o, "backoff_cap", in.config.backoff_cap_ms);
    add_field_u(o, "maxage", in.config.maxage_ms);
    add_field_u(o, "maxwait", in.config.maxwait_ms);
    add_field_u(o, "rate", in.config.rate_n);
    add_field_u(o, "rate_per", in.config.rate_per_ms);
    add_field_u(o, "keyrate", in.config.keyrate_n);
    add_field_u(o, "keyrate_per", in.config.keyrate_per_ms);
    add_field_u(o, "keyconcurrency", in.config.keyconc);
    resp_add_bulk_str(o, "fairness");
    resp_add_bulk_str(o, in.config.fairness == QUEUE_FAIR_ROUNDROBIN ? "roundrobin" : "oldest");
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
    add_field_u(o, "paused", in.paused);
    add_field_u(o, "paused_until", in.paused_until_ms);
    add_field_u(o, "paused_keys", in.paused_keys);
    add_field_u(o, "throttled_keys", in.throttled_keys);
    add_field_u(o, "dedup_entries", in.dedup_entries);
    add_field_u(o, "idempotency_keys", in.idem_entries);
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
    size_t pullers, pushers;
    qwait_blocked(x->srv, QNAME(x), &pullers, &pushers);
    add_field_u(o, "blocked_pullers", pullers);
    add_field_u(o, "blocked_pushers", pushers);
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
        reply_syntax_at(x, 2);
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
    /* max-reply-bytes: up to count messages, fewer if their bytes pass it
     * (the first is always shown). */
    size_t bytes = 0, shown = 0;
    while (shown < n && (shown == 0 || bytes < (size_t)x->srv->cfg.max_reply_bytes)) {
        bytes += QWAIT_MESSAGE_FRAMING_BYTES + m[shown].klen + m[shown].plen;
        shown++;
    }
    resp_add_array(x->out, shown);
    for (size_t i = 0; i < shown; i++)
        cmd_render_message(x->out, &m[i]);
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
    resp_add_map(o, x->proto, 12);
    resp_add_bulk_str(o, "state");
    resp_add_bulk_str(o, states[k.state & 3]);
    add_field_u(o, "id", k.inflight_id);
    add_field_u(o, "since", k.since_ms);
    add_field_u(o, "deadline", k.deadline_ms);
    add_field_u(o, "attempt", k.attempt);
    add_field_u(o, "waiting", k.waiting);
    add_field_u(o, "token", k.token);
    add_field_u(o, "next_attempt", k.next_attempt_ms);
    add_field_u(o, "paused", k.paused);
    add_field_u(o, "paused_until", k.paused_until_ms);
    add_field_u(o, "throttled_until", k.throttled_until_ms);
    add_field_u(o, "inflight", k.inflight);
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

/* Q.WATCH queue [KEY key] [FROM rev]: the watch id, then a push per message
 * event of the queue (of that key), in apply order, each with the revision
 * of the record that made it, on the same timeline as KV.WATCH's events.
 * FROM rev first replays the retained events after rev (a bounded history,
 * queue-watch-history-bytes, from the server's start); a rev older than
 * the history answers -COMPACTED <floor>, and the client resyncs from
 * Q.PEEK / Q.KEYINFO and watches FROM the floor; a rev beyond the current
 * revision answers -ERR (its events would be at or below it). */
static void cmd_qwatch(cmd_ctx_t *x)
{
    conn_t *c = x->conn;
    server_t *s = x->srv;
    const resp_arg_t *key = NULL;
    bool has_from = false;
    uint64_t from = 0;
    for (size_t i = 2; i < x->argc; i++) {
        if (arg_is(x, i, "KEY") && i + 1 < x->argc && key == NULL) {
            key = &x->argv[++i];
        } else if (arg_is(x, i, "FROM") && i + 1 < x->argc && !has_from) {
            if (!arg_u64(x, ++i, &from))
                return;
            has_from = true;
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    if (!arg_name_ok(x, 1) || (key != NULL && !arg_name_ok(x, (size_t)(key - x->argv))))
        return;
    /* A FROM beyond the current revision is refused, as KV.WATCH refuses
     * it: the next events would be at or below it. */
    if (has_from && from > core_rev(s->core)) {
        reply_errf(x, "ERR revision %llu is in the future (current revision %llu)", (unsigned long long)from,
                   (unsigned long long)core_rev(s->core));
        return;
    }
    uint64_t floor = coord_wait_qwatch_floor(s);
    if (has_from && from < floor) {
        reply_errf(x, "COMPACTED %llu queue events are kept only after this revision "
                      "(queue-watch-history-bytes, since the server started); resync and watch FROM it",
                   (unsigned long long)floor);
        return;
    }
    if (c->nwatches >= (size_t)s->cfg.max_watches_per_client) {
        reply_errf(x, "LIMIT this connection has %zu watches (max-watches-per-client)", c->nwatches);
        return;
    }
    const resp_arg_t *q = &x->argv[1];
    uint64_t id = coord_wait_qwatch(s, c, &c->observers, q->ptr, q->len, key ? key->ptr : NULL, key ? key->len : 0);
    c->nwatches++;
    resp_add_uint(x->out, id);
    if (has_from)
        coord_wait_qwatch_catchup(s, c, id, q->ptr, q->len, key ? key->ptr : NULL, key ? key->len : 0, from);
}

/* ---- registration -------------------------------------------------------------------- */

const cmd_def_t cmd_queue_defs[] = {
    {"Q.PUSH", -4, CMD_WRITE, cmd_qpush,
     "Push a message for a key; the message id",
     "queue key payload [ID dedup-id|IDEMPOTENCY key] [COALESCE] [DELAY ms] [TIMEOUT ms] [FENCE lock token|FENCE ELECTION name term|FENCE DELIVERY queue id token]", "ordo-queue"},
    {"Q.CALL", -4, CMD_WRITE, cmd_qcall,
     "Push a message and wait for the result the consumer acks it with",
     "queue key payload [TIMEOUT ms] [ID dedup-id|IDEMPOTENCY key]", "ordo-queue"},
    {"Q.PULL", -2, CMD_WRITE, cmd_qpull,
     "Take up to n deliverable messages (a key's up to its KEYCONCURRENCY in flight), optionally waiting",
     "queue [COUNT n] [BLOCK ms] [LEASE ms] [NOACK]", "ordo-queue"},
    {"Q.ACK", -4, CMD_WRITE, cmd_qack,
     "Finish a delivery, optionally with a result; 1, or 0 if the token is stale",
     "queue id token [RESULT payload]", "ordo-queue"},
    {"Q.NACK", -4, CMD_WRITE, cmd_qnack,
     "Give a delivery back, after DELAY or the queue's BACKOFF; 1/0",
     "queue id token [DELAY ms]", "ordo-queue"},
    {"Q.EXTEND", 5, CMD_WRITE, cmd_qextend,
     "Extend a delivery's lease to ms from now; 1/0",
     "queue id token ms", "ordo-queue"},
    {"Q.RESULT", -3, 0, cmd_qresult,
     "A message's result, optionally waiting for it; nil if not done",
     "queue id [BLOCK ms]", "ordo-queue"},
    {"Q.CONFIG", -2, CMD_WRITE, cmd_qconfig,
     "Configure a queue; options not given keep their value",
     "queue [MAXLEN n] [MAXPERKEY n] [ONFULL REJECT|BLOCK] [LEASE ms] [MAXATTEMPTS n] [DEADLETTER queue] [ONPOISON DEADLETTER|PARK|DROP] [DEDUP ms] [RESULTTTL ms] [BACKOFF NONE|FIXED|EXPONENTIAL] [BACKOFFBASE ms] [BACKOFFCAP ms] [MAXAGE ms] [MAXWAIT ms] [RATE n PER ms] [KEYRATE n PER ms] [KEYCONCURRENCY n] [FAIRNESS OLDEST|ROUNDROBIN]", "ordo-queue"},
    {"Q.UNPARK", 3, CMD_WRITE, cmd_qunpark, "Let a parked key's backlog flow again; 1/0", "queue key", "ordo-queue"},
    {"Q.PAUSE", -2, CMD_WRITE, cmd_qpause,
     "Stop deliveries of a key, or of the whole queue, until resumed or a time; 1, or 0 if paused so already",
     "queue [KEY key] [FOR ms|UNTIL unix-ms]", "ordo-queue"},
    {"Q.RESUME", -2, CMD_WRITE, cmd_qresume,
     "Let a paused key, or the whole queue, deliver again; 1, or 0 if it was not paused",
     "queue [KEY key]", "ordo-queue"},
    {"Q.REDRIVE", -2, CMD_WRITE, cmd_qredrive,
     "Move dead letters (all, a key's, or one) back to the queue, each key's in order; how many moved",
     "queue [FROM dlq] [KEY key|ID id]", "ordo-queue"},
    {"Q.CANCEL", 3, CMD_WRITE, cmd_qcancel,
     "Remove a waiting or delayed message before any delivery; 1, or 0 if there is none such",
     "queue id", "ordo-queue"},
    {"Q.SCHEDULE", -2, CMD_WRITE, cmd_qschedule,
     "Named schedules that push a message on an interval or a cron expression (UTC): add, delete, list",
     "ADD name queue key payload EVERY ms [START unix-ms] [MISSED FIRE|SKIP]|ADD name queue key payload CRON expr [MISSED FIRE|SKIP]|DEL name|LIST",
     "ordo-queue"},
    {"Q.DROP", 2, CMD_WRITE, cmd_qdrop, "Remove a queue and everything in it; 1/0", "queue", "ordo-queue"},
    {"Q.LEN", 2, 0, cmd_qlen, "A queue's waiting, in-flight and delayed message counts", "queue", "ordo-queue"},
    {"Q.INFO", 2, 0, cmd_qinfo, "A queue's configuration and counters", "queue", "ordo-queue"},
    {"Q.LIST", 1, 0, cmd_qlist, "The queue names", "", "ordo-queue"},
    {"Q.PEEK", -2, 0, cmd_qpeek,
     "The next messages a pull would get, changing nothing",
     "queue [COUNT n]", "ordo-queue"},
    {"Q.KEYINFO", 3, 0, cmd_qkeyinfo,
     "A queue key's state: idle, processing, waiting or parked",
     "queue key", "ordo-queue"},
    {"Q.WATCH", -2, CMD_WATCHMODE, cmd_qwatch,
     "Follow a queue's message events (pushed, delivered, acked, nacked, deadlettered, parked): the watch id, "
     "then pushes",
     "queue [KEY key] [FROM rev]", "ordo-queue"},
    {"Q.TOPKEYS", -2, 0, cmd_qtopkeys, "The keys with the most waiting messages", "queue [COUNT n]", "ordo-queue"},
};

const size_t cmd_queue_ndefs = sizeof cmd_queue_defs / sizeof cmd_queue_defs[0];
