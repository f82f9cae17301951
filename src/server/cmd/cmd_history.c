/*
 * cmd_history.c -- the dashboard's history, kept by the server: one sample
 * a second for the last hour and one a minute for the last day, so a page
 * opened now draws full charts at once (GET /v1/status?history=1), and
 * then asks only for what is new (?history=<the next second it wants>).
 *
 * A sample holds HIST_SERIES values (hist_names[] says which, in the JSON
 * too): commands per second by family (KV, queue, coordination, other, from
 * the command table's call counters and each command's help group), error
 * replies per second, the apply latency's p50 and p99 over the second (the
 * upper bound of writer_apply_bucket_ns' bucket that holds them, in
 * microseconds), log syncs per second and their mean latency, messages
 * waiting or in flight over all queues, the oldest ready message's age,
 * clients, and in cluster mode the largest follower lag in entries (-1:
 * not the leader, or a single server).
 *
 * Invariants: sec[] and min[] are rings, sec_n <= HIST_SEC_N and
 * min_n <= HIST_MIN_N samples, the oldest at (head - n) mod size; sample
 * times strictly increase within a ring. A minute's sample is the mean of
 * its seconds' samples (rates and gauges alike; for the latencies the
 * mean of the per-second percentiles), made when the first second of the
 * next minute is sampled. Memory is fixed at creation: (HIST_SEC_N +
 * HIST_MIN_N) samples of 4-byte values, about 300 KB. Sampling reads
 * counters and walks the queues once a second, on the loop (cmd_cron).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "core/queue.h"
#include "writer/apply.h"
#include "writer/cluster.h"
#include "log/log.h"

#define HIST_SEC_N 3600 /* an hour of seconds */
#define HIST_MIN_N 1440 /* a day of minutes */

enum {
    HS_KV, HS_QUEUE, HS_COORD, HS_OTHER, HS_ERRORS, HS_APPLY_P50_US, HS_APPLY_P99_US, HS_SYNCS, HS_SYNC_MEAN_US,
    HS_DEPTH, HS_OLDEST_READY_MS, HS_CLIENTS, HS_LAG_ENTRIES, HIST_SERIES
};
static const char *const hist_names[HIST_SERIES] = {
    "kv_per_s", "queue_per_s", "coord_per_s", "other_per_s", "errors_per_s", "apply_p50_us", "apply_p99_us",
    "syncs_per_s", "sync_mean_us", "queue_depth", "oldest_ready_ms", "clients", "lag_entries"};

typedef struct {
    uint64_t t_s; /* the second (or minute's first second) sampled, unix time */
    float v[HIST_SERIES];
} hist_sample_t;

enum { FAM_KV, FAM_QUEUE, FAM_COORD, FAM_OTHER, FAM_COUNT };

struct cmd_history_s {
    hist_sample_t sec[HIST_SEC_N];
    size_t sec_head, sec_n;
    hist_sample_t min[HIST_MIN_N];
    size_t min_head, min_n;
    bool primed;                       /* the counters below hold a first reading */
    uint64_t last_s;                   /* the last second sampled */
    uint64_t calls[FAM_COUNT], errors, syncs, sync_us, apply_hist[16];
    double acc[HIST_SERIES];           /* the current minute's seconds, summed */
    unsigned acc_n;
    uint64_t acc_minute;               /* its first second */
};

cmd_history_t *cmd_history_create(void)
{
    return calloc(1, sizeof(cmd_history_t));
}

void cmd_history_destroy(cmd_history_t *h) { free(h); }

static int family_of(const char *group)
{
    if (group == NULL)
        return FAM_OTHER;
    if (!strcmp(group, "string") || !strcmp(group, "generic") || !strcmp(group, "ordo-kv"))
        return FAM_KV;
    if (!strcmp(group, "ordo-queue") || !strcmp(group, "ordo-idempotent"))
        return FAM_QUEUE;
    if (!strcmp(group, "ordo-lock") || !strcmp(group, "ordo-elect") || !strcmp(group, "ordo-lease"))
        return FAM_COORD;
    return FAM_OTHER;
}

