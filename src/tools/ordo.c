/*
 * ordo.c -- the `ordo` command-line tool (docs/client.md, "The `ordo` tool"), built on
 * the client library only (ordo/client.h).
 *
 *   ordo [-h host[:port][,host:port...]] [-p port] [-a password] [--timeout MS] COMMAND ...
 *     watch KEY | --prefix P [--from REV]   one line per event, resumes by itself
 *     call QUEUE KEY PAYLOAD [--id ID] [--timeout MS]
 *     push QUEUE KEY PAYLOAD [--id ID]
 *     pause QUEUE [--key KEY] [--for MS]     prints 1, or 0 if paused so already
 *     resume QUEUE [--key KEY]               prints 1, or 0 if it was not paused
 *     redrive QUEUE [--from DLQ] [--key KEY|--id ID]   prints how many moved (all: call by call, until none)
 *     cancel QUEUE ID                        prints 1, or 0 if no message waits with that id
 *     schedule add NAME QUEUE KEY PAYLOAD --every MS [--start MS] | --cron EXPR [--skip-missed]
 *     schedule del NAME                      prints 1, or 0 if there was none
 *     schedule list                          one line per schedule: name queue next pushed skipped when
 *     consume QUEUE [--concurrency N] [--lease MS] [--nack-delay MS|--queue-backoff] [--timeout MS]
 *             [--tempfail-pause MS] [--exactly-once] -- PROGRAM [ARGS...]
 *     top QUEUE [--count N] [--interval MS] [--iterations N]
 *     status
 *
 * Addresses: -h takes one host or a list (host:port, [v6]:port; an entry
 * without a port gets -p's); without -h and -p, ORDO_ADDRS; every client
 * learns the rest of a cluster from CLUSTER MEMBERS and follows the leader.
 * A port outside 1..65535 or an address that does not parse is a usage
 * error. One-shot commands (call, push, top, status) give up after
 * --timeout (default TOOL_TIMEOUT_MS_DEFAULT), naming the addresses tried.
 *
 * Exit status: 0 on success; 1 on an error reply, a timeout or a lost
 * server (the error on stderr); 2 on a usage error (and consume's PROGRAM
 * that cannot be executed). `watch` retries a lost server for ever but
 * stops at once on what retrying cannot cure (a revision in the future, a
 * wrong password), saying why.
 *
 * consume: each message runs PROGRAM once, in its own process group, with
 * the payload on its stdin and the caller's environment plus ORDO_QUEUE,
 * ORDO_KEY, ORDO_ID, ORDO_ATTEMPT, ORDO_TOKEN and ORDO_ADDRS; exit status
 * 0 acks with its stdout as the result, anything else (a signal included)
 * nacks (after --nack-delay, or with --queue-backoff without a delay, so
 * the queue's BACKOFF decides); with --tempfail-pause MS, exit 75
 * (EX_TEMPFAIL) first pauses the message's key for MS (ORDO_HANDLER_PAUSE). Output past TOOL_RESULT_MAX is read and discarded, and the
 * message nacked; --timeout kills the group and nacks; once PROGRAM has
 * exited its stdout is read no further (a background child keeping it
 * open is not waited for). Leases are kept while PROGRAM runs (the
 * consumer runner's keeper). SIGINT/SIGTERM stop it: nothing more is
 * pulled, running programs get SIGTERM, then SIGKILL after
 * TOOL_STOP_GRACE_MS, and their messages are nacked. --exactly-once: each
 * line of PROGRAM's stdout is a command run in one transaction with the
 * ack (docs/exactly-once.md, "From a script").
 */
#include "ordo/client.h"

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

