/*
 * test_srv_coord.c -- the coordination state machine: leases (grant,
 * keepalive, revoke, expiry, attached keys), locks (tokens, release, extend,
 * check/fence, lapse, expiry records that re-check), elections (campaign,
 * proclaim, keepalive, resign with hand-over, expiry), the deadline heap,
 * snapshot and load, and a seeded randomized run against a reference model
 * that also compares every event, in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/coord.h"

/* ---- recorded events ----------------------------------------------------------- */

#define SMAX 24

typedef struct {
    int type, reason;
    char name[SMAX];
    size_t nlen;
    uint64_t id, lease;
    char value[SMAX];
    size_t vlen;
} ev_t;

typedef struct {
    ev_t ev[4096];
    size_t n;
} evlog_t;

static void record_ev(void *arg, const coord_event_t *e)
{
    evlog_t *l = arg;
    assert_true(l->n < sizeof l->ev / sizeof l->ev[0]);
    ev_t *r = &l->ev[l->n++];
    memset(r, 0, sizeof *r);
    r->type = e->type;
    r->reason = e->reason;
    assert_true(e->nlen <= SMAX && e->vlen <= SMAX);
    if (e->nlen)
        memcpy(r->name, e->name, e->nlen);
    r->nlen = e->nlen;
    r->id = e->id;
    r->lease = e->lease;
    if (e->vlen)
        memcpy(r->value, e->value, e->vlen);
    r->vlen = e->vlen;
}

static const ev_t *ev_at(const evlog_t *l, size_t i)
{
    assert_true(i < l->n);
    return &l->ev[i];
}

static void expect_ev(const evlog_t *l, size_t i, int type, int reason, const char *name, uint64_t id)
{
    const ev_t *e = ev_at(l, i);
    assert_int_equal(e->type, type);
    assert_int_equal(e->reason, reason);
    if (name != NULL) {
        assert_int_equal(e->nlen, strlen(name));
        assert_memory_equal(e->name, name, e->nlen);
    }
    assert_int_equal(e->id, id);
}

#define S(s) (s), strlen(s)

static coord_t *new_coord(evlog_t *log)
{
    coord_t *c = coord_create();
    assert_non_null(c);
    if (log != NULL) {
        log->n = 0;
        coord_set_event_cb(c, record_ev, log);
    }
    return c;
}

/* ---- leases ------------------------------------------------------------------------ */

static void test_lease_basic(void **state)
{
    (void)state;
    static evlog_t log;
    coord_t *c = new_coord(&log);
    uint64_t rem = 0;
    size_t nkeys = 99;

    assert_int_equal(coord_lease_grant(c, 100, 1000, 5), 5);
    assert_true(coord_lease_live(c, 5, 1000));
    assert_true(coord_lease_live(c, 5, 1099));
    assert_false(coord_lease_live(c, 5, 1100));   /* lapsed at its deadline */
    assert_false(coord_lease_live(c, 6, 1000));
    assert_false(coord_lease_live(c, 0, 1000));
    assert_int_equal(coord_lease_ttl(c, 5, 1030, &rem, &nkeys), 1);
    assert_int_equal(rem, 70);
    assert_int_equal(nkeys, 0);
    assert_int_equal(coord_lease_ttl(c, 5, 1030, NULL, NULL), 1);
    assert_int_equal(coord_lease_ttl(c, 6, 1030, &rem, &nkeys), 0);
    assert_int_equal(coord_next_deadline(c), 1100);

    /* keepalive renews by the granted TTL */
    assert_int_equal(coord_lease_keepalive(c, 5, 1050, &rem), COORD_OK);
    assert_int_equal(rem, 100);
    assert_int_equal(coord_next_deadline(c), 1150);
    assert_int_equal(coord_lease_keepalive(c, 5, 1060, NULL), COORD_OK);
    assert_int_equal(coord_next_deadline(c), 1160);
    assert_int_equal(coord_lease_keepalive(c, 7, 1060, &rem), COORD_NOTFOUND);

    /* an expire record logged before that keepalive is a no-op now */
    assert_int_equal(coord_lease_expire(c, 5, 1100), 0);
    assert_int_equal(coord_lease_expire(c, 5, 1159), 0);
    assert_int_equal(log.n, 0);

    /* lapsed: still there (ttl 0 ms), keepalive refused */
    assert_int_equal(coord_lease_ttl(c, 5, 1200, &rem, NULL), 1);
    assert_int_equal(rem, 0);
    assert_int_equal(coord_lease_keepalive(c, 5, 1160, &rem), COORD_NOTFOUND);
    assert_int_equal(coord_next_deadline(c), 1160);

    /* the expire record ends it */
    assert_int_equal(coord_lease_expire(c, 99, 1160), 0);
    assert_int_equal(coord_lease_expire(c, 5, 1160), 1);
    assert_int_equal(log.n, 1);
    expect_ev(&log, 0, COORD_EV_LEASE_END, COORD_R_EXPIRE, NULL, 5);
    assert_int_equal(coord_lease_expire(c, 5, 1160), 0);
    assert_int_equal(coord_lease_ttl(c, 5, 1160, NULL, NULL), 0);
    assert_int_equal(coord_next_deadline(c), 0);

    /* revoke: 1, then 0; revoke works on a lapsed lease too */
    assert_int_equal(coord_lease_grant(c, 10, 2000, 8), 8);
    assert_int_equal(coord_lease_revoke(c, 8), 1);
    expect_ev(&log, 1, COORD_EV_LEASE_END, COORD_R_RELEASE, NULL, 8);
    assert_int_equal(coord_lease_revoke(c, 8), 0);
    assert_int_equal(coord_lease_grant(c, 10, 2000, 9), 9);
    assert_int_equal(coord_lease_revoke(c, 9), 1);
    assert_int_equal(log.n, 3);

    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.leases, 0);
    assert_int_equal(st.deadlines, 0);
    coord_destroy(c);
    coord_destroy(NULL);
}

static void test_lease_attach(void **state)
{
    (void)state;
    static evlog_t log;
    coord_t *c = new_coord(&log);
    size_t nkeys = 0;
    coord_lease_grant(c, 100, 0, 1);
    coord_lease_grant(c, 100, 0, 2);

    assert_int_equal(coord_lease_attach(c, S("zeta"), 1), COORD_OK);
    assert_int_equal(coord_lease_attach(c, "b\0x", 3, 1), COORD_OK);
    assert_int_equal(coord_lease_attach(c, "", 0, 1), COORD_OK);  /* empty key */
    assert_int_equal(coord_lease_attach(c, S("alpha"), 1), COORD_OK);
    assert_int_equal(coord_lease_attach(c, S("moved"), 2), COORD_OK);
    assert_int_equal(coord_lease_attach(c, S("x"), 3), COORD_NOTFOUND);
    assert_int_equal(coord_lease_of(c, S("x")), 0);
    assert_int_equal(coord_lease_of(c, "b\0x", 3), 1);
    assert_int_equal(coord_lease_of(c, "b", 1), 0);
    assert_int_equal(coord_lease_of(c, S("moved")), 2);

    /* same lease again: keeps its place; another lease: moves to its end */
    assert_int_equal(coord_lease_attach(c, S("zeta"), 1), COORD_OK);
    assert_int_equal(coord_lease_attach(c, S("moved"), 1), COORD_OK);
    assert_int_equal(coord_lease_of(c, S("moved")), 1);
    assert_int_equal(coord_lease_ttl(c, 1, 0, NULL, &nkeys), 1);
    assert_int_equal(nkeys, 5);
    assert_int_equal(coord_lease_ttl(c, 2, 0, NULL, &nkeys), 1);
    assert_int_equal(nkeys, 0);

    /* detach */
    assert_int_equal(coord_lease_detach(c, S("alpha")), 1);
    assert_int_equal(coord_lease_detach(c, S("alpha")), 0);
    assert_int_equal(coord_lease_detach(c, S("never")), 0);
    assert_int_equal(coord_lease_of(c, S("alpha")), 0);
    coord_lease_ttl(c, 1, 0, NULL, &nkeys);
    assert_int_equal(nkeys, 4);
    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.attached_keys, 4);

    /* the end lists the keys in attach order, then LEASE_END */
    assert_int_equal(coord_lease_revoke(c, 1), 1);
    assert_int_equal(log.n, 5);
    expect_ev(&log, 0, COORD_EV_KEY, COORD_R_LEASE, "zeta", 0);
    assert_int_equal(ev_at(&log, 1)->nlen, 3);
    assert_memory_equal(ev_at(&log, 1)->name, "b\0x", 3);
    expect_ev(&log, 2, COORD_EV_KEY, COORD_R_LEASE, "", 0);
    expect_ev(&log, 3, COORD_EV_KEY, COORD_R_LEASE, "moved", 0);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ev_at(&log, i)->lease, 1);
    expect_ev(&log, 4, COORD_EV_LEASE_END, COORD_R_RELEASE, NULL, 1);
    assert_int_equal(coord_lease_of(c, S("zeta")), 0);
    assert_int_equal(coord_lease_detach(c, S("zeta")), 0);
    coord_stats(c, &st);
    assert_int_equal(st.attached_keys, 0);
    assert_int_equal(st.leases, 1);
    coord_destroy(c);   /* lease 2 left: destroy frees it */
}

