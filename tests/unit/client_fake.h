/*
 * client_fake.h -- fake servers for the client's unit tests, header-only,
 * included by test_client_conn.c and test_client_async.c. A thread listens
 * on a loopback port, serves one connection at a time, parses each request
 * with the client's own parser (requests are arrays of bulk strings) and
 * answers through a script function chosen by the test. The scripts shared
 * by several tests are here too, the hostile servers among them.
 */
#ifndef ORDO_TEST_CLIENT_FAKE_H
#define ORDO_TEST_CLIENT_FAKE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cresp.h"

typedef struct fake fake_t;
/* Returns 0 to keep the connection, -1 to close it. conn_no counts from 1. */
typedef int (*script_fn)(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no);

struct fake {
    int lfd;
    int port;
    pthread_t th;
    atomic_bool stop;
    atomic_int accepted;
    atomic_int commands;
    script_fn script;
    atomic_int other_port;   /* for redirects */
    const char *password;
    /* Nonzero: the script answers CLUSTER MEMBERS itself. Otherwise the
     * fake answers it as a single server does (an error), uncounted, so
     * scripts that predate the client's member discovery see only the
     * commands they are about. */
    int cluster_script;
};

static inline void say(int fd, const char *s)
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

static inline int is(const ordo_reply_t *cmd, size_t i, const char *s)
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
                if (!f->cluster_script && is(cmd, 0, "CLUSTER") && is(cmd, 1, "MEMBERS")) {
                    say(fd, "-ERR this server is not in cluster mode\r\n");
                    ordo_reply_free(cmd);
                    continue;
                }
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
    atomic_store(&f->stop, true);
    pthread_join(f->th, NULL);
    close(f->lfd);
}

/* ---- scripts ------------------------------------------------------------- */

/* HELLO 3, then: GET -> a push written byte by byte, then the reply;
 * PING -> +PONG; WAIT -> nothing (a stalled server). */
static inline int script_basic(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
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

/* The first three connections are closed at HELLO; then it serves. */
static inline int script_flaky(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    if (conn_no <= 3)
        return -1;
    /* Connection 5 closes on its first non-HELLO command. */
    if (conn_no == 4 && is(cmd, 0, "QUIT"))
        return -1;
    return script_basic(f, fd, cmd, conn_no);
}

/* A follower: -NOTLEADER to the fake at other_port (or `?`). With
 * cluster_script set, its CLUSTER MEMBERS lists itself and that leader. */
static inline int script_follower(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
    } else if (is(cmd, 0, "CLUSTER") && is(cmd, 1, "MEMBERS")) {
        char m[256];
        snprintf(m, sizeof m,
                 "*2\r\n*4\r\n:1\r\n$%zu\r\n127.0.0.1:%d\r\n$8\r\nfollower\r\n:1\r\n"
                 "*4\r\n:2\r\n$%zu\r\n127.0.0.1:%d\r\n$6\r\nleader\r\n:1\r\n",
                 strlen("127.0.0.1:") + (size_t)snprintf(NULL, 0, "%d", f->port), f->port,
                 strlen("127.0.0.1:") + (size_t)snprintf(NULL, 0, "%d", atomic_load(&f->other_port)),
                 atomic_load(&f->other_port));
        say(fd, m);
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

static inline int script_leader(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)f;
    (void)conn_no;
    say(fd, is(cmd, 0, "HELLO") ? HELLO_REPLY : ":42\r\n");
    return 0;
}

/* Requires HELLO 3 AUTH alice secret (opts.user). */
static inline int script_auth_user(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        if (cmd->n == 5 && is(cmd, 2, "AUTH") && is(cmd, 3, "alice") && strcmp(cmd->elem[4]->str, f->password) == 0)
            say(fd, HELLO_REPLY);
        else
            say(fd, "-WRONGPASS invalid username-password pair\r\n");
        return 0;
    }
    return script_basic(f, fd, cmd, conn_no);
}

/* RESP2 and AUTH user password, nothing else. */
static inline int script_resp2_user(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO"))
        say(fd, "-ERR unknown command 'HELLO'\r\n");
    else if (is(cmd, 0, "AUTH"))
        say(fd, cmd->n == 3 && is(cmd, 1, "alice") && strcmp(cmd->elem[2]->str, f->password) == 0
                    ? "+OK\r\n"
                    : "-WRONGPASS invalid username-password pair\r\n");
    else
        say(fd, "+PONG\r\n");
    return 0;
}

/* The servers above that want user alice: [0] on RESP3 (password
 * "secret"), [1] on RESP2 ("pw"); fake_user_start(f, i) starts the i-th. */
#define FAKE_USER_SERVERS 2
static inline void fake_user_start(fake_t *f, int i)
{
    static const char *const passwords[FAKE_USER_SERVERS] = { "secret", "pw" };
    fake_start(f, i == 0 ? script_auth_user : script_resp2_user, passwords[i]);
}

/* ---- hostile servers (test_client_hostile.c, test_client_async.c) ------------------ */

/* say_forever() -- write chunk again and again until the peer hangs up
 * or the fake stops. */
static inline void say_forever(fake_t *f, int fd, const char *unit)
{
    char chunk[64 * 1024];
    size_t ul = strlen(unit), n = 0;
    while (n + ul <= sizeof chunk) {
        memcpy(chunk + n, unit, ul);
        n += ul;
    }
    while (!atomic_load(&f->stop)) {
        ssize_t k = send(fd, chunk, n, MSG_NOSIGNAL);
        if (k < 0)
            return;
    }
}

/* GET -> `*1073741824` then `:1` for ever. */
static inline int script_endless_ints(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
        return 0;
    }
    say(fd, "*1073741824\r\n");
    say_forever(f, fd, ":1\r\n");
    return -1;
}

/* GET -> `*1073741824` then `_` for ever. */
static inline int script_endless_nulls(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
        return 0;
    }
    say(fd, "*1073741824\r\n");
    say_forever(f, fd, "_\r\n");
    return -1;
}

/* GET -> a 512 MiB bulk string, announced, then its bytes for ever. */
static inline int script_huge_bulk(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
        return 0;
    }
    say(fd, "$536870912\r\n");
    say_forever(f, fd, "xxxxxxxx");
    return -1;
}

/* GET -> push frames for ever, never the reply. */
static inline int script_push_flood(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
        return 0;
    }
    say_forever(f, fd, ">2\r\n$5\r\nwatch\r\n:1\r\n");
    return -1;
}

/* GET -> an endless aggregate, one byte every millisecond or so. */
static inline int script_drip(fake_t *f, int fd, const ordo_reply_t *cmd, int conn_no)
{
    (void)conn_no;
    if (is(cmd, 0, "HELLO")) {
        say(fd, HELLO_REPLY);
        return 0;
    }
    say(fd, "*1073741824\r\n");
    const char *unit = ":1\r\n";
    for (int i = 0; !atomic_load(&f->stop); i++) {
        char one = unit[i % 4];
        if (send(fd, &one, 1, MSG_NOSIGNAL) < 0)
            break;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    return -1;
}

#endif
