/*
 * cmd_http.c -- what the HTTP layer (net/http.c) asks of the server
 * beyond commands: whether it serves writes (/healthz), and the
 * Prometheus text of /metrics. Both only read; neither makes a record.
 *
 * Metric names (docs/http.md): ordo_ prefix, counters end in _total,
 * units in names (_bytes, _seconds); per-queue series carry a `queue`
 * label (queues are few and named by operators); no series is labelled by
 * a key, whose number is unbounded.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "net/net.h"
#include "writer/block.h"
#include "writer/coord_wait.h"

const char *cmd_http_unhealthy(conn_t *c)
{
    const char *why = server_readonly(c->srv);
    return why != NULL ? why : NULL;
}

/* A label value, escaped as the text format asks (\\, \", \n). */
static void add_label(ordo_buf_t *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\' || ch == '"')
            ordo_buf_printf(b, "\\%c", ch);
        else if (ch == '\n')
            ordo_buf_puts(b, "\\n");
        else
            ordo_buf_append(b, &ch, 1);
    }
}

static void metric_head(ordo_buf_t *b, const char *name, const char *type, const char *help)
{
    ordo_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric(ordo_buf_t *b, const char *name, const char *type, const char *help, double v)
{
    metric_head(b, name, type, help);
    ordo_buf_printf(b, "%s %.17g\n", name, v);
}

/* Per-queue families: one pass per family over the queues. */
typedef struct {
    ordo_buf_t *b;
    const char *name;
    int field;
    uint64_t now_ms;
} qwalk_t;

enum { QF_PUSHED, QF_DELIVERED, QF_ACKED, QF_NACKED, QF_REDELIVERED, QF_DEADLETTERED, QF_WAITING, QF_INFLIGHT,
       QF_DELAYED, QF_KEYS, QF_PARKED, QF_BYTES, QF_COUNT };

static const struct {
    const char *name, *type, *help;
} qfam[QF_COUNT] = {
    {"ordo_queue_pushed_total", "counter", "messages pushed"},
    {"ordo_queue_delivered_total", "counter", "deliveries (first and later attempts)"},
    {"ordo_queue_acked_total", "counter", "messages acked"},
    {"ordo_queue_nacked_total", "counter", "messages nacked"},
    {"ordo_queue_redelivered_total", "counter", "deliveries whose lease ran out"},
    {"ordo_queue_deadlettered_total", "counter", "messages that exhausted their attempts"},
    {"ordo_queue_waiting_messages", "gauge", "messages waiting (not in flight)"},
    {"ordo_queue_inflight_messages", "gauge", "messages delivered and not acked"},
    {"ordo_queue_delayed_messages", "gauge", "messages pushed with DELAY not yet due"},
    {"ordo_queue_keys", "gauge", "distinct keys with messages"},
    {"ordo_queue_parked_keys", "gauge", "keys parked by a poison message"},
    {"ordo_queue_memory_bytes", "gauge", "heap bytes of the queue"},
};

static void qwalk(void *arg, queue_t *q)
{
    qwalk_t *w = arg;
    queue_info_t in;
    queue_info(q, &in);
    double v = 0;
    switch (w->field) {
    case QF_PUSHED: v = (double)in.pushed; break;
    case QF_DELIVERED: v = (double)in.delivered; break;
    case QF_ACKED: v = (double)in.acked; break;
    case QF_NACKED: v = (double)in.nacked; break;
    case QF_REDELIVERED: v = (double)in.redelivered; break;
    case QF_DEADLETTERED: v = (double)in.deadlettered; break;
    case QF_WAITING: v = (double)in.len.waiting; break;
    case QF_INFLIGHT: v = (double)in.len.inflight; break;
    case QF_DELAYED: v = (double)in.len.delayed; break;
    case QF_KEYS: v = (double)in.keys; break;
    case QF_PARKED: v = (double)in.parked_keys; break;
    case QF_BYTES: v = (double)in.bytes; break;
    }
    size_t n;
    const char *name = queue_name(q, &n);
    ordo_buf_printf(w->b, "%s{queue=\"", w->name);
    add_label(w->b, name, n);
    ordo_buf_printf(w->b, "\"} %.17g\n", v);
}

void cmd_http_metrics(conn_t *c, ordo_buf_t *b)
{
    server_t *s = c->srv;
    const server_stats_t *st = &s->stats;
    kv_stats_t kv;
    kv_stats(core_kv(s->core), &kv);
    metric(b, "ordo_connections_total", "counter", "connections accepted", (double)st->connections_total);
    metric(b, "ordo_connections_rejected_total", "counter", "connections refused (limits, protected mode)",
           (double)st->connections_rejected);
    metric(b, "ordo_clients", "gauge", "connections open (RESP and HTTP)", (double)s->net.conns.len);
    metric(b, "ordo_blocked_clients", "gauge", "connections parked in a blocking command",
           (double)s->writer.block.blocked_clients);
    metric(b, "ordo_commands_total", "counter", "commands processed", (double)st->commands_total);
    metric(b, "ordo_errors_total", "counter", "error replies", (double)st->errors_total);
    metric(b, "ordo_net_input_bytes_total", "counter", "bytes read from clients", (double)st->net_in_bytes);
    metric(b, "ordo_net_output_bytes_total", "counter", "bytes written to clients", (double)st->net_out_bytes);
    metric(b, "ordo_watch_events_total", "counter", "watch events sent", (double)st->watch_events_total);
    metric(b, "ordo_watch_cancelled_total", "counter", "watches cancelled", (double)st->watch_cancelled_total);
    metric(b, "ordo_watches", "gauge", "watches open", (double)s->watches.count);
    metric(b, "ordo_expired_keys_total", "counter", "keys expired", (double)st->expired_keys_total);
    metric(b, "ordo_auth_failures_total", "counter", "failed authentications", (double)st->auth_failures);
    metric(b, "ordo_revision", "gauge", "current revision", (double)core_rev(s->core));
    metric(b, "ordo_durable_revision", "gauge", "revision the log has committed", (double)s->durable_rev);
    metric(b, "ordo_readonly", "gauge", "1 while the log cannot be written", server_readonly(s) ? 1 : 0);
    metric_head(b, "ordo_memory_bytes", "gauge", "stored data by area, and connection buffers");
    ordo_buf_printf(b, "ordo_memory_bytes{area=\"kv\"} %zu\n", kv.bytes);
    ordo_buf_printf(b, "ordo_memory_bytes{area=\"queues\"} %zu\n", queue_set_bytes(core_queues(s->core)));
    ordo_buf_printf(b, "ordo_memory_bytes{area=\"coord\"} %zu\n", coord_wait_bytes(s));
    ordo_buf_printf(b, "ordo_memory_bytes{area=\"clients\"} %zu\n", net_client_memory(s));
    metric(b, "ordo_kv_keys", "gauge", "live keys", (double)kv.keys);
    metric(b, "ordo_queues", "gauge", "queues", (double)queue_set_count(core_queues(s->core)));
    for (int f = 0; f < QF_COUNT; f++) {
        metric_head(b, qfam[f].name, qfam[f].type, qfam[f].help);
        qwalk_t w = {b, qfam[f].name, f, s->now_ms};
        queue_set_foreach(core_queues(s->core), qwalk, &w);
    }
}
