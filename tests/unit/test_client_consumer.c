/*
 * test_client_consumer.c -- the consumer runner (src/client/consumer.c)
 * against a fake queue server (client_fake.h): what the runner writes on
 * its connection, and in which order.
 *
 * The round trip: the runner's ack (plain, or the exactly-once EXEC that
 * holds it) is written together with the worker's next Q.PULL, so one
 * message costs one round trip. The fake proves it by answering an ack or
 * an EXEC only once the command after it has arrived: a runner that
 * waited for that reply before pulling would wait for ever (its call
 * timeout, a reconnect, a repeated ack: the counts below would be wrong). Synchronisation is by the protocol and by polling the runner's
 * counts with a deadline: no sleeps stand in for an event.
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

/* Messages the fake delivers, one per key (k0, k1, ...). */
#define MSGS 5
/* How long the test waits for the runner to ack them all. */
#define DEADLINE_MS 5000
/* The delivery token of message id: any value the ack must echo. */
#define TOKEN(id) (1000 + (id))

/* The fake's state, read by the test once the runner is stopped. */
static struct {
    atomic_int delivered;  /* messages handed out (ids 1..delivered) */
    atomic_int acked;      /* acks received with the right id and token */
    atomic_int owed;       /* acks or EXECs received and not yet answered */
    atomic_int bad;        /* anything out of order */
    int in_multi;          /* between MULTI and EXEC (the fake's thread only) */
    int queued_ack;        /* ... and a good Q.ACK is queued */
} Q;

/* The ack of the last message delivered, with its token? */
static int good_ack(const ordo_reply_t *cmd)
{
    if (cmd->n != 4)
        return 0;
    int id = atoi(cmd->elem[2]->str);
    return id == atomic_load(&Q.delivered) && atoi(cmd->elem[3]->str) == TOKEN(id) && atomic_load(&Q.owed) == 0;
}

/* HELLO 3; Q.PULL: first the reply owed to the ack or EXEC before it,
 * then the next message (or none); Q.ACK: checked and answered with the
 * next command only; MULTI, the queued commands (an INCRBY and the ack):
 * answered at once; EXEC: answered with the next command only. */
static int script_queue(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)f;
    if (conn_no != 1)
        atomic_fetch_add(&Q.bad, 1); /* the runner never had to reconnect */
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
    } else if (is(cmd, 0, "MULTI") && !Q.in_multi) {
        Q.in_multi = 1;
        Q.queued_ack = 0;
        say(fd, "+OK\r\n");
    } else if (is(cmd, 0, "EXEC") && Q.in_multi) {
        Q.in_multi = 0;
        if (Q.queued_ack)
            atomic_fetch_add(&Q.acked, 1);
        else
            atomic_fetch_add(&Q.bad, 1);
        atomic_store(&Q.owed, 2); /* EXEC's reply: the INCRBY's and the ack's */
    } else if (Q.in_multi) {
        if (is(cmd, 0, "Q.ACK"))
            Q.queued_ack = good_ack(cmd);
        else if (!is(cmd, 0, "INCRBY"))
            atomic_fetch_add(&Q.bad, 1);
        say(fd, "+QUEUED\r\n");
    } else if (is(cmd, 0, "Q.ACK")) {
        atomic_fetch_add(good_ack(cmd) ? &Q.acked : &Q.bad, 1);
        atomic_store(&Q.owed, 1);
    } else if (is(cmd, 0, "Q.PULL")) {
        int owed = atomic_exchange(&Q.owed, 0);
        if (owed == 1)
            say(fd, ":1\r\n");
        else if (owed == 2)
            say(fd, "*2\r\n:1\r\n:1\r\n");
        int id = atomic_load(&Q.delivered) + 1;
        if (id > MSGS || atomic_load(&Q.acked) != id - 1) {
            say(fd, "*0\r\n");
        } else {
            char m[128];
            snprintf(m, sizeof m, "*1\r\n*5\r\n:%d\r\n$2\r\nk%d\r\n$2\r\np%d\r\n:1\r\n:%d\r\n", id, id - 1, id - 1,
                     TOKEN(id));
            atomic_store(&Q.delivered, id);
            say(fd, m);
        }
    } else {
        atomic_fetch_add(&Q.bad, 1);
        say(fd, "-ERR unknown\r\n");
    }
    return 0;
}

typedef struct seen {
    atomic_int n;
    int64_t ids[MSGS];
} seen_t;

static int count_handler(void *arg, const ordo_msg_t *m, char **result, size_t *result_len)
{
    (void)result, (void)result_len;
    seen_t *s = arg;
    int i = atomic_load(&s->n);
    if (i < MSGS)
        s->ids[i] = m->id;
    atomic_store(&s->n, i + 1);
    return 0;
}

static int count_txn_handler(void *arg, ordo_client_t *c, const ordo_msg_t *m, ordo_txn_t *txn, char **result,
                             size_t *result_len)
{
    (void)c;
    assert_int_equal(ordo_txn_incrby(txn, "n", 1, 1), ORDO_OK);
    return count_handler(arg, m, result, result_len);
}

/* MSGS messages through a runner of one worker, plain (txn 0) or
 * exactly-once (txn 1): each handled once, in order, acked on the one
 * connection. */
static void run_against_the_fake(int txn)
{
    memset(&Q, 0, sizeof Q);
    fake_t f;
    fake_start(&f, script_queue, NULL);
    seen_t seen = { 0 };
    /* A call timeout below the deadline: a runner waiting for the ack's
     * reply would time out, reconnect (which the fake counts as bad) and
     * repeat the ack. Not much below: a stall of a loaded machine must not
     * reach it (200 ms could). */
    ordo_consumer_opts_t o = { .queue = "q", .concurrency = 1, .lease_ms = 60000, .pull_block_ms = 10,
                               .arg = &seen };
    if (txn)
        o.txn_handler = count_txn_handler;
    else
        o.handler = count_handler;
    o.conn.port = f.port;
    o.conn.call_timeout_ms = 2000;
    ordo_consumer_t *k;
    assert_int_equal(ordo_consumer_new(&k, &o), ORDO_OK);
    ordo_consumer_stats_t stats = { 0 };
    for (int64_t until = client_now_ms() + DEADLINE_MS; client_now_ms() < until;) {
        ordo_consumer_stats(k, &stats);
        if (stats.acked == MSGS)
            break;
        struct timespec ts = { 0, 5 * 1000000L };
        nanosleep(&ts, NULL); /* polling the counts, not waiting for an event */
    }
    ordo_consumer_free(k);
    fake_stop(&f);
    assert_int_equal(stats.acked, MSGS);
    assert_int_equal(atomic_load(&Q.acked), MSGS);
    assert_int_equal(atomic_load(&Q.bad), 0);
    assert_int_equal(atomic_load(&seen.n), MSGS);
    for (int i = 0; i < MSGS; i++)
        assert_int_equal(seen.ids[i], i + 1); /* in order, each once */
}

static void test_ack_carries_the_next_pull(void **st)
{
    (void)st;
    run_against_the_fake(0);
}

static void test_exactly_once_exec_carries_the_next_pull(void **st)
{
    (void)st;
    run_against_the_fake(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ack_carries_the_next_pull),
        cmocka_unit_test(test_exactly_once_exec_carries_the_next_pull),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
