/*
 * cmd_coord.c -- leases (LEASE.*), locks (LOCK.*) and leader election
 * (ELECT.*): the commands.
 *
 * The state machine is coord.h, applied by the core; this file only turns
 * requests into records and speaks RESP.
 *
 * The writer's side (who waits on which lock or election, serving them
 * when a record frees it, the observers, the timer that ends holdings on
 * time) is writer/coord_wait.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "core/coord.h"
#include "writer/apply.h"
#include "writer/coord_wait.h"

/* The longest TTL and the longest WAIT a command accepts: one year. Longer
 * holdings should keep themselves alive; the bound also keeps now + ttl far
 * from overflowing, which coord.h asks of its callers. */
#define COORD_TTL_MAX_MS (365ull * 24 * 3600 * 1000)

/* ---- argument helpers -------------------------------------------------------------------- */

/* A TTL or WAIT in ms: 1..COORD_TTL_MAX_MS, or 0 too if zero_ok. */
static bool arg_ms(cmd_ctx_t *x, size_t i, bool zero_ok, const char *what, uint64_t *out)
{
    if (!arg_u64(x, i, out))
        return false;
    if ((*out == 0 && !zero_ok) || *out > COORD_TTL_MAX_MS) {
        reply_errf(x, "ERR %s must be between %d and %llu ms", what, zero_ok ? 0 : 1,
                   (unsigned long long)COORD_TTL_MAX_MS);
        return false;
    }
    return true;
}

static void reply_lease_gone(cmd_ctx_t *x, uint64_t lease)
{
    char text[WRITER_REFUSAL_MAX];
    coord_wait_lease_gone_text(text, sizeof text, lease);
    reply_err(x, text);
}

static void reply_campaign(cmd_ctx_t *x, bool handover, uint64_t term, const char *hv, size_t hlen, bool lapsed)
{
    outcome_t o = {.kind = OUTCOME_CAMPAIGN,
                   .campaign = {.term = term, .handover = handover, .lapsed = lapsed, .value = hv, .vlen = hlen}};
    cmd_render(x->srv, x->out, x->proto, &o);
}

/* Park the connection on a lock or an election, or answer the refusal. */
static void park(cmd_ctx_t *x, int kind, uint64_t wait_ms, uint64_t ttl, uint64_t lease, bool handover,
                 const char *value, size_t vlen)
{
    char refusal[WRITER_REFUSAL_MAX];
    const resp_arg_t *name = &x->argv[1];
    if (!coord_wait_park(x->srv, x->conn, kind, name->ptr, name->len, wait_ms, ttl, lease, handover, value, vlen,
                         refusal, sizeof refusal))
        reply_err(x, refusal);
}

static const coord_t *cst(cmd_ctx_t *x) { return core_coord(x->srv->core); }

static void reply_notholder(cmd_ctx_t *x, const char *what, uint64_t token)
{
    reply_errf(x, "NOTHOLDER %s %llu does not hold it now", what, (unsigned long long)token);
}

/* ---- leases ------------------------------------------------------------------------------ */

static void cmd_lease_grant(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LEASE_GRANT};
    if (!arg_ms(x, 1, false, "ttl", &rec.lease.ttl_ms))
        return;
    apply_result_t res;
    if (cmd_write(x, &rec, &res))
        resp_add_uint(x->out, res.coord.granted);
}

static void cmd_lease_keepalive(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LEASE_KEEPALIVE};
    if (!arg_u64(x, 1, &rec.lease.lease_id))
        return;
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (res.status == AP_OK)
        resp_add_uint(x->out, res.coord.remaining_ms);
    else
        reply_lease_gone(x, rec.lease.lease_id);
}

/* Write rec and answer 1 if it changed something, 0 if it did not (a stale
 * token, an ended lease); nothing more if cmd_write answered already. */
static void write_answer(cmd_ctx_t *x, record_t *rec)
{
    apply_result_t res;
    if (cmd_write(x, rec, &res))
        resp_add_int(x->out, res.status == AP_OK ? 1 : 0);
}

static void cmd_lease_revoke(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LEASE_REVOKE};
    if (!arg_u64(x, 1, &rec.lease.lease_id))
        return;
    write_answer(x, &rec);
}

