/*
 * tool/stats.c -- `ordo status` and `ordo top`: what a server says about
 * itself, read into a sample and shown as a summary (status) or, sampled
 * every interval, as rates (top).
 *
 * A sample is INFO, CLUSTER INFO and, for every queue Q.LIST names, the
 * counters of its Q.INFO (pipelined, TOOL_PIPELINE_BATCH at a time). It is
 * taken from the member the client ends on: the first command (Q.LIST)
 * follows -NOTLEADER, so in cluster mode that is the leader, whose view
 * holds the members' lag. Nothing here writes: both commands only read.
 *
 * status: role (single, or leader/follower and term), revision, how far
 * durability trails it (single: revisions not yet synced to the WAL;
 * cluster: entries committed but not applied, appended but not committed),
 * the log's size, the queues' totals, clients and watches, and in cluster
 * mode one line per member (CLUSTER MEMBERS). `status --raw` prints what
 * status printed before: the revision, all of INFO, CLUSTER INFO and the
 * members, for scripts that read fields.
 *
 * top: a rate is a counter's change between two samples over the time
 * between them, per second; a counter that went down (a restarted server)
 * shows no rate. Queue depths are shown with their change over the same
 * interval. On a terminal each frame clears the screen and redraws from
 * the top-left (ANSI); otherwise frames follow each other, separated by a
 * blank line, so `top --once` (one frame) or `-n N` suits scripts.
 */
#include "tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Q.INFO commands in flight at once: a bound on the replies buffered, not
 * on the queues shown (every queue is read). */
#define TOOL_PIPELINE_BATCH 64
/* A queue name is shown cut to this many bytes in top's table. */
#define TOOL_TOP_NAME_COLS 24

/* ---- samples ------------------------------------------------------------- */

/* One reply of `key:value` lines (INFO, CLUSTER INFO), split in place. */
typedef struct info {
    char *text;   /* owned copy of the reply */
    char **keys;  /* into text */
    char **vals;
    size_t n;
} info_t;

typedef struct queue_stat {
    char *name; /* owned */
    int64_t waiting, inflight, delayed;
    int64_t pushed, delivered, acked, nacked, deadlettered;
} queue_stat_t;

typedef struct sample {
    int64_t at_ms; /* monotonic, when the sample was complete */
    info_t info;
    info_t cluster;
    queue_stat_t *queues; /* sorted by name */
    size_t nqueues;
} sample_t;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void info_free(info_t *in)
{
    free(in->text);
    free(in->keys);
    free(in->vals);
    memset(in, 0, sizeof *in);
}

/* info_parse() -- split text (len bytes) into its `key:value` lines;
 * section headers (`# Server`) and blank lines are skipped. 0, or -1 when
 * out of memory. */
