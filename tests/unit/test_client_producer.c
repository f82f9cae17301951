/*
 * test_client_producer.c -- the producer (src/client/producer.c) against a
 * fake member that speaks just enough of ordod: Q.PUSH with ID (a repeated
 * id answers the first message's id and applies nothing), MULTI / EXEC
 * (the pushes queue; EXEC applies them all, or -EXECABORT if one was
 * refused as it was queued), and -NOTLEADER for commands that need the
 * state while it does not lead (MULTI does not: it reads no state).
 *
 * - A connection broken in the middle of a batch: the producer sends the
 *   whole batch again, in the same order and with the same ids, and
 *   reports every message exactly once, in order, with the id the server
 *   gave it.
 * - A member that wins an election in the middle of a batch: it refuses
 *   the batch's first push as a follower and would apply the later ones
 *   as the leader. Per-key order must hold in what it applies; with a
 *   plain pipeline of pushes it did not (the first push, resent, landed
 *   after a later push of its key).
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
#define KEYS 3

/* What the fake saw and did. Reset by member_reset(). */
static struct {
    char seen_ids[4][64][32];  /* every ID of every Q.PUSH, per connection (1..3) */
    atomic_int seen_n[4];
    int break_at;              /* connection 1 closes on reading its break_at-th push (0: never) */
    int follower_first;        /* connection 1 refuses its first state command (-NOTLEADER) */
    int conn;                  /* the connection the state below is for */
    int state_cmds;            /* commands needing the state seen on it */
    int multi, aborted, nqueued;
    int queued[64];            /* sequence numbers queued by MULTI */
    char queued_key[64][8];
    int applied[MSGS + 1];     /* per sequence number: applied (the fake's dedup) */
    int order[KEYS][MSGS];     /* per key, the sequence numbers in the order applied */
    int norder[KEYS];
} fk;

static void member_reset(int break_at, int follower_first)
{
    memset(&fk, 0, sizeof fk);
    fk.break_at = break_at;
    fk.follower_first = follower_first;
}

static int seq_of(const char *id)
{
    return atoi(strrchr(id, ':') + 1);
}

/* Apply a push (key, seq) unless its id was applied: the message id. */
static int apply_push(const char *key, int seq)
{
    assert_true(seq >= 1 && seq <= MSGS);
    if (!fk.applied[seq]) {
        fk.applied[seq] = 1;
        int k = key[1] - '0';
        fk.order[k][fk.norder[k]++] = seq;
    }
    return 1000 + seq;
}

static int script_member(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    char line[64];
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
        return 0;
    }
    if (conn_no != fk.conn) {
        fk.conn = conn_no;
        fk.state_cmds = fk.multi = fk.aborted = fk.nqueued = 0;
    }
    if (conn_no > 3)
        return -1;
    if (is(cmd, 0, "MULTI")) {
        fk.multi = 1;
        say(fd, "+OK\r\n");
        return 0;
    }
    int leads = !(fk.follower_first && conn_no == 1 && fk.state_cmds == 0);
    fk.state_cmds++;
    if (is(cmd, 0, "Q.PUSH") && cmd->n == 6) {
        int k = atomic_load(&fk.seen_n[conn_no]);
        snprintf(fk.seen_ids[conn_no][k], sizeof fk.seen_ids[0][0], "%s", cmd->elem[5]->str);
        atomic_store(&fk.seen_n[conn_no], k + 1);
        if (conn_no == 1 && fk.break_at && k + 1 >= fk.break_at)
            return -1; /* break mid-batch: this push gets no answer */
        if (!leads) {
            snprintf(line, sizeof line, "-NOTLEADER 127.0.0.1:%d\r\n", f->port);
            say(fd, line);
            fk.aborted |= fk.multi;
            return 0;
        }
        int seq = seq_of(cmd->elem[5]->str);
        if (fk.multi) {
            fk.queued[fk.nqueued] = seq;
            snprintf(fk.queued_key[fk.nqueued++], sizeof fk.queued_key[0], "%s", cmd->elem[2]->str);
            say(fd, "+QUEUED\r\n");
            return 0;
        }
        snprintf(line, sizeof line, ":%d\r\n", apply_push(cmd->elem[2]->str, seq));
        say(fd, line);
        return 0;
    }
    if (is(cmd, 0, "EXEC") && fk.multi) {
        fk.multi = 0;
        if (!leads) {
            snprintf(line, sizeof line, "-NOTLEADER 127.0.0.1:%d\r\n", f->port);
            say(fd, line);
        } else if (fk.aborted) {
            say(fd, "-EXECABORT Transaction discarded because of previous errors.\r\n");
        } else {
            snprintf(line, sizeof line, "*%d\r\n", fk.nqueued);
            say(fd, line);
            for (int i = 0; i < fk.nqueued; i++) {
                snprintf(line, sizeof line, ":%d\r\n", apply_push(fk.queued_key[i], fk.queued[i]));
                say(fd, line);
            }
        }
        fk.aborted = fk.nqueued = 0;
        return 0;
    }
    return -1;
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

