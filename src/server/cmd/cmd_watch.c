/*
 * cmd_watch.c -- KV.WATCH and KV.UNWATCH, and delivery of watch events.
 *
 * Guarantees, per watch: events in revision order, without gaps or
 * duplicates, starting after FROM (or with the next revision); a watch that
 * cannot be continued is cancelled with the last revision it delivered, so
 * the client resumes with FROM that revision and loses nothing.
 *
 * Each watch is in one of three states:
 *   SNAPSHOT  (KV.WATCH ... SNAPSHOT, or FROM ... RESYNC when compacted) the
 *             matching keys as of snap_rev are sent in key order, while the
 *             connection's unsent output stays under WATCH_BEHIND_BYTES;
 *             the walk resumes after the last key sent when the output
 *             drains. Then watch-synced snap_rev, and the watch continues
 *             in CATCHUP from snap_rev. If compaction passes snap_rev
 *             before the walk ends, the watch is cancelled with last
 *             revision 0 ("compacted"): the client starts over. So a
 *             snapshot of any size costs a bounded output buffer.
 *   LIVE      every matching change is encoded into its connection's output
 *             as it is applied (the bytes all its watchers share are encoded
 *             once per change: copied when small, referenced as one shared
 *             blob from WATCH_SHARE_MIN_BYTES on, so N watchers of a large
 *             value hold one copy of it, not N); last_rev = the newest
 *             revision it has seen.
 *   CATCHUP   the connection's unsent output passed WATCH_BEHIND_BYTES, so
 *             live events are no longer encoded for it. When its output
 *             drains, the watch reads the changes after last_rev from the
 *             store's change log, a screenful at a time, until it reaches
 *             the end and is LIVE again. If compaction has passed last_rev,
 *             the watch is cancelled (watch-cancelled, reason "compacted").
 * So a slow reader costs a bounded output buffer plus a revision number,
 * never a queue of events that grows with the write rate. A watch created
 * with FROM starts in CATCHUP.
 *
 * An HTTP event stream (conn->sse) is a watcher like the others, in the
 * same states under the same bound, but its events are written as
 * Server-Sent Events (cmd_http_sse_change()), the same bytes for all its
 * watchers: a live change is encoded once for all streams and shared as
 * one blob from WATCH_SHARE_MIN_BYTES on, and net/http.c passes them
 * through.
 *
 * Invariant: a watch's events are only ever written from one source at a
 * time: the store as of snap_rev in SNAPSHOT, live delivery in LIVE, the
 * log in CATCHUP; last_rev moves forward
 * only, and only over revisions whose events (if any matched) were written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "writer/coord_wait.h"

enum { WATCH_LIVE = 0, WATCH_CATCHUP = 1, WATCH_SNAPSHOT = 2 };

/* Unsent output above which a watch stops receiving live events and catches
 * up from history later. */
#define WATCH_BEHIND_BYTES (1u << 20)

/* An event tail at least this large goes to its watchers as one shared
 * blob (conn_add_shared()) rather than a copy each: below it, a copy costs
 * less than the reference and the extra write piece. */
#define WATCH_SHARE_MIN_BYTES (4u << 10)

static void add_value_or_nil(ordo_buf_t *out, int proto, const kv_version_t *v)
{
    if (v == NULL || v->deleted)
        resp_add_null(out, proto);
    else
        resp_add_bulk(out, v->value, v->vlen);
}

/* An event is ["watch", id, rev, "put"|"del", key, value|nil [, prev|nil]]:
 * the push header, then the watch's own w->head ("watch" and its id), then
 * a tail that depends only on the change, the protocol and PREVVAL. Live
 * delivery encodes each tail variant once per change and copies the bytes
 * into every watcher's output. */
static void add_event_tail(ordo_buf_t *out, int proto, bool prevval, const kv_version_t *cur,
                           const kv_version_t *prev)
{
    resp_add_uint(out, cur->mod_rev);
    resp_add_bulk_str(out, cur->deleted ? "del" : "put");
    resp_add_bulk(out, cur->key, cur->klen);
    add_value_or_nil(out, proto, cur);
    if (prevval)
        add_value_or_nil(out, proto, prev);
}

/* The push header and w->head, with room reserved for tail_len more bytes;
 * returns where the tail goes (the caller adds tail_len to out->len). */
