/*
 * cmd.c -- the command table, dispatch and the helpers every handler uses.
 *
 * Dispatch checks, in order: the command exists; the connection is
 * authenticated (or the command is allowed before AUTH); the arity; a RESP2
 * connection with watches runs only watch-mode commands (its stream carries
 * events, so ordinary replies could not be told apart). Only then does the
 * handler run. A command that writes makes one record and goes through
 * cmd_write(), the single place where records enter the core.
 *
 * Before a handler runs, keys whose deadline has passed are expired (the
 * same REC_EXPIRE record the expiry timer applies, just sooner). The timer
 * alone is not enough: it runs on the loop's monotonic clock, so a command
 * can arrive after a deadline and before the timer, and then GET would hide
 * the key (visible()) while KV.RANGE, DBSIZE or KV.GET REV <current> still
 * showed it. Expiring first gives every command one consistent state, at
 * the cost of one heap peek per command.
 */
#include "cmd.h"
#include "core/coord.h"
#include "writer/apply.h"
#include "writer/cluster.h"
#include "writer/coord_wait.h"
#include "writer/expire.h"
#include "writer/queue_wait.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct cmd_entry_s {
    ordo_hnode_t node;
    const cmd_def_t *def;
    size_t nlen;
    char name[32];   /* lower case */
    uint64_t calls;  /* times dispatched (looked up), for /metrics */
} cmd_entry_t;

#define CMD_NAME_MAX 31

/* The command table's hash: FNV-1a of the lower-cased name. Not SipHash
 * (ordo_htab_hash): the table holds only our own command names, fixed at
 * startup, so a client cannot build chains in it (an unknown name is a miss
 * in a short chain), and hashing the name of every command with SipHash
 * cost more than the lookup. */
#define NAME_HASH_SEED 0xcbf29ce484222325ULL

static inline uint64_t name_hash_step(uint64_t h, unsigned char ch)
{
    return (h ^ ch) * 0x100000001b3ULL;
}

static uint64_t name_hash(const char *name, size_t len)
{
    uint64_t h = NAME_HASH_SEED;
    for (size_t i = 0; i < len; i++)
        h = name_hash_step(h, (unsigned char)name[i]);
    return h;
}

static bool entry_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const cmd_entry_t *e = (const cmd_entry_t *)n;
    return e->nlen == len && memcmp(e->name, key, len) == 0;
}

void cmd_register(server_t *s, const cmd_def_t *defs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cmd_entry_t *e = ordo_xcalloc(1, sizeof *e);
        e->def = &defs[i];
        e->nlen = strlen(defs[i].name);
        if (e->nlen > CMD_NAME_MAX) {
            fprintf(stderr, "ordod: command name too long: %s\n", defs[i].name);
            abort();
        }
        if (!cmd_docs_check(&defs[i])) {
            fprintf(stderr, "ordod: command %s: malformed syntax in its docs: %s\n", defs[i].name, defs[i].syntax);
            abort();
        }
        for (size_t j = 0; j < e->nlen; j++)
            e->name[j] = (char)tolower((unsigned char)defs[i].name[j]);
        ordo_htab_insert(&s->commands, &e->node, name_hash(e->name, e->nlen));
    }
}

int cmd_init(server_t *s)
{
    if (ordo_htab_init(&s->commands, entry_eq) != 0)
        return -1;
    cmd_server_register(s);
    cmd_kv_register(s);
    cmd_watch_register(s);
    cmd_coord_register(s);
    cmd_queue_register(s);
    cmd_txn_register(s);
    cmd_cluster_register(s);
    return 0;
}

