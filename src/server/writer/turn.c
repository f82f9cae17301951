/*
 * turn.c -- the per-turn hook and cron; see turn.h. Also the writer's
 * clock (server_tick(), server.h): one reading per loop callback.
 *
 * The writer's clock is what records carry and deadlines are measured
 * in: ms since the epoch, advancing with CLOCK_MONOTONIC from a base. The
 * base is the wall clock at start, moved forward to the last record's time
 * after recovery if the wall clock is behind it. So a step of the wall
 * clock while ordod runs changes no deadline (a 30 s lock lasts 30 s of
 * real time), and record times never decrease, across restarts too. The
 * price: after a step, record times differ from the wall clock by the
 * step until the next start. A new cluster leader does not look at its
 * wall clock at all: it continues from the replicated time (the last
 * record's time plus what its monotonic clock measured since it saw that
 * record; writer/cluster.c), so a member whose wall clock runs an hour
 * ahead takes over every lock, lease, TTL and delay at its real length.
 */
#include "turn.h"

#include <assert.h>
#include <stdio.h>
#include <time.h>

#include "persist.h"

uint64_t server_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t server_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t server_clock_ms(const server_t *s)
{
    assert(s->clock_base_ms != 0);
    return s->clock_base_ms + (server_mono_ms() - s->clock_mono_base_ms);
}

uint64_t server_tick(server_t *s)
{
    if (s->clock_base_ms == 0) { /* the first reading: start from the wall clock */
        s->clock_base_ms = server_now_ms();
        s->clock_mono_base_ms = server_mono_ms();
    }
    uint64_t now = server_clock_ms(s);
    if (now > s->now_ms)
        s->now_ms = now;
    return s->now_ms;
}

void server_clock_resume(server_t *s, uint64_t last_record_ms)
{
    uint64_t now = server_tick(s);
    if (last_record_ms <= now)
        return;
    s->clock_base_ms += last_record_ms - now;
    s->now_ms = last_record_ms;
}

/* A member whose wall clock is further than this from the replicated
 * time says so when it takes over: its clock is not used, but what it
 * shows people (TIME, logs) will look off. */
#define CLOCK_SKEW_WARN_MS 1000u

void server_clock_continue(server_t *s, uint64_t at_ms)
{
    uint64_t wall = server_now_ms();
    uint64_t skew = wall > at_ms ? wall - at_ms : at_ms - wall;
    if (skew > CLOCK_SKEW_WARN_MS)
        fprintf(stderr, "ordod: this member's wall clock is %llu ms %s the cluster's time; deadlines follow the "
                        "cluster's time\n",
                (unsigned long long)skew, wall > at_ms ? "ahead of" : "behind");
    s->clock_base_ms = at_ms;
    s->clock_mono_base_ms = server_mono_ms();
    s->now_ms = at_ms;
}

void turn_run_resumed(server_t *s) { s->hooks.run_resumed(s); }

void turn_flush(server_t *s) { s->hooks.flush(s); }

/* Nanoseconds from the loop's clock to now: libuv reads its clock (to
 * the millisecond) at the start of each turn and right after each poll
 * for I/O returns, so this is the busy time since then, to within that
 * millisecond (never less). */
static uint64_t since_loop_clock(const server_t *s, uint64_t now_ns)
{
    uint64_t at = uv_now(s->loop) * 1000000u;
    return now_ns > at ? now_ns - at : 0;
}

/* Before each poll for I/O: the busy time of the turn's first part
 * (timers, closing handles). */
static void on_prepare(uv_prepare_t *h)
{
    server_t *s = h->data;
    s->writer.turn_pre_busy_ns = since_loop_clock(s, uv_hrtime());
}

/* At the end of a turn: its busy time is its first part plus the time
 * from the poll's return to now. One clock read each, so cheap enough for
 * every turn (the poll's own wait is never counted). */
static void turn_timed(server_t *s)
{
    writer_t *w = &s->writer;
    uint64_t now = uv_hrtime(), us = (w->turn_pre_busy_ns + since_loop_clock(s, now)) / 1000u;
    w->turn_pre_busy_ns = 0;
    if (us > s->stats.loop_turn_max_us)
        s->stats.loop_turn_max_us = us;
    if (us >= TURN_SLOW_MS * 1000u)
        s->stats.loop_turns_slow++;
    if (us >= TURN_LOG_MS * 1000u && now - w->turn_logged_ns >= 1000000000u) {
        w->turn_logged_ns = now;
        fprintf(stderr, "ordod: a loop turn was busy for %llu ms (every client waited)\n",
                (unsigned long long)(us / 1000u));
    }
}

static void on_check(uv_check_t *h)
{
    server_t *s = h->data;
    turn_run_resumed(s);
    turn_flush(s);
    /* The flush marked the turn's output (a raft barrier if it proposes no
     * entry), so the log is flushed after it; if the log committed the
     * batch on this thread, flush again to send what that released. */
    if (persist_kick(s))
        turn_flush(s);
    turn_timed(s);
}

static void on_cron(uv_timer_t *t)
{
    server_t *s = t->data;
    server_tick(s);
    persist_cron(s);
    s->hooks.net_cron(s);
    s->hooks.cmd_cron(s);
}

void turn_start(server_t *s)
{
    assert(s->hooks.run_resumed && s->hooks.flush && s->hooks.net_cron && s->hooks.cmd_cron);
    uv_check_init(s->loop, &s->writer.flusher);
    s->writer.flusher.data = s;
    uv_check_start(&s->writer.flusher, on_check);
    uv_prepare_init(s->loop, &s->writer.timer_prep);
    s->writer.timer_prep.data = s;
    uv_prepare_start(&s->writer.timer_prep, on_prepare);
    uv_timer_init(s->loop, &s->writer.cron);
    s->writer.cron.data = s;
    uv_timer_start(&s->writer.cron, on_cron, TURN_CRON_INTERVAL_MS, TURN_CRON_INTERVAL_MS);
}

void turn_close_handles(server_t *s)
{
    uv_close((uv_handle_t *)&s->writer.cron, NULL);
    uv_close((uv_handle_t *)&s->writer.flusher, NULL);
    uv_close((uv_handle_t *)&s->writer.timer_prep, NULL);
}