/* The event callback may read the state: the lease is already gone and the
 * key already detached when its KEY event arrives. */
typedef struct {
    coord_t *c;
    int checked;
} reader_t;

static void reading_cb(void *arg, const coord_event_t *e)
{
    reader_t *r = arg;
    if (e->type == COORD_EV_KEY) {
        assert_int_equal(coord_lease_of(r->c, e->name, e->nlen), 0);
        assert_int_equal(coord_lease_ttl(r->c, e->lease, 0, NULL, NULL), 0);
        r->checked++;
    } else if (e->type == COORD_EV_LOCK_FREE) {
        assert_int_equal(coord_lock_info(r->c, e->name, e->nlen, 0, NULL), 0);
        r->checked++;
    } else if (e->type == COORD_EV_VACANT) {
        assert_int_equal(coord_elect_leader(r->c, e->name, e->nlen, 0, NULL), 0);
        r->checked++;
    }
}

static void test_callback_reads(void **state)
{
    (void)state;
    coord_t *c = coord_create();
    reader_t r = {c, 0};
    coord_set_event_cb(c, reading_cb, &r);
    coord_lease_grant(c, 100, 0, 1);
    coord_lease_attach(c, S("k"), 1);
    uint64_t tok;
    assert_int_equal(coord_lock_acquire(c, S("L"), 0, 1, 0, 2, &tok), COORD_OK);
    assert_int_equal(coord_elect_campaign(c, S("E"), S("v"), 0, 1, 0, 3, NULL), COORD_OK);
    assert_int_equal(coord_lease_revoke(c, 1), 1);
    assert_int_equal(r.checked, 3);
    coord_destroy(c);
}

/* ---- locks ----------------------------------------------------------------------------- */

static void test_lock_basic(void **state)
{
    (void)state;
    static evlog_t log;
    coord_t *c = new_coord(&log);
    uint64_t tok = 0;
    coord_lock_info_t li;

    assert_int_equal(coord_lock_info(c, S("L"), 0, &li), 0);
    assert_int_equal(coord_lock_check(c, S("L"), 1, 0), 0);
    assert_int_equal(coord_lock_acquire(c, S("L"), 100, 0, 1000, 10, &tok), COORD_OK);
    assert_int_equal(tok, 10);
    /* busy: the holder's token, rev not used (the next rev may be the same) */
    assert_int_equal(coord_lock_acquire(c, S("L"), 100, 0, 1010, 11, &tok), COORD_BUSY);
    assert_int_equal(tok, 10);
    assert_int_equal(coord_lock_acquire(c, S("L"), 100, 0, 1010, 11, NULL), COORD_BUSY);
    /* binary names are distinct */
    assert_int_equal(coord_lock_acquire(c, "L\0", 2, 100, 0, 1010, 11, &tok), COORD_OK);
    assert_int_equal(tok, 11);

    assert_int_equal(coord_lock_info(c, S("L"), 1020, &li), 1);
    assert_int_equal(li.token, 10);
    assert_int_equal(li.remaining_ms, 80);
    assert_int_equal(li.deadline_ms, 1100);
    assert_int_equal(li.lease, 0);
    assert_int_equal(coord_lock_info(c, S("L"), 1020, NULL), 1);
    assert_int_equal(coord_lock_check(c, S("L"), 10, 1020), 1);
    assert_int_equal(coord_fence_ok(c, S("L"), 10, 1020), 1);
    assert_int_equal(coord_lock_check(c, S("L"), 11, 1020), 0);
    assert_int_equal(coord_lock_check(c, S("M"), 10, 1020), 0);

    /* extend: right token only */
    assert_int_equal(coord_lock_extend(c, S("L"), 9, 500, 1050), 0);
    assert_int_equal(coord_lock_extend(c, S("M"), 10, 500, 1050), 0);
    assert_int_equal(coord_lock_extend(c, S("L"), 10, 500, 1050), 1);
    coord_lock_info(c, S("L"), 1050, &li);
    assert_int_equal(li.remaining_ms, 500);
    /* an expire record from before the extend re-checks and does nothing */
    assert_int_equal(coord_lock_expire(c, S("L"), 10, 1100), 0);
    assert_int_equal(log.n, 0);

    /* release: wrong token 0, right token 1 and LOCK_FREE */
    assert_int_equal(coord_lock_release(c, S("L"), 11, 1060), 0);
    assert_int_equal(coord_lock_release(c, S("L"), 10, 1060), 1);
    assert_int_equal(log.n, 1);
    expect_ev(&log, 0, COORD_EV_LOCK_FREE, COORD_R_RELEASE, "L", 10);
    assert_int_equal(ev_at(&log, 0)->lease, 0);
    assert_int_equal(coord_lock_release(c, S("L"), 10, 1060), 0);
    assert_int_equal(coord_lock_check(c, S("L"), 10, 1060), 0);
    assert_int_equal(coord_lock_info(c, S("L"), 1060, &li), 0);

    /* the next holder gets a higher token; the old one is stale */
    assert_int_equal(coord_lock_acquire(c, S("L"), 50, 0, 1070, 12, &tok), COORD_OK);
    assert_int_equal(tok, 12);
    assert_int_equal(coord_lock_release(c, S("L"), 10, 1071), 0);
    assert_int_equal(coord_lock_extend(c, S("L"), 10, 50, 1071), 0);
    assert_int_equal(coord_fence_ok(c, S("L"), 10, 1071), 0);

    /* lapsed (deadline 1120 passed, no expire record yet) */
    assert_int_equal(coord_lock_check(c, S("L"), 12, 1119), 1);
    assert_int_equal(coord_lock_check(c, S("L"), 12, 1120), 0);
    assert_int_equal(coord_lock_extend(c, S("L"), 12, 50, 1120), 0);
    assert_int_equal(coord_lock_release(c, S("L"), 12, 1125), 0);
    assert_int_equal(coord_lock_acquire(c, S("L"), 50, 0, 1125, 13, &tok), COORD_BUSY);
    assert_int_equal(tok, 12);
    assert_int_equal(coord_lock_info(c, S("L"), 1125, &li), 1);
    assert_int_equal(li.remaining_ms, 0);
    coord_due_t due;
    /* "L\0" (token 11, deadline 1110) is due first */
    assert_int_equal(coord_due(c, 1125, &due), 1);
    assert_int_equal(due.kind, COORD_LOCK);
    assert_int_equal(due.id, 11);
    assert_int_equal(due.deadline_ms, 1110);
    assert_int_equal(due.nlen, 2);
    assert_int_equal(coord_lock_expire(c, due.name, due.nlen, due.id, 1125), 1);
    expect_ev(&log, 1, COORD_EV_LOCK_FREE, COORD_R_EXPIRE, NULL, 11);
    assert_int_equal(coord_due(c, 1125, &due), 1);
    assert_int_equal(due.kind, COORD_LOCK);
    assert_int_equal(due.id, 12);
    assert_int_equal(due.deadline_ms, 1120);
    assert_int_equal(due.nlen, 1);
    assert_memory_equal(due.name, "L", 1);
    /* expire records: wrong token, too early, then right */
    assert_int_equal(coord_lock_expire(c, S("L"), 10, 1125), 0);
    assert_int_equal(coord_lock_expire(c, S("L"), 12, 1119), 0);
    assert_int_equal(coord_lock_expire(c, S("nope"), 12, 1125), 0);
    assert_int_equal(coord_lock_expire(c, S("L"), 12, 1125), 1);
    expect_ev(&log, 2, COORD_EV_LOCK_FREE, COORD_R_EXPIRE, "L", 12);
    assert_int_equal(coord_lock_expire(c, S("L"), 12, 1125), 0);
    assert_int_equal(coord_lock_acquire(c, S("L"), 50, 0, 1125, 13, &tok), COORD_OK);
    assert_int_equal(tok, 13);

    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.locks, 1);
    assert_int_equal(st.deadlines, 1);
    coord_destroy(c);
}

