/*
 * test_srv_acl.c -- users (core/acl.h): the glob matcher, the rule parser
 * and its canonical form, the command and name checks, and users as
 * replicated state: REC_ACL_SETUSER / REC_ACL_DELUSER through their byte
 * form, applied by the core, and carried by a snapshot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/glob.h"
#include "core/acl.h"
#include "core/core.h"
#include "core/record.h"
#include "log/snapshot.h"

static bool gm(const char *p, const char *s) { return ordo_glob_match(p, strlen(p), s, strlen(s)); }

static void test_glob(void **state)
{
    (void)state;
    assert_true(gm("*", ""));
    assert_true(gm("*", "anything"));
    assert_true(gm("cart:*", "cart:1"));
    assert_true(gm("cart:*", "cart:"));
    assert_false(gm("cart:*", "car"));
    assert_false(gm("cart:*", "xcart:1"));
    assert_true(gm("a?c", "abc"));
    assert_false(gm("a?c", "ac"));
    assert_true(gm("*:x:*", "a:x:b"));
    assert_false(gm("*:x:*", "a:y:b"));
    assert_true(gm("[abc]1", "b1"));
    assert_false(gm("[abc]1", "d1"));
    assert_true(gm("[a-c]1", "c1"));
    assert_true(gm("[^a]1", "b1"));
    assert_false(gm("[^a]1", "a1"));
    assert_true(gm("a\\*", "a*"));
    assert_false(gm("a\\*", "ab"));
    assert_true(gm("exact", "exact"));
    assert_false(gm("exact", "exactly"));
    assert_true(gm("**a**b", "xxaxxb"));
    /* No exponential backtracking: a hostile pattern ends at once. */
    assert_false(gm("*a*a*a*a*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

static acl_user_t *user(const char *rules)
{
    acl_user_t *u = acl_user_new("alice", 5);
    const char *err = NULL;
    if (acl_user_rules(u, rules, strlen(rules), &err) != 0)
        fail_msg("rules '%s' refused: %s", rules, err);
    return u;
}

static char *describe(const acl_user_t *u)
{
    ordo_buf_t b = {0};
    acl_user_describe(u, &b);
    char *s = strndup(b.data, b.len);
    ordo_buf_free(&b);
    return s;
}

static void test_new_user_is_closed(void **state)
{
    (void)state;
    acl_user_t *u = acl_user_new("bob", 3);
    assert_false(acl_pass_ok(u, "", 0));
    assert_false(acl_cmd_ok(u, "get", 3, ACL_CAT_READ));
    assert_false(acl_name_allowed(u, ACL_KEYS, "k", 1));
    char *d = describe(u);
    assert_string_equal(d, "off -@all");
    free(d);
    acl_user_free(u);
}

static void test_passwords(void **state)
{
    (void)state;
    acl_user_t *u = user("on >secret >other");
    assert_true(acl_pass_ok(u, "secret", 6));
    assert_true(acl_pass_ok(u, "other", 5));
    assert_false(acl_pass_ok(u, "secreT", 6));
    assert_false(acl_pass_ok(u, "", 0));
    const char *err;
    assert_int_equal(acl_user_rule(u, "<secret", 7, &err), 0);
    assert_false(acl_pass_ok(u, "secret", 6));
    assert_int_equal(acl_user_rule(u, "<nosuch", 7, &err), -1);
    assert_int_equal(acl_user_rule(u, "off", 3, &err), 0);
    assert_false(acl_pass_ok(u, "other", 5)); /* off: nothing authenticates */
    assert_int_equal(acl_user_rules(u, "on nopass", 9, &err), 0);
    assert_true(acl_pass_ok(u, "anything", 8));
    assert_int_equal(acl_user_rule(u, "resetpass", 9, &err), 0);
    assert_false(acl_pass_ok(u, "anything", 8));
    /* The canonical form holds the hash, never the password. */
    acl_user_t *v = user("on >hunter2");
    char *d = describe(v);
    assert_null(strstr(d, "hunter2"));
    assert_non_null(strstr(d, "#f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7"));
    free(d);
    /* #hash and !hash work as >pw and <pw. */
    acl_user_t *w = user("on #f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7");
    assert_true(acl_pass_ok(w, "hunter2", 7));
    assert_int_equal(acl_user_rule(w, "!f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7", 65, &err), 0);
    assert_false(acl_pass_ok(w, "hunter2", 7));
    assert_int_equal(acl_user_rule(w, "#abc", 4, &err), -1);
    acl_user_free(u);
    acl_user_free(v);
    acl_user_free(w);
}

static void test_command_rules(void **state)
{
    (void)state;
    acl_user_t *u = user("on +@read -kv.range +q.push");
    assert_true(acl_cmd_ok(u, "get", 3, ACL_CAT_READ | ACL_CAT_KEYSPACE));
    assert_false(acl_cmd_ok(u, "kv.range", 8, ACL_CAT_READ | ACL_CAT_KEYSPACE));
    assert_true(acl_cmd_ok(u, "q.push", 6, ACL_CAT_WRITE | ACL_CAT_QUEUE));
    assert_false(acl_cmd_ok(u, "set", 3, ACL_CAT_WRITE | ACL_CAT_KEYSPACE));
    /* The last rule that covers a command decides. */
    acl_user_t *v = user("+@all -@dangerous +debug");
    assert_true(acl_cmd_ok(v, "debug", 5, ACL_CAT_ADMIN | ACL_CAT_DANGEROUS));
    assert_false(acl_cmd_ok(v, "config", 6, ACL_CAT_ADMIN | ACL_CAT_DANGEROUS));
    assert_true(acl_cmd_ok(v, "get", 3, ACL_CAT_READ));
    assert_true(acl_cmd_ok(v, "untagged", 8, 0)); /* @all covers every command */
    const char *err;
    assert_int_equal(acl_user_rule(v, "-@all", 5, &err), 0);
    assert_false(acl_cmd_ok(v, "get", 3, ACL_CAT_READ));
    /* @kv is @keyspace; unknown categories are refused. */
    acl_user_t *w = user("+@kv");
    assert_true(acl_cmd_ok(w, "set", 3, ACL_CAT_WRITE | ACL_CAT_KEYSPACE));
    assert_int_equal(acl_user_rule(w, "+@nosuch", 8, &err), -1);
    assert_int_equal(acl_user_rule(w, "+a|b", 4, &err), -1);
    /* A repeated target replaces the earlier rule: the list stays bounded. */
    acl_user_t *x = user("+get -get +get -get +get");
    assert_int_equal(x->nrules, 1);
    assert_true(acl_cmd_ok(x, "get", 3, ACL_CAT_READ));
    acl_user_free(u);
    acl_user_free(v);
    acl_user_free(w);
    acl_user_free(x);
}

static void test_patterns(void **state)
{
    (void)state;
    acl_user_t *u = user("~cart:* ~user:? %Q~jobs:* %C~lk");
    assert_true(acl_name_allowed(u, ACL_KEYS, "cart:9", 6));
    assert_true(acl_name_allowed(u, ACL_KEYS, "user:1", 6));
    assert_false(acl_name_allowed(u, ACL_KEYS, "user:12", 7));
    assert_false(acl_name_allowed(u, ACL_KEYS, "jobs:1", 6)); /* a queue pattern is not a key pattern */
    assert_true(acl_name_allowed(u, ACL_QUEUES, "jobs:1", 6));
    assert_false(acl_name_allowed(u, ACL_QUEUES, "cart:9", 6));
    assert_true(acl_name_allowed(u, ACL_COORD, "lk", 2));
    assert_false(acl_name_allowed(u, ACL_COORD, "lk2", 3));
    assert_true(acl_prefix_allowed(u, ACL_KEYS, "cart:", 5));
    assert_true(acl_prefix_allowed(u, ACL_KEYS, "cart:12", 7));
    assert_false(acl_prefix_allowed(u, ACL_KEYS, "car", 3));
    assert_false(acl_prefix_allowed(u, ACL_KEYS, "user:", 5)); /* ? limits the names under it */
    const char *err;
    assert_int_equal(acl_user_rule(u, "allkeys", 7, &err), 0);
    assert_true(acl_name_allowed(u, ACL_KEYS, "anything", 8));
    assert_true(acl_prefix_allowed(u, ACL_KEYS, "", 0));
    assert_int_equal(acl_user_rule(u, "resetkeys", 9, &err), 0);
    assert_false(acl_name_allowed(u, ACL_KEYS, "cart:9", 6));
    assert_false(acl_name_allowed(u, ACL_QUEUES, "jobs:1", 6));
    assert_int_equal(acl_user_rule(u, "%X~a", 4, &err), -1);
    assert_int_equal(acl_user_rule(u, "~", 1, &err), -1);
    acl_user_free(u);
}

static void test_reset_and_errors(void **state)
{
    (void)state;
    acl_user_t *u = user("on nopass allkeys allqueues allcoord +@all");
    assert_true(u->all_cmds && u->all_names[ACL_KEYS] && u->all_names[ACL_QUEUES] && u->all_names[ACL_COORD]);
    const char *err;
    assert_int_equal(acl_user_rule(u, "reset", 5, &err), 0);
    char *d = describe(u);
    assert_string_equal(d, "off -@all");
    free(d);
    assert_int_equal(acl_user_rule(u, "bogus", 5, &err), -1);
    assert_non_null(err);
    assert_int_equal(acl_user_rule(u, "", 0, &err), -1);
    acl_user_free(u);
    assert_false(acl_name_ok("a b", 3));
    assert_false(acl_name_ok("", 0));
    assert_true(acl_name_ok("svc-1", 5));
}

/* The canonical description parses back into the same user. */
static void test_describe_round_trip(void **state)
{
    (void)state;
    acl_user_t *u = user("on >pw ~a* %Q~q:* %C~lk* -@all +@read -kv.range +q.push");
    char *d = describe(u);
    assert_string_equal(d, "on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~a* %Q~q:* %C~lk* "
                           "-@all +@read -kv.range +q.push");
    acl_user_t *v = user(d);
    char *d2 = describe(v);
    assert_string_equal(d, d2);
    free(d);
    free(d2);
    acl_user_free(u);
    acl_user_free(v);
}

static void apply(core_t *c, record_t r, int status)
{
    ordo_buf_t b = {0};
    record_encode(&r, &b);
    record_t back;
    assert_int_equal(record_decode(b.data, b.len, &back), 0);
    assert_int_equal(back.type, r.type);
    apply_result_t res;
    core_apply(c, &back, &res);
    assert_int_equal(res.status, status);
    ordo_buf_free(&b);
}

#define SETUSER(n, rl) \
    ((record_t){.type = REC_ACL_SETUSER, .time_ms = 1, .acl = {.name = n, .nlen = sizeof n - 1, .rules = rl, .rlen = sizeof rl - 1}})
#define DELUSER(n) ((record_t){.type = REC_ACL_DELUSER, .time_ms = 1, .acl = {.name = n, .nlen = sizeof n - 1}})

static void test_records_apply(void **state)
{
    (void)state;
    core_t *c = core_create(100);
    uint64_t gen = acl_gen(core_acl(c));
    apply(c, SETUSER("alice", "on nopass ~a* +@read"), AP_OK);
    assert_int_equal(core_rev(c), 1);
    assert_true(acl_gen(core_acl(c)) > gen);
    const acl_user_t *u = acl_find(core_acl(c), "alice", 5);
    assert_non_null(u);
    assert_true(acl_cmd_ok(u, "get", 3, ACL_CAT_READ));
    apply(c, SETUSER("alice", "off -@all"), AP_OK); /* replaces the whole user */
    u = acl_find(core_acl(c), "alice", 5);
    assert_false(u->on);
    assert_false(acl_cmd_ok(u, "get", 3, ACL_CAT_READ));
    apply(c, SETUSER("bob", "on nosuchrule"), AP_INVALID);
    assert_null(acl_find(core_acl(c), "bob", 3));
    apply(c, DELUSER("alice"), AP_OK);
    assert_null(acl_find(core_acl(c), "alice", 5));
    apply(c, DELUSER("alice"), AP_NOOP);
    assert_int_equal(core_rev(c), 3);
    core_destroy(c);
}

static void test_snapshot_carries_users(void **state)
{
    (void)state;
    core_t *c = core_create(100);
    apply(c, SETUSER("zed", "on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 %Q~q -@all +q.push"),
          AP_OK);
    apply(c, SETUSER("amy", "on nopass ~* +@all"), AP_OK);
    ordo_buf_t snap = {0};
    assert_int_equal(snap_encode_mem(c, 5, &snap), 0);
    core_t *d = core_create(100);
    uint64_t rev, n;
    char err[256];
    assert_int_equal(snap_load_mem(d, snap.data, snap.len, "test", &rev, &n, err, sizeof err), 0);
    assert_int_equal(acl_count(core_acl(d)), 2);
    assert_string_equal(acl_user_at(core_acl(d), 0)->name, "amy");
    const acl_user_t *z = acl_find(core_acl(d), "zed", 3);
    assert_non_null(z);
    assert_true(acl_pass_ok(z, "pw", 2));
    assert_true(acl_cmd_ok(z, "q.push", 6, ACL_CAT_QUEUE));
    assert_false(acl_cmd_ok(z, "q.pull", 6, ACL_CAT_QUEUE));
    assert_true(acl_name_allowed(z, ACL_QUEUES, "q", 1));
    assert_int_equal(snap_digest(c), snap_digest(d));
    ordo_buf_free(&snap);
    core_destroy(c);
    core_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob),
        cmocka_unit_test(test_new_user_is_closed),
        cmocka_unit_test(test_passwords),
        cmocka_unit_test(test_command_rules),
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_reset_and_errors),
        cmocka_unit_test(test_describe_round_trip),
        cmocka_unit_test(test_records_apply),
        cmocka_unit_test(test_snapshot_carries_users),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
