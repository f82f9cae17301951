/*
 * calls.c -- the typed calls of ordo/client.h: each builds one command,
 * sends it with ordo_client_command() and turns the reply into a struct or
 * an error code. Reply shapes are those of docs/protocol.md; a reply of
 * another shape is ORDO_EPROTO, never a guess.
 *
 * Blocking commands (Q.PULL BLOCK, Q.CALL, LOCK.ACQUIRE WAIT,
 * ELECT.CAMPAIGN) get a client-side deadline of the server-side wait plus
 * the connection's call timeout, so the server's answer always comes first.
 */
#include "client_int.h"

#include "base/dec.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* No typed command needs more arguments than this. */
#define CMD_ARGS_MAX 16

typedef struct cmd {
    int flags; /* client_call() flags: CLIENT_CALL_SAFE for a command the
                  server recognises when repeated */
    int argc;
    const char *argv[CMD_ARGS_MAX];
    size_t lens[CMD_ARGS_MAX];
    char nums[CMD_ARGS_MAX][1 + DEC_U64_MAX]; /* sign and digits */
} cmd_t;

static void arg(cmd_t *m, const void *p, size_t n)
{
    assert(m->argc < CMD_ARGS_MAX);
    m->argv[m->argc] = p;
    m->lens[m->argc] = n;
    m->argc++;
}

static void sarg(cmd_t *m, const char *s)
{
    arg(m, s, strlen(s));
}

static void iarg(cmd_t *m, int64_t v)
{
    assert(m->argc < CMD_ARGS_MAX);
    char *p = m->nums[m->argc];
    size_t n = 0;
    if (v < 0)
        p[n++] = '-';
    n += dec_u64(p + n, v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v);
    arg(m, p, n);
}

/* run() -- send; ORDO_OK with a non-error *r, or the mapped error (*r NULL). */
static int run(ordo_client_t *c, cmd_t *m, int timeout_ms, ordo_reply_t **r)
{
    int rc = client_call(c, timeout_ms, m->argc, m->argv, m->lens, m->flags, r);
    if (rc != ORDO_OK)
        return rc;
    rc = ordo_client_reply_error(c, *r);
    if (rc != ORDO_OK) {
        ordo_reply_free(*r);
        *r = NULL;
    }
    return rc;
}

static int proto_err(ordo_client_t *c, ordo_reply_t *r, const char *what)
{
    ordo_reply_free(r);
    return client_seterr(c, ORDO_EPROTO, "unexpected reply to %s", what);
}

/* run_found() -- a command whose nil reply means "no such thing":
 * ORDO_ENOTFOUND for nil (freed), else as run(). */
static int run_found(ordo_client_t *c, cmd_t *m, ordo_reply_t **r)
{
    int rc = run(c, m, 0, r);
    if (rc != ORDO_OK)
        return rc;
    if ((*r)->type == ORDO_REPLY_NIL) {
        ordo_reply_free(*r);
        *r = NULL;
        return ORDO_ENOTFOUND;
    }
    return ORDO_OK;
}

/* run_int() -- a command whose reply is an integer. */
static int run_int(ordo_client_t *c, cmd_t *m, int timeout_ms, int64_t *out)
{
    ordo_reply_t *r;
    int rc = run(c, m, timeout_ms, &r);
    if (rc != ORDO_OK)
        return rc;
    if (r->type != ORDO_REPLY_INTEGER)
        return proto_err(c, r, m->argv[0]);
    if (out)
        *out = r->integer;
    ordo_reply_free(r);
    return ORDO_OK;
}

/* reply_01() -- the outcome of reply r (freed here) to a command
 * answering 1, or 0 for a stale token. */
static int reply_01(ordo_client_t *c, ordo_reply_t *r, const char *verb)
{
    int rc = ordo_client_reply_error(c, r);
    if (rc != ORDO_OK) {
        ordo_reply_free(r);
        return rc;
    }
    if (r->type != ORDO_REPLY_INTEGER)
        return proto_err(c, r, verb);
    int64_t v = r->integer;
    ordo_reply_free(r);
    return v == 1 ? ORDO_OK : client_seterr(c, ORDO_ESTALE, "%s: token no longer holds", verb);
}