static int info_parse(info_t *in, const char *text, size_t len)
{
    memset(in, 0, sizeof *in);
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    in->text = malloc(len + 1);
    in->keys = calloc(lines, sizeof *in->keys);
    in->vals = calloc(lines, sizeof *in->vals);
    if (in->text == NULL || in->keys == NULL || in->vals == NULL) {
        info_free(in);
        return -1;
    }
    memcpy(in->text, text, len);
    in->text[len] = '\0';
    for (char *line = in->text; line != NULL && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r')
            line[l - 1] = '\0';
        char *colon = strchr(line, ':');
        if (line[0] != '#' && colon != NULL) {
            *colon = '\0';
            in->keys[in->n] = line;
            in->vals[in->n++] = colon + 1;
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

/* info_str() -- the value of key, or "" when the server does not say. */
static const char *info_str(const info_t *in, const char *key)
{
    for (size_t i = 0; i < in->n; i++)
        if (strcmp(in->keys[i], key) == 0)
            return in->vals[i];
    return "";
}

/* info_i64() -- the value of key as a number; 0 when absent. */
static int64_t info_i64(const info_t *in, const char *key)
{
    return strtoll(info_str(in, key), NULL, 10);
}

static void sample_free(sample_t *s)
{
    info_free(&s->info);
    info_free(&s->cluster);
    for (size_t i = 0; i < s->nqueues; i++)
        free(s->queues[i].name);
    free(s->queues);
    memset(s, 0, sizeof *s);
}

/* command() -- one command whose reply must not be an error: ORDO_OK
 * with *r (the caller frees it), or the failure, said on stderr. */
static int command(ordo_client_t *c, const char *what, ordo_reply_t **r, int argc, const char *const *argv)
{
    int rc = ordo_client_command(c, 0, argc, argv, NULL, r);
    if (rc == ORDO_OK && (rc = ordo_client_reply_error(c, *r)) != ORDO_OK) {
        ordo_reply_free(*r);
        *r = NULL;
    }
    if (rc != ORDO_OK)
        tool_fail(c, what, rc);
    return rc;
}

static int fetch_info(ordo_client_t *c, const char *what, info_t *in, int argc, const char *const *argv)
{
    ordo_reply_t *r;
    int rc = command(c, what, &r, argc, argv);
    if (rc != ORDO_OK)
        return rc;
    rc = r->str && info_parse(in, r->str, r->len) == 0 ? ORDO_OK : ORDO_EPROTO;
    if (rc != ORDO_OK)
        tool_fail(NULL, what, rc);
    ordo_reply_free(r);
    return rc;
}

static int64_t reply_i64(const ordo_reply_t *v)
{
    if (v->type == ORDO_REPLY_INTEGER)
        return v->integer;
    return v->str ? strtoll(v->str, NULL, 10) : 0;
}

/* queue_fill() -- q's counters from its Q.INFO reply (a map, or a flat
 * array of name and value in RESP2). */
static void queue_fill(queue_stat_t *q, const ordo_reply_t *r)
{
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {
        { "waiting", offsetof(queue_stat_t, waiting) },
        { "inflight", offsetof(queue_stat_t, inflight) },
        { "delayed", offsetof(queue_stat_t, delayed) },
        { "pushed", offsetof(queue_stat_t, pushed) },
        { "delivered", offsetof(queue_stat_t, delivered) },
        { "acked", offsetof(queue_stat_t, acked) },
        { "nacked", offsetof(queue_stat_t, nacked) },
        { "deadlettered", offsetof(queue_stat_t, deadlettered) },
    };
    if (r->type != ORDO_REPLY_MAP && r->type != ORDO_REPLY_ARRAY)
        return;
    for (size_t i = 0; i + 1 < r->n; i += 2) {
        const ordo_reply_t *k = r->elem[i];
        for (size_t f = 0; k->str && f < sizeof fields / sizeof fields[0]; f++)
            if (strcmp(k->str, fields[f].name) == 0)
                *(int64_t *)((char *)q + fields[f].off) = reply_i64(r->elem[i + 1]);
    }
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const queue_stat_t *)a)->name, ((const queue_stat_t *)b)->name);
}

/* fetch_queues() -- every queue's counters: Q.LIST, then Q.INFO per
 * queue, pipelined. A queue dropped between the two is left out. */
static int fetch_queues(ordo_client_t *c, const char *what, sample_t *s)
{
    ordo_reply_t *list;
    static const char *const qlist[] = { "Q.LIST" };
    int rc = command(c, what, &list, 1, qlist);
    if (rc != ORDO_OK)
        return rc;
    size_t n = list->type == ORDO_REPLY_ARRAY ? list->n : 0;
    s->queues = calloc(n ? n : 1, sizeof *s->queues);
    if (s->queues == NULL)
        rc = ORDO_ENOMEM;
    for (size_t at = 0; at < n && rc == ORDO_OK; at += TOOL_PIPELINE_BATCH) {
        size_t end = at + TOOL_PIPELINE_BATCH < n ? at + TOOL_PIPELINE_BATCH : n;
        for (size_t i = at; i < end && rc == ORDO_OK; i++) {
            const char *argv[] = { "Q.INFO", list->elem[i]->str ? list->elem[i]->str : "" };
            size_t lens[] = { 6, list->elem[i]->len };
            rc = ordo_client_append(c, 2, argv, lens);
        }
        for (size_t i = at; i < end && rc == ORDO_OK; i++) {
            ordo_reply_t *r;
            rc = ordo_client_get_reply(c, 0, &r);
            if (rc != ORDO_OK)
                break;
            if (r->type != ORDO_REPLY_ERROR && list->elem[i]->str) {
                queue_stat_t *q = &s->queues[s->nqueues];
                q->name = strdup(list->elem[i]->str);
                if (q->name == NULL)
                    rc = ORDO_ENOMEM;
                else {
                    queue_fill(q, r);
                    s->nqueues++;
                }
            }
            ordo_reply_free(r);
        }
    }
    ordo_reply_free(list);
    if (rc != ORDO_OK) {
        tool_fail(c, what, rc);
        return rc;
    }
    qsort(s->queues, s->nqueues, sizeof *s->queues, by_name);
    return ORDO_OK;
}

