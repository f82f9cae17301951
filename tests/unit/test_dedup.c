/*
 * test_dedup.c -- the dedup automaton. The core is driven with explicit
 * times: every transition, the safety timeout, stale finishes, withdrawal,
 * memory returning to zero keys, and a randomized run against a reference
 * model. The blocking wrapper: hand-over to a waiter, decline, takeover
 * after the safety timeout, and a threaded stress run with an atomic
 * checker that no two threads ever hold a key at once.
 *
 * No sleeps order threads: a test that needs a thread parked as waiter
 * polls the key's state until it reads Block.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>

#include "ordo/dedup.h"
#include "lib/sync.h"

#define T_MS 100 /* safety timeout of the core tests */

static ordo_dedup_core_t *make_core(void)
{
    ordo_dedup_core_t *c = NULL;
    assert_int_equal(ordo_dedup_core_create(T_MS, &c), ORDO_OK);
    return c;
}

static ordo_dedup_arrival_t arrive(ordo_dedup_core_t *c, const char *key, int64_t now_ms,
                                   void *udata, int expect)
{
    ordo_dedup_arrival_t a = {0, 0};
    assert_int_equal(ordo_dedup_core_arrive(c, key, strlen(key), now_ms, udata, &a), expect);
    return a;
}

static void expect_state(ordo_dedup_core_t *c, const char *key, ordo_dedup_state_t s)
{
    assert_int_equal(ordo_dedup_core_state(c, key, strlen(key)), s);
}

static int finish(ordo_dedup_core_t *c, const char *key, ordo_dedup_ticket_t t, int64_t now_ms,
                  ordo_dedup_promotion_t *p)
{
    return ordo_dedup_core_finish(c, key, strlen(key), t, now_ms, p);
}

/* ---- core -------------------------------------------------------------------- */

static void test_core_transitions(void **state)
{
    (void)state;
    ordo_dedup_core_t *c = make_core();
    int ua, ub, ud;
    expect_state(c, "k", ORDO_DEDUP_INIT);
    ordo_dedup_arrival_t a = arrive(c, "k", 0, &ua, ORDO_DEDUP_HOLDER);
    assert_true(a.ticket != 0);
    expect_state(c, "k", ORDO_DEDUP_PROCESS);
    ordo_dedup_arrival_t b = arrive(c, "k", 5, &ub, ORDO_DEDUP_WAITER);
    assert_true(b.ticket != a.ticket);
    assert_int_equal(b.deadline_ms, 5 + T_MS);
    expect_state(c, "k", ORDO_DEDUP_BLOCK);
    /* A third arrival is declined and changes nothing. */
    arrive(c, "k", 6, NULL, ORDO_EDECLINED);
    arrive(c, "k", 7, NULL, ORDO_EDECLINED);
    expect_state(c, "k", ORDO_DEDUP_BLOCK);
    assert_int_equal(ordo_dedup_core_active(c), 1);
    /* Other keys are independent. */
    ordo_dedup_arrival_t o = arrive(c, "other", 7, NULL, ORDO_DEDUP_HOLDER);
    assert_int_equal(ordo_dedup_core_active(c), 2);
    /* A ticket that is neither holder nor waiter changes nothing. */
    ordo_dedup_promotion_t p;
    assert_int_equal(finish(c, "k", o.ticket, 8, &p), ORDO_DEDUP_STALE);
    assert_int_equal(finish(c, "k", 0, 8, &p), ORDO_DEDUP_STALE);
    expect_state(c, "k", ORDO_DEDUP_BLOCK);
    /* The holder finishes: the waiter is promoted. */
    assert_int_equal(finish(c, "k", a.ticket, 10, &p), ORDO_DEDUP_PROMOTED);
    assert_int_equal(p.ticket, b.ticket);
    assert_ptr_equal(p.udata, &ub);
    expect_state(c, "k", ORDO_DEDUP_PROCESS);
    assert_int_equal(ordo_dedup_core_expire(c, 1000, NULL, NULL), 0); /* nobody waits */
    /* The old holder finishing again is stale. */
    assert_int_equal(finish(c, "k", a.ticket, 11, &p), ORDO_DEDUP_STALE);
    assert_int_equal(p.ticket, 0);
    ordo_dedup_arrival_t d = arrive(c, "k", 12, &ud, ORDO_DEDUP_WAITER);
    assert_int_equal(finish(c, "k", b.ticket, 13, &p), ORDO_DEDUP_PROMOTED);
    assert_int_equal(p.ticket, d.ticket);
    assert_int_equal(finish(c, "k", d.ticket, 14, NULL), ORDO_DEDUP_IDLE);
    expect_state(c, "k", ORDO_DEDUP_INIT);
    /* Finishing a key in Init is stale too. */
    assert_int_equal(finish(c, "k", d.ticket, 15, &p), ORDO_DEDUP_STALE);
    assert_int_equal(finish(c, "other", o.ticket, 15, &p), ORDO_DEDUP_IDLE);
    assert_int_equal(ordo_dedup_core_active(c), 0);
    ordo_dedup_core_destroy(c);
}