/* run_01() -- a command answering 1, or 0 for a stale token. */
static int run_01(ordo_client_t *c, cmd_t *m)
{
    ordo_reply_t *r;
    int rc = client_call(c, 0, m->argc, m->argv, m->lens, m->flags, &r);
    return rc != ORDO_OK ? rc : reply_01(c, r, m->argv[0]);
}

/* Deadline for a command that waits wait_ms server-side (< 0: forever). */
static int wait_timeout(const ordo_client_t *c, int64_t wait_ms)
{
    if (wait_ms < 0)
        return ORDO_WAIT_FOREVER;
    int64_t t = wait_ms + c->call_timeout_ms;
    return t > INT32_MAX ? ORDO_WAIT_FOREVER : (int)t;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int is_str(const ordo_reply_t *r)
{
    return r->type == ORDO_REPLY_STRING || r->type == ORDO_REPLY_STATUS;
}

/* ---- versioned keys ---------------------------------------------------- */

void ordo_kv_clear(ordo_kv_t *kv)
{
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof *kv);
}

static void cond_args(cmd_t *m, const ordo_kv_cond_t *cond, int with_lease)
{
    if (cond == NULL)
        return;
    if (cond->ifrev >= 0) {
        sarg(m, "IFREV");
        iarg(m, cond->ifrev);
    }
    if (with_lease && cond->lease > 0) {
        sarg(m, "LEASE");
        iarg(m, cond->lease);
    }
    if (cond->fence_lock) {
        sarg(m, "FENCE");
        sarg(m, cond->fence_lock);
        iarg(m, cond->fence_token);
    }
}

int ordo_kv_get(ordo_client_t *c, const void *key, size_t key_len, int64_t rev, ordo_kv_t *out)
{
    memset(out, 0, sizeof *out);
    cmd_t m = { 0 };
    sarg(&m, "KV.GET");
    arg(&m, key, key_len);
    if (rev > 0) {
        sarg(&m, "REV");
        iarg(&m, rev);
    }
    ordo_reply_t *r;
    int rc = run_found(c, &m, &r);
    if (rc != ORDO_OK)
        return rc;
    if (r->type != ORDO_REPLY_ARRAY || r->n != 5 || !is_str(r->elem[0]))
        return proto_err(c, r, "KV.GET");
    out->key = dup_bytes(key, key_len);
    out->key_len = key_len;
    out->value = dup_bytes(r->elem[0]->str, r->elem[0]->len);
    out->value_len = r->elem[0]->len;
    out->create_rev = r->elem[1]->integer;
    out->mod_rev = r->elem[2]->integer;
    out->version = r->elem[3]->integer;
    out->lease = r->elem[4]->integer;
    ordo_reply_free(r);
    if (out->key == NULL || out->value == NULL) {
        ordo_kv_clear(out);
        return ORDO_ENOMEM;
    }
    return ORDO_OK;
}

int ordo_kv_put(ordo_client_t *c, const void *key, size_t key_len, const void *val,
                size_t val_len, const ordo_kv_cond_t *cond, int64_t *rev_out)
{
    cmd_t m = { 0 };
    sarg(&m, "KV.PUT");
    arg(&m, key, key_len);
    arg(&m, val, val_len);
    cond_args(&m, cond, 1);
    if (cond && cond->fence_lock)
        m.flags = CLIENT_CALL_SAFE; /* fenced: writing the value twice is writing it */
    return run_int(c, &m, 0, rev_out);
}

int ordo_kv_del(ordo_client_t *c, const void *key, size_t key_len, const ordo_kv_cond_t *cond,
                int64_t *rev_out)
{
    cmd_t m = { 0 };
    sarg(&m, "KV.DEL");
    arg(&m, key, key_len);
    cond_args(&m, cond, 0);
    return run_int(c, &m, 0, rev_out);
}

