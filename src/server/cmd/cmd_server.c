/*
 * cmd_server.c -- connection and server commands: PING, ECHO, HELLO, AUTH,
 * QUIT, CLIENT, INFO, COMMAND (its docs come from cmd_docs.c), CONFIG GET,
 * DBSIZE, TIME; and the scripting commands, which answer that ordo runs no
 * scripts.
 *
 * These never make records. Their replies follow Redis's so that redis-cli,
 * redis-benchmark and client libraries work unmodified.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include "writer/block.h"
#include "cmd.h"
#include "net/net.h"
#include "writer/apply.h"
#include "writer/coord_wait.h"
#include "writer/persist.h"

static void cmd_ping(cmd_ctx_t *x)
{
    if (x->argc > 2) {
        reply_err(x, "ERR wrong number of arguments for 'ping' command");
        return;
    }
    /* A RESP2 connection in watch mode answers like a subscribed Redis client. */
    if (x->proto == 2 && x->conn->nwatches > 0) {
        resp_add_array(x->out, 2);
        resp_add_bulk_str(x->out, "pong");
        resp_add_bulk(x->out, x->argc == 2 ? x->argv[1].ptr : "", x->argc == 2 ? x->argv[1].len : 0);
        return;
    }
    if (x->argc == 2)
        resp_add_bulk(x->out, x->argv[1].ptr, x->argv[1].len);
    else
        resp_add_simple(x->out, "PONG");
}

static void cmd_echo(cmd_ctx_t *x) { resp_add_bulk(x->out, x->argv[1].ptr, x->argv[1].len); }

static void cmd_quit(cmd_ctx_t *x)
{
    reply_ok(x);
    x->conn->close_after_write = true;
}

/* Failed authentications are logged at most once per this interval (with
 * the number left out meanwhile), so a client guessing passwords cannot
 * flood the log; all of them are counted in INFO stats. */
#define AUTH_FAIL_LOG_INTERVAL_MS 1000

static void auth_failed(cmd_ctx_t *x)
{
    server_t *s = x->srv;
    s->stats.auth_failures++;
    uint64_t now = server_mono_ms();
    if (s->stats.auth_fail_logged_ms != 0 && now - s->stats.auth_fail_logged_ms < AUTH_FAIL_LOG_INTERVAL_MS) {
        s->stats.auth_fail_unlogged++;
        return;
    }
    fprintf(stderr, "ordod: client %llu (%s): authentication failed", (unsigned long long)x->conn->id, x->conn->addr);
    if (s->stats.auth_fail_unlogged > 0)
        fprintf(stderr, " (and %llu more not logged in the last %d ms)", (unsigned long long)s->stats.auth_fail_unlogged,
                AUTH_FAIL_LOG_INTERVAL_MS);
    fputc('\n', stderr);
    s->stats.auth_fail_logged_ms = now;
    s->stats.auth_fail_unlogged = 0;
}

/* check_auth() -- do user (NULL: the default user) and pass name a user
 * that is on, with that password (or nopass)? Replies with the error and
 * returns false if not (cmd_acl.c logs it in ACL LOG). Changes nothing on
 * the connection either way: the caller sets the user only once every
 * part of its command is known to succeed, so an error leaves no side
 * effect. */
static bool check_auth(cmd_ctx_t *x, const resp_arg_t *user, const resp_arg_t *pass)
{
    if (user == NULL && cmd_acl_default_nopass(x->srv)) {
        reply_err(x, "ERR AUTH <password> called without any password configured for the default "
                     "user. Are you sure your configuration is correct?");
        return false;
    }
    if (!cmd_acl_login(x, user, pass)) {
        reply_err(x, "WRONGPASS invalid username-password pair or user is disabled.");
        auth_failed(x);
        return false;
    }
    return true;
}

/* The connection is now user (NULL: default). */
static void set_user(conn_t *c, const resp_arg_t *user)
{
    if (user != NULL)
        cmd_acl_set_user(c, user->ptr, user->len);
    else
        cmd_acl_set_user(c, "default", 7);
    c->authed = true;
}

static void cmd_auth(cmd_ctx_t *x)
{
    if (x->argc > 3) {
        reply_syntax(x);
        return;
    }
    const resp_arg_t *user = x->argc == 3 ? &x->argv[1] : NULL;
    if (!check_auth(x, user, &x->argv[x->argc - 1]))
        return;
    set_user(x->conn, user);
    reply_ok(x);
}

static void set_name(conn_t *c, const resp_arg_t *a)
{
    free(c->name);
    c->name = NULL;
    if (a->len > 0) {
        c->name = ordo_xmalloc(a->len + 1);
        memcpy(c->name, a->ptr, a->len);
        c->name[a->len] = '\0';
    }
}