typedef struct {
    int calls;
    ordo_dedup_promotion_t promoted;
    ordo_dedup_ticket_t stale;
    char key[16];
} expired_t;

static void on_expired(const void *key, size_t key_len, ordo_dedup_promotion_t promoted,
                       ordo_dedup_ticket_t stale, void *arg)
{
    expired_t *e = arg;
    assert_true(key_len < sizeof e->key);
    memcpy(e->key, key, key_len);
    e->key[key_len] = 0;
    e->calls++;
    e->promoted = promoted;
    e->stale = stale;
}

static void test_core_safety_timeout(void **state)
{
    (void)state;
    ordo_dedup_core_t *c = make_core();
    int ub;
    int64_t deadline;
    assert_int_equal(ordo_dedup_core_next_deadline(c, &deadline), ORDO_ENOTFOUND);
    ordo_dedup_arrival_t a = arrive(c, "k", 0, NULL, ORDO_DEDUP_HOLDER);
    ordo_dedup_arrival_t b = arrive(c, "k", 10, &ub, ORDO_DEDUP_WAITER);
    assert_int_equal(ordo_dedup_core_next_deadline(c, &deadline), ORDO_OK);
    assert_int_equal(deadline, 10 + T_MS);
    expired_t e = {0};
    assert_int_equal(ordo_dedup_core_expire(c, 10 + T_MS - 1, on_expired, &e), 0);
    assert_int_equal(e.calls, 0);
    expect_state(c, "k", ORDO_DEDUP_BLOCK);
    /* At the deadline the waiter takes over; the holder is stale. */
    assert_int_equal(ordo_dedup_core_expire(c, 10 + T_MS, on_expired, &e), 1);
    assert_int_equal(e.calls, 1);
    assert_string_equal(e.key, "k");
    assert_int_equal(e.promoted.ticket, b.ticket);
    assert_ptr_equal(e.promoted.udata, &ub);
    assert_int_equal(e.stale, a.ticket);
    expect_state(c, "k", ORDO_DEDUP_PROCESS);
    assert_int_equal(ordo_dedup_core_next_deadline(c, &deadline), ORDO_ENOTFOUND);
    /* The stale holder's late finish changes nothing and says so. */
    assert_int_equal(finish(c, "k", a.ticket, 200, NULL), ORDO_DEDUP_STALE);
    expect_state(c, "k", ORDO_DEDUP_PROCESS);
    /* The new holder works as any other. */
    ordo_dedup_arrival_t d = arrive(c, "k", 210, NULL, ORDO_DEDUP_WAITER);
    assert_int_equal(d.deadline_ms, 210 + T_MS);
    ordo_dedup_promotion_t p;
    assert_int_equal(finish(c, "k", b.ticket, 220, &p), ORDO_DEDUP_PROMOTED);
    assert_int_equal(p.ticket, d.ticket);
    assert_int_equal(ordo_dedup_core_expire(c, 10000, on_expired, &e), 0); /* promoted already */
    assert_int_equal(finish(c, "k", d.ticket, 230, &p), ORDO_DEDUP_IDLE);
    assert_int_equal(ordo_dedup_core_active(c), 0);
    ordo_dedup_core_destroy(c);
}

