/*
 * txn.c -- client transactions (ordo_txn_*, ordo/client.h): the builder
 * that copies commands, ordo_txn_exec() that sends them between MULTI and
 * EXEC as one pipeline and maps EXEC's answer, and client_txn_ack(), the
 * consumer runner's exactly-once step (handler writes + Q.ACK in one EXEC,
 * the worker's next Q.PULL written behind it).
 *
 * Invariants: a builder holds n commands, each one malloc'd block (argc,
 * then argc lengths, argc pointers into its own bytes). ordo_txn_exec()
 * always reads every reply it asked for, a carried pull's included (or the
 * connection is closed by a failed read), so the client is never left
 * with this pipeline's replies pending.
 */
#include "client_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest argument list a typed adder builds (KV.PUT with every option). */
#define TXN_TYPED_ARGS_MAX 12

typedef struct txn_cmd {
    int argc;
    size_t *lens;
    const char **argv;
} txn_cmd_t;

struct ordo_txn {
    txn_cmd_t **cmds;
    size_t n, cap;
};

int ordo_txn_new(ordo_txn_t **out)
{
    assert(out != NULL);
    *out = calloc(1, sizeof(ordo_txn_t));
    return *out ? ORDO_OK : ORDO_ENOMEM;
}

void ordo_txn_reset(ordo_txn_t *t)
{
    assert(t != NULL && t->n <= t->cap);
    for (size_t i = 0; i < t->n; i++)
        free(t->cmds[i]);
    t->n = 0;
}

void ordo_txn_free(ordo_txn_t *t)
{
    if (t == NULL)
        return;
    ordo_txn_reset(t);
    free(t->cmds);
    free(t);
}

size_t ordo_txn_count(const ordo_txn_t *t)
{
    assert(t != NULL);
    return t->n;
}

int ordo_txn_add(ordo_txn_t *t, int argc, const char *const *argv, const size_t *lens)
{
    if (t == NULL || argc <= 0 || argv == NULL)
        return ORDO_EINVAL;
    size_t bytes = 0;
    for (int i = 0; i < argc; i++) {
        if (argv[i] == NULL)
            return ORDO_EINVAL;
        bytes += (lens ? lens[i] : strlen(argv[i])) + 1;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        txn_cmd_t **p = realloc(t->cmds, cap * sizeof *p);
        if (p == NULL)
            return ORDO_ENOMEM;
        t->cmds = p;
        t->cap = cap;
    }
    size_t head = sizeof(txn_cmd_t) + (size_t)argc * (sizeof(size_t) + sizeof(char *));
    txn_cmd_t *m = malloc(head + bytes);
    if (m == NULL)
        return ORDO_ENOMEM;
    m->argc = argc;
    m->lens = (size_t *)(m + 1);
    m->argv = (const char **)(m->lens + argc);
    char *d = (char *)(m->argv + argc);
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        memcpy(d, argv[i], l);
        d[l] = '\0';
        m->lens[i] = l;
        m->argv[i] = d;
        d += l + 1;
    }
    t->cmds[t->n++] = m;
    return ORDO_OK;
}

/* An argument list built on the stack; integers are formatted into nums. */
typedef struct targs {
    const char *argv[TXN_TYPED_ARGS_MAX];
    size_t lens[TXN_TYPED_ARGS_MAX];
    char nums[TXN_TYPED_ARGS_MAX][24];
    int argc;
} targs_t;

static void tb(targs_t *a, const void *p, size_t n)
{
    assert(a->argc >= 0 && a->argc < TXN_TYPED_ARGS_MAX);
    a->argv[a->argc] = p;
    a->lens[a->argc++] = n;
}

static void ts(targs_t *a, const char *s)
{
    tb(a, s, strlen(s));
}

static void ti(targs_t *a, int64_t v)
{
    assert(a->argc >= 0 && a->argc < TXN_TYPED_ARGS_MAX);
    int n = snprintf(a->nums[a->argc], sizeof a->nums[0], "%" PRId64, v);
    tb(a, a->nums[a->argc], (size_t)n);
}

static void tcond(targs_t *a, const ordo_kv_cond_t *cond, int with_lease)
{
    if (cond == NULL)
        return;
    if (cond->ifrev >= 0) {
        ts(a, "IFREV");
        ti(a, cond->ifrev);
    }
    if (with_lease && cond->lease > 0) {
        ts(a, "LEASE");
        ti(a, cond->lease);
    }
    if (cond->fence_lock) {
        ts(a, "FENCE");
        ts(a, cond->fence_lock);
        ti(a, cond->fence_token);
    }
}

static int tadd(ordo_txn_t *t, targs_t *a)
{
    return ordo_txn_add(t, a->argc, a->argv, a->lens);
}

int ordo_txn_kv_put(ordo_txn_t *t, const void *key, size_t key_len, const void *val,
                    size_t val_len, const ordo_kv_cond_t *cond)
{
    targs_t a = { .argc = 0 };
    ts(&a, "KV.PUT");
    tb(&a, key, key_len);
    tb(&a, val, val_len);
    tcond(&a, cond, 1);
    return tadd(t, &a);
}

