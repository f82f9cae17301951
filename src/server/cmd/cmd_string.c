/*
 * cmd_string.c -- the rest of Redis's string commands, as views of the
 * versioned store: SETEX, PSETEX, GETEX, GETDEL, MSET, MSETNX, APPEND,
 * STRLEN. (GET, SET, INCR and the expiry commands are cmd_kv.c's.)
 *
 * Each write is a record of the kinds KV.PUT and DEL already make, so it
 * takes revisions and fires watches like them: SETEX is a REC_PUT with a
 * deadline, GETDEL a REC_DEL, GETEX a REC_KEY_TTL. Two need more:
 *   - MSET and MSETNX write several keys at once, and Redis promises no
 *     client sees some of them set and others not: their puts go to the
 *     log as one REC_TXN record (the writer's transaction mode,
 *     writer/apply.h), so a crash keeps all of them or none. Inside MULTI
 *     they simply join the EXEC's record.
 *   - APPEND's value depends on the state, so it is a REC_APPEND computed
 *     by apply, and the log carries only the appended bytes.
 * A value a command answers (GETDEL's, GETEX's) is read before its record
 * applies, on the writer's thread, so nothing else runs in between.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "writer/apply.h"

/* Argument i's live version, filled into *buf (NULL if absent). */
static const kv_version_t *lookup(cmd_ctx_t *x, size_t i, kv_version_t *buf)
{
    return kv_get(core_kv(x->srv->core), x->argv[i].ptr, x->argv[i].len, buf);
}

/* SETEX key seconds value / PSETEX key milliseconds value: OK. */
static void do_setex(cmd_ctx_t *x, int unit, const char *name)
{
    record_t rec = {.type = REC_PUT, .put = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len,
                                             .val = x->argv[3].ptr, .vlen = (uint32_t)x->argv[3].len}};
    if (!arg_name_ok(x, 1) || !arg_value_ok(x, 3) || !cmd_expiry_at(x, 2, unit, name, &rec.put.expire_at_ms))
        return;
    apply_result_t res;
    if (cmd_write(x, &rec, &res))
        reply_ok(x);
}

static void cmd_setex(cmd_ctx_t *x) { do_setex(x, EXPIRY_EX, "setex"); }
static void cmd_psetex(cmd_ctx_t *x) { do_setex(x, EXPIRY_PX, "psetex"); }

/* GETEX key [EX s|PX ms|EXAT unix-s|PXAT unix-ms|PERSIST]: the value (nil
 * if none), and the new deadline set as EXPIRE would (REC_KEY_TTL). */
static void cmd_getex(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_KEY_TTL, .key_ttl = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len}};
    bool change = false;
    for (size_t i = 2; i < x->argc; i++) {
        int unit = cmd_expiry_unit(x, i);
        if (arg_is(x, i, "PERSIST") && !change) {
            change = true; /* a deadline of 0: none */
        } else if (unit != 0 && i + 1 < x->argc && !change) {
            if (!cmd_expiry_at(x, ++i, unit, "getex", &rec.key_ttl.expire_at_ms))
                return;
            change = true;
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    if (!arg_name_ok(x, 1))
        return;
    kv_version_t buf;
    const kv_version_t *v = lookup(x, 1, &buf);
    if (v == NULL) {
        resp_add_null(x->out, x->proto);
        return;
    }
    ordo_buf_t val = ORDO_BUF_INIT; /* a past deadline deletes the key, and its version */
    ordo_buf_append(&val, v->value, v->vlen);
    uint64_t now = x->srv->now_ms;
    if (change && rec.key_ttl.expire_at_ms != 0 && rec.key_ttl.expire_at_ms <= now)
        rec.key_ttl.expire_at_ms = now > 0 ? now : 1; /* due: KEY_TTL deletes the key */
    apply_result_t res;
    if (!change || cmd_write(x, &rec, &res))
        resp_add_bulk(x->out, val.data ? val.data : "", val.len);
    ordo_buf_free(&val);
}

/* GETDEL key: the value (nil if none), and the key deleted. */
static void cmd_getdel(cmd_ctx_t *x)
{
    kv_version_t buf;
    const kv_version_t *v = lookup(x, 1, &buf);
    if (v == NULL) {
        resp_add_null(x->out, x->proto);
        return;
    }
    ordo_buf_t val = ORDO_BUF_INIT; /* the deletion frees the version */
    ordo_buf_append(&val, v->value, v->vlen);
    record_t rec = {.type = REC_DEL, .del = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len}};
    apply_result_t res;
    if (cmd_write(x, &rec, &res))
        resp_add_bulk(x->out, val.data ? val.data : "", val.len);
    ordo_buf_free(&val);
}

/* Bytes an MSET's record counts against max-multi-bytes, as a MULTI of
 * its SETs would: each argument plus a record header's worth. */
#define MSET_ARG_OVERHEAD_BYTES 96

/* MSET's and MSETNX's checks: pairs, names, values, and the size of the
 * one record they make. Returns false after replying. */
