/*
 * test_srv_schedule.c -- schedule.h: cron parsing and next ticks on known
 * dates (UTC), intervals, the tick rule (once per tick, missed ticks fire
 * once or are skipped), the add record's value, and a snapshot's load.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "core/schedule.h"

/* 2026-11-27 11:21:00 UTC, a Friday. */
#define T0 1795778460000ull
#define MIN 60000ull
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)

static uint64_t cron_next(const char *expr, uint64_t t)
{
    sched_spec_t s = {.cron = expr, .cron_len = strlen(expr)};
    assert_null(sched_spec_valid(&s));
    return sched_next_after(&s, t);
}

static void test_cron(void **state)
{
    (void)state;
    assert_int_equal(cron_next("* * * * *", T0), T0 + MIN);           /* strictly after */
    assert_int_equal(cron_next("* * * * *", T0 + 1), T0 + MIN);
    assert_int_equal(cron_next("*/15 * * * *", T0), T0 + 9 * MIN);     /* 11:30 */
    assert_int_equal(cron_next("0 12 * * *", T0), T0 + 39 * MIN);      /* 12:00 today */
    assert_int_equal(cron_next("0 9 * * *", T0), T0 - 141 * MIN + DAY); /* 09:00 tomorrow */
    /* Sunday (0 or 7): 2026-11-29 00:00. */
    uint64_t sunday = T0 - (11 * HOUR + 21 * MIN) + 2 * DAY;
    assert_int_equal(cron_next("0 0 * * 0", T0), sunday);
    assert_int_equal(cron_next("0 0 * * 7", T0), sunday);
    /* Both day fields restricted: either matches (the 1st, or a Sunday). */
    assert_int_equal(cron_next("0 0 1 * 0", T0), sunday);
    /* 1 December 00:00, then a leap day: 2028-02-29 00:00. */
    uint64_t dec1 = T0 - (11 * HOUR + 21 * MIN) + 4 * DAY;
    assert_int_equal(cron_next("0 0 1 12 *", T0), dec1);
    assert_int_equal(cron_next("0 0 29 2 *", T0), 1835395200000ull);
    assert_int_equal(cron_next("5-10/5 3,4 * * *", T0), T0 - (8 * HOUR + 16 * MIN) + DAY); /* 03:05 */
    /* Never: 30 February. */
    sched_spec_t s = {.cron = "0 0 30 2 *", .cron_len = 10};
    assert_null(sched_spec_valid(&s));
    assert_int_equal(sched_next_after(&s, T0), 0);
    const char *bad[] = {"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *",
                         "* * * * 8", "*/0 * * * *", "5-1 * * * *", "1, * * * *", "a * * * *"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sched_spec_t b = {.cron = bad[i], .cron_len = strlen(bad[i])};
        if (sched_spec_valid(&b) == NULL)
            fail_msg("cron '%s' was accepted", bad[i]);
    }
    sched_spec_t both = {.every_ms = 100, .cron = "* * * * *", .cron_len = 9};
    assert_non_null(sched_spec_valid(&both));
    sched_spec_t tiny = {.every_ms = 5};
    assert_non_null(sched_spec_valid(&tiny));
}

static void test_ticks(void **state)
{
    (void)state;
    sched_set_t *s = sched_set_create();
    sched_view_t v = {.name = "s", .nlen = 1, .queue = "q", .qlen = 1, .key = "k", .klen = 1, .payload = "p",
                      .plen = 1, .spec = {.every_ms = 100, .start_ms = 1000}};
    sched_add(s, &v, 1050);
    sched_view_t due;
    assert_true(sched_next_due(s, &due));
    assert_int_equal(due.next_ms, 1100);
    bool push;
    assert_int_equal(sched_tick(s, "s", 1, 1100, 1100, &push), 0); /* due only past it */
    assert_int_equal(sched_tick(s, "s", 1, 1100, 1101, &push), 1);
    assert_true(push);
    assert_int_equal(sched_tick(s, "s", 1, 1100, 1102, &push), 0); /* once */
    assert_true(sched_next_due(s, &due));
    assert_int_equal(due.next_ms, 1200);
    /* Missed by far: fires once under fire, then the first tick after now. */
    assert_int_equal(sched_tick(s, "s", 1, 1200, 9050, &push), 1);
    assert_true(push);
    sched_get(s, "s", 1, &due);
    assert_int_equal(due.next_ms, 9100);
    /* Under skip, a missed tick pushes nothing and counts as skipped. */
    v.spec.missed = SCHED_MISSED_SKIP;
    sched_add(s, &v, 9050); /* replaces, counters from 0 */
    assert_int_equal(sched_tick(s, "s", 1, 9100, 9100 + SCHED_LATE_MS, &push), 1);
    assert_true(push); /* late, but within SCHED_LATE_MS: on time */
    sched_get(s, "s", 1, &due);
    assert_int_equal(sched_tick(s, "s", 1, due.next_ms, due.next_ms + SCHED_LATE_MS + 1, &push), 1);
    assert_false(push);
    sched_get(s, "s", 1, &due);
    assert_int_equal(due.skipped, 1);
    sched_count_outcome(s, "s", 1, true);
    sched_get(s, "s", 1, &due);
    assert_int_equal(due.pushed, 1);
    assert_int_equal(sched_count(s), 1);
    assert_int_equal(sched_del(s, "s", 1), 1);
    assert_int_equal(sched_del(s, "s", 1), 0);
    assert_false(sched_next_due(s, &due));
    sched_set_destroy(s);
}

static void test_encode_and_load(void **state)
{
    (void)state;
    sched_spec_t spec = {.cron = "*/5 * * * *", .cron_len = 11, .missed = SCHED_MISSED_SKIP};
    ordo_buf_t b = ORDO_BUF_INIT;
    sched_encode(&spec, "payload", 7, &b);
    sched_spec_t back;
    const char *p;
    size_t plen;
    assert_int_equal(sched_decode(b.data, b.len, &back, &p, &plen), 0);
    assert_int_equal(back.cron_len, 11);
    assert_memory_equal(back.cron, "*/5 * * * *", 11);
    assert_int_equal(back.missed, SCHED_MISSED_SKIP);
    assert_int_equal(plen, 7);
    assert_memory_equal(p, "payload", 7);
    assert_int_equal(sched_decode(b.data, 10, &back, &p, &plen), -1);
    b.data[17] = 0x7f; /* a cron length past the end */
    assert_int_equal(sched_decode(b.data, b.len, &back, &p, &plen), -1);
    ordo_buf_free(&b);
    sched_set_t *s = sched_set_create();
    sched_view_t v = {.name = "n", .nlen = 1, .queue = "q", .qlen = 1, .spec = spec, .next_ms = 777, .pushed = 3,
                      .skipped = 4};
    sched_load(s, &v);
    sched_view_t got;
    assert_true(sched_get(s, "n", 1, &got));
    assert_int_equal(got.next_ms, 777);
    assert_int_equal(got.pushed, 3);
    assert_int_equal(got.skipped, 4);
    sched_set_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cron),
        cmocka_unit_test(test_ticks),
        cmocka_unit_test(test_encode_and_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