int ordo_kv_cas(ordo_client_t *c, const void *key, size_t key_len, const void *val,
                size_t val_len, int64_t expect_rev, int64_t *rev_out)
{
    if (expect_rev < 0)
        return ORDO_EINVAL;
    ordo_kv_cond_t cond = { .ifrev = expect_rev };
    int rc = ordo_kv_put(c, key, key_len, val, val_len, &cond, rev_out);
    if (rc == ORDO_ECONFLICT && rev_out)
        *rev_out = c->err_rev;
    return rc;
}

int ordo_kv_rev(ordo_client_t *c, int64_t *current, int64_t *oldest)
{
    cmd_t m = { 0 };
    sarg(&m, "KV.REV");
    ordo_reply_t *r;
    int rc = run(c, &m, 0, &r);
    if (rc != ORDO_OK)
        return rc;
    if (r->type != ORDO_REPLY_ARRAY || r->n != 2)
        return proto_err(c, r, "KV.REV");
    *current = r->elem[0]->integer;
    *oldest = r->elem[1]->integer;
    ordo_reply_free(r);
    return ORDO_OK;
}

/* ---- watches ----------------------------------------------------------- */

int ordo_kv_watch(ordo_client_t *c, const void *key, size_t key_len, unsigned flags,
                  int64_t from_rev, int64_t *watch_id)
{
    int rc = ordo_client_connect(c);
    if (rc != ORDO_OK)
        return rc;
    if (c->proto != 3)
        return client_seterr(c, ORDO_EINVAL, "watches need RESP3");
    cmd_t m = { 0 };
    sarg(&m, "KV.WATCH");
    arg(&m, key, key_len);
    if (flags & ORDO_WATCH_PREFIX)
        sarg(&m, "PREFIX");
    if (flags & ORDO_WATCH_SNAPSHOT) {
        sarg(&m, "SNAPSHOT");
    } else if (from_rev >= 0) {
        sarg(&m, "FROM");
        iarg(&m, from_rev);
        if (flags & ORDO_WATCH_RESYNC)
            sarg(&m, "RESYNC");
    }
    return run_int(c, &m, 0, watch_id);
}

static int push_is(const ordo_reply_t *e, const char *s)
{
    return is_str(e) && strcmp(e->str, s) == 0;
}

int ordo_watch_event_parse(const ordo_reply_t *p, ordo_watch_event_t *ev)
{
    memset(ev, 0, sizeof *ev);
    if (p->type != ORDO_REPLY_PUSH && p->type != ORDO_REPLY_ARRAY)
        return ORDO_EPROTO;
    if (p->n < 3 || p->elem[1]->type != ORDO_REPLY_INTEGER || p->elem[2]->type != ORDO_REPLY_INTEGER)
        return ORDO_EPROTO;
    ev->watch_id = p->elem[1]->integer;
    ev->rev = p->elem[2]->integer;
    const ordo_reply_t *k = p->elem[0];
    if (push_is(k, "watch")) {
        if (p->n < 6 || !is_str(p->elem[4]))
            return ORDO_EPROTO;
        ev->kind = push_is(p->elem[3], "put") ? ORDO_WATCH_PUT : ORDO_WATCH_DEL;
        ev->key = p->elem[4]->str;
        ev->key_len = p->elem[4]->len;
        if (ev->kind == ORDO_WATCH_PUT && is_str(p->elem[5])) {
            ev->value = p->elem[5]->str;
            ev->value_len = p->elem[5]->len;
        }
        return ORDO_OK;
    }
    if (push_is(k, "watch-synced")) {
        ev->kind = ORDO_WATCH_SYNCED;
        return ORDO_OK;
    }
    if (push_is(k, "watch-progress")) {
        ev->kind = ORDO_WATCH_PROGRESS;
        return ORDO_OK;
    }
    if (push_is(k, "watch-cancelled")) {
        ev->kind = ORDO_WATCH_CANCELLED;
        ev->reason = p->n > 3 && is_str(p->elem[3]) ? p->elem[3]->str : "";
        return ORDO_OK;
    }
    return ORDO_EPROTO;
}

/* ---- queues ------------------------------------------------------------- */