static bool mset_ok(cmd_ctx_t *x, const char *name)
{
    if (x->argc % 2 == 0) {
        reply_errf(x, "ERR wrong number of arguments for '%s' command", name);
        return false;
    }
    size_t bytes = 0;
    for (size_t i = 1; i < x->argc; i += 2) {
        if (!arg_name_ok(x, i) || !arg_value_ok(x, i + 1))
            return false;
        bytes += x->argv[i].len + x->argv[i + 1].len + 2 * MSET_ARG_OVERHEAD_BYTES;
    }
    if (bytes > (size_t)x->srv->cfg.max_multi_bytes) {
        reply_errf(x, "LIMIT %s of %zu bytes (with 96 per argument) is one record, above max-multi-bytes (%lld); "
                      "set fewer keys at once", name, bytes, (long long)x->srv->cfg.max_multi_bytes);
        return false;
    }
    return true;
}

/* Write every pair as a REC_PUT (flags: NX for MSETNX, which checked
 * before that none exists), all in one REC_TXN record; inside MULTI they
 * join the EXEC's. Returns false after replying a refusal. */
static bool mset_write(cmd_ctx_t *x, uint16_t flags)
{
    server_t *s = x->srv;
    bool own = s->writer.txn == NULL;
    /* max-memory-bytes is judged once, before the first put: the
     * transaction mode does not judge it put by put. */
    char why[WRITER_REFUSAL_MAX];
    if (own && s->cfg.max_memory_bytes > 0 && writer_memory_refused(s, why, sizeof why)) {
        reply_err(x, why);
        return false;
    }
    writer_txn_t w;
    if (own)
        writer_txn_begin(s, &w, WTXN_APPLY);
    bool ok = true;
    for (size_t i = 1; i < x->argc && ok; i += 2) {
        record_t rec = {.type = REC_PUT, .flags = flags,
                        .put = {.key = x->argv[i].ptr, .klen = (uint32_t)x->argv[i].len, .val = x->argv[i + 1].ptr,
                                .vlen = (uint32_t)x->argv[i + 1].len}};
        apply_result_t res;
        /* Refused (not leading, read-only) only at the first: nothing in
         * between changes what the door judges. */
        ok = cmd_write(x, &rec, &res);
    }
    if (own && !writer_txn_end(s, &w) && ok) {
        reply_errf(x, "READONLY the log cannot be written, so writes are refused: %s", server_readonly(s));
        return false;
    }
    return ok;
}

/* MSET key value [key value ...]: OK. */
static void cmd_mset(cmd_ctx_t *x)
{
    if (mset_ok(x, "mset") && mset_write(x, 0))
        reply_ok(x);
}

/* MSETNX key value [key value ...]: 1 if every key was absent and all
 * were set, else 0 and none was. */
static void cmd_msetnx(cmd_ctx_t *x)
{
    if (!mset_ok(x, "msetnx"))
        return;
    kv_version_t buf;
    for (size_t i = 1; i < x->argc; i += 2) {
        if (lookup(x, i, &buf) != NULL) {
            resp_add_int(x->out, 0);
            return;
        }
    }
    if (mset_write(x, REC_F_NX))
        resp_add_int(x->out, 1);
}

/* APPEND key value: the value's new length. The result must fit
 * max-value-bytes, checked here against the value now. */
static void cmd_append(cmd_ctx_t *x)
{
    if (!arg_name_ok(x, 1))
        return;
    kv_version_t buf;
    const kv_version_t *v = lookup(x, 1, &buf);
    size_t total = (v ? v->vlen : 0) + x->argv[2].len;
    if (total > (size_t)x->srv->cfg.max_value_bytes) {
        reply_errf(x, "LIMIT value would be %zu bytes, above max-value-bytes (%lld)", total,
                   (long long)x->srv->cfg.max_value_bytes);
        return;
    }
    record_t rec = {.type = REC_APPEND, .append = {.key = x->argv[1].ptr, .klen = (uint32_t)x->argv[1].len,
                                                   .val = x->argv[2].ptr, .vlen = (uint32_t)x->argv[2].len}};
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    /* In a transaction's check pass nothing applied: the length predicted. */
    resp_add_uint(x->out, res.status == AP_OK ? res.kv.length : total);
}

/* STRLEN key: the value's length, 0 if no key. */
static void cmd_strlen(cmd_ctx_t *x)
{
    kv_version_t buf;
    const kv_version_t *v = lookup(x, 1, &buf);
    resp_add_uint(x->out, v ? v->vlen : 0);
}

const cmd_def_t cmd_string_defs[] = {
    {"SETEX", 4, CMD_WRITE, cmd_setex, "Set a key's value and its time to live in seconds; OK",
     "key seconds value", "string"},
    {"PSETEX", 4, CMD_WRITE, cmd_psetex, "Set a key's value and its time to live in milliseconds; OK",
     "key milliseconds value", "string"},
    {"GETEX", -2, CMD_WRITE, cmd_getex, "Get a key's value and set or remove its expiry",
     "key [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|PERSIST]", "string"},
    {"GETDEL", 2, CMD_WRITE, cmd_getdel, "Get a key's value and delete the key", "key", "string"},
    {"MSET", -3, CMD_WRITE, cmd_mset, "Set several keys at once, as one record; OK", "key value [key value ...]",
     "string"},
    {"MSETNX", -3, CMD_WRITE, cmd_msetnx,
     "Set several keys at once only if none exists; 1 if set, 0 if not", "key value [key value ...]", "string"},
    {"APPEND", 3, CMD_WRITE, cmd_append, "Append to a key's value (creating it); the new length", "key value",
     "string"},
    {"STRLEN", 2, 0, cmd_strlen, "The length of a key's value, 0 if no key", "key", "string"},
};

const size_t cmd_string_ndefs = sizeof cmd_string_defs / sizeof cmd_string_defs[0];
