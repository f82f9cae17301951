/*
 * cmd_http.c -- what the HTTP layer (net/http.c) asks of the server
 * beyond commands: whether it serves writes (/healthz), and the
 * Prometheus text of /metrics, the JSON of /v1/status (the dashboard's
 * data), and the JSON string encoding both HTTP and this file use. All
 * only read; none makes a record.
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
#include "writer/apply.h"
#include "writer/cluster.h"
#include "writer/persist.h"
#include "writer/block.h"
#include "writer/coord_wait.h"
#include "core/coord.h"
#include "core/schedule.h"
#include "log/log.h"

/* The length of the well-formed UTF-8 sequence at s[0..n) (n > 0), or 0
 * if there is none: no overlong form, no surrogate, nothing past U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char b = s[0];
    size_t k;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range (no overlongs, no surrogates) */
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        k = 1;
    else if (b >= 0xE0 && b <= 0xEF)
        k = 2, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4)
        k = 3, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (n <= k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t j = 2; j <= k; j++)
        if ((s[j] & 0xC0) != 0x80)
            return 0;
    return k + 1;
}

static bool utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if ((k = utf8_seq(s + i, n - i)) == 0)
            return false;
    return true;
}

void cmd_http_json_text(ordo_buf_t *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    ordo_buf_append(b, "\"", 1);
    for (size_t i = 0, k; i < n; i += k) {
        k = utf8_seq(u + i, n - i);
        if (k == 0) {
            ordo_buf_puts(b, "\\ufffd"); /* not UTF-8: the replacement character */
            k = 1;
        } else if (u[i] == '"' || u[i] == '\\')
            ordo_buf_printf(b, "\\%c", u[i]);
        else if (u[i] < 0x20 || u[i] == 0x7f)
            ordo_buf_printf(b, "\\u%04x", u[i]);
        else
            ordo_buf_append(b, s + i, k);
    }
    ordo_buf_append(b, "\"", 1);
}

/* Bytes of the control characters a JSON string spells with a short
 * escape (\t, \n, \r); every other control makes the string base64. */
static bool json_short_control(unsigned char ch) { return ch == '\t' || ch == '\n' || ch == '\r'; }

/* s[0..n) is carried as a JSON string: valid UTF-8 with no control but
 * \t, \n, \r, so its escapes (those three, '"' and '\\') cost two bytes
 * at most. Anything else is base64 (4/3 of its size): a value of control
 * bytes spelled \u00XX would cost six bytes per byte. */
static bool json_stringable(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((s[i] < 0x20 && !json_short_control(s[i])) || s[i] == 0x7f)
            return false;
    return utf8_valid(s, n);
}

static void json_base64(ordo_buf_t *b, const unsigned char *s, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = ordo_buf_reserve(b, 2 + (n + 2) / 3 * 4), *start = o;
    *o++ = '"';
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        *o++ = t[v >> 18 & 63];
        *o++ = t[v >> 12 & 63];
        *o++ = i + 1 < n ? t[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? t[v & 63] : '=';
    }
    *o++ = '"';
    b->len += (size_t)(o - start);
}

void cmd_http_json_field(ordo_buf_t *b, const char *name, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (!json_stringable(u, n)) {
        ordo_buf_printf(b, "\"%s_b64\":", name);
        json_base64(b, u, n);
        return;
    }
    ordo_buf_printf(b, "\"%s\":", name);
    char *o = ordo_buf_reserve(b, 2 + 2 * n), *start = o;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = u[i];
        if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char)ch;
        } else if (json_short_control(ch)) {
            *o++ = '\\';
            *o++ = ch == '\t' ? 't' : ch == '\n' ? 'n' : 'r';
        } else
            *o++ = (char)ch;
    }
    *o++ = '"';
    b->len += (size_t)(o - start);
}

void cmd_http_sse_change(ordo_buf_t *b, bool with_id, const char *key, size_t klen, const char *value, size_t vlen,
                         uint64_t rev)
{
    if (with_id)
        ordo_buf_printf(b, "id: %llu\n", (unsigned long long)rev);
    ordo_buf_printf(b, "event: %s\ndata: {", value != NULL ? "put" : "del");
    cmd_http_json_field(b, "key", key, klen);
    if (value != NULL) {
        ordo_buf_append(b, ",", 1);
        cmd_http_json_field(b, "value", value, vlen);
    } else
        ordo_buf_puts(b, ",\"value\":null");
    ordo_buf_printf(b, ",\"revision\":%llu}\n\n", (unsigned long long)rev);
}