static void test_core_deadline_order(void **state)
{
    (void)state;
    ordo_dedup_core_t *c = make_core();
    arrive(c, "a", 0, NULL, ORDO_DEDUP_HOLDER);
    arrive(c, "b", 0, NULL, ORDO_DEDUP_HOLDER);
    arrive(c, "c", 0, NULL, ORDO_DEDUP_HOLDER);
    arrive(c, "a", 10, NULL, ORDO_DEDUP_WAITER);
    arrive(c, "b", 20, NULL, ORDO_DEDUP_WAITER);
    /* Time going backwards is clamped to the latest time seen. */
    ordo_dedup_arrival_t cw = arrive(c, "c", 15, NULL, ORDO_DEDUP_WAITER);
    assert_int_equal(cw.deadline_ms, 20 + T_MS);
    int64_t deadline;
    assert_int_equal(ordo_dedup_core_next_deadline(c, &deadline), ORDO_OK);
    assert_int_equal(deadline, 10 + T_MS);
    expired_t e = {0};
    assert_int_equal(ordo_dedup_core_expire(c, 10 + T_MS, on_expired, &e), 1);
    assert_string_equal(e.key, "a");
    assert_int_equal(ordo_dedup_core_next_deadline(c, &deadline), ORDO_OK);
    assert_int_equal(deadline, 20 + T_MS);
    assert_int_equal(ordo_dedup_core_expire(c, 20 + T_MS, on_expired, &e), 2);
    assert_int_equal(e.calls, 3);
    assert_string_equal(e.key, "c"); /* b then c: arrival order */
    /* An expire with an old time does not move time back either. */
    assert_int_equal(ordo_dedup_core_expire(c, 0, on_expired, &e), 0);
    ordo_dedup_core_destroy(c); /* frees the keys still held */
}

static void test_core_withdraw(void **state)
{
    (void)state;
    ordo_dedup_core_t *c = make_core();
    ordo_dedup_arrival_t a = arrive(c, "k", 0, NULL, ORDO_DEDUP_HOLDER);
    ordo_dedup_arrival_t b = arrive(c, "k", 1, NULL, ORDO_DEDUP_WAITER);
    assert_int_equal(finish(c, "k", b.ticket, 2, NULL), ORDO_DEDUP_WITHDRAWN);
    expect_state(c, "k", ORDO_DEDUP_PROCESS);
    int64_t deadline;
    assert_int_equal(ordo_dedup_core_next_deadline(c, &deadline), ORDO_ENOTFOUND);
    assert_int_equal(ordo_dedup_core_expire(c, 10000, NULL, NULL), 0);
    assert_int_equal(finish(c, "k", b.ticket, 3, NULL), ORDO_DEDUP_STALE);
    assert_int_equal(finish(c, "k", a.ticket, 4, NULL), ORDO_DEDUP_IDLE);
    assert_int_equal(ordo_dedup_core_active(c), 0);
    ordo_dedup_core_destroy(c);
}