/* Client names appear in CLIENT LIST, one line per client: no spaces or
 * newlines, as Redis requires. */
static bool name_ok(cmd_ctx_t *x, const resp_arg_t *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->ptr[i] <= ' ' || a->ptr[i] > '~') {
            reply_err(x, "ERR Client names cannot contain spaces, newlines or special characters.");
            return false;
        }
    if (a->len > 256) {
        reply_err(x, "LIMIT client name longer than 256 bytes");
        return false;
    }
    return true;
}

static void cmd_hello(cmd_ctx_t *x)
{
    int64_t ver = x->conn->proto;
    size_t i = 1;
    if (x->argc >= 2) {
        if (!arg_i64(x, 1, &ver))
            return;
        if (ver != 2 && ver != 3) {
            reply_err(x, "NOPROTO unsupported protocol version");
            return;
        }
        i = 2;
    }
    /* Every clause is checked before any takes effect: HELLO 3 AUTH good
     * AUTH bad answers WRONGPASS and leaves the connection as it was. */
    const resp_arg_t *setname = NULL, *auth_user = NULL;
    bool auth_given = false;
    for (; i < x->argc; i++) {
        if (arg_is(x, i, "AUTH") && i + 2 < x->argc) {
            if (!check_auth(x, &x->argv[i + 1], &x->argv[i + 2]))
                return;
            auth_given = true;
            auth_user = &x->argv[i + 1];
            i += 2;
        } else if (arg_is(x, i, "SETNAME") && i + 1 < x->argc) {
            setname = &x->argv[++i];
            if (!name_ok(x, setname))
                return;
        } else {
            reply_syntax(x);
            return;
        }
    }
    if (!x->conn->authed && !auth_given) {
        reply_err(x, "NOAUTH HELLO must be called with the client already authenticated, otherwise "
                     "the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the "
                     "client and select the RESP protocol version at the same time");
        return;
    }
    if (auth_given)
        set_user(x->conn, auth_user);
    if (setname != NULL)
        set_name(x->conn, setname);
    x->conn->proto = (int)ver;
    x->proto = (int)ver;
    resp_add_map(x->out, x->proto, 7);
    resp_add_bulk_str(x->out, "server");
    resp_add_bulk_str(x->out, "ordo");
    resp_add_bulk_str(x->out, "version");
    resp_add_bulk_str(x->out, ORDO_VERSION);
    resp_add_bulk_str(x->out, "proto");
    resp_add_int(x->out, ver);
    resp_add_bulk_str(x->out, "id");
    resp_add_uint(x->out, x->conn->id);
    resp_add_bulk_str(x->out, "mode");
    resp_add_bulk_str(x->out, "standalone");
    resp_add_bulk_str(x->out, "role");
    resp_add_bulk_str(x->out, "master");
    resp_add_bulk_str(x->out, "modules");
    resp_add_array(x->out, 0);
}

/* One CLIENT LIST / CLIENT INFO line: Redis's fields (client libraries
 * parse them, redis-py's client_info() every integer one, and user, as
 * Redis does), with ordo's resp, watches and cmds after them (no newline: client_line() adds it;
 * ACL LOG shows it too). Fields ordo has no such thing for read 0 (db,
 * sub, psub, obl, oll) or the nearest (qbuf, omem); multi is the number
 * of commands queued, -1 outside MULTI. */
void cmd_client_describe(ordo_buf_t *b, const conn_t *c, uint64_t now)
{
    ordo_buf_printf(b, "id=%llu addr=%s name=%s age=%llu idle=%llu flags=N db=0 sub=0 psub=0 multi=%ld qbuf=%zu "
                       "qbuf-free=0 argv-mem=0 obl=0 oll=0 omem=%zu tot-mem=%zu user=%s resp=%d watches=%zu "
                       "cmds=%llu",
                    (unsigned long long)c->id, c->addr, c->name ? c->name : "",
                    (unsigned long long)((now - c->created_ms) / 1000),
                    (unsigned long long)((now - c->last_cmd_ms) / 1000), cmd_txn_queued(c), c->in.len,
                    conn_pending(c), c->in.len + conn_pending(c), c->user ? c->user : "default", c->proto,
                    c->nwatches, (unsigned long long)c->commands);
}

static void client_line(ordo_buf_t *b, const conn_t *c, uint64_t now)
{
    cmd_client_describe(b, c, now);
    ordo_buf_puts(b, "\n");
}

