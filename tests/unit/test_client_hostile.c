/*
 * test_client_hostile.c -- the client (src/client/conn.c, cresp.c,
 * members.c) against servers that try to hurt it: an aggregate that
 * never ends (of integers, of nulls), a bulk string announced far beyond
 * the bounds, push frames flooding in while a reply is awaited, a reply
 * dripped a byte at a time past the deadline, and redirects to addresses
 * that are no member. Each must end in a clean error within the call's
 * deadline and the client's memory bounds; the suite runs under ASan in
 * the sanitizer build. The fake servers are client_fake.h's; the
 * streaming ones write until the client hangs up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "client_int.h"
#include "client_fake.h"

/* The bounds the hostile tests set: small, so a bound that does not hold
 * shows at once as growth far past them. */
#define HOSTILE_REPLY_BYTES_MAX ((int64_t)1 << 20)
#define HOSTILE_PUSHES_MAX 100
/* Slack allowed past a deadline: a loaded test machine; four times that
 * under a sanitizer, which slows every read and parse of a flood (the
 * deadline is still checked after each read, as without one). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DEADLINE_SLACK_MS 600
#else
#define DEADLINE_SLACK_MS 150
#endif
/* Growth of the peak RSS allowed during one hostile call (the bounds are
 * 1 MiB; without them the calls grow by gigabytes). */
#define RSS_GROWTH_MAX_KB (64 * 1024)

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static ordo_client_t *bounded_client(const fake_t *f, int call_timeout_ms)
{
    ordo_client_opts_t o = { .port = f->port, .call_timeout_ms = call_timeout_ms,
                             .reconnect_timeout_ms = 2000, .backoff_min_ms = 1, .backoff_max_ms = 20,
                             .reply_bytes_max = HOSTILE_REPLY_BYTES_MAX,
                             .reply_elems_max = HOSTILE_REPLY_BYTES_MAX / 8,
                             .pushes_max = HOSTILE_PUSHES_MAX };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    return c;
}

/* run_hostile() -- one GET against script s: the call must fail with
 * `want` before its deadline (plus slack) and without growing past the
 * memory allowance. */
static void run_hostile(script_fn s, int call_timeout_ms, int want)
{
    fake_t f;
    fake_start(&f, s, NULL);
    ordo_client_t *c = bounded_client(&f, call_timeout_ms);
    assert_int_equal(ordo_client_connect(c), ORDO_OK);
    long rss0 = peak_rss_kb();
    int64_t t0 = client_now_ms();
    ordo_reply_t *r = NULL;
    int rc = ordo_client_command_strs(c, 0, &r, "GET", "k", NULL);
    int64_t took = client_now_ms() - t0;
    assert_int_equal(rc, want);
    assert_null(r);
    assert_true(took <= call_timeout_ms + DEADLINE_SLACK_MS);
    assert_true(peak_rss_kb() - rss0 <= RSS_GROWTH_MAX_KB);
    assert_int_equal(ordo_client_proto(c), 0); /* the connection was dropped */
    ordo_client_free(c);
    fake_stop(&f);
}

static void test_endless_aggregate_of_ints(void **st)
{
    (void)st;
    run_hostile(script_endless_ints, 5000, ORDO_EPROTO);
}

static void test_endless_aggregate_of_nulls(void **st)
{
    (void)st;
    run_hostile(script_endless_nulls, 5000, ORDO_EPROTO);
}

static void test_huge_bulk_refused_by_its_header(void **st)
{
    (void)st;
    run_hostile(script_huge_bulk, 5000, ORDO_EPROTO);
}

static void test_push_flood_while_awaiting_a_reply(void **st)
{
    (void)st;
    run_hostile(script_push_flood, 5000, ORDO_EPROTO);
}

/* A reply that never completes but keeps bytes coming: the deadline holds
 * although poll() never waits out its timeout. */
static void test_deadline_holds_against_a_drip(void **st)
{
    (void)st;
    run_hostile(script_drip, 300, ORDO_ETIMEDOUT);
}

/* The default bounds too: a stream of integers ends at the deadline or
 * the bound, whichever first, never later than the deadline. */
static void test_default_bounds_and_deadline(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_endless_ints, NULL);
    ordo_client_opts_t o = { .port = f.port, .call_timeout_ms = 200 };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    int64_t t0 = client_now_ms();
    ordo_reply_t *r = NULL;
    int rc = ordo_client_command_strs(c, 0, &r, "GET", "k", NULL);
    assert_true(rc == ORDO_ETIMEDOUT || rc == ORDO_EPROTO);
    assert_true(client_now_ms() - t0 <= 200 + DEADLINE_SLACK_MS);
    ordo_client_free(c);
    fake_stop(&f);
}

/* ---- redirects --------------------------------------------------------- */