static void test_lock_lease(void **state)
{
    (void)state;
    static evlog_t log;
    coord_t *c = new_coord(&log);
    uint64_t tok = 0, rem;
    coord_lock_info_t li;

    coord_lease_grant(c, 100, 0, 1);
    /* lease-bound lock, no TTL of its own */
    assert_int_equal(coord_lock_acquire(c, S("B"), 0, 1, 10, 2, &tok), COORD_OK);
    assert_int_equal(coord_lock_acquire(c, S("A"), 0, 1, 10, 3, &tok), COORD_OK);
    assert_int_equal(coord_lock_acquire(c, S("C"), 500, 1, 10, 4, &tok), COORD_OK); /* both */
    assert_int_equal(coord_lock_acquire(c, S("D"), 0, 9, 10, 5, &tok), COORD_NOTFOUND);
    assert_int_equal(coord_lock_info(c, S("A"), 20, &li), 1);
    assert_int_equal(li.lease, 1);
    assert_int_equal(li.deadline_ms, 0);
    assert_int_equal(li.remaining_ms, 80);        /* the lease's */
    coord_lock_info(c, S("C"), 20, &li);
    assert_int_equal(li.remaining_ms, 80);        /* the first of the two */
    assert_int_equal(li.deadline_ms, 510);
    /* a lease-only lock has no deadline: its expire record does nothing */
    assert_int_equal(coord_lock_expire(c, S("A"), 3, 10000), 0);
    /* keepalive of the lease keeps the lock */
    assert_int_equal(coord_lease_keepalive(c, 1, 90, &rem), COORD_OK);
    assert_int_equal(coord_lock_check(c, S("A"), 3, 150), 1);
    /* lapsed lease: the lock's rights lapse with it */
    assert_int_equal(coord_lock_check(c, S("A"), 3, 190), 0);
    assert_int_equal(coord_lock_release(c, S("A"), 3, 190), 0);
    assert_int_equal(coord_lock_acquire(c, S("A"), 10, 0, 190, 6, &tok), COORD_BUSY);
    assert_int_equal(coord_lock_acquire(c, S("D"), 10, 1, 190, 6, &tok), COORD_NOTFOUND);
    /* extend on a lease-bound lock adds a deadline; the lease still binds */
    assert_int_equal(coord_lock_extend(c, S("B"), 2, 30, 100), 1);
    coord_lock_info(c, S("B"), 100, &li);
    assert_int_equal(li.deadline_ms, 130);
    assert_int_equal(li.lease, 1);
    /* the lease expires: every lock under it is freed, in token order */
    assert_int_equal(coord_lease_expire(c, 1, 190), 1);
    assert_int_equal(log.n, 4);
    expect_ev(&log, 0, COORD_EV_LOCK_FREE, COORD_R_LEASE, "B", 2);
    expect_ev(&log, 1, COORD_EV_LOCK_FREE, COORD_R_LEASE, "A", 3);
    expect_ev(&log, 2, COORD_EV_LOCK_FREE, COORD_R_LEASE, "C", 4);
    assert_int_equal(ev_at(&log, 2)->lease, 1);
    expect_ev(&log, 3, COORD_EV_LEASE_END, COORD_R_EXPIRE, NULL, 1);
    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.locks, 0);
    assert_int_equal(st.deadlines, 0);
    /* a lock released before its lease ends is no longer listed */
    coord_lease_grant(c, 100, 200, 7);
    coord_lock_acquire(c, S("A"), 0, 7, 200, 8, &tok);
    coord_lock_acquire(c, S("B"), 0, 7, 200, 9, &tok);
    assert_int_equal(coord_lock_release(c, S("A"), 8, 201), 1);
    log.n = 0;
    assert_int_equal(coord_lease_revoke(c, 7), 1);
    assert_int_equal(log.n, 2);
    expect_ev(&log, 0, COORD_EV_LOCK_FREE, COORD_R_LEASE, "B", 9);
    coord_destroy(c);
}

/* ---- elections ------------------------------------------------------------------------ */

static void test_elect_basic(void **state)
{
    (void)state;
    static evlog_t log;
    coord_t *c = new_coord(&log);
    coord_leader_t ld;
    uint64_t rem;

    assert_int_equal(coord_elect_leader(c, S("E"), 0, &ld), 0);
    assert_int_equal(coord_elect_campaign(c, S("E"), S("alice"), 100, 0, 1000, 5, &ld), COORD_OK);
    assert_int_equal(ld.term, 5);
    assert_null(ld.handover);
    assert_int_equal(ld.vlen, 5);
    expect_ev(&log, 0, COORD_EV_LEADER, COORD_R_CAMPAIGN, "E", 5);
    assert_memory_equal(ev_at(&log, 0)->value, "alice", 5);
    /* busy: the leader */
    assert_int_equal(coord_elect_campaign(c, S("E"), S("bob"), 100, 0, 1010, 6, &ld), COORD_BUSY);
    assert_int_equal(ld.term, 5);
    assert_memory_equal(ld.value, "alice", 5);
    assert_int_equal(ld.remaining_ms, 90);
    assert_int_equal(coord_elect_campaign(c, S("E"), S("bob"), 100, 0, 1010, 6, NULL), COORD_BUSY);
    assert_int_equal(log.n, 1);
    assert_int_equal(coord_elect_leader(c, S("E"), 1010, &ld), 1);
    assert_int_equal(ld.term, 5);
    assert_int_equal(ld.lease, 0);
    assert_int_equal(coord_elect_check(c, S("E"), 5, 1010), 1);
    assert_int_equal(coord_elect_check(c, S("E"), 4, 1010), 0);
    assert_int_equal(coord_elect_check(c, S("F"), 5, 1010), 0);

    /* proclaim */
    assert_int_equal(coord_elect_proclaim(c, S("E"), 4, S("x"), 1020), 0);
    assert_int_equal(coord_elect_proclaim(c, S("E"), 5, S("alice2"), 1020), 1);
    expect_ev(&log, 1, COORD_EV_LEADER, COORD_R_PROCLAIM, "E", 5);
    assert_memory_equal(ev_at(&log, 1)->value, "alice2", 6);
    coord_elect_leader(c, S("E"), 1020, &ld);
    assert_int_equal(ld.vlen, 6);
    assert_int_equal(coord_elect_proclaim(c, S("E"), 5, "", 0, 1020), 1);  /* empty value */
    coord_elect_leader(c, S("E"), 1020, &ld);
    assert_int_equal(ld.vlen, 0);

    /* keepalive */
    assert_int_equal(coord_elect_keepalive(c, S("E"), 4, 1050, &rem), COORD_NOTHOLDER);
    assert_int_equal(coord_elect_keepalive(c, S("E"), 5, 1050, &rem), COORD_OK);
    assert_int_equal(rem, 100);
    assert_int_equal(coord_elect_expire(c, S("E"), 5, 1100), 0);  /* re-check: no-op */

    /* resign with a hand-over: vacant, value kept for the next leader */
    assert_int_equal(coord_elect_resign(c, S("E"), 4, S("h"), 1060), 0);
    assert_int_equal(coord_elect_resign(c, S("E"), 5, S("state-42"), 1060), 1);
    expect_ev(&log, 3, COORD_EV_VACANT, COORD_R_RELEASE, "E", 5);
    assert_int_equal(coord_elect_leader(c, S("E"), 1060, &ld), 0);
    assert_int_equal(coord_elect_resign(c, S("E"), 5, NULL, 0, 1060), 0);
    assert_int_equal(coord_elect_proclaim(c, S("E"), 5, S("z"), 1060), 0);
    assert_int_equal(coord_elect_keepalive(c, S("E"), 5, 1060, &rem), COORD_NOTHOLDER);
    assert_int_equal(coord_elect_check(c, S("E"), 0, 1060), 0);
    assert_int_equal(coord_elect_expire(c, S("E"), 0, 99999), 0);
    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.leaders, 0);
    assert_int_equal(st.handovers, 1);

    assert_int_equal(coord_elect_campaign(c, S("E"), S("bob"), 100, 0, 1070, 7, &ld), COORD_OK);
    assert_int_equal(ld.term, 7);
    assert_non_null(ld.handover);
    assert_int_equal(ld.hlen, 8);
    assert_memory_equal(ld.handover, "state-42", 8);
    coord_stats(c, &st);
    assert_int_equal(st.handovers, 0);
    /* resign without a hand-over: the next leader gets none */
    assert_int_equal(coord_elect_resign(c, S("E"), 7, NULL, 0, 1080), 1);
    coord_stats(c, &st);
    assert_int_equal(st.handovers, 0);
    assert_int_equal(coord_elect_campaign(c, S("E"), S("carol"), 100, 0, 1090, 8, &ld), COORD_OK);
    assert_null(ld.handover);
    /* an empty hand-over is a value, not none */
    assert_int_equal(coord_elect_resign(c, S("E"), 8, "", 0, 1090), 1);
    assert_int_equal(coord_elect_campaign(c, S("E"), S("dave"), 100, 0, 1090, 9, &ld), COORD_OK);
    assert_non_null(ld.handover);
    assert_int_equal(ld.hlen, 0);

    /* lapsed and expiry */
    assert_int_equal(coord_elect_check(c, S("E"), 9, 1190), 0);
    assert_int_equal(coord_elect_proclaim(c, S("E"), 9, S("late"), 1190), 0);
    assert_int_equal(coord_elect_resign(c, S("E"), 9, S("late"), 1190), 0);
    assert_int_equal(coord_elect_keepalive(c, S("E"), 9, 1190, &rem), COORD_NOTHOLDER);
    assert_int_equal(coord_elect_campaign(c, S("E"), S("eve"), 100, 0, 1190, 10, &ld), COORD_BUSY);
    assert_int_equal(ld.remaining_ms, 0);
    coord_due_t due;
    assert_int_equal(coord_due(c, 1190, &due), 1);
    assert_int_equal(due.kind, COORD_ELECT);
    assert_int_equal(due.id, 9);
    assert_int_equal(coord_elect_expire(c, S("E"), 8, 1190), 0);
    assert_int_equal(coord_elect_expire(c, S("E"), 9, 1189), 0);
    log.n = 0;
    assert_int_equal(coord_elect_expire(c, S("E"), 9, 1190), 1);
    expect_ev(&log, 0, COORD_EV_VACANT, COORD_R_EXPIRE, "E", 9);
    assert_int_equal(coord_elect_campaign(c, S("E"), S("eve"), 100, 0, 1190, 10, &ld), COORD_OK);
    /* the expired term's last value reaches the next leader, marked lapsed */
    assert_non_null(ld.handover);
    assert_true(ld.handover_lapsed);
    assert_int_equal(coord_elect_resign(c, S("E"), 10, S("given"), 1190), 1);
    assert_int_equal(coord_elect_campaign(c, S("E"), S("fay"), 100, 0, 1190, 11, &ld), COORD_OK);
    assert_memory_equal(ld.handover, "given", 5);
    assert_false(ld.handover_lapsed);
    coord_destroy(c);
}

