/*
 * list.h -- one intrusive doubly linked list, used wherever ordo keeps
 * things in a list it unlinks from the middle (connections, parked
 * waiters, observers), instead of each file writing its own unlink.
 *
 * Entries embed an ordo_list_node_t and are found back from it with
 * ORDO_LIST_ENTRY(); the list owns nothing (the caller allocates and
 * frees entries and must remove an entry before freeing it). A list is
 * NULL-terminated at both ends, so a zero-initialised list is empty and a
 * zero-initialised node is unlinked: structures made with calloc need no
 * init call. Every operation is O(1); len is kept.
 *
 * Invariants (asserted on every operation): a node is in at most one list,
 * and node->list names it (NULL while unlinked); head->prev and
 * tail->next are NULL; len counts the nodes reachable from head.
 *
 * Not thread-safe: the owner serialises access.
 */
#ifndef ORDO_LIST_H
#define ORDO_LIST_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ordo_list_s ordo_list_t;

typedef struct ordo_list_node_s {
    struct ordo_list_node_s *prev, *next;
    ordo_list_t *list;          /* the list it is in, NULL if none */
} ordo_list_node_t;

struct ordo_list_s {
    ordo_list_node_t *head, *tail;
    size_t len;
};

/* The struct of type `type` whose member `member` is node n. */
#define ORDO_LIST_ENTRY(n, type, member) ((type *)(void *)((char *)(n) - offsetof(type, member)))

static inline bool ordo_list_empty(const ordo_list_t *l) { return l->head == NULL; }

/* Is n in list l (in any list, if l is NULL)? */
static inline bool ordo_list_linked(const ordo_list_node_t *n, const ordo_list_t *l)
{
    return l == NULL ? n->list != NULL : n->list == l;
}

/* ordo_list_push_back() / ordo_list_push_front() -- n (in no list) joins l
 * at its tail / head. */
static inline void ordo_list_push_back(ordo_list_t *l, ordo_list_node_t *n)
{
    assert(n->list == NULL);
    n->list = l;
    n->next = NULL;
    n->prev = l->tail;
    if (l->tail != NULL)
        l->tail->next = n;
    else
        l->head = n;
    l->tail = n;
    l->len++;
}

static inline void ordo_list_push_front(ordo_list_t *l, ordo_list_node_t *n)
{
    assert(n->list == NULL);
    n->list = l;
    n->prev = NULL;
    n->next = l->head;
    if (l->head != NULL)
        l->head->prev = n;
    else
        l->tail = n;
    l->head = n;
    l->len++;
}

/* ordo_list_remove() -- unlink n, which is in l. */
static inline void ordo_list_remove(ordo_list_t *l, ordo_list_node_t *n)
{
    assert(n->list == l && l->len > 0);
    if (n->prev != NULL)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next != NULL)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    l->len--;
    n->prev = n->next = NULL;
    n->list = NULL;
    assert((l->len == 0) == (l->head == NULL) && (l->head == NULL) == (l->tail == NULL));
}

/* ordo_list_pop_front() -- unlink and return the head, NULL if empty. */
static inline ordo_list_node_t *ordo_list_pop_front(ordo_list_t *l)
{
    ordo_list_node_t *n = l->head;
    if (n != NULL)
        ordo_list_remove(l, n);
    return n;
}

/* Iterate n over l's nodes, head to tail. The body must not remove n;
 * ORDO_LIST_FOREACH_SAFE (with a spare `next`) allows removing n. */
#define ORDO_LIST_FOREACH(n, l) for (ordo_list_node_t *n = (l)->head; n != NULL; n = n->next)
#define ORDO_LIST_FOREACH_SAFE(n, next, l)                                                                  \
    for (ordo_list_node_t *n = (l)->head, *next = n ? n->next : NULL; n != NULL;                            \
         n = next, next = n ? n->next : NULL)

#endif /* ORDO_LIST_H */