/* assert_notleader_at_deadline() -- a call that met only -NOTLEADER until
 * its deadline ends in one of two documented ways: the -NOTLEADER reply,
 * when the last attempt was refused in time; or ORDO_ETIMEDOUT, when the
 * deadline fell while the last attempt's answer was still on its way (on
 * a loaded machine; that attempt may have run). Never ECONN, never a
 * success. */
static void assert_notleader_at_deadline(ordo_client_t *c, int rc, ordo_reply_t *r)
{
    if (rc == ORDO_OK) {
        assert_int_equal(ordo_client_reply_error(c, r), ORDO_ENOTLEADER);
        ordo_reply_free(r);
    } else {
        assert_int_equal(rc, ORDO_ETIMEDOUT);
        assert_null(r);
    }
}

/* Anything that reaches the "stranger": counted, answered as a leader. */
static int script_stranger(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)f;
    (void)conn_no;
    say(fd, is(cmd, 0, "HELLO") ? HELLO_REPLY : ":666\r\n");
    return 0;
}

/* Requires the password, then redirects every command to other_port. */
static int script_auth_follower(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    if (is(cmd, 0, "HELLO") && !(cmd->n == 5 && is(cmd, 4, f->password))) {
        say(fd, "-WRONGPASS invalid username-password pair\r\n");
        return 0;
    }
    return script_follower(f, fd, cmd, conn_no);
}

/* A -NOTLEADER naming an address that is neither configured nor listed by
 * CLUSTER MEMBERS is not followed: no connection, no password there. The
 * call ends with the -NOTLEADER at its deadline, and the client still
 * talks to its seed. */
static void test_redirect_to_a_stranger_is_not_followed(void **st)
{
    (void)st;
    fake_t stranger, follower;
    fake_start(&stranger, script_stranger, NULL);
    fake_start(&follower, script_auth_follower, "secret");
    atomic_store(&follower.other_port, stranger.port);
    ordo_client_opts_t o = { .port = follower.port, .password = "secret", .call_timeout_ms = 300,
                             .backoff_min_ms = 1, .backoff_max_ms = 20 };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    ordo_reply_t *r;
    int rc;
    int64_t t0 = client_now_ms();
    rc = ordo_client_command_strs(c, 0, &r, "KV.PUT", "k", "v", NULL);
    assert_notleader_at_deadline(c, rc, r);
    assert_true(client_now_ms() - t0 <= 300 + DEADLINE_SLACK_MS);
    assert_int_equal(atomic_load(&stranger.accepted), 0);
    assert_int_equal(ordo_client_port(c), follower.port);
    char addrs[256];
    ordo_client_addrs(c, addrs, sizeof addrs);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", follower.port);
    assert_string_equal(addrs, want);
    ordo_client_free(c);
    fake_stop(&follower);
    fake_stop(&stranger);
}

/* The same redirect, once the follower's CLUSTER MEMBERS lists the
 * address, is followed; and a redirect never replaces the seeds: with the
 * leader gone, the client goes back to the seed. */
static void test_redirect_to_a_listed_member_and_back_to_the_seed(void **st)
{
    (void)st;
    fake_t leader, follower;
    fake_start(&leader, script_leader, NULL);
    fake_start(&follower, script_follower, NULL);
    follower.cluster_script = 1;
    atomic_store(&follower.other_port, leader.port);
    ordo_client_opts_t o = { .port = follower.port, .call_timeout_ms = 2000, .backoff_min_ms = 1,
                             .backoff_max_ms = 20 };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    ordo_reply_t *r;
    int rc;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "KV.PUT", "k", "v", NULL), ORDO_OK);
    assert_int_equal(r->type, ORDO_REPLY_INTEGER);
    ordo_reply_free(r);
    assert_int_equal(ordo_client_port(c), leader.port);
    /* The leader dies; the follower now knows no leader. */
    fake_stop(&leader);
    atomic_store(&follower.other_port, 0);
    follower.cluster_script = 0;
    c->call_timeout_ms = 300;
    /* The closed connection is noticed before writing: not ORDO_ECONN. */
    rc = ordo_client_command_strs(c, 0, &r, "KV.PUT", "k", "v", NULL);
    assert_notleader_at_deadline(c, rc, r);
    char addrs[256], want[64];
    ordo_client_addrs(c, addrs, sizeof addrs);
    snprintf(want, sizeof want, "127.0.0.1:%d,", follower.port);
    assert_memory_equal(addrs, want, strlen(want)); /* the seed is still first */
    ordo_client_free(c);
    fake_stop(&follower);
}

/* A pipelined -NOTLEADER: the caller sees it, and the next command goes to
 * the member it named, not to the follower again. */