static const char *usage_text =
    "usage: ordo [-h host[:port][,host:port...]] [-p port] [-a password] [--timeout MS] COMMAND ...\n"
    "  (without -h/-p: ORDO_ADDRS, a list like -h's; --timeout: one-shot commands, default 5000)\n"
    "  watch KEY | --prefix P [--from REV]\n"
    "  call QUEUE KEY PAYLOAD [--id ID] [--timeout MS]\n"
    "  push QUEUE KEY PAYLOAD [--id ID]\n"
    "  pause QUEUE [--key KEY] [--for MS]\n"
    "  resume QUEUE [--key KEY]\n"
    "  redrive QUEUE [--from DLQ] [--key KEY|--id ID]\n"
    "  cancel QUEUE ID\n"
    "  schedule add NAME QUEUE KEY PAYLOAD --every MS [--start MS] | --cron EXPR [--skip-missed]\n"
    "  schedule del NAME | schedule list\n"
    "  consume QUEUE [--concurrency N] [--lease MS] [--nack-delay MS|--queue-backoff] [--timeout MS]\n"
    "          [--tempfail-pause MS] [--exactly-once]\n"
    "          -- PROGRAM [ARGS...]\n"
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

static int cmd_watch(ordo_client_opts_t *co, int argc, char **argv)
{
    char last_error[256] = "";
    ordo_watch_opts_t o = { .conn = *co, .fn = on_event, .on_error = on_watch_error, .arg = last_error };
    o.conn.reconnect_timeout_ms = ORDO_WAIT_FOREVER;
    o.conn.call_timeout_ms = 0;
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
    return rc == ORDO_OK ? 0 : 1; /* on_watch_error said why */
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

/* pause / resume QUEUE [--key KEY] [--for MS] (pause only): 1 or 0. */
static int cmd_pause(ordo_client_t *c, int argc, char **argv, bool pause)
{
    if (argc < 1)
        return usage();
    const char *key = NULL;
    int64_t for_ms = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            key = argv[++i];
        else if (pause && strcmp(argv[i], "--for") == 0 && i + 1 < argc) {
            if (parse_i64(argv[++i], &for_ms) != 0 || for_ms < 1)
                return usage();
        } else
            return usage();
    }
    int changed = 0;
    int rc = pause ? ordo_q_pause(c, argv[0], key, key ? strlen(key) : 0, for_ms, &changed)
                   : ordo_q_resume(c, argv[0], key, key ? strlen(key) : 0, &changed);
    if (rc != ORDO_OK)
        return fail(c, pause ? "pause" : "resume", rc);
    printf("%d\n", changed);
    return 0;
}

/* redrive QUEUE [--from DLQ] [--key KEY|--id ID]: how many moved; without
 * --key or --id, call after call until one moves nothing. */
static int cmd_redrive(ordo_client_t *c, int argc, char **argv)
{
    if (argc < 1)
        return usage();
    const char *from = NULL, *key = NULL;
    int64_t id = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
            from = argv[++i];
        else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc && id == 0)
            key = argv[++i];
        else if (strcmp(argv[i], "--id") == 0 && i + 1 < argc && key == NULL) {
            if (parse_i64(argv[++i], &id) != 0 || id < 1)
                return usage();
        } else
            return usage();
    }
    int64_t total = 0, moved;
    do {
        int rc = ordo_q_redrive(c, argv[0], from, key, key ? strlen(key) : 0, id, &moved);
        if (rc != ORDO_OK)
            return fail(c, "redrive", rc);
        total += moved;
    } while (moved > 0 && key == NULL && id == 0);
    printf("%" PRId64 "\n", total);
    return 0;
}

static int cmd_cancel(ordo_client_t *c, int argc, char **argv)
{
    int64_t id;
    if (argc != 2 || parse_i64(argv[1], &id) != 0 || id < 1)
        return usage();
    int rc = ordo_q_cancel(c, argv[0], id);
    if (rc != ORDO_OK && rc != ORDO_ENOTFOUND)
        return fail(c, "cancel", rc);
    printf("%d\n", rc == ORDO_OK);
    return 0;
}

/* One field of a Q.SCHEDULE LIST map (RESP2: a flat array), or NULL. */
static const ordo_reply_t *map_get(const ordo_reply_t *m, const char *name)
{
    for (size_t i = 0; m->elem != NULL && i + 1 < m->n; i += 2)
        if (m->elem[i]->str != NULL && strcmp(m->elem[i]->str, name) == 0)
            return m->elem[i + 1];
    return NULL;
}