/* sample_take() -- a whole sample into s (zeroed first). ORDO_OK, or the
 * failure (said on stderr). */
static int sample_take(ordo_client_t *c, const char *what, sample_t *s)
{
    static const char *const info[] = { "INFO" };
    static const char *const cluster[] = { "CLUSTER", "INFO" };
    memset(s, 0, sizeof *s);
    int rc = fetch_queues(c, what, s); /* first: it follows -NOTLEADER */
    if (rc == ORDO_OK)
        rc = fetch_info(c, what, &s->info, 1, info);
    if (rc == ORDO_OK)
        rc = fetch_info(c, what, &s->cluster, 2, cluster);
    s->at_ms = mono_ms();
    if (rc != ORDO_OK)
        sample_free(s);
    return rc;
}

/* ---- what a sample says -------------------------------------------------- */

typedef struct totals {
    int64_t waiting, inflight, delayed, pushed, delivered, acked, nacked, deadlettered;
} totals_t;

static totals_t queue_totals(const sample_t *s)
{
    totals_t t = { 0 };
    for (size_t i = 0; i < s->nqueues; i++) {
        const queue_stat_t *q = &s->queues[i];
        t.waiting += q->waiting;
        t.inflight += q->inflight;
        t.delayed += q->delayed;
        t.pushed += q->pushed;
        t.delivered += q->delivered;
        t.acked += q->acked;
        t.nacked += q->nacked;
        t.deadlettered += q->deadlettered;
    }
    return t;
}

static int clustered(const sample_t *s)
{
    return info_i64(&s->cluster, "cluster_enabled") != 0;
}

/* fmt_bytes() -- n bytes for a reader: "95 B", "2.8 KiB", "4.2 MiB". */
static const char *fmt_bytes(char *buf, size_t cap, double n)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    size_t u = 0;
    while (n >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        n /= 1024;
        u++;
    }
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", n, units[u]);
    return buf;
}

static const char *fmt_duration(char *buf, size_t cap, int64_t s)
{
    if (s < 60)
        snprintf(buf, cap, "%" PRId64 "s", s);
    else if (s < 3600)
        snprintf(buf, cap, "%" PRId64 "m %" PRId64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, cap, "%" PRId64 "h %" PRId64 "m", s / 3600, s / 60 % 60);
    else
        snprintf(buf, cap, "%" PRId64 "d %" PRId64 "h", s / 86400, s / 3600 % 24);
    return buf;
}

/* print_role() -- "single (fsync always)" or "leader, term 2 (member 3 of
 * 3; leader host:port)", and whether the server is read-only and why. */
static void print_role(const sample_t *s)
{
    const info_t *cl = &s->cluster;
    if (!clustered(s)) {
        printf("role:      single (fsync %s)\n", info_str(&s->info, "fsync"));
    } else {
        printf("role:      %s, term %" PRId64 " (member %" PRId64 " of %" PRId64 "; leader %s)\n",
               info_str(cl, "cluster_role"), info_i64(cl, "cluster_term"), info_i64(cl, "cluster_node_id"),
               info_i64(cl, "cluster_members"), *info_str(cl, "cluster_leader") ? info_str(cl, "cluster_leader") : "none");
    }
    if (strcmp(info_str(&s->info, "readonly"), "yes") == 0)
        printf("readonly:  yes: %s\n", info_str(&s->info, "readonly_reason"));
}

