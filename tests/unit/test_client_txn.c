/*
 * test_client_txn.c -- client transactions (src/client/txn.c) against a
 * fake server (client_fake.h): the builder copies its arguments, the typed
 * adders encode their commands, ordo_txn_exec() sends [WATCH] MULTI cmds
 * EXEC as one pipeline, and EXEC's answers map to codes: array -> ORDO_OK,
 * nil (RESP3 and RESP2) -> ORDO_ECONFLICT with index 0, -CONFLICT i ->
 * ORDO_ECONFLICT with index i and the server's text, -EXECABORT -> the
 * refused command's code and index, other errors -> their mapped code.
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

/* What EXEC answers; set by the test before ordo_txn_exec(). */
enum { EXEC_ARRAY, EXEC_NIL, EXEC_NIL2, EXEC_CONFLICT, EXEC_READONLY };
static atomic_int g_mode;
/* Every command of the current connection, "ARG ARG|ARG|...". */
static char g_log[4096];
static int g_queued, g_refused, g_in_multi;

static void log_cmd(const ordo_reply_t *cmd)
{
    size_t n = strlen(g_log);
    for (size_t i = 0; i < cmd->n && n + cmd->elem[i]->len + 2 < sizeof g_log; i++) {
        n += (size_t)snprintf(g_log + n, sizeof g_log - n, "%s%s", i ? " " : "", cmd->elem[i]->str);
    }
    snprintf(g_log + n, sizeof g_log - n, "|");
}

static int script_txn(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)f;
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
        return 0;
    }
    log_cmd(cmd);
    if (is(cmd, 0, "WATCH")) {
        say(fd, "+OK\r\n");
    } else if (is(cmd, 0, "MULTI")) {
        g_in_multi = 1;
        g_queued = g_refused = 0;
        say(fd, "+OK\r\n");
    } else if (is(cmd, 0, "EXEC")) {
        g_in_multi = 0;
        if (g_refused) {
            say(fd, "-EXECABORT Transaction discarded because of previous errors.\r\n");
            return 0;
        }
        switch (atomic_load(&g_mode)) {
        case EXEC_ARRAY: {
            char line[32];
            snprintf(line, sizeof line, "*%d\r\n", g_queued);
            say(fd, line);
            for (int i = 1; i <= g_queued; i++) {
                snprintf(line, sizeof line, ":%d\r\n", i);
                say(fd, line);
            }
            break;
        }
        case EXEC_NIL: say(fd, "_\r\n"); break;
        case EXEC_NIL2: say(fd, "*-1\r\n"); break;
        case EXEC_CONFLICT: say(fd, "-CONFLICT 2 stale delivery token for 7 in q\r\n"); break;
        default: say(fd, "-READONLY log write failed\r\n"); break;
        }
    } else if (g_in_multi && is(cmd, 0, "BOGUS")) {
        g_refused = 1;
        say(fd, "-ERR unknown command 'BOGUS'\r\n");
    } else if (g_in_multi && is(cmd, 0, "HUGE")) {
        g_refused = 1;
        say(fd, "-LIMIT max-multi-commands\r\n");
    } else if (g_in_multi) {
        g_queued++;
        say(fd, "+QUEUED\r\n");
    } else {
        say(fd, "+PONG\r\n");
    }
    return 0;
}

static ordo_client_t *client_for(const fake_t *f)
{
    ordo_client_opts_t o = { .port = f->port, .call_timeout_ms = 5000, .reconnect_timeout_ms = 5000,
                             .backoff_min_ms = 1, .backoff_max_ms = 20 };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    assert_non_null(c);
    return c;
}

static void test_builder_copies_and_pipeline(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_txn, NULL);
    ordo_client_t *c = client_for(&f);
    ordo_txn_t *t;
    assert_int_equal(ordo_txn_new(&t), ORDO_OK);
    assert_non_null(t);

    char key[8] = "k1", val[8] = "v1";
    ordo_kv_cond_t cond = { .ifrev = 7, .lease = 0, .fence_lock = NULL };
    assert_int_equal(ordo_txn_kv_put(t, key, 2, val, 2, &cond), ORDO_OK);
    strcpy(key, "XX");  /* the builder kept its own copy */
    strcpy(val, "YY");
    assert_int_equal(ordo_txn_kv_del(t, "k2", 2, NULL), ORDO_OK);
    assert_int_equal(ordo_txn_set(t, "s", 1, "x", 1), ORDO_OK);
    assert_int_equal(ordo_txn_incrby(t, "n", 1, -3), ORDO_OK);
    ordo_push_opts_t po = { .id = "d1", .id_len = 2 };
    assert_int_equal(ordo_txn_q_push(t, "q", "k", 1, "p", 1, &po), ORDO_OK);
    assert_int_equal(ordo_txn_q_ack(t, "q", 7, 9, "r", 1, 1), ORDO_OK);
    const char *raw[] = { "PING" };
    assert_int_equal(ordo_txn_add(t, 1, raw, NULL), ORDO_OK);
    assert_int_equal(ordo_txn_add(t, 0, raw, NULL), ORDO_EINVAL);
    assert_int_equal(ordo_txn_count(t), 7);

    const char *watch[] = { "w1", "w2" };
    g_log[0] = '\0';
    atomic_store(&g_mode, EXEC_ARRAY);
    ordo_reply_t *rep;
    size_t failed = 99;
    assert_int_equal(ordo_txn_exec(c, t, 2, watch, NULL, &rep, &failed), ORDO_OK);
    assert_int_equal(failed, 0);
    assert_int_equal(rep->type, ORDO_REPLY_ARRAY);
    assert_int_equal(rep->n, 7);
    assert_int_equal(rep->elem[6]->integer, 7);
    ordo_reply_free(rep);
    assert_string_equal(g_log, "WATCH w1 w2|MULTI|KV.PUT k1 v1 IFREV 7|KV.DEL k2|SET s x|INCRBY n -3|"
                               "Q.PUSH q k p ID d1|Q.ACK q 7 9 RESULT r|PING|EXEC|");
    assert_int_equal(ordo_client_pending(c), 0);

    /* Executed again without WATCH; then reset and reused. */
    g_log[0] = '\0';
    assert_int_equal(ordo_txn_exec(c, t, 0, NULL, NULL, NULL, NULL), ORDO_OK);
    assert_true(strncmp(g_log, "MULTI|KV.PUT", 12) == 0);
    ordo_txn_reset(t);
    assert_int_equal(ordo_txn_count(t), 0);
    g_log[0] = '\0';
    assert_int_equal(ordo_txn_exec(c, t, 0, NULL, NULL, &rep, NULL), ORDO_OK);
    assert_int_equal(rep->n, 0);
    ordo_reply_free(rep);
    assert_string_equal(g_log, "MULTI|EXEC|");
    assert_int_equal(ordo_txn_exec(c, t, -1, NULL, NULL, NULL, NULL), ORDO_EINVAL);

    ordo_txn_free(t);
    ordo_txn_free(NULL);
    ordo_client_free(c);
    fake_stop(&f);
}

