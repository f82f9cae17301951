/*
 * test_srv_writer_queue.c -- the writer's side of the queues
 * (queue_wait.h): parked pullers, pushers and callers served when a
 * record through the door makes what they wait for appear, against a fake
 * log and fake hooks (writer_fake.h): no network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "writer_fake.h"

#include "writer/queue_wait.h"

#define Q "jobs"
#define QLEN (sizeof Q - 1)

/* A message pushed by a client; returns its id. */
static uint64_t push(fix_t *f, const char *key, const char *payload)
{
    apply_result_t res = submit(f, rec_qpush(Q, key, payload), WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_OK);
    assert_true(res.queue.id > 0);
    return res.queue.id;
}

/* One delivery, as a Q.PULL that found a message applies it. */
static apply_result_t deliver(fix_t *f, bool noack)
{
    record_t rec = {.type = REC_Q_DELIVER, .flags = noack ? REC_F_NOACK : 0,
                    .q_deliver = {.queue = Q, .qlen = QLEN}};
    apply_result_t res = submit(f, rec, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_OK);
    return res;
}

static void configure(fix_t *f, uint32_t maxlen)
{
    queue_config_t cfg;
    queue_config_defaults(&cfg);
    cfg.maxlen = maxlen;
    cfg.onfull = QUEUE_ONFULL_BLOCK;
    char blob[CORE_QCONFIG_BYTES];
    core_qconfig_encode(&cfg, blob);
    record_t rec = {.type = REC_Q_CONFIG, .q_config = {.queue = Q, .qlen = QLEN, .config = blob, .clen = sizeof blob}};
    assert_int_equal(submit(f, rec, WRITER_CLIENT, WRITER_APPLIED).status, AP_OK);
}

/* A parked puller is served when a push goes through the door, at the
 * settle that follows the command, not before. */
static void test_pull_served_at_settle(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    qwait_park_pull(&f->s, fix_client(f, 0), Q, QLEN, 1, 0, false, 0);
    assert_non_null(f->parked_as[0]);
    uint64_t id = push(f, "k", "hello");
    assert_int_equal(f->nanswers, 0);
    writer_settle(&f->s);
    assert_int_equal(f->nanswers, 1);
    fix_answer_t *a = &f->answers[0];
    assert_ptr_equal(a->client, fix_client(f, 0));
    assert_int_equal(a->kind, OUTCOME_MESSAGES);
    assert_int_equal(a->n, 1);
    assert_int_equal(a->msg_id, id);
    assert_string_equal(a->key, "k");
    assert_string_equal(a->payload, "hello");
    assert_null(f->parked_as[0]);
    /* The delivery is a record of its own, in the log after the push. */
    fix_kick(f);
    assert_int_equal(f->log.n, 2);
    assert_int_equal(f->log.types[0], REC_Q_PUSH);
    assert_int_equal(f->log.types[1], REC_Q_DELIVER);
    fix_free(f);
}

/* Two parked pullers, one message: the first to park gets it, the second
 * keeps waiting until the next. */
static void test_pull_fifo(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    qwait_park_pull(&f->s, fix_client(f, 0), Q, QLEN, 1, 0, false, 0);
    qwait_park_pull(&f->s, fix_client(f, 1), Q, QLEN, 1, 0, false, 0);
    uint64_t first = push(f, "a", "one");
    writer_settle(&f->s);
    assert_int_equal(f->nanswers, 1);
    assert_ptr_equal(f->answers[0].client, fix_client(f, 0));
    assert_int_equal(f->answers[0].msg_id, first);
    assert_non_null(f->parked_as[1]);
    size_t pullers, pushers;
    qwait_blocked(&f->s, Q, QLEN, &pullers, &pushers);
    assert_int_equal(pullers, 1);

    uint64_t second = push(f, "b", "two");
    writer_settle(&f->s);
    assert_int_equal(f->nanswers, 2);
    assert_ptr_equal(f->answers[1].client, fix_client(f, 1));
    assert_int_equal(f->answers[1].msg_id, second);
    fix_free(f);
}

/* A pull that runs out of time gets no messages. */
static void test_pull_timeout(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    uint64_t start = f->s.now_ms;
    qwait_park_pull(&f->s, fix_client(f, 0), Q, QLEN, 1, 0, false, 2);
    run_until(f, &f->nanswers, 1);
    assert_int_equal(f->answers[0].kind, OUTCOME_MESSAGES);
    assert_int_equal(f->answers[0].n, 0);
    assert_true(f->s.now_ms > start + 2); /* never early */
    assert_null(f->parked_as[0]);
    fix_free(f);
}

/* Q.CALL: a caller parked on a message's result is told its fate when
 * the ack with a result applies. */
static void test_call_result_on_ack(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    uint64_t id = push(f, "k", "work");
    qwait_park_result(&f->s, fix_client(f, 0), Q, QLEN, id, 0, false, true);
    apply_result_t d = deliver(f, false);
    assert_int_equal(d.queue.delivery.id, id);
    assert_int_equal(f->nanswers, 0);
    record_t ack = {.type = REC_Q_ACK, .flags = REC_F_RESULT,
                    .q_ack = {.queue = Q, .qlen = QLEN, .msg_id = id, .token = d.queue.delivery.token, .result = "done",
                              .rlen = 4}};
    assert_int_equal(submit(f, ack, WRITER_CLIENT, WRITER_APPLIED).status, AP_OK);
    assert_int_equal(f->nanswers, 1);
    fix_answer_t *a = &f->answers[0];
    assert_ptr_equal(a->client, fix_client(f, 0));
    assert_int_equal(a->kind, OUTCOME_FATE);
    assert_int_equal(a->fate_id, id);
    assert_int_equal(a->fate, QUEUE_FATE_DONE);
    assert_true(a->has_result);
    assert_string_equal(a->result, "done");
    assert_null(f->parked_as[0]);
    fix_free(f);
}