void cmd_http_sse_marker(ordo_buf_t *b, const char *event, uint64_t rev, bool with_id)
{
    if (with_id)
        ordo_buf_printf(b, "id: %llu\n", (unsigned long long)rev);
    ordo_buf_printf(b, "event: %s\ndata: {\"revision\":%llu}\n\n", event, (unsigned long long)rev);
}

bool cmd_http_queue_exists(conn_t *c, const char *name, size_t n)
{
    return !cluster_leads(c->srv) || queue_get(core_queues(c->srv->core), name, n) != NULL;
}

bool cmd_http_key_rev(conn_t *c, const char *key, size_t n, uint64_t *rev)
{
    *rev = 0;
    if (!cluster_leads(c->srv))
        return true;
    kv_version_t buf;
    const kv_version_t *v = kv_get(core_kv(c->srv->core), key, n, &buf);
    if (v == NULL)
        return false;
    *rev = v->mod_rev;
    return true;
}

uint64_t cmd_http_rev(conn_t *c) { return core_rev(c->srv->core); }

/* ---- JSON recognition (results' Content-Type) --------------------------------- */

typedef struct {
    const unsigned char *p, *end;
} jscan_t;

static void j_ws(jscan_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool j_lit(jscan_t *j, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
        return false;
    j->p += n;
    return true;
}

static bool j_digits(jscan_t *j)
{
    const unsigned char *s = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    return j->p > s;
}

static bool j_number(jscan_t *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (!(j->p < j->end && *j->p >= '1' && *j->p <= '9') || !j_digits(j))
        return false;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!j_digits(j))
            return false;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (!j_digits(j))
            return false;
    }
    return true;
}

static bool j_string(jscan_t *j)
{
    if (j->p >= j->end || *j->p != '"')
        return false;
    const unsigned char *s = ++j->p;
    while (j->p < j->end && *j->p != '"') {
        if (*j->p < 0x20)
            return false;
        if (*j->p == '\\') {
            if (++j->p >= j->end)
                return false;
            if (*j->p == 'u') {
                for (int i = 0; i < 4; i++)
                    if (++j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p) || *j->p == 0)
                        return false;
            } else if (!strchr("\"\\/bfnrt", *j->p) || *j->p == 0) {
                return false;
            }
        }
        j->p++;
    }
    if (j->p >= j->end || !utf8_valid(s, (size_t)(j->p - s)))
        return false;
    j->p++;
    return true;
}

static bool j_value(jscan_t *j, int depth)
{
    j_ws(j);
    if (j->p >= j->end)
        return false;
    switch (*j->p) {
    case '"': return j_string(j);
    case 't': return j_lit(j, "true");
    case 'f': return j_lit(j, "false");
    case 'n': return j_lit(j, "null");
    case '[': case '{': {
        if (depth >= CMD_JSON_DEPTH_MAX)
            return false;
        bool obj = *j->p++ == '{';
        j_ws(j);
        if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
            j->p++;
            return true;
        }
        for (;;) {
            if (obj) {
                j_ws(j);
                if (!j_string(j))
                    return false;
                j_ws(j);
                if (j->p >= j->end || *j->p++ != ':')
                    return false;
            }
            if (!j_value(j, depth + 1))
                return false;
            j_ws(j);
            if (j->p >= j->end)
                return false;
            unsigned char ch = *j->p++;
            if (ch == (obj ? '}' : ']'))
                return true;
            if (ch != ',')
                return false;
        }
    }
    default: return j_number(j);
    }
}

bool cmd_http_is_json(const char *s, size_t n)
{
    jscan_t j = {(const unsigned char *)s, (const unsigned char *)s + n};
    if (!j_value(&j, 0))
        return false;
    j_ws(&j);
    return j.p == j.end;
}

const char *cmd_http_unhealthy(conn_t *c)
{
    const char *why = server_readonly(c->srv);
    if (why == NULL && !cluster_leads(c->srv))
        why = "not the cluster's leader (see CLUSTER INFO)";
    return why;
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
    const core_t *core;
} qwalk_t;

