/*
 * ordo.c -- the `ordo` command-line tool (docs/client.md, "The `ordo` tool"), built on
 * the client library only (ordo/client.h).
 *
 * The usage is usage_text below (and `ordo --help`); each command's line
 * is a TOOL_SYN_ macro of tool.h, its options a table parsed by
 * tool_parse() (tool/opt.c), which names the argument and the fault of
 * every usage error. This file holds main(), the command table, and the
 * commands but status and top (tool/stats.c).
 *
 * Addresses: -h takes one host or a list (host:port, [v6]:port; an entry
 * without a port gets -p's); without -h and -p, ORDO_ADDRS; every client
 * learns the rest of a cluster from CLUSTER MEMBERS and follows the leader.
 * A port outside 1..65535 or an address that does not parse is a usage
 * error. One-shot commands (all but watch and consume) give up after
 * --timeout (default TOOL_TIMEOUT_MS_DEFAULT), naming the addresses tried.
 * --user names the user -a's password is for (ACL SETUSER); without it,
 * ORDO_USER; without that, the default user.
 *
 * TLS: --tls speaks TLS to the server's tls-port, verifying its
 * certificate against --cacert (default: the system's CAs) and the name
 * the address gives (or --sni's); --cert and --key show a client
 * certificate. A certificate that does not verify fails at once (exit 1).
 *
 * Exit status: 0 on success (--help and `ordo help` too, on stdout); 1 on
 * an error reply, a timeout or a lost server (the error on stderr); 2 on
 * a usage error (and consume's PROGRAM that cannot be executed): one line
 * naming the argument and what is wrong with it, then a pointer to
 * --help; the whole usage only when no command is given. `watch` retries a lost server for ever but
 * stops at once on what retrying cannot cure (a revision in the future, a
 * wrong password), saying why.
 *
 * consume: each message runs PROGRAM once, in its own process group, with
 * the payload on its stdin and the caller's environment plus ORDO_QUEUE,
 * ORDO_KEY, ORDO_ID, ORDO_ATTEMPT, ORDO_TOKEN and ORDO_ADDRS; exit status
 * 0 acks with its stdout as the result, anything else (a signal included)
 * nacks (after --nack-delay, or with --queue-backoff without a delay, so
 * the queue's BACKOFF decides); with --tempfail-pause MS, exit
 * TOOL_PROGRAM_EXIT_TEMPFAIL (75, EX_TEMPFAIL) first pauses the message's
 * key for MS (ORDO_HANDLER_PAUSE). Output past TOOL_RESULT_MAX is read
 * and discarded, and the message nacked; --timeout kills the group and
 * nacks; once PROGRAM has exited its stdout is read no further (a
 * background child keeping it open is not waited for). Leases are kept
 * while PROGRAM runs (the consumer runner's keeper). SIGINT/SIGTERM stop
 * it: nothing more is pulled, running programs get SIGTERM, then SIGKILL
 * after TOOL_STOP_GRACE_MS, and their messages are nacked. --exactly-once:
 * each line of PROGRAM's stdout is a command run in one transaction with
 * the ack (docs/exactly-once.md, "From a script").
 *
 * Queue control, on the client's typed calls: pause and resume print 1,
 * or 0 if the queue or key was so already; redrive prints how many dead
 * letters moved (without --key or --id it calls again until a call moves
 * nothing: the server moves at most a thousand keys a call); cancel and
 * schedule del print 1, or 0 for ORDO_ENOTFOUND (no waiting message with
 * that id, no schedule of that name); schedule add prints OK; schedule
 * list prints one line per schedule, `name queue next=N pushed=N
 * skipped=N` and `every=MS` or `cron="EXPR"`.
 */
#include "ordo/client.h"
#include "tool/tool.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* A program's stdout larger than this is not a result anyone wants in a
 * queue's result store: the rest is read and discarded (so the program
 * never blocks on a full pipe) and the message is nacked. */
#define TOOL_RESULT_MAX ((size_t)64 * 1024 * 1024)
/* One-shot commands give up after this long (connecting included) unless
 * --timeout says otherwise: long enough for a cluster's election, short
 * enough that a down server is reported while someone is looking. */
#define TOOL_TIMEOUT_MS_DEFAULT 5000
/* A host of -h longer than this is no host name (DNS names are at most 253
 * bytes). */
#define TOOL_HOST_MAX 256

/* The whole usage: for --help and `ordo help` (stdout, exit 0) and for
 * no command at all (stderr, exit 2); any other fault is one line
 * (tool_usage_error()). */
static const char *usage_text =
    "usage: ordo [-h host[:port][,host:port...]] [-p port] [-a password] [--user NAME] [--timeout MS]\n"
    "            [--tls [--cacert FILE] [--cert FILE --key FILE] [--sni NAME]] COMMAND ...\n"
    "       ordo --help | ordo help\n"
    "  -h, -p    the server (without them: ORDO_ADDRS, a list like -h's; default 127.0.0.1:7379)\n"
    "  -a        its password\n"
    "  --user    the user -a's password is for (ACL SETUSER; without it: ORDO_USER, else the default user)\n"
    "  --timeout one-shot commands (all but watch and consume) give up after MS (default 5000)\n"
    "  --tls     to a tls-port, verifying the server against --cacert (default: the system's CAs)\n"
    "            and its name (or --sni's); --cert and --key show a client certificate\n"
    "commands:\n"
    "  " TOOL_SYN_WATCH "\n"
    "  " TOOL_SYN_CALL "\n"
    "  " TOOL_SYN_PUSH "\n"
    "  " TOOL_SYN_PAUSE "\n"
    "  " TOOL_SYN_RESUME "\n"
    "  " TOOL_SYN_REDRIVE "\n"
    "  " TOOL_SYN_CANCEL "\n"
    "  " TOOL_SYN_SCHEDULE_ADD "\n"
    "  " TOOL_SYN_SCHEDULE_DEL " | " TOOL_SYN_SCHEDULE_LIST "\n"
    "  " TOOL_SYN_CONSUME "\n"
    "  " TOOL_SYN_TOP "\n"
    "  " TOOL_SYN_STATUS "\n"
    "exit status: 0 success, 1 an error reply, a timeout or a lost server, 2 a usage error\n";

