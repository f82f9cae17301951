/*
 * test_srv_timer.c -- the writer's deadline timer (writer/timer.h) on a
 * real libuv loop: a deadline fires only once the writer's clock is past it,
 * a deadline already past fires at once, a timer re-armed for a past
 * deadline from its own callback lets the loop turn in between, arm_earlier
 * keeps an earlier arming, stop and close disarm, and arming a closed or
 * never initialised timer does nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "server.h"
#include "writer/timer.h"

/* A server with nothing but its writer's clock started: the clock the
 * timers read. */
static server_t *test_clock(void)
{
    static server_t *s;
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        server_tick(s);
    }
    return s;
}

typedef struct {
    int fired;
    uint64_t fired_at_ms;    /* the writer's clock in the callback */
    bool armed_in_cb;        /* t->armed as the callback saw it */
} probe_t;

static void on_fire(writer_timer_t *t)
{
    probe_t *p = t->data;
    p->fired++;
    p->fired_at_ms = server_clock_ms(test_clock());
    p->armed_in_cb = t->armed;
}

static void run_until_idle(uv_loop_t *loop) { uv_run(loop, UV_RUN_DEFAULT); }

/* A new loop with t on it, initialised and unarmed, reporting to p (zeroed). */
static void open_loop(uv_loop_t *loop, writer_timer_t *t, probe_t *p)
{
    uv_loop_init(loop);
    *t = (writer_timer_t){0};
    *p = (probe_t){0};
    writer_timer_init(t, loop, test_clock(), on_fire, p);
}

static void close_loop(uv_loop_t *loop, writer_timer_t *t)
{
    writer_timer_close(t);
    run_until_idle(loop);
    assert_int_equal(uv_loop_close(loop), 0);
}

static void test_fires_once_past_the_deadline(void **state)
{
    (void)state;
    uv_loop_t loop;
    writer_timer_t t;
    probe_t p;
    open_loop(&loop, &t, &p);
    uint64_t at = server_clock_ms(test_clock()) + 20;
    writer_timer_arm(&t, at);
    assert_true(t.armed);
    run_until_idle(&loop);
    assert_int_equal(p.fired, 1);
    assert_true(p.fired_at_ms > at); /* past it, never at or before it */
    assert_false(p.armed_in_cb);     /* disarmed before the callback runs */
    close_loop(&loop, &t);
}

static void test_past_deadline_fires_at_once(void **state)
{
    (void)state;
    uv_loop_t loop;
    writer_timer_t t;
    probe_t p;
    open_loop(&loop, &t, &p);
    uint64_t before = server_clock_ms(test_clock());
    writer_timer_arm(&t, 0); /* "at once" (block.c's read-only case) */
    run_until_idle(&loop);
    assert_int_equal(p.fired, 1);
    assert_true(p.fired_at_ms - before < 1000);
    writer_timer_arm(&t, UINT64_MAX); /* no wrap to "at once" */
    assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 1);
    assert_int_equal(p.fired, 1);
    close_loop(&loop, &t);
}

/* A timer re-armed for a passed deadline from its own callback (what a
 * part does whose deadline nobody ended yet) must not run again within the
 * same loop turn: libuv 1.44 would call it forever, and nothing else on the
 * loop -- sockets, signals -- would ever run. A check handle counts loop
 * turns; the callback gives up after SPIN_LIMIT firings in one turn. */
enum { SPIN_LIMIT = 1000, REARMS = 5 };

typedef struct {
    int fired;
    int in_this_turn;       /* firings since the check handle last ran */
    int most_in_a_turn;
    int turns;
} spin_probe_t;

static void on_turn(uv_check_t *h)
{
    spin_probe_t *p = h->data;
    p->turns++;
    p->in_this_turn = 0;
}

static void on_fire_rearm_past(writer_timer_t *t)
{
    spin_probe_t *p = t->data;
    p->fired++;
    if (++p->in_this_turn > p->most_in_a_turn)
        p->most_in_a_turn = p->in_this_turn;
    if (p->fired < REARMS && p->in_this_turn < SPIN_LIMIT)
        writer_timer_arm(t, 1); /* long past */
}

static void test_rearmed_past_deadline_lets_the_loop_turn(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    spin_probe_t p = {0};
    writer_timer_t t = {0};
    writer_timer_init(&t, &loop, test_clock(), on_fire_rearm_past, &p);
    uv_check_t turn;
    uv_check_init(&loop, &turn);
    turn.data = &p;
    uv_check_start(&turn, on_turn);
    uv_unref((uv_handle_t *)&turn); /* the timer alone keeps the loop running */
    writer_timer_arm(&t, 1);
    run_until_idle(&loop);
    assert_int_equal(p.fired, REARMS);
    assert_int_equal(p.most_in_a_turn, 1);
    assert_true(p.turns >= REARMS);
    uv_close((uv_handle_t *)&turn, NULL);
    close_loop(&loop, &t);
}

static void test_arm_earlier_and_stop(void **state)
{
    (void)state;
    uv_loop_t loop;
    writer_timer_t t;
    probe_t p;
    open_loop(&loop, &t, &p);
    uint64_t now = server_clock_ms(test_clock());
    writer_timer_arm_earlier(&t, now + 10);
    writer_timer_arm_earlier(&t, now + 100000); /* later: kept at now + 10 */
    assert_int_equal(t.at_ms, now + 10);
    writer_timer_arm_earlier(&t, now + 5); /* earlier: re-armed */
    assert_int_equal(t.at_ms, now + 5);
    writer_timer_arm(&t, now + 100000); /* arm replaces, later or not */
    assert_int_equal(t.at_ms, now + 100000);
    writer_timer_stop(&t);
    assert_false(t.armed);
    run_until_idle(&loop); /* nothing keeps the loop alive */
    assert_int_equal(p.fired, 0);
    close_loop(&loop, &t);
}

static void test_closed_or_uninitialised_is_a_no_op(void **state)
{
    (void)state;
    writer_timer_t never = {0};
    writer_timer_arm(&never, 1);
    writer_timer_arm_earlier(&never, 1);
    writer_timer_stop(&never);
    writer_timer_close(&never);
    assert_false(never.armed);
    assert_false(never.on);

    uv_loop_t loop;
    writer_timer_t t;
    probe_t p;
    open_loop(&loop, &t, &p);
    writer_timer_arm(&t, server_clock_ms(test_clock()) + 100000);
    writer_timer_close(&t);
    writer_timer_arm(&t, 0);
    assert_false(t.armed);
    run_until_idle(&loop);
    assert_int_equal(p.fired, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fires_once_past_the_deadline),
        cmocka_unit_test(test_past_deadline_fires_at_once),
        cmocka_unit_test(test_rearmed_past_deadline_lets_the_loop_turn),
        cmocka_unit_test(test_arm_earlier_and_stop),
        cmocka_unit_test(test_closed_or_uninitialised_is_a_no_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
