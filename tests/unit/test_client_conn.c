/*
 * test_client_conn.c -- the client connection (src/client/conn.c) against
 * fake servers: a thread that listens on a loopback port, serves one
 * connection at a time, parses each request with the client's own parser
 * (requests are arrays of bulk strings) and answers through a script
 * function chosen by the test. Covers the HELLO 3 / AUTH handshake (with
 * the default user and with opts.user) and the
 * RESP2 fallback, push frames between replies (written torn, byte by
 * byte), pipelining, per-call timeouts, reconnection with backoff after
 * refused handshakes and dropped connections, and -NOTLEADER redirects.
 * Synchronisation is by the protocol itself: no sleeps.
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

static ordo_client_t *client_for(const fake_t *f, int call_timeout_ms)
{
    ordo_client_opts_t o = { .port = f->port, .call_timeout_ms = call_timeout_ms,
                             .reconnect_timeout_ms = 5000, .backoff_min_ms = 1, .backoff_max_ms = 20,
                             .password = f->password };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    assert_non_null(c);
    return c;
}


static void test_hello_push_and_pipeline(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_basic, NULL);
    ordo_client_t *c = client_for(&f, 2000);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "GET", "foo", NULL), ORDO_OK);
    assert_int_equal(ordo_client_proto(c), 3);
    assert_int_equal(r->type, ORDO_REPLY_STRING);
    assert_string_equal(r->str, "bar");
    ordo_reply_free(r);
    /* The push came before the reply and was kept aside. */
    ordo_reply_t *p;
    assert_int_equal(ordo_client_next_push(c, 0, &p), ORDO_OK);
    assert_int_equal(p->type, ORDO_REPLY_PUSH);
    assert_int_equal(p->n, 3);
    assert_memory_equal(p->elem[2]->str, "d\r\na", 4);
    ordo_reply_free(p);
    assert_int_equal(ordo_client_next_push(c, 0, &p), ORDO_ETIMEDOUT);
    /* Pipelining: three commands, one write, replies in order. */
    const char *ping[] = { "PING" };
    for (int i = 0; i < 3; i++)
        assert_int_equal(ordo_client_append(c, 1, ping, NULL), ORDO_OK);
    assert_int_equal(ordo_client_pending(c), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ordo_client_get_reply(c, 0, &r), ORDO_OK);
        assert_string_equal(r->str, "PONG");
        ordo_reply_free(r);
    }
    assert_int_equal(ordo_client_epoch(c), 1);
    ordo_client_free(c);
    fake_stop(&f);
}

static void test_call_timeout_drops_and_reconnects(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_basic, NULL);
    /* Connected first, with a deadline no stall reaches; only the WAIT,
     * which the fake never answers, gets a short one. */
    ordo_client_t *c = client_for(&f, 5000);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
    ordo_reply_free(r);
    assert_int_equal(ordo_client_epoch(c), 1);
    assert_int_equal(ordo_client_command_strs(c, 100, &r, "WAIT", NULL), ORDO_ETIMEDOUT);
    assert_null(r);
    assert_int_equal(ordo_client_proto(c), 0); /* dropped: the stream is unknown */
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
    assert_string_equal(r->str, "PONG");
    ordo_reply_free(r);
    assert_int_equal(ordo_client_epoch(c), 2);
    ordo_client_free(c);
    fake_stop(&f);
}


static void test_reconnect_with_backoff(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_flaky, NULL);
    ordo_client_t *c = client_for(&f, 2000);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
    ordo_reply_free(r);
    assert_int_equal(atomic_load(&f.accepted), 4);
    assert_int_equal(ordo_client_epoch(c), 1);
    /* A connection that breaks with a command outstanding: ECONN, not a
     * silent resend; the next call reconnects. */
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "QUIT", NULL), ORDO_ECONN);
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
    ordo_reply_free(r);
    assert_int_equal(ordo_client_epoch(c), 2);
    ordo_client_free(c);
    fake_stop(&f);
}

static void test_backoff_bounds(void **st)
{
    (void)st;
    uint64_t rng = 12345;
    int seen_nonzero = 0;
    for (int attempt = 0; attempt < 20; attempt++) {
        int cap = 10;
        for (int i = 0; i < attempt && cap < 500; i++)
            cap *= 2;
        if (cap > 500)
            cap = 500;
        for (int k = 0; k < 50; k++) {
            int w = client_backoff_ms(&rng, attempt, 10, 500);
            assert_true(w >= 0 && w <= cap);
            seen_nonzero |= w > 0;
        }
    }
    assert_true(seen_nonzero);
}


