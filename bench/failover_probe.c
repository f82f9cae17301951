/*
 * failover_probe.c -- time from killing a cluster's leader to the first
 * acknowledged write, for bench/cluster.sh.
 *
 *   failover_probe ordo|etcd PID PORT[,PORT...] [-t attempt_ms] [-r retry_ms]
 *                  [-l lanes] [-m max_s] [-p path]
 *
 * PID is the leader (the tool sends it SIGKILL); PORTs are the client ports
 * of the surviving members. The tool first connects to every PORT, then
 * kills PID and starts the clock, then writes to every surviving member at
 * once, until one of them acknowledges a write; it prints the time from
 * the kill to that acknowledgement.
 *
 * Per member, -l lanes (default 4), each its own connection with one write
 * in flight: a write is sent; an acknowledgement ends the run; an error
 * reply (ordod's -NOTLEADER, an etcd error status) or a closed or refused
 * connection is tried again on that member after -r ms (default 10); a write
 * unanswered after -t ms (default 200: the member may have forwarded it to
 * the dead leader, where it would wait for etcd's request timeout) is
 * abandoned: its connection is closed and a new one sends a new write at
 * once. The lanes of a member start -t/lanes apart, so a fresh write
 * reaches each member at least that often even while writes hang. A client
 * that does not know the new leader can do no better than this; trying the
 * members in parallel rather than in turn keeps the figure from depending
 * on the order tried. So the figure is late by at most about -t/lanes (50
 * ms by default) when writes hang, and about -r when they are refused; an
 * abandoned write may still be applied later, which changes nothing here
 * (the key is the tool's own).
 *
 *   - ordo: RESP2 `SET failover:probe <n>`; +OK is an acknowledgement.
 *   - etcd: HTTP/1.1 keep-alive `POST <path>` (default /v3/kv/put) with a
 *     JSON put, as put_load; a 200 answer is an acknowledgement.
 *
 * Output: one line, `failover_ms=<ms> port=<member that answered>
 * attempts=<writes sent> errors=<error replies> abandoned=<writes past -t>
 * lost=<closed or refused connections>`; if nothing was acknowledged
 * within -m seconds (default 30), failover_ms=nan and exit status 1.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "loadlib.h"

#define MEMBERS_MAX 16
#define LANES_MAX 16
#define RBUF_BYTES 16384
#define WBUF_BYTES 2048

enum proto { PROTO_ORDO, PROTO_ETCD };

typedef struct member {
    int port;
    int fd;          /* -1: (re)connect at next_at */
    bool busy;       /* a write is in flight */
    double sent_at;  /* when it was sent */
    double next_at;  /* earliest time to send (or connect) again */
    char rbuf[RBUF_BYTES];
    size_t rlen;
    char wbuf[WBUF_BYTES];
    size_t wlen, woff;
} member_t;

static enum proto proto;
static const char *path = "/v3/kv/put";
static uint64_t attempts, errors, abandoned, lost;

static void drop(member_t *m, double at)
{
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
    m->busy = false;
    m->rlen = 0;
    m->next_at = at;
}

static void connect_member(member_t *m, double now, double retry_s)
{
    m->fd = try_connect(m->port);
    if (m->fd < 0) {
        lost++;
        m->next_at = now + retry_s;
        return;
    }
    set_nonblock(m->fd);
}

static void send_write(member_t *m, double now, double retry_s)
{
    char val[32];
    snprintf(val, sizeof val, "%llu", (unsigned long long)attempts);
    int n;
    if (proto == PROTO_ORDO) {
        n = resp_format(m->wbuf, WBUF_BYTES, 3, (const char *[]){"SET", "failover:probe", val});
    } else {
        char k[64], v[64], body[256];
        base64("failover:probe", 14, k);
        base64(val, strlen(val), v);
        snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
        n = http_post_format(m->wbuf, WBUF_BYTES, path, "HTTP/1.1", body);
    }
    if (n < 0) {
        fprintf(stderr, "failover_probe: request too large\n");
        exit(1);
    }
    m->wlen = (size_t)n;
    m->woff = 0;
    m->busy = true;
    m->sent_at = now;
    attempts++;
    if (send_some(m->fd, m->wbuf, m->wlen, &m->woff) != 0 && errno != EAGAIN && errno != EINTR) {
        lost++;
        drop(m, now + retry_s);
    }
}

/* The length of the whole reply at the head of m->rbuf (0: not all here);
 * *ok tells whether it acknowledges the write. */
static size_t reply_len(member_t *m, bool *ok)
{
    const char *p = m->rbuf;
    if (proto == PROTO_ORDO) {
        const char *nl = memchr(p, '\n', m->rlen);
        if (nl == NULL)
            return 0;
        *ok = p[0] == '+';
        return (size_t)(nl + 1 - p);
    }
    long n = http_reply_len(p, m->rlen, ok);
    return n < 0 ? m->rlen : (size_t)n; /* no length: take what came (the server closes after it) */
}

