/*
 * registry.c -- the command families and dispatch: the top of cmd/.
 *
 * It owns the table of families (each family file exports its cmd_def_t
 * array and its length; this is the one place that names them all),
 * cmd_init(), which builds the command table (table.c) from them, and
 * cmd_dispatch(), which runs a request. Nothing below calls up into it:
 * the families read the command table through table.c (COMMAND,
 * /metrics), and a transaction keeps the definitions it queued, so EXEC
 * runs them without a second lookup.
 *
 * The families are added in the table's order; a name defined twice
 * aborts start-up (table.c).
 *
 * Dispatch checks, in order: the command exists; the connection is
 * authenticated (or the command is allowed before AUTH); the arity; the
 * user's rules allow the command on the names it gives (cmd_acl.c); a RESP2
 * connection with watches runs only watch-mode commands (its stream carries
 * events, so ordinary replies could not be told apart). Only then does the
 * handler run. Between arity and watch mode, a cluster member that does
 * not lead answers -NOTLEADER to every command that reads or writes the
 * state (CMD_NOSTATE ones excepted); after watch mode, a server whose log
 * failed answers -READONLY to those that would read state the log may not
 * hold, and a connection inside MULTI has the command queued
 * (cmd_txn_queue()) instead of run. A command that writes hands its
 * records to the writer's one door, writer_submit() (writer/apply.h;
 * through cmd_write() or the queue helpers), and after the handler
 * writer_settle() serves the parked clients its records unblocked.
 *
 * Before a handler runs, keys whose deadline has passed are expired (the
 * same REC_EXPIRE record the expiry timer applies, just sooner), and so
 * are leases, locks and leaderships (coord_wait_expire_due()). The timer
 * alone is not enough: it fires in a later loop callback, so a command can
 * arrive after a deadline and before the timer, and then GET would hide
 * the key (visible()) while KV.RANGE, DBSIZE or KV.GET REV <current> still
 * showed it. Expiring first gives every command one consistent state, at
 * the cost of two peeks at the earliest deadline per command.
 */
#include "cmd.h"
#include "core/coord.h"
#include "writer/apply.h"
#include "writer/cluster.h"
#include "writer/coord_wait.h"
#include "writer/expire.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A family: its definitions, their number (a const in the family's file,
 * so read through a pointer), and what it sets up besides its commands. */
typedef struct cmd_family_s {
    const cmd_def_t *defs;
    const size_t *ndefs;
    void (*init)(server_t *s);    /* NULL: nothing */
} cmd_family_t;

static const cmd_family_t families[] = {
    {cmd_server_defs, &cmd_server_ndefs, NULL},
    {cmd_kv_defs, &cmd_kv_ndefs, NULL},
    {cmd_string_defs, &cmd_string_ndefs, NULL},
    {cmd_keyspace_defs, &cmd_keyspace_ndefs, NULL},
    {cmd_watch_defs, &cmd_watch_ndefs, cmd_watch_init},
    {cmd_coord_defs, &cmd_coord_ndefs, NULL},
    {cmd_queue_defs, &cmd_queue_ndefs, NULL},
    {cmd_txn_defs, &cmd_txn_ndefs, NULL},
    {cmd_cluster_defs, &cmd_cluster_ndefs, NULL},
    {cmd_acl_defs, &cmd_acl_ndefs, cmd_acl_init},
};

int cmd_init(server_t *s)
{
    if (cmd_table_init(s) != 0)
        return -1;
    s->history = cmd_history_create();
    if (s->history == NULL)
        return -1;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        const cmd_family_t *f = &families[i];
        assert(*f->ndefs > 0);
        cmd_table_add(s, f->defs, *f->ndefs);
        if (f->init != NULL)
            f->init(s);
    }
    return 0;
}
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

/* Redis commands ordo does not have, with the ordo way to do the job: an
 * unknown command's error names it, so a user trying LPUSH learns about
 * Q.PUSH instead of guessing. Names are upper case, space-separated; a
 * name is matched whole. */
typedef struct unknown_hint_s {
    const char *names;
    const char *hint;
} unknown_hint_t;