void ordo_msgs_free(ordo_msg_t *msgs, size_t n)
{
    if (msgs == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(msgs[i].key);
        free(msgs[i].payload);
    }
    free(msgs);
}

int ordo_q_push(ordo_client_t *c, const char *queue, const void *key, size_t key_len,
                const void *payload, size_t payload_len, const ordo_push_opts_t *o, int64_t *id_out)
{
    cmd_t m = { 0 };
    sarg(&m, "Q.PUSH");
    sarg(&m, queue);
    arg(&m, key, key_len);
    arg(&m, payload, payload_len);
    if (o && o->id) {
        sarg(&m, "ID");
        arg(&m, o->id, o->id_len);
        m.flags = CLIENT_CALL_SAFE; /* a repeat answers the first push's id */
    }
    if (o && o->coalesce)
        sarg(&m, "COALESCE");
    if (o && o->delay_ms > 0) {
        sarg(&m, "DELAY");
        iarg(&m, o->delay_ms);
    }
    return run_int(c, &m, 0, id_out);
}

/* pull_args() -- `Q.PULL queue [COUNT n] [BLOCK ms] [LEASE ms]`. */
static void pull_args(cmd_t *m, const char *queue, int count, int64_t block_ms, int64_t lease_ms)
{
    sarg(m, "Q.PULL");
    sarg(m, queue);
    if (count > 1) {
        sarg(m, "COUNT");
        iarg(m, count);
    }
    if (block_ms >= 0) {
        sarg(m, "BLOCK");
        iarg(m, block_ms);
    }
    if (lease_ms > 0) {
        sarg(m, "LEASE");
        iarg(m, lease_ms);
    }
}

/* pull_timeout() -- the client-side deadline of a pull blocking block_ms. */
static int pull_timeout(const ordo_client_t *c, int64_t block_ms)
{
    return block_ms < 0 ? 0 : wait_timeout(c, block_ms == 0 ? -1 : block_ms);
}

/* pull_parse() -- the messages of a Q.PULL reply r (not an error; freed
 * here) into *msgs (n of them; NULL and 0 for none). */
static int pull_parse(ordo_client_t *c, ordo_reply_t *r, ordo_msg_t **msgs, size_t *n)
{
    if (r->type != ORDO_REPLY_ARRAY)
        return proto_err(c, r, "Q.PULL");
    for (size_t i = 0; i < r->n; i++) {
        const ordo_reply_t *e = r->elem[i];
        if (e->type != ORDO_REPLY_ARRAY || e->n != 5 || !is_str(e->elem[1]) || !is_str(e->elem[2]))
            return proto_err(c, r, "Q.PULL");
    }
    if (r->n == 0) {
        ordo_reply_free(r);
        return ORDO_OK;
    }
    ordo_msg_t *v = calloc(r->n, sizeof *v);
    if (v == NULL) {
        ordo_reply_free(r);
        return ORDO_ENOMEM;
    }
    for (size_t i = 0; i < r->n; i++) {
        ordo_reply_t **e = r->elem[i]->elem;
        v[i].id = e[0]->integer;
        v[i].key = e[1]->str; /* steal the strings */
        v[i].key_len = e[1]->len;
        e[1]->str = NULL;
        v[i].payload = e[2]->str;
        v[i].payload_len = e[2]->len;
        e[2]->str = NULL;
        v[i].attempt = e[3]->integer;
        v[i].token = e[4]->integer;
    }
    *n = r->n;
    *msgs = v;
    ordo_reply_free(r);
    return ORDO_OK;
}

int ordo_q_pull(ordo_client_t *c, const char *queue, int count, int64_t block_ms, int64_t lease_ms,
                ordo_msg_t **msgs, size_t *n)
{
    *msgs = NULL;
    *n = 0;
    cmd_t m = { 0 };
    pull_args(&m, queue, count, block_ms, lease_ms);
    ordo_reply_t *r;
    int rc = run(c, &m, pull_timeout(c, block_ms), &r);
    if (rc != ORDO_OK)
        return rc;
    return pull_parse(c, r, msgs, n);
}

