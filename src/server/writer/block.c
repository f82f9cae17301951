/*
 * block.c -- parked connections, their wait lists and deadlines; see block.h.
 *
 * Deadlines live in one binary min-heap per server (heap.h: each waiter
 * knows its slot), served by one timer set to the earliest deadline, so a
 * thousand blocked clients cost one timer and O(log n) per park or wake.
 *
 * Invariant: a parked waiter is in exactly one wait list, in the list of
 * all waiters, and, iff it has a deadline, in the heap. The client is
 * never looked into: hooks.park, hooks.answer and hooks.resume (server.h)
 * tell the layers above what happened to it.
 *
 * Read-only. Once the log has failed (server_readonly()) no record is made any
 * more, so nothing a waiter waits for (a delivery, room, a message's fate,
 * a grant) can happen: every parked waiter is answered -READONLY at once
 * instead of at its deadline. The timer does it, at the start of its next
 * turn (block_readonly() only arms it for "now": it may be called from
 * inside a record's apply, while a wait list is being served); a
 * connection that parks while read-only is answered the same way. While
 * armed for that, the timer is armed at deadline 0 (no real deadline is 0).
 *
 * The state is s->writer.block (writer.h): blocked_clients counts the
 * parked waiters and blocked_by_kind[k] those of kind k (so they sum to
 * blocked_clients).
 */
#include "block.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "turn.h"

_Static_assert(WRITER_BLOCK_KINDS == BLOCK_KINDS, "writer.h sizes blocked_by_kind for every block kind");

#define WAIT_HEAP_CAP_MIN 64 /* the first array: a few blocked clients never regrow it */

#define WAITER_OF(n) ((waiter_t *)(void *)((char *)(n) - offsetof(waiter_t, hn)))

/* Deadline only: equal deadlines keep the places the heap leaves them. */
static bool waiter_less(const ordo_heap_node_t *a, const ordo_heap_node_t *b)
{
    return WAITER_OF(a)->deadline_ms < WAITER_OF(b)->deadline_ms;
}

/* The waiter with the earliest deadline, or NULL. */
static waiter_t *first_waiter(const server_t *s)
{
    ordo_heap_node_t *n = ordo_heap_peek(&s->writer.block.wait_heap);
    return n ? WAITER_OF(n) : NULL;
}

static void on_wait_timer(writer_timer_t *t);

static void arm_timer(server_t *s)
{
    if (server_readonly(s) != NULL && s->writer.block.blocked_clients > 0) {
        writer_timer_arm(&s->writer.block.timer, 0); /* at once (the next turn) */
        return;
    }
    const waiter_t *first = first_waiter(s);
    if (first == NULL)
        writer_timer_stop(&s->writer.block.timer);
    else
        writer_timer_arm(&s->writer.block.timer, first->deadline_ms);
}

static void list_remove(waiter_t *w)
{
    ordo_list_remove(w->list, &w->ln); /* w->list stays: on_cancel may look at the list it left */
}

static void list_append(waiter_t *w, wait_list_t *list)
{
    w->list = list;
    ordo_list_push_back(list, &w->ln);
}

/* The invariant of the header comment, for one parked waiter. */
static void check_parked(const server_t *s, const waiter_t *w)
{
    assert(w->srv == s && w->client != NULL);
    assert(ordo_list_linked(&w->all_ln, &s->writer.block.all));
    assert(ordo_list_linked(&w->ln, w->list)); /* on its list, and (list.h) on no other */
    assert(ordo_heap_linked(&w->hn) == (w->deadline_ms != 0));
    assert(w->kind >= 0 && w->kind < BLOCK_KINDS && s->writer.block.blocked_by_kind[w->kind] > 0);
    assert(s->writer.block.blocked_clients >= s->writer.block.blocked_by_kind[w->kind]);
    (void)s;
    (void)w;
}

static void unlink_waiter(server_t *s, waiter_t *w)
{
    check_parked(s, w);
    list_remove(w);
    if (ordo_heap_linked(&w->hn))
        ordo_heap_remove(&s->writer.block.wait_heap, &w->hn);
    ordo_list_remove(&s->writer.block.all, &w->all_ln);
    s->writer.block.blocked_clients--;
    s->writer.block.blocked_by_kind[w->kind]--;
}

const char *block_kind_name(int kind)
{
    static const char *const names[BLOCK_KINDS] = {"pull", "push", "call", "result", "lock", "elect", "cluster"};
    return kind >= 0 && kind < BLOCK_KINDS ? names[kind] : "unknown";
}

