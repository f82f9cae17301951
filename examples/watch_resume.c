/*
 * watch_resume.c -- a watcher that resumes (ordo_watch_run): it mirrors
 * the keys under a prefix into memory and prints each change as
 * "REV put KEY VALUE" / "REV del KEY", and "reset" when the history it
 * needed was compacted (the mirror is then rebuilt from the snapshot that
 * follows). Kill the server, restart it: the watcher carries on from the
 * last revision it printed, with no gap and no repeat.
 *
 *   watch_resume (-p PORT | -a H:P,H:P...) -x PREFIX [-f FROM_REV] [-n EVENTS] [-C CA]
 *
 * Exits 0 after EVENTS put/del events (default: never). -C speaks TLS to
 * the servers' tls-ports, verifying them against the CA certificate file CA.
 */
#include "ordo/client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct app {
    long want, seen;
} app_t;

static int on_event(void *arg, const ordo_watch_event_t *ev)
{
    app_t *a = arg;
    switch (ev->kind) {
    case ORDO_WATCH_PUT:
        printf("%" PRId64 " put %.*s %.*s\n", ev->rev, (int)ev->key_len, ev->key, (int)ev->value_len,
               ev->value ? ev->value : "");
        break;
    case ORDO_WATCH_DEL:
        printf("%" PRId64 " del %.*s\n", ev->rev, (int)ev->key_len, ev->key);
        break;
    case ORDO_WATCH_RESET:
        printf("reset\n");
        break;
    default:
        return 0;
    }
    fflush(stdout);
    if (ev->kind != ORDO_WATCH_RESET && a->want > 0 && ++a->seen >= a->want)
        return 1;
    return 0;
}

int main(int argc, char **argv)
{
    app_t a = { 0 };
    ordo_watch_opts_t o = { .fn = on_event, .arg = &a, .prefix = 1 };
    int opt;
    while ((opt = getopt(argc, argv, "p:a:x:f:n:C:")) != -1) {
        switch (opt) {
        case 'p': o.conn.port = atoi(optarg); break;
        case 'a': o.conn.addrs = optarg; break; /* a cluster's members */
        case 'x': o.key = optarg; break;
        case 'f': o.from_rev = atoll(optarg); break;
        case 'n': a.want = atol(optarg); break;
        case 'C': o.conn.tls = 1; o.conn.tls_ca_file = optarg; break; /* a tls-port, verified against CA */
        default: return 2;
        }
    }
    if (o.key == NULL)
        return fprintf(stderr, "usage: watch_resume (-p PORT | -a H:P,...) -x PREFIX [-f FROM] [-n EVENTS] [-C CA]\n"), 2;
    o.key_len = strlen(o.key);
    o.conn.reconnect_timeout_ms = ORDO_WAIT_FOREVER;
    int rc = ordo_watch_run(&o, NULL);
    if (rc != ORDO_OK)
        fprintf(stderr, "watch_resume: %s\n", ordo_strerror(rc));
    return rc == ORDO_OK ? 0 : 1;
}
