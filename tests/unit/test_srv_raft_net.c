/*
 * test_srv_raft_net.c -- the members' transport (log/raft_net.h): two or
 * three nets in one loop over loopback. Messages of every type arrive
 * with the right sender; a message to a member not yet listening arrives
 * once it listens (redial); the output bound drops and counts; a 5 MiB
 * snapshot file streams and arrives byte-equal as an install snapshot
 * naming its path; a peer sending junk is cut off and counted while the
 * others are served; a partition blocks both ways until lifted; close
 * leaves no handle and (under ASan) no leak.
 *
 * Waiting is run_until(): the loop runs until the condition holds, with
 * a deadline that fails the test rather than hangs it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "log/raft_net.h"
#include "log/raft_wire.h"
#include "srvtest.h"

#define DEADLINE_MS 20000
#define MAX_GOT 256

/* What a node's hooks saw. */
typedef struct got_s {
    struct raft_message m;      /* shallow: entries and conf not kept */
    uint64_t from;
    char from_address[64];
    char data[64];              /* first entry's data, or the snapshot's path */
    size_t data_len;
    unsigned conf_n;
} got_t;

typedef struct node_s {
    raft_net_t *net;
    uint64_t id, term;
    char addr[64];
    got_t got[MAX_GOT];
    int ngot;
    uint64_t pong_from, pong_seq, pong_term;
    int npongs;
} node_t;

static uv_loop_t loop;
static char *dir;

static void on_receive(void *arg, struct raft_message *m)
{
    node_t *nd = arg;
    assert_true(nd->ngot < MAX_GOT);
    got_t *g = &nd->got[nd->ngot++];
    memset(g, 0, sizeof *g);
    g->m = *m;
    g->from = m->server_id;
    snprintf(g->from_address, sizeof g->from_address, "%s", m->server_address);
    if (m->type == RAFT_APPEND_ENTRIES && m->append_entries.n_entries > 0) {
        const struct raft_buffer *b = &m->append_entries.entries[0].buf;
        g->data_len = b->len < sizeof g->data ? b->len : sizeof g->data;
        memcpy(g->data, b->base, g->data_len);
        g->m.append_entries.entries = NULL;
    }
    if (m->type == RAFT_INSTALL_SNAPSHOT) {
        const struct raft_buffer *b = &m->install_snapshot.data;
        assert_true(b->len <= sizeof g->data && b->len > 0 && ((char *)b->base)[b->len - 1] == '\0');
        memcpy(g->data, b->base, b->len);
        g->data_len = b->len;
        g->conf_n = m->install_snapshot.conf.n;
        memset(&g->m.install_snapshot.conf, 0, sizeof g->m.install_snapshot.conf);
    }
}

static uint64_t on_term(void *arg) { return ((node_t *)arg)->term; }

static void on_pong(void *arg, uint64_t id, uint64_t seq, uint64_t term)
{
    node_t *nd = arg;
    nd->pong_from = id, nd->pong_seq = seq, nd->pong_term = term;
    nd->npongs++;
}

/* A loopback port free now (the kernel's pick), for a net to bind later. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static void node_init(node_t *nd, uint64_t id)
{
    memset(nd, 0, sizeof *nd);
    nd->id = id;
    nd->term = 10 + id;
    snprintf(nd->addr, sizeof nd->addr, "127.0.0.1:%d", free_port());
}

static void node_open(node_t *nd)
{
    raft_net_options_t opt = {.loop = &loop, .id = nd->id, .address = nd->addr, .bind = nd->addr,
                              .recv_dir = dir, .snapshot_max_bytes = 64u << 20};
    raft_net_hooks_t hooks = {.receive = on_receive, .term = on_term, .pong = on_pong, .arg = nd};
    char err[256];
    if (raft_net_open(&opt, &hooks, &nd->net, err, sizeof err) != 0)
        fail_msg("open %s: %s", nd->addr, err);
}

static void on_deadline(uv_timer_t *t) { *(bool *)t->data = true; }

/* Run the loop until cond(arg) holds; fail after DEADLINE_MS. */
static void run_until(bool (*cond)(void *), void *arg, const char *what)
{
    bool late = false;
    uv_timer_t deadline;
    uv_timer_init(&loop, &deadline);
    deadline.data = &late;
    uv_timer_start(&deadline, on_deadline, DEADLINE_MS, 0);
    while (!cond(arg) && !late)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&deadline, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    if (late)
        fail_msg("timed out waiting for %s", what);
}