static void print_durability(const sample_t *s)
{
    const info_t *in = &s->info, *cl = &s->cluster;
    char b[32];
    if (!clustered(s)) {
        int64_t rev = info_i64(in, "revision"), durable = info_i64(in, "durable_revision");
        printf("durable:   %" PRId64 " (%" PRId64 " revisions not yet synced, %s pending)\n", durable,
               rev > durable ? rev - durable : 0, fmt_bytes(b, sizeof b, (double)info_i64(in, "wal_pending_bytes")));
        int64_t segs = info_i64(in, "wal_segments");
        printf("log:       %s in %" PRId64 " segment%s, last snapshot at revision %" PRId64 "\n",
               fmt_bytes(b, sizeof b, (double)info_i64(in, "wal_bytes")), segs, segs == 1 ? "" : "s",
               info_i64(in, "last_snapshot_revision"));
        return;
    }
    int64_t commit = info_i64(cl, "cluster_commit_index"), applied = info_i64(cl, "cluster_applied_index");
    int64_t last = info_i64(cl, "cluster_last_index");
    printf("durable:   commit index %" PRId64 ", applied %" PRId64 " (%" PRId64 " to apply), last %" PRId64
           " (%" PRId64 " uncommitted)\n",
           commit, applied, commit > applied ? commit - applied : 0, last, last > commit ? last - commit : 0);
    printf("log:       %s, snapshot at index %" PRId64 "\n", fmt_bytes(b, sizeof b, (double)info_i64(in, "wal_bytes")),
           info_i64(cl, "cluster_snapshot_index"));
}

/* ---- status --------------------------------------------------------------- */

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

/* show() -- run a command (its arguments NULL-ended) and print its reply,
 * under "# title" when title is not NULL. 0, or TOOL_EXIT_FAIL (said). */
static int show(ordo_client_t *c, const char *title, int argc, const char *const *argv)
{
    ordo_reply_t *r;
    if (command(c, "status", &r, argc, argv) != ORDO_OK)
        return TOOL_EXIT_FAIL;
    if (title)
        printf("# %s\n", title);
    print_reply(r, 0);
    printf("\n");
    ordo_reply_free(r);
    return 0;
}

/* show_members() -- in cluster mode, title, then one line per member,
 * each after indent: its liveness, time since it was last heard from and,
 * on the leader, the entries it lacks (CLUSTER MEMBERS). Nothing on a
 * single server. 0, or TOOL_EXIT_FAIL (said, as what's). */