static int schedule_list(ordo_client_t *c)
{
    ordo_reply_t *r;
    int rc = ordo_client_command_strs(c, 0, &r, "Q.SCHEDULE", "LIST", NULL);
    if (rc != ORDO_OK)
        return fail(c, "schedule list", rc);
    for (size_t i = 0; r->elem != NULL && i < r->n; i++) {
        const ordo_reply_t *m = r->elem[i], *name = map_get(m, "name"), *queue = map_get(m, "queue"),
                           *cron = map_get(m, "cron"), *every = map_get(m, "every"), *next = map_get(m, "next"),
                           *pushed = map_get(m, "pushed"), *skipped = map_get(m, "skipped");
        if (name == NULL || queue == NULL || next == NULL || pushed == NULL || skipped == NULL || every == NULL)
            continue;
        printf("%s %s next=%" PRId64 " pushed=%" PRId64 " skipped=%" PRId64 " ", name->str, queue->str,
               next->integer, pushed->integer, skipped->integer);
        if (cron != NULL && cron->str != NULL)
            printf("cron=\"%s\"\n", cron->str);
        else
            printf("every=%" PRId64 "\n", every->integer);
    }
    ordo_reply_free(r);
    return 0;
}

/* schedule add|del|list (see the head). */
static int cmd_schedule(ordo_client_t *c, int argc, char **argv)
{
    if (argc == 1 && strcmp(argv[0], "list") == 0)
        return schedule_list(c);
    if (argc == 2 && strcmp(argv[0], "del") == 0) {
        int rc = ordo_q_schedule_del(c, argv[1]);
        if (rc != ORDO_OK && rc != ORDO_ENOTFOUND)
            return fail(c, "schedule del", rc);
        printf("%d\n", rc == ORDO_OK);
        return 0;
    }
    if (argc < 5 || strcmp(argv[0], "add") != 0)
        return usage();
    ordo_schedule_opts_t o = { 0 };
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "--every") == 0 && i + 1 < argc) {
            if (parse_i64(argv[++i], &o.every_ms) != 0 || o.every_ms < 1)
                return usage();
        } else if (strcmp(argv[i], "--start") == 0 && i + 1 < argc) {
            if (parse_i64(argv[++i], &o.start_ms) != 0 || o.start_ms < 1)
                return usage();
        } else if (strcmp(argv[i], "--cron") == 0 && i + 1 < argc) {
            o.cron = argv[++i];
        } else if (strcmp(argv[i], "--skip-missed") == 0) {
            o.skip_missed = true;
        } else {
            return usage();
        }
    }
    if ((o.cron == NULL) == (o.every_ms == 0))
        return usage();
    int rc = ordo_q_schedule_add(c, argv[1], argv[2], argv[3], strlen(argv[3]), argv[4], strlen(argv[4]), &o);
    if (rc != ORDO_OK)
        return fail(c, "schedule add", rc);
    puts("OK");
    return 0;
}

/* ---- consume -------------------------------------------------------------- */

/* How a running PROGRAM is watched: its exit (a pidfd where the kernel has
 * them, else a poll of this slice), its stdout, its stdin, its deadline
 * and the tool's stop. */
#define TOOL_POLL_SLICE_MS 10
/* After SIGTERM, a running PROGRAM gets this long to finish (its process
 * group is sent SIGTERM) before SIGKILL; its message is then nacked. */
#define TOOL_STOP_GRACE_MS 2000
/* sysexits.h's EX_TEMPFAIL ("try again later"): with --tempfail-pause MS,
 * a PROGRAM exiting so pauses its message's key for MS (a tenant's
 * downstream answered 429 or 503) instead of only nacking. */
#define TOOL_EXIT_TEMPFAIL 75
/* The variables the tool sets for PROGRAM (the caller's others are kept). */
#define TOOL_ENV_OURS 6