static void test_elect_lease(void **state)
{
    (void)state;
    static evlog_t log;
    coord_t *c = new_coord(&log);
    coord_leader_t ld;
    uint64_t rem;
    coord_lease_grant(c, 100, 0, 1);
    assert_int_equal(coord_elect_campaign(c, S("E2"), S("a"), 0, 1, 0, 2, &ld), COORD_OK);
    assert_int_equal(coord_elect_campaign(c, S("E1"), S("b"), 1000, 1, 0, 3, &ld), COORD_OK);
    assert_int_equal(coord_elect_campaign(c, S("E3"), S("c"), 0, 7, 0, 4, &ld), COORD_NOTFOUND);
    assert_int_equal(ld.lease, 1);
    /* keepalive of a lease-only leadership changes nothing; reports the lease's time */
    assert_int_equal(coord_elect_keepalive(c, S("E2"), 2, 40, &rem), COORD_OK);
    assert_int_equal(rem, 60);
    assert_int_equal(coord_elect_keepalive(c, S("E1"), 3, 40, &rem), COORD_OK);
    assert_int_equal(rem, 60);   /* its own 1000 ms, but the lease ends first */
    assert_int_equal(coord_elect_check(c, S("E2"), 2, 100), 0);  /* the lease lapsed */
    log.n = 0;
    assert_int_equal(coord_lease_expire(c, 1, 100), 1);
    assert_int_equal(log.n, 3);
    expect_ev(&log, 0, COORD_EV_VACANT, COORD_R_LEASE, "E2", 2);
    expect_ev(&log, 1, COORD_EV_VACANT, COORD_R_LEASE, "E1", 3);
    expect_ev(&log, 2, COORD_EV_LEASE_END, COORD_R_EXPIRE, NULL, 1);
    assert_int_equal(coord_elect_leader(c, S("E1"), 100, NULL), 0);
    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.leaders, 0);
    assert_int_equal(st.deadlines, 0);
    /* a mixed lease end: keys, then locks, then leaderships */
    coord_lease_grant(c, 100, 200, 10);
    uint64_t tok;
    coord_elect_campaign(c, S("E"), S("v"), 0, 10, 200, 11, NULL);
    coord_lock_acquire(c, S("L"), 0, 10, 200, 12, &tok);
    coord_lease_attach(c, S("k"), 10);
    log.n = 0;
    assert_int_equal(coord_lease_revoke(c, 10), 1);
    assert_int_equal(log.n, 4);
    assert_int_equal(ev_at(&log, 0)->type, COORD_EV_KEY);
    assert_int_equal(ev_at(&log, 1)->type, COORD_EV_LOCK_FREE);
    assert_int_equal(ev_at(&log, 2)->type, COORD_EV_VACANT);
    assert_int_equal(ev_at(&log, 3)->type, COORD_EV_LEASE_END);
    coord_destroy(c);
}

/* ---- deadlines ------------------------------------------------------------------------- */

static void test_deadlines(void **state)
{
    (void)state;
    coord_t *c = new_coord(NULL);
    coord_due_t due;
    uint64_t tok;
    assert_int_equal(coord_next_deadline(c), 0);
    assert_int_equal(coord_due(c, UINT64_MAX, &due), 0);
    coord_lease_grant(c, 50, 100, 1);                               /* 150 */
    coord_lock_acquire(c, S("L"), 50, 0, 100, 2, &tok);             /* 150, tie: id 1 first */
    coord_elect_campaign(c, S("E"), S("v"), 30, 0, 100, 3, NULL);   /* 130 */
    coord_lock_acquire(c, S("M"), 0, 1, 100, 4, &tok);              /* lease-only: no deadline */
    assert_int_equal(coord_next_deadline(c), 130);
    assert_int_equal(coord_due(c, 129, &due), 0);
    assert_int_equal(coord_due(c, 130, &due), 1);
    assert_int_equal(due.kind, COORD_ELECT);
    assert_int_equal(due.id, 3);
    assert_int_equal(due.nlen, 1);
    assert_memory_equal(due.name, "E", 1);
    assert_int_equal(coord_elect_expire(c, due.name, due.nlen, due.id, 130), 1);
    assert_int_equal(coord_due(c, 200, &due), 1);
    assert_int_equal(due.kind, COORD_LEASE);
    assert_int_equal(due.id, 1);
    assert_null(due.name);
    assert_int_equal(due.deadline_ms, 150);
    assert_int_equal(coord_lease_expire(c, 1, 200), 1);   /* frees M too */
    assert_int_equal(coord_due(c, 200, &due), 1);
    assert_int_equal(due.kind, COORD_LOCK);
    assert_int_equal(due.id, 2);
    assert_int_equal(coord_lock_expire(c, due.name, due.nlen, due.id, 200), 1);
    assert_int_equal(coord_due(c, 200, &due), 0);
    assert_int_equal(coord_next_deadline(c), 0);

    /* many deadlines drain in (deadline, id) order */
    uint64_t rev = 10;
    for (int i = 0; i < 500; i++) {
        char name[16];
        int n = snprintf(name, sizeof name, "n%d", i);
        uint64_t ttl = 1 + (uint64_t)((i * 7919) % 97);
        if (i % 3 == 0)
            coord_lease_grant(c, ttl, 1000, rev++);
        else if (i % 3 == 1)
            assert_int_equal(coord_lock_acquire(c, name, (size_t)n, ttl, 0, 1000, rev++, &tok), COORD_OK);
        else
            assert_int_equal(coord_elect_campaign(c, name, (size_t)n, "v", 1, ttl, 0, 1000, rev++, NULL), COORD_OK);
    }
    uint64_t last_at = 0, last_id = 0;
    int drained = 0;
    while (coord_due(c, 5000, &due)) {
        assert_true(due.deadline_ms > last_at || (due.deadline_ms == last_at && due.id > last_id));
        last_at = due.deadline_ms;
        last_id = due.id;
        int r = due.kind == COORD_LEASE  ? coord_lease_expire(c, due.id, 5000)
                : due.kind == COORD_LOCK ? coord_lock_expire(c, due.name, due.nlen, due.id, 5000)
                                         : coord_elect_expire(c, due.name, due.nlen, due.id, 5000);
        assert_int_equal(r, 1);
        drained++;
    }
    assert_int_equal(drained, 500);
    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.deadlines, 0);
    assert_int_equal(st.locks + st.leases + st.leaders, 0);
    coord_destroy(c);
}

/* ---- snapshot ------------------------------------------------------------------------- */

/* Items serialised as text lines; a lease block's lines carry the lease id
 * and their index in the block, so sorting makes the comparison independent
 * of the tables' iteration order but not of the orders inside a lease. */
typedef struct {
    char lines[512][384];
    size_t n;
    uint64_t block_lease;
    size_t block_i;
} snaptext_t;

static void hexs(char *out, const char *p, size_t n)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[(unsigned char)p[i] >> 4];
        out[2 * i + 1] = hx[(unsigned char)p[i] & 15];
    }
    out[2 * n] = 0;
}

static void snap_text(void *arg, const coord_item_t *it)
{
    snaptext_t *s = arg;
    assert_true(s->n < 512);
    char name[64], value[64], ho[64];
    assert_true(it->nlen < 30 && it->vlen < 30 && it->hlen < 30);
    hexs(name, it->name, it->nlen);
    hexs(value, it->value, it->vlen);
    if (it->handover != NULL)
        hexs(ho, it->handover, it->hlen);
    else
        strcpy(ho, "-");
    if (it->kind == COORD_ITEM_LEASE) {
        s->block_lease = it->id;
        s->block_i = 0;
    } else if (it->lease == 0) {
        s->block_lease = 0;
        s->block_i = 0;
    } else {
        assert_int_equal(it->lease, s->block_lease);
        s->block_i++;
    }
    snprintf(s->lines[s->n++], sizeof s->lines[0], "%llu/%zu k%d id%llu ttl%llu dl%llu n%s v%s h%s",
             (unsigned long long)s->block_lease, s->block_i, it->kind, (unsigned long long)it->id,
             (unsigned long long)it->ttl_ms, (unsigned long long)it->deadline_ms, name, value, ho);
}

static int cmp_line(const void *a, const void *b) { return strcmp(a, b); }

static void snapshot_text(const coord_t *c, snaptext_t *s)
{
    memset(s, 0, sizeof *s);
    coord_snapshot(c, snap_text, s);
    qsort(s->lines, s->n, sizeof s->lines[0], cmp_line);
}

static void load_item(void *arg, const coord_item_t *it) { assert_int_equal(coord_load(arg, it), 0); }

static coord_t *clone_coord(const coord_t *c)
{
    coord_t *d = coord_create();
    coord_snapshot(c, load_item, d);
    return d;
}