static void test_core_memory_and_keys(void **state)
{
    (void)state;
    enum { N = 5000 };
    ordo_dedup_core_t *c = make_core();
    ordo_dedup_ticket_t *h = calloc(N, sizeof *h), *w = calloc(N, sizeof *w);
    assert_non_null(h);
    assert_non_null(w);
    /* Binary keys: 4 bytes, most with zero bytes inside. */
    for (uint32_t i = 0; i < N; i++) {
        ordo_dedup_arrival_t a;
        int64_t now_ms = i < N / 2 ? 0 : 10 * T_MS; /* two waves of deadlines */
        assert_int_equal(ordo_dedup_core_arrive(c, &i, sizeof i, now_ms, NULL, &a),
                         ORDO_DEDUP_HOLDER);
        h[i] = a.ticket;
        assert_int_equal(ordo_dedup_core_arrive(c, &i, sizeof i, now_ms, NULL, &a),
                         ORDO_DEDUP_WAITER);
        w[i] = a.ticket;
    }
    assert_int_equal(ordo_dedup_core_active(c), N);
    /* The empty key is a key like any other. */
    ordo_dedup_arrival_t e;
    assert_int_equal(ordo_dedup_core_arrive(c, NULL, 0, 0, NULL, &e), ORDO_DEDUP_HOLDER);
    assert_int_equal(ordo_dedup_core_active(c), N + 1);
    assert_int_equal(ordo_dedup_core_finish(c, "", 0, e.ticket, 0, NULL), ORDO_DEDUP_IDLE);
    /* The first wave is released by timeout, the second handed over; then
     * all finish. */
    assert_int_equal(ordo_dedup_core_expire(c, T_MS, NULL, NULL), N / 2);
    for (uint32_t i = 0; i < N; i++) {
        int expect = i < N / 2 ? ORDO_DEDUP_STALE : ORDO_DEDUP_PROMOTED;
        assert_int_equal(ordo_dedup_core_finish(c, &i, sizeof i, h[i], N, NULL), expect);
        assert_int_equal(ordo_dedup_core_finish(c, &i, sizeof i, w[i], N, NULL), ORDO_DEDUP_IDLE);
    }
    assert_int_equal(ordo_dedup_core_active(c), 0);
    free(h);
    free(w);
    ordo_dedup_core_destroy(c);
}

static void test_core_invalid(void **state)
{
    (void)state;
    ordo_dedup_core_t *c = NULL;
    assert_int_equal(ordo_dedup_core_create(-1, &c), ORDO_EINVAL);
    assert_int_equal(ordo_dedup_core_create(0, NULL), ORDO_EINVAL);
    c = make_core();
    ordo_dedup_arrival_t a;
    assert_int_equal(ordo_dedup_core_arrive(c, NULL, 1, 0, NULL, &a), ORDO_EINVAL);
    assert_int_equal(ordo_dedup_core_arrive(c, "k", 1, 0, NULL, NULL), ORDO_EINVAL);
    assert_int_equal(ordo_dedup_core_finish(c, NULL, 1, 1, 0, NULL), ORDO_EINVAL);
    assert_int_equal(ordo_dedup_core_active(c), 0);
    assert_string_equal(ordo_strerror(ORDO_EDECLINED), "declined");
    ordo_dedup_core_destroy(c);
}

/* A random run against a reference model of every key's holder, waiter and
 * deadline: every outcome, ticket and promotion must match. */
enum { MODEL_KEYS = 6, MODEL_STEPS = 20000 };

typedef struct {
    ordo_dedup_ticket_t holder, waiter, old; /* old: a ticket that held it once */
    int64_t deadline_ms;
} mkey_t;

typedef struct {
    mkey_t keys[MODEL_KEYS];
    ordo_dedup_ticket_t next_ticket;
    int64_t now_ms;
} model_t;

static void model_arrive(ordo_dedup_core_t *c, model_t *m, uint8_t k)
{
    mkey_t *mk = &m->keys[k];
    ordo_dedup_arrival_t a;
    int rc = ordo_dedup_core_arrive(c, &k, 1, m->now_ms, NULL, &a);
    if (mk->holder == 0) {
        assert_int_equal(rc, ORDO_DEDUP_HOLDER);
        mk->holder = m->next_ticket++;
        assert_int_equal(a.ticket, mk->holder);
    } else if (mk->waiter == 0) {
        assert_int_equal(rc, ORDO_DEDUP_WAITER);
        mk->waiter = m->next_ticket++;
        mk->deadline_ms = m->now_ms + T_MS;
        assert_int_equal(a.ticket, mk->waiter);
        assert_int_equal(a.deadline_ms, mk->deadline_ms);
    } else {
        assert_int_equal(rc, ORDO_EDECLINED);
    }
}