static char *add_event_head(conn_t *c, const watch_t *w, size_t tail_len)
{
    ordo_buf_t *out = &c->out;
    char *p = ordo_buf_reserve(out, 4 + (size_t)w->head_len + tail_len);
    *p++ = c->proto == 3 ? '>' : '*';
    *p++ = w->prevval ? '7' : '6';
    *p++ = '\r';
    *p++ = '\n';
    memcpy(p, w->head, w->head_len);
    out->len += 4 + (size_t)w->head_len;
    c->srv->stats.watch_events_total++;
    return p + w->head_len;
}

/* An event stream's (c->sse) change, the same bytes for all its watchers:
 * no id for a snapshot's keys (they come at their own older revisions;
 * the stream's id moves at watch-synced). */
static void add_sse_change(ordo_buf_t *out, bool with_id, const kv_version_t *cur)
{
    cmd_http_sse_change(out, with_id, cur->key, cur->klen, cur->deleted ? NULL : cur->value, cur->vlen,
                        cur->mod_rev);
}

static void add_event(conn_t *c, const watch_t *w, const kv_version_t *cur, const kv_version_t *prev)
{
    if (c->sse) {
        add_sse_change(&c->out, w->state != WATCH_SNAPSHOT, cur);
        c->srv->stats.watch_events_total++;
        return;
    }
    add_event_head(c, w, 0);
    add_event_tail(&c->out, c->proto, w->prevval, cur, prev);
}

/* kind is "watch-synced" or "watch-progress". */
static void add_marker(conn_t *c, const char *kind, uint64_t id, uint64_t rev)
{
    if (c->sse) {
        cmd_http_sse_marker(&c->out, kind + strlen("watch-"), rev, true);
        return;
    }
    resp_add_push(&c->out, c->proto, 3);
    resp_add_bulk_str(&c->out, kind);
    resp_add_uint(&c->out, id);
    resp_add_uint(&c->out, rev);
}

static void watch_free(conn_t *c, watch_t *w)
{
    watch_remove(&c->srv->watches, w);
    if (w->oprev != NULL)
        w->oprev->onext = w->onext;
    else
        c->watches = w->onext;
    if (w->onext != NULL)
        w->onext->oprev = w->oprev;
    c->nwatches--;
    ordo_buf_free(&w->snap_after);
    free(w->name);
    free(w);
}

static void watch_cancel(conn_t *c, watch_t *w, const char *reason)
{
    if (c->sse) {
        /* The stream ends; its client resumes from its Last-Event-ID. */
        cmd_http_sse_marker(&c->out, "cancelled", w->last_rev, false);
        c->close_after_write = true;
        c->srv->stats.watch_cancelled_total++;
        watch_free(c, w);
        return;
    }
    resp_add_push(&c->out, c->proto, 4);
    resp_add_bulk_str(&c->out, "watch-cancelled");
    resp_add_uint(&c->out, w->id);
    resp_add_uint(&c->out, w->last_rev);
    resp_add_bulk_str(&c->out, reason);
    c->srv->stats.watch_cancelled_total++;
    watch_free(c, w);
}

/* Read the change log after w->last_rev until the output is full again or
 * the log ends. Returns false if the watch was cancelled. */
static bool catch_up(conn_t *c, watch_t *w)
{
    const kv_t *kv = core_kv(c->srv->core);
    kv_cursor_t cur;
    if (kv_log_seek(kv, w->last_rev, &cur) != KV_OK) {
        watch_cancel(c, w, "compacted");
        return false;
    }
    /* Once the log has failed, revisions above the durable one exist only in
     * memory: a watcher must never see them. */
    server_t *srv = c->srv;
    uint64_t limit = server_readonly(srv) != NULL ? persist_durable_rev(srv) : UINT64_MAX;
    kv_change_t ch;
    while (conn_pending(c) < WATCH_BEHIND_BYTES) {
        int rc = kv_log_next(kv, &cur, &ch);
        if (rc < 0) {
            watch_cancel(c, w, "compacted");
            return false;
        }
        if (rc == 0 || ch.cur.mod_rev > limit) {
            uint64_t rev = core_rev(srv->core);
            w->state = WATCH_LIVE;
            w->last_rev = rev < limit ? rev : limit;
            return true;
        }
        if (watch_covers(w, ch.cur.key, ch.cur.klen)) {
            kv_version_t prev;
            add_event(c, w, &ch.cur, w->prevval ? kv_change_prev(&ch, &prev) : NULL);
            w->last_sent_ms = c->srv->now_ms;
        }
        w->last_rev = ch.cur.mod_rev;
    }
    return true;
}

static bool snap_step(conn_t *c, watch_t *w);