enum { QF_PUSHED, QF_DELIVERED, QF_ACKED, QF_NACKED, QF_REDELIVERED, QF_DEADLETTERED, QF_WAITING, QF_INFLIGHT,
       QF_DELAYED, QF_KEYS, QF_PARKED, QF_BYTES, QF_OLDEST_AGE, QF_PAUSED, QF_PAUSED_KEYS, QF_THROTTLED, QF_COUNT };

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
    {"ordo_queue_oldest_ready_age_seconds", "gauge",
     "age of the message a pull would get next (0 if none is ready; sampled: up to 1 s more, and since the "
     "server started at most)"},
    {"ordo_queue_paused", "gauge", "1 if the queue is paused as a whole (Q.PAUSE)"},
    {"ordo_queue_paused_keys", "gauge", "keys paused (Q.PAUSE KEY)"},
    {"ordo_queue_throttled_keys", "gauge", "keys out of turn by KEYRATE"},
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
    case QF_PAUSED: v = in.paused ? 1 : 0; break;
    case QF_PAUSED_KEYS: v = (double)in.paused_keys; break;
    case QF_THROTTLED: v = (double)in.throttled_keys; break;
    case QF_OLDEST_AGE: {
        uint64_t id = queue_oldest_ready_id(q);
        uint64_t at = id != 0 ? core_time_of_rev(w->core, id) : 0;
        v = at != 0 && w->now_ms > at ? (double)(w->now_ms - at) / 1000.0 : 0;
        break;
    }
    }
    size_t n;
    const char *name = queue_name(q, &n);
    ordo_buf_printf(w->b, "%s{queue=\"", w->name);
    add_label(w->b, name, n);
    ordo_buf_printf(w->b, "\"} %.17g\n", v);
}

/* Schedules: a series each, labelled by name (schedules, like queues,
 * are few and named by operators). */
enum { SF_PUSHED, SF_SKIPPED, SF_NEXT, SF_COUNT };

static const struct {
    const char *name, *type, *help;
} sfam[SF_COUNT] = {
    {"ordo_schedule_pushed_total", "counter", "ticks that pushed a message"},
    {"ordo_schedule_skipped_total", "counter", "ticks that pushed nothing (missed under skip, or refused)"},
    {"ordo_schedule_next_tick_seconds", "gauge", "seconds until the next tick (0 if due or none)"},
};

typedef struct {
    ordo_buf_t *b;
    int field;
    uint64_t now_ms;
} swalk_t;

static void swalk(void *arg, const sched_view_t *v)
{
    swalk_t *w = arg;
    double x = w->field == SF_PUSHED    ? (double)v->pushed
               : w->field == SF_SKIPPED ? (double)v->skipped
               : v->next_ms > w->now_ms ? (double)(v->next_ms - w->now_ms) / 1000.0
                                        : 0;
    ordo_buf_printf(w->b, "%s{schedule=\"", sfam[w->field].name);
    add_label(w->b, v->name, v->nlen);
    ordo_buf_printf(w->b, "\"} %.17g\n", x);
}

static void add_calls(void *arg, const char *name, uint64_t calls)
{
    ordo_buf_t *b = arg;
    if (calls == 0)
        return; /* a command never sent adds no series */
    ordo_buf_puts(b, "ordo_command_calls_total{command=\"");
    add_label(b, name, strlen(name));
    ordo_buf_printf(b, "\"} %llu\n", (unsigned long long)calls);
}

