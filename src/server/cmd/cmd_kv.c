/*
 * cmd_kv.c -- plain keys (GET, SET, DEL, EXISTS, MGET, INCR, INCRBY) and
 * versioned keys (KV.PUT, KV.GET, KV.DEL, KV.RANGE, KV.REV, KV.COMPACT).
 * The writer's side of key expiry (its timer, the expire records) is
 * writer/expire.c.
 *
 * Plain and versioned commands are views of the same store: a SET is a
 * KV.PUT without conditions, so it makes a revision and fires watches.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "writer/expire.h"

/* The key's live version as a reader sees it, filled into *buf (NULL if
 * absent). Keys past their deadline were expired before the command ran
 * (cmd_dispatch), by the same clock. */
static const kv_version_t *visible(server_t *s, const resp_arg_t *key, kv_version_t *buf)
{
    return kv_get(core_kv(s->core), key->ptr, key->len, buf);
}

/* ---- plain keys ------------------------------------------------------------- */

static void cmd_get(cmd_ctx_t *x)
{
    size_t vlen;
    const char *v = kv_get_value(core_kv(x->srv->core), x->argv[1].ptr, x->argv[1].len, &vlen);
    if (v == NULL)
        resp_add_null(x->out, x->proto);
    else
        resp_add_bulk(x->out, v, vlen);
}

/* The deadline of SET's, SETEX's and GETEX's expiry options: EX seconds,
 * PX milliseconds (from now), EXAT seconds, PXAT milliseconds (since the
 * epoch), for the command named cmd. The value must be positive, as in
 * Redis ("invalid expire time in 'set' command" otherwise); an absolute
 * deadline in the past gives a key that is already due and expires before
 * the next command. Returns false after replying. */
bool cmd_expiry_at(cmd_ctx_t *x, size_t i, int unit, const char *cmd, uint64_t *at_ms)
{
    int64_t n;
    if (!arg_i64(x, i, &n))
        return false;
    bool secs = unit == EXPIRY_EX || unit == EXPIRY_EXAT;
    if (n <= 0 || (secs && n > INT64_MAX / 1000)) {
        reply_errf(x, "ERR invalid expire time in '%s' command", cmd);
        return false;
    }
    uint64_t ms = (uint64_t)n * (secs ? 1000u : 1u), now = x->srv->now_ms;
    if (unit == EXPIRY_EXAT || unit == EXPIRY_PXAT)
        *at_ms = ms;
    else
        *at_ms = ms > UINT64_MAX - now ? UINT64_MAX : now + ms;
    return true;
}

/* Which expiry option argument i is (enum cmd_expiry_unit), 0 if none. */
int cmd_expiry_unit(const cmd_ctx_t *x, size_t i)
{
    return arg_is(x, i, "EX") ? EXPIRY_EX : arg_is(x, i, "PX") ? EXPIRY_PX : arg_is(x, i, "EXAT") ? EXPIRY_EXAT
         : arg_is(x, i, "PXAT") ? EXPIRY_PXAT : 0;
}

/* SET key value [NX|XX] [GET] [EX s|PX ms|EXAT unix-s|PXAT unix-ms|KEEPTTL]:
 * OK, or nil when NX/XX did not hold; with GET, the old value (nil if
 * none) whether or not the value was set, as in Redis 7. */
