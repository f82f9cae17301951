/*
 * test_srv_writer_coord.c -- the writer's side of leases, locks and
 * elections (coord_wait.h): parked lock waiters served one per release
 * with a record of their own, waiters whose lease ended, ELECT.OBSERVE
 * observers, against a fake log and fake hooks (writer_fake.h): no
 * network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "writer_fake.h"

#include "writer/coord_wait.h"

#define LOCK "L"
#define ELECT "E"

/* Acquire the lock for a client through the door; returns the token. */
static uint64_t acquire(fix_t *f, uint64_t lease)
{
    record_t rec = {.type = REC_LOCK_ACQUIRE, .lock = {.name = LOCK, .nlen = 1, .ttl_ms = 600000, .lease_id = lease}};
    apply_result_t res = submit(f, rec, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_OK);
    return res.coord.granted;
}

static void release(fix_t *f, uint64_t token)
{
    record_t rec = {.type = REC_LOCK_RELEASE, .lock = {.name = LOCK, .nlen = 1, .token = token}};
    assert_int_equal(submit(f, rec, WRITER_CLIENT, WRITER_APPLIED).status, AP_OK);
}

static void park_lock(fix_t *f, int client, uint64_t lease)
{
    char refusal[WRITER_REFUSAL_MAX] = "";
    assert_true(coord_wait_park(&f->s, fix_client(f, client), COORD_WAIT_LOCK, LOCK, 1, 0, 600000, lease, false, NULL,
                                0, refusal, sizeof refusal));
}

/* A parked lock waiter is granted the lock (its token) when the holder
 * releases it: the grant is a record of its own; one release wakes one
 * waiter. */
static void test_lock_waiter_granted_on_release(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    uint64_t held = acquire(f, 0);
    park_lock(f, 0, 0);
    park_lock(f, 1, 0);
    assert_int_equal(coord_wait_len(&f->s, COORD_WAIT_LOCK, LOCK, 1), 2);
    release(f, held);
    assert_int_equal(f->nanswers, 1);
    fix_answer_t *a = &f->answers[0];
    assert_ptr_equal(a->client, fix_client(f, 0));
    assert_int_equal(a->kind, OUTCOME_UINT);
    assert_true(a->uint > held);
    assert_null(f->parked_as[0]);
    assert_non_null(f->parked_as[1]);
    /* The token holds the lock: releasing it serves the next waiter. */
    release(f, a->uint);
    assert_int_equal(f->nanswers, 2);
    assert_ptr_equal(f->answers[1].client, fix_client(f, 1));
    assert_int_equal(f->answers[1].kind, OUTCOME_UINT);
    fix_kick(f);
    assert_int_equal(f->log.n, 5);
    assert_int_equal(f->log.types[1], REC_LOCK_RELEASE);
    assert_int_equal(f->log.types[2], REC_LOCK_ACQUIRE); /* the grant, right after the release */
    fix_free(f);
}

/* A waiter whose lease ended while it waited is told NOTFOUND when the
 * lock frees, and the next waiter gets the lock. */