void cmd_conn_drained(conn_t *c)
{
    watch_t *next;
    for (watch_t *w = c->watches; w != NULL && !c->closing; w = next) {
        next = w->onext;
        if (conn_pending(c) >= WATCH_BEHIND_BYTES)
            break;
        if (w->state == WATCH_CATCHUP)
            catch_up(c, w);
        else if (w->state == WATCH_SNAPSHOT)
            snap_step(c, w);
    }
    if (c->out.len > 0 || c->shared.n > 0)
        conn_mark_dirty(c);
}

void cmd_conn_closed(conn_t *c)
{
    /* Its parked command is dropped without an answer, its observers go. */
    size_t observers = c->observers.len;
    writer_client_gone(c->srv, c->waiter, &c->observers);
    c->waiter = NULL;
    c->nwatches -= observers;
    cmd_txn_conn_closed(c);
    while (c->watches != NULL)
        watch_free(c, c->watches);
}

/* The core's change callback: deliver to every LIVE watch that covers the
 * key. The tails are encoded lazily, one per (protocol, PREVVAL) in use. */
typedef struct deliver_ctx_s {
    const kv_change_t *ch;
    ordo_buf_t tail[2][2];       /* [proto == 3][prevval] */
    bool have[2][2];
    ordo_blob_t *blob[2][2];     /* the tail as a shared blob, once one watcher needed it */
    ordo_buf_t sse;              /* the whole event of the event streams (c->sse) */
    bool have_sse;
    ordo_blob_t *sse_blob;
} deliver_ctx_t;

/* Deliver to an event stream: the event is encoded once per change, and
 * from WATCH_SHARE_MIN_BYTES on shared as one blob by every stream, as
 * RESP watchers share their tail. */
static void deliver_sse(deliver_ctx_t *d, conn_t *c)
{
    if (!d->have_sse) {
        add_sse_change(&d->sse, true, &d->ch->cur);
        d->have_sse = true;
    }
    c->srv->stats.watch_events_total++;
    if (d->sse.len < WATCH_SHARE_MIN_BYTES) {
        ordo_buf_append(&c->out, d->sse.data, d->sse.len);
        return;
    }
    if (d->sse_blob == NULL)
        d->sse_blob = ordo_blob_new(d->sse.data, d->sse.len);
    conn_add_shared(c, d->sse_blob);
}

/* Deliver to a RESP watcher: the tail of its (protocol, PREVVAL) variant,
 * encoded once per change, behind its own head. */
static void deliver_resp(deliver_ctx_t *d, conn_t *c, const watch_t *w)
{
    int p3 = c->proto == 3, pv = w->prevval;
    ordo_buf_t *t = &d->tail[p3][pv];
    if (!d->have[p3][pv]) {
        kv_version_t prev;
        add_event_tail(t, c->proto, w->prevval, &d->ch->cur, w->prevval ? kv_change_prev(d->ch, &prev) : NULL);
        d->have[p3][pv] = true;
    }
    if (t->len >= WATCH_SHARE_MIN_BYTES) {
        if (d->blob[p3][pv] == NULL)
            d->blob[p3][pv] = ordo_blob_new(t->data, t->len);
        add_event_head(c, w, 0);
        conn_add_shared(c, d->blob[p3][pv]);
    } else {
        char *dst = add_event_head(c, w, t->len);
        memcpy(dst, t->data, t->len);
        c->out.len += t->len;
    }
}

static void deliver_one(watch_t *w, void *arg)
{
    deliver_ctx_t *d = arg;
    conn_t *c = w->owner;
    if (w->state != WATCH_LIVE || c->closing)
        return;
    if (conn_pending(c) >= WATCH_BEHIND_BYTES) {
        w->state = WATCH_CATCHUP; /* last_rev stays at what was delivered */
        return;
    }
    if (c->sse)
        deliver_sse(d, c);
    else
        deliver_resp(d, c, w);
    w->last_rev = d->ch->cur.mod_rev;
    w->last_sent_ms = c->srv->now_ms;
    conn_mark_dirty(c);
}

static void on_change(void *arg, const kv_change_t *ch)
{
    server_t *s = arg;
    if (s->watches.count == 0)
        return; /* nobody watches: nothing to encode, nothing to free (every write asks) */
    deliver_ctx_t d = {.ch = ch};
    watch_match(&s->watches, ch->cur.key, ch->cur.klen, deliver_one, &d);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            ordo_buf_free(&d.tail[i][j]);
            if (d.blob[i][j] != NULL)
                ordo_blob_unref(d.blob[i][j]); /* the watchers hold theirs */
        }
    ordo_buf_free(&d.sse);
    if (d.sse_blob != NULL)
        ordo_blob_unref(d.sse_blob);
}

