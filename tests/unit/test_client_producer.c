/*
 * test_client_producer.c -- the producer (src/client/producer.c) against a
 * fake server that breaks the first connection in the middle of a
 * pipelined batch: it answers two pushes, then closes without answering
 * the rest. The producer must send the unanswered pushes again, in the
 * same order and with the same ids (so a real server would drop the ones
 * it had already applied), and report every message exactly once, in
 * order, with the id the server gave it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_int.h"
#include "client_fake.h"

#define MSGS 20

/* What the fake saw: every ID argument of every Q.PUSH, per connection. */
static char seen_ids[4][64][32];
static atomic_int seen_n[4];

static int script_push(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)f;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
        return 0;
    }
    if (!is(cmd, 0, "Q.PUSH") || cmd->n != 6 || conn_no > 3)
        return -1;
    int k = atomic_load(&seen_n[conn_no]);
    snprintf(seen_ids[conn_no][k], sizeof seen_ids[0][0], "%s", cmd->elem[5]->str);
    atomic_store(&seen_n[conn_no], k + 1);
    if (conn_no == 1 && k >= 2)
        return -1; /* break mid-batch: the third push gets no answer */
    /* the message id a server would give: 1000 + the sequence number */
    const char *colon = strrchr(cmd->elem[5]->str, ':');
    char line[32];
    snprintf(line, sizeof line, ":%d\r\n", 1000 + atoi(colon + 1));
    say(fd, line);
    return 0;
}

typedef struct reports {
    int n;
    uint64_t seq[MSGS];
    int64_t id[MSGS];
} reports_t;

static void on_report(void *arg, const ordo_delivery_t *d)
{
    reports_t *r = arg;
    assert_true(r->n < MSGS);
    assert_int_equal(d->err, ORDO_OK);
    r->seq[r->n] = d->seq;
    r->id[r->n] = d->id;
    r->n++;
}

static void test_batch_cut_is_resent_with_same_ids(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_push, NULL);
    reports_t rep = { 0 };
    ordo_producer_opts_t o = { .queue = "q", .producer_id = "pt", .linger_ms = 50, .report = on_report,
                               .report_arg = &rep };
    o.conn.port = f.port;
    o.conn.backoff_min_ms = 1;
    o.conn.backoff_max_ms = 5;
    ordo_producer_t *p;
    assert_int_equal(ordo_producer_new(&p, &o), ORDO_OK);
    for (int i = 0; i < MSGS; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i % 3);
        assert_int_equal(ordo_producer_send(p, key, strlen(key), "x", 1, NULL, ORDO_WAIT_FOREVER, NULL), ORDO_OK);
    }
    assert_int_equal(ordo_producer_flush(p, 10000), ORDO_OK);
    assert_int_equal(ordo_producer_close(p, 0), 0);
    ordo_producer_free(p);
    fake_stop(&f);

    /* one batch on connection 1, cut after the third push was read */
    assert_int_equal(atomic_load(&seen_n[1]), 3);
    assert_string_equal(seen_ids[1][0], "pt:1");
    assert_string_equal(seen_ids[1][2], "pt:3");
    /* connection 2 starts again at the first unanswered one, in order */
    assert_int_equal(atomic_load(&seen_n[2]), MSGS - 2);
    for (int i = 0; i < MSGS - 2; i++) {
        char want[32];
        snprintf(want, sizeof want, "pt:%d", i + 3);
        assert_string_equal(seen_ids[2][i], want);
    }
    /* every message reported once, in order, with its id */
    assert_int_equal(rep.n, MSGS);
    for (int i = 0; i < MSGS; i++) {
        assert_int_equal(rep.seq[i], (uint64_t)i + 1);
        assert_int_equal(rep.id[i], 1000 + i + 1);
    }
}

static void test_full_buffer_fails_or_times_out(void **st)
{
    (void)st;
    /* No server (port 1): nothing is ever reported, so the buffer fills. */
    ordo_producer_opts_t o = { .queue = "q", .buffer_max = 2 };
    o.conn.port = 1;
    ordo_producer_t *p;
    assert_int_equal(ordo_producer_new(&p, &o), ORDO_OK);
    assert_int_equal(ordo_producer_send(p, "a", 1, "x", 1, NULL, 0, NULL), ORDO_OK);
    assert_int_equal(ordo_producer_send(p, "a", 1, "x", 1, NULL, 0, NULL), ORDO_OK);
    assert_int_equal(ordo_producer_send(p, "a", 1, "x", 1, NULL, 0, NULL), ORDO_EFULL);
    assert_int_equal(ordo_producer_send(p, "a", 1, "x", 1, NULL, 30, NULL), ORDO_ETIMEDOUT);
    assert_int_equal(ordo_producer_buffered(p), 2);
    assert_int_equal(ordo_producer_flush(p, 20), ORDO_ETIMEDOUT);
    assert_int_equal(ordo_producer_close(p, 0), 2); /* no spill file: two lost, and said so */
    /* Closed, not freed: sends are refused, queries still answer, and a
     * second close says the same. */
    assert_int_equal(ordo_producer_send(p, "a", 1, "x", 1, NULL, 0, NULL), ORDO_ESTOPPED);
    assert_int_equal(ordo_producer_buffered(p), 2);
    assert_int_equal(ordo_producer_flush(p, 0), ORDO_ESTOPPED);
    assert_int_equal(ordo_producer_close(p, 0), 2);
    ordo_producer_free(p);
    ordo_producer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_cut_is_resent_with_same_ids),
        cmocka_unit_test(test_full_buffer_fails_or_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