typedef struct count_s {
    const int *at;
    int want;
} count_t;

static bool reached(void *arg)
{
    const count_t *c = arg;
    return *c->at >= c->want;
}

static void wait_count(const int *at, int want, const char *what)
{
    count_t c = {at, want};
    run_until(reached, &c, what);
}

typedef struct stat_wait_s {
    raft_net_t *net;
    size_t field;               /* offsetof(raft_net_stats_t, ...) */
    uint64_t want;
} stat_wait_t;

static bool stat_reached(void *arg)
{
    const stat_wait_t *w = arg;
    raft_net_stats_t st;
    raft_net_stats(w->net, &st);
    uint64_t v;
    memcpy(&v, (const char *)&st + w->field, sizeof v);
    return v >= w->want;
}

#define WAIT_STAT(netp, name, value)                                                     \
    do {                                                                                 \
        stat_wait_t w_ = {(netp), offsetof(raft_net_stats_t, name), (value)};           \
        run_until(stat_reached, &w_, #name);                                             \
    } while (0)

typedef struct link_s {
    node_t *from;
    uint64_t to;
} link_t;

static bool not_connected(void *arg)
{
    const link_t *l = arg;
    raft_net_peer_t p;
    raft_net_peer(l->from->net, l->to, &p);
    return !p.connected;
}

/* Until nd has no connection up to member id (it saw the other side's close). */
static void wait_disconnected(node_t *nd, uint64_t id)
{
    link_t l = {nd, id};
    run_until(not_connected, &l, "the connection's loss");
}

static void on_closed(void *arg) { (*(int *)arg)++; }

static void close_all(node_t **nodes, int n)
{
    int closed = 0;
    for (int i = 0; i < n; i++)
        if (nodes[i]->net != NULL)
            raft_net_close(nodes[i]->net, on_closed, &closed);
    int want = 0;
    for (int i = 0; i < n; i++)
        want += nodes[i]->net != NULL;
    wait_count(&closed, want, "close");
    for (int i = 0; i < n; i++)
        nodes[i]->net = NULL;
}

static int setup(void **state)
{
    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    dir = tmpdir_new("ordo-raftnet-");
    return 0;
}

/* Every handle closed (uv_loop_close refuses otherwise). */
static int teardown(void **state)
{
    (void)state;
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_loop_close(&loop), 0);
    tmpdir_free(dir);
    return 0;
}

static struct raft_message msg(enum raft_message_type type, const node_t *to)
{
    struct raft_message m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.server_id = to->id;
    m.server_address = to->addr;
    return m;
}