/* ---- snapshot ------------------------------------------------------------------ */

typedef struct snap_ctx_s {
    conn_t *c;
    watch_t *w;
    bool paused;                 /* stopped because the output is full */
} snap_ctx_t;

static int snap_visit(void *arg, const kv_version_t *v)
{
    snap_ctx_t *sc = arg;
    watch_t *w = sc->w;
    add_event(sc->c, w, v, NULL);
    w->snap_after.len = 0;
    ordo_buf_append(&w->snap_after, v->key, v->klen); /* data != NULL after, even for an empty key */
    if (conn_pending(sc->c) >= WATCH_BEHIND_BYTES) {
        sc->paused = true;
        return 1;
    }
    return 0;
}

/* Send the next page of a SNAPSHOT watch: keys after snap_after as of
 * snap_rev, until the output is full or the keys end; at the end,
 * watch-synced and on to CATCHUP. Returns false if the watch was
 * cancelled. */
static bool snap_step(conn_t *c, watch_t *w)
{
    const kv_t *kv = core_kv(c->srv->core);
    snap_ctx_t sc = {c, w, false};
    long n = 0;
    if (w->snap_rev == 0) {
        /* nothing was ever written: the snapshot is empty (and at_rev 0
         * would mean "current" to the store) */
    } else if (w->prefix) {
        n = kv_range(kv, w->name, w->nlen, w->snap_after.data, w->snap_after.len, w->snap_rev, 0, snap_visit, &sc);
    } else {
        kv_version_t buf;
        const kv_version_t *v = NULL;
        n = kv_get_at(kv, w->name, w->nlen, w->snap_rev, &buf, &v) == KV_OK ? 0 : KV_ECOMPACTED;
        if (n == 0 && v != NULL && !v->deleted)
            add_event(c, w, v, NULL);
    }
    if (n == KV_ECOMPACTED) {
        w->last_rev = 0; /* nothing of the snapshot counts: start over */
        watch_cancel(c, w, "compacted");
        return false;
    }
    if (sc.paused)
        return true;
    add_marker(c, "watch-synced", w->id, w->snap_rev);
    w->last_rev = w->snap_rev;
    w->last_sent_ms = c->srv->now_ms;
    ordo_buf_free(&w->snap_after);
    w->state = WATCH_CATCHUP;
    return catch_up(c, w);
}

/* Start sending the matching keys as of the current revision (the durable
 * one after a log failure: a watcher never sees what a crash takes back). */
static void send_snapshot(conn_t *c, watch_t *w)
{
    server_t *srv = c->srv;
    uint64_t rev = core_rev(srv->core);
    if (server_readonly(srv) != NULL && rev > persist_durable_rev(srv))
        rev = persist_durable_rev(srv);
    w->snap_rev = rev;
    w->state = WATCH_SNAPSHOT;
    snap_step(c, w);
}

/* ---- commands ------------------------------------------------------------------ */