static void assert_same_state(const coord_t *a, const coord_t *b)
{
    static snaptext_t sa, sb;
    snapshot_text(a, &sa);
    snapshot_text(b, &sb);
    assert_int_equal(sa.n, sb.n);
    for (size_t i = 0; i < sa.n; i++)
        assert_string_equal(sa.lines[i], sb.lines[i]);
    coord_stats_t x, y;
    coord_stats(a, &x);
    coord_stats(b, &y);
    assert_memory_equal(&x, &y, sizeof x);
    assert_int_equal(coord_next_deadline(a), coord_next_deadline(b));
    /* memory is a function of the state: a load gives what the history gave */
    assert_int_equal(coord_bytes(a), coord_bytes(b));
}

static void test_snapshot(void **state)
{
    (void)state;
    static evlog_t la, lb;
    coord_t *c = new_coord(&la);
    uint64_t tok;
    coord_lease_grant(c, 100, 0, 1);
    coord_lease_grant(c, 200, 0, 2);
    coord_lease_attach(c, S("z"), 1);
    coord_lease_attach(c, "a\0", 2, 1);
    coord_lease_attach(c, S("m"), 2);
    coord_lock_acquire(c, S("L2"), 0, 1, 0, 3, &tok);
    coord_lock_acquire(c, S("L1"), 50, 1, 0, 4, &tok);
    coord_lock_acquire(c, S("free"), 70, 0, 0, 5, &tok);
    coord_elect_campaign(c, S("E1"), S("v1"), 0, 1, 0, 6, NULL);
    coord_elect_campaign(c, S("E2"), S("v2"), 40, 0, 0, 7, NULL);
    coord_elect_campaign(c, S("E3"), "", 0, 30, 2, 0, 8, NULL);
    coord_elect_campaign(c, S("H"), S("x"), 40, 0, 0, 9, NULL);
    coord_elect_resign(c, S("H"), 9, "h\0o", 3, 0);
    coord_elect_campaign(c, S("H0"), S("x"), 40, 0, 0, 10, NULL);
    coord_elect_resign(c, S("H0"), 10, "", 0, 0);

    coord_t *d = clone_coord(c);
    coord_set_event_cb(d, record_ev, &lb);
    assert_same_state(c, d);

    /* the restored copy behaves the same: same events, same order */
    la.n = lb.n = 0;
    assert_int_equal(coord_lease_revoke(c, 1), 1);
    assert_int_equal(coord_lease_revoke(d, 1), 1);
    assert_int_equal(la.n, 6);  /* 2 keys, 2 locks, 1 leadership, the end */
    assert_int_equal(lb.n, la.n);
    assert_memory_equal(la.ev, lb.ev, la.n * sizeof la.ev[0]);
    coord_leader_t x, y;
    assert_int_equal(coord_elect_campaign(c, S("H"), S("n"), 10, 0, 0, 11, &x), COORD_OK);
    assert_int_equal(coord_elect_campaign(d, S("H"), S("n"), 10, 0, 0, 11, &y), COORD_OK);
    assert_int_equal(x.hlen, 3);
    assert_int_equal(y.hlen, 3);
    assert_memory_equal(x.handover, y.handover, 3);
    assert_int_equal(coord_elect_campaign(d, S("H0"), S("n"), 10, 0, 0, 12, &y), COORD_OK);
    assert_non_null(y.handover);
    assert_int_equal(y.hlen, 0);
    /* revisions used after a load are above the loaded ones */
    assert_int_equal(coord_lock_acquire(d, S("new"), 10, 0, 0, 13, &tok), COORD_OK);
    coord_destroy(c);
    coord_destroy(d);
}

static void test_load_errors(void **state)
{
    (void)state;
    coord_t *c = coord_create();
    coord_item_t it = {.kind = COORD_ITEM_LEASE, .id = 5, .ttl_ms = 10, .deadline_ms = 100};
    assert_int_equal(coord_load(c, &it), 0);
    assert_int_equal(coord_load(c, &it), -1);              /* duplicate id */
    it.id = 0;
    assert_int_equal(coord_load(c, &it), -1);              /* id 0 */
    it = (coord_item_t){.kind = COORD_ITEM_LEASE, .id = 6, .ttl_ms = 0, .deadline_ms = 100};
    assert_int_equal(coord_load(c, &it), -1);              /* no ttl */
    it = (coord_item_t){.kind = COORD_ITEM_KEY, .lease = 7, .name = "k", .nlen = 1};
    assert_int_equal(coord_load(c, &it), -1);              /* unknown lease */
    it.lease = 0;
    assert_int_equal(coord_load(c, &it), -1);              /* a key needs a lease */
    it.lease = 5;
    assert_int_equal(coord_load(c, &it), 0);
    assert_int_equal(coord_load(c, &it), -1);              /* attached twice */
    it = (coord_item_t){.kind = COORD_ITEM_LOCK, .id = 8, .name = "L", .nlen = 1};
    assert_int_equal(coord_load(c, &it), -1);              /* neither deadline nor lease */
    it.deadline_ms = 50;
    assert_int_equal(coord_load(c, &it), 0);
    assert_int_equal(coord_load(c, &it), -1);              /* duplicate name */
    it = (coord_item_t){.kind = COORD_ITEM_ELECT, .id = 0, .name = "E", .nlen = 1};
    assert_int_equal(coord_load(c, &it), -1);              /* vacant without a hand-over */
    it = (coord_item_t){.kind = COORD_ITEM_ELECT, .id = 9, .name = "E", .nlen = 1, .handover = "h", .hlen = 1,
                        .ttl_ms = 5, .deadline_ms = 5};
    assert_int_equal(coord_load(c, &it), -1);              /* led with a hand-over */
    it.handover = NULL;
    it.ttl_ms = 0;
    assert_int_equal(coord_load(c, &it), -1);              /* deadline without ttl */
    it.ttl_ms = 5;
    assert_int_equal(coord_load(c, &it), 0);
    it.kind = 42;
    it.name = "other";
    assert_int_equal(coord_load(c, &it), -1);
    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.leases, 1);
    assert_int_equal(st.attached_keys, 1);
    assert_int_equal(st.locks, 1);
    assert_int_equal(st.leaders, 1);
    assert_int_equal(st.deadlines, 3);
    coord_destroy(c);
}

/* ---- randomized run against a reference model ------------------------------------------ */

/*
 * The model is plain arrays scanned linearly: a lock or election is a
 * token/term and a deadline, a key remembers its lease and the sequence
 * number of its attachment, and every event the module should emit is
 * computed here and compared, field by field and in order, with what the
 * module emitted. Every few hundred steps the state goes through a snapshot
 * into a fresh instance, which the run then continues with.
 */
#define RN_LOCKS 4
#define RN_ELECTS 4
#define RN_KEYS 6
#define RN_LEASES 8192
#define RN_HIST 8

static const char *const rn_lock[RN_LOCKS] = {"a", "b\0c", "", "lock"};
static const size_t rn_lock_len[RN_LOCKS] = {1, 3, 0, 4};
static const char *const rn_elect[RN_ELECTS] = {"a", "e\0", "leader", "x"};
static const size_t rn_elect_len[RN_ELECTS] = {1, 2, 6, 1};
static const char *const rn_key[RN_KEYS] = {"k1", "k2", "\0", "key", "", "k\xff"};
static const size_t rn_key_len[RN_KEYS] = {2, 2, 1, 3, 0, 2};

typedef struct {
    uint64_t id, ttl, deadline;
    bool alive;
} mlease_t;

typedef struct {
    uint64_t token, deadline, lease;  /* token 0: free; deadline 0: none */
    uint64_t last_token;
    uint64_t hist[RN_HIST];
} mlock_t;

typedef struct {
    uint64_t term, ttl, deadline, lease;
    char value[SMAX];
    size_t vlen;
    bool has_ho;
    bool ho_lapsed;  /* the hand-over is a lapsed term's last value */
    char ho[SMAX];
    size_t hlen;
    uint64_t last_term;
    uint64_t hist[RN_HIST];
} melect_t;

typedef struct {
    mlease_t leases[RN_LEASES];
    size_t nleases;
    mlock_t locks[RN_LOCKS];
    melect_t el[RN_ELECTS];
    uint64_t key_lease[RN_KEYS], key_seq[RN_KEYS], seq;
    uint64_t now, rev;
    evlog_t expect;
    evlog_t got;
    uint64_t rng;
    size_t cov[16];  /* how often each interesting case happened */
} model_t;

enum {
    CV_LEASE_END_KEYS, CV_LEASE_END_LOCKS, CV_LEASE_END_ELECTS, CV_LEASE_EXPIRED, CV_ACQ_OK, CV_ACQ_BUSY,
    CV_ACQ_NOTFOUND, CV_STALE_DENIED, CV_LAPSED_DENIED, CV_RELEASED, CV_HANDOVER, CV_CAMPAIGN_OK,
    CV_CAMPAIGN_BUSY, CV_DUE, CV_NOOP_EXPIRE, CV_N
};
static const char *const cv_name[CV_N] = {
    "lease-end-keys", "lease-end-locks", "lease-end-elects", "lease-expired", "acquire-ok", "acquire-busy",
    "acquire-notfound", "stale-denied", "lapsed-denied", "released", "handover", "campaign-ok",
    "campaign-busy", "due", "noop-expire"};

