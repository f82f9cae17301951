/*
 * core.c -- record apply, revisions, expiry and automatic compaction; see
 * core.h for the contract.
 *
 * Expiry index: a hash table from key to an exp_t, plus a binary min-heap of
 * the same exp_t ordered by deadline (heap.h: each exp_t knows its slot), so
 * setting, clearing and finding the earliest deadline are O(log n) and
 * nothing scans the keyspace.
 *
 * Automatic compaction: after each change to a key, if the history holds
 * more than history_changes changes, or their key and value bytes pass
 * history_bytes (0: no byte bound), the oldest changes go (kv_trim_step()),
 * freeing at most COMPACT_STEP_MAX versions, so no single write pays for a
 * large compaction. The window counts key changes only: revisions spent on
 * queues, leases, locks and elections never shorten it, so a watcher whose
 * keys did not change resumes after any amount of other traffic.
 * Compaction only discards history, so it never changes a live value or a
 * result.
 */
#include "core.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "record.h"
#include "acl.h"
#include "schedule.h"
#include "coord.h"
#include "base/heap.h"
#include "base/htab.h"

/* Versions freed per mutation by automatic compaction: a write frees at
 * most this many, more than it adds, so history shrinks back under load. */
#define COMPACT_STEP_MAX 8

typedef struct exp_s {
    ordo_hnode_t node;
    uint64_t deadline_ms;
    ordo_heap_node_t hn;   /* in the expiry heap */
    uint32_t klen;
    char key[];
} exp_t;

struct core_s {
    kv_t *kv;
    uint64_t rev;
    uint64_t last_time_ms;   /* the latest time_ms of a record applied */
    /* When revisions were reached, sampled (core_time_of_rev()): a ring of
     * CORE_TIME_SAMPLES (rev, time) pairs, one at most every
     * CORE_TIME_SAMPLE_MS, oldest at tsamp_head once full. */
    struct { uint64_t rev, time_ms; } *tsamp;
    size_t tsamp_n, tsamp_head;
    uint64_t history_changes; /* automatic compaction keeps this many key changes ... */
    uint64_t history_bytes;   /* ... and at most this many key and value bytes of them (0: any) */
    ordo_htab_t exp_index;
    ordo_heap_t heap;        /* every exp_t, earliest deadline first */
    uint8_t txn_hash_key[ORDO_SIPHASH_KEY_LEN]; /* of every transaction check's table (core_check()) */
    core_change_cb change_cb;
    void *change_arg;
    uint64_t compact_pin;    /* 0, or automatic compaction stops at this point */
    coord_t *coord;          /* leases, locks, elections */
    core_coord_cb coord_cb;
    void *coord_arg;
    queue_set_t *queues;     /* keyed work queues */
    acl_t *acl;              /* the users */
    sched_set_t *scheds;     /* named schedules that push into queues */
    bool replaying;          /* core_replay_begin(): no observer is told of changes */
    bool stored;             /* core_apply_stored(): the record is one the log holds */
};

static bool exp_eq(const ordo_hnode_t *n, const void *key, size_t len)
{
    const exp_t *e = (const exp_t *)n;
    return e->klen == len && memcmp(e->key, key, len) == 0;
}

/* ---- the expiry heap ---------------------------------------------------- */

#define EXP_HEAP_CAP_MIN 64 /* the first array: small servers never regrow it */

#define EXP_OF(n) ((exp_t *)(void *)((char *)(n) - offsetof(exp_t, hn)))

/* Deadline only: equal deadlines keep the places the heap leaves them. */
static bool exp_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    return EXP_OF(a)->deadline_ms < EXP_OF(b)->deadline_ms;
}

static const exp_t *exp_first(const core_t *c)
{
    const ordo_heap_node_t *n = ordo_heap_peek(&c->heap);
    return n ? EXP_OF(n) : NULL;
}

static void exp_clear(core_t *c, const void *key, size_t klen)
{
    if (ordo_heap_len(&c->heap) == 0)
        return;
    uint64_t h = ordo_htab_hash(&c->exp_index, key, klen);
    exp_t *e = (exp_t *)ordo_htab_find(&c->exp_index, h, key, klen);
    if (e == NULL)
        return;
    ordo_heap_remove(&c->heap, &e->hn);
    ordo_htab_remove(&c->exp_index, &e->node);
    free(e);
}

static void exp_set(core_t *c, const void *key, size_t klen, uint64_t deadline_ms)
{
    uint64_t h = ordo_htab_hash(&c->exp_index, key, klen);
    exp_t *e = (exp_t *)ordo_htab_find(&c->exp_index, h, key, klen);
    if (e != NULL) {
        e->deadline_ms = deadline_ms;
        ordo_heap_update(&c->heap, &e->hn);
        return;
    }
    e = ordo_xmalloc(sizeof *e + klen);
    e->deadline_ms = deadline_ms;
    e->klen = (uint32_t)klen;
    memcpy(e->key, key, klen);
    ordo_htab_insert(&c->exp_index, &e->node, h);
    ordo_heap_xpush(&c->heap, &e->hn);
}

/* ---- lifecycle ------------------------------------------------------------ */

static void on_coord_event(void *arg, const coord_event_t *ev);

/* An hour of samples, one a second: 64 KiB. */
#define CORE_TIME_SAMPLES 4096
#define CORE_TIME_SAMPLE_MS 1000

/* Note that revisions from c->rev + 1 on are reached at time_ms (a record
 * about to be applied), at most once per CORE_TIME_SAMPLE_MS. */
static void time_sample(core_t *c, uint64_t time_ms)
{
    if (c->tsamp_n > 0) {
        size_t last = (c->tsamp_head + c->tsamp_n - 1) % CORE_TIME_SAMPLES;
        if (time_ms < c->tsamp[last].time_ms + CORE_TIME_SAMPLE_MS)
            return;
    } else if (c->tsamp == NULL) {
        c->tsamp = ordo_xmalloc(CORE_TIME_SAMPLES * sizeof *c->tsamp);
    }
    size_t at = (c->tsamp_head + c->tsamp_n) % CORE_TIME_SAMPLES;
    if (c->tsamp_n == CORE_TIME_SAMPLES)
        c->tsamp_head = (c->tsamp_head + 1) % CORE_TIME_SAMPLES;
    else
        c->tsamp_n++;
    c->tsamp[at].rev = c->rev + 1;
    c->tsamp[at].time_ms = time_ms;
}