/* KV.WATCH key [PREFIX] [FROM rev [RESYNC] | SNAPSHOT] [PREVVAL] */
static void cmd_kv_watch(cmd_ctx_t *x)
{
    conn_t *c = x->conn;
    bool prefix = false, prevval = false, snapshot = false, resync = false, has_from = false;
    uint64_t from = 0;
    for (size_t i = 2; i < x->argc; i++) {
        if (arg_is(x, i, "PREFIX"))
            prefix = true;
        else if (arg_is(x, i, "PREVVAL"))
            prevval = true;
        else if (arg_is(x, i, "SNAPSHOT"))
            snapshot = true;
        else if (arg_is(x, i, "RESYNC"))
            resync = true;
        else if (arg_is(x, i, "FROM") && i + 1 < x->argc) {
            if (!arg_u64(x, ++i, &from))
                return;
            has_from = true;
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    if ((snapshot && has_from) || (resync && !has_from)) {
        reply_err(x, "ERR syntax error: use FROM rev [RESYNC] or SNAPSHOT, not both");
        return;
    }
    if (!arg_name_ok(x, 1))
        return;
    if (c->nwatches >= (size_t)x->srv->cfg.max_watches_per_client) {
        reply_errf(x, "LIMIT this connection has %zu watches (max-watches-per-client)", c->nwatches);
        return;
    }
    const kv_t *kv = core_kv(x->srv->core);
    /* A FROM beyond the current revision cannot be honoured: the next
     * events would be at or below it. Refuse it, as KV.COMPACT does, rather
     * than wait: a client can only hold such a revision from another
     * server's history, and silently skipping would hide that. */
    if (has_from && from > core_rev(x->srv->core)) {
        reply_errf(x, "ERR revision %llu is in the future (current revision %llu)", (unsigned long long)from,
                   (unsigned long long)core_rev(x->srv->core));
        return;
    }
    if (has_from && from + 1 < kv_oldest_rev(kv)) {
        if (!resync) {
            reply_errf(x, "COMPACTED %llu", (unsigned long long)kv_oldest_rev(kv));
            return;
        }
        snapshot = true;
    }
    watch_t *w = ordo_xcalloc(1, sizeof *w);
    w->id = ++x->srv->next_watch_id;
    w->head_len = (uint8_t)snprintf(w->head, sizeof w->head, "$5\r\nwatch\r\n:%llu\r\n",
                                    (unsigned long long)w->id);
    w->owner = c;
    w->nlen = x->argv[1].len;
    w->name = ordo_xmalloc(w->nlen ? w->nlen : 1);
    memcpy(w->name, x->argv[1].ptr, w->nlen);
    w->prefix = prefix;
    w->prevval = prevval;
    w->last_sent_ms = c->srv->now_ms;
    w->onext = c->watches;
    if (c->watches != NULL)
        c->watches->oprev = w;
    c->watches = w;
    c->nwatches++;
    watch_add(&x->srv->watches, w);
    resp_add_uint(x->out, w->id);
    if (snapshot) {
        send_snapshot(c, w);
    } else if (has_from) {
        w->last_rev = from;
        w->state = WATCH_CATCHUP;
        catch_up(c, w);
    } else {
        w->last_rev = core_rev(x->srv->core);
        w->state = WATCH_LIVE;
    }
}

/* KV.UNWATCH [id] */
static void cmd_kv_unwatch(cmd_ctx_t *x)
{
    conn_t *c = x->conn;
    uint64_t id = 0;
    if (x->argc > 2) {
        reply_syntax_at(x, 2);
        return;
    }
    if (x->argc == 2 && !arg_u64(x, 1, &id))
        return;
    int64_t n = 0;
    watch_t *next;
    for (watch_t *w = c->watches; w != NULL; w = next) {
        next = w->onext;
        if (id == 0 || w->id == id) {
            watch_free(c, w);
            n++;
        }
    }
    size_t gone = coord_wait_unobserve(c->srv, &c->observers, id);
    c->nwatches -= gone;
    n += (int64_t)gone;
    resp_add_int(x->out, n);
}

/* Progress: an idle LIVE watch learns the current revision, so its resume
 * point moves even when nothing it watches changes. Cron's hook
 * (writer/turn.c), after persist's and net's. */
void cmd_watch_cron(server_t *s)
{
    cmd_acl_cron(s);
    uint64_t now = s->now_ms;
    if (now < s->next_progress_ms)
        return;
    uint64_t interval = (uint64_t)s->cfg.watch_progress_ms;
    s->next_progress_ms = now + interval / 4;
    uint64_t rev = core_rev(s->core);
    if (server_readonly(s) != NULL && rev > persist_durable_rev(s))
        rev = persist_durable_rev(s); /* the log failed: never name a revision it did not store */
    for (conn_t *c = conn_first(&s->net.conns); c != NULL; c = conn_next(c)) {
        for (watch_t *w = c->watches; w != NULL && !c->closing; w = w->onext) {
            if (w->state != WATCH_LIVE || now - w->last_sent_ms < interval)
                continue;
            w->last_rev = rev;
            w->last_sent_ms = now;
            add_marker(c, "watch-progress", w->id, rev);
            conn_mark_dirty(c); /* flushed at the end of this loop turn (the per-turn hook) */
        }
    }
}

const cmd_def_t cmd_watch_defs[] = {
    {"KV.WATCH", -2, CMD_WATCHMODE, cmd_kv_watch,
     "Watch a key or prefix: the watch id, then an event per change, resumable from a revision",
     "key [PREFIX] [FROM rev [RESYNC]|SNAPSHOT] [PREVVAL]", "ordo-kv"},
    {"KV.UNWATCH", -1, CMD_WATCHMODE | CMD_NOSTATE, cmd_kv_unwatch,
     "Remove one watch or all of the connection's; the number removed",
     "[id]", "ordo-kv"},
};

const size_t cmd_watch_ndefs = sizeof cmd_watch_defs / sizeof cmd_watch_defs[0];

void cmd_watch_init(server_t *s) { core_set_change_cb(s->core, on_change, s); }
