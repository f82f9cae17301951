/*
 * ordo.c -- the `ordo` command-line tool (docs/client.md, "The `ordo` tool"), built on
 * the client library only (ordo/client.h).
 *
 *   ordo [-h host] [-p port] [-a password] COMMAND ...
 *     watch KEY | --prefix P [--from REV]   one line per event, resumes by itself
 *     call QUEUE KEY PAYLOAD [--id ID] [--timeout MS]
 *     push QUEUE KEY PAYLOAD [--id ID]
 *     consume QUEUE [--concurrency N] [--lease MS] -- PROGRAM [ARGS...]
 *     top QUEUE [--count N] [--interval MS] [--iterations N]
 *     status
 *
 * Exit status: 0 on success; 1 on an error reply, a timeout or a lost
 * server (the error on stderr); 2 on a usage error.
 *
 * consume: each message runs PROGRAM once with the payload on its stdin
 * and ORDO_KEY, ORDO_ID, ORDO_ATTEMPT, ORDO_TOKEN in its environment; exit
 * status 0 acks with its stdout as the result, anything else (a signal
 * included) nacks. Leases are kept while PROGRAM runs (the consumer
 * runner's keeper). SIGINT/SIGTERM stop it gracefully: running programs
 * finish and are acked or nacked, nothing more is pulled.
 */
#include "ordo/client.h"

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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* A program's stdout larger than this is not a result anyone wants in a
 * queue's result store: the message is nacked instead. */
#define TOOL_RESULT_MAX ((size_t)64 * 1024 * 1024)
#define TOOL_ENV_EXTRA 4

static const char *usage_text =
    "usage: ordo [-h host] [-p port] [-a password] COMMAND ...\n"
    "  watch KEY | --prefix P [--from REV]\n"
    "  call QUEUE KEY PAYLOAD [--id ID] [--timeout MS]\n"
    "  push QUEUE KEY PAYLOAD [--id ID]\n"
    "  consume QUEUE [--concurrency N] [--lease MS] -- PROGRAM [ARGS...]\n"
    "  top QUEUE [--count N] [--interval MS] [--iterations N]\n"
    "  status\n";

static int usage(void)
{
    fputs(usage_text, stderr);
    return 2;
}

static int fail(ordo_client_t *c, const char *what, int rc)
{
    const char *detail = c ? ordo_client_errstr(c) : "";
    fprintf(stderr, "ordo %s: %s%s%s\n", what, ordo_strerror(rc), *detail ? ": " : "", detail);
    return 1;
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

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

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

static int cmd_watch(ordo_client_opts_t *co, int argc, char **argv)
{
    ordo_watch_opts_t o = { .conn = *co, .fn = on_event };
    o.conn.reconnect_timeout_ms = ORDO_WAIT_FOREVER;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--prefix") == 0 && i + 1 < argc) {
            o.prefix = 1;
            o.key = argv[++i];
        } else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
            if (parse_i64(argv[++i], &o.from_rev) != 0 || o.from_rev < 0)
                return usage();
            o.from_set = 1;
        } else if (o.key == NULL) {
            o.key = argv[i];
        } else {
            return usage();
        }
    }
    if (o.key == NULL)
        return usage();
    o.key_len = strlen(o.key);
    int rc = ordo_watch_run(&o, NULL);
    return rc == ORDO_OK ? 0 : fail(NULL, "watch", rc);
}

/* ---- call, push ------------------------------------------------------------ */

static int cmd_call(ordo_client_t *c, int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *id = NULL;
    int64_t timeout_ms = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--id") == 0 && i + 1 < argc)
            id = argv[++i];
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            if (parse_i64(argv[++i], &timeout_ms) != 0 || timeout_ms < 0)
                return usage();
        } else
            return usage();
    }
    char *res;
    size_t n;
    int rc = ordo_q_call(c, argv[0], argv[1], strlen(argv[1]), argv[2], strlen(argv[2]), timeout_ms, id,
                         &res, &n);
    if (rc != ORDO_OK)
        return fail(c, "call", rc);
    if (res)
        fwrite(res, 1, n, stdout);
    if (n == 0 || res[n - 1] != '\n')
        fputc('\n', stdout);
    free(res);
    return 0;
}