/* CLIENT KILL's filters (Redis's new form); a zero or NULL field does
 * not filter. */
typedef struct kill_filter_s {
    uint64_t id;
    const resp_arg_t *addr;
    bool none;                /* TYPE other than normal: no ordo client is one */
    bool skipme;
} kill_filter_t;

static bool kill_matches(const kill_filter_t *f, const conn_t *o, const conn_t *me)
{
    if (f->none || (f->skipme && o == me) || (f->id != 0 && o->id != f->id))
        return false;
    return f->addr == NULL || (strlen(o->addr) == f->addr->len && memcmp(o->addr, f->addr->ptr, f->addr->len) == 0);
}

/* Close the clients f matches, each once its pending output is sent (the
 * per-turn flush closes it: the command layer does no I/O); the number
 * closed. The caller's own connection closes after its reply. */
static int64_t kill_clients(cmd_ctx_t *x, const kill_filter_t *f)
{
    int64_t n = 0;
    for (conn_t *o = conn_first(&x->srv->net.conns); o != NULL; o = conn_next(o)) {
        if (o->closing || o->close_after_write || !kill_matches(f, o, x->conn))
            continue;
        n++;
        o->close_after_write = true;
        if (o != x->conn)
            conn_mark_dirty(o);
    }
    return n;
}

/* CLIENT KILL addr:port (OK, or an error if none), or CLIENT KILL with
 * filters ID id, ADDR addr:port, TYPE normal|master|replica|pubsub,
 * SKIPME yes|no: the number of clients closed. */
static void client_kill(cmd_ctx_t *x)
{
    kill_filter_t f = {.skipme = true};
    if (x->argc == 3) {
        f.addr = &x->argv[2];
        f.skipme = false;
        if (kill_clients(x, &f) == 0)
            reply_err(x, "ERR No such client");
        else
            reply_ok(x);
        return;
    }
    for (size_t i = 2; i < x->argc; i += 2) {
        if (i + 1 >= x->argc) {
            reply_syntax_at(x, i);
            return;
        }
        if (arg_is(x, i, "ID")) {
            const resp_arg_t *a = &x->argv[i + 1];
            bool digits = a->len > 0 && a->len <= 19;
            f.id = 0;
            for (size_t k = 0; k < a->len && digits; k++) {
                digits = a->ptr[k] >= '0' && a->ptr[k] <= '9';
                f.id = f.id * 10 + (uint64_t)(a->ptr[k] - '0');
            }
            if (!digits || f.id == 0) {
                reply_err(x, "ERR client-id should be greater than 0"); /* Redis's text */
                return;
            }
        } else if (arg_is(x, i, "ADDR")) {
            f.addr = &x->argv[i + 1];
        } else if (arg_is(x, i, "TYPE")) {
            if (!arg_is(x, i + 1, "normal") && !arg_is(x, i + 1, "master") && !arg_is(x, i + 1, "replica") &&
                !arg_is(x, i + 1, "slave") && !arg_is(x, i + 1, "pubsub")) {
                char word[300];
                cmd_quote(word, sizeof word, &x->argv[i + 1]);
                reply_errf(x, "ERR Unknown client type '%s'", word);
                return;
            }
            f.none |= !arg_is(x, i + 1, "normal");
        } else if (arg_is(x, i, "SKIPME")) {
            if (!arg_is(x, i + 1, "yes") && !arg_is(x, i + 1, "no")) {
                reply_syntax_at(x, i + 1);
                return;
            }
            f.skipme = arg_is(x, i + 1, "yes");
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    resp_add_int(x->out, kill_clients(x, &f));
}

static void cmd_client(cmd_ctx_t *x)
{
    conn_t *c = x->conn;
    if (arg_is(x, 1, "ID") && x->argc == 2) {
        resp_add_uint(x->out, c->id);
    } else if (arg_is(x, 1, "SETNAME") && x->argc == 3) {
        if (name_ok(x, &x->argv[2])) {
            set_name(c, &x->argv[2]);
            reply_ok(x);
        }
    } else if (arg_is(x, 1, "GETNAME") && x->argc == 2) {
        if (c->name)
            resp_add_bulk_str(x->out, c->name);
        else
            resp_add_null(x->out, x->proto);
    } else if ((arg_is(x, 1, "LIST") || arg_is(x, 1, "INFO")) && x->argc == 2) {
        ordo_buf_t b = ORDO_BUF_INIT;
        uint64_t now = server_tick(x->srv); /* the clock of created_ms and last_cmd_ms */
        if (arg_is(x, 1, "INFO"))
            client_line(&b, c, now);
        else
            for (const conn_t *o = conn_first(&x->srv->net.conns); o != NULL; o = conn_next(o))
                if (!o->closing)
                    client_line(&b, o, now);
        resp_add_verbatim(x->out, x->proto, b.data ? b.data : "", b.len);
        ordo_buf_free(&b);
    } else if (arg_is(x, 1, "KILL") && x->argc >= 3) {
        client_kill(x);
    } else if (arg_is(x, 1, "SETINFO") && x->argc == 4) {
        reply_ok(x); /* client libraries announce themselves; accepted, not stored */
    } else {
        reply_errf(x, "ERR unknown subcommand or wrong number of arguments for CLIENT "
                      "(try ID, SETNAME, GETNAME, LIST, INFO, KILL)");
    }
}

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &rss) != 2)
        rss = 0;
    fclose(f);
    return rss * (size_t)sysconf(_SC_PAGESIZE);
}

