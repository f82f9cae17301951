/*
 * cmd_keyspace.c -- the keyspace as Redis shows it: TYPE, SCAN, KEYS,
 * FLUSHALL, FLUSHDB. The keyspace is the versioned store's live keys;
 * queues, leases, locks and elections have names of their own and are not
 * keys (Q.LIST, LOCK.INFO... list them).
 *
 * SCAN's cursor. Redis's cursor is a position in its hash table; ordo's
 * keys are walked in byte order (the store's ordered index), and a
 * position there is a key, not a number. So the server keeps the cursors:
 * a SCAN that stops before the end registers the last key it examined
 * under a new number and answers that number; SCAN <number> resumes after
 * that key. That gives Redis's guarantees: a key present from the first
 * call to the last is returned (the walk is in key order and resumes after
 * a key, which deletions and insertions do not move), a key is returned at
 * most once per full iteration (the order never goes back), and cursor 0
 * starts and ends it. The cursors are a ring of max-scan-cursors entries,
 * shared by every connection (client pools send the next call on any of
 * theirs): a cursor older than the last max-scan-cursors ones is gone, and
 * SCAN with it answers an error naming that limit, as it does after a
 * restart or, in cluster mode, on another leader. Numbers start from the
 * server's start time, so a cursor of an earlier run is never mistaken
 * for one of this run.
 *
 * Patterns (SCAN MATCH, KEYS) are Redis's glob (base/glob.h): * ? [abc]
 * [^a-z] and \x.
 * The literal start of a pattern, up to its first special character, is
 * used as a prefix of the walk, so SCAN 0 MATCH user:* walks only the keys
 * under "user:".
 *
 * FLUSHALL and FLUSHDB (ordo has one database) delete every key with one
 * REC_FLUSH record: apply deletes the keys in order, one revision each,
 * so watchers see each deletion and history keeps them like DEL's. They
 * leave queues, locks, leases and elections alone: those are not keys,
 * and dropping a held lock or a queued message because a cache was
 * flushed would break their promises (Q.DROP drops a queue).
 *
 * Invariant: every ring entry with a non-zero id owns its key copy; a
 * cursor's id maps to the ring slot id % max-scan-cursors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/glob.h"
#include "cmd.h"

/* ---- the walk ------------------------------------------------------------------ */

typedef struct walk_s {
    cmd_ctx_t *x;
    const resp_arg_t *match;  /* NULL: every key */
    ordo_buf_t keys;          /* the matching keys, as RESP bulks */
    size_t nkeys;
    size_t examined;
    size_t limit;             /* keys to examine (SCAN COUNT), 0: all */
    const char *last;         /* the last key examined (valid during the walk) */
    size_t last_len;
    bool full;                /* stopped at max-reply-bytes */
} walk_t;

static int walk_visit(void *arg, const kv_version_t *v)
{
    walk_t *w = arg;
    w->examined++;
    w->last = v->key;
    w->last_len = v->klen;
    if (w->match == NULL ||
        ordo_glob_match(w->match->ptr, w->match->len, v->key, v->klen)) {
        resp_add_bulk(&w->keys, v->key, v->klen);
        w->nkeys++;
    }
    if (w->keys.len > (size_t)w->x->srv->cfg.max_reply_bytes) {
        w->full = true;
        return 1;
    }
    return w->limit != 0 && w->examined >= w->limit;
}

/* Walk the keys after [after, after+alen) (NULL: from the start) that
 * start with the pattern's literal part. Returns true if the walk reached
 * the end of the keys. */
static bool walk(walk_t *w, const char *after, size_t alen)
{
    const char *pre = w->match ? w->match->ptr : NULL;
    size_t plen = w->match ? ordo_glob_prefix(w->match->ptr, w->match->len) : 0;
    long n = kv_range(core_kv(w->x->srv->core), pre, plen, after, alen, 0, 0, walk_visit, w);
    (void)n;
    return !w->full && (w->limit == 0 || w->examined < w->limit);
}

/* ---- SCAN's cursors -------------------------------------------------------------- */

typedef struct scan_cursor_s {
    uint64_t id;              /* 0: free */
    char *key;                /* the last key examined (owned) */
    size_t klen;
} scan_cursor_t;

struct scan_cursors_s {
    scan_cursor_t *ring;
    size_t n;                 /* max-scan-cursors */
    uint64_t next_id;
};

static struct scan_cursors_s *cursors(server_t *s)
{
    if (s->scan == NULL) {
        s->scan = ordo_xcalloc(1, sizeof *s->scan);
        s->scan->n = (size_t)s->cfg.max_scan_cursors;
        s->scan->ring = ordo_xcalloc(s->scan->n, sizeof *s->scan->ring);
        /* Start from the time, shifted past any count one run reaches:
         * a cursor of an earlier run never names one of this run. */
        s->scan->next_id = (server_now_ms() & 0xffffffffffULL) << 20;
        if (s->scan->next_id == 0)
            s->scan->next_id = 1;
    }
    return s->scan;
}

static uint64_t cursor_new(server_t *s, const char *key, size_t klen)
{
    struct scan_cursors_s *sc = cursors(s);
    uint64_t id = sc->next_id++;
    if (id == 0)
        id = sc->next_id++;
    scan_cursor_t *e = &sc->ring[id % sc->n];
    free(e->key);
    e->id = id;
    e->key = ordo_xmalloc(klen ? klen : 1);
    memcpy(e->key, key, klen);
    e->klen = klen;
    return id;
}

static const scan_cursor_t *cursor_find(server_t *s, uint64_t id)
{
    struct scan_cursors_s *sc = cursors(s);
    const scan_cursor_t *e = &sc->ring[id % sc->n];
    return e->id == id ? e : NULL;
}