static void cmd_lease_ttl(cmd_ctx_t *x)
{
    uint64_t id, rem;
    size_t nkeys;
    if (!arg_u64(x, 1, &id))
        return;
    if (!coord_lease_ttl(cst(x), id, x->srv->now_ms, &rem, &nkeys)) {
        reply_lease_gone(x, id);
        return;
    }
    resp_add_array(x->out, 2);
    resp_add_uint(x->out, rem);
    resp_add_uint(x->out, nkeys);
}

/* ---- locks -------------------------------------------------------------------------------- */

/* LOCK.ACQUIRE name ttl [WAIT ms] [LEASE id] */
static void cmd_lock_acquire(cmd_ctx_t *x)
{
    uint64_t ttl, wait_ms = 0, lease = 0;
    bool has_wait = false, has_lease = false;
    if (!arg_u64(x, 2, &ttl))
        return;
    for (size_t i = 3; i < x->argc; i++) {
        if (arg_is(x, i, "WAIT") && i + 1 < x->argc && !has_wait) {
            if (!arg_ms(x, ++i, true, "WAIT", &wait_ms))
                return;
            has_wait = true;
        } else if (arg_is(x, i, "LEASE") && i + 1 < x->argc && !has_lease) {
            if (!arg_u64(x, ++i, &lease))
                return;
            has_lease = lease != 0;
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    /* ttl 0 means "as long as the lease": only with a lease. */
    if (!arg_ms(x, 2, has_lease, "ttl", &ttl) || !arg_name_ok(x, 1))
        return;
    const resp_arg_t *name = &x->argv[1];
    coord_wait_sweep(x->srv);
    if (has_lease && !coord_lease_live(cst(x), lease, x->srv->now_ms)) {
        reply_lease_gone(x, lease);
        return;
    }
    if (coord_wait_len(x->srv, COORD_WAIT_LOCK, name->ptr, name->len) == 0) {
        record_t rec = {.type = REC_LOCK_ACQUIRE,
                        .lock = {.name = name->ptr, .nlen = (uint32_t)name->len, .ttl_ms = ttl, .lease_id = lease}};
        apply_result_t res;
        if (!cmd_write(x, &rec, &res))
            return;
        if (res.status == AP_OK) {
            resp_add_uint(x->out, res.coord.granted);
            return;
        }
        if (res.status == AP_NOTFOUND) {
            reply_lease_gone(x, lease);
            return;
        }
    }
    /* Held, or others wait before us. */
    if (wait_ms == 0) {
        resp_add_null(x->out, x->proto);
        return;
    }
    park(x, COORD_WAIT_LOCK, wait_ms, ttl, lease, false, NULL, 0);
}

static bool lock_args(cmd_ctx_t *x, uint64_t *token)
{
    return arg_name_ok(x, 1) && arg_u64(x, 2, token);
}

static void cmd_lock_release(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LOCK_RELEASE, .lock = {.name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len}};
    if (!lock_args(x, &rec.lock.token))
        return;
    write_answer(x, &rec);
}

static void cmd_lock_extend(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_LOCK_EXTEND, .lock = {.name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len}};
    if (!lock_args(x, &rec.lock.token) || !arg_ms(x, 3, false, "ttl", &rec.lock.ttl_ms))
        return;
    write_answer(x, &rec);
}

static void cmd_lock_info(cmd_ctx_t *x)
{
    if (!arg_name_ok(x, 1))
        return;
    coord_lock_info_t li;
    const resp_arg_t *name = &x->argv[1];
    resp_add_array(x->out, 3);
    if (coord_lock_info(cst(x), name->ptr, name->len, x->srv->now_ms, &li)) {
        resp_add_uint(x->out, li.token);
        resp_add_uint(x->out, li.remaining_ms);
    } else {
        resp_add_null(x->out, x->proto);
        resp_add_uint(x->out, 0);
    }
    resp_add_uint(x->out, coord_wait_len(x->srv, COORD_WAIT_LOCK, name->ptr, name->len));
}

static void cmd_lock_check(cmd_ctx_t *x)
{
    uint64_t token;
    if (!lock_args(x, &token))
        return;
    resp_add_int(x->out, coord_lock_check(cst(x), x->argv[1].ptr, x->argv[1].len, token, x->srv->now_ms));
}

/* ---- elections --------------------------------------------------------------------------- */

/* ELECT.CAMPAIGN name value ttl [WAIT ms] [HANDOVER] */
/* ELECT.CAMPAIGN name value ttl [WAIT ms] [HANDOVER] [LEASE id]. With a
 * lease the leadership also ends when the lease does (ttl 0: only then),
 * as LOCK.ACQUIRE LEASE. */