static const unknown_hint_t unknown_hints[] = {
    {"LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP BLPOP BRPOP LMPOP BLMPOP LMOVE BLMOVE RPOPLPUSH BRPOPLPUSH LRANGE LLEN "
     "LINDEX LSET LREM LTRIM LINSERT LPOS",
     "ordo has no lists: keyed work queues are Q.* (Q.PUSH queue key payload, Q.PULL queue [BLOCK ms], Q.ACK; "
     "Q.LEN, Q.PEEK)"},
    {"XADD XREAD XREADGROUP XACK XLEN XRANGE XREVRANGE XGROUP XCLAIM XAUTOCLAIM XPENDING XDEL XTRIM XINFO XSETID",
     "ordo has no streams: consumers with acks are Q.* (Q.PUSH, Q.PULL, Q.ACK, Q.NACK); Q.WATCH follows a "
     "queue's events, KV.WATCH FROM rev a prefix's changes"},
    {"HSET HGET HMSET HMGET HGETALL HDEL HEXISTS HINCRBY HINCRBYFLOAT HKEYS HVALS HLEN HSETNX HSCAN HSTRLEN "
     "HRANDFIELD",
     "ordo has no hashes: keep a key per field under a prefix (KV.PUT obj/field value) and read them with "
     "KV.RANGE obj/"},
    {"SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SINTER SINTERCARD SINTERSTORE SUNION "
     "SUNIONSTORE SDIFF SDIFFSTORE SMOVE SSCAN",
     "ordo has no sets: keep a key per member under a prefix (SET set/member \"\") and list them with "
     "KV.RANGE set/ or SCAN 0 MATCH set/*"},
    {"ZADD ZREM ZRANGE ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZSCORE ZMSCORE ZCARD ZCOUNT ZINCRBY "
     "ZRANK ZREVRANK ZPOPMIN ZPOPMAX BZPOPMIN BZPOPMAX ZSCAN ZRANGESTORE ZUNIONSTORE ZINTERSTORE",
     "ordo has no sorted sets: keys under a prefix are kept in byte order, so KV.PUT z/<fixed-width "
     "score>/<member> and KV.RANGE z/ walk them in order"},
    {"SUBSCRIBE PSUBSCRIBE SSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE SUNSUBSCRIBE PUBLISH SPUBLISH PUBSUB",
     "ordo has no pub/sub: KV.WATCH follows the changes of a key or prefix (resumable FROM a revision), "
     "Q.WATCH a queue's events"},
    {"SETNX", "use SET key value NX"},
    {"GETSET", "use SET key value GET"},
    {"INCRBYFLOAT", "values count in integers only: INCRBY, DECRBY"},
    {"RENAME RENAMENX COPY MOVE", "use MULTI with GET, SET and DEL (all or nothing), or KV.PUT with IFREV"},
    {"SELECT SWAPDB", "ordo has one database"},
    {"WAIT WAITAOF", "every reply already waits until its record is durable (docs/protocol.md, durability)"},
    {"SAVE BGSAVE BGREWRITEAOF", "SNAPSHOT starts one; INFO persistence says how it went"},
    {"LASTSAVE", "INFO persistence"},
    {"RANDOMKEY", "SCAN 0 COUNT 1 or KV.RANGE \"\" LIMIT 1"},
    {"REPLICAOF SLAVEOF", "ordo replicates with raft: CLUSTER ADD id host:port (docs/operations.md)"},
    {"SLOWLOG LATENCY MONITOR", "ordod's latencies are on /metrics (HTTP) and in INFO"},
};

/* The hint for the unknown command a, or NULL. */
static const char *unknown_hint(const resp_arg_t *a)
{
    if (a->len == 0 || a->len > 24)
        return NULL;
    for (size_t i = 0; i < sizeof unknown_hints / sizeof unknown_hints[0]; i++) {
        for (const char *p = unknown_hints[i].names; *p != '\0';) {
            size_t n = strcspn(p, " ");
            if (n == a->len && strncasecmp(p, a->ptr, n) == 0)
                return unknown_hints[i].hint;
            p += n;
            p += *p == ' ';
        }
    }
    return NULL;
}

/* -ERR unknown command, the name quoted, and the ordo way when there is
 * one; inside MULTI, EXEC will abort. Apart from dispatch, so dispatch
 * keeps no buffer for the quote. */
static __attribute__((noinline)) void reply_unknown(cmd_ctx_t *x)
{
    char word[300];
    cmd_quote(word, sizeof word, &x->argv[0]);
    const char *hint = unknown_hint(&x->argv[0]);
    if (hint != NULL)
        reply_errf(x, "ERR unknown command '%s': %s", word, hint);
    else
        reply_errf(x, "ERR unknown command '%s'", word);
    cmd_txn_refused(x->conn);
}

void cmd_dispatch(conn_t *c, const resp_cmd_t *cmd)
{
    ORDO_DEBUG_ASSERT(c != NULL && cmd != NULL && cmd->argc >= 1 && !c->closing);
    ORDO_DEBUG_ASSERT(c->waiter == NULL); /* a parked connection runs no command (net.c) */
    server_t *s = c->srv;
    cmd_ctx_t x = {s, c, &c->out, c->proto, cmd->argc, cmd->argv, NULL};
    s->stats.commands_total++;
    c->commands++;
    c->last_cmd_ms = s->now_ms;
    const cmd_def_t *d = cmd_find_hinted(s, &cmd->argv[0], &c->cmd_hint);
    if (d == NULL) {
        reply_unknown(&x);
        return;
    }
    x.def = d;
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
    /* The user's rules (cmd_acl.c), before a command is queued in MULTI. */
    if (!cmd_acl_permits(&x, d, cmd_txn_multi(c) ? "multi" : "toplevel")) {
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
     * state is answered any more (docs/protocol.md: no client sees state a crash
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
#ifdef ORDO_DEBUG
    size_t out_before = c->out.len, shared_before = c->shared.n;
#endif
    d->fn(&x);
    /* Every command answers, or parks (and is answered later), or closes
     * its connection. */
    ORDO_DEBUG_ASSERT(c->out.len != out_before || c->shared.n != shared_before || c->waiter != NULL ||
                      c->closing || c->close_after_write);
    writer_settle(s); /* the parked clients its records unblocked */
    if ((d->flags & CMD_NOSTATE) && clean && c->waiter == NULL)
        c->nostate_end = c->out.len;
}

void cmd_cron(server_t *s)
{
    cmd_watch_cron(s);
    cmd_history_sample(s);
}
