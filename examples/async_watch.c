/*
 * async_watch.c -- a resuming watcher on the asynchronous client
 * (ordo/client_uv.h) and a libuv loop of its own.
 *
 *   async_watch [-h HOST] -p PORT [-T CA_FILE] -x PREFIX -f FROM_REV [-n EVENTS]
 *
 * On every (re)connect it sends KV.WATCH PREFIX FROM <last revision
 * printed>, so after a server restart it carries on with no gap; events at
 * or below that revision (a repeat) are dropped. Prints "REV put KEY VALUE"
 * / "REV del KEY" and exits 0 after EVENTS events. -T speaks TLS to a
 * tls-port, verifying the server against CA_FILE and HOST.
 */
#include "ordo/client_uv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct app {
    uv_loop_t *loop;
    ordo_aclient_t *c;
    const char *prefix;
    int64_t resume;
    long want, seen;
} app_t;

static void on_watch_reply(ordo_aclient_t *c, int status, const ordo_reply_t *r, void *arg)
{
    (void)c;
    (void)arg;
    if (status != ORDO_OK || r->type == ORDO_REPLY_ERROR)
        fprintf(stderr, "async_watch: KV.WATCH: %s %s\n", ordo_strerror(status),
                r && r->str ? r->str : "");
    /* ECONN: the connect callback will watch again */
}

static void on_connect(ordo_aclient_t *c, int status, void *arg)
{
    app_t *a = arg;
    if (status != ORDO_OK) {
        fprintf(stderr, "async_watch: connect: %s\n", ordo_strerror(status));
        return;
    }
    char from[24];
    snprintf(from, sizeof from, "%" PRId64, a->resume);
    const char *argv[] = { "KV.WATCH", a->prefix, "PREFIX", "FROM", from };
    ordo_aclient_command(c, 0, 5, argv, NULL, on_watch_reply, a);
}

static void on_push(ordo_aclient_t *c, const ordo_reply_t *p, void *arg)
{
    app_t *a = arg;
    ordo_watch_event_t ev;
    if (ordo_watch_event_parse(p, &ev) != ORDO_OK)
        return;
    if (ev.kind == ORDO_WATCH_PROGRESS && ev.rev > a->resume)
        a->resume = ev.rev;
    if ((ev.kind != ORDO_WATCH_PUT && ev.kind != ORDO_WATCH_DEL) || ev.rev <= a->resume)
        return;
    a->resume = ev.rev;
    if (ev.kind == ORDO_WATCH_PUT)
        printf("%" PRId64 " put %.*s %.*s\n", ev.rev, (int)ev.key_len, ev.key, (int)ev.value_len, ev.value);
    else
        printf("%" PRId64 " del %.*s\n", ev.rev, (int)ev.key_len, ev.key);
    fflush(stdout);
    if (a->want > 0 && ++a->seen >= a->want)
        ordo_aclient_free(c);
}

int main(int argc, char **argv)
{
    app_t a = { 0 };
    ordo_client_opts_t o = { .reconnect_timeout_ms = ORDO_WAIT_FOREVER };
    int opt;
    while ((opt = getopt(argc, argv, "h:p:T:x:f:n:")) != -1) {
        switch (opt) {
        case 'h': o.host = optarg; break;
        case 'p': o.port = atoi(optarg); break;
        case 'T': o.tls = 1; o.tls_ca_file = optarg; break;
        case 'x': a.prefix = optarg; break;
        case 'f': a.resume = atoll(optarg); break;
        case 'n': a.want = atol(optarg); break;
        default: return 2;
        }
    }
    if (a.prefix == NULL)
        return fprintf(stderr, "usage: async_watch [-h HOST] -p PORT [-T CA_FILE] -x PREFIX -f FROM [-n EVENTS]\n"), 2;
    uv_loop_t loop;
    uv_loop_init(&loop);
    if (ordo_aclient_new(&a.c, &loop, &o) != ORDO_OK)
        return 1;
    ordo_aclient_on_connect(a.c, on_connect, &a);
    ordo_aclient_on_push(a.c, on_push, &a);
    uv_run(&loop, UV_RUN_DEFAULT); /* ends once the client is closed */
    uv_loop_close(&loop);
    return 0;
}