static void test_notleader_redirect(void **st)
{
    (void)st;
    fake_t leader, follower;
    fake_start(&leader, script_leader, NULL);
    fake_start(&follower, script_follower, NULL);
    atomic_store(&follower.other_port, leader.port);
    /* Both configured: the client starts at the follower, which names the
     * leader, a member. */
    char addrs[64];
    snprintf(addrs, sizeof addrs, "127.0.0.1:%d,127.0.0.1:%d", follower.port, leader.port);
    ordo_client_opts_t o = { .addrs = addrs, .call_timeout_ms = 2000, .backoff_min_ms = 1,
                             .backoff_max_ms = 20 };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "KV.PUT", "k", "v", NULL), ORDO_OK);
    assert_int_equal(r->type, ORDO_REPLY_INTEGER);
    assert_int_equal(r->integer, 42);
    ordo_reply_free(r);
    assert_int_equal(ordo_client_port(c), leader.port);
    assert_int_equal(atomic_load(&leader.commands), 2); /* HELLO, KV.PUT */
    ordo_client_free(c);
    fake_stop(&follower);
    fake_stop(&leader);
}

/* The first connection says -NOTLEADER ? (an election). Later ones refuse
 * the handshake (script_gone_after_one) or take the command and never
 * answer (script_silent_after_one). */
static int script_notleader_first(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no, int later)
{
    (void)f;
    if (is(cmd, 0, "HELLO")) {
        if (conn_no > 1 && later < 0)
            return -1;
        say(fd, HELLO_REPLY);
    } else if (conn_no == 1) {
        say(fd, "-NOTLEADER ?\r\n");
    }
    return 0;
}

static int script_gone_after_one(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    return script_notleader_first(f, fd, cmd, conn_no, -1);
}

static int script_silent_after_one(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    return script_notleader_first(f, fd, cmd, conn_no, 0);
}

/* Where the deadline falls decides what a redirected call returns, so each
 * case puts it in one place. (Against a follower that answers -NOTLEADER
 * every time, it can fall in either, and the answer then depends on the
 * machine's speed: CI once saw ETIMEDOUT there.) */
static void test_notleader_at_the_deadline(void **st)
{
    (void)st;
    fake_t f;
    ordo_reply_t *r;
    /* The deadline falls while looking for the leader: the command never
     * ran, and the caller gets the last -NOTLEADER. */
    fake_start(&f, script_gone_after_one, NULL);
    ordo_client_t *c = client_for(&f, 300);
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "KV.PUT", "k", "v", NULL), ORDO_OK);
    assert_int_equal(ordo_client_reply_error(c, r), ORDO_ENOTLEADER);
    ordo_reply_free(r);
    ordo_client_free(c);
    fake_stop(&f);
    /* It falls while the resent command's answer is on its way: that
     * attempt may have run, so it is a timeout, not -NOTLEADER. */
    fake_start(&f, script_silent_after_one, NULL);
    c = client_for(&f, 300);
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "KV.PUT", "k", "v", NULL), ORDO_ETIMEDOUT);
    assert_int_equal(atomic_load(&f.accepted), 2);
    ordo_client_free(c);
    fake_stop(&f);
}

/* Requires HELLO 3 AUTH default secret. */
static int script_auth(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        if (cmd->n == 5 && is(cmd, 2, "AUTH") && is(cmd, 3, "default") &&
            strcmp(cmd->elem[4]->str, f->password) == 0)
            say(fd, HELLO_REPLY);
        else
            say(fd, "-WRONGPASS invalid username-password pair\r\n");
        return 0;
    }
    return script_basic(f, fd, cmd, conn_no);
}

static void test_auth(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_auth, "secret");
    ordo_client_t *c = client_for(&f, 2000);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
    ordo_reply_free(r);
    ordo_client_free(c);
    ordo_client_opts_t o = { .port = f.port, .password = "wrong" };
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_EAUTH);
    assert_int_equal(atomic_load(&f.accepted), 2); /* a refused password is not retried */
    ordo_client_free(c);
    fake_stop(&f);
}

/* opts.user goes in HELLO 3 AUTH, and in AUTH user password on RESP2;
 * without it the default user is named, which these servers refuse. */