/* "VERB queue id token": the head of every command about one delivery. */
static void delivery_args(cmd_t *m, const char *verb, const char *queue, int64_t id, int64_t token)
{
    m->flags = CLIENT_CALL_SAFE; /* guarded by the delivery token */
    sarg(m, verb);
    sarg(m, queue);
    iarg(m, id);
    iarg(m, token);
}

/* ack_args() -- `Q.ACK queue id token [RESULT result]`. */
static void ack_args(cmd_t *m, const char *queue, int64_t id, int64_t token, const void *result, size_t result_len,
                     int with_result)
{
    delivery_args(m, "Q.ACK", queue, id, token);
    if (with_result) {
        sarg(m, "RESULT");
        arg(m, result ? result : "", result_len);
    }
}

int ordo_q_ack(ordo_client_t *c, const char *queue, int64_t id, int64_t token, const void *result,
               size_t result_len, int with_result)
{
    cmd_t m = { 0 };
    ack_args(&m, queue, id, token, result, result_len, with_result);
    return run_01(c, &m);
}

int client_pull_append(ordo_client_t *c, client_pull_t *p)
{
    assert(c != NULL && p != NULL);
    p->msgs = NULL;
    p->n = 0;
    cmd_t m = { 0 };
    pull_args(&m, p->queue, 1, p->block_ms, p->lease_ms);
    p->rc = ordo_client_append(c, m.argc, m.argv, m.lens);
    return p->rc;
}

void client_pull_read(ordo_client_t *c, client_pull_t *p, int rc)
{
    assert(c != NULL && p != NULL);
    if (p->rc != ORDO_OK) /* never appended */
        return;
    ordo_reply_t *r;
    if (rc == ORDO_OK)
        rc = ordo_client_get_reply(c, pull_timeout(c, p->block_ms), &r);
    if (rc == ORDO_OK && (rc = ordo_client_reply_error(c, r)) != ORDO_OK)
        ordo_reply_free(r);
    p->rc = rc == ORDO_OK ? pull_parse(c, r, &p->msgs, &p->n) : rc;
}

int client_ack_pull(ordo_client_t *c, const char *queue, const ordo_msg_t *done, const void *result,
                    size_t result_len, int with_result, client_pull_t *pull)
{
    assert(c != NULL && done != NULL && pull != NULL);
    /* Nothing may be outstanding: the two replies read below are these
     * two commands'. */
    if (c->pending != 0)
        return ORDO_EINVAL;
    cmd_t a = { 0 };
    ack_args(&a, queue, done->id, done->token, result, result_len, with_result);
    int rc = ordo_client_append(c, a.argc, a.argv, a.lens);
    pull->rc = ORDO_EINVAL;
    if (rc != ORDO_OK)
        return rc;
    (void)client_pull_append(c, pull);
    ordo_reply_t *r;
    rc = ordo_client_get_reply(c, 0, &r);
    client_pull_read(c, pull, rc); /* a broken connection took the pull's reply too */
    return rc == ORDO_OK ? reply_01(c, r, "Q.ACK") : rc;
}

int ordo_q_nack(ordo_client_t *c, const char *queue, int64_t id, int64_t token, int64_t delay_ms)
{
    cmd_t m = { 0 };
    delivery_args(&m, "Q.NACK", queue, id, token);
    if (delay_ms > 0) {
        sarg(&m, "DELAY");
        iarg(&m, delay_ms);
    }
    return run_01(c, &m);
}

/* Q.PAUSE / Q.RESUME: queue [KEY key] ... */
static void pause_args(cmd_t *m, const char *verb, const char *queue, const void *key, size_t key_len)
{
    sarg(m, verb);
    sarg(m, queue);
    if (key != NULL) {
        sarg(m, "KEY");
        arg(m, key, key_len);
    }
}

int ordo_q_pause(ordo_client_t *c, const char *queue, const void *key, size_t key_len, int64_t for_ms, int *changed)
{
    cmd_t m = { 0 };
    pause_args(&m, "Q.PAUSE", queue, key, key_len);
    if (for_ms > 0) {
        sarg(&m, "FOR");
        iarg(&m, for_ms);
    }
    int64_t v = 0;
    int rc = run_int(c, &m, 0, &v);
    if (rc == ORDO_OK && changed != NULL)
        *changed = v == 1;
    return rc;
}

