/*
 * heap.h -- an intrusive binary min-heap with position tracking.
 *
 * Entries are ordo_heap_node_t fields embedded in the caller's structs; the
 * node holds its index in the heap's array, so an entry can be removed or
 * re-positioned from anywhere in O(log n) without a search. The heap owns
 * only its array of node pointers; the caller owns and frees its entries,
 * and must remove an entry (or destroy the heap) before freeing it.
 *
 * Ordering: less(a, b) is the caller's strict order ("a comes before b").
 * Entries that are not less than one another keep whatever places the
 * operations leave them in, so a caller that needs an order independent of
 * the history of operations (a replica, a restore) makes less() total, for
 * example by breaking ties on an id. The sift rules are fixed: an entry moves
 * up past its parent only if it is less than the parent, and down to its
 * smaller child (the left one when neither is less) only if that child is
 * less than it. Two heaps fed the same operations hold the same array.
 *
 * Memory: the array starts at cap_min entries and doubles when full; with
 * ORDO_HEAP_SHRINK it halves when under a quarter full (never below
 * cap_min), so memory follows the number of live entries; with
 * ORDO_HEAP_KEEP it never shrinks. Complexity: push, pop, remove and update
 * are O(log n); peek and len O(1).
 *
 * Not thread-safe: the owner serialises access.
 *
 * Invariants: for 0 < i < len, !less(v[i], v[(i - 1) / 2]); v[i]->slot == i;
 * a node not in any heap has slot ORDO_HEAP_NONE (after node_init, pop or
 * remove).
 */
#ifndef ORDO_HEAP_H
#define ORDO_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The slot of a node that is in no heap. */
#define ORDO_HEAP_NONE SIZE_MAX

typedef struct ordo_heap_node_s {
    size_t slot; /* index in the heap's array, ORDO_HEAP_NONE if none */
} ordo_heap_node_t;

/* Does a come strictly before b? Must be a strict weak order. */
typedef bool (*ordo_heap_less_fn)(const ordo_heap_node_t *a, const ordo_heap_node_t *b);

/* What the array does when the heap empties. */
typedef enum ordo_heap_mem_e {
    ORDO_HEAP_KEEP,   /* keep the largest array until destroy */
    ORDO_HEAP_SHRINK, /* halve it when under a quarter full */
} ordo_heap_mem_t;

typedef struct ordo_heap_s {
    ordo_heap_node_t **v;
    size_t len;     /* entries in v */
    size_t cap;     /* entries allocated in v; 0 until the first push */
    size_t cap_min; /* the first allocation, and the floor when shrinking */
    ordo_heap_mem_t mem;
    ordo_heap_less_fn less;
} ordo_heap_t;

/* ordo_heap_init() -- an empty heap ordered by less; allocates nothing
 * (the array comes with the first push). cap_min must be > 0. */
void ordo_heap_init(ordo_heap_t *h, ordo_heap_less_fn less, size_t cap_min, ordo_heap_mem_t mem);

/* ordo_heap_destroy() -- free the array; the entries are the caller's and
 * their slots are left as they were. The heap is empty afterwards. Also
 * accepts a zeroed heap that was never initialised (an owner's error path
 * may run before the heap's init). */
void ordo_heap_destroy(ordo_heap_t *h);

/* ordo_heap_node_init() -- mark n as in no heap. */
static inline void ordo_heap_node_init(ordo_heap_node_t *n) { n->slot = ORDO_HEAP_NONE; }

/* ordo_heap_linked() -- is n in a heap (pushed and not yet popped or
 * removed)? Meaningful only for nodes that were initialised or pushed. */
static inline bool ordo_heap_linked(const ordo_heap_node_t *n) { return n->slot != ORDO_HEAP_NONE; }

/* ordo_heap_len() -- the number of entries. */
static inline size_t ordo_heap_len(const ordo_heap_t *h) { return h->len; }

/* ordo_heap_peek() -- the least entry, or NULL if the heap is empty. Valid
 * until the next change to the heap. */
static inline ordo_heap_node_t *ordo_heap_peek(const ordo_heap_t *h) { return h->len ? h->v[0] : NULL; }

/* ordo_heap_push() -- add n, which must not be in a heap (its slot is
 * overwritten, so it need not be initialised). Returns 0, or -1 if the
 * array could not grow: then the heap and n are unchanged. */
int ordo_heap_push(ordo_heap_t *h, ordo_heap_node_t *n);

/* ordo_heap_pop() -- remove and return the least entry (its slot becomes
 * ORDO_HEAP_NONE), or NULL if the heap is empty. */
ordo_heap_node_t *ordo_heap_pop(ordo_heap_t *h);

/* ordo_heap_remove() -- remove n, which must be in h; its slot becomes
 * ORDO_HEAP_NONE. */
void ordo_heap_remove(ordo_heap_t *h, ordo_heap_node_t *n);

/* ordo_heap_update() -- restore the order after n's key changed (either
 * way); n must be in h. */
void ordo_heap_update(ordo_heap_t *h, ordo_heap_node_t *n);

#endif /* ORDO_HEAP_H */
