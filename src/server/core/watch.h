/*
 * watch.h -- the registry of watches: which watches a change to a key
 * concerns, found without scanning unrelated watches.
 *
 * A watch is on one key, or on a prefix. The registry keeps two hash tables
 * of groups (one per distinct watched key, one per distinct watched prefix)
 * and a radix tree of the watched prefixes. A change to key K is matched by
 * one exact lookup plus one walk of K down the tree: O(|K|) byte
 * comparisons, whatever the number and lengths of the watched prefixes.
 * What a client can register is bounded by max-watches-per-client watches
 * of at most max-name-bytes each; the tree holds each of those bytes at
 * most once, in fewer than two nodes per distinct prefix.
 *
 * Delivery (RESP frames, catching up from history, cancelling) belongs to
 * the command layer; this module only owns membership. The watch_t is
 * allocated and freed by the command layer, which embeds whatever it needs
 * behind `owner`.
 *
 * Not thread-safe: the core thread owns it.
 */
#ifndef ORDO_WATCH_H
#define ORDO_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/htab.h"

typedef struct watch_group_s watch_group_t;
typedef struct watch_pnode_s watch_pnode_t;

typedef struct watch_s {
    uint64_t id;
    void *owner;                 /* the connection; opaque here */
    char *name;                  /* key or prefix bytes (owned by the watch) */
    size_t nlen;
    bool prefix;
    bool prevval;
    int state;                   /* owner-defined (live, catching up) */
    uint64_t last_rev;           /* last revision delivered (resume point) */
    uint64_t last_sent_ms;       /* for progress events */
    /* The owner may keep the fixed start of this watch's events here (the
     * command layer keeps "$5\r\nwatch\r\n:<id>\r\n"), so that an event
     * shared by many watches is encoded once and only this part differs. */
    char head[40];
    uint8_t head_len;
    /* SNAPSHOT paging (owner-managed): the revision the snapshot is read at
     * and the last key sent, so the next page starts after it. */
    uint64_t snap_rev;
    ordo_buf_t snap_after;
    watch_group_t *group;        /* set by the registry */
    struct watch_s *gnext, *gprev;   /* in the group */
    struct watch_s *onext, *oprev;   /* in the owner's list (owner-managed) */
} watch_t;

typedef struct watch_registry_s {
    ordo_htab_t exact;
    ordo_htab_t prefixes;
    watch_pnode_t *ptree;        /* radix tree of the prefix groups (watch.c) */
    size_t pnodes;               /* its nodes, the root included */
    size_t count;                /* watches registered */
    uint64_t match_steps;        /* nodes and key bytes walked by watch_match(): its cost, for tests */
} watch_registry_t;

int watch_registry_init(watch_registry_t *r);
/* Destroys groups; the watches themselves are the owner's. */
void watch_registry_destroy(watch_registry_t *r);

void watch_add(watch_registry_t *r, watch_t *w);
void watch_remove(watch_registry_t *r, watch_t *w);

/* watch_match() -- call fn for every watch concerned by a change to key.
 * fn must not add or remove watches (collect first if it needs to). Adds
 * its work to r->match_steps (at most 2 * klen + 1 per call). */
void watch_match(const watch_registry_t *r, const void *key, size_t klen,
                 void (*fn)(watch_t *w, void *arg), void *arg);

/* watch_covers() -- does watch w concern key? */
bool watch_covers(const watch_t *w, const void *key, size_t klen);

#endif /* ORDO_WATCH_H */