int ordo_q_resume(ordo_client_t *c, const char *queue, const void *key, size_t key_len, int *changed)
{
    cmd_t m = { 0 };
    pause_args(&m, "Q.RESUME", queue, key, key_len);
    int64_t v = 0;
    int rc = run_int(c, &m, 0, &v);
    if (rc == ORDO_OK && changed != NULL)
        *changed = v == 1;
    return rc;
}

int ordo_q_redrive(ordo_client_t *c, const char *queue, const char *from, const void *key, size_t key_len,
                   int64_t id, int64_t *moved)
{
    cmd_t m = { 0 };
    sarg(&m, "Q.REDRIVE");
    sarg(&m, queue);
    if (from != NULL) {
        sarg(&m, "FROM");
        sarg(&m, from);
    }
    if (key != NULL) {
        sarg(&m, "KEY");
        arg(&m, key, key_len);
    } else if (id > 0) {
        sarg(&m, "ID");
        iarg(&m, id);
    }
    return run_int(c, &m, 0, moved);
}

int ordo_q_cancel(ordo_client_t *c, const char *queue, int64_t id)
{
    cmd_t m = { 0 };
    sarg(&m, "Q.CANCEL");
    sarg(&m, queue);
    iarg(&m, id);
    int64_t v;
    int rc = run_int(c, &m, 0, &v);
    if (rc != ORDO_OK)
        return rc;
    return v == 1 ? ORDO_OK : client_seterr(c, ORDO_ENOTFOUND, "Q.CANCEL: no waiting or delayed message %lld",
                                            (long long)id);
}

int ordo_q_schedule_add(ordo_client_t *c, const char *name, const char *queue, const void *key, size_t key_len,
                        const void *payload, size_t payload_len, const ordo_schedule_opts_t *o)
{
    cmd_t m = { 0 };
    sarg(&m, "Q.SCHEDULE");
    sarg(&m, "ADD");
    sarg(&m, name);
    sarg(&m, queue);
    arg(&m, key, key_len);
    arg(&m, payload, payload_len);
    if (o->cron != NULL) {
        sarg(&m, "CRON");
        sarg(&m, o->cron);
    } else {
        sarg(&m, "EVERY");
        iarg(&m, o->every_ms);
        if (o->start_ms > 0) {
            sarg(&m, "START");
            iarg(&m, o->start_ms);
        }
    }
    if (o->skip_missed) {
        sarg(&m, "MISSED");
        sarg(&m, "skip");
    }
    ordo_reply_t *r;
    int rc = run(c, &m, 0, &r);
    if (rc == ORDO_OK)
        ordo_reply_free(r);
    return rc;
}

int ordo_q_schedule_del(ordo_client_t *c, const char *name)
{
    cmd_t m = { 0 };
    sarg(&m, "Q.SCHEDULE");
    sarg(&m, "DEL");
    sarg(&m, name);
    int64_t v;
    int rc = run_int(c, &m, 0, &v);
    if (rc != ORDO_OK)
        return rc;
    return v == 1 ? ORDO_OK : client_seterr(c, ORDO_ENOTFOUND, "Q.SCHEDULE DEL: no schedule %s", name);
}

int ordo_q_extend(ordo_client_t *c, const char *queue, int64_t id, int64_t token, int64_t ms)
{
    cmd_t m = { 0 };
    delivery_args(&m, "Q.EXTEND", queue, id, token);
    iarg(&m, ms);
    return run_01(c, &m);
}

