/*
 * cmd_txn.c -- MULTI, EXEC, DISCARD, WATCH, UNWATCH: transactions made all
 * or nothing (docs/protocol.md, "Transactions").
 *
 * A connection's transaction state (txn_t, conn->txn) holds its watched
 * keys, each with the revision of its newest version (kv_last_change():
 * a deletion counts), and, between MULTI and EXEC, the queued commands
 * with copies of their arguments. cmd_dispatch() hands every command of a
 * connection in MULTI to cmd_txn_queue(), which answers QUEUED or an error
 * at once; an error (unknown command, arity, a syntax error, a blocking
 * form, a limit) makes the EXEC answer -EXECABORT.
 *
 * How a command is queued without being applied: command handlers make
 * records and hand them to the writer's door, writer_submit() (through
 * cmd_write() or the queue helpers), which is the one place that knows whether a
 * transaction runs (writer/apply.h, "Transactions"). So handlers stay as
 * they are, and EXEC runs them twice:
 *   1. check: every queued write handler runs with the writer in
 *      WTXN_CHECK; each record it makes is judged against the state plus
 *      the records before it (core_check()) and nothing is applied; the
 *      replies go to a scratch buffer. The first guard that fails (or the
 *      first error a write answers) aborts the EXEC with
 *      -CONFLICT <i> <reason>, and nothing was applied.
 *   2. apply: every queued command runs again in order with the writer in
 *      WTXN_APPLY, its reply going into EXEC's array: reads see the state
 *      as of their position; writes apply at consecutive revisions and are
 *      collected, then logged as one REC_TXN record (writer_txn_end()).
 *      EXEC's reply is written after that record, so it is released only
 *      when the record is durable, like every write's.
 * EXEC's reply is bounded by max-reply-bytes like any reply that gathers
 * many values: phase 1 also runs the reads of stored state, measuring
 * their replies (against the state before the transaction), and refuses
 * the whole EXEC with -LIMIT if they pass it; phase 2 replaces, in its
 * slot, a reply that would still carry the array past it (a read of what
 * the transaction wrote) with -LIMIT. Neither phase holds more than the
 * bound plus one command's reply.
 * At queue time a write handler also runs once in WTXN_SYNTAX: an error it
 * answers before making any record is a syntax error, answered at once.
 *
 * Invariant: conn->txn is NULL or owned by the connection; EXEC, DISCARD
 * and the connection's close free it (ending every watch).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "writer/apply.h"
#include "writer/queue_wait.h"

typedef struct txn_cmd_s {
    const cmd_def_t *def;
    size_t argc;
    resp_arg_t *argv;         /* argc arguments, their bytes after them in the same block */
} txn_cmd_t;

typedef struct txn_watch_s {
    char *key;
    size_t klen;
    uint64_t rev;             /* kv_last_change() at WATCH */
} txn_watch_t;

typedef struct txn_s {
    bool multi;               /* between MULTI and EXEC/DISCARD */
    bool aborted;             /* a queued command was refused: EXEC answers -EXECABORT */
    txn_cmd_t *cmds;
    size_t ncmds, capcmds;
    size_t bytes;             /* counted against max-multi-bytes */
    txn_watch_t *watches;
    size_t nwatches, capwatches;
} txn_t;

/* Bytes counted per queued argument besides its own: the record header
 * it may become (RECORD_HEADER_BYTES) rounded up, so max-multi-bytes also
 * bounds the REC_TXN record below the log's record limit. */
#define TXN_ARG_OVERHEAD_BYTES 96
/* Room for the -LIMIT line that replaces one command's reply in EXEC's
 * array when it would pass max-reply-bytes (refuse_reply()). */
#define TXN_SLOT_ERROR_BYTES 160

static txn_t *txn_of(conn_t *c)
{
    if (c->txn == NULL)
        c->txn = ordo_xcalloc(1, sizeof(txn_t));
    return c->txn;
}

static void txn_clear_cmds(txn_t *t)
{
    for (size_t i = 0; i < t->ncmds; i++)
        free(t->cmds[i].argv);
    free(t->cmds);
    t->cmds = NULL;
    t->ncmds = t->capcmds = 0;
    t->bytes = 0;
}

/* End the transaction and every watch. */
static void txn_reset(conn_t *c)
{
    txn_t *t = c->txn;
    if (t == NULL)
        return;
    txn_clear_cmds(t);
    for (size_t i = 0; i < t->nwatches; i++)
        free(t->watches[i].key);
    free(t->watches);
    free(t);
    c->txn = NULL;
}