static void cmd_elect_campaign(cmd_ctx_t *x)
{
    uint64_t ttl, wait_ms = 0, lease = 0;
    bool has_wait = false, handover = false, has_lease = false, lease_given = false;
    for (size_t i = 4; i < x->argc; i++) {
        if (arg_is(x, i, "WAIT") && i + 1 < x->argc && !has_wait) {
            if (!arg_ms(x, ++i, true, "WAIT", &wait_ms))
                return;
            has_wait = true;
        } else if (arg_is(x, i, "HANDOVER") && !handover) {
            handover = true;
        } else if (arg_is(x, i, "LEASE") && i + 1 < x->argc && !lease_given) {
            if (!arg_u64(x, ++i, &lease))
                return;
            lease_given = true;
            has_lease = lease != 0;
        } else {
            reply_syntax_at(x, i);
            return;
        }
    }
    if (!arg_name_ok(x, 1) || !arg_value_ok(x, 2) || !arg_ms(x, 3, has_lease, "ttl", &ttl))
        return;
    const resp_arg_t *name = &x->argv[1];
    coord_wait_sweep(x->srv);
    if (has_lease && !coord_lease_live(cst(x), lease, x->srv->now_ms)) {
        reply_lease_gone(x, lease);
        return;
    }
    if (coord_wait_len(x->srv, COORD_WAIT_ELECT, name->ptr, name->len) == 0) {
        record_t rec = {.type = REC_ELECT_CAMPAIGN,
                        .elect = {.name = name->ptr, .nlen = (uint32_t)name->len, .val = x->argv[2].ptr,
                                  .vlen = (uint32_t)x->argv[2].len, .ttl_ms = ttl, .lease_id = lease}};
        apply_result_t res;
        if (!cmd_write(x, &rec, &res))
            return;
        if (res.status == AP_OK) {
            reply_campaign(x, handover, res.coord.granted, res.coord.handover, res.coord.hlen,
                           res.coord.handover_lapsed);
            return;
        }
        if (res.status == AP_NOTFOUND) {
            reply_lease_gone(x, lease);
            return;
        }
    }
    /* Led, or other candidates queue before us. No WAIT: wait as long as it
     * takes (a campaign answers once it leads); WAIT 0: do not wait. */
    if (has_wait && wait_ms == 0) {
        resp_add_null(x->out, x->proto);
        return;
    }
    park(x, COORD_WAIT_ELECT, wait_ms, ttl, lease, handover, x->argv[2].ptr, x->argv[2].len);
}

static void cmd_elect_leader(cmd_ctx_t *x)
{
    coord_leader_t ld;
    if (!arg_name_ok(x, 1))
        return;
    if (!coord_elect_leader(cst(x), x->argv[1].ptr, x->argv[1].len, x->srv->now_ms, &ld)) {
        resp_add_null(x->out, x->proto);
        return;
    }
    resp_add_array(x->out, 2);
    resp_add_bulk(x->out, ld.value, ld.vlen);
    resp_add_uint(x->out, ld.term);
}

static void cmd_elect_proclaim(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_ELECT_PROCLAIM,
                    .elect = {.name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len, .val = x->argv[3].ptr,
                              .vlen = (uint32_t)x->argv[3].len}};
    if (!lock_args(x, &rec.elect.term) || !arg_value_ok(x, 3))
        return;
    write_answer(x, &rec);
}

static void cmd_elect_keepalive(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_ELECT_KEEPALIVE, .elect = {.name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len}};
    if (!lock_args(x, &rec.elect.term))
        return;
    apply_result_t res;
    if (!cmd_write(x, &rec, &res))
        return;
    if (res.status == AP_OK)
        resp_add_uint(x->out, res.coord.remaining_ms);
    else
        reply_notholder(x, "term", rec.elect.term);
}

/* ELECT.RESIGN name term [HANDOVER value] */
static void cmd_elect_resign(cmd_ctx_t *x)
{
    record_t rec = {.type = REC_ELECT_RESIGN, .elect = {.name = x->argv[1].ptr, .nlen = (uint32_t)x->argv[1].len}};
    if (!lock_args(x, &rec.elect.term))
        return;
    if (x->argc == 5 && arg_is(x, 3, "HANDOVER")) {
        if (!arg_value_ok(x, 4))
            return;
        rec.flags |= REC_F_HANDOVER;
        rec.elect.val = x->argv[4].ptr;
        rec.elect.vlen = (uint32_t)x->argv[4].len;
    } else if (x->argc != 3) {
        reply_syntax_at(x, x->argc > 3 ? 3 : x->argc - 1);
        return;
    }
    write_answer(x, &rec);
}