static uint64_t rn(model_t *m, uint64_t n)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return n ? m->rng % n : 0;
}

static mlease_t *m_lease(model_t *m, uint64_t id)
{
    for (size_t i = 0; i < m->nleases; i++)
        if (m->leases[i].id == id && m->leases[i].alive)
            return &m->leases[i];
    return NULL;
}

static bool m_lease_live(model_t *m, uint64_t id)
{
    mlease_t *l = m_lease(m, id);
    return l != NULL && l->deadline > m->now;
}

static bool m_lapsed(model_t *m, uint64_t deadline, uint64_t lease)
{
    if (deadline != 0 && deadline <= m->now)
        return true;
    return lease != 0 && !m_lease_live(m, lease);
}

static uint64_t m_remaining(model_t *m, uint64_t deadline, uint64_t lease)
{
    uint64_t at = deadline ? deadline : UINT64_MAX;
    if (lease != 0 && m_lease(m, lease)->deadline < at)
        at = m_lease(m, lease)->deadline;
    return at > m->now ? at - m->now : 0;
}

static void m_ev(model_t *m, int type, int reason, const char *name, size_t nlen, uint64_t id, uint64_t lease,
                 const char *value, size_t vlen)
{
    ev_t *e = &m->expect.ev[m->expect.n++];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->reason = reason;
    if (nlen)
        memcpy(e->name, name, nlen);
    e->nlen = nlen;
    e->id = id;
    e->lease = lease;
    if (vlen)
        memcpy(e->value, value, vlen);
    e->vlen = vlen;
}

static void m_free_lock(model_t *m, int i, int reason)
{
    mlock_t *k = &m->locks[i];
    m_ev(m, COORD_EV_LOCK_FREE, reason, rn_lock[i], rn_lock_len[i], k->token, k->lease, NULL, 0);
    k->token = k->deadline = k->lease = 0;
}

static void m_vacate(model_t *m, int i, int reason)
{
    melect_t *e = &m->el[i];
    m_ev(m, COORD_EV_VACANT, reason, rn_elect[i], rn_elect_len[i], e->term, e->lease, NULL, 0);
    if (reason != COORD_R_RELEASE) { /* not resigned: the last value stays, not handed over */
        e->has_ho = e->ho_lapsed = true;
        memcpy(e->ho, e->value, e->vlen);
        e->hlen = e->vlen;
    }
    e->term = e->ttl = e->deadline = e->lease = 0;
    e->vlen = 0;
}

static void m_lease_end(model_t *m, mlease_t *l, int reason)
{
    for (int k = 0; k < RN_KEYS; k++)
        if (m->key_lease[k] == l->id) {
            m->cov[CV_LEASE_END_KEYS]++;
            break;
        }
    for (int i = 0; i < RN_LOCKS; i++)
        if (m->locks[i].token && m->locks[i].lease == l->id) {
            m->cov[CV_LEASE_END_LOCKS]++;
            break;
        }
    for (int i = 0; i < RN_ELECTS; i++)
        if (m->el[i].term && m->el[i].lease == l->id) {
            m->cov[CV_LEASE_END_ELECTS]++;
            break;
        }
    if (reason == COORD_R_EXPIRE)
        m->cov[CV_LEASE_EXPIRED]++;
    /* keys in attach order */
    for (;;) {
        int best = -1;
        for (int k = 0; k < RN_KEYS; k++)
            if (m->key_lease[k] == l->id && (best < 0 || m->key_seq[k] < m->key_seq[best]))
                best = k;
        if (best < 0)
            break;
        m_ev(m, COORD_EV_KEY, COORD_R_LEASE, rn_key[best], rn_key_len[best], 0, l->id, NULL, 0);
        m->key_lease[best] = 0;
    }
    for (;;) {
        int best = -1;
        for (int i = 0; i < RN_LOCKS; i++)
            if (m->locks[i].token && m->locks[i].lease == l->id &&
                (best < 0 || m->locks[i].token < m->locks[best].token))
                best = i;
        if (best < 0)
            break;
        m_free_lock(m, best, COORD_R_LEASE);
    }
    for (;;) {
        int best = -1;
        for (int i = 0; i < RN_ELECTS; i++)
            if (m->el[i].term && m->el[i].lease == l->id && (best < 0 || m->el[i].term < m->el[best].term))
                best = i;
        if (best < 0)
            break;
        m_vacate(m, best, COORD_R_LEASE);
    }
    m_ev(m, COORD_EV_LEASE_END, reason, NULL, 0, l->id, 0, NULL, 0);
    l->alive = false;
}

/* A lease id to use: mostly one of the recent leases, sometimes an old or
 * a made-up one. */
static uint64_t pick_lease(model_t *m)
{
    uint64_t r = rn(m, 10);
    if (m->nleases == 0 || r == 0)
        return 1 + rn(m, m->rev + 2);
    if (r == 1)
        return m->leases[rn(m, m->nleases)].id;
    size_t back = (size_t)rn(m, m->nleases < 6 ? m->nleases : 6);
    return m->leases[m->nleases - 1 - back].id;
}

static uint64_t pick_token(model_t *m, uint64_t cur, const uint64_t *hist)
{
    uint64_t r = rn(m, 6);
    if (r <= 2)
        return cur;
    if (r <= 4)
        return hist[rn(m, RN_HIST)];
    return rn(m, m->rev + 2);
}

static void push_hist(uint64_t *hist, uint64_t v)
{
    memmove(hist + 1, hist, (RN_HIST - 1) * sizeof *hist);
    hist[0] = v;
}

static uint64_t pick_ttl(model_t *m) { return 5 + rn(m, 56); }

static void rand_value(model_t *m, char *buf, size_t *len)
{
    *len = (size_t)rn(m, 6);
    for (size_t i = 0; i < *len; i++)
        buf[i] = (char)rn(m, 256);
}

/* The earliest (deadline, id) in the model, 0 if none is due at now. */
static int m_due(model_t *m, int *kind, uint64_t *id, int *idx, uint64_t *at)
{
    *at = UINT64_MAX;
    *id = UINT64_MAX;
    int found = 0;
#define CONSIDER(d, i_, k_, x_)                                         \
    do {                                                                \
        if ((d) != 0 && ((d) < *at || ((d) == *at && (i_) < *id))) {    \
            *at = (d);                                                  \
            *id = (i_);                                                 \
            *kind = (k_);                                               \
            *idx = (x_);                                                \
            found = 1;                                                  \
        }                                                               \
    } while (0)
    for (size_t i = 0; i < m->nleases; i++)
        if (m->leases[i].alive)
            CONSIDER(m->leases[i].deadline, m->leases[i].id, COORD_LEASE, (int)i);
    for (int i = 0; i < RN_LOCKS; i++)
        if (m->locks[i].token)
            CONSIDER(m->locks[i].deadline, m->locks[i].token, COORD_LOCK, i);
    for (int i = 0; i < RN_ELECTS; i++)
        if (m->el[i].term)
            CONSIDER(m->el[i].deadline, m->el[i].term, COORD_ELECT, i);
#undef CONSIDER
    return found;
}

static void compare_state(model_t *m, const coord_t *c)
{
    for (int i = 0; i < RN_LOCKS; i++) {
        coord_lock_info_t li;
        mlock_t *k = &m->locks[i];
        int held = coord_lock_info(c, rn_lock[i], rn_lock_len[i], m->now, &li);
        assert_int_equal(held, k->token != 0);
        if (held) {
            assert_int_equal(li.token, k->token);
            assert_int_equal(li.deadline_ms, k->deadline);
            assert_int_equal(li.lease, k->lease);
            assert_int_equal(li.remaining_ms, m_remaining(m, k->deadline, k->lease));
        }
        assert_int_equal(coord_lock_check(c, rn_lock[i], rn_lock_len[i], k->token, m->now),
                         k->token != 0 && !m_lapsed(m, k->deadline, k->lease));
    }
    for (int i = 0; i < RN_ELECTS; i++) {
        coord_leader_t ld;
        melect_t *e = &m->el[i];
        int led = coord_elect_leader(c, rn_elect[i], rn_elect_len[i], m->now, &ld);
        assert_int_equal(led, e->term != 0);
        if (led) {
            assert_int_equal(ld.term, e->term);
            assert_int_equal(ld.vlen, e->vlen);
            if (e->vlen)
                assert_memory_equal(ld.value, e->value, e->vlen);
            assert_int_equal(ld.lease, e->lease);
            assert_int_equal(ld.remaining_ms, m_remaining(m, e->deadline, e->lease));
        }
    }
    size_t nkeys = 0;
    for (int k = 0; k < RN_KEYS; k++) {
        assert_int_equal(coord_lease_of(c, rn_key[k], rn_key_len[k]), m->key_lease[k]);
        nkeys += m->key_lease[k] != 0;
    }
    size_t nl = 0, nd = 0, nleaders = 0, nho = 0, nlocks = 0;
    for (size_t i = 0; i < m->nleases; i++)
        if (m->leases[i].alive) {
            nl++;
            nd++;
        }
    for (int i = 0; i < RN_LOCKS; i++) {
        nlocks += m->locks[i].token != 0;
        nd += m->locks[i].deadline != 0;
    }
    for (int i = 0; i < RN_ELECTS; i++) {
        nleaders += m->el[i].term != 0;
        nho += m->el[i].has_ho;
        nd += m->el[i].deadline != 0;
    }
    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.leases, nl);
    assert_int_equal(st.attached_keys, nkeys);
    assert_int_equal(st.locks, nlocks);
    assert_int_equal(st.leaders, nleaders);
    assert_int_equal(st.handovers, nho);
    assert_int_equal(st.deadlines, nd);
    /* a few leases */
    for (int j = 0; j < 3 && m->nleases; j++) {
        mlease_t *l = &m->leases[m->nleases - 1 - rn(m, m->nleases < 8 ? m->nleases : 8)];
        uint64_t rem;
        size_t n;
        assert_int_equal(coord_lease_ttl(c, l->id, m->now, &rem, &n), l->alive);
        if (l->alive) {
            assert_int_equal(rem, l->deadline > m->now ? l->deadline - m->now : 0);
            size_t want = 0;
            for (int k = 0; k < RN_KEYS; k++)
                want += m->key_lease[k] == l->id;
            assert_int_equal(n, want);
        }
        assert_int_equal(coord_lease_live(c, l->id, m->now), m_lease_live(m, l->id));
    }
}