static void cmd_set(cmd_ctx_t *x)
{
    if (!arg_name_ok(x, 1) || !arg_value_ok(x, 2))
        return;
    record_t rec = {.type = REC_PUT, .put = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len,
                                             .val = x->argv[2].ptr, .vlen = (uint32_t)x->argv[2].len}};
    bool get = false, has_expiry = false;
    for (size_t i = 3; i < x->argc; i++) {
        int unit = cmd_expiry_unit(x, i);
        if (arg_is(x, i, "NX") && !(rec.flags & REC_F_XX)) {
            rec.flags |= REC_F_NX;
        } else if (arg_is(x, i, "XX") && !(rec.flags & REC_F_NX)) {
            rec.flags |= REC_F_XX;
        } else if (arg_is(x, i, "GET")) {
            get = true;
        } else if (arg_is(x, i, "KEEPTTL") && !has_expiry) {
            rec.flags |= REC_F_KEEPTTL;
        } else if (unit != 0 && i + 1 < x->argc && !has_expiry && !(rec.flags & REC_F_KEEPTTL)) {
            if (!cmd_expiry_at(x, ++i, unit, "set", &rec.put.expire_at_ms))
                return;
            has_expiry = true;
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    /* GET answers the value the write replaces: read now, on the writer's
     * thread, so nothing changes it before the record applies. */
    kv_version_t buf;
    const kv_version_t *old = get ? visible(x->srv, &x->argv[1], &buf) : NULL;
    char *copy = old != NULL ? ordo_xmalloc(old->vlen ? old->vlen : 1) : NULL;
    size_t olen = old != NULL ? old->vlen : 0;
    if (copy != NULL && olen)
        memcpy(copy, old->value, olen); /* the put may free the old version */
    apply_result_t res;
    if (cmd_write(x, &rec, &res)) {
        if (get && copy != NULL)
            resp_add_bulk(x->out, copy, olen);
        else if (get)
            resp_add_null(x->out, x->proto);
        else if (res.status == AP_OK)
            reply_ok(x);
        else
            resp_add_null(x->out, x->proto);
    }
    free(copy);
}

static void cmd_del(cmd_ctx_t *x)
{
    int64_t n = 0;
    for (size_t i = 1; i < x->argc; i++) {
        record_t rec = {.type = REC_DEL, .del = {.key = x->argv[i].ptr, .klen = (uint32_t)x->argv[i].len}};
        apply_result_t res;
        if (!cmd_write(x, &rec, &res))
            return;
        n += res.status == AP_OK;
    }
    resp_add_int(x->out, n);
}

static void cmd_exists(cmd_ctx_t *x)
{
    int64_t n = 0;
    kv_version_t buf;
    for (size_t i = 1; i < x->argc; i++)
        n += visible(x->srv, &x->argv[i], &buf) != NULL;
    resp_add_int(x->out, n);
}

/* RESP framing around a bulk of n bytes, at most: "$<digits>\r\n" + "\r\n". */
#define BULK_FRAME_BYTES 24u

static void cmd_mget(cmd_ctx_t *x)
{
    /* Each key is looked up once: the versions found size the reply
     * (max-reply-bytes, before anything is built) and then fill it. */
    enum { MGET_STACK_KEYS = 16 };
    typedef struct {
        kv_version_t buf;
        const kv_version_t *v; /* &buf, or NULL: absent */
    } found_t;
    found_t stack[MGET_STACK_KEYS];
    size_t n = x->argc - 1, bytes = 16;
    found_t *f = n <= MGET_STACK_KEYS ? stack : ordo_xmalloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) {
        f[i].v = visible(x->srv, &x->argv[i + 1], &f[i].buf);
        bytes += BULK_FRAME_BYTES + (f[i].v != NULL ? f[i].v->vlen : 0);
    }
    if (reply_fits(x, bytes, "ask for fewer keys at once")) {
        resp_add_array(x->out, n);
        for (size_t i = 0; i < n; i++) {
            if (f[i].v == NULL)
                resp_add_null(x->out, x->proto);
            else
                resp_add_bulk(x->out, f[i].v->value, f[i].v->vlen);
        }
    }
    if (f != stack)
        free(f);
}

/* ---- expiry: TTL, PTTL, EXPIRE, PEXPIRE, PERSIST ------------------------- */

/* TTL / PTTL: -2 if the key does not exist, -1 if it has no deadline, else
 * the time left by the writer's clock (TTL rounds to the nearest second, as
 * Redis does). */
static void do_ttl(cmd_ctx_t *x, bool ms)
{
    kv_version_t buf;
    if (visible(x->srv, &x->argv[1], &buf) == NULL) {
        resp_add_int(x->out, -2);
        return;
    }
    uint64_t at = core_expiry_of(x->srv->core, x->argv[1].ptr, x->argv[1].len);
    if (at == 0) {
        resp_add_int(x->out, -1);
        return;
    }
    uint64_t now = x->srv->now_ms;
    int64_t left = at > now ? (int64_t)(at - now) : 0;
    resp_add_int(x->out, ms ? left : (left + 500) / 1000);
}