/* INFO's sections, in the order they print. */
static const char *const info_sections[] = {"server", "clients", "memory",      "stats",  "persistence",
                                            "kv",     "queues",  "replication", "keyspace"};
#define INFO_SECTIONS (sizeof info_sections / sizeof info_sections[0])

static bool section_all(const cmd_ctx_t *x, size_t i)
{
    return arg_is(x, i, "all") || arg_is(x, i, "everything") || arg_is(x, i, "default");
}

/* INFO [section ...]: no argument, or all/everything/default, is every
 * section; several may be named (Redis 7). */
static bool section_wanted(const cmd_ctx_t *x, const char *name)
{
    if (x->argc < 2)
        return true;
    for (size_t i = 1; i < x->argc; i++)
        if (arg_is(x, i, name) || section_all(x, i))
            return true;
    return false;
}

/* An unknown section is an error naming the known ones, not the empty text
 * Redis answers: a caller asking for "replication" or "cpu" learns that ordo
 * has no such section instead of reading nothing. */
static bool sections_known(cmd_ctx_t *x)
{
    for (size_t i = 1; i < x->argc; i++) {
        bool known = section_all(x, i);
        for (size_t k = 0; k < INFO_SECTIONS && !known; k++)
            known = arg_is(x, i, info_sections[k]);
        if (!known) {
            reply_errf(x, "ERR unknown INFO section '%.*s' (sections: server, clients, memory, stats, "
                          "persistence, kv, queues, replication, keyspace, all)",
                       (int)(x->argv[i].len > 64 ? 64 : x->argv[i].len), x->argv[i].ptr);
            return false;
        }
    }
    return true;
}