waiter_t *block_wait(server_t *s, struct conn_s *client, wait_list_t *list, uint64_t deadline_ms, int kind)
{
    assert(client != NULL);
    assert(kind >= 0 && kind < BLOCK_KINDS && list != NULL);
    waiter_t *w = ordo_xcalloc(1, sizeof *w);
    w->srv = s;
    w->client = client;
    w->deadline_ms = deadline_ms;
    w->kind = kind;
    s->writer.block.blocked_by_kind[kind]++;
    ordo_heap_node_init(&w->hn);
    list_append(w, list);
    ordo_list_push_back(&s->writer.block.all, &w->all_ln);
    s->writer.block.blocked_clients++;
    if (deadline_ms != 0)
        ordo_heap_xpush(&s->writer.block.wait_heap, &w->hn);
    check_parked(s, w);
    s->hooks.park(client, w); /* one blocking command at a time per client: the hook asserts it */
    arm_timer(s);
    return w;
}

/* Unlink and free w, then resume its client. */
static void end_wait(server_t *s, waiter_t *w)
{
    struct conn_s *client = w->client;
    unlink_waiter(s, w);
    free(w);
    arm_timer(s);
    s->hooks.resume(client);
}

void block_answer(server_t *s, waiter_t *w, const outcome_t *o)
{
    check_parked(s, w);
    s->hooks.answer(s, w->client, o);
    end_wait(s, w);
}

void block_answer_error(server_t *s, waiter_t *w, const char *text)
{
    outcome_t o = {.kind = OUTCOME_ERROR, .error.text = text};
    block_answer(s, w, &o);
}

void block_move(waiter_t *w, wait_list_t *to)
{
    assert(to != w->list);
    list_remove(w);
    list_append(w, to);
}

void block_cancel(server_t *s, waiter_t *w)
{
    unlink_waiter(s, w);
    if (w->on_cancel)
        w->on_cancel(w);
    free(w);
    arm_timer(s);
}

/* The longest timeout text a family writes (a message id and a time). */
#define BLOCK_TIMEOUT_TEXT_MAX 256

static void time_out(server_t *s, waiter_t *w)
{
    char text[BLOCK_TIMEOUT_TEXT_MAX];
    outcome_t o = {0};
    w->on_timeout(w, &o, text, sizeof text); /* releases the family's data */
    assert(o.kind != 0);
    block_answer(s, w, &o);
}

/* Answer every parked waiter the error "<prefix><why>" now (but a CLUSTER
 * change's if keep_cluster): what they wait for cannot happen here. Each
 * releases its family's data as for a disconnect. */
static void answer_all(server_t *s, const char *prefix, const char *why, bool keep_cluster)
{
    char text[512];
    snprintf(text, sizeof text, "%s%s", prefix, why);
    outcome_t o = {.kind = OUTCOME_ERROR, .error.text = text};
    ordo_list_node_t *n = s->writer.block.all.head;
    while (n != NULL) {
        waiter_t *w = ORDO_LIST_ENTRY(n, waiter_t, all_ln);
        n = n->next;
        if (keep_cluster && w->kind == BLOCK_CLUSTER)
            continue;
        if (w->on_cancel)
            w->on_cancel(w); /* releases the handler's data, as for a disconnect */
        block_answer(s, w, &o);
    }
}

static void on_wait_timer(writer_timer_t *t)
{
    server_t *s = t->data;
    uint64_t now = server_tick(s);
    if (server_readonly(s) != NULL) /* see the header */
        answer_all(s, "READONLY the log cannot be written, so what this command waits for cannot happen: ",
                   server_readonly(s), false);
    for (waiter_t *w = first_waiter(s); w != NULL && w->deadline_ms < now; w = first_waiter(s))
        time_out(s, w);
    arm_timer(s);
    turn_run_resumed(s);
    turn_flush(s);
}

void block_readonly(server_t *s) { arm_timer(s); }

void block_notleader(server_t *s, const char *leader)
{
    answer_all(s, "NOTLEADER ", leader, true);
    arm_timer(s);
}

void block_init(server_t *s)
{
    ordo_heap_init(&s->writer.block.wait_heap, waiter_less, WAIT_HEAP_CAP_MIN, ORDO_HEAP_KEEP);
    writer_timer_init(&s->writer.block.timer, s->loop, s, on_wait_timer, s);
}

void block_close_handles(server_t *s)
{
    writer_timer_close(&s->writer.block.timer);
}