static void usage(void)
{
    fprintf(stderr, "usage: failover_probe ordo|etcd PID PORT[,PORT...] [-t attempt_ms] [-r retry_ms] "
                    "[-l lanes] [-m max_s] [-p path]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    member_t *ms = calloc(MEMBERS_MAX * LANES_MAX, sizeof *ms);
    int ports[MEMBERS_MAX], n_ports = 0, lanes = 4, n_ms;
    double attempt_s = 0.2, retry_s = 0.01, max_s = 30;
    if (ms == NULL)
        die("calloc");
    if (argc < 4)
        usage();
    if (strcmp(argv[1], "ordo") == 0)
        proto = PROTO_ORDO;
    else if (strcmp(argv[1], "etcd") == 0)
        proto = PROTO_ETCD;
    else
        usage();
    pid_t pid = (pid_t)atol(argv[2]);
    if (pid <= 1)
        usage();
    for (const char *q = argv[3]; *q != '\0'; q++) {
        int port = atoi(q);
        if (n_ports == MEMBERS_MAX || port < 1 || port > 65535)
            usage();
        ports[n_ports++] = port;
        q = strchr(q, ',');
        if (q == NULL)
            break;
    }
    for (int i = 4; i < argc; i += 2) {
        if (i + 1 >= argc)
            usage();
        const char *v = argv[i + 1];
        if (strcmp(argv[i], "-t") == 0)
            attempt_s = atof(v) / 1000;
        else if (strcmp(argv[i], "-r") == 0)
            retry_s = atof(v) / 1000;
        else if (strcmp(argv[i], "-l") == 0)
            lanes = atoi(v);
        else if (strcmp(argv[i], "-m") == 0)
            max_s = atof(v);
        else if (strcmp(argv[i], "-p") == 0)
            path = v;
        else
            usage();
    }
    if (n_ports < 1 || lanes < 1 || lanes > LANES_MAX || attempt_s <= 0 || retry_s < 0 || max_s <= 0 || strlen(path) > 200 || path[0] != '/')
        usage();

    n_ms = n_ports * lanes;
    double t = now_s();
    for (int i = 0; i < n_ms; i++) {
        ms[i].port = ports[i % n_ports];
        connect_member(&ms[i], t, 0);
    }

    if (kill(pid, SIGKILL) != 0)
        die("kill");
    double t0 = now_s(), end = t0 + max_s;
    for (int i = 0; i < n_ms; i++)
        ms[i].next_at = t0 + (i / n_ports) * attempt_s / lanes; /* stagger the lanes */
    struct pollfd pfd[MEMBERS_MAX * LANES_MAX];

    while ((t = now_s()) < end) {
        for (int i = 0; i < n_ms; i++) {
            member_t *m = &ms[i];
            if (m->busy && t - m->sent_at > attempt_s) {
                abandoned++;
                drop(m, t);
            }
            if (m->fd < 0 && t >= m->next_at)
                connect_member(m, t, retry_s);
            if (m->fd >= 0 && !m->busy && t >= m->next_at)
                send_write(m, t, retry_s);
            pfd[i].fd = m->fd;
            pfd[i].events = POLLIN | (m->fd >= 0 && m->busy && m->woff < m->wlen ? POLLOUT : 0);
            pfd[i].revents = 0;
        }
        /* Wake for the next retry or abandonment: at most a retry step. */
        double wake = t + (retry_s > 0.001 ? retry_s : 0.001);
        int n = poll_turn(pfd, n_ms, wake < end ? wake : end, t);
        if (n <= 0)
            continue;
        t = now_s();
        for (int i = 0; i < n_ms; i++) {
            member_t *m = &ms[i];
            if (pfd[i].revents == 0 || m->fd < 0)
                continue;
            if ((pfd[i].revents & POLLOUT) && m->woff < m->wlen &&
                send_some(m->fd, m->wbuf, m->wlen, &m->woff) != 0 && errno != EAGAIN && errno != EINTR) {
                lost++;
                drop(m, t + retry_s);
                continue;
            }
            if (!(pfd[i].revents & (POLLIN | POLLERR | POLLHUP)))
                continue;
            enum recv_result rr = recv_all(m->fd, m->rbuf, RBUF_BYTES, &m->rlen);
            bool ok = false;
            size_t used = m->rlen > 0 ? reply_len(m, &ok) : 0;
            if (used > 0 && ok) {
                printf("failover_ms=%.1f port=%d attempts=%llu errors=%llu abandoned=%llu lost=%llu\n",
                       (t - t0) * 1000, m->port, (unsigned long long)attempts, (unsigned long long)errors,
                       (unsigned long long)abandoned, (unsigned long long)lost);
                return 0;
            }
            if (used > 0) {
                /* An error reply: try this member again shortly. */
                errors++;
                memmove(m->rbuf, m->rbuf + used, m->rlen - used);
                m->rlen -= used;
                m->busy = false;
                m->next_at = t + retry_s;
            }
            if (rr == RECV_CLOSED || rr == RECV_FULL) {
                lost++;
                drop(m, t + retry_s);
            }
        }
    }
    printf("failover_ms=nan port=0 attempts=%llu errors=%llu abandoned=%llu lost=%llu\n",
           (unsigned long long)attempts, (unsigned long long)errors, (unsigned long long)abandoned,
           (unsigned long long)lost);
    return 1;
}