static void cmd_info(cmd_ctx_t *x)
{
    if (!sections_known(x))
        return;
    server_t *s = x->srv;
    ordo_buf_t b = ORDO_BUF_INIT;
    uint64_t now = server_mono_ms();
    kv_stats_t st;
    kv_stats(core_kv(s->core), &st);
    if (section_wanted(x, "server"))
        ordo_buf_printf(&b, "# Server\r\nordo_version:%s\r\nredis_version:7.0.0\r\nprocess_id:%d\r\n"
                            "tcp_port:%lld\r\nuptime_in_seconds:%llu\r\nfsync:%s\r\n\r\n",
                        ORDO_VERSION, (int)getpid(), (long long)s->cfg.port,
                        (unsigned long long)((now - s->start_ms) / 1000),
                        s->cfg.fsync == FSYNC_ALWAYS ? "always" : s->cfg.fsync == FSYNC_EVERYSEC ? "everysec" : "no");
    if (section_wanted(x, "clients")) {
        ordo_buf_printf(&b, "# Clients\r\nconnected_clients:%zu\r\nmax_clients:%lld\r\nwatches:%zu\r\n"
                            "blocked_clients:%zu\r\n",
                        s->net.conns.len, (long long)s->cfg.max_clients, s->watches.count,
                        s->writer.block.blocked_clients);
        for (int k = 0; k < BLOCK_KINDS; k++)
            ordo_buf_printf(&b, "blocked_%s:%zu\r\n", block_kind_name(k), s->writer.block.blocked_by_kind[k]);
        ordo_buf_printf(&b, "\r\n");
    }
    if (section_wanted(x, "memory"))
        ordo_buf_printf(&b, "# Memory\r\nused_memory:%zu\r\nused_memory_kv:%zu\r\nused_memory_queues:%zu\r\n"
                            "used_memory_coord:%zu\r\nused_memory_rss:%zu\r\nmax_memory_bytes:%lld\r\n"
                            "mem_clients:%zu\r\nallocator_trims:%llu\r\n"
                            "kv_versions:%zu\r\nkv_log_entries:%zu\r\n\r\n",
                        writer_data_bytes(s), st.bytes, queue_set_bytes(core_queues(s->core)),
                        coord_wait_bytes(s), rss_bytes(),
                        (long long)s->cfg.max_memory_bytes, net_client_memory(s),
                        (unsigned long long)s->stats.allocator_trims, st.versions, st.log_entries);
    if (section_wanted(x, "stats"))
        ordo_buf_printf(&b, "# Stats\r\ntotal_connections_received:%llu\r\nrejected_connections:%llu\r\n"
                            "total_commands_processed:%llu\r\ntotal_error_replies:%llu\r\n"
                            "total_net_input_bytes:%llu\r\ntotal_net_output_bytes:%llu\r\n"
                            "watch_events:%llu\r\nwatch_cancelled:%llu\r\nexpired_keys:%llu\r\n"
                            "clients_closed_output_limit:%llu\r\nauth_failures:%llu\r\n"
                            "acl_access_denied_cmd:%llu\r\nacl_access_denied_key:%llu\r\n"
                            "transactions_total:%llu\r\ntransactions_aborted:%llu\r\n"
                            "tls_handshakes_ok:%llu\r\ntls_handshakes_failed:%llu\r\n"
                            "tls_handshakes_timedout:%llu\r\nloop_turn_max_us:%llu\r\nloop_turns_slow:%llu\r\n\r\n",
                        (unsigned long long)s->stats.connections_total,
                        (unsigned long long)s->stats.connections_rejected,
                        (unsigned long long)s->stats.commands_total, (unsigned long long)s->stats.errors_total,
                        (unsigned long long)s->stats.net_in_bytes, (unsigned long long)s->stats.net_out_bytes,
                        (unsigned long long)s->stats.watch_events_total,
                        (unsigned long long)s->stats.watch_cancelled_total,
                        (unsigned long long)s->stats.expired_keys_total,
                        (unsigned long long)s->stats.clients_closed_output,
                        (unsigned long long)s->stats.auth_failures,
                        (unsigned long long)s->stats.acl_denied_cmd, (unsigned long long)s->stats.acl_denied_name,
                        (unsigned long long)s->stats.transactions_total,
                        (unsigned long long)s->stats.transactions_aborted,
                        (unsigned long long)s->stats.tls_handshakes_ok,
                        (unsigned long long)s->stats.tls_handshakes_failed,
                        (unsigned long long)s->stats.tls_handshakes_timedout,
                        (unsigned long long)s->stats.loop_turn_max_us,
                        (unsigned long long)s->stats.loop_turns_slow);
    if (section_wanted(x, "persistence"))
        persist_info(s, &b);
    if (section_wanted(x, "kv"))
        ordo_buf_printf(&b, "# KV\r\nrevision:%llu\r\noldest_revision:%llu\r\nhistory_revs:%lld\r\n"
                            "history_bytes_max:%lld\r\nhistory_changes:%zu\r\nhistory_bytes:%zu\r\n"
                            "watch_resumable_revision:%llu\r\nqwatch_history_bytes:%zu\r\n"
                            "qwatch_history_bytes_max:%lld\r\nqwatch_resumable_revision:%llu\r\n\r\n",
                        (unsigned long long)core_rev(s->core), (unsigned long long)kv_oldest_rev(core_kv(s->core)),
                        (long long)s->cfg.history_revs, (long long)s->cfg.history_bytes, st.log_entries,
                        st.log_bytes, (unsigned long long)cmd_kv_resumable(s), coord_wait_qwatch_history_bytes(s),
                        (long long)s->cfg.queue_watch_history_bytes,
                        (unsigned long long)coord_wait_qwatch_floor(s));
    if (section_wanted(x, "queues")) {
        const queue_set_t *qs = core_queues(s->core);
        ordo_buf_printf(&b, "# Queues\r\nqueues:%zu\r\npaused_queues:%zu\r\npaused_keys:%zu\r\n\r\n",
                        queue_set_count(qs), queue_set_paused_queues(qs), queue_set_paused_keys(qs));
    }
    if (section_wanted(x, "replication"))
        cmd_replication_info(s, &b);
    if (section_wanted(x, "keyspace"))
        ordo_buf_printf(&b, "# Keyspace\r\ndb0:keys=%zu,expires=%zu\r\n", kv_count(core_kv(s->core)),
                        core_expiring(s->core));
    resp_add_verbatim(x->out, x->proto, b.data ? b.data : "", b.len);
    ordo_buf_free(&b);
}

