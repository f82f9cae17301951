/*
 * block.c -- parked connections, their wait lists and deadlines; see block.h.
 *
 * Deadlines live in one binary min-heap per server (each waiter knows its
 * slot), served by one timer set to the earliest deadline, so a thousand
 * blocked clients cost one timer and O(log n) per park or wake.
 *
 * Invariant: a waiter is in exactly one wait list and, iff it has a
 * deadline, in the heap; conn->waiter points back to it while parked.
 */
#include "block.h"

#include <stdlib.h>

#include "conn.h"

static void heap_set(server_t *s, size_t i, waiter_t *w)
{
    s->wait_heap[i] = w;
    w->slot = i;
}

static void heap_up(server_t *s, size_t i)
{
    waiter_t *w = s->wait_heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (s->wait_heap[p]->deadline_ms <= w->deadline_ms)
            break;
        heap_set(s, i, s->wait_heap[p]);
        i = p;
    }
    heap_set(s, i, w);
}

static void heap_down(server_t *s, size_t i)
{
    waiter_t *w = s->wait_heap[i];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = l;
        if (l >= s->wait_heap_len)
            break;
        if (r < s->wait_heap_len && s->wait_heap[r]->deadline_ms < s->wait_heap[l]->deadline_ms)
            m = r;
        if (s->wait_heap[m]->deadline_ms >= w->deadline_ms)
            break;
        heap_set(s, i, s->wait_heap[m]);
        i = m;
    }
    heap_set(s, i, w);
}

static void heap_remove(server_t *s, waiter_t *w)
{
    size_t i = w->slot;
    if (i == SIZE_MAX)
        return;
    waiter_t *last = s->wait_heap[--s->wait_heap_len];
    if (last != w) {
        heap_set(s, i, last);
        heap_down(s, i);
        heap_up(s, last->slot);
    }
    w->slot = SIZE_MAX;
}

static void on_wait_timer(uv_timer_t *t);

static void arm_timer(server_t *s)
{
    if (s->wait_heap_len == 0) {
        uv_timer_stop(&s->wait_timer);
        s->wait_timer_at_ms = 0;
        return;
    }
    uint64_t next = s->wait_heap[0]->deadline_ms;
    if (s->wait_timer_at_ms == next)
        return;
    uint64_t now = server_now_ms();
    s->wait_timer_at_ms = next;
    uv_timer_start(&s->wait_timer, on_wait_timer, next > now ? next - now : 0, 0);
}

static void unlink_waiter(server_t *s, waiter_t *w)
{
    wait_list_t *l = w->list;
    if (w->prev)
        w->prev->next = w->next;
    else
        l->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        l->tail = w->prev;
    l->len--;
    heap_remove(s, w);
    w->conn->waiter = NULL;
    s->blocked_clients--;
}

waiter_t *block_wait(server_t *s, conn_t *conn, wait_list_t *list, uint64_t deadline_ms)
{
    waiter_t *w = ordo_xcalloc(1, sizeof *w);
    w->conn = conn;
    w->list = list;
    w->deadline_ms = deadline_ms;
    w->slot = SIZE_MAX;
    w->prev = list->tail;
    if (list->tail)
        list->tail->next = w;
    else
        list->head = w;
    list->tail = w;
    list->len++;
    conn->waiter = w;
    s->blocked_clients++;
    if (deadline_ms != 0) {
        if (s->wait_heap_len == s->wait_heap_cap) {
            s->wait_heap_cap = s->wait_heap_cap ? 2 * s->wait_heap_cap : 64;
            s->wait_heap = ordo_xrealloc(s->wait_heap, s->wait_heap_cap * sizeof *s->wait_heap);
        }
        heap_set(s, s->wait_heap_len++, w);
        heap_up(s, w->slot);
        arm_timer(s);
    }
    return w;
}

void block_done(server_t *s, waiter_t *w)
{
    conn_t *c = w->conn;
    unlink_waiter(s, w);
    free(w);
    arm_timer(s);
    conn_resume(c);
    conn_mark_dirty(c);
}

void block_conn_closed(server_t *s, conn_t *conn)
{
    waiter_t *w = conn->waiter;
    if (w == NULL)
        return;
    unlink_waiter(s, w);
    if (w->on_cancel)
        w->on_cancel(w);
    free(w);
    arm_timer(s);
}

static void time_out(server_t *s, waiter_t *w)
{
    w->on_timeout(w); /* writes the reply */
    block_done(s, w);
}

static void on_wait_timer(uv_timer_t *t)
{
    server_t *s = t->data;
    s->wait_timer_at_ms = 0;
    uint64_t now = server_tick(s);
    while (s->wait_heap_len > 0 && s->wait_heap[0]->deadline_ms <= now)
        time_out(s, s->wait_heap[0]);
    arm_timer(s);
    conn_run_resumed(s);
    conn_flush_dirty(s);
}

void block_list_timeout_all(server_t *s, wait_list_t *list)
{
    while (list->head != NULL)
        time_out(s, list->head);
}

void block_init(server_t *s)
{
    uv_timer_init(s->loop, &s->wait_timer);
    s->wait_timer.data = s;
}

void block_close_handles(server_t *s)
{
    uv_close((uv_handle_t *)&s->wait_timer, NULL);
}