static void count_calls(void *arg, const cmd_def_t *d, uint64_t calls)
{
    uint64_t *fam = arg;
    fam[family_of(d->group)] += calls;
}

typedef struct {
    uint64_t now_ms, depth, oldest_ms;
    const core_t *core;
} qsum_t;

static void sum_queue(void *arg, queue_t *q)
{
    qsum_t *w = arg;
    queue_info_t in;
    queue_info(q, &in);
    w->depth += in.len.waiting + in.len.inflight;
    uint64_t id = queue_oldest_ready_id(q);
    uint64_t at = id != 0 ? core_time_of_rev(w->core, id) : 0;
    if (at != 0 && w->now_ms > at && w->now_ms - at > w->oldest_ms)
        w->oldest_ms = w->now_ms - at;
}

/* The upper bound (us) of the apply-latency bucket holding quantile q of
 * the applies counted in d[]; the overflow bucket says twice the last
 * bound. 0 with no applies. */
static float apply_quantile_us(const uint64_t *d, double q)
{
    uint64_t total = 0;
    for (size_t i = 0; i <= WRITER_APPLY_BUCKETS; i++)
        total += d[i];
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total + 0.5), seen = 0;
    if (want == 0)
        want = 1;
    for (size_t i = 0; i < WRITER_APPLY_BUCKETS; i++) {
        seen += d[i];
        if (seen >= want)
            return (float)writer_apply_bucket_ns[i] / 1000.0f;
    }
    return (float)writer_apply_bucket_ns[WRITER_APPLY_BUCKETS - 1] * 2 / 1000.0f;
}

static void push_min(cmd_history_t *h)
{
    if (h->acc_n == 0)
        return;
    hist_sample_t *m = &h->min[h->min_head];
    m->t_s = h->acc_minute;
    for (int i = 0; i < HIST_SERIES; i++)
        m->v[i] = (float)(h->acc[i] / h->acc_n);
    h->min_head = (h->min_head + 1) % HIST_MIN_N;
    if (h->min_n < HIST_MIN_N)
        h->min_n++;
    memset(h->acc, 0, sizeof h->acc);
    h->acc_n = 0;
}

/* The counters read at second now_s: the next sample's rates are the
 * change from these. */
static void remember(cmd_history_t *h, const server_t *s, uint64_t now_s, const uint64_t fam[FAM_COUNT],
                     const log_stats_t *ls)
{
    h->last_s = now_s;
    memcpy(h->calls, fam, sizeof h->calls);
    h->errors = s->stats.errors_total;
    h->syncs = ls->syncs;
    h->sync_us = ls->sync_us_sum;
    memcpy(h->apply_hist, s->stats.apply_hist, sizeof h->apply_hist);
}