static void test_auth_user(void **st)
{
    (void)st;
    for (int i = 0; i < FAKE_USER_SERVERS; i++) {
        fake_t f;
        fake_user_start(&f, i);
        ordo_client_opts_t o = { .port = f.port, .password = f.password, .user = "alice", .call_timeout_ms = 2000 };
        ordo_client_t *c;
        ordo_reply_t *r;
        assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
        assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
        assert_int_equal(ordo_client_proto(c), i == 0 ? 3 : 2);
        ordo_reply_free(r);
        ordo_client_free(c);
        o.user = NULL;
        assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
        assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_EAUTH);
        ordo_client_free(c);
        fake_stop(&f);
    }
}

/* An older server: HELLO unknown, so RESP2 and AUTH. */
static int script_resp2(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)f;
    (void)conn_no;
    if (is(cmd, 0, "HELLO"))
        say(fd, "-ERR unknown command 'HELLO'\r\n");
    else if (is(cmd, 0, "AUTH"))
        say(fd, "+OK\r\n");
    else
        say(fd, "+PONG\r\n");
    return 0;
}

static void test_resp2_fallback(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_resp2, "pw");
    ordo_client_t *c = client_for(&f, 2000);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
    assert_string_equal(r->str, "PONG");
    assert_int_equal(ordo_client_proto(c), 2);
    assert_int_equal(atomic_load(&f.commands), 3); /* HELLO, AUTH, PING */
    ordo_reply_free(r);
    ordo_client_free(c);
    fake_stop(&f);
}

static void test_error_mapping(void **st)
{
    (void)st;
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, NULL), ORDO_OK);
    ordo_reply_t e = { .type = ORDO_REPLY_ERROR, .str = (char *)"CONFLICT 17", .len = 11 };
    assert_int_equal(ordo_client_reply_error(c, &e), ORDO_ECONFLICT);
    assert_int_equal(ordo_client_err_rev(c), 17);
    assert_string_equal(ordo_client_errstr(c), "CONFLICT 17");
    e.str = (char *)"BUSYX";
    assert_int_equal(ordo_client_reply_error(c, &e), ORDO_ESERVER);
    e.str = (char *)"BUSY queue full";
    assert_int_equal(ordo_client_reply_error(c, &e), ORDO_EBUSY);
    ordo_client_free(c);
}

static int never_called(void *arg, const ordo_msg_t *m, char **result, size_t *result_len)
{
    (void)arg, (void)m, (void)result, (void)result_len;
    fail();
    return 0;
}

/* Every object has the same shape: _new(&out, ...) sets *out on ORDO_OK
 * and NULL on an error; _free() takes NULL. */
static void test_object_shape(void **st)
{
    (void)st;
    ordo_client_free(NULL);
    ordo_txn_free(NULL);
    ordo_producer_free(NULL);
    ordo_consumer_free(NULL);
    ordo_lock_holder_free(NULL);

    ordo_txn_t *t = (ordo_txn_t *)1;
    assert_int_equal(ordo_txn_new(&t), ORDO_OK);
    assert_non_null(t);
    ordo_txn_free(t);

    ordo_consumer_t *k = (ordo_consumer_t *)1;
    ordo_consumer_opts_t co = { .queue = NULL, .handler = never_called };
    assert_int_equal(ordo_consumer_new(&k, &co), ORDO_EINVAL);
    assert_null(k);
    /* A runner with no server (port 1): free stops and joins it. */
    co.queue = "q";
    co.conn.port = 1;
    co.conn.backoff_max_ms = 10;
    assert_int_equal(ordo_consumer_new(&k, &co), ORDO_OK);
    assert_non_null(k);
    ordo_consumer_free(k);

    ordo_producer_t *p = (ordo_producer_t *)1;
    ordo_producer_opts_t po = { .queue = NULL };
    assert_int_equal(ordo_producer_new(&p, &po), ORDO_EINVAL);
    assert_null(p);

    ordo_lock_holder_t *h = (ordo_lock_holder_t *)1;
    assert_int_equal(ordo_lock_holder_new(&h, NULL, "l", 0, 0), ORDO_EINVAL);
    assert_null(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_push_and_pipeline),
        cmocka_unit_test(test_call_timeout_drops_and_reconnects),
        cmocka_unit_test(test_reconnect_with_backoff),
        cmocka_unit_test(test_backoff_bounds),
        cmocka_unit_test(test_notleader_redirect),
        cmocka_unit_test(test_notleader_at_the_deadline),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_auth_user),
        cmocka_unit_test(test_resp2_fallback),
        cmocka_unit_test(test_error_mapping),
        cmocka_unit_test(test_object_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