/* One COMMAND / COMMAND INFO entry, in Redis 7's ten-element form: name,
 * arity, flags, first key, last key, key step, ACL categories (the group),
 * tips, key specifications, subcommands (the last three empty). */
static void command_entry(void *arg, const cmd_def_t *d)
{
    cmd_ctx_t *x = arg;
    bool multiple;
    int first = cmd_docs_first_key(d, &multiple);
    resp_add_array(x->out, 10);
    cmd_docs_name(x->out, d);
    resp_add_int(x->out, d->arity);
    int nflags = (d->flags & CMD_WRITE ? 1 : 0) + (d->flags & CMD_NOAUTH ? 1 : 0);
    resp_add_set(x->out, x->proto, (size_t)nflags);
    if (d->flags & CMD_WRITE)
        resp_add_simple(x->out, "write");
    if (d->flags & CMD_NOAUTH)
        resp_add_simple(x->out, "no_auth");
    resp_add_int(x->out, first);
    resp_add_int(x->out, first == 0 ? 0 : multiple ? -1 : 1);
    resp_add_int(x->out, first);
    resp_add_set(x->out, x->proto, 1);
    char cat[48];
    snprintf(cat, sizeof cat, "@%s", d->group ? d->group : "");
    resp_add_simple(x->out, cat);
    resp_add_array(x->out, 0);
    resp_add_array(x->out, 0);
    resp_add_array(x->out, 0);
}

static void command_name(void *arg, const cmd_def_t *d) { cmd_docs_name(((cmd_ctx_t *)arg)->out, d); }

static void command_docs(void *arg, const cmd_def_t *d)
{
    cmd_ctx_t *x = arg;
    cmd_docs_entry(x->out, x->proto, d);
}

/* COMMAND DOCS name...: the docs of the named commands that exist (unknown
 * names are left out, as Redis does), a map keyed by name. */
static void command_docs_named(cmd_ctx_t *x)
{
    size_t n = 0;
    for (size_t i = 2; i < x->argc; i++)
        n += cmd_find(x->srv, &x->argv[i]) != NULL;
    resp_add_map(x->out, x->proto, n);
    for (size_t i = 2; i < x->argc; i++) {
        const cmd_def_t *d = cmd_find(x->srv, &x->argv[i]);
        if (d != NULL)
            cmd_docs_entry(x->out, x->proto, d);
    }
}

static void cmd_command(cmd_ctx_t *x)
{
    if (x->argc == 1) {
        resp_add_array(x->out, cmd_count(x->srv));
        cmd_foreach(x->srv, command_entry, x);
    } else if (arg_is(x, 1, "COUNT") && x->argc == 2) {
        resp_add_uint(x->out, cmd_count(x->srv));
    } else if (arg_is(x, 1, "LIST") && x->argc == 2) {
        resp_add_array(x->out, cmd_count(x->srv));
        cmd_foreach(x->srv, command_name, x);
    } else if (arg_is(x, 1, "DOCS") && x->argc == 2) {
        resp_add_map(x->out, x->proto, cmd_count(x->srv));
        cmd_foreach(x->srv, command_docs, x);
    } else if (arg_is(x, 1, "DOCS")) {
        command_docs_named(x);
    } else if (arg_is(x, 1, "INFO") && x->argc == 2) {
        resp_add_array(x->out, cmd_count(x->srv));
        cmd_foreach(x->srv, command_entry, x);
    } else if (arg_is(x, 1, "INFO")) {
        /* One entry per name asked, nil for an unknown one, as Redis. */
        resp_add_array(x->out, x->argc - 2);
        for (size_t i = 2; i < x->argc; i++) {
            const cmd_def_t *d = cmd_find(x->srv, &x->argv[i]);
            if (d != NULL)
                command_entry(x, d);
            else
                resp_add_null_array(x->out, x->proto);
        }
    } else {
        reply_err(x, "ERR unknown subcommand or wrong number of arguments for COMMAND "
                     "(try COUNT, LIST, INFO [name ...], DOCS [name ...], or no argument)");
    }
}

typedef struct cfg_acc_s {
    ordo_buf_t items;
    size_t n;
} cfg_acc_t;

static void cfg_collect(void *arg, const char *name, const char *value)
{
    cfg_acc_t *a = arg;
    resp_add_bulk_str(&a->items, name);
    resp_add_bulk_str(&a->items, value);
    a->n++;
}

/* An argument as a C string into buf (cut at cap - 1 bytes). */
static const char *arg_str(const cmd_ctx_t *x, size_t i, char *buf, size_t cap)
{
    size_t n = x->argv[i].len < cap - 1 ? x->argv[i].len : cap - 1;
    memcpy(buf, x->argv[i].ptr, n);
    buf[n] = '\0';
    return buf;
}

