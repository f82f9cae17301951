/*
 * test_srv_queue.c -- the keyed work queue state machine: every operation
 * and outcome, timers as re-checked records, snapshots, a randomized test
 * against a reference model with the promise's invariants checked after
 * every step, and the memory overhead per waiting message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <malloc.h>

#include "core/queue.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t g_rev; /* the revision counter the core would keep */

static uint64_t next_rev(void)
{
    return ++g_rev;
}

static int push3(queue_t *q, const char *k, const char *p, uint64_t now, uint64_t *id)
{
    queue_push_t pu = {.key = k, .klen = strlen(k), .payload = p, .plen = strlen(p)};
    return queue_push(q, &pu, next_rev(), now, id);
}

static uint64_t push(queue_t *q, const char *k, const char *p, uint64_t now)
{
    uint64_t id = 0;
    assert_int_equal(push3(q, k, p, now, &id), QUEUE_OK);
    return id;
}

static int push_ex(queue_t *q, const char *k, const char *p, const char *dedup, bool coalesce,
                   uint64_t delay, uint64_t now, uint64_t *id)
{
    queue_push_t pu = {.key = k, .klen = strlen(k), .payload = p, .plen = strlen(p),
                       .dedup_id = dedup, .dlen = dedup ? strlen(dedup) : 0,
                       .coalesce = coalesce, .delay_ms = delay};
    return queue_push(q, &pu, next_rev(), now, id);
}

/* Deliver and check id, key and payload; returns the token. */
static uint64_t expect_deliver(queue_t *q, uint64_t now, uint64_t id, const char *k, const char *p)
{
    queue_delivery_t d;
    uint64_t tok = next_rev();
    assert_int_equal(queue_deliver(q, now, 0, tok, false, &d), 1);
    assert_int_equal(d.id, id);
    assert_int_equal(d.klen, strlen(k));
    assert_memory_equal(d.key, k, d.klen);
    assert_int_equal(d.plen, strlen(p));
    assert_memory_equal(d.payload, p, d.plen);
    assert_int_equal(d.token, tok);
    return tok;
}

static void expect_empty(queue_t *q, uint64_t now)
{
    queue_delivery_t d;
    assert_int_equal(queue_deliver(q, now, 0, next_rev(), false, &d), 0);
}

static queue_t *mkqueue(queue_set_t *s, const char *name)
{
    return queue_open(s, name, strlen(name));
}

/* ---- basic flow ------------------------------------------------------------------------------ */

/* FAIRNESS: one consumer that takes a message and acks it before the
 * next. A key with a large backlog pushed first: under oldest it goes
 * again and again (its next message is always the oldest); under
 * roundrobin every other ready key goes before it comes back, so the
 * small keys are done within (keys + 1) x their messages deliveries. */
static int small_done_after(int fairness)
{
    enum { HOT = 60, SMALL = 5, PER = 2 };
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t c;
    queue_config(q, &c);
    c.fairness = (uint8_t)fairness;
    assert_int_equal(queue_configure(q, &c), QUEUE_OK);
    for (int i = 0; i < HOT; i++)
        push(q, "hot", "h", 1);
    for (int j = 0; j < PER; j++)
        for (int k = 0; k < SMALL; k++) {
            char key[2] = {(char)('a' + k), 0};
            push(q, key, "s", 2);
        }
    int small_left = SMALL * PER, n = 0;
    while (small_left > 0) {
        queue_delivery_t d;
        uint64_t t = next_rev();
        assert_int_equal(queue_deliver(q, 3, 0, t, false, &d), 1);
        n++;
        if (d.key[0] != 'h')
            small_left--;
        assert_int_equal(queue_ack(q, d.id, t, NULL, 0, 3), 1);
    }
    queue_set_destroy(s);
    return n;
}

static void test_fairness(void **state)
{
    (void)state;
    assert_true(small_done_after(QUEUE_FAIR_ROUNDROBIN) <= (5 + 1) * 2);
    assert_int_equal(small_done_after(QUEUE_FAIR_OLDEST), 60 + 5 * 2); /* the rule as it says */
}

/* KEYCONCURRENCY 3: a key's first three go at once, in push order; a
 * fourth waits until one is done; a nacked one is the next to start; an
 * ack of the key's oldest while it is ready keeps the heap right; the
 * limit cannot drop below what a key has in flight. */
static void test_keyconcurrency(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t c;
    queue_config(q, &c);
    c.keyconc = 3;
    assert_int_equal(queue_configure(q, &c), QUEUE_OK);
    uint64_t a[5];
    for (int i = 0; i < 5; i++)
        a[i] = push(q, "a", "x", 1);
    uint64_t b = push(q, "b", "y", 1);
    uint64_t t0 = expect_deliver(q, 2, a[0], "a", "x");
    uint64_t t1 = expect_deliver(q, 2, a[1], "a", "x");
    uint64_t t2 = expect_deliver(q, 2, a[2], "a", "x");
    expect_deliver(q, 2, b, "b", "y");
    expect_empty(q, 2); /* a has three in flight */
    queue_keyinfo_t ki;
    queue_keyinfo(q, "a", 1, &ki);
    assert_int_equal(ki.inflight, 3);
    assert_int_equal(ki.waiting, 2);
    assert_int_equal(ki.inflight_id, a[0]);
    /* Not below three now. */
    c.keyconc = 2;
    assert_int_equal(queue_configure(q, &c), QUEUE_EINVAL);
    c.keyconc = 3;
    /* Done out of order: the middle one; a[3] may go. */
    assert_int_equal(queue_ack(q, a[1], t1, NULL, 0, 3), 1);
    uint64_t t3 = expect_deliver(q, 3, a[3], "a", "x");
    /* A nack of a[0]: it is the key's next to start, before a[4]. */
    queue_retry_t rt;
    assert_int_equal(queue_nack(q, a[0], t0, 0, 4, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_READY);
    uint64_t t0b = expect_deliver(q, 5, a[0], "a", "x");
    expect_empty(q, 5);
    /* Ack the key's head (a[2] is the oldest in flight now? no: a[0] was
     * requeued behind a[2] and a[3]) while the key waits out of the heap. */
    assert_int_equal(queue_ack(q, a[2], t2, NULL, 0, 6), 1);
    assert_int_equal(queue_ack(q, a[3], t3, NULL, 0, 6), 1);
    /* a is ready with one in flight: its head is in flight; acking it must
     * move the key in the ready heap, not corrupt it. */
    push(q, "c", "z", 6);
    assert_int_equal(queue_ack(q, a[0], t0b, NULL, 0, 7), 1);
    queue_delivery_t d;
    int seen_a4 = 0, seen_c = 0;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(queue_deliver(q, 8, 0, next_rev(), true, &d), 1);
        seen_a4 += d.id == a[4];
        seen_c += d.key[0] == 'c';
    }
    assert_int_equal(seen_a4, 1);
    assert_int_equal(seen_c, 1);
    expect_empty(q, 9);
    /* Lowering to 1 is fine once nothing of a key is in flight beyond it. */
    c.keyconc = 1;
    assert_int_equal(queue_configure(q, &c), QUEUE_OK);
    queue_set_destroy(s);
}

/* Random runs with KEYCONCURRENCY 1..4: deliveries, acks, nacks (with and
 * without a delay), lease ends, config changes; after each step no key has
 * more in flight than the limit, first deliveries of a key come in push
 * order, and every message is done exactly once in the end. */
static void test_keyconcurrency_random(void **state)
{
    (void)state;
    enum { KEYS = 4, MSGS = 200, STEPS = 4000 };
    for (uint64_t seed = 1; seed <= 20; seed++) {
        uint64_t r = seed * 0x9E3779B97F4A7C15ull;
#define RND() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, r)
        queue_set_t *s = queue_set_create();
        queue_t *q = mkqueue(s, "q");
        queue_config_t c;
        queue_config(q, &c);
        c.keyconc = 1 + (uint32_t)(seed % 4);
        c.maxattempts = 0;
        assert_int_equal(queue_configure(q, &c), QUEUE_OK);
        uint64_t ids[MSGS], tok[MSGS];
        int key_of[MSGS], done[MSGS], started[MSGS], inflight[MSGS];
        uint64_t last_started[KEYS] = {0};
        memset(done, 0, sizeof done);
        memset(started, 0, sizeof started);
        memset(inflight, 0, sizeof inflight);
        for (int i = 0; i < MSGS; i++) {
            char k[2] = {(char)('a' + i % KEYS), 0};
            key_of[i] = i % KEYS;
            ids[i] = push(q, k, "p", 1);
        }
        uint64_t now = 10;
        int ndone = 0;
        for (int step = 0; step < STEPS && ndone < MSGS; step++) {
            now += RND() % 3;
            int op = (int)(RND() % 10);
            if (op < 4) {
                queue_delivery_t d;
                uint64_t t = next_rev();
                if (queue_deliver(q, now, 50, t, false, &d) == 1) {
                    int i = 0;
                    while (ids[i] != d.id)
                        i++;
                    assert_false(inflight[i]);
                    if (!started[i]) { /* first starts of a key in push order */
                        assert_true(ids[i] > last_started[key_of[i]]);
                        last_started[key_of[i]] = ids[i];
                    }
                    started[i] = 1;
                    inflight[i] = 1;
                    tok[i] = t;
                }
            } else {
                int i = (int)(RND() % MSGS);
                if (inflight[i] != 1) /* 2: held by a nack delay, no token owns it */
                    continue;
                queue_retry_t rt;
                if (op < 7) {
                    assert_int_equal(queue_ack(q, ids[i], tok[i], NULL, 0, now), 1);
                    inflight[i] = 0;
                    done[i] = 1;
                    ndone++;
                } else if (op < 9) {
                    assert_int_equal(queue_nack(q, ids[i], tok[i], op == 8 ? 5 : 0, now, next_rev(), &rt), 1);
                    inflight[i] = 0;
                    if (op == 8)
                        inflight[i] = 2; /* held: not deliverable until redelivered */
                } else {
                    uint64_t later = now + 60;
                    if (queue_redeliver(q, ids[i], tok[i], later, next_rev(), &rt) == 1)
                        inflight[i] = 0;
                }
            }
            /* Held (nack-delayed) messages come back by their timer. */
            queue_timer_t t;
            while (queue_next_lease(q, &t) && t.token == 0 && t.due_ms < now) {
                int i = 0;
                while (ids[i] != t.id)
                    i++;
                assert_int_equal(queue_redeliver(q, t.id, 0, now, next_rev(), NULL), 1);
                inflight[i] = 0;
            }
            for (int k = 0; k < KEYS; k++) {
                char key[2] = {(char)('a' + k), 0};
                queue_keyinfo_t ki;
                queue_keyinfo(q, key, 1, &ki);
                assert_true(ki.inflight <= c.keyconc);
            }
            if (step % 500 == 250) { /* up and, when possible, down */
                c.keyconc = 1 + (uint32_t)(RND() % 4);
                queue_configure(q, &c);
                queue_config(q, &c);
            }
        }
        /* Drain what is left. */
        for (int guard = 0; ndone < MSGS && guard < 100000; guard++) {
            now += 100;
            queue_timer_t t;
            while (queue_next_lease(q, &t) && t.due_ms < now) {
                queue_redeliver(q, t.id, t.token, now, next_rev(), NULL);
                for (int i = 0; i < MSGS; i++)
                    if (ids[i] == t.id)
                        inflight[i] = 0;
            }
            queue_delivery_t d;
            while (queue_deliver(q, now, 1000000, next_rev(), true, &d) == 1) {
                int i = 0;
                while (ids[i] != d.id)
                    i++;
                assert_false(done[i]);
                done[i] = 1;
                ndone++;
            }
        }
        assert_int_equal(ndone, MSGS);
        queue_len_t l;
        queue_len(q, &l);
        assert_int_equal(l.waiting + l.inflight + l.delayed, 0);
        queue_set_destroy(s);
#undef RND
    }
}