static void test_messages(void **state)
{
    (void)state;
    node_t a, b;
    node_init(&a, 1);
    node_init(&b, 2);
    node_open(&a);
    node_open(&b);

    struct raft_entry e = {.term = 3, .type = RAFT_COMMAND, .buf = {"entry-data", 10}};
    struct raft_message m = msg(RAFT_APPEND_ENTRIES, &b);
    m.append_entries = (struct raft_append_entries){0, 3, 5, 2, 4, &e, 1};
    assert_int_equal(raft_net_send(a.net, &m), 0);
    m = msg(RAFT_APPEND_ENTRIES_RESULT, &b);
    m.append_entries_result.rejected = 6;
    assert_int_equal(raft_net_send(a.net, &m), 0);
    m = msg(RAFT_REQUEST_VOTE, &b);
    m.request_vote.candidate_id = 1;
    m.request_vote.pre_vote = true;
    assert_int_equal(raft_net_send(a.net, &m), 0);
    m = msg(RAFT_REQUEST_VOTE_RESULT, &b);
    m.request_vote_result.vote_granted = true;
    assert_int_equal(raft_net_send(a.net, &m), 0);
    m = msg(RAFT_TIMEOUT_NOW, &b);
    m.timeout_now.last_log_index = 77;
    assert_int_equal(raft_net_send(a.net, &m), 0);
    wait_count(&b.ngot, 5, "five messages at b");

    /* In order, each from a at its address. */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(b.got[i].from, 1);
        assert_string_equal(b.got[i].from_address, a.addr);
    }
    assert_int_equal(b.got[0].m.type, RAFT_APPEND_ENTRIES);
    assert_int_equal(b.got[0].m.append_entries.n_entries, 1);
    assert_int_equal(b.got[0].m.append_entries.prev_log_index, 5);
    assert_int_equal(b.got[0].data_len, 10);
    assert_memory_equal(b.got[0].data, "entry-data", 10);
    assert_int_equal(b.got[1].m.type, RAFT_APPEND_ENTRIES_RESULT);
    assert_int_equal(b.got[1].m.append_entries_result.rejected, 6);
    assert_int_equal(b.got[2].m.type, RAFT_REQUEST_VOTE);
    assert_true(b.got[2].m.request_vote.pre_vote);
    assert_int_equal(b.got[3].m.type, RAFT_REQUEST_VOTE_RESULT);
    assert_true(b.got[3].m.request_vote_result.vote_granted);
    assert_int_equal(b.got[4].m.type, RAFT_TIMEOUT_NOW);
    assert_int_equal(b.got[4].m.timeout_now.last_log_index, 77);

    /* And back, on b's own outbound connection. */
    m = msg(RAFT_REQUEST_VOTE_RESULT, &a);
    assert_int_equal(raft_net_send(b.net, &m), 0);
    wait_count(&a.ngot, 1, "a reply at a");
    assert_int_equal(a.got[0].from, 2);
    assert_string_equal(a.got[0].from_address, b.addr);

    /* A ping round: the pong names b and carries b's term. */
    uint64_t ids[1] = {2};
    const char *addrs[1] = {b.addr};
    raft_net_ping(a.net, ids, 1, addrs, 42);
    wait_count(&a.npongs, 1, "a pong");
    assert_int_equal(a.pong_from, 2);
    assert_int_equal(a.pong_seq, 42);
    assert_int_equal(a.pong_term, b.term);

    raft_net_peer_t peer;
    raft_net_peer(a.net, 2, &peer);
    assert_true(peer.connected);
    assert_true(peer.last_recv_ms > 0);
    raft_net_peer(a.net, 99, &peer);
    assert_false(peer.connected);
    assert_int_equal(peer.last_recv_ms, 0);
    raft_net_stats_t st;
    raft_net_stats(b.net, &st);
    assert_int_equal(st.received, 5);
    assert_int_equal(st.sent, 1);
    assert_int_equal(st.bad_frames, 0);
    node_t *all[] = {&a, &b};
    close_all(all, 2);
}

static void test_redial(void **state)
{
    (void)state;
    node_t a, b;
    node_init(&a, 1);
    node_init(&b, 2);
    node_open(&a);
    struct raft_message m = msg(RAFT_TIMEOUT_NOW, &b);
    m.timeout_now.term = 9;
    assert_int_equal(raft_net_send(a.net, &m), 0);
    /* b is not listening: a's dials fail, and it dials again. */
    WAIT_STAT(a.net, dials_failed, 2);
    assert_int_equal(b.ngot, 0);
    node_open(&b);
    wait_count(&b.ngot, 1, "the message once b listens");
    assert_int_equal(b.got[0].m.type, RAFT_TIMEOUT_NOW);
    assert_int_equal(b.got[0].m.timeout_now.term, 9);
    assert_int_equal(b.got[0].from, 1);
    node_t *all[] = {&a, &b};
    close_all(all, 2);
}

