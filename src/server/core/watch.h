/*
 * watch.h -- the registry of watches: which watches a change to a key
 * concerns, found without scanning unrelated watches.
 *
 * A watch is on one key, or on a prefix. The registry keeps two hash tables
 * of groups (one per distinct watched key, one per distinct watched prefix)
 * and the sorted set of distinct prefix lengths in use. A change to key K is
 * matched by one exact lookup plus one lookup per distinct prefix length
 * <= |K|: the cost follows the shapes of the watches, not their number.
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
    size_t *plens;               /* distinct prefix lengths in use, ascending */
    size_t *plen_refs;           /* groups per length */
    size_t nplens, plens_cap;
    size_t count;                /* watches registered */
} watch_registry_t;

int watch_registry_init(watch_registry_t *r);
/* Destroys groups; the watches themselves are the owner's. */
void watch_registry_destroy(watch_registry_t *r);

void watch_add(watch_registry_t *r, watch_t *w);
void watch_remove(watch_registry_t *r, watch_t *w);

/* watch_match() -- call fn for every watch concerned by a change to key.
 * fn must not add or remove watches (collect first if it needs to). */
void watch_match(const watch_registry_t *r, const void *key, size_t klen,
                 void (*fn)(watch_t *w, void *arg), void *arg);

/* watch_covers() -- does watch w concern key? */
bool watch_covers(const watch_t *w, const void *key, size_t klen);

#endif /* ORDO_WATCH_H */