/* Token buckets: KEYRATE 2 PER 100 lets each key go twice, then throttles
 * it until a token is back (the rate timer says when); RATE 3 PER 1000
 * stops the whole queue after three. Never early: a token due at t is
 * given at t + 1 by the timer's record, and any delivery at t may take it. */
static void test_rate_limits(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t c;
    queue_config(q, &c);
    c.keyrate_n = 2;
    c.keyrate_per_ms = 100;
    assert_int_equal(queue_configure(q, &c), QUEUE_OK);
    for (int i = 0; i < 4; i++) {
        push(q, "a", "x", 1000);
        push(q, "b", "x", 1000);
    }
    queue_delivery_t d;
    int na = 0, nb = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(queue_deliver(q, 1000, 0, next_rev(), true, &d), 1);
        if (d.key[0] == 'a')
            na++;
        else
            nb++;
    }
    assert_int_equal(na, 2);
    assert_int_equal(nb, 2);
    expect_empty(q, 1000);
    queue_info_t in;
    queue_info(q, &in);
    assert_int_equal(in.throttled_keys, 2);
    queue_keyinfo_t ki;
    queue_keyinfo(q, "a", 1, &ki);
    assert_int_equal(ki.throttled_until_ms, 1050);
    uint64_t until;
    assert_int_equal(queue_rate_tokens(q, "a", 1, 1049, &until), 0);
    assert_int_equal(until, 1050);
    queue_timer_t t;
    assert_true(queue_next_rate(q, &t));
    assert_int_equal(t.due_ms, 1050);
    expect_empty(q, 1050);                       /* due, not past */
    assert_int_equal(queue_promote(q, 1051), 2); /* the timer's record: both back */
    assert_int_equal(queue_deliver(q, 1051, 0, next_rev(), true, &d), 1);
    assert_int_equal(queue_deliver(q, 1051, 0, next_rev(), true, &d), 1);
    expect_empty(q, 1051);
    /* The queue's bucket on top: three, then nothing until its token. */
    c.keyrate_n = 0;
    c.keyrate_per_ms = 0;
    c.rate_n = 3;
    c.rate_per_ms = 1000;
    assert_int_equal(queue_configure(q, &c), QUEUE_OK);
    for (int i = 0; i < 3; i++)
        push(q, "c", "x", 2000);
    assert_int_equal(queue_promote(q, 2000), 0); /* nothing throttled; full buckets were freed */
    for (int i = 0; i < 3; i++)
        assert_int_equal(queue_deliver(q, 2000, 0, next_rev(), true, &d), 1);
    expect_empty(q, 2000);
    assert_true(queue_next_rate(q, &t));
    assert_int_equal(t.due_ms, 2334); /* 1000 / 3, rounded up */
    expect_empty(q, 2333);
    assert_int_equal(queue_deliver(q, 2334, 0, next_rev(), true, &d), 1);
    /* Limits out of range are refused. */
    c.rate_per_ms = 0;
    assert_int_equal(queue_configure(q, &c), QUEUE_EINVAL);
    c.rate_per_ms = QUEUE_RATE_PER_MS_MAX + 1ull;
    assert_int_equal(queue_configure(q, &c), QUEUE_EINVAL);
    queue_set_destroy(s);
}

/* Check a key's FIFO by what deliveries give: ids in order, then nothing
 * (NOACK deliveries, one key at a time). */
static void expect_key_order(queue_t *q, uint64_t now, const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        queue_delivery_t d;
        assert_int_equal(queue_deliver(q, now, 0, next_rev(), true, &d), 1);
        assert_int_equal(d.id, ids[i]);
    }
    expect_empty(q, now);
}

/* Redrive, cancel and expire take messages out of a FIFO's middle, head
 * and tail, in flight or not: what remains keeps its order, tails stay
 * right (a push after lands last), and the counts agree. */
static void test_redrive_cancel_expire(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q"), *dlq = mkqueue(s, "dlq");
    queue_config_t c;
    queue_config(q, &c);
    c.deadletter = "dlq";
    c.dl_len = 3;
    c.maxattempts = 1;
    assert_int_equal(queue_configure(q, &c), QUEUE_OK);
    /* Three dead letters of k (in order) and one of j. */
    uint64_t dl[3], dj = 0;
    for (int i = 0; i < 4; i++) {
        const char *key = i == 3 ? "j" : "k";
        uint64_t id = push(q, key, "x", 10);
        queue_delivery_t d;
        uint64_t tok = next_rev();
        assert_int_equal(queue_deliver(q, 11, 0, tok, false, &d), 1);
        queue_retry_t rt;
        uint64_t rev = next_rev();
        assert_int_equal(queue_nack(q, id, tok, 0, 12, rev, &rt), 1);
        assert_int_equal(rt.kind, QUEUE_RETRY_DEADLETTER);
        if (i < 3)
            dl[i] = rev;
        else
            dj = rev;
    }
    queue_len_t l;
    queue_len(dlq, &l);
    assert_int_equal(l.waiting, 4);
    /* One by id from the middle, then the rest of k in order; j stays. */
    uint64_t k1 = push(q, "k", "new", 13);
    assert_int_equal(queue_redrive(dlq, q, "k", 1, dl[1]), 1);
    assert_int_equal(queue_redrive(dlq, q, "k", 1, dl[1]), 0);
    assert_int_equal(queue_redrive(dlq, q, "k", 1, 0), 2);
    assert_int_equal(queue_redrive(dlq, q, "zz", 2, 0), 0);
    queue_len(dlq, &l);
    assert_int_equal(l.waiting, 1);
    queue_keyinfo_t ki;
    assert_int_equal(queue_keyinfo(dlq, "k", 1, &ki), QUEUE_KEY_IDLE);
    /* k in q: the push, then the redriven ones in the order they came. */
    uint64_t tail = push(q, "k", "after", 14);
    uint64_t want[] = {k1, dl[1], dl[0], dl[2], tail};
    /* Cancel the middle one and the tail; push again: it is last. */
    assert_int_equal(queue_cancel(q, "k", 1, dl[0], 15), 1);
    assert_int_equal(queue_cancel(q, "k", 1, dl[0], 15), 0);
    assert_int_equal(queue_cancel(q, "k", 1, tail, 15), 1);
    queue_result_t r;
    assert_int_equal(queue_result(q, dl[0], &r), QUEUE_FATE_CANCELLED);
    uint64_t last = push(q, "k", "last", 16);
    uint64_t after_cancel[] = {want[0], want[1], want[3], last};
    /* In flight head: cancel and expire leave it; the one behind goes. */
    queue_delivery_t d;
    uint64_t tok = next_rev();
    assert_int_equal(queue_deliver(q, 17, 0, tok, false, &d), 1);
    assert_int_equal(d.id, k1);
    assert_int_equal(queue_cancel(q, "k", 1, k1, 18), 0);
    queue_retry_t rt;
    assert_int_equal(queue_expire(q, "k", 1, k1, 18, next_rev(), &rt), 0);
    /* dl[1] was never delivered in q (its attempts were reset): it expires. */
    uint64_t rev = next_rev();
    assert_int_equal(queue_expire(q, "k", 1, dl[1], 19, rev, &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_DEADLETTER);
    assert_int_equal(rt.dl_id, rev);
    assert_int_equal(queue_result(q, dl[1], &r), QUEUE_FATE_DEADLETTER);
    assert_int_equal(r.rlen, strlen(QUEUE_REASON_MAXWAIT));
    assert_int_equal(queue_ack(q, k1, tok, NULL, 0, 20), 1);
    expect_key_order(q, 21, after_cancel + 2, 2);
    /* A delayed message can be cancelled too. */
    uint64_t del;
    queue_push_t p = {.key = "k", .klen = 1, .payload = "d", .plen = 1, .delay_ms = 1000};
    assert_int_equal(queue_push(q, &p, next_rev(), 30, &del), QUEUE_OK);
    size_t klen;
    assert_non_null(queue_delayed_key(q, del, &klen));
    assert_int_equal(queue_cancel(q, "k", 1, del, 31), 1);
    queue_len(q, &l);
    assert_int_equal(l.delayed, 0);
    assert_int_equal(l.waiting, 0);
    (void)dj;
    queue_set_destroy(s);
}

/* Pauses: a paused key keeps its messages in order and out of delivery,
 * others flow; a delivery in flight finishes; a timed pause ends only
 * past its end; the queue's own pause stops everything; resume puts the
 * key back with its oldest message first. */
static void test_pause_resume(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    uint64_t a1 = push(q, "a", "a1", 1), b1 = push(q, "b", "b1", 1), a2 = push(q, "a", "a2", 1);
    uint64_t until;
    assert_int_equal(queue_pause(q, "a", 1, 0), 1);
    assert_int_equal(queue_pause(q, "a", 1, 0), 0); /* paused so already */
    assert_true(queue_paused(q, "a", 1, &until));
    assert_int_equal(until, 0);
    queue_info_t in;
    queue_info(q, &in);
    assert_int_equal(in.ready_keys, 1);
    assert_int_equal(in.paused_keys, 1);
    uint64_t tb = expect_deliver(q, 2, b1, "b", "b1");
    expect_empty(q, 2);
    /* A key paused while in flight: its delivery finishes, its next waits. */
    assert_int_equal(queue_pause(q, "b", 1, 50), 1);
    push(q, "b", "b2", 3);
    assert_int_equal(queue_ack(q, b1, tb, NULL, 0, 4), 1);
    expect_empty(q, 5);
    queue_timer_t t;
    assert_true(queue_next_pause_end(q, &t));
    assert_int_equal(t.due_ms, 50);
    assert_false(t.queue_wide);
    assert_memory_equal(t.key, "b", 1);
    assert_int_equal(queue_pause_end(q, "b", 1, 50), 0); /* due only past its end */
    assert_int_equal(queue_pause_end(q, "a", 1, 99), 0);  /* no end: only resume ends it */
    assert_int_equal(queue_pause_end(q, "b", 1, 51), 1);
    assert_false(queue_paused(q, "b", 1, &until));
    /* The queue's own pause: nothing is delivered or peeked. */
    assert_int_equal(queue_pause(q, NULL, 0, 80), 1);
    expect_empty(q, 52);
    queue_delivery_t d;
    assert_int_equal(queue_peek(q, 5, &d), 0);
    assert_true(queue_next_pause_end(q, &t));
    assert_true(t.queue_wide);
    assert_int_equal(queue_pause_end(q, NULL, 0, 81), 1);
    assert_int_equal(queue_resume(q, NULL, 0), 0);
    queue_delivery_t got;
    assert_int_equal(queue_deliver(q, 82, 0, next_rev(), true, &got), 1);
    assert_memory_equal(got.payload, "b2", 2);
    /* Resume a: its oldest first, then the next. */
    assert_int_equal(queue_resume(q, "a", 1), 1);
    assert_int_equal(queue_resume(q, "a", 1), 0);
    assert_int_equal(queue_deliver(q, 83, 0, next_rev(), true, &got), 1);
    assert_int_equal(got.id, a1);
    assert_int_equal(queue_deliver(q, 84, 0, next_rev(), true, &got), 1);
    assert_int_equal(got.id, a2);
    /* A key paused before its first message: the message waits. */
    assert_int_equal(queue_pause(q, "c", 1, 0), 1);
    push(q, "c", "c1", 85);
    expect_empty(q, 86);
    queue_keyinfo_t ki;
    assert_int_equal(queue_keyinfo(q, "c", 1, &ki), QUEUE_KEY_WAITING);
    assert_true(ki.paused);
    assert_int_equal(queue_set_paused_keys(s), 1);
    queue_set_destroy(s);
}

/* Backoff: fixed is the base; exponential draws in [0, min(cap, base *
 * 2^(attempt-1))] and reaches the cap; none is 0. */
static void test_backoff_delay(void **state)
{
    (void)state;
    queue_config_t c;
    queue_config_defaults(&c);
    assert_false(queue_policy_active(&c));
    assert_int_equal(queue_backoff_delay(&c, 3, 12345), 0);
    c.backoff = QUEUE_BACKOFF_FIXED;
    c.backoff_base_ms = 250;
    assert_true(queue_policy_active(&c));
    assert_int_equal(queue_backoff_delay(&c, 1, 999), 250);
    assert_int_equal(queue_backoff_delay(&c, 9, 7), 250);
    c.backoff = QUEUE_BACKOFF_EXPONENTIAL;
    c.backoff_base_ms = 100;
    c.backoff_cap_ms = 1000;
    /* draw = ceil: the top of the range; ceil + 1 wraps to 0. */
    assert_int_equal(queue_backoff_delay(&c, 1, 100), 100);
    assert_int_equal(queue_backoff_delay(&c, 1, 101), 0);
    assert_int_equal(queue_backoff_delay(&c, 3, 400), 400);
    assert_int_equal(queue_backoff_delay(&c, 5, 1000), 1000); /* 1600 capped at 1000 */
    assert_int_equal(queue_backoff_delay(&c, 4000000000u, UINT64_MAX - 1) <= 1000, 1);
    uint64_t x = 88172645463325252ull, top = 0;
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t d = queue_backoff_delay(&c, 3, x);
        assert_true(d <= 400);
        if (d > top)
            top = d;
    }
    assert_true(top > 300); /* the range is used, not just its floor */
    c.maxage_ms = 5;
    c.backoff = QUEUE_BACKOFF_NONE;
    assert_true(queue_policy_active(&c));
}