/* ELECT.OBSERVE name: the observer id, then ["leader", name, term, value]
 * now and on every change. */
static void cmd_elect_observe(cmd_ctx_t *x)
{
    conn_t *c = x->conn;
    server_t *s = x->srv;
    if (!arg_name_ok(x, 1))
        return;
    if (c->nwatches >= (size_t)s->cfg.max_watches_per_client) {
        reply_errf(x, "LIMIT this connection has %zu watches (max-watches-per-client)", c->nwatches);
        return;
    }
    const resp_arg_t *name = &x->argv[1];
    resp_add_uint(x->out, coord_wait_observe(s, c, &c->observers, name->ptr, name->len));
    c->nwatches++;
    coord_leader_t ld;
    if (!coord_elect_leader(cst(x), name->ptr, name->len, s->now_ms, &ld))
        ld = (coord_leader_t){0}; /* vacant */
    outcome_t o = {.kind = OUTCOME_LEADER,
                   .leader = {.name = name->ptr, .nlen = name->len, .term = ld.term, .value = ld.value,
                              .vlen = ld.vlen}};
    cmd_render(s, x->out, x->proto, &o);
}

/* ---- registration ---------------------------------------------------------------------- */

const cmd_def_t cmd_coord_defs[] = {
    {"LEASE.GRANT", 2, CMD_WRITE, cmd_lease_grant, "Grant a lease; its id", "ttl", "ordo-lease"},
    {"LEASE.KEEPALIVE", 2, CMD_WRITE, cmd_lease_keepalive, "Renew a lease; the remaining ms", "id", "ordo-lease"},
    {"LEASE.REVOKE", 2, CMD_WRITE, cmd_lease_revoke,
     "End a lease now, with everything attached to it; 1/0",
     "id", "ordo-lease"},
    {"LEASE.TTL", 2, 0, cmd_lease_ttl, "A lease's remaining ms and number of attached keys", "id", "ordo-lease"},
    {"LOCK.ACQUIRE", -3, CMD_WRITE, cmd_lock_acquire,
     "Acquire a lock, optionally waiting; the fencing token, or nil",
     "name ttl [WAIT ms] [LEASE id]", "ordo-lock"},
    {"LOCK.RELEASE", 3, CMD_WRITE, cmd_lock_release, "Release a lock held with token; 1/0", "name token", "ordo-lock"},
    {"LOCK.EXTEND", 4, CMD_WRITE, cmd_lock_extend,
     "Move a held lock's deadline to now + ttl; 1/0",
     "name token ttl", "ordo-lock"},
    {"LOCK.INFO", 2, 0, cmd_lock_info, "A lock's holder token, remaining ms and waiters", "name", "ordo-lock"},
    {"LOCK.CHECK", 3, 0, cmd_lock_check, "1 if token holds the lock now, else 0", "name token", "ordo-lock"},
    {"ELECT.CAMPAIGN", -4, CMD_WRITE, cmd_elect_campaign,
     "Campaign for leadership; the term once leading (with HANDOVER: [term, value])",
     "name value ttl [WAIT ms] [HANDOVER] [LEASE id]", "ordo-elect"},
    {"ELECT.LEADER", 2, 0, cmd_elect_leader, "The leader's value and term, or nil if vacant", "name", "ordo-elect"},
    {"ELECT.PROCLAIM", 4, CMD_WRITE, cmd_elect_proclaim,
     "Set the leader's value; 1, or 0 if term does not lead",
     "name term value", "ordo-elect"},
    {"ELECT.KEEPALIVE", 3, CMD_WRITE, cmd_elect_keepalive,
     "Renew a leadership; the remaining ms",
     "name term", "ordo-elect"},
    {"ELECT.RESIGN", -3, CMD_WRITE, cmd_elect_resign,
     "Give up leadership, optionally leaving a value to the next leader; 1/0",
     "name term [HANDOVER value]", "ordo-elect"},
    {"ELECT.OBSERVE", 2, CMD_WATCHMODE, cmd_elect_observe,
     "Follow an election: the observer id, then a push per change of leader or value",
     "name", "ordo-elect"},
};

const size_t cmd_coord_ndefs = sizeof cmd_coord_defs / sizeof cmd_coord_defs[0];