/* CONFIG SET tls-option value [tls-option value ...]: the TLS options
 * alone may change while the server runs, all of them at once, and only
 * if the context they make loads (the certificate, key and CA are read
 * again: setting a file to its current path reloads it). tls-port and
 * tls-http decide the listeners, so they are set at start. */
static void config_set_tls(cmd_ctx_t *x)
{
    if (x->argc < 4 || x->argc % 2 != 0) {
        reply_err(x, "ERR wrong number of arguments for CONFIG SET (CONFIG SET tls-option value ...)");
        return;
    }
    if (x->srv->hooks.tls_reload == NULL) {
        reply_err(x, "ERR TLS cannot be reloaded here");
        return;
    }
    ordo_config_t *next = ordo_xmalloc(sizeof *next);
    *next = x->srv->cfg;
    char name[64], value[1100], err[512];
    for (size_t i = 2; i < x->argc; i += 2) {
        arg_str(x, i, name, sizeof name);
        arg_str(x, i + 1, value, sizeof value);
        if (strncasecmp(name, "tls-", 4) != 0 || strcasecmp(name, "tls-port") == 0 ||
            strcasecmp(name, "tls-http") == 0) {
            reply_errf(x, "ERR CONFIG SET changes only the tls-* options other than tls-port and tls-http; "
                          "'%s' is set at start", name);
            free(next);
            return;
        }
        if (config_set(next, name, value, err, sizeof err) != 0) {
            reply_errf(x, "ERR %s", err);
            free(next);
            return;
        }
    }
    if (x->srv->hooks.tls_reload(x->srv, next, err, sizeof err) != 0) {
        reply_errf(x, "ERR TLS reload failed, the old settings serve on: %s", err);
    } else {
        x->srv->cfg = *next;
        reply_ok(x);
    }
    free(next);
}

static void cmd_config(cmd_ctx_t *x)
{
    if (arg_is(x, 1, "SET")) {
        config_set_tls(x);
        return;
    }
    if (!arg_is(x, 1, "GET") || x->argc < 3) {
        reply_err(x, "ERR CONFIG GET pattern [pattern ...] shows options; CONFIG SET changes only the tls-* "
                     "options; the rest are set with flags or the config file");
        return;
    }
    cfg_acc_t a = {ORDO_BUF_INIT, 0};
    for (size_t i = 2; i < x->argc; i++) {
        char pat[128];
        snprintf(pat, sizeof pat, "%.*s", (int)(x->argv[i].len < 127 ? x->argv[i].len : 127), x->argv[i].ptr);
        config_foreach(&x->srv->cfg, pat, cfg_collect, &a);
    }
    resp_add_map(x->out, x->proto, a.n);
    if (a.items.len > 0)
        ordo_buf_append(x->out, a.items.data, a.items.len);
    ordo_buf_free(&a.items);
}

/* SNAPSHOT: start a snapshot (or join the running one); the reply is the
 * revision it covers, 0 if there is nothing to cover yet. INFO persistence
 * shows when it is done. */
static void cmd_snapshot(cmd_ctx_t *x)
{
    char err[512];
    int64_t rev = persist_snapshot(x->srv, err, sizeof err);
    if (rev < 0)
        reply_errf(x, "ERR snapshot failed: %s", err);
    else
        resp_add_int(x->out, rev);
}

static void cmd_dbsize(cmd_ctx_t *x) { resp_add_uint(x->out, kv_count(core_kv(x->srv->core))); }

static void cmd_time(cmd_ctx_t *x)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char a[32], b[32];
    snprintf(a, sizeof a, "%lld", (long long)tv.tv_sec);
    snprintf(b, sizeof b, "%lld", (long long)tv.tv_usec);
    resp_add_array(x->out, 2);
    resp_add_bulk_str(x->out, a);
    resp_add_bulk_str(x->out, b);
}

/* EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL (and the _RO forms): ordo runs no
 * scripts. A script's use in Redis is atomic read-modify-write; the answer
 * names ordo's ways to get it. */
static void cmd_noscript(cmd_ctx_t *x)
{
    reply_errf(x, "ERR ordo runs no scripts ('%.*s'): for atomic read-modify-write use MULTI/EXEC with WATCH, "
                  "KV.PUT/KV.DEL IFREV, or FENCE (docs/protocol.md)",
               (int)(x->argv[0].len > 32 ? 32 : x->argv[0].len), x->argv[0].ptr);
}

