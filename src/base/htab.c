/*
 * htab.c -- intrusive chained hash table; see htab.h for the contract.
 */
#include "htab.h"

#include <stdlib.h>
#include <string.h>

#define HTAB_MIN_BUCKETS 16 /* small tables stay in one cache-friendly array */
/* Old chains moved per insert or remove during a resize (an empty bucket
 * counts a tenth): two per insert finish a doubling long before the count
 * can double again. */
#define HTAB_REHASH_STEP 2

int ordo_htab_init_keyed(ordo_htab_t *t, ordo_htab_eq_fn eq, const uint8_t key[ORDO_SIPHASH_KEY_LEN])
{
    t->buckets = calloc(HTAB_MIN_BUCKETS, sizeof *t->buckets);
    if (t->buckets == NULL)
        return -1;
    t->mask = HTAB_MIN_BUCKETS - 1;
    t->old = NULL;
    t->old_mask = t->moved = 0;
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
    free(t->old);
    t->buckets = t->old = NULL;
    t->count = 0;
}

uint64_t ordo_htab_hash(const ordo_htab_t *t, const void *key, size_t len)
{
    return ordo_siphash(t->key, key, len);
}

/* The chain a node of this hash is in (see the invariant in htab.h). */
static ordo_hnode_t **chain(const ordo_htab_t *t, uint64_t hash)
{
    if (t->old != NULL && (hash & t->old_mask) >= t->moved)
        return &t->old[hash & t->old_mask];
    return &t->buckets[hash & t->mask];
}

ordo_hnode_t *ordo_htab_find(const ordo_htab_t *t, uint64_t hash, const void *key, size_t len)
{
    for (ordo_hnode_t *n = *chain(t, hash); n != NULL; n = n->next)
        if (n->hash == hash && t->eq(n, key, len))
            return n;
    return NULL;
}

/* Move old chains into the new array, `work` of them (an empty bucket
 * counts a tenth), or all that are left; ends the resize after the last. */
static void htab_rehash(ordo_htab_t *t, size_t work)
{
    size_t budget = work >= SIZE_MAX / 10 ? SIZE_MAX : work * 10; /* in tenths of a chain */
    while (t->old != NULL && budget > 0) {
        ordo_hnode_t *n = t->old[t->moved];
        t->old[t->moved] = NULL;
        size_t cost = n != NULL ? 10 : 1;
        budget = budget > cost ? budget - cost : 0;
        while (n != NULL) {
            ordo_hnode_t *next = n->next;
            n->next = t->buckets[n->hash & t->mask];
            t->buckets[n->hash & t->mask] = n;
            n = next;
        }
        if (t->moved++ == t->old_mask) {
            free(t->old);
            t->old = NULL;
            t->moved = 0;
        }
    }
}

/* Start moving every node into a new array of nbuckets (finishing a resize
 * under way first); on allocation failure keep the array (the table still
 * works, only with longer chains). */
static void htab_resize(ordo_htab_t *t, size_t nbuckets)
{
    htab_rehash(t, SIZE_MAX);
    ordo_hnode_t **nb = calloc(nbuckets, sizeof *nb);
    if (nb == NULL)
        return;
    t->old = t->buckets;
    t->old_mask = t->mask;
    t->moved = 0;
    t->buckets = nb;
    t->mask = nbuckets - 1;
}

void ordo_htab_insert(ordo_htab_t *t, ordo_hnode_t *n, uint64_t hash)
{
    ordo_hnode_t **head = chain(t, hash);
    n->hash = hash;
    n->next = *head;
    *head = n;
    t->count++;
    if (t->count > t->mask + 1)
        htab_resize(t, (t->mask + 1) * 2);
    else if (t->iterating == 0)
        htab_rehash(t, HTAB_REHASH_STEP);
}

void ordo_htab_remove(ordo_htab_t *t, ordo_hnode_t *n)
{
    ordo_hnode_t **pp = chain(t, n->hash);
    while (*pp != n)
        pp = &(*pp)->next;
    *pp = n->next;
    n->next = NULL;
    t->count--;
    if (t->iterating != 0)
        return; /* foreach's walk must see every chain where it was */
    size_t nb = t->mask + 1;
    if (nb > t->floor && t->count < nb / 8)
        htab_resize(t, nb / 2);
    else
        htab_rehash(t, HTAB_REHASH_STEP);
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
    size_t nb = t->mask + 1, all = nb + (t->old != NULL ? t->old_mask + 1 : 0);
    for (size_t i = 0; i < all; i++) {
        ordo_hnode_t *n = i < nb ? t->buckets[i] : t->old[i - nb];
        while (n != NULL) {
            ordo_hnode_t *next = n->next;
            fn(n, arg);
            n = next;
        }
    }
    t->iterating--;
}

const ordo_hnode_t *ordo_htab_next(const ordo_htab_t *t, ordo_htab_iter_t *it)
{
    if (it->n != NULL)
        it->n = it->n->next;
    size_t nb = t->mask + 1, all = nb + (t->old != NULL ? t->old_mask + 1 : 0);
    while (it->n == NULL && it->b < all) {
        it->n = it->b < nb ? t->buckets[it->b] : t->old[it->b - nb];
        it->b++;
    }
    return it->n;
}