int ordo_q_call(ordo_client_t *c, const char *queue, const void *key, size_t key_len,
                const void *payload, size_t payload_len, int64_t timeout_ms, const char *dedup_id,
                char **result, size_t *result_len)
{
    *result = NULL;
    *result_len = 0;
    cmd_t m = { 0 };
    sarg(&m, "Q.CALL");
    sarg(&m, queue);
    arg(&m, key, key_len);
    arg(&m, payload, payload_len);
    if (timeout_ms > 0) {
        sarg(&m, "TIMEOUT");
        iarg(&m, timeout_ms);
    }
    if (dedup_id) {
        sarg(&m, "ID");
        sarg(&m, dedup_id);
    }
    ordo_reply_t *r;
    int rc = run(c, &m, wait_timeout(c, timeout_ms > 0 ? timeout_ms : -1), &r);
    if (rc != ORDO_OK)
        return rc;
    if (r->type == ORDO_REPLY_NIL) {
        ordo_reply_free(r);
        return ORDO_OK;
    }
    if (!is_str(r))
        return proto_err(c, r, "Q.CALL");
    *result = r->str;
    *result_len = r->len;
    r->str = NULL;
    ordo_reply_free(r);
    return ORDO_OK;
}

/* ---- leases, locks, elections ----------------------------------------- */

int ordo_lease_grant(ordo_client_t *c, int64_t ttl_ms, int64_t *lease_id)
{
    cmd_t m = { 0 };
    sarg(&m, "LEASE.GRANT");
    iarg(&m, ttl_ms);
    return run_int(c, &m, 0, lease_id);
}

int ordo_lease_keepalive(ordo_client_t *c, int64_t lease_id, int64_t *remaining_ms)
{
    cmd_t m = { 0 };
    sarg(&m, "LEASE.KEEPALIVE");
    iarg(&m, lease_id);
    return run_int(c, &m, 0, remaining_ms);
}

int ordo_lease_revoke(ordo_client_t *c, int64_t lease_id)
{
    cmd_t m = { 0 };
    sarg(&m, "LEASE.REVOKE");
    iarg(&m, lease_id);
    int64_t v;
    int rc = run_int(c, &m, 0, &v);
    return rc != ORDO_OK ? rc : v == 1 ? ORDO_OK : ORDO_ENOTFOUND;
}

int ordo_lock_acquire(ordo_client_t *c, const char *name, int64_t ttl_ms, int64_t wait_ms,
                      int64_t lease, int64_t *token)
{
    if (wait_ms < 0)
        return ORDO_EINVAL;
    cmd_t m = { 0 };
    sarg(&m, "LOCK.ACQUIRE");
    sarg(&m, name);
    iarg(&m, ttl_ms);
    if (wait_ms > 0) {
        sarg(&m, "WAIT");
        iarg(&m, wait_ms);
    }
    if (lease > 0) {
        sarg(&m, "LEASE");
        iarg(&m, lease);
    }
    ordo_reply_t *r;
    int rc = run(c, &m, wait_timeout(c, wait_ms), &r);
    if (rc != ORDO_OK)
        return rc;
    if (r->type == ORDO_REPLY_NIL) {
        ordo_reply_free(r);
        return client_seterr(c, ORDO_ETIMEDOUT, "lock %s is held", name);
    }
    if (r->type != ORDO_REPLY_INTEGER)
        return proto_err(c, r, "LOCK.ACQUIRE");
    *token = r->integer;
    ordo_reply_free(r);
    return ORDO_OK;
}

int ordo_lock_release(ordo_client_t *c, const char *name, int64_t token)
{
    cmd_t m = { 0 };
    sarg(&m, "LOCK.RELEASE");
    sarg(&m, name);
    iarg(&m, token);
    return run_01(c, &m);
}

int ordo_lock_extend(ordo_client_t *c, const char *name, int64_t token, int64_t ttl_ms)
{
    cmd_t m = { 0 };
    m.flags = CLIENT_CALL_SAFE; /* guarded by the token; extending twice is extending */
    sarg(&m, "LOCK.EXTEND");
    sarg(&m, name);
    iarg(&m, token);
    iarg(&m, ttl_ms);
    return run_01(c, &m);
}

int ordo_lock_check(ordo_client_t *c, const char *name, int64_t token)
{
    cmd_t m = { 0 };
    sarg(&m, "LOCK.CHECK");
    sarg(&m, name);
    iarg(&m, token);
    return run_01(c, &m);
}