static int help(void)
{
    fputs(usage_text, stdout);
    return fflush(stdout) == 0 && !ferror(stdout) ? TOOL_EXIT_OK : TOOL_EXIT_FAIL;
}

/* parsed() -- what tool_parse() returned, as the command's exit status:
 * --help prints the usage (stdout, 0). */
static int parsed(int rc)
{
    return rc == TOOL_HELP ? help() : rc;
}

/* Print bytes as redis-cli quotes them when they need it. */
static void put_quoted(FILE *f, const char *s, size_t n)
{
    int plain = n > 0;
    for (size_t i = 0; i < n && plain; i++) {
        unsigned char ch = (unsigned char)s[i];
        plain = ch > ' ' && ch < 127 && ch != '"' && ch != '\\' && ch != '\'';
    }
    if (plain) {
        fwrite(s, 1, n, f);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '\\': fputs("\\\\", f); break;
        case '"': fputs("\\\"", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\a': fputs("\\a", f); break;
        case '\b': fputs("\\b", f); break;
        default:
            if (ch < ' ' || ch >= 127)
                fprintf(f, "\\x%02x", ch);
            else
                fputc(ch, f);
        }
    }
    fputc('"', f);
}

/* The range of a millisecond option: what an int holds. */
#define TOOL_MS_MAX INT32_MAX

/* ---- watch ---------------------------------------------------------------- */

static int on_event(void *arg, const ordo_watch_event_t *ev)
{
    (void)arg;
    if (ev->kind != ORDO_WATCH_PUT && ev->kind != ORDO_WATCH_DEL)
        return 0;
    printf("%" PRId64 " %s ", ev->rev, ev->kind == ORDO_WATCH_PUT ? "put" : "del");
    put_quoted(stdout, ev->key, ev->key_len);
    if (ev->kind == ORDO_WATCH_PUT) {
        fputc(' ', stdout);
        put_quoted(stdout, ev->value ? ev->value : "", ev->value_len);
    }
    fputc('\n', stdout);
    fflush(stdout);
    return ferror(stdout) ? 1 : 0; /* a closed pipe ends the watch */
}

/* on_watch_error() -- say why on stderr: a final error at once; a lost
 * server once per change of reason, not on every retry. */
static void on_watch_error(void *arg, int err, const char *text, int final)
{
    char *last = arg;
    if (!final && strncmp(last, text, 255) == 0)
        return;
    snprintf(last, 256, "%s", text);
    fprintf(stderr, "ordo watch: %s: %s%s\n", ordo_strerror(err), text, final ? "" : " (retrying)");
}

