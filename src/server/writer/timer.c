/*
 * timer.c -- a deadline timer on the loop; see timer.h. The arming formula
 * (fire after at + 1 - now ms: once the clock is past the deadline) is
 * written here once.
 */
#include "timer.h"

#include <assert.h>

#include "server.h"

static void on_uv_timer(uv_timer_t *h)
{
    writer_timer_t *t = h->data;
    assert(t->on && t->armed);
    t->armed = false;
    t->fn(t);
}

void writer_timer_init(writer_timer_t *t, uv_loop_t *loop, const server_t *clock, writer_timer_fn fn, void *data)
{
    assert(!t->on && clock != NULL);
    t->clock = clock;
    uv_timer_init(loop, &t->uv);
    t->uv.data = t;
    t->fn = fn;
    t->data = data;
    t->at_ms = 0;
    t->armed = false;
    t->on = true;
}

void writer_timer_arm(writer_timer_t *t, uint64_t at_ms)
{
    if (!t->on || (t->armed && t->at_ms == at_ms))
        return;
    uint64_t now = server_clock_ms(t->clock);
    t->at_ms = at_ms;
    t->armed = true;
    /* libuv counts the delay from the loop's cached time, taken when this
     * loop turn began: refresh it, or a turn that ran long would make the
     * timer fire that much before its deadline. */
    uv_update_time(t->uv.loop);
    /* Due once the clock passes at_ms, never at it: + 1 (written so that
     * at_ms + 1 cannot wrap). A deadline already past waits 1 ms, not 0:
     * libuv 1.44 (Debian 12) runs its due timers in a loop that never
     * re-reads the clock, so a timer re-armed with 0 from its own callback
     * runs again at once, forever, and nothing else on the loop runs. */
    uv_timer_start(&t->uv, on_uv_timer, at_ms >= now ? at_ms - now + 1 : 1, 0);
}

void writer_timer_arm_earlier(writer_timer_t *t, uint64_t at_ms)
{
    if (t->armed && t->at_ms <= at_ms)
        return;
    writer_timer_arm(t, at_ms);
}

void writer_timer_stop(writer_timer_t *t)
{
    if (t->on && t->armed)
        uv_timer_stop(&t->uv);
    t->armed = false;
}

void writer_timer_close(writer_timer_t *t)
{
    if (!t->on)
        return;
    writer_timer_stop(t);
    uv_close((uv_handle_t *)&t->uv, NULL);
    t->on = false;
}