/* Run MSGS messages over KEYS keys through a producer against the fake. */
static void run_producer(fake_t *f, reports_t *rep)
{
    ordo_producer_opts_t o = { .queue = "q", .producer_id = "pt", .linger_ms = 50, .report = on_report,
                               .report_arg = rep };
    o.conn.port = f->port;
    o.conn.backoff_min_ms = 1;
    o.conn.backoff_max_ms = 5;
    ordo_producer_t *p;
    assert_int_equal(ordo_producer_new(&p, &o), ORDO_OK);
    for (int i = 0; i < MSGS; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i % KEYS);
        assert_int_equal(ordo_producer_send(p, key, strlen(key), "x", 1, NULL, ORDO_WAIT_FOREVER, NULL), ORDO_OK);
    }
    assert_int_equal(ordo_producer_flush(p, 10000), ORDO_OK);
    assert_int_equal(ordo_producer_close(p, 0), 0);
    ordo_producer_free(p);
}

/* Every message applied once, each key's in sequence order, and reported
 * once, in order, with its id. */
static void assert_all_once_in_order(const reports_t *rep)
{
    for (int s = 1; s <= MSGS; s++)
        assert_true(fk.applied[s]);
    for (int k = 0; k < KEYS; k++)
        for (int i = 1; i < fk.norder[k]; i++)
            assert_true(fk.order[k][i - 1] < fk.order[k][i]);
    assert_int_equal(rep->n, MSGS);
    for (int i = 0; i < MSGS; i++) {
        assert_int_equal(rep->seq[i], (uint64_t)i + 1);
        assert_int_equal(rep->id[i], 1000 + i + 1);
    }
}

static void test_batch_cut_is_resent_with_same_ids(void **st)
{
    (void)st;
    fake_t f;
    member_reset(3, 0);
    fake_start(&f, script_member, NULL);
    reports_t rep = { 0 };
    run_producer(&f, &rep);
    fake_stop(&f);

    /* one batch on connection 1, cut as its third push was read */
    assert_int_equal(atomic_load(&fk.seen_n[1]), 3);
    assert_string_equal(fk.seen_ids[1][0], "pt:1");
    assert_string_equal(fk.seen_ids[1][2], "pt:3");
    /* connection 2 sends the batch again from its first message, in order
     * (nothing of a transaction cut before its EXEC applied) */
    assert_int_equal(atomic_load(&fk.seen_n[2]), MSGS);
    for (int i = 0; i < MSGS; i++) {
        char want[32];
        snprintf(want, sizeof want, "pt:%d", i + 1);
        assert_string_equal(fk.seen_ids[2][i], want);
    }
    assert_all_once_in_order(&rep);
}

static void test_leader_change_inside_a_batch_keeps_key_order(void **st)
{
    (void)st;
    fake_t f;
    member_reset(0, 1);
    fake_start(&f, script_member, NULL);
    reports_t rep = { 0 };
    run_producer(&f, &rep);
    fake_stop(&f);
    assert_true(atomic_load(&fk.seen_n[1]) >= 1);
    assert_all_once_in_order(&rep);
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
        cmocka_unit_test(test_leader_change_inside_a_batch_keeps_key_order),
        cmocka_unit_test(test_full_buffer_fails_or_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