static void test_output_bound(void **state)
{
    (void)state;
    node_t a, b;
    node_init(&a, 1);
    node_init(&b, 2);
    node_open(&a);
    char *big = calloc(1, 1u << 20);
    struct raft_entry e = {.term = 1, .type = RAFT_COMMAND, .buf = {big, 1u << 20}};
    struct raft_message m = msg(RAFT_APPEND_ENTRIES, &b);
    m.append_entries.entries = &e;
    m.append_entries.n_entries = 1;
    /* b is away: frames wait until RAFT_NET_OUT_MAX bytes, then drop. */
    int sent = 0;
    while (raft_net_send(a.net, &m) == 0)
        sent++;
    assert_int_equal(sent, RAFT_NET_OUT_MAX / (1u << 20));
    assert_int_equal(raft_net_send(a.net, &m), -1);
    raft_net_stats_t st;
    raft_net_stats(a.net, &st);
    assert_int_equal(st.sent, (uint64_t)sent);
    assert_int_equal(st.dropped, 2);
    /* What waited is delivered once b listens, and the bound frees up. */
    node_open(&b);
    wait_count(&b.ngot, sent, "the queued appends");
    assert_int_equal(b.got[sent - 1].m.append_entries.n_entries, 1);
    WAIT_STAT(a.net, bytes_out, (uint64_t)sent << 20);
    assert_int_equal(raft_net_send(a.net, &m), 0);
    free(big);
    node_t *all[] = {&a, &b};
    close_all(all, 2);
}

static bool file_equal(const char *p1, const char *p2)
{
    FILE *f1 = fopen(p1, "rb"), *f2 = fopen(p2, "rb");
    assert_non_null(f1);
    assert_non_null(f2);
    bool same = true;
    int c1, c2;
    do {
        c1 = fgetc(f1);
        c2 = fgetc(f2);
        same = c1 == c2;
    } while (same && c1 != EOF);
    fclose(f1);
    fclose(f2);
    return same;
}

static void test_snapshot(void **state)
{
    (void)state;
    node_t a, b;
    node_init(&a, 1);
    node_init(&b, 2);
    node_open(&a);
    node_open(&b);
    size_t size = 5u << 20;
    unsigned char *data = malloc(size + 7);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < size + 7; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        data[i] = (unsigned char)x;
    }
    char src[4200];
    snprintf(src, sizeof src, "%s/source", dir);
    file_put(src, data, size + 7); /* not a multiple of the chunk */
    free(data);

    struct raft_message m = msg(RAFT_INSTALL_SNAPSHOT, &b);
    m.install_snapshot.term = 4;
    m.install_snapshot.last_index = 500;
    m.install_snapshot.last_term = 3;
    m.install_snapshot.conf_index = 2;
    raft_configuration_init(&m.install_snapshot.conf);
    assert_int_equal(raft_configuration_add(&m.install_snapshot.conf, 1, a.addr, RAFT_VOTER), 0);
    assert_int_equal(raft_configuration_add(&m.install_snapshot.conf, 2, b.addr, RAFT_VOTER), 0);
    assert_int_equal(raft_net_send_snapshot(a.net, &m, src), 0);
    assert_int_equal(raft_net_send_snapshot(a.net, &m, src), 0); /* one runs: ignored */
    raft_configuration_close(&m.install_snapshot.conf);
    assert_int_equal(raft_net_send_snapshot(a.net, &m, "/nonexistent/file"), 0); /* still running */
    wait_count(&b.ngot, 1, "the snapshot");

    got_t *g = &b.got[0];
    assert_int_equal(g->m.type, RAFT_INSTALL_SNAPSHOT);
    assert_int_equal(g->from, 1);
    assert_int_equal(g->m.install_snapshot.last_index, 500);
    assert_int_equal(g->m.install_snapshot.last_term, 3);
    assert_int_equal(g->m.install_snapshot.conf_index, 2);
    assert_int_equal(g->conf_n, 2);
    assert_int_equal(g->data_len, strlen(g->data) + 1);
    assert_null(strstr(g->data, ".tmp"));
    assert_true(strncmp(g->data, dir, strlen(dir)) == 0);
    struct stat st;
    assert_int_equal(stat(g->data, &st), 0);
    assert_int_equal(st.st_size, size + 7);
    assert_true(file_equal(src, g->data));

    raft_net_stats_t sa, sb;
    raft_net_stats(a.net, &sa);
    raft_net_stats(b.net, &sb);
    assert_int_equal(sa.snapshots_sent, 1);
    assert_int_equal(sa.snapshot_bytes_sent, size + 7);
    assert_int_equal(sb.snapshots_received, 1);
    assert_int_equal(sb.snapshot_bytes_received, size + 7);

    /* The stream is over: a file that cannot be opened is refused now. */
    m.install_snapshot.conf.n = 0;
    assert_int_equal(raft_net_send_snapshot(a.net, &m, "/nonexistent/file"), -1);
    node_t *all[] = {&a, &b};
    close_all(all, 2);
}

