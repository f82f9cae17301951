/*
 * htab.c -- intrusive chained hash table; see htab.h for the contract.
 */
#include "htab.h"

#include <stdlib.h>
#include <string.h>

#define HTAB_MIN_BUCKETS 16 /* small tables stay in one cache-friendly array */

int ordo_htab_init_keyed(ordo_htab_t *t, ordo_htab_eq_fn eq, const uint8_t key[ORDO_SIPHASH_KEY_LEN])
{
    t->buckets = calloc(HTAB_MIN_BUCKETS, sizeof *t->buckets);
    if (t->buckets == NULL)
        return -1;
    t->mask = HTAB_MIN_BUCKETS - 1;
    t->count = 0;
    t->floor = HTAB_MIN_BUCKETS;
    t->iterating = 0;
    t->eq = eq;
    memcpy(t->key, key, ORDO_SIPHASH_KEY_LEN);
    return 0;
}

int ordo_htab_init(ordo_htab_t *t, ordo_htab_eq_fn eq)
{
    uint8_t key[ORDO_SIPHASH_KEY_LEN];
    ordo_random_key(key);
    return ordo_htab_init_keyed(t, eq, key);
}

void ordo_htab_destroy(ordo_htab_t *t)
{
    free(t->buckets);
    t->buckets = NULL;
    t->count = 0;
}

uint64_t ordo_htab_hash(const ordo_htab_t *t, const void *key, size_t len)
{
    return ordo_siphash(t->key, key, len);
}

ordo_hnode_t *ordo_htab_find(const ordo_htab_t *t, uint64_t hash, const void *key, size_t len)
{
    for (ordo_hnode_t *n = t->buckets[hash & t->mask]; n != NULL; n = n->next)
        if (n->hash == hash && t->eq(n, key, len))
            return n;
    return NULL;
}

/* Move every node into a new array of nbuckets; on allocation failure keep
 * the old one (the table still works, only with longer chains). */
static void htab_resize(ordo_htab_t *t, size_t nbuckets)
{
    ordo_hnode_t **nb = calloc(nbuckets, sizeof *nb);
    if (nb == NULL)
        return;
    size_t nmask = nbuckets - 1;
    for (size_t i = 0; i <= t->mask; i++) {
        ordo_hnode_t *n = t->buckets[i];
        while (n != NULL) {
            ordo_hnode_t *next = n->next;
            n->next = nb[n->hash & nmask];
            nb[n->hash & nmask] = n;
            n = next;
        }
    }
    free(t->buckets);
    t->buckets = nb;
    t->mask = nmask;
}

void ordo_htab_insert(ordo_htab_t *t, ordo_hnode_t *n, uint64_t hash)
{
    n->hash = hash;
    n->next = t->buckets[hash & t->mask];
    t->buckets[hash & t->mask] = n;
    t->count++;
    if (t->count > t->mask + 1)
        htab_resize(t, (t->mask + 1) * 2);
}

void ordo_htab_remove(ordo_htab_t *t, ordo_hnode_t *n)
{
    ordo_hnode_t **pp = &t->buckets[n->hash & t->mask];
    while (*pp != n)
        pp = &(*pp)->next;
    *pp = n->next;
    n->next = NULL;
    t->count--;
    size_t nb = t->mask + 1;
    if (nb > t->floor && t->count < nb / 8 && t->iterating == 0)
        htab_resize(t, nb / 2);
}

void ordo_htab_set_floor(ordo_htab_t *t, size_t n)
{
    size_t floor = HTAB_MIN_BUCKETS;
    while (floor < n)
        floor *= 2;
    t->floor = floor;
    /* Shrink as far as removes would have: halve while the load factor is
     * below 1/8. */
    size_t nb = t->mask + 1;
    while (nb > t->floor && t->count < nb / 8 && t->iterating == 0)
        nb /= 2;
    if (nb != t->mask + 1)
        htab_resize(t, nb);
}

void ordo_htab_foreach(ordo_htab_t *t, void (*fn)(ordo_hnode_t *n, void *arg), void *arg)
{
    t->iterating++;
    for (size_t i = 0; i <= t->mask; i++) {
        ordo_hnode_t *n = t->buckets[i];
        while (n != NULL) {
            ordo_hnode_t *next = n->next;
            fn(n, arg);
            n = next;
        }
    }
    t->iterating--;
}
