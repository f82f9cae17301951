/*
 * watcher.c -- ordo_watch_run(): a watch that survives reconnects.
 *
 * State: `resume` is the revision up to which the callback has seen every
 * change (the last PUT/DEL delivered, or a PROGRESS/SYNCED revision);
 * `in_snapshot` is set from a SNAPSHOT watch's start until its SYNCED.
 * Invariant: outside a snapshot, an event reaches the callback only if its
 * revision is above `resume`, and then `resume` becomes it -- so across
 * any number of re-watches FROM resume, nothing is delivered twice and,
 * because the server sends every change after FROM, nothing is skipped.
 * Inside a snapshot, events carry the keys' mod revisions (not in order),
 * so none is filtered and `resume` moves only at SYNCED.
 *
 * Errors: a lost connection is retried for ever (that is what the watcher
 * is for); an error the server will give again however often it is asked
 * (final()) ends the run, and both kinds are told to opts.on_error.
 */
#include "client_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* When the server cannot be reached the client already retried for its
 * reconnect budget; wait this long before the next round. */
#define WATCH_RETRY_PAUSE_MS 100

typedef struct watch_state {
    const ordo_watch_opts_t *o;
    int64_t resume;
    int in_snapshot;
    int have_resume;
} watch_state_t;

/* start() -- (re)issue the watch. ORDO_OK, or an error. */
static int start(ordo_client_t *c, watch_state_t *w)
{
    assert(c != NULL && w != NULL && w->o != NULL);
    unsigned flags = w->o->prefix ? ORDO_WATCH_PREFIX : 0;
    int64_t id;
    int rc;
    if (!w->have_resume && w->o->snapshot) {
        w->in_snapshot = 1;
        return ordo_kv_watch(c, w->o->key, w->o->key_len, flags | ORDO_WATCH_SNAPSHOT, 0, &id);
    }
    if (!w->have_resume) {
        if (w->o->from_set || w->o->from_rev > 0) {
            w->resume = w->o->from_rev;
        } else {
            int64_t oldest;
            if ((rc = ordo_kv_rev(c, &w->resume, &oldest)) != ORDO_OK)
                return rc;
        }
        w->have_resume = 1;
    }
    if (w->in_snapshot) { /* the snapshot was cut short: take it again */
        ordo_watch_event_t ev = { .kind = ORDO_WATCH_RESET, .rev = w->resume };
        if (w->o->fn(w->o->arg, &ev) != 0)
            return 1;
        return ordo_kv_watch(c, w->o->key, w->o->key_len, flags | ORDO_WATCH_SNAPSHOT, 0, &id);
    }
    rc = ordo_kv_watch(c, w->o->key, w->o->key_len, flags, w->resume, &id);
    if (rc == ORDO_ECOMPACTED) {
        ordo_watch_event_t ev = { .kind = ORDO_WATCH_RESET, .rev = w->resume };
        if (w->o->fn(w->o->arg, &ev) != 0)
            return 1;
        w->in_snapshot = 1;
        rc = ordo_kv_watch(c, w->o->key, w->o->key_len, flags | ORDO_WATCH_SNAPSHOT, 0, &id);
    }
    return rc;
}

/* final() -- can retrying not cure rc? A refused password, a watch the
 * server refuses (a revision in the future, a bad argument: -ERR), a
 * server that breaks the protocol or our bounds, and our own errors. */
static int final(int rc)
{
    return rc == ORDO_EAUTH || rc == ORDO_ETLS || rc == ORDO_EINVAL || rc == ORDO_ENOMEM || rc == ORDO_ESERVER ||
           rc == ORDO_EPROTO;
}

static void tell(const ordo_watch_opts_t *o, const ordo_client_t *c, int rc, int is_final)
{
    if (o->on_error == NULL)
        return;
    /* The server's or the connection's text; empty when there is none
     * (the callback names the code with ordo_strerror(): the client
     * itself needs nothing of lib/). */
    o->on_error(o->arg, rc, ordo_client_errstr(c), is_final);
}

/* deliver() -- 1 if the callback asked to stop, -1 to re-watch, 0 else. */
static int deliver(watch_state_t *w, const ordo_watch_event_t *ev)
{
    assert(w != NULL && w->o != NULL && ev != NULL);
    switch (ev->kind) {
    case ORDO_WATCH_PUT:
    case ORDO_WATCH_DEL:
        if (!w->in_snapshot) {
            if (ev->rev <= w->resume)
                return 0;
            w->resume = ev->rev;
        }
        break;
    case ORDO_WATCH_SYNCED:
        w->in_snapshot = 0;
        w->have_resume = 1;
        w->resume = ev->rev;
        break;
    case ORDO_WATCH_PROGRESS:
        if (w->in_snapshot || ev->rev <= w->resume)
            return 0;
        w->resume = ev->rev;
        break;
    case ORDO_WATCH_CANCELLED:
        /* The server stopped it; resume from our own point (which is the
         * last revision we delivered, the one the server names). */
        return -1;
    case ORDO_WATCH_RESET:
        break;
    }
    return w->o->fn(w->o->arg, ev) != 0 ? 1 : 0;
}

int ordo_watch_run(const ordo_watch_opts_t *o, const atomic_bool *stop)
{
    if (o == NULL || o->fn == NULL || o->key == NULL)
        return ORDO_EINVAL;
    ordo_client_opts_t co = client_sliced(o->conn);
    ordo_client_t *c;
    if (ordo_client_new(&c, &co) != ORDO_OK)
        return ORDO_ENOMEM;
    watch_state_t w = { .o = o };
    int rc = ORDO_OK;
    while (!client_stopped(stop)) {
        rc = start(c, &w);
        if (rc == 1) {
            rc = ORDO_OK;
            break;
        }
        if (final(rc)) {
            tell(o, c, rc, 1);
            break;
        }
        if (rc != ORDO_OK) {
            tell(o, c, rc, 0);
            ordo_client_close(c);
            struct timespec ts = { 0, WATCH_RETRY_PAUSE_MS * 1000000L };
            nanosleep(&ts, NULL);
            continue;
        }
        int again = 0;
        while (!again && !client_stopped(stop)) {
            ordo_reply_t *p;
            rc = ordo_client_next_push(c, ORDO_WATCH_POLL_MS, &p);
            if (rc == ORDO_ETIMEDOUT)
                continue;
            if (rc != ORDO_OK) {
                if (final(rc)) { /* a push past our bounds: the server would do it again */
                    tell(o, c, rc, 1);
                    ordo_client_free(c);
                    return rc;
                }
                tell(o, c, rc, 0);
                again = 1; /* connection lost: re-watch from the resume point */
                break;
            }
            ordo_watch_event_t ev;
            int d = 0;
            if (ordo_watch_event_parse(p, &ev) == ORDO_OK)
                d = deliver(&w, &ev);
            ordo_reply_free(p);
            if (d == 1) {
                ordo_client_free(c);
                return ORDO_OK;
            }
            if (d == -1) {
                ordo_client_close(c); /* drop the rest of this watch's stream */
                again = 1;
            }
        }
        rc = ORDO_OK;
    }
    ordo_client_free(c);
    return rc;
}