typedef struct program {
    char **argv;
    const char *queue;
    const char *addrs;       /* ORDO_ADDRS for PROGRAM */
    int64_t timeout_ms;      /* per message; 0: none */
    int64_t tempfail_pause_ms; /* --tempfail-pause: exit TOOL_EXIT_TEMPFAIL pauses the key this long; 0: nack */
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
 * (malloc'd, may be NULL when empty) when it exited 0, TOOL_EXIT_TEMPFAIL
 * when it exited so, else -1. */
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
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == TOOL_EXIT_TEMPFAIL ? TOOL_EXIT_TEMPFAIL
                                                                                          : -1;
}

/* A failed run's handler answer: a nack, or with --tempfail-pause and
 * PROGRAM's exit TOOL_EXIT_TEMPFAIL, a pause of the message's key. */
static int failed_run(const program_t *prog, int rc)
{
    return rc == TOOL_EXIT_TEMPFAIL && prog->tempfail_pause_ms > 0 ? ORDO_HANDLER_PAUSE(prog->tempfail_pause_ms) : 1;
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

static int cmd_consume(ordo_client_opts_t *co, int argc, char **argv)
{
    if (argc < 1)
        return usage();
    program_t prog = { .queue = argv[0], .addrs = co->addrs ? co->addrs : "" };
    pthread_mutex_init(&prog.mu, NULL);
    ordo_consumer_opts_t o = { .conn = *co, .queue = argv[0], .handler = run_program, .arg = &prog };
    o.conn.reconnect_timeout_ms = ORDO_WAIT_FOREVER;
    o.conn.call_timeout_ms = 0;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--exactly-once") == 0) {
            o.handler = NULL;
            o.txn_handler = run_exactly_once;
            continue;
        }
        if (strcmp(argv[i], "--queue-backoff") == 0) {
            o.nack_delay_ms = -1; /* nack without DELAY: the queue's BACKOFF decides */
            continue;
        }
        int64_t v;
        if (i + 1 >= argc || parse_i64(argv[i + 1], &v) != 0 || v <= 0)
            return usage();
        if (strcmp(argv[i], "--concurrency") == 0 && v <= ORDO_CONSUMER_CONCURRENCY_MAX)
            o.concurrency = (int)v;
        else if (strcmp(argv[i], "--lease") == 0)
            o.lease_ms = v;
        else if (strcmp(argv[i], "--nack-delay") == 0)
            o.nack_delay_ms = v;
        else if (strcmp(argv[i], "--timeout") == 0)
            prog.timeout_ms = v;
        else if (strcmp(argv[i], "--tempfail-pause") == 0 && v <= ORDO_HANDLER_PAUSE_MS_MAX)
            prog.tempfail_pause_ms = v;
        else
            return usage();
        i++;
    }
    if (i + 1 >= argc)
        return usage();
    prog.argv = argv + i + 1;
    char why[256];
    if (runnable(prog.argv[0], why, sizeof why) != 0) {
        fprintf(stderr, "ordo consume: cannot execute %s: %s\n", prog.argv[0], why);
        return 2;
    }

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

/* show_members() -- in cluster mode, one line per member: its liveness,
 * time since it was last heard from and, on the leader, the entries it
 * lacks (CLUSTER MEMBERS). Nothing on a single server. */
static int show_members(ordo_client_t *c)
{
    const char *argv[] = {"CLUSTER", "MEMBERS"};
    ordo_reply_t *r;
    int rc = ordo_client_command(c, 0, 2, argv, NULL, &r);
    if (rc != ORDO_OK)
        return fail(c, "status", rc);
    if (r->type == ORDO_REPLY_ARRAY) {
        printf("# members\n");
        for (size_t i = 0; i < r->n; i++) {
            const ordo_reply_t *m = r->elem[i];
            if (m->type != ORDO_REPLY_ARRAY || m->n < 4)
                continue;
            printf("member:%" PRId64 " addr=%s role=%s voter=%" PRId64, m->elem[0]->integer,
                   m->elem[1]->str ? m->elem[1]->str : "?", m->elem[2]->str ? m->elem[2]->str : "?",
                   m->elem[3]->integer);
            if (m->n >= 7)
                printf(" live=%" PRId64 " last_contact_ms=%" PRId64 " lag_entries=%" PRId64, m->elem[4]->integer,
                       m->elem[5]->integer, m->elem[6]->integer);
            printf("\n");
        }
    }
    ordo_reply_free(r);
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
    if (show(c, "status", NULL, "CLUSTER", "INFO", NULL))
        return 1;
    return show_members(c);
}

/* parse_port() -- a TCP port, strictly: digits only, 1..65535. */
static int parse_port(const char *s, int *out)
{
    int64_t v;
    if (parse_i64(s, &v) != 0 || v < 1 || v > 65535)
        return -1;
    *out = (int)v;
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

int main(int argc, char **argv)
{
    ordo_client_opts_t co = { 0 };
    const char *hosts = NULL;
    int port = 0;
    int64_t timeout_ms = TOOL_TIMEOUT_MS_DEFAULT;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (i + 1 >= argc)
            return usage();
        if (strcmp(argv[i], "-h") == 0) {
            hosts = argv[++i];
        } else if (strcmp(argv[i], "-p") == 0) {
            if (parse_port(argv[++i], &port) != 0) {
                fprintf(stderr, "ordo: -p %s: not a port (1..65535)\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "-a") == 0) {
            co.password = argv[++i];
        } else if (strcmp(argv[i], "--timeout") == 0) {
            if (parse_i64(argv[++i], &timeout_ms) != 0 || timeout_ms <= 0 || timeout_ms > INT32_MAX) {
                fprintf(stderr, "ordo: --timeout %s: not a number of milliseconds\n", argv[i]);
                return 2;
            }
        } else {
            return usage();
        }
    }
    /* -h/-p name the server; without them, ORDO_ADDRS; then the default. */
    char *addrs = NULL;
    const char *env = getenv("ORDO_ADDRS");
    if (hosts == NULL && port == 0 && env != NULL && *env != '\0')
        hosts = env;
    addrs = build_addrs(hosts ? hosts : "127.0.0.1", port ? port : ORDO_CLIENT_PORT_DEFAULT);
    ordo_client_t *probe = NULL;
    co.addrs = addrs;
    if (addrs == NULL || ordo_client_new(&probe, &co) != ORDO_OK) {
        fprintf(stderr, "ordo: %.200s%s: not a list of host:port addresses\n", hosts ? hosts : "",
                hosts && strlen(hosts) > 200 ? "..." : "");
        free(addrs);
        return 2;
    }
    ordo_client_free(probe);
    co.call_timeout_ms = (int)timeout_ms;
    co.reconnect_timeout_ms = (int)timeout_ms;
    if (i >= argc)
        return usage();
    signal(SIGPIPE, SIG_IGN);
    const char *cmd = argv[i++];
    int rest = argc - i;
    char **args = argv + i;
    if (strcmp(cmd, "watch") == 0 || strcmp(cmd, "consume") == 0) {
        int rc = cmd[0] == 'w' ? cmd_watch(&co, rest, args) : cmd_consume(&co, rest, args);
        free(addrs);
        return rc;
    }
    ordo_client_t *c;
    if (ordo_client_new(&c, &co) != ORDO_OK) {
        free(addrs);
        return fail(NULL, cmd, ORDO_ENOMEM);
    }
    int rc;
    if (strcmp(cmd, "call") == 0)
        rc = cmd_call(c, rest, args);
    else if (strcmp(cmd, "push") == 0)
        rc = cmd_push(c, rest, args);
    else if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0)
        rc = cmd_pause(c, rest, args, cmd[0] == 'p');
    else if (strcmp(cmd, "redrive") == 0)
        rc = cmd_redrive(c, rest, args);
    else if (strcmp(cmd, "cancel") == 0)
        rc = cmd_cancel(c, rest, args);
    else if (strcmp(cmd, "schedule") == 0)
        rc = cmd_schedule(c, rest, args);
    else if (strcmp(cmd, "top") == 0)
        rc = cmd_top(c, rest, args);
    else if (strcmp(cmd, "status") == 0)
        rc = cmd_status(c);
    else
        rc = usage();
    ordo_client_free(c);
    free(addrs);
    return rc;
}
