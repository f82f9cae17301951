/*
 * test_srv_writer.c -- the writer's door (apply.h: writer_submit() and
 * transactions), its parked clients (block.h) and, as far as a single
 * server goes, its cluster face (cluster.h), against a fake log and fake
 * hooks (writer_fake.h): no network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "writer_fake.h"

#include "writer/cluster.h"

/* ---- the door ------------------------------------------------------------------ */

/* A client's record that grows the data past max-memory-bytes is refused
 * with a LIMIT text and changes nothing; one the writer makes itself is
 * not refused; a deletion (a way back under the limit) is not either. */
static void test_door_memory_limit(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    server_t *s = &f->s;
    submit(f, rec_put("a", "first"), WRITER_CLIENT, WRITER_APPLIED);
    s->cfg.max_memory_bytes = 1; /* the data is above it now */
    uint64_t rev = core_rev(s->core);

    record_t rec = rec_put("b", "refused");
    apply_result_t res;
    char why[WRITER_REFUSAL_MAX] = "";
    assert_int_equal(writer_submit(s, &rec, WRITER_CLIENT, &res, why, sizeof why), WRITER_MEMORY);
    assert_int_equal(strncmp(why, "LIMIT ", 6), 0);
    assert_int_equal(res.status, AP_NOOP);
    assert_int_equal(core_rev(s->core), rev);
    assert_false(key_live(f, "b"));

    submit(f, rec_put("c", "mine"), WRITER_SELF, WRITER_APPLIED);
    assert_true(key_live(f, "c"));
    record_t del = {.type = REC_DEL, .del = {.key = "a", .klen = 1}};
    res = submit(f, del, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_OK);
    assert_false(key_live(f, "a"));

    fix_kick(f);
    assert_int_equal(f->log.n, 3); /* the refused record never reached the log */
    fix_free(f);
}

/* Applied records reach the log, in order; a record that changed nothing
 * (a failed condition) does not. */
static void test_door_logs_what_changed(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    submit(f, rec_put("k", "v"), WRITER_CLIENT, WRITER_APPLIED);
    record_t nx = rec_put("k", "again");
    nx.flags = REC_F_NX;
    apply_result_t res = submit(f, nx, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_NOOP);
    submit(f, (record_t){.type = REC_DEL, .del = {.key = "k", .klen = 1}}, WRITER_CLIENT, WRITER_APPLIED);
    fix_kick(f);
    assert_int_equal(f->log.n, 2);
    assert_int_equal(f->log.types[0], REC_PUT);
    assert_int_equal(f->log.types[1], REC_DEL);
    assert_int_equal(f->log.committed, core_rev(f->s.core));
    fix_free(f);
}

/* A log that has failed refuses the next record: it was applied in
 * memory only (WRITER_UNSTORED), the server is read-only from then on,
 * and later records are refused before they apply (WRITER_READONLY). */
static void test_door_log_failed(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    server_t *s = &f->s;
    f->log.failed = "fake log: the disk is gone";
    record_t rec = rec_put("k", "v");
    apply_result_t res;
    char why[WRITER_REFUSAL_MAX] = "";
    assert_int_equal(writer_submit(s, &rec, WRITER_CLIENT, &res, why, sizeof why), WRITER_UNSTORED);
    assert_int_equal(strncmp(why, "READONLY ", 9), 0);
    assert_non_null(server_readonly(s));
    assert_non_null(strstr(server_readonly(s), "the disk is gone"));

    uint64_t rev = core_rev(s->core);
    rec = rec_put("k2", "v");
    assert_int_equal(writer_submit(s, &rec, WRITER_CLIENT, &res, why, sizeof why), WRITER_READONLY);
    assert_int_equal(strncmp(why, "READONLY ", 9), 0);
    assert_int_equal(core_rev(s->core), rev);
    assert_false(key_live(f, "k2"));
    /* The writer's own records are refused alike. */
    submit(f, rec_put("k3", "v"), WRITER_SELF, WRITER_READONLY);
    fix_free(f);
}

/* A log that refuses a turn's batch turns the server read-only at the
 * hand-over: the next record is refused. */
static void test_door_append_fails(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    submit(f, rec_put("k", "v"), WRITER_CLIENT, WRITER_APPLIED);
    f->log.fail_next_append = true;
    fix_kick(f);
    assert_non_null(server_readonly(&f->s));
    assert_int_equal(f->log.n, 0);
    submit(f, rec_put("k2", "v"), WRITER_CLIENT, WRITER_READONLY);
    fix_free(f);
}