static void model_finish(ordo_dedup_core_t *c, model_t *m, uint8_t k, unsigned which)
{
    mkey_t *mk = &m->keys[k];
    ordo_dedup_ticket_t t = which == 0 ? mk->holder : which == 1 ? mk->waiter : mk->old;
    ordo_dedup_promotion_t p;
    int rc = ordo_dedup_core_finish(c, &k, 1, t, m->now_ms, &p);
    if (t != 0 && t == mk->holder && mk->waiter != 0) {
        assert_int_equal(rc, ORDO_DEDUP_PROMOTED);
        assert_int_equal(p.ticket, mk->waiter);
        mk->old = mk->holder;
        mk->holder = mk->waiter;
        mk->waiter = 0;
    } else if (t != 0 && t == mk->holder) {
        assert_int_equal(rc, ORDO_DEDUP_IDLE);
        mk->old = mk->holder;
        mk->holder = 0;
    } else if (t != 0 && t == mk->waiter) {
        assert_int_equal(rc, ORDO_DEDUP_WITHDRAWN);
        mk->waiter = 0;
    } else {
        assert_int_equal(rc, ORDO_DEDUP_STALE);
    }
}

static void model_expire(ordo_dedup_core_t *c, model_t *m)
{
    size_t expect = 0;
    for (unsigned k = 0; k < MODEL_KEYS; k++) {
        mkey_t *mk = &m->keys[k];
        if (mk->waiter != 0 && mk->deadline_ms <= m->now_ms) {
            mk->old = mk->holder;
            mk->holder = mk->waiter;
            mk->waiter = 0;
            expect++;
        }
    }
    assert_int_equal(ordo_dedup_core_expire(c, m->now_ms, NULL, NULL), expect);
}

static void model_check(ordo_dedup_core_t *c, const model_t *m)
{
    size_t active = 0;
    for (uint8_t k = 0; k < MODEL_KEYS; k++) {
        const mkey_t *mk = &m->keys[k];
        ordo_dedup_state_t s = mk->holder == 0   ? ORDO_DEDUP_INIT
                               : mk->waiter == 0 ? ORDO_DEDUP_PROCESS
                                                 : ORDO_DEDUP_BLOCK;
        assert_int_equal(ordo_dedup_core_state(c, &k, 1), s);
        active += mk->holder != 0;
    }
    assert_int_equal(ordo_dedup_core_active(c), active);
}

static void test_core_model(void **state)
{
    (void)state;
    ordo_dedup_core_t *c = make_core();
    model_t m = {.next_ticket = 1};
    uint64_t rnd = 0x9e3779b97f4a7c15u;
    for (unsigned i = 0; i < MODEL_STEPS; i++) {
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17; /* xorshift64 */
        uint8_t k = (uint8_t)(rnd % MODEL_KEYS);
        unsigned op = (unsigned)(rnd >> 8) % 10;
        m.now_ms += (int64_t)((rnd >> 16) % 7);
        if (op < 4)
            model_arrive(c, &m, k);
        else if (op < 9)
            model_finish(c, &m, k, (unsigned)(rnd >> 24) % 3);
        else
            model_expire(c, &m);
        model_check(c, &m);
    }
    ordo_dedup_core_destroy(c);
}

/* ---- the blocking wrapper ------------------------------------------------------- */

typedef struct {
    ordo_dedup_t *d;
    const char *key;
    atomic_int started;
    int rc;
    ordo_dedup_ticket_t ticket;
} arrival_t;

static void *arrive_main(void *p)
{
    arrival_t *a = p;
    atomic_store(&a->started, 1);
    a->rc = ordo_dedup_arrive(a->d, a->key, strlen(a->key), &a->ticket);
    return NULL;
}

