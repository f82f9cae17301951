/*
 * test_srv_raftconf.c -- --cluster parsing (log/raft_log.h): members, their
 * raft addresses (client port + offset), and every malformed list refused
 * with a message naming what is wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "log/raft_log.h"

static void test_good(void **state)
{
    (void)state;
    raft_log_member_t m[RAFT_LOG_MAX_MEMBERS];
    char err[256];
    int n = raft_cluster_parse("1=127.0.0.1:7001,2=127.0.0.1:7002,30=localhost:7003", 10000, m,
                               RAFT_LOG_MAX_MEMBERS, err, sizeof err);
    assert_int_equal(n, 3);
    assert_int_equal(m[0].id, 1);
    assert_string_equal(m[0].client, "127.0.0.1:7001");
    assert_string_equal(m[0].raft, "127.0.0.1:17001");
    assert_int_equal(m[2].id, 30);
    assert_string_equal(m[2].raft, "localhost:17003");
}

static void refused(const char *spec, uint16_t offset, const char *why)
{
    raft_log_member_t m[3];
    char err[256] = "";
    assert_int_equal(raft_cluster_parse(spec, offset, m, 3, err, sizeof err), -1);
    if (strstr(err, why) == NULL)
        fail_msg("'%s': message '%s' lacks '%s'", spec, err, why);
}

static void test_bad(void **state)
{
    (void)state;
    refused("", 10000, "no members");
    refused("1=127.0.0.1", 10000, "HOST:PORT");
    refused("1=127.0.0.1:x", 10000, "HOST:PORT");
    refused("1=127.0.0.1:0", 10000, "HOST:PORT");
    refused("x=127.0.0.1:1", 10000, "positive integer");
    refused("0=127.0.0.1:1", 10000, "id 0");
    refused("=127.0.0.1:1", 10000, "ID=HOST:PORT");
    refused("1=a:1,1=b:2", 10000, "twice");
    refused("1=a:60000", 10000, "past 65535");
    refused("1=a:1,2=a:2,3=a:3,4=a:4", 10000, "more than 3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