static void add_error_code(void *arg, const char *code, uint64_t n)
{
    ordo_buf_printf(arg, "ordo_command_errors_total{code=\"%s\"} %llu\n", code, (unsigned long long)n);
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
    metric_head(b, "ordo_tls_handshakes_total", "counter",
                "TLS handshakes by result: ok, failed (refused), timeout (tls-handshake-timeout-ms)");
    ordo_buf_printf(b, "ordo_tls_handshakes_total{result=\"ok\"} %llu\n", (unsigned long long)st->tls_handshakes_ok);
    ordo_buf_printf(b, "ordo_tls_handshakes_total{result=\"failed\"} %llu\n",
                    (unsigned long long)st->tls_handshakes_failed);
    ordo_buf_printf(b, "ordo_tls_handshakes_total{result=\"timeout\"} %llu\n",
                    (unsigned long long)st->tls_handshakes_timedout);
    metric(b, "ordo_clients", "gauge", "connections open (RESP and HTTP)", (double)s->net.conns.len);
    metric(b, "ordo_blocked_clients", "gauge", "connections parked in a blocking command",
           (double)s->writer.block.blocked_clients);
    metric(b, "ordo_commands_total", "counter", "commands processed", (double)st->commands_total);
    metric(b, "ordo_errors_total", "counter", "error replies", (double)st->errors_total);
    metric_head(b, "ordo_command_errors_total", "counter",
                "error replies of the command layer by code (replies to parked commands are only in ordo_errors_total)");
    cmd_foreach_error_code(s, add_error_code, b);
    metric_head(b, "ordo_command_calls_total", "counter", "commands dispatched, by name (HTTP requests included)");
    cmd_foreach_calls(s, add_calls, b);
    metric(b, "ordo_net_input_bytes_total", "counter", "bytes read from clients", (double)st->net_in_bytes);
    metric(b, "ordo_net_output_bytes_total", "counter", "bytes written to clients", (double)st->net_out_bytes);
    metric(b, "ordo_watch_events_total", "counter", "watch events sent", (double)st->watch_events_total);
    metric(b, "ordo_watch_cancelled_total", "counter", "watches cancelled", (double)st->watch_cancelled_total);
    metric(b, "ordo_watches", "gauge", "watches open", (double)s->watches.count);
    metric(b, "ordo_expired_keys_total", "counter", "keys expired", (double)st->expired_keys_total);
    metric(b, "ordo_auth_failures_total", "counter", "failed authentications", (double)st->auth_failures);
    metric(b, "ordo_acl_denied_commands_total", "counter", "commands a user's rules refused",
           (double)st->acl_denied_cmd);
    metric(b, "ordo_acl_denied_names_total", "counter", "keys, queues, locks and elections a user's rules refused",
           (double)st->acl_denied_name);
    metric(b, "ordo_revision", "gauge", "current revision", (double)core_rev(s->core));
    metric(b, "ordo_durable_revision", "gauge", "revision the log has committed", (double)persist_durable_rev(s));
    metric(b, "ordo_readonly", "gauge", "1 while the log cannot be written", server_readonly(s) ? 1 : 0);
    if (cluster_enabled(s)) {
        cluster_status_t ci;
        cluster_status(s, &ci);
        metric(b, "ordo_cluster_leader", "gauge", "1 while this member leads and serves", ci.serving ? 1 : 0);
        metric(b, "ordo_cluster_leader_id", "gauge", "the leader's member id (0: none known)", (double)ci.leader_id);
        metric(b, "ordo_cluster_term", "gauge", "raft term", (double)ci.term);
        metric(b, "ordo_cluster_members", "gauge", "members in the configuration", (double)ci.members);
        metric(b, "ordo_cluster_commit_index", "gauge", "raft commit index", (double)ci.commit_index);
        metric(b, "ordo_cluster_applied_index", "gauge", "raft index applied here", (double)ci.applied_index);
        metric(b, "ordo_cluster_entries_proposed_total", "counter", "raft entries this member proposed",
               (double)ci.entries_proposed);
        metric(b, "ordo_cluster_barriers_proposed_total", "counter", "raft barriers this member proposed",
               (double)ci.barriers_proposed);
        metric(b, "ordo_cluster_read_rounds_total", "counter",
               "leadership confirmations for reads (a heartbeat round, no log write)", (double)ci.read_rounds);
        metric(b, "ordo_cluster_snapshots_total", "counter", "raft snapshots taken here", (double)ci.snapshots_taken);
        metric(b, "ordo_cluster_store_failing", "gauge", "1 while the raft log's writes fail (a full disk): retried",
               ci.store_failing ? 1 : 0);
        metric_head(b, "ordo_cluster_member_live", "gauge", "1 if the member was heard from within an election timeout");
        cluster_member_t m;
        for (int i = 0; cluster_member(s, i, &m); i++)
            ordo_buf_printf(b, "ordo_cluster_member_live{id=\"%llu\"} %d\n", (unsigned long long)m.id, m.live ? 1 : 0);
        metric_head(b, "ordo_cluster_member_lag_entries", "gauge", "entries a member lacks (known on the leader)");
        for (int i = 0; cluster_member(s, i, &m); i++)
            if (m.lag_entries >= 0)
                ordo_buf_printf(b, "ordo_cluster_member_lag_entries{id=\"%llu\"} %lld\n", (unsigned long long)m.id,
                                (long long)m.lag_entries);
    }
    metric_head(b, "ordo_memory_bytes", "gauge", "stored data by area, and connection buffers");
    ordo_buf_printf(b, "ordo_memory_bytes{area=\"kv\"} %zu\n", kv.bytes);
    ordo_buf_printf(b, "ordo_memory_bytes{area=\"queues\"} %zu\n", queue_set_bytes(core_queues(s->core)));
    ordo_buf_printf(b, "ordo_memory_bytes{area=\"coord\"} %zu\n", coord_wait_bytes(s));
    ordo_buf_printf(b, "ordo_memory_bytes{area=\"clients\"} %zu\n", net_client_memory(s));
    metric(b, "ordo_kv_keys", "gauge", "live keys", (double)kv.keys);
    metric(b, "ordo_kv_history_changes", "gauge", "key changes kept in history (history-revs bounds them)",
           (double)kv.log_entries);
    metric(b, "ordo_kv_history_bytes", "gauge", "their key and value bytes (history-bytes bounds them)",
           (double)kv.log_bytes);
    metric(b, "ordo_kv_watch_resumable_revision", "gauge",
           "the oldest revision KV.WATCH FROM (and KV.GET REV) accepts", (double)cmd_kv_resumable(s));
    metric(b, "ordo_qwatch_history_bytes", "gauge", "queue events kept for Q.WATCH FROM (queue-watch-history-bytes)",
           (double)coord_wait_qwatch_history_bytes(s));
    metric(b, "ordo_qwatch_resumable_revision", "gauge", "the oldest revision Q.WATCH FROM accepts",
           (double)coord_wait_qwatch_floor(s));
    log_stats_t ls = {0};
    if (s->persist.log != NULL)
        log_stats(s->persist.log, &ls);
    metric(b, "ordo_log_records_total", "counter", "records written to the log", (double)ls.records_written);
    metric(b, "ordo_log_batches_total", "counter", "batches written to the log", (double)ls.batches);
    metric(b, "ordo_log_syncs_total", "counter", "syncs of the log", (double)ls.syncs);
    metric_head(b, "ordo_log_sync_duration_seconds", "histogram", "duration of the log's syncs (fdatasync)");
    uint64_t cum = 0;
    for (size_t i = 0; i < ls.nsync_buckets; i++) {
        cum += ls.sync_hist[i];
        ordo_buf_printf(b, "ordo_log_sync_duration_seconds_bucket{le=\"%g\"} %llu\n",
                        (double)ls.sync_bucket_us[i] / 1e6, (unsigned long long)cum);
    }
    cum += ls.sync_hist[ls.nsync_buckets];
    ordo_buf_printf(b, "ordo_log_sync_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    ordo_buf_printf(b, "ordo_log_sync_duration_seconds_sum %.6f\n", (double)ls.sync_us_sum / 1e6);
    ordo_buf_printf(b, "ordo_log_sync_duration_seconds_count %llu\n", (unsigned long long)cum);
    metric_head(b, "ordo_apply_duration_seconds", "histogram", "time the writer spends applying one record");
    cum = 0;
    for (size_t i = 0; i < WRITER_APPLY_BUCKETS; i++) {
        cum += s->stats.apply_hist[i];
        ordo_buf_printf(b, "ordo_apply_duration_seconds_bucket{le=\"%g\"} %llu\n", (double)writer_apply_bucket_ns[i] / 1e9,
                        (unsigned long long)cum);
    }
    cum += s->stats.apply_hist[WRITER_APPLY_BUCKETS];
    ordo_buf_printf(b, "ordo_apply_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    ordo_buf_printf(b, "ordo_apply_duration_seconds_sum %.9f\n", (double)s->stats.apply_ns_sum / 1e9);
    ordo_buf_printf(b, "ordo_apply_duration_seconds_count %llu\n", (unsigned long long)cum);
    metric(b, "ordo_log_size_bytes", "gauge", "the log on disk", (double)ls.bytes);
    metric(b, "ordo_log_pending_bytes", "gauge", "appended to the log, not yet committed", (double)ls.pending_bytes);
    coord_stats_t cs;
    coord_stats(core_coord(s->core), &cs);
    metric(b, "ordo_locks_held", "gauge", "locks held", (double)cs.locks);
    metric(b, "ordo_elections_led", "gauge", "elections with a leader", (double)cs.leaders);
    metric(b, "ordo_leases", "gauge", "leases", (double)cs.leases);
    metric(b, "ordo_queues", "gauge", "queues", (double)queue_set_count(core_queues(s->core)));
    for (int f = 0; f < QF_COUNT; f++) {
        metric_head(b, qfam[f].name, qfam[f].type, qfam[f].help);
        qwalk_t w = {b, qfam[f].name, f, server_tick(s), s->core};
        queue_set_foreach(core_queues(s->core), qwalk, &w);
    }
    metric(b, "ordo_schedules", "gauge", "schedules (Q.SCHEDULE)", (double)sched_count(core_scheds(s->core)));
    for (int f = 0; f < SF_COUNT; f++) {
        metric_head(b, sfam[f].name, sfam[f].type, sfam[f].help);
        swalk_t w = {b, f, server_tick(s)};
        sched_foreach(core_scheds(s->core), swalk, &w);
    }
}

/* ---- /v1/status: the dashboard's data ---------------------------------------- */

#define STATUS_TOPKEYS 8

static const char *key_state(int st)
{
    switch (st) {
    case QUEUE_KEY_PROCESSING: return "processing";
    case QUEUE_KEY_WAITING: return "waiting";
    case QUEUE_KEY_PARKED: return "parked";
    default: return "idle";
    }
}

typedef struct {
    ordo_buf_t *b;
    uint64_t now_ms;
    const core_t *core;
    bool first;
} status_walk_t;

/* One queue: its counts and its top keys by waiting messages, each with
 * Q.KEYINFO's state (why a key is stuck: in flight since when, at which
 * attempt, or parked). */
static void status_queue(void *arg, queue_t *q)
{
    status_walk_t *w = arg;
    ordo_buf_t *b = w->b;
    queue_info_t in;
    queue_info(q, &in);
    size_t n;
    const char *name = queue_name(q, &n);
    ordo_buf_puts(b, w->first ? "{" : ",{");
    w->first = false;
    cmd_http_json_field(b, "name", name, n);
    if (in.config.deadletter != NULL) {
        ordo_buf_puts(b, ",");
        cmd_http_json_field(b, "deadletter", in.config.deadletter, in.config.dl_len);
    }
    uint64_t oldest = queue_oldest_ready_id(q), at = oldest ? core_time_of_rev(w->core, oldest) : 0;
    ordo_buf_printf(b, ",\"oldest_ready_ms\":%llu",
                    (unsigned long long)(at != 0 && w->now_ms > at ? w->now_ms - at : 0));
    ordo_buf_printf(b, ",\"paused\":%s,\"paused_keys\":%zu,\"throttled_keys\":%zu", in.paused ? "true" : "false",
                    in.paused_keys, in.throttled_keys);
    ordo_buf_printf(b, ",\"waiting\":%zu,\"inflight\":%zu,\"delayed\":%zu,\"keys\":%zu,\"parked_keys\":%zu,"
                       "\"pushed\":%llu,\"acked\":%llu,\"nacked\":%llu,\"redelivered\":%llu,\"deadlettered\":%llu,"
                       "\"top\":[",
                    in.len.waiting, in.len.inflight, in.len.delayed, in.keys, in.parked_keys,
                    (unsigned long long)in.pushed, (unsigned long long)in.acked, (unsigned long long)in.nacked,
                    (unsigned long long)in.redelivered, (unsigned long long)in.deadlettered);
    queue_topkey_t top[STATUS_TOPKEYS];
    size_t nt = queue_topkeys(q, STATUS_TOPKEYS, top);
    for (size_t i = 0; i < nt; i++) {
        queue_keyinfo_t ki;
        queue_keyinfo(q, top[i].key, top[i].klen, &ki);
        ordo_buf_puts(b, i ? ",{" : "{");
        cmd_http_json_field(b, "key", top[i].key, top[i].klen);
        ordo_buf_printf(b, ",\"waiting\":%zu,\"state\":\"%s%s\",\"attempt\":%u,\"inflight_ms\":%llu}",
                        top[i].waiting, key_state(ki.state), ki.paused ? ", paused" : "", (unsigned)ki.attempt,
                        (unsigned long long)(ki.state == QUEUE_KEY_PROCESSING && w->now_ms > ki.since_ms
                                                 ? w->now_ms - ki.since_ms
                                                 : 0));
    }
    ordo_buf_puts(b, "]}");
}

typedef struct {
    ordo_buf_t *b;
    uint64_t now_ms;
    bool first;
} status_sched_t;

/* One schedule: its name, queue, when (every ms or the cron text), the
 * time to its next tick and its counts. */
static void status_sched(void *arg, const sched_view_t *v)
{
    status_sched_t *w = arg;
    ordo_buf_puts(w->b, w->first ? "{" : ",{");
    w->first = false;
    cmd_http_json_field(w->b, "name", v->name, v->nlen);
    ordo_buf_puts(w->b, ",");
    cmd_http_json_field(w->b, "queue", v->queue, v->qlen);
    if (v->spec.cron != NULL) {
        ordo_buf_puts(w->b, ",");
        cmd_http_json_field(w->b, "cron", v->spec.cron, v->spec.cron_len);
    }
    ordo_buf_printf(w->b, ",\"every_ms\":%llu,\"next_in_ms\":%llu,\"pushed\":%llu,\"skipped\":%llu}",
                    (unsigned long long)v->spec.every_ms,
                    (unsigned long long)(v->next_ms > w->now_ms ? v->next_ms - w->now_ms : 0),
                    (unsigned long long)v->pushed, (unsigned long long)v->skipped);
}

typedef struct {
    ordo_buf_t *locks, *elections;
    uint64_t now_ms;
} coord_walk_t;

static void status_coord(void *arg, const coord_item_t *it)
{
    coord_walk_t *w = arg;
    if (it->kind == COORD_ITEM_LOCK) {
        ordo_buf_puts(w->locks, w->locks->len ? ",{" : "{");
        cmd_http_json_field(w->locks, "name", it->name, it->nlen);
        ordo_buf_printf(w->locks, ",\"token\":%llu,\"remaining_ms\":%llu}", (unsigned long long)it->id,
                        (unsigned long long)(it->deadline_ms > w->now_ms ? it->deadline_ms - w->now_ms : 0));
    } else if (it->kind == COORD_ITEM_ELECT && it->id != 0) {
        ordo_buf_puts(w->elections, w->elections->len ? ",{" : "{");
        cmd_http_json_field(w->elections, "name", it->name, it->nlen);
        ordo_buf_printf(w->elections, ",\"term\":%llu,", (unsigned long long)it->id);
        cmd_http_json_field(w->elections, "value", it->value ? it->value : "", it->vlen);
        ordo_buf_puts(w->elections, "}");
    }
}

/* The dashboard lists at most this many connections (oldest first is not
 * promised: the order is net's list); the count is always whole. */
#define STATUS_CLIENTS_MAX 100

static void status_clients(server_t *s, ordo_buf_t *b)
{
    size_t n = 0;
    for (conn_t *k = conn_first(&s->net.conns); k != NULL && n < STATUS_CLIENTS_MAX; k = conn_next(k), n++) {
        ordo_buf_puts(b, n ? ",{" : "{");
        ordo_buf_printf(b, "\"id\":%llu,", (unsigned long long)k->id);
        cmd_http_json_field(b, "addr", k->addr, strlen(k->addr));
        if (k->name != NULL) {
            ordo_buf_puts(b, ",");
            cmd_http_json_field(b, "name", k->name, strlen(k->name));
        }
        ordo_buf_printf(b, ",\"kind\":\"%s\",\"age_ms\":%llu,\"idle_ms\":%llu,\"commands\":%llu,\"blocked\":%s,"
                           "\"watches\":%zu}",
                        k->http != NULL ? "http" : "resp",
                        (unsigned long long)(s->now_ms > k->created_ms ? s->now_ms - k->created_ms : 0),
                        (unsigned long long)(s->now_ms > k->last_cmd_ms ? s->now_ms - k->last_cmd_ms : 0),
                        (unsigned long long)k->commands, k->waiter != NULL ? "true" : "false", k->nwatches);
    }
}

/* Cluster mode: this member's view of the cluster and its members. */
static void status_cluster(server_t *s, ordo_buf_t *b)
{
    cluster_status_t ci;
    cluster_status(s, &ci);
    ordo_buf_printf(b, ",\"cluster\":{\"node_id\":%lld,\"leader_id\":%llu,\"role\":\"%s\",\"term\":%llu,"
                       "\"commit_index\":%llu,\"applied_index\":%llu,\"members\":[",
                    (long long)s->cfg.node_id, (unsigned long long)ci.leader_id, ci.role, (unsigned long long)ci.term,
                    (unsigned long long)ci.commit_index, (unsigned long long)ci.applied_index);
    cluster_member_t m;
    for (int i = 0; cluster_member(s, i, &m); i++) {
        ordo_buf_printf(b, "%s{\"id\":%llu,", i ? "," : "", (unsigned long long)m.id);
        cmd_http_json_field(b, "addr", m.addr, strlen(m.addr));
        ordo_buf_printf(b, ",\"role\":\"%s\",\"live\":%s,\"last_contact_ms\":%lld,\"lag_entries\":%lld}", m.role,
                        m.live ? "true" : "false", (long long)m.last_contact_ms, (long long)m.lag_entries);
    }
    ordo_buf_puts(b, "]}");
}

void cmd_http_status(conn_t *c, ordo_buf_t *b, uint64_t history_since)
{
    server_t *s = c->srv;
    log_stats_t ls = {0};
    if (s->persist.log != NULL)
        log_stats(s->persist.log, &ls);
    kv_stats_t kv;
    kv_stats(core_kv(s->core), &kv);
    ordo_buf_printf(b, "{\"version\":\"%s\",\"now_ms\":%llu,\"revision\":%llu,\"durable_revision\":%llu,",
                    ORDO_VERSION, (unsigned long long)s->now_ms, (unsigned long long)core_rev(s->core),
                    (unsigned long long)persist_durable_rev(s));
    const char *ro = server_readonly(s);
    if (ro != NULL) {
        cmd_http_json_field(b, "readonly", ro, strlen(ro));
        ordo_buf_puts(b, ",");
    }
    ordo_buf_printf(b, "\"clients\":%zu,\"blocked_clients\":%zu,\"watches\":%zu,\"keys\":%zu,"
                       "\"log\":{\"records\":%llu,\"batches\":%llu,\"syncs\":%llu,\"sync_us_sum\":%llu,\"bytes\":%llu,"
                       "\"pending_bytes\":%llu},"
                       "\"queues\":[",
                    s->net.conns.len, s->writer.block.blocked_clients, s->watches.count, kv.keys,
                    (unsigned long long)ls.records_written, (unsigned long long)ls.batches,
                    (unsigned long long)ls.syncs, (unsigned long long)ls.sync_us_sum, (unsigned long long)ls.bytes,
                    (unsigned long long)ls.pending_bytes);
    status_walk_t w = {b, server_tick(s), s->core, true};
    queue_set_foreach(core_queues(s->core), status_queue, &w);
    ordo_buf_t locks = ORDO_BUF_INIT, elections = ORDO_BUF_INIT;
    coord_walk_t cw = {&locks, &elections, s->now_ms};
    coord_snapshot(core_coord(s->core), status_coord, &cw);
    ordo_buf_puts(b, "],\"schedules\":[");
    status_sched_t sw = {b, s->now_ms, true};
    sched_foreach(core_scheds(s->core), status_sched, &sw);
    ordo_buf_puts(b, "],\"client_list\":[");
    status_clients(s, b);
    ordo_buf_puts(b, "],\"locks\":[");
    ordo_buf_append(b, locks.data ? locks.data : "", locks.len);
    ordo_buf_puts(b, "],\"elections\":[");
    ordo_buf_append(b, elections.data ? elections.data : "", elections.len);
    ordo_buf_puts(b, "]");
    if (cluster_enabled(s))
        status_cluster(s, b);
    if (history_since > 0) {
        ordo_buf_puts(b, ",\"history\":");
        cmd_history_json(s, b, history_since);
    }
    ordo_buf_puts(b, "}\n");
    ordo_buf_free(&locks);
    ordo_buf_free(&elections);
}