static int cmd_push(ordo_client_t *c, int argc, char **argv)
{
    if (argc < 3)
        return usage();
    ordo_push_opts_t po = { 0 };
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--id") == 0 && i + 1 < argc) {
            po.id = argv[++i];
            po.id_len = strlen(po.id);
        } else
            return usage();
    }
    int64_t id;
    int rc = ordo_q_push(c, argv[0], argv[1], strlen(argv[1]), argv[2], strlen(argv[2]), &po, &id);
    if (rc != ORDO_OK)
        return fail(c, "push", rc);
    printf("%" PRId64 "\n", id);
    return 0;
}

/* ---- consume -------------------------------------------------------------- */

typedef struct program {
    char **argv;
} program_t;

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

/* exchange() -- feed the payload to the child's stdin while collecting
 * its stdout (both at once, so neither side can block the other).
 * 0, or -1 when stdout exceeds TOOL_RESULT_MAX or memory runs out. */
static int exchange(int in_fd, int out_fd, const char *payload, size_t plen, char **out, size_t *outlen)
{
    size_t sent = 0, cap = 0, len = 0;
    char *buf = NULL;
    int ok = 0;
    fcntl(in_fd, F_SETFL, O_NONBLOCK);
    if (plen == 0) {
        close(in_fd);
        in_fd = -1;
    }
    for (;;) {
        struct pollfd p[2] = { { .fd = out_fd, .events = POLLIN }, { .fd = in_fd, .events = POLLOUT } };
        int np = in_fd >= 0 ? 2 : 1;
        if (poll(p, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            ok = -1;
            break;
        }
        if (np == 2 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t k = write(in_fd, payload + sent, plen - sent);
            if (k > 0)
                sent += (size_t)k;
            if ((k < 0 && errno != EAGAIN && errno != EINTR) || sent == plen) {
                close(in_fd); /* EPIPE: the program does not read its stdin */
                in_fd = -1;
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (cap - len < 65536) {
                cap = cap ? cap * 2 : 65536;
                char *nb = realloc(buf, cap);
                if (nb == NULL) {
                    ok = -1;
                    break;
                }
                buf = nb;
            }
            ssize_t k = read(out_fd, buf + len, cap - len);
            if (k == 0)
                break;
            if (k < 0) {
                if (errno == EINTR || errno == EAGAIN)
                    continue;
                ok = -1;
                break;
            }
            len += (size_t)k;
            if (len > TOOL_RESULT_MAX) {
                ok = -1;
                break;
            }
        }
    }
    if (in_fd >= 0)
        close(in_fd);
    *out = buf;
    *outlen = len;
    return ok;
}

static int run_program(void *arg, const ordo_msg_t *m, char **result, size_t *result_len)
{
    const program_t *prog = arg;
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    char **envp = calloc(nenv + TOOL_ENV_EXTRA + 1, sizeof *envp);
    char num[3][24];
    snprintf(num[0], sizeof num[0], "%" PRId64, m->id);
    snprintf(num[1], sizeof num[1], "%" PRId64, m->attempt);
    snprintf(num[2], sizeof num[2], "%" PRId64, m->token);
    char *extra[TOOL_ENV_EXTRA] = {
        env_var("ORDO_KEY", m->key, m->key_len), env_var("ORDO_ID", num[0], strlen(num[0])),
        env_var("ORDO_ATTEMPT", num[1], strlen(num[1])), env_var("ORDO_TOKEN", num[2], strlen(num[2])),
    };
    int status = -1, in[2] = { -1, -1 }, out[2] = { -1, -1 };
    int spawned = 0;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    if (envp == NULL)
        goto done;
    for (int i = 0; i < TOOL_ENV_EXTRA; i++)
        if (extra[i] == NULL)
            goto done;
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], "ORDO_", 5) != 0)
            envp[k++] = environ[i];
    for (int i = 0; i < TOOL_ENV_EXTRA; i++)
        envp[k++] = extra[i];
    if (pipe2(in, O_CLOEXEC) != 0)
        goto done;
    if (pipe2(out, O_CLOEXEC) != 0)
        goto done;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawnattr_init(&at);
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    spawned = posix_spawnp(&pid, prog->argv[0], &fa, &at, prog->argv, envp) == 0;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(in[0]);
    close(out[1]);
    in[0] = out[1] = -1;
    if (!spawned) {
        fprintf(stderr, "ordo consume: cannot run %s\n", prog->argv[0]);
        goto done;
    }
    int ex = exchange(in[1], out[0], m->payload, m->payload_len, result, result_len);
    in[1] = -1;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (ex != 0)
        status = -1;
done:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
    }
    for (int i = 0; i < TOOL_ENV_EXTRA; i++)
        free(extra[i]);
    free(envp);
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (*result == NULL) { /* empty stdout: ack with an empty result */
            *result = malloc(1);
            *result_len = 0;
        }
        return 0;
    }
    free(*result);
    *result = NULL;
    return 1;
}

static int cmd_consume(ordo_client_opts_t *co, int argc, char **argv)
{
    if (argc < 1)
        return usage();
    ordo_consumer_opts_t o = { .conn = *co, .queue = argv[0], .handler = run_program };
    o.conn.reconnect_timeout_ms = ORDO_WAIT_FOREVER;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        int64_t v;
        if (i + 1 >= argc || parse_i64(argv[i + 1], &v) != 0 || v <= 0)
            return usage();
        if (strcmp(argv[i], "--concurrency") == 0 && v <= ORDO_CONSUMER_CONCURRENCY_MAX)
            o.concurrency = (int)v;
        else if (strcmp(argv[i], "--lease") == 0)
            o.lease_ms = v;
        else if (strcmp(argv[i], "--nack-delay") == 0)
            o.nack_delay_ms = v;
        else
            return usage();
        i++;
    }
    if (i + 1 >= argc)
        return usage();
    program_t prog = { .argv = argv + i + 1 };
    o.arg = &prog;

    /* Signals go to this thread only (sigwait); workers inherit the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    ordo_consumer_t *k;
    int rc = ordo_consumer_new(&k, &o);
    if (rc != ORDO_OK)
        return fail(NULL, "consume", rc);
    int sig;
    sigwait(&set, &sig);
    ordo_consumer_stop(k);
    ordo_consumer_wait(k);
    ordo_consumer_stats_t stats;
    ordo_consumer_stats(k, &stats);
    ordo_consumer_free(k);
    fprintf(stderr, "ordo consume: stopped (%" PRIu64 " acked, %" PRIu64 " nacked)\n", stats.acked, stats.nacked);
    return 0;
}

/* ---- top, status ---------------------------------------------------------- */

static void print_reply(const ordo_reply_t *r, int indent)
{
    switch (r->type) {
    case ORDO_REPLY_INTEGER: printf("%" PRId64, r->integer); break;
    case ORDO_REPLY_NIL: printf("(nil)"); break;
    case ORDO_REPLY_ARRAY:
    case ORDO_REPLY_MAP:
    case ORDO_REPLY_PUSH:
        for (size_t i = 0; i < r->n; i++) {
            printf("%s%*s", i ? "\n" : "", indent, "");
            print_reply(r->elem[i], indent + 2);
            if (r->type == ORDO_REPLY_MAP && i + 1 < r->n) {
                printf(": ");
                print_reply(r->elem[++i], indent + 2);
            }
        }
        break;
    default:
        if (r->str)
            fwrite(r->str, 1, r->len, stdout);
    }
}