void cmd_txn_conn_closed(conn_t *c) { txn_reset(c); }

/* ---- queueing ------------------------------------------------------------------ */

static bool any_arg_is(const cmd_ctx_t *x, size_t from, const char *word)
{
    for (size_t i = from; i < x->argc; i++)
        if (arg_is(x, i, word))
            return true;
    return false;
}

/* A form that would park the connection: refused inside MULTI. */
static bool blocking_form(const cmd_ctx_t *x, const cmd_def_t *d)
{
    const char *n = d->name;
    if (!strcasecmp(n, "Q.CALL") || !strcasecmp(n, "ELECT.CAMPAIGN") || !strcasecmp(n, "KV.WATCH") ||
        !strcasecmp(n, "ELECT.OBSERVE") || !strcasecmp(n, "KV.UNWATCH") || !strcasecmp(n, "Q.WATCH"))
        return true;
    if (!strcasecmp(n, "Q.PULL") || !strcasecmp(n, "Q.RESULT"))
        return any_arg_is(x, 2, "BLOCK");
    if (!strcasecmp(n, "LOCK.ACQUIRE"))
        return any_arg_is(x, 3, "WAIT");
    return false;
}

/* Run handler d on args into out (the writer's transaction mode decides
 * what its records do). */
static void run(cmd_ctx_t *x, const cmd_def_t *d, size_t argc, const resp_arg_t *argv, ordo_buf_t *out)
{
    cmd_ctx_t y = {x->srv, x->conn, out, x->proto, argc, argv, d};
    d->fn(&y);
    writer_settle(y.srv); /* as dispatch does after each command */
}

/* Bytes of records a queued command may make beyond what its arguments
 * count: Q.PULL makes one Q_DELIVER record (the queue's name and a header)
 * per message, up to COUNT (at most 1000: the syntax check refuses more).
 * Counted at queue time like arguments, so max-multi-bytes keeps bounding
 * the REC_TXN record below the log's record limit; without it a MULTI of
 * pulls on a long queue name made a record the log refused, and the server
 * read-only. */
static size_t extra_record_bytes(const cmd_ctx_t *x, const cmd_def_t *d)
{
    if (strcasecmp(d->name, "Q.PULL") != 0 || x->argc < 2)
        return 0;
    size_t count = 1;
    for (size_t i = 2; i + 1 < x->argc; i++) {
        if (!arg_is(x, i, "COUNT"))
            continue;
        const resp_arg_t *a = &x->argv[i + 1];
        count = 0;
        for (size_t j = 0; j < a->len && count <= 1000; j++)
            count = a->ptr[j] >= '0' && a->ptr[j] <= '9' ? count * 10 + (size_t)(a->ptr[j] - '0') : 1001;
        if (count > 1000)
            count = 1000;
    }
    return count * (x->argv[1].len + TXN_ARG_OVERHEAD_BYTES);
}

/* At queue time: does write d answer an error before it makes a record (a
 * syntax error)? If so it is written into x->out. */
static bool syntax_error(cmd_ctx_t *x, const cmd_def_t *d)
{
    writer_txn_t w;
    ordo_buf_t scratch = {0};
    writer_txn_begin(x->srv, &w, WTXN_SYNTAX);
    run(x, d, x->argc, x->argv, &scratch);
    bool made = w.count > 0;
    writer_txn_end(x->srv, &w);
    /* Only -ERR: -NOTHOLDER, -LIMIT, -READONLY... depend on the state,
     * which EXEC judges again. */
    bool err = scratch.len > 4 && strncmp(scratch.data, "-ERR ", 5) == 0 && !made;
    if (err)
        ordo_buf_append(x->out, scratch.data, scratch.len);
    ordo_buf_free(&scratch);
    return err;
}

static void queue_cmd(txn_t *t, const cmd_ctx_t *x, const cmd_def_t *d, size_t bytes)
{
    if (t->ncmds == t->capcmds) {
        t->capcmds = t->capcmds ? 2 * t->capcmds : 8;
        t->cmds = ordo_xrealloc(t->cmds, t->capcmds * sizeof *t->cmds);
    }
    size_t data = 0;
    for (size_t i = 0; i < x->argc; i++)
        data += x->argv[i].len;
    resp_arg_t *argv = ordo_xmalloc(x->argc * sizeof *argv + data + 1);
    char *p = (char *)(argv + x->argc);
    for (size_t i = 0; i < x->argc; i++) {
        memcpy(p, x->argv[i].ptr, x->argv[i].len);
        argv[i].ptr = p;
        argv[i].len = x->argv[i].len;
        p += x->argv[i].len;
    }
    t->cmds[t->ncmds++] = (txn_cmd_t){d, x->argc, argv};
    t->bytes += bytes;
}