static void test_pipelined_notleader_moves_the_next_append(void **st)
{
    (void)st;
    fake_t leader, follower;
    fake_start(&leader, script_leader, NULL);
    fake_start(&follower, script_follower, NULL);
    atomic_store(&follower.other_port, leader.port);
    char addrs[64];
    snprintf(addrs, sizeof addrs, "127.0.0.1:%d,127.0.0.1:%d", follower.port, leader.port);
    ordo_client_opts_t o = { .addrs = addrs, .call_timeout_ms = 2000, .backoff_min_ms = 1,
                             .backoff_max_ms = 20 };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    const char *put[] = { "Q.PUSH", "q", "k", "p" };
    for (int i = 0; i < 3; i++)
        assert_int_equal(ordo_client_append(c, 4, put, NULL), ORDO_OK);
    for (int i = 0; i < 3; i++) {
        ordo_reply_t *r;
        assert_int_equal(ordo_client_get_reply(c, 0, &r), ORDO_OK);
        assert_int_equal(ordo_client_reply_error(c, r), ORDO_ENOTLEADER);
        ordo_reply_free(r);
    }
    int follower_cmds = atomic_load(&follower.commands);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ordo_client_append(c, 4, put, NULL), ORDO_OK);
    for (int i = 0; i < 3; i++) {
        ordo_reply_t *r;
        assert_int_equal(ordo_client_get_reply(c, 0, &r), ORDO_OK);
        assert_int_equal(r->type, ORDO_REPLY_INTEGER);
        ordo_reply_free(r);
    }
    assert_int_equal(atomic_load(&follower.commands), follower_cmds);
    assert_int_equal(ordo_client_port(c), leader.port);
    ordo_client_free(c);
    fake_stop(&follower);
    fake_stop(&leader);
}

/* A dead member among the seeds is skipped at once; a down cluster fails
 * within the call's deadline, naming where it tried. */
static void test_seed_list_skips_the_dead_and_names_them(void **st)
{
    (void)st;
    fake_t live;
    fake_start(&live, script_leader, NULL);
    fake_t dead;
    fake_start(&dead, script_leader, NULL);
    int dead_port = dead.port;
    fake_stop(&dead); /* its port now refuses */
    char addrs[64];
    snprintf(addrs, sizeof addrs, "127.0.0.1:%d,127.0.0.1:%d", dead_port, live.port);
    ordo_client_opts_t o = { .addrs = addrs, .call_timeout_ms = 300, .backoff_min_ms = 1,
                             .backoff_max_ms = 20 };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_OK);
    assert_int_equal(r->integer, 42);
    ordo_reply_free(r);
    ordo_client_free(c);
    fake_stop(&live);
    /* Nobody answers: ORDO_ECONN by the deadline, naming the addresses. */
    snprintf(addrs, sizeof addrs, "127.0.0.1:%d", dead_port);
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    int64_t t0 = client_now_ms();
    assert_int_equal(ordo_client_command_strs(c, 0, &r, "PING", NULL), ORDO_ECONN);
    assert_true(client_now_ms() - t0 <= 300 + DEADLINE_SLACK_MS);
    assert_non_null(strstr(ordo_client_errstr(c), addrs));
    ordo_client_free(c);
}

static void test_bad_addresses_are_refused(void **st)
{
    (void)st;
    const char *bad[] = { "h:0", "h:65536", "h:-1", "h:abc", ":7379", "h:", "h1:1,,h2:2", "h 1:7" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ordo_client_opts_t o = { .addrs = bad[i] };
        ordo_client_t *c = (ordo_client_t *)1;
        assert_int_equal(ordo_client_new(&c, &o), ORDO_EINVAL);
        assert_null(c);
    }
    char longhost[5000];
    memset(longhost, 'h', sizeof longhost - 1);
    longhost[sizeof longhost - 1] = '\0';
    ordo_client_opts_t o = { .host = longhost };
    ordo_client_t *c;
    assert_int_equal(ordo_client_new(&c, &o), ORDO_EINVAL);
    o = (ordo_client_opts_t){ .port = 99999999 };
    assert_int_equal(ordo_client_new(&c, &o), ORDO_EINVAL);
    o = (ordo_client_opts_t){ .addrs = "[::1]:7379,127.0.0.1:7380" };
    assert_int_equal(ordo_client_new(&c, &o), ORDO_OK);
    char addrs[128];
    ordo_client_addrs(c, addrs, sizeof addrs);
    assert_string_equal(addrs, "[::1]:7379,127.0.0.1:7380");
    ordo_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endless_aggregate_of_ints),
        cmocka_unit_test(test_endless_aggregate_of_nulls),
        cmocka_unit_test(test_huge_bulk_refused_by_its_header),
        cmocka_unit_test(test_push_flood_while_awaiting_a_reply),
        cmocka_unit_test(test_deadline_holds_against_a_drip),
        cmocka_unit_test(test_default_bounds_and_deadline),
        cmocka_unit_test(test_redirect_to_a_stranger_is_not_followed),
        cmocka_unit_test(test_redirect_to_a_listed_member_and_back_to_the_seed),
        cmocka_unit_test(test_pipelined_notleader_moves_the_next_append),
        cmocka_unit_test(test_seed_list_skips_the_dead_and_names_them),
        cmocka_unit_test(test_bad_addresses_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
