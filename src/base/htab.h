/*
 * htab.h -- an intrusive hash table keyed by caller-chosen byte strings.
 *
 * The table owns only its bucket array. Entries are ordo_hnode_t fields
 * embedded in the caller's structs, so inserting allocates nothing but the
 * occasional bucket array; the caller owns and frees its entries. Each table
 * has its own secret SipHash key (siphash.h), so hostile keys cannot build
 * long chains.
 *
 * Complexity: find, insert and remove are O(1) expected. The bucket array
 * doubles when the load factor passes 1 and halves when it falls below 1/8
 * on remove, so memory follows the number of live entries; an owner whose
 * entry count swings widely can hold a floor under the array
 * (ordo_htab_set_floor()) so that each swing does not rehash it down and up
 * again. A resize is incremental: the new array takes over at once, and
 * the old one's chains move over HTAB_REHASH_STEP at a time on each insert
 * and remove outside foreach, so no single call pays O(n) (a million
 * entries would stop their caller for tens of milliseconds). A resize that
 * comes due while one is under way finishes it first.
 *
 * Not thread-safe: the owner serialises access.
 *
 * Invariant: a node of hash h is in old[h & old_mask] if old != NULL and
 * (h & old_mask) >= moved, else in buckets[h & mask]; old buckets below
 * moved are empty; count is the number of linked nodes.
 */
#ifndef ORDO_HTAB_H
#define ORDO_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "siphash.h"

typedef struct ordo_hnode_s {
    struct ordo_hnode_s *next;
    uint64_t hash;
} ordo_hnode_t;

/* Does node n hold the key key[0..len)? Called only for nodes whose hash
 * matches. */
typedef bool (*ordo_htab_eq_fn)(const ordo_hnode_t *n, const void *key, size_t len);

typedef struct ordo_htab_s {
    ordo_hnode_t **buckets;
    size_t mask;   /* buckets - 1; buckets is a power of two */
    ordo_hnode_t **old; /* during a resize: the previous array, old_mask + 1 chains */
    size_t old_mask, moved; /* old buckets below moved have moved over */
    size_t count;
    size_t floor;  /* remove does not shrink the array below this many buckets */
    int iterating; /* >0 inside foreach: remove does not shrink */
    ordo_htab_eq_fn eq;
    uint8_t key[ORDO_SIPHASH_KEY_LEN];
} ordo_htab_t;

/* ordo_htab_init() -- an empty table with a fresh random hash key.
 * Returns 0, or -1 if the first bucket array could not be allocated. */
int ordo_htab_init(ordo_htab_t *t, ordo_htab_eq_fn eq);

/* ordo_htab_init_keyed() -- the same with the caller's hash key (made once
 * with ordo_random_key() by an owner that builds many short-lived tables,
 * so each does not cost a getrandom() call). */
int ordo_htab_init_keyed(ordo_htab_t *t, ordo_htab_eq_fn eq, const uint8_t key[ORDO_SIPHASH_KEY_LEN]);

/* ordo_htab_destroy() -- free the bucket array; entries are the caller's. */
void ordo_htab_destroy(ordo_htab_t *t);

/* ordo_htab_hash() -- the table's hash of key[0..len). */
uint64_t ordo_htab_hash(const ordo_htab_t *t, const void *key, size_t len);

/* ordo_htab_find() -- the node holding key (hash from ordo_htab_hash()), or
 * NULL. */
ordo_hnode_t *ordo_htab_find(const ordo_htab_t *t, uint64_t hash, const void *key, size_t len);

/* ordo_htab_insert() -- link n (which must not hold a key already present)
 * under hash. Never fails: if growing the array fails the table stays at its
 * size and chains lengthen. */
void ordo_htab_insert(ordo_htab_t *t, ordo_hnode_t *n, uint64_t hash);

/* ordo_htab_remove() -- unlink n, which must be in the table. */
void ordo_htab_remove(ordo_htab_t *t, ordo_hnode_t *n);

/* ordo_htab_set_floor() -- from now on, remove does not shrink the bucket
 * array below what n entries need (the power of two >= n; 0: no floor
 * beyond the minimum). Lowering the floor shrinks the array at once if the
 * load factor allows, as remove would have (not inside foreach). */
void ordo_htab_set_floor(ordo_htab_t *t, size_t n);

/* Iteration over every node, in no particular order; the callback must not
 * insert, but may remove the node it is given (and free it). */
void ordo_htab_foreach(ordo_htab_t *t, void (*fn)(ordo_hnode_t *n, void *arg), void *arg);

/* A read-only walk over every node, in no particular order, that the
 * caller may stop at any point: start with ORDO_HTAB_ITER_INIT, call
 * ordo_htab_next() until it returns NULL. Nothing may be inserted or
 * removed meanwhile. */
typedef struct ordo_htab_iter_s {
    size_t b;                /* the next bucket to read (old ones after the new) */
    const ordo_hnode_t *n;   /* the node returned last */
} ordo_htab_iter_t;
#define ORDO_HTAB_ITER_INIT {0, NULL}
const ordo_hnode_t *ordo_htab_next(const ordo_htab_t *t, ordo_htab_iter_t *it);

#endif /* ORDO_HTAB_H */