bool cmd_txn_queue(cmd_ctx_t *x, const cmd_def_t *d)
{
    txn_t *t = x->conn->txn;
    if (t == NULL || !t->multi)
        return false;
    const char *n = d->name;
    if (!strcasecmp(n, "EXEC") || !strcasecmp(n, "DISCARD") || !strcasecmp(n, "MULTI") || !strcasecmp(n, "WATCH") ||
        !strcasecmp(n, "UNWATCH") || !strcasecmp(n, "QUIT"))
        return false; /* they run now */
    server_t *s = x->srv;
    size_t bytes = 0;
    for (size_t i = 0; i < x->argc; i++)
        bytes += x->argv[i].len + TXN_ARG_OVERHEAD_BYTES;
    bytes += extra_record_bytes(x, d);
    if (blocking_form(x, d)) {
        reply_errf(x, "ERR %s blocks or streams, which a transaction cannot: use it outside MULTI", d->name);
    } else if (t->ncmds + 1 > (size_t)s->cfg.max_multi_commands) {
        reply_errf(x, "LIMIT the transaction would hold more than max-multi-commands (%lld) commands",
                   (long long)s->cfg.max_multi_commands);
    } else if (t->bytes + bytes > (size_t)s->cfg.max_multi_bytes) {
        reply_errf(x, "LIMIT the transaction would hold more than max-multi-bytes (%lld) bytes",
                   (long long)s->cfg.max_multi_bytes);
    } else if (!((d->flags & CMD_WRITE) && syntax_error(x, d))) {
        queue_cmd(t, x, d, bytes);
        resp_add_simple(x->out, "QUEUED");
        return true;
    }
    t->aborted = true;
    return true;
}

void cmd_txn_refused(conn_t *c)
{
    if (c->txn != NULL && c->txn->multi)
        c->txn->aborted = true;
}

/* ---- the commands ------------------------------------------------------------------ */

static void cmd_multi(cmd_ctx_t *x)
{
    txn_t *t = txn_of(x->conn);
    if (t->multi) {
        reply_err(x, "ERR MULTI calls can not be nested");
        return;
    }
    t->multi = true;
    reply_ok(x);
}

static void cmd_discard(cmd_ctx_t *x)
{
    if (x->conn->txn == NULL || !x->conn->txn->multi) {
        reply_err(x, "ERR DISCARD without MULTI");
        return;
    }
    txn_reset(x->conn);
    reply_ok(x);
}