static void free_entry(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

void cmd_destroy(server_t *s)
{
    ordo_htab_foreach(&s->commands, free_entry, NULL);
    ordo_htab_destroy(&s->commands);
}

typedef struct foreach_ctx_s {
    void (*fn)(void *arg, const cmd_def_t *d);
    void *arg;
} foreach_ctx_t;

static void foreach_entry(ordo_hnode_t *n, void *arg)
{
    foreach_ctx_t *f = arg;
    f->fn(f->arg, ((cmd_entry_t *)n)->def);
}

void cmd_foreach(server_t *s, void (*fn)(void *arg, const cmd_def_t *d), void *arg)
{
    foreach_ctx_t f = {fn, arg};
    ordo_htab_foreach(&s->commands, foreach_entry, &f);
}

size_t cmd_count(server_t *s) { return s->commands.count; }

typedef struct calls_ctx_s {
    void (*fn)(void *arg, const char *name, uint64_t calls);
    void *arg;
} calls_ctx_t;

static void calls_entry(ordo_hnode_t *n, void *arg)
{
    calls_ctx_t *f = arg;
    const cmd_entry_t *e = (const cmd_entry_t *)n;
    f->fn(f->arg, e->name, e->calls);
}

void cmd_foreach_calls(server_t *s, void (*fn)(void *arg, const char *name, uint64_t calls), void *arg)
{
    calls_ctx_t f = {fn, arg};
    ordo_htab_foreach(&s->commands, calls_entry, &f);
}

static const cmd_def_t *lookup(server_t *s, const resp_arg_t *a)
{
    char name[CMD_NAME_MAX + 1];
    if (a->len == 0 || a->len > CMD_NAME_MAX)
        return NULL;
    /* Lower-case (ASCII, as tolower() in the "C" locale the server runs
     * in) and hash in one pass: this runs for every command. */
    uint64_t h = NAME_HASH_SEED;
    for (size_t i = 0; i < a->len; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        ch = (unsigned char)((unsigned)(ch - 'A') < 26u ? ch + ('a' - 'A') : ch);
        name[i] = (char)ch;
        h = name_hash_step(h, ch);
    }
    ORDO_DEBUG_ASSERT(h == name_hash(name, a->len));
    cmd_entry_t *e = (cmd_entry_t *)ordo_htab_find(&s->commands, h, name, a->len);
    if (e == NULL)
        return NULL;
    e->calls++;
    return e->def;
}

const cmd_def_t *cmd_find(server_t *s, const resp_arg_t *a) { return lookup(s, a); }

void cmd_limits(const conn_t *c, resp_limits_t *lim)
{
    const ordo_config_t *cfg = &c->srv->cfg;
    lim->inline_max = (size_t)cfg->max_inline_bytes;
    if (c->authed) {
        lim->args_max = (size_t)cfg->max_args;
        lim->bulk_max = (size_t)cfg->max_bulk_bytes;
    } else {
        lim->args_max = (size_t)cfg->max_args_unauth;
        lim->bulk_max = (size_t)cfg->max_bulk_bytes_unauth;
    }
}

/* Quote at most 64 bytes of a client's word for an error message, so junk
 * cannot inject CR/LF or flood the reply. */
static void quote_word(char *dst, size_t dlen, const resp_arg_t *a)
{
    size_t j = 0, n = a->len < 64 ? a->len : 64;
    for (size_t i = 0; i < n && j + 5 < dlen; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        if (isprint(ch) && ch != '\'')
            dst[j++] = (char)ch;
        else
            j += (size_t)snprintf(dst + j, dlen - j, "\\x%02x", ch);
    }
    dst[j] = '\0';
}

void cmd_dispatch(conn_t *c, const resp_cmd_t *cmd)
{
    server_t *s = c->srv;
    cmd_ctx_t x = {s, c, &c->out, c->proto, cmd->argc, cmd->argv};
    s->stats.commands_total++;
    c->commands++;
    c->last_cmd_ms = s->now_ms;
    const cmd_def_t *d = lookup(s, &cmd->argv[0]);
    char word[300];
    if (d == NULL) {
        quote_word(word, sizeof word, &cmd->argv[0]);
        reply_errf(&x, "ERR unknown command '%s'", word);
        cmd_txn_refused(c);
        return;
    }
    if (!c->authed && !(d->flags & CMD_NOAUTH)) {
        reply_err(&x, "NOAUTH Authentication required.");
        return;
    }
    if ((d->arity > 0 && cmd->argc != (size_t)d->arity) ||
        (d->arity < 0 && cmd->argc < (size_t)-d->arity)) {
        reply_errf(&x, "ERR wrong number of arguments for '%s' command", d->name);
        cmd_txn_refused(c);
        return;
    }
    /* Cluster mode: only the leader answers from the state. */
    if (!(d->flags & CMD_NOSTATE) && !cluster_leads(s)) {
        reply_notleader(&x);
        cmd_txn_refused(c);
        return;
    }
    if (c->proto == 2 && c->nwatches > 0 && !(d->flags & CMD_WATCHMODE)) {
        reply_errf(&x, "ERR Can't execute '%s': only KV.WATCH / KV.UNWATCH / ELECT.OBSERVE / PING / "
                       "QUIT are allowed while a RESP2 connection has watches (use HELLO 3 to mix)",
                   d->name);
        return;
    }
    /* The log failed after revisions were applied in memory that it never
     * stored: a crash would take them back, so nothing that reads the
     * state is answered any more (DESIGN.md: no client sees state a crash
     * could take back). Writes get the same -READONLY. */
    if (server_readonly(s) != NULL && !(d->flags & CMD_NOSTATE) && core_rev(s->core) > persist_durable_rev(s)) {
        reply_errf(&x, "READONLY the log cannot be written, so writes (and reads of state it could not store) "
                       "are refused: %s", server_readonly(s));
        return;
    }
    if (c->txn != NULL && cmd_txn_queue(&x, d))
        return; /* inside MULTI: queued (or refused) */
    uint64_t next = core_next_expiry(s->core);
    if (next != 0 && next <= s->now_ms)
        expire_due(s);
    uint64_t due = coord_next_deadline(core_coord(s->core));
    if (due != 0 && due < s->now_ms)
        coord_wait_expire_due(s);
    /* A reply that reads no state, after output already judged (or after
     * another such reply), needs no durability mark (net.c): in cluster
     * mode PING or CLUSTER INFO then costs the leader no raft barrier. */
    bool clean = c->out.len == c->checked_len || c->out.len == c->nostate_end;
    d->fn(&x);
    if ((d->flags & CMD_NOSTATE) && clean && c->waiter == NULL)
        c->nostate_end = c->out.len;
}

/* ---- helpers ---------------------------------------------------------------- */

bool arg_is(const cmd_ctx_t *x, size_t i, const char *word)
{
    size_t n = strlen(word);
    return i < x->argc && x->argv[i].len == n && strncasecmp(x->argv[i].ptr, word, n) == 0;
}

static bool parse_i64_strict(const char *p, size_t n, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (isspace((unsigned char)buf[0]) || buf[0] == '+')
        return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

bool arg_i64(cmd_ctx_t *x, size_t i, int64_t *out)
{
    if (parse_i64_strict(x->argv[i].ptr, x->argv[i].len, out))
        return true;
    reply_err(x, "ERR value is not an integer or out of range");
    return false;
}

bool arg_u64(cmd_ctx_t *x, size_t i, uint64_t *out)
{
    char buf[32];
    size_t n = x->argv[i].len;
    if (n > 0 && n < sizeof buf && x->argv[i].ptr[0] >= '0' && x->argv[i].ptr[0] <= '9') {
        memcpy(buf, x->argv[i].ptr, n);
        buf[n] = '\0';
        errno = 0;
        char *end = NULL;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno == 0 && *end == '\0') {
            *out = v;
            return true;
        }
    }
    reply_err(x, "ERR value is not an integer or out of range");
    return false;
}

bool arg_name_ok(cmd_ctx_t *x, size_t i)
{
    if (x->argv[i].len <= (size_t)x->srv->cfg.max_name_bytes)
        return true;
    reply_errf(x, "LIMIT name is %zu bytes, above max-name-bytes (%lld)", x->argv[i].len,
               (long long)x->srv->cfg.max_name_bytes);
    return false;
}

bool arg_value_ok(cmd_ctx_t *x, size_t i)
{
    if (x->argv[i].len <= (size_t)x->srv->cfg.max_value_bytes)
        return true;
    reply_errf(x, "LIMIT value is %zu bytes, above max-value-bytes (%lld)", x->argv[i].len,
               (long long)x->srv->cfg.max_value_bytes);
    return false;
}

bool reply_fits(cmd_ctx_t *x, size_t bytes, const char *hint)
{
    if (bytes <= (size_t)x->srv->cfg.max_reply_bytes)
        return true;
    reply_errf(x, "LIMIT reply would be %zu bytes, above max-reply-bytes (%lld); %s", bytes,
               (long long)x->srv->cfg.max_reply_bytes, hint);
    return false;
}

/* ---- fences ------------------------------------------------------------------- */

size_t cmd_fence_parse(cmd_ctx_t *x, size_t i, cmd_fence_t *f)
{
    memset(f, 0, sizeof *f);
    if (arg_is(x, i + 1, "ELECTION") && i + 3 < x->argc) {
        if (!arg_name_ok(x, i + 2) || !arg_u64(x, i + 3, &f->token))
            return 0;
        f->kind = FENCE_ELECTION;
        f->name = x->argv[i + 2].ptr;
        f->nlen = x->argv[i + 2].len;
        return 4;
    }
    if (arg_is(x, i + 1, "DELIVERY") && i + 4 < x->argc) {
        if (!arg_name_ok(x, i + 2) || !arg_u64(x, i + 3, &f->id) || !arg_u64(x, i + 4, &f->token))
            return 0;
        f->kind = FENCE_DELIVERY;
        f->name = x->argv[i + 2].ptr;
        f->nlen = x->argv[i + 2].len;
        return 5;
    }
    if (i + 2 < x->argc) {
        if (!arg_name_ok(x, i + 1) || !arg_u64(x, i + 2, &f->token))
            return 0;
        f->kind = FENCE_LOCK;
        f->name = x->argv[i + 1].ptr;
        f->nlen = x->argv[i + 1].len;
        return 3;
    }
    reply_syntax(x);
    return 0;
}

bool cmd_fence_holds(cmd_ctx_t *x, const cmd_fence_t *f)
{
    server_t *s = x->srv;
    int n = f->nlen > 64 ? 64 : (int)f->nlen;
    if (f->kind == FENCE_ELECTION) {
        if (coord_elect_check(core_coord(s->core), f->name, f->nlen, f->token, s->now_ms))
            return true;
        reply_errf(x, "NOTHOLDER term %llu does not lead election '%.*s' now", (unsigned long long)f->token, n,
                   f->name);
        return false;
    }
    if (f->kind == FENCE_DELIVERY) {
        qwait_catch_up(s, f->name, f->nlen); /* a lease that ran out ends its delivery first */
        const queue_t *q = queue_get(core_queues(s->core), f->name, f->nlen);
        if (q != NULL && f->token != 0 && queue_delivery_current(q, f->id, f->token))
            return true;
        reply_errf(x, "NOTHOLDER delivery %llu of message %llu in queue '%.*s' is no longer current",
                   (unsigned long long)f->token, (unsigned long long)f->id, n, f->name);
        return false;
    }
    return true;
}

void reply_notholder_lock(cmd_ctx_t *x, const cmd_fence_t *f)
{
    int n = f->nlen > 64 ? 64 : (int)f->nlen;
    reply_errf(x, "NOTHOLDER token %llu does not hold lock '%.*s' now", (unsigned long long)f->token, n, f->name);
}

void reply_ok(cmd_ctx_t *x) { resp_add_simple(x->out, "OK"); }

/* The error codes counted by code for /metrics (docs/protocol.md's table);
 * any other code counts as the last, "other". */
static const char *const error_codes[] = {"ERR",      "CONFLICT", "COMPACTED", "LIMIT",    "NOTFOUND",
                                          "NOTHOLDER", "BUSY",     "TIMEOUT",   "DEADLETTER", "NOAUTH",
                                          "WRONGPASS", "NOPROTO",  "DENIED",    "READONLY", "other"};
#define ERROR_CODES (sizeof error_codes / sizeof error_codes[0])
_Static_assert(ERROR_CODES <= sizeof ((server_stats_t *)0)->errors_by_code / sizeof(uint64_t), "errors_by_code");

static void count_error(server_t *s, const char *msg)
{
    size_t n = strcspn(msg, " ");
    size_t i = 0;
    while (i < ERROR_CODES - 1 && !(strlen(error_codes[i]) == n && memcmp(error_codes[i], msg, n) == 0))
        i++;
    s->stats.errors_by_code[i]++;
}

void cmd_foreach_error_code(server_t *s, void (*fn)(void *arg, const char *code, uint64_t n), void *arg)
{
    for (size_t i = 0; i < ERROR_CODES; i++)
        fn(arg, error_codes[i], s->stats.errors_by_code[i]);
}

void reply_err(cmd_ctx_t *x, const char *msg)
{
    x->srv->stats.errors_total++;
    count_error(x->srv, msg);
    resp_add_error(x->out, msg);
}

void reply_errf(cmd_ctx_t *x, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reply_err(x, msg);
}

void reply_syntax(cmd_ctx_t *x) { reply_err(x, "ERR syntax error"); }

void reply_notleader(cmd_ctx_t *x)
{
    char leader[256];
    reply_errf(x, "NOTLEADER %s", cluster_leader(x->srv, leader, sizeof leader));
}

/* Can the record make the stored data larger? Deletions, releases and
 * keepalives are allowed past max-memory-bytes: they are how to get back. */
static bool grows(const server_t *s, const record_t *rec)
{
    switch (rec->type) {
    case REC_Q_CONFIG: /* creating a queue grows; changing one (a shorter RESULTTTL...) must work */
        return queue_get(core_queues(s->core), rec->q_config.queue, rec->q_config.qlen) == NULL;
    case REC_DEL: case REC_COMPACT: case REC_LEASE_KEEPALIVE: case REC_LEASE_REVOKE: case REC_LOCK_RELEASE:
    case REC_LOCK_EXTEND: case REC_ELECT_KEEPALIVE: case REC_ELECT_RESIGN:
    case REC_KEY_TTL: /* EXPIRE is a way to free memory */
        return false;
    default:
        /* Queue records other than pushes free memory or move bookkeeping:
         * an ack must work when the store is full. */
        return record_family(rec->type) != REC_FAM_QUEUE || rec->type == REC_Q_PUSH;
    }
}

bool cmd_write(cmd_ctx_t *x, record_t *rec, apply_result_t *res)
{
    server_t *s = x->srv;
    if (server_readonly(s) != NULL) {
        reply_errf(x, "READONLY the log cannot be written, so writes are refused: %s", server_readonly(s));
        return false;
    }
    /* Inside EXEC's apply pass the limit was judged by its check pass,
     * before anything applied: judging it again half-way would split the
     * transaction. */
    bool in_exec = s->writer.txn != NULL && s->writer.txn->mode == WTXN_APPLY;
    if (!in_exec && grows(s, rec) && writer_memory_refused(s, x->out))
        return false;
    if (!writer_apply(s, rec, res)) {
        /* Applied in memory, but the log refused the record: never OK. */
        reply_errf(x, "READONLY the log cannot be written, so writes are refused: %s", server_readonly(s));
        return false;
    }
    if ((rec->type == REC_PUT && rec->put.expire_at_ms != 0) ||
        (rec->type == REC_KEY_TTL && rec->key_ttl.expire_at_ms != 0))
        expire_schedule(s);
    return true;
}