uint64_t core_time_of_rev(const core_t *c, uint64_t rev)
{
    /* The last sample at or before rev: its time is at most
     * CORE_TIME_SAMPLE_MS before rev's (ages come out that much longer). */
    uint64_t t = 0;
    for (size_t lo = 0, hi = c->tsamp_n; lo < hi;) {
        size_t mid = (lo + hi) / 2;
        const size_t at = (c->tsamp_head + mid) % CORE_TIME_SAMPLES;
        if (c->tsamp[at].rev <= rev) {
            t = c->tsamp[at].time_ms;
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (t == 0 && c->tsamp_n > 0)
        t = c->tsamp[c->tsamp_head].time_ms; /* older than every sample */
    return t;
}

core_t *core_create(uint64_t history_changes)
{
    core_t *c = ordo_xcalloc(1, sizeof *c);
    c->kv = kv_create();
    if (c->kv == NULL || ordo_htab_init(&c->exp_index, exp_eq) != 0) {
        if (c->kv != NULL)
            kv_destroy(c->kv);
        free(c);
        return NULL;
    }
    ordo_heap_init(&c->heap, exp_less, EXP_HEAP_CAP_MIN, ORDO_HEAP_KEEP);
    ordo_random_key(c->txn_hash_key);
    c->history_changes = history_changes ? history_changes : 1;
    c->coord = coord_create();
    if (c->coord == NULL) {
        core_destroy(c);
        return NULL;
    }
    coord_set_event_cb(c->coord, on_coord_event, c);
    c->queues = queue_set_create();
    c->acl = acl_create();
    c->scheds = sched_set_create();
    return c;
}

static void free_exp(ordo_hnode_t *n, void *arg)
{
    (void)arg;
    free(n);
}

void core_destroy(core_t *c)
{
    if (c == NULL)
        return;
    ordo_htab_foreach(&c->exp_index, free_exp, NULL);
    ordo_htab_destroy(&c->exp_index);
    ordo_heap_destroy(&c->heap);
    kv_destroy(c->kv);
    coord_destroy(c->coord);
    acl_destroy(c->acl);
    if (c->queues != NULL)
        queue_set_destroy(c->queues);
    sched_set_destroy(c->scheds);
    free(c->tsamp);
    free(c);
}

const queue_set_t *core_queues(const core_t *c) { return c->queues; }
queue_set_t *core_queues_load(core_t *c) { return c->queues; }
const sched_set_t *core_scheds(const core_t *c) { return c->scheds; }
sched_set_t *core_scheds_load(core_t *c) { return c->scheds; }

void core_set_queue_cb(core_t *c, queue_event_cb cb, void *arg) { queue_set_event_cb(c->queues, cb, arg); }

const kv_t *core_kv(const core_t *c) { return c->kv; }
const struct coord_s *core_coord(const core_t *c) { return c->coord; }

void core_set_coord_cb(core_t *c, core_coord_cb cb, void *arg)
{
    c->coord_cb = cb;
    c->coord_arg = arg;
}
uint64_t core_rev(const core_t *c) { return c->rev; }

uint64_t core_last_time_ms(const core_t *c) { return c->last_time_ms; }
size_t core_expiring(const core_t *c) { return ordo_heap_len(&c->heap); }

uint64_t core_next_expiry(const core_t *c)
{
    const exp_t *e = exp_first(c);
    return e ? e->deadline_ms : 0;
}

const char *core_first_expiring(const core_t *c, size_t *klen)
{
    const exp_t *e = exp_first(c);
    if (e == NULL)
        return NULL;
    *klen = e->klen;
    return e->key;
}

void core_set_change_cb(core_t *c, core_change_cb cb, void *arg)
{
    c->change_cb = cb;
    c->change_arg = arg;
}

void core_copy_callbacks(core_t *dst, const core_t *src)
{
    dst->change_cb = src->change_cb;
    dst->change_arg = src->change_arg;
    dst->coord_cb = src->coord_cb;
    dst->coord_arg = src->coord_arg;
    queue_set_copy_event_cb(dst->queues, src->queues);
    /* Not a callback, but the same moment: a connection that cached a
     * user of src's table must look again in dst's. */
    acl_set_gen(dst->acl, acl_gen(src->acl) + 1);
}

const acl_t *core_acl(const core_t *c) { return c->acl; }

acl_t *core_acl_load(core_t *c) { return c->acl; }

void core_set_compact_pin(core_t *c, uint64_t pin) { c->compact_pin = pin; }

uint64_t core_compact_pin(const core_t *c) { return c->compact_pin; }

int core_load_coord(core_t *c, const struct coord_item_s *item) { return coord_load(c->coord, item); }

int core_load_base(core_t *c, const void *key, size_t klen, const void *val, size_t vlen, uint64_t create_rev,
                   uint64_t mod_rev, uint64_t version, uint64_t lease)
{
    return kv_load(c->kv, key, klen, val, vlen, create_rev, mod_rev, version, lease) == KV_OK ? 0 : -1;
}

int core_load_bases_done(core_t *c, uint64_t oldest) { return kv_load_done(c->kv, oldest) == KV_OK ? 0 : -1; }

int core_load_change(core_t *c, const void *key, size_t klen, const void *val, size_t vlen, uint64_t lease,
                     uint64_t rev, bool deleted)
{
    if (deleted)
        return kv_del(c->kv, key, klen, rev, NULL) == 1 ? 0 : -1;
    return kv_put(c->kv, key, klen, val, vlen, lease, rev, NULL) == KV_OK ? 0 : -1;
}

void core_load_deadline(core_t *c, const void *key, size_t klen, uint64_t deadline_ms)
{
    exp_set(c, key, klen, deadline_ms);
}

int core_load_done(core_t *c, uint64_t rev)
{
    if (rev < kv_last_rev(c->kv))
        return -1;
    c->rev = rev;
    return 0;
}

void core_set_history(core_t *c, uint64_t history_changes, uint64_t history_bytes)
{
    c->history_changes = history_changes ? history_changes : 1;
    c->history_bytes = history_bytes;
}

void core_replay_begin(core_t *c)
{
    c->replaying = true;
    kv_index_defer(c->kv);
}

void core_replay_end(core_t *c)
{
    c->replaying = false;
    kv_index_settle(c->kv);
}

void core_foreach_expiry(const core_t *c, void (*fn)(void *arg, const char *key, size_t klen, uint64_t deadline_ms),
                         void *arg)
{
    for (size_t i = 0; i < ordo_heap_len(&c->heap); i++) {
        const exp_t *e = (const exp_t *)(const void *)((const char *)c->heap.v[i] - offsetof(exp_t, hn));
        fn(arg, e->key, e->klen, e->deadline_ms);
    }
}

uint64_t core_expiry_of(const core_t *c, const void *key, size_t klen)
{
    if (ordo_heap_len(&c->heap) == 0)
        return 0;
    uint64_t h = ordo_htab_hash(&c->exp_index, key, klen);
    const exp_t *e = (const exp_t *)ordo_htab_find(&c->exp_index, h, key, klen);
    return e ? e->deadline_ms : 0;
}

/* ---- apply ---------------------------------------------------------------- */

static int delete_key(core_t *c, const void *key, size_t klen);
static int delete_key_detached(core_t *c, const void *key, size_t klen);

/* After a mutation: tell the observer, then compact a little if due. */
static void after_change(core_t *c, const kv_change_t *ch)
{
    if (c->change_cb != NULL && !c->replaying)
        c->change_cb(c->change_arg, ch);
    /* The pin (a snapshot being written) keeps the changes from it on. */
    kv_trim_step(c->kv, (size_t)c->history_changes, (size_t)c->history_bytes,
                 c->compact_pin != 0 ? c->compact_pin : UINT64_MAX, COMPACT_STEP_MAX);
}

/* FENCE lock token: the write is allowed only while token holds the lock. */
static bool fence_ok(core_t *c, const record_t *r, uint64_t token, const char *lock, uint32_t llen,
                     apply_result_t *res)
{
    if (!(r->flags & REC_F_FENCE) || coord_fence_ok(c->coord, lock, llen, token, r->time_ms))
        return true;
    res->status = AP_NOTHOLDER;
    return false;
}

static void apply_put(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_put_t *p = &r->put;
    /* Plain puts, the common case, skip the lookup: kv_put finds the key. */
    kv_version_t buf;
    const kv_version_t *cur = NULL;
    if (r->flags & (REC_F_IFREV | REC_F_NX | REC_F_XX))
        cur = kv_get(c->kv, p->key, p->klen, &buf);
    if ((r->flags & REC_F_IFREV) && (cur ? cur->mod_rev : 0) != p->ifrev) {
        res->status = AP_CONFLICT;
        res->cur_rev = cur ? cur->mod_rev : 0;
        return;
    }
    if (((r->flags & REC_F_NX) && cur != NULL) || ((r->flags & REC_F_XX) && cur == NULL)) {
        res->status = AP_NOOP;
        return;
    }
    if (!fence_ok(c, r, p->fence_token, p->fence_lock, p->fence_llen, res))
        return;
    if (p->lease_id != 0 && !coord_lease_live(c->coord, p->lease_id, r->time_ms)) {
        res->status = AP_NOTFOUND;
        return;
    }
    if (p->lease_id != 0)
        coord_lease_attach(c->coord, p->key, p->klen, p->lease_id);
    else
        coord_lease_detach(c->coord, p->key, p->klen);
    kv_change_t ch;
    int rc = kv_put(c->kv, p->key, p->klen, p->val, p->vlen, p->lease_id, c->rev + 1, &ch);
    assert(rc == KV_OK);
    (void)rc;
    c->rev++;
    if (p->expire_at_ms != 0)
        exp_set(c, p->key, p->klen, p->expire_at_ms);
    else if (!(r->flags & REC_F_KEEPTTL))
        exp_clear(c, p->key, p->klen);
    res->status = AP_OK;
    res->rev = c->rev;
    after_change(c, &ch);
}

/* Delete a live key at the next revision; 1 if it was live. */
static int delete_key(core_t *c, const void *key, size_t klen)
{
    coord_lease_detach(c->coord, key, klen);
    return delete_key_detached(c, key, klen);
}

/* As delete_key() for a key already detached from its lease. */
static int delete_key_detached(core_t *c, const void *key, size_t klen)
{
    kv_change_t ch;
    int rc = kv_del(c->kv, key, klen, c->rev + 1, &ch);
    assert(rc >= 0);
    if (rc != 1)
        return 0;
    c->rev++;
    exp_clear(c, key, klen);
    after_change(c, &ch);
    return 1;
}

static void apply_del(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_del_t *d = &r->del;
    kv_version_t buf;
    const kv_version_t *cur = (r->flags & REC_F_IFREV) ? kv_get(c->kv, d->key, d->klen, &buf) : NULL;
    if ((r->flags & REC_F_IFREV) && (cur ? cur->mod_rev : 0) != d->ifrev) {
        res->status = AP_CONFLICT;
        res->cur_rev = cur ? cur->mod_rev : 0;
        return;
    }
    if (!fence_ok(c, r, d->fence_token, d->fence_lock, d->fence_llen, res))
        return;
    if (!delete_key(c, d->key, d->klen)) {
        res->status = AP_NOOP;
        return;
    }
    res->status = AP_OK;
    res->rev = c->rev;
}

/* Parse a whole value as a signed 64-bit decimal, as Redis's INCR does:
 * no spaces, no '+', no leading zeros. */
static bool parse_i64(const char *p, size_t n, int64_t *out)
{
    if (n == 0 || n > 20)
        return false;
    bool neg = p[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == n || (p[i] == '0' && n > i + 1) || (neg && p[i] == '0'))
        return false;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static void apply_incr(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_incr_t *in = &r->incr;
    kv_version_t buf;
    const kv_version_t *cur = kv_get(c->kv, in->key, in->klen, &buf);
    int64_t v = 0;
    if (cur != NULL && !parse_i64(cur->value, cur->vlen, &v)) {
        res->status = AP_NOTINT;
        return;
    }
    if ((in->by > 0 && v > INT64_MAX - in->by) || (in->by < 0 && v < INT64_MIN - in->by)) {
        res->status = AP_OVERFLOW;
        return;
    }
    v += in->by;
    char num[24];
    int n = snprintf(num, sizeof num, "%lld", (long long)v);
    kv_change_t ch;
    uint64_t lease = cur ? cur->lease : 0;
    int rc = kv_put(c->kv, in->key, in->klen, num, (size_t)n, lease, c->rev + 1, &ch);
    assert(rc == KV_OK);
    (void)rc;
    c->rev++;
    res->status = AP_OK;
    res->rev = c->rev;
    res->kv.incr = v;
    after_change(c, &ch); /* INCR keeps the key's expiry, as in Redis */
}

/* The writer decided this key's deadline has passed: delete it if it is
 * still live. The record names the key, so replay never depends on the
 * deadlines known at the time. */
static void apply_expire(core_t *c, const record_t *r, apply_result_t *res)
{
    if (delete_key(c, r->expire.key, r->expire.klen)) {
        res->status = AP_OK;
        res->rev = c->rev;
        res->kv.changed = true;
    } else {
        exp_clear(c, r->expire.key, r->expire.klen);
        res->status = AP_NOOP;
    }
}

/* EXPIRE / PEXPIRE / PERSIST: change a live key's deadline if the
 * condition holds. It changes no value, so it makes no version and fires
 * no watch, but it takes a revision like every logged change (see "Revisions"
 * below: replay after a snapshot must not skip it). res->kv.changed: the
 * deadline changed (or the key was deleted by a past deadline). */
static void apply_key_ttl(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_key_ttl_t *t = &r->key_ttl;
    res->status = AP_NOOP;
    kv_version_t buf;
    if (kv_get(c->kv, t->key, t->klen, &buf) == NULL)
        return;
    uint64_t cur = core_expiry_of(c, t->key, t->klen); /* 0: none, i.e. infinite */
    uint64_t want = t->expire_at_ms;
    if (((r->flags & REC_F_NX) && cur != 0) || ((r->flags & REC_F_XX) && cur == 0) ||
        ((r->flags & REC_F_GT) && (cur == 0 || want <= cur)) ||
        ((r->flags & REC_F_LT) && cur != 0 && want >= cur))
        return;
    if (want == 0 && cur == 0)
        return; /* PERSIST of a key without a deadline */
    if (want != 0 && want <= r->time_ms) {
        delete_key(c, t->key, t->klen);
    } else {
        c->rev++;
        if (want != 0)
            exp_set(c, t->key, t->klen, want);
        else
            exp_clear(c, t->key, t->klen);
    }
    res->status = AP_OK;
    res->rev = c->rev;
    res->kv.changed = true;
}

/* APPEND: the value grows by the record's bytes; the lease and the
 * deadline stay, as INCR keeps them. res->kv.length: the new length. */
static void apply_append(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_append_t *a = &r->append;
    kv_version_t buf;
    const kv_version_t *cur = kv_get(c->kv, a->key, a->klen, &buf);
    size_t old = cur ? cur->vlen : 0, n = old + a->vlen;
    char *val = ordo_xmalloc(n ? n : 1);
    if (old)
        memcpy(val, cur->value, old);
    if (a->vlen)
        memcpy(val + old, a->val, a->vlen);
    kv_change_t ch;
    int rc = kv_put(c->kv, a->key, a->klen, val, n, cur ? cur->lease : 0, c->rev + 1, &ch);
    assert(rc == KV_OK);
    (void)rc;
    free(val); /* kv_put copied it */
    c->rev++;
    res->status = AP_OK;
    res->rev = c->rev;
    res->kv.length = n;
    after_change(c, &ch);
}

/* FLUSHALL / FLUSHDB: every live key is deleted as DEL would, in key
 * order, one revision each, so watchers see every deletion and replay
 * deletes the same keys. The keys are gathered first: deleting while the
 * ordered index is walked would move it under the walk. Leases, locks,
 * elections and queues are not keys and stay. res->kv.length: keys
 * deleted (AP_NOOP when there were none). */
typedef struct flush_keys_s {
    char **key;
    uint32_t *klen;
    size_t n, cap;
} flush_keys_t;

static int flush_collect(void *arg, const kv_version_t *v)
{
    flush_keys_t *f = arg;
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 64;
        f->key = ordo_xrealloc(f->key, f->cap * sizeof *f->key);
        f->klen = ordo_xrealloc(f->klen, f->cap * sizeof *f->klen);
    }
    f->key[f->n] = ordo_xmalloc(v->klen ? v->klen : 1);
    memcpy(f->key[f->n], v->key, v->klen);
    f->klen[f->n++] = v->klen;
    return 0;
}

static void apply_flush(core_t *c, const record_t *r, apply_result_t *res)
{
    (void)r;
    flush_keys_t f = {0};
    kv_index_settle(c->kv); /* a replay defers the ordered index, which the walk reads */
    long walked = kv_range(c->kv, NULL, 0, NULL, 0, 0, 0, flush_collect, &f);
    assert(walked >= 0 && (size_t)walked == f.n);
    (void)walked;
    size_t deleted = 0;
    for (size_t i = 0; i < f.n; i++) {
        deleted += (size_t)delete_key(c, f.key[i], f.klen[i]);
        free(f.key[i]);
    }
    free(f.key);
    free(f.klen);
    res->status = deleted > 0 ? AP_OK : AP_NOOP;
    res->rev = c->rev;
    res->kv.length = deleted;
}

/* The history window (kv_oldest_rev()) is this member's own: its history
 * bounds, its snapshot's pin, the snapshot it installed and what a replay
 * trimmed decide it. A new compaction is judged against it here, on the
 * member that makes the record: below it is COMPACTED, at it there is
 * nothing to log. A stored one (core_apply_stored()) was judged where it
 * was made and takes its revision wherever it applies, as the log says it
 * did; it drops what this member still holds before the point, if anything. */
static void apply_compact(core_t *c, const record_t *r, apply_result_t *res)
{
    uint64_t point = r->compact.rev;
    if (point > c->rev) {
        res->status = AP_FUTURE;
        res->cur_rev = c->rev;
        return;
    }
    if (point < kv_oldest_rev(c->kv) && !c->stored) {
        res->status = AP_COMPACTED;
        res->cur_rev = kv_oldest_rev(c->kv);
        return;
    }
    if (point > kv_last_rev(c->kv) + 1)
        point = kv_last_rev(c->kv) + 1;
    if (point <= kv_oldest_rev(c->kv) && !c->stored) {
        res->status = AP_NOOP; /* already there: nothing to log */
        res->rev = c->rev;
        return;
    }
    if (point > kv_oldest_rev(c->kv)) {
        int rc = kv_compact(c->kv, point);
        assert(rc == KV_OK);
        (void)rc;
    }
    c->rev++; /* logged, so it takes a revision like every change (see "Revisions" below and apply_lease()) */
    res->status = AP_OK;
    res->rev = c->rev;
}

/* ---- leases, locks, elections ------------------------------------------------
 * Revisions: every record that changes something takes one -- grant,
 * acquire, campaign, release, resign, proclaim, keepalives, extensions,
 * expiry. Keepalives must too: recovery replays only records above the
 * snapshot's revision, so a logged record that took no revision could be
 * skipped.
 * A lease's end takes one revision per deleted key, freed lock and vacated
 * leadership, in coord's event order, and one for the end itself. */

static void on_coord_event(void *arg, const coord_event_t *ev)
{
    core_t *c = arg;
    switch (ev->type) {
    case COORD_EV_KEY:
        delete_key_detached(c, ev->name, ev->nlen);
        break;
    case COORD_EV_LOCK_FREE:
    case COORD_EV_VACANT:
        if (ev->reason == COORD_R_LEASE)
            c->rev++;
        break;
    case COORD_EV_LEASE_END:
        c->rev++;
        break;
    default:
        break;
    }
    if (c->coord_cb != NULL)
        c->coord_cb(c->coord_arg, ev);
}

/* A one-revision change: take it if ok, and report it. */
static void took(core_t *c, apply_result_t *res, bool ok, int fail_status)
{
    if (ok) {
        c->rev++;
        res->status = AP_OK;
    } else {
        res->status = fail_status;
    }
    res->rev = c->rev;
}

static void apply_lease(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_lease_t *l = &r->lease;
    uint64_t rem = 0;
    switch (r->type) {
    case REC_LEASE_GRANT:
        res->coord.granted = coord_lease_grant(c->coord, l->ttl_ms, r->time_ms, c->rev + 1);
        took(c, res, true, AP_OK);
        break;
    case REC_LEASE_KEEPALIVE: {
        int st = coord_lease_keepalive(c->coord, l->lease_id, r->time_ms, &rem);
        res->coord.remaining_ms = rem;
        took(c, res, st == COORD_OK, AP_NOTFOUND);
        break;
    }
    case REC_LEASE_REVOKE:
        res->coord.done = coord_lease_revoke(c->coord, l->lease_id) == 1; /* revisions spent by its events */
        res->status = res->coord.done ? AP_OK : AP_NOOP;
        res->rev = c->rev;
        break;
    default:
        assert(!"not a lease record");
    }
}

static void apply_lock(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_lock_t *l = &r->lock;
    uint64_t tok = 0;
    switch (r->type) {
    case REC_LOCK_ACQUIRE: {
        int st = coord_lock_acquire(c->coord, l->name, l->nlen, l->ttl_ms, l->lease_id, r->time_ms, c->rev + 1,
                                    &tok);
        res->coord.granted = tok;
        took(c, res, st == COORD_OK, st == COORD_BUSY ? AP_BUSY : AP_NOTFOUND);
        break;
    }
    case REC_LOCK_RELEASE:
        res->coord.done = coord_lock_release(c->coord, l->name, l->nlen, l->token, r->time_ms) == 1;
        took(c, res, res->coord.done, AP_NOOP);
        break;
    case REC_LOCK_EXTEND:
        res->coord.done = coord_lock_extend(c->coord, l->name, l->nlen, l->token, l->ttl_ms, r->time_ms) == 1;
        took(c, res, res->coord.done, AP_NOOP);
        break;
    default:
        assert(!"not a lock record");
    }
}

static void apply_elect(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_elect_t *e = &r->elect;
    uint64_t rem = 0;
    coord_leader_t ld;
    int st;
    switch (r->type) {
    case REC_ELECT_CAMPAIGN:
        st = coord_elect_campaign(c->coord, e->name, e->nlen, e->val, e->vlen, e->ttl_ms, e->lease_id, r->time_ms,
                                  c->rev + 1, &ld);
        res->coord.granted = ld.term;
        if (st == COORD_OK) {
            res->coord.handover = ld.handover;
            res->coord.hlen = ld.hlen;
            res->coord.handover_lapsed = ld.handover_lapsed;
        }
        took(c, res, st == COORD_OK, st == COORD_BUSY ? AP_BUSY : AP_NOTFOUND);
        break;
    case REC_ELECT_PROCLAIM:
        res->coord.done = coord_elect_proclaim(c->coord, e->name, e->nlen, e->term, e->val, e->vlen, r->time_ms) == 1;
        took(c, res, res->coord.done, AP_NOOP);
        break;
    case REC_ELECT_KEEPALIVE:
        st = coord_elect_keepalive(c->coord, e->name, e->nlen, e->term, r->time_ms, &rem);
        res->coord.remaining_ms = rem;
        took(c, res, st == COORD_OK, AP_NOTHOLDER);
        break;
    case REC_ELECT_RESIGN:
        res->coord.done = coord_elect_resign(c->coord, e->name, e->nlen, e->term,
                                             (r->flags & REC_F_HANDOVER) ? e->val : NULL, e->vlen, r->time_ms) == 1;
        took(c, res, res->coord.done, AP_NOOP);
        break;
    default:
        assert(!"not an election record");
    }
}

static void apply_coord_expire(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_coord_expire_t *x = &r->coord_expire;
    switch (x->kind) {
    case COORD_LEASE:
        res->coord.done = coord_lease_expire(c->coord, x->id, r->time_ms) == 1; /* events spend */
        res->status = res->coord.done ? AP_OK : AP_NOOP;
        res->rev = c->rev;
        return;
    case COORD_LOCK:
        res->coord.done = coord_lock_expire(c->coord, x->name, x->nlen, x->id, r->time_ms) == 1;
        break;
    default:
        res->coord.done = coord_elect_expire(c->coord, x->name, x->nlen, x->id, r->time_ms) == 1;
        break;
    }
    took(c, res, res->coord.done, AP_NOOP);
}

/* ---- queues -------------------------------------------------------------------
 * Revisions: a push that enqueues or merges takes one (an enqueued
 * message's id is that revision); a delivery takes one (its token); ack,
 * nack, redelivery, a retry under a policy, promotion of due delayed
 * messages, unpark, a pause or resume (or its end), a redrive (one record
 * per key, however many messages it moves: they keep their ids), a cancel,
 * an expiry (MAXWAIT: its dead letter's id is that revision), config and
 * drop each take one when they change something (a nack or redelivery that
 * dead-letters a message gives the dead letter that revision as its id in
 * the dead-letter queue). Extend, dedup-window end and result expiry take
 * one too, although they move bookkeeping rather than messages: recovery
 * replays the log records *after* the snapshot's revision, so a record
 * logged without a revision of its own while a snapshot was being taken
 * would be skipped on replay (a lost extension would redeliver early). A
 * duplicate push, a stale token, or an empty pull change nothing, take no
 * revision and are not logged. */

void core_qconfig_encode(const queue_config_t *cfg, char out[CORE_QCONFIG_BYTES])
{
    put_u32(out, cfg->maxlen);
    put_u32(out + 4, cfg->maxperkey);
    out[8] = (char)cfg->onfull;
    out[9] = (char)cfg->onpoison;
    put_u32(out + 10, cfg->maxattempts);
    put_u64(out + 14, cfg->lease_ms);
    put_u64(out + 22, cfg->dedup_ms);
    put_u64(out + 30, cfg->resultttl_ms);
    out[38] = (char)cfg->backoff;
    put_u64(out + 39, cfg->backoff_base_ms);
    put_u64(out + 47, cfg->backoff_cap_ms);
    put_u64(out + 55, cfg->maxage_ms);
    put_u64(out + 63, cfg->maxwait_ms);
    put_u32(out + 71, cfg->rate_n);
    put_u64(out + 75, cfg->rate_per_ms);
    put_u32(out + 83, cfg->keyrate_n);
    put_u64(out + 87, cfg->keyrate_per_ms);
    put_u32(out + 95, cfg->keyconc);
    out[99] = (char)cfg->fairness;
}

int core_qconfig_decode(const void *bytes, size_t len, queue_config_t *cfg)
{
    const unsigned char *p = bytes;
    if (len != CORE_QCONFIG_BYTES && len != CORE_QCONFIG_V1_BYTES)
        return -1;
    cfg->maxlen = get_u32(p);
    cfg->maxperkey = get_u32(p + 4);
    cfg->onfull = p[8];
    cfg->onpoison = p[9];
    cfg->maxattempts = get_u32(p + 10);
    cfg->lease_ms = get_u64(p + 14);
    cfg->dedup_ms = get_u64(p + 22);
    cfg->resultttl_ms = get_u64(p + 30);
    if (len == CORE_QCONFIG_V1_BYTES)
        return 0;
    cfg->backoff = p[38];
    cfg->backoff_base_ms = get_u64(p + 39);
    cfg->backoff_cap_ms = get_u64(p + 47);
    cfg->maxage_ms = get_u64(p + 55);
    cfg->maxwait_ms = get_u64(p + 63);
    cfg->rate_n = get_u32(p + 71);
    cfg->rate_per_ms = get_u64(p + 75);
    cfg->keyrate_n = get_u32(p + 83);
    cfg->keyrate_per_ms = get_u64(p + 87);
    cfg->keyconc = get_u32(p + 95);
    cfg->fairness = p[99];
    return 0;
}

static void apply_qpush(core_t *c, queue_t *q, const record_t *r, apply_result_t *res)
{
    const rec_q_push_t *m = &r->q_push;
    bool idem = (r->flags & REC_F_IDEM) != 0;
    queue_push_t p = {.key = m->key, .klen = m->klen, .payload = m->payload, .plen = m->plen,
                      .dedup_id = m->dlen && !idem ? m->dedup_id : NULL, .dlen = idem ? 0 : m->dlen,
                      .coalesce = (r->flags & REC_F_COALESCE) != 0, .delay_ms = m->delay_ms,
                      .idem = idem ? (m->dedup_id ? m->dedup_id : "") : NULL, .ilen = idem ? m->dlen : 0,
                      .idem_hash = m->idem_hash, .idem_ms = m->idem_ms};
    uint64_t id = 0;
    int st = queue_push(q, &p, c->rev + 1, r->time_ms, &id);
    res->queue.push_status = st;
    res->queue.id = id;
    if (st == QUEUE_OK || st == QUEUE_MERGED)
        took(c, res, true, AP_OK);
    else
        took(c, res, false, st == QUEUE_DUPLICATE ? AP_NOOP : st == QUEUE_FULL ? AP_QFULL : AP_QLIMIT);
}

static void apply_qconfig(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_q_config_t *k = &r->q_config;
    queue_config_t cfg;
    queue_t *q = queue_get(c->queues, k->queue, k->qlen);
    if (q != NULL)
        queue_config(q, &cfg);
    else
        queue_config_defaults(&cfg);
    if (core_qconfig_decode(k->config, k->clen, &cfg) != 0) {
        took(c, res, false, AP_INVALID);
        return;
    }
    cfg.deadletter = k->dllen ? k->deadletter : NULL;
    cfg.dl_len = k->dllen;
    if (cfg.deadletter != NULL && cfg.dl_len == k->qlen && memcmp(cfg.deadletter, k->queue, k->qlen) == 0) {
        took(c, res, false, AP_INVALID); /* before creating the queue: a refusal changes nothing */
        return;
    }
    if (q == NULL)
        q = queue_open(c->queues, k->queue, k->qlen);
    took(c, res, queue_configure(q, &cfg) == QUEUE_OK, AP_INVALID);
}

/* Schedules (schedule.h). An add that does not decode or validate is
 * refused; a tick pushes as Q.PUSH would (the push's id is the record's
 * revision), and takes its revision whether or not the queue took the
 * push: the schedule moved on either way. */
static void apply_schedule(core_t *c, const record_t *r, apply_result_t *res)
{
    const rec_q_sched_t *k = &r->q_sched;
    const char *name = k->name ? k->name : "";
    if (r->type == REC_Q_SCHEDULE_DEL) {
        took(c, res, sched_del(c->scheds, name, k->nlen) == 1, AP_NOOP);
        return;
    }
    if (r->type == REC_Q_SCHEDULE_ADD) {
        sched_spec_t spec;
        const char *payload;
        size_t plen;
        if (k->qlen == 0 || sched_decode(k->spec ? k->spec : "", k->slen, &spec, &payload, &plen) != 0 ||
            sched_spec_valid(&spec) != NULL) {
            took(c, res, false, AP_INVALID);
            return;
        }
        sched_view_t v = {.name = name, .nlen = k->nlen, .queue = k->queue, .qlen = k->qlen,
                          .key = k->key ? k->key : "", .klen = k->klen, .payload = payload, .plen = plen,
                          .spec = spec};
        sched_add(c->scheds, &v, r->time_ms);
        took(c, res, true, AP_OK);
        return;
    }
    bool push;
    if (sched_tick(c->scheds, name, k->nlen, k->tick_ms, r->time_ms, &push) == 0) {
        took(c, res, false, AP_NOOP);
        return;
    }
    sched_view_t v;
    bool have = sched_get(c->scheds, name, k->nlen, &v);
    assert(have);
    (void)have;
    if (push) {
        queue_t *q = queue_open(c->queues, v.queue, v.qlen);
        queue_push_t p = {.key = v.key, .klen = v.klen, .payload = v.payload, .plen = v.plen};
        uint64_t id = 0;
        int st = queue_push(q, &p, c->rev + 1, r->time_ms, &id);
        res->queue.push_status = st;
        res->queue.id = st == QUEUE_OK ? id : 0;
        sched_count_outcome(c->scheds, name, k->nlen, st == QUEUE_OK);
    }
    took(c, res, true, AP_OK);
}

/* A record for an existing queue q: 1 if it changed something. */
static int apply_to_queue(core_t *c, queue_t *q, const record_t *r, apply_result_t *res)
{
    uint64_t next = c->rev + 1;
    switch (r->type) {
    case REC_Q_DELIVER:
        return queue_deliver(q, r->time_ms, r->q_deliver.lease_ms, next, (r->flags & REC_F_NOACK) != 0,
                             &res->queue.delivery);
    case REC_Q_ACK: {
        const rec_q_ack_t *a = &r->q_ack;
        return queue_ack(q, a->msg_id, a->token, (r->flags & REC_F_RESULT) ? (a->result ? a->result : "") : NULL,
                         a->rlen, r->time_ms);
    }
    case REC_Q_NACK: {
        const rec_q_nack_t *n = &r->q_nack;
        return queue_nack(q, n->msg_id, n->token, n->delay_ms, r->time_ms, next, &res->queue.retry);
    }
    case REC_Q_REDELIVER:
        return queue_redeliver(q, r->q_redeliver.msg_id, r->q_redeliver.token, r->time_ms, next, &res->queue.retry);
    case REC_Q_PAUSE: {
        const rec_q_pause_t *p = &r->q_pause;
        const char *key = p->key != NULL ? p->key : "";
        switch (p->op) {
        case Q_PAUSE_KEY: return queue_pause(q, key, p->klen, p->until_ms);
        case Q_PAUSE_QUEUE: return queue_pause(q, NULL, 0, p->until_ms);
        case Q_RESUME_KEY: return queue_resume(q, key, p->klen);
        case Q_RESUME_QUEUE: return queue_resume(q, NULL, 0);
        case Q_PAUSE_END_KEY: return queue_pause_end(q, key, p->klen, r->time_ms);
        default: return queue_pause_end(q, NULL, 0, r->time_ms);
        }
    }
    case REC_Q_REDRIVE: {
        const rec_q_redrive_t *d = &r->q_redrive;
        queue_t *dlq = queue_get(c->queues, d->dlq, d->dlen);
        if (dlq == NULL || dlq == q)
            return 0;
        res->queue.moved = queue_redrive(dlq, q, d->key ? d->key : "", d->klen, d->msg_id);
        return res->queue.moved > 0;
    }
    case REC_Q_CANCEL:
        return queue_cancel(q, r->q_msg.key ? r->q_msg.key : "", r->q_msg.klen, r->q_msg.msg_id, r->time_ms);
    case REC_Q_EXPIRE:
        return queue_expire(q, r->q_msg.key ? r->q_msg.key : "", r->q_msg.klen, r->q_msg.msg_id, r->time_ms, next,
                            &res->queue.retry);
    case REC_Q_RETRY: {
        const rec_q_retry_t *t = &r->q_retry;
        return queue_retry(q, t->msg_id, t->token, t->kind, t->delay_ms, r->time_ms, next, &res->queue.retry);
    }
    case REC_Q_UNPARK:
        return queue_unpark(q, r->q_unpark.key, r->q_unpark.klen);
    case REC_Q_PROMOTE:
        return queue_promote(q, r->time_ms) > 0;
    case REC_Q_EXTEND: {
        const rec_q_extend_t *e = &r->q_extend;
        return queue_extend(q, e->msg_id, e->token, e->ttl_ms, r->time_ms);
    }
    case REC_Q_DEDUP_END: {
        const rec_q_dedup_end_t *d = &r->q_dedup_end;
        if (r->flags & REC_F_IDEM)
            return queue_idem_expire(q, d->key, d->klen, d->dedup_id, d->dlen, r->time_ms);
        return queue_dedup_expire(q, d->dedup_id, d->dlen, r->time_ms);
    }
    case REC_Q_RESULT_END:
        return queue_result_expire(q, r->q_result_end.msg_id, r->time_ms);
    default:
        assert(!"not a record for an existing queue");
        return 0;
    }
}

static void apply_queue_record(core_t *c, const record_t *r, const char *name, uint32_t nlen,
                               apply_result_t *res)
{
    switch (r->type) {
    case REC_Q_PUSH:
        apply_qpush(c, queue_open(c->queues, name, nlen), r, res);
        return;
    case REC_Q_CONFIG:
        apply_qconfig(c, r, res);
        return;
    case REC_Q_DROP:
        took(c, res, queue_drop(c->queues, name, nlen) == 1, AP_NOOP);
        return;
    case REC_Q_SCHEDULE_ADD: case REC_Q_SCHEDULE_DEL: case REC_Q_TICK:
        apply_schedule(c, r, res);
        return;
    default:
        break;
    }
    /* A pause set before the queue's first push holds, and dead letters
     * redriven to a queue dropped since find it again: both create it. */
    bool opens = (r->type == REC_Q_PAUSE && (r->q_pause.op == Q_PAUSE_KEY || r->q_pause.op == Q_PAUSE_QUEUE)) ||
                 (r->type == REC_Q_REDRIVE && queue_get(c->queues, r->q_redrive.dlq, r->q_redrive.dlen) != NULL &&
                  (r->q_redrive.dlen != nlen || memcmp(r->q_redrive.dlq, name, nlen) != 0));
    queue_t *q = opens ? queue_open(c->queues, name, nlen) : queue_get(c->queues, name, nlen);
    if (q == NULL) {
        took(c, res, false, AP_NOOP);
        return;
    }
    int ok = apply_to_queue(c, q, r, res);
    res->queue.done = ok != 0;
    took(c, res, ok != 0, AP_NOOP);
}

/* Apply a queue record, then bring queue memory up to date (queue.h,
 * queue_account(): O(1)) for the queue and any dead-letter queue it fed, so
 * max-memory-bytes sees every queue byte without walking the queues. */
static void apply_queue(core_t *c, const record_t *r, apply_result_t *res)
{
    uint32_t nlen;
    const char *name = record_queue(r, &nlen);
    apply_queue_record(c, r, name, nlen, res);
    queue_t *q = r->type == REC_Q_DROP ? NULL : queue_get(c->queues, name, nlen);
    if (q != NULL)
        queue_account(q);
    if ((r->type == REC_Q_NACK || r->type == REC_Q_REDELIVER || r->type == REC_Q_RETRY || r->type == REC_Q_EXPIRE) &&
        res->queue.retry.dlq != NULL)
        queue_account(res->queue.retry.dlq);
    if (r->type == REC_Q_REDRIVE) {
        queue_t *from = queue_get(c->queues, r->q_redrive.dlq, r->q_redrive.dlen);
        if (from != NULL)
            queue_account(from);
    }
}

/* A transaction: its sub-records in order, each as if applied alone. The
 * writer logged only sub-records that applied (status AP_OK) after
 * checking every guard first (core_check()), so on replay each applies
 * again; a sub-record that would not (a log edited by hand) applies
 * nothing, as it would alone. */
static void apply_txn(core_t *c, const record_t *r, apply_result_t *res)
{
    size_t off = 0;
    record_t sub;
    apply_result_t sr;
    int rc;
    while ((rc = record_txn_next(&r->txn, &off, &sub)) == 1)
        core_apply(c, &sub, &sr);
    assert(rc == 0); /* record_valid() parsed it */
    memset(res, 0, sizeof *res);
    res->status = AP_OK;
    res->rev = c->rev;
}

/* ---- users (acl.h) -------------------------------------------------------- */

/* SETUSER replaces the user with the one its rules describe and takes a
 * revision; rules that do not parse (only a log edited by hand: the
 * command parsed them) change nothing. DELUSER of an absent user is a
 * no-op. */
static void apply_acl(core_t *c, const record_t *r, apply_result_t *res)
{
    res->rev = c->rev;
    if (r->type == REC_ACL_DELUSER) {
        if (!acl_del(c->acl, r->acl.name, r->acl.nlen)) {
            res->status = AP_NOOP;
            return;
        }
    } else {
        const char *err;
        if (!acl_name_ok(r->acl.name, r->acl.nlen)) {
            res->status = AP_INVALID;
            return;
        }
        acl_user_t *u = acl_user_new(r->acl.name, r->acl.nlen);
        if (acl_user_rules(u, r->acl.rules, r->acl.rlen, &err) != 0) {
            acl_user_free(u);
            res->status = AP_INVALID;
            return;
        }
        acl_set(c->acl, u);
    }
    res->status = AP_OK;
    res->rev = ++c->rev;
}

void core_apply_stored(core_t *c, const record_t *rec, apply_result_t *res)
{
    assert(!c->stored);
    c->stored = true;
    core_apply(c, rec, res);
    c->stored = false;
}

void core_apply(core_t *c, const record_t *rec, apply_result_t *res)
{
    /* Re-checked only in debug builds: the command layer built rec, and
     * record_encode() asserts it again before it is written. */
    ORDO_DEBUG_ASSERT(record_valid(rec));
    memset(res, 0, sizeof *res);
    if (rec->time_ms > c->last_time_ms)
        c->last_time_ms = rec->time_ms;
    time_sample(c, rec->time_ms);
    switch (rec->type) {
    case REC_PUT: apply_put(c, rec, res); break;
    case REC_DEL: apply_del(c, rec, res); break;
    case REC_INCR: apply_incr(c, rec, res); break;
    case REC_EXPIRE: apply_expire(c, rec, res); break;
    case REC_COMPACT: apply_compact(c, rec, res); break;
    case REC_KEY_TTL: apply_key_ttl(c, rec, res); break;
    case REC_APPEND: apply_append(c, rec, res); break;
    case REC_FLUSH: apply_flush(c, rec, res); break;
    case REC_LEASE_GRANT: case REC_LEASE_KEEPALIVE: case REC_LEASE_REVOKE: apply_lease(c, rec, res); break;
    case REC_LOCK_ACQUIRE: case REC_LOCK_RELEASE: case REC_LOCK_EXTEND: apply_lock(c, rec, res); break;
    case REC_ELECT_CAMPAIGN: case REC_ELECT_PROCLAIM: case REC_ELECT_KEEPALIVE: case REC_ELECT_RESIGN:
        apply_elect(c, rec, res);
        break;
    case REC_COORD_EXPIRE: apply_coord_expire(c, rec, res); break;
    case REC_TXN: apply_txn(c, rec, res); break;
    case REC_ACL_SETUSER: case REC_ACL_DELUSER: apply_acl(c, rec, res); break;
    default:
        assert(record_family(rec->type) == REC_FAM_QUEUE);
        apply_queue(c, rec, res);
        break;
    }
}

/* ---- guard checks for transactions (core.h, core_check()) ------------------ */

/* What the check remembers of the records before the one it judges, in
 * one hash table, so a transaction of n records is checked in O(n)
 * expected (a linear scan per record made a 1,000-push batch cost 30x the
 * pushes themselves). Each node has a kind; a lookup's probe is a node of
 * that kind, compared by txn_eq(). Nodes are allocated one by one, never
 * move, and are chained on `all` to be freed. */
enum txn_kind { TXN_KEY, TXN_SETTLED, TXN_QUEUE_PUSHES, TXN_KEY_PUSHES };

typedef struct txn_node_s {
    ordo_hnode_t h;
    struct txn_node_s *all;
    enum txn_kind kind;
    const char *queue, *key;  /* SETTLED: queue; *_PUSHES: queue, and key (KEY_PUSHES); KEY: key */
    uint32_t qlen, klen;
    uint64_t msg_id;          /* SETTLED: the delivery (ids are revisions, unique across queues) */
    size_t count;             /* *_PUSHES: the transaction's pushes to the queue, or to the key in it */
    /* KEY: its predicted state */
    bool present;
    uint64_t mod_rev;
    const char *val;          /* PUT's value; NULL after an INCR (ival holds it) */
    uint32_t vlen;
    int64_t ival;
    bool unknown;             /* after an APPEND: present, value not predicted (apply judges) */
} txn_node_t;

typedef txn_node_t txn_key_t;

struct txn_index_s {
    ordo_htab_t tab;
    txn_node_t *all;
};

static bool bytes_eq(const char *a, uint32_t alen, const char *b, uint32_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static bool txn_eq(const ordo_hnode_t *h, const void *probe, size_t len)
{
    (void)len;
    const txn_node_t *n = (const txn_node_t *)h, *p = probe;
    if (n->kind != p->kind)
        return false;
    switch (p->kind) {
    case TXN_KEY: return bytes_eq(n->key, n->klen, p->key, p->klen);
    case TXN_SETTLED: return n->msg_id == p->msg_id && bytes_eq(n->queue, n->qlen, p->queue, p->qlen);
    case TXN_QUEUE_PUSHES: return bytes_eq(n->queue, n->qlen, p->queue, p->qlen);
    case TXN_KEY_PUSHES:
        return bytes_eq(n->queue, n->qlen, p->queue, p->qlen) && bytes_eq(n->key, n->klen, p->key, p->klen);
    }
    return false;
}

static uint64_t txn_hash(const ordo_htab_t *tab, const txn_node_t *p)
{
    switch (p->kind) {
    case TXN_KEY: return ordo_htab_hash(tab, p->key, p->klen);
    case TXN_SETTLED: return ordo_htab_hash(tab, &p->msg_id, sizeof p->msg_id) ^ 1;
    case TXN_QUEUE_PUSHES: return ordo_htab_hash(tab, p->queue, p->qlen) ^ 2;
    case TXN_KEY_PUSHES:
        return (ordo_htab_hash(tab, p->queue, p->qlen) * 0x9E3779B97F4A7C15ull) ^ ordo_htab_hash(tab, p->key, p->klen);
    }
    return 0;
}

void core_txn_check_init(const core_t *c, core_txn_check_t *t)
{
    memset(t, 0, sizeof *t);
    t->rev = c->rev + 1;
    t->hash_key = c->txn_hash_key;
}

void core_txn_check_free(core_txn_check_t *t)
{
    struct txn_index_s *ix = t->ix;
    if (ix != NULL) {
        for (txn_node_t *n = ix->all, *next; n != NULL; n = next) {
            next = n->all;
            free(n);
        }
        ordo_htab_destroy(&ix->tab);
        free(ix);
    }
    memset(t, 0, sizeof *t);
}

/* The node like probe (kind and identity), or NULL; with add, made (state
 * and count zero) when missing. The index itself is made at the first add:
 * a transaction with no guarded record allocates nothing. */
static txn_node_t *txn_find(core_txn_check_t *t, const txn_node_t *probe, bool add)
{
    if (t->ix == NULL) {
        if (!add)
            return NULL;
        t->ix = ordo_xcalloc(1, sizeof *t->ix);
        if (ordo_htab_init_keyed(&t->ix->tab, txn_eq, t->hash_key) != 0)
            abort(); /* out of memory, as ordo_xcalloc() would */
    }
    struct txn_index_s *ix = t->ix;
    uint64_t h = txn_hash(&ix->tab, probe);
    txn_node_t *n = (txn_node_t *)ordo_htab_find(&ix->tab, h, probe, sizeof *probe);
    if (n != NULL || !add)
        return n;
    n = ordo_xcalloc(1, sizeof *n);
    n->kind = probe->kind;
    n->queue = probe->queue;
    n->qlen = probe->qlen;
    n->key = probe->key;
    n->klen = probe->klen;
    n->msg_id = probe->msg_id;
    n->all = ix->all;
    ix->all = n;
    ordo_htab_insert(&ix->tab, &n->h, h);
    return n;
}

static txn_key_t *txn_key(core_txn_check_t *t, const char *key, uint32_t klen, bool add)
{
    return txn_find(t, &(txn_node_t){ .kind = TXN_KEY, .key = key, .klen = klen }, add);
}

/* The key as the transaction would leave it so far: present?, mod_rev, and
 * its value (or *isint with *ival after an INCR). */
static bool txn_view(const core_t *c, core_txn_check_t *t, const char *key, uint32_t klen, uint64_t *mod_rev,
                     const char **val, uint32_t *vlen, bool *isint, int64_t *ival)
{
    const txn_key_t *k = txn_key(t, key, klen, false);
    *isint = false;
    if (k != NULL) {
        if (k->unknown) { /* an INCR after an APPEND: apply decides */
            *mod_rev = k->mod_rev;
            *val = NULL;
            *vlen = 0;
            *isint = true;
            *ival = 0;
            return true;
        }
        *mod_rev = k->present ? k->mod_rev : 0;
        *val = k->val;
        *vlen = k->vlen;
        *isint = k->present && k->val == NULL;
        *ival = k->ival;
        return k->present;
    }
    kv_version_t buf;
    const kv_version_t *cur = t->flushed ? NULL : kv_get(c->kv, key, klen, &buf);
    *mod_rev = cur ? cur->mod_rev : 0;
    *val = cur ? cur->value : NULL;
    *vlen = cur ? cur->vlen : 0;
    return cur != NULL;
}

static bool txn_settled(core_txn_check_t *t, const char *q, uint32_t qlen, uint64_t id)
{
    return id != 0 &&
           txn_find(t, &(txn_node_t){ .kind = TXN_SETTLED, .queue = q, .qlen = qlen, .msg_id = id }, false) != NULL;
}

static void txn_settle(core_txn_check_t *t, const char *q, uint32_t qlen, uint64_t id)
{
    (void)txn_find(t, &(txn_node_t){ .kind = TXN_SETTLED, .queue = q, .qlen = qlen, .msg_id = id }, true);
}

static bool fail(apply_result_t *res, int status)
{
    res->status = status;
    return false;
}

/* The counts of the pushes the transaction made so far to queue q and to
 * key k in it (made at zero if none: check_qpush() counts the push there
 * if it takes room, one lookup each either way). */
static void txn_pushes(core_txn_check_t *t, const char *q, uint32_t qlen, const char *k, uint32_t klen,
                       size_t **of_queue, size_t **of_key)
{
    *of_queue = &txn_find(t, &(txn_node_t){ .kind = TXN_QUEUE_PUSHES, .queue = q, .qlen = qlen }, true)->count;
    *of_key =
        &txn_find(t, &(txn_node_t){ .kind = TXN_KEY_PUSHES, .queue = q, .qlen = qlen, .key = k, .klen = klen }, true)
             ->count;
}

/* Q.PUSH: room for it (MAXLEN, MAXPERKEY), counting the transaction's own
 * earlier pushes; a duplicate (dedup window) or a coalesced push needs no
 * room, and is judged as queue_push() does. */
static bool check_qpush(const core_t *c, core_txn_check_t *t, const record_t *r, apply_result_t *res)
{
    const rec_q_push_t *p = &r->q_push;
    const queue_t *q = queue_get(c->queues, p->queue, p->qlen);
    queue_config_t cfg;
    queue_len_t len = {0};
    queue_keyinfo_t ki = {0};
    if (q != NULL) {
        queue_config(q, &cfg);
        queue_len(q, &len);
        queue_keyinfo(q, p->key, p->klen, &ki);
    } else {
        queue_config_defaults(&cfg);
    }
    size_t *mine, *mine_key;
    txn_pushes(t, p->queue, p->qlen, p->key, p->klen, &mine, &mine_key);
    bool merges = (r->flags & REC_F_COALESCE) && ki.waiting + *mine_key > 0;
    bool idem = (r->flags & REC_F_IDEM) != 0;
    queue_idem_t ie;
    bool repeat = idem ? q != NULL && queue_idem_lookup(q, p->key, p->klen, p->dedup_id, p->dlen, r->time_ms, &ie)
                       : p->dlen > 0 && cfg.dedup_ms > 0;
    if (!merges && !repeat) {
        if (len.waiting + len.delayed + *mine >= cfg.maxlen)
            return fail(res, AP_QFULL);
        if (cfg.maxperkey && ki.waiting + *mine_key >= cfg.maxperkey)
            return fail(res, AP_QLIMIT);
    }
    if (!merges) {
        (*mine)++;
        (*mine_key)++;
    }
    return true;
}

/* Is delivery (id, token) of queue q current, as the transaction leaves it? */
static bool txn_delivery_ok(const core_t *c, core_txn_check_t *t, const char *q, uint32_t qlen, uint64_t id,
                            uint64_t token)
{
    if (token == 0 || txn_settled(t, q, qlen, id))
        return false;
    const queue_t *qq = queue_get(c->queues, q, qlen);
    return qq != NULL && queue_delivery_current(qq, id, token);
}

static bool check_put(const core_t *c, core_txn_check_t *t, const record_t *r, apply_result_t *res)
{
    const rec_put_t *p = &r->put;
    uint64_t mod;
    const char *v;
    uint32_t vl;
    bool isint;
    int64_t iv;
    bool present = txn_view(c, t, p->key, p->klen, &mod, &v, &vl, &isint, &iv);
    if ((r->flags & REC_F_IFREV) && mod != p->ifrev) {
        res->cur_rev = mod;
        return fail(res, AP_CONFLICT);
    }
    if (((r->flags & REC_F_NX) && present) || ((r->flags & REC_F_XX) && !present))
        return true; /* not a guard: nil in EXEC's array */
    if ((r->flags & REC_F_FENCE) && !coord_fence_ok(c->coord, p->fence_lock, p->fence_llen, p->fence_token, r->time_ms))
        return fail(res, AP_NOTHOLDER);
    if (p->lease_id != 0 && !coord_lease_live(c->coord, p->lease_id, r->time_ms))
        return fail(res, AP_NOTFOUND);
    txn_key_t *k = txn_key(t, p->key, p->klen, true);
    k->present = true;
    k->unknown = false;
    k->mod_rev = t->rev++;
    k->val = p->val ? p->val : "";
    k->vlen = p->vlen;
    return true;
}

static bool check_del(const core_t *c, core_txn_check_t *t, const record_t *r, apply_result_t *res)
{
    const rec_del_t *d = &r->del;
    uint64_t mod;
    const char *v;
    uint32_t vl;
    bool isint;
    int64_t iv;
    bool present = txn_view(c, t, d->key, d->klen, &mod, &v, &vl, &isint, &iv);
    if ((r->flags & REC_F_IFREV) && mod != d->ifrev) {
        res->cur_rev = mod;
        return fail(res, AP_CONFLICT);
    }
    if ((r->flags & REC_F_FENCE) && !coord_fence_ok(c->coord, d->fence_lock, d->fence_llen, d->fence_token, r->time_ms))
        return fail(res, AP_NOTHOLDER);
    if (present) {
        txn_key_t *k = txn_key(t, d->key, d->klen, true);
        k->present = false;
        k->unknown = false;
        k->mod_rev = t->rev++;
    }
    return true;
}

static bool check_incr(const core_t *c, core_txn_check_t *t, const record_t *r, apply_result_t *res)
{
    const rec_incr_t *in = &r->incr;
    uint64_t mod;
    const char *v;
    uint32_t vl;
    bool isint;
    int64_t cur = 0;
    bool present = txn_view(c, t, in->key, in->klen, &mod, &v, &vl, &isint, &cur);
    if (present && !isint && !parse_i64(v, vl, &cur))
        return fail(res, AP_NOTINT);
    if ((in->by > 0 && cur > INT64_MAX - in->by) || (in->by < 0 && cur < INT64_MIN - in->by))
        return fail(res, AP_OVERFLOW);
    txn_key_t *k = txn_key(t, in->key, in->klen, true);
    k->present = true;
    k->mod_rev = t->rev++;
    k->val = NULL;
    k->ival = cur + in->by;
    return true;
}

/* FLUSH: no guard; every key is absent afterwards, those the transaction
 * wrote included, each deletion a revision. */
static bool check_flush(const core_t *c, core_txn_check_t *t)
{
    size_t nkeys = 0;
    for (txn_node_t *n = t->ix != NULL ? t->ix->all : NULL; n != NULL; n = n->all) {
        if (n->kind != TXN_KEY)
            continue;
        n->present = false;
        n->unknown = false;
        nkeys++;
    }
    /* One revision per key deleted; an estimate (keys the transaction
     * created count once more), as for the records after default below. */
    t->rev += (t->flushed ? 0 : kv_count(c->kv)) + nkeys;
    t->flushed = true;
    return true;
}

/* APPEND: no guard; the key is present afterwards with a value the check
 * does not predict. */
static bool check_append(core_txn_check_t *t, const record_t *r)
{
    txn_key_t *k = txn_key(t, r->append.key, r->append.klen, true);
    k->present = true;
    k->unknown = true;
    k->mod_rev = t->rev++;
    return true;
}

bool core_check(const core_t *c, core_txn_check_t *t, const record_t *r, apply_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->status = AP_NOOP;
    switch (r->type) {
    case REC_PUT: return check_put(c, t, r, res);
    case REC_DEL: return check_del(c, t, r, res);
    case REC_INCR: return check_incr(c, t, r, res);
    case REC_APPEND: return check_append(t, r);
    case REC_FLUSH: return check_flush(c, t);
    case REC_Q_PUSH:
        if (!check_qpush(c, t, r, res))
            return false;
        break;
    case REC_Q_ACK:
        if (!txn_delivery_ok(c, t, r->q_ack.queue, r->q_ack.qlen, r->q_ack.msg_id, r->q_ack.token))
            return fail(res, AP_NOOP);
        txn_settle(t, r->q_ack.queue, r->q_ack.qlen, r->q_ack.msg_id);
        break;
    case REC_Q_NACK:
        if (!txn_delivery_ok(c, t, r->q_nack.queue, r->q_nack.qlen, r->q_nack.msg_id, r->q_nack.token))
            return fail(res, AP_NOOP);
        txn_settle(t, r->q_nack.queue, r->q_nack.qlen, r->q_nack.msg_id);
        break;
    case REC_Q_RETRY:
        if (!txn_delivery_ok(c, t, r->q_retry.queue, r->q_retry.qlen, r->q_retry.msg_id, r->q_retry.token))
            return fail(res, AP_NOOP);
        txn_settle(t, r->q_retry.queue, r->q_retry.qlen, r->q_retry.msg_id);
        break;
    case REC_Q_EXTEND:
        if (!txn_delivery_ok(c, t, r->q_extend.queue, r->q_extend.qlen, r->q_extend.msg_id, r->q_extend.token))
            return fail(res, AP_NOOP);
        break;
    case REC_LOCK_ACQUIRE:
        if (r->lock.lease_id != 0 && !coord_lease_live(c->coord, r->lock.lease_id, r->time_ms))
            return fail(res, AP_NOTFOUND);
        if (coord_lock_info(c->coord, r->lock.name, r->lock.nlen, r->time_ms, &(coord_lock_info_t){0}) == 1)
            return fail(res, AP_BUSY);
        break;
    default:
        break;
    }
    t->rev++; /* most other records take one revision; an estimate is enough for later IFREVs on keys it did not write */
    return true;
}