static int show(ordo_client_t *c, const char *what, const char *title, ...)
{
    const char *argv[8];
    int argc = 0;
    va_list ap;
    va_start(ap, title);
    const char *a;
    while (argc < 8 && (a = va_arg(ap, const char *)) != NULL)
        argv[argc++] = a;
    va_end(ap);
    ordo_reply_t *r;
    int rc = ordo_client_command(c, 0, argc, argv, NULL, &r);
    if (rc == ORDO_OK)
        rc = ordo_client_reply_error(c, r);
    if (rc != ORDO_OK) {
        ordo_reply_free(r);
        return fail(c, what, rc);
    }
    if (title)
        printf("# %s\n", title);
    print_reply(r, 0);
    printf("\n");
    ordo_reply_free(r);
    return 0;
}

static int cmd_top(ordo_client_t *c, int argc, char **argv)
{
    if (argc < 1)
        return usage();
    int64_t count = 10, interval = 1000, iterations = -1;
    for (int i = 1; i < argc; i += 2) {
        int64_t v;
        if (i + 1 >= argc || parse_i64(argv[i + 1], &v) != 0 || v <= 0)
            return usage();
        if (strcmp(argv[i], "--count") == 0)
            count = v;
        else if (strcmp(argv[i], "--interval") == 0)
            interval = v;
        else if (strcmp(argv[i], "--iterations") == 0)
            iterations = v;
        else
            return usage();
    }
    char cnt[24];
    snprintf(cnt, sizeof cnt, "%" PRId64, count);
    for (int64_t it = 0; iterations < 0 || it < iterations; it++) {
        if (it)
            nanosleep(&(struct timespec){ interval / 1000, (interval % 1000) * 1000000L }, NULL);
        if (show(c, "top", "waiting in-flight delayed", "Q.LEN", argv[0], NULL) ||
            show(c, "top", "top keys", "Q.TOPKEYS", argv[0], "COUNT", cnt, NULL))
            return 1;
        fflush(stdout);
    }
    return 0;
}

static int cmd_status(ordo_client_t *c)
{
    int64_t cur, oldest;
    int rc = ordo_kv_rev(c, &cur, &oldest);
    if (rc != ORDO_OK)
        return fail(c, "status", rc);
    printf("# ordo at %s:%d\nrevision:%" PRId64 "\noldest_revision:%" PRId64 "\n", ordo_client_host(c),
           ordo_client_port(c), cur, oldest);
    if (show(c, "status", NULL, "INFO", NULL))
        return 1;
    /* cluster_enabled:0 on a single server; in cluster mode the member's
     * role, term, leader and indexes (the tool follows -NOTLEADER, so this
     * is the leader's view). */
    return show(c, "status", NULL, "CLUSTER", "INFO", NULL);
}

int main(int argc, char **argv)
{
    ordo_client_opts_t co = { 0 };
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (i + 1 >= argc)
            return usage();
        if (strcmp(argv[i], "-h") == 0)
            co.host = argv[++i];
        else if (strcmp(argv[i], "-p") == 0)
            co.port = atoi(argv[++i]);
        else if (strcmp(argv[i], "-a") == 0)
            co.password = argv[++i];
        else
            return usage();
    }
    if (i >= argc)
        return usage();
    signal(SIGPIPE, SIG_IGN);
    const char *cmd = argv[i++];
    int rest = argc - i;
    char **args = argv + i;
    if (strcmp(cmd, "watch") == 0)
        return cmd_watch(&co, rest, args);
    if (strcmp(cmd, "consume") == 0)
        return cmd_consume(&co, rest, args);
    ordo_client_t *c;
    if (ordo_client_new(&c, &co) != ORDO_OK)
        return fail(NULL, cmd, ORDO_ENOMEM);
    int rc;
    if (strcmp(cmd, "call") == 0)
        rc = cmd_call(c, rest, args);
    else if (strcmp(cmd, "push") == 0)
        rc = cmd_push(c, rest, args);
    else if (strcmp(cmd, "top") == 0)
        rc = cmd_top(c, rest, args);
    else if (strcmp(cmd, "status") == 0)
        rc = cmd_status(c);
    else
        rc = usage();
    ordo_client_free(c);
    return rc;
}