/* A raw socket to node nd; returns the descriptor. */
static int raw_connect(const node_t *nd)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    sa.sin_port = htons((uint16_t)atoi(strrchr(nd->addr, ':') + 1));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* The net closed the raw socket: reading reaches the end (after the
 * net's hello, which it sends first). */
static void assert_closed_by_peer(int fd)
{
    char buf[4096];
    ssize_t r;
    do
        r = read(fd, buf, sizeof buf);
    while (r > 0 || (r < 0 && errno == EINTR));
    assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
    close(fd);
}

static void test_garbage(void **state)
{
    (void)state;
    node_t a, b;
    node_init(&a, 1);
    node_init(&b, 2);
    node_open(&a);
    node_open(&b);
    /* Junk at once: refused at its first header (no such type), though
     * "GET " read as a length is half a gigabyte. */
    int fd = raw_connect(&a);
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(write(fd, junk, sizeof junk - 1), (ssize_t)sizeof junk - 1);
    WAIT_STAT(a.net, bad_frames, 1);
    assert_closed_by_peer(fd);

    /* A proper hello, then a frame of an unknown type. */
    fd = raw_connect(&a);
    ordo_buf_t out = ORDO_BUF_INIT;
    raft_wire_put_hello(&out, 7, "127.0.0.1:1");
    ordo_buf_append(&out, "\x10\x00\x00\x00\x63" "0123456789abcdef", 21);
    assert_int_equal(write(fd, out.data, out.len), (ssize_t)out.len);
    ordo_buf_free(&out);
    WAIT_STAT(a.net, bad_frames, 2);
    assert_closed_by_peer(fd);

    /* A well-formed frame, but not a hello first. */
    fd = raw_connect(&a);
    out = (ordo_buf_t)ORDO_BUF_INIT;
    raft_wire_put_ping(&out, RAFT_WIRE_PING, 1, 1);
    assert_int_equal(write(fd, out.data, out.len), (ssize_t)out.len);
    ordo_buf_free(&out);
    WAIT_STAT(a.net, bad_frames, 3);
    assert_closed_by_peer(fd);

    /* a serves b all along. */
    struct raft_message m = msg(RAFT_REQUEST_VOTE, &a);
    assert_int_equal(raft_net_send(b.net, &m), 0);
    wait_count(&a.ngot, 1, "b's message");
    assert_int_equal(a.got[0].from, 2);
    raft_net_stats_t st;
    raft_net_stats(a.net, &st);
    assert_int_equal(st.bad_frames, 3);
    assert_int_equal(st.received, 1);
    node_t *all[] = {&a, &b};
    close_all(all, 2);
}

static void test_partition(void **state)
{
    (void)state;
    node_t a, b, c;
    node_init(&a, 1);
    node_init(&b, 2);
    node_init(&c, 3);
    node_open(&a);
    node_open(&b);
    node_open(&c);
    struct raft_message to_b = msg(RAFT_TIMEOUT_NOW, &b), to_a = msg(RAFT_TIMEOUT_NOW, &a);
    /* Connections both ways first, so the partition has some to cut. */
    assert_int_equal(raft_net_send(a.net, &to_b), 0);
    assert_int_equal(raft_net_send(b.net, &to_a), 0);
    wait_count(&b.ngot, 1, "a to b");
    wait_count(&a.ngot, 1, "b to a");

    uint64_t away[1] = {2};
    assert_int_equal(raft_net_partition(a.net, away, 1), 0);
    uint64_t too_many[17] = {0};
    assert_int_equal(raft_net_partition(a.net, too_many, 17), -1);
    /* a to b: dropped at once. */
    assert_int_equal(raft_net_send(a.net, &to_b), -1);
    raft_net_stats_t st;
    raft_net_stats(a.net, &st);
    assert_int_equal(st.dropped, 1);
    raft_net_peer_t peer;
    raft_net_peer(a.net, 2, &peer);
    assert_false(peer.connected);
    /* b to a: b's connection was cut; each new one is refused at the
     * hello, and what b sent on it never reaches a. */
    for (uint64_t i = 0; i < 3; i++) {
        wait_disconnected(&b, 1);
        assert_int_equal(raft_net_send(b.net, &to_a), 0);
        WAIT_STAT(a.net, refused, st.refused + 1 + i);
    }
    /* c is served meanwhile, and nothing of b's came. */
    struct raft_message c_to_a = msg(RAFT_REQUEST_VOTE, &a);
    assert_int_equal(raft_net_send(c.net, &c_to_a), 0);
    wait_count(&a.ngot, 2, "c's message");
    assert_int_equal(a.got[1].from, 3);
    assert_int_equal(b.ngot, 1);

    /* Lifted: both ways again. */
    assert_int_equal(raft_net_partition(a.net, NULL, 0), 0);
    assert_int_equal(raft_net_send(a.net, &to_b), 0);
    wait_count(&b.ngot, 2, "a to b after the partition");
    assert_int_equal(b.got[1].from, 1);
    assert_int_equal(raft_net_send(b.net, &to_a), 0);
    wait_count(&a.ngot, 3, "b to a after the partition");
    assert_int_equal(a.got[2].from, 2);
    node_t *all[] = {&a, &b, &c};
    close_all(all, 3);
}

/* Closing with things in flight: a redial armed and a queue waiting for
 * it, a snapshot stream begun (its first bytes received; the rest may be
 * in flight or done), and a connection that never said hello. */
static void test_close_busy(void **state)
{
    (void)state;
    node_t a, b, away;
    node_init(&a, 1);
    node_init(&b, 2);
    node_init(&away, 3);
    node_open(&a);
    node_open(&b);
    struct raft_message m = msg(RAFT_TIMEOUT_NOW, &away);
    assert_int_equal(raft_net_send(a.net, &m), 0);
    WAIT_STAT(a.net, dials_failed, 1);

    size_t size = 3u << 20;
    char *data = calloc(1, size);
    char src[4200];
    snprintf(src, sizeof src, "%s/busy-source", dir);
    file_put(src, data, size);
    free(data);
    m = msg(RAFT_INSTALL_SNAPSHOT, &b);
    raft_configuration_init(&m.install_snapshot.conf);
    assert_int_equal(raft_configuration_add(&m.install_snapshot.conf, 1, a.addr, RAFT_VOTER), 0);
    assert_int_equal(raft_net_send_snapshot(a.net, &m, src), 0);
    raft_configuration_close(&m.install_snapshot.conf);
    WAIT_STAT(b.net, snapshot_bytes_received, 1);
    int fd = raw_connect(&b);
    node_t *all[] = {&a, &b};
    close_all(all, 2);
    close(fd);
}

static void test_open_refused(void **state)
{
    (void)state;
    node_t a, b;
    node_init(&a, 1);
    node_open(&a);
    node_init(&b, 2);
    strcpy(b.addr, a.addr); /* taken */
    raft_net_options_t opt = {.loop = &loop, .id = 2, .address = b.addr, .recv_dir = dir};
    raft_net_hooks_t hooks = {.receive = on_receive, .term = on_term, .pong = on_pong, .arg = &b};
    char err[256] = "";
    raft_net_t *n = NULL;
    assert_int_equal(raft_net_open(&opt, &hooks, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "address already in use"));
    opt.address = "no-port";
    assert_int_equal(raft_net_open(&opt, &hooks, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "HOST:PORT"));
    node_t *all[] = {&a};
    close_all(all, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