void cmd_keyspace_destroy(server_t *s)
{
    if (s->scan == NULL)
        return;
    for (size_t i = 0; i < s->scan->n; i++)
        free(s->scan->ring[i].key);
    free(s->scan->ring);
    free(s->scan);
    s->scan = NULL;
}

/* SCAN's default COUNT, Redis's: keys examined per call. */
#define SCAN_COUNT_DEFAULT 10

/* SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: [next cursor,
 * [keys]]; the next cursor is 0 when the walk is over. */
static void cmd_scan(cmd_ctx_t *x)
{
    uint64_t id = 0, count = SCAN_COUNT_DEFAULT;
    const resp_arg_t *c = &x->argv[1];
    for (size_t i = 0; i < c->len; i++) { /* Redis's text for a cursor that is no number */
        uint64_t d = (uint64_t)(c->ptr[i] - '0');
        if (c->ptr[i] < '0' || c->ptr[i] > '9' || id > (UINT64_MAX - d) / 10) {
            reply_err(x, "ERR invalid cursor");
            return;
        }
        id = id * 10 + d;
    }
    if (c->len == 0) {
        reply_err(x, "ERR invalid cursor");
        return;
    }
    walk_t w = {.x = x};
    bool strings = true;
    for (size_t i = 2; i < x->argc; i++) {
        if (arg_is(x, i, "MATCH") && i + 1 < x->argc) {
            w.match = &x->argv[++i];
        } else if (arg_is(x, i, "COUNT") && i + 1 < x->argc) {
            if (!arg_u64(x, ++i, &count))
                return;
            if (count == 0) {
                reply_syntax_at(x, i);
                return;
            }
        } else if (arg_is(x, i, "TYPE") && i + 1 < x->argc) {
            strings = arg_is(x, ++i, "string"); /* every key is a string */
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    const scan_cursor_t *from = NULL;
    if (id != 0 && (from = cursor_find(x->srv, id)) == NULL) {
        reply_errf(x, "ERR invalid cursor %llu: unknown to this server, or older than the last max-scan-cursors "
                      "(%lld) cursors of all clients; start again from 0",
                   (unsigned long long)id, (long long)x->srv->cfg.max_scan_cursors);
        return;
    }
    uint64_t next = 0;
    if (strings) {
        w.limit = count > SIZE_MAX ? SIZE_MAX : (size_t)count;
        bool done = walk(&w, from ? from->key : NULL, from ? from->klen : 0);
        if (!done && w.examined > 0)
            next = cursor_new(x->srv, w.last, w.last_len);
    }
    char num[24];
    int n = snprintf(num, sizeof num, "%llu", (unsigned long long)next);
    resp_add_array(x->out, 2);
    resp_add_bulk(x->out, num, (size_t)n);
    resp_add_array(x->out, w.nkeys);
    if (w.keys.len)
        ordo_buf_append(x->out, w.keys.data, w.keys.len);
    ordo_buf_free(&w.keys);
}

/* KEYS pattern: every matching key, in byte order; -LIMIT (pointing to
 * SCAN) past max-reply-bytes. */
static void cmd_keys(cmd_ctx_t *x)
{
    walk_t w = {.x = x, .match = &x->argv[1]};
    walk(&w, NULL, 0);
    if (w.full) {
        reply_errf(x, "LIMIT reply would pass max-reply-bytes (%lld); walk the keys with SCAN cursor MATCH pattern",
                   (long long)x->srv->cfg.max_reply_bytes);
    } else {
        resp_add_array(x->out, w.nkeys);
        if (w.keys.len)
            ordo_buf_append(x->out, w.keys.data, w.keys.len);
    }
    ordo_buf_free(&w.keys);
}

/* TYPE key: string, or none. */
static void cmd_type(cmd_ctx_t *x)
{
    kv_version_t buf;
    bool live = kv_get(core_kv(x->srv->core), x->argv[1].ptr, x->argv[1].len, &buf) != NULL;
    resp_add_simple(x->out, live ? "string" : "none");
}

/* FLUSHALL / FLUSHDB [ASYNC|SYNC]: OK. Both modes delete at once. */
static void cmd_flush(cmd_ctx_t *x)
{
    if (x->argc > 2 || (x->argc == 2 && !arg_is(x, 1, "ASYNC") && !arg_is(x, 1, "SYNC"))) {
        reply_syntax_at(x, 1);
        return;
    }
    record_t rec = {.type = REC_FLUSH};
    apply_result_t res;
    if (cmd_write(x, &rec, &res))
        reply_ok(x);
}

const cmd_def_t cmd_keyspace_defs[] = {
    {"TYPE", 2, 0, cmd_type, "The type of a key: string (every key is one), or none", "key", "generic"},
    {"SCAN", -2, 0, cmd_scan,
     "Walk the keys in pages: [next cursor, keys]; cursor 0 starts and ends the walk",
     "cursor [MATCH pattern] [COUNT count] [TYPE type]", "generic"},
    {"KEYS", 2, 0, cmd_keys, "Every key matching a glob pattern (use SCAN on large stores)", "pattern", "generic"},
    {"FLUSHALL", -1, CMD_WRITE, cmd_flush,
     "Delete every key, one revision each; queues, locks, leases and elections stay", "[ASYNC|SYNC]", "server"},
    {"FLUSHDB", -1, CMD_WRITE, cmd_flush,
     "Delete every key (ordo has one database), as FLUSHALL", "[ASYNC|SYNC]", "server"},
};

const size_t cmd_keyspace_ndefs = sizeof cmd_keyspace_defs / sizeof cmd_keyspace_defs[0];
