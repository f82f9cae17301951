/*
 * test_client_conn.c -- the client connection (src/client/conn.c) against
 * fake servers: a thread that listens on a loopback port, serves one
 * connection at a time, parses each request with the client's own parser
 * (requests are arrays of bulk strings) and answers through a script
 * function chosen by the test. Covers the HELLO 3 / AUTH handshake and the
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

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client_int.h"
#include "cresp.h"

typedef struct fake fake_t;
/* Returns 0 to keep the connection, -1 to close it. conn_no counts from 1. */
typedef int (*script_fn)(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no);

struct fake {
    int lfd;
    int port;
    pthread_t th;
    atomic_int stop;
    atomic_int accepted;
    atomic_int commands;
    script_fn script;
    atomic_int other_port;   /* for redirects */
    const char *password;
};

static void say(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

static int is(const ordo_reply_t *cmd, size_t i, const char *s)
{
    return cmd->n > i && strcasecmp(cmd->elem[i]->str, s) == 0;
}

static const char *HELLO_REPLY = "%2\r\n+server\r\n+ordo\r\n+proto\r\n:3\r\n";

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = { .fd = f->lfd, .events = POLLIN };
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        int conn_no = atomic_fetch_add(&f->accepted, 1) + 1;
        cresp_parser_t ps;
        cresp_init(&ps);
        cresp_buf_t in = { 0 };
        int open = 1;
        while (open && !atomic_load(&f->stop)) {
            struct pollfd q = { .fd = fd, .events = POLLIN };
            if (poll(&q, 1, 20) <= 0)
                continue;
            char buf[4096];
            ssize_t k = recv(fd, buf, sizeof buf, 0);
            if (k <= 0)
                break;
            cresp_buf_append(&in, buf, (size_t)k);
            for (;;) {
                size_t used;
                ordo_reply_t *cmd = NULL;
                int rc = cresp_parse(&ps, in.data, in.len, &used, &cmd);
                cresp_buf_consume(&in, used);
                if (rc != CRESP_DONE)
                    break;
                atomic_fetch_add(&f->commands, 1);
                if (f->script(f, fd, cmd, conn_no) != 0)
                    open = 0;
                ordo_reply_free(cmd);
                if (!open)
                    break;
            }
        }
        cresp_reset(&ps);
        cresp_buf_free(&in);
        close(fd);
    }
    return NULL;
}

static void fake_start(fake_t *f, script_fn s, const char *password)
{
    memset(f, 0, sizeof *f);
    f->script = s;
    f->password = password;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->lfd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lfd, 16), 0);
    socklen_t al = sizeof a;
    getsockname(f->lfd, (struct sockaddr *)&a, &al);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(fake_t *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->th, NULL);
    close(f->lfd);
}

static ordo_client_t *client_for(const fake_t *f, int call_timeout_ms)
{
    ordo_client_opts_t o = { .port = f->port, .call_timeout_ms = call_timeout_ms,
                             .reconnect_timeout_ms = 5000, .backoff_min_ms = 1, .backoff_max_ms = 20,
                             .password = f->password };
    ordo_client_t *c = ordo_client_new(&o);
    assert_non_null(c);
    return c;
}

/* ---- scripts ------------------------------------------------------------- */

/* HELLO 3, then: GET -> a push written byte by byte, then the reply;
 * PING -> +PONG; WAIT -> nothing (a stalled server). */
static int script_basic(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)f;
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
    } else if (is(cmd, 0, "GET")) {
        const char *push = ">3\r\n$5\r\nwatch\r\n:7\r\n$4\r\nd\r\na\r\n";
        for (const char *p = push; *p; p++) {
            char one[2] = { *p, 0 };
            say(fd, one);
        }
        say(fd, "$3\r\nbar\r\n");
    } else if (is(cmd, 0, "PING")) {
        say(fd, "+PONG\r\n");
    } else if (!is(cmd, 0, "WAIT")) {
        say(fd, "-ERR unknown\r\n");
    }
    return 0;
}

static void test_hello_push_and_pipeline(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_basic, NULL);
    ordo_client_t *c = client_for(&f, 2000);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_commandf(c, 0, &r, "GET", "foo", NULL), ORDO_OK);
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
    ordo_client_t *c = client_for(&f, 100);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_commandf(c, 0, &r, "WAIT", NULL), ORDO_ETIMEDOUT);
    assert_null(r);
    assert_int_equal(ordo_client_proto(c), 0); /* dropped: the stream is unknown */
    assert_int_equal(ordo_client_commandf(c, 0, &r, "PING", NULL), ORDO_OK);
    assert_string_equal(r->str, "PONG");
    ordo_reply_free(r);
    assert_int_equal(ordo_client_epoch(c), 2);
    ordo_client_free(c);
    fake_stop(&f);
}