/* Start a thread that arrives for key and wait until it is parked as the
 * key's waiter. */
static void start_waiter(pthread_t *th, arrival_t *a)
{
    assert_int_equal(pthread_create(th, NULL, arrive_main, a), 0);
    while (ordo_dedup_state(a->d, a->key, strlen(a->key)) != ORDO_DEDUP_BLOCK)
        sched_yield();
}

static void test_wrapper_handover(void **state)
{
    (void)state;
    ordo_dedup_t *d = NULL;
    assert_int_equal(ordo_dedup_create(60000, &d), ORDO_OK);
    ordo_dedup_ticket_t t1, t3;
    assert_int_equal(ordo_dedup_arrive(d, "k", 1, &t1), ORDO_DEDUP_HOLDER);
    assert_int_equal(ordo_dedup_state(d, "k", 1), ORDO_DEDUP_PROCESS);
    arrival_t a = {.d = d, .key = "k"};
    pthread_t th;
    start_waiter(&th, &a);
    /* One holder, one waiter: a third arrival is declined at once. */
    assert_int_equal(ordo_dedup_arrive(d, "k", 1, &t3), ORDO_EDECLINED);
    assert_int_equal(ordo_dedup_finish(d, "k", 1, t1), ORDO_DEDUP_PROMOTED);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, ORDO_DEDUP_PROMOTED);
    assert_true(a.ticket != t1);
    assert_int_equal(ordo_dedup_finish(d, "k", 1, t1), ORDO_DEDUP_STALE);
    assert_int_equal(ordo_dedup_finish(d, "k", 1, a.ticket), ORDO_DEDUP_IDLE);
    assert_int_equal(ordo_dedup_active(d), 0);
    assert_int_equal(ordo_dedup_arrive(NULL, "k", 1, &t3), ORDO_EINVAL);
    assert_int_equal(ordo_dedup_arrive(d, NULL, 1, &t3), ORDO_EINVAL);
    ordo_dedup_destroy(d);
}

static void test_wrapper_takeover(void **state)
{
    (void)state;
    enum { SAFETY_MS = 50 };
    ordo_dedup_t *d = NULL;
    assert_int_equal(ordo_dedup_create(SAFETY_MS, &d), ORDO_OK);
    ordo_dedup_ticket_t t1;
    assert_int_equal(ordo_dedup_arrive(d, "k", 1, &t1), ORDO_DEDUP_HOLDER);
    /* The holder never finishes: the waiter is released by the timeout. */
    uint64_t t0 = ordo_now_ns();
    arrival_t a = {.d = d, .key = "k"};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, arrive_main, &a), 0);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, ORDO_DEDUP_TAKEOVER);
    assert_true(ordo_now_ns() - t0 >= (uint64_t)SAFETY_MS * 1000000u);
    assert_int_equal(ordo_dedup_state(d, "k", 1), ORDO_DEDUP_PROCESS);
    /* The stale holder's finish changes nothing and is reported. */
    assert_int_equal(ordo_dedup_finish(d, "k", 1, t1), ORDO_DEDUP_STALE);
    assert_int_equal(ordo_dedup_state(d, "k", 1), ORDO_DEDUP_PROCESS);
    assert_int_equal(ordo_dedup_finish(d, "k", 1, a.ticket), ORDO_DEDUP_IDLE);
    assert_int_equal(ordo_dedup_active(d), 0);
    ordo_dedup_destroy(d);
}

/* Threads arrive for a few keys at random and hold them briefly. The
 * safety timeout is far beyond the run, so the exclusion must be exact:
 * a per-key atomic flag set by the holder must always be found clear. The
 * accounting at the end checks that no waiter was lost or woken twice:
 * every promotion a finish reported was received by exactly one arrival,
 * and every admitted arrival finished. */
