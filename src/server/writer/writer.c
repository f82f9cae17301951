/*
 * writer.c -- bringing the writer's parts up and down in order; see
 * writer.h.
 */
#include "writer.h"

#include "block.h"
#include "coord_wait.h"
#include "expire.h"
#include "queue_wait.h"
#include "turn.h"

void writer_init(server_t *s)
{
    qwait_init(s);
    coord_wait_init(s);
}

void writer_start(server_t *s)
{
    block_init(s);
    coord_wait_start(s);
    qwait_start(s);
    expire_start(s);
    turn_start(s);
}

void writer_close_handles(server_t *s)
{
    turn_close_handles(s);
    expire_close_handles(s);
    block_close_handles(s);
    coord_wait_close_handles(s);
    qwait_close_handles(s);
}

void writer_client_gone(server_t *s, waiter_t *w, ordo_list_t *observers)
{
    if (w != NULL)
        block_cancel(s, w);
    coord_wait_unobserve(s, observers, 0);
}

void writer_destroy(server_t *s)
{
    qwait_destroy(s);
    coord_wait_destroy(s);
    ordo_heap_destroy(&s->writer.block.wait_heap);
}