const cmd_def_t cmd_server_defs[] = {
    {"PING", -1, CMD_NOAUTH | CMD_WATCHMODE | CMD_NOSTATE, cmd_ping,
     "Ping the server: PONG, or the message",
     "[message]", "connection"},
    {"ECHO", 2, CMD_NOSTATE, cmd_echo, "Answer the given message", "message", "connection"},
    {"QUIT", 1, CMD_NOAUTH | CMD_WATCHMODE | CMD_NOSTATE, cmd_quit,
     "Close the connection after answering OK",
     "", "connection"},
    {"AUTH", -2, CMD_NOAUTH | CMD_WATCHMODE | CMD_NOSTATE, cmd_auth,
     "Authenticate the connection",
     "[username] password", "connection"},
    {"HELLO", -1, CMD_NOAUTH | CMD_NOSTATE, cmd_hello,
     "Choose RESP2 or RESP3, authenticate, name the connection; a map about the server",
     "[protover [AUTH username password] [SETNAME clientname]]", "connection"},
    {"CLIENT", -2, CMD_NOSTATE, cmd_client,
     "Connection id, name, the list of clients, and closing them",
     "ID|SETNAME name|GETNAME|LIST|INFO|KILL addr:port|KILL [ID id] [ADDR addr:port] [TYPE type] [SKIPME yes|no]|SETINFO attr value",
     "connection"},
    {"INFO", -1, CMD_NOSTATE, cmd_info,
     "Information and statistics about the server, by section",
     "[section [section ...]]", "server"},
    {"COMMAND", -1, CMD_NOSTATE, cmd_command,
     "The command table, its size, names, and each command's docs",
     "[COUNT|LIST|INFO [command-name [command-name ...]]|DOCS [command-name [command-name ...]]]", "server"},
    {"CONFIG", -2, CMD_NOSTATE, cmd_config,
     "The options matching glob patterns; SET changes the TLS options and reloads the certificate",
     "GET parameter [parameter ...]|SET tls-option value [tls-option value ...]", "server"},
    {"DBSIZE", 1, 0, cmd_dbsize, "The number of live keys", "", "server"},
    {"SNAPSHOT", 1, 0, cmd_snapshot,
     "Start a snapshot (or join the running one); the revision it covers",
     "", "server"},
    {"EVAL", -1, CMD_NOSTATE, cmd_noscript, "Refused: ordo runs no scripts (use MULTI/WATCH, IFREV or FENCE)",
     "[script] [numkeys] [key [key ...]] [arg [arg ...]]", "scripting"},
    {"EVALSHA", -1, CMD_NOSTATE, cmd_noscript, "Refused: ordo runs no scripts (use MULTI/WATCH, IFREV or FENCE)",
     "[sha1] [numkeys] [key [key ...]] [arg [arg ...]]", "scripting"},
    {"EVAL_RO", -1, CMD_NOSTATE, cmd_noscript, "Refused: ordo runs no scripts (use MULTI/WATCH, IFREV or FENCE)",
     "[script] [numkeys] [key [key ...]] [arg [arg ...]]", "scripting"},
    {"EVALSHA_RO", -1, CMD_NOSTATE, cmd_noscript, "Refused: ordo runs no scripts (use MULTI/WATCH, IFREV or FENCE)",
     "[sha1] [numkeys] [key [key ...]] [arg [arg ...]]", "scripting"},
    {"SCRIPT", -1, CMD_NOSTATE, cmd_noscript, "Refused: ordo runs no scripts (use MULTI/WATCH, IFREV or FENCE)",
     "[subcommand] [arg [arg ...]]", "scripting"},
    {"FUNCTION", -1, CMD_NOSTATE, cmd_noscript, "Refused: ordo runs no functions (use MULTI/WATCH, IFREV or FENCE)",
     "[subcommand] [arg [arg ...]]", "scripting"},
    {"FCALL", -1, CMD_NOSTATE, cmd_noscript, "Refused: ordo runs no functions (use MULTI/WATCH, IFREV or FENCE)",
     "[function] [numkeys] [key [key ...]] [arg [arg ...]]", "scripting"},
    {"FCALL_RO", -1, CMD_NOSTATE, cmd_noscript, "Refused: ordo runs no functions (use MULTI/WATCH, IFREV or FENCE)",
     "[function] [numkeys] [key [key ...]] [arg [arg ...]]", "scripting"},
    {"TIME", 1, CMD_NOSTATE, cmd_time, "The server's time: [unix seconds, microseconds]", "", "server"},
};

const size_t cmd_server_ndefs = sizeof cmd_server_defs / sizeof cmd_server_defs[0];