static void cmd_ttl(cmd_ctx_t *x) { do_ttl(x, false); }
static void cmd_pttl(cmd_ctx_t *x) { do_ttl(x, true); }

/* EXPIRE / PEXPIRE key n, EXPIREAT / PEXPIREAT key unix-time, each
 * [NX|XX|GT|LT]: 1 if the deadline was set, 0 if the key does not exist
 * or the condition did not hold. A deadline not in the future deletes the
 * key (Redis's rule). The condition is checked when the record applies
 * (REC_KEY_TTL), so a log replay decides the same. */
static void do_expire(cmd_ctx_t *x, bool ms, bool absolute)
{
    const char *name = absolute ? (ms ? "pexpireat" : "expireat") : (ms ? "pexpire" : "expire");
    int64_t n;
    if (!arg_name_ok(x, 1) || !arg_i64(x, 2, &n))
        return;
    record_t rec = {.type = REC_KEY_TTL, .key_ttl = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len}};
    for (size_t i = 3; i < x->argc; i++) {
        if (arg_is(x, i, "NX"))
            rec.flags |= REC_F_NX;
        else if (arg_is(x, i, "XX"))
            rec.flags |= REC_F_XX;
        else if (arg_is(x, i, "GT"))
            rec.flags |= REC_F_GT;
        else if (arg_is(x, i, "LT"))
            rec.flags |= REC_F_LT;
        else {
            reply_errf(x, "ERR Unsupported option %.*s", (int)(x->argv[i].len > 32 ? 32 : x->argv[i].len),
                       x->argv[i].ptr);
            return;
        }
    }
    if ((rec.flags & REC_F_NX) && (rec.flags & (REC_F_XX | REC_F_GT | REC_F_LT))) {
        reply_err(x, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if ((rec.flags & REC_F_GT) && (rec.flags & REC_F_LT)) {
        reply_err(x, "ERR GT and LT options at the same time are not compatible");
        return;
    }
    uint64_t now = x->srv->now_ms;
    if (!ms && (n > INT64_MAX / 1000 || n < INT64_MIN / 1000)) {
        reply_errf(x, "ERR invalid expire time in '%s' command", name);
        return;
    }
    int64_t v = ms ? n : n * 1000;
    uint64_t at;
    if (absolute) {
        at = v > 0 ? (uint64_t)v : 0;
    } else if (v > 0 && (uint64_t)v > UINT64_MAX - now) {
        reply_errf(x, "ERR invalid expire time in '%s' command", name);
        return;
    } else {
        at = v > 0 ? now + (uint64_t)v : 0;
    }
    /* Not in the future: a deadline of now, which the apply treats as due. */
    rec.key_ttl.expire_at_ms = at > now ? at : (now > 0 ? now : 1);
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    resp_add_int(x->out, res.status == AP_OK ? 1 : 0);
}

static void cmd_expire(cmd_ctx_t *x) { do_expire(x, false, false); }
static void cmd_pexpire(cmd_ctx_t *x) { do_expire(x, true, false); }
static void cmd_expireat(cmd_ctx_t *x) { do_expire(x, false, true); }
static void cmd_pexpireat(cmd_ctx_t *x) { do_expire(x, true, true); }

/* EXPIRETIME / PEXPIRETIME key: the deadline as a Unix time (seconds,
 * rounded as Redis rounds, or milliseconds); -2 if no key, -1 if none. */
static void do_expiretime(cmd_ctx_t *x, bool ms)
{
    kv_version_t buf;
    if (visible(x->srv, &x->argv[1], &buf) == NULL) {
        resp_add_int(x->out, -2);
        return;
    }
    uint64_t at = core_expiry_of(x->srv->core, x->argv[1].ptr, x->argv[1].len);
    if (at == 0)
        resp_add_int(x->out, -1);
    else
        resp_add_int(x->out, ms ? (int64_t)at : (int64_t)((at + 500) / 1000));
}

static void cmd_expiretime(cmd_ctx_t *x) { do_expiretime(x, false); }
static void cmd_pexpiretime(cmd_ctx_t *x) { do_expiretime(x, true); }

/* PERSIST key: 1 if the key's deadline was removed, 0 if it had none or
 * does not exist. */
static void cmd_persist(cmd_ctx_t *x)
{
    if (!arg_name_ok(x, 1))
        return;
    record_t rec = {.type = REC_KEY_TTL, .key_ttl = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len}};
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    resp_add_int(x->out, res.status == AP_OK ? 1 : 0);
}