int ordo_txn_kv_del(ordo_txn_t *t, const void *key, size_t key_len, const ordo_kv_cond_t *cond)
{
    targs_t a = { .argc = 0 };
    ts(&a, "KV.DEL");
    tb(&a, key, key_len);
    tcond(&a, cond, 0);
    return tadd(t, &a);
}

int ordo_txn_set(ordo_txn_t *t, const void *key, size_t key_len, const void *val, size_t val_len)
{
    targs_t a = { .argc = 0 };
    ts(&a, "SET");
    tb(&a, key, key_len);
    tb(&a, val, val_len);
    return tadd(t, &a);
}

int ordo_txn_incrby(ordo_txn_t *t, const void *key, size_t key_len, int64_t by)
{
    targs_t a = { .argc = 0 };
    ts(&a, "INCRBY");
    tb(&a, key, key_len);
    ti(&a, by);
    return tadd(t, &a);
}

int ordo_txn_q_push(ordo_txn_t *t, const char *queue, const void *key, size_t key_len,
                    const void *payload, size_t payload_len, const ordo_push_opts_t *o)
{
    if (queue == NULL)
        return ORDO_EINVAL;
    targs_t a = { .argc = 0 };
    ts(&a, "Q.PUSH");
    ts(&a, queue);
    tb(&a, key, key_len);
    tb(&a, payload, payload_len);
    if (o && o->id) {
        ts(&a, "ID");
        tb(&a, o->id, o->id_len);
    }
    if (o && o->coalesce)
        ts(&a, "COALESCE");
    if (o && o->delay_ms > 0) {
        ts(&a, "DELAY");
        ti(&a, o->delay_ms);
    }
    return tadd(t, &a);
}

int ordo_txn_q_ack(ordo_txn_t *t, const char *queue, int64_t id, int64_t token,
                   const void *result, size_t result_len, int with_result)
{
    if (queue == NULL)
        return ORDO_EINVAL;
    targs_t a = { .argc = 0 };
    ts(&a, "Q.ACK");
    ts(&a, queue);
    ti(&a, id);
    ti(&a, token);
    if (with_result) {
        ts(&a, "RESULT");
        tb(&a, result ? result : "", result ? result_len : 0);
    }
    return tadd(t, &a);
}

/* Parse "CONFLICT <i> ..." for i; 0 if absent. */
static size_t conflict_index(const char *s)
{
    assert(s != NULL && strncmp(s, "CONFLICT", strlen("CONFLICT")) == 0);
    const char *p = s + strlen("CONFLICT");
    char *end;
    long long i = strtoll(p, &end, 10);
    return end != p && i > 0 ? (size_t)i : 0;
}

/* txn_exec() -- ordo_txn_exec() with pull (NULL: none) written behind
 * the EXEC and read after its reply. */