static void test_lock_waiter_lease_gone(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    record_t grant = {.type = REC_LEASE_GRANT, .lease = {.ttl_ms = 600000}};
    apply_result_t g = submit(f, grant, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(g.status, AP_OK);
    uint64_t lease = g.coord.granted;
    uint64_t held = acquire(f, 0);
    park_lock(f, 0, lease);
    park_lock(f, 1, 0);
    record_t revoke = {.type = REC_LEASE_REVOKE, .lease = {.lease_id = lease}};
    assert_int_equal(submit(f, revoke, WRITER_CLIENT, WRITER_APPLIED).status, AP_OK);
    assert_int_equal(f->nanswers, 0);
    release(f, held);
    assert_int_equal(f->nanswers, 2);
    assert_ptr_equal(f->answers[0].client, fix_client(f, 0));
    assert_int_equal(f->answers[0].kind, OUTCOME_ERROR);
    assert_int_equal(strncmp(f->answers[0].text, "NOTFOUND ", 9), 0);
    assert_ptr_equal(f->answers[1].client, fix_client(f, 1));
    assert_int_equal(f->answers[1].kind, OUTCOME_UINT);
    fix_free(f);
}

/* A lock waiter with WAIT gets nil once it runs out; past
 * max-memory-bytes or read-only, a newcomer is refused instead of parked. */
static void test_lock_waiter_timeout_and_refusals(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    acquire(f, 0);
    char refusal[WRITER_REFUSAL_MAX] = "";
    assert_true(coord_wait_park(&f->s, fix_client(f, 0), COORD_WAIT_LOCK, LOCK, 1, 2, 600000, 0, false, NULL, 0,
                                refusal, sizeof refusal));
    run_until(f, &f->nanswers, 1);
    assert_int_equal(f->answers[0].kind, OUTCOME_NIL);
    assert_int_equal(coord_wait_len(&f->s, COORD_WAIT_LOCK, LOCK, 1), 0);

    f->s.cfg.max_memory_bytes = 1;
    assert_false(coord_wait_park(&f->s, fix_client(f, 1), COORD_WAIT_LOCK, LOCK, 1, 0, 600000, 0, false, NULL, 0,
                                 refusal, sizeof refusal));
    assert_int_equal(strncmp(refusal, "LIMIT ", 6), 0);
    f->s.cfg.max_memory_bytes = 0;
    f->log.failed = "fake log: the disk is gone";
    submit(f, rec_put("k", "v"), WRITER_CLIENT, WRITER_UNSTORED);
    assert_false(coord_wait_park(&f->s, fix_client(f, 1), COORD_WAIT_LOCK, LOCK, 1, 0, 600000, 0, false, NULL, 0,
                                 refusal, sizeof refusal));
    assert_int_equal(strncmp(refusal, "READONLY ", 9), 0);
    assert_null(f->parked_as[1]);
    fix_free(f);
}

/* A campaign parked behind a leader wins when the leader resigns. */
static void test_campaign_waiter_wins_on_resign(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    record_t camp = {.type = REC_ELECT_CAMPAIGN,
                     .elect = {.name = ELECT, .nlen = 1, .ttl_ms = 600000, .val = "a", .vlen = 1}};
    apply_result_t res = submit(f, camp, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_OK);
    uint64_t term = res.coord.granted;
    char refusal[WRITER_REFUSAL_MAX] = "";
    assert_true(coord_wait_park(&f->s, fix_client(f, 0), COORD_WAIT_ELECT, ELECT, 1, 0, 600000, 0, false, "b", 1,
                                refusal, sizeof refusal));
    record_t resign = {.type = REC_ELECT_RESIGN, .elect = {.name = ELECT, .nlen = 1, .term = term}};
    assert_int_equal(submit(f, resign, WRITER_CLIENT, WRITER_APPLIED).status, AP_OK);
    assert_int_equal(f->nanswers, 1);
    assert_int_equal(f->answers[0].kind, OUTCOME_CAMPAIGN);
    assert_true(f->answers[0].term > term);
    fix_free(f);
}

/* ELECT.OBSERVE: an observer is told each new leader and each vacancy;
 * once removed, nothing more. */
static void test_observe_and_unobserve(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    ordo_list_t mine = {0};
    uint64_t id = coord_wait_observe(&f->s, fix_client(f, 0), &mine, ELECT, 1);
    assert_true(id > 0);
    record_t camp = {.type = REC_ELECT_CAMPAIGN,
                     .elect = {.name = ELECT, .nlen = 1, .ttl_ms = 600000, .val = "me", .vlen = 2}};
    apply_result_t res = submit(f, camp, WRITER_CLIENT, WRITER_APPLIED);
    uint64_t term = res.coord.granted;
    assert_int_equal(f->nanswers, 1);
    fix_answer_t *a = &f->answers[0];
    assert_ptr_equal(a->client, fix_client(f, 0));
    assert_int_equal(a->kind, OUTCOME_LEADER);
    assert_string_equal(a->name, ELECT);
    assert_int_equal(a->term, term);
    assert_string_equal(a->value, "me");

    record_t resign = {.type = REC_ELECT_RESIGN, .elect = {.name = ELECT, .nlen = 1, .term = term}};
    submit(f, resign, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(f->nanswers, 2);
    assert_int_equal(f->answers[1].kind, OUTCOME_LEADER);
    assert_int_equal(f->answers[1].term, 0); /* vacant */

    assert_int_equal(coord_wait_unobserve(&f->s, &mine, id), 1);
    assert_true(ordo_list_empty(&mine));
    submit(f, camp, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(f->nanswers, 2);
    fix_free(f);
}

/* A client that goes away: its parked request is dropped without an
 * answer and its observers removed (writer_client_gone()); the lock then
 * goes to the next waiter. */
static void test_client_gone(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    uint64_t held = acquire(f, 0);
    park_lock(f, 0, 0);
    park_lock(f, 1, 0);
    ordo_list_t observers = {0};
    coord_wait_observe(&f->s, fix_client(f, 0), &observers, ELECT, 1);
    writer_client_gone(&f->s, f->parked_as[0], &observers);
    assert_true(ordo_list_empty(&observers));
    assert_int_equal(f->nanswers, 0);
    assert_int_equal(coord_wait_len(&f->s, COORD_WAIT_LOCK, LOCK, 1), 1);
    release(f, held);
    assert_int_equal(f->nanswers, 1);
    assert_ptr_equal(f->answers[0].client, fix_client(f, 1));
    fix_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_waiter_granted_on_release),
        cmocka_unit_test(test_lock_waiter_lease_gone),
        cmocka_unit_test(test_lock_waiter_timeout_and_refusals),
        cmocka_unit_test(test_campaign_waiter_wins_on_resign),
        cmocka_unit_test(test_observe_and_unobserve),
        cmocka_unit_test(test_client_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