enum { STRESS_KEYS = 4, STRESS_THREADS = 4, STRESS_ITERS = 3000 };

typedef struct {
    ordo_dedup_t *d;
    atomic_int held[STRESS_KEYS];
    atomic_ulong holders, promoted_arrive, promoted_finish, declined, idle;
} dstress_t;

typedef struct {
    dstress_t *s;
    uint64_t seed;
} dworker_t;

static void hold_key(dstress_t *s, uint32_t k)
{
    assert_int_equal(atomic_exchange(&s->held[k], 1), 0); /* never two holders */
    assert_int_not_equal(ordo_dedup_state(s->d, &k, sizeof k), ORDO_DEDUP_INIT);
    for (int i = 0; i < 3; i++)
        sched_yield(); /* let others pile up behind */
    assert_int_equal(atomic_exchange(&s->held[k], 0), 1);
}

static void *dstress_main(void *p)
{
    dworker_t *w = p;
    dstress_t *s = w->s;
    uint64_t rnd = w->seed;
    for (unsigned i = 0; i < STRESS_ITERS; i++) {
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
        uint32_t k = (uint32_t)(rnd % STRESS_KEYS);
        ordo_dedup_ticket_t t;
        int rc = ordo_dedup_arrive(s->d, &k, sizeof k, &t);
        if (rc == ORDO_EDECLINED) {
            atomic_fetch_add(&s->declined, 1);
            continue;
        }
        assert_true(rc == ORDO_DEDUP_HOLDER || rc == ORDO_DEDUP_PROMOTED);
        atomic_fetch_add(rc == ORDO_DEDUP_HOLDER ? &s->holders : &s->promoted_arrive, 1);
        hold_key(s, k);
        rc = ordo_dedup_finish(s->d, &k, sizeof k, t);
        assert_true(rc == ORDO_DEDUP_IDLE || rc == ORDO_DEDUP_PROMOTED);
        atomic_fetch_add(rc == ORDO_DEDUP_IDLE ? &s->idle : &s->promoted_finish, 1);
    }
    return NULL;
}

static void test_wrapper_stress(void **state)
{
    (void)state;
    dstress_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    assert_int_equal(ordo_dedup_create(600000, &s->d), ORDO_OK);
    pthread_t th[STRESS_THREADS];
    dworker_t w[STRESS_THREADS];
    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        w[i] = (dworker_t){s, 0x2545f4914f6cdd1du * (i + 1)};
        assert_int_equal(pthread_create(&th[i], NULL, dstress_main, &w[i]), 0);
    }
    for (unsigned i = 0; i < STRESS_THREADS; i++)
        pthread_join(th[i], NULL);
    unsigned long admitted = atomic_load(&s->holders) + atomic_load(&s->promoted_arrive);
    assert_int_equal(admitted + atomic_load(&s->declined), STRESS_THREADS * STRESS_ITERS);
    assert_int_equal(atomic_load(&s->promoted_arrive), atomic_load(&s->promoted_finish));
    assert_int_equal(atomic_load(&s->idle) + atomic_load(&s->promoted_finish), admitted);
    /* With four threads on four keys some arrivals must have waited. */
    print_message("dedup stress: %lu holders, %lu promoted, %lu declined\n",
                  atomic_load(&s->holders), atomic_load(&s->promoted_arrive),
                  atomic_load(&s->declined));
    assert_int_equal(ordo_dedup_active(s->d), 0);
    ordo_dedup_destroy(s->d);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_transitions),
        cmocka_unit_test(test_core_safety_timeout),
        cmocka_unit_test(test_core_deadline_order),
        cmocka_unit_test(test_core_withdraw),
        cmocka_unit_test(test_core_memory_and_keys),
        cmocka_unit_test(test_core_invalid),
        cmocka_unit_test(test_core_model),
        cmocka_unit_test(test_wrapper_handover),
        cmocka_unit_test(test_wrapper_takeover),
        cmocka_unit_test(test_wrapper_stress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