static int show_members(ordo_client_t *c, const char *what, const char *title, const char *indent)
{
    static const char *const argv[] = { "CLUSTER", "MEMBERS" };
    ordo_reply_t *r;
    int rc = ordo_client_command(c, 0, 2, argv, NULL, &r);
    if (rc != ORDO_OK)
        return tool_fail(c, what, rc);
    if (r->type == ORDO_REPLY_ARRAY) {
        printf("%s\n", title);
        for (size_t i = 0; i < r->n; i++) {
            const ordo_reply_t *m = r->elem[i];
            if (m->type != ORDO_REPLY_ARRAY || m->n < 4)
                continue;
            printf("%smember:%" PRId64 " addr=%s role=%s voter=%" PRId64, indent, m->elem[0]->integer,
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

/* status_raw() -- the revision, INFO, CLUSTER INFO and the members, as
 * the server words them. */
static int status_raw(ordo_client_t *c)
{
    int64_t cur, oldest;
    int rc = ordo_kv_rev(c, &cur, &oldest);
    if (rc != ORDO_OK)
        return tool_fail(c, "status", rc);
    printf("# ordo at %s:%d\nrevision:%" PRId64 "\noldest_revision:%" PRId64 "\n", ordo_client_host(c),
           ordo_client_port(c), cur, oldest);
    static const char *const info[] = { "INFO" };
    static const char *const cluster[] = { "CLUSTER", "INFO" };
    if (show(c, NULL, 1, info) || show(c, NULL, 2, cluster))
        return TOOL_EXIT_FAIL;
    return show_members(c, "status", "# members", "");
}

static int status_summary(ordo_client_t *c)
{
    sample_t s;
    if (sample_take(c, "status", &s) != ORDO_OK)
        return TOOL_EXIT_FAIL;
    const info_t *in = &s.info;
    char b[32], b2[32];
    printf("ordo %s at %s:%d, up %s\n", info_str(in, "ordo_version"), ordo_client_host(c), ordo_client_port(c),
           fmt_duration(b, sizeof b, info_i64(in, "uptime_in_seconds")));
    print_role(&s);
    printf("revision:  %" PRId64 " (oldest resumable %" PRId64 ")\n", info_i64(in, "revision"),
           info_i64(in, "oldest_revision"));
    print_durability(&s);
    totals_t t = queue_totals(&s);
    printf("queues:    %zu (%" PRId64 " waiting, %" PRId64 " in flight, %" PRId64 " delayed, %" PRId64
           " dead-lettered)\n",
           s.nqueues, t.waiting, t.inflight, t.delayed, t.deadlettered);
    printf("clients:   %" PRId64 " connected (%" PRId64 " blocked), %" PRId64 " watches\n",
           info_i64(in, "connected_clients"), info_i64(in, "blocked_clients"), info_i64(in, "watches"));
    printf("memory:    %s (%s resident)\n", fmt_bytes(b, sizeof b, (double)info_i64(in, "used_memory")),
           fmt_bytes(b2, sizeof b2, (double)info_i64(in, "used_memory_rss")));
    int rc = clustered(&s) ? show_members(c, "status", "members:", "  ") : 0;
    sample_free(&s);
    return rc;
}

int tool_status(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    int raw = 0;
    const tool_opt_t opts[] = {
        { "--raw", NULL, TOOL_OPT_FLAG, &raw, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    const tool_cmd_t cmd = { "status", TOOL_SYN_STATUS, opts, NULL, 0, 0, 0 };
    int n, rc = tool_parse(&cmd, global, argc, argv, NULL, &n, NULL);
    if (rc != 0)
        return rc;
    return raw ? status_raw(c) : status_summary(c);
}

/* ---- top ------------------------------------------------------------------ */

/* ANSI: cursor to the top-left, then clear the screen. */
#define TOOL_ANSI_HOME_CLEAR "\033[H\033[2J"

typedef struct top {
    const char *queue; /* one queue (and its top keys), or NULL: all */
    int64_t count;     /* queue rows (all) or top keys (one queue) */
    int64_t interval_ms;
    int tty;           /* redraw in place */
} top_t;

/* per_s() -- the rate of a counter from before to now over secs, into
 * buf; "-" when there is no before, or the counter went back (a restart). */
static const char *per_s(char *buf, size_t cap, int64_t now, const int64_t *before, double secs, int bytes)
{
    if (before == NULL || now < *before || secs <= 0) {
        snprintf(buf, cap, "-");
        return buf;
    }
    double r = (double)(now - *before) / secs;
    if (bytes) {
        char b[24];
        snprintf(buf, cap, "%.20s/s", fmt_bytes(b, sizeof b, r));
    } else {
        snprintf(buf, cap, "%.1f", r);
    }
    return buf;
}

/* A row of the rates table: a counter read from a sample. */
typedef struct counter {
    const char *label;
    const char *info_key; /* an INFO field, or NULL: a queue total */
    size_t total_off;     /* queue totals: the field of totals_t */
    int bytes;
} counter_t;

static const counter_t counters[] = {
    { "commands", "total_commands_processed", 0, 0 },
    { "errors", "total_error_replies", 0, 0 },
    { "revisions", "revision", 0, 0 },
    { "watch events", "watch_events", 0, 0 },
    { "transactions", "transactions_total", 0, 0 },
    { "pushed", NULL, offsetof(totals_t, pushed), 0 },
    { "delivered", NULL, offsetof(totals_t, delivered), 0 },
    { "acked", NULL, offsetof(totals_t, acked), 0 },
    { "nacked", NULL, offsetof(totals_t, nacked), 0 },
    { "dead-lettered", NULL, offsetof(totals_t, deadlettered), 0 },
    { "net in", "total_net_input_bytes", 0, 1 },
    { "net out", "total_net_output_bytes", 0, 1 },
};

static int64_t counter_value(const counter_t *k, const sample_t *s, const totals_t *t)
{
    return k->info_key ? info_i64(&s->info, k->info_key) : *(const int64_t *)((const char *)t + k->total_off);
}

static const queue_stat_t *find_queue(const sample_t *s, const char *name)
{
    queue_stat_t key = { .name = (char *)name };
    return s->queues ? bsearch(&key, s->queues, s->nqueues, sizeof key, by_name) : NULL;
}

static int by_waiting(const void *a, const void *b)
{
    const queue_stat_t *x = *(const queue_stat_t *const *)a, *y = *(const queue_stat_t *const *)b;
    if (x->waiting != y->waiting)
        return x->waiting > y->waiting ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void print_change(int64_t now, const int64_t *before)
{
    if (before == NULL)
        printf(" %8s", "new");
    else
        printf(" %+8" PRId64, now - *before);
}

static void print_queue_row(const queue_stat_t *q, const sample_t *prev, double secs)
{
    const queue_stat_t *p = prev ? find_queue(prev, q->name) : NULL;
    char r1[32], r2[32];
    printf("%-*.*s %9" PRId64, TOOL_TOP_NAME_COLS, TOOL_TOP_NAME_COLS, q->name, q->waiting);
    print_change(q->waiting, p ? &p->waiting : NULL);
    printf(" %10" PRId64, q->inflight);
    print_change(q->inflight, p ? &p->inflight : NULL);
    printf(" %8" PRId64 " %9s %9s\n", q->delayed, per_s(r1, sizeof r1, q->pushed, p ? &p->pushed : NULL, secs, 0),
           per_s(r2, sizeof r2, q->acked, p ? &p->acked : NULL, secs, 0));
}

/* print_queues() -- the queue table: the one queue asked for, or the
 * count with the most waiting. 0, or -1 when out of memory. */
static int print_queues(const top_t *t, const sample_t *cur, const sample_t *prev, double secs)
{
    printf("\n%-*s %9s %8s %10s %8s %8s %9s %9s\n", TOOL_TOP_NAME_COLS, "queue", "waiting", "change", "in flight",
           "change", "delayed", "pushed/s", "acked/s");
    if (t->queue) {
        const queue_stat_t *q = find_queue(cur, t->queue);
        if (q)
            print_queue_row(q, prev, secs);
        else
            printf("(no queue %s)\n", t->queue);
        return 0;
    }
    const queue_stat_t **order = malloc((cur->nqueues ? cur->nqueues : 1) * sizeof *order);
    if (order == NULL)
        return -1;
    for (size_t i = 0; i < cur->nqueues; i++)
        order[i] = &cur->queues[i];
    qsort(order, cur->nqueues, sizeof *order, by_waiting);
    size_t shown = cur->nqueues < (size_t)t->count ? cur->nqueues : (size_t)t->count;
    for (size_t i = 0; i < shown; i++)
        print_queue_row(order[i], prev, secs);
    if (shown < cur->nqueues)
        printf("(%zu more queues; --count shows more)\n", cur->nqueues - shown);
    free(order);
    return 0;
}

/* print_top_keys() -- the keys of t->queue with the most waiting
 * (Q.TOPKEYS: [[key, waiting], ...]). 0 or TOOL_EXIT_FAIL (said). */
static int print_top_keys(ordo_client_t *c, const top_t *t)
{
    char cnt[24];
    snprintf(cnt, sizeof cnt, "%" PRId64, t->count);
    const char *const argv[] = { "Q.TOPKEYS", t->queue, "COUNT", cnt };
    ordo_reply_t *r;
    if (command(c, "top", &r, 4, argv) != ORDO_OK)
        return TOOL_EXIT_FAIL;
    printf("\n%-*s %9s\n", TOOL_TOP_NAME_COLS, "key", "waiting");
    for (size_t i = 0; r->type == ORDO_REPLY_ARRAY && i < r->n; i++) {
        const ordo_reply_t *e = r->elem[i];
        if (e->type != ORDO_REPLY_ARRAY || e->n < 2 || e->elem[0]->str == NULL)
            continue;
        printf("%-*.*s %9" PRId64 "\n", TOOL_TOP_NAME_COLS, TOOL_TOP_NAME_COLS, e->elem[0]->str,
               reply_i64(e->elem[1]));
    }
    ordo_reply_free(r);
    return 0;
}

/* print_frame() -- one frame: the server's lines (as status words its
 * durability and log), the rates since prev (none when prev is NULL), the
 * queue table, t->queue's top keys, and in cluster mode the members. */
static int print_frame(ordo_client_t *c, const top_t *t, const sample_t *cur, const sample_t *prev)
{
    const info_t *in = &cur->info;
    double secs = prev ? (double)(cur->at_ms - prev->at_ms) / 1000.0 : 0;
    char b[32], b2[32], when[16];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%H:%M:%S", localtime_r(&now, &tm));
    if (t->tty)
        fputs(TOOL_ANSI_HOME_CLEAR, stdout);
    printf("ordo top -- %s:%d, %s, revision %" PRId64 ", every %.1f s    %s\n", ordo_client_host(c),
           ordo_client_port(c), clustered(cur) ? info_str(&cur->cluster, "cluster_role") : "single",
           info_i64(in, "revision"), (double)t->interval_ms / 1000.0, when);
    printf("clients %" PRId64 " (%" PRId64 " blocked), watches %" PRId64 ", memory %s (%s resident), queues %zu\n",
           info_i64(in, "connected_clients"), info_i64(in, "blocked_clients"), info_i64(in, "watches"),
           fmt_bytes(b, sizeof b, (double)info_i64(in, "used_memory")),
           fmt_bytes(b2, sizeof b2, (double)info_i64(in, "used_memory_rss")), cur->nqueues);
    print_durability(cur);
    totals_t tc = queue_totals(cur), tp = prev ? queue_totals(prev) : tc;
    printf("\n%-*s %12s %14s", TOOL_TOP_NAME_COLS, "", "per second", "total");
    if (prev)
        printf("   (over the last %.3f s)", secs);
    printf("\n");
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        const counter_t *k = &counters[i];
        int64_t v = counter_value(k, cur, &tc), pv = prev ? counter_value(k, prev, &tp) : 0;
        char r[32];
        per_s(r, sizeof r, v, prev ? &pv : NULL, secs, k->bytes);
        if (k->bytes)
            printf("%-*s %12s %14s\n", TOOL_TOP_NAME_COLS, k->label, r, fmt_bytes(b, sizeof b, (double)v));
        else
            printf("%-*s %12s %14" PRId64 "\n", TOOL_TOP_NAME_COLS, k->label, r, v);
    }
    if (print_queues(t, cur, prev, secs) != 0)
        return tool_fail(NULL, "top", ORDO_ENOMEM);
    if (t->queue && print_top_keys(c, t) != 0)
        return TOOL_EXIT_FAIL;
    if (clustered(cur))
        return show_members(c, "top", "\nmembers:", "  ");
    return 0;
}

/* sleep_until() -- wait for the monotonic clock to reach at_ms. */
static void sleep_until(int64_t at_ms)
{
    struct timespec ts = { (time_t)(at_ms / 1000), (long)(at_ms % 1000) * 1000000L };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

int tool_top(ordo_client_t *c, const tool_opt_t *global, int argc, char **argv)
{
    top_t t = { .count = 10, .interval_ms = 1000, .tty = isatty(STDOUT_FILENO) };
    int64_t frames = -1;
    int once = 0;
    const tool_opt_t opts[] = {
        { "--count", NULL, TOOL_OPT_INT, &t.count, "a number of rows", 1, 1000 },
        { "--interval", NULL, TOOL_OPT_INT, &t.interval_ms, "a number of milliseconds", 10, 86400000 },
        { "--iterations", "-n", TOOL_OPT_INT, &frames, "a number of frames", 1, INT32_MAX },
        { "--once", NULL, TOOL_OPT_FLAG, &once, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    static const char *const names[] = { "QUEUE" };
    const tool_cmd_t cmd = { "top", TOOL_SYN_TOP, opts, names, 0, 1, 0 };
    int n, rc = tool_parse(&cmd, global, argc, argv, &t.queue, &n, NULL);
    if (rc != 0)
        return rc;
    if (once && frames > 1)
        return tool_usage_error("top", "--once and -n %" PRId64 ": one or the other", frames);
    if (once)
        frames = 1;
    sample_t prev, cur;
    if (sample_take(c, "top", &prev) != ORDO_OK)
        return TOOL_EXIT_FAIL;
    /* On a terminal the totals show at once; the rates from the next frame. */
    if (t.tty && frames != 1 && (rc = print_frame(c, &t, &prev, NULL)) == 0)
        fflush(stdout);
    int64_t start_ms = prev.at_ms;
    for (int64_t k = 1; rc == 0 && (frames < 0 || k <= frames); k++) {
        sleep_until(start_ms + k * t.interval_ms);
        if (sample_take(c, "top", &cur) != ORDO_OK) {
            rc = TOOL_EXIT_FAIL;
            break;
        }
        if (!t.tty && k > 1)
            printf("\n");
        rc = print_frame(c, &t, &cur, &prev);
        sample_free(&prev);
        prev = cur;
        if (fflush(stdout) != 0 || ferror(stdout))
            break; /* a closed pipe ends it */
    }
    sample_free(&prev);
    return rc;
}