static void do_incr(cmd_ctx_t *x, int64_t by)
{
    if (!arg_name_ok(x, 1))
        return;
    record_t rec = {.type = REC_INCR, .incr = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len, .by = by}};
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (res.status == AP_NOTINT)
        reply_err(x, "ERR value is not an integer or out of range");
    else if (res.status == AP_OVERFLOW)
        reply_err(x, "ERR increment or decrement would overflow");
    else
        resp_add_int(x->out, res.kv.incr);
}

static void cmd_incr(cmd_ctx_t *x) { do_incr(x, 1); }
static void cmd_decr(cmd_ctx_t *x) { do_incr(x, -1); }

static void cmd_incrby(cmd_ctx_t *x)
{
    int64_t by;
    if (arg_i64(x, 2, &by))
        do_incr(x, by);
}

/* DECRBY k n is INCRBY k -n; -INT64_MIN has no such number, and Redis
 * refuses it with this text. */
static void cmd_decrby(cmd_ctx_t *x)
{
    int64_t by;
    if (!arg_i64(x, 2, &by))
        return;
    if (by == INT64_MIN)
        reply_err(x, "ERR decrement would overflow");
    else
        do_incr(x, -by);
}

/* ---- versioned keys ----------------------------------------------------------- */

/* [value, create_rev, mod_rev, version, lease] */
static void add_version(cmd_ctx_t *x, const kv_version_t *v, bool with_key)
{
    resp_add_array(x->out, with_key ? 6 : 5);
    if (with_key)
        resp_add_bulk(x->out, v->key, v->klen);
    resp_add_bulk(x->out, v->value, v->vlen);
    resp_add_uint(x->out, v->create_rev);
    resp_add_uint(x->out, v->mod_rev);
    resp_add_uint(x->out, v->version);
    resp_add_uint(x->out, v->lease);
}

/* Options of KV.PUT and KV.DEL: IFREV rev, FENCE lock token, and (KV.PUT
 * only, with_lease) LEASE id. Apply checks them: the fence against the
 * lock's holder at the record's time, the lease for being live. */
typedef struct write_opts_s {
    uint16_t flags;          /* REC_F_IFREV, REC_F_FENCE */
    uint64_t ifrev;
    uint64_t lease_id;
    uint64_t fence_token;
    const char *fence_lock;
    uint32_t fence_llen;
    cmd_fence_t fence;       /* the FENCE given, any kind (cmd.h) */
} write_opts_t;

/* Parse the options from argument from on into *o (zeroed first).
 * Returns false after replying on error. */
static bool parse_write_opts(cmd_ctx_t *x, size_t from, write_opts_t *o, bool with_lease)
{
    bool has_lease = false;
    memset(o, 0, sizeof *o);
    for (size_t i = from; i < x->argc; i++) {
        if (arg_is(x, i, "IFREV") && i + 1 < x->argc && !(o->flags & REC_F_IFREV)) {
            if (!arg_u64(x, ++i, &o->ifrev))
                return false;
            o->flags |= REC_F_IFREV;
        } else if (with_lease && arg_is(x, i, "LEASE") && i + 1 < x->argc && !has_lease) {
            if (!arg_u64(x, ++i, &o->lease_id))
                return false;
            has_lease = true;
        } else if (arg_is(x, i, "FENCE") && o->fence.kind == FENCE_NONE) {
            size_t took = cmd_fence_parse(x, i, &o->fence);
            if (took == 0)
                return false;
            if (o->fence.kind == FENCE_LOCK) { /* carried by the record, checked by apply */
                o->flags |= REC_F_FENCE;
                o->fence_token = o->fence.token;
                o->fence_lock = o->fence.name;
                o->fence_llen = (uint32_t)o->fence.nlen;
            }
            i += took - 1;
        } else {
            reply_syntax_at(x, i);
            return false;
        }
    }
    return true;
}