static void compare_events(model_t *m)
{
    assert_int_equal(m->got.n, m->expect.n);
    for (size_t i = 0; i < m->got.n; i++)
        assert_memory_equal(&m->got.ev[i], &m->expect.ev[i], sizeof(ev_t));
    m->got.n = m->expect.n = 0;
}

/* One step of the writer: everything due at now, each by its expire record. */
static void writer_drain(model_t *m, coord_t *c)
{
    coord_due_t due;
    while (coord_due(c, m->now, &due)) {
        int kind = 0, idx = 0;
        uint64_t id, at;
        assert_true(m_due(m, &kind, &id, &idx, &at));
        assert_true(at <= m->now);
        assert_int_equal(due.kind, kind);
        assert_int_equal(due.id, id);
        assert_int_equal(due.deadline_ms, at);
        int r;
        if (kind == COORD_LEASE) {
            r = coord_lease_expire(c, due.id, m->now);
            m_lease_end(m, &m->leases[idx], COORD_R_EXPIRE);
        } else if (kind == COORD_LOCK) {
            assert_int_equal(due.nlen, rn_lock_len[idx]);
            r = coord_lock_expire(c, due.name, due.nlen, due.id, m->now);
            m_free_lock(m, idx, COORD_R_EXPIRE);
        } else {
            assert_int_equal(due.nlen, rn_elect_len[idx]);
            r = coord_elect_expire(c, due.name, due.nlen, due.id, m->now);
            m_vacate(m, idx, COORD_R_EXPIRE);
        }
        assert_int_equal(r, 1);
        m->cov[CV_DUE]++;
        compare_events(m);
    }
    int kind, idx;
    uint64_t id, at;
    if (m_due(m, &kind, &id, &idx, &at))
        assert_true(at > m->now);
}

static void random_step(model_t *m, coord_t *c)
{
    uint64_t op = rn(m, 20);
    uint64_t rem = 0, tok = 0;
    int i = (int)rn(m, RN_LOCKS), e = (int)rn(m, RN_ELECTS), k = (int)rn(m, RN_KEYS);
    mlock_t *lk = &m->locks[i];
    melect_t *el = &m->el[e];
    switch (op) {
    case 0: { /* grant */
        uint64_t ttl = pick_ttl(m);
        assert_int_equal(coord_lease_grant(c, ttl, m->now, m->rev + 1), m->rev + 1);
        m->rev++;
        assert_true(m->nleases < RN_LEASES);
        m->leases[m->nleases++] = (mlease_t){.id = m->rev, .ttl = ttl, .deadline = m->now + ttl, .alive = true};
        break;
    }
    case 1: { /* lease keepalive */
        uint64_t id = pick_lease(m);
        int r = coord_lease_keepalive(c, id, m->now, &rem);
        if (m_lease_live(m, id)) {
            assert_int_equal(r, COORD_OK);
            mlease_t *l = m_lease(m, id);
            assert_int_equal(rem, l->ttl);
            l->deadline = m->now + l->ttl;
        } else {
            assert_int_equal(r, COORD_NOTFOUND);
        }
        break;
    }
    case 2: { /* revoke */
        if (rn(m, 3))
            break;  /* rarer than the rest */
        uint64_t id = pick_lease(m);
        mlease_t *l = m_lease(m, id);
        assert_int_equal(coord_lease_revoke(c, id), l != NULL);
        if (l != NULL)
            m_lease_end(m, l, COORD_R_RELEASE);
        break;
    }
    case 3: { /* a stray lease expire record */
        uint64_t id = pick_lease(m);
        mlease_t *l = m_lease(m, id);
        bool ends = l != NULL && l->deadline <= m->now;
        assert_int_equal(coord_lease_expire(c, id, m->now), ends);
        if (ends)
            m_lease_end(m, l, COORD_R_EXPIRE);
        break;
    }
    case 4: { /* attach, as the core does: only to a live lease */
        uint64_t id = pick_lease(m);
        if (!coord_lease_live(c, id, m->now)) {
            assert_false(m_lease_live(m, id));
            break;
        }
        assert_int_equal(coord_lease_attach(c, rn_key[k], rn_key_len[k], id), COORD_OK);
        if (m->key_lease[k] != id) {
            m->key_lease[k] = id;
            m->key_seq[k] = ++m->seq;
        }
        break;
    }
    case 5: /* detach */
        assert_int_equal(coord_lease_detach(c, rn_key[k], rn_key_len[k]), m->key_lease[k] != 0);
        m->key_lease[k] = 0;
        break;
    case 6:
    case 7: { /* acquire */
        uint64_t ttl = rn(m, 3) ? pick_ttl(m) : 0;
        uint64_t lease = (ttl == 0 || rn(m, 3) == 0) ? pick_lease(m) : 0;
        int r = coord_lock_acquire(c, rn_lock[i], rn_lock_len[i], ttl, lease, m->now, m->rev + 1, &tok);
        if (lease != 0 && !m_lease_live(m, lease)) {
            assert_int_equal(r, COORD_NOTFOUND);
            m->cov[CV_ACQ_NOTFOUND]++;
        } else if (lk->token != 0) {
            assert_int_equal(r, COORD_BUSY);
            m->cov[CV_ACQ_BUSY]++;
            assert_int_equal(tok, lk->token);
        } else {
            assert_int_equal(r, COORD_OK);
            assert_int_equal(tok, m->rev + 1);
            assert_true(tok > lk->last_token);   /* tokens of a lock strictly increase */
            m->cov[CV_ACQ_OK]++;
            m->rev++;
            lk->token = lk->last_token = tok;
            lk->deadline = ttl ? m->now + ttl : 0;
            lk->lease = lease;
            push_hist(lk->hist, tok);
        }
        break;
    }
    case 8: { /* release */
        uint64_t t = pick_token(m, lk->token, lk->hist);
        bool holds = lk->token != 0 && t == lk->token && !m_lapsed(m, lk->deadline, lk->lease);
        int r = coord_lock_release(c, rn_lock[i], rn_lock_len[i], t, m->now);
        assert_int_equal(r, holds);
        if (t != lk->token) {
            assert_int_equal(r, 0);  /* a stale token never releases */
            m->cov[CV_STALE_DENIED]++;
        } else if (lk->token != 0 && !holds) {
            m->cov[CV_LAPSED_DENIED]++;
        }
        if (holds) {
            m_free_lock(m, i, COORD_R_RELEASE);
            m->cov[CV_RELEASED]++;
        }
        break;
    }
    case 9: { /* extend */
        uint64_t t = pick_token(m, lk->token, lk->hist), ttl = pick_ttl(m);
        bool holds = lk->token != 0 && t == lk->token && !m_lapsed(m, lk->deadline, lk->lease);
        int r = coord_lock_extend(c, rn_lock[i], rn_lock_len[i], t, ttl, m->now);
        assert_int_equal(r, holds);
        if (holds)
            lk->deadline = m->now + ttl;
        break;
    }
    case 10: { /* check / fence */
        uint64_t t = pick_token(m, lk->token, lk->hist);
        bool holds = lk->token != 0 && t == lk->token && !m_lapsed(m, lk->deadline, lk->lease);
        assert_int_equal(coord_fence_ok(c, rn_lock[i], rn_lock_len[i], t, m->now), holds);
        break;
    }
    case 11: { /* a stray lock expire record */
        uint64_t t = pick_token(m, lk->token, lk->hist);
        bool ends = lk->token != 0 && t == lk->token && lk->deadline != 0 && lk->deadline <= m->now;
        assert_int_equal(coord_lock_expire(c, rn_lock[i], rn_lock_len[i], t, m->now), ends);
        if (!ends && t == lk->token && lk->token != 0)
            m->cov[CV_NOOP_EXPIRE]++;
        if (ends)
            m_free_lock(m, i, COORD_R_EXPIRE);
        break;
    }
    case 12:
    case 13: { /* campaign */
        uint64_t ttl = rn(m, 3) ? pick_ttl(m) : 0;
        uint64_t lease = (ttl == 0 || rn(m, 4) == 0) ? pick_lease(m) : 0;
        char v[SMAX];
        size_t vlen;
        rand_value(m, v, &vlen);
        coord_leader_t ld;
        int r = coord_elect_campaign(c, rn_elect[e], rn_elect_len[e], v, vlen, ttl, lease, m->now, m->rev + 1, &ld);
        if (lease != 0 && !m_lease_live(m, lease)) {
            assert_int_equal(r, COORD_NOTFOUND);
        } else if (el->term != 0) {
            assert_int_equal(r, COORD_BUSY);
            assert_int_equal(ld.term, el->term);
            m->cov[CV_CAMPAIGN_BUSY]++;
        } else {
            assert_int_equal(r, COORD_OK);
            assert_int_equal(ld.term, m->rev + 1);
            assert_true(ld.term > el->last_term);   /* terms increase, never overlap */
            /* the hand-over reaches exactly this leader */
            m->cov[CV_CAMPAIGN_OK]++;
            if (el->has_ho) {
                m->cov[CV_HANDOVER]++;
                assert_non_null(ld.handover);
                assert_int_equal(ld.hlen, el->hlen);
                assert_int_equal(ld.handover_lapsed, el->ho_lapsed);
                if (el->hlen)
                    assert_memory_equal(ld.handover, el->ho, el->hlen);
            } else {
                assert_null(ld.handover);
            }
            m->rev++;
            el->has_ho = false;
            el->term = el->last_term = ld.term;
            el->ttl = ttl;
            el->deadline = ttl ? m->now + ttl : 0;
            el->lease = lease;
            memcpy(el->value, v, vlen);
            el->vlen = vlen;
            push_hist(el->hist, ld.term);
            m_ev(m, COORD_EV_LEADER, COORD_R_CAMPAIGN, rn_elect[e], rn_elect_len[e], el->term, lease, v, vlen);
        }
        break;
    }
    case 14: { /* proclaim */
        uint64_t t = pick_token(m, el->term, el->hist);
        bool holds = el->term != 0 && t == el->term && !m_lapsed(m, el->deadline, el->lease);
        char v[SMAX];
        size_t vlen;
        rand_value(m, v, &vlen);
        assert_int_equal(coord_elect_proclaim(c, rn_elect[e], rn_elect_len[e], t, v, vlen, m->now), holds);
        if (holds) {
            memcpy(el->value, v, vlen);
            el->vlen = vlen;
            m_ev(m, COORD_EV_LEADER, COORD_R_PROCLAIM, rn_elect[e], rn_elect_len[e], t, el->lease, v, vlen);
        }
        break;
    }
    case 15: { /* resign */
        uint64_t t = pick_token(m, el->term, el->hist);
        bool holds = el->term != 0 && t == el->term && !m_lapsed(m, el->deadline, el->lease);
        char h[SMAX];
        size_t hlen;
        rand_value(m, h, &hlen);
        bool give = rn(m, 2);
        assert_int_equal(coord_elect_resign(c, rn_elect[e], rn_elect_len[e], t, give ? h : NULL, hlen, m->now),
                         holds);
        if (holds) {
            m_vacate(m, e, COORD_R_RELEASE);
            el->has_ho = give;
            el->ho_lapsed = false;
            memcpy(el->ho, h, hlen);
            el->hlen = give ? hlen : 0;
        }
        break;
    }
    case 16: { /* elect keepalive and check */
        uint64_t t = pick_token(m, el->term, el->hist);
        bool holds = el->term != 0 && t == el->term && !m_lapsed(m, el->deadline, el->lease);
        assert_int_equal(coord_elect_check(c, rn_elect[e], rn_elect_len[e], t, m->now), holds);
        int r = coord_elect_keepalive(c, rn_elect[e], rn_elect_len[e], t, m->now, &rem);
        assert_int_equal(r, holds ? COORD_OK : COORD_NOTHOLDER);
        if (holds) {
            if (el->ttl)
                el->deadline = m->now + el->ttl;
            assert_int_equal(rem, m_remaining(m, el->deadline, el->lease));
        }
        break;
    }
    case 17: { /* a stray elect expire record */
        uint64_t t = pick_token(m, el->term, el->hist);
        bool ends = el->term != 0 && t == el->term && el->deadline != 0 && el->deadline <= m->now;
        assert_int_equal(coord_elect_expire(c, rn_elect[e], rn_elect_len[e], t, m->now), ends);
        if (ends)
            m_vacate(m, e, COORD_R_EXPIRE);
        break;
    }
    default: /* the writer's turn: sometimes late, so lapsed states are exercised */
        writer_drain(m, c);
        break;
    }
    compare_events(m);
}