static int cmd_watch(ordo_client_opts_t *co, const tool_opt_t *global, int argc, char **argv)
{
    char last_error[256] = "";
    ordo_watch_opts_t o = { .conn = *co, .fn = on_event, .on_error = on_watch_error, .arg = last_error };
    o.conn.reconnect_timeout_ms = ORDO_WAIT_FOREVER;
    o.conn.call_timeout_ms = 0;
    const char *prefix = NULL;
    o.from_rev = -1;
    const tool_opt_t opts[] = {
        { "--prefix", NULL, TOOL_OPT_STR, &prefix, NULL, 0, 0 },
        { "--from", NULL, TOOL_OPT_INT, &o.from_rev, "a revision", 0, INT64_MAX },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    static const char *const names[] = { "KEY" };
    const tool_cmd_t cmd = { "watch", TOOL_SYN_WATCH, opts, names, 0, 1, 0 };
    const char *key = NULL;
    int n, rc = tool_parse(&cmd, global, argc, argv, &key, &n, NULL);
    if (rc != 0)
        return parsed(rc);
    if (key != NULL && prefix != NULL)
        return tool_usage_error("watch", "KEY '%.100s' and --prefix '%.100s': one or the other", key, prefix);
    if (key == NULL && prefix == NULL)
        return tool_usage_missing("watch", "KEY (or --prefix P)", TOOL_SYN_WATCH);
    o.prefix = prefix != NULL;
    o.key = prefix ? prefix : key;
    o.key_len = strlen(o.key);
    o.from_set = o.from_rev >= 0;
    if (!o.from_set)
        o.from_rev = 0;
    rc = ordo_watch_run(&o, NULL);
    return rc == ORDO_OK ? TOOL_EXIT_OK : TOOL_EXIT_FAIL; /* on_watch_error said why */
}

/* ---- call, push ------------------------------------------------------------ */

static const char *const queue_key_payload[] = { "QUEUE", "KEY", "PAYLOAD" };

static int cmd_call(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    const char *id = NULL;
    int64_t timeout_ms = 0;
    const tool_opt_t opts[] = {
        { "--id", NULL, TOOL_OPT_STR, &id, NULL, 0, 0 },
        { "--timeout", NULL, TOOL_OPT_INT, &timeout_ms, "a number of milliseconds", 0, TOOL_MS_MAX },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    const tool_cmd_t cmd = { "call", TOOL_SYN_CALL, opts, queue_key_payload, 3, 3, 0 };
    const char *pos[3];
    int n, rc = tool_parse(&cmd, global, argc, argv, pos, &n, NULL);
    if (rc != 0)
        return parsed(rc);
    char *res;
    size_t len;
    rc = ordo_q_call(c, pos[0], pos[1], strlen(pos[1]), pos[2], strlen(pos[2]), timeout_ms, id, &res, &len);
    if (rc != ORDO_OK)
        return tool_fail(c, "call", rc);
    if (res)
        fwrite(res, 1, len, stdout);
    if (len == 0 || res[len - 1] != '\n')
        fputc('\n', stdout);
    free(res);
    return TOOL_EXIT_OK;
}

static int cmd_push(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    ordo_push_opts_t po = { 0 };
    const tool_opt_t opts[] = {
        { "--id", NULL, TOOL_OPT_STR, &po.id, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    const tool_cmd_t cmd = { "push", TOOL_SYN_PUSH, opts, queue_key_payload, 3, 3, 0 };
    const char *pos[3];
    int n, rc = tool_parse(&cmd, global, argc, argv, pos, &n, NULL);
    if (rc != 0)
        return parsed(rc);
    po.id_len = po.id ? strlen(po.id) : 0;
    int64_t id;
    rc = ordo_q_push(c, pos[0], pos[1], strlen(pos[1]), pos[2], strlen(pos[2]), &po, &id);
    if (rc != ORDO_OK)
        return tool_fail(c, "push", rc);
    printf("%" PRId64 "\n", id);
    return TOOL_EXIT_OK;
}

/* ---- pause, resume, redrive, cancel ------------------------------------------ */

/* The longest time a queue command takes (Q.PAUSE FOR, Q.SCHEDULE EVERY):
 * ten years, as ordod's queue commands take it (docs/protocol.md); a
 * longer --for or --every is a usage error here. */
#define TOOL_QUEUE_MS_MAX ((int64_t)10 * 366 * 24 * 3600 * 1000)

static const char *const queue_only[] = { "QUEUE" };

/* pause QUEUE [--key KEY] [--for MS]: 1, or 0 if paused so already. */
static int cmd_pause(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    const char *key = NULL;
    int64_t for_ms = 0;
    const tool_opt_t opts[] = {
        { "--key", NULL, TOOL_OPT_STR, &key, NULL, 0, 0 },
        { "--for", NULL, TOOL_OPT_INT, &for_ms, "a number of milliseconds", 1, TOOL_QUEUE_MS_MAX },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    const tool_cmd_t cmd = { "pause", TOOL_SYN_PAUSE, opts, queue_only, 1, 1, 0 };
    const char *queue;
    int n, changed = 0, rc = tool_parse(&cmd, global, argc, argv, &queue, &n, NULL);
    if (rc != 0)
        return rc;
    rc = ordo_q_pause(c, queue, key, key ? strlen(key) : 0, for_ms, &changed);
    if (rc != ORDO_OK)
        return tool_fail(c, "pause", rc);
    printf("%d\n", changed);
    return TOOL_EXIT_OK;
}

/* resume QUEUE [--key KEY]: 1, or 0 if it was not paused. */
static int cmd_resume(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    const char *key = NULL;
    const tool_opt_t opts[] = {
        { "--key", NULL, TOOL_OPT_STR, &key, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    const tool_cmd_t cmd = { "resume", TOOL_SYN_RESUME, opts, queue_only, 1, 1, 0 };
    const char *queue;
    int n, changed = 0, rc = tool_parse(&cmd, global, argc, argv, &queue, &n, NULL);
    if (rc != 0)
        return rc;
    rc = ordo_q_resume(c, queue, key, key ? strlen(key) : 0, &changed);
    if (rc != ORDO_OK)
        return tool_fail(c, "resume", rc);
    printf("%d\n", changed);
    return TOOL_EXIT_OK;
}

/* redrive QUEUE [--from DLQ] [--key KEY|--id ID]: how many moved; without
 * --key or --id, call after call (the server moves at most a thousand
 * keys a call) until one moves nothing. */
static int cmd_redrive(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    const char *from = NULL, *key = NULL;
    int64_t id = 0;
    const tool_opt_t opts[] = {
        { "--from", NULL, TOOL_OPT_STR, &from, NULL, 0, 0 },
        { "--key", NULL, TOOL_OPT_STR, &key, NULL, 0, 0 },
        { "--id", NULL, TOOL_OPT_INT, &id, "a message id", 1, INT64_MAX },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    const tool_cmd_t cmd = { "redrive", TOOL_SYN_REDRIVE, opts, queue_only, 1, 1, 0 };
    const char *queue;
    int n, rc = tool_parse(&cmd, global, argc, argv, &queue, &n, NULL);
    if (rc != 0)
        return rc;
    if (key != NULL && id != 0)
        return tool_usage_error("redrive", "--key '%.100s' and --id %" PRId64 ": one or the other", key, id);
    int64_t total = 0, moved;
    do {
        rc = ordo_q_redrive(c, queue, from, key, key ? strlen(key) : 0, id, &moved);
        if (rc != ORDO_OK)
            return tool_fail(c, "redrive", rc);
        total += moved;
    } while (moved > 0 && key == NULL && id == 0);
    printf("%" PRId64 "\n", total);
    return TOOL_EXIT_OK;
}

/* cancel QUEUE ID: 1, or 0 if no message waits with that id. */
static int cmd_cancel(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    static const char *const names[] = { "QUEUE", "ID" };
    const tool_cmd_t cmd = { "cancel", TOOL_SYN_CANCEL, NULL, names, 2, 2, 0 };
    const char *pos[2];
    int64_t id;
    int n, rc = tool_parse(&cmd, global, argc, argv, pos, &n, NULL);
    if (rc == 0)
        rc = tool_int_arg("cancel", "ID", pos[1], "a message id", 1, INT64_MAX, &id);
    if (rc != 0)
        return rc;
    rc = ordo_q_cancel(c, pos[0], id);
    if (rc != ORDO_OK && rc != ORDO_ENOTFOUND)
        return tool_fail(c, "cancel", rc);
    printf("%d\n", rc == ORDO_OK);
    return TOOL_EXIT_OK;
}

/* ---- schedule ------------------------------------------------------------- */

/* schedule add NAME QUEUE KEY PAYLOAD --every MS [--start MS] | --cron EXPR
 * [--skip-missed]: OK. Exactly one of --every and --cron; --start goes
 * with --every. */
static int schedule_add(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    ordo_schedule_opts_t o = { 0 };
    int skip_missed = 0;
    const tool_opt_t opts[] = {
        { "--every", NULL, TOOL_OPT_INT, &o.every_ms, "a number of milliseconds", 1, TOOL_QUEUE_MS_MAX },
        { "--start", NULL, TOOL_OPT_INT, &o.start_ms, "a time in milliseconds since the epoch", 1, INT64_MAX },
        { "--cron", NULL, TOOL_OPT_STR, &o.cron, NULL, 0, 0 },
        { "--skip-missed", NULL, TOOL_OPT_FLAG, &skip_missed, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    static const char *const names[] = { "NAME", "QUEUE", "KEY", "PAYLOAD" };
    const tool_cmd_t cmd = { "schedule add", TOOL_SYN_SCHEDULE_ADD, opts, names, 4, 4, 0 };
    const char *pos[4];
    int n, rc = tool_parse(&cmd, global, argc, argv, pos, &n, NULL);
    if (rc != 0)
        return rc;
    if (o.every_ms != 0 && o.cron != NULL)
        return tool_usage_error("schedule add", "--every %" PRId64 " and --cron '%.100s': one or the other",
                                o.every_ms, o.cron);
    if (o.every_ms == 0 && o.cron == NULL)
        return tool_usage_missing("schedule add", "--every MS or --cron EXPR", TOOL_SYN_SCHEDULE_ADD);
    if (o.start_ms != 0 && o.cron != NULL)
        return tool_usage_error("schedule add", "--start goes with --every, not --cron");
    o.skip_missed = skip_missed != 0;
    rc = ordo_q_schedule_add(c, pos[0], pos[1], pos[2], strlen(pos[2]), pos[3], strlen(pos[3]), &o);
    if (rc != ORDO_OK)
        return tool_fail(c, "schedule add", rc);
    puts("OK");
    return TOOL_EXIT_OK;
}

/* schedule del NAME: 1, or 0 if there was none. */
static int schedule_del(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    static const char *const names[] = { "NAME" };
    const tool_cmd_t cmd = { "schedule del", TOOL_SYN_SCHEDULE_DEL, NULL, names, 1, 1, 0 };
    const char *name;
    int n, rc = tool_parse(&cmd, global, argc, argv, &name, &n, NULL);
    if (rc != 0)
        return rc;
    rc = ordo_q_schedule_del(c, name);
    if (rc != ORDO_OK && rc != ORDO_ENOTFOUND)
        return tool_fail(c, "schedule del", rc);
    printf("%d\n", rc == ORDO_OK);
    return TOOL_EXIT_OK;
}

/* One field of a Q.SCHEDULE LIST map (a flat array in RESP2), or NULL. */
static const ordo_reply_t *map_get(const ordo_reply_t *m, const char *name)
{
    for (size_t i = 0; m->elem != NULL && i + 1 < m->n; i += 2)
        if (m->elem[i]->str != NULL && strcmp(m->elem[i]->str, name) == 0)
            return m->elem[i + 1];
    return NULL;
}

/* schedule list: one line per schedule, by name:
 * `name queue next=N pushed=N skipped=N every=MS` or `... cron="EXPR"`. */
static int schedule_list(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    const tool_cmd_t cmd = { "schedule list", TOOL_SYN_SCHEDULE_LIST, NULL, NULL, 0, 0, 0 };
    int n, rc = tool_parse(&cmd, global, argc, argv, NULL, &n, NULL);
    if (rc != 0)
        return rc;
    ordo_reply_t *r;
    rc = ordo_client_command_strs(c, 0, &r, "Q.SCHEDULE", "LIST", NULL);
    if (rc != ORDO_OK)
        return tool_fail(c, "schedule list", rc);
    for (size_t i = 0; r->elem != NULL && i < r->n; i++) {
        const ordo_reply_t *m = r->elem[i], *name = map_get(m, "name"), *queue = map_get(m, "queue"),
                           *cron = map_get(m, "cron"), *every = map_get(m, "every"), *next = map_get(m, "next"),
                           *pushed = map_get(m, "pushed"), *skipped = map_get(m, "skipped");
        if (name == NULL || name->str == NULL || queue == NULL || queue->str == NULL || next == NULL ||
            pushed == NULL || skipped == NULL || every == NULL)
            continue;
        put_quoted(stdout, name->str, name->len);
        fputc(' ', stdout);
        put_quoted(stdout, queue->str, queue->len);
        printf(" next=%" PRId64 " pushed=%" PRId64 " skipped=%" PRId64 " ", next->integer, pushed->integer,
               skipped->integer);
        if (cron != NULL && cron->str != NULL)
            printf("cron=\"%s\"\n", cron->str);
        else
            printf("every=%" PRId64 "\n", every->integer);
    }
    ordo_reply_free(r);
    return TOOL_EXIT_OK;
}

/* schedule add|del|list: the subcommand at argv[0]. */
static int cmd_schedule(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    if (argc == 0)
        return tool_usage_missing("schedule", "add, del or list",
                                  TOOL_SYN_SCHEDULE_ADD "\n       ordo " TOOL_SYN_SCHEDULE_DEL
                                                        " | ordo " TOOL_SYN_SCHEDULE_LIST);
    if (strcmp(argv[0], "--help") == 0)
        return TOOL_HELP;
    if (strcmp(argv[0], "add") == 0)
        return schedule_add(c, global, argc - 1, argv + 1);
    if (strcmp(argv[0], "del") == 0)
        return schedule_del(c, global, argc - 1, argv + 1);
    if (strcmp(argv[0], "list") == 0)
        return schedule_list(c, global, argc - 1, argv + 1);
    return tool_usage_error("schedule", "unknown subcommand '%.100s' (add, del, list)", argv[0]);
}

/* ---- consume -------------------------------------------------------------- */

/* How a running PROGRAM is watched: its exit (a pidfd where the kernel has
 * them, else a poll of this slice), its stdout, its stdin, its deadline
 * and the tool's stop. */
#define TOOL_POLL_SLICE_MS 10
/* After SIGTERM, a running PROGRAM gets this long to finish (its process
 * group is sent SIGTERM) before SIGKILL; its message is then nacked. */
#define TOOL_STOP_GRACE_MS 2000
/* sysexits.h's EX_TEMPFAIL ("try again later"), as PROGRAM's exit status:
 * with --tempfail-pause MS, a PROGRAM exiting so pauses its message's key
 * for MS (a tenant's downstream answered 429 or 503) instead of only
 * nacking. */
#define TOOL_PROGRAM_EXIT_TEMPFAIL 75
/* The variables the tool sets for PROGRAM (the caller's others are kept). */
#define TOOL_ENV_OURS 6

typedef struct program {
    char **argv;
    const char *queue;
    const char *addrs;       /* ORDO_ADDRS for PROGRAM */
    int64_t timeout_ms;      /* per message; 0: none */
    int64_t tempfail_pause_ms; /* exit TOOL_PROGRAM_EXIT_TEMPFAIL pauses the key this long; 0: nacks */
    int64_t stop_at_ms;      /* 0 while running; when SIGTERM came */
    pthread_mutex_t mu;      /* guards stop_at_ms */
} program_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t stop_time(program_t *prog)
{
    pthread_mutex_lock(&prog->mu);
    int64_t t = prog->stop_at_ms;
    pthread_mutex_unlock(&prog->mu);
    return t;
}

static char *env_var(const char *name, const char *val, size_t n)
{
    size_t l = strlen(name);
    char *s = malloc(l + 1 + n + 1);
    if (s) {
        memcpy(s, name, l);
        s[l] = '=';
        memcpy(s + l + 1, val, n);
        s[l + 1 + n] = '\0';
    }
    return s;
}

/* runnable() -- can path (as posix_spawnp would find it) be executed? 0,
 * or -1 with why (cap bytes) saying what is wrong. */
static int runnable(const char *path, char *why, size_t cap)
{
    struct stat st;
    if (strchr(path, '/') != NULL) {
        if (stat(path, &st) != 0 || access(path, X_OK) != 0) {
            snprintf(why, cap, "%s", strerror(errno));
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(why, cap, "not a regular file");
            return -1;
        }
        return 0;
    }
    const char *p = getenv("PATH");
    if (p == NULL)
        p = "/usr/bin:/bin";
    for (;;) {
        size_t n = strcspn(p, ":");
        char full[4096];
        if (snprintf(full, sizeof full, "%.*s%s%s", (int)n, n ? p : ".", "/", path) < (int)sizeof full &&
            stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0)
            return 0;
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    snprintf(why, cap, "not found in PATH");
    return -1;
}

/* exchange() -- run the spawned pid to its end: feed it the payload,
 * collect its stdout (reading and discarding past TOOL_RESULT_MAX), kill
 * its process group at its deadline or after the stop grace, and reap it.
 * Stops reading once the program has exited: a descendant that keeps the
 * pipe open is not waited for. *status (output) is the wait status, or -1
 * if it was killed here or its output overflowed. */
static void exchange(program_t *prog, pid_t pid, int in_fd, int out_fd, const char *payload, size_t plen,
                     char **out, size_t *outlen, int *status)
{
    size_t sent = 0, cap = 0, len = 0;
    char *buf = NULL;
    int overflow = 0, killed = 0, exited = 0, termed = 0;
    int64_t deadline = prog->timeout_ms > 0 ? now_ms() + prog->timeout_ms : -1;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    fcntl(in_fd, F_SETFL, O_NONBLOCK);
    fcntl(out_fd, F_SETFL, O_NONBLOCK);
    if (plen == 0) {
        close(in_fd);
        in_fd = -1;
    }
    while (!exited) {
        struct pollfd p[3];
        int np = 0, iout = -1, iin = -1;
        if (out_fd >= 0)
            p[iout = np++] = (struct pollfd){ .fd = out_fd, .events = POLLIN };
        if (in_fd >= 0)
            p[iin = np++] = (struct pollfd){ .fd = in_fd, .events = POLLOUT };
        if (pidfd >= 0)
            p[np++] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
        int slice = pidfd >= 0 ? 100 : TOOL_POLL_SLICE_MS; /* stop and deadline checks */
        if (poll(p, (nfds_t)np, slice) < 0 && errno != EINTR)
            break;
        if (iin >= 0 && (p[iin].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t k = write(in_fd, payload + sent, plen - sent);
            if (k > 0)
                sent += (size_t)k;
            if ((k < 0 && errno != EAGAIN && errno != EINTR) || sent == plen) {
                close(in_fd); /* EPIPE: the program does not read its stdin */
                in_fd = -1;
            }
        }
        if (iout >= 0 && (p[iout].revents & (POLLIN | POLLHUP | POLLERR))) {
            char chunk[65536];
            ssize_t k = read(out_fd, chunk, sizeof chunk);
            if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
                close(out_fd);
                out_fd = -1;
            } else if (k > 0 && !overflow) {
                if (len + (size_t)k > TOOL_RESULT_MAX) {
                    overflow = 1; /* read on, keep nothing: the program must not block */
                    free(buf);
                    buf = NULL;
                    len = cap = 0;
                } else {
                    if (cap - len < (size_t)k) {
                        size_t nc = cap ? cap : 65536;
                        while (nc - len < (size_t)k)
                            nc *= 2;
                        char *nb = realloc(buf, nc);
                        if (nb == NULL) {
                            overflow = 1;
                            free(buf);
                            buf = NULL;
                            len = cap = 0;
                            continue;
                        }
                        buf = nb;
                        cap = nc;
                    }
                    memcpy(buf + len, chunk, (size_t)k);
                    len += (size_t)k;
                }
            }
        }
        pid_t w;
        while ((w = waitpid(pid, status, WNOHANG)) < 0 && errno == EINTR)
            ;
        if (w == pid) {
            exited = 1;
            break;
        }
        int64_t now = now_ms(), stop = stop_time(prog);
        if (deadline >= 0 && now >= deadline && !killed) {
            kill(-pid, SIGKILL); /* its group: a shell's children too */
            killed = 1;
        }
        if (stop && !termed) {
            kill(-pid, SIGTERM);
            termed = 1;
        }
        if (stop && now >= stop + TOOL_STOP_GRACE_MS && !killed) {
            kill(-pid, SIGKILL);
            killed = 1;
        }
    }
    if (!exited) { /* poll failed: make sure, then reap */
        kill(-pid, SIGKILL);
        waitpid(pid, status, 0);
    }
    /* What the program wrote before it exited is in the pipe: take it,
     * without waiting for whoever else holds the pipe open. */
    while (out_fd >= 0 && !overflow) {
        char chunk[65536];
        ssize_t k = read(out_fd, chunk, sizeof chunk);
        if (k <= 0)
            break;
        if (len + (size_t)k > TOOL_RESULT_MAX) {
            overflow = 1;
            break;
        }
        char *nb = realloc(buf, len + (size_t)k);
        if (nb == NULL) {
            overflow = 1;
            break;
        }
        buf = nb;
        memcpy(buf + len, chunk, (size_t)k);
        len += (size_t)k;
    }
    if (out_fd >= 0)
        close(out_fd);
    if (in_fd >= 0)
        close(in_fd);
    if (pidfd >= 0)
        close(pidfd);
    if (overflow || killed)
        *status = -1;
    if (overflow)
        fprintf(stderr, "ordo consume: %s wrote more than %zu bytes: nacked\n", prog->argv[0], TOOL_RESULT_MAX);
    else if (killed && deadline >= 0 && now_ms() >= deadline)
        fprintf(stderr, "ordo consume: %s ran past --timeout %" PRId64 " ms: killed, nacked\n", prog->argv[0],
                prog->timeout_ms);
    *out = buf;
    *outlen = len;
}

/* run_once() -- PROGRAM for message m; ORDO_OK with its stdout in *out
 * (malloc'd, may be NULL when empty) when it exited 0,
 * TOOL_PROGRAM_EXIT_TEMPFAIL when it exited so, else -1. */
static int run_once(program_t *prog, const ordo_msg_t *m, char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    char **envp = calloc(nenv + TOOL_ENV_OURS + 1, sizeof *envp);
    char num[3][24];
    snprintf(num[0], sizeof num[0], "%" PRId64, m->id);
    snprintf(num[1], sizeof num[1], "%" PRId64, m->attempt);
    snprintf(num[2], sizeof num[2], "%" PRId64, m->token);
    char *ours[TOOL_ENV_OURS] = {
        env_var("ORDO_QUEUE", prog->queue, strlen(prog->queue)),
        env_var("ORDO_KEY", m->key, m->key_len),
        env_var("ORDO_ID", num[0], strlen(num[0])),
        env_var("ORDO_ATTEMPT", num[1], strlen(num[1])),
        env_var("ORDO_TOKEN", num[2], strlen(num[2])),
        env_var("ORDO_ADDRS", prog->addrs, strlen(prog->addrs)),
    };
    int status = -1, in[2] = { -1, -1 }, out_p[2] = { -1, -1 };
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    if (envp == NULL)
        goto done;
    for (int i = 0; i < TOOL_ENV_OURS; i++)
        if (ours[i] == NULL)
            goto done;
    /* The caller's environment, but for the names the tool sets. */
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++) {
        int mine = 0;
        for (int j = 0; j < TOOL_ENV_OURS && !mine; j++) {
            size_t nl = (size_t)(strchr(ours[j], '=') - ours[j]) + 1;
            mine = strncmp(environ[i], ours[j], nl) == 0;
        }
        if (!mine)
            envp[k++] = environ[i];
    }
    for (int i = 0; i < TOOL_ENV_OURS; i++)
        envp[k++] = ours[i];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out_p, O_CLOEXEC) != 0)
        goto done;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_p[1], 1);
    posix_spawnattr_init(&at);
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setpgroup(&at, 0); /* its own group: a timeout or stop reaches its children */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    int spawned = posix_spawnp(&pid, prog->argv[0], &fa, &at, prog->argv, envp) == 0;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(in[0]);
    close(out_p[1]);
    in[0] = out_p[1] = -1;
    if (!spawned) {
        fprintf(stderr, "ordo consume: cannot run %s\n", prog->argv[0]);
        goto done;
    }
    exchange(prog, pid, in[1], out_p[0], m->payload, m->payload_len, out, outlen, &status);
    in[1] = out_p[0] = -1;
done:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out_p[i] >= 0)
            close(out_p[i]);
    }
    for (int i = 0; i < TOOL_ENV_OURS; i++)
        free(ours[i]);
    free(envp);
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return ORDO_OK;
    free(*out);
    *out = NULL;
    *outlen = 0;
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == TOOL_PROGRAM_EXIT_TEMPFAIL
               ? TOOL_PROGRAM_EXIT_TEMPFAIL
               : -1;
}

/* failed_run() -- a failed run's handler answer: a nack, or with
 * --tempfail-pause and PROGRAM's exit TOOL_PROGRAM_EXIT_TEMPFAIL, a pause
 * of the message's key (then the runner nacks). */
static int failed_run(const program_t *prog, int rc)
{
    return rc == TOOL_PROGRAM_EXIT_TEMPFAIL && prog->tempfail_pause_ms > 0
               ? ORDO_HANDLER_PAUSE(prog->tempfail_pause_ms)
               : 1;
}

static int run_program(void *arg, const ordo_msg_t *m, char **result, size_t *result_len)
{
    int rc = run_once(arg, m, result, result_len);
    if (rc != ORDO_OK)
        return failed_run(arg, rc);
    if (*result == NULL) { /* empty stdout: ack with an empty result */
        *result = malloc(1);
        *result_len = 0;
    }
    return 0;
}

/* next_arg() -- one argument of an exactly-once command line, as redis-cli
 * reads them: bare words, "..." with \\ \" \n \r \t \xHH escapes, or
 * '...' taken literally. Unquotes into dst in place (dst <= *s), sets
 * *len; returns 1, 0 at the end of the line, -1 on bad quoting. */
static int next_arg(char **s, char *end, char **dst, size_t *len)
{
    char *p = *s;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    if (p == end)
        return 0;
    char *o = p, *start = p;
    if (*p == '"' || *p == '\'') {
        char q = *p++;
        for (;;) {
            if (p == end)
                return -1;
            if (*p == q) {
                p++;
                break;
            }
            if (q == '"' && *p == '\\' && p + 1 < end) {
                char e = p[1];
                p += 2;
                if (e == 'n')
                    *o++ = '\n';
                else if (e == 'r')
                    *o++ = '\r';
                else if (e == 't')
                    *o++ = '\t';
                else if (e == 'x' && end - p >= 2 && isxdigit((unsigned char)p[0]) &&
                         isxdigit((unsigned char)p[1])) {
                    char hex[3] = { p[0], p[1], 0 };
                    *o++ = (char)strtol(hex, NULL, 16);
                    p += 2;
                } else
                    *o++ = e;
                continue;
            }
            *o++ = *p++;
        }
        if (p < end && *p != ' ' && *p != '\t' && *p != '\r')
            return -1;
    } else {
        while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
            *o++ = *p++;
    }
    *dst = start;
    *len = (size_t)(o - start);
    *s = p;
    return 1;
}

/* CMD_ARGS_MAX arguments per exactly-once command line at most. */
#define TOOL_TXN_ARGS_MAX 64

/* run_exactly_once() -- the txn_handler of `consume --exactly-once`:
 * PROGRAM's stdout lines are commands for the transaction the runner
 * executes with the ack (a line `RESULT value` is the ack's result
 * instead); docs/exactly-once.md, "From a script". */
static int run_exactly_once(void *arg, ordo_client_t *c, const ordo_msg_t *m, ordo_txn_t *txn, char **result,
                            size_t *result_len)
{
    (void)c;
    program_t *prog = arg;
    char *out;
    size_t n;
    int ran = run_once(prog, m, &out, &n);
    if (ran != ORDO_OK)
        return failed_run(prog, ran);
    int rc = 0;
    char *line = out, *end = out ? out + n : NULL;
    while (line != NULL && line < end && rc == 0) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        char *stop = nl ? nl : end;
        const char *argv[TOOL_TXN_ARGS_MAX];
        size_t lens[TOOL_TXN_ARGS_MAX];
        int argc = 0, r;
        char *p = line, *a;
        size_t al;
        while (argc < TOOL_TXN_ARGS_MAX && (r = next_arg(&p, stop, &a, &al)) == 1) {
            argv[argc] = a;
            lens[argc++] = al;
        }
        if (r < 0 || argc == TOOL_TXN_ARGS_MAX) {
            fprintf(stderr, "ordo consume: %s: a line of its output is not a command: nacked\n", prog->argv[0]);
            rc = 1;
        } else if (argc == 2 && lens[0] == 6 && strncasecmp(argv[0], "RESULT", 6) == 0) {
            free(*result);
            *result = malloc(lens[1] + 1);
            if (*result == NULL)
                rc = 1;
            else {
                memcpy(*result, argv[1], lens[1]);
                *result_len = lens[1];
            }
        } else if (argc > 0 && ordo_txn_add(txn, argc, argv, lens) != ORDO_OK) {
            rc = 1;
        }
        line = nl ? nl + 1 : end;
    }
    free(out);
    return rc;
}

static int cmd_consume(ordo_client_opts_t *co, const tool_opt_t *global, int argc, char **argv)
{
    int64_t concurrency = 0, lease_ms = 0, nack_delay_ms = 0, timeout_ms = 0, tempfail_pause_ms = 0;
    int exactly_once = 0, queue_backoff = 0;
    const tool_opt_t opts[] = {
        { "--concurrency", NULL, TOOL_OPT_INT, &concurrency, "a number of workers", 1,
          ORDO_CONSUMER_CONCURRENCY_MAX },
        { "--lease", NULL, TOOL_OPT_INT, &lease_ms, "a number of milliseconds", 1, TOOL_MS_MAX },
        { "--nack-delay", NULL, TOOL_OPT_INT, &nack_delay_ms, "a number of milliseconds", 1, TOOL_MS_MAX },
        { "--queue-backoff", NULL, TOOL_OPT_FLAG, &queue_backoff, NULL, 0, 0 },
        { "--timeout", NULL, TOOL_OPT_INT, &timeout_ms, "a number of milliseconds", 1, TOOL_MS_MAX },
        { "--tempfail-pause", NULL, TOOL_OPT_INT, &tempfail_pause_ms, "a number of milliseconds", 1,
          ORDO_HANDLER_PAUSE_MS_MAX },
        { "--exactly-once", NULL, TOOL_OPT_FLAG, &exactly_once, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    static const char *const names[] = { "QUEUE" };
    const tool_cmd_t cmd = { "consume", TOOL_SYN_CONSUME, opts, names, 1, 1, 1 };
    const char *queue;
    int n, rest, rc = tool_parse(&cmd, global, argc, argv, &queue, &n, &rest);
    if (rc != 0)
        return parsed(rc);
    if (queue_backoff && nack_delay_ms != 0)
        return tool_usage_error("consume", "--nack-delay %" PRId64 " and --queue-backoff: one or the other",
                                nack_delay_ms);
    program_t prog = { .queue = queue,
                       .addrs = co->addrs ? co->addrs : "",
                       .timeout_ms = timeout_ms,
                       .tempfail_pause_ms = tempfail_pause_ms };
    ordo_consumer_opts_t o = { .conn = *co, .queue = queue, .handler = run_program, .arg = &prog };
    o.conn.reconnect_timeout_ms = ORDO_WAIT_FOREVER;
    o.conn.call_timeout_ms = 0;
    o.concurrency = (int)concurrency;
    o.lease_ms = lease_ms;
    o.nack_delay_ms = queue_backoff ? -1 : nack_delay_ms; /* -1: nack without DELAY, the queue's BACKOFF decides */
    if (exactly_once) {
        o.handler = NULL;
        o.txn_handler = run_exactly_once;
    }
    prog.argv = argv + rest;
    char why[256];
    if (runnable(prog.argv[0], why, sizeof why) != 0) {
        fprintf(stderr, "ordo consume: cannot execute %s: %s\n", prog.argv[0], why);
        return TOOL_EXIT_USAGE;
    }
    pthread_mutex_init(&prog.mu, NULL);

    /* Signals go to this thread only (sigwait); workers inherit the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    ordo_consumer_t *k;
    rc = ordo_consumer_new(&k, &o);
    if (rc != ORDO_OK)
        return tool_fail(NULL, "consume", rc);
    int sig;
    sigwait(&set, &sig);
    /* Running programs get SIGTERM now and SIGKILL after the grace; their
     * messages are nacked; nothing more is pulled. */
    pthread_mutex_lock(&prog.mu);
    prog.stop_at_ms = now_ms();
    pthread_mutex_unlock(&prog.mu);
    ordo_consumer_stop(k);
    ordo_consumer_wait(k);
    ordo_consumer_stats_t stats;
    ordo_consumer_stats(k, &stats);
    ordo_consumer_free(k);
    pthread_mutex_destroy(&prog.mu);
    fprintf(stderr, "ordo consume: stopped (%" PRIu64 " acked, %" PRIu64 " nacked)\n", stats.acked, stats.nacked);
    return 0;
}

/* build_addrs() -- the client's address list from -h (a host, host:port,
 * or a comma-separated list of them; a v6 host in brackets), giving the
 * entries without a port `port`. Returns a malloc'd string, or NULL if an
 * entry is empty or too long. */
static char *build_addrs(const char *hosts, int port)
{
    size_t cap = strlen(hosts) * 2 + 64, at = 0;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    const char *s = hosts;
    for (;;) {
        size_t n = strcspn(s, ",");
        if (n == 0 || n >= TOOL_HOST_MAX) {
            free(out);
            return NULL;
        }
        const char *rb = memchr(s, ']', n);
        const char *colon = NULL;
        for (size_t i = n; i > 0; i--)
            if (s[i - 1] == ':') {
                colon = s + i - 1;
                break;
            }
        /* "h:p" and "[v6]:p" carry a port; "h", "[v6]" and a bare v6 do not. */
        int has_port = colon != NULL && (rb ? colon == rb + 1 : memchr(s, ':', n) == colon);
        int bare_v6 = colon != NULL && rb == NULL && !has_port;
        at += (size_t)snprintf(out + at, cap - at, "%s%s%.*s%s", at ? "," : "", bare_v6 ? "[" : "", (int)n, s,
                               bare_v6 ? "]" : "");
        if (!has_port)
            at += (size_t)snprintf(out + at, cap - at, ":%d", port);
        if (s[n] == '\0')
            break;
        s += n + 1;
    }
    return out;
}

/* A command of the tool: what it needs is a client (one-shot commands,
 * which give up after --timeout) or the client's options (watch and
 * consume, which make their own and retry for ever). */
typedef struct tool_command {
    const char *name;
    int (*run)(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv);
    int (*run_opts)(ordo_client_opts_t *co, const tool_opt_t *global, int argc, char **argv);
} tool_command_t;

static const tool_command_t commands[] = {
    { "watch", NULL, cmd_watch },
    { "call", cmd_call, NULL },
    { "push", cmd_push, NULL },
    { "pause", cmd_pause, NULL },
    { "resume", cmd_resume, NULL },
    { "redrive", cmd_redrive, NULL },
    { "cancel", cmd_cancel, NULL },
    { "schedule", cmd_schedule, NULL },
    { "consume", NULL, cmd_consume },
    { "top", tool_top, NULL },
    { "status", tool_status, NULL },
};
#define TOOL_COMMANDS (sizeof commands / sizeof commands[0])

/* run_command() -- the command at argv[0] with the client's options co. */
static int run_command(ordo_client_opts_t *co, const tool_opt_t *global, int argc, char **argv)
{
    const char *name = argv[0];
    if (strcmp(name, "help") == 0) {
        if (argc > 1)
            return tool_usage_error("help", "unexpected argument '%.100s'", argv[1]);
        return help();
    }
    const tool_command_t *cmd = NULL;
    for (size_t k = 0; k < TOOL_COMMANDS && cmd == NULL; k++)
        if (strcmp(commands[k].name, name) == 0)
            cmd = &commands[k];
    if (cmd == NULL) {
        char names[128] = "";
        for (size_t k = 0, at = 0; k < TOOL_COMMANDS && at < sizeof names; k++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", k ? ", " : "", commands[k].name);
        return tool_usage_error("", "unknown command '%.100s' (commands: %s)", name, names);
    }
    if (cmd->run_opts)
        return cmd->run_opts(co, global, argc - 1, argv + 1);
    ordo_client_t *c;
    if (ordo_client_new(&c, co) != ORDO_OK)
        return tool_fail(NULL, name, ORDO_ENOMEM);
    int rc = cmd->run(c, global, argc - 1, argv + 1);
    ordo_client_free(c);
    return parsed(rc);
}

int main(int argc, char **argv)
{
    ordo_client_opts_t co = { 0 };
    const char *hosts = NULL;
    int64_t port = 0, timeout_ms = TOOL_TIMEOUT_MS_DEFAULT;
    /* The options before the command; a row here is an option of every
     * command. */
    const tool_opt_t global[] = {
        { "-h", NULL, TOOL_OPT_STR, &hosts, NULL, 0, 0 },
        { "-p", NULL, TOOL_OPT_INT, &port, "a port", 1, 65535 },
        { "-a", NULL, TOOL_OPT_STR, &co.password, NULL, 0, 0 },
        { "--user", NULL, TOOL_OPT_STR, &co.user, NULL, 0, 0 },
        { "--timeout", NULL, TOOL_OPT_INT, &timeout_ms, "a number of milliseconds", 1, TOOL_MS_MAX },
        { "--tls", NULL, TOOL_OPT_FLAG, &co.tls, NULL, 0, 0 },
        { "--cacert", NULL, TOOL_OPT_STR, &co.tls_ca_file, NULL, 0, 0 },
        { "--cert", NULL, TOOL_OPT_STR, &co.tls_cert_file, NULL, 0, 0 },
        { "--key", NULL, TOOL_OPT_STR, &co.tls_key_file, NULL, 0, 0 },
        { "--sni", NULL, TOOL_OPT_STR, &co.tls_server_name, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    int i = 1;
    int rc = tool_parse_global(global, argc, argv, &i);
    if (rc != 0)
        return parsed(rc);
    if (i >= argc) {
        fputs(usage_text, stderr);
        return TOOL_EXIT_USAGE;
    }
    if (!co.tls && (co.tls_ca_file || co.tls_cert_file || co.tls_key_file || co.tls_server_name))
        return tool_usage_error("", "--cacert, --cert, --key and --sni go with --tls");
    const char *env_user = getenv("ORDO_USER");
    if (co.user == NULL && env_user != NULL && *env_user != '\0')
        co.user = env_user;
    /* -h/-p name the server; without them, ORDO_ADDRS; then the default. */
    const char *env = getenv("ORDO_ADDRS"), *from = "-h";
    if (hosts == NULL && port == 0 && env != NULL && *env != '\0') {
        hosts = env;
        from = "ORDO_ADDRS";
    }
    char *addrs = build_addrs(hosts ? hosts : "127.0.0.1", port ? (int)port : ORDO_CLIENT_PORT_DEFAULT);
    ordo_client_t *probe = NULL;
    co.addrs = addrs;
    if (addrs == NULL || ordo_client_new(&probe, &co) != ORDO_OK) {
        free(addrs);
        return tool_usage_error("", "%s '%.200s%s': not a list of host:port addresses", from, hosts ? hosts : "",
                                hosts && strlen(hosts) > 200 ? "..." : "");
    }
    ordo_client_free(probe);
    co.call_timeout_ms = (int)timeout_ms;
    co.reconnect_timeout_ms = (int)timeout_ms;
    signal(SIGPIPE, SIG_IGN);
    rc = run_command(&co, global, argc - i, argv + i);
    free(addrs);
    return rc;
}