/* A condition of KV.PUT / KV.DEL failed: reply its error, return true. */
static bool reply_write_refused(cmd_ctx_t *x, const write_opts_t *o, const apply_result_t *res)
{
    if (res->status == AP_CONFLICT)
        reply_errf(x, "CONFLICT %llu", (unsigned long long)res->cur_rev);
    else if (res->status == AP_NOTHOLDER)
        reply_notholder_lock(x, &o->fence);
    else if (res->status == AP_NOTFOUND)
        reply_errf(x, "NOTFOUND lease %llu does not exist or has expired", (unsigned long long)o->lease_id);
    else
        return false;
    return true;
}

static void cmd_kv_put(cmd_ctx_t *x)
{
    write_opts_t o;
    if (!arg_name_ok(x, 1) || !arg_value_ok(x, 2) || !parse_write_opts(x, 3, &o, true) ||
        !cmd_fence_holds(x, &o.fence))
        return;
    record_t rec = {.type = REC_PUT,
                    .flags = o.flags,
                    .put = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len, .val = x->argv[2].ptr,
                            .vlen = (uint32_t)x->argv[2].len, .lease_id = o.lease_id, .ifrev = o.ifrev,
                            .fence_token = o.fence_token, .fence_lock = o.fence_lock, .fence_llen = o.fence_llen}};
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (!reply_write_refused(x, &o, &res))
        resp_add_uint(x->out, res.rev);
}

static void cmd_kv_del(cmd_ctx_t *x)
{
    write_opts_t o;
    if (!parse_write_opts(x, 2, &o, false) || !cmd_fence_holds(x, &o.fence))
        return;
    record_t rec = {.type = REC_DEL,
                    .flags = o.flags,
                    .del = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len, .ifrev = o.ifrev,
                            .fence_token = o.fence_token, .fence_lock = o.fence_lock, .fence_llen = o.fence_llen}};
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (!reply_write_refused(x, &o, &res))
        resp_add_uint(x->out, res.status == AP_OK ? res.rev : 0);
}

static void reply_compacted(cmd_ctx_t *x)
{
    reply_errf(x, "COMPACTED %llu", (unsigned long long)kv_oldest_rev(core_kv(x->srv->core)));
}

/* A read at a revision the store has not reached would answer the current
 * state now and another one after the next write: refused, as KV.WATCH
 * FROM and KV.COMPACT refuse it. Replies and returns true if rev is ahead
 * of the current revision. */
static bool rev_in_future(cmd_ctx_t *x, uint64_t rev)
{
    uint64_t cur = core_rev(x->srv->core);
    if (rev <= cur)
        return false;
    reply_errf(x, "ERR revision %llu is in the future (current revision %llu)", (unsigned long long)rev,
               (unsigned long long)cur);
    return true;
}

static void cmd_kv_get(cmd_ctx_t *x)
{
    uint64_t rev = 0;
    if (x->argc == 4 && arg_is(x, 2, "REV")) {
        if (!arg_u64(x, 3, &rev))
            return;
    } else if (x->argc != 2) {
        reply_syntax_at(x, 2);
        return;
    }
    if (rev_in_future(x, rev))
        return;
    kv_version_t buf;
    const kv_version_t *v;
    if (rev == 0) {
        v = visible(x->srv, &x->argv[1], &buf);
    } else if (kv_get_at(core_kv(x->srv->core), x->argv[1].ptr, x->argv[1].len, rev, &buf, &v) != KV_OK) {
        reply_compacted(x);
        return;
    }
    if (v == NULL)
        resp_add_null(x->out, x->proto);
    else
        add_version(x, v, false);
}

/* KV.RANGE walks its keys twice: once to count them and their bytes (the
 * array's length comes first, and max-reply-bytes is checked before
 * anything is built), once to write them straight into the reply. */
typedef struct range_count_s {
    size_t n;
    size_t bytes;
} range_count_t;