static void test_exec_mapping(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_txn, NULL);
    ordo_client_t *c = client_for(&f);
    ordo_txn_t *t;
    assert_int_equal(ordo_txn_new(&t), ORDO_OK);
    assert_int_equal(ordo_txn_incrby(t, "n", 1, 1), ORDO_OK);
    assert_int_equal(ordo_txn_q_ack(t, "q", 7, 9, NULL, 0, 0), ORDO_OK);
    ordo_reply_t *rep = (ordo_reply_t *)1;
    size_t failed = 99;

    /* A watched key changed: nil (RESP3 `_` and RESP2 `*-1`). */
    const char *watch[] = { "n" };
    atomic_store(&g_mode, EXEC_NIL);
    assert_int_equal(ordo_txn_exec(c, t, 1, watch, NULL, &rep, &failed), ORDO_ECONFLICT);
    assert_null(rep);
    assert_int_equal(failed, 0);
    atomic_store(&g_mode, EXEC_NIL2);
    failed = 99;
    assert_int_equal(ordo_txn_exec(c, t, 1, watch, NULL, &rep, &failed), ORDO_ECONFLICT);
    assert_int_equal(failed, 0);

    /* A guard: -CONFLICT i reason. */
    atomic_store(&g_mode, EXEC_CONFLICT);
    assert_int_equal(ordo_txn_exec(c, t, 0, NULL, NULL, &rep, &failed), ORDO_ECONFLICT);
    assert_null(rep);
    assert_int_equal(failed, 2);
    assert_string_equal(ordo_client_errstr(c), "CONFLICT 2 stale delivery token for 7 in q");
    assert_int_equal(ordo_client_err_rev(c), 0);

    /* The runner's step: a stale ack (the last command) is ORDO_ESTALE. */
    ordo_txn_t *t2;
    assert_int_equal(ordo_txn_new(&t2), ORDO_OK);
    assert_int_equal(ordo_txn_incrby(t2, "n", 1, 1), ORDO_OK);
    ordo_msg_t m = { .id = 7, .token = 9 };
    assert_int_equal(client_txn_ack(c, t2, "q", &m, NULL, 0, NULL), ORDO_ESTALE);
    ordo_txn_free(t2);

    /* Another error answered by EXEC: its mapped code. */
    atomic_store(&g_mode, EXEC_READONLY);
    assert_int_equal(ordo_txn_exec(c, t, 0, NULL, NULL, &rep, &failed), ORDO_EREADONLY);
    assert_int_equal(failed, 0);

    /* A refused command: -EXECABORT -> that command's code and index. */
    const char *bogus[] = { "BOGUS", "x" };
    assert_int_equal(ordo_txn_add(t, 2, bogus, NULL), ORDO_OK);
    atomic_store(&g_mode, EXEC_ARRAY);
    assert_int_equal(ordo_txn_exec(c, t, 0, NULL, NULL, &rep, &failed), ORDO_ESERVER);
    assert_null(rep);
    assert_int_equal(failed, 3);
    assert_string_equal(ordo_client_errstr(c), "ERR unknown command 'BOGUS'");
    const char *huge[] = { "HUGE" };
    ordo_txn_reset(t);
    assert_int_equal(ordo_txn_add(t, 1, huge, NULL), ORDO_OK);
    assert_int_equal(ordo_txn_exec(c, t, 0, NULL, NULL, &rep, &failed), ORDO_ELIMIT);
    assert_int_equal(failed, 1);

    /* The connection is still in step: one connection served it all. */
    assert_int_equal(ordo_client_pending(c), 0);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
    assert_string_equal(r->str, "PONG");
    ordo_reply_free(r);
    assert_int_equal(atomic_load(&f.accepted), 1);

    ordo_txn_free(t);
    ordo_client_free(c);
    fake_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder_copies_and_pipeline),
        cmocka_unit_test(test_exec_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
