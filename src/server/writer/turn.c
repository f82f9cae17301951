/*
 * turn.c -- the per-turn hook and cron; see turn.h. Also the writer's
 * clock (server_tick(), server.h): one reading per loop callback.
 */
#include "turn.h"

#include <assert.h>
#include <time.h>

#include "persist.h"

uint64_t server_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t server_tick(server_t *s)
{
    uint64_t now = server_now_ms();
    if (now > s->now_ms)
        s->now_ms = now;
    return s->now_ms;
}

void turn_run_resumed(server_t *s) { s->hooks.run_resumed(s); }

void turn_flush(server_t *s) { s->hooks.flush(s); }

static void on_check(uv_check_t *h)
{
    server_t *s = h->data;
    turn_run_resumed(s);
    turn_flush(s);
    persist_kick(s);
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
    uv_timer_init(s->loop, &s->writer.cron);
    s->writer.cron.data = s;
    uv_timer_start(&s->writer.cron, on_cron, TURN_CRON_INTERVAL_MS, TURN_CRON_INTERVAL_MS);
}

void turn_close_handles(server_t *s)
{
    uv_close((uv_handle_t *)&s->writer.cron, NULL);
    uv_close((uv_handle_t *)&s->writer.flusher, NULL);
}