static int range_count(void *arg, const kv_version_t *v)
{
    range_count_t *a = arg;
    a->n++;
    a->bytes += 6 * BULK_FRAME_BYTES + v->klen + v->vlen; /* [key, value, 4 integers] */
    return 0;
}

static int range_visit(void *arg, const kv_version_t *v)
{
    add_version(arg, v, true);
    return 0;
}

static void cmd_kv_range(cmd_ctx_t *x)
{
    const resp_arg_t *after = NULL;
    uint64_t limit = 0, rev = 0;
    for (size_t i = 2; i < x->argc; i++) {
        if (arg_is(x, i, "AFTER") && i + 1 < x->argc) {
            after = &x->argv[++i];
        } else if (arg_is(x, i, "LIMIT") && i + 1 < x->argc) {
            if (!arg_u64(x, ++i, &limit))
                return;
        } else if (arg_is(x, i, "REV") && i + 1 < x->argc) {
            if (!arg_u64(x, ++i, &rev))
                return;
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    if (rev_in_future(x, rev))
        return;
    const kv_t *kv = core_kv(x->srv->core);
    const char *aptr = after ? after->ptr : NULL;
    size_t alen = after ? after->len : 0;
    range_count_t cnt = {0, 16};
    if (kv_range(kv, x->argv[1].ptr, x->argv[1].len, aptr, alen, rev, (size_t)limit, range_count, &cnt) < 0) {
        reply_compacted(x);
        return;
    }
    if (!reply_fits(x, cnt.bytes, "page with LIMIT and AFTER"))
        return;
    resp_add_array(x->out, cnt.n);
    long n = kv_range(kv, x->argv[1].ptr, x->argv[1].len, aptr, alen, rev, (size_t)limit, range_visit, x);
    assert(n >= 0 && (size_t)n == cnt.n); /* nothing changed between the walks: one thread */
    (void)n;
}

uint64_t cmd_kv_resumable(server_t *s)
{
    uint64_t oldest = kv_oldest_rev(core_kv(s->core));
    return oldest > 0 ? oldest - 1 : 0; /* KV.WATCH FROM r needs r + 1 >= the oldest kept (cmd_watch.c) */
}

static void cmd_kv_rev(cmd_ctx_t *x)
{
    resp_add_array(x->out, 2);
    resp_add_uint(x->out, core_rev(x->srv->core));
    resp_add_uint(x->out, kv_oldest_rev(core_kv(x->srv->core)));
}

static void cmd_kv_compact(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_COMPACT};
    if (!arg_u64(x, 1, &rec.compact.rev))
        return;
    /* A snapshot being written copies the history from its compaction
     * point on, which automatic compaction leaves alone meanwhile (the
     * pin). An explicit compaction past it would free what the snapshot
     * still reads (it then wrote bases the loader refuses; since the
     * snapshot codec asserts them, it aborted the server): refused until
     * the snapshot is in place. */
    uint64_t pin = core_compact_pin(x->srv->core);
    if (pin != 0 && rec.compact.rev > pin) {
        reply_errf(x, "BUSY a snapshot is being written; compaction past revision %llu waits for it "
                      "(INFO persistence snapshot_in_progress)", (unsigned long long)pin);
        return;
    }
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (res.status == AP_COMPACTED)
        reply_compacted(x);
    else if (res.status == AP_FUTURE)
        reply_errf(x, "ERR revision %llu is in the future (current revision %llu)",
                   (unsigned long long)rec.compact.rev, (unsigned long long)res.cur_rev); /* as rev_in_future() */
    else
        reply_ok(x);
}

const cmd_def_t cmd_kv_defs[] = {
    {"GET", 2, 0, cmd_get, "Get the value of a key", "key", "string"},
    {"SET", -3, CMD_WRITE, cmd_set,
     "Set the value of a key, optionally with an expiry; OK (nil if NX/XX failed), or with GET the old value",
     "key value [NX|XX] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|KEEPTTL]",
     "string"},
    {"DEL", -2, CMD_WRITE, cmd_del, "Delete keys; the number deleted", "key [key ...]", "generic"},
    {"UNLINK", -2, CMD_WRITE, cmd_del, "Delete keys (as DEL: ordo frees a value at once); the number deleted",
     "key [key ...]", "generic"},
    {"EXISTS", -2, 0, cmd_exists, "The number of the given keys that exist", "key [key ...]", "generic"},
    {"MGET", -2, 0, cmd_mget, "Get the values of several keys", "key [key ...]", "string"},
    {"TTL", 2, 0, cmd_ttl, "Seconds left before a key expires: -2 if no key, -1 if no expiry", "key", "generic"},
    {"PTTL", 2, 0, cmd_pttl, "Milliseconds left before a key expires: -2 if no key, -1 if no expiry", "key", "generic"},
    {"EXPIRE", -3, CMD_WRITE, cmd_expire,
     "Set a key's time to live in seconds; 1, or 0 if no key or the condition failed",
     "key seconds [NX|XX|GT|LT]", "generic"},
    {"PEXPIRE", -3, CMD_WRITE, cmd_pexpire,
     "Set a key's time to live in milliseconds; 1, or 0 if no key or the condition failed",
     "key milliseconds [NX|XX|GT|LT]", "generic"},
    {"EXPIREAT", -3, CMD_WRITE, cmd_expireat,
     "Set a key's deadline as a Unix time in seconds; 1, or 0 if no key or the condition failed",
     "key unix-time-seconds [NX|XX|GT|LT]", "generic"},
    {"PEXPIREAT", -3, CMD_WRITE, cmd_pexpireat,
     "Set a key's deadline as a Unix time in milliseconds; 1, or 0 if no key or the condition failed",
     "key unix-time-milliseconds [NX|XX|GT|LT]", "generic"},
    {"EXPIRETIME", 2, 0, cmd_expiretime,
     "A key's deadline as a Unix time in seconds: -2 if no key, -1 if no expiry", "key", "generic"},
    {"PEXPIRETIME", 2, 0, cmd_pexpiretime,
     "A key's deadline as a Unix time in milliseconds: -2 if no key, -1 if no expiry", "key", "generic"},
    {"PERSIST", 2, CMD_WRITE, cmd_persist, "Remove a key's expiry; 1, or 0 if no key or no expiry", "key", "generic"},
    {"INCR", 2, CMD_WRITE, cmd_incr, "Add one to the integer value of a key; the new value", "key", "string"},
    {"INCRBY", 3, CMD_WRITE, cmd_incrby,
     "Add n to the integer value of a key; the new value",
     "key increment", "string"},
    {"DECR", 2, CMD_WRITE, cmd_decr, "Subtract one from the integer value of a key; the new value", "key", "string"},
    {"DECRBY", 3, CMD_WRITE, cmd_decrby, "Subtract n from the integer value of a key; the new value",
     "key decrement", "string"},
    {"KV.PUT", -3, CMD_WRITE, cmd_kv_put,
     "Put a value, optionally only at a revision, on a lease or fenced; the new revision",
     "key value [IFREV rev] [LEASE id] [FENCE lock token|FENCE ELECTION name term|FENCE DELIVERY queue id token]", "ordo-kv"},
    {"KV.GET", -2, 0, cmd_kv_get, "A key's value and revisions, now or at a past revision", "key [REV rev]", "ordo-kv"},
    {"KV.DEL", -2, CMD_WRITE, cmd_kv_del,
     "Delete a key, optionally only at a revision or fenced; the deletion's revision or 0",
     "key [IFREV rev] [FENCE lock token|FENCE ELECTION name term|FENCE DELIVERY queue id token]", "ordo-kv"},
    {"KV.RANGE", -2, 0, cmd_kv_range,
     "The keys under a prefix with their values and revisions, paged",
     "prefix [AFTER key] [LIMIT n] [REV rev]", "ordo-kv"},
    {"KV.REV", 1, 0, cmd_kv_rev, "The current revision and the oldest retained one", "", "ordo-kv"},
    {"KV.COMPACT", 2, CMD_WRITE, cmd_kv_compact, "Drop the history before a revision", "rev", "ordo-kv"},
};

const size_t cmd_kv_ndefs = sizeof cmd_kv_defs / sizeof cmd_kv_defs[0];