static int txn_exec(ordo_client_t *c, ordo_txn_t *t, int nwatch, const char *const *watch_keys,
                    const size_t *watch_lens, ordo_reply_t **replies, size_t *failed_index, client_pull_t *pull)
{
    if (replies)
        *replies = NULL;
    if (failed_index)
        *failed_index = 0;
    if (pull != NULL)
        *pull = (client_pull_t){ .queue = pull->queue, .block_ms = pull->block_ms, .lease_ms = pull->lease_ms,
                                 .rc = ORDO_EINVAL };
    if (c == NULL || t == NULL || nwatch < 0 || (nwatch > 0 && watch_keys == NULL))
        return ORDO_EINVAL;
    int rc;
    while (c->pending) { /* replies to earlier appends nobody asked for */
        ordo_reply_t *r;
        if ((rc = ordo_client_get_reply(c, 0, &r)) != ORDO_OK)
            return rc;
        ordo_reply_free(r);
    }

    /* The pipeline: [WATCH] MULTI cmds... EXEC. */
    if (nwatch > 0) {
        const char **wv = malloc(((size_t)nwatch + 1) * sizeof *wv);
        size_t *wl = malloc(((size_t)nwatch + 1) * sizeof *wl);
        if (wv == NULL || wl == NULL) {
            free(wv);
            free(wl);
            return ORDO_ENOMEM;
        }
        wv[0] = "WATCH";
        wl[0] = 5;
        for (int i = 0; i < nwatch; i++) {
            wv[i + 1] = watch_keys[i];
            wl[i + 1] = watch_lens ? watch_lens[i] : strlen(watch_keys[i]);
        }
        rc = ordo_client_append(c, nwatch + 1, wv, wl);
        free(wv);
        free(wl);
        if (rc != ORDO_OK)
            return rc;
    }
    const char *multi[] = { "MULTI" }, *exec[] = { "EXEC" };
    rc = ordo_client_append(c, 1, multi, NULL);
    for (size_t i = 0; rc == ORDO_OK && i < t->n; i++)
        rc = ordo_client_append(c, t->cmds[i]->argc, t->cmds[i]->argv, t->cmds[i]->lens);
    if (rc == ORDO_OK)
        rc = ordo_client_append(c, 1, exec, NULL);
    if (rc == ORDO_OK && pull != NULL)
        (void)client_pull_append(c, pull); /* a failed append leaves nothing to read */
    if (rc != ORDO_OK) {
        /* Nothing was sent yet (appends only buffer): drop the half-built
         * pipeline with the connection, so no later command lands inside
         * an open MULTI. Nothing was applied. */
        ordo_client_close(c);
        return rc;
    }

    /* Replies: WATCH, MULTI, one per command, EXEC. Read them all; keep the
     * first refusal (a WATCH/MULTI error, or a command not QUEUED). */
    size_t total = (nwatch > 0 ? 1 : 0) + 1 + t->n + 1;
    ordo_reply_t *refusal = NULL, *execr = NULL;
    size_t refused_at = 0;
    for (size_t k = 0; k < total; k++) {
        ordo_reply_t *r;
        if ((rc = ordo_client_get_reply(c, 0, &r)) != ORDO_OK) {
            ordo_reply_free(refusal);
            if (pull != NULL)
                client_pull_read(c, pull, rc);
            return rc; /* closed: EXEC may or may not have run */
        }
        if (k == total - 1) {
            execr = r;
        } else if (r->type == ORDO_REPLY_ERROR && refusal == NULL) {
            refusal = r;
            size_t first_cmd = (nwatch > 0 ? 1 : 0) + 1;
            refused_at = k >= first_cmd ? k - first_cmd + 1 : 0;
        } else {
            ordo_reply_free(r);
        }
    }

    assert(execr != NULL); /* the loop read every reply, EXEC's last */
    if (pull != NULL)
        client_pull_read(c, pull, ORDO_OK);
    if (execr->type == ORDO_REPLY_ARRAY) {
        ordo_reply_free(refusal);
        c->errstr[0] = '\0';
        c->err_rev = 0;
        if (replies)
            *replies = execr;
        else
            ordo_reply_free(execr);
        return ORDO_OK;
    }
    if (execr->type == ORDO_REPLY_NIL) {
        ordo_reply_free(refusal);
        ordo_reply_free(execr);
        c->err_rev = 0;
        return client_seterr(c, ORDO_ECONFLICT, "CONFLICT 0 a watched key changed");
    }
    if (execr->type != ORDO_REPLY_ERROR) {
        ordo_reply_free(refusal);
        ordo_reply_free(execr);
        return client_seterr(c, ORDO_EPROTO, "EXEC answered neither an array, nil nor an error");
    }
    if (strncmp(execr->str, "EXECABORT", 9) == 0 && refusal != NULL) {
        /* The refused command (or WATCH/MULTI) says why. */
        rc = ordo_client_reply_error(c, refusal);
        c->err_rev = 0;
        if (failed_index)
            *failed_index = refused_at;
    } else if (refusal != NULL && refused_at == 0) {
        /* WATCH or MULTI refused (-NOTLEADER, -NOAUTH, ...): its reason. */
        rc = ordo_client_reply_error(c, refusal);
    } else {
        rc = ordo_client_reply_error(c, execr);
        if (rc == ORDO_ECONFLICT) {
            c->err_rev = 0;
            if (failed_index)
                *failed_index = conflict_index(execr->str);
        }
    }
    ordo_reply_free(refusal);
    ordo_reply_free(execr);
    return rc;
}

int ordo_txn_exec(ordo_client_t *c, ordo_txn_t *t, int nwatch, const char *const *watch_keys,
                  const size_t *watch_lens, ordo_reply_t **replies, size_t *failed_index)
{
    return txn_exec(c, t, nwatch, watch_keys, watch_lens, replies, failed_index, NULL);
}

/* ack_exec() -- execute t, whose last command is m's ack, with pull
 * behind it; a conflict at the ack is a stale token. */
static int ack_exec(ordo_client_t *c, ordo_txn_t *t, client_pull_t *pull)
{
    size_t ack_index = ordo_txn_count(t), failed = 0;
    int rc = txn_exec(c, t, 0, NULL, NULL, NULL, &failed, pull);
    if (rc == ORDO_ECONFLICT && failed == ack_index)
        return ORDO_ESTALE;
    return rc;
}

int client_txn_ack(ordo_client_t *c, ordo_txn_t *t, const char *queue, const ordo_msg_t *m,
                   const char *result, size_t result_len, client_pull_t *pull)
{
    assert(c != NULL && t != NULL && queue != NULL && m != NULL);
    if (pull != NULL)
        pull->rc = ORDO_EINVAL;
    int rc = ordo_txn_q_ack(t, queue, m->id, m->token, result, result_len, result != NULL);
    if (rc != ORDO_OK)
        return rc;
    return ack_exec(c, t, pull);
}

int client_txn_retry(ordo_client_t *c, ordo_txn_t *t, const char *queue, const ordo_msg_t *m)
{
    assert(c != NULL && t != NULL && queue != NULL && m != NULL && ordo_txn_count(t) > 0);
    return ack_exec(c, t, NULL);
}