/* A NOACK delivery finishes the message with no result: its caller is
 * answered fate NONE. */
static void test_call_noack_fate_none(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    uint64_t id = push(f, "k", "work");
    qwait_park_result(&f->s, fix_client(f, 0), Q, QLEN, id, 0, false, true);
    deliver(f, true);
    assert_int_equal(f->nanswers, 1);
    assert_int_equal(f->answers[0].kind, OUTCOME_FATE);
    assert_int_equal(f->answers[0].fate_id, id);
    assert_int_equal(f->answers[0].fate, QUEUE_FATE_NONE);
    assert_false(f->answers[0].has_result);
    fix_free(f);
}

/* A Q.CALL that runs out of time is told TIMEOUT; a Q.RESULT BLOCK, nil. */
static void test_result_timeouts(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    uint64_t id = push(f, "k", "work");
    qwait_park_result(&f->s, fix_client(f, 0), Q, QLEN, id, 2, true, true);
    qwait_park_result(&f->s, fix_client(f, 1), Q, QLEN, id, 2, true, false);
    run_until(f, &f->nanswers, 2);
    for (size_t i = 0; i < 2; i++) {
        fix_answer_t *a = &f->answers[i];
        if (a->client == fix_client(f, 0)) {
            assert_int_equal(a->kind, OUTCOME_ERROR);
            assert_int_equal(strncmp(a->text, "TIMEOUT ", 8), 0);
        } else {
            assert_int_equal(a->kind, OUTCOME_NIL);
        }
    }
    fix_free(f);
}

/* A pusher parked on a full queue (ONFULL block) is given its message's
 * id once a delivery makes room, at the settle. */
static void test_push_served_when_room(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    configure(f, 1);
    push(f, "a", "first");
    record_t full = rec_qpush(Q, "b", "second");
    assert_int_equal(submit(f, full, WRITER_CLIENT, WRITER_APPLIED).status, AP_QFULL);
    qwait_park_push(&f->s, fix_client(f, 0), &full, false, 0, 0, false, false);
    writer_settle(&f->s);
    assert_int_equal(f->nanswers, 0); /* still full */

    deliver(f, false); /* the first message leaves the waiting set: room */
    assert_int_equal(f->nanswers, 0);
    writer_settle(&f->s);
    assert_int_equal(f->nanswers, 1);
    fix_answer_t *a = &f->answers[0];
    assert_int_equal(a->kind, OUTCOME_UINT);
    assert_true(a->uint > 0);
    /* The id is the message the parked push made: a pull gets it. */
    apply_result_t d = deliver(f, false);
    assert_int_equal(d.queue.delivery.id, a->uint);
    assert_int_equal(d.queue.delivery.plen, 6);
    assert_memory_equal(d.queue.delivery.payload, "second", 6);
    fix_free(f);
}

/* A dropped queue: callers and pushers are told NOTFOUND; pullers keep
 * waiting on the name. */
static void test_drop_answers_notfound(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    configure(f, 1);
    uint64_t id = push(f, "a", "first");
    qwait_park_result(&f->s, fix_client(f, 0), Q, QLEN, id, 0, false, true);
    record_t full = rec_qpush(Q, "b", "second");
    qwait_park_push(&f->s, fix_client(f, 1), &full, false, 0, 0, false, false);
    record_t drop = {.type = REC_Q_DROP, .q = {.queue = Q, .qlen = QLEN}};
    assert_int_equal(submit(f, drop, WRITER_CLIENT, WRITER_APPLIED).status, AP_OK);
    qwait_park_pull(&f->s, fix_client(f, 2), Q, QLEN, 1, 0, false, 0);
    writer_settle(&f->s);
    assert_int_equal(f->nanswers, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(f->answers[i].kind, OUTCOME_ERROR);
        assert_int_equal(strncmp(f->answers[i].text, "NOTFOUND ", 9), 0);
    }
    assert_null(f->parked_as[0]);
    assert_null(f->parked_as[1]);
    assert_non_null(f->parked_as[2]);
    /* The puller is served by a push to the queue of the same name. */
    push(f, "c", "later");
    writer_settle(&f->s);
    assert_int_equal(f->nanswers, 3);
    assert_ptr_equal(f->answers[2].client, fix_client(f, 2));
    assert_string_equal(f->answers[2].payload, "later");
    fix_free(f);
}

/* A parked puller whose delivery the log refuses is not told it got the
 * message: it is answered READONLY instead. */
static void test_pull_log_failed(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    qwait_park_pull(&f->s, fix_client(f, 0), Q, QLEN, 1, 0, false, 0);
    push(f, "k", "hello");
    f->log.failed = "fake log: the disk is gone";
    writer_settle(&f->s);
    assert_int_equal(f->nanswers, 0); /* not the message */
    run_until(f, &f->nanswers, 1);
    assert_int_equal(f->answers[0].kind, OUTCOME_ERROR);
    assert_int_equal(strncmp(f->answers[0].text, "READONLY ", 9), 0);
    fix_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_served_at_settle),
        cmocka_unit_test(test_pull_fifo),
        cmocka_unit_test(test_pull_timeout),
        cmocka_unit_test(test_call_result_on_ack),
        cmocka_unit_test(test_call_noack_fate_none),
        cmocka_unit_test(test_result_timeouts),
        cmocka_unit_test(test_push_served_when_room),
        cmocka_unit_test(test_drop_answers_notfound),
        cmocka_unit_test(test_pull_log_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