static void test_randomized(void **state)
{
    (void)state;
    static model_t m;
    memset(&m, 0, sizeof m);
    m.rng = 0x9e3779b97f4a7c15ull;
    m.now = 1000;
    coord_t *c = coord_create();
    coord_set_event_cb(c, record_ev, &m.got);
    for (int step = 0; step < 20000; step++) {
        m.now += rn(&m, 6);
        random_step(&m, c);
        compare_state(&m, c);
        if (step % 500 == 499) {
            coord_t *d = clone_coord(c);
            assert_same_state(c, d);
            coord_destroy(c);
            c = d;
            coord_set_event_cb(c, record_ev, &m.got);
            compare_state(&m, c);
        }
    }
    for (int i = 0; i < CV_N; i++) {
        printf("  %s=%zu", cv_name[i], m.cov[i]);
        assert_true(m.cov[i] >= 10);  /* the run really exercised each case */
    }
    printf("\n  steps=20000 leases=%zu revisions=%llu now=%llu\n", m.nleases, (unsigned long long)m.rev, (unsigned long long)m.now);
    /* everything ends: time runs out for all of it */
    m.now += 1000000;
    writer_drain(&m, c);
    coord_stats_t st;
    coord_stats(c, &st);
    assert_int_equal(st.leases + st.locks + st.leaders + st.attached_keys + st.deadlines, 0);
    /* only hand-over values may be left, and all the memory is theirs */
    assert_true(st.handovers == 0 ? coord_bytes(c) == 0 : coord_bytes(c) > 0);
    coord_destroy(c);
}

/* coord_bytes(): every item and value is counted when made and uncounted
 * when it goes, by whatever ends it. */
static void test_memory(void **state)
{
    (void)state;
    coord_t *c = coord_create(); /* no event log: values are larger than it keeps */
    assert_non_null(c);
    assert_int_equal(coord_bytes(c), 0);
    coord_lease_grant(c, 1000, 1000, 5);
    size_t lease = coord_bytes(c);
    assert_true(lease > 0);
    assert_int_equal(coord_lease_attach(c, "key", 3, 5), COORD_OK);
    size_t att = coord_bytes(c);
    assert_true(att > lease);
    uint64_t tok = 0;
    assert_int_equal(coord_lock_acquire(c, "L", 1, 0, 5, 1000, 6, &tok), COORD_OK);
    size_t lk = coord_bytes(c);
    assert_true(lk > att);
    static char big[4096];
    memset(big, 'v', sizeof big);
    assert_int_equal(coord_elect_campaign(c, "E", 1, big, 100, 500, 0, 1000, 7, NULL), COORD_OK);
    size_t led = coord_bytes(c);
    assert_true(led >= lk + 100);
    assert_int_equal(coord_elect_proclaim(c, "E", 1, 7, big, 4000, 1000), 1);
    assert_true(coord_bytes(c) >= led + 3900);
    assert_int_equal(coord_elect_proclaim(c, "E", 1, 7, big, 100, 1000), 1);
    assert_int_equal(coord_bytes(c), led);
    /* a resign keeps the election for its hand-over; the next campaign takes it */
    assert_int_equal(coord_elect_resign(c, "E", 1, 7, big, 2000, 1000), 1);
    size_t handed = coord_bytes(c);
    assert_true(handed >= lk + 2000);
    assert_int_equal(coord_elect_campaign(c, "E", 1, "", 0, 500, 0, 1000, 8, NULL), COORD_OK);
    assert_true(coord_bytes(c) > lk && coord_bytes(c) < handed);
    assert_int_equal(coord_elect_expire(c, "E", 1, 8, 1500), 1);
    assert_true(coord_bytes(c) > lk); /* kept: the lapsed term's (empty) last value */
    assert_int_equal(coord_elect_campaign(c, "E", 1, "", 0, 500, 0, 1500, 9, NULL), COORD_OK);
    assert_int_equal(coord_elect_resign(c, "E", 1, 9, NULL, 0, 1500), 1);
    assert_int_equal(coord_bytes(c), lk);
    /* the lease ends with its key and lock */
    assert_int_equal(coord_lease_revoke(c, 5), 1);
    assert_int_equal(coord_bytes(c), 0);
    coord_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_lease_basic),
        cmocka_unit_test(test_lease_attach),
        cmocka_unit_test(test_callback_reads),
        cmocka_unit_test(test_lock_basic),
        cmocka_unit_test(test_lock_lease),
        cmocka_unit_test(test_elect_basic),
        cmocka_unit_test(test_elect_lease),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_randomized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