void cmd_history_sample(server_t *s)
{
    cmd_history_t *h = s->history;
    if (h == NULL)
        return;
    uint64_t now_s = s->now_ms / 1000;
    if (h->primed && now_s <= h->last_s)
        return;
    uint64_t fam[FAM_COUNT] = {0};
    cmd_foreach_def_calls(s, count_calls, fam);
    log_stats_t ls = {0};
    if (s->persist.log != NULL)
        log_stats(s->persist.log, &ls);
    uint64_t errors = s->stats.errors_total;
    if (!h->primed) {
        h->primed = true;
        remember(h, s, now_s, fam, &ls);
        return;
    }
    double secs = (double)(now_s - h->last_s); /* > 0; more than 1 after a stalled loop */
    hist_sample_t smp = {.t_s = now_s};
    for (int f = 0; f < FAM_COUNT; f++)
        smp.v[HS_KV + f] = (float)((double)(fam[f] - h->calls[f]) / secs);
    smp.v[HS_ERRORS] = (float)((double)(errors - h->errors) / secs);
    uint64_t d[16];
    for (size_t i = 0; i < 16; i++)
        d[i] = s->stats.apply_hist[i] - h->apply_hist[i];
    smp.v[HS_APPLY_P50_US] = apply_quantile_us(d, 0.50);
    smp.v[HS_APPLY_P99_US] = apply_quantile_us(d, 0.99);
    uint64_t syncs = ls.syncs - h->syncs;
    smp.v[HS_SYNCS] = (float)((double)syncs / secs);
    smp.v[HS_SYNC_MEAN_US] = syncs ? (float)((double)(ls.sync_us_sum - h->sync_us) / (double)syncs) : 0;
    qsum_t q = {.now_ms = s->now_ms, .core = s->core};
    queue_set_foreach(core_queues(s->core), sum_queue, &q);
    smp.v[HS_DEPTH] = (float)q.depth;
    smp.v[HS_OLDEST_READY_MS] = (float)q.oldest_ms;
    smp.v[HS_CLIENTS] = (float)s->net.conns.len;
    smp.v[HS_LAG_ENTRIES] = -1;
    cluster_member_t m;
    for (int i = 0; cluster_enabled(s) && cluster_member(s, i, &m); i++)
        if (m.lag_entries >= 0 && m.lag_entries > smp.v[HS_LAG_ENTRIES])
            smp.v[HS_LAG_ENTRIES] = (float)m.lag_entries;

    h->sec[h->sec_head] = smp;
    h->sec_head = (h->sec_head + 1) % HIST_SEC_N;
    if (h->sec_n < HIST_SEC_N)
        h->sec_n++;
    uint64_t minute = now_s - now_s % 60;
    if (h->acc_n > 0 && minute != h->acc_minute)
        push_min(h);
    if (h->acc_n == 0)
        h->acc_minute = minute;
    for (int i = 0; i < HIST_SERIES; i++)
        h->acc[i] += smp.v[i];
    h->acc_n++;
    remember(h, s, now_s, fam, &ls);
}

/* One ring as columns: {"t":[...],"<series>":[...],...}, oldest first,
 * the samples from time `from` on. */
static void ring_json(ordo_buf_t *b, const hist_sample_t *ring, size_t size, size_t head, size_t n, uint64_t from)
{
    size_t first = (head + size - n) % size;
    while (n > 0 && ring[first].t_s < from) {
        first = (first + 1) % size;
        n--;
    }
    ordo_buf_puts(b, "{\"t\":[");
    for (size_t k = 0; k < n; k++)
        ordo_buf_printf(b, "%s%llu", k ? "," : "", (unsigned long long)ring[(first + k) % size].t_s);
    ordo_buf_puts(b, "]");
    for (int i = 0; i < HIST_SERIES; i++) {
        ordo_buf_printf(b, ",\"%s\":[", hist_names[i]);
        for (size_t k = 0; k < n; k++) {
            float v = ring[(first + k) % size].v[i];
            if (v == (float)(long long)v)
                ordo_buf_printf(b, "%s%lld", k ? "," : "", (long long)v);
            else
                ordo_buf_printf(b, "%s%.3g", k ? "," : "", (double)v);
        }
        ordo_buf_puts(b, "]");
    }
    ordo_buf_puts(b, "}");
}

void cmd_history_json(server_t *s, ordo_buf_t *b, uint64_t since)
{
    const cmd_history_t *h = s->history;
    assert(h != NULL);
    ordo_buf_puts(b, "{\"seconds\":");
    ring_json(b, h->sec, HIST_SEC_N, h->sec_head, h->sec_n, since);
    /* A minute's sample is made a minute after its time: two minutes back
     * from since, so a poller that asks from its last second gets it (and
     * drops the one it has, by time). */
    ordo_buf_puts(b, ",\"minutes\":");
    ring_json(b, h->min, HIST_MIN_N, h->min_head, h->min_n, since > 120 ? since - 120 : 0);
    ordo_buf_puts(b, "}");
}