/* queue_retry(): a nack holds the key for the drawn delay (KEYINFO shows
 * the next attempt), a lease-out needs its deadline passed, GIVEUP
 * dead-letters at once whatever the attempts left. */
static void test_retry_policy(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t c;
    queue_config(q, &c);
    c.backoff = QUEUE_BACKOFF_FIXED;
    c.backoff_base_ms = 50;
    c.deadletter = "dlq";
    c.dl_len = 3;
    assert_int_equal(queue_configure(q, &c), QUEUE_OK);
    uint64_t a = push(q, "k", "a", 1000), b = push(q, "k", "b", 1000);
    uint64_t tok = expect_deliver(q, 1001, a, "k", "a");
    assert_int_equal(queue_delivery_attempt(q, a, tok), 1);
    assert_int_equal(queue_delivery_attempt(q, a, tok + 1), 0);
    queue_retry_t rt;
    /* A lease-out before its deadline is stale. */
    assert_int_equal(queue_retry(q, a, tok, QUEUE_RETRY_F_LEASE, 50, 1002, next_rev(), &rt), 0);
    assert_int_equal(queue_retry(q, a, tok, 0, 50, 1002, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_LATER);
    queue_keyinfo_t ki;
    queue_keyinfo(q, "k", 1, &ki);
    assert_int_equal(ki.state, QUEUE_KEY_PROCESSING);
    assert_int_equal(ki.token, 0);
    assert_int_equal(ki.next_attempt_ms, 1052);
    expect_empty(q, 1003); /* the key is held: b waits behind a */
    /* Stale now: the token is no longer current. */
    assert_int_equal(queue_retry(q, a, tok, 0, 50, 1004, next_rev(), &rt), 0);
    assert_int_equal(queue_redeliver(q, a, 0, 1053, next_rev(), &rt), 1);
    tok = expect_deliver(q, 1053, a, "k", "a");
    /* The lease ran out: a lease-out retry, then GIVEUP dead-letters. */
    assert_int_equal(queue_retry(q, a, tok, QUEUE_RETRY_F_LEASE | QUEUE_RETRY_F_GIVEUP, 50, 1053 + 30001,
                                 next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_DEADLETTER);
    assert_non_null(rt.dlq);
    expect_deliver(q, 40000, b, "k", "b"); /* the key moved on, in order */
    queue_info_t in;
    queue_info(q, &in);
    assert_int_equal(in.redelivered, 1);
    assert_int_equal(in.nacked, 1);
    assert_int_equal(in.deadlettered, 1);
    /* Configuration: a cap below the base, or an unknown kind, is refused. */
    c.backoff_cap_ms = 10;
    assert_int_equal(queue_configure(q, &c), QUEUE_OK); /* a cap is only an exponential's */
    c.backoff = QUEUE_BACKOFF_EXPONENTIAL;
    assert_int_equal(queue_configure(q, &c), QUEUE_EINVAL);
    c.backoff_cap_ms = 100;
    c.backoff = 9;
    assert_int_equal(queue_configure(q, &c), QUEUE_EINVAL);
    queue_set_destroy(s);
}

static void test_push_deliver_ack(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    assert_ptr_equal(queue_get(s, "q", 1), q);
    assert_ptr_equal(mkqueue(s, "q"), q);
    uint64_t a1 = push(q, "a", "a1", 1), a2 = push(q, "a", "a2", 1), b1 = push(q, "b", "b1", 1);
    queue_len_t len;
    queue_len(q, &len);
    assert_int_equal(len.waiting, 3);
    /* a1 is oldest; a2 waits behind it (one in flight per key); b1 goes in parallel. */
    uint64_t ta1 = expect_deliver(q, 2, a1, "a", "a1");
    uint64_t tb1 = expect_deliver(q, 2, b1, "b", "b1");
    expect_empty(q, 2);
    queue_len(q, &len);
    assert_int_equal(len.waiting, 1);
    assert_int_equal(len.inflight, 2);
    /* A stale or wrong token changes nothing. */
    assert_int_equal(queue_ack(q, a1, ta1 + 1000, NULL, 0, 3), 0);
    assert_int_equal(queue_ack(q, a1, 0, NULL, 0, 3), 0);
    assert_int_equal(queue_ack(q, 999, ta1, NULL, 0, 3), 0);
    expect_empty(q, 3);
    assert_int_equal(queue_ack(q, a1, ta1, NULL, 0, 3), 1);
    assert_int_equal(queue_ack(q, a1, ta1, NULL, 0, 3), 0); /* twice: stale */
    uint64_t ta2 = expect_deliver(q, 4, a2, "a", "a2");
    assert_true(ta2 > ta1);
    assert_int_equal(queue_ack(q, a2, ta2, NULL, 0, 5), 1);
    assert_int_equal(queue_ack(q, b1, tb1, NULL, 0, 5), 1);
    queue_len(q, &len);
    assert_int_equal(len.waiting + len.inflight + len.delayed, 0);
    queue_info_t info;
    queue_info(q, &info);
    assert_int_equal(info.keys, 0);
    assert_int_equal(info.pushed, 3);
    assert_int_equal(info.delivered, 3);
    assert_int_equal(info.acked, 3);
    queue_set_destroy(s);
}

/* After a key's in-flight message is acked, its next message may be older
 * than heads already ready: it must go first (a FIFO of ready keys would
 * not do that). */
static void test_oldest_head_first(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    uint64_t a1 = push(q, "A", "1", 1), b = push(q, "B", "2", 1);
    uint64_t a3 = push(q, "A", "3", 1), c = push(q, "C", "4", 1);
    uint64_t t = expect_deliver(q, 2, a1, "A", "1");
    assert_int_equal(queue_ack(q, a1, t, NULL, 0, 2), 1);
    expect_deliver(q, 2, b, "B", "2");
    expect_deliver(q, 2, a3, "A", "3");
    expect_deliver(q, 2, c, "C", "4");
    queue_set_destroy(s);
}

static void test_noack(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    uint64_t a1 = push(q, "a", "one", 1), a2 = push(q, "a", "two", 1);
    queue_delivery_t d;
    assert_int_equal(queue_deliver(q, 2, 0, next_rev(), true, &d), 1);
    assert_int_equal(d.id, a1);
    assert_memory_equal(d.payload, "one", 3); /* still readable (ASan checks) */
    /* The key's next message is available at once. */
    assert_int_equal(queue_deliver(q, 2, 0, next_rev(), true, &d), 1);
    assert_int_equal(d.id, a2);
    assert_memory_equal(d.key, "a", 1);
    assert_memory_equal(d.payload, "two", 3);
    queue_len_t len;
    queue_len(q, &len);
    assert_int_equal(len.waiting + len.inflight, 0);
    queue_result_t r;
    assert_int_equal(queue_result(q, a1, &r), QUEUE_FATE_NONE);
    queue_set_destroy(s);
}

/* ---- leases, nack, extend, redeliver --------------------------------------------------------- */

static void test_nack_extend_redeliver(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.lease_ms = 100;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t id = push(q, "k", "x", 0), id2 = push(q, "k", "y", 0);
    uint64_t t1 = expect_deliver(q, 10, id, "k", "x");
    queue_timer_t tm;
    assert_true(queue_next_lease(q, &tm));
    assert_int_equal(tm.kind, QUEUE_TIMER_LEASE);
    assert_int_equal(tm.due_ms, 110);
    assert_int_equal(tm.id, id);
    assert_int_equal(tm.token, t1);
    /* Redeliver before the deadline: stale record, nothing happens. */
    queue_retry_t rt;
    assert_int_equal(queue_redeliver(q, id, t1, 109, next_rev(), &rt), 0);
    /* Extend moves the deadline; a redeliver record made for the old one is stale. */
    assert_int_equal(queue_extend(q, id, t1, 200, 50), 1);
    assert_int_equal(queue_extend(q, id, t1 + 1, 200, 50), 0);
    assert_int_equal(queue_redeliver(q, id, t1, 110, next_rev(), &rt), 0);
    assert_true(queue_next_lease(q, &tm));
    assert_int_equal(tm.due_ms, 250);
    /* Lease runs out once the clock is past it (never at it: that could be
     * up to 1 ms early): same id, next attempt, new token; the old token is
     * stale. */
    assert_int_equal(queue_redeliver(q, id, t1, 250, next_rev(), &rt), 0);
    assert_int_equal(queue_redeliver(q, id, t1, 251, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_READY);
    assert_int_equal(queue_redeliver(q, id, t1, 250, next_rev(), &rt), 0);
    queue_delivery_t d;
    uint64_t t2 = next_rev();
    assert_int_equal(queue_deliver(q, 260, 0, t2, false, &d), 1);
    assert_int_equal(d.id, id);
    assert_int_equal(d.attempt, 2);
    assert_int_equal(queue_ack(q, id, t1, NULL, 0, 261), 0); /* the old owner cannot release the key */
    /* Nack without delay: ready again at once, still first for its key. */
    assert_int_equal(queue_nack(q, id, t1, 0, 262, next_rev(), &rt), 0);
    assert_int_equal(queue_nack(q, id, t2, 0, 262, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_READY);
    uint64_t t3 = expect_deliver(q, 263, id, "k", "x");
    /* Nack with delay: the key stays held, no token owns it. */
    assert_int_equal(queue_nack(q, id, t3, 40, 300, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_LATER);
    expect_empty(q, 301);
    queue_keyinfo_t ki;
    assert_int_equal(queue_keyinfo(q, "k", 1, &ki), QUEUE_KEY_PROCESSING);
    assert_int_equal(ki.token, 0);
    assert_int_equal(ki.deadline_ms, 340);
    assert_int_equal(ki.waiting, 1);
    assert_int_equal(queue_ack(q, id, t3, NULL, 0, 301), 0);
    assert_int_equal(queue_ack(q, id, 0, NULL, 0, 301), 0);
    assert_true(queue_next_lease(q, &tm));
    assert_int_equal(tm.token, 0);
    assert_int_equal(tm.due_ms, 340);
    assert_int_equal(queue_redeliver(q, id, 0, 340, next_rev(), &rt), 0);
    assert_int_equal(queue_redeliver(q, id, 0, 341, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_READY);
    uint64_t t4 = next_rev();
    assert_int_equal(queue_deliver(q, 342, 1000, t4, false, &d), 1);
    assert_int_equal(d.id, id);
    assert_int_equal(d.attempt, 4);
    assert_int_equal(d.deadline_ms, 1342); /* explicit lease */
    assert_int_equal(queue_ack(q, id, t4, NULL, 0, 342), 1);
    expect_deliver(q, 343, id2, "k", "y");
    queue_info_t info;
    queue_info(q, &info);
    assert_int_equal(info.nacked, 2);
    assert_int_equal(info.redelivered, 1);
    queue_set_destroy(s);
}

/* ---- events (Q.WATCH) ------------------------------------------------------------------------ */

typedef struct evlog_s {
    int n;
    int type[16];
    uint64_t id[16], num[16];
    char key[16][8];
    char queue[16][8];
    bool has_data[16];
} evlog_t;

static void log_event(void *arg, const queue_event_t *ev)
{
    evlog_t *l = arg;
    assert_true(l->n < 16);
    l->type[l->n] = ev->type;
    l->id[l->n] = ev->id;
    l->num[l->n] = ev->n;
    snprintf(l->key[l->n], 8, "%.*s", (int)ev->klen, ev->key);
    snprintf(l->queue[l->n], 8, "%.*s", (int)ev->qlen, ev->queue);
    l->has_data[l->n] = ev->data != NULL;
    l->n++;
}

/* Each transition is told once, in order, with the message's id and key;
 * a duplicate push, a merge and a stale ack are not. */
static void test_events(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    evlog_t l = {0};
    queue_set_event_cb(s, log_event, &l);
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.maxattempts = 2;
    cfg.deadletter = "dlq";
    cfg.dl_len = 3;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t a = push(q, "a", "1", 0);
    uint64_t id;
    assert_int_equal(push_ex(q, "a", "2", NULL, true, 0, 0, &id), QUEUE_MERGED); /* no event */
    uint64_t t = expect_deliver(q, 1, a, "a", "2");
    assert_int_equal(queue_ack(q, a, t + 1, "r", 1, 2), 0); /* stale: no event */
    assert_int_equal(queue_ack(q, a, t, "r", 1, 2), 1);
    uint64_t b = push(q, "b", "x", 3);
    queue_retry_t rt;
    t = expect_deliver(q, 4, b, "b", "x");
    assert_int_equal(queue_nack(q, b, t, 0, 5, next_rev(), &rt), 1);
    t = expect_deliver(q, 6, b, "b", "x");
    uint64_t dl = next_rev();
    assert_int_equal(queue_nack(q, b, t, 0, 7, dl, &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_DEADLETTER);
    static const int want[] = {QUEUE_EV_PUSHED, QUEUE_EV_DELIVERED, QUEUE_EV_ACKED, QUEUE_EV_PUSHED,
                               QUEUE_EV_DELIVERED, QUEUE_EV_NACKED, QUEUE_EV_DELIVERED, QUEUE_EV_NACKED,
                               QUEUE_EV_DEADLETTERED, QUEUE_EV_PUSHED};
    assert_int_equal(l.n, 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(l.type[i], want[i]);
    assert_int_equal(l.id[0], a);
    assert_string_equal(l.key[0], "a");
    assert_int_equal(l.num[1], 1);        /* attempt */
    assert_true(l.has_data[2]);           /* acked with a result */
    assert_int_equal(l.num[6], 2);
    assert_int_equal(l.num[8], dl);       /* its id in the dead-letter queue */
    assert_string_equal(l.queue[9], "dlq");
    assert_int_equal(l.id[9], dl);
    assert_string_equal(l.key[9], "b");
    queue_set_destroy(s);
}

static void test_deadletter(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.maxattempts = 2;
    cfg.deadletter = "q";
    cfg.dl_len = 1;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_EINVAL); /* itself */
    cfg.deadletter = "dlq";
    cfg.dl_len = 3;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    queue_config_t got;
    queue_config(q, &got);
    assert_int_equal(got.dl_len, 3);
    assert_memory_equal(got.deadletter, "dlq", 3);
    uint64_t id = push(q, "k", "poison", 0), id2 = push(q, "k", "next", 0);
    uint64_t t = expect_deliver(q, 1, id, "k", "poison");
    queue_retry_t rt;
    assert_int_equal(queue_nack(q, id, t, 0, 2, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_READY);
    t = expect_deliver(q, 3, id, "k", "poison");
    /* Second attempt's lease runs out: attempts exhausted -> dead letter. */
    uint64_t dl_rev = next_rev();
    assert_int_equal(queue_redeliver(q, id, t, 3 + cfg.lease_ms + 1, dl_rev, &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_DEADLETTER);
    assert_int_equal(rt.id, id);
    queue_t *dlq = queue_get(s, "dlq", 3);
    assert_non_null(dlq);
    assert_ptr_equal(rt.dlq, dlq);
    assert_int_equal(rt.dl_id, dl_rev);
    queue_result_t r;
    assert_int_equal(queue_result(q, id, &r), QUEUE_FATE_DEADLETTER);
    assert_int_equal(r.dl_id, dl_rev);
    /* The key moved on; the DLQ has the same key and payload. */
    expect_deliver(q, 4, id2, "k", "next");
    expect_deliver(dlq, 4, dl_rev, "k", "poison");
    /* ONPOISON drop without a DEADLETTER queue: the message is discarded,
     * fate kept (test_no_silent_loss_by_default: the default parks). */
    queue_t *q2 = mkqueue(s, "q2");
    queue_config(q2, &cfg);
    cfg.maxattempts = 1;
    cfg.onpoison = QUEUE_ONPOISON_DROP;
    assert_int_equal(queue_configure(q2, &cfg), QUEUE_OK);
    uint64_t x = push(q2, "k", "p", 0);
    t = expect_deliver(q2, 1, x, "k", "p");
    assert_int_equal(queue_nack(q2, x, t, 500, 2, next_rev(), &rt), 1); /* exhausted: delay ignored */
    assert_int_equal(rt.kind, QUEUE_RETRY_DEADLETTER);
    assert_null(rt.dlq);
    assert_int_equal(queue_result(q2, x, &r), QUEUE_FATE_DEADLETTER);
    assert_int_equal(r.dl_id, 0);
    queue_info_t info;
    queue_info(q2, &info);
    assert_int_equal(info.deadlettered, 1);
    assert_int_equal(info.keys, 0);
    queue_set_destroy(s);
}

static void test_park_unpark(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.maxattempts = 1;
    cfg.onpoison = QUEUE_ONPOISON_PARK;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t p1 = push(q, "bad", "p1", 0), p2 = push(q, "bad", "p2", 0);
    uint64_t g1 = push(q, "good", "g1", 0);
    uint64_t t = expect_deliver(q, 1, p1, "bad", "p1");
    queue_retry_t rt;
    assert_int_equal(queue_nack(q, p1, t, 0, 2, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_PARKED);
    queue_keyinfo_t ki;
    assert_int_equal(queue_keyinfo(q, "bad", 3, &ki), QUEUE_KEY_PARKED);
    assert_int_equal(ki.inflight_id, p1);
    assert_int_equal(ki.waiting, 2);
    assert_int_equal(ki.attempt, 1);
    /* Other keys keep flowing; the parked key is not delivered; pushes still queue. */
    uint64_t p3 = push(q, "bad", "p3", 3);
    t = expect_deliver(q, 3, g1, "good", "g1");
    assert_int_equal(queue_ack(q, g1, t, NULL, 0, 3), 1);
    expect_empty(q, 4);
    queue_info_t info;
    queue_info(q, &info);
    assert_int_equal(info.parked_keys, 1);
    assert_int_equal(info.len.waiting, 3);
    assert_int_equal(queue_unpark(q, "good", 4), 0);
    assert_int_equal(queue_unpark(q, "nope", 4), 0);
    assert_int_equal(queue_unpark(q, "bad", 3), 1);
    assert_int_equal(queue_unpark(q, "bad", 3), 0);
    queue_delivery_t d;
    t = next_rev();
    assert_int_equal(queue_deliver(q, 5, 0, t, false, &d), 1);
    assert_int_equal(d.id, p1);
    assert_int_equal(d.attempt, 1); /* starts over */
    assert_int_equal(queue_ack(q, p1, t, NULL, 0, 5), 1);
    t = expect_deliver(q, 6, p2, "bad", "p2");
    assert_int_equal(queue_ack(q, p2, t, NULL, 0, 6), 1);
    expect_deliver(q, 6, p3, "bad", "p3");
    queue_set_destroy(s);
}

/* The default ONPOISON deadletter without a DEADLETTER queue parks the key
 * (nothing is discarded); ONPOISON drop discards. */
static void test_no_silent_loss_by_default(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    assert_int_equal(cfg.onpoison, QUEUE_ONPOISON_DEADLETTER);
    assert_null(cfg.deadletter);
    cfg.maxattempts = 1;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t p1 = push(q, "k", "p1", 0);
    uint64_t t = expect_deliver(q, 1, p1, "k", "p1");
    queue_retry_t rt;
    assert_int_equal(queue_nack(q, p1, t, 0, 2, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_PARKED);
    queue_keyinfo_t ki;
    assert_int_equal(queue_keyinfo(q, "k", 1, &ki), QUEUE_KEY_PARKED);
    assert_int_equal(ki.waiting, 1);
    /* Configured to drop: the next exhausted message is discarded. */
    assert_int_equal(queue_unpark(q, "k", 1), 1);
    cfg.onpoison = QUEUE_ONPOISON_DROP;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    t = next_rev();
    queue_delivery_t d;
    assert_int_equal(queue_deliver(q, 4, 0, t, false, &d), 1);
    assert_int_equal(queue_nack(q, p1, t, 0, 5, next_rev(), &rt), 1);
    assert_int_equal(rt.kind, QUEUE_RETRY_DEADLETTER);
    assert_null(rt.dlq);
    queue_info_t info;
    queue_info(q, &info);
    assert_int_equal(info.keys, 0);
    assert_int_equal(info.deadlettered, 1);
    cfg.onpoison = QUEUE_ONPOISON_DROP + 1;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_EINVAL);
    queue_set_destroy(s);
}

/* ---- push options ------------------------------------------------------------------------------ */

static void test_dedup(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.dedup_ms = 100;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t id1, id2, id3;
    assert_int_equal(push_ex(q, "k", "a", "D", false, 0, 10, &id1), QUEUE_OK);
    assert_int_equal(push_ex(q, "k", "b", "D", false, 0, 50, &id2), QUEUE_DUPLICATE);
    assert_int_equal(id2, id1);
    assert_int_equal(queue_dedup_lookup(q, "D", 1, 50), id1);
    assert_int_equal(queue_dedup_lookup(q, "D", 1, 110), id1); /* the window's last ms */
    assert_int_equal(queue_dedup_lookup(q, "D", 1, 111), 0);
    queue_len_t len;
    queue_len(q, &len);
    assert_int_equal(len.waiting, 1);
    /* The dedup id still stands after the message is done. */
    uint64_t t = expect_deliver(q, 60, id1, "k", "a");
    assert_int_equal(queue_ack(q, id1, t, "R", 1, 61), 1);
    assert_int_equal(push_ex(q, "k", "c", "D", false, 0, 109, &id2), QUEUE_DUPLICATE);
    assert_int_equal(id2, id1);
    /* Timer: the window end; a record applied too early is a no-op. */
    queue_timer_t tm;
    assert_true(queue_next_dedup(q, &tm));
    assert_int_equal(tm.due_ms, 110);
    assert_int_equal(tm.id, id1);
    assert_int_equal(tm.dlen, 1);
    assert_int_equal(queue_dedup_expire(q, "D", 1, 110), 0);
    assert_int_equal(queue_dedup_expire(q, "D", 1, 111), 1);
    assert_int_equal(queue_dedup_expire(q, "D", 1, 111), 0);
    assert_false(queue_next_dedup(q, &tm));
    assert_int_equal(push_ex(q, "k", "d", "D", false, 0, 120, &id3), QUEUE_OK);
    assert_true(id3 > id1);
    /* A window that ended is replaced by a push even before its record. */
    assert_int_equal(push_ex(q, "k", "e", "D", false, 0, 220, &id2), QUEUE_DUPLICATE); /* its last ms */
    assert_int_equal(push_ex(q, "k", "e", "D", false, 0, 221, &id2), QUEUE_OK);
    assert_true(id2 > id3);
    assert_int_equal(queue_dedup_lookup(q, "D", 1, 222), id2);
    /* A full queue records nothing. */
    cfg.maxlen = 2;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    assert_int_equal(push_ex(q, "k", "f", "E", false, 0, 230, &id2), QUEUE_FULL);
    assert_int_equal(queue_dedup_lookup(q, "E", 1, 230), 0);
    /* DEDUP 0: ID is ignored. */
    cfg.dedup_ms = 0;
    cfg.maxlen = 100;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    assert_int_equal(push_ex(q, "k", "g", "F", false, 0, 240, &id2), QUEUE_OK);
    assert_int_equal(push_ex(q, "k", "h", "F", false, 0, 240, &id3), QUEUE_OK);
    assert_true(id3 > id2);
    queue_info_t info;
    queue_info(q, &info);
    assert_int_equal(info.deduped, 3);
    queue_set_destroy(s);
}

static void test_coalesce(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    uint64_t a1 = push(q, "a", "v1", 0), b1 = push(q, "b", "b1", 0), id;
    /* Waiting message: replaced in place, keeps its place and id. */
    assert_int_equal(push_ex(q, "a", "v2-longer-payload", NULL, true, 0, 1, &id), QUEUE_MERGED);
    assert_int_equal(id, a1);
    assert_int_equal(push_ex(q, "a", "v3", NULL, true, 0, 1, &id), QUEUE_MERGED);
    assert_int_equal(id, a1);
    queue_len_t len;
    queue_len(q, &len);
    assert_int_equal(len.waiting, 2);
    uint64_t t = expect_deliver(q, 2, a1, "a", "v3");
    /* In flight: not a coalesce target -> a new waiting message. */
    uint64_t a2;
    assert_int_equal(push_ex(q, "a", "w1", NULL, true, 0, 3, &a2), QUEUE_OK);
    assert_true(a2 > a1);
    assert_int_equal(push_ex(q, "a", "w2", NULL, true, 0, 3, &id), QUEUE_MERGED);
    assert_int_equal(id, a2);
    /* Several waiting (plain pushes): the newest one takes the payload. */
    uint64_t a3 = push(q, "a", "x1", 4);
    assert_int_equal(push_ex(q, "a", "x2!", NULL, true, 0, 4, &id), QUEUE_MERGED);
    assert_int_equal(id, a3);
    /* A full queue still merges (nothing is added) but rejects new messages. */
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.maxlen = 3;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    assert_int_equal(push_ex(q, "a", "x3", NULL, true, 0, 5, &id), QUEUE_MERGED);
    assert_int_equal(push_ex(q, "c", "c1", NULL, true, 0, 5, &id), QUEUE_FULL);
    assert_int_equal(queue_ack(q, a1, t, NULL, 0, 6), 1);
    expect_deliver(q, 7, b1, "b", "b1");
    t = expect_deliver(q, 7, a2, "a", "w2");
    assert_int_equal(queue_ack(q, a2, t, NULL, 0, 8), 1);
    expect_deliver(q, 8, a3, "a", "x3");
    /* With ID, the dedup entry points at the merged message. */
    uint64_t c1 = push(q, "c", "c1", 9);
    assert_int_equal(push_ex(q, "c", "c2", "D", true, 0, 9, &id), QUEUE_MERGED);
    assert_int_equal(id, c1);
    assert_int_equal(queue_dedup_lookup(q, "D", 1, 10), c1);
    queue_info_t info;
    queue_info(q, &info);
    assert_int_equal(info.merged, 6);
    queue_set_destroy(s);
}

static void test_delay(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    uint64_t d1, d2;
    assert_int_equal(push_ex(q, "k", "late", NULL, false, 100, 0, &d1), QUEUE_OK);
    assert_int_equal(push_ex(q, "j", "later", NULL, false, 200, 0, &d2), QUEUE_OK);
    uint64_t k1 = push(q, "k", "now", 1);
    queue_len_t len;
    queue_len(q, &len);
    assert_int_equal(len.delayed, 2);
    assert_int_equal(len.waiting, 1);
    queue_keyinfo_t ki;
    assert_int_equal(queue_keyinfo(q, "j", 1, &ki), QUEUE_KEY_IDLE); /* delayed: no key state */
    queue_timer_t tm;
    assert_true(queue_next_delay(q, &tm));
    assert_int_equal(tm.due_ms, 100);
    assert_int_equal(tm.id, d1);
    /* The undelayed message of the same key goes first: order of availability. */
    uint64_t t = expect_deliver(q, 50, k1, "k", "now");
    expect_empty(q, 60);
    assert_int_equal(queue_promote(q, 100), 0);
    assert_int_equal(queue_promote(q, 101), 1);
    queue_len(q, &len);
    assert_int_equal(len.delayed, 1);
    assert_int_equal(len.waiting, 1);
    expect_empty(q, 101); /* k is in flight */
    assert_int_equal(queue_ack(q, k1, t, NULL, 0, 102), 1);
    expect_deliver(q, 103, d1, "k", "late");
    /* Deliver promotes what is due at its time. */
    expect_empty(q, 200); /* d2 is due at 200: not before 201 */
    expect_deliver(q, 201, d2, "j", "later");
    /* MAXLEN counts delayed messages. */
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.maxlen = 1;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    assert_int_equal(push_ex(q, "z", "1", NULL, false, 10, 300, &d1), QUEUE_OK);
    assert_int_equal(push_ex(q, "z", "2", NULL, false, 0, 300, &d2), QUEUE_FULL);
    queue_set_destroy(s);
}

static void test_limits_and_config(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg, def;
    queue_config(q, &cfg);
    queue_config_defaults(&def);
    assert_int_equal(cfg.maxlen, QUEUE_DEFAULT_MAXLEN);
    assert_int_equal(cfg.lease_ms, QUEUE_DEFAULT_LEASE_MS);
    assert_int_equal(cfg.maxattempts, QUEUE_DEFAULT_MAXATTEMPTS);
    assert_null(cfg.deadletter);
    cfg.maxlen = 0;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_EINVAL);
    cfg.maxlen = QUEUE_MAXLEN_MAX + 1u;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_EINVAL);
    cfg = def;
    cfg.lease_ms = 0;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_EINVAL);
    cfg = def;
    cfg.onpoison = 7;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_EINVAL);
    cfg = def;
    cfg.maxlen = 3;
    cfg.maxperkey = 2;
    cfg.onfull = QUEUE_ONFULL_BLOCK;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t id;
    uint64_t a1 = push(q, "a", "1", 0);
    push(q, "a", "2", 0);
    assert_int_equal(push3(q, "a", "3", 0, &id), QUEUE_LIMIT);
    push(q, "b", "1", 0);
    assert_int_equal(push3(q, "c", "1", 0, &id), QUEUE_FULL);
    /* In flight does not count towards either limit. */
    expect_deliver(q, 1, a1, "a", "1");
    push(q, "a", "3", 1);
    queue_config(q, &cfg);
    assert_int_equal(cfg.onfull, QUEUE_ONFULL_BLOCK);
    /* Empty keys and payloads are fine. */
    cfg.maxlen = 10;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    push(q, "", "", 2);
    queue_keyinfo_t ki;
    assert_int_equal(queue_keyinfo(q, "", 0, &ki), QUEUE_KEY_WAITING);
    assert_int_equal(ki.waiting, 1);
    queue_set_destroy(s);
}

static void test_results(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.resultttl_ms = 1000;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t a = push(q, "a", "x", 0), b = push(q, "b", "y", 0), c = push(q, "c", "z", 0);
    uint64_t ta = expect_deliver(q, 1, a, "a", "x");
    uint64_t tb = expect_deliver(q, 1, b, "b", "y");
    uint64_t tc = expect_deliver(q, 1, c, "c", "z");
    queue_result_t r;
    assert_int_equal(queue_result(q, a, &r), QUEUE_FATE_NONE); /* not done yet */
    assert_int_equal(queue_ack(q, a, ta, "answer", 6, 10), 1);
    assert_int_equal(queue_ack(q, b, tb, NULL, 0, 20), 1);  /* no RESULT: nothing kept */
    assert_int_equal(queue_ack(q, c, tc, "", 0, 30), 1);    /* empty RESULT is a result */
    assert_int_equal(queue_result(q, a, &r), QUEUE_FATE_DONE);
    assert_int_equal(r.rlen, 6);
    assert_memory_equal(r.result, "answer", 6);
    assert_int_equal(r.expire_ms, 1010);
    assert_int_equal(queue_result(q, b, &r), QUEUE_FATE_NONE);
    assert_int_equal(queue_result(q, c, &r), QUEUE_FATE_DONE);
    assert_int_equal(r.rlen, 0);
    queue_timer_t tm;
    assert_true(queue_next_result(q, &tm));
    assert_int_equal(tm.kind, QUEUE_TIMER_RESULT);
    assert_int_equal(tm.id, a);
    assert_int_equal(tm.due_ms, 1010);
    assert_int_equal(queue_result_expire(q, a, 1010), 0);
    assert_int_equal(queue_result_expire(q, a, 1011), 1);
    assert_int_equal(queue_result_expire(q, a, 1010), 0);
    assert_int_equal(queue_result(q, a, &r), QUEUE_FATE_NONE);
    assert_true(queue_next_result(q, &tm));
    assert_int_equal(tm.id, c);
    /* RESULTTTL 0 keeps nothing. */
    cfg.resultttl_ms = 0;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t d = push(q, "d", "w", 40);
    uint64_t td = expect_deliver(q, 41, d, "d", "w");
    assert_int_equal(queue_ack(q, d, td, "r", 1, 42), 1);
    assert_int_equal(queue_result(q, d, &r), QUEUE_FATE_NONE);
    queue_set_destroy(s);
}

/* ---- timers, introspection, registry ------------------------------------------------------------ */

static void test_timers(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q"), *q2 = mkqueue(s, "q2");
    queue_timer_t tm;
    queue_t *which;
    assert_false(queue_next_timer(q, &tm));
    assert_false(queue_set_next_timer(s, &which, &tm));
    uint64_t id;
    assert_int_equal(push_ex(q, "k", "p", "D", false, 500, 0, &id), QUEUE_OK);    /* delay 500, dedup 60000 */
    assert_true(queue_next_timer(q, &tm));
    assert_int_equal(tm.kind, QUEUE_TIMER_DELAY);
    assert_int_equal(tm.due_ms, 500);
    uint64_t i2 = push(q2, "k", "p", 0);
    expect_deliver(q2, 0, i2, "k", "p"); /* lease 30000 */
    assert_true(queue_set_next_timer(s, &which, &tm));
    assert_ptr_equal(which, q);
    assert_int_equal(tm.due_ms, 500);
    assert_int_equal(queue_promote(q, 501), 1);
    assert_true(queue_set_next_timer(s, &which, &tm));
    assert_ptr_equal(which, q2);
    assert_int_equal(tm.kind, QUEUE_TIMER_LEASE);
    assert_int_equal(tm.due_ms, 30000);
    assert_true(queue_next_timer(q, &tm));
    assert_int_equal(tm.kind, QUEUE_TIMER_DEDUP);
    assert_int_equal(tm.due_ms, 60000);
    queue_set_destroy(s);
}

static void test_introspection(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_keyinfo_t ki;
    assert_int_equal(queue_keyinfo(q, "a", 1, &ki), QUEUE_KEY_IDLE);
    assert_int_equal(ki.waiting, 0);
    uint64_t a1 = push(q, "a", "a1", 0);
    push(q, "a", "a2", 0);
    push(q, "a", "a3", 0);
    uint64_t b1 = push(q, "b", "b1", 0);
    push(q, "b", "b2", 0);
    uint64_t c1 = push(q, "c", "c1", 0);
    assert_int_equal(queue_keyinfo(q, "a", 1, &ki), QUEUE_KEY_WAITING);
    assert_int_equal(ki.waiting, 3);
    /* Peek shows what deliver would hand out next, without changing anything. */
    queue_delivery_t pk[8];
    assert_int_equal(queue_peek(q, 8, pk), 3);
    assert_int_equal(pk[0].id, a1);
    assert_int_equal(pk[1].id, b1);
    assert_int_equal(pk[2].id, c1);
    assert_int_equal(queue_peek(q, 2, pk), 2);
    assert_int_equal(queue_peek(q, 0, pk), 0);
    uint64_t t = expect_deliver(q, 7, a1, "a", "a1");
    assert_int_equal(queue_keyinfo(q, "a", 1, &ki), QUEUE_KEY_PROCESSING);
    assert_int_equal(ki.inflight_id, a1);
    assert_int_equal(ki.since_ms, 7);
    assert_int_equal(ki.deadline_ms, 7 + QUEUE_DEFAULT_LEASE_MS);
    assert_int_equal(ki.token, t);
    assert_int_equal(ki.attempt, 1);
    assert_int_equal(ki.waiting, 2);
    assert_int_equal(queue_peek(q, 8, pk), 2);
    assert_int_equal(pk[0].id, b1);
    /* Top keys: most waiting first, ties by key. */
    queue_topkey_t top[4];
    assert_int_equal(queue_topkeys(q, 4, top), 3);
    assert_int_equal(top[0].waiting, 2);
    assert_memory_equal(top[0].key, "a", 1);
    assert_memory_equal(top[1].key, "b", 1);
    assert_int_equal(top[2].waiting, 1);
    assert_int_equal(queue_topkeys(q, 1, top), 1);
    assert_memory_equal(top[0].key, "a", 1);
    assert_int_equal(queue_topkeys(q, 0, top), 0);
    queue_info_t info;
    queue_info(q, &info);
    assert_int_equal(info.keys, 3);
    assert_int_equal(info.ready_keys, 2);
    assert_int_equal(info.len.waiting, 5);
    assert_int_equal(info.len.inflight, 1);
    assert_true(info.bytes > 0);
    size_t nlen;
    assert_memory_equal(queue_name(q, &nlen), "q", 1);
    assert_int_equal(nlen, 1);
    mkqueue(s, "other");
    assert_int_equal(queue_set_count(s), 2);
    assert_int_equal(queue_drop(s, "q", 1), 1);
    assert_int_equal(queue_drop(s, "q", 1), 0);
    assert_null(queue_get(s, "q", 1));
    assert_int_equal(queue_set_count(s), 1);
    queue_set_destroy(s);
}

/* ---- snapshots ---------------------------------------------------------------------------------- */

static void dump_msg(void *arg, const queue_snap_msg_t *m)
{
    char line[256];
    snprintf(line, sizeof line, "M %d %llu %.*s %.*s %u %d %llu %llu %llu\n", m->state,
             (unsigned long long)m->id, (int)m->klen, m->key, (int)m->plen, m->payload, m->attempt,
             m->parked, (unsigned long long)m->token, (unsigned long long)m->since_ms,
             (unsigned long long)m->deadline_ms);
    strcat(arg, line);
}

static void dump_dedup(void *arg, const char *d, size_t dlen, uint64_t id, uint64_t end)
{
    char line[128];
    snprintf(line, sizeof line, "D %.*s %llu %llu\n", (int)dlen, d, (unsigned long long)id,
             (unsigned long long)end);
    strcat(arg, line);
}

static void dump_result(void *arg, uint64_t id, const queue_result_t *r)
{
    char line[128];
    snprintf(line, sizeof line, "R %llu %d %.*s %llu %llu\n", (unsigned long long)id, r->fate,
             (int)r->rlen, r->result, (unsigned long long)r->expire_ms, (unsigned long long)r->dl_id);
    strcat(arg, line);
}

static int cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The queue's state as sorted lines (iteration follows the hash tables,
 * whose keys are random); FIFO order is checked by delivering from both. */
static void dump(const queue_t *q, char *out)
{
    char raw[8192] = "";
    queue_foreach_msg(q, dump_msg, raw);
    queue_foreach_dedup(q, dump_dedup, raw);
    queue_foreach_result(q, dump_result, raw);
    char *lines[128];
    size_t n = 0;
    for (char *p = strtok(raw, "\n"); p; p = strtok(NULL, "\n"))
        lines[n++] = p;
    qsort(lines, n, sizeof *lines, cmp_lines);
    out[0] = 0;
    for (size_t i = 0; i < n; i++) {
        strcat(out, lines[i]);
        strcat(out, "\n");
    }
}

struct load_ctx {
    queue_t *dst;
};

static void load_msg_cb(void *arg, const queue_snap_msg_t *m)
{
    queue_load_msg(((struct load_ctx *)arg)->dst, m);
}

static void load_dedup_cb(void *arg, const char *d, size_t dlen, uint64_t id, uint64_t end)
{
    queue_load_dedup(((struct load_ctx *)arg)->dst, d, dlen, id, end);
}

static void load_result_cb(void *arg, uint64_t id, const queue_result_t *r)
{
    queue_load_result(((struct load_ctx *)arg)->dst, id, r);
}

static void test_snapshot_roundtrip(void **state)
{
    (void)state;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.onpoison = QUEUE_ONPOISON_PARK;
    cfg.maxattempts = 1;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    uint64_t id;
    uint64_t a1 = push(q, "a", "a1", 0);
    push(q, "a", "a2", 0);
    uint64_t b1 = push(q, "b", "b1", 0);
    push(q, "b", "b2", 0);
    uint64_t c1 = push(q, "c", "c1", 0);
    push(q, "d", "d1", 0);
    push_ex(q, "e", "e1", "X", false, 0, 0, &id);
    push_ex(q, "f", "f1", NULL, false, 1000, 0, &id);
    uint64_t ta = expect_deliver(q, 1, a1, "a", "a1");
    (void)ta;
    uint64_t tb = expect_deliver(q, 1, b1, "b", "b1");
    queue_retry_t rt;
    assert_int_equal(queue_nack(q, b1, tb, 0, 2, next_rev(), &rt), 1); /* b parked */
    uint64_t tc = expect_deliver(q, 3, c1, "c", "c1");
    assert_int_equal(queue_ack(q, c1, tc, "res", 3, 4), 1);
    char before[8192], after[8192];
    dump(q, before);

    queue_set_t *s2 = queue_set_create();
    queue_t *r = mkqueue(s2, "q");
    assert_int_equal(queue_configure(r, &cfg), QUEUE_OK);
    struct load_ctx ctx = {r};
    queue_foreach_msg(q, load_msg_cb, &ctx);
    queue_foreach_dedup(q, load_dedup_cb, &ctx);
    queue_foreach_result(q, load_result_cb, &ctx);
    dump(r, after);
    assert_string_equal(before, after);
    queue_len_t l1, l2;
    queue_len(q, &l1);
    queue_len(r, &l2);
    assert_memory_equal(&l1, &l2, sizeof l1);
    queue_info_t i1, i2;
    queue_info(q, &i1);
    queue_info(r, &i2);
    assert_int_equal(i1.parked_keys, i2.parked_keys);
    assert_int_equal(i1.ready_keys, i2.ready_keys);
    /* Both behave the same from here. */
    for (int i = 0; i < 6; i++) {
        queue_delivery_t d1, d2;
        uint64_t tok = next_rev();
        int g1 = queue_deliver(q, 2000, 0, tok, false, &d1);
        int g2 = queue_deliver(r, 2000, 0, tok, false, &d2);
        assert_int_equal(g1, g2);
        if (!g1)
            break;
        assert_int_equal(d1.id, d2.id);
    }
    queue_timer_t t1, t2;
    assert_true(queue_next_timer(q, &t1));
    assert_true(queue_next_timer(r, &t2));
    assert_int_equal(t1.kind, t2.kind);
    assert_int_equal(t1.due_ms, t2.due_ms);
    assert_int_equal(t1.id, t2.id);
    queue_set_destroy(s);
    queue_set_destroy(s2);
}

/* ---- randomized model test ----------------------------------------------------------------------- */

#define MK 6          /* keys */
#define MMAX 200000   /* ids (revisions) */
#define MRING 256     /* per-key FIFO ring (>= MAXLEN + 1) */

enum { MS_NONE, MS_WAIT, MS_FLIGHT, MS_DELAYED, MS_DONE, MS_MERGED, MS_DEDUPED, MS_DEAD };

typedef struct mmsg_s {
    uint8_t st;
    uint8_t key;
    uint32_t attempt;
    uint64_t due;
    char payload[24];
} mmsg_t;

typedef struct mkey_s {
    uint64_t ring[MRING];
    size_t h, n;        /* FIFO: head index and length (in-flight head included) */
    bool inflight, parked;
    uint64_t token, deadline, last_delivered;
} mkey_t;

typedef struct model_s {
    mmsg_t *m;          /* by id */
    mkey_t k[MK];
    uint64_t dedup_id[4], dedup_end[4];
    uint64_t now;
    size_t waiting, delayed, inflight, dead;
    uint32_t maxlen, maxattempts;
    bool park;
} model_t;

static const char *kname[MK] = {"k0", "k1", "k2", "k3", "k4", "k5"};
static const char *dname[4] = {"d0", "d1", "d2", "d3"};

static uint64_t rnd_state;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static uint64_t mk_head(const mkey_t *k)
{
    return k->ring[k->h % MRING];
}

static void mk_append(model_t *m, int key, uint64_t id)
{
    mkey_t *k = &m->k[key];
    assert_true(k->n < MRING);
    k->ring[(k->h + k->n) % MRING] = id;
    k->n++;
    m->m[id].st = MS_WAIT;
    m->waiting++;
}

static void mk_pop(mkey_t *k)
{
    k->h++;
    k->n--;
}

static void m_promote(model_t *m, uint64_t now, uint64_t maxid)
{
    for (;;) {
        uint64_t best = 0;
        for (uint64_t i = 1; i <= maxid; i++)
            if (m->m[i].st == MS_DELAYED && m->m[i].due < now &&
                (best == 0 || m->m[i].due < m->m[best].due))
                best = i;
        if (best == 0)
            return;
        m->delayed--;
        mk_append(m, m->m[best].key, best);
    }
}

/* Check the queue against the model: counts, and every key's state. */
static void m_check(const model_t *m, const queue_t *q)
{
    queue_len_t len;
    queue_len(q, &len);
    assert_int_equal(len.waiting, m->waiting);
    assert_int_equal(len.inflight, m->inflight);
    assert_int_equal(len.delayed, m->delayed);
    for (int i = 0; i < MK; i++) {
        const mkey_t *k = &m->k[i];
        queue_keyinfo_t ki;
        int st = queue_keyinfo(q, kname[i], 2, &ki);
        size_t waiting = k->n - (k->inflight ? 1 : 0);
        assert_int_equal(ki.waiting, waiting);
        /* <= 1 in flight per key; the in-flight one is the model's head. */
        if (k->inflight) {
            assert_int_equal(st, QUEUE_KEY_PROCESSING);
            assert_int_equal(ki.inflight_id, mk_head(k));
            assert_int_equal(ki.token, k->token);
            assert_int_equal(ki.deadline_ms, k->deadline);
        } else if (k->parked) {
            assert_int_equal(st, QUEUE_KEY_PARKED);
            assert_int_equal(ki.inflight_id, mk_head(k));
        } else {
            assert_int_equal(st, k->n ? QUEUE_KEY_WAITING : QUEUE_KEY_IDLE);
        }
    }
}

/* The model's choice for deliver: the ready key with the oldest head. */
static int m_pick(const model_t *m)
{
    int best = -1;
    for (int i = 0; i < MK; i++) {
        const mkey_t *k = &m->k[i];
        if (k->n == 0 || k->inflight || k->parked)
            continue;
        if (best < 0 || mk_head(k) < mk_head(&m->k[best]))
            best = i;
    }
    return best;
}

/* A delivery came back (nack or lease): the model's give_back. */
static void m_give_back(model_t *m, int key, uint64_t delay, queue_t *dlq, const queue_retry_t *rt)
{
    mkey_t *k = &m->k[key];
    uint64_t id = mk_head(k);
    bool exhausted = m->maxattempts && m->m[id].attempt >= m->maxattempts;
    if (!exhausted && delay) {
        assert_int_equal(rt->kind, QUEUE_RETRY_LATER);
        k->token = 0;
        k->deadline = m->now + delay;
        return;
    }
    k->inflight = false;
    m->inflight--;
    m->m[id].st = MS_WAIT;
    if (!exhausted) {
        assert_int_equal(rt->kind, QUEUE_RETRY_READY);
        m->waiting++;
    } else if (m->park) {
        assert_int_equal(rt->kind, QUEUE_RETRY_PARKED);
        k->parked = true;
        m->waiting++;
    } else {
        assert_int_equal(rt->kind, QUEUE_RETRY_DEADLETTER);
        assert_ptr_equal(rt->dlq, dlq);
        m->m[id].st = MS_DEAD;
        m->dead++;
        mk_pop(k);
    }
}

static void run_model(uint64_t seed, int ops, bool park)
{
    rnd_state = seed;
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.maxlen = 40;
    cfg.maxattempts = 3;
    cfg.lease_ms = 50;
    cfg.dedup_ms = 30;
    cfg.resultttl_ms = 20;
    cfg.onpoison = park ? QUEUE_ONPOISON_PARK : QUEUE_ONPOISON_DEADLETTER;
    cfg.deadletter = "dlq";
    cfg.dl_len = 3;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    model_t *m = calloc(1, sizeof *m);
    m->m = calloc(MMAX, sizeof *m->m);
    m->maxlen = cfg.maxlen;
    m->maxattempts = cfg.maxattempts;
    m->park = park;
    uint64_t pushed = 0;
    for (int op = 0; op < ops; op++) {
        uint64_t r = rnd() % 100;
        if (r < 3)
            m->now += 1 + rnd() % 20;
        if (r < 35) {
            /* Push: plain, coalesce, dedup, delay. */
            int key = (int)(rnd() % MK);
            int d = rnd() % 4 == 0 ? (int)(rnd() % 4) : -1;
            bool co = rnd() % 3 == 0;
            uint64_t delay = rnd() % 8 == 0 ? 1 + rnd() % 30 : 0;
            char payload[24];
            snprintf(payload, sizeof payload, "p%d", op);
            uint64_t rev = g_rev + 1;
            assert_true(rev < MMAX);
            uint64_t id = 0;
            int st = push_ex(q, kname[key], payload, d >= 0 ? dname[d] : NULL, co, delay, m->now, &id);
            m_promote(m, m->now, rev);
            mkey_t *k = &m->k[key];
            size_t kwait = k->n - (k->inflight ? 1 : 0);
            int want;
            uint64_t want_id = rev;
            if (d >= 0 && m->dedup_id[d] && m->dedup_end[d] >= m->now) {
                want = QUEUE_DUPLICATE;
                want_id = m->dedup_id[d];
                m->m[rev].st = MS_DEDUPED;
            } else if (co && kwait > 0) {
                want = QUEUE_MERGED;
                want_id = k->ring[(k->h + k->n - 1) % MRING];
                strcpy(m->m[want_id].payload, payload);
                m->m[rev].st = MS_MERGED;
            } else if (m->waiting + m->delayed >= m->maxlen) {
                want = QUEUE_FULL;
            } else {
                want = QUEUE_OK;
                m->m[rev].key = (uint8_t)key;
                strcpy(m->m[rev].payload, payload);
                if (delay) {
                    m->m[rev].st = MS_DELAYED;
                    m->m[rev].due = m->now + delay;
                    m->delayed++;
                } else {
                    mk_append(m, key, rev);
                }
                pushed++;
            }
            assert_int_equal(st, want);
            if (want != QUEUE_FULL)
                assert_int_equal(id, want_id);
            if (d >= 0 && (want == QUEUE_OK || want == QUEUE_MERGED)) {
                m->dedup_id[d] = want_id;
                m->dedup_end[d] = m->now + cfg.dedup_ms;
            }
        } else if (r < 60) {
            /* Deliver: the oldest ready head, never a done message. */
            queue_delivery_t dv;
            uint64_t tok = next_rev();
            bool noack = rnd() % 10 == 0;
            int got = queue_deliver(q, m->now, 0, tok, noack, &dv);
            m_promote(m, m->now, tok);
            int key = m_pick(m);
            assert_int_equal(got, key >= 0);
            if (key >= 0) {
                mkey_t *k = &m->k[key];
                uint64_t id = mk_head(k);
                assert_int_equal(dv.id, id);
                assert_int_equal(m->m[id].st, MS_WAIT);
                assert_memory_equal(dv.key, kname[key], 2);
                assert_int_equal(dv.plen, strlen(m->m[id].payload));
                assert_memory_equal(dv.payload, m->m[id].payload, dv.plen);
                m->m[id].attempt++;
                assert_int_equal(dv.attempt, m->m[id].attempt);
                assert_true(tok > k->last_delivered); /* tokens increase per key */
                k->last_delivered = tok;
                m->waiting--;
                if (noack) {
                    m->m[id].st = MS_DONE;
                    mk_pop(k);
                } else {
                    m->m[id].st = MS_FLIGHT;
                    k->inflight = true;
                    k->token = tok;
                    k->deadline = m->now + cfg.lease_ms;
                    m->inflight++;
                }
            }
        } else if (r < 90) {
            /* Ack / stale ack / nack / extend on a random key. */
            int key = (int)(rnd() % MK);
            mkey_t *k = &m->k[key];
            uint64_t id = k->n ? mk_head(k) : 0; /* 0 is no message's id */
            bool valid = k->inflight && k->token != 0;
            bool stale = !valid || rnd() % 5 == 0;
            uint64_t tok = stale ? (k->token ? k->token - 1 - rnd() % 3 : rnd() % (g_rev + 1)) : k->token;
            int what = (int)(rnd() % 10);
            if (what < 6) {
                bool res = rnd() % 2;
                int got = queue_ack(q, id, tok, res ? "R" : NULL, res, m->now);
                bool ok = valid && !stale;
                assert_int_equal(got, ok);
                if (ok) {
                    m->m[id].st = MS_DONE;
                    mk_pop(k);
                    k->inflight = false;
                    m->inflight--;
                    queue_result_t qr;
                    assert_int_equal(queue_result(q, id, &qr), res ? QUEUE_FATE_DONE : QUEUE_FATE_NONE);
                }
            } else if (what < 9) {
                uint64_t delay = rnd() % 3 == 0 ? 1 + rnd() % 20 : 0;
                queue_retry_t rt;
                int got = queue_nack(q, id, tok, delay, m->now, next_rev(), &rt);
                assert_int_equal(got, valid && !stale);
                if (got)
                    m_give_back(m, key, delay, queue_get(s, "dlq", 3), &rt);
            } else {
                uint64_t ms = rnd() % 100;
                int got = queue_extend(q, id, tok, ms, m->now);
                assert_int_equal(got, valid && !stale);
                if (got)
                    k->deadline = m->now + ms;
            }
        } else if (r < 95) {
            /* The writer's timers: everything due by now, as records. */
            m->now += rnd() % 30;
            queue_timer_t tm;
            while (queue_next_timer(q, &tm) && tm.due_ms < m->now) {
                if (tm.kind == QUEUE_TIMER_LEASE) {
                    int key = m->m[tm.id].key;
                    assert_true(m->k[key].inflight);
                    assert_int_equal(mk_head(&m->k[key]), tm.id);
                    assert_int_equal(m->k[key].deadline, tm.due_ms);
                    queue_retry_t rt;
                    bool delayed_nack = m->k[key].token == 0;
                    /* A stale copy of the record first: a no-op. */
                    assert_int_equal(queue_redeliver(q, tm.id, tm.token + 1, m->now, next_rev(), &rt), 0);
                    assert_int_equal(queue_redeliver(q, tm.id, tm.token, m->now, next_rev(), &rt), 1);
                    if (delayed_nack) {
                        assert_int_equal(rt.kind, QUEUE_RETRY_READY);
                        m->k[key].inflight = false;
                        m->inflight--;
                        m->m[tm.id].st = MS_WAIT;
                        m->waiting++;
                    } else {
                        m_give_back(m, key, 0, queue_get(s, "dlq", 3), &rt);
                    }
                } else if (tm.kind == QUEUE_TIMER_DELAY) {
                    assert_true(queue_promote(q, m->now) > 0);
                    m_promote(m, m->now, g_rev);
                } else if (tm.kind == QUEUE_TIMER_DEDUP) {
                    assert_int_equal(queue_dedup_expire(q, tm.dedup_id, tm.dlen, m->now), 1);
                } else {
                    assert_int_equal(tm.kind, QUEUE_TIMER_RESULT);
                    assert_int_equal(queue_result_expire(q, tm.id, m->now), 1);
                }
            }
        } else {
            int key = (int)(rnd() % MK);
            mkey_t *k = &m->k[key];
            int got = queue_unpark(q, kname[key], 2);
            assert_int_equal(got, k->parked);
            if (k->parked) {
                k->parked = false;
                m->m[mk_head(k)].attempt = 0;
            }
        }
        m_check(m, q);
        /* Peek: the ready heads, oldest first, the first being deliver's pick. */
        queue_delivery_t pk[MK];
        size_t np = queue_peek(q, MK, pk);
        size_t nready = 0;
        for (int i = 0; i < MK; i++)
            nready += m->k[i].n && !m->k[i].inflight && !m->k[i].parked;
        assert_int_equal(np, nready);
        for (size_t i = 0; i < np; i++) {
            assert_int_equal(m->m[pk[i].id].st, MS_WAIT);
            if (i > 0)
                assert_true(pk[i].id > pk[i - 1].id);
        }
        if (np)
            assert_int_equal(pk[0].id, mk_head(&m->k[m_pick(m)]));
    }
    /* Nothing lost: every id the model handed out is accounted for, and the
     * queue holds exactly the waiting/in-flight/delayed ones. */
    size_t n_wait = 0, n_flight = 0, n_delayed = 0, n_dead = 0;
    for (uint64_t i = 1; i <= g_rev && i < MMAX; i++) {
        n_wait += m->m[i].st == MS_WAIT;
        n_flight += m->m[i].st == MS_FLIGHT;
        n_delayed += m->m[i].st == MS_DELAYED;
        n_dead += m->m[i].st == MS_DEAD;
    }
    assert_int_equal(n_wait, m->waiting);
    assert_int_equal(n_flight, m->inflight);
    assert_int_equal(n_delayed, m->delayed);
    assert_int_equal(n_dead, m->dead);
    if (!park) {
        queue_t *dlq = queue_get(s, "dlq", 3);
        queue_len_t dl;
        if (dlq) {
            queue_len(dlq, &dl);
            assert_int_equal(dl.waiting, m->dead);
        } else {
            assert_int_equal(m->dead, 0);
        }
    }
    /* Show that the run reached every path (a silent model test proves little). */
    queue_info_t info;
    queue_info(q, &info);
    printf("model seed %llu: pushed %llu merged %llu deduped %llu delivered %llu acked %llu "
           "nacked %llu redelivered %llu deadlettered %llu parked %llu\n",
           (unsigned long long)seed, (unsigned long long)pushed, (unsigned long long)info.merged,
           (unsigned long long)info.deduped, (unsigned long long)info.delivered,
           (unsigned long long)info.acked, (unsigned long long)info.nacked,
           (unsigned long long)info.redelivered, (unsigned long long)info.deadlettered,
           (unsigned long long)info.parked);
    assert_true(info.merged > 0 && info.deduped > 0 && info.nacked > 0 && info.redelivered > 0);
    assert_true(info.deadlettered + info.parked > 0);
    free(m->m);
    free(m);
    queue_set_destroy(s);
}

static void test_model_random(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        g_rev = 0;
        run_model(0x9E3779B97F4A7C15ull * seed, 6000, seed % 2 == 0);
    }
}

/* ---- memory ---------------------------------------------------------------------------------------- */

static void measure(size_t nmsgs, size_t nkeys)
{
    queue_set_t *s = queue_set_create();
    queue_t *q = mkqueue(s, "q");
    queue_config_t cfg;
    queue_config(q, &cfg);
    cfg.maxlen = QUEUE_MAXLEN_MAX;
    assert_int_equal(queue_configure(q, &cfg), QUEUE_OK);
    struct mallinfo2 before = mallinfo2();
    char key[32], payload[64];
    memset(payload, 'p', sizeof payload);
    for (size_t i = 0; i < nmsgs; i++) {
        snprintf(key, sizeof key, "key-%012zu", i % nkeys);
        queue_push_t p = {.key = key, .klen = 16, .payload = payload, .plen = sizeof payload};
        uint64_t id;
        assert_int_equal(queue_push(q, &p, i + 1, 0, &id), QUEUE_OK);
    }
    struct mallinfo2 after = mallinfo2();
    queue_info_t info;
    queue_info(q, &info);
    size_t data = nmsgs * 64 + nkeys * 16;
    double est = ((double)info.bytes - (double)data) / (double)nmsgs;
    double meas = ((double)(after.uordblks + after.hblkhd) - (double)(before.uordblks + before.hblkhd) -
                   (double)data) / (double)nmsgs;
    printf("queue memory: %zu waiting messages (16-byte keys, 64-byte payloads), %zu keys: "
           "overhead %.1f bytes/message by queue_info, %.1f by mallinfo2\n",
           nmsgs, nkeys, est, meas);
#if !defined(__SANITIZE_ADDRESS__)
    assert_true(est <= 100.0);
#endif
    queue_set_destroy(s);
}

static void test_memory_overhead(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    size_t n = 100000; /* ASan's allocator: the figure is meaningless, keep it quick */
#else
    size_t n = 1000000;
#endif
    measure(n, n);
    measure(n, 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_deliver_ack),
        cmocka_unit_test(test_backoff_delay),
        cmocka_unit_test(test_pause_resume),
        cmocka_unit_test(test_redrive_cancel_expire),
        cmocka_unit_test(test_rate_limits),
        cmocka_unit_test(test_keyconcurrency),
        cmocka_unit_test(test_fairness),
        cmocka_unit_test(test_keyconcurrency_random),
        cmocka_unit_test(test_retry_policy),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_oldest_head_first),
        cmocka_unit_test(test_noack),
        cmocka_unit_test(test_nack_extend_redeliver),
        cmocka_unit_test(test_deadletter),
        cmocka_unit_test(test_park_unpark),
        cmocka_unit_test(test_no_silent_loss_by_default),
        cmocka_unit_test(test_dedup),
        cmocka_unit_test(test_coalesce),
        cmocka_unit_test(test_delay),
        cmocka_unit_test(test_limits_and_config),
        cmocka_unit_test(test_results),
        cmocka_unit_test(test_timers),
        cmocka_unit_test(test_introspection),
        cmocka_unit_test(test_snapshot_roundtrip),
        cmocka_unit_test(test_model_random),
        cmocka_unit_test(test_memory_overhead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