static void cmd_watch(cmd_ctx_t *x)
{
    txn_t *t = txn_of(x->conn);
    if (t->multi) {
        reply_err(x, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    for (size_t i = 1; i < x->argc; i++)
        if (!arg_name_ok(x, i))
            return;
    const kv_t *kv = core_kv(x->srv->core);
    for (size_t i = 1; i < x->argc; i++) {
        if (t->nwatches == t->capwatches) {
            t->capwatches = t->capwatches ? 2 * t->capwatches : 8;
            t->watches = ordo_xrealloc(t->watches, t->capwatches * sizeof *t->watches);
        }
        txn_watch_t *w = &t->watches[t->nwatches++];
        w->klen = x->argv[i].len;
        w->key = ordo_xmalloc(w->klen + 1);
        memcpy(w->key, x->argv[i].ptr, w->klen);
        w->rev = kv_last_change(kv, w->key, w->klen);
    }
    reply_ok(x);
}

static void cmd_unwatch(cmd_ctx_t *x)
{
    txn_t *t = x->conn->txn;
    if (t != NULL && !t->multi)
        txn_reset(x->conn);
    reply_ok(x);
}

static bool watched_changed(server_t *s, const txn_t *t)
{
    const kv_t *kv = core_kv(s->core);
    for (size_t i = 0; i < t->nwatches; i++)
        if (kv_last_change(kv, t->watches[i].key, t->watches[i].klen) != t->watches[i].rev)
            return true;
    return false;
}

/* The reason a guard failed, for -CONFLICT <i> <reason>. */
static const char *guard_reason(int status)
{
    switch (status) {
    case AP_CONFLICT: return "IFREV conflict: the key's revision is";
    case AP_NOTHOLDER: return "NOTHOLDER the FENCE token no longer holds";
    case AP_NOTFOUND: return "the lease does not exist";
    case AP_NOTINT: return "value is not an integer or out of range";
    case AP_OVERFLOW: return "increment or decrement would overflow";
    case AP_BUSY: return "BUSY the lock is held";
    case AP_NOOP: return "stale delivery token: the delivery is no longer current";
    case AP_QFULL: return "BUSY the queue is full (MAXLEN)";
    case AP_QLIMIT: return "LIMIT the key has MAXPERKEY messages waiting";
    default: return "the write would fail";
    }
}

/* A queued read phase 1 runs too, to measure its reply: a read of stored
 * state. Not the CMD_NOSTATE commands (CLIENT, CONFIG, DEBUG ... may act
 * on the connection or the server, which running twice would do twice;
 * their replies are counted in phase 2) nor SNAPSHOT (it starts one). */
static bool measured_read(const cmd_def_t *d)
{
    return !(d->flags & (CMD_WRITE | CMD_NOSTATE)) && strcasecmp(d->name, "SNAPSHOT") != 0;
}

/* Phase 1: run the queued writes in WTXN_CHECK, and the reads to measure
 * their replies. Returns 0 if every guard holds and the replies measured
 * fit max-reply-bytes, else the failing command's 1-based position, its
 * reason in why (*too_big set if the replies passed the bound). The
 * replies go to one scratch buffer emptied per command, and the
 * measuring stops at the first reply that passes the bound: what phase 1
 * costs is bounded like what phase 2 builds. */
static size_t check_all(cmd_ctx_t *x, txn_t *t, char *why, size_t wlen, bool *too_big)
{
    server_t *s = x->srv;
    writer_txn_t w;
    ordo_buf_t scratch = {0};
    size_t failed = 0, reply_bytes = 0;
    *too_big = false;
    writer_txn_begin(s, &w, WTXN_CHECK);
    for (size_t i = 0; i < t->ncmds && failed == 0; i++) {
        const cmd_def_t *d = t->cmds[i].def;
        if (!(d->flags & CMD_WRITE) && !measured_read(d))
            continue;
        scratch.len = 0;
        run(x, d, t->cmds[i].argc, t->cmds[i].argv, &scratch);
        reply_bytes += scratch.len;
        if (!(d->flags & CMD_WRITE)) {
            if (reply_bytes > (size_t)s->cfg.max_reply_bytes) {
                failed = i + 1;
                *too_big = true;
                snprintf(why, wlen, "the replies up to command %zu would be %zu bytes, above max-reply-bytes (%lld)",
                         i + 1, reply_bytes, (long long)s->cfg.max_reply_bytes);
            }
            continue;
        }
        if (w.failed) {
            failed = i + 1;
            if (w.fail_status == AP_CONFLICT)
                snprintf(why, wlen, "%s %llu", guard_reason(w.fail_status), (unsigned long long)w.fail_cur_rev);
            else
                snprintf(why, wlen, "%s", guard_reason(w.fail_status));
        } else if (scratch.len > 0 && scratch.data[0] == '-') {
            failed = i + 1; /* a limit, read-only: the command's own error */
            size_t n = scratch.len - 1;
            while (n > 0 && (scratch.data[n] == '\r' || scratch.data[n] == '\n'))
                n--;
            snprintf(why, wlen, "%.*s", (int)n, scratch.data + 1);
        }
    }
    writer_txn_end(s, &w);
    ordo_buf_free(&scratch);
    return failed;
}

/* Phase 2's bound: command i's reply, which made body pass
 * max-reply-bytes, is replaced in its slot by -LIMIT. Phase 1 measured
 * the reads against the state before the transaction, so only a read of
 * what the transaction itself wrote (or a command phase 1 does not run:
 * INFO, CLIENT LIST ...) gets here; the writes still apply, and their
 * replies are small. The reply dropped is freed here, so body never holds
 * more than the bound plus one reply. */
static void refuse_reply(cmd_ctx_t *x, ordo_buf_t *body, size_t before, size_t i)
{
    size_t bytes = body->len - before;
    body->len = before;
    char line[TXN_SLOT_ERROR_BYTES - 2];
    int n = snprintf(line, sizeof line,
                     "LIMIT reply of command %zu (%zu bytes) would carry EXEC's reply past max-reply-bytes (%lld)", i,
                     bytes, (long long)x->srv->cfg.max_reply_bytes);
    assert(n > 0 && (size_t)n < sizeof line);
    resp_add_error(body, line);
}

bool cmd_txn_multi(const conn_t *c) { return c->txn != NULL && c->txn->multi; }

long cmd_txn_queued(const conn_t *c) { return cmd_txn_multi(c) ? (long)c->txn->ncmds : -1; }

static void cmd_exec(cmd_ctx_t *x)
{
    server_t *s = x->srv;
    txn_t *t = x->conn->txn;
    if (t == NULL || !t->multi) {
        reply_err(x, "ERR EXEC without MULTI");
        return;
    }
    if (t->aborted) {
        txn_reset(x->conn);
        s->stats.transactions_aborted++;
        reply_err(x, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    /* The user's rules again: they may have changed since the commands
     * were queued. One refused command refuses the whole EXEC, before
     * anything is applied. */
    for (size_t i = 0; i < t->ncmds; i++) {
        cmd_ctx_t q = *x;
        q.argc = t->cmds[i].argc;
        q.argv = t->cmds[i].argv;
        if (!cmd_acl_permits(&q, t->cmds[i].def, "multi")) {
            txn_reset(x->conn);
            s->stats.transactions_aborted++;
            return;
        }
    }
    if (watched_changed(s, t)) {
        txn_reset(x->conn);
        s->stats.transactions_aborted++;
        resp_add_null_array(x->out, x->proto);
        return;
    }
    /* Due queue deadlines first, as records of their own: a delivery whose
     * lease ran out is redelivered before the guards are judged. */
    for (size_t i = 0; i < t->ncmds; i++)
        if (t->cmds[i].argc >= 2 && !strncasecmp(t->cmds[i].def->name, "Q.", 2))
            qwait_catch_up(s, t->cmds[i].argv[1].ptr, t->cmds[i].argv[1].len);
    char why[400];
    bool too_big;
    size_t failed = check_all(x, t, why, sizeof why, &too_big);
    if (failed != 0) {
        txn_reset(x->conn);
        s->stats.transactions_aborted++;
        if (too_big)
            reply_errf(x, "LIMIT %s; nothing was applied", why);
        else
            reply_errf(x, "CONFLICT %zu %s", failed, why);
        return;
    }
    writer_txn_t w;
    ordo_buf_t body = {0};
    resp_add_array(&body, t->ncmds);
    writer_txn_begin(s, &w, WTXN_APPLY);
    for (size_t i = 0; i < t->ncmds; i++) {
        size_t before = body.len;
        run(x, t->cmds[i].def, t->cmds[i].argc, t->cmds[i].argv, &body);
        if (body.len > (size_t)s->cfg.max_reply_bytes)
            refuse_reply(x, &body, before, i + 1);
    }
    assert(body.len <= (size_t)s->cfg.max_reply_bytes + TXN_SLOT_ERROR_BYTES * t->ncmds);
    bool stored = writer_txn_end(s, &w);
    txn_reset(x->conn);
    if (!stored) {
        s->stats.transactions_aborted++;
        reply_errf(x, "READONLY the log cannot be written, so writes are refused: %s", server_readonly(s));
    } else {
        s->stats.transactions_total++;
        ordo_buf_append(x->out, body.data, body.len);
    }
    ordo_buf_free(&body);
}

const cmd_def_t cmd_txn_defs[] = {
    /* MULTI and DISCARD read no state, so a follower answers them: a
     * transaction sent to a follower then fails as a whole (each command
     * queued after MULTI is refused -NOTLEADER, which aborts the EXEC even
     * if this member leads by the time it comes). Refusing MULTI instead
     * let the commands after it run one by one on a member that won an
     * election in the middle of the pipeline, out of order with the ones
     * it refused (the producer's batches, src/client/producer.c). */
    {"MULTI", 1, CMD_NOSTATE, cmd_multi, "Start a transaction: later commands answer QUEUED until EXEC or DISCARD",
     "", "transactions"},
    {"EXEC", 1, CMD_WRITE, cmd_exec,
     "Run the queued commands as one record: their replies, nil if a WATCHed key changed, "
     "-CONFLICT i reason if a guard fails",
     "", "transactions"},
    {"DISCARD", 1, CMD_NOSTATE, cmd_discard, "Drop the queued commands and every watched key", "", "transactions"},
    {"WATCH", -2, 0, cmd_watch, "Make the next EXEC answer nil if one of the keys changes before it", "key [key ...]",
     "transactions"},
    {"UNWATCH", 1, 0, cmd_unwatch, "Forget every watched key", "", "transactions"},
};

const size_t cmd_txn_ndefs = sizeof cmd_txn_defs / sizeof cmd_txn_defs[0];