int ordo_elect_campaign(ordo_client_t *c, const char *name, const void *value, size_t value_len,
                        int64_t ttl_ms, int64_t wait_ms, int64_t *term, char **handover,
                        size_t *handover_len, int *handed_over)
{
    if (handover) {
        *handover = NULL;
        *handover_len = 0;
    }
    if (handed_over)
        *handed_over = 0;
    cmd_t m = { 0 };
    sarg(&m, "ELECT.CAMPAIGN");
    sarg(&m, name);
    arg(&m, value, value_len);
    iarg(&m, ttl_ms);
    if (wait_ms >= 0) {
        sarg(&m, "WAIT");
        iarg(&m, wait_ms);
    }
    if (handover)
        sarg(&m, "HANDOVER");
    ordo_reply_t *r;
    int rc = run(c, &m, wait_timeout(c, wait_ms), &r);
    if (rc != ORDO_OK)
        return rc;
    if (r->type == ORDO_REPLY_NIL) {
        ordo_reply_free(r);
        return client_seterr(c, ORDO_ETIMEDOUT, "election %s: not leading in time", name);
    }
    if (handover) {
        /* [term, value] or, when the last term ended by expiry, [term, its
         * last proclaimed value, 0]: not handed over, but the state a
         * successor resumes from all the same (docs/protocol.md). */
        if (r->type != ORDO_REPLY_ARRAY || (r->n != 2 && r->n != 3) || r->elem[0]->type != ORDO_REPLY_INTEGER)
            return proto_err(c, r, "ELECT.CAMPAIGN");
        *term = r->elem[0]->integer;
        if (is_str(r->elem[1])) {
            *handover = r->elem[1]->str;
            *handover_len = r->elem[1]->len;
            r->elem[1]->str = NULL;
            if (handed_over) /* the third element (0) marks a term that expired */
                *handed_over = r->n == 2;
        }
    } else {
        if (r->type != ORDO_REPLY_INTEGER)
            return proto_err(c, r, "ELECT.CAMPAIGN");
        *term = r->integer;
    }
    ordo_reply_free(r);
    return ORDO_OK;
}

int ordo_elect_keepalive(ordo_client_t *c, const char *name, int64_t term, int64_t *remaining_ms)
{
    cmd_t m = { 0 };
    m.flags = CLIENT_CALL_SAFE; /* guarded by the term */
    sarg(&m, "ELECT.KEEPALIVE");
    sarg(&m, name);
    iarg(&m, term);
    return run_int(c, &m, 0, remaining_ms);
}

int ordo_elect_resign(ordo_client_t *c, const char *name, int64_t term, const void *value,
                      size_t value_len)
{
    cmd_t m = { 0 };
    sarg(&m, "ELECT.RESIGN");
    sarg(&m, name);
    iarg(&m, term);
    if (value) {
        sarg(&m, "HANDOVER");
        arg(&m, value, value_len);
    }
    return run_01(c, &m);
}

int ordo_elect_proclaim(ordo_client_t *c, const char *name, int64_t term, const void *value,
                        size_t value_len)
{
    cmd_t m = { 0 };
    sarg(&m, "ELECT.PROCLAIM");
    sarg(&m, name);
    iarg(&m, term);
    arg(&m, value, value_len);
    return run_01(c, &m);
}

int ordo_elect_leader(ordo_client_t *c, const char *name, int64_t *term, char **value,
                      size_t *value_len)
{
    *value = NULL;
    *value_len = 0;
    cmd_t m = { 0 };
    sarg(&m, "ELECT.LEADER");
    sarg(&m, name);
    ordo_reply_t *r;
    int rc = run_found(c, &m, &r);
    if (rc != ORDO_OK)
        return rc;
    if (r->type != ORDO_REPLY_ARRAY || r->n != 2 || r->elem[1]->type != ORDO_REPLY_INTEGER)
        return proto_err(c, r, "ELECT.LEADER");
    *term = r->elem[1]->integer;
    if (is_str(r->elem[0])) {
        *value = r->elem[0]->str;
        *value_len = r->elem[0]->len;
        r->elem[0]->str = NULL;
    }
    ordo_reply_free(r);
    return ORDO_OK;
}