/* The first three connections are closed at HELLO; then it serves. */
static int script_flaky(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    if (conn_no <= 3)
        return -1;
    /* Connection 5 closes on its first non-HELLO command. */
    if (conn_no == 4 && is(cmd, 0, "QUIT"))
        return -1;
    return script_basic(f, fd, cmd, conn_no);
}

static void test_reconnect_with_backoff(void **st)
{
    (void)st;
    fake_t f;
    fake_start(&f, script_flaky, NULL);
    ordo_client_t *c = client_for(&f, 2000);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_commandf(c, 0, &r, "PING", NULL), ORDO_OK);
    ordo_reply_free(r);
    assert_int_equal(atomic_load(&f.accepted), 4);
    assert_int_equal(ordo_client_epoch(c), 1);
    /* A connection that breaks with a command outstanding: ECONN, not a
     * silent resend; the next call reconnects. */
    assert_int_equal(ordo_client_commandf(c, 0, &r, "QUIT", NULL), ORDO_ECONN);
    assert_int_equal(ordo_client_commandf(c, 0, &r, "PING", NULL), ORDO_OK);
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

static int script_follower(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
    } else {
        char line[64];
        if (atomic_load(&f->other_port))
            snprintf(line, sizeof line, "-NOTLEADER 127.0.0.1:%d\r\n", atomic_load(&f->other_port));
        else
            snprintf(line, sizeof line, "-NOTLEADER ?\r\n");
        say(fd, line);
    }
    return 0;
}

static int script_leader(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)f;
    (void)conn_no;
    say(fd, is(cmd, 0, "HELLO") ? HELLO_REPLY : ":42\r\n");
    return 0;
}

static void test_notleader_redirect(void **st)
{
    (void)st;
    fake_t leader, follower;
    fake_start(&leader, script_leader, NULL);
    fake_start(&follower, script_follower, NULL);
    atomic_store(&follower.other_port, leader.port);
    ordo_client_t *c = client_for(&follower, 2000);
    ordo_reply_t *r;
    assert_int_equal(ordo_client_commandf(c, 0, &r, "KV.PUT", "k", "v", NULL), ORDO_OK);
    assert_int_equal(r->type, ORDO_REPLY_INTEGER);
    assert_int_equal(r->integer, 42);
    ordo_reply_free(r);
    assert_int_equal(ordo_client_port(c), leader.port);
    assert_int_equal(atomic_load(&leader.commands), 2); /* HELLO, KV.PUT */
    ordo_client_free(c);
    /* A follower that never knows a leader: the error, after the hops. */
    atomic_store(&follower.other_port, 0);
    c = client_for(&follower, 2000);
    assert_int_equal(ordo_client_commandf(c, 0, &r, "KV.PUT", "k", "v", NULL), ORDO_OK);
    assert_int_equal(ordo_client_reply_error(c, r), ORDO_ENOTLEADER);
    ordo_reply_free(r);
    ordo_client_free(c);
    fake_stop(&follower);
    fake_stop(&leader);
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
    assert_int_equal(ordo_client_commandf(c, 0, &r, "PING", NULL), ORDO_OK);
    ordo_reply_free(r);
    ordo_client_free(c);
    ordo_client_opts_t o = { .port = f.port, .password = "wrong" };
    c = ordo_client_new(&o);
    assert_int_equal(ordo_client_commandf(c, 0, &r, "PING", NULL), ORDO_EAUTH);
    assert_int_equal(atomic_load(&f.accepted), 2); /* a refused password is not retried */
    ordo_client_free(c);
    fake_stop(&f);
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
    assert_int_equal(ordo_client_commandf(c, 0, &r, "PING", NULL), ORDO_OK);
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
    ordo_client_t *c = ordo_client_new(NULL);
    ordo_reply_t e = { .type = ORDO_REPLY_ERROR, .str = (char *)"CONFLICT 17", .len = 11 };
    assert_int_equal(ordo_client_reply_error(c, &e), ORDO_ECONFLICT);
    assert_int_equal(ordo_client_err_rev(c), 17);
    assert_string_equal(ordo_client_errstr(c), "CONFLICT 17");
    e.str = (char *)"BUSYX";
    assert_int_equal(ordo_client_reply_error(c, &e), ORDO_ESERVER);
    e.str = (char *)"BUSY queue full";
    assert_int_equal(ordo_client_reply_error(c, &e), ORDO_EFULL);
    ordo_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_push_and_pipeline),
        cmocka_unit_test(test_call_timeout_drops_and_reconnects),
        cmocka_unit_test(test_reconnect_with_backoff),
        cmocka_unit_test(test_backoff_bounds),
        cmocka_unit_test(test_notleader_redirect),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_resp2_fallback),
        cmocka_unit_test(test_error_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