/* Without a log (s->persist.log NULL) records apply and nothing is handed over. */
static void test_door_no_log(void **state)
{
    (void)state;
    fix_t *f = fix_new(false);
    apply_result_t res = submit(f, rec_put("k", "v"), WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_OK);
    assert_true(key_live(f, "k"));
    fix_kick(f);
    assert_null(server_readonly(&f->s));
    fix_free(f);
}

/* A PUT with a deadline arms the expiry (the KV family's after-apply
 * step): the key is gone by a REC_EXPIRE record once the deadline passed,
 * with nobody asking. */
static void test_door_put_ttl_expires(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    server_t *s = &f->s;
    record_t rec = rec_put("short", "lived");
    rec.put.expire_at_ms = s->now_ms + 3;
    submit(f, rec, WRITER_CLIENT, WRITER_APPLIED);
    submit(f, rec_put("long", "lived"), WRITER_CLIENT, WRITER_APPLIED);
    assert_true(key_live(f, "short"));
    uint64_t give_up = server_mono_ms() + FIX_RUN_MAX_MS;
    while (key_live(f, "short")) {
        assert_true(server_mono_ms() < give_up);
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_true(s->now_ms > rec.put.expire_at_ms); /* never early */
    assert_true(key_live(f, "long"));
    fix_kick(f);
    assert_int_equal(f->log.n, 3);
    assert_int_equal(f->log.types[2], REC_EXPIRE);
    fix_free(f);
}

/* ---- transactions ---------------------------------------------------------------- */

/* WTXN_CHECK applies nothing: records come back AP_NOOP (they would pass)
 * or with the guard that fails, the first failure kept; nothing is logged. */
static void test_txn_check_applies_nothing(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    server_t *s = &f->s;
    submit(f, rec_put("k", "v"), WRITER_CLIENT, WRITER_APPLIED);
    fix_kick(f);
    uint64_t rev = core_rev(s->core);

    writer_txn_t t;
    writer_txn_begin(s, &t, WTXN_CHECK);
    apply_result_t res = submit(f, rec_put("new", "v"), WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_NOOP);
    assert_false(t.failed);
    record_t cas = rec_put("k", "w");
    cas.flags = REC_F_IFREV;
    cas.put.ifrev = rev + 100; /* not the key's revision */
    res = submit(f, cas, WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(res.status, AP_CONFLICT);
    assert_true(t.failed);
    assert_int_equal(t.fail_status, AP_CONFLICT);
    assert_int_equal(t.fail_cur_rev, rev);
    assert_true(writer_txn_end(s, &t));
    assert_null(s->writer.txn);

    assert_int_equal(core_rev(s->core), rev);
    assert_false(key_live(f, "new"));
    fix_kick(f);
    assert_int_equal(f->log.n, 1);
    fix_free(f);
}

/* WTXN_APPLY applies each record at once but logs nothing record by
 * record: writer_txn_end() logs the ones that changed something as one
 * REC_TXN. */
static void test_txn_apply_logs_one_record(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    server_t *s = &f->s;
    writer_txn_t t;
    writer_txn_begin(s, &t, WTXN_APPLY);
    submit(f, rec_put("a", "1"), WRITER_CLIENT, WRITER_APPLIED);
    submit(f, rec_put("b", "2"), WRITER_CLIENT, WRITER_APPLIED);
    record_t nx = rec_put("a", "3");
    nx.flags = REC_F_NX; /* changes nothing: not collected */
    assert_int_equal(submit(f, nx, WRITER_CLIENT, WRITER_APPLIED).status, AP_NOOP);
    assert_true(key_live(f, "a"));
    assert_true(key_live(f, "b"));
    fix_kick(f);
    assert_int_equal(f->log.n, 0); /* nothing before the end */
    assert_true(writer_txn_end(s, &t));
    fix_kick(f);
    assert_int_equal(f->log.n, 1);
    assert_int_equal(f->log.types[0], REC_TXN);
    assert_int_equal(f->log.txn_count[0], 2);
    fix_free(f);
}

/* Inside EXEC's apply pass the memory limit is not judged again (its
 * check pass did): a transaction is never split half-way. */
static void test_txn_apply_not_split_by_memory(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    server_t *s = &f->s;
    submit(f, rec_put("a", "1"), WRITER_CLIENT, WRITER_APPLIED);
    s->cfg.max_memory_bytes = 1;
    writer_txn_t t;
    writer_txn_begin(s, &t, WTXN_APPLY);
    submit(f, rec_put("b", "2"), WRITER_CLIENT, WRITER_APPLIED);
    assert_true(writer_txn_end(s, &t));
    assert_true(key_live(f, "b"));
    fix_free(f);
}

/* A transaction whose REC_TXN the log refuses says so: the server is
 * read-only. */
static void test_txn_end_log_failed(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    server_t *s = &f->s;
    writer_txn_t t;
    writer_txn_begin(s, &t, WTXN_APPLY);
    submit(f, rec_put("a", "1"), WRITER_CLIENT, WRITER_APPLIED);
    f->log.failed = "fake log: the disk is gone";
    assert_false(writer_txn_end(s, &t));
    assert_non_null(server_readonly(s));
    fix_free(f);
}

/* ---- parked clients (block.h) ------------------------------------------------------ */

static int g_cancelled;
static void count_cancel(waiter_t *w)
{
    (void)w;
    g_cancelled++;
}

static void nil_timeout(waiter_t *w, outcome_t *o, char *buf, size_t blen)
{
    (void)w, (void)buf, (void)blen;
    *o = (outcome_t){.kind = OUTCOME_NIL};
}

static waiter_t *park_on(fix_t *f, int client, wait_list_t *list, uint64_t deadline_ms, int kind)
{
    waiter_t *w = block_wait(&f->s, fix_client(f, client), list, deadline_ms, kind);
    w->on_cancel = count_cancel;
    w->on_timeout = nil_timeout;
    return w;
}

/* Parking tells hooks.park; an answer goes through hooks.answer with the
 * outcome, then hooks.resume. */
static void test_block_park_answer_resume(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    wait_list_t list = {0};
    waiter_t *w = park_on(f, 0, &list, 0, BLOCK_LOCK);
    assert_int_equal(f->nevents, 1);
    assert_int_equal(f->events[0].what, EV_PARK);
    assert_ptr_equal(f->events[0].client, fix_client(f, 0));
    assert_ptr_equal(f->parked_as[0], w);
    assert_int_equal(f->s.writer.block.blocked_clients, 1);
    assert_ptr_equal(wait_list_first(&list), w);

    outcome_t o = {.kind = OUTCOME_UINT, .uint = 42};
    block_answer(&f->s, w, &o);
    assert_int_equal(f->nevents, 3);
    assert_int_equal(f->events[1].what, EV_ANSWER);
    assert_int_equal(f->events[2].what, EV_RESUME);
    assert_int_equal(f->nanswers, 1);
    assert_ptr_equal(f->answers[0].client, fix_client(f, 0));
    assert_int_equal(f->answers[0].kind, OUTCOME_UINT);
    assert_int_equal(f->answers[0].uint, 42);
    assert_null(wait_list_first(&list));
    assert_int_equal(f->s.writer.block.blocked_clients, 0);
    fix_free(f);
}

/* A client that goes away is dropped: its family releases its data, and
 * nobody is answered or resumed. */
static void test_block_cancel_no_answer(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    wait_list_t list = {0};
    g_cancelled = 0;
    waiter_t *w = park_on(f, 0, &list, f->s.now_ms + 60000, BLOCK_PULL);
    block_cancel(&f->s, w);
    assert_int_equal(g_cancelled, 1);
    assert_int_equal(f->nanswers, 0);
    assert_int_equal(f->nevents, 1); /* the park only */
    assert_int_equal(f->s.writer.block.blocked_clients, 0);
    assert_null(wait_list_first(&list));
    fix_free(f);
}

/* A deadline that passes gives the family's timeout outcome. */
static void test_block_deadline(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    wait_list_t list = {0};
    uint64_t deadline = f->s.now_ms + 2;
    park_on(f, 0, &list, deadline, BLOCK_RESULT);
    park_on(f, 1, &list, 0, BLOCK_RESULT); /* no deadline: stays */
    run_until(f, &f->nanswers, 1);
    assert_ptr_equal(f->answers[0].client, fix_client(f, 0));
    assert_int_equal(f->answers[0].kind, OUTCOME_NIL);
    assert_true(f->s.now_ms > deadline); /* never early */
    assert_int_equal(f->s.writer.block.blocked_clients, 1);
    assert_null(f->parked_as[0]);
    fix_free(f);
}

/* The log fails: every parked waiter is answered READONLY at the next
 * loop turn (not at its deadline), its data released as for a
 * disconnect; a client that parks while read-only is answered alike. */
static void test_block_readonly_answers_all(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    wait_list_t a = {0}, b = {0};
    g_cancelled = 0;
    park_on(f, 0, &a, 0, BLOCK_LOCK);
    park_on(f, 1, &b, f->s.now_ms + 600000, BLOCK_PULL);
    f->log.failed = "fake log: the disk is gone";
    submit(f, rec_put("k", "v"), WRITER_CLIENT, WRITER_UNSTORED); /* turns the server read-only */
    assert_int_equal(f->nanswers, 0); /* not from inside the apply */
    run_until(f, &f->nanswers, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(f->answers[i].kind, OUTCOME_ERROR);
        assert_int_equal(strncmp(f->answers[i].text, "READONLY ", 9), 0);
        assert_non_null(strstr(f->answers[i].text, "the disk is gone"));
    }
    assert_int_equal(g_cancelled, 2);
    assert_int_equal(f->s.writer.block.blocked_clients, 0);

    park_on(f, 2, &a, 0, BLOCK_LOCK);
    run_until(f, &f->nanswers, 3);
    assert_ptr_equal(f->answers[2].client, fix_client(f, 2));
    assert_int_equal(strncmp(f->answers[2].text, "READONLY ", 9), 0);
    fix_free(f);
}

/* This member stopped leading: every parked waiter but a CLUSTER change's
 * is answered NOTLEADER with the leader, at once. */
static void test_block_notleader(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    wait_list_t a = {0}, c = {0};
    park_on(f, 0, &a, 0, BLOCK_LOCK);
    park_on(f, 1, &a, f->s.now_ms + 600000, BLOCK_CALL);
    park_on(f, 2, &c, 0, BLOCK_CLUSTER);
    block_notleader(&f->s, "10.0.0.2:7000");
    assert_int_equal(f->nanswers, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(f->answers[i].kind, OUTCOME_ERROR);
        assert_string_equal(f->answers[i].text, "NOTLEADER 10.0.0.2:7000");
    }
    assert_null(f->parked_as[0]);
    assert_null(f->parked_as[1]);
    assert_non_null(f->parked_as[2]);
    assert_int_equal(f->s.writer.block.blocked_clients, 1);
    fix_free(f);
}

/* block_move(): a waiter that waits in two stages stays parked (no
 * resume) and keeps its deadline. */
static void test_block_move_stays_parked(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    wait_list_t first = {0}, second = {0};
    waiter_t *w = park_on(f, 0, &first, f->s.now_ms + 600000, BLOCK_CALL);
    block_move(w, &second);
    assert_null(wait_list_first(&first));
    assert_ptr_equal(wait_list_first(&second), w);
    assert_int_equal(f->nevents, 1);
    assert_int_equal(w->deadline_ms, f->s.now_ms + 600000);
    fix_free(f);
}

/* ---- cluster.h on a single server ---------------------------------------------------- */

/* Without --node-id the server leads itself, and the revision output may
 * depend on is the core's. (The rest of cluster.c needs a raft log: it is
 * covered by tests/cluster.) */
static void test_cluster_single_server(void **state)
{
    (void)state;
    fix_t *f = fix_new(true);
    assert_false(cluster_enabled(&f->s));
    assert_true(cluster_leads(&f->s));
    submit(f, rec_put("k", "v"), WRITER_CLIENT, WRITER_APPLIED);
    assert_int_equal(writer_output_mark(&f->s).v, core_rev(f->s.core));
    fix_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_door_memory_limit),
        cmocka_unit_test(test_door_logs_what_changed),
        cmocka_unit_test(test_door_log_failed),
        cmocka_unit_test(test_door_append_fails),
        cmocka_unit_test(test_door_no_log),
        cmocka_unit_test(test_door_put_ttl_expires),
        cmocka_unit_test(test_txn_check_applies_nothing),
        cmocka_unit_test(test_txn_apply_logs_one_record),
        cmocka_unit_test(test_txn_apply_not_split_by_memory),
        cmocka_unit_test(test_txn_end_log_failed),
        cmocka_unit_test(test_block_park_answer_resume),
        cmocka_unit_test(test_block_cancel_no_answer),
        cmocka_unit_test(test_block_deadline),
        cmocka_unit_test(test_block_readonly_answers_all),
        cmocka_unit_test(test_block_notleader),
        cmocka_unit_test(test_block_move_stays_parked),
        cmocka_unit_test(test_cluster_single_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
